//! `lease` and `lease --release`: taking a lease on a box, on the one engine
//! (resolve checked that there is one), or releasing a box's leases on every
//! engine at once.
//!
//! Owns the order: box after box, the results in the run's engine order,
//! then the errors on stderr. The protocol is `exec::lease`'s, the words
//! `render`'s; ends in a `Verdict` (failed when anything failed).

use crate::cli::config::Job;
use crate::exec::report::Verdict;
use crate::render;

use super::context::{failed, Run, Sink};

/// `lease` (one engine: resolve checked) and `lease --release` (every
/// engine at once): box after box, the results in the run's engine
/// order, then the errors on stderr; failed when anything failed.
pub(super) async fn lease(run: &Run<'_>, sink: &mut dyn Sink) -> Verdict {
    use crate::exec::lease::{release, take, LeaseAction, LeaseRequest, LeaseRun};
    let config = run.config;
    let done = match &config.job {
        Job::Lease {
            boxes,
            ttl,
            max_lease,
        } => {
            let engine = run.engines[0].as_ref();
            let mut done = Vec::with_capacity(boxes.len());
            for box_id in boxes {
                let req = LeaseRequest {
                    scope: &config.scope,
                    box_id,
                    ttl: *ttl,
                    max_lease: *max_lease,
                };
                done.push(take(engine, req).await);
            }
            LeaseRun::new(LeaseAction::Take, done)
        }
        Job::Release { boxes } => {
            let per_engine = run.engines.iter().map(|engine| async move {
                let mut done = Vec::with_capacity(boxes.len());
                for box_id in boxes {
                    done.push(release(engine.as_ref(), &config.scope, box_id).await);
                }
                done
            });
            let done = futures_util::future::join_all(per_engine).await;
            LeaseRun::new(LeaseAction::Release, done.into_iter().flatten().collect())
        }
        _ => unreachable!("lease runs lease jobs"),
    };
    sink.out(&render::lease_run(&done, config.format));
    sink.err(&render::lease_errors(&done));
    failed(!done.ok)
}
