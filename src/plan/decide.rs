//! The rules: what happens to one object and why (remove, keep or block,
//! with a `Reason`), what a box's users and tasks change about it, and the
//! order of removals (a stable topological sort of the removal graph).
//!
//! Pure: a function of the goal, the inventory and the time given. Must not
//! do I/O, read the clock, or turn reasons into words (that is `render`).
//!
//! A little over 700 lines on purpose: one job, the rules, whose parts
//! (each object's own verdict, what its users and tasks change, the order)
//! read one another's results and are clearer side by side.

use std::collections::{BTreeMap, BTreeSet};

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::Direction;

use crate::model::time::rfc3339;
use crate::model::{Kind, Listing, Natural, Object, ObjectKey, Reason, Ref};
use crate::plan::inventory::{Holder, Inventory};
use crate::plan::lease::Leases;
use crate::plan::{DeclaredBox, Entry, Goal, Kept, KeptVolume, Noted, Plan, Read, Retained, Step};

/// A volume archived before it goes is read through the box's own container
/// when exactly one listed container mounts it, that container goes in this
/// plan, is not a helper, and the engine said where it mounts the volume:
/// the container's step stops it, reads the volume, then removes it (the
/// volume's step already waits for it). Otherwise a helper reads the volume
/// once its users are gone. The container's step takes the volume's `archive`.
fn read_through_users(steps: &mut [Step], objects: &[&Object]) {
    let at: BTreeMap<ObjectKey, usize> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.object.key(), i))
        .collect();
    for v in 0..steps.len() {
        if steps[v].object.kind != Kind::Volume || steps[v].archive.is_none() {
            continue;
        }
        let key = steps[v].object.key();
        let users: Vec<&&Object> = objects
            .iter()
            .filter(|o| o.kind() == Kind::Container && o.depends_on.contains(&key))
            .collect();
        let [user] = users[..] else { continue };
        if is_archive_helper(user) {
            continue;
        }
        let Some(path) = user.mounts.get(&steps[v].object.name) else {
            continue;
        };
        if crate::model::mount_root(path).is_none() {
            continue;
        }
        let Some(&c) = at.get(&user.key) else {
            continue;
        };
        let read = Read {
            step: steps[v].step,
            volume: steps[v].object.name.clone(),
            path: path.clone(),
        };
        steps[c].reads.push(read);
        steps[c].archive = steps[v].archive.clone();
        steps[v].archived_by = Some(steps[c].step);
    }
}

/// True for a helper container a run made to archive or restore a volume.
fn is_archive_helper(o: &Object) -> bool {
    o.kind() == Kind::Container
        && o.labels.get(crate::model::ROLE_LABEL).map(String::as_str)
            == Some(crate::model::ARCHIVE_HELPER_ROLE)
}

fn on_engine(entry: &Option<String>, engine: &str) -> bool {
    entry.as_deref().is_none_or(|e| e == engine)
}

/// What happens to one object.
#[derive(Debug, Clone)]
enum Verdict {
    Remove(Reason),
    Keep(Reason),
    Block(Reason),
}

/// Spreads a verdict to a fixpoint: from each object whose verdict `from`
/// picks to what it depends on and the service it is a task of (`owners`),
/// while that is still to be removed. `to(i, j, task, verdicts)` is the
/// verdict that object `j` gets from `i` (`task`: `i` is a task of `j`).
fn spread(
    verdicts: &mut [Verdict],
    depends: &[Vec<usize>],
    owners: &[Vec<usize>],
    from: impl Fn(&Verdict) -> bool,
    mut to: impl FnMut(usize, usize, bool, &[Verdict]) -> Verdict,
) {
    let mut stack: Vec<usize> = (0..verdicts.len())
        .filter(|&i| from(&verdicts[i]))
        .collect();
    while let Some(i) = stack.pop() {
        for &j in depends[i].iter().chain(&owners[i]) {
            if !matches!(verdicts[j], Verdict::Remove(_)) {
                continue;
            }
            verdicts[j] = to(i, j, owners[i].contains(&j), verdicts);
            stack.push(j);
        }
    }
}

