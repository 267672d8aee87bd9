//! One command, start to end: a resolved `Config` and its engines in, text
//! and an `Exit` out. Dispatch only.
//!
//! Every command runs on a non-empty list of engines (a single engine is a
//! fleet of one) through `exec::fleet` (`lease` and `hold` through
//! `exec::lease`), and every exit status is `Exit::of` a `Verdict` made from
//! the merged result. Owns which engines a run reaches
//! (lazily: one that is down fails its part alone), signals, saved-plan
//! files, and which view prints what when; the work is `exec`'s and `watch`'s,
//! the words `render`'s. `run_on` takes the engines as an argument, so every
//! command, shape and fault is testable with the in-memory engine.

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::cli::config::{resolve, Config, Job};
use crate::cli::exit::Exit;
use crate::cli::Args;
use crate::engine::lazy::LazyEngine;
use crate::engine::Engine;
use crate::exec::apply::ApplyOptions;
use crate::exec::event::{Event, Fanout, Observer};
use crate::exec::fleet::{list_all, plan_all, reconcile_all, reconcile_saved_all, FleetPlan};
use crate::exec::list::InventoryError;
use crate::exec::reconcile::plan_once;
use crate::exec::report::{merge, FleetReport, PlanFileError, Report, Verdict};
use crate::observe::audit::{AuditLog, AuditObserver};
use crate::observe::metrics::Metrics;
use crate::plan::lease::Leases;
use crate::plan::Goal;
use crate::render::{self, Format, Progress};

/// Where text goes: the process's stdout and stderr, or buffers (tests).
pub trait Sink {
    fn out(&mut self, text: &str);
    fn err(&mut self, text: &str);
}

/// The process's own stdout and stderr.
struct Terminal;

impl Sink for Terminal {
    fn out(&mut self, text: &str) {
        render::stdout(text);
    }
    fn err(&mut self, text: &str) {
        render::stderr(text);
    }
}

/// Runs one validated command on the engines its config names.
pub async fn run(args: Args) -> Exit {
    // Generated from the clap definitions: no state file, no engine.
    match args.command {
        crate::cli::Command::Completions { shell } => {
            return crate::cli::operator::emit(|out| crate::cli::operator::completions(shell, out))
        }
        crate::cli::Command::Man => return crate::cli::operator::emit(crate::cli::operator::man),
        crate::cli::Command::Validate { files } => {
            let files = if files.is_empty() {
                vec![args
                    .state
                    .clone()
                    .unwrap_or_else(|| PathBuf::from(crate::state::DEFAULT_STATE_PATH))]
            } else {
                files.clone()
            };
            return validate(&files, args.format, &mut Terminal);
        }
        _ => {}
    }
    let format = args.format;
    // Only commands that end in a report print one when they fail early.
    let reports = matches!(
        args.command,
        crate::cli::Command::Apply { .. }
            | crate::cli::Command::Destroy { .. }
            | crate::cli::Command::Watch { .. }
    );
    let config = match resolve(args) {
        Ok(config) => config,
        Err(e) => {
            return fail(
                &mut Terminal,
                format,
                reports,
                crate::model::DEFAULT_ENGINE,
                "state file",
                &e,
            );
        }
    };
    let engines: Vec<Arc<dyn Engine>> = config
        .engines
        .iter()
        .map(|t| {
            Arc::new(LazyEngine::new(
                &t.name,
                t.endpoint.clone(),
                config.timeout,
                config.call_timeout,
            )) as Arc<dyn Engine>
        })
        .collect();
    let cancel = CancellationToken::new();
    let interrupted = Arc::new(AtomicBool::new(false));
    let (passed_tx, passed) = tokio::sync::mpsc::unbounded_channel();
    let signals = if matches!(config.job, Job::Hold { .. }) {
        // hold passes SIGINT and SIGTERM on to its command and waits for it.
        pass_signals(passed_tx)
    } else {
        tokio::spawn(on_signals(
            cancel.clone(),
            interrupted.clone(),
            matches!(config.job, Job::Watch { .. }),
            config.format,
        ))
    };
    let exit = run_with(&config, engines, cancel, Some(passed), &mut Terminal).await;
    signals.abort();
    if interrupted.load(Ordering::SeqCst) {
        Exit::Interrupted
    } else {
        exit
    }
}

/// Cancels `cancel` on a signal. A converging command: the first Ctrl-C stops
/// new removals (those in flight finish, then verify), a second quits at
/// once. `watch`: SIGTERM (exit 0) or Ctrl-C (exit 130, `interrupted`) stop
/// it after the cycle in flight.
async fn on_signals(
    cancel: CancellationToken,
    interrupted: Arc<AtomicBool>,
    watch: bool,
    format: Format,
) {
    use tokio::signal::unix::{signal, SignalKind};
    if !watch {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
            render::stderr("interrupted: finishing removals in flight, then verifying (Ctrl-C again to quit at once)\n");
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(Exit::Interrupted.code());
            }
        }
        return;
    }
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        return;
    };
    let name = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = tokio::signal::ctrl_c() => {
            interrupted.store(true, Ordering::SeqCst);
            "SIGINT"
        }
    };
    cancel.cancel();
    render::stderr(&render::watch_stopping(format, &log_time(), name));
}

/// Sends the number of every SIGINT and SIGTERM this process gets to
/// `hold`, which passes it on to its command. The handlers are in place
/// when this returns (before the lease is taken): from then on neither
/// signal ends this process.
fn pass_signals(passed: tokio::sync::mpsc::UnboundedSender<i32>) -> tokio::task::JoinHandle<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let handlers = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    );
    tokio::spawn(async move {
        let (Ok(mut term), Ok(mut int)) = handlers else {
            return;
        };
        loop {
            let number = tokio::select! {
                _ = term.recv() => libc::SIGTERM,
                _ = int.recv() => libc::SIGINT,
            };
            if passed.send(number).is_err() {
                return;
            }
        }
    })
}

