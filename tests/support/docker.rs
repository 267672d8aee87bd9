//! The real-engine test harness: a test image built from files on this host,
//! and `Sandbox`, one test's private corner of the shared Docker daemon.
//!
//! Owns isolation. Every object a `Sandbox` creates carries the test's unique
//! scope label `ca.sandbox.test=<value>` or is recorded by name (the
//! unlabeled decoys), and its cleanup (on drop, also after a panic) removes
//! exactly those objects and nothing else: containers first, then volumes and
//! networks. Talks to Docker through bollard directly, never through
//! `sandboxctl`'s own engine, so that it can check what the engine under test
//! did. Never removes an image.
//!
//! Owns the gates of the "no engine" outcome too, for every real-engine test
//! of the binary: those made on a `Sandbox` (its CLI runs included:
//! `Sandbox::cli`), those of the extra-engine harness (`engines.rs`, whose
//! engines load the main engine's test image) and those that only need to
//! know an engine is there. Without an engine, `cargo test` reports each of
//! them as ignored and fails once, with one line that says how to start one;
//! the engine-free tests run and pass as ever (the runner's part is in
//! `support::harness`):
//!
//! * The engine is pinged once per process ([`engine_status`], before the
//!   first test) where sandboxctl finds it: `DOCKER_HOST`, else the local
//!   socket.
//! * One test, [`engine_is_reachable`], fails without an engine, its output
//!   that one line.
//! * Every other real-engine test starts at a gate ([`engine_version`]:
//!   `Sandbox::new`, every `start` and `shared` of `engines.rs`, its
//!   `main_host`), which without an engine unwinds with [`NoEngine`]: the
//!   test stops there and the runner reports it ignored. Everything else
//!   that reaches the main engine (a `Sandbox`'s methods, `Corner::on_main`,
//!   a CLI run against it) is used only past a gate.
//! * With an engine every gate answers: nothing else changes.
//!
//! Tests run in parallel threads of one process: the only state shared
//! between them is the imported test image and the engine check.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bollard::errors::Error as BollardError;
use bollard::models::{
    ContainerCreateBody, EndpointSettings, HostConfig, NetworkConnectRequest, NetworkCreateRequest,
    VolumeCreateRequest,
};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, InspectContainerOptions,
    InspectNetworkOptions, ListContainersOptionsBuilder, ListImagesOptionsBuilder,
    ListNetworksOptionsBuilder, ListVolumesOptionsBuilder, RemoveContainerOptionsBuilder,
    RemoveVolumeOptionsBuilder, StartContainerOptions, WaitContainerOptionsBuilder,
};
use bollard::Docker;
use futures_util::future::join_all;
use futures_util::StreamExt;
use tokio::sync::OnceCell;

use sandboxctl::engine::docker::DockerEngine;

/// The label key that isolates one test's objects; its value is unique per `Sandbox`.
pub const SCOPE_KEY: &str = "ca.sandbox.test";
/// The test image: `/sleep` and its libraries, imported from this host. A
/// `ca-sbx:*` image, so reports list it as retained.
pub const TEST_IMAGE: &str = "ca-sbx:sandboxctl-test-sleep";
/// Where the test image keeps `sleep`.
pub const SLEEP: &str = "/sleep";
/// Deadline for every harness call to Docker.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the engine check waits for `/_ping`.
const PING_TIMEOUT: Duration = Duration::from_secs(5);

/// Labels as `(key, value)` pairs.
pub type Labels = BTreeMap<String, String>;

/// Builds a label map from pairs: `labels(&[("ca.sandbox", "1")])`.
pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

// ----- is there an engine? ----------------------------------------------------

/// The unwind payload of a real-engine test run without an engine, which the
/// runner reports as ignored. Raised with `resume_unwind`, which skips the
/// panic hook: no "panicked at", no backtrace.
#[derive(Debug)]
pub struct NoEngine;

/// Where the harness looks for the engine: `DOCKER_HOST`, or the local socket.
pub fn engine_endpoint() -> String {
    std::env::var("DOCKER_HOST")
        .ok()
        .filter(|h| !h.trim().is_empty())
        .unwrap_or_else(|| "unix:///var/run/docker.sock".to_string())
}

/// Pings the engine once per process: `Ok(server version)`, or `Err(one line
/// saying what failed and how to start an engine)`.
pub fn engine_status() -> &'static Result<String, String> {
    static STATUS: OnceLock<Result<String, String>> = OnceLock::new();
    STATUS.get_or_init(|| {
        // Its own thread and runtime: callable from sync tests and from any
        // test's runtime, and the answer outlives both.
        std::thread::spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("engine check runtime");
            rt.block_on(ping())
        })
        .join()
        .unwrap_or_else(|_| Err("the engine check panicked".to_string()))
        .map_err(|detail| {
            format!(
                "no Docker engine answers at {} ({detail}): the real-engine tests need one; start it (`sudo systemctl start docker`, or `sudo dockerd &`) or point DOCKER_HOST at a running engine; to run only the tests that need no engine: `cargo test --lib` and `cargo test --test sandboxctl -- --skip engine_is_reachable`",
                engine_endpoint()
            )
        })
    })
}

async fn ping() -> Result<String, String> {
    let docker = Docker::connect_with_defaults()
        .map_err(|e| e.to_string())?
        .with_timeout(PING_TIMEOUT);
    match tokio::time::timeout(PING_TIMEOUT, docker.ping()).await {
        Err(_) => return Err(format!("no answer to /_ping within {PING_TIMEOUT:?}")),
        Ok(Err(e)) => return Err(root_cause(&e)),
        Ok(Ok(_)) => {}
    }
    let version = tokio::time::timeout(PING_TIMEOUT, docker.version())
        .await
        .map_err(|_| format!("no answer to /version within {PING_TIMEOUT:?}"))?
        .map_err(|e| root_cause(&e))?;
    Ok(format!(
        "{} (API {})",
        version.version.unwrap_or_default(),
        version.api_version.unwrap_or_default()
    ))
}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut root = e;
    while let Some(s) = root.source() {
        root = s;
    }
    root.to_string()
}

