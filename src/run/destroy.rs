//! `destroy ID...`, `destroy --prune` and `prune`: a converging run
//! (`apply.rs`) whose target (`cli::config::Target`) is resolved before it;
//! here, the run's own steps around the walk.
//!
//! Owns, before the walk: the note of a prune with no state file and no
//! scope (said first), and the question a prune asks at a terminal when it
//! would remove a running container (it plans, reads the plan and changes
//! nothing; a "no" ends the run with a declined report). After the walk:
//! judging each named box ID that no engine's plan carries (`unknownBoxes`,
//! a fact of the plans): removed earlier when the audit log records it (read
//! from its end only), fine with `--missing-ok`, else not found, which the
//! one verdict (`Verdict::of_report`) turns into a failure. Must not decide
//! an exit status nor make words (`render` does).

use tokio::io::AsyncBufReadExt;

use crate::cli::config::Target;
use crate::exec::fleet::plan_all;
use crate::exec::report::{EarlierRemoval, FleetReport, Report, Unmatched, Verdict};
use crate::model::Kind;
use crate::observe::audit::{last_removal, TAIL_BYTES};
use crate::plan::Goal;
use crate::render::{self, Format, Running};

use super::context::{Run, Sink};

/// The steps of `target` before the walk: the note of a prune with no
/// state file, then its question at a terminal. `Some`: the run ends here
/// with this verdict (the question was answered no; nothing was removed).
pub(super) async fn before(
    run: &Run<'_>,
    target: &Target,
    goal: &Goal,
    sink: &mut dyn Sink,
) -> Option<Verdict> {
    let Target::Prune { no_state_file, ask } = target else {
        return None;
    };
    if *no_state_file {
        sink.err(&render::no_state_file_note(
            crate::state::DEFAULT_STATE_PATH,
            run.endpoints,
        ));
    }
    if !*ask {
        return None;
    }
    let config = run.config;
    let planned = plan_all(run.engines, goal, &config.scope, config.now, &run.memo).await;
    let mut counts = [0usize; Kind::ALL.len()];
    let mut running = Vec::new();
    for part in &planned.parts {
        let Ok(shown) = &part.result else { continue };
        for step in &shown.value.1.steps {
            let o = &step.object;
            if let Some(i) = Kind::ALL.iter().position(|&k| k == o.kind) {
                counts[i] += 1;
            }
            if o.kind == Kind::Container && o.state.as_deref() == Some("running") {
                running.push(match &o.box_id {
                    Some(id) => Running::Box {
                        engine: o.engine.clone(),
                        id: id.clone(),
                    },
                    None => Running::Unboxed {
                        engine: o.engine.clone(),
                        name: o.name.clone(),
                    },
                });
            }
        }
    }
    // Nothing running would go: the prune goes on as without a terminal.
    if running.is_empty() {
        return None;
    }
    running.sort();
    running.dedup();
    let count = |k: Kind| {
        Kind::ALL
            .iter()
            .position(|&x| x == k)
            .map_or(0, |i| counts[i])
    };
    sink.err(&render::prune_question(count, &running));
    let answer = tokio::select! {
        line = read_answer() => line,
        // A Ctrl-C at the question is a "no" (nothing was removed).
        () = run.stop.cancel.cancelled() => None,
    };
    let yes = answer
        .as_deref()
        .map(|a| a.trim().to_ascii_lowercase())
        .is_some_and(|a| a == "y" || a == "yes");
    if yes {
        return None;
    }
    if answer.is_none() {
        sink.err("\n");
    }
    sink.err(&render::prune_declined(answer.as_deref()));
    let mut report = Report::empty();
    report.declined = true;
    report.no_state_file = *no_state_file;
    let verdict = Verdict {
        failed: true,
        declined: true,
        ..Verdict::default()
    };
    if config.format == Format::Json {
        let ok = crate::cli::exit::succeeds(&super::ended(verdict, run.stop, false));
        sink.out(&render::report(&report, ok, Format::Json));
    }
    Some(verdict)
}

/// One line of the process's stdin (`None`: the end of input, or an error).
async fn read_answer() -> Option<String> {
    let mut line = String::new();
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
    match stdin.read_line(&mut line).await {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line),
    }
}

/// Judges the merged `report` of a run told `target`: a prune says it had
/// no state file; each named box ID no engine carries is removed earlier
/// (the audit log, if the run has one, records an object of that box in
/// scope as removed on one of the run's engines), missing and fine
/// (`--missing-ok`), or not found.
pub(super) fn judge(run: &Run<'_>, target: &Target, report: &mut FleetReport) {
    let config = run.config;
    if let Target::Prune { no_state_file, .. } = target {
        report.report.no_state_file = *no_state_file;
    }
    let Target::Boxes { missing_ok, .. } = target else {
        return;
    };
    let engines: Vec<String> = run.endpoints.iter().map(|(n, _)| n.clone()).collect();
    for unknown in &mut report.report.unknown_boxes {
        let recorded = config.audit.as_deref().and_then(|path| {
            // A log that cannot be read proves nothing: not found.
            last_removal(
                path,
                &unknown.id,
                &config.scope.labels,
                &engines,
                TAIL_BYTES,
            )
            .ok()
            .flatten()
            .map(|r| (path, r))
        });
        if let Some((path, r)) = recorded {
            unknown.status = Unmatched::RemovedEarlier;
            unknown.removed = Some(EarlierRemoval {
                time: r.time,
                engine: r.engine,
                kind: r.kind,
                name: r.name,
                code: r.code,
                text: r.text,
                log: path.display().to_string(),
            });
        } else if *missing_ok {
            unknown.status = Unmatched::MissingOk;
        }
    }
}
