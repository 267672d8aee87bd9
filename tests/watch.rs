//! `sandboxctl watch` end to end against the real Docker engine.
//!
//! Each test runs the real binary as a child process (`sandboxctl --format
//! json ... watch`), limited to its own `Sandbox` scope, with its state file
//! in the run's temp dir, and reads what watch did three ways: the JSON log
//! lines on stderr (`cycle`, `streamLost`, `stateBroken`, ...), the engine's
//! real state through the harness, and where it matters the audit log, the
//! metrics endpoint and the final report on stdout. A `Watcher` kills the
//! child when dropped, so a failing assertion never leaves a watch running.
//!
//! Timings are small (grace 2-8 s, debounce 1 s) and the resync is always
//! 60 s, longer than any test waits: whatever a test sees reaped was reaped
//! by an event, a deadline, a state change or a reconnect, never by resync.
//!
//! The soak test (`cargo test --test sandboxctl -- --ignored soak`) runs ten
//! minutes (`SOAK_MINUTES` to change) of boxes made and abandoned under a
//! watch with a 20 s grace, and of drivers holding their boxes with
//! `sandboxctl hold` for random lifetimes (`SOAK_SEED`) longer than the grace,
//! some killed, and checks every removal in the audit log.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use bollard::query_parameters::EventsOptionsBuilder;
use bollard::Docker;
use futures_util::StreamExt;
use serde_json::Value;

use crate::support::cli::{
    descendants_named, pid_alive, signal_pid, Cli, Guarded, Output, Running,
};
use crate::support::docker::{ContainerSpec, Run, Sandbox, VolumeSpec, TEST_IMAGE};
use crate::support::lease::{
    leases_of, local_now, poll_until, rfc3339_seconds, Listed, LEASE_PREFIX,
};
use crate::support::proxy::Proxy;

/// Longer than any test waits: nothing here is reaped by resync.
const RESYNC: &str = "60s";
/// How long a watch child may live before `Running::wait` gives up on it.
const CHILD_DEADLINE: Duration = Duration::from_secs(30 * 60);
/// The debounce of every watch here (`start_ready`), the soak's included.
const DEBOUNCE: Duration = Duration::from_secs(1);
/// How often waits look again.
const POLL: Duration = Duration::from_millis(100);
/// Time allowed past grace + debounce for the cycles that reap: a cycle takes
/// 0.2-0.5 s on an idle daemon, but up to 10 s on the shared one under load
/// (seen at load average 26 on 2 cores). Still far below [`RESYNC`].
const SLACK: Duration = Duration::from_secs(12);

// ----- the watch child ----------------------------------------------------------

/// A running `sandboxctl ... watch`, killed (SIGKILL) when dropped unless it
/// was stopped with [`Watcher::terminate`].
struct Watcher {
    run: Option<Running>,
}

impl Watcher {
    /// Spawns `cli` with `watch` and `extra` after its arguments.
    fn start(cli: &Cli, extra: &[&str]) -> Watcher {
        let mut args = vec!["watch"];
        args.extend_from_slice(extra);
        Watcher {
            run: Some(cli.spawn_with(args)),
        }
    }

    fn running(&self) -> &Running {
        self.run.as_ref().expect("watch still running")
    }

    fn pid(&self) -> u32 {
        self.running().pid()
    }

    fn stderr(&self) -> String {
        self.running().stderr_so_far()
    }

    /// The JSON log lines written so far (complete lines only), in order,
    /// each checked against `watch-line.schema.json`.
    fn log(&self) -> Vec<Value> {
        crate::support::schema::check_lines("watch-line", &self.stderr(), "the watch log")
    }

    /// The log lines whose `event` is `event`.
    fn events(&self, event: &str) -> Vec<Value> {
        self.log()
            .into_iter()
            .filter(|l| l["event"] == event)
            .collect()
    }

    /// Waits until a log line with `event` satisfies `pred`; fails the test
    /// (showing stderr) after `timeout` or if watch exits.
    async fn wait_for(
        &self,
        event: &str,
        pred: impl Fn(&Value) -> bool,
        timeout: Duration,
    ) -> Value {
        let until = Instant::now() + timeout;
        loop {
            if let Some(line) = self.events(event).into_iter().find(|l| pred(l)) {
                return line;
            }
            assert!(
                Instant::now() < until && self.alive(),
                "no `{event}` log line within {timeout:?} (watch alive: {})\n--- stderr\n{}",
                self.alive(),
                self.stderr()
            );
            tokio::time::sleep(POLL).await;
        }
    }

    /// Sends `signal` to the child.
    fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.pid()).expect("pid fits pid_t");
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(rc, 0, "kill({pid}, {signal}) failed");
    }

    /// SIGTERM, then waits for the exit.
    fn terminate(mut self) -> Output {
        self.signal(libc::SIGTERM);
        self.run.take().expect("watch still running").wait()
    }

    /// Waits for the exit after a signal was sent with [`Watcher::signal`].
    fn terminate_after_signal(mut self) -> Output {
        self.run.take().expect("watch still running").wait()
    }

    /// The child's resident memory now, in KiB (`VmRSS` of /proc/PID/status).
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("read /proc/PID/status of watch");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc/PID/status")
    }

    /// True while the child has not exited.
    fn alive(&self) -> bool {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()));
        status.is_ok_and(|s| {
            !s.lines()
                .any(|l| l.starts_with("State:") && l.contains('Z'))
        })
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        if let Some(run) = self.run.take() {
            if let Ok(pid) = libc::pid_t::try_from(run.pid()) {
                // SAFETY: kill(2) on our own child's pid.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            let _ = run.wait();
        }
    }
}

// ----- local helpers ----------------------------------------------------------

/// A CLI for `sbx` in JSON, with `state` as its state file and a deadline
/// long enough for any watch here.
fn watch_cli(sbx: &Sandbox, state: &str) -> Cli {
    sbx.cli().json().state_toml(state).deadline(CHILD_DEADLINE)
}

/// Replaces `<cli dir>/state.toml` atomically (write aside, rename), as an
/// editor or a deploy would, so that watch never reads it half-written.
fn replace_state(cli: &Cli, contents: &str) -> PathBuf {
    let aside = cli.write("state.toml.new", contents);
    let path = cli.dir().join("state.toml");
    std::fs::rename(&aside, &path).expect("rename the new state file into place");
    path
}

/// `[[box]]` tables declaring `ids`, after `sbx`'s scope table.
fn state_declaring(sbx: &Sandbox, ids: &[&str]) -> String {
    let mut toml = sbx.scope_toml();
    for id in ids {
        toml.push_str(&format!("\n[[box]]\nid = \"{id}\"\n"));
    }
    toml
}

/// A local TCP port nobody listens on right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a free local port")
        .port()
}

/// `GET path` over a fresh connection to `addr`: `(status, body)`.
fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok((status, body.to_string()))
}

