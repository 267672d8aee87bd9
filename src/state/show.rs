//! The state file's message dialect: how text from the file (ids, names,
//! keys, values, the TOML parser's own message) appears in an error message.
//! `Shown` quotes and escapes like Rust's `{:?}` (`"a\"b"`, `\0`, `\u{1b}`),
//! `Bare` and `CharText` escape hidden characters only, `clean_message` makes
//! a parser message one line; long text is shortened with its length.
//!
//! Owns only that wording. Must not decide what is allowed (rules.rs does)
//! and must not be used for engine text, which `crate::text` escapes.
//! It stays a dialect of its own because its output is part of the message
//! contract (tests/bad_states/*.expected): `text::escape` writes NUL
//! as `\u{0}` not `\0`, doubles every backslash (`'\'` would become `'\\'`,
//! and so would the `` `\` `` a TOML parser message quotes), and cuts with `…`
//! instead of `... (N characters)`. Only the definition of a hidden
//! character is shared ([`is_hidden`]).

use std::fmt;

use crate::text::is_hidden;

/// How much of a value from the file a message shows before shortening it.
const SHOW_CHARS: usize = 64;
/// How much of a TOML parser message is shown.
const MESSAGE_CHARS: usize = 240;

/// A parser message made safe to print: one line, control and invisible
/// characters escaped, at most [`MESSAGE_CHARS`] characters.
pub(super) fn clean_message(message: &str) -> String {
    let mut out = String::new();
    for (n, c) in message.chars().enumerate() {
        if n == MESSAGE_CHARS {
            out.push_str("...");
            break;
        }
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if is_hidden(c) => out.push_str(&escaped(c).to_string()),
            c => out.push(c),
        }
    }
    out
}

/// A value from the file, quoted and escaped like Rust's `{:?}` (hidden
/// characters as `\u{..}`), shortened past [`SHOW_CHARS`] characters.
pub(super) struct Shown<'a>(pub(super) &'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        shortened(f, self.0, "\"", |f, c| match c {
            '"' => f.write_str("\\\""),
            '\\' => f.write_str("\\\\"),
            c if is_hidden(c) => write!(f, "{}", escaped(c)),
            c => write!(f, "{c}"),
        })
    }
}

/// A character for a message: quoted, hidden characters escaped.
pub(super) struct CharText(pub(super) char);

impl fmt::Display for CharText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            '\'' => f.write_str("'\\''"),
            c if is_hidden(c) => write!(f, "'{}'", escaped(c)),
            c => write!(f, "'{c}'"),
        }
    }
}

/// `\n`, `\t`, `\u{7}`, `\u{202e}`: a hidden character in escaped form.
pub(super) fn escaped(c: char) -> impl fmt::Display {
    if c.is_control() {
        c.escape_debug().to_string()
    } else {
        c.escape_unicode().to_string()
    }
}

/// Text from the file without quotes (for keys in backticks): hidden
/// characters escaped, shortened past [`SHOW_CHARS`] characters.
pub(super) struct Bare<'a>(pub(super) &'a str);

impl fmt::Display for Bare<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        shortened(f, self.0, "", |f, c| {
            if is_hidden(c) {
                write!(f, "{}", escaped(c))
            } else {
                write!(f, "{c}")
            }
        })
    }
}

/// `text` between `quote`s, each character written by `each`, shortened
/// past [`SHOW_CHARS`] characters (then its length said).
fn shortened(
    f: &mut fmt::Formatter<'_>,
    text: &str,
    quote: &str,
    each: fn(&mut fmt::Formatter<'_>, char) -> fmt::Result,
) -> fmt::Result {
    let total = text.chars().count();
    let shown = if total > SHOW_CHARS {
        SHOW_CHARS - 16
    } else {
        total
    };
    f.write_str(quote)?;
    for c in text.chars().take(shown) {
        each(f, c)?;
    }
    f.write_str(quote)?;
    if shown < total {
        write!(f, "... ({total} characters)")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testing::err;

    #[test]
    fn hostile_text_is_escaped_and_shortened_in_messages() {
        let e = err(&format!(
            "[[box]]\nid = \"\\u001b[31m{}\"\n",
            "x".repeat(5000)
        ));
        assert!(!e.contains('\u{1b}'), "{e}");
        assert!(e.contains("\"\\u{1b}[31m"), "{e}");
        assert!(e.contains("(5005 characters)"), "{e}");
        assert!(e.len() < 400, "{e}");
        let e = err(&format!("\"\\u202e{}\" = 1\n", "k".repeat(5000)));
        assert!(!e.contains('\u{202e}'), "{e}");
        assert!(e.len() < 500, "{e}");
        assert_eq!(clean_message("a\nb\u{7}"), "a b\\u{7}");
    }
}
