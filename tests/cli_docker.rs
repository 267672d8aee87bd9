//! The `sandboxctl` binary end to end against the real Docker engine.
//!
//! Every test builds its own corner of the shared daemon with the `Sandbox`
//! harness (unique scope label, cleaned up on drop, also after a panic) and
//! runs the CLI only through `sbx.cli()`, i.e. always with
//! `--scope ca.sandbox.test=<unique>`. Claims are checked three ways: exit
//! code, output (the JSON read through the typed mirror in `support::report`,
//! the human text where it matters), and the engine's real state afterwards,
//! queried through the harness. After every command, the decoys (unlabeled and
//! look-alike objects) must still be there and the `ca-sbx:*` images the
//! engine lists must be exactly what they were.
//!
//! That everything here works at all against Docker 20.10 shows the API
//! version is negotiated (1.41).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::TcpListener;
use std::time::Duration;

use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, InspectContainerOptions, StartContainerOptions,
};
use serde::Serialize;
use serde_json::Value;

use crate::support::cli::{Cli, Output};
use crate::support::docker::{
    Container, ContainerSpec, Decoys, Run, Sandbox, SandboxBox, VolumeSpec, SCOPE_KEY, SLEEP,
    TEST_IMAGE,
};
use crate::support::report::{FailureKind, Image, Kept, Kind, Outcome, Plan, Reason, Report};

// ----- local helpers ---------------------------------------------------------

/// Everything of one test as the engine holds it: containers by name (ID and
/// state), volumes, networks, and the `ca-sbx:*` images.
#[derive(Debug, Clone, PartialEq, Eq)]
struct World {
    containers: BTreeMap<String, (String, String)>,
    volumes: Vec<String>,
    networks: Vec<String>,
    images: BTreeSet<String>,
}

async fn world(sbx: &Sandbox) -> World {
    let remaining = sbx.remaining().await;
    let mut containers = BTreeMap::new();
    for name in remaining.containers {
        let c = sbx
            .docker()
            .inspect_container(&name, None::<InspectContainerOptions>)
            .await
            .unwrap_or_else(|e| panic!("inspect {name}: {e}"));
        let state = c
            .state
            .and_then(|s| s.status)
            .map(|s| s.to_string())
            .unwrap_or_default();
        containers.insert(name, (c.id.unwrap_or_default(), state));
    }
    World {
        containers,
        volumes: remaining.volumes,
        networks: remaining.networks,
        images: sbx.ca_sbx_images().await,
    }
}

/// What must hold after every command: the decoys all exist and the
/// `ca-sbx:*` images are the ones there were at the start.
struct Invariants<'a> {
    sbx: &'a Sandbox,
    decoys: Decoys,
    images: BTreeSet<String>,
}

impl<'a> Invariants<'a> {
    async fn new(sbx: &'a Sandbox, decoys: Decoys) -> Invariants<'a> {
        let images = sbx.ca_sbx_images().await;
        assert!(
            !images.is_empty(),
            "the test image {TEST_IMAGE} is a ca-sbx image"
        );
        Invariants {
            sbx,
            decoys,
            images,
        }
    }

    /// Runs `cli` with `args`, then checks the invariants.
    async fn run(&self, cli: &Cli, args: &[&str]) -> Output {
        let out = cli.run_with(args);
        self.check(&out).await;
        out
    }

    async fn check(&self, out: &Output) {
        assert_eq!(
            self.sbx.ca_sbx_images().await,
            self.images,
            "`{}` changed the ca-sbx images\n{}",
            out.command,
            out.dump()
        );
        for c in &self.decoys.containers {
            assert!(
                self.sbx.container_exists(&c.id).await,
                "`{}` removed decoy container {}\n{}",
                out.command,
                c.name,
                out.dump()
            );
        }
        for v in &self.decoys.volumes {
            assert!(
                self.sbx.volume_exists(v).await,
                "`{}` removed decoy volume {v}\n{}",
                out.command,
                out.dump()
            );
        }
    }

    /// No decoy is named anywhere in a document (plan, report, inventory).
    fn assert_no_decoy_in(&self, doc: &impl Serialize, what: &str) {
        let doc = serde_json::to_value(doc).expect("serializes");
        let mut strings = BTreeSet::new();
        collect_strings(&doc, &mut strings);
        for c in &self.decoys.containers {
            assert!(
                !strings.contains(&c.name) && !strings.contains(&c.id),
                "decoy container {} appears in {what}: {doc:#}",
                c.name
            );
        }
        for v in &self.decoys.volumes {
            assert!(
                !strings.contains(v),
                "decoy volume {v} appears in {what}: {doc:#}"
            );
        }
    }
}

fn collect_strings(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::String(s) => {
            out.insert(s.clone());
        }
        Value::Array(a) => a.iter().for_each(|x| collect_strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| collect_strings(x, out)),
        _ => {}
    }
}

fn set<I, S>(items: I) -> BTreeSet<String>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    items.into_iter().map(Into::into).collect()
}

/// What parsing cannot check: containers and networks are named with their
/// ID everywhere, volumes never (their name is their identity).
fn assert_report_shape(r: &Report) {
    let check = |kind: Kind, id: Option<&String>, what: &str| match kind {
        Kind::Volume => assert!(id.is_none(), "a volume has no id: {what}"),
        _ => assert!(
            id.is_some_and(|i| i.len() == 64),
            "a {kind} has its full id: {what}"
        ),
    };
    for kind in Kind::ALL {
        for g in r.removed.of(kind) {
            check(kind, g.id.as_ref(), &format!("{g:?}"));
        }
        for n in r.kept.of(kind) {
            assert_eq!(n.kind, kind, "{n:?}");
            check(kind, n.id.as_ref(), &format!("{n:?}"));
        }
        for l in r.remaining(kind) {
            check(kind, l.id.as_ref(), &format!("{l:?}"));
        }
    }
    for f in &r.failures {
        let kind = match f.kind {
            FailureKind::Container => Kind::Container,
            FailureKind::Volume => Kind::Volume,
            FailureKind::Network => Kind::Network,
            FailureKind::Service => Kind::Service,
            FailureKind::Config => Kind::Config,
            FailureKind::Secret => Kind::Secret,
            FailureKind::Engine => continue,
        };
        check(kind, f.id.as_ref(), &format!("{f:?}"));
    }
}

/// A converged report: no failures, nothing remaining.
#[track_caller]
fn assert_converged(r: &Report) {
    assert_report_shape(r);
    assert!(r.is_clean(), "{r:#?}");
    assert!(!r.interrupted, "{r:#?}");
}

