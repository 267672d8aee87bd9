//! The nesting scan: before TOML parsing, brackets (`[`, `{`) nested more
//! than [`MAX_NESTING`] deep and more than [`MAX_KEY_DOTS`] `.` on one line
//! (dotted keys nest tables too) are refused, outside strings and comments.
//! A valid state file needs 2 and 1. The `toml` crate's own limit (80, and
//! none at all if any crate in the build enables its `unbounded` feature) is
//! not enough: 80 nested inline tables overflow a 256 KiB stack in a debug
//! build, and a dotted key over its limit is refused without a position.
//!
//! Owns those two limits and the lexer that finds them. Must never refuse a
//! file the format would accept: it never looks inside strings or comments,
//! and it checks nothing else.

use std::path::Path;

use super::error::{line_col, StateError, StateErrorKind};

/// How deep `[` and `{` may nest (outside strings and comments); a valid file needs 2.
pub const MAX_NESTING: usize = 16;
/// How many `.` may appear on one line outside strings and comments; a valid file needs 1.
pub(crate) const MAX_KEY_DOTS: usize = 16;

/// Refuses `text` when [`scan_nesting`] finds a limit exceeded; the error
/// points at the bracket or dot over the limit.
pub(super) fn check_nesting(text: &str, path: &Path) -> Result<(), StateError> {
    let Some((offset, what)) = scan_nesting(text) else {
        return Ok(());
    };
    let kind = match what {
        TooNested::Brackets => StateErrorKind::TooDeep { limit: MAX_NESTING },
        TooNested::Dots => StateErrorKind::TooManyKeyDots {
            limit: MAX_KEY_DOTS,
        },
    };
    Err(StateError::new(path, Some(line_col(text, offset)), kind))
}

enum TooNested {
    Brackets,
    Dots,
}

/// Finds the first `[`/`{` nested deeper than [`MAX_NESTING`], or the first `.`
/// beyond [`MAX_KEY_DOTS`] on one line, outside strings and comments. Only an
/// approximation of TOML's grammar, but it never looks inside strings or
/// comments, so it cannot refuse a file that the format would accept.
fn scan_nesting(text: &str) -> Option<(usize, TooNested)> {
    #[derive(Clone, Copy, PartialEq)]
    enum Lex {
        Code,
        Comment,
        Basic,
        MultiBasic,
        Literal,
        MultiLiteral,
    }
    let b = text.as_bytes();
    let (mut i, mut depth, mut dots, mut lex) = (0, 0usize, 0usize, Lex::Code);
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            dots = 0;
        }
        match lex {
            Lex::Code => match c {
                b'#' => lex = Lex::Comment,
                b'"' if b[i..].starts_with(b"\"\"\"") => {
                    lex = Lex::MultiBasic;
                    i += 3;
                    continue;
                }
                b'"' => lex = Lex::Basic,
                b'\'' if b[i..].starts_with(b"'''") => {
                    lex = Lex::MultiLiteral;
                    i += 3;
                    continue;
                }
                b'\'' => lex = Lex::Literal,
                b'[' | b'{' => {
                    depth += 1;
                    if depth > MAX_NESTING {
                        return Some((i, TooNested::Brackets));
                    }
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                b'.' => {
                    dots += 1;
                    if dots > MAX_KEY_DOTS {
                        return Some((i, TooNested::Dots));
                    }
                }
                _ => {}
            },
            Lex::Comment => {
                if c == b'\n' {
                    lex = Lex::Code;
                }
            }
            Lex::Basic => match c {
                b'\\' if b.get(i + 1) != Some(&b'\n') => {
                    i += 2;
                    continue;
                }
                b'"' | b'\n' => lex = Lex::Code,
                _ => {}
            },
            Lex::MultiBasic => match c {
                b'\\' if b.get(i + 1) != Some(&b'\n') => {
                    i += 2;
                    continue;
                }
                b'"' if b[i..].starts_with(b"\"\"\"") => {
                    lex = Lex::Code;
                    i += 3;
                    continue;
                }
                _ => {}
            },
            Lex::Literal => {
                if c == b'\'' || c == b'\n' {
                    lex = Lex::Code;
                }
            }
            Lex::MultiLiteral => {
                if b[i..].starts_with(b"'''") {
                    lex = Lex::Code;
                    i += 3;
                    continue;
                }
            }
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testing::parse;

    #[test]
    fn deep_nesting_is_refused_by_the_scan() {
        for (text, limit_hit) in [
            (format!("a = {}", "[".repeat(10_000)), "brackets nested"),
            (format!("a = {}", "{b=".repeat(10_000)), "brackets nested"),
            (
                format!("a{} = 1", ".a".repeat(10_000)),
                "'.' outside quotes",
            ),
            (format!("[a{}]", ".a".repeat(100)), "'.' outside quotes"),
        ] {
            let e = parse(&text).unwrap_err();
            assert!(e.to_string().contains(limit_hit), "{e}");
        }
        // Nesting just within the limit reaches the parser (and fails on schema).
        let text = format!("a = {}{}", "[".repeat(MAX_NESTING), "]".repeat(MAX_NESTING));
        assert!(matches!(
            parse(&text).unwrap_err().kind,
            StateErrorKind::UnknownKey { .. }
        ));
    }

    #[test]
    fn the_scan_ignores_strings_and_comments() {
        let deep = "[".repeat(100);
        let dots = ".".repeat(100);
        let text = format!(
            "# {deep} {dots}\n[scope]\nlabels = {{ \"{dots}a\" = \"{deep}\\\"{deep}\" }}\n\
             [[box]] # {deep}\nid = 'x{dots}'\n[volumes]\nkeep = [\"\"\"a{deep}\n\"\"\"]\n\
             # '''{deep}\n"
        );
        let e = parse(&text).unwrap_err();
        // Reached validation: the first complaint is the label key, not the nesting.
        assert!(
            matches!(e.kind, StateErrorKind::InvalidScopeLabel { .. }),
            "{e}"
        );
        assert!(scan_nesting(&format!("a = '''{deep}'''\nb = \"\"\"{dots}\"\"\"")).is_none());
    }
}
