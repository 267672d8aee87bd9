//! A run refused before any work, under `--format json`, for every command
//! that takes it: stdout is exactly one JSON document, the error document
//! (`docs/schema/error.schema.json`: `{"schemaVersion": 2, "error": {code,
//! text, ...}}`), the same shape for every command; stderr says the same
//! words as it always did; the exit status is the refusal's (2 for the
//! command line, 1 for what comes after). No engine is reached: every run
//! points `DOCKER_HOST` at nothing (decision 20).

use serde_json::Value;

use crate::support::cli::{Cli, Output};
use crate::support::schema::check;

/// A syntax error on line 2, column 7.
const BAD_TOML: &str = "[scope]\nlabels [ = 1\n";

/// A run that must be refused: its arguments (after the `Cli`'s), the code,
/// the exit status, and words the refusal's text says.
struct Case {
    cli: Cli,
    args: Vec<String>,
    code: &'static str,
    exit: i32,
    words: &'static str,
}

/// A `Cli` that reaches no engine, asks for JSON, and has `state.toml`
/// holding `state` in its folder.
fn cli(state: &str) -> Cli {
    let cli = Cli::new().unreachable_docker().json();
    cli.write("state.toml", state);
    cli
}

fn case(cli: Cli, args: &[&str], code: &'static str, exit: i32, words: &'static str) -> Case {
    Case {
        cli,
        args: args.iter().map(|a| a.to_string()).collect(),
        code,
        exit,
        words,
    }
}

/// The one JSON document of `out`'s stdout, checked: nothing else there,
/// an error document of its schema, its text said on stderr too.
#[track_caller]
fn error_document(out: &Output) -> Value {
    let documents: Vec<Result<Value, _>> = serde_json::Deserializer::from_str(&out.stdout)
        .into_iter::<Value>()
        .collect();
    assert!(
        matches!(documents.as_slice(), [Ok(_)]),
        "stdout is not exactly one JSON document\n{}",
        out.dump()
    );
    let document = out.json();
    check("error", &document, &out.command);
    assert_eq!(
        document
            .as_object()
            .map(|o| o.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["error".to_string(), "schemaVersion".to_string()]),
        "{}",
        out.dump()
    );
    // The human message, as stderr always said it: its first line is where
    // the document's text begins (the text joins a cause chain with `: `,
    // stderr puts each cause on a line of its own).
    let text = document["error"]["text"].as_str().unwrap_or_default();
    let said = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("error: "))
        .unwrap_or_else(|| panic!("no `error: ` on stderr\n{}", out.dump()));
    assert!(
        text.starts_with(said),
        "stderr says {said:?}, the document {text:?}\n{}",
        out.dump()
    );
    document
}

