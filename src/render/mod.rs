//! Render: plans, reports, inventories and reasons as human text or JSON, and
//! the progress display during apply.
//!
//! The only module that turns data into words or prints. Every function that
//! builds text is pure and deterministic (sorted input in, same bytes out), so
//! its output can be snapshot-tested. Everything an engine returned (names,
//! label values, errors) is escaped and long values are cut in human output
//! (`text::clip`); JSON keeps exact values. Must not decide anything.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};

use indicatif::{ProgressBar, ProgressStyle};
use serde::{Serialize, Serializer};

use crate::engine::ErrorKind;
use crate::exec::apply::Outcome;
use crate::exec::verify::{Named, Report};
use crate::model::{short_id, ImageInfo, Kind, Reason, Ref};
use crate::plan::inventory::Inventory;
use crate::plan::{Entry, Noted, Plan, Step};
use crate::text::{clip, escape, escape_lines};

/// Output format, from `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Human,
    Json,
    /// Graphviz DOT (`graph` only).
    Dot,
    /// A Mermaid flowchart (`graph` only).
    Mermaid,
}

/// The widest a table cell may be (in characters) before it is cut; the last
/// column (reasons, errors) may be wider.
const CELL_CHARS: usize = 64;
const LAST_CELL_CHARS: usize = 300;

/// The plan in `format` (JSON, or human text for anything else).
pub fn plan(plan: &Plan, format: Format) -> String {
    match format {
        Format::Json => plan_json(plan),
        _ => plan_human(plan),
    }
}

/// The report in `format`.
pub fn report(report: &Report, format: Format) -> String {
    match format {
        Format::Json => report_json(report),
        _ => report_human(report),
    }
}

/// The inventory in `format`.
pub fn inventory(inv: &Inventory, format: Format) -> String {
    match format {
        Format::Json => inventory_json(inv),
        _ => inventory_human(inv),
    }
}

/// Explanations in `format`.
pub fn explain(items: &[crate::plan::explain::Explanation], format: Format) -> String {
    match format {
        Format::Json => explain_json(items),
        _ => explain_human(items),
    }
}

/// The plan graph in `format` (Mermaid, or DOT for anything else).
pub fn graph(plan: &Plan, format: Format) -> String {
    match format {
        Format::Mermaid => graph_mermaid(plan),
        _ => graph_dot(plan),
    }
}

/// Pretty JSON with a trailing newline.
pub fn json<T: Serialize>(value: &T) -> String {
    let mut s = serde_json::to_string_pretty(value).expect("plain data always serializes");
    s.push('\n');
    s
}

/// A reason in JSON: `{"code": ..., <its fields>, "text": ...}`. Used as the
/// `serialize_with` of every `why`/`reason` field.
pub fn reason_json<S: Serializer>(reason: &Reason, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct WithText<'a> {
        #[serde(flatten)]
        reason: &'a Reason,
        text: String,
    }
    WithText {
        reason,
        text: reason_text(reason),
    }
    .serialize(s)
}

