//! The report view (the end of `apply`, `destroy` and `watch --once`): what
//! was removed, what failed, what is left behind and why, the counts, and
//! whether a fresh listing converged; a fleet's reports under one heading per
//! engine with a table of engines. JSON: the `Report` itself (its keys are a
//! public contract), a fleet's with `engines`.
//!
//! Engine text (names, errors, reasons' words) goes through `table`: escaped
//! and cut here, exact in the JSON.

use std::fmt::Write as _;

use crate::exec::report::FleetReport;
use crate::exec::report::{Named, Report};
use crate::model::{Kind, Outcome};
use crate::render::table::{box_cell, indented, kind_counts, name_cell, plural, table};
use crate::render::{json, Format};
use crate::text::escape;

/// The report in `format`.
pub(crate) fn report(report: &Report, format: Format) -> String {
    match format {
        Format::Json => report_json(report),
        _ => report_human(report),
    }
}

/// `destroy ID`: the warning for a box ID that no managed object carries
/// (`partial`: some engine could not be listed).
pub(crate) fn unknown_box_warning(
    id: &str,
    scope: &dyn std::fmt::Display,
    partial: bool,
) -> String {
    format!(
        "warning: no managed container, volume or network carries ca.sandbox.id={} (in scope {scope}){}\n",
        crate::text::escape(id),
        if partial {
            " on the engines that could be listed"
        } else {
            ""
        }
    )
}

/// A run's own error that is not an engine's (an audit write): `error: `
/// and the text, escaped, on one line.
pub(crate) fn error_line(text: &str) -> String {
    format!("error: {}\n", crate::text::escape(text))
}

/// Kind, name and box: the first cells of a removed or remaining object's row.
fn named_cells(kind: Kind, n: &Named) -> Vec<String> {
    vec![
        kind.to_string(),
        name_cell(&n.name, n.id.as_deref()),
        box_cell(n.box_id.as_deref()),
    ]
}

