//! The live inventory: what one engine holds that this run manages, and who
//! outside the managed set uses it.
//!
//! Owns building the inventory from what the listings returned (the engine
//! calls are `exec::list`'s), the client-side label check that every listed
//! object must pass before anything downstream may see it, the resolution of
//! what each managed object depends on, and taking in what the inspection of
//! containers for shared pid and ipc namespaces found. Pure: no engine call,
//! no I/O. Must not decide what should go: that is the planner's job.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::model::{
    EngineError, ImageInfo, Join, Kind, Listing, Namespace, Object, ObjectKey, Scope,
};

/// How an unmanaged container uses a managed object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Use {
    /// Mounts the volume.
    Mounts,
    /// Is attached to the network.
    Attached,
    /// Shares the container's namespace (`--network/--pid/--ipc container:`).
    Joins(Namespace),
    /// A service's tasks use the config or secret.
    Uses,
}

impl Use {
    /// `mounts`, `attached`, `joins network namespace`, ...
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Use::Mounts => "mounts",
            Use::Attached => "attached",
            Use::Joins(Namespace::Network) => "joins its network namespace",
            Use::Joins(Namespace::Pid) => "joins its pid namespace",
            Use::Joins(Namespace::Ipc) => "joins its ipc namespace",
            Use::Uses => "uses",
        }
    }

    /// How something uses an object of kind `dependency` it depends on (a
    /// namespace join aside).
    pub(crate) fn of(dependency: Kind) -> Use {
        match dependency {
            Kind::Volume => Use::Mounts,
            Kind::Network => Use::Attached,
            _ => Use::Uses,
        }
    }
}

/// A container (or a Swarm service) outside the managed set that uses a
/// managed object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct Holder {
    pub(crate) kind: Kind,
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) how: Use,
}

/// What one engine's discovery could not learn, and why. Never a reason to
/// fail the engine's whole part: each blocks what it could affect.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unknowns {
    /// Listings that failed (or passed their deadline).
    pub(crate) listings: BTreeMap<Listing, EngineError>,
    /// Containers whose inspection failed, by key: the pid and ipc
    /// namespaces they share are unknown.
    pub(crate) containers: BTreeMap<ObjectKey, EngineError>,
}

/// True if container `o` runs (or is paused or restarting): only then does
/// it share another container's namespace. One that does not run shares
/// none; removing its target only keeps it from starting again.
pub(crate) fn live(o: &Object) -> bool {
    matches!(
        o.state.as_deref(),
        Some("running" | "paused" | "restarting")
    )
}

/// True if `joiner` could share a pid or ipc namespace of `target` (both
/// containers) as far as the listing shows, without an inspection: Docker
/// resolves `container:<name>` to the target's ID when the joiner is created
/// and refuses a target that does not exist then, so a joiner is never older
/// than its target (creation times have one-second steps: the same second
/// counts). An unknown creation time could be anything.
pub(crate) fn could_join(joiner: &Object, target: &Object) -> bool {
    match (joiner.created, target.created) {
        (Some(j), Some(t)) => j >= t,
        _ => true,
    }
}

/// True if `holder`, whose inspection failed, could hold managed container
/// `target` through a shared pid or ipc namespace. Beside [`could_join`]:
/// only a [`live`] container holds a namespace; a live container cannot be
/// in the pid namespace of one that is not (its processes die with the
/// namespace's first process); and only a target whose ipc namespace is
/// shareable (`ipc_shareable`, known once the target was inspected) can be
/// joined for ipc.
pub(crate) fn could_hold(holder: &Object, target: &Object) -> bool {
    if !live(holder) || !could_join(holder, target) {
        return false;
    }
    let pid = live(target);
    let ipc = target.ipc_shareable != Some(false);
    pid || ipc
}

