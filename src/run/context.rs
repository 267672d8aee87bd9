//! What every command of a run shares: where text goes (`Sink`), the
//! command with its config and engines (`Run`), the apply options, the
//! failure before any engine work that every command says the same way (and
//! an engine's failed part, in a fleet or alone), the audit log and the time
//! of a log line.
//!
//! Must not decide an exit status (a command ends in a `Verdict`, the run in
//! an `Ended`; `cli::exit` decides) nor make words (`render` does).

use std::sync::Arc;

use crate::cli::config::Config;
use crate::engine::Engine;
use crate::exec::apply::ApplyOptions;
use crate::exec::report::{PartError, Report, Verdict};
use crate::observe::audit::{AuditLog, AuditObserver};
use crate::render::{self, Format};

use super::signals::Stop;

/// Where text goes: the process's stdout and stderr, or buffers (tests).
pub trait Sink {
    fn out(&mut self, text: &str);
    fn err(&mut self, text: &str);
}

/// Everything printed, kept: a tool call's JSON document (stdout) and its
/// errors and warnings (stderr); the tests' sink too.
#[derive(Default)]
pub(super) struct Capture {
    pub(super) out: String,
    pub(super) err: String,
}

impl Sink for Capture {
    fn out(&mut self, text: &str) {
        self.out.push_str(text);
    }
    fn err(&mut self, text: &str) {
        self.err.push_str(text);
    }
}

/// The process's own stdout and stderr.
pub(super) struct Terminal;

impl Sink for Terminal {
    fn out(&mut self, text: &str) {
        render::stdout(text);
    }
    fn err(&mut self, text: &str) {
        render::stderr(text);
    }
}

/// A command with its config and engines (one per `config.engines`, by
/// name, with their addresses), and the run's stop.
pub(super) struct Run<'a> {
    pub(super) config: &'a Config,
    pub(super) engines: &'a [Arc<dyn Engine>],
    pub(super) endpoints: &'a [(String, String)],
    pub(super) stop: &'a Stop,
    /// What inspections taught: read from `config.memo_file` before the
    /// command, written back after it (the MCP server's: kept between calls).
    pub(super) memo: Arc<crate::exec::list::Memo>,
    /// One more observer of a converging run's events (the MCP server's
    /// progress), beside the progress view and the audit log.
    pub(super) observer: Option<&'a dyn crate::exec::event::Observer>,
}

impl Run<'_> {
    /// The removal budget (`--parallelism`, shared), per-engine cap, the
    /// run's memo, and `--reclaimed`.
    pub(super) fn options(&self) -> ApplyOptions {
        ApplyOptions {
            memo: self.memo.clone(),
            reclaimed: self.config.reclaimed,
            parallelism: self.config.engine_parallelism,
            budget: Some(Arc::new(tokio::sync::Semaphore::new(
                self.config.parallelism,
            ))),
            ..ApplyOptions::default()
        }
    }

    /// Opens `--audit FILE`, if given (`open_audit`); when it cannot be, the
    /// run's failure, said as `fail` says it.
    pub(super) fn open_audit(&self, sink: &mut dyn Sink) -> Result<Option<AuditObserver>, Verdict> {
        open_audit(self.config)
            .map_err(|e| self.fail(sink, crate::model::DEFAULT_ENGINE, "audit log", &e))
    }

    /// One engine's failure before any work, as a single engine prints it:
    /// the error on stderr and, for commands that end in a report, in JSON,
    /// the report on stdout.
    pub(super) fn fail(
        &self,
        sink: &mut dyn Sink,
        engine: &str,
        name: &str,
        e: &anyhow::Error,
    ) -> Verdict {
        fail(
            sink,
            self.config.format,
            self.config.reports(),
            engine,
            name,
            e,
        )
    }

    /// One engine's part that failed: in a fleet (no heading per engine) the
    /// error names its engine; alone, as `fail` says it.
    pub(super) fn part_failed(
        &self,
        sink: &mut dyn Sink,
        engine: &str,
        endpoint: &str,
        e: &PartError,
    ) {
        let e = anyhow::Error::new(e.clone());
        if self.config.fleet {
            sink.err(&render::engine_error(engine, &e));
        } else {
            self.fail(sink, engine, endpoint, &e);
        }
    }
}

/// Reports a run that failed before any engine work: the error on stderr,
/// and for commands that end in a report, in JSON mode, the report (with
/// every key) on stdout. Always a failure.
pub(super) fn fail(
    sink: &mut dyn Sink,
    format: Format,
    reports: bool,
    engine: &str,
    name: &str,
    error: &anyhow::Error,
) -> Verdict {
    sink.err(&render::error(error));
    if reports && format == Format::Json {
        let report = Report::failed_before_apply(engine, name, format!("{error:#}"));
        sink.out(&render::report_json(&report));
    }
    failed(true)
}

/// The verdict of a command that failed or not (nothing pending, not interrupted).
pub(super) fn failed(failed: bool) -> Verdict {
    Verdict {
        failed,
        ..Verdict::default()
    }
}

/// Opens `--audit FILE`, if given.
pub(super) fn open_audit(config: &Config) -> anyhow::Result<Option<AuditObserver>> {
    match &config.audit {
        Some(path) => Ok(Some(AuditObserver::new(Arc::new(AuditLog::open(path)?)))),
        None => Ok(None),
    }
}
