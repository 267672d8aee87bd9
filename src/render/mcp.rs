//! The words of the MCP server (`run::mcp`): the short summary a tool
//! result carries beside its structured content, and the server's lines on
//! stderr (started, one per call, stopping).
//!
//! The summary is read off the same JSON document the result carries (the
//! published contract), so the two cannot disagree: what was removed,
//! kept and retained, whether it converged, every object left behind with
//! its reason, and every named box that nothing carries with what to do. Engine text is escaped and clipped, as everywhere in
//! human output. Must not decide anything: whether a call failed is given.

use std::fmt::Write;

use serde_json::Value;

use super::table::{kind_counts, plural};
use super::target::{not_done, unknown_section, Reader};
use crate::exec::report::{remaining_key, Reclaimed, UnknownBox};
use crate::model::{Kind, Outcome};
use crate::text::{clip, escape};

/// The most leftovers a summary names one by one (the structured content
/// names them all).
const NAMED: usize = 20;

fn len(v: &Value) -> usize {
    v.as_array().map_or(0, Vec::len)
}

/// An engine's or the document's value as words: escaped, clipped.
fn words(v: &Value) -> String {
    let text = v.as_str().map_or_else(|| v.to_string(), str::to_string);
    clip(&text, 200).into_owned()
}

/// The report's line of reclaimed space, read off its removed objects'
/// `reclaimedBytes` (as the human report says it; none when nothing that
/// holds space was removed).
fn reclaimed_words(removed: &Value) -> String {
    let mut total = Reclaimed::default();
    let mut unmeasured = [0usize; 2];
    for (i, kind) in Kind::HOLDS_SPACE.into_iter().enumerate() {
        for gone in removed[kind.plural()].as_array().into_iter().flatten() {
            // The report's rule (`Reclaimed::counts`): only what this run removed.
            let outcome = if gone["outcome"] == Outcome::Removed.code() {
                Outcome::Removed
            } else {
                Outcome::AlreadyGone
            };
            let figure = gone["reclaimedBytes"].as_u64();
            if Reclaimed::counts(kind, &outcome) && figure.is_none() {
                unmeasured[i] += 1;
            }
            total.count(kind, &outcome, figure);
        }
    }
    super::report::reclaimed_line(&total, |k| match k {
        Kind::Container => unmeasured[0],
        Kind::Volume => unmeasured[1],
        _ => 0,
    })
}

/// A report's summary (`destroy`, `prune`).
fn report_words(doc: &Value, failed: bool) -> String {
    let mut out = String::new();
    let removed = &doc["removed"];
    let kept: usize = Kind::ALL
        .iter()
        .map(|k| len(&doc["kept"][k.plural()]))
        .sum();
    let _ = writeln!(
        out,
        "Removed {}; kept {}; retained {}.",
        kind_counts(|k| len(&removed[k.plural()])),
        plural(kept, "object"),
        plural(len(&doc["retained"]["images"]), "image"),
    );
    out.push_str(&reclaimed_words(removed));
    let left: Vec<(Kind, &Value)> = Kind::ALL
        .iter()
        .flat_map(|&k| {
            doc[remaining_key(k)]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |l| (k, l))
        })
        .collect();
    if doc["interrupted"] == Value::Bool(true) {
        let _ = writeln!(
            out,
            "Interrupted: no removal was started after the cancellation; what was in flight finished and was verified."
        );
    }
    if !left.is_empty() {
        let _ = writeln!(out, "Left behind ({}):", left.len());
        for (kind, l) in left.iter().take(NAMED) {
            let _ = writeln!(
                out,
                "  {kind} {} on {}: {}",
                words(&l["name"]),
                words(&l["engine"]),
                words(&l["reason"]["text"]),
            );
        }
        if left.len() > NAMED {
            let _ = writeln!(
                out,
                "  and {} more (every one is in the structured result)",
                left.len() - NAMED
            );
        }
    }
    let failures = len(&doc["failures"]);
    if failures > 0 {
        let _ = writeln!(
            out,
            "Failures: {failures} (see failures in the structured result)."
        );
    }
    // Each named box nothing carries, with what to do about it.
    let unknown: Vec<UnknownBox> =
        serde_json::from_value(doc["unknownBoxes"].clone()).unwrap_or_default();
    out.push_str(unknown_section(&unknown, Reader::Agent).trim_start_matches('\n'));
    let converged = doc["converged"] == Value::Bool(true);
    match not_done(&unknown) {
        Some(line) if converged => out.push_str(&line),
        _ if converged && !failed => {
            out.push_str("Converged: a fresh listing shows nothing left to do.\n")
        }
        _ => out
            .push_str("NOT converged: the teardown failed; what is left and why is named above.\n"),
    }
    out
}

