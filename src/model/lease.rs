//! The lease protocol's labels and the reading of a lease's ttl.
//!
//! A lease is a managed volume of a box (labels `ca.sandbox=1`, the scope,
//! `ca.sandbox.id=<box>`) that also carries `ca.sandbox.lease.ttl=<duration>`.
//! It holds until the engine-stamped creation time plus the ttl, judged by
//! the engine's clock. Owns the label name, the volume-name convention and
//! the one parser of the ttl, whose failures are typed (`TtlError`). Pure;
//! the label's value is engine-given, untrusted text: nothing here trusts
//! its length or its characters. Also owns the labels a new lease carries
//! ([`lease_labels`]) and the one test of "a lease of this box in this
//! scope" ([`is_lease_of`]) that every lease removal passes first.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::{Labels, Scope, BOX_ID_LABEL, SANDBOX_LABEL, SANDBOX_VALUE};

/// The label that makes a managed volume a lease, valued with its duration.
pub const LEASE_TTL_LABEL: &str = "ca.sandbox.lease.ttl";

/// The ceiling of a lease's ttl when the state file sets none (`[policy] max_lease`).
pub const DEFAULT_MAX_LEASE: u64 = 24 * 3600;

/// Lease volumes are named `ca-sbx-lease-<box>-<suffix>` (a convention for
/// people; the labels alone make a lease).
pub const LEASE_NAME_PREFIX: &str = "ca-sbx-lease-";

/// The longest ttl text read; anything longer is not a lease.
const MAX_TTL_TEXT: usize = 32;

/// Why a `ca.sandbox.lease.ttl` value is not a lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "problem", rename_all = "camelCase")]
pub enum TtlError {
    /// Not a duration (`15m`, `2h`, `90s`, or whole seconds), or negative.
    Unreadable,
    /// Zero: a lease that never held.
    Zero,
    /// Longer than `[policy] max_lease` (seconds).
    #[serde(rename_all = "camelCase")]
    OverCeiling { max_lease: u64 },
}

impl fmt::Display for TtlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TtlError::Unreadable => {
                f.write_str("is not a duration (write 15m, 2h, 90s or whole seconds)")
            }
            TtlError::Zero => f.write_str("is zero"),
            TtlError::OverCeiling { max_lease } => write!(
                f,
                "is longer than [policy] max_lease ({})",
                crate::model::lease::words(*max_lease)
            ),
        }
    }
}

/// Reads a lease's ttl (seconds) by the one duration grammar
/// (`model::duration`, a bare number being seconds): `15m`, `1h30m`, `90s`
/// or whole seconds (`900`), over zero and at most `max_lease`. Anything
/// else, whatever its length or characters, is an error: such a volume is
/// not a lease.
pub fn parse_ttl(text: &str, max_lease: u64) -> Result<u64, TtlError> {
    if text.len() > MAX_TTL_TEXT {
        return Err(TtlError::Unreadable);
    }
    let secs = super::duration::parse(text, super::duration::Bare::Seconds)
        .map_err(|e| match e {
            // Past the grammar's 3650 days is past any ceiling.
            super::duration::DurationError::TooLong => TtlError::OverCeiling { max_lease },
            _ => TtlError::Unreadable,
        })?
        .as_secs();
    if secs == 0 {
        return Err(TtlError::Zero);
    }
    if secs > max_lease {
        return Err(TtlError::OverCeiling { max_lease });
    }
    Ok(secs)
}

/// Seconds in hours, minutes and seconds, as a ttl is written (`15m`,
/// `1h30m`, `24h`, `90s`), which `parse_ttl` reads back.
pub fn words(secs: u64) -> String {
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    let mut out = String::new();
    for (n, unit) in [(h, "h"), (m, "m"), (s, "s")] {
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
        }
    }
    if out.is_empty() {
        out.push_str("0s");
    }
    out
}

/// A ttl as a lease label carries it: whole seconds with a unit (`900s`),
/// which every reader of the protocol can parse.
pub fn ttl_label(secs: u64) -> String {
    format!("{secs}s")
}

/// The name of a new lease volume of `box_id`: `ca-sbx-lease-<box>-<suffix>`.
/// Any character of the box ID outside a volume name's `[a-zA-Z0-9_.-]` is
/// written `_` (in the name only: the label carries the exact ID); so is any
/// such character of `suffix`. The caller makes `suffix` new (Docker answers
/// an existing name with that volume, unchanged).
pub fn lease_name(box_id: &str, suffix: &str) -> String {
    let safe = |c: char| {
        if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
            c
        } else {
            '_'
        }
    };
    let mut name = String::from(LEASE_NAME_PREFIX);
    name.extend(box_id.chars().map(safe));
    name.push('-');
    name.extend(suffix.chars().map(safe));
    name
}

