//! A tool call's arguments: checked whole, before any engine call, into a
//! typed `Call` (what the call asks for, in the CLI's terms), or refused
//! with an `ArgError` that names the tool, the argument and what to give.
//!
//! Owns the checks of the tools' argument rules, which their `inputSchema`s
//! (`tools.rs`, with the bounds) state too: only the members a tool declares, each of its
//! type, box IDs by the state file's rule, at most `MAX_IDS` of them, a
//! ttl as `lease --ttl` takes it. Nothing here names an engine, a scope
//! label or an object outside the box IDs the call gives: the server's
//! scope and engines are fixed when it starts. Must not reach an engine.

use std::time::Duration;

use serde_json::{Map, Value};

use super::tools::{Tool, DEFAULT_TTL, MAX_IDS, MAX_OBJECT_CHARS, MAX_TTL_CHARS};

/// What a tool call asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Call {
    Plan,
    /// `destroy ID...` (`keep_volume`: their volumes stay; `missing_ok`:
    /// an ID nothing carries is not a failure). Never without an ID.
    Destroy {
        ids: Vec<String>,
        keep_volume: bool,
        missing_ok: bool,
        /// `--reclaimed`: measure what each removal gives back.
        reclaimed: bool,
    },
    /// `destroy --prune`: every leaked object (`reclaimed`: `--reclaimed`).
    Prune {
        reclaimed: bool,
    },
    Inventory,
    Explain {
        object: String,
    },
    /// `lease ID... --ttl TTL`.
    Lease {
        ids: Vec<String>,
        ttl: Duration,
    },
    /// `lease --release ID...`.
    Release {
        ids: Vec<String>,
    },
}

/// Why a call's arguments were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{tool}: {}{problem}", argument.as_ref().map(|a| format!("argument `{a}`: ")).unwrap_or_default())]
pub(super) struct ArgError {
    pub(super) tool: &'static str,
    /// The argument at fault (`ids[3]` for one element), when one is.
    pub(super) argument: Option<String>,
    /// What is wrong, and what to give instead.
    pub(super) problem: String,
}

/// The JSON type of `value`, as a message names it.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A string value as a message shows it: quoted, escaped, clipped.
fn shown(text: &str) -> String {
    format!("\"{}\"", crate::text::clip(text, 80))
}

struct Args<'a> {
    tool: Tool,
    members: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    fn error(&self, argument: Option<&str>, problem: impl Into<String>) -> ArgError {
        ArgError {
            tool: self.tool.name(),
            argument: argument.map(str::to_string),
            problem: problem.into(),
        }
    }

    /// Refuses every member the tool does not declare.
    fn only(&self, declared: &[&str]) -> Result<(), ArgError> {
        let mut unknown: Vec<&String> = self
            .members
            .keys()
            .filter(|k| !declared.contains(&k.as_str()))
            .collect();
        unknown.sort();
        let Some(first) = unknown.first() else {
            return Ok(());
        };
        let takes = if declared.is_empty() {
            "it takes no arguments".to_string()
        } else {
            format!("it takes only {}", declared.join(", "))
        };
        // The name is the caller's text: escaped and clipped, as any value.
        Err(self.error(
            Some(&crate::text::clip(first, 80)),
            format!(
                "unknown argument ({takes}; a scope, an engine or a host is fixed when the server starts)"
            ),
        ))
    }

    fn bool(&self, name: &str) -> Result<Option<bool>, ArgError> {
        match self.members.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(self.error(
                Some(name),
                format!("expected true or false, got {}", kind(other)),
            )),
        }
    }

    fn string(&self, name: &str, max: usize) -> Result<Option<&'a str>, ArgError> {
        match self.members.get(name) {
            None => Ok(None),
            Some(Value::String(s)) if s.chars().count() > max => {
                Err(self.error(Some(name), format!("longer than {max} characters")))
            }
            Some(Value::String(s)) if s.chars().any(crate::text::is_hidden) => Err(self.error(
                Some(name),
                format!("{} holds control or invisible characters", shown(s)),
            )),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.error(
                Some(name),
                format!("expected a string, got {}", kind(other)),
            )),
        }
    }

    /// Box IDs: an array of at most `MAX_IDS` strings, each a box ID; in
    /// the order given, each once.
    fn ids(&self, name: &str) -> Result<Option<Vec<String>>, ArgError> {
        let items = match self.members.get(name) {
            None => return Ok(None),
            Some(Value::Array(items)) => items,
            Some(other) => {
                return Err(self.error(
                    Some(name),
                    format!(
                        "expected an array of box IDs (values of ca.sandbox.id), got {}",
                        kind(other)
                    ),
                ))
            }
        };
        if items.len() > MAX_IDS {
            return Err(self.error(
                Some(name),
                format!(
                    "{} box IDs; a call takes at most {MAX_IDS} (split it)",
                    items.len()
                ),
            ));
        }
        let mut ids: Vec<String> = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let at = format!("{name}[{i}]");
            let Value::String(id) = item else {
                return Err(self.error(
                    Some(&at),
                    format!("expected a box ID (a string), got {}", kind(item)),
                ));
            };
            if let Err(problem) = crate::state::check_box_id(id) {
                return Err(self.error(
                    Some(&at),
                    format!("{} is not a box ID: {problem}", shown(id)),
                ));
            }
            if !ids.contains(id) {
                ids.push(id.clone());
            }
        }
        Ok(Some(ids))
    }
}

