//! Why the planner, apply or verify did what it did with an object: the typed
//! `Reason` with its stable `code`, and `Ref`, another object a reason names.
//!
//! Owns the words of every reason (`Display`) and its JSON (`code`, its
//! fields, then `text`: those words). The words are raw: engine-given names
//! and times are only shortened (`cut`), never escaped; escaping for a
//! terminal is `render`'s job, and JSON keeps the exact text.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::model::{short_id, Kind, Owner};

/// The most characters of an engine-given name, box ID or time that a
/// reason's words quote (longer ones are cut with an ellipsis).
const QUOTED_CHARS: usize = 64;

/// `text` cut to at most `max` characters with an ellipsis, not escaped (for
/// text that is escaped later, once, where it is shown).
pub(crate) fn cut(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    match text.char_indices().nth(max) {
        None => Cow::Borrowed(text),
        Some(_) => {
            let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
            out.push('…');
            Cow::Owned(out)
        }
    }
}

/// How an empty `ca.sandbox.id=` label's box is named in words: visibly,
/// not as nothing between two spaces ("box  is not declared").
pub(crate) const EMPTY_BOX_ID: &str = "(empty)";

/// A box ID for words: cut to `max` characters, an empty one
/// [`EMPTY_BOX_ID`]. Not escaped (`render` escapes).
pub(crate) fn box_words(box_id: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if box_id.is_empty() {
        std::borrow::Cow::Borrowed(EMPTY_BOX_ID)
    } else {
        cut(box_id, max)
    }
}

/// Another object a reason refers to, as the report names it.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[schemars(deny_unknown_fields)]
pub struct Ref {
    pub(crate) kind: Kind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    /// How it uses the object: `mounts`, `attached`, or a shared namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub how: Option<String>,
}

impl fmt::Display for Ref {
    /// `container web (3f2a1b4c5d6e, mounts)`: the kind, the name (cut), and
    /// the short ID and the use when known.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, cut(&self.name, QUOTED_CHARS))?;
        match (&self.id, &self.how) {
            (Some(id), Some(how)) => write!(f, " ({}, {how})", short_id(id)),
            (Some(id), None) => write!(f, " ({})", short_id(id)),
            (None, Some(how)) => write!(f, " ({how})"),
            (None, None) => Ok(()),
        }
    }
}

/// `a, b, c`: references in words.
struct Refs<'a>(&'a [Ref]);

impl fmt::Display for Refs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// One listing of discovery, as a reason or a failure names it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub enum Listing {
    /// The managed containers, or every container (to find unmanaged users).
    #[serde(rename = "containers")]
    Containers,
    #[serde(rename = "volumes")]
    Volumes,
    #[serde(rename = "networks")]
    Networks,
    /// The `ca-sbx:*` images (reported, never removed).
    #[serde(rename = "images")]
    Images,
    #[serde(rename = "services")]
    Services,
    #[serde(rename = "configs")]
    Configs,
    #[serde(rename = "secrets")]
    Secrets,
    /// The engine's clock, read to judge leases.
    #[serde(rename = "the engine's clock")]
    Clock,
}

impl Listing {
    /// `containers`, ..., `the engine's clock`: the word of its JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Listing::Containers => "containers",
            Listing::Volumes => "volumes",
            Listing::Networks => "networks",
            Listing::Images => "images",
            Listing::Services => "services",
            Listing::Configs => "configs",
            Listing::Secrets => "secrets",
            Listing::Clock => "the engine's clock",
        }
    }

    /// What the missing listing could have shown about a blocked object.
    fn could(self) -> &'static str {
        match self {
            Listing::Containers => "a container could use it",
            Listing::Volumes | Listing::Clock => "a lease could keep its box",
            Listing::Services => "a service could use it",
            Listing::Networks | Listing::Images | Listing::Configs | Listing::Secrets => {
                "it could be in use"
            }
        }
    }
}

