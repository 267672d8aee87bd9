//! One command, start to end: resolved config -> engine -> plan / reconcile /
//! inventory -> render, and the exit status it earns.
//!
//! Owns choosing the engine for a run, saved-plan files, Ctrl-C, and what is
//! printed when. The work itself is `reconcile`'s; the words are `render`'s.
//! `run_with` takes the engine as an argument, so every path (stale plans,
//! failed listings, JSON on failure) is testable with the in-memory engine.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::cli::config::{resolve, Config, Job};
use crate::cli::Args;
use crate::engine::docker::DockerEngine;
use crate::engine::Engine;
use crate::exec::apply::{ApplyOptions, Observer};
use crate::exec::reconcile::{
    plan_once, reconcile_once, reconcile_saved, Early, ReconcileObserver,
};
use crate::exec::verify::Report;
use crate::observe::audit::{AuditLog, Recorder};
use crate::observe::metrics::Metrics;
use crate::plan::inventory::Inventory;
use crate::plan::{Goal, Plan};
use crate::render::{self, Format, Progress};
use std::time::SystemTime;

/// How a command ended; `main` maps it to the process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: converged, or nothing to do.
    Success,
    /// 1: something failed; the output says what.
    Failure,
    /// 2: `plan --detailed-exitcode` with changes pending.
    Pending,
    /// 130: interrupted by Ctrl-C (after verifying and reporting).
    Interrupted,
}

impl Exit {
    pub fn code(self) -> i32 {
        match self {
            Exit::Success => 0,
            Exit::Failure => 1,
            Exit::Pending => 2,
            Exit::Interrupted => 130,
        }
    }
}

/// A saved plan could not be read, parsed, written or used.
#[derive(Debug, thiserror::Error)]
#[error("plan file {}: {detail}", path.display())]
pub struct PlanFileError {
    pub path: PathBuf,
    pub detail: String,
}

/// Where text goes: the process's stdout and stderr, or buffers (tests).
pub trait Sink {
    fn out(&mut self, text: &str);
    fn err(&mut self, text: &str);
}

/// The process's own stdout and stderr.
pub struct Terminal;

impl Sink for Terminal {
    fn out(&mut self, text: &str) {
        render::stdout(text);
    }
    fn err(&mut self, text: &str) {
        render::stderr(text);
    }
}

/// Everything printed, kept (for tests).
#[derive(Debug, Default)]
pub struct Captured {
    pub stdout: String,
    pub stderr: String,
}

impl Sink for Captured {
    fn out(&mut self, text: &str) {
        self.stdout.push_str(text);
    }
    fn err(&mut self, text: &str) {
        self.stderr.push_str(text);
    }
}

/// Runs one validated command against the engine `DOCKER_HOST` names.
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
    let mut sink = Terminal;
    let config = match resolve(args) {
        Ok(config) => config,
        Err(e) => {
            return fail(
                &mut sink,
                format,
                reports,
                crate::model::DEFAULT_ENGINE,
                "state file",
                &e,
            );
        }
    };
    if !config.fleet.is_empty() {
        return run_fleet(&config, &mut sink).await;
    }
    if let Job::Watch { .. } = &config.job {
        // Reached lazily: an engine that is down at the start, or goes away
        // later, costs failed cycles, never the watch.
        let engine = crate::engine::lazy::LazyEngine::new(
            crate::model::DEFAULT_ENGINE,
            config.endpoint.clone(),
            config.timeout,
        );
        return run_watch(&config, vec![Arc::new(engine)], &mut sink).await;
    }
    let engine = match DockerEngine::connect(
        &config.endpoint,
        crate::model::DEFAULT_ENGINE,
        config.timeout,
    )
    .await
    {
        Ok(engine) => engine,
        Err(e) => {
            let endpoint = match &e.kind {
                crate::engine::ErrorKind::Unreachable { endpoint, .. } => endpoint.clone(),
                _ => "engine".into(),
            };
            let reports = config.reports();
            return fail(
                &mut sink,
                config.format,
                reports,
                crate::model::DEFAULT_ENGINE,
                &endpoint,
                &e.into(),
            );
        }
    };
    let (cancel, watcher) = cancel_on_ctrl_c();
    let exit = run_with(&config, &engine, &cancel, &mut sink).await;
    watcher.abort();
    exit
}

