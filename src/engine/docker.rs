//! The bollard engine: the only file that imports bollard.
//!
//! Owns connecting (DOCKER_HOST, API version negotiation), per-call deadlines
//! and the conversion of Docker's wire types and errors into `model` and
//! `EngineError`. Must not decide policy or filter on the client.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use bollard::errors::Error as BollardError;
use bollard::models::{
    ContainerInspectResponse, ContainerSummary, ImageSummary, MountPoint, Volume,
};
use bollard::query_parameters::{
    InspectContainerOptions, ListContainersOptionsBuilder, ListImagesOptionsBuilder,
    ListVolumesOptionsBuilder, RemoveContainerOptionsBuilder, RemoveVolumeOptionsBuilder,
};
use bollard::Docker;

use super::{Engine, EngineError};
use crate::model::{short_id, ContainerInfo, ImageInfo, Labels, VolumeInfo};

/// The endpoint used when `DOCKER_HOST` is unset or empty.
pub const DEFAULT_HOST: &str = "unix:///var/run/docker.sock";

/// The image tag Docker reports for an untagged image; never a real tag.
const NONE_TAG: &str = "<none>:<none>";

/// A Docker Engine reached through bollard.
///
/// Holds one bollard client (no connection pool: every call opens its own
/// connection, so callers bound their own concurrency). Every call is one
/// request bounded by the deadline given at connect time; none retries.
pub struct DockerEngine {
    docker: Docker,
    endpoint: String,
    timeout: Duration,
}

impl DockerEngine {
    /// Connects to `DOCKER_HOST` (`unix://` or `tcp://`), or the local socket when unset,
    /// and negotiates the API version. Every later call is bounded by `timeout`.
    ///
    /// Reads the environment once and delegates to [`DockerEngine::connect_to`].
    pub async fn connect(timeout: Duration) -> Result<Self, EngineError> {
        let host = std::env::var("DOCKER_HOST").ok();
        Self::connect_to(host.as_deref(), timeout).await
    }

    /// Connects to `host` (`unix:///path` or `tcp://addr:port`; `None` or empty means
    /// [`DEFAULT_HOST`]) without reading the environment, then negotiates the API
    /// version within `timeout`, so that a daemon older than bollard's default API
    /// (e.g. Docker 20.10, API 1.41) is spoken to in its own version.
    ///
    /// Any failure here (unsupported scheme, missing socket, connection refused,
    /// no answer, unparsable version) is `EngineError::Unreachable`.
    pub async fn connect_to(host: Option<&str>, timeout: Duration) -> Result<Self, EngineError> {
        let endpoint = host
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .unwrap_or(DEFAULT_HOST)
            .to_string();
        let unreachable = |detail: String| EngineError::Unreachable {
            endpoint: endpoint.clone(),
            detail,
        };
        // `connect_with_host` is what `Docker::connect_with_defaults` does with
        // DOCKER_HOST; unlike `connect_with_local_defaults` it honours tcp://.
        let docker = Docker::connect_with_host(&endpoint)
            .map_err(|e| match e {
                BollardError::SocketNotFoundError(path) => {
                    unreachable(format!("socket {path} does not exist"))
                }
                BollardError::UnsupportedURISchemeError { .. } => unreachable(
                    "unsupported address scheme (use unix:///path/to/docker.sock or tcp://host:port)"
                        .to_string(),
                ),
                other => unreachable(describe(&other)),
            })?
            .with_timeout(Duration::from_secs(whole_seconds(timeout)));
        let docker = match tokio::time::timeout(timeout, docker.negotiate_version()).await {
            // bollard's own deadline and ours are equal; whichever fires, say the same.
            Err(_) | Ok(Err(BollardError::RequestTimeoutError)) => {
                return Err(unreachable(format!(
                    "no answer to the API version check within {}s",
                    whole_seconds(timeout)
                )))
            }
            Ok(Err(e)) => {
                return Err(unreachable(format!(
                    "API version negotiation failed: {}",
                    describe(&e)
                )))
            }
            Ok(Ok(docker)) => docker,
        };
        Ok(DockerEngine {
            docker,
            endpoint,
            timeout,
        })
    }

    /// The Engine API version in use after negotiation, e.g. `1.41`.
    pub fn api_version(&self) -> String {
        let v = self.docker.client_version();
        format!("{}.{}", v.major_version, v.minor_version)
    }

