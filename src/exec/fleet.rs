//! A fleet: one job over every engine the state file names, at once.
//!
//! Owns running the per-engine work concurrently within one removal budget
//! (each engine also capped), failing an engine's part alone (an engine that
//! cannot be reached or listed is a failure of kind `engine`, its objects
//! untouched, while the others still converge), and merging the per-engine
//! plans and reports into the fleet's. Each engine's own work is exactly the
//! single-engine `plan_once` / `reconcile_once` / `reconcile_saved`. Must not
//! print or decide anything per object.

use std::cell::RefCell;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

use crate::engine::Engine;
use crate::exec::apply::ApplyOptions;
use crate::exec::reconcile::{
    check_saved, execute, plan_once, reconcile_once, Early, ReconcileObserver,
};
use crate::exec::verify::{Failure, Report};
use crate::model::Scope;
use crate::plan::inventory::Inventory;
use crate::plan::{Goal, Plan, PLAN_VERSION};

/// The plans of a fleet: one per engine that could be listed, and a failure
/// per engine that could not. The saved form of a fleet's plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetPlan {
    pub version: u32,
    /// One plan per engine that was listed, in the state file's order.
    pub engines: Vec<Plan>,
    /// Engines that could not be reached or listed.
    #[serde(default)]
    pub failures: Vec<Failure>,
}

impl FleetPlan {
    /// True when no engine has anything to remove or blocked, and none failed.
    pub fn is_empty(&self) -> bool {
        self.failures.is_empty() && self.engines.iter().all(Plan::is_empty)
    }

