//! `DockerEngine` against the real daemon (through the `Sandbox` harness) and
//! against small fake daemons on a local socket for the failures a real one
//! will not produce on demand (cut connections, hangs).
//!
//! Claims here are about Docker and the bollard engine only: what `list`,
//! `inspect` and `remove` return for every kind, and which typed `ErrorKind`
//! each failure is. Planning and the CLI are tested elsewhere; reading
//! `DOCKER_HOST` is the endpoint resolution's (`engine_endpoints`).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use bollard::query_parameters::InspectContainerOptions;
use sandboxctl::engine::docker::{DockerEngine, DEFAULT_HOST};
use sandboxctl::engine::{Engine, EngineError, ErrorKind};
use sandboxctl::model::{Join, Kind, Namespace, Object, ObjectKey, Scope, DEFAULT_ENGINE};

use crate::support::docker::{
    engine_version, ContainerSpec, NetworkSpec, Run, Sandbox, VolumeSpec, TEST_IMAGE,
};

fn key(kind: Kind, id: &str) -> ObjectKey {
    ObjectKey::new(DEFAULT_ENGINE, kind, id)
}

fn ids(list: &[Object]) -> BTreeSet<String> {
    list.iter().map(|o| o.key.id.clone()).collect()
}

/// The object with ID (or volume name) `id`, failing the test if it was not listed.
#[track_caller]
fn find<'a>(list: &'a [Object], id: &str) -> &'a Object {
    list.iter()
        .find(|o| o.key.id == id)
        .unwrap_or_else(|| panic!("{id} not listed: {list:#?}"))
}

/// What a container depends on, by kind: its named volumes, its networks.
fn deps(o: &Object, kind: Kind) -> BTreeSet<String> {
    o.depends_on
        .iter()
        .filter(|d| d.kind == kind)
        .map(|d| d.id.clone())
        .collect()
}

fn unix_now() -> i64 {
    sandboxctl::cli::config::now()
}

trial!(negotiates_the_daemons_api_version);
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
    engine
        .list(Kind::Volume, &sbx.managed_filters())
        .await
        .unwrap();
    assert_eq!(
        engine.endpoint(),
        std::env::var("DOCKER_HOST")
            .ok()
            .filter(|h| !h.is_empty())
            .as_deref()
            .unwrap_or(DEFAULT_HOST)
    );
}