fn refs(list: &[Ref]) -> String {
    list.iter()
        .map(|r| {
            let mut s = format!("{} {}", r.kind, crate::text::cut(&r.name, CELL_CHARS));
            match (&r.id, &r.how) {
                (Some(id), Some(how)) => {
                    let _ = write!(s, " ({}, {how})", short_id(id));
                }
                (Some(id), None) => {
                    let _ = write!(s, " ({})", short_id(id));
                }
                (None, Some(how)) => {
                    let _ = write!(s, " ({how})");
                }
                (None, None) => {}
            }
            s
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A reason in words. The one place reasons become text.
pub fn reason_text(reason: &Reason) -> String {
    // Box IDs and times come from the engine: keep them short in a sentence.
    let short = |s: &str| crate::text::cut(s, CELL_CHARS).into_owned();
    match reason {
        Reason::NoBoxLabel => "leaked: no ca.sandbox.id label".into(),
        Reason::BoxNotDeclared { box_id } => format!("leaked: box {} is not declared", short(box_id)),
        Reason::DestroyRequested { box_id } => format!("destroy {} requested", short(box_id)),
        Reason::Expired { box_id, at } => format!("box {} expired at {}", short(box_id), short(at)),
        Reason::DeclaredBox {
            expires: Some(at), ..
        } => format!("declared box, until {}", short(at)),
        Reason::DeclaredBox { .. } => "declared box".into(),
        Reason::WithinGrace { until } => format!("within grace: eligible from {}", short(until)),
        Reason::NotNamedByDestroy => "not named by destroy".into(),
        Reason::KeptByFile { .. } => "listed in volumes.keep".into(),
        Reason::KeepVolumeFlag => "--keep-volume".into(),
        Reason::MountedByKept { holders } => format!("in use by kept {}", refs(holders)),
        Reason::HeldByUnmanaged { holders } => format!(
            "in use by unmanaged {}; never forced: remove that container first, or declare this object's box (a volume: list it in volumes.keep)",
            refs(holders)
        ),
        Reason::WaitsForBlocked { object } => {
            format!("in use by blocked {}", refs(std::slice::from_ref(object)))
        }
        Reason::RemovalFailed { error } => error.clone(),
        Reason::Changed { detail } => detail.clone(),
        Reason::WaitsForFailed { step, object } => format!(
            "not attempted: it waits for step {step} ({}), which did not succeed",
            refs(std::slice::from_ref(object))
        ),
        Reason::Interrupted => "not attempted: the run was interrupted".into(),
        Reason::AppearedAfterPlan => {
            "appeared after the plan was made (or was recreated after its removal); run again"
                .into()
        }
        Reason::AlreadyGone => "already gone: another actor removed it".into(),
    }
}

/// What a failed step's outcome says, for the report's `error`.
pub fn outcome_text(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Removed => "removed".into(),
        Outcome::AlreadyGone => "already gone".into(),
        Outcome::Failed(e) => match &e.kind {
            ErrorKind::InUse { holders, .. } if !holders.is_empty() => format!(
                "{e} (in use by container {}; never forced)",
                holders
                    .iter()
                    .map(|h| short_id(h))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => e.to_string(),
        },
        Outcome::GaveUpWaiting { seconds } => format!(
            "its removal was started by another actor and had not finished after {seconds}s"
        ),
        Outcome::Refused(detail) => detail.clone(),
        Outcome::Skipped(after) => format!("skipped (step {after} did not succeed)"),
        Outcome::Interrupted => "not started (interrupted)".into(),
    }
}

/// Lays out rows as left-aligned columns separated by two spaces. Every cell
/// is escaped and cut (`CELL_CHARS`; the last column `LAST_CELL_CHARS`).
fn table(mut rows: Vec<Vec<String>>, indent: &str) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0; cols];
    let mut size = 0;
    for row in &mut rows {
        let last = row.len().saturating_sub(1);
        for (c, cell) in row.iter_mut().enumerate() {
            let max = if c == last {
                LAST_CELL_CHARS
            } else {
                CELL_CHARS
            };
            if let Cow::Owned(clipped) = clip(cell, max) {
                *cell = clipped;
            }
            if c < last {
                widths[c] = widths[c].max(cell.chars().count());
            }
            size += cell.len();
        }
        size += indent.len() + 1;
    }
    let mut out = String::with_capacity(size + rows.len() * widths.iter().sum::<usize>());
    for row in &rows {
        let start = out.len();
        out.push_str(indent);
        let last = row.len().saturating_sub(1);
        for (c, cell) in row.iter().enumerate() {
            out.push_str(cell);
            if c < last {
                let pad = widths[c] - cell.chars().count() + 2;
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        let line = out[start..].trim_end().len();
        out.truncate(start + line);
        out.push('\n');
    }
    out
}

fn box_cell(b: Option<&str>) -> String {
    match b {
        Some(b) => format!("box {b}"),
        None => "no box".to_string(),
    }
}

/// `name (short id)` for containers and networks, the name for volumes.
fn name_cell(name: &str, id: Option<&str>) -> String {
    match id {
        Some(id) => format!("{} ({})", clip(name, CELL_CHARS - 15), short_id(id)),
        None => name.to_string(),
    }
}

fn entry_cells(e: &Entry) -> Vec<String> {
    vec![
        e.kind.to_string(),
        name_cell(&e.name, e.id.as_deref()),
        box_cell(e.box_id.as_deref()),
        e.state.clone().unwrap_or_default(),
    ]
}

/// How a person names an object in a sentence: `container web (3f2a1b4c5d6e)`.
pub fn entry_label(e: &Entry) -> String {
    format!(
        "{} {}",
        e.kind,
        escape(&name_cell(&e.name, e.id.as_deref()))
    )
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

fn noted_rows<'a>(items: impl IntoIterator<Item = &'a Noted>) -> Vec<Vec<String>> {
    items
        .into_iter()
        .map(|n| {
            let mut row = entry_cells(&n.object);
            row.push(reason_text(&n.why));
            row
        })
        .collect()
}

/// The plan as a person reads it: removals in order with why and what each
/// waits for, then what is blocked, kept and retained, then a summary line.
pub fn plan_human(plan: &Plan) -> String {
    let scope: Vec<String> = plan.scope.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut out = format!("Scope: {}\n", escape(&scope.join(", ")));
    if !plan.steps.is_empty() {
        out.push_str("\nRemove, in this order:\n");
        let rows: Vec<Vec<String>> = plan
            .steps
            .iter()
            .map(|s: &Step| {
                let mut row = vec![format!("{}.", s.step)];
                row.extend(entry_cells(&s.object));
                row.push(reason_text(&s.why));
                if !s.waits_for.is_empty() {
                    let w: Vec<String> = s.waits_for.iter().map(|w| w.to_string()).collect();
                    row.push(format!("after {}", w.join(", ")));
                }
                row
            })
            .collect();
        out.push_str(&table(rows, "  "));
    }
    if !plan.blocked.is_empty() {
        out.push_str("\nBlocked (never forced; apply will fail until resolved):\n");
        out.push_str(&table(noted_rows(&plan.blocked), "  "));
    }
    if !plan.kept.is_empty() {
        out.push_str("\nKeep:\n");
        out.push_str(&table(noted_rows(plan.kept.all()), "  "));
    }
    if !plan.retained.images.is_empty() {
        out.push_str("\nRetain (images are never removed):\n");
        out.push_str(&image_table(&plan.retained.images));
    }
    out.push('\n');
    out.push_str(&plan_summary(plan));
    out.push('\n');
    out
}

/// Images as table rows: tags and short ID.
fn image_table<'a>(images: impl IntoIterator<Item = &'a ImageInfo>) -> String {
    let rows: Vec<Vec<String>> = images
        .into_iter()
        .map(|i| vec!["image".into(), i.tags.join(", "), short_id(&i.id).into()])
        .collect();
    table(rows, "  ")
}

/// Counts by kind in words: `2 containers, 1 volume and 0 networks`.
fn kind_counts(count: impl Fn(Kind) -> usize) -> String {
    let parts: Vec<String> = Kind::ALL
        .iter()
        .map(|&k| plural(count(k), k.as_str()))
        .collect();
    format!("{}, {} and {}", parts[0], parts[1], parts[2])
}

/// The one-line summary: `Plan: remove 2 containers, 1 volume and 0 networks; ...`.
pub fn plan_summary(plan: &Plan) -> String {
    let tail = format!(
        "keep {}; retain {}.",
        plural(plan.kept.len(), "object"),
        plural(plan.retained.images.len(), "image")
    );
    let blocked = if plan.blocked.is_empty() {
        String::new()
    } else {
        format!("{} blocked; ", plural(plan.blocked.len(), "object"))
    };
    if plan.steps.is_empty() {
        format!("Plan: nothing to remove; {blocked}{tail}")
    } else {
        format!(
            "Plan: remove {}; {blocked}{tail}",
            kind_counts(|k| plan.removal_count(k))
        )
    }
}

/// The plan as JSON (also the saved-plan format), with the summary line.
pub fn plan_json(plan: &Plan) -> String {
    #[derive(Serialize)]
    struct WithSummary<'a> {
        #[serde(flatten)]
        plan: &'a Plan,
        summary: String,
    }
    json(&WithSummary {
        plan,
        summary: plan_summary(plan),
    })
}

fn named_cells(kind: Kind, n: &Named) -> Vec<String> {
    vec![
        kind.to_string(),
        name_cell(&n.name, n.id.as_deref()),
        box_cell(n.box_id.as_deref()),
    ]
}

/// The report as a person reads it; the last line says whether it converged.
pub fn report_human(report: &Report) -> String {
    let mut out = String::new();
    let removed: Vec<Vec<String>> = Kind::ALL
        .iter()
        .flat_map(|&k| {
            report.removed.of_kind(k).iter().map(move |g| {
                let mut row = named_cells(k, &g.object);
                if g.outcome != "removed" {
                    row.push("(already gone)".into());
                }
                row
            })
        })
        .collect();
    if !removed.is_empty() {
        out.push_str("Removed:\n");
        out.push_str(&table(removed, "  "));
    }
    if !report.failures.is_empty() {
        out.push_str("\nFailures:\n");
        let rows: Vec<Vec<String>> = report
            .failures
            .iter()
            .map(|f| {
                vec![
                    f.kind.clone(),
                    name_cell(&f.name, f.id.as_deref()),
                    f.error.clone(),
                ]
            })
            .collect();
        out.push_str(&table(rows, "  "));
    }
    let left: Vec<Vec<String>> = Kind::ALL
        .iter()
        .flat_map(|&k| {
            report.remaining(k).iter().map(move |l| {
                let mut row = named_cells(k, &l.object);
                row.push(reason_text(&l.reason));
                row
            })
        })
        .collect();
    let left_behind = left.len();
    if left_behind > 0 {
        out.push_str("\nLeft behind:\n");
        out.push_str(&table(left, "  "));
    }
    out.push_str(&format!(
        "\nRemoved {}; kept {}; retained {}.\n",
        kind_counts(|k| report.removed.of_kind(k).len()),
        plural(report.kept.len(), "object"),
        plural(report.retained.images.len(), "image"),
    ));
    if report.converged {
        out.push_str("Converged: a fresh listing shows nothing left to do.\n");
    } else {
        let mut why = Vec::new();
        if report.interrupted {
            why.push("interrupted".to_string());
        }
        if !report.failures.is_empty() {
            why.push(plural(report.failures.len(), "failure"));
        }
        if left_behind > 0 {
            why.push(format!("{} left behind", plural(left_behind, "object")));
        }
        out.push_str(&format!("NOT converged: {}.\n", why.join(", ")));
    }
    out
}

/// The report as JSON.
pub fn report_json(report: &Report) -> String {
    json(report)
}

#[derive(Serialize)]
struct InventoryBox<'a> {
    #[serde(rename = "box")]
    box_id: Option<&'a str>,
    containers: Vec<InventoryContainer<'a>>,
    volumes: Vec<&'a str>,
    networks: Vec<InventoryNetwork<'a>>,
}