/// Runs `config` against `engine`, printing to `sink`. `cancel` stops new removals.
pub async fn run_with(
    config: &Config,
    engine: &dyn Engine,
    cancel: &AtomicBool,
    sink: &mut dyn Sink,
) -> Exit {
    let fail_here = |sink: &mut dyn Sink, e: &anyhow::Error| {
        fail(
            sink,
            config.format,
            config.reports(),
            engine.name(),
            engine.endpoint(),
            e,
        )
    };
    match &config.job {
        Job::Watch { .. } => fail_here(
            sink,
            &anyhow::anyhow!("watch needs an engine it can share: use `run_watch`"),
        ),
        Job::Inventory => match Inventory::list(engine, &config.scope).await {
            Ok(inventory) => {
                if let Some(w) = render::rejected_warning(&inventory) {
                    sink.err(&w);
                }
                sink.out(&render::inventory(&inventory, config.format));
                Exit::Success
            }
            Err(e) => fail_here(sink, &e.into()),
        },
        Job::Plan {
            goal,
            detailed,
            out,
        } => {
            let plan = match plan_once(engine, goal, &config.scope, config.now).await {
                Ok((inventory, plan)) => {
                    if let Some(w) = render::rejected_warning(&inventory) {
                        sink.err(&w);
                    }
                    plan
                }
                Err(e) => return fail_here(sink, &e.into()),
            };
            if let Some(path) = out {
                if let Err(e) = save(path, &render::plan_json(&plan)) {
                    return fail_here(sink, &e.into());
                }
            }
            if config.format == Format::Human {
                sink.out(&format!("Engine: {}\n", config.endpoint));
            }
            sink.out(&render::plan(&plan, config.format));
            match (detailed, plan.is_empty()) {
                (true, false) => Exit::Pending,
                _ => Exit::Success,
            }
        }
        Job::Graph { goal } => {
            let plan = match plan_once(engine, goal, &config.scope, config.now).await {
                Ok((_, plan)) => plan,
                Err(e) => return fail_here(sink, &e.into()),
            };
            sink.out(&render::graph(&plan, config.format));
            Exit::Success
        }
        Job::Explain { goal, query } => match explain(config, engine, goal, query).await {
            Ok(items) => {
                sink.out(&render::explain(&items, config.format));
                Exit::Success
            }
            Err(e) => fail_here(sink, &e),
        },
        Job::Converge { goal, named } => {
            let options = options(config);
            let audit = match open_audit(config) {
                Ok(audit) => audit,
                Err(e) => return fail_here(sink, &e),
            };
            let mut observer = Printing::new(config.format, goal, named, &config.scope, sink);
            observer.steps = Steps::new(audit, None);
            let result = reconcile_once(
                engine,
                goal,
                &config.scope,
                config.now,
                &options,
                cancel,
                &mut observer,
            )
            .await;
            let audit_failed = observer.audit_failed;
            audited(finish(config, engine, result, sink, None), audit_failed)
        }
        Job::ApplySaved { path } => {
            let saved = match read_plan(path) {
                Ok(plan) => plan,
                Err(e) => {
                    return fail(
                        sink,
                        config.format,
                        true,
                        engine.name(),
                        "plan file",
                        &e.into(),
                    )
                }
            };
            let options = options(config);
            let scope = saved.scope();
            let audit = match open_audit(config) {
                Ok(audit) => audit,
                Err(e) => return fail_here(sink, &e),
            };
            let mut observer = Printing::new(config.format, &saved.goal, &[], &scope, sink);
            observer.print_plan = false;
            observer.steps = Steps::new(audit, None);
            let result = reconcile_saved(engine, &saved, &options, cancel, &mut observer).await;
            let audit_failed = observer.audit_failed;
            audited(
                finish(config, engine, result, sink, Some(path)),
                audit_failed,
            )
        }
    }
}