/// Runs `config` on `engines` (one per `config.engines`, by name), printing
/// to `sink`. Cancelling `cancel` stops new removals (and stops `watch`;
/// `hold` passes SIGTERM on to its command).
pub async fn run_on(
    config: &Config,
    engines: Vec<Arc<dyn Engine>>,
    cancel: CancellationToken,
    sink: &mut dyn Sink,
) -> Exit {
    run_with(config, engines, cancel, None, sink).await
}

/// [`run_on`], with the signal numbers `hold` passes on to its command
/// (`None`: only SIGTERM, when `cancel` is cancelled).
async fn run_with(
    config: &Config,
    engines: Vec<Arc<dyn Engine>>,
    cancel: CancellationToken,
    signals: Option<tokio::sync::mpsc::UnboundedReceiver<i32>>,
    sink: &mut dyn Sink,
) -> Exit {
    let endpoints: Vec<(String, String)> = config
        .engines
        .iter()
        .map(|t| (t.name.clone(), t.endpoint.to_string()))
        .collect();
    let run = Run {
        config,
        engines: &engines,
        endpoints: &endpoints,
    };
    match &config.job {
        Job::Inventory { max_lease } => run.inventory(max_lease, sink).await,
        Job::Plan {
            goal,
            detailed,
            out,
        } => run.plan(goal, *detailed, out.as_deref(), sink).await,
        Job::Graph { goal } | Job::Explain { goal, .. } => run.each_plan(goal, sink).await,
        Job::Converge { .. } | Job::ApplySaved { .. } => run.converge(&cancel, sink).await,
        Job::Watch { .. } => run.watch(&cancel, sink).await,
        Job::Lease { .. } | Job::Release { .. } => run.lease(sink).await,
        Job::Restore { .. } => run.restore(sink).await,
        Job::Hold { .. } => {
            let (mut signals, on_cancel) = match signals {
                Some(signals) => (signals, None),
                None => {
                    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                    let cancelled = cancel.clone();
                    let task = tokio::spawn(async move {
                        cancelled.cancelled().await;
                        let _ = tx.send(libc::SIGTERM);
                    });
                    (rx, Some(task))
                }
            };
            let exit = run.hold(&mut signals, sink).await;
            if let Some(task) = on_cancel {
                task.abort();
            }
            exit
        }
    }
}

/// A command with its config and engines.
struct Run<'a> {
    config: &'a Config,
    engines: &'a [Arc<dyn Engine>],
    endpoints: &'a [(String, String)],
}

