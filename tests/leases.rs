//! Leases (issue 15) end to end against real engines: a driver's lease volume
//! keeps its undeclared box through `apply`, `watch` and a fleet, by the
//! engine's clock, until it is removed or runs out; `destroy` overrides it
//! and says so; hostile ttls are not leases.
//!
//! Leases are made the way a driver without sandboxctl makes them: the plain
//! docker CLI (`support::lease`). Every test has its own scope (`Sandbox`, or
//! `Corner` on a second dockerd) whose drop removes what it made, leases
//! included, also after a failure; sandboxctl always runs with that scope.
//!
//! A skewed engine clock is the fault proxy's clock shift
//! (`Proxy::shift_clock`): every time the engine reports (`/info`
//! `SystemTime`, every `Created`/`CreatedAt`, events, the `Date` header) moves
//! by the same offset, as on a host whose clock is off. A real skewed dockerd
//! cannot be had here: see the proxy's module doc. The first test checks the
//! shift itself against the engine's unshifted answers.
//!
//! Timings are printed (`--nocapture`): how long after a lease's end its box
//! was gone.
//!
//! Ignored until what they need is on this branch: the `hold` command
//! (`a_held_box_survives_watch_and_goes_soon_after_its_holder_dies`), and
//! the human plan's line about the engine's clock
//! (`the_human_plan_mentions_a_skewed_engine_clock`).

use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use bollard::query_parameters::{
    EventsOptionsBuilder, InspectContainerOptions, InspectNetworkOptions,
    ListContainersOptionsBuilder, ListNetworksOptionsBuilder, ListVolumesOptionsBuilder,
};
use bollard::Docker;
use futures_util::StreamExt;
use serde_json::Value;

use crate::support::cli::{descendants_named, signal_pid, Cli, Guarded, KillOnDrop};
use crate::support::docker::{engine_endpoint, Run, Sandbox, SandboxBox, VolumeSpec, SCOPE_KEY};
use crate::support::engines::{link_exists, main_host, unique_scope, Corner, SecondDockerd};
use crate::support::lease::{
    docker, leases_of, local_now, local_now_ms, poll_until, rfc3339_seconds,
};
use crate::support::proxy::{http_date_seconds, Proxy};
use crate::support::report::{Kind, LeaseState, Plan, Reason};

/// An hour, the skew of the skewed-clock tests.
const HOUR: i64 = 3600;
/// How far two readings of a clock taken around the same moment may differ
/// (seconds): calls, rounding, a loaded machine.
const CLOCK_SLACK: i64 = 5;
/// How old the real stamp of a volume the test just made may be (it was
/// made before the check; far less than any shift the tests apply).
const STAMP_SLACK: i64 = 120;
/// The debounce every watch here runs with, and its flag.
const DEBOUNCE: Duration = Duration::from_secs(1);
/// How long past a lease's end (plus the debounce) a watch may take to have
/// removed its box: the figure the issue asks for.
const REAP_BUDGET: Duration = Duration::from_secs(3);
/// What an overloaded machine adds: under the whole suite on 2 cores a
/// cycle takes up to 10 s (tests/watch.rs `SLACK`; seen here: 6.7 s at the
/// lease's end), which says nothing about the schedule.
const LOAD_SLACK: Duration = Duration::from_secs(12);

/// The reaping budget in milliseconds: debounce + 3 s, plus [`LOAD_SLACK`]
/// only while the machine is overloaded (1-minute load average over its
/// cores), said on stderr so that a run shows which bound it held.
fn reap_budget_ms(what: &str) -> i64 {
    let load: f64 = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let strict = DEBOUNCE + REAP_BUDGET;
    let budget = if load > cores {
        strict + LOAD_SLACK
    } else {
        strict
    };
    eprintln!(
        "{what}: budget {} s (load average {load:.1} on {cores} cores{})",
        budget.as_secs(),
        if load > cores {
            ": overloaded, slack added"
        } else {
            ""
        }
    );
    budget.as_millis() as i64
}
/// How long a watch or hold child may live.
const CHILD_DEADLINE: Duration = Duration::from_secs(10 * 60);

// ----- helpers ------------------------------------------------------------------

/// `sbx`'s scope, a state file declaring nothing (every box undeclared,
/// grace 0), JSON.
fn undeclared(sbx: &Sandbox) -> Cli {
    sbx.cli().json().state_toml(&sbx.scope_toml())
}

/// The `until` of a `leased` reason for box `box_id` held by `lease`; fails
/// the test for any other reason.
#[track_caller]
fn leased_until(why: &Reason, box_id: &str, lease: &str) -> String {
    match why {
        Reason::Leased {
            box_id: b,
            until,
            lease: l,
            ..
        } if b == box_id && l == lease => until.clone(),
        other => panic!("expected `leased` by {lease} for box {box_id}, got {other:#?}"),
    }
}

/// Every object of `b` plus `lease` is kept in `plan` as leased by `lease`;
/// returns the lease's end (Unix seconds, the engine's clock) as the plan
/// says it, and checks that the lease note says the same.
#[track_caller]
fn assert_box_leased(plan: &Plan, b: &SandboxBox, lease: &str) -> i64 {
    let mut ends = BTreeSet::new();
    for name in [b.container.name.as_str(), b.volume.as_str(), lease] {
        ends.insert(leased_until(&plan.kept.named(name).why, &b.box_id, lease));
    }
    assert_eq!(ends.len(), 1, "one end for the whole box: {ends:?}");
    let until = ends.pop_first().unwrap();
    let note = plan.lease(lease);
    assert_eq!(note.state, LeaseState::Live, "{note:#?}");
    assert_eq!(note.until.as_deref(), Some(until.as_str()), "{note:#?}");
    assert!(plan.steps.is_empty(), "nothing goes: {plan:#?}");
    rfc3339_seconds(&until).unwrap_or_else(|| panic!("until {until:?} is not RFC 3339"))
}

