//! Render: plans, reports, inventories, explanations, graphs and log lines as
//! human text or JSON, and the progress display during apply.
//!
//! The only module that prints, and the only one that lays out words for a
//! person; the words of a reason or an outcome are their `Display` (in
//! `model`). One file per view, each with its own tests: `plan`, `report`,
//! `inventory`, `explain`, `graph`, `health`, `log` (watch), `mcp` (the MCP
//! server's summaries and lines), `lease` (lease and hold), `validate`,
//! `progress`, `signal` (what a Ctrl-C makes a run say), `refusal` (the
//! error document of a run refused before any work);
//! `table` (columns, cells, counts in words) and `text` (escaping) are
//! shared. Every function that builds text is pure and deterministic (sorted
//! input in, same bytes out). Everything an engine returned (names, label
//! values, errors) is escaped, once, and long values are cut in human output
//! (`text::clip`); JSON keeps exact values. Must not decide anything.

mod archive;
mod explain;
mod graph;
mod health;
mod inventory;
mod lease;
mod log;
mod mcp;
mod plan;
mod progress;
mod refusal;
mod report;
mod signal;
mod table;
mod target;

mod validate;

#[cfg(test)]
pub(crate) mod fixtures;

use std::io::Write;

use serde::Serialize;

use crate::text::escape_lines;

pub(crate) use archive::RestoreDoc;
pub(crate) use explain::ExplainDoc;
pub use graph::{graph_dot, graph_mermaid};
pub(crate) use health::HealthDoc;
pub(crate) use inventory::InventoryDoc;
pub(crate) use lease::HoldLine;
pub(crate) use lease::LeaseDoc;
pub(crate) use log::WatchLine;
pub(crate) use plan::PlanDoc;
pub use plan::{plan_human, plan_json};
pub(crate) use progress::Progress;
pub(crate) use refusal::{refusal, ErrorDoc};
pub(crate) use report::ReportDoc;
pub use report::{report_human, report_json};
pub use table::entry_label;
pub(crate) use validate::ValidateDoc;

pub(crate) use archive::{restore_error, restore_subject, restored};
pub(crate) use explain::explain;
pub(crate) use graph::graph;
pub(crate) use health::health;
pub(crate) use inventory::{fleet_inventory, inventory, rejected_warning, swarm_note, Listed};
pub(crate) use lease::{hold_end, hold_event, hold_not_taken, lease_errors, lease_run};
pub(crate) use log::{
    metrics_exposed, notify_failed_words, watch_audit_error, watch_cycle, watch_notify_failed,
    watch_quit, watch_started, watch_state, watch_stopping, watch_stream,
};
pub(crate) use mcp::{mcp_call, mcp_started, mcp_stopping, tool_json, tool_text};
pub(crate) use plan::{
    engine_plan, fleet_engine_plan, fleet_plan, incomplete_warnings, incomplete_warnings_of,
    lease_warnings, plan, plan_heading, plan_in_full, unlisted_warnings,
};
pub(crate) use report::{
    engine_report, error_line, fleet_report, report, unmeasured_warning, Kept,
};
pub(crate) use signal::{interrupt_notice, quit_line};
pub(crate) use target::{no_state_file_note, prune_declined, prune_question, Running};
pub(crate) use validate::validation;

/// A top-level JSON document: `schemaVersion` first, then the document's
/// own keys. Every document `--format json` prints is one, and so is each
/// JSON line of `watch` and `hold` (the audit log's lines are not: see
/// docs/decisions/0012-json-schema.md).
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub(crate) struct Versioned<T> {
    /// The version of the document's schema (docs/schema/).
    #[schemars(extend("const" = crate::model::SCHEMA_VERSION))]
    schema_version: u32,
    #[serde(flatten)]
    document: T,
}

impl<T> Versioned<T> {
    pub(crate) fn new(document: T) -> Versioned<T> {
        Versioned {
            schema_version: crate::model::SCHEMA_VERSION,
            document,
        }
    }
}

/// `document` as pretty JSON with `schemaVersion` first, and a trailing newline.
pub(crate) fn document<T: Serialize>(document: T) -> String {
    json(&Versioned::new(document))
}

/// Output format, from `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    Human,
    Json,
    /// Graphviz DOT (`graph` only).
    Dot,
    /// A Mermaid flowchart (`graph` only).
    Mermaid,
}

/// Pretty JSON with a trailing newline.
pub(crate) fn json<T: Serialize>(value: &T) -> String {
    let mut s = serde_json::to_string_pretty(value).expect("plain data always serializes");
    s.push('\n');
    s
}

/// Writes to standard output. A write error (a closed pipe: `sandboxctl plan
/// | head -1`) is ignored: the command still runs to its end and its exit
/// status is its own (an apply into a closed pipe still verifies).
pub(crate) fn stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// Writes to standard error.
pub(crate) fn stderr(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// An error for the user: `error: ` and the whole cause chain, one per line,
/// every line escaped (errors quote engine text).
pub(crate) fn error(err: &anyhow::Error) -> String {
    let mut out = format!("error: {}\n", escape_lines(&err.to_string()));
    for cause in err.chain().skip(1) {
        out.push_str(&format!(
            "  caused by: {}\n",
            escape_lines(&cause.to_string())
        ));
    }
    out
}

/// An engine's part that failed, in a fleet (`graph`, `explain`, whose
/// output has no heading per engine): [`error`], naming the engine.
pub(crate) fn engine_error(engine: &str, err: &anyhow::Error) -> String {
    let said = error(err);
    format!(
        "error: engine {}: {}",
        crate::text::escape(engine),
        said.strip_prefix("error: ").unwrap_or(&said)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_every_cause_escaped() {
        let err =
            anyhow::anyhow!("engine said \u{1b}[31mno\u{202e}").context("cannot list\nvolumes");
        insta::assert_snapshot!(error(&err), @r"
        error: cannot list
        volumes
          caused by: engine said \u{1b}[31mno\u{202e}
        ");
    }

    #[test]
    fn an_engines_error_names_it_escaped() {
        let err = anyhow::anyhow!("list volumes: boom");
        assert_eq!(
            engine_error("far\nside", &err),
            "error: engine far\\nside: list volumes: boom\n"
        );
    }

    #[test]
    fn json_is_pretty_with_a_trailing_newline() {
        assert_eq!(
            json(&serde_json::json!({"a": [1]})),
            "{\n  \"a\": [\n    1\n  ]\n}\n"
        );
    }
}
