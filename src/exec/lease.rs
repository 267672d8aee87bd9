//! Leases on one engine: taking one (`lease BOX`), a hold's renewal
//! (`renew`), and releasing a box's leases (`lease --release BOX`).
//!
//! Owns the engine calls of the lease protocol and what they may remove:
//! only volumes that pass `model::lease::is_lease_of` on the client (the
//! listing's label filter is never trusted alone), and in a renewal only the
//! lease that hold made before. A new lease is a volume with a new name
//! (`model::lease::lease_name`); the engine's answer must carry the labels
//! asked for (Docker answers an existing name with that volume, unchanged)
//! and a creation time. Until when a lease holds is the engine's stamp plus
//! the ttl: this machine's clock is never read to judge one.
//!
//! Returns typed results and never prints; never picks an exit status.
//! Holding a box while a command runs is `exec::hold`'s, through these calls.

use std::sync::atomic::{AtomicU32, Ordering};

use serde::{Serialize, Serializer};

use crate::engine::{Engine, EngineError};
use crate::model::lease::{is_lease_of, lease_labels, lease_name, parse_ttl, LEASE_TTL_LABEL};
use crate::model::{Kind, Object, ObjectKey, Scope, BOX_ID_LABEL};

/// What a new lease is asked to be.
#[derive(Debug, Clone, Copy)]
pub struct LeaseRequest<'a> {
    /// The run's scope: every lease carries its labels; only leases in it are removed.
    pub scope: &'a Scope,
    /// The box the lease holds (already checked with `state::check_box_id`).
    pub box_id: &'a str,
    /// How long the lease holds, in seconds (over 0, at most `max_lease`).
    pub ttl: u64,
    /// `[policy] max_lease` (seconds): the ceiling older leases are read with.
    pub max_lease: u64,
}

/// A lease volume the engine created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    /// The volume's name.
    pub volume: String,
    #[serde(rename = "box")]
    pub box_id: String,
    /// Its ttl, in seconds.
    pub ttl_seconds: u64,
    /// When the engine created it (Unix seconds, the engine's clock).
    #[serde(serialize_with = "as_rfc3339")]
    #[schemars(with = "String", extend("format" = "date-time"))]
    pub created: i64,
    /// When it runs out: `created` plus the ttl (the engine's clock).
    #[serde(serialize_with = "as_rfc3339")]
    #[schemars(with = "String", extend("format" = "date-time"))]
    pub until: i64,
}

fn as_rfc3339<S: Serializer>(secs: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::plan::rfc3339(*secs))
}

/// Why a lease call did not do what it was for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    /// The engine did not create the lease volume.
    #[error("could not create lease volume {volume}: {error}")]
    Create { volume: String, error: EngineError },
    /// The engine answered with a volume that is not the lease asked for (a
    /// volume of that name existed). It is left alone.
    #[error("the engine answered the creation of lease volume {volume} with a volume that does not carry the lease's labels (one of that name existed); it is left alone and no lease was taken")]
    Clash { volume: String },
    /// The engine gave the new volume no creation time: it cannot hold the box.
    #[error("the engine gave lease volume {volume} no creation time, so it holds nothing; it stays as a managed volume of the box, which the next apply reclaims")]
    Undated { volume: String },
    /// The box's leases could not be listed.
    #[error("could not list the leases of the box: {error}")]
    List { error: EngineError },
    /// A lease volume could not be removed.
    #[error("could not remove lease volume {volume}: {error}")]
    Remove { volume: String, error: EngineError },
}

impl LeaseError {
    /// The step that failed: `create`, `clash`, `undated`, `list` or `remove`.
    pub fn step(&self) -> &'static str {
        match self {
            LeaseError::Create { .. } => "create",
            LeaseError::Clash { .. } => "clash",
            LeaseError::Undated { .. } => "undated",
            LeaseError::List { .. } => "list",
            LeaseError::Remove { .. } => "remove",
        }
    }

    /// The lease volume it is about, if one.
    pub fn volume(&self) -> Option<&str> {
        match self {
            LeaseError::Create { volume, .. }
            | LeaseError::Clash { volume }
            | LeaseError::Undated { volume }
            | LeaseError::Remove { volume, .. } => Some(volume),
            LeaseError::List { .. } => None,
        }
    }
}

/// In JSON: `{"step", "volume", "error"}` (the error's words, exact).
impl Serialize for LeaseError {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("LeaseError", 3)?;
        st.serialize_field("step", self.step())?;
        st.serialize_field("volume", &self.volume())?;
        st.serialize_field("error", &self.to_string())?;
        st.end()
    }
}