#[derive(Serialize)]
struct InventoryContainer<'a> {
    id: &'a str,
    name: &'a str,
    state: &'a str,
    mounts: Vec<&'a str>,
    networks: Vec<&'a str>,
}

#[derive(Serialize)]
struct InventoryNetwork<'a> {
    id: &'a str,
    name: &'a str,
}

#[derive(Serialize)]
struct InventoryView<'a> {
    engine: &'a str,
    scope: Vec<String>,
    boxes: Vec<InventoryBox<'a>>,
    images: Vec<&'a ImageInfo>,
}

fn inventory_view(inv: &Inventory) -> InventoryView<'_> {
    let mut grouped: BTreeMap<Option<&str>, InventoryBox> = BTreeMap::new();
    let mut objects: Vec<_> = inv.objects.values().collect();
    objects.sort_by(|a, b| (a.kind(), &a.name, &a.key).cmp(&(b.kind(), &b.name, &b.key)));
    fn name_of<'a>(inv: &'a Inventory, key: &'a crate::model::ObjectKey) -> &'a str {
        inv.objects
            .get(key)
            .map(|o| o.name.as_str())
            .unwrap_or(key.id.as_str())
    }
    for o in objects {
        let b = grouped.entry(o.box_id()).or_insert_with(|| InventoryBox {
            box_id: o.box_id(),
            containers: vec![],
            volumes: vec![],
            networks: vec![],
        });
        match o.kind() {
            Kind::Container => b.containers.push(InventoryContainer {
                id: &o.key.id,
                name: &o.name,
                state: o.state.as_deref().unwrap_or_default(),
                mounts: o
                    .depends_on
                    .iter()
                    .filter(|d| d.kind == Kind::Volume)
                    .map(|d| d.id.as_str())
                    .collect(),
                networks: o
                    .depends_on
                    .iter()
                    .filter(|d| d.kind == Kind::Network)
                    .map(|d| name_of(inv, d))
                    .collect(),
            }),
            Kind::Volume => b.volumes.push(&o.name),
            Kind::Network => b.networks.push(InventoryNetwork {
                id: &o.key.id,
                name: &o.name,
            }),
        }
    }
    InventoryView {
        engine: &inv.engine,
        scope: inv.scope.filters(),
        boxes: grouped.into_values().collect(),
        images: inv.images.values().collect(),
    }
}