/// The labels of a new lease of `box_id` in `scope` for `ttl_secs`:
/// `ca.sandbox=1`, every scope label, `ca.sandbox.id=<box>` and
/// `ca.sandbox.lease.ttl=<ttl>s`.
pub fn lease_labels(scope: &Scope, box_id: &str, ttl_secs: u64) -> Labels {
    let mut labels = scope.labels.clone();
    labels.insert(SANDBOX_LABEL.to_string(), SANDBOX_VALUE.to_string());
    labels.insert(BOX_ID_LABEL.to_string(), box_id.to_string());
    labels.insert(LEASE_TTL_LABEL.to_string(), ttl_label(ttl_secs));
    labels
}

/// True only for a lease of exactly `box_id` in `scope`: managed
/// (`Scope::manages`: `ca.sandbox=1` and every scope label), carrying
/// `ca.sandbox.id` with exactly that value and a lease label (whatever its
/// value: a lease that does not read is still this box's lease to release).
/// Nothing else is ever removed as a lease.
pub fn is_lease_of(scope: &Scope, box_id: &str, labels: &Labels) -> bool {
    scope.manages(labels)
        && labels.get(BOX_ID_LABEL).map(String::as_str) == Some(box_id)
        && labels.contains_key(LEASE_TTL_LABEL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_names_are_volume_names_and_labels_carry_the_exact_box() {
        assert_eq!(
            lease_name("box-1.a_b", "18c-2a"),
            "ca-sbx-lease-box-1.a_b-18c-2a"
        );
        assert_eq!(lease_name("a b/c\u{1b}", "x:y"), "ca-sbx-lease-a_b_c_-x_y");
        let scope = Scope::new(Labels::from([("team".to_string(), "a".to_string())]));
        let labels = lease_labels(&scope, "a b", 900);
        assert_eq!(labels.get("ca.sandbox.id").map(String::as_str), Some("a b"));
        assert_eq!(
            labels.get(LEASE_TTL_LABEL).map(String::as_str),
            Some("900s")
        );
        assert!(is_lease_of(&scope, "a b", &labels));
        assert!(!is_lease_of(&scope, "a", &labels), "another box");
        assert!(!is_lease_of(
            &Scope::new(Labels::from([("team".to_string(), "b".to_string())])),
            "a b",
            &labels
        ));
        let mut lookalike = labels.clone();
        lookalike.insert("ca.sandbox".into(), "true".into());
        assert!(!is_lease_of(&scope, "a b", &lookalike));
        let mut plain = labels.clone();
        plain.remove(LEASE_TTL_LABEL);
        assert!(!is_lease_of(&scope, "a b", &plain), "not a lease");
    }

    #[test]
    fn words_read_back_as_the_same_ttl() {
        for (secs, text) in [
            (86_400, "24h"),
            (5400, "1h30m"),
            (900, "15m"),
            (90, "1m30s"),
            (0, "0s"),
        ] {
            assert_eq!(words(secs), text);
        }
        assert_eq!(parse_ttl(&words(5430), DEFAULT_MAX_LEASE), Ok(5430));
    }

    #[test]
    fn durations_and_whole_seconds_are_ttls() {
        assert_eq!(parse_ttl("15m", DEFAULT_MAX_LEASE), Ok(900));
        assert_eq!(parse_ttl("1h30m", DEFAULT_MAX_LEASE), Ok(5400));
        assert_eq!(parse_ttl("900", DEFAULT_MAX_LEASE), Ok(900));
        assert_eq!(parse_ttl("24h", DEFAULT_MAX_LEASE), Ok(86_400));
    }

    #[test]
    fn hostile_ttls_are_not_leases() {
        let max = DEFAULT_MAX_LEASE;
        for text in [
            "",
            "-5s",
            "-5",
            "garbage",
            "5 m",
            " 5m",
            "5m\n",
            "1.5s",
            "1ms",
            "1y",
            "15min",
            "30m1h",
            "5\u{1b}[2Jm",
        ] {
            assert_eq!(parse_ttl(text, max), Err(TtlError::Unreadable), "{text:?}");
        }
        assert_eq!(parse_ttl(&"9".repeat(40), max), Err(TtlError::Unreadable));
        assert_eq!(parse_ttl("0s", max), Err(TtlError::Zero));
        assert_eq!(parse_ttl("0", max), Err(TtlError::Zero));
        for text in ["9999999h", "24h1s", "86401", "18446744073709551615"] {
            assert_eq!(
                parse_ttl(text, max),
                Err(TtlError::OverCeiling { max_lease: max }),
                "{text:?}"
            );
        }
        // Past u64 seconds: over the ceiling, never a wrap-around to a short lease.
        assert_eq!(
            parse_ttl("99999999999999999999", max),
            Err(TtlError::OverCeiling { max_lease: max })
        );
    }
}
