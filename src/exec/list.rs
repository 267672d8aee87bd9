//! Discovery: what one engine holds, as an `Inventory`, and `plan_once`
//! (list, plan, and inspect the containers that could share a namespace of
//! one the plan removes, until the plan stands).
//!
//! Owns the engine calls of discovery: seven listings whatever the number
//! of objects or of a swarm's nodes (the managed containers, volumes and
//! networks, the images, and the Swarm services, configs and secrets, which
//! an engine that is not a swarm manager answers with an error that skips
//! those kinds with one note); then at most three listings of the unmanaged
//! containers that could use or join what those found, filtered on the
//! server (never every container, the biggest answer on a busy engine,
//! unless a filter cannot be made; see `users`); one read of the engine's
//! clock when a lease is listed; and the inspection (at most
//! `INSPECT_CONCURRENCY` at once) of only the containers that could join a
//! pid or ipc namespace of a container the plan removes (the listing does
//! not show those joins; see `inventory::could_join`). Every call has its
//! own deadline (the engine's). Degrades per object, not per engine: a
//! listing or an inspection that fails is recorded in the inventory's
//! `unknown`, and the planner blocks exactly what it could affect; the
//! engine's part fails whole only when no listing of a managed kind
//! answered (nothing was seen, so nothing can be named). What the answers
//! mean is `plan::inventory`'s (pure). Must not remove anything.

use std::collections::BTreeMap;

use futures_util::stream::{self, StreamExt};

use crate::engine::{Engine, EngineError, Users};
use crate::model::lease::LEASE_TTL_LABEL;
use crate::model::{Kind, Listing, Object, ObjectKey, Scope, IMAGE_REFERENCE};
use crate::plan::inventory::Inventory;
use crate::plan::{Goal, Plan};

pub use crate::exec::memo::Memo;

/// Discovery that saw nothing: every listing of a managed kind failed.
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
const INSPECT_CONCURRENCY: usize = 16;

/// Lists the managed containers, volumes and networks, the `ca-sbx:*`
/// images, and on a swarm manager every service (one call; the managed ones
/// are told apart on the client, the others may hold a managed network,
/// config or secret) and the managed configs and secrets, concurrently; and,
/// as soon as each managed listing answers, the unmanaged containers that
/// could use what it found (see [`users`]). Keeps what passes the
/// client-side check. A listing that fails is recorded in
/// `unknown.listings`; only when the managed containers, volumes and
/// networks all failed is it an error.
pub async fn inventory(engine: &dyn Engine, scope: &Scope) -> Result<Inventory, InventoryError> {
    listed(engine, scope).await
}

/// At most this many names in one filtered listing of users; more, and
/// every container is listed instead (a request line has a limit).
const MAX_FILTER_VALUES: usize = 100;

/// The containers, managed or not, that could use or join what a managed
/// listing found (`Ok(None)`: none can, nothing was asked):
/// - `Users::Mounting` the managed volumes, and `Users::Attached` to the
///   managed networks (by ID and by name), in any state;
/// - `Users::LiveSince` the oldest managed container: only a container that
///   runs and was made after a container can share its namespaces. When two
///   managed containers are oldest in the same second (the listing has
///   one-second steps), when a creation time is unknown, or when that
///   container is gone by the time of the call, every container is listed
///   instead.
///
/// Too many names to filter by: every container. The answers are a subset
/// of every container, and a superset of what the planner uses.
async fn users(
    engine: &dyn Engine,
    found: &Result<Vec<Object>, EngineError>,
    kind: Kind,
) -> Option<Result<Vec<Object>, EngineError>> {
    let found = found.as_ref().ok()?;
    let every = || engine.list(Kind::Container, &[]);
    let users = match kind {
        Kind::Volume => Users::Mounting(found.iter().map(|v| v.name.clone()).collect()),
        Kind::Network => Users::Attached(
            found
                .iter()
                .flat_map(|n| [n.key.id.clone(), n.name.clone()])
                .collect(),
        ),
        _ => {
            let oldest = found.iter().map(|c| c.created).min()?;
            let mut at = found.iter().filter(|c| c.created == oldest);
            match (oldest, at.next(), at.next()) {
                (Some(_), Some(c), None) => Users::LiveSince(c.key.id.clone()),
                _ => return Some(every().await),
            }
        }
    };
    match &users {
        Users::Mounting(names) | Users::Attached(names) if names.is_empty() => return None,
        Users::Mounting(names) | Users::Attached(names) if names.len() > MAX_FILTER_VALUES => {
            return Some(every().await)
        }
        _ => {}
    }
    match engine.list_users(&users).await {
        Err(e) if e.is_not_found() => Some(every().await),
        answer => Some(answer),
    }
}

