//! The bollard engine: the only file that imports bollard, for Docker and for
//! Podman's Docker-compatible API.
//!
//! Owns connecting (DOCKER_HOST, API version negotiation), per-call deadlines,
//! the conversion of the wire types into `model::Object`, and the parsing of
//! Docker's and Podman's error texts into a typed `ErrorKind`. Must not decide
//! policy (what a 404 or an object in use means for the run is `apply`'s) or
//! filter on the client.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use bollard::errors::Error as BollardError;
use bollard::models::{
    ContainerInspectResponse, ContainerSummary, ImageSummary, MountPoint, Network, Volume,
};
use bollard::query_parameters::{
    EventsOptions, InspectContainerOptions, InspectNetworkOptions, InspectServiceOptions,
    KillContainerOptionsBuilder, ListConfigsOptionsBuilder, ListContainersOptionsBuilder,
    ListImagesOptionsBuilder, ListNetworksOptionsBuilder, ListSecretsOptionsBuilder,
    ListServicesOptionsBuilder, ListVolumesOptionsBuilder, RemoveContainerOptionsBuilder,
    RemoveVolumeOptionsBuilder,
};
use bollard::Docker;
use futures_util::stream::{BoxStream, StreamExt};

use super::connect::{describe, error_chain, is_connect_failure, whole_seconds};
use super::{Engine, EngineError, ErrorKind, Event, Helper, TarBody, TarStream, Users};
use crate::engine::endpoint::Endpoint;
use crate::model::{short_id, ImageInfo, Join, Kind, Labels, Namespace, Object, ObjectKey};

pub use crate::engine::endpoint::DEFAULT_HOST;