/// The goal's declared boxes and kept volumes by ID and name, so that each
/// object's verdict is a lookup, not a scan.
struct GoalIndex<'g> {
    boxes: foldhash::HashMap<&'g str, Vec<&'g DeclaredBox>>,
    kept: foldhash::HashMap<&'g str, Vec<&'g KeptVolume>>,
}

impl<'g> GoalIndex<'g> {
    fn of(goal: &'g Goal) -> Self {
        let (boxes, kept): (&[DeclaredBox], &[KeptVolume]) = match goal {
            Goal::Reconcile {
                boxes,
                keep_volumes,
                ..
            } => (boxes, keep_volumes),
            Goal::Destroy { keep_volumes, .. } => (&[], keep_volumes),
        };
        let mut index = GoalIndex {
            boxes: foldhash::HashMap::default(),
            kept: foldhash::HashMap::default(),
        };
        for b in boxes {
            index.boxes.entry(b.id.as_str()).or_default().push(b);
        }
        for k in kept {
            index.kept.entry(k.name.as_str()).or_default().push(k);
        }
        index
    }

    /// The declaration of box `id` on `engine`, if any.
    fn declared(&self, id: &str, engine: &str) -> Option<&'g DeclaredBox> {
        entry_on(&self.boxes, id, engine, |d| &d.engine)
    }

    /// The `volumes.keep` entry for volume `name` on `engine`, if any.
    fn kept(&self, name: &str, engine: &str) -> Option<&'g KeptVolume> {
        entry_on(&self.kept, name, engine, |k| &k.engine)
    }
}

/// The entry of `by_key` under `key` that holds on `engine` (`entry_engine`:
/// the engine an entry is limited to), if any.
fn entry_on<'g, T>(
    by_key: &foldhash::HashMap<&'g str, Vec<&'g T>>,
    key: &str,
    engine: &str,
    entry_engine: impl Fn(&T) -> &Option<String>,
) -> Option<&'g T> {
    by_key
        .get(key)?
        .iter()
        .copied()
        .find(|e| on_engine(entry_engine(e), engine))
}

/// Creation times that grace and expiry are judged by.
struct Ages<'i> {
    /// Per box: the earliest creation of its containers (else of any of its objects).
    box_start: foldhash::HashMap<&'i str, i64>,
    /// Per object: its own creation, or for a volume or network used by managed
    /// containers, the newest of theirs; for a lease volume, its box's start.
    effective: foldhash::HashMap<&'i ObjectKey, i64>,
}

