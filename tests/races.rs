//! Races against the real engine: two `apply` runs on one scope at once, and
//! saved plans that the world moved under (stale) or did not (fresh).
//!
//! Every run goes through a fault-injection proxy that forwards everything, so
//! that the test can see exactly which removals each process sent.

use std::collections::BTreeSet;
use std::time::Duration;

use bollard::query_parameters::RemoveContainerOptionsBuilder;
use futures_util::future::join_all;
use serde_json::Value;

use crate::support::assert::{assert_honest, goal, left_to_remove};
use crate::support::cli::Cli;
use crate::support::docker::{ContainerSpec, Run, Sandbox, SandboxBox};
use crate::support::proxy::Proxy;
use crate::support::report::{read_plan, Kind, Plan, Reason};

/// A state file for `sbx`'s scope declaring `boxes`.
fn state(sbx: &Sandbox, boxes: &[&str]) -> String {
    let mut text = sbx.scope_toml();
    for b in boxes {
        text.push_str(&format!("\n[[box]]\nid = \"{b}\"\n"));
    }
    text
}

fn cli(sbx: &Sandbox, proxy: &Proxy, boxes: &[&str]) -> Cli {
    Cli::new()
        .docker_host(&proxy.docker_host())
        .state_toml(&state(sbx, boxes))
        .json()
        .deadline(Duration::from_secs(90))
}

/// The paths sandboxctl removes `b` by: its container and its volume.
fn removal_paths(b: &SandboxBox) -> [String; 2] {
    [
        format!("/containers/{}", b.container.id),
        format!("/volumes/{}", b.volume),
    ]
}

/// The path of a DELETE without its query string.
fn delete_path(path: &str) -> String {
    path.split('?').next().unwrap_or(path).to_string()
}

trial!(two_concurrent_applies_both_converge_without_false_failures);
async fn two_concurrent_applies_both_converge_without_false_failures() {
    let sbx = Sandbox::new("race-two-applies").await;
    let other = Sandbox::new("race-other-scope").await;
    let ids: Vec<String> = (0..10).map(|i| format!("b{i}")).collect();
    let boxes: Vec<SandboxBox> = join_all(ids.iter().map(|id| sbx.add_box(id, Run::Running))).await;
    let (keeper, decoys, foreign) = tokio::join!(
        sbx.add_box("keeper", Run::Running),
        sbx.decoys(Run::Created),
        other.add_box("b0", Run::Running),
    );
    let images = sbx.ca_sbx_images().await;
    let planned: BTreeSet<String> = boxes.iter().flat_map(removal_paths).collect();

    let (p1, p2) = (Proxy::start(), Proxy::start());
    let (c1, c2) = (cli(&sbx, &p1, &["keeper"]), cli(&sbx, &p2, &["keeper"]));
    let r1 = c1.spawn_with(["apply"]);
    let r2 = c2.spawn_with(["apply"]);
    let (o1, o2) = (r1.wait(), r2.wait());

    for (out, proxy) in [(&o1, &p1), (&o2, &p2)] {
        out.expect_code(0);
        let report = out.report();
        assert!(report.is_clean(), "{}", out.dump());
        assert_honest(&sbx, &goal(&["keeper"]), out, &report).await;
        // Each process removed only planned objects, each at most once.
        let deletes: Vec<String> = proxy
            .requests("DELETE", "")
            .iter()
            .map(|s| delete_path(&s.path))
            .collect();
        let unique: BTreeSet<String> = deletes.iter().cloned().collect();
        assert_eq!(
            unique.len(),
            deletes.len(),
            "a removal was sent twice\n{}",
            proxy.dump()
        );
        assert!(
            unique.is_subset(&planned),
            "removed something outside the plan: {:?}",
            unique.difference(&planned).collect::<Vec<_>>()
        );
        // Reported removals are planned objects too.
        let removed: BTreeSet<String> = report
            .removed
            .names(Kind::Container)
            .into_iter()
            .chain(report.removed.names(Kind::Volume))
            .collect();
        let expected: BTreeSet<String> = boxes
            .iter()
            .flat_map(|b| [b.container.name.clone(), b.volume.clone()])
            .collect();
        assert!(removed.is_subset(&expected), "{}", out.dump());
    }
    // How the race went, for the log: who answered 404/409 to whom.
    for (n, proxy) in [(1, &p1), (2, &p2)] {
        let statuses: Vec<Option<u16>> = proxy
            .requests("DELETE", "")
            .iter()
            .map(|s| s.status)
            .collect();
        eprintln!("apply #{n}: DELETE answers {statuses:?}");
    }
    let both: BTreeSet<String> = p1
        .requests("DELETE", "")
        .iter()
        .chain(p2.requests("DELETE", "").iter())
        .map(|s| delete_path(&s.path))
        .collect();
    assert_eq!(both, planned, "together they removed exactly the plan");

    // The scope holds exactly the declared box and the decoys; nothing else moved.
    for b in &boxes {
        assert!(!sbx.container_exists(&b.container.id).await);
        assert!(!sbx.volume_exists(&b.volume).await);
    }
    assert!(sbx.container_exists(&keeper.container.id).await);
    assert!(sbx.volume_exists(&keeper.volume).await);
    for c in &decoys.containers {
        assert!(
            sbx.container_exists(&c.id).await,
            "decoy {} survives",
            c.name
        );
    }
    for v in &decoys.volumes {
        assert!(sbx.volume_exists(v).await, "decoy volume {v} survives");
    }
    assert!(other.container_exists(&foreign.container.id).await);
    assert!(other.volume_exists(&foreign.volume).await);
    assert_eq!(
        sbx.ca_sbx_images().await,
        images,
        "images are never removed"
    );
}