/// Where the engine reached through `host` stamped volume `name` (Unix
/// seconds), as `docker volume inspect` shows it.
fn stamp_of(host: &str, name: &str) -> i64 {
    let text = docker(
        host,
        &["volume", "inspect", "--format", "{{.CreatedAt}}", name],
    );
    rfc3339_seconds(&text).unwrap_or_else(|| panic!("CreatedAt {text:?} of {name}"))
}

/// The engine's clock through `host` (Unix seconds), as `docker info` shows it.
fn clock_of(host: &str) -> i64 {
    let text = docker(host, &["info", "--format", "{{.SystemTime}}"]);
    rfc3339_seconds(&text).unwrap_or_else(|| panic!("SystemTime {text:?}"))
}

#[track_caller]
fn assert_near(what: &str, got: i64, want: i64, slack: i64) {
    assert!(
        (got - want).abs() <= slack,
        "{what}: {got} is not within {slack} s of {want} (off by {} s)",
        got - want
    );
}

/// The proxy's engine looks `shift` seconds off, the real one does not: its
/// clock, and its stamp on `volume` (which it made through the proxy), both
/// moved by exactly the shift.
fn assert_skewed_view(proxy: &Proxy, volume: &str, shift: i64) {
    let (through, direct) = (proxy.docker_host(), engine_endpoint());
    assert_near(
        "the clock through the proxy",
        clock_of(&through),
        local_now() + shift,
        CLOCK_SLACK,
    );
    assert_near(
        "the engine's own clock",
        clock_of(&direct),
        local_now(),
        CLOCK_SLACK,
    );
    let (seen, real) = (stamp_of(&through, volume), stamp_of(&direct, volume));
    assert_eq!(
        seen - real,
        shift,
        "the stamp of {volume} through the proxy"
    );
    // Made before this check, maybe long before on a loaded machine (6 s
    // seen in CI): what matters is that it is not shifted by the hour.
    assert_near(
        "the real stamp of a volume made just now",
        real,
        local_now(),
        STAMP_SLACK,
    );
}

fn unix_client(host: &str) -> Docker {
    Docker::connect_with_unix(host, 60, bollard::API_DEFAULT_VERSION)
        .unwrap_or_else(|e| panic!("bollard client for {host}: {e}"))
}

/// The `Date` header of `GET /_ping` on the unix socket `path`, Unix seconds.
fn date_header(path: &std::path::Path) -> i64 {
    let mut s = std::os::unix::net::UnixStream::connect(path)
        .unwrap_or_else(|e| panic!("connect {}: {e}", path.display()));
    s.write_all(b"GET /_ping HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n")
        .expect("send /_ping");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("read /_ping");
    let date = answer
        .lines()
        .find_map(|l| l.strip_prefix("Date:").or_else(|| l.strip_prefix("date:")))
        .unwrap_or_else(|| panic!("no Date header in {answer:?}"));
    http_date_seconds(date.trim()).unwrap_or_else(|| panic!("Date {date:?}"))
}

// ----- the clock shift itself ---------------------------------------------------

