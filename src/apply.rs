//! Apply: carry out a plan, exactly, through an engine.
//!
//! Owns the walk over the removal graph (bounded concurrency, each removal as
//! soon as what it waits for has succeeded), the per-removal policy (404 is
//! "already gone", 409 "in progress" is waited out, a volume is re-checked just
//! before removal) and the outcome of each step. Must not remove anything the
//! plan does not name, retry a failed removal, or print.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use petgraph::graph::NodeIndex;
use petgraph::Direction;
use serde::Serialize;

use crate::engine::{Engine, EngineError};
use crate::model::{short_id, Scope};
use crate::plan::{Object, Plan, Step};

/// The default number of removals in flight. Measured on 2 cores with Docker
/// 20.10 (`scripts/bench-teardown.sh`, README): 12 was fastest at 50 and 200
/// boxes; past 16 the daemon only queues, and each removal in flight holds a
/// connection (one file descriptor).
pub const DEFAULT_PARALLELISM: usize = 12;

/// How apply runs.
#[derive(Debug, Clone)]
pub struct ApplyOptions {
    /// Removals in flight at once (at least 1).
    pub parallelism: usize,
    /// How long to wait for a container whose removal another actor started (409).
    pub in_progress_wait: Duration,
    /// How often to look while waiting.
    pub poll_interval: Duration,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions {
            parallelism: DEFAULT_PARALLELISM,
            in_progress_wait: Duration::from_secs(30),
            poll_interval: Duration::from_millis(100),
        }
    }
}

/// What happened to one step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", content = "detail", rename_all = "camelCase")]
pub enum Outcome {
    /// The engine removed it.
    Removed,
    /// It was already gone (404), or another actor removed it while we waited.
    AlreadyGone,
    /// The engine refused or the call failed; the object may still be there.
    Failed(String),
    /// Left alone on purpose: a volume that changed since it was listed.
    Refused(String),
    /// Not attempted because the step it waits for (by number) did not succeed.
    Skipped(usize),
    /// Not attempted because the run was interrupted.
    Interrupted,
}

impl Outcome {
    /// True when the object is gone.
    pub fn is_success(&self) -> bool {
        matches!(self, Outcome::Removed | Outcome::AlreadyGone)
    }
}

/// Told about each step as it starts and ends (progress display).
pub trait Observer {
    fn started(&mut self, _step: &Step) {}
    fn finished(&mut self, _step: &Step, _outcome: &Outcome) {}
}

/// An observer that ignores everything.
pub struct Silent;
impl Observer for Silent {}

/// The outcome of every step, in plan order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub outcomes: Vec<Outcome>,
    /// True if the run stopped starting removals because it was interrupted.
    pub interrupted: bool,
}

/// Carries out `plan`. A step starts once every step it waits for succeeded;
/// when one fails, everything that waits for it (transitively) is skipped.
/// When `cancel` is set, no new removal starts; those in flight finish.
pub async fn apply(
    engine: &impl Engine,
    plan: &Plan,
    options: &ApplyOptions,
    cancel: &AtomicBool,
    observer: &mut dyn Observer,
) -> Applied {
    let graph = plan.graph();
    let n = plan.steps.len();
    let scope = plan.scope();
    let mut outcomes: Vec<Option<Outcome>> = vec![None; n];
    let mut waiting: Vec<usize> = plan.steps.iter().map(|s| s.waits_for.len()).collect();
    // Ready steps, volumes first: a volume costs about a millisecond, and taking it
    // as soon as its last container is gone (not once every container has started)
    // means an interrupted run leaves no volume behind whose containers are gone.
    let key = |i: usize| (matches!(plan.steps[i].object, Object::Container { .. }), i);
    let mut ready: BTreeSet<(bool, usize)> = (0..n).filter(|&i| waiting[i] == 0).map(key).collect();
    let mut running = FuturesUnordered::new();
    let parallelism = options.parallelism.max(1);

    loop {
        while running.len() < parallelism && !cancel.load(Ordering::SeqCst) {
            let Some((_, i)) = ready.pop_first() else {
                break;
            };
            let step = &plan.steps[i];
            observer.started(step);
            let scope = &scope;
            running.push(async move { (i, remove(engine, step, scope, options).await) });
        }
        let Some((i, outcome)) = running.next().await else {
            break;
        };
        observer.finished(&plan.steps[i], &outcome);
        let ok = outcome.is_success();
        outcomes[i] = Some(outcome);
        let mut stack: Vec<(usize, usize)> = graph
            .neighbors_directed(NodeIndex::new(i), Direction::Outgoing)
            .map(|d| (graph[d], i + 1))
            .collect();
        if ok {
            for (d, _) in stack {
                waiting[d] -= 1;
                if waiting[d] == 0 && outcomes[d].is_none() {
                    ready.insert(key(d));
                }
            }
        } else {
            // Downstream of a failure is skipped and reported, never attempted.
            while let Some((d, after)) = stack.pop() {
                if outcomes[d].is_some() {
                    continue;
                }
                ready.remove(&key(d));
                let skipped = Outcome::Skipped(after);
                observer.finished(&plan.steps[d], &skipped);
                outcomes[d] = Some(skipped);
                stack.extend(
                    graph
                        .neighbors_directed(NodeIndex::new(d), Direction::Outgoing)
                        .map(|dd| (graph[dd], d + 1)),
                );
            }
        }
    }

    let interrupted = cancel.load(Ordering::SeqCst) && outcomes.iter().any(Option::is_none);
    Applied {
        outcomes: outcomes
            .into_iter()
            .map(|o| o.unwrap_or(Outcome::Interrupted))
            .collect(),
        interrupted,
    }
}