/// The steps of a plan document: its own, or every engine's of a fleet.
fn steps(doc: &Value) -> Vec<&Value> {
    match doc.get("engines").and_then(Value::as_array) {
        Some(engines) if doc.get("steps").is_none() => engines
            .iter()
            .flat_map(|e| e["steps"].as_array().into_iter().flatten())
            .collect(),
        _ => doc["steps"].as_array().into_iter().flatten().collect(),
    }
}

fn plan_words(doc: &Value, failed: bool) -> String {
    let steps = steps(doc);
    let count = |k: Kind| steps.iter().filter(|s| s["kind"] == k.as_str()).count();
    let mut out = format!("Would remove {}.\n", kind_counts(count));
    if failed {
        out.push_str(
            "The plan is incomplete: an engine could not be listed whole (see the notes).\n",
        );
    }
    out
}

fn explain_words(doc: &Value) -> String {
    let items = doc
        .get("objects")
        .or_else(|| doc.get("explanations"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out = String::new();
    for item in items.iter().take(NAMED) {
        let _ = writeln!(
            out,
            "{} {}: {}",
            words(&item["kind"]),
            words(&item["name"]),
            words(&item["verdict"]),
        );
    }
    out
}

/// The text of a tool's result: a summary read off its JSON document (none
/// when the call failed before one was made), then what the run said on
/// stderr (errors and warnings, already in words).
pub(crate) fn tool_text(tool: &str, doc: Option<&Value>, failed: bool, notes: &str) -> String {
    let mut out = match (tool, doc) {
        ("destroy" | "prune", Some(doc)) => report_words(doc, failed),
        ("plan", Some(doc)) => plan_words(doc, failed),
        ("explain", Some(doc)) => explain_words(doc),
        (_, Some(_)) if failed => format!("{tool} failed.\n"),
        (_, Some(_)) => format!("{tool}: done.\n"),
        (_, None) => format!("{tool} failed before it had a result.\n"),
    };
    let notes = notes.trim();
    if !notes.is_empty() {
        out.push_str(notes);
        out.push('\n');
    }
    out
}

/// The server's first line on stderr.
pub(crate) fn mcp_started(time: &str, engines: &[(String, String)], scope: &str) -> String {
    let engines: Vec<String> = engines
        .iter()
        .map(|(name, endpoint)| format!("{} ({})", escape(name), escape(endpoint)))
        .collect();
    format!(
        "{time} mcp: serving tools on stdio; engines: {}; scope: {}\n",
        engines.join(", "),
        escape(scope)
    )
}

/// A line per tool call, when it is answered.
pub(crate) fn mcp_call(
    time: &str,
    tool: &str,
    failed: bool,
    took_ms: u128,
    first_note: Option<&str>,
) -> String {
    let outcome = if failed { "error" } else { "ok" };
    match first_note {
        Some(note) => format!(
            "{time} mcp: {tool}: {outcome} in {took_ms} ms: {}\n",
            clip(note, 300)
        ),
        None => format!("{time} mcp: {tool}: {outcome} in {took_ms} ms\n"),
    }
}

/// SIGTERM, Ctrl-C or the end of input: the server stops once the calls in
/// flight are answered.
pub(crate) fn mcp_stopping(time: &str, why: &str, open: usize) -> String {
    format!(
        "{time} mcp: {why}: stopping: {} in flight finish, verify and answer first\n",
        plural(open, "call")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_failed_teardown_names_every_leftover_and_never_says_converged() {
        let doc = json!({
            "converged": false,
            "removed": { "containers": [{}], "volumes": [], "networks": [] },
            "kept": { "containers": [], "volumes": [], "networks": [] },
            "retained": { "images": [{}] },
            "failures": [{}],
            "remainingContainers": [],
            "remainingVolumes": [{ "engine": "default", "name": "v\u{1b}[31m", "reason": { "code": "inUse", "text": "in use by container x" } }],
            "remainingNetworks": [],
            "interrupted": false
        });
        let text = tool_text("destroy", Some(&doc), true, "error: volume v: in use");
        assert!(
            text.contains(
                "Removed 1 container, 0 volumes and 0 networks; kept 0 objects; retained 1 image."
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "Left behind (1):\n  volume v\\u{1b}[31m on default: in use by container x"
            ),
            "{text}"
        );
        assert!(text.contains("NOT converged"), "{text}");
        assert!(!text.contains("Converged:"), "{text}");
        assert!(text.ends_with("error: volume v: in use\n"), "{text}");
        // The document says it converged, the call failed anyway (an audit
        // log that could not be written): never a success.
        let mut converged = doc.clone();
        converged["converged"] = json!(true);
        assert!(tool_text("prune", Some(&converged), true, "").contains("NOT converged"));
        assert!(tool_text("prune", Some(&converged), false, "").contains("Converged:"));
    }

    #[test]
    fn the_space_given_back_is_said_as_the_report_says_it() {
        let doc = json!({
            "converged": true,
            "removed": {
                "containers": [{ "outcome": "removed", "reclaimedBytes": 2_000_000 }],
                "volumes": [
                    { "outcome": "removed", "reclaimedBytes": 1_000_000 },
                    { "outcome": "removed", "reclaimedBytes": null },
                    { "outcome": "alreadyGone", "reclaimedBytes": null }
                ],
                "networks": [{ "outcome": "removed", "reclaimedBytes": null }]
            },
            "kept": {}, "retained": { "images": [] }, "failures": [], "interrupted": false
        });
        let text = tool_text("prune", Some(&doc), false, "");
        assert!(
            text.contains("Reclaimed 3.0 MB (1 volume not measured).\n"),
            "{text}"
        );
        let nothing = json!({ "converged": true, "removed": {}, "kept": {}, "retained": {} });
        assert!(!tool_text("prune", Some(&nothing), false, "").contains("Reclaimed"));
    }

    #[test]
    fn a_named_box_nothing_carries_is_named_with_what_to_do() {
        let doc = json!({
            "converged": true,
            "removed": {}, "kept": {}, "retained": { "images": [] }, "failures": [],
            "interrupted": false,
            "unknownBoxes": [
                { "id": "nosuchbox", "status": "notFound" },
                { "id": "gone\u{1b}[2J", "status": "missingOk" }
            ]
        });
        let text = tool_text("destroy", Some(&doc), true, "");
        assert!(
            text.contains(
                "box nosuchbox: NOT FOUND: nothing in scope carries ca.sandbox.id=nosuchbox"
            ),
            "{text}"
        );
        assert!(
            text.contains("List the boxes with the inventory tool (pass missingOk: true when a missing box is fine)"),
            "{text}"
        );
        assert!(text.contains("(missingOk: not a failure)"), "{text}");
        assert!(!text.contains('\u{1b}'), "{text:?}");
        assert!(
            text.ends_with("NOT done: box nosuchbox not found; a fresh listing shows nothing else left to do.\n"),
            "{text}"
        );
        assert!(!text.contains("Converged"), "{text}");
        // Excused (missingOk): said, and the call converged.
        let mut excused = doc.clone();
        excused["unknownBoxes"] = json!([{ "id": "nosuchbox", "status": "missingOk" }]);
        let text = tool_text("destroy", Some(&excused), false, "");
        assert!(
            text.contains("box nosuchbox: nothing in scope carries"),
            "{text}"
        );
        assert!(
            text.ends_with("Converged: a fresh listing shows nothing left to do.\n"),
            "{text}"
        );
    }

    #[test]
    fn without_a_document_the_notes_say_why() {
        let text = tool_text("plan", None, true, "error: no state file");
        assert_eq!(
            text,
            "plan failed before it had a result.\nerror: no state file\n"
        );
    }
}
