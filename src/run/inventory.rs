//! `inventory`: every engine listed at once, through the one merge.
//!
//! Owns which warnings it says (labels rejected, listings that failed) and
//! the layout: one engine's inventory as it is, a fleet's each under its
//! engine. An engine that could not be listed fails its part alone (the
//! others still shown); a listing that failed fails the inventory too (it is
//! not all there). The words are `render`'s; ends in the merged `Verdict`.

use crate::exec::fleet::list_all;
use crate::exec::report::{PartError, Verdict};
use crate::plan::lease::Leases;
use crate::render;

use super::context::{fail, Run, Sink};

/// `inventory`; leases judged as the plan judges them (under `max_lease`),
/// at the run's time.
pub(super) async fn inventory(
    run: &Run<'_>,
    max_lease: &Option<u64>,
    sink: &mut dyn Sink,
) -> Verdict {
    let config = run.config;
    let listed = list_all(run.engines, &config.scope).await;
    for part in &listed.parts {
        if let Ok(shown) = &part.result {
            if let Some(w) = render::rejected_warning(&shown.value) {
                sink.err(&w);
            }
            if let Some(w) = render::unlisted_warnings(&shown.value) {
                sink.err(&w);
            }
        }
    }
    let verdict = Verdict::of_report(&listed.report);
    let parts: Vec<(String, String, Result<render::Listed, PartError>)> = listed
        .parts
        .into_iter()
        .map(|part| {
            let judged = part.result.map(|shown| {
                let leases = Leases::of(&shown.value, config.now, *max_lease);
                (shown.value, leases)
            });
            // The address as `plan` says it (with where it came from).
            let endpoint = run
                .endpoints
                .iter()
                .find(|(n, _)| *n == part.engine)
                .map_or(part.endpoint, |(_, e)| e.clone());
            (part.engine, endpoint, judged)
        })
        .collect();
    if config.fleet {
        let parts: Vec<(String, String, Result<render::Listed, String>)> = parts
            .into_iter()
            .map(|(n, e, r)| (n, e, r.map_err(|e| e.to_string())))
            .collect();
        sink.out(&render::fleet_inventory(&parts, config.format));
    } else {
        for (_, endpoint, result) in &parts {
            match result {
                Ok((inventory, leases)) => sink.out(&render::inventory(
                    inventory,
                    leases,
                    endpoint,
                    config.format,
                )),
                Err(e) => {
                    fail(sink, &anyhow::Error::new(e.clone()));
                }
            }
        }
    }
    verdict
}
