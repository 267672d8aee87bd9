//! The planner and the report against the in-memory engine: one snapshot set
//! per example state in `state/examples/` (with its inventory fixture in
//! `tests/fixtures/`), plus scripted faults the real engine cannot produce on
//! demand, namespace joins only an inspection shows, and hostile label values.

use std::collections::BTreeSet;
use std::path::Path;

use sandboxctl::cli::config;
use sandboxctl::engine::memory::{ContainerInfo, FaultAction, MemoryEngine, Op, World};
use sandboxctl::engine::{EngineError, ErrorKind};
use sandboxctl::exec::apply::{apply, ApplyOptions};
use sandboxctl::exec::event::{Event, Observer, Silent};
use sandboxctl::exec::reconcile::plan_once;
use sandboxctl::exec::report::Report;
use sandboxctl::exec::verify::verify;
use sandboxctl::model::Outcome;
use sandboxctl::model::{Kind, Reason, Scope};
use sandboxctl::plan::{DeclaredBox, Goal, Plan};
use sandboxctl::render;

use crate::support::schema::check_text;
use sandboxctl::state::DesiredState;
use tokio_util::sync::CancellationToken;

/// The time every plan here is made for: 2026-12-01T00:00:00Z.
const NOW: i64 = 1_796_083_200;

/// The longest line human output may have, whatever the engine returned.
const MAX_HUMAN_LINE: usize = 500;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn fixture(stem: &str) -> World {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/{stem}.toml"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("fixture {} for example {stem}: {e}", path.display()));
    World::from_toml(&text).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

/// The inventory fixture that goes with an example state file.
fn world_for(example: &Path) -> World {
    fixture(example.file_stem().unwrap().to_str().unwrap())
}

/// The goal `plan` and `apply` make of a state file (no `--grace`: the file's own).
fn goal_of(desired: &DesiredState) -> sandboxctl::plan::Goal {
    config::reconcile(desired, desired.policy.grace)
}

fn scope_of(desired: &DesiredState) -> Scope {
    Scope::new(desired.scope.clone())
}

/// Plans as `plan` and `apply` do: list, plan, and inspect the unmanaged
/// containers for shared pid/ipc namespaces when containers would go.
async fn plan_with(engine: &MemoryEngine, desired: &DesiredState) -> Plan {
    let goal = goal_of(desired);
    let (_, plan) = plan_once(engine, &goal, &scope_of(desired), NOW)
        .await
        .expect("memory listing");
    plan
}

/// The plan from the listings alone, without inspecting anything.
async fn plan_from_listing(engine: &MemoryEngine, desired: &DesiredState) -> Plan {
    let inventory = sandboxctl::exec::list::inventory(engine, &scope_of(desired))
        .await
        .expect("memory listing");
    Plan::build(&goal_of(desired), &inventory, NOW)
}

/// Applies `plan` measuring what it reclaims (`--reclaimed`: the fixture's
/// `[sizes]`), then verifies.
async fn apply_and_verify(engine: &MemoryEngine, plan: &Plan) -> Report {
    let options = ApplyOptions {
        reclaimed: true,
        ..ApplyOptions::default()
    };
    let applied = apply(engine, plan, &options, &CancellationToken::new(), &Silent).await;
    verify(engine, plan, &applied).await
}

/// Load an example relative to the crate root, so paths in snapshots are stable.
fn load_example(path: &Path) -> DesiredState {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let relative = path.strip_prefix(root).unwrap_or(path);
    let bytes = std::fs::read(path).unwrap();
    DesiredState::parse(&bytes, relative).expect("example state parses")
}

fn example(stem: &str) -> (DesiredState, World) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("state/examples/{stem}.toml"));
    (load_example(&path), fixture(stem))
}

