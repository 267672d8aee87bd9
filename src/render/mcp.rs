//! The words of the MCP server (`run::mcp`): the text a tool result
//! carries before its structured content (and that content as a JSON text
//! block), and the server's lines on stderr (started, one per call,
//! stopping).
//!
//! The text is read off the same JSON document the result carries (the
//! published contract), so the two cannot disagree: the objects grouped by
//! box, what happens to each and why (the typed reason's words and its
//! code), leases and their `until`, held objects with their holders, what
//! was removed, kept and retained, whether it converged, every object left
//! behind with its reason and what to do, and every named box that nothing
//! carries. Short for one box and bounded for many: at most `BOXES` boxes
//! named, the rest counted with how to see them. Engine text is escaped and
//! clipped, as everywhere in human output; no document, however odd, makes
//! it panic. Must not decide anything: whether a call failed is given.

use std::fmt::Write;

use serde_json::Value;

use super::table::{kind_counts, plural};
use super::target::{not_done, unknown_section, Reader};
use crate::exec::report::{remaining_key, Reclaimed, UnknownBox};
use crate::model::{Kind, Outcome};
use crate::text::{clip, escape};

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

/// An object as the texts name it: `container sbxp-t1 (2a2cdb924bfb,
/// running)`, `volume sbxp-t1`; `on ENGINE` in a fleet's document.
fn object(o: &Value, kind: Option<&str>, fleet: bool) -> String {
    let kind = kind.map_or_else(|| words(&o["kind"]), str::to_string);
    let mut out = format!("{kind} {}", words(&o["name"]));
    let id = o["id"]
        .as_str()
        .map(|id| clip(&id.chars().take(12).collect::<String>(), 12).into_owned());
    let state = o["state"].as_str().map(|s| clip(s, 40).into_owned());
    match (id, state) {
        (Some(id), Some(state)) => {
            let _ = write!(out, " ({id}, {state})");
        }
        (Some(one), None) | (None, Some(one)) => {
            let _ = write!(out, " ({one})");
        }
        (None, None) => {}
    }
    if fleet {
        let _ = write!(out, " on {}", words(&o["engine"]));
    }
    out
}

/// `1 box`, `2 boxes`.
fn boxes(n: usize) -> String {
    if n == 1 {
        "1 box".into()
    } else {
        format!("{n} boxes")
    }
}

/// A typed reason as the texts give it: its words, then its code.
fn why(reason: &Value) -> String {
    match reason["code"].as_str() {
        Some(code) => format!("{} [{}]", words(&reason["text"]), clip(code, 60)),
        None => words(&reason["text"]),
    }
}

/// The most boxes a text names one by one; the structured content (and the
/// JSON block after the text) names them all.
const BOXES: usize = 20;
/// The most objects one line names.
const OBJECTS: usize = 8;

/// Lines grouped by box: each box once, in natural order (objects of no box
/// last), its objects joined on one line per reason, at most [`BOXES`]
/// boxes and [`OBJECTS`] objects a line; then how many more and how to see
/// them (`rest`).
#[derive(Default)]
struct ByBox {
    /// (box, its lines), in the order first seen.
    boxes: Vec<(Option<String>, Vec<WhyLine>)>,
}

/// One line of a box: a reason's words and the objects it holds for.
type WhyLine = (String, Vec<String>);

impl ByBox {
    fn add(&mut self, box_id: Option<&str>, object: String, why: String) {
        let key = box_id.map(str::to_string);
        let at = match self.boxes.iter().position(|(b, _)| *b == key) {
            Some(at) => at,
            None => {
                self.boxes.push((key, Vec::new()));
                self.boxes.len() - 1
            }
        };
        let lines = &mut self.boxes[at].1;
        match lines.iter_mut().find(|(w, _)| *w == why) {
            Some((_, objects)) => objects.push(object),
            None => lines.push((why, vec![object])),
        }
    }

    fn objects(&self) -> usize {
        self.boxes
            .iter()
            .flat_map(|(_, lines)| lines.iter().map(|(_, o)| o.len()))
            .sum()
    }

