//! Tearing down on a degraded engine (issue 23): one stuck engine call blocks
//! only what depends on it, and every leftover is named.
//!
//! Covers, against a real dockerd 20.10:
//!
//! * a container locked the way a streaming `docker cp` locks it
//!   (`support::lock::CpLock`: its inspect hangs, the container listing still
//!   answers): a stopped box goes beside it; a running box it could have
//!   joined (created after the box) stays, named `holderUnknown` with the
//!   locked container as holder and its volume `waitsForBlocked`; a locked
//!   container made before the box is never inspected and blocks nothing; a
//!   declared box being copied from does not stop `apply` from removing an
//!   undeclared one; `watch` keeps reaping beside a locked container; a
//!   container one run inspected is not asked again by the next (the memo
//!   of decision 11), not even locked, unless the memo file is unusable;
//! * a hung call through the fault proxy (`support::proxy`): the network
//!   listing (the box's container and volume go, the listing is named), the
//!   container listing (nothing goes, the volume is named `listingFailed`),
//!   one container's inspect (only the box it could hold stays).
//!
//! Reads (listings, inspects) get `--call-timeout SECS` as their deadline.
//! "Created before" means at least [`GAP`] before: Docker stamps `Created`
//! in whole seconds in its listing, and each test checks the order it made
//! from the listing before it runs sandboxctl.
//!
//! Every test runs on a dockerd of its own (`SecondDockerd::start`), with a
//! recording proxy in front of it through which sandboxctl talks: a locked
//! container on the shared main engine would be inspected by the runs of
//! every other test of the suite (each inspects every container outside its
//! scope), and their 30 s deadlines or `holderUnknown` reasons would fail
//! them; and a container locked by another test (an archive test's stalled
//! stream) could block these tests' boxes. The test's `Sandbox` removes its
//! objects when dropped (the lock is dropped first: it is declared last), the
//! engine handle then stops that dockerd and removes its folder.
//!
//! Reasons are checked by their fields, not their `text` (the snapshots of the
//! reasons do that).

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use bollard::query_parameters::{InspectContainerOptions, ListContainersOptionsBuilder};

use crate::support::cli::{Cli, Output};
use crate::support::docker::{Container, ContainerSpec, Run, Sandbox};
use crate::support::engines::{Engine, SecondDockerd};
use crate::support::lock::CpLock;
use crate::support::proxy::Proxy;
use crate::support::report::{FailureKind, Kind, Reason, Report};

/// Between one object's creation and the next one's when the order matters:
/// more than the 1 s resolution of `Created` in the container listing.
const GAP: Duration = Duration::from_millis(1200);
/// `--call-timeout` of the runs that meet a locked container or a hung call.
const CALL_TIMEOUT: &str = "2";
/// How long a run may take before the harness kills it and fails the test:
/// longer than a run that waits out the old 30 s deadline, so that such a
/// run fails on the assertions, with its report.
const RUN_DEADLINE: Duration = Duration::from_secs(90);
/// How long the proxy holds a hung call: longer than any run here.
const HUNG: Duration = Duration::from_secs(120);

// ----- the world of one test -----------------------------------------------------

/// A dockerd of the test's own, its `Sandbox`, and a proxy in front of it that
/// records every call sandboxctl makes (and hangs those a test says).
/// Fields drop in order: the proxy, then the sandbox (its cleanup), then the
/// engine (stopped, its folder removed).
struct World {
    proxy: Proxy,
    sbx: Sandbox,
    engine: Engine,
}

impl World {
    /// A gate, as `Sandbox::new` (see `support::docker`).
    async fn new(test: &str) -> World {
        let engine = SecondDockerd::new().start().await;
        let sbx = Sandbox::at(test, &engine.socket_host()).await;
        let proxy = Proxy::start_to(engine.socket());
        World { proxy, sbx, engine }
    }

    /// sandboxctl on this test's scope, through the proxy, JSON out.
    fn cli(&self) -> Cli {
        self.sbx
            .cli()
            .docker_host(&self.proxy.docker_host())
            .json()
            .deadline(RUN_DEADLINE)
    }

