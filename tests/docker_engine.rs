//! `DockerEngine` against the real daemon (through the `Sandbox` harness) and
//! against small fake daemons on a local socket for the failures a real one
//! will not produce on demand (cut connections, hangs).
//!
//! Claims here are about Docker and the bollard engine only; planning and the
//! CLI are tested elsewhere.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use sandboxctl::engine::docker::{DockerEngine, DEFAULT_HOST};
use sandboxctl::engine::{Engine, EngineError};
use sandboxctl::model::Scope;

use crate::support::docker::{ContainerSpec, Run, Sandbox, VolumeSpec, TEST_IMAGE};

fn ids(list: &[sandboxctl::model::ContainerInfo]) -> BTreeSet<String> {
    list.iter().map(|c| c.id.clone()).collect()
}

fn names(list: &[sandboxctl::model::VolumeInfo]) -> BTreeSet<String> {
    list.iter().map(|v| v.name.clone()).collect()
}

#[tokio::test]
async fn negotiates_the_daemons_api_version() {
    let sbx = Sandbox::new("negotiates").await;
    let engine = sbx.engine().await;
    let server = sbx.docker().version().await.unwrap();
    let server_api = server.api_version.unwrap();
    let parse = |v: &str| -> (u64, u64) {
        let (a, b) = v.split_once('.').unwrap();
        (a.parse().unwrap(), b.parse().unwrap())
    };
    let default = bollard::API_DEFAULT_VERSION;
    let expected =
        parse(&server_api).min((default.major_version as u64, default.minor_version as u64));
    assert_eq!(
        parse(&engine.api_version()),
        expected,
        "server speaks {server_api}"
    );
    // And a versioned call really works at that version.
    engine.list_volumes(&sbx.managed_filters()).await.unwrap();
    assert_eq!(
        engine.endpoint(),
        std::env::var("DOCKER_HOST")
            .ok()
            .filter(|h| !h.is_empty())
            .as_deref()
            .unwrap_or(DEFAULT_HOST)
    );
}

#[tokio::test]
async fn label_filters_match_exactly_one() {
    let sbx = Sandbox::new("label-filters").await;
    let b = sbx.add_box("alpha", Run::Running).await;
    let decoys = sbx.decoys(Run::Created).await;
    let engine = sbx.engine().await;

    let containers = engine
        .list_containers(&sbx.managed_filters())
        .await
        .unwrap();
    assert_eq!(ids(&containers), BTreeSet::from([b.container.id.clone()]));
    let volumes = engine.list_volumes(&sbx.managed_filters()).await.unwrap();
    assert_eq!(names(&volumes), BTreeSet::from([b.volume.clone()]));
    let scope = Scope::new(sbx.scope_labels());
    assert!(containers.iter().all(|c| scope.manages(&c.labels)));

    // The scope label alone: the box and the four labeled decoys.
    let scoped = engine.list_containers(&[sbx.scope_arg()]).await.unwrap();
    assert_eq!(scoped.len(), 5, "{scoped:#?}");
    let scoped_volumes = engine.list_volumes(&[sbx.scope_arg()]).await.unwrap();
    assert_eq!(scoped_volumes.len(), 5, "{scoped_volumes:#?}");

    // No filter at all lists everything, the unlabeled decoys included.
    let all = ids(&engine.list_containers(&[]).await.unwrap());
    for d in &decoys.containers {
        assert!(
            all.contains(&d.id),
            "{} missing from the unfiltered list",
            d.name
        );
    }
    let all_volumes = names(&engine.list_volumes(&[]).await.unwrap());
    for v in &decoys.volumes {
        assert!(
            all_volumes.contains(v),
            "{v} missing from the unfiltered list"
        );
    }

    // Several filters are ANDed.
    let mut by_box = sbx.managed_filters();
    by_box.push("ca.sandbox.id=alpha".into());
    assert_eq!(engine.list_containers(&by_box).await.unwrap().len(), 1);
    by_box.push("ca.sandbox.id=beta".into());
    assert!(engine.list_containers(&by_box).await.unwrap().is_empty());
}

