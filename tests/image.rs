//! The container image end to end, on the real engine: `scripts/image.sh
//! TAG` builds it (the release binary, built only when missing or stale,
//! and the libraries it links, on `scratch`), and it runs `watch` as PID 1
//! the way docs/operations.md says to: `--read-only --cap-drop ALL`, a
//! non-root user given the socket's group with `--group-add`, `--network
//! none`, the engine's socket, the state folder, and one data folder (audit
//! log, archive folder, memo) mounted.
//!
//! Each test builds its own tag (`sandboxctl-test:<scope>`; the layers are
//! the same, so the second build is cached) and removes that tag and its
//! container when it ends, also after a failure; it never removes another
//! image (`docker rmi TAG` of a tag others share only untags it). What the
//! watch manages is the test's own scope (`Sandbox`). A test said "not run"
//! on stderr when the engine is not on a Unix socket (none to mount) or when
//! this process may not hand the data folder to the image's user (not root).
//! Without an engine they are ignored at their gate, as every real-engine
//! test.
//!
//! Load: with the release binary fresh (CI builds it before the tests),
//! the script costs a `docker build` of about 20 MB from a staged context,
//! and the containers idle; with it stale, the first test to call the script
//! builds it (minutes of both cores), once.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::cli::{Cli, Output};
use crate::support::docker::{engine_endpoint, Run, Sandbox};
use crate::support::proxy::Proxy;

/// The image's user and group, as its Dockerfile sets them.
const IMAGE_USER: &str = "10001:10001";
const IMAGE_UID: u32 = 10001;
/// The largest the image may be, in bytes (25 MB).
const SIZE_LIMIT: u64 = 25_000_000;
/// A leaked box must be gone this long after `docker run`.
const REAP_WITHIN: Duration = Duration::from_secs(20);
/// `docker stop -t 10` must return this soon, the watch having exited 0.
const STOP_WITHIN: Duration = Duration::from_secs(5);
/// How long the image build may take (a stale release binary is rebuilt).
const BUILD_DEADLINE: Duration = Duration::from_secs(30 * 60);
/// Deadline of every other docker CLI call.
const DOCKER_DEADLINE: Duration = Duration::from_secs(60);
/// How often waits look again.
const POLL: Duration = Duration::from_millis(250);

/// Runs `docker ARGS` (DOCKER_HOST as inherited), killed past `deadline`.
fn docker(args: &[&str], deadline: Duration) -> Output {
    Cli::new()
        .deadline(deadline)
        .run_program(Path::new("docker"), args)
}

/// `docker ARGS`, failing the test unless it succeeds: its stdout, trimmed.
#[track_caller]
fn docker_ok(args: &[&str]) -> String {
    let ran = docker(args, DOCKER_DEADLINE);
    assert_eq!(ran.code, Some(0), "docker {args:?} failed: {}", ran.stderr);
    ran.stdout.trim().to_string()
}

/// An image tag this test built; `docker rmi TAG` when dropped (never
/// forced: an image another tag or a container uses only loses this tag).
struct Tag(String);

impl Drop for Tag {
    fn drop(&mut self) {
        let _ = docker(&["rmi", &self.0], DOCKER_DEADLINE);
    }
}

/// A container this test ran; removed (forced) when dropped.
struct Started(String);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = docker(&["rm", "--force", "--volumes", &self.0], DOCKER_DEADLINE);
    }
}

impl Started {
    /// `docker inspect --format FORMAT` of the container.
    fn inspect(&self, format: &str) -> String {
        docker_ok(&["inspect", "--format", format, &self.0])
    }

    fn health(&self) -> String {
        self.inspect("{{if .State.Health}}{{.State.Health.Status}}{{end}}")
    }

    fn logs(&self) -> String {
        let ran = docker(&["logs", &self.0], DOCKER_DEADLINE);
        format!("--- stdout\n{}\n--- stderr\n{}", ran.stdout, ran.stderr)
    }

    /// Waits until the health status is `status`; fails the test after
    /// `within`, showing the logs and the health checks' output.
    async fn wait_health(&self, status: &str, within: Duration) -> Duration {
        let started = Instant::now();
        loop {
            if self.health() == status {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < within,
                "container {} not {status} within {within:?} (now {:?}); health log: {}\n{}",
                self.0,
                self.health(),
                self.inspect("{{json .State.Health}}"),
                self.logs()
            );
            tokio::time::sleep(POLL).await;
        }
    }
}

