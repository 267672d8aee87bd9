//! An in-memory engine with Docker's removal semantics, for the planner's
//! snapshot tests, property tests, fault injection and benchmarks.
//!
//! Owns a small world of containers, volumes and images and a script of
//! faults. It mimics what the real engine does that matters to sandboxctl
//! (exact label filters, 404 for missing objects, 409 for a volume in use) and
//! nothing more. It must never be used to claim something about Docker itself:
//! tests of that run against the real engine.
//!
//! A test double: compiled for the unit tests (`cfg(test)`) and under the
//! `testing` feature, which the integration tests and benches turn on through
//! the package's dev-dependency on itself; never in a plain or release build.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;

use futures_util::stream::{BoxStream, StreamExt};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};

use super::{
    Engine, EngineError, ErrorKind, Event, Helper, TarBody, TarStream, Users, HELPER_MOUNT,
};
use crate::engine::docker::parse_time;
use crate::model::{ImageInfo, Join, Kind, Labels, Namespace, Object, ObjectKey, DEFAULT_ENGINE};

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
    fn object(&self, engine: &str, inspected: bool) -> Object {
        let mut o = Object::new(engine, Kind::Container, &self.id, &self.name);
        o.state = Some(self.state.clone());
        o.labels = self.labels.clone();
        o.created = self.created_at.as_deref().and_then(parse_time);
        o.image = self.image.clone();
        o.depends_on = self
            .mounts
            .iter()
            .map(|v| ObjectKey::new(engine, Kind::Volume, v))
            .chain(
                self.networks
                    .iter()
                    .map(|n| ObjectKey::new(engine, Kind::Network, n)),
            )
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
    fn object(&self, engine: &str) -> Object {
        let mut o = Object::new(engine, Kind::Volume, &self.name, &self.name);
        o.labels = self.labels.clone();
        o.created = self.created_at.as_deref().and_then(parse_time);
        o
    }
}

/// A network in a fixture or a test world.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkInfo {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub labels: Labels,
    /// Creation time, RFC 3339.
    #[serde(default, rename = "createdAt")]
    pub created_at: Option<String>,
}

impl NetworkInfo {
    fn object(&self, engine: &str) -> Object {
        let mut o = Object::new(engine, Kind::Network, &self.id, &self.name);
        o.labels = self.labels.clone();
        o.created = self.created_at.as_deref().and_then(parse_time);
        o
    }
}

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
    fn object(&self, engine: &str) -> Object {
        let mut o = Object::new(engine, Kind::Service, &self.id, &self.name);
        o.labels = self.labels.clone();
        o.created = self.created_at.as_deref().and_then(parse_time);
        o.depends_on = self
            .networks
            .iter()
            .map(|n| ObjectKey::new(engine, Kind::Network, n))
            .chain(
                self.mounts
                    .iter()
                    .map(|v| ObjectKey::new(engine, Kind::Volume, v)),
            )
            .chain(
                self.configs
                    .iter()
                    .map(|c| ObjectKey::new(engine, Kind::Config, c)),
            )
            .chain(
                self.secrets
                    .iter()
                    .map(|c| ObjectKey::new(engine, Kind::Secret, c)),
            )
            .collect();
        o.depends_on.sort();
        o
    }
}

/// A Swarm config or secret in a fixture or a test world.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwarmObjectInfo {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub labels: Labels,
    /// Creation time, RFC 3339.
    #[serde(default, rename = "createdAt")]
    pub created_at: Option<String>,
}

impl SwarmObjectInfo {
    fn object(&self, engine: &str, kind: Kind) -> Object {
        let mut o = Object::new(engine, kind, &self.id, &self.name);
        o.labels = self.labels.clone();
        o.created = self.created_at.as_deref().and_then(parse_time);
        o
    }
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
}

impl World {
    /// Parses a fixture (TOML with `[[container]]`, `[[volume]]`, `[[image]]`).
    pub fn from_toml(text: &str) -> Result<World, toml::de::Error> {
        toml::from_str(text)
    }
}

