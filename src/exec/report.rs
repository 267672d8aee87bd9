//! The report of a run: what every apply, destroy, saved plan and watch
//! cycle ends with, per engine (`Report`, or `Early` / `PartError` when an
//! engine's part stopped before removing anything) and merged over every
//! engine (`FleetReport`, the one `merge`), and the `Verdict` the exit status
//! is decided from. The read-only commands (plan, inventory, graph, explain)
//! go through the same merge: each engine's part is what it showed
//! (`Shown`), judged as a report that removed nothing and converged only
//! when the engine answered everything.
//!
//! Owns the report's shape (its JSON keys are a public contract), the one
//! merge, and what the removals gave back (`Reclaimed`: each removed
//! object's `reclaimedBytes`, and their total). Pure data: no engine call, no printing; `verify` fills a `Report`.

use std::time::Duration;

use serde::Serialize;

use crate::exec::list::InventoryError;
use crate::model::{ByKind, Kind, Outcome, Reason};
use crate::plan::{Entry, Kept, Retained};

/// An object named in a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Named {
    pub(crate) engine: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) id: Option<String>,
    pub name: String,
    #[serde(rename = "box")]
    pub(crate) box_id: Option<String>,
}

impl Named {
    pub(crate) fn of(e: &Entry) -> Named {
        Named {
            engine: e.engine.clone(),
            id: e.id.clone(),
            name: e.name.clone(),
            box_id: e.box_id.clone(),
        }
    }
}

/// A removed object, whether this run removed it or found it gone, and
/// what it gave back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Gone {
    #[serde(flatten)]
    pub(crate) object: Named,
    /// `Removed`, or `AlreadyGone` (another actor removed it first).
    #[schemars(schema_with = "crate::model::gone_schema")]
    pub outcome: Outcome,
    /// The bytes it gave back, as the engine measured them before its
    /// removal (`--reclaimed`: a container's writable layer, a volume's
    /// content) or, for a volume archived first, its archived files. `null`
    /// when not measured, and for an object another actor removed (what it
    /// gave back is not known to this run); never 0 for unknown.
    #[serde(rename = "reclaimedBytes")]
    pub reclaimed_bytes: Option<u64>,
}

/// What the removals of a report gave back: the sum of the figures known,
/// and how many removed objects that hold space (containers, volumes) have
/// none. JSON: `reclaimedBytes` (null when such objects were removed and
/// none of them was measured; 0 when none was removed) and
/// `reclaimedUnmeasured`. Additive, so the merge only adds up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reclaimed {
    /// The sum of the known figures.
    pub bytes: u64,
    /// Removed objects with a known figure.
    pub measured: u64,
    /// Removed containers and volumes without one.
    pub unmeasured: u64,
}

impl Reclaimed {
    /// The total over `removed`'s containers and volumes (the other kinds
    /// hold no space the engine measures, and are not counted).
    pub(crate) fn of(removed: &Removed) -> Reclaimed {
        let mut total = Reclaimed::default();
        for kind in Kind::HOLDS_SPACE {
            for gone in removed.get(kind) {
                total.count(kind, &gone.outcome, gone.reclaimed_bytes);
            }
        }
        total
    }

    /// The one rule for what counts toward what the removals gave back,
    /// used by the report (`reclaimedBytes`, `reclaimedUnmeasured`), its
    /// human line and the MCP summary (`render`) and the metrics
    /// (`sandboxctl_reclaimed_*`): an object of a kind that holds space
    /// (container, volume) that this run removed. An object another actor
    /// removed first gave this run nothing: it is neither measured nor
    /// unmeasured.
    pub(crate) fn counts(kind: Kind, outcome: &Outcome) -> bool {
        kind.holds_space() && *outcome == Outcome::Removed
    }

    /// Counts one object by that rule: its figure, or unmeasured when the
    /// engine gave none.
    pub(crate) fn count(&mut self, kind: Kind, outcome: &Outcome, figure: Option<u64>) {
        if Reclaimed::counts(kind, outcome) {
            self.add(figure);
        }
    }

    /// Counts one removed object's figure.
    pub(crate) fn add(&mut self, figure: Option<u64>) {
        match figure {
            Some(bytes) => {
                self.bytes = self.bytes.saturating_add(bytes);
                self.measured += 1;
            }
            None => self.unmeasured += 1,
        }
    }