/// Runs `plan --out plan.json`; returns the saved plan.
fn save_plan(cli: &Cli) -> (std::path::PathBuf, Plan) {
    let path = cli.dir().join("plan.json");
    let out = cli.run_with(["plan".as_ref(), "--out".as_ref(), path.as_os_str()]);
    out.expect_code(0);
    let saved = read_plan(&cli.read("plan.json"));
    assert_eq!(saved.schema_version, 2);
    assert!(saved.fingerprint.starts_with("sha256:"), "{saved:#?}");
    (path, saved)
}

/// The stale-plan refusal: exit 1, no DELETE sent, the explanation names `changes`
/// and says nothing was removed.
async fn assert_refused_as_stale(
    sbx: &Sandbox,
    cli: &Cli,
    proxy: &Proxy,
    path: &std::path::Path,
    changes: &[String],
) {
    let before = sbx.remaining().await;
    let deletes_before = proxy.count("DELETE", "");
    let out = cli.run_with(["apply".as_ref(), path.as_os_str()]);
    out.expect_code(1);
    let report = out.report();
    assert!(!report.converged);
    let f = report.only_failure();
    for says in ["changed since it was made", "nothing was removed"] {
        assert!(f.error.contains(says), "{}", out.dump());
        assert!(out.stderr.contains(says), "{}", out.dump());
    }
    for change in changes {
        assert!(
            f.error.contains(change.as_str()),
            "explains {change:?}: {}",
            out.dump()
        );
    }
    assert!(report.removed.is_empty(), "{}", out.dump());
    assert_eq!(
        proxy.count("DELETE", ""),
        deletes_before,
        "touched something\n{}",
        proxy.dump()
    );
    assert_eq!(sbx.remaining().await, before, "nothing may be removed");
    assert_honest(sbx, &goal(&["alpha"]), &out, &report).await;
}

trial!(stale_saved_plan_with_a_new_leak_touches_nothing);
async fn stale_saved_plan_with_a_new_leak_touches_nothing() {
    let sbx = Sandbox::new("race-stale-leak").await;
    let (_alpha, beta) = tokio::join!(
        sbx.add_box("alpha", Run::Running),
        sbx.add_box("beta", Run::Exited)
    );
    let proxy = Proxy::start();
    let cli = cli(&sbx, &proxy, &["alpha"]);
    let (path, saved) = save_plan(&cli);
    let steps: Vec<&str> = saved.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        steps,
        vec![beta.container.name.as_str(), beta.volume.as_str()]
    );

    let leak = sbx.leaked_container(Run::Created).await;
    assert_refused_as_stale(
        &sbx,
        &cli,
        &proxy,
        &path,
        &[format!("container/{} is new", leak.id)],
    )
    .await;
    assert!(sbx.container_exists(&beta.container.id).await);
    assert!(sbx.container_exists(&leak.id).await);
}