/// An engine call, as fault scripts name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    List(Kind),
    ListImages,
    Inspect(Kind),
    Remove(Kind),
    /// Reading the engine's clock.
    Clock,
    /// Creating an object (a lease volume).
    Create(Kind),
    /// Creating a helper container (target: the volume it mounts).
    CreateHelper,
    /// Stopping a container (target: the container).
    Stop,
    /// Reading a container's path as a tar stream (target: the container).
    Download,
    /// Putting a tar stream into a container (target: the container).
    Upload,
}

/// What a scripted fault does when its call arrives.
#[derive(Debug, Clone)]
pub enum FaultAction {
    /// Answer with this error and change nothing.
    Fail(EngineError),
    /// Another actor removes the object just before the call is served, so the
    /// call itself sees the world without it.
    VanishFirst,
    /// Another actor creates this volume just before the call is served
    /// (a race with a create, which Docker answers with that volume).
    VolumeAppears(VolumeInfo),
    /// Carry out the call, then answer with this error anyway (a dropped
    /// connection after the engine did the work).
    DoThenFail(EngineError),
    /// Wait this long before serving the call (past the engine's deadline,
    /// if it has one: the call fails as a timed-out call does).
    Delay(Duration),
    /// Serve the call normally; uses up one count (so that a script can let
    /// the first calls through and fail the later ones).
    Pass,
    /// The connection is lost: this call and every later one fail as an
    /// unreachable engine's do, and open event streams end.
    Disconnect,
    /// A download streams this many bytes, then fails with this error (the
    /// connection dropped mid-stream); an upload takes this many bytes (at
    /// least), keeps them, then fails with it. Other calls are served normally.
    CutAfter(usize, EngineError),
}

#[derive(Debug, Clone)]
struct Fault {
    op: Op,
    /// Container or network ID, or volume name; `None` matches any target.
    target: Option<String>,
    action: FaultAction,
    /// How many more calls this fault applies to.
    remaining: usize,
}

/// The in-memory engine. Cheap to build; safe to share between concurrent calls.
#[derive(Debug)]
pub struct MemoryEngine {
    name: String,
    world: Mutex<World>,
    faults: Mutex<Vec<Fault>>,
    log: Mutex<Vec<String>>,
    ignore_filters: bool,
    /// The open event streams.
    followers: Mutex<Vec<UnboundedSender<Result<Event, EngineError>>>>,
    /// Set once the connection is lost: every call fails as unreachable.
    lost: AtomicBool,
    /// Each call's deadline, as `--timeout` gives the Docker engine.
    deadline: Option<Duration>,
    /// Calls that passed it, by endpoint.
    misses: super::DeadlineMisses,
    /// What each volume holds, as the tar stream a download of its mount
    /// gives (by volume name; none: an empty tar).
    contents: Mutex<BTreeMap<String, Vec<u8>>>,
    /// Helper containers created so far (their IDs count up).
    helpers: AtomicUsize,
}

/// The bytes a memory download streams at once.
const CHUNK: usize = 64 * 1024;

/// An empty tar stream: the two zero blocks that end one.
fn empty_tar() -> Vec<u8> {
    vec![0; 1024]
}

impl MemoryEngine {
    pub fn new(world: World) -> Self {
        MemoryEngine {
            name: DEFAULT_ENGINE.to_string(),
            world: Mutex::new(world),
            faults: Mutex::default(),
            log: Mutex::default(),
            ignore_filters: false,
            followers: Mutex::default(),
            lost: AtomicBool::new(false),
            deadline: None,
            misses: Default::default(),
            contents: Mutex::default(),
            helpers: AtomicUsize::new(0),
        }
    }

    /// Sets what volume `name` holds: `tar`, the stream a download of its mount gives.
    pub fn set_content(&self, name: &str, tar: Vec<u8>) {
        self.contents.lock().unwrap().insert(name.to_string(), tar);
    }

    /// What volume `name` holds (an empty tar if nothing was set or put).
    pub fn content(&self, name: &str) -> Vec<u8> {
        self.contents
            .lock()
            .unwrap()
            .get(name)
            .cloned()
            .unwrap_or_else(empty_tar)
    }

    /// An engine that, like some old daemons, ignores label filters and lists everything.
    pub fn ignoring_filters(world: World) -> Self {
        MemoryEngine {
            ignore_filters: true,
            ..MemoryEngine::new(world)
        }
    }