    /// Adds `other`'s counts to these.
    pub(crate) fn absorb(&mut self, other: Reclaimed) {
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.measured += other.measured;
        self.unmeasured += other.unmeasured;
    }

    /// The total in bytes: `None` when something was removed and nothing
    /// of it was measured (unknown is never 0).
    pub fn total(&self) -> Option<u64> {
        (self.measured > 0 || self.unmeasured == 0).then_some(self.bytes)
    }
}

/// `reclaimedBytes` and `reclaimedUnmeasured`, flat among the report's keys.
fn reclaimed_keys<S: serde::Serializer>(r: &Reclaimed, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = s.serialize_map(Some(2))?;
    map.serialize_entry("reclaimedBytes", &r.total())?;
    map.serialize_entry("reclaimedUnmeasured", &r.unmeasured)?;
    map.end()
}

/// An object still there after the run, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Leftover {
    #[serde(flatten)]
    pub object: Named,
    pub reason: Reason,
}

/// A box ID `destroy` named that no managed object in scope carries (on
/// any engine that could be listed), and how the run judged it: a named
/// target that matches nothing is never done by itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct UnknownBox {
    pub id: String,
    pub status: Unmatched,
    /// The audit log's latest removal of an object of this box (in scope),
    /// when `status` is `removedEarlier`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed: Option<EarlierRemoval>,
}

/// How a run judges a named box that nothing carries.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum Unmatched {
    /// Nothing carries it, and nothing says it was removed: the run fails.
    NotFound,
    /// Nothing carries it, and `--missing-ok` (`missingOk`) says that is fine.
    MissingOk,
    /// Nothing carries it, and the audit log records its removal: a retry
    /// of a teardown that worked.
    RemovedEarlier,
}

/// A removal the audit log records: when, on which engine, what and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct EarlierRemoval {
    /// The line's `time` (RFC 3339).
    pub time: String,
    pub engine: String,
    /// The removed object's kind and name.
    pub kind: String,
    pub name: String,
    /// The reason's code on that line (`namedByDestroy`: a `destroy`;
    /// `boxNotDeclared`, `expired`, ...: an `apply`, a prune or a watch).
    pub code: String,
    /// The reason's words on that line.
    pub text: String,
    /// The audit log it was read from.
    pub log: String,
}

impl UnknownBox {
    /// `id`, not found (yet to be judged further).
    pub(crate) fn not_found(id: &str) -> UnknownBox {
        UnknownBox {
            id: id.to_string(),
            status: Unmatched::NotFound,
            removed: None,
        }
    }

    /// True when this box fails the run.
    pub(crate) fn fails(&self) -> bool {
        self.status == Unmatched::NotFound
    }
}

/// One thing that went wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Failure {
    /// `container`, `volume`, `network`, `service`, `config`, `secret`, or
    /// `engine` (a listing or the connection).
    #[schemars(schema_with = "failure_kind_schema")]
    pub kind: String,
    pub(crate) engine: String,
    pub(crate) name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub error: String,
}

/// The schema of a failure's `kind`: a kind, or `engine`.
fn failure_kind_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut kinds: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
    kinds.push("engine");
    crate::model::codes_schema(
        &kinds,
        "The kind of the object that failed, or `engine` (a listing, an inspection or the connection).",
    )
}

impl Failure {
    /// The failure of an engine (a listing, an inspection, the connection)
    /// at `endpoint`, not of one object.
    pub(crate) fn engine(engine: &str, endpoint: &str, error: String) -> Failure {
        Failure {
            kind: "engine".into(),
            engine: engine.to_string(),
            name: endpoint.to_string(),
            id: None,
            error,
        }
    }

    /// The failure of one object.
    pub(crate) fn of(object: &Entry, error: String) -> Failure {
        Failure {
            kind: object.kind.as_str().into(),
            engine: object.engine.clone(),
            name: object.name.clone(),
            id: object.id.clone(),
            error,
        }
    }
}

/// Removed objects, by kind.
type Removed = ByKind<Vec<Gone>>;

/// A volume archived before its removal (`--archive`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ArchivedVolume {
    pub(crate) engine: String,
    pub volume: String,
    #[serde(rename = "box")]
    pub(crate) box_id: Option<String>,
    /// The archive, under its final name (its manifest is beside it).
    pub path: String,
    pub sha256: String,
    /// The archive's size in bytes.
    pub bytes: u64,
    /// Milliseconds from the request for the volume's content until the
    /// archive stood under its final name, synced (helper not included).
    #[serde(rename = "elapsedMs")]
    pub elapsed_ms: u64,
}

