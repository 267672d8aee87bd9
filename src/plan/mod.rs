//! The plan: which managed objects to remove, in what order, and why.
//!
//! Owns `Plan::build`, a pure and synchronous function of a `Goal`, an
//! `Inventory` and the clock: the same inputs give the same plan, byte for
//! byte. The plan is a graph (petgraph) whose removal edges run backwards along
//! dependencies: an object goes before everything it depends on (a container
//! before the volumes it mounts, the networks it is attached to and a container
//! whose namespace it joined). The rules are the same for every kind. Must not
//! do I/O, read the clock, or turn reasons into words; has no notion of images
//! beyond listing them as retained. On a large inventory the basis digests are
//! computed on a second (scoped) thread; the plan is the same either way.
//!
//! This file is the face: `Plan::build` and the names the rest of the crate
//! uses (`crate::plan::Goal`, `Plan`, `Step`, ...). The goal is in `goal.rs`,
//! the plan as it is saved and read back in `wire.rs`, the rules (what happens
//! to one object and why, and the order of removals) in `decide.rs`.

mod decide;
pub(crate) mod explain;
mod goal;
pub mod inventory;
pub mod lease;
mod wire;

pub use self::goal::{ArchivePolicy, DeclaredBox, Goal, KeptVolume};
pub use self::wire::{Entry, Noted, Plan, Read, Retained, Step};
pub(crate) use self::wire::{Kept, PLAN_VERSION};
use crate::plan::inventory::{fingerprint, Inventory};

/// From this many objects on, `Plan::build` computes the basis digests on a
/// second thread (below it, starting a thread costs more than it saves).
const PARALLEL_BASIS: usize = 1024;

pub(crate) use crate::model::time::{parse_rfc3339, rfc3339};

impl Plan {
    /// Builds the plan for `goal` over `inv` at time `now` (Unix seconds). Pure:
    /// no I/O, no clock, no randomness; orders are sorted.
    pub fn build(goal: &Goal, inv: &Inventory, now: i64) -> Plan {
        // The basis (a SHA-256 digest per object) does not depend on any
        // verdict: for a large inventory it is computed on a second thread
        // while the rest is decided. The plan is the same either way.
        let digests = || {
            let basis = inv.basis();
            (fingerprint(&basis), basis)
        };
        let (mut plan, (fingerprint, basis)) = if inv.objects.len() >= PARALLEL_BASIS {
            std::thread::scope(|s| {
                let digests = s.spawn(digests);
                let plan = Plan::decide(goal, inv, now);
                let digests = digests
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                (plan, digests)
            })
        } else {
            (Plan::decide(goal, inv, now), digests())
        };
        plan.fingerprint = fingerprint;
        plan.basis = basis;
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Join, Kind, Labels, Namespace, Object, ObjectKey, Reason, Scope, BOX_ID_LABEL,
        DEFAULT_ENGINE, SANDBOX_LABEL, SANDBOX_VALUE,
    };
    use crate::plan::inventory::Holder;
    use crate::plan::inventory::Use;

    const NOW: i64 = 1_800_000_000;

    fn labels(box_id: Option<&str>) -> Labels {
        let mut l = Labels::new();
        l.insert(SANDBOX_LABEL.into(), SANDBOX_VALUE.into());
        if let Some(b) = box_id {
            l.insert(BOX_ID_LABEL.into(), b.into());
        }
        l
    }

    fn key(kind: Kind, id: &str) -> ObjectKey {
        ObjectKey::new(DEFAULT_ENGINE, kind, id)
    }

    fn container(id: &str, box_id: Option<&str>, uses: &[&str]) -> Object {
        let mut o = Object::new(
            DEFAULT_ENGINE,
            Kind::Container,
            &format!("{id}0000000000000000"),
            &format!("sbx-{id}"),
        );
        o.state = Some("running".into());
        o.labels = labels(box_id);
        o.depends_on = used(uses, Kind::Volume);
        o
    }

    /// The keys of what `uses` names: `net:N` network N, else an object of
    /// `kind`.
    fn used(uses: &[&str], kind: Kind) -> Vec<ObjectKey> {
        uses.iter()
            .map(|u| match u.strip_prefix("net:") {
                Some(n) => key(Kind::Network, n),
                None => key(kind, u),
            })
            .collect()
    }

    fn volume(name: &str, box_id: Option<&str>) -> Object {
        let mut o = Object::new(DEFAULT_ENGINE, Kind::Volume, name, name);
        o.labels = labels(box_id);
        o
    }