    /// [`World::cli`] with `--call-timeout 2`.
    fn cli_2s(&self) -> Cli {
        self.cli().args(["--call-timeout", CALL_TIMEOUT])
    }

    /// Locks container `c` (see `CpLock`): `None` when the lock could not be
    /// held and proven (printed; the test then returns without running).
    fn lock(&self, test: &str, c: &Container) -> Option<CpLock> {
        let lock = CpLock::hold(self.engine.socket(), &c.id);
        if lock.is_none() {
            eprintln!("{test}: did not run: no lock on {}", c.name);
        }
        lock
    }

    /// An unlabeled running container, outside the scope (recorded by the
    /// sandbox, which removes it at the end): a user's container that is
    /// nothing of the sandbox system.
    async fn outsider(&self) -> Container {
        self.sbx
            .container(
                ContainerSpec::new()
                    .unscoped()
                    .name(self.sbx.unique("outsider")),
            )
            .await
    }

    /// `Created` of container `id` as its listing gives it (Unix seconds).
    async fn created(&self, id: &str) -> i64 {
        let filters = HashMap::from([("id", vec![id])]);
        let options = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&filters)
            .build();
        let listed = self
            .sbx
            .docker()
            .list_containers(Some(options))
            .await
            .unwrap_or_else(|e| panic!("list container {id}: {e}"));
        listed
            .iter()
            .find(|c| c.id.as_deref() == Some(id))
            .and_then(|c| c.created)
            .unwrap_or_else(|| panic!("container {id} is not listed: {listed:?}"))
    }

    /// Fails the test unless the listing shows `first` created in an earlier
    /// second than `then` (the precondition of the candidate rule).
    async fn assert_created_before(&self, first: &Container, then: &Container) {
        let (a, b) = (self.created(&first.id).await, self.created(&then.id).await);
        assert!(
            a < b,
            "setup: {} (Created {a}) is not listed as created before {} (Created {b})",
            first.name,
            then.name
        );
    }

    /// Fails the test unless container `c`'s ipc mode is other than
    /// `shareable` (no container can join its ipc namespace): the
    /// precondition of "a stopped box goes beside a running container".
    async fn assert_ipc_not_shareable(&self, c: &Container) {
        let mode = self
            .sbx
            .docker()
            .inspect_container(&c.id, None::<InspectContainerOptions>)
            .await
            .unwrap_or_else(|e| panic!("inspect {}: {e}", c.name))
            .host_config
            .and_then(|h| h.ipc_mode)
            .unwrap_or_default();
        assert_ne!(
            mode, "shareable",
            "setup: {} has ipc mode shareable",
            c.name
        );
    }

    /// What shows that a container was left alone: its state as inspected.
    /// Not while it is locked (the inspect would wait).
    async fn untouched_mark(&self, c: &Container) -> Mark {
        let i = self
            .sbx
            .docker()
            .inspect_container(&c.id, None::<InspectContainerOptions>)
            .await
            .unwrap_or_else(|e| panic!("inspect {}: {e}", c.name));
        let state = i.state.unwrap_or_default();
        Mark {
            running: state.running.unwrap_or(false),
            pid: state.pid.unwrap_or(0),
            started_at: state.started_at.unwrap_or_default(),
            restarts: i.restart_count.unwrap_or(0),
        }
    }

    /// The locked container was left alone: sandboxctl sent nothing for it
    /// but reads (through the proxy), and after the lock is given back it
    /// runs the same process as before, never restarted.
    async fn assert_untouched(&self, c: &Container, before: &Mark) {
        let writes: Vec<String> = self
            .proxy
            .seen()
            .iter()
            .filter(|s| s.path.contains(&c.id) && !s.method.eq_ignore_ascii_case("GET"))
            .map(|s| s.line())
            .collect();
        assert!(
            writes.is_empty(),
            "sandboxctl sent {} more than reads: {writes:#?}",
            c.name
        );
        let after = self.untouched_mark(c).await;
        assert!(before.running, "setup: {} was not running", c.name);
        assert_eq!(&after, before, "{} was touched", c.name);
    }

    /// Fails the test, showing the run `out`, unless a box's `container`
    /// and `volume` are gone.
    async fn assert_gone(&self, container: &Container, volume: &str, out: &Output) {
        let left = self.sbx.container_exists(&container.id).await;
        assert!(!left, "{} is left\n{}", container.name, out.dump());
        let left = self.sbx.volume_exists(volume).await;
        assert!(!left, "{volume} is left\n{}", out.dump());
    }

    /// Client requests that inspected container `id`.
    fn inspects_of(&self, id: &str) -> usize {
        self.proxy.count("GET", &format!("/containers/{id}/json"))
    }
}