trial!(stale_saved_plan_spares_a_box_recreated_under_the_same_name);
async fn stale_saved_plan_spares_a_box_recreated_under_the_same_name() {
    let sbx = Sandbox::new("race-stale-recreated").await;
    let (_alpha, beta) = tokio::join!(
        sbx.add_box("alpha", Run::Running),
        sbx.add_box("beta", Run::Running)
    );
    let proxy = Proxy::start();
    let cli = cli(&sbx, &proxy, &["alpha"]);
    let (path, saved) = save_plan(&cli);
    assert_eq!(
        saved.steps[0].id.as_deref(),
        Some(beta.container.id.as_str())
    );

    // Someone removes box beta's container and recreates it: same name, new ID.
    let options = RemoveContainerOptionsBuilder::new().force(true).build();
    sbx.docker()
        .remove_container(&beta.container.id, Some(options))
        .await
        .expect("remove beta's container");
    let again = sbx
        .container(
            ContainerSpec::new()
                .in_box("beta")
                .name(beta.container.name.clone())
                .volume(&beta.volume),
        )
        .await;
    assert_eq!(again.name, beta.container.name);
    assert_ne!(again.id, beta.container.id);

    assert_refused_as_stale(
        &sbx,
        &cli,
        &proxy,
        &path,
        &[
            format!("container/{} is gone", beta.container.id),
            format!("container/{} is new", again.id),
        ],
    )
    .await;
    assert!(
        sbx.container_exists(&again.id).await,
        "the recreated box survives"
    );
    assert!(sbx.volume_exists(&beta.volume).await);
}

trial!(fresh_saved_plan_is_applied_exactly);
async fn fresh_saved_plan_is_applied_exactly() {
    let sbx = Sandbox::new("race-fresh-plan").await;
    let (alpha, beta, gamma, leak) = tokio::join!(
        sbx.add_box("alpha", Run::Running),
        sbx.add_box("beta", Run::Running),
        sbx.add_box("gamma", Run::Exited),
        sbx.leaked_volume(),
    );
    let proxy = Proxy::start();
    let cli = cli(&sbx, &proxy, &["alpha"]);
    let (path, saved) = save_plan(&cli);
    let planned: BTreeSet<String> = saved
        .steps
        .iter()
        .map(|s| match s.kind {
            Kind::Volume => format!("/volumes/{}", s.name),
            kind => format!("/{}/{}", kind.plural(), s.id.as_deref().unwrap()),
        })
        .collect();
    let expected: BTreeSet<String> = removal_paths(&beta)
        .into_iter()
        .chain(removal_paths(&gamma))
        .chain([format!("/volumes/{leak}")])
        .collect();
    assert_eq!(planned, expected);

    let out = cli.run_with(["apply".as_ref(), path.as_os_str()]);
    out.expect_code(0);
    let report = out.report();
    assert!(report.is_clean(), "{}", out.dump());
    assert_eq!(
        report.removed.names(Kind::Container),
        BTreeSet::from([beta.container.name.clone(), gamma.container.name.clone()])
    );
    assert_eq!(
        report.removed.names(Kind::Volume),
        BTreeSet::from([beta.volume.clone(), gamma.volume.clone(), leak.clone()])
    );
    // Exactly the plan's removals were sent, each once.
    let sent: Vec<String> = proxy
        .requests("DELETE", "")
        .iter()
        .map(|s| delete_path(&s.path))
        .collect();
    assert_eq!(sent.len(), planned.len(), "{}", proxy.dump());
    assert_eq!(sent.into_iter().collect::<BTreeSet<_>>(), planned);
    assert!(sbx.container_exists(&alpha.container.id).await);
    assert!(sbx.volume_exists(&alpha.volume).await);
    let left = left_to_remove(&sbx, &goal(&["alpha"])).await;
    assert!(
        left.steps.is_empty() && left.blocked.is_empty(),
        "{left:#?}"
    );
    assert_honest(&sbx, &goal(&["alpha"]), &out, &report).await;
}

