//! Extra engines for tests that need more than the main Docker daemon: a second
//! dockerd (optionally with a plain or TLS tcp listener), a current Docker
//! Engine (Debian trixie's 26.1, API 1.45), Podman's Docker-compatible service,
//! and an sshd whose remote `docker` reaches one of them.
//!
//! Owns those processes and everything they make on the host: one folder each
//! under `$TMPDIR/sbx-engines/`, a bridge `sbx-dN` with an address in
//! 10.213.N.0/24 for each dockerd, and its `--cgroup-parent` cgroups. Must
//! never touch the main engine (`/var/run/docker.sock`, `docker0`,
//! `/etc/docker/daemon.json`): every dockerd gets its own config file, data and
//! exec roots, pidfile, sockets, containerd namespaces and bridge, and never
//! `--bridge=none` (which deletes `docker0`). Ends only processes it started,
//! by pid, or processes whose command line names one of its own folders.
//!
//! Lifetime: a handle ([`Engine`], [`Sshd`]) is an `Arc`. Dropping the last
//! clone stops the process (container removal first, then SIGTERM to its pid,
//! a wait, SIGKILL after [`STOP_GRACE`]), then kills any process still naming
//! its folder, unmounts what is mounted below it and removes the folder, the
//! bridge and the cgroups. `shared()` builders hand out one engine per
//! configuration to all concurrent tests of this process through a registry of
//! `Weak` handles: the first user starts it, the last drop stops it. Folders a
//! killed test process left behind are reclaimed on the next start (their
//! `owner` pid is gone).
//!
//! Every start has a deadline ([`START_DEADLINE`]) and panics with the
//! daemon's log tail when it is not met.
//!
//! Needs the main engine too: the test image comes from it. Every `start` and
//! `shared` is therefore a gate (see `support::docker`): when the main engine
//! does not answer, the test stops there, before anything is started, and is
//! reported ignored. So is [`main_host`]; [`Corner::on_main`] is used only
//! past a gate.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bollard::Docker;

use super::docker::{engine_version, Sandbox, TEST_IMAGE};
use super::tools::{missing, need, Tool};

/// How long an engine may take to answer after it was spawned.
pub const START_DEADLINE: Duration = Duration::from_secs(60);
/// How long a stopping engine gets after SIGTERM before SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(30);
/// Where `scripts/fetch-current-docker.sh` unpacks Docker 26.1 unless
/// `SANDBOXCTL_CURRENT_DOCKER` names another folder.
pub const CURRENT_DOCKER_CACHE: &str = "/var/cache/sandboxctl-test/docker-26";
/// The docker CLI used for setup (loading images, removing containers).
const DOCKER_CLI: &str = "docker";
/// The first three octets of every bridge address: `10.213.N.1/24` for `sbx-dN`.
const BRIDGE_NET: &str = "10.213";

// ----- public API ---------------------------------------------------------

/// What kind of engine a handle runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The machine's own dockerd binary (20.10), second instance.
    Dockerd,
    /// Debian trixie's dockerd 26.1 (see [`CurrentDocker`]).
    CurrentDocker,
    /// `podman system service`.
    Podman,
}

/// A second instance of the machine's dockerd. Reaches the main engine's
/// test image ([`TEST_IMAGE`]) by `docker save | docker load`.
#[derive(Debug, Clone, Default)]
pub struct SecondDockerd {
    listen: Listen,
}

/// A second dockerd that also listens on `tcp://127.0.0.1:PORT` with
/// `--tlsverify`, using certificates made for it (see [`TlsFiles`]).
#[derive(Debug, Clone, Default)]
pub struct TlsDockerd {
    current: bool,
}

/// Debian trixie's Docker Engine 26.1 (API 1.45) run beside the main one, from
/// [`CURRENT_DOCKER_CACHE`] (fetched by `scripts/fetch-current-docker.sh` when
/// missing), with the machine's own runc.
#[derive(Debug, Clone, Default)]
pub struct CurrentDocker {
    listen: Listen,
}

/// Podman's Docker-compatible API service with private storage. Test
/// containers must use `NetworkMode: none` (its default network makes a
/// `podman0` bridge and iptables rules on the host). The test image lists as
/// `localhost/ca-sbx:sandboxctl-test-sleep`.
#[derive(Debug, Clone, Default)]
pub struct Podman {}

/// An sshd on a loopback port whose sessions run with `DOCKER_HOST` set to an
/// engine's socket, so that `ssh://root@127.0.0.1:PORT` reaches that engine
/// through `docker system dial-stdio`. Clients find the key through the `ssh`
/// wrapper first on [`Sshd::wrapper_path`]. Every session's command runs
/// through a forced command that logs it with the connection's ports first
/// (see [`Sshd::remote_commands`]).
#[derive(Clone)]
pub struct SshServer {
    target: Option<Engine>,
    max_startups: Option<String>,
    max_sessions: Option<u32>,
    remote_docker_host: Option<String>,
    remote_docker: RemoteDocker,
}

/// What `docker` is on the remote side of an [`SshServer`].
#[derive(Clone, Debug, Default)]
pub enum RemoteDocker {
    /// The machine's docker CLI.
    #[default]
    Cli,
    /// None: the session's `PATH` holds no `docker`.
    Missing,
    /// A shell script standing in for it.
    Script(String),
}

/// One command an sshd session ran, as its forced command logged it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteCommand {
    /// The port the client connected to (from `SSH_CONNECTION`).
    pub server_port: u16,
    /// What the client asked to run (`SSH_ORIGINAL_COMMAND`).
    pub command: String,
}

/// A running engine. Clones share it; dropping the last one stops it.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<EngineInner>,
}

/// A running sshd in front of an engine. Keeps that engine alive.
#[derive(Clone)]
pub struct Sshd {
    inner: Arc<SshdInner>,
}

/// Certificates for a TLS engine, each folder in Docker's layout (`ca.pem`,
/// `cert.pem`, `key.pem`), usable as `DOCKER_CERT_PATH`.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The CA that signed the server's certificate, and a client certificate it signed.
    pub client_dir: PathBuf,
    /// An unrelated CA, and a client certificate it signed: the server rejects
    /// the client and the client rejects the server.
    pub wrong_ca_dir: PathBuf,
}

impl SecondDockerd {
    /// Listens on `unix://D/docker.sock` only.
    pub fn new() -> Self {
        SecondDockerd::default()
    }

    /// Also listens on plain `tcp://127.0.0.1:PORT` (a free port).
    pub fn tcp(mut self) -> Self {
        self.listen = Listen::Tcp;
        self
    }

    /// Starts an engine of its own (not shared); a gate (see `support::docker`).
    pub async fn start(self) -> Engine {
        start_engine(Spec::Dockerd {
            current: false,
            listen: self.listen,
        })
        .await
    }

    /// The engine every test of this process shares for this configuration;
    /// a gate (see `support::docker`).
    pub async fn shared(self) -> Engine {
        shared_engine(Spec::Dockerd {
            current: false,
            listen: self.listen,
        })
        .await
    }
}

impl TlsDockerd {
    /// The machine's dockerd with a TLS listener.
    pub fn new() -> Self {
        TlsDockerd::default()
    }

    /// Uses Docker 26.1 (see [`CurrentDocker`]) instead.
    pub fn current(mut self) -> Self {
        self.current = true;
        self
    }

    /// Starts an engine of its own (not shared); a gate (see `support::docker`).
    pub async fn start(self) -> Engine {
        start_engine(Spec::Dockerd {
            current: self.current,
            listen: Listen::Tls,
        })
        .await
    }

    /// The engine every test of this process shares for this configuration;
    /// a gate (see `support::docker`).
    pub async fn shared(self) -> Engine {
        shared_engine(Spec::Dockerd {
            current: self.current,
            listen: Listen::Tls,
        })
        .await
    }
}

impl CurrentDocker {
    /// Listens on `unix://D/docker.sock` only.
    pub fn new() -> Self {
        CurrentDocker::default()
    }

    /// Also listens on plain `tcp://127.0.0.1:PORT` (a free port).
    pub fn tcp(mut self) -> Self {
        self.listen = Listen::Tcp;
        self
    }

    /// Starts an engine of its own (not shared); a gate (see `support::docker`).
    pub async fn start(self) -> Engine {
        start_engine(Spec::Dockerd {
            current: true,
            listen: self.listen,
        })
        .await
    }

    /// The engine every test of this process shares for this configuration;
    /// a gate (see `support::docker`).
    pub async fn shared(self) -> Engine {
        shared_engine(Spec::Dockerd {
            current: true,
            listen: self.listen,
        })
        .await
    }
}

impl Podman {
    /// Podman's service on `unix://D/podman.sock`.
    pub fn new() -> Self {
        Podman::default()
    }

