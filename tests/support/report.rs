//! A typed mirror of the JSON that `sandboxctl` prints: the report of `apply`
//! and `destroy --format json`, and the plan of `plan --format json` (also the
//! saved-plan file).
//!
//! Written from the contract, not derived from the crate's own types, so a
//! renamed or added key fails every test that reads it (`deny_unknown_fields`
//! everywhere but the plan's free-form `basis`). Owns the reading only: what
//! a test expects stays in the test. Reasons are the `Reason` enum below, one
//! variant per `code`, each with its rendered `text`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::cli::Output;
pub use sandboxctl::model::Kind;

/// Another object a reason refers to.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Ref {
    pub kind: Kind,
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    /// `mounts`, `attached`, `joins its network namespace`, ...
    #[serde(default)]
    pub how: Option<String>,
}

/// The orchestrator object that owns a container (`ownedByOrchestrator`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Owner {
    /// `swarm`, `nomad` or `kubernetes`.
    pub orchestrator: String,
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
}

/// A `why` or `reason`: its `code`, the fields of that code, and the `text`
/// a person reads.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "code", rename_all = "camelCase", deny_unknown_fields)]
pub enum Reason {
    NoBoxLabel {
        text: String,
    },
    #[serde(rename_all = "camelCase")]
    BoxNotDeclared {
        box_id: String,
        text: String,
    },
    #[serde(rename_all = "camelCase")]
    DestroyRequested {
        box_id: String,
        /// When the box held a live lease: until when (the engine's clock).
        #[serde(default)]
        leased_until: Option<String>,
        text: String,
    },
    #[serde(rename_all = "camelCase")]
    Expired {
        box_id: String,
        at: String,
        text: String,
    },
    #[serde(rename_all = "camelCase")]
    DeclaredBox {
        box_id: String,
        #[serde(default)]
        expires: Option<String>,
        #[serde(default)]
        line: Option<usize>,
        text: String,
    },
    WithinGrace {
        until: String,
        text: String,
    },
    /// Kept: an undeclared box with a live lease (`lease`, until `until` on
    /// the engine's clock).
    #[serde(rename_all = "camelCase")]
    Leased {
        box_id: String,
        until: String,
        lease: String,
        text: String,
    },
    NotNamedByDestroy {
        text: String,
    },
    KeptByFile {
        #[serde(default)]
        line: Option<usize>,
        text: String,
    },
    KeepVolumeFlag {
        text: String,
    },
    MountedByKept {
        holders: Vec<Ref>,
        text: String,
    },
    HeldByUnmanaged {
        holders: Vec<Ref>,
        text: String,
    },
    WaitsForBlocked {
        object: Ref,
        text: String,
    },
    /// Blocked: a container that could not be inspected could share its
    /// namespaces.
    HolderUnknown {
        holder: Ref,
        error: String,
        text: String,
    },
    /// Blocked: a listing failed that could show a user of it (`listing`:
    /// `containers`, `volumes`, `services`, `the engine's clock`, ...).
    ListingFailed {
        listing: String,
        error: String,
        text: String,
    },
    /// Blocked: an orchestrator that is not managed owns the container.
    OwnedByOrchestrator {
        owner: Owner,
        text: String,
    },
    RemovalFailed {
        error: String,
        text: String,
    },
    /// `--archive`: the volume's archive failed, so it stays.
    ArchiveFailed {
        error: String,
        text: String,
    },
    /// A leftover archive helper container.
    ArchiveHelper {
        text: String,
    },
    Changed {
        detail: String,
        text: String,
    },
    WaitsForFailed {
        step: usize,
        object: Ref,
        text: String,
    },
    Interrupted {
        text: String,
    },
    /// Not attempted: the saved plan could not be checked against an engine
    /// whose discovery is incomplete now.
    PlanUnchecked {
        text: String,
    },
    AppearedAfterPlan {
        text: String,
    },
    AlreadyGone {
        text: String,
    },
}

impl Reason {
    /// The `code`, as the JSON spells it.
    pub fn code(&self) -> String {
        serde_json::to_value(self).expect("a reason serializes")["code"]
            .as_str()
            .expect("code is a string")
            .to_string()
    }