trial!(label_filters_match_exactly_one);
async fn label_filters_match_exactly_one() {
    let sbx = Sandbox::new("label-filters").await;
    let b = sbx.add_box("alpha", Run::Running).await;
    let decoys = sbx.decoys(Run::Created).await;
    let (net, net_decoy, net_unscoped) = tokio::join!(
        sbx.network(NetworkSpec::new().in_box("alpha")),
        sbx.network(NetworkSpec::new().label("ca.sandbox", "true")),
        sbx.network(NetworkSpec::new().unscoped().managed()),
    );
    let engine = sbx.engine().await;
    let filters = sbx.managed_filters();

    let containers = engine.list(Kind::Container, &filters).await.unwrap();
    assert_eq!(ids(&containers), BTreeSet::from([b.container.id.clone()]));
    let volumes = engine.list(Kind::Volume, &filters).await.unwrap();
    assert_eq!(ids(&volumes), BTreeSet::from([b.volume.clone()]));
    let networks = engine.list(Kind::Network, &filters).await.unwrap();
    assert_eq!(ids(&networks), BTreeSet::from([net.id.clone()]));
    let scope = Scope::new(sbx.scope_labels());
    for o in containers.iter().chain(&volumes).chain(&networks) {
        assert!(scope.manages(&o.labels), "{o:#?}");
        assert_eq!(o.key.engine, DEFAULT_ENGINE);
    }

    // The scope label alone: the box and the four labeled decoys; the two
    // scoped networks.
    let scoped = engine
        .list(Kind::Container, &[sbx.scope_arg()])
        .await
        .unwrap();
    assert_eq!(scoped.len(), 5, "{scoped:#?}");
    let scoped_volumes = engine.list(Kind::Volume, &[sbx.scope_arg()]).await.unwrap();
    assert_eq!(scoped_volumes.len(), 5, "{scoped_volumes:#?}");
    let scoped_networks = engine
        .list(Kind::Network, &[sbx.scope_arg()])
        .await
        .unwrap();
    assert_eq!(
        ids(&scoped_networks),
        BTreeSet::from([net.id.clone(), net_decoy.id.clone()])
    );

    // No filter at all lists everything, the unlabeled decoys included.
    let all = ids(&engine.list(Kind::Container, &[]).await.unwrap());
    for d in &decoys.containers {
        assert!(
            all.contains(&d.id),
            "{} missing from the unfiltered list",
            d.name
        );
    }
    let all_volumes = ids(&engine.list(Kind::Volume, &[]).await.unwrap());
    for v in &decoys.volumes {
        assert!(
            all_volumes.contains(v),
            "{v} missing from the unfiltered list"
        );
    }
    let all_networks = engine.list(Kind::Network, &[]).await.unwrap();
    for n in [&net, &net_decoy, &net_unscoped] {
        assert!(ids(&all_networks).contains(&n.id), "{} missing", n.name);
    }
    let predefined: BTreeSet<&str> = all_networks
        .iter()
        .map(|n| n.name.as_str())
        .filter(|n| ["bridge", "host", "none"].contains(n))
        .collect();
    assert_eq!(predefined, BTreeSet::from(["bridge", "host", "none"]));

    // Several filters are ANDed.
    let mut by_box = sbx.managed_filters();
    by_box.push("ca.sandbox.id=alpha".into());
    assert_eq!(
        engine.list(Kind::Container, &by_box).await.unwrap().len(),
        1
    );
    assert_eq!(engine.list(Kind::Network, &by_box).await.unwrap().len(), 1);
    by_box.push("ca.sandbox.id=beta".into());
    assert!(engine
        .list(Kind::Container, &by_box)
        .await
        .unwrap()
        .is_empty());
    assert!(engine
        .list(Kind::Network, &by_box)
        .await
        .unwrap()
        .is_empty());
}

trial!(lists_names_states_labels_and_named_volume_mounts);
async fn lists_names_states_labels_and_named_volume_mounts() {
    let sbx = Sandbox::new("container-fields").await;
    let started = unix_now();
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
        .list(Kind::Container, &sbx.managed_filters())
        .await
        .unwrap();
    for (b, state) in [
        (&running, "running"),
        (&exited, "exited"),
        (&created, "created"),
    ] {
        let c = find(&list, &b.container.id);
        assert_eq!(c.kind(), Kind::Container);
        assert_eq!(c.name, b.container.name);
        assert_eq!(c.state.as_deref(), Some(state));
        assert_eq!(c.box_id(), Some(b.box_id.as_str()));
        assert_eq!(c.labels.get("ca.sandbox").map(String::as_str), Some("1"));
        assert_eq!(
            c.labels.get("ca.sandbox.test").map(String::as_str),
            Some(sbx.scope_value())
        );
        assert_eq!(c.image.as_deref(), Some(TEST_IMAGE));
        let at = c.created.expect("containers report a creation time");
        assert!((started - 5..=unix_now() + 5).contains(&at), "{at}");
        assert_eq!(deps(c, Kind::Volume), BTreeSet::from([b.volume.clone()]));
        assert!(c.joins.is_empty(), "{c:#?}");
        // Inspect agrees with the listing, and also says whether the ipc
        // namespace may be joined (the daemon's default: private).
        let mut inspected = engine.inspect(&c.key).await.unwrap();
        assert_eq!(inspected.ipc_shareable, Some(false));
        inspected.ipc_shareable = None;
        assert_eq!(inspected, *c);
    }
    let m = find(&list, &mixed.id);
    assert_eq!(
        deps(m, Kind::Volume),
        BTreeSet::from([running.volume.clone(), extra.clone()]),
        "bind mounts and tmpfs are not volumes"
    );
    assert_eq!(
        engine.inspect(&m.key).await.unwrap().depends_on,
        m.depends_on
    );

    let volumes = engine
        .list(Kind::Volume, &sbx.managed_filters())
        .await
        .unwrap();
    assert_eq!(volumes.len(), 4);
    for v in &volumes {
        assert_eq!((v.kind(), &v.name), (Kind::Volume, &v.key.id));
        let at = v.created.expect("volumes report CreatedAt");
        assert!((started - 5..=unix_now() + 5).contains(&at), "{at}");
        assert!(v.state.is_none() && v.depends_on.is_empty(), "{v:#?}");
        assert_eq!(engine.inspect(&v.key).await.unwrap(), *v);
    }
    assert_eq!(find(&volumes, &extra).box_id(), Some("run"));
}

