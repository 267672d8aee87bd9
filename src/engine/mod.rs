//! The boundary to a container engine: the object-safe `Engine` trait every
//! other module talks through, and `EngineError`, the one typed error that
//! crosses it (defined in `model`, next to the `Outcome` that carries it).
//!
//! Owns the vocabulary of engine calls (list, inspect, remove) over every
//! `Kind`, and the few calls archiving needs (a helper container that is never
//! started, a tar stream out of it and into it). It has no way to remove an
//! image, on purpose. It must not decide
//! policy: whether a 404 is fine or an in-progress removal is worth waiting for
//! is for `apply::next` to say. Engine message texts are parsed into
//! `ErrorKind` only by the engine implementations (`docker.rs`).

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::BoxStream;

use crate::model::{ImageInfo, Kind, Labels, Object, ObjectKey};

/// The typed error of an engine call: defined with the model (a step's
/// `Outcome` carries it), re-exported here where engines make it.
pub use crate::model::{EngineError, ErrorKind};

pub mod connect;
pub mod docker;
pub mod endpoint;
pub(crate) mod lazy;
#[cfg(any(test, feature = "testing"))]
pub mod memory;
pub(crate) mod ssh;
pub(crate) mod unix;

/// Where a helper container mounts the volume it reads or fills.
pub const HELPER_MOUNT: &str = "/ca-sbx-volume";

/// A helper container: created from `image` (already present; never pulled),
/// never started, with the named volume `volume` mounted at `mount` (an
/// absolute path: [`HELPER_MOUNT`] to archive; the archive's root to restore),
/// no network, carrying `labels` (the scope's, so a crash leaves it
/// reclaimable by label alone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Helper {
    pub image: String,
    pub volume: String,
    pub mount: String,
    pub labels: Labels,
}

/// Which containers [`Engine::list_users`] asks for: those that could use
/// or join a managed object. Each is one listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Users {
    /// Those that mount any of these volumes (by name).
    Mounting(Vec<String>),
    /// Those attached to any of these networks (each given by ID and by
    /// name: a container never started names a network only by its name).
    Attached(Vec<String>),
    /// Those that run (or are paused or restarting) and were made after
    /// this container (its ID); it must exist (else `NotFound`). Only such a
    /// container can share a namespace of it or of a younger one (Docker
    /// resolves `container:<name>` to an ID when the joiner is made).
    LiveSince(String),
}

/// What an engine measured of the space its objects hold, in bytes, by key:
/// a container's writable layer (`SizeRw`), a local volume's content
/// (`UsageData.Size`). An object it did not measure (a volume of another
/// driver, which Docker gives as -1) is absent: unknown, never 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiskUsage(pub std::collections::BTreeMap<ObjectKey, u64>);

/// A tar stream read out of a container, chunk by chunk.
pub type TarStream = BoxStream<'static, Result<Bytes, EngineError>>;

/// A tar stream to put into a container, chunk by chunk.
pub type TarBody = BoxStream<'static, Result<Bytes, std::io::Error>>;

/// A container engine as sandboxctl needs it. Implemented by the bollard engine
/// (`docker::DockerEngine`, for Docker and Podman) and, for tests only (the
/// `testing` feature), the in-memory engine (`memory::MemoryEngine`). Object safe: runs take `&dyn Engine`.
///
/// Every call is one request (a container removal may be two: kill, then
/// remove); none retries. Listings return what the engine returned: the caller
/// re-checks labels on the client.
#[async_trait]
pub trait Engine: Send + Sync {
    /// The engine's name in this run (`default`, or a fleet entry's name); every
    /// `ObjectKey` it returns carries it.
    fn name(&self) -> &str;

    /// Where the engine is, for messages (`unix:///var/run/docker.sock`, `memory`).
    fn endpoint(&self) -> &str;

    /// Every object of `kind` that carries every `key=value` in `label_filters`
    /// (server-side filter; containers in any state). Empty filters list all.
    async fn list(&self, kind: Kind, label_filters: &[String]) -> Result<Vec<Object>, EngineError>;

