//! Verify: list again after apply, re-plan, and write the report.
//!
//! Owns the definition of success: a fresh listing whose plan has nothing left
//! to remove and nothing blocked, after an apply with no failure. Owns the
//! `Report` every apply and destroy ends with, and the typed reason given for
//! each object left behind. Must not remove anything or print.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::engine::Engine;
use crate::exec::apply::Applied;
use crate::exec::list::plan_once;
use crate::model::{ByKind, ObjectKey, Outcome, Reason};
use crate::plan::{Entry, Kept, Plan, Retained};

/// An object named in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Named {
    pub(crate) engine: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) id: Option<String>,
    pub name: String,
    #[serde(rename = "box")]
    pub(crate) box_id: Option<String>,
}

impl Named {
    pub(crate) fn of(e: &Entry) -> Named {
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
    pub(crate) object: Named,
    /// `Removed`, or `AlreadyGone` (another actor removed it first).
    pub outcome: Outcome,
}

/// An object still there after the run, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Leftover {
    #[serde(flatten)]
    pub object: Named,
    pub reason: Reason,
}

/// One thing that went wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Failure {
    /// `container`, `volume`, `network`, or `engine` (a listing or the connection).
    pub kind: String,
    pub(crate) engine: String,
    pub(crate) name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub error: String,
}

/// Removed objects, by kind.
type Removed = ByKind<Vec<Gone>>;

/// The end of every apply and destroy. Its JSON keys are a public contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub converged: bool,
    /// The time the plan was judged at (RFC 3339), when there was a plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) now: Option<String>,
    pub removed: Removed,
    pub(crate) kept: Kept,
    pub(crate) retained: Retained,
    pub failures: Vec<Failure>,
    /// What is still there, by kind. JSON: `remainingContainers`,
    /// `remainingVolumes`, `remainingNetworks`, here among the report's keys.
    #[serde(flatten, serialize_with = "remaining_keys")]
    pub(crate) remaining: ByKind<Vec<Leftover>>,
    /// True if the run was interrupted before every removal was started.
    pub(crate) interrupted: bool,
}

/// The leftovers as the report's flat keys `remainingContainers`, ...
fn remaining_keys<S: serde::Serializer>(
    remaining: &ByKind<Vec<Leftover>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = s.serialize_map(Some(3))?;
    map.serialize_entry("remainingContainers", &remaining.containers)?;
    map.serialize_entry("remainingVolumes", &remaining.volumes)?;
    map.serialize_entry("remainingNetworks", &remaining.networks)?;
    map.end()
}

impl Report {
    /// A report with nothing in it yet.
    pub(crate) fn empty() -> Report {
        Report {
            converged: false,
            now: None,
            removed: Removed::default(),
            kept: Kept::default(),
            retained: Retained::default(),
            failures: vec![],
            remaining: ByKind::default(),
            interrupted: false,
        }
    }

    /// The report for a run that could not even list (or load its plan): nothing
    /// was removed, nothing is known to be converged.
    pub(crate) fn failed_before_apply(engine: &str, endpoint: &str, error: String) -> Report {
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

    /// Every leftover, containers first.
    pub fn all_remaining(&self) -> impl Iterator<Item = &Leftover> {
        self.remaining.all()
    }

    /// Merges `part` (one engine's report) into this whole (a fleet's): every
    /// per-kind list and the failures are extended, retained images added
    /// once, `converged` only if every part converged (start a whole from
    /// `Report::empty()` with `converged = true`), `interrupted` if any part
    /// was, and `now` from the first part that has one.
    pub(crate) fn absorb(&mut self, part: &Report) {
        self.converged &= part.converged;
        self.interrupted |= part.interrupted;
        if self.now.is_none() {
            self.now.clone_from(&part.now);
        }
        self.removed.extend_from(&part.removed);
        self.kept.extend_from(&part.kept);
        for image in &part.retained.images {
            if !self.retained.images.contains(image) {
                self.retained.images.push(image.clone());
            }
        }
        self.failures.extend_from_slice(&part.failures);
        self.remaining.extend_from(&part.remaining);
    }

    fn push_leftover(&mut self, object: &Entry, reason: Reason) {
        let left = Leftover {
            object: Named::of(object),
            reason,
        };
        self.remaining.push(object.kind, left);
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
                report.removed.push(
                    step.object.kind,
                    Gone {
                        object: Named::of(&step.object),
                        outcome: outcome.clone(),
                    },
                );
                Reason::AppearedAfterPlan
            }
            Outcome::Failed(_) | Outcome::GaveUpWaiting { .. } => {
                let error = outcome.to_string();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ImageInfo;
    use crate::model::Kind;
    use crate::plan::Noted;

    fn entry(kind: Kind, name: &str) -> Entry {
        Entry {
            engine: "e".into(),
            kind,
            id: None,
            name: name.into(),
            box_id: None,
            state: None,
            created: None,
        }
    }

    fn part(name: &str, converged: bool, image: &str) -> Report {
        let mut r = Report::empty();
        r.converged = converged;
        r.now = Some(format!("now-{name}"));
        r.removed.push(
            Kind::Volume,
            Gone {
                object: Named::of(&entry(Kind::Volume, name)),
                outcome: Outcome::Removed,
            },
        );
        r.kept.push(
            Kind::Network,
            Noted {
                object: entry(Kind::Network, name),
                why: Reason::NotNamedByDestroy,
            },
        );
        r.retained.images.push(ImageInfo {
            id: image.into(),
            tags: vec![],
        });
        r.push_leftover(&entry(Kind::Container, name), Reason::Interrupted);
        r.failures
            .push(failure(&entry(Kind::Container, name), "boom".into()));
        r
    }

    #[test]
    fn absorb_merges_parts_into_a_whole() {
        let mut whole = Report::empty();
        whole.converged = true;
        whole.absorb(&part("a", true, "sha256:1"));
        assert!(whole.converged);
        let mut b = part("b", false, "sha256:1");
        b.interrupted = true;
        whole.absorb(&b);
        let names = |list: &Vec<Leftover>| {
            list.iter()
                .map(|l| l.object.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&whole.remaining.containers), ["a", "b"]);
        assert_eq!(whole.removed.volumes.len(), 2);
        assert_eq!(whole.kept.networks.len(), 2);
        assert_eq!(whole.failures.len(), 2);
        assert_eq!(whole.retained.images.len(), 1, "retained images once");
        assert!(!whole.converged && whole.interrupted);
        assert_eq!(whole.now.as_deref(), Some("now-a"));
    }

    #[test]
    fn remaining_keys_are_flat_in_the_json() {
        let json = serde_json::to_string(&part("a", false, "i")).unwrap();
        let at = |key: &str| {
            json.find(&format!("\"{key}\":"))
                .unwrap_or_else(|| panic!("{key}: {json}"))
        };
        assert!(at("failures") < at("remainingContainers"));
        assert!(at("remainingContainers") < at("remainingVolumes"));
        assert!(at("remainingVolumes") < at("remainingNetworks"));
        assert!(at("remainingNetworks") < at("interrupted"));
        assert!(!json.contains("\"remaining\""), "{json}");
    }
}
