//! One command, start to end: desired state -> inventory -> plan -> apply ->
//! verify -> render, and the exit status it earns.
//!
//! Owns the order of the stages, saved-plan files, the staleness check and
//! Ctrl-C. Each stage's work lives in its own module; this file only wires
//! them. Must not format output itself (that is `render`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::apply::{apply, ApplyOptions};
use crate::cli::{Command, Config};
use crate::desired::{DesiredState, DEFAULT_STATE_PATH};
use crate::engine::docker::DockerEngine;
use crate::engine::{Engine, EngineError};
use crate::inventory::Inventory;
use crate::model::{Labels, Scope};
use crate::plan::{Goal, Plan};
use crate::render::{self, Format, Progress};
use crate::verify::{verify, Report};

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

/// Errors of a run that are not the engine's or the state file's own.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// `plan` and `apply` need a state file and none was found at the default path.
    #[error("no state file at {DEFAULT_STATE_PATH}; pass --state PATH (or set SANDBOXCTL_STATE), or use `destroy --prune` to reclaim every leaked object")]
    NoStateFile,
    /// The same scope label has different values in the file and on the command line.
    #[error("scope label {key} is {file:?} in {} but {cli:?} on the command line; make them agree", path.display())]
    ScopeConflict {
        key: String,
        file: String,
        cli: String,
        path: PathBuf,
    },
    /// A saved plan could not be read, parsed or written.
    #[error("plan file {}: {detail}", path.display())]
    PlanFile { path: PathBuf, detail: String },
    /// The managed inventory changed since the saved plan was made; nothing was touched.
    #[error("plan file {} is stale: the managed inventory changed since it was made ({changes}); nothing was removed. Make a new plan with `sandboxctl plan --out {}`", path.display(), path.display())]
    StalePlan { path: PathBuf, changes: String },
}

/// Runs one validated command.
pub async fn run(config: Config) -> anyhow::Result<Exit> {
    match config.command.clone() {
        Command::Plan {
            detailed_exitcode,
            out,
        } => plan(&config, detailed_exitcode, out.as_deref()).await,
        Command::Apply {
            plan: Some(file),
            parallelism,
        } => apply_saved(&config, &file, parallelism).await,
        Command::Apply {
            plan: None,
            parallelism,
        } => {
            let (desired, scope) = match desired_and_scope(&config, true) {
                Ok(loaded) => loaded,
                Err(e) => return Ok(fail_early(&config, "state file", e)),
            };
            converge(&config, &scope, &reconcile(&desired), parallelism).await
        }
        Command::Destroy {
            ids,
            keep_volume,
            parallelism,
            ..
        } => {
            let (desired, scope) = match desired_and_scope(&config, false) {
                Ok(loaded) => loaded,
                Err(e) => return Ok(fail_early(&config, "state file", e)),
            };
            let goal = if ids.is_empty() {
                reconcile(&desired)
            } else {
                Goal::Destroy {
                    ids: ids.into_iter().collect(),
                    keep_volume,
                    keep_volumes: desired.keep_volumes.clone(),
                }
            };
            converge(&config, &scope, &goal, parallelism).await
        }
        Command::Inventory => {
            let (_, scope) = desired_and_scope(&config, false)?;
            let engine = DockerEngine::connect(config.timeout).await?;
            let inventory = Inventory::list(&engine, &scope).await?;
            render::stdout(&match config.format {
                Format::Human => render::inventory_human(&inventory),
                Format::Json => render::inventory_json(&inventory),
            });
            Ok(Exit::Success)
        }
    }
}

/// Loads the state file (`DesiredState::load_or_default`); when `required`, a
/// run without any state file is an error rather than the empty desired state.
fn load_desired(config: &Config, required: bool) -> anyhow::Result<DesiredState> {
    let desired = DesiredState::load_or_default(config.state.as_deref())?;
    if required && desired.source.is_none() {
        return Err(RunError::NoStateFile.into());
    }
    Ok(desired)
}

/// The reconcile goal of a state file: keep its boxes and kept volumes.
fn reconcile(desired: &DesiredState) -> Goal {
    Goal::Reconcile {
        boxes: desired.boxes.clone(),
        keep_volumes: desired.keep_volumes.clone(),
    }
}