    /// An engine named `name` holding one created container per box,
    /// `<name>-<box>`, labeled as that box's (see [`box_labels`]).
    pub fn with_boxes(name: &str, boxes: &[&str]) -> Self {
        MemoryEngine::new(World {
            containers: boxes
                .iter()
                .map(|b| ContainerInfo::new(&format!("{name}-{b}"), b, box_labels(b)))
                .collect(),
            ..World::default()
        })
        .named(name)
    }

    /// The same engine under another name (a fleet entry's).
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }

    /// Every call gets this deadline: a [`FaultAction::Delay`] longer than it
    /// fails after it with `ErrorKind::Timeout`, as the Docker engine's calls do.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Loses the connection now: every call from here on fails as an
    /// unreachable engine's does, and open event streams end.
    pub fn disconnect(&self) {
        self.lost.store(true, Ordering::SeqCst);
        self.cut_events();
    }

    /// The error of a call on a lost connection.
    fn unreachable(&self, call: String) -> EngineError {
        EngineError::new(
            call,
            ErrorKind::Unreachable {
                endpoint: self.endpoint().to_string(),
                detail: "the connection was lost".into(),
            },
        )
    }

    /// Scripts a fault for the next `times` calls of `op` on `target` (any target if `None`).
    pub fn inject(&self, op: Op, target: Option<&str>, action: FaultAction, times: usize) {
        self.faults.lock().unwrap().push(Fault {
            op,
            target: target.map(str::to_string),
            action,
            remaining: times,
        });
    }

    /// Sends `event` to every open event stream.
    fn emit(&self, event: Result<Event, EngineError>) {
        self.followers
            .lock()
            .unwrap()
            .retain(|f| f.send(event.clone()).is_ok());
    }

    /// Ends every open event stream, as a dropped connection does.
    fn cut_events(&self) {
        self.followers.lock().unwrap().clear();
    }

    /// The world as it is now.
    pub fn world(&self) -> World {
        self.world.lock().unwrap().clone()
    }

    /// Every call served so far, in order, as `op target`.
    pub fn calls(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// Logs the call and returns the fault to apply to it, if any.
    fn enter(&self, op: Op, target: &str) -> Option<FaultAction> {
        self.log.lock().unwrap().push(format!("{op:?} {target}"));
        if self.lost.load(Ordering::SeqCst) {
            return Some(FaultAction::Disconnect);
        }
        let mut faults = self.faults.lock().unwrap();
        let pos = faults.iter().position(|f| {
            f.op == op && f.remaining > 0 && f.target.as_deref().is_none_or(|t| t == target)
        })?;
        faults[pos].remaining -= 1;
        Some(faults[pos].action.clone())
    }

    /// Runs one call under the fault script: `serve` is the real work on the world.
    async fn call<T>(
        &self,
        op: Op,
        target: &str,
        serve: impl FnOnce(&mut World) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        let fault = self.enter(op, target);
        self.act(fault, op, target, serve).await
    }

    /// Serves one call under the fault `enter` picked for it.
    async fn act<T>(
        &self,
        fault: Option<FaultAction>,
        op: Op,
        target: &str,
        serve: impl FnOnce(&mut World) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        match fault {
            None | Some(FaultAction::Pass) => serve(&mut self.world.lock().unwrap()),
            Some(FaultAction::Fail(e)) => Err(e),
            Some(FaultAction::Disconnect) => {
                self.disconnect();
                Err(self.unreachable(call_name(op, target)))
            }
            Some(FaultAction::Delay(d)) => match self.deadline {
                Some(limit) if d > limit => {
                    tokio::time::sleep(limit).await;
                    self.misses.add(&call_name(op, target));
                    Err(EngineError::new(
                        call_name(op, target),
                        ErrorKind::Timeout {
                            seconds: crate::engine::connect::whole_seconds(limit),
                        },
                    ))
                }
                _ => {
                    tokio::time::sleep(d).await;
                    serve(&mut self.world.lock().unwrap())
                }
            },
            Some(FaultAction::VolumeAppears(v)) => {
                let mut world = self.world.lock().unwrap();
                world.volumes.push(v);
                serve(&mut world)
            }
            Some(FaultAction::VanishFirst) => {
                let mut world = self.world.lock().unwrap();
                world.containers.retain(|c| c.id != target);
                world.volumes.retain(|v| v.name != target);
                world.networks.retain(|n| n.id != target);
                world.services.retain(|n| n.id != target);
                world.configs.retain(|n| n.id != target);
                world.secrets.retain(|n| n.id != target);
                serve(&mut world)
            }
            Some(FaultAction::DoThenFail(e)) => {
                let _ = serve(&mut self.world.lock().unwrap());
                Err(e)
            }
            Some(FaultAction::CutAfter(..)) => serve(&mut self.world.lock().unwrap()),
        }
    }

    /// The volume a container mounts at `path` (a mount without a recorded
    /// path is at [`HELPER_MOUNT`]; no path: its first volume), or why there
    /// is none.
    fn mounted(
        &self,
        container: &str,
        path: Option<&str>,
        call: &str,
    ) -> Result<String, EngineError> {
        let world = self.world.lock().unwrap();
        let c = world
            .containers
            .iter()
            .find(|c| c.id == container)
            .ok_or_else(|| not_found(call.to_string(), Kind::Container))?;
        let at = |v: &&String| match (c.paths.get(*v), path) {
            (_, None) => true,
            (Some(p), Some(path)) => p == path,
            (None, Some(path)) => path == HELPER_MOUNT,
        };
        c.mounts.iter().find(at).cloned().ok_or_else(|| {
            EngineError::new(
                call.to_string(),
                ErrorKind::Other {
                    status: Some(404),
                    message: "Could not find the file in container".into(),
                },
            )
        })
    }

    fn filter_match(&self, labels: &Labels, filters: &[String]) -> bool {
        self.ignore_filters
            || filters.iter().all(|f| match f.split_once('=') {
                Some((k, v)) => labels.get(k).map(String::as_str) == Some(v),
                None => labels.contains_key(f.as_str()),
            })
    }
}

