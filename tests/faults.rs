//! Faults injected between `sandboxctl` and the real engine, through the
//! fault-injection proxy (`support::proxy`).
//!
//! Each scenario runs the built binary (`apply --format json`) against its own
//! scope, then checks three things: the exit code, the typed JSON report
//! (`support::report`), and what the engine really holds afterwards, listed
//! directly (not through the proxy). [`assert_honest`] runs after every run:
//! exit 0 only if nothing in the scope is left to remove, and every object left
//! to remove is named in the report.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use sandboxctl::model::short_id;

use crate::support::assert::{assert_honest, goal};
use crate::support::cli::{Cli, Output};
use crate::support::docker::{engine_version, Run, Sandbox, SandboxBox, VolumeSpec};
use crate::support::proxy::Proxy;
use crate::support::report::{FailureKind, Kind, Reason, Report};

/// A run of the binary through `proxy`, scoped to `sbx` by a state file that
/// declares nothing (so every managed object of the scope should go), JSON output.
fn cli(sbx: &Sandbox, proxy: &Proxy) -> Cli {
    Cli::new()
        .docker_host(&proxy.docker_host())
        .state_toml(&sbx.scope_toml())
        .json()
        .deadline(Duration::from_secs(60))
}

/// Runs `apply` and reads its report.
fn apply(cli: &Cli) -> (Output, Report) {
    let out = cli.run_with(["apply"]);
    let report = out.report();
    (out, report)
}

fn set<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> BTreeSet<String> {
    items.into_iter().map(|s| s.as_ref().to_string()).collect()
}

/// Two leaked boxes, one running and one exited, each a container mounting its volume.
async fn two_boxes(sbx: &Sandbox) -> (SandboxBox, SandboxBox) {
    let (a, b) = tokio::join!(
        sbx.add_box("alpha", Run::Running),
        sbx.add_box("beta", Run::Exited)
    );
    (a, b)
}

// ----- listing failures ---------------------------------------------------------

/// One listing fails (500), through the proxy; everything else answers.
struct ListingFault {
    sbx: Sandbox,
    /// Leaked boxes: `alpha` running, `beta` exited, `netbox` exited with a network.
    a: SandboxBox,
    b: SandboxBox,
    net: crate::support::docker::NetworkedBox,
    /// A leaked volume without a box label.
    leak: String,
    proxy: Proxy,
    out: Output,
    report: Report,
}

/// Runs `apply` while `method path` fails with a 500, and checks what holds
/// for every listing: exit 1 and `converged: false`; one engine failure,
/// "could not list WHAT", carrying the engine's message once (also on
/// stderr); the report honest ([`assert_honest`]: an object of the failed
/// kind was never seen, every other one left is named).
async fn listing_fails(test: &str, method: &str, path: &str, what: &str) -> ListingFault {
    let sbx = Sandbox::new(test).await;
    let (a, b) = two_boxes(&sbx).await;
    let leak = sbx.leaked_volume().await;
    let net = sbx.add_box_with_network("netbox", Run::Exited).await;
    let proxy = Proxy::start();
    let message = format!("{what} listing exploded");
    proxy.on(method, path).always().respond(500, &message);

    let (out, report) = apply(&cli(&sbx, &proxy));

    out.expect_code(1);
    assert!(!report.converged);
    // The plan's listing, and the verification's (each a failure of its own).
    assert!((1..=2).contains(&report.failures.len()), "{}", out.dump());
    let plain = format!("could not list {what}");
    let verifying = format!("verification failed: {plain}");
    for f in &report.failures {
        assert_eq!(f.kind, FailureKind::Engine);
        assert!(
            (f.error.starts_with(&plain) || f.error.starts_with(&verifying))
                && f.error.contains("HTTP 500")
                && f.error.contains(&message),
            "{}",
            out.dump()
        );
        // The engine's message is given once, not repeated by the error chain.
        assert_eq!(
            f.error.matches(&message).count(),
            1,
            "repeated: {}",
            f.error
        );
    }
    assert!(out.stderr.contains("could not list"), "{}", out.dump());
    assert!(proxy.count(method, path) >= 1, "{}", proxy.dump());
    assert_honest(&sbx, &goal(&[]), &out, &report).await;
    ListingFault {
        sbx,
        a,
        b,
        net,
        leak,
        proxy,
        out,
        report,
    }
}