    /// The box count in words: `1 box`, `3 boxes and objects of no box`.
    fn counted(&self) -> String {
        let named = self.boxes.iter().filter(|(b, _)| b.is_some()).count();
        let boxes = boxes(named);
        let objects = plural(self.objects(), "object");
        match (named, self.boxes.iter().any(|(b, _)| b.is_none())) {
            (0, _) => format!("{objects} of no box"),
            (_, true) => format!("{objects} in {boxes} and of no box"),
            (_, false) => format!("{objects} in {boxes}"),
        }
    }

    fn write(&mut self, out: &mut String, rest: &str) {
        self.boxes.sort_by(|(a, _), (b, _)| match (a, b) {
            (Some(a), Some(b)) => crate::model::natural_cmp(a, b),
            (a, b) => a.is_none().cmp(&b.is_none()),
        });
        for (box_id, lines) in self.boxes.iter().take(BOXES) {
            let label = box_id
                .as_deref()
                .map_or_else(|| "no box".to_string(), |b| format!("box {}", clip(b, 80)));
            for (why, objects) in lines {
                let mut named = objects[..objects.len().min(OBJECTS)].join(", ");
                if objects.len() > OBJECTS {
                    let _ = write!(named, " and {} more", objects.len() - OBJECTS);
                }
                let _ = writeln!(out, "  {label}: {named}: {why}");
            }
        }
        if self.boxes.len() > BOXES {
            let more: usize = self.boxes[BOXES..]
                .iter()
                .flat_map(|(_, lines)| lines.iter().map(|(_, o)| o.len()))
                .sum();
            let n = self.boxes.len() - BOXES;
            let _ = writeln!(
                out,
                "  … and {n} more {} ({}): {rest}",
                if n == 1 { "box" } else { "boxes" },
                plural(more, "object"),
            );
        }
    }
}

/// How to see what a text leaves out, per tool.
const REST_BY_BOX: &str =
    "call explain with box:ID for one box, or read structuredContent (the JSON block below) for all";