/// The proxy's clock shift moves every time the engine reports by exactly
/// the offset and nothing else: stamps of a volume, a container and a
/// network (list and inspect, a volume's create answer), the engine's clock
/// (`/info`, `Date`), and the event stream; the engine's own answers are
/// unchanged. What the skewed-clock tests below rely on.
trial!(the_clock_shift_moves_every_time_the_engine_reports);
async fn the_clock_shift_moves_every_time_the_engine_reports() {
    let sbx = Sandbox::new("lease-shift").await;
    let b = sbx.add_box_with_network("B", Run::Running).await;
    let proxy = Proxy::start();
    let shift = -HOUR;
    proxy.shift_clock(shift);
    let (direct, through) = (sbx.docker(), unix_client(&proxy.docker_host()));
    let scope = sbx.scope_arg();
    let filters = HashMap::from([("label", vec![scope.as_str()])]);

    // Volumes: inspect and list.
    let real = rfc3339_seconds(
        &direct
            .inspect_volume(&b.volume)
            .await
            .unwrap()
            .created_at
            .unwrap(),
    )
    .unwrap();
    let seen = rfc3339_seconds(
        &through
            .inspect_volume(&b.volume)
            .await
            .unwrap()
            .created_at
            .unwrap(),
    )
    .unwrap();
    assert_eq!(seen - real, shift, "volume inspect");
    let listed = through
        .list_volumes(Some(
            ListVolumesOptionsBuilder::new().filters(&filters).build(),
        ))
        .await
        .unwrap()
        .volumes
        .unwrap_or_default();
    let v = listed
        .iter()
        .find(|v| v.name == b.volume)
        .expect("the box's volume is listed");
    assert_eq!(
        rfc3339_seconds(v.created_at.as_deref().unwrap()).unwrap() - real,
        shift,
        "volume list"
    );

    // Containers: Unix seconds in the list, RFC 3339 in inspect.
    let list = |docker: &Docker| {
        let options = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&filters)
            .build();
        let docker = docker.clone();
        async move { docker.list_containers(Some(options)).await.unwrap() }
    };
    let created = |cs: Vec<bollard::models::ContainerSummary>| {
        cs.into_iter()
            .find(|c| c.id.as_deref() == Some(b.container.id.as_str()))
            .and_then(|c| c.created)
            .expect("the box's container is listed with Created")
    };
    assert_eq!(
        created(list(&through).await) - created(list(direct).await),
        shift,
        "container list"
    );
    let inspect = |docker: &Docker| {
        let (docker, id) = (docker.clone(), b.container.id.clone());
        async move {
            let c = docker
                .inspect_container(&id, None::<InspectContainerOptions>)
                .await
                .unwrap();
            let started = c.state.and_then(|s| s.started_at).unwrap();
            (
                rfc3339_seconds(&c.created.unwrap()).unwrap(),
                rfc3339_seconds(&started).unwrap(),
            )
        }
    };
    let ((c_real, s_real), (c_seen, s_seen)) = (inspect(direct).await, inspect(&through).await);
    assert_eq!(
        (c_seen - c_real, s_seen - s_real),
        (shift, shift),
        "container inspect"
    );

    // Networks: list and inspect.
    let net = |docker: &Docker| {
        let (docker, id, filters) = (docker.clone(), b.network.id.clone(), filters.clone());
        async move {
            let inspected = docker
                .inspect_network(&id, None::<InspectNetworkOptions>)
                .await
                .unwrap();
            let listed = docker
                .list_networks(Some(
                    ListNetworksOptionsBuilder::new().filters(&filters).build(),
                ))
                .await
                .unwrap()
                .into_iter()
                .find(|n| n.id.as_deref() == Some(id.as_str()))
                .expect("the box's network is listed");
            (
                rfc3339_seconds(&inspected.created.unwrap()).unwrap(),
                rfc3339_seconds(&listed.created.unwrap()).unwrap(),
            )
        }
    };
    let ((i_real, l_real), (i_seen, l_seen)) = (net(direct).await, net(&through).await);
    assert_eq!(
        (i_seen - i_real, l_seen - l_real),
        (shift, shift),
        "network inspect, list"
    );

    // The engine's clock: /info and the Date header.
    let info_seen = rfc3339_seconds(&through.info().await.unwrap().system_time.unwrap()).unwrap();
    let info_real = rfc3339_seconds(&direct.info().await.unwrap().system_time.unwrap()).unwrap();
    assert_near(
        "SystemTime through the proxy",
        info_seen,
        info_real + shift,
        CLOCK_SLACK,
    );
    assert_near("SystemTime", info_real, local_now(), CLOCK_SLACK);
    assert_near(
        "Date through the proxy",
        date_header(proxy.socket()),
        local_now() + shift,
        CLOCK_SLACK,
    );

    // Events, streamed one by one; and a volume made through the proxy: its
    // create answer and every later reading carry the moved stamp.
    let name = sbx.unique("evented");
    let event_filters = HashMap::from([("type", vec!["volume"]), ("volume", vec![name.as_str()])]);
    // From a little before now on the engine's real clock (the proxy does not
    // move what the client sends), so the event is there however late the
    // stream is opened.
    let since = (local_now() - 10).to_string();
    let mut events = Box::pin(
        through.events(Some(
            EventsOptionsBuilder::new()
                .since(&since)
                .filters(&event_filters)
                .build(),
        )),
    );
    let made = through
        .create_volume(bollard::models::VolumeCreateRequest {
            name: Some(name.clone()),
            labels: Some(HashMap::from([(
                SCOPE_KEY.to_string(),
                sbx.scope_value().to_string(),
            )])),
            ..Default::default()
        })
        .await
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(20), events.next())
        .await
        .expect("a volume event within 20 s")
        .expect("the stream goes on")
        .expect("an event");
    let real = stamp_of(&engine_endpoint(), &name);
    assert_eq!(
        rfc3339_seconds(made.created_at.as_deref().unwrap()).unwrap() - real,
        shift,
        "create answer"
    );
    assert_eq!(
        stamp_of(&proxy.docker_host(), &name) - real,
        shift,
        "docker volume inspect"
    );
    assert_near(
        "event time",
        event.time.unwrap(),
        local_now() + shift,
        CLOCK_SLACK,
    );
    assert_near(
        "event timeNano",
        event.time_nano.unwrap() / 1_000_000_000,
        local_now() + shift,
        CLOCK_SLACK,
    );
    // A volume made directly is not touched by the proxy: still the real stamp.
    let direct_made = sbx.volume(VolumeSpec::new()).await;
    assert_near(
        "a volume made directly",
        stamp_of(&engine_endpoint(), &direct_made),
        local_now(),
        CLOCK_SLACK,
    );
}

// ----- apply ----------------------------------------------------------------------