/// Human output is safe for a terminal: no control character but the line
/// breaks, no invisible formatting character (bidi overrides, zero-width), and
/// no line longer than `MAX_HUMAN_LINE` characters. Stated independently of
/// `sandboxctl::text`.
fn assert_terminal_safe(what: &str, text: &str) {
    for (n, line) in text.split('\n').enumerate() {
        let bad = line.chars().find(|&c| {
            c.is_control()
                || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
                    | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
        });
        assert!(
            bad.is_none(),
            "{what}, line {}: raw {bad:?} in {line:?}",
            n + 1
        );
        let chars = line.chars().count();
        assert!(
            chars <= MAX_HUMAN_LINE,
            "{what}, line {}: {chars} characters",
            n + 1
        );
    }
}

trial!(example_plans_and_reports);
fn example_plans_and_reports() {
    insta::with_settings!({
        snapshot_path => "../snapshots",
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::glob!("../state/examples", "*.toml", |path| {
            let desired = load_example(path);
            // The engine ignores label filters, like some old daemons: only the
            // client-side check keeps foreign objects out of the plan.
            let engine = MemoryEngine::ignoring_filters(world_for(path));
            let rt = runtime();
            let plan = rt.block_on(plan_with(&engine, &desired));
            let plan_human = render::plan_human(&plan);
            assert_terminal_safe("plan", &plan_human);
            insta::assert_snapshot!("plan_human", plan_human);
            let plan_json = render::plan_json(&plan);
            let what = path.display().to_string();
            insta::assert_snapshot!("plan_json", check_text("plan", &plan_json, &what));
            let report = rt.block_on(apply_and_verify(&engine, &plan));
            let report_human = render::report_human(&report);
            assert_terminal_safe("report", &report_human);
            insta::assert_snapshot!("report_human", report_human);
            let report_json = render::report_json(&report, sandboxctl::cli::exit::report_ok(&report));
            insta::assert_snapshot!("report_json", check_text("report", &report_json, &what));
        });
    });
}

trial!(client_side_check_matches_server_side_filter);
fn client_side_check_matches_server_side_filter() {
    insta::glob!("../state/examples", "*.toml", |path| {
        let desired = load_example(path);
        let rt = runtime();
        let filtered = rt.block_on(plan_with(&MemoryEngine::new(world_for(path)), &desired));
        let ignoring = rt.block_on(plan_with(
            &MemoryEngine::ignoring_filters(world_for(path)),
            &desired,
        ));
        assert_eq!(render::plan_json(&filtered), render::plan_json(&ignoring));
    });
}

trial!(planning_is_byte_for_byte_deterministic);
fn planning_is_byte_for_byte_deterministic() {
    insta::glob!("../state/examples", "*.toml", |path| {
        let desired = load_example(path);
        let rt = runtime();
        let engine = MemoryEngine::new(world_for(path));
        let a = render::plan_json(&rt.block_on(plan_with(&engine, &desired)));
        let b = render::plan_json(&rt.block_on(plan_with(&engine, &desired)));
        assert_eq!(a, b);
        // The engine's listing order does not matter either.
        let mut reversed = world_for(path);
        reversed.containers.reverse();
        reversed.volumes.reverse();
        reversed.networks.reverse();
        reversed.images.reverse();
        let c = render::plan_json(&rt.block_on(plan_with(&MemoryEngine::new(reversed), &desired)));
        assert_eq!(a, c);
    });
}