/// The retained images' line: images are never removed.
fn retained_line(doc: &Value) -> String {
    let images = doc["retained"]["images"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if images.is_empty() {
        return String::new();
    }
    let mut tags: Vec<String> = images
        .iter()
        .map(|i| {
            i["tags"]
                .as_array()
                .and_then(|t| t.first())
                .map_or_else(|| words(&i["id"]), words)
        })
        .collect();
    let more = tags.len().saturating_sub(OBJECTS);
    tags.truncate(OBJECTS);
    let mut line = format!("Retained (images are never removed): {}", tags.join(", "));
    if more > 0 {
        let _ = write!(line, " and {more} more");
    }
    line.push('\n');
    line
}

/// The retained images' line of a document, or of its first engine's part
/// that has them (a fleet's; none when no part was listed).
fn retained_of(doc: &Value, parts: &[&Value]) -> String {
    std::iter::once(doc)
        .chain(parts.iter().copied())
        .find(|d| d["retained"]["images"].is_array())
        .map(retained_line)
        .unwrap_or_default()
}

/// Every kind's list of a `ByKind` member (`kept`, `removed`).
fn by_kind(doc: &Value) -> impl Iterator<Item = (Kind, &Value)> {
    Kind::ALL.into_iter().flat_map(move |k| {
        doc[k.plural()]
            .as_array()
            .into_iter()
            .flatten()
            .map(move |o| (k, o))
    })
}

/// What a failed teardown's reader should do.
const ADVICE: &str = "What to do: each reason above says what keeps the object (a holder outside the sandbox system, an engine error); deal with that cause, then call the tool again. Never force the removal with other tools: sandboxctl never removes what something outside the sandbox system uses.\n";

/// A report's text (`destroy`, `prune`).
fn report_words(doc: &Value, failed: bool) -> String {
    let mut out = String::new();
    let fleet = doc["engines"].is_array();
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
    if doc["interrupted"] == Value::Bool(true) {
        let _ = writeln!(
            out,
            "Interrupted: no removal was started after the cancellation; what was in flight finished and was verified."
        );
    }
    let mut gone = ByBox::default();
    for (kind, o) in by_kind(removed) {
        let outcome = match o["outcome"].as_str() {
            Some("alreadyGone") => "already gone".to_string(),
            Some(other) => clip(other, 40).into_owned(),
            None => "removed".into(),
        };
        gone.add(
            o["box"].as_str(),
            object(o, Some(kind.as_str()), fleet),
            outcome,
        );
    }
    if gone.objects() > 0 {
        let _ = writeln!(out, "Removed ({}):", gone.counted());
        gone.write(&mut out, REST_BY_BOX);
    }
    let mut left = ByBox::default();
    for kind in Kind::ALL {
        for l in doc[remaining_key(kind)].as_array().into_iter().flatten() {
            let mut named = format!("{kind} {}", words(&l["name"]));
            let _ = write!(named, " on {}", words(&l["engine"]));
            left.add(l["box"].as_str(), named, why(&l["reason"]));
        }
    }
    if left.objects() > 0 {
        let _ = writeln!(out, "Left behind ({}):", left.counted());
        left.write(&mut out, REST_BY_BOX);
    }
    let mut stays = ByBox::default();
    for (_, o) in by_kind(&doc["kept"]) {
        stays.add(o["box"].as_str(), object(o, None, fleet), why(&o["reason"]));
    }
    if stays.objects() > 0 {
        let _ = writeln!(out, "Kept ({}):", stays.counted());
        stays.write(&mut out, REST_BY_BOX);
    }
    let failures = doc["failures"].as_array().cloned().unwrap_or_default();
    if !failures.is_empty() {
        let _ = writeln!(out, "Failures ({}):", failures.len());
        for f in failures.iter().take(BOXES) {
            let _ = writeln!(
                out,
                "  {} {} on {}: {}",
                words(&f["kind"]),
                words(&f["name"]),
                words(&f["engine"]),
                words(&f["error"]),
            );
        }
        if failures.len() > BOXES {
            let _ = writeln!(
                out,
                "  … and {} more: read failures in structuredContent",
                failures.len() - BOXES
            );
        }
    }
    out.push_str(&retained_line(doc));
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
        _ => {
            out.push_str(
                "NOT converged: the teardown failed; what is left and why is named above.\n",
            );
            if left.objects() > 0 || !failures.is_empty() {
                out.push_str(ADVICE);
            }
        }
    }
    out
}

/// The engines' parts of a fleet's document, or the document itself.
fn parts(doc: &Value) -> Vec<&Value> {
    match doc.get("engines").and_then(Value::as_array) {
        Some(engines) if doc.get("steps").is_none() && doc.get("boxes").is_none() => {
            engines.iter().collect()
        }
        _ => vec![doc],
    }
}

/// The lease lines of a plan's or an inventory box's `leases`.
fn lease_line(l: &Value) -> String {
    let held = match l["state"].as_str() {
        Some("live") => format!("holds until {}", words(&l["until"])),
        Some("expired") => format!("ran out at {} (holds nothing)", words(&l["until"])),
        _ => format!(
            "is not a lease ({}): the box falls back to the grace rule",
            words(&l["problem"])
        ),
    };
    format!("lease {} {held}", words(&l["volume"]))
}