    /// The deadline every call is bounded by.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Runs one bollard call under the deadline and maps its error.
    async fn call<T>(
        &self,
        call: String,
        request: impl Future<Output = Result<T, BollardError>>,
    ) -> Result<T, EngineError> {
        match tokio::time::timeout(self.timeout, request).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(map_error(&call, &self.endpoint, self.timeout, e)),
            Err(_) => Err(EngineError::Timeout {
                call,
                seconds: whole_seconds(self.timeout),
            }),
        }
    }
}

impl Engine for DockerEngine {
    fn endpoint(&self) -> &str {
        &self.endpoint
    }

    async fn list_containers(&self, filters: &[String]) -> Result<Vec<ContainerInfo>, EngineError> {
        let options = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&label_filters(filters))
            .build();
        let list = self
            .call(
                "list containers".to_string(),
                self.docker.list_containers(Some(options)),
            )
            .await?;
        Ok(list.into_iter().map(container_from_summary).collect())
    }

    async fn list_volumes(&self, filters: &[String]) -> Result<Vec<VolumeInfo>, EngineError> {
        let options = ListVolumesOptionsBuilder::new()
            .filters(&label_filters(filters))
            .build();
        let list = self
            .call(
                "list volumes".to_string(),
                self.docker.list_volumes(Some(options)),
            )
            .await?;
        Ok(list
            .volumes
            .unwrap_or_default()
            .into_iter()
            .map(volume_from)
            .collect())
    }

    async fn list_images(&self, reference: &str) -> Result<Vec<ImageInfo>, EngineError> {
        let filters = HashMap::from([("reference", vec![reference])]);
        let options = ListImagesOptionsBuilder::new().filters(&filters).build();
        let list = self
            .call(
                format!("list images {reference}"),
                self.docker.list_images(Some(options)),
            )
            .await?;
        Ok(list.into_iter().map(image_from).collect())
    }

    async fn inspect_container(&self, id: &str) -> Result<ContainerInfo, EngineError> {
        let c = self
            .call(
                format!("inspect container {}", short_id(id)),
                self.docker
                    .inspect_container(id, None::<InspectContainerOptions>),
            )
            .await?;
        Ok(container_from_inspect(c))
    }

    async fn inspect_volume(&self, name: &str) -> Result<VolumeInfo, EngineError> {
        let v = self
            .call(
                format!("inspect volume {name}"),
                self.docker.inspect_volume(name),
            )
            .await?;
        Ok(volume_from(v))
    }

    async fn remove_container(&self, id: &str) -> Result<(), EngineError> {
        let options = RemoveContainerOptionsBuilder::new()
            .force(true)
            .v(true)
            .link(false)
            .build();
        self.call(
            format!("remove container {}", short_id(id)),
            self.docker.remove_container(id, Some(options)),
        )
        .await
    }

    async fn remove_volume(&self, name: &str) -> Result<(), EngineError> {
        let options = RemoveVolumeOptionsBuilder::new().force(false).build();
        self.call(
            format!("remove volume {name}"),
            self.docker.remove_volume(name, Some(options)),
        )
        .await
    }
}

/// `timeout` in whole seconds, rounded up and at least 1: bollard stores its
/// client timeout in whole seconds, and 0 would fail every call at once.
fn whole_seconds(timeout: Duration) -> u64 {
    let secs = timeout.as_secs() + u64::from(timeout.subsec_nanos() > 0);
    secs.max(1)
}

/// The `label` filter map for a listing; no filter at all when `filters` is empty.
fn label_filters(filters: &[String]) -> HashMap<&'static str, Vec<&str>> {
    let mut map = HashMap::new();
    if !filters.is_empty() {
        map.insert("label", filters.iter().map(String::as_str).collect());
    }
    map
}