/// Plans, lists what the managed inventory leaves out (unlabeled volumes and
/// networks, unmanaged containers), and explains what `query` names.
async fn explain(
    config: &Config,
    engine: &dyn Engine,
    goal: &Goal,
    query: &str,
) -> anyhow::Result<Vec<crate::plan::explain::Explanation>> {
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
    Ok(found
        .into_iter()
        .map(|o| explain(o, &plan, &config.scope, state.as_deref()))
        .collect())
}

/// Opens `--audit FILE`, if given.
fn open_audit(config: &Config) -> anyhow::Result<Option<Arc<AuditLog>>> {
    match &config.audit {
        Some(path) => Ok(Some(Arc::new(AuditLog::open(path)?))),
        None => Ok(None),
    }
}

/// A run whose audit log could not be written did not fully succeed.
fn audited(exit: Exit, audit_failed: bool) -> Exit {
    if audit_failed && exit == Exit::Success {
        Exit::Failure
    } else {
        exit
    }
}

/// A cancel flag that the first Ctrl-C sets (no new removal starts; those in
/// flight finish, then verify); a second Ctrl-C quits at once. Abort the task
/// when the run is over.
fn cancel_on_ctrl_c() -> (Arc<AtomicBool>, tokio::task::JoinHandle<()>) {
    let cancel = Arc::new(AtomicBool::new(false));
    let watcher = tokio::spawn({
        let cancel = cancel.clone();
        async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                cancel.store(true, Ordering::SeqCst);
                render::stderr("interrupted: finishing removals in flight, then verifying (Ctrl-C again to quit at once)\n");
                if tokio::signal::ctrl_c().await.is_ok() {
                    std::process::exit(Exit::Interrupted.code());
                }
            }
        }
    });
    (cancel, watcher)
}

fn options(config: &Config) -> ApplyOptions {
    ApplyOptions {
        parallelism: config.parallelism,
        ..ApplyOptions::default()
    }
}

/// Prints the report of a reconcile and picks the exit status.
fn finish(
    config: &Config,
    engine: &dyn Engine,
    result: Result<Report, Early>,
    sink: &mut dyn Sink,
    saved: Option<&Path>,
) -> Exit {
    let report = match result {
        Ok(report) => report,
        Err(e) => {
            let err: anyhow::Error = match (saved, &e) {
                (Some(path), Early::Stale { .. } | Early::Edited) => PlanFileError {
                    path: path.to_path_buf(),
                    detail: format!(
                        "{e}. Make a new plan with `sandboxctl plan --out {}`",
                        path.display()
                    ),
                }
                .into(),
                _ => e.into(),
            };
            let name = if saved.is_some() && err.is::<PlanFileError>() {
                "plan file"
            } else {
                engine.endpoint()
            };
            return fail(sink, config.format, true, engine.name(), name, &err);
        }
    };
    sink.out(&render::report(&report, config.format));
    if report.interrupted {
        Exit::Interrupted
    } else if report.converged {
        Exit::Success
    } else {
        Exit::Failure
    }
}

/// What happens to every step: progress, the audit log, metrics.
pub struct Steps {
    pub progress: Progress,
    pub recorder: Option<Recorder>,
    pub metrics: Option<Arc<Metrics>>,
}

impl Steps {
    fn new(audit: Option<Arc<AuditLog>>, metrics: Option<Arc<Metrics>>) -> Self {
        Steps {
            progress: Progress::Quiet,
            recorder: audit.map(|log| Recorder::new(log, SystemTime::now)),
            metrics,
        }
    }