    /// Starts a service of its own (not shared); a gate (see `support::docker`).
    pub async fn start(self) -> Engine {
        start_engine(Spec::Podman).await
    }

    /// The service every test of this process shares; a gate (see
    /// `support::docker`).
    pub async fn shared(self) -> Engine {
        shared_engine(Spec::Podman).await
    }
}

impl SshServer {
    /// An sshd whose sessions talk to `target` (kept alive by the sshd).
    pub fn to(target: &Engine) -> Self {
        SshServer {
            target: Some(target.clone()),
            max_startups: None,
            max_sessions: None,
            remote_docker_host: None,
            remote_docker: RemoteDocker::Cli,
        }
    }

    /// An sshd whose sessions talk to the engine at `docker_host` (the main
    /// engine, or a proxy in front of it), which the harness does not own.
    pub fn to_host(docker_host: &str) -> Self {
        SshServer {
            target: None,
            max_startups: None,
            max_sessions: None,
            remote_docker_host: Some(docker_host.to_string()),
            remote_docker: RemoteDocker::Cli,
        }
    }

    /// Sessions get this `DOCKER_HOST` instead of the target's socket (a proxy
    /// in front of another engine, say); the target is still kept alive.
    pub fn remote_docker_host(mut self, host: &str) -> Self {
        self.remote_docker_host = Some(host.to_string());
        self
    }

    /// sshd's `MaxSessions` (sessions per connection; unset: sshd's default 10).
    pub fn max_sessions(mut self, value: u32) -> Self {
        self.max_sessions = Some(value);
        self
    }

    /// What `docker` is on the remote side.
    pub fn remote_docker(mut self, docker: RemoteDocker) -> Self {
        self.remote_docker = docker;
        self
    }

    /// sshd's `MaxStartups` (how many unauthenticated connections it keeps
    /// at once before dropping new ones), e.g. `"100:30:200"`. Unset: sshd's
    /// default `10:30:100`, as on a stock server.
    pub fn max_startups(mut self, value: &str) -> Self {
        self.max_startups = Some(value.to_string());
        self
    }

    /// Starts it; panics with sshd's log when it does not accept connections
    /// within [`START_DEADLINE`].
    pub async fn start(self) -> Sshd {
        // Gates, on the test's own thread: the main engine (the target's
        // gate, or the proxy's), then the tools.
        engine_version();
        need(Tool::Sshd);
        need(Tool::SshClient);
        tokio::task::spawn_blocking(move || start_sshd(self))
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
    }
}

impl Engine {
    /// How many handles of this process hold the engine (a shared engine is
    /// stopped when the last is dropped; other tests may hold it too).
    pub fn users(&self) -> usize {
        Arc::strong_count(&self.inner)
    }

    /// What runs.
    pub fn kind(&self) -> Kind {
        self.inner.kind
    }

    /// The URL a client under test uses: `tcp://127.0.0.1:PORT` for a TLS
    /// engine (with [`Engine::client_env`]), else `unix://D/<name>.sock`.
    pub fn docker_host(&self) -> String {
        match (&self.inner.tls, self.inner.tcp_port) {
            (Some(_), Some(port)) => format!("tcp://127.0.0.1:{port}"),
            _ => self.socket_host(),
        }
    }

    /// `unix://` URL of its socket (plain HTTP, for setup, also on TLS engines).
    pub fn socket_host(&self) -> String {
        format!("unix://{}", self.inner.socket.display())
    }

    /// The socket's path.
    pub fn socket(&self) -> &Path {
        &self.inner.socket
    }

    /// `tcp://127.0.0.1:PORT` when it listens on tcp (TLS or plain).
    pub fn tcp_host(&self) -> Option<String> {
        self.inner
            .tcp_port
            .map(|port| format!("tcp://127.0.0.1:{port}"))
    }

    /// The daemon's pid (dockerd, or `podman system service`).
    pub fn pid(&self) -> u32 {
        self.inner.pid
    }

    /// The engine's own folder; everything it writes is below it.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Its `--data-root` / `--root`.
    pub fn data_root(&self) -> PathBuf {
        self.inner.dir.join("root")
    }

    /// The bridge a dockerd uses (`sbx-dN`); `None` for Podman.
    pub fn bridge(&self) -> Option<&str> {
        self.inner.bridge.as_deref()
    }

    /// Certificates when it listens with TLS.
    pub fn tls(&self) -> Option<&TlsFiles> {
        self.inner.tls.as_ref()
    }

    /// How long it took from spawn until it answered and had the test image.
    pub fn started_in(&self) -> Duration {
        self.inner.started_in
    }

    /// A new bollard client on its unix socket (plain HTTP, 60 s timeout).
    /// New per call: clients must not outlive the test's runtime.
    pub fn docker(&self) -> Docker {
        Docker::connect_with_unix(&self.socket_host(), 60, bollard::API_DEFAULT_VERSION)
            .unwrap_or_else(|e| panic!("bollard client for {}: {e}", self.socket_host()))
    }

    /// Environment a client under test needs to reach [`Engine::docker_host`]:
    /// `DOCKER_HOST`, plus `DOCKER_TLS_VERIFY=1` and `DOCKER_CERT_PATH` for TLS.
    pub fn client_env(&self) -> Vec<(String, String)> {
        let mut env = vec![("DOCKER_HOST".to_string(), self.docker_host())];
        if let Some(tls) = &self.inner.tls {
            env.push(("DOCKER_TLS_VERIFY".to_string(), "1".to_string()));
            env.push((
                "DOCKER_CERT_PATH".to_string(),
                tls.client_dir.display().to_string(),
            ));
        }
        env
    }

    /// A `docker` CLI command on its unix socket (no inherited `DOCKER_*`).
    pub fn cli(&self) -> Command {
        docker_cli(&self.socket_host())
    }

    /// A `podman` CLI command on this Podman engine's own storage and
    /// configuration (what the service sees), under a 120 s `timeout`.
    /// Panics for a dockerd.
    pub fn podman_cli(&self) -> Command {
        assert_eq!(
            self.inner.kind,
            Kind::Podman,
            "podman_cli on a {:?} engine",
            self.inner.kind
        );
        let mut command = Command::new("timeout");
        command
            .arg("120")
            .arg(need(Tool::Podman))
            .env("CONTAINERS_CONF", self.inner.dir.join("containers.conf"))
            .args(podman_store_args(&self.inner.dir));
        command
    }

    /// The last `lines` lines of the daemon's log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.inner.dir.join("daemon.log"), lines)
    }
}

impl Sshd {
    /// `ssh://root@127.0.0.1:PORT`.
    pub fn docker_host(&self) -> String {
        format!("ssh://root@127.0.0.1:{}", self.inner.port)
    }

    /// A host name that only the wrapper's ssh config knows (`Host ALIAS`
    /// with `HostName 127.0.0.1`; the port comes from `Host *`): shows that
    /// a client honours the ssh config.
    pub fn alias(&self) -> String {
        ssh_alias(self.inner.port)
    }

    /// `ssh://root@ALIAS` (see [`Sshd::alias`]): reaches the engine with the
    /// `PATH` of [`Sshd::wrapper_path`].
    pub fn alias_host(&self) -> String {
        format!("ssh://root@{}", self.alias())
    }

    /// sshd's pid.
    pub fn pid(&self) -> u32 {
        self.inner.pid
    }

    /// The sshd's own folder (config, keys, wrapper, log).
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The loopback port.
    pub fn port(&self) -> u16 {
        self.inner.port
    }

    /// The engine its sessions reach.
    pub fn target(&self) -> Option<&Engine> {
        self.inner.target.as_ref()
    }

    /// `PATH` for clients: the folder holding the `ssh` wrapper, then `$PATH`.
    pub fn wrapper_path(&self) -> String {
        let rest = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".to_string());
        format!("{}:{rest}", self.inner.dir.join("bin").display())
    }

    /// `DOCKER_HOST` and `PATH` for a client under test.
    pub fn client_env(&self) -> Vec<(String, String)> {
        vec![
            ("DOCKER_HOST".to_string(), self.docker_host()),
            ("PATH".to_string(), self.wrapper_path()),
        ]
    }

