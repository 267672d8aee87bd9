//! Listing: what one engine holds, as an `Inventory`, and `plan_once`
//! (list, plan, and inspect containers for shared namespaces until the plan
//! stands).
//!
//! Owns the engine calls of discovery: a constant eight listings whatever the
//! number of objects or of a swarm's nodes (five, and the Swarm services,
//! configs and secrets, which an engine that is not a swarm manager answers
//! with an error that skips those kinds with one note), and one read of the
//! engine's clock when a lease is listed, and the inspection of containers (at most eight at
//! once) for the pid and ipc namespaces they share, which the listing does
//! not show. What the answers mean is `plan::inventory`'s (pure). A failure
//! anywhere fails the whole step: nothing may be planned from a partial
//! inventory. Must not remove anything.

use futures_util::stream::{self, StreamExt};

use crate::engine::{Engine, EngineError};
use crate::model::lease::LEASE_TTL_LABEL;
use crate::model::{Kind, Object, ObjectKey, Scope, IMAGE_REFERENCE};
use crate::plan::inventory::Inventory;
use crate::plan::{Goal, Plan};

/// A listing that failed. Nothing is planned from a partial inventory.
#[derive(Debug, Clone)]
pub struct InventoryError {
    what: &'static str,
    error: EngineError,
}

impl std::fmt::Display for InventoryError {
    /// An engine that cannot be reached is said as such (whichever listing
    /// noticed first); any other failure names the listing.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.error.is_unreachable() {
            write!(f, "{}", self.error)
        } else {
            write!(f, "could not list {}: {}", self.what, self.error)
        }
    }
}

impl std::error::Error for InventoryError {}

/// How many containers are inspected at once.
const INSPECT_CONCURRENCY: usize = 8;

/// Lists the managed containers, every container (only to find unmanaged
/// users of managed objects), the managed volumes and networks, the
/// `ca-sbx:*` images, and on a swarm manager every service (one call; the
/// managed ones are told apart on the client, the others may hold a managed
/// network, config or secret) and the managed configs and secrets,
/// concurrently, and keeps what passes the client-side check.
pub async fn inventory(engine: &dyn Engine, scope: &Scope) -> Result<Inventory, InventoryError> {
    let filters = scope.filters();
    let wrap = |what| move |error| InventoryError { what, error };
    // The Swarm kinds: an engine that is no swarm manager says so for each;
    // then none of them is listed, and the run says why once.
    let swarm = async {
        let (services, configs, secrets) = tokio::join!(
            engine.list(Kind::Service, &[]),
            engine.list(Kind::Config, &filters),
            engine.list(Kind::Secret, &filters),
        );
        let no_swarm = [&services, &configs, &secrets]
            .into_iter()
            .find_map(|r| r.as_ref().err().filter(|e| e.is_no_swarm()).cloned());
        if let Some(e) = no_swarm {
            return Ok((Vec::new(), Vec::new(), Some(e)));
        }
        let services = services.map_err(wrap("services"))?;
        let mut listed = configs.map_err(wrap("configs"))?;
        listed.extend(secrets.map_err(wrap("secrets"))?);
        Ok((services, listed, None))
    };
    let (managed, mut all, volumes, networks, images, (services, swarm_listed, swarm_skipped)) = tokio::try_join!(
        async {
            engine
                .list(Kind::Container, &filters)
                .await
                .map_err(wrap("managed containers"))
        },
        async {
            engine
                .list(Kind::Container, &[])
                .await
                .map_err(wrap("all containers (to find users of managed objects)"))
        },
        async {
            engine
                .list(Kind::Volume, &filters)
                .await
                .map_err(wrap("volumes"))
        },
        async {
            engine
                .list(Kind::Network, &filters)
                .await
                .map_err(wrap("networks"))
        },
        async {
            engine
                .list_images(IMAGE_REFERENCE)
                .await
                .map_err(wrap("images"))
        },
        swarm,
    )?;
    // Leases are judged by the engine's clock: read it (one more call) only
    // when a listed volume carries a lease label. A clock that cannot be read
    // fails the listing: a lease is never judged by a guess.
    let leased = volumes
        .iter()
        .any(|v| v.labels.contains_key(LEASE_TTL_LABEL));
    let skew_ms = if leased {
        Some(
            skew_ms(engine)
                .await
                .map_err(wrap("the engine's clock (to judge leases)"))?,
        )
    } else {
        None
    };
    let mut listed = managed;
    listed.extend(volumes);
    listed.extend(networks);
    listed.extend(swarm_listed);
    all.extend(services);
    let mut inventory = Inventory::from_listings(engine.name(), scope.clone(), listed, all, images);
    inventory.skew_ms = skew_ms;
    inventory.swarm_skipped = swarm_skipped;
    Ok(inventory)
}