/// [`inventory`].
async fn listed(engine: &dyn Engine, scope: &Scope) -> Result<Inventory, InventoryError> {
    let filters = scope.filters();
    // Each managed listing, and then who could use what it found.
    let then_users = |kind: Kind| {
        let filters = &filters;
        async move {
            let found = engine.list(kind, filters).await;
            let users = users(engine, &found, kind).await;
            (found, users)
        }
    };
    let (
        (managed, joiners),
        (volumes, mounting),
        (networks, attached),
        images,
        services,
        configs,
        secrets,
    ) = tokio::join!(
        then_users(Kind::Container),
        then_users(Kind::Volume),
        then_users(Kind::Network),
        engine.list_images(IMAGE_REFERENCE),
        engine.list(Kind::Service, &[]),
        engine.list(Kind::Config, &filters),
        engine.list(Kind::Secret, &filters),
    );
    // One container in several answers is one container.
    let all: Result<Vec<Object>, EngineError> = [joiners, mounting, attached]
        .into_iter()
        .flatten()
        .try_fold(BTreeMap::new(), |mut all, answer| {
            all.extend(answer?.into_iter().map(|o| (o.key.clone(), o)));
            Ok(all)
        })
        .map(|all| all.into_values().collect());
    if let (Err(error), Err(_), Err(_)) = (&managed, &volumes, &networks) {
        return Err(InventoryError {
            what: "containers, volumes or networks",
            error: error.clone(),
        });
    }
    let mut failed: BTreeMap<Listing, EngineError> = BTreeMap::new();
    let mut take = |listing: Listing, result: Result<Vec<Object>, EngineError>| match result {
        Ok(listed) => listed,
        Err(error) => {
            failed.entry(listing).or_insert(error);
            Vec::new()
        }
    };
    // The Swarm kinds: an engine that is no swarm manager says so for each;
    // then none of them is listed, and the run says why once.
    let no_swarm = [&services, &configs, &secrets]
        .into_iter()
        .find_map(|r| r.as_ref().err().filter(|e| e.is_no_swarm()).cloned());
    let (services, swarm_listed) = if let Some(no) = &no_swarm {
        // A swarm worker's swarm has services it cannot list: unless the
        // state file puts them out of scope, those listings failed.
        if no.is_swarm_worker() && scope.lists_swarm(engine.name()) {
            for listing in [Listing::Services, Listing::Configs, Listing::Secrets] {
                take(listing, Err(no.clone()));
            }
        }
        (Vec::new(), Vec::new())
    } else {
        let services = take(Listing::Services, services);
        let mut listed = take(Listing::Configs, configs);
        listed.extend(take(Listing::Secrets, secrets));
        (services, listed)
    };
    let mut listed = take(Listing::Containers, managed);
    let mut all = take(Listing::Containers, all);
    let volumes = take(Listing::Volumes, volumes);
    listed.extend(take(Listing::Networks, networks));
    let images = images.unwrap_or_else(|error| {
        failed.insert(Listing::Images, error);
        Vec::new()
    });
    // Leases are judged by the engine's clock: read it (one more call) only
    // when a listed volume carries a lease label. A clock that cannot be read
    // is an unknown: a lease is never judged by a guess.
    let leased = volumes
        .iter()
        .any(|v| v.labels.contains_key(LEASE_TTL_LABEL));
    let skew_ms = if leased {
        match skew_ms(engine).await {
            Ok(skew) => Some(skew),
            Err(error) => {
                failed.insert(Listing::Clock, error);
                None
            }
        }
    } else {
        None
    };
    listed.extend(volumes);
    listed.extend(swarm_listed);
    all.extend(services);
    let mut inventory = Inventory::from_listings(engine.name(), scope.clone(), listed, all, images);
    inventory.skew_ms = skew_ms;
    inventory.swarm_skipped = no_swarm;
    inventory.unknown.listings = failed;
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

/// Inspects `keys` (at most `INSPECT_CONCURRENCY` at once, each within
/// its own deadline) for the namespaces they share, and gives the answers
/// to the inventory: a container gone meanwhile holds nothing; one whose
/// inspection failed is an unknown of the inventory, never a failure of
/// the whole step. What `memo` knows is not asked again.
async fn inspect_joins(
    engine: &dyn Engine,
    inventory: &mut Inventory,
    keys: Vec<ObjectKey>,
    memo: &Memo,
) {
    let mut found = Vec::with_capacity(keys.len());
    let mut failed = Vec::new();
    let mut ask = Vec::with_capacity(keys.len());
    {
        let learnt = memo.learnt();
        for key in &keys {
            let listed = inventory.container(key);
            match (learnt.get(key), learnt.failed.get(key), listed) {
                (Some(known), _, Some(listed)) => {
                    let mut o = listed.clone();
                    o.joins.clone_from(&known.joins);
                    o.ipc_shareable = known.ipc_shareable;
                    found.push(o);
                }
                (None, Some(error), _) => failed.push((key.clone(), error.clone())),
                _ => ask.push(key.clone()),
            }
        }
    }
    let answers: Vec<(ObjectKey, Result<Object, EngineError>)> = stream::iter(ask)
        .map(|key| async move {
            let answer = engine.inspect(&key).await;
            (key, answer)
        })
        .buffer_unordered(INSPECT_CONCURRENCY)
        .collect()
        .await;
    {
        let mut learnt = memo.learnt();
        for (key, answer) in answers {
            match answer {
                Ok(o) => {
                    learnt.learn(key, o.joins.clone(), o.ipc_shareable);
                    found.push(o);
                }
                Err(e) if e.is_not_found() => {}
                Err(e) => {
                    learnt.failed.insert(key.clone(), e.clone());
                    failed.push((key, e));
                }
            }
        }
    }
    let stuck = !failed.is_empty();
    inventory.inspected(&keys, found, failed);
    // A container whose lock is held (a `docker cp`, a removal in progress)
    // cannot be inspected, but the listing takes no lock: one that is gone
    // or no longer runs by now holds nothing.
    if stuck {
        if let Ok(all) = engine.list(Kind::Container, &[]).await {
            inventory.relisted(&all);
        }
    }
}

/// Lists `engine` and plans `goal` at `now`. While the plan removes
/// containers, the containers that could share a pid or ipc namespace of
/// one of them (the listing shows only the network mode) are inspected, and
/// the plan is made again with what that found, until no new container is
/// to be inspected (a container that now stays may share a namespace of one
/// that still goes).
pub async fn plan_once(
    engine: &dyn Engine,
    goal: &Goal,
    scope: &Scope,
    now: i64,
) -> Result<(Inventory, Plan), InventoryError> {
    plan_with(engine, goal, scope, now, &Memo::default()).await
}

/// [`plan_once`], asking no container whose answer `memo` knows, and
/// teaching it what the inspections found.
pub async fn plan_with(
    engine: &dyn Engine,
    goal: &Goal,
    scope: &Scope,
    now: i64,
    memo: &Memo,
) -> Result<(Inventory, Plan), InventoryError> {
    let mut inventory = listed(engine, scope).await?;
    let mut plan = Plan::build(goal, &inventory, now);
    loop {
        // At stake: the containers the plan removes, and those it keeps only
        // for a container that could not be inspected (what an inspection of
        // their own finds may prove that it cannot hold them).
        let unknown =
            |n: &&crate::plan::Noted| matches!(n.why, crate::model::Reason::HolderUnknown { .. });
        let at_stake: Vec<ObjectKey> = plan
            .steps
            .iter()
            .map(|s| &s.object)
            .chain(plan.blocked.iter().filter(unknown).map(|n| &n.object))
            .filter(|o| o.kind == Kind::Container)
            .map(|o| o.key())
            .collect();
        let staying: Vec<ObjectKey> = plan
            .kept
            .containers
            .iter()
            .chain(plan.blocked.iter().filter(|n| !unknown(n)))
            .filter(|n| n.object.kind == Kind::Container)
            .map(|n| n.object.key())
            .collect();
        let keys = inventory.to_inspect(&at_stake, &staying);
        if keys.is_empty() {
            break;
        }
        inspect_joins(engine, &mut inventory, keys, memo).await;
        plan = Plan::build(goal, &inventory, now);
    }
    // An answer is kept though its container was not listed: the listings
    // are filtered, so that does not mean it is gone. The memo is bounded
    // instead (`memo::MAX_ENTRIES`, the oldest go first).
    Ok((inventory, plan))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::engine::memory::{
        box_labels, ContainerInfo, FaultAction, MemoryEngine, Op, VolumeInfo, World,
    };
    use crate::model::Labels;

    const NOW: i64 = 1_800_000_000;

    fn leaks() -> Goal {
        Goal::nothing_declared()
    }

    fn at(second: u32) -> Option<String> {
        Some(format!("2026-12-01T10:00:{second:02}Z"))
    }

    /// Box `id`: its container (running or not, made at `second`) mounting
    /// its volume `v-<id>`.
    fn boxed(world: &mut World, id: &str, running: bool, second: u32) {
        let mut c = ContainerInfo::new(&format!("c-{id}"), &format!("sbx-{id}"), box_labels(id));
        c.mounts.insert(format!("v-{id}"));
        c.state = if running { "running" } else { "exited" }.into();
        c.created_at = at(second);
        world.containers.push(c);
        world.volumes.push(VolumeInfo {
            name: format!("v-{id}"),
            labels: box_labels(id),
            created_at: None,
        });
    }

    /// An unrelated, unlabeled running container made at `second`.
    fn unrelated(world: &mut World, id: &str, second: u32) {
        let mut c = ContainerInfo::new(id, id, Labels::new());
        c.state = "running".into();
        c.created_at = at(second);
        world.containers.push(c);
    }

    /// What `engine` holds, planned once for leaks in the default scope.
    async fn plan_leaks(engine: &MemoryEngine) -> (Inventory, Plan) {
        plan_once(engine, &leaks(), &Scope::default(), NOW)
            .await
            .unwrap()
    }

    fn hang(engine: &MemoryEngine, op: Op, target: Option<&str>) {
        engine.inject(
            op,
            target,
            FaultAction::Delay(Duration::from_secs(60)),
            usize::MAX,
        );
    }

    /// `world` planned while `op` (on `target`) hangs past a 50 ms deadline.
    async fn plan_hung(world: World, op: Op, target: Option<&str>) -> (MemoryEngine, Plan) {
        let engine = MemoryEngine::new(world).with_deadline(Duration::from_millis(50));
        hang(&engine, op, target);
        let (_, plan) = plan_leaks(&engine).await;
        (engine, plan)
    }

    /// The calls `engine` was asked for that start with `prefix`, sorted.
    fn calls_starting(engine: &MemoryEngine, prefix: &str) -> Vec<String> {
        let mut calls: Vec<String> = engine
            .calls()
            .into_iter()
            .filter(|c| c.starts_with(prefix))
            .collect();
        calls.sort();
        calls
    }

    fn inspects(engine: &MemoryEngine) -> Vec<String> {
        calls_starting(engine, "Inspect")
    }

    fn blocked(plan: &Plan) -> Vec<(String, serde_json::Value)> {
        plan.blocked
            .iter()
            .map(|b| (b.object.name.clone(), serde_json::to_value(&b.why).unwrap()))
            .collect()
    }

    fn removed(plan: &Plan) -> Vec<&str> {
        plan.steps.iter().map(|s| s.object.name.as_str()).collect()
    }

    #[tokio::test]
    async fn only_containers_made_after_one_that_goes_are_inspected() {
        let mut world = World::default();
        for i in 0..5 {
            unrelated(&mut world, &format!("before{i}"), 1);
        }
        boxed(&mut world, "a", true, 10);
        unrelated(&mut world, "after", 20);
        let engine = MemoryEngine::new(world);
        let (_, plan) = plan_leaks(&engine).await;
        assert_eq!(removed(&plan), ["sbx-a", "v-a"]);
        assert_eq!(inspects(&engine), ["Inspect(Container) after"]);
    }

    /// The container listings `engine` was asked for: by label or of every
    /// one (`List(Container) `), and of the users of something.
    fn container_listings(engine: &MemoryEngine) -> Vec<String> {
        calls_starting(engine, "List(Container)")
    }

    #[tokio::test]
    async fn only_users_and_younger_running_containers_are_listed_never_every_one() {
        let mut world = World::default();
        unrelated(&mut world, "before", 1);
        // Made before the box and stopped, but it mounts the box's volume.
        let mut user = ContainerInfo::new("user", "user", Labels::new());
        user.mounts.insert("v-a".into());
        user.created_at = at(2);
        user.state = "exited".into();
        world.containers.push(user);
        boxed(&mut world, "a", true, 10);
        unrelated(&mut world, "after", 20);
        let mut stopped = ContainerInfo::new("stopped-after", "stopped-after", Labels::new());
        stopped.created_at = at(21);
        stopped.state = "exited".into();
        world.containers.push(stopped);
        let engine = MemoryEngine::new(world);
        let (inventory, plan) = plan_leaks(&engine).await;
        // The managed containers, then the running ones made after sbx-a, and
        // the users of v-a: no listing of every container.
        assert_eq!(
            container_listings(&engine),
            [
                "List(Container) ",
                "List(Container) users",
                "List(Container) users"
            ]
        );
        let unmanaged: Vec<&str> = inventory
            .unmanaged
            .iter()
            .map(|o| o.key.id.as_str())
            .collect();
        assert_eq!(unmanaged, ["after", "user"]);
        assert_eq!(inspects(&engine), ["Inspect(Container) after"]);
        // The user holds the volume; the container goes.
        assert_eq!(removed(&plan), ["sbx-a"]);
        assert_eq!(blocked(&plan)[0].0, "v-a");
    }

    #[tokio::test]
    async fn every_container_is_listed_when_the_oldest_managed_one_is_not_one() {
        // Two boxes made in the same second: which came first is unknown.
        let mut world = World::default();
        boxed(&mut world, "a", true, 10);
        boxed(&mut world, "b", true, 10);
        unrelated(&mut world, "after", 20);
        let engine = MemoryEngine::new(world);
        plan_leaks(&engine).await;
        let calls = container_listings(&engine);
        assert_eq!(calls.iter().filter(|c| *c == "List(Container) ").count(), 2);
        assert_eq!(inspects(&engine), ["Inspect(Container) after"]);
    }

    #[tokio::test]
    async fn a_failed_users_listing_is_a_failed_container_listing() {
        let mut world = World::default();
        boxed(&mut world, "a", false, 10);
        let engine = MemoryEngine::new(world);
        engine.inject(
            Op::List(Kind::Container),
            Some("users"),
            FaultAction::Fail(EngineError::status_500(
                "list containers using volumes",
                "boom",
            )),
            usize::MAX,
        );
        let (inventory, plan) = plan_leaks(&engine).await;
        assert!(inventory
            .unknown
            .listings
            .contains_key(&Listing::Containers));
        // Nothing can be said of who uses the volume: it stays, named.
        assert!(
            removed(&plan).iter().all(|n| *n != "v-a"),
            "{:?}",
            removed(&plan)
        );
        assert!(blocked(&plan).iter().any(|(n, _)| n == "v-a"));
    }

    #[tokio::test]
    async fn a_swarm_worker_fails_the_swarm_listings_unless_they_are_out_of_scope() {
        use crate::engine::memory::SwarmRole;
        let mut world = World::default();
        boxed(&mut world, "a", false, 10);
        world.swarm = SwarmRole::Worker;
        let engine = MemoryEngine::new(world.clone());
        let (inventory, plan) = plan_leaks(&engine).await;
        let failed: Vec<Listing> = inventory.unknown.listings.keys().copied().collect();
        assert_eq!(
            failed,
            [Listing::Services, Listing::Configs, Listing::Secrets]
        );
        assert_eq!(plan.incomplete.len(), 3, "{:?}", plan.incomplete);
        // What no Swarm object could hold still goes.
        assert_eq!(removed(&plan), ["sbx-a", "v-a"]);
        // `[[engine]] swarm = false`: out of scope, nothing failed.
        let engine = MemoryEngine::new(world);
        let scope = Scope::default().without_swarm_of(["default".to_string()]);
        let (inventory, plan) = plan_once(&engine, &leaks(), &scope, NOW).await.unwrap();
        assert!(inventory.unknown.listings.is_empty());
        assert!(plan.incomplete.is_empty() && plan.swarm_out_of_scope);
        assert!(inventory.swarm_skipped.is_some());
        assert_eq!(plan.scope(), scope);
    }

    #[tokio::test]
    async fn nothing_is_inspected_when_no_container_goes() {
        let mut world = World::default();
        unrelated(&mut world, "x", 20);
        world.volumes.push(VolumeInfo {
            name: "lone".into(),
            labels: box_labels("a"),
            created_at: None,
        });
        let engine = MemoryEngine::new(world);
        plan_leaks(&engine).await;
        assert!(inspects(&engine).is_empty());
    }

    #[tokio::test]
    async fn a_hung_inspect_blocks_only_what_its_container_could_hold() {
        let mut world = World::default();
        boxed(&mut world, "running", true, 10);
        boxed(&mut world, "stopped", false, 10);
        unrelated(&mut world, "locked", 20);
        boxed(&mut world, "younger", true, 30);
        let engine = MemoryEngine::new(world).with_deadline(Duration::from_millis(50));
        hang(&engine, Op::Inspect(Kind::Container), Some("locked"));
        let (inventory, plan) = plan_leaks(&engine).await;
        // The stopped box's ipc namespace is not shareable (learnt by
        // inspecting it) and a running container cannot be in the pid
        // namespace of a stopped one; the younger box is younger than the
        // locked container.
        assert_eq!(
            removed(&plan),
            ["sbx-stopped", "sbx-younger", "v-stopped", "v-younger"]
        );
        let blocked = blocked(&plan);
        assert_eq!(blocked.len(), 2, "{blocked:?}");
        assert_eq!(blocked[0].0, "sbx-running");
        assert_eq!(blocked[0].1["code"], "holderUnknown");
        assert_eq!(blocked[0].1["holder"]["id"], "locked");
        assert!(blocked[0].1["error"]
            .as_str()
            .unwrap()
            .contains("inspect container locked"));
        assert_eq!(blocked[1].0, "v-running");
        assert_eq!(blocked[1].1["code"], "waitsForBlocked");
        assert_eq!(
            plan.incomplete,
            ["could not inspect container locked (locked): inspect container locked: no answer within 1s; the engine is hung or overloaded (raise --call-timeout for a listing or an inspect, --timeout for a change, to wait longer)"]
        );
        assert_eq!(inventory.unknown.containers.len(), 1);
        assert_eq!(
            inspects(&engine),
            ["Inspect(Container) c-stopped", "Inspect(Container) locked"]
        );
    }

    #[tokio::test]
    async fn a_shareable_stopped_container_stays_when_its_possible_joiner_is_unknown() {
        let mut world = World::default();
        boxed(&mut world, "shared", false, 10);
        world.containers[0].ipc_mode = Some("shareable".into());
        unrelated(&mut world, "locked", 20);
        let (_, plan) = plan_hung(world, Op::Inspect(Kind::Container), Some("locked")).await;
        assert!(plan.steps.is_empty());
        assert_eq!(blocked(&plan)[0].1["code"], "holderUnknown");
    }

    #[tokio::test]
    async fn a_hung_network_listing_blocks_no_container_or_volume() {
        let mut world = World::default();
        boxed(&mut world, "a", true, 10);
        let (_, plan) = plan_hung(world, Op::List(Kind::Network), None).await;
        assert_eq!(removed(&plan), ["sbx-a", "v-a"]);
        assert_eq!(
            plan.incomplete,
            ["could not list networks: list networks: no answer within 1s; the engine is hung or overloaded (raise --call-timeout for a listing or an inspect, --timeout for a change, to wait longer)"]
        );
    }

    #[tokio::test]
    async fn a_hung_container_listing_blocks_every_volume_and_network() {
        let mut world = World::default();
        boxed(&mut world, "a", true, 10);
        let (_, plan) = plan_hung(world, Op::List(Kind::Container), None).await;
        assert!(plan.steps.is_empty());
        let blocked = blocked(&plan);
        assert_eq!(blocked.len(), 1);
        assert_eq!(blocked[0].0, "v-a");
        assert_eq!(blocked[0].1["code"], "listingFailed");
        assert_eq!(blocked[0].1["listing"], "containers");
    }

    #[tokio::test]
    async fn a_memo_spares_later_discoveries_what_they_know() {
        let mut world = World::default();
        boxed(&mut world, "a", true, 10);
        unrelated(&mut world, "answers", 20);
        unrelated(&mut world, "locked", 20);
        let engine = MemoryEngine::new(world).with_deadline(Duration::from_millis(50));
        hang(&engine, Op::Inspect(Kind::Container), Some("locked"));
        let memo = Memo::default();
        memo.begin(engine.name());
        let (goal, scope) = (leaks(), Scope::default());
        let plan = |memo| plan_with(&engine, &goal, &scope, NOW, memo);
        let (_, first) = plan(&memo).await.unwrap();
        assert_eq!(
            inspects(&engine),
            ["Inspect(Container) answers", "Inspect(Container) locked"]
        );
        // The same run (its verification): nothing is asked again, and the
        // locked container is still unknown.
        let (_, again) = plan(&memo).await.unwrap();
        assert_eq!(inspects(&engine).len(), 2);
        assert_eq!(again.blocked, first.blocked);
        // The next cycle asks the locked one again, never the one that answered.
        memo.begin(engine.name());
        plan(&memo).await.unwrap();
        assert_eq!(
            inspects(&engine),
            [
                "Inspect(Container) answers",
                "Inspect(Container) locked",
                "Inspect(Container) locked"
            ]
        );
        assert_eq!(memo.known(), 1);
    }

    #[tokio::test]
    async fn an_inspection_the_listing_proves_harmless_is_no_failure() {
        let mut world = World::default();
        boxed(&mut world, "stopped", false, 10);
        unrelated(&mut world, "locked", 20);
        let (_, plan) = plan_hung(world, Op::Inspect(Kind::Container), Some("locked")).await;
        assert_eq!(removed(&plan), ["sbx-stopped", "v-stopped"]);
        assert!(plan.blocked.is_empty() && plan.incomplete.is_empty());
    }
}