/// The retained images list names the test image by tag, with its ID.
#[track_caller]
fn assert_retains_test_image(images: &[Image], sbx: &Sandbox) {
    let found = images
        .iter()
        .find(|i| i.tags.iter().any(|t| t == TEST_IMAGE))
        .unwrap_or_else(|| panic!("{TEST_IMAGE} not retained: {images:#?}"));
    assert_eq!(found.id, sbx.image_id(), "{found:?}");
}

/// A TCP port on 127.0.0.1 that nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    port
}

// ----- plan, inventory, apply on a mixed scope -------------------------------

/// One scope with running and exited boxes, leaked containers (running and
/// exited) and a leaked volume, a declared box, a kept volume, a volume shared
/// by two boxes, and running decoys. `plan` and `inventory` describe it
/// without touching it; `apply` then converges on it, and again is a no-op.
trial!(plan_inventory_and_apply_on_a_mixed_scope);
async fn plan_inventory_and_apply_on_a_mixed_scope() {
    let sbx = Sandbox::new("cli-mixed").await;
    let notes = sbx.unique("notes");
    let (run1, done1, keep, shared, leaked_run, leaked_exited, leaked_vol, kept_vol, decoys) = tokio::join!(
        sbx.add_box("run1", Run::Running),
        sbx.add_box("done1", Run::Exited),
        sbx.add_box("keepme", Run::Running),
        sbx.shared_volume(None, "sa", "sb", Run::Running),
        sbx.leaked_container(Run::Running),
        sbx.leaked_container(Run::Exited),
        sbx.leaked_volume(),
        sbx.volume(VolumeSpec::new().in_box("gone").name(notes.clone())),
        sbx.decoys(Run::Running),
    );
    assert_eq!(kept_vol, notes);
    let inv = Invariants::new(&sbx, decoys).await;
    let cli = sbx.cli().state_toml(&format!(
        "# the declared box and a kept volume\n[[box]]\nid = \"keepme\"\n\n[volumes]\nkeep = [\"{notes}\"]\n"
    ));
    let before = world(&sbx).await;

    // ---- plan, JSON: every removal with kind/name/id/box/why/waitsFor.
    let out = inv.run(&cli, &["plan", "--format", "json"]).await;
    out.success();
    let plan = out.plan();
    assert_eq!(plan.schema_version, 2);
    assert!(
        plan.endpoint.is_some(),
        "the plan names its engine's address"
    );
    assert_eq!(
        plan.scope,
        BTreeMap::from([
            ("ca.sandbox".to_string(), "1".to_string()),
            (SCOPE_KEY.to_string(), sbx.scope_value().to_string())
        ])
    );
    let removed_containers: Vec<(&Container, Option<&str>, &str)> = vec![
        (&run1.container, Some("run1"), "running"),
        (&done1.container, Some("done1"), "exited"),
        (&shared.a, Some("sa"), "running"),
        (&shared.b, Some("sb"), "running"),
        (&leaked_run, None, "running"),
        (&leaked_exited, None, "exited"),
    ];
    assert_eq!(
        plan.steps.len(),
        10,
        "6 containers and 4 volumes: {plan:#?}"
    );
    for (i, s) in plan.steps.iter().enumerate() {
        assert_eq!(s.step, i + 1, "{s:?}");
        assert!(!s.why.text().is_empty(), "{s:?}");
        for &w in &s.waits_for {
            assert!(w < s.step, "{s:?}");
        }
    }
    for (c, b, state) in &removed_containers {
        let s = plan.step(&c.name);
        assert_eq!(s.kind, Kind::Container, "{s:?}");
        assert_eq!(s.id.as_deref(), Some(c.id.as_str()), "{s:?}");
        assert_eq!(s.box_id.as_deref(), *b, "{s:?}");
        assert_eq!(s.state.as_deref(), Some(*state), "{s:?}");
        assert!(s.waits_for.is_empty(), "{s:?}");
        match (b, &s.why) {
            (Some(b), Reason::BoxNotDeclared { box_id, text }) => {
                assert_eq!(box_id, b);
                assert_eq!(*text, format!("leaked: box {b} is not declared"));
            }
            (None, Reason::NoBoxLabel { text }) => {
                assert_eq!(text, "leaked: no ca.sandbox.id label")
            }
            (_, why) => panic!("{} removed for {why:?}", c.name),
        }
    }
    for (v, b) in [
        (&run1.volume, Some("run1")),
        (&done1.volume, Some("done1")),
        (&shared.volume, None),
        (&leaked_vol, None),
    ] {
        let s = plan.step(v);
        assert_eq!(s.kind, Kind::Volume, "{s:?}");
        assert_eq!(s.box_id.as_deref(), b, "{s:?}");
        assert!(s.id.is_none(), "volumes have no id: {s:?}");
    }
    // A volume waits for every container that mounts it, and for nothing else.
    let no = |name: &str| plan.step(name).step;
    assert_eq!(
        plan.step(&run1.volume).waits_for,
        vec![no(&run1.container.name)]
    );
    assert_eq!(
        plan.step(&done1.volume).waits_for,
        vec![no(&done1.container.name)]
    );
    let mut both = vec![no(&shared.a.name), no(&shared.b.name)];
    both.sort_unstable();
    assert_eq!(plan.step(&shared.volume).waits_for, both);
    assert!(plan.step(&leaked_vol).waits_for.is_empty());
    assert!(plan.blocked.is_empty(), "{plan:#?}");
    // Kept: the declared box (container and volume) and the kept volume.
    assert_eq!(plan.kept.containers.len(), 1, "{plan:#?}");
    let kept_c = &plan.kept.containers[0];
    assert_eq!(kept_c.id.as_deref(), Some(keep.container.id.as_str()));
    assert_eq!(kept_c.box_id.as_deref(), Some("keepme"));
    assert!(
        matches!(&kept_c.why, Reason::DeclaredBox { box_id, text, .. } if box_id == "keepme" && text == "declared box"),
        "{kept_c:?}"
    );
    assert_eq!(
        plan.kept
            .volumes
            .iter()
            .map(|v| v.name.clone())
            .collect::<BTreeSet<_>>(),
        set([keep.volume.clone(), notes.clone()])
    );
    for v in &plan.kept.volumes {
        if v.name == notes {
            assert!(
                matches!(&v.why, Reason::KeptByFile { line: Some(6), text } if text == "listed in volumes.keep"),
                "{v:?}"
            );
        } else {
            assert!(matches!(&v.why, Reason::DeclaredBox { .. }), "{v:?}");
        }
    }
    assert!(plan.kept.networks.is_empty());
    assert_retains_test_image(&plan.retained.images, &sbx);
    inv.assert_no_decoy_in(&plan, "plan --format json");

    // ---- plan, human: the same, readable, with a summary line.
    let out = inv.run(&cli, &["plan"]).await;
    out.success();
    let text = &out.stdout;
    assert!(text.contains("Remove, in this order:"), "{text}");
    for (c, _, _) in &removed_containers {
        assert!(
            text.contains(&format!("{} ({})", c.name, &c.id[..12])),
            "{} missing: {text}",
            c.name
        );
    }
    let shared_line = text
        .lines()
        .find(|l| l.contains(&format!(" {} ", shared.volume)))
        .unwrap_or_else(|| panic!("no line for {}: {text}", shared.volume));
    assert!(
        shared_line.ends_with(&format!("after {}, {}", both[0], both[1])),
        "{shared_line}"
    );
    assert!(text.contains("\nKeep:\n"), "{text}");
    assert!(
        text.contains("\nRetain (images are never removed):\n"),
        "{text}"
    );
    assert!(text.contains(TEST_IMAGE), "{text}");
    assert!(
        text.contains(
            "Plan: remove 6 containers, 4 volumes and 0 networks; keep 3 objects; retain "
        ),
        "{text}"
    );
    assert!(text.lines().any(|l| l == plan.summary), "{text}");
    for c in &inv.decoys.containers {
        assert!(
            !text.contains(&format!("{} (", c.name)),
            "decoy {}: {text}",
            c.name
        );
    }

    // ---- plan --detailed-exitcode: 2 with changes pending.
    inv.run(&cli, &["plan", "--detailed-exitcode"])
        .await
        .expect_code(2);

    // ---- plan --out F: the same plan, saved as JSON.
    inv.run(&cli, &["plan", "--out", "saved-plan.json"])
        .await
        .success();
    let saved = crate::support::report::read_plan(&cli.read("saved-plan.json"));
    assert!(
        saved
            .seal
            .as_deref()
            .is_some_and(|s| s.starts_with("hmac-sha256:") && s.len() == 12 + 64),
        "a saved plan is sealed: {:?}",
        saved.seal
    );
    assert_eq!(
        Plan {
            now: plan.now.clone(),
            seal: None,
            ..saved
        },
        plan,
        "the saved plan is the plan --format json prints (made a moment later), and its seal"
    );
    // A saved plan carries its own scope: --scope with it is a usage error.
    inv.run(&cli, &["apply", "saved-plan.json"])
        .await
        .expect_code(2);

    // ---- inventory, human and JSON: by box, with states, and the images.
    let out = inv.run(&cli, &["inventory"]).await;
    out.success();
    let text = &out.stdout;
    for (b, state) in [(&run1, "running"), (&done1, "exited"), (&keep, "running")] {
        let head = format!("\nbox {}\n", b.box_id);
        let at = text
            .find(&head)
            .unwrap_or_else(|| panic!("no group for box {}: {text}", b.box_id));
        let group = text[at + head.len()..].split("\n\n").next().unwrap();
        let line = group
            .lines()
            .find(|l| l.contains(&b.container.name))
            .unwrap_or_else(|| panic!("{} not under box {}: {text}", b.container.name, b.box_id));
        assert!(line.contains(state), "{line}");
        assert!(line.contains(&format!("mounts {}", b.volume)), "{line}");
        assert!(
            group
                .lines()
                .any(|l| l.trim_start().starts_with("volume ")
                    && l.ends_with(&format!(" {}", b.volume))),
            "{group}"
        );
    }
    assert!(text.contains("\nno box label (leaked)\n"), "{text}");
    assert!(text.contains("Images (retained, never removed):"), "{text}");
    assert!(text.contains(TEST_IMAGE), "{text}");
    assert!(
        text.contains("7 containers, 6 volumes and 0 networks managed;"),
        "{text}"
    );
    let out = inv.run(&cli, &["inventory", "--format", "json"]).await;
    out.success();
    let view = out.inventory();
    let by_box: BTreeMap<Option<&str>, (usize, usize)> = view
        .boxes
        .iter()
        .map(|g| (g.box_id.as_deref(), (g.containers.len(), g.volumes.len())))
        .collect();
    assert_eq!(
        by_box,
        BTreeMap::from([
            (None, (2, 2)),
            (Some("done1"), (1, 1)),
            (Some("gone"), (0, 1)),
            (Some("keepme"), (1, 1)),
            (Some("run1"), (1, 1)),
            (Some("sa"), (1, 0)),
            (Some("sb"), (1, 0)),
        ]),
        "{view:#?}"
    );
    let c = &view.group(Some("done1")).containers[0];
    assert_eq!(c.id, done1.container.id);
    assert_eq!(c.state, "exited");
    assert_eq!(c.mounts, vec![done1.volume.clone()]);
    assert!(c.networks.is_empty(), "`none` is not a managed network");
    assert_eq!(view.group(Some("run1")).containers[0].state, "running");
    assert_eq!(
        set(view.group(None).containers.iter().map(|c| c.state.clone())),
        set(["running", "exited"])
    );
    assert_eq!(
        set(view.group(None).volumes.clone()),
        set([shared.volume.clone(), leaked_vol.clone()])
    );
    assert!(view.retained.images.iter().any(|i| i.id == sbx.image_id()));
    inv.assert_no_decoy_in(&view, "inventory --format json");

    // plan and inventory changed nothing.
    assert_eq!(
        world(&sbx).await,
        before,
        "plan/inventory touched the engine"
    );

    // ---- apply: converges.
    let out = inv.run(&cli, &["apply", "--format", "json"]).await;
    out.success();
    let report = out.report();
    assert_converged(&report);
    assert_eq!(
        report.removed.ids(Kind::Container),
        removed_containers
            .iter()
            .map(|(c, _, _)| c.id.clone())
            .collect()
    );
    assert_eq!(
        report.removed.names(Kind::Volume),
        set([
            run1.volume.clone(),
            done1.volume.clone(),
            shared.volume.clone(),
            leaked_vol.clone()
        ])
    );
    for c in &report.removed.containers {
        let (x, b, _) = removed_containers
            .iter()
            .find(|(x, _, _)| c.id.as_deref() == Some(x.id.as_str()))
            .unwrap();
        assert_eq!(c.box_id.as_deref(), *b, "{c:?}");
        assert_eq!(c.name, x.name, "{c:?}");
        assert_eq!(c.outcome, Outcome::Removed, "{c:?}");
    }
    assert_eq!(report.kept, plan.kept);
    assert_retains_test_image(&report.retained.images, &sbx);
    inv.assert_no_decoy_in(&report, "apply --format json");
    // The engine agrees.
    for (c, _, _) in &removed_containers {
        assert!(
            !sbx.container_exists(&c.id).await,
            "{} survived apply",
            c.name
        );
    }
    for v in [&run1.volume, &done1.volume, &shared.volume, &leaked_vol] {
        assert!(!sbx.volume_exists(v).await, "{v} survived apply");
    }
    assert_eq!(
        sbx.container_state(&keep.container.id).await.as_deref(),
        Some("running"),
        "the declared box keeps running"
    );
    assert!(sbx.volume_exists(&keep.volume).await);
    assert!(sbx.volume_exists(&notes).await);
    let after = world(&sbx).await;
    let mut expected = before.clone();
    for (c, _, _) in &removed_containers {
        expected.containers.remove(&c.name);
    }
    expected
        .volumes
        .retain(|v| ![&run1.volume, &done1.volume, &shared.volume, &leaked_vol].contains(&v));
    assert_eq!(after, expected, "apply removed exactly the plan");

    // ---- apply again: nothing to do, still converged (human output).
    let out = inv.run(&cli, &["apply"]).await;
    out.success();
    assert!(
        out.stdout.contains("Plan: nothing to remove"),
        "{}",
        out.dump()
    );
    assert!(
        out.stdout
            .contains("Removed 0 containers, 0 volumes and 0 networks; kept 3 objects"),
        "{}",
        out.dump()
    );
    assert!(out.stdout.contains("Converged"), "{}", out.dump());
    let out = inv.run(&cli, &["apply", "--format", "json"]).await;
    out.success();
    let again = out.report();
    assert_converged(&again);
    assert!(again.removed.is_empty(), "{again:#?}");
    inv.run(&cli, &["plan", "--detailed-exitcode"])
        .await
        .expect_code(0);
    assert_eq!(
        world(&sbx).await,
        after,
        "a converged apply touches nothing"
    );
}

