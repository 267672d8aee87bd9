//! One reconcile: list, plan, apply, verify, against one engine. The body of
//! `apply`, `destroy` and every cycle of `watch`; `Carry` is what a run
//! carries its plans out with (options, cancellation, observer).
//!
//! Owns the order of the stages and the saved-plan checks (stale, edited).
//! Prints nothing and reads no clock: the time is an input, and what happens
//! is told to an `Observer`. Must not decide anything the planner, the error
//! policy or the verifier decides.

use std::collections::BTreeMap;

use tokio_util::sync::CancellationToken;

use crate::engine::Engine;
use crate::exec::apply::{apply, ApplyOptions};
use crate::exec::event::{Event, Observer};
use crate::exec::report::{Early, Report};
use crate::exec::verify::verify_with;
use crate::model::Scope;
use crate::plan::{Goal, Plan};

pub use crate::exec::list::{plan_once, plan_with};

/// How a run carries its plans out: the apply options, the run's
/// cancellation, and who hears of the plan and of every step.
#[derive(Clone, Copy)]
pub(crate) struct Carry<'a> {
    pub(crate) options: &'a ApplyOptions,
    pub(crate) cancel: &'a CancellationToken,
    pub(crate) observer: &'a dyn Observer,
}

impl<'a> Carry<'a> {
    pub(crate) fn new(
        options: &'a ApplyOptions,
        cancel: &'a CancellationToken,
        observer: &'a dyn Observer,
    ) -> Self {
        Carry {
            options,
            cancel,
            observer,
        }
    }
}

/// Plans `goal` afresh and carries the plan out: list, plan, apply, verify.
/// `observer` hears of the plan before any removal, then of every step.
pub(crate) async fn reconcile_once(
    engine: &dyn Engine,
    goal: &Goal,
    scope: &Scope,
    now: i64,
    carry: &Carry<'_>,
) -> Result<Report, Early> {
    let memo = &carry.options.memo;
    memo.begin(engine.name());
    let (inventory, plan) = plan_with(engine, goal, scope, now, memo).await?;
    carry.observer.on(&Event::Planned {
        engine: engine.name(),
        inventory: &inventory,
        plan: &plan,
    });
    Ok(execute(engine, &plan, carry).await)
}

/// Refuses a saved plan when the inventory changed since it was made (stale)
/// or its steps are not what the planner makes of that inventory (edited).
pub(crate) async fn check_saved(engine: &dyn Engine, saved: &Plan) -> Result<(), Early> {
    let (_, fresh) = plan_once(engine, &saved.goal, &saved.scope(), saved.now()).await?;
    // A plan is carried out only on an inventory as complete as the one it
    // was made from: what either discovery could not learn could change it.
    if saved.incomplete.is_empty() && !fresh.incomplete.is_empty() {
        return Err(Early::Incomplete(Box::new(fresh)));
    }
    if fresh.incomplete != saved.incomplete {
        let mut changes: Vec<String> = fresh
            .incomplete
            .iter()
            .filter(|t| !saved.incomplete.contains(t))
            .map(|t| format!("now {t}"))
            .collect();
        changes.extend(
            saved
                .incomplete
                .iter()
                .filter(|t| !fresh.incomplete.contains(t))
                .map(|t| format!("when it was made, {t}")),
        );
        return Err(Early::Stale {
            changes: changes.join(", "),
        });
    }
    if fresh.basis != saved.basis {
        return Err(Early::Stale {
            changes: describe_changes(&saved.basis, &fresh.basis),
        });
    }
    // Same inventory, same goal: the planner must give these very steps. A plan
    // that differs was edited, and could name an object that is not ours.
    if !same_work(saved, &fresh) {
        return Err(Early::Edited);
    }
    Ok(())
}

/// Applies `plan` and verifies: the second half of every reconcile.
pub(crate) async fn execute(engine: &dyn Engine, plan: &Plan, carry: &Carry<'_>) -> Report {
    let Carry {
        options,
        cancel,
        observer,
    } = *carry;
    let applied = apply(engine, plan, options, cancel, observer).await;
    observer.on(&Event::Applied {
        engine: engine.name(),
    });
    verify_with(engine, plan, &applied, &options.memo).await
}