/// A labeled network lists with its labels and creation time; a container
/// attached to it lists the network's ID among what it depends on; while it
/// is attached, removing the network is `InUse` and removes nothing.
trial!(networks_list_with_labels_time_and_users_and_refuse_removal_in_use);
async fn networks_list_with_labels_time_and_users_and_refuse_removal_in_use() {
    let sbx = Sandbox::new("networks").await;
    let started = unix_now();
    let b = sbx.add_box_with_network("netbox", Run::Running).await;
    let second = sbx.network(NetworkSpec::new().in_box("netbox")).await;
    sbx.connect(&b.container, &second).await;
    let engine = sbx.engine().await;

    let networks = engine
        .list(Kind::Network, &sbx.managed_filters())
        .await
        .unwrap();
    assert_eq!(
        ids(&networks),
        BTreeSet::from([b.network.id.clone(), second.id.clone()])
    );
    let n = find(&networks, &b.network.id);
    assert_eq!(n.kind(), Kind::Network);
    assert_eq!(n.name, b.network.name);
    assert_eq!(n.box_id(), Some("netbox"));
    assert_eq!(n.labels.get("ca.sandbox").map(String::as_str), Some("1"));
    let at = n.created.expect("networks report Created");
    assert!((started - 5..=unix_now() + 5).contains(&at), "{at}");
    assert!(n.state.is_none() && n.depends_on.is_empty(), "{n:#?}");
    assert_eq!(engine.inspect(&n.key).await.unwrap(), *n);

    let containers = engine
        .list(Kind::Container, &sbx.managed_filters())
        .await
        .unwrap();
    let c = find(&containers, &b.container.id);
    assert_eq!(
        deps(c, Kind::Network),
        BTreeSet::from([b.network.id.clone(), second.id.clone()]),
        "depends on its networks by ID"
    );
    assert_eq!(deps(c, Kind::Volume), BTreeSet::from([b.volume.clone()]));
    assert!(c.joins.is_empty(), "{c:#?}");
    assert_eq!(
        engine.inspect(&c.key).await.unwrap().depends_on,
        c.depends_on
    );

    let e = engine.remove(&n.key).await.unwrap_err();
    assert!(
        matches!(&e.kind, ErrorKind::InUse { message, .. } if message.contains("active endpoints")),
        "{e:?}"
    );
    assert_eq!(
        e.call,
        format!("remove network {}", &b.network.id[..12]),
        "{e:?}"
    );
    assert!(
        sbx.network_exists(&b.network.id).await,
        "in use removes nothing"
    );

    engine.remove(&c.key).await.unwrap();
    engine.remove(&n.key).await.unwrap();
    assert!(!sbx.network_exists(&b.network.id).await);
    assert!(engine.remove(&n.key).await.unwrap_err().is_not_found());
    assert!(engine.inspect(&n.key).await.unwrap_err().is_not_found());
}