    /// The text a person reads.
    pub fn text(&self) -> &str {
        match self {
            Reason::NoBoxLabel { text }
            | Reason::BoxNotDeclared { text, .. }
            | Reason::DestroyRequested { text, .. }
            | Reason::Expired { text, .. }
            | Reason::DeclaredBox { text, .. }
            | Reason::WithinGrace { text, .. }
            | Reason::Leased { text, .. }
            | Reason::NotNamedByDestroy { text }
            | Reason::KeptByFile { text, .. }
            | Reason::KeepVolumeFlag { text }
            | Reason::MountedByKept { text, .. }
            | Reason::HeldByUnmanaged { text, .. }
            | Reason::WaitsForBlocked { text, .. }
            | Reason::HolderUnknown { text, .. }
            | Reason::ListingFailed { text, .. }
            | Reason::OwnedByOrchestrator { text, .. }
            | Reason::RemovalFailed { text, .. }
            | Reason::ArchiveFailed { text, .. }
            | Reason::ArchiveHelper { text }
            | Reason::Changed { text, .. }
            | Reason::WaitsForFailed { text, .. }
            | Reason::Interrupted { text }
            | Reason::PlanUnchecked { text }
            | Reason::AppearedAfterPlan { text }
            | Reason::AlreadyGone { text } => text,
        }
    }

    /// The holders a `heldByUnmanaged` or `mountedByKept` reason names (else none).
    pub fn holders(&self) -> &[Ref] {
        match self {
            Reason::HeldByUnmanaged { holders, .. } | Reason::MountedByKept { holders, .. } => {
                holders
            }
            _ => &[],
        }
    }
}

/// An object as the plan names it (a step, a blocked or a kept object).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Noted {
    pub engine: String,
    pub kind: Kind,
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    #[serde(rename = "box")]
    pub box_id: Option<String>,
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(rename = "reason")]
    pub why: Reason,
}

/// One removal of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Step {
    pub step: usize,
    pub engine: String,
    pub kind: Kind,
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    #[serde(rename = "box")]
    pub box_id: Option<String>,
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(rename = "reason")]
    pub why: Reason,
    pub waits_for: Vec<usize>,
}

/// Kept objects by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Kept {
    pub containers: Vec<Noted>,
    pub volumes: Vec<Noted>,
    pub networks: Vec<Noted>,
    /// The Swarm kinds: absent from the JSON when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<Noted>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configs: Vec<Noted>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<Noted>,
}

impl Kept {
    pub fn of(&self, kind: Kind) -> &[Noted] {
        match kind {
            Kind::Container => &self.containers,
            Kind::Volume => &self.volumes,
            Kind::Network => &self.networks,
            Kind::Service => &self.services,
            Kind::Config => &self.configs,
            Kind::Secret => &self.secrets,
        }
    }

    pub fn is_empty(&self) -> bool {
        Kind::ALL.iter().all(|&k| self.of(k).is_empty())
    }

    /// The kept object named `name` (any kind), failing the test if there is none.
    #[track_caller]
    pub fn named(&self, name: &str) -> &Noted {
        Kind::ALL
            .iter()
            .flat_map(|&k| self.of(k))
            .find(|n| n.name == name)
            .unwrap_or_else(|| panic!("{name} is not kept: {self:#?}"))
    }
}

/// A `ca-sbx:*` image.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Image {
    pub id: String,
    pub tags: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Retained {
    pub images: Vec<Image>,
}

/// A declared box in a plan's goal.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeclaredBox {
    pub id: String,
    #[serde(default)]
    pub engine: Option<String>,
    #[serde(default)]
    pub expires: Option<i64>,
    #[serde(default)]
    pub ttl: Option<u64>,
    #[serde(default)]
    pub line: Option<usize>,
}

/// A kept volume in a plan's goal.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeptVolume {
    pub name: String,
    #[serde(default)]
    pub engine: Option<String>,
    #[serde(default)]
    pub line: Option<usize>,
}

/// What the plan was asked to do.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "mode", rename_all = "camelCase", deny_unknown_fields)]
pub enum Goal {
    #[serde(rename_all = "camelCase")]
    Reconcile {
        boxes: Vec<DeclaredBox>,
        keep_volumes: Vec<KeptVolume>,
        #[serde(default)]
        grace: Option<u64>,
    },
    #[serde(rename_all = "camelCase")]
    Destroy {
        ids: BTreeSet<String>,
        keep_volume: bool,
        keep_volumes: Vec<KeptVolume>,
    },
}

