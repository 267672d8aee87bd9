//! The plan: which managed objects to remove, in what order, and why.
//!
//! Owns `Plan::build`, a pure and synchronous function of a `Goal`, an
//! `Inventory` and the clock: the same inputs give the same plan, byte for
//! byte. The plan is a graph (petgraph) whose removal edges run backwards along
//! dependencies: an object goes before everything it depends on (a container
//! before the volumes it mounts, the networks it is attached to and a container
//! whose namespace it joined). The rules are the same for every kind. Must not
//! do I/O, read the clock, or turn reasons into words; has no notion of images
//! beyond listing them as retained. On a large inventory the basis digests are
//! computed on a second (scoped) thread; the plan is the same either way.

pub(crate) mod explain;
pub mod inventory;
pub mod lease;

use std::collections::{BTreeMap, BTreeSet};

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::Direction;
use serde::{Deserialize, Serialize};

use crate::model::{
    ByKind, Kind, Labels, Listing, Object, ObjectKey, Reason, Ref, Scope, SANDBOX_LABEL,
    SANDBOX_VALUE,
};
use crate::plan::inventory::{fingerprint, Holder, Inventory};
use crate::plan::lease::{EngineClock, LeaseNote, Leases};

/// From this many objects on, `Plan::build` computes the basis digests on a
/// second thread (below it, starting a thread costs more than it saves).
const PARALLEL_BASIS: usize = 1024;

/// The version of the plan's JSON form; a saved plan of another version is refused.
pub(crate) const PLAN_VERSION: u32 = 2;

/// A box the state file declares.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeclaredBox {
    pub id: String,
    /// Declared on this engine only; `None` means on every engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) engine: Option<String>,
    /// Declared until this time (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) expires: Option<i64>,
    /// Declared for this long after the box's first container was created (seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ttl: Option<u64>,
    /// Where the state file declares it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) line: Option<usize>,
}

impl DeclaredBox {
    /// A box declared on every engine, without expiry.
    pub fn new(id: &str) -> Self {
        DeclaredBox {
            id: id.to_string(),
            engine: None,
            expires: None,
            ttl: None,
            line: None,
        }
    }
}

/// A volume the state file keeps.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptVolume {
    pub name: String,
    /// Kept on this engine only; `None` means on every engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) engine: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) line: Option<usize>,
}

impl KeptVolume {
    pub fn new(name: &str) -> Self {
        KeptVolume {
            name: name.to_string(),
            engine: None,
            line: None,
        }
    }
}

/// Archive managed volumes before removing them (`--archive DIR`, `[policy]
/// archive`): each volume step gets `archive` (the directory).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchivePolicy {
    /// The directory archives go to, as given.
    pub dir: String,
    /// Boxes whose volumes go without an archive (`[[box]] archive = false`).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub skip_boxes: BTreeSet<String>,
    /// Volumes that go without an archive (a `volumes.keep` entry with
    /// `archive = false`: kept by a reconcile, but `destroy` may take it).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub skip_volumes: BTreeSet<String>,
}

impl ArchivePolicy {
    /// Archive everything into `dir`.
    pub fn new(dir: &str) -> Self {
        ArchivePolicy {
            dir: dir.to_string(),
            ..ArchivePolicy::default()
        }
    }

    /// Where `o` (a volume about to go) is archived to, if it is. A lease
    /// volume holds no data: it is never archived.
    fn dir_for(&self, o: &Object) -> Option<String> {
        let skipped = o.kind() != Kind::Volume
            || o.labels.contains_key(crate::model::lease::LEASE_TTL_LABEL)
            || self.skip_volumes.contains(&o.name)
            || o.box_id().is_some_and(|b| self.skip_boxes.contains(b));
        (!skipped).then(|| self.dir.clone())
    }
}

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

/// What the user asked for, fully resolved from the state file and the command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "camelCase")]
pub enum Goal {
    /// Converge on the desired state (`plan`, `apply`, `destroy --prune`,
    /// `watch`): every managed object that is not part of a declared box or
    /// kept is removed, unless it is younger than `grace`.
    #[serde(rename_all = "camelCase")]
    Reconcile {
        boxes: Vec<DeclaredBox>,
        keep_volumes: Vec<KeptVolume>,
        /// Seconds an undeclared object is left alone after its creation.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grace: Option<u64>,
        /// The longest ttl a lease may have (seconds; `None`: 24 hours).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_lease: Option<u64>,
        /// Archive volumes before they go.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        archive: Option<ArchivePolicy>,
    },
    /// Remove exactly these boxes (`destroy ID...`): their containers and
    /// networks, and their volumes unless `keep_volume`. Volumes in
    /// `keep_volumes` stay regardless.
    #[serde(rename_all = "camelCase")]
    Destroy {
        ids: BTreeSet<String>,
        keep_volume: bool,
        keep_volumes: Vec<KeptVolume>,
        /// The longest ttl a lease may have (seconds; `None`: 24 hours).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_lease: Option<u64>,
        /// Archive volumes before they go.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        archive: Option<ArchivePolicy>,
    },
}

