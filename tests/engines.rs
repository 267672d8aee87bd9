//! sandboxctl, the built CLI, against real engines other than the main one:
//! a second dockerd (by `--host` and `DOCKER_HOST`), a TLS dockerd (verified,
//! and every way TLS must fail without falling back to plain HTTP), ssh
//! through `docker system dial-stdio`, Docker contexts and the docker CLI's
//! precedence, Docker 26.1 (API 1.45) with the same promises as 20.10, Podman's
//! differences, and a fleet of two dockerd plus Podman from one state file.
//!
//! Engines come from `support::engines` (shared across these tests where a
//! test's own scope label is isolation enough; started per test where a test
//! stops one or needs exact counts). Every test has its own scope
//! (`unique_scope`) and makes its objects through a `Corner`, whose drop
//! removes them even when the test fails. Each test ends by checking that the
//! main engine's `docker0` still exists.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::support::cli::{Cli, Output};
use crate::support::docker::{SLEEP, TEST_IMAGE};
use crate::support::engines::{
    link_exists, main_host, unique_scope, Corner, CurrentDocker, Engine, Podman, RemoteDocker,
    SecondDockerd, SshServer, Sshd, TlsDockerd,
};
use crate::support::proxy::Proxy;

// ----- shared engines and small helpers --------------------------------------

/// The second dockerd these tests share. The `.tcp()` variant (it also has a
/// unix socket): the harness's own test of `shared()` owns the plain variant.
async fn second() -> Engine {
    SecondDockerd::new().tcp().shared().await
}

async fn tls() -> Engine {
    TlsDockerd::new().shared().await
}

/// A Podman of the test's own. Not shared: planning a removal inspects every
/// unmanaged container, and another test's container caught by Podman in its
/// transient `stopped` state fails that inspection (see the report).
async fn podman() -> Engine {
    Podman::new().start().await
}

/// The variables through which a client finds an engine; every run starts
/// without them (and with an empty `DOCKER_CONFIG`), then sets what it tests.
const ENGINE_VARS: [&str; 6] = [
    "DOCKER_HOST",
    "DOCKER_CONTEXT",
    "DOCKER_TLS_VERIFY",
    "DOCKER_TLS",
    "DOCKER_CERT_PATH",
    "DOCKER_CONFIG",
];

/// A CLI run limited to `corner`'s scope (`--scope`), with the state file
/// `state` and no engine chosen by the environment (see [`bare_cli`]).
fn cli(corner: &Corner, state: &str) -> Cli {
    bare_cli(state).scope(&corner.scope_arg())
}

/// A CLI run with the state file `state` (which must give the scope), no
/// `DOCKER_*` variable, and `DOCKER_CONFIG` an empty folder.
fn bare_cli(state: &str) -> Cli {
    let mut cli = Cli::new();
    let config = cli.dir().join("docker-config");
    std::fs::create_dir_all(&config).expect("create DOCKER_CONFIG");
    for var in ENGINE_VARS {
        cli = cli.env_remove(var);
    }
    cli.env("DOCKER_CONFIG", config).state_toml(state)
}

fn with_env(mut cli: Cli, env: &[(String, String)]) -> Cli {
    for (k, v) in env {
        cli = cli.env(k, v);
    }
    cli
}

fn first_line(out: &Output) -> &str {
    out.stdout.lines().next().unwrap_or_default()
}

/// `report[section][kind]` entries' `field` values, sorted.
fn names(json: &Value, section: &str, kind: &str, field: &str) -> Vec<String> {
    let mut all: Vec<String> = json[section][kind]
        .as_array()
        .unwrap_or_else(|| panic!("{section}.{kind} is not a list: {json:#}"))
        .iter()
        .map(|e| e[field].as_str().unwrap_or_default().to_string())
        .collect();
    all.sort();
    all
}

/// A top-level list of the report (`remainingVolumes`, `failures`, ...).
fn list<'a>(json: &'a Value, key: &str) -> &'a Vec<Value> {
    json[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} is not a list: {json:#}"))
}

fn sorted<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> Vec<String> {
    let mut all: Vec<String> = items.into_iter().map(Into::into).collect();
    all.sort();
    all
}

/// The main engine's bridge survives every extra engine.
fn assert_docker0() {
    assert!(
        link_exists("docker0"),
        "the main engine's docker0 is gone (`ip link show docker0` fails)"
    );
}

// ----- 1. a second dockerd ---------------------------------------------------

/// `--host unix://…` and `DOCKER_HOST` reach the second dockerd: plan names it
/// and how it was chosen, apply and destroy work there, and the main engine's
/// objects with the very same scope, names and labels are untouched.
trial!(second_dockerd_by_host_flag_and_docker_host_leaves_the_main_engine_alone);
async fn second_dockerd_by_host_flag_and_docker_host_leaves_the_main_engine_alone() {
    let engine = second().await;
    let scope = unique_scope("eng-second");
    let there = Corner::on(&engine, &scope);
    let here = Corner::on_main(&scope);
    let (keep, leak, lv) = tokio::join!(
        there.add_box("keep", true),
        there.add_box("leak", true),
        there.leaked_volume("lv")
    );
    let (_, _, _) = tokio::join!(
        here.add_box("keep", false),
        here.add_box("leak", false),
        here.leaked_volume("lv")
    );
    let main_before = here.remaining().await;
    assert_eq!(main_before.len(), 5, "{main_before:?}");
    let host = engine.socket_host();
    let run = cli(&there, "[[box]]\nid = \"keep\"\n");

    let out = run.run_with(["--host", &host, "plan"]);
    out.success();
    assert_eq!(first_line(&out), format!("Engine: {host} (from --host)"));
    assert!(out.stdout.contains(&leak.container_name), "{}", out.dump());

    let out = run.run_with(["--host", &host, "--format", "json", "apply"]);
    out.success();
    let report = out.json();
    assert_eq!(report["converged"], true, "{report:#}");
    assert_eq!(
        names(&report, "removed", "containers", "id"),
        vec![leak.container.clone()]
    );
    assert_eq!(
        names(&report, "removed", "volumes", "name"),
        sorted([leak.volume.clone(), lv.clone()])
    );
    assert_eq!(
        names(&report, "removed", "networks", "id"),
        vec![leak.network.clone().unwrap()]
    );
    assert!(there.container_exists(&keep.container).await);
    assert!(!there.container_exists(&leak.container).await);
    assert!(!there.volume_exists(&lv).await);
    assert!(!there.network_exists(leak.network.as_ref().unwrap()).await);

    let run = run.docker_host(&host);
    let out = run.run_with(["plan"]);
    out.success();
    assert_eq!(
        first_line(&out),
        format!("Engine: {host} (from DOCKER_HOST)")
    );
    let out = run.run_with(["--format", "json", "destroy", "keep"]);
    out.success();
    let report = out.json();
    assert_eq!(
        names(&report, "removed", "containers", "id"),
        vec![keep.container.clone()]
    );
    assert_eq!(there.remaining().await, Vec::<String>::new());
    assert_eq!(
        here.remaining().await,
        main_before,
        "the main engine's objects of the same scope were touched"
    );
    assert_docker0();
}

// ----- 2. TLS ----------------------------------------------------------------

