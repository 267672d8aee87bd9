//! The boundary to the container engine: the `Engine` trait every other module
//! talks through, and `EngineError`, the one error type that crosses it.
//!
//! Owns the vocabulary of engine calls (list, inspect, remove). It has no way
//! to remove an image, on purpose. It must not decide policy: whether a 404 is
//! fine or a 409 is worth waiting for is for `apply` to say.

use std::future::Future;

use crate::model::{ContainerInfo, ImageInfo, VolumeInfo};

pub mod docker;
pub mod memory;

/// A container engine as sandboxctl needs it. Implemented by the bollard engine
/// (`docker::DockerEngine`) and the in-memory engine (`memory::MemoryEngine`).
///
/// Every call is one request; none of them retries. Listings return what the
/// engine returned: the caller re-checks labels on the client.
pub trait Engine: Sync {
    /// Where the engine is, for messages (`unix:///var/run/docker.sock`, `memory`).
    fn endpoint(&self) -> &str;

    /// All containers, running or not, that carry every `key=value` in
    /// `label_filters` (server-side filter). Empty filters list every container.
    fn list_containers(
        &self,
        label_filters: &[String],
    ) -> impl Future<Output = Result<Vec<ContainerInfo>, EngineError>> + Send;

    /// All volumes that carry every `key=value` in `label_filters`.
    fn list_volumes(
        &self,
        label_filters: &[String],
    ) -> impl Future<Output = Result<Vec<VolumeInfo>, EngineError>> + Send;

    /// All images with a tag matching `reference` (e.g. `ca-sbx:*`).
    fn list_images(
        &self,
        reference: &str,
    ) -> impl Future<Output = Result<Vec<ImageInfo>, EngineError>> + Send;

    /// One container by ID; `EngineError::NotFound` once it is gone.
    fn inspect_container(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<ContainerInfo, EngineError>> + Send;

    /// One volume by name; `EngineError::NotFound` once it is gone.
    fn inspect_volume(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<VolumeInfo, EngineError>> + Send;

    /// Removes a container by ID, killing it if it runs and removing its
    /// anonymous volumes with it (`docker rm -f -v`). Named volumes stay.
    fn remove_container(&self, id: &str) -> impl Future<Output = Result<(), EngineError>> + Send;

    /// Removes a named volume, never forcibly: a volume in use fails with `Conflict`.
    fn remove_volume(&self, name: &str) -> impl Future<Output = Result<(), EngineError>> + Send;
}

/// What went wrong in one engine call. `call` names the call and its object,
/// e.g. `remove container 3f2a1b4c5d6e` or `list volumes`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// The engine could not be reached at all (no socket, connection refused,
    /// version negotiation failed).
    #[error("cannot reach the Docker engine at {endpoint}: {detail}; check that dockerd is running and DOCKER_HOST points at it")]
    Unreachable { endpoint: String, detail: String },
    /// The call did not complete within its deadline.
    #[error("{call}: no answer within {seconds}s; the engine is hung or overloaded (raise --timeout to wait longer)")]
    Timeout { call: String, seconds: u64 },
    /// The object does not exist (HTTP 404).
    #[error("{call}: not found: {message}")]
    NotFound { call: String, message: String },
    /// The engine refused because of the object's state (HTTP 409): in use, or
    /// removal already in progress.
    #[error("{call}: conflict: {message}")]
    Conflict { call: String, message: String },
    /// Any other error status from the engine.
    #[error("{call}: engine answered HTTP {status}: {message}")]
    Status {
        call: String,
        status: u16,
        message: String,
    },
    /// The connection broke or the answer could not be read.
    #[error("{call}: {detail}")]
    Transport { call: String, detail: String },
}

impl EngineError {
    /// True for a 404: the object is already gone.
    pub fn is_not_found(&self) -> bool {
        matches!(self, EngineError::NotFound { .. })
    }

    /// True for Docker's 409 "removal of container ... is already in progress".
    pub fn is_removal_in_progress(&self) -> bool {
        matches!(self, EngineError::Conflict { message, .. } if message.contains("already in progress"))
    }

    /// For Docker's 409 `remove <v>: volume is in use - [<id>, <id>]`, the IDs of
    /// the containers that hold the volume.
    pub fn volume_users(&self) -> Option<Vec<String>> {
        let EngineError::Conflict { message, .. } = self else {
            return None;
        };
        let rest = &message[message.find("volume is in use")?..];
        let list = &rest[rest.find('[')? + 1..rest.rfind(']')?];
        Some(
            list.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_volume_users_from_docker_message() {
        let e = EngineError::Conflict {
            call: "remove volume v".into(),
            message: "remove v: volume is in use - [abc123, def456]".into(),
        };
        assert_eq!(e.volume_users().unwrap(), vec!["abc123", "def456"]);
        assert!(!e.is_removal_in_progress());
        let p = EngineError::Conflict {
            call: "remove container c".into(),
            message: "removal of container c is already in progress".into(),
        };
        assert!(p.is_removal_in_progress());
        assert_eq!(p.volume_users(), None);
    }
}
