//! What went wrong in one engine call: `EngineError`, the one typed error
//! that crosses the `Engine` boundary, and the kinds of failure sandboxctl
//! tells apart.
//!
//! Defined with the model because a step's `Outcome` carries it; engines make
//! it (`crate::engine` re-exports it), and only the engine implementations
//! read an engine's message texts to choose the kind. Pure data and its words.

use std::fmt;

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
    /// The engine is not a Swarm manager: it cannot list or remove services,
    /// configs or secrets. `worker`: it is a swarm's worker (a manager of
    /// that swarm could); else it is in no swarm (or is Podman).
    NoSwarm { worker: bool, message: String },
    /// Any other error status (`status`), or a broken connection / unreadable
    /// answer (`status: None`).
    Other {
        status: Option<u16>,
        message: String,
    },
}

#[cfg(test)]
impl EngineError {
    /// A test's failure of `call`: the engine answered 500 with `message`.
    pub(crate) fn status_500(call: &str, message: &str) -> Self {
        EngineError::new(
            call,
            ErrorKind::Other {
                status: Some(500),
                message: message.into(),
            },
        )
    }
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

    /// True when the engine cannot list the Swarm kinds (not a manager).
    pub fn is_no_swarm(&self) -> bool {
        matches!(self.kind, ErrorKind::NoSwarm { .. })
    }

    /// True when the engine is a swarm's worker (see `ErrorKind::NoSwarm`).
    pub fn is_swarm_worker(&self) -> bool {
        matches!(self.kind, ErrorKind::NoSwarm { worker: true, .. })
    }

    /// True when the engine could not be reached or did not answer in time.
    pub(crate) fn is_unreachable(&self) -> bool {
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
                "{call}: no answer within {seconds}s; the engine is hung or overloaded (raise --call-timeout for a listing or an inspect, --timeout for a change, to wait longer)"
            ),
            ErrorKind::NoSwarm { message, .. } => {
                write!(f, "{call}: not a swarm manager: {message}")
            }
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