/// A saved plan is a file anyone can edit. Edited so that a step names an
/// object that is not managed (here: a scoped container without
/// `ca.sandbox=1`), `apply FILE` must refuse and touch nothing, even though
/// the inventory (and so the basis) has not changed.
trial!(edited_saved_plan_never_removes_an_unmanaged_container);
async fn edited_saved_plan_never_removes_an_unmanaged_container() {
    let sbx = Sandbox::new("race-edited-plan").await;
    let (_alpha, beta, bystander) = tokio::join!(
        sbx.add_box("alpha", Run::Running),
        sbx.add_box("beta", Run::Exited),
        sbx.container(ContainerSpec::new().run(Run::Created)),
    );
    let proxy = Proxy::start();
    let cli = cli(&sbx, &proxy, &["alpha"]);
    let (path, plan) = save_plan(&cli);
    assert_eq!(
        plan.steps[0].id.as_deref(),
        Some(beta.container.id.as_str())
    );
    // Edited as text, the way a person would: only the step's id and name change.
    let mut saved: Value = serde_json::from_str(&cli.read("plan.json")).unwrap();
    saved["steps"][0]["id"] = Value::from(bystander.id.as_str());
    saved["steps"][0]["name"] = Value::from(bystander.name.as_str());
    std::fs::write(&path, serde_json::to_string_pretty(&saved).unwrap()).unwrap();

    let out = cli.run_with(["apply".as_ref(), path.as_os_str()]);

    assert!(
        sbx.container_exists(&bystander.id).await,
        "UNSAFE: an edited plan removed unmanaged container {}\n{}\n{}",
        bystander.name,
        out.dump(),
        proxy.dump()
    );
    assert_eq!(
        proxy.count("DELETE", &format!("/containers/{}", bystander.id)),
        0,
        "{}",
        proxy.dump()
    );
    out.expect_code(1);
    assert!(sbx.container_exists(&beta.container.id).await);
}

/// A saved plan opens only with the key it was sealed with: the key file
/// `plan --out` made (`0600`, in folders made `0700`), or the same
/// `SANDBOXCTL_PLAN_KEY` where it is carried out. Another user's or
/// machine's key, and a plan without a seal, are refused before any engine
/// call.
trial!(a_saved_plan_opens_only_with_its_key);
async fn a_saved_plan_opens_only_with_its_key() {
    use std::os::unix::fs::PermissionsExt;
    let sbx = Sandbox::new("race-plan-key").await;
    let doomed = sbx.add_box("doomed", Run::Exited).await;
    let proxy = Proxy::start();
    let cli = |key: Option<&str>| {
        let cli = Cli::new()
            .docker_host(&proxy.docker_host())
            .state_toml(&state(&sbx, &[]))
            .json();
        match key {
            Some(key) => cli.env("SANDBOXCTL_PLAN_KEY", key),
            None => cli,
        }
    };
    let (mine, theirs) = (cli(None), cli(None));
    let (path, _) = save_plan(&mine);
    let key = mine.dir().join("state-home/sandboxctl/plan.key");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&key), 0o600);
    assert_eq!(mode(key.parent().unwrap()), 0o700);
    let saved = std::fs::read_to_string(&path).unwrap();
    let refused = |cli: &Cli, text: &str, words: &str| {
        std::fs::write(&path, text).unwrap();
        let asked = proxy.count("GET", "");
        let out = cli.run_with(["apply".as_ref(), path.as_os_str()]);
        out.expect_code(1);
        assert!(out.stderr.contains(words), "{words}: {}", out.dump());
        assert_eq!(proxy.count("GET", ""), asked, "{words}: {}", proxy.dump());
    };
    // Another key (another user or machine): no key file there yet, then another key.
    refused(&theirs, &saved, "no plan key at");
    save_plan(&theirs);
    refused(&theirs, &saved, "its seal does not match its content");
    let mut unsealed: Value = serde_json::from_str(&saved).unwrap();
    unsealed.as_object_mut().unwrap().remove("seal");
    refused(&mine, &unsealed.to_string(), "it carries no seal");
    refused(
        &cli(Some("not a key")),
        &saved,
        "SANDBOXCTL_PLAN_KEY is not a key",
    );
    assert_eq!(proxy.count("DELETE", ""), 0, "{}", proxy.dump());
    // The same SANDBOXCTL_PLAN_KEY where the plan is made and where it is carried out.
    let shared = "5a".repeat(32);
    let (made, carried) = (cli(Some(&shared)), cli(Some(&shared)));
    let (path2, _) = save_plan(&made);
    assert!(
        !made.dir().join("state-home/sandboxctl/plan.key").exists(),
        "no key file made"
    );
    let out = carried.run_with(["apply".as_ref(), path2.as_os_str()]);
    out.expect_code(0);
    assert!(!sbx.volume_exists(&doomed.volume).await, "{}", out.dump());
}

