//! Networks end to end against the real Docker engine: a box's own network
//! goes after its containers; networks sandboxctl does not manage, or that an
//! unmanaged container holds, are never touched; containers whose namespaces
//! an unmanaged container joined are blocked; and hostile label values never
//! reach a terminal raw.
//!
//! Every test has its own `Sandbox` scope and runs the built binary through
//! `sbx.cli()` with `--format json`, read through the typed mirror in
//! `support::report`; the engine's real state is checked afterwards through
//! the harness. Plans and reports are snapshotted with IDs, names and times
//! redacted.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use crate::support::assert::{assert_honest, assert_terminal_safe, goal};
use crate::support::docker::{
    Container, ContainerSpec, NetworkSpec, NetworkedBox, Run, Sandbox, VolumeSpec,
};
use crate::support::proxy::Proxy;
use crate::support::report::{Kind, Outcome, Reason};

fn set<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> BTreeSet<String> {
    items.into_iter().map(|s| s.as_ref().to_string()).collect()
}

/// `doc` as JSON with every string (keys too) rewritten by `subs` (longest
/// first: full IDs before their short forms), the scope value replaced by
/// `[scope]`, and what changes from run to run blanked (times, digests, the
/// engine's `ca-sbx` images, which other tests add): stable across runs, for
/// snapshots.
fn redacted(sbx: &Sandbox, doc: &impl Serialize, subs: &[(String, String)]) -> Value {
    let mut subs: Vec<(String, String)> = subs
        .iter()
        .flat_map(|(from, to)| {
            let short = (from.len() == 64).then(|| (from[..12].to_string(), format!("{to}:short")));
            std::iter::once((from.clone(), to.clone())).chain(short)
        })
        .collect();
    subs.push((sbx.scope_value().to_string(), "[scope]".to_string()));
    subs.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
    fn walk(v: Value, subs: &[(String, String)]) -> Value {
        let fix = |s: String| {
            subs.iter()
                .fold(s, |s, (from, to)| s.replace(from.as_str(), to))
        };
        match v {
            Value::String(s) => Value::String(fix(s)),
            Value::Array(a) => Value::Array(a.into_iter().map(|x| walk(x, subs)).collect()),
            Value::Object(o) => Value::Object(
                o.into_iter()
                    .map(|(k, x)| (fix(k), walk(x, subs)))
                    .collect(),
            ),
            other => other,
        }
    }
    fn blank(v: &mut Value) {
        match v {
            Value::Array(a) => a.iter_mut().for_each(blank),
            Value::Object(o) => {
                for (k, x) in o.iter_mut() {
                    match k.as_str() {
                        "now" | "createdAt" => *x = Value::from("[time]"),
                        "fingerprint" => *x = Value::from("[fingerprint]"),
                        "endpoint" => *x = Value::from("[endpoint]"),
                        "basis" => {
                            if let Value::Object(b) = x {
                                b.values_mut().for_each(|d| *d = Value::from("[digest]"));
                            }
                        }
                        "retained" => *x = Value::from("[images]"),
                        "summary" => {
                            if let Some((head, _)) =
                                x.as_str().and_then(|s| s.split_once("retain "))
                            {
                                *x = Value::from(format!("{head}retain [images]."));
                            }
                        }
                        _ => blank(x),
                    }
                }
            }
            _ => {}
        }
    }
    let mut v = walk(serde_json::to_value(doc).expect("serializes"), &subs);
    blank(&mut v);
    v
}

/// Snapshot names and placeholders for a networked box's three objects.
fn box_subs(b: &NetworkedBox) -> Vec<(String, String)> {
    vec![
        (b.container.id.clone(), format!("[container {}]", b.box_id)),
        (b.network.id.clone(), format!("[network {}]", b.box_id)),
    ]
}

/// A state file for `sbx`'s scope that declares nothing.
fn nothing_declared(sbx: &Sandbox) -> crate::support::cli::Cli {
    sbx.cli().state_toml("")
}

// ----- a box's own network --------------------------------------------------------

