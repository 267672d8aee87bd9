//! Watch: keep converging. The same `reconcile_once` that `apply` runs once,
//! run again whenever something may have changed.
//!
//! Owns when a cycle runs: after a debounced burst of engine events, when the
//! earliest grace period or expiry in force runs out, when the state file
//! changes, every resync interval, and after an event stream reconnects; and
//! the per-engine event followers with capped exponential backoff. Owns
//! nothing of what a cycle decides (the planner's) and prints nothing itself:
//! everything goes to a `WatchObserver`. Never exits because an engine went
//! away; stops (after the cycle in flight) when told to.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};

use crate::engine::{Engine, EngineError};
use crate::exec::apply::ApplyOptions;
use crate::exec::reconcile::{reconcile_once, Early, ReconcileObserver};
use crate::exec::verify::Report;
use crate::model::{Reason, Scope};
use crate::plan::{parse_rfc3339, Goal, Plan};

/// How watch runs.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// How long after the first event of a burst the cycle runs.
    pub debounce: Duration,
    /// A full cycle at least this often, events or not.
    pub resync: Duration,
    /// How often the state file is looked at for changes.
    pub state_poll: Duration,
    /// Backoff after an event stream is lost: first wait, and the cap.
    pub backoff_first: Duration,
    pub backoff_max: Duration,
    pub apply: ApplyOptions,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            debounce: Duration::from_secs(2),
            resync: Duration::from_secs(60),
            state_poll: Duration::from_secs(1),
            backoff_first: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            apply: ApplyOptions::default(),
        }
    }
}

/// What the desired state is now: the goal and the scope, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    pub goal: Goal,
    pub scope: Scope,
}

/// Where the desired state comes from: looked at every `state_poll`; `Changed`
/// with the new state, `Broken` with the error (the last good state stays).
pub trait StateSource {
    fn poll(&mut self) -> StatePoll;
}

/// The answer of a `StateSource`.
pub enum StatePoll {
    Unchanged,
    Changed(Box<Desired>),
    Broken(String),
}

/// Why a cycle ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    Start,
    Events,
    Timer,
    StateChanged,
    Resync,
    Reconnected,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Start => "start",
            Trigger::Events => "events",
            Trigger::Timer => "grace or expiry ran out",
            Trigger::StateChanged => "state file changed",
            Trigger::Resync => "resync",
            Trigger::Reconnected => "event stream reconnected",
        }
    }
}

/// Hears everything watch does; the run turns it into log lines, metrics and
/// the audit log.
pub trait WatchObserver {
    /// The per-cycle observer for one engine's reconcile.
    fn reconcile(&mut self) -> &mut dyn ReconcileObserver;
    /// One engine's cycle ended (report, or why it stopped before removing).
    fn cycle(
        &mut self,
        engine: &str,
        trigger: Trigger,
        took: Duration,
        result: &Result<Report, Early>,
    );
    /// An event stream was lost (`error`) or came back (`None`).
    fn stream(&mut self, engine: &str, error: Option<&EngineError>);
    /// The state file changed and was loaded, or is broken (the last good state stays).
    fn state(&mut self, broken: Option<&str>);
}

enum Msg {
    Event,
    Lost(usize, EngineError),
    Back(usize),
}

/// Follows one engine's events forever, reconnecting with capped exponential
/// backoff; a stream counts as back once it stayed open for a short while.
async fn follow(
    index: usize,
    engine: Arc<dyn Engine>,
    filters: Vec<String>,
    first: Duration,
    max: Duration,
    tx: mpsc::UnboundedSender<Msg>,
) {
    let mut backoff = first;
    let mut lost = false;
    loop {
        let mut stream = engine.events(&filters);
        let settle = tokio::time::sleep(Duration::from_millis(300));
        tokio::pin!(settle);
        let mut settled = !lost;
        let error = loop {
            tokio::select! {
                item = stream.next() => match item {
                    Some(Ok(_)) => {
                        if !settled {
                            settled = true;
                            backoff = first;
                            let _ = tx.send(Msg::Back(index));
                        }
                        if tx.send(Msg::Event).is_err() {
                            return;
                        }
                    }
                    Some(Err(e)) => break e,
                    None => break EngineError::new(
                        "follow events",
                        crate::engine::ErrorKind::Other {
                            status: None,
                            message: "the engine closed the event stream".into(),
                        },
                    ),
                },
                () = &mut settle, if !settled => {
                    settled = true;
                    backoff = first;
                    if tx.send(Msg::Back(index)).is_err() {
                        return;
                    }
                }
            }
        };
        if tx.send(Msg::Lost(index, error)).is_err() {
            return;
        }
        lost = true;
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(max);
    }
}

/// The earliest time (Unix seconds) after `now` at which a plan's verdicts
/// change by the clock alone: a grace period or a declared box's expiry ending.
pub fn next_deadline(plans: &[Plan], now: i64) -> Option<i64> {
    plans
        .iter()
        .flat_map(|p| p.kept.all())
        .filter_map(|n| match &n.why {
            Reason::WithinGrace { until } => parse_rfc3339(until),
            Reason::DeclaredBox {
                expires: Some(at), ..
            } => parse_rfc3339(at),
            _ => None,
        })
        .filter(|&t| t > now)
        .min()
}