/// A container's state that any stop, kill, restart or removal changes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mark {
    running: bool,
    pid: i64,
    started_at: String,
    restarts: i64,
}

/// Waits until `GAP` has passed since `since`.
async fn gap_after(since: Instant) {
    tokio::time::sleep((since + GAP).saturating_duration_since(Instant::now())).await;
}

/// Gives the lock back, printing how long dockerd took to let the container
/// be inspected again.
fn release(lock: CpLock, test: &str) {
    let took = lock.release();
    eprintln!("{test}: lock given back; inspect answered again after {took:?}");
}

/// The run's output and its report, the run's wall time printed.
fn report_of(out: &Output, test: &str) -> Report {
    eprintln!(
        "{test}: `{}` exited {:?} after {:.2} s",
        out.command,
        out.code,
        out.elapsed.as_secs_f64()
    );
    out.report()
}

#[track_caller]
fn assert_within(out: &Output, bound: Duration) {
    assert!(
        out.elapsed < bound,
        "took {:?}, bound {bound:?}\n{}",
        out.elapsed,
        out.dump()
    );
}

/// The engine failure whose error contains `needle`, failing the test if none.
#[track_caller]
fn engine_failure<'r>(report: &'r Report, needle: &str, out: &Output) -> &'r str {
    report
        .failures
        .iter()
        .find(|f| f.kind == FailureKind::Engine && f.error.contains(needle))
        .map(|f| f.error.as_str())
        .unwrap_or_else(|| {
            panic!(
                "no engine failure containing {needle:?}: {:#?}\n{}",
                report.failures,
                out.dump()
            )
        })
}

/// The leftover container `c` is blocked `holderUnknown` naming `holder`.
#[track_caller]
fn assert_holder_unknown(report: &Report, c: &Container, holder: &Container, out: &Output) {
    let left = report
        .remaining(Kind::Container)
        .iter()
        .find(|l| l.id.as_deref() == Some(c.id.as_str()))
        .unwrap_or_else(|| panic!("{} is not named left behind\n{}", c.name, out.dump()));
    match &left.reason {
        Reason::HolderUnknown {
            holder: named,
            error,
            ..
        } => {
            assert_eq!(named.kind, Kind::Container, "{}", out.dump());
            assert_eq!(
                named.id.as_deref(),
                Some(holder.id.as_str()),
                "{}",
                out.dump()
            );
            assert_eq!(named.name, holder.name, "{}", out.dump());
            assert!(!error.is_empty(), "{}", out.dump());
        }
        other => panic!(
            "{} is left with {other:?}, not holderUnknown\n{}",
            c.name,
            out.dump()
        ),
    }
}

/// The leftover volume `volume` waits for the blocked container `c`.
#[track_caller]
fn assert_waits_for_blocked(report: &Report, volume: &str, c: &Container, out: &Output) {
    match &report.leftover(Kind::Volume, volume).reason {
        Reason::WaitsForBlocked { object, .. } => {
            assert_eq!(object.kind, Kind::Container, "{}", out.dump());
            assert_eq!(object.name, c.name, "{}", out.dump());
        }
        other => panic!(
            "{volume} is left with {other:?}, not waitsForBlocked\n{}",
            out.dump()
        ),
    }
}

// ----- a container locked by a streaming `docker cp` -------------------------------

