//! Leases as the planner sees them: which managed volumes are leases, which
//! hold, until when, and which are not leases (with why).
//!
//! Owns judging a lease: it holds while the engine's clock is before the
//! volume's engine-stamped creation plus its ttl. The engine's clock is the
//! plan's time moved by the skew the listing measured (`Inventory::skew_ms`),
//! so a driver's or this machine's clock can neither shorten nor stretch a
//! lease. Pure: no engine call, no clock. Must not decide what is kept: the
//! planner does, with a lease ranked as grace is.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::lease::{parse_ttl, TtlError, DEFAULT_MAX_LEASE, LEASE_TTL_LABEL};
use crate::model::time::rfc3339;
use crate::model::Natural;
use crate::model::{cut, Kind};
use crate::plan::inventory::Inventory;

/// The most characters of a ttl label quoted in a plan.
const QUOTED_TTL: usize = 40;

/// What one lease volume is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum LeaseState {
    /// It holds until `until` (the engine's clock).
    Live { until: String },
    /// It ran out at `until` (the engine's clock).
    Expired { until: String },
    /// Not a lease: its ttl label does not read, or is over the ceiling.
    /// The box falls back to the grace rule.
    Invalid {
        #[serde(flatten)]
        problem: LeaseProblem,
    },
}

impl std::fmt::Display for LeaseState {
    /// `holds until T`, `ran out at T`, `not a lease: <why>` (times on the
    /// engine's clock; raw, not escaped).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeaseState::Live { until } => write!(f, "holds until {until}"),
            LeaseState::Expired { until } => write!(f, "ran out at {until}"),
            LeaseState::Invalid { problem } => write!(f, "not a lease: {problem}"),
        }
    }
}

/// Why a volume with a lease label is not a lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
#[serde(tag = "problem", rename_all = "camelCase")]
pub enum LeaseProblem {
    /// The ttl is not a duration (or is negative, or too long to read).
    Unreadable,
    /// The ttl is zero.
    Zero,
    /// The ttl is over `[policy] max_lease` (seconds).
    #[serde(rename_all = "camelCase")]
    OverCeiling { max_lease: u64 },
    /// The engine gave the volume no creation time to count from.
    Undated,
}

impl From<TtlError> for LeaseProblem {
    fn from(e: TtlError) -> Self {
        match e {
            TtlError::Unreadable => LeaseProblem::Unreadable,
            TtlError::Zero => LeaseProblem::Zero,
            TtlError::OverCeiling { max_lease } => LeaseProblem::OverCeiling { max_lease },
        }
    }
}

impl std::fmt::Display for LeaseProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ttl = |e: TtlError| format!("its {LEASE_TTL_LABEL} label {e}");
        match self {
            LeaseProblem::Unreadable => f.write_str(&ttl(TtlError::Unreadable)),
            LeaseProblem::Zero => f.write_str(&ttl(TtlError::Zero)),
            LeaseProblem::OverCeiling { max_lease } => f.write_str(&ttl(TtlError::OverCeiling {
                max_lease: *max_lease,
            })),
            LeaseProblem::Undated => f.write_str("the engine gives it no creation time"),
        }
    }
}

/// One volume carrying a lease label, as the plan shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct LeaseNote {
    /// The lease volume's name.
    pub volume: String,
    #[serde(rename = "box")]
    pub box_id: String,
    /// The ttl label as the engine gave it (cut short; raw, not escaped).
    pub ttl: String,
    #[serde(flatten)]
    pub state: LeaseState,
}

/// The engine's clock as the plan judged leases by it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct EngineClock {
    /// The plan's time on the engine's clock (RFC 3339).
    pub now: String,
    /// How far the engine's clock is ahead of this machine's, in whole
    /// seconds (negative: behind).
    pub skew_seconds: i64,
}

/// A box's live lease: the latest-running one when it has several.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Held {
    /// Until when (Unix seconds, the engine's clock).
    pub(crate) until: i64,
    /// The lease volume that holds that long.
    pub(crate) lease: String,
}

/// Every lease of one inventory, judged at one time.
#[derive(Debug, Default)]
pub(crate) struct Leases {
    /// Per box, its live lease.
    pub(crate) held: BTreeMap<String, Held>,
    /// Every volume with a lease label, sorted by box, then volume.
    pub(crate) notes: Vec<LeaseNote>,
    /// The clock leases were judged by, when the listing read it.
    pub(crate) clock: Option<EngineClock>,
}

