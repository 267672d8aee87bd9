//! The in-memory engine's world: the containers, volumes, networks,
//! images, services, configs and secrets of a fixture or a test (readable
//! from TOML), each as the `Object` the real engine's listing would give,
//! and the sizes its `/system/df` would give of them.
//!
//! Plain data. Must not answer engine calls or inject faults (`engine.rs`
//! and `mod.rs` do).

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::engine::docker::parse_time;
use crate::model::{ImageInfo, Join, Kind, Labels, Namespace, Object, ObjectKey};

/// A container in a fixture or a test world.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContainerInfo {
    /// Full container ID.
    pub id: String,
    pub name: String,
    /// Docker's state word: `running`, `exited`, `created`, ...
    #[serde(default = "default_state")]
    pub state: String,
    #[serde(default)]
    pub labels: Labels,
    /// Names of the named volumes it mounts.
    #[serde(default)]
    pub mounts: BTreeSet<String>,
    /// Where it mounts some of them (volume name to path), as Docker reports
    /// a mount's destination; a volume without one is read through a helper.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub paths: BTreeMap<String, String>,
    /// IDs of the networks it is attached to.
    #[serde(default)]
    pub networks: BTreeSet<String>,
    /// `container:<id>` when it joined another container's network namespace.
    #[serde(default)]
    pub network_mode: Option<String>,
    /// `container:<id>` when it joined another container's pid namespace (seen only by inspect).
    #[serde(default)]
    pub pid_mode: Option<String>,
    /// `container:<id>` when it joined another container's ipc namespace (seen only by inspect).
    #[serde(default)]
    pub ipc_mode: Option<String>,
    /// Creation time, RFC 3339.
    #[serde(default, rename = "createdAt")]
    pub created_at: Option<String>,
    #[serde(default)]
    pub image: Option<String>,
}

fn default_state() -> String {
    "exited".to_string()
}

impl ContainerInfo {
    /// A container with only an ID, a name and labels.
    pub fn new(id: &str, name: &str, labels: Labels) -> Self {
        ContainerInfo {
            id: id.into(),
            name: name.into(),
            state: default_state(),
            labels,
            mounts: BTreeSet::new(),
            paths: BTreeMap::new(),
            networks: BTreeSet::new(),
            network_mode: None,
            pid_mode: None,
            ipc_mode: None,
            created_at: None,
            image: None,
        }
    }

    /// As the engine reports it: listings show only the network mode;
    /// inspect also shows the pid and ipc modes.
    pub(super) fn object(&self, engine: &str, inspected: bool) -> Object {
        let mut o = listed(
            engine,
            Kind::Container,
            &self.id,
            &self.name,
            &self.labels,
            &self.created_at,
        );
        o.state = Some(self.state.clone());
        o.image = self.image.clone();
        o.depends_on = keys(engine, Kind::Volume, &self.mounts)
            .chain(keys(engine, Kind::Network, &self.networks))
            .collect();
        o.depends_on.sort();
        let mut modes = vec![(Namespace::Network, &self.network_mode)];
        if inspected {
            modes.push((Namespace::Pid, &self.pid_mode));
            modes.push((Namespace::Ipc, &self.ipc_mode));
            // As Docker: only a `shareable` ipc namespace can be joined.
            o.ipc_shareable = Some(self.ipc_mode.as_deref() == Some("shareable"));
        }
        o.joins = modes
            .into_iter()
            .filter_map(|(namespace, mode)| {
                let target = mode.as_deref()?.strip_prefix("container:")?;
                Some(Join {
                    namespace,
                    target: target.to_string(),
                })
            })
            .collect();
        o.joins.sort();
        o.mounts = self
            .paths
            .iter()
            .filter(|(v, _)| self.mounts.contains(*v))
            .map(|(v, p)| (v.clone(), p.clone()))
            .collect();
        o
    }
}

/// A named volume in a fixture or a test world.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeInfo {
    pub name: String,
    #[serde(default)]
    pub labels: Labels,
    /// Creation time, RFC 3339.
    #[serde(default, rename = "createdAt")]
    pub created_at: Option<String>,
}

impl VolumeInfo {
    pub(super) fn object(&self, engine: &str) -> Object {
        listed(
            engine,
            Kind::Volume,
            &self.name,
            &self.name,
            &self.labels,
            &self.created_at,
        )
    }
}

/// A network in a fixture or a test world.
pub type NetworkInfo = NamedInfo;

