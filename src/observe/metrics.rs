//! The registry: the Prometheus metrics of `watch` and their exposition.
//!
//! Owns the metric names, labels and help texts, what each event of a run
//! adds to them (the `Observer`), and the OpenMetrics text a scrape reads.
//! Encoding is `prometheus-client`'s. The HTTP endpoint that serves it is
//! `endpoint.rs`'s; the health rule and what it remembers of the cycles are
//! `health.rs`'s. Must not decide anything about reconciling, read the
//! engine, serve, or print: the loop records what happened and this module
//! only counts it.
//!
//! # Metrics
//! | name | type | labels |
//! | --- | --- | --- |
//! | `sandboxctl_managed_objects` | gauge | `engine`, `kind` |
//! | `sandboxctl_removals_total` | counter | `kind`, `outcome` (`removed`, `alreadyGone`, `failed`) |
//! | `sandboxctl_reclaimed_bytes_total` | counter | `kind` (`container`, `volume`): what the removals measured gave back |
//! | `sandboxctl_reclaimed_unmeasured_total` | counter | `kind`: removed containers and volumes whose figure is not known |
//! | `sandboxctl_failures_total` | counter | `engine` |
//! | `sandboxctl_cycles_total` | counter | `result` (`converged`, `failed`) |
//! | `sandboxctl_cycle_duration_seconds` | histogram | |
//! | `sandboxctl_event_stream_reconnects_total` | counter | `engine` |
//! | `sandboxctl_call_timeouts_total` | counter | `engine`, `endpoint` (`GET /containers/{id}/json`, ...) |
//! | `sandboxctl_last_converged_cycle_age_seconds` | gauge | |
//! | `sandboxctl_notify_failures_total` | counter | `event` (`expiring`, `stopped`, `removed`, `failed`): notifications given up on (`observe::notify`; absent until the first) |
//!
//! The `kind`×`outcome` and `result` series exist (at 0) from the start, so
//! `rate()` and `increase()` see the first event. Series carrying an
//! `engine` label appear when that engine is first recorded; until then
//! their family is left out of the exposition entirely.
//!
//! `sandboxctl_last_converged_cycle_age_seconds` is computed at scrape time
//! from the instant of the last converged cycle and the clock. Before the
//! first converged cycle it is **absent** (no sample, only its HELP/TYPE
//! lines): no made-up number can be mistaken for an age. Alert on
//! `sandboxctl_last_converged_cycle_age_seconds > N or
//! absent(sandboxctl_last_converged_cycle_age_seconds)`, or use `/healthz`.
//!
//! The exposition is OpenMetrics text (`application/openmetrics-text;
//! version=1.0.0; charset=utf-8`), which Prometheus scrapes natively. Families
//! appear in the order of the table; series within a family are in no fixed
//! order (the library keeps them in a hash map).

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::TypedMetric;
use prometheus_client::registry::{Registry, Unit};

use super::health::{Cycles, Health};
use crate::exec::event::{Event, Observer};
use crate::model::{Kind, Outcome};

