//! `explain` on one engine: the plan, and the listings of its own that make
//! the universe a query is looked for in.
//!
//! Owns what `explain` asks an engine beyond discovery: every container,
//! every volume and every network (managed or not, each listing whole, with
//! no label filter), so that a query can name any object there, not only
//! what discovery kept. Discovery's own unmanaged containers are kept first
//! (what it learned of them wins); the rest of the listing adds what it left
//! out. A failed listing of its own fails this engine's part (nothing to look
//! in); what discovery could not learn is the part's `incomplete` (explained
//! as far as it is known, and the run fails). Must not print or decide what
//! the plan does (`plan::explain` does, from the plan).

use crate::engine::Engine;
use crate::exec::reconcile::plan_once;
use crate::exec::report::{Early, PartError, Shown};
use crate::model::{Kind, Scope};
use crate::plan::explain::{explain as explain_object, find, universe, Explanation, Query};
use crate::plan::Goal;

/// Plans `goal` on `engine`, lists every container, volume and network
/// there, and explains what `query` names (`state`: the state file's path,
/// for where a box is declared).
pub(crate) async fn explain(
    engine: &dyn Engine,
    goal: &Goal,
    scope: &Scope,
    now: i64,
    query: &str,
    state: Option<&str>,
) -> Result<Shown<Vec<Explanation>>, PartError> {
    let (inventory, plan) = plan_once(engine, goal, scope, now)
        .await
        .map_err(|e| PartError::Early(Early::Listing(e)))?;
    let (containers, volumes, networks) = tokio::try_join!(
        engine.list(Kind::Container, &[]),
        engine.list(Kind::Volume, &[]),
        engine.list(Kind::Network, &[])
    )
    .map_err(|e| PartError::Explain(e.to_string()))?;
    let mut others = inventory.unmanaged.clone();
    others.extend(containers);
    others.extend(volumes);
    others.extend(networks);
    let objects = universe(inventory.objects.values().cloned(), others);
    let found =
        find(&Query::parse(query), &objects).map_err(|e| PartError::Explain(e.to_string()))?;
    let value = found
        .into_iter()
        .map(|o| explain_object(o, &plan, scope, state))
        .collect();
    Ok(Shown {
        value,
        incomplete: plan.incomplete.clone(),
    })
}
