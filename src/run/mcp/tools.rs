//! The tools the server offers: each one's name, description, input schema,
//! output schema and annotations, as an agent host lists them.
//!
//! Owns what an agent reads before it calls: the descriptions say what a
//! call changes, what it never touches and how to read its result; the
//! input schemas state the rules `args.rs` checks (no other member, box IDs,
//! bounds); the output schemas are the published schemas of the JSON the
//! CLI twin prints (`docs/schema/`, built in). Must not decide what
//! a call does.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::cli::config::McpTools;

/// The most box IDs one call may name.
pub(super) const MAX_IDS: usize = 256;
/// The longest `object` `explain` takes (an ID, a name, `kind:name`, `box:ID`).
pub(super) const MAX_OBJECT_CHARS: usize = 512;
/// The longest `ttl`.
pub(super) const MAX_TTL_CHARS: usize = 64;
/// A lease's ttl when the call gives none (as `lease`'s).
pub(super) const DEFAULT_TTL: &str = "15m";

/// A tool of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tool {
    Plan,
    Destroy,
    Prune,
    Inventory,
    Explain,
    Lease,
}

impl Tool {
    /// Every tool, in the order they are listed.
    pub(super) const ALL: [Tool; 6] = [
        Tool::Plan,
        Tool::Destroy,
        Tool::Prune,
        Tool::Inventory,
        Tool::Explain,
        Tool::Lease,
    ];