/// A lease made with the plain docker CLI keeps its undeclared box (grace 0)
/// through `plan` and `apply`: everything of the box is kept as `leased`, the
/// lease is live until its stamp plus 60 s on the engine's clock (read: no
/// skew on the main engine). Once the driver removes the lease volume, the
/// next apply removes the box.
trial!(a_docker_cli_lease_keeps_its_box_through_apply_until_it_is_removed);
async fn a_docker_cli_lease_keeps_its_box_through_apply_until_it_is_removed() {
    let sbx = Sandbox::new("lease-cli").await;
    let b = sbx.add_box("B", Run::Running).await;
    let lease = sbx.cli_lease("B", "60s");
    let stamp = stamp_of(&engine_endpoint(), &lease);
    let cli = undeclared(&sbx);

    let plan = cli.run_with(["plan"]).success().plan();
    let until = assert_box_leased(&plan, &b, &lease);
    assert_eq!(
        until,
        stamp + 60,
        "the lease ends at its stamp plus its ttl"
    );
    let clock = plan
        .engine_clock
        .as_ref()
        .expect("the engine's clock was read");
    assert!(clock.skew_seconds.abs() <= 1, "{clock:?}");

    // explain and inventory show the lease and when it runs out.
    let until_text = humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + Duration::from_secs(u64::try_from(until).unwrap()),
    )
    .to_string();
    let want = serde_json::json!({
        "volume": lease, "box": "B", "ttl": "60s", "state": "live", "until": until_text
    });
    let out = cli.run_with(["explain", &format!("container:{}", b.container.name)]);
    let explained: serde_json::Value = out.success().parse("explain JSON");
    assert_eq!(
        explained["explanations"][0]["leases"][0],
        want,
        "{}",
        out.dump()
    );
    let out = cli.run_with(["inventory"]);
    let listed: serde_json::Value = out.success().parse("inventory JSON");
    let leases: Vec<&serde_json::Value> = listed["boxes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["box"] == "B")
        .flat_map(|b| b["leases"].as_array().into_iter().flatten())
        .collect();
    assert_eq!(leases, vec![&want], "{}", out.dump());

    let out = cli.run_with(["apply"]);
    let report = out.success().report();
    assert!(report.is_clean(), "{}", out.dump());
    assert!(report.removed.is_empty(), "{}", out.dump());
    for name in [&b.container.name, &b.volume, &lease] {
        leased_until(&report.kept.named(name).why, "B", &lease);
    }
    assert!(sbx.container_exists(&b.container.id).await);
    assert!(sbx.volume_exists(&b.volume).await && sbx.volume_exists(&lease).await);

    // The driver is done: it removes its lease.
    docker(&engine_endpoint(), &["volume", "rm", &lease]);
    let out = cli.run_with(["apply"]);
    let report = out.success().report();
    assert_eq!(
        report.removed.names(Kind::Container),
        BTreeSet::from([b.container.name.clone()])
    );
    assert_eq!(
        report.removed.names(Kind::Volume),
        BTreeSet::from([b.volume.clone()])
    );
    let left = sbx.remaining().await;
    assert!(
        left.containers.is_empty() && left.volumes.is_empty(),
        "{left:?}"
    );
}

/// A lease that runs out (ttl 3 s) keeps its box while it lives; after its
/// end, the plan says it expired and apply removes the box and the lease
/// volume with it.
trial!(a_box_goes_with_its_lease_once_the_lease_runs_out);
async fn a_box_goes_with_its_lease_once_the_lease_runs_out() {
    let sbx = Sandbox::new("lease-expiry").await;
    let b = sbx.add_box("B", Run::Running).await;
    let lease = sbx.cli_lease("B", "3s");
    let cli = undeclared(&sbx);
    let until = assert_box_leased(&cli.run_with(["plan"]).success().plan(), &b, &lease);

    // Past the end (by this machine's clock, the same as the engine's here).
    let wait = (until + 1 - local_now()).max(0);
    tokio::time::sleep(Duration::from_secs(wait as u64)).await;
    let plan = cli.run_with(["plan"]).success().plan();
    assert_eq!(plan.lease(&lease).state, LeaseState::Expired, "{plan:#?}");
    assert!(plan.kept.is_empty(), "{plan:#?}");
    let out = cli.run_with(["apply"]);
    let report = out.success().report();
    assert_eq!(
        report.removed.names(Kind::Container),
        BTreeSet::from([b.container.name.clone()])
    );
    assert_eq!(
        report.removed.names(Kind::Volume),
        BTreeSet::from([b.volume.clone(), lease.clone()])
    );
    eprintln!(
        "lease-expiry: apply removed the box {:.1} s after its lease's end (it ran 1 s after the end)",
        (local_now_ms() - until * 1000) as f64 / 1000.0
    );
    assert!(!sbx.container_exists(&b.container.id).await);
    assert!(!sbx.volume_exists(&lease).await);
}

// ----- a skewed engine clock ---------------------------------------------------

/// The engine's clock is an hour BEHIND this machine's. A driver makes a 60 s
/// lease through the proxy, so the engine stamps it an hour early and its
/// clock agrees. sandboxctl through the proxy reads the skew (about -3600 s)
/// and keeps the box: by this machine's clock the lease's end is an hour
/// past, so a judgment by the local clock would have removed it.
///
/// Why the stamp must be moved too (checked by `assert_skewed_view`): the
/// engine really stamps its own, correct time; the proxy moves that stamp on
/// every way back (the create answer, list, inspect), so stamp and clock
/// agree as on a skewed host. Had only the clock been moved, the lease would
/// end an hour after the engine's "now" and hold by either clock: the test
/// would pass without proving anything. Where the lease is created (through
/// the proxy or not) does not change what sandboxctl sees; it is made
/// through the proxy as a driver on the skewed host would.
trial!(an_engine_clock_an_hour_behind_keeps_a_lease_the_local_clock_calls_expired);
async fn an_engine_clock_an_hour_behind_keeps_a_lease_the_local_clock_calls_expired() {
    let sbx = Sandbox::new("lease-behind").await;
    let proxy = Proxy::start();
    proxy.shift_clock(-HOUR);
    let b = sbx.add_box("B", Run::Running).await;
    let lease = sbx.cli_lease_at(&proxy.docker_host(), "B", "60s");
    assert_skewed_view(&proxy, &lease, -HOUR);
    let cli = undeclared(&sbx).docker_host(&proxy.docker_host());

    let plan = cli.run_with(["plan"]).success().plan();
    let until = assert_box_leased(&plan, &b, &lease);
    let clock = plan
        .engine_clock
        .as_ref()
        .expect("the engine's clock was read");
    assert_near("skewSeconds", clock.skew_seconds, -HOUR, 2);
    assert_near(
        "the plan's engine now",
        rfc3339_seconds(&clock.now).unwrap(),
        local_now() - HOUR,
        CLOCK_SLACK,
    );
    assert!(
        until < local_now() - HOUR + 120 && until < local_now() - 3000,
        "by this machine's clock the lease ended an hour ago: until {until}, now {}",
        local_now()
    );

    let out = cli.run_with(["apply"]);
    let report = out.success().report();
    assert!(report.removed.is_empty(), "{}", out.dump());
    leased_until(&report.kept.named(&b.container.name).why, "B", &lease);
    assert!(sbx.container_exists(&b.container.id).await);
    assert!(sbx.volume_exists(&b.volume).await && sbx.volume_exists(&lease).await);
}

