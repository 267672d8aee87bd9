//! Watch: keep converging. A cycle is the same fleet reconcile that `apply`
//! runs once (`exec::fleet::reconcile_all`, one merged report), run again
//! whenever something may have changed.
//!
//! Owns when a cycle runs: after a debounced burst of engine events, when the
//! earliest grace period or expiry in force runs out, when the state file
//! changes, every resync interval, and after an event stream reconnects; and
//! the per-engine event followers with capped exponential backoff. Owns
//! nothing of what a cycle decides (the planner's) and prints nothing itself:
//! everything goes to the run's `Observer` (one `Cycle` event per cycle, with
//! the merged report: a cycle whose listing failed on any engine is a failed
//! cycle). Never exits because an engine went
//! away; stops (after the cycle in flight) when told to.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;

use crate::engine::{Engine, EngineError};
use crate::exec::apply::ApplyOptions;
use crate::exec::event::{Event, Observer};
use crate::exec::fleet::reconcile_all;
use crate::exec::reconcile::Carry;
use crate::exec::report::FleetReport;
use crate::model::{Reason, Scope};
use crate::plan::{parse_rfc3339, Goal, Plan};

use crate::exec::event::Trigger;

/// How watch runs.
#[derive(Debug, Clone)]
pub(crate) struct WatchOptions {
    /// How long after the first event of a burst the cycle runs.
    pub(crate) debounce: Duration,
    /// A full cycle at least this often, events or not.
    pub(crate) resync: Duration,
    /// How often the state file is looked at for changes.
    pub(crate) state_poll: Duration,
    /// Backoff after an event stream is lost: first wait, and the cap.
    pub(crate) backoff_first: Duration,
    pub(crate) backoff_max: Duration,
    pub(crate) apply: ApplyOptions,
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
pub(crate) struct Desired {
    pub(crate) goal: Goal,
    pub(crate) scope: Scope,
}

/// Where the desired state comes from: looked at every `state_poll`; `Changed`
/// with the new state, `Broken` with the error (the last good state stays).
pub(crate) trait StateSource {
    fn poll(&mut self) -> StatePoll;
}

/// The answer of a `StateSource`.
pub(crate) enum StatePoll {
    Unchanged,
    Changed(Box<Desired>),
    Broken(String),
}

enum Msg {
    Event,
    Lost(String, EngineError),
    Back(String),
}

/// Follows one engine's events forever, reconnecting with capped exponential
/// backoff; a stream counts as back once it stayed open for a short while.
async fn follow(
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
                            let _ = tx.send(Msg::Back(engine.name().to_string()));
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
                    if tx.send(Msg::Back(engine.name().to_string())).is_err() {
                        return;
                    }
                }
            }
        };
        if tx
            .send(Msg::Lost(engine.name().to_string(), error))
            .is_err()
        {
            return;
        }
        lost = true;
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(max);
    }
}

/// The earliest time (Unix seconds) after `now` at which a plan's verdicts
/// change by the clock alone: a grace period or a declared box's expiry ending.
fn next_deadline(plans: &[Plan], now: i64) -> Option<i64> {
    plans
        .iter()
        .flat_map(|p| {
            // A lease's end is on the engine's clock: move it to this machine's.
            let skew = p.engine_clock.as_ref().map_or(0, |c| c.skew_seconds);
            p.kept.all().filter_map(move |n| match &n.why {
                Reason::WithinGrace { until } => parse_rfc3339(until),
                Reason::DeclaredBox {
                    expires: Some(at), ..
                } => parse_rfc3339(at),
                Reason::Leased { until, .. } => {
                    parse_rfc3339(until).map(|t| t.saturating_sub(skew))
                }
                _ => None,
            })
        })
        .filter(|&t| t > now)
        .min()
}

/// Passes every event on, and keeps each engine's next deadline from the
/// plan it was told of (no copy of the plan is kept).
struct Deadlines<'a> {
    inner: &'a dyn Observer,
    now: i64,
    next: Mutex<BTreeMap<String, Option<i64>>>,
}

impl Observer for Deadlines<'_> {
    fn on(&self, event: &Event<'_>) {
        if let Event::Planned { engine, plan, .. } = event {
            let due = next_deadline(std::slice::from_ref(*plan), self.now);
            if let Ok(mut next) = self.next.lock() {
                next.insert(engine.to_string(), due);
            }
        }
        self.inner.on(event);
    }
}