/// A box with its own labeled network (two containers on it, one volume) is
/// torn down completely: the plan's network step waits for both container
/// steps, the engine accepts the network's removal (it refuses one with
/// endpoints, so the containers were gone), and the report names it under
/// `removed.networks`.
trial!(a_box_with_its_own_network_is_torn_down_completely);
async fn a_box_with_its_own_network_is_torn_down_completely() {
    let sbx = Sandbox::new("net-box").await;
    let b = sbx.add_box_with_network("nb", Run::Running).await;
    let second = sbx
        .container(
            ContainerSpec::new()
                .in_box("nb")
                .name(sbx.unique("nb-2"))
                .network(&b.network.name)
                .run(Run::Exited),
        )
        .await;
    let mut subs = box_subs(&b);
    subs.push((second.id.clone(), "[container nb-2]".into()));
    let proxy = Proxy::start();
    let cli = nothing_declared(&sbx).docker_host(&proxy.docker_host());

    let out = cli.run_with(["plan", "--format", "json"]);
    out.success();
    let plan = out.plan();
    let plan_json = out.json();
    let net = plan.step(&b.network.name);
    assert_eq!(net.kind, Kind::Network);
    assert_eq!(net.id.as_deref(), Some(b.network.id.as_str()));
    let mut containers = vec![
        plan.step(&b.container.name).step,
        plan.step(&second.name).step,
    ];
    containers.sort_unstable();
    assert_eq!(net.waits_for, containers, "{plan:#?}");
    assert_eq!(
        plan.step(&b.volume).waits_for,
        vec![plan.step(&b.container.name).step]
    );
    insta::with_settings!({snapshot_path => "../snapshots"}, {
        insta::assert_json_snapshot!("box_with_network_plan", redacted(&sbx, &plan_json, &subs));
    });

    let out = cli.run_with(["apply", "--format", "json"]);
    out.success();
    let report = out.report();
    let report_json = out.json();
    assert!(report.is_clean(), "{report:#?}");
    assert_eq!(report.removed.names(Kind::Network), set([&b.network.name]));
    assert_eq!(report.removed.networks[0].outcome, Outcome::Removed);
    assert_eq!(
        report.removed.ids(Kind::Container),
        set([&b.container.id, &second.id])
    );
    assert_eq!(report.removed.names(Kind::Volume), set([&b.volume]));
    insta::with_settings!({snapshot_path => "../snapshots"}, {
        insta::assert_json_snapshot!(
            "box_with_network_report",
            redacted(&sbx, &report_json, &subs)
        );
    });
    // The engine: all gone, and it took the network only after both containers.
    let seen = proxy.seen();
    let delete = |path: String| {
        seen.iter()
            .find(|s| s.method == "DELETE" && s.path.starts_with(&path))
            .unwrap_or_else(|| panic!("no DELETE {path}\n{}", proxy.dump()))
    };
    let network = delete(format!("/networks/{}", b.network.id));
    assert_eq!(network.status, Some(204), "{}", proxy.dump());
    for c in [&b.container, &second] {
        let c = delete(format!("/containers/{}", c.id));
        assert!(c.seq < network.seq, "{}", proxy.dump());
    }
    assert!(!sbx.network_exists(&b.network.id).await);
    assert!(!sbx.container_exists(&b.container.id).await);
    assert!(!sbx.volume_exists(&b.volume).await);
    assert_eq!(sbx.remaining().await, Default::default());
    assert_honest(&sbx, &goal(&[]), &out, &report).await;
}

/// A network without `ca.sandbox=1` (scope label only) with a managed leaked
/// container on it: the container goes, the network stays, and the run converges.
trial!(an_unlabeled_network_with_a_managed_container_survives);
async fn an_unlabeled_network_with_a_managed_container_survives() {
    let sbx = Sandbox::new("net-unlabeled").await;
    let network = sbx.network(NetworkSpec::new()).await;
    let leaked = sbx
        .container(ContainerSpec::new().managed().network(&network.name))
        .await;
    let cli = nothing_declared(&sbx);

    let plan = cli.run_with(["plan", "--format", "json"]).plan();
    assert_eq!(plan.step_names(Kind::Container), set([&leaked.name]));
    assert!(plan.step_names(Kind::Network).is_empty(), "{plan:#?}");
    let out = cli.run_with(["apply", "--format", "json"]);
    out.success();
    let report = out.report();
    assert!(report.is_clean(), "{report:#?}");
    assert_eq!(report.removed.ids(Kind::Container), set([&leaked.id]));
    assert!(report.removed.networks.is_empty(), "{report:#?}");
    assert!(!sbx.container_exists(&leaked.id).await);
    assert!(sbx.network_exists(&network.id).await, "never touched");
    assert_honest(&sbx, &goal(&[]), &out, &report).await;
}

