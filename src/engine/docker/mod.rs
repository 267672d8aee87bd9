//! The bollard engine: the only place that imports bollard, for Docker and for
//! Podman's Docker-compatible API.
//!
//! This file is the client: connecting (DOCKER_HOST, API version
//! negotiation) and per-call deadlines (`call`, `read`, `bounded`). The
//! `Engine` calls, one request each (listing filters, swarm task waits,
//! streams), are in `calls.rs`; the wire models become `model::Object`s in
//! `wire.rs`; a failed call becomes a typed `ErrorKind` in `errors.rs`. Must
//! not decide policy (what a 404 or an object in use means for the run is
//! `apply`'s) or filter on the client.

mod calls;
mod errors;
mod wire;

use std::future::Future;
use std::time::Duration;

use bollard::errors::Error as BollardError;
use bollard::Docker;

use self::errors::map_error;
/// For the in-memory engine, which reads its fixtures' times as Docker's.
#[cfg(any(test, feature = "testing"))]
pub(crate) use self::wire::parse_time;
use super::connect::whole_seconds;
use super::{EngineError, ErrorKind};
use crate::engine::endpoint::Endpoint;

pub use crate::engine::endpoint::DEFAULT_HOST;

/// A Docker Engine (or Podman's Docker API) reached through bollard.
///
/// Holds one bollard client (no connection pool: every call opens its own
/// connection, so callers bound their own concurrency). Every call is one
/// request bounded by the deadline given at connect time; none retries.
pub struct DockerEngine {
    docker: Docker,
    name: String,
    endpoint: String,
    /// The deadline of a call that changes something (a removal, a create,
    /// a stop, each chunk of a stream): `--timeout`.
    timeout: Duration,
    /// The deadline of a read (a listing, an inspect, the clock): one stuck
    /// object costs this, not the run's. `--call-timeout`, at most `timeout`.
    read_timeout: Duration,
    /// Calls that passed their deadline, by endpoint.
    misses: std::sync::Arc<super::DeadlineMisses>,
    /// Podman waits a container's stop timeout on a forced removal; killing
    /// first avoids the wait.
    podman: bool,
    /// Requests in flight at once over ssh: as many as the transport keeps
    /// connections open (`engine::ssh::CONNECTIONS`), so a request never
    /// waits inside the transport without a deadline of its own.
    requests: Option<tokio::sync::Semaphore>,
}

/// The deadline of a read unless set (`with_read_timeout`): a few seconds,
/// as a listing or an inspect answers in milliseconds on a healthy engine.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Tries of a request whose ssh connection or session sshd turned away.
const SSH_ATTEMPTS: u64 = 4;

impl DockerEngine {
    /// Connects to a resolved endpoint (unix, tcp/http, TLS, ssh; see
    /// `engine::connect`), negotiates the API version (every later request
    /// carries its `/vX.Y` prefix) and learns whether the engine is Podman.
    /// Every later call that changes something is bounded by `timeout`;
    /// every read, the version check first of all, by `read_timeout` (at
    /// most `timeout`), or without it by [`DEFAULT_READ_TIMEOUT`] (over ssh
    /// by `timeout`: a read may open an ssh session first). Any failure here
    /// is `ErrorKind::Unreachable` naming the endpoint.
    pub(crate) async fn connect(
        ep: &Endpoint,
        name: &str,
        timeout: Duration,
        read_timeout: Option<Duration>,
    ) -> Result<Self, EngineError> {
        let unreachable = |detail: String| {
            EngineError::new(
                "connect",
                ErrorKind::Unreachable {
                    endpoint: ep.host.clone(),
                    detail,
                },
            )
        };
        let ssh = ep.host.to_ascii_lowercase().starts_with("ssh://");
        let read_timeout = match read_timeout {
            Some(read) => read.min(timeout),
            None if ssh => timeout,
            None => timeout.min(DEFAULT_READ_TIMEOUT),
        };
        let (docker, server) = super::connect::connect_versioned(ep, timeout, read_timeout)
            .await
            .map_err(unreachable)?;
        let podman = server.podman;
        Ok(DockerEngine {
            docker,
            name: name.to_string(),
            endpoint: ep.host.clone(),
            timeout,
            read_timeout,
            misses: Default::default(),
            podman,
            requests: ssh.then(|| tokio::sync::Semaphore::new(super::ssh::CONNECTIONS)),
        })
    }

    /// Connects to `host` (`None` or empty: [`DEFAULT_HOST`]) as `--host` would,
    /// without reading the environment (no TLS): for tests and tools.
    pub async fn connect_to(host: Option<&str>, timeout: Duration) -> Result<Self, EngineError> {
        let host = host
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .unwrap_or(DEFAULT_HOST);
        let ep = crate::engine::endpoint::resolve_host(
            host,
            &crate::engine::endpoint::EndpointInput::default(),
            crate::engine::endpoint::ChosenBy::HostFlag,
        )
        .map_err(|e| {
            EngineError::new(
                "connect",
                ErrorKind::Unreachable {
                    endpoint: host.to_string(),
                    detail: e.to_string(),
                },
            )
        })?;
        Self::connect(&ep, crate::model::DEFAULT_ENGINE, timeout, None).await
    }

    /// The same engine with reads bounded by `read_timeout` (at most the
    /// write deadline).
    pub fn with_read_timeout(mut self, read_timeout: Duration) -> Self {
        self.read_timeout = read_timeout.min(self.timeout);
        self
    }

    /// The same engine counting the calls that pass their deadline in
    /// `misses` (shared with the connections made before and after it).
    pub(crate) fn with_misses(mut self, misses: std::sync::Arc<super::DeadlineMisses>) -> Self {
        self.misses = misses;
        self
    }

    /// The Engine API version in use after negotiation, e.g. `1.41`.
    pub fn api_version(&self) -> String {
        let v = self.docker.client_version();
        format!("{}.{}", v.major_version, v.minor_version)
    }

    /// Runs one bollard call that changes something under the write deadline.
    async fn call<T, F, Fut>(&self, call: String, request: F) -> Result<T, EngineError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, BollardError>>,
    {
        self.bounded(call, self.timeout, request).await
    }

    /// Runs one read (a listing, an inspect) under the read deadline.
    async fn read<T, F, Fut>(&self, call: String, request: F) -> Result<T, EngineError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, BollardError>>,
    {
        self.bounded(call, self.read_timeout, request).await
    }

    /// Runs one bollard call under `deadline` and maps its error.
    async fn bounded<T, F, Fut>(
        &self,
        call: String,
        deadline: Duration,
        request: F,
    ) -> Result<T, EngineError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, BollardError>>,
    {
        let _permit = match &self.requests {
            Some(requests) => Some(requests.acquire().await.expect("never closed")),
            None => None,
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            match tokio::time::timeout(deadline, request()).await {
                Ok(Ok(value)) => return Ok(value),
                // Over ssh, sshd can turn a connection or a session away
                // (MaxStartups, MaxSessions): the request never reached the
                // engine, so sending it again is safe. Nothing else is ever
                // retried.
                Ok(Err(e))
                    if self.requests.is_some()
                        && attempt < SSH_ATTEMPTS
                        && super::ssh::failure_in(&e).is_some_and(|f| f.never_reached_engine()) =>
                {
                    tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
                }
                Ok(Err(e)) => return Err(map_error(&call, &self.endpoint, deadline, e)),
                Err(_) => {
                    self.misses.add(&call);
                    return Err(EngineError::new(
                        call,
                        ErrorKind::Timeout {
                            seconds: whole_seconds(deadline),
                        },
                    ));
                }
            }
        }
    }
}