/// What one volume with a lease label is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum LeaseState {
    Live,
    Expired,
    /// Not a lease: see `problem`.
    Invalid,
}

/// One volume carrying a lease label, as a plan lists it (`leases`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaseNote {
    pub volume: String,
    #[serde(rename = "box")]
    pub box_id: String,
    /// The ttl label as the engine gave it.
    pub ttl: String,
    pub state: LeaseState,
    /// Live or expired: its end on the engine's clock.
    #[serde(default)]
    pub until: Option<String>,
    /// Invalid: `unreadable`, `zero`, `overCeiling` (with `maxLease`,
    /// seconds) or `undated`.
    #[serde(default)]
    pub problem: Option<String>,
    #[serde(default)]
    pub max_lease: Option<u64>,
}

/// The engine's clock as a plan judged leases by it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EngineClock {
    pub now: String,
    /// How far the engine's clock is ahead of sandboxctl's (negative: behind).
    pub skew_seconds: i64,
}

/// `plan --format json` and a saved plan.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Plan {
    /// The schema version of every document (`2`).
    pub schema_version: u32,
    pub engine: String,
    /// The engine's address when the plan was made.
    #[serde(default)]
    pub endpoint: Option<String>,
    pub scope: BTreeMap<String, String>,
    /// Present (true) when the engine's Swarm kinds are out of scope.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub swarm_out_of_scope: bool,
    pub goal: Goal,
    pub now: String,
    pub steps: Vec<Step>,
    pub blocked: Vec<Noted>,
    pub kept: Kept,
    pub retained: Retained,
    /// Every volume with a lease label (absent when there is none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leases: Vec<LeaseNote>,
    /// Present when leases were judged (the engine's clock was read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_clock: Option<EngineClock>,
    /// What discovery could not learn, in words (absent when complete).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub incomplete: Vec<String>,
    /// The box IDs a destroy goal names that nothing carries (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown_boxes: Vec<String>,
    pub fingerprint: String,
    pub basis: BTreeMap<String, String>,
    pub summary: String,
    /// A saved plan's seal (`hmac-sha256:` and 64 hex digits); absent from
    /// `plan --format json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seal: Option<String>,
}

impl Plan {
    /// The step that removes the object named `name`, failing the test if none does.
    #[track_caller]
    pub fn step(&self, name: &str) -> &Step {
        self.steps
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no step removes {name}: {self:#?}"))
    }

    /// The blocked object named `name`, failing the test if it is not blocked.
    #[track_caller]
    pub fn blocked(&self, name: &str) -> &Noted {
        self.blocked
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("{name} is not blocked: {self:#?}"))
    }

    /// The lease note of volume `volume`, failing the test if there is none.
    #[track_caller]
    pub fn lease(&self, volume: &str) -> &LeaseNote {
        self.leases
            .iter()
            .find(|l| l.volume == volume)
            .unwrap_or_else(|| panic!("no lease note for {volume}: {self:#?}"))
    }

    /// Names of the steps of `kind`.
    pub fn step_names(&self, kind: Kind) -> BTreeSet<String> {
        self.steps
            .iter()
            .filter(|s| s.kind == kind)
            .map(|s| s.name.clone())
            .collect()
    }
}

/// `removed` or `alreadyGone`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    Removed,
    AlreadyGone,
}

/// A removed object.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Gone {
    pub engine: String,
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    #[serde(rename = "box")]
    pub box_id: Option<String>,
    pub outcome: Outcome,
    /// What it gave back, as measured before its removal; `null` when not measured.
    #[serde(rename = "reclaimedBytes")]
    pub reclaimed_bytes: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Removed {
    pub containers: Vec<Gone>,
    pub volumes: Vec<Gone>,
    pub networks: Vec<Gone>,
    /// The Swarm kinds: absent from the JSON when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<Gone>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configs: Vec<Gone>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<Gone>,
}

