//! `sandboxctl graph`: the plan as Graphviz DOT and as Mermaid, for every
//! example state in `state/examples/` (planned against its in-memory fixture
//! in `tests/fixtures/`, as `plan` would), and for names built to break the
//! syntax. The DOT text is snapshotted and Graphviz itself must accept it
//! (`dot -Tsvg` exits 0 and says nothing on stderr); both formats must name
//! only nodes they declare and carry no raw control character.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use sandboxctl::cli::config;
use sandboxctl::engine::memory::{MemoryEngine, World};
use sandboxctl::exec::reconcile::plan_once;
use sandboxctl::model::Scope;
use sandboxctl::plan::{DeclaredBox, Goal, Plan};
use sandboxctl::render;
use sandboxctl::state::DesiredState;

/// The time every plan here is made for: 2026-12-01T00:00:00Z (as tests/planner.rs).
const NOW: i64 = 1_796_083_200;

fn load_example(path: &Path) -> DesiredState {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let relative = path.strip_prefix(root).unwrap_or(path);
    let bytes = std::fs::read(path).unwrap();
    DesiredState::parse(&bytes, relative).expect("example state parses")
}

fn fixture_for(example: &Path) -> World {
    let stem = example.file_stem().unwrap().to_str().unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/{stem}.toml"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("fixture {} for example {stem}: {e}", path.display()));
    World::from_toml(&text).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

/// Plans as `sandboxctl graph` does: list, plan, inspect unmanaged containers.
fn plan_for(desired: &DesiredState, world: World) -> Plan {
    let goal = config::reconcile(desired, desired.policy.grace);
    plan_goal(&goal, &Scope::new(desired.scope.clone()), world)
}

fn plan_goal(goal: &Goal, scope: &Scope, world: World) -> Plan {
    let engine = MemoryEngine::new(world);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(plan_once(&engine, goal, scope, NOW))
        .expect("memory listing")
        .1
}

/// Runs Graphviz on `dot_text`; fails the test unless it exits 0 with an
/// empty stderr (warnings count: a syntax slip often only warns). Returns the SVG.
fn graphviz_accepts(what: &str, dot_text: &str) -> String {
    let dot = crate::support::tools::need(crate::support::tools::Tool::Graphviz);
    let mut child = Command::new(dot)
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot run Graphviz's `dot` ({e})"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(dot_text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.is_empty(),
        "{what}: dot -Tsvg exited {:?}, stderr:\n{stderr}\n--- input\n{dot_text}",
        out.status.code()
    );
    String::from_utf8(out.stdout).expect("SVG is UTF-8")
}

/// Reads one DOT double-quoted string starting at `s[0] == '"'`; returns its
/// raw content (escapes kept) and the rest after the closing quote.
fn quoted(s: &str) -> Option<(&str, &str)> {
    let body = s.strip_prefix('"')?;
    let mut escaped = false;
    for (i, c) in body.char_indices() {
        match (escaped, c) {
            (true, _) => escaped = false,
            (false, '\\') => escaped = true,
            (false, '"') => return Some((&body[..i], &body[i + 1..])),
            _ => {}
        }
    }
    None
}

/// The node IDs a DOT text declares and the edges it draws, read line by
/// line: the renderer writes one statement per line, so a line that is
/// neither a node, an edge nor the fixed header and footer is a break-out.
fn dot_structure(what: &str, text: &str) -> (Vec<String>, Vec<(String, String)>) {
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("digraph plan {"), "{what}: header");
    for line in lines {
        if line == "}" || line == "  rankdir=LR;" || line.starts_with("  node [") {
            continue;
        }
        let stmt = line
            .strip_prefix("  ")
            .unwrap_or_else(|| panic!("{what}: stray line {line:?}"));
        let (first, rest) =
            quoted(stmt).unwrap_or_else(|| panic!("{what}: unquoted statement {line:?}"));
        if let Some(rest) = rest.strip_prefix(" -> ") {
            let (second, rest) =
                quoted(rest).unwrap_or_else(|| panic!("{what}: bad edge {line:?}"));
            assert!(
                rest == ";" || rest == " [style=dashed, label=\"uses\"];",
                "{what}: edge tail {rest:?} in {line:?}"
            );
            edges.push((first.to_string(), second.to_string()));
        } else {
            assert!(
                rest.starts_with(" [label=\"") && rest.ends_with("];"),
                "{what}: node tail {rest:?} in {line:?}"
            );
            let (_, attrs) = quoted(&rest[" [label=".len()..])
                .unwrap_or_else(|| panic!("{what}: label not closed in {line:?}"));
            assert!(
                attrs.starts_with(", fillcolor=\""),
                "{what}: label breaks out in {line:?}"
            );
            nodes.push(first.to_string());
        }
    }
    (nodes, edges)
}