/// The human plan says the engine's clock is skewed when leases were judged
/// by it (here: an hour behind).
trial!(the_human_plan_mentions_a_skewed_engine_clock);
async fn the_human_plan_mentions_a_skewed_engine_clock() {
    let sbx = Sandbox::new("lease-behind-human").await;
    let proxy = Proxy::start();
    proxy.shift_clock(-HOUR);
    let b = sbx.add_box("B", Run::Running).await;
    let lease = sbx.cli_lease_at(&proxy.docker_host(), "B", "60s");
    let out = sbx
        .cli()
        .state_toml(&sbx.scope_toml())
        .docker_host(&proxy.docker_host())
        .run_with(["plan"]);
    out.success();
    let text = &out.stdout;
    assert!(
        text.contains(&b.container.name) && text.contains(&lease),
        "{}",
        out.dump()
    );
    assert!(
        text.contains("Leases (judged by the engine's clock, 3600 s behind this machine's)")
            || text.contains("Leases (judged by the engine's clock, 3599 s behind this machine's)")
            || text.contains("Leases (judged by the engine's clock, 3601 s behind this machine's)"),
        "the human plan does not say the engine's clock is an hour behind\n{}",
        out.dump()
    );
}

/// The engine's clock is an hour AHEAD. A 3 s lease made through the proxy
/// keeps the box at first; about 4 s later apply through the proxy removes
/// the box and the lease, although by this machine's clock the lease's end
/// is an hour away.
trial!(an_engine_clock_an_hour_ahead_ends_a_lease_the_local_clock_calls_live);
async fn an_engine_clock_an_hour_ahead_ends_a_lease_the_local_clock_calls_live() {
    let sbx = Sandbox::new("lease-ahead").await;
    let proxy = Proxy::start();
    proxy.shift_clock(HOUR);
    let b = sbx.add_box("B", Run::Running).await;
    let lease = sbx.cli_lease_at(&proxy.docker_host(), "B", "3s");
    let made = Instant::now();
    let cli = undeclared(&sbx).docker_host(&proxy.docker_host());

    let plan = cli.run_with(["plan"]).success().plan();
    let until = assert_box_leased(&plan, &b, &lease);
    let skew = plan
        .engine_clock
        .as_ref()
        .expect("the engine's clock was read")
        .skew_seconds;
    assert_near("skewSeconds", skew, HOUR, 2);
    assert!(
        until > local_now() + 3000,
        "by this machine's clock the lease has an hour to go: until {until}, now {}",
        local_now()
    );
    assert_skewed_view(&proxy, &lease, HOUR);

    // The lease's end on this machine's clock, then about 4 s after it was made.
    let end_ms = (until - skew) * 1000;
    tokio::time::sleep(Duration::from_secs(4).saturating_sub(made.elapsed())).await;
    let wait = (end_ms + 1000 - local_now_ms()).max(0);
    tokio::time::sleep(Duration::from_millis(wait as u64)).await;
    let out = cli.run_with(["apply"]);
    let report = out.success().report();
    assert_eq!(
        report.removed.names(Kind::Container),
        BTreeSet::from([b.container.name.clone()]),
        "{}",
        out.dump()
    );
    assert_eq!(
        report.removed.names(Kind::Volume),
        BTreeSet::from([b.volume.clone(), lease.clone()]),
        "{}",
        out.dump()
    );
    eprintln!(
        "lease-ahead: apply (run 1 s past the lease's end) had removed the box {:.1} s after the lease was made, {:.1} s after its end",
        made.elapsed().as_secs_f64(),
        (local_now_ms() - end_ms) as f64 / 1000.0
    );
    assert!(!sbx.container_exists(&b.container.id).await);
}

// ----- destroy ----------------------------------------------------------------------

