//! Natural order of names: `cb1`, `cb2`, `cb10`, not `cb1`, `cb10`, `cb2`.
//!
//! Owns the one comparison every sorted listing of names uses ([`Natural`]):
//! runs of ASCII digits compare as numbers (leading zeros ignored, so no
//! overflow at any length), the rest by code point, and two names equal
//! that way (`a01`, `a1`) fall back to plain order, so the order is total
//! and consistent with `Eq`: output stays deterministic. Must not allocate.

use std::cmp::Ordering;

/// A name ordered naturally (see the module header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Natural<'a>(pub &'a str);

impl Ord for Natural<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        natural_cmp(self.0, other.0)
    }
}

impl PartialOrd for Natural<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// `a` against `b` in natural order, ties broken by plain order.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    loop {
        match (x.first(), y.first()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let (n, rest_x) = digits(x);
                let (m, rest_y) = digits(y);
                let by_number = n.len().cmp(&m.len()).then_with(|| n.cmp(m));
                if by_number != Ordering::Equal {
                    return by_number;
                }
                (x, y) = (rest_x, rest_y);
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(d);
                }
                (x, y) = (&x[1..], &y[1..]);
            }
        }
    }
}

/// The leading run of digits of `s` without its leading zeros, and the rest.
fn digits(s: &[u8]) -> (&[u8], &[u8]) {
    let end = s
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(s.len());
    let (run, rest) = s.split_at(end);
    let zeros = run.iter().take_while(|&&b| b == b'0').count();
    (&run[zeros..], rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_names_sort_as_numbers() {
        let mut names = vec![
            "cb10", "cb2", "cb1", "cb11", "cb", "cb1a", "ca9", "d", "cb02",
        ];
        names.sort_by_key(|n| Natural(n));
        assert_eq!(
            names,
            ["ca9", "cb", "cb1", "cb1a", "cb02", "cb2", "cb10", "cb11", "d"]
        );
    }

    #[test]
    fn the_order_is_total_and_never_overflows() {
        assert_eq!(natural_cmp("a01", "a1"), "a01".cmp("a1"));
        assert_ne!(natural_cmp("a01", "a1"), Ordering::Equal);
        let long = format!("x{}", "9".repeat(60));
        assert_eq!(natural_cmp(&long, "x10"), Ordering::Greater);
        assert_eq!(natural_cmp("x", "x"), Ordering::Equal);
        // Non-ASCII text keeps byte (code point) order.
        assert_eq!(natural_cmp("é2", "é10"), Ordering::Less);
    }
}