// ----- destroy -------------------------------------------------------------

/// `destroy ID`, `destroy ID --keep-volume`, `destroy --prune` with the state
/// file in the working directory, `destroy` with `--state`, and `destroy`
/// without any state file, one after the other on one scope.
trial!(destroy_by_id_keep_volume_and_prune);
async fn destroy_by_id_keep_volume_and_prune() {
    let sbx = Sandbox::new("cli-destroy").await;
    let notes = sbx.unique("notes");
    let (a, b, c, d, leaked, leaked_vol, _, decoys) = tokio::join!(
        sbx.add_box("a", Run::Running),
        sbx.add_box("b", Run::Exited),
        sbx.add_box("c", Run::Running),
        sbx.add_box("d", Run::Exited),
        sbx.leaked_container(Run::Running),
        sbx.leaked_volume(),
        sbx.volume(VolumeSpec::new().in_box("gone").name(notes.clone())),
        sbx.decoys(Run::Created),
    );
    let inv = Invariants::new(&sbx, decoys).await;
    let exists = |bx: &SandboxBox| {
        let sbx = &sbx;
        let (id, vol) = (bx.container.id.clone(), bx.volume.clone());
        async move {
            (
                sbx.container_exists(&id).await,
                sbx.volume_exists(&vol).await,
            )
        }
    };

    // ---- destroy a: its container and volume go, nothing else.
    let out = inv
        .run(&sbx.cli(), &["destroy", "a", "--format", "json"])
        .await;
    out.success();
    let r = out.report();
    assert_converged(&r);
    let gone = |id: Option<&str>, name: &str| crate::support::report::Gone {
        engine: "default".into(),
        id: id.map(str::to_string),
        name: name.to_string(),
        box_id: Some("a".into()),
        outcome: Outcome::Removed,
        // Not measured without --reclaimed.
        reclaimed_bytes: None,
    };
    assert_eq!(
        r.removed.containers,
        vec![gone(Some(&a.container.id), &a.container.name)]
    );
    assert_eq!(r.removed.volumes, vec![gone(None, &a.volume)]);
    assert!(r.removed.networks.is_empty());
    for k in &r.kept.containers {
        assert_eq!(
            k.why,
            Reason::NotNamedByDestroy {
                text: "not named by destroy".into()
            }
        );
    }
    assert_eq!(
        set(r.kept.containers.iter().filter_map(|k| k.id.clone())),
        set([
            b.container.id.clone(),
            c.container.id.clone(),
            d.container.id.clone(),
            leaked.id.clone()
        ])
    );
    assert_retains_test_image(&r.retained.images, &sbx);
    inv.assert_no_decoy_in(&r, "destroy a");
    assert_eq!(exists(&a).await, (false, false));
    for bx in [&b, &c, &d] {
        assert_eq!(exists(bx).await, (true, true), "box {}", bx.box_id);
    }
    assert_eq!(
        sbx.container_state(&c.container.id).await.as_deref(),
        Some("running")
    );
    assert!(sbx.container_exists(&leaked.id).await);
    assert!(sbx.volume_exists(&leaked_vol).await);
    assert!(sbx.volume_exists(&notes).await);

    // ---- destroy b --keep-volume (human): the container goes, the volume stays.
    let out = inv
        .run(&sbx.cli(), &["destroy", "b", "--keep-volume"])
        .await;
    out.success();
    assert!(
        out.stdout
            .contains("Removed 1 container, 0 volumes and 0 networks"),
        "{}",
        out.dump()
    );
    assert!(out.stdout.contains("Converged"), "{}", out.dump());
    assert!(
        out.stdout.contains(&b.volume) && out.stdout.contains("--keep-volume"),
        "the plan says why the volume stays\n{}",
        out.dump()
    );
    assert_eq!(exists(&b).await, (false, true));
    for bx in [&c, &d] {
        assert_eq!(exists(bx).await, (true, true), "box {}", bx.box_id);
    }

    // ---- destroy --prune, with state/sandboxes.toml in the working directory:
    // the declared boxes and the kept volume survive, every leaked object goes.
    let cwd_state = sbx.cli().default_state_toml(&format!(
        "[[box]]\nid = \"c\"\n\n[[box]]\nid = \"d\"\n\n[volumes]\nkeep = [\"{notes}\"]\n"
    ));
    let out = inv
        .run(&cwd_state, &["destroy", "--prune", "--format", "json"])
        .await;
    out.success();
    let r = out.report();
    assert_converged(&r);
    assert_eq!(r.removed.ids(Kind::Container), set([leaked.id.clone()]));
    assert_eq!(
        r.removed.names(Kind::Volume),
        set([leaked_vol.clone(), b.volume.clone()])
    );
    assert_eq!(
        set(r.kept.volumes.iter().map(|v| v.name.clone())),
        set([c.volume.clone(), d.volume.clone(), notes.clone()])
    );
    inv.assert_no_decoy_in(&r, "destroy --prune");
    assert!(!sbx.container_exists(&leaked.id).await);
    assert!(!sbx.volume_exists(&leaked_vol).await);
    assert!(!sbx.volume_exists(&b.volume).await);
    for bx in [&c, &d] {
        assert_eq!(exists(bx).await, (true, true), "box {}", bx.box_id);
    }
    assert!(sbx.volume_exists(&notes).await);

    // ---- destroy (no ID) --state FILE (whose [scope] agrees with --scope):
    // only d is declared now, so c goes.
    let explicit = sbx.cli().state_toml(&format!(
        "{}\n[[box]]\nid = \"d\"\n\n[volumes]\nkeep = [\"{notes}\"]\n",
        sbx.scope_toml()
    ));
    let out = inv.run(&explicit, &["destroy", "--format", "json"]).await;
    out.success();
    let r = out.report();
    assert_converged(&r);
    assert_eq!(
        r.removed.ids(Kind::Container),
        set([c.container.id.clone()])
    );
    assert_eq!(r.removed.names(Kind::Volume), set([c.volume.clone()]));
    assert_eq!(exists(&c).await, (false, false));
    assert_eq!(exists(&d).await, (true, true));
    assert!(sbx.volume_exists(&notes).await);

    // ---- destroy with no ID and no state file anywhere: every managed
    // object in the scope goes; the decoys stay.
    let out = inv.run(&sbx.cli(), &["destroy", "--format", "json"]).await;
    out.success();
    let r = out.report();
    assert_converged(&r);
    assert_eq!(
        r.removed.ids(Kind::Container),
        set([d.container.id.clone()])
    );
    assert_eq!(
        r.removed.names(Kind::Volume),
        set([d.volume.clone(), notes.clone()])
    );
    assert_eq!(r.kept, Kept::default());
    let remaining = sbx.remaining().await;
    let decoy_names: BTreeSet<String> = inv
        .decoys
        .containers
        .iter()
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(
        set(remaining.containers),
        decoy_names,
        "only the decoys are left"
    );
    assert_eq!(
        set(remaining.volumes),
        set(inv.decoys.volumes.clone()),
        "only the decoy volumes are left"
    );
    let out = inv
        .run(&sbx.cli(), &["inventory", "--format", "json"])
        .await;
    out.success();
    assert!(out.inventory().boxes.is_empty(), "{}", out.dump());
    inv.run(&sbx.cli(), &["destroy", "--prune", "--format", "json"])
        .await
        .success();
}