    /// Checks every engine's plan (see `Plan::validate`) and that each engine appears once.
    pub fn validate(&self) -> Result<(), String> {
        if self.version != PLAN_VERSION {
            return Err(format!(
                "plan version {} is not supported (expected {PLAN_VERSION}); make a new plan with `sandboxctl plan --out`",
                self.version
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for p in &self.engines {
            if !seen.insert(p.engine.as_str()) {
                return Err(format!("engine {} has two plans", p.engine));
            }
            p.validate()
                .map_err(|e| format!("engine {}: {e}", p.engine))?;
        }
        Ok(())
    }
}

/// Per-engine summary of a fleet's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EngineSummary {
    pub engine: String,
    pub endpoint: String,
    pub converged: bool,
    pub removed: usize,
    pub failures: usize,
    pub remaining: usize,
    /// Why the engine's part did not run (unreachable, listing failed, stale plan).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A fleet's report: the seed's keys over every engine (each entry carries
/// its `engine`), and a summary per engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FleetReport {
    #[serde(flatten)]
    pub report: Report,
    pub engines: Vec<EngineSummary>,
    /// The per-engine reports, for grouped human output.
    #[serde(skip)]
    pub parts: Vec<(String, Report)>,
}

fn engine_failure(engine: &dyn Engine, error: String) -> Failure {
    Failure {
        kind: "engine".into(),
        engine: engine.name().to_string(),
        name: engine.endpoint().to_string(),
        id: None,
        error,
    }
}

/// Merges per-engine results into the fleet's report. Pure.
pub fn merge(results: Vec<(&dyn Engine, Result<Report, Early>)>) -> FleetReport {
    let mut merged = Report::empty();
    merged.converged = true;
    let mut engines = Vec::new();
    let mut parts = Vec::new();
    for (engine, result) in results {
        let mut summary = EngineSummary {
            engine: engine.name().to_string(),
            endpoint: engine.endpoint().to_string(),
            converged: false,
            removed: 0,
            failures: 0,
            remaining: 0,
            error: None,
        };
        let report = match result {
            Ok(r) => r,
            Err(e) => {
                summary.error = Some(e.to_string());
                Report::failed_before_apply(engine.name(), engine.endpoint(), e.to_string())
            }
        };
        summary.converged = report.converged;
        summary.removed = report.removed.len();
        summary.failures = report.failures.len();
        summary.remaining = report.all_remaining().count();
        merged.converged &= report.converged;
        merged.interrupted |= report.interrupted;
        if merged.now.is_none() {
            merged.now = report.now.clone();
        }
        merged
            .removed
            .containers
            .extend(report.removed.containers.iter().cloned());
        merged
            .removed
            .volumes
            .extend(report.removed.volumes.iter().cloned());
        merged
            .removed
            .networks
            .extend(report.removed.networks.iter().cloned());
        merged
            .kept
            .containers
            .extend(report.kept.containers.iter().cloned());
        merged
            .kept
            .volumes
            .extend(report.kept.volumes.iter().cloned());
        merged
            .kept
            .networks
            .extend(report.kept.networks.iter().cloned());
        for image in &report.retained.images {
            if !merged.retained.images.contains(image) {
                merged.retained.images.push(image.clone());
            }
        }
        merged.failures.extend(report.failures.iter().cloned());
        merged
            .remaining
            .containers
            .extend(report.remaining.containers.iter().cloned());
        merged
            .remaining
            .volumes
            .extend(report.remaining.volumes.iter().cloned());
        merged
            .remaining
            .networks
            .extend(report.remaining.networks.iter().cloned());
        engines.push(summary);
        parts.push((engine.name().to_string(), report));
    }
    FleetReport {
        report: merged,
        engines,
        parts,
    }
}

/// Plans `goal` on every engine at once. An engine that cannot be listed is
/// a failure of the fleet plan; the others are planned.
pub async fn plan_all(
    engines: &[Arc<dyn Engine>],
    goal: &Goal,
    scope: &Scope,
    now: i64,
) -> (FleetPlan, Vec<Inventory>) {
    let results = join_all(
        engines
            .iter()
            .map(|e| async move { (e, plan_once(e.as_ref(), goal, scope, now).await) }),
    )
    .await;
    let mut fleet = FleetPlan {
        version: PLAN_VERSION,
        engines: Vec::new(),
        failures: Vec::new(),
    };
    let mut inventories = Vec::new();
    for (engine, result) in results {
        match result {
            Ok((inventory, plan)) => {
                fleet.engines.push(plan);
                inventories.push(inventory);
            }
            Err(e) => fleet
                .failures
                .push(engine_failure(engine.as_ref(), e.to_string())),
        }
    }
    (fleet, inventories)
}

/// The observers of a fleet's engines, one per engine, made on demand.
pub trait FleetObserver {
    fn for_engine(&self, engine: &str) -> Box<dyn ReconcileObserver + '_>;
}

/// Reconciles every engine at once, within `options.budget` (shared) and
/// `options.parallelism` (per engine), and merges the reports.
pub async fn reconcile_all(
    engines: &[Arc<dyn Engine>],
    goal: &Goal,
    scope: &Scope,
    now: i64,
    options: &ApplyOptions,
    cancel: &AtomicBool,
    observers: &dyn FleetObserver,
) -> FleetReport {
    let results = join_all(engines.iter().map(|e| async move {
        let mut observer = observers.for_engine(e.name());
        let result = reconcile_once(
            e.as_ref(),
            goal,
            scope,
            now,
            options,
            cancel,
            observer.as_mut(),
        )
        .await;
        (e.as_ref(), result)
    }))
    .await;
    merge(results)
}

/// Carries out a saved fleet plan: first every engine's part is checked
/// (stale if any engine changed since the plan was made, or its part was
/// edited); only when all are current is each part carried out on its engine.
pub async fn reconcile_saved_all(
    engines: &[Arc<dyn Engine>],
    saved: &FleetPlan,
    options: &ApplyOptions,
    cancel: &AtomicBool,
    observers: &dyn FleetObserver,
) -> FleetReport {
    let part = |e: &Arc<dyn Engine>| saved.engines.iter().find(|p| p.engine == e.name());
    let checks = join_all(engines.iter().map(|e| async move {
        match part(e) {
            Some(plan) => check_saved(e.as_ref(), plan).await,
            None => Err(Early::Stale {
                changes: format!("the saved plan has no part for engine {}", e.name()),
            }),
        }
    }))
    .await;
    let all_current = checks.iter().all(Result::is_ok);
    let stale: Vec<String> = engines
        .iter()
        .zip(&checks)
        .filter(|(_, c)| c.is_err())
        .map(|(e, _)| e.name().to_string())
        .collect();
    let results = join_all(engines.iter().zip(checks).map(|(e, check)| {
        let stale = &stale;
        async move {
            let result = match (check, part(e)) {
                (Err(early), _) => Err(early),
                (Ok(()), _) if !all_current => Err(Early::Stale {
                    changes: format!(
                        "nothing was removed on any engine because the plan is stale on {}",
                        stale.join(", ")
                    ),
                }),
                (Ok(()), Some(plan)) => {
                    let mut observer = observers.for_engine(e.name());
                    Ok(execute(e.as_ref(), plan, options, cancel, observer.as_mut()).await)
                }
                (Ok(()), None) => unreachable!("checked above"),
            };
            (e.as_ref(), result)
        }
    }))
    .await;
    let mut report = merge(results);
    // Engines that failed when the plan was made are still failed.
    report
        .report
        .failures
        .extend(saved.failures.iter().cloned());
    if !saved.failures.is_empty() {
        report.report.converged = false;
    }
    report
}

/// A `FleetObserver` that gives every engine the same kind of observer.
pub struct EachEngine<F>(pub RefCell<F>);

impl<F> FleetObserver for EachEngine<F>
where
    F: FnMut(&str) -> Box<dyn ReconcileObserver>,
{
    fn for_engine(&self, engine: &str) -> Box<dyn ReconcileObserver + '_> {
        (self.0.borrow_mut())(engine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::memory::{ContainerInfo, FaultAction, MemoryEngine, Op, World};
    use crate::engine::{EngineError, ErrorKind};
    use crate::exec::apply::Silent;
    use crate::model::{Kind, Labels};
    use crate::plan::DeclaredBox;

    fn managed(box_id: &str) -> Labels {
        [("ca.sandbox", "1"), ("ca.sandbox.id", box_id)]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn engine(name: &str, boxes: &[&str]) -> Arc<MemoryEngine> {
        Arc::new(
            MemoryEngine::new(World {
                containers: boxes
                    .iter()
                    .map(|b| ContainerInfo::new(&format!("{name}-{b}"), b, managed(b)))
                    .collect(),
                ..World::default()
            })
            .named(name),
        )
    }

    struct Quiet;
    impl FleetObserver for Quiet {
        fn for_engine(&self, _: &str) -> Box<dyn ReconcileObserver + '_> {
            Box::new(Silent)
        }
    }

    #[tokio::test]
    async fn an_unreachable_engine_fails_alone_and_the_box_declared_on_one_engine_stays_there() {
        let a = engine("a", &["keep", "leak"]);
        let b = engine("b", &["keep"]);
        let down = engine("down", &["leak"]);
        down.inject(
            Op::List(Kind::Container),
            None,
            FaultAction::Fail(EngineError::new(
                "list containers",
                ErrorKind::Unreachable {
                    endpoint: "tcp://down".into(),
                    detail: "connection refused".into(),
                },
            )),
            usize::MAX,
        );
        let goal = Goal::Reconcile {
            boxes: vec![DeclaredBox {
                engine: Some("a".into()),
                ..DeclaredBox::new("keep")
            }],
            keep_volumes: vec![],
            grace: None,
        };
        let engines: Vec<Arc<dyn Engine>> = vec![a.clone(), b.clone(), down.clone()];
        let options = ApplyOptions {
            budget: Some(Arc::new(tokio::sync::Semaphore::new(2))),
            ..ApplyOptions::default()
        };
        let report = reconcile_all(
            &engines,
            &goal,
            &Scope::default(),
            0,
            &options,
            &AtomicBool::new(false),
            &Quiet,
        )
        .await;
        assert!(!report.report.converged);
        let gone: Vec<(String, String)> = report
            .report
            .removed
            .containers
            .iter()
            .map(|g| (g.object.engine.clone(), g.object.name.clone()))
            .collect();
        // "keep" is declared on engine a only: on b it is a leak.
        assert_eq!(
            gone,
            vec![("a".into(), "leak".into()), ("b".into(), "keep".into())]
        );
        assert_eq!(a.world().containers.len(), 1);
        assert_eq!(
            down.world().containers.len(),
            1,
            "the failed engine is untouched"
        );
        let summary: Vec<(&str, bool, Option<&String>)> = report
            .engines
            .iter()
            .map(|s| (s.engine.as_str(), s.converged, s.error.as_ref()))
            .collect();
        assert!(summary[0].1);
        assert!(summary[1].1);
        assert_eq!(summary[2].0, "down");
        assert!(summary[2].2.is_some());
        assert_eq!(report.report.failures[0].kind, "engine");
        assert_eq!(report.report.failures[0].engine, "down");
    }

    #[tokio::test]
    async fn a_saved_fleet_plan_is_stale_when_any_engine_changed() {
        let a = engine("a", &["x"]);
        let b = engine("b", &["y"]);
        let engines: Vec<Arc<dyn Engine>> = vec![a.clone(), b.clone()];
        let goal = Goal::Reconcile {
            boxes: vec![],
            keep_volumes: vec![],
            grace: None,
        };
        let (saved, _) = plan_all(&engines, &goal, &Scope::default(), 0).await;
        saved.validate().unwrap();
        b.change(|w| {
            w.containers
                .push(ContainerInfo::new("b-z", "z", managed("z")))
        });
        let report = reconcile_saved_all(
            &engines,
            &saved,
            &ApplyOptions::default(),
            &AtomicBool::new(false),
            &Quiet,
        )
        .await;
        assert!(!report.report.converged);
        assert!(report.engines[1]
            .error
            .as_deref()
            .unwrap()
            .contains("b:container/b-z is new"));
        assert_eq!(
            b.world().containers.len(),
            2,
            "nothing removed on the stale engine"
        );
        assert_eq!(a.world().containers.len(), 1, "nor on the current one");
        assert!(report.engines[0]
            .error
            .as_deref()
            .unwrap()
            .contains("stale on b"));
    }
}