/// Ctrl-C during apply: no new removal starts, the one in flight finishes,
/// the run still verifies and reports, and exits 130 naming what is left.
trial!(interrupted_apply_finishes_in_flight_verifies_and_exits_130);
async fn interrupted_apply_finishes_in_flight_verifies_and_exits_130() {
    let sbx = Sandbox::new("interrupt").await;
    let mut boxes = Vec::new();
    for i in 0..6 {
        boxes.push(sbx.add_box(&format!("int{i}"), Run::Running).await);
    }
    let proxy = Proxy::start();
    // Every container removal takes a while, so the run is surely mid-way.
    proxy
        .on("DELETE", "/containers/")
        .always()
        .delay(Duration::from_millis(400));
    // Keep the runner (and the temp dir holding its state file) alive.
    let runner = cli(&sbx, &proxy, &[]);
    let running = runner.spawn_with(["apply", "--parallelism", "1"]);
    assert!(
        proxy.wait_for("DELETE", "/containers/", Duration::from_secs(30)),
        "no removal started\nproxy saw:\n{}\nstderr:\n{}",
        proxy.dump(),
        running.stderr_so_far()
    );
    running.interrupt();
    let out = running.wait();
    out.expect_code(130);
    let report = out.report();
    assert!(report.interrupted, "{}", out.dump());
    assert!(!report.converged);
    assert!(report.failures.is_empty(), "{}", out.dump());
    // The removal in flight finished; nothing after it was started.
    let deletes = proxy.count("DELETE", "/containers/");
    assert_eq!(deletes, 1, "{}", proxy.dump());
    assert_eq!(report.removed.containers.len(), 1, "{}", out.dump());
    // Everything still there is named, each as not attempted because of Ctrl-C.
    let left = left_to_remove(&sbx, &goal(&[])).await;
    assert_eq!(left.steps.len(), 2 * 6 - 1);
    assert_eq!(
        report.all_remaining().count(),
        left.steps.len(),
        "{}",
        out.dump()
    );
    for r in report.all_remaining() {
        assert!(
            matches!(&r.reason, Reason::Interrupted { text } if text == "not attempted: the run was interrupted"),
            "{r:?}\n{}",
            out.dump()
        );
    }
    assert_honest(&sbx, &goal(&[]), &out, &report).await;
    let _ = boxes;
}

/// A second Ctrl-C ends the run at once: exit 130 (routed to `main` as how
/// the run ended, not an exit from a signal handler), no report, a closing
/// line that says nothing was verified; long before the removals held back
/// would have finished.
trial!(a_second_ctrl_c_quits_at_once_exits_130_and_says_nothing_was_verified);
async fn a_second_ctrl_c_quits_at_once_exits_130_and_says_nothing_was_verified() {
    let sbx = Sandbox::new("interrupt-twice").await;
    for i in 0..3 {
        sbx.add_box(&format!("twice{i}"), Run::Exited).await;
    }
    let proxy = Proxy::start();
    // The removal in flight is held long: only a quit ends the run soon.
    proxy
        .on("DELETE", "/containers/")
        .always()
        .delay(Duration::from_secs(20));
    let runner = cli(&sbx, &proxy, &[]);
    let mut running = runner.spawn_with(["apply", "--parallelism", "1"]);
    assert!(
        proxy.wait_for("DELETE", "/containers/", Duration::from_secs(30)),
        "no removal started\nproxy saw:\n{}\nstderr:\n{}",
        proxy.dump(),
        running.stderr_so_far()
    );
    running.interrupt();
    assert!(
        running.wait_for_stderr("Ctrl-C again to quit at once", Duration::from_secs(10)),
        "no notice of the first Ctrl-C:\n{}",
        running.stderr_so_far()
    );
    let quit = std::time::Instant::now();
    running.interrupt();
    let out = running.wait();
    let took = quit.elapsed();
    out.expect_code(130);
    assert!(
        took < Duration::from_secs(10),
        "took {took:?} after the second Ctrl-C\n{}",
        out.dump()
    );
    assert!(
        out.stderr
            .contains("interrupted again: quit at once, without verifying"),
        "{}",
        out.dump()
    );
    assert!(out.stdout.is_empty(), "no report: {}", out.dump());
}

