//! The run over a fleet: one job on every engine of a run at once. A single
//! engine is a fleet of one; `plan`, `inventory`, `graph`, `explain`,
//! `apply`, `destroy`, a saved plan and every watch cycle come through here.
//!
//! Owns running the per-engine work concurrently within one removal budget
//! (each engine also capped), keeping each engine's result under its name
//! (`Part`), failing an engine's part alone (an engine that cannot be reached
//! or listed is a failure of kind `engine` naming that engine, its objects
//! untouched, while the others still converge), the saved-plan file (its
//! seal opened and made through `seal`, read, checked, and saved through
//! `files`), and handing every part to the one merge (`report::merge`), the
//! read-only commands' parts too (`Shown`). Each
//! engine's own work is exactly `plan_with` / `reconcile_once` / `execute`.
//! Must not print or decide anything per object.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};

use crate::engine::Engine;
use crate::exec::reconcile::{check_saved, execute, plan_with, reconcile_once, Carry};
use crate::exec::report::{
    merge, Early, Failure, FleetReport, Part, PartError, PlanFileError, Report, Shown,
};
use crate::exec::seal::{self, Key, SealError};
use crate::model::Scope;
use crate::plan::inventory::Inventory;
use crate::plan::{Goal, Plan, PLAN_VERSION};

/// The plans of a fleet: one per engine that could be listed, and a failure
/// per engine that could not. The saved form of a fleet's plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct FleetPlan {
    /// The format of a plan saved under schema version 1 or before (read,
    /// never printed: the plan's version is its `schemaVersion`).
    #[serde(default, skip_serializing)]
    pub(crate) version: Option<u32>,
    /// One plan per engine that was listed, in the state file's order.
    pub(crate) engines: Vec<Plan>,
    /// Engines that could not be reached or listed.
    #[serde(default)]
    pub(crate) failures: Vec<Failure>,
}

impl FleetPlan {
    /// True when no engine has anything to remove or blocked, and none failed.
    pub(crate) fn is_empty(&self) -> bool {
        self.failures.is_empty() && self.engines.iter().all(Plan::is_empty)
    }