impl Removed {
    pub fn of(&self, kind: Kind) -> &[Gone] {
        match kind {
            Kind::Container => &self.containers,
            Kind::Volume => &self.volumes,
            Kind::Network => &self.networks,
            Kind::Service => &self.services,
            Kind::Config => &self.configs,
            Kind::Secret => &self.secrets,
        }
    }

    /// Names of the removed objects of `kind`.
    pub fn names(&self, kind: Kind) -> BTreeSet<String> {
        self.of(kind).iter().map(|g| g.name.clone()).collect()
    }

    /// IDs of the removed containers or networks.
    pub fn ids(&self, kind: Kind) -> BTreeSet<String> {
        self.of(kind).iter().filter_map(|g| g.id.clone()).collect()
    }

    pub fn is_empty(&self) -> bool {
        Kind::ALL.iter().all(|&k| self.of(k).is_empty())
    }

    /// How many objects were removed, of every kind.
    pub fn len(&self) -> usize {
        Kind::ALL.iter().map(|&k| self.of(k).len()).sum()
    }
}

/// `container`, `volume`, `network`, `service`, `config`, `secret`, or
/// `engine` (a listing or the connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum FailureKind {
    Container,
    Volume,
    Network,
    Service,
    Config,
    Secret,
    Engine,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Failure {
    pub kind: FailureKind,
    pub engine: String,
    pub name: String,
    #[serde(default)]
    pub id: Option<String>,
    pub error: String,
}

/// An object still there after the run.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Leftover {
    pub engine: String,
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    #[serde(rename = "box")]
    pub box_id: Option<String>,
    pub reason: Reason,
}

/// One engine's line of a fleet report's `engines`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSummary {
    pub engine: String,
    pub endpoint: String,
    pub converged: bool,
    pub removed: usize,
    pub failures: usize,
    pub remaining: usize,
    /// Why the engine's part did not run (unreachable, listing failed, stale plan).
    #[serde(default)]
    pub error: Option<String>,
}

/// The report of `apply` and `destroy` (a fleet's also has `engines`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Report {
    /// The schema version of every document (`2`).
    pub schema_version: u32,
    /// True exactly when the run exits 0 (checked by [`Output::report`]).
    pub ok: bool,
    /// One engine's report: the engine's name and address.
    #[serde(default)]
    pub engine: Option<String>,
    #[serde(default)]
    pub endpoint: Option<String>,
    pub converged: bool,
    /// `--archive`: the volumes archived (`volume`, `path`, `sha256`, `bytes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub archived: Vec<serde_json::Value>,
    #[serde(default)]
    pub now: Option<String>,
    pub removed: Removed,
    /// The sum of the removed objects' known figures; `null` when
    /// containers or volumes were removed and none was measured.
    pub reclaimed_bytes: Option<u64>,
    /// Removed containers and volumes without a figure.
    pub reclaimed_unmeasured: u64,
    pub kept: Kept,
    pub retained: Retained,
    pub failures: Vec<Failure>,
    pub remaining_containers: Vec<Leftover>,
    pub remaining_volumes: Vec<Leftover>,
    pub remaining_networks: Vec<Leftover>,
    /// The Swarm kinds' leftovers: absent from the JSON when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remaining_services: Vec<Leftover>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remaining_configs: Vec<Leftover>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remaining_secrets: Vec<Leftover>,
    pub interrupted: bool,
    /// The box IDs `destroy` named that nothing in scope carries, each
    /// judged; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown_boxes: Vec<UnknownBox>,
    /// A prune that found no state file and was given no `--scope`; absent
    /// (false) otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_state_file: bool,
    /// A prune the person at the terminal answered no to; absent (false)
    /// otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub declined: bool,
    /// A fleet's summary per engine; absent for one engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engines: Option<Vec<EngineSummary>>,
}

/// A box ID `destroy` named that nothing in scope carries, and how the run
/// judged it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct UnknownBox {
    pub id: String,
    pub status: Unmatched,
    /// The audit log's record of its removal (`removedEarlier` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<EarlierRemoval>,
}

/// How a run judged a named box that nothing carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Unmatched {
    /// Fails the run.
    NotFound,
    /// `--missing-ok` (`missingOk`): not a failure.
    MissingOk,
    /// The audit log records its removal: not a failure.
    RemovedEarlier,
}