/// A stopped box goes while an unrelated container made after it is locked:
/// the locked container runs and the box's does not, so it cannot share the
/// box's pid namespace, and the box's ipc mode is not shareable.
trial!(a_stopped_box_goes_while_an_unrelated_container_is_locked);
async fn a_stopped_box_goes_while_an_unrelated_container_is_locked() {
    const TEST: &str = "a_stopped_box_goes_while_an_unrelated_container_is_locked";
    let w = World::new("degraded-stopped-box").await;
    let b = w.sbx.add_box("stopped", Run::Exited).await;
    gap_after(Instant::now()).await;
    let x = w.outsider().await;
    w.assert_created_before(&b.container, &x).await;
    w.assert_ipc_not_shareable(&b.container).await;
    let mark = w.untouched_mark(&x).await;
    let Some(lock) = w.lock(TEST, &x) else {
        return;
    };

    let out = w.cli_2s().run_with(["destroy", "stopped"]);
    let report = report_of(&out, TEST);

    out.expect_code(0);
    assert_within(&out, Duration::from_secs(8));
    assert!(report.is_clean(), "{}", out.dump());
    w.assert_gone(&b.container, &b.volume, &out).await;
    release(lock, TEST);
    w.assert_untouched(&x, &mark).await;
}

/// A running box that the locked container could have joined (the locked one
/// was made after it, so it may share the box's pid or ipc namespace) stays,
/// named: its container `holderUnknown` with the locked container as holder,
/// its volume `waitsForBlocked`; the inspect that hung is a failure; exit 1
/// well inside 15 s.
trial!(a_running_box_the_locked_container_could_have_joined_is_named);
async fn a_running_box_the_locked_container_could_have_joined_is_named() {
    const TEST: &str = "a_running_box_the_locked_container_could_have_joined_is_named";
    let w = World::new("degraded-running-box").await;
    let b = w.sbx.add_box("running", Run::Running).await;
    gap_after(Instant::now()).await;
    let x = w.outsider().await;
    w.assert_created_before(&b.container, &x).await;
    let mark = w.untouched_mark(&x).await;
    let Some(lock) = w.lock(TEST, &x) else {
        return;
    };

    let out = w.cli_2s().run_with(["destroy", "running"]);
    let report = report_of(&out, TEST);

    out.expect_code(1);
    assert_within(&out, Duration::from_secs(12));
    assert!(!report.converged, "{}", out.dump());
    assert!(w.inspects_of(&x.id) >= 1, "{}", w.proxy.dump());
    assert_holder_unknown(&report, &b.container, &x, &out);
    assert_waits_for_blocked(&report, &b.volume, &b.container, &out);
    engine_failure(&report, "could not inspect container", &out);
    assert!(report.removed.is_empty(), "{}", out.dump());
    assert_eq!(w.proxy.count("DELETE", ""), 0, "{}", w.proxy.dump());
    assert!(w.sbx.container_exists(&b.container.id).await);
    assert!(w.sbx.volume_exists(&b.volume).await);
    release(lock, TEST);
    w.assert_untouched(&x, &mark).await;
}

/// A locked container made before the box cannot have joined any of the
/// box's namespaces (Docker resolves `container:<name>` when it creates a
/// container): it is never inspected, and the running box goes, fast, with
/// the default call deadline.
trial!(a_locked_container_made_before_the_box_blocks_nothing);
async fn a_locked_container_made_before_the_box_blocks_nothing() {
    const TEST: &str = "a_locked_container_made_before_the_box_blocks_nothing";
    let w = World::new("degraded-locked-before").await;
    let x = w.outsider().await;
    let x_made = Instant::now();
    let mark = w.untouched_mark(&x).await;
    let Some(lock) = w.lock(TEST, &x) else {
        return;
    };
    gap_after(x_made).await;
    let b = w.sbx.add_box("after", Run::Running).await;
    w.assert_created_before(&x, &b.container).await;

    let out = w.cli().run_with(["destroy", "after"]);
    let report = report_of(&out, TEST);

    out.expect_code(0);
    assert_within(&out, Duration::from_secs(8));
    assert!(report.is_clean(), "{}", out.dump());
    assert_eq!(
        w.inspects_of(&x.id),
        0,
        "the locked container was inspected\n{}",
        w.proxy.dump()
    );
    w.assert_gone(&b.container, &b.volume, &out).await;
    release(lock, TEST);
    w.assert_untouched(&x, &mark).await;
}