    fn network(id: &str, box_id: Option<&str>) -> Object {
        let mut o = Object::new(DEFAULT_ENGINE, Kind::Network, id, &format!("net-{id}"));
        o.labels = labels(box_id);
        o
    }

    fn inventory(objects: Vec<Object>) -> Inventory {
        let containers: Vec<Object> = objects
            .iter()
            .filter(|o| o.kind() == Kind::Container)
            .cloned()
            .collect();
        Inventory::from_listings(
            DEFAULT_ENGINE,
            Scope::default(),
            objects,
            containers,
            vec![],
        )
    }

    fn reconcile(boxes: &[&str], keep: &[&str]) -> Goal {
        Goal::Reconcile {
            boxes: boxes.iter().map(|s| DeclaredBox::new(s)).collect(),
            keep_volumes: keep.iter().map(|s| KeptVolume::new(s)).collect(),
            grace: None,
            max_lease: None,
            archive: None,
        }
    }

    /// `destroy` of the boxes `ids` (`--keep-volume`: `keep_volume`).
    fn destroy(ids: &[&str], keep_volume: bool) -> Goal {
        Goal::Destroy {
            ids: ids.iter().map(|s| s.to_string()).collect(),
            keep_volume,
            keep_volumes: vec![],
            max_lease: None,
            archive: None,
        }
    }

    /// Boxes `a` (container, volume `va`, network `na`) and `b` (container,
    /// volume `vb`), and an unlabeled volume `loose`.
    fn boxes_a_and_b(loose: &str) -> Inventory {
        inventory(vec![
            container("a", Some("a"), &["va", "net:na"]),
            container("b", Some("b"), &["vb"]),
            volume("va", Some("a")),
            volume("vb", Some("b")),
            volume(loose, None),
            network("na", Some("a")),
        ])
    }

    fn names(steps: &[Step]) -> Vec<String> {
        steps.iter().map(|s| s.object.name.clone()).collect()
    }

