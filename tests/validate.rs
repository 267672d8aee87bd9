//! `sandboxctl validate`: state files checked with every rule `plan` uses and
//! no engine call. Every run here points `DOCKER_HOST` at a port nothing
//! listens on, so a command that tried the engine would fail or hang. Files
//! are written in the CLI runner's temp dir (the run's working directory) and
//! named relative to it, so the output is the same on every machine.

use crate::support::cli::{Cli, Output};

/// No engine answers here (port 1 refuses connections).
const NO_ENGINE: &str = "tcp://127.0.0.1:1";

/// A valid file using most of the format.
const VALID: &str = r#"[scope]
labels = { "ca.sandbox.owner" = "ci" }

[policy]
grace = "10m"

[[box]]
id = "explore-ripgrep"
ttl = "8h"

[[box]]
id = "explore-tokei"
expires = 2026-12-24T00:00:00Z

[volumes]
keep = ["cargo-cache"]
"#;

/// Six problems, on lines 5, 8, 12, 13, 15 and 16 (and the sixth after the
/// fifth on the same line): each must be reported, in file order.
const INVALID: &str = r#"[scope]
labels = { "ca.sandbox.owner" = "ci" }

[policy]
grace = "10"

[[box]]
id = "a b"

[[box]]
id = "ok"
ttl = "0s"
colour = "red"

[volumes]
keep = ["", 7]
"#;

fn cli() -> Cli {
    Cli::new().docker_host(NO_ENGINE)
}

fn snapshot(name: &str, text: &str) {
    insta::with_settings!({
        snapshot_path => "../snapshots",
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!(name, text);
    });
}

/// Fails unless the run finished quickly and printed nothing on stderr: an
/// engine call (refused, retried or timed out) would show in either.
#[track_caller]
fn no_engine_call(out: &Output) {
    assert!(
        out.elapsed.as_secs() < 10,
        "validate took {:?}\n{}",
        out.elapsed,
        out.dump()
    );
    assert_eq!(out.stderr, "", "{}", out.dump());
    assert!(!out.stdout.contains("127.0.0.1:1"), "{}", out.dump());
}

#[test]
fn a_valid_file_is_valid_without_an_engine() {
    let cli = cli();
    cli.write("good.toml", VALID);
    let out = cli.run_with(["validate", "good.toml"]);
    out.success();
    no_engine_call(&out);
    assert_eq!(out.stdout, "good.toml: valid\n");
}

#[test]
fn an_invalid_file_gets_every_problem_with_its_position_in_file_order() {
    let cli = cli();
    cli.write("bad.toml", INVALID);
    let out = cli.run_with(["validate", "bad.toml"]);
    out.expect_code(1);
    no_engine_call(&out);
    let positions: Vec<(usize, usize)> = out
        .stdout
        .lines()
        .map(|line| {
            let rest = line
                .strip_prefix("bad.toml:")
                .unwrap_or_else(|| panic!("not file:line:col: {line:?}"));
            let mut parts = rest.splitn(3, ':');
            let line_no = parts.next().unwrap().parse().expect("line number");
            let col = parts.next().unwrap().parse().expect("column number");
            assert!(
                parts.next().is_some_and(|m| m.len() > 10),
                "no message: {line:?}"
            );
            (line_no, col)
        })
        .collect();
    assert_eq!(
        positions.iter().map(|p| p.0).collect::<Vec<_>>(),
        [5, 8, 12, 13, 16, 16],
        "one problem per bad line:\n{}",
        out.stdout
    );
    let mut sorted = positions.clone();
    sorted.sort();
    assert_eq!(positions, sorted, "in file order");
    // Every message says what to do, not only what is wrong.
    for line in out.stdout.lines() {
        assert!(line.contains("; "), "no advice in {line:?}");
    }
    snapshot("validate_invalid_human", &out.stdout);
}

#[test]
fn several_files_are_each_reported_in_the_order_given() {
    let cli = cli();
    cli.write("good.toml", VALID);
    cli.write("bad.toml", INVALID);
    std::fs::create_dir(cli.dir().join("dir.toml")).unwrap();
    let out = cli.run_with([
        "validate",
        "good.toml",
        "bad.toml",
        "missing.toml",
        "dir.toml",
    ]);
    out.expect_code(1);
    no_engine_call(&out);
    let files: Vec<&str> = out
        .stdout
        .lines()
        .map(|l| l.split(':').next().unwrap())
        .collect();
    let mut order = files.clone();
    order.dedup();
    assert_eq!(order, ["good.toml", "bad.toml", "missing.toml", "dir.toml"]);
    snapshot("validate_mixed_human", &out.stdout);

    // All valid: exit 0, one line each.
    cli.write("also-good.toml", "[[box]]\nid = \"x\"\n");
    let out = cli.run_with(["validate", "good.toml", "also-good.toml"]);
    out.success();
    assert_eq!(out.stdout, "good.toml: valid\nalso-good.toml: valid\n");
}

#[test]
fn json_lists_every_file_and_problem() {
    let cli = cli().json();
    cli.write("good.toml", VALID);
    cli.write("bad.toml", INVALID);
    let out = cli.run_with(["validate", "good.toml", "bad.toml", "missing.toml"]);
    out.expect_code(1);
    no_engine_call(&out);
    let doc = out.json();
    assert_eq!(doc["valid"], false);
    let files = doc["files"].as_array().expect("files");
    assert_eq!(files.len(), 3);
    assert_eq!(files[0]["valid"], true);
    assert_eq!(files[0]["problems"].as_array().unwrap().len(), 0);
    assert_eq!(files[1]["problems"].as_array().unwrap().len(), 6);
    for p in files[1]["problems"].as_array().unwrap() {
        let text = p["text"].as_str().unwrap();
        let at = format!("bad.toml:{}:{}: ", p["line"], p["column"]);
        assert_eq!(text, format!("{at}{}", p["message"].as_str().unwrap()));
    }
    // A problem with the whole file has no position.
    assert_eq!(files[2]["problems"][0]["line"], serde_json::Value::Null);
    snapshot("validate_mixed_json", &out.stdout);

    let out = cli.run_with(["validate", "good.toml"]);
    out.success();
    assert_eq!(out.json()["valid"], true);
}

#[test]
fn without_a_file_the_default_state_file_is_checked() {
    let cli = cli().default_state_toml(VALID);
    let out = cli.run_with(["validate"]);
    out.success();
    no_engine_call(&out);
    assert_eq!(out.stdout, "state/sandboxes.toml: valid\n");

    // --state names the file instead.
    cli.write("other.toml", INVALID);
    let out = cli.run_with(["--state", "other.toml", "validate"]);
    out.expect_code(1);
    assert!(out.stdout.starts_with("other.toml:5:9: "), "{}", out.dump());

    // No default file: say which path was looked for and how to give one.
    let out = Cli::new().docker_host(NO_ENGINE).run_with(["validate"]);
    out.expect_code(1);
    no_engine_call(&out);
    snapshot("validate_no_default_file", &out.stdout);
}

#[test]
fn a_missing_file_fails_saying_what_to_do() {
    let out = cli().run_with(["validate", "nope.toml"]);
    out.expect_code(1);
    no_engine_call(&out);
    let line = out.stdout.trim_end();
    assert!(line.starts_with("nope.toml: "), "{}", out.dump());
    assert!(line.contains("does not exist"), "{}", out.dump());
    snapshot("validate_missing_file", &out.stdout);
}