    /// The first audit write failure since the last call, if any.
    fn audit_error(&mut self) -> Option<String> {
        self.recorder
            .as_mut()
            .and_then(|r| r.error.take())
            .map(|e| e.to_string())
    }
}

impl Observer for Steps {
    fn started(&mut self, step: &crate::plan::Step) {
        self.progress.started(step);
    }
    fn finished(&mut self, step: &crate::plan::Step, outcome: &crate::exec::apply::Outcome) {
        self.progress.finished(step, outcome);
        if let Some(r) = &mut self.recorder {
            r.finished(step, outcome);
        }
        if let Some(m) = &self.metrics {
            m.add_removal(step.object.kind, outcome);
        }
    }
}

/// What a converge prints as it goes: the plan (human format) before any
/// removal, warnings for `destroy` IDs nothing carries, and progress.
struct Printing<'a> {
    format: Format,
    goal: &'a Goal,
    named: &'a [String],
    scope: &'a crate::model::Scope,
    sink: &'a mut dyn Sink,
    print_plan: bool,
    steps: Steps,
    audit_failed: bool,
}

impl<'a> Printing<'a> {
    fn new(
        format: Format,
        goal: &'a Goal,
        named: &'a [String],
        scope: &'a crate::model::Scope,
        sink: &'a mut dyn Sink,
    ) -> Self {
        Printing {
            format,
            goal,
            named,
            scope,
            sink,
            print_plan: true,
            steps: Steps::new(None, None),
            audit_failed: false,
        }
    }
}

impl ReconcileObserver for Printing<'_> {
    fn planned(&mut self, inventory: &Inventory, plan: &Plan) {
        if let Some(w) = render::rejected_warning(inventory) {
            self.sink.err(&w);
        }
        if matches!(self.goal, Goal::Destroy { .. }) {
            let present = inventory.box_ids();
            for id in self
                .named
                .iter()
                .filter(|id| !present.contains(id.as_str()))
            {
                self.sink.err(&format!(
                    "warning: no managed container, volume or network carries ca.sandbox.id={} (in scope {})\n",
                    crate::render::text::escape(id),
                    self.scope
                ));
            }
        }
        if self.format == Format::Human && self.print_plan {
            self.sink.out(&render::plan_human(plan));
            self.sink.out("\n");
        }
        if let Some(r) = &mut self.steps.recorder {
            r.know(inventory);
        }
        self.steps.progress = Progress::new(self.format, plan.steps.len());
    }

    fn steps(&mut self) -> &mut dyn Observer {
        &mut self.steps
    }

    fn applied(&mut self) {
        self.steps.progress.finish();
        if let Some(e) = self.steps.audit_error() {
            self.audit_failed = true;
            self.sink
                .err(&format!("error: {}\n", crate::render::text::escape(&e)));
        }
    }
}

fn read_plan(path: &Path) -> Result<Plan, PlanFileError> {
    let fail = |detail: String| PlanFileError {
        path: path.to_path_buf(),
        detail,
    };
    let text = std::fs::read_to_string(path).map_err(|e| {
        fail(format!(
            "cannot read it: {e}; check the path, or save a plan there with `sandboxctl plan --out {}`",
            path.display()
        ))
    })?;
    let plan: Plan = serde_json::from_str(&text).map_err(|e| {
        if serde_json::from_str::<crate::exec::fleet::FleetPlan>(&text).is_ok() {
            return fail(
                "it is a fleet plan (one part per engine): apply it with the state file that names those engines ([[engine]] tables, --state PATH)".into(),
            );
        }
        fail(format!(
            "not a sandboxctl plan ({e}); make a new one with `sandboxctl plan --out {}`",
            path.display()
        ))
    })?;
    plan.validate().map_err(fail)?;
    Ok(plan)
}

/// Reports a run that failed before anything was removed: the error on
/// stderr, and for commands that end in a report, in JSON mode, the report
/// (with every key) on stdout. Always exit 1.
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
    Exit::Failure
}

