//! `apply` and `apply FILE` (and `destroy` and `prune`, whose own steps
//! are `destroy.rs`): every engine at once, one report.
//!
//! Owns wiring a converging run: the target's steps before the walk (a
//! prune's note and question), the audit log opened (refused before any
//! removal when it cannot be), the saved plan read (its seal opened
//! first), the observers (progress view, audit log), the merged report
//! judged against the target and concluded.
//! The work is `exec::fleet`'s, the words `render`'s; ends in a `Verdict`.

use crate::cli::config::Job;
use crate::exec::event::{Fanout, Observer};
use crate::exec::fleet::{reconcile_all, reconcile_saved_all, FleetPlan};
use crate::exec::reconcile::Carry;
use crate::exec::report::Verdict;
use crate::model::RefusalCode;
use crate::observe::notify::{Notifier, EXIT_WAIT};

use super::context::{Run, Sink};
use super::destroy;
use super::printer::Printer;

/// `apply`, `destroy`, `apply FILE`: every engine at once, one report.
pub(super) async fn converge(run: &Run<'_>, sink: &mut dyn Sink) -> Verdict {
    let config = run.config;
    if let Job::Converge { goal, target } = &config.job {
        if let Some(declined) = destroy::before(run, target, goal, sink).await {
            return declined;
        }
    }
    let audit = match run.open_audit(sink) {
        Ok(audit) => audit,
        Err(failed) => return failed,
    };
    let saved = match &config.job {
        Job::ApplySaved { path, key } => match FleetPlan::read(path, || key.for_opening()) {
            Ok(plan) => Some((path.as_path(), plan)),
            Err(e) => {
                let e = anyhow::Error::new(e);
                let refusal = crate::cli::refusal::of(&e, RefusalCode::PlanFile);
                return run.refuse(sink, &e, refusal);
            }
        },
        _ => None,
    };
    let notifier = Notifier::new(&config.notify, None, false);
    let printer = Printer::new(config, run.endpoints, sink, saved.is_none(), audit.as_ref())
        .with_notifier(notifier.as_ref());
    let mut observers: Vec<&dyn Observer> = vec![&printer];
    observers.extend(audit.as_ref().map(|a| a as &dyn Observer));
    observers.extend(notifier.as_ref().map(|n| n as &dyn Observer));
    observers.extend(run.observer);
    let observer = Fanout(observers);
    let options = run.options();
    let carry = Carry::new(&options, &run.stop.cancel, &observer);
    let mut report = match (&config.job, &saved) {
        (_, Some((path, plan))) => reconcile_saved_all(run.engines, plan, path, &carry).await,
        (Job::Converge { goal, .. }, None) => {
            reconcile_all(run.engines, goal, &config.scope, config.now, &carry).await
        }
        _ => unreachable!("converge runs converging jobs"),
    };
    if let Job::Converge { target, .. } = &config.job {
        destroy::judge(run, target, &mut report);
    }
    // The report is out before any notification is waited for; what is
    // still being tried then has EXIT_WAIT, and its failures are warnings.
    if let Some(notifier) = &notifier {
        notifier.report(&report);
    }
    let verdict = printer.conclude(&report, "", |v| super::ended(v, run.stop, false));
    if let Some(notifier) = &notifier {
        notifier.finish(EXIT_WAIT).await;
        printer.notify_failures();
    }
    verdict
}