/// The end of every apply and destroy. Its JSON keys are a public contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub converged: bool,
    /// The time the plan was judged at (RFC 3339), when there was a plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) now: Option<String>,
    pub removed: Removed,
    /// What the removals gave back, in total (see [`Reclaimed`]): JSON
    /// `reclaimedBytes` and `reclaimedUnmeasured`, here among the report's keys.
    #[serde(flatten, serialize_with = "reclaimed_keys")]
    #[schemars(with = "ReclaimedKeys")]
    pub reclaimed: Reclaimed,
    /// Volumes archived before their removal; absent when none was.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub archived: Vec<ArchivedVolume>,
    pub(crate) kept: Kept,
    pub(crate) retained: Retained,
    pub failures: Vec<Failure>,
    /// What is still there, by kind. JSON: `remainingContainers`,
    /// `remainingVolumes`, `remainingNetworks` (and `remainingServices`,
    /// `remainingConfigs`, `remainingSecrets` when not empty), here among the
    /// report's keys.
    #[serde(flatten, serialize_with = "remaining_keys")]
    #[schemars(with = "RemainingKeys")]
    pub(crate) remaining: ByKind<Vec<Leftover>>,
    /// True if the run was interrupted before every removal was started.
    pub(crate) interrupted: bool,
    /// The box IDs `destroy` named that nothing in scope carries, each
    /// judged (`notFound` fails the run); absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unknown_boxes: Vec<UnknownBox>,
    /// True when this prune found no state file and was given no
    /// `--scope`: every box labeled `ca.sandbox=1` on the engine counted
    /// as leaked. Absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub no_state_file: bool,
    /// True when the person at the terminal answered no to the question
    /// before a prune: nothing was removed. Absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub declined: bool,
    /// True if discovery could not learn everything (a listing or an
    /// inspection failed) while the engine answered: the run went on with
    /// what was proven safe. Not in the JSON (its failures say it).
    #[serde(skip)]
    pub(crate) degraded: bool,
    /// True when the final listing answered (verification listed the
    /// engine again after the removals): what it says gone is proven gone.
    /// Per engine's part; not in the JSON. The notifier sends `removed`
    /// only on it.
    #[serde(skip)]
    pub(crate) verified: bool,
}

/// The schema of the keys [`reclaimed_keys`] writes (never made: a schema only).
#[derive(schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct ReclaimedKeys {
    /// The bytes the removals gave back: the sum of the figures known;
    /// `null` when containers or volumes were removed and none of them was
    /// measured; 0 when none was removed.
    reclaimed_bytes: Option<u64>,
    /// Removed containers and volumes whose figure is not known.
    reclaimed_unmeasured: u64,
}

/// The schema of the keys [`remaining_keys`] writes (never made: a schema only).
#[derive(schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct RemainingKeys {
    remaining_containers: Vec<Leftover>,
    remaining_volumes: Vec<Leftover>,
    remaining_networks: Vec<Leftover>,
    /// The Swarm kinds: only when something of theirs is left.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    remaining_services: Vec<Leftover>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    remaining_configs: Vec<Leftover>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    remaining_secrets: Vec<Leftover>,
}

/// The leftovers as the report's flat keys `remainingContainers`, ...
fn remaining_keys<S: serde::Serializer>(
    remaining: &ByKind<Vec<Leftover>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = s.serialize_map(None)?;
    for kind in [Kind::Container, Kind::Volume, Kind::Network] {
        map.serialize_entry(remaining_key(kind), remaining.get(kind))?;
    }
    // The Swarm kinds only when something of theirs is left (an engine
    // without them gives the same keys as before they were added).
    for kind in Kind::SWARM {
        let left = remaining.get(kind);
        if !left.is_empty() {
            map.serialize_entry(remaining_key(kind), left)?;
        }
    }
    map.end()
}

/// The report's key of what is left of `kind`: `remainingContainers`, ...
pub(crate) fn remaining_key(kind: Kind) -> &'static str {
    match kind {
        Kind::Container => "remainingContainers",
        Kind::Volume => "remainingVolumes",
        Kind::Network => "remainingNetworks",
        Kind::Service => "remainingServices",
        Kind::Config => "remainingConfigs",
        Kind::Secret => "remainingSecrets",
    }
}