/// An object as the plan and the report name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub(crate) engine: String,
    pub kind: Kind,
    /// Containers' and networks' full ID; volumes have none (their name is their identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    #[serde(rename = "box")]
    pub(crate) box_id: Option<String>,
    /// A container's state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) state: Option<String>,
    /// Creation time (Unix seconds; RFC 3339 in JSON, `createdAt`), when the
    /// engine reports one.
    #[serde(
        default,
        rename = "createdAt",
        skip_serializing_if = "Option::is_none",
        with = "rfc3339_opt"
    )]
    pub(crate) created: Option<i64>,
}

/// `Option<i64>` Unix seconds as an optional RFC 3339 string.
mod rfc3339_opt {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(t: &Option<i64>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.collect_str(&humantime::format_rfc3339_seconds(super::system_time(*t))),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        match Option::<String>::deserialize(d)? {
            None => Ok(None),
            Some(text) => super::parse_rfc3339(&text)
                .map(Some)
                .ok_or_else(|| serde::de::Error::custom(format!("{text:?} is not RFC 3339"))),
        }
    }
}

impl Entry {
    fn of(o: &Object) -> Entry {
        Entry {
            engine: o.key.engine.clone(),
            kind: o.kind(),
            id: o.kind().has_id().then(|| o.key.id.clone()),
            name: o.name.clone(),
            box_id: o.box_id().map(str::to_string),
            state: o.state.clone(),
            created: o.created,
        }
    }

    /// The object's identity.
    pub fn key(&self) -> ObjectKey {
        ObjectKey {
            engine: self.engine.clone(),
            kind: self.kind,
            id: self.id.clone().unwrap_or_else(|| self.name.clone()),
        }
    }

    /// How a reason refers to this object.
    pub(crate) fn as_ref(&self) -> Ref {
        Ref {
            kind: self.kind,
            id: self.id.clone(),
            name: self.name.clone(),
            how: None,
        }
    }
}

pub(crate) use crate::model::time::{parse_rfc3339, rfc3339, system_time};

/// One removal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// 1-based position in the plan's order.
    pub step: usize,
    #[serde(flatten)]
    pub object: Entry,
    /// Why the object goes.
    pub(crate) why: Reason,
    /// Steps (by number) that must have succeeded before this one may start.
    pub waits_for: Vec<usize>,
    /// A volume archived into this directory before it is removed; for a
    /// container with `reads`, where those volumes are archived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive: Option<String>,
    /// A container's: the volumes read through it once it is stopped and
    /// before it is removed (see [`read_through_users`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reads: Vec<Read>,
    /// A volume's: the step of the container it is read through. Should
    /// that read not happen (the container already gone), the volume is
    /// archived through a helper instead: never removed unarchived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived_by: Option<usize>,
}

/// A volume archived through the container that mounts it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Read {
    /// The volume's own step.
    pub step: usize,
    pub volume: String,
    /// Where the container mounts it.
    pub path: String,
}

/// An object that is kept or blocked, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Noted {
    #[serde(flatten)]
    pub object: Entry,
    pub why: Reason,
}

/// What the plan leaves in place on purpose, by kind.
pub(crate) type Kept = ByKind<Vec<Noted>>;

/// The images the plan retains: every `ca-sbx:*` image.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retained {
    pub images: Vec<crate::model::ImageInfo>,
}

/// The plan. Serializes to the JSON that `plan --format json` prints and
/// `plan --out` saves; `apply FILE` reads it back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub(crate) version: u32,
    /// The engine the plan was made for.
    pub(crate) engine: String,
    /// Every label a managed object carries: `ca.sandbox=1` and the scope labels.
    pub(crate) scope: Labels,
    /// The engine's Swarm kinds are out of scope (`[[engine]] swarm = false`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) swarm_out_of_scope: bool,
    pub(crate) goal: Goal,
    /// The time the plan was made for (RFC 3339): grace and expiry are judged at it.
    pub(crate) now: String,
    /// Removals in a dependency-respecting order.
    pub steps: Vec<Step>,
    /// Objects that should go but must not be forced (something outside the
    /// managed set uses them). Never attempted; a run that has any does not converge.
    pub blocked: Vec<Noted>,
    pub kept: Kept,
    pub retained: Retained,
    /// Every volume carrying a lease label: live, expired, or not a lease (why).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leases: Vec<LeaseNote>,
    /// The engine's clock, when leases were judged by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_clock: Option<EngineClock>,
    /// What discovery could not learn (a listing or an inspection that
    /// failed), in words, sorted: each is a failure of the run, and what it
    /// could affect is in `blocked`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub incomplete: Vec<String>,
    /// The fingerprint of `basis`.
    pub(crate) fingerprint: String,
    /// What the plan was built from: one digest per managed object (see `Inventory::basis`).
    pub(crate) basis: BTreeMap<String, String>,
}