trial!(applying_examples_never_touches_images_or_foreign_objects);
fn applying_examples_never_touches_images_or_foreign_objects() {
    insta::glob!("../state/examples", "*.toml", |path| {
        let desired = load_example(path);
        let before = world_for(path);
        let engine = MemoryEngine::ignoring_filters(before.clone());
        let rt = runtime();
        let plan = rt.block_on(plan_with(&engine, &desired));
        let report = rt.block_on(apply_and_verify(&engine, &plan));
        let after = engine.world();
        assert_eq!(before.images, after.images, "images are never removed");
        let scope = scope_of(&desired);
        // An unlabeled container of a managed service's task goes with its
        // service (the engine's doing, never a removal of ours).
        let managed_services: BTreeSet<&str> = before
            .services
            .iter()
            .filter(|s| scope.manages(&s.labels))
            .map(|s| s.id.as_str())
            .collect();
        let task_of_managed = |c: &ContainerInfo| {
            c.labels
                .get("com.docker.swarm.service.id")
                .is_some_and(|s| managed_services.contains(s.as_str()))
        };
        for c in before
            .containers
            .iter()
            .filter(|c| !scope.manages(&c.labels) && !task_of_managed(c))
        {
            assert!(
                after.containers.contains(c),
                "foreign container {} survives",
                c.name
            );
        }
        for v in before.volumes.iter().filter(|v| !scope.manages(&v.labels)) {
            assert!(
                after.volumes.contains(v),
                "foreign volume {} survives",
                v.name
            );
        }
        for n in before.networks.iter().filter(|n| !scope.manages(&n.labels)) {
            assert!(
                after.networks.contains(n),
                "foreign network {} survives",
                n.name
            );
        }
        for s in before.services.iter().filter(|s| !scope.manages(&s.labels)) {
            assert!(
                after.services.contains(s),
                "foreign service {} survives",
                s.name
            );
        }
        for c in before
            .configs
            .iter()
            .chain(&before.secrets)
            .filter(|c| !scope.manages(&c.labels))
        {
            assert!(
                after.configs.contains(c) || after.secrets.contains(c),
                "foreign config or secret {} survives",
                c.name
            );
        }
        // Every removal the engine served names a planned step.
        let planned: BTreeSet<String> = plan
            .steps
            .iter()
            .map(|s| format!("{:?} {}", Op::Remove(s.object.kind), s.object.key().id))
            .collect();
        for call in engine.calls().iter().filter(|c| c.starts_with("Remove")) {
            assert!(planned.contains(call), "unplanned removal: {call}");
        }
        assert_eq!(report.converged, plan.blocked.is_empty());
    });
}

trial!(a_shared_network_goes_after_every_container_attached_to_it);
fn a_shared_network_goes_after_every_container_attached_to_it() {
    let (desired, world) = example("shared-network");
    let rt = runtime();
    let engine = MemoryEngine::new(world);
    let plan = rt.block_on(plan_with(&engine, &desired));
    let step_of = |name: &str| {
        plan.steps
            .iter()
            .find(|s| s.object.name == name)
            .unwrap_or_else(|| panic!("{name} is not a step"))
    };
    let shared = step_of("sbx-shared");
    assert_eq!(shared.object.kind, Kind::Network);
    let users = [step_of("sbx-ripgrep").step, step_of("sbx-tokei").step];
    assert_eq!(shared.waits_for, users.to_vec());
    assert!(users.iter().all(|&u| u < shared.step));
    // Docker's bridge network is never part of the plan.
    assert!(plan.steps.iter().all(|s| s.object.name != "bridge"));
    let report = rt.block_on(apply_and_verify(&engine, &plan));
    assert!(report.converged, "{}", render::report_human(&report));
    assert_eq!(report.removed.networks.len(), 2);
    assert_eq!(engine.world().networks.len(), 1, "only bridge is left");
}