/// Checks `arguments` (absent is `{}`) for `tool`.
pub(super) fn parse(tool: Tool, arguments: Option<&Map<String, Value>>) -> Result<Call, ArgError> {
    let empty = Map::new();
    let args = Args {
        tool,
        members: arguments.unwrap_or(&empty),
    };
    match tool {
        Tool::Plan | Tool::Inventory => {
            args.only(&[])?;
            Ok(match tool {
                Tool::Plan => Call::Plan,
                _ => Call::Inventory,
            })
        }
        Tool::Prune => {
            args.only(&["reclaimed"])?;
            let reclaimed = args.bool("reclaimed")?.unwrap_or(false);
            Ok(Call::Prune { reclaimed })
        }
        Tool::Destroy => {
            args.only(&["ids", "keepVolume", "missingOk", "reclaimed"])?;
            let ids = args.ids("ids")?.unwrap_or_default();
            let keep_volume = args.bool("keepVolume")?.unwrap_or(false);
            let missing_ok = args.bool("missingOk")?.unwrap_or(false);
            let reclaimed = args.bool("reclaimed")?.unwrap_or(false);
            // An empty list is what a bug or an unset variable gives: it
            // never widens to every box. Reclaiming them is `prune`'s.
            if ids.is_empty() {
                return Err(args.error(
                    Some("ids"),
                    "names no box: give at least one box ID (the inventory tool lists them); to reclaim every leaked object, call the prune tool",
                ));
            }
            Ok(Call::Destroy {
                ids,
                keep_volume,
                missing_ok,
                reclaimed,
            })
        }
        Tool::Explain => {
            args.only(&["object"])?;
            match args.string("object", MAX_OBJECT_CHARS)? {
                None => Err(args.error(
                    Some("object"),
                    "missing: give a container ID or prefix, a container, volume or network name (container:, volume: or network: before it narrows the kind), or box:ID",
                )),
                Some("") => Err(args.error(Some("object"), "empty: name the object to explain")),
                Some(object) => Ok(Call::Explain {
                    object: object.to_string(),
                }),
            }
        }
        Tool::Lease => {
            args.only(&["ids", "ttl", "release"])?;
            let ids = args.ids("ids")?.unwrap_or_default();
            if ids.is_empty() {
                return Err(args.error(Some("ids"), "name at least one box ID"));
            }
            let release = args.bool("release")?.unwrap_or(false);
            let ttl = args.string("ttl", MAX_TTL_CHARS)?;
            match (release, ttl) {
                (true, Some(_)) => Err(args.error(
                    Some("ttl"),
                    "a release ends every lease of the boxes and takes no ttl; drop ttl or release",
                )),
                (true, None) => Ok(Call::Release { ids }),
                (false, ttl) => {
                    let text = ttl.unwrap_or(DEFAULT_TTL);
                    let ttl = crate::state::parse_flag_duration(text)
                        .map_err(|e| args.error(Some("ttl"), e))?;
                    crate::cli::check_ttl(ttl)
                        .map_err(|e| args.error(Some("ttl"), e.replace("--ttl", "ttl")))?;
                    Ok(Call::Lease { ids, ttl })
                }
            }
        }
    }
}

/// What an accepted call names: its box IDs and its ttl.
pub(crate) type Accepted = (Vec<String>, Option<Duration>);

