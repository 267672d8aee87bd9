//! A failed engine call as a typed `EngineError`: bollard's errors and
//! Docker's and Podman's error texts (status and message) read into an
//! `ErrorKind` (not found, in progress, in use with its holders, no swarm,
//! unreachable, timeout, other).
//!
//! Owns only the reading of what the engine answered. Must not decide what
//! an error means for the run (that is `apply`'s and `plan`'s), retry, or
//! make requests.

use std::time::Duration;

use bollard::errors::Error as BollardError;

use crate::engine::connect::{describe, error_chain, is_connect_failure, whole_seconds};
use crate::engine::ssh;
use crate::engine::{EngineError, ErrorKind};

/// Docker 20.10 answers a `since` filter naming a container that is gone
/// with HTTP 500 `no such container <id>`: that is `NotFound`.
pub(super) fn since_gone(e: EngineError) -> EngineError {
    match e.kind {
        ErrorKind::Other {
            status: Some(500),
            ref message,
        } if message
            .to_ascii_lowercase()
            .starts_with("no such container") =>
        {
            let message = message.clone();
            EngineError::new(e.call, ErrorKind::NotFound { message })
        }
        _ => e,
    }
}

/// Maps a bollard error of call `call` to an `EngineError`: 404 -> `NotFound`;
/// Docker's and Podman's "in progress" and "in use" texts -> `InProgress` and
/// `InUse` (with the holders they name); other statuses -> `Other`; a failure to
/// open a connection (no socket, refused) -> `Unreachable`; bollard's own request
/// timeout -> `Timeout`; anything else (connection closed mid-answer,
/// unreadable answer) -> `Other` without a status.
pub(super) fn map_error(
    call: &str,
    endpoint: &str,
    timeout: Duration,
    err: BollardError,
) -> EngineError {
    let kind = match err {
        BollardError::DockerResponseServerError {
            status_code,
            message,
        } => classify(status_code, message),
        BollardError::RequestTimeoutError => ErrorKind::Timeout {
            seconds: whole_seconds(timeout),
        },
        BollardError::SocketNotFoundError(path) => ErrorKind::Unreachable {
            endpoint: endpoint.to_string(),
            detail: format!("{call}: socket {path} does not exist"),
        },
        // ssh ended the connection: its own words say why and what to do.
        other if ssh::failure_in(&other).is_some() => ErrorKind::Unreachable {
            endpoint: endpoint.to_string(),
            detail: format!(
                "{call}: {}",
                ssh::failure_in(&other).expect("checked")
            ),
        },
        // EMFILE looks like a failure to connect, but the engine is fine: we are
        // out of file descriptors (one per connection in flight).
        other if error_chain(&other).contains("os error 24") => ErrorKind::Other {
            status: None,
            message: "cannot open a connection: too many open files; lower --parallelism or raise the open-files limit (ulimit -n)".to_string(),
        },
        other if is_connect_failure(&other) => ErrorKind::Unreachable {
            endpoint: endpoint.to_string(),
            detail: format!("{call}: {}", describe(&other)),
        },
        other => ErrorKind::Other {
            status: None,
            message: describe(&other),
        },
    };
    EngineError::new(call, kind)
}

