//! The report view (the end of `apply`, `destroy` and `watch --once`): what
//! was removed, what failed, what is left behind and why, the counts, and
//! whether a fresh listing converged; a fleet's reports under one heading per
//! engine with a table of engines. JSON: the `Report` itself (its keys are a
//! public contract), a fleet's with `engines`.
//!
//! Engine text (names, errors, reasons' words) goes through `table`: escaped
//! and cut here, exact in the JSON.

use std::fmt::Write as _;

use crate::exec::report::{EngineSummary, FleetReport};
use crate::exec::report::{Failure, Gone, Leftover, Named, Reclaimed, Report};
use crate::model::{Kind, Natural, Outcome};
use crate::render::table::{
    box_cell, image_table, indented, kind_counts, name_cell, plural, table,
};
use crate::render::target::{not_done, not_found, unknown_section, Reader};
use crate::render::{document, Format};
use crate::text::escape;

/// The report in `format`; `ok`: whether the run exits 0 (JSON `ok`).
pub(crate) fn report(report: &Report, ok: bool, format: Format) -> String {
    match format {
        Format::Json => report_json(report, ok),
        _ => report_human(report),
    }
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

/// `heading`, then `rows` as a table, as one section of `sections`
/// (nothing when there are none). The sections of a report are said with
/// one blank line between them, and none before the first.
fn section(sections: &mut Vec<String>, heading: &str, rows: Vec<Vec<String>>) {
    if !rows.is_empty() {
        sections.push(format!("{heading}\n{}", table(rows, "  ")));
    }
}

/// The order every list of objects in a report is printed in: by kind,
/// then box, then name (both in natural order: cb2 before cb10), then ID.
fn in_order(kind: Kind, n: &Named) -> (Kind, Option<Natural<'_>>, Natural<'_>, Option<&str>) {
    (
        kind,
        n.box_id.as_deref().map(Natural),
        Natural(n.name.as_str()),
        n.id.as_deref(),
    )
}

/// [`in_order`] of a kept object.
fn noted_order(n: &crate::plan::Noted) -> (Kind, Option<Natural<'_>>, Natural<'_>, Option<&str>) {
    let o = &n.object;
    (
        o.kind,
        o.box_id.as_deref().map(Natural),
        Natural(o.name.as_str()),
        o.id.as_deref(),
    )
}

/// Whether the report names what was kept and retained: not when the
/// whole plan, which names them, was printed before it (decision 24).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kept {
    /// The report names them (`Keep:`, `Retain ...:`).
    Named,
    /// The plan printed before the report named them.
    InThePlan,
}

/// `LEAD N; kept N; retained N.`, on a line of its own: a report's counts.
fn counts_line(lead: &str, report: &Report) -> String {
    format!(
        "{lead} {}; kept {}; retained {}.\n",
        kind_counts(|k| report.removed.get(k).len()),
        plural(report.kept.len(), "object"),
        plural(report.retained.images.len(), "image"),
    )
}

/// `Reclaimed 7.3 MB.`, `Reclaimed 7.3 MB (2 volumes not measured).` or
/// `Reclaimed: not measured (1 container and 2 volumes).`: what the
/// removals gave back, on a line of its own; none when no container or
/// volume was removed. `unmeasured` counts, by kind, the removed objects
/// without a figure.
pub(crate) fn reclaimed_line(total: &Reclaimed, unmeasured: impl Fn(Kind) -> usize) -> String {
    if total.measured == 0 && total.unmeasured == 0 {
        return String::new();
    }
    let kinds: Vec<String> = Kind::HOLDS_SPACE
        .into_iter()
        .filter(|&k| unmeasured(k) > 0)
        .map(|k| plural(unmeasured(k), k.as_str()))
        .collect();
    let which = kinds.join(" and ");
    match total.total() {
        None => format!("Reclaimed: not measured ({which}).\n"),
        Some(bytes) if kinds.is_empty() => {
            format!("Reclaimed {}.\n", crate::render::table::bytes(bytes))
        }
        Some(bytes) => format!(
            "Reclaimed {} ({which} not measured).\n",
            crate::render::table::bytes(bytes)
        ),
    }
}

/// The removed containers and volumes of `report` without a figure, of `kind`.
fn unmeasured_of(report: &Report, kind: Kind) -> usize {
    report
        .removed
        .get(kind)
        .iter()
        .filter(|g| Reclaimed::counts(kind, &g.outcome) && g.reclaimed_bytes.is_none())
        .count()
}