impl Run<'_> {
    fn options(&self) -> ApplyOptions {
        ApplyOptions {
            parallelism: self.config.engine_parallelism,
            budget: Some(Arc::new(tokio::sync::Semaphore::new(
                self.config.parallelism,
            ))),
            ..ApplyOptions::default()
        }
    }

    /// One engine's failure before any work, as a single engine prints it:
    /// the error on stderr and, for commands that end in a report, in JSON,
    /// the report on stdout.
    fn fail(&self, sink: &mut dyn Sink, engine: &str, name: &str, e: &anyhow::Error) -> Exit {
        fail(
            sink,
            self.config.format,
            self.config.reports(),
            engine,
            name,
            e,
        )
    }

    async fn inventory(&self, max_lease: &Option<u64>, sink: &mut dyn Sink) -> Exit {
        let parts = list_all(self.engines, &self.config.scope).await;
        for inventory in parts.iter().filter_map(|(_, r)| r.as_ref().ok()) {
            if let Some(w) = render::rejected_warning(inventory) {
                sink.err(&w);
            }
            if let Some(w) = render::unlisted_warnings(inventory) {
                sink.err(&w);
            }
        }
        // A listing that failed fails the inventory too: it is not all there.
        let failed = parts.iter().any(|(_, r)| {
            r.as_ref()
                .map_or(true, |inv| !inv.unknown.listings.is_empty())
        });
        // Leases judged as the plan judges them, at the run's time.
        let parts: Vec<(String, Result<render::Listed, InventoryError>)> = parts
            .into_iter()
            .map(|(n, r)| {
                let judged = r.map(|inv| {
                    let leases = Leases::of(&inv, self.config.now, *max_lease);
                    (inv, leases)
                });
                (n, judged)
            })
            .collect();
        if self.config.fleet {
            let parts: Vec<(String, Result<render::Listed, String>)> = parts
                .into_iter()
                .map(|(n, r)| (n, r.map_err(|e| e.to_string())))
                .collect();
            sink.out(&render::fleet_inventory(&parts, self.config.format));
        } else {
            for (name, result) in &parts {
                match result {
                    Ok((inventory, leases)) => {
                        sink.out(&render::inventory(inventory, leases, self.config.format))
                    }
                    Err(e) => {
                        self.fail(sink, name, self.endpoint_of(name), &e.clone().into());
                    }
                }
            }
        }
        Exit::of(Verdict {
            failed,
            ..Verdict::default()
        })
    }

    fn endpoint_of(&self, engine: &str) -> &str {
        self.endpoints
            .iter()
            .find(|(n, _)| n == engine)
            .map(|(_, e)| e.as_str())
            .unwrap_or_default()
    }

    async fn plan(
        &self,
        goal: &Goal,
        detailed: bool,
        out: Option<&Path>,
        sink: &mut dyn Sink,
    ) -> Exit {
        let config = self.config;
        let (fleet, inventories) = plan_all(self.engines, goal, &config.scope, config.now).await;
        for inventory in &inventories {
            if let Some(w) = render::rejected_warning(inventory) {
                sink.err(&w);
            }
            if let Some(note) = render::swarm_note(inventory) {
                sink.err(&note);
            }
        }
        for plan in &fleet.engines {
            if let Some(w) = render::lease_warnings(plan) {
                sink.err(&w);
            }
            if let Some(w) = render::incomplete_warnings(plan) {
                sink.err(&w);
            }
        }
        // A listing or an inspection that failed fails the plan too: what
        // it could affect is only blocked, not known.
        let incomplete = fleet.engines.iter().any(|p| !p.incomplete.is_empty());
        let verdict = Verdict {
            failed: !fleet.failures.is_empty() || incomplete,
            pending: detailed && !fleet.is_empty(),
            ..Verdict::default()
        };
        if !config.fleet {
            if let Some(f) = fleet.failures.first() {
                return self.fail(sink, &f.engine, &f.name, &anyhow::anyhow!("{}", f.error));
            }
        }
        if let Some(path) = out {
            let text = match (config.fleet, fleet.engines.first()) {
                (false, Some(plan)) => render::plan_json(plan),
                _ => render::fleet_plan(&fleet, self.endpoints, Format::Json),
            };
            if let Err(e) = save(path, &text) {
                return self.fail(sink, "fleet", "plan file", &e.into());
            }
        }
        match (config.fleet, fleet.engines.first()) {
            (false, Some(plan)) => {
                if config.format == Format::Human {
                    sink.out(&format!("Engine: {}\n", self.endpoints[0].1));
                }
                sink.out(&render::plan(plan, config.format));
            }
            _ => sink.out(&render::fleet_plan(&fleet, self.endpoints, config.format)),
        }
        Exit::of(verdict)
    }

    /// `graph` and `explain`: one plan each, engine after engine.
    async fn each_plan(&self, goal: &Goal, sink: &mut dyn Sink) -> Exit {
        let config = self.config;
        let mut failed = false;
        for engine in self.engines {
            let done = match &config.job {
                Job::Explain { query, .. } => explain(config, engine.as_ref(), goal, query)
                    .await
                    .map(|(items, incomplete)| {
                        // Explained as far as it is known; the run fails.
                        if let Some(w) = incomplete {
                            sink.err(&w);
                            failed = true;
                        }
                        render::explain(&items, config.format)
                    }),
                _ => plan_once(engine.as_ref(), goal, &config.scope, config.now)
                    .await
                    .map(|(_, plan)| {
                        // Drawn as far as it is known; the run fails.
                        if let Some(w) = render::incomplete_warnings(&plan) {
                            sink.err(&w);
                            failed = true;
                        }
                        render::graph(&plan, config.format)
                    })
                    .map_err(Into::into),
            };
            match done {
                Ok(text) => sink.out(&text),
                Err(e) => {
                    failed = true;
                    self.fail(sink, engine.name(), engine.endpoint(), &e);
                }
            }
        }
        Exit::of(Verdict {
            failed,
            ..Verdict::default()
        })
    }

    /// `apply`, `destroy`, `apply FILE`: every engine at once, one report.
    async fn converge(&self, cancel: &CancellationToken, sink: &mut dyn Sink) -> Exit {
        let config = self.config;
        let audit = match open_audit(config) {
            Ok(audit) => audit,
            Err(e) => return self.fail(sink, crate::model::DEFAULT_ENGINE, "audit log", &e),
        };
        let saved = match &config.job {
            Job::ApplySaved { path } => match FleetPlan::read(path) {
                Ok(plan) => Some((path.as_path(), plan)),
                Err(e) => {
                    return fail(
                        sink,
                        config.format,
                        true,
                        &config.engines[0].name,
                        "plan file",
                        &e.into(),
                    )
                }
            },
            _ => None,
        };
        let printer = Printer::new(
            config,
            self.endpoints,
            sink,
            saved.is_none(),
            audit.as_ref(),
        );
        let mut observers: Vec<&dyn Observer> = vec![&printer];
        observers.extend(audit.as_ref().map(|a| a as &dyn Observer));
        let observer = Fanout(observers);
        let options = self.options();
        let report = match (&config.job, &saved) {
            (_, Some((path, plan))) => {
                reconcile_saved_all(self.engines, plan, path, &options, cancel, &observer).await
            }
            (Job::Converge { goal, .. }, None) => {
                reconcile_all(
                    self.engines,
                    goal,
                    &config.scope,
                    config.now,
                    &options,
                    cancel,
                    &observer,
                )
                .await
            }
            _ => unreachable!("converge runs converging jobs"),
        };
        printer.conclude(&report)
    }

    /// `watch`: cycles until `cancel` (or once), logging, serving metrics,
    /// writing the audit log; ends with the last cycle's report.
    async fn watch(&self, cancel: &CancellationToken, sink: &mut dyn Sink) -> Exit {
        use crate::watch::{watch, Desired, WatchOptions};
        let config = self.config;
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
        let audit = match open_audit(config) {
            Ok(audit) => audit,
            Err(e) => return self.fail(sink, crate::model::DEFAULT_ENGINE, "audit log", &e),
        };
        let metrics = Arc::new(Metrics::new());
        for engine in self.engines {
            metrics.know_engine(engine.name());
        }
        let (shutdown_tx, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
        let mut server = None;
        let mut bound_addr = None;
        if let Some(addr) = metrics_addr {
            let shutdown = async move {
                let _ = shutdown_rx.await;
            };
            match crate::observe::metrics::serve(*addr, metrics.clone(), *resync, shutdown).await {
                Ok((bound, handle)) => {
                    if let Some(warning) = render::metrics_exposed(bound) {
                        sink.err(&warning);
                    }
                    server = Some(handle);
                    bound_addr = Some(bound);
                }
                Err(e) => {
                    return self.fail(sink, crate::model::DEFAULT_ENGINE, "metrics", &e.into())
                }
            }
        }
        let addresses: Vec<(String, String)> = self
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
            apply: self.options(),
            ..WatchOptions::default()
        };
        let printer = Printer::new(config, self.endpoints, sink, false, audit.as_ref());
        // Metrics first: once a cycle's log line is out, `/healthz` already
        // says what that cycle found.
        let mut observers: Vec<&dyn Observer> = vec![metrics.as_ref(), &printer];
        observers.extend(audit.as_ref().map(|a| a as &dyn Observer));
        let observer = Fanout(observers);
        let last = watch(
            self.engines,
            Desired {
                goal: goal.clone(),
                scope: config.scope.clone(),
            },
            &mut state,
            &options,
            *once,
            cancel,
            &crate::cli::config::now,
            &observer,
        )
        .await;
        let _ = shutdown_tx.send(());
        if let Some(handle) = server {
            let _ = handle.await;
        }
        let report = last.unwrap_or_else(|| merge(Vec::new()));
        let exit = printer.conclude(&report);
        if cancel.is_cancelled() && !*once {
            // Told to stop (SIGTERM): a clean stop, whatever the last cycle
            // found (its report and log said so); Ctrl-C is 130 (see `run`).
            Exit::Success
        } else {
            exit
        }
    }
}