/// Runs `watch`: cycles until SIGTERM (exit 0) or Ctrl-C (exit 130), logging
/// each cycle that did something, serving metrics, writing the audit log.
/// `--once` runs one cycle and exits like `apply`.
pub async fn run_watch(
    config: &Config,
    engines: Vec<Arc<dyn Engine>>,
    sink: &mut dyn Sink,
) -> Exit {
    use crate::watch::{watch, Desired, WatchOptions};
    let Job::Watch {
        goal,
        once,
        debounce,
        resync,
        metrics: metrics_addr,
        cli_scope,
        grace,
    } = &config.job
    else {
        unreachable!("run_watch runs watch jobs")
    };
    let fail_here = |sink: &mut dyn Sink, e: &anyhow::Error| {
        fail(
            sink,
            config.format,
            true,
            engines[0].name(),
            engines[0].endpoint(),
            e,
        )
    };
    let audit = match open_audit(config) {
        Ok(audit) => audit,
        Err(e) => return fail_here(sink, &e),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let interrupted = Arc::new(AtomicBool::new(false));
    let (shutdown_tx, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
    let metrics = Arc::new(Metrics::new());
    let mut server = None;
    let mut bound_addr = None;
    if let Some(addr) = metrics_addr {
        let shutdown = async move {
            let _ = shutdown_rx.await;
        };
        match crate::observe::metrics::serve(*addr, metrics.clone(), *resync, shutdown).await {
            Ok((bound, handle)) => {
                server = Some(handle);
                bound_addr = Some(bound);
            }
            Err(e) => return fail_here(sink, &e.into()),
        }
    }
    let names: Vec<(String, String)> = engines
        .iter()
        .map(|e| (e.name().to_string(), e.endpoint().to_string()))
        .collect();
    sink.err(&render::watch_started(
        config.format,
        &log_time(),
        &names,
        *grace,
        bound_addr,
    ));
    let format = config.format;
    let signals = tokio::spawn({
        let stop = stop.clone();
        let interrupted = interrupted.clone();
        async move {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(term) => term,
                    Err(_) => return,
                };
            let signal = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = tokio::signal::ctrl_c() => {
                    interrupted.store(true, Ordering::SeqCst);
                    "SIGINT"
                }
            };
            stop.store(true, Ordering::SeqCst);
            render::stderr(&render::watch_stopping(format, &log_time(), signal));
        }
    });
    let state_path = config
        .state
        .clone()
        .unwrap_or_else(|| PathBuf::from(crate::state::DEFAULT_STATE_PATH));
    let mut state = crate::cli::config::StateFile::new(state_path, cli_scope.clone(), *grace);
    let options = WatchOptions {
        debounce: *debounce,
        resync: *resync,
        apply: options(config),
        ..WatchOptions::default()
    };
    let mut observer = Watching {
        format: config.format,
        sink,
        metrics: metrics.clone(),
        steps: Steps::new(audit, Some(metrics.clone())),
        audit_failed: false,
    };
    let watched = watch(
        engines.clone(),
        Desired {
            goal: goal.clone(),
            scope: config.scope.clone(),
        },
        &mut state,
        &options,
        *once,
        stop.clone(),
        &crate::cli::config::now,
        &mut observer,
    )
    .await;
    signals.abort();
    let _ = shutdown_tx.send(());
    if let Some(handle) = server {
        let _ = handle.await;
    }
    let report = match watched.reports.len() {
        1 => watched
            .reports
            .into_iter()
            .next()
            .unwrap_or_else(Report::empty),
        _ => {
            let parts: Vec<(&dyn Engine, Result<Report, Early>)> = engines
                .iter()
                .zip(watched.reports)
                .map(|(e, r)| (e.as_ref(), Ok(r)))
                .collect();
            crate::exec::fleet::merge(parts).report
        }
    };
    observer.sink.out(&render::report(&report, config.format));
    if interrupted.load(Ordering::SeqCst) {
        return Exit::Interrupted;
    }
    if stop.load(Ordering::SeqCst) {
        return Exit::Success;
    }
    audited(
        if report.converged {
            Exit::Success
        } else {
            Exit::Failure
        },
        observer.audit_failed,
    )
}