/// Every refusal, by command.
fn cases() -> Vec<Case> {
    let key = "5a".repeat(32);
    let sealed_wrong = format!(
        "{{\"schemaVersion\": 2, \"steps\": [], \"seal\": \"hmac-sha256:{}\"}}",
        "0".repeat(64)
    );
    let (tampered, unsealed, dangling, link) = (cli(""), cli(""), cli(""), cli(""));
    tampered.write("plan.json", &sealed_wrong);
    unsealed.write("plan.json", "{\"schemaVersion\": 2, \"steps\": []}");
    std::os::unix::fs::symlink(
        dangling.dir().join("gone.json"),
        dangling.dir().join("plan.json"),
    )
    .unwrap();
    std::os::unix::fs::symlink(link.dir().join("elsewhere"), link.dir().join("audit.log")).unwrap();
    vec![
        // plan
        case(
            cli(BAD_TOML),
            &["plan", "--state", "state.toml"],
            "syntax",
            1,
            "invalid TOML",
        ),
        case(
            cli(""),
            &["plan", "--timeout", "soon"],
            "invalidValue",
            2,
            "'soon'",
        ),
        case(
            cli("").env("SANDBOXCTL_PLAN_KEY", "not a key"),
            &["plan", "--state", "state.toml", "--out", "p.json"],
            "planKey",
            1,
            "SANDBOXCTL_PLAN_KEY is not a key",
        ),
        // apply, and apply FILE: missing, a dangling link, tampered, unsealed
        case(
            cli("[volumes]\nkepp = []\n"),
            &["apply", "--state", "state.toml"],
            "unknownKey",
            1,
            "unknown key",
        ),
        case(cli(""), &["apply"], "noStateFile", 1, "no state file"),
        case(
            cli(""),
            &["apply", "nope.json"],
            "planFile",
            1,
            "cannot read it",
        ),
        case(
            dangling,
            &["apply", "plan.json"],
            "planFile",
            1,
            "cannot read it",
        ),
        case(
            tampered.env("SANDBOXCTL_PLAN_KEY", &key),
            &["apply", "plan.json"],
            "planFile",
            1,
            "its seal does not match its content",
        ),
        case(
            unsealed.env("SANDBOXCTL_PLAN_KEY", &key),
            &["apply", "plan.json"],
            "planFile",
            1,
            "it carries no seal",
        ),
        case(
            link,
            &["apply", "--state", "state.toml", "--audit", "audit.log"],
            "auditLog",
            1,
            "is a symbolic link",
        ),
        case(
            cli(""),
            &["apply", "p.json", "--scope", "a=b"],
            "conflictingArguments",
            2,
            "drop --scope",
        ),
        // destroy, prune
        case(
            cli(""),
            &["destroy", "bad id"],
            "invalidBoxId",
            2,
            "box ID \"bad id\"",
        ),
        case(
            cli(""),
            &["destroy", "--prune", "--bogus"],
            "unknownArgument",
            2,
            "'--bogus'",
        ),
        case(
            cli(""),
            &["prune", "--grace", "x"],
            "invalidValue",
            2,
            "'x'",
        ),
        case(
            cli("[scope]\nlabels = { team = \"a\" }\n"),
            &["prune", "--state", "state.toml", "--scope", "team=b"],
            "scopeConflict",
            1,
            "scope label team",
        ),
        // watch
        case(
            cli(""),
            &["watch", "--state", "state.toml"],
            "watchNeedsGrace",
            1,
            "--grace",
        ),
        case(
            cli(""),
            &["watch", "--grace", "1m", "--resync", "never"],
            "invalidValue",
            2,
            "'never'",
        ),
        // restore
        case(
            cli(""),
            &["restore", "v.tar.zst", "--volume", "bad name"],
            "invalidVolumeName",
            2,
            "--volume",
        ),
        // inventory, explain, graph
        case(
            cli(""),
            &["inventory", "--engine", "far"],
            "noFleet",
            1,
            "--engine far",
        ),
        case(
            cli(BAD_TOML),
            &["explain", "box:a", "--state", "state.toml"],
            "syntax",
            1,
            "invalid TOML",
        ),
        case(cli(""), &["explain"], "missingArgument", 2, "<OBJECT>"),
        case(
            cli(""),
            &["graph"],
            "invalidValue",
            2,
            "graph prints --format dot",
        ),
        // validate, health
        case(
            cli(""),
            &["validate", "--bogus"],
            "unknownArgument",
            2,
            "'--bogus'",
        ),
        case(
            cli(""),
            &["health", "127.0.0.1:1", "--deadline", "0s"],
            "invalidValue",
            2,
            "0s",
        ),
        // lease, hold
        case(
            cli(""),
            &["lease", "b", "--ttl", "0s"],
            "invalidValue",
            2,
            "--ttl 0s",
        ),
        case(
            cli(""),
            &["lease", "b", "--ttl", "48h"],
            "ttlOverMax",
            1,
            "at most 24h",
        ),
        case(
            cli(""),
            &[
                "--host",
                "unix:///nowhere.sock",
                "--context",
                "ci",
                "lease",
                "b",
            ],
            "conflictingArguments",
            1,
            "--context",
        ),
        case(
            cli(""),
            &["hold", "b/c", "--", "true"],
            "invalidBoxId",
            2,
            "box ID \"b/c\"",
        ),
        case(cli(""), &["hold", "b"], "missingArgument", 2, "<COMMAND>"),
        // no command at all
        case(cli(""), &[], "missingArgument", 2, "requires a subcommand"),
    ]
}