    fn codes(noted: &[Noted]) -> Vec<(String, String)> {
        noted
            .iter()
            .map(|n| {
                let v = serde_json::to_value(&n.why).unwrap();
                (
                    n.object.name.clone(),
                    v["code"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn a_large_inventory_gets_its_basis_from_the_second_thread_unchanged() {
        let objects: Vec<Object> = (0..PARALLEL_BASIS)
            .flat_map(|i| {
                let v = format!("v{i:05}");
                [
                    container(&format!("c{i:05}"), None, &[&v]),
                    volume(&v, None),
                ]
            })
            .collect();
        let inv = inventory(objects);
        assert!(inv.objects.len() >= PARALLEL_BASIS);
        let plan = Plan::build(&reconcile(&[], &[]), &inv, NOW);
        let basis = inv.basis();
        assert_eq!(plan.basis.len(), inv.objects.len());
        assert_eq!(plan.fingerprint, fingerprint(&basis));
        assert_eq!(plan.basis, basis);
        assert_eq!(plan.steps.len(), 2 * PARALLEL_BASIS);
    }

    #[test]
    fn steps_are_in_natural_order_of_their_boxes() {
        // Issue 43: cb1, cb10, cb11, cb2 was text order.
        let inv = inventory(
            ["cb10", "cb2", "cb1", "cb11"]
                .iter()
                .map(|b| container(b, Some(b), &[]))
                .collect(),
        );
        let plan = Plan::build(&reconcile(&[], &[]), &inv, NOW);
        assert_eq!(
            names(&plan.steps),
            ["sbx-cb1", "sbx-cb2", "sbx-cb10", "sbx-cb11"]
        );
    }

    #[test]
    fn empty_inventory_gives_empty_plan() {
        let plan = Plan::build(&reconcile(&[], &[]), &inventory(vec![]), NOW);
        assert!(plan.is_empty());
        assert_eq!(plan.scope, labels(None));
        plan.validate().unwrap();
    }

    #[test]
    fn volume_and_network_wait_for_every_container_that_uses_them() {
        let inv = inventory(vec![
            container("a", Some("a"), &["shared", "net:n1"]),
            container("b", Some("b"), &["shared", "net:n1"]),
            volume("shared", Some("a")),
            network("n1", Some("a")),
        ]);
        let plan = Plan::build(&reconcile(&[], &[]), &inv, NOW);
        assert_eq!(
            names(&plan.steps),
            vec!["sbx-a", "sbx-b", "shared", "net-n1"]
        );
        assert_eq!(plan.steps[2].waits_for, vec![1, 2]);
        assert_eq!(plan.steps[3].waits_for, vec![1, 2]);
        assert!(plan.steps[0].waits_for.is_empty());
        plan.validate().unwrap();
    }

    #[test]
    fn declared_box_and_kept_volume_stay() {
        let inv = boxes_a_and_b("notes");
        let plan = Plan::build(&reconcile(&["a"], &["notes"]), &inv, NOW);
        assert_eq!(names(&plan.steps), vec!["sbx-b", "vb"]);
        let kept: Vec<&str> = plan.kept.all().map(|n| n.object.name.as_str()).collect();
        assert_eq!(kept, vec!["sbx-a", "notes", "va", "net-na"]);
    }

    #[test]
    fn what_a_kept_container_uses_is_kept() {
        let inv = inventory(vec![
            container("a", Some("a"), &["vb", "net:nb"]),
            volume("vb", Some("b")),
            network("nb", Some("b")),
        ]);
        let plan = Plan::build(&reconcile(&["a"], &[]), &inv, NOW);
        assert!(plan.steps.is_empty());
        assert_eq!(
            codes(&plan.kept.volumes),
            vec![("vb".into(), "mountedByKept".into())]
        );
        assert_eq!(
            codes(&plan.kept.networks),
            vec![("net-nb".into(), "mountedByKept".into())]
        );
    }

    #[test]
    fn objects_used_by_unmanaged_containers_are_blocked_with_what_they_use() {
        let mut inv = inventory(vec![
            container("a", None, &["va"]),
            volume("va", None),
            volume("v", Some("x")),
            network("n", Some("x")),
        ]);
        let holder = |how| Holder {
            kind: Kind::Container,
            id: "f00000000000000".into(),
            name: "web".into(),
            how,
        };
        inv.holders
            .insert(key(Kind::Volume, "v"), vec![holder(Use::Mounts)]);
        inv.holders
            .insert(key(Kind::Network, "n"), vec![holder(Use::Attached)]);
        inv.holders.insert(
            key(Kind::Container, "a0000000000000000"),
            vec![holder(Use::Joins(Namespace::Network))],
        );
        let plan = Plan::build(&reconcile(&[], &[]), &inv, NOW);
        assert!(plan.steps.is_empty(), "{:?}", names(&plan.steps));
        assert_eq!(
            codes(&plan.blocked),
            vec![
                ("sbx-a".into(), "heldByUnmanaged".into()),
                ("va".into(), "waitsForBlocked".into()),
                ("v".into(), "heldByUnmanaged".into()),
                ("net-n".into(), "heldByUnmanaged".into()),
            ]
        );
        assert!(!plan.is_empty());
    }

    #[test]
    fn a_managed_joiner_goes_before_the_container_it_joined() {
        let target = container("t", None, &[]);
        let mut joiner = container("j", None, &[]);
        joiner.joins = vec![Join {
            namespace: Namespace::Pid,
            target: target.name.clone(),
        }];
        let inv = inventory(vec![target, joiner]);
        let plan = Plan::build(&reconcile(&[], &[]), &inv, NOW);
        assert_eq!(names(&plan.steps), vec!["sbx-j", "sbx-t"]);
        assert_eq!(plan.steps[1].waits_for, vec![1]);
    }

    #[test]
    fn destroy_takes_only_named_boxes_and_honours_keep_volume() {
        let inv = boxes_a_and_b("leak");
        let plan = Plan::build(&destroy(&["a"], false), &inv, NOW);
        assert_eq!(names(&plan.steps), vec!["sbx-a", "va", "net-na"]);
        let plan = Plan::build(&destroy(&["a"], true), &inv, NOW);
        assert_eq!(names(&plan.steps), vec!["sbx-a", "net-na"]);
    }

    fn aged(mut o: Object, created: i64) -> Object {
        o.created = Some(created);
        o
    }

    #[test]
    fn grace_keeps_young_undeclared_objects_until_it_runs_out() {
        let grace = 600;
        let goal = Goal::Reconcile {
            boxes: vec![],
            keep_volumes: vec![],
            grace: Some(grace),
            max_lease: None,
            archive: None,
        };
        let created = NOW - 100;
        let inv = inventory(vec![
            aged(container("a", Some("a"), &["va"]), created),
            // The volume is older, but its container is young: the box is young.
            aged(volume("va", Some("a")), NOW - 10_000),
            aged(volume("lone", None), NOW - 10_000),
        ]);
        let plan = Plan::build(&goal, &inv, NOW);
        assert_eq!(names(&plan.steps), vec!["lone"]);
        assert_eq!(
            codes(&plan.kept.containers),
            vec![("sbx-a".into(), "withinGrace".into())]
        );
        let until = created + grace as i64;
        assert_eq!(
            plan.kept.containers[0].why,
            Reason::WithinGrace {
                until: rfc3339(until)
            }
        );
        // One second before the end: still kept; at the end: removed.
        assert_eq!(Plan::build(&goal, &inv, until - 1).steps.len(), 1);
        assert_eq!(
            names(&Plan::build(&goal, &inv, until).steps),
            vec!["sbx-a", "lone", "va"]
        );
    }

    #[test]
    fn expiry_and_ttl_end_a_declared_box() {
        let created = NOW - 3600;
        let inv = inventory(vec![
            aged(container("a", Some("a"), &[]), created),
            aged(container("b", Some("b"), &[]), created),
        ]);
        let goal = |at: i64| Goal::Reconcile {
            boxes: vec![
                DeclaredBox {
                    expires: Some(at),
                    ..DeclaredBox::new("a")
                },
                DeclaredBox {
                    ttl: Some(7200),
                    ..DeclaredBox::new("b")
                },
            ],
            keep_volumes: vec![],
            grace: None,
            max_lease: None,
            archive: None,
        };
        let plan = Plan::build(&goal(NOW + 1), &inv, NOW);
        assert!(plan.steps.is_empty());
        assert_eq!(
            plan.kept.containers[1].why,
            Reason::DeclaredBox {
                box_id: "b".into(),
                expires: Some(rfc3339(created + 7200)),
                line: None
            }
        );
        let plan = Plan::build(&goal(NOW), &inv, NOW);
        assert_eq!(names(&plan.steps), vec!["sbx-a"]);
        assert_eq!(
            plan.steps[0].why,
            Reason::Expired {
                box_id: "a".into(),
                at: rfc3339(NOW)
            }
        );
        let plan = Plan::build(&goal(NOW), &inv, created + 7200);
        assert_eq!(names(&plan.steps), vec!["sbx-a", "sbx-b"]);
    }

    #[test]
    fn a_box_declared_on_another_engine_is_not_declared_here() {
        let inv = inventory(vec![container("a", Some("a"), &[])]);
        let goal = Goal::declaring(vec![DeclaredBox {
            engine: Some("ci-1".into()),
            ..DeclaredBox::new("a")
        }]);
        let plan = Plan::build(&goal, &inv, NOW);
        assert_eq!(names(&plan.steps), vec!["sbx-a"]);
    }

    #[test]
    fn same_inputs_same_bytes() {
        let inv = inventory(vec![
            container("z", None, &["v1"]),
            container("a", Some("q"), &["v1", "v2"]),
            volume("v2", None),
            volume("v1", Some("q")),
        ]);
        let goal = reconcile(&[], &[]);
        let a = serde_json::to_string(&Plan::build(&goal, &inv, NOW)).unwrap();
        let b = serde_json::to_string(&Plan::build(&goal, &inv, NOW)).unwrap();
        assert_eq!(a, b);
        let round: Plan = serde_json::from_str(&a).unwrap();
        assert_eq!(serde_json::to_string(&round).unwrap(), a);
    }

    fn lease(name: &str, box_id: &str, ttl: &str, created: i64) -> Object {
        let mut o = volume(name, Some(box_id));
        o.labels
            .insert(crate::model::lease::LEASE_TTL_LABEL.into(), ttl.into());
        o.created = Some(created);
        o
    }

    #[test]
    fn a_live_lease_keeps_an_undeclared_box_and_ranks_below_the_state_file() {
        let inv = inventory(vec![
            container("a", Some("a"), &["va"]),
            volume("va", Some("a")),
            lease("la", "a", "10m", NOW - 60),
            container("d", Some("d"), &[]),
            lease("ld", "d", "10m", NOW - 60),
            container("n", None, &[]),
        ]);
        // Declared with an expiry that has passed: the state file rules.
        let mut goal = reconcile(&[], &[]);
        if let Goal::Reconcile { boxes, .. } = &mut goal {
            boxes.push(DeclaredBox {
                expires: Some(NOW - 1),
                ..DeclaredBox::new("d")
            });
        }
        let plan = Plan::build(&goal, &inv, NOW);
        assert_eq!(names(&plan.steps), vec!["sbx-n", "sbx-d", "ld"]);
        let kept: Vec<(String, String)> = plan
            .kept
            .all()
            .cloned()
            .collect::<Vec<_>>()
            .iter()
            .map(|n| {
                (
                    n.object.name.clone(),
                    serde_json::to_value(&n.why).unwrap()["code"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                )
            })
            .collect();
        assert_eq!(
            kept,
            vec![
                ("sbx-a".to_string(), "leased".to_string()),
                ("la".to_string(), "leased".to_string()),
                ("va".to_string(), "leased".to_string()),
            ]
        );
        // Once it runs out, the box and its lease go.
        let later = Plan::build(&goal, &inv, NOW + 600);
        assert_eq!(
            names(&later.steps),
            vec!["sbx-n", "sbx-a", "sbx-d", "la", "va", "ld"]
        );
    }

    #[test]
    fn destroy_removes_a_leased_box_and_says_it_was_leased() {
        let inv = inventory(vec![
            container("a", Some("a"), &[]),
            lease("la", "a", "10m", NOW - 60),
        ]);
        let plan = Plan::build(&destroy(&["a"], false), &inv, NOW);
        assert_eq!(names(&plan.steps), vec!["sbx-a", "la"]);
        // `--keep-volume` keeps the box's data, not its lease.
        let mut with_data = inv.clone();
        let data = volume("va", Some("a"));
        with_data.objects.insert(data.key.clone(), data);
        let kept = Plan::build(&destroy(&["a"], true), &with_data, NOW);
        assert_eq!(names(&kept.steps), vec!["sbx-a", "la"]);
        assert_eq!(
            codes(&kept.kept.volumes),
            vec![("va".to_string(), "keepVolumeFlag".to_string())]
        );
        assert_eq!(
            plan.steps[1].why,
            Reason::DestroyRequested {
                box_id: "a".into(),
                leased_until: Some(rfc3339(NOW + 540)),
            }
        );
    }

    #[test]
    fn an_expired_lease_goes_with_its_box_not_by_its_own_age() {
        // The box is an hour old; its driver's last lease (ttl 10 s, shorter
        // than the 60 s grace) was made 20 s ago and has run out.
        let mut c = container("a", Some("a"), &["va"]);
        c.created = Some(NOW - 3600);
        let mut v = volume("va", Some("a"));
        v.created = Some(NOW - 3600);
        let inv = inventory(vec![c, v, lease("la", "a", "10s", NOW - 20)]);
        let goal = Goal::Reconcile {
            boxes: vec![],
            keep_volumes: vec![],
            grace: Some(60),
            max_lease: None,
            archive: None,
        };
        let plan = Plan::build(&goal, &inv, NOW);
        assert_eq!(names(&plan.steps), vec!["sbx-a", "la", "va"]);
        // A lone lease of a box with nothing else counts from its own creation.
        let lone = inventory(vec![lease("lb", "b", "10s", NOW - 20)]);
        let plan = Plan::build(&goal, &lone, NOW);
        assert!(plan.steps.is_empty());
        assert_eq!(
            codes(&plan.kept.volumes),
            vec![("lb".to_string(), "withinGrace".to_string())]
        );
    }

    /// A service `id` of `box_id` using `uses` (`net:` networks, else configs).
    fn service(id: &str, box_id: Option<&str>, uses: &[&str]) -> Object {
        let mut o = Object::new(DEFAULT_ENGINE, Kind::Service, id, &format!("svc-{id}"));
        o.labels = labels(box_id);
        o.depends_on = used(uses, Kind::Config);
        o
    }

    fn task(id: &str, box_id: Option<&str>, service: &str, uses: &[&str]) -> Object {
        let mut c = container(id, box_id, uses);
        c.labels
            .insert(crate::model::SWARM_SERVICE_ID.into(), service.into());
        c
    }

    fn swarm_object(kind: Kind, id: &str, box_id: Option<&str>) -> Object {
        let mut o = Object::new(DEFAULT_ENGINE, kind, id, &format!("{kind}-{id}"));
        o.labels = labels(box_id);
        o
    }

    #[test]
    fn a_managed_service_goes_before_its_tasks_and_what_they_use() {
        let inv = inventory(vec![
            service("s1", Some("b"), &["net:n", "cf"]),
            task("t1", Some("b"), "s1", &["net:n"]),
            network("n", Some("b")),
            swarm_object(Kind::Config, "cf", Some("b")),
        ]);
        let plan = Plan::build(&reconcile(&[], &[]), &inv, NOW);
        assert_eq!(
            names(&plan.steps),
            ["svc-s1", "sbx-t1", "net-n", "config-cf"],
            "{plan:#?}"
        );
        assert_eq!(plan.steps[1].waits_for, vec![1]);
        assert_eq!(plan.steps[2].waits_for, vec![1, 2]);
        assert_eq!(plan.steps[3].waits_for, vec![1]);
        assert!(plan.blocked.is_empty());
    }

    #[test]
    fn a_task_that_stays_keeps_or_blocks_its_service() {
        // Declared box `a` owns the task; the service is box `b`'s (a leak):
        // removing the service would take the kept task, so it stays.
        let inv = inventory(vec![
            service("s1", Some("b"), &[]),
            task("t1", Some("a"), "s1", &[]),
        ]);
        let plan = Plan::build(&reconcile(&["a"], &[]), &inv, NOW);
        assert!(plan.steps.is_empty(), "{plan:#?}");
        assert_eq!(
            codes(&plan.kept.services),
            [("svc-s1".to_string(), "mountedByKept".to_string())]
        );
        // A task another container joined (unmanaged) is blocked: so is its service.
        let mut inv = inventory(vec![
            service("s1", Some("b"), &[]),
            task("t1", Some("b"), "s1", &[]),
        ]);
        inv.holders.insert(
            key(Kind::Container, "t10000000000000000"),
            vec![Holder {
                kind: Kind::Container,
                id: "f".into(),
                name: "foreign".into(),
                how: Use::Joins(Namespace::Pid),
            }],
        );
        let plan = Plan::build(&reconcile(&[], &[]), &inv, NOW);
        assert!(plan.steps.is_empty(), "{plan:#?}");
        let service = plan
            .blocked
            .iter()
            .find(|n| n.object.kind == Kind::Service)
            .expect("the service is blocked");
        assert_eq!(
            service.why.to_string(),
            "in use by blocked container sbx-t1 (t10000000000, a task of it)"
        );
    }

    #[test]
    fn an_orchestrator_owned_container_is_blocked_unless_its_service_is_managed_or_gone() {
        // Its service is not managed, but listed: blocked, naming it.
        let mut foreign = service("s9", None, &[]);
        foreign.labels.clear();
        let owned = task("t1", Some("b"), "s9", &["v"]);
        let mut inv = Inventory::from_listings(
            DEFAULT_ENGINE,
            Scope::default(),
            vec![owned.clone(), volume("v", Some("b"))],
            vec![owned.clone(), foreign],
            vec![],
        );
        let plan = Plan::build(&reconcile(&[], &[]), &inv, NOW);
        assert!(plan.steps.is_empty(), "{plan:#?}");
        assert_eq!(
            codes(&plan.blocked),
            [
                ("sbx-t1".to_string(), "ownedByOrchestrator".to_string()),
                ("v".to_string(), "waitsForBlocked".to_string())
            ]
        );
        // A manager's listing shows no such service: an orphan, removed.
        let inv2 = inventory(vec![owned.clone(), volume("v", Some("b"))]);
        let plan = Plan::build(&reconcile(&[], &[]), &inv2, NOW);
        assert_eq!(names(&plan.steps), ["sbx-t1", "v"]);
        // Not a manager: the service cannot be seen, so the task stays.
        inv.swarm_skipped = Some(crate::model::EngineError::new(
            "list services",
            crate::model::ErrorKind::NoSwarm {
                worker: true,
                message: "This node is not a swarm manager.".into(),
            },
        ));
        inv.unmanaged.retain(|o| o.kind() != Kind::Service);
        let plan = Plan::build(&reconcile(&[], &[]), &inv, NOW);
        assert_eq!(plan.blocked.len(), 2, "{plan:#?}");
        // Nomad and Kubernetes owners are never managed here: always blocked.
        let mut pod = container("p1", Some("b"), &[]);
        pod.labels
            .insert("io.kubernetes.pod.uid".into(), "uid-1".into());
        let plan = Plan::build(&reconcile(&[], &[]), &inventory(vec![pod]), NOW);
        assert_eq!(
            codes(&plan.blocked),
            [("sbx-p1".to_string(), "ownedByOrchestrator".to_string())]
        );
    }
}