/// `DOCKER_HOST=tcp://…`, `DOCKER_TLS_VERIFY=1` and `DOCKER_CERT_PATH` with a
/// client certificate the engine trusts: plan names the TLS endpoint, apply
/// removes the box and the leak.
trial!(tls_engine_with_verified_certificates_plans_and_applies);
async fn tls_engine_with_verified_certificates_plans_and_applies() {
    let engine = tls().await;
    let scope = unique_scope("eng-tls-ok");
    let corner = Corner::on(&engine, &scope);
    let (gone, lv) = tokio::join!(corner.add_box("gone", true), corner.leaked_volume("lv"));
    let run = with_env(cli(&corner, ""), &engine.client_env());

    let out = run.run_with(["plan"]);
    out.success();
    assert_eq!(
        first_line(&out),
        format!("Engine: {} (TLS) (from DOCKER_HOST)", engine.docker_host())
    );
    let out = run.run_with(["--format", "json", "apply"]);
    out.success();
    let report = out.json();
    assert_eq!(report["converged"], true, "{report:#}");
    assert_eq!(
        names(&report, "removed", "containers", "id"),
        vec![gone.container.clone()]
    );
    assert_eq!(
        names(&report, "removed", "volumes", "name"),
        sorted([gone.volume.clone(), lv])
    );
    assert_eq!(corner.remaining().await, Vec::<String>::new());
    assert_docker0();
}

/// Every way the TLS setup can be wrong fails the run (exit 1) with a message
/// that names the cause, and nothing is removed: a CA that did not sign the
/// engine's certificate (and a client certificate the engine does not trust),
/// a client with the right CA but no certificate of its own, and no files at all.
trial!(tls_failures_are_clear_and_remove_nothing);
async fn tls_failures_are_clear_and_remove_nothing() {
    let engine = tls().await;
    let files = engine.tls().expect("TLS files").clone();
    let scope = unique_scope("eng-tls-bad");
    let corner = Corner::on(&engine, &scope);
    let (gone, lv) = tokio::join!(corner.add_box("gone", false), corner.leaked_volume("lv"));
    let before = corner.remaining().await;

    let ca_only = tempfile::tempdir().expect("temp dir");
    std::fs::copy(
        files.client_dir.join("ca.pem"),
        ca_only.path().join("ca.pem"),
    )
    .expect("copy ca.pem");
    let empty = tempfile::tempdir().expect("temp dir");
    let cases: [(&str, &Path, &[&str]); 3] = [
        ("wrong CA", &files.wrong_ca_dir, &["TLS", "certificate"]),
        ("no client certificate", ca_only.path(), &["TLS"]),
        ("no files", empty.path(), &["ca.pem", "DOCKER_CERT_PATH"]),
    ];
    // Every case runs; unclear messages are collected and reported together.
    let mut unclear = Vec::new();
    for (what, cert_path, words) in cases {
        let run = cli(&corner, "")
            .docker_host(&engine.docker_host())
            .env("DOCKER_TLS_VERIFY", "1")
            .env("DOCKER_CERT_PATH", cert_path);
        for command in [&["apply"][..], &["destroy", "--prune"][..]] {
            let out = run.run_with(command);
            out.expect_code(1);
            eprintln!("{what}: {}", out.stderr.trim());
            for word in words {
                if !out.stderr.contains(word) {
                    unclear.push(format!(
                        "{what}: does not say {word:?}: {}",
                        out.stderr.trim()
                    ));
                }
            }
        }
    }
    assert_eq!(
        corner.remaining().await,
        before,
        "a failed run removed something"
    );
    assert!(
        unclear.is_empty(),
        "unclear TLS errors:\n{}",
        unclear.join("\n")
    );
    assert!(corner.container_exists(&gone.container).await);
    assert!(corner.volume_exists(&lv).await);
    assert_docker0();
}

/// `DOCKER_TLS_VERIFY` (even `0`: set means on, as in the docker CLI) against
/// an engine that speaks plain HTTP on its tcp port fails clearly; it never
/// becomes a plain connection. Without it, the same address works.
trial!(tls_verify_against_a_plain_tcp_engine_fails_and_never_falls_back);
async fn tls_verify_against_a_plain_tcp_engine_fails_and_never_falls_back() {
    let (engine, tls_engine) = tokio::join!(second(), tls());
    let files = tls_engine.tls().expect("TLS files").clone();
    let tcp = engine.tcp_host().expect("a plain tcp listener");
    let scope = unique_scope("eng-tls-plain");
    let corner = Corner::on(&engine, &scope);
    let lv = corner.leaked_volume("lv").await;

    for verify in ["1", "0"] {
        let run = cli(&corner, "")
            .docker_host(&tcp)
            .env("DOCKER_TLS_VERIFY", verify)
            .env("DOCKER_CERT_PATH", &files.client_dir);
        let out = run.run_with(["apply"]);
        out.expect_code(1);
        assert!(
            out.stderr.contains("TLS") && out.stderr.contains("does not speak TLS"),
            "DOCKER_TLS_VERIFY={verify}: {}",
            out.dump()
        );
        assert!(
            corner.volume_exists(&lv).await,
            "removed over a plain connection"
        );
    }
    let out = cli(&corner, "").docker_host(&tcp).run_with(["plan"]);
    out.success();
    assert_eq!(
        first_line(&out),
        format!("Engine: {tcp} (from DOCKER_HOST)")
    );
    assert!(out.stdout.contains(&lv), "{}", out.dump());
    assert_docker0();
}

// ----- 3. ssh ----------------------------------------------------------------

/// The most connections sandboxctl keeps to one engine over ssh (`engine::ssh::CONNECTIONS`).
const SSH_CONNECTIONS: usize = 12;

/// After a run: no `ssh` client of this sshd's config is left (they die with
/// sandboxctl), and within a few seconds no session either (the remote side
/// ends when its client does). Returns what is left, empty when all is well.
fn ssh_leftovers(sshd: &Sshd) -> Vec<String> {
    let mut left = Vec::new();
    // The kernel kills them as sandboxctl exits (PR_SET_PDEATHSIG); on a
    // loaded machine that can take a moment to show.
    let started = Instant::now();
    let mut clients = sshd.clients();
    while !clients.is_empty() && started.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(50));
        clients = sshd.clients();
    }
    if !clients.is_empty() {
        left.push(format!(
            "ssh clients still running 3 s after the run: {clients:?}"
        ));
    } else if started.elapsed() > Duration::from_millis(100) {
        eprintln!("ssh clients gone {:?} after the run", started.elapsed());
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let sessions = sshd.session_processes();
        if sessions.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            left.push(format!(
                "sshd sessions still running 10 s later: {sessions:?}"
            ));
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    left
}

/// How many times a client authenticated (one per ssh connection, not per session).
fn authentications(sshd: &Sshd) -> usize {
    sshd.log_tail(10_000)
        .lines()
        .filter(|l| l.contains("Accepted publickey"))
        .count()
}

/// How many connections sshd dropped before authentication (`MaxStartups`).
fn dropped_past_max_startups(sshd: &Sshd) -> usize {
    sshd.log_tail(10_000)
        .lines()
        .filter(|l| l.contains("past MaxStartups"))
        .count()
}

