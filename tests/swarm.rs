//! Swarm services, configs and secrets, and containers an orchestrator owns,
//! against real engines: a swarm initialised on a second dockerd that each
//! test starts for itself (never on the main engine: `docker swarm init`
//! changes an engine for good), and the main engine, which is in no swarm.
//!
//! The recipe (see the shared engine notes): the swarm's `docker_gwbridge`
//! is made first with a host bridge of its own (`sbx-gwN`, else Swarm makes
//! one literally named `docker_gwbridge`, shared by every swarm on the
//! machine), and `swarm init` gets a free `--listen-addr` port and a free
//! `--data-path-port` (else 2377 and 4789, which concurrent tests share).
//! Services run the test image (already loaded on the second dockerd by the
//! harness) with `--no-resolve-image` (no registry) and a one-second stop
//! grace period. Every test checks that the main engine is still `inactive`.

use std::net::{TcpListener, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};

use sandboxctl::model::Kind;

use crate::support::cli::{Cli, Output};
use crate::support::docker::{Sandbox, SCOPE_KEY, SLEEP, TEST_IMAGE};
use crate::support::engines::{link_exists, Engine, SecondDockerd};
use crate::support::report::Reason;

/// A swarm of one manager on its own second dockerd. Dropping it leaves the
/// swarm, stops the dockerd and deletes the gateway bridge it made
/// (`sbx-gN-K` beside the harness's `sbx-dN-K`).
struct Swarm {
    engine: Option<Engine>,
    gateway: String,
    /// The address a joining node reaches the manager at.
    manager: String,
}

/// A free tcp port on 127.0.0.1.
fn free_tcp_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free tcp port")
        .port()
}

/// A free udp port in Swarm's allowed data-path range (1024..49151).
fn free_data_path_port() -> u16 {
    let seed = std::process::id() as u16 ^ (Instant::now().elapsed().subsec_nanos() as u16);
    (0..2000u16)
        .map(|i| 20000 + (seed.wrapping_add(i.wrapping_mul(7919)) % 20000))
        .find(|&p| UdpSocket::bind(("0.0.0.0", p)).is_ok())
        .expect("a free udp port")
}

