//! What every command of a run shares: where text goes (`Sink`), the
//! command with its config and engines (`Run`), the apply options, the
//! refusal before any engine work that every command says the same way
//! (`refuse`: the error document under `--format json`), an engine's failed
//! part (in a fleet or alone), and the audit log.
//!
//! Must not decide an exit status (a command ends in a `Verdict`, the run in
//! an `Ended`; `cli::exit` decides) nor make words (`render` does).

use std::sync::Arc;

use crate::cli::config::{Config, Job};
use crate::engine::Engine;
use crate::exec::apply::ApplyOptions;
use crate::exec::report::{PartError, Verdict};
use crate::model::{Refusal, RefusalCode};
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
    /// run is refused before any removal (`refuse`), naming the file.
    pub(super) fn open_audit(&self, sink: &mut dyn Sink) -> Result<Option<AuditObserver>, Verdict> {
        open_audit(self.config).map_err(|e| {
            let mut refusal = crate::cli::refusal::of(&e, RefusalCode::AuditLog);
            if let Some(path) = &self.config.audit {
                refusal = refusal.at(path.display().to_string(), None);
            }
            self.refuse(sink, &e, refusal)
        })
    }

    /// This run refused before any engine work because of `error`: said as
    /// every refusal is (`refuse`), under this run's format.
    pub(super) fn refuse(
        &self,
        sink: &mut dyn Sink,
        error: &anyhow::Error,
        refusal: Refusal,
    ) -> Verdict {
        let json =
            self.config.format == Format::Json && !matches!(self.config.job, Job::Mcp { .. });
        refuse(sink, json, error, &refusal)
    }

    /// One engine's part that failed: in a fleet (no heading per engine) the
    /// error names its engine; alone, as `fail` says it.
    pub(super) fn part_failed(&self, sink: &mut dyn Sink, engine: &str, e: &PartError) {
        let e = anyhow::Error::new(e.clone());
        if self.config.fleet {
            sink.err(&render::engine_error(engine, &e));
        } else {
            fail(sink, &e);
        }
    }
}

/// A failure after the run began (an engine that could not be listed, a
/// plan that could not be saved): the error on stderr, nothing on stdout (a
/// converging run's report says its own, `Printer::conclude`). Always a
/// failure.
pub(super) fn fail(sink: &mut dyn Sink, error: &anyhow::Error) -> Verdict {
    sink.err(&render::error(error));
    failed(true)
}

/// Says a run refused before any engine work, the one way every command
/// says it: the error on stderr and, when the run asked for JSON (`json`),
/// the error document of `refusal` on stdout, nothing else there. Always a
/// failure (exit 1; a command line clap or `Cli::into_args` refused exits 2
/// through `run::refused`, which prints the same document).
pub(super) fn refuse(
    sink: &mut dyn Sink,
    json: bool,
    error: &anyhow::Error,
    refusal: &Refusal,
) -> Verdict {
    sink.err(&render::error(error));
    if json {
        sink.out(&render::refusal(refusal));
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