impl<'i> Ages<'i> {
    /// The ages `goal` needs: none unless it has a grace period or a `ttl`.
    fn of(inv: &'i Inventory, goal: &Goal) -> Ages<'i> {
        let mut ages = Ages {
            box_start: foldhash::HashMap::default(),
            effective: foldhash::HashMap::default(),
        };
        let needed = match goal {
            Goal::Reconcile { boxes, grace, .. } => {
                grace.is_some() || boxes.iter().any(|b| b.ttl.is_some())
            }
            Goal::Destroy { .. } => false,
        };
        if !needed {
            return ages;
        }
        let mut box_any: foldhash::HashMap<&str, i64> = foldhash::HashMap::default();
        let mut users_newest: foldhash::HashMap<&ObjectKey, i64> = foldhash::HashMap::default();
        for o in inv.objects.values() {
            let Some(created) = o.created else { continue };
            if is_archive_helper(o) {
                // A leftover helper makes nothing younger.
                continue;
            }
            if let Some(b) = o.box_id() {
                let map = if o.kind() == Kind::Container {
                    &mut ages.box_start
                } else {
                    &mut box_any
                };
                let e = map.entry(b).or_insert(created);
                *e = (*e).min(created);
            }
            if matches!(o.kind(), Kind::Container | Kind::Service) {
                for d in &o.depends_on {
                    let e = users_newest.entry(d).or_insert(created);
                    *e = (*e).max(created);
                }
            }
        }
        for (b, t) in box_any {
            ages.box_start.entry(b).or_insert(t);
        }
        for o in inv.objects.values() {
            let used = users_newest.get(&o.key).copied();
            // A lease volume stands for its box's driver, not for data: its
            // grace counts from its box's start, so that a lease that ran out
            // goes with its box rather than by its own (younger) age.
            let lease_of_box = o
                .labels
                .contains_key(crate::model::lease::LEASE_TTL_LABEL)
                .then(|| o.box_id().and_then(|b| ages.box_start.get(b).copied()))
                .flatten();
            if let Some(t) = used.or(lease_of_box).or(o.created) {
                ages.effective.insert(&o.key, t);
            }
        }
        ages
    }
}

impl Goal {
    /// looking at who uses it).
    fn verdict(
        &self,
        o: &Object,
        ages: &Ages,
        now: i64,
        index: &GoalIndex,
        leases: &Leases,
    ) -> Verdict {
        let engine = o.key.engine.as_str();
        let box_id = o.box_id();
        match self {
            Goal::Reconcile { .. } if is_archive_helper(o) => {
                // Made by a run that did not get to remove it (a crash): it
                // holds nothing, and the volume it mounts waits for it. (A
                // `destroy ID` takes it only with its box, as anything else.)
                Verdict::Remove(Reason::ArchiveHelper)
            }
            Goal::Reconcile { grace, .. } => {
                if o.kind() == Kind::Volume {
                    if let Some(k) = index.kept(&o.name, engine) {
                        return Verdict::Keep(Reason::KeptByFile { line: k.line });
                    }
                }
                let declared = box_id.and_then(|b| index.declared(b, engine));
                let leaked = match (box_id, declared) {
                    (Some(b), Some(d)) => {
                        let start = ages.box_start.get(b).copied();
                        let end = match (d.expires, d.ttl, start) {
                            (Some(at), _, _) => Some(at),
                            (None, Some(ttl), Some(start)) => {
                                Some(start.saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX)))
                            }
                            _ => None,
                        };
                        match end {
                            Some(end) if now >= end => {
                                return Verdict::Remove(Reason::Expired {
                                    box_id: b.to_string(),
                                    at: rfc3339(end),
                                })
                            }
                            _ => {
                                return Verdict::Keep(Reason::DeclaredBox {
                                    box_id: b.to_string(),
                                    expires: end.map(rfc3339),
                                    line: d.line,
                                })
                            }
                        }
                    }
                    (Some(b), None) => Reason::BoxNotDeclared {
                        box_id: b.to_string(),
                    },
                    (None, _) => Reason::NoBoxLabel,
                };
                // A live lease ranks as grace does: it keeps an undeclared
                // box (never an unlabeled object, never a declared box past
                // its expiry), whatever its age.
                if let Some(held) = box_id.and_then(|b| leases.held.get(b)) {
                    return Verdict::Keep(Reason::Leased {
                        box_id: box_id.unwrap_or_default().to_string(),
                        until: rfc3339(held.until),
                        lease: held.lease.clone(),
                    });
                }
                let young = grace.zip(ages.effective.get(&o.key)).and_then(|(g, &t)| {
                    let until = t.saturating_add(i64::try_from(g).unwrap_or(i64::MAX));
                    (now < until).then_some(until)
                });
                match young {
                    Some(until) => Verdict::Keep(Reason::WithinGrace {
                        until: rfc3339(until),
                    }),
                    None => Verdict::Remove(leaked),
                }
            }
            Goal::Destroy {
                ids, keep_volume, ..
            } => {
                if o.kind() == Kind::Volume {
                    if let Some(k) = index.kept(&o.name, engine) {
                        return Verdict::Keep(Reason::KeptByFile { line: k.line });
                    }
                }
                match box_id {
                    Some(b) if ids.contains(b) => {
                        // A lease is not data: `--keep-volume` keeps the box's
                        // volumes, never its lease (the box is ending).
                        let lease = o.labels.contains_key(crate::model::lease::LEASE_TTL_LABEL);
                        if *keep_volume && o.kind() == Kind::Volume && !lease {
                            Verdict::Keep(Reason::KeepVolumeFlag)
                        } else {
                            Verdict::Remove(Reason::DestroyRequested {
                                box_id: b.to_string(),
                                leased_until: leases.held.get(b).map(|h| rfc3339(h.until)),
                            })
                        }
                    }
                    _ => Verdict::Keep(Reason::NotNamedByDestroy),
                }
            }
        }
    }
}