/// `--network container:X` is in the listing; `--pid container:X` and
/// `--ipc container:X` only in `inspect`. Docker 20.10 stores
/// `container:<full ID>` whether X was given as a name, a short ID or a full ID.
trial!(namespace_joins_show_in_listing_and_pid_ipc_only_after_inspect);
async fn namespace_joins_show_in_listing_and_pid_ipc_only_after_inspect() {
    let sbx = Sandbox::new("joins").await;
    let donor = sbx
        .container(ContainerSpec::new().managed().ipc_mode("shareable"))
        .await;
    let short = &donor.id[..12];
    let (net_by_id, net_by_name, net_by_short, pid_by_id, pid_by_name, ipc_by_id) = tokio::join!(
        sbx.container(ContainerSpec::new().joins_network_of(&donor.id)),
        sbx.container(ContainerSpec::new().joins_network_of(&donor.name)),
        sbx.container(ContainerSpec::new().joins_network_of(short)),
        sbx.container(ContainerSpec::new().joins_pid_of(&donor.id)),
        sbx.container(ContainerSpec::new().joins_pid_of(&donor.name)),
        sbx.container(ContainerSpec::new().joins_ipc_of(&donor.id)),
    );
    let engine = sbx.engine().await;
    let full = format!("container:{}", donor.id);

    // What Docker stored, whatever the container was given.
    for (c, field) in [
        (&net_by_id, "NetworkMode"),
        (&net_by_name, "NetworkMode"),
        (&net_by_short, "NetworkMode"),
        (&pid_by_id, "PidMode"),
        (&pid_by_name, "PidMode"),
        (&ipc_by_id, "IpcMode"),
    ] {
        let host = sbx
            .docker()
            .inspect_container(&c.id, None::<InspectContainerOptions>)
            .await
            .unwrap()
            .host_config
            .unwrap();
        let stored = match field {
            "NetworkMode" => host.network_mode,
            "PidMode" => host.pid_mode,
            _ => host.ipc_mode,
        };
        assert_eq!(
            stored.as_deref(),
            Some(full.as_str()),
            "{field} of {}",
            c.name
        );
    }

    let listed = engine
        .list(Kind::Container, &[sbx.scope_arg()])
        .await
        .unwrap();
    let join = |namespace| Join {
        namespace,
        target: donor.id.clone(),
    };
    for c in [&net_by_id, &net_by_name, &net_by_short] {
        let o = find(&listed, &c.id);
        assert_eq!(o.joins, vec![join(Namespace::Network)], "{o:#?}");
        assert!(deps(o, Kind::Network).is_empty(), "no network of its own");
        assert_eq!(engine.inspect(&o.key).await.unwrap().joins, o.joins);
    }
    for (c, ns) in [
        (&pid_by_id, Namespace::Pid),
        (&pid_by_name, Namespace::Pid),
        (&ipc_by_id, Namespace::Ipc),
    ] {
        let o = find(&listed, &c.id);
        assert!(
            o.joins.is_empty(),
            "the listing shows no {ns:?} join: {o:#?}"
        );
        let inspected = engine.inspect(&o.key).await.unwrap();
        assert_eq!(inspected.joins, vec![join(ns)], "{inspected:#?}");
    }
    assert!(engine
        .inspect(&key(Kind::Container, &donor.id))
        .await
        .unwrap()
        .joins
        .is_empty());
}

trial!(removes_a_running_container_and_keeps_its_named_volume);
async fn removes_a_running_container_and_keeps_its_named_volume() {
    let sbx = Sandbox::new("remove-running").await;
    let b = sbx.add_box("busy", Run::Running).await;
    let engine = sbx.engine().await;

    let started = Instant::now();
    engine
        .remove(&key(Kind::Container, &b.container.id))
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!sbx.container_exists(&b.container.id).await);
    assert!(sbx.volume_exists(&b.volume).await, "named volumes stay");

    engine.remove(&key(Kind::Volume, &b.volume)).await.unwrap();
    assert!(!sbx.volume_exists(&b.volume).await);
    assert_eq!(sbx.remaining().await, Default::default());
}

trial!(missing_objects_are_not_found);
async fn missing_objects_are_not_found() {
    let sbx = Sandbox::new("not-found").await;
    let engine = sbx.engine().await;
    let gone_id = "0123456789ab".repeat(5) + "cdef";
    let gone_volume = sbx.unique("never-created");

    for (kind, id, call) in [
        (Kind::Container, gone_id.as_str(), "container 0123456789ab"),
        (Kind::Network, gone_id.as_str(), "network 0123456789ab"),
        (Kind::Volume, gone_volume.as_str(), ""),
    ] {
        let k = key(kind, id);
        let e = engine.remove(&k).await.unwrap_err();
        assert!(
            matches!(e.kind, ErrorKind::NotFound { .. }),
            "{kind}: {e:?}"
        );
        let call = if call.is_empty() {
            format!("volume {gone_volume}")
        } else {
            call.to_string()
        };
        assert_eq!(e.call, format!("remove {call}"));
        let e = engine.inspect(&k).await.unwrap_err();
        assert!(e.is_not_found(), "{kind}: {e:?}");
        assert_eq!(e.call, format!("inspect {call}"));
    }

    // Removing twice: the second answer is a 404.
    let c = sbx.leaked_container(Run::Exited).await;
    let k = key(Kind::Container, &c.id);
    engine.remove(&k).await.unwrap();
    assert!(engine.remove(&k).await.unwrap_err().is_not_found());
}