// ----- containers in other states, anonymous volumes ------------------------

/// A box container with an anonymous volume (created by Docker, unlabeled),
/// started in the harness's way but through bollard, so the mount can be asked for.
async fn box_with_anonymous_volume(sbx: &Sandbox, box_id: &str) -> (Container, String) {
    let name = sbx.unique(box_id);
    let labels: HashMap<String, String> = [
        ("ca.sandbox", "1"),
        ("ca.sandbox.id", box_id),
        (SCOPE_KEY, sbx.scope_value()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let body = ContainerCreateBody {
        image: Some(TEST_IMAGE.to_string()),
        cmd: Some(vec![SLEEP.to_string(), "infinity".to_string()]),
        labels: Some(labels),
        host_config: Some(HostConfig {
            mounts: Some(vec![Mount {
                target: Some("/anon".to_string()),
                typ: Some(MountType::VOLUME),
                ..Default::default()
            }]),
            network_mode: Some("none".to_string()),
            ..Default::default()
        }),
        ..Default::default()
    };
    // Carries the scope label, so the sandbox's cleanup finds it (and its
    // anonymous volume goes with it: rm -v) even if this test fails.
    let options = CreateContainerOptionsBuilder::new().name(&name).build();
    let id = sbx
        .docker()
        .create_container(Some(options), body)
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"))
        .id;
    sbx.docker()
        .start_container(&id, None::<StartContainerOptions>)
        .await
        .unwrap_or_else(|e| panic!("start {name}: {e}"));
    let mounts = sbx
        .docker()
        .inspect_container(&id, None::<InspectContainerOptions>)
        .await
        .unwrap()
        .mounts
        .unwrap_or_default();
    let anon = mounts
        .iter()
        .find(|m| m.destination.as_deref() == Some("/anon"))
        .and_then(|m| m.name.clone())
        .unwrap_or_else(|| panic!("no anonymous volume at /anon: {mounts:?}"));
    (Container { id, name }, anon)
}

/// `apply` also removes a paused box, a created (never started) leaked
/// container, and a running box whose container has an anonymous volume:
/// that volume goes with its container (`rm -v`), named volumes by the plan.
trial!(apply_removes_paused_created_and_anonymous_volume_containers);
async fn apply_removes_paused_created_and_anonymous_volume_containers() {
    let sbx = Sandbox::new("cli-odd-states").await;
    let (paused, created, (anon_box, anon_vol), decoys) = tokio::join!(
        sbx.add_box("paused", Run::Running),
        sbx.leaked_container(Run::Created),
        box_with_anonymous_volume(&sbx, "anon"),
        sbx.decoys(Run::Exited),
    );
    sbx.docker()
        .pause_container(&paused.container.id)
        .await
        .expect("pause");
    assert_eq!(
        sbx.container_state(&paused.container.id).await.as_deref(),
        Some("paused")
    );
    assert!(sbx.volume_exists(&anon_vol).await);
    // A leaked container mounting a decoy's named volume (ca.sandbox=0): the
    // container goes, the unmanaged volume stays.
    let decoy_user = sbx
        .container(ContainerSpec::new().managed().volume(&decoys.volumes[0]))
        .await;
    // Objects with the scope label and one more label, and without it.
    let (extra_vol, extra_box) = tokio::join!(
        sbx.volume(VolumeSpec::new().managed().label("extra", "yes")),
        sbx.container(ContainerSpec::new().in_box("extra").label("extra", "yes")),
    );
    let inv = Invariants::new(&sbx, decoys).await;
    let cli = sbx.cli().state_toml("");

    // Two --scope labels: only objects carrying both are managed.
    let out = inv
        .run(
            &sbx.cli(),
            &["destroy", "--scope", "extra=yes", "--format", "json"],
        )
        .await;
    out.success();
    let r = out.report();
    assert_converged(&r);
    assert_eq!(r.removed.ids(Kind::Container), set([extra_box.id.clone()]));
    assert_eq!(r.removed.names(Kind::Volume), set([extra_vol]));
    assert!(sbx.container_exists(&created.id).await);
    assert!(sbx.container_exists(&decoy_user.id).await);
    assert!(sbx.volume_exists(&paused.volume).await);

    let out = inv.run(&cli, &["plan", "--format", "json"]).await;
    out.success();
    let plan = out.plan();
    assert!(plan.step(&decoy_user.name).waits_for.is_empty());
    assert!(
        !plan.steps.iter().any(|s| s.name == inv.decoys.volumes[0]),
        "{plan:#?}"
    );
    assert_eq!(
        plan.step(&paused.container.name).state.as_deref(),
        Some("paused")
    );
    assert_eq!(plan.step(&created.name).state.as_deref(), Some("created"));
    assert_eq!(plan.step(&anon_box.name).box_id.as_deref(), Some("anon"));
    assert!(
        !plan.steps.iter().any(|s| s.name == anon_vol),
        "an unlabeled anonymous volume is not managed: {plan:#?}"
    );

    let out = inv.run(&cli, &["apply", "--format", "json"]).await;
    out.success();
    let r = out.report();
    assert_converged(&r);
    assert_eq!(
        r.removed.ids(Kind::Container),
        set([
            paused.container.id.clone(),
            created.id.clone(),
            anon_box.id.clone(),
            decoy_user.id.clone()
        ])
    );
    assert_eq!(r.removed.names(Kind::Volume), set([paused.volume.clone()]));
    for id in [&paused.container.id, &created.id, &anon_box.id] {
        assert!(!sbx.container_exists(id).await, "{id} survived apply");
    }
    assert!(!sbx.volume_exists(&paused.volume).await);
    assert!(
        !sbx.volume_exists(&anon_vol).await,
        "the anonymous volume goes with its container"
    );
}

// ----- a volume held by an unmanaged container -----------------------------

/// A box volume that an unmanaged container also mounts is never forced:
/// `plan` shows it blocked, `apply` cleans the rest of the scope and exits 1
/// with the volume in `remainingVolumes`, naming the container.
trial!(volume_held_by_an_unmanaged_container_is_left_and_named);
async fn volume_held_by_an_unmanaged_container_is_left_and_named() {
    let sbx = Sandbox::new("cli-unmanaged-user").await;
    let (held, other, leaked_vol) = tokio::join!(
        sbx.add_box("held", Run::Running),
        sbx.add_box("other", Run::Exited),
        sbx.leaked_volume(),
    );
    let user = sbx.unmanaged_user(&held.volume, Run::Running).await;
    let inv = Invariants::new(&sbx, Decoys::default()).await;
    let cli = sbx.cli().state_toml("");

    let out = inv.run(&cli, &["plan", "--format", "json"]).await;
    out.success();
    let plan = out.plan();
    assert_eq!(plan.blocked.len(), 1, "{plan:#?}");
    let blocked = plan.blocked(&held.volume);
    assert_eq!(blocked.kind, Kind::Volume);
    assert_eq!(blocked.box_id.as_deref(), Some("held"));
    let holders: Vec<(&str, Option<&str>, Option<&str>)> = blocked
        .why
        .holders()
        .iter()
        .map(|h| (h.name.as_str(), h.id.as_deref(), h.how.as_deref()))
        .collect();
    assert_eq!(
        holders,
        vec![(user.name.as_str(), Some(user.id.as_str()), Some("mounts"))],
        "{blocked:?}"
    );
    assert_eq!(blocked.why.code(), "heldByUnmanaged");
    assert_eq!(
        set(plan.steps.iter().map(|s| s.name.clone())),
        set([
            held.container.name.clone(),
            other.container.name.clone(),
            other.volume.clone(),
            leaked_vol.clone()
        ])
    );
    let out = inv.run(&cli, &["plan"]).await;
    out.success();
    assert!(out.stdout.contains("Blocked"), "{}", out.dump());
    assert!(out.stdout.contains("1 object blocked"), "{}", out.dump());
    inv.run(&cli, &["plan", "--detailed-exitcode"])
        .await
        .expect_code(2);

    let out = inv.run(&cli, &["apply", "--format", "json"]).await;
    out.expect_code(1);
    let r = out.report();
    assert_report_shape(&r);
    assert!(!r.converged);
    assert_eq!(r.remaining_volumes.len(), 1, "{r:#?}");
    let left = r.leftover(Kind::Volume, &held.volume);
    assert_eq!(left.box_id.as_deref(), Some("held"));
    assert_eq!(left.reason, blocked.why, "the plan's reason, unchanged");
    let text = left.reason.text();
    assert!(text.contains(&user.name), "{text}");
    assert!(text.contains(&user.id[..12]), "{text}");
    assert!(r.remaining_containers.is_empty(), "{r:#?}");
    assert_eq!(
        r.removed.ids(Kind::Container),
        set([held.container.id.clone(), other.container.id.clone()])
    );
    assert_eq!(
        r.removed.names(Kind::Volume),
        set([other.volume.clone(), leaked_vol.clone()])
    );
    // The engine: the volume and its unmanaged user are still there; the rest is gone.
    assert!(sbx.volume_exists(&held.volume).await);
    assert_eq!(
        sbx.container_state(&user.id).await.as_deref(),
        Some("running")
    );
    assert!(!sbx.container_exists(&held.container.id).await);
    assert!(!sbx.container_exists(&other.container.id).await);
    assert!(!sbx.volume_exists(&other.volume).await);
    assert!(!sbx.volume_exists(&leaked_vol).await);

    // Again, human: still not converged, the leftover names the container.
    let out = inv.run(&cli, &["apply"]).await;
    out.expect_code(1);
    assert!(out.stdout.contains("NOT converged"), "{}", out.dump());
    let line = out
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Left behind"))
        .find(|l| l.contains(&held.volume))
        .unwrap_or_else(|| panic!("no leftover line\n{}", out.dump()));
    assert!(line.contains(&user.name), "{line}");
    assert!(sbx.volume_exists(&held.volume).await);
    assert!(sbx.container_exists(&user.id).await);
}

// ----- an unreachable engine -------------------------------------------------

/// With `DOCKER_HOST` at a missing socket or a closed TCP port: `plan` and
/// `inventory` exit 1 with the endpoint on stderr; `apply`/`destroy --format
/// json` exit 1 with a full report on stdout naming the engine.
trial!(unreachable_engine_fails_with_a_report);
async fn unreachable_engine_fails_with_a_report() {
    let sbx = Sandbox::new("cli-unreachable").await;
    let leaked = sbx.leaked_volume().await;
    let inv = Invariants::new(&sbx, Decoys::default()).await;
    let tcp = format!("tcp://127.0.0.1:{}", closed_port());
    for host in ["unix:///nonexistent.sock", tcp.as_str()] {
        let cli = sbx
            .cli()
            .state_toml("")
            .docker_host(host)
            .args(["--timeout", "5"])
            .deadline(Duration::from_secs(30));
        let message = format!("cannot reach the Docker engine at {host}");

        for args in [
            &["plan"][..],
            &["plan", "--detailed-exitcode"],
            &["inventory"],
        ] {
            let out = inv.run(&cli, args).await;
            out.expect_code(1);
            assert!(out.stderr.starts_with("error: "), "{}", out.dump());
            assert!(out.stderr.contains(&message), "{}", out.dump());
            assert!(out.stdout.is_empty(), "{}", out.dump());
        }
        for args in [
            &["apply", "--format", "json"][..],
            &["destroy", "--prune", "--format", "json"],
            &["destroy", "somebox", "--format", "json"],
        ] {
            let out = inv.run(&cli, args).await;
            out.expect_code(1);
            assert!(out.stderr.contains(&message), "{}", out.dump());
            let r = out.report();
            assert_report_shape(&r);
            assert!(!r.converged, "{r:#?}");
            assert!(r.removed.is_empty(), "{r:#?}");
            assert!(r.all_remaining().next().is_none(), "{r:#?}");
            let f = r.only_failure();
            assert_eq!(f.kind, FailureKind::Engine, "{r:#?}");
            assert!(f.error.contains(&message), "{r:#?}");
        }
        let out = inv.run(&cli, &["apply"]).await;
        out.expect_code(1);
        assert!(out.stderr.contains(&message), "{}", out.dump());
    }
    assert!(sbx.volume_exists(&leaked).await);
}

// ----- broken state files and invalid invocations ---------------------------

/// A state file that is not TOML, has an unknown key, or declares a box twice:
/// every command exits 1 naming file:line:col and touches nothing. A missing
/// explicit state file is exit 1; a usage error is exit 2.
trial!(broken_state_and_bad_invocations_touch_nothing);
async fn broken_state_and_bad_invocations_touch_nothing() {
    let sbx = Sandbox::new("cli-broken-state").await;
    let (_, _, _) = tokio::join!(
        sbx.add_box("x", Run::Running),
        sbx.leaked_container(Run::Exited),
        sbx.leaked_volume(),
    );
    let inv = Invariants::new(&sbx, Decoys::default()).await;
    let before = world(&sbx).await;

    // (contents, line, column, what the message says)
    let broken: [(&str, usize, usize, &str); 3] = [
        (
            "[[box]]\nid = \"x\"\n[volumes\nkeep = []\n",
            3,
            9,
            "invalid TOML",
        ),
        ("[[box]]\nid = \"x\"\ncolour = \"red\"\n", 3, 1, "colour"),
        (
            "[[box]]\nid = \"x\"\n\n[[box]]\nid = \"x\"\n",
            5,
            6,
            "duplicate box id",
        ),
    ];
    for (toml, line, col, what) in broken {
        // As --state FILE.
        let cli = sbx.cli().state_toml(toml);
        let path = cli.dir().join("state.toml");
        let at = format!("{}:{line}:{col}:", path.display());
        for args in [
            &["plan"][..],
            &["apply"],
            &["apply", "--format", "json"],
            &["destroy", "--prune"],
            &["destroy", "x"],
            &["inventory"],
        ] {
            let out = inv.run(&cli, args).await;
            out.expect_code(1);
            assert!(out.stderr.contains(&at), "expected {at}\n{}", out.dump());
            assert!(out.stderr.contains(what), "expected {what}\n{}", out.dump());
        }
        // As state/sandboxes.toml in the working directory.
        let cli = sbx.cli().default_state_toml(toml);
        let at = format!("state/sandboxes.toml:{line}:{col}:");
        for args in [&["apply"][..], &["destroy"], &["destroy", "--prune"]] {
            let out = inv.run(&cli, args).await;
            out.expect_code(1);
            assert!(out.stderr.contains(&at), "expected {at}\n{}", out.dump());
        }
        assert_eq!(
            world(&sbx).await,
            before,
            "a broken state file touched the engine"
        );
    }

    // A state file whose [scope] gives the scope label another value than --scope.
    let cli = sbx
        .cli()
        .state_toml("[scope]\nlabels = { \"ca.sandbox.test\" = \"someone-else\" }\n");
    for args in [&["apply"][..], &["destroy", "--prune"], &["plan"]] {
        let out = inv.run(&cli, args).await;
        out.expect_code(1);
        assert!(out.stderr.contains("make them agree"), "{}", out.dump());
    }

    // An explicit state file that does not exist: --state, or SANDBOXCTL_STATE.
    let cli = sbx.cli();
    let missing = cli.dir().join("nope.toml");
    let missing = missing.to_str().unwrap();
    for args in [
        &["apply", "--state", missing][..],
        &["destroy", "--state", missing],
    ] {
        let out = inv.run(&cli, args).await;
        out.expect_code(1);
        assert!(out.stderr.contains(missing), "{}", out.dump());
        assert!(out.stderr.contains("does not exist"), "{}", out.dump());
    }
    let out = inv
        .run(
            &sbx.cli().env("SANDBOXCTL_STATE", missing),
            &["destroy", "--prune"],
        )
        .await;
    out.expect_code(1);
    assert!(out.stderr.contains("does not exist"), "{}", out.dump());
    // apply without any state file: an error, not "everything is leaked".
    let out = inv.run(&sbx.cli(), &["apply"]).await;
    out.expect_code(1);
    assert!(out.stderr.contains("no state file"), "{}", out.dump());

    // Invalid invocations: exit 2, before anything is read or listed.
    for args in [
        &["--scope", "novalue", "destroy", "--prune"][..],
        &["destroy", "--prune", "x"],
        &["destroy", "--prune", "--bogus"],
        &["apply", "--bogus"],
        &["destroy", "--prune", "--keep-volume"],
        &["destroy", "--prune", "--format", "yaml"],
    ] {
        let out = inv.run(&sbx.cli(), args).await;
        out.expect_code(2);
        assert!(!out.stderr.is_empty(), "{}", out.dump());
        assert!(out.stdout.is_empty(), "{}", out.dump());
    }
    assert_eq!(
        world(&sbx).await,
        before,
        "nothing in the scope was touched"
    );
}

// ----- contract points ------------------------------------------------------

/// The contract's plan JSON has a `summary` key, the same line `plan` prints.
trial!(plan_json_carries_the_summary_line);
async fn plan_json_carries_the_summary_line() {
    let sbx = Sandbox::new("cli-plan-summary").await;
    sbx.leaked_volume().await;
    let cli = sbx.cli().state_toml("");
    let human = cli.run_with(["plan"]);
    human.success();
    let summary = human
        .stdout
        .lines()
        .find(|l| l.starts_with("Plan: "))
        .unwrap_or_else(|| panic!("no summary line\n{}", human.dump()))
        .to_string();
    assert!(
        summary.starts_with("Plan: remove 0 containers, 1 volume and 0 networks;"),
        "{summary}"
    );
    let out = cli.run_with(["plan", "--format", "json"]);
    out.success();
    let plan = out.plan();
    assert_eq!(plan.summary, summary, "{plan:#?}");
}

/// With `--format json`, a broken state file refuses apply, destroy and plan
/// alike before any engine work: each prints the one error document on
/// stdout (decision 20; before, apply and destroy printed a report and plan
/// nothing), naming the file and the place, and touches nothing.
trial!(json_error_document_when_the_state_file_is_broken);
async fn json_error_document_when_the_state_file_is_broken() {
    let sbx = Sandbox::new("cli-json-bad-state").await;
    let leaked = sbx.leaked_volume().await;
    let cli = sbx
        .cli()
        .state_toml("[[box]]\nid = \"x\"\ncolour = \"red\"\n");
    for args in [
        &["apply", "--format", "json"][..],
        &["destroy", "--prune", "--format", "json"],
        &["plan", "--format", "json"],
    ] {
        let out = cli.run_with(args);
        out.expect_code(1);
        assert!(out.stderr.contains("state.toml:3:1:"), "{}", out.dump());
        let refused = out.json();
        let error = &refused["error"];
        assert_eq!(error["code"], "unknownKey", "{}", out.dump());
        assert_eq!(
            (error["line"].clone(), error["column"].clone()),
            (3.into(), 1.into())
        );
        assert!(
            error["file"]
                .as_str()
                .unwrap_or_default()
                .ends_with("state.toml"),
            "{}",
            out.dump()
        );
    }
    assert!(sbx.volume_exists(&leaked).await);
}

/// `destroy` with no ID means `--prune`, and `--prune --keep-volume` is a
/// usage error; so is `destroy --keep-volume` without an ID: it must not
/// silently prune the very volumes the user asked to keep.
trial!(destroy_keep_volume_without_an_id_is_refused);
async fn destroy_keep_volume_without_an_id_is_refused() {
    let sbx = Sandbox::new("cli-keep-volume-no-id").await;
    let (gone, leaked) = tokio::join!(sbx.add_box("gone", Run::Exited), sbx.leaked_volume());
    let before = world(&sbx).await;
    let out = sbx.cli().run_with(["destroy", "--keep-volume"]);
    assert!(sbx.volume_exists(&gone.volume).await, "{}", out.dump());
    assert!(sbx.volume_exists(&leaked).await, "{}", out.dump());
    out.expect_code(2);
    assert_eq!(world(&sbx).await, before);
}

/// A unix socket that accepts every connection and never answers (nor
/// closes): the connections are held until the returned guard is dropped
/// with its folder.
struct MuteSocket {
    host: String,
    _dir: tempfile::TempDir,
}

fn mute_socket() -> MuteSocket {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mute.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            match stream {
                Ok(s) => held.push(s),
                Err(_) => return,
            }
        }
    });
    MuteSocket {
        host: format!("unix://{}", path.display()),
        _dir: dir,
    }
}