/// True if both plans do the same work: every field of every step (the
/// object, why, what it waits for, where its volume is archived and through
/// which container it is read) and every blocked object with why, but a
/// container's running state (not part of the basis). An edit of any field
/// that changes what `apply FILE` does is a difference.
fn same_work(a: &Plan, b: &Plan) -> bool {
    let work = |p: &Plan| -> (serde_json::Value, serde_json::Value) {
        let mut steps = serde_json::to_value(&p.steps).unwrap_or_default();
        if let Some(steps) = steps.as_array_mut() {
            for step in steps {
                if let Some(object) = step.get_mut("object").and_then(|o| o.as_object_mut()) {
                    object.remove("state");
                }
                // The step's own fields flattened beside its object's.
                if let Some(step) = step.as_object_mut() {
                    step.remove("state");
                }
            }
        }
        let blocked: Vec<(String, serde_json::Value)> = p
            .blocked
            .iter()
            .map(|n| {
                let why = serde_json::to_value(&n.why).unwrap_or_default();
                (n.object.key().to_string(), why)
            })
            .collect();
        (steps, serde_json::to_value(blocked).unwrap_or_default())
    };
    a.scope == b.scope && a.engine == b.engine && work(a) == work(b)
}

/// What differs between the basis a plan was made from and the inventory now.
fn describe_changes(then: &BTreeMap<String, String>, now: &BTreeMap<String, String>) -> String {
    let mut changes: Vec<String> = Vec::new();
    for (k, v) in now {
        match then.get(k) {
            None => changes.push(format!("{k} is new")),
            Some(old) if old != v => changes.push(format!("{k} changed")),
            Some(_) => {}
        }
    }
    changes.extend(
        then.keys()
            .filter(|k| !now.contains_key(*k))
            .map(|k| format!("{k} is gone")),
    );
    changes.sort();
    let total = changes.len();
    if total > 10 {
        changes.truncate(10);
        changes.push(format!("and {} more", total - 10));
    }
    changes.join(", ")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::engine::memory::{
        box_labels, ContainerInfo, FaultAction, MemoryEngine, Op, VolumeInfo, World,
    };
    use crate::engine::EngineError;
    use crate::exec::event::Silent;
    use crate::model::Kind;
    use crate::model::Outcome;
    use crate::plan::DeclaredBox;

    use std::time::Duration;

    pub(crate) const NOW: i64 = 1_800_000_000;

    fn cancelled() -> CancellationToken {
        let token = CancellationToken::new();
        token.cancel();
        token
    }

    fn world() -> World {
        let mut c = ContainerInfo::new("c1", "sbx-a", box_labels("a"));
        c.mounts.insert("va".into());
        World {
            containers: vec![c],
            volumes: vec![VolumeInfo {
                name: "va".into(),
                labels: box_labels("a"),
                created_at: None,
            }],
            ..World::default()
        }
    }

    fn leaks() -> Goal {
        Goal::nothing_declared()
    }

    /// Box `a` declared, nothing else.
    fn declared_a() -> Goal {
        Goal::declaring(vec![DeclaredBox::new("a")])
    }

    /// One reconcile of `goal` on `engine` at `NOW`, every option the default.
    pub(crate) async fn once(engine: &MemoryEngine, goal: &Goal) -> Result<Report, Early> {
        once_until(engine, goal, &CancellationToken::new()).await
    }

    /// The same, until `cancel` is cancelled.
    async fn once_until(
        engine: &MemoryEngine,
        goal: &Goal,
        cancel: &CancellationToken,
    ) -> Result<Report, Early> {
        let options = ApplyOptions::default();
        let carry = Carry::new(&options, cancel, &Silent);
        reconcile_once(engine, goal, &Scope::default(), NOW, &carry).await
    }

    /// One reconcile of `leaks()` on `world()` while its first `times` `op`s
    /// fail (`call` answered with a 500 saying `detail`): the engine after
    /// it, and the report.
    async fn once_failing(
        op: Op,
        call: &str,
        detail: &str,
        times: usize,
    ) -> (MemoryEngine, Report) {
        let engine = MemoryEngine::new(world());
        let err = EngineError::status_500(call, detail);
        engine.inject(op, None, FaultAction::Fail(err), times);
        let report = once(&engine, &leaks()).await.unwrap();
        (engine, report)
    }

    /// `plan` applied on `engine`, every option the default.
    pub(crate) async fn applied(engine: &MemoryEngine, plan: &Plan) -> crate::exec::apply::Applied {
        apply(
            engine,
            plan,
            &ApplyOptions::default(),
            &CancellationToken::new(),
            &Silent,
        )
        .await
    }

    /// Box `a` (container `c1` mounting `va`) and a leaked volume `vb`;
    /// the engine measures `c1` and `va`, not `vb` (another driver's).
    fn measured_world() -> World {
        let mut w = world();
        w.volumes.push(VolumeInfo {
            name: "vb".into(),
            labels: box_labels("b"),
            created_at: None,
        });
        w.sizes = [("c1", 5_000_000), ("va", 3_145_728)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        w
    }

    /// Every `Unmeasured` event an observer heard, in words.
    #[derive(Default)]
    struct Heard(std::sync::Mutex<Vec<String>>);

    impl crate::exec::event::Observer for Heard {
        fn on(&self, event: &crate::exec::event::Event<'_>) {
            if let crate::exec::event::Event::Unmeasured { engine, error } = event {
                self.0.lock().unwrap().push(format!("{engine}: {error}"));
            }
        }
    }

    /// One reconcile of `leaks()` on `engine` with `--reclaimed` on or off;
    /// the report and the `Unmeasured` events.
    async fn reclaiming(engine: &MemoryEngine, reclaimed: bool) -> (Report, Vec<String>) {
        let options = ApplyOptions {
            reclaimed,
            ..ApplyOptions::default()
        };
        let heard = Heard::default();
        let cancel = CancellationToken::new();
        let carry = Carry::new(&options, &cancel, &heard);
        let report = reconcile_once(engine, &leaks(), &Scope::default(), NOW, &carry)
            .await
            .unwrap();
        (report, heard.0.into_inner().unwrap())
    }

    /// Each removed object's figure, by name.
    fn figures(report: &Report) -> Vec<(String, Option<u64>)> {
        report
            .removed
            .containers
            .iter()
            .chain(&report.removed.volumes)
            .map(|g| (g.object.name.clone(), g.reclaimed_bytes))
            .collect()
    }

    fn size_reads(engine: &MemoryEngine) -> usize {
        engine
            .calls()
            .iter()
            .filter(|c| c.starts_with("DiskUsage"))
            .count()
    }

    #[tokio::test]
    async fn with_reclaimed_each_removed_object_carries_what_the_engine_measured() {
        let engine = MemoryEngine::new(measured_world());
        let (report, heard) = reclaiming(&engine, true).await;
        assert!(report.converged, "{report:?}");
        assert_eq!(
            figures(&report),
            [
                ("sbx-a".to_string(), Some(5_000_000)),
                ("va".to_string(), Some(3_145_728)),
                ("vb".to_string(), None),
            ]
        );
        assert_eq!(report.reclaimed.total(), Some(8_145_728));
        assert_eq!(report.reclaimed.unmeasured, 1);
        assert!(heard.is_empty(), "{heard:?}");
        // One read for the whole run, before the first removal.
        assert_eq!(size_reads(&engine), 1);
        let calls = engine.calls();
        let first_removal = calls.iter().position(|c| c.starts_with("Remove")).unwrap();
        assert!(calls[..first_removal]
            .iter()
            .any(|c| c.starts_with("DiskUsage")));
    }

    #[tokio::test]
    async fn without_reclaimed_nothing_is_measured_and_the_total_is_null() {
        let engine = MemoryEngine::new(measured_world());
        let (report, _) = reclaiming(&engine, false).await;
        assert!(report.converged);
        assert_eq!(size_reads(&engine), 0, "no call added to the default path");
        assert!(figures(&report).iter().all(|(_, f)| f.is_none()));
        assert_eq!(report.reclaimed.total(), None);
        assert_eq!(report.reclaimed.unmeasured, 3);
        let json: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&report).unwrap()).unwrap();
        assert_eq!(json["reclaimedBytes"], serde_json::Value::Null, "never 0");
        assert_eq!(
            json["removed"]["volumes"][0]["reclaimedBytes"],
            serde_json::Value::Null
        );
    }

    #[tokio::test]
    async fn a_failed_size_read_leaves_the_figures_unknown_and_fails_no_removal() {
        let engine = MemoryEngine::new(measured_world());
        let err = EngineError::status_500(
            "measure disk usage (GET /system/df)",
            "a disk usage operation is already running",
        );
        engine.inject(Op::DiskUsage, None, FaultAction::Fail(err), 1);
        let (report, heard) = reclaiming(&engine, true).await;
        assert!(
            report.converged,
            "a read's failure degrades only the figure"
        );
        assert!(report.failures.is_empty());
        assert!(engine.world().volumes.is_empty() && engine.world().containers.is_empty());
        assert!(figures(&report).iter().all(|(_, f)| f.is_none()));
        assert_eq!(report.reclaimed.total(), None);
        assert_eq!(heard.len(), 1);
        assert!(heard[0].contains("already running"), "{heard:?}");
    }

    #[tokio::test]
    async fn a_size_read_past_its_deadline_costs_only_that_deadline() {
        let engine = MemoryEngine::new(measured_world()).with_deadline(Duration::from_millis(200));
        engine.inject(
            Op::DiskUsage,
            None,
            FaultAction::Delay(Duration::from_secs(60)),
            1,
        );
        let began = std::time::Instant::now();
        let (report, heard) = reclaiming(&engine, true).await;
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "{:?}",
            began.elapsed()
        );
        assert!(report.converged);
        assert_eq!(report.reclaimed.total(), None);
        assert_eq!(heard.len(), 1);
        assert!(heard[0].contains("no answer within"), "{heard:?}");
        assert_eq!(
            engine.deadline_misses(),
            [("GET /system/df".to_string(), 1)]
        );
    }

    #[tokio::test]
    async fn what_another_actor_removed_or_a_failed_removal_gave_nothing_we_know_of() {
        let engine = MemoryEngine::new(measured_world());
        // `va` vanishes before its removal (another actor): measured, yet
        // what it gave back is not known to this run.
        engine.inject(
            Op::Remove(Kind::Volume),
            Some("va"),
            FaultAction::VanishFirst,
            1,
        );
        let (report, _) = reclaiming(&engine, true).await;
        assert_eq!(report.removed.volumes[0].outcome, Outcome::AlreadyGone);
        assert_eq!(report.removed.volumes[0].reclaimed_bytes, None);
        assert_eq!(report.reclaimed.total(), Some(5_000_000));
        // A failed removal is not among the removed: it gave nothing back.
        let engine = MemoryEngine::new(measured_world());
        let err = EngineError::status_500("remove container c1", "boom");
        engine.inject(Op::Remove(Kind::Container), None, FaultAction::Fail(err), 1);
        let (report, _) = reclaiming(&engine, true).await;
        assert!(!report.converged);
        assert_eq!(figures(&report), [("vb".to_string(), None)]);
        assert_eq!(report.reclaimed.total(), None);
    }

    #[tokio::test]
    async fn converges_and_reports_in_kind_order() {
        let engine = MemoryEngine::new(world());
        let report = once(&engine, &leaks()).await.unwrap();
        assert!(report.converged);
        assert_eq!(report.removed.containers.len(), 1);
        assert_eq!(report.removed.volumes[0].outcome, Outcome::Removed);
        assert!(engine.world().volumes.is_empty());
    }

    /// How many listings of containers `engine` was asked for: by label or
    /// of every one, and of the users of something.
    fn container_listings(engine: &MemoryEngine) -> (usize, usize) {
        let list = format!("{:?} ", Op::List(Kind::Container));
        let users = format!("{:?} users", Op::List(Kind::Container));
        let count = |what: &str| engine.calls().iter().filter(|c| *c == what).count();
        (count(&list), count(&users))
    }

    #[tokio::test]
    async fn a_verification_that_finds_nothing_managed_lists_no_other_container() {
        let engine = MemoryEngine::new(world());
        assert!(once(&engine, &leaks()).await.unwrap().converged);
        // The plan's: the managed ones, every one (c1's creation time is
        // unknown, so no `since` can be made) and the users of volume va;
        // the verification's: the managed ones only.
        assert_eq!(container_listings(&engine), (3, 1));
        // Something managed stays (declared): the verification lists who
        // may use it too.
        let engine = MemoryEngine::new(world());
        let declared = declared_a();
        assert!(once(&engine, &declared).await.unwrap().converged);
        assert_eq!(container_listings(&engine), (4, 2));
    }

    #[tokio::test]
    async fn a_failed_volume_listing_keeps_what_a_lease_could_hold_and_names_it() {
        let (engine, report) =
            once_failing(Op::List(Kind::Volume), "list volumes", "boom", 2).await;
        assert!(!report.converged);
        assert_eq!(engine.world(), world());
        let left = serde_json::to_value(&report.remaining.containers[0].reason).unwrap();
        assert_eq!(left["code"], "listingFailed");
        assert_eq!(left["listing"], "volumes");
        assert!(
            report.failures[0]
                .error
                .starts_with("could not list volumes"),
            "{:?}",
            report.failures
        );
    }

    #[tokio::test]
    async fn an_engine_that_answers_no_listing_fails_early() {
        let engine = MemoryEngine::new(world());
        engine.disconnect();
        let early = once(&engine, &leaks()).await.unwrap_err();
        assert!(matches!(early, Early::Listing(_)), "{early}");
        assert_eq!(engine.world(), world());
    }

    #[tokio::test]
    async fn a_saved_plan_is_refused_when_stale_and_when_edited() {
        let engine = MemoryEngine::new(world());
        let (_, plan) = plan_once(&engine, &leaks(), &Scope::default(), NOW)
            .await
            .unwrap();
        // Another box appears: stale.
        let other = MemoryEngine::new({
            let mut w = world();
            w.containers
                .push(ContainerInfo::new("c2", "sbx-b", box_labels("b")));
            w
        });
        let stale = check_saved(&other, &plan).await.unwrap_err();
        assert!(
            matches!(&stale, Early::Stale { changes } if changes.contains("container/c2 is new")),
            "{stale}"
        );
        assert_eq!(other.world().containers.len(), 2);
        // The same inventory, but a step dropped: edited.
        let mut edited = plan.clone();
        edited.steps.pop();
        let early = check_saved(&engine, &edited).await.unwrap_err();
        assert!(matches!(early, Early::Edited));
        assert_eq!(engine.world(), world());
        // Unchanged: carried out.
        check_saved(&engine, &plan).await.unwrap();
        let (options, cancel) = (ApplyOptions::default(), CancellationToken::new());
        let report = execute(&engine, &plan, &Carry::new(&options, &cancel, &Silent)).await;
        assert!(report.converged);
    }

    #[tokio::test]
    async fn a_saved_plan_edited_to_skip_or_move_an_archive_is_refused() {
        let mut w = world();
        // Read through its container: the container's step carries `reads`.
        w.containers[0].paths.insert("va".into(), "/data".into());
        let engine = MemoryEngine::new(w.clone());
        let goal = leaks().with_archive(Some(crate::plan::ArchivePolicy::new("/srv/archive")));
        let (_, plan) = plan_once(&engine, &goal, &Scope::default(), NOW)
            .await
            .unwrap();
        assert!(plan.steps[1].archive.is_some() && !plan.steps[0].reads.is_empty());
        let edits: [fn(&mut Plan); 4] = [
            |p| p.steps[1].archive = None,
            |p| p.steps[1].archive = Some("/tmp/elsewhere".into()),
            |p| p.steps[0].reads[0].path = "/".into(),
            |p| p.steps[1].archived_by = None,
        ];
        for edit in edits {
            let mut edited = plan.clone();
            edit(&mut edited);
            let early = check_saved(&engine, &edited).await.unwrap_err();
            assert!(matches!(early, Early::Edited), "{early}");
        }
        assert_eq!(engine.world(), w, "nothing removed");
        check_saved(&engine, &plan).await.unwrap();
    }

    #[tokio::test]
    async fn an_interrupted_run_starts_nothing_and_reports_every_leftover() {
        let engine = MemoryEngine::new(world());
        let report = once_until(&engine, &leaks(), &cancelled()).await.unwrap();
        assert!(report.interrupted && !report.converged);
        let codes: Vec<String> = report
            .all_remaining()
            .map(|l| serde_json::to_value(&l.reason).unwrap()["code"].to_string())
            .collect();
        assert_eq!(codes, vec!["\"interrupted\"", "\"interrupted\""]);
    }

    #[tokio::test]
    async fn a_failed_removal_skips_what_waits_for_it_and_is_not_converged() {
        let (engine, report) = once_failing(
            Op::Remove(Kind::Container),
            "remove container c1",
            "driver failed",
            1,
        )
        .await;
        assert!(!report.converged);
        assert_eq!(report.failures.len(), 1);
        let reason = serde_json::to_value(&report.remaining.volumes[0].reason).unwrap();
        assert_eq!(reason["code"], "waitsForFailed");
        // Declared: nothing to do, converged.
        let declared = declared_a();
        assert!(once(&engine, &declared).await.unwrap().converged);
        let _ = Outcome::Removed;
    }
}