/// Mermaid: node lines `  nK["..."]:::class`, edges `  nA --> nB` or
/// `  nA -.->|uses| nB`, the fixed classDef lines; labels free of `"` and
/// control characters. Returns (node count, edge count).
fn mermaid_structure(what: &str, text: &str) -> (usize, usize) {
    let mut declared = std::collections::BTreeSet::new();
    let mut edges = 0;
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("flowchart LR"), "{what}: header");
    for line in lines {
        let stmt = line
            .strip_prefix("  ")
            .unwrap_or_else(|| panic!("{what}: stray line {line:?}"));
        if stmt.starts_with("classDef ") {
            continue;
        }
        if let Some((id, rest)) = stmt.split_once("[\"") {
            let (label, class) = rest
                .rsplit_once("\"]:::")
                .unwrap_or_else(|| panic!("{what}: node {line:?}"));
            assert!(
                !label.contains('"'),
                "{what}: a quote inside a label: {line:?}"
            );
            assert!(
                ["remove", "blocked", "keep", "retain", "unmanaged"].contains(&class),
                "{what}: class {class:?}"
            );
            assert!(
                id.starts_with('n') && id[1..].parse::<usize>().is_ok(),
                "{what}: id {id:?}"
            );
            declared.insert(id.to_string());
            continue;
        }
        let parts: Vec<&str> = stmt.split(' ').collect();
        match parts.as_slice() {
            [a, "-->", b] | [a, "-.->|uses|", b] => {
                assert!(
                    declared.contains(*a) && declared.contains(*b),
                    "{what}: edge to an undeclared node: {line:?}"
                );
                edges += 1;
            }
            _ => panic!("{what}: not a node, edge or classDef: {line:?}"),
        }
    }
    (declared.len(), edges)
}

/// No control character but the line feed ending each line.
fn assert_no_control_bytes(what: &str, text: &str) {
    let bad = text.chars().find(|&c| c.is_control() && c != '\n');
    assert!(bad.is_none(), "{what}: raw {bad:?} in\n{text}");
}

/// Both renderings of `plan` are well formed, agree with each other, and
/// Graphviz accepts the DOT. Returns the DOT text.
fn check_graphs(what: &str, plan: &Plan) -> String {
    let dot = render::graph_dot(plan);
    let mermaid = render::graph_mermaid(plan);
    assert_no_control_bytes(what, &dot);
    assert_no_control_bytes(what, &mermaid);
    let (nodes, edges) = dot_structure(what, &dot);
    let mut unique = nodes.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        nodes.len(),
        "{what}: a node declared twice:\n{dot}"
    );
    for (a, b) in &edges {
        assert!(
            nodes.contains(a) && nodes.contains(b),
            "{what}: edge {a:?} -> {b:?} names a node the graph does not declare:\n{dot}"
        );
    }
    let expected_nodes =
        plan.steps.len() + plan.blocked.len() + plan.kept.len() + plan.retained.images.len();
    assert!(
        nodes.len() >= expected_nodes,
        "{what}: {} nodes for {expected_nodes} planned objects",
        nodes.len()
    );
    let before_edges: usize = plan.steps.iter().map(|s| s.waits_for.len()).sum();
    assert!(
        edges.len() >= before_edges,
        "{what}: missing ordering edges"
    );
    assert_eq!(
        mermaid_structure(what, &mermaid),
        (nodes.len(), edges.len()),
        "{what}: Mermaid and DOT disagree\n{mermaid}\n{dot}"
    );
    graphviz_accepts(what, &dot);
    dot
}