/// `ssh://root@127.0.0.1:PORT` (the port in the URL, nothing in any ssh
/// config for it but the key) reaches the second dockerd through a stock sshd
/// and `docker system dial-stdio`: plan names it, destroy, apply and
/// `watch --once` clean there. The sshd's forced command records that every
/// session ran `docker system dial-stdio` and came in on that port; no
/// connection was dropped past MaxStartups; after every run no ssh process
/// is left, here or on the remote side.
trial!(ssh_with_a_port_plans_applies_destroys_and_watches);
async fn ssh_with_a_port_plans_applies_destroys_and_watches() {
    let engine = second().await;
    let sshd = SshServer::to(&engine).start().await;
    let scope = unique_scope("eng-ssh");
    let corner = Corner::on(&engine, &scope);
    let (gone, victim, lv) = tokio::join!(
        corner.add_box("gone", true),
        corner.add_box("victim", false),
        corner.leaked_volume("lv")
    );
    let host = sshd.docker_host();
    assert_eq!(host, format!("ssh://root@127.0.0.1:{}", sshd.port()));
    let run = cli(&corner, "")
        .docker_host(&host)
        .env("PATH", sshd.wrapper_path());
    let check = |what: &str, out: &Output| {
        assert_eq!(
            out.code,
            Some(0),
            "{what}: {}\nsshd log:\n{}",
            out.dump(),
            sshd.log_tail(20)
        );
        let left = ssh_leftovers(&sshd);
        assert!(left.is_empty(), "{what}: {left:?}");
    };

    let out = run.run_with(["plan"]);
    check("plan", &out);
    assert_eq!(
        first_line(&out),
        format!("Engine: {host} (from DOCKER_HOST)")
    );
    assert!(out.stdout.contains(&lv), "{}", out.dump());

    let out = run.run_with(["--format", "json", "destroy", "victim"]);
    check("destroy", &out);
    let report = out.json();
    assert_eq!(report["converged"], true, "{report:#}");
    assert_eq!(
        names(&report, "removed", "containers", "id"),
        vec![victim.container.clone()]
    );

    let out = run.run_with(["--format", "json", "apply"]);
    check("apply", &out);
    eprintln!("apply over ssh took {:?}", out.elapsed);
    let report = out.json();
    assert_eq!(report["converged"], true, "{report:#}");
    assert_eq!(
        names(&report, "removed", "containers", "id"),
        vec![gone.container.clone()]
    );
    assert_eq!(corner.remaining().await, Vec::<String>::new());

    let lw = corner.leaked_volume("lw").await;
    // Older than the grace, so this cycle reaps it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let out = run.run_with(["--format", "json", "watch", "--once", "--grace", "1s"]);
    check("watch --once", &out);
    assert!(out.stdout.contains(&lw), "{}", out.dump());
    assert_eq!(corner.remaining().await, Vec::<String>::new());

    // A `Host` alias of the ssh config (which carries the port) works as well.
    let out = run.docker_host(&sshd.alias_host()).run_with(["plan"]);
    check("plan by alias", &out);

    let commands = sshd.remote_commands();
    assert!(
        commands.len() >= 5 && commands.len() <= 5 * SSH_CONNECTIONS,
        "{commands:?}"
    );
    for c in &commands {
        assert_eq!(c.command, "docker system dial-stdio", "{commands:?}");
        assert_eq!(c.server_port, sshd.port(), "{commands:?}");
    }
    eprintln!("ssh: {} dial-stdio sessions for 5 runs", commands.len());
    assert_eq!(dropped_past_max_startups(&sshd), 0, "{}", sshd.log_tail(40));
    // Authenticated once per run (a second master only past 10 sessions at once).
    let logins = authentications(&sshd);
    assert!(
        (5..=10).contains(&logins),
        "{logins} authentications for 5 runs"
    );
    assert_docker0();
}

/// apply removes up to 12 objects at once by default, more than a stock
/// sshd's `MaxStartups` (10) unauthenticated connections and `MaxSessions`
/// (10) sessions per connection: sandboxctl authenticates once (a second
/// master past 10 sessions), so sshd drops nothing, every object is removed
/// and the run converges.
trial!(ssh_apply_at_default_parallelism_through_a_stock_sshd_removes_everything);
async fn ssh_apply_at_default_parallelism_through_a_stock_sshd_removes_everything() {
    let engine = second().await;
    let sshd = SshServer::to(&engine).start().await;
    let scope = unique_scope("eng-ssh-many");
    let corner = Corner::on(&engine, &scope);
    let mut leaks = Vec::new();
    for i in 0..24 {
        leaks.push(corner.leaked_volume(&format!("lv{i}")).await);
    }
    let out = cli(&corner, "")
        .docker_host(&sshd.docker_host())
        .env("PATH", sshd.wrapper_path())
        .run_with(["--format", "json", "apply"]);
    let dropped = dropped_past_max_startups(&sshd);
    let sessions = sshd.remote_commands().len();
    let logins = authentications(&sshd);
    eprintln!(
        "ssh: apply of 24 volumes took {:?}; {logins} authentications, {sessions} dial-stdio sessions; sshd dropped {dropped}",
        out.elapsed
    );
    assert_eq!(out.code, Some(0), "{}", out.dump());
    assert_eq!(
        names(&out.json(), "removed", "volumes", "name"),
        sorted(leaks)
    );
    assert_eq!(corner.remaining().await, Vec::<String>::new());
    assert_eq!(dropped, 0, "{}", sshd.log_tail(40));
    // One per master (two past 10 sessions). A third was seen once, in a
    // full clean-clone CI run on a loaded machine (the apply took 5.7 s, 13
    // sessions, sshd dropped none); its cause is not investigated. Many
    // authentications (one per request) would still fail here.
    assert!((1..=3).contains(&logins), "{logins} authentications");
    assert!(
        (1..=2 * SSH_CONNECTIONS).contains(&sessions),
        "{sessions} sessions"
    );
    let left = ssh_leftovers(&sshd);
    assert!(left.is_empty(), "{left:?}");
    assert_docker0();
}

/// A server with a lower `MaxSessions` (2) than the 10 sessions a master is
/// given refuses sessions; ssh then connects on its own for them (measured:
/// more authentications), and the run still removes everything and
/// converges, leaving no process behind.
trial!(ssh_apply_through_an_sshd_with_few_sessions_still_converges);
async fn ssh_apply_through_an_sshd_with_few_sessions_still_converges() {
    let engine = second().await;
    let sshd = SshServer::to(&engine).max_sessions(2).start().await;
    let scope = unique_scope("eng-ssh-sessions");
    let corner = Corner::on(&engine, &scope);
    let mut leaks = Vec::new();
    for i in 0..12 {
        leaks.push(corner.leaked_volume(&format!("lv{i}")).await);
    }
    let out = cli(&corner, "")
        .docker_host(&sshd.docker_host())
        .env("PATH", sshd.wrapper_path())
        .run_with(["--format", "json", "apply"]);
    eprintln!(
        "ssh, MaxSessions 2: apply of 12 volumes took {:?}; {} authentications, {} sessions",
        out.elapsed,
        authentications(&sshd),
        sshd.remote_commands().len()
    );
    assert_eq!(
        out.code,
        Some(0),
        "{}
sshd log:
{}",
        out.dump(),
        sshd.log_tail(30)
    );
    assert_eq!(
        names(&out.json(), "removed", "volumes", "name"),
        sorted(leaks)
    );
    assert_eq!(corner.remaining().await, Vec::<String>::new());
    let left = ssh_leftovers(&sshd);
    assert!(left.is_empty(), "{left:?}");
    assert_docker0();
}

