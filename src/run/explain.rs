//! `explain QUERY`: what the plan does with the objects a query names, on
//! every engine at once through the one merge.
//!
//! Owns the order (engine after engine, as the run names them) and which
//! warnings it says. Each engine's part, its own listings included, is
//! `exec::explain`'s; an engine that could not be listed, or where nothing
//! is what the query names, fails its part alone (the others still
//! explained); an explanation made as far as discovery could learn fails
//! the run. The words are `render`'s; JSON is one document of every
//! engine's explanations. Ends in the merged `Verdict`.

use crate::exec::fleet::show_all;
use crate::exec::report::Verdict;
use crate::plan::Goal;
use crate::render::{self, Format};

use super::context::{Run, Sink};

/// `explain`: every engine's explanations of what `query` names.
pub(super) async fn explain(
    run: &Run<'_>,
    goal: &Goal,
    query: &str,
    sink: &mut dyn Sink,
) -> Verdict {
    let config = run.config;
    let state = config.state.as_ref().map(|p| p.display().to_string());
    let (scope, now, state) = (&config.scope, config.now, state.as_deref());
    let explained = show_all(run.engines, |engine| {
        crate::exec::explain::explain(engine, goal, scope, now, query, state)
    })
    .await;
    // JSON: one document of every engine's explanations, once.
    let mut every = Vec::new();
    for part in &explained.parts {
        match &part.result {
            Ok(shown) => {
                // Explained as far as it is known; the run fails.
                if let Some(w) = render::incomplete_warnings_of(&part.engine, &shown.incomplete) {
                    sink.err(&w);
                }
                match config.format {
                    Format::Json => every.extend(shown.value.iter().cloned()),
                    _ => sink.out(&render::explain(&shown.value, config.format)),
                }
            }
            Err(e) => run.part_failed(sink, &part.engine, e),
        }
    }
    if config.format == Format::Json && explained.parts.iter().any(|p| p.result.is_ok()) {
        sink.out(&render::explain(&every, Format::Json));
    }
    Verdict::of_report(&explained.report)
}
