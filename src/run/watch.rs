//! `watch`: cycles until stopped (or once), logging, serving metrics and
//! `/healthz`, writing the audit log; ends with the last cycle's report.
//!
//! Owns wiring the loop (`crate::watch`) to its observers: the metrics, the
//! progress view (`Printer`, whose log lines are `render`'s) and the audit
//! log. Ends in the last cycle's `Verdict`; how a signal stopped it is the
//! run's (`run::mod`), the status `cli::exit`'s (a SIGTERM'd watch: that
//! last cycle's status).

use std::path::PathBuf;
use std::sync::Arc;

use crate::cli::config::{log_time, Job};
use crate::exec::event::{Fanout, Observer};
use crate::exec::report::{merge, Verdict};
use crate::observe::metrics::Metrics;
use crate::observe::notify::{Notifier, EXIT_WAIT};
use crate::render;

use super::context::{Run, Sink};
use super::printer::Printer;
/// `watch`: cycles until the run is cancelled (or once), logging, serving
/// metrics, writing the audit log; ends with the last cycle's report and
/// verdict.
pub(super) async fn watch(run: &Run<'_>, sink: &mut dyn Sink) -> Verdict {
    use crate::watch::{watch, Desired, WatchOptions};
    let config = run.config;
    let Job::Watch {
        goal,
        once,
        debounce,
        resync,
        metrics: metrics_addr,
        cli_scope,
        grace,
        archive,
    } = &config.job
    else {
        unreachable!("watch runs watch jobs")
    };
    let audit = match run.open_audit(sink) {
        Ok(audit) => audit,
        Err(failed) => return failed,
    };
    let metrics = Arc::new(Metrics::new());
    for engine in run.engines {
        metrics.know_engine(engine.name());
    }
    let (shutdown_tx, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
    let mut server = None;
    let mut bound_addr = None;
    if let Some(addr) = metrics_addr {
        let shutdown = async move {
            let _ = shutdown_rx.await;
        };
        match crate::observe::endpoint::serve(*addr, metrics.clone(), *resync, shutdown).await {
            Ok((bound, handle)) => {
                if let Some(warning) = render::metrics_exposed(bound) {
                    sink.err(&warning);
                }
                server = Some(handle);
                bound_addr = Some(bound);
            }
            Err(e) => {
                let e = anyhow::Error::new(e).context(format!(
                    "--metrics {addr}: cannot listen there; pass another address, or stop what listens on it"
                ));
                let refusal = crate::cli::refusal::of(&e, crate::model::RefusalCode::Metrics);
                return run.refuse(sink, &e, refusal);
            }
        }
    }
    let addresses: Vec<(String, String)> = run
        .engines
        .iter()
        .map(|e| (e.name().to_string(), e.endpoint().to_string()))
        .collect();
    sink.err(&render::watch_started(
        config.format,
        &log_time(),
        &addresses,
        *grace,
        bound_addr,
    ));
    let state_path = config
        .state
        .clone()
        .unwrap_or_else(|| PathBuf::from(crate::state::DEFAULT_STATE_PATH));
    let mut state = crate::cli::config::StateFile::new(state_path, cli_scope.clone(), *grace)
        .with_archive(archive.clone());
    let options = WatchOptions {
        debounce: *debounce,
        resync: *resync,
        apply: run.options(),
        ..WatchOptions::default()
    };
    let notifier = Notifier::new(&config.notify, Some(metrics.clone()), true);
    let printer = Printer::new(config, run.endpoints, sink, false, audit.as_ref())
        .with_notifier(notifier.as_ref());
    // Metrics first: once a cycle's log line is out, `/healthz` already
    // says what that cycle found.
    let mut observers: Vec<&dyn Observer> = vec![metrics.as_ref(), &printer];
    observers.extend(audit.as_ref().map(|a| a as &dyn Observer));
    observers.extend(notifier.as_ref().map(|n| n as &dyn Observer));
    let observer = Fanout(observers);
    let last = watch(
        run.engines,
        Desired {
            goal: goal.clone(),
            scope: config.scope.clone(),
        },
        &mut state,
        &options,
        *once,
        &run.stop.cancel,
        &crate::cli::config::now,
        &observer,
    )
    .await;
    let _ = shutdown_tx.send(());
    if let Some(handle) = server {
        let _ = handle.await;
    }
    let report = last.unwrap_or_else(|| merge(Vec::new()));
    let verdict = printer.conclude(&report, "", |v| super::ended(v, run.stop, true));
    if let Some(notifier) = &notifier {
        notifier.finish(EXIT_WAIT).await;
        printer.notify_failures();
    }
    verdict
}