/// Maps a bollard error of call `call` to an `EngineError`:
/// 404 -> `NotFound`, 409 -> `Conflict`, other statuses -> `Status`; a failure to
/// open a connection (no socket, refused) -> `Unreachable`; bollard's own request
/// timeout -> `Timeout`; anything else (connection closed mid-answer, unreadable
/// answer) -> `Transport`.
fn map_error(call: &str, endpoint: &str, timeout: Duration, err: BollardError) -> EngineError {
    let call = call.to_string();
    match err {
        BollardError::DockerResponseServerError {
            status_code,
            message,
        } => match status_code {
            404 => EngineError::NotFound { call, message },
            409 => EngineError::Conflict { call, message },
            status => EngineError::Status {
                call,
                status,
                message,
            },
        },
        BollardError::RequestTimeoutError => EngineError::Timeout {
            call,
            seconds: whole_seconds(timeout),
        },
        BollardError::SocketNotFoundError(path) => EngineError::Unreachable {
            endpoint: endpoint.to_string(),
            detail: format!("{call}: socket {path} does not exist"),
        },
        // EMFILE looks like a failure to connect, but the engine is fine: we are
        // out of file descriptors (one per connection in flight).
        other if error_chain(&other).contains("os error 24") => EngineError::Transport {
            call,
            detail: "cannot open a connection: too many open files; lower --parallelism or raise the open-files limit (ulimit -n)".to_string(),
        },
        other if is_connect_failure(&other) => EngineError::Unreachable {
            endpoint: endpoint.to_string(),
            detail: format!("{call}: {}", describe(&other)),
        },
        other => EngineError::Transport {
            call,
            detail: describe(&other),
        },
    }
}

/// True when the request never reached the engine: the connection could not be
/// opened (socket missing, connection refused, permission denied on the socket).
fn is_connect_failure(err: &BollardError) -> bool {
    use std::io::ErrorKind;
    let connect_kind = |e: &std::io::Error| {
        matches!(
            e.kind(),
            ErrorKind::ConnectionRefused | ErrorKind::NotFound | ErrorKind::PermissionDenied
        )
    };
    match err {
        BollardError::HyperLegacyError { err } => err.is_connect(),
        BollardError::IOError { err } => connect_kind(err),
        _ => false,
    }
}

/// A bollard error for humans: `cannot connect: <OS error>` when no connection
/// could be opened; else the error and its causes, without bollard's wrapper
/// text for the hyper/IO errors it only passes on.
fn describe(err: &BollardError) -> String {
    if is_connect_failure(err) {
        let mut root: &(dyn std::error::Error + 'static) = err;
        while let Some(source) = root.source() {
            root = source;
        }
        return format!("cannot connect: {root}");
    }
    match err {
        BollardError::HyperLegacyError { err } => error_chain(err),
        BollardError::HyperResponseError { err } => error_chain(err),
        other => error_chain(other),
    }
}

/// The error and all its sources, joined with `: `, skipping repeats.
fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = vec![err.to_string()];
    let mut source = err.source();
    while let Some(e) = source {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = e.source();
    }
    parts.join(": ")
}

fn labels_from(labels: Option<HashMap<String, String>>) -> Labels {
    labels.unwrap_or_default().into_iter().collect()
}

/// Names of the mounts of type `volume` (named volumes; bind mounts and tmpfs are not volumes).
fn volume_mounts(mounts: Option<Vec<MountPoint>>) -> std::collections::BTreeSet<String> {
    mounts
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.typ.as_deref() == Some("volume"))
        .filter_map(|m| m.name)
        .filter(|n| !n.is_empty())
        .collect()
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

fn container_from_summary(c: ContainerSummary) -> ContainerInfo {
    ContainerInfo {
        id: c.id.unwrap_or_default(),
        name: container_name(&c.names.unwrap_or_default()),
        state: c
            .state
            .map(|s| s.to_string().to_lowercase())
            .unwrap_or_default(),
        labels: labels_from(c.labels),
        mounts: volume_mounts(c.mounts),
    }
}

fn container_from_inspect(c: ContainerInspectResponse) -> ContainerInfo {
    ContainerInfo {
        id: c.id.unwrap_or_default(),
        name: container_name(&c.name.into_iter().collect::<Vec<_>>()),
        state: c
            .state
            .and_then(|s| s.status)
            .map(|s| s.to_string().to_lowercase())
            .unwrap_or_default(),
        labels: labels_from(c.config.and_then(|cfg| cfg.labels)),
        mounts: volume_mounts(c.mounts),
    }
}