/// The repository root.
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Builds `TAG` with `scripts/image.sh`; the tag is removed when the
/// returned guard drops (made before the build, so a half-finished one
/// goes too).
fn build(tag: &str) -> Tag {
    let guard = Tag(tag.to_string());
    let started = Instant::now();
    let ran = Cli::new()
        .current_dir(repo())
        .deadline(BUILD_DEADLINE)
        .run_program(
            Path::new("bash"),
            [repo().join("scripts/image.sh").as_os_str(), tag.as_ref()],
        );
    assert!(
        ran.code == Some(0),
        "scripts/image.sh {tag} failed\n--- stdout\n{}\n--- stderr\n{}",
        ran.stdout,
        ran.stderr
    );
    eprintln!(
        "scripts/image.sh {tag}: {:?}: {}",
        started.elapsed(),
        ran.stdout.trim()
    );
    guard
}

/// The engine's socket on this host, when it is reached over one.
fn engine_socket() -> Option<PathBuf> {
    engine_endpoint().strip_prefix("unix://").map(PathBuf::from)
}

/// A folder the image's user may read: the state file, `state.toml`'s
/// text, as `sandboxes.toml`.
fn state_folder(toml: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("state folder");
    std::fs::write(dir.path().join("sandboxes.toml"), toml).expect("write the state file");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(
        dir.path().join("sandboxes.toml"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    dir
}

/// What every test mounts: the engine's socket and the data folder, or
/// `None` (said on stderr: the test did not run) when there is no socket to
/// mount or the folder cannot be handed over.
fn mounts(test: &str) -> Option<(PathBuf, tempfile::TempDir)> {
    let Some(socket) = engine_socket() else {
        eprintln!(
            "{test}: not run: the engine ({}) is not on a Unix socket to mount",
            engine_endpoint()
        );
        return None;
    };
    Some((socket, data_folder(test)?))
}

/// The data folder, private to the image's user (0700), or `None` when
/// this process may not hand it over (not root).
fn data_folder(test: &str) -> Option<tempfile::TempDir> {
    let dir = tempfile::tempdir().expect("data folder");
    if let Err(e) = std::os::unix::fs::chown(dir.path(), Some(IMAGE_UID), Some(IMAGE_UID)) {
        eprintln!(
            "{test}: not run: cannot give the data folder to uid {IMAGE_UID} ({e}); it needs root"
        );
        return None;
    }
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    Some(dir)
}

/// `docker run --detach` of `tag` as docs/operations.md says, with the
/// engine socket `socket`, the state folder, the data folder, a health check
/// every second, and `args` after the image (the command).
fn run_image(
    tag: &str,
    name: &str,
    socket: &Path,
    state: &Path,
    data: &Path,
    args: &[&str],
) -> Started {
    let gid = std::fs::metadata(socket)
        .unwrap_or_else(|e| panic!("stat {}: {e}", socket.display()))
        .gid()
        .to_string();
    let started = Started(name.to_string());
    let volume = |from: &Path, to: &str| format!("{}:{to}", from.display());
    let mut run = vec![
        "run",
        "--detach",
        "--name",
        name,
        "--read-only",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--user",
        IMAGE_USER,
        "--group-add",
        &gid,
        "--network",
        "none",
        "--health-interval",
        "1s",
        "--health-retries",
        "2",
    ];
    let mounts = [
        volume(socket, "/var/run/docker.sock"),
        volume(state, "/etc/sandboxctl:ro"),
        volume(data, "/var/lib/sandboxctl"),
    ];
    for mount in &mounts {
        run.extend(["--volume", mount]);
    }
    run.push(tag);
    run.extend_from_slice(args);
    docker_ok(&run);
    started
}

/// The process of the container's PID 1 on this host: its /proc status.
fn pid1_status(container: &Started) -> String {
    let pid = container.inspect("{{.State.Pid}}");
    std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default()
}

fn field<'a>(status: &'a str, name: &str) -> &'a str {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .map_or("", str::trim)
}

