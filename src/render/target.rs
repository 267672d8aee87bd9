//! The words of what a converging run was told to remove (`Target`): a
//! prune with no state file and no scope (said first), the question a prune
//! asks at a terminal before it removes a running container (what will go,
//! the running boxes by ID) and its "no", and the named box IDs that
//! nothing in scope carries, each as the run judged it, with what to do
//! in the words of its reader (a person at the CLI, an agent through the
//! MCP server, `Reader`).
//!
//! Words only: engine text (box IDs, names, the audit log's words) is
//! escaped here. Must not decide whether to ask or whether a run failed.

use std::fmt::Write as _;

use crate::exec::report::{UnknownBox, Unmatched};
use crate::model::Kind;
use crate::render::table::{kind_counts, plural};
use crate::text::escape;

/// The first lines of a prune that found no state file and was given no
/// `--scope`: every labeled box on `engines` (name, address) counts as leaked.
pub(crate) fn no_state_file_note(state_path: &str, engines: &[(String, String)]) -> String {
    let on: Vec<String> = engines
        .iter()
        .map(|(name, address)| format!("{} ({})", escape(name), escape(address)))
        .collect();
    format!(
        "note: no state file ({state_path} not found, no --state) and no --scope: every box labeled ca.sandbox=1 on engine {} counts as leaked, running ones included.\nnote: to keep boxes, declare them in a state file (--state PATH) or narrow the run with --scope KEY=VALUE.\n",
        on.join(", ")
    )
}

/// One box a prune would remove a running container of: its ID, or for a
/// container without a box label, the container's name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Running {
    Box { engine: String, id: String },
    Unboxed { engine: String, name: String },
}

/// The question a prune asks at a terminal: how much goes, of what kind,
/// the running boxes by ID, then `[y/N]` (no newline: the answer follows).
pub(crate) fn prune_question(count: impl Fn(Kind) -> usize, running: &[Running]) -> String {
    let mut out = format!(
        "This prune removes {}, {} running:\n",
        kind_counts(count),
        plural(running.len(), "container"),
    );
    for r in running {
        let _ = match r {
            Running::Box { engine, id } => {
                writeln!(out, "  box {}  (engine {})", escape(id), escape(engine))
            }
            Running::Unboxed { engine, name } => writeln!(
                out,
                "  container {} without a box label  (engine {})",
                escape(name),
                escape(engine)
            ),
        };
    }
    out.push_str("Images are never removed. `sandboxctl plan` shows every object and why.\n");
    out.push_str("Remove them? [y/N] ");
    out
}

/// What a prune says when the question was answered no (or not at all).
pub(crate) fn prune_declined(answer: Option<&str>) -> String {
    let why = match answer {
        None => "no answer (end of input)".to_string(),
        Some(a) if a.trim().is_empty() => "no answer (the default is no)".to_string(),
        Some(a) => format!("the answer {:?} is not yes", escape(a.trim())),
    };
    format!("Nothing removed: {why}. Run again and answer y, or pass --yes.\n")
}

/// Who reads the words of a named box that nothing carries, and so what
/// they are told to do: a person at the CLI (its command and flag) or an
/// agent through the MCP server (its tool and argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reader {
    Cli,
    Agent,
}

impl Reader {
    /// How to list the boxes.
    fn inventory(self) -> &'static str {
        match self {
            Reader::Cli => "`sandboxctl inventory`",
            Reader::Agent => "the inventory tool",
        }
    }

    /// What says a missing box is fine: its name, and how to pass it.
    fn missing_ok(self) -> (&'static str, &'static str) {
        match self {
            Reader::Cli => ("--missing-ok", "--missing-ok"),
            Reader::Agent => ("missingOk", "missingOk: true"),
        }
    }
}

/// The words of one named box that nothing carries, as the run judged it.
fn unknown_line(u: &UnknownBox, reader: Reader) -> String {
    let id = escape(&u.id);
    match (u.status, &u.removed) {
        (Unmatched::RemovedEarlier, Some(r)) => format!(
            "box {id}: removed earlier: the audit log {} records {} {} removed on engine {} at {} ({}: {}); nothing in scope carries it now.\n",
            escape(&r.log),
            escape(&r.kind),
            escape(&r.name),
            escape(&r.engine),
            escape(&r.time),
            escape(&r.code),
            escape(&r.text),
        ),
        (Unmatched::MissingOk, _) => format!(
            "box {id}: nothing in scope carries ca.sandbox.id={id} ({}: not a failure).\n",
            reader.missing_ok().0
        ),
        _ => format!(
            "box {id}: NOT FOUND: nothing in scope carries ca.sandbox.id={id}; nothing was removed for it. List the boxes with {} (pass {} when a missing box is fine).\n",
            reader.inventory(),
            reader.missing_ok().1
        ),
    }
}