fn volume_from(v: Volume) -> VolumeInfo {
    VolumeInfo {
        name: v.name,
        labels: v.labels.into_iter().collect(),
        created_at: v.created_at.filter(|t| !t.is_empty()),
    }
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
        ContainerConfig, ContainerState, ContainerStateStatusEnum, ContainerSummaryStateEnum,
    };

    const T: Duration = Duration::from_secs(30);

    fn server(status_code: u16, message: &str) -> BollardError {
        BollardError::DockerResponseServerError {
            status_code,
            message: message.to_string(),
        }
    }

    #[test]
    fn maps_status_codes() {
        let e = map_error(
            "remove container abc",
            "unix:///s",
            T,
            server(404, "No such container: abc"),
        );
        assert_eq!(
            e,
            EngineError::NotFound {
                call: "remove container abc".into(),
                message: "No such container: abc".into()
            }
        );
        let e = map_error(
            "remove volume v",
            "unix:///s",
            T,
            server(409, "remove v: volume is in use - [0123abcd]"),
        );
        assert!(matches!(e, EngineError::Conflict { .. }));
        assert_eq!(e.volume_users().unwrap(), vec!["0123abcd"]);
        let e = map_error("list volumes", "unix:///s", T, server(500, "boom"));
        assert_eq!(
            e,
            EngineError::Status {
                call: "list volumes".into(),
                status: 500,
                message: "boom".into()
            }
        );
    }

    #[test]
    fn maps_connection_failures_to_unreachable_and_the_rest_to_transport() {
        use std::io::{Error, ErrorKind};
        for kind in [ErrorKind::ConnectionRefused, ErrorKind::NotFound] {
            let e = map_error(
                "list containers",
                "tcp://127.0.0.1:1",
                T,
                BollardError::IOError {
                    err: Error::new(kind, "x"),
                },
            );
            assert!(
                matches!(&e, EngineError::Unreachable { endpoint, detail }
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
        assert!(matches!(e, EngineError::Unreachable { .. }), "{e:?}");
        for kind in [
            ErrorKind::UnexpectedEof,
            ErrorKind::ConnectionReset,
            ErrorKind::BrokenPipe,
        ] {
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
                EngineError::Transport {
                    call: "remove volume v".into(),
                    detail: "connection closed".into()
                }
            );
        }
        let e = map_error(
            "list images ca-sbx:*",
            "unix:///s",
            T,
            BollardError::JsonDataError {
                message: "bad".into(),
                column: 3,
            },
        );
        assert!(matches!(e, EngineError::Transport { .. }), "{e:?}");
    }

    #[test]
    fn bollard_timeout_is_a_timeout_in_whole_seconds() {
        let e = map_error(
            "list volumes",
            "unix:///s",
            Duration::from_millis(1500),
            BollardError::RequestTimeoutError,
        );
        assert_eq!(
            e,
            EngineError::Timeout {
                call: "list volumes".into(),
                seconds: 2
            }
        );
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
            ..Default::default()
        };
        let info = container_from_summary(c);
        assert_eq!(info.name, "db");
        assert_eq!(info.state, "running");
        assert_eq!(info.labels.get("ca.sandbox").unwrap(), "1");
        assert_eq!(
            info.mounts.into_iter().collect::<Vec<_>>(),
            vec!["cache", "data"]
        );
        let bare = container_from_summary(ContainerSummary::default());
        assert_eq!(bare.name, "");
        assert!(bare.labels.is_empty() && bare.mounts.is_empty());
    }

    #[test]
    fn converts_container_inspect() {
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
            mounts: Some(vec![mount("volume", Some("v1")), mount("bind", None)]),
            ..Default::default()
        };
        let info = container_from_inspect(c);
        assert_eq!(info.name, "box-1");
        assert_eq!(info.state, "exited");
        assert_eq!(info.box_id(), Some("b"));
        assert_eq!(info.mounts.into_iter().collect::<Vec<_>>(), vec!["v1"]);
    }

    #[test]
    fn converts_images_and_volumes() {
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
            created_at: Some("2024-01-02T03:04:05Z".into()),
            labels: HashMap::from([("k".to_string(), "v".to_string())]),
            ..Default::default()
        };
        let info = volume_from(v);
        assert_eq!(info.created_at.as_deref(), Some("2024-01-02T03:04:05Z"));
        assert_eq!(info.labels.get("k").unwrap(), "v");
    }
}