/// The state file and the scope it and `--scope` make together.
fn desired_and_scope(config: &Config, required: bool) -> anyhow::Result<(DesiredState, Scope)> {
    let desired = load_desired(config, required)?;
    let scope = scope_of(config, &desired)?;
    Ok((desired, scope))
}

/// The file's scope labels plus `--scope`; a key with two values is an error.
fn scope_of(config: &Config, desired: &DesiredState) -> Result<Scope, RunError> {
    let mut labels: Labels = desired.scope.clone();
    for (k, v) in &config.scope {
        if let Some(file) = labels.get(k).filter(|f| *f != v) {
            return Err(RunError::ScopeConflict {
                key: k.clone(),
                file: file.clone(),
                cli: v.clone(),
                path: desired.source.clone().unwrap_or_default(),
            });
        }
        labels.insert(k.clone(), v.clone());
    }
    Ok(Scope::new(labels))
}

async fn plan(config: &Config, detailed: bool, out: Option<&Path>) -> anyhow::Result<Exit> {
    let (desired, scope) = desired_and_scope(config, true)?;
    let goal = reconcile(&desired);
    let engine = DockerEngine::connect(config.timeout).await?;
    let inventory = Inventory::list(&engine, &scope).await?;
    let plan = Plan::build(&goal, &inventory);
    if let Some(path) = out {
        save_plan(&plan, path)?;
    }
    render::stdout(&match config.format {
        Format::Human => render::plan_human(&plan),
        Format::Json => render::plan_json(&plan),
    });
    Ok(match (detailed, plan.is_empty()) {
        (true, false) => Exit::Pending,
        _ => Exit::Success,
    })
}

/// Writes the plan next to its destination and renames it into place, so a
/// reader never sees half a plan.
fn save_plan(plan: &Plan, path: &Path) -> Result<(), RunError> {
    let fail = |detail: String| RunError::PlanFile {
        path: path.to_path_buf(),
        detail,
    };
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp~");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, render::plan_json(plan)).map_err(|e| fail(e.to_string()))?;
    std::fs::rename(&tmp, path).map_err(|e| fail(e.to_string()))
}

fn read_plan(path: &Path) -> Result<Plan, RunError> {
    let fail = |detail: String| RunError::PlanFile {
        path: path.to_path_buf(),
        detail,
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(format!("cannot read it: {e}")))?;
    let plan: Plan = serde_json::from_str(&text).map_err(|e| {
        fail(format!(
            "not a sandboxctl plan at line {} column {}: {e}",
            e.line(),
            e.column()
        ))
    })?;
    plan.validate().map_err(fail)?;
    Ok(plan)
}

/// Plan afresh and carry the plan out: `apply` and `destroy`.
async fn converge(
    config: &Config,
    scope: &Scope,
    goal: &Goal,
    parallelism: usize,
) -> anyhow::Result<Exit> {
    let (engine, inventory) = match connect_and_list(config, scope).await {
        Ok(listed) => listed,
        Err(exit) => return Ok(exit),
    };
    if let Goal::Destroy { ids, .. } = goal {
        let present = inventory.box_ids();
        for id in ids.iter().filter(|id| !present.contains(id.as_str())) {
            render::stderr(&format!(
                "warning: no managed container or volume carries ca.sandbox.id={id} (in scope {scope})\n"
            ));
        }
    }
    let plan = Plan::build(goal, &inventory);
    if config.format == Format::Human {
        render::stdout(&render::plan_human(&plan));
        render::stdout("\n");
    }
    execute(config, &engine, &plan, parallelism).await
}

/// Connects and lists the managed inventory; a failure is reported (with the
/// JSON report in JSON mode) and becomes the run's exit.
async fn connect_and_list(
    config: &Config,
    scope: &Scope,
) -> Result<(DockerEngine, Inventory), Exit> {
    let engine = DockerEngine::connect(config.timeout)
        .await
        .map_err(|e| fail_early(config, &endpoint_of(&e), e.into()))?;
    match Inventory::list(&engine, scope).await {
        Ok(inventory) => Ok((engine, inventory)),
        Err(e) => Err(fail_early(config, engine.endpoint(), e.into())),
    }
}