trial!(volume_in_use_is_a_conflict_naming_its_users);
async fn volume_in_use_is_a_conflict_naming_its_users() {
    let sbx = Sandbox::new("volume-in-use").await;
    let stopped = sbx.add_box("stopped", Run::Exited).await;
    let user = sbx.unmanaged_user(&stopped.volume, Run::Running).await;
    let engine = sbx.engine().await;
    let volume = key(Kind::Volume, &stopped.volume);

    let holders = |e: EngineError| match e.kind {
        ErrorKind::InUse { holders, .. } => holders,
        other => panic!("not InUse: {other:?}"),
    };
    let users: BTreeSet<String> = holders(engine.remove(&volume).await.unwrap_err())
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
    engine
        .remove(&key(Kind::Container, &user.id))
        .await
        .unwrap();
    assert_eq!(
        holders(engine.remove(&volume).await.unwrap_err()),
        vec![stopped.container.id.clone()]
    );
    engine
        .remove(&key(Kind::Container, &stopped.container.id))
        .await
        .unwrap();
    engine.remove(&volume).await.unwrap();
}

/// Images are listed by reference, tags sorted, `<none>` tags dropped.
trial!(images_are_listed_by_reference);
async fn images_are_listed_by_reference() {
    let sbx = Sandbox::new("images").await;
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
    assert_eq!(
        images.iter().map(|i| &i.id).collect::<BTreeSet<_>>(),
        sbx.ca_sbx_images().await.iter().collect(),
        "the same images Docker lists for the reference"
    );
    let exact = engine.list_images(TEST_IMAGE).await.unwrap();
    assert_eq!(exact.len(), 1);
    assert!(engine
        .list_images("ca-sbx-nothing-is-tagged-like-this:*")
        .await
        .unwrap()
        .is_empty());
}

trial!(unreachable_engines_fail_fast);
async fn unreachable_engines_fail_fast() {
    let t = Duration::from_secs(5);
    for (host, hint) in [
        ("unix:///nonexistent.sock", "does not exist"),
        ("tcp://127.0.0.1:1", "refused"),
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
        match &e.kind {
            ErrorKind::Unreachable { endpoint, detail } => {
                assert_eq!(endpoint, host);
                assert!(detail.to_lowercase().contains(hint), "{host}: {detail}");
            }
            other => panic!("{host}: {other:?}"),
        }
        assert!(e.to_string().contains(host), "{e}");
    }
}

// ----- fake daemons -------------------------------------------------------

/// How a fake daemon answers a request other than the version check.
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
    /// Stops accepting: later connections are refused (the socket file
    /// stays). Returns once the listener is closed: an aborted task lets go
    /// of it only when the runtime drops the task, and a connection made
    /// before that would be reset instead of refused.
    async fn stop(&mut self) {
        self.accept.abort();
        let _ = (&mut self.accept).await;
    }
}