trial!(example_graphs_parse_and_match_their_snapshots);
fn example_graphs_parse_and_match_their_snapshots() {
    insta::with_settings!({
        snapshot_path => "../snapshots",
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::glob!("../state/examples", "*.toml", |path| {
            let plan = plan_for(&load_example(path), fixture_for(path));
            let what = format!("graph of {}", path.display());
            let dot = check_graphs(&what, &plan);
            insta::assert_snapshot!("graph_dot", dot);
        });
    });
}

/// Names, box IDs and image tags made to break out of a DOT or Mermaid
/// string: quotes, backslashes (also one before a quote, and DOT's `\N`/`\l`
/// label escapes), newlines, an ANSI escape, a bidi override, `<br/>` and
/// Mermaid's `]`, `|`, `-->` and `:::`.
const HOSTILE_WORLD: &str = r#"
[[container]]
id = "0bad000000010000000000000000000000000000000000000000000000000001"
name = "evil\"]; \"x\" -> \"y\" [label=\"pwn"
state = "running"
labels = { "ca.sandbox" = "1", "ca.sandbox.id" = "box\\\"\n\u001b[31mred\u001b[0m" }
mounts = ["vol\\N\\l\"\n<br/>]:::keep"]
networks = ["0bad0000000200000000000000000000000000000000000000000000000000ee"]

[[volume]]
name = "vol\\N\\l\"\n<br/>]:::keep"
labels = { "ca.sandbox" = "1", "ca.sandbox.id" = "box\\\"\n\u001b[31mred\u001b[0m" }

[[network]]
id = "0bad0000000200000000000000000000000000000000000000000000000000ee"
name = "net\u202e\"} digraph x {"
labels = { "ca.sandbox" = "1", "ca.sandbox.id" = "box\\\"\n\u001b[31mred\u001b[0m" }

[[volume]]
name = "held\\"
labels = { "ca.sandbox" = "1" }

[[container]]
id = "0bad000000030000000000000000000000000000000000000000000000000003"
name = "holder\"\\\n --> n0 |x| \u001b]0;title\u0007"
state = "running"
labels = {}
mounts = ["held\\"]

[[container]]
id = "0bad000000040000000000000000000000000000000000000000000000000004"
name = "kept\\\"%% comment"
state = "exited"
labels = { "ca.sandbox" = "1", "ca.sandbox.id" = "kept\"box" }

[[image]]
id = "sha256:0bad00000000000000000000000000000000000000000000000000000000000f"
tags = ["ca-sbx:\"tag\"\n\\"]
"#;

trial!(hostile_names_do_not_break_dot_or_mermaid);
fn hostile_names_do_not_break_dot_or_mermaid() {
    let world = World::from_toml(HOSTILE_WORLD).expect("hostile fixture");
    // The kept box's ID is not one a state file accepts: declare it through the goal.
    let goal = Goal::Reconcile {
        boxes: vec![DeclaredBox::new("kept\"box")],
        keep_volumes: vec![],
        grace: None,
        max_lease: None,
        archive: None,
    };
    let plan = plan_goal(&goal, &Scope::default(), world);
    assert!(!plan.steps.is_empty(), "something to remove");
    assert!(!plan.blocked.is_empty(), "the held volume is blocked");
    assert!(!plan.kept.is_empty(), "the kept box is kept");
    let dot = check_graphs("hostile graph", &plan);
    // The names are still there, escaped: quotes as \", backslashes doubled.
    assert!(
        dot.contains(r#"evil\"]; \"x\" -> \"y\" [label=\"pwn"#),
        "{dot}"
    );
    // Graphviz drew exactly the nodes declared (none made up from a broken edge).
    let declared = dot_structure("hostile graph", &dot).0.len();
    let svg = graphviz_accepts("hostile graph", &dot);
    assert_eq!(svg.matches("class=\"node\"").count(), declared, "{svg}");
    insta::with_settings!({
        snapshot_path => "../snapshots",
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!("graph_dot_hostile", dot);
        insta::assert_snapshot!("graph_mermaid_hostile", render::graph_mermaid(&plan));
    });
}
