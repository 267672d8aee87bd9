//! Every JSON document the suite reads, checked against its published
//! schema: the committed `docs/schema/<name>.schema.json` (which
//! `schema::committed_files_are_the_generated_ones` keeps equal to what
//! `sandboxctl::schema` generates).
//!
//! Owns loading and compiling the schemas once, which document a command
//! line prints (`of_command`), and the check (`check`), which fails the test
//! naming the document, where it came from, every path that does not match
//! and the schema's words, and counts what it checked: with
//! `SANDBOXCTL_SCHEMA_COUNT=1` the harness prints the count after a run.
//! Formats (`date-time`) are checked too, except for what snapshots hold
//! (`check_redacted`: their times and IDs are placeholders).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use serde_json::Value;

/// Documents checked in this process.
static CHECKED: AtomicUsize = AtomicUsize::new(0);

/// How many documents were checked so far.
pub fn checked() -> usize {
    CHECKED.load(Ordering::SeqCst)
}

/// The committed schema file of `name`.
pub fn file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(sandboxctl::schema::FOLDER)
        .join(format!("{name}.schema.json"))
}

/// The committed schema of `name`, read.
pub fn committed(name: &str) -> Value {
    let path = file(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}; make it with `SANDBOXCTL_UPDATE_SCHEMA=1 cargo test --test sandboxctl schema`",
            path.display()
        )
    });
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The validators of every document, formats checked or not.
fn validators(formats: bool) -> &'static BTreeMap<&'static str, jsonschema::Validator> {
    static STRICT: OnceLock<BTreeMap<&'static str, jsonschema::Validator>> = OnceLock::new();
    static LOOSE: OnceLock<BTreeMap<&'static str, jsonschema::Validator>> = OnceLock::new();
    let cell = if formats { &STRICT } else { &LOOSE };
    cell.get_or_init(|| {
        sandboxctl::schema::documents()
            .into_iter()
            .map(|(name, _)| {
                let validator = jsonschema::options()
                    .with_draft(jsonschema::Draft::Draft202012)
                    .should_validate_formats(formats)
                    .build(&committed(name))
                    .unwrap_or_else(|e| panic!("{} does not compile: {e}", file(name).display()));
                (name, validator)
            })
            .collect()
    })
}

/// The document `value`, printed by `command` on stdout with `--format
/// json`, is: the error document when it is one (any command refused before
/// any work prints it, `hold` and `graph` too), else the command's own
/// ([`of_command`]).
pub fn of_printed(command: &str, value: &Value) -> Option<&'static str> {
    if value.get("error").is_some_and(Value::is_object) {
        return Some("error");
    }
    of_command(command)
}

/// The document a command line prints on stdout with `--format json`
/// (`sandboxctl [flags] COMMAND ...`), or `None` when it prints none
/// (`hold`'s stdout is its command's; `graph`; a pipeline through bash),
/// unless it is refused ([`of_printed`]).
pub fn of_command(command: &str) -> Option<&'static str> {
    let mut words = command.split_whitespace();
    if words.next() != Some("sandboxctl") {
        return None;
    }
    words.find_map(|word| match word {
        "plan" => Some(Some("plan")),
        "apply" | "destroy" | "prune" | "watch" => Some(Some("report")),
        "inventory" => Some(Some("inventory")),
        "explain" => Some(Some("explain")),
        "validate" => Some(Some("validate")),
        "lease" => Some(Some("lease")),
        "restore" => Some(Some("restore")),
        "health" => Some(Some("health")),
        "hold" | "graph" | "completions" | "man" => Some(None),
        _ => None,
    })?
}

/// Checks `document`, a `name` document from `what` (a command line, a
/// file), against its committed schema, formats included.
#[track_caller]
pub fn check(name: &str, document: &Value, what: &str) {
    check_with(name, document, what, true);
}

/// [`check`] for a document whose times and IDs are placeholders (a
/// snapshot's): formats are not checked.
#[track_caller]
pub fn check_redacted(name: &str, document: &Value, what: &str) {
    check_with(name, document, what, false);
}

