//! The error document (`error.schema.json`): what every command prints on
//! stdout under `--format json` when it is refused before any work, in one
//! shape, `{"schemaVersion": 2, "error": {"code", "text", ...}}`. The human
//! message stays on stderr, as `render::error` (or clap) says it.
//!
//! JSON keeps the exact text (serde escapes control characters). Must not
//! decide what a refusal is (`cli::refusal` does) nor where it goes (`run`).

use crate::model::Refusal;
use crate::render::document;

/// The error document (`error.schema.json`).
#[derive(serde::Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct ErrorDoc<'a> {
    /// Why the run was refused; nothing was done.
    error: &'a Refusal,
}

/// The error document of `refusal`, pretty, with a trailing newline.
pub(crate) fn refusal(refusal: &Refusal) -> String {
    document(ErrorDoc { error: refusal })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RefusalCode;

    #[test]
    fn one_document_with_the_exact_text_and_the_place_when_there_is_one() {
        let placed = Refusal::new(
            RefusalCode::Syntax,
            "st\u{1b}[2Jate.toml:3:7: invalid TOML: expected `=`",
        )
        .at("st\u{1b}[2Jate.toml", Some((3, 7)));
        let text = refusal(&placed);
        crate::schema::check("error", &text);
        insta::assert_snapshot!(text, @r#"
        {
          "schemaVersion": 2,
          "error": {
            "code": "syntax",
            "text": "st\u001b[2Jate.toml:3:7: invalid TOML: expected `=`",
            "file": "st\u001b[2Jate.toml",
            "line": 3,
            "column": 7
          }
        }
        "#);
        let bare = refusal(&Refusal::new(RefusalCode::InvalidValue, "bad --timeout"));
        crate::schema::check("error", &bare);
        let v: serde_json::Value = serde_json::from_str(&bare).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"schemaVersion": 2, "error": {"code": "invalidValue", "text": "bad --timeout"}})
        );
    }
}
