//! The `sandboxctl` binary end to end against the real Docker engine.
//!
//! Every test builds its own corner of the shared daemon with the `Sandbox`
//! harness (unique scope label, cleaned up on drop, also after a panic) and
//! runs the CLI only through `sbx.cli()`, i.e. always with
//! `--scope ca.sandbox.test=<unique>`. Claims are checked three ways: exit
//! code, output (the JSON keys and values, the human text where it matters),
//! and the engine's real state afterwards, queried through the harness. After
//! every command, the decoys (unlabeled and look-alike objects) must still be
//! there and the `ca-sbx:*` images must be exactly what they were.
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
use serde_json::Value;

use crate::support::cli::{Cli, Output};
use crate::support::docker::{
    Container, ContainerSpec, Decoys, Run, Sandbox, SandboxBox, VolumeSpec, SCOPE_KEY, SLEEP,
    TEST_IMAGE,
};

// ----- local helpers ---------------------------------------------------------

/// Everything of one test as the engine holds it: containers by name (ID and
/// state), volumes, and the `ca-sbx:*` images.
#[derive(Debug, Clone, PartialEq, Eq)]
struct World {
    containers: BTreeMap<String, (String, String)>,
    volumes: Vec<String>,
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
        images: sbx.ca_sbx_images().await,
    }
}

/// The state of container `id` (`running`, `exited`, ...), or `None` if it is gone.
async fn container_state(sbx: &Sandbox, id: &str) -> Option<String> {
    match sbx
        .docker()
        .inspect_container(id, None::<InspectContainerOptions>)
        .await
    {
        Ok(c) => Some(
            c.state
                .and_then(|s| s.status)
                .map(|s| s.to_string())
                .unwrap_or_default(),
        ),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => None,
        Err(e) => panic!("inspect container {id}: {e}"),
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

    /// No decoy is named anywhere in a JSON document (plan, report, inventory).
    fn assert_no_decoy_in(&self, doc: &Value, what: &str) {
        let mut strings = BTreeSet::new();
        collect_strings(doc, &mut strings);
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

/// The values of `key` in every element of the array `v`.
fn field(v: &Value, key: &str) -> BTreeSet<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected an array, got {v}"))
        .iter()
        .map(|x| {
            x[key]
                .as_str()
                .unwrap_or_else(|| panic!("{key} missing in {x}"))
                .to_string()
        })
        .collect()
}

fn array(v: &Value) -> &Vec<Value> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected an array, got {v}"))
}

/// Checks that `r` is a full report: every contract key with the right type,
/// and every entry with its fields.
fn assert_report_shape(r: &Value) {
    let obj = r
        .as_object()
        .unwrap_or_else(|| panic!("report is not an object: {r}"));
    for key in [
        "converged",
        "removed",
        "kept",
        "retained",
        "failures",
        "remainingContainers",
        "remainingVolumes",
    ] {
        assert!(obj.contains_key(key), "report lacks {key:?}: {r:#}");
    }
    assert!(r["converged"].is_boolean(), "{r:#}");
    for c in array(&r["removed"]["containers"]) {
        for k in ["id", "name", "box"] {
            assert!(c.get(k).is_some(), "removed container lacks {k}: {c}");
        }
    }
    for v in array(&r["removed"]["volumes"]) {
        for k in ["name", "box"] {
            assert!(v.get(k).is_some(), "removed volume lacks {k}: {v}");
        }
        assert!(v.get("id").is_none(), "volumes have no id: {v}");
    }
    for c in array(&r["kept"]["containers"]) {
        for k in ["id", "name", "box", "why"] {
            assert!(c.get(k).is_some(), "kept container lacks {k}: {c}");
        }
    }
    for v in array(&r["kept"]["volumes"]) {
        for k in ["name", "box", "why"] {
            assert!(v.get(k).is_some(), "kept volume lacks {k}: {v}");
        }
    }
    for i in array(&r["retained"]["images"]) {
        assert!(i["id"].is_string() && i["tags"].is_array(), "{i}");
    }
    for f in array(&r["failures"]) {
        let kind = f["kind"].as_str().unwrap_or_default();
        assert!(
            ["container", "volume", "engine"].contains(&kind),
            "failure kind {kind:?}: {f}"
        );
        assert!(f["name"].is_string() && f["error"].is_string(), "{f}");
        if kind == "container" {
            assert!(f["id"].is_string(), "a container failure has its id: {f}");
        }
    }
    for c in array(&r["remainingContainers"]) {
        for k in ["id", "name", "box", "reason"] {
            assert!(c.get(k).is_some(), "remaining container lacks {k}: {c}");
        }
    }
    for v in array(&r["remainingVolumes"]) {
        for k in ["name", "box", "reason"] {
            assert!(v.get(k).is_some(), "remaining volume lacks {k}: {v}");
        }
    }
}

/// A converged report: no failures, nothing remaining.
fn assert_converged(r: &Value) {
    assert_report_shape(r);
    assert_eq!(r["converged"], true, "{r:#}");
    assert_eq!(r["failures"], serde_json::json!([]), "{r:#}");
    assert_eq!(r["remainingContainers"], serde_json::json!([]), "{r:#}");
    assert_eq!(r["remainingVolumes"], serde_json::json!([]), "{r:#}");
}

/// The retained images list names the test image by tag, with its ID.
fn assert_retains_test_image(images: &Value, sbx: &Sandbox) {
    let found = array(images)
        .iter()
        .find(|i| {
            array(&i["tags"])
                .iter()
                .any(|t| t.as_str() == Some(TEST_IMAGE))
        })
        .unwrap_or_else(|| panic!("{TEST_IMAGE} not retained: {images:#}"));
    assert_eq!(found["id"].as_str(), Some(sbx.image_id()), "{found}");
}

/// The plan step that removes the object named `name`.
fn step<'v>(plan: &'v Value, name: &str) -> &'v Value {
    array(&plan["steps"])
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no step removes {name}: {plan:#}"))
}