impl Leases {
    /// Judges every managed volume of `inv` carrying a lease label, at `now`
    /// (this machine's Unix seconds) moved to the engine's clock. `max_lease`
    /// is the ceiling of a ttl (seconds; `None`: 24 hours).
    pub(crate) fn of(inv: &Inventory, now: i64, max_lease: Option<u64>) -> Leases {
        let max_lease = max_lease.unwrap_or(DEFAULT_MAX_LEASE);
        let skew = inv.skew_ms.map(|ms| (ms as f64 / 1000.0).round() as i64);
        let engine_now = now.saturating_add(skew.unwrap_or(0));
        let mut leases = Leases {
            clock: skew.map(|skew_seconds| EngineClock {
                now: rfc3339(engine_now),
                skew_seconds,
            }),
            ..Leases::default()
        };
        for o in inv.of_kind(Kind::Volume) {
            let (Some(ttl), Some(box_id)) = (o.labels.get(LEASE_TTL_LABEL), o.box_id()) else {
                continue;
            };
            let state = match (parse_ttl(ttl, max_lease), o.created) {
                (Err(why), _) => LeaseState::Invalid {
                    problem: why.into(),
                },
                (Ok(_), None) => LeaseState::Invalid {
                    problem: LeaseProblem::Undated,
                },
                (Ok(secs), Some(created)) => {
                    let until = created.saturating_add(i64::try_from(secs).unwrap_or(i64::MAX));
                    if engine_now < until {
                        let held = leases.held.entry(box_id.to_string()).or_insert(Held {
                            until,
                            lease: o.name.clone(),
                        });
                        if (until, &o.name) > (held.until, &held.lease) {
                            *held = Held {
                                until,
                                lease: o.name.clone(),
                            };
                        }
                        LeaseState::Live {
                            until: rfc3339(until),
                        }
                    } else {
                        LeaseState::Expired {
                            until: rfc3339(until),
                        }
                    }
                }
            };
            leases.notes.push(LeaseNote {
                volume: o.name.clone(),
                box_id: box_id.to_string(),
                ttl: cut(ttl, QUOTED_TTL).into_owned(),
                state,
            });
        }
        leases.notes.sort_by(|a, b| {
            (Natural(&a.box_id), Natural(&a.volume)).cmp(&(Natural(&b.box_id), Natural(&b.volume)))
        });
        leases
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Labels, Object, Scope};

    fn lease(name: &str, box_id: &str, ttl: &str, created: i64) -> Object {
        let mut o = Object::new("default", Kind::Volume, name, name);
        o.labels = Labels::from([
            ("ca.sandbox".to_string(), "1".to_string()),
            ("ca.sandbox.id".to_string(), box_id.to_string()),
            (LEASE_TTL_LABEL.to_string(), ttl.to_string()),
        ]);
        o.created = Some(created);
        o
    }

    fn inventory(objects: Vec<Object>, skew_ms: Option<i64>) -> Inventory {
        let mut inv =
            Inventory::from_listings("default", Scope::default(), objects, vec![], vec![]);
        inv.skew_ms = skew_ms;
        inv
    }

    #[test]
    fn the_latest_running_lease_of_a_box_holds_it() {
        let inv = inventory(
            vec![
                lease("l1", "a", "60s", 1000),
                lease("l2", "a", "60s", 1030),
                lease("l3", "b", "10s", 1000),
            ],
            None,
        );
        let leases = Leases::of(&inv, 1050, None);
        assert_eq!(
            leases.held.get("a"),
            Some(&Held {
                until: 1090,
                lease: "l2".into()
            })
        );
        assert!(!leases.held.contains_key("b"), "b's lease ran out at 1010");
        assert!(matches!(leases.notes[2].state, LeaseState::Expired { .. }));
    }

    #[test]
    fn leases_are_judged_by_the_engine_clock() {
        // The engine's clock is an hour behind: its stamps and its now both.
        let inv = inventory(vec![lease("l", "a", "30s", 1000)], Some(-3_600_000));
        assert!(Leases::of(&inv, 1000 + 3600 + 10, None)
            .held
            .contains_key("a"));
        assert!(!Leases::of(&inv, 1000 + 3600 + 30, None)
            .held
            .contains_key("a"));
        assert_eq!(
            Leases::of(&inv, 0, None).clock.map(|c| c.skew_seconds),
            Some(-3600)
        );
    }

    #[test]
    fn a_hostile_ttl_is_not_a_lease() {
        for ttl in ["9999999h", "garbage", "-5s", "0s"] {
            let inv = inventory(vec![lease("l", "a", ttl, 1000)], None);
            let leases = Leases::of(&inv, 1001, None);
            assert!(leases.held.is_empty(), "{ttl}");
            assert!(
                matches!(leases.notes[0].state, LeaseState::Invalid { .. }),
                "{ttl}"
            );
        }
        // Under a lower ceiling, a day is too long.
        let inv = inventory(vec![lease("l", "a", "24h", 1000)], None);
        assert!(Leases::of(&inv, 1001, Some(3600)).held.is_empty());
    }
}
