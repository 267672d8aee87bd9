//! An engine that connects on first use and again after it was lost: what a
//! fleet and `watch` hold, so that an engine that is down at the start, or
//! restarts later, costs a failed cycle, not the whole run.
//!
//! Owns only the connection's lifetime (connect when needed; forget the
//! connection after an `Unreachable` answer so the next call negotiates
//! afresh, since a restarted engine may speak another API version; calls
//! that waited on a failed attempt share its error). Every call is the
//! Docker engine's own; no retry happens here.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::stream::{self, BoxStream, StreamExt};
use tokio::sync::Mutex;

use super::docker::DockerEngine;
use super::{Engine, EngineError, Event, Helper, TarBody, TarStream, Users};
use crate::engine::endpoint::Endpoint;
use crate::model::{ImageInfo, Kind, Labels, Object, ObjectKey};

struct Shared {
    name: String,
    endpoint: Endpoint,
    timeout: Duration,
    read_timeout: Option<Duration>,
    /// Calls past their deadline, over every connection.
    misses: Arc<super::DeadlineMisses>,
    connected: Mutex<Connection>,
    /// Connection attempts finished so far.
    attempts: AtomicU64,
}

/// The connection, or how the last attempt failed.
#[derive(Default)]
struct Connection {
    engine: Option<Arc<DockerEngine>>,
    /// The last attempt's failure, with that attempt's number.
    failed: Option<(u64, EngineError)>,
}

impl Shared {
    /// The connection, made if there is none. Calls that waited while an
    /// attempt failed get that attempt's error rather than trying again one
    /// after the other (concurrent listings would otherwise each wait a
    /// deadline in turn on an engine that does not answer).
    async fn get(&self) -> Result<Arc<DockerEngine>, EngineError> {
        let before = self.attempts.load(Ordering::SeqCst);
        let mut connected = self.connected.lock().await;
        if let Some(engine) = connected.engine.as_ref() {
            return Ok(engine.clone());
        }
        if let Some((attempt, error)) = &connected.failed {
            if *attempt > before {
                return Err(error.clone());
            }
        }
        let result =
            DockerEngine::connect(&self.endpoint, &self.name, self.timeout, self.read_timeout)
                .await
                .map(|e| e.with_misses(self.misses.clone()));
        let attempt = self.attempts.fetch_add(1, Ordering::SeqCst) + 1;
        match result {
            Ok(engine) => {
                let engine = Arc::new(engine);
                connected.engine = Some(engine.clone());
                connected.failed = None;
                Ok(engine)
            }
            Err(error) => {
                connected.failed = Some((attempt, error.clone()));
                Err(error)
            }
        }
    }

    /// `call` on the engine, connected first if need be; its answer passed
    /// on as `seen` passes it.
    async fn through<T, F, Fut>(&self, call: F) -> Result<T, EngineError>
    where
        F: FnOnce(Arc<DockerEngine>) -> Fut,
        Fut: Future<Output = Result<T, EngineError>>,
    {
        let result = match self.get().await {
            Ok(e) => call(e).await,
            Err(e) => Err(e),
        };
        self.seen(result).await
    }

    /// The stream `open` opens on the engine, connected first if need be; a
    /// failed connection is the stream's one item, passed on as `seen`
    /// passes it.
    fn stream_through<T: Send + 'static>(
        self: Arc<Self>,
        open: impl FnOnce(&DockerEngine) -> BoxStream<'static, Result<T, EngineError>> + Send + 'static,
    ) -> BoxStream<'static, Result<T, EngineError>> {
        stream::once(async move {
            match self.get().await {
                Ok(engine) => open(&engine),
                Err(e) => {
                    let _ = self.seen::<()>(Err(e.clone())).await;
                    stream::once(async move { Err(e) }).boxed()
                }
            }
        })
        .flatten()
        .boxed()
    }

    /// Passes `result` on; an unreachable engine is connected afresh next time.
    async fn seen<T>(&self, result: Result<T, EngineError>) -> Result<T, EngineError> {
        // A call past its deadline says nothing about the connection (every
        // request has its own): only an unreachable engine is forgotten.
        if matches!(&result, Err(e) if matches!(e.kind, crate::model::ErrorKind::Unreachable { .. }))
        {
            self.connected.lock().await.engine = None;
        }
        result
    }
}