/// Watch's observer: log lines to stderr, metrics, the audit log.
struct Watching<'a> {
    format: Format,
    sink: &'a mut dyn Sink,
    metrics: Arc<Metrics>,
    steps: Steps,
    audit_failed: bool,
}

fn log_time() -> String {
    crate::plan::rfc3339(crate::cli::config::now())
}

impl ReconcileObserver for Watching<'_> {
    fn planned(&mut self, inventory: &Inventory, _plan: &Plan) {
        if let Some(r) = &mut self.steps.recorder {
            r.know(inventory);
        }
        for kind in crate::model::Kind::ALL {
            self.metrics.set_managed(
                &inventory.engine,
                kind,
                inventory.of_kind(kind).count() as u64,
            );
        }
    }

    fn steps(&mut self) -> &mut dyn Observer {
        &mut self.steps
    }

    fn applied(&mut self) {
        if let Some(e) = self.steps.audit_error() {
            self.audit_failed = true;
            self.sink
                .err(&render::watch_audit_error(self.format, &log_time(), &e));
        }
    }
}

impl crate::watch::WatchObserver for Watching<'_> {
    fn reconcile(&mut self) -> &mut dyn ReconcileObserver {
        self
    }

    fn cycle(
        &mut self,
        engine: &str,
        trigger: crate::watch::Trigger,
        took: std::time::Duration,
        result: &Result<Report, Early>,
    ) {
        let converged = matches!(result, Ok(r) if r.converged);
        self.metrics
            .record_cycle(took, converged, std::time::Instant::now());
        let failures = match result {
            Ok(r) => r.failures.len(),
            Err(_) => 1,
        };
        for _ in 0..failures {
            self.metrics.add_failure(engine);
        }
        if let Some(line) = render::watch_cycle(
            self.format,
            &log_time(),
            engine,
            trigger.as_str(),
            took,
            result,
        ) {
            self.sink.err(&line);
        }
    }

    fn stream(&mut self, engine: &str, error: Option<&crate::engine::EngineError>) {
        if error.is_none() {
            self.metrics.add_reconnect(engine);
        }
        let text = error.map(ToString::to_string);
        self.sink.err(&render::watch_stream(
            self.format,
            &log_time(),
            engine,
            text.as_deref(),
        ));
    }

    fn state(&mut self, broken: Option<&str>) {
        self.sink
            .err(&render::watch_state(self.format, &log_time(), broken));
    }
}