/// How far `engine`'s clock is ahead of this machine's (milliseconds;
/// negative: behind), against the middle of the call, less what the call's
/// own duration leaves uncertain: the engine read its clock somewhere within
/// the call, so only the part of the difference beyond half the round trip is
/// skew (a slow answer from a loaded engine is not taken for a clock behind).
pub async fn skew_ms(engine: &dyn Engine) -> Result<i64, EngineError> {
    let local_ms = || crate::model::time::unix_ms(std::time::SystemTime::now());
    let before = local_ms();
    let engine_ms = engine.clock().await?;
    let after = local_ms();
    let half = (after - before) / 2;
    let raw = engine_ms - (before + half);
    Ok(raw.signum() * (raw.abs() - half).max(0))
}

/// Inspects every unmanaged container (once), and the managed containers
/// named in `managed`, for the namespaces they share, and gives the answers
/// to the inventory. A container gone meanwhile is skipped; any other failure
/// fails the whole step (nothing may be removed on a guess).
async fn inspect_joins(
    engine: &dyn Engine,
    inventory: &mut Inventory,
    managed: &[ObjectKey],
) -> Result<(), InventoryError> {
    let inspected: Vec<Result<Option<Object>, EngineError>> =
        stream::iter(inventory.to_inspect(managed))
            .map(|key| async move {
                match engine.inspect(&key).await {
                    Ok(o) => Ok(Some(o)),
                    Err(e) if e.is_not_found() => Ok(None),
                    Err(e) => Err(e),
                }
            })
            .buffered(INSPECT_CONCURRENCY)
            .collect()
            .await;
    let mut found = Vec::with_capacity(inspected.len());
    for result in inspected {
        match result {
            Ok(Some(o)) => found.push(o),
            Ok(None) => {}
            Err(error) => {
                return Err(InventoryError {
                    what: "containers (to find shared namespaces)",
                    error,
                })
            }
        }
    }
    inventory.inspected(found);
    Ok(())
}

/// Lists `engine` and plans `goal` at `now`. When the plan removes or blocks a
/// container, the unmanaged containers and the managed containers that stay
/// are inspected for the pid and ipc namespaces they share (the listing shows
/// only the network mode), and the plan is made again with what that found.
pub async fn plan_once(
    engine: &dyn Engine,
    goal: &Goal,
    scope: &Scope,
    now: i64,
) -> Result<(Inventory, Plan), InventoryError> {
    let mut inventory = inventory(engine, scope).await?;
    let mut plan = Plan::build(goal, &inventory, now);
    // Inspect until no new container stays: a managed container that stays
    // (kept, or blocked by what an inspection found) may share a namespace of
    // one that would go.
    let mut seen: std::collections::BTreeSet<crate::model::ObjectKey> = Default::default();
    loop {
        let containers_at_stake = plan.removes_containers()
            || plan
                .blocked
                .iter()
                .any(|b| b.object.kind == crate::model::Kind::Container);
        if !containers_at_stake {
            break;
        }
        let staying: Vec<crate::model::ObjectKey> = plan
            .kept
            .containers
            .iter()
            .chain(plan.blocked.iter())
            .filter(|n| n.object.kind == crate::model::Kind::Container)
            .map(|n| n.object.key())
            .filter(|k| !seen.contains(k))
            .collect();
        let first = !inventory.inspected && !inventory.unmanaged.is_empty();
        if !first && staying.is_empty() {
            break;
        }
        seen.extend(staying.iter().cloned());
        inspect_joins(engine, &mut inventory, &staying).await?;
        plan = Plan::build(goal, &inventory, now);
    }
    Ok((inventory, plan))
}