#[tokio::test]
async fn lists_names_states_labels_and_named_volume_mounts() {
    let sbx = Sandbox::new("container-fields").await;
    let running = sbx.add_box("run", Run::Running).await;
    let exited = sbx.add_box("done", Run::Exited).await;
    let created = sbx.add_box("new", Run::Created).await;
    let extra = sbx.box_volume("run").await;
    let mixed = sbx
        .container(
            ContainerSpec::new()
                .in_box("run")
                .volume(&running.volume)
                .volume(&extra)
                .bind("/etc", "/host-etc")
                .tmpfs("/scratch"),
        )
        .await;
    let engine = sbx.engine().await;

    let list = engine
        .list_containers(&sbx.managed_filters())
        .await
        .unwrap();
    let find = |id: &str| list.iter().find(|c| c.id == id).unwrap().clone();
    for (b, state) in [
        (&running, "running"),
        (&exited, "exited"),
        (&created, "created"),
    ] {
        let c = find(&b.container.id);
        assert_eq!(c.name, b.container.name);
        assert_eq!(c.state, state);
        assert_eq!(c.box_id(), Some(b.box_id.as_str()));
        assert_eq!(c.labels.get("ca.sandbox").map(String::as_str), Some("1"));
        assert_eq!(
            c.labels.get("ca.sandbox.test").map(String::as_str),
            Some(sbx.scope_value())
        );
        assert_eq!(c.mounts, BTreeSet::from([b.volume.clone()]));
        // Inspect agrees with the listing.
        assert_eq!(engine.inspect_container(&c.id).await.unwrap(), c);
    }
    let m = find(&mixed.id);
    assert_eq!(
        m.mounts,
        BTreeSet::from([running.volume.clone(), extra.clone()]),
        "bind mounts and tmpfs are not volumes"
    );
    assert_eq!(
        engine.inspect_container(&mixed.id).await.unwrap().mounts,
        m.mounts
    );

    let volumes = engine.list_volumes(&sbx.managed_filters()).await.unwrap();
    assert_eq!(volumes.len(), 4);
    for v in &volumes {
        let created_at = v.created_at.as_deref().expect("volumes report CreatedAt");
        assert!(
            created_at.len() >= 20 && created_at.contains('T'),
            "{created_at}"
        );
        assert_eq!(engine.inspect_volume(&v.name).await.unwrap(), *v);
    }
    let extra_info = volumes.iter().find(|v| v.name == extra).unwrap();
    assert_eq!(extra_info.box_id(), Some("run"));
}

#[tokio::test]
async fn removes_a_running_container_and_keeps_its_named_volume() {
    let sbx = Sandbox::new("remove-running").await;
    let b = sbx.add_box("busy", Run::Running).await;
    let engine = sbx.engine().await;

    let started = Instant::now();
    engine.remove_container(&b.container.id).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!sbx.container_exists(&b.container.id).await);
    assert!(sbx.volume_exists(&b.volume).await, "named volumes stay");

    engine.remove_volume(&b.volume).await.unwrap();
    assert!(!sbx.volume_exists(&b.volume).await);
    assert_eq!(sbx.remaining().await, Default::default());
}

#[tokio::test]
async fn missing_objects_are_not_found() {
    let sbx = Sandbox::new("not-found").await;
    let engine = sbx.engine().await;
    let gone_id = "0123456789ab".repeat(5) + "cdef";
    let gone_volume = sbx.unique("never-created");

    let e = engine.remove_container(&gone_id).await.unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    assert!(
        matches!(&e, EngineError::NotFound { call, .. } if call == "remove container 0123456789ab"),
        "{e:?}"
    );
    let e = engine.inspect_container(&gone_id).await.unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    let e = engine.remove_volume(&gone_volume).await.unwrap_err();
    assert!(
        matches!(&e, EngineError::NotFound { call, .. } if *call == format!("remove volume {gone_volume}")),
        "{e:?}"
    );
    let e = engine.inspect_volume(&gone_volume).await.unwrap_err();
    assert!(e.is_not_found(), "{e:?}");

    // Removing twice: the second answer is a 404.
    let c = sbx.leaked_container(Run::Exited).await;
    engine.remove_container(&c.id).await.unwrap();
    assert!(engine
        .remove_container(&c.id)
        .await
        .unwrap_err()
        .is_not_found());
}