    /// Checks every engine's plan (see `Plan::validate`) and that each engine appears once.
    fn validate(&self) -> Result<(), String> {
        if let Some(version) = self.version.filter(|v| *v != PLAN_VERSION) {
            return Err(format!(
                "plan version {version} is not supported (expected {PLAN_VERSION}); make a new plan with `sandboxctl plan --out`"
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

    /// Reads a saved plan: its seal opened with the key `key` gives first
    /// (asked once the file is read, so that a wrong path is said as one; an
    /// edited or unsealed plan goes no further), then one engine's plan
    /// (`plan --out` without `[[engine]]`) or a fleet's. Either is carried
    /// out by engine name.
    pub(crate) fn read(
        path: &Path,
        key: impl FnOnce() -> Result<Key, SealError>,
    ) -> Result<FleetPlan, PlanFileError> {
        let fail = |detail: String| PlanFileError {
            path: path.to_path_buf(),
            detail,
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            fail(format!(
                "cannot read it: {e}; check the path, or save a plan there with `sandboxctl plan --out {}`",
                path.display()
            ))
        })?;
        let not_a_plan = |why: String| {
            fail(format!(
                "not a sandboxctl plan ({why}); make a new one with `sandboxctl plan --out {}`",
                path.display()
            ))
        };
        let key = key().map_err(|e| fail(e.to_string()))?;
        let value = match seal::open(&text, &key) {
            Ok(Some(value)) => value,
            // Not a JSON object: say what serde makes of it.
            Ok(None) => {
                let why = serde_json::from_str::<Plan>(&text)
                    .err()
                    .map_or_else(|| "not a JSON object".to_string(), |e| e.to_string());
                return Err(not_a_plan(why));
            }
            Err(e) => return Err(fail(e.to_string())),
        };
        // A plan of this schema version is read as it is. One saved under
        // schema version 1, or before documents carried `schemaVersion`, is
        // read by its own format `version` (its `why` read as `reason`:
        // decision 19). One of any other schema version was made by a
        // sandboxctl this one may misread.
        let schema = value.get("schemaVersion");
        if schema.is_none_or(|v| *v == 1) {
            if value.get("version") != Some(&PLAN_VERSION.into()) {
                return Err(fail(format!(
                    "its schemaVersion is {}, and its format version is not {PLAN_VERSION}: it was made by another version of sandboxctl; nothing was removed: make a new plan with `sandboxctl plan --out {}`",
                    schema.map_or_else(|| "absent".to_string(), ToString::to_string),
                    path.display()
                )));
            }
        } else if let Some(schema) = schema.filter(|v| **v != crate::model::SCHEMA_VERSION) {
            return Err(fail(format!(
                "its schemaVersion is {schema}, not {}: it was made by another version of sandboxctl; nothing was removed: make a new plan with `sandboxctl plan --out {}`",
                crate::model::SCHEMA_VERSION,
                path.display()
            )));
        }
        let fleet = match serde_json::from_value::<Plan>(value.clone()) {
            Ok(plan) => FleetPlan {
                version: None,
                engines: vec![plan],
                failures: vec![],
            },
            Err(single) => serde_json::from_value::<FleetPlan>(value)
                .map_err(|_| not_a_plan(single.to_string()))?,
        };
        fleet.validate().map_err(fail)?;
        Ok(fleet)
    }
}

/// Saves a plan (`plan --out FILE`), sealed with `key` (`seal`): written
/// next to its destination and renamed into place, so a reader never sees
/// half a plan; the temporary file is created `0600`, never through a link
/// (a name already taken is passed over), and a link at `path` is replaced,
/// not written through (`exec::files::replace`).
pub(crate) fn save(path: &Path, text: &str, key: &Key) -> Result<(), PlanFileError> {
    let fail = |detail: String| PlanFileError {
        path: path.to_path_buf(),
        detail,
    };
    let sealed = seal::seal(text, key).map_err(fail)?;
    crate::exec::files::replace(path, sealed.as_bytes()).map_err(|e| fail(e.to_string()))
}

/// Lists every engine at once (`inventory`), through the one merge: each
/// engine's inventory, incomplete by the listings that failed, or why it
/// could not be listed, under its name.
pub(crate) async fn list_all(
    engines: &[Arc<dyn Engine>],
    scope: &Scope,
) -> FleetReport<Shown<Inventory>> {
    show_all(engines, |e| async move {
        let inventory = crate::exec::list::inventory(e, scope)
            .await
            .map_err(|e| PartError::Early(Early::Listing(e)))?;
        let incomplete = inventory
            .unknown
            .listings
            .iter()
            .map(|(listing, error)| format!("could not list {listing}: {error}"))
            .collect();
        Ok(Shown {
            value: inventory,
            incomplete,
        })
    })
    .await
}

/// Plans `goal` on every engine at once (`plan`, `graph`), through the one
/// merge: an engine that cannot be listed is a failed part, naming it; the
/// others are planned, each incomplete by what its discovery could not learn.
pub(crate) async fn plan_all(
    engines: &[Arc<dyn Engine>],
    goal: &Goal,
    scope: &Scope,
    now: i64,
    memo: &crate::exec::list::Memo,
) -> FleetReport<Shown<(Inventory, Plan)>> {
    show_all(engines, |e| async move {
        memo.begin(e.name());
        let (inventory, plan) = plan_with(e, goal, scope, now, memo)
            .await
            .map_err(|e| PartError::Early(Early::Listing(e)))?;
        Ok(Shown {
            incomplete: plan.incomplete.clone(),
            value: (inventory, plan),
        })
    })
    .await
}

/// Runs a read-only command's `work` (plan, inventory, graph, explain) on
/// every engine at once and hands the parts to the one merge.
pub(crate) async fn show_all<'e, T, F, Fut>(
    engines: &'e [Arc<dyn Engine>],
    work: F,
) -> FleetReport<Shown<T>>
where
    F: Fn(&'e dyn Engine) -> Fut,
    Fut: std::future::Future<Output = Result<Shown<T>, PartError>>,
{
    merge(each(engines, |_, e| work(e)).await)
}

impl FleetPlan {
    /// The fleet plan of `plan_all`'s parts: one plan per engine that was
    /// listed, in the run's order, and a failure per engine that was not.
    pub(crate) fn of(planned: &FleetReport<Shown<(Inventory, Plan)>>) -> FleetPlan {
        let mut fleet = FleetPlan {
            version: None,
            engines: Vec::new(),
            failures: Vec::new(),
        };
        for part in &planned.parts {
            match &part.result {
                Ok(shown) => fleet.engines.push(shown.value.1.clone()),
                Err(e) => fleet.failures.push(Failure::engine(
                    &part.engine,
                    &part.endpoint,
                    e.to_string(),
                )),
            }
        }
        fleet
    }
}

/// Runs `work` on every engine at once (given its position and itself) and
/// keeps each result with its engine.
async fn each<'e, T, F, Fut>(engines: &'e [Arc<dyn Engine>], work: F) -> Vec<Part<T>>
where
    F: Fn(usize, &'e dyn Engine) -> Fut,
    Fut: std::future::Future<Output = Result<T, PartError>>,
{
    join_all(engines.iter().enumerate().map(|(i, e)| {
        let fut = work(i, e.as_ref());
        async move {
            let started = Instant::now();
            let result = fut.await;
            Part {
                engine: e.name().to_string(),
                endpoint: e.endpoint().to_string(),
                took: started.elapsed(),
                result,
            }
        }
    }))
    .await
}

/// Reconciles every engine at once, within `options.budget` (shared) and
/// `options.parallelism` (per engine), and merges the reports.
pub(crate) async fn reconcile_all(
    engines: &[Arc<dyn Engine>],
    goal: &Goal,
    scope: &Scope,
    now: i64,
    carry: &Carry<'_>,
) -> FleetReport {
    merge(
        each(engines, |_, e| async move {
            reconcile_once(e, goal, scope, now, carry)
                .await
                .map_err(PartError::from)
        })
        .await,
    )
}

/// Carries out a saved plan (`path` names it in messages): first every
/// engine's part is checked (stale if any engine changed since the plan was
/// made, or its part was edited, or the plan has no part for it); only when
/// none is stale is each part carried out on its engine. An engine that
/// cannot be listed now fails its part alone. Engines that failed when the
/// plan was made are still failed.
pub(crate) async fn reconcile_saved_all(
    engines: &[Arc<dyn Engine>],
    saved: &FleetPlan,
    path: &Path,
    carry: &Carry<'_>,
) -> FleetReport {
    let plan_file = |detail: String| PlanFileError {
        path: path.to_path_buf(),
        detail,
    };
    let remake = format!(
        "Make a new plan with `sandboxctl plan --out {}`",
        path.display()
    );
    // Each engine's part of the plan, once checked against the engine now:
    // to carry out, or (an engine whose discovery is incomplete now) the
    // report that names what it saw.
    let checks: Vec<Result<Result<&Plan, Report>, PartError>> =
        join_all(engines.iter().map(|e| async {
            match saved.engines.iter().find(|p| p.engine == e.name()) {
                Some(plan) => match check_saved(e.as_ref(), plan).await {
                    Ok(()) => Ok(Ok(plan)),
                    Err(Early::Incomplete(fresh)) => {
                        Ok(Err(Report::unchecked(e.name(), e.endpoint(), &fresh)))
                    }
                    Err(early @ Early::Listing(_)) => Err(early.into()),
                    Err(other) => Err(plan_file(format!("{other}. {remake}")).into()),
                },
                None => {
                    let has: Vec<&str> = saved.engines.iter().map(|p| p.engine.as_str()).collect();
                    Err(plan_file(format!(
                        "it has no part for engine {} (it has: {}); nothing was removed. {remake}",
                        e.name(),
                        has.join(", ")
                    ))
                    .into())
                }
            }
        }))
        .await;
    // A part that is stale, edited or missing refuses the whole plan (what
    // was reviewed is not what is there); an engine that cannot be listed
    // fails its part alone, as in `apply`.
    let stale: Vec<&str> = engines
        .iter()
        .zip(&checks)
        .filter(|(_, c)| matches!(c, Err(PartError::PlanFile(_))))
        .map(|(e, _)| e.name())
        .collect();
    let checks = &checks;
    let stale = &stale;
    let remake = &remake;
    let mut report = merge(
        each(engines, |i, e| async move {
            match &checks[i] {
                Err(error) => Err(error.clone()),
                Ok(_) if !stale.is_empty() => Err(plan_file(format!(
                    "nothing was removed on any engine because the plan is stale on {}. {remake}",
                    stale.join(", ")
                ))
                .into()),
                Ok(Err(unchecked)) => Ok(unchecked.clone()),
                Ok(Ok(plan)) => Ok(execute(e, plan, carry).await),
            }
        })
        .await,
    );
    if !saved.failures.is_empty() {
        report
            .report
            .failures
            .extend(saved.failures.iter().cloned());
        report.report.converged = false;
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::memory::MemoryEngine;
    use crate::exec::apply::ApplyOptions;
    use crate::exec::event::Silent;
    use crate::plan::DeclaredBox;
    use tokio_util::sync::CancellationToken;

    fn engine(name: &str, boxes: &[&str]) -> Arc<MemoryEngine> {
        Arc::new(MemoryEngine::with_boxes(name, boxes))
    }

    #[tokio::test]
    async fn an_unreachable_engine_fails_alone_and_the_box_declared_on_one_engine_stays_there() {
        let a = engine("a", &["keep", "leak"]);
        let b = engine("b", &["keep"]);
        let down = engine("down", &["leak"]);
        down.disconnect();
        let goal = Goal::declaring(vec![DeclaredBox {
            engine: Some("a".into()),
            ..DeclaredBox::new("keep")
        }]);
        let engines: Vec<Arc<dyn Engine>> = vec![a.clone(), b.clone(), down.clone()];
        let options = ApplyOptions {
            budget: Some(Arc::new(tokio::sync::Semaphore::new(2))),
            ..ApplyOptions::default()
        };
        let cancel = CancellationToken::new();
        let carry = Carry::new(&options, &cancel, &Silent);
        let report = reconcile_all(&engines, &goal, &Scope::default(), 0, &carry).await;
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

    /// A saved plan of this schema version, one saved under schema version
    /// 1 (its format `version` 2, its reasons under `why`) and one saved
    /// before plans carried `schemaVersion` are read; one of another schema
    /// version, or an old one without its format version, is refused,
    /// naming it, whatever its seal.
    #[tokio::test]
    async fn a_saved_plan_of_another_schema_version_is_refused_and_an_older_one_is_read() {
        let engines: Vec<Arc<dyn Engine>> = vec![engine("default", &["x"])];
        let planned = plan_all(
            &engines,
            &Goal::nothing_declared(),
            &Scope::default(),
            0,
            &Default::default(),
        )
        .await;
        let plan = &FleetPlan::of(&planned).engines[0];
        assert!(!plan.steps.is_empty());
        let printed: serde_json::Value =
            serde_json::from_str(&crate::render::plan_json(plan)).unwrap();
        assert!(printed.get("version").is_none(), "{printed:#}");
        assert_eq!(printed["steps"][0]["reason"]["code"], "boxNotDeclared");
        let key = Key::fixed_for_tests();
        let dir = tempfile::tempdir().unwrap();
        let read = |value: &serde_json::Value| {
            let path = dir.path().join("plan.json");
            let sealed = seal::seal(&value.to_string(), &key).unwrap();
            std::fs::write(&path, sealed).unwrap();
            FleetPlan::read(&path, || Ok(key.clone()))
        };
        assert_eq!(read(&printed).unwrap().engines[0], *plan);
        // As schema version 1 printed it.
        let mut v1 = printed.clone();
        v1["schemaVersion"] = 1.into();
        v1["version"] = PLAN_VERSION.into();
        for step in v1["steps"].as_array_mut().unwrap() {
            let reason = step.as_object_mut().unwrap().remove("reason").unwrap();
            step["why"] = reason;
        }
        let old_plan = |read: FleetPlan| Plan {
            version: None,
            ..read.engines[0].clone()
        };
        assert_eq!(old_plan(read(&v1).unwrap()), *plan);
        let mut before = v1.clone();
        before.as_object_mut().unwrap().remove("schemaVersion");
        assert_eq!(old_plan(read(&before).unwrap()), *plan);
        let mut unversioned = v1;
        unversioned.as_object_mut().unwrap().remove("version");
        let refused = read(&unversioned).unwrap_err().to_string();
        assert!(
            refused.contains("its schemaVersion is 1, and its format version is not 2"),
            "{refused}"
        );
        let mut newer = printed;
        newer["schemaVersion"] = 3.into();
        let refused = read(&newer).unwrap_err().to_string();
        assert!(
            refused.contains("its schemaVersion is 3, not 2"),
            "{refused}"
        );
    }

    #[tokio::test]
    async fn a_saved_fleet_plan_is_stale_when_any_engine_changed() {
        let a = engine("a", &["x"]);
        let b = engine("b", &["y"]);
        let engines: Vec<Arc<dyn Engine>> = vec![a.clone(), b.clone()];
        let goal = Goal::nothing_declared();
        let saved = FleetPlan::of(
            &plan_all(&engines, &goal, &Scope::default(), 0, &Default::default()).await,
        );
        saved.validate().unwrap();
        // Engine b as it is now: another actor made box z since the plan.
        let b = engine("b", &["y", "z"]);
        let engines: Vec<Arc<dyn Engine>> = vec![a.clone(), b.clone()];
        let (options, cancel) = (ApplyOptions::default(), CancellationToken::new());
        let carry = Carry::new(&options, &cancel, &Silent);
        let report =
            reconcile_saved_all(&engines, &saved, Path::new("fleet.plan.json"), &carry).await;
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
