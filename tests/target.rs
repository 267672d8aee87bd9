//! What a converging run is told to remove (`Target`), against the real
//! engine: a named box that nothing carries (not found, `--missing-ok`,
//! removed earlier by the audit log), `prune` (a leaked box goes, the images
//! stay, a running box is asked about at a terminal and only there), the
//! note of a prune with no state file and no scope, and the engine every
//! run names.
//!
//! Each test has a scope of its own (`Sandbox`), but the one without a
//! scope: its prune reaches the main engine through a proxy that answers
//! every call that would change something (decision 0017), so that it
//! touches nothing of anyone's. The terminal is a pseudo-terminal
//! (`support::pty`). Claims are checked on the engine after each run.

use crate::support::assert::assert_box_gone;
use crate::support::cli::{Cli, Output};
use crate::support::docker::{engine_endpoint, Run, Sandbox, SandboxBox};
use crate::support::proxy::Proxy;
use crate::support::pty::Terminal;
use crate::support::report::{Kind, UnknownBox, Unmatched};

/// The box ID no test makes.
const NOSUCHBOX: &str = "nosuchbox";

/// The box's container and volume are there, the container `state`.
async fn assert_whole(sbx: &Sandbox, b: &SandboxBox, state: &str, out: &Output) {
    assert_eq!(
        sbx.container_state(&b.container.id).await.as_deref(),
        Some(state),
        "box {}'s container\n{}",
        b.box_id,
        out.dump()
    );
    assert!(
        sbx.volume_exists(&b.volume).await,
        "box {}'s volume is gone\n{}",
        b.box_id,
        out.dump()
    );
}

/// The box's container and volume are gone.
async fn assert_gone(sbx: &Sandbox, b: &SandboxBox, out: &Output) {
    assert_box_gone(sbx, b, &out.dump()).await;
}

/// `destroy nosuchbox` exits 1 naming it (human and JSON, `unknownBoxes`),
/// and removes nothing: a running box of the scope stays as it was;
/// `--missing-ok` makes it exit 0, said so.
trial!(destroy_of_a_box_nothing_carries_fails_naming_it_and_touches_nothing);
async fn destroy_of_a_box_nothing_carries_fails_naming_it_and_touches_nothing() {
    let sbx = Sandbox::new("target-unknown").await;
    let spared = sbx.add_box("spared", Run::Running).await;
    let cli = sbx.cli();

    let out = cli.run_with(["destroy", NOSUCHBOX]);
    out.expect_code(1);
    assert!(
        out.stdout.contains(&format!(
            "box {NOSUCHBOX}: NOT FOUND: nothing in scope carries ca.sandbox.id={NOSUCHBOX}"
        )),
        "{}",
        out.dump()
    );
    assert!(
        out.stdout.contains("`sandboxctl inventory`") && out.stdout.contains("--missing-ok"),
        "what to do\n{}",
        out.dump()
    );
    assert!(
        out.stdout
            .contains(&format!("NOT done: box {NOSUCHBOX} not found")),
        "{}",
        out.dump()
    );
    assert!(!out.stdout.contains("Converged"), "{}", out.dump());
    assert_whole(&sbx, &spared, "running", &out).await;

    let out = cli.run_with(["destroy", NOSUCHBOX, "--format", "json"]);
    out.expect_code(1);
    let report = out.report();
    assert_eq!(
        report.unknown_boxes,
        [UnknownBox {
            id: NOSUCHBOX.into(),
            status: Unmatched::NotFound,
            removed: None,
        }],
        "{}",
        out.dump()
    );
    assert!(report.removed.is_empty(), "{}", out.dump());
    assert_whole(&sbx, &spared, "running", &out).await;

    let out = cli.run_with(["destroy", NOSUCHBOX, "--missing-ok", "--format", "json"]);
    out.success();
    let report = out.report();
    assert_eq!(report.unknown_boxes.len(), 1, "{}", out.dump());
    assert_eq!(report.unknown_boxes[0].id, NOSUCHBOX);
    assert_eq!(report.unknown_boxes[0].status, Unmatched::MissingOk);
    assert!(
        report.converged && report.removed.is_empty(),
        "{}",
        out.dump()
    );
    let out = cli.run_with(["destroy", NOSUCHBOX, "--missing-ok"]);
    out.success();
    assert!(
        out.stdout
            .contains(&format!("box {NOSUCHBOX}: nothing in scope carries ca.sandbox.id={NOSUCHBOX} (--missing-ok: not a failure)")),
        "{}",
        out.dump()
    );
    assert_whole(&sbx, &spared, "running", &out).await;
}