/// One row per object of every kind: its named cells (`cells` says which
/// object an item names), then the cell `cells` adds after them, if any.
fn object_rows<'a, T: 'a>(
    by_kind: impl Iterator<Item = (Kind, &'a Vec<T>)>,
    cells: impl Fn(&'a T) -> (&'a Named, Option<String>),
) -> Vec<Vec<String>> {
    let cells = &cells;
    by_kind
        .flat_map(|(k, items)| {
            items.iter().map(move |item| {
                let (named, last) = cells(item);
                let mut row = named_cells(k, named);
                row.extend(last);
                row
            })
        })
        .collect()
}

/// `heading`, then `rows` as a table (nothing when there are none).
fn section(out: &mut String, heading: &str, rows: Vec<Vec<String>>) {
    if !rows.is_empty() {
        out.push_str(heading);
        out.push_str(&table(rows, "  "));
    }
}

/// `LEAD N; kept N; retained N.`, on a line of its own after a blank one:
/// a report's counts.
fn counts_line(lead: &str, report: &Report) -> String {
    format!(
        "\n{lead} {}; kept {}; retained {}.\n",
        kind_counts(|k| report.removed.get(k).len()),
        plural(report.kept.len(), "object"),
        plural(report.retained.images.len(), "image"),
    )
}

/// The report as a person reads it; the last line says whether it converged.
pub fn report_human(report: &Report) -> String {
    let mut out = String::new();
    let removed = object_rows(report.removed.iter(), |g| {
        let gone = (g.outcome != Outcome::Removed).then(|| "(already gone)".to_string());
        (&g.object, gone)
    });
    let archived: Vec<Vec<String>> = report
        .archived
        .iter()
        .map(|a| {
            vec![
                "volume".to_string(),
                a.volume.clone(),
                a.path.clone(),
                plural(usize::try_from(a.bytes).unwrap_or(usize::MAX), "byte"),
                format!("in {:.1} s", a.elapsed_ms as f64 / 1000.0),
                format!("sha256 {}", a.sha256),
            ]
        })
        .collect();
    let archived_any = !archived.is_empty();
    section(&mut out, "Archived (then removed):\n", archived);
    if archived_any && !removed.is_empty() {
        out.push('\n');
    }
    section(&mut out, "Removed:\n", removed);
    let failures = report
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
    section(&mut out, "\nFailures:\n", failures);
    let left = object_rows(report.remaining.iter(), |l| {
        (&l.object, Some(l.reason.to_string()))
    });
    let left_behind = left.len();
    section(&mut out, "\nLeft behind:\n", left);
    out.push_str(&counts_line("Removed", report));
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

/// A fleet's report: each engine's report under its heading, then the
/// per-engine summary and whether the fleet converged. JSON: the merged
/// report with `engines`.
pub(crate) fn fleet_report(report: &FleetReport, format: Format) -> String {
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
    out.push_str(&counts_line("Fleet: removed", r));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::{assert_human_and_json, hostile_report, report_not_converged};

    #[test]
    fn archived_and_archive_failed() {
        use crate::exec::report::{ArchivedVolume, Failure, Leftover};
        use crate::model::Reason;
        let mut report = report_not_converged();
        report.archived.push(ArchivedVolume {
            engine: "default".into(),
            volume: "data-a".into(),
            box_id: Some("a".into()),
            path: "/srv/sbx-archive/default/a/data-a-20261130T201500Z.tar.zst".into(),
            sha256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".into(),
            bytes: 4096,
            elapsed_ms: 1250,
        });
        let error = "no ca-sbx:* image is present to make a helper container from (images are never pulled)".to_string();
        let failed = Outcome::ArchiveFailed(error.clone());
        let volume = crate::render::fixtures::entry(Kind::Volume, "data-b", None, Some("b"));
        report
            .failures
            .push(Failure::of(&volume, failed.to_string()));
        report.remaining.push(
            Kind::Volume,
            Leftover {
                object: Named::of(&volume),
                reason: Reason::ArchiveFailed { error },
            },
        );
        assert_human_and_json!(
            "report_archive",
            report_human(&report),
            report_json(&report)
        );
    }

    #[test]
    fn removed_failures_left_behind_and_the_verdict() {
        insta::assert_snapshot!(report_human(&report_not_converged()), @r"
        Removed:
          container  sbx-a (c0ffee000001)  box a
          volume     data-a                box a  (already gone)

        Failures:
          network  net-b (5eed00000002)  remove network 5eed00000002: engine answered HTTP 500: boom

        Left behind:
          network  net-b (5eed00000002)  box b  remove network 5eed00000002: engine answered HTTP 500: boom

        Removed 1 container, 1 volume and 0 networks; kept 1 object; retained 1 image.
        NOT converged: 1 failure, 1 object left behind.
        ");
    }

    #[test]
    fn json_keeps_flat_remaining_keys_in_order() {
        let json = report_json(&report_not_converged());
        let keys: Vec<String> = serde_json::from_str::<serde_json::Value>(&json)
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        // serde_json's map is sorted; the order in the text is the contract.
        let order: Vec<usize> = [
            "converged",
            "now",
            "removed",
            "kept",
            "retained",
            "failures",
            "remainingContainers",
            "remainingVolumes",
            "remainingNetworks",
            "interrupted",
        ]
        .iter()
        .map(|k| {
            json.find(&format!("\n  \"{k}\": "))
                .unwrap_or_else(|| panic!("{k}: {json}"))
        })
        .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{json}");
        assert_eq!(keys.len(), order.len());
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        insta::assert_json_snapshot!(v["remainingNetworks"], @r#"
        [
          {
            "box": "b",
            "engine": "default",
            "id": "5eed000000020000",
            "name": "net-b",
            "reason": {
              "code": "removalFailed",
              "error": "remove network 5eed00000002: engine answered HTTP 500: boom",
              "text": "remove network 5eed00000002: engine answered HTTP 500: boom"
            }
          }
        ]
        "#);
        assert_eq!(v["removed"]["volumes"][0]["outcome"], "alreadyGone");
    }

    #[test]
    fn hostile_text_is_escaped_in_human_output_and_exact_in_json() {
        let report = hostile_report();
        let human = report_human(&report);
        assert!(human.starts_with("\nFailures:"), "{human}");
        insta::assert_snapshot!(&human[1..], @r"
        Failures:
          container  evil\u{1b}[2J\n\u{202e}x (c0ffee000001)  conflict:\u{1b}[31m in use\n

        Left behind:
          container  evil\u{1b}[2J\n\u{202e}x (c0ffee000001)  box b\u{1b}]0;t\u{7}\nFORGED  conflict:\u{1b}[31m in use\n

        Removed 0 containers, 0 volumes and 0 networks; kept 0 objects; retained 0 images.
        NOT converged: 1 failure, 1 object left behind.
        ");
        assert!(!human.contains('\u{1b}') && !human.contains('\u{202e}'));
        let v: serde_json::Value = serde_json::from_str(&report_json(&report)).unwrap();
        assert_eq!(
            v["remainingContainers"][0]["name"],
            crate::render::fixtures::EVIL_NAME
        );
        assert_eq!(v["failures"][0]["error"], "conflict:\u{1b}[31m in use\n");
    }

    #[test]
    fn a_fleet_report_groups_by_engine_and_sums_up() {
        use crate::exec::report::EngineSummary;
        let part = report_not_converged();
        let mut whole = Report::empty();
        whole.converged = true;
        whole.absorb(&part);
        let fleet = FleetReport {
            report: whole,
            engines: vec![EngineSummary {
                engine: "ci-1".into(),
                endpoint: "ssh://ci-1".into(),
                converged: false,
                removed: 2,
                failures: 1,
                remaining: 1,
                error: None,
            }],
            parts: vec![crate::exec::report::Part {
                engine: "ci-1".into(),
                endpoint: "ssh://ci-1".into(),
                took: std::time::Duration::ZERO,
                result: Ok(part),
            }],
        };
        let human = fleet_report(&fleet, Format::Human);
        assert!(
            human.starts_with("Engine ci-1:\n  Removed:\n    container  sbx-a"),
            "{human}"
        );
        assert!(human.ends_with(
            "Engines:\n  ci-1  ssh://ci-1  NOT converged  removed 2  1 left\n\n\
             Fleet: removed 1 container, 1 volume and 0 networks; kept 1 object; retained 1 image.\n\
             NOT converged on 1 engine of 1.\n"
        ), "{human}");
        let v: serde_json::Value =
            serde_json::from_str(&fleet_report(&fleet, Format::Json)).unwrap();
        assert_eq!(v["engines"][0]["engine"], "ci-1");
        assert_eq!(v["remainingNetworks"][0]["name"], "net-b");
    }
}
