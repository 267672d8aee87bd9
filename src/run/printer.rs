//! The progress view of a converging run and a watch (`Printer`): an
//! observer of the run's events that says, as they happen, each engine's
//! plan (human format) before any removal, progress, watch's log lines and
//! warnings; then the merged report, and the verdict made from it.
//!
//! Owns which of `render`'s words go where and when; every word is
//! `render`'s. It stays beside the commands (not under `render/`) because it
//! reads the run's config, writes to its `Sink` and says the audit log's
//! failures, which `render`'s layer may not reach. Must not decide an exit
//! status (it returns a `Verdict`) nor anything a run decides.

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;

use crate::cli::config::{log_time, Config, Job};
use crate::cli::exit::{succeeds, Ended};
use crate::exec::event::{Event, Observer};
use crate::exec::report::{FleetReport, Verdict};
use crate::observe::audit::AuditObserver;
use crate::observe::notify::Notifier;
use crate::render::{self, Format, Progress};

use super::context::Sink;

/// What a converge or a watch prints as it goes: each engine's plan (human
/// format) before any removal, progress, watch's log lines, warnings; then
/// the merged report, and the exit status decided from it.
pub(super) struct Printer<'a> {
    config: &'a Config,
    endpoints: &'a [(String, String)],
    sink: RefCell<&'a mut dyn Sink>,
    /// Print each plan before carrying it out (not for a saved plan: it was shown when made).
    print_plan: bool,
    progress: RefCell<Progress>,
    /// The audit log, whose write failures are said here.
    audit: Option<&'a AuditObserver>,
    /// True once an audit write failed: the run did not fully succeed.
    audit_failed: Cell<bool>,
    /// Lease warnings already said.
    warned: RefCell<BTreeSet<String>>,
    /// True once one engine's `Engine: ADDRESS` heading was printed (with
    /// its plan): the report does not say it again.
    headed: Cell<bool>,
    /// The engines whose plan was printed whole: their report does not name
    /// what is kept and retained again (decision 24).
    in_full: RefCell<BTreeSet<String>>,
    /// The notifier, whose deliveries given up on are said here (never
    /// part of the verdict).
    notifier: Option<&'a Notifier>,
}

impl<'a> Printer<'a> {
    pub(super) fn new(
        config: &'a Config,
        endpoints: &'a [(String, String)],
        sink: &'a mut dyn Sink,
        print_plan: bool,
        audit: Option<&'a AuditObserver>,
    ) -> Self {
        let progress = if config.fleet && config.format == Format::Human {
            Progress::Lines
        } else {
            Progress::Quiet
        };
        Printer {
            config,
            endpoints,
            sink: RefCell::new(sink),
            print_plan,
            progress: RefCell::new(progress),
            audit,
            audit_failed: Cell::new(false),
            warned: RefCell::new(BTreeSet::new()),
            headed: Cell::new(false),
            in_full: RefCell::new(BTreeSet::new()),
            notifier: None,
        }
    }

    /// This printer, saying `notifier`'s deliveries given up on.
    pub(super) fn with_notifier(mut self, notifier: Option<&'a Notifier>) -> Self {
        self.notifier = notifier;
        self
    }

    /// Says the notifications given up on since the last look, if any: a
    /// warning each, never a failure of the run.
    pub(super) fn notify_failures(&self) {
        let Some(notifier) = self.notifier else {
            return;
        };
        for failure in notifier.take_failures() {
            let line = if self.watching() {
                render::watch_notify_failed(self.config.format, &log_time(), &failure)
            } else {
                format!("{}\n", render::notify_failed_words(&failure))
            };
            self.err(&line);
        }
    }

    /// Says an audit write failure, if one happened since the last look.
    fn audit_error(&self) {
        let Some(e) = self.audit.and_then(AuditObserver::take_error) else {
            return;
        };
        self.audit_failed.set(true);
        let text = e.to_string();
        if self.watching() {
            self.err(&render::watch_audit_error(
                self.config.format,
                &log_time(),
                &text,
            ));
        } else {
            self.err(&render::error_line(&text));
        }
    }

    fn watching(&self) -> bool {
        matches!(self.config.job, Job::Watch { .. })
    }

    fn err(&self, text: &str) {
        self.sink.borrow_mut().err(text);
    }