/// Upper bounds (seconds) of the cycle duration histogram's buckets.
const CYCLE_BUCKETS: [f64; 11] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// Where "now" comes from; tests pass a fake one.
type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EngineKind {
    engine: String,
    kind: Cow<'static, str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindOutcome {
    kind: Cow<'static, str>,
    outcome: Cow<'static, str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: Cow<'static, str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EngineLabel {
    engine: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabel {
    event: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EngineEndpoint {
    engine: String,
    endpoint: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: Cow<'static, str>,
}

/// The metrics of one `watch` process. Share it as `Arc<Metrics>`: every
/// method takes `&self`.
pub(crate) struct Metrics {
    registry: Registry,
    managed: Family<EngineKind, Gauge>,
    removals: Family<KindOutcome, Counter>,
    reclaimed: Family<KindLabel, Counter>,
    unmeasured: Family<KindLabel, Counter>,
    failures: Family<EngineLabel, Counter>,
    cycles_total: Family<ResultLabel, Counter>,
    cycle_duration: Histogram,
    reconnects: Family<EngineLabel, Counter>,
    call_timeouts: Family<EngineEndpoint, Counter>,
    notify_failures: Family<EventLabel, Counter>,
    cycles: Arc<Mutex<Cycles>>,
    clock: Clock,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics")
            .field("cycles", &*lock(&self.cycles))
            .finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Metrics reading the real monotonic clock.
    pub(crate) fn new() -> Self {
        Self::with_clock(Instant::now)
    }

    /// Metrics reading `clock` whenever "now" is needed at scrape time (the
    /// age gauge and `/healthz`). The clock must be monotonic.
    fn with_clock(clock: impl Fn() -> Instant + Send + Sync + 'static) -> Self {
        let clock: Clock = Arc::new(clock);
        let cycles = Arc::new(Mutex::new(Cycles::default()));
        let mut registry = Registry::default();
        let managed = Family::<EngineKind, Gauge>::default();
        registry.register(
            "sandboxctl_managed_objects",
            "Objects labeled ca.sandbox=1 in scope seen by the last listing, by engine and kind",
            managed.clone(),
        );
        let removals = Family::<KindOutcome, Counter>::default();
        registry.register(
            "sandboxctl_removals",
            "Removal attempts, by kind and outcome",
            removals.clone(),
        );
        let reclaimed = Family::<KindLabel, Counter>::default();
        registry.register_with_unit(
            "sandboxctl_reclaimed",
            "Space the removals gave back as measured before each removal (--reclaimed, or a volume's archive), by kind",
            Unit::Bytes,
            reclaimed.clone(),
        );
        let unmeasured = Family::<KindLabel, Counter>::default();
        registry.register(
            "sandboxctl_reclaimed_unmeasured",
            "Removed containers and volumes whose size was not measured, by kind",
            unmeasured.clone(),
        );
        let failures = Family::<EngineLabel, Counter>::default();
        registry.register(
            "sandboxctl_failures",
            "Failed engine operations (listing, removal, verification), by engine",
            failures.clone(),
        );
        let cycles_total = Family::<ResultLabel, Counter>::default();
        registry.register(
            "sandboxctl_cycles",
            "Finished reconcile cycles, by result",
            cycles_total.clone(),
        );
        let cycle_duration = Histogram::new(CYCLE_BUCKETS);
        registry.register_with_unit(
            "sandboxctl_cycle_duration",
            "Wall time of a reconcile cycle (list, plan, apply, verify)",
            Unit::Seconds,
            cycle_duration.clone(),
        );
        let reconnects = Family::<EngineLabel, Counter>::default();
        registry.register(
            "sandboxctl_event_stream_reconnects",
            "Times the engine event stream was reconnected, by engine",
            reconnects.clone(),
        );
        let call_timeouts = Family::<EngineEndpoint, Counter>::default();
        registry.register(
            "sandboxctl_call_timeouts",
            "Engine calls that passed their deadline, by engine and endpoint",
            call_timeouts.clone(),
        );
        let notify_failures = Family::<EventLabel, Counter>::default();
        registry.register(
            "sandboxctl_notify_failures",
            "Notifications given up on after their tries (the receiver down, answering an error, or too slow)",
            notify_failures.clone(),
        );
        // Collectors are encoded after all metrics whatever the order of
        // registration; registered last to say so.
        registry.register_collector(Box::new(ConvergedAge {
            cycles: Arc::clone(&cycles),
            clock: Arc::clone(&clock),
        }));

        for kind in Kind::ALL {
            for code in Outcome::ATTEMPTED {
                let _ = removals.get_or_create(&kind_outcome(kind, code));
            }
        }
        for kind in Kind::HOLDS_SPACE {
            let _ = reclaimed.get_or_create(&kind_label(kind));
            let _ = unmeasured.get_or_create(&kind_label(kind));
        }
        for result in ["converged", "failed"] {
            let _ = cycles_total.get_or_create(&ResultLabel {
                result: Cow::Borrowed(result),
            });
        }

        Metrics {
            registry,
            managed,
            removals,
            reclaimed,
            unmeasured,
            failures,
            cycles_total,
            cycle_duration,
            reconnects,
            call_timeouts,
            notify_failures,
            cycles,
            clock,
        }
    }

    /// Counts one notification of `event` given up on.
    pub(crate) fn add_notify_failure(&self, event: &str) {
        let label = EventLabel {
            event: event.to_string(),
        };
        self.notify_failures.get_or_create(&label).inc();
    }

    /// Records a finished cycle: its wall time, whether it converged, and
    /// when it finished (`now`, from the same clock as [`Metrics::with_clock`]).
    #[cfg(test)]
    pub(crate) fn record_cycle(&self, duration: Duration, converged: bool, now: Instant) {
        self.record_cycle_of(duration, converged, false, now);
    }

    /// [`Metrics::record_cycle`], saying whether a failed cycle was
    /// degraded (see `Cycles::last_degraded`).
    pub(crate) fn record_cycle_of(
        &self,
        duration: Duration,
        converged: bool,
        degraded: bool,
        now: Instant,
    ) {
        self.cycle_duration.observe(duration.as_secs_f64());
        let result = if converged { "converged" } else { "failed" };
        self.cycles_total
            .get_or_create(&ResultLabel {
                result: Cow::Borrowed(result),
            })
            .inc();
        lock(&self.cycles).record(converged, degraded, now);
    }

    /// Sets how many managed objects of `kind` the last listing of `engine` saw.
    pub(crate) fn set_managed(&self, engine: &str, kind: Kind, n: u64) {
        self.managed
            .get_or_create(&EngineKind {
                engine: engine.to_string(),
                kind: Cow::Borrowed(kind.as_str()),
            })
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Counts one removal attempt, by its outcome's code; a step never
    /// attempted (skipped, interrupted) is not counted.
    pub(crate) fn add_removal(&self, kind: Kind, outcome: &Outcome) {
        if outcome.attempted() {
            self.removals
                .get_or_create(&kind_outcome(kind, outcome.code()))
                .inc();
        }
    }

    /// Counts what one removed object gave back (`figure`, bytes), or that
    /// it was not measured; only containers and volumes hold space, and
    /// only an object this run removed counts.
    pub(crate) fn add_reclaimed(&self, kind: Kind, outcome: &Outcome, figure: Option<u64>) {
        if !crate::exec::report::Reclaimed::counts(kind, outcome) {
            return;
        }
        match figure {
            Some(bytes) => {
                self.reclaimed
                    .get_or_create(&kind_label(kind))
                    .inc_by(bytes);
            }
            None => {
                self.unmeasured.get_or_create(&kind_label(kind)).inc();
            }
        }
    }

    /// Exposes `engine`'s counters at 0 before anything happened to it, so a
    /// dashboard or an alert on `increase()` sees every engine from the start.
    pub(crate) fn know_engine(&self, engine: &str) {
        let _ = self.failures.get_or_create(&engine_label(engine));
        let _ = self.reconnects.get_or_create(&engine_label(engine));
    }

    /// Counts one failed engine operation (listing, removal, verification).
    pub(crate) fn add_failure(&self, engine: &str) {
        self.failures.get_or_create(&engine_label(engine)).inc();
    }

    /// Counts one reconnection of `engine`'s event stream.
    pub(crate) fn add_reconnect(&self, engine: &str) {
        self.reconnects.get_or_create(&engine_label(engine)).inc();
    }

    /// Sets `engine`'s count of calls past their deadline at `endpoint` to
    /// `total` (the engine's own running count; a counter never goes back).
    pub(crate) fn set_call_timeouts(&self, engine: &str, endpoint: &str, total: u64) {
        let counter = self.call_timeouts.get_or_create(&EngineEndpoint {
            engine: engine.to_string(),
            endpoint: endpoint.to_string(),
        });
        let seen = counter.get();
        if total > seen {
            counter.inc_by(total - seen);
        }
    }

    /// The OpenMetrics text exposition, ending with `# EOF`.
    pub(super) fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }

    /// The health rule (`health.rs`) at the clock's "now", over the cycles
    /// recorded so far.
    pub(super) fn health(&self, resync: Duration) -> Health {
        lock(&self.cycles).health_at((self.clock)(), resync)
    }
}

fn kind_outcome(kind: Kind, code: &'static str) -> KindOutcome {
    KindOutcome {
        kind: Cow::Borrowed(kind.as_str()),
        outcome: Cow::Borrowed(code),
    }
}

fn kind_label(kind: Kind) -> KindLabel {
    KindLabel {
        kind: Cow::Borrowed(kind.as_str()),
    }
}

fn engine_label(engine: &str) -> EngineLabel {
    EngineLabel {
        engine: engine.to_string(),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Encodes `sandboxctl_last_converged_cycle_age_seconds` at scrape time.
struct ConvergedAge {
    cycles: Arc<Mutex<Cycles>>,
    clock: Clock,
}

impl fmt::Debug for ConvergedAge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConvergedAge").finish_non_exhaustive()
    }
}

impl Collector for ConvergedAge {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let at = lock(&self.cycles).last_converged_at;
        let metric_encoder = encoder.encode_descriptor(
            "sandboxctl_last_converged_cycle_age",
            "Time since the last converged reconcile cycle finished (absent before the first).",
            Some(&Unit::Seconds),
            ConstGauge::<f64>::TYPE,
        )?;
        if let Some(at) = at {
            let age = (self.clock)().saturating_duration_since(at);
            ConstGauge::new(age.as_secs_f64()).encode(metric_encoder)?;
        }
        Ok(())
    }
}

/// Watch's metrics, told of every event of each cycle.
impl Observer for Metrics {
    fn on(&self, event: &Event<'_>) {
        match event {
            Event::Planned {
                engine, inventory, ..
            } => {
                for kind in Kind::ALL {
                    self.set_managed(engine, kind, inventory.of_kind(kind).count() as u64);
                }
            }
            Event::Finished {
                step,
                outcome,
                reclaimed,
                ..
            } => {
                self.add_removal(step.object.kind, outcome);
                self.add_reclaimed(step.object.kind, outcome, *reclaimed);
            }
            Event::Cycle { took, report, .. } => {
                // Degraded, not dead: every engine answered, and only what a
                // failed or stuck call could affect was left.
                let answered = report.parts.iter().all(|p| p.result.is_ok());
                self.record_cycle_of(
                    *took,
                    report.report.converged,
                    answered && report.report.degraded,
                    Instant::now(),
                );
                for part in &report.parts {
                    let failures = part.result.as_ref().map_or(1, |r| r.failures.len());
                    for _ in 0..failures {
                        self.add_failure(&part.engine);
                    }
                }
            }
            Event::Stream {
                engine,
                error: None,
            } => self.add_reconnect(engine),
            Event::DeadlineMisses { engine, misses } => {
                for (endpoint, total) in misses.iter() {
                    self.set_call_timeouts(engine, endpoint, *total);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A clock that moves only when told to.
    #[derive(Clone)]
    pub(in crate::observe) struct FakeClock(Arc<Mutex<Instant>>);

    impl FakeClock {
        pub(in crate::observe) fn new() -> Self {
            FakeClock(Arc::new(Mutex::new(Instant::now())))
        }
        pub(in crate::observe) fn now(&self) -> Instant {
            *lock(&self.0)
        }
        pub(in crate::observe) fn advance(&self, by: Duration) {
            *lock(&self.0) += by;
        }
        pub(in crate::observe) fn metrics(&self) -> Metrics {
            let clock = self.clone();
            Metrics::with_clock(move || clock.now())
        }
    }

    #[test]
    fn the_metric_and_the_report_count_what_was_reclaimed_by_one_rule() {
        use crate::exec::report::Reclaimed;
        let outcomes = [
            Outcome::Removed,
            Outcome::AlreadyGone,
            Outcome::Refused("changed".into()),
        ];
        for kind in Kind::ALL {
            for outcome in &outcomes {
                for figure in [Some(7), None] {
                    let metrics = Metrics::new();
                    metrics.add_reclaimed(kind, outcome, figure);
                    let mut report = Reclaimed::default();
                    report.count(kind, outcome, figure);
                    let label = kind_label(kind);
                    let case = format!("{kind:?} {outcome:?} {figure:?}");
                    assert_eq!(
                        metrics.unmeasured.get_or_create(&label).get(),
                        report.unmeasured,
                        "{case}"
                    );
                    assert_eq!(
                        metrics.reclaimed.get_or_create(&label).get(),
                        report.bytes,
                        "{case}"
                    );
                }
            }
        }
    }

    #[test]
    fn families_come_in_table_order_and_the_age_is_absent_before_convergence() {
        let clock = FakeClock::new();
        let metrics = clock.metrics();
        metrics.record_cycle(Duration::from_secs(1), false, clock.now());
        metrics.add_reconnect("default");
        metrics.add_failure("default");
        metrics.set_managed("default", Kind::Container, 0);
        let text = metrics.encode();
        let families: Vec<_> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .collect();
        insta::assert_debug_snapshot!(families, @r#"
        [
            "sandboxctl_managed_objects gauge",
            "sandboxctl_removals counter",
            "sandboxctl_reclaimed_bytes counter",
            "sandboxctl_reclaimed_unmeasured counter",
            "sandboxctl_failures counter",
            "sandboxctl_cycles counter",
            "sandboxctl_cycle_duration_seconds histogram",
            "sandboxctl_event_stream_reconnects counter",
            "sandboxctl_last_converged_cycle_age_seconds gauge",
        ]
        "#);
        assert!(
            !text
                .lines()
                .any(|l| l.starts_with("sandboxctl_last_converged_cycle_age_seconds")),
            "{text}"
        );
        metrics.record_cycle(Duration::from_secs(1), true, clock.now());
        clock.advance(Duration::from_secs(90));
        assert!(
            text_has(
                &metrics.encode(),
                "sandboxctl_last_converged_cycle_age_seconds 90.0"
            ),
            "{}",
            metrics.encode()
        );
    }

    fn text_has(text: &str, line: &str) -> bool {
        text.lines().any(|l| l == line)
    }

    #[test]
    fn every_known_engine_has_its_counters_at_zero_from_the_start() {
        let metrics = FakeClock::new().metrics();
        metrics.know_engine("a");
        metrics.know_engine("b");
        metrics.add_failure("b");
        let text = metrics.encode();
        for line in [
            r#"sandboxctl_failures_total{engine="a"} 0"#,
            r#"sandboxctl_failures_total{engine="b"} 1"#,
            r#"sandboxctl_event_stream_reconnects_total{engine="a"} 0"#,
            r#"sandboxctl_event_stream_reconnects_total{engine="b"} 0"#,
        ] {
            assert!(text.lines().any(|l| l == line), "no {line} in\n{text}");
        }
    }

    #[test]
    fn calls_past_their_deadline_are_counted_by_engine_and_endpoint() {
        let metrics = FakeClock::new().metrics();
        metrics.set_call_timeouts("a", "GET /containers/{id}/json", 2);
        metrics.set_call_timeouts("a", "GET /containers/{id}/json", 2);
        metrics.set_call_timeouts("a", "GET /containers/{id}/json", 3);
        metrics.set_call_timeouts("b", "GET /networks", 1);
        let text = metrics.encode();
        for line in [
            r#"sandboxctl_call_timeouts_total{engine="a",endpoint="GET /containers/{id}/json"} 3"#,
            r#"sandboxctl_call_timeouts_total{engine="b",endpoint="GET /networks"} 1"#,
        ] {
            assert!(text.lines().any(|l| l == line), "no {line} in\n{text}");
        }
    }
}