/// The section of named boxes that nothing carries (empty when there are
/// none), in `reader`'s words.
pub(crate) fn unknown_section(unknown: &[UnknownBox], reader: Reader) -> String {
    if unknown.is_empty() {
        return String::new();
    }
    let mut out = String::from("\nNamed boxes not found:\n");
    for u in unknown {
        out.push_str("  ");
        out.push_str(&unknown_line(u, reader));
    }
    out
}

/// The closing line's words for the named boxes that fail the run, if any:
/// `box nosuchbox not found`.
pub(crate) fn not_found(unknown: &[UnknownBox]) -> Option<String> {
    let ids: Vec<String> = unknown
        .iter()
        .filter(|u| u.fails())
        .map(|u| escape(&u.id).into_owned())
        .collect();
    match ids.as_slice() {
        [] => None,
        [one] => Some(format!("box {one} not found")),
        many => Some(format!("boxes {} not found", many.join(", "))),
    }
}

/// The closing line of a run that converged but was named a box that
/// nothing carries (and no excuse): not done, naming it. `None` when every
/// named box was found or excused.
pub(crate) fn not_done(unknown: &[UnknownBox]) -> Option<String> {
    not_found(unknown)
        .map(|words| format!("NOT done: {words}; a fresh listing shows nothing else left to do.\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::report::EarlierRemoval;

    fn unknown(id: &str, status: Unmatched) -> UnknownBox {
        UnknownBox {
            status,
            ..UnknownBox::not_found(id)
        }
    }

    #[test]
    fn each_judgement_of_a_missing_box_has_its_words_and_escapes_the_id() {
        let mut boxes = vec![
            unknown("nosuchbox", Unmatched::NotFound),
            unknown("gone\u{1b}[2J", Unmatched::MissingOk),
            UnknownBox {
                status: Unmatched::RemovedEarlier,
                removed: Some(EarlierRemoval {
                    time: "2026-12-05T09:00:00.000Z".into(),
                    engine: "default".into(),
                    kind: "container".into(),
                    name: "sbx-a".into(),
                    code: "destroyRequested".into(),
                    text: "destroy named box a".into(),
                    log: "/tmp/audit.jsonl".into(),
                }),
                ..UnknownBox::not_found("a")
            },
        ];
        let text = unknown_section(&boxes, Reader::Cli);
        assert!(text.contains("box nosuchbox: NOT FOUND"), "{text}");
        assert!(text.contains("`sandboxctl inventory`"), "{text}");
        assert!(text.contains("--missing-ok: not a failure"), "{text}");
        let told = unknown_section(&boxes, Reader::Agent);
        assert!(told.contains("box nosuchbox: NOT FOUND"), "{told}");
        assert!(
            told.contains("the inventory tool (pass missingOk: true when"),
            "{told}"
        );
        assert!(!told.contains("--missing-ok"), "{told}");
        assert!(!text.contains('\u{1b}'), "{text:?}");
        assert!(
            text.contains("removed on engine default at 2026-12-05T09:00:00.000Z (destroyRequested: destroy named box a)"),
            "{text}"
        );
        assert_eq!(
            not_found(&boxes).as_deref(),
            Some("box nosuchbox not found")
        );
        boxes.remove(0);
        assert_eq!(not_found(&boxes), None);
        assert_eq!(unknown_section(&[], Reader::Cli), "");
    }

    #[test]
    fn the_question_names_the_running_boxes_and_defaults_to_no() {
        let q = prune_question(
            |k| match k {
                Kind::Container => 2,
                k if k.is_swarm() => 0,
                _ => 1,
            },
            &[
                Running::Box {
                    engine: "default".into(),
                    id: "a".into(),
                },
                Running::Unboxed {
                    engine: "default".into(),
                    name: "loose".into(),
                },
            ],
        );
        assert!(
            q.starts_with(
                "This prune removes 2 containers, 1 volume and 1 network, 2 containers running:\n"
            ),
            "{q}"
        );
        assert!(q.contains("  box a  (engine default)\n"), "{q}");
        assert!(q.contains("container loose without a box label"), "{q}");
        assert!(q.ends_with("Remove them? [y/N] "), "{q}");
        assert!(prune_declined(None).contains("end of input"));
        assert!(prune_declined(Some("n\n")).contains("\"n\" is not yes"));
        assert!(prune_declined(Some("")).contains("the default is no"));
    }
}