#[track_caller]
fn check_with(name: &str, document: &Value, what: &str, formats: bool) {
    let validator = validators(formats)
        .get(name)
        .unwrap_or_else(|| panic!("no document is named {name}"));
    let errors: Vec<String> = validator
        .iter_errors(document)
        .map(|e| format!("  at {}: {e}", e.instance_path()))
        .collect();
    CHECKED.fetch_add(1, Ordering::SeqCst);
    assert!(
        errors.is_empty(),
        "the {name} document of `{what}` does not match {}:\n{}\n(if the document changed on purpose, make the schema again with `SANDBOXCTL_UPDATE_SCHEMA=1 cargo test --test sandboxctl schema` and say so in docs/report.md)\n--- document\n{}",
        file(name).display(),
        errors.join("\n"),
        serde_json::to_string_pretty(document).unwrap_or_default()
    );
}

/// Checks every line of `text`, an audit log (`what`: its path), against
/// the audit schema; returns the lines.
#[track_caller]
pub fn check_audit(text: &str, what: &str) -> Vec<Value> {
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("line {} of {what} is not JSON: {e}: {line}", i + 1));
            check("audit", &value, &format!("{what}:{}", i + 1));
            value
        })
        .collect()
}

/// Checks what a run with `--format json` and `args` (after
/// `sandboxctl`) printed on stdout, when its command prints a document and
/// it printed anything (a run that failed before its document prints none).
#[track_caller]
pub fn check_stdout(args: &[String], stdout: &str) {
    let command = format!("sandboxctl {}", args.join(" "));
    if check_refused(stdout, &command) {
        return;
    }
    let Some(name) = of_command(&command) else {
        return;
    };
    if stdout.trim().is_empty() {
        return;
    }
    let value: Value = serde_json::from_str(stdout)
        .unwrap_or_else(|e| panic!("stdout of `{command}` is not JSON: {e}\n{stdout}"));
    check(name, &value, &command);
}

/// [`check_stdout`] of a finished run of the binary.
#[track_caller]
pub fn check_output(out: &super::cli::Output) {
    if check_refused(&out.stdout, &out.command) {
        return;
    }
    let Some(name) = of_command(&out.command) else {
        return;
    };
    if out.stdout.trim().is_empty() {
        return;
    }
    let value: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout of `{}` is not JSON: {e}\n{}",
            out.command,
            out.dump()
        )
    });
    check(name, &value, &out.command);
}

/// True when `stdout` of `command` is an error document (of any command,
/// `hold`'s and `graph`'s too), after checking it against its schema.
#[track_caller]
fn check_refused(stdout: &str, command: &str) -> bool {
    let refused = serde_json::from_str::<Value>(stdout)
        .ok()
        .filter(|v| of_printed(command, v) == Some("error"));
    if let Some(value) = &refused {
        check("error", value, command);
    }
    refused.is_some()
}

/// Checks every JSON line among `text`'s complete lines (those that start
/// with `{`: a watch's or a hold's stderr may hold plain warnings too)
/// against the schema of `name` (`watch-line`, `hold-line`), `what` saying
/// where they came from; returns them.
#[track_caller]
pub fn check_lines(name: &str, text: &str, what: &str) -> Vec<Value> {
    text.split_inclusive('\n')
        .filter(|l| l.ends_with('\n') && l.starts_with('{'))
        .enumerate()
        .map(|(i, line)| {
            let value: Value = serde_json::from_str(line).unwrap_or_else(|e| {
                panic!("JSON line {} of {what} is not JSON: {e}: {line}", i + 1)
            });
            check(name, &value, &format!("{what}, JSON line {}", i + 1));
            value
        })
        .collect()
}

/// Checks `text`, a `name` document from `what`, and returns it.
#[track_caller]
pub fn check_text<'t>(name: &str, text: &'t str, what: &str) -> &'t str {
    let value: Value = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("the {name} document of {what} is not JSON: {e}\n{text}"));
    check(name, &value, what);
    text
}