impl Report {
    /// A report with nothing in it yet.
    pub(crate) fn empty() -> Report {
        Report {
            converged: false,
            now: None,
            removed: Removed::default(),
            reclaimed: Reclaimed::default(),
            archived: vec![],
            kept: Kept::default(),
            retained: Retained::default(),
            failures: vec![],
            remaining: ByKind::default(),
            interrupted: false,
            unknown_boxes: vec![],
            no_state_file: false,
            declined: false,
            degraded: false,
            verified: false,
        }
    }

    /// The report for a run that could not even list (or load its plan): nothing
    /// was removed, nothing is known to be converged.
    pub(crate) fn failed_before_apply(engine: &str, endpoint: &str, error: String) -> Report {
        let mut report = Report::empty();
        report
            .failures
            .push(Failure::engine(engine, endpoint, error));
        report
    }

    /// Every leftover, containers first.
    pub fn all_remaining(&self) -> impl Iterator<Item = &Leftover> {
        self.remaining.all()
    }

    /// Merges `part` (one engine's report) into this whole (a fleet's): every
    /// per-kind list and the failures are extended, retained images added
    /// once, `converged` only if every part converged (start a whole from
    /// `Report::empty()` with `converged = true`), `interrupted` if any part
    /// was, `now` from the first part that has one, and what the removals
    /// gave back added up.
    pub(crate) fn absorb(&mut self, part: &Report) {
        self.converged &= part.converged;
        self.interrupted |= part.interrupted;
        self.degraded |= part.degraded;
        if self.now.is_none() {
            self.now.clone_from(&part.now);
        }
        self.removed.extend_from(&part.removed);
        self.reclaimed.absorb(part.reclaimed);
        self.archived.extend_from_slice(&part.archived);
        self.kept.extend_from(&part.kept);
        for image in &part.retained.images {
            if !self.retained.images.contains(image) {
                self.retained.images.push(image.clone());
            }
        }
        self.failures.extend_from_slice(&part.failures);
        self.remaining.extend_from(&part.remaining);
    }

    /// The report of a saved plan's part that could not be checked against
    /// its engine (`Early::Incomplete`): nothing was removed; the fresh
    /// plan's failed listings and inspections are the failures, and every
    /// object it saw that would go or is blocked is named.
    pub(crate) fn unchecked(engine: &str, endpoint: &str, fresh: &crate::plan::Plan) -> Report {
        let mut report = Report::empty();
        report.now = Some(fresh.now.clone());
        report.kept = fresh.kept.clone();
        report.retained = fresh.retained.clone();
        report.degraded = true;
        for text in &fresh.incomplete {
            report
                .failures
                .push(Failure::engine(engine, endpoint, text.clone()));
        }
        for step in &fresh.steps {
            report.push_leftover(&step.object, Reason::PlanUnchecked);
        }
        for b in &fresh.blocked {
            report.push_leftover(&b.object, b.why.clone());
        }
        report
    }

    pub(crate) fn push_leftover(&mut self, object: &Entry, reason: Reason) {
        let left = Leftover {
            object: Named::of(object),
            reason,
        };
        self.remaining.push(object.kind, left);
    }
}

/// Why a reconcile stopped before removing anything.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum Early {
    /// A listing (or the inspection of unmanaged containers) failed: nothing
    /// may be planned from a partial inventory.
    #[error(transparent)]
    Listing(#[from] InventoryError),
    /// The managed inventory changed since the saved plan was made.
    #[error("the managed inventory changed since it was made ({changes}); nothing was removed")]
    Stale { changes: String },
    /// The engine's discovery is incomplete now (a listing or an inspection
    /// failed) while it was complete when the saved plan was made: the plan
    /// cannot be checked. Carries the fresh plan, whose objects are named.
    #[error("{}", .0.incomplete.join("; "))]
    Incomplete(Box<crate::plan::Plan>),
    /// The saved plan is not the plan of the inventory it was made from.
    #[error("its steps are not the plan of the inventory it was made from (was it edited?); nothing was removed")]
    Edited,
}

/// A saved plan could not be read, parsed, written or used.
#[derive(Debug, Clone, thiserror::Error)]
#[error("plan file {}: {detail}", path.display())]
pub(crate) struct PlanFileError {
    pub(crate) path: std::path::PathBuf,
    pub(crate) detail: String,
}

