//! The plan view (`plan`, and the plan `apply` prints before it acts): the
//! removals in order with why and what each waits for, then what is blocked,
//! kept and retained, and a summary line; a fleet's plans under one heading
//! per engine. JSON: the plan itself (the saved-plan format) with `summary`.
//!
//! Reasons are written with their `Display`; every cell goes through
//! `table`, so engine text is escaped and cut here and exact in the JSON.

use std::fmt::Write as _;

use serde::Serialize;

use crate::exec::fleet::FleetPlan;
use crate::model::Kind;
use crate::plan::{Entry, Noted, Plan, Step};
use crate::render::table::{
    box_cell, image_table, kind_counts, name_cell, plural, table, LAST_CELL_CHARS,
};
use crate::render::{document, Format};
use crate::text::{clip, escape};

/// The plan in `format` (JSON, or human text for anything else).
pub(crate) fn plan(plan: &Plan, format: Format) -> String {
    match format {
        Format::Json => plan_json(plan),
        _ => plan_human(plan),
    }
}

/// Kind, name, box and state: the first cells of an object's row.
fn entry_cells(e: &Entry) -> Vec<String> {
    vec![
        e.kind.to_string(),
        name_cell(&e.name, e.id.as_deref()),
        box_cell(e.box_id.as_deref()),
        e.state.clone().unwrap_or_default(),
    ]
}

/// Rows of kept or blocked objects, each with its reason.
pub(crate) fn noted_rows<'a>(items: impl IntoIterator<Item = &'a Noted>) -> Vec<Vec<String>> {
    items
        .into_iter()
        .map(|n| {
            let mut row = entry_cells(&n.object);
            row.push(n.why.to_string());
            row
        })
        .collect()
}