trial!(a_pid_namespace_join_is_found_only_by_inspection);
fn a_pid_namespace_join_is_found_only_by_inspection() {
    let (desired, world) = example("joined-pid-namespace");
    let rt = runtime();
    let engine = MemoryEngine::new(world);
    let managed = "aaaa00000001000000000000000000000000000000000000000000000000000a";
    let sidecar = "dddd00000004000000000000000000000000000000000000000000000000000d";

    // The listing alone does not show the pid mode: that plan would remove it.
    let listed = rt.block_on(plan_from_listing(&engine, &desired));
    assert!(listed
        .steps
        .iter()
        .any(|s| s.object.id.as_deref() == Some(managed)));
    assert!(!engine.calls().iter().any(|c| c.starts_with("Inspect")));

    // plan_once inspects the unmanaged container and blocks the one it joined.
    let plan = rt.block_on(plan_with(&engine, &desired));
    assert!(engine
        .calls()
        .contains(&format!("{:?} {sidecar}", Op::Inspect(Kind::Container))));
    assert!(plan.steps.is_empty(), "{:?}", plan.steps);
    let blocked = plan
        .blocked
        .iter()
        .find(|b| b.object.id.as_deref() == Some(managed))
        .expect("the joined container is blocked");
    match &blocked.why {
        Reason::HeldByUnmanaged { holders } => {
            assert_eq!(holders.len(), 1, "{holders:?}");
            assert_eq!(holders[0].id.as_deref(), Some(sidecar));
            assert_eq!(holders[0].name, "strace-sidecar");
            assert!(holders[0].how.as_deref().unwrap().contains("pid"));
        }
        other => panic!("blocked for {other:?}"),
    }
    let report = rt.block_on(apply_and_verify(&engine, &plan));
    assert!(!report.converged);
    assert!(engine.calls().iter().all(|c| !c.starts_with("Remove")));
}

/// A declared box's container that joined a leaked container's namespace
/// keeps that container: removing it would kill (pid) or cut off (network)
/// the declared one.
trial!(a_declared_container_in_a_leaked_ones_pid_namespace_keeps_it);
fn a_declared_container_in_a_leaked_ones_pid_namespace_keeps_it() {
    let leaked = "aaaa00000001000000000000000000000000000000000000000000000000000a";
    let labels = |b: &str| {
        sandboxctl::model::Labels::from([
            ("ca.sandbox".to_string(), "1".to_string()),
            ("ca.sandbox.id".to_string(), b.to_string()),
        ])
    };
    let goal = Goal::Reconcile {
        boxes: vec![DeclaredBox::new("keep")],
        keep_volumes: vec![],
        grace: None,
        max_lease: None,
        archive: None,
    };
    let rt = runtime();
    for pid in [false, true] {
        let mut joiner = ContainerInfo::new(
            "bbbb00000002000000000000000000000000000000000000000000000000000b",
            "sbx-keep",
            labels("keep"),
        );
        let mode = Some(format!("container:{leaked}"));
        if pid {
            joiner.pid_mode = mode;
        } else {
            joiner.network_mode = mode;
        }
        let world = World {
            containers: vec![ContainerInfo::new(leaked, "sbx-old", labels("old")), joiner],
            ..World::default()
        };
        let engine = MemoryEngine::new(world);
        let (_, plan) = rt
            .block_on(plan_once(&engine, &goal, &Scope::default(), NOW))
            .unwrap();
        assert!(
            plan.steps.is_empty(),
            "pid join: {pid}: removes {:?}",
            plan.steps
                .iter()
                .map(|s| &s.object.name)
                .collect::<Vec<_>>()
        );
        let kept: Vec<&str> = plan.kept.all().map(|n| n.object.name.as_str()).collect();
        assert_eq!(kept, vec!["sbx-keep", "sbx-old"], "pid join: {pid}");
    }
}

trial!(a_network_namespace_join_shows_in_the_listing);
fn a_network_namespace_join_shows_in_the_listing() {
    let (desired, world) = example("joined-network-namespace");
    let rt = runtime();
    let engine = MemoryEngine::new(world);
    let listed = rt.block_on(plan_from_listing(&engine, &desired));
    let planned = rt.block_on(plan_with(&engine, &desired));
    assert_eq!(render::plan_json(&listed), render::plan_json(&planned));
    let blocked: Vec<(&str, &Reason)> = planned
        .blocked
        .iter()
        .map(|b| (b.object.name.as_str(), &b.why))
        .collect();
    assert!(
        matches!(
            blocked[..],
            [
                ("sbx-debug", Reason::HeldByUnmanaged { .. }),
                ("sbx-debug", Reason::WaitsForBlocked { .. })
            ]
        ),
        "{blocked:?}"
    );
    assert_eq!(planned.blocked[0].object.kind, Kind::Container);
    assert_eq!(planned.blocked[1].object.kind, Kind::Volume);
}