/// `--reclaimed`: the warning for an engine that could not say what its
/// objects hold; its removals go on, their figures unknown.
pub(crate) fn unmeasured_warning(engine: &str, error: &str) -> String {
    format!(
        "warning: engine {}: could not measure what its objects hold: {}; what it removes is not measured (reclaimedBytes null)\n",
        escape(engine),
        escape(error)
    )
}

/// The report as a person reads it, standalone: each object once, in the
/// section of what happened to it, then the counts; the last line says
/// whether it converged.
pub fn report_human(report: &Report) -> String {
    report_view(report, Kept::Named)
}

/// The report as a person reads it: each object once, grouped by what
/// happened to it (archived then removed, removed, left behind with its
/// reason; kept with its reason and the images retained unless the plan
/// printed before said them, `kept`), the failures that name no object
/// left behind (an engine's listing, its connection), the named boxes
/// nothing carries; then the counts and whether it converged.
pub(crate) fn report_view(report: &Report, kept: Kept) -> String {
    let mut sections = Vec::new();
    let archived: Vec<Vec<String>> = report
        .archived
        .iter()
        .map(|a| {
            vec![
                "volume".to_string(),
                a.volume.clone(),
                box_cell(a.box_id.as_deref()),
                a.path.clone(),
                plural(usize::try_from(a.bytes).unwrap_or(usize::MAX), "byte"),
                format!("in {:.1} s", a.elapsed_ms as f64 / 1000.0),
                format!("sha256 {}", a.sha256),
            ]
        })
        .collect();
    section(&mut sections, "Archived (then removed):", archived);
    // An archived volume is named once, under `Archived`.
    let archived_here = |g: &Gone| {
        report
            .archived
            .iter()
            .any(|a| a.engine == g.object.engine && a.volume == g.object.name)
    };
    let mut removed: Vec<(Kind, &Gone)> = report
        .removed
        .iter()
        .flat_map(|(k, items)| items.iter().map(move |g| (k, g)))
        .filter(|(k, g)| !(*k == Kind::Volume && archived_here(g)))
        .collect();
    removed.sort_by(|a, b| in_order(a.0, &a.1.object).cmp(&in_order(b.0, &b.1.object)));
    let removed = removed
        .into_iter()
        .map(|(k, g)| {
            let mut row = named_cells(k, &g.object);
            if g.outcome != Outcome::Removed {
                row.push("(already gone)".to_string());
            }
            row
        })
        .collect();
    section(&mut sections, "Removed:", removed);
    // A failure that names an object left behind is said there, as its reason.
    let left_behind_as = |f: &Failure| {
        report.all_remaining().any(|l| {
            f.engine == l.object.engine
                && f.name == l.object.name
                && f.id == l.object.id
                && Kind::ALL.iter().any(|k| k.as_str() == f.kind)
        })
    };
    let failures: Vec<Vec<String>> = report
        .failures
        .iter()
        .filter(|f| !left_behind_as(f))
        .map(|f| {
            vec![
                f.kind.clone(),
                name_cell(&f.name, f.id.as_deref()),
                f.error.clone(),
            ]
        })
        .collect();
    let failed = failures.len();
    section(&mut sections, "Failures:", failures);
    let mut left: Vec<(Kind, &Leftover)> = report
        .remaining
        .iter()
        .flat_map(|(k, items)| items.iter().map(move |l| (k, l)))
        .collect();
    left.sort_by(|a, b| in_order(a.0, &a.1.object).cmp(&in_order(b.0, &b.1.object)));
    let left_behind = left.len();
    let left = left
        .into_iter()
        .map(|(k, l)| {
            let mut row = named_cells(k, &l.object);
            row.push(l.reason.to_string());
            row
        })
        .collect();
    section(&mut sections, "Left behind:", left);
    let unknown = unknown_section(&report.unknown_boxes, Reader::Cli);
    if !unknown.is_empty() {
        sections.push(unknown.trim_start_matches('\n').to_string());
    }
    if kept == Kept::Named {
        let mut kept: Vec<&crate::plan::Noted> = report.kept.all().collect();
        kept.sort_by(|a, b| noted_order(a).cmp(&noted_order(b)));
        section(
            &mut sections,
            "Keep:",
            crate::render::plan::noted_rows(kept),
        );
        if !report.retained.images.is_empty() {
            sections.push(format!(
                "Retain (images are never removed):\n{}",
                image_table(&report.retained.images)
            ));
        }
    }
    let mut out = sections.join("\n");
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(&counts_line("Removed", report));
    out.push_str(&reclaimed_line(&report.reclaimed, |k| {
        unmeasured_of(report, k)
    }));
    let missing = not_found(&report.unknown_boxes);
    if let Some(line) = not_done(&report.unknown_boxes).filter(|_| report.converged) {
        out.push_str(&line);
    } else if report.converged {
        out.push_str("Converged: a fresh listing shows nothing left to do.\n");
    } else {
        let mut why = Vec::new();
        if report.interrupted {
            why.push("interrupted".to_string());
        }
        if failed > 0 {
            why.push(plural(failed, "failure"));
        }
        if left_behind > 0 {
            why.push(format!("{} left behind", plural(left_behind, "object")));
        }
        why.extend(missing);
        out.push_str(&format!("NOT converged: {}.\n", why.join(", ")));
    }
    out
}

