//! The health rule: what `/healthz` answers, from what is remembered of
//! the cycles and the clock.
//!
//! Owns `Cycles` (whether the last cycle converged, when the last converged
//! one finished, whether a failed one was degraded) and the rule that turns
//! it into 200 or 503 and a one-line reason. Pure: the clock is an input.
//! Must not count metrics, serve HTTP, or decide anything about
//! reconciling; the endpoint (`endpoint.rs`) only writes out its answer.

use std::time::{Duration, Instant};

use hyper::StatusCode;

use crate::exec::probe::DEGRADED;

/// What the health rule and the age gauge need to know about cycles.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Cycles {
    /// Whether the most recent cycle converged, if any cycle has finished.
    last_converged: Option<bool>,
    /// When the most recent converged cycle finished.
    pub(super) last_converged_at: Option<Instant>,
    /// Whether the most recent cycle, failed, was degraded: every engine
    /// answered, and what a stuck or failed call blocked stayed while the
    /// rest was reaped.
    last_degraded: bool,
}

impl Cycles {
    /// Remembers a finished cycle: whether it converged, whether a failed
    /// one was degraded, and when it finished.
    pub(super) fn record(&mut self, converged: bool, degraded: bool, now: Instant) {
        self.last_converged = Some(converged);
        self.last_degraded = !converged && degraded;
        if converged {
            self.last_converged_at = Some(now);
        }
    }

    /// Healthy while the last cycle converged, or while the last converged
    /// cycle finished less than two `resync` periods before `now`. Unhealthy
    /// before any cycle has finished, and when cycles have been failing for
    /// two resyncs or more. (A loop that stops running cycles after a
    /// converged one stays healthy under this rule.)
    pub(super) fn health_at(&self, now: Instant, resync: Duration) -> Health {
        let limit = resync.saturating_mul(2);
        let age = self
            .last_converged_at
            .map(|at| now.saturating_duration_since(at));
        match (self.last_converged, age) {
            (None, _) => Health::unhealthy("no reconcile cycle has finished yet".into()),
            (Some(false), _) if self.last_degraded => Health::healthy(format!(
                "{DEGRADED}the last cycle reaped what it could, but a listing or an inspection failed or hung (see sandboxctl_call_timeouts_total); last converged cycle {}",
                age.map_or("never".to_string(), |a| format!("{} ago", secs(a)))
            )),
            (Some(true), Some(age)) => {
                Health::healthy(format!("last cycle converged {} ago", secs(age)))
            }
            (Some(_), Some(age)) if age < limit => Health::healthy(format!(
                "last cycle failed; last converged cycle {} ago, within 2 × resync = {}",
                secs(age),
                secs(limit)
            )),
            (Some(_), Some(age)) => Health::unhealthy(format!(
                "last cycle failed; last converged cycle {} ago, not within 2 × resync = {}",
                secs(age),
                secs(limit)
            )),
            (Some(_), None) => {
                Health::unhealthy("last cycle failed; no cycle has converged yet".into())
            }
        }
    }
}

/// The answer of `/healthz`: 200 or 503, and a one-line reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Health {
    healthy: bool,
    /// One line, no trailing newline.
    pub(super) detail: String,
}

impl Health {
    fn healthy(detail: String) -> Self {
        Health {
            healthy: true,
            detail,
        }
    }

    fn unhealthy(detail: String) -> Self {
        Health {
            healthy: false,
            detail,
        }
    }

    /// 200 when healthy, 503 otherwise.
    pub(super) fn status(&self) -> StatusCode {
        if self.healthy {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        }
    }
}

/// Seconds with one decimal, e.g. `12.5s`.
fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// Through the registry, as the endpoint asks: what `watch` records is what
/// the rule judges.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::metrics::tests::FakeClock;

    #[test]
    fn a_degraded_cycle_is_healthy_and_says_so_and_a_dead_one_is_not() {
        let clock = FakeClock::new();
        let metrics = clock.metrics();
        let resync = Duration::from_secs(60);
        metrics.record_cycle_of(Duration::from_secs(1), false, true, clock.now());
        let health = metrics.health(resync);
        assert_eq!(health.status(), StatusCode::OK);
        assert!(health.detail.starts_with("degraded: "), "{}", health.detail);
        assert!(health.detail.ends_with("last converged cycle never"));
        // A failure that is not a degraded discovery (an engine down) is dead.
        metrics.record_cycle_of(Duration::from_secs(1), false, false, clock.now());
        let health = metrics.health(resync);
        assert_eq!(health.status(), StatusCode::SERVICE_UNAVAILABLE);
    }

    #[test]
    fn failing_from_the_start_is_unhealthy() {
        let clock = FakeClock::new();
        let metrics = clock.metrics();
        metrics.record_cycle(Duration::from_secs(1), false, clock.now());
        let health = metrics.health(Duration::from_secs(60));
        assert_eq!(health.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            health.detail,
            "last cycle failed; no cycle has converged yet"
        );
    }
}
