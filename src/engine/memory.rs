//! An in-memory engine with Docker's removal semantics, for the planner's
//! snapshot tests, property tests, fault injection and benchmarks.
//!
//! Owns a small world of containers, volumes and images and a script of
//! faults. It mimics what the real engine does that matters to sandboxctl
//! (exact label filters, 404 for missing objects, 409 for a volume in use) and
//! nothing more. It must never be used to claim something about Docker itself:
//! tests of that run against the real engine.

use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;

use super::{Engine, EngineError};
use crate::model::{ContainerInfo, ImageInfo, Labels, VolumeInfo};

/// The objects an in-memory engine holds. Deserializes from a fixture file:
/// `[[container]]`, `[[volume]]` and `[[image]]` tables.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct World {
    #[serde(default, rename = "container")]
    pub containers: Vec<ContainerInfo>,
    #[serde(default, rename = "volume")]
    pub volumes: Vec<VolumeInfo>,
    #[serde(default, rename = "image")]
    pub images: Vec<ImageInfo>,
}

impl World {
    /// Parses a fixture (TOML with `[[container]]`, `[[volume]]`, `[[image]]`).
    pub fn from_toml(text: &str) -> Result<World, toml::de::Error> {
        toml::from_str(text)
    }
}

/// An engine call, as fault scripts name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    ListContainers,
    ListVolumes,
    ListImages,
    InspectContainer,
    InspectVolume,
    RemoveContainer,
    RemoveVolume,
}

/// What a scripted fault does when its call arrives.
#[derive(Debug, Clone)]
pub enum FaultAction {
    /// Answer with this error and change nothing.
    Fail(EngineError),
    /// Another actor removes the object just before the call is served, so the
    /// call itself sees the world without it.
    VanishFirst,
    /// Carry out the call, then answer with this error anyway (a dropped
    /// connection after the engine did the work).
    DoThenFail(EngineError),
    /// Wait this long before serving the call.
    Delay(Duration),
}

#[derive(Debug, Clone)]
struct Fault {
    op: Op,
    /// Container ID or volume name; `None` matches any target.
    target: Option<String>,
    action: FaultAction,
    /// How many more calls this fault applies to.
    remaining: usize,
}

/// The in-memory engine. Cheap to build; safe to share between concurrent calls.
#[derive(Debug, Default)]
pub struct MemoryEngine {
    world: Mutex<World>,
    faults: Mutex<Vec<Fault>>,
    log: Mutex<Vec<String>>,
    ignore_filters: bool,
}

impl MemoryEngine {
    pub fn new(world: World) -> Self {
        MemoryEngine {
            world: Mutex::new(world),
            ..Default::default()
        }
    }

    /// An engine that, like some old daemons, ignores label filters and lists everything.
    pub fn ignoring_filters(world: World) -> Self {
        MemoryEngine {
            ignore_filters: true,
            ..MemoryEngine::new(world)
        }
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
        match self.enter(op, target) {
            None => serve(&mut self.world.lock().unwrap()),
            Some(FaultAction::Fail(e)) => Err(e),
            Some(FaultAction::Delay(d)) => {
                tokio::time::sleep(d).await;
                serve(&mut self.world.lock().unwrap())
            }
            Some(FaultAction::VanishFirst) => {
                let mut world = self.world.lock().unwrap();
                world.containers.retain(|c| c.id != target);
                world.volumes.retain(|v| v.name != target);
                serve(&mut world)
            }
            Some(FaultAction::DoThenFail(e)) => {
                let _ = serve(&mut self.world.lock().unwrap());
                Err(e)
            }
        }
    }

    fn filter_match(&self, labels: &Labels, filters: &[String]) -> bool {
        self.ignore_filters
            || filters.iter().all(|f| match f.split_once('=') {
                Some((k, v)) => labels.get(k).map(String::as_str) == Some(v),
                None => labels.contains_key(f.as_str()),
            })
    }
}

fn not_found(call: String, what: &str) -> EngineError {
    EngineError::NotFound {
        message: format!("No such {what}"),
        call,
    }
}

impl Engine for MemoryEngine {
    fn endpoint(&self) -> &str {
        "memory"
    }

    async fn list_containers(&self, filters: &[String]) -> Result<Vec<ContainerInfo>, EngineError> {
        self.call(Op::ListContainers, "", |w| {
            Ok(w.containers
                .iter()
                .filter(|c| self.filter_match(&c.labels, filters))
                .cloned()
                .collect())
        })
        .await
    }

    async fn list_volumes(&self, filters: &[String]) -> Result<Vec<VolumeInfo>, EngineError> {
        self.call(Op::ListVolumes, "", |w| {
            Ok(w.volumes
                .iter()
                .filter(|v| self.filter_match(&v.labels, filters))
                .cloned()
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

    async fn inspect_container(&self, id: &str) -> Result<ContainerInfo, EngineError> {
        self.call(Op::InspectContainer, id, |w| {
            w.containers
                .iter()
                .find(|c| c.id == id)
                .cloned()
                .ok_or_else(|| not_found(format!("inspect container {id}"), "container"))
        })
        .await
    }

    async fn inspect_volume(&self, name: &str) -> Result<VolumeInfo, EngineError> {
        self.call(Op::InspectVolume, name, |w| {
            w.volumes
                .iter()
                .find(|v| v.name == name)
                .cloned()
                .ok_or_else(|| not_found(format!("inspect volume {name}"), "volume"))
        })
        .await
    }

    async fn remove_container(&self, id: &str) -> Result<(), EngineError> {
        self.call(Op::RemoveContainer, id, |w| {
            let before = w.containers.len();
            w.containers.retain(|c| c.id != id);
            if w.containers.len() == before {
                return Err(not_found(format!("remove container {id}"), "container"));
            }
            Ok(())
        })
        .await
    }

    async fn remove_volume(&self, name: &str) -> Result<(), EngineError> {
        self.call(Op::RemoveVolume, name, |w| {
            if !w.volumes.iter().any(|v| v.name == name) {
                return Err(not_found(format!("remove volume {name}"), "volume"));
            }
            let users: Vec<&str> = w
                .containers
                .iter()
                .filter(|c| c.mounts.contains(name))
                .map(|c| c.id.as_str())
                .collect();
            if !users.is_empty() {
                return Err(EngineError::Conflict {
                    call: format!("remove volume {name}"),
                    message: format!("remove {name}: volume is in use - [{}]", users.join(", ")),
                });
            }
            w.volumes.retain(|v| v.name != name);
            Ok(())
        })
        .await
    }
}