/// The inventory grouped by box (objects without a box label first), with
/// container states, then the retained images.
pub fn inventory_human(inv: &Inventory) -> String {
    let view = inventory_view(inv);
    let mut out = format!("Scope: {}\n", escape(&view.scope.join(", ")));
    for b in &view.boxes {
        out.push_str(&format!(
            "\n{}\n",
            match b.box_id {
                Some(id) => format!("box {}", clip(id, CELL_CHARS)),
                None => "no box label (leaked)".to_string(),
            }
        ));
        let mut rows: Vec<Vec<String>> = b
            .containers
            .iter()
            .map(|c| {
                let mut uses: Vec<String> = Vec::new();
                if !c.mounts.is_empty() {
                    uses.push(format!("mounts {}", c.mounts.join(", ")));
                }
                if !c.networks.is_empty() {
                    uses.push(format!("on {}", c.networks.join(", ")));
                }
                vec![
                    "container".into(),
                    name_cell(c.name, Some(c.id)),
                    c.state.into(),
                    uses.join("; "),
                ]
            })
            .collect();
        rows.extend(
            b.volumes
                .iter()
                .map(|v| vec!["volume".into(), v.to_string()]),
        );
        rows.extend(
            b.networks
                .iter()
                .map(|n| vec!["network".into(), name_cell(n.name, Some(n.id))]),
        );
        out.push_str(&table(rows, "  "));
    }
    if !view.images.is_empty() {
        out.push_str("\nImages (retained, never removed):\n");
        out.push_str(&image_table(view.images.iter().copied()));
    }
    out.push_str(&format!(
        "\n{} managed; {} retained.\n",
        kind_counts(|k| inv.of_kind(k).count()),
        plural(inv.images.len(), "image")
    ));
    out
}

/// The inventory as JSON.
pub fn inventory_json(inv: &Inventory) -> String {
    json(&inventory_view(inv))
}