/// `destroy B` removes a leased box and its lease; the plan it prints and
/// every audit line say the box was leased (`destroyRequested` with
/// `leasedUntil`, the lease's end). Another leased box stays.
trial!(destroy_removes_a_leased_box_and_its_lease_and_says_it_was_leased);
async fn destroy_removes_a_leased_box_and_its_lease_and_says_it_was_leased() {
    let sbx = Sandbox::new("lease-destroy").await;
    let (b, other) = tokio::join!(
        sbx.add_box("B", Run::Running),
        sbx.add_box("O", Run::Running)
    );
    let (lease, other_lease) = (sbx.cli_lease("B", "60s"), sbx.cli_lease("O", "60s"));
    let until = stamp_of(&engine_endpoint(), &lease) + 60;
    let cli = sbx.cli();
    let audit = cli.dir().join("audit.jsonl");
    let out = cli.run_with(["destroy", "--audit", audit.to_str().unwrap(), "B"]);
    out.success();
    assert!(
        out.stdout
            .contains("destroy B requested (it was leased until"),
        "the printed plan does not say B was leased\n{}",
        out.dump()
    );

    let text = std::fs::read_to_string(&audit).expect("read the audit log");
    let lines: Vec<Value> =
        crate::support::schema::check_audit(&text, &audit.display().to_string());
    let names: BTreeSet<&str> = lines.iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        BTreeSet::from([b.container.name.as_str(), b.volume.as_str(), lease.as_str()]),
        "{lines:#?}"
    );
    for line in &lines {
        let reason = &line["reason"];
        assert_eq!(reason["code"], "destroyRequested", "{line:#}");
        assert_eq!(reason["boxId"], "B", "{line:#}");
        let leased = reason["leasedUntil"]
            .as_str()
            .unwrap_or_else(|| panic!("no leasedUntil: {line:#}"));
        assert_eq!(rfc3339_seconds(leased), Some(until), "{line:#}");
        assert_eq!(line["outcome"], "removed", "{line:#}");
    }
    assert!(!sbx.container_exists(&b.container.id).await);
    assert!(!sbx.volume_exists(&b.volume).await && !sbx.volume_exists(&lease).await);
    assert!(
        sbx.container_exists(&other.container.id).await,
        "destroy B touched box O"
    );
    assert!(
        sbx.volume_exists(&other_lease).await,
        "destroy B touched O's lease"
    );
}

// ----- hostile ttls -------------------------------------------------------------------

/// A lease label that does not read as a ttl (`garbage`, `-5s`), is zero, or
/// is over the 24 h ceiling (`9999999h`) is not a lease: each undeclared box
/// with only such a lease is removed by apply (grace 0), the lease volume
/// too, and the plan lists the lease as invalid, with why, and warns on
/// stderr naming the volume.
trial!(hostile_lease_ttls_are_not_leases);
async fn hostile_lease_ttls_are_not_leases() {
    let sbx = Sandbox::new("lease-hostile").await;
    let cases = [
        ("9999999h", "overCeiling", Some(86_400)),
        ("garbage", "unreadable", None),
        ("-5s", "unreadable", None),
        ("0", "zero", None),
    ];
    let mut boxes = Vec::new();
    for (i, (ttl, _, _)) in cases.iter().enumerate() {
        let id = format!("h{i}");
        let b = sbx.add_box(&id, Run::Running).await;
        let lease = sbx.cli_lease(&id, ttl);
        boxes.push((b, lease));
    }
    let cli = undeclared(&sbx);
    let out = cli.run_with(["plan"]);
    let plan = out.success().plan();
    assert!(plan.kept.is_empty(), "{plan:#?}");
    for ((b, lease), (ttl, problem, max_lease)) in boxes.iter().zip(cases) {
        // Warned, naming the volume.
        assert!(
            out.stderr.contains(&format!(
                "warning: volume {lease} of box {} on engine default is not a lease",
                b.box_id
            )),
            "{}",
            out.dump()
        );
        let note = plan.lease(lease);
        assert_eq!(
            (note.state, note.ttl.as_str()),
            (LeaseState::Invalid, ttl),
            "{note:#?}"
        );
        assert_eq!(
            (note.problem.as_deref(), note.max_lease),
            (Some(problem), max_lease),
            "{note:#?}"
        );
        for name in [&b.container.name, &b.volume, lease] {
            match &plan.step(name).why {
                Reason::BoxNotDeclared { box_id, .. } if *box_id == b.box_id => {}
                other => panic!("{name} goes as undeclared, not {other:#?}"),
            }
        }
    }

    let out = cli.run_with(["apply"]);
    let report = out.success().report();
    assert!(report.is_clean(), "{}", out.dump());
    let want: BTreeSet<String> = boxes
        .iter()
        .flat_map(|(b, lease)| [b.volume.clone(), lease.clone()])
        .collect();
    assert_eq!(report.removed.names(Kind::Volume), want);
    assert_eq!(report.removed.names(Kind::Container).len(), cases.len());
    let left = sbx.remaining().await;
    assert!(
        left.containers.is_empty() && left.volumes.is_empty(),
        "{left:?}"
    );
}

// ----- a fleet -----------------------------------------------------------------------