/// A ReconcileObserver that also keeps the plan it was told of.
struct Keeping<'a> {
    inner: &'a mut dyn ReconcileObserver,
    plan: Option<Plan>,
}

impl ReconcileObserver for Keeping<'_> {
    fn planned(&mut self, inventory: &crate::plan::inventory::Inventory, plan: &Plan) {
        self.plan = Some(plan.clone());
        self.inner.planned(inventory, plan);
    }
    fn steps(&mut self) -> &mut dyn crate::exec::apply::Observer {
        self.inner.steps()
    }
    fn applied(&mut self) {
        self.inner.applied();
    }
}

/// What a watch ended with: the last report of each engine.
pub struct Watched {
    pub reports: Vec<Report>,
}

/// Runs watch until `stop` is set (checked between cycles; a cycle in flight
/// stops starting removals, finishes, verifies). `once` runs a single cycle.
/// `clock` gives the time (Unix seconds) each cycle is judged at.
#[allow(clippy::too_many_arguments)]
pub async fn watch(
    engines: Vec<Arc<dyn Engine>>,
    mut desired: Desired,
    state: &mut dyn StateSource,
    options: &WatchOptions,
    once: bool,
    stop: Arc<AtomicBool>,
    clock: &(dyn Fn() -> i64 + Send + Sync),
    observer: &mut dyn WatchObserver,
) -> Watched {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut followers = Vec::new();
    if !once {
        for (i, engine) in engines.iter().enumerate() {
            followers.push(tokio::spawn(follow(
                i,
                engine.clone(),
                desired.scope.filters(),
                options.backoff_first,
                options.backoff_max,
                tx.clone(),
            )));
        }
    }
    drop(tx);
    let mut reports: Vec<Option<Report>> = vec![None; engines.len()];
    let mut plans: Vec<Option<Plan>> = vec![None; engines.len()];
    let mut trigger = Some(Trigger::Start);
    let mut events_due: Option<Instant> = None;
    let mut timer_due: Option<Instant> = None;
    let mut resync_due = Instant::now() + options.resync;
    let mut state_due = Instant::now() + options.state_poll;
    let stop_poll = Duration::from_millis(100);
    loop {
        if let Some(why) = trigger.take() {
            for (i, engine) in engines.iter().enumerate() {
                if stop.load(Ordering::SeqCst) && reports[i].is_some() {
                    break;
                }
                let started = Instant::now();
                let mut keeping = Keeping {
                    inner: observer.reconcile(),
                    plan: None,
                };
                let result = reconcile_once(
                    engine.as_ref(),
                    &desired.goal,
                    &desired.scope,
                    clock(),
                    &options.apply,
                    &stop,
                    &mut keeping,
                )
                .await;
                let plan = keeping.plan.take();
                observer.cycle(engine.name(), why, started.elapsed(), &result);
                if let Some(plan) = plan {
                    plans[i] = Some(plan);
                }
                if let Ok(report) = result {
                    reports[i] = Some(report);
                }
            }
            resync_due = Instant::now() + options.resync;
            events_due = None;
            // When the clock alone next changes a verdict (a grace period or
            // an expiry ends): a deadline, not recomputed while waiting.
            let now = clock();
            let kept: Vec<Plan> = plans.iter().flatten().cloned().collect();
            timer_due = next_deadline(&kept, now)
                .map(|t| Instant::now() + Duration::from_secs(u64::try_from(t - now).unwrap_or(0)));
        }
        if once || stop.load(Ordering::SeqCst) {
            break;
        }
        let mut wake = resync_due.min(state_due);
        if let Some(t) = events_due {
            wake = wake.min(t);
        }
        if let Some(t) = timer_due {
            wake = wake.min(t);
        }
        let wake = wake.min(Instant::now() + stop_poll);
        tokio::select! {
            msg = rx.recv(), if !followers.is_empty() => match msg {
                Some(Msg::Event) => {
                    events_due.get_or_insert(Instant::now() + options.debounce);
                }
                Some(Msg::Lost(i, e)) => observer.stream(engines[i].name(), Some(&e)),
                Some(Msg::Back(i)) => {
                    observer.stream(engines[i].name(), None);
                    trigger = Some(Trigger::Reconnected);
                }
                None => followers.clear(),
            },
            () = sleep_until(wake) => {
                let at = Instant::now();
                if events_due.is_some_and(|t| at >= t) {
                    trigger = Some(Trigger::Events);
                } else if timer_due.is_some_and(|t| at >= t) {
                    trigger = Some(Trigger::Timer);
                } else if at >= resync_due {
                    trigger = Some(Trigger::Resync);
                }
                if at >= state_due {
                    state_due = at + options.state_poll;
                    match state.poll() {
                        StatePoll::Unchanged => {}
                        StatePoll::Changed(new) => {
                            observer.state(None);
                            desired = *new;
                            trigger = Some(Trigger::StateChanged);
                        }
                        StatePoll::Broken(e) => observer.state(Some(&e)),
                    }
                }
            }
        }
    }
    for f in followers {
        f.abort();
    }
    Watched {
        reports: reports.into_iter().flatten().collect(),
    }
}