// Issue 43: `--call-timeout` bounds the API version check too (it waited
// --timeout, 30 s), and --timeout takes the state file's durations.
trial!(call_timeout_bounds_the_version_check);
fn call_timeout_bounds_the_version_check() {
    let mute = mute_socket();
    let started = std::time::Instant::now();
    let out = Cli::new()
        .docker_host(&mute.host)
        .state_toml("[[box]]\nid = \"a\"\n")
        .deadline(Duration::from_secs(20))
        .args(["plan", "--call-timeout", "2"])
        .run();
    let took = started.elapsed();
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        took < Duration::from_secs(5),
        "plan --call-timeout 2 took {took:?}"
    );
    assert!(
        out.stderr
            .contains("no answer to the API version check within 2s")
            || out
                .stdout
                .contains("no answer to the API version check within 2s"),
        "{out:?}"
    );

    // The same as a duration, and --timeout as one: accepted, and bounded
    // alike.
    let started = std::time::Instant::now();
    let out = Cli::new()
        .docker_host(&mute.host)
        .state_toml("[[box]]\nid = \"a\"\n")
        .deadline(Duration::from_secs(20))
        .args(["plan", "--timeout", "30s", "--call-timeout", "1s"])
        .run();
    let took = started.elapsed();
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(took < Duration::from_secs(4), "took {took:?}");
    assert!(
        format!("{}{}", out.stdout, out.stderr).contains("within 1s"),
        "{out:?}"
    );
}