fn plan_words(doc: &Value, failed: bool) -> String {
    let parts = parts(doc);
    let fleet = parts.len() > 1 || doc["engines"].is_array();
    let steps: Vec<&Value> = parts
        .iter()
        .flat_map(|p| p["steps"].as_array().into_iter().flatten())
        .collect();
    let count = |k: Kind| steps.iter().filter(|s| s["kind"] == k.as_str()).count();
    let kept: Vec<&Value> = parts
        .iter()
        .flat_map(|p| by_kind(&p["kept"]).map(|(_, o)| o))
        .collect();
    let blocked: Vec<&Value> = parts
        .iter()
        .flat_map(|p| p["blocked"].as_array().into_iter().flatten())
        .collect();
    let mut out = format!(
        "Plan (changes nothing): would remove {}; keep {}; {} blocked.\n",
        kind_counts(count),
        plural(kept.len(), "object"),
        blocked.len()
    );
    let sections = [
        ("Would remove, in dependency order", &steps),
        ("Blocked: should go but is never forced", &blocked),
        ("Keep", &kept),
    ];
    for (heading, objects) in sections {
        let mut by_box = ByBox::default();
        for o in objects {
            by_box.add(o["box"].as_str(), object(o, None, fleet), why(&o["reason"]));
        }
        if by_box.objects() > 0 {
            let _ = writeln!(out, "{heading} ({}):", by_box.counted());
            by_box.write(&mut out, REST_BY_BOX);
        }
    }
    let mut leases = ByBox::default();
    for p in &parts {
        for l in p["leases"].as_array().into_iter().flatten() {
            leases.add(l["box"].as_str(), lease_line(l), "lease".into());
        }
    }
    if leases.objects() > 0 {
        let _ = writeln!(out, "Leases ({}):", leases.counted());
        let mut text = String::new();
        leases.write(&mut text, REST_BY_BOX);
        out.push_str(&text.replace(": lease\n", "\n"));
    }
    out.push_str(&retained_of(doc, &parts));
    let incomplete: Vec<&Value> = parts
        .iter()
        .flat_map(|p| p["incomplete"].as_array().into_iter().flatten())
        .collect();
    for note in incomplete.iter().take(BOXES) {
        let _ = writeln!(out, "Incomplete: {}", words(note));
    }
    if failed {
        out.push_str(
            "The plan is incomplete: an engine could not be listed whole (see the notes); call plan again once it answers.\n",
        );
    }
    out
}