impl fmt::Display for Listing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the planner, apply or verify did what it did with an object. Typed, with
/// a stable `code`. `Display` gives its words; its JSON is `{"code": ...,
/// <its fields>, "text": <the words>}` (the `text` is ignored when read back).
// Its schema is the derived one (`code` and the fields) with `text` added
// to every code (`with_text`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(remote = "Self", tag = "code", rename_all = "camelCase")]
#[schemars(rename = "Reason", deny_unknown_fields, transform = with_text)]
pub enum Reason {
    /// Removed: a managed object without `ca.sandbox.id`.
    NoBoxLabel,
    /// Removed: its box is not declared in the state file.
    #[serde(rename_all = "camelCase")]
    BoxNotDeclared { box_id: String },
    /// Removed: `destroy <box>` named its box (its lease, if one held, does
    /// not stop an explicit destroy; `leased_until` says it held).
    #[serde(rename_all = "camelCase")]
    DestroyRequested {
        box_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        leased_until: Option<String>,
    },
    /// Removed: its declared box expired (`expires` passed or `ttl` ran out).
    #[serde(rename_all = "camelCase")]
    Expired { box_id: String, at: String },
    /// Kept: its box is declared (until `expires`, when it has one).
    #[serde(rename_all = "camelCase")]
    DeclaredBox {
        box_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        line: Option<usize>,
    },
    /// Kept: an undeclared box younger than the grace period.
    WithinGrace { until: String },
    /// Kept: an undeclared box whose driver holds a live lease: the lease
    /// volume `lease` holds until `until` (the engine's clock, RFC 3339).
    #[serde(rename_all = "camelCase")]
    Leased {
        box_id: String,
        until: String,
        lease: String,
    },
    /// Kept: `destroy` named other boxes.
    NotNamedByDestroy,
    /// Kept: the volume is listed in `volumes.keep`.
    #[serde(rename_all = "camelCase")]
    KeptByFile {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        line: Option<usize>,
    },
    /// Kept: `destroy --keep-volume`.
    KeepVolumeFlag,
    /// Kept: a kept managed container mounts the volume or is attached to the network.
    MountedByKept { holders: Vec<Ref> },
    /// Blocked: an unmanaged container uses the object (mounts the volume, is
    /// attached to the network, or shares the container's namespace).
    HeldByUnmanaged { holders: Vec<Ref> },
    /// Blocked: a blocked object that stays uses it.
    WaitsForBlocked { object: Ref },
    /// Blocked: a container that could not be inspected (`holder`: the call
    /// failed or hung) could share this container's pid or ipc namespace,
    /// which only an inspection shows; it is never removed on a guess.
    HolderUnknown { holder: Ref, error: String },
    /// Blocked: the listing of `listing` failed, and what it would have
    /// shown could use this object (or, for leases, keep it).
    ListingFailed { listing: Listing, error: String },
    /// Blocked: an orchestrator owns the container (a Swarm service's task,
    /// a Nomad allocation, a Kubernetes pod) and would recreate it if it were
    /// removed directly; its owner is not managed.
    OwnedByOrchestrator { owner: Owner },
    /// Removed: a helper container that a run left behind while it archived
    /// or restored a volume (labeled `ca.sandbox.role=archive-helper`).
    ArchiveHelper,
    /// Failed: the engine refused or the call failed.
    RemovalFailed { error: String },
    /// Not removed: its archive could not be written (`--archive`), so the
    /// volume stays.
    ArchiveFailed { error: String },
    /// Refused: the object changed since it was listed (relabelled, recreated).
    Changed { detail: String },
    /// Not attempted: a step it waits for did not succeed.
    WaitsForFailed { step: usize, object: Ref },
    /// Not attempted: the run was interrupted.
    Interrupted,
    /// Not attempted: a saved plan's part is carried out only on an engine
    /// whose discovery is as complete as when the plan was made.
    PlanUnchecked,
    /// Still there after a successful removal: something recreated it.
    AppearedAfterPlan,
    /// Removed by another actor before or while this run removed it.
    AlreadyGone,
}

