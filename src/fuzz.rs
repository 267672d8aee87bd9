//! The properties the fuzz targets check (`fuzz/fuzz_targets/`, run by
//! `scripts/fuzz.sh`), one function per reader of untrusted input: any bytes
//! give a value or an error, never a panic, and what is accepted obeys the
//! rules the rest of the program relies on. A broken property panics.
//!
//! Kept here, not in the fuzz crate, so that the ordinary suite runs the same
//! checks on every checked-in input (`tests/fuzz_corpus.rs`: the seed corpus
//! in `fuzz/seeds/<target>/`, with every crash the fuzzer ever found kept
//! there as a regression). Must not print, reach an engine or decide
//! anything: it only calls the readers and judges their answers.

use std::path::Path;

use crate::model::lease::{parse_ttl, ttl_label, DEFAULT_MAX_LEASE, LEASE_TTL_LABEL};
use crate::model::{Labels, Owner, Scope, BOX_ID_LABEL, SANDBOX_LABEL, SANDBOX_VALUE};
use crate::state::{DesiredState, StateErrorKind, MAX_STATE_BYTES};
use crate::text::{clip, escape, is_hidden};

/// A target's check: panics when a property breaks.
pub type Check = fn(&[u8]);

/// Every target: its name (the file `fuzz/fuzz_targets/<name>.rs` and the
/// seed folder `fuzz/seeds/<name>/`) and its check.
pub const TARGETS: &[(&str, Check)] = &[
    ("state_parser", state_parser),
    ("saved_plan_reader", saved_plan_reader),
    ("manifest_reader", manifest_reader),
    ("engine_labels", engine_labels),
    ("ssh_target", ssh_target),
    ("lease_ttl", lease_ttl),
    ("mcp_arguments", mcp_arguments),
    ("memo_file", memo_file),
];

/// `data` as text, as an engine's or a file's bytes reach a reader that
/// takes a `&str` (invalid UTF-8 replaced).
fn text(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(data)
}

/// A temporary file of this process holding `data`, for the readers that
/// take a path.
fn file(name: &str, data: &[u8]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sandboxctl-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary folder");
    let path = dir.join(name);
    std::fs::write(&path, data).expect("temporary file");
    path
}

/// The state file: a state whose ids, volumes and labels obey the rules, or
/// an error with a position inside the input and no raw control character.
pub fn state_parser(data: &[u8]) {
    let error = match DesiredState::parse(data, Path::new("fuzz.toml")) {
        Ok(state) => {
            for b in &state.boxes {
                crate::state::check_box_id(&b.id).expect("an accepted box ID obeys the rule");
            }
            for k in &state.keep_volumes {
                crate::state::check_volume_name(&k.name).expect("an accepted volume name");
            }
            for (key, value) in &state.scope {
                crate::state::check_label(key, value).expect("an accepted scope label");
            }
            return;
        }
        Err(error) => error,
    };
    let message = error.to_string();
    assert!(
        !message.chars().any(char::is_control),
        "raw control character in {message:?}"
    );
    match error.kind {
        StateErrorKind::NotFound | StateErrorKind::NotAFile { .. } | StateErrorKind::Read(_) => {
            panic!("parse() produced a file error: {message}")
        }
        StateErrorKind::TooLarge { .. } => {
            assert!(data.len() as u64 > MAX_STATE_BYTES, "{message}");
            return;
        }
        _ => {}
    }
    let (line, col) = error
        .line_col()
        .unwrap_or_else(|| panic!("no position: {message}"));
    let text = text(data);
    let lines: Vec<&str> = text.split('\n').collect();
    assert!(line >= 1 && line <= lines.len(), "line {line}: {message}");
    let width = lines[line - 1].chars().count();
    assert!(
        col >= 1 && col <= width + 1,
        "column {col} of {width}: {message}"
    );
    assert!(
        message.starts_with(&format!("fuzz.toml:{line}:{col}: ")),
        "{message}"
    );
}