/// A Swarm service in a fixture or a test world. Its tasks' containers are
/// the world's containers labeled `com.docker.swarm.service.id=<id>`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceInfo {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub labels: Labels,
    /// IDs of the networks its tasks are attached to.
    #[serde(default)]
    pub networks: BTreeSet<String>,
    /// Names of the named volumes its tasks mount.
    #[serde(default)]
    pub mounts: BTreeSet<String>,
    /// IDs of the configs its tasks use.
    #[serde(default)]
    pub configs: BTreeSet<String>,
    /// IDs of the secrets its tasks use.
    #[serde(default)]
    pub secrets: BTreeSet<String>,
    /// Creation time, RFC 3339.
    #[serde(default, rename = "createdAt")]
    pub created_at: Option<String>,
}

impl ServiceInfo {
    pub(super) fn object(&self, engine: &str) -> Object {
        let mut o = listed(
            engine,
            Kind::Service,
            &self.id,
            &self.name,
            &self.labels,
            &self.created_at,
        );
        o.depends_on = keys(engine, Kind::Network, &self.networks)
            .chain(keys(engine, Kind::Volume, &self.mounts))
            .chain(keys(engine, Kind::Config, &self.configs))
            .chain(keys(engine, Kind::Secret, &self.secrets))
            .collect();
        o.depends_on.sort();
        o
    }
}

/// A Swarm config or secret in a fixture or a test world.
pub type SwarmObjectInfo = NamedInfo;

/// A network, Swarm config or secret in a fixture or a test world: all the
/// engine shows of one is an ID, a name, labels and a creation time.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedInfo {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub labels: Labels,
    /// Creation time, RFC 3339.
    #[serde(default, rename = "createdAt")]
    pub created_at: Option<String>,
}

impl NamedInfo {
    /// As the engine reports it, as an object of `kind`.
    pub(super) fn object(&self, engine: &str, kind: Kind) -> Object {
        listed(
            engine,
            kind,
            &self.id,
            &self.name,
            &self.labels,
            &self.created_at,
        )
    }
}

/// An object as listed: its key, name, labels and creation time (RFC 3339).
fn listed(
    engine: &str,
    kind: Kind,
    id: &str,
    name: &str,
    labels: &Labels,
    created_at: &Option<String>,
) -> Object {
    let mut o = Object::new(engine, kind, id, name);
    o.labels = labels.clone();
    o.created = created_at.as_deref().and_then(parse_time);
    o
}

/// The keys of the objects of `kind` named by `ids` on `engine`.
fn keys<'a>(
    engine: &'a str,
    kind: Kind,
    ids: &'a BTreeSet<String>,
) -> impl Iterator<Item = ObjectKey> + 'a {
    ids.iter().map(move |id| ObjectKey::new(engine, kind, id))
}

/// What the engine is to a swarm.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SwarmRole {
    /// A manager: lists and removes services, configs and secrets.
    #[default]
    Manager,
    /// A worker: answers those calls 503, as Docker does.
    Worker,
    /// Not in a swarm: the same 503.
    Inactive,
}

/// A managed box's labels: `ca.sandbox=1` and `ca.sandbox.id=<box>`.
pub fn box_labels(box_id: &str) -> Labels {
    [("ca.sandbox", "1"), ("ca.sandbox.id", box_id)]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The objects an in-memory engine holds. Deserializes from a fixture file:
/// `[[container]]`, `[[volume]]`, `[[network]]` and `[[image]]` tables.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct World {
    #[serde(default, rename = "container")]
    pub containers: Vec<ContainerInfo>,
    #[serde(default, rename = "volume")]
    pub volumes: Vec<VolumeInfo>,
    #[serde(default, rename = "network")]
    pub networks: Vec<NetworkInfo>,
    #[serde(default, rename = "image")]
    pub images: Vec<ImageInfo>,
    #[serde(default, rename = "service")]
    pub services: Vec<ServiceInfo>,
    #[serde(default, rename = "config")]
    pub configs: Vec<SwarmObjectInfo>,
    #[serde(default, rename = "secret")]
    pub secrets: Vec<SwarmObjectInfo>,
    /// A manager unless said otherwise.
    #[serde(default)]
    pub swarm: SwarmRole,
    /// How far the engine's clock runs ahead of the real one (seconds;
    /// negative: behind). Its clock and the volumes it creates use it.
    #[serde(default, rename = "clockSkew")]
    pub clock_skew: i64,
    /// The bytes `/system/df` gives of an object: a container's writable
    /// layer (by its ID), a volume's content (by its name); one absent is
    /// not measured. TOML: `[sizes]`, `"<id or name>" = bytes`.
    #[serde(default)]
    pub sizes: BTreeMap<String, u64>,
}

impl World {
    /// Parses a fixture (TOML with `[[container]]`, `[[volume]]`, `[[image]]`).
    pub fn from_toml(text: &str) -> Result<World, toml::de::Error> {
        toml::from_str(text)
    }
}
