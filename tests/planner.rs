//! The planner and the report against the in-memory engine: one snapshot set
//! per example state in `state/examples/` (with its inventory fixture in
//! `tests/fixtures/`), plus scripted faults the real engine cannot produce on
//! demand.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use sandboxctl::apply::{apply, ApplyOptions, Outcome, Silent};
use sandboxctl::desired::DesiredState;
use sandboxctl::engine::memory::{FaultAction, MemoryEngine, Op, World};
use sandboxctl::engine::EngineError;
use sandboxctl::inventory::Inventory;
use sandboxctl::model::Scope;
use sandboxctl::plan::{Goal, Plan};
use sandboxctl::render;
use sandboxctl::verify::{verify, Report};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The inventory fixture that goes with an example state file.
fn world_for(example: &Path) -> World {
    let stem = example.file_stem().unwrap().to_str().unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/{stem}.toml"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("fixture {} for example {stem}: {e}", path.display()));
    World::from_toml(&text).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

fn goal_of(desired: &DesiredState) -> Goal {
    Goal::Reconcile {
        boxes: desired.boxes.clone(),
        keep_volumes: desired.keep_volumes.clone(),
    }
}

async fn plan_with(engine: &MemoryEngine, desired: &DesiredState) -> Plan {
    let inventory = Inventory::list(engine, &Scope::new(desired.scope.clone()))
        .await
        .expect("memory listing");
    Plan::build(&goal_of(desired), &inventory)
}

async fn apply_and_verify(engine: &MemoryEngine, plan: &Plan) -> Report {
    let applied = apply(
        engine,
        plan,
        &ApplyOptions::default(),
        &AtomicBool::new(false),
        &mut Silent,
    )
    .await;
    verify(engine, plan, &applied).await
}

/// Load an example relative to the crate root, so paths in snapshots are stable.
fn load_example(path: &Path) -> DesiredState {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let relative = path.strip_prefix(root).unwrap_or(path);
    let bytes = std::fs::read(path).unwrap();
    DesiredState::parse(&bytes, relative).expect("example state parses")
}

#[test]
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
            insta::assert_snapshot!("plan_human", render::plan_human(&plan));
            insta::assert_snapshot!("plan_json", render::plan_json(&plan));
            let report = rt.block_on(apply_and_verify(&engine, &plan));
            insta::assert_snapshot!("report_human", render::report_human(&report));
            insta::assert_snapshot!("report_json", render::report_json(&report));
        });
    });
}

#[test]
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

#[test]
fn planning_is_byte_for_byte_deterministic() {
    insta::glob!("../state/examples", "*.toml", |path| {
        let desired = load_example(path);
        let rt = runtime();
        let engine = MemoryEngine::new(world_for(path));
        let a = render::plan_json(&rt.block_on(plan_with(&engine, &desired)));
        let b = render::plan_json(&rt.block_on(plan_with(&engine, &desired)));
        assert_eq!(a, b);
    });
}

#[test]
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
        let scope = Scope::new(desired.scope.clone());
        for c in before
            .containers
            .iter()
            .filter(|c| !scope.manages(&c.labels))
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
        for call in engine.calls() {
            assert!(!call.contains("RemoveImage"));
        }
        assert_eq!(report.converged, plan.blocked.is_empty());
    });
}

fn two_boxes() -> World {
    World::from_toml(include_str!("fixtures/all-leaked.toml")).unwrap()
}

#[test]
fn failed_container_removal_skips_its_volume_and_is_reported() {
    let rt = runtime();
    let engine = MemoryEngine::new(two_boxes());
    let id = "aaaa00000001000000000000000000000000000000000000000000000000000a";
    engine.inject(
        Op::RemoveContainer,
        Some(id),
        FaultAction::Fail(EngineError::Status {
            call: "remove container aaaa00000001".into(),
            status: 500,
            message: "driver failed".into(),
        }),
        1,
    );
    let plan = rt.block_on(plan_with(&engine, &DesiredState::empty()));
    let report = rt.block_on(apply_and_verify(&engine, &plan));
    assert!(!report.converged);
    assert_eq!(report.failures.len(), 1);
    assert_eq!(report.failures[0].id.as_deref(), Some(id));
    let left: Vec<(&str, &str)> = report
        .remaining_containers
        .iter()
        .chain(&report.remaining_volumes)
        .map(|l| (l.object.name.as_str(), l.reason.as_str()))
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(left[0].1.contains("HTTP 500: driver failed"));
    assert!(left[1].1.starts_with("not attempted: it waits for step"));
    // The volume was never attempted.
    assert!(!engine
        .calls()
        .iter()
        .any(|c| c == "RemoveVolume sbx-explore-ripgrep"));
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false, omit_expression => true}, {
        insta::assert_snapshot!("report_container_500", render::report_human(&report));
    });
}