/// The code of the reason `report` gives for the leftover `name` of `kind`.
fn code_of(report: &Report, kind: Kind, name: &str) -> String {
    report.leftover(kind, name).reason.code()
}

trial!(listing_containers_fails_removes_nothing_and_names_what_it_saw);
async fn listing_containers_fails_removes_nothing_and_names_what_it_saw() {
    let t = listing_fails(
        "fault-list-containers",
        "GET",
        "/containers/json",
        "containers",
    )
    .await;
    // Any container could use a volume or a network: nothing goes.
    assert_eq!(t.proxy.count("DELETE", ""), 0, "{}", t.proxy.dump());
    assert!(t.report.removed.is_empty(), "{}", t.out.dump());
    for v in [&t.a.volume, &t.b.volume, &t.leak, &t.net.volume] {
        assert!(t.sbx.volume_exists(v).await);
        assert_eq!(code_of(&t.report, Kind::Volume, v), "listingFailed");
    }
    assert_eq!(
        code_of(&t.report, Kind::Network, &t.net.network.name),
        "listingFailed"
    );
    assert!(t.sbx.container_exists(&t.a.container.id).await);
}

trial!(listing_volumes_fails_keeps_what_a_lease_could_hold);
async fn listing_volumes_fails_keeps_what_a_lease_could_hold() {
    let t = listing_fails("fault-list-volumes", "GET", "/volumes?", "volumes").await;
    // Every box could be leased (a lease is a volume): none of them goes.
    assert_eq!(t.proxy.count("DELETE", ""), 0, "{}", t.proxy.dump());
    for c in [&t.a.container, &t.b.container, &t.net.container] {
        assert!(t.sbx.container_exists(&c.id).await);
        assert_eq!(
            code_of(&t.report, Kind::Container, &c.name),
            "listingFailed"
        );
    }
    assert_eq!(
        code_of(&t.report, Kind::Network, &t.net.network.name),
        "listingFailed"
    );
}

trial!(listing_networks_fails_removes_every_container_and_volume);
async fn listing_networks_fails_removes_every_container_and_volume() {
    let t = listing_fails("fault-list-networks", "GET", "/networks?", "networks").await;
    // Nothing's safety depends on the networks: all but the network goes.
    for c in [&t.a.container, &t.b.container, &t.net.container] {
        assert!(!t.sbx.container_exists(&c.id).await, "{}", t.out.dump());
    }
    for v in [&t.a.volume, &t.b.volume, &t.leak, &t.net.volume] {
        assert!(!t.sbx.volume_exists(v).await, "{}", t.out.dump());
    }
    assert!(t.sbx.network_exists(&t.net.network.id).await);
    assert_eq!(t.report.removed.len(), 7, "{}", t.out.dump());
}

trial!(listing_images_fails_removes_everything_and_still_fails);
async fn listing_images_fails_removes_everything_and_still_fails() {
    let t = listing_fails("fault-list-images", "GET", "/images/json", "images").await;
    assert!(!t.sbx.network_exists(&t.net.network.id).await);
    assert!(!t.sbx.volume_exists(&t.leak).await);
    assert_eq!(t.report.removed.len(), 8, "{}", t.out.dump());
    assert!(
        t.report.all_remaining().next().is_none(),
        "{}",
        t.out.dump()
    );
}

// ----- removal failures ---------------------------------------------------------