    /// The containers, in any state and labeled or not, that `users` asks
    /// for (server-side filters): at least those, maybe more; the caller
    /// judges each on the client, as for `list`. Discovery asks only for
    /// these instead of listing every container, the biggest answer on a
    /// busy engine. By default: every container (the superset).
    async fn list_users(&self, users: &Users) -> Result<Vec<Object>, EngineError> {
        let _ = users;
        self.list(Kind::Container, &[]).await
    }

    /// Every image with a tag matching `reference` (e.g. `ca-sbx:*`).
    async fn list_images(&self, reference: &str) -> Result<Vec<ImageInfo>, EngineError>;

    /// The engine's own clock now, in Unix milliseconds (Docker's `/info`
    /// `SystemTime`). Leases are judged by it, never by this machine's clock.
    async fn clock(&self) -> Result<i64, EngineError>;

    /// Whether the engine answers a request on a connection made now, not
    /// one kept from before. A dockerd that is shutting down first closes
    /// its listener, then goes on serving the connections it has while it
    /// unmounts what its containers mount: a tar stream it was sending then
    /// ends well but without the files that went (dockerd skips a file it
    /// cannot read). An archive whose stream ended before such an answer
    /// was read whole (`exec::archive::pipeline`).
    async fn answers_anew(&self) -> Result<(), EngineError>;

    /// Creates the named volume with exactly `labels` and returns it as the
    /// engine stamped it (its creation time is the engine's). The only thing
    /// sandboxctl creates: a lease. Docker answers an existing name with that
    /// volume unchanged, so callers pick names that are new.
    async fn create_volume(&self, name: &str, labels: &Labels) -> Result<Object, EngineError>;

    /// Creates a [`Helper`] container (never started) and returns its ID.
    /// Only archiving and restoring create one; the caller removes it.
    async fn create_helper(&self, helper: &Helper) -> Result<String, EngineError>;

    /// Stops `container` (`SIGKILL`, as a forced removal would, then waits
    /// until it no longer runs); one already stopped is fine. An archive reads
    /// a volume through the box's container only once it is stopped.
    async fn stop(&self, container: &str) -> Result<(), EngineError>;

    /// `path` of `container` as a tar stream (`GET /containers/{id}/archive`):
    /// entries are named after the last element of `path`. Not bounded by the
    /// call deadline as a whole; a chunk that takes longer than it fails.
    fn download(&self, container: &str, path: &str) -> TarStream;

    /// Extracts the tar stream `tar` into directory `path` of `container`
    /// (`PUT /containers/{id}/archive`), streamed as it is read.
    async fn upload(&self, container: &str, path: &str, tar: TarBody) -> Result<(), EngineError>;

    /// Every container's writable layer and every local volume's size as
    /// the engine measures them, all at once (`GET /system/df`: the daemon
    /// walks every container layer and volume it has, not only the managed
    /// ones: seconds on a large engine; Docker 20.10 refuses a second one
    /// while one runs). A read, under the read deadline; only `--reclaimed`
    /// asks, and its failure leaves the figures unknown. By default: not
    /// measured (an error).
    async fn disk_usage(&self) -> Result<DiskUsage, EngineError> {
        Err(EngineError::new(
            "measure disk usage (GET /system/df)",
            ErrorKind::Other {
                status: None,
                message: "this engine does not measure disk usage".into(),
            },
        ))
    }

    /// One object, freshly; `ErrorKind::NotFound` once it is gone. For a
    /// container this also fills in the pid and ipc namespaces it joins.
    async fn inspect(&self, key: &ObjectKey) -> Result<Object, EngineError>;

    /// Removes one object by its key. A container is killed if it runs and
    /// removed with its anonymous volumes (`docker rm -f -v`, named volumes
    /// stay); volumes, networks, configs and secrets are never forced: in use
    /// is an error. A service is deleted, and the call returns once this
    /// engine lists no container of its tasks (within the call deadline;
    /// those still there are named in the error).
    async fn remove(&self, key: &ObjectKey) -> Result<(), EngineError>;