fn inventory_words(doc: &Value) -> String {
    let parts = parts(doc);
    let fleet = doc["engines"].is_array();
    let mut out = String::new();
    let mut listing = ByBox::default();
    let mut counts = [0usize; 3];
    let mut leases = 0;
    for p in &parts {
        if let Some(error) = p.get("error") {
            let _ = writeln!(
                out,
                "Engine {} could not be listed: {}",
                words(&p["engine"]),
                words(error)
            );
            continue;
        }
        for b in p["boxes"].as_array().into_iter().flatten() {
            let id = b["box"].as_str();
            let mut objects: Vec<String> = Vec::new();
            for c in b["containers"].as_array().into_iter().flatten() {
                let mut c = c.clone();
                c["engine"] = p["engine"].clone();
                objects.push(object(&c, Some("container"), fleet));
                counts[0] += 1;
            }
            for v in b["volumes"].as_array().into_iter().flatten() {
                objects.push(format!("volume {}", words(v)));
                counts[1] += 1;
            }
            for n in b["networks"].as_array().into_iter().flatten() {
                let name = n.get("name").unwrap_or(n);
                objects.push(format!("network {}", words(name)));
                counts[2] += 1;
            }
            let mut held: Vec<String> = Vec::new();
            for l in b["leases"].as_array().into_iter().flatten() {
                held.push(lease_line(l));
                leases += 1;
            }
            let what = if held.is_empty() {
                "no lease".to_string()
            } else {
                held.join("; ")
            };
            for o in objects {
                listing.add(id, o, what.clone());
            }
        }
    }
    let count = listing.boxes.iter().filter(|(b, _)| b.is_some()).count();
    let _ = writeln!(
        out,
        "Inventory (changes nothing): {}; {}; {}.",
        boxes(count),
        kind_counts(|k| match k {
            Kind::Container => counts[0],
            Kind::Volume => counts[1],
            Kind::Network => counts[2],
            _ => 0,
        }),
        plural(leases, "lease"),
    );
    listing.write(&mut out, REST_BY_BOX);
    out.push_str(&retained_of(doc, &parts));
    if listing.objects() > 0 {
        out.push_str(
            "What would be removed and why: call plan (or explain with box:ID for one box).\n",
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
    for item in items.iter().take(BOXES) {
        let of_box = item["box"]
            .as_str()
            .map(|b| format!(" of box {}", clip(b, 80)))
            .unwrap_or_default();
        let verdict = words(&item["verdict"]);
        let step = item["step"]
            .as_u64()
            .map(|s| format!(" (step {s})"))
            .unwrap_or_default();
        let reason = if item["reason"].is_object() {
            why(&item["reason"])
        } else if let Some(rule) = item["excludedBy"]["rule"].as_str() {
            format!("never touched: not managed [{}]", clip(rule, 60))
        } else {
            "no reason given".into()
        };
        let _ = writeln!(
            out,
            "{}{of_box}: {verdict}{step}: {reason}",
            object(item, None, false)
        );
        let link = |l: &Value| {
            let step = l["step"]
                .as_u64()
                .map(|s| format!(" (step {s})"))
                .unwrap_or_default();
            format!("{} {}{step}", words(&l["kind"]), words(&l["name"]))
        };
        for (member, label) in [("waitsFor", "after"), ("waitedForBy", "before")] {
            let links: Vec<String> = item[member]
                .as_array()
                .into_iter()
                .flatten()
                .take(OBJECTS)
                .map(link)
                .collect();
            if !links.is_empty() {
                let _ = writeln!(out, "  {label}: {}", links.join(", "));
            }
        }
        if let Some(at) = item["declaredAt"].as_str() {
            let _ = writeln!(out, "  declared at {}", clip(at, 200));
        }
        for l in item["leases"]
            .as_array()
            .into_iter()
            .flatten()
            .take(OBJECTS)
        {
            let _ = writeln!(out, "  {}", lease_line(l));
        }
    }
    if items.len() > BOXES {
        let _ = writeln!(
            out,
            "… and {} more: read structuredContent (the JSON block below)",
            items.len() - BOXES
        );
    }
    out
}

fn lease_words(doc: &Value, failed: bool) -> String {
    let release = doc["action"] == "release";
    let mut out = String::new();
    let list = doc["boxes"].as_array().cloned().unwrap_or_default();
    let _ = writeln!(
        out,
        "{} on {} ({} clock):",
        if release {
            "Leases released"
        } else {
            "Lease taken"
        },
        boxes(list.len()),
        words(&doc["clock"])
    );
    for b in list.iter().take(BOXES) {
        let mut parts: Vec<String> = Vec::new();
        if let Some(l) = b["lease"].as_object() {
            let l = Value::Object(l.clone());
            parts.push(format!(
                "held until {} by lease {} (ttl {}s)",
                words(&l["until"]),
                words(&l["volume"]),
                words(&l["ttlSeconds"])
            ));
        }
        let released: Vec<String> = b["released"]
            .as_array()
            .into_iter()
            .flatten()
            .map(words)
            .collect();
        if !released.is_empty() {
            parts.push(format!("released {}", released.join(", ")));
        }
        let kept: Vec<String> = b["kept"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|l| format!("{} (until {})", words(&l["volume"]), words(&l["until"])))
            .collect();
        if !kept.is_empty() {
            parts.push(format!("kept {}", kept.join(", ")));
        }
        for e in b["errors"].as_array().into_iter().flatten() {
            parts.push(format!(
                "FAILED at {}: {}",
                words(&e["step"]),
                words(&e["error"])
            ));
        }
        if parts.is_empty() {
            parts.push("nothing to do".into());
        }
        let _ = writeln!(
            out,
            "  box {} on {}: {}",
            words(&b["box"]),
            words(&b["engine"]),
            parts.join("; ")
        );
    }
    if list.len() > BOXES {
        let _ = writeln!(
            out,
            "  … and {} more: read structuredContent (the JSON block below)",
            list.len() - BOXES
        );
    }
    if failed {
        out.push_str("NOT done: what failed is named above; a box whose lease failed is not held (call lease again).\n");
    } else if !release {
        out.push_str(
            "Renew the lease (call lease again) before it runs out while you still use the box.\n",
        );
    }
    out
}

/// The text of a tool's result: what its JSON document says, in words
/// (none when the call failed before one was made), then what the run said
/// on stderr (errors and warnings, already in words).
pub(crate) fn tool_text(tool: &str, doc: Option<&Value>, failed: bool, notes: &str) -> String {
    let mut out = match (tool, doc) {
        ("destroy" | "prune", Some(doc)) => report_words(doc, failed),
        ("plan", Some(doc)) => plan_words(doc, failed),
        ("inventory", Some(doc)) => inventory_words(doc),
        ("explain", Some(doc)) => explain_words(doc),
        ("lease", Some(doc)) => lease_words(doc, failed),
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

/// The second text block of a tool's result: its structured content as
/// JSON (the protocol's advice for hosts that show only text), exactly the
/// document `structuredContent` carries.
pub(crate) fn tool_json(doc: &Value) -> String {
    doc.to_string()
}

/// The server's first line on stderr.
pub(crate) fn mcp_started(
    time: &str,
    engines: &[(String, String)],
    scope: &str,
    tools: &[&str],
) -> String {
    let engines: Vec<String> = engines
        .iter()
        .map(|(name, endpoint)| format!("{} ({})", escape(name), escape(endpoint)))
        .collect();
    format!(
        "{time} mcp: serving tools on stdio ({}); engines: {}; scope: {}\n",
        tools.join(", "),
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
            "remainingVolumes": [{ "engine": "default", "box": "b", "name": "v\u{1b}[31m", "reason": { "code": "inUse", "text": "in use by container x" } }],
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
                "Left behind (1 object in 1 box):\n  box b: volume v\\u{1b}[31m on default: in use by container x [inUse]"
            ),
            "{text}"
        );
        assert!(text.contains("NOT converged"), "{text}");
        assert!(text.contains("What to do:"), "{text}");
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
    fn a_fleet_document_without_parts_or_members_is_words_not_a_panic() {
        for doc in [
            json!({ "engines": [] }),
            json!({}),
            json!({ "engines": [{}] }),
        ] {
            for tool in ["plan", "inventory", "explain", "lease", "destroy", "prune"] {
                let _ = tool_text(tool, Some(&doc), true, "");
                let _ = tool_text(tool, Some(&doc), false, "");
            }
        }
    }

    #[test]
    fn without_a_document_the_notes_say_why() {
        let text = tool_text("plan", None, true, "error: no state file");
        assert_eq!(
            text,
            "plan failed before it had a result.\nerror: no state file\n"
        );
    }

    use crate::render::fixtures::{
        hostile_report, plan_of_many, plan_of_two, report_not_converged, report_of_many,
    };

    fn doc(json: &str) -> Value {
        serde_json::from_str(json).expect("a document")
    }

    fn snapshot(name: &str, text: &str) {
        insta::with_settings!({ snapshot_path => "../../snapshots" }, {
            insta::assert_snapshot!(name, text);
        });
    }

    /// The box t1 of the issue, as `inventory --format json` printed it on
    /// a real engine (a second box leased).
    fn inventory_of_two() -> Value {
        json!({
            "schemaVersion": 2, "engine": "default",
            "scope": { "ca.sandbox": "1", "ca.sandbox.owner": "o" },
            "boxes": [
                { "box": "t1",
                  "containers": [{ "id": "2a2cdb924bfb6a9eed5d8046d669be617a47583", "name": "sbxp-t1",
                                   "state": "created", "mounts": ["sbxp-t1"], "networks": [] }],
                  "volumes": ["sbxp-t1"], "networks": [] },
                { "box": "keepme",
                  "containers": [{ "id": "cf4e69f3b6c344fb694274065773d2f5cc6d54", "name": "sbxp-keepme",
                                   "state": "running", "mounts": ["sbxp-keepme"], "networks": [] }],
                  "volumes": ["ca-sbx-lease-keepme-1a2", "sbxp-keepme"], "networks": [],
                  "leases": [{ "volume": "ca-sbx-lease-keepme-1a2", "box": "keepme", "ttl": "600s",
                               "state": "live", "until": "2026-12-05T22:06:37Z" }] }
            ],
            "retained": { "images": [{ "id": "sha256:e88b9cbe8127", "tags": ["ca-sbx:sandboxctl-test-sleep"] }] }
        })
    }

    #[test]
    fn one_box_texts_name_objects_reasons_and_leases() {
        let plan = doc(&crate::render::plan_json(&plan_of_two()));
        let text = tool_text("plan", Some(&plan), false, "");
        assert!(
            text.contains("box a: container sbx-a (c0ffee000001, exited), volume data-a: leaked: box a is not declared [boxNotDeclared]"),
            "{text}"
        );
        assert!(text.contains("[heldByUnmanaged]"), "{text}");
        snapshot("mcp_text_plan_one_box", &text);

        let text = tool_text("inventory", Some(&inventory_of_two()), false, "");
        assert!(
            text.contains("container sbxp-t1") && text.contains("volume sbxp-t1"),
            "{text}"
        );
        assert!(
            text.contains("lease ca-sbx-lease-keepme-1a2 holds until 2026-12-05T22:06:37Z"),
            "{text}"
        );
        // Naturally sorted: keepme before t1.
        assert!(
            text.find("box keepme").unwrap() < text.find("box t1").unwrap(),
            "{text}"
        );
        snapshot("mcp_text_inventory_two_boxes", &text);

        let explain = json!({ "schemaVersion": 2, "explanations": [
            { "engine": "default", "kind": "volume", "name": "sbxp-t1", "box": "t1",
              "labels": {}, "managed": true, "verdict": "remove", "step": 2,
              "reason": { "code": "boxNotDeclared", "boxId": "t1", "text": "leaked: box t1 is not declared" },
              "waitsFor": [{ "step": 1, "engine": "default", "kind": "container", "name": "sbxp-t1", "box": "t1" }],
              "waitedForBy": [] },
            { "engine": "default", "kind": "volume", "name": "lookalike", "box": null,
              "labels": { "ca.sandbox": "true" }, "managed": false, "verdict": "unmanaged",
              "excludedBy": { "rule": "sandboxValue", "value": "true" } }
        ]});
        let text = tool_text("explain", Some(&explain), false, "");
        snapshot("mcp_text_explain", &text);

        let lease = json!({ "schemaVersion": 2, "action": "take", "ok": true, "clock": "engine",
            "boxes": [{ "engine": "default", "box": "keepme",
                "lease": { "volume": "ca-sbx-lease-keepme-1a2", "box": "keepme", "ttlSeconds": 600,
                           "created": "2026-12-05T21:56:37Z", "until": "2026-12-05T22:06:37Z" },
                "released": ["ca-sbx-lease-keepme-0ff"], "kept": [], "errors": [] }] });
        let text = tool_text("lease", Some(&lease), false, "");
        assert!(text.contains("held until 2026-12-05T22:06:37Z"), "{text}");
        snapshot("mcp_text_lease", &text);
    }

    #[test]
    fn a_failed_teardown_text_names_what_is_left_why_and_what_to_do() {
        let report = doc(&crate::render::report_json(&report_not_converged(), false));
        let text = tool_text("destroy", Some(&report), true, "");
        assert!(text.contains("[removalFailed]"), "{text}");
        assert!(text.contains("What to do:"), "{text}");
        snapshot("mcp_text_report_failed", &text);
        let hostile = doc(&crate::render::report_json(&hostile_report(), false));
        let text = tool_text("destroy", Some(&hostile), true, "");
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{202e}'),
            "{text:?}"
        );
        assert_eq!(
            text.lines().filter(|l| l.contains("FORGED")).count(),
            1,
            "{text}"
        );
    }

    #[test]
    fn two_hundred_boxes_are_counted_and_capped_with_how_to_see_the_rest() {
        let plan = doc(&crate::render::plan_json(&plan_of_many(200)));
        let text = tool_text("plan", Some(&plan), false, "");
        assert!(text.contains("in 200 boxes"), "{text}");
        assert!(
            text.contains("… and 180 more boxes (360 objects): call explain with box:ID"),
            "{text}"
        );
        assert!(text.lines().count() < 30, "{text}");
        snapshot("mcp_text_plan_200_boxes", &text);
        let report = doc(&crate::render::report_json(&report_of_many(200), true));
        let text = tool_text("prune", Some(&report), false, "");
        assert!(text.lines().count() < 30, "{text}");
        snapshot("mcp_text_report_200_boxes", &text);
    }
}
