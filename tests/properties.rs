//! Properties of the planner and of apply, over random inventories, with the
//! in-memory engine (`sandboxctl::engine::memory`).
//!
//! Inventories mix managed objects with look-alikes (`ca.sandbox=0`, `true`,
//! `"1 "`, `ca.sandboxx=1`, no label), random scope labels, random box labels,
//! random named-volume mounts and random `ca-sbx:*` images; goals are random
//! reconciles (declared boxes, kept volumes) and random destroys.
//!
//! For every case:
//! - the plan removes only managed objects, never an image;
//! - it never removes a declared box's container or volume, nor a kept volume
//!   (reconcile), nor anything outside the named boxes (destroy);
//! - a volume is never removed while a container that stays mounts it, and it
//!   comes after (and waits for) every removed container that mounts it;
//! - the engine ignoring label filters changes nothing (client-side check);
//! - applying the plan on the in-memory engine converges (a fresh plan is
//!   empty) unless something is blocked, and leaves every object the plan does
//!   not name exactly as it was.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicBool;

use proptest::prelude::*;
use proptest::sample::select;

use sandboxctl::apply::{apply, ApplyOptions, Silent};
use sandboxctl::engine::memory::{MemoryEngine, World};
use sandboxctl::inventory::Inventory;
use sandboxctl::model::{ContainerInfo, ImageInfo, Labels, Scope, VolumeInfo};
use sandboxctl::plan::{Goal, Object, Plan};
use sandboxctl::render;
use sandboxctl::verify::verify;

const BOXES: [&str; 4] = ["b0", "b1", "b2", "b3"];
const VOLUMES: usize = 6;

fn volume_name(i: usize) -> String {
    format!("v{i}")
}

/// The `ca.sandbox` label or one of its look-alikes (or nothing).
fn sandbox_label() -> impl Strategy<Value = Option<(&'static str, &'static str)>> {
    prop_oneof![
        16 => Just(Some(("ca.sandbox", "1"))),
        1 => Just(Some(("ca.sandbox", "0"))),
        1 => Just(Some(("ca.sandbox", "true"))),
        1 => Just(Some(("ca.sandbox", "1 "))),
        1 => Just(Some(("ca.sandboxx", "1"))),
        1 => Just(None),
    ]
}

/// Labels: the sandbox label (or a look-alike), maybe a box, maybe scope-like labels.
fn labels() -> impl Strategy<Value = Labels> {
    (
        sandbox_label(),
        proptest::option::weighted(0.8, select(BOXES.to_vec())),
        // Mostly in the likely scopes, sometimes just outside them.
        proptest::option::weighted(0.8, prop_oneof![4 => Just("a"), 1 => Just("b")]),
        proptest::option::weighted(0.5, prop_oneof![4 => Just("x"), 1 => Just("y")]),
    )
        .prop_map(|(sandbox, box_id, owner, team)| {
            let mut l = Labels::new();
            if let Some((k, v)) = sandbox {
                l.insert(k.into(), v.into());
            }
            if let Some(b) = box_id {
                l.insert("ca.sandbox.id".into(), b.into());
            }
            if let Some(o) = owner {
                l.insert("owner".into(), o.into());
            }
            if let Some(t) = team {
                l.insert("team".into(), t.into());
            }
            l
        })
}