trial!(engine_is_reachable);
/// The one test that fails without an engine: its output is the line saying
/// how to start one. Every other real-engine test is ignored at its gate.
fn engine_is_reachable() {
    let owns_the_failure = super::harness::reachability_test_ran();
    match engine_status() {
        Ok(version) => assert!(version.contains("API 1."), "{version}"),
        Err(line) if owns_the_failure => super::harness::fail(line),
        Err(_) => std::panic::resume_unwind(Box::new(NoEngine)),
    }
}

/// The gate of a real-engine test: the engine's version when one answered the
/// process's one ping; else an unwind with [`NoEngine`] (no panic message),
/// which the runner reports as "ignored" (see `support::harness`).
pub fn engine_version() -> &'static str {
    match engine_status() {
        Ok(version) => version,
        Err(_) => std::panic::resume_unwind(Box::new(NoEngine)),
    }
}

// ----- what the harness creates -------------------------------------------------

/// What a created container is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    /// Started, running `/sleep infinity`.
    Running,
    /// Started, ran `/sleep 0`, and exited (code 0).
    Exited,
    /// Created, never started.
    Created,
}

/// A container the harness created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    /// Full ID.
    pub id: String,
    /// Name without the leading slash.
    pub name: String,
}

/// A network the harness created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Network {
    /// Full ID.
    pub id: String,
    pub name: String,
}

/// A box: one named volume and one container mounting it, both labeled
/// `ca.sandbox=1`, `ca.sandbox.id=<box_id>` and the scope label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxBox {
    pub box_id: String,
    pub container: Container,
    pub volume: String,
}

/// A box with a network of its own: the container mounts the volume and is
/// attached to the network; all three carry the box's labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkedBox {
    pub box_id: String,
    pub container: Container,
    pub volume: String,
    pub network: Network,
}

/// A managed volume mounted by two boxes' containers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shared {
    pub volume: String,
    pub a: Container,
    pub b: Container,
}

/// Objects that look like sandboxes but are not managed (no exact `ca.sandbox=1`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decoys {
    pub containers: Vec<Container>,
    pub volumes: Vec<String>,
}

/// What of a test's objects still exists (sorted names).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Remaining {
    pub containers: Vec<String>,
    pub volumes: Vec<String>,
    pub networks: Vec<String>,
}

/// How to create one container; see [`Sandbox::container`].
#[derive(Debug, Clone)]
pub struct ContainerSpec {
    name: Option<String>,
    labels: Labels,
    volumes: Vec<String>,
    binds: Vec<String>,
    tmpfs: Vec<String>,
    run: Run,
    scoped: bool,
    network_mode: String,
    pid_mode: Option<String>,
    ipc_mode: Option<String>,
}

impl ContainerSpec {
    /// A running container with only the scope label, named `<scope>-c<n>`,
    /// without networking (`NetworkMode` `none`).
    pub fn new() -> Self {
        ContainerSpec {
            name: None,
            labels: Labels::new(),
            volumes: Vec::new(),
            binds: Vec::new(),
            tmpfs: Vec::new(),
            run: Run::Running,
            scoped: true,
            network_mode: "none".to_string(),
            pid_mode: None,
            ipc_mode: None,
        }
    }

    /// Uses this exact name (make it unique, e.g. with [`Sandbox::unique`]).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    /// Adds `ca.sandbox=1`.
    pub fn managed(self) -> Self {
        self.label("ca.sandbox", "1")
    }

    /// Adds `ca.sandbox=1` and `ca.sandbox.id=<box_id>`.
    pub fn in_box(self, box_id: &str) -> Self {
        self.managed().label("ca.sandbox.id", box_id)
    }

    /// Mounts the named volume `name` (at `/v/<n>`).
    pub fn volume(mut self, name: &str) -> Self {
        self.volumes.push(name.to_string());
        self
    }

    /// Bind-mounts host path `source` read-only at `target`.
    pub fn bind(mut self, source: &str, target: &str) -> Self {
        self.binds.push(format!("{source}:{target}:ro"));
        self
    }

    /// Mounts a tmpfs at `target`.
    pub fn tmpfs(mut self, target: &str) -> Self {
        self.tmpfs.push(target.to_string());
        self
    }

    /// Sets what the container is doing once created (default `Running`).
    pub fn run(mut self, run: Run) -> Self {
        self.run = run;
        self
    }

    /// Leaves the scope label off (the container is still recorded by name and
    /// removed on cleanup). For decoys that must carry no labels at all.
    pub fn unscoped(mut self) -> Self {
        self.scoped = false;
        self
    }

    /// Attaches the container to network `name` at creation (`NetworkMode`
    /// is the network's name): `bridge`, `host`, `none` or a created network.
    pub fn network(mut self, name: &str) -> Self {
        self.network_mode = name.to_string();
        self
    }

    /// Shares container `id`'s network namespace (`--network container:<id>`).
    pub fn joins_network_of(self, id: &str) -> Self {
        self.network(&format!("container:{id}"))
    }

    /// Shares container `id`'s pid namespace (`--pid container:<id>`).
    pub fn joins_pid_of(mut self, id: &str) -> Self {
        self.pid_mode = Some(format!("container:{id}"));
        self
    }

    /// Sets `IpcMode`: `shareable` for a container others join, or
    /// `container:<id>` (see [`ContainerSpec::joins_ipc_of`]).
    pub fn ipc_mode(mut self, mode: &str) -> Self {
        self.ipc_mode = Some(mode.to_string());
        self
    }

    /// Shares container `id`'s ipc namespace (`--ipc container:<id>`; that
    /// container must have been made with `ipc_mode("shareable")`).
    pub fn joins_ipc_of(self, id: &str) -> Self {
        self.ipc_mode(&format!("container:{id}"))
    }
}

impl Default for ContainerSpec {
    fn default() -> Self {
        ContainerSpec::new()
    }
}