#[test]
fn not_found_on_removal_is_already_gone_not_a_failure() {
    let rt = runtime();
    let engine = MemoryEngine::new(two_boxes());
    let plan = rt.block_on(plan_with(&engine, &DesiredState::empty()));
    for step in &plan.steps {
        let target = step.object.id().unwrap_or(step.object.name()).to_string();
        let op = match step.object.id() {
            Some(_) => Op::RemoveContainer,
            None => Op::InspectVolume,
        };
        engine.inject(op, Some(&target), FaultAction::VanishFirst, 1);
    }
    let applied = rt.block_on(apply(
        &engine,
        &plan,
        &ApplyOptions::default(),
        &AtomicBool::new(false),
        &mut Silent,
    ));
    assert!(applied.outcomes.iter().all(|o| *o == Outcome::AlreadyGone));
    let report = rt.block_on(verify(&engine, &plan, &applied));
    assert!(report.converged && report.failures.is_empty());
}

#[test]
fn failed_verification_listing_is_never_success() {
    let rt = runtime();
    let engine = MemoryEngine::new(two_boxes());
    let plan = rt.block_on(plan_with(&engine, &DesiredState::empty()));
    engine.inject(
        Op::ListVolumes,
        None,
        FaultAction::Fail(EngineError::Transport {
            call: "list volumes".into(),
            detail: "connection closed".into(),
        }),
        1,
    );
    let report = rt.block_on(apply_and_verify(&engine, &plan));
    assert!(!report.converged);
    assert_eq!(report.failures[0].kind, "engine");
    assert!(report.failures[0].error.contains("verification failed"));
}

#[test]
fn cancelled_apply_starts_nothing_and_reports_everything_left() {
    let rt = runtime();
    let engine = MemoryEngine::new(two_boxes());
    let plan = rt.block_on(plan_with(&engine, &DesiredState::empty()));
    let applied = rt.block_on(apply(
        &engine,
        &plan,
        &ApplyOptions::default(),
        &AtomicBool::new(true),
        &mut Silent,
    ));
    assert!(applied.interrupted);
    assert!(applied.outcomes.iter().all(|o| *o == Outcome::Interrupted));
    let report = rt.block_on(verify(&engine, &plan, &applied));
    assert!(!report.converged);
    assert_eq!(
        report.remaining_containers.len() + report.remaining_volumes.len(),
        plan.steps.len()
    );
}

/// Records the order in which steps finish and the most removals in flight.
#[derive(Default)]
struct Recorder {
    finished: Vec<String>,
    in_flight: usize,
    max_in_flight: usize,
}

impl sandboxctl::apply::Observer for Recorder {
    fn started(&mut self, _step: &sandboxctl::plan::Step) {
        self.in_flight += 1;
        self.max_in_flight = self.max_in_flight.max(self.in_flight);
    }
    fn finished(&mut self, step: &sandboxctl::plan::Step, outcome: &Outcome) {
        if !matches!(outcome, Outcome::Skipped(_) | Outcome::Interrupted) {
            self.in_flight -= 1;
        }
        self.finished.push(step.object.name().to_string());
    }
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

#[test]
fn a_volume_goes_as_soon_as_its_own_containers_are_gone() {
    let rt = runtime();
    let engine = MemoryEngine::new(boxes(2));
    // Container c0 is slow to remove; c1 is not.
    engine.inject(
        Op::RemoveContainer,
        Some(&format!("{:064x}", 0)),
        FaultAction::Delay(std::time::Duration::from_millis(300)),
        1,
    );
    let plan = rt.block_on(plan_with(&engine, &DesiredState::empty()));
    let mut rec = Recorder::default();
    let applied = rt.block_on(apply(
        &engine,
        &plan,
        &ApplyOptions::default(),
        &AtomicBool::new(false),
        &mut rec,
    ));
    assert!(applied.outcomes.iter().all(Outcome::is_success));
    // v1 did not wait for the unrelated slow container c0.
    assert_eq!(rec.finished, vec!["c1", "v1", "c0", "v0"]);
}

#[test]
fn removals_in_flight_never_exceed_parallelism() {
    let rt = runtime();
    for parallelism in [1, 3, 8] {
        let engine = MemoryEngine::new(boxes(40));
        engine.inject(
            Op::RemoveContainer,
            None,
            FaultAction::Delay(std::time::Duration::from_millis(2)),
            usize::MAX,
        );
        let plan = rt.block_on(plan_with(&engine, &DesiredState::empty()));
        let mut rec = Recorder::default();
        let options = ApplyOptions {
            parallelism,
            ..ApplyOptions::default()
        };
        let applied = rt.block_on(apply(
            &engine,
            &plan,
            &options,
            &AtomicBool::new(false),
            &mut rec,
        ));
        assert!(applied.outcomes.iter().all(Outcome::is_success));
        assert_eq!(rec.max_in_flight, parallelism);
        assert!(engine.world().containers.is_empty() && engine.world().volumes.is_empty());
    }
}

#[test]
fn with_every_slot_busy_a_ready_volume_goes_before_the_next_container() {
    let rt = runtime();
    let engine = MemoryEngine::new(boxes(4));
    let plan = rt.block_on(plan_with(&engine, &DesiredState::empty()));
    let mut rec = Recorder::default();
    let options = ApplyOptions {
        parallelism: 1,
        ..ApplyOptions::default()
    };
    rt.block_on(apply(
        &engine,
        &plan,
        &options,
        &AtomicBool::new(false),
        &mut rec,
    ));
    assert_eq!(
        rec.finished,
        vec!["c0", "v0", "c1", "v1", "c2", "v2", "c3", "v3"]
    );
}
