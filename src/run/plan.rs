//! `plan` (and `plan --out FILE`, `plan --detailed-exitcode`): every engine
//! planned at once through the one merge.
//!
//! Owns which warnings it says, the layout (one engine's plan under its
//! address; a fleet's each under its engine, with the engines that could
//! not be listed), and saving the plan sealed (`exec::fleet::save`,
//! `exec::seal`). An engine that could not be listed fails its part alone
//! (the others still shown); a listing or inspection that failed fails the
//! plan too (what it could affect is only blocked, not known). The words
//! are `render`'s; ends in the merged `Verdict` (pending when asked for and
//! there is something to do).

use std::path::Path;

use crate::exec::fleet::{plan_all, save, FleetPlan};
use crate::exec::report::Verdict;
use crate::exec::seal::KeySource;
use crate::model::RefusalCode;
use crate::plan::Goal;
use crate::render::{self, Format};

use super::context::{fail, Run, Sink};

/// `plan`; saved to `out` when given, sealed with the key its source gives
/// (made there if there is none yet; a key that cannot be had fails the run
/// before any engine call); `detailed`: pending changes count.
pub(super) async fn plan(
    run: &Run<'_>,
    goal: &Goal,
    detailed: bool,
    out: Option<(&Path, &KeySource)>,
    sink: &mut dyn Sink,
) -> Verdict {
    let config = run.config;
    let out = match out.map(|(path, key)| key.for_sealing().map(|key| (path, key))) {
        None => None,
        Some(Ok(out)) => Some(out),
        Some(Err(e)) => {
            let e = anyhow::Error::new(e);
            let refusal = crate::cli::refusal::of(&e, RefusalCode::PlanKey);
            return run.refuse(sink, &e, refusal);
        }
    };
    let planned = plan_all(run.engines, goal, &config.scope, config.now, &run.memo).await;
    let shown: Vec<_> = planned
        .parts
        .iter()
        .filter_map(|p| p.result.as_ref().ok())
        .map(|s| &s.value)
        .collect();
    for (inventory, _) in &shown {
        if let Some(w) = render::rejected_warning(inventory) {
            sink.err(&w);
        }
        if let Some(note) = render::swarm_note(inventory) {
            sink.err(&note);
        }
    }
    for (_, plan) in &shown {
        if let Some(w) = render::lease_warnings(plan) {
            sink.err(&w);
        }
        if let Some(w) = render::incomplete_warnings(plan) {
            sink.err(&w);
        }
    }
    let mut fleet = FleetPlan::of(&planned);
    for plan in &mut fleet.engines {
        plan.endpoint = run
            .endpoints
            .iter()
            .find(|(name, _)| *name == plan.engine)
            .map(|(_, endpoint)| endpoint.clone());
    }
    let verdict = Verdict {
        pending: detailed && !fleet.is_empty(),
        ..Verdict::of_report(&planned.report)
    };
    if !config.fleet {
        // One engine: its failure is said as every command says one.
        if let Some(f) = fleet.failures.first() {
            return fail(sink, &anyhow::anyhow!("{}", f.error));
        }
    }
    if let Some((path, key)) = &out {
        let text = match (config.fleet, fleet.engines.first()) {
            (false, Some(plan)) => render::plan_json(plan),
            _ => render::fleet_plan(&fleet, run.endpoints, Format::Json),
        };
        if let Err(e) = save(path, &text, key) {
            return fail(sink, &e.into());
        }
    }
    match (config.fleet, fleet.engines.first()) {
        (false, Some(plan)) => {
            if config.format == Format::Human {
                sink.out(&render::plan_heading(&run.endpoints[0].1));
            }
            sink.out(&render::plan(plan, config.format));
        }
        _ => sink.out(&render::fleet_plan(&fleet, run.endpoints, config.format)),
    }
    verdict
}