/// Runs a docker CLI command, failing the test with its output unless it succeeds.
#[track_caller]
fn run(mut command: Command, what: &str) -> String {
    let out = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The main engine's swarm state (`inactive` it must stay).
fn main_swarm_state() -> String {
    let mut c = Command::new("docker");
    c.args(["info", "--format", "{{.Swarm.LocalNodeState}}"]);
    run(c, "docker info on the main engine")
}

impl Swarm {
    /// A second dockerd of this test's own, made a swarm manager; a gate
    /// (see `support::docker`).
    async fn start() -> Swarm {
        let mut swarm = Swarm::engine_with_gateway().await;
        let listen = format!("127.0.0.1:{}", free_tcp_port());
        let mut init = swarm.cli();
        init.args([
            "swarm",
            "init",
            "--advertise-addr",
            "127.0.0.1",
            "--listen-addr",
            &listen,
            "--data-path-port",
            &free_data_path_port().to_string(),
        ]);
        run(init, "swarm init on the second dockerd");
        swarm.manager = listen;
        swarm
    }

    /// Another dockerd of this test's own joined to `manager`'s swarm as a
    /// worker, listening and advertising on `127.0.0.2` (its gossip and
    /// control ports must not be the manager's).
    async fn join(manager: &Swarm) -> Swarm {
        let mut node = Swarm::engine_with_gateway().await;
        let mut token = manager.cli();
        token.args(["swarm", "join-token", "-q", "worker"]);
        let token = run(token, "worker join token");
        let listen = format!("127.0.0.2:{}", free_tcp_port());
        let mut join = node.cli();
        join.args([
            "swarm",
            "join",
            "--token",
            &token,
            "--listen-addr",
            &listen,
            "--advertise-addr",
            "127.0.0.2",
            &manager.manager,
        ]);
        run(join, "swarm join of the second node");
        node.manager = manager.manager.clone();
        node
    }

    /// A second dockerd with the swarm's `docker_gwbridge` made on a host
    /// bridge of its own, before any swarm command.
    async fn engine_with_gateway() -> Swarm {
        let engine = SecondDockerd::new().start().await;
        // The harness's bridge is `sbx-dN-K`, with 10.213.N.0/24 unrouted
        // before it: the gateway is `sbx-gN-K` on 10.215.N.0/24.
        let suffix = engine
            .bridge()
            .and_then(|b| b.strip_prefix("sbx-d"))
            .expect("the harness names its bridges sbx-dN-K")
            .to_string();
        let n = suffix.split('-').next().expect("N").to_string();
        let swarm = Swarm {
            gateway: format!("sbx-g{suffix}"),
            engine: Some(engine),
            manager: String::new(),
        };
        let mut gw = swarm.cli();
        gw.args([
            "network",
            "create",
            "--driver",
            "bridge",
            "--subnet",
            &format!("10.215.{n}.0/24"),
            "-o",
            &format!("com.docker.network.bridge.name={}", swarm.gateway),
            "-o",
            "com.docker.network.bridge.enable_icc=false",
            "-o",
            "com.docker.network.bridge.enable_ip_masquerade=false",
            "docker_gwbridge",
        ]);
        run(gw, "create docker_gwbridge");
        swarm
    }

    fn engine(&self) -> &Engine {
        self.engine.as_ref().expect("running")
    }

    fn host(&self) -> String {
        self.engine().socket_host()
    }

    fn cli(&self) -> Command {
        self.engine().cli()
    }

    /// `docker service create` of `replicas` tasks of the test image, with
    /// `args` (labels, networks, configs, secrets) before the image; waits
    /// until the tasks run. Returns the service ID.
    fn service(&self, name: &str, replicas: u32, args: &[String]) -> String {
        let mut c = self.cli();
        c.args([
            "service",
            "create",
            "--detach",
            "--quiet",
            "--no-resolve-image",
        ])
        .args(["--name", name, "--replicas", &replicas.to_string()])
        .args(["--stop-grace-period", "1s", "--restart-condition", "none"])
        .args(args)
        .args([TEST_IMAGE, SLEEP, "3600"]);
        let id = run(c, &format!("create service {name}"));
        self.wait_for_tasks(&id, name, replicas as usize);
        id
    }

    /// Waits until `n` containers of the service's tasks are on this node.
    fn wait_for_tasks(&self, id: &str, name: &str, n: usize) {
        let replicas = n;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let running = self.task_containers(id).len();
            if running == replicas {
                return;
            }
            if Instant::now() >= deadline {
                let mut ps = self.cli();
                ps.args(["service", "ps", "--no-trunc", id]);
                let tasks = ps
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
                panic!(
                    "service {name}: {running} of {replicas} task containers after 60 s\n{tasks:?}\n{}",
                    self.engine().log_tail(30)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// IDs of the containers of a service's tasks on this node.
    fn task_containers(&self, service: &str) -> Vec<String> {
        let mut c = self.cli();
        c.args(["ps", "-aq", "--no-trunc", "--filter"])
            .arg(format!("label=com.docker.swarm.service.id={service}"));
        run(c, "list task containers")
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Whether `docker <kind> inspect <id>` finds it.
    fn exists(&self, kind: &str, id: &str) -> bool {
        let mut c = self.cli();
        c.args([kind, "inspect", id]);
        c.output().expect("docker inspect").status.success()
    }

    /// Creates a labeled config or secret (`kind`) holding a few bytes; returns its ID.
    fn swarm_object(&self, kind: &str, name: &str, labels: &[String]) -> String {
        let mut c = self.cli();
        c.args([kind, "create"]);
        for l in labels {
            c.args(["--label", l]);
        }
        c.args([name, "-"]).stdin(std::process::Stdio::piped());
        c.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().expect("docker create");
        use std::io::Write as _;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(b"sandboxctl test\n")
            .expect("write");
        let out = child.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "create {kind} {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A labeled overlay network with a VXLAN ID of its own; returns its ID.
    /// Every swarm's first overlay network gets the same VXLAN ID, and the
    /// kernel makes every node's VXLAN interface in the host's network
    /// namespace: two swarms (or two nodes) on one machine with the same ID
    /// fail with `error creating vxlan interface: file exists`.
    fn overlay(&self, name: &str, labels: &[String]) -> String {
        use std::sync::atomic::{AtomicU32, Ordering};
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let vni = 100_000
            + (std::process::id() % 100_000) * 64
            + SEQ.fetch_add(1, Ordering::Relaxed) % 64;
        let mut c = self.cli();
        c.args(["network", "create", "--driver", "overlay", "--attachable"])
            .args([
                "--opt",
                &format!("com.docker.network.driver.overlay.vxlanid_list={vni}"),
            ]);
        for l in labels {
            c.args(["--label", l]);
        }
        c.arg(name);
        run(c, &format!("create overlay network {name}"))
    }

    /// sandboxctl against this swarm's manager.
    fn sandboxctl(&self) -> Cli {
        Cli::new().docker_host(&self.host())
    }
}

impl Drop for Swarm {
    fn drop(&mut self) {
        if let Some(engine) = self.engine.take() {
            let mut leave = engine.cli();
            leave.args(["swarm", "leave", "--force"]);
            let _ = leave.output();
            drop(engine);
        }
        if link_exists(&self.gateway) {
            let _ = Command::new("ip")
                .args(["link", "delete", &self.gateway])
                .status();
        }
    }
}

/// `ca.sandbox=1`, the test's scope label and `ca.sandbox.id=<box>`, as `k=v`.
fn managed(sbx: &Sandbox, box_id: &str) -> Vec<String> {
    vec![
        "ca.sandbox=1".to_string(),
        format!("{SCOPE_KEY}={}", sbx.scope_value()),
        format!("ca.sandbox.id={box_id}"),
    ]
}

fn flags(flag: &str, values: &[String]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| [flag.to_string(), v.clone()])
        .collect()
}

#[track_caller]
fn assert_main_inactive() {
    assert_eq!(
        main_swarm_state(),
        "inactive",
        "the main engine must never join a swarm"
    );
}

fn step_of(plan: &crate::support::report::Plan, kind: Kind, id: &str) -> usize {
    plan.steps
        .iter()
        .find(|s| s.kind == kind && s.id.as_deref() == Some(id))
        .unwrap_or_else(|| panic!("no step removes {kind} {id}: {plan:#?}"))
        .step
}

trial!(a_labeled_service_its_overlay_network_config_and_secret_go_in_order);
async fn a_labeled_service_its_overlay_network_config_and_secret_go_in_order() {
    let sbx = Sandbox::new("swarm-service").await;
    let swarm = Swarm::start().await;
    let labels = managed(&sbx, "web");
    let prefix = sbx.scope_value();
    let net = swarm.overlay(&format!("{prefix}-net"), &labels);
    let config = swarm.swarm_object("config", &format!("{prefix}-config"), &labels);
    let secret = swarm.swarm_object("secret", &format!("{prefix}-secret"), &labels);
    let mut args = flags("--label", &labels);
    // The task containers carry the box's labels too: they are planned, after the service.
    args.extend(flags("--container-label", &labels));
    args.extend([
        "--network".to_string(),
        net.clone(),
        "--config".to_string(),
        format!("source={prefix}-config,target=/config"),
        "--secret".to_string(),
        format!("{prefix}-secret"),
    ]);
    let service = swarm.service(&format!("{prefix}-web"), 2, &args);
    let tasks = swarm.task_containers(&service);
    assert_eq!(tasks.len(), 2);

    let state = sbx.scope_toml();
    let plan = swarm
        .sandboxctl()
        .state_toml(&state)
        .json()
        .arg("plan")
        .run();
    let plan = plan.expect_code(0).plan();
    let s = step_of(&plan, Kind::Service, &service);
    for t in &tasks {
        let c = step_of(&plan, Kind::Container, t);
        assert!(s < c, "the service goes before its task {t}: {plan:#?}");
        let step = &plan.steps[c - 1];
        assert!(step.waits_for.contains(&s), "{step:#?}");
    }
    let n = step_of(&plan, Kind::Network, &net);
    let cf = step_of(&plan, Kind::Config, &config);
    let sc = step_of(&plan, Kind::Secret, &secret);
    for (what, at) in [("network", n), ("config", cf), ("secret", sc)] {
        assert!(
            plan.steps[at - 1].waits_for.contains(&s),
            "the {what} waits for the service: {plan:#?}"
        );
    }
    assert_eq!(plan.steps.len(), 6, "{plan:#?}");

    let started = Instant::now();
    let out = swarm
        .sandboxctl()
        .state_toml(&state)
        .json()
        .arg("apply")
        .run();
    let report = out.expect_code(0).report();
    eprintln!(
        "apply of a 2-replica service with its network, config and secret took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(report.converged, "{}", out.dump());
    assert_eq!(report.removed.services.len(), 1, "{}", out.dump());
    assert_eq!(report.removed.containers.len(), 2, "{}", out.dump());
    assert_eq!(report.removed.networks.len(), 1, "{}", out.dump());
    assert_eq!(report.removed.configs.len(), 1, "{}", out.dump());
    assert_eq!(report.removed.secrets.len(), 1, "{}", out.dump());
    assert!(report.failures.is_empty(), "{}", out.dump());
    for (kind, id) in [
        ("service", &service),
        ("network", &net),
        ("config", &config),
        ("secret", &secret),
    ] {
        assert!(!swarm.exists(kind, id), "{kind} {id} is gone");
    }
    assert!(swarm.task_containers(&service).is_empty());
    // Never an image.
    assert!(swarm.exists("image", TEST_IMAGE));
    // The JSON has the Swarm keys, and a human run says the same in words.
    let again = swarm.sandboxctl().state_toml(&state).arg("plan").run();
    again.expect_code(0);
    assert!(
        !again.stderr.contains("not a swarm manager"),
        "{}",
        again.dump()
    );
    assert_main_inactive();
}

trial!(an_unlabeled_service_on_a_labeled_network_blocks_it_and_is_untouched);
async fn an_unlabeled_service_on_a_labeled_network_blocks_it_and_is_untouched() {
    let sbx = Sandbox::new("swarm-holder").await;
    let swarm = Swarm::start().await;
    let prefix = sbx.scope_value();
    let net = swarm.overlay(&format!("{prefix}-net"), &managed(&sbx, "gone"));
    let service = swarm.service(
        &format!("{prefix}-foreign"),
        1,
        &[
            "--label".into(),
            "app=foreign".into(),
            "--network".into(),
            net.clone(),
        ],
    );
    let state = sbx.scope_toml();
    let out = swarm
        .sandboxctl()
        .state_toml(&state)
        .json()
        .arg("apply")
        .run();
    let report = out.expect_code(1).report();
    assert!(!report.converged);
    let left = report
        .remaining_networks
        .iter()
        .find(|l| l.id.as_deref() == Some(net.as_str()))
        .unwrap_or_else(|| panic!("the network is left behind: {}", out.dump()));
    match &left.reason {
        Reason::HeldByUnmanaged { holders, .. } => {
            assert!(
                holders
                    .iter()
                    .any(|h| h.id.as_deref() == Some(service.as_str())),
                "the service is named as the holder: {holders:?}"
            );
        }
        other => panic!("held by the service, not {other:?}"),
    }
    assert!(
        swarm.exists("service", &service),
        "the service is untouched"
    );
    assert!(swarm.exists("network", &net));
    assert_eq!(
        swarm.task_containers(&service).len(),
        1,
        "its task still runs"
    );
    let human = swarm.sandboxctl().state_toml(&state).arg("plan").run();
    assert!(
        human.stdout.contains("in use by unmanaged service")
            && human.stdout.contains("remove that service first"),
        "{}",
        human.dump()
    );
    assert_main_inactive();
}

trial!(a_managed_task_of_an_unmanaged_service_is_owned_by_orchestrator);
async fn a_managed_task_of_an_unmanaged_service_is_owned_by_orchestrator() {
    let sbx = Sandbox::new("swarm-owned").await;
    let swarm = Swarm::start().await;
    let prefix = sbx.scope_value();
    let name = format!("{prefix}-theirs");
    let service = swarm.service(
        &name,
        1,
        &flags("--container-label", &managed(&sbx, "owned")),
    );
    let task = swarm.task_containers(&service).pop().expect("a task");
    let state = sbx.scope_toml();
    let out = swarm
        .sandboxctl()
        .state_toml(&state)
        .json()
        .arg("apply")
        .run();
    let report = out.expect_code(1).report();
    let left = report
        .remaining_containers
        .iter()
        .find(|l| l.id.as_deref() == Some(task.as_str()))
        .unwrap_or_else(|| panic!("the task container is left: {}", out.dump()));
    match &left.reason {
        Reason::OwnedByOrchestrator { owner, .. } => {
            assert_eq!(owner.orchestrator, "swarm");
            assert_eq!(owner.id, service);
            assert_eq!(owner.name.as_deref(), Some(name.as_str()));
        }
        other => panic!("ownedByOrchestrator, not {other:?}"),
    }
    assert!(report.removed.containers.is_empty(), "{}", out.dump());
    assert!(swarm.exists("service", &service));
    assert_eq!(
        swarm.task_containers(&service),
        vec![task.clone()],
        "not recreated: never removed"
    );
    // explain shows the owner.
    let explain = swarm
        .sandboxctl()
        .state_toml(&state)
        .args(["explain", &task])
        .run();
    assert!(
        explain
            .stdout
            .contains(&format!("owner:    Swarm service {name}")),
        "{}",
        explain.dump()
    );
    assert!(
        explain
            .stdout
            .contains("blocked (never forced): owned by Swarm service"),
        "{}",
        explain.dump()
    );
    assert_main_inactive();
}

trial!(an_engine_in_no_swarm_skips_the_swarm_kinds_without_a_word);
async fn an_engine_in_no_swarm_skips_the_swarm_kinds_without_a_word() {
    let sbx = Sandbox::new("swarm-none").await;
    assert_main_inactive();
    let leaked = sbx
        .container(crate::support::docker::ContainerSpec::new().managed())
        .await;
    let out = Cli::new()
        .state_toml(&sbx.scope_toml())
        .json()
        .arg("apply")
        .run();
    let report = out.expect_code(0).report();
    assert!(report.converged, "{}", out.dump());
    assert_eq!(report.removed.containers.len(), 1, "{}", out.dump());
    assert!(report.failures.is_empty());
    // Nothing to say: an engine in no swarm has no Swarm objects.
    assert!(!out.stderr.contains("swarm"), "{}", out.dump());
    let _ = leaked;
    let plan: Output = Cli::new().state_toml(&sbx.scope_toml()).arg("plan").run();
    plan.expect_code(0);
    assert!(!plan.stderr.contains("swarm"), "{}", plan.dump());
    assert_main_inactive();
}

/// A two-node swarm of two dockerds on this machine: the manager on
/// 127.0.0.1, the worker on 127.0.0.2, each with its own gateway bridge. A
/// global service whose tasks mount a labeled volume runs a task on each
/// node; each node keeps its own copy of the volume. On the worker the
/// Swarm kinds cannot be listed: three failed listings and one note, unless
/// its `[[engine]]` says `swarm = false`; its task container is
/// `ownedByOrchestrator` (it cannot see the service). A fleet with an entry
/// per node (the worker's `swarm = false`, the manager lists the swarm)
/// removes the service on the manager, whose removal takes the worker's task
/// too, and a second run takes the worker's volume.
trial!(a_two_node_swarm_needs_a_fleet_entry_per_node_for_its_volumes);
async fn a_two_node_swarm_needs_a_fleet_entry_per_node_for_its_volumes() {
    let sbx = Sandbox::new("swarm-two-nodes").await;
    let manager = Swarm::start().await;
    let worker = Swarm::join(&manager).await;
    let prefix = sbx.scope_value();
    let labels = managed(&sbx, "global");
    let volume = format!("{prefix}-data");
    let mut mount = format!("type=volume,source={volume},target=/data");
    for l in &labels {
        mount.push_str(&format!(",volume-label={l}"));
    }
    let mut args = flags("--label", &labels);
    args.extend(flags("--container-label", &labels));
    args.extend(["--mode".into(), "global".into(), "--mount".into(), mount]);
    let name = format!("{prefix}-global");
    let mut c = manager.cli();
    c.args([
        "service",
        "create",
        "--detach",
        "--quiet",
        "--no-resolve-image",
    ])
    .args(["--name", &name])
    .args(["--stop-grace-period", "1s", "--restart-condition", "none"])
    .args(&args)
    .args([TEST_IMAGE, SLEEP, "3600"]);
    let service = run(c, "create the global service");
    manager.wait_for_tasks(&service, &name, 1);
    worker.wait_for_tasks(&service, &name, 1);
    assert!(manager.exists("volume", &volume) && worker.exists("volume", &volume));

    // The worker alone: its swarm's services, configs and secrets cannot be
    // listed there, three failed listings (exit 1) and one note saying what
    // to do; its task blocked as owned.
    let state = sbx.scope_toml();
    let on_worker = worker
        .sandboxctl()
        .state_toml(&state)
        .json()
        .arg("plan")
        .run();
    let plan = on_worker.expect_code(1).plan();
    assert_eq!(
        on_worker.stderr.matches("is a swarm worker").count(),
        1,
        "{}",
        on_worker.dump()
    );
    assert!(
        on_worker.stderr.contains("swarm = false"),
        "{}",
        on_worker.dump()
    );
    assert_eq!(plan.incomplete.len(), 3, "{plan:#?}");
    assert!(
        plan.incomplete
            .iter()
            .all(|i| i.contains("not a swarm manager")),
        "{plan:#?}"
    );
    assert!(plan.steps.is_empty(), "{plan:#?}");
    assert!(
        plan.blocked
            .iter()
            .any(|b| b.kind == Kind::Container && b.why.code() == "ownedByOrchestrator"),
        "{plan:#?}"
    );
    // Its file puts the worker's Swarm kinds out of scope: no failure, no note.
    let out_of_scope = format!(
        "{state}\n[[engine]]\nname = \"worker\"\nhost = \"{}\"\nswarm = false\n",
        worker.host()
    );
    let on_worker = Cli::new()
        .state_toml(&out_of_scope)
        .json()
        .arg("plan")
        .run();
    // One `[[engine]]` table makes a fleet of one: its plan is `engines[0]`.
    on_worker.expect_code(0);
    let fleet: serde_json::Value = serde_json::from_str(&on_worker.stdout).unwrap();
    let plan = &fleet["engines"][0];
    let dump = on_worker.dump();
    assert!(!on_worker.stderr.contains("swarm"), "{dump}");
    assert_eq!(plan["swarmOutOfScope"], true, "{dump}");
    assert!(plan.get("incomplete").is_none(), "{dump}");
    assert_eq!(plan["steps"].as_array().map(Vec::len), Some(0), "{dump}");
    let owned = |b: &serde_json::Value| b["reason"]["code"] == "ownedByOrchestrator";
    assert!(
        plan["blocked"].as_array().unwrap().iter().any(owned),
        "{dump}"
    );

    // A fleet with an entry per node.
    let fleet = format!(
        "{state}\n[[engine]]\nname = \"manager\"\nhost = \"{}\"\n\n[[engine]]\nname = \"worker\"\nhost = \"{}\"\nswarm = false\n",
        manager.host(),
        worker.host()
    );
    let first = Cli::new().state_toml(&fleet).json().arg("apply").run();
    let report = first.report();
    assert_eq!(report.removed.services.len(), 1, "{}", first.dump());
    // The worker listed while the manager removed: what it left is its task
    // (owned by a service it cannot see) and the volume that task mounts.
    for left in report.all_remaining() {
        assert_eq!(left.engine, "worker", "{}", first.dump());
        let code = left.reason.code();
        assert!(
            code == "ownedByOrchestrator" || code == "waitsForBlocked",
            "{}",
            first.dump()
        );
    }
    assert_eq!(first.code() == 0, report.converged, "{}", first.dump());
    assert!(!manager.exists("service", &service));
    assert!(
        !manager.exists("volume", &volume),
        "the manager's copy goes"
    );
    // The worker's task goes with the service (Swarm's doing); its copy of
    // the volume waits for a run on the worker.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !worker.task_containers(&service).is_empty() {
        assert!(Instant::now() < deadline, "the worker's task stays");
        std::thread::sleep(Duration::from_millis(200));
    }
    let second = Cli::new().state_toml(&fleet).json().arg("apply").run();
    let report = second.expect_code(0).report();
    assert!(report.converged, "{}", second.dump());
    assert!(!worker.exists("volume", &volume), "the worker's copy goes");
    assert_main_inactive();
}