#[tokio::test]
async fn volume_in_use_is_a_conflict_naming_its_users() {
    let sbx = Sandbox::new("volume-in-use").await;
    let stopped = sbx.add_box("stopped", Run::Exited).await;
    let user = sbx.unmanaged_user(&stopped.volume, Run::Running).await;
    let engine = sbx.engine().await;

    let e = engine.remove_volume(&stopped.volume).await.unwrap_err();
    assert!(matches!(e, EngineError::Conflict { .. }), "{e:?}");
    assert!(!e.is_removal_in_progress());
    let users: BTreeSet<String> = e
        .volume_users()
        .expect("users in the message")
        .into_iter()
        .collect();
    assert!(
        users.contains(&stopped.container.id) || users.contains(&user.id),
        "{users:?} names neither {} nor {}",
        stopped.container.id,
        user.id
    );
    assert!(users
        .iter()
        .all(|u| *u == stopped.container.id || *u == user.id));
    assert!(
        sbx.volume_exists(&stopped.volume).await,
        "a 409 removes nothing"
    );

    // Still in use while any user is left, running or not.
    engine.remove_container(&user.id).await.unwrap();
    let e = engine.remove_volume(&stopped.volume).await.unwrap_err();
    assert_eq!(e.volume_users(), Some(vec![stopped.container.id.clone()]));
    engine
        .remove_container(&stopped.container.id)
        .await
        .unwrap();
    engine.remove_volume(&stopped.volume).await.unwrap();
}

#[tokio::test]
async fn images_are_listed_by_reference_and_left_alone() {
    let sbx = Sandbox::new("images").await;
    let before = sbx.ca_sbx_images().await;
    assert!(before.contains(sbx.image_id()));
    let engine = sbx.engine().await;

    let images = engine.list_images("ca-sbx:*").await.unwrap();
    let ours = images
        .iter()
        .find(|i| i.id == sbx.image_id())
        .expect("the test image is a ca-sbx image");
    assert!(ours.tags.contains(&TEST_IMAGE.to_string()), "{ours:?}");
    assert!(ours.tags.windows(2).all(|w| w[0] <= w[1]), "tags sorted");
    assert!(images
        .iter()
        .all(|i| i.tags.iter().all(|t| t != "<none>:<none>")));
    let exact = engine.list_images(TEST_IMAGE).await.unwrap();
    assert_eq!(exact.len(), 1);
    assert!(engine
        .list_images("ca-sbx-nothing-is-tagged-like-this:*")
        .await
        .unwrap()
        .is_empty());

    // Removing every container that uses the image leaves the image.
    let b = sbx.add_box("img", Run::Running).await;
    engine.remove_container(&b.container.id).await.unwrap();
    engine.remove_volume(&b.volume).await.unwrap();
    assert!(sbx.ca_sbx_images().await.contains(sbx.image_id()));
    assert!(before.is_subset(&sbx.ca_sbx_images().await));
}

#[tokio::test]
async fn unreachable_engines_fail_fast() {
    let t = Duration::from_secs(5);
    for (host, hint) in [
        ("unix:///nonexistent.sock", "does not exist"),
        ("tcp://127.0.0.1:1", "negotiation failed"),
        ("ftp://example", "unsupported"),
    ] {
        let started = Instant::now();
        let e = match DockerEngine::connect_to(Some(host), t).await {
            Ok(_) => panic!("{host} connected"),
            Err(e) => e,
        };
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{host}: {:?}",
            started.elapsed()
        );
        match &e {
            EngineError::Unreachable { endpoint, detail } => {
                assert_eq!(endpoint, host);
                assert!(detail.contains(hint), "{host}: {detail}");
            }
            other => panic!("{host}: {other:?}"),
        }
        assert!(e.to_string().contains(host), "{e}");
    }
}