impl fmt::Display for Reason {
    /// The reason in words, for a person. Box IDs, times and names come from
    /// the engine or the state file: they are cut short, not escaped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let short = |s: &str| cut(s, QUOTED_CHARS).into_owned();
        let boxed = |s: &str| box_words(s, QUOTED_CHARS).into_owned();
        match self {
            Reason::NoBoxLabel => f.write_str("leaked: no ca.sandbox.id label"),
            Reason::BoxNotDeclared { box_id } => {
                write!(f, "leaked: box {} is not declared", boxed(box_id))
            }
            Reason::DestroyRequested {
                box_id,
                leased_until: None,
            } => write!(f, "destroy {} requested", boxed(box_id)),
            Reason::DestroyRequested {
                box_id,
                leased_until: Some(until),
            } => write!(
                f,
                "destroy {} requested (it was leased until {})",
                boxed(box_id),
                short(until)
            ),
            Reason::Expired { box_id, at } => {
                write!(f, "box {} expired at {}", boxed(box_id), short(at))
            }
            Reason::DeclaredBox {
                expires: Some(at), ..
            } => write!(f, "declared box, until {}", short(at)),
            Reason::DeclaredBox { .. } => f.write_str("declared box"),
            Reason::WithinGrace { until } => {
                write!(f, "within grace: eligible from {}", short(until))
            }
            Reason::Leased {
                box_id,
                until,
                lease,
            } => write!(
                f,
                "box {} leased until {} (lease volume {})",
                boxed(box_id),
                short(until),
                short(lease)
            ),
            Reason::NotNamedByDestroy => f.write_str("not named by destroy"),
            Reason::KeptByFile { .. } => f.write_str("listed in volumes.keep"),
            Reason::KeepVolumeFlag => f.write_str("--keep-volume"),
            Reason::MountedByKept { holders } => write!(f, "in use by kept {}", Refs(holders)),
            Reason::HeldByUnmanaged { holders } => write!(
                f,
                "in use by unmanaged {}; never forced: remove that {} first, or declare this object's box (a volume: list it in volumes.keep)",
                Refs(holders),
                if holders.iter().any(|h| h.kind == Kind::Service) {
                    "service"
                } else {
                    "container"
                }
            ),
            Reason::WaitsForBlocked { object } => write!(f, "in use by blocked {object}"),
            Reason::HolderUnknown { holder, error } => write!(
                f,
                "not removed: {holder} could share its namespaces and could not be inspected ({error}); run again when it answers"
            ),
            Reason::ListingFailed { listing, error } => write!(
                f,
                "not removed: the listing of {listing} failed ({error}), and {}; run again when the engine answers",
                listing.could()
            ),
            Reason::OwnedByOrchestrator { owner } => write!(
                f,
                "owned by {owner}, which would recreate it; never removed directly: {}",
                owner.advice()
            ),
            Reason::ArchiveHelper => f.write_str("leftover archive helper container"),
            Reason::RemovalFailed { error } => f.write_str(error),
            Reason::ArchiveFailed { error } => {
                write!(f, "not removed: its archive failed: {error}")
            }
            Reason::Changed { detail } => f.write_str(detail),
            Reason::WaitsForFailed { step, object } => write!(
                f,
                "not attempted: it waits for step {step} ({object}), which did not succeed"
            ),
            Reason::Interrupted => f.write_str("not attempted: the run was interrupted"),
            Reason::PlanUnchecked => f.write_str(
                "not attempted: a listing or an inspection failed, so the saved plan could not be checked against the engine; run again when it answers",
            ),
            Reason::AppearedAfterPlan => f.write_str(
                "appeared after the plan was made (or was recreated after its removal); run again",
            ),
            Reason::AlreadyGone => f.write_str("already gone: another actor removed it"),
        }
    }
}