/// The check of one call's arguments as a fuzz target sees it
/// (`crate::fuzz::mcp_arguments`): `None` for a tool the server does not
/// have; else the box IDs and ttl (seconds) of the call it gives, or the
/// refusal in words.
pub(crate) fn checked(
    tool: &str,
    arguments: Option<&Map<String, Value>>,
) -> Option<Result<Accepted, String>> {
    let tool = Tool::named(tool)?;
    Some(
        parse(tool, arguments)
            .map_err(|e| e.to_string())
            .map(|call| match call {
                Call::Destroy { ids, .. } | Call::Release { ids } => (ids, None),
                Call::Lease { ids, ttl } => (ids, Some(ttl)),
                Call::Explain { .. } | Call::Plan | Call::Prune { .. } | Call::Inventory => {
                    (Vec::new(), None)
                }
            }),
    )
}

/// The names of the server's tools and the most box IDs a call takes, for
/// the fuzz target.
pub(crate) fn tools() -> ([&'static str; 6], usize) {
    (Tool::ALL.map(Tool::name), MAX_IDS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(tool: Tool, args: Value) -> Result<Call, ArgError> {
        parse(tool, args.as_object())
    }

    /// The argument the refusal names, and its text.
    fn refused(tool: Tool, args: Value) -> (Option<String>, String) {
        let e = call(tool, args).expect_err("refused");
        (e.argument.clone(), e.to_string())
    }

    #[test]
    fn each_tool_takes_what_it_declares() {
        assert_eq!(parse(Tool::Plan, None), Ok(Call::Plan));
        assert_eq!(
            call(Tool::Prune, json!({})),
            Ok(Call::Prune { reclaimed: false })
        );
        assert_eq!(
            call(Tool::Prune, json!({ "reclaimed": true })),
            Ok(Call::Prune { reclaimed: true })
        );
        assert_eq!(
            call(Tool::Destroy, json!({ "ids": ["a"], "reclaimed": true })),
            Ok(Call::Destroy {
                ids: vec!["a".into()],
                keep_volume: false,
                missing_ok: false,
                reclaimed: true,
            })
        );
        assert_eq!(
            call(
                Tool::Destroy,
                json!({ "ids": ["a", "b.1", "a"], "keepVolume": true })
            ),
            Ok(Call::Destroy {
                ids: vec!["a".into(), "b.1".into()],
                keep_volume: true,
                missing_ok: false,
                reclaimed: false,
            })
        );
        assert_eq!(
            call(Tool::Destroy, json!({ "ids": ["a"], "missingOk": true })),
            Ok(Call::Destroy {
                ids: vec!["a".into()],
                keep_volume: false,
                missing_ok: true,
                reclaimed: false,
            })
        );
        assert_eq!(
            call(Tool::Explain, json!({ "object": "box:a" })),
            Ok(Call::Explain {
                object: "box:a".into()
            })
        );
        assert_eq!(
            call(Tool::Lease, json!({ "ids": ["a"] })),
            Ok(Call::Lease {
                ids: vec!["a".into()],
                ttl: Duration::from_secs(900)
            })
        );
        assert_eq!(
            call(Tool::Lease, json!({ "ids": ["a"], "ttl": "2h" })),
            Ok(Call::Lease {
                ids: vec!["a".into()],
                ttl: Duration::from_secs(7200)
            })
        );
        assert_eq!(
            call(Tool::Lease, json!({ "ids": ["a"], "release": true })),
            Ok(Call::Release {
                ids: vec!["a".into()]
            })
        );
    }

    #[test]
    fn a_bad_argument_is_named_with_what_to_give() {
        let cases = [
            (
                Tool::Destroy,
                json!({ "ids": "a" }),
                "ids",
                "expected an array of box IDs",
            ),
            (
                Tool::Destroy,
                json!({ "ids": [1] }),
                "ids[0]",
                "expected a box ID (a string), got a number",
            ),
            (
                Tool::Destroy,
                json!({ "ids": ["ok", "../etc"] }),
                "ids[1]",
                "\"../etc\" is not a box ID",
            ),
            (
                Tool::Destroy,
                json!({ "ids": [""] }),
                "ids[0]",
                "is not a box ID",
            ),
            (
                Tool::Destroy,
                json!({ "ids": ["a"], "keepVolume": "yes" }),
                "keepVolume",
                "expected true or false, got a string",
            ),
            (
                Tool::Destroy,
                json!({ "keepVolume": true }),
                "ids",
                "names no box",
            ),
            // An empty or missing list never means every box (issue 43).
            (Tool::Destroy, json!({}), "ids", "call the prune tool"),
            (
                Tool::Destroy,
                json!({ "ids": [] }),
                "ids",
                "call the prune tool",
            ),
            (
                Tool::Destroy,
                json!({ "ids": [], "missingOk": true }),
                "ids",
                "call the prune tool",
            ),
            (
                Tool::Destroy,
                json!({ "ids": ["a"], "missingOk": "yes" }),
                "missingOk",
                "expected true or false, got a string",
            ),
            (
                Tool::Destroy,
                json!({ "ids": ["a"], "scope": "x=y" }),
                "scope",
                "unknown argument (it takes only ids, keepVolume, missingOk",
            ),
            (
                Tool::Destroy,
                json!({ "host": "tcp://evil:2375" }),
                "host",
                "fixed when the server starts",
            ),
            (
                Tool::Prune,
                json!({ "all": true }),
                "all",
                "it takes only reclaimed",
            ),
            (
                Tool::Prune,
                json!({ "reclaimed": "yes" }),
                "reclaimed",
                "expected true or false, got a string",
            ),
            (
                Tool::Plan,
                json!({ "labels": {} }),
                "labels",
                "unknown argument",
            ),
            (Tool::Explain, json!({}), "object", "missing"),
            (
                Tool::Explain,
                json!({ "object": 7 }),
                "object",
                "expected a string, got a number",
            ),
            (Tool::Explain, json!({ "object": "" }), "object", "empty"),
            (
                Tool::Explain,
                json!({ "object": "a\u{1b}[2J" }),
                "object",
                "control or invisible characters",
            ),
            (Tool::Lease, json!({}), "ids", "name at least one box ID"),
            (
                Tool::Lease,
                json!({ "ids": ["a"], "ttl": "1.5h" }),
                "ttl",
                "\"1.5h\" is not a duration (whole numbers only",
            ),
            (
                Tool::Lease,
                json!({ "ids": ["a"], "ttl": "0s" }),
                "ttl",
                "a lease must hold for some time",
            ),
            (
                Tool::Lease,
                json!({ "ids": ["a"], "ttl": "1m", "release": true }),
                "ttl",
                "takes no ttl",
            ),
            (
                Tool::Lease,
                json!({ "ids": ["a"], "release": 1 }),
                "release",
                "expected true or false",
            ),
        ];
        for (tool, args, argument, words) in cases {
            let (named, text) = refused(tool, args.clone());
            assert_eq!(named.as_deref(), Some(argument), "{args}: {text}");
            assert!(text.contains(words), "{args}: {text:?} lacks {words:?}");
            assert!(
                text.starts_with(&format!("{}: argument `{argument}`: ", tool.name())),
                "{text}"
            );
        }
    }

    #[test]
    fn a_huge_array_is_refused_whole() {
        let ids: Vec<String> = (0..=MAX_IDS).map(|i| format!("b{i}")).collect();
        let (named, text) = refused(Tool::Destroy, json!({ "ids": ids }));
        assert_eq!(named.as_deref(), Some("ids"));
        assert!(
            text.contains("257 box IDs; a call takes at most 256"),
            "{text}"
        );
        let ids: Vec<String> = (0..MAX_IDS).map(|i| format!("b{i}")).collect();
        assert!(call(Tool::Destroy, json!({ "ids": ids })).is_ok());
        let long = "x".repeat(MAX_OBJECT_CHARS + 1);
        let (named, _) = refused(Tool::Explain, json!({ "object": long }));
        assert_eq!(named.as_deref(), Some("object"));
    }

    #[test]
    fn an_unknown_argument_s_name_is_shown_escaped_and_clipped() {
        // Found by the fuzzer: the name was echoed as given.
        let (argument, text) = refused(Tool::Prune, json!({ "i\u{7f}\u{1b}[31m": [] }));
        assert_eq!(argument.as_deref(), Some("i\\u{7f}\\u{1b}[31m"));
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7f}'),
            "{text:?}"
        );
        let (_, text) = refused(Tool::Plan, json!({ "x".repeat(500): 1 }));
        assert!(text.len() < 400, "{}", text.len());
    }

    #[test]
    fn a_bad_value_is_shown_escaped_and_clipped() {
        let (_, text) = refused(
            Tool::Destroy,
            json!({ "ids": [format!("\u{1b}]0;{}", "y".repeat(300))] }),
        );
        assert!(!text.contains('\u{1b}'), "{text:?}");
        assert!(text.len() < 400, "{}", text.len());
    }
}