/// How to create one named volume; see [`Sandbox::volume`].
#[derive(Debug, Clone)]
pub struct VolumeSpec {
    name: Option<String>,
    labels: Labels,
    scoped: bool,
}

impl VolumeSpec {
    /// A volume with only the scope label, named `<scope>-v<n>`.
    pub fn new() -> Self {
        VolumeSpec {
            name: None,
            labels: Labels::new(),
            scoped: true,
        }
    }

    /// Uses this exact name (make it unique, e.g. with [`Sandbox::unique`]).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    /// Adds `ca.sandbox=1`.
    pub fn managed(self) -> Self {
        self.label("ca.sandbox", "1")
    }

    /// Adds `ca.sandbox=1` and `ca.sandbox.id=<box_id>`.
    pub fn in_box(self, box_id: &str) -> Self {
        self.managed().label("ca.sandbox.id", box_id)
    }

    /// Leaves the scope label off (still recorded by name and removed on cleanup).
    pub fn unscoped(mut self) -> Self {
        self.scoped = false;
        self
    }
}

impl Default for VolumeSpec {
    fn default() -> Self {
        VolumeSpec::new()
    }
}

/// How to create one network; see [`Sandbox::network`]. Bridge driver,
/// internal (no route out, no port publishing), no fixed subnet.
#[derive(Debug, Clone)]
pub struct NetworkSpec {
    name: Option<String>,
    labels: Labels,
    scoped: bool,
}

impl NetworkSpec {
    /// A network with only the scope label, named `<scope>-n<n>`.
    pub fn new() -> Self {
        NetworkSpec {
            name: None,
            labels: Labels::new(),
            scoped: true,
        }
    }

    /// Uses this exact name (make it unique, e.g. with [`Sandbox::unique`]).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    /// Adds `ca.sandbox=1`.
    pub fn managed(self) -> Self {
        self.label("ca.sandbox", "1")
    }

    /// Adds `ca.sandbox=1` and `ca.sandbox.id=<box_id>`.
    pub fn in_box(self, box_id: &str) -> Self {
        self.managed().label("ca.sandbox.id", box_id)
    }

    /// Leaves the scope label off (still recorded by name and removed on cleanup).
    pub fn unscoped(mut self) -> Self {
        self.scoped = false;
        self
    }
}

impl Default for NetworkSpec {
    fn default() -> Self {
        NetworkSpec::new()
    }
}

/// Objects created but not necessarily labeled: cleanup removes these by
/// name (names are unique to the test; ours never look like an ID).
#[derive(Debug, Clone, Default)]
struct Owned {
    containers: Vec<String>,
    volumes: Vec<String>,
    networks: Vec<String>,
}

/// One test's isolated corner of the Docker daemon. Create it first in every
/// real-engine test (it is the gate: `let sbx = Sandbox::new("x").await;`);
/// drop it (end of scope, or unwinding) to remove
/// everything it made.
///
/// Run the CLI against it only with `--scope <sandbox.scope_arg()>`: without
/// it, sandboxctl would manage other tests' objects.
pub struct Sandbox {
    docker: Docker,
    /// The engine's `unix://` address when not the main engine ([`Sandbox::at`]).
    host: Option<String>,
    scope_value: String,
    image_id: String,
    counter: AtomicU64,
    created: Mutex<Owned>,
}

impl Sandbox {
    /// A gate (see [`engine_version`]): without an engine the test stops here,
    /// ignored. Else connects to it (as sandboxctl does: `DOCKER_HOST` or the
    /// local socket), imports the test image once per process, and picks a
    /// scope value `<test>-<pid>-<nanos>-<n>` no other test can have.
    pub async fn new(test: &str) -> Sandbox {
        engine_version();
        let docker = connect().await;
        let image_id = test_image(&docker).await;
        Sandbox::with(test, docker, None, image_id)
    }

    /// The same on another engine, at the `unix://` address `host` (a
    /// dockerd the test started: its own load stays off the main engine).
    /// Imports the test image there unless it has it. A gate, as
    /// [`Sandbox::new`].
    pub async fn at(test: &str, host: &str) -> Sandbox {
        engine_version();
        let docker = connect_to(Some(host)).await;
        let image_id = ensure_test_image(&docker).await;
        Sandbox::with(test, docker, Some(host.to_string()), image_id)
    }