/// Waits until `/healthz` on `addr` answers 200: watch has finished its first
/// cycle (and has been following events since before it started).
async fn wait_healthy(watcher: &Watcher, addr: &str) {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok((200, _)) = http_get(addr, "/healthz") {
            // The follower subscribes in parallel with the first cycle; a
            // little slack so that an object made next surely raises an event.
            tokio::time::sleep(Duration::from_millis(300)).await;
            return;
        }
        assert!(
            Instant::now() < until,
            "watch never became healthy on {addr}\n--- stderr\n{}",
            watcher.stderr()
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Starts `watch` on `cli` with `--metrics` on a free port and `extra`, and
/// waits for its first cycle to finish. Returns the watcher and the address.
async fn start_ready(cli: &Cli, extra: &[&str]) -> (Watcher, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    let debounce = format!("{}s", DEBOUNCE.as_secs());
    let mut args = vec![
        "--debounce",
        &debounce,
        "--resync",
        RESYNC,
        "--metrics",
        &addr,
    ];
    args.extend_from_slice(extra);
    let watcher = Watcher::start(cli, &args);
    wait_healthy(&watcher, &addr).await;
    (watcher, addr)
}

/// Polls until container `id` is gone; the time it took from `since`, or
/// `None` after `timeout`.
async fn container_gone_within(
    sbx: &Sandbox,
    id: &str,
    since: Instant,
    timeout: Duration,
) -> Option<Duration> {
    loop {
        if !sbx.container_exists(id).await {
            return Some(since.elapsed());
        }
        if since.elapsed() > timeout {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Sleeps until `since + at`.
async fn sleep_until(since: Instant, at: Duration) {
    tokio::time::sleep((since + at).saturating_duration_since(Instant::now())).await;
}

/// The audit log's lines, each parsed and checked against the audit schema
/// (failing the test on a line that is not JSON or does not match).
fn audit_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    crate::support::schema::check_audit(&text, &path.display().to_string())
}

/// `cycle` lines that removed at least one object, as `(trigger, removed containers)`.
fn removing_cycles(watcher: &Watcher) -> Vec<(String, u64)> {
    watcher
        .events("cycle")
        .iter()
        .filter(|l| {
            ["containers", "volumes", "networks"]
                .iter()
                .any(|k| l["removed"][k].as_u64().unwrap_or(0) > 0)
        })
        .map(|l| {
            (
                l["trigger"].as_str().unwrap_or_default().to_string(),
                l["removed"]["containers"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

// ----- 1. a leak made while watching -------------------------------------------

/// A leak made while watch runs is reaped once its grace period ends: the
/// create event wakes a cycle that sees it young and sets a deadline, and the
/// deadline reaps it, long before the 60 s resync.
trial!(leak_made_while_watching_is_reaped_after_its_grace_without_resync);
async fn leak_made_while_watching_is_reaped_after_its_grace_without_resync() {
    let sbx = Sandbox::new("watch-leak").await;
    let cli = watch_cli(&sbx, &sbx.scope_toml()).args(["--grace", "3s"]);
    let (watcher, _) = start_ready(&cli, &[]).await;

    let made = Instant::now();
    let leak = sbx.leaked_container(Run::Running).await;
    let took = container_gone_within(&sbx, &leak.id, made, Duration::from_secs(3 + 1) + SLACK)
        .await
        .unwrap_or_else(|| {
            panic!(
                "leak {} still there {:?} after it was made (grace 3 s, debounce 1 s)\n--- stderr\n{}",
                leak.name,
                made.elapsed(),
                watcher.stderr()
            )
        });
    // Not before its grace ended (creation times are whole seconds: 1 s slack).
    assert!(
        took >= Duration::from_secs(2),
        "reaped after {took:?}, inside its 3 s grace"
    );
    let line = watcher
        .wait_for("cycle", |l| l["removed"]["containers"] == 1, SLACK)
        .await;
    // The deadline's cycle, or one that an engine event (any volume or
    // network event of the shared daemon wakes watch) ran at the same moment.
    assert!(
        ["grace, expiry or a lease ran out", "events"]
            .contains(&line["trigger"].as_str().unwrap_or_default()),
        "{line}"
    );
    assert_eq!(line["converged"], true, "{line}");
    assert!(watcher.alive(), "watch exited\n{}", watcher.stderr());
    eprintln!("leak reaped {took:?} after it was made (grace 3 s, debounce 1 s)");
}

// ----- 2. an undeclared box within grace ---------------------------------------

/// An undeclared box (container and volume) is left alone while it is young,
/// still there just before its grace ends, and reaped whole right after.
trial!(undeclared_box_survives_its_grace_then_goes);
async fn undeclared_box_survives_its_grace_then_goes() {
    let sbx = Sandbox::new("watch-grace").await;
    let cli = watch_cli(&sbx, &sbx.scope_toml()).args(["--grace", "8s"]);
    let audit = cli.dir().join("audit.jsonl");
    let audit_arg = audit.display().to_string();
    let (watcher, _) = start_ready(&cli, &["--audit", &audit_arg]).await;

    let made = Instant::now();
    let b = sbx.add_box("young", Run::Running).await;
    // Events about it have come and gone (debounce 1 s): still there at 6 s.
    sleep_until(made, Duration::from_secs(6)).await;
    assert!(
        sbx.container_exists(&b.container.id).await && sbx.volume_exists(&b.volume).await,
        "box reaped {:?} after it was made, inside its 8 s grace\n--- stderr\n{}",
        made.elapsed(),
        watcher.stderr()
    );
    assert!(audit_lines(&audit).is_empty(), "{:?}", audit_lines(&audit));

    let took = container_gone_within(
        &sbx,
        &b.container.id,
        made,
        Duration::from_secs(8 + 1) + SLACK,
    )
    .await
    .unwrap_or_else(|| {
        panic!(
            "box still there {:?} after it was made\n{}",
            made.elapsed(),
            watcher.stderr()
        )
    });
    watcher
        .wait_for("cycle", |l| l["removed"]["volumes"] == 1, SLACK)
        .await;
    assert!(
        !sbx.volume_exists(&b.volume).await,
        "the box's volume stayed"
    );
    let reasons: BTreeSet<(String, String)> = audit_lines(&audit)
        .iter()
        .map(|l| {
            (
                l["reason"]["code"].as_str().unwrap_or_default().to_string(),
                l["reason"]["boxId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        reasons,
        BTreeSet::from([("boxNotDeclared".to_string(), "young".to_string())])
    );
    eprintln!("undeclared box reaped {took:?} after it was made (grace 8 s)");
}

// ----- 3. a declared box with a ttl --------------------------------------------

/// A declared box with `ttl = "4s"` is kept while its ttl runs and reaped
/// (reason `expired`) when it ends, by the deadline alone.
trial!(declared_box_goes_when_its_ttl_ends);
async fn declared_box_goes_when_its_ttl_ends() {
    let sbx = Sandbox::new("watch-ttl").await;
    let state = format!(
        "{}\n[[box]]\nid = \"short\"\nttl = \"4s\"\n",
        sbx.scope_toml()
    );
    let cli = watch_cli(&sbx, &state).args(["--grace", "2s"]);
    let audit = cli.dir().join("audit.jsonl");
    let audit_arg = audit.display().to_string();
    let (watcher, _) = start_ready(&cli, &["--audit", &audit_arg]).await;

    let made = Instant::now();
    let b = sbx.add_box("short", Run::Running).await;
    // Past its 2 s grace, inside its 4 s ttl: declared, so kept.
    sleep_until(made, Duration::from_millis(2500)).await;
    assert!(
        sbx.container_exists(&b.container.id).await,
        "declared box reaped inside its ttl\n{}",
        watcher.stderr()
    );
    let took = container_gone_within(
        &sbx,
        &b.container.id,
        made,
        Duration::from_secs(4 + 1) + SLACK,
    )
    .await
    .unwrap_or_else(|| {
        panic!(
            "box still there {:?} after it was made (ttl 4 s)\n{}",
            made.elapsed(),
            watcher.stderr()
        )
    });
    assert!(
        took >= Duration::from_secs(3),
        "reaped after {took:?}, inside its 4 s ttl"
    );
    let line = watcher
        .wait_for("cycle", |l| l["removed"]["containers"] == 1, SLACK)
        .await;
    assert!(
        ["grace, expiry or a lease ran out", "events"]
            .contains(&line["trigger"].as_str().unwrap_or_default()),
        "{line}"
    );
    assert!(
        !sbx.volume_exists(&b.volume).await,
        "the expired box's volume stayed"
    );
    let codes: BTreeSet<String> = audit_lines(&audit)
        .iter()
        .map(|l| l["reason"]["code"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(codes, BTreeSet::from(["expired".to_string()]));
    eprintln!("box with ttl 4 s reaped {took:?} after it was made");
}

// ----- 4. the state file edited ---------------------------------------------------

/// A box declared by an edit of the state file made while watch runs is
/// protected from then on: it outlives its grace while a leak made with it
/// (proof that cycles ran) is reaped.
trial!(state_edit_declaring_a_box_protects_it);
async fn state_edit_declaring_a_box_protects_it() {
    let sbx = Sandbox::new("watch-edit").await;
    let cli = watch_cli(&sbx, &sbx.scope_toml()).args(["--grace", "3s"]);
    let (watcher, _) = start_ready(&cli, &[]).await;

    replace_state(&cli, &state_declaring(&sbx, &["fresh"]));
    watcher
        .wait_for("stateReloaded", |_| true, Duration::from_secs(10))
        .await;
    let made = Instant::now();
    let b = sbx.add_box("fresh", Run::Running).await;
    let leak = sbx.leaked_container(Run::Running).await;
    container_gone_within(&sbx, &leak.id, made, Duration::from_secs(3 + 1) + SLACK)
        .await
        .unwrap_or_else(|| panic!("leak not reaped\n{}", watcher.stderr()));
    // The cycle that reaped the leak came after both grace periods ended and
    // kept the declared box; more waiting changes nothing.
    watcher
        .wait_for("cycle", |l| l["removed"]["containers"] == 1, SLACK)
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        sbx.container_exists(&b.container.id).await && sbx.volume_exists(&b.volume).await,
        "declared box reaped\n{}",
        watcher.stderr()
    );
    assert!(
        watcher.events("stateBroken").is_empty(),
        "{}",
        watcher.stderr()
    );
    assert_eq!(
        removing_cycles(&watcher).iter().map(|c| c.1).sum::<u64>(),
        1,
        "only the leak goes\n{}",
        watcher.stderr()
    );
}

// ----- 5. a broken edit -------------------------------------------------------------

/// A broken edit of the state file is logged once (`stateBroken`, naming
/// file:line:col) and changes nothing: the last good state stays in force, so
/// the box it declares is kept and a leak is still reaped.
trial!(broken_state_edit_keeps_the_last_good_state);
async fn broken_state_edit_keeps_the_last_good_state() {
    let sbx = Sandbox::new("watch-broken").await;
    let cli = watch_cli(&sbx, &state_declaring(&sbx, &["kept"])).args(["--grace", "3s"]);
    let (watcher, _) = start_ready(&cli, &[]).await;

    // Line 6 has a ttl that is no duration: the file no longer validates.
    let broken = format!(
        "{}\n[[box]]\nid = \"kept\"\nttl = \"soon\"\n",
        sbx.scope_toml()
    );
    assert_eq!(broken.lines().nth(5), Some("ttl = \"soon\""));
    let path = replace_state(&cli, &broken);
    let line = watcher
        .wait_for("stateBroken", |_| true, Duration::from_secs(10))
        .await;
    let error = line["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with(&format!("{}:6:7: ttl \"", path.display())),
        "stateBroken does not name file:line:col: {line}"
    );
    assert!(error.contains("last good state"), "{line}");

    let made = Instant::now();
    let b = sbx.add_box("kept", Run::Running).await;
    let leak = sbx.leaked_container(Run::Running).await;
    container_gone_within(&sbx, &leak.id, made, Duration::from_secs(3 + 1) + SLACK)
        .await
        .unwrap_or_else(|| {
            panic!(
                "leak not reaped under the last good state\n{}",
                watcher.stderr()
            )
        });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        sbx.container_exists(&b.container.id).await,
        "the box the last good state declares was reaped\n{}",
        watcher.stderr()
    );
    assert_eq!(
        watcher.events("stateBroken").len(),
        1,
        "{}",
        watcher.stderr()
    );
    assert!(
        watcher.events("stateReloaded").is_empty(),
        "{}",
        watcher.stderr()
    );
    assert!(watcher.alive());
}

// ----- 6. the event stream cut ------------------------------------------------------

/// Points `link` at `target` atomically.
fn repoint(link: &Path, target: &Path) {
    let aside = link.with_extension("new");
    let _ = std::fs::remove_file(&aside);
    std::os::unix::fs::symlink(target, &aside).expect("make symlink");
    std::fs::rename(&aside, link).expect("swap symlink");
}

/// The event stream cut (the proxy carrying it stops, dropping every
/// connection) is noticed (`streamLost`), retried with backoff and back
/// (`streamBack`) once an engine answers again; the reconnect runs a full
/// cycle, so a leak made while the stream was down is reaped after its
/// grace, without waiting for the resync.
trial!(cut_event_stream_reconnects_and_catches_up);
async fn cut_event_stream_reconnects_and_catches_up() {
    let sbx = Sandbox::new("watch-stream").await;
    let sockets = tempfile::tempdir().expect("temp dir");
    let link = sockets.path().join("docker.sock");
    let first = Proxy::start();
    repoint(&link, first.socket());
    let cli = watch_cli(&sbx, &sbx.scope_toml())
        .docker_host(&format!("unix://{}", link.display()))
        .args(["--grace", "2s"]);
    let watcher = Watcher::start(&cli, &["--debounce", "1s", "--resync", RESYNC]);
    assert!(
        first.wait_for("GET", "/events", Duration::from_secs(20)),
        "watch never followed events\n{}",
        first.dump()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;

    let cut = Instant::now();
    drop(first);
    watcher
        .wait_for("streamLost", |_| true, Duration::from_secs(10))
        .await;
    let leak = sbx.leaked_container(Run::Running).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let second = Proxy::start();
    repoint(&link, second.socket());
    let back = watcher
        .wait_for("streamBack", |_| true, Duration::from_secs(20))
        .await;
    let lost_before_back = watcher
        .log()
        .iter()
        .position(|l| l["event"] == "streamLost")
        < watcher
            .log()
            .iter()
            .position(|l| l["event"] == "streamBack");
    assert!(lost_before_back, "{}", watcher.stderr());
    // "Back" means the new stream stayed open; its request may still be on its
    // way (the engine is reached lazily: first /_ping, then /events).
    assert!(
        second.wait_for("GET", "/events", Duration::from_secs(10)),
        "{}",
        second.dump()
    );

    let took = container_gone_within(&sbx, &leak.id, cut, Duration::from_secs(10) + SLACK)
        .await
        .unwrap_or_else(|| {
            panic!(
                "leak made while the stream was down not reaped\n{}",
                watcher.stderr()
            )
        });
    watcher
        .wait_for("cycle", |l| l["removed"]["containers"] == 1, SLACK)
        .await;
    let triggers: Vec<String> = removing_cycles(&watcher).into_iter().map(|c| c.0).collect();
    assert!(
        !triggers.iter().any(|t| t == "resync") && !triggers.is_empty(),
        "{triggers:?}"
    );
    assert!(watcher.alive());
    eprintln!(
        "stream back {back}; leak reaped {took:?} after the cut by cycles {triggers:?}; {} streamLost lines",
        watcher.events("streamLost").len()
    );
}

// ----- 7. SIGTERM during a cycle -----------------------------------------------------

/// SIGTERM while a cycle removes containers lets the removal in flight finish,
/// starts no other, verifies, prints the final report on stdout and exits
/// with that last cycle's status: 1, since the stop cut it short (a watch
/// stopped by SIGTERM exits 0 only when its last cycle converged).
/// The cycle is made long by a proxy that holds every container removal 2 s,
/// one at a time (`--parallelism 1`).
trial!(sigterm_during_a_cycle_finishes_in_flight_and_exits_with_its_cycles_status);
async fn sigterm_during_a_cycle_finishes_in_flight_and_exits_with_its_cycles_status() {
    let sbx = Sandbox::new("watch-sigterm").await;
    let proxy = Proxy::start();
    proxy
        .on("DELETE", "/containers/")
        .always()
        .delay(Duration::from_secs(2));
    let mut leaks = Vec::new();
    for _ in 0..4 {
        leaks.push(sbx.leaked_container(Run::Running).await);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let cli = watch_cli(&sbx, &sbx.scope_toml())
        .docker_host(&proxy.docker_host())
        .args(["--grace", "1s"]);
    let watcher = Watcher::start(
        &cli,
        &["--debounce", "1s", "--resync", RESYNC, "--parallelism", "1"],
    );
    assert!(
        proxy.wait_for("DELETE", "/containers/", Duration::from_secs(20)),
        "the first cycle removed nothing\n{}\n{}",
        proxy.dump(),
        watcher.stderr()
    );
    let signalled = Instant::now();
    watcher.signal(libc::SIGTERM);
    let out = watcher.terminate_after_signal();
    out.expect_code(1);
    let took = signalled.elapsed();

    let deletes = proxy.requests("DELETE", "/containers/");
    assert_eq!(
        deletes.len(),
        1,
        "removals started after SIGTERM:\n{}",
        proxy.dump()
    );
    let report = out.json();
    let removed: Vec<&str> = report["removed"]["containers"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(removed.len(), 1, "{}", out.dump());
    let mut still = 0;
    for leak in &leaks {
        let there = sbx.container_exists(&leak.id).await;
        assert_eq!(
            there,
            leak.name != removed[0],
            "{}: {}",
            leak.name,
            out.dump()
        );
        still += usize::from(there);
    }
    assert_eq!(still, 3);
    assert_eq!(report["interrupted"], true, "{}", out.dump());
    assert_eq!(report["converged"], false, "{}", out.dump());
    assert!(
        out.stderr.contains(r#""event":"stopping""#)
            && out.stderr.contains(r#""signal":"SIGTERM""#),
        "{}",
        out.dump()
    );
    eprintln!("SIGTERM to exit: {took:?} (removal in flight held 2 s)");
}

// ----- 8. the audit log -------------------------------------------------------------

/// `--audit FILE`: one JSON line per removal, keys in the documented order,
/// each naming the object as the engine knew it (id, name, labels, image for
/// containers) and why it went; the file is created 0600.
trial!(audit_log_has_one_line_per_removal);
async fn audit_log_has_one_line_per_removal() {
    let sbx = Sandbox::new("watch-audit").await;
    let leak = sbx.leaked_container(Run::Exited).await;
    let lone = sbx.leaked_volume().await;
    let b = sbx.add_box_with_network("gone", Run::Running).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;

    let cli = watch_cli(&sbx, &sbx.scope_toml()).args(["--grace", "2s"]);
    let audit = cli.dir().join("audit.jsonl");
    let audit_arg = audit.display().to_string();
    let (watcher, _) = start_ready(&cli, &["--audit", &audit_arg]).await;
    watcher.terminate().success();

    let mode = std::fs::metadata(&audit)
        .expect("audit file")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "audit file mode {mode:o}");
    let lines = audit_lines(&audit);
    let ids: BTreeMap<&str, &str> = BTreeMap::from([
        (leak.name.as_str(), leak.id.as_str()),
        (b.container.name.as_str(), b.container.id.as_str()),
        (b.network.name.as_str(), b.network.id.as_str()),
    ]);
    let mut seen = Vec::new();
    for line in &lines {
        let keys: Vec<&str> = line
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let name = line["name"].as_str().unwrap_or_default();
        let kind = line["kind"].as_str().unwrap_or_default();
        let expected_keys: &[&str] = match kind {
            "container" => &[
                "engine", "id", "image", "kind", "labels", "name", "outcome", "reason", "time",
            ],
            "network" => &[
                "engine", "id", "kind", "labels", "name", "outcome", "reason", "time",
            ],
            _ => &[
                "engine", "kind", "labels", "name", "outcome", "reason", "time",
            ],
        };
        // serde_json's map is sorted; the order in the file is checked below.
        assert_eq!(keys, expected_keys, "{line}");
        assert_eq!(line["id"].as_str(), ids.get(name).copied(), "{line}");
        let time = line["time"].as_str().unwrap_or_default();
        assert!(
            time.len() == 24 && time.ends_with('Z') && humantime::parse_rfc3339(time).is_ok(),
            "time is not RFC 3339 UTC with milliseconds: {line}"
        );
        assert!(
            !line["reason"]["text"]
                .as_str()
                .unwrap_or_default()
                .is_empty(),
            "{line}"
        );
        let labels: Vec<String> = line["labels"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| {
                let v = v.as_str().unwrap_or_default();
                let v = if v == sbx.scope_value() { "<scope>" } else { v };
                format!("{k}={v}")
            })
            .collect();
        let mut reason = line["reason"].as_object().unwrap().clone();
        reason.remove("text");
        seen.push(format!(
            "{kind} {} engine={} image={} labels=[{}] reason={} outcome={}",
            name.replace(sbx.scope_value(), "<scope>"),
            line["engine"].as_str().unwrap_or_default(),
            line["image"].as_str().map_or("-", |i| if i == TEST_IMAGE {
                "<test image>"
            } else {
                i
            }),
            labels.join(","),
            Value::Object(reason),
            line["outcome"].as_str().unwrap_or_default(),
        ));
    }
    // In the file, keys come in the documented order.
    for raw in std::fs::read_to_string(&audit).unwrap().lines() {
        let order = [
            "\"time\"",
            "\"engine\"",
            "\"kind\"",
            "\"name\"",
            "\"labels\"",
            "\"reason\"",
            "\"outcome\"",
        ];
        let at: Vec<usize> = order.iter().map(|k| raw.find(k).unwrap()).collect();
        assert!(
            at.windows(2).all(|w| w[0] < w[1]),
            "keys out of order: {raw}"
        );
    }
    seen.sort();
    insta::assert_snapshot!(seen.join("\n"), @r#"
    container <scope>-c0 engine=default image=<test image> labels=[ca.sandbox=1,ca.sandbox.test=<scope>] reason={"code":"noBoxLabel"} outcome=removed
    container <scope>-gone engine=default image=<test image> labels=[ca.sandbox=1,ca.sandbox.id=gone,ca.sandbox.test=<scope>] reason={"boxId":"gone","code":"boxNotDeclared"} outcome=removed
    network <scope>-gone-net engine=default image=- labels=[ca.sandbox=1,ca.sandbox.id=gone,ca.sandbox.test=<scope>] reason={"boxId":"gone","code":"boxNotDeclared"} outcome=removed
    volume <scope>-gone-data engine=default image=- labels=[ca.sandbox=1,ca.sandbox.id=gone,ca.sandbox.test=<scope>] reason={"boxId":"gone","code":"boxNotDeclared"} outcome=removed
    volume <scope>-v1 engine=default image=- labels=[ca.sandbox=1,ca.sandbox.test=<scope>] reason={"code":"noBoxLabel"} outcome=removed
    "#);
    assert!(!sbx.volume_exists(&lone).await && !sbx.volume_exists(&b.volume).await);
    assert!(!sbx.network_exists(&b.network.id).await);
}

// ----- 9. metrics -------------------------------------------------------------------

/// One metric series' value from OpenMetrics text, by its exact series name
/// (`name{labels}` as encoded).
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (name, value) = l.rsplit_once(' ')?;
        (name == series).then(|| value.parse().ok()).flatten()
    })
}

/// `--metrics ADDR`: `/metrics` counts what happened (removals by kind and
/// outcome, cycles by result) and `/healthz` answers 200 after a converged cycle.
trial!(metrics_count_what_happened);
async fn metrics_count_what_happened() {
    let sbx = Sandbox::new("watch-metrics").await;
    let running = sbx.leaked_container(Run::Running).await;
    let exited = sbx.leaked_container(Run::Exited).await;
    let volume = sbx.leaked_volume().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let cli = watch_cli(&sbx, &sbx.scope_toml()).args(["--grace", "1s"]);
    let (watcher, addr) = start_ready(&cli, &[]).await;
    watcher
        .wait_for(
            "cycle",
            |l| l["removed"]["containers"] == 2,
            Duration::from_secs(10),
        )
        .await;
    let (status, body) = http_get(&addr, "/metrics").expect("scrape /metrics");
    assert_eq!(status, 200, "{body}");
    let removals = |kind: &str, outcome: &str| {
        metric(
            &body,
            &format!("sandboxctl_removals_total{{kind=\"{kind}\",outcome=\"{outcome}\"}}"),
        )
    };
    assert_eq!(removals("container", "removed"), Some(2.0), "{body}");
    assert_eq!(removals("volume", "removed"), Some(1.0), "{body}");
    assert_eq!(removals("network", "removed").unwrap_or(0.0), 0.0, "{body}");
    assert_eq!(
        removals("container", "failed").unwrap_or(0.0),
        0.0,
        "{body}"
    );
    let converged = metric(&body, "sandboxctl_cycles_total{result=\"converged\"}").unwrap_or(0.0);
    assert!(converged >= 1.0, "{body}");
    assert_eq!(
        metric(&body, "sandboxctl_cycles_total{result=\"failed\"}").unwrap_or(0.0),
        0.0,
        "{body}"
    );
    assert_eq!(
        metric(&body, "sandboxctl_cycle_duration_seconds_count"),
        Some(converged),
        "{body}"
    );
    assert!(
        metric(&body, "sandboxctl_last_converged_cycle_age_seconds").is_some(),
        "{body}"
    );
    assert!(
        body.trim_end().ends_with("# EOF"),
        "not OpenMetrics: {body}"
    );

    let (status, health) = http_get(&addr, "/healthz").expect("GET /healthz");
    assert_eq!(status, 200, "{health}");
    assert!(health.contains("converged"), "{health}");
    let (status, _) = http_get(&addr, "/nothing").expect("GET /nothing");
    assert_eq!(status, 404);
    for gone in [&running.id, &exited.id] {
        assert!(!sbx.container_exists(gone).await);
    }
    assert!(!sbx.volume_exists(&volume).await);
    watcher.terminate().success();
    // The server stops with watch.
    assert!(
        http_get(&addr, "/healthz").is_err(),
        "metrics still served after exit"
    );
}

/// The descriptor limit of the flooded watch (`ulimit -n`).
const FLOOD_NOFILE: u64 = 256;
/// Idle connections the flood keeps open to the metrics port.
const FLOOD_CONNECTIONS: usize = 320;
/// Connections the metrics endpoint serves at once at most (its cap).
const METRICS_CONNECTION_CAP: usize = 32;
/// The longest a flood runs, whatever the test does.
const FLOOD_DEADLINE: Duration = Duration::from_secs(90);

/// Keeps `connections` idle connections open to `addr` (loopback only),
/// opening again each one the server closed (looked at every 0.2 s), until
/// `stop` or [`FLOOD_DEADLINE`], at most 20 connects per connection in all. `open`
/// counts those open now. Returns the number of connects made.
async fn flood(
    addr: std::net::SocketAddr,
    connections: usize,
    stop: Arc<AtomicBool>,
    open: Arc<AtomicU64>,
) -> usize {
    assert!(addr.ip().is_loopback(), "the flood goes to loopback only");
    let mut streams: Vec<Option<tokio::net::TcpStream>> = (0..connections).map(|_| None).collect();
    let (started, mut connects) = (Instant::now(), 0);
    let mut buf = [0u8; 512];
    while !stop.load(Ordering::SeqCst) && started.elapsed() < FLOOD_DEADLINE {
        // Closed by the server (end of stream, a reset) or never opened.
        let closed: Vec<usize> = streams
            .iter_mut()
            .enumerate()
            .filter(|(_, slot)| match slot {
                Some(stream) => match stream.try_read(&mut buf) {
                    Ok(0) => true,
                    Ok(_) => false,
                    Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
                },
                None => true,
            })
            .map(|(i, _)| i)
            .take((20 * connections).saturating_sub(connects))
            .collect();
        connects += closed.len();
        let opened = futures_util::future::join_all(closed.iter().map(|_| async {
            tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(addr))
                .await
                .ok()
                .and_then(Result::ok)
        }))
        .await;
        for (i, stream) in closed.into_iter().zip(opened) {
            streams[i] = stream;
        }
        open.store(
            streams.iter().filter(|s| s.is_some()).count() as u64,
            Ordering::SeqCst,
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    connects
}

/// The TCP connections process `pid` holds on local port `port`, its
/// listener left out: its sockets' inodes found in /proc/net/tcp{,6}.
/// Connections on `port` that process `pid` holds, read twice: the fd list
/// and the TCP table are read one after the other, so a connection closed
/// and another accepted in between can count once too many in one reading;
/// a real excess shows in both.
fn held_on_port(pid: u32, port: u16) -> usize {
    connections_on_port(pid, port).min(connections_on_port(pid, port))
}

fn connections_on_port(pid: u32, port: u16) -> usize {
    let inodes: BTreeSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter_map(|link| {
                    let link = link.to_string_lossy().into_owned();
                    Some(
                        link.strip_prefix("socket:[")?
                            .strip_suffix(']')?
                            .to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let mut held = 0;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = fields
                .get(1)
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            // State 0A is LISTEN.
            if local_port == Some(port)
                && fields.get(3) != Some(&"0A")
                && fields.get(9).is_some_and(|i| inodes.contains(*i))
            {
                held += 1;
            }
        }
    }
    held
}

/// Open descriptors of process `pid`.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// `watch --metrics` under `ulimit -n 256`, with hundreds of idle connections
/// kept open to its metrics port for 13 s: the endpoint holds at most its
/// cap of them (those past it, or past its idle share, it closes at once)
/// and closes the idle ones at its 2 s first-request deadline, every cycle
/// still reaches the engine,
/// and a leak made during the flood is reaped in time (grace 2 s, within
/// 15 s). After the flood the endpoint answers again.
trial!(idle_metrics_connections_under_ulimit_256_never_stop_the_reaping);
async fn idle_metrics_connections_under_ulimit_256_never_stop_the_reaping() {
    let sbx = Sandbox::new("watch-metrics-flood").await;
    let cli = watch_cli(&sbx, &sbx.scope_toml())
        .args(["--grace", "2s"])
        .nofile(FLOOD_NOFILE);
    let (watcher, addr) = start_ready(&cli, &[]).await;
    let pid = watcher.pid();
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("read limits");
    let nofile = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("Max open files in /proc/PID/limits");
    assert_eq!(
        nofile.split_whitespace().nth(3),
        Some(FLOOD_NOFILE.to_string().as_str()),
        "{nofile}"
    );
    let socket: std::net::SocketAddr = addr.parse().expect("metrics address");
    let before = open_fds(pid);

    let (stop, open) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let flood_started = Instant::now();
    let flooding = tokio::spawn(flood(
        socket,
        FLOOD_CONNECTIONS,
        Arc::clone(&stop),
        Arc::clone(&open),
    ));
    let until = Instant::now() + Duration::from_secs(30);
    while open.load(Ordering::SeqCst) < FLOOD_CONNECTIONS as u64 {
        assert!(
            Instant::now() < until,
            "only {} connections opened",
            open.load(Ordering::SeqCst)
        );
        tokio::time::sleep(POLL).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;

    let made = Instant::now();
    let leak = sbx.leaked_container(Run::Running).await;
    let (mut held_max, mut fds_max) = (0, 0);
    let took = loop {
        held_max = held_max.max(held_on_port(pid, socket.port()));
        fds_max = fds_max.max(open_fds(pid));
        if !sbx.container_exists(&leak.id).await {
            break made.elapsed();
        }
        assert!(
            made.elapsed() < Duration::from_secs(15),
            "leak {} still there {:?} after it was made under the flood ({} connections open, {held_max} held by watch, {fds_max} descriptors)\n--- stderr\n{}",
            leak.name,
            made.elapsed(),
            open.load(Ordering::SeqCst),
            watcher.stderr()
        );
        tokio::time::sleep(POLL).await;
    };
    let flooded = open.load(Ordering::SeqCst);
    // Several first-request deadlines: the idle connections it held are
    // closed, the flood opens them again, the cap still holds.
    while flood_started.elapsed() < Duration::from_secs(13) {
        held_max = held_max.max(held_on_port(pid, socket.port()));
        fds_max = fds_max.max(open_fds(pid));
        tokio::time::sleep(POLL).await;
    }
    stop.store(true, Ordering::SeqCst);
    let connects = flooding.await.expect("flood task");
    assert!(
        held_max <= METRICS_CONNECTION_CAP,
        "watch held {held_max} metrics connections"
    );
    assert!(
        connects > FLOOD_CONNECTIONS,
        "no idle connection was closed by the server ({connects} connects)"
    );
    assert!(
        watcher.events("cycleFailed").is_empty(),
        "a cycle failed under the flood\n--- stderr\n{}",
        watcher.stderr()
    );
    // The flood's connections are gone: the endpoint answers again.
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok((200, _)) = http_get(&addr, "/healthz") {
            break;
        }
        assert!(
            Instant::now() < until,
            "/healthz never answered after the flood\n--- stderr\n{}",
            watcher.stderr()
        );
        tokio::time::sleep(POLL).await;
    }
    assert!(watcher.alive(), "watch exited\n{}", watcher.stderr());
    watcher.terminate().success();
    eprintln!(
        "leak reaped {took:?} after it was made, under {flooded} idle metrics connections ({connects} connects); watch held at most {held_max} of them and {fds_max} descriptors ({before} before the flood; ulimit -n {FLOOD_NOFILE})"
    );
}

/// Idle connections a new user's tool holds open to the metrics port in the
/// probe test.
const PROBE_FLOOD_CONNECTIONS: usize = 400;
/// How long `/healthz` and `/metrics` may take to answer under that flood.
const PROBE_WITHIN: Duration = Duration::from_secs(2);
/// How long the probes go on under the flood: past the endpoint's first-
/// request and keep-alive deadlines several times over, so the flood's
/// connections are closed and opened again while the probes run.
const PROBE_FLOOD_FOR: Duration = Duration::from_secs(14);

/// `GET path` on a fresh connection to `addr`, given `within` to answer in
/// full: `(status, how long it took)`, or what went wrong.
async fn timed_get(
    addr: std::net::SocketAddr,
    path: &str,
    within: Duration,
) -> Result<(u16, Duration), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let started = Instant::now();
    let answer = tokio::time::timeout(within, async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(
                format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    })
    .await
    .map_err(|_| format!("GET {path}: no answer within {within:?}"))?
    .map_err(|e| format!("GET {path}: {e} after {:?}", started.elapsed()))?;
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("GET {path}: no status line in {text:?}"))?;
    Ok((status, started.elapsed()))
}

/// What a new user tried: `watch --metrics 127.0.0.1:0` (the address read
/// from its `started` line) with 400 idle connections held open to the
/// metrics port, every one the server closes opened again at once. Fresh
/// `/healthz` and `/metrics` requests, four a second for 14 s, each answer
/// in full within 2 s: a connection that sends no request is closed at its
/// short first-request deadline, one past the cap at once, and the health
/// probe still finds a slot. The watch holds at most its cap of the flood's
/// connections and no cycle fails.
trial!(healthz_and_metrics_answer_within_2s_under_400_idle_connections);
async fn healthz_and_metrics_answer_within_2s_under_400_idle_connections() {
    let sbx = Sandbox::new("watch-metrics-probe-flood").await;
    let cli = watch_cli(&sbx, &sbx.scope_toml()).args(["--grace", "2s"]);
    let debounce = format!("{}s", DEBOUNCE.as_secs());
    let watcher = Watcher::start(
        &cli,
        &[
            "--debounce",
            &debounce,
            "--resync",
            RESYNC,
            "--metrics",
            "127.0.0.1:0",
        ],
    );
    let started = watcher
        .wait_for("started", |_| true, Duration::from_secs(30))
        .await;
    let addr = started["metrics"]
        .as_str()
        .unwrap_or_else(|| panic!("no metrics address in {started}"))
        .to_string();
    wait_healthy(&watcher, &addr).await;
    let socket: std::net::SocketAddr = addr.parse().expect("metrics address");
    let pid = watcher.pid();

    let (stop, open) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let flooding = tokio::spawn(flood(
        socket,
        PROBE_FLOOD_CONNECTIONS,
        Arc::clone(&stop),
        Arc::clone(&open),
    ));
    let until = Instant::now() + Duration::from_secs(30);
    while open.load(Ordering::SeqCst) < PROBE_FLOOD_CONNECTIONS as u64 {
        assert!(
            Instant::now() < until,
            "only {} connections opened",
            open.load(Ordering::SeqCst)
        );
        tokio::time::sleep(POLL).await;
    }

    let probing = Instant::now();
    let (mut slowest, mut probes, mut held_max) = (Duration::ZERO, 0, 0);
    let mut failures = Vec::new();
    while probing.elapsed() < PROBE_FLOOD_FOR {
        for path in ["/healthz", "/metrics"] {
            probes += 1;
            match timed_get(socket, path, PROBE_WITHIN).await {
                Ok((200, took)) => slowest = slowest.max(took),
                Ok((status, took)) => failures.push(format!(
                    "{:?} in: GET {path}: {status} after {took:?}",
                    probing.elapsed()
                )),
                Err(e) => failures.push(format!("{:?} in: {e}", probing.elapsed())),
            }
        }
        held_max = held_max.max(held_on_port(pid, socket.port()));
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let flooded = open.load(Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    let connects = flooding.await.expect("flood task");
    assert!(
        failures.is_empty(),
        "{} of {probes} probes under {flooded} idle connections got no 200 within {PROBE_WITHIN:?}:\n{}\n--- stderr\n{}",
        failures.len(),
        failures.join("\n"),
        watcher.stderr()
    );
    assert!(
        held_max <= METRICS_CONNECTION_CAP,
        "watch held {held_max} metrics connections"
    );
    assert!(
        connects > PROBE_FLOOD_CONNECTIONS,
        "the server closed none of the idle connections ({connects} connects)"
    );
    assert!(
        watcher.events("cycleFailed").is_empty(),
        "a cycle failed under the flood\n--- stderr\n{}",
        watcher.stderr()
    );
    assert!(watcher.alive(), "watch exited\n{}", watcher.stderr());
    watcher.terminate().success();
    eprintln!(
        "{probes} probes answered 200 under {flooded} idle metrics connections ({connects} connects), the slowest in {slowest:?}; watch held at most {held_max} of them"
    );
}

/// `health` asks a running watch's `/healthz`: exit 0 and `healthy: ...`
/// while it converges, with the address from `SANDBOXCTL_METRICS`, which
/// the watch serves too (as in the image), or given as ADDR; exit 1 and
/// what to do when nothing listens; exit 2 for an invalid invocation (no
/// address at all, a bad one, a zero deadline). It needs no engine: the
/// runs point `DOCKER_HOST` at nothing.
trial!(health_exits_0_on_a_healthy_watch_1_when_nothing_answers_2_when_invalid);
async fn health_exits_0_on_a_healthy_watch_1_when_nothing_answers_2_when_invalid() {
    let sbx = Sandbox::new("watch-health").await;
    let addr = format!("127.0.0.1:{}", free_port());
    let cli = watch_cli(&sbx, &sbx.scope_toml())
        .args(["--grace", "2s"])
        .env("SANDBOXCTL_METRICS", &addr);
    let debounce = format!("{}s", DEBOUNCE.as_secs());
    let watcher = Watcher::start(&cli, &["--debounce", &debounce, "--resync", RESYNC]);
    wait_healthy(&watcher, &addr).await;

    let health = || Cli::new().unreachable_docker();
    let out = health()
        .env("SANDBOXCTL_METRICS", &addr)
        .run_with(["health"]);
    out.success();
    assert!(
        out.stdout.starts_with("healthy: last cycle converged ")
            && out
                .stdout
                .ends_with(&format!("(http://{addr}/healthz: 200)\n")),
        "{}",
        out.dump()
    );
    let out = health().json().run_with(["health", &addr]);
    out.success();
    let answer = out.json();
    assert_eq!(answer["healthy"], true, "{answer}");
    assert_eq!(answer["degraded"], false, "{answer}");
    assert_eq!(answer["status"], 200, "{answer}");

    let nobody = format!("127.0.0.1:{}", free_port());
    let out = health().run_with(["health", &nobody]);
    out.expect_code(1);
    assert!(
        out.stdout
            .starts_with(&format!("unhealthy: nothing listens on {nobody}")),
        "{}",
        out.dump()
    );
    for invalid in [
        vec!["health"],
        vec!["health", "localhost:9464"],
        vec!["health", &addr, "--deadline", "0s"],
    ] {
        let out = health().run_with(&invalid);
        out.expect_code(2);
        assert!(out.stdout.is_empty(), "{}", out.dump());
    }
    watcher.terminate().success();
}

// ----- 10. no grace; --once ---------------------------------------------------------

/// `watch` without a grace period refuses to start (exit 1) and says to pass
/// `--grace`; it reaches no engine.
trial!(watch_without_grace_refuses_to_start);
fn watch_without_grace_refuses_to_start() {
    let cli = Cli::new()
        .scope("ca.sandbox.test=watch-no-grace")
        .state_toml("")
        .unreachable_docker();
    let out = cli.run_with(["watch"]);
    out.expect_code(1);
    assert!(out.stderr.contains("--grace"), "{}", out.dump());
    assert!(out.stdout.is_empty(), "{}", out.dump());
    assert!(
        !out.stderr.contains("no-docker.sock"),
        "reached for the engine: {}",
        out.dump()
    );
}

/// `watch --once` runs one cycle and exits like `apply`: 0 with the report
/// when it converged (young objects kept), 1 when a removal failed.
trial!(watch_once_runs_one_cycle_and_exits_like_apply);
async fn watch_once_runs_one_cycle_and_exits_like_apply() {
    let sbx = Sandbox::new("watch-once").await;
    let old = sbx.leaked_container(Run::Exited).await;
    tokio::time::sleep(Duration::from_millis(5500)).await;
    let young = sbx.leaked_container(Run::Exited).await;
    let once = |grace: &str| {
        sbx.cli()
            .json()
            .state_toml(&sbx.scope_toml())
            .args(["--grace", grace])
    };
    let out = once("5s").run_with(["watch", "--once"]);
    out.success();
    let report = out.json();
    assert_eq!(report["converged"], true, "{}", out.dump());
    assert_eq!(
        report["removed"]["containers"][0]["name"],
        old.name.as_str(),
        "{}",
        out.dump()
    );
    assert_eq!(
        report["kept"]["containers"][0]["name"],
        young.name.as_str(),
        "{}",
        out.dump()
    );
    assert_eq!(
        report["kept"]["containers"][0]["reason"]["code"],
        "withinGrace"
    );
    assert!(!sbx.container_exists(&old.id).await && sbx.container_exists(&young.id).await);
    assert!(
        out.elapsed < Duration::from_secs(30),
        "--once did not exit at once"
    );

    // A failed removal (the young one, past a shorter grace): exit 1, as apply.
    // Creation times are whole seconds: wait until a 1 s grace has surely passed.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let proxy = Proxy::start();
    proxy
        .on("DELETE", "/containers/")
        .always()
        .respond(500, "disk on fire");
    let failing = once("1s").docker_host(&proxy.docker_host());
    let once = failing.run_with(["watch", "--once"]);
    once.expect_code(1);
    let apply = failing.run_with(["apply"]);
    apply.expect_code(1);
    for out in [&once, &apply] {
        let report = out.json();
        assert_eq!(report["converged"], false, "{}", out.dump());
        assert_eq!(
            report["failures"].as_array().map(Vec::len),
            Some(1),
            "{}",
            out.dump()
        );
    }
    assert!(sbx.container_exists(&young.id).await);
}

// ----- soak -------------------------------------------------------------------------

/// The soak's grace, seconds.
const SOAK_GRACE: u64 = 20;
/// How often the soak starts a driver that holds its box.
const DRIVER_EVERY: Duration = Duration::from_secs(10);
/// A driver's lease ttl, seconds: random in this range (hold renews every ttl/3).
const DRIVER_TTL: (u64, u64) = (6, 12);
/// A driver's lifetime (its command, `sleep`), seconds: random in this range,
/// longer than the soak's grace.
const DRIVER_LIFETIME: (u64, u64) = (25, 90);
/// How long past its last lease's end (a killed driver) or its hold's release
/// (a driver whose command ended), beyond the debounce, a dead driver's box
/// may take to be gone: the bound docs/leases.md gives.
const REAP_BUDGET: Duration = Duration::from_secs(3);
/// The seed of the drivers' ttls, lifetimes and kill moments unless
/// `SOAK_SEED` says otherwise: a run is the same drivers for the same seed.
const DEFAULT_SOAK_SEED: u64 = 1;

/// What the soak made: one record per object.
struct Made {
    kind: &'static str,
    name: String,
    box_id: Option<String>,
    declared: bool,
    at: SystemTime,
    /// The driver holding its box, if one.
    driver: Option<usize>,
}

/// SplitMix64: the soak's seeded, deterministic random numbers.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// How a driver ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum DriverEnd {
    /// Its command ended: hold released the lease and exited 0.
    Released,
    /// The hold was SIGKILLed (its command too): nothing released.
    Killed,
    /// Still running when the soak ended; then stopped with SIGTERM, which
    /// hold passes on to its command before it releases.
    AliveAtEnd,
}

/// One object of a driver's box: kind, name, and ID (a volume's is its name).
#[derive(Debug, Clone)]
struct HeldObject {
    kind: &'static str,
    name: String,
    id: String,
}

/// What the audit log removed of a driver's box: names, the last of the
/// box's own objects (Unix ms), and each lease volume with its time.
#[derive(Debug, Clone, Default)]
struct HeldReaped {
    names: BTreeSet<String>,
    box_last: Option<i64>,
    leases: Vec<(String, i64)>,
}

/// A driver: a box, and `sandboxctl hold BOX --ttl TTL -- sleep LIFETIME`.
struct Driver {
    box_id: String,
    /// The box's objects as made (its lease volumes not included).
    objects: Vec<HeldObject>,
    ttl: u64,
    lifetime: u64,
    /// When (after `started_at`) the hold is SIGKILLed; `None`: its command
    /// runs to its end.
    kill_after: Option<Duration>,
    /// Just before the box was made (this machine's clock).
    made_at: SystemTime,
    /// When the box was made and the hold spawned (this machine's clock).
    started: SystemTime,
    started_at: Instant,
    /// The hold until it is waited for.
    hold: Option<Guarded>,
    hold_pid: u32,
    /// The hold's command, once seen.
    sleep: Option<u32>,
    /// How and when it ended (the kill; the hold's exit as seen, polled every 50 ms).
    end: Option<(DriverEnd, SystemTime)>,
    /// The hold's exit code (`None`: a signal ended it) and stderr, once waited for.
    code: Option<Option<i32>>,
    stderr: String,
    /// A killed driver's last lease end (Unix s, the engine's clock, which is
    /// this machine's here) and the leases it left, read just after the kill.
    lease_end: Option<i64>,
    leases_left: Vec<Listed>,
    problems: Vec<String>,
}

impl Driver {
    /// Prefix of its lease volumes' names.
    fn lease_prefix(&self) -> String {
        format!("{LEASE_PREFIX}{}-", self.box_id)
    }

    /// The JSON lines of its hold's stderr with `event` (each checked
    /// against `hold-line.schema.json`).
    fn hold_events(&self, event: &str) -> Vec<Value> {
        crate::support::schema::check_lines("hold-line", &self.stderr, "hold's stderr")
            .into_iter()
            .filter(|l| l["event"] == event)
            .collect()
    }
}

/// The soak's drivers, shared with their tasks.
type Drivers = Arc<Mutex<Vec<Driver>>>;

fn lock(drivers: &Drivers) -> MutexGuard<'_, Vec<Driver>> {
    drivers.lock().unwrap_or_else(|e| e.into_inner())
}

/// SIGKILL to `pid` if it still lives (gone is no error).
fn kill_if_alive(pid: u32) {
    if let (true, Ok(pid)) = (pid_alive(pid), libc::pid_t::try_from(pid)) {
        // SAFETY: kill(2) on a pid this test started; no memory involved.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// Ends, when dropped, every hold still running and its command, by pid.
/// Made after the `Sandbox`, so it is dropped before the sandbox cleans up:
/// a hold still running would make a new lease after the cleanup.
struct HoldsGuard(Drivers);

impl Drop for HoldsGuard {
    fn drop(&mut self) {
        let holds: Vec<(Option<Guarded>, Option<u32>)> = lock(&self.0)
            .iter_mut()
            .map(|d| (d.hold.take(), d.sleep))
            .collect();
        for (hold, sleep) in holds {
            // SIGKILL to its descendants and itself, by pid; then reaped.
            drop(hold);
            if let Some(pid) = sleep {
                kill_if_alive(pid);
            }
        }
    }
}

/// A task's failure in words (its panic message when it panicked).
fn task_failure(e: tokio::task::JoinError) -> String {
    if !e.is_panic() {
        return e.to_string();
    }
    let panic = e.into_panic();
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic".to_string())
}

/// Starts driver `n`: makes its box (a network with every other pair of
/// drivers), then `sandboxctl hold BOX --ttl TTL -- sleep LIFETIME`. Every
/// other driver is to be SIGKILLed at a random moment past the grace and
/// before its command would end.
async fn start_driver(sbx: &Sandbox, n: usize, rng: &mut SplitMix64) -> Driver {
    let ttl = rng.between(DRIVER_TTL.0, DRIVER_TTL.1);
    let lifetime = rng.between(DRIVER_LIFETIME.0, DRIVER_LIFETIME.1);
    let kill_after =
        (n % 2 == 1).then(|| Duration::from_secs(rng.between(SOAK_GRACE + 1, lifetime - 2)));
    let box_id = format!("held{n}-{}", sbx.scope_value());
    let made_at = SystemTime::now();
    let objects = if n % 4 < 2 {
        let b = sbx.add_box(&box_id, Run::Running).await;
        vec![
            HeldObject {
                kind: "container",
                name: b.container.name,
                id: b.container.id,
            },
            HeldObject {
                kind: "volume",
                name: b.volume.clone(),
                id: b.volume,
            },
        ]
    } else {
        let b = sbx.add_box_with_network(&box_id, Run::Running).await;
        vec![
            HeldObject {
                kind: "container",
                name: b.container.name,
                id: b.container.id,
            },
            HeldObject {
                kind: "volume",
                name: b.volume.clone(),
                id: b.volume,
            },
            HeldObject {
                kind: "network",
                name: b.network.name,
                id: b.network.id,
            },
        ]
    };
    let (ttl_arg, life_arg) = (format!("{ttl}s"), lifetime.to_string());
    let started = SystemTime::now();
    let started_at = Instant::now();
    let hold = sbx
        .cli()
        .json()
        .state_toml(&sbx.scope_toml())
        .deadline(CHILD_DEADLINE)
        .spawn_guarded(["hold", &box_id, "--ttl", &ttl_arg, "--", "sleep", &life_arg]);
    Driver {
        box_id,
        objects,
        ttl,
        lifetime,
        kill_after,
        made_at,
        started,
        started_at,
        hold_pid: hold.pid(),
        hold: Some(hold),
        sleep: None,
        end: None,
        code: None,
        stderr: String::new(),
        lease_end: None,
        leases_left: Vec::new(),
        problems: Vec::new(),
    }
}

/// Driver `n` until it ends: its command ends (the hold exits), or it is
/// SIGKILLed as planned (hold and command, by pid), or the soak ends
/// (`stop`; it is left running for the soak to judge).
async fn drive(drivers: Drivers, n: usize, docker: Docker, scope: String, stop: Arc<AtomicBool>) {
    let (pid, started_at, kill_after) = {
        let d = &lock(&drivers)[n];
        (d.hold_pid, d.started_at, d.kill_after)
    };
    let mut sleep = None;
    let kind = loop {
        if sleep.is_none() {
            sleep = descendants_named(pid, "sleep").first().copied();
            if sleep.is_some() {
                lock(&drivers)[n].sleep = sleep;
            }
        }
        if !pid_alive(pid) {
            break DriverEnd::Released;
        }
        if stop.load(Ordering::SeqCst) {
            return;
        }
        if kill_after.is_some_and(|k| started_at.elapsed() >= k) {
            // The hold is our child, unreaped: its pid is still its own.
            signal_pid(pid, libc::SIGKILL);
            // Its command lives on with the hold's output pipes: end it too.
            match sleep {
                Some(s) => kill_if_alive(s),
                None => lock(&drivers)[n]
                    .problems
                    .push("its hold had no `sleep` to kill".into()),
            }
            break DriverEnd::Killed;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    conclude(&drivers, n, kind, SystemTime::now(), &docker, &scope).await;
}

/// Records that driver `n` ended (`kind`, at `at`), waits for its hold, and
/// for a killed one reads its leases left just after (`CreatedAt` + ttl).
async fn conclude(
    drivers: &Drivers,
    n: usize,
    kind: DriverEnd,
    at: SystemTime,
    docker: &Docker,
    scope: &str,
) {
    let (hold, box_id) = {
        let d = &mut lock(drivers)[n];
        d.end = Some((kind, at));
        (d.hold.take(), d.box_id.clone())
    };
    if let Some(hold) = hold {
        match tokio::task::spawn_blocking(move || hold.wait()).await {
            Ok(out) => {
                let d = &mut lock(drivers)[n];
                d.code = Some(out.code);
                d.stderr = out.stderr;
                // Its output reached its end, so its command, which held the
                // same pipes, is gone: its pid is no longer ours to signal.
                d.sleep = None;
            }
            Err(e) => lock(drivers)[n]
                .problems
                .push(format!("waiting for its hold: {}", task_failure(e))),
        }
    }
    if kind == DriverEnd::Killed {
        // A call the hold had in flight lands first.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let leases = leases_of(docker, scope, &box_id).await;
        let d = &mut lock(drivers)[n];
        d.lease_end = leases.iter().filter_map(Listed::ends).max();
        d.leases_left = leases;
        if d.lease_end.is_none() {
            d.problems
                .push("no lease of its box left just after its hold was killed".into());
        }
    }
}

/// Lease-volume events of the held boxes (volume names holding `tag`), as
/// the engine streams them: `(Unix ns, action, volume)`, deduplicated.
type LeaseEvents = Arc<Mutex<BTreeSet<(i64, String, String)>>>;

/// Follows the engine's volume events for the whole soak, reconnecting
/// (from the last event's second) whenever the stream ends.
async fn follow_lease_events(
    docker: Docker,
    tag: String,
    seen: LeaseEvents,
    reconnects: Arc<AtomicU64>,
) {
    let mut since = local_now();
    loop {
        let filters = HashMap::from([("type", vec!["volume"])]);
        let from = since.to_string();
        let mut stream = Box::pin(
            docker.events(Some(
                EventsOptionsBuilder::new()
                    .since(&from)
                    .filters(&filters)
                    .build(),
            )),
        );
        while let Some(Ok(event)) = stream.next().await {
            if let Some(t) = event.time {
                since = t;
            }
            let name = event.actor.and_then(|a| a.id).unwrap_or_default();
            if name.starts_with(LEASE_PREFIX) && name.contains(&tag) {
                seen.lock().unwrap_or_else(|e| e.into_inner()).insert((
                    event.time_nano.unwrap_or_default(),
                    event.action.unwrap_or_default(),
                    name,
                ));
            }
        }
        reconnects.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// This machine's 1-minute load average (`/proc/loadavg`), 0 if unreadable.
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// Unix milliseconds of `t`.
fn unix_ms(t: SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// `(max, median)` of `values` in seconds, or `None` when there are none.
fn max_median(values: &[i64]) -> Option<(f64, f64)> {
    let mut v = values.to_vec();
    v.sort_unstable();
    let max = *v.last()?;
    let mid = v.len() / 2;
    let median = if v.len().is_multiple_of(2) {
        (v[mid - 1] + v[mid]) as f64 / 2.0
    } else {
        v[mid] as f64
    };
    Some((max as f64 / 1000.0, median / 1000.0))
}

/// `max X s, median Y s (n N)`, or `none`.
fn figures(values: &[i64]) -> String {
    max_median(values).map_or_else(
        || "none".to_string(),
        |(max, median)| format!("max {max:.2} s, median {median:.2} s (n {})", values.len()),
    )
}

/// Ten minutes (`SOAK_MINUTES`) of boxes made and abandoned under one watch
/// with a 20 s grace: most undeclared (leaked containers, boxes with a
/// volume, some with a network), one in ten declared by an edit of the state
/// file made just before. Alongside, every 10 s a driver makes a box and holds
/// it (`sandboxctl hold BOX --ttl 6-12s -- sleep 25-90`, seeded by
/// `SOAK_SEED`): every other one runs its command to its end (hold releases),
/// the others are SIGKILLed at a random moment past the grace (no release);
/// those still running at the end are checked there, then stopped with
/// SIGTERM (hold releases).
///
/// At the end nothing undeclared older than grace + margin is left, every
/// declared object is still there, and every line of the audit log is a
/// removal of an undeclared object past its grace, or of a held box's object
/// (`boxNotDeclared`) never before its driver ended (nor, for a killed one,
/// before its last lease's end). Every killed driver's box is gone within
/// debounce + 3 s of its last lease's end, every released one's within
/// debounce + 3 s of its release. Prints the drivers' figures and the watch
/// process's RSS over time.
trial!(
    soak_watch_reaps_only_abandoned_boxes,
    worker_threads = 2,
    ignore = "soak: 10 minutes; run with `cargo test --test sandboxctl -- --ignored soak`"
);
async fn soak_watch_reaps_only_abandoned_boxes() {
    const GRACE: u64 = SOAK_GRACE;
    const MARGIN: u64 = 15;
    let minutes: u64 = std::env::var("SOAK_MINUTES")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(10);
    let seed: u64 = std::env::var("SOAK_SEED").map_or(DEFAULT_SOAK_SEED, |s| {
        s.parse()
            .unwrap_or_else(|_| panic!("SOAK_SEED={s:?} is not a whole number"))
    });
    let sbx = Sandbox::new("watch-soak").await;
    // Dropped before `sbx`: no hold outlives the test, even on failure.
    let drivers: Drivers = Arc::new(Mutex::new(Vec::new()));
    let _holds = HoldsGuard(Arc::clone(&drivers));
    let stop = Arc::new(AtomicBool::new(false));
    let mut rng = SplitMix64(seed);
    let mut driver_tasks = Vec::new();
    let lease_events: LeaseEvents = Arc::default();
    let event_reconnects = Arc::new(AtomicU64::new(0));
    let follower = tokio::spawn(follow_lease_events(
        sbx.docker().clone().with_timeout(CHILD_DEADLINE),
        sbx.scope_value().to_string(),
        Arc::clone(&lease_events),
        Arc::clone(&event_reconnects),
    ));

    let mut declared_ids: Vec<String> = Vec::new();
    let cli = watch_cli(&sbx, &sbx.scope_toml()).args(["--grace", &format!("{GRACE}s")]);
    let audit = cli.dir().join("audit.jsonl");
    let audit_arg = audit.display().to_string();
    let (watcher, addr) = start_ready(&cli, &["--audit", &audit_arg]).await;

    let began = Instant::now();
    let run_for = Duration::from_secs(minutes * 60);
    let mut made: Vec<Made> = Vec::new();
    let mut rss = vec![(Duration::ZERO, watcher.rss_kib())];
    // The machine's 1-minute load average with each RSS sample: the engine
    // and the machine are shared.
    let mut load = vec![load_average()];
    let mut next_rss = Duration::from_secs(30);
    let mut next_driver = Duration::from_secs(5);
    let mut i: u64 = 0;
    while began.elapsed() < run_for {
        let tick = Instant::now();
        assert!(watcher.alive(), "watch died\n{}", watcher.stderr());
        let at = SystemTime::now();
        match i % 10 {
            // Declared: first the state file, then (once watch has it) the box.
            0 => {
                let id = format!("kept{i}");
                declared_ids.push(id.clone());
                let ids: Vec<&str> = declared_ids.iter().map(String::as_str).collect();
                let reloads = watcher.events("stateReloaded").len();
                replace_state(&cli, &state_declaring(&sbx, &ids));
                let until = Instant::now() + Duration::from_secs(10);
                while watcher.events("stateReloaded").len() == reloads {
                    assert!(
                        Instant::now() < until,
                        "edit not reloaded\n{}",
                        watcher.stderr()
                    );
                    tokio::time::sleep(POLL).await;
                }
                let at = SystemTime::now();
                let run = if i.is_multiple_of(20) {
                    Run::Exited
                } else {
                    Run::Created
                };
                let b = sbx.add_box(&id, run).await;
                made.push(Made {
                    kind: "container",
                    name: b.container.name,
                    box_id: Some(id.clone()),
                    declared: true,
                    at,
                    driver: None,
                });
                made.push(Made {
                    kind: "volume",
                    name: b.volume,
                    box_id: Some(id),
                    declared: true,
                    at,
                    driver: None,
                });
            }
            // A box with a network, abandoned.
            3 | 7 => {
                let id = format!("net{i}");
                let b = sbx.add_box_with_network(&id, Run::Running).await;
                for (kind, name) in [
                    ("container", b.container.name),
                    ("volume", b.volume),
                    ("network", b.network.name),
                ] {
                    made.push(Made {
                        kind,
                        name,
                        box_id: Some(id.clone()),
                        declared: false,
                        at,
                        driver: None,
                    });
                }
            }
            // A box with a volume, abandoned.
            1 | 4 | 8 => {
                let id = format!("box{i}");
                let run = [Run::Running, Run::Exited, Run::Created][(i as usize / 10) % 3];
                let b = sbx.add_box(&id, run).await;
                for (kind, name) in [("container", b.container.name), ("volume", b.volume)] {
                    made.push(Made {
                        kind,
                        name,
                        box_id: Some(id.clone()),
                        declared: false,
                        at,
                        driver: None,
                    });
                }
            }
            // A lone leaked volume.
            5 => {
                let name = sbx.volume(VolumeSpec::new().managed()).await;
                made.push(Made {
                    kind: "volume",
                    name,
                    box_id: None,
                    declared: false,
                    at,
                    driver: None,
                });
            }
            // A leaked container without a box label.
            _ => {
                let run = if i.is_multiple_of(2) {
                    Run::Running
                } else {
                    Run::Exited
                };
                let c = sbx.container(ContainerSpec::new().managed().run(run)).await;
                made.push(Made {
                    kind: "container",
                    name: c.name,
                    box_id: None,
                    declared: false,
                    at,
                    driver: None,
                });
            }
        }
        // A driver that holds its box, every DRIVER_EVERY.
        if began.elapsed() >= next_driver {
            let n = lock(&drivers).len();
            let at = SystemTime::now();
            let d = start_driver(&sbx, n, &mut rng).await;
            for o in &d.objects {
                made.push(Made {
                    kind: o.kind,
                    name: o.name.clone(),
                    box_id: Some(d.box_id.clone()),
                    declared: false,
                    at,
                    driver: Some(n),
                });
            }
            lock(&drivers).push(d);
            driver_tasks.push(tokio::spawn(drive(
                Arc::clone(&drivers),
                n,
                sbx.docker().clone(),
                sbx.scope_value().to_string(),
                Arc::clone(&stop),
            )));
            next_driver += DRIVER_EVERY;
        }
        i += 1;
        if began.elapsed() >= next_rss {
            rss.push((began.elapsed(), watcher.rss_kib()));
            load.push(load_average());
            next_rss += Duration::from_secs(30);
        }
        sleep_until(tick, Duration::from_secs(1)).await;
    }
    let elapsed = began.elapsed();
    rss.push((elapsed, watcher.rss_kib()));
    load.push(load_average());

    // The drivers at the soak's end: the tasks stop watching them.
    stop.store(true, Ordering::SeqCst);
    let mut driver_problems: Vec<String> = Vec::new();
    for task in driver_tasks {
        if let Err(e) = task.await {
            driver_problems.push(format!("a driver's task failed: {}", task_failure(e)));
        }
    }
    // Those still running: every object of their boxes is there, and a live lease.
    let (ids, vols, nets) = tokio::join!(
        sbx.scoped_container_ids(),
        sbx.scoped_volume_names(),
        sbx.scoped_network_names()
    );
    let still: Vec<usize> = lock(&drivers)
        .iter()
        .enumerate()
        .filter(|(_, d)| d.end.is_none())
        .map(|(n, _)| n)
        .collect();
    let mut alive_at_end = 0;
    for n in still {
        let (pid, box_id, objects) = {
            let d = &lock(&drivers)[n];
            (d.hold_pid, d.box_id.clone(), d.objects.clone())
        };
        if !pid_alive(pid) {
            // Its command ended as the soak did, after its task last looked.
            conclude(
                &drivers,
                n,
                DriverEnd::Released,
                SystemTime::now(),
                sbx.docker(),
                sbx.scope_value(),
            )
            .await;
            continue;
        }
        alive_at_end += 1;
        let missing: Vec<String> = objects
            .iter()
            .filter(|o| match o.kind {
                "container" => !ids.contains(&o.id),
                "volume" => !vols.contains(&o.name),
                _ => !nets.contains(&o.name),
            })
            .map(|o| format!("{} {}", o.kind, o.name))
            .collect();
        let leases = leases_of(sbx.docker(), sbx.scope_value(), &box_id).await;
        let live = leases
            .iter()
            .filter_map(Listed::ends)
            .any(|end| end > local_now());
        {
            let d = &mut lock(&drivers)[n];
            if !missing.is_empty() {
                d.problems.push(format!(
                    "alive at the soak's end, but its box lost {}",
                    missing.join(", ")
                ));
            }
            if !live {
                d.problems.push(format!(
                    "alive at the soak's end without a live lease: {leases:?}"
                ));
            }
        }
        // SIGTERM: hold passes it on to its command, releases, exits 143.
        signal_pid(pid, libc::SIGTERM);
        let exited = poll_until(Duration::from_secs(30), || async move { !pid_alive(pid) }).await;
        if exited.is_none() {
            lock(&drivers)[n]
                .problems
                .push("its hold did not exit within 30 s of SIGTERM".into());
        }
        conclude(
            &drivers,
            n,
            DriverEnd::AliveAtEnd,
            SystemTime::now(),
            sbx.docker(),
            sbx.scope_value(),
        )
        .await;
    }
    // Every driver has ended: wait for their boxes to go (killed ones at
    // their last lease's end + debounce + 3 s, the others at their release +
    // debounce + 3 s; SLACK on top before giving up).
    // A box made less than a grace before the end is kept by grace after
    // its release: wait for that too.
    let latest_end = lock(&drivers)
        .iter()
        .flat_map(|d| {
            let grace_end = unix_ms(d.made_at) / 1000 + GRACE as i64;
            d.lease_end.into_iter().chain(std::iter::once(grace_end))
        })
        .max()
        .unwrap_or(0)
        .max(local_now());
    let give_up = latest_end + (DEBOUNCE + REAP_BUDGET + SLACK).as_secs() as i64;
    loop {
        let (ids, vols, nets) = tokio::join!(
            sbx.scoped_container_ids(),
            sbx.scoped_volume_names(),
            sbx.scoped_network_names()
        );
        let held_left = lock(&drivers).iter().any(|d| {
            let prefix = d.lease_prefix();
            vols.iter().any(|v| v.starts_with(&prefix))
                || d.objects.iter().any(|o| match o.kind {
                    "container" => ids.contains(&o.id),
                    "volume" => vols.contains(&o.name),
                    _ => nets.contains(&o.name),
                })
        });
        if !held_left || local_now() > give_up {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    follower.abort();
    let drivers_done: Vec<Driver> = std::mem::take(&mut *lock(&drivers));
    let lease_driver = |name: &str| {
        drivers_done
            .iter()
            .position(|d| name.starts_with(&d.lease_prefix()))
    };

    // What is left now, while watch still runs.
    let now = SystemTime::now();
    let by_name: BTreeMap<&str, &Made> = made.iter().map(|m| (m.name.as_str(), m)).collect();
    let remaining = sbx.remaining().await;
    let mut overdue = Vec::new();
    let mut left = BTreeMap::<&str, usize>::new();
    for (kind, names) in [
        ("container", &remaining.containers),
        ("volume", &remaining.volumes),
        ("network", &remaining.networks),
    ] {
        for name in names {
            *left.entry(kind).or_default() += 1;
            if let Some(n) = lease_driver(name) {
                overdue.push(format!(
                    "lease volume {name} of {} left after its driver ended",
                    drivers_done[n].box_id
                ));
                continue;
            }
            let m = by_name
                .get(name.as_str())
                .unwrap_or_else(|| panic!("unknown object {name}"));
            if let Some(n) = m.driver {
                overdue.push(format!(
                    "{kind} {name} of held box {} left after its driver ended",
                    drivers_done[n].box_id
                ));
                continue;
            }
            let age = now.duration_since(m.at).unwrap_or_default();
            if !m.declared && age > Duration::from_secs(GRACE + MARGIN) {
                overdue.push(format!("{kind} {name} undeclared, {age:?} old"));
            }
        }
    }
    let declared_missing: Vec<&str> = made
        .iter()
        .filter(|m| m.declared)
        .filter(|m| {
            let names = match m.kind {
                "container" => &remaining.containers,
                "volume" => &remaining.volumes,
                _ => &remaining.networks,
            };
            !names.contains(&m.name)
        })
        .map(|m| m.name.as_str())
        .collect();
    let (status, metrics) = http_get(&addr, "/metrics").expect("scrape /metrics");
    assert_eq!(status, 200);
    let log = watcher.log();
    let out = watcher.terminate();

    // When each driver's box stopped being held: a killed one's last lease's
    // end; else its hold's release, as the engine's destroy event of the
    // lease it released stamps it (else the hold's exit as seen).
    let events = lease_events
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let destroyed_at = |volume: &str| {
        events
            .iter()
            .filter(|(_, action, name)| action == "destroy" && name == volume)
            .map(|(ns, _, _)| ns / 1_000_000)
            .max()
    };
    let unheld_ms: Vec<Option<i64>> = drivers_done
        .iter()
        .map(|d| {
            let (kind, end) = d.end?;
            if kind == DriverEnd::Killed {
                return d.lease_end.map(|s| s * 1000);
            }
            let released: Vec<String> = d
                .hold_events("released")
                .iter()
                .flat_map(|l| l["volumes"].as_array().cloned().unwrap_or_default())
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect();
            released
                .iter()
                .filter_map(|v| destroyed_at(v))
                .max()
                .or(Some(unix_ms(end)))
        })
        .collect();

    // Every removal the audit log records.
    let mut false_removals = Vec::new();
    let mut held_false = 0;
    let mut reaped = BTreeMap::<String, usize>::new();
    let mut outcomes = BTreeMap::<String, usize>::new();
    // Per driver: what of its box the audit log has removed, and when.
    let mut held_reaped: Vec<HeldReaped> = vec![HeldReaped::default(); drivers_done.len()];
    let declared: BTreeSet<&str> = declared_ids.iter().map(String::as_str).collect();
    for line in audit_lines(&audit) {
        let name = line["name"].as_str().unwrap_or_default();
        let kind = line["kind"].as_str().unwrap_or_default().to_string();
        let outcome = line["outcome"].as_str().unwrap_or_default().to_string();
        *outcomes.entry(outcome.clone()).or_default() += 1;
        if outcome != "failed" {
            *reaped.entry(kind.clone()).or_default() += 1;
        }
        let code = line["reason"]["code"].as_str().unwrap_or_default();
        let box_id = line["labels"]["ca.sandbox.id"].as_str();
        let time = humantime::parse_rfc3339(line["time"].as_str().unwrap_or_default())
            .expect("audit time");
        let held = by_name
            .get(name)
            .and_then(|m| m.driver)
            .or_else(|| lease_driver(name));
        let wrong = if let Some(n) = held {
            // A held box's object: judged by its driver, not by its age.
            let d = &drivers_done[n];
            let t = unix_ms(time);
            if outcome != "failed" {
                let r = &mut held_reaped[n];
                r.names.insert(name.to_string());
                if name.starts_with(LEASE_PREFIX) {
                    r.leases.push((name.to_string(), t));
                } else {
                    r.box_last = r.box_last.max(Some(t));
                }
            }
            let wrong = if box_id != Some(d.box_id.as_str()) {
                Some("labels not as made".to_string())
            } else if code != "boxNotDeclared" {
                Some(format!("reason {code}"))
            } else if let Some((end_kind, end)) = d.end {
                // Its driver ended: killed (the kill; and its last lease's
                // end), or released (the release, else the hold's exit).
                let killed = end_kind == DriverEnd::Killed;
                let ended = if killed {
                    Some(unix_ms(end))
                } else {
                    unheld_ms[n]
                };
                let lease_end = if killed { unheld_ms[n] } else { None };
                [
                    ("its driver ended", ended),
                    ("its last lease's end", lease_end),
                ]
                .into_iter()
                .find_map(|(what, ms)| {
                    // Audit times are milliseconds, lease stamps whole
                    // seconds: a second of slack.
                    ms.filter(|&ms| t + 1000 < ms).map(|ms| {
                        format!(
                            "removed {:.2} s before {what} ({end_kind:?})",
                            (ms - t) as f64 / 1000.0
                        )
                    })
                })
            } else {
                Some("removed while its driver never ended".to_string())
            };
            if wrong.is_some() {
                held_false += 1;
            }
            wrong.map(|w| format!("held box {} (driver {n}): {w}", d.box_id))
        } else {
            match by_name.get(name) {
                None => Some("an object the soak did not make".to_string()),
                Some(m) if m.declared => Some("a declared box".to_string()),
                Some(_) if box_id.is_some_and(|b| declared.contains(b)) => {
                    Some("a declared box id".to_string())
                }
                Some(m) if box_id != m.box_id.as_deref() => Some("labels not as made".to_string()),
                Some(_) if !["noBoxLabel", "boxNotDeclared"].contains(&code) => {
                    Some(format!("reason {code}"))
                }
                Some(m) => {
                    let age = time.duration_since(m.at).unwrap_or_default();
                    // Creation times are whole seconds: a second of slack.
                    (age + Duration::from_secs(1) < Duration::from_secs(GRACE))
                        .then(|| format!("only {age:?} old"))
                }
            }
        };
        if let Some(why) = wrong {
            false_removals.push(format!("{kind} {name}: {why}: {line}"));
        }
    }

    // The drivers: how each ended, how long its box lasted after.
    let bound_ms = (DEBOUNCE + REAP_BUDGET).as_millis() as i64;
    let mut by_end = BTreeMap::<DriverEnd, usize>::new();
    let mut late_after = BTreeMap::<DriverEnd, Vec<i64>>::new();
    let mut exit_lag = Vec::new();
    let mut lease_lag = Vec::new();
    let mut unread_leases = 0;
    let mut held_for = Vec::new();
    let (mut renewals_engine, mut renewals_hold, mut renew_failed, mut expected) = (0, 0, 0, 0);
    let mut lines = Vec::new();
    for (n, d) in drivers_done.iter().enumerate() {
        let mut problems = d.problems.clone();
        let Some((kind, end)) = d.end else {
            driver_problems.push(format!("driver {n} ({}) never ended", d.box_id));
            continue;
        };
        *by_end.entry(kind).or_default() += 1;
        let held_secs = end
            .duration_since(d.started)
            .unwrap_or_default()
            .as_secs_f64();
        if kind != DriverEnd::AliveAtEnd {
            held_for.push(held_secs);
        }
        // The engine's count: lease volumes made for the box, beyond the first.
        let prefix = d.lease_prefix();
        let made_leases = events
            .iter()
            .filter(|(_, action, name)| action == "create" && name.starts_with(&prefix))
            .count();
        renewals_engine += made_leases.saturating_sub(1);
        renewals_hold += d.hold_events("renewed").len();
        renew_failed += d.hold_events("renewFailed").len();
        expected += (held_secs * 3.0 / d.ttl as f64) as usize;
        match (kind, d.code) {
            (DriverEnd::Released, Some(Some(0)))
            | (DriverEnd::Killed, Some(None))
            | (DriverEnd::AliveAtEnd, Some(Some(143))) => {}
            (_, code) => problems.push(format!("its hold ended with {code:?}")),
        }
        if kind != DriverEnd::Killed && d.hold_events("released").is_empty() {
            problems.push("its hold released nothing".into());
        }
        let reaped_of = &held_reaped[n];
        let not_reaped: Vec<&str> = d
            .objects
            .iter()
            .map(|o| o.name.as_str())
            .chain(d.leases_left.iter().map(|l| l.name.as_str()))
            .filter(|name| !reaped_of.names.contains(*name))
            .collect();
        if !not_reaped.is_empty() {
            problems.push(format!("not reaped: {}", not_reaped.join(", ")));
        }
        // The box's own objects: gone within debounce + 3 s of its last
        // lease's end (killed) or its release (released). One released at the
        // soak's end may be younger than the grace: then from its grace's end
        // (from just before it was made: reported, not held to the bound).
        let reference = match kind {
            DriverEnd::AliveAtEnd => unheld_ms[n]
                .map(|u| u.max(unix_ms(d.made_at) + Duration::from_secs(GRACE).as_millis() as i64)),
            _ => unheld_ms[n],
        };
        let late = match (reaped_of.box_last, reference) {
            (Some(last), Some(reference)) => Some(last - reference),
            _ => None,
        };
        if let Some(late) = late {
            late_after.entry(kind).or_default().push(late);
            if late > bound_ms && kind != DriverEnd::AliveAtEnd {
                let (from, to) = (
                    reference.unwrap_or(0) / 1000 - 10,
                    reaped_of.box_last.unwrap_or(0) / 1000 + 1,
                );
                let cycles: Vec<String> = log
                    .iter()
                    .filter(|l| l["event"] == "cycle")
                    .filter(|l| {
                        l["time"]
                            .as_str()
                            .and_then(rfc3339_seconds)
                            .is_some_and(|t| (from..=to).contains(&t))
                    })
                    .map(|l| format!("{} {} {} ms", l["time"], l["trigger"], l["tookMs"]))
                    .collect();
                problems.push(format!(
                    "its box went {:.2} s after its {} (bound: debounce + 3 s = {:.0} s); removing cycles around: {}",
                    late as f64 / 1000.0,
                    if kind == DriverEnd::Killed {
                        "last lease's end"
                    } else {
                        "release"
                    },
                    bound_ms as f64 / 1000.0,
                    cycles.join(", ")
                ));
            }
        }
        // A killed driver's lease volumes go with its box (a lease's grace
        // counts from its box's start): within debounce + 3 s of the last
        // lease's end, like the box's other objects.
        for (name, t) in &reaped_of.leases {
            if let Some(end) = d.lease_end {
                lease_lag.push(t - end * 1000);
                if t - end * 1000 > bound_ms {
                    problems.push(format!(
                        "lease volume {name} went {:.2} s after the box's last lease's end",
                        (t - end * 1000) as f64 / 1000.0
                    ));
                }
            }
            if !d.leases_left.iter().any(|l| &l.name == name) {
                unread_leases += 1;
            }
        }
        if kind != DriverEnd::Killed {
            if let Some(unheld) = unheld_ms[n] {
                exit_lag.push(unix_ms(end) - unheld);
            }
        }
        lines.push(format!(
            "  driver {n}: ttl {} s, lifetime {} s{}, {kind:?} after {held_secs:.1} s; box ({} objects{}) gone {}",
            d.ttl,
            d.lifetime,
            d.kill_after
                .map(|k| format!(", kill at {} s", k.as_secs()))
                .unwrap_or_default(),
            d.objects.len(),
            if kind == DriverEnd::Killed {
                format!(", {} lease(s) left", d.leases_left.len())
            } else {
                String::new()
            },
            late.map_or("?".to_string(), |l| format!(
                "{:.2} s after its {}",
                l as f64 / 1000.0,
                if kind == DriverEnd::Killed {
                    "last lease's end"
                } else {
                    "release"
                }
            )),
        ));
        if !problems.is_empty() {
            driver_problems.push(format!(
                "driver {n} ({}, {kind:?}): {}\n--- hold stderr\n{}",
                d.box_id,
                problems.join("; "),
                d.stderr
            ));
        }
    }
    held_for.sort_by(f64::total_cmp);
    eprintln!("{}", lines.join("\n"));
    // SOAK_LOG_DIR: the watch's log, the audit log and each hold's stderr, kept.
    if let Ok(dir) = std::env::var("SOAK_LOG_DIR") {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).expect("create SOAK_LOG_DIR");
        std::fs::write(dir.join("watch.stderr"), &out.stderr).expect("keep the watch's log");
        std::fs::copy(&audit, dir.join("audit.jsonl")).expect("keep the audit log");
        let holds: String = drivers_done
            .iter()
            .enumerate()
            .map(|(n, d)| format!("--- driver {n} {}\n{}", d.box_id, d.stderr))
            .collect();
        std::fs::write(dir.join("holds.stderr"), holds).expect("keep the holds' logs");
        std::fs::write(dir.join("drivers.txt"), lines.join("\n")).expect("keep the drivers");
        let events: String = events
            .iter()
            .map(|(ns, action, name)| format!("{ns} {action} {name}\n"))
            .collect();
        std::fs::write(dir.join("lease-events.txt"), events).expect("keep the lease events");
        std::fs::write(dir.join("metrics.txt"), &metrics).expect("keep the metrics");
    }
    eprintln!(
        "soak drivers (seed {seed}): {} started, one every {DRIVER_EVERY:?} (ttl {}-{} s, lifetime {}-{} s); \
         {} released (command ended), {} killed (SIGKILL), {alive_at_end} alive at the end (checked, then SIGTERM); \
         released and killed ones held their boxes {:.1}-{:.1} s (grace {GRACE} s); \
         killed: box gone after its last lease's end {}, its lease volumes gone after it {} ({unread_leases} made after the kill's reading); \
         released: box gone after the release {}; alive at the end: box gone after the release or its grace's end {}; \
         hold exit seen after its release {}; bound debounce {DEBOUNCE:?} + {REAP_BUDGET:?}; \
         renewals: {renewals_engine} seen by the engine (hold's own count {renewals_hold}; about {expected} expected), {renew_failed} failed; \
         {} lease-volume events, {} event-stream reconnects; held boxes removed while held: {held_false}",
        drivers_done.len(),
        DRIVER_TTL.0,
        DRIVER_TTL.1,
        DRIVER_LIFETIME.0,
        DRIVER_LIFETIME.1,
        by_end.get(&DriverEnd::Released).copied().unwrap_or(0),
        by_end.get(&DriverEnd::Killed).copied().unwrap_or(0),
        held_for.first().copied().unwrap_or(0.0),
        held_for.last().copied().unwrap_or(0.0),
        figures(late_after.get(&DriverEnd::Killed).map_or(&[], Vec::as_slice)),
        figures(&lease_lag),
        figures(late_after.get(&DriverEnd::Released).map_or(&[], Vec::as_slice)),
        figures(late_after.get(&DriverEnd::AliveAtEnd).map_or(&[], Vec::as_slice)),
        figures(&exit_lag),
        events.len(),
        event_reconnects.load(Ordering::Relaxed),
    );

    let made_count = |kind: &str| made.iter().filter(|m| m.kind == kind).count();
    let declared_count = made.iter().filter(|m| m.declared).count();
    let cycles = log.iter().filter(|l| l["event"] == "cycle").count();
    let failed_cycles = log.iter().filter(|l| l["event"] == "cycleFailed").count();
    let lost = log.iter().filter(|l| l["event"] == "streamLost").count();
    let reloads = log.iter().filter(|l| l["event"] == "stateReloaded").count();
    let broken = log.iter().filter(|l| l["event"] == "stateBroken").count();
    let cycles_total =
        metric(&metrics, "sandboxctl_cycles_total{result=\"converged\"}").unwrap_or(0.0);
    let max_took = log
        .iter()
        .filter_map(|l| l["tookMs"].as_u64())
        .max()
        .unwrap_or(0);
    eprintln!(
        "soak: {elapsed:?}, {i} iterations; made {} containers, {} volumes, {} networks ({declared_count} objects declared, {} declared boxes, {} held boxes); \
         reaped {reaped:?} (outcomes {outcomes:?}); left at the end {left:?}; \
         false removals {}; \
         watch: {cycles} removing cycles logged, {cycles_total} converged cycles in total, {failed_cycles} failed, slowest logged cycle {max_took} ms, \
         {lost} stream losses, {reloads} state reloads, {broken} broken; \
         RSS KiB over time {rss:?}; load average over time {load:?}",
        made_count("container"),
        made_count("volume"),
        made_count("network"),
        declared_ids.len(),
        drivers_done.len(),
        false_removals.len(),
        rss = rss.iter().map(|(t, k)| (t.as_secs(), *k)).collect::<Vec<_>>(),
    );
    out.success();
    assert!(
        false_removals.is_empty(),
        "false removals:\n{}",
        false_removals.join("\n")
    );
    assert!(
        driver_problems.is_empty(),
        "drivers:\n{}",
        driver_problems.join("\n")
    );
    assert!(
        declared_missing.is_empty(),
        "declared objects gone: {declared_missing:?}"
    );
    assert!(overdue.is_empty(), "left behind:\n{}", overdue.join("\n"));
    assert_eq!(failed_cycles, 0, "{}", out.stderr);
    assert_eq!(outcomes.get("failed"), None, "failed removals");
    // Memory flat: after the first minute's warm-up, growth under 10 MiB.
    let warm = rss
        .iter()
        .find(|(t, _)| *t >= Duration::from_secs(60))
        .map(|r| r.1)
        .unwrap_or(rss[0].1);
    let end = rss.last().unwrap().1;
    assert!(
        end <= warm + 10 * 1024,
        "RSS grew from {warm} KiB to {end} KiB"
    );
}
