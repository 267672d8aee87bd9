//! `sandboxctl validate`: state files checked with every rule `plan` uses and
//! no engine call. Every run here points `DOCKER_HOST` at a port nothing
//! listens on, so a command that tried the engine would fail or hang. Files
//! are written in the CLI runner's temp dir (the run's working directory) and
//! named relative to it, so the output is the same on every machine. The
//! rule for `ssh://` users and hosts is also checked at engine resolution
//! (`--host`, `DOCKER_HOST`, contexts, a fleet's `host`), where nothing runs.

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

trial!(a_valid_file_is_valid_without_an_engine);
fn a_valid_file_is_valid_without_an_engine() {
    let cli = cli();
    cli.write("good.toml", VALID);
    let out = cli.run_with(["validate", "good.toml"]);
    out.success();
    no_engine_call(&out);
    assert_eq!(out.stdout, "good.toml: valid\n");
}

trial!(an_invalid_file_gets_every_problem_with_its_position_in_file_order);
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
        assert!(
            line.contains("; ") || line.contains(": use "),
            "no advice in {line:?}"
        );
    }
    snapshot("validate_invalid_human", &out.stdout);
}

trial!(several_files_are_each_reported_in_the_order_given);
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

trial!(json_lists_every_file_and_problem);
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

trial!(without_a_file_the_default_state_file_is_checked);
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

trial!(a_missing_file_fails_saying_what_to_do);
fn a_missing_file_fails_saying_what_to_do() {
    let out = cli().run_with(["validate", "nope.toml"]);
    out.expect_code(1);
    no_engine_call(&out);
    let line = out.stdout.trim_end();
    assert!(line.starts_with("nope.toml: "), "{}", out.dump());
    assert!(line.contains("does not exist"), "{}", out.dump());
    snapshot("validate_missing_file", &out.stdout);
}

/// `ssh://` hosts whose user or host ssh would take for an option or that
/// hold a control character, written plainly or percent-encoded: each is
/// refused at its file:line:col, with what to do.
trial!(ssh_users_and_hosts_that_ssh_would_misread_are_refused_at_their_position);
fn ssh_users_and_hosts_that_ssh_would_misread_are_refused_at_their_position() {
    let hosts = [
        "ssh://-oProxyCommand=x@host",
        "ssh://%2DoProxyCommand=x@host",
        "ssh://%2doProxyCommand=x@host:22",
        "ssh://runner@-oProxyCommand=x",
        "ssh://runner@%2DoProxyCommand=x",
        "ssh://runner@host%0a",
        "ssh://run%0Aner@host",
        r"ssh://runner@ho\nst",
    ];
    let mut toml = String::new();
    for (i, host) in hosts.iter().enumerate() {
        toml.push_str(&format!(
            "[[engine]]\nname = \"e{i}\"\nhost = \"{host}\"\n\n"
        ));
    }
    toml.push_str("[[engine]]\nname = \"fine\"\nhost = \"ssh://runner@ci-1:2222\"\n");
    let cli = cli();
    cli.write("ssh.toml", &toml);
    let out = cli.run_with(["validate", "ssh.toml"]);
    out.expect_code(1);
    no_engine_call(&out);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), hosts.len(), "{}", out.dump());
    for (i, line) in lines.iter().enumerate() {
        // Engine i's `host` is on line 3 + 4 i, its value at column 8.
        let at = format!("ssh.toml:{}:8: invalid engine host ", 3 + 4 * i);
        assert!(line.starts_with(&at), "{line:?} is not at {at:?}");
        assert!(
            line.contains("begins with '-'") || line.contains("control character"),
            "{line:?}"
        );
    }
    snapshot("validate_ssh_hosts", &out.stdout);
}