impl Run<'_> {
    /// `lease` (one engine: resolve checked) and `lease --release` (every
    /// engine at once): box after box, the results in the run's engine
    /// order, then the errors on stderr; exit 1 when anything failed.
    async fn lease(&self, sink: &mut dyn Sink) -> Exit {
        use crate::exec::lease::{release, take, LeaseAction, LeaseRequest, LeaseRun};
        let config = self.config;
        let run = match &config.job {
            Job::Lease {
                boxes,
                ttl,
                max_lease,
            } => {
                let engine = self.engines[0].as_ref();
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
                let per_engine = self.engines.iter().map(|engine| async move {
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
        sink.out(&render::lease_run(&run, config.format));
        sink.err(&render::lease_errors(&run));
        Exit::of(Verdict {
            failed: !run.ok,
            ..Verdict::default()
        })
    }

    /// `restore`: one archive into a new volume on the one engine (resolve checked).
    async fn restore(&self, sink: &mut dyn Sink) -> Exit {
        let config = self.config;
        let Job::Restore { archive, volume } = &config.job else {
            unreachable!("restore runs restore jobs")
        };
        let engine = self.engines[0].as_ref();
        let labels = crate::exec::archive::scope_labels(&config.scope);
        let result =
            crate::exec::archive::restore(engine, archive, volume.as_deref(), &labels).await;
        // Every error names the volume and the engine.
        let name = volume
            .clone()
            .or_else(|| {
                crate::exec::archive::read_manifest(archive)
                    .ok()
                    .map(|m| m.volume)
            })
            .unwrap_or_else(|| "(unknown: no manifest)".into());
        let what = format!("restore of volume {name} on engine {}", engine.name());
        sink.out(&render::restored(&result, &what, config.format));
        sink.err(&render::restore_error(&result, &what));
        Exit::of(Verdict {
            failed: result.is_err(),
            ..Verdict::default()
        })
    }

    /// `hold`: a lease on the one engine (resolve checked) while the
    /// command runs; its lines on stderr as they happen; the command's
    /// status passed through (`Exit::of` decides).
    async fn hold(
        &self,
        signals: &mut tokio::sync::mpsc::UnboundedReceiver<i32>,
        sink: &mut dyn Sink,
    ) -> Exit {
        use crate::exec::hold::{hold, HoldEvent};
        use crate::exec::lease::LeaseRequest;
        let config = self.config;
        let Job::Hold {
            box_id,
            ttl,
            max_lease,
            command,
        } = &config.job
        else {
            unreachable!("hold runs hold jobs")
        };
        let engine = self.engines[0].as_ref();
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
            hold(engine, req, command, every, signals, &mut on).await
        };
        match held {
            Err(e) => {
                sink.err(&render::hold_not_taken(
                    format,
                    &log_time(),
                    name,
                    box_id,
                    &e,
                ));
                Exit::of(Verdict {
                    failed: true,
                    ..Verdict::default()
                })
            }
            Ok(held) => {
                sink.err(&render::hold_end(format, &log_time(), name, box_id, &held));
                Exit::of(Verdict {
                    failed: !held.left.is_empty(),
                    command: Some(held.end),
                    ..Verdict::default()
                })
            }
        }
    }
}

/// What a converge or a watch prints as it goes: each engine's plan (human
/// format) before any removal, progress, watch's log lines, warnings; then
/// the merged report, and the exit status decided from it.
struct Printer<'a> {
    config: &'a Config,
    endpoints: &'a [(String, String)],
    sink: RefCell<&'a mut dyn Sink>,
    /// Print each plan before carrying it out (not for a saved plan: it was shown when made).
    print_plan: bool,
    progress: RefCell<Progress>,
    /// Box IDs some engine's listing carries (for `destroy ID` warnings).
    box_ids: RefCell<BTreeSet<String>>,
    /// The audit log, whose write failures are said here.
    audit: Option<&'a AuditObserver>,
    /// True once an audit write failed: the run did not fully succeed.
    audit_failed: Cell<bool>,
    /// Lease warnings already said.
    warned: RefCell<BTreeSet<String>>,
}

impl<'a> Printer<'a> {
    fn new(
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
            box_ids: RefCell::new(BTreeSet::new()),
            audit,
            audit_failed: Cell::new(false),
            warned: RefCell::new(BTreeSet::new()),
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
            self.err(&format!("error: {}\n", crate::text::escape(&text)));
        }
    }

    fn watching(&self) -> bool {
        matches!(self.config.job, Job::Watch { .. })
    }

    fn err(&self, text: &str) {
        self.sink.borrow_mut().err(text);
    }

    /// Prints the merged report (per engine for a fleet) and decides the exit.
    fn conclude(&self, report: &FleetReport) -> Exit {
        self.audit_error();
        let config = self.config;
        if let Job::Converge { named, .. } = &config.job {
            let present = self.box_ids.borrow();
            for id in named.iter().filter(|id| !present.contains(id.as_str())) {
                self.err(&format!(
                    "warning: no managed container, volume or network carries ca.sandbox.id={} (in scope {}){}\n",
                    crate::text::escape(id),
                    config.scope,
                    if report.parts.iter().any(|p| p.result.is_err()) {
                        " on the engines that could be listed"
                    } else {
                        ""
                    }
                ));
            }
        }
        let mut sink = self.sink.borrow_mut();
        match (config.fleet, report.parts.as_slice()) {
            (false, [part]) => match &part.result {
                Err(e) => {
                    sink.err(&render::error(&anyhow::Error::new(e.clone())));
                    if config.format == Format::Json {
                        sink.out(&render::report_json(&report.report));
                    }
                }
                Ok(_) => sink.out(&render::report(&report.report, config.format)),
            },
            _ => sink.out(&render::fleet_report(report, config.format)),
        }
        let mut verdict = Verdict::of_report(&report.report);
        verdict.failed |= self.audit_failed.get();
        Exit::of(verdict)
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
                if let Job::Converge { named, .. } = &self.config.job {
                    // Only `destroy ID` asks (a watch would gather forever).
                    let ids = inventory.box_ids();
                    self.box_ids
                        .borrow_mut()
                        .extend(named.iter().filter(|n| ids.contains(n.as_str())).cloned());
                }
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
                if self.config.fleet {
                    let endpoint = self
                        .endpoints
                        .iter()
                        .find(|(n, _)| n == engine)
                        .map(|(_, e)| e.as_str())
                        .unwrap_or_default();
                    self.sink.borrow_mut().out(&format!(
                        "Engine {}: {endpoint}\n{}\n",
                        crate::text::escape(engine),
                        render::plan_human(plan)
                    ));
                } else {
                    let mut sink = self.sink.borrow_mut();
                    sink.out(&render::plan_human(plan));
                    sink.out("\n");
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
            Event::Started { .. } | Event::Archived { .. } | Event::DeadlineMisses { .. } => {}
        }
    }
}