    fn with(test: &str, docker: Docker, host: Option<String>, image_id: String) -> Sandbox {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let mut name: String = test
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect();
        if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
            name.insert(0, 't');
        }
        let scope_value = format!(
            "{name}-{}-{nanos}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        Sandbox {
            docker,
            host,
            scope_value,
            image_id,
            counter: AtomicU64::new(0),
            created: Mutex::new(Owned::default()),
        }
    }

    /// The bollard client, for anything the helpers do not cover.
    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    /// The value of this test's scope label (unique, also the prefix of every name).
    pub fn scope_value(&self) -> &str {
        &self.scope_value
    }

    /// `ca.sandbox.test=<value>`, the argument for `--scope`.
    pub fn scope_arg(&self) -> String {
        format!("{SCOPE_KEY}={}", self.scope_value)
    }

    /// The scope label as a map, for `Scope::new`.
    pub fn scope_labels(&self) -> Labels {
        labels(&[(SCOPE_KEY, &self.scope_value)])
    }

    /// What sandboxctl sends for this scope: `["ca.sandbox=1", "ca.sandbox.test=<value>"]`.
    pub fn managed_filters(&self) -> Vec<String> {
        vec!["ca.sandbox=1".to_string(), self.scope_arg()]
    }

    /// A TOML `[scope]` table selecting this test, to start a state file with.
    pub fn scope_toml(&self) -> String {
        format!(
            "[scope]\nlabels = {{ \"{SCOPE_KEY}\" = \"{}\" }}\n",
            self.scope_value
        )
    }

    /// The ID of the imported test image.
    pub fn image_id(&self) -> &str {
        &self.image_id
    }

    /// A name no other test can use: `<scope value>-<suffix>`.
    pub fn unique(&self, suffix: &str) -> String {
        format!("{}-{suffix}", self.scope_value)
    }

    /// A CLI runner already limited to this test: `--scope ca.sandbox.test=<value>`.
    pub fn cli(&self) -> super::cli::Cli {
        let cli = super::cli::Cli::new().scope(&self.scope_arg());
        match &self.host {
            Some(host) => cli.docker_host(host),
            None => cli,
        }
    }

    /// A sandboxctl engine on the same daemon (`DOCKER_HOST`, or the local
    /// socket), with a 30 s deadline.
    pub async fn engine(&self) -> DockerEngine {
        let host = self
            .host
            .clone()
            .or_else(|| std::env::var("DOCKER_HOST").ok());
        DockerEngine::connect_to(host.as_deref(), Duration::from_secs(30))
            .await
            .expect("connect sandboxctl's DockerEngine")
    }

    fn next(&self, kind: char) -> String {
        self.unique(&format!(
            "{kind}{}",
            self.counter.fetch_add(1, Ordering::Relaxed)
        ))
    }

    // ----- builders -------------------------------------------------------

    /// Creates a volume as `spec` says; returns its name.
    pub async fn volume(&self, spec: VolumeSpec) -> String {
        let name = spec.name.unwrap_or_else(|| self.next('v'));
        let mut labels = spec.labels;
        if spec.scoped {
            labels.insert(SCOPE_KEY.to_string(), self.scope_value.clone());
        }
        self.created.lock().unwrap().volumes.push(name.clone());
        let request = VolumeCreateRequest {
            name: Some(name.clone()),
            labels: Some(labels.into_iter().collect()),
            ..Default::default()
        };
        within("create volume", self.docker.create_volume(request))
            .await
            .unwrap_or_else(|e| panic!("create volume {name}: {e}"));
        name
    }

    /// Records a volume someone else makes (a proxy's actor, a command the
    /// test runs) under `name`, so that cleanup removes it too.
    pub fn adopt_volume(&self, name: &str) {
        self.created.lock().unwrap().volumes.push(name.to_string());
    }

    /// Creates a network as `spec` says (bridge, internal, no fixed subnet).
    pub async fn network(&self, spec: NetworkSpec) -> Network {
        let name = spec.name.unwrap_or_else(|| self.next('n'));
        let mut labels = spec.labels;
        if spec.scoped {
            labels.insert(SCOPE_KEY.to_string(), self.scope_value.clone());
        }
        // Recorded by name before it exists (see `container`).
        self.created.lock().unwrap().networks.push(name.clone());
        let request = NetworkCreateRequest {
            name: name.clone(),
            driver: Some("bridge".to_string()),
            internal: Some(true),
            labels: Some(labels.into_iter().collect()),
            ..Default::default()
        };
        // Every bridge network on the host holds one of the engine's 31
        // default pools while it exists; other tests give theirs back.
        let deadline = std::time::Instant::now() + POOL_WAIT;
        let id = loop {
            match within(
                "create network",
                self.docker.create_network(request.clone()),
            )
            .await
            {
                Ok(made) => break made.id,
                Err(e)
                    if e.to_string().contains(NO_POOL) && std::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                }
                Err(e) => panic!("create network {name}: {e}"),
            }
        };
        Network { id, name }
    }

    /// Attaches `container` to `network` (a second network, after creation).
    pub async fn connect(&self, container: &Container, network: &Network) {
        let request = NetworkConnectRequest {
            container: container.id.clone(),
            endpoint_config: Some(EndpointSettings::default()),
        };
        within(
            "connect network",
            self.docker.connect_network(&network.id, request),
        )
        .await
        .unwrap_or_else(|e| panic!("connect {} to {}: {e}", container.name, network.name));
    }

    /// Creates (and starts, unless `Run::Created`) a container as `spec` says.
    pub async fn container(&self, spec: ContainerSpec) -> Container {
        let name = spec.name.unwrap_or_else(|| self.next('c'));
        let mut labels = spec.labels;
        if spec.scoped {
            labels.insert(SCOPE_KEY.to_string(), self.scope_value.clone());
        }
        let mut binds: Vec<String> = spec
            .volumes
            .iter()
            .enumerate()
            .map(|(i, v)| format!("{v}:/v/{i}"))
            .collect();
        binds.extend(spec.binds);
        let tmpfs: HashMap<String, String> =
            spec.tmpfs.into_iter().map(|t| (t, String::new())).collect();
        let arg = if spec.run == Run::Exited {
            "0"
        } else {
            "infinity"
        };
        let body = ContainerCreateBody {
            image: Some(TEST_IMAGE.to_string()),
            cmd: Some(vec![SLEEP.to_string(), arg.to_string()]),
            labels: Some(labels.into_iter().collect()),
            host_config: Some(HostConfig {
                binds: Some(binds),
                tmpfs: (!tmpfs.is_empty()).then_some(tmpfs),
                network_mode: Some(spec.network_mode),
                pid_mode: spec.pid_mode,
                ipc_mode: spec.ipc_mode,
                ..Default::default()
            }),
            ..Default::default()
        };
        // Recorded by name before it exists, so that cleanup finds it even if
        // this call fails half-way (names are unique to this test).
        self.created.lock().unwrap().containers.push(name.clone());
        let options = CreateContainerOptionsBuilder::new().name(&name).build();
        let id = within(
            "create container",
            self.docker.create_container(Some(options), body),
        )
        .await
        .unwrap_or_else(|e| panic!("create container {name}: {e}"))
        .id;
        if spec.run != Run::Created {
            within(
                "start container",
                self.docker
                    .start_container(&id, None::<StartContainerOptions>),
            )
            .await
            .unwrap_or_else(|e| panic!("start container {name}: {e}"));
        }
        if spec.run == Run::Exited {
            let options = WaitContainerOptionsBuilder::new()
                .condition("not-running")
                .build();
            let mut wait = self.docker.wait_container(&id, Some(options));
            let waited = tokio::time::timeout(CALL_TIMEOUT, wait.next()).await;
            assert!(waited.is_ok(), "container {name} did not exit");
            // dockerd answers the wait when the container stops, and updates
            // the view its listings read a moment later (seen on 26.1: a
            // `status=running` listing right after the wait still held it).
            let filters = HashMap::from([("id", vec![id.as_str()]), ("status", vec!["exited"])]);
            let listed = ListContainersOptionsBuilder::new()
                .all(true)
                .filters(&filters)
                .build();
            let deadline = Instant::now() + CALL_TIMEOUT;
            while self
                .docker
                .list_containers(Some(listed.clone()))
                .await
                .map_or(true, |l| l.is_empty())
            {
                assert!(
                    Instant::now() < deadline,
                    "container {name} never listed as exited"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        Container { id, name }
    }

    /// A box `box_id`: a managed volume `<scope>-<box_id>-data` and a managed
    /// container `<scope>-<box_id>` mounting it, both with `ca.sandbox.id=<box_id>`.
    pub async fn add_box(&self, box_id: &str, run: Run) -> SandboxBox {
        let volume = self
            .volume(
                VolumeSpec::new()
                    .in_box(box_id)
                    .name(self.unique(&format!("{box_id}-data"))),
            )
            .await;
        let container = self
            .container(
                ContainerSpec::new()
                    .in_box(box_id)
                    .name(self.unique(box_id))
                    .volume(&volume)
                    .run(run),
            )
            .await;
        SandboxBox {
            box_id: box_id.to_string(),
            container,
            volume,
        }
    }

    /// A box `box_id` with a network of its own: a managed network
    /// `<scope>-<box_id>-net`, a managed volume `<scope>-<box_id>-data`, and a
    /// managed container `<scope>-<box_id>` attached to the one and mounting
    /// the other, all three with `ca.sandbox.id=<box_id>`.
    pub async fn add_box_with_network(&self, box_id: &str, run: Run) -> NetworkedBox {
        let (network, volume) = tokio::join!(
            self.network(
                NetworkSpec::new()
                    .in_box(box_id)
                    .name(self.unique(&format!("{box_id}-net")))
            ),
            self.volume(
                VolumeSpec::new()
                    .in_box(box_id)
                    .name(self.unique(&format!("{box_id}-data")))
            ),
        );
        let container = self
            .container(
                ContainerSpec::new()
                    .in_box(box_id)
                    .name(self.unique(box_id))
                    .volume(&volume)
                    .network(&network.name)
                    .run(run),
            )
            .await;
        NetworkedBox {
            box_id: box_id.to_string(),
            container,
            volume,
            network,
        }
    }

    /// Another managed container of box `box_id`, mounting `volumes`.
    pub async fn add_box_container(&self, box_id: &str, volumes: &[&str], run: Run) -> Container {
        let spec = volumes
            .iter()
            .fold(ContainerSpec::new().in_box(box_id).run(run), |s, v| {
                s.volume(v)
            });
        self.container(spec).await
    }

    /// A managed volume of box `box_id` that no container mounts.
    pub async fn box_volume(&self, box_id: &str) -> String {
        self.volume(VolumeSpec::new().in_box(box_id)).await
    }

    /// A leaked container: `ca.sandbox=1` without `ca.sandbox.id`, no mounts.
    pub async fn leaked_container(&self, run: Run) -> Container {
        self.container(ContainerSpec::new().managed().run(run))
            .await
    }

    /// A leaked volume: `ca.sandbox=1` without `ca.sandbox.id`.
    pub async fn leaked_volume(&self) -> String {
        self.volume(VolumeSpec::new().managed()).await
    }

    /// A managed volume (labeled with box `volume_box`, or no box if `None`)
    /// mounted by a container of box `box_a` and one of box `box_b`.
    pub async fn shared_volume(
        &self,
        volume_box: Option<&str>,
        box_a: &str,
        box_b: &str,
        run: Run,
    ) -> Shared {
        let spec = match volume_box {
            Some(b) => VolumeSpec::new().in_box(b),
            None => VolumeSpec::new().managed(),
        };
        let volume = self.volume(spec).await;
        let a = self.add_box_container(box_a, &[&volume], run).await;
        let b = self.add_box_container(box_b, &[&volume], run).await;
        Shared { volume, a, b }
    }

    /// A container without any `ca.sandbox` label (scope label only) mounting `volume`.
    pub async fn unmanaged_user(&self, volume: &str, run: Run) -> Container {
        self.container(ContainerSpec::new().volume(volume).run(run))
            .await
    }

    /// One container (in state `run`) and one volume of each look-alike:
    /// `ca.sandbox=0`, `ca.sandbox=true`, `ca.sandboxx=1`, `ca.sandbox.id` without
    /// `ca.sandbox` (these four with the scope label), no labels at all, and a
    /// `ca-sbx-<scope>-...` name without labels (these two recorded by name).
    /// None of them is managed by any scope.
    pub async fn decoys(&self, run: Run) -> Decoys {
        let looks: [(&str, &str); 4] = [
            ("ca.sandbox", "0"),
            ("ca.sandbox", "true"),
            ("ca.sandboxx", "1"),
            ("ca.sandbox.id", "decoy"),
        ];
        let mut d = Decoys::default();
        for (k, v) in looks {
            d.volumes
                .push(self.volume(VolumeSpec::new().label(k, v)).await);
            d.containers.push(
                self.container(ContainerSpec::new().label(k, v).run(run))
                    .await,
            );
        }
        d.volumes.push(
            self.volume(VolumeSpec::new().unscoped().name(self.next('u')))
                .await,
        );
        d.containers.push(
            self.container(
                ContainerSpec::new()
                    .unscoped()
                    .name(self.next('u'))
                    .run(run),
            )
            .await,
        );
        let sbx_name = format!("ca-sbx-{}", self.next('d'));
        d.volumes.push(
            self.volume(VolumeSpec::new().unscoped().name(sbx_name.clone()))
                .await,
        );
        d.containers.push(
            self.container(ContainerSpec::new().unscoped().name(sbx_name).run(run))
                .await,
        );
        d
    }

    // ----- queries --------------------------------------------------------

    /// True if container `id` (or name) exists (in any state).
    pub async fn container_exists(&self, id: &str) -> bool {
        match within(
            "inspect container",
            self.docker
                .inspect_container(id, None::<InspectContainerOptions>),
        )
        .await
        {
            Ok(_) => true,
            Err(e) if is_404(&e) => false,
            Err(e) => panic!("inspect container {id}: {e}"),
        }
    }

    /// True if volume `name` exists.
    pub async fn volume_exists(&self, name: &str) -> bool {
        match within("inspect volume", self.docker.inspect_volume(name)).await {
            Ok(_) => true,
            Err(e) if is_404(&e) => false,
            Err(e) => panic!("inspect volume {name}: {e}"),
        }
    }

    /// True if network `id` (or name) exists.
    pub async fn network_exists(&self, id: &str) -> bool {
        match within(
            "inspect network",
            self.docker
                .inspect_network(id, None::<InspectNetworkOptions>),
        )
        .await
        {
            Ok(_) => true,
            Err(e) if is_404(&e) => false,
            Err(e) => panic!("inspect network {id}: {e}"),
        }
    }

    /// The state of container `id` (`running`, `exited`, ...), or `None` if it is gone.
    pub async fn container_state(&self, id: &str) -> Option<String> {
        match within(
            "inspect container",
            self.docker
                .inspect_container(id, None::<InspectContainerOptions>),
        )
        .await
        {
            Ok(c) => Some(
                c.state
                    .and_then(|s| s.status)
                    .map(|s| s.to_string())
                    .unwrap_or_default(),
            ),
            Err(e) if is_404(&e) => None,
            Err(e) => panic!("inspect container {id}: {e}"),
        }
    }

    /// Every existing object of this test: those with the scope label and the
    /// recorded ones, as sorted names.
    pub async fn remaining(&self) -> Remaining {
        let owned = self.owned().await.expect("list this test's objects");
        let mut containers = Vec::new();
        for id in owned.containers {
            let c = within(
                "inspect container",
                self.docker
                    .inspect_container(&id, None::<InspectContainerOptions>),
            )
            .await;
            match c {
                Ok(c) => containers.push(
                    c.name
                        .unwrap_or_default()
                        .trim_start_matches('/')
                        .to_string(),
                ),
                Err(e) if is_404(&e) => {}
                Err(e) => panic!("inspect container {id}: {e}"),
            }
        }
        let mut volumes = Vec::new();
        for v in owned.volumes {
            if self.volume_exists(&v).await {
                volumes.push(v);
            }
        }
        let mut networks = Vec::new();
        for n in owned.networks {
            if self.network_exists(&n).await {
                networks.push(n);
            }
        }
        containers.sort();
        volumes.sort();
        networks.sort();
        Remaining {
            containers,
            volumes,
            networks,
        }
    }

    /// IDs of the containers that carry this test's scope label.
    pub async fn scoped_container_ids(&self) -> BTreeSet<String> {
        list_scoped(&self.docker, &self.scope_value)
            .await
            .expect("list scoped containers")
            .containers
            .into_iter()
            .map(|c| c.id)
            .collect()
    }

    /// Names of the volumes that carry this test's scope label.
    pub async fn scoped_volume_names(&self) -> BTreeSet<String> {
        list_scoped(&self.docker, &self.scope_value)
            .await
            .expect("list scoped volumes")
            .volumes
            .into_iter()
            .collect()
    }

    /// Names of the networks that carry this test's scope label.
    pub async fn scoped_network_names(&self) -> BTreeSet<String> {
        list_scoped(&self.docker, &self.scope_value)
            .await
            .expect("list scoped networks")
            .networks
            .into_iter()
            .collect()
    }

    /// IDs of all `ca-sbx:*` images, for "images untouched" assertions.
    pub async fn ca_sbx_images(&self) -> BTreeSet<String> {
        let filters = HashMap::from([("reference", vec!["ca-sbx:*"])]);
        let options = ListImagesOptionsBuilder::new().filters(&filters).build();
        within("list images", self.docker.list_images(Some(options)))
            .await
            .expect("list ca-sbx images")
            .into_iter()
            .map(|i| i.id)
            .collect()
    }

    // ----- cleanup --------------------------------------------------------

    fn recorded(&self) -> Owned {
        self.created
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Scoped objects (listed) plus recorded ones, deduplicated.
    async fn owned(&self) -> Result<Owned, String> {
        owned(&self.docker, &self.scope_value, self.recorded()).await
    }

    /// Removes everything this test created or labeled with its scope, now.
    /// Returns what could not be removed (empty when all went). Drop does the
    /// same; call this to assert on it.
    pub async fn cleanup(&self) -> Vec<String> {
        cleanup(&self.docker, &self.scope_value, self.recorded()).await
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let scope = self.scope_value.clone();
        let host = self.host.clone();
        let created = self.recorded();
        // Drop is sync and may run inside the test's runtime: clean up on a
        // thread of its own with its own runtime and its own client.
        let worker = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("cleanup runtime");
            rt.block_on(async move {
                let docker = connect_to(host.as_deref()).await;
                cleanup(&docker, &scope, created).await
            })
        });
        match worker.join() {
            Ok(failed) if failed.is_empty() => {}
            Ok(failed) => eprintln!(
                "sandbox cleanup of {SCOPE_KEY}={}: could not remove: {}",
                self.scope_value,
                failed.join("; ")
            ),
            Err(_) => eprintln!(
                "sandbox cleanup of {SCOPE_KEY}={} panicked",
                self.scope_value
            ),
        }
    }
}

/// Connects the harness's own bollard client (DOCKER_HOST or the local socket).
async fn connect() -> Docker {
    let docker = Docker::connect_with_defaults()
        .unwrap_or_else(|e| panic!("the real-engine tests need Docker: {e}"))
        .with_timeout(CALL_TIMEOUT);
    within("negotiate version", docker.negotiate_version())
        .await
        .unwrap_or_else(|e| panic!("the real-engine tests need a running Docker daemon: {e}"))
}

/// [`connect`], or a client of the engine at the `unix://` address `host`.
async fn connect_to(host: Option<&str>) -> Docker {
    let Some(host) = host else {
        return connect().await;
    };
    let path = host.strip_prefix("unix://").unwrap_or(host);
    let docker =
        Docker::connect_with_unix(path, CALL_TIMEOUT.as_secs(), bollard::API_DEFAULT_VERSION)
            .unwrap_or_else(|e| panic!("connect to {host}: {e}"));
    within("negotiate version", docker.negotiate_version())
        .await
        .unwrap_or_else(|e| panic!("the engine at {host} does not answer: {e}"))
}

/// Docker's answer when every default address pool is taken.
const NO_POOL: &str = "could not find an available, non-overlapping IPv4 address pool";
/// How long a network's creation waits for a pool another test gives back.
const POOL_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Bounds one harness call by [`CALL_TIMEOUT`].
async fn within<T>(
    what: &str,
    call: impl std::future::Future<Output = Result<T, BollardError>>,
) -> Result<T, BollardError> {
    tokio::time::timeout(CALL_TIMEOUT, call)
        .await
        .unwrap_or_else(|_| panic!("{what}: Docker did not answer within {CALL_TIMEOUT:?}"))
}

fn is_404(e: &BollardError) -> bool {
    matches!(
        e,
        BollardError::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

/// A 409, or Docker 20.10's 403 for a network that still has endpoints.
fn is_conflict(e: &BollardError) -> bool {
    matches!(
        e,
        BollardError::DockerResponseServerError {
            status_code: 409 | 403,
            ..
        }
    )
}

/// Objects carrying exactly `ca.sandbox.test=<scope>`, checked on the client too.
struct Scoped {
    containers: Vec<Container>,
    volumes: Vec<String>,
    networks: Vec<String>,
}

async fn list_scoped(docker: &Docker, scope: &str) -> Result<Scoped, String> {
    assert!(!scope.is_empty(), "refusing to list with an empty scope");
    let label = format!("{SCOPE_KEY}={scope}");
    let filters = HashMap::from([("label", vec![label.as_str()])]);
    let ours = |labels: Option<&HashMap<String, String>>| {
        labels
            .and_then(|l| l.get(SCOPE_KEY))
            .is_some_and(|v| v == scope)
    };
    let options = ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build();
    let containers = within("list containers", docker.list_containers(Some(options)))
        .await
        .map_err(|e| format!("list containers: {e}"))?
        .into_iter()
        // Re-check on the client: never act on a filter the daemon ignored.
        .filter(|c| ours(c.labels.as_ref()))
        .map(|c| Container {
            id: c.id.unwrap_or_default(),
            name: c
                .names
                .unwrap_or_default()
                .first()
                .map(|n| n.trim_start_matches('/').to_string())
                .unwrap_or_default(),
        })
        .collect();
    let options = ListVolumesOptionsBuilder::new().filters(&filters).build();
    let volumes = within("list volumes", docker.list_volumes(Some(options)))
        .await
        .map_err(|e| format!("list volumes: {e}"))?
        .volumes
        .unwrap_or_default()
        .into_iter()
        .filter(|v| ours(Some(&v.labels)))
        .map(|v| v.name)
        .collect();
    let options = ListNetworksOptionsBuilder::new().filters(&filters).build();
    let networks = within("list networks", docker.list_networks(Some(options)))
        .await
        .map_err(|e| format!("list networks: {e}"))?
        .into_iter()
        .filter(|n| ours(n.labels.as_ref()))
        .filter_map(|n| n.name)
        .collect();
    Ok(Scoped {
        containers,
        volumes,
        networks,
    })
}

async fn owned(docker: &Docker, scope: &str, recorded: Owned) -> Result<Owned, String> {
    let scoped = list_scoped(docker, scope).await?;
    let union = |a: Vec<String>, b: Vec<String>| -> Vec<String> {
        a.into_iter()
            .chain(b)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    Ok(Owned {
        containers: union(
            scoped.containers.into_iter().map(|c| c.name).collect(),
            recorded.containers,
        ),
        volumes: union(scoped.volumes, recorded.volumes),
        networks: union(scoped.networks, recorded.networks),
    })
}

/// Removes the scoped and recorded containers (force, with anonymous volumes),
/// then the scoped and recorded volumes and networks. Returns what failed.
async fn cleanup(docker: &Docker, scope: &str, recorded: Owned) -> Vec<String> {
    let found = match owned(docker, scope, recorded.clone()).await {
        Ok(found) => found,
        // Listing failed: still remove what we know we made.
        Err(e) => {
            eprintln!("sandbox cleanup: {e}");
            recorded
        }
    };
    let mut failed = Vec::new();
    let removals = found
        .containers
        .iter()
        .map(|id| remove_container(docker, id));
    for (id, r) in found.containers.iter().zip(join_all(removals).await) {
        if let Err(e) = r {
            failed.push(format!("container {id}: {e}"));
        }
    }
    // Only once every container is gone: volumes and networks they used.
    let (volumes, networks) = tokio::join!(
        join_all(found.volumes.iter().map(|name| remove_volume(docker, name))),
        join_all(
            found
                .networks
                .iter()
                .map(|name| remove_network(docker, name))
        ),
    );
    for (name, r) in found.volumes.iter().zip(volumes) {
        if let Err(e) = r {
            failed.push(format!("volume {name}: {e}"));
        }
    }
    for (name, r) in found.networks.iter().zip(networks) {
        if let Err(e) = r {
            failed.push(format!("network {name}: {e}"));
        }
    }
    failed
}

/// `docker rm -f -v`, then waits until the container is really gone (a
/// concurrent removal answers 409 while it is still in progress).
async fn remove_container(docker: &Docker, id: &str) -> Result<(), String> {
    let options = RemoveContainerOptionsBuilder::new()
        .force(true)
        .v(true)
        .build();
    let deadline = Instant::now() + CALL_TIMEOUT;
    loop {
        match within(
            "remove container",
            docker.remove_container(id, Some(options.clone())),
        )
        .await
        {
            Ok(()) => return Ok(()),
            Err(e) if is_404(&e) => return Ok(()),
            Err(e) if is_conflict(&e) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Removes a volume, retrying while a container that held it is still being removed.
async fn remove_volume(docker: &Docker, name: &str) -> Result<(), String> {
    let options = RemoveVolumeOptionsBuilder::new().force(false).build();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match within(
            "remove volume",
            docker.remove_volume(name, Some(options.clone())),
        )
        .await
        {
            Ok(()) => return Ok(()),
            Err(e) if is_404(&e) => return Ok(()),
            Err(e) if is_conflict(&e) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Removes a network, retrying while a container attached to it is still
/// being removed (Docker 20.10 answers 403 "has active endpoints").
async fn remove_network(docker: &Docker, name: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match within("remove network", docker.remove_network(name)).await {
            Ok(()) => return Ok(()),
            Err(e) if is_404(&e) => return Ok(()),
            Err(e) if is_conflict(&e) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

// ----- the test image -----------------------------------------------------

/// The ID of [`TEST_IMAGE`], importing it on first use in this process. If the
/// tag already exists (an earlier run), it is reused, so imports do not pile up.
async fn test_image(docker: &Docker) -> String {
    static IMAGE: OnceCell<String> = OnceCell::const_new();
    IMAGE
        .get_or_init(|| ensure_test_image(docker))
        .await
        .clone()
}

/// The ID of [`TEST_IMAGE`] on the engine `docker` reaches, imported first
/// unless the engine has it.
async fn ensure_test_image(docker: &Docker) -> String {
    if let Ok(image) = within("inspect image", docker.inspect_image(TEST_IMAGE)).await {
        if let Some(id) = image.id {
            return id;
        }
    }
    import_test_image(docker).await;
    within("inspect image", docker.inspect_image(TEST_IMAGE))
        .await
        .unwrap_or_else(|e| panic!("inspect {TEST_IMAGE} after import: {e}"))
        .id
        .expect("imported image has an ID")
}

/// `docker import` of a root filesystem holding `/sleep` and the libraries
/// `ldd /bin/sleep` lists, tagged [`TEST_IMAGE`].
async fn import_test_image(docker: &Docker) {
    let rootfs = sleep_rootfs_tar();
    let (repo, tag) = TEST_IMAGE.split_once(':').unwrap();
    let options = CreateImageOptionsBuilder::new()
        .from_src("-")
        .repo(repo)
        .tag(tag)
        .changes(vec![format!("CMD [\"{SLEEP}\", \"infinity\"]")])
        .build();
    let mut progress =
        docker.create_image(Some(options), Some(bollard::body_full(rootfs.into())), None);
    let deadline = tokio::time::Instant::now() + CALL_TIMEOUT;
    while let Some(item) = tokio::time::timeout_at(deadline, progress.next())
        .await
        .unwrap_or_else(|_| panic!("import {TEST_IMAGE}: no answer within {CALL_TIMEOUT:?}"))
    {
        if let Err(e) = item {
            panic!("import {TEST_IMAGE}: {e}");
        }
    }
}

/// An uncompressed tar of `sleep` (as `/sleep`) and its shared libraries at
/// the paths `ldd` reports, with their parent directories.
fn sleep_rootfs_tar() -> Vec<u8> {
    let sleep = std::fs::canonicalize("/bin/sleep").expect("/bin/sleep exists");
    let ldd = std::process::Command::new("ldd")
        .arg(&sleep)
        .output()
        .expect("run ldd");
    assert!(ldd.status.success(), "ldd {}: {:?}", sleep.display(), ldd);
    let mut files: Vec<(String, Vec<u8>)> = vec![(
        SLEEP.trim_start_matches('/').to_string(),
        std::fs::read(&sleep).expect("read sleep"),
    )];
    for line in String::from_utf8_lossy(&ldd.stdout).lines() {
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        let Some(path) = path.filter(|p| p.starts_with('/')) else {
            continue; // linux-vdso.so.1, or "not found"
        };
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
        files.push((path.trim_start_matches('/').to_string(), data));
    }
    let mut dirs = BTreeSet::new();
    for (path, _) in &files {
        let mut parent = std::path::Path::new(path).parent();
        while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
            dirs.insert(p.to_string_lossy().into_owned());
            parent = p.parent();
        }
    }
    let mut tar = Vec::new();
    for dir in &dirs {
        tar_entry(&mut tar, &format!("{dir}/"), 0o755, None);
    }
    for (path, data) in &files {
        tar_entry(&mut tar, path, 0o755, Some(data));
    }
    tar.extend_from_slice(&[0u8; 1024]);
    tar
}

/// Appends one ustar entry: a directory when `data` is `None`, else a regular file.
fn tar_entry(out: &mut Vec<u8>, path: &str, mode: u32, data: Option<&[u8]>) {
    fn octal(field: &mut [u8], value: u64) {
        let text = format!("{value:0width$o}\0", width = field.len() - 1);
        field.copy_from_slice(text.as_bytes());
    }
    assert!(path.len() < 100, "tar path too long: {path}");
    let size = data.map_or(0, <[u8]>::len);
    let mut h = [0u8; 512];
    h[..path.len()].copy_from_slice(path.as_bytes());
    octal(&mut h[100..108], u64::from(mode));
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    octal(&mut h[124..136], size as u64);
    octal(&mut h[136..148], 0);
    h[148..156].fill(b' ');
    h[156] = if data.is_some() { b'0' } else { b'5' };
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    out.extend_from_slice(&h);
    if let Some(data) = data {
        out.extend_from_slice(data);
        out.resize(out.len().next_multiple_of(512), 0);
    }
}
