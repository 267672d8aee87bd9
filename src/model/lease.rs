//! The lease protocol's labels and the reading of a lease's ttl.
//!
//! A lease is a managed volume of a box (labels `ca.sandbox=1`, the scope,
//! `ca.sandbox.id=<box>`) that also carries `ca.sandbox.lease.ttl=<duration>`.
//! It holds until the engine-stamped creation time plus the ttl, judged by
//! the engine's clock. Owns the label name, the volume-name convention and
//! the one parser of the ttl, whose failures are typed (`TtlError`). Pure;
//! the label's value is engine-given, untrusted text: nothing here trusts
//! its length or its characters.

use std::fmt;

use serde::{Deserialize, Serialize};

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

/// Reads a lease's ttl (seconds): a duration with units as humantime reads
/// them (`15m`, `1h30m`, `90s`) or whole seconds (`900`), over zero and at
/// most `max_lease`. Anything else, whatever its length or characters, is an
/// error: such a volume is not a lease.
pub fn parse_ttl(text: &str, max_lease: u64) -> Result<u64, TtlError> {
    if text.is_empty()
        || text.len() > MAX_TTL_TEXT
        || !text.bytes().all(|b| b.is_ascii_alphanumeric())
    {
        return Err(TtlError::Unreadable);
    }
    let secs = if text.bytes().all(|b| b.is_ascii_digit()) {
        text.parse::<u64>().map_err(|_| TtlError::Unreadable)?
    } else {
        let d = humantime::parse_duration(text).map_err(|_| TtlError::Unreadable)?;
        if d.subsec_nanos() != 0 {
            return Err(TtlError::Unreadable);
        }
        d.as_secs()
    };
    if secs == 0 {
        return Err(TtlError::Zero);
    }
    if secs > max_lease {
        return Err(TtlError::OverCeiling { max_lease });
    }
    Ok(secs)
}

/// Seconds in the shortest words humantime gives (`15m`, `1h 30m`, `24h`).
pub fn words(secs: u64) -> String {
    humantime::format_duration(std::time::Duration::from_secs(secs)).to_string()
}

/// A ttl as a lease label carries it: whole seconds with a unit (`900s`),
/// which every reader of the protocol can parse.
pub fn ttl_label(secs: u64) -> String {
    format!("{secs}s")
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // Past u64 seconds: unreadable, never a wrap-around to a short lease.
        assert_eq!(
            parse_ttl("99999999999999999999", max),
            Err(TtlError::Unreadable)
        );
    }
}