trial!(container_removal_500_skips_its_volume_and_names_both);
async fn container_removal_500_skips_its_volume_and_names_both() {
    let sbx = Sandbox::new("fault-container-500").await;
    let (a, b) = two_boxes(&sbx).await;
    let leak = sbx.leaked_volume().await;
    let proxy = Proxy::start();
    let target = format!("/containers/{}", a.container.id);
    proxy
        .on("DELETE", &target)
        .respond(500, "driver failed to remove root filesystem");

    let (out, report) = apply(&cli(&sbx, &proxy));

    out.expect_code(1);
    assert!(!report.converged);
    let f = report.only_failure();
    assert_eq!(
        (f.kind, f.name.as_str(), f.id.as_deref()),
        (
            FailureKind::Container,
            a.container.name.as_str(),
            Some(a.container.id.as_str())
        )
    );
    assert!(
        f.error.contains("HTTP 500: driver failed"),
        "{}",
        out.dump()
    );
    // Both the container and its volume are named, each with its own reason.
    assert_eq!(
        report.remaining_names(Kind::Container),
        set([&a.container.name])
    );
    assert_eq!(report.remaining_names(Kind::Volume), set([&a.volume]));
    match &report.leftover(Kind::Container, &a.container.name).reason {
        Reason::RemovalFailed { error, .. } => assert!(error.contains("HTTP 500"), "{error}"),
        other => panic!("{other:?}"),
    }
    match &report.leftover(Kind::Volume, &a.volume).reason {
        Reason::WaitsForFailed { object, text, .. } => {
            assert_eq!(object.name, a.container.name);
            assert!(
                text.starts_with("not attempted: it waits for step"),
                "{text}"
            );
        }
        other => panic!("{other:?}"),
    }
    // The volume was never attempted; everything else went.
    assert_eq!(
        proxy.count("DELETE", &format!("/volumes/{}", a.volume)),
        0,
        "{}",
        proxy.dump()
    );
    assert_eq!(
        report.removed.names(Kind::Container),
        set([&b.container.name])
    );
    assert_eq!(report.removed.names(Kind::Volume), set([&b.volume, &leak]));
    assert!(sbx.container_exists(&a.container.id).await);
    assert!(sbx.volume_exists(&a.volume).await);
    assert!(!sbx.container_exists(&b.container.id).await);
    assert!(!sbx.volume_exists(&b.volume).await);
    assert!(!sbx.volume_exists(&leak).await);
    assert_honest(&sbx, &goal(&[]), &out, &report).await;
}

trial!(volume_removal_500_is_named_and_the_rest_goes);
async fn volume_removal_500_is_named_and_the_rest_goes() {
    let sbx = Sandbox::new("fault-volume-500").await;
    let (a, b) = two_boxes(&sbx).await;
    let proxy = Proxy::start();
    proxy
        .on("DELETE", &format!("/volumes/{}", b.volume))
        .respond(500, "volume driver unavailable");

    let (out, report) = apply(&cli(&sbx, &proxy));

    out.expect_code(1);
    let f = report.only_failure();
    assert_eq!(
        (f.kind, f.name.as_str()),
        (FailureKind::Volume, b.volume.as_str())
    );
    assert!(
        f.error.contains("HTTP 500: volume driver unavailable"),
        "{}",
        out.dump()
    );
    assert!(report.remaining_containers.is_empty(), "{}", out.dump());
    assert_eq!(report.remaining_names(Kind::Volume), set([&b.volume]));
    assert!(report
        .leftover(Kind::Volume, &b.volume)
        .reason
        .text()
        .contains("volume driver unavailable"));
    assert_eq!(
        report.removed.names(Kind::Container),
        set([&a.container.name, &b.container.name])
    );
    assert_eq!(report.removed.names(Kind::Volume), set([&a.volume]));
    assert!(sbx.volume_exists(&b.volume).await);
    assert!(!sbx.volume_exists(&a.volume).await);
    assert_honest(&sbx, &goal(&[]), &out, &report).await;
}

/// A network whose removal fails is named with the engine's error; the
/// containers that were attached to it are gone.
trial!(network_removal_500_is_named_and_the_rest_goes);
async fn network_removal_500_is_named_and_the_rest_goes() {
    let sbx = Sandbox::new("fault-network-500").await;
    let net = sbx.add_box_with_network("netbox", Run::Running).await;
    let proxy = Proxy::start();
    proxy
        .on("DELETE", &format!("/networks/{}", net.network.id))
        .respond(500, "network driver unavailable");

    let (out, report) = apply(&cli(&sbx, &proxy));

    out.expect_code(1);
    let f = report.only_failure();
    assert_eq!(
        (f.kind, f.name.as_str(), f.id.as_deref()),
        (
            FailureKind::Network,
            net.network.name.as_str(),
            Some(net.network.id.as_str())
        )
    );
    assert!(
        f.error.contains("HTTP 500: network driver unavailable"),
        "{}",
        out.dump()
    );
    assert_eq!(
        report.remaining_names(Kind::Network),
        set([&net.network.name])
    );
    assert_eq!(
        report.removed.names(Kind::Container),
        set([&net.container.name])
    );
    assert_eq!(report.removed.names(Kind::Volume), set([&net.volume]));
    assert!(sbx.network_exists(&net.network.id).await);
    assert!(!sbx.container_exists(&net.container.id).await);
    assert_honest(&sbx, &goal(&[]), &out, &report).await;
}