fn holder_refs(holders: &[Holder]) -> Vec<Ref> {
    holders
        .iter()
        .map(|h| Ref {
            kind: h.kind,
            id: Some(h.id.clone()),
            name: h.name.clone(),
            how: Some(h.how.as_str().to_string()),
        })
        .collect()
}

fn object_ref(o: &Object, how: Option<&str>) -> Ref {
    Ref {
        kind: o.kind(),
        id: o.kind().has_id().then(|| o.key.id.clone()),
        name: o.name.clone(),
        how: how.map(str::to_string),
    }
}

/// How a dependent uses what it depends on, in words for a `Ref`.
fn use_of(dependent: &Object, dependency: &Object) -> &'static str {
    match (dependent.kind(), dependency.kind()) {
        (Kind::Service, Kind::Container) => "runs it as a task",
        (_, Kind::Container) => dependent
            .joins
            .first()
            .map(|j| crate::plan::inventory::Use::Joins(j.namespace).as_str())
            .unwrap_or("joins its namespace"),
        (_, kind) => crate::plan::inventory::Use::of(kind).as_str(),
    }
}

/// How a reason names a task container that keeps or blocks its service.
const TASK_OF_IT: &str = "a task of it";

/// For a managed container an orchestrator owns: the owner, unless that owner
/// is a managed Swarm service (its removal takes the container), or a Swarm
/// service that a manager's listing shows is gone (nothing recreates the
/// container any more).
fn foreign_owner(o: &Object, inv: &Inventory) -> Option<crate::model::Owner> {
    if o.kind() != Kind::Container {
        return None;
    }
    let owner = crate::model::Owner::of(&o.labels)?;
    if let Some(service) = crate::model::Owner::swarm_service(&o.labels) {
        let key = ObjectKey::new(&o.key.engine, Kind::Service, service);
        if inv.objects.contains_key(&key) {
            return None;
        }
        let listed = inv.swarm_skipped.is_none();
        let exists = inv.unmanaged.iter().any(|u| u.key == key);
        if listed && !exists {
            return None;
        }
    }
    Some(owner)
}