/// The world's clock now: the real time moved by its skew (Unix milliseconds).
fn engine_now_ms(w: &World) -> i64 {
    let real = crate::model::time::unix_ms(std::time::SystemTime::now());
    real.saturating_add(w.clock_skew.saturating_mul(1000))
}

/// A call as the Docker engine's errors name it: `list containers`, `remove volume x`.
fn call_name(op: Op, target: &str) -> String {
    match op {
        Op::List(kind) => format!("list {kind}s"),
        Op::ListImages => "list images".into(),
        Op::Inspect(kind) => format!("inspect {kind} {target}"),
        Op::Remove(kind) => format!("remove {kind} {target}"),
        Op::Clock => "read the engine's clock (info)".into(),
        Op::Create(kind) => format!("create {kind} {target}"),
        Op::CreateHelper => format!("create a helper container for volume {target}"),
        Op::Stop => format!("stop container {target}"),
        Op::Download => format!("read {HELPER_MOUNT} of container {target}"),
        Op::Upload => format!("fill / of container {target}"),
    }
}

fn not_found(call: String, kind: Kind) -> EngineError {
    EngineError::new(
        call,
        ErrorKind::NotFound {
            message: format!("No such {kind}"),
        },
    )
}

#[async_trait]
impl Engine for MemoryEngine {
    fn name(&self) -> &str {
        &self.name
    }

    fn endpoint(&self) -> &str {
        "memory"
    }

    fn deadline_misses(&self) -> Vec<(String, u64)> {
        self.misses.counts()
    }

    async fn list(&self, kind: Kind, filters: &[String]) -> Result<Vec<Object>, EngineError> {
        let engine = self.name.as_str();
        self.call(Op::List(kind), "", |w| {
            let all: Vec<Object> = match kind {
                Kind::Container => w
                    .containers
                    .iter()
                    .map(|c| c.object(engine, false))
                    .collect(),
                Kind::Volume => w.volumes.iter().map(|v| v.object(engine)).collect(),
                Kind::Network => w.networks.iter().map(|n| n.object(engine)).collect(),
                swarm => {
                    no_swarm(w, swarm)?;
                    match swarm {
                        Kind::Service => w.services.iter().map(|s| s.object(engine)).collect(),
                        Kind::Config => w.configs.iter().map(|c| c.object(engine, swarm)).collect(),
                        _ => w.secrets.iter().map(|c| c.object(engine, swarm)).collect(),
                    }
                }
            };
            Ok(all
                .into_iter()
                .filter(|o| self.filter_match(&o.labels, filters))
                .collect())
        })
        .await
    }