// Issue 43: every duration flag takes the one grammar, a bare number as
// seconds, and refuses in the tool's own words.
trial!(duration_flags_share_the_state_files_grammar);
fn duration_flags_share_the_state_files_grammar() {
    for args in [
        ["--timeout", "soon"],
        ["--call-timeout", "1.5h"],
        ["--grace", "1y"],
        ["--grace", "1h 30m"],
    ] {
        let out = Cli::new()
            .unreachable_docker()
            .state_toml("[[box]]\nid = \"a\"\n")
            .args(args)
            .arg("plan")
            .run();
        assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
        assert!(
            out.stderr.contains("is not a duration")
                && out.stderr.contains("use 30s, 10m, 8h or 2d"),
            "{args:?}: {}",
            out.stderr
        );
        assert!(!out.stderr.contains("invalid digit"), "{}", out.stderr);
    }
    let out = Cli::new()
        .unreachable_docker()
        .state_toml("[[box]]\nid = \"a\"\n")
        .args(["--timeout", "2h", "plan"])
        .run();
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("from 1s to 1h"), "{}", out.stderr);
    // Accepted: the plan runs (and fails only on the missing engine).
    for args in [
        ["--timeout", "30s"],
        ["--timeout", "30"],
        ["--grace", "90"],
        ["--grace", "1h30m"],
    ] {
        let out = Cli::new()
            .unreachable_docker()
            .state_toml("[[box]]\nid = \"a\"\n")
            .args(args)
            .arg("plan")
            .run();
        assert_eq!(out.code, Some(1), "{args:?}: {out:?}");
        assert!(
            !out.stderr.contains("not a duration"),
            "{args:?}: {}",
            out.stderr
        );
    }
}