trial!(hostile_label_values_are_escaped_for_people_and_exact_in_json);
fn hostile_label_values_are_escaped_for_people_and_exact_in_json() {
    let (desired, world) = example("hostile-labels");
    let values: BTreeSet<String> = world
        .containers
        .iter()
        .filter_map(|c| c.labels.get("ca.sandbox.id").cloned())
        .collect();
    assert_eq!(values.len(), 4);
    assert!(values.iter().any(|v| v.chars().count() == 5000));
    assert!(values.iter().any(|v| v.contains('\u{1b}')));
    assert!(values.iter().any(|v| v.contains('\n')));
    assert!(values.iter().any(|v| v.contains('\u{202e}')));

    let rt = runtime();
    let engine = MemoryEngine::new(world);
    let plan = rt.block_on(plan_with(&engine, &desired));
    let human = render::plan_human(&plan);
    assert_terminal_safe("plan", &human);
    // The newline did not start a line of its own: it shows escaped, inline.
    for line in human.lines().filter(|l| l.contains("FORGED-LINE")) {
        assert!(
            line.contains("x\\n  2.  container  FORGED-LINE"),
            "forged: {line:?}"
        );
    }
    assert!(human.contains("\\u{1b}[31mRED\\u{1b}[0m"), "{human}");
    // Escaped once: no value here holds a backslash, so none is doubled.
    assert!(!human.contains("\\\\"), "escaped twice: {human}");
    assert!(human.contains("abc\\u{202e}def"), "{human}");
    assert!(human.contains('…'), "the long value is cut");

    // JSON keeps every value exactly.
    let json: serde_json::Value = serde_json::from_str(&render::plan_json(&plan)).unwrap();
    let boxes: BTreeSet<String> = json["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["box"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(boxes, values);

    let report = rt.block_on(apply_and_verify(&engine, &plan));
    assert!(report.converged);
    let human = render::report_human(&report);
    assert_terminal_safe("report", &human);
    assert!(!human.contains("\n  2.  container  FORGED-LINE"));
    assert!(!human.contains("\\\\"), "escaped twice: {human}");
    let json: serde_json::Value = serde_json::from_str(&render::report_json(
        &report,
        sandboxctl::cli::exit::report_ok(&report),
    ))
    .unwrap();
    let removed: BTreeSet<String> = json["removed"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["box"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(removed, values);
}

fn two_boxes() -> World {
    World::from_toml(include_str!("fixtures/all-leaked.toml")).unwrap()
}

fn nothing_declared() -> DesiredState {
    DesiredState::empty()
}

trial!(failed_container_removal_skips_its_volume_and_is_reported);
fn failed_container_removal_skips_its_volume_and_is_reported() {
    let rt = runtime();
    let engine = MemoryEngine::new(two_boxes());
    let id = "aaaa00000001000000000000000000000000000000000000000000000000000a";
    engine.inject(
        Op::Remove(Kind::Container),
        Some(id),
        FaultAction::Fail(EngineError::new(
            "remove container aaaa00000001",
            ErrorKind::Other {
                status: Some(500),
                message: "driver failed".into(),
            },
        )),
        1,
    );
    let plan = rt.block_on(plan_with(&engine, &nothing_declared()));
    let report = rt.block_on(apply_and_verify(&engine, &plan));
    assert!(!report.converged);
    assert_eq!(report.failures.len(), 1);
    assert_eq!(report.failures[0].id.as_deref(), Some(id));
    let left: Vec<(&str, &Reason)> = report
        .all_remaining()
        .map(|l| (l.object.name.as_str(), &l.reason))
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(
        matches!(left[0].1, Reason::RemovalFailed { error } if error.contains("HTTP 500: driver failed")),
        "{left:?}"
    );
    let failed_step = plan
        .steps
        .iter()
        .find(|s| s.object.id.as_deref() == Some(id))
        .unwrap()
        .step;
    assert!(
        matches!(left[1].1, Reason::WaitsForFailed { step, object } if *step == failed_step && object.id.as_deref() == Some(id)),
        "{left:?}"
    );
    // The volume was never attempted (not even looked at again).
    assert!(!engine
        .calls()
        .iter()
        .any(|c| c.ends_with(" sbx-explore-ripgrep")));
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false, omit_expression => true}, {
        insta::assert_snapshot!("report_container_500", render::report_human(&report));
    });
}

trial!(not_found_on_removal_is_already_gone_not_a_failure);
fn not_found_on_removal_is_already_gone_not_a_failure() {
    let rt = runtime();
    for world in [two_boxes(), example("shared-network").1] {
        let engine = MemoryEngine::new(world);
        let plan = rt.block_on(plan_with(&engine, &nothing_declared()));
        for step in &plan.steps {
            let key = step.object.key();
            // A volume is looked at again just before its removal.
            let op = match key.kind {
                Kind::Volume => Op::Inspect(Kind::Volume),
                kind => Op::Remove(kind),
            };
            engine.inject(op, Some(&key.id), FaultAction::VanishFirst, 1);
        }
        let applied = rt.block_on(apply(
            &engine,
            &plan,
            &ApplyOptions::default(),
            &CancellationToken::new(),
            &Silent,
        ));
        assert!(applied.outcomes.iter().all(|o| *o == Outcome::AlreadyGone));
        let report = rt.block_on(verify(&engine, &plan, &applied));
        assert!(report.converged && report.failures.is_empty());
        assert!(report
            .removed
            .all()
            .all(|g| g.outcome == Outcome::AlreadyGone));
    }
}

trial!(failed_verification_listing_is_never_success);
fn failed_verification_listing_is_never_success() {
    let rt = runtime();
    let engine = MemoryEngine::new(two_boxes());
    let plan = rt.block_on(plan_with(&engine, &nothing_declared()));
    engine.inject(
        Op::List(Kind::Volume),
        None,
        FaultAction::Fail(EngineError::new(
            "list volumes",
            ErrorKind::Other {
                status: None,
                message: "connection closed".into(),
            },
        )),
        1,
    );
    let report = rt.block_on(apply_and_verify(&engine, &plan));
    assert!(!report.converged);
    assert_eq!(report.failures[0].kind, "engine");
    assert!(report.failures[0].error.contains("verification failed"));
}

trial!(cancelled_apply_starts_nothing_and_reports_everything_left);
fn cancelled_apply_starts_nothing_and_reports_everything_left() {
    let rt = runtime();
    let engine = MemoryEngine::new(two_boxes());
    let plan = rt.block_on(plan_with(&engine, &nothing_declared()));
    let applied = rt.block_on(apply(
        &engine,
        &plan,
        &ApplyOptions::default(),
        &cancelled(),
        &Silent,
    ));
    assert!(applied.interrupted);
    assert!(applied.outcomes.iter().all(|o| *o == Outcome::Interrupted));
    let report = rt.block_on(verify(&engine, &plan, &applied));
    assert!(!report.converged);
    assert_eq!(report.all_remaining().count(), plan.steps.len());
    assert!(report
        .all_remaining()
        .all(|l| l.reason == Reason::Interrupted));
}

/// Records the order in which steps finish and the most removals in flight.
#[derive(Default)]
struct Recorder(std::sync::Mutex<Recorded>);

#[derive(Default)]
struct Recorded {
    finished: Vec<String>,
    in_flight: usize,
    max_in_flight: usize,
}

impl Recorder {
    fn into_inner(self) -> Recorded {
        self.0.into_inner().unwrap()
    }
}

impl Observer for Recorder {
    fn on(&self, event: &Event<'_>) {
        let mut r = self.0.lock().unwrap();
        match event {
            Event::Started { .. } => {
                r.in_flight += 1;
                r.max_in_flight = r.max_in_flight.max(r.in_flight);
            }
            Event::Finished { step, outcome, .. } => {
                if !matches!(outcome, Outcome::Skipped(_) | Outcome::Interrupted) {
                    r.in_flight -= 1;
                }
                r.finished.push(step.object.name.clone());
            }
            _ => {}
        }
    }
}

/// A token already cancelled.
fn cancelled() -> CancellationToken {
    let token = CancellationToken::new();
    token.cancel();
    token
}

/// `n` boxes, each a running container mounting its own named volume.
fn boxes(n: usize) -> World {
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&format!(
            "[[container]]\nid = \"{i:064x}\"\nname = \"c{i}\"\nstate = \"running\"\n\
             labels = {{ \"ca.sandbox\" = \"1\", \"ca.sandbox.id\" = \"b{i}\" }}\nmounts = [\"v{i}\"]\n\
             [[volume]]\nname = \"v{i}\"\nlabels = {{ \"ca.sandbox\" = \"1\", \"ca.sandbox.id\" = \"b{i}\" }}\n"
        ));
    }
    World::from_toml(&text).unwrap()
}