/// What one run's inspection taught is kept for the next (decision 11): a
/// running unrelated container made after two boxes is inspected by the
/// first box's destroy and not by the second's, not even while it is locked
/// by then (its namespace joins cannot have changed): the second box goes,
/// fast, with the default call deadline. A memo file that others may read is
/// ignored: the third box's destroy asks the container again.
trial!(a_container_one_run_inspected_is_not_asked_again_by_the_next);
async fn a_container_one_run_inspected_is_not_asked_again_by_the_next() {
    const TEST: &str = "a_container_one_run_inspected_is_not_asked_again_by_the_next";
    let w = World::new("degraded-memo").await;
    let first = w.sbx.add_box("first", Run::Running).await;
    let second = w.sbx.add_box("second", Run::Running).await;
    let third = w.sbx.add_box("third", Run::Running).await;
    let boxes_made = Instant::now();
    gap_after(boxes_made).await;
    let x = w.outsider().await;
    for b in [&first, &second, &third] {
        w.assert_created_before(&b.container, &x).await;
    }
    let mark = w.untouched_mark(&x).await;
    // One Cli: one XDG_STATE_HOME for all three runs.
    let cli = w.cli();
    let memo = cli.state_home().join("sandboxctl/joins.json");

    let out = cli.run_with(["destroy", "first"]);
    report_of(&out, TEST);
    out.expect_code(0);
    assert_eq!(w.inspects_of(&x.id), 1, "{}", w.proxy.dump());
    let mode = std::fs::metadata(&memo)
        .unwrap_or_else(|e| panic!("no memo at {}: {e}\n{}", memo.display(), out.dump()))
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "memo {}", memo.display());

    let Some(lock) = w.lock(TEST, &x) else {
        return;
    };
    let out = cli.run_with(["destroy", "second"]);
    let report = report_of(&out, TEST);
    out.expect_code(0);
    assert_within(&out, Duration::from_secs(8));
    assert!(report.is_clean(), "{}", out.dump());
    assert_eq!(w.inspects_of(&x.id), 1, "asked again\n{}", w.proxy.dump());
    w.assert_gone(&second.container, &second.volume, &out).await;
    release(lock, TEST);

    std::fs::set_permissions(&memo, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = cli.run_with(["destroy", "third"]);
    report_of(&out, TEST);
    out.expect_code(0);
    assert_eq!(
        w.inspects_of(&x.id),
        2,
        "not asked again\n{}",
        w.proxy.dump()
    );
    assert_eq!(
        std::fs::metadata(&memo).unwrap().permissions().mode() & 0o777,
        0o600,
        "the ignored memo was not replaced"
    );
    w.assert_untouched(&x, &mark).await;
}

/// A declared box whose running container is being copied from (locked)
/// does not stop `apply` from removing an undeclared stopped box made after
/// it: exit 0, the declared box untouched.
trial!(a_declared_box_being_copied_from_does_not_stop_apply);
async fn a_declared_box_being_copied_from_does_not_stop_apply() {
    const TEST: &str = "a_declared_box_being_copied_from_does_not_stop_apply";
    let w = World::new("degraded-declared-copied").await;
    let k = w.sbx.add_box("kept", Run::Running).await;
    let k_made = Instant::now();
    let mark = w.untouched_mark(&k.container).await;
    let Some(lock) = w.lock(TEST, &k.container) else {
        return;
    };
    gap_after(k_made).await;
    let d = w.sbx.add_box("doomed", Run::Exited).await;
    w.assert_created_before(&k.container, &d.container).await;

    let out = w
        .cli_2s()
        .state_toml("[[box]]\nid = \"kept\"\n")
        .run_with(["apply"]);
    let report = report_of(&out, TEST);

    out.expect_code(0);
    assert_within(&out, Duration::from_secs(10));
    assert!(report.is_clean(), "{}", out.dump());
    assert_eq!(
        report.removed.ids(Kind::Container),
        [d.container.id.clone()].into(),
        "{}",
        out.dump()
    );
    assert_eq!(
        report.removed.names(Kind::Volume),
        [d.volume.clone()].into(),
        "{}",
        out.dump()
    );
    assert!(!w.sbx.container_exists(&d.container.id).await);
    assert!(!w.sbx.volume_exists(&d.volume).await);
    assert!(w.sbx.volume_exists(&k.volume).await);
    release(lock, TEST);
    w.assert_untouched(&k.container, &mark).await;
}

