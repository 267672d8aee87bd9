//! The boundary to a container engine: the object-safe `Engine` trait every
//! other module talks through, and `EngineError`, the one typed error that
//! crosses it.
//!
//! Owns the vocabulary of engine calls (list, inspect, remove) over every
//! `Kind`. It has no way to remove an image, on purpose. It must not decide
//! policy: whether a 404 is fine or an in-progress removal is worth waiting for
//! is for `apply::next` to say. Engine message texts are parsed into
//! `ErrorKind` only by the engine implementations (`docker.rs`).

use std::fmt;

use async_trait::async_trait;
use futures_util::stream::BoxStream;

use crate::model::{ImageInfo, Kind, Object, ObjectKey};

pub mod connect;
pub mod docker;
pub mod endpoint;
pub mod lazy;
pub mod memory;

/// A container engine as sandboxctl needs it. Implemented by the bollard engine
/// (`docker::DockerEngine`, for Docker and Podman) and the in-memory engine
/// (`memory::MemoryEngine`). Object safe: runs take `&dyn Engine`.
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

    /// Every image with a tag matching `reference` (e.g. `ca-sbx:*`).
    async fn list_images(&self, reference: &str) -> Result<Vec<ImageInfo>, EngineError>;

    /// One object, freshly; `ErrorKind::NotFound` once it is gone. For a
    /// container this also fills in the pid and ipc namespaces it joins.
    async fn inspect(&self, key: &ObjectKey) -> Result<Object, EngineError>;

    /// Removes one object by its key. A container is killed if it runs and
    /// removed with its anonymous volumes (`docker rm -f -v`, named volumes
    /// stay); volumes and networks are never forced: in use is an error.
    async fn remove(&self, key: &ObjectKey) -> Result<(), EngineError>;

    /// Follows the engine's events that may change what a reconcile finds:
    /// container events of objects carrying every `label_filters` label, and
    /// every volume and network event (Docker 20.10 gives those no labels, so
    /// a label filter would drop them; the next labeled listing decides). The
    /// stream ends, or yields an error, when the connection drops.
    fn events(&self, label_filters: &[String]) -> BoxStream<'static, Result<Event, EngineError>>;
}

/// One engine event, reduced to what wakes a reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The kind of object, when it is one sandboxctl manages.
    pub kind: Option<Kind>,
    /// `create`, `destroy`, `die`, `connect`, ...
    pub action: String,
    /// The object's ID (a volume's name).
    pub id: String,
}

/// What went wrong in one engine call. `call` names the call and its object,
/// e.g. `remove container 3f2a1b4c5d6e` or `list volumes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineError {
    pub call: String,
    pub kind: ErrorKind,
}

/// The kinds of engine failure sandboxctl tells apart. Engine implementations
/// parse their texts into these; nothing else reads an engine's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// The object does not exist (404): already gone.
    NotFound { message: String },
    /// Another actor's removal of the object is in progress.
    InProgress { message: String },
    /// The object is in use; `holders` are the IDs of the containers using it
    /// when the engine names them (Docker and Podman do for volumes).
    InUse {
        holders: Vec<String>,
        message: String,
    },
    /// The engine could not be reached at all (no socket, connection refused,
    /// TLS refused, version negotiation failed).
    Unreachable { endpoint: String, detail: String },
    /// The call did not complete within its deadline.
    Timeout { seconds: u64 },
    /// Any other error status (`status`), or a broken connection / unreadable
    /// answer (`status: None`).
    Other {
        status: Option<u16>,
        message: String,
    },
}

impl EngineError {
    pub fn new(call: impl Into<String>, kind: ErrorKind) -> Self {
        EngineError {
            call: call.into(),
            kind,
        }
    }

    /// True for a 404: the object is already gone.
    pub fn is_not_found(&self) -> bool {
        matches!(self.kind, ErrorKind::NotFound { .. })
    }

    /// True when the engine could not be reached or did not answer in time.
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::Unreachable { .. } | ErrorKind::Timeout { .. }
        )
    }
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let call = &self.call;
        match &self.kind {
            ErrorKind::NotFound { message } => write!(f, "{call}: not found: {message}"),
            ErrorKind::InProgress { message } => write!(f, "{call}: conflict: {message}"),
            ErrorKind::InUse { message, .. } => write!(f, "{call}: conflict: {message}"),
            ErrorKind::Unreachable { endpoint, detail } => write!(
                f,
                "cannot reach the Docker engine at {endpoint}: {detail}; check that the engine is running and DOCKER_HOST (or --host, --context) points at it"
            ),
            ErrorKind::Timeout { seconds } => write!(
                f,
                "{call}: no answer within {seconds}s; the engine is hung or overloaded (raise --timeout to wait longer)"
            ),
            ErrorKind::Other {
                status: Some(status),
                message,
            } => write!(f, "{call}: engine answered HTTP {status}: {message}"),
            ErrorKind::Other {
                status: None,
                message,
            } => write!(f, "{call}: {message}"),
        }
    }
}

impl std::error::Error for EngineError {}