/// The managed objects of one engine, as one listing of each kind saw them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    /// The engine's name (every key below carries it).
    pub(crate) engine: String,
    pub(crate) scope: Scope,
    /// Managed objects of every kind, by key.
    pub(crate) objects: BTreeMap<ObjectKey, Object>,
    /// `ca-sbx:*` images, by ID. Reported as retained, never removed.
    pub(crate) images: BTreeMap<String, ImageInfo>,
    /// For each managed object an unmanaged container uses: those containers.
    pub(crate) holders: BTreeMap<ObjectKey, Vec<Holder>>,
    /// Unmanaged containers (to find holders; inspected on demand), and
    /// unmanaged Swarm services (holders of the networks, configs and
    /// secrets their tasks use).
    pub(crate) unmanaged: Vec<Object>,
    /// Whether the Swarm kinds were listed: `None` when they were, else why
    /// not (the engine is not a swarm manager: `ErrorKind::NoSwarm`); a
    /// worker's is said once as a note.
    pub swarm_skipped: Option<crate::model::EngineError>,
    /// Containers (managed or not, by ID) already inspected for the pid and
    /// ipc namespaces they share: each is inspected once.
    pub(crate) inspected: BTreeSet<String>,
    /// What discovery could not learn: failed listings, and containers whose
    /// inspection failed. The planner blocks exactly what each could affect.
    pub(crate) unknown: Unknowns,
    /// Objects the engine returned for the label filter that failed the client-side
    /// check (a daemon that ignored the filter). Never acted on; reported as a warning.
    pub rejected: Vec<ObjectKey>,
    /// How far the engine's clock is ahead of this machine's (milliseconds;
    /// negative: behind), read when a listed volume carries a lease label.
    /// Leases are judged by the engine's clock; `None` means not read.
    pub(crate) skew_ms: Option<i64>,
}

impl Inventory {
    /// Builds the inventory from raw listings. Pure. `listed` is what the engine
    /// returned for the scope's label filter (any kinds); `all` is every
    /// container and every Swarm service (which the run lists unfiltered, in
    /// one call: the managed ones are taken from there). Anything failing
    /// `Scope::manages` is dropped into `rejected`.
    pub fn from_listings(
        engine: &str,
        scope: Scope,
        listed: Vec<Object>,
        all: Vec<Object>,
        images: Vec<ImageInfo>,
    ) -> Inventory {
        let mut inv = Inventory {
            engine: engine.to_string(),
            scope,
            ..Default::default()
        };
        let mut managed = Vec::with_capacity(listed.len());
        let (services, all): (Vec<Object>, Vec<Object>) =
            all.into_iter().partition(|o| o.kind() == Kind::Service);
        let (mine, services): (Vec<Object>, Vec<Object>) = services
            .into_iter()
            .partition(|s| inv.scope.manages(&s.labels));
        managed.extend(mine.into_iter().map(|o| (o.key.clone(), o)));
        for o in listed {
            if inv.scope.manages(&o.labels) {
                managed.push((o.key.clone(), o));
            } else {
                inv.rejected.push(o.key);
            }
        }
        // Built at once (sorted, then bulk-loaded) rather than inserted one by one.
        inv.objects = managed.into_iter().collect();
        inv.unmanaged = all
            .into_iter()
            .filter(|c| !inv.scope.manages(&c.labels))
            .chain(services)
            .collect();
        inv.unmanaged.sort_by(|a, b| a.key.cmp(&b.key));
        for mut i in images {
            i.tags.sort();
            inv.images.insert(i.id.clone(), i);
        }
        inv.rejected.sort();
        inv.rejected.dedup();
        inv.resolve();
        inv
    }