/// The report's JSON document (`report.schema.json`): the report's keys,
/// and for a fleet (a state file with `[[engine]]`) a summary per engine.
#[derive(serde::Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct ReportDoc<'a> {
    /// True exactly when the run exits 0: made from the same verdict as
    /// the exit status (`cli::exit`). `converged` says only that a fresh
    /// listing showed nothing left to do; a run can converge and still fail
    /// (a named box not found, an audit write that failed, a Ctrl-C).
    ok: bool,
    /// One engine's report: the engine's name (as each object's `engine`
    /// says it); absent from a fleet's, whose `engines` name each.
    #[serde(skip_serializing_if = "Option::is_none")]
    engine: Option<&'a str>,
    /// One engine's report: the engine's address, as `Engine:` says it in
    /// human output.
    #[serde(skip_serializing_if = "Option::is_none")]
    endpoint: Option<&'a str>,
    #[serde(flatten)]
    report: &'a Report,
    /// A fleet's summary per engine; absent for one engine.
    #[serde(skip_serializing_if = "Option::is_none")]
    engines: Option<&'a Vec<EngineSummary>>,
}

/// The report as JSON; `ok`: whether the run exits 0 (`cli::exit::report_ok`
/// says it of a report alone).
pub fn report_json(report: &Report, ok: bool) -> String {
    document(ReportDoc {
        ok,
        engine: None,
        endpoint: None,
        report,
        engines: None,
    })
}

/// One engine's report, the engine named: JSON with its `engine` and
/// `endpoint`; human text under `Engine: ADDRESS` when `heading` (a run
/// that printed its plan has said it already), naming what was kept and
/// retained as `kept` says.
pub(crate) fn engine_report(
    report: &Report,
    engine: &str,
    endpoint: &str,
    heading: bool,
    kept: Kept,
    ok: bool,
    format: Format,
) -> String {
    match format {
        Format::Json => document(ReportDoc {
            ok,
            engine: Some(engine),
            endpoint: Some(endpoint),
            report,
            engines: None,
        }),
        _ if heading => format!(
            "{}{}",
            crate::render::plan_heading(endpoint),
            report_view(report, kept)
        ),
        _ => report_view(report, kept),
    }
}