trial!(a_refused_run_prints_one_error_document_for_every_command);
/// Every command that takes `--format json`, refused: one error document
/// on stdout with the code and words of the refusal (and, for a state
/// file's problem, the file and place), the human message on stderr, and
/// the exit status of today.
fn a_refused_run_prints_one_error_document_for_every_command() {
    const EVERY: [&str; 13] = [
        "apply",
        "destroy",
        "explain",
        "graph",
        "health",
        "hold",
        "inventory",
        "lease",
        "plan",
        "prune",
        "restore",
        "validate",
        "watch",
    ];
    let mut commands = std::collections::BTreeSet::new();
    for c in cases() {
        let out = c.cli.run_with(&c.args);
        out.expect_code(c.exit);
        let document = error_document(&out);
        let error = &document["error"];
        assert_eq!(error["code"], c.code, "{}", out.dump());
        assert!(
            error["text"].as_str().unwrap_or_default().contains(c.words),
            "the text does not say {:?}\n{}",
            c.words,
            out.dump()
        );
        assert!(out.stderr.contains(c.words), "{}", out.dump());
        assert!(
            !out.stderr.contains("no-docker.sock"),
            "reached for the engine\n{}",
            out.dump()
        );
        if let Some(command) = c.args.iter().find(|a| EVERY.contains(&a.as_str())) {
            commands.insert(command.clone());
        }
    }
    assert_eq!(commands, EVERY.iter().map(|c| c.to_string()).collect());
}

trial!(a_state_file_s_problem_names_the_file_and_the_place);
/// A state file's problem says where, as `validate` does: the file as
/// given, the 1-based line and column; `plan` and `apply` alike (before,
/// `plan` printed nothing on stdout and `apply` a report).
fn a_state_file_s_problem_names_the_file_and_the_place() {
    for command in ["plan", "apply"] {
        let out = cli(BAD_TOML).run_with([command, "--state", "state.toml"]);
        out.expect_code(1);
        let error = error_document(&out)["error"].clone();
        assert_eq!(error["file"], "state.toml", "{}", out.dump());
        assert_eq!(
            (error["line"].clone(), error["column"].clone()),
            (2.into(), 8.into()),
            "{}",
            out.dump()
        );
        assert!(
            out.stderr
                .starts_with("error: state.toml:2:8: invalid TOML"),
            "{}",
            out.dump()
        );
    }
    let missing = Cli::new().unreachable_docker().json();
    let out = missing.run_with(["plan", "--state", "gone.toml"]);
    out.expect_code(1);
    let error = error_document(&out)["error"].clone();
    assert_eq!(error["code"], "notFound");
    assert_eq!(error["file"], "gone.toml");
    assert!(error.get("line").is_none(), "no place: {}", out.dump());
}

trial!(watch_refused_by_a_taken_metrics_address_prints_the_error_document);
/// `watch --metrics ADDR` where something already listens: refused before
/// any cycle, the error document naming the address.
fn watch_refused_by_a_taken_metrics_address_prints_the_error_document() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = cli("").run_with([
        "watch",
        "--state",
        "state.toml",
        "--grace",
        "1m",
        "--metrics",
        &addr,
    ]);
    out.expect_code(1);
    let error = error_document(&out)["error"].clone();
    assert_eq!(error["code"], "metrics", "{}", out.dump());
    assert!(
        error["text"].as_str().unwrap_or_default().contains(&addr),
        "{}",
        out.dump()
    );
    drop(taken);
}

trial!(help_is_no_refusal_and_mcp_s_stdout_stays_the_protocol_s);
/// `--help` under `--format json` is help, on stdout, exit 0; `mcp`'s
/// stdout carries only the protocol, so a refused server prints no
/// document there (its error is on stderr, exit 1).
fn help_is_no_refusal_and_mcp_s_stdout_stays_the_protocol_s() {
    let out = cli("").run_with(["plan", "--help"]);
    out.success();
    assert!(
        out.stdout.starts_with("Show what apply would remove"),
        "{}",
        out.dump()
    );
    let out = cli(BAD_TOML).run_with(["mcp", "--state", "state.toml"]);
    out.expect_code(1);
    assert_eq!(out.stdout, "", "{}", out.dump());
    assert!(
        out.stderr
            .starts_with("error: state.toml:2:8: invalid TOML"),
        "{}",
        out.dump()
    );
}