/// A Docker engine reached lazily (see the module header).
pub(crate) struct LazyEngine {
    shared: Arc<Shared>,
}

impl LazyEngine {
    /// `timeout` bounds each call that changes something, `read_timeout`
    /// each listing and inspect (`None`: the engine's default; see
    /// `DockerEngine::connect`).
    pub(crate) fn new(
        name: &str,
        endpoint: Endpoint,
        timeout: Duration,
        read_timeout: Option<Duration>,
    ) -> Self {
        LazyEngine {
            shared: Arc::new(Shared {
                name: name.to_string(),
                endpoint,
                timeout,
                read_timeout,
                misses: Default::default(),
                connected: Mutex::new(Connection::default()),
                attempts: AtomicU64::new(0),
            }),
        }
    }
}

#[async_trait]
impl Engine for LazyEngine {
    fn name(&self) -> &str {
        &self.shared.name
    }

    fn endpoint(&self) -> &str {
        &self.shared.endpoint.host
    }

    fn deadline_misses(&self) -> Vec<(String, u64)> {
        self.shared.misses.counts()
    }

    async fn list(&self, kind: Kind, filters: &[String]) -> Result<Vec<Object>, EngineError> {
        self.shared
            .through(|e| async move { e.list(kind, filters).await })
            .await
    }

    async fn list_users(&self, users: &Users) -> Result<Vec<Object>, EngineError> {
        self.shared
            .through(|e| async move { e.list_users(users).await })
            .await
    }

    async fn list_images(&self, reference: &str) -> Result<Vec<ImageInfo>, EngineError> {
        self.shared
            .through(|e| async move { e.list_images(reference).await })
            .await
    }

    async fn clock(&self) -> Result<i64, EngineError> {
        self.shared
            .through(|e| async move { e.clock().await })
            .await
    }

    async fn answers_anew(&self) -> Result<(), EngineError> {
        self.shared
            .through(|e| async move { e.answers_anew().await })
            .await
    }

    async fn create_volume(&self, name: &str, labels: &Labels) -> Result<Object, EngineError> {
        self.shared
            .through(|e| async move { e.create_volume(name, labels).await })
            .await
    }

    async fn create_helper(&self, helper: &Helper) -> Result<String, EngineError> {
        self.shared
            .through(|e| async move { e.create_helper(helper).await })
            .await
    }

    async fn stop(&self, container: &str) -> Result<(), EngineError> {
        self.shared
            .through(|e| async move { e.stop(container).await })
            .await
    }

    fn download(&self, container: &str, path: &str) -> TarStream {
        let (container, path) = (container.to_string(), path.to_string());
        self.shared
            .clone()
            .stream_through(move |engine| engine.download(&container, &path))
    }

    async fn upload(&self, container: &str, path: &str, tar: TarBody) -> Result<(), EngineError> {
        self.shared
            .through(|e| async move { e.upload(container, path, tar).await })
            .await
    }

    async fn disk_usage(&self) -> Result<crate::engine::DiskUsage, EngineError> {
        self.shared
            .through(|e| async move { e.disk_usage().await })
            .await
    }

    async fn inspect(&self, key: &ObjectKey) -> Result<Object, EngineError> {
        self.shared
            .through(|e| async move { e.inspect(key).await })
            .await
    }

    async fn remove(&self, key: &ObjectKey) -> Result<(), EngineError> {
        self.shared
            .through(|e| async move { e.remove(key).await })
            .await
    }

    fn events(&self, label_filters: &[String]) -> BoxStream<'static, Result<Event, EngineError>> {
        let filters = label_filters.to_vec();
        self.shared
            .clone()
            .stream_through(move |engine| engine.events(&filters))
    }
}