    /// Resolves what depends on what: managed containers that join another
    /// managed container depend on it; unmanaged containers that use a managed
    /// object become its holders. Dependencies on unmanaged objects (the
    /// predefined networks, unlabeled volumes) are dropped: they have no node.
    /// Rewrites the listed dependencies in place (no key is copied unless a
    /// network was named by its name, or a join is resolved).
    fn resolve(&mut self) {
        let take = |o: &mut Object| std::mem::take(&mut o.depends_on);
        let mut managed_deps: Vec<Vec<ObjectKey>> = self.objects.values_mut().map(take).collect();
        let mut unmanaged_deps: Vec<Vec<ObjectKey>> = self.unmanaged.iter_mut().map(take).collect();
        let objects = &self.objects;
        // The container a `container:<target>` join names: by name, or by
        // ID or a prefix of at least 12 characters.
        let any_joins = objects
            .values()
            .chain(&self.unmanaged)
            .any(|o| !o.joins.is_empty());
        let containers: Vec<&Object> = if any_joins {
            objects
                .values()
                .filter(|o| o.kind() == Kind::Container)
                .collect()
        } else {
            Vec::new()
        };
        let target_of = |join: &Join| -> Option<ObjectKey> {
            containers
                .iter()
                .find(|c| {
                    c.name == join.target
                        || (join.target.len() >= 12 && c.key.id.starts_with(&join.target))
                })
                .map(|c| c.key.clone())
        };
        // A network dependency may name the network instead of its ID (a
        // container never started has no endpoint yet).
        let network_ids: HashMap<&str, &ObjectKey> = objects
            .values()
            .filter(|o| o.kind() == Kind::Network)
            .map(|n| (n.name.as_str(), &n.key))
            .collect();
        let keys: foldhash::HashSet<&ObjectKey> = objects.keys().collect();
        // True if `d` is managed, after naming a network by its ID.
        let managed = |d: &mut ObjectKey| -> bool {
            if keys.contains(d) {
                return true;
            }
            match network_ids.get(d.id.as_str()) {
                Some(&key) if d.kind == Kind::Network => {
                    *d = key.clone();
                    true
                }
                _ => false,
            }
        };
        for (o, deps) in objects.values().zip(&mut managed_deps) {
            deps.retain_mut(|d| managed(d) && *d != o.key);
            deps.extend(o.joins.iter().filter_map(target_of).filter(|t| *t != o.key));
        }
        // A managed service goes before the containers of its tasks (its
        // removal takes them): the service depends on each of them here.
        let service_at: HashMap<&str, usize> = objects
            .values()
            .enumerate()
            .filter(|(_, o)| o.kind() == Kind::Service)
            .map(|(i, o)| (o.key.id.as_str(), i))
            .collect();
        // Whose tasks these are, for the containers of a managed service.
        let task_of = |c: &Object| -> Option<usize> {
            if c.kind() != Kind::Container {
                return None;
            }
            crate::model::Owner::swarm_service(&c.labels).and_then(|s| service_at.get(s).copied())
        };
        if !service_at.is_empty() {
            for c in objects.values() {
                if let Some(i) = task_of(c) {
                    managed_deps[i].push(c.key.clone());
                }
            }
        }
        for deps in &mut managed_deps {
            deps.sort_unstable();
            deps.dedup();
        }
        let unmanaged_services: foldhash::HashSet<&str> = self
            .unmanaged
            .iter()
            .filter(|o| o.kind() == Kind::Service)
            .map(|o| o.key.id.as_str())
            .collect();
        let mut holders: BTreeMap<ObjectKey, Vec<Holder>> = BTreeMap::new();
        for (c, deps) in self.unmanaged.iter().zip(&mut unmanaged_deps) {
            // An unlabeled container of a managed service's task goes with
            // the service (whose removal waits for it): it holds nothing.
            if task_of(c).is_some() {
                continue;
            }
            // The container of an unmanaged service's task holds through its
            // service, which is what to remove (the container would come back).
            if c.kind() == Kind::Container
                && crate::model::Owner::swarm_service(&c.labels)
                    .is_some_and(|s| unmanaged_services.contains(s))
            {
                continue;
            }
            let mut uses: Vec<(ObjectKey, Use)> = Vec::new();
            for d in deps.iter_mut() {
                if managed(d) {
                    uses.push((d.clone(), Use::of(d.kind)));
                }
            }
            // A namespace is shared only while the joiner runs (see `live`).
            let joins = c
                .joins
                .iter()
                .filter(|_| live(c))
                .filter_map(|j| Some((target_of(j)?, Use::Joins(j.namespace))));
            for (key, how) in uses.into_iter().chain(joins) {
                holders.entry(key).or_default().push(Holder {
                    kind: c.kind(),
                    id: c.key.id.clone(),
                    name: c.name.clone(),
                    how,
                });
            }
        }
        for users in holders.values_mut() {
            // By kind, then name in natural order (cb2 before cb10).
            users.sort_by(|a, b| {
                (a.kind, crate::model::Natural(&a.name), &a.id, &a.how).cmp(&(
                    b.kind,
                    crate::model::Natural(&b.name),
                    &b.id,
                    &b.how,
                ))
            });
            users.dedup();
        }
        for (o, deps) in self.objects.values_mut().zip(managed_deps) {
            o.depends_on = deps;
        }
        for (c, deps) in self.unmanaged.iter_mut().zip(unmanaged_deps) {
            c.depends_on = deps;
        }
        self.holders = holders;
    }