/// A box `destroy` removed with the audit log on, destroyed again with the
/// same log: exit 0, said removed earlier, when, on which engine and by
/// what (`removedEarlier`, the log's own line); without the log: not found.
trial!(a_box_the_audit_log_records_removed_is_removed_earlier_not_missing);
async fn a_box_the_audit_log_records_removed_is_removed_earlier_not_missing() {
    let sbx = Sandbox::new("target-earlier").await;
    let once = sbx.add_box("once", Run::Running).await;
    let cli = sbx.cli();
    let audit = cli.dir().join("audit.jsonl");
    let audit_arg = audit.display().to_string();

    let out = cli.run_with(["destroy", "once", "--audit", &audit_arg]);
    out.success();
    assert_gone(&sbx, &once, &out).await;
    let logged = std::fs::read_to_string(&audit).expect("the audit log");
    let lines: Vec<serde_json::Value> = logged
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(
        lines.len(),
        2,
        "the container's and the volume's line: {logged}"
    );

    let out = cli.run_with(["destroy", "once", "--audit", &audit_arg, "--format", "json"]);
    out.success();
    let report = out.report();
    assert!(report.converged, "{}", out.dump());
    assert_eq!(report.unknown_boxes.len(), 1, "{}", out.dump());
    let unknown = &report.unknown_boxes[0];
    assert_eq!(
        (unknown.id.as_str(), unknown.status),
        ("once", Unmatched::RemovedEarlier),
        "{}",
        out.dump()
    );
    let removed = unknown.removed.as_ref().expect("what the log records");
    // The log's latest line of the box: the last one written.
    let last = lines.last().unwrap();
    assert_eq!(
        removed.time,
        last["time"].as_str().unwrap(),
        "{}",
        out.dump()
    );
    assert_eq!(removed.engine, "default");
    assert_eq!(removed.kind, last["kind"].as_str().unwrap());
    assert_eq!(removed.name, last["name"].as_str().unwrap());
    assert_eq!(removed.code, last["reason"]["code"].as_str().unwrap());
    assert_eq!(removed.code, "destroyRequested", "{}", out.dump());
    assert_eq!(removed.log, audit_arg);
    // The second run removed nothing, so it logged nothing.
    assert_eq!(
        std::fs::read_to_string(&audit).unwrap(),
        logged,
        "the audit log changed"
    );

    let out = cli.run_with(["destroy", "once", "--audit", &audit_arg]);
    out.success();
    assert!(
        out.stdout.contains(&format!(
            "box once: removed earlier: the audit log {audit_arg} records {} {} removed on engine default at {} (destroyRequested: ",
            removed.kind, removed.name, removed.time
        )),
        "{}",
        out.dump()
    );
    assert!(!out.stdout.contains("NOT"), "{}", out.dump());

    // Without the log, nothing says it was removed: not found.
    let out = cli.run_with(["destroy", "once"]);
    out.expect_code(1);
    assert!(out.stdout.contains("box once: NOT FOUND"), "{}", out.dump());
}

