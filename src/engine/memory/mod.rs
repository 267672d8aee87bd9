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
//!
//! This file is the engine's state and its fault script (`Op`,
//! `FaultAction`, `inject`: what a call meets before it acts). The world
//! it holds (fixtures' containers, volumes, networks, images, services) is
//! in `world.rs`; the `Engine` calls and Docker's removal rules in `engine.rs`.

mod engine;
mod world;

pub use self::world::{
    box_labels, ContainerInfo, NamedInfo, NetworkInfo, ServiceInfo, SwarmObjectInfo, SwarmRole,
    VolumeInfo, World,
};

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;

use super::{Engine, EngineError, ErrorKind, Event, HELPER_MOUNT};
use crate::model::{Kind, Labels, DEFAULT_ENGINE};

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
    /// Asking the engine on a new connection whether it still serves.
    Ping,
    /// Measuring every object's size (`GET /system/df`).
    DiskUsage,
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
        Op::Ping => "ping the engine on a new connection".into(),
        Op::DiskUsage => "measure disk usage (GET /system/df)".into(),
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

#[cfg(test)]
mod tests {
    use futures_util::stream::StreamExt;

    use super::*;
    use crate::model::ObjectKey;

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
        EngineError::status_500("list volumes", "boom")
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