/// Runs watch until `stop` is cancelled (a cycle in flight stops starting
/// removals, finishes, verifies). `once` runs a single cycle. `clock` gives
/// the time (Unix seconds) each cycle is judged at. Returns the last cycle's
/// merged report (every engine, each under its own name).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn watch(
    engines: &[Arc<dyn Engine>],
    mut desired: Desired,
    state: &mut dyn StateSource,
    options: &WatchOptions,
    once: bool,
    stop: &CancellationToken,
    clock: &(dyn Fn() -> i64 + Send + Sync),
    observer: &dyn Observer,
) -> Option<FleetReport> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut followers = Vec::new();
    if !once {
        for engine in engines {
            followers.push(tokio::spawn(follow(
                engine.clone(),
                desired.scope.filters(),
                options.backoff_first,
                options.backoff_max,
                tx.clone(),
            )));
        }
    }
    drop(tx);
    // Each engine's next deadline, from its last plan (an engine whose cycle
    // failed before planning keeps the one it had).
    let mut deadlines: BTreeMap<String, Option<i64>> = BTreeMap::new();
    let mut last = None;
    let mut trigger = Some(Trigger::Start);
    let mut events_due: Option<Instant> = None;
    let mut timer_due: Option<Instant> = None;
    let mut resync_due = Instant::now() + options.resync;
    let mut state_due = Instant::now() + options.state_poll;
    loop {
        if let Some(why) = trigger.take() {
            let started = Instant::now();
            let now = clock();
            let keeping = Deadlines {
                inner: observer,
                now,
                next: Mutex::new(BTreeMap::new()),
            };
            let carry = Carry::new(&options.apply, stop, &keeping);
            let report = reconcile_all(engines, &desired.goal, &desired.scope, now, &carry).await;
            for engine in engines {
                let misses = engine.deadline_misses();
                observer.on(&Event::DeadlineMisses {
                    engine: engine.name(),
                    misses: &misses,
                });
            }
            observer.on(&Event::Cycle {
                trigger: why,
                took: started.elapsed(),
                report: &report,
            });
            last = Some(report);
            deadlines.extend(keeping.next.into_inner().unwrap_or_default());
            resync_due = Instant::now() + options.resync;
            events_due = None;
            // When the clock alone next changes a verdict (a grace period or
            // an expiry ends): a deadline, not recomputed while waiting.
            let now = clock();
            timer_due = deadlines
                .values()
                .flatten()
                .copied()
                .filter(|&t| t > now)
                .min()
                .map(|t| Instant::now() + Duration::from_secs(u64::try_from(t - now).unwrap_or(0)));
        }
        if once || stop.is_cancelled() {
            break;
        }
        let mut wake = resync_due.min(state_due);
        if let Some(t) = events_due {
            wake = wake.min(t);
        }
        if let Some(t) = timer_due {
            wake = wake.min(t);
        }
        tokio::select! {
            () = stop.cancelled() => break,
            msg = rx.recv(), if !followers.is_empty() => match msg {
                Some(Msg::Event) => {
                    events_due.get_or_insert(Instant::now() + options.debounce);
                }
                Some(Msg::Lost(engine, e)) => observer.on(&Event::Stream { engine: &engine, error: Some(&e) }),
                Some(Msg::Back(engine)) => {
                    observer.on(&Event::Stream { engine: &engine, error: None });
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
                            observer.on(&Event::State { broken: None });
                            desired = *new;
                            trigger = Some(Trigger::StateChanged);
                        }
                        StatePoll::Broken(e) => observer.on(&Event::State { broken: Some(&e) }),
                    }
                }
            }
        }
    }
    for f in followers {
        f.abort();
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Kind, Labels, Object, Scope};
    use crate::plan::inventory::Inventory;
    use crate::plan::Goal;

    /// A box `a` with a lease of `ttl` made at `created` (the engine's clock).
    fn leased(created: i64, ttl: &str, skew_ms: i64) -> Inventory {
        let mut o = Object::new("default", Kind::Volume, "la", "la");
        o.labels = Labels::from([
            ("ca.sandbox".to_string(), "1".to_string()),
            ("ca.sandbox.id".to_string(), "a".to_string()),
            (
                crate::model::lease::LEASE_TTL_LABEL.to_string(),
                ttl.to_string(),
            ),
        ]);
        o.created = Some(created);
        let mut inv =
            Inventory::from_listings("default", Scope::default(), vec![o], vec![], vec![]);
        inv.skew_ms = Some(skew_ms);
        inv
    }

    fn goal() -> Goal {
        Goal::nothing_declared()
    }

    #[test]
    fn a_lease_end_is_a_deadline_on_this_machines_clock() {
        let now = 1_800_000_000;
        // The engine runs an hour ahead: its lease made "now" on its clock
        // ends 60 s from now on ours.
        let inv = leased(now + 3600, "60s", 3_600_000);
        let plan = Plan::build(&goal(), &inv, now);
        assert_eq!(next_deadline(&[plan], now), Some(now + 60));
        // No skew: the lease's own end.
        let plan = Plan::build(&goal(), &leased(now - 10, "60s", 0), now);
        assert_eq!(next_deadline(&[plan], now), Some(now + 50));
    }
}
