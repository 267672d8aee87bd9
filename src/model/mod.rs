//! The nouns of sandboxctl: one object type for every kind on every engine,
//! its identity, labels, the scope that decides which objects are ours, the
//! typed reasons the planner and the report give (`reason`), what happened to
//! a removal (`outcome`), the engine's typed error (`error`), one value per
//! kind (`by_kind`), and the rule for an `ssh://` address's user and host
//! (`ssh`), shared by the state file's checks and the engine layer.
//!
//! Owns the one definition of "managed" (`Scope::manages`) and the one
//! identity of an object (`ObjectKey`). Does no I/O, imports neither
//! `render` nor tokio, and knows nothing of Docker's wire types: the engine
//! layer converts into these. The words of a reason or an outcome are their
//! `Display`, raw; escaping them for a terminal is `render`'s job.

mod by_kind;
mod error;
pub mod lease;
mod outcome;
mod owner;
mod reason;
mod ssh;
pub(crate) mod time;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

pub(crate) use by_kind::ByKind;
pub use error::{EngineError, ErrorKind};
pub use outcome::Outcome;
pub use owner::{Orchestrator, Owner, SWARM_SERVICE_ID};
pub(crate) use reason::cut;
pub use reason::{Listing, Reason, Ref};
pub(crate) use ssh::ssh_target_problem;

/// The label every object of the sandbox system carries, with value exactly [`SANDBOX_VALUE`].
pub(crate) const SANDBOX_LABEL: &str = "ca.sandbox";
/// The only value of [`SANDBOX_LABEL`] that marks an object as ours.
pub(crate) const SANDBOX_VALUE: &str = "1";
/// The label naming the box a container, volume or network belongs to.
pub(crate) const BOX_ID_LABEL: &str = "ca.sandbox.id";
/// The label naming what a sandboxctl-made container is for.
pub(crate) const ROLE_LABEL: &str = "ca.sandbox.role";
/// [`ROLE_LABEL`]'s value on a helper container that reads or fills a volume
/// for an archive or a restore: never started, removed as soon as it is done.
pub(crate) const ARCHIVE_HELPER_ROLE: &str = "archive-helper";
/// Cached build images are tagged `ca-sbx:<repo>-<dephash>`; they are listed, never removed.
pub(crate) const IMAGE_REFERENCE: &str = "ca-sbx:*";
/// The engine name of a run that names no engines (no `[[engine]]` in the state file).
pub const DEFAULT_ENGINE: &str = "default";

/// Object labels, sorted so that everything derived from them is deterministic.
pub type Labels = BTreeMap<String, String>;

/// The kinds of removable object. Images are not a kind: they are only listed.
///
/// The order is the order of every listing: containers first (what uses),
/// then what they use, then the Swarm kinds (a service, and the configs and
/// secrets its tasks use), added after the first three so that the older
/// kinds keep their order and their JSON keys. Removal order comes from the
/// plan's edges, not from here.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    #[default]
    Container,
    Volume,
    Network,
    /// A Swarm service (listed only on a manager node).
    Service,
    /// A Swarm config.
    Config,
    /// A Swarm secret.
    Secret,
}

impl Kind {
    /// Every kind, in listing order.
    pub const ALL: [Kind; 6] = [
        Kind::Container,
        Kind::Volume,
        Kind::Network,
        Kind::Service,
        Kind::Config,
        Kind::Secret,
    ];

    /// The kinds only a Swarm manager lists: skipped, with one note, elsewhere.
    pub const SWARM: [Kind; 3] = [Kind::Service, Kind::Config, Kind::Secret];

    /// `container`, `volume`, `network`, `service`, `config`, `secret`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Container => "container",
            Kind::Volume => "volume",
            Kind::Network => "network",
            Kind::Service => "service",
            Kind::Config => "config",
            Kind::Secret => "secret",
        }
    }

    /// `containers`, `volumes`, `networks`, `services`, `configs`,
    /// `secrets`: the report's JSON keys.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Container => "containers",
            Kind::Volume => "volumes",
            Kind::Network => "networks",
            Kind::Service => "services",
            Kind::Config => "configs",
            Kind::Secret => "secrets",
        }
    }

    /// True for kinds whose identity is an engine-made ID (shown shortened).
    pub(crate) fn has_id(self) -> bool {
        !matches!(self, Kind::Volume)
    }

    /// True for the kinds only a Swarm manager lists.
    pub fn is_swarm(self) -> bool {
        Kind::SWARM.contains(&self)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The one identity of an object: engine, kind, and the ID the engine removes
/// it by (a container's or network's full ID, a volume's name).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectKey {
    pub engine: String,
    pub kind: Kind,
    pub id: String,
}

impl ObjectKey {
    pub fn new(engine: &str, kind: Kind, id: &str) -> Self {
        ObjectKey {
            engine: engine.to_string(),
            kind,
            id: id.to_string(),
        }
    }
}