/// A fleet's report: each engine's report under its heading (naming what
/// it kept and retained as `kept` says of that engine), then the
/// per-engine summary and whether the fleet converged. JSON: the merged
/// report with `engines`.
pub(crate) fn fleet_report(
    report: &FleetReport,
    kept: impl Fn(&str) -> Kept,
    ok: bool,
    format: Format,
) -> String {
    if format == Format::Json {
        return document(ReportDoc {
            ok,
            engine: None,
            endpoint: None,
            report: &report.report,
            engines: Some(&report.engines),
        });
    }
    let mut out = String::new();
    for part in &report.parts {
        let _ = writeln!(out, "Engine {}:", escape(&part.engine));
        // A named box one engine lacks may be on another: the fleet's
        // own section below says which none carries.
        let mut one = part.report().into_owned();
        one.unknown_boxes.clear();
        out.push_str(&indented(&report_view(&one, kept(&part.engine))));
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
    out.push_str(&unknown_section(&r.unknown_boxes, Reader::Cli));
    out.push('\n');
    out.push_str(&counts_line("Fleet: removed", r));
    out.push_str(&reclaimed_line(&r.reclaimed, |k| unmeasured_of(r, k)));
    if let Some(words) = not_found(&r.unknown_boxes).filter(|_| r.converged) {
        out.push_str(&format!(
            "NOT done: {words} on any engine; every engine converged otherwise.\n"
        ));
    } else if r.converged {
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
            report_json(&report, crate::cli::exit::report_ok(&report))
        );
    }

    #[test]
    fn removed_failures_left_behind_and_the_verdict() {
        insta::assert_snapshot!(report_human(&report_not_converged()), @r"
        Removed:
          container  sbx-a (c0ffee000001)  box a
          volume     data-a                box a  (already gone)

        Left behind:
          network  net-b (5eed00000002)  box b  remove network 5eed00000002: engine answered HTTP 500: boom

        Keep:
          volume  notes  no box    listed in volumes.keep

        Retain (images are never removed):
          image  ca-sbx:repo-1  0123456789ab

        Removed 1 container, 1 volume and 0 networks; kept 1 object; retained 1 image.
        Reclaimed 7.3 MB.
        NOT converged: 1 object left behind.
        ");
    }

    #[test]
    fn every_list_of_a_report_is_in_natural_order_and_names_each_object_once() {
        use crate::exec::report::Gone;
        use crate::model::{ImageInfo, Reason};
        use crate::plan::Noted;
        let entry = |kind, name: &str| crate::render::fixtures::entry(kind, name, None, None);
        let mut report = Report::empty();
        for name in ["cb10", "cb2", "cb1"] {
            report.removed.push(
                Kind::Container,
                Gone {
                    object: Named::of(&entry(Kind::Container, name)),
                    outcome: Outcome::Removed,
                    reclaimed_bytes: None,
                },
            );
            report.push_leftover(&entry(Kind::Volume, name), Reason::Interrupted);
            report.kept.push(
                Kind::Network,
                Noted {
                    object: entry(Kind::Network, name),
                    why: Reason::NotNamedByDestroy,
                },
            );
            report.retained.images.push(ImageInfo {
                id: format!("sha256:{name}"),
                tags: vec![format!("ca-sbx:{name}")],
            });
        }
        let human = report_human(&report);
        for heading in [
            "Removed:",
            "Left behind:",
            "Keep:",
            "Retain (images are never removed):",
        ] {
            let rows: Vec<&str> = human
                .split(&format!("{heading}\n"))
                .nth(1)
                .unwrap_or_else(|| panic!("{heading}: {human}"))
                .lines()
                .take(3)
                .collect();
            let names: Vec<&str> = rows
                .iter()
                .map(|r| r.split_whitespace().nth(1).unwrap_or_default())
                .collect();
            let want = if heading.starts_with("Retain") {
                ["ca-sbx:cb1", "ca-sbx:cb2", "ca-sbx:cb10"]
            } else {
                ["cb1", "cb2", "cb10"]
            };
            assert_eq!(names, want, "{heading}\n{human}");
        }
        for name in ["cb1", "cb2", "cb10"] {
            let once = human
                .lines()
                .filter(|l| l.split_whitespace().nth(1) == Some(name))
                .count();
            // A container removed, a volume left behind, a network kept.
            assert_eq!(once, 3, "{name}: {human}");
        }
    }

    #[test]
    fn the_reclaimed_line_says_what_is_known_and_what_was_not_measured() {
        use crate::exec::report::Gone;
        let gone = |kind, name: &str, outcome, figure| {
            let gone = Gone {
                object: Named::of(&crate::render::fixtures::entry(kind, name, None, None)),
                outcome,
                reclaimed_bytes: figure,
            };
            (kind, gone)
        };
        let line = |removed: Vec<(Kind, Gone)>| {
            let mut report = Report::empty();
            for (kind, g) in removed {
                report.removed.push(kind, g);
            }
            report.reclaimed = Reclaimed::of(&report.removed);
            let human = report_human(&report);
            let json: serde_json::Value =
                serde_json::from_str(&report_json(&report, crate::cli::exit::report_ok(&report)))
                    .unwrap();
            let line = human
                .lines()
                .find(|l| l.starts_with("Reclaimed"))
                .unwrap_or("(none)")
                .to_string();
            (
                line,
                json["reclaimedBytes"].clone(),
                json["reclaimedUnmeasured"].clone(),
            )
        };
        let (c, v, n) = (Kind::Container, Kind::Volume, Kind::Network);
        let removed = || Outcome::Removed;
        // Everything measured.
        assert_eq!(
            line(vec![
                gone(c, "c", removed(), Some(5_000_000)),
                gone(v, "v", removed(), Some(3_145_728)),
                gone(n, "n", removed(), None),
            ]),
            ("Reclaimed 8.1 MB.".into(), 8_145_728.into(), 0.into())
        );
        // Some measured: the sum of what is known, and what is not.
        assert_eq!(
            line(vec![
                gone(c, "c", removed(), Some(1_234_567_890)),
                gone(v, "v1", removed(), None),
                gone(v, "v2", Outcome::AlreadyGone, None),
            ]),
            // Another actor's removal gave this run nothing: not counted.
            (
                "Reclaimed 1.2 GB (1 volume not measured).".into(),
                1_234_567_890u64.into(),
                1.into()
            )
        );
        // Nothing measured: null, never 0.
        assert_eq!(
            line(vec![
                gone(c, "c", removed(), None),
                gone(v, "v1", removed(), None),
                gone(v, "v2", removed(), None),
            ]),
            (
                "Reclaimed: not measured (1 container and 2 volumes).".into(),
                serde_json::Value::Null,
                3.into()
            )
        );
        // Measured as 0 is 0 (an empty volume).
        assert_eq!(
            line(vec![gone(v, "v", removed(), Some(0))]),
            ("Reclaimed 0 B.".into(), 0.into(), 0.into())
        );
        // Nothing that holds space removed: no line; 0 in the JSON.
        assert_eq!(
            line(vec![gone(n, "n", removed(), None)]),
            ("(none)".into(), 0.into(), 0.into())
        );
        assert_eq!(line(vec![]), ("(none)".into(), 0.into(), 0.into()));
    }

    #[test]
    fn a_size_read_that_failed_is_a_warning_with_engine_text_escaped() {
        insta::assert_snapshot!(
            unmeasured_warning("default", "measure disk usage (GET /system/df): a disk usage operation is already running\u{1b}[2J"),
            @r"warning: engine default: could not measure what its objects hold: measure disk usage (GET /system/df): a disk usage operation is already running\u{1b}[2J; what it removes is not measured (reclaimedBytes null)"
        );
    }

    #[test]
    fn json_keeps_flat_remaining_keys_in_order() {
        let json = report_json(&report_not_converged(), false);
        let keys: Vec<String> = serde_json::from_str::<serde_json::Value>(&json)
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        // serde_json's map is sorted; the order in the text is the contract.
        let order: Vec<usize> = [
            "schemaVersion",
            "ok",
            "converged",
            "now",
            "removed",
            "reclaimedBytes",
            "reclaimedUnmeasured",
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
        assert!(human.starts_with("Left behind:"), "{human}");
        insta::assert_snapshot!(human, @r"
        Left behind:
          container  evil\u{1b}[2J\n\u{202e}x (c0ffee000001)  box b\u{1b}]0;t\u{7}\nFORGED  conflict:\u{1b}[31m in use\n

        Removed 0 containers, 0 volumes and 0 networks; kept 0 objects; retained 0 images.
        NOT converged: 1 object left behind.
        ");
        assert!(!human.contains('\u{1b}') && !human.contains('\u{202e}'));
        let v: serde_json::Value =
            serde_json::from_str(&report_json(&report, crate::cli::exit::report_ok(&report)))
                .unwrap();
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
        let human = fleet_report(&fleet, |_| Kept::Named, false, Format::Human);
        assert!(
            human.starts_with("Engine ci-1:\n  Removed:\n    container  sbx-a"),
            "{human}"
        );
        assert!(human.ends_with(
            "Engines:\n  ci-1  ssh://ci-1  NOT converged  removed 2  1 left\n\n\
             Fleet: removed 1 container, 1 volume and 0 networks; kept 1 object; retained 1 image.\n\
             Reclaimed 7.3 MB.\n\
             NOT converged on 1 engine of 1.\n"
        ), "{human}");
        let v: serde_json::Value =
            serde_json::from_str(&fleet_report(&fleet, |_| Kept::Named, false, Format::Json))
                .unwrap();
        assert_eq!(v["reclaimedBytes"], 7_340_032);
        assert_eq!(v["reclaimedUnmeasured"], 0);
        assert_eq!(v["engines"][0]["engine"], "ci-1");
        assert_eq!(v["remainingNetworks"][0]["name"], "net-b");
    }
}