impl Serialize for Reason {
    /// `{"code": ..., <its fields>, "text": <its words>}`.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        /// The derived (remote) form: `code` and the fields.
        struct Fields<'a>(&'a Reason);
        impl Serialize for Fields<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                Reason::serialize(self.0, s)
            }
        }
        #[derive(Serialize)]
        struct WithText<'a> {
            #[serde(flatten)]
            reason: Fields<'a>,
            text: String,
        }
        WithText {
            reason: Fields(self),
            text: self.to_string(),
        }
        .serialize(s)
    }
}

/// The schema's `text`, required in every code's object: the words
/// `Serialize` adds after the fields.
fn with_text(schema: &mut schemars::Schema) {
    let text = serde_json::json!({
        "type": "string",
        "description": "The reason in words, for a person (raw: not escaped)."
    });
    let Some(codes) = schema.get_mut("oneOf").and_then(|v| v.as_array_mut()) else {
        return;
    };
    for code in codes {
        if let Some(properties) = code.get_mut("properties").and_then(|p| p.as_object_mut()) {
            properties.insert("text".into(), text.clone());
        }
        if let Some(required) = code.get_mut("required").and_then(|r| r.as_array_mut()) {
            required.push("text".into());
        }
    }
}

impl<'de> Deserialize<'de> for Reason {
    /// The JSON `Serialize` writes; `text` (words) is ignored.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Reason::deserialize(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(name: &str) -> Ref {
        Ref {
            kind: Kind::Container,
            id: Some("0123456789abcdef0123".into()),
            name: name.into(),
            how: Some("mounts".into()),
        }
    }

    #[test]
    fn json_is_code_fields_then_text() {
        let reason = Reason::Expired {
            box_id: "a".into(),
            at: "2027-01-15T08:00:00Z".into(),
        };
        assert_eq!(
            serde_json::to_string(&reason).unwrap(),
            r#"{"code":"expired","boxId":"a","at":"2027-01-15T08:00:00Z","text":"box a expired at 2027-01-15T08:00:00Z"}"#
        );
        assert_eq!(
            serde_json::to_string(&Reason::NoBoxLabel).unwrap(),
            r#"{"code":"noBoxLabel","text":"leaked: no ca.sandbox.id label"}"#
        );
    }

    #[test]
    fn json_reads_back_ignoring_the_text() {
        let reason = Reason::HeldByUnmanaged {
            holders: vec![holder("web")],
        };
        let json = serde_json::to_string(&reason).unwrap();
        assert_eq!(serde_json::from_str::<Reason>(&json).unwrap(), reason);
        let edited = r#"{"code":"keptByFile","line":3,"text":"anything"}"#;
        assert_eq!(
            serde_json::from_str::<Reason>(edited).unwrap(),
            Reason::KeptByFile { line: Some(3) }
        );
    }

    /// The stable code of every reason, as in the JSON's `code` (the table of
    /// docs/report.md); a new reason fails to compile here until it has one.
    fn code(r: &Reason) -> &'static str {
        match r {
            Reason::NoBoxLabel => "noBoxLabel",
            Reason::BoxNotDeclared { .. } => "boxNotDeclared",
            Reason::DestroyRequested { .. } => "destroyRequested",
            Reason::Expired { .. } => "expired",
            Reason::DeclaredBox { .. } => "declaredBox",
            Reason::WithinGrace { .. } => "withinGrace",
            Reason::Leased { .. } => "leased",
            Reason::NotNamedByDestroy => "notNamedByDestroy",
            Reason::KeptByFile { .. } => "keptByFile",
            Reason::KeepVolumeFlag => "keepVolumeFlag",
            Reason::MountedByKept { .. } => "mountedByKept",
            Reason::HeldByUnmanaged { .. } => "heldByUnmanaged",
            Reason::WaitsForBlocked { .. } => "waitsForBlocked",
            Reason::HolderUnknown { .. } => "holderUnknown",
            Reason::ListingFailed { .. } => "listingFailed",
            Reason::OwnedByOrchestrator { .. } => "ownedByOrchestrator",
            Reason::ArchiveHelper => "archiveHelper",
            Reason::RemovalFailed { .. } => "removalFailed",
            Reason::ArchiveFailed { .. } => "archiveFailed",
            Reason::Changed { .. } => "changed",
            Reason::WaitsForFailed { .. } => "waitsForFailed",
            Reason::Interrupted => "interrupted",
            Reason::PlanUnchecked => "planUnchecked",
            Reason::AppearedAfterPlan => "appearedAfterPlan",
            Reason::AlreadyGone => "alreadyGone",
        }
    }

    #[test]
    fn code_is_the_json_code() {
        let every = [
            Reason::NoBoxLabel,
            Reason::BoxNotDeclared { box_id: "b".into() },
            Reason::DestroyRequested {
                box_id: "b".into(),
                leased_until: None,
            },
            Reason::DestroyRequested {
                box_id: "b".into(),
                leased_until: Some("t".into()),
            },
            Reason::Expired {
                box_id: "b".into(),
                at: "t".into(),
            },
            Reason::DeclaredBox {
                box_id: "b".into(),
                expires: None,
                line: None,
            },
            Reason::WithinGrace { until: "t".into() },
            Reason::Leased {
                box_id: "b".into(),
                until: "t".into(),
                lease: "v".into(),
            },
            Reason::NotNamedByDestroy,
            Reason::KeptByFile { line: None },
            Reason::KeepVolumeFlag,
            Reason::MountedByKept { holders: vec![] },
            Reason::HeldByUnmanaged { holders: vec![] },
            Reason::WaitsForBlocked {
                object: holder("x"),
            },
            Reason::HolderUnknown {
                holder: holder("x"),
                error: "e".into(),
            },
            Reason::ListingFailed {
                listing: Listing::Networks,
                error: "e".into(),
            },
            Reason::OwnedByOrchestrator {
                owner: Owner {
                    orchestrator: crate::model::Orchestrator::Swarm,
                    id: "s".into(),
                    name: None,
                    namespace: None,
                },
            },
            Reason::ArchiveHelper,
            Reason::RemovalFailed { error: "e".into() },
            Reason::ArchiveFailed { error: "e".into() },
            Reason::Changed { detail: "d".into() },
            Reason::WaitsForFailed {
                step: 1,
                object: holder("x"),
            },
            Reason::Interrupted,
            Reason::PlanUnchecked,
            Reason::AppearedAfterPlan,
            Reason::AlreadyGone,
        ];
        for r in every {
            let json = serde_json::to_value(&r).unwrap();
            assert_eq!(json["code"], code(&r), "{r:?}");
            assert_eq!(json["text"], r.to_string(), "{r:?}");
        }
    }

    #[test]
    fn words_cut_long_names_but_never_escape() {
        let long = "x".repeat(100);
        let words = Reason::BoxNotDeclared {
            box_id: format!("evil\u{1b}[2J\n{long}"),
        }
        .to_string();
        assert!(
            words.starts_with("leaked: box evil\u{1b}[2J\nxxx"),
            "{words:?}"
        );
        assert!(words.ends_with("… is not declared"), "{words:?}");
    }

    #[test]
    fn an_empty_box_id_is_named_visibly() {
        // Issue 43: "box  is not declared" named nothing.
        let words = Reason::BoxNotDeclared {
            box_id: String::new(),
        }
        .to_string();
        assert_eq!(words, "leaked: box (empty) is not declared");
        let words = Reason::DestroyRequested {
            box_id: String::new(),
            leased_until: None,
        }
        .to_string();
        assert_eq!(words, "destroy (empty) requested");
        assert_eq!(
            Reason::WaitsForFailed {
                step: 2,
                object: holder("web"),
            }
            .to_string(),
            "not attempted: it waits for step 2 (container web (0123456789ab, mounts)), which did not succeed"
        );
        assert_eq!(
            Reason::MountedByKept {
                holders: vec![
                    holder("a"),
                    Ref {
                        kind: Kind::Volume,
                        id: None,
                        name: "v".into(),
                        how: None
                    }
                ]
            }
            .to_string(),
            "in use by kept container a (0123456789ab, mounts), volume v"
        );
    }
}