/// `prune` (no terminal: nothing asked) removes a leaked box whole, its
/// container, volume and network, keeps the box the state file declares,
/// and never an image.
trial!(prune_removes_a_leaked_box_whole_and_keeps_the_images);
async fn prune_removes_a_leaked_box_whole_and_keeps_the_images() {
    let sbx = Sandbox::new("target-prune").await;
    let (leaked, declared) = tokio::join!(
        sbx.add_box_with_network("leaked", Run::Running),
        sbx.add_box("declared", Run::Running),
    );
    let images = sbx.ca_sbx_images().await;
    assert!(!images.is_empty(), "the test image is a ca-sbx image");
    let cli = sbx.cli().state_toml(&format!(
        "{}\n[[box]]\nid = \"declared\"\n",
        sbx.scope_toml()
    ));
    let out = cli.run_with(["prune", "--format", "json"]);
    out.success();
    assert!(
        !out.stderr.contains("[y/N]"),
        "asked without a terminal\n{}",
        out.dump()
    );
    let report = out.report();
    assert!(report.is_clean(), "{}", out.dump());
    assert!(!report.no_state_file && !report.declined, "{}", out.dump());
    assert_eq!(
        report.removed.names(Kind::Container),
        [leaked.container.name.clone()].into(),
        "{}",
        out.dump()
    );
    assert_eq!(
        report.removed.names(Kind::Volume),
        [leaked.volume.clone()].into()
    );
    assert_eq!(
        report.removed.names(Kind::Network),
        [leaked.network.name.clone()].into()
    );
    assert!(!sbx.container_exists(&leaked.container.id).await);
    assert!(!sbx.volume_exists(&leaked.volume).await);
    assert!(!sbx.network_exists(&leaked.network.id).await);
    assert_whole(&sbx, &declared, "running", &out).await;
    assert!(
        !report.retained.images.is_empty(),
        "the images are named retained\n{}",
        out.dump()
    );
    assert_eq!(sbx.ca_sbx_images().await, images, "an image was removed");
}

/// `apply`, `destroy`, `prune` and `inventory` name the engine they ran on:
/// an `Engine:` line with its address (human) and `engine` and `endpoint`
/// (JSON).
trial!(every_converging_command_and_the_inventory_name_the_engine);
async fn every_converging_command_and_the_inventory_name_the_engine() {
    let sbx = Sandbox::new("target-engine").await;
    sbx.add_box("named", Run::Created).await;
    let address = engine_endpoint();
    let cli = sbx.cli().state_toml(&sbx.scope_toml());
    for args in [
        &["apply"][..],
        &["destroy", "named", "--missing-ok"],
        &["prune"],
        &["inventory"],
    ] {
        let out = cli.run_with(args);
        out.success();
        let line = out
            .stdout
            .lines()
            .find(|l| l.starts_with("Engine: "))
            .unwrap_or_else(|| panic!("no `Engine:` line\n{}", out.dump()));
        assert!(line.contains(&address), "{line}\n{}", out.dump());
        let out = cli.run_with(args.iter().chain(&["--format", "json"]));
        out.success();
        let doc = out.json();
        assert_eq!(doc["engine"], "default", "{}", out.dump());
        assert!(
            doc["endpoint"]
                .as_str()
                .is_some_and(|e| e.contains(&address)),
            "{}",
            out.dump()
        );
    }
}