/// A removal the audit log records.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EarlierRemoval {
    pub time: String,
    pub engine: String,
    pub kind: String,
    pub name: String,
    pub code: String,
    pub text: String,
    pub log: String,
}

impl Report {
    /// The leftovers of `kind`.
    pub fn remaining(&self, kind: Kind) -> &[Leftover] {
        match kind {
            Kind::Container => &self.remaining_containers,
            Kind::Volume => &self.remaining_volumes,
            Kind::Network => &self.remaining_networks,
            Kind::Service => &self.remaining_services,
            Kind::Config => &self.remaining_configs,
            Kind::Secret => &self.remaining_secrets,
        }
    }

    /// Every leftover, containers first.
    pub fn all_remaining(&self) -> impl Iterator<Item = &Leftover> {
        Kind::ALL.into_iter().flat_map(|k| self.remaining(k))
    }

    /// Names of the leftovers of `kind`.
    pub fn remaining_names(&self, kind: Kind) -> BTreeSet<String> {
        self.remaining(kind)
            .iter()
            .map(|l| l.name.clone())
            .collect()
    }

    /// The leftover of `kind` named `name`, failing the test if there is none.
    #[track_caller]
    pub fn leftover(&self, kind: Kind, name: &str) -> &Leftover {
        self.remaining(kind)
            .iter()
            .find(|l| l.name == name)
            .unwrap_or_else(|| panic!("{kind} {name} is not left behind: {self:#?}"))
    }

    /// The one failure, failing the test unless there is exactly one.
    #[track_caller]
    pub fn only_failure(&self) -> &Failure {
        assert_eq!(self.failures.len(), 1, "{:#?}", self.failures);
        &self.failures[0]
    }

    /// True when the report names nothing left, no failure, and converged.
    pub fn is_clean(&self) -> bool {
        self.converged && self.failures.is_empty() && self.all_remaining().next().is_none()
    }
}

impl Output {
    /// Stdout read as a report, failing the test (showing both streams) if it is not one.
    #[track_caller]
    pub fn report(&self) -> Report {
        let report: Report = self.parse("a JSON report");
        // `ok` is the exit status, by the one decision (decision 24).
        assert_eq!(
            report.ok,
            self.code == Some(0),
            "`ok` is not what `{}` exited with\n{}",
            self.command,
            self.dump()
        );
        report
    }

    /// Stdout read as a plan, failing the test (showing both streams) if it is not one.
    #[track_caller]
    pub fn plan(&self) -> Plan {
        self.parse("a JSON plan")
    }
}

/// Reads a saved plan file.
#[track_caller]
pub fn read_plan(text: &str) -> Plan {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not a plan ({e}):\n{text}"))
}

/// `inventory --format json`: the managed objects grouped by box.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Inventory {
    /// The schema version of every document (`2`).
    pub schema_version: u32,
    pub engine: String,
    /// The engine's address.
    #[serde(default)]
    pub endpoint: Option<String>,
    pub scope: BTreeMap<String, String>,
    pub boxes: Vec<InventoryBox>,
    pub retained: Retained,
}

impl Inventory {
    /// The group of box `b` (`None`: objects without a box label), failing the test if none.
    #[track_caller]
    pub fn group(&self, b: Option<&str>) -> &InventoryBox {
        self.boxes
            .iter()
            .find(|g| g.box_id.as_deref() == b)
            .unwrap_or_else(|| panic!("no group {b:?}: {self:#?}"))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct InventoryBox {
    #[serde(rename = "box")]
    pub box_id: Option<String>,
    pub containers: Vec<InventoryContainer>,
    pub volumes: Vec<String>,
    pub networks: Vec<InventoryNetwork>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct InventoryContainer {
    pub id: String,
    pub name: String,
    pub state: String,
    /// Names of the managed volumes it mounts.
    pub mounts: Vec<String>,
    /// Names of the managed networks it is attached to.
    pub networks: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct InventoryNetwork {
    pub id: String,
    pub name: String,
}

impl Output {
    /// Stdout read as an inventory, failing the test (showing both streams) if it is not one.
    #[track_caller]
    pub fn inventory(&self) -> Inventory {
        self.parse("a JSON inventory")
    }
}
