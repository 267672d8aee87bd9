//! The in-memory engine's `Engine` calls over its world, with Docker's
//! removal semantics (exact label filters, 404 for a missing object, 409
//! for a volume in use or a network with endpoints, a swarm call on a
//! non-manager refused as Docker words it).
//!
//! Every call goes through the fault script first (`call`/`act` in
//! `mod.rs`). Must not claim anything about Docker itself beyond that.

use std::sync::atomic::Ordering;

use async_trait::async_trait;
use futures_util::stream::{BoxStream, StreamExt};
use tokio::sync::mpsc::unbounded_channel;

use super::{
    call_name, engine_now_ms, not_found, ContainerInfo, FaultAction, MemoryEngine, Op, SwarmRole,
    VolumeInfo, World, CHUNK,
};
use crate::engine::docker::parse_time;
use crate::engine::{Engine, EngineError, ErrorKind, Event, Helper, TarBody, TarStream, Users};
use crate::model::{ImageInfo, Kind, Labels, Object, ObjectKey};

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
                Kind::Network => w.networks.iter().map(|n| n.object(engine, kind)).collect(),
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
                    .map(|n| n.object(engine, Kind::Network)),
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

    async fn answers_anew(&self) -> Result<(), EngineError> {
        self.call(Op::Ping, "", |_| Ok(())).await
    }

    /// The world's `sizes` of the containers and volumes it holds (what
    /// is gone is not measured), as `/system/df` gives them.
    async fn disk_usage(&self) -> Result<crate::engine::DiskUsage, EngineError> {
        let engine = self.name.as_str();
        self.call(Op::DiskUsage, "", |w| {
            let containers = w.containers.iter().map(|c| (Kind::Container, &c.id));
            let volumes = w.volumes.iter().map(|v| (Kind::Volume, &v.name));
            Ok(crate::engine::DiskUsage(
                containers
                    .chain(volumes)
                    .filter_map(|(kind, id)| {
                        let size = *w.sizes.get(id)?;
                        Some((ObjectKey::new(engine, kind, id), size))
                    })
                    .collect(),
            ))
        })
        .await
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