// ----- connections cut ------------------------------------------------------------

trial!(connection_dropped_on_a_removal_names_that_object);
async fn connection_dropped_on_a_removal_names_that_object() {
    let sbx = Sandbox::new("fault-dropped").await;
    let (a, b) = two_boxes(&sbx).await;
    let proxy = Proxy::start();
    proxy
        .on("DELETE", &format!("/containers/{}", a.container.id))
        .close();

    let (out, report) = apply(&cli(&sbx, &proxy));

    out.expect_code(1);
    let f = report.only_failure();
    assert_eq!(
        (f.kind, f.name.as_str()),
        (FailureKind::Container, a.container.name.as_str())
    );
    assert!(
        f.error
            .contains(&format!("remove container {}", short_id(&a.container.id))),
        "{}",
        out.dump()
    );
    assert_eq!(
        report.remaining_names(Kind::Container),
        set([&a.container.name])
    );
    assert_eq!(report.remaining_names(Kind::Volume), set([&a.volume]));
    assert_eq!(proxy.count("DELETE", &format!("/volumes/{}", a.volume)), 0);
    // The engine never got the request: the container is still there.
    assert!(sbx.container_exists(&a.container.id).await);
    assert!(!sbx.container_exists(&b.container.id).await);
    assert!(!sbx.volume_exists(&b.volume).await);
    assert_honest(&sbx, &goal(&[]), &out, &report).await;
}

/// The engine removed the volume but the answer was lost: sandboxctl cannot
/// know, so the removal is a failure (exit 1); verification finds it gone, so
/// it is not reported as left behind.
trial!(answer_lost_after_the_engine_removed_is_still_a_failure);
async fn answer_lost_after_the_engine_removed_is_still_a_failure() {
    let sbx = Sandbox::new("fault-answer-lost").await;
    let (a, _b) = two_boxes(&sbx).await;
    let proxy = Proxy::start();
    proxy
        .on("DELETE", &format!("/volumes/{}", a.volume))
        .forward_then_close();

    let (out, report) = apply(&cli(&sbx, &proxy));

    out.expect_code(1);
    let f = report.only_failure();
    assert_eq!(
        (f.kind, f.name.as_str()),
        (FailureKind::Volume, a.volume.as_str())
    );
    let seen = proxy.requests("DELETE", &format!("/volumes/{}", a.volume));
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].status,
        Some(204),
        "the engine did remove it: {}",
        proxy.dump()
    );
    assert!(!sbx.volume_exists(&a.volume).await);
    assert!(report.remaining_volumes.is_empty(), "{}", out.dump());
    assert_honest(&sbx, &goal(&[]), &out, &report).await;
}

// ----- slow engine ------------------------------------------------------------------

trial!(engine_slower_than_the_timeout_fails_fast);
async fn engine_slower_than_the_timeout_fails_fast() {
    let sbx = Sandbox::new("fault-slow-listing").await;
    let (a, _b) = two_boxes(&sbx).await;
    let before = sbx.remaining().await;
    let proxy = Proxy::start();
    proxy
        .on("GET", "/containers/json")
        .always()
        .delay(Duration::from_secs(30));
    let cli = cli(&sbx, &proxy)
        .args(["--timeout", "1"])
        .deadline(Duration::from_secs(20));

    let (out, report) = apply(&cli);

    out.expect_code(1);
    assert!(
        out.elapsed < Duration::from_secs(8),
        "took {:?}",
        out.elapsed
    );
    // The plan's listing and the verification's: each its own deadline.
    for f in &report.failures {
        assert_eq!(f.kind, FailureKind::Engine);
        assert!(f.error.contains("no answer within 1s"), "{}", out.dump());
    }
    assert!(!report.failures.is_empty());
    assert!(out.stderr.contains("no answer within 1s"), "{}", out.dump());
    assert_eq!(proxy.count("DELETE", ""), 0);
    assert_eq!(sbx.remaining().await, before);
    assert!(sbx.container_exists(&a.container.id).await);
    assert_honest(&sbx, &goal(&[]), &out, &report).await;

    // A daemon that does not even answer the version check is unreachable, also fast.
    let proxy = Proxy::start();
    proxy
        .on("GET", "/_ping")
        .always()
        .delay(Duration::from_secs(30));
    let cli = crate::faults::cli(&sbx, &proxy)
        .args(["--timeout", "1"])
        .deadline(Duration::from_secs(20));
    let (out, report) = apply(&cli);
    out.expect_code(1);
    assert!(
        out.elapsed < Duration::from_secs(8),
        "took {:?}",
        out.elapsed
    );
    let error = report.failures[0].error.to_lowercase();
    assert!(
        error.contains("no answer") || error.contains("timeout"),
        "{}",
        out.dump()
    );
    assert_eq!(sbx.remaining().await, before);
}