/// `apply FILE`'s reader, as found (the seal's reader refuses it) and
/// sealed with a fixed key (the plan's reader behind the seal): a plan or
/// an error naming the file.
pub fn saved_plan_reader(data: &[u8]) {
    for seal_it in [false, true] {
        let path = file("plan.json", data);
        if let Some(problem) = crate::exec::saved_plan_problem(&path, seal_it) {
            assert!(
                problem.starts_with(&format!("plan file {}: ", path.display())),
                "{problem}"
            );
        }
    }
}

/// `restore`'s manifest reader: a manifest of the supported version whose
/// root is one folder name, or an error.
pub fn manifest_reader(data: &[u8]) {
    let dir = file("v.json", data);
    let archive = dir.with_file_name("v.tar.zst");
    if let Ok(m) = crate::exec::archive::read_manifest(&archive) {
        assert_eq!(m.version, 1);
        assert!(!m.root.is_empty() && !m.root.contains('/'), "{:?}", m.root);
        assert!(m.root != "." && m.root != "..", "{:?}", m.root);
    }
}

/// Labels from `data`: one `key=value` a line (up to the first `=`; a line
/// without one is a key with an empty value), as an engine may list them.
fn labels_of(data: &[u8]) -> Labels {
    text(data)
        .split('\n')
        .take(64)
        .map(|line| match line.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (line.to_string(), String::new()),
        })
        .collect()
}

/// The engine's labels, every value untrusted: an object is managed exactly
/// when it carries `ca.sandbox=1` and every scope label with its value (and
/// the reason it is not names the first rule it fails); a lease's ttl label
/// reads as a duration within the ceiling that reads back the same; what a
/// person is shown of a value (escaped, clipped) holds no hidden character
/// and stays within its width.
pub fn engine_labels(data: &[u8]) {
    let labels = labels_of(data);
    let scope = Scope::new(Labels::from([(
        "ca.sandbox.test".to_string(),
        "fuzz".to_string(),
    )]));
    let exact = labels.get(SANDBOX_LABEL).map(String::as_str) == Some(SANDBOX_VALUE)
        && labels.get("ca.sandbox.test").map(String::as_str) == Some("fuzz");
    assert_eq!(scope.manages(&labels), exact, "{labels:?}");
    assert_eq!(scope.exclusion(&labels).is_none(), exact, "{labels:?}");
    assert_eq!(
        Scope::default().manages(&labels),
        labels.get(SANDBOX_LABEL).map(String::as_str) == Some(SANDBOX_VALUE)
    );
    if let Some(ttl) = labels.get(LEASE_TTL_LABEL) {
        lease_ttl(ttl.as_bytes());
    }
    if let Some(owner) = Owner::of(&labels) {
        assert!(!owner.id.is_empty(), "{owner:?}");
        let _ = owner.advice();
    }
    for (key, value) in labels
        .iter()
        .filter(|(k, _)| *k == BOX_ID_LABEL || k.starts_with("ca."))
    {
        for shown in [escape(key), escape(value), clip(value, 80)] {
            assert!(!shown.chars().any(is_hidden), "{shown:?}");
        }
        assert!(clip(value, 80).chars().count() <= 80);
    }
}

/// An `ssh://` engine address (a state file's `[[engine]] host`, `--host`,
/// `DOCKER_HOST`): accepted only with a user and host that ssh cannot take
/// for an option and that hold no control character, once decoded.
pub fn ssh_target(data: &[u8]) {
    let address = text(data);
    let problem = crate::model::ssh_target_problem(&address);
    if let Some(problem) = &problem {
        assert!(!problem.chars().any(char::is_control), "{problem:?}");
    }
    match crate::engine::ssh::SshTarget::parse(&address).map(|t| (t.user, t.host)) {
        Ok((user, host)) => {
            assert!(
                problem.is_none(),
                "{address:?} accepted despite {problem:?}"
            );
            for part in user.iter().chain([&host]) {
                assert!(!part.starts_with('-'), "{address:?} gives {part:?}");
                assert!(!part.chars().any(char::is_control), "{address:?}");
            }
            assert!(!host.is_empty(), "{address:?}");
        }
        Err(message) => assert!(!message.is_empty()),
    }
}