/// Why `o`, which would be removed for `why`, must stay because of what
/// discovery could not learn (`inv.unknown`), if it must:
/// - the containers could not be listed: a container (unmanaged, or not
///   seen) could use any container, volume or network;
/// - the services could not be listed: a service could use a network,
///   config or secret, or own a task container;
/// - the volumes (or the engine's clock, with a lease listed) could not be
///   read: a lease could keep an undeclared box;
/// - a container whose inspection failed could share this container's pid
///   or ipc namespace (`inventory::could_hold`).
///
/// A failed listing of networks, images, configs or secrets blocks nothing
/// of the other kinds.
fn unknown_block(o: &Object, why: &Reason, inv: &Inventory) -> Option<Reason> {
    let failed = |listing: Listing| {
        inv.unknown
            .listings
            .get(&listing)
            .map(|e| Reason::ListingFailed {
                listing,
                error: e.to_string(),
            })
    };
    let kind = o.kind();
    if matches!(kind, Kind::Container | Kind::Volume | Kind::Network) {
        if let Some(r) = failed(Listing::Containers) {
            return Some(r);
        }
    }
    let task = kind == Kind::Container && crate::model::Owner::swarm_service(&o.labels).is_some();
    if matches!(kind, Kind::Network | Kind::Config | Kind::Secret) || task {
        if let Some(r) = failed(Listing::Services) {
            return Some(r);
        }
    }
    if let (Reason::BoxNotDeclared { box_id }, false) = (why, is_archive_helper(o)) {
        if let Some(r) = failed(Listing::Volumes) {
            return Some(r);
        }
        // The box's lease volumes are looked for only when the clock failed
        // (a scan of the inventory per object otherwise, on every plan).
        if let Some(r) = failed(Listing::Clock) {
            let leased = inv.objects.values().any(|v| {
                v.kind() == Kind::Volume
                    && v.box_id() == Some(box_id.as_str())
                    && v.labels.contains_key(crate::model::lease::LEASE_TTL_LABEL)
            });
            if leased {
                return Some(r);
            }
        }
    }
    if kind == Kind::Container {
        for (key, error) in &inv.unknown.containers {
            let Some(holder) = inv.container(key) else {
                continue;
            };
            if holder.key != o.key && crate::plan::inventory::could_hold(holder, o) {
                return Some(Reason::HolderUnknown {
                    holder: object_ref(holder, None),
                    error: error.to_string(),
                });
            }
        }
    }
    None
}

/// The plan's `incomplete`, in words: every failed listing (what it would
/// have shown is unknown), and every failed inspection that blocks an object
/// (`blocked`); one that the listing proved harmless blocks nothing and is
/// no failure.
fn incomplete(inv: &Inventory, blocked: &[Noted]) -> Vec<String> {
    let listings = inv
        .unknown
        .listings
        .iter()
        .map(|(listing, e)| format!("could not list {listing}: {e}"));
    let holding: BTreeSet<&str> = blocked
        .iter()
        .filter_map(|b| match &b.why {
            Reason::HolderUnknown { holder, .. } => holder.id.as_deref(),
            _ => None,
        })
        .collect();
    let needed = inv
        .unknown
        .containers
        .iter()
        .filter(|(key, _)| holding.contains(key.id.as_str()));
    let inspections = needed.map(|(key, e)| {
        let name = inv.container(key).map_or("", |c| c.name.as_str());
        format!(
            "could not inspect container {name} ({}): {e}",
            crate::model::short_id(&key.id)
        )
    });
    let mut all: Vec<String> = listings.chain(inspections).collect();
    all.sort();
    all
}

