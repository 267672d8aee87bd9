//! `hold`: a lease on the one engine (resolve checked that there is one)
//! while a command runs.
//!
//! Owns saying hold's lines on stderr as they happen and where the signals
//! passed on to the command come from (the process's SIGINT and SIGTERM, or
//! under `run_on` a SIGTERM once the run is cancelled). The supervision is
//! `exec`'s, the words `render`'s; ends in a `Verdict` carrying how the
//! command ended (its status is passed through by `cli::exit`).

use tokio::sync::mpsc::UnboundedReceiver;

use crate::cli::config::{log_time, Job};
use crate::exec::report::Verdict;
use crate::render;

use super::context::{failed, Run, Sink};
use super::signals::terminate_on_cancel;

/// `hold`: takes the lease, runs the command, releases; `signals`: the
/// numbers to pass on to the command (`None`: a SIGTERM when the run is
/// cancelled).
pub(super) async fn hold(
    run: &Run<'_>,
    signals: Option<UnboundedReceiver<i32>>,
    sink: &mut dyn Sink,
) -> Verdict {
    use crate::exec::hold::{hold, HoldEvent};
    use crate::exec::lease::LeaseRequest;
    let (mut signals, on_cancel) = match signals {
        Some(signals) => (signals, None),
        None => {
            let (signals, task) = terminate_on_cancel(run.stop);
            (signals, Some(task))
        }
    };
    let config = run.config;
    let Job::Hold {
        box_id,
        ttl,
        max_lease,
        command,
    } = &config.job
    else {
        unreachable!("hold runs hold jobs")
    };
    let engine = run.engines[0].as_ref();
    let req = LeaseRequest {
        scope: &config.scope,
        box_id,
        ttl: *ttl,
        max_lease: *max_lease,
    };
    let every = std::time::Duration::from_millis(ttl.saturating_mul(1000) / 3);
    let name = engine.name();
    let format = config.format;
    let held = {
        let mut on = |event: HoldEvent<'_>| {
            if let Some(line) = render::hold_event(format, &log_time(), name, &event) {
                sink.err(&line);
            }
        };
        hold(engine, req, command, every, &mut signals, &mut on).await
    };
    if let Some(task) = on_cancel {
        task.abort();
    }
    match held {
        Err(e) => {
            sink.err(&render::hold_not_taken(
                format,
                &log_time(),
                name,
                box_id,
                &e,
            ));
            failed(true)
        }
        Ok(held) => {
            sink.err(&render::hold_end(format, &log_time(), name, box_id, &held));
            Verdict {
                failed: !held.left.is_empty(),
                command: Some(held.end),
                ..Verdict::default()
            }
        }
    }
}