trial!(a_volume_goes_as_soon_as_its_own_containers_are_gone);
fn a_volume_goes_as_soon_as_its_own_containers_are_gone() {
    let rt = runtime();
    let engine = MemoryEngine::new(boxes(2));
    // Container c0 is slow to remove; c1 is not.
    engine.inject(
        Op::Remove(Kind::Container),
        Some(&format!("{:064x}", 0)),
        FaultAction::Delay(std::time::Duration::from_millis(300)),
        1,
    );
    let plan = rt.block_on(plan_with(&engine, &nothing_declared()));
    let rec = Recorder::default();
    let applied = rt.block_on(apply(
        &engine,
        &plan,
        &ApplyOptions::default(),
        &CancellationToken::new(),
        &rec,
    ));
    assert!(applied.outcomes.iter().all(Outcome::is_success));
    // v1 did not wait for the unrelated slow container c0.
    assert_eq!(rec.into_inner().finished, vec!["c1", "v1", "c0", "v0"]);
}

trial!(removals_in_flight_never_exceed_parallelism);
fn removals_in_flight_never_exceed_parallelism() {
    let rt = runtime();
    for parallelism in [1, 3, 8] {
        let engine = MemoryEngine::new(boxes(40));
        engine.inject(
            Op::Remove(Kind::Container),
            None,
            FaultAction::Delay(std::time::Duration::from_millis(2)),
            usize::MAX,
        );
        let plan = rt.block_on(plan_with(&engine, &nothing_declared()));
        let rec = Recorder::default();
        let options = ApplyOptions {
            parallelism,
            ..ApplyOptions::default()
        };
        let applied = rt.block_on(apply(
            &engine,
            &plan,
            &options,
            &CancellationToken::new(),
            &rec,
        ));
        assert!(applied.outcomes.iter().all(Outcome::is_success));
        assert_eq!(rec.into_inner().max_in_flight, parallelism);
        assert!(engine.world().containers.is_empty() && engine.world().volumes.is_empty());
    }
}

trial!(with_every_slot_busy_a_ready_volume_goes_before_the_next_container);
fn with_every_slot_busy_a_ready_volume_goes_before_the_next_container() {
    let rt = runtime();
    let engine = MemoryEngine::new(boxes(4));
    let plan = rt.block_on(plan_with(&engine, &nothing_declared()));
    let rec = Recorder::default();
    let options = ApplyOptions {
        parallelism: 1,
        ..ApplyOptions::default()
    };
    rt.block_on(apply(
        &engine,
        &plan,
        &options,
        &CancellationToken::new(),
        &rec,
    ));
    assert_eq!(
        rec.into_inner().finished,
        vec!["c0", "v0", "c1", "v1", "c2", "v2", "c3", "v3"]
    );
}