/// A managed network an unmanaged container is attached to is blocked and
/// named with its holder; apply exits 1; network and holder stay.
trial!(a_labeled_network_held_by_an_unmanaged_container_is_blocked);
async fn a_labeled_network_held_by_an_unmanaged_container_is_blocked() {
    let sbx = Sandbox::new("net-held").await;
    let network = sbx.network(NetworkSpec::new().in_box("gone")).await;
    let holder = sbx
        .container(ContainerSpec::new().network(&network.name))
        .await;
    let cli = nothing_declared(&sbx);

    let plan = cli.run_with(["plan", "--format", "json"]).plan();
    assert!(plan.steps.is_empty(), "{plan:#?}");
    let blocked = plan.blocked(&network.name);
    assert_eq!(blocked.kind, Kind::Network);
    match &blocked.why {
        Reason::HeldByUnmanaged { holders, .. } => {
            assert_eq!(holders.len(), 1, "{holders:?}");
            assert_eq!(holders[0].id.as_deref(), Some(holder.id.as_str()));
            assert_eq!(holders[0].name, holder.name);
            assert_eq!(holders[0].how.as_deref(), Some("attached"));
        }
        other => panic!("{other:?}"),
    }
    let out = cli.run_with(["apply", "--format", "json"]);
    out.expect_code(1);
    let report = out.report();
    assert!(!report.converged);
    let left = report.leftover(Kind::Network, &network.name);
    assert_eq!(left.reason, blocked.why);
    assert!(left.reason.text().contains(&holder.name), "{left:?}");
    assert!(report.failures.is_empty(), "never attempted: {report:#?}");
    assert!(sbx.network_exists(&network.id).await);
    assert_eq!(
        sbx.container_state(&holder.id).await.as_deref(),
        Some("running")
    );
    assert_honest(&sbx, &goal(&[]), &out, &report).await;
}

/// Managed containers on `bridge`, `host` and `none` are pruned; the three
/// predefined networks (which carry no labels) are never touched.
trial!(predefined_networks_survive_a_prune_of_their_containers);
async fn predefined_networks_survive_a_prune_of_their_containers() {
    let sbx = Sandbox::new("net-predefined").await;
    let predefined = ["bridge", "host", "none"];
    let mut ids = Vec::new();
    for name in predefined {
        let n = sbx
            .docker()
            .inspect_network(
                name,
                None::<bollard::query_parameters::InspectNetworkOptions>,
            )
            .await
            .unwrap_or_else(|e| panic!("inspect {name}: {e}"));
        ids.push(n.id.unwrap());
    }
    let mut on = Vec::new();
    for name in predefined {
        on.push(
            sbx.container(ContainerSpec::new().managed().network(name))
                .await,
        );
    }

    let out = sbx
        .cli()
        .run_with(["destroy", "--prune", "--format", "json"]);
    out.success();
    let report = out.report();
    assert!(report.is_clean(), "{report:#?}");
    assert_eq!(
        report.removed.ids(Kind::Container),
        set(on.iter().map(|c| &c.id))
    );
    assert!(report.removed.networks.is_empty(), "{report:#?}");
    for (name, id) in predefined.iter().zip(&ids) {
        assert!(sbx.network_exists(id).await, "{name} was removed");
    }
    for c in &on {
        assert!(!sbx.container_exists(&c.id).await);
    }
}

// ----- shared namespaces --------------------------------------------------------------