/// Writes to standard output. A write error (a closed pipe: `sandboxctl plan
/// | head -1`) is ignored: the command still runs to its end and its exit
/// status is its own (an apply into a closed pipe still verifies).
pub fn stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// Writes to standard error.
pub fn stderr(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// An error for the user: `error: ` and the whole cause chain, one per line,
/// every line escaped (errors quote engine text).
pub fn error(err: &anyhow::Error) -> String {
    let mut out = format!("error: {}\n", escape_lines(&err.to_string()));
    for cause in err.chain().skip(1) {
        out.push_str(&format!(
            "  caused by: {}\n",
            escape_lines(&cause.to_string())
        ));
    }
    out
}

/// Progress during apply: a bar on a terminal (human format), one line per
/// finished step when stderr is not a terminal, nothing for JSON.
pub enum Progress {
    Bar { bar: ProgressBar, failures: usize },
    Lines,
    Quiet,
}

impl Progress {
    pub fn new(format: Format, total: usize) -> Progress {
        match format {
            Format::Json | Format::Dot | Format::Mermaid => Progress::Quiet,
            Format::Human if std::io::stderr().is_terminal() && total > 0 => {
                let bar = ProgressBar::new(total as u64);
                bar.set_style(
                    ProgressStyle::with_template("{bar:30} {pos}/{len} done{msg} ({elapsed})")
                        .expect("static template"),
                );
                Progress::Bar { bar, failures: 0 }
            }
            _ => Progress::Lines,
        }
    }

    /// Clears the bar, if any.
    pub fn finish(&self) {
        if let Progress::Bar { bar, .. } = self {
            bar.finish_and_clear();
        }
    }
}

impl Progress {
    /// Shows that a step ended.
    pub fn finished(&mut self, step: &Step, outcome: &Outcome) {
        match self {
            Progress::Quiet => {}
            Progress::Lines => {
                let what = match outcome {
                    Outcome::Removed => "removed".to_string(),
                    Outcome::AlreadyGone => "already gone".to_string(),
                    Outcome::Failed(_) | Outcome::GaveUpWaiting { .. } => {
                        format!("FAILED: {}", outcome_text(outcome))
                    }
                    Outcome::Refused(e) => format!("refused: {e}"),
                    other => outcome_text(other),
                };
                stderr(&format!(
                    "{:>4}. {} {}\n",
                    step.step,
                    entry_label(&step.object),
                    clip(&what, LAST_CELL_CHARS)
                ));
            }
            Progress::Bar { bar, failures } => {
                if !outcome.is_success() {
                    *failures += 1;
                    bar.set_message(format!(", {failures} not removed"));
                }
                bar.inc(1);
            }
        }
    }
}

/// An optional reason in JSON (see [`reason_json`]).
pub fn opt_reason_json<S: Serializer>(reason: &Option<Reason>, s: S) -> Result<S::Ok, S::Error> {
    match reason {
        Some(r) => reason_json(r, s),
        None => s.serialize_none(),
    }
}

fn labels_text(labels: &crate::model::Labels) -> String {
    if labels.is_empty() {
        return "(none)".into();
    }
    labels
        .iter()
        .map(|(k, v)| format!("{}={}", clip(k, CELL_CHARS), clip(v, CELL_CHARS)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn exclusion_text(e: &crate::model::Exclusion) -> String {
    use crate::model::Exclusion;
    match e {
        Exclusion::NoSandboxLabel => "it has no ca.sandbox label".into(),
        Exclusion::SandboxValue { value } => format!(
            "its ca.sandbox label is {:?}, not exactly \"1\"",
            clip(value, CELL_CHARS)
        ),
        Exclusion::ScopeLabel {
            key,
            want,
            have: None,
        } => format!(
            "it lacks the scope label {}={}",
            clip(key, CELL_CHARS),
            clip(want, CELL_CHARS)
        ),
        Exclusion::ScopeLabel {
            key,
            want,
            have: Some(have),
        } => format!(
            "its scope label {} is {:?}, not {:?}",
            clip(key, CELL_CHARS),
            clip(have, CELL_CHARS),
            clip(want, CELL_CHARS)
        ),
    }
}

/// Explanations as a person reads them: one block per object, as a chain.
pub fn explain_human(items: &[crate::plan::explain::Explanation]) -> String {
    use crate::plan::explain::Verdict;
    let mut out = String::new();
    for (i, e) in items.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "{}", entry_label(&e.object));
        let _ = writeln!(out, "  engine:   {}", escape(&e.object.engine));
        let _ = writeln!(out, "  labels:   {}", labels_text(&e.labels));
        match &e.excluded_by {
            None => {
                let _ = writeln!(
                    out,
                    "  managed:  yes (labeled ca.sandbox=1 and every scope label)"
                );
            }
            Some(ex) => {
                let _ = writeln!(out, "  managed:  no: {}", exclusion_text(ex));
            }
        }
        let reason = e
            .reason
            .as_ref()
            .map(|r| clip(&reason_text(r), LAST_CELL_CHARS).into_owned())
            .unwrap_or_default();
        let verdict = match (e.verdict, e.step) {
            (Verdict::Remove, Some(step)) => format!("remove, step {step}: {reason}"),
            (Verdict::Remove, None) => format!("remove: {reason}"),
            (Verdict::Keep, _) => format!("keep: {reason}"),
            (Verdict::Blocked, _) => format!("blocked (never forced): {reason}"),
            (Verdict::Unmanaged, _) => "never touched: it is not managed".into(),
        };
        let _ = writeln!(out, "  plan:     {verdict}");
        if let Some(at) = &e.declared_at {
            let _ = writeln!(out, "  state:    {}", escape(at));
        }
        for l in &e.waits_for {
            let _ = writeln!(
                out,
                "  after:    step {} {}",
                l.step,
                entry_label(&l.object)
            );
        }
        for l in &e.waited_for_by {
            let _ = writeln!(
                out,
                "  before:   step {} {}",
                l.step,
                entry_label(&l.object)
            );
        }
    }
    out
}

/// Explanations as JSON, with the reason codes.
pub fn explain_json(items: &[crate::plan::explain::Explanation]) -> String {
    json(&items)
}

/// A node of the plan graph: its ID, label lines, and class.
struct GraphNode {
    id: String,
    lines: Vec<String>,
    class: &'static str,
}

/// The plan as nodes and edges: steps (remove), blocked, kept, retained
/// images, and the unmanaged or kept holders named by reasons.
fn graph_parts(plan: &Plan) -> (Vec<GraphNode>, Vec<(String, String, &'static str)>) {
    let node_id = |e: &Entry| format!("{}/{}", e.kind, e.key().id);
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    for s in &plan.steps {
        nodes.push(GraphNode {
            id: node_id(&s.object),
            lines: vec![
                format!("{}. remove {}", s.step, s.object.kind),
                s.object.name.clone(),
                reason_text(&s.why),
            ],
            class: "remove",
        });
        for &w in &s.waits_for {
            edges.push((
                node_id(&plan.steps[w - 1].object),
                node_id(&s.object),
                "before",
            ));
        }
    }
    let mut holders: BTreeMap<String, GraphNode> = BTreeMap::new();
    for (noted, class) in plan
        .blocked
        .iter()
        .map(|n| (n, "blocked"))
        .chain(plan.kept.all().map(|n| (n, "keep")))
    {
        let id = node_id(&noted.object);
        nodes.push(GraphNode {
            id: id.clone(),
            lines: vec![
                format!("{class} {}", noted.object.kind),
                noted.object.name.clone(),
                reason_text(&noted.why),
            ],
            class,
        });
        let (list, unmanaged) = match &noted.why {
            Reason::HeldByUnmanaged { holders } => (holders.clone(), true),
            Reason::MountedByKept { holders } => (holders.clone(), false),
            Reason::WaitsForBlocked { object } => (vec![object.clone()], false),
            _ => (vec![], false),
        };
        for r in list {
            let hid = format!(
                "{}/{}",
                r.kind,
                r.id.clone().unwrap_or_else(|| r.name.clone())
            );
            if unmanaged {
                holders.entry(hid.clone()).or_insert_with(|| GraphNode {
                    id: hid.clone(),
                    lines: vec![format!("unmanaged {}", r.kind), r.name.clone()],
                    class: "unmanaged",
                });
            }
            edges.push((hid, id.clone(), "uses"));
        }
    }
    nodes.extend(holders.into_values());
    for i in &plan.retained.images {
        nodes.push(GraphNode {
            id: format!("image/{}", i.id),
            lines: vec!["retain image".into(), i.tags.join(", ")],
            class: "retain",
        });
    }
    (nodes, edges)
}

/// Text for a DOT double-quoted string: escaped, cut, quotes and backslashes escaped.
fn dot_text(s: &str) -> String {
    dot_quote(&clip(s, CELL_CHARS))
}

/// Escaped text made safe inside a DOT double-quoted string.
fn dot_quote(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// A DOT node ID: escaped but never cut (IDs must stay unique).
fn dot_id(s: &str) -> String {
    dot_quote(&escape(s))
}

/// The plan as a Graphviz DOT digraph (`sandboxctl graph | dot -Tsvg`). Edges
/// run from what goes first to what waits for it; dashed edges show what uses
/// a kept or blocked object.
pub fn graph_dot(plan: &Plan) -> String {
    let (nodes, edges) = graph_parts(plan);
    let mut out = String::from(
        "digraph plan {\n  rankdir=LR;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n",
    );
    for n in &nodes {
        let (fill, extra) = match n.class {
            "remove" => ("#f8d7da", ""),
            "blocked" => ("#ffe5b4", ", penwidth=2, color=\"#d9480f\""),
            "keep" => ("#d3f9d8", ""),
            "retain" => ("#e9ecef", ", shape=cylinder"),
            _ => ("#ffffff", ", style=\"rounded,dashed\""),
        };
        let label: Vec<String> = n.lines.iter().map(|l| dot_text(l)).collect();
        let _ = writeln!(
            out,
            "  \"{}\" [label=\"{}\", fillcolor=\"{fill}\"{extra}];",
            dot_id(&n.id),
            label.join("\\n")
        );
    }
    for (from, to, what) in &edges {
        let style = if *what == "uses" {
            " [style=dashed, label=\"uses\"]"
        } else {
            ""
        };
        let _ = writeln!(out, "  \"{}\" -> \"{}\"{style};", dot_id(from), dot_id(to));
    }
    out.push_str("}\n");
    out
}

/// The plan as a Mermaid flowchart.
pub fn graph_mermaid(plan: &Plan) -> String {
    let (nodes, edges) = graph_parts(plan);
    let ids: BTreeMap<&str, String> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), format!("n{i}")))
        .collect();
    let text = |s: &str| {
        clip(s, CELL_CHARS)
            .replace('"', "#quot;")
            .replace('<', "#lt;")
            .replace('>', "#gt;")
    };
    let mut out = String::from("flowchart LR\n");
    for n in &nodes {
        let label: Vec<String> = n.lines.iter().map(|l| text(l)).collect();
        let _ = writeln!(
            out,
            "  {}[\"{}\"]:::{}",
            ids[n.id.as_str()],
            label.join("<br/>"),
            n.class
        );
    }
    for (from, to, what) in &edges {
        let (Some(a), Some(b)) = (ids.get(from.as_str()), ids.get(to.as_str())) else {
            continue;
        };
        if *what == "uses" {
            let _ = writeln!(out, "  {a} -.->|uses| {b}");
        } else {
            let _ = writeln!(out, "  {a} --> {b}");
        }
    }
    out.push_str("  classDef remove fill:#f8d7da\n  classDef blocked fill:#ffe5b4,stroke:#d9480f,stroke-width:2px\n  classDef keep fill:#d3f9d8\n  classDef retain fill:#e9ecef\n  classDef unmanaged fill:#ffffff,stroke-dasharray: 4 2\n");
    out
}

/// One watch log line: the time, then what happened. Human text, or a JSON
/// object per line with `--format json`.
fn log_line(
    format: Format,
    time: &str,
    event: &str,
    human: String,
    fields: serde_json::Value,
) -> String {
    match format {
        Format::Json => {
            let mut v = serde_json::json!({ "time": time, "event": event });
            if let (Some(map), serde_json::Value::Object(extra)) = (v.as_object_mut(), fields) {
                map.extend(extra);
            }
            let mut s = v.to_string();
            s.push('\n');
            s
        }
        _ => format!("{time} {}\n", escape_lines(&human)),
    }
}

/// The log line of a watch cycle on one engine, or `None` for a cycle that
/// did nothing (converged with nothing removed).
pub fn watch_cycle(
    format: Format,
    time: &str,
    engine: &str,
    trigger: &str,
    took: std::time::Duration,
    result: &Result<Report, crate::exec::fleet::PartError>,
) -> Option<String> {
    let ms = took.as_millis() as u64;
    match result {
        Err(e) => Some(log_line(
            format,
            time,
            "cycleFailed",
            format!("engine {engine}: cycle ({trigger}) removed nothing: {e}"),
            serde_json::json!({ "engine": engine, "trigger": trigger, "tookMs": ms, "error": e.to_string() }),
        )),
        Ok(r) if r.converged && r.removed.is_empty() => None,
        Ok(r) => {
            let counts = kind_counts(|k| r.removed.of_kind(k).len());
            let left = r.all_remaining().count();
            let state = if r.converged {
                "converged".to_string()
            } else {
                format!(
                    "NOT converged: {}, {} left behind",
                    plural(r.failures.len(), "failure"),
                    plural(left, "object")
                )
            };
            let mut human =
                format!("engine {engine}: cycle ({trigger}, {ms} ms) removed {counts}; {state}");
            for f in &r.failures {
                let _ = write!(
                    human,
                    "\n  failed: {} {}: {}",
                    f.kind,
                    name_cell(&f.name, f.id.as_deref()),
                    f.error
                );
            }
            Some(log_line(
                format,
                time,
                "cycle",
                human,
                serde_json::json!({
                    "engine": engine,
                    "trigger": trigger,
                    "tookMs": ms,
                    "converged": r.converged,
                    "removed": {
                        "containers": r.removed.containers.len(),
                        "volumes": r.removed.volumes.len(),
                        "networks": r.removed.networks.len(),
                    },
                    "failures": r.failures,
                    "remaining": left,
                }),
            ))
        }
    }
}

/// The log line of an event stream lost (`error`) or back.
pub fn watch_stream(format: Format, time: &str, engine: &str, error: Option<&str>) -> String {
    match error {
        Some(e) => log_line(
            format,
            time,
            "streamLost",
            format!("engine {engine}: event stream lost: {e}; reconnecting with backoff"),
            serde_json::json!({ "engine": engine, "error": e }),
        ),
        None => log_line(
            format,
            time,
            "streamBack",
            format!("engine {engine}: event stream reconnected; running a full cycle"),
            serde_json::json!({ "engine": engine }),
        ),
    }
}

/// The log line of a state file reloaded, or broken (`error`).
pub fn watch_state(format: Format, time: &str, error: Option<&str>) -> String {
    match error {
        Some(e) => log_line(
            format,
            time,
            "stateBroken",
            format!("state file not applied: {e}"),
            serde_json::json!({ "error": e }),
        ),
        None => log_line(
            format,
            time,
            "stateReloaded",
            "state file changed: reloaded".into(),
            serde_json::json!({}),
        ),
    }
}

/// The log line of a failure to write the audit log.
pub fn watch_audit_error(format: Format, time: &str, error: &str) -> String {
    log_line(
        format,
        time,
        "auditFailed",
        format!("error: {error}"),
        serde_json::json!({ "error": error }),
    )
}

/// A fleet's plan: each engine's plan under its heading, engines that could
/// not be listed, and a fleet summary line. JSON: the saved fleet plan with
/// the summary.
pub fn fleet_plan(
    fleet: &crate::exec::fleet::FleetPlan,
    endpoints: &[(String, String)],
    format: Format,
) -> String {
    let summary = fleet_plan_summary(fleet);
    if format == Format::Json {
        #[derive(Serialize)]
        struct WithSummary<'a> {
            #[serde(flatten)]
            fleet: &'a crate::exec::fleet::FleetPlan,
            summary: String,
        }
        return json(&WithSummary { fleet, summary });
    }
    let mut out = String::new();
    for plan in &fleet.engines {
        let _ = writeln!(
            out,
            "Engine {}: {}",
            escape(&plan.engine),
            endpoint_of(endpoints, &plan.engine)
        );
        out.push_str(&plan_human(plan));
        out.push('\n');
    }
    for f in &fleet.failures {
        let _ = writeln!(
            out,
            "Engine {}: {}\n  FAILED: {}\n",
            escape(&f.engine),
            endpoint_of(endpoints, &f.engine),
            clip(&f.error, LAST_CELL_CHARS)
        );
    }
    out.push_str(&summary);
    out.push('\n');
    out
}