impl LeaseError {
    /// Every [`LeaseError::step`].
    pub(crate) const STEPS: [&'static str; 5] = ["create", "clash", "undated", "list", "remove"];
}

impl schemars::JsonSchema for LeaseError {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "LeaseError".into()
    }

    /// What `Serialize` writes: `step`, `volume` (null for `list`), `error`.
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "object",
            "properties": {
                "step": {
                    "type": "string",
                    "enum": LeaseError::STEPS,
                    "description": "The step that failed."
                },
                "volume": {
                    "type": ["string", "null"],
                    "description": "The lease volume it is about (null when the box's leases could not be listed)."
                },
                "error": {
                    "type": "string",
                    "description": "What failed, in words (exact: not escaped)."
                }
            },
            "required": ["step", "volume", "error"],
            "additionalProperties": false
        })
    }
}

/// What `lease` or `lease --release` did for one box on one engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct BoxLease {
    pub engine: String,
    #[serde(rename = "box")]
    pub box_id: String,
    /// The lease taken (`lease`; never for `--release`).
    pub lease: Option<Lease>,
    /// The lease volumes removed (or found already gone), sorted.
    pub released: Vec<String>,
    /// The box's other leases that hold at least as long as the new one: left alone.
    pub kept: Vec<Lease>,
    /// What failed, in the order it happened.
    pub errors: Vec<LeaseError>,
}

/// Whether a lease run takes leases or releases them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub enum LeaseAction {
    Take,
    Release,
}

/// A whole `lease` run: its JSON document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub struct LeaseRun {
    pub action: LeaseAction,
    /// True when nothing failed on any engine for any box.
    pub ok: bool,
    /// Whose clock the times are on: always `engine`.
    #[schemars(with = "String", extend("const" = "engine"))]
    pub clock: &'static str,
    /// Engine by engine (the run's order), box by box (the order given).
    pub boxes: Vec<BoxLease>,
}

impl LeaseRun {
    pub fn new(action: LeaseAction, boxes: Vec<BoxLease>) -> LeaseRun {
        LeaseRun {
            action,
            ok: boxes.iter().all(|b| b.errors.is_empty()),
            clock: "engine",
            boxes,
        }
    }
}

/// A suffix that makes a lease name new: this machine's time in
/// milliseconds, the process ID and a counter (hex).
fn suffix() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "{:x}-{:x}-{:x}{:03x}",
        now.as_millis(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        now.subsec_nanos() & 0xfff
    )
}

/// Until when a listed lease holds (engine's clock), or `None` when it is
/// not a lease that holds anything (unreadable ttl, over the ceiling, undated).
fn until_of(o: &Object, max_lease: u64) -> Option<i64> {
    let ttl = parse_ttl(o.labels.get(LEASE_TTL_LABEL)?, max_lease).ok()?;
    Some(
        o.created?
            .saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX)),
    )
}

/// Creates one new lease volume: one engine call. The answer must carry
/// every label asked for and a creation time.
pub async fn create(engine: &dyn Engine, req: LeaseRequest<'_>) -> Result<Lease, LeaseError> {
    create_as(engine, req, lease_name(req.box_id, &suffix())).await
}

/// Creates the lease volume `volume` (see [`create`]).
async fn create_as(
    engine: &dyn Engine,
    req: LeaseRequest<'_>,
    volume: String,
) -> Result<Lease, LeaseError> {
    let labels = lease_labels(req.scope, req.box_id, req.ttl);
    let made = engine
        .create_volume(&volume, &labels)
        .await
        .map_err(|error| LeaseError::Create {
            volume: volume.clone(),
            error,
        })?;
    let carries = labels
        .iter()
        .all(|(k, v)| made.labels.get(k).map(String::as_str) == Some(v.as_str()));
    if made.name != volume || !carries {
        return Err(LeaseError::Clash { volume });
    }
    let Some(created) = made.created else {
        return Err(LeaseError::Undated { volume });
    };
    Ok(Lease {
        volume,
        box_id: req.box_id.to_string(),
        ttl_seconds: req.ttl,
        created,
        until: created.saturating_add(i64::try_from(req.ttl).unwrap_or(i64::MAX)),
    })
}

/// The box's lease volumes in `scope`, sorted by name: one listing, then the
/// client-side check (`is_lease_of`) on every volume it returned.
async fn leases_of(
    engine: &dyn Engine,
    scope: &Scope,
    box_id: &str,
) -> Result<Vec<Object>, LeaseError> {
    let mut filters = scope.filters();
    filters.push(format!("{BOX_ID_LABEL}={box_id}"));
    let listed = engine
        .list(Kind::Volume, &filters)
        .await
        .map_err(|error| LeaseError::List { error })?;
    let mut leases: Vec<Object> = listed
        .into_iter()
        .filter(|o| is_lease_of(scope, box_id, &o.labels))
        .collect();
    leases.sort_by(|a, b| crate::model::natural_cmp(&a.name, &b.name));
    Ok(leases)
}