/// `connect` reads DOCKER_HOST. Checked in a child process (this test binary
/// re-run for this one test), so the environment of parallel tests is untouched.
#[test]
fn connect_reads_docker_host() {
    const CHILD: &str = "SANDBOXCTL_TEST_CONNECT_CHILD";
    let host = "unix:///nonexistent-sandboxctl-test.sock";
    if std::env::var_os(CHILD).is_some() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let e = match rt.block_on(DockerEngine::connect(Duration::from_secs(2))) {
            Ok(_) => panic!("connected to {host}"),
            Err(e) => e,
        };
        assert!(
            matches!(&e, EngineError::Unreachable { endpoint, .. } if endpoint == host),
            "{e:?}"
        );
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "docker_engine::connect_reads_docker_host",
            "--exact",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("DOCKER_HOST", host)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// ----- fake daemons -------------------------------------------------------

/// How a fake daemon answers a request other than `/version`.
#[derive(Clone, Copy)]
enum Answer {
    /// Closes the connection without answering.
    Close,
    /// Promises a 100-byte body, sends 10 bytes and closes.
    Truncate,
    /// Never answers.
    Hang,
    /// Answers with this status and a Docker error body.
    Status(u16),
}

/// A fake daemon on a unix socket in a temp dir; stops when dropped.
struct FakeDaemon {
    host: String,
    socket: std::path::PathBuf,
    accept: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl FakeDaemon {
    /// Stops accepting: later connections are refused (the socket file stays).
    fn stop(&self) {
        self.accept.abort();
    }
}

impl Drop for FakeDaemon {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Serves `/version` (API 1.41, or never if `hang_version`) and answers
/// everything else with `answer`.
fn fake_daemon(answer: Answer, hang_version: bool) -> FakeDaemon {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("docker.sock");
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    let accept = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(serve(stream, answer, hang_version));
        }
    });
    FakeDaemon {
        host: format!("unix://{}", socket.display()),
        socket,
        accept,
        _dir: dir,
    }
}

async fn serve<S>(mut stream: S, answer: Answer, hang_version: bool)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head);
    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
    let reply = |status: u16, body: &str| {
        format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    if path.ends_with("/version") {
        if hang_version {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        let body = r#"{"ApiVersion":"1.41","Version":"20.10.24","MinAPIVersion":"1.12"}"#;
        let _ = stream.write_all(reply(200, body).as_bytes()).await;
        return;
    }
    match answer {
        Answer::Close => {}
        Answer::Truncate => {
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n[{\"Id\":\"ab")
                .await;
        }
        Answer::Hang => tokio::time::sleep(Duration::from_secs(3600)).await,
        Answer::Status(status) => {
            let _ = stream
                .write_all(reply(status, r#"{"message":"fake failure"}"#).as_bytes())
                .await;
        }
    }
    let _ = stream.shutdown().await;
}

#[tokio::test]
async fn connection_cut_mid_call_is_a_transport_error() {
    for answer in [Answer::Close, Answer::Truncate] {
        let fake = fake_daemon(answer, false);
        let engine = DockerEngine::connect_to(Some(&fake.host), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(engine.api_version(), "1.41");
        let e = engine.list_containers(&[]).await.unwrap_err();
        assert!(
            matches!(&e, EngineError::Transport { call, .. } if call == "list containers"),
            "{e:?}"
        );
        if matches!(answer, Answer::Close) {
            // (A removal only reads the status line: a cut body after a 2xx
            // status is a success for it, as the engine did the work.)
            let e = engine.remove_volume("v").await.unwrap_err();
            assert!(
                matches!(&e, EngineError::Transport { call, .. } if call == "remove volume v"),
                "{e:?}"
            );
        }
    }
}

#[tokio::test]
async fn an_engine_that_goes_away_mid_run_is_unreachable() {
    let fake = fake_daemon(Answer::Status(500), false);
    let engine = DockerEngine::connect_to(Some(&fake.host), Duration::from_secs(5))
        .await
        .unwrap();
    fake.stop();
    tokio::task::yield_now().await;
    let refused = engine.list_containers(&[]).await.unwrap_err();
    assert!(
        matches!(&refused, EngineError::Unreachable { endpoint, detail }
            if *endpoint == fake.host && detail.starts_with("list containers: ")),
        "{refused:?}"
    );
    std::fs::remove_file(&fake.socket).unwrap();
    let missing = engine.remove_volume("v").await.unwrap_err();
    assert!(
        matches!(&missing, EngineError::Unreachable { detail, .. } if detail.starts_with("remove volume v: ")),
        "{missing:?}"
    );
}

#[tokio::test]
async fn other_statuses_keep_their_code() {
    let fake = fake_daemon(Answer::Status(500), false);
    let engine = DockerEngine::connect_to(Some(&fake.host), Duration::from_secs(5))
        .await
        .unwrap();
    let e = engine.remove_container(&"f".repeat(64)).await.unwrap_err();
    assert_eq!(
        e,
        EngineError::Status {
            call: "remove container ffffffffffff".into(),
            status: 500,
            message: "fake failure".into()
        }
    );
}

#[tokio::test]
async fn hung_engines_time_out() {
    let fake = fake_daemon(Answer::Hang, false);
    let engine = DockerEngine::connect_to(Some(&fake.host), Duration::from_millis(700))
        .await
        .unwrap();
    let started = Instant::now();
    let e = engine.list_volumes(&[]).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        e,
        EngineError::Timeout {
            call: "list volumes".into(),
            seconds: 1
        }
    );

    // A daemon that accepts but never answers the version check is unreachable.
    let fake = fake_daemon(Answer::Hang, true);
    let started = Instant::now();
    let e = match DockerEngine::connect_to(Some(&fake.host), Duration::from_millis(700)).await {
        Ok(_) => panic!("connected to a hung daemon"),
        Err(e) => e,
    };
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(
        matches!(&e, EngineError::Unreachable { detail, .. } if detail.contains("no answer")),
        "{e:?}"
    );
}

#[tokio::test]
async fn tcp_hosts_are_honoured() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream, Answer::Status(418), false));
        }
    });
    let host = format!("tcp://127.0.0.1:{port}");
    let engine = DockerEngine::connect_to(Some(&host), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(engine.endpoint(), host);
    let e = engine.list_images("ca-sbx:*").await.unwrap_err();
    assert!(
        matches!(e, EngineError::Status { status: 418, .. }),
        "{e:?}"
    );
}

