//! The dependency rules of `src/`, checked (docs/ARCHITECTURE.md states them).
//!
//! Every top-level module (a folder or a file under `src/`) may use only the
//! modules this table allows, and the table itself has no cycle, so neither
//! has the code. The pure core (`model`, `plan`, `text`, `exec/walk.rs`) does
//! no I/O and uses no tokio. Read from the source text, with tests (each
//! `#[cfg(test)]` item) and comments left out. A new module is added here.
//! Only `main.rs` ends the process (`process::exit`).
//! `cargo test -- layers --nocapture` prints the graph as it is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What each top-level module may use.
const ALLOWED: &[(&str, &[&str])] = &[
    ("model", &[]),
    ("text", &[]),
    ("state", &["model", "text"]),
    ("engine", &["model", "text"]),
    ("plan", &["model"]),
    ("exec", &["model", "plan", "engine"]),
    ("watch", &["model", "plan", "exec", "engine"]),
    ("observe", &["model", "plan", "exec", "engine"]),
    (
        "render",
        &["model", "plan", "exec", "engine", "state", "text"],
    ),
    (
        "cli",
        &[
            "model", "plan", "exec", "engine", "state", "text", "watch", "render",
        ],
    ),
    (
        "schema",
        &["model", "plan", "exec", "engine", "render", "observe"],
    ),
    (
        "run",
        &[
            "model", "plan", "exec", "engine", "state", "text", "watch", "render", "observe",
            "cli", "schema",
        ],
    ),
    // The fuzz targets' properties: every reader of untrusted input, the
    // MCP arguments' among them; nothing uses it.
    (
        "fuzz",
        &[
            "model", "plan", "exec", "engine", "state", "text", "watch", "render", "observe",
            "cli", "run",
        ],
    ),
];