    /// Follows the engine's events that may change what a reconcile finds:
    /// container events of objects carrying every `label_filters` label, and
    /// every volume and network event, and on Docker every service, config
    /// and secret event (Docker 20.10 gives those no labels, so
    /// a label filter would drop them; the next labeled listing decides). The
    /// stream ends, or yields an error, when the connection drops.
    fn events(&self, label_filters: &[String]) -> BoxStream<'static, Result<Event, EngineError>>;

    /// How many calls passed their deadline since the engine was made, by
    /// endpoint (`GET /containers/{id}/json`, ...), sorted. An engine that
    /// does not count says none.
    fn deadline_misses(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
}

/// Counts calls that passed their deadline, by endpoint: shared by an engine
/// and every connection it makes again.
#[derive(Debug, Default)]
pub(crate) struct DeadlineMisses(std::sync::Mutex<std::collections::BTreeMap<String, u64>>);

impl DeadlineMisses {
    /// Counts one call (`call`: the words of its `EngineError`) that passed
    /// its deadline.
    pub(crate) fn add(&self, call: &str) {
        let mut counts = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *counts.entry(endpoint_of(call)).or_default() += 1;
    }

    pub(crate) fn counts(&self) -> Vec<(String, u64)> {
        let counts = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        counts.iter().map(|(k, v)| (k.clone(), *v)).collect()
    }
}

/// The Engine API endpoint of a call named as an `EngineError` names it
/// (`inspect container 3f2a1b4c5d6e` is `GET /containers/{id}/json`); a
/// call of no known shape is its first two words.
pub(crate) fn endpoint_of(call: &str) -> String {
    let mut words = call.split_whitespace();
    let (verb, noun) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let plural = match noun {
        "container" | "containers" => "containers",
        "volume" | "volumes" => "volumes",
        "network" | "networks" => "networks",
        "service" | "services" => "services",
        "config" | "configs" => "configs",
        "secret" | "secrets" => "secrets",
        "image" | "images" => "images",
        _ => "",
    };
    let endpoint = match (verb, plural) {
        ("list", "containers" | "images") => format!("GET /{plural}/json"),
        ("list", p) if !p.is_empty() => format!("GET /{p}"),
        ("inspect", "containers") => "GET /containers/{id}/json".to_string(),
        ("inspect", p) if !p.is_empty() => format!("GET /{p}/{{id}}"),
        ("remove", p) if !p.is_empty() => format!("DELETE /{p}/{{id}}"),
        ("kill", "containers") => "POST /containers/{id}/kill".to_string(),
        ("wait", _) => "POST /containers/{id}/wait".to_string(),
        ("read", _) if call.starts_with("read the engine's clock") => "GET /info".to_string(),
        ("read", _) => "GET /containers/{id}/archive".to_string(),
        ("fill", _) => "PUT /containers/{id}/archive".to_string(),
        ("create", "volumes") => "POST /volumes/create".to_string(),
        ("measure", _) => "GET /system/df".to_string(),
        ("create", _) => "POST /containers/create".to_string(),
        _ if call.starts_with("list the task containers") => "GET /containers/json".to_string(),
        _ => format!("{verb} {noun}"),
    };
    endpoint
}

#[cfg(test)]
mod tests {
    use super::endpoint_of;

    #[test]
    fn calls_are_counted_by_their_endpoint() {
        for (call, endpoint) in [
            ("list containers", "GET /containers/json"),
            ("list networks", "GET /networks"),
            ("list images ca-sbx:*", "GET /images/json"),
            (
                "inspect container 3f2a1b4c5d6e",
                "GET /containers/{id}/json",
            ),
            ("inspect volume v", "GET /volumes/{id}"),
            ("remove volume v", "DELETE /volumes/{id}"),
            ("kill container 3f2a1b4c5d6e", "POST /containers/{id}/kill"),
            ("read the engine's clock (info)", "GET /info"),
            (
                "list the task containers of service s",
                "GET /containers/json",
            ),
        ] {
            assert_eq!(endpoint_of(call), endpoint, "{call}");
        }
    }
}

/// One engine event, reduced to what wakes a reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The kind of object, when it is one sandboxctl manages.
    kind: Option<Kind>,
    /// `create`, `destroy`, `die`, `connect`, ...
    action: String,
    /// The object's ID (a volume's name).
    id: String,
}