trial!(removal_slower_than_the_timeout_is_named_and_skips_its_volume);
async fn removal_slower_than_the_timeout_is_named_and_skips_its_volume() {
    let sbx = Sandbox::new("fault-slow-removal").await;
    let (a, b) = two_boxes(&sbx).await;
    let proxy = Proxy::start();
    let target = format!("/containers/{}", a.container.id);
    proxy.on("DELETE", &target).delay(Duration::from_secs(30));
    // 5 s, not 1: the listings before the removal and the inspections after
    // it must not time out on a daemon busy with the other tests (inspecting a
    // container that another test is force-removing waits for that removal).
    let cli = cli(&sbx, &proxy)
        .args(["--timeout", "5"])
        .deadline(Duration::from_secs(40));

    let (out, report) = apply(&cli);

    out.expect_code(1);
    assert!(
        out.elapsed < Duration::from_secs(20),
        "took {:?}",
        out.elapsed
    );
    let f = report.only_failure();
    assert_eq!(
        (f.kind, f.name.as_str()),
        (FailureKind::Container, a.container.name.as_str())
    );
    assert!(f.error.contains("no answer within 5s"), "{}", out.dump());
    assert!(report
        .leftover(Kind::Container, &a.container.name)
        .reason
        .text()
        .contains("no answer within 5s"));
    assert!(matches!(
        report.leftover(Kind::Volume, &a.volume).reason,
        Reason::WaitsForFailed { .. }
    ));
    // sandboxctl gave up on the request; the proxy dropped it unanswered.
    let seen = proxy.requests("DELETE", &target);
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].action, "delay-abandoned", "{}", proxy.dump());
    assert!(sbx.container_exists(&a.container.id).await);
    assert!(sbx.volume_exists(&a.volume).await);
    assert!(!sbx.container_exists(&b.container.id).await);
    assert_honest(&sbx, &goal(&[]), &out, &report).await;
}

// ----- verification -------------------------------------------------------------------

trial!(failed_verification_listing_is_exit_1_even_after_every_removal_succeeded);
async fn failed_verification_listing_is_exit_1_even_after_every_removal_succeeded() {
    let sbx = Sandbox::new("fault-verify").await;
    let (a, b) = two_boxes(&sbx).await;
    let proxy = Proxy::start();
    // The plan's container listings pass (the managed ones; the running ones
    // made after the older box, or every one when both boxes were made in
    // the same second; the users of the boxes' volumes); verification's fails.
    proxy.on("GET", "/containers/json").times(3).forward();
    proxy
        .on("GET", "/containers/json")
        .always()
        .respond(500, "listing broke after apply");

    let (out, report) = apply(&cli(&sbx, &proxy));

    out.expect_code(1);
    assert!(!report.converged);
    assert_eq!(
        report.removed.names(Kind::Container),
        set([&a.container.name, &b.container.name])
    );
    assert_eq!(
        report.removed.names(Kind::Volume),
        set([&a.volume, &b.volume])
    );
    let f = report.only_failure();
    assert_eq!(f.kind, FailureKind::Engine);
    assert!(
        f.error.contains("verification failed") && f.error.contains("listing broke after apply"),
        "{}",
        out.dump()
    );
    assert!(
        proxy.count("GET", "/containers/json") >= 3,
        "{}",
        proxy.dump()
    );
    assert!(!sbx.container_exists(&a.container.id).await);
    assert!(!sbx.volume_exists(&b.volume).await);
    assert_honest(&sbx, &goal(&[]), &out, &report).await;
}