impl fmt::Display for ObjectKey {
    /// `container/<id>`, `volume/<name>`, `network/<id>`, prefixed by the engine
    /// unless it is the default one. Used as the saved plan's basis key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.engine != DEFAULT_ENGINE {
            f.write_str(&self.engine)?;
            f.write_str(":")?;
        }
        f.write_str(self.kind.as_str())?;
        f.write_str("/")?;
        f.write_str(&self.id)
    }
}

/// A namespace one container can share with another (`--network container:X`,
/// `--pid container:X`, `--ipc container:X`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Namespace {
    Network,
    Pid,
    Ipc,
}

/// A container's use of another container's namespace: `target` is the ID or
/// name given in `container:<target>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Join {
    pub namespace: Namespace,
    pub target: String,
}

/// One object as an engine lists it: the same shape for every kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Object {
    pub key: ObjectKey,
    /// A container's name (without Docker's slash), a volume's or network's name.
    pub name: String,
    pub labels: Labels,
    /// A container's state word (`running`, `exited`, `created`, ...); none for other kinds.
    pub state: Option<String>,
    /// Creation time, Unix seconds, when the engine reports one.
    pub created: Option<i64>,
    /// What this object uses and must outlive it: for a container, the named
    /// volumes it mounts and the networks it is attached to. Sorted.
    pub depends_on: Vec<ObjectKey>,
    /// For a container: namespaces it shares with other containers (its
    /// network mode from the listing; pid and ipc modes once inspected).
    pub joins: Vec<Join>,
    /// For a container: its image, as the engine names it (for the audit log).
    pub image: Option<String>,
    /// For a container: where it mounts each named volume (volume name to
    /// the first destination path, sorted), when the engine reports it. An
    /// archive may read a volume through the container that mounts it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mounts: BTreeMap<String, String>,
    /// For an inspected container: whether another container may join its
    /// ipc namespace (Docker: `IpcMode` `shareable`); `None` when unknown
    /// (not inspected, or an engine that does not require it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipc_shareable: Option<bool>,
}

impl Object {
    /// A bare object of `kind` named `id`; the engine layer fills in the rest.
    pub fn new(engine: &str, kind: Kind, id: &str, name: &str) -> Self {
        Object {
            key: ObjectKey::new(engine, kind, id),
            name: name.to_string(),
            labels: Labels::new(),
            state: None,
            created: None,
            depends_on: Vec::new(),
            joins: Vec::new(),
            image: None,
            mounts: BTreeMap::new(),
            ipc_shareable: None,
        }
    }

    pub fn kind(&self) -> Kind {
        self.key.kind
    }

    /// The box this object belongs to, if it carries `ca.sandbox.id`.
    pub fn box_id(&self) -> Option<&str> {
        self.labels.get(BOX_ID_LABEL).map(String::as_str)
    }
}

/// The last element of an absolute mount path (`/home/u/work` -> `work`):
/// Docker roots a container path's archive at it. `None` when the path is not
/// absolute or does not end in a plain name.
pub fn mount_root(path: &str) -> Option<String> {
    use std::path::{Component, Path};
    let p = Path::new(path);
    if !p.is_absolute() {
        return None;
    }
    match p.components().next_back()? {
        Component::Normal(name) => name.to_str().map(str::to_string),
        _ => None,
    }
}

/// A cached build image (`ca-sbx:*`). Listed and reported as retained; never removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageInfo {
    pub id: String,
    /// Repository tags, sorted.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// Which objects a run manages: those labeled `ca.sandbox=1` and every scope label.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    /// Extra labels (beyond `ca.sandbox=1`) an object must carry with exactly these values.
    pub(crate) labels: Labels,
    /// The engines whose Swarm services, configs and secrets are out of
    /// scope (`[[engine]] swarm = false`): on a swarm worker, which cannot
    /// list them, that is no failure.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub(crate) swarm_out: std::collections::BTreeSet<String>,
}

impl Scope {
    /// A scope narrowed by `labels` (never containing `ca.sandbox` itself).
    pub fn new(labels: Labels) -> Self {
        Scope {
            labels,
            swarm_out: Default::default(),
        }
    }

    /// This scope, with the Swarm kinds of `engines` out of it.
    pub fn without_swarm_of(mut self, engines: impl IntoIterator<Item = String>) -> Self {
        self.swarm_out.extend(engines);
        self
    }

    /// True unless `engine`'s Swarm kinds are out of scope: then an engine
    /// that cannot list them (a swarm worker) fails those listings.
    pub fn lists_swarm(&self, engine: &str) -> bool {
        !self.swarm_out.contains(engine)
    }

