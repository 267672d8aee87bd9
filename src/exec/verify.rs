//! Verify: list again after apply, re-plan, and fill in the report.
//!
//! Owns the definition of success: a fresh listing whose plan has nothing left
//! to remove and nothing blocked, after an apply with no failure; and the
//! typed reason given for each object left behind; what each removed object
//! gave back (from the apply) and the total. Must not remove anything or
//! print.

use std::collections::BTreeMap;

use crate::engine::Engine;
use crate::exec::apply::Applied;
use crate::exec::list::plan_with;
use crate::exec::report::{ArchivedVolume, Failure, Gone, Named, Reclaimed, Report};
use crate::model::{ObjectKey, Outcome, Reason};
use crate::plan::Plan;

/// Lists the engine again, re-plans with the same goal at the same time, and
/// reports. Converged only if the apply had no failure and the fresh plan is empty.
pub async fn verify(engine: &dyn Engine, plan: &Plan, applied: &Applied) -> Report {
    verify_with(engine, plan, applied, &Default::default()).await
}

/// [`verify`], asking no container whose answer `memo` knows (the plan's
/// own discovery: a container whose inspection failed there is not asked
/// again, so a stuck one costs its deadline once per run).
pub async fn verify_with(
    engine: &dyn Engine,
    plan: &Plan,
    applied: &Applied,
    memo: &crate::exec::list::Memo,
) -> Report {
    let mut report = Report::empty();
    report.now = Some(plan.now.clone());
    report.kept = plan.kept.clone();
    report.retained = plan.retained.clone();
    report.interrupted = applied.interrupted;
    report.unknown_boxes = plan
        .unknown_boxes
        .iter()
        .map(|id| crate::exec::report::UnknownBox::not_found(id))
        .collect();
    // Why each planned object might still be there, by object key.
    let mut why_left: BTreeMap<ObjectKey, Reason> = BTreeMap::new();
    for (i, (step, outcome)) in plan.steps.iter().zip(&applied.outcomes).enumerate() {
        // Why it might be left, and the failure it is (if any).
        let (reason, failure) = match outcome {
            Outcome::Removed | Outcome::AlreadyGone => {
                report.removed.push(
                    step.object.kind,
                    Gone {
                        object: Named::of(&step.object),
                        outcome: outcome.clone(),
                        // What another actor removed gave back nothing we know of.
                        reclaimed_bytes: applied
                            .reclaimed
                            .get(i)
                            .copied()
                            .flatten()
                            .filter(|_| *outcome == Outcome::Removed),
                    },
                );
                (Reason::AppearedAfterPlan, None)
            }
            Outcome::Failed(_) | Outcome::GaveUpWaiting { .. } => {
                let error = outcome.to_string();
                (
                    Reason::RemovalFailed {
                        error: error.clone(),
                    },
                    Some(error),
                )
            }
            Outcome::Refused(detail) => (
                Reason::Changed {
                    detail: detail.clone(),
                },
                Some(detail.clone()),
            ),
            Outcome::ArchiveFailed(error) => (
                Reason::ArchiveFailed {
                    error: error.clone(),
                },
                Some(outcome.to_string()),
            ),
            Outcome::Skipped(after) => (
                Reason::WaitsForFailed {
                    step: *after,
                    object: plan.steps[after - 1].object.as_ref(),
                },
                None,
            ),
            Outcome::Interrupted => (Reason::Interrupted, None),
        };
        if let Some(error) = failure {
            report.failures.push(Failure::of(&step.object, error));
        }
        why_left.insert(step.object.key(), reason);
    }
    for b in &plan.blocked {
        why_left.insert(b.object.key(), b.why.clone());
    }
    report.reclaimed = Reclaimed::of(&report.removed);
    for (i, a) in &applied.archived {
        let step = &plan.steps[*i];
        report.archived.push(ArchivedVolume {
            engine: step.object.engine.clone(),
            volume: a.volume.clone(),
            box_id: step.object.box_id.clone(),
            path: a.path.display().to_string(),
            sha256: a.sha256.clone(),
            bytes: a.bytes,
            elapsed_ms: a.elapsed_ms,
        });
    }

    // What the plan's discovery could not learn is a failure of the run.
    let incomplete = |report: &mut Report, texts: &[String]| {
        for text in texts {
            if !report.failures.iter().any(|f| f.error == *text) {
                report.failures.push(Failure::engine(
                    engine.name(),
                    engine.endpoint(),
                    text.clone(),
                ));
            }
        }
    };
    incomplete(&mut report, &plan.incomplete);
    report.degraded = !plan.incomplete.is_empty();
    let scope = plan.scope();
    match plan_with(engine, &plan.goal, &scope, plan.now(), memo).await {
        Ok((_, again)) => {
            report.verified = true;
            let again_texts: Vec<String> = again
                .incomplete
                .iter()
                .map(|t| format!("verification failed: {t}"))
                .collect();
            incomplete(&mut report, &again_texts);
            report.degraded |= !again.incomplete.is_empty();
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
            report.failures.push(Failure::engine(
                engine.name(),
                engine.endpoint(),
                format!("verification failed: {e}"),
            ));
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