/// Runs a job over the fleet the state file names: every engine at once,
/// each reached lazily (one that is down fails its part alone).
async fn run_fleet(config: &Config, sink: &mut dyn Sink) -> Exit {
    use crate::engine::lazy::LazyEngine;
    use crate::exec::fleet::{plan_all, reconcile_all, reconcile_saved_all, FleetPlan};
    let engines: Vec<Arc<dyn Engine>> = config
        .fleet
        .iter()
        .map(|t| {
            Arc::new(LazyEngine::new(&t.name, t.endpoint.clone(), config.timeout))
                as Arc<dyn Engine>
        })
        .collect();
    let endpoints: Vec<(String, String)> = config
        .fleet
        .iter()
        .map(|t| (t.name.clone(), t.endpoint.to_string()))
        .collect();
    let fail_here = |sink: &mut dyn Sink, e: &anyhow::Error| {
        fail(sink, config.format, config.reports(), "fleet", "fleet", e)
    };
    let budget = Arc::new(tokio::sync::Semaphore::new(config.parallelism));
    let options = ApplyOptions {
        parallelism: config.engine_parallelism,
        budget: Some(budget),
        ..ApplyOptions::default()
    };
    if let Job::Watch { .. } = &config.job {
        return run_watch(config, engines, sink).await;
    }
    let (cancel, ctrl_c) = cancel_on_ctrl_c();
    let exit = match &config.job {
        Job::Watch { .. } => unreachable!("handled above"),
        Job::Plan {
            goal,
            detailed,
            out,
        } => {
            let (fleet, inventories) = plan_all(&engines, goal, &config.scope, config.now).await;
            for inventory in &inventories {
                if let Some(w) = render::rejected_warning(inventory) {
                    sink.err(&w);
                }
            }
            if let Some(path) = out {
                if let Err(e) = save(path, &render::fleet_plan(&fleet, &endpoints, Format::Json)) {
                    return fail_here(sink, &e.into());
                }
            }
            sink.out(&render::fleet_plan(&fleet, &endpoints, config.format));
            if !fleet.failures.is_empty() {
                Exit::Failure
            } else if *detailed && !fleet.is_empty() {
                Exit::Pending
            } else {
                Exit::Success
            }
        }
        Job::Converge { goal, .. } => {
            let audit = match open_audit(config) {
                Ok(audit) => audit,
                Err(e) => return fail_here(sink, &e),
            };
            let shared = FleetPrinting::new(config.format, sink, &endpoints, audit);
            let report = reconcile_all(
                &engines,
                goal,
                &config.scope,
                config.now,
                &options,
                &cancel,
                &shared,
            )
            .await;
            shared.finish(report)
        }
        Job::ApplySaved { path } => {
            let text = match std::fs::read_to_string(path) {
                Ok(text) => text,
                Err(e) => {
                    return fail_here(
                        sink,
                        &PlanFileError {
                            path: path.clone(),
                            detail: format!(
                                "cannot read it: {e}; check the path, or save a plan there with `sandboxctl plan --out {}`",
                                path.display()
                            ),
                        }
                        .into(),
                    )
                }
            };
            let saved: FleetPlan = match serde_json::from_str::<FleetPlan>(&text)
                .map_err(|e| e.to_string())
                .and_then(|p| p.validate().map(|()| p))
            {
                Ok(p) => p,
                Err(detail) => {
                    return fail_here(
                        sink,
                        &PlanFileError {
                            path: path.clone(),
                            detail: format!("not a sandboxctl fleet plan: {detail}; make one with `sandboxctl plan --out`"),
                        }
                        .into(),
                    )
                }
            };
            let audit = match open_audit(config) {
                Ok(audit) => audit,
                Err(e) => return fail_here(sink, &e),
            };
            let shared = FleetPrinting::new(config.format, sink, &endpoints, audit);
            let report = reconcile_saved_all(&engines, &saved, &options, &cancel, &shared).await;
            shared.finish(report)
        }
        Job::Inventory => {
            let parts = futures_util::future::join_all(engines.iter().map(|e| async move {
                (
                    e.name().to_string(),
                    Inventory::list(e.as_ref(), &config.scope)
                        .await
                        .map_err(|err| err.to_string()),
                )
            }))
            .await;
            let failed = parts.iter().any(|(_, r)| r.is_err());
            for (_, inventory) in &parts {
                if let Some(w) = inventory.as_ref().ok().and_then(render::rejected_warning) {
                    sink.err(&w);
                }
            }
            sink.out(&render::fleet_inventory(&parts, config.format));
            if failed {
                Exit::Failure
            } else {
                Exit::Success
            }
        }
        Job::Explain { .. } | Job::Graph { .. } => {
            // Per engine, one after the other: explain and graph name one plan each.
            let mut exit = Exit::Success;
            for engine in &engines {
                if run_with(config, engine.as_ref(), &cancel, sink).await != Exit::Success {
                    exit = Exit::Failure;
                }
            }
            exit
        }
    };
    ctrl_c.abort();
    exit
}