/// A managed container whose namespace (`ns`: network, seen in the listing;
/// pid, seen only by inspection) an unmanaged container joined: blocked,
/// named with the joiner, exit 1, both intact.
async fn joined_container_is_blocked(test: &str, pid: bool) {
    let sbx = Sandbox::new(test).await;
    let target = sbx.container(ContainerSpec::new().in_box("joined")).await;
    let other = sbx.leaked_container(Run::Exited).await;
    let joiner = sbx
        .container(if pid {
            ContainerSpec::new().joins_pid_of(&target.id)
        } else {
            ContainerSpec::new().joins_network_of(&target.id)
        })
        .await;
    let how = if pid {
        "joins its pid namespace"
    } else {
        "joins its network namespace"
    };
    let cli = nothing_declared(&sbx);

    let plan = cli.run_with(["plan", "--format", "json"]).plan();
    assert_eq!(plan.step_names(Kind::Container), set([&other.name]));
    let blocked = plan.blocked(&target.name);
    match &blocked.why {
        Reason::HeldByUnmanaged { holders, .. } => {
            let h: Vec<(&str, Option<&str>)> = holders
                .iter()
                .map(|h| (h.name.as_str(), h.how.as_deref()))
                .collect();
            assert_eq!(h, vec![(joiner.name.as_str(), Some(how))]);
        }
        other => panic!("{other:?}"),
    }
    let out = cli.run_with(["apply", "--format", "json"]);
    out.expect_code(1);
    let report = out.report();
    assert!(!report.converged);
    assert_eq!(report.removed.ids(Kind::Container), set([&other.id]));
    let left = report.leftover(Kind::Container, &target.name);
    assert!(
        matches!(&left.reason, Reason::HeldByUnmanaged { holders, .. } if holders.iter().any(|h| h.name == joiner.name)),
        "{left:?}"
    );
    for c in [&target, &joiner] {
        assert_eq!(
            sbx.container_state(&c.id).await.as_deref(),
            Some("running"),
            "{}",
            c.name
        );
    }
    assert_honest(&sbx, &goal(&[]), &out, &report).await;
}

trial!(a_container_whose_network_namespace_an_unmanaged_container_joined_is_blocked);
async fn a_container_whose_network_namespace_an_unmanaged_container_joined_is_blocked() {
    joined_container_is_blocked("net-joined", false).await;
}

trial!(a_container_whose_pid_namespace_an_unmanaged_container_joined_is_blocked);
async fn a_container_whose_pid_namespace_an_unmanaged_container_joined_is_blocked() {
    joined_container_is_blocked("pid-joined", true).await;
}

// ----- destroy -------------------------------------------------------------------------

/// `destroy ID` removes the box's network with its container and volume, and
/// `destroy ID --keep-volume` still removes the network; other boxes stay.
trial!(destroy_removes_the_boxs_network_also_with_keep_volume);
async fn destroy_removes_the_boxs_network_also_with_keep_volume() {
    let sbx = Sandbox::new("net-destroy").await;
    let (a, b, c) = tokio::join!(
        sbx.add_box_with_network("a", Run::Running),
        sbx.add_box_with_network("b", Run::Exited),
        sbx.add_box_with_network("c", Run::Running),
    );
    let exists = |x: &NetworkedBox| {
        let (cid, vol, nid) = (
            x.container.id.clone(),
            x.volume.clone(),
            x.network.id.clone(),
        );
        let sbx = &sbx;
        async move {
            (
                sbx.container_exists(&cid).await,
                sbx.volume_exists(&vol).await,
                sbx.network_exists(&nid).await,
            )
        }
    };

    let out = sbx.cli().run_with(["destroy", "a", "--format", "json"]);
    out.success();
    let report = out.report();
    assert!(report.is_clean(), "{report:#?}");
    assert_eq!(report.removed.ids(Kind::Network), set([&a.network.id]));
    assert_eq!(report.removed.networks[0].box_id.as_deref(), Some("a"));
    let kept: BTreeSet<String> = report
        .kept
        .networks
        .iter()
        .map(|n| n.name.clone())
        .collect();
    assert_eq!(kept, set([&b.network.name, &c.network.name]));
    assert_eq!(exists(&a).await, (false, false, false));
    assert_eq!(exists(&b).await, (true, true, true));

    let out = sbx
        .cli()
        .run_with(["destroy", "b", "--keep-volume", "--format", "json"]);
    out.success();
    let report = out.report();
    assert!(report.is_clean(), "{report:#?}");
    assert_eq!(report.removed.ids(Kind::Network), set([&b.network.id]));
    assert_eq!(report.removed.ids(Kind::Container), set([&b.container.id]));
    assert!(report.removed.volumes.is_empty(), "{report:#?}");
    let kept = report
        .kept
        .volumes
        .iter()
        .find(|v| v.name == b.volume)
        .unwrap_or_else(|| panic!("{report:#?}"));
    assert!(
        matches!(kept.why, Reason::KeepVolumeFlag { .. }),
        "{kept:?}"
    );
    assert_eq!(exists(&b).await, (false, true, false));
    assert_eq!(exists(&c).await, (true, true, true));
}