fn world() -> impl Strategy<Value = World> {
    let volumes = proptest::collection::vec(
        proptest::option::weighted(0.8, (labels(), proptest::option::of(0u32..3))),
        VOLUMES,
    );
    let containers = proptest::collection::vec(
        (
            labels(),
            proptest::collection::btree_set(0..VOLUMES, 0..=1),
            select(vec!["running", "exited", "created"]),
            // Box-shaped: the labels of volume i, and mounting it (as sandboxes are).
            proptest::option::of(0..VOLUMES),
        ),
        0..8,
    );
    let images = proptest::collection::vec(
        select(vec!["ca-sbx:repo-1", "ca-sbx:repo-2", "other:latest"]),
        0..3,
    );
    (volumes, containers, images).prop_map(|(volumes, containers, images)| {
        let volumes: Vec<VolumeInfo> = volumes
            .into_iter()
            .enumerate()
            .filter_map(|(i, v)| {
                v.map(|(labels, t)| VolumeInfo {
                    name: volume_name(i),
                    labels,
                    created_at: t.map(|t| format!("2024-01-0{}T00:00:00Z", t + 1)),
                })
            })
            .collect();
        let existing: BTreeMap<String, Labels> = volumes
            .iter()
            .map(|v| (v.name.clone(), v.labels.clone()))
            .collect();
        let containers = containers
            .into_iter()
            .enumerate()
            .map(|(i, (labels, mounts, state, shape))| {
                let own = shape.map(volume_name).filter(|v| existing.contains_key(v));
                ContainerInfo {
                    id: format!("{:064x}", 0xc0ffee00 + i),
                    name: format!("c{i}"),
                    state: state.to_string(),
                    labels: own.as_ref().map_or(labels, |v| existing[v].clone()),
                    // Docker only mounts volumes that exist.
                    mounts: mounts
                        .into_iter()
                        .map(volume_name)
                        .chain(own)
                        .filter(|v| existing.contains_key(v))
                        .collect(),
                }
            })
            .collect();
        let images = images
            .into_iter()
            .enumerate()
            .map(|(i, tag)| ImageInfo {
                id: format!("sha256:{:064x}", 0x1a000 + i),
                tags: vec![tag.to_string()],
            })
            .collect();
        World {
            containers,
            volumes,
            images,
        }
    })
}

fn scope() -> impl Strategy<Value = Scope> {
    (
        proptest::option::weighted(0.5, prop_oneof![4 => Just("a"), 1 => Just("b")]),
        proptest::option::weighted(0.2, prop_oneof![4 => Just("x"), 1 => Just("y")]),
    )
        .prop_map(|(owner, team)| {
            let mut l = Labels::new();
            if let Some(o) = owner {
                l.insert("owner".into(), o.into());
            }
            if let Some(t) = team {
                l.insert("team".into(), t.into());
            }
            Scope::new(l)
        })
}

fn subset(items: Vec<String>) -> impl Strategy<Value = BTreeSet<String>> {
    proptest::sample::subsequence(items.clone(), 0..=items.len())
        .prop_map(|s| s.into_iter().collect())
}