/// The image that `scripts/image.sh` builds, run read-only with every
/// capability dropped as a non-root user with the socket mounted: it is at
/// most 25 MB with an `ENTRYPOINT` of sandboxctl, a health check of
/// `sandboxctl health` and no `ca.sandbox` label; it reaps a leaked stopped
/// box (container, volume, network) within 20 s, archiving its volume
/// first, keeps the declared box, touches no decoy and not itself, writes
/// its audit log, archive and memo to the mounted data folder, turns
/// healthy, and on `docker stop -t 10` leaves within 5 s with exit 0.
trial!(the_image_reaps_a_leak_keeps_the_declared_box_and_stops_on_sigterm_with_exit_0);
async fn the_image_reaps_a_leak_keeps_the_declared_box_and_stops_on_sigterm_with_exit_0() {
    const TEST: &str = "the_image_reaps_a_leak";
    let sbx = Sandbox::new("image-reaps").await;
    let Some((socket, data)) = mounts(TEST) else {
        return;
    };
    let tag = build(&format!("sandboxctl-test:{}", sbx.scope_value()));

    // What the image is.
    let size: u64 = docker_ok(&["image", "inspect", "--format", "{{.Size}}", &tag.0])
        .parse()
        .expect("image size");
    assert!(
        size <= SIZE_LIMIT,
        "the image is {size} bytes, over {SIZE_LIMIT}"
    );
    let config: Value = serde_json::from_str(&docker_ok(&[
        "image",
        "inspect",
        "--format",
        "{{json .Config}}",
        &tag.0,
    ]))
    .expect("image config as JSON");
    assert_eq!(config["User"], IMAGE_USER, "{config}");
    assert_eq!(
        config["Entrypoint"],
        serde_json::json!(["/usr/local/bin/sandboxctl"]),
        "{config}"
    );
    assert_eq!(
        config["Healthcheck"]["Test"],
        serde_json::json!(["CMD", "/usr/local/bin/sandboxctl", "health"]),
        "{config}"
    );
    assert_eq!(config["StopSignal"], "SIGTERM", "{config}");
    let labels = config["Labels"].as_object().cloned().unwrap_or_default();
    assert!(
        !labels.keys().any(|k| k.starts_with("ca.sandbox")),
        "the image's containers would carry {labels:?}"
    );

    // A leaked stopped box, then the declared one (running, made after it:
    // the watch inspects it, and so has a memo to write), then decoys.
    let leaked = sbx.add_box_with_network("leaked", Run::Exited).await;
    let keeper = sbx.add_box_with_network("keeper", Run::Running).await;
    let decoys = sbx.decoys(Run::Exited).await;
    let state = state_folder(&format!("{}\n[[box]]\nid = \"keeper\"\n", sbx.scope_toml()));

    let name = sbx.unique("watch");
    let scope = sbx.scope_arg();
    let ran_at = Instant::now();
    let container = run_image(
        &tag.0,
        &name,
        &socket,
        state.path(),
        data.path(),
        &[
            "--scope",
            &scope,
            "watch",
            "--grace",
            "1s",
            "--debounce",
            "1s",
            "--audit",
            "/var/lib/sandboxctl/audit.jsonl",
            "--archive",
            "/var/lib/sandboxctl/archive",
        ],
    );

    // Reaped within 20 s: container, volume and network.
    let reaped = loop {
        let left = [
            sbx.container_exists(&leaked.container.id).await,
            sbx.volume_exists(&leaked.volume).await,
            sbx.network_exists(&leaked.network.id).await,
        ];
        if left.iter().all(|l| !l) {
            break ran_at.elapsed();
        }
        assert!(
            ran_at.elapsed() < REAP_WITHIN,
            "the leaked box is still there (container, volume, network: {left:?}) {:?} after docker run\n{}",
            ran_at.elapsed(),
            container.logs()
        );
        tokio::time::sleep(POLL).await;
    };
    let healthy = container
        .wait_health("healthy", Duration::from_secs(20))
        .await;

    // As whom and with what it runs: uid 10001, no capability at all.
    let status = pid1_status(&container);
    assert!(
        field(&status, "Uid:").starts_with(&IMAGE_UID.to_string()),
        "{status}"
    );
    assert_eq!(field(&status, "CapEff:"), "0000000000000000", "{status}");
    let pid = container.inspect("{{.State.Pid}}");
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap_or_default();
    let nofile = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap_or_default()
        .to_string();

    // SIGTERM as PID 1: out within 5 s, exit 0 (its last cycle converged).
    let stopping = Instant::now();
    docker_ok(&["stop", "--time", "10", &name]);
    let stopped = stopping.elapsed();
    let logs = container.logs();
    assert!(
        stopped < STOP_WITHIN,
        "docker stop took {stopped:?}\n{logs}"
    );
    assert_eq!(container.inspect("{{.State.ExitCode}}"), "0", "{logs}");
    assert!(logs.contains("Converged"), "{logs}");

    // Kept, untouched, written.
    for id in [&keeper.container.id] {
        assert!(sbx.container_exists(id).await, "declared container gone");
    }
    assert!(
        sbx.volume_exists(&keeper.volume).await,
        "declared volume gone"
    );
    assert!(
        sbx.network_exists(&keeper.network.id).await,
        "declared network gone"
    );
    for c in &decoys.containers {
        assert!(sbx.container_exists(&c.id).await, "decoy {} gone", c.name);
    }
    for v in &decoys.volumes {
        assert!(sbx.volume_exists(v).await, "decoy volume {v} gone");
    }
    let audit = std::fs::read_to_string(data.path().join("audit.jsonl")).unwrap_or_default();
    assert!(
        audit.contains(&leaked.container.id) && audit.contains(&leaked.volume),
        "audit log: {audit}\n{logs}"
    );
    let archived: Vec<PathBuf> = walk(&data.path().join("archive"))
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".tar.zst"))
        .collect();
    assert!(
        archived
            .iter()
            .any(|p| p.to_string_lossy().contains(&leaked.volume)),
        "no archive of {} in {archived:?}\n{logs}",
        leaked.volume
    );
    let memo = data.path().join("state/sandboxctl/joins.json");
    let mode = std::fs::metadata(&memo)
        .unwrap_or_else(|e| panic!("no memo at {}: {e}\n{logs}", memo.display()))
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "memo mode {mode:o}");
    eprintln!(
        "image {size} bytes; leaked box reaped {reaped:?} after docker run; healthy {healthy:?} after that; docker stop took {stopped:?}; {}",
        nofile.split_whitespace().collect::<Vec<_>>().join(" ")
    );
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}