    /// The last `lines` lines of sshd's log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.inner.dir.join("sshd.log"), lines)
    }

    /// Every command sessions ran so far, in order, with the port they came in on.
    pub fn remote_commands(&self) -> Vec<RemoteCommand> {
        let text =
            std::fs::read_to_string(self.inner.dir.join("remote-commands.log")).unwrap_or_default();
        text.lines()
            .filter_map(|line| {
                let (connection, command) = line.split_once('|')?;
                let server_port = connection.split_whitespace().nth(3)?.parse().ok()?;
                Some(RemoteCommand {
                    server_port,
                    command: command.to_string(),
                })
            })
            .collect()
    }

    /// Living processes of sessions (sshd's own below its listener, and what
    /// they run): empty when no client is connected.
    pub fn session_processes(&self) -> Vec<u32> {
        super::cli::descendants(self.inner.pid)
    }

    /// Living `ssh` clients that use this sshd's client config (the wrapper's
    /// `-F`), whoever started them.
    pub fn clients(&self) -> Vec<u32> {
        let config = self.inner.dir.join("ssh_config");
        processes_naming(&self.inner.dir)
            .into_iter()
            .filter(|&pid| pid != self.inner.pid && alive(pid))
            .filter(|&pid| {
                std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                    String::from_utf8_lossy(&c)
                        .split('\0')
                        .any(|a| a == config.to_string_lossy())
                })
            })
            .collect()
    }

    /// How long it took until it accepted connections.
    pub fn started_in(&self) -> Duration {
        self.inner.started_in
    }
}

/// Pids of live processes whose command line names `dir` or a path below it
/// (the engine's containerd, shims, conmon...). Empty after an engine stopped
/// cleanly. `/x/dockerd-1` does not match `/x/dockerd-15`: an argument must be
/// the folder itself or contain it followed by `/`.
pub fn processes_naming(dir: &Path) -> Vec<u32> {
    let folder = dir.to_string_lossy().into_owned();
    let below = format!("{folder}/");
    let me = std::process::id();
    let mut pids = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let names = String::from_utf8_lossy(&cmdline).split('\0').any(|arg| {
            arg == folder || arg.ends_with(&format!("={folder}")) || arg.contains(&below)
        });
        if names {
            pids.push(pid);
        }
    }
    pids.sort_unstable();
    pids
}