    pub(super) fn name(self) -> &'static str {
        match self {
            Tool::Plan => "plan",
            Tool::Destroy => "destroy",
            Tool::Prune => "prune",
            Tool::Inventory => "inventory",
            Tool::Explain => "explain",
            Tool::Lease => "lease",
        }
    }

    pub(super) fn named(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }

    fn title(self) -> &'static str {
        match self {
            Tool::Plan => "Plan a teardown",
            Tool::Destroy => "Destroy sandbox boxes",
            Tool::Prune => "Reclaim leaked sandbox objects",
            Tool::Inventory => "List sandbox objects",
            Tool::Explain => "Explain one object",
            Tool::Lease => "Lease sandbox boxes",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Tool::Plan => "Show what prune would remove, in order and why (leaked objects, boxes past their expiry, what the state file does not declare once its grace is over), what it keeps and the images it retains. Changes nothing. The result is the plan that `sandboxctl plan --format json` prints; an error result means an engine could not be listed whole (its failures say what).",
            Tool::Destroy => "Destroy sandbox boxes by ID: each box's containers (running ones are killed: a box is disposable), its networks and, unless keepVolume is true, its volumes, in dependency order; then list again to verify that nothing is left. Only objects labeled ca.sandbox=1, in this server's scope, with ca.sandbox.id equal to one of the IDs are touched; cached images (ca-sbx:*) are never removed and are listed under retained. It needs at least one ID: an empty or missing ids is refused and nothing is done (to reclaim every leaked object, call prune). An ID that nothing in scope carries is an error result naming it under unknownBoxes (list the boxes with inventory), unless missingOk is true or the server's audit log records that box's removal (then it says when and by what). The result is the report of `sandboxctl destroy --format json`: converged, removed (with reclaimedBytes: pass reclaimed: true to measure them), kept, retained, failures, unknownBoxes. An error result means something was left behind or a named box was not found: every such object is in remainingContainers, remainingVolumes or remainingNetworks with its reason (for example a volume in use by a container outside the sandbox system, which is never forced).",
            Tool::Prune => "The twin of `sandboxctl prune`. Reclaim every leaked sandbox object in this server's scope: what the state file does not declare (once older than its grace), boxes past their expiry, objects without a box label, and their leases run out. Declared and leased boxes stay; images are never removed. Then list again to verify. The result is the same report as destroy's (pass reclaimed: true to measure reclaimedBytes); an error result names every object left behind with its reason.",
            Tool::Inventory => "List the managed sandbox objects (labeled ca.sandbox=1, in this server's scope) grouped by box, with each container's state, mounts and networks, the boxes' leases, and the retained images. Changes nothing. The result is what `sandboxctl inventory --format json` prints.",
            Tool::Explain => "Say what prune would do with one object and why: its labels, whether it is managed, the state-file line that declares or keeps it, what it waits for and what waits for it, what blocks it. object is a container ID or prefix, a container, volume or network name (container:, volume: or network: before it narrows the kind), or box:ID. Changes nothing. An error result means nothing matched, or several objects did (they are listed).",
            Tool::Lease => "Take or renew a lease on boxes, so that prune and the reaper keep them while you still use them (destroy by ID still removes a leased box): a lease holds for ttl (default 15m, at most the state file's max_lease) from its creation, on the engine's clock; renew it before it runs out. With release: true, end every lease of the boxes instead. The result is what `sandboxctl lease --format json` prints; an error result names what failed.",
        }
    }

    /// The members the tool takes, as a JSON schema that admits no other.
    fn input_schema(self) -> Value {
        let ids = |what: &str| {
            json!({
                "type": "array",
                "description": what,
                "items": {
                    "type": "string",
                    "description": "A box ID: the value of the ca.sandbox.id label.",
                    "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]*$",
                    "maxLength": crate::state::MAX_BOX_ID_CHARS
                },
                "maxItems": MAX_IDS
            })
        };
        let reclaimed = json!({
            "type": "boolean",
            "description": "Measure what each removed container and volume gives back (reclaimedBytes, and the total), as `--reclaimed` does: one GET /system/df per engine before the first removal. Without it (and without the server's own --reclaimed) only an archived volume is measured; what is not measured stays null, never 0.",
            "default": false
        });
        let (properties, required): (Value, &[&str]) = match self {
            Tool::Plan | Tool::Inventory => (json!({}), &[]),
            Tool::Prune => (json!({ "reclaimed": reclaimed }), &[]),
            Tool::Destroy => (
                json!({
                    "ids": ids("The boxes to destroy (at least one). An empty or missing list is refused: to reclaim every leaked object, call prune."),
                    "keepVolume": {
                        "type": "boolean",
                        "description": "Keep the named boxes' volumes.",
                        "default": false
                    },
                    "missingOk": {
                        "type": "boolean",
                        "description": "Succeed when an ID matches nothing in scope (it is still reported under unknownBoxes). Without it such an ID is an error result, unless the server's audit log records that box's removal.",
                        "default": false
                    },
                    "reclaimed": reclaimed
                }),
                &["ids"],
            ),
            Tool::Explain => (
                json!({
                    "object": {
                        "type": "string",
                        "description": "A container ID or prefix, a container, volume or network name (container:, volume: or network: before it narrows the kind), or box:ID.",
                        "minLength": 1,
                        "maxLength": MAX_OBJECT_CHARS
                    }
                }),
                &["object"],
            ),
            Tool::Lease => (
                json!({
                    "ids": ids("The boxes to lease (or release)."),
                    "ttl": {
                        "type": "string",
                        "description": "How long the lease holds: 30s, 15m, 2h (whole seconds, at most the state file's max_lease, 24h by default). Not with release.",
                        "default": DEFAULT_TTL
                    },
                    "release": {
                        "type": "boolean",
                        "description": "End every lease of the boxes instead of taking one.",
                        "default": false
                    }
                }),
                &["ids"],
            ),
        };
        let mut schema = json!({
            "type": "object",
            "properties": properties,
            "additionalProperties": false
        });
        if !required.is_empty() {
            schema["required"] = json!(required);
        }
        if matches!(self, Tool::Lease | Tool::Destroy) {
            schema["properties"]["ids"]["minItems"] = json!(1);
        }
        schema
    }

    /// The published schema of the JSON the CLI twin prints: the committed
    /// file of `docs/schema/`, built in (the schema tests check that it is
    /// the one `crate::schema` generates from the types).
    fn output_schema(self) -> Value {
        let text = match self {
            Tool::Plan => include_str!("../../../docs/schema/plan.schema.json"),
            Tool::Destroy | Tool::Prune => include_str!("../../../docs/schema/report.schema.json"),
            Tool::Inventory => include_str!("../../../docs/schema/inventory.schema.json"),
            Tool::Explain => include_str!("../../../docs/schema/explain.schema.json"),
            Tool::Lease => include_str!("../../../docs/schema/lease.schema.json"),
        };
        serde_json::from_str(text).expect("a committed schema is JSON")
    }

    fn annotations(self) -> rmcp::model::ToolAnnotations {
        let hints = rmcp::model::ToolAnnotations::with_title(self.title()).open_world(false);
        match self {
            // Read-only: changes nothing; asking again changes nothing.
            Tool::Plan | Tool::Inventory | Tool::Explain => hints.read_only(true).idempotent(true),
            // Level-triggered: a second call finds nothing more to remove.
            Tool::Destroy | Tool::Prune => {
                hints.read_only(false).destructive(true).idempotent(true)
            }
            // Each call makes a new lease (and removes the box's older
            // ones; release removes them all).
            Tool::Lease => hints.read_only(false).destructive(true).idempotent(false),
        }
    }

    /// The tools a server started with `gate` offers, in the order they
    /// are listed: every one, those whose `readOnlyHint` is true, or
    /// exactly the named ones.
    pub(super) fn offered(gate: &McpTools) -> Vec<Tool> {
        Tool::ALL
            .into_iter()
            .filter(|t| match gate {
                McpTools::All => true,
                McpTools::ReadOnly => t.annotations().read_only_hint == Some(true),
                McpTools::Named(names) => names.iter().any(|n| n == t.name()),
            })
            .collect()
    }

    /// The tool as it is listed.
    pub(super) fn listed(self) -> rmcp::model::Tool {
        rmcp::model::Tool::new(self.name(), self.description(), object(self.input_schema()))
            .with_raw_output_schema(object(self.output_schema()))
            .with_annotations(self.annotations())
    }
}

