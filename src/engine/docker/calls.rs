//! The `Engine` calls of the bollard engine, one request each (a few: one
//! listing per kind, a swarm service's task wait, a stream): the listing
//! filters, the request options, and the answer handed to `wire.rs`.
//!
//! Must not connect or set deadlines (every request goes through the
//! client's `call`, `read` or `bounded` in `mod.rs`), read error texts (that
//! is `errors.rs`), or decide policy.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use bollard::errors::Error as BollardError;
use bollard::query_parameters::{
    EventsOptions, InspectContainerOptions, InspectNetworkOptions, InspectServiceOptions,
    KillContainerOptionsBuilder, ListConfigsOptionsBuilder, ListContainersOptionsBuilder,
    ListImagesOptionsBuilder, ListNetworksOptionsBuilder, ListSecretsOptionsBuilder,
    ListServicesOptionsBuilder, ListVolumesOptionsBuilder, RemoveContainerOptionsBuilder,
    RemoveVolumeOptionsBuilder,
};
use futures_util::stream::{BoxStream, StreamExt};

use super::errors::{map_error, since_gone};
use super::wire::{
    config_from, container_from_inspect, container_from_summary, event_from, image_from,
    named_object, network_from, parse_time_ms, secret_from, service_from, volume_from,
};
use super::DockerEngine;
use crate::engine::connect::whole_seconds;
use crate::engine::{Engine, EngineError, ErrorKind, Event, Helper, TarBody, TarStream, Users};
use crate::model::{short_id, ImageInfo, Kind, Labels, Object, ObjectKey};

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
        // A listing by `map`: its options, its request, each item's conversion.
        macro_rules! listing {
            ($options:ident, $request:ident, $from:ident) => {{
                let options = $options::new().filters(&map).build();
                self.listing(call, || self.docker.$request(Some(options.clone())), $from)
                    .await?
            }};
        }
        Ok(match kind {
            Kind::Container => self.containers(call, &map).await?,
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
            Kind::Network => listing!(ListNetworksOptionsBuilder, list_networks, network_from),
            Kind::Service | Kind::Config | Kind::Secret if self.podman => {
                return Err(EngineError::new(
                    call,
                    ErrorKind::NoSwarm {
                        worker: false,
                        message: "Podman has no swarm".into(),
                    },
                ))
            }
            Kind::Service => listing!(ListServicesOptionsBuilder, list_services, service_from),
            Kind::Config => listing!(ListConfigsOptionsBuilder, list_configs, config_from),
            Kind::Secret => listing!(ListSecretsOptionsBuilder, list_secrets, secret_from),
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
        self.containers(call.to_string(), &map)
            .await
            .map_err(since_gone)
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

    async fn answers_anew(&self) -> Result<(), EngineError> {
        let call = String::from("ping the engine on a new connection");
        match crate::engine::connect::unix_path(&self.endpoint) {
            // bollard's pool would hand out a kept connection: a new one.
            Some(path) => {
                match tokio::time::timeout(self.read_timeout, crate::engine::connect::ping(path))
                    .await
                {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(detail)) => Err(EngineError::new(
                        call,
                        ErrorKind::Unreachable {
                            endpoint: self.endpoint.clone(),
                            detail,
                        },
                    )),
                    Err(_) => Err(EngineError::new(
                        call,
                        ErrorKind::Timeout {
                            seconds: whole_seconds(self.read_timeout),
                        },
                    )),
                }
            }
            // tcp and TLS: bollard's clients keep no connection, so each
            // request is on a new one; ssh: a session of the transport's.
            None => self.read(call, || self.docker.ping()).await.map(|_| ()),
        }
    }

    /// Over a unix socket only: bollard 0.21 reads `/system/df` as API 1.52
    /// shapes it (every member optional), so a 1.41 answer would read as
    /// empty; here it is asked on a connection of its own and read by
    /// `wire::disk_usage_from`. Over tcp, TLS and ssh: not measured.
    async fn disk_usage(&self) -> Result<crate::engine::DiskUsage, EngineError> {
        let call = String::from("measure disk usage (GET /system/df)");
        let failed = |status: Option<u16>, message: String| {
            EngineError::new(call.clone(), ErrorKind::Other { status, message })
        };
        let Some(path) = crate::engine::connect::unix_path(&self.endpoint) else {
            return Err(failed(
                None,
                "measured only on an engine reached through a unix socket".into(),
            ));
        };
        let target = format!("/v{}/system/df", self.api_version());
        let answer = tokio::time::timeout(
            self.read_timeout,
            crate::engine::connect::get(path, &target, DISK_USAGE_LIMIT),
        )
        .await;
        match answer {
            Err(_) => {
                self.misses.add(&call);
                Err(EngineError::new(
                    call,
                    ErrorKind::Timeout {
                        seconds: whole_seconds(self.read_timeout),
                    },
                ))
            }
            Ok(Err(detail)) => Err(EngineError::new(
                call,
                ErrorKind::Unreachable {
                    endpoint: self.endpoint.clone(),
                    detail,
                },
            )),
            Ok(Ok((status, body))) if !(200..300).contains(&status) => Err(EngineError::new(
                call,
                super::errors::classify(status, super::wire::message_of(&body)),
            )),
            Ok(Ok((_, body))) => super::wire::disk_usage_from(&self.name, &body)
                .map_err(|e| failed(None, format!("an answer sandboxctl cannot read: {e}"))),
        }
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
                named_object(engine, Kind::Network, n.id, n.name, n.labels, n.created)
            }
            Kind::Service => service_from(
                engine,
                self.read(call, || {
                    self.docker
                        .inspect_service(&key.id, None::<InspectServiceOptions>)
                })
                .await?,
            ),
            Kind::Config => config_from(
                engine,
                self.read(call, || self.docker.inspect_config(&key.id))
                    .await?,
            ),
            Kind::Secret => secret_from(
                engine,
                self.read(call, || self.docker.inspect_secret(&key.id))
                    .await?,
            ),
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
    /// One listing under the read deadline, each item converted by `from`.
    async fn listing<T, F, Fut>(
        &self,
        call: String,
        request: F,
        from: fn(&str, T) -> Object,
    ) -> Result<Vec<Object>, EngineError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<Vec<T>, BollardError>>,
    {
        let list = self.read(call, request).await?;
        Ok(list.into_iter().map(|t| from(&self.name, t)).collect())
    }

    /// The containers in any state that a listing filtered by `filters` finds.
    async fn containers(
        &self,
        call: String,
        filters: &HashMap<&str, Vec<&str>>,
    ) -> Result<Vec<Object>, EngineError> {
        let options = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(filters)
            .build();
        self.listing(
            call,
            || self.docker.list_containers(Some(options.clone())),
            container_from_summary,
        )
        .await
    }

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

/// The largest `/system/df` answer read (about 300 bytes per container,
/// volume and image: some 100,000 objects).
const DISK_USAGE_LIMIT: usize = 32 << 20;

/// How a call names its object: short container and network IDs, volume names.
fn shown_id(key: &ObjectKey) -> &str {
    if key.kind.has_id() {
        short_id(&key.id)
    } else {
        &key.id
    }
}

/// The `label` filter map for a listing; no filter at all when `filters` is empty.
fn label_filters(filters: &[String]) -> HashMap<&'static str, Vec<&str>> {
    let mut map = HashMap::new();
    if !filters.is_empty() {
        map.insert("label", filters.iter().map(String::as_str).collect());
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_filters_are_omitted_when_empty() {
        assert!(label_filters(&[]).is_empty());
        let f = vec!["ca.sandbox=1".to_string(), "owner=a".to_string()];
        assert_eq!(
            label_filters(&f),
            HashMap::from([("label", vec!["ca.sandbox=1", "owner=a"])])
        );
    }
}