#[tokio::test]
async fn harness_cleanup_removes_only_its_own_objects() {
    let other = Sandbox::new("bystander").await;
    let bystander = other.add_box("keep", Run::Running).await;
    {
        let sbx = Sandbox::new("cleanup").await;
        sbx.add_box("a", Run::Running).await;
        sbx.shared_volume(Some("a"), "a", "b", Run::Exited).await;
        sbx.leaked_container(Run::Created).await;
        sbx.leaked_volume().await;
        sbx.decoys(Run::Running).await;
        sbx.volume(VolumeSpec::new().unscoped()).await;
        let left = sbx.remaining().await;
        assert_eq!(left.containers.len(), 10, "{left:#?}");
        assert_eq!(left.volumes.len(), 10, "{left:#?}");
        assert!(sbx.cleanup().await.is_empty());
        assert_eq!(sbx.remaining().await, Default::default());
    }
    assert!(other.container_exists(&bystander.container.id).await);
    assert!(other.volume_exists(&bystander.volume).await);
}

#[tokio::test]
async fn harness_cleans_up_after_a_panic() {
    let (tx, rx) = std::sync::mpsc::channel();
    let result = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let sbx = Sandbox::new("panics").await;
            let b = sbx.add_box("p", Run::Running).await;
            let d = sbx.decoys(Run::Created).await;
            tx.send((b, d)).unwrap();
            panic!("deliberate panic with a live sandbox");
        })
    })
    .join();
    assert!(result.is_err());
    let (b, d) = rx.recv().unwrap();
    let probe = Sandbox::new("panics-probe").await;
    assert!(!probe.container_exists(&b.container.id).await);
    assert!(!probe.volume_exists(&b.volume).await);
    for c in &d.containers {
        assert!(
            !probe.container_exists(&c.id).await,
            "{} left behind",
            c.name
        );
    }
    for v in &d.volumes {
        assert!(!probe.volume_exists(v).await, "{v} left behind");
    }
}