/// Removes one lease volume by name; gone already (404) is fine.
pub(super) async fn remove(engine: &dyn Engine, volume: &str) -> Result<(), LeaseError> {
    let key = ObjectKey::new(engine.name(), Kind::Volume, volume);
    match engine.remove(&key).await {
        Ok(()) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(error) => Err(LeaseError::Remove {
            volume: volume.to_string(),
            error,
        }),
    }
}

/// `lease BOX`: creates a new lease, then lists the box's leases and removes
/// those that run out before the new one (older ones, and volumes with a
/// lease label that hold nothing); those that hold at least as long are
/// kept (two `lease` runs at once never remove each other's both). No
/// `lease` in the result when none was taken (then nothing was listed or
/// removed); a failed listing or removal after it is in its `errors` too.
pub async fn take(engine: &dyn Engine, req: LeaseRequest<'_>) -> BoxLease {
    let mut done = BoxLease {
        engine: engine.name().to_string(),
        box_id: req.box_id.to_string(),
        lease: None,
        released: Vec::new(),
        kept: Vec::new(),
        errors: Vec::new(),
    };
    let lease = match create(engine, req).await {
        Ok(lease) => lease,
        Err(e) => {
            done.errors.push(e);
            return done;
        }
    };
    let others = leases_of(engine, req.scope, req.box_id).await;
    let until = lease.until;
    let volume = lease.volume.clone();
    done.lease = Some(lease);
    let others = match others {
        Ok(others) => others,
        Err(e) => {
            done.errors.push(e);
            return done;
        }
    };
    for o in others.into_iter().filter(|o| o.name != volume) {
        if let Some(other_until) = until_of(&o, req.max_lease).filter(|u| *u >= until) {
            done.kept.push(Lease {
                ttl_seconds: u64::try_from(other_until - o.created.unwrap_or(other_until))
                    .unwrap_or(0),
                volume: o.name,
                box_id: req.box_id.to_string(),
                created: o.created.unwrap_or_default(),
                until: other_until,
            });
            continue;
        }
        match remove(engine, &o.name).await {
            Ok(()) => done.released.push(o.name),
            Err(e) => done.errors.push(e),
        }
    }
    done
}

/// `lease --release BOX`: lists the box's leases and removes every one.
pub async fn release(engine: &dyn Engine, scope: &Scope, box_id: &str) -> BoxLease {
    let mut done = BoxLease {
        engine: engine.name().to_string(),
        box_id: box_id.to_string(),
        lease: None,
        released: Vec::new(),
        kept: Vec::new(),
        errors: Vec::new(),
    };
    match leases_of(engine, scope, box_id).await {
        Err(e) => done.errors.push(e),
        Ok(leases) => {
            for o in leases {
                match remove(engine, &o.name).await {
                    Ok(()) => done.released.push(o.name),
                    Err(e) => done.errors.push(e),
                }
            }
        }
    }
    done
}

/// What one renewal of a hold did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renewal {
    /// The next lease holds; the previous one was removed, or could not be
    /// (`previous_left`: it stays until released at the end, or runs out).
    Renewed {
        lease: Lease,
        previous_left: Option<LeaseError>,
    },
    /// No new lease: the previous one still holds until it runs out.
    Failed(LeaseError),
}