    /// As Docker's filters: a volume by name, a network by ID or name, and
    /// `since` by creation time (a tie, or an unknown time, counts as
    /// after: the superset); faults as for the listing of containers.
    async fn list_users(&self, users: &Users) -> Result<Vec<Object>, EngineError> {
        let engine = self.name.as_str();
        // Logged apart from the other container listings (`List(Container)
        // users`); a fault on container listings applies to it too.
        self.call(Op::List(Kind::Container), "users", |w| {
            let picked: Vec<&ContainerInfo> = match users {
                Users::Mounting(volumes) => w
                    .containers
                    .iter()
                    .filter(|c| volumes.iter().any(|v| c.mounts.contains(v)))
                    .collect(),
                Users::Attached(networks) => {
                    let named = |id: &String| {
                        w.networks
                            .iter()
                            .find(|n| &n.id == id)
                            .is_some_and(|n| networks.contains(&n.name))
                    };
                    w.containers
                        .iter()
                        .filter(|c| c.networks.iter().any(|n| networks.contains(n) || named(n)))
                        .collect()
                }
                Users::LiveSince(id) => {
                    let Some(at) = w.containers.iter().position(|c| &c.id == id) else {
                        return Err(EngineError::new(
                            "list containers running since",
                            ErrorKind::NotFound {
                                message: format!("No such container {id}"),
                            },
                        ));
                    };
                    let made = |c: &ContainerInfo| c.created_at.as_deref().and_then(parse_time);
                    let since = made(&w.containers[at]);
                    // Docker orders by nanoseconds; here a tie or an unknown
                    // time counts as made after (the superset).
                    w.containers
                        .iter()
                        .enumerate()
                        .filter(|(i, c)| match (made(c), since) {
                            (Some(c), Some(s)) => c >= s && *i != at,
                            _ => *i != at,
                        })
                        .map(|(_, c)| c)
                        .filter(|c| matches!(c.state.as_str(), "running" | "paused" | "restarting"))
                        .collect()
                }
            };
            Ok(picked
                .into_iter()
                .map(|c| c.object(engine, false))
                .collect())
        })
        .await
    }

    async fn list_images(&self, reference: &str) -> Result<Vec<ImageInfo>, EngineError> {
        let prefix = reference.trim_end_matches('*').to_string();
        self.call(Op::ListImages, "", |w| {
            Ok(w.images
                .iter()
                .filter(|i| i.tags.iter().any(|t| t.starts_with(&prefix)))
                .cloned()
                .collect())
        })
        .await
    }

    async fn inspect(&self, key: &ObjectKey) -> Result<Object, EngineError> {
        let engine = self.name.as_str();
        let id = key.id.as_str();
        self.call(Op::Inspect(key.kind), id, |w| {
            let found = match key.kind {
                Kind::Container => w
                    .containers
                    .iter()
                    .find(|c| c.id == id)
                    .map(|c| c.object(engine, true)),
                Kind::Volume => w
                    .volumes
                    .iter()
                    .find(|v| v.name == id)
                    .map(|v| v.object(engine)),
                Kind::Network => w
                    .networks
                    .iter()
                    .find(|n| n.id == id)
                    .map(|n| n.object(engine)),
                Kind::Service => {
                    no_swarm(w, Kind::Service)?;
                    w.services
                        .iter()
                        .find(|s| s.id == id)
                        .map(|s| s.object(engine))
                }
                swarm => {
                    no_swarm(w, swarm)?;
                    let list = if swarm == Kind::Config {
                        &w.configs
                    } else {
                        &w.secrets
                    };
                    list.iter()
                        .find(|c| c.id == id)
                        .map(|c| c.object(engine, swarm))
                }
            };
            found.ok_or_else(|| not_found(format!("inspect {} {id}", key.kind), key.kind))
        })
        .await
    }