fn endpoint_of(endpoints: &[(String, String)], engine: &str) -> String {
    endpoints
        .iter()
        .find(|(n, _)| n == engine)
        .map(|(_, e)| e.clone())
        .unwrap_or_default()
}

/// `Fleet: 2 engines; remove 1 container, ...; 1 engine failed.`
pub fn fleet_plan_summary(fleet: &crate::exec::fleet::FleetPlan) -> String {
    let count = |k: Kind| {
        fleet
            .engines
            .iter()
            .map(|p| p.removal_count(k))
            .sum::<usize>()
    };
    let blocked: usize = fleet.engines.iter().map(|p| p.blocked.len()).sum();
    let kept: usize = fleet.engines.iter().map(|p| p.kept.len()).sum();
    let mut s = format!(
        "Fleet: {} listed; remove {}; {}keep {}",
        plural(fleet.engines.len(), "engine"),
        kind_counts(count),
        if blocked > 0 {
            format!("{} blocked; ", plural(blocked, "object"))
        } else {
            String::new()
        },
        plural(kept, "object"),
    );
    if !fleet.failures.is_empty() {
        let _ = write!(
            s,
            "; {} FAILED ({})",
            plural(fleet.failures.len(), "engine"),
            fleet
                .failures
                .iter()
                .map(|f| escape(&f.engine).into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    s.push('.');
    s
}

/// A fleet's report: each engine's report under its heading, then the
/// per-engine summary and whether the fleet converged. JSON: the merged
/// report with `engines`.
pub fn fleet_report(report: &crate::exec::fleet::FleetReport, format: Format) -> String {
    if format == Format::Json {
        return json(report);
    }
    let mut out = String::new();
    for part in &report.parts {
        let _ = writeln!(out, "Engine {}:", escape(&part.engine));
        out.push_str(&indented(&report_human(&part.report())));
        out.push('\n');
    }
    out.push_str("Engines:\n");
    let rows: Vec<Vec<String>> = report
        .engines
        .iter()
        .map(|s| {
            vec![
                s.engine.clone(),
                s.endpoint.clone(),
                if s.converged {
                    "converged".into()
                } else {
                    "NOT converged".into()
                },
                format!("removed {}", s.removed),
                format!("{} left", s.remaining),
                s.error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    out.push_str(&table(rows, "  "));
    let r = &report.report;
    out.push_str(&format!(
        "\nFleet: removed {}; kept {}; retained {}.\n",
        kind_counts(|k| r.removed.of_kind(k).len()),
        plural(r.kept.len(), "object"),
        plural(r.retained.images.len(), "image"),
    ));
    if r.converged {
        out.push_str("Converged on every engine.\n");
    } else {
        let failed = report.engines.iter().filter(|s| !s.converged).count();
        out.push_str(&format!(
            "NOT converged on {} of {}.\n",
            plural(failed, "engine"),
            report.engines.len()
        ));
    }
    out
}

/// A fleet's inventories, each under its engine's heading (JSON: a list).
pub fn fleet_inventory(parts: &[(String, Result<Inventory, String>)], format: Format) -> String {
    if format == Format::Json {
        let list: Vec<serde_json::Value> = parts
            .iter()
            .map(|(engine, r)| match r {
                Ok(inv) => serde_json::to_value(inventory_view(inv)).unwrap_or_default(),
                Err(e) => serde_json::json!({ "engine": engine, "error": e }),
            })
            .collect();
        return json(&serde_json::json!({ "engines": list }));
    }
    let mut out = String::new();
    for (engine, r) in parts {
        let _ = writeln!(out, "Engine {}:", escape(engine));
        match r {
            Ok(inv) => {
                out.push_str(&indented(&inventory_human(inv)));
            }
            Err(e) => {
                let _ = writeln!(out, "  FAILED: {}", clip(e, LAST_CELL_CHARS));
            }
        }
        out.push('\n');
    }
    out
}

/// Every non-empty line indented by two spaces.
fn indented(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.lines() {
        if !line.is_empty() {
            out.push_str("  ");
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// `validate`'s answer: per file, valid or every problem (file:line:col).
pub fn validation(
    results: &[(std::path::PathBuf, Vec<crate::state::StateError>)],
    format: Format,
) -> String {
    if format == Format::Json {
        let files: Vec<serde_json::Value> = results
            .iter()
            .map(|(path, problems)| {
                serde_json::json!({
                    "path": path.display().to_string(),
                    "valid": problems.is_empty(),
                    "problems": problems.iter().map(|p| {
                        let (line, column) = match p.at {
                            Some((l, c)) => (Some(l), Some(c)),
                            None => (None, None),
                        };
                        serde_json::json!({
                            "line": line,
                            "column": column,
                            "message": p.kind.to_string(),
                            "text": p.to_string(),
                        })
                    }).collect::<Vec<_>>(),
                })
            })
            .collect();
        let valid = results.iter().all(|(_, p)| p.is_empty());
        return json(&serde_json::json!({ "valid": valid, "files": files }));
    }
    let mut out = String::new();
    for (path, problems) in results {
        if problems.is_empty() {
            let _ = writeln!(out, "{}: valid", escape(&path.display().to_string()));
        }
        for p in problems {
            let _ = writeln!(out, "{}", escape_lines(&p.to_string()));
        }
    }
    out
}

/// The warning for an engine that returned objects its label filter should
/// have kept out (they were ignored), or `None`.
pub fn rejected_warning(inv: &Inventory) -> Option<String> {
    if inv.rejected.is_empty() {
        return None;
    }
    Some(format!(
        "warning: engine {} returned {} that {} not carry the labels it was asked to filter by ({}); {} ignored. The engine does not apply label filters as Docker does: only sandboxctl's own label check kept them out\n",
        escape(&inv.engine),
        plural(inv.rejected.len(), "object"),
        if inv.rejected.len() == 1 { "does" } else { "do" },
        escape(&inv.scope.to_string()),
        if inv.rejected.len() == 1 { "it was" } else { "they were" },
    ))
}

/// The log line of a watch starting: its engines, grace, and metrics address.
pub fn watch_started(
    format: Format,
    time: &str,
    engines: &[(String, String)],
    grace: Option<std::time::Duration>,
    metrics: Option<std::net::SocketAddr>,
) -> String {
    let names: Vec<String> = engines
        .iter()
        .map(|(n, e)| format!("{} ({})", escape(n), escape(e)))
        .collect();
    let grace_text = grace
        .map(|g| humantime::format_duration(g).to_string())
        .unwrap_or_else(|| "0s".into());
    let mut human = format!("watching {} with grace {grace_text}", names.join(", "));
    if let Some(addr) = metrics {
        let _ = write!(human, "; metrics on http://{addr}/metrics");
    }
    log_line(
        format,
        time,
        "started",
        human,
        serde_json::json!({
            "engines": engines.iter().map(|(n, e)| serde_json::json!({"engine": n, "endpoint": e})).collect::<Vec<_>>(),
            "graceSeconds": grace.map(|g| g.as_secs()),
            "metrics": metrics.map(|a| a.to_string()),
        }),
    )
}

/// The log line of a watch told to stop.
pub fn watch_stopping(format: Format, time: &str, signal: &str) -> String {
    log_line(
        format,
        time,
        "stopping",
        format!("{signal}: stopping: finishing removals in flight, then verifying"),
        serde_json::json!({ "signal": signal }),
    )
}
