//! Untrusted text made safe for a terminal: names, label values and error
//! messages come from the engine (or a state file) and may hold escape
//! sequences, newlines, bidi overrides or thousands of characters.
//!
//! Owns the one definition of a hidden character and the escaped, shortened
//! form of a string. Pure; must not be applied to JSON (which keeps exact values).

use std::borrow::Cow;

/// Control characters and invisible formatting characters (bidi overrides,
/// zero-width characters, BOM, line and paragraph separators) that must never
/// reach a terminal unescaped.
pub(crate) fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

/// `\n`, `\t`, `\u{1b}`, `\u{202e}`: a hidden character in escaped form.
fn escape_char(c: char, out: &mut String) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
    }
}

/// `text` with every hidden character escaped (and the backslash itself, so an
/// escape cannot be forged); unchanged (borrowed) when there is none.
pub(crate) fn escape(text: &str) -> Cow<'_, str> {
    // Printable ASCII but the backslash (the common case) needs no escape.
    let printable = |b: u8| (b' '..=b'~').contains(&b) && b != b'\\';
    if text.bytes().all(printable) || !text.chars().any(|c| is_hidden(c) || c == '\\') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if is_hidden(c) => escape_char(c, &mut out),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `text` escaped, then cut to at most `max` characters with an ellipsis.
pub(crate) fn clip(text: &str, max: usize) -> Cow<'_, str> {
    let escaped = escape(text);
    // No more bytes than `max` means no more characters either.
    if escaped.len() <= max || escaped.chars().count() <= max {
        return escaped;
    }
    let mut out: String = escaped.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    Cow::Owned(out)
}

/// Escapes every line of a multi-line message we wrote ourselves, keeping its
/// own line breaks and escaping everything else.
pub(crate) fn escape_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&escape(line));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_text_is_escaped() {
        assert_eq!(escape("plain name"), "plain name");
        assert_eq!(escape("\u{1b}[31mRED\u{1b}[0m"), "\\u{1b}[31mRED\\u{1b}[0m");
        assert_eq!(escape("a\nb"), "a\\nb");
        assert_eq!(escape("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(escape("zero\u{200b}width"), "zero\\u{200b}width");
        assert_eq!(escape("a\\u{1b}"), "a\\\\u{1b}");
        assert_eq!(escape("\u{9b}31m"), "\\u{9b}31m");
    }

    #[test]
    fn long_text_is_cut_with_an_ellipsis() {
        let long = "x".repeat(5000);
        let cut = clip(&long, 40);
        assert_eq!(cut.chars().count(), 40);
        assert!(cut.ends_with('…'));
        assert_eq!(clip("short", 40), "short");
    }
}