fn log_time() -> String {
    crate::plan::rfc3339(crate::cli::config::now())
}

/// Plans, lists what the managed inventory leaves out (unlabeled volumes and
/// networks, unmanaged containers), and explains what `query` names; with
/// the warnings of what the plan's discovery could not learn, if any.
async fn explain(
    config: &Config,
    engine: &dyn Engine,
    goal: &Goal,
    query: &str,
) -> anyhow::Result<(Vec<crate::plan::explain::Explanation>, Option<String>)> {
    use crate::model::Kind;
    use crate::plan::explain::{explain, find, universe, Query};
    let (inventory, plan) = plan_once(engine, goal, &config.scope, config.now).await?;
    let (volumes, networks) = tokio::try_join!(
        engine.list(Kind::Volume, &[]),
        engine.list(Kind::Network, &[])
    )?;
    let mut others = inventory.unmanaged.clone();
    others.extend(volumes);
    others.extend(networks);
    let objects = universe(inventory.objects.values().cloned(), others);
    let found = find(&Query::parse(query), &objects)?;
    let state = config.state.as_ref().map(|p| p.display().to_string());
    let items = found
        .into_iter()
        .map(|o| explain(o, &plan, &config.scope, state.as_deref()))
        .collect();
    Ok((items, render::incomplete_warnings(&plan)))
}

/// Opens `--audit FILE`, if given.
fn open_audit(config: &Config) -> anyhow::Result<Option<AuditObserver>> {
    match &config.audit {
        Some(path) => Ok(Some(AuditObserver::new(Arc::new(AuditLog::open(path)?)))),
        None => Ok(None),
    }
}

/// Writes a saved plan next to its destination and renames it into place, so
/// a reader never sees half a plan: the temporary file is created `0600`,
/// never through a link (a name already taken is passed over), and a link
/// at `path` is replaced, not written through (`exec::files::replace`).
fn save(path: &Path, text: &str) -> Result<(), PlanFileError> {
    let fail = |detail: String| PlanFileError {
        path: path.to_path_buf(),
        detail,
    };
    crate::exec::files::replace(path, text.as_bytes()).map_err(|e| fail(e.to_string()))
}

/// Reports a run that failed before any engine work: the error on stderr,
/// and for commands that end in a report, in JSON mode, the report (with
/// every key) on stdout. Always exit 1.
fn fail(
    sink: &mut dyn Sink,
    format: Format,
    reports: bool,
    engine: &str,
    name: &str,
    error: &anyhow::Error,
) -> Exit {
    sink.err(&render::error(error));
    if reports && format == Format::Json {
        let report = Report::failed_before_apply(engine, name, format!("{error:#}"));
        sink.out(&render::report_json(&report));
    }
    Exit::of(Verdict {
        failed: true,
        ..Verdict::default()
    })
}