// ----- other actors -----------------------------------------------------------------------

/// Another actor removes a container, a volume and a network just before
/// sandboxctl does: the engine answers 404, which is "already gone", not a failure.
trial!(not_found_for_what_another_actor_removed_is_not_a_failure);
async fn not_found_for_what_another_actor_removed_is_not_a_failure() {
    let sbx = Sandbox::new("fault-404").await;
    let (a, b) = two_boxes(&sbx).await;
    let net = sbx.add_box_with_network("netbox", Run::Exited).await;
    let proxy = Proxy::start();
    let container = format!("/containers/{}", a.container.id);
    let volume = format!("/volumes/{}", b.volume);
    let network = format!("/networks/{}", net.network.id);
    for path in [&container, &volume, &network] {
        proxy.on("DELETE", path).actor_first();
    }

    let (out, report) = apply(&cli(&sbx, &proxy));

    out.expect_code(0);
    assert!(report.is_clean(), "{}", out.dump());
    // The scenario really happened: sandboxctl's own requests got real 404s.
    for path in [&container, &volume, &network] {
        let seen = proxy.requests("DELETE", path);
        assert_eq!(seen.len(), 1, "{}", proxy.dump());
        assert_eq!(seen[0].status, Some(404), "{}", proxy.dump());
    }
    let removed = |kind| report.removed.names(kind);
    assert!(removed(Kind::Container).is_superset(&set([&a.container.name, &b.container.name])));
    assert!(removed(Kind::Volume).is_superset(&set([&a.volume, &b.volume])));
    assert_eq!(removed(Kind::Network), set([&net.network.name]));
    assert_eq!(
        report.removed.networks[0].outcome,
        crate::support::report::Outcome::AlreadyGone
    );
    assert_honest(&sbx, &goal(&[]), &out, &report).await;
    assert!(sbx.remaining().await.containers.is_empty());
}

/// Docker's 409 "removal of container ... is already in progress" (another
/// actor's removal of a running container is under way) is waited out; the
/// container's volume is removed only once the container is really gone.
trial!(removal_already_in_progress_is_waited_out);
async fn removal_already_in_progress_is_waited_out() {
    let sbx = Sandbox::new("fault-409").await;
    let (a, _b) = two_boxes(&sbx).await;
    let proxy = Proxy::start();
    let container = format!("/containers/{}", a.container.id);
    proxy.on("DELETE", &container).actor_concurrently(
        409,
        &format!(
            "removal of container {} is already in progress",
            a.container.id
        ),
    );

    let (out, report) = apply(&cli(&sbx, &proxy));

    out.expect_code(0);
    assert!(report.is_clean(), "{}", out.dump());
    assert!(report
        .removed
        .names(Kind::Container)
        .contains(&a.container.name));
    assert!(report.removed.names(Kind::Volume).contains(&a.volume));
    let seen = proxy.seen();
    let at = |pred: &dyn Fn(&crate::support::proxy::Seen) -> bool| seen.iter().position(pred);
    let conflict = at(&|s| s.by_client() && s.method == "DELETE" && s.path.starts_with(&container))
        .expect("sandboxctl sent the removal");
    assert_eq!(seen[conflict].status, Some(409), "{}", proxy.dump());
    let gone = at(&|s| {
        s.seq > conflict
            && s.method == "GET"
            && s.path.starts_with(&format!("{container}/json"))
            && s.status == Some(404)
    })
    .unwrap_or_else(|| panic!("sandboxctl never saw the container gone\n{}", proxy.dump()));
    let volume_delete = at(&|s| {
        s.by_client()
            && s.method == "DELETE"
            && s.path.starts_with(&format!("/volumes/{}", a.volume))
    })
    .unwrap_or_else(|| panic!("the volume was never removed\n{}", proxy.dump()));
    assert!(
        gone < volume_delete,
        "the volume was removed before its container was gone\n{}",
        proxy.dump()
    );
    assert_honest(&sbx, &goal(&[]), &out, &report).await;
}

// ----- volumes held by others ---------------------------------------------------------------