/// A lease's `ca.sandbox.lease.ttl` value: over zero and at most the
/// ceiling, and the label a new lease writes reads back the same.
pub fn lease_ttl(data: &[u8]) {
    let value = text(data);
    for max in [DEFAULT_MAX_LEASE, 1, u64::MAX] {
        match parse_ttl(&value, max) {
            Ok(secs) => {
                assert!(secs > 0 && secs <= max, "{value:?}: {secs}");
                assert_eq!(parse_ttl(&ttl_label(secs), max), Ok(secs), "{value:?}");
            }
            Err(e) => assert!(!e.to_string().chars().any(char::is_control)),
        }
    }
}

/// An MCP tool call: the first line names the tool, the rest is its
/// arguments (JSON). Accepted: box IDs by the state file's rule, at most the
/// bound, a ttl over zero; refused: words without a hidden character.
pub fn mcp_arguments(data: &[u8]) {
    let text = text(data);
    let (tool, rest) = text.split_once('\n').unwrap_or((&text, ""));
    let (names, max_ids) = crate::run::mcp::args::tools();
    let arguments: Option<serde_json::Map<String, serde_json::Value>> =
        match serde_json::from_str(rest) {
            Ok(serde_json::Value::Object(map)) => Some(map),
            _ if rest.trim().is_empty() => None,
            _ => return,
        };
    let tools = std::iter::once(tool).chain(names.iter().copied().filter(|&n| n != tool));
    for name in tools {
        match crate::run::mcp::args::checked(name, arguments.as_ref()) {
            None => assert!(!names.contains(&name), "{name} is a tool"),
            Some(Ok((ids, ttl))) => {
                assert!(ids.len() <= max_ids, "{} ids", ids.len());
                for id in &ids {
                    crate::state::check_box_id(id).expect("an accepted box ID obeys the rule");
                }
                if let Some(ttl) = ttl {
                    assert!(!ttl.is_zero());
                }
            }
            Some(Err(message)) => {
                assert!(!message.chars().any(is_hidden), "{message:?}");
                assert!(message.starts_with(name), "{message}");
            }
        }
    }
}

/// The memo of inspections (`joins.json` in the user's state folder): used
/// whole or not at all; what it gives back is bounded and holds no control
/// character.
pub fn memo_file(data: &[u8]) {
    let now = 2_000_000_000;
    let Some(known) = crate::exec::memo::parse(data, now) else {
        return;
    };
    assert!(known.len() <= crate::exec::memo::MAX_ENTRIES);
    for (key, answer) in &known {
        assert!(!key.id.is_empty() && !key.id.chars().any(char::is_control));
        assert!(!key.engine.chars().any(char::is_control));
        for join in &answer.joins {
            assert!(!join.target.is_empty() && !join.target.chars().any(char::is_control));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_target_takes_empty_and_hostile_input() {
        for (name, check) in TARGETS {
            for data in [&b""[..], b"\0\xff\n=", b"ca.sandbox=1\n\x1b[31m"] {
                let run = std::panic::catch_unwind(|| check(data));
                assert!(run.is_ok(), "{name} panicked on {data:?}");
            }
        }
    }

    #[test]
    fn labels_are_read_one_a_line_up_to_the_first_equals_sign() {
        let labels = labels_of(b"a=b=c\nd\n=e");
        let want = [("a", "b=c"), ("d", ""), ("", "e")];
        assert_eq!(
            labels,
            want.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Labels>()
        );
    }
}