/// Writes a saved plan next to its destination and renames it into place, so
/// a reader never sees half a plan.
fn save(path: &Path, text: &str) -> Result<(), PlanFileError> {
    let fail = |detail: String| PlanFileError {
        path: path.to_path_buf(),
        detail,
    };
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp~");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text).map_err(|e| fail(e.to_string()))?;
    std::fs::rename(&tmp, path).map_err(|e| fail(e.to_string()))
}

/// What a fleet converge prints: each engine's plan as it is made (human
/// format), one line per finished step, the audit log; then the fleet report.
struct FleetPrinting<'a> {
    format: Format,
    sink: RefCell<&'a mut dyn Sink>,
    endpoints: &'a [(String, String)],
    audit: Option<Arc<AuditLog>>,
    audit_failed: std::cell::Cell<bool>,
}

impl<'a> FleetPrinting<'a> {
    fn new(
        format: Format,
        sink: &'a mut dyn Sink,
        endpoints: &'a [(String, String)],
        audit: Option<Arc<AuditLog>>,
    ) -> Self {
        FleetPrinting {
            format,
            sink: RefCell::new(sink),
            endpoints,
            audit,
            audit_failed: std::cell::Cell::new(false),
        }
    }

    fn finish(self, report: crate::exec::fleet::FleetReport) -> Exit {
        self.sink
            .borrow_mut()
            .out(&render::fleet_report(&report, self.format));
        let exit = if report.report.interrupted {
            Exit::Interrupted
        } else if report.report.converged {
            Exit::Success
        } else {
            Exit::Failure
        };
        audited(exit, self.audit_failed.get())
    }
}

impl crate::exec::fleet::FleetObserver for FleetPrinting<'_> {
    fn for_engine(&self, engine: &str) -> Box<dyn ReconcileObserver + '_> {
        let mut steps = Steps::new(self.audit.clone(), None);
        if self.format == Format::Human {
            steps.progress = Progress::Lines;
        }
        Box::new(EnginePrinting {
            shared: self,
            engine: engine.to_string(),
            steps,
        })
    }
}

struct EnginePrinting<'s, 'a> {
    shared: &'s FleetPrinting<'a>,
    engine: String,
    steps: Steps,
}

impl ReconcileObserver for EnginePrinting<'_, '_> {
    fn planned(&mut self, inventory: &Inventory, plan: &Plan) {
        if let Some(r) = &mut self.steps.recorder {
            r.know(inventory);
        }
        if let Some(w) = render::rejected_warning(inventory) {
            self.shared.sink.borrow_mut().err(&w);
        }
        if self.shared.format == Format::Human {
            let endpoint = self
                .shared
                .endpoints
                .iter()
                .find(|(n, _)| *n == self.engine)
                .map(|(_, e)| e.as_str())
                .unwrap_or_default();
            self.shared.sink.borrow_mut().out(&format!(
                "Engine {}: {endpoint}\n{}\n",
                crate::render::text::escape(&self.engine),
                render::plan_human(plan)
            ));
        }
    }

    fn steps(&mut self) -> &mut dyn Observer {
        &mut self.steps
    }

    fn applied(&mut self) {
        if let Some(e) = self.steps.audit_error() {
            self.shared.audit_failed.set(true);
            self.shared
                .sink
                .borrow_mut()
                .err(&format!("error: {}\n", crate::render::text::escape(&e)));
        }
    }
}

/// `validate`: every problem of every file, no engine call.
pub fn validate(files: &[PathBuf], format: Format, sink: &mut dyn Sink) -> Exit {
    let results: Vec<(PathBuf, Vec<crate::state::StateError>)> = files
        .iter()
        .map(|f| {
            let problems = crate::state::check_file(f).err().unwrap_or_default();
            (f.clone(), problems)
        })
        .collect();
    sink.out(&render::validation(&results, format));
    if results.iter().all(|(_, p)| p.is_empty()) {
        Exit::Success
    } else {
        Exit::Failure
    }
}