/// The image tag Docker reports for an untagged image; never a real tag.
const NONE_TAG: &str = "<none>:<none>";

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
    /// Every later call that changes something is bounded by `timeout`,
    /// every read by [`DEFAULT_READ_TIMEOUT`] (over ssh by `timeout`) unless
    /// `with_read_timeout` says otherwise. Any failure here is
    /// `ErrorKind::Unreachable` naming the endpoint.
    pub(crate) async fn connect(
        ep: &Endpoint,
        name: &str,
        timeout: Duration,
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
        let (docker, server) = super::connect::connect_versioned(ep, timeout)
            .await
            .map_err(unreachable)?;
        let podman = server
            .components
            .unwrap_or_default()
            .iter()
            .any(|c| c.name.to_lowercase().contains("podman"));
        let ssh = ep.host.to_ascii_lowercase().starts_with("ssh://");
        Ok(DockerEngine {
            docker,
            name: name.to_string(),
            endpoint: ep.host.clone(),
            timeout,
            // Over ssh a read may first open a session (a handshake, the
            // remote docker CLI starting): it gets the write deadline.
            read_timeout: if ssh {
                timeout
            } else {
                timeout.min(DEFAULT_READ_TIMEOUT)
            },
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
        Self::connect(&ep, crate::model::DEFAULT_ENGINE, timeout).await
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

#[async_trait]
impl Engine for DockerEngine {
    fn name(&self) -> &str {
        &self.name
    }

    fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn deadline_misses(&self) -> Vec<(String, u64)> {
        self.misses.counts()
    }

    async fn list(&self, kind: Kind, filters: &[String]) -> Result<Vec<Object>, EngineError> {
        let map = label_filters(filters);
        let call = format!("list {}", kind.plural());
        let engine = self.name.as_str();
        Ok(match kind {
            Kind::Container => {
                let options = ListContainersOptionsBuilder::new()
                    .all(true)
                    .filters(&map)
                    .build();
                let list = self
                    .read(call, || self.docker.list_containers(Some(options.clone())))
                    .await?;
                list.into_iter()
                    .map(|c| container_from_summary(engine, c))
                    .collect()
            }
            Kind::Volume => {
                let options = ListVolumesOptionsBuilder::new().filters(&map).build();
                let list = self
                    .read(call, || self.docker.list_volumes(Some(options.clone())))
                    .await?;
                list.volumes
                    .unwrap_or_default()
                    .into_iter()
                    .map(|v| volume_from(engine, v))
                    .collect()
            }
            Kind::Network => {
                let options = ListNetworksOptionsBuilder::new().filters(&map).build();
                let list = self
                    .read(call, || self.docker.list_networks(Some(options.clone())))
                    .await?;
                list.into_iter().map(|n| network_from(engine, n)).collect()
            }
            Kind::Service | Kind::Config | Kind::Secret if self.podman => {
                return Err(EngineError::new(
                    call,
                    ErrorKind::NoSwarm {
                        worker: false,
                        message: "Podman has no swarm".into(),
                    },
                ))
            }
            Kind::Service => {
                let options = ListServicesOptionsBuilder::new().filters(&map).build();
                let list = self
                    .read(call, || self.docker.list_services(Some(options.clone())))
                    .await?;
                list.into_iter().map(|s| service_from(engine, s)).collect()
            }
            Kind::Config => {
                let options = ListConfigsOptionsBuilder::new().filters(&map).build();
                let list = self
                    .read(call, || self.docker.list_configs(Some(options.clone())))
                    .await?;
                list.into_iter()
                    .map(|c| {
                        let spec = c.spec.unwrap_or_default();
                        swarm_object(
                            engine,
                            Kind::Config,
                            c.id,
                            spec.name,
                            spec.labels,
                            c.created_at,
                        )
                    })
                    .collect()
            }
            Kind::Secret => {
                let options = ListSecretsOptionsBuilder::new().filters(&map).build();
                let list = self
                    .read(call, || self.docker.list_secrets(Some(options.clone())))
                    .await?;
                list.into_iter()
                    .map(|c| {
                        let spec = c.spec.unwrap_or_default();
                        swarm_object(
                            engine,
                            Kind::Secret,
                            c.id,
                            spec.name,
                            spec.labels,
                            c.created_at,
                        )
                    })
                    .collect()
            }
        })
    }

    /// Docker's `volume`, `network`, `since` and `status` filters. Podman
    /// gets the listing of every container (the superset): its filters
    /// differ (no `restarting` status), and nothing here measured them.
    async fn list_users(&self, users: &Users) -> Result<Vec<Object>, EngineError> {
        if self.podman {
            return self.list(Kind::Container, &[]).await;
        }
        let (call, map) = match users {
            Users::Mounting(volumes) => (
                "list containers using volumes",
                HashMap::from([("volume", volumes.iter().map(String::as_str).collect())]),
            ),
            Users::Attached(networks) => (
                "list containers on networks",
                HashMap::from([("network", networks.iter().map(String::as_str).collect())]),
            ),
            Users::LiveSince(id) => (
                "list containers running since",
                HashMap::from([
                    ("since", vec![id.as_str()]),
                    ("status", vec!["running", "paused", "restarting"]),
                ]),
            ),
        };
        let options = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&map)
            .build();
        let list = self
            .read(call.to_string(), || {
                self.docker.list_containers(Some(options.clone()))
            })
            .await
            .map_err(since_gone)?;
        let engine = self.name.as_str();
        Ok(list
            .into_iter()
            .map(|c| container_from_summary(engine, c))
            .collect())
    }

    async fn list_images(&self, reference: &str) -> Result<Vec<ImageInfo>, EngineError> {
        let filters = HashMap::from([("reference", vec![reference])]);
        let options = ListImagesOptionsBuilder::new().filters(&filters).build();
        let list = self
            .read(format!("list images {reference}"), || {
                self.docker.list_images(Some(options.clone()))
            })
            .await?;
        Ok(list.into_iter().map(image_from).collect())
    }

    async fn clock(&self) -> Result<i64, EngineError> {
        let info = self
            .read("read the engine's clock (info)".into(), || {
                self.docker.info()
            })
            .await?;
        let text = info.system_time.unwrap_or_default();
        parse_time_ms(&text).ok_or_else(|| {
            EngineError::new(
                String::from("read the engine's clock (info)"),
                ErrorKind::Other {
                    status: None,
                    message: format!("SystemTime {text:?} is not an RFC 3339 time"),
                },
            )
        })
    }

    async fn create_volume(&self, name: &str, labels: &Labels) -> Result<Object, EngineError> {
        let options = bollard::models::VolumeCreateRequest {
            name: Some(name.to_string()),
            labels: Some(labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
            ..Default::default()
        };
        let v = self
            .call(format!("create volume {name}"), || {
                self.docker.create_volume(options.clone())
            })
            .await?;
        Ok(volume_from(&self.name, v))
    }

    async fn create_helper(&self, helper: &Helper) -> Result<String, EngineError> {
        let body = bollard::models::ContainerCreateBody {
            image: Some(helper.image.clone()),
            // Never started: the command only has to be there for create.
            entrypoint: Some(vec!["/ca-sbx-helper-never-started".to_string()]),
            cmd: Some(vec![]),
            labels: Some(
                helper
                    .labels
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            network_disabled: Some(true),
            host_config: Some(bollard::models::HostConfig {
                binds: Some(vec![format!("{}:{}", helper.volume, helper.mount)]),
                network_mode: Some("none".to_string()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let created = self
            .call(
                format!("create a helper container for volume {}", helper.volume),
                || {
                    self.docker.create_container(
                        None::<bollard::query_parameters::CreateContainerOptions>,
                        body.clone(),
                    )
                },
            )
            .await?;
        Ok(created.id)
    }

    async fn stop(&self, container: &str) -> Result<(), EngineError> {
        let kill = KillContainerOptionsBuilder::new().signal("SIGKILL").build();
        // A container that does not run answers 409 (Podman: 500); the wait
        // below tells whether it is there and stopped.
        let _ = self
            .call(format!("kill container {}", short_id(container)), || {
                self.docker.kill_container(container, Some(kill.clone()))
            })
            .await;
        let wait = bollard::query_parameters::WaitContainerOptionsBuilder::new()
            .condition("not-running")
            .build();
        let waited = self
            .call(
                format!("wait for container {}", short_id(container)),
                || {
                    let mut first = self.docker.wait_container(container, Some(wait.clone()));
                    async move {
                        match first.next().await {
                            // A non-zero exit status is an error to bollard: here it
                            // only says the container stopped.
                            Some(Err(BollardError::DockerContainerWaitError { .. })) | None => {
                                Ok(())
                            }
                            Some(Err(e)) => Err(e),
                            Some(Ok(_)) => Ok(()),
                        }
                    }
                },
            )
            .await;
        waited
    }

    fn download(&self, container: &str, path: &str) -> TarStream {
        let options = bollard::query_parameters::DownloadFromContainerOptionsBuilder::new()
            .path(path)
            .build();
        let call = format!("read {path} of container {}", short_id(container));
        let endpoint = self.endpoint.clone();
        let timeout = self.timeout;
        let body = self
            .docker
            .download_from_container(container, Some(options))
            .boxed();
        // Each chunk within the deadline; the whole stream may take as long as it takes.
        futures_util::stream::unfold(Some(body), move |body| {
            let call = call.clone();
            let endpoint = endpoint.clone();
            async move {
                let mut body = body?;
                match tokio::time::timeout(timeout, body.next()).await {
                    Ok(None) => None,
                    Ok(Some(Ok(chunk))) => Some((Ok(chunk), Some(body))),
                    Ok(Some(Err(e))) => Some((Err(map_error(&call, &endpoint, timeout, e)), None)),
                    Err(_) => Some((
                        Err(EngineError::new(
                            call,
                            ErrorKind::Timeout {
                                seconds: whole_seconds(timeout),
                            },
                        )),
                        None,
                    )),
                }
            }
        })
        .boxed()
    }

    async fn upload(&self, container: &str, path: &str, tar: TarBody) -> Result<(), EngineError> {
        let options = bollard::query_parameters::UploadToContainerOptionsBuilder::new()
            .path(path)
            .build();
        let call = format!("fill {path} of container {}", short_id(container));
        // One request whose body is the stream: not retried. It may take as
        // long as it takes while it moves; it fails once neither a chunk was
        // taken from the body nor the answer came within the call deadline
        // (an engine that stopped reading, or never answers).
        let moved = std::sync::Arc::new(std::sync::Mutex::new(tokio::time::Instant::now()));
        let seen = moved.clone();
        let body = tar.inspect(move |_| *seen.lock().unwrap() = tokio::time::Instant::now());
        let put = self.docker.upload_to_container(
            container,
            Some(options),
            bollard::body_try_stream(body),
        );
        tokio::pin!(put);
        loop {
            let idle_until = *moved.lock().unwrap() + self.timeout;
            tokio::select! {
                done = &mut put => {
                    return done.map_err(|e| map_error(&call, &self.endpoint, self.timeout, e));
                }
                () = tokio::time::sleep_until(idle_until) => {
                    if moved.lock().unwrap().elapsed() >= self.timeout {
                        return Err(EngineError::new(
                            call,
                            ErrorKind::Timeout {
                                seconds: whole_seconds(self.timeout),
                            },
                        ));
                    }
                }
            }
        }
    }

    async fn inspect(&self, key: &ObjectKey) -> Result<Object, EngineError> {
        let call = format!("inspect {} {}", key.kind, shown_id(key));
        let engine = self.name.as_str();
        Ok(match key.kind {
            Kind::Container => {
                let mut o = container_from_inspect(
                    engine,
                    self.read(call, || {
                        self.docker
                            .inspect_container(&key.id, None::<InspectContainerOptions>)
                    })
                    .await?,
                );
                // Podman lets any container's ipc namespace be joined.
                if self.podman {
                    o.ipc_shareable = None;
                }
                o
            }
            Kind::Volume => volume_from(
                engine,
                self.read(call, || self.docker.inspect_volume(&key.id))
                    .await?,
            ),
            Kind::Network => {
                let n = self
                    .read(call, || {
                        self.docker
                            .inspect_network(&key.id, None::<InspectNetworkOptions>)
                    })
                    .await?;
                let mut o = Object::new(
                    engine,
                    Kind::Network,
                    n.id.as_deref().unwrap_or_default(),
                    n.name.as_deref().unwrap_or_default(),
                );
                o.labels = labels_from(n.labels);
                o.created = n.created.as_deref().and_then(parse_time);
                o
            }
            Kind::Service => service_from(
                engine,
                self.read(call, || {
                    self.docker
                        .inspect_service(&key.id, None::<InspectServiceOptions>)
                })
                .await?,
            ),
            Kind::Config => {
                let c = self
                    .read(call, || self.docker.inspect_config(&key.id))
                    .await?;
                let spec = c.spec.unwrap_or_default();
                swarm_object(
                    engine,
                    Kind::Config,
                    c.id,
                    spec.name,
                    spec.labels,
                    c.created_at,
                )
            }
            Kind::Secret => {
                let c = self
                    .read(call, || self.docker.inspect_secret(&key.id))
                    .await?;
                let spec = c.spec.unwrap_or_default();
                swarm_object(
                    engine,
                    Kind::Secret,
                    c.id,
                    spec.name,
                    spec.labels,
                    c.created_at,
                )
            }
        })
    }

    async fn remove(&self, key: &ObjectKey) -> Result<(), EngineError> {
        let call = format!("remove {} {}", key.kind, shown_id(key));
        match key.kind {
            Kind::Container => {
                if self.podman {
                    // Podman's forced removal stops with SIGTERM and waits the
                    // container's stop timeout; SIGKILL first. A container that
                    // is not running answers an error here, which changes nothing.
                    let kill = KillContainerOptionsBuilder::new().signal("SIGKILL").build();
                    let _ = self
                        .call(format!("kill container {}", short_id(&key.id)), || {
                            self.docker.kill_container(&key.id, Some(kill.clone()))
                        })
                        .await;
                }
                let options = RemoveContainerOptionsBuilder::new()
                    .force(true)
                    .v(true)
                    .link(false)
                    .build();
                self.call(call, || {
                    self.docker.remove_container(&key.id, Some(options.clone()))
                })
                .await
            }
            Kind::Volume => {
                let options = RemoveVolumeOptionsBuilder::new().force(false).build();
                self.call(call, || {
                    self.docker.remove_volume(&key.id, Some(options.clone()))
                })
                .await
            }
            Kind::Network => {
                self.call(call, || self.docker.remove_network(&key.id))
                    .await
            }
            Kind::Service => {
                self.call(call.clone(), || self.docker.delete_service(&key.id))
                    .await?;
                self.wait_for_tasks(&key.id, &call).await
            }
            Kind::Config => self.call(call, || self.docker.delete_config(&key.id)).await,
            Kind::Secret => self.call(call, || self.docker.delete_secret(&key.id)).await,
        }
    }

    fn events(&self, label_filters: &[String]) -> BoxStream<'static, Result<Event, EngineError>> {
        let containers = HashMap::from([
            ("type".to_string(), vec!["container".to_string()]),
            ("label".to_string(), label_filters.to_vec()),
        ]);
        // The Swarm kinds' events too on Docker (Podman has no swarm).
        let types: &[&str] = if self.podman {
            &["volume", "network"]
        } else {
            &["volume", "network", "service", "config", "secret"]
        };
        let others = HashMap::from([(
            "type".to_string(),
            types.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
        )]);
        let endpoint = self.endpoint.clone();
        let timeout = self.timeout;
        let docker = self.docker.clone();
        let follow = move |filters: HashMap<String, Vec<String>>| {
            let endpoint = endpoint.clone();
            docker
                .events(Some(EventsOptions {
                    since: None,
                    until: None,
                    filters: Some(filters),
                }))
                .map(move |item| match item {
                    Ok(m) => Ok(event_from(m)),
                    Err(e) => Err(map_error("follow events", &endpoint, timeout, e)),
                })
        };
        futures_util::stream::select(follow(containers), follow(others)).boxed()
    }
}

impl DockerEngine {
    /// After `DELETE /services/{id}`: waits, within the call deadline, until
    /// this engine lists no container of the service's tasks (Swarm stops and
    /// removes them; its stop grace period may take a while). Those still
    /// there at the deadline are named in the error: the service is gone, its
    /// containers are not yet.
    async fn wait_for_tasks(&self, service: &str, call: &str) -> Result<(), EngineError> {
        let filter = [format!("{}={service}", crate::model::SWARM_SERVICE_ID)];
        let map = label_filters(&filter);
        let options = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&map)
            .build();
        let started = tokio::time::Instant::now();
        let mut pause = Duration::from_millis(50);
        loop {
            let left = self
                .call(
                    format!("list the task containers of service {}", short_id(service)),
                    || self.docker.list_containers(Some(options.clone())),
                )
                .await?;
            if left.is_empty() {
                return Ok(());
            }
            if started.elapsed() + pause > self.timeout {
                let names: Vec<String> = left
                    .into_iter()
                    .map(|c| container_from_summary(&self.name, c))
                    .map(|c| format!("{} ({})", c.name, short_id(&c.key.id)))
                    .collect();
                return Err(EngineError::new(
                    call.to_string(),
                    ErrorKind::Other {
                        status: None,
                        message: format!(
                            "the service was deleted, but the containers of its tasks {} were still there after {}s; Swarm removes them once they stop: run again",
                            names.join(", "),
                            whole_seconds(self.timeout)
                        ),
                    },
                ));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }
}

/// A service as an object: its spec's name and labels, and what its tasks
/// use: the networks (by ID, as the engine stores them; a name is resolved
/// by the inventory), the named volumes they mount, configs and secrets.
fn service_from(engine: &str, s: bollard::models::Service) -> Object {
    let spec = s.spec.unwrap_or_default();
    let mut o = swarm_object(
        engine,
        Kind::Service,
        s.id,
        spec.name.clone(),
        spec.labels.clone(),
        s.created_at,
    );
    let task = spec.task_template.unwrap_or_default();
    let networks = task
        .networks
        .unwrap_or_default()
        .into_iter()
        .chain(spec.networks.unwrap_or_default())
        .filter_map(|n| n.target)
        .chain(
            s.endpoint
                .and_then(|e| e.virtual_ips)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|v| v.network_id),
        )
        .map(|n| ObjectKey::new(engine, Kind::Network, &n));
    let container = task.container_spec.unwrap_or_default();
    // The named volumes its tasks mount (made on each node a task runs on).
    let volumes = container
        .mounts
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.typ == Some(bollard::models::MountType::VOLUME))
        .filter_map(|m| m.source.filter(|s| !s.is_empty()))
        .map(|v| ObjectKey::new(engine, Kind::Volume, &v));
    let configs = container
        .configs
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| c.config_id)
        .map(|c| ObjectKey::new(engine, Kind::Config, &c));
    let secrets = container
        .secrets
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| c.secret_id)
        .map(|c| ObjectKey::new(engine, Kind::Secret, &c));
    o.depends_on = networks
        .chain(volumes)
        .chain(configs)
        .chain(secrets)
        .collect();
    o.depends_on.sort();
    o.depends_on.dedup();
    o.image = container.image;
    o
}

/// A service, config or secret: its ID, its spec's name and labels.
fn swarm_object(
    engine: &str,
    kind: Kind,
    id: Option<String>,
    name: Option<String>,
    labels: Option<HashMap<String, String>>,
    created: Option<String>,
) -> Object {
    let mut o = Object::new(
        engine,
        kind,
        id.as_deref().unwrap_or_default(),
        name.as_deref().unwrap_or_default(),
    );
    o.labels = labels_from(labels);
    o.created = created.as_deref().and_then(parse_time);
    o
}

fn event_from(m: bollard::models::EventMessage) -> Event {
    use bollard::models::EventMessageTypeEnum as T;
    Event {
        kind: match m.typ {
            Some(T::CONTAINER) => Some(Kind::Container),
            Some(T::VOLUME) => Some(Kind::Volume),
            Some(T::NETWORK) => Some(Kind::Network),
            Some(T::SERVICE) => Some(Kind::Service),
            Some(T::CONFIG) => Some(Kind::Config),
            Some(T::SECRET) => Some(Kind::Secret),
            _ => None,
        },
        action: m.action.unwrap_or_default(),
        id: m.actor.and_then(|a| a.id).unwrap_or_default(),
    }
}

/// How a call names its object: short container and network IDs, volume names.
fn shown_id(key: &ObjectKey) -> &str {
    if key.kind.has_id() {
        short_id(&key.id)
    } else {
        &key.id
    }
}

/// The `label` filter map for a listing; no filter at all when `filters` is empty.
/// Docker 20.10 answers a `since` filter naming a container that is gone
/// with HTTP 500 `no such container <id>`: that is `NotFound`.
fn since_gone(e: EngineError) -> EngineError {
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

fn label_filters(filters: &[String]) -> HashMap<&'static str, Vec<&str>> {
    let mut map = HashMap::new();
    if !filters.is_empty() {
        map.insert("label", filters.iter().map(String::as_str).collect());
    }
    map
}

/// Maps a bollard error of call `call` to an `EngineError`: 404 -> `NotFound`;
/// Docker's and Podman's "in progress" and "in use" texts -> `InProgress` and
/// `InUse` (with the holders they name); other statuses -> `Other`; a failure to
/// open a connection (no socket, refused) -> `Unreachable`; bollard's own request
/// timeout -> `Timeout`; anything else (connection closed mid-answer,
/// unreadable answer) -> `Other` without a status.
fn map_error(call: &str, endpoint: &str, timeout: Duration, err: BollardError) -> EngineError {
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
        other if super::ssh::failure_in(&other).is_some() => ErrorKind::Unreachable {
            endpoint: endpoint.to_string(),
            detail: format!(
                "{call}: {}",
                super::ssh::failure_in(&other).expect("checked")
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
fn classify(status: u16, message: String) -> ErrorKind {
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

fn labels_from(labels: Option<HashMap<String, String>>) -> Labels {
    labels.unwrap_or_default().into_iter().collect()
}

/// Parses an engine timestamp (RFC 3339, UTC or with an offset, any fraction)
/// into Unix seconds.
pub(crate) fn parse_time(text: &str) -> Option<i64> {
    parse_time_ms(text).map(|ms| ms.div_euclid(1000))
}

/// Parses an engine timestamp (RFC 3339, UTC or with an offset, any fraction)
/// into Unix milliseconds.
pub(crate) fn parse_time_ms(text: &str) -> Option<i64> {
    let text = text.trim();
    if text.is_empty() || text.starts_with("0001-01-01") {
        return None;
    }
    let unix = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .ok()
            .and_then(|d| i64::try_from(d.as_millis()).ok())
    };
    if let Ok(t) = humantime::parse_rfc3339_weak(text.trim_end_matches('Z')) {
        return unix(t);
    }
    // `...+01:00` / `...-05:00`: humantime knows only UTC; apply the offset.
    let (body, offset) = text.split_at(text.len().checked_sub(6)?);
    let sign = match offset.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let (h, m) = offset[1..].split_once(':')?;
    let shift = sign * (h.parse::<i64>().ok()? * 3600 + m.parse::<i64>().ok()? * 60);
    let t = humantime::parse_rfc3339_weak(body).ok()?;
    Some(unix(t)? - shift * 1000)
}

/// The mounts of type `volume` (named volumes; bind mounts and tmpfs are not
/// volumes): each name with its first destination (sorted), empty if none.
fn volume_mounts(mounts: Option<Vec<MountPoint>>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::<String, String>::new();
    for m in mounts.unwrap_or_default() {
        if m.typ.as_deref() != Some("volume") {
            continue;
        }
        let Some(name) = m.name.filter(|n| !n.is_empty()) else {
            continue;
        };
        let path = m.destination.unwrap_or_default();
        let entry = out.entry(name).or_insert_with(|| path.clone());
        if entry.is_empty() || (!path.is_empty() && path < *entry) {
            *entry = path;
        }
    }
    out
}

/// The container's own name: Docker lists `/name` (and `/other/alias` for links).
fn container_name(names: &[String]) -> String {
    let pick = names
        .iter()
        .find(|n| !n.trim_start_matches('/').contains('/'))
        .or_else(|| names.first());
    pick.map(|n| n.trim_start_matches('/').to_string())
        .unwrap_or_default()
}

/// A container's attachment as the network's ID, or its name when the engine
/// has not assigned an endpoint yet (a created, never started container);
/// the inventory resolves names to IDs.
fn network_ref((name, endpoint): (String, bollard::models::EndpointSettings)) -> String {
    endpoint
        .network_id
        .filter(|id| !id.is_empty())
        .unwrap_or(name)
}

/// `container:<target>` as a join of `namespace`.
fn join_of(namespace: Namespace, mode: Option<&str>) -> Option<Join> {
    let target = mode?.strip_prefix("container:")?;
    (!target.is_empty()).then(|| Join {
        namespace,
        target: target.to_string(),
    })
}

/// A container object: depends on its named volumes and its networks (by ID).
#[allow(clippy::too_many_arguments)]
fn container_object(
    engine: &str,
    id: String,
    name: String,
    state: String,
    labels: Labels,
    created: Option<i64>,
    image: Option<String>,
    volumes: BTreeMap<String, String>,
    networks: BTreeSet<String>,
    joins: Vec<Join>,
) -> Object {
    let mut o = Object::new(engine, Kind::Container, &id, &name);
    o.state = Some(state);
    o.labels = labels;
    o.created = created;
    o.image = image;
    o.depends_on = volumes
        .keys()
        .map(|v| ObjectKey::new(engine, Kind::Volume, v))
        .chain(
            networks
                .iter()
                .map(|n| ObjectKey::new(engine, Kind::Network, n)),
        )
        .collect();
    o.depends_on.sort();
    o.joins = joins;
    o.joins.sort();
    o.mounts = volumes.into_iter().filter(|(_, p)| !p.is_empty()).collect();
    o
}

fn container_from_summary(engine: &str, c: ContainerSummary) -> Object {
    let networks = c
        .network_settings
        .and_then(|n| n.networks)
        .unwrap_or_default()
        .into_iter()
        .map(network_ref)
        .collect();
    let network_mode = c.host_config.and_then(|h| h.network_mode);
    container_object(
        engine,
        c.id.unwrap_or_default(),
        container_name(&c.names.unwrap_or_default()),
        c.state
            .map(|s| s.to_string().to_lowercase())
            .unwrap_or_default(),
        labels_from(c.labels),
        c.created,
        c.image,
        volume_mounts(c.mounts),
        networks,
        join_of(Namespace::Network, network_mode.as_deref())
            .into_iter()
            .collect(),
    )
}

fn container_from_inspect(engine: &str, c: ContainerInspectResponse) -> Object {
    let networks = c
        .network_settings
        .and_then(|n| n.networks)
        .unwrap_or_default()
        .into_iter()
        .map(network_ref)
        .collect();
    let host = c.host_config.unwrap_or_default();
    let ipc_shareable = host.ipc_mode.as_deref() == Some("shareable");
    let joins = [
        join_of(Namespace::Network, host.network_mode.as_deref()),
        join_of(Namespace::Pid, host.pid_mode.as_deref()),
        join_of(Namespace::Ipc, host.ipc_mode.as_deref()),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut o = container_object(
        engine,
        c.id.unwrap_or_default(),
        container_name(&c.name.into_iter().collect::<Vec<_>>()),
        c.state
            .and_then(|s| s.status)
            .map(|s| s.to_string().to_lowercase())
            .unwrap_or_default(),
        labels_from(c.config.as_ref().and_then(|cfg| cfg.labels.clone())),
        c.created.as_deref().and_then(parse_time),
        c.config.and_then(|cfg| cfg.image),
        volume_mounts(c.mounts),
        networks,
        joins,
    );
    o.ipc_shareable = Some(ipc_shareable);
    o
}

fn volume_from(engine: &str, v: Volume) -> Object {
    let mut o = Object::new(engine, Kind::Volume, &v.name, &v.name);
    o.labels = v.labels.into_iter().collect();
    o.created = v.created_at.as_deref().and_then(parse_time);
    o
}

fn network_from(engine: &str, n: Network) -> Object {
    let mut o = Object::new(
        engine,
        Kind::Network,
        n.id.as_deref().unwrap_or_default(),
        n.name.as_deref().unwrap_or_default(),
    );
    o.labels = labels_from(n.labels);
    o.created = n.created.as_deref().and_then(parse_time);
    o
}

fn image_from(i: ImageSummary) -> ImageInfo {
    let mut tags: Vec<String> = i.repo_tags.into_iter().filter(|t| t != NONE_TAG).collect();
    tags.sort();
    tags.dedup();
    ImageInfo { id: i.id, tags }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::{
        ContainerConfig, ContainerState, ContainerStateStatusEnum, ContainerSummaryHostConfig,
        ContainerSummaryStateEnum, HostConfig,
    };

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
    fn label_filters_are_omitted_when_empty() {
        assert!(label_filters(&[]).is_empty());
        let f = vec!["ca.sandbox=1".to_string(), "owner=a".to_string()];
        assert_eq!(
            label_filters(&f),
            HashMap::from([("label", vec!["ca.sandbox=1", "owner=a"])])
        );
    }

    #[test]
    fn parses_engine_times() {
        assert_eq!(parse_time("1970-01-01T00:01:00Z"), Some(60));
        assert_eq!(parse_time("1970-01-01T00:01:00.123456789Z"), Some(60));
        assert_eq!(parse_time("1970-01-01T01:01:00+01:00"), Some(60));
        assert_eq!(parse_time("0001-01-01T00:00:00Z"), None);
        assert_eq!(parse_time(""), None);
        assert_eq!(parse_time("yesterday"), None);
    }

    fn mount(typ: &str, name: Option<&str>) -> MountPoint {
        MountPoint {
            typ: Some(typ.to_string()),
            name: name.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn converts_container_summary() {
        let c = ContainerSummary {
            id: Some("f".repeat(64)),
            names: Some(vec!["/web/db".into(), "/db".into()]),
            state: Some(ContainerSummaryStateEnum::RUNNING),
            labels: Some(HashMap::from([("ca.sandbox".to_string(), "1".to_string())])),
            mounts: Some(vec![
                mount("volume", Some("data")),
                mount("bind", None),
                mount("tmpfs", None),
                mount("volume", Some("cache")),
            ]),
            host_config: Some(ContainerSummaryHostConfig {
                network_mode: Some("container:abc".into()),
                ..Default::default()
            }),
            created: Some(42),
            ..Default::default()
        };
        let info = container_from_summary("default", c);
        assert_eq!(info.name, "db");
        assert_eq!(info.state.as_deref(), Some("running"));
        assert_eq!(info.created, Some(42));
        assert_eq!(info.labels.get("ca.sandbox").unwrap(), "1");
        let deps: Vec<String> = info.depends_on.iter().map(ToString::to_string).collect();
        assert_eq!(deps, vec!["volume/cache", "volume/data"]);
        assert_eq!(
            info.joins,
            vec![Join {
                namespace: Namespace::Network,
                target: "abc".into()
            }]
        );
        let bare = container_from_summary("default", ContainerSummary::default());
        assert_eq!(bare.name, "");
        assert!(bare.labels.is_empty() && bare.depends_on.is_empty());
    }

    #[test]
    fn converts_container_inspect_with_its_pid_and_ipc_joins() {
        let c = ContainerInspectResponse {
            id: Some("abc".into()),
            name: Some("/box-1".into()),
            state: Some(ContainerState {
                status: Some(ContainerStateStatusEnum::EXITED),
                ..Default::default()
            }),
            config: Some(ContainerConfig {
                labels: Some(HashMap::from([(
                    "ca.sandbox.id".to_string(),
                    "b".to_string(),
                )])),
                ..Default::default()
            }),
            host_config: Some(HostConfig {
                pid_mode: Some("container:t1".into()),
                ipc_mode: Some("private".into()),
                network_mode: Some("bridge".into()),
                ..Default::default()
            }),
            mounts: Some(vec![mount("volume", Some("v1")), mount("bind", None)]),
            ..Default::default()
        };
        let info = container_from_inspect("default", c);
        assert_eq!(info.name, "box-1");
        assert_eq!(info.state.as_deref(), Some("exited"));
        assert_eq!(info.box_id(), Some("b"));
        assert_eq!(
            info.joins,
            vec![Join {
                namespace: Namespace::Pid,
                target: "t1".into()
            }]
        );
    }

    #[test]
    fn converts_images_volumes_and_networks() {
        let i = ImageSummary {
            id: "sha256:1".into(),
            repo_tags: vec!["ca-sbx:z".into(), "<none>:<none>".into(), "ca-sbx:a".into()],
            ..Default::default()
        };
        assert_eq!(
            image_from(i),
            ImageInfo {
                id: "sha256:1".into(),
                tags: vec!["ca-sbx:a".into(), "ca-sbx:z".into()]
            }
        );
        let v = Volume {
            name: "v".into(),
            created_at: Some("1970-01-01T00:00:10Z".into()),
            labels: HashMap::from([("k".to_string(), "v".to_string())]),
            ..Default::default()
        };
        let info = volume_from("default", v);
        assert_eq!(info.created, Some(10));
        assert_eq!(info.key.id, "v");
        let n = Network {
            id: Some("n1".into()),
            name: Some("sbx-net".into()),
            created: Some("1970-01-01T00:00:20.5Z".into()),
            ..Default::default()
        };
        let info = network_from("default", n);
        assert_eq!(
            (info.key.id.as_str(), info.name.as_str()),
            ("n1", "sbx-net")
        );
        assert_eq!(info.created, Some(20));
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