fn object(schema: Value) -> Arc<Map<String, Value>> {
    match schema {
        Value::Object(map) => Arc::new(map),
        other => unreachable!("a tool's schema is an object, not {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_admits_only_its_members_and_has_an_object_output() {
        for tool in Tool::ALL {
            assert_eq!(Tool::named(tool.name()), Some(tool));
            let listed = tool.listed();
            assert_eq!(listed.input_schema["type"], "object");
            assert_eq!(listed.input_schema["additionalProperties"], false);
            let output = listed.output_schema.expect("an output schema");
            assert_eq!(output["type"], "object", "{}", tool.name());
        }
        assert_eq!(Tool::named("apply"), None);
        // destroy never takes an empty list (it is not prune).
        let destroy = Tool::Destroy.listed().input_schema;
        assert_eq!(destroy["required"], serde_json::json!(["ids"]));
        assert_eq!(destroy["properties"]["ids"]["minItems"], 1);
        assert_eq!(destroy["properties"]["missingOk"]["type"], "boolean");
    }

    #[test]
    fn the_command_line_names_exactly_these_tools() {
        assert_eq!(Tool::ALL.map(Tool::name), crate::cli::MCP_TOOLS);
    }

    #[test]
    fn a_gate_offers_the_readers_or_exactly_the_named_tools() {
        assert_eq!(Tool::offered(&McpTools::All), Tool::ALL.to_vec());
        assert_eq!(
            Tool::offered(&McpTools::ReadOnly),
            [Tool::Plan, Tool::Inventory, Tool::Explain]
        );
        let named = McpTools::Named(vec!["destroy".into(), "plan".into()]);
        assert_eq!(Tool::offered(&named), [Tool::Plan, Tool::Destroy]);
        for tool in Tool::offered(&McpTools::ReadOnly) {
            assert_eq!(tool.annotations().destructive_hint, None, "{}", tool.name());
        }
    }

    #[test]
    fn destructive_tools_say_so_and_readers_say_they_only_read() {
        for tool in Tool::ALL {
            let a = tool.annotations();
            let reads = matches!(tool, Tool::Plan | Tool::Inventory | Tool::Explain);
            assert_eq!(a.read_only_hint, Some(reads), "{}", tool.name());
            if !reads {
                assert_eq!(a.destructive_hint, Some(true), "{}", tool.name());
            }
        }
        assert_eq!(Tool::Destroy.annotations().idempotent_hint, Some(true));
        assert_eq!(Tool::Prune.annotations().idempotent_hint, Some(true));
    }
}