/// A saved plan that archives its volumes, edited so that a volume goes
/// unarchived (its `archive` dropped) or is archived elsewhere (its folder
/// changed in its step alone, or everywhere at once as `sed` would, the
/// goal's included), or with its time moved on: `apply FILE` refuses its
/// seal before any engine call and removes nothing; the plan as saved still
/// applies, archiving the volume.
trial!(a_saved_plan_edited_to_skip_or_move_an_archive_is_refused);
async fn a_saved_plan_edited_to_skip_or_move_an_archive_is_refused() {
    let sbx = Sandbox::new("race-edited-archive").await;
    let doomed = sbx.add_box("doomed", Run::Exited).await;
    let proxy = Proxy::start();
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let state = format!(
        "{}\n[policy]\narchive = \"{}\"\n",
        state(&sbx, &[]),
        dir.path().display()
    );
    let cli = Cli::new()
        .docker_host(&proxy.docker_host())
        .state_toml(&state)
        .json()
        .deadline(Duration::from_secs(90));
    let path = cli.dir().join("plan.json");
    cli.run_with(["plan".as_ref(), "--out".as_ref(), path.as_os_str()])
        .expect_code(0);
    let text = cli.read("plan.json");
    let saved: Value = serde_json::from_str(&text).unwrap();
    let volume_step = saved["steps"]
        .as_array()
        .unwrap()
        .iter()
        .position(|s| s["kind"] == "volume")
        .expect("the volume is a step");
    let folder = dir.path().display().to_string();
    let other = elsewhere.path().display().to_string();
    assert!(
        text.matches(&folder).count() >= 2,
        "the goal and the step both name the folder: {text}"
    );
    let mut dropped = saved.clone();
    dropped["steps"][volume_step]
        .as_object_mut()
        .unwrap()
        .remove("archive");
    let mut moved = saved.clone();
    moved["steps"][volume_step]["archive"] = Value::from(other.as_str());
    let mut later = saved.clone();
    later["now"] = Value::from("2099-01-01T00:00:00Z");
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap();
    let edits = [
        ("archive dropped", pretty(&dropped)),
        ("archive moved in its step", pretty(&moved)),
        ("every archive folder moved", text.replace(&folder, &other)),
        ("time moved on", pretty(&later)),
    ];
    for (what, edited) in edits {
        std::fs::write(&path, edited).unwrap();
        let asked = proxy.count("GET", "") + proxy.count("POST", "");
        let out = cli.run_with(["apply".as_ref(), path.as_os_str()]);
        out.expect_code(1);
        assert!(
            out.stderr.contains("its seal does not match its content"),
            "{what}: {}",
            out.dump()
        );
        // Refused before any engine work: the error document, not a report.
        let refused = out.json();
        assert_eq!(
            refused["error"]["code"],
            "planFile",
            "{what}: {}",
            out.dump()
        );
        assert!(refused["error"]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("its seal does not match its content"));
        assert_eq!(
            proxy.count("GET", "") + proxy.count("POST", ""),
            asked,
            "{what}: refused before any engine call\n{}",
            proxy.dump()
        );
        assert_eq!(proxy.count("DELETE", ""), 0, "{what}: {}", proxy.dump());
        assert!(sbx.volume_exists(&doomed.volume).await, "{what}");
        assert!(
            std::fs::read_dir(elsewhere.path())
                .unwrap()
                .next()
                .is_none(),
            "{what}: something was written elsewhere"
        );
    }
    // The plan as saved applies, laid out anew too, and archives the volume first.
    std::fs::write(&path, serde_json::to_string_pretty(&saved).unwrap()).unwrap();
    let out = cli.run_with(["apply".as_ref(), path.as_os_str()]);
    out.expect_code(0);
    assert!(!sbx.volume_exists(&doomed.volume).await);
    assert_eq!(out.report().archived.len(), 1, "{}", out.dump());
}