    /// A container by its key: managed, or an unmanaged one listed.
    pub(crate) fn container(&self, key: &ObjectKey) -> Option<&Object> {
        self.objects.get(key).or_else(|| {
            self.unmanaged
                .binary_search_by(|o| o.key.cmp(key))
                .ok()
                .map(|i| &self.unmanaged[i])
        })
    }

    /// The containers to inspect for the pid and ipc namespaces they share
    /// (which the listing does not show), for the managed containers
    /// `at_stake` (those the plan removes): every container not yet
    /// inspected that [`could_join`] one of them, unmanaged or managed and
    /// staying (`staying`: neither at stake nor removed). Then, for a
    /// container whose inspection failed, the containers at stake whose ipc
    /// mode would decide whether it could hold them (see [`could_hold`]).
    /// Sorted by key; none twice.
    pub(crate) fn to_inspect(
        &self,
        at_stake: &[ObjectKey],
        staying: &[ObjectKey],
    ) -> Vec<ObjectKey> {
        let targets: Vec<&Object> = at_stake
            .iter()
            .filter_map(|k| self.objects.get(k))
            .collect();
        if targets.is_empty() {
            return Vec::new();
        }
        // The oldest target: a container made before it joins none of them.
        let oldest = targets.iter().map(|t| t.created).min().flatten();
        let fresh = |c: &&Object| !self.inspected.contains(&c.key.id);
        let joiner = |c: &&Object| match (c.created, oldest) {
            (Some(made), Some(oldest)) if made < oldest => false,
            _ => targets.iter().any(|t| t.key != c.key && could_join(c, t)),
        };
        let mut keys: BTreeSet<ObjectKey> = self
            .unmanaged
            .iter()
            .filter(|c| c.kind() == Kind::Container && live(c))
            .chain(staying.iter().filter_map(|k| self.objects.get(k)))
            .filter(fresh)
            .filter(joiner)
            .map(|c| c.key.clone())
            .collect();
        for holder in self
            .unknown
            .containers
            .keys()
            .filter_map(|k| self.container(k))
        {
            for t in &targets {
                let decides =
                    t.ipc_shareable.is_none() && could_join(holder, t) && live(holder) && !live(t);
                if decides && !self.inspected.contains(&t.key.id) {
                    keys.insert(t.key.clone());
                }
            }
        }
        keys.into_iter().collect()
    }

    /// Takes what the inspection of `to_inspect` found (containers gone
    /// meanwhile left out; `failed`: those whose inspection failed, with
    /// why) and resolves what depends on what again. Pure.
    pub(crate) fn inspected(
        &mut self,
        asked: &[ObjectKey],
        found: Vec<Object>,
        failed: Vec<(ObjectKey, EngineError)>,
    ) {
        self.inspected.extend(asked.iter().map(|k| k.id.clone()));
        // An unmanaged container asked for and neither found nor failed is
        // gone: it holds nothing any more.
        let answered: BTreeSet<&ObjectKey> = found
            .iter()
            .map(|o| &o.key)
            .chain(failed.iter().map(|(k, _)| k))
            .collect();
        let gone: Vec<ObjectKey> = asked
            .iter()
            .filter(|k| !answered.contains(k) && !self.objects.contains_key(k))
            .cloned()
            .collect();
        drop(answered);
        self.unmanaged.retain(|u| !gone.contains(&u.key));
        for o in found {
            self.unknown.containers.remove(&o.key);
            if let Some(listed) = self.objects.get_mut(&o.key) {
                // Only what the listing could not show: the shared namespaces.
                listed.joins = o.joins;
                listed.ipc_shareable = o.ipc_shareable;
            } else if !self.scope.manages(&o.labels) {
                match self.unmanaged.binary_search_by(|u| u.key.cmp(&o.key)) {
                    Ok(i) => self.unmanaged[i] = o,
                    Err(i) => self.unmanaged.insert(i, o),
                }
            }
        }
        for (key, error) in failed {
            self.unknown.containers.insert(key, error);
        }
        self.resolve();
    }

