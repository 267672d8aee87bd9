//! The graph view (`graph`): the plan as Graphviz DOT or a Mermaid
//! flowchart. Removals (with the order edges between them), blocked, kept and
//! retained objects, and the unmanaged or kept objects that hold them (dashed
//! `uses` edges). Labels are escaped and cut, then quoted for the format;
//! node IDs are escaped but never cut, so they stay unique.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::model::Reason;
use crate::plan::{Entry, Plan};
use crate::render::table::CELL_CHARS;
use crate::render::Format;
use crate::text::{clip, escape};

/// The plan graph in `format` (Mermaid, or DOT for anything else).
pub(crate) fn graph(plan: &Plan, format: Format) -> String {
    match format {
        Format::Mermaid => graph_mermaid(plan),
        _ => graph_dot(plan),
    }
}

/// A node of the plan graph: its ID, label lines, and class.
struct GraphNode {
    id: String,
    lines: Vec<String>,
    class: &'static str,
}

/// The plan as nodes and edges: steps (remove), blocked, kept, retained
/// images, and the unmanaged or kept holders named by reasons.
fn graph_parts(plan: &Plan) -> (Vec<GraphNode>, Vec<(String, String, &'static str)>) {
    let node_id = |e: &Entry| format!("{}/{}", e.kind, e.key().id);
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    for s in &plan.steps {
        nodes.push(GraphNode {
            id: node_id(&s.object),
            lines: vec![
                format!("{}. remove {}", s.step, s.object.kind),
                s.object.name.clone(),
                s.why.to_string(),
            ],
            class: "remove",
        });
        for &w in &s.waits_for {
            edges.push((
                node_id(&plan.steps[w - 1].object),
                node_id(&s.object),
                "before",
            ));
        }
    }
    let mut holders: BTreeMap<String, GraphNode> = BTreeMap::new();
    for (noted, class) in plan
        .blocked
        .iter()
        .map(|n| (n, "blocked"))
        .chain(plan.kept.all().map(|n| (n, "keep")))
    {
        let id = node_id(&noted.object);
        nodes.push(GraphNode {
            id: id.clone(),
            lines: vec![
                format!("{class} {}", noted.object.kind),
                noted.object.name.clone(),
                noted.why.to_string(),
            ],
            class,
        });
        let (list, unmanaged) = match &noted.why {
            Reason::HeldByUnmanaged { holders } => (holders.clone(), true),
            Reason::MountedByKept { holders } => (holders.clone(), false),
            Reason::WaitsForBlocked { object } => (vec![object.clone()], false),
            _ => (vec![], false),
        };
        for r in list {
            let hid = format!(
                "{}/{}",
                r.kind,
                r.id.clone().unwrap_or_else(|| r.name.clone())
            );
            if unmanaged {
                holders.entry(hid.clone()).or_insert_with(|| GraphNode {
                    id: hid.clone(),
                    lines: vec![format!("unmanaged {}", r.kind), r.name.clone()],
                    class: "unmanaged",
                });
            }
            edges.push((hid, id.clone(), "uses"));
        }
    }
    nodes.extend(holders.into_values());
    for i in &plan.retained.images {
        nodes.push(GraphNode {
            id: format!("image/{}", i.id),
            lines: vec!["retain image".into(), i.tags.join(", ")],
            class: "retain",
        });
    }
    (nodes, edges)
}

/// Text for a DOT double-quoted string: escaped, cut, quotes and backslashes escaped.
fn dot_text(s: &str) -> String {
    dot_quote(&clip(s, CELL_CHARS))
}

/// Escaped text made safe inside a DOT double-quoted string.
fn dot_quote(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// A DOT node ID: escaped but never cut (IDs must stay unique).
fn dot_id(s: &str) -> String {
    dot_quote(&escape(s))
}

/// The plan as a Graphviz DOT digraph (`sandboxctl graph | dot -Tsvg`). Edges
/// run from what goes first to what waits for it; dashed edges show what uses
/// a kept or blocked object.
pub fn graph_dot(plan: &Plan) -> String {
    let (nodes, edges) = graph_parts(plan);
    let mut out = String::from(
        "digraph plan {\n  rankdir=LR;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n",
    );
    for n in &nodes {
        let (fill, extra) = match n.class {
            "remove" => ("#f8d7da", ""),
            "blocked" => ("#ffe5b4", ", penwidth=2, color=\"#d9480f\""),
            "keep" => ("#d3f9d8", ""),
            "retain" => ("#e9ecef", ", shape=cylinder"),
            _ => ("#ffffff", ", style=\"rounded,dashed\""),
        };
        let label: Vec<String> = n.lines.iter().map(|l| dot_text(l)).collect();
        let _ = writeln!(
            out,
            "  \"{}\" [label=\"{}\", fillcolor=\"{fill}\"{extra}];",
            dot_id(&n.id),
            label.join("\\n")
        );
    }
    for (from, to, what) in &edges {
        let style = if *what == "uses" {
            " [style=dashed, label=\"uses\"]"
        } else {
            ""
        };
        let _ = writeln!(out, "  \"{}\" -> \"{}\"{style};", dot_id(from), dot_id(to));
    }
    out.push_str("}\n");
    out
}

/// The plan as a Mermaid flowchart.
pub fn graph_mermaid(plan: &Plan) -> String {
    let (nodes, edges) = graph_parts(plan);
    let ids: BTreeMap<&str, String> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), format!("n{i}")))
        .collect();
    let text = |s: &str| {
        clip(s, CELL_CHARS)
            .replace('"', "#quot;")
            .replace('<', "#lt;")
            .replace('>', "#gt;")
    };
    let mut out = String::from("flowchart LR\n");
    for n in &nodes {
        let label: Vec<String> = n.lines.iter().map(|l| text(l)).collect();
        let _ = writeln!(
            out,
            "  {}[\"{}\"]:::{}",
            ids[n.id.as_str()],
            label.join("<br/>"),
            n.class
        );
    }
    for (from, to, what) in &edges {
        let (Some(a), Some(b)) = (ids.get(from.as_str()), ids.get(to.as_str())) else {
            continue;
        };
        if *what == "uses" {
            let _ = writeln!(out, "  {a} -.->|uses| {b}");
        } else {
            let _ = writeln!(out, "  {a} --> {b}");
        }
    }
    out.push_str("  classDef remove fill:#f8d7da\n  classDef blocked fill:#ffe5b4,stroke:#d9480f,stroke-width:2px\n  classDef keep fill:#d3f9d8\n  classDef retain fill:#e9ecef\n  classDef unmanaged fill:#ffffff,stroke-dasharray: 4 2\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::{hostile_plan, plan_of_two};

    #[test]
    fn dot_has_order_edges_and_dashed_uses() {
        insta::assert_snapshot!(graph_dot(&plan_of_two()), @r##"
        digraph plan {
          rankdir=LR;
          node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];
          "container/c0ffee0000010000" [label="1. remove container\nsbx-a\nleaked: box a is not declared", fillcolor="#f8d7da"];
          "volume/data-a" [label="2. remove volume\ndata-a\nleaked: box a is not declared", fillcolor="#f8d7da"];
          "network/5eed000000010000" [label="blocked network\nshared\nin use by unmanaged container web (0ddba1100000, attached); nev…", fillcolor="#ffe5b4", penwidth=2, color="#d9480f"];
          "volume/notes" [label="keep volume\nnotes\nlisted in volumes.keep", fillcolor="#d3f9d8"];
          "container/0ddba1100000f000" [label="unmanaged container\nweb", fillcolor="#ffffff", style="rounded,dashed"];
          "image/sha256:0123456789abcdef" [label="retain image\nca-sbx:repo-1", fillcolor="#e9ecef", shape=cylinder];
          "container/c0ffee0000010000" -> "volume/data-a";
          "container/0ddba1100000f000" -> "network/5eed000000010000" [style=dashed, label="uses"];
        }
        "##);
    }

    #[test]
    fn mermaid_numbers_nodes_and_classes_them() {
        let text = graph(&plan_of_two(), Format::Mermaid);
        assert!(text.starts_with("flowchart LR\n  n0[\"1. remove container<br/>sbx-a<br/>leaked: box a is not declared\"]:::remove\n"), "{text}");
        assert!(text.contains("  n4 -.->|uses| n2\n"), "{text}");
        assert!(text.contains("  n0 --> n1\n"), "{text}");
    }

    #[test]
    fn hostile_text_is_escaped_and_quoted_in_both_formats() {
        let plan = hostile_plan();
        let dot = graph_dot(&plan);
        insta::assert_snapshot!(dot.lines().nth(3).unwrap(), @r##"  "container/c0ffee0000010000" [label="1. remove container\nevil\\u{1b}[2J\\n\\u{202e}x\nleaked: box b\\u{1b}]0;t\\u{7}\\nFORGED is not declared", fillcolor="#f8d7da"];"##);
        let mermaid = graph_mermaid(&plan);
        for text in [&dot, &mermaid] {
            assert!(
                !text.contains('\u{1b}') && !text.contains('\u{202e}'),
                "{text}"
            );
            assert_eq!(
                text.lines().count(),
                text.split('\n').count() - 1,
                "no forged line"
            );
        }
        assert!(mermaid.contains("evil\\u{1b}[2J\\n\\u{202e}x"), "{mermaid}");
    }
}