fn step_no(plan: &Value, name: &str) -> u64 {
    step(plan, name)["step"].as_u64().unwrap()
}

fn waits_for(plan: &Value, name: &str) -> Vec<u64> {
    array(&step(plan, name)["waitsFor"])
        .iter()
        .map(|w| w.as_u64().unwrap())
        .collect()
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
#[tokio::test]
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
    let plan = out.json();
    assert_eq!(plan["version"], 1);
    assert_eq!(
        plan["scope"],
        serde_json::json!({ "ca.sandbox": "1", SCOPE_KEY: sbx.scope_value() })
    );
    let removed_containers: Vec<(&Container, Option<&str>, &str)> = vec![
        (&run1.container, Some("run1"), "running"),
        (&done1.container, Some("done1"), "exited"),
        (&shared.a, Some("sa"), "running"),
        (&shared.b, Some("sb"), "running"),
        (&leaked_run, None, "running"),
        (&leaked_exited, None, "exited"),
    ];
    let steps = array(&plan["steps"]);
    assert_eq!(steps.len(), 10, "6 containers and 4 volumes: {plan:#}");
    for (i, s) in steps.iter().enumerate() {
        assert_eq!(s["step"].as_u64(), Some(i as u64 + 1), "{s}");
        assert!(s["why"].as_str().is_some_and(|w| !w.is_empty()), "{s}");
        assert!(s["waitsFor"].is_array(), "{s}");
        assert!(s.get("box").is_some(), "{s}");
    }
    for (c, b, state) in &removed_containers {
        let s = step(&plan, &c.name);
        assert_eq!(s["kind"], "container", "{s}");
        assert_eq!(s["id"].as_str(), Some(c.id.as_str()), "{s}");
        assert_eq!(s["box"].as_str(), *b, "{s}");
        assert_eq!(s["state"], *state, "{s}");
        assert_eq!(s["waitsFor"], serde_json::json!([]), "{s}");
        let why = s["why"].as_str().unwrap();
        match b {
            Some(b) => assert!(why.contains(&format!("box {b} is not declared")), "{s}"),
            None => assert!(why.contains("no ca.sandbox.id"), "{s}"),
        }
    }
    for (v, b) in [
        (&run1.volume, Some("run1")),
        (&done1.volume, Some("done1")),
        (&shared.volume, None),
        (&leaked_vol, None),
    ] {
        let s = step(&plan, v);
        assert_eq!(s["kind"], "volume", "{s}");
        assert_eq!(s["box"].as_str(), b, "{s}");
        assert!(s.get("id").is_none(), "volumes have no id: {s}");
    }
    // A volume waits for every container that mounts it, and for nothing else.
    assert_eq!(
        waits_for(&plan, &run1.volume),
        vec![step_no(&plan, &run1.container.name)]
    );
    assert_eq!(
        waits_for(&plan, &done1.volume),
        vec![step_no(&plan, &done1.container.name)]
    );
    let mut both = vec![
        step_no(&plan, &shared.a.name),
        step_no(&plan, &shared.b.name),
    ];
    both.sort_unstable();
    assert_eq!(waits_for(&plan, &shared.volume), both);
    assert!(waits_for(&plan, &leaked_vol).is_empty());
    for s in steps {
        for w in array(&s["waitsFor"]) {
            assert!(w.as_u64().unwrap() < s["step"].as_u64().unwrap(), "{s}");
        }
    }
    assert_eq!(plan["blocked"], serde_json::json!([]));
    // Kept: the declared box (container and volume) and the kept volume.
    let kept_c = array(&plan["kept"]["containers"]);
    assert_eq!(kept_c.len(), 1, "{plan:#}");
    assert_eq!(kept_c[0]["id"].as_str(), Some(keep.container.id.as_str()));
    assert_eq!(kept_c[0]["box"], "keepme");
    assert_eq!(kept_c[0]["why"], "declared box");
    assert_eq!(
        field(&plan["kept"]["volumes"], "name"),
        set([keep.volume.clone(), notes.clone()])
    );
    for v in array(&plan["kept"]["volumes"]) {
        let why = if v["name"] == notes.as_str() {
            "listed in volumes.keep"
        } else {
            "declared box"
        };
        assert_eq!(v["why"], why, "{v}");
    }
    assert_retains_test_image(&plan["retained"]["images"], &sbx);
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
        text.contains("Plan: remove 6 containers and 4 volumes; keep 3 objects; retain "),
        "{text}"
    );
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
    let saved: Value =
        serde_json::from_str(&cli.read("saved-plan.json")).expect("saved plan is JSON");
    assert_eq!(
        saved, plan,
        "the saved plan is the plan --format json prints"
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
        text.contains("7 containers and 6 volumes managed;"),
        "{text}"
    );
    let out = inv.run(&cli, &["inventory", "--format", "json"]).await;
    out.success();
    let view = out.json();
    let boxes = array(&view["boxes"]);
    let group = |b: Option<&str>| -> &Value {
        boxes
            .iter()
            .find(|g| g["box"].as_str() == b)
            .unwrap_or_else(|| panic!("no group {b:?}: {view:#}"))
    };
    let by_box: BTreeMap<Option<&str>, (usize, usize)> = boxes
        .iter()
        .map(|g| {
            (
                g["box"].as_str(),
                (array(&g["containers"]).len(), array(&g["volumes"]).len()),
            )
        })
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
        "{view:#}"
    );
    let c = &group(Some("done1"))["containers"][0];
    assert_eq!(c["id"].as_str(), Some(done1.container.id.as_str()));
    assert_eq!(c["state"], "exited");
    assert_eq!(c["mounts"], serde_json::json!([done1.volume]));
    assert_eq!(group(Some("run1"))["containers"][0]["state"], "running");
    assert_eq!(
        field(&group(None)["containers"], "state"),
        set(["running", "exited"])
    );
    assert_eq!(
        array(&group(None)["volumes"])
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect::<BTreeSet<_>>(),
        set([shared.volume.clone(), leaked_vol.clone()])
    );
    assert!(array(&view["images"])
        .iter()
        .any(|i| i["id"].as_str() == Some(sbx.image_id())));
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
    let report = out.json();
    assert_converged(&report);
    assert_eq!(
        field(&report["removed"]["containers"], "id"),
        removed_containers
            .iter()
            .map(|(c, _, _)| c.id.clone())
            .collect()
    );
    assert_eq!(
        field(&report["removed"]["volumes"], "name"),
        set([
            run1.volume.clone(),
            done1.volume.clone(),
            shared.volume.clone(),
            leaked_vol.clone()
        ])
    );
    for c in array(&report["removed"]["containers"]) {
        let (_, b, _) = removed_containers
            .iter()
            .find(|(x, _, _)| c["id"] == x.id.as_str())
            .unwrap();
        assert_eq!(c["box"].as_str(), *b, "{c}");
        assert!(c["name"].is_string(), "{c}");
    }
    assert_eq!(report["kept"], plan["kept"]);
    assert_retains_test_image(&report["retained"]["images"], &sbx);
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
        container_state(&sbx, &keep.container.id).await.as_deref(),
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
            .contains("Removed 0 containers and 0 volumes; kept 3 objects"),
        "{}",
        out.dump()
    );
    assert!(out.stdout.contains("Converged"), "{}", out.dump());
    let out = inv.run(&cli, &["apply", "--format", "json"]).await;
    out.success();
    let again = out.json();
    assert_converged(&again);
    assert_eq!(
        again["removed"],
        serde_json::json!({"containers": [], "volumes": []})
    );
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
#[tokio::test]
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
    let r = out.json();
    assert_converged(&r);
    assert_eq!(
        r["removed"]["containers"],
        serde_json::json!([{ "id": a.container.id, "name": a.container.name, "box": "a" }])
    );
    assert_eq!(
        r["removed"]["volumes"],
        serde_json::json!([{ "name": a.volume, "box": "a" }])
    );
    assert_eq!(
        field(&r["kept"]["containers"], "id"),
        set([
            b.container.id.clone(),
            c.container.id.clone(),
            d.container.id.clone(),
            leaked.id.clone()
        ])
    );
    assert_retains_test_image(&r["retained"]["images"], &sbx);
    inv.assert_no_decoy_in(&r, "destroy a");
    assert_eq!(exists(&a).await, (false, false));
    for bx in [&b, &c, &d] {
        assert_eq!(exists(bx).await, (true, true), "box {}", bx.box_id);
    }
    assert_eq!(
        container_state(&sbx, &c.container.id).await.as_deref(),
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
        out.stdout.contains("Removed 1 container and 0 volumes"),
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
    let r = out.json();
    assert_converged(&r);
    assert_eq!(
        field(&r["removed"]["containers"], "id"),
        set([leaked.id.clone()])
    );
    assert_eq!(
        field(&r["removed"]["volumes"], "name"),
        set([leaked_vol.clone(), b.volume.clone()])
    );
    assert_eq!(
        field(&r["kept"]["volumes"], "name"),
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
    let r = out.json();
    assert_converged(&r);
    assert_eq!(
        field(&r["removed"]["containers"], "id"),
        set([c.container.id.clone()])
    );
    assert_eq!(
        field(&r["removed"]["volumes"], "name"),
        set([c.volume.clone()])
    );
    assert_eq!(exists(&c).await, (false, false));
    assert_eq!(exists(&d).await, (true, true));
    assert!(sbx.volume_exists(&notes).await);

    // ---- destroy with no ID and no state file anywhere: every managed
    // object in the scope goes; the decoys stay.
    let out = inv.run(&sbx.cli(), &["destroy", "--format", "json"]).await;
    out.success();
    let r = out.json();
    assert_converged(&r);
    assert_eq!(
        field(&r["removed"]["containers"], "id"),
        set([d.container.id.clone()])
    );
    assert_eq!(
        field(&r["removed"]["volumes"], "name"),
        set([d.volume.clone(), notes.clone()])
    );
    assert_eq!(
        r["kept"],
        serde_json::json!({"containers": [], "volumes": []})
    );
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
    assert_eq!(out.json()["boxes"], serde_json::json!([]));
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
#[tokio::test]
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
        container_state(&sbx, &paused.container.id).await.as_deref(),
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
    let r = out.json();
    assert_converged(&r);
    assert_eq!(
        field(&r["removed"]["containers"], "id"),
        set([extra_box.id.clone()])
    );
    assert_eq!(field(&r["removed"]["volumes"], "name"), set([extra_vol]));
    assert!(sbx.container_exists(&created.id).await);
    assert!(sbx.container_exists(&decoy_user.id).await);
    assert!(sbx.volume_exists(&paused.volume).await);

    let out = inv.run(&cli, &["plan", "--format", "json"]).await;
    out.success();
    let plan = out.json();
    assert_eq!(
        step(&plan, &decoy_user.name)["waitsFor"],
        serde_json::json!([])
    );
    assert!(
        !array(&plan["steps"])
            .iter()
            .any(|s| s["name"] == inv.decoys.volumes[0].as_str()),
        "{plan:#}"
    );
    assert_eq!(step(&plan, &paused.container.name)["state"], "paused");
    assert_eq!(step(&plan, &created.name)["state"], "created");
    assert_eq!(step(&plan, &anon_box.name)["box"], "anon");
    assert!(
        !array(&plan["steps"])
            .iter()
            .any(|s| s["name"] == anon_vol.as_str()),
        "an unlabeled anonymous volume is not managed: {plan:#}"
    );

    let out = inv.run(&cli, &["apply", "--format", "json"]).await;
    out.success();
    let r = out.json();
    assert_converged(&r);
    assert_eq!(
        field(&r["removed"]["containers"], "id"),
        set([
            paused.container.id.clone(),
            created.id.clone(),
            anon_box.id.clone(),
            decoy_user.id.clone()
        ])
    );
    assert_eq!(
        field(&r["removed"]["volumes"], "name"),
        set([paused.volume.clone()])
    );
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
#[tokio::test]
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
    let plan = out.json();
    let blocked = array(&plan["blocked"]);
    assert_eq!(blocked.len(), 1, "{plan:#}");
    assert_eq!(blocked[0]["kind"], "volume");
    assert_eq!(blocked[0]["name"].as_str(), Some(held.volume.as_str()));
    assert_eq!(blocked[0]["box"], "held");
    assert!(
        blocked[0]["why"].as_str().unwrap().contains(&user.name),
        "{plan:#}"
    );
    assert_eq!(
        field(&plan["steps"], "name"),
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
    assert!(out.stdout.contains("1 volume blocked"), "{}", out.dump());
    inv.run(&cli, &["plan", "--detailed-exitcode"])
        .await
        .expect_code(2);

    let out = inv.run(&cli, &["apply", "--format", "json"]).await;
    out.expect_code(1);
    let r = out.json();
    assert_report_shape(&r);
    assert_eq!(r["converged"], false);
    let left = array(&r["remainingVolumes"]);
    assert_eq!(left.len(), 1, "{r:#}");
    assert_eq!(left[0]["name"].as_str(), Some(held.volume.as_str()));
    assert_eq!(left[0]["box"], "held");
    let reason = left[0]["reason"].as_str().unwrap();
    assert!(reason.contains(&user.name), "{reason}");
    assert!(reason.contains(&user.id[..12]), "{reason}");
    assert_eq!(r["remainingContainers"], serde_json::json!([]));
    assert_eq!(
        field(&r["removed"]["containers"], "id"),
        set([held.container.id.clone(), other.container.id.clone()])
    );
    assert_eq!(
        field(&r["removed"]["volumes"], "name"),
        set([other.volume.clone(), leaked_vol.clone()])
    );
    // The engine: the volume and its unmanaged user are still there; the rest is gone.
    assert!(sbx.volume_exists(&held.volume).await);
    assert_eq!(
        container_state(&sbx, &user.id).await.as_deref(),
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
#[tokio::test]
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
            let r = out.json();
            assert_report_shape(&r);
            assert_eq!(r["converged"], false, "{r:#}");
            assert_eq!(
                r["removed"],
                serde_json::json!({"containers": [], "volumes": []})
            );
            assert_eq!(r["remainingContainers"], serde_json::json!([]));
            assert_eq!(r["remainingVolumes"], serde_json::json!([]));
            let failures = array(&r["failures"]);
            assert_eq!(failures.len(), 1, "{r:#}");
            assert_eq!(failures[0]["kind"], "engine", "{r:#}");
            assert!(
                failures[0]["error"].as_str().unwrap().contains(&message),
                "{r:#}"
            );
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
#[tokio::test]
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

// ----- contract points (see the report to the lead) -----------------------

/// The contract's plan JSON has a `summary` key, the same line `plan` prints.
#[tokio::test]
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
        summary.starts_with("Plan: remove 0 containers and 1 volume;"),
        "{summary}"
    );
    let out = cli.run_with(["plan", "--format", "json"]);
    out.success();
    let plan = out.json();
    assert_eq!(plan["summary"].as_str(), Some(summary.as_str()), "{plan:#}");
}

/// With `--format json`, apply and destroy print the report (every key) on
/// stdout whenever they fail, not only when the engine is unreachable: also
/// for a broken state file (nothing touched, converged false).
#[tokio::test]
async fn json_report_also_when_the_state_file_is_broken() {
    let sbx = Sandbox::new("cli-json-bad-state").await;
    let leaked = sbx.leaked_volume().await;
    let cli = sbx
        .cli()
        .state_toml("[[box]]\nid = \"x\"\ncolour = \"red\"\n");
    for args in [
        &["apply", "--format", "json"][..],
        &["destroy", "--prune", "--format", "json"],
    ] {
        let out = cli.run_with(args);
        out.expect_code(1);
        assert!(out.stderr.contains("state.toml:3:1:"), "{}", out.dump());
        let r: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "`{}` printed no JSON report ({e})\n{}",
                out.command,
                out.dump()
            )
        });
        assert_report_shape(&r);
        assert_eq!(r["converged"], false);
        assert!(array(&r["failures"]).iter().any(|f| f["error"]
            .as_str()
            .is_some_and(|e| e.contains("state.toml:3:1"))));
    }
    assert!(sbx.volume_exists(&leaked).await);
}

/// `destroy` with no ID means `--prune`, and `--prune --keep-volume` is a
/// usage error; so is `destroy --keep-volume` without an ID: it must not
/// silently prune the very volumes the user asked to keep.
#[tokio::test]
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