    async fn clock(&self) -> Result<i64, EngineError> {
        self.call(Op::Clock, "", |w| Ok(engine_now_ms(w))).await
    }

    async fn create_volume(&self, name: &str, labels: &Labels) -> Result<Object, EngineError> {
        let engine = self.name.as_str();
        let created = self
            .call(Op::Create(Kind::Volume), name, |w| {
                if let Some(v) = w.volumes.iter().find(|v| v.name == name) {
                    // As Docker does: the existing volume, unchanged.
                    return Ok(v.object(engine));
                }
                let secs = engine_now_ms(w).div_euclid(1000);
                let v = VolumeInfo {
                    name: name.to_string(),
                    labels: labels.clone(),
                    created_at: Some(crate::model::time::rfc3339(secs)),
                };
                w.volumes.push(v.clone());
                Ok(v.object(engine))
            })
            .await?;
        self.emit(Ok(Event {
            kind: Some(Kind::Volume),
            action: "create".into(),
            id: name.to_string(),
        }));
        Ok(created)
    }

    async fn create_helper(&self, helper: &Helper) -> Result<String, EngineError> {
        let n = self.helpers.fetch_add(1, Ordering::SeqCst) + 1;
        let id = format!("{n:0>64x}");
        let call = call_name(Op::CreateHelper, &helper.volume);
        self.call(Op::CreateHelper, &helper.volume, |w| {
            if !w.volumes.iter().any(|v| v.name == helper.volume) {
                return Err(not_found(call, Kind::Volume));
            }
            if !w
                .images
                .iter()
                .any(|i| i.tags.contains(&helper.image) || i.id == helper.image)
            {
                return Err(EngineError::new(
                    call,
                    ErrorKind::NotFound {
                        message: format!("No such image: {}", helper.image),
                    },
                ));
            }
            let mut c =
                ContainerInfo::new(&id, &format!("ca-sbx-helper-{n}"), helper.labels.clone());
            c.state = "created".into();
            c.mounts.insert(helper.volume.clone());
            c.paths.insert(helper.volume.clone(), helper.mount.clone());
            c.image = Some(helper.image.clone());
            w.containers.push(c);
            Ok(id.clone())
        })
        .await
    }

    async fn stop(&self, container: &str) -> Result<(), EngineError> {
        let call = call_name(Op::Stop, container);
        self.call(Op::Stop, container, |w| {
            let c = w
                .containers
                .iter_mut()
                .find(|c| c.id == container)
                .ok_or_else(|| not_found(call, Kind::Container))?;
            if c.state == "running" {
                c.state = "exited".into();
            }
            Ok(())
        })
        .await
    }

    fn download(&self, container: &str, path: &str) -> TarStream {
        let call = format!("read {path} of container {container}");
        let fault = self.enter(Op::Download, container);
        let failed =
            |e: EngineError| futures_util::stream::once(std::future::ready(Err(e))).boxed();
        let cut = match fault {
            None | Some(FaultAction::Pass) => None,
            Some(FaultAction::CutAfter(n, e)) => Some((n, e)),
            Some(FaultAction::Disconnect) => {
                self.disconnect();
                return failed(self.unreachable(call));
            }
            Some(FaultAction::Fail(e)) | Some(FaultAction::DoThenFail(e)) => return failed(e),
            Some(FaultAction::VanishFirst)
            | Some(FaultAction::Delay(_))
            | Some(FaultAction::VolumeAppears(_)) => None,
        };
        let volume = match self.mounted(container, Some(path), &call) {
            Ok(v) => v,
            Err(e) => return failed(e),
        };
        let mut tar = self.content(&volume);
        let tail = cut.as_ref().map(|(n, e)| {
            tar.truncate(*n);
            e.clone()
        });
        let chunks: Vec<Result<bytes::Bytes, EngineError>> = tar
            .chunks(CHUNK)
            .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
            .chain(tail.map(Err))
            .collect();
        futures_util::stream::iter(chunks).boxed()
    }