/// A hold's renewal: creates the next lease, then removes `previous` (the
/// lease this hold made before, by name). At most two engine calls; nothing
/// is listed and no other lease is touched.
pub async fn renew(engine: &dyn Engine, req: LeaseRequest<'_>, previous: &Lease) -> Renewal {
    match create(engine, req).await {
        Err(e) => Renewal::Failed(e),
        Ok(lease) => Renewal::Renewed {
            lease,
            previous_left: remove(engine, &previous.volume).await.err(),
        },
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::engine::memory::{box_labels, FaultAction, MemoryEngine, Op, VolumeInfo, World};
    use crate::model::lease::DEFAULT_MAX_LEASE;
    use crate::model::Labels;

    pub(crate) fn scope() -> Scope {
        Scope::new(Labels::from([("team".to_string(), "a".to_string())]))
    }

    pub(crate) fn req<'a>(scope: &'a Scope, box_id: &'a str, ttl: u64) -> LeaseRequest<'a> {
        LeaseRequest {
            scope,
            box_id,
            ttl,
            max_lease: DEFAULT_MAX_LEASE,
        }
    }

    fn volume(name: &str, labels: &[(&str, &str)], created: &str) -> VolumeInfo {
        VolumeInfo {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            created_at: Some(created.into()),
        }
    }

    /// Box `b`'s old lease and what must survive any lease command on `b`:
    /// an unlabeled look-alike, another box's lease, a `ca.sandbox=true`
    /// lease, a lease of another scope, and `b`'s own data volume.
    pub(crate) fn world() -> World {
        let lease = |box_id, sandbox, team| {
            vec![
                ("ca.sandbox", sandbox),
                ("ca.sandbox.id", box_id),
                ("team", team),
                (LEASE_TTL_LABEL, "60s"),
            ]
        };
        let old = "2026-01-01T00:00:00Z";
        let mut data = box_labels("b");
        data.insert("team".into(), "a".into());
        World {
            volumes: vec![
                volume("ca-sbx-lease-b-old", &lease("b", "1", "a"), old),
                volume("ca-sbx-lease-b-unlabeled", &[], old),
                volume("ca-sbx-lease-c-other-box", &lease("c", "1", "a"), old),
                volume("ca-sbx-lease-b-lookalike", &lease("b", "true", "a"), old),
                volume("ca-sbx-lease-b-other-scope", &lease("b", "1", "z"), old),
                VolumeInfo {
                    name: "b-data".into(),
                    labels: data,
                    created_at: Some(old.into()),
                },
            ],
            ..World::default()
        }
    }

    pub(crate) fn names(engine: &MemoryEngine) -> Vec<String> {
        let mut all: Vec<String> = engine.world().volumes.into_iter().map(|v| v.name).collect();
        all.sort();
        all
    }

    /// The volume named `name` in `engine`'s world (it must be there).
    pub(crate) fn volume_named(engine: &MemoryEngine, name: &str) -> VolumeInfo {
        engine
            .world()
            .volumes
            .into_iter()
            .find(|v| v.name == name)
            .unwrap()
    }

    pub(crate) fn outside() -> Vec<&'static str> {
        vec![
            "b-data",
            "ca-sbx-lease-b-lookalike",
            "ca-sbx-lease-b-other-scope",
            "ca-sbx-lease-b-unlabeled",
            "ca-sbx-lease-c-other-box",
        ]
    }

    pub(crate) fn failure(call: &str) -> EngineError {
        EngineError::status_500(call, "boom")
    }

    /// Makes the first `op` on `engine` from now fail, as the engine call `call`.
    pub(crate) fn fail_once(engine: &MemoryEngine, op: Op, call: &str) {
        engine.inject(op, None, FaultAction::Fail(failure(call)), 1);
    }

    #[tokio::test]
    async fn taking_a_lease_labels_it_and_releases_only_the_boxes_older_leases() {
        let engine = MemoryEngine::new(world());
        let scope = scope();
        let done = take(&engine, req(&scope, "b", 900)).await;
        assert!(done.errors.is_empty(), "{done:?}");
        let lease = done.lease.clone().expect("a lease");
        assert!(lease.volume.starts_with("ca-sbx-lease-b-"), "{lease:?}");
        assert_eq!(lease.until - lease.created, 900);
        assert_eq!(done.released, ["ca-sbx-lease-b-old"]);
        let made = volume_named(&engine, &lease.volume);
        assert_eq!(made.labels, lease_labels(&scope, "b", 900));
        let mut left = outside();
        left.push(&lease.volume);
        left.sort();
        assert_eq!(names(&engine), left);
    }

    #[tokio::test]
    async fn a_lease_that_holds_longer_is_kept() {
        let engine = MemoryEngine::new(World::default());
        let scope = scope();
        let long = take(&engine, req(&scope, "b", 3600)).await.lease.unwrap();
        let short = take(&engine, req(&scope, "b", 60)).await;
        assert!(short.released.is_empty(), "{short:?}");
        assert_eq!(short.kept.len(), 1);
        assert_eq!(short.kept[0].volume, long.volume);
        assert_eq!(short.kept[0].until, long.until);
        assert_eq!(engine.world().volumes.len(), 2);
    }

    #[tokio::test]
    async fn release_removes_only_that_boxes_leases_in_scope() {
        let engine = MemoryEngine::new(world());
        let scope = scope();
        let mine = take(&engine, req(&scope, "b", 900)).await.lease.unwrap();
        let done = release(&engine, &scope, "b").await;
        assert!(done.errors.is_empty(), "{done:?}");
        assert_eq!(done.released, std::slice::from_ref(&mine.volume));
        assert_eq!(names(&engine), outside());
        let removals: Vec<String> = engine
            .calls()
            .into_iter()
            .filter(|c| c.starts_with("Remove"))
            .collect();
        assert_eq!(
            removals,
            [
                "Remove(Volume) ca-sbx-lease-b-old".to_string(),
                format!("Remove(Volume) {}", mine.volume)
            ]
        );
    }

    #[tokio::test]
    async fn release_trusts_no_listing_filter() {
        // An engine that ignores label filters returns every volume: only
        // the box's own leases in scope may go.
        let engine = MemoryEngine::ignoring_filters(world());
        let done = release(&engine, &scope(), "b").await;
        assert_eq!(done.released, ["ca-sbx-lease-b-old"]);
        assert_eq!(names(&engine), outside());
    }

    #[tokio::test]
    async fn a_lease_already_gone_is_released() {
        let engine = MemoryEngine::new(world());
        engine.inject(
            Op::Remove(Kind::Volume),
            Some("ca-sbx-lease-b-old"),
            FaultAction::VanishFirst,
            1,
        );
        let done = release(&engine, &scope(), "b").await;
        assert!(done.errors.is_empty(), "{done:?}");
        assert_eq!(done.released, ["ca-sbx-lease-b-old"]);
    }

    #[tokio::test]
    async fn a_failed_create_takes_nothing_and_removes_nothing() {
        let engine = MemoryEngine::new(world());
        fail_once(&engine, Op::Create(Kind::Volume), "create volume");
        let done = take(&engine, req(&scope(), "b", 900)).await;
        assert_eq!(done.lease, None);
        assert!(
            matches!(done.errors.as_slice(), [LeaseError::Create { .. }]),
            "{done:?}"
        );
        assert!(engine.calls().iter().all(|c| !c.starts_with("Remove")));
        assert_eq!(engine.world().volumes.len(), world().volumes.len());
    }

    #[tokio::test]
    async fn a_name_clash_is_no_lease_and_the_volume_is_left_alone() {
        let engine = MemoryEngine::new(World::default());
        let scope = scope();
        let name = lease_name("b", "taken");
        let theirs = Labels::from([("owner".to_string(), "someone".to_string())]);
        engine.create_volume(&name, &theirs).await.unwrap();
        // Docker answers a name that exists with that volume, unchanged.
        let e = create_as(&engine, req(&scope, "b", 900), name.clone()).await;
        assert_eq!(e, Err(LeaseError::Clash { volume: name }));
        let world = engine.world();
        assert_eq!(world.volumes.len(), 1);
        assert_eq!(world.volumes[0].labels, theirs);
        assert!(engine.calls().iter().all(|c| !c.starts_with("Remove")));
    }

    #[tokio::test]
    async fn a_failed_listing_after_the_create_keeps_the_lease_and_says_so() {
        let engine = MemoryEngine::new(world());
        fail_once(&engine, Op::List(Kind::Volume), "list volumes");
        let done = take(&engine, req(&scope(), "b", 900)).await;
        assert!(done.lease.is_some());
        assert!(matches!(done.errors.as_slice(), [LeaseError::List { .. }]));
        assert!(engine.calls().iter().all(|c| !c.starts_with("Remove")));
    }

    #[tokio::test]
    async fn a_renewal_is_at_most_two_engine_calls() {
        let engine = MemoryEngine::new(world());
        let scope = scope();
        let first = create(&engine, req(&scope, "b", 30)).await.unwrap();
        let before = engine.calls().len();
        let Renewal::Renewed {
            lease,
            previous_left: None,
        } = renew(&engine, req(&scope, "b", 30), &first).await
        else {
            panic!("the renewal failed")
        };
        let calls = engine.calls()[before..].to_vec();
        assert_eq!(
            calls,
            [
                format!("Create(Volume) {}", lease.volume),
                format!("Remove(Volume) {}", first.volume)
            ]
        );
        assert_ne!(lease.volume, first.volume);
        // The box's other lease, and everything outside, is untouched.
        let mut left = outside();
        left.push("ca-sbx-lease-b-old");
        left.push(&lease.volume);
        left.sort();
        assert_eq!(names(&engine), left);
        // A failed create is one call, and the previous lease stays.
        fail_once(&engine, Op::Create(Kind::Volume), "create volume");
        let before = engine.calls().len();
        assert!(matches!(
            renew(&engine, req(&scope, "b", 30), &lease).await,
            Renewal::Failed(LeaseError::Create { .. })
        ));
        assert_eq!(engine.calls().len() - before, 1);
        assert!(names(&engine).contains(&lease.volume));
    }
}