/// `apply FILE`: carry out exactly the saved plan, or refuse if it is stale.
async fn apply_saved(config: &Config, path: &Path, parallelism: usize) -> anyhow::Result<Exit> {
    let plan = match read_plan(path) {
        Ok(plan) => plan,
        Err(e) => return Ok(fail_early(config, "plan file", e.into())),
    };
    let (engine, inventory) = match connect_and_list(config, &plan.scope()).await {
        Ok(listed) => listed,
        Err(exit) => return Ok(exit),
    };
    let fresh = Plan::build(&plan.goal, &inventory);
    if fresh.basis != plan.basis {
        let stale = RunError::StalePlan {
            path: path.to_path_buf(),
            changes: describe_changes(&plan.basis, &fresh.basis),
        };
        return Ok(fail_early(config, "plan file", stale.into()));
    }
    // Same inventory, same goal: the planner must give these very steps. A plan
    // that differs was edited, and could name an object that is not ours.
    if !same_work(&plan, &fresh) {
        let edited = RunError::PlanFile {
            path: path.to_path_buf(),
            detail: "its steps are not the plan of the inventory it was made from (was it edited?); nothing was removed. Make a new plan with `sandboxctl plan --out`".into(),
        };
        return Ok(fail_early(config, "plan file", edited.into()));
    }
    execute(config, &engine, &plan, parallelism).await
}

/// True if both plans remove the same objects in the same order with the same
/// edges and block the same objects (container state may differ: it is not
/// part of the basis).
fn same_work(a: &Plan, b: &Plan) -> bool {
    let steps = |p: &Plan| -> Vec<(usize, String, Vec<usize>)> {
        p.steps
            .iter()
            .map(|s| (s.step, s.object.key(), s.waits_for.clone()))
            .collect()
    };
    let blocked = |p: &Plan| -> Vec<String> { p.blocked.iter().map(|n| n.object.key()).collect() };
    a.scope == b.scope && steps(a) == steps(b) && blocked(a) == blocked(b)
}

/// What differs between the basis a plan was made from and the inventory now.
pub fn describe_changes(then: &BTreeMap<String, String>, now: &BTreeMap<String, String>) -> String {
    let mut changes: Vec<String> = Vec::new();
    for (k, v) in now {
        match then.get(k) {
            None => changes.push(format!("{k} is new")),
            Some(old) if old != v => changes.push(format!("{k} changed")),
            Some(_) => {}
        }
    }
    changes.extend(
        then.keys()
            .filter(|k| !now.contains_key(*k))
            .map(|k| format!("{k} is gone")),
    );
    changes.sort();
    let total = changes.len();
    if total > 10 {
        changes.truncate(10);
        changes.push(format!("and {} more", total - 10));
    }
    changes.join(", ")
}

/// Apply, verify, report. Ctrl-C stops new removals; the rest still runs.
async fn execute(
    config: &Config,
    engine: &impl Engine,
    plan: &Plan,
    parallelism: usize,
) -> anyhow::Result<Exit> {
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
    let options = ApplyOptions {
        parallelism,
        ..ApplyOptions::default()
    };
    let mut progress = Progress::new(config.format, plan.steps.len());
    let applied = apply(engine, plan, &options, &cancel, &mut progress).await;
    progress.finish();
    let report = verify(engine, plan, &applied).await;
    watcher.abort();
    print_report(config, &report);
    Ok(if applied.interrupted {
        Exit::Interrupted
    } else if report.converged {
        Exit::Success
    } else {
        Exit::Failure
    })
}

/// The engine's address as the error names it, for the report's failure entry.
fn endpoint_of(e: &EngineError) -> String {
    match e {
        EngineError::Unreachable { endpoint, .. } => endpoint.clone(),
        _ => "engine".to_string(),
    }
}

/// Reports a run that failed before anything was removed: the error on stderr,
/// and in JSON mode the report (with every key) on stdout.
fn fail_early(config: &Config, endpoint: &str, error: anyhow::Error) -> Exit {
    render::stderr(&render::error(&error));
    if config.format == Format::Json {
        let report = Report::failed_before_apply(endpoint, format!("{error:#}"));
        render::stdout(&render::report_json(&report));
    }
    Exit::Failure
}

fn print_report(config: &Config, report: &Report) {
    render::stdout(&match config.format {
        Format::Human => render::report_human(report),
        Format::Json => render::report_json(report),
    });
}
