//! The one duration grammar (decision 23): what every duration flag, the
//! state file's `grace`, `max_lease` and `ttl`, the MCP `lease` tool's `ttl`
//! and a lease volume's `ca.sandbox.lease.ttl` label accept.
//!
//! A duration is one or more terms, each a whole number and a unit, written
//! together: `s`, `m`, `h` and `d` (`30s`, `10m`, `8h`, `2d`, `1h30m`,
//! `2d12h`), each unit at most once and the larger first, from zero to
//! [`MAX_DURATION`] (3650 days). Where a value was whole seconds before (the
//! command line, a lease label), a bare whole number is seconds too
//! ([`Bare::Seconds`]); the state file asks for a unit ([`Bare::Refused`]).
//! No fractions, no spaces, no `ms`, `w`, `y` or spelled-out units.
//!
//! Owns the grammar and its refusals as typed values with their words (a
//! predicate of the value: "is not a duration: use 30s, 10m, 8h or 2d").
//! Must not quote the value (the caller names it, escaped as its output
//! needs) nor know where the value came from.

use std::fmt;
use std::time::Duration;

/// The longest duration accepted: 3650 days.
pub const MAX_DURATION: Duration = Duration::from_secs(3650 * 86_400);

/// What a good value looks like, the end of every refusal.
pub const HINT: &str = "use 30s, 10m, 8h or 2d";

/// The units, largest first, with their seconds.
const UNITS: [(char, u64); 4] = [('d', 86_400), ('h', 3_600), ('m', 60), ('s', 1)];

/// Whether a bare whole number (`30`) is read as seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bare {
    /// A bare number is seconds (command-line flags, lease labels).
    Seconds,
    /// A bare number is refused: write the unit (the state file).
    Refused,
}

/// Why a text is not a duration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    /// Nothing at all.
    Empty,
    /// A bare number where a unit is asked for.
    NoUnit,
    /// A decimal point or comma (`1.5h`).
    Fraction,
    /// Whitespace inside or around it (`1h 30m`, ` 10m`).
    Space,
    /// A unit the grammar does not have (`ms`, `w`, `y`, `min`, `hours`).
    Unit(String),
    /// A unit twice or a smaller before a larger (`30m1h`, `1m1m`).
    Order,
    /// Longer than [`MAX_DURATION`].
    TooLong,
    /// Anything else (`soon`, `-1s`, `h`).
    Unreadable,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Empty => write!(f, "is empty, not a duration: {HINT}"),
            DurationError::NoUnit => {
                write!(f, "is not a duration (a number needs its unit): {HINT}")
            }
            DurationError::Fraction => write!(
                f,
                "is not a duration (whole numbers only: 90m, not 1.5h): {HINT}"
            ),
            DurationError::Space => write!(
                f,
                "is not a duration (no spaces: 1h30m, not 1h 30m): {HINT}"
            ),
            DurationError::Unit(unit) if unit.chars().count() <= 8 => write!(
                f,
                "is not a duration ({unit} is not a unit: the units are s, m, h and d): {HINT}"
            ),
            DurationError::Unit(_) => {
                write!(f, "is not a duration (the units are s, m, h and d): {HINT}")
            }
            DurationError::Order => write!(
                f,
                "is not a duration (each unit once, the larger first: 1h30m): {HINT}"
            ),
            DurationError::TooLong => write!(
                f,
                "is longer than the limit of {} days: {HINT}",
                MAX_DURATION.as_secs() / 86_400
            ),
            DurationError::Unreadable => write!(f, "is not a duration: {HINT}"),
        }
    }
}

impl std::error::Error for DurationError {}

/// Reads `text` by the grammar of the module header.
pub fn parse(text: &str, bare: Bare) -> Result<Duration, DurationError> {
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    if text.chars().any(char::is_whitespace) {
        return Err(DurationError::Space);
    }
    if text.contains(['.', ',']) {
        return Err(DurationError::Fraction);
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return match bare {
            Bare::Seconds => within(text.parse::<u64>().ok()),
            Bare::Refused => Err(DurationError::NoUnit),
        };
    }
    let mut secs: u64 = 0;
    // The index in UNITS the next term's unit must come after.
    let mut next = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(DurationError::Unreadable);
        }
        let (number, after) = rest.split_at(digits);
        let letters = after
            .find(|c: char| !c.is_alphabetic())
            .unwrap_or(after.len());
        if letters == 0 {
            return Err(DurationError::Unreadable);
        }
        let (unit, after) = after.split_at(letters);
        let Some(at) = UNITS
            .iter()
            .position(|(u, _)| unit.len() == 1 && unit.starts_with(*u))
        else {
            return Err(DurationError::Unit(unit.to_string()));
        };
        if at < next {
            return Err(DurationError::Order);
        }
        next = at + 1;
        let term = number
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(UNITS[at].1));
        secs = match term.and_then(|t| secs.checked_add(t)) {
            Some(s) => s,
            None => return Err(DurationError::TooLong),
        };
        rest = after;
    }
    within(Some(secs))
}