// ----- hostile labels ----------------------------------------------------------------------

/// Box IDs no terminal should see raw: an ANSI color sequence, a newline that
/// forges a plan line, a right-to-left override, and 5,000 characters.
fn hostile_box_ids() -> Vec<(&'static str, String)> {
    vec![
        ("ansi", "\x1b[31mRED\x1b[0m".to_string()),
        (
            "newline",
            "x\n  9.  container  FORGED (000000000000)  no box  running  leaked".to_string(),
        ),
        ("bidi", "abc\u{202e}gpj.exe".to_string()),
        ("long", "L".repeat(5000)),
    ]
}

/// One container and one volume per hostile box ID.
async fn hostile_objects(sbx: &Sandbox) -> Vec<(String, Container, String)> {
    let mut made = Vec::new();
    for (tag, id) in hostile_box_ids() {
        let c = sbx
            .container(ContainerSpec::new().in_box(&id).name(sbx.unique(tag)))
            .await;
        let v = sbx
            .volume(
                VolumeSpec::new()
                    .in_box(&id)
                    .name(sbx.unique(&format!("{tag}-data"))),
            )
            .await;
        made.push((id, c, v));
    }
    made
}

#[track_caller]
fn assert_safe_human(out: &crate::support::cli::Output) {
    assert_terminal_safe(
        &format!("stdout of `{}`", out.command),
        &out.stdout_bytes,
        500,
    );
    assert_terminal_safe(
        &format!("stderr of `{}`", out.command),
        &out.stderr_bytes,
        500,
    );
    for line in out.stdout.lines().chain(out.stderr.lines()) {
        assert!(
            !line.trim_start().starts_with("9.  container  FORGED"),
            "a label value forged a line: {line:?}\n{}",
            out.dump()
        );
    }
}

/// Hostile `ca.sandbox.id` values on real containers and volumes: `plan` and
/// `apply` in human format write no raw control byte, no bidi override, no
/// forged line and no line over 500 characters; the JSON keeps every value exactly.
trial!(hostile_label_values_never_reach_the_terminal_raw);
async fn hostile_label_values_never_reach_the_terminal_raw() {
    let sbx = Sandbox::new("net-hostile").await;
    let made = hostile_objects(&sbx).await;
    let cli = nothing_declared(&sbx);

    let out = cli.run_with(["plan"]);
    out.success();
    assert_safe_human(&out);
    assert!(
        out.stdout.contains("\\u{1b}[31mRED") || out.stdout.contains("\\x1b[31mRED"),
        "the escape is shown, escaped\n{}",
        out.dump()
    );
    let plan = cli.run_with(["plan", "--format", "json"]).plan();
    for (id, c, v) in &made {
        assert_eq!(plan.step(&c.name).box_id.as_deref(), Some(id.as_str()));
        assert_eq!(plan.step(v).box_id.as_deref(), Some(id.as_str()));
        assert!(
            matches!(&plan.step(&c.name).why, Reason::BoxNotDeclared { box_id, .. } if box_id == id),
            "{:?}",
            plan.step(&c.name)
        );
    }
    let out = cli.run_with(["inventory"]);
    out.success();
    assert_safe_human(&out);

    let out = cli.run_with(["apply"]);
    out.success();
    assert_safe_human(&out);
    for (_, c, v) in &made {
        assert!(!sbx.container_exists(&c.id).await);
        assert!(!sbx.volume_exists(v).await);
    }

    // The same again, applied with JSON output: the report keeps the values exactly.
    let made = hostile_objects(&sbx).await;
    let out = cli.run_with(["apply", "--format", "json"]);
    out.success();
    let report = out.report();
    assert!(report.is_clean(), "{report:#?}");
    for (id, c, v) in &made {
        let gone = |kind: Kind, name: &str| {
            report
                .removed
                .of(kind)
                .iter()
                .find(|g| g.name == name)
                .unwrap_or_else(|| panic!("{name} not removed: {report:#?}"))
                .box_id
                .clone()
        };
        assert_eq!(gone(Kind::Container, &c.name).as_deref(), Some(id.as_str()));
        assert_eq!(gone(Kind::Volume, v).as_deref(), Some(id.as_str()));
    }
    assert_honest(&sbx, &goal(&[]), &out, &report).await;
}

