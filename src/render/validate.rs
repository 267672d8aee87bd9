//! The validate view (`validate`): per state file, `valid` or every problem
//! as `file:line:col: message`. JSON: per file its path, whether it is valid,
//! and each problem's position, message and full text. A path or message
//! quoting the file's own text is escaped in human output (multi-line
//! messages keep their own line breaks) and exact in JSON.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::render::{document, Format};
use crate::state::StateError;
use crate::text::{escape, escape_lines};

/// `validate`'s JSON document (`validate.schema.json`). Keys in alphabetical
/// order, as it has always printed them.
#[derive(serde::Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct ValidateDoc {
    /// Every file, in the order given.
    files: Vec<FileDoc>,
    /// True when every file is valid.
    valid: bool,
}

/// One state file's result.
#[derive(serde::Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
struct FileDoc {
    /// The path as given (exact: not escaped).
    path: String,
    /// Every problem, in file order.
    problems: Vec<ProblemDoc>,
    valid: bool,
}

/// One problem of a state file.
#[derive(serde::Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
struct ProblemDoc {
    /// 1-based; null when the problem has no position (the file is missing).
    column: Option<usize>,
    line: Option<usize>,
    /// The problem and what to do.
    message: String,
    /// `path:line:col: message`, as the human output says it (unescaped).
    text: String,
}

/// `validate`'s answer: per file, valid or every problem (file:line:col).
pub(crate) fn validation(results: &[(PathBuf, Vec<StateError>)], format: Format) -> String {
    if format == Format::Json {
        let files = results
            .iter()
            .map(|(path, problems)| FileDoc {
                path: path.display().to_string(),
                problems: problems
                    .iter()
                    .map(|p| ProblemDoc {
                        column: p.at.map(|(_, c)| c),
                        line: p.at.map(|(l, _)| l),
                        message: p.kind.to_string(),
                        text: p.to_string(),
                    })
                    .collect(),
                valid: problems.is_empty(),
            })
            .collect();
        let valid = results.iter().all(|(_, p)| p.is_empty());
        return document(ValidateDoc { files, valid });
    }
    let mut out = String::new();
    for (path, problems) in results {
        if problems.is_empty() {
            let _ = writeln!(out, "{}: valid", escape(&path.display().to_string()));
        }
        for p in problems {
            // `StateError`'s own form, `path:line:col: message`, with the path
            // escaped whole (a file name may hold a line break) and the
            // message's own line breaks kept.
            let at = p.at.map(|(l, c)| format!(":{l}:{c}")).unwrap_or_default();
            let _ = writeln!(
                out,
                "{}{at}: {}",
                escape(&p.path.display().to_string()),
                escape_lines(&p.kind.to_string())
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::StateErrorKind;

    fn results() -> Vec<(PathBuf, Vec<StateError>)> {
        let evil = PathBuf::from("st\u{1b}[2Jate\n\u{202e}.toml");
        vec![
            (PathBuf::from("state/sandboxes.toml"), vec![]),
            (
                PathBuf::from("bad.toml"),
                vec![StateError {
                    path: PathBuf::from("bad.toml"),
                    at: Some((5, 9)),
                    kind: StateErrorKind::NotFound,
                }],
            ),
            (
                evil.clone(),
                vec![StateError {
                    path: evil,
                    at: None,
                    kind: StateErrorKind::NotAFile {
                        what: "a directory",
                    },
                }],
            ),
        ]
    }

    #[test]
    fn valid_files_and_problems_hostile_paths_escaped() {
        let human = validation(&results(), Format::Human);
        insta::assert_snapshot!(human, @r"
        state/sandboxes.toml: valid
        bad.toml:5:9: state file does not exist; check the path given with --state or SANDBOXCTL_STATE (without either, state/sandboxes.toml is used if it exists)
        st\u{1b}[2Jate\n\u{202e}.toml: is a directory, not a state file; give the path of a regular .toml file
        ");
        assert!(!human.contains('\u{1b}') && !human.contains('\u{202e}'));
    }

    #[test]
    fn json_has_exact_paths_and_positions() {
        let v: serde_json::Value =
            serde_json::from_str(&validation(&results(), Format::Json)).unwrap();
        assert_eq!(v["valid"], false);
        assert_eq!(v["files"][1]["problems"][0]["line"], 5);
        assert_eq!(v["files"][1]["problems"][0]["column"], 9);
        assert_eq!(v["files"][0]["valid"], true);
        assert_eq!(v["files"][2]["path"], "st\u{1b}[2Jate\n\u{202e}.toml");
        let problem = &v["files"][2]["problems"][0];
        assert_eq!(problem["line"], serde_json::Value::Null);
        assert_eq!(
            problem["message"],
            "is a directory, not a state file; give the path of a regular .toml file"
        );
        assert_eq!(
            problem["text"],
            "st\u{1b}[2Jate\n\u{202e}.toml: is a directory, not a state file; give the path of a regular .toml file"
        );
    }
}