/// The image's health follows the engine: healthy while its cycles
/// converge, unhealthy once the engine (behind the fault proxy, whose
/// socket is mounted in place of the real one) stops answering and the
/// last converged cycle is older than two resyncs; `docker stop` then
/// ends the watch with exit 1, its last cycle having failed.
trial!(the_image_turns_unhealthy_when_the_engine_stops_answering);
async fn the_image_turns_unhealthy_when_the_engine_stops_answering() {
    const TEST: &str = "the_image_turns_unhealthy";
    let sbx = Sandbox::new("image-unhealthy").await;
    let Some((socket, data)) = mounts(TEST) else {
        return;
    };
    let proxy = Proxy::start_to(&socket);
    // The image's user connects to the proxy's socket.
    std::fs::set_permissions(proxy.dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(proxy.socket(), std::fs::Permissions::from_mode(0o666)).unwrap();
    let tag = build(&format!("sandboxctl-test:{}", sbx.scope_value()));
    let state = state_folder(&sbx.scope_toml());

    let name = sbx.unique("watch");
    let scope = sbx.scope_arg();
    let container = run_image(
        &tag.0,
        &name,
        proxy.socket(),
        state.path(),
        data.path(),
        &[
            "--scope",
            &scope,
            "watch",
            "--grace",
            "1s",
            "--debounce",
            "1s",
            "--resync",
            "2s",
        ],
    );
    let healthy = container
        .wait_health("healthy", Duration::from_secs(30))
        .await;
    // The engine is lost: every request from here on is closed unanswered.
    proxy.on("GET", "/").cut();
    let cut = Instant::now();
    let unhealthy = container
        .wait_health("unhealthy", Duration::from_secs(40))
        .await;
    let checks = container.inspect("{{range .State.Health.Log}}{{.ExitCode}} {{.Output}}{{end}}");
    assert!(
        checks.contains("unhealthy: last cycle failed"),
        "health checks: {checks}"
    );
    docker_ok(&["stop", "--time", "10", &name]);
    let logs = container.logs();
    assert_eq!(container.inspect("{{.State.ExitCode}}"), "1", "{logs}");
    eprintln!(
        "healthy {healthy:?} after docker run; unhealthy {unhealthy:?} after the engine was cut ({:?})",
        cut.elapsed()
    );
}
