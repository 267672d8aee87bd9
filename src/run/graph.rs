//! `graph`: each engine's plan as a graph (DOT, Mermaid, or the human and
//! JSON forms), every engine planned at once through the one merge.
//!
//! Owns the order (engine after engine, as the run names them) and which
//! warnings it says. An engine that could not be listed fails its part alone
//! (the others still drawn); a plan drawn as far as it is known fails the
//! run. The words are `render`'s; ends in the merged `Verdict`.

use crate::exec::fleet::plan_all;
use crate::exec::report::Verdict;
use crate::plan::Goal;
use crate::render;

use super::context::{Run, Sink};

/// `graph`: one plan per engine, drawn.
pub(super) async fn graph(run: &Run<'_>, goal: &Goal, sink: &mut dyn Sink) -> Verdict {
    let config = run.config;
    let planned = plan_all(run.engines, goal, &config.scope, config.now, &run.memo).await;
    for part in &planned.parts {
        match &part.result {
            Ok(shown) => {
                let plan = &shown.value.1;
                // Drawn as far as it is known; the run fails.
                if let Some(w) = render::incomplete_warnings(plan) {
                    sink.err(&w);
                }
                sink.out(&render::graph(plan, config.format));
            }
            Err(e) => run.part_failed(sink, &part.engine, e),
        }
    }
    Verdict::of_report(&planned.report)
}
