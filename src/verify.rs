//! Verify: list again after apply, re-plan, and write the report.
//!
//! Owns the definition of success: a fresh listing whose plan has nothing left
//! to remove and nothing blocked, after an apply with no failure. Owns the
//! `Report` every apply and destroy ends with, and the reason given for each
//! object left behind. Must not remove anything or print.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::apply::{Applied, Outcome};
use crate::engine::Engine;
use crate::inventory::Inventory;
use crate::plan::{Kept, Object, Plan, Retained};

/// An object named in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Named {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    #[serde(rename = "box")]
    pub box_id: Option<String>,
}

/// An object still there after the run, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Leftover {
    #[serde(flatten)]
    pub object: Named,
    pub reason: String,
}

/// One thing that went wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// `container`, `volume`, or `engine` (a listing or the connection).
    pub kind: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub error: String,
}

/// Removed objects, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Removed {
    pub containers: Vec<Named>,
    pub volumes: Vec<Named>,
}

/// The end of every apply and destroy. Its JSON keys are a public contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub converged: bool,
    pub removed: Removed,
    pub kept: Kept,
    pub retained: Retained,
    pub failures: Vec<Failure>,
    pub remaining_containers: Vec<Leftover>,
    pub remaining_volumes: Vec<Leftover>,
    /// True if the run was interrupted before every removal was started.
    pub interrupted: bool,
}

fn named(o: &Object) -> Named {
    Named {
        id: o.id().map(str::to_string),
        name: o.name().to_string(),
        box_id: o.box_id().map(str::to_string),
    }
}

impl Report {
    /// The report for a run that could not even list (or load its plan): nothing
    /// was removed, nothing is known to be converged.
    pub fn failed_before_apply(endpoint: &str, error: String) -> Report {
        Report {
            converged: false,
            removed: Removed::default(),
            kept: Kept::default(),
            retained: Retained::default(),
            failures: vec![Failure {
                kind: "engine".into(),
                name: endpoint.to_string(),
                id: None,
                error,
            }],
            remaining_containers: vec![],
            remaining_volumes: vec![],
            interrupted: false,
        }
    }

    fn push_leftover(&mut self, object: &Object, reason: String) {
        let left = Leftover {
            object: named(object),
            reason,
        };
        match object {
            Object::Container { .. } => self.remaining_containers.push(left),
            Object::Volume { .. } => self.remaining_volumes.push(left),
        }
    }
}

/// Lists the engine again, re-plans with the same goal, and reports.
/// Converged only if the apply had no failure and the fresh plan is empty.
pub async fn verify(engine: &impl Engine, plan: &Plan, applied: &Applied) -> Report {
    let mut report = Report {
        converged: false,
        removed: Removed::default(),
        kept: plan.kept.clone(),
        retained: plan.retained.clone(),
        failures: vec![],
        remaining_containers: vec![],
        remaining_volumes: vec![],
        interrupted: applied.interrupted,
    };
    // Why each planned object might still be there, by object key.
    let mut why_left: BTreeMap<String, String> = BTreeMap::new();
    for (step, outcome) in plan.steps.iter().zip(&applied.outcomes) {
        let reason = match outcome {
            Outcome::Removed | Outcome::AlreadyGone => {
                let list = match step.object {
                    Object::Container { .. } => &mut report.removed.containers,
                    Object::Volume { .. } => &mut report.removed.volumes,
                };
                list.push(named(&step.object));
                "still present after it was removed (recreated by another actor?)".to_string()
            }
            Outcome::Failed(e) | Outcome::Refused(e) => {
                report.failures.push(Failure {
                    kind: step.object.kind().into(),
                    name: step.object.name().into(),
                    id: step.object.id().map(str::to_string),
                    error: e.clone(),
                });
                e.clone()
            }
            Outcome::Skipped(after) => format!(
                "not attempted: it waits for step {after} ({}), which did not succeed",
                plan.steps[after - 1].object.label()
            ),
            Outcome::Interrupted => "not attempted: the run was interrupted".to_string(),
        };
        why_left.insert(step.object.key(), reason);
    }
    for b in &plan.blocked {
        why_left.insert(b.object.key(), b.why.clone());
    }

    let scope = plan.scope();
    match Inventory::list(engine, &scope).await {
        Ok(inventory) => {
            let again = Plan::build(&plan.goal, &inventory);
            let left = again
                .steps
                .iter()
                .map(|s| (&s.object, None))
                .chain(again.blocked.iter().map(|b| (&b.object, Some(&b.why))));
            for (object, blocked_why) in left {
                let reason = why_left
                    .get(&object.key())
                    .or(blocked_why)
                    .cloned()
                    .unwrap_or_else(|| "appeared after the plan was made; run again".to_string());
                report.push_leftover(object, reason);
            }
            report.converged = report.failures.is_empty() && again.is_empty();
        }
        Err(e) => {
            report.failures.push(Failure {
                kind: "engine".into(),
                name: engine.endpoint().to_string(),
                id: None,
                error: format!("verification failed: {e}"),
            });
            // Without a fresh listing, everything not confirmed gone is reported left.
            for (step, outcome) in plan.steps.iter().zip(&applied.outcomes) {
                if !outcome.is_success() {
                    report.push_leftover(&step.object, why_left[&step.object.key()].clone());
                }
            }
            for b in &plan.blocked {
                report.push_leftover(&b.object, b.why.clone());
            }
        }
    }
    report
}