trial!(volume_mounted_by_an_unmanaged_container_is_never_forced);
async fn volume_mounted_by_an_unmanaged_container_is_never_forced() {
    let sbx = Sandbox::new("fault-unmanaged-user").await;
    let (a, _b) = two_boxes(&sbx).await;
    let leak = sbx.leaked_volume().await;
    let user = sbx.unmanaged_user(&leak, Run::Running).await;
    let proxy = Proxy::start();

    let (out, report) = apply(&cli(&sbx, &proxy));

    out.expect_code(1);
    assert!(!report.converged);
    assert_eq!(report.remaining_names(Kind::Volume), set([&leak]));
    match &report.leftover(Kind::Volume, &leak).reason {
        Reason::HeldByUnmanaged { holders, .. } => {
            let named: Vec<(&str, Option<&str>)> = holders
                .iter()
                .map(|h| (h.name.as_str(), h.id.as_deref()))
                .collect();
            assert_eq!(named, vec![(user.name.as_str(), Some(user.id.as_str()))]);
        }
        other => panic!("the leftover names its user: {other:?}"),
    }
    assert!(report.remaining_containers.is_empty());
    assert_eq!(
        proxy.count("DELETE", &format!("/volumes/{leak}")),
        0,
        "{}",
        proxy.dump()
    );
    assert_eq!(
        proxy.count("DELETE", &format!("/containers/{}", user.id)),
        0
    );
    assert!(sbx.volume_exists(&leak).await);
    assert!(sbx.container_exists(&user.id).await);
    assert!(!sbx.container_exists(&a.container.id).await);
    assert!(!sbx.volume_exists(&a.volume).await);
    assert_honest(&sbx, &goal(&[]), &out, &report).await;
}

/// An unmanaged container starts using a volume after the listing, while
/// sandboxctl is about to remove it: the engine's 409 "volume is in use" is a
/// failure naming that container, never forced.
trial!(volume_taken_by_an_unmanaged_container_mid_apply_is_never_forced);
async fn volume_taken_by_an_unmanaged_container_mid_apply_is_never_forced() {
    let sbx = Sandbox::new("fault-taken-mid-apply").await;
    let leak = sbx.leaked_volume().await;
    let proxy = Proxy::start();
    let inspect = format!("/volumes/{leak}");
    proxy.on("GET", &inspect).delay(Duration::from_secs(2));

    let cli = cli(&sbx, &proxy);
    let running = cli.spawn_with(["apply"]);
    assert!(
        proxy.wait_for("GET", &inspect, Duration::from_secs(20)),
        "sandboxctl never re-checked the volume\n{}\n--- stderr so far\n{}\n--- stdout so far\n{}",
        proxy.dump(),
        running.stderr_so_far(),
        running.stdout_so_far()
    );
    let user = sbx.unmanaged_user(&leak, Run::Created).await;
    let out = running.wait();
    let report = out.report();

    out.expect_code(1);
    let f = report.only_failure();
    assert_eq!(
        (f.kind, f.name.as_str()),
        (FailureKind::Volume, leak.as_str())
    );
    assert!(f.error.contains("volume is in use"), "{}", out.dump());
    assert!(
        f.error.contains(short_id(&user.id)),
        "names the user: {}",
        out.dump()
    );
    assert_eq!(report.remaining_names(Kind::Volume), set([&leak]));
    let seen = proxy.requests("DELETE", &inspect);
    assert_eq!(seen.len(), 1, "{}", proxy.dump());
    assert_eq!(seen[0].status, Some(409));
    assert!(sbx.volume_exists(&leak).await);
    assert!(sbx.container_exists(&user.id).await);
    assert_honest(&sbx, &goal(&[]), &out, &report).await;
}