/// Files of the pure core: no tokio, no file, network or process I/O.
const PURE: &[&str] = &["model", "plan", "text", "exec/walk.rs"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to: `exec` for `src/exec/fleet.rs`.
fn module_of(path: &Path) -> String {
    let rel = path.strip_prefix(src()).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// The code of a file: comments left out, and every `#[cfg(test)]` item
/// (up to its `;`, or its braces' match) wherever it stands.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at + "#[cfg(test)]".len()..];
        let end = match (item.find(';'), item.find('{')) {
            (Some(semi), Some(open)) if semi < open => semi + 1,
            (Some(semi), None) => semi + 1,
            (_, Some(open)) => {
                let mut depth = 0;
                let mut end = item.len();
                for (i, c) in item[open..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = open + i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (None, None) => item.len(),
        };
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// The top-level modules `code` names through `crate::` (also in a group,
/// `crate::{a::X, b::Y}`).
fn uses(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level entries of the group: split on commas outside braces.
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        found.insert(ident(&group[start..i]));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.insert(ident(&group[start..i]));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            found.insert(ident(rest));
        }
    }
    found.remove("");
    found
}

/// The module graph as it is: module -> the modules it uses.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut all = Vec::new();
    files(&src(), &mut all);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in all {
        let module = module_of(&file);
        if module == "lib" || module == "main" {
            continue;
        }
        let used = uses(&code(&file));
        let entry = graph.entry(module.clone()).or_default();
        entry.extend(used.into_iter().filter(|u| *u != module));
    }
    graph
}

trial!(every_module_uses_only_what_the_layers_allow_and_the_layers_have_no_cycle);
fn every_module_uses_only_what_the_layers_allow_and_the_layers_have_no_cycle() {
    let allowed: BTreeMap<&str, BTreeSet<&str>> = ALLOWED
        .iter()
        .map(|(m, deps)| (*m, deps.iter().copied().collect()))
        .collect();
    // The table is a DAG: repeatedly take a module all of whose allowed
    // dependencies are taken.
    let mut done: BTreeSet<&str> = BTreeSet::new();
    while done.len() < allowed.len() {
        let next: Vec<&str> = allowed
            .iter()
            .filter(|(m, deps)| !done.contains(*m) && deps.iter().all(|d| done.contains(d)))
            .map(|(m, _)| *m)
            .collect();
        assert!(
            !next.is_empty(),
            "the layer table has a cycle among {:?}",
            {
                let left: Vec<&&str> = allowed.keys().filter(|m| !done.contains(*m)).collect();
                left
            }
        );
        done.extend(next);
    }
    let graph = graph();
    let mut problems = Vec::new();
    for (module, used) in &graph {
        println!(
            "{module} -> {}",
            used.iter().cloned().collect::<Vec<_>>().join(", ")
        );
        let Some(ok) = allowed.get(module.as_str()) else {
            problems.push(format!(
                "src/{module} is not in the layer table (tests/layers.rs)"
            ));
            continue;
        };
        for u in used {
            if !ok.contains(u.as_str()) {
                problems.push(format!("{module} uses {u}, which its layer may not"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

trial!(the_pure_core_does_no_io_and_uses_no_tokio);
fn the_pure_core_does_no_io_and_uses_no_tokio() {
    let mut all = Vec::new();
    files(&src(), &mut all);
    let forbidden = [
        "tokio",
        "std::fs",
        "std::net",
        "std::process",
        "std::io",
        "crate::engine",
    ];
    let mut problems = Vec::new();
    for file in all {
        let rel = file
            .strip_prefix(src())
            .unwrap()
            .to_string_lossy()
            .to_string();
        if !PURE
            .iter()
            .any(|p| rel == *p || rel.starts_with(&format!("{p}/")) || rel == format!("{p}.rs"))
        {
            continue;
        }
        for line in code(&file).lines() {
            for f in forbidden {
                if line.contains(f) {
                    problems.push(format!("src/{rel} uses {f}: {}", line.trim()));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A file's module path: `exec::fleet` for `src/exec/fleet.rs`, `exec` for
/// `src/exec/mod.rs`.
fn module_path(path: &Path) -> String {
    let rel = path.strip_prefix(src()).unwrap().with_extension("");
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .filter(|c| c != "mod")
        .collect();
    parts.join("::")
}

/// The modules `code` (in module `me`) names: the longest known module path
/// after `crate::`, or after `super::`.
fn module_uses(code: &str, me: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let parent = me.rsplit_once("::").map(|(p, _)| p.to_string());
    for (prefix, base) in [
        ("crate::", String::new()),
        ("super::", parent.clone().unwrap_or_default()),
    ] {
        if prefix == "super::" && parent.is_none() {
            continue;
        }
        let mut rest = code;
        while let Some(at) = rest.find(prefix) {
            rest = &rest[at + prefix.len()..];
            let path: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let mut segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
            while !segments.is_empty() {
                let candidate = if base.is_empty() {
                    segments.join("::")
                } else {
                    format!("{base}::{}", segments.join("::"))
                };
                if known.contains(&candidate) {
                    found.insert(candidate);
                    break;
                }
                segments.pop();
            }
        }
    }
    found.remove(me);
    found
}

trial!(no_module_reaches_itself_through_its_imports);
fn no_module_reaches_itself_through_its_imports() {
    let mut all = Vec::new();
    files(&src(), &mut all);
    let known: BTreeSet<String> = all.iter().map(|f| module_path(f)).collect();
    let graph: BTreeMap<String, BTreeSet<String>> = all
        .iter()
        .map(|f| {
            let me = module_path(f);
            let uses = module_uses(&code(f), &me, &known);
            (me, uses)
        })
        .filter(|(m, _)| m != "lib" && m != "main")
        .collect();
    // Peel off modules that use nothing left; what remains is on a cycle.
    let mut left = graph.clone();
    loop {
        let leaves: Vec<String> = left
            .iter()
            .filter(|(_, uses)| uses.iter().all(|u| !left.contains_key(u)))
            .map(|(m, _)| m.clone())
            .collect();
        if leaves.is_empty() {
            break;
        }
        for m in leaves {
            left.remove(&m);
        }
    }
    assert!(
        left.is_empty(),
        "modules on an import cycle, or using one: {:?}",
        left.keys().collect::<Vec<_>>()
    );
}

/// `process::exit` only in `main.rs`: every run ends in one result that
/// `cli::exit` decides, and only `main` hands its status to the process.
trial!(only_main_ends_the_process);
fn only_main_ends_the_process() {
    let mut all = Vec::new();
    files(&src(), &mut all);
    let mut problems = Vec::new();
    for file in all {
        let rel = file
            .strip_prefix(src())
            .unwrap()
            .to_string_lossy()
            .to_string();
        if rel == "main.rs" {
            continue;
        }
        for line in code(&file).lines() {
            if line.contains("process::exit")
                || line.contains("libc::exit")
                || line.contains("libc::_exit")
            {
                problems.push(format!("src/{rel} ends the process: {}", line.trim()));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let main = std::fs::read_to_string(src().join("main.rs")).unwrap();
    assert_eq!(
        main.matches("process::exit(").count(),
        1,
        "main.rs exits once"
    );
}