    /// Prints the audit log's failure if any, `warnings` (`destroy ID`'s),
    /// then the merged report (per engine for a fleet); returns its verdict.
    /// `ended`: how the run ends with a verdict (`run::ended`), so that the
    /// JSON's `ok` is what the exit status will be (`cli::exit::succeeds`).
    pub(super) fn conclude(
        &self,
        report: &FleetReport,
        warnings: &str,
        ended: impl Fn(Verdict) -> Ended,
    ) -> Verdict {
        self.audit_error();
        let config = self.config;
        if !warnings.is_empty() {
            self.err(warnings);
        }
        let mut verdict = Verdict::of_report(&report.report);
        verdict.failed |= self.audit_failed.get();
        let ok = succeeds(&ended(verdict));
        let in_full = self.in_full.borrow();
        let kept = |engine: &str| {
            if in_full.contains(engine) {
                render::Kept::InThePlan
            } else {
                render::Kept::Named
            }
        };
        let mut sink = self.sink.borrow_mut();
        match (config.fleet, report.parts.as_slice()) {
            (false, [part]) => {
                // The address as `plan` says it (with where it came from).
                let endpoint = self
                    .endpoints
                    .iter()
                    .find(|(n, _)| *n == part.engine)
                    .map_or(part.endpoint.as_str(), |(_, e)| e.as_str());
                let engine = part.engine.as_str();
                let heading = !self.headed.get();
                // An engine that failed whole is said as an error; the JSON
                // report still follows it, the human one does not.
                if let Err(e) = &part.result {
                    sink.err(&render::error(&anyhow::Error::new(e.clone())));
                }
                if part.result.is_ok() || config.format == Format::Json {
                    sink.out(&render::engine_report(
                        &report.report,
                        engine,
                        endpoint,
                        heading,
                        kept(engine),
                        ok,
                        config.format,
                    ));
                }
            }
            _ => sink.out(&render::fleet_report(report, kept, ok, config.format)),
        }
        verdict
    }
}

impl Observer for Printer<'_> {
    fn on(&self, event: &Event<'_>) {
        let format = self.config.format;
        match event {
            Event::Planned {
                engine,
                inventory,
                plan,
            } => {
                if let Some(w) = render::rejected_warning(inventory) {
                    self.err(&w);
                }
                // Said once per run (a watch would repeat it every cycle).
                if let Some(note) = render::swarm_note(inventory) {
                    if self.warned.borrow_mut().insert(note.clone()) {
                        self.err(&note);
                    }
                }
                if let Some(w) = render::lease_warnings(plan) {
                    if self.warned.borrow_mut().insert(w.clone()) {
                        self.err(&w);
                    }
                }
                // A watch says it in its cycle log (its stderr is that log).
                if let Some(w) = render::incomplete_warnings(plan).filter(|_| !self.watching()) {
                    self.err(&w);
                }
                if format != Format::Human || !self.print_plan || self.watching() {
                    return;
                }
                let full = render::plan_in_full(plan, self.config.verbose);
                if full {
                    self.in_full.borrow_mut().insert(engine.to_string());
                }
                if self.config.fleet {
                    let endpoint = self
                        .endpoints
                        .iter()
                        .find(|(n, _)| n == engine)
                        .map(|(_, e)| e.as_str())
                        .unwrap_or_default();
                    self.sink
                        .borrow_mut()
                        .out(&render::fleet_engine_plan(engine, endpoint, plan, full));
                } else {
                    let endpoint = self.endpoints.first().map_or("", |(_, e)| e.as_str());
                    let mut sink = self.sink.borrow_mut();
                    if !self.headed.replace(true) {
                        sink.out(&render::plan_heading(endpoint));
                    }
                    sink.out(&render::engine_plan(plan, full));
                    drop(sink);
                    *self.progress.borrow_mut() = Progress::new(format, plan.steps.len());
                }
            }
            Event::Finished { step, outcome, .. } => {
                let line = self.progress.borrow_mut().finished(step, outcome);
                if let Some(line) = line {
                    self.err(&line);
                }
            }
            Event::Applied { .. } => {
                if !self.config.fleet {
                    self.progress.borrow().finish();
                }
                if !self.watching() {
                    self.audit_error();
                }
            }
            Event::Cycle {
                trigger,
                took: _,
                report,
            } => {
                self.audit_error();
                self.notify_failures();
                for part in &report.parts {
                    if let Some(line) = render::watch_cycle(
                        format,
                        &log_time(),
                        &part.engine,
                        trigger.as_str(),
                        part.took,
                        &part.result,
                    ) {
                        self.err(&line);
                    }
                }
            }
            Event::Stream { engine, error } => {
                let text = error.map(ToString::to_string);
                self.err(&render::watch_stream(
                    format,
                    &log_time(),
                    engine,
                    text.as_deref(),
                ));
            }
            Event::State { broken } => {
                self.err(&render::watch_state(format, &log_time(), *broken));
            }
            Event::Unmeasured { engine, error } => {
                self.err(&render::unmeasured_warning(engine, &error.to_string()));
            }
            Event::Started { .. } | Event::Archived { .. } | Event::DeadlineMisses { .. } => {}
        }
    }
}