fn goal() -> impl Strategy<Value = Goal> {
    let boxes: Vec<String> = BOXES.iter().map(|b| b.to_string()).collect();
    let volumes: Vec<String> = (0..VOLUMES).map(volume_name).collect();
    prop_oneof![
        3 => (subset(boxes.clone()), subset(volumes.clone())).prop_map(|(boxes, keep_volumes)| {
            Goal::Reconcile { boxes, keep_volumes }
        }),
        1 => (subset(boxes), any::<bool>(), subset(volumes)).prop_map(|(ids, keep_volume, keep_volumes)| {
            Goal::Destroy { ids, keep_volume, keep_volumes }
        }),
    ]
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// May the plan for `goal` remove an object labeled with `box_id` (and, for a
/// volume, named `volume`)? The safety rules, stated independently of the planner.
fn may_remove(goal: &Goal, box_id: Option<&str>, volume: Option<&str>) -> bool {
    match goal {
        Goal::Reconcile {
            boxes,
            keep_volumes,
        } => {
            box_id.is_none_or(|b| !boxes.contains(b))
                && volume.is_none_or(|v| !keep_volumes.contains(v))
        }
        Goal::Destroy {
            ids,
            keep_volume,
            keep_volumes,
        } => {
            box_id.is_some_and(|b| ids.contains(b))
                && volume.is_none_or(|v| !keep_volumes.contains(v) && !keep_volume)
        }
    }
}

/// Checks the plan's safety properties against the world it was made from.
fn check_plan(world: &World, scope: &Scope, goal: &Goal, plan: &Plan) -> Result<(), TestCaseError> {
    plan.validate().map_err(TestCaseError::fail)?;
    let containers: BTreeMap<&str, &ContainerInfo> = world
        .containers
        .iter()
        .map(|c| (c.id.as_str(), c))
        .collect();
    let volumes: BTreeMap<&str, &VolumeInfo> =
        world.volumes.iter().map(|v| (v.name.as_str(), v)).collect();
    let image_ids: BTreeSet<&str> = world.images.iter().map(|i| i.id.as_str()).collect();
    // Step number of each removed container, by ID.
    let removed: BTreeMap<&str, usize> = plan
        .steps
        .iter()
        .filter_map(|s| s.object.id().map(|id| (id, s.step)))
        .collect();

    for step in &plan.steps {
        match &step.object {
            Object::Container { id, .. } => {
                prop_assert!(!image_ids.contains(id.as_str()), "image {id} in the plan");
                let c = containers
                    .get(id.as_str())
                    .ok_or_else(|| TestCaseError::fail(format!("unknown container {id}")))?;
                prop_assert!(
                    scope.manages(&c.labels),
                    "unmanaged container {} planned",
                    c.name
                );
                prop_assert!(
                    may_remove(goal, c.box_id(), None),
                    "container {} of box {:?} must stay under {goal:?}",
                    c.name,
                    c.box_id()
                );
            }
            Object::Volume { name, .. } => {
                let v = volumes
                    .get(name.as_str())
                    .ok_or_else(|| TestCaseError::fail(format!("unknown volume {name}")))?;
                prop_assert!(scope.manages(&v.labels), "unmanaged volume {name} planned");
                prop_assert!(
                    may_remove(goal, v.box_id(), Some(name)),
                    "volume {name} of box {:?} must stay under {goal:?}",
                    v.box_id()
                );
                for c in world.containers.iter().filter(|c| c.mounts.contains(name)) {
                    match removed.get(c.id.as_str()) {
                        // A removed user goes first and the volume waits for it.
                        Some(&user_step) => {
                            prop_assert!(
                                user_step < step.step && step.waits_for.contains(&user_step),
                                "volume {name} (step {}) does not wait for container {} (step {user_step}): {:?}",
                                step.step,
                                c.name,
                                step.waits_for
                            );
                        }
                        // A user that stays (kept, or not managed) forbids removal.
                        None => prop_assert!(
                            false,
                            "volume {name} is removed although container {} stays and mounts it",
                            c.name
                        ),
                    }
                }
            }
        }
    }
    Ok(())
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 512,
        // Do not write regression files into the source tree; a failure prints its case.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// One case: plan, check, apply on the memory engine, verify, re-plan.
fn run_case(
    world: &World,
    scope: &Scope,
    goal: &Goal,
    ignore_filters: bool,
) -> Result<Plan, TestCaseError> {
    let rt = runtime();
    let engine = if ignore_filters {
        MemoryEngine::ignoring_filters(world.clone())
    } else {
        MemoryEngine::new(world.clone())
    };
    let inventory = rt.block_on(Inventory::list(&engine, scope)).unwrap();
    let plan = Plan::build(goal, &inventory);
    check_plan(world, scope, goal, &plan)?;

    // The client-side check makes a filter-ignoring engine irrelevant.
    let other = if ignore_filters {
        MemoryEngine::new(world.clone())
    } else {
        MemoryEngine::ignoring_filters(world.clone())
    };
    let same = Plan::build(goal, &rt.block_on(Inventory::list(&other, scope)).unwrap());
    prop_assert_eq!(render::plan_json(&plan), render::plan_json(&same));

    let applied = rt.block_on(apply(
        &engine,
        &plan,
        &ApplyOptions::default(),
        &AtomicBool::new(false),
        &mut Silent,
    ));
    prop_assert!(
        applied.outcomes.iter().all(|o| o.is_success()),
        "{:?}",
        applied.outcomes
    );
    let report = rt.block_on(verify(&engine, &plan, &applied));
    prop_assert_eq!(report.converged, plan.blocked.is_empty());
    prop_assert!(report.failures.is_empty(), "{:?}", report.failures);

    // Re-planning finds nothing more to remove; only the blocked remain.
    let after = engine.world();
    let again = Plan::build(goal, &rt.block_on(Inventory::list(&engine, scope)).unwrap());
    prop_assert!(again.steps.is_empty(), "left to remove: {:?}", again.steps);
    prop_assert_eq!(again.blocked.len(), plan.blocked.len());

    // Exactly the planned objects are gone; everything else is untouched.
    let planned: BTreeSet<String> = plan.steps.iter().map(|s| s.object.key()).collect();
    let expected_containers: Vec<&ContainerInfo> = world
        .containers
        .iter()
        .filter(|c| !planned.contains(&format!("container/{}", c.id)))
        .collect();
    let expected_volumes: Vec<&VolumeInfo> = world
        .volumes
        .iter()
        .filter(|v| !planned.contains(&format!("volume/{}", v.name)))
        .collect();
    prop_assert_eq!(
        after.containers.iter().collect::<Vec<_>>(),
        expected_containers
    );
    prop_assert_eq!(after.volumes.iter().collect::<Vec<_>>(), expected_volumes);
    prop_assert_eq!(&after.images, &world.images);
    prop_assert!(engine
        .calls()
        .iter()
        .all(|c| !c.contains("Image") || c.starts_with("ListImages")));
    Ok(plan)
}

/// `world` with every object labeled exactly `ca.sandbox=1` and no scope-like
/// labels: everything is managed, so ordering is exercised on every mount.
fn all_managed(mut world: World) -> World {
    let fix = |labels: &mut Labels| {
        labels.retain(|k, _| k == "ca.sandbox.id");
        labels.insert("ca.sandbox".into(), "1".into());
    };
    world.containers.iter_mut().for_each(|c| fix(&mut c.labels));
    world.volumes.iter_mut().for_each(|v| fix(&mut v.labels));
    world
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn plans_are_safe_and_applying_them_converges(
        world in world(),
        scope in scope(),
        goal in goal(),
        ignore_filters in any::<bool>(),
    ) {
        run_case(&world, &scope, &goal, ignore_filters)?;
    }

    #[test]
    fn with_nothing_declared_everything_managed_goes_in_mount_order(
        world in world().prop_map(all_managed),
        ignore_filters in any::<bool>(),
    ) {
        let goal = Goal::Reconcile { boxes: BTreeSet::new(), keep_volumes: BTreeSet::new() };
        let plan = run_case(&world, &Scope::default(), &goal, ignore_filters)?;
        prop_assert_eq!(plan.steps.len(), world.containers.len() + world.volumes.len());
        prop_assert!(plan.blocked.is_empty());
        // Every container precedes every volume it mounts, and the volume waits for it.
        let mounts: usize = world.containers.iter().map(|c| c.mounts.len()).sum();
        let edges: usize = plan.steps.iter().map(|s| s.waits_for.len()).sum();
        prop_assert_eq!(edges, mounts);
    }
}

/// The checker itself catches what it is meant to catch.
#[test]
fn the_plan_checker_rejects_unsafe_plans() {
    let mut managed = Labels::new();
    managed.insert("ca.sandbox".into(), "1".into());
    managed.insert("ca.sandbox.id".into(), "b0".into());
    let world = World {
        containers: vec![ContainerInfo {
            id: format!("{:064x}", 1),
            name: "c0".into(),
            state: "running".into(),
            labels: managed.clone(),
            mounts: BTreeSet::from(["v0".to_string()]),
        }],
        volumes: vec![VolumeInfo {
            name: "v0".into(),
            labels: managed,
            created_at: None,
        }],
        images: vec![],
    };
    let nothing = Goal::Reconcile {
        boxes: BTreeSet::new(),
        keep_volumes: BTreeSet::new(),
    };
    let scope = Scope::default();
    let engine = MemoryEngine::new(world.clone());
    let inventory = runtime()
        .block_on(Inventory::list(&engine, &scope))
        .unwrap();
    let plan = Plan::build(&nothing, &inventory);
    assert_eq!(plan.steps.len(), 2);
    check_plan(&world, &scope, &nothing, &plan).unwrap();

    // The volume no longer waits for its container.
    let mut unordered = plan.clone();
    unordered.steps[1].waits_for.clear();
    assert!(check_plan(&world, &scope, &nothing, &unordered).is_err());
    // The same removals when box b0 is declared, or v0 kept.
    let declared = Goal::Reconcile {
        boxes: BTreeSet::from(["b0".to_string()]),
        keep_volumes: BTreeSet::new(),
    };
    assert!(check_plan(&world, &scope, &declared, &plan).is_err());
    let kept = Goal::Reconcile {
        boxes: BTreeSet::new(),
        keep_volumes: BTreeSet::from(["v0".to_string()]),
    };
    assert!(check_plan(&world, &scope, &kept, &plan).is_err());
    // The same removals under a scope these objects are not in.
    let narrower = Scope::new(Labels::from([("owner".to_string(), "a".to_string())]));
    assert!(check_plan(&world, &narrower, &nothing, &plan).is_err());
    // A volume removed while its container stays.
    let mut volume_only = plan.clone();
    volume_only.steps.remove(0);
    volume_only.steps[0].step = 1;
    volume_only.steps[0].waits_for.clear();
    assert!(check_plan(&world, &scope, &nothing, &volume_only).is_err());
}