impl Plan {
    /// Everything but the basis and its fingerprint (left empty).
    pub(super) fn decide(goal: &Goal, inv: &Inventory, now: i64) -> Plan {
        let ages = Ages::of(inv, goal);
        let goal_index = GoalIndex::of(goal);
        let leases = Leases::of(inv, now, goal.max_lease());
        // Objects in a readable order: by kind, then box, then name (both in
        // natural order: cb2 before cb10), then key.
        let mut objects: Vec<&Object> = inv.objects.values().collect();
        objects.sort_by_cached_key(|&o| {
            (
                o.kind(),
                o.box_id().map(Natural),
                Natural(o.name.as_str()),
                &o.key,
            )
        });
        let mut index: foldhash::HashMap<&ObjectKey, usize> =
            foldhash::HashMap::with_capacity_and_hasher(objects.len(), Default::default());
        index.extend(objects.iter().enumerate().map(|(i, o)| (&o.key, i)));
        // What each object depends on (managed objects only), by position,
        // looked up once; and who depends on each.
        let depends: Vec<Vec<usize>> = objects
            .iter()
            .map(|o| {
                let mut d: Vec<usize> = o
                    .depends_on
                    .iter()
                    .filter_map(|d| index.get(d).copied())
                    .collect();
                d.sort_unstable();
                d.dedup();
                d
            })
            .collect();
        drop(index);
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); objects.len()];
        for (i, ds) in depends.iter().enumerate() {
            for &j in ds {
                dependents[j].push(i);
            }
        }

        let mut verdicts: Vec<Verdict> = objects
            .iter()
            .map(|o| goal.verdict(o, &ages, now, &goal_index, &leases))
            .collect();
        // Precedence, so that a verdict never depends on the order of the
        // walk nor on whether containers were inspected for shared
        // namespaces: kept over blocked over removed. First, what a kept
        // object depends on is kept (to a fixpoint).
        // A managed service's removal takes its task containers: a task
        // container that stays keeps (or blocks) its service as well.
        let owners: Vec<Vec<usize>> = objects
            .iter()
            .enumerate()
            .map(|(i, o)| {
                if o.kind() != Kind::Container {
                    return Vec::new();
                }
                dependents[i]
                    .iter()
                    .copied()
                    .filter(|&s| objects[s].kind() == Kind::Service)
                    .collect()
            })
            .collect();
        let task_ref = |i: usize| object_ref(objects[i], Some(TASK_OF_IT));
        let is_kept = |v: &Verdict| matches!(v, Verdict::Keep(_));
        spread(
            &mut verdicts,
            &depends,
            &owners,
            is_kept,
            |i, j, task, verdicts| {
                let holders: Vec<Ref> = if task {
                    vec![task_ref(i)]
                } else {
                    dependents[j]
                        .iter()
                        .filter(|&&u| is_kept(&verdicts[u]))
                        .map(|&u| object_ref(objects[u], Some(use_of(objects[u], objects[j]))))
                        .collect()
                };
                Verdict::Keep(Reason::MountedByKept { holders })
            },
        );
        // Blocked: something outside the managed set uses it.
        for (i, o) in objects.iter().enumerate() {
            if !matches!(verdicts[i], Verdict::Remove(_)) {
                continue;
            }
            if let Some(holders) = inv.holders.get(&o.key) {
                verdicts[i] = Verdict::Block(Reason::HeldByUnmanaged {
                    holders: holder_refs(holders),
                });
            } else if let Some(owner) = foreign_owner(o, inv) {
                // Removed directly, it would be recreated by its orchestrator.
                verdicts[i] = Verdict::Block(Reason::OwnedByOrchestrator { owner });
            }
        }
        // Blocked: what discovery could not learn could affect it.
        for (i, o) in objects.iter().enumerate() {
            if let Verdict::Remove(why) = &verdicts[i] {
                if let Some(reason) = unknown_block(o, why, inv) {
                    verdicts[i] = Verdict::Block(reason);
                }
            }
        }
        // What a blocked object depends on is blocked (it cannot go while its
        // user stays), to a fixpoint.
        let is_blocked = |v: &Verdict| matches!(v, Verdict::Block(_));
        spread(
            &mut verdicts,
            &depends,
            &owners,
            is_blocked,
            |i, j, task, _| {
                let object = if task {
                    task_ref(i)
                } else {
                    object_ref(objects[i], Some(use_of(objects[i], objects[j])))
                };
                Verdict::Block(Reason::WaitsForBlocked { object })
            },
        );

        let mut graph: DiGraph<usize, ()> = DiGraph::new();
        let mut node: Vec<Option<NodeIndex>> = vec![None; objects.len()];
        let mut kept = Kept::default();
        let mut blocked = Vec::new();
        let mut why: Vec<Option<Reason>> = Vec::new();
        for (i, (o, v)) in objects.iter().zip(verdicts).enumerate() {
            match v {
                Verdict::Remove(reason) => {
                    node[i] = Some(graph.add_node(i));
                    why.push(Some(reason));
                }
                Verdict::Keep(reason) => kept.push(
                    o.kind(),
                    Noted {
                        object: Entry::of(o),
                        why: reason,
                    },
                ),
                Verdict::Block(reason) => blocked.push(Noted {
                    object: Entry::of(o),
                    why: reason,
                }),
            }
        }
        for (i, ds) in depends.iter().enumerate() {
            let Some(from) = node[i] else { continue };
            for to in ds.iter().filter_map(|&j| node[j]) {
                // Removal edge: the user goes before what it uses (each once).
                graph.add_edge(from, to, ());
            }
        }

        let (order, cyclic) = stable_toposort(&graph);
        let mut position = vec![0; graph.node_count()];
        for (i, n) in order.iter().enumerate() {
            position[n.index()] = i + 1;
        }
        let mut steps: Vec<Step> = order
            .iter()
            .map(|&n| {
                let mut waits_for: Vec<usize> = graph
                    .neighbors_directed(n, Direction::Incoming)
                    .map(|d| position[d.index()])
                    .collect();
                waits_for.sort_unstable();
                let object = objects[graph[n]];
                Step {
                    step: position[n.index()],
                    object: Entry::of(object),
                    why: why[n.index()].take().expect("each node once"),
                    waits_for,
                    archive: goal.archive().and_then(|a| a.dir_for(object)),
                    reads: Vec::new(),
                    archived_by: None,
                }
            })
            .collect();
        steps.sort_by_key(|s| s.step);
        read_through_users(&mut steps, &objects);
        // Only an engine that reports impossible namespace joins makes a cycle;
        // such objects are not ordered, so they are not attempted.
        for n in cyclic {
            blocked.push(Noted {
                object: Entry::of(objects[graph[n]]),
                why: Reason::Changed {
                    detail: "the engine reports a cycle of namespace joins".into(),
                },
            });
        }

        let scope = inv.scope.all_labels();
        let incomplete = incomplete(inv, &blocked);
        let unknown_boxes = match goal {
            Goal::Destroy { ids, .. } => {
                let present = inv.box_ids();
                ids.iter()
                    .filter(|id| !present.contains(id.as_str()))
                    .cloned()
                    .collect()
            }
            Goal::Reconcile { .. } => Vec::new(),
        };
        Plan {
            version: None,
            engine: inv.engine.clone(),
            endpoint: None,
            scope,
            swarm_out_of_scope: !inv.scope.lists_swarm(&inv.engine),
            goal: goal.clone(),
            now: rfc3339(now),
            steps,
            blocked,
            kept,
            retained: Retained {
                images: inv.images.values().cloned().collect(),
            },
            leases: leases.notes,
            engine_clock: leases.clock,
            incomplete,
            unknown_boxes,
            fingerprint: String::new(),
            basis: BTreeMap::new(),
        }
    }
}

/// Kahn's algorithm, always taking the lowest-numbered ready node, so the order
/// is a deterministic function of insertion order (sorted objects, containers
/// first). Returns the order and the nodes left on a cycle.
fn stable_toposort<N>(graph: &DiGraph<N, ()>) -> (Vec<NodeIndex>, Vec<NodeIndex>) {
    let mut indegree: Vec<usize> = graph
        .node_indices()
        .map(|n| graph.neighbors_directed(n, Direction::Incoming).count())
        .collect();
    let mut ready: BTreeSet<NodeIndex> = graph
        .node_indices()
        .filter(|n| indegree[n.index()] == 0)
        .collect();
    let mut order = Vec::with_capacity(graph.node_count());
    while let Some(n) = ready.pop_first() {
        order.push(n);
        for d in graph.neighbors_directed(n, Direction::Outgoing) {
            indegree[d.index()] -= 1;
            if indegree[d.index()] == 0 {
                ready.insert(d);
            }
        }
    }
    let cyclic = graph
        .node_indices()
        .filter(|n| indegree[n.index()] > 0)
        .collect();
    (order, cyclic)
}