// ----- a hung call through the fault proxy -----------------------------------------

/// A hung network listing: the leaked box's container and volume, whose
/// removal no network decides, go; the network, which the failed listing
/// never showed, stays; the listing is named; exit 1 inside 10 s.
trial!(a_hung_network_listing_removes_the_box_and_names_the_listing);
async fn a_hung_network_listing_removes_the_box_and_names_the_listing() {
    const TEST: &str = "a_hung_network_listing_removes_the_box_and_names_the_listing";
    let w = World::new("degraded-hung-networks").await;
    let b = w.sbx.add_box_with_network("netted", Run::Running).await;
    w.proxy.on("GET", "/networks").always().delay(HUNG);

    let out = w.cli_2s().state_toml("").run_with(["apply"]);
    let report = report_of(&out, TEST);

    out.expect_code(1);
    assert_within(&out, Duration::from_secs(10));
    assert!(!report.converged, "{}", out.dump());
    engine_failure(&report, "could not list networks", &out);
    assert!(w.proxy.count("GET", "/networks") >= 1, "{}", w.proxy.dump());
    w.assert_gone(&b.container, &b.volume, &out).await;
    assert!(
        report
            .removed
            .ids(Kind::Container)
            .contains(&b.container.id),
        "{}",
        out.dump()
    );
    assert!(
        report.removed.names(Kind::Volume).contains(&b.volume),
        "{}",
        out.dump()
    );
    assert!(w.sbx.network_exists(&b.network.id).await, "{}", out.dump());
    assert_eq!(
        w.proxy.count("DELETE", "/networks"),
        0,
        "{}",
        w.proxy.dump()
    );
    let failed = w.sbx.cleanup().await;
    assert!(failed.is_empty(), "cleanup: {failed:?}");
    assert!(!w.sbx.network_exists(&b.network.id).await);
}

/// A hung container listing: nothing is removed (no DELETE reaches the
/// engine), the box's volume, which the volume listing showed, is named
/// `listingFailed` for the containers listing; exit 1 inside 10 s.
trial!(a_hung_container_listing_removes_nothing_and_names_the_volume);
async fn a_hung_container_listing_removes_nothing_and_names_the_volume() {
    const TEST: &str = "a_hung_container_listing_removes_nothing_and_names_the_volume";
    let w = World::new("degraded-hung-containers").await;
    let b = w.sbx.add_box("leaked", Run::Running).await;
    w.proxy.on("GET", "/containers/json").always().delay(HUNG);

    let out = w.cli_2s().state_toml("").run_with(["apply"]);
    let report = report_of(&out, TEST);

    out.expect_code(1);
    assert_within(&out, Duration::from_secs(10));
    assert!(!report.converged, "{}", out.dump());
    assert_eq!(w.proxy.count("DELETE", ""), 0, "{}", w.proxy.dump());
    assert!(report.removed.is_empty(), "{}", out.dump());
    match &report.leftover(Kind::Volume, &b.volume).reason {
        Reason::ListingFailed { listing, error, .. } => {
            assert_eq!(listing, "containers", "{}", out.dump());
            assert!(!error.is_empty(), "{}", out.dump());
        }
        other => panic!(
            "{} is left with {other:?}, not listingFailed\n{}",
            b.volume,
            out.dump()
        ),
    }
    assert!(w.sbx.container_exists(&b.container.id).await);
    assert!(w.sbx.volume_exists(&b.volume).await);
}