/// The same rule at every engine resolution, before anything runs: an
/// address from `--host`, `DOCKER_HOST`, a Docker context or a fleet's
/// `host` is refused (exit 1, saying why), and the `ssh` on `PATH` (a fake
/// that records being run) never runs.
trial!(no_engine_resolution_takes_an_ssh_user_or_host_that_ssh_would_misread);
fn no_engine_resolution_takes_an_ssh_user_or_host_that_ssh_would_misread() {
    use std::os::unix::fs::PermissionsExt;
    let with_fake_ssh = |cli: Cli| {
        let cli = cli.default_state_toml("[[box]]\nid = \"a\"\n");
        let bin = cli.dir().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let ssh = bin.join("ssh");
        std::fs::write(&ssh, "#!/bin/sh\necho \"$@\" >> \"$0.ran\"\nexit 255\n").unwrap();
        std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        cli.env("PATH", path)
    };
    let context = |cli: Cli, host: &str| {
        let digest = sandboxctl::engine::endpoint::context_digest("evil");
        cli.write(
            &format!("docker/contexts/meta/{digest}/meta.json"),
            &format!(r#"{{"Name":"evil","Endpoints":{{"docker":{{"Host":"{host}"}}}}}}"#),
        );
        let config = cli.dir().join("docker");
        cli.env("DOCKER_CONFIG", config)
    };
    let cases: Vec<(&str, Cli, &str)> = vec![
        (
            "--host",
            with_fake_ssh(cli()).args(["--host", "ssh://-oProxyCommand=x@host"]),
            "is refused: its ssh user begins with '-'",
        ),
        (
            "DOCKER_HOST",
            with_fake_ssh(cli()).docker_host("ssh://%2DoProxyCommand=x@host"),
            "is refused: its ssh user begins with '-' once percent-decoded",
        ),
        (
            "--context",
            context(with_fake_ssh(cli()), "ssh://u@host%0a").args(["--context", "evil"]),
            "is refused: its ssh host contains the control character",
        ),
        (
            "a fleet's host",
            with_fake_ssh(cli())
                .state_toml("[[engine]]\nname = \"e\"\nhost = \"ssh://u@-oProxyCommand=x\"\n"),
            "invalid engine host",
        ),
    ];
    for (how, cli, says) in cases {
        let out = cli.run_with(["plan"]);
        out.expect_code(1);
        assert!(out.stderr.contains(says), "{how}: {}", out.dump());
        assert!(
            !cli.dir().join("bin/ssh.ran").exists(),
            "{how}: ssh ran with {:?}",
            std::fs::read_to_string(cli.dir().join("bin/ssh.ran"))
        );
    }
}

// Issue 43: a FIFO with no writer was waited on forever; it is refused at
// once, as anything but a regular file is.
trial!(a_fifo_is_refused_without_blocking);
fn a_fifo_is_refused_without_blocking() {
    let cli = cli().deadline(std::time::Duration::from_secs(10));
    let fifo = cli.dir().join("fifo.toml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(made.success(), "mkfifo failed");
    let started = std::time::Instant::now();
    let out = cli.run_with(["validate".as_ref(), fifo.as_os_str()]);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "validate of a FIFO took {:?}",
        started.elapsed()
    );
    out.expect_code(1);
    no_engine_call(&out);
    assert!(
        out.stdout
            .contains("fifo.toml: is a FIFO (named pipe), not a state file; give the path of a regular .toml file"),
        "{}",
        out.stdout
    );
}

/// Every `[[notify]]` refusal, one per table, each at its key's value.
const BAD_NOTIFY: &str = r#"[[notify]]
url = "http://10.1.2.3/x"
secret_env = "K"

[[notify]]
url = "https://hooks.example/x"
secret_env = "K"
events = ["removed", "deleted"]

[[notify]]
url = "https://hooks.example/x"

[[notify]]
url = "https://hooks.example/x"
secret_env = "K"
before = "soon"
"#;

trial!(validate_refuses_each_bad_notify_receiver_with_its_position);
/// `validate` refuses a non-loopback `http://` URL, an unknown event, a
/// missing `secret_env` and a bad `before`, each at file:line:col.
fn validate_refuses_each_bad_notify_receiver_with_its_position() {
    let cli = cli();
    cli.write("notify.toml", BAD_NOTIFY);
    let out = cli.run_with(["validate", "notify.toml"]);
    out.expect_code(1);
    no_engine_call(&out);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", out.stdout);
    assert!(
        lines[0].starts_with(
            "notify.toml:2:7: invalid notify url \"http://10.1.2.3/x\": plain http is allowed only to a loopback address"
        ),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with("notify.toml:8:22: unknown notify event \"deleted\""),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].starts_with("notify.toml:10:1: missing key `secret_env`"),
        "{}",
        lines[2]
    );
    assert!(
        lines[3].starts_with("notify.toml:16:10: before \"soon\" is not a duration"),
        "{}",
        lines[3]
    );
}

trial!(a_receivers_missing_variable_refuses_apply_before_any_engine_call);
/// The key's variable is read once, when the command starts: not set, the
/// run is refused naming it (and the table), before any engine call (no
/// engine answers here: one tried would fail otherwise).
fn a_receivers_missing_variable_refuses_apply_before_any_engine_call() {
    let state =
        "[[notify]]\nurl = \"http://127.0.0.1:9/x\"\nsecret_env = \"SBX_TEST_NOTIFY_KEY\"\n";
    let cli = cli().state_toml(state).env_remove("SBX_TEST_NOTIFY_KEY");
    let out = cli.run_with(["apply"]);
    out.expect_code(1);
    assert!(out.elapsed.as_secs() < 10, "{}", out.dump());
    assert!(
        out.stderr.contains("SBX_TEST_NOTIFY_KEY is not set")
            && out.stderr.contains("state.toml:2 "),
        "{}",
        out.dump()
    );
    assert!(!out.stderr.contains("127.0.0.1:1"), "{}", out.dump());
}