/// Per-engine summary of a fleet's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EngineSummary {
    pub(crate) engine: String,
    pub(crate) endpoint: String,
    pub(crate) converged: bool,
    pub(crate) removed: usize,
    pub(crate) failures: usize,
    pub(crate) remaining: usize,
    /// Why the engine's part did not run (unreachable, listing failed, stale plan).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
}

/// One engine's part of a run: its name, how long it took, and its result
/// (a report, or what a read-only command showed) or why it stopped before
/// removing anything. Kept by name, never by position.
#[derive(Debug, Clone)]
pub(crate) struct Part<T = Report> {
    pub(crate) engine: String,
    pub(crate) endpoint: String,
    pub(crate) took: Duration,
    pub(crate) result: Result<T, PartError>,
}

impl<T: Judged> Part<T> {
    /// The part's report; for a part that stopped early, the report of a run
    /// that failed before apply, naming this engine and why.
    pub(crate) fn report(&self) -> std::borrow::Cow<'_, Report> {
        match &self.result {
            Ok(r) => r.judged(&self.engine, &self.endpoint),
            Err(e) => std::borrow::Cow::Owned(Report::failed_before_apply(
                &self.engine,
                e.object(&self.endpoint),
                e.to_string(),
            )),
        }
    }
}

/// What a part's result counts as in the merge: a report is itself; what a
/// read-only command showed is a report that removed nothing.
pub(crate) trait Judged {
    fn judged(&self, engine: &str, endpoint: &str) -> std::borrow::Cow<'_, Report>;
}

impl Judged for Report {
    fn judged(&self, _: &str, _: &str) -> std::borrow::Cow<'_, Report> {
        std::borrow::Cow::Borrowed(self)
    }
}

/// What a read-only command (plan, inventory, graph, explain) showed of one
/// engine, and what that engine's discovery could not learn (each a failure
/// of kind `engine`: shown as far as it is known, the run fails).
#[derive(Debug, Clone)]
pub(crate) struct Shown<T> {
    pub(crate) value: T,
    pub(crate) incomplete: Vec<String>,
}

impl<T> Judged for Shown<T> {
    fn judged(&self, engine: &str, endpoint: &str) -> std::borrow::Cow<'_, Report> {
        let mut report = Report::empty();
        report.converged = self.incomplete.is_empty();
        report.degraded = !self.incomplete.is_empty();
        for text in &self.incomplete {
            report
                .failures
                .push(Failure::engine(engine, endpoint, text.clone()));
        }
        std::borrow::Cow::Owned(report)
    }
}

/// Why an engine's part stopped before removing anything.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum PartError {
    /// Listing, planning or the saved-plan checks on this engine.
    #[error(transparent)]
    Early(#[from] Early),
    /// The saved plan cannot be carried out on this engine.
    #[error(transparent)]
    PlanFile(#[from] PlanFileError),
    /// `explain` could not answer on this engine: a listing of its own
    /// failed, or nothing there is what the query names.
    #[error("{0}")]
    Explain(String),
}

impl PartError {
    /// What the failure names besides the engine: the plan file, or the engine's address.
    fn object<'a>(&self, endpoint: &'a str) -> &'a str {
        match self {
            PartError::PlanFile(_) => "plan file",
            PartError::Early(_) | PartError::Explain(_) => endpoint,
        }
    }
}

/// A fleet's report: the seed's keys over every engine (each entry carries
/// its `engine`), and a summary per engine (printed as one document by
/// `render::report`).
#[derive(Debug, Clone)]
pub struct FleetReport<T = Report> {
    pub(crate) report: Report,
    pub(crate) engines: Vec<EngineSummary>,
    /// Every engine's part, by name, for grouped output and watch's log.
    pub(crate) parts: Vec<Part<T>>,
}