/// Whether a process with this pid exists (zombies count as gone).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // "pid (comm) S ...": the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Whether a network interface exists (`ip link show NAME`).
pub fn link_exists(name: &str) -> bool {
    Command::new("ip")
        .args(["link", "show", name])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Cgroup folders named `name` directly below a controller (v1) or the v2 root.
pub fn cgroups_named(name: &str) -> Vec<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    let mut found = Vec::new();
    if root.join(name).is_dir() {
        found.push(root.join(name));
    }
    if let Ok(entries) = std::fs::read_dir(root) {
        for entry in entries.flatten() {
            let candidate = entry.path().join(name);
            if candidate.is_dir() {
                found.push(candidate);
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

// ----- specs and the registry ---------------------------------------------

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
enum Listen {
    #[default]
    Unix,
    Tcp,
    Tls,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Spec {
    Dockerd { current: bool, listen: Listen },
    Podman,
}

type Slot = Arc<Mutex<Weak<EngineInner>>>;

/// One slot per configuration; a slot's lock is held while its engine starts.
static REGISTRY: LazyLock<Mutex<HashMap<Spec, Slot>>> = LazyLock::new(Default::default);
static SEQ: AtomicU64 = AtomicU64::new(0);

/// The tools `spec` needs, before anything starts (see `support::tools`):
/// Podman; iproute2 for a dockerd's bridge, openssl for its certificates;
/// Docker 26.1, fetched when missing.
async fn need_tools(spec: Spec) {
    match spec {
        Spec::Podman => {
            need(Tool::Podman);
        }
        Spec::Dockerd { current, listen } => {
            need(Tool::Iproute2);
            if listen == Listen::Tls {
                need(Tool::Openssl);
            }
            if current {
                tokio::task::spawn_blocking(current_docker_root)
                    .await
                    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
            }
        }
    }
}

async fn start_engine(spec: Spec) -> Engine {
    engine_version();
    need_tools(spec).await;
    ensure_main_test_image().await;
    tokio::task::spawn_blocking(move || Engine {
        inner: Arc::new(start_blocking(spec)),
    })
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

async fn shared_engine(spec: Spec) -> Engine {
    engine_version();
    need_tools(spec).await;
    ensure_main_test_image().await;
    tokio::task::spawn_blocking(move || {
        let slot = REGISTRY
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(spec)
            .or_default()
            .clone();
        let mut weak = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(inner) = weak.upgrade() {
            return Engine { inner };
        }
        let inner = Arc::new(start_blocking(spec));
        *weak = Arc::downgrade(&inner);
        Engine { inner }
    })
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// Makes sure the main engine has [`TEST_IMAGE`], through the same path the
/// main-engine tests use (`Sandbox::new` imports it once per process).
async fn ensure_main_test_image() {
    static DONE: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    DONE.get_or_init(|| async {
        drop(Sandbox::new("engines-image").await);
    })
    .await;
}

// ----- engines --------------------------------------------------------------

struct EngineInner {
    kind: Kind,
    dir: PathBuf,
    socket: PathBuf,
    tcp_port: Option<u16>,
    tls: Option<TlsFiles>,
    bridge: Option<String>,
    pid: u32,
    child: Mutex<Child>,
    started_in: Duration,
}

impl Drop for EngineInner {
    fn drop(&mut self) {
        let started = Instant::now();
        remove_all_containers(&self.socket_host());
        let child = self.child.get_mut().unwrap_or_else(|e| e.into_inner());
        stop_child(child, self.pid);
        let problems = reclaim(&self.dir, self.bridge.as_deref());
        eprintln!(
            "engines: {:?} pid {} stopped in {:.2} s{}",
            self.kind,
            self.pid,
            started.elapsed().as_secs_f64(),
            if problems.is_empty() {
                String::new()
            } else {
                format!(" (could not: {})", problems.join("; "))
            }
        );
    }
}

impl EngineInner {
    fn socket_host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }
}

/// A fresh folder `$TMPDIR/sbx-engines/<tag>-<pid>-<n>` owned by this process.
fn new_dir(tag: &str) -> PathBuf {
    let base = std::env::temp_dir().join("sbx-engines");
    std::fs::create_dir_all(&base).expect("create engines base folder");
    reclaim_stale(&base);
    let dir = base.join(format!(
        "{tag}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    write(&dir.join("owner"), &std::process::id().to_string());
    dir
}

fn start_blocking(spec: Spec) -> EngineInner {
    match spec {
        Spec::Dockerd { current, listen } => start_dockerd(current, listen),
        Spec::Podman => start_podman(),
    }
}

fn start_dockerd(current: bool, listen: Listen) -> EngineInner {
    let kind = if current {
        Kind::CurrentDocker
    } else {
        Kind::Dockerd
    };
    // Fetch first: the fetch takes long and belongs outside the start deadline.
    let path_env = if current {
        let root = current_docker_root();
        format!(
            "{r}/usr/bin:{r}/usr/sbin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            r = root.display()
        )
    } else {
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_string()
    };
    let dir = new_dir(if current { "docker26" } else { "dockerd" });
    let (bridge, _subnet) = claim_bridge(&dir);
    let d = dir.display().to_string();
    let socket = dir.join("docker.sock");
    // No `default-address-pools` here: with them, a restarted dockerd (the
    // archive-restart test's) deleted the host's `docker0`, seen twice on
    // 20.10 (the daemon removes the default bridge interface by its default
    // name when pools are set). The networks tests make on it get subnets
    // of their own instead (`Corner::network`).
    let mut config = serde_json::json!({});
    if !current {
        // 20.10 keeps its engine ID in a key file: without one of its own it
        // reports the main engine's ID. 26.1 keeps it in the data root.
        config["deprecated-key-path"] = format!("{d}/key.json").into();
    }
    write(&dir.join("daemon.json"), &config.to_string());
    // Containerd namespaces and the cgroup parent are named like the bridge,
    // so they are never reused within the process either.
    let ns = bridge.clone();
    let mut args: Vec<String> = vec![
        format!("--config-file={d}/daemon.json"),
        format!("--data-root={d}/root"),
        format!("--exec-root={d}/exec"),
        format!("--pidfile={d}/docker.pid"),
        format!("--host=unix://{}", socket.display()),
        "--iptables=false".into(),
        "--ip-masq=false".into(),
        "--ip-forward=false".into(),
        format!("--containerd-namespace={ns}"),
        format!("--containerd-plugins-namespace={ns}-p"),
        format!("--cgroup-parent={ns}"),
        format!("--bridge={bridge}"),
    ];
    let mut tcp_port = None;
    let mut tls = None;
    match listen {
        Listen::Unix => {}
        Listen::Tcp => {
            let port = free_port();
            args.push(format!("--host=tcp://127.0.0.1:{port}"));
            if current {
                // 26.1 refuses an unauthenticated tcp listener unless told.
                args.push("--tls=false".into());
            }
            tcp_port = Some(port);
        }
        Listen::Tls => {
            let port = free_port();
            let files = make_certificates(&dir.join("tls"));
            let server = dir.join("tls/server");
            args.push("--tlsverify".into());
            args.push(format!("--tlscacert={}", server.join("ca.pem").display()));
            args.push(format!("--tlscert={}", server.join("cert.pem").display()));
            args.push(format!("--tlskey={}", server.join("key.pem").display()));
            args.push(format!("--host=tcp://127.0.0.1:{port}"));
            tcp_port = Some(port);
            tls = Some(files);
        }
    }
    let dockerd = if current {
        current_docker_root().join("usr/sbin/dockerd")
    } else {
        PathBuf::from("dockerd")
    };
    let mut command = Command::new(dockerd);
    command.args(&args).env("PATH", &path_env);
    let started = Instant::now();
    let child = spawn_logged(command, &dir, "daemon.log");
    let pid = child.id();
    write(&dir.join("daemon.pid"), &pid.to_string());
    let mut inner = EngineInner {
        kind,
        dir,
        socket,
        tcp_port,
        tls,
        bridge: Some(bridge),
        pid,
        child: Mutex::new(child),
        started_in: Duration::ZERO,
    };
    wait_until_ready(&mut inner);
    let ready_in = started.elapsed();
    load_test_image(&inner);
    inner.started_in = started.elapsed();
    eprintln!(
        "engines: {kind:?} pid {pid} at {} started in {:.2} s (answered after {:.2} s, then loaded the test image)",
        inner.socket_host(),
        inner.started_in.as_secs_f64(),
        ready_in.as_secs_f64()
    );
    inner
}

fn start_podman() -> EngineInner {
    let dir = new_dir("podman");
    let d = dir.display().to_string();
    for sub in ["root", "run", "tmp", "net"] {
        std::fs::create_dir_all(dir.join(sub)).expect("create podman folders");
    }
    write(
        &dir.join("containers.conf"),
        "[containers]\n\
         default_ulimits = [\"nofile=1024:1024\", \"nproc=1024:1024\"]\n\
         [engine]\n\
         cgroup_manager = \"cgroupfs\"\n\
         events_logger = \"file\"\n",
    );
    let socket = dir.join("podman.sock");
    let mut command = Command::new(need(Tool::Podman));
    command
        .env("CONTAINERS_CONF", format!("{d}/containers.conf"))
        .args(podman_store_args(&dir))
        .args(["system", "service", "--time=0"])
        .arg(format!("unix://{}", socket.display()));
    let started = Instant::now();
    let child = spawn_logged(command, &dir, "daemon.log");
    let pid = child.id();
    write(&dir.join("daemon.pid"), &pid.to_string());
    let mut inner = EngineInner {
        kind: Kind::Podman,
        dir,
        socket,
        tcp_port: None,
        tls: None,
        bridge: None,
        pid,
        child: Mutex::new(child),
        started_in: Duration::ZERO,
    };
    wait_until_ready(&mut inner);
    let ready_in = started.elapsed();
    load_test_image(&inner);
    inner.started_in = started.elapsed();
    eprintln!(
        "engines: Podman pid {pid} at {} started in {:.2} s (answered after {:.2} s, then loaded the test image)",
        inner.socket_host(),
        inner.started_in.as_secs_f64(),
        ready_in.as_secs_f64()
    );
    inner
}

fn podman_store_args(dir: &Path) -> Vec<String> {
    let d = dir.display();
    vec![
        format!("--root={d}/root"),
        format!("--runroot={d}/run"),
        format!("--tmpdir={d}/tmp"),
        format!("--network-config-dir={d}/net"),
    ]
}

/// The unpacked Docker 26.1, fetching it with the repository's script when
/// missing (a download of about 60 MB; minutes on a slow mirror).
fn current_docker_root() -> PathBuf {
    static FETCH: Mutex<()> = Mutex::new(());
    let _one_at_a_time = FETCH.lock().unwrap_or_else(|e| e.into_inner());
    let dest = std::env::var_os("SANDBOXCTL_CURRENT_DOCKER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(CURRENT_DOCKER_CACHE));
    let root = dest.join("root");
    if root.join(".complete").exists() {
        return root;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fetch-current-docker.sh");
    eprintln!(
        "engines: Docker 26.1 missing from {}; running {}",
        dest.display(),
        script.display()
    );
    // Bounded: a mirror that does not answer ignores the test, it does not
    // hang the run (the download is about 60 MB).
    let output = match Command::new("timeout")
        .args(["600", "bash"])
        .arg(&script)
        .arg(&dest)
        .output()
    {
        Ok(output) => output,
        Err(e) => missing(
            Tool::Docker26,
            Some(&format!("run {}: {e}", script.display())),
        ),
    };
    if !(output.status.success() && root.join(".complete").exists()) {
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        eprintln!(
            "engines: {} {} failed ({}):\n{said}",
            script.display(),
            dest.display(),
            output.status
        );
        missing(
            Tool::Docker26,
            Some(&format!("the fetch failed ({}): {said}", output.status)),
        );
    }
    root
}

/// Polls `GET /_ping` on the engine's socket until it answers 200, the child
/// exits, or [`START_DEADLINE`] passes; panics with the log tail on failure.
fn wait_until_ready(inner: &mut EngineInner) {
    let deadline = Instant::now() + START_DEADLINE;
    loop {
        if ping(&inner.socket) {
            return;
        }
        let exited = inner
            .child
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .try_wait()
            .ok()
            .flatten();
        if exited.is_some() || Instant::now() >= deadline {
            let why = match exited {
                Some(status) => format!("exited with {status}"),
                None => format!("did not answer within {START_DEADLINE:?}"),
            };
            let log = tail(&inner.dir.join("daemon.log"), 40);
            // Dropping `inner` stops it and removes its folder, bridge, cgroups.
            let (kind, socket) = (inner.kind, inner.socket.clone());
            panic!(
                "engines: {kind:?} on {} {why}; its log ends:\n{log}",
                socket.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A readiness probe, not a client: one HTTP/1.0 `GET /_ping` over the socket.
fn ping(socket: &Path) -> bool {
    let Ok(mut stream) = UnixStream::connect(socket) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"GET /_ping HTTP/1.0\r\nHost: engine\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut answer = Vec::new();
    let _ = stream.take(64).read_to_end(&mut answer);
    answer.starts_with(b"HTTP/1.0 200") || answer.starts_with(b"HTTP/1.1 200")
}

/// `docker save TEST_IMAGE | docker -H <engine> load` (the main engine is
/// whatever `DOCKER_HOST` or the local socket names, as in `Sandbox`).
fn load_test_image(inner: &EngineInner) {
    let mut save = Command::new(DOCKER_CLI)
        .args(["save", TEST_IMAGE])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run docker save");
    let stdout = save.stdout.take().expect("docker save stdout");
    let load = docker_cli(&inner.socket_host())
        .arg("load")
        .stdin(stdout)
        .output()
        .expect("run docker load");
    let saved = save.wait_with_output().expect("wait for docker save");
    assert!(
        saved.status.success() && load.status.success(),
        "engines: loading {TEST_IMAGE} into {:?} at {} failed: save {} {}; load {} {}{}\nlog:\n{}",
        inner.kind,
        inner.socket.display(),
        saved.status,
        String::from_utf8_lossy(&saved.stderr),
        load.status,
        String::from_utf8_lossy(&load.stdout),
        String::from_utf8_lossy(&load.stderr),
        tail(&inner.dir.join("daemon.log"), 20)
    );
}

/// A `docker` CLI command for `host` under a 120 s `timeout`, with no
/// `DOCKER_*` from the environment.
fn docker_cli(host: &str) -> Command {
    let mut command = Command::new("timeout");
    command.args(["120", DOCKER_CLI]);
    for var in [
        "DOCKER_HOST",
        "DOCKER_CONTEXT",
        "DOCKER_TLS_VERIFY",
        "DOCKER_CERT_PATH",
        "DOCKER_TLS",
    ] {
        command.env_remove(var);
    }
    command.args(["-H", host]);
    command
}

/// The engine is ours alone: force-remove its containers so that stopping it
/// does not wait out each container's grace period.
fn remove_all_containers(host: &str) {
    let Ok(listed) = docker_cli(host).args(["ps", "-aq"]).output() else {
        return;
    };
    let ids: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect();
    if listed.status.success() && !ids.is_empty() {
        let _ = docker_cli(host)
            .args(["rm", "-f", "-v"])
            .args(&ids)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

// ----- sshd -----------------------------------------------------------------

struct SshdInner {
    target: Option<Engine>,
    dir: PathBuf,
    port: u16,
    pid: u32,
    child: Mutex<Child>,
    started_in: Duration,
}

impl Drop for SshdInner {
    fn drop(&mut self) {
        let started = Instant::now();
        let child = self.child.get_mut().unwrap_or_else(|e| e.into_inner());
        stop_child(child, self.pid);
        let problems = reclaim(&self.dir, None);
        eprintln!(
            "engines: sshd pid {} stopped in {:.2} s{}",
            self.pid,
            started.elapsed().as_secs_f64(),
            if problems.is_empty() {
                String::new()
            } else {
                format!(" (could not: {})", problems.join("; "))
            }
        );
        // `target` drops after this, stopping the engine if it was the last user.
    }
}

fn start_sshd(server: SshServer) -> Sshd {
    let SshServer {
        target,
        max_startups,
        max_sessions,
        remote_docker_host,
        remote_docker,
    } = server;
    // Privilege separation folder; Debian's package does not create it
    // without starting its own service. Harmless to share.
    std::fs::create_dir_all("/run/sshd").expect("create /run/sshd");
    let dir = new_dir("sshd");
    let d = dir.display().to_string();
    let port = free_port();
    for (key, file) in [("host", "host_ed25519"), ("client", "id_ed25519")] {
        run_ok(
            Command::new(need(Tool::SshClient).with_file_name("ssh-keygen")).args([
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                &format!("sandboxctl-test-{key}"),
                "-f",
                &format!("{d}/{file}"),
            ]),
            "ssh-keygen",
        );
    }
    std::fs::copy(dir.join("id_ed25519.pub"), dir.join("authorized_keys"))
        .expect("write authorized_keys");
    write(
        &dir.join("sshd_config"),
        &format!(
            "Port {port}\n\
             ListenAddress 127.0.0.1\n\
             HostKey {d}/host_ed25519\n\
             PidFile {d}/sshd.pid\n\
             AuthorizedKeysFile {d}/authorized_keys\n\
             PermitRootLogin prohibit-password\n\
             PubkeyAuthentication yes\n\
             PasswordAuthentication no\n\
             KbdInteractiveAuthentication no\n\
             UsePAM no\n\
             StrictModes no\n\
             SetEnv DOCKER_HOST={host}\n\
             ForceCommand {d}/remote-command\n\
             {startups}{sessions}",
            sessions = max_sessions
                .map(|m| format!("MaxSessions {m}\n"))
                .unwrap_or_default(),
            host = remote_docker_host
                .or_else(|| target.as_ref().map(Engine::socket_host))
                .expect("an sshd has a target engine or a DOCKER_HOST"),
            startups = max_startups
                .map(|m| format!("MaxStartups {m}\n"))
                .unwrap_or_default()
        ),
    );
    write(
        &dir.join("ssh_config"),
        &format!(
            "Host {alias}\n\
             \tHostName 127.0.0.1\n\
             Host *\n\
             \tPort {port}\n\
             \tIdentityFile {d}/id_ed25519\n\
             \tIdentitiesOnly yes\n\
             \tStrictHostKeyChecking no\n\
             \tUserKnownHostsFile /dev/null\n\
             \tLogLevel ERROR\n\
             \tBatchMode yes\n",
            alias = ssh_alias(port)
        ),
    );
    // The forced command: logs the connection and the command, then runs it
    // with the remote `docker` the server was asked for.
    let path = match &remote_docker {
        RemoteDocker::Cli => "$PATH".to_string(),
        RemoteDocker::Missing => format!("{d}/remote-empty"),
        RemoteDocker::Script(script) => {
            std::fs::create_dir_all(dir.join("remote-bin")).expect("create remote-bin");
            write(&dir.join("remote-bin/docker"), script);
            set_mode(&dir.join("remote-bin/docker"), 0o755);
            format!("{d}/remote-bin:$PATH")
        }
    };
    std::fs::create_dir_all(dir.join("remote-empty")).expect("create remote-empty");
    write(
        &dir.join("remote-command"),
        &format!(
            "#!/bin/sh\n\
             echo \"$SSH_CONNECTION|$SSH_ORIGINAL_COMMAND\" >> {d}/remote-commands.log\n\
             PATH={path}\n\
             export PATH\n\
             exec /bin/sh -c \"$SSH_ORIGINAL_COMMAND\"\n"
        ),
    );
    set_mode(&dir.join("remote-command"), 0o755);
    std::fs::create_dir_all(dir.join("bin")).expect("create wrapper folder");
    let wrapper = dir.join("bin/ssh");
    write(
        &wrapper,
        &format!("#!/bin/sh\nexec /usr/bin/ssh -F {d}/ssh_config \"$@\"\n"),
    );
    set_mode(&wrapper, 0o755);
    let mut command = Command::new(need(Tool::Sshd));
    command.args(["-D", "-e", "-f", &format!("{d}/sshd_config")]);
    let started = Instant::now();
    let child = spawn_logged(command, &dir, "sshd.log");
    let pid = child.id();
    write(&dir.join("daemon.pid"), &pid.to_string());
    let mut inner = SshdInner {
        target,
        dir,
        port,
        pid,
        child: Mutex::new(child),
        started_in: Duration::ZERO,
    };
    let deadline = Instant::now() + START_DEADLINE;
    loop {
        // Its own banner: the log says it listens (another process that took
        // the port meanwhile would answer with a banner too).
        let listening = std::fs::read_to_string(inner.dir.join("sshd.log"))
            .is_ok_and(|log| log.contains(&format!("listening on 127.0.0.1 port {port}")));
        if listening && ssh_banner(port) {
            break;
        }
        let exited = inner
            .child
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .try_wait()
            .ok()
            .flatten();
        if exited.is_some() || Instant::now() >= deadline {
            let log = tail(&inner.dir.join("sshd.log"), 40);
            panic!("engines: sshd on 127.0.0.1:{port} did not come up ({exited:?}); its log ends:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    inner.started_in = started.elapsed();
    eprintln!(
        "engines: sshd pid {pid} on 127.0.0.1:{port} started in {:.2} s",
        inner.started_in.as_secs_f64()
    );
    Sshd {
        inner: Arc::new(inner),
    }
}

/// The `Host` alias of the sshd on `port` in its client config.
fn ssh_alias(port: u16) -> String {
    format!("sbx-sshd-{port}")
}

fn ssh_banner(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut banner = [0u8; 8];
    stream.read_exact(&mut banner).is_ok() && banner.starts_with(b"SSH-")
}

// ----- TLS material ---------------------------------------------------------

/// Makes a CA, a server certificate for 127.0.0.1/localhost and a client
/// certificate it signs, and an unrelated CA with its own client certificate,
/// with the `openssl` CLI (ECDSA P-256, valid two days).
fn make_certificates(tls: &Path) -> TlsFiles {
    let server = tls.join("server");
    let client = tls.join("client");
    let wrong = tls.join("wrong-ca");
    let work = tls.join("work");
    for folder in [&server, &client, &wrong, &work] {
        std::fs::create_dir_all(folder).expect("create tls folders");
    }
    let ca = work.join("ca");
    let other_ca = work.join("other-ca");
    make_ca(&ca, "sandboxctl-test-ca");
    make_ca(&other_ca, "sandboxctl-test-unrelated-ca");
    make_leaf(
        &ca,
        &server,
        "localhost",
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    );
    make_leaf(
        &ca,
        &client,
        "sandboxctl-test-client",
        "extendedKeyUsage=clientAuth\n",
    );
    make_leaf(
        &other_ca,
        &wrong,
        "sandboxctl-test-client",
        "extendedKeyUsage=clientAuth\n",
    );
    for (from, to) in [(&ca, &server), (&ca, &client), (&other_ca, &wrong)] {
        std::fs::copy(from.join("ca.pem"), to.join("ca.pem")).expect("copy ca.pem");
    }
    TlsFiles {
        client_dir: client,
        wrong_ca_dir: wrong,
    }
}

fn make_ca(folder: &Path, name: &str) {
    std::fs::create_dir_all(folder).expect("create CA folder");
    run_ok(
        Command::new(need(Tool::Openssl))
            .args(["req", "-x509", "-new", "-nodes", "-days", "2"])
            .args(["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"])
            .args(["-subj", &format!("/CN={name}")])
            .args(["-addext", "basicConstraints=critical,CA:TRUE"])
            .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"])
            .arg("-keyout")
            .arg(folder.join("ca-key.pem"))
            .arg("-out")
            .arg(folder.join("ca.pem")),
        "openssl req (CA)",
    );
}

fn make_leaf(ca: &Path, out: &Path, name: &str, extensions: &str) {
    let ext = out.join("ext.cnf");
    write(&ext, extensions);
    let csr = out.join("req.csr");
    run_ok(
        Command::new(need(Tool::Openssl))
            .args(["req", "-new", "-nodes"])
            .args(["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"])
            .args(["-subj", &format!("/CN={name}")])
            .arg("-keyout")
            .arg(out.join("key.pem"))
            .arg("-out")
            .arg(&csr),
        "openssl req (leaf)",
    );
    let serial = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    run_ok(
        Command::new(need(Tool::Openssl))
            .args(["x509", "-req", "-days", "2"])
            .arg("-in")
            .arg(&csr)
            .arg("-CA")
            .arg(ca.join("ca.pem"))
            .arg("-CAkey")
            .arg(ca.join("ca-key.pem"))
            .args(["-set_serial", &serial.to_string()])
            .arg("-extfile")
            .arg(&ext)
            .arg("-out")
            .arg(out.join("cert.pem")),
        "openssl x509 (sign)",
    );
    let _ = std::fs::remove_file(csr);
    let _ = std::fs::remove_file(ext);
}

// ----- host resources and teardown -------------------------------------------

/// Creates and claims a fresh bridge `sbx-dN-K` for the first N (1..=250) whose
/// subnet `10.213.N.0/24` no route uses, gives it `10.213.N.1/24` and brings
/// it up. `ip link add` fails when the name exists, so concurrent processes
/// never share one. Records the name in `dir/bridge` for reclaiming.
fn claim_bridge(dir: &Path) -> (String, u32) {
    let routes = Command::new("ip")
        .args(["-4", "route", "show"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    for n in 1..=250u32 {
        let net = format!("{BRIDGE_NET}.{n}.");
        if routes.contains(&net) {
            continue;
        }
        // Never reuse a name within this process: a test that just stopped
        // its engine checks that its bridge is gone, while another test may
        // already be claiming the same subnet.
        static CLAIMS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let k = CLAIMS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) % 100_000;
        let name = format!("sbx-d{n}-{k}");
        let added = Command::new("ip")
            .args(["link", "add", "name", &name, "type", "bridge"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !added {
            continue;
        }
        write(&dir.join("bridge"), &name);
        run_ok(
            Command::new("ip").args(["addr", "add", &format!("{net}1/24"), "dev", &name]),
            "ip addr add",
        );
        run_ok(
            Command::new("ip").args(["link", "set", &name, "up"]),
            "ip link set up",
        );
        return (name, n);
    }
    panic!(
        "engines: no free bridge name sbx-d1..sbx-d250 (or all of {BRIDGE_NET}.N.0/24 are routed)"
    );
}

/// SIGTERM, wait up to [`STOP_GRACE`], SIGKILL, reap.
fn stop_child(child: &mut Child, pid: u32) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    signal(pid, libc::SIGTERM);
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    eprintln!("engines: pid {pid} ignored SIGTERM for {STOP_GRACE:?}; SIGKILL");
    let _ = child.kill();
    let _ = child.wait();
}

fn signal(pid: u32, sig: libc::c_int) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    if pid > 1 {
        // SAFETY: kill(2) with a positive pid we started (or found naming our folder).
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// After the daemon is gone: kills processes still naming `dir`, unmounts
/// everything mounted below it, removes its cgroups (`--cgroup-parent sbx-dN`),
/// its bridge and the folder. Returns what it could not do.
fn reclaim(dir: &Path, bridge: Option<&str>) -> Vec<String> {
    let mut problems = Vec::new();
    // A daemon left by a killed test still runs: SIGTERM lets it stop its
    // containers; after a clean stop only stragglers (shims) remain.
    terminate(&processes_naming(dir), Duration::from_secs(15));
    if let Some(bridge) = bridge {
        // Container processes do not name the folder, but sit in our cgroups.
        let mut pids = Vec::new();
        for cgroup in cgroups_named(bridge) {
            cgroup_pids(&cgroup, &mut pids);
        }
        pids.sort_unstable();
        pids.dedup();
        terminate(&pids, Duration::ZERO);
    }
    for mount in mounts_below(dir) {
        let status = Command::new("umount")
            .arg("-l")
            .arg(&mount)
            .stderr(Stdio::null())
            .status();
        if !status.is_ok_and(|s| s.success()) {
            problems.push(format!("umount {mount}"));
        }
    }
    if let Some(bridge) = bridge {
        for cgroup in cgroups_named(bridge) {
            if let Err(e) = remove_cgroup_tree(&cgroup) {
                problems.push(format!("rmdir {}: {e}", cgroup.display()));
            }
        }
        if link_exists(bridge) {
            let deleted = Command::new("ip")
                .args(["link", "delete", bridge, "type", "bridge"])
                .status()
                .is_ok_and(|s| s.success());
            if !deleted {
                problems.push(format!("ip link delete {bridge}"));
            }
        }
    }
    if let Err(e) = std::fs::remove_dir_all(dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            problems.push(format!("remove {}: {e}", dir.display()));
        }
    }
    problems
}

/// SIGTERM to each pid, up to `grace` for them to exit, then SIGKILL and up
/// to 10 s more.
fn terminate(pids: &[u32], grace: Duration) {
    if pids.is_empty() {
        return;
    }
    let wait = |limit: Duration| {
        let deadline = Instant::now() + limit;
        while pids.iter().any(|&pid| alive(pid)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(25));
        }
    };
    if !grace.is_zero() {
        for &pid in pids {
            signal(pid, libc::SIGTERM);
        }
        wait(grace);
    }
    for &pid in pids.iter().filter(|&&pid| alive(pid)) {
        signal(pid, libc::SIGKILL);
    }
    wait(Duration::from_secs(10));
}

/// Pids in a cgroup folder and all below it (`cgroup.procs`).
fn cgroup_pids(path: &Path, out: &mut Vec<u32>) {
    if let Ok(procs) = std::fs::read_to_string(path.join("cgroup.procs")) {
        out.extend(procs.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
    }
    if let Ok(entries) = std::fs::read_dir(path) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                cgroup_pids(&entry.path(), out);
            }
        }
    }
}

/// Mount points at or below `dir`, deepest first (from /proc/self/mountinfo,
/// whose field 5 is the mount point with spaces escaped as `\040`).
fn mounts_below(dir: &Path) -> Vec<String> {
    let prefix = dir.to_string_lossy().into_owned();
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut mounts: Vec<String> = info
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|m| m.replace("\\040", " "))
        .filter(|m| m == &prefix || m.starts_with(&format!("{prefix}/")))
        .collect();
    mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
    mounts.dedup();
    mounts
}

/// Cgroup folders hold only pseudo-files: remove children depth-first with rmdir.
fn remove_cgroup_tree(path: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(path)?.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_cgroup_tree(&entry.path())?;
        }
    }
    std::fs::remove_dir(path)
}

/// Reclaims folders under `base` whose owning test process is gone (killed
/// before its handles dropped): stops their daemon if it still names the
/// folder, then [`reclaim`]s them.
fn reclaim_stale(base: &Path) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let Ok(entries) = std::fs::read_dir(base) else {
            return;
        };
        for entry in entries.flatten() {
            let dir = entry.path();
            let owner = std::fs::read_to_string(dir.join("owner"))
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok());
            if owner.is_some_and(alive) {
                continue;
            }
            let bridge = std::fs::read_to_string(dir.join("bridge")).ok();
            // If its daemon still answers, let it remove its containers.
            for socket in ["docker.sock", "podman.sock"] {
                let socket = dir.join(socket);
                if ping(&socket) {
                    remove_all_containers(&format!("unix://{}", socket.display()));
                }
            }
            // The daemon names its folder on its command line; reclaim kills it.
            let problems = reclaim(&dir, bridge.as_deref().map(str::trim));
            eprintln!(
                "engines: reclaimed stale {}{}",
                dir.display(),
                if problems.is_empty() {
                    String::new()
                } else {
                    format!(" (could not: {})", problems.join("; "))
                }
            );
        }
    });
}

// ----- small helpers --------------------------------------------------------

/// Spawns `command` in its own process group with stdout and stderr appended
/// to `dir/<log>`.
fn spawn_logged(mut command: Command, dir: &Path, log: &str) -> Child {
    let file = std::fs::File::create(dir.join(log)).expect("create log file");
    let program = format!("{:?}", command.get_program());
    command
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("clone log file"))
        .stderr(file)
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("engines: spawn {program}: {e}"))
}

/// A loopback port nothing listens on now, and never handed out before in
/// this process: two engines or sshds started at once never share one (the
/// second would find the first answering in its place).
fn free_port() -> u16 {
    static GIVEN: LazyLock<Mutex<std::collections::HashSet<u16>>> =
        LazyLock::new(|| Mutex::new(std::collections::HashSet::new()));
    loop {
        let port = TcpListener::bind(("127.0.0.1", 0))
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("pick a free loopback port");
        if GIVEN.lock().unwrap_or_else(|e| e.into_inner()).insert(port) {
            return port;
        }
    }
}

fn run_ok(command: &mut Command, what: &str) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("engines: run {what}: {e}"));
    assert!(
        output.status.success(),
        "engines: {what} failed ({}): {}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| format!("({e})"));
    let all: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    for line in &all[all.len().saturating_sub(lines)..] {
        let _ = writeln!(out, "  {line}");
    }
    out
}

// ----- one test's objects on any engine -------------------------------------

/// The main engine's address as the harness reaches it: `DOCKER_HOST` when it
/// is a `unix://` address, else the local socket. A gate, like `Sandbox::new`.
pub fn main_host() -> String {
    engine_version();
    main_address()
}

/// [`main_host`] without the gate, for the harness past one.
fn main_address() -> String {
    std::env::var("DOCKER_HOST")
        .ok()
        .filter(|h| h.starts_with("unix://"))
        .unwrap_or_else(|| "unix:///var/run/docker.sock".to_string())
}

/// A scope value no other test can have: `<test>-<pid>-<nanos>-<n>`.
pub fn unique_scope(test: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{test}-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A box made by [`Corner::add_box`]: a running container mounting a volume
/// (and attached to a network when asked), all labeled `ca.sandbox=1`,
/// `ca.sandbox.id=<box_id>` and the scope label.
#[derive(Debug, Clone)]
pub struct BoxObjects {
    pub box_id: String,
    /// Container ID.
    pub container: String,
    pub container_name: String,
    /// Volume name.
    pub volume: String,
    /// Network ID, when the box has one.
    pub network: Option<String>,
}

/// Look-alike objects no scope manages; see [`Corner::decoys`].
#[derive(Debug, Clone, Default)]
pub struct CornerDecoys {
    /// Container IDs.
    pub containers: Vec<String>,
    /// Volume names.
    pub volumes: Vec<String>,
}

/// One test's objects on one engine (the main one or an extra one): every
/// object carries the scope label `ca.sandbox.test=<scope>` or is recorded by
/// name, and dropping the `Corner` (also while unwinding) removes exactly
/// those, containers first. Containers never get a network of the engine's
/// (`NetworkMode: none`) unless attached to one the test made. Never removes
/// an image. The same scope may be used on several engines at once.
pub struct Corner {
    docker: Docker,
    host: String,
    scope: String,
    seq: AtomicU64,
    recorded: Arc<Mutex<Recorded>>,
}

#[derive(Debug, Clone, Default)]
struct Recorded {
    containers: Vec<String>,
    volumes: Vec<String>,
    networks: Vec<String>,
}

impl Corner {
    /// Objects of scope `scope` on `engine` (through its unix socket).
    pub fn on(engine: &Engine, scope: &str) -> Corner {
        Corner::at(&engine.socket_host(), scope)
    }

    /// Objects of scope `scope` on the main engine ([`main_host`]); only past a
    /// gate (an extra engine started, or `main_host` answered).
    pub fn on_main(scope: &str) -> Corner {
        Corner::at(&main_address(), scope)
    }

    /// Objects of scope `scope` on the engine at the `unix://` address `host`.
    pub fn at(host: &str, scope: &str) -> Corner {
        Corner {
            docker: unix_client(host),
            host: host.to_string(),
            scope: scope.to_string(),
            seq: AtomicU64::new(0),
            recorded: Arc::default(),
        }
    }

    /// The bollard client (plain HTTP on the unix socket).
    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    /// The engine's `unix://` address.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The scope label's value.
    pub fn scope_value(&self) -> &str {
        &self.scope
    }

    /// `ca.sandbox.test=<scope>`, for `--scope`.
    pub fn scope_arg(&self) -> String {
        format!("{}={}", super::docker::SCOPE_KEY, self.scope)
    }

    /// `<scope>-<suffix>`: a name no other test uses.
    pub fn unique(&self, suffix: &str) -> String {
        format!("{}-{suffix}", self.scope)
    }

    fn next(&self, tag: char) -> String {
        self.unique(&format!(
            "{tag}{}",
            self.seq.fetch_add(1, Ordering::Relaxed)
        ))
    }

    fn with_scope(&self, labels: &[(&str, &str)], scoped: bool) -> HashMap<String, String> {
        let mut all: HashMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if scoped {
            all.insert(super::docker::SCOPE_KEY.to_string(), self.scope.clone());
        }
        all
    }

    /// Creates a volume with `labels` plus the scope label; returns its name
    /// (`name`, or a fresh unique one).
    pub async fn volume(&self, name: Option<&str>, labels: &[(&str, &str)]) -> String {
        self.volume_with(name, labels, true).await
    }

    /// Creates a volume with exactly `labels` (no scope label), recorded by name.
    pub async fn unscoped_volume(&self, name: &str, labels: &[(&str, &str)]) -> String {
        self.volume_with(Some(name), labels, false).await
    }

    async fn volume_with(
        &self,
        name: Option<&str>,
        labels: &[(&str, &str)],
        scoped: bool,
    ) -> String {
        use bollard::models::VolumeCreateRequest;
        let name = name.map_or_else(|| self.next('v'), str::to_string);
        lock(&self.recorded).volumes.push(name.clone());
        let request = VolumeCreateRequest {
            name: Some(name.clone()),
            labels: Some(self.with_scope(labels, scoped)),
            ..Default::default()
        };
        self.docker
            .create_volume(request)
            .await
            .unwrap_or_else(|e| panic!("create volume {name} on {}: {e}", self.host));
        name
    }

    /// A volume labeled `ca.sandbox=1` only (plus the scope): a leak.
    pub async fn leaked_volume(&self, name: &str) -> String {
        self.volume(Some(&self.unique(name)), &[("ca.sandbox", "1")])
            .await
    }

    /// Creates an internal bridge network with `labels` plus the scope label,
    /// on a /26 of 10.216.0.0/16 of its own (never one of the engines'
    /// default pools, which every bridge network on the host shares: the
    /// main engine ran out of them while tests held networks on extra
    /// engines); returns its ID.
    pub async fn network(&self, name: &str, labels: &[(&str, &str)]) -> String {
        use bollard::models::{Ipam, IpamConfig, NetworkCreateRequest};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        lock(&self.recorded).networks.push(name.to_string());
        let mut last = String::new();
        // A subnet another network (of this run or a killed one's) still
        // holds is refused: the next one is tried.
        for _ in 0..64 {
            let k = NEXT.fetch_add(1, Ordering::SeqCst) % 1024;
            let subnet = format!("10.216.{}.{}/26", k / 4, (k % 4) * 64);
            let request = NetworkCreateRequest {
                name: name.to_string(),
                driver: Some("bridge".to_string()),
                internal: Some(true),
                labels: Some(self.with_scope(labels, true)),
                ipam: Some(Ipam {
                    config: Some(vec![IpamConfig {
                        subnet: Some(subnet),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                ..Default::default()
            };
            match self.docker.create_network(request).await {
                Ok(made) => return made.id,
                Err(e) if e.to_string().contains("overlap") => last = e.to_string(),
                Err(e) => panic!("create network {name} on {}: {e}", self.host),
            }
        }
        panic!(
            "create network {name} on {}: no free /26 in 10.216.0.0/16: {last}",
            self.host
        )
    }

    /// Creates a container named `name` from [`TEST_IMAGE`] with `labels`
    /// plus the scope label, mounting `volumes` (at `/v/<i>`), attached to
    /// `network` or to none, started (`/sleep infinity`) when `running`;
    /// returns its ID.
    pub async fn container(
        &self,
        name: &str,
        labels: &[(&str, &str)],
        volumes: &[&str],
        network: Option<&str>,
        running: bool,
    ) -> String {
        use bollard::models::{ContainerCreateBody, HostConfig};
        use bollard::query_parameters::{CreateContainerOptionsBuilder, StartContainerOptions};
        lock(&self.recorded).containers.push(name.to_string());
        let body = ContainerCreateBody {
            image: Some(TEST_IMAGE.to_string()),
            cmd: Some(vec![
                super::docker::SLEEP.to_string(),
                "infinity".to_string(),
            ]),
            labels: Some(self.with_scope(labels, true)),
            host_config: Some(HostConfig {
                binds: Some(
                    volumes
                        .iter()
                        .enumerate()
                        .map(|(i, v)| format!("{v}:/v/{i}"))
                        .collect(),
                ),
                network_mode: Some(network.unwrap_or("none").to_string()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let options = CreateContainerOptionsBuilder::new().name(name).build();
        let id = self
            .docker
            .create_container(Some(options), body)
            .await
            .unwrap_or_else(|e| panic!("create container {name} on {}: {e}", self.host))
            .id;
        if running {
            self.docker
                .start_container(&id, None::<StartContainerOptions>)
                .await
                .unwrap_or_else(|e| panic!("start container {name} on {}: {e}", self.host));
        }
        id
    }

    /// A box `box_id`: volume `<scope>-<box_id>-data`, network
    /// `<scope>-<box_id>-net` when `with_network`, and a running container
    /// `<scope>-<box_id>` using them.
    pub async fn add_box(&self, box_id: &str, with_network: bool) -> BoxObjects {
        let labels = [("ca.sandbox", "1"), ("ca.sandbox.id", box_id)];
        let volume = self
            .volume(Some(&self.unique(&format!("{box_id}-data"))), &labels)
            .await;
        let network_name = self.unique(&format!("{box_id}-net"));
        let network = if with_network {
            Some(self.network(&network_name, &labels).await)
        } else {
            None
        };
        let container_name = self.unique(box_id);
        let container = self
            .container(
                &container_name,
                &labels,
                &[&volume],
                network.as_ref().map(|_| network_name.as_str()),
                true,
            )
            .await;
        BoxObjects {
            box_id: box_id.to_string(),
            container,
            container_name,
            volume,
            network,
        }
    }

    /// A running container with only the scope label (unmanaged) mounting `volume`.
    pub async fn unmanaged_user(&self, volume: &str) -> String {
        let name = self.next('u');
        self.container(&name, &[], &[volume], None, true).await
    }

    /// One created container and one volume for each look-alike label set
    /// (`ca.sandbox=0`, `ca.sandbox=true`, `ca.sandboxx=1`, `ca.sandbox.id`
    /// without `ca.sandbox`; with the scope label), and a `ca-sbx-<scope>-…`
    /// volume with no labels at all. None of them is managed by any scope.
    pub async fn decoys(&self) -> CornerDecoys {
        let looks: [(&str, &str); 4] = [
            ("ca.sandbox", "0"),
            ("ca.sandbox", "true"),
            ("ca.sandboxx", "1"),
            ("ca.sandbox.id", "decoy"),
        ];
        let mut decoys = CornerDecoys::default();
        for (k, v) in looks {
            decoys.volumes.push(self.volume(None, &[(k, v)]).await);
            let name = self.next('d');
            decoys
                .containers
                .push(self.container(&name, &[(k, v)], &[], None, false).await);
        }
        let bare = format!("ca-sbx-{}", self.next('b'));
        decoys.volumes.push(self.unscoped_volume(&bare, &[]).await);
        decoys
    }

    /// Whether container `id` exists.
    pub async fn container_exists(&self, id: &str) -> bool {
        use bollard::query_parameters::InspectContainerOptions;
        gone_or(
            self.docker
                .inspect_container(id, None::<InspectContainerOptions>)
                .await,
            &format!("inspect container {id}"),
        )
    }

    /// Whether volume `name` exists.
    pub async fn volume_exists(&self, name: &str) -> bool {
        gone_or(
            self.docker.inspect_volume(name).await,
            &format!("inspect volume {name}"),
        )
    }

    /// Whether network `id` exists.
    pub async fn network_exists(&self, id: &str) -> bool {
        use bollard::query_parameters::InspectNetworkOptions;
        gone_or(
            self.docker
                .inspect_network(id, None::<InspectNetworkOptions>)
                .await,
            &format!("inspect network {id}"),
        )
    }

    /// The engine's image IDs (all of them), for "images untouched".
    pub async fn image_ids(&self) -> std::collections::BTreeSet<String> {
        use bollard::query_parameters::ListImagesOptionsBuilder;
        self.docker
            .list_images(Some(ListImagesOptionsBuilder::new().all(true).build()))
            .await
            .unwrap_or_else(|e| panic!("list images on {}: {e}", self.host))
            .into_iter()
            .map(|i| i.id)
            .collect()
    }

    /// Names of everything of this scope that still exists, sorted:
    /// `container/<name>`, `volume/<name>`, `network/<name>`.
    pub async fn remaining(&self) -> Vec<String> {
        let found = list_corner(&self.docker, &self.scope, &self.recorded())
            .await
            .unwrap_or_else(|e| panic!("list scope {} on {}: {e}", self.scope, self.host));
        let mut all: Vec<String> = found
            .containers
            .iter()
            .map(|c| format!("container/{c}"))
            .chain(found.volumes.iter().map(|v| format!("volume/{v}")))
            .chain(found.networks.iter().map(|n| format!("network/{n}")))
            .collect();
        all.sort();
        all
    }

    fn recorded(&self) -> Recorded {
        lock(&self.recorded).clone()
    }
}

impl Drop for Corner {
    fn drop(&mut self) {
        let (host, scope, recorded) = (self.host.clone(), self.scope.clone(), self.recorded());
        // Drop may run inside the test's runtime: clean up on a thread with
        // its own runtime and client.
        let worker = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("cleanup runtime");
            rt.block_on(async move {
                let docker = unix_client(&host);
                clean_corner(&docker, &scope, &recorded).await
            })
        });
        match worker.join() {
            Ok(Ok(())) => {}
            Ok(Err(left)) => eprintln!(
                "corner cleanup of {}={} on {}: {left}",
                super::docker::SCOPE_KEY,
                self.scope,
                self.host
            ),
            Err(_) => eprintln!("corner cleanup of {} on {} panicked", self.scope, self.host),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn unix_client(host: &str) -> Docker {
    Docker::connect_with_unix(host, 60, bollard::API_DEFAULT_VERSION)
        .unwrap_or_else(|e| panic!("bollard client for {host}: {e}"))
}

/// `Ok` means it exists, a 404 that it does not; anything else fails the test.
fn gone_or<T>(result: Result<T, bollard::errors::Error>, what: &str) -> bool {
    match result {
        Ok(_) => true,
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => false,
        Err(e) => panic!("{what}: {e}"),
    }
}

/// What of a corner exists: container names and IDs, volume names, network names and IDs.
#[derive(Default)]
struct Found {
    containers: Vec<String>,
    container_ids: Vec<String>,
    volumes: Vec<String>,
    networks: Vec<String>,
    network_ids: Vec<String>,
}

/// Objects carrying the scope label, plus the recorded names that exist.
async fn list_corner(docker: &Docker, scope: &str, recorded: &Recorded) -> Result<Found, String> {
    use bollard::query_parameters::{
        ListContainersOptionsBuilder, ListNetworksOptionsBuilder, ListVolumesOptionsBuilder,
    };
    let mut found = Found::default();
    let all_containers = docker
        .list_containers(Some(ListContainersOptionsBuilder::new().all(true).build()))
        .await
        .map_err(|e| format!("list containers: {e}"))?;
    for c in all_containers {
        let name = c
            .names
            .as_ref()
            .and_then(|n| n.first())
            .map(|n| n.trim_start_matches('/').to_string())
            .unwrap_or_default();
        let ours = recorded.containers.contains(&name)
            || c.labels
                .as_ref()
                .and_then(|l| l.get(super::docker::SCOPE_KEY))
                .is_some_and(|v| v == scope);
        if ours {
            found.containers.push(name);
            found.container_ids.push(c.id.unwrap_or_default());
        }
    }
    let volumes = docker
        .list_volumes(Some(ListVolumesOptionsBuilder::new().build()))
        .await
        .map_err(|e| format!("list volumes: {e}"))?
        .volumes
        .unwrap_or_default();
    for v in volumes {
        // Client-side check: Podman ORs label filters, so filter here only.
        if v.labels
            .get(super::docker::SCOPE_KEY)
            .is_some_and(|s| s == scope)
            || recorded.volumes.contains(&v.name)
        {
            found.volumes.push(v.name);
        }
    }
    let networks = docker
        .list_networks(Some(ListNetworksOptionsBuilder::new().build()))
        .await
        .map_err(|e| format!("list networks: {e}"))?;
    for n in networks {
        let name = n.name.clone().unwrap_or_default();
        let labeled = n
            .labels
            .as_ref()
            .and_then(|l| l.get(super::docker::SCOPE_KEY))
            .is_some_and(|s| s == scope);
        if labeled || recorded.networks.contains(&name) {
            found.networks.push(name);
            found.network_ids.push(n.id.unwrap_or_default());
        }
    }
    Ok(found)
}

/// Removes a corner's objects: containers (forced), then volumes and networks.
async fn clean_corner(docker: &Docker, scope: &str, recorded: &Recorded) -> Result<(), String> {
    use bollard::query_parameters::{RemoveContainerOptionsBuilder, RemoveVolumeOptions};
    let found = list_corner(docker, scope, recorded).await?;
    let mut failed = Vec::new();
    let not_found = |e: &bollard::errors::Error| {
        matches!(
            e,
            bollard::errors::Error::DockerResponseServerError {
                status_code: 404,
                ..
            }
        )
    };
    for id in &found.container_ids {
        let options = RemoveContainerOptionsBuilder::new().force(true).build();
        if let Err(e) = docker.remove_container(id, Some(options)).await {
            if !not_found(&e) {
                failed.push(format!("container {id}: {e}"));
            }
        }
    }
    for name in &found.volumes {
        if let Err(e) = docker
            .remove_volume(name, None::<RemoveVolumeOptions>)
            .await
        {
            if !not_found(&e) {
                failed.push(format!("volume {name}: {e}"));
            }
        }
    }
    for id in &found.network_ids {
        if let Err(e) = docker.remove_network(id).await {
            if !not_found(&e) {
                failed.push(format!("network {id}: {e}"));
            }
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("could not remove: {}", failed.join("; ")))
    }
}