/// One container's inspect hangs (the unrelated X, made between a running
/// leaked box A and a stopped leaked box B): only A, which X could have
/// joined, stays, named `holderUnknown` (holder X) with its volume
/// `waitsForBlocked`; B goes; exit 1.
trial!(a_hung_inspect_blocks_only_what_it_could_hold);
async fn a_hung_inspect_blocks_only_what_it_could_hold() {
    const TEST: &str = "a_hung_inspect_blocks_only_what_it_could_hold";
    let w = World::new("degraded-hung-inspect").await;
    let a = w.sbx.add_box("a", Run::Running).await;
    gap_after(Instant::now()).await;
    let x = w.outsider().await;
    gap_after(Instant::now()).await;
    let b = w.sbx.add_box("b", Run::Exited).await;
    w.assert_created_before(&a.container, &x).await;
    w.assert_created_before(&x, &b.container).await;
    let mark = w.untouched_mark(&x).await;
    w.proxy
        .on("GET", &format!("/containers/{}/json", x.id))
        .always()
        .delay(HUNG);

    let out = w.cli_2s().state_toml("").run_with(["apply"]);
    let report = report_of(&out, TEST);

    out.expect_code(1);
    assert_within(&out, Duration::from_secs(12));
    assert!(!report.converged, "{}", out.dump());
    assert!(w.inspects_of(&x.id) >= 1, "{}", w.proxy.dump());
    engine_failure(&report, "could not inspect container", &out);
    assert_holder_unknown(&report, &a.container, &x, &out);
    assert_waits_for_blocked(&report, &a.volume, &a.container, &out);
    w.assert_gone(&b.container, &b.volume, &out).await;
    assert!(w.sbx.container_exists(&a.container.id).await);
    assert!(w.sbx.volume_exists(&a.volume).await);
    w.assert_untouched(&x, &mark).await;
}

// ----- watch -----------------------------------------------------------------------

/// `watch` reaps a leaked stopped box within 15 s while an unrelated
/// container made after the box is locked.
trial!(watch_reaps_a_leaked_stopped_box_while_a_container_is_locked);
async fn watch_reaps_a_leaked_stopped_box_while_a_container_is_locked() {
    const TEST: &str = "watch_reaps_a_leaked_stopped_box_while_a_container_is_locked";
    let w = World::new("degraded-watch").await;
    let b = w.sbx.add_box("leaked", Run::Exited).await;
    gap_after(Instant::now()).await;
    let x = w.outsider().await;
    w.assert_created_before(&b.container, &x).await;
    w.assert_ipc_not_shareable(&b.container).await;
    let mark = w.untouched_mark(&x).await;
    let Some(lock) = w.lock(TEST, &x) else {
        return;
    };

    let started = Instant::now();
    let watch = w.cli_2s().state_toml("").spawn_guarded([
        "watch",
        "--grace",
        "0s",
        "--debounce",
        "1s",
        "--resync",
        "60s",
    ]);
    let bound = Duration::from_secs(15);
    loop {
        let gone =
            !w.sbx.container_exists(&b.container.id).await && !w.sbx.volume_exists(&b.volume).await;
        if gone {
            break;
        }
        assert!(
            started.elapsed() < bound && watch.alive(),
            "the box is still there {:?} after watch started (watch alive: {})\n--- stderr\n{}",
            started.elapsed(),
            watch.alive(),
            watch.stderr()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "{TEST}: the box went {:.2} s after watch started",
        started.elapsed().as_secs_f64()
    );
    watch.signal(libc::SIGTERM);
    let out = watch.wait();
    eprintln!(
        "{TEST}: watch exited {:?} {:.2} s after it started",
        out.code,
        started.elapsed().as_secs_f64()
    );
    release(lock, TEST);
    w.assert_untouched(&x, &mark).await;
}