impl Drop for FakeDaemon {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Serves the version check, `/_ping` with `Api-Version: 1.41` and
/// `/version` (or never, if `hang_version`), and answers everything else
/// with `answer`.
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
    if path == "/_ping" || path.ends_with("/version") {
        if hang_version {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        let reply = if path == "/_ping" {
            "HTTP/1.1 200 OK\r\nApi-Version: 1.41\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nOK".to_string()
        } else {
            reply(
                200,
                r#"{"ApiVersion":"1.41","Version":"20.10.24","MinAPIVersion":"1.12"}"#,
            )
        };
        let _ = stream.write_all(reply.as_bytes()).await;
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

trial!(connection_cut_mid_call_is_an_error_without_a_status);
async fn connection_cut_mid_call_is_an_error_without_a_status() {
    for answer in [Answer::Close, Answer::Truncate] {
        let fake = fake_daemon(answer, false);
        let engine = DockerEngine::connect_to(Some(&fake.host), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(engine.api_version(), "1.41");
        let e = engine.list(Kind::Container, &[]).await.unwrap_err();
        assert!(
            matches!(&e.kind, ErrorKind::Other { status: None, .. }) && e.call == "list containers",
            "{e:?}"
        );
        if matches!(answer, Answer::Close) {
            // (A removal only reads the status line: a cut body after a 2xx
            // status is a success for it, as the engine did the work.)
            let e = engine.remove(&key(Kind::Volume, "v")).await.unwrap_err();
            assert!(
                matches!(&e.kind, ErrorKind::Other { status: None, .. })
                    && e.call == "remove volume v",
                "{e:?}"
            );
        }
    }
}

trial!(an_engine_that_goes_away_mid_run_is_unreachable);
async fn an_engine_that_goes_away_mid_run_is_unreachable() {
    let mut fake = fake_daemon(Answer::Status(500), false);
    let engine = DockerEngine::connect_to(Some(&fake.host), Duration::from_secs(5))
        .await
        .unwrap();
    fake.stop().await;
    let refused = engine.list(Kind::Container, &[]).await.unwrap_err();
    assert!(
        matches!(&refused.kind, ErrorKind::Unreachable { endpoint, detail }
            if *endpoint == fake.host && detail.starts_with("list containers: ")),
        "{refused:?}"
    );
    std::fs::remove_file(&fake.socket).unwrap();
    let missing = engine.remove(&key(Kind::Volume, "v")).await.unwrap_err();
    assert!(
        matches!(&missing.kind, ErrorKind::Unreachable { detail, .. } if detail.starts_with("remove volume v: ")),
        "{missing:?}"
    );
}

trial!(other_statuses_keep_their_code);
async fn other_statuses_keep_their_code() {
    let fake = fake_daemon(Answer::Status(500), false);
    let engine = DockerEngine::connect_to(Some(&fake.host), Duration::from_secs(5))
        .await
        .unwrap();
    let e = engine
        .remove(&key(Kind::Container, &"f".repeat(64)))
        .await
        .unwrap_err();
    assert_eq!(
        e,
        EngineError::new(
            "remove container ffffffffffff",
            ErrorKind::Other {
                status: Some(500),
                message: "fake failure".into()
            }
        )
    );
}

trial!(hung_engines_time_out);
async fn hung_engines_time_out() {
    let fake = fake_daemon(Answer::Hang, false);
    let engine = DockerEngine::connect_to(Some(&fake.host), Duration::from_millis(700))
        .await
        .unwrap();
    let started = Instant::now();
    let e = engine.list(Kind::Volume, &[]).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        e,
        EngineError::new("list volumes", ErrorKind::Timeout { seconds: 1 })
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
        matches!(&e.kind, ErrorKind::Unreachable { detail, .. } if detail.contains("no answer")),
        "{e:?}"
    );
}

trial!(tcp_hosts_are_honoured);
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
        matches!(
            e.kind,
            ErrorKind::Other {
                status: Some(418),
                ..
            }
        ),
        "{e:?}"
    );
}

trial!(harness_cleanup_removes_only_its_own_objects);
async fn harness_cleanup_removes_only_its_own_objects() {
    let other = Sandbox::new("bystander").await;
    let bystander = other.add_box_with_network("keep", Run::Running).await;
    {
        let sbx = Sandbox::new("cleanup").await;
        sbx.add_box("a", Run::Running).await;
        sbx.shared_volume(Some("a"), "a", "b", Run::Exited).await;
        sbx.leaked_container(Run::Created).await;
        sbx.leaked_volume().await;
        sbx.decoys(Run::Running).await;
        sbx.volume(VolumeSpec::new().unscoped()).await;
        sbx.add_box_with_network("n", Run::Running).await;
        sbx.network(NetworkSpec::new().unscoped()).await;
        let left = sbx.remaining().await;
        assert_eq!(left.containers.len(), 11, "{left:#?}");
        assert_eq!(left.volumes.len(), 11, "{left:#?}");
        assert_eq!(left.networks.len(), 2, "{left:#?}");
        assert!(sbx.cleanup().await.is_empty());
        assert_eq!(sbx.remaining().await, Default::default());
    }
    assert!(other.container_exists(&bystander.container.id).await);
    assert!(other.volume_exists(&bystander.volume).await);
    assert!(other.network_exists(&bystander.network.id).await);
}

trial!(harness_cleans_up_after_a_panic);
async fn harness_cleans_up_after_a_panic() {
    engine_version();
    let (tx, rx) = std::sync::mpsc::channel();
    let result = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let sbx = Sandbox::new("panics").await;
            let b = sbx.add_box_with_network("p", Run::Running).await;
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
    assert!(!probe.network_exists(&b.network.id).await);
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

/// `list_users`: Docker's `volume`, `network`, `since` and `status` filters
/// answer at least what discovery needs of them (more is fine: the shared
/// daemon runs other tests' containers; none of these may be missing).
trial!(users_listings_find_every_user_and_every_younger_running_container);
async fn users_listings_find_every_user_and_every_younger_running_container() {
    let sbx = Sandbox::new("users").await;
    users_listings(sbx).await;
}

/// The same on Docker 26.1 (API 1.45).
trial!(users_listings_on_docker_26_1);
async fn users_listings_on_docker_26_1() {
    let engine = crate::support::engines::CurrentDocker::new().shared().await;
    let sbx = Sandbox::at("users-261", &engine.socket_host()).await;
    users_listings(sbx).await;
}

async fn users_listings(sbx: Sandbox) {
    use sandboxctl::engine::Users;
    let engine = sbx.engine().await;
    let volume = sbx.volume(VolumeSpec::new().managed()).await;
    let network = sbx.network(NetworkSpec::new().managed()).await;
    let before = sbx.container(ContainerSpec::new()).await;
    // `since` has nanosecond creation times: the same second is no tie.
    let target = sbx.container(ContainerSpec::new().managed()).await;
    let mounts = sbx
        .container(ContainerSpec::new().volume(&volume).run(Run::Exited))
        .await;
    let never_started = sbx
        .container(
            ContainerSpec::new()
                .network(&network.name)
                .run(Run::Created),
        )
        .await;
    let attached = sbx
        .container(ContainerSpec::new().network(&network.name))
        .await;
    let after = sbx.container(ContainerSpec::new()).await;
    let exited = sbx.container(ContainerSpec::new().run(Run::Exited)).await;

    let listed = |users: Users| {
        let engine = &engine;
        async move { ids(&engine.list_users(&users).await.unwrap()) }
    };
    let mounting = listed(Users::Mounting(vec![volume.clone()])).await;
    assert!(mounting.contains(&mounts.id), "{mounting:?}");
    for other in [&before, &target, &after] {
        assert!(!mounting.contains(&other.id), "{mounting:?}");
    }
    // A container never started names its network only by name.
    let on = listed(Users::Attached(vec![
        network.id.clone(),
        network.name.clone(),
    ]))
    .await;
    assert!(
        on.contains(&never_started.id) && on.contains(&attached.id),
        "{on:?}"
    );
    assert!(
        !on.contains(&before.id) && !on.contains(&after.id),
        "{on:?}"
    );
    let since = listed(Users::LiveSince(target.id.clone())).await;
    assert!(
        since.contains(&after.id) && since.contains(&attached.id),
        "{since:?}"
    );
    for not in [&before, &target, &mounts, &never_started, &exited] {
        assert!(!since.contains(&not.id), "{} in {since:?}", not.id);
    }
    // The container a `since` names must exist.
    engine
        .remove(&key(Kind::Container, &target.id))
        .await
        .unwrap();
    let gone = engine
        .list_users(&Users::LiveSince(target.id.clone()))
        .await
        .unwrap_err();
    assert!(gone.is_not_found(), "{gone:?}");
}