/// A prune with no state file and no `--scope` says so first (the first
/// lines on stderr; JSON `noStateFile: true`). It runs against the main
/// engine without a scope, so every call that would change something is
/// answered by a proxy and never reaches the engine: nothing of anyone's is
/// touched, and the refused removal of the box made here fails the run.
trial!(a_prune_without_a_state_file_or_scope_says_so_first);
async fn a_prune_without_a_state_file_or_scope_says_so_first() {
    let sbx = Sandbox::new("target-no-state").await;
    let b = sbx.add_box("unscoped", Run::Created).await;
    let proxy = Proxy::start();
    for method in ["POST", "PUT", "DELETE"] {
        proxy.on(method, "").always().respond(
            500,
            "refused by the test: a prune without a scope changes nothing here",
        );
    }
    let cli = Cli::new().docker_host(&proxy.docker_host());
    for format in ["human", "json"] {
        let out = cli.run_with(["prune", "--format", format]);
        assert_ne!(
            out.code,
            Some(0),
            "a refused removal is no success\n{}",
            out.dump()
        );
        let first: Vec<&str> = out.stderr.lines().take(2).collect();
        assert!(
            first.first().is_some_and(|l| l.starts_with("note: no state file (state/sandboxes.toml not found, no --state) and no --scope: every box labeled ca.sandbox=1 on engine default")),
            "{first:?}\n{}",
            out.dump()
        );
        assert!(
            first
                .get(1)
                .is_some_and(|l| l.contains("--scope KEY=VALUE")),
            "{first:?}"
        );
        if format == "json" {
            let report = out.report();
            assert!(report.no_state_file, "{}", out.dump());
            assert!(!report.converged, "{}", out.dump());
        }
    }
    for seen in proxy
        .seen()
        .iter()
        .filter(|s| s.method != "GET" && s.method != "HEAD")
    {
        assert_eq!(
            seen.action,
            "respond",
            "reached the engine: {}",
            seen.line()
        );
    }
    assert!(
        sbx.container_exists(&b.container.id).await && sbx.volume_exists(&b.volume).await,
        "the box was touched"
    );
}

/// At a terminal, a prune that would remove a running container asks
/// first, naming the box: "n" removes nothing (the container still runs,
/// the volume is there), exits 1, JSON `declined: true`; "y" removes it.
trial!(at_a_terminal_a_prune_asks_and_no_leaves_the_box_whole);
async fn at_a_terminal_a_prune_asks_and_no_leaves_the_box_whole() {
    let sbx = Sandbox::new("target-ask").await;
    let live = sbx.add_box("live", Run::Running).await;
    let cli = sbx.cli();

    let mut terminal = Terminal::spawn(&cli, ["prune", "--format", "json"]);
    assert!(
        terminal.wait_for("[y/N] "),
        "no question\n{}",
        terminal.screen()
    );
    let question = terminal.screen();
    assert!(
        question.contains("  box live  (engine default)"),
        "{question}"
    );
    assert!(question.contains("1 container running"), "{question}");
    terminal.type_line("n");
    let out = terminal.wait();
    out.expect_code(1);
    assert!(
        out.stderr
            .contains("Nothing removed: the answer \"n\" is not yes"),
        "{}",
        out.dump()
    );
    let report = out.report();
    assert!(
        report.declined && report.removed.is_empty(),
        "{}",
        out.dump()
    );
    assert_whole(&sbx, &live, "running", &out).await;

    let mut terminal = Terminal::spawn(&cli, ["prune"]);
    assert!(
        terminal.wait_for("[y/N] "),
        "no question\n{}",
        terminal.screen()
    );
    terminal.type_line("y");
    let out = terminal.wait();
    out.success();
    assert!(out.stdout.contains("Converged"), "{}", out.dump());
    assert_gone(&sbx, &live, &out).await;
}

/// `--yes` at a terminal, and any prune without one (stdin and stderr
/// piped), remove a running box without a question.
trial!(a_prune_with_yes_or_without_a_terminal_asks_nothing);
async fn a_prune_with_yes_or_without_a_terminal_asks_nothing() {
    let sbx = Sandbox::new("target-yes").await;
    let cli = sbx.cli();

    let first = sbx.add_box("first", Run::Running).await;
    let out = Terminal::spawn(&cli, ["prune", "--yes"]).wait();
    out.success();
    assert!(
        !out.stderr.contains("[y/N]"),
        "asked with --yes\n{}",
        out.dump()
    );
    assert_gone(&sbx, &first, &out).await;

    let second = sbx.add_box("second", Run::Running).await;
    let out = cli.run_with(["prune"]);
    out.success();
    assert!(
        !out.stderr.contains("[y/N]"),
        "asked without a terminal\n{}",
        out.dump()
    );
    assert_gone(&sbx, &second, &out).await;
}