/// Reads an engine's error answer. The texts recognised, measured on Docker
/// 20.10 and Podman 4.3 (see the shared engine notes):
/// - 404 anything: `No such container: x`, `get v: no such volume`, Podman's
///   `no container with name or ID "x" found: no such container`.
/// - Docker 409 `removal of container x is already in progress`.
/// - Docker 409 `remove v: volume is in use - [id1, id2]`; Podman 409
///   `volume v is being used by the following container(s): id1, id2: volume is being used`.
/// - A network with containers attached: Docker `... has active endpoints`
///   (403 on 20.10, 409 on newer engines); Podman `... has associated containers ...`.
/// - Docker 503 `This node is not a swarm manager. ...` on a listing of
///   services, configs or secrets: a worker's goes on `Worker nodes can't
///   be used to view or modify cluster state. ...`, an engine in no swarm's
///   on `Use "docker swarm init" or "docker swarm join" ...`.
pub(super) fn classify(status: u16, message: String) -> ErrorKind {
    if status == 404 {
        return ErrorKind::NotFound { message };
    }
    if status == 503 && message.contains("not a swarm manager") {
        let worker = message.contains("Worker nodes");
        return ErrorKind::NoSwarm { worker, message };
    }
    if message.contains("already in progress") {
        return ErrorKind::InProgress { message };
    }
    let holders = |list: &str| -> Vec<String> {
        list.split([',', ' '])
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    if let Some(rest) = message.find("volume is in use").map(|at| &message[at..]) {
        let listed = match (rest.find('['), rest.rfind(']')) {
            (Some(a), Some(b)) if a < b => holders(&rest[a + 1..b]),
            _ => Vec::new(),
        };
        return ErrorKind::InUse {
            holders: listed,
            message,
        };
    }
    const PODMAN_IN_USE: &str = "is being used by the following container(s):";
    if let Some(at) = message.find(PODMAN_IN_USE) {
        let rest = &message[at + PODMAN_IN_USE.len()..];
        let list = rest.split(": ").next().unwrap_or_default();
        return ErrorKind::InUse {
            holders: holders(list),
            message,
        };
    }
    if message.contains("has active endpoints") || message.contains("has associated containers") {
        return ErrorKind::InUse {
            holders: Vec::new(),
            message,
        };
    }
    ErrorKind::Other {
        status: Some(status),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(30);

    fn server(status_code: u16, message: &str) -> BollardError {
        BollardError::DockerResponseServerError {
            status_code,
            message: message.to_string(),
        }
    }

    fn kind_of(status: u16, message: &str) -> ErrorKind {
        map_error("call", "unix:///s", T, server(status, message)).kind
    }

    #[test]
    fn reads_docker_and_podman_error_texts() {
        for message in [
            "No such container: abc",
            "get v: no such volume",
            "no container with name or ID \"x\" found: no such container",
            "no volume with name \"x\" found: no such volume",
        ] {
            assert!(matches!(kind_of(404, message), ErrorKind::NotFound { .. }));
        }
        assert!(matches!(
            kind_of(409, "removal of container c is already in progress"),
            ErrorKind::InProgress { .. }
        ));
        let holders = |k: ErrorKind| match k {
            ErrorKind::InUse { holders, .. } => holders,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            holders(kind_of(
                409,
                "remove v: volume is in use - [0123abcd, 4567ef]"
            )),
            vec!["0123abcd", "4567ef"]
        );
        assert_eq!(
            holders(kind_of(
                409,
                "volume v is being used by the following container(s): 0123abcd: volume is being used"
            )),
            vec!["0123abcd"]
        );
        assert!(holders(kind_of(
            403,
            "error while removing network: network n id 1a2b has active endpoints"
        ))
        .is_empty());
        assert_eq!(
            kind_of(500, "boom"),
            ErrorKind::Other {
                status: Some(500),
                message: "boom".into()
            }
        );
    }

    #[test]
    fn maps_connection_failures_to_unreachable_and_the_rest_to_other() {
        use std::io::{Error, ErrorKind as Io};
        for kind in [Io::ConnectionRefused, Io::NotFound] {
            let e = map_error(
                "list containers",
                "tcp://127.0.0.1:1",
                T,
                BollardError::IOError {
                    err: Error::new(kind, "x"),
                },
            );
            assert!(
                matches!(&e.kind, ErrorKind::Unreachable { endpoint, detail }
                    if endpoint == "tcp://127.0.0.1:1" && detail.starts_with("list containers: ")),
                "{e:?}"
            );
        }
        let e = map_error(
            "list containers",
            "unix:///gone.sock",
            T,
            BollardError::SocketNotFoundError("/gone.sock".into()),
        );
        assert!(e.is_unreachable(), "{e:?}");
        for kind in [Io::UnexpectedEof, Io::ConnectionReset, Io::BrokenPipe] {
            let e = map_error(
                "remove volume v",
                "unix:///s",
                T,
                BollardError::IOError {
                    err: Error::new(kind, "connection closed"),
                },
            );
            assert_eq!(
                e,
                EngineError::new(
                    "remove volume v",
                    ErrorKind::Other {
                        status: None,
                        message: "connection closed".into()
                    }
                )
            );
        }
    }

    #[test]
    fn bollard_timeout_is_a_timeout_in_whole_seconds() {
        let e = map_error(
            "list volumes",
            "unix:///s",
            Duration::from_millis(1500),
            BollardError::RequestTimeoutError,
        );
        assert_eq!(e.kind, ErrorKind::Timeout { seconds: 2 });
        assert_eq!(whole_seconds(Duration::from_millis(1)), 1);
        assert_eq!(whole_seconds(Duration::ZERO), 1);
        assert_eq!(whole_seconds(Duration::from_secs(30)), 30);
    }

    #[test]
    fn a_swarm_worker_is_told_from_an_engine_in_no_swarm() {
        // Docker 20.10's 503 texts (tests/swarm.rs meets both for real).
        let worker = "This node is not a swarm manager. Worker nodes can't be used to view or modify cluster state. Please run this command on a manager node or promote the current node to a manager.";
        let inactive = "This node is not a swarm manager. Use \"docker swarm init\" or \"docker swarm join\" to connect this node to swarm and try again.";
        assert!(matches!(
            classify(503, worker.into()),
            ErrorKind::NoSwarm { worker: true, .. }
        ));
        assert!(matches!(
            classify(503, inactive.into()),
            ErrorKind::NoSwarm { worker: false, .. }
        ));
    }
}