/// Merges per-engine parts into one report. Pure. Converged only when there
/// is at least one part and every part converged: a part that failed before
/// apply is a failure of kind `engine` naming its engine. The one merge of
/// every command that runs on engines: a read-only command's parts
/// ([`Shown`]) converge when their engine answered everything.
pub(crate) fn merge<T: Judged>(parts: Vec<Part<T>>) -> FleetReport<T> {
    let mut merged = Report::empty();
    merged.converged = !parts.is_empty();
    let mut engines = Vec::new();
    // A named box is unknown to the fleet when no engine that was listed
    // carries it (an engine that was not fails the run by itself).
    let mut unknown: Option<std::collections::BTreeSet<String>> = None;
    for part in &parts {
        let report = part.report();
        if part.result.is_ok() {
            let here = report.unknown_boxes.iter().map(|u| u.id.clone()).collect();
            unknown = Some(match unknown {
                None => here,
                Some(before) => before.intersection(&here).cloned().collect(),
            });
        }
        engines.push(EngineSummary {
            engine: part.engine.clone(),
            endpoint: part.endpoint.clone(),
            converged: report.converged,
            removed: report.removed.len(),
            failures: report.failures.len(),
            remaining: report.all_remaining().count(),
            error: part.result.as_ref().err().map(ToString::to_string),
        });
        merged.absorb(&report);
    }
    merged.unknown_boxes = unknown
        .unwrap_or_default()
        .iter()
        .map(|id| UnknownBox::not_found(id))
        .collect();
    FleetReport {
        report: merged,
        engines,
        parts,
    }
}

/// How a command came out, as far as its exit status goes: made from the
/// merged report (every command that runs on engines, the read-only ones
/// too), or a lease run, a restore, a hold; with how a signal stopped the
/// run, it is `cli::exit::Ended`, the one input of `Exit::of`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Verdict {
    /// Something failed: a listing, a removal, the verification, an engine.
    pub(crate) failed: bool,
    /// Stopped by Ctrl-C before every removal started.
    pub(crate) interrupted: bool,
    /// `plan --detailed-exitcode` with changes pending.
    pub(crate) pending: bool,
    /// `hold`: how the command it ran ended (its status is passed through).
    pub(crate) command: Option<crate::exec::hold::CommandEnd>,
    /// A prune the person at the terminal said no to: nothing was removed
    /// (a failure: what was asked for was not done).
    pub(crate) declined: bool,
}