/// `validate`: every problem of every file, no engine call.
fn validate(files: &[PathBuf], format: Format, sink: &mut dyn Sink) -> Exit {
    let results: Vec<(PathBuf, Vec<crate::state::StateError>)> = files
        .iter()
        .map(|f| {
            let problems = crate::state::check_file(f).err().unwrap_or_default();
            (f.clone(), problems)
        })
        .collect();
    sink.out(&render::validation(&results, format));
    Exit::of(Verdict {
        failed: results.iter().any(|(_, p)| !p.is_empty()),
        ..Verdict::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::memory::MemoryEngine;
    use clap::Parser;

    /// Everything printed, kept.
    #[derive(Default)]
    struct Buffers {
        out: String,
        err: String,
    }

    impl Sink for Buffers {
        fn out(&mut self, text: &str) {
            self.out.push_str(text);
        }
        fn err(&mut self, text: &str) {
            self.err.push_str(text);
        }
    }

    fn engine(name: &str, boxes: &[&str]) -> Arc<MemoryEngine> {
        Arc::new(MemoryEngine::with_boxes(name, boxes))
    }

    /// `argv` (after the program name) resolved with a state file of `state`.
    fn resolved(state: &str, argv: &[&str]) -> (tempfile::TempDir, anyhow::Result<Config>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.toml");
        std::fs::write(&path, state).unwrap();
        let path = path.display().to_string();
        let mut all = vec!["sandboxctl", "--state", &path];
        all.extend_from_slice(argv);
        let args = crate::cli::Cli::try_parse_from(all)
            .unwrap()
            .into_args()
            .unwrap();
        (dir, resolve(args))
    }

    /// A config for `argv` (after the program name) with a state file of `state`.
    fn config(state: &str, argv: &[&str]) -> (tempfile::TempDir, Config) {
        let (dir, config) = resolved(state, argv);
        (dir, config.unwrap())
    }

    const FLEET: &str = "[[engine]]\nname = \"a\"\nhost = \"unix:///nonexistent-a.sock\"\n\n[[engine]]\nname = \"b\"\nhost = \"unix:///nonexistent-b.sock\"\n";

    fn unreachable(engine: &MemoryEngine) {
        engine.disconnect();
    }

    #[tokio::test]
    async fn destroy_in_a_fleet_warns_about_ids_no_engine_carries() {
        let (_dir, config) = config(FLEET, &["destroy", "x", "ghost"]);
        let engines: Vec<Arc<dyn Engine>> = vec![engine("a", &["x"]), engine("b", &["y"])];
        let mut sink = Buffers::default();
        let exit = run_on(&config, engines, CancellationToken::new(), &mut sink).await;
        assert_eq!(exit, Exit::Success, "{}{}", sink.out, sink.err);
        assert!(
            sink.err.contains("ca.sandbox.id=ghost") && !sink.err.contains("ca.sandbox.id=x "),
            "{}",
            sink.err
        );
    }

    #[tokio::test]
    async fn a_watch_cycle_is_judged_over_every_engine_and_reported_by_name() {
        let (_dir, config) = config(
            FLEET,
            &["--format", "json", "watch", "--once", "--grace", "1s"],
        );
        // The first engine is down: its part fails, the second converges,
        // and each is reported under its own name.
        let a = engine("a", &["p"]);
        unreachable(&a);
        let b = engine("b", &["q"]);
        let engines: Vec<Arc<dyn Engine>> = vec![a.clone(), b.clone()];
        let mut sink = Buffers::default();
        let exit = run_on(&config, engines, CancellationToken::new(), &mut sink).await;
        assert_eq!(exit, Exit::Failure, "{}{}", sink.out, sink.err);
        let report: serde_json::Value = serde_json::from_str(&sink.out).unwrap();
        assert_eq!(report["converged"], false);
        let summary: Vec<(String, bool)> = report["engines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["engine"].as_str().unwrap().to_string(),
                    s["converged"].as_bool().unwrap(),
                )
            })
            .collect();
        assert_eq!(summary, [("a".into(), false), ("b".into(), true)]);
        assert_eq!(report["failures"][0]["engine"], "a");
        assert!(
            b.world().containers.is_empty(),
            "the healthy engine converged"
        );
        assert_eq!(a.world().containers.len(), 1, "the failed one is untouched");
        let log: Vec<serde_json::Value> = sink
            .err
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let failed: Vec<&str> = log
            .iter()
            .filter(|l| l["event"] == "cycleFailed")
            .map(|l| l["engine"].as_str().unwrap())
            .collect();
        assert_eq!(failed, ["a"], "{}", sink.err);
    }

    #[tokio::test]
    async fn watch_once_on_one_unreachable_engine_is_a_failure() {
        let (_dir, config) = config(
            "",
            &["--format", "json", "watch", "--once", "--grace", "1s"],
        );
        let engine = engine(crate::model::DEFAULT_ENGINE, &["p"]);
        unreachable(&engine);
        let mut sink = Buffers::default();
        let exit = run_on(&config, vec![engine], CancellationToken::new(), &mut sink).await;
        assert_eq!(exit, Exit::Failure);
        let report: serde_json::Value = serde_json::from_str(&sink.out).unwrap();
        assert_eq!(report["converged"], false);
        assert_eq!(report["failures"][0]["engine"], "default");
        assert!(
            report.get("engines").is_none(),
            "one engine keeps its layout"
        );
    }

    /// The error of resolving `argv` with a state file of `state`.
    fn refused(state: &str, argv: &[&str]) -> String {
        format!("{:#}", resolved(state, argv).1.unwrap_err())
    }

    #[test]
    fn taking_a_lease_needs_one_engine_and_a_ttl_under_the_ceiling() {
        for argv in [&["lease", "b"][..], &["hold", "b", "--", "true"]] {
            let e = refused(FLEET, argv);
            assert!(
                e.contains("exactly one engine")
                    && e.contains("a, b")
                    && e.contains("--engine NAME"),
                "{e}"
            );
        }
        // Narrowed to one, and releasing on every engine: fine.
        config(FLEET, &["--engine", "a", "lease", "b"]);
        config(FLEET, &["lease", "--release", "b"]);
        let e = refused(
            "[policy]\nmax_lease = \"1h\"\n",
            &["lease", "b", "--ttl", "2h"],
        );
        assert!(
            e.contains("--ttl 2h") && e.contains("at most 1h ([policy] max_lease in "),
            "{e}"
        );
        let e = refused("", &["hold", "b", "--ttl", "25h", "--", "true"]);
        assert!(
            e.contains("at most 24h ([policy] max_lease, the default)"),
            "{e}"
        );
        for argv in [
            &["sandboxctl", "lease", "b", "--ttl", "0s"][..],
            &["sandboxctl", "lease", "b", "--ttl", "1500ms"],
            &["sandboxctl", "lease", "b/c"],
            &["sandboxctl", "hold", "b", "--ttl", "0s", "--", "true"],
        ] {
            let usage = crate::cli::Cli::try_parse_from(argv)
                .map_err(|e| e.to_string())
                .and_then(crate::cli::Cli::into_args);
            assert!(usage.is_err(), "{argv:?} is a usage error");
        }
        assert!(
            crate::cli::Cli::try_parse_from([
                "sandboxctl",
                "lease",
                "--release",
                "b",
                "--ttl",
                "1m"
            ])
            .is_err(),
            "--ttl is for taking a lease"
        );
        assert!(
            crate::cli::Cli::try_parse_from(["sandboxctl", "hold", "b"]).is_err(),
            "hold needs a command"
        );
    }

    #[tokio::test]
    async fn lease_then_release_through_the_run_path() {
        let (_dir, config) = config("", &["--format", "json", "lease", "x", "y"]);
        let engine = engine(crate::model::DEFAULT_ENGINE, &["x"]);
        let mut sink = Buffers::default();
        let exit = run_on(
            &config,
            vec![engine.clone()],
            CancellationToken::new(),
            &mut sink,
        )
        .await;
        assert_eq!(exit, Exit::Success, "{}{}", sink.out, sink.err);
        let doc: serde_json::Value = serde_json::from_str(&sink.out).unwrap();
        assert_eq!(doc["ok"], true);
        assert_eq!(doc["boxes"][1]["box"], "y");
        assert_eq!(engine.world().volumes.len(), 2);
        let (_dir, config) = self::config("", &["lease", "--release", "x", "y"]);
        let mut sink = Buffers::default();
        let exit = run_on(
            &config,
            vec![engine.clone()],
            CancellationToken::new(),
            &mut sink,
        )
        .await;
        assert_eq!(exit, Exit::Success, "{}{}", sink.out, sink.err);
        assert!(
            sink.out
                .contains("box x on engine default: released 1 lease: ca-sbx-lease-x-"),
            "{}",
            sink.out
        );
        assert!(engine.world().volumes.is_empty());
        assert_eq!(engine.world().containers.len(), 1, "only leases go");
    }

    #[tokio::test]
    async fn hold_passes_its_commands_status_through_the_run_path() {
        let (_dir, config) = config(
            "",
            &["hold", "x", "--ttl", "3s", "--", "sh", "-c", "exit 3"],
        );
        let engine = engine(crate::model::DEFAULT_ENGINE, &["x"]);
        let mut sink = Buffers::default();
        let exit = run_on(
            &config,
            vec![engine.clone()],
            CancellationToken::new(),
            &mut sink,
        )
        .await;
        assert_eq!(exit, Exit::Passed(3), "{}{}", sink.out, sink.err);
        assert_eq!(exit.code(), 3);
        assert_eq!(sink.out, "", "hold's stdout is its command's");
        assert!(
            sink.err
                .starts_with("sandboxctl hold: lease ca-sbx-lease-x-"),
            "{}",
            sink.err
        );
        assert!(engine.world().volumes.is_empty());
    }

    #[tokio::test]
    async fn a_run_whose_audit_log_cannot_be_written_fails_naming_it() {
        let (_dir, config) = config("", &["apply", "--audit", "/dev/full"]);
        let engine = engine(crate::model::DEFAULT_ENGINE, &["p"]);
        let mut sink = Buffers::default();
        let exit = run_on(
            &config,
            vec![engine.clone()],
            CancellationToken::new(),
            &mut sink,
        )
        .await;
        assert_eq!(exit, Exit::Failure, "{}{}", sink.out, sink.err);
        assert!(
            engine.world().containers.is_empty(),
            "the removal itself happened"
        );
        assert!(
            sink.err.contains("cannot write audit log /dev/full"),
            "{}",
            sink.err
        );
    }

    #[tokio::test]
    async fn an_audit_log_that_is_a_symlink_is_refused_before_any_removal() {
        let files = tempfile::tempdir().unwrap();
        let target = files.path().join("target");
        std::fs::write(&target, "keep me\n").unwrap();
        let link = files.path().join("audit.jsonl");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let (_dir, config) = config("", &["apply", "--audit", &link.display().to_string()]);
        let engine = engine(crate::model::DEFAULT_ENGINE, &["p"]);
        let mut sink = Buffers::default();
        let exit = run_on(
            &config,
            vec![engine.clone()],
            CancellationToken::new(),
            &mut sink,
        )
        .await;
        assert_eq!(exit, Exit::Failure, "{}{}", sink.out, sink.err);
        assert!(
            sink.err.contains(&format!(
                "audit log {} is a symbolic link; sandboxctl never writes through one: pass the real file's path to --audit",
                link.display()
            )),
            "{}",
            sink.err
        );
        assert_eq!(engine.world().containers.len(), 1, "nothing removed");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me\n");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    }

    #[tokio::test]
    async fn plan_out_never_writes_through_a_link_at_its_temporary_name() {
        use std::os::unix::fs::PermissionsExt as _;
        // SAFETY: a plain syscall; 022 is this test binary's usual umask.
        unsafe { libc::umask(0o022) };
        let files = tempfile::tempdir().unwrap();
        let target = files.path().join("target");
        std::fs::write(&target, "keep me\n").unwrap();
        let saved = files.path().join("plan.json");
        // The temporary name the plan was once written at, plainly.
        std::os::unix::fs::symlink(&target, files.path().join("plan.json.tmp~")).unwrap();
        let (_dir, config) = config("", &["plan", "--out", &saved.display().to_string()]);
        let engine = engine(crate::model::DEFAULT_ENGINE, &["p"]);
        let mut sink = Buffers::default();
        let exit = run_on(&config, vec![engine], CancellationToken::new(), &mut sink).await;
        assert_eq!(exit, Exit::Success, "{}{}", sink.out, sink.err);
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me\n");
        let plan: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&saved).unwrap()).unwrap();
        assert!(plan.is_object(), "{plan}");
        let mode = std::fs::metadata(&saved).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o600, "a saved plan is its user's alone");
        let mut names: Vec<String> = std::fs::read_dir(files.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["plan.json", "plan.json.tmp~", "target"],
            "no temporary file left"
        );
    }

    /// Box `b` (undeclared) with one volume and a `ca-sbx:*` image; box `k`'s
    /// volume too, when `k` opts out with `archive = false`.
    fn archive_world() -> Arc<MemoryEngine> {
        use crate::engine::memory::{box_labels, VolumeInfo, World};
        let volume = |name: &str, b: &str| VolumeInfo {
            name: name.into(),
            labels: box_labels(b),
            created_at: None,
        };
        Arc::new(MemoryEngine::new(World {
            volumes: vec![volume("vb", "b"), volume("vk", "k")],
            images: vec![crate::model::ImageInfo {
                id: "sha256:feed".into(),
                tags: vec!["ca-sbx:r-1".into()],
            }],
            ..World::default()
        }))
    }

    #[tokio::test]
    async fn apply_archive_reports_archived_and_the_file_policy_opts_out() {
        let dir = tempfile::tempdir().unwrap();
        let to = dir.path().display().to_string();
        // [policy] archive in the file; box k opts out (its expiry passed).
        let state = format!(
            "[policy]\narchive = {to:?}\n\n[[box]]\nid = \"k\"\nexpires = \"2000-01-01T00:00:00Z\"\narchive = false\n"
        );
        let (_d, config) = config(&state, &["--format", "json", "apply"]);
        let engine = archive_world();
        let mut sink = Buffers::default();
        let exit = run_on(
            &config,
            vec![engine.clone()],
            CancellationToken::new(),
            &mut sink,
        )
        .await;
        assert_eq!(exit, Exit::Success, "{}{}", sink.out, sink.err);
        let doc: serde_json::Value = serde_json::from_str(&sink.out).unwrap();
        let archived = doc["archived"].as_array().unwrap();
        assert_eq!(archived.len(), 1, "{doc}");
        assert_eq!(archived[0]["volume"], "vb");
        assert!(archived[0]["path"].as_str().unwrap().starts_with(&to));
        assert!(engine.world().volumes.is_empty());
    }

    #[tokio::test]
    async fn apply_archive_without_an_image_exits_1_naming_archive_failed() {
        use crate::engine::memory::{box_labels, VolumeInfo, World};
        let dir = tempfile::tempdir().unwrap();
        let to = dir.path().display().to_string();
        let (_d, config) = config("", &["--format", "json", "apply", "--archive", &to]);
        let engine = Arc::new(MemoryEngine::new(World {
            volumes: vec![VolumeInfo {
                name: "vb".into(),
                labels: box_labels("b"),
                created_at: None,
            }],
            ..World::default()
        }));
        let mut sink = Buffers::default();
        let exit = run_on(
            &config,
            vec![engine.clone()],
            CancellationToken::new(),
            &mut sink,
        )
        .await;
        assert_eq!(exit, Exit::Failure, "{}{}", sink.out, sink.err);
        let doc: serde_json::Value = serde_json::from_str(&sink.out).unwrap();
        assert_eq!(
            doc["remainingVolumes"][0]["reason"]["code"], "archiveFailed",
            "{doc}"
        );
        assert_eq!(engine.world().volumes.len(), 1);
    }

    #[tokio::test]
    async fn plan_shows_the_archive_folder() {
        let (_d, config) = config("[policy]\narchive = \"/srv/a\"\n", &["plan"]);
        let engine = archive_world();
        let mut sink = Buffers::default();
        run_on(&config, vec![engine], CancellationToken::new(), &mut sink).await;
        assert!(
            sink.out.contains("archive to /srv/a, then remove"),
            "{}",
            sink.out
        );
    }

    #[tokio::test]
    async fn restore_brings_it_back_and_says_what_to_declare() {
        let dir = tempfile::tempdir().unwrap();
        let to = dir.path().display().to_string();
        let (_d, apply) = config("", &["--format", "json", "apply", "--archive", &to]);
        let engine = archive_world();
        let mut sink = Buffers::default();
        run_on(
            &apply,
            vec![engine.clone()],
            CancellationToken::new(),
            &mut sink,
        )
        .await;
        let doc: serde_json::Value = serde_json::from_str(&sink.out).unwrap();
        let archived = doc["archived"].as_array().unwrap();
        let vb = archived.iter().find(|a| a["volume"] == "vb").unwrap();
        let path = vb["path"].as_str().unwrap().to_string();
        let (_e, restore) = config("", &["restore", &path]);
        let mut sink = Buffers::default();
        let exit = run_on(
            &restore,
            vec![engine.clone()],
            CancellationToken::new(),
            &mut sink,
        )
        .await;
        assert_eq!(exit, Exit::Success, "{}{}", sink.out, sink.err);
        assert!(sink.out.contains("restored volume vb"), "{}", sink.out);
        assert!(sink.out.contains("keep = [\"vb\"]"), "{}", sink.out);
        assert!(sink.out.contains("id = \"b\""), "{}", sink.out);
        assert_eq!(engine.world().volumes.len(), 1);
        // Again: the volume exists, exit 1, said on stderr.
        let mut sink = Buffers::default();
        let exit = run_on(
            &restore,
            vec![engine.clone()],
            CancellationToken::new(),
            &mut sink,
        )
        .await;
        assert_eq!(exit, Exit::Failure);
        assert!(sink.err.contains("volume vb exists"), "{}", sink.err);
    }
}