/// Carries out one step.
async fn remove(
    engine: &impl Engine,
    step: &Step,
    scope: &Scope,
    options: &ApplyOptions,
) -> Outcome {
    match &step.object {
        Object::Container { id, .. } => remove_container(engine, id, options).await,
        Object::Volume {
            name, created_at, ..
        } => remove_volume(engine, name, created_at.as_deref(), scope).await,
    }
}

async fn remove_container(engine: &impl Engine, id: &str, options: &ApplyOptions) -> Outcome {
    match engine.remove_container(id).await {
        Ok(()) => Outcome::Removed,
        Err(e) if e.is_not_found() => Outcome::AlreadyGone,
        Err(e) if e.is_removal_in_progress() => wait_until_gone(engine, id, options).await,
        Err(e) => Outcome::Failed(e.to_string()),
    }
}

/// Another actor is removing the container: it is done only when the engine
/// no longer knows it, and only then may its volumes go.
async fn wait_until_gone(engine: &impl Engine, id: &str, options: &ApplyOptions) -> Outcome {
    let deadline = tokio::time::Instant::now() + options.in_progress_wait;
    loop {
        match engine.inspect_container(id).await {
            Err(e) if e.is_not_found() => return Outcome::AlreadyGone,
            Err(e) => return Outcome::Failed(e.to_string()),
            Ok(_) if tokio::time::Instant::now() >= deadline => {
                return Outcome::Failed(format!(
                    "removal of container {} was started by another actor and had not finished after {}s",
                    short_id(id),
                    options.in_progress_wait.as_secs()
                ))
            }
            Ok(_) => tokio::time::sleep(options.poll_interval).await,
        }
    }
}

/// Volumes have no ID, so a name may have been reused since the listing: look
/// again right before removing, and remove only the volume that was planned.
async fn remove_volume(
    engine: &impl Engine,
    name: &str,
    planned_created_at: Option<&str>,
    scope: &Scope,
) -> Outcome {
    match engine.inspect_volume(name).await {
        Err(e) if e.is_not_found() => return Outcome::AlreadyGone,
        Err(e) => return Outcome::Failed(e.to_string()),
        Ok(now) if !scope.manages(&now.labels) => {
            return Outcome::Refused(format!(
                "volume {name} no longer carries the scope labels ({scope}); left alone"
            ))
        }
        Ok(now) if planned_created_at.is_some() && now.created_at.as_deref() != planned_created_at => {
            return Outcome::Refused(format!(
                "volume {name} was recreated since it was listed (created {}, listed {}); left alone",
                now.created_at.as_deref().unwrap_or("?"),
                planned_created_at.unwrap_or("?")
            ))
        }
        Ok(_) => {}
    }
    match engine.remove_volume(name).await {
        Ok(()) => Outcome::Removed,
        Err(e) if e.is_not_found() => Outcome::AlreadyGone,
        Err(e) => Outcome::Failed(in_use_hint(e)),
    }
}

fn in_use_hint(e: EngineError) -> String {
    match e.volume_users() {
        Some(users) => format!(
            "{e} (in use by container {}; volumes are never forced)",
            users
                .iter()
                .map(|u| short_id(u))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => e.to_string(),
    }
}