/// An `ssh` wrapper in a folder of its own that runs the sshd's client config
/// with `extra` options first (the first value of an option wins).
fn ssh_wrapper(sshd: &Sshd, dir: &Path, extra: &str) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("create wrapper folder");
    let wrapper = bin.join("ssh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec /usr/bin/ssh {extra} -F {}/ssh_config \"$@\"\n",
            sshd.dir().display()
        ),
    )
    .expect("write wrapper");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))
        .expect("chmod wrapper");
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Every way ssh can fail before the engine answers fails the run (exit 1,
/// no "Converged", the objects untouched) with ssh's own words, escaped, and
/// what to do: an unknown host key, authentication refused, no `docker` on
/// the remote, and a remote `docker` that prints terminal escapes.
trial!(ssh_failures_are_reported_in_ssh_words_escaped_with_what_to_do);
async fn ssh_failures_are_reported_in_ssh_words_escaped_with_what_to_do() {
    let engine = second().await;
    let (sshd, no_docker, hostile) = tokio::join!(
        SshServer::to(&engine).start(),
        SshServer::to(&engine)
            .remote_docker(RemoteDocker::Missing)
            .start(),
        SshServer::to(&engine)
            .remote_docker(RemoteDocker::Script(
                "#!/bin/sh\nprintf 'engine gone \\033[2J\\033]0;pwned\\007 sorry\\n' >&2\nexit 1\n"
                    .to_string()
            ))
            .start()
    );
    let scope = unique_scope("eng-ssh-fail");
    let corner = Corner::on(&engine, &scope);
    let lv = corner.leaked_volume("lv").await;
    let scratch = tempfile::tempdir().expect("tempdir");
    let strict = ssh_wrapper(
        &sshd,
        &scratch.path().join("strict"),
        &format!(
            "-o StrictHostKeyChecking=yes -o UserKnownHostsFile={}/empty_known_hosts",
            scratch.path().display()
        ),
    );
    let port = sshd.port();
    let cases: Vec<(&str, String, String, Vec<&str>)> = vec![
        (
            "unknown host key",
            sshd.docker_host(),
            strict,
            vec![
                "Host key verification failed.",
                "exit status 255",
                "known_hosts",
            ],
        ),
        (
            "authentication refused",
            format!("ssh://sbx-no-such-user@127.0.0.1:{port}"),
            sshd.wrapper_path(),
            vec!["Permission denied (publickey)", "ssh-add"],
        ),
        (
            "no docker on the remote",
            no_docker.docker_host(),
            no_docker.wrapper_path(),
            vec![
                "docker: not found",
                "exit status 127",
                "install the docker CLI there",
            ],
        ),
        (
            "a remote docker printing escapes",
            hostile.docker_host(),
            hostile.wrapper_path(),
            vec![
                "engine gone \\u{1b}[2J\\u{1b}]0;pwned\\u{7} sorry",
                "exit status 1",
            ],
        ),
    ];
    for (what, host, path, words) in cases {
        for command in [&["plan"][..], &["apply"][..]] {
            let out = cli(&corner, "")
                .docker_host(&host)
                .env("PATH", &path)
                .run_with(command.iter().copied());
            out.expect_code(1);
            let said = format!("{}{}", out.stdout, out.stderr);
            eprintln!("{what}, {command:?}: {}", out.stderr.trim());
            for w in &words {
                assert!(said.contains(w), "{what}: no {w:?} in:\n{}", out.dump());
            }
            assert!(
                said.contains(&format!("cannot reach the Docker engine at {host}")),
                "{what}: {}",
                out.dump()
            );
            assert!(
                !said.contains('\u{1b}') && !said.contains('\u{7}'),
                "{what}: raw escape in:\n{}",
                out.dump()
            );
            assert!(!said.contains("Converged"), "{what}: {}", out.dump());
        }
    }
    assert_eq!(corner.remaining().await, vec![format!("volume/{lv}")]);
    for s in [&sshd, &no_docker, &hostile] {
        let left = ssh_leftovers(s);
        assert!(left.is_empty(), "{left:?}");
    }
    assert_docker0();
}

// ----- 4. Docker contexts ----------------------------------------------------

/// Writes context `name` for `host` into the Docker config folder `config` the
/// way `docker context create` lays it out, with the TLS material of `tls`.
fn write_context(config: &Path, name: &str, host: &str, tls: Option<&Path>) {
    let digest: String = Sha256::digest(name.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let meta = config.join("contexts/meta").join(&digest);
    std::fs::create_dir_all(&meta).expect("create context folder");
    let json = serde_json::json!({
        "Name": name,
        "Metadata": {},
        "Endpoints": {"docker": {"Host": host, "SkipTLSVerify": false}},
    });
    std::fs::write(meta.join("meta.json"), json.to_string()).expect("write meta.json");
    if let Some(dir) = tls {
        let to = config.join("contexts/tls").join(&digest).join("docker");
        std::fs::create_dir_all(&to).expect("create context TLS folder");
        for file in ["ca.pem", "cert.pem", "key.pem"] {
            std::fs::copy(dir.join(file), to.join(file)).expect("copy TLS file");
        }
    }
}

/// One rule of the precedence, as a CLI run.
struct Case {
    what: &'static str,
    args: Vec<String>,
    env: Vec<(&'static str, String)>,
    current_context: Option<&'static str>,
    /// Expected first line of `plan`, or `None` for an error.
    engine_line: Option<String>,
    /// Which engine's volume the plan must list: 0 main, 1 second, 2 TLS.
    reaches: usize,
}

/// Every precedence rule of the docker CLI through `plan`: `--context` (an
/// error with `--host`), `--host`, `DOCKER_HOST` (over `DOCKER_CONTEXT` and
/// `currentContext`), `DOCKER_CONTEXT`, `currentContext` in `config.json`, the
/// default socket. Contexts point at the second dockerd (unix) and the TLS
/// dockerd (with the context's own TLS material). The first line names the
/// engine and the rule; the plan lists only that engine's object.
trial!(docker_contexts_follow_the_docker_cli_precedence);
async fn docker_contexts_follow_the_docker_cli_precedence() {
    let (second, tls) = tokio::join!(second(), tls());
    let scope = unique_scope("eng-contexts");
    let corners = [
        Corner::on_main(&scope),
        Corner::on(&second, &scope),
        Corner::on(&tls, &scope),
    ];
    let volumes = [
        corners[0].leaked_volume("on-main").await,
        corners[1].leaked_volume("on-second").await,
        corners[2].leaked_volume("on-tls").await,
    ];
    let second_host = second.socket_host();
    let tls_host = tls.docker_host();
    let main = main_host();

    let configs = tempfile::tempdir().expect("temp dir");
    let make_config = |current: Option<&str>| {
        let dir = configs.path().join(current.unwrap_or("none"));
        if dir.exists() {
            return dir;
        }
        write_context(&dir, "ctx-second", &second_host, None);
        write_context(
            &dir,
            "ctx-tls",
            &tls_host,
            Some(&tls.tls().expect("TLS files").client_dir),
        );
        if let Some(name) = current {
            std::fs::write(
                dir.join("config.json"),
                serde_json::json!({ "currentContext": name }).to_string(),
            )
            .expect("write config.json");
        }
        dir
    };
    // The fixture is what the docker CLI itself reads.
    let docker_cli = std::process::Command::new("docker")
        .env("DOCKER_CONFIG", make_config(None))
        .env_remove("DOCKER_HOST")
        .env_remove("DOCKER_CONTEXT")
        .args([
            "context",
            "inspect",
            "ctx-tls",
            "--format",
            "{{.Endpoints.docker.Host}}",
        ])
        .output()
        .expect("run docker context inspect");
    assert_eq!(
        String::from_utf8_lossy(&docker_cli.stdout).trim(),
        tls_host,
        "docker context inspect: {}",
        String::from_utf8_lossy(&docker_cli.stderr)
    );

    let tls_line = |how: &str| format!("Engine: {tls_host} (TLS) ({how})");
    let s = |x: &str| x.to_string();
    let cases = vec![
        Case {
            what: "--context with --host",
            args: vec![
                s("--context"),
                s("ctx-second"),
                s("--host"),
                second_host.clone(),
            ],
            env: vec![],
            current_context: None,
            engine_line: None,
            reaches: 1,
        },
        Case {
            what: "--context over DOCKER_HOST, DOCKER_CONTEXT and config.json",
            args: vec![s("--context"), s("ctx-second")],
            env: vec![
                ("DOCKER_HOST", main.clone()),
                ("DOCKER_CONTEXT", s("ctx-tls")),
            ],
            current_context: Some("ctx-tls"),
            engine_line: Some(format!(
                "Engine: {second_host} (context \"ctx-second\" from --context)"
            )),
            reaches: 1,
        },
        Case {
            what: "--host over DOCKER_HOST, DOCKER_CONTEXT and config.json",
            args: vec![s("--host"), second_host.clone()],
            env: vec![
                ("DOCKER_HOST", main.clone()),
                ("DOCKER_CONTEXT", s("ctx-tls")),
            ],
            current_context: Some("ctx-tls"),
            engine_line: Some(format!("Engine: {second_host} (from --host)")),
            reaches: 1,
        },
        Case {
            what: "DOCKER_HOST over DOCKER_CONTEXT and config.json",
            args: vec![],
            env: vec![
                ("DOCKER_HOST", second_host.clone()),
                ("DOCKER_CONTEXT", s("ctx-tls")),
            ],
            current_context: Some("ctx-tls"),
            engine_line: Some(format!("Engine: {second_host} (from DOCKER_HOST)")),
            reaches: 1,
        },
        Case {
            what: "DOCKER_CONTEXT over config.json",
            args: vec![],
            env: vec![("DOCKER_CONTEXT", s("ctx-tls"))],
            current_context: Some("ctx-second"),
            engine_line: Some(tls_line("context \"ctx-tls\" from DOCKER_CONTEXT")),
            reaches: 2,
        },
        Case {
            what: "currentContext in config.json",
            args: vec![],
            env: vec![],
            current_context: Some("ctx-second"),
            engine_line: Some(format!(
                "Engine: {second_host} (context \"ctx-second\" from config.json)"
            )),
            reaches: 1,
        },
        Case {
            what: "config.json naming the TLS context",
            args: vec![],
            env: vec![],
            current_context: Some("ctx-tls"),
            engine_line: Some(tls_line("context \"ctx-tls\" from config.json")),
            reaches: 2,
        },
        Case {
            what: "nothing: the default socket",
            args: vec![],
            env: vec![],
            current_context: None,
            engine_line: Some(s("Engine: unix:///var/run/docker.sock (default socket)")),
            reaches: 0,
        },
    ];
    for case in cases {
        if case.reaches == 0 && main != "unix:///var/run/docker.sock" {
            eprintln!(
                "skipped {:?}: the main engine is not the default socket",
                case.what
            );
            continue;
        }
        let mut run = cli(&corners[0], "").env("DOCKER_CONFIG", make_config(case.current_context));
        for (k, v) in &case.env {
            run = run.env(k, v);
        }
        let out = run.args(&case.args).run_with(["plan"]);
        match &case.engine_line {
            None => {
                out.expect_code(1);
                assert!(
                    out.stderr.contains("--context") && out.stderr.contains("conflict"),
                    "{}: {}",
                    case.what,
                    out.dump()
                );
            }
            Some(line) => {
                assert_eq!(out.code, Some(0), "{}: {}", case.what, out.dump());
                assert_eq!(first_line(&out), line, "{}", case.what);
                for (i, volume) in volumes.iter().enumerate() {
                    assert_eq!(
                        out.stdout.contains(volume.as_str()),
                        i == case.reaches,
                        "{}: the plan should list only {}\n{}",
                        case.what,
                        volumes[case.reaches],
                        out.dump()
                    );
                }
            }
        }
    }
    assert_docker0();
}

// ----- 5. the core promises on Docker 20.10 and 26.1 ---------------------------

/// The engine promises, on the engine at the unix socket `socket`, every
/// request going through a recording proxy: a box with a volume and a network
/// is torn down completely, containers first; a declared box stays; look-alike
/// decoys survive; images survive; a volume an unmanaged container holds is
/// blocked (exit 1), named with its holder. Every request after the version
/// check carries `/v{api}/`.
async fn core_promises(socket: &Path, api: &str, test: &str) {
    let scope = unique_scope(test);
    let corner = Corner::at(&format!("unix://{}", socket.display()), &scope);
    let (gone, kept, held) = tokio::join!(
        corner.add_box("gone", true),
        corner.add_box("kept", true),
        corner.leaked_volume("held")
    );
    let user = corner.unmanaged_user(&held).await;
    let decoys = corner.decoys().await;
    let images = corner.image_ids().await;
    let proxy = Proxy::start_to(socket);
    let run = cli(&corner, "[[box]]\nid = \"kept\"\n").docker_host(&proxy.docker_host());

    let out = run.run_with(["--format", "json", "plan"]);
    out.success();
    let plan = out.json();
    let steps = plan["steps"].as_array().expect("steps");
    let step_of = |kind: &str, name: &str| -> u64 {
        steps
            .iter()
            .find(|s| s["kind"] == kind && s["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name} in the plan: {plan:#}"))["step"]
            .as_u64()
            .unwrap()
    };
    let container_step = step_of("container", &gone.container_name);
    let network_name = corner.unique("gone-net");
    for (kind, name) in [("volume", &gone.volume), ("network", &network_name)] {
        let step = steps
            .iter()
            .find(|s| s["kind"] == kind && &s["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name} in the plan: {plan:#}"));
        assert!(
            step["waitsFor"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w.as_u64() == Some(container_step)),
            "{kind} waits for its container: {step:#}"
        );
    }
    assert_eq!(steps.len(), 3, "only the undeclared box: {plan:#}");
    let blocked = plan["blocked"].as_array().expect("blocked");
    assert_eq!(blocked.len(), 1, "{plan:#}");
    assert_eq!(blocked[0]["name"], held.as_str());
    assert_eq!(blocked[0]["reason"]["code"], "heldByUnmanaged");
    assert_eq!(blocked[0]["reason"]["holders"][0]["id"], user.as_str());

    let out = run.run_with(["--format", "json", "apply"]);
    out.expect_code(1);
    let report = out.json();
    assert_eq!(report["converged"], false);
    assert_eq!(
        names(&report, "removed", "containers", "id"),
        vec![gone.container.clone()]
    );
    assert_eq!(
        names(&report, "removed", "volumes", "name"),
        vec![gone.volume.clone()]
    );
    assert_eq!(
        names(&report, "removed", "networks", "name"),
        vec![network_name.clone()]
    );
    let left = list(&report, "remainingVolumes");
    assert_eq!(left.len(), 1, "{report:#}");
    assert_eq!(left[0]["name"], held.as_str());
    assert_eq!(left[0]["reason"]["code"], "heldByUnmanaged");
    assert!(
        left[0]["reason"]["text"]
            .as_str()
            .unwrap()
            .contains(&user[..12]),
        "{report:#}"
    );

    // On the wire: the container went first, then its volume and network.
    let deletes: Vec<(usize, String, Option<u16>)> = proxy
        .seen()
        .into_iter()
        .filter(|s| s.method == "DELETE" && s.by_client())
        .map(|s| (s.seq, s.path.clone(), s.status))
        .collect();
    let at = |needle: &str| {
        deletes
            .iter()
            .find(|(_, p, _)| p.contains(needle))
            .unwrap_or_else(|| panic!("no DELETE of {needle}:\n{}", proxy.dump()))
            .clone()
    };
    let container = at(&format!("/containers/{}", gone.container));
    assert_eq!(container.2, Some(204), "{}", proxy.dump());
    for other in [
        at(&format!("/volumes/{}", gone.volume)),
        at(&format!("/networks/{}", gone.network.as_ref().unwrap())),
    ] {
        assert!(
            other.0 > container.0,
            "{} before its container:\n{}",
            other.1,
            proxy.dump()
        );
        assert_eq!(other.2, Some(204), "{}", proxy.dump());
    }
    assert!(
        !deletes
            .iter()
            .any(|(_, p, _)| p.contains(&held) || p.starts_with("/images")),
        "a held volume or an image was asked to go:\n{}",
        proxy.dump()
    );
    let prefix = format!("/v{api}/");
    let seen = proxy.seen();
    let unversioned: Vec<String> = seen
        .iter()
        .filter(|s| {
            s.by_client()
                && !["/_ping", "/version"].contains(&s.target.as_str())
                && !s.target.starts_with(&prefix)
        })
        .map(|s| format!("{} {}", s.method, s.target))
        .collect();
    assert!(
        unversioned.is_empty(),
        "requests without {prefix}: {unversioned:#?}\n{}",
        proxy.dump()
    );
    assert!(seen.len() > 10, "{}", proxy.dump());

    // The engine itself.
    assert!(!corner.container_exists(&gone.container).await);
    assert!(!corner.volume_exists(&gone.volume).await);
    assert!(!corner.network_exists(gone.network.as_ref().unwrap()).await);
    assert!(corner.container_exists(&kept.container).await);
    assert!(corner.volume_exists(&kept.volume).await);
    assert!(corner.network_exists(kept.network.as_ref().unwrap()).await);
    assert!(corner.volume_exists(&held).await);
    assert!(corner.container_exists(&user).await);
    for c in &decoys.containers {
        assert!(
            corner.container_exists(c).await,
            "decoy container {c} removed"
        );
    }
    for v in &decoys.volumes {
        assert!(corner.volume_exists(v).await, "decoy volume {v} removed");
    }
    assert_eq!(corner.image_ids().await, images, "images changed");
    assert_docker0();
}

trial!(core_promises_on_docker_20_10);
async fn core_promises_on_docker_20_10() {
    let host = main_host();
    let socket = host.strip_prefix("unix://").expect("a unix socket");
    core_promises(Path::new(socket), "1.41", "eng-core-2010").await;
}

trial!(core_promises_on_docker_26_1);
async fn core_promises_on_docker_26_1() {
    let engine = CurrentDocker::new().shared().await;
    core_promises(engine.socket(), "1.45", "eng-core-261").await;
}

// ----- 6. Podman ---------------------------------------------------------------

/// A running container made by the podman CLI has a 10 s StopTimeout and
/// ignores SIGTERM (`sleep` as PID 1): a forced removal alone would wait
/// 10 s. sandboxctl kills it first, so apply takes well under that.
trial!(podman_container_made_by_its_cli_is_removed_without_the_stop_wait);
async fn podman_container_made_by_its_cli_is_removed_without_the_stop_wait() {
    let engine = podman().await;
    let scope = unique_scope("eng-podman-kill");
    let corner = Corner::on(&engine, &scope);
    let name = corner.unique("slow");
    let out = engine
        .podman_cli()
        .args(["run", "-d", "--network", "none", "--name", &name])
        .args(["--label", "ca.sandbox=1", "--label", "ca.sandbox.id=slow"])
        .args(["--label", &corner.scope_arg()])
        .args([TEST_IMAGE, SLEEP, "infinity"])
        .output()
        .expect("run podman");
    assert!(
        out.status.success(),
        "podman run: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let inspected = corner
        .docker()
        .inspect_container(&id, None)
        .await
        .expect("inspect the podman container");
    assert_eq!(
        inspected.config.and_then(|c| c.stop_timeout),
        Some(10),
        "a podman CLI container waits 10 s on SIGTERM"
    );
    assert_eq!(inspected.state.and_then(|s| s.running), Some(true));
    let lv = corner.leaked_volume("lv").await;
    let proxy = Proxy::start_to(engine.socket());

    let out = cli(&corner, "")
        .docker_host(&proxy.docker_host())
        .run_with(["--format", "json", "apply"]);
    out.success();
    // The removal is the SIGKILL, the DELETE, and the next request (the
    // verification's listing) arriving; apply as a whole also waits on
    // the engine's other answers, which say nothing about removal.
    let seen = proxy.seen();
    let kill = seen
        .iter()
        .find(|s| s.method == "POST" && s.path.starts_with(&format!("/containers/{id}/kill")))
        .unwrap_or_else(|| panic!("no kill was sent first:\n{}", proxy.dump()));
    assert!(kill.path.contains("signal=SIGKILL"), "{}", proxy.dump());
    let delete = seen
        .iter()
        .find(|s| s.method == "DELETE" && s.path.starts_with(&format!("/containers/{id}")))
        .unwrap_or_else(|| panic!("no DELETE of the container:\n{}", proxy.dump()));
    assert!(delete.seq > kill.seq, "{}", proxy.dump());
    assert_eq!(delete.status, Some(204), "{}", proxy.dump());
    let after = seen
        .iter()
        .find(|s| s.seq > delete.seq && s.method == "GET")
        .unwrap_or_else(|| panic!("no listing after the removal:\n{}", proxy.dump()));
    let removal = after.at - kill.at;
    eprintln!(
        "podman: kill + remove of a podman-CLI container took {removal:?} (apply {:?})",
        out.elapsed
    );
    assert!(
        removal < Duration::from_secs(5),
        "the removal waited out the 10 s stop timeout: {removal:?}\n{}",
        proxy.dump()
    );
    let report = out.json();
    assert_eq!(
        names(&report, "removed", "containers", "id"),
        vec![id.clone()]
    );
    assert_eq!(names(&report, "removed", "volumes", "name"), vec![lv]);
    assert!(!corner.container_exists(&id).await);
    assert_docker0();
}

/// A managed volume an unmanaged running container mounts is blocked on
/// Podman too (or, if the holder appeared between listing and removal,
/// Podman's 409 is reported naming it); the free leak goes; exit 1.
trial!(podman_volume_held_by_an_unmanaged_container_is_blocked);
async fn podman_volume_held_by_an_unmanaged_container_is_blocked() {
    let engine = podman().await;
    let scope = unique_scope("eng-podman-held");
    let corner = Corner::on(&engine, &scope);
    let (held, free) = tokio::join!(corner.leaked_volume("held"), corner.leaked_volume("free"));
    let user = corner.unmanaged_user(&held).await;

    let out = cli(&corner, "")
        .docker_host(&engine.socket_host())
        .run_with(["--format", "json", "apply"]);
    out.expect_code(1);
    let report = out.json();
    assert_eq!(names(&report, "removed", "volumes", "name"), vec![free]);
    let left = list(&report, "remainingVolumes");
    assert_eq!(left.len(), 1, "{report:#}");
    assert_eq!(left[0]["name"], held.as_str());
    let code = left[0]["reason"]["code"].as_str().unwrap();
    let text = left[0]["reason"]["text"].as_str().unwrap();
    match code {
        "heldByUnmanaged" => assert_eq!(left[0]["reason"]["holders"][0]["id"], user.as_str()),
        "removalFailed" => assert!(text.contains(&user[..12]), "{report:#}"),
        other => panic!("unexpected reason {other}: {report:#}"),
    }
    assert!(corner.volume_exists(&held).await);
    assert!(corner.container_exists(&user).await);
    assert_docker0();
}

/// Podman ORs several `label` filters on the volume list: a volume with only
/// the scope label comes back from the managed query. It survives, and the CLI
/// warns that the engine returned an object outside its filter.
/// A Podman of its own also keeps the count exact.
trial!(podman_foreign_volume_returned_by_ored_filters_survives_with_a_warning);
async fn podman_foreign_volume_returned_by_ored_filters_survives_with_a_warning() {
    let engine = podman().await;
    let scope = unique_scope("eng-podman-or");
    let corner = Corner::on(&engine, &scope);
    let (foreign, leak) = tokio::join!(corner.volume(None, &[]), corner.leaked_volume("lv"));
    // Podman's behavior, the premise of this test.
    let filters = std::collections::HashMap::from([(
        "label".to_string(),
        vec!["ca.sandbox=1".to_string(), corner.scope_arg()],
    )]);
    let listed: Vec<String> = corner
        .docker()
        .list_volumes(Some(
            bollard::query_parameters::ListVolumesOptionsBuilder::new()
                .filters(&filters)
                .build(),
        ))
        .await
        .expect("list volumes")
        .volumes
        .unwrap_or_default()
        .into_iter()
        .map(|v| v.name)
        .collect();
    assert!(
        listed.contains(&foreign),
        "Podman no longer ORs volume label filters: {listed:?}"
    );
    let run = cli(&corner, "").docker_host(&engine.socket_host());
    let warning = "warning: engine default returned 1 object that does not carry the labels";

    let out = run.run_with(["plan"]);
    out.success();
    assert!(out.stderr.contains(warning), "{}", out.dump());
    assert!(out.stderr.contains(&corner.scope_arg()), "{}", out.dump());
    assert!(!out.stdout.contains(&foreign), "{}", out.dump());

    let out = run.run_with(["--format", "json", "apply"]);
    out.success();
    assert!(out.stderr.contains(warning), "{}", out.dump());
    assert_eq!(
        names(&out.json(), "removed", "volumes", "name"),
        vec![leak.clone()]
    );
    assert!(
        corner.volume_exists(&foreign).await,
        "the foreign volume was removed"
    );
    assert!(!corner.volume_exists(&leak).await);
    drop(corner);
    drop(engine);
    assert_docker0();
}

// ----- 7. a fleet --------------------------------------------------------------

/// A state file naming `engines` (`[[engine]] name/host`), scoped by its
/// `[scope]` table (a saved plan refuses `--scope`), then `extra`.
fn fleet_state(scope: &str, engines: &[(&str, &Engine)], extra: &str) -> String {
    let mut state = format!("[scope]\nlabels = {{ \"ca.sandbox.test\" = \"{scope}\" }}\n\n");
    for (name, engine) in engines {
        state.push_str(&format!(
            "[[engine]]\nname = \"{name}\"\nhost = \"{}\"\n\n",
            engine.socket_host()
        ));
    }
    state.push_str(extra);
    state
}

/// `engine:name` of each entry of `report[section][kind]`, sorted.
fn engine_names(report: &Value, section: &str, kind: &str) -> Vec<String> {
    sorted(list(&report[section], kind).iter().map(|v| {
        format!(
            "{}:{}",
            v["engine"].as_str().unwrap_or_default(),
            v["name"].as_str().unwrap_or_default()
        )
    }))
}

/// Two dockerd and Podman from one state file. `--engine` narrows; a box
/// declared on one engine stays there and is reaped on the others; leaks go
/// on every engine and decoys survive on every engine; with one engine
/// stopped, its part fails alone (kind `engine`, exit 1) while the others
/// converge and are reported.
trial!(fleet_of_two_dockerd_and_podman_from_one_state_file);
async fn fleet_of_two_dockerd_and_podman_from_one_state_file() {
    let (d1, d2, pm) = tokio::join!(second(), SecondDockerd::new().start(), podman());
    let scope = unique_scope("eng-fleet");
    let named: [(&str, &Engine); 3] = [("d1", &d1), ("d2", &d2), ("pm", &pm)];
    let mut corners: Vec<Corner> = named.iter().map(|(_, e)| Corner::on(e, &scope)).collect();
    let mut homes = Vec::new();
    let mut leaks = Vec::new();
    let mut decoys = Vec::new();
    for (i, corner) in corners.iter().enumerate() {
        let (home, leak, decoy) = tokio::join!(
            corner.add_box("home", named[i].0 != "pm"),
            corner.leaked_volume("leak"),
            corner.decoys()
        );
        homes.push(home);
        leaks.push(leak);
        decoys.push(decoy);
    }
    let run = bare_cli(&fleet_state(
        &scope,
        &named,
        "[[box]]\nid = \"home\"\nengine = \"d1\"\n",
    ));

    // --engine narrows to d2.
    let out = run.run_with(["--engine", "d2", "--format", "json", "apply"]);
    out.success();
    let report = out.json();
    let summaries: Vec<&str> = list(&report, "engines")
        .iter()
        .map(|e| e["engine"].as_str().unwrap())
        .collect();
    assert_eq!(summaries, ["d2"], "{report:#}");
    assert!(!corners[1].container_exists(&homes[1].container).await);
    assert!(!corners[1].volume_exists(&leaks[1]).await);
    assert!(
        corners[0].volume_exists(&leaks[0]).await,
        "--engine d2 touched d1"
    );
    assert!(
        corners[2].volume_exists(&leaks[2]).await,
        "--engine d2 touched pm"
    );

    // The whole fleet.
    let out = run.run_with(["plan"]);
    out.success();
    for (name, engine) in named {
        let line = format!("Engine {name}: {}", engine.socket_host());
        assert!(out.stdout.contains(&line), "no {line:?}\n{}", out.dump());
    }
    let out = run.run_with(["--format", "json", "apply"]);
    out.success();
    let report = out.json();
    assert_eq!(report["converged"], true, "{report:#}");
    assert_eq!(
        engine_names(&report, "removed", "volumes"),
        sorted([
            format!("d1:{}", leaks[0]),
            format!("pm:{}", homes[2].volume),
            format!("pm:{}", leaks[2]),
        ]),
        "{report:#}"
    );
    assert_eq!(
        engine_names(&report, "removed", "containers"),
        vec![format!("pm:{}", homes[2].container_name)],
        "{report:#}"
    );
    assert!(
        corners[0].container_exists(&homes[0].container).await,
        "home left d1"
    );
    assert!(
        corners[0].volume_exists(&homes[0].volume).await,
        "home left d1"
    );
    assert!(
        !corners[2].container_exists(&homes[2].container).await,
        "home stayed on pm"
    );
    for (corner, decoy) in corners.iter().zip(&decoys) {
        for c in &decoy.containers {
            assert!(
                corner.container_exists(c).await,
                "decoy container {c} removed"
            );
        }
        for v in &decoy.volumes {
            assert!(corner.volume_exists(v).await, "decoy volume {v} removed");
        }
    }

    // d2 stops; new leaks on the others. d2's part fails alone.
    let d2_host = d2.socket_host();
    let (new1, new3) = tokio::join!(
        corners[0].leaked_volume("new"),
        corners[2].leaked_volume("new")
    );
    let stopping = Instant::now();
    drop(corners.remove(1));
    drop(d2);
    eprintln!("fleet: d2 stopped in {:?}", stopping.elapsed());
    let out = run.run_with(["--format", "json", "apply"]);
    out.expect_code(1);
    let report = out.json();
    let failures = list(&report, "failures");
    assert_eq!(failures.len(), 1, "{report:#}");
    assert_eq!(failures[0]["kind"], "engine");
    assert_eq!(failures[0]["engine"], "d2");
    let summary: Vec<(String, bool)> = list(&report, "engines")
        .iter()
        .map(|e| {
            (
                e["engine"].as_str().unwrap().to_string(),
                e["converged"] == true,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("d1".to_string(), true),
            ("d2".to_string(), false),
            ("pm".to_string(), true)
        ],
        "{report:#}"
    );
    assert!(
        list(&report, "engines")[1]["endpoint"]
            .as_str()
            .unwrap()
            .contains(&d2_host),
        "{report:#}"
    );
    assert_eq!(
        engine_names(&report, "removed", "volumes"),
        sorted([format!("d1:{new1}"), format!("pm:{new3}")])
    );
    assert!(!corners[0].volume_exists(&new1).await);
    assert!(!corners[1].volume_exists(&new3).await);
    assert!(corners[0].container_exists(&homes[0].container).await);
    let out = run.run_with(["plan"]);
    out.expect_code(1);
    assert!(out.stdout.contains("Engine d2:"), "{}", out.dump());
    drop(corners);
    drop(pm);
    assert_docker0();
}

/// A saved fleet plan (`plan --out`) is applied with `apply FILE` when no
/// engine changed, and refused as stale, removing nothing on any engine,
/// when one did. Engines: the main dockerd, the second one and Docker 26.1.
trial!(saved_fleet_plan_is_applied_and_refused_when_any_engine_changed);
async fn saved_fleet_plan_is_applied_and_refused_when_any_engine_changed() {
    let (second, current) = tokio::join!(second(), CurrentDocker::new().shared());
    let scope = unique_scope("eng-fleet-saved");
    let corners = [
        Corner::on_main(&scope),
        Corner::on(&second, &scope),
        Corner::on(&current, &scope),
    ];
    let main_host = main_host();
    let state = format!(
        "[scope]\nlabels = {{ \"ca.sandbox.test\" = \"{scope}\" }}\n\n\
         [[engine]]\nname = \"main\"\nhost = \"{main_host}\"\n\n\
         [[engine]]\nname = \"second\"\nhost = \"{}\"\n\n\
         [[engine]]\nname = \"current\"\nhost = \"{}\"\n",
        second.socket_host(),
        current.socket_host()
    );
    let run = bare_cli(&state);
    let mut leaks = Vec::new();
    for corner in &corners {
        leaks.push(corner.leaked_volume("leak").await);
    }
    let saved = run.dir().join("fleet-plan.json").display().to_string();
    let out = run.run_with(["--format", "json", "plan", "--out", &saved]);
    out.success();
    let plan = out.json();
    let planned: Vec<&str> = list(&plan, "engines")
        .iter()
        .map(|p| p["engine"].as_str().unwrap())
        .collect();
    assert_eq!(planned, ["main", "second", "current"], "{plan:#}");

    let late = corners[2].leaked_volume("late").await;
    let out = run.run_with(["--format", "json", "apply", &saved]);
    out.expect_code(1);
    assert!(
        out.stdout.contains("stale") && out.stdout.contains("current"),
        "not refused as stale on engine current:\n{}",
        out.dump()
    );
    for (corner, leak) in corners.iter().zip(&leaks) {
        assert!(
            corner.volume_exists(leak).await,
            "a stale fleet plan removed {leak}"
        );
    }
    assert!(corners[2].volume_exists(&late).await);

    let out = run.run_with(["--format", "json", "plan", "--out", &saved]);
    out.success();
    let out = run.run_with(["--format", "json", "apply", &saved]);
    out.success();
    let report = out.json();
    assert_eq!(
        engine_names(&report, "removed", "volumes"),
        sorted([
            format!("main:{}", leaks[0]),
            format!("second:{}", leaks[1]),
            format!("current:{}", leaks[2]),
            format!("current:{late}"),
        ]),
        "{report:#}"
    );
    assert_docker0();
}

/// In a fleet, Podman's ORed volume filters are caught the same way: the
/// foreign volume survives and both `plan` and `apply` warn, naming the
/// fleet's engine (`pm`) and the count.
trial!(fleet_warns_about_objects_podman_returned_outside_the_filter);
async fn fleet_warns_about_objects_podman_returned_outside_the_filter() {
    let (d1, pm) = tokio::join!(second(), podman());
    let scope = unique_scope("eng-fleet-warn");
    let (c1, c2) = (Corner::on(&d1, &scope), Corner::on(&pm, &scope));
    let (foreign, leak1, leak2) = tokio::join!(
        c2.volume(None, &[]),
        c1.leaked_volume("leak"),
        c2.leaked_volume("leak")
    );
    let run = bare_cli(&fleet_state(&scope, &[("d1", &d1), ("pm", &pm)], ""));
    let warning = "warning: engine pm returned 1 object that does not carry the labels";
    let mut silent = Vec::new();
    let out = run.run_with(["plan"]);
    out.success();
    if !out.stderr.contains(warning) {
        silent.push(format!("plan:\n{}", out.dump()));
    }
    let out = run.run_with(["--format", "json", "apply"]);
    out.success();
    if !out.stderr.contains(warning) {
        silent.push(format!("apply:\n{}", out.dump()));
    }
    assert_eq!(
        engine_names(&out.json(), "removed", "volumes"),
        sorted([format!("d1:{leak1}"), format!("pm:{leak2}")])
    );
    assert!(
        c2.volume_exists(&foreign).await,
        "the foreign volume was removed"
    );
    assert!(
        silent.is_empty(),
        "no warning about the foreign volume from:\n{}",
        silent.join("\n")
    );
    drop((c1, c2));
    drop(pm);
    assert_docker0();
}