/// Volumes have no ID: right before removing one, sandboxctl looks at it
/// again. A volume recreated under the same name after the listing (another
/// creation time), or recreated without the sandbox labels, is left alone.
trial!(volume_recreated_after_the_listing_is_left_alone);
async fn volume_recreated_after_the_listing_is_left_alone() {
    let sbx = Sandbox::new("fault-volume-recreated").await;
    let (same_labels, unlabeled) = tokio::join!(sbx.leaked_volume(), sbx.leaked_volume());
    let created = std::time::Instant::now();
    let proxy = Proxy::start();
    for v in [&same_labels, &unlabeled] {
        proxy
            .on("GET", &format!("/volumes/{v}"))
            .delay(Duration::from_secs(4));
    }
    let cli = cli(&sbx, &proxy);
    let running = cli.spawn_with(["apply"]);
    for v in [&same_labels, &unlabeled] {
        assert!(
            proxy.wait_for("GET", &format!("/volumes/{v}"), Duration::from_secs(20)),
            "{}",
            proxy.dump()
        );
    }
    // Docker's volume creation time has whole seconds: make sure it differs.
    let wait = Duration::from_millis(1100).saturating_sub(created.elapsed());
    tokio::time::sleep(wait).await;
    for v in [&same_labels, &unlabeled] {
        sbx.docker()
            .remove_volume(v, None::<bollard::query_parameters::RemoveVolumeOptions>)
            .await
            .unwrap_or_else(|e| panic!("remove {v}: {e}"));
    }
    sbx.volume(VolumeSpec::new().managed().name(same_labels.clone()))
        .await;
    sbx.volume(VolumeSpec::new().name(unlabeled.clone())).await;
    let out = running.wait();
    let report = out.report();

    out.expect_code(1);
    assert_eq!(report.failures.len(), 2, "{}", out.dump());
    let error_for = |name: &str| {
        report
            .failures
            .iter()
            .find(|f| f.kind == FailureKind::Volume && f.name == name)
            .map(|f| f.error.clone())
            .unwrap_or_else(|| panic!("no failure for {name}: {}", out.dump()))
    };
    assert!(error_for(&same_labels).contains("was recreated since it was listed"));
    assert!(error_for(&unlabeled).contains("no longer carries the scope labels"));
    // The recreated managed volume is still to be removed, and named; the
    // unlabeled one is no longer sandboxctl's business.
    assert_eq!(report.remaining_names(Kind::Volume), set([&same_labels]));
    match &report.leftover(Kind::Volume, &same_labels).reason {
        Reason::Changed { detail, .. } => assert!(detail.contains("recreated"), "{detail}"),
        other => panic!("{other:?}"),
    }
    for v in [&same_labels, &unlabeled] {
        assert_eq!(
            proxy.count("DELETE", &format!("/volumes/{v}")),
            0,
            "{}",
            proxy.dump()
        );
        assert!(sbx.volume_exists(v).await, "{v} survives");
    }
    assert_honest(&sbx, &goal(&[]), &out, &report).await;
}

/// The proxy itself: keep-alive connections carry several exchanges, and
/// content-length, chunked and empty bodies are framed right.
trial!(proxy_forwards_keep_alive_exchanges);
async fn proxy_forwards_keep_alive_exchanges() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    engine_version();
    let proxy = Proxy::start();
    let mut s = tokio::net::UnixStream::connect(proxy.socket())
        .await
        .unwrap();
    let requests = "GET /_ping HTTP/1.1\r\nHost: docker\r\n\r\n\
                    GET /v1.41/version HTTP/1.1\r\nHost: docker\r\n\r\n\
                    POST /v1.41/containers/create?name=x HTTP/1.1\r\nHost: docker\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n2\r\n{}\r\n0\r\n\r\n\
                    GET /volumes/does-not-exist-sbx HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n";
    proxy
        .on("GET", "/volumes/does-not-exist")
        .respond(418, "teapot");
    s.write_all(requests.as_bytes()).await.unwrap();
    let mut all = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut all))
        .await
        .expect("the proxy closes after Connection: close")
        .unwrap();
    let text = String::from_utf8_lossy(&all);
    let statuses: Vec<&str> = text
        .match_indices("HTTP/1.1 ")
        .map(|(i, _)| &text[i + 9..i + 12])
        .collect();
    // ping, version, create without an image (400), and the rule's answer.
    assert_eq!(statuses, vec!["200", "200", "400", "418"], "{text}");
    assert!(text.contains("\"teapot\""));
    let seen: BTreeMap<usize, Option<u16>> =
        proxy.seen().iter().map(|s| (s.seq, s.status)).collect();
    assert_eq!(seen.len(), 4, "{}", proxy.dump());
    assert_eq!(
        proxy.requests("GET", "/version")[0].target,
        "/v1.41/version"
    );
}
