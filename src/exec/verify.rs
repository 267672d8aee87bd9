//! Verify: list again after apply, re-plan, and write the report.
//!
//! Owns the definition of success: a fresh listing whose plan has nothing left
//! to remove and nothing blocked, after an apply with no failure. Owns the
//! `Report` every apply and destroy ends with, and the typed reason given for
//! each object left behind. Must not remove anything or print.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::engine::Engine;
use crate::exec::apply::{Applied, Outcome};
use crate::exec::list::plan_once;
use crate::model::{Kind, ObjectKey, Reason};
use crate::plan::{Entry, Kept, Plan, Retained};

/// An object named in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Named {
    pub engine: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    #[serde(rename = "box")]
    pub box_id: Option<String>,
}

impl Named {
    pub fn of(e: &Entry) -> Named {
        Named {
            engine: e.engine.clone(),
            id: e.id.clone(),
            name: e.name.clone(),
            box_id: e.box_id.clone(),
        }
    }
}

/// A removed object, and whether this run removed it or found it gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gone {
    #[serde(flatten)]
    pub object: Named,
    /// `removed` or `alreadyGone` (another actor removed it first).
    pub outcome: &'static str,
}

/// An object still there after the run, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Leftover {
    #[serde(flatten)]
    pub object: Named,
    #[serde(serialize_with = "crate::render::reason_json")]
    pub reason: Reason,
}

/// One thing that went wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Failure {
    /// `container`, `volume`, `network`, or `engine` (a listing or the connection).
    pub kind: String,
    pub engine: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub error: String,
}

/// Removed objects, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Removed {
    pub containers: Vec<Gone>,
    pub volumes: Vec<Gone>,
    pub networks: Vec<Gone>,
}

impl Removed {
    pub fn of_kind(&self, kind: Kind) -> &Vec<Gone> {
        match kind {
            Kind::Container => &self.containers,
            Kind::Volume => &self.volumes,
            Kind::Network => &self.networks,
        }
    }

    fn of_kind_mut(&mut self, kind: Kind) -> &mut Vec<Gone> {
        match kind {
            Kind::Container => &mut self.containers,
            Kind::Volume => &mut self.volumes,
            Kind::Network => &mut self.networks,
        }
    }

    pub fn len(&self) -> usize {
        Kind::ALL.iter().map(|&k| self.of_kind(k).len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The end of every apply and destroy. Its JSON keys are a public contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub converged: bool,
    /// The time the plan was judged at (RFC 3339), when there was a plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub now: Option<String>,
    pub removed: Removed,
    pub kept: Kept,
    pub retained: Retained,
    pub failures: Vec<Failure>,
    pub remaining_containers: Vec<Leftover>,
    pub remaining_volumes: Vec<Leftover>,
    pub remaining_networks: Vec<Leftover>,
    /// True if the run was interrupted before every removal was started.
    pub interrupted: bool,
}

impl Report {
    /// A report with nothing in it yet.
    pub fn empty() -> Report {
        Report {
            converged: false,
            now: None,
            removed: Removed::default(),
            kept: Kept::default(),
            retained: Retained::default(),
            failures: vec![],
            remaining_containers: vec![],
            remaining_volumes: vec![],
            remaining_networks: vec![],
            interrupted: false,
        }
    }

    /// The report for a run that could not even list (or load its plan): nothing
    /// was removed, nothing is known to be converged.
    pub fn failed_before_apply(engine: &str, endpoint: &str, error: String) -> Report {
        let mut report = Report::empty();
        report.failures.push(Failure {
            kind: "engine".into(),
            engine: engine.to_string(),
            name: endpoint.to_string(),
            id: None,
            error,
        });
        report
    }

    /// Leftovers of one kind.
    pub fn remaining(&self, kind: Kind) -> &Vec<Leftover> {
        match kind {
            Kind::Container => &self.remaining_containers,
            Kind::Volume => &self.remaining_volumes,
            Kind::Network => &self.remaining_networks,
        }
    }

    /// Every leftover, containers first.
    pub fn all_remaining(&self) -> impl Iterator<Item = &Leftover> {
        Kind::ALL.into_iter().flat_map(|k| self.remaining(k))
    }

    fn push_leftover(&mut self, object: &Entry, reason: Reason) {
        let left = Leftover {
            object: Named::of(object),
            reason,
        };
        match object.kind {
            Kind::Container => self.remaining_containers.push(left),
            Kind::Volume => self.remaining_volumes.push(left),
            Kind::Network => self.remaining_networks.push(left),
        }
    }
}

/// Lists the engine again, re-plans with the same goal at the same time, and
/// reports. Converged only if the apply had no failure and the fresh plan is empty.
pub async fn verify(engine: &dyn Engine, plan: &Plan, applied: &Applied) -> Report {
    let mut report = Report::empty();
    report.now = Some(plan.now.clone());
    report.kept = plan.kept.clone();
    report.retained = plan.retained.clone();
    report.interrupted = applied.interrupted;
    // Why each planned object might still be there, by object key.
    let mut why_left: BTreeMap<ObjectKey, Reason> = BTreeMap::new();
    for (step, outcome) in plan.steps.iter().zip(&applied.outcomes) {
        let reason = match outcome {
            Outcome::Removed | Outcome::AlreadyGone => {
                report.removed.of_kind_mut(step.object.kind).push(Gone {
                    object: Named::of(&step.object),
                    outcome: outcome.code().unwrap_or_default(),
                });
                Reason::AppearedAfterPlan
            }
            Outcome::Failed(_) | Outcome::GaveUpWaiting { .. } => {
                let error = crate::render::outcome_text(outcome);
                report.failures.push(failure(&step.object, error.clone()));
                Reason::RemovalFailed { error }
            }
            Outcome::Refused(detail) => {
                report.failures.push(failure(&step.object, detail.clone()));
                Reason::Changed {
                    detail: detail.clone(),
                }
            }
            Outcome::Skipped(after) => Reason::WaitsForFailed {
                step: *after,
                object: plan.steps[after - 1].object.as_ref(),
            },
            Outcome::Interrupted => Reason::Interrupted,
        };
        why_left.insert(step.object.key(), reason);
    }
    for b in &plan.blocked {
        why_left.insert(b.object.key(), b.why.clone());
    }

    let scope = plan.scope();
    match plan_once(engine, &plan.goal, &scope, plan.now()).await {
        Ok((_, again)) => {
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
                    .unwrap_or(Reason::AppearedAfterPlan);
                report.push_leftover(object, reason);
            }
            report.converged = report.failures.is_empty() && again.is_empty();
        }
        Err(e) => {
            report.failures.push(Failure {
                kind: "engine".into(),
                engine: engine.name().to_string(),
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

fn failure(object: &Entry, error: String) -> Failure {
    Failure {
        kind: object.kind.as_str().into(),
        engine: object.engine.clone(),
        name: object.name.clone(),
        id: object.id.clone(),
        error,
    }
}