/// `secs` (`None`: too large to hold) as a duration, at most [`MAX_DURATION`].
fn within(secs: Option<u64>) -> Result<Duration, DurationError> {
    match secs {
        Some(s) if s <= MAX_DURATION.as_secs() => Ok(Duration::from_secs(s)),
        _ => Err(DurationError::TooLong),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str, bare: Bare) -> u64 {
        parse(text, bare)
            .unwrap_or_else(|e| panic!("{text:?}: {e}"))
            .as_secs()
    }

    #[test]
    fn the_documented_forms_and_their_sums() {
        for bare in [Bare::Seconds, Bare::Refused] {
            assert_eq!(ok("0s", bare), 0);
            assert_eq!(ok("30s", bare), 30);
            assert_eq!(ok("10m", bare), 600);
            assert_eq!(ok("8h", bare), 8 * 3600);
            assert_eq!(ok("2d", bare), 2 * 86_400);
            assert_eq!(ok("1h30m", bare), 5400);
            assert_eq!(ok("2d12h5m1s", bare), 2 * 86_400 + 12 * 3600 + 301);
            assert_eq!(ok("90s", bare), 90);
            assert_eq!(ok("3650d", bare), MAX_DURATION.as_secs());
            assert_eq!(ok("007s", bare), 7);
        }
        assert_eq!(ok("30", Bare::Seconds), 30);
        assert_eq!(ok("0", Bare::Seconds), 0);
        assert_eq!(parse("30", Bare::Refused), Err(DurationError::NoUnit));
    }

    #[test]
    fn what_humantime_took_and_the_grammar_refuses() {
        use DurationError as E;
        for (text, want) in [
            ("", E::Empty),
            ("soon", E::Unreadable),
            ("-1s", E::Unreadable),
            ("s", E::Unreadable),
            ("10m-", E::Unreadable),
            ("1.5h", E::Fraction),
            ("1,5h", E::Fraction),
            ("1h 30m", E::Space),
            (" 10m", E::Space),
            ("10m\n", E::Space),
            ("1ms", E::Unit("ms".into())),
            ("1y", E::Unit("y".into())),
            ("2w", E::Unit("w".into())),
            ("10sec", E::Unit("sec".into())),
            ("10min", E::Unit("min".into())),
            ("10µs", E::Unit("µs".into())),
            ("10 fortnights", E::Space),
            ("30m1h", E::Order),
            ("1m1m", E::Order),
            ("3651d", E::TooLong),
            ("3650d1s", E::TooLong),
            ("99999999999999999999s", E::TooLong),
            ("18446744073709551615d", E::TooLong),
        ] {
            assert_eq!(parse(text, Bare::Seconds), Err(want.clone()), "{text:?}");
            assert_eq!(parse(text, Bare::Refused), Err(want), "{text:?}");
        }
        assert_eq!(
            parse("99999999999999999999", Bare::Seconds),
            Err(E::TooLong)
        );
    }

    #[test]
    fn every_refusal_ends_with_the_hint_in_our_words() {
        for text in ["", "soon", "1.5h", "1h 30m", "1ms", "30m1h", "3651d", "8"] {
            let e = parse(text, Bare::Refused).unwrap_err().to_string();
            assert!(e.ends_with(": use 30s, 10m, 8h or 2d"), "{text:?}: {e}");
            assert!(!e.contains("expected number"), "{text:?}: {e}");
            assert!(!e.contains("time unit needed"), "{text:?}: {e}");
        }
        assert_eq!(
            parse("soon", Bare::Seconds).unwrap_err().to_string(),
            "is not a duration: use 30s, 10m, 8h or 2d"
        );
        // A long unit is not repeated back.
        let e = DurationError::Unit("x".repeat(100)).to_string();
        assert!(!e.contains("xxx"), "{e}");
    }
}