impl Verdict {
    /// The verdict of a converging run: failed unless the merged report
    /// converged and every box it was told to destroy was found (or is
    /// excused: `--missing-ok`, or removed earlier by the audit log).
    pub(crate) fn of_report(report: &Report) -> Verdict {
        Verdict {
            failed: !report.converged || report.unknown_boxes.iter().any(UnknownBox::fails),
            interrupted: report.interrupted,
            declined: report.declined,
            ..Verdict::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ImageInfo;
    use crate::model::Kind;
    use crate::plan::Noted;

    fn entry(kind: Kind, name: &str) -> Entry {
        Entry {
            engine: "e".into(),
            kind,
            id: None,
            name: name.into(),
            box_id: None,
            state: None,
            created: None,
        }
    }

    fn part(name: &str, converged: bool, image: &str) -> Report {
        let mut r = Report::empty();
        r.converged = converged;
        r.now = Some(format!("now-{name}"));
        r.removed.push(
            Kind::Volume,
            Gone {
                object: Named::of(&entry(Kind::Volume, name)),
                outcome: Outcome::Removed,
                reclaimed_bytes: Some(1000),
            },
        );
        r.kept.push(
            Kind::Network,
            Noted {
                object: entry(Kind::Network, name),
                why: Reason::NotNamedByDestroy,
            },
        );
        r.retained.images.push(ImageInfo {
            id: image.into(),
            tags: vec![],
        });
        r.push_leftover(&entry(Kind::Container, name), Reason::Interrupted);
        r.failures
            .push(Failure::of(&entry(Kind::Container, name), "boom".into()));
        r.reclaimed = Reclaimed::of(&r.removed);
        r
    }

    #[test]
    fn what_was_reclaimed_adds_up_over_engines_and_unknown_stays_null() {
        let removed = |figures: &[Option<u64>]| {
            let mut r = Report::empty();
            for (i, figure) in figures.iter().enumerate() {
                r.removed.push(
                    Kind::Volume,
                    Gone {
                        object: Named::of(&entry(Kind::Volume, &format!("v{i}"))),
                        outcome: Outcome::Removed,
                        reclaimed_bytes: *figure,
                    },
                );
            }
            r.reclaimed = Reclaimed::of(&r.removed);
            r
        };
        let merged = |parts: &[&Report]| {
            let mut whole = Report::empty();
            for p in parts {
                whole.absorb(p);
            }
            whole.reclaimed
        };
        let known = removed(&[Some(1_000), Some(0)]);
        let unknown = removed(&[None, None]);
        let nothing = removed(&[]);
        assert_eq!(known.reclaimed.total(), Some(1_000));
        assert_eq!(unknown.reclaimed.total(), None, "never 0 for unknown");
        assert_eq!(nothing.reclaimed.total(), Some(0), "nothing removed: 0");
        // An engine that removed nothing leaves another's unknown unknown.
        assert_eq!(merged(&[&nothing, &unknown]).total(), None);
        assert_eq!(merged(&[&nothing, &unknown]).unmeasured, 2);
        // Known and unknown: the sum of what is known, the rest counted.
        let both = merged(&[&known, &unknown, &nothing]);
        assert_eq!((both.total(), both.unmeasured), (Some(1_000), 2));
        // The one merge carries it (its JSON keys: render::report's tests).
        let part = |r: Report| Part {
            engine: "e".into(),
            endpoint: "memory".into(),
            took: Duration::ZERO,
            result: Ok(r),
        };
        let fleet = merge(vec![part(known), part(unknown)]);
        let reclaimed = &fleet.report.reclaimed;
        assert_eq!((reclaimed.total(), reclaimed.unmeasured), (Some(1_000), 2));
        let none = merge(vec![part(removed(&[None]))]);
        assert_eq!(none.report.reclaimed.total(), None);
    }

    #[test]
    fn absorb_merges_parts_into_a_whole() {
        let mut whole = Report::empty();
        whole.converged = true;
        whole.absorb(&part("a", true, "sha256:1"));
        assert!(whole.converged);
        let mut b = part("b", false, "sha256:1");
        b.interrupted = true;
        whole.absorb(&b);
        let names = |list: &Vec<Leftover>| {
            list.iter()
                .map(|l| l.object.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&whole.remaining.containers), ["a", "b"]);
        assert_eq!(whole.removed.volumes.len(), 2);
        assert_eq!(whole.kept.networks.len(), 2);
        assert_eq!(whole.failures.len(), 2);
        assert_eq!(whole.retained.images.len(), 1, "retained images once");
        assert!(!whole.converged && whole.interrupted);
        assert_eq!(whole.now.as_deref(), Some("now-a"));
    }

    fn shown(engine: &str, result: Result<Shown<u8>, PartError>) -> Part<Shown<u8>> {
        Part {
            engine: engine.into(),
            endpoint: format!("unix:///{engine}.sock"),
            took: Duration::ZERO,
            result,
        }
    }

    #[test]
    fn what_read_only_commands_showed_goes_through_the_one_merge() {
        let complete = || {
            Ok(Shown {
                value: 1,
                incomplete: vec![],
            })
        };
        let all = merge(vec![shown("a", complete()), shown("b", complete())]);
        assert!(all.report.converged && all.report.failures.is_empty());
        assert!(!Verdict::of_report(&all.report).failed);
        // One engine down: its part fails, named; the other is still there.
        let down = merge(vec![
            shown("a", Err(PartError::Explain("boom".into()))),
            shown("b", complete()),
        ]);
        assert!(!down.report.converged);
        assert_eq!(down.report.failures.len(), 1);
        assert_eq!(down.report.failures[0].engine, "a");
        assert_eq!(down.report.failures[0].name, "unix:///a.sock");
        assert!(down.parts[1].result.is_ok());
        assert!(Verdict::of_report(&down.report).failed);
        // Shown as far as it is known: a failure of kind engine, the run fails.
        let partial = merge(vec![shown(
            "a",
            Ok(Shown {
                value: 1,
                incomplete: vec!["could not list volumes: 500".into()],
            }),
        )]);
        assert!(!partial.report.converged && partial.report.degraded);
        assert_eq!(partial.report.failures[0].kind, "engine");
        assert_eq!(partial.engines[0].failures, 1);
        assert!(Verdict::of_report(&partial.report).failed);
    }

    #[test]
    fn remaining_keys_are_flat_in_the_json() {
        let json = serde_json::to_string(&part("a", false, "i")).unwrap();
        let at = |key: &str| {
            json.find(&format!("\"{key}\":"))
                .unwrap_or_else(|| panic!("{key}: {json}"))
        };
        assert!(at("failures") < at("remainingContainers"));
        assert!(at("remainingContainers") < at("remainingVolumes"));
        assert!(at("remainingVolumes") < at("remainingNetworks"));
        assert!(at("remainingNetworks") < at("interrupted"));
        assert!(!json.contains("\"remaining\""), "{json}");
    }
}
