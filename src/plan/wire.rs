//! The plan as it is saved, printed as JSON and read back: `Plan`, its
//! `Step`s, `Entry`s, `Noted` objects, `Read`s, and the checks a saved plan
//! must pass (`Plan::validate`) with what it says (`scope`, `now`, ...).
//!
//! The serialized form is versioned by the document's `schemaVersion`
//! (`model::SCHEMA_VERSION`); a plan saved under schema version 1, or before
//! documents carried one, is read by its own `version` (`PLAN_VERSION`), and
//! its `why` as `reason` (decision 19). Must not decide what
//! happens to an object (that is `decide.rs`) or do I/O.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::time::{parse_rfc3339, system_time};
use crate::model::{
    ByKind, Kind, Labels, Object, ObjectKey, Reason, Ref, Scope, SANDBOX_LABEL, SANDBOX_VALUE,
};
use crate::plan::lease::{EngineClock, LeaseNote};
use crate::plan::Goal;

/// The format `version` a plan saved under schema version 1 (or before
/// documents carried `schemaVersion`) carries; no longer printed (the plan's
/// one version is its `schemaVersion`), read only to judge such a plan.
pub(crate) const PLAN_VERSION: u32 = 2;

/// An object as the plan and the report name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
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
    #[schemars(with = "String", extend("format" = "date-time"))]
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
    pub(super) fn of(o: &Object) -> Entry {
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

/// One removal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// 1-based position in the plan's order.
    pub step: usize,
    #[serde(flatten)]
    pub object: Entry,
    /// Why the object goes (`reason`; `why` in a plan saved under schema version 1).
    #[serde(rename = "reason", alias = "why")]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Read {
    /// The volume's own step.
    pub step: usize,
    pub volume: String,
    /// Where the container mounts it.
    pub path: String,
}

/// An object that is kept or blocked, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Noted {
    #[serde(flatten)]
    pub object: Entry,
    /// Why it stays (`reason`; `why` in a plan saved under schema version 1).
    #[serde(rename = "reason", alias = "why")]
    pub why: Reason,
}

/// What the plan leaves in place on purpose, by kind.
pub(crate) type Kept = ByKind<Vec<Noted>>;

/// The images the plan retains: every `ca-sbx:*` image.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Retained {
    pub images: Vec<crate::model::ImageInfo>,
}

/// The plan. Serializes to the JSON that `plan --format json` prints and
/// `plan --out` saves; `apply FILE` reads it back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// The format of a plan saved under schema version 1 or before (read,
    /// never printed: the plan's version is its `schemaVersion`).
    #[serde(default, skip_serializing)]
    pub(crate) version: Option<u32>,
    /// The engine the plan was made for.
    pub(crate) engine: String,
    /// Its address when the plan was made, as `Engine:` says it in human
    /// output (what `apply FILE` acts on is the engine of that name now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) endpoint: Option<String>,
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
    /// The box IDs the goal names (`destroy ID...`) that no managed object
    /// of this engine carries, sorted: a fact the run's verdict judges
    /// (`exec::report::Unmatched`), never a step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown_boxes: Vec<String>,
    /// The fingerprint of `basis`.
    pub(crate) fingerprint: String,
    /// What the plan was built from: one digest per managed object (see `Inventory::basis`).
    pub(crate) basis: BTreeMap<String, String>,
}

impl Plan {
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
        if let Some(version) = self.version.filter(|v| *v != PLAN_VERSION) {
            return Err(format!(
                "plan version {version} is not supported (expected {PLAN_VERSION}); make a new plan with `sandboxctl plan --out`"
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