/// The plan as a person reads it: removals in order with why and what each
/// waits for, then what is blocked, kept and retained, then a summary line.
/// What a step does about archives: a container stops and is read, a volume
/// read through its container goes once that is done, any other volume is
/// archived through a helper.
fn archive_words(s: &Step, dir: &str) -> String {
    if !s.reads.is_empty() {
        let reads: Vec<String> = s
            .reads
            .iter()
            .map(|r| format!("volume {} (at {})", escape(&r.volume), escape(&r.path)))
            .collect();
        format!("stop, archive {} to {dir}, then remove", reads.join(", "))
    } else if let Some(by) = s.archived_by {
        format!("archived to {dir} by step {by}, then remove")
    } else {
        format!("archive to {dir}, then remove")
    }
}

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
                row.push(s.why.to_string());
                if !s.waits_for.is_empty() {
                    let w: Vec<String> = s.waits_for.iter().map(|w| w.to_string()).collect();
                    row.push(format!("after {}", w.join(", ")));
                } else if s.archive.is_some() {
                    row.push(String::new());
                }
                if let Some(dir) = &s.archive {
                    // The last cell: the folder is shown whole (up to the last cell's limit).
                    row.push(archive_words(s, dir));
                }
                row
            })
            .collect();
        out.push_str(&table(rows, "  "));
    }
    if !plan.incomplete.is_empty() {
        out.push_str("\nNot learnt (what these could affect is blocked; the run fails):\n");
        for text in &plan.incomplete {
            out.push_str("  ");
            out.push_str(&escape(text));
            out.push('\n');
        }
    }
    if !plan.blocked.is_empty() {
        out.push_str("\nBlocked (never forced; apply will fail until resolved):\n");
        out.push_str(&table(noted_rows(&plan.blocked), "  "));
    }
    if !plan.kept.is_empty() {
        out.push_str("\nKeep:\n");
        out.push_str(&table(noted_rows(plan.kept.all()), "  "));
    }
    if !plan.leases.is_empty() {
        out.push_str(&leases_human(plan));
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

/// The skew worth saying: more than a second either way.
fn skew_words(skew: i64) -> Option<String> {
    match skew {
        s if s > 1 => Some(format!("{s} s ahead of this machine's")),
        s if s < -1 => Some(format!("{} s behind this machine's", -s)),
        _ => None,
    }
}

/// The leases section: every volume with a lease label, what it is, and the
/// clock it was judged by (with the skew when it is over a second).
fn leases_human(plan: &Plan) -> String {
    use crate::plan::lease::LeaseState;
    let clock = match plan.engine_clock.as_ref() {
        Some(c) => match skew_words(c.skew_seconds) {
            Some(skew) => format!("the engine's clock, {skew}"),
            None => "the engine's clock".to_string(),
        },
        None => "the engine's clock".to_string(),
    };
    let rows: Vec<Vec<String>> = plan
        .leases
        .iter()
        .map(|l| {
            let state = match &l.state {
                LeaseState::Invalid { .. } => format!("{}; the grace rule applies", l.state),
                _ => l.state.to_string(),
            };
            vec![
                box_cell(Some(&l.box_id)),
                l.volume.clone(),
                format!("ttl {}", l.ttl),
                state,
            ]
        })
        .collect();
    format!("\nLeases (judged by {clock}):\n{}", table(rows, "  "))
}

/// A warning for each volume whose lease label is not a lease, naming it
/// (escaped); `None` when every lease label reads.
pub(crate) fn lease_warnings(plan: &Plan) -> Option<String> {
    use crate::plan::lease::LeaseState;
    let mut out = String::new();
    for l in &plan.leases {
        if let LeaseState::Invalid { problem } = &l.state {
            let _ = writeln!(
                out,
                "warning: volume {} of box {} on engine {} is not a lease: {}; its box falls back to the grace rule",
                clip(&l.volume, LAST_CELL_CHARS),
                clip(&l.box_id, LAST_CELL_CHARS),
                escape(&plan.engine),
                escape(&problem.to_string()),
            );
        }
    }
    (!out.is_empty()).then_some(out)
}

/// One `warning:` line per listing or inspection the plan's discovery could
/// not make (what it could affect is blocked, the rest goes on), if any.
pub(crate) fn incomplete_warnings(plan: &Plan) -> Option<String> {
    incomplete_warnings_of(&plan.engine, &plan.incomplete)
}

/// [`incomplete_warnings`] of engine `engine`'s discovery, from what it could
/// not learn (`incomplete`, as a plan keeps it).
pub(crate) fn incomplete_warnings_of(engine: &str, incomplete: &[String]) -> Option<String> {
    let mut out = String::new();
    for text in incomplete {
        let _ = writeln!(
            out,
            "warning: engine {}: {}; only what it could affect is held back",
            escape(engine),
            escape(text),
        );
    }
    (!out.is_empty()).then_some(out)
}

/// One `warning:` line per listing of `inventory` that failed (what it
/// would have shown is missing), if any.
pub(crate) fn unlisted_warnings(inventory: &crate::plan::inventory::Inventory) -> Option<String> {
    let mut out = String::new();
    for (listing, error) in &inventory.unknown.listings {
        let _ = writeln!(
            out,
            "warning: engine {}: could not list {listing}: {}; the inventory is incomplete",
            escape(&inventory.engine),
            escape(&error.to_string()),
        );
    }
    (!out.is_empty()).then_some(out)
}

/// The one-line summary: `Plan: remove 2 containers, 1 volume and 0 networks; ...`.
pub(crate) fn plan_summary(plan: &Plan) -> String {
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

/// The heading of one engine's plan in human output (no `[[engine]]`):
/// `Engine: ADDRESS`.
pub(crate) fn plan_heading(endpoint: &str) -> String {
    format!("Engine: {endpoint}\n")
}

/// The most objects (to remove, blocked, kept) a plan may name and still
/// be printed whole before a converging run carries it out without `-v`
/// (decision 24): what fits on a screen beside its report.
pub(crate) const SHORT_PLAN: usize = 12;

/// Whether a converging run prints `plan` whole before carrying it out:
/// with `-v`, or when it is short ([`SHORT_PLAN`]); otherwise its scope
/// and summary line, and the report names each object once.
pub(crate) fn plan_in_full(plan: &Plan, verbose: bool) -> bool {
    verbose || plan.steps.len() + plan.blocked.len() + plan.kept.len() <= SHORT_PLAN
}

/// A plan said before it is carried out, not whole: its scope and its
/// summary line, saying how to see every step.
fn plan_brief(plan: &Plan) -> String {
    let scope: Vec<String> = plan.scope.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let summary = plan_summary(plan);
    format!(
        "Scope: {}\n{} (every step: --verbose)\n",
        escape(&scope.join(", ")),
        summary.strip_suffix('.').unwrap_or(&summary)
    )
}

/// The one engine's plan as a converging run prints it before carrying it
/// out: whole when `full` ([`plan_in_full`]), else in brief; a blank line.
pub(crate) fn engine_plan(plan: &Plan, full: bool) -> String {
    if full {
        format!("{}\n", plan_human(plan))
    } else {
        format!("{}\n", plan_brief(plan))
    }
}

/// One fleet engine's plan as a converging run prints it before carrying
/// it out: `Engine NAME: ADDRESS`, the plan (as [`engine_plan`]), a blank line.
pub(crate) fn fleet_engine_plan(engine: &str, endpoint: &str, plan: &Plan, full: bool) -> String {
    format!(
        "Engine {}: {endpoint}\n{}",
        escape(engine),
        engine_plan(plan, full)
    )
}

/// The plan's JSON document (`plan.schema.json`; also the saved-plan
/// format, where `plan --out` adds its `seal`): one engine's plan, or a
/// fleet's, with the summary line.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(untagged)]
#[schemars(deny_unknown_fields)]
pub(crate) enum PlanDoc<'a> {
    /// One engine's plan (no `[[engine]]` in the state file).
    One {
        #[serde(flatten)]
        plan: &'a Plan,
        summary: String,
    },
    /// A fleet's plans (a state file with `[[engine]]`).
    Fleet {
        #[serde(flatten)]
        fleet: &'a FleetPlan,
        summary: String,
    },
}

/// The plan as JSON (also the saved-plan format), with the summary line.
pub fn plan_json(plan: &Plan) -> String {
    document(PlanDoc::One {
        plan,
        summary: plan_summary(plan),
    })
}

/// A fleet's plan: each engine's plan under its heading, engines that could
/// not be listed, and a fleet summary line. JSON: the saved fleet plan with
/// the summary.
pub(crate) fn fleet_plan(
    fleet: &FleetPlan,
    endpoints: &[(String, String)],
    format: Format,
) -> String {
    let summary = fleet_plan_summary(fleet);
    if format == Format::Json {
        return document(PlanDoc::Fleet { fleet, summary });
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

/// The endpoint of the engine named `engine`, for a heading.
fn endpoint_of(endpoints: &[(String, String)], engine: &str) -> String {
    endpoints
        .iter()
        .find(|(n, _)| n == engine)
        .map(|(_, e)| e.clone())
        .unwrap_or_default()
}

/// `Fleet: 2 engines; remove 1 container, ...; 1 engine failed.`
pub(crate) fn fleet_plan_summary(fleet: &FleetPlan) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::{assert_human_and_json, hostile_plan, plan_of_two};

    /// A degraded discovery, planned on the in-memory engine: a running box
    /// and a stopped one, an unrelated container made after both whose
    /// inspection hangs, and a network listing that fails. The running box
    /// is blocked (`holderUnknown`), what it uses waits for it, the stopped
    /// box goes, and both failures are said.
    #[tokio::test]
    async fn a_degraded_discovery_names_what_it_could_not_learn() {
        use crate::engine::memory::{
            box_labels, ContainerInfo, FaultAction, MemoryEngine, Op, VolumeInfo, World,
        };
        use crate::model::{EngineError, Kind, Scope};
        let mut world = World::default();
        for (id, state) in [("running", "running"), ("stopped", "exited")] {
            let mut c =
                ContainerInfo::new(&format!("c0{id}"), &format!("sbx-{id}"), box_labels(id));
            c.mounts.insert(format!("{id}-data"));
            c.state = state.into();
            c.created_at = Some("2026-12-01T10:00:00Z".into());
            world.containers.push(c);
            world.volumes.push(VolumeInfo {
                name: format!("{id}-data"),
                labels: box_labels(id),
                created_at: None,
            });
        }
        let mut locked = ContainerInfo::new("f00d", "copying", Default::default());
        locked.state = "running".into();
        locked.created_at = Some("2026-12-01T10:05:00Z".into());
        world.containers.push(locked);
        let engine = MemoryEngine::new(world).with_deadline(std::time::Duration::from_millis(20));
        let hung = FaultAction::Delay(std::time::Duration::from_secs(60));
        engine.inject(Op::Inspect(Kind::Container), Some("f00d"), hung, usize::MAX);
        let refused = EngineError::status_500("list networks", "network store is locked");
        engine.inject(Op::List(Kind::Network), None, FaultAction::Fail(refused), 1);
        let goal = crate::plan::Goal::nothing_declared();
        let (_, plan) =
            crate::exec::list::plan_once(&engine, &goal, &Scope::default(), 1_800_000_000)
                .await
                .unwrap();
        let blocked: Vec<serde_json::Value> = plan
            .blocked
            .iter()
            .map(|b| serde_json::to_value(&b.why).unwrap())
            .collect();
        insta::with_settings!({snapshot_path => "../../snapshots"}, {
            insta::assert_snapshot!("plan_degraded_human", plan_human(&plan));
            insta::assert_json_snapshot!("plan_degraded_blocked_reasons", blocked);
        });
        // The container listing fails too: no container is seen, and every
        // volume waits for it (listingFailed).
        let refused = EngineError::status_500("list containers", "container store is locked");
        engine.inject(
            Op::List(Kind::Container),
            None,
            FaultAction::Fail(refused),
            2,
        );
        let (_, plan) =
            crate::exec::list::plan_once(&engine, &goal, &Scope::default(), 1_800_000_000)
                .await
                .unwrap();
        insta::with_settings!({snapshot_path => "../../snapshots"}, {
            insta::assert_snapshot!("plan_degraded_containers_unlisted_human", plan_human(&plan));
        });
    }

    #[test]
    fn archive_steps_say_where_then_remove() {
        let mut plan = plan_of_two();
        plan.steps[1].archive = Some("/srv/sbx-archive".into());
        assert_human_and_json!("plan_archive", plan_human(&plan), plan_json(&plan));
        // Read through the box's own container: it stops, is read, then goes.
        plan.steps[0].archive = plan.steps[1].archive.clone();
        plan.steps[0].reads = vec![crate::plan::Read {
            step: 2,
            volume: "data-a".into(),
            path: "/home/sbx/work".into(),
        }];
        plan.steps[1].archived_by = Some(1);
        plan.validate().unwrap();
        assert_human_and_json!(
            "plan_archive_through_container",
            plan_human(&plan),
            plan_json(&plan)
        );
    }

    #[test]
    fn removals_blocked_and_kept_with_reasons() {
        insta::assert_snapshot!(plan_human(&plan_of_two()), @r"
        Scope: ca.sandbox=1

        Remove, in this order:
          1.  container  sbx-a (c0ffee000001)  box a  exited  leaked: box a is not declared
          2.  volume     data-a                box a          leaked: box a is not declared  after 1

        Blocked (never forced; apply will fail until resolved):
          network  shared (5eed00000001)  no box    in use by unmanaged container web (0ddba1100000, attached); never forced: remove that container first, or declare this object's box (a volume: list it in volumes.keep)

        Keep:
          volume  notes  no box    listed in volumes.keep

        Retain (images are never removed):
          image  ca-sbx:repo-1  0123456789ab

        Plan: remove 1 container, 1 volume and 0 networks; 1 object blocked; keep 1 object; retain 1 image.
        ");
    }

    #[test]
    fn json_is_the_plan_with_its_reasons_and_summary() {
        let json: serde_json::Value = serde_json::from_str(&plan_json(&plan_of_two())).unwrap();
        insta::assert_json_snapshot!(json["steps"][1], @r#"
        {
          "box": "a",
          "engine": "default",
          "kind": "volume",
          "name": "data-a",
          "reason": {
            "boxId": "a",
            "code": "boxNotDeclared",
            "text": "leaked: box a is not declared"
          },
          "step": 2,
          "waitsFor": [
            1
          ]
        }
        "#);
        assert_eq!(
            json["summary"],
            "Plan: remove 1 container, 1 volume and 0 networks; 1 object blocked; keep 1 object; retain 1 image."
        );
        assert_eq!(
            plan(&plan_of_two(), Format::Json),
            plan_json(&plan_of_two())
        );
    }

    #[test]
    fn hostile_text_is_escaped_in_human_output_and_exact_in_json() {
        let plan = hostile_plan();
        let human = plan_human(&plan);
        insta::assert_snapshot!(human, @r"
        Scope: ca.sandbox=1

        Remove, in this order:
          1.  container  evil\u{1b}[2J\n\u{202e}x (c0ffee000001)  box b\u{1b}]0;t\u{7}\nFORGED  running  leaked: box b\u{1b}]0;t\u{7}\nFORGED is not declared

        Plan: remove 1 container, 0 volumes and 0 networks; keep 0 objects; retain 0 images.
        ");
        assert!(!human.contains('\u{1b}') && !human.contains('\u{202e}'));
        let json: serde_json::Value = serde_json::from_str(&plan_json(&plan)).unwrap();
        assert_eq!(json["steps"][0]["name"], "evil\u{1b}[2J\n\u{202e}x");
        assert_eq!(json["steps"][0]["box"], "b\u{1b}]0;t\u{7}\nFORGED");
        assert_eq!(
            json["steps"][0]["reason"]["text"],
            "leaked: box b\u{1b}]0;t\u{7}\nFORGED is not declared"
        );
    }

    #[test]
    fn a_fleet_plan_has_a_heading_per_engine_and_its_failures() {
        let fleet = FleetPlan {
            version: None,
            engines: vec![plan_of_two()],
            failures: vec![crate::exec::report::Failure {
                kind: "engine".into(),
                engine: "ci\u{1b}[1m".into(),
                name: "ssh://ci".into(),
                id: None,
                error: "cannot reach\nthe engine".into(),
            }],
        };
        let endpoints = [(
            "default".to_string(),
            "unix:///var/run/docker.sock".to_string(),
        )];
        let human = fleet_plan(&fleet, &endpoints, Format::Human);
        assert!(
            human.starts_with("Engine default: unix:///var/run/docker.sock\nScope: ca.sandbox=1\n")
        );
        assert!(human.ends_with(
            "Engine ci\\u{1b}[1m: \n  FAILED: cannot reach\\nthe engine\n\n\
             Fleet: 1 engine listed; remove 1 container, 1 volume and 0 networks; 1 object blocked; keep 1 object; 1 engine FAILED (ci\\u{1b}[1m).\n"
        ), "{human}");
        let json: serde_json::Value =
            serde_json::from_str(&fleet_plan(&fleet, &endpoints, Format::Json)).unwrap();
        assert_eq!(json["failures"][0]["engine"], "ci\u{1b}[1m");
        assert_eq!(json["summary"], fleet_plan_summary(&fleet));
    }
}