/// Each engine of a fleet holds its own leases: boxes A and B on both the
/// main engine and a second dockerd, A leased on the main one only, B on the
/// second only. A fleet apply keeps A only on the main engine and B only on
/// the second, and removes the other copy of each.
trial!(each_fleet_engine_keeps_only_the_boxes_leased_on_it);
async fn each_fleet_engine_keeps_only_the_boxes_leased_on_it() {
    let second = SecondDockerd::new().tcp().shared().await;
    let main = main_host();
    let scope = unique_scope("lease-fleet");
    let (one, two) = (Corner::on_main(&scope), Corner::on(&second, &scope));
    let (a1, b1, a2, b2) = tokio::join!(
        one.add_box("A", false),
        one.add_box("B", false),
        two.add_box("A", false),
        two.add_box("B", false)
    );
    let (lease_a, lease_b) = (one.cli_lease("A", "60s"), two.cli_lease("B", "60s"));
    let state = format!(
        "[scope]\nlabels = {{ \"{SCOPE_KEY}\" = \"{scope}\" }}\n\n\
         [[engine]]\nname = \"one\"\nhost = \"{main}\"\n\n\
         [[engine]]\nname = \"two\"\nhost = \"{}\"\n",
        second.socket_host()
    );
    let cli = Cli::new().env_remove("DOCKER_HOST").state_toml(&state);
    let out = cli.run_with(["--format", "json", "apply"]);
    out.success();
    let report = out.json();
    let entries = |section: &str, kind: &str| -> BTreeSet<String> {
        report[section][kind]
            .as_array()
            .unwrap_or_else(|| panic!("{section}.{kind}: {report:#}"))
            .iter()
            .map(|e| {
                format!(
                    "{}:{}",
                    e["engine"].as_str().unwrap(),
                    e["name"].as_str().unwrap()
                )
            })
            .collect()
    };
    assert_eq!(
        entries("kept", "containers"),
        BTreeSet::from([
            format!("one:{}", a1.container_name),
            format!("two:{}", b2.container_name)
        ]),
        "{report:#}"
    );
    for kept in report["kept"]["containers"].as_array().unwrap() {
        assert_eq!(kept["reason"]["code"], "leased", "{kept:#}");
    }
    assert_eq!(
        entries("removed", "containers"),
        BTreeSet::from([
            format!("one:{}", b1.container_name),
            format!("two:{}", a2.container_name)
        ]),
        "{report:#}"
    );
    assert_eq!(
        entries("removed", "volumes"),
        BTreeSet::from([format!("one:{}", b1.volume), format!("two:{}", a2.volume)]),
        "{report:#}"
    );
    assert_eq!(
        entries("kept", "volumes"),
        BTreeSet::from([
            format!("one:{}", a1.volume),
            format!("one:{lease_a}"),
            format!("two:{}", b2.volume),
            format!("two:{lease_b}"),
        ]),
        "{report:#}"
    );
    assert!(one.container_exists(&a1.container).await && one.volume_exists(&lease_a).await);
    assert!(two.container_exists(&b2.container).await && two.volume_exists(&lease_b).await);
    assert!(
        !one.container_exists(&b1.container).await && !two.container_exists(&a2.container).await
    );
    drop((one, two));
    drop(second);
    assert!(link_exists("docker0"), "the main engine's docker0 is gone");
}

// ----- watch -------------------------------------------------------------------------

/// `sandboxctl --scope … --format json --state … watch --grace 2s --debounce 1s`.
fn start_watch(sbx: &Sandbox) -> Guarded {
    let debounce = format!("{}s", DEBOUNCE.as_secs());
    undeclared(sbx).deadline(CHILD_DEADLINE).spawn_guarded([
        "watch",
        "--grace",
        "2s",
        "--debounce",
        &debounce,
    ])
}

/// Waits (at most `timeout`) until container `id` is gone; the local time it
/// was seen gone (Unix ms), or a failure showing the watch's stderr.
async fn gone_at(sbx: &Sandbox, id: &str, timeout: Duration, watch: &Guarded) -> i64 {
    poll_until(timeout, || async move { !sbx.container_exists(id).await })
        .await
        .unwrap_or_else(|| {
            panic!(
                "container {id} still there after {timeout:?}\n--- watch stderr\n{}",
                watch.stderr()
            )
        });
    local_now_ms()
}

/// Under `watch --grace 2s --debounce 1s`, a box with an 8 s docker CLI lease
/// stays while the lease lives (a box without one is reaped after its grace)
/// and is removed, lease and all, within debounce + 3 s of the lease's end:
/// watch wakes for the lease's end by itself (no event announces it).
trial!(watch_keeps_a_leased_box_and_reaps_it_when_the_lease_runs_out);
async fn watch_keeps_a_leased_box_and_reaps_it_when_the_lease_runs_out() {
    let sbx = Sandbox::new("lease-watch").await;
    let (b, bare) = tokio::join!(
        sbx.add_box("B", Run::Running),
        sbx.add_box("C", Run::Running)
    );
    let lease = sbx.cli_lease("B", "8s");
    let end_ms = stamp_of(&engine_endpoint(), &lease) * 1000 + 8000;
    let watch = start_watch(&sbx);

    gone_at(
        &sbx,
        &bare.container.id,
        Duration::from_secs(2) + DEBOUNCE + Duration::from_secs(12),
        &watch,
    )
    .await;
    assert!(
        local_now_ms() < end_ms - 500,
        "the unleased box took too long to go to check the leased one before its end"
    );
    assert!(
        sbx.container_exists(&b.container.id).await,
        "the leased box went before its lease's end\n{}",
        watch.stderr()
    );
    let gone = gone_at(&sbx, &b.container.id, Duration::from_secs(40), &watch).await;
    let late = gone - end_ms;
    eprintln!(
        "lease-watch: box gone {:.2} s after its lease's end",
        late as f64 / 1000.0
    );
    assert!(
        late >= 0,
        "the box went {} ms before its lease's end",
        -late
    );
    assert!(
        late <= reap_budget_ms("lease end to removal"),
        "the box went {late} ms after its lease's end (budget above)\n{}",
        watch.stderr()
    );
    let (s, l) = (&sbx, lease.as_str());
    poll_until(Duration::from_secs(10), || async move {
        !s.volume_exists(l).await
    })
    .await
    .expect("the lease volume goes with its box");
    assert!(watch.alive());
}