/// What happens to one object.
#[derive(Debug, Clone)]
enum Verdict {
    Remove(Reason),
    Keep(Reason),
    Block(Reason),
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
        self.boxes
            .get(id)?
            .iter()
            .copied()
            .find(|d| on_engine(&d.engine, engine))
    }

    /// The `volumes.keep` entry for volume `name` on `engine`, if any.
    fn kept(&self, name: &str, engine: &str) -> Option<&'g KeptVolume> {
        self.kept
            .get(name)?
            .iter()
            .copied()
            .find(|k| on_engine(&k.engine, engine))
    }
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
    /// Reconcile a state that declares nothing: every managed object is a
    /// leak (no grace, no kept volume, no archive).
    pub fn nothing_declared() -> Goal {
        Goal::Reconcile {
            boxes: vec![],
            keep_volumes: vec![],
            grace: None,
            max_lease: None,
            archive: None,
        }
    }

    /// The ceiling of a lease's ttl (seconds; `None`: the default, 24 hours).
    pub(crate) fn max_lease(&self) -> Option<u64> {
        match self {
            Goal::Reconcile { max_lease, .. } | Goal::Destroy { max_lease, .. } => *max_lease,
        }
    }

    /// Whether and where volumes are archived before they go.
    pub fn archive(&self) -> Option<&ArchivePolicy> {
        match self {
            Goal::Reconcile { archive, .. } | Goal::Destroy { archive, .. } => archive.as_ref(),
        }
    }

    /// The same goal, archiving as `archive` says.
    pub fn with_archive(mut self, policy: Option<ArchivePolicy>) -> Self {
        match &mut self {
            Goal::Reconcile { archive, .. } | Goal::Destroy { archive, .. } => *archive = policy,
        }
        self
    }

    /// The verdict for `o` by its own labels and the clock alone (before
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
    /// Builds the plan for `goal` over `inv` at time `now` (Unix seconds). Pure:
    /// no I/O, no clock, no randomness; orders are sorted.
    pub fn build(goal: &Goal, inv: &Inventory, now: i64) -> Plan {
        // The basis (a SHA-256 digest per object) does not depend on any
        // verdict: for a large inventory it is computed on a second thread
        // while the rest is decided. The plan is the same either way.
        let digests = || {
            let basis = inv.basis();
            (fingerprint(&basis), basis)
        };
        let (mut plan, (fingerprint, basis)) = if inv.objects.len() >= PARALLEL_BASIS {
            std::thread::scope(|s| {
                let digests = s.spawn(digests);
                let plan = Plan::decide(goal, inv, now);
                let digests = digests
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                (plan, digests)
            })
        } else {
            (Plan::decide(goal, inv, now), digests())
        };
        plan.fingerprint = fingerprint;
        plan.basis = basis;
        plan
    }

    /// Everything but the basis and its fingerprint (left empty).
    fn decide(goal: &Goal, inv: &Inventory, now: i64) -> Plan {
        let ages = Ages::of(inv, goal);
        let goal_index = GoalIndex::of(goal);
        let leases = Leases::of(inv, now, goal.max_lease());
        // Objects in a readable order: by kind, then box, then name, then key.
        let mut objects: Vec<&Object> = inv.objects.values().collect();
        objects.sort_by_cached_key(|&o| (o.kind(), o.box_id(), o.name.as_str(), &o.key));
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
        let mut stack: Vec<usize> = (0..objects.len())
            .filter(|&i| matches!(verdicts[i], Verdict::Keep(_)))
            .collect();
        while let Some(i) = stack.pop() {
            for &j in depends[i].iter().chain(&owners[i]) {
                if !matches!(verdicts[j], Verdict::Remove(_)) {
                    continue;
                }
                let kept: Vec<Ref> = if owners[i].contains(&j) {
                    vec![task_ref(i)]
                } else {
                    dependents[j]
                        .iter()
                        .filter(|&&u| matches!(verdicts[u], Verdict::Keep(_)))
                        .map(|&u| object_ref(objects[u], Some(use_of(objects[u], objects[j]))))
                        .collect()
                };
                verdicts[j] = Verdict::Keep(Reason::MountedByKept { holders: kept });
                stack.push(j);
            }
        }
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
        let mut stack: Vec<usize> = (0..objects.len())
            .filter(|&i| matches!(verdicts[i], Verdict::Block(_)))
            .collect();
        while let Some(i) = stack.pop() {
            for &j in depends[i].iter().chain(&owners[i]) {
                if !matches!(verdicts[j], Verdict::Remove(_)) {
                    continue;
                }
                let object = if owners[i].contains(&j) {
                    task_ref(i)
                } else {
                    object_ref(objects[i], Some(use_of(objects[i], objects[j])))
                };
                verdicts[j] = Verdict::Block(Reason::WaitsForBlocked { object });
                stack.push(j);
            }
        }

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

        let mut scope = inv.scope.labels.clone();
        scope.insert(SANDBOX_LABEL.to_string(), SANDBOX_VALUE.to_string());
        let incomplete = incomplete(inv, &blocked);
        Plan {
            version: PLAN_VERSION,
            engine: inv.engine.clone(),
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
            fingerprint: String::new(),
            basis: BTreeMap::new(),
        }
    }

    /// The scope the plan was made for (its labels without `ca.sandbox` itself).
    pub(crate) fn scope(&self) -> Scope {
        Scope::new(
            self.scope
                .iter()
                .filter(|(k, _)| k.as_str() != SANDBOX_LABEL)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )
        .without_swarm_of(self.swarm_out_of_scope.then(|| self.engine.clone()))
    }

    /// The time the plan was made for, as Unix seconds.
    pub(crate) fn now(&self) -> i64 {
        parse_rfc3339(&self.now).unwrap_or_default()
    }

    /// True when there is nothing to remove, nothing blocked, and discovery
    /// learnt everything it asked.
    pub(crate) fn is_empty(&self) -> bool {
        self.steps.is_empty() && self.blocked.is_empty() && self.incomplete.is_empty()
    }

    /// What each step waits for, as 0-based step indices: the walk's input.
    pub(crate) fn dependencies(&self) -> Vec<Vec<usize>> {
        self.steps
            .iter()
            .map(|s| s.waits_for.iter().map(|w| w - 1).collect())
            .collect()
    }

    /// Removals of one kind.
    pub fn removal_count(&self, kind: Kind) -> usize {
        self.steps.iter().filter(|s| s.object.kind == kind).count()
    }

    /// Checks a plan read from a file: version, scope, step numbering, and that
    /// every edge points backwards (so it is acyclic).
    pub fn validate(&self) -> Result<(), String> {
        if self.version != PLAN_VERSION {
            return Err(format!(
                "plan version {} is not supported (expected {PLAN_VERSION}); make a new plan with `sandboxctl plan --out`",
                self.version
            ));
        }
        if self.scope.get(SANDBOX_LABEL).map(String::as_str) != Some(SANDBOX_VALUE) {
            return Err(format!(
                "plan scope lacks {SANDBOX_LABEL}={SANDBOX_VALUE}; the file was edited or damaged: make a new plan with `sandboxctl plan --out`"
            ));
        }
        if parse_rfc3339(&self.now).is_none() {
            return Err(format!(
                "plan time {:?} is not RFC 3339; the file was edited or damaged: make a new plan with `sandboxctl plan --out`",
                self.now
            ));
        }
        for (i, s) in self.steps.iter().enumerate() {
            if s.step != i + 1 {
                return Err(format!(
                    "step {} is numbered {}; the file was edited or damaged: make a new plan with `sandboxctl plan --out`",
                    i + 1,
                    s.step
                ));
            }
            if let Some(&w) = s.waits_for.iter().find(|&&w| w == 0 || w >= s.step) {
                return Err(format!(
                    "step {} waits for step {w}, which is not before it; the file was edited or damaged: make a new plan with `sandboxctl plan --out`",
                    s.step
                ));
            }
            for r in &s.reads {
                let read = self.steps.get(r.step.wrapping_sub(1));
                let linked = read.is_some_and(|v| {
                    v.object.kind == Kind::Volume
                        && v.object.name == r.volume
                        && v.waits_for.contains(&s.step)
                        && v.archived_by == Some(s.step)
                });
                if s.object.kind != Kind::Container || s.archive.is_none() || !linked {
                    return Err(format!(
                        "step {} reads volume step {} that does not wait for it; the file was edited or damaged: make a new plan with `sandboxctl plan --out`",
                        s.step, r.step
                    ));
                }
            }
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Join, Namespace, BOX_ID_LABEL, DEFAULT_ENGINE};
    use crate::plan::inventory::Use;

    const NOW: i64 = 1_800_000_000;

    fn labels(box_id: Option<&str>) -> Labels {
        let mut l = Labels::new();
        l.insert(SANDBOX_LABEL.into(), SANDBOX_VALUE.into());
        if let Some(b) = box_id {
            l.insert(BOX_ID_LABEL.into(), b.into());
        }
        l
    }

    fn key(kind: Kind, id: &str) -> ObjectKey {
        ObjectKey::new(DEFAULT_ENGINE, kind, id)
    }

    fn container(id: &str, box_id: Option<&str>, uses: &[&str]) -> Object {
        let mut o = Object::new(
            DEFAULT_ENGINE,
            Kind::Container,
            &format!("{id}0000000000000000"),
            &format!("sbx-{id}"),
        );
        o.state = Some("running".into());
        o.labels = labels(box_id);
        o.depends_on = uses
            .iter()
            .map(|u| match u.strip_prefix("net:") {
                Some(n) => key(Kind::Network, n),
                None => key(Kind::Volume, u),
            })
            .collect();
        o
    }

    fn volume(name: &str, box_id: Option<&str>) -> Object {
        let mut o = Object::new(DEFAULT_ENGINE, Kind::Volume, name, name);
        o.labels = labels(box_id);
        o
    }

    fn network(id: &str, box_id: Option<&str>) -> Object {
        let mut o = Object::new(DEFAULT_ENGINE, Kind::Network, id, &format!("net-{id}"));
        o.labels = labels(box_id);
        o
    }

    fn inventory(objects: Vec<Object>) -> Inventory {
        let containers: Vec<Object> = objects
            .iter()
            .filter(|o| o.kind() == Kind::Container)
            .cloned()
            .collect();
        Inventory::from_listings(
            DEFAULT_ENGINE,
            Scope::default(),
            objects,
            containers,
            vec![],
        )
    }

    fn reconcile(boxes: &[&str], keep: &[&str]) -> Goal {
        Goal::Reconcile {
            boxes: boxes.iter().map(|s| DeclaredBox::new(s)).collect(),
            keep_volumes: keep.iter().map(|s| KeptVolume::new(s)).collect(),
            grace: None,
            max_lease: None,
            archive: None,
        }
    }

    fn names(steps: &[Step]) -> Vec<String> {
        steps.iter().map(|s| s.object.name.clone()).collect()
    }

    fn codes(noted: &[Noted]) -> Vec<(String, String)> {
        noted
            .iter()
            .map(|n| {
                let v = serde_json::to_value(&n.why).unwrap();
                (
                    n.object.name.clone(),
                    v["code"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn a_large_inventory_gets_its_basis_from_the_second_thread_unchanged() {
        let objects: Vec<Object> = (0..PARALLEL_BASIS)
            .flat_map(|i| {
                let v = format!("v{i:05}");
                [
                    container(&format!("c{i:05}"), None, &[&v]),
                    volume(&v, None),
                ]
            })
            .collect();
        let inv = inventory(objects);
        assert!(inv.objects.len() >= PARALLEL_BASIS);
        let plan = Plan::build(&reconcile(&[], &[]), &inv, NOW);
        let basis = inv.basis();
        assert_eq!(plan.basis.len(), inv.objects.len());
        assert_eq!(plan.fingerprint, fingerprint(&basis));
        assert_eq!(plan.basis, basis);
        assert_eq!(plan.steps.len(), 2 * PARALLEL_BASIS);
    }

    #[test]
    fn empty_inventory_gives_empty_plan() {
        let plan = Plan::build(&reconcile(&[], &[]), &inventory(vec![]), NOW);
        assert!(plan.is_empty());
        assert_eq!(plan.scope, labels(None));
        plan.validate().unwrap();
    }

    #[test]
    fn volume_and_network_wait_for_every_container_that_uses_them() {
        let inv = inventory(vec![
            container("a", Some("a"), &["shared", "net:n1"]),
            container("b", Some("b"), &["shared", "net:n1"]),
            volume("shared", Some("a")),
            network("n1", Some("a")),
        ]);
        let plan = Plan::build(&reconcile(&[], &[]), &inv, NOW);
        assert_eq!(
            names(&plan.steps),
            vec!["sbx-a", "sbx-b", "shared", "net-n1"]
        );
        assert_eq!(plan.steps[2].waits_for, vec![1, 2]);
        assert_eq!(plan.steps[3].waits_for, vec![1, 2]);
        assert!(plan.steps[0].waits_for.is_empty());
        plan.validate().unwrap();
    }

    #[test]
    fn declared_box_and_kept_volume_stay() {
        let inv = inventory(vec![
            container("a", Some("a"), &["va", "net:na"]),
            container("b", Some("b"), &["vb"]),
            volume("va", Some("a")),
            volume("vb", Some("b")),
            volume("notes", None),
            network("na", Some("a")),
        ]);
        let plan = Plan::build(&reconcile(&["a"], &["notes"]), &inv, NOW);
        assert_eq!(names(&plan.steps), vec!["sbx-b", "vb"]);
        let kept: Vec<&str> = plan.kept.all().map(|n| n.object.name.as_str()).collect();
        assert_eq!(kept, vec!["sbx-a", "notes", "va", "net-na"]);
    }

    #[test]
    fn what_a_kept_container_uses_is_kept() {
        let inv = inventory(vec![
            container("a", Some("a"), &["vb", "net:nb"]),
            volume("vb", Some("b")),
            network("nb", Some("b")),
        ]);
        let plan = Plan::build(&reconcile(&["a"], &[]), &inv, NOW);
        assert!(plan.steps.is_empty());
        assert_eq!(
            codes(&plan.kept.volumes),
            vec![("vb".into(), "mountedByKept".into())]
        );
        assert_eq!(
            codes(&plan.kept.networks),
            vec![("net-nb".into(), "mountedByKept".into())]
        );
    }

    #[test]
    fn objects_used_by_unmanaged_containers_are_blocked_with_what_they_use() {
        let mut inv = inventory(vec![
            container("a", None, &["va"]),
            volume("va", None),
            volume("v", Some("x")),
            network("n", Some("x")),
        ]);
        let holder = |how| Holder {
            kind: Kind::Container,
            id: "f00000000000000".into(),
            name: "web".into(),
            how,
        };
        inv.holders
            .insert(key(Kind::Volume, "v"), vec![holder(Use::Mounts)]);
        inv.holders
            .insert(key(Kind::Network, "n"), vec![holder(Use::Attached)]);
        inv.holders.insert(
            key(Kind::Container, "a0000000000000000"),
            vec![holder(Use::Joins(Namespace::Network))],
        );
        let plan = Plan::build(&reconcile(&[], &[]), &inv, NOW);
        assert!(plan.steps.is_empty(), "{:?}", names(&plan.steps));
        assert_eq!(
            codes(&plan.blocked),
            vec![
                ("sbx-a".into(), "heldByUnmanaged".into()),
                ("va".into(), "waitsForBlocked".into()),
                ("v".into(), "heldByUnmanaged".into()),
                ("net-n".into(), "heldByUnmanaged".into()),
            ]
        );
        assert!(!plan.is_empty());
    }

    #[test]
    fn a_managed_joiner_goes_before_the_container_it_joined() {
        let target = container("t", None, &[]);
        let mut joiner = container("j", None, &[]);
        joiner.joins = vec![Join {
            namespace: Namespace::Pid,
            target: target.name.clone(),
        }];
        let inv = inventory(vec![target, joiner]);
        let plan = Plan::build(&reconcile(&[], &[]), &inv, NOW);
        assert_eq!(names(&plan.steps), vec!["sbx-j", "sbx-t"]);
        assert_eq!(plan.steps[1].waits_for, vec![1]);
    }

    #[test]
    fn destroy_takes_only_named_boxes_and_honours_keep_volume() {
        let inv = inventory(vec![
            container("a", Some("a"), &["va", "net:na"]),
            container("b", Some("b"), &["vb"]),
            volume("va", Some("a")),
            volume("vb", Some("b")),
            volume("leak", None),
            network("na", Some("a")),
        ]);
        let ids: BTreeSet<String> = ["a".to_string()].into();
        let destroy = |keep_volume| Goal::Destroy {
            ids: ids.clone(),
            keep_volume,
            keep_volumes: vec![],
            max_lease: None,
            archive: None,
        };
        let plan = Plan::build(&destroy(false), &inv, NOW);
        assert_eq!(names(&plan.steps), vec!["sbx-a", "va", "net-na"]);
        let plan = Plan::build(&destroy(true), &inv, NOW);
        assert_eq!(names(&plan.steps), vec!["sbx-a", "net-na"]);
    }

    fn aged(mut o: Object, created: i64) -> Object {
        o.created = Some(created);
        o
    }

    #[test]
    fn grace_keeps_young_undeclared_objects_until_it_runs_out() {
        let grace = 600;
        let goal = Goal::Reconcile {
            boxes: vec![],
            keep_volumes: vec![],
            grace: Some(grace),
            max_lease: None,
            archive: None,
        };
        let created = NOW - 100;
        let inv = inventory(vec![
            aged(container("a", Some("a"), &["va"]), created),
            // The volume is older, but its container is young: the box is young.
            aged(volume("va", Some("a")), NOW - 10_000),
            aged(volume("lone", None), NOW - 10_000),
        ]);
        let plan = Plan::build(&goal, &inv, NOW);
        assert_eq!(names(&plan.steps), vec!["lone"]);
        assert_eq!(
            codes(&plan.kept.containers),
            vec![("sbx-a".into(), "withinGrace".into())]
        );
        let until = created + grace as i64;
        assert_eq!(
            plan.kept.containers[0].why,
            Reason::WithinGrace {
                until: rfc3339(until)
            }
        );
        // One second before the end: still kept; at the end: removed.
        assert_eq!(Plan::build(&goal, &inv, until - 1).steps.len(), 1);
        assert_eq!(
            names(&Plan::build(&goal, &inv, until).steps),
            vec!["sbx-a", "lone", "va"]
        );
    }

    #[test]
    fn expiry_and_ttl_end_a_declared_box() {
        let created = NOW - 3600;
        let inv = inventory(vec![
            aged(container("a", Some("a"), &[]), created),
            aged(container("b", Some("b"), &[]), created),
        ]);
        let goal = |at: i64| Goal::Reconcile {
            boxes: vec![
                DeclaredBox {
                    expires: Some(at),
                    ..DeclaredBox::new("a")
                },
                DeclaredBox {
                    ttl: Some(7200),
                    ..DeclaredBox::new("b")
                },
            ],
            keep_volumes: vec![],
            grace: None,
            max_lease: None,
            archive: None,
        };
        let plan = Plan::build(&goal(NOW + 1), &inv, NOW);
        assert!(plan.steps.is_empty());
        assert_eq!(
            plan.kept.containers[1].why,
            Reason::DeclaredBox {
                box_id: "b".into(),
                expires: Some(rfc3339(created + 7200)),
                line: None
            }
        );
        let plan = Plan::build(&goal(NOW), &inv, NOW);
        assert_eq!(names(&plan.steps), vec!["sbx-a"]);
        assert_eq!(
            plan.steps[0].why,
            Reason::Expired {
                box_id: "a".into(),
                at: rfc3339(NOW)
            }
        );
        let plan = Plan::build(&goal(NOW), &inv, created + 7200);
        assert_eq!(names(&plan.steps), vec!["sbx-a", "sbx-b"]);
    }

    #[test]
    fn a_box_declared_on_another_engine_is_not_declared_here() {
        let inv = inventory(vec![container("a", Some("a"), &[])]);
        let goal = Goal::Reconcile {
            boxes: vec![DeclaredBox {
                engine: Some("ci-1".into()),
                ..DeclaredBox::new("a")
            }],
            keep_volumes: vec![],
            grace: None,
            max_lease: None,
            archive: None,
        };
        let plan = Plan::build(&goal, &inv, NOW);
        assert_eq!(names(&plan.steps), vec!["sbx-a"]);
    }

    #[test]
    fn same_inputs_same_bytes() {
        let inv = inventory(vec![
            container("z", None, &["v1"]),
            container("a", Some("q"), &["v1", "v2"]),
            volume("v2", None),
            volume("v1", Some("q")),
        ]);
        let goal = reconcile(&[], &[]);
        let a = serde_json::to_string(&Plan::build(&goal, &inv, NOW)).unwrap();
        let b = serde_json::to_string(&Plan::build(&goal, &inv, NOW)).unwrap();
        assert_eq!(a, b);
        let round: Plan = serde_json::from_str(&a).unwrap();
        assert_eq!(serde_json::to_string(&round).unwrap(), a);
    }

    fn lease(name: &str, box_id: &str, ttl: &str, created: i64) -> Object {
        let mut o = volume(name, Some(box_id));
        o.labels
            .insert(crate::model::lease::LEASE_TTL_LABEL.into(), ttl.into());
        o.created = Some(created);
        o
    }

    #[test]
    fn a_live_lease_keeps_an_undeclared_box_and_ranks_below_the_state_file() {
        let inv = inventory(vec![
            container("a", Some("a"), &["va"]),
            volume("va", Some("a")),
            lease("la", "a", "10m", NOW - 60),
            container("d", Some("d"), &[]),
            lease("ld", "d", "10m", NOW - 60),
            container("n", None, &[]),
        ]);
        // Declared with an expiry that has passed: the state file rules.
        let mut goal = reconcile(&[], &[]);
        if let Goal::Reconcile { boxes, .. } = &mut goal {
            boxes.push(DeclaredBox {
                expires: Some(NOW - 1),
                ..DeclaredBox::new("d")
            });
        }
        let plan = Plan::build(&goal, &inv, NOW);
        assert_eq!(names(&plan.steps), vec!["sbx-n", "sbx-d", "ld"]);
        let kept: Vec<(String, String)> = plan
            .kept
            .all()
            .cloned()
            .collect::<Vec<_>>()
            .iter()
            .map(|n| {
                (
                    n.object.name.clone(),
                    serde_json::to_value(&n.why).unwrap()["code"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                )
            })
            .collect();
        assert_eq!(
            kept,
            vec![
                ("sbx-a".to_string(), "leased".to_string()),
                ("la".to_string(), "leased".to_string()),
                ("va".to_string(), "leased".to_string()),
            ]
        );
        // Once it runs out, the box and its lease go.
        let later = Plan::build(&goal, &inv, NOW + 600);
        assert_eq!(
            names(&later.steps),
            vec!["sbx-n", "sbx-a", "sbx-d", "la", "va", "ld"]
        );
    }

    #[test]
    fn destroy_removes_a_leased_box_and_says_it_was_leased() {
        let inv = inventory(vec![
            container("a", Some("a"), &[]),
            lease("la", "a", "10m", NOW - 60),
        ]);
        let goal = Goal::Destroy {
            ids: BTreeSet::from(["a".to_string()]),
            keep_volume: false,
            keep_volumes: vec![],
            max_lease: None,
            archive: None,
        };
        let plan = Plan::build(&goal, &inv, NOW);
        assert_eq!(names(&plan.steps), vec!["sbx-a", "la"]);
        // `--keep-volume` keeps the box's data, not its lease.
        let mut with_data = inv.clone();
        let data = volume("va", Some("a"));
        with_data.objects.insert(data.key.clone(), data);
        let keep = Goal::Destroy {
            ids: BTreeSet::from(["a".to_string()]),
            keep_volume: true,
            keep_volumes: vec![],
            max_lease: None,
            archive: None,
        };
        let kept = Plan::build(&keep, &with_data, NOW);
        assert_eq!(names(&kept.steps), vec!["sbx-a", "la"]);
        assert_eq!(
            codes(&kept.kept.volumes),
            vec![("va".to_string(), "keepVolumeFlag".to_string())]
        );
        assert_eq!(
            plan.steps[1].why,
            Reason::DestroyRequested {
                box_id: "a".into(),
                leased_until: Some(rfc3339(NOW + 540)),
            }
        );
    }

    #[test]
    fn an_expired_lease_goes_with_its_box_not_by_its_own_age() {
        // The box is an hour old; its driver's last lease (ttl 10 s, shorter
        // than the 60 s grace) was made 20 s ago and has run out.
        let mut c = container("a", Some("a"), &["va"]);
        c.created = Some(NOW - 3600);
        let mut v = volume("va", Some("a"));
        v.created = Some(NOW - 3600);
        let inv = inventory(vec![c, v, lease("la", "a", "10s", NOW - 20)]);
        let goal = Goal::Reconcile {
            boxes: vec![],
            keep_volumes: vec![],
            grace: Some(60),
            max_lease: None,
            archive: None,
        };
        let plan = Plan::build(&goal, &inv, NOW);
        assert_eq!(names(&plan.steps), vec!["sbx-a", "la", "va"]);
        // A lone lease of a box with nothing else counts from its own creation.
        let lone = inventory(vec![lease("lb", "b", "10s", NOW - 20)]);
        let plan = Plan::build(&goal, &lone, NOW);
        assert!(plan.steps.is_empty());
        assert_eq!(
            codes(&plan.kept.volumes),
            vec![("lb".to_string(), "withinGrace".to_string())]
        );
    }

    /// A service `id` of `box_id` using `uses` (`net:` networks, else configs).
    fn service(id: &str, box_id: Option<&str>, uses: &[&str]) -> Object {
        let mut o = Object::new(DEFAULT_ENGINE, Kind::Service, id, &format!("svc-{id}"));
        o.labels = labels(box_id);
        o.depends_on = uses
            .iter()
            .map(|u| match u.strip_prefix("net:") {
                Some(n) => key(Kind::Network, n),
                None => key(Kind::Config, u),
            })
            .collect();
        o
    }

    fn task(id: &str, box_id: Option<&str>, service: &str, uses: &[&str]) -> Object {
        let mut c = container(id, box_id, uses);
        c.labels
            .insert(crate::model::SWARM_SERVICE_ID.into(), service.into());
        c
    }

    fn swarm_object(kind: Kind, id: &str, box_id: Option<&str>) -> Object {
        let mut o = Object::new(DEFAULT_ENGINE, kind, id, &format!("{kind}-{id}"));
        o.labels = labels(box_id);
        o
    }

    #[test]
    fn a_managed_service_goes_before_its_tasks_and_what_they_use() {
        let inv = inventory(vec![
            service("s1", Some("b"), &["net:n", "cf"]),
            task("t1", Some("b"), "s1", &["net:n"]),
            network("n", Some("b")),
            swarm_object(Kind::Config, "cf", Some("b")),
        ]);
        let plan = Plan::build(&reconcile(&[], &[]), &inv, NOW);
        assert_eq!(
            names(&plan.steps),
            ["svc-s1", "sbx-t1", "net-n", "config-cf"],
            "{plan:#?}"
        );
        assert_eq!(plan.steps[1].waits_for, vec![1]);
        assert_eq!(plan.steps[2].waits_for, vec![1, 2]);
        assert_eq!(plan.steps[3].waits_for, vec![1]);
        assert!(plan.blocked.is_empty());
    }

    #[test]
    fn a_task_that_stays_keeps_or_blocks_its_service() {
        // Declared box `a` owns the task; the service is box `b`'s (a leak):
        // removing the service would take the kept task, so it stays.
        let inv = inventory(vec![
            service("s1", Some("b"), &[]),
            task("t1", Some("a"), "s1", &[]),
        ]);
        let plan = Plan::build(&reconcile(&["a"], &[]), &inv, NOW);
        assert!(plan.steps.is_empty(), "{plan:#?}");
        assert_eq!(
            codes(&plan.kept.services),
            [("svc-s1".to_string(), "mountedByKept".to_string())]
        );
        // A task another container joined (unmanaged) is blocked: so is its service.
        let mut inv = inventory(vec![
            service("s1", Some("b"), &[]),
            task("t1", Some("b"), "s1", &[]),
        ]);
        inv.holders.insert(
            key(Kind::Container, "t10000000000000000"),
            vec![Holder {
                kind: Kind::Container,
                id: "f".into(),
                name: "foreign".into(),
                how: Use::Joins(Namespace::Pid),
            }],
        );
        let plan = Plan::build(&reconcile(&[], &[]), &inv, NOW);
        assert!(plan.steps.is_empty(), "{plan:#?}");
        let service = plan
            .blocked
            .iter()
            .find(|n| n.object.kind == Kind::Service)
            .expect("the service is blocked");
        assert_eq!(
            service.why.to_string(),
            "in use by blocked container sbx-t1 (t10000000000, a task of it)"
        );
    }

    #[test]
    fn an_orchestrator_owned_container_is_blocked_unless_its_service_is_managed_or_gone() {
        // Its service is not managed, but listed: blocked, naming it.
        let mut foreign = service("s9", None, &[]);
        foreign.labels.clear();
        let owned = task("t1", Some("b"), "s9", &["v"]);
        let mut inv = Inventory::from_listings(
            DEFAULT_ENGINE,
            Scope::default(),
            vec![owned.clone(), volume("v", Some("b"))],
            vec![owned.clone(), foreign],
            vec![],
        );
        let plan = Plan::build(&reconcile(&[], &[]), &inv, NOW);
        assert!(plan.steps.is_empty(), "{plan:#?}");
        assert_eq!(
            codes(&plan.blocked),
            [
                ("sbx-t1".to_string(), "ownedByOrchestrator".to_string()),
                ("v".to_string(), "waitsForBlocked".to_string())
            ]
        );
        // A manager's listing shows no such service: an orphan, removed.
        let inv2 = inventory(vec![owned.clone(), volume("v", Some("b"))]);
        let plan = Plan::build(&reconcile(&[], &[]), &inv2, NOW);
        assert_eq!(names(&plan.steps), ["sbx-t1", "v"]);
        // Not a manager: the service cannot be seen, so the task stays.
        inv.swarm_skipped = Some(crate::model::EngineError::new(
            "list services",
            crate::model::ErrorKind::NoSwarm {
                worker: true,
                message: "This node is not a swarm manager.".into(),
            },
        ));
        inv.unmanaged.retain(|o| o.kind() != Kind::Service);
        let plan = Plan::build(&reconcile(&[], &[]), &inv, NOW);
        assert_eq!(plan.blocked.len(), 2, "{plan:#?}");
        // Nomad and Kubernetes owners are never managed here: always blocked.
        let mut pod = container("p1", Some("b"), &[]);
        pod.labels
            .insert("io.kubernetes.pod.uid".into(), "uid-1".into());
        let plan = Plan::build(&reconcile(&[], &[]), &inventory(vec![pod]), NOW);
        assert_eq!(
            codes(&plan.blocked),
            [("sbx-p1".to_string(), "ownedByOrchestrator".to_string())]
        );
    }
}