    async fn upload(&self, container: &str, path: &str, tar: TarBody) -> Result<(), EngineError> {
        let call = format!("fill {path} of container {container}");
        let fault = self.enter(Op::Upload, container);
        let cut = match &fault {
            Some(FaultAction::CutAfter(n, e)) => Some((*n, e.clone())),
            _ => None,
        };
        let volume = self
            .act(fault, Op::Upload, container, |_| Ok(()))
            .await
            .and_then(|()| self.mounted(container, None, &call))?;
        let mut tar = tar;
        let mut all = Vec::new();
        while let Some(chunk) = tar.next().await {
            let chunk = chunk.map_err(|e| {
                EngineError::new(
                    call.clone(),
                    ErrorKind::Other {
                        status: None,
                        message: format!("the request body failed: {e}"),
                    },
                )
            })?;
            all.extend_from_slice(&chunk);
            if let Some((n, e)) = cut.as_ref().filter(|(n, _)| all.len() > *n) {
                // The connection dropped mid-stream: what came is in the volume.
                all.truncate(*n);
                self.set_content(&volume, all);
                return Err(e.clone());
            }
        }
        self.set_content(&volume, all);
        Ok(())
    }

    fn events(&self, _label_filters: &[String]) -> BoxStream<'static, Result<Event, EngineError>> {
        if self.lost.load(Ordering::SeqCst) {
            let lost = self.unreachable("follow events".into());
            return futures_util::stream::once(std::future::ready(Err(lost))).boxed();
        }
        let (tx, rx) = unbounded_channel();
        self.followers.lock().unwrap().push(tx);
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) })
            .boxed()
    }

    async fn remove(&self, key: &ObjectKey) -> Result<(), EngineError> {
        let removed = self.remove_now(key).await;
        if removed.is_ok() {
            self.emit(Ok(Event {
                kind: Some(key.kind),
                action: "destroy".into(),
                id: key.id.clone(),
            }));
        }
        removed
    }
}

impl MemoryEngine {
    async fn remove_now(&self, key: &ObjectKey) -> Result<(), EngineError> {
        let id = key.id.as_str();
        let call = format!("remove {} {id}", key.kind);
        self.call(Op::Remove(key.kind), id, |w| match key.kind {
            Kind::Container => {
                let before = w.containers.len();
                w.containers.retain(|c| c.id != id);
                if w.containers.len() == before {
                    return Err(not_found(call, key.kind));
                }
                Ok(())
            }
            Kind::Volume => {
                if !w.volumes.iter().any(|v| v.name == id) {
                    return Err(not_found(call, key.kind));
                }
                let users: Vec<String> = w
                    .containers
                    .iter()
                    .filter(|c| c.mounts.contains(id))
                    .map(|c| c.id.clone())
                    .collect();
                if !users.is_empty() {
                    let message = format!("remove {id}: volume is in use - [{}]", users.join(", "));
                    return Err(EngineError::new(
                        call,
                        ErrorKind::InUse {
                            holders: users,
                            message,
                        },
                    ));
                }
                w.volumes.retain(|v| v.name != id);
                self.contents.lock().unwrap().remove(id);
                Ok(())
            }
            Kind::Network => {
                let Some(n) = w.networks.iter().find(|n| n.id == id) else {
                    return Err(not_found(call, key.kind));
                };
                if w.containers.iter().any(|c| c.networks.contains(id))
                    || w.services.iter().any(|s| s.networks.contains(id))
                {
                    let message = format!(
                        "error while removing network: network {} id {id} has active endpoints",
                        n.name
                    );
                    return Err(EngineError::new(
                        call,
                        ErrorKind::InUse {
                            holders: Vec::new(),
                            message,
                        },
                    ));
                }
                w.networks.retain(|n| n.id != id);
                Ok(())
            }
            Kind::Service => {
                no_swarm(w, Kind::Service)?;
                if !w.services.iter().any(|s| s.id == id) {
                    return Err(not_found(call, key.kind));
                }
                // The service goes and its tasks' containers with it (the
                // real engine waits for them; here they go at once).
                w.services.retain(|s| s.id != id);
                w.containers.retain(|c| {
                    c.labels.get(crate::model::SWARM_SERVICE_ID).map(String::as_str) != Some(id)
                });
                Ok(())
            }
            swarm => {
                no_swarm(w, swarm)?;
                let users: Vec<&str> = w
                    .services
                    .iter()
                    .filter(|s| {
                        let uses = if swarm == Kind::Config {
                            &s.configs
                        } else {
                            &s.secrets
                        };
                        uses.contains(id)
                    })
                    .map(|s| s.name.as_str())
                    .collect();
                if !users.is_empty() {
                    // Docker answers 400 with the services' names.
                    let message = format!(
                        "rpc error: code = InvalidArgument desc = {swarm} '{id}' is in use by the following service: {}",
                        users.join(", ")
                    );
                    return Err(EngineError::new(
                        call,
                        ErrorKind::Other {
                            status: Some(400),
                            message,
                        },
                    ));
                }
                let list = if swarm == Kind::Config {
                    &mut w.configs
                } else {
                    &mut w.secrets
                };
                let before = list.len();
                list.retain(|c| c.id != id);
                if list.len() == before {
                    return Err(not_found(call, key.kind));
                }
                Ok(())
            }
        })
        .await
    }
}

