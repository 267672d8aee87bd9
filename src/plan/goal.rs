//! The goal: what the user asked for, fully resolved from the state file
//! and the command line (the declared boxes, the kept volumes, the archive
//! policy, reconcile or destroy). Serialized inside a saved plan.
//!
//! Plain data and its accessors. Must not decide what happens to an object
//! (that is `decide.rs`) or read the state file (that is `state`).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::model::{Kind, Object};

/// A box the state file declares.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[schemars(deny_unknown_fields)]
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
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[schemars(deny_unknown_fields)]
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
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
    pub(super) fn dir_for(&self, o: &Object) -> Option<String> {
        let skipped = o.kind() != Kind::Volume
            || o.labels.contains_key(crate::model::lease::LEASE_TTL_LABEL)
            || self.skip_volumes.contains(&o.name)
            || o.box_id().is_some_and(|b| self.skip_boxes.contains(b));
        (!skipped).then(|| self.dir.clone())
    }
}

/// What the user asked for, fully resolved from the state file and the command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
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

impl Goal {
    /// Reconcile a state that declares nothing: every managed object is a
    /// leak (no grace, no kept volume, no archive).
    pub fn nothing_declared() -> Goal {
        Goal::declaring(vec![])
    }

    /// Reconcile a state that declares `boxes` and nothing else (no grace,
    /// no kept volume, no lease ceiling, no archive).
    pub fn declaring(boxes: Vec<DeclaredBox>) -> Goal {
        Goal::Reconcile {
            boxes,
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
}