    /// Takes a fresh listing of every container (made after some
    /// inspections failed; a listing takes no container's lock): a container
    /// whose inspection failed and that is gone now holds nothing, and one
    /// still there is judged by its state now (a container being removed or
    /// stopped no longer runs). Pure.
    pub(crate) fn relisted(&mut self, all: &[Object]) {
        let now: BTreeMap<&ObjectKey, &Object> = all.iter().map(|o| (&o.key, o)).collect();
        let unknown: Vec<ObjectKey> = self.unknown.containers.keys().cloned().collect();
        for key in unknown {
            match now.get(&key) {
                None => {
                    self.unknown.containers.remove(&key);
                    self.unmanaged.retain(|u| u.key != key);
                }
                Some(fresh) => {
                    if let Some(o) = self.objects.get_mut(&key) {
                        o.state.clone_from(&fresh.state);
                    } else if let Ok(i) = self.unmanaged.binary_search_by(|u| u.key.cmp(&key)) {
                        self.unmanaged[i].state.clone_from(&fresh.state);
                    }
                }
            }
        }
    }

    /// Every box ID a managed object carries.
    pub(crate) fn box_ids(&self) -> BTreeSet<&str> {
        self.objects.values().filter_map(Object::box_id).collect()
    }

    /// Managed objects of one kind, in key order.
    pub fn of_kind(&self, kind: Kind) -> impl Iterator<Item = &Object> {
        self.objects.values().filter(move |o| o.kind() == kind)
    }

    /// What a saved plan compares against: one entry per managed object and per
    /// unmanaged use of one, keyed by the object's key (`container/<id>`,
    /// `volume/<name>`, `network/<id>`) or `holder/<key>/<container id>`, valued
    /// with a SHA-256 digest of what matters for removal (name, labels, what it
    /// depends on, creation time; not a container's running state).
    pub(crate) fn basis(&self) -> BTreeMap<String, String> {
        let holders: usize = self.holders.values().map(Vec::len).sum();
        let mut basis = Vec::with_capacity(self.objects.len() + holders);
        let mut h = Fields::default();
        for o in self.objects.values() {
            h.add(o.name.as_bytes());
            h.add(&o.created.unwrap_or(i64::MIN).to_le_bytes());
            h.count(o.labels.len());
            for (k, v) in &o.labels {
                h.add(k.as_bytes());
                h.add(v.as_bytes());
            }
            h.count(o.depends_on.len());
            for d in &o.depends_on {
                h.add(d.engine.as_bytes());
                h.add(d.kind.as_str().as_bytes());
                h.add(d.id.as_bytes());
            }
            basis.push((o.key.to_string(), h.hex()));
        }
        for (key, users) in &self.holders {
            for u in users {
                h.add(u.name.as_bytes());
                h.add(u.how.as_str().as_bytes());
                basis.push((format!("holder/{key}/{}", u.id), h.hex()));
            }
        }
        // Built at once from the sorted entries rather than inserted one by one.
        basis.into_iter().collect()
    }
}

/// SHA-256 over length-prefixed fields, so that no two field lists hash alike.
/// The fields are gathered in a buffer and hashed at once; one `Fields` serves
/// object after object.
#[derive(Default)]
struct Fields(Vec<u8>);

impl Fields {
    fn add(&mut self, field: &[u8]) {
        self.0
            .extend_from_slice(&(field.len() as u64).to_le_bytes());
        self.0.extend_from_slice(field);
    }

    fn count(&mut self, n: usize) {
        self.add(&(n as u64).to_le_bytes());
    }

    /// The digest of the fields added since the last call, in hex.
    fn hex(&mut self) -> String {
        let digest = Sha256::digest(&self.0);
        self.0.clear();
        crate::model::hex(&digest)
    }
}

/// The fingerprint of a basis: `sha256:` and the digest of its entries.
pub(crate) fn fingerprint(basis: &BTreeMap<String, String>) -> String {
    format!(
        "sha256:{}",
        digest(basis.iter().flat_map(|(k, v)| [k.as_str(), v.as_str()]))
    )
}