/// Docker's answer to a Swarm call on an engine that is not a manager.
fn no_swarm(w: &World, kind: Kind) -> Result<(), EngineError> {
    if w.swarm == SwarmRole::Manager {
        return Ok(());
    }
    let worker = w.swarm == SwarmRole::Worker;
    let message = if worker {
        "This node is not a swarm manager. Worker nodes can't be used to view or modify cluster state."
    } else {
        "This node is not a swarm manager. Use \"docker swarm init\" or \"docker swarm join\" to connect this node to swarm and try again."
    };
    Err(EngineError::new(
        format!("list {}", kind.plural()),
        ErrorKind::NoSwarm {
            worker,
            message: message.into(),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world() -> World {
        World {
            volumes: vec![VolumeInfo {
                name: "v".into(),
                labels: Labels::new(),
                created_at: None,
            }],
            ..World::default()
        }
    }

    fn failure() -> EngineError {
        EngineError::new(
            "list volumes",
            ErrorKind::Other {
                status: Some(500),
                message: "boom".into(),
            },
        )
    }

    #[tokio::test]
    async fn pass_lets_the_first_calls_through() {
        let engine = MemoryEngine::new(world());
        engine.inject(Op::List(Kind::Volume), None, FaultAction::Pass, 1);
        engine.inject(
            Op::List(Kind::Volume),
            None,
            FaultAction::Fail(failure()),
            1,
        );
        assert_eq!(engine.list(Kind::Volume, &[]).await.unwrap().len(), 1);
        assert_eq!(engine.list(Kind::Volume, &[]).await, Err(failure()));
        assert!(engine.list(Kind::Volume, &[]).await.is_ok());
    }

    #[tokio::test]
    async fn a_lost_connection_fails_every_later_call() {
        let engine = MemoryEngine::new(world());
        engine.inject(Op::Remove(Kind::Volume), None, FaultAction::Disconnect, 1);
        let key = ObjectKey::new(DEFAULT_ENGINE, Kind::Volume, "v");
        let removed = engine.remove(&key).await.unwrap_err();
        assert!(removed.is_unreachable(), "{removed}");
        assert_eq!(removed.call, "remove volume v");
        assert_eq!(
            engine.world().volumes.len(),
            1,
            "the removal never happened"
        );
        assert!(engine
            .list(Kind::Volume, &[])
            .await
            .unwrap_err()
            .is_unreachable());
        let mut events = engine.events(&[]);
        assert!(matches!(events.next().await, Some(Err(e)) if e.is_unreachable()));
    }

    #[tokio::test]
    async fn a_delay_past_the_deadline_is_a_timeout() {
        let engine = MemoryEngine::new(world()).with_deadline(Duration::from_millis(10));
        let slow = FaultAction::Delay(Duration::from_secs(60));
        engine.inject(Op::List(Kind::Volume), None, slow, 1);
        let e = engine.list(Kind::Volume, &[]).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Timeout { seconds: 1 });
        assert_eq!(e.call, "list volumes");
    }
}