    /// The label filters to send to the engine: `ca.sandbox=1` first, then each scope label.
    pub(crate) fn filters(&self) -> Vec<String> {
        std::iter::once(format!("{SANDBOX_LABEL}={SANDBOX_VALUE}"))
            .chain(self.labels.iter().map(|(k, v)| format!("{k}={v}")))
            .collect()
    }

    /// The client-side check: true only if `labels` carries `ca.sandbox` with value
    /// exactly `1` and every scope label with exactly its value. Every object the
    /// engine returns passes through here before sandboxctl may act on it.
    pub fn manages(&self, labels: &Labels) -> bool {
        labels.get(SANDBOX_LABEL).map(String::as_str) == Some(SANDBOX_VALUE)
            && self
                .labels
                .iter()
                .all(|(k, v)| labels.get(k).map(String::as_str) == Some(v.as_str()))
    }

    /// Why `labels` are not managed, naming the first rule they fail; `None` when managed.
    pub(crate) fn exclusion(&self, labels: &Labels) -> Option<Exclusion> {
        match labels.get(SANDBOX_LABEL) {
            None => return Some(Exclusion::NoSandboxLabel),
            Some(v) if v != SANDBOX_VALUE => {
                return Some(Exclusion::SandboxValue { value: v.clone() })
            }
            Some(_) => {}
        }
        self.labels.iter().find_map(|(k, v)| match labels.get(k) {
            Some(have) if have == v => None,
            have => Some(Exclusion::ScopeLabel {
                key: k.clone(),
                want: v.clone(),
                have: have.cloned(),
            }),
        })
    }
}

/// The label rule that keeps an object out of the managed set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "camelCase")]
pub(crate) enum Exclusion {
    /// No `ca.sandbox` label at all.
    NoSandboxLabel,
    /// `ca.sandbox` with a value other than exactly `1`.
    SandboxValue { value: String },
    /// A scope label missing or with another value.
    ScopeLabel {
        key: String,
        want: String,
        have: Option<String>,
    },
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.filters().join(", "))
    }
}

/// The first 12 characters of a container, network or image ID (after any `sha256:`).
pub fn short_id(id: &str) -> &str {
    let id = id.strip_prefix("sha256:").unwrap_or(id);
    match id.char_indices().nth(12) {
        Some((end, _)) => &id[..end],
        None => id,
    }
}

/// Labels from `(key, value)` pairs, for tests.
#[cfg(test)]
pub(crate) fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manages_only_exact_value_one() {
        let scope = Scope::default();
        assert!(scope.manages(&labels(&[("ca.sandbox", "1")])));
        for bad in ["0", "true", "1 ", " 1", "", "01"] {
            assert!(!scope.manages(&labels(&[("ca.sandbox", bad)])), "{bad:?}");
            assert_eq!(
                scope.exclusion(&labels(&[("ca.sandbox", bad)])),
                Some(Exclusion::SandboxValue { value: bad.into() })
            );
        }
        assert!(!scope.manages(&labels(&[("ca.sandboxx", "1")])));
        assert!(!scope.manages(&labels(&[("ca.sandbox.id", "x")])));
        assert!(!scope.manages(&Labels::new()));
        assert_eq!(
            scope.exclusion(&Labels::new()),
            Some(Exclusion::NoSandboxLabel)
        );
    }

    #[test]
    fn manages_requires_every_scope_label() {
        let scope = Scope::new(labels(&[("owner", "a"), ("team", "t")]));
        assert!(scope.manages(&labels(&[
            ("ca.sandbox", "1"),
            ("owner", "a"),
            ("team", "t")
        ])));
        assert!(!scope.manages(&labels(&[("ca.sandbox", "1"), ("owner", "a")])));
        assert_eq!(
            scope.exclusion(&labels(&[("ca.sandbox", "1"), ("owner", "a")])),
            Some(Exclusion::ScopeLabel {
                key: "team".into(),
                want: "t".into(),
                have: None
            })
        );
        assert!(!scope.manages(&labels(&[
            ("ca.sandbox", "1"),
            ("owner", "b"),
            ("team", "t")
        ])));
        assert_eq!(scope.filters(), vec!["ca.sandbox=1", "owner=a", "team=t"]);
    }

    #[test]
    fn keys_show_the_engine_unless_default() {
        let k = ObjectKey::new(DEFAULT_ENGINE, Kind::Volume, "v");
        assert_eq!(k.to_string(), "volume/v");
        let k = ObjectKey::new("ci-1", Kind::Network, "abc");
        assert_eq!(k.to_string(), "ci-1:network/abc");
    }

    #[test]
    fn short_id_never_splits_a_character() {
        assert_eq!(short_id("sha256:0123456789abcdef"), "0123456789ab");
        assert_eq!(short_id("ééééééééééééé"), "éééééééééééé");
        assert_eq!(short_id("ab"), "ab");
    }
}
