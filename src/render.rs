//! Render: plans, reports and inventories as human text or JSON, and the
//! progress display during apply.
//!
//! The only module that formats output for people or prints. Every function
//! that builds text is pure and deterministic (sorted input in, same bytes
//! out), so its output can be snapshot-tested. Must not decide anything.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::apply::{Observer, Outcome};
use crate::inventory::Inventory;
use crate::model::{short_id, ImageInfo};
use crate::plan::{Noted, Object, Plan, Step};
use crate::verify::{Leftover, Named, Report};

/// Output format, from `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Human,
    Json,
}

/// Pretty JSON with a trailing newline.
pub fn json<T: Serialize>(value: &T) -> String {
    let mut s = serde_json::to_string_pretty(value).expect("plain data always serializes");
    s.push('\n');
    s
}

/// Lays out rows as left-aligned columns separated by two spaces.
fn table(rows: &[Vec<String>], indent: &str) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::from(indent);
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ", w = widths[c]);
            }
        }
        out.push_str(line.trim_end());
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

fn object_cells(o: &Object) -> Vec<String> {
    match o {
        Object::Container {
            id, name, state, ..
        } => vec![
            "container".into(),
            format!("{name} ({})", short_id(id)),
            box_cell(o.box_id()),
            state.clone(),
        ],
        Object::Volume { name, .. } => vec![
            "volume".into(),
            name.clone(),
            box_cell(o.box_id()),
            String::new(),
        ],
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

fn noted_rows(items: &[Noted]) -> Vec<Vec<String>> {
    items
        .iter()
        .map(|n| {
            let mut row = object_cells(&n.object);
            row.push(n.why.clone());
            row
        })
        .collect()
}

/// The plan as a person reads it: removals in order with why and what each
/// waits for, then what is blocked, kept and retained, then a summary line.
pub fn plan_human(plan: &Plan) -> String {
    let scope: Vec<String> = plan.scope.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut out = format!("Scope: {}\n", scope.join(", "));
    if !plan.steps.is_empty() {
        out.push_str("\nRemove, in this order:\n");
        let rows: Vec<Vec<String>> = plan
            .steps
            .iter()
            .map(|s: &Step| {
                let mut row = vec![format!("{}.", s.step)];
                row.extend(object_cells(&s.object));
                row.push(s.why.clone());
                if !s.waits_for.is_empty() {
                    let w: Vec<String> = s.waits_for.iter().map(|w| w.to_string()).collect();
                    row.push(format!("after {}", w.join(", ")));
                }
                row
            })
            .collect();
        out.push_str(&table(&rows, "  "));
    }
    if !plan.blocked.is_empty() {
        out.push_str("\nBlocked (never forced; apply will fail until resolved):\n");
        out.push_str(&table(&noted_rows(&plan.blocked), "  "));
    }
    let kept: Vec<Noted> = plan
        .kept
        .containers
        .iter()
        .chain(&plan.kept.volumes)
        .cloned()
        .collect();
    if !kept.is_empty() {
        out.push_str("\nKeep:\n");
        out.push_str(&table(&noted_rows(&kept), "  "));
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
    table(&rows, "  ")
}

/// The one-line summary: `Plan: remove 2 containers and 1 volume; ...`.
pub fn plan_summary(plan: &Plan) -> String {
    let (c, v) = plan.removal_counts();
    let kept = plan.kept.containers.len() + plan.kept.volumes.len();
    let tail = format!(
        "keep {}; retain {}.",
        plural(kept, "object"),
        plural(plan.retained.images.len(), "image")
    );
    let blocked = if plan.blocked.is_empty() {
        String::new()
    } else {
        format!("{} blocked; ", plural(plan.blocked.len(), "volume"))
    };
    if plan.steps.is_empty() {
        format!("Plan: nothing to remove; {blocked}{tail}")
    } else {
        format!(
            "Plan: remove {} and {}; {blocked}{tail}",
            plural(c, "container"),
            plural(v, "volume")
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

fn named_cells(kind: &str, n: &Named) -> Vec<String> {
    let name = match &n.id {
        Some(id) => format!("{} ({})", n.name, short_id(id)),
        None => n.name.clone(),
    };
    vec![kind.into(), name, box_cell(n.box_id.as_deref())]
}

fn leftover_rows(kind: &str, items: &[Leftover]) -> Vec<Vec<String>> {
    items
        .iter()
        .map(|l| {
            let mut row = named_cells(kind, &l.object);
            row.push(l.reason.clone());
            row
        })
        .collect()
}

/// The report as a person reads it; the last line says whether it converged.
pub fn report_human(report: &Report) -> String {
    let mut out = String::new();
    let removed: Vec<Vec<String>> = report
        .removed
        .containers
        .iter()
        .map(|c| named_cells("container", c))
        .chain(
            report
                .removed
                .volumes
                .iter()
                .map(|v| named_cells("volume", v)),
        )
        .collect();
    if !removed.is_empty() {
        out.push_str("Removed:\n");
        out.push_str(&table(&removed, "  "));
    }
    if !report.failures.is_empty() {
        out.push_str("\nFailures:\n");
        let rows: Vec<Vec<String>> = report
            .failures
            .iter()
            .map(|f| {
                let name = match &f.id {
                    Some(id) => format!("{} ({})", f.name, short_id(id)),
                    None => f.name.clone(),
                };
                vec![f.kind.clone(), name, f.error.clone()]
            })
            .collect();
        out.push_str(&table(&rows, "  "));
    }
    let mut left = leftover_rows("container", &report.remaining_containers);
    left.extend(leftover_rows("volume", &report.remaining_volumes));
    if !left.is_empty() {
        out.push_str("\nLeft behind:\n");
        out.push_str(&table(&left, "  "));
    }
    let kept = report.kept.containers.len() + report.kept.volumes.len();
    out.push_str(&format!(
        "\nRemoved {} and {}; kept {}; retained {}.\n",
        plural(report.removed.containers.len(), "container"),
        plural(report.removed.volumes.len(), "volume"),
        plural(kept, "object"),
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
        if !left.is_empty() {
            why.push(format!("{} left behind", plural(left.len(), "object")));
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
}

#[derive(Serialize)]
struct InventoryContainer<'a> {
    id: &'a str,
    name: &'a str,
    state: &'a str,
    mounts: Vec<&'a str>,
}

#[derive(Serialize)]
struct InventoryView<'a> {
    scope: Vec<String>,
    boxes: Vec<InventoryBox<'a>>,
    images: Vec<&'a ImageInfo>,
}

fn inventory_view(inv: &Inventory) -> InventoryView<'_> {
    let mut containers: Vec<_> = inv.containers.values().collect();
    containers.sort_by(|a, b| (&a.name, &a.id).cmp(&(&b.name, &b.id)));
    let mut grouped: BTreeMap<Option<&str>, InventoryBox> = BTreeMap::new();
    for c in containers {
        grouped
            .entry(c.box_id())
            .or_insert_with(|| empty_box(c.box_id()))
            .containers
            .push(InventoryContainer {
                id: &c.id,
                name: &c.name,
                state: &c.state,
                mounts: c.mounts.iter().map(String::as_str).collect(),
            });
    }
    for v in inv.volumes.values() {
        grouped
            .entry(v.box_id())
            .or_insert_with(|| empty_box(v.box_id()))
            .volumes
            .push(&v.name);
    }
    InventoryView {
        scope: inv.scope.filters(),
        boxes: grouped.into_values().collect(),
        images: inv.images.values().collect(),
    }
}

fn empty_box(b: Option<&str>) -> InventoryBox<'_> {
    InventoryBox {
        box_id: b,
        containers: vec![],
        volumes: vec![],
    }
}

/// The inventory grouped by box (objects without a box label first), with
/// container states, then the retained images.
pub fn inventory_human(inv: &Inventory) -> String {
    let view = inventory_view(inv);
    let mut out = format!("Scope: {}\n", view.scope.join(", "));
    for b in &view.boxes {
        out.push_str(&format!(
            "\n{}\n",
            match b.box_id {
                Some(id) => format!("box {id}"),
                None => "no box label (leaked)".to_string(),
            }
        ));
        let mut rows: Vec<Vec<String>> = b
            .containers
            .iter()
            .map(|c| {
                vec![
                    "container".into(),
                    format!("{} ({})", c.name, short_id(c.id)),
                    c.state.into(),
                    if c.mounts.is_empty() {
                        String::new()
                    } else {
                        format!("mounts {}", c.mounts.join(", "))
                    },
                ]
            })
            .collect();
        rows.extend(
            b.volumes
                .iter()
                .map(|v| vec!["volume".into(), v.to_string()]),
        );
        out.push_str(&table(&rows, "  "));
    }
    if !view.images.is_empty() {
        out.push_str("\nImages (retained, never removed):\n");
        out.push_str(&image_table(view.images.iter().copied()));
    }
    let (c, v) = (inv.containers.len(), inv.volumes.len());
    out.push_str(&format!(
        "\n{} and {} managed; {} retained.\n",
        plural(c, "container"),
        plural(v, "volume"),
        plural(inv.images.len(), "image")
    ));
    out
}

/// The inventory as JSON.
pub fn inventory_json(inv: &Inventory) -> String {
    json(&inventory_view(inv))
}

/// Writes to standard output.
pub fn stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Writes to standard error.
pub fn stderr(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// An error for the user: `error: ` and the whole cause chain, one per line.
pub fn error(err: &anyhow::Error) -> String {
    let mut out = format!("error: {err}\n");
    for cause in err.chain().skip(1) {
        out.push_str(&format!("  caused by: {cause}\n"));
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
            Format::Json => Progress::Quiet,
            Format::Human if std::io::stderr().is_terminal() && total > 0 => {
                let bar = ProgressBar::new(total as u64);
                bar.set_style(
                    ProgressStyle::with_template("{bar:30} {pos}/{len} done{msg} ({elapsed})")
                        .expect("static template"),
                );
                Progress::Bar { bar, failures: 0 }
            }
            Format::Human => Progress::Lines,
        }
    }

    /// Clears the bar, if any.
    pub fn finish(&self) {
        if let Progress::Bar { bar, .. } = self {
            bar.finish_and_clear();
        }
    }
}

impl Observer for Progress {
    fn finished(&mut self, step: &Step, outcome: &Outcome) {
        match self {
            Progress::Quiet => {}
            Progress::Lines => {
                let what = match outcome {
                    Outcome::Removed => "removed".to_string(),
                    Outcome::AlreadyGone => "already gone".to_string(),
                    Outcome::Failed(e) => format!("FAILED: {e}"),
                    Outcome::Refused(e) => format!("refused: {e}"),
                    Outcome::Skipped(after) => format!("skipped (step {after} did not succeed)"),
                    Outcome::Interrupted => "not started (interrupted)".to_string(),
                };
                stderr(&format!(
                    "{:>4}. {} {what}\n",
                    step.step,
                    step.object.label()
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