/// SHA-256 over length-prefixed fields, in hex.
fn digest<'a>(fields: impl IntoIterator<Item = &'a str>) -> String {
    let mut h = Fields::default();
    for field in fields {
        h.add(field.as_bytes());
    }
    h.hex()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{labels, Labels, DEFAULT_ENGINE};

    fn container(id: &str, l: Labels, mounts: &[&str]) -> Object {
        let mut o = Object::new(DEFAULT_ENGINE, Kind::Container, id, &format!("n-{id}"));
        o.labels = l;
        o.state = Some("running".into());
        o.depends_on = mounts
            .iter()
            .map(|m| ObjectKey::new(DEFAULT_ENGINE, Kind::Volume, m))
            .collect();
        o
    }

    fn volume(name: &str, l: Labels) -> Object {
        let mut o = Object::new(DEFAULT_ENGINE, Kind::Volume, name, name);
        o.labels = l;
        o
    }

    #[test]
    fn a_network_named_by_its_name_is_resolved_to_its_id_and_others_are_dropped() {
        let managed = labels(&[("ca.sandbox", "1")]);
        let mut net = Object::new(DEFAULT_ENGINE, Kind::Network, "n1id", "box-net");
        net.labels = managed.clone();
        let mut c = container("c", managed, &["v"]);
        c.depends_on = vec![
            ObjectKey::new(DEFAULT_ENGINE, Kind::Network, "box-net"),
            ObjectKey::new(DEFAULT_ENGINE, Kind::Network, "bridge"),
            ObjectKey::new(DEFAULT_ENGINE, Kind::Volume, "unlabeled"),
        ];
        let mut foreign = container("f", Labels::new(), &[]);
        foreign.depends_on = vec![ObjectKey::new(DEFAULT_ENGINE, Kind::Network, "box-net")];
        let inv = Inventory::from_listings(
            DEFAULT_ENGINE,
            Scope::default(),
            vec![c.clone(), net],
            vec![c, foreign],
            vec![],
        );
        let nkey = ObjectKey::new(DEFAULT_ENGINE, Kind::Network, "n1id");
        let ckey = ObjectKey::new(DEFAULT_ENGINE, Kind::Container, "c");
        assert_eq!(inv.objects[&ckey].depends_on, vec![nkey.clone()]);
        assert_eq!(inv.holders[&nkey][0].how, Use::Attached);
        assert_eq!(inv.unmanaged[0].depends_on, vec![nkey]);
    }

    #[test]
    fn client_side_check_rejects_what_a_filter_let_through() {
        let good = container("a", labels(&[("ca.sandbox", "1")]), &[]);
        let bad = container("b", labels(&[("ca.sandbox", "true")]), &[]);
        let vol_bad = volume("v", labels(&[("ca.sandboxx", "1")]));
        let inv = Inventory::from_listings(
            DEFAULT_ENGINE,
            Scope::default(),
            vec![good, bad, vol_bad],
            vec![],
            vec![],
        );
        let ids: Vec<&str> = inv.objects.keys().map(|k| k.id.as_str()).collect();
        assert_eq!(ids, vec!["a"]);
        let rejected: Vec<String> = inv.rejected.iter().map(ToString::to_string).collect();
        assert_eq!(rejected, vec!["container/b", "volume/v"]);
    }

    #[test]
    fn finds_unmanaged_users_and_joiners_of_managed_objects_only() {
        let managed = labels(&[("ca.sandbox", "1")]);
        let v = volume("v", managed.clone());
        let mine = container("a00000000000000", managed, &["v"]);
        let foreign = container("f", Labels::new(), &["v", "other"]);
        let mut joiner = container("j", Labels::new(), &[]);
        joiner.joins = vec![Join {
            namespace: Namespace::Pid,
            target: "n-a00000000000000".into(),
        }];
        let inv = Inventory::from_listings(
            DEFAULT_ENGINE,
            Scope::default(),
            vec![mine.clone(), v],
            vec![mine, foreign, joiner],
            vec![],
        );
        let vkey = ObjectKey::new(DEFAULT_ENGINE, Kind::Volume, "v");
        assert_eq!(
            inv.holders[&vkey],
            vec![Holder {
                kind: Kind::Container,
                id: "f".into(),
                name: "n-f".into(),
                how: Use::Mounts
            }]
        );
        let ckey = ObjectKey::new(DEFAULT_ENGINE, Kind::Container, "a00000000000000");
        assert_eq!(inv.holders[&ckey][0].how, Use::Joins(Namespace::Pid));
        assert!(inv.basis().contains_key("holder/volume/v/f"));
        assert_eq!(inv.holders.len(), 2);
    }
}