/// An engine error quoting a hostile value (the proxy answers a removal with
/// one): the human report escapes it too.
trial!(hostile_engine_errors_never_reach_the_terminal_raw);
async fn hostile_engine_errors_never_reach_the_terminal_raw() {
    let sbx = Sandbox::new("net-hostile-error").await;
    let b = sbx.add_box_with_network("err", Run::Exited).await;
    let proxy = Proxy::start();
    proxy
        .on("DELETE", &format!("/networks/{}", b.network.id))
        .respond(
            500,
            &format!(
                "\x1b[2J\x1b[31mboom\r\n  9.  container  FORGED\u{202e} {}",
                "E".repeat(3000)
            ),
        );
    let out = nothing_declared(&sbx)
        .docker_host(&proxy.docker_host())
        .run_with(["apply"]);
    out.expect_code(1);
    assert_safe_human(&out);
    assert!(out.stdout.contains("NOT converged"), "{}", out.dump());
    assert!(sbx.network_exists(&b.network.id).await);
}

// ----- cost of inspecting unmanaged containers ------------------------------------------------

/// How long `plan` takes when it removes a container (so it inspects every
/// unmanaged container on the engine for pid/ipc joins), with this test's 50
/// extra unmanaged running containers absent and present. Prints the numbers;
/// fails only if 50 more make a plan slower than 10 s.
trial!(inspecting_unmanaged_containers_costs_little);
async fn inspecting_unmanaged_containers_costs_little() {
    let sbx = Sandbox::new("net-inspect-cost").await;
    sbx.leaked_container(Run::Exited).await;
    let cli = nothing_declared(&sbx);
    let unmanaged_on_engine = || async {
        let all = sbx
            .docker()
            .list_containers(Some(
                bollard::query_parameters::ListContainersOptionsBuilder::new()
                    .all(true)
                    .build(),
            ))
            .await
            .unwrap();
        all.len() - 1
    };
    // The same scope narrowed to nothing: a plan that removes nothing inspects nothing.
    let idle = nothing_declared(&sbx).args(["--scope", "ca.sandbox.test.none=none"]);
    let time_plan = |cli: &crate::support::cli::Cli, steps: usize| {
        let mut runs: Vec<Duration> = (0..5)
            .map(|_| {
                let started = Instant::now();
                let out = cli.run_with(["plan", "--format", "json"]);
                out.success();
                assert_eq!(out.plan().steps.len(), steps);
                started.elapsed()
            })
            .collect();
        runs.sort();
        runs[runs.len() / 2]
    };

    let before = unmanaged_on_engine().await;
    let without = time_plan(&cli, 1);
    let idle_without = time_plan(&idle, 0);
    let mut extra: Vec<Container> = Vec::new();
    for chunk in 0..5 {
        let made = futures_util::future::join_all((0..10).map(|i| {
            sbx.container(ContainerSpec::new().name(sbx.unique(&format!("u{chunk}-{i}"))))
        }))
        .await;
        extra.extend(made);
    }
    let after = unmanaged_on_engine().await;
    let with = time_plan(&cli, 1);
    let idle_with = time_plan(&idle, 0);
    eprintln!(
        "plan (median of 5): removing one container {without:?} with {before} other containers on the engine, {with:?} with {after} ({} more unmanaged, running); removing nothing (no inspection) {idle_without:?} and {idle_with:?}",
        extra.len()
    );
    assert!(with < Duration::from_secs(10), "{with:?}");
}