/// `sandboxctl hold B --ttl 6s -- sleep 600` keeps box B through `watch
/// --grace 2s --debounce 1s` for 20 s (it renews every 2 s). SIGKILL the
/// hold itself (it cannot release): the box is removed within lease end +
/// debounce + 3 s. Then a second box held the same way, whose `sleep` is
/// SIGKILLed: hold releases, exits 137, and watch removes the box within
/// debounce + 3 s.
trial!(a_held_box_survives_watch_and_goes_soon_after_its_holder_dies);
async fn a_held_box_survives_watch_and_goes_soon_after_its_holder_dies() {
    let sbx = Sandbox::new("lease-hold").await;
    let (b, d, bare) = tokio::join!(
        sbx.add_box("B", Run::Running),
        sbx.add_box("D", Run::Running),
        sbx.add_box("C", Run::Running)
    );
    let hold = |box_id: &str| {
        undeclared(&sbx)
            .deadline(CHILD_DEADLINE)
            .spawn_guarded(["hold", box_id, "--ttl", "6s", "--", "sleep", "600"])
    };
    // Holds first: the boxes are older than the grace when watch starts.
    let (hold_b, hold_d) = (hold("B"), hold("D"));
    for (box_id, h) in [("B", &hold_b), ("D", &hold_d)] {
        let s = &sbx;
        poll_until(Duration::from_secs(15), || async move {
            !h.alive()
                || !leases_of(s.docker(), s.scope_value(), box_id)
                    .await
                    .is_empty()
        })
        .await
        .filter(|_| h.alive())
        .unwrap_or_else(|| {
            panic!(
                "hold {box_id} made no lease within 15 s (alive: {})\n{}",
                h.alive(),
                h.stderr()
            )
        });
    }
    // Each hold's command, killed by pid at the end whatever happens (a
    // SIGKILLed hold leaves its child behind).
    let mut sleeps = Vec::new();
    for h in [&hold_b, &hold_d] {
        poll_until(Duration::from_secs(10), || async {
            descendants_named(h.pid(), "sleep").len() == 1
        })
        .await
        .unwrap_or_else(|| panic!("no one `sleep` under hold {}\n{}", h.pid(), h.stderr()));
        sleeps.push(descendants_named(h.pid(), "sleep")[0]);
    }
    let (sleep_b, sleep_d) = (sleeps[0], sleeps[1]);
    let _reap = KillOnDrop(sleeps);
    let watch = start_watch(&sbx);

    // 20 s: the unleased box goes, the held ones stay.
    let started = Instant::now();
    gone_at(&sbx, &bare.container.id, Duration::from_secs(15), &watch).await;
    while started.elapsed() < Duration::from_secs(20) {
        assert!(
            sbx.container_exists(&b.container.id).await,
            "held box B went\n{}",
            watch.stderr()
        );
        assert!(
            sbx.container_exists(&d.container.id).await,
            "held box D went\n{}",
            watch.stderr()
        );
        assert!(
            hold_b.alive() && hold_d.alive(),
            "a hold ended\n{}\n{}",
            hold_b.stderr(),
            hold_d.stderr()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // SIGKILL the hold of B: its last lease runs out on its own. Its
    // `sleep` lives on with hold's output pipes: end it too (that releases
    // nothing: the hold is dead), so that hold's output reaches its end.
    hold_b.signal(libc::SIGKILL);
    signal_pid(sleep_b, libc::SIGKILL);
    let out = hold_b.wait();
    assert_eq!(
        out.code,
        None,
        "hold was killed by the signal\n{}",
        out.dump()
    );
    let leases = leases_of(sbx.docker(), sbx.scope_value(), "B").await;
    let end_ms = leases
        .iter()
        .filter_map(|l| l.ends())
        .max()
        .unwrap_or_else(|| panic!("B has no lease left after its hold died: {leases:?}"))
        * 1000;
    let gone = gone_at(&sbx, &b.container.id, Duration::from_secs(30), &watch).await;
    let late = gone - end_ms;
    eprintln!(
        "lease-hold: B gone {:.2} s after its last lease's end (ttl 6 s; {} lease(s) left by the killed hold)",
        late as f64 / 1000.0,
        leases.len()
    );
    assert!(late >= 0, "B went {} ms before its lease's end", -late);
    assert!(
        late <= reap_budget_ms("lease end to removal"),
        "B went {late} ms after its lease's end (budget above)\n{}",
        watch.stderr()
    );
    // Its leases go with it (a lease's grace counts from its box's start).
    let s = &sbx;
    poll_until(Duration::from_secs(10), || async move {
        leases_of(s.docker(), s.scope_value(), "B").await.is_empty()
    })
    .await
    .expect("B's leases go with B");

    // SIGKILL D's `sleep`: hold releases and passes the status on (128 + 9).
    signal_pid(sleep_d, libc::SIGKILL);
    let killed = local_now_ms();
    let out = hold_d.wait();
    out.expect_code(137);
    let released = local_now_ms();
    assert!(
        leases_of(sbx.docker(), sbx.scope_value(), "D")
            .await
            .is_empty(),
        "hold left D's lease behind after its command died\n{}",
        out.dump()
    );
    let gone = gone_at(&sbx, &d.container.id, Duration::from_secs(30), &watch).await;
    eprintln!(
        "lease-hold: D's hold exited {:.2} s after its command was killed; D gone {:.2} s after the kill",
        (released - killed) as f64 / 1000.0,
        (gone - killed) as f64 / 1000.0
    );
    assert!(
        gone - killed <= reap_budget_ms("command death to removal"),
        "D went {} ms after its command died (budget above)\n{}",
        gone - killed,
        watch.stderr()
    );
    assert!(watch.alive(), "{}", watch.stderr());
}
