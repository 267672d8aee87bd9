//! The inventory view (`inventory`): the managed objects grouped by box
//! (objects without a box label first), containers with their state and what
//! they use, then the retained images and the counts; a fleet's inventories
//! under one heading per engine; and the warning for an engine whose label
//! filter let foreign objects through. JSON: the same grouping, exact values.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::model::{ImageInfo, Kind, Natural, ObjectKey};
use crate::plan::inventory::Inventory;
use crate::plan::lease::{EngineClock, LeaseNote, Leases};
use crate::render::table::{
    image_table, indented, kind_counts, name_cell, plural, table, CELL_CHARS, LAST_CELL_CHARS,
};
use crate::render::{document, json, Format, Versioned};
use crate::text::{clip, escape};

/// An engine's inventory with its leases judged.
pub(crate) type Listed = (Inventory, Leases);

/// The inventory of the engine at `endpoint` in `format`: JSON with its
/// `endpoint`, or human text under `Engine: ADDRESS` (as `plan` prints it).
pub(crate) fn inventory(
    inv: &Inventory,
    leases: &Leases,
    endpoint: &str,
    format: Format,
) -> String {
    match format {
        Format::Json => document(InventoryDoc::One {
            view: InventoryView {
                endpoint: Some(endpoint),
                ..inventory_view(inv, leases)
            },
        }),
        _ => format!(
            "{}{}",
            crate::render::plan_heading(endpoint),
            inventory_human(inv, leases)
        ),
    }
}

#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
struct InventoryBox<'a> {
    #[serde(rename = "box")]
    box_id: Option<&'a str>,
    containers: Vec<InventoryContainer<'a>>,
    volumes: Vec<&'a str>,
    networks: Vec<InventoryNetwork<'a>>,
    /// Swarm services, configs and secrets (absent when there are none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    swarm: Vec<InventorySwarm<'a>>,
    /// The box's volumes that carry a lease label, judged.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    leases: Vec<&'a LeaseNote>,
}

#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
struct InventoryContainer<'a> {
    id: &'a str,
    name: &'a str,
    state: &'a str,
    mounts: Vec<&'a str>,
    networks: Vec<&'a str>,
}

#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
struct InventoryNetwork<'a> {
    id: &'a str,
    name: &'a str,
}

#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
struct InventorySwarm<'a> {
    kind: Kind,
    id: &'a str,
    name: &'a str,
    /// For a service: the names of the networks, configs and secrets its tasks use.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    uses: Vec<&'a str>,
}

#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct InventoryView<'a> {
    engine: &'a str,
    /// The engine's address, as `Engine:` says it in human output.
    #[serde(skip_serializing_if = "Option::is_none")]
    endpoint: Option<&'a str>,
    /// Every label a managed object carries: `ca.sandbox=1` and the scope labels.
    scope: crate::model::Labels,
    boxes: Vec<InventoryBox<'a>>,
    retained: RetainedImages<'a>,
    /// The engine's clock, when leases were judged by it.
    #[serde(rename = "engineClock", skip_serializing_if = "Option::is_none")]
    engine_clock: Option<&'a EngineClock>,
}

/// The images listed, as the plan and the report say them: `retained.images`.
#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
struct RetainedImages<'a> {
    images: Vec<&'a ImageInfo>,
}

/// The inventory grouped by box, borrowed: the JSON form, and what the
/// human form is laid out from.
fn inventory_view<'a>(inv: &'a Inventory, leases: &'a Leases) -> InventoryView<'a> {
    let mut grouped: BTreeMap<Option<Natural>, InventoryBox> = BTreeMap::new();
    let mut objects: Vec<_> = inv.objects.values().collect();
    objects.sort_by(|a, b| {
        (a.kind(), Natural(&a.name), &a.key).cmp(&(b.kind(), Natural(&b.name), &b.key))
    });
    fn name_of<'a>(inv: &'a Inventory, key: &'a ObjectKey) -> &'a str {
        inv.objects
            .get(key)
            .map(|o| o.name.as_str())
            .unwrap_or(key.id.as_str())
    }
    for o in objects {
        let b = grouped
            .entry(o.box_id().map(Natural))
            .or_insert_with(|| InventoryBox {
                box_id: o.box_id(),
                containers: vec![],
                volumes: vec![],
                networks: vec![],
                swarm: vec![],
                leases: vec![],
            });
        match o.kind() {
            Kind::Container => b.containers.push(InventoryContainer {
                id: &o.key.id,
                name: &o.name,
                state: o.state.as_deref().unwrap_or_default(),
                mounts: o
                    .depends_on
                    .iter()
                    .filter(|d| d.kind == Kind::Volume)
                    .map(|d| d.id.as_str())
                    .collect(),
                networks: o
                    .depends_on
                    .iter()
                    .filter(|d| d.kind == Kind::Network)
                    .map(|d| name_of(inv, d))
                    .collect(),
            }),
            Kind::Volume => b.volumes.push(&o.name),
            Kind::Network => b.networks.push(InventoryNetwork {
                id: &o.key.id,
                name: &o.name,
            }),
            kind => b.swarm.push(InventorySwarm {
                kind,
                id: &o.key.id,
                name: &o.name,
                uses: o
                    .depends_on
                    .iter()
                    .filter(|d| d.kind != Kind::Container)
                    .map(|d| name_of(inv, d))
                    .collect(),
            }),
        }
    }
    for note in &leases.notes {
        if let Some(b) = grouped.get_mut(&Some(Natural(note.box_id.as_str()))) {
            b.leases.push(note);
        }
    }
    InventoryView {
        engine: &inv.engine,
        endpoint: None,
        scope: inv.scope.all_labels(),
        boxes: grouped.into_values().collect(),
        retained: RetainedImages {
            images: inv.images.values().collect(),
        },
        engine_clock: leases.clock.as_ref(),
    }
}

/// The inventory grouped by box (objects without a box label first), with
/// container states, then the retained images.
pub(crate) fn inventory_human(inv: &Inventory, leases: &Leases) -> String {
    let view = inventory_view(inv, leases);
    let mut out = format!("Scope: {}\n", escape(&inv.scope.filters().join(", ")));
    for b in &view.boxes {
        out.push_str(&format!(
            "\n{}\n",
            match b.box_id {
                Some("") => format!("box {}", crate::model::box_words("", CELL_CHARS)),
                Some(id) => format!("box {}", clip(id, CELL_CHARS)),
                None => "no box label (leaked)".to_string(),
            }
        ));
        let mut rows: Vec<Vec<String>> = b
            .containers
            .iter()
            .map(|c| {
                let mut uses: Vec<String> = Vec::new();
                if !c.mounts.is_empty() {
                    uses.push(format!("mounts {}", c.mounts.join(", ")));
                }
                if !c.networks.is_empty() {
                    uses.push(format!("on {}", c.networks.join(", ")));
                }
                vec![
                    "container".into(),
                    name_cell(c.name, Some(c.id)),
                    c.state.into(),
                    uses.join("; "),
                ]
            })
            .collect();
        rows.extend(b.volumes.iter().map(|v| {
            let mut row = vec!["volume".into(), v.to_string()];
            if let Some(l) = b.leases.iter().find(|l| l.volume == *v) {
                row.push(String::new());
                row.push(format!("lease (ttl {}): {}", l.ttl, l.state));
            }
            row
        }));
        rows.extend(
            b.networks
                .iter()
                .map(|n| vec!["network".into(), name_cell(n.name, Some(n.id))]),
        );
        rows.extend(b.swarm.iter().map(|o| {
            let mut row = vec![o.kind.to_string(), name_cell(o.name, Some(o.id))];
            if !o.uses.is_empty() {
                row.push(String::new());
                row.push(format!("uses {}", o.uses.join(", ")));
            }
            row
        }));
        out.push_str(&table(rows, "  "));
    }
    if !view.retained.images.is_empty() {
        out.push_str("\nImages (retained, never removed):\n");
        out.push_str(&image_table(view.retained.images.iter().copied()));
    }
    out.push_str(&format!(
        "\n{} managed; {} retained.\n",
        kind_counts(|k| inv.of_kind(k).count()),
        plural(inv.images.len(), "image")
    ));
    out
}

/// The inventory's JSON document (`inventory.schema.json`): one engine's,
/// or a fleet's (a state file with `[[engine]]`), engine by engine.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(untagged)]
#[schemars(deny_unknown_fields)]
pub(crate) enum InventoryDoc<'a> {
    /// One engine's inventory.
    One {
        #[serde(flatten)]
        view: InventoryView<'a>,
    },
    /// A fleet's: each engine's inventory, or why it could not be listed.
    Fleet { engines: Vec<FleetPart<'a>> },
}

/// One engine's part of a fleet's inventory.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(untagged)]
#[schemars(deny_unknown_fields)]
pub(crate) enum FleetPart<'a> {
    Listed(InventoryView<'a>),
    /// The engine could not be listed.
    Failed {
        engine: &'a str,
        endpoint: &'a str,
        error: &'a str,
    },
}

/// The inventory as JSON (without the engine's address).
#[cfg(test)]
pub(crate) fn inventory_json(inv: &Inventory, leases: &Leases) -> String {
    document(InventoryDoc::One {
        view: inventory_view(inv, leases),
    })
}

/// A fleet's inventories, each under its engine's heading with its address
/// (JSON: a list, each with its `endpoint`): `parts` are each engine's name,
/// address, and inventory or why it could not be listed.
pub(crate) fn fleet_inventory(
    parts: &[(String, String, Result<Listed, String>)],
    format: Format,
) -> String {
    if format == Format::Json {
        let engines = parts
            .iter()
            .map(|(engine, endpoint, r)| match r {
                Ok((inv, leases)) => FleetPart::Listed(InventoryView {
                    endpoint: Some(endpoint),
                    ..inventory_view(inv, leases)
                }),
                Err(error) => FleetPart::Failed {
                    engine,
                    endpoint,
                    error,
                },
            })
            .collect();
        // Through a `Value`, whose keys are sorted at every depth: a fleet's
        // inventory has always been laid out so.
        let doc = Versioned::new(InventoryDoc::Fleet { engines });
        return json(&serde_json::to_value(doc).expect("plain data always serializes"));
    }
    let mut out = String::new();
    for (engine, endpoint, r) in parts {
        let _ = writeln!(out, "Engine {}: {endpoint}", escape(engine));
        match r {
            Ok((inv, leases)) => {
                out.push_str(&indented(&inventory_human(inv, leases)));
            }
            Err(e) => {
                let _ = writeln!(out, "  FAILED: {}", clip(e, LAST_CELL_CHARS));
            }
        }
        out.push('\n');
    }
    out
}

/// The one note for a swarm worker whose Swarm kinds are in scope: they
/// could not be listed (each a failed listing, said apart), and what to do.
/// A worker whose file puts them out of scope (`swarm = false`), and an
/// engine in no swarm (most engines, which have none to list), get no note,
/// so a plain engine's output stays as it was.
pub(crate) fn swarm_note(inv: &Inventory) -> Option<String> {
    if !inv.swarm_skipped.as_ref()?.is_swarm_worker() || !inv.scope.lists_swarm(&inv.engine) {
        return None;
    }
    Some(format!(
        "note: engine {} is a swarm worker: Swarm services, configs and secrets cannot be listed there (only a manager lists them); run against a manager node, or, when a manager's entry manages them, set swarm = false in this engine's [[engine]] table\n",
        escape(&inv.engine)
    ))
}

/// The warning for an engine that returned objects its label filter should
/// have kept out (they were ignored), or `None`.
pub(crate) fn rejected_warning(inv: &Inventory) -> Option<String> {
    if inv.rejected.is_empty() {
        return None;
    }
    Some(format!(
        "warning: engine {} returned {} that {} not carry the labels it was asked to filter by ({}); {} ignored. The engine does not apply label filters as Docker does: only sandboxctl's own label check kept them out\n",
        escape(&inv.engine),
        plural(inv.rejected.len(), "object"),
        if inv.rejected.len() == 1 { "does" } else { "do" },
        escape(&inv.scope.to_string()),
        if inv.rejected.len() == 1 { "it was" } else { "they were" },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Labels, Object, Scope};
    use crate::render::fixtures::{EVIL_BOX, EVIL_NAME};

    fn labels(box_id: Option<&str>) -> Labels {
        let mut l: Labels = [("ca.sandbox".to_string(), "1".to_string())].into();
        if let Some(b) = box_id {
            l.insert("ca.sandbox.id".into(), b.into());
        }
        l
    }

    fn small() -> Inventory {
        let mut c = Object::new("default", Kind::Container, "c0ffee0000010000", "sbx-a");
        c.labels = labels(Some("a"));
        c.state = Some("running".into());
        c.depends_on = vec![
            ObjectKey::new("default", Kind::Volume, "data-a"),
            ObjectKey::new("default", Kind::Network, "5eed000000010000"),
        ];
        let mut v = Object::new("default", Kind::Volume, "data-a", "data-a");
        v.labels = labels(Some("a"));
        let mut n = Object::new("default", Kind::Network, "5eed000000010000", "net-a");
        n.labels = labels(Some("a"));
        let mut leak = Object::new("default", Kind::Volume, "leak", "leak");
        leak.labels = labels(None);
        let image = ImageInfo {
            id: "sha256:0123456789abcdef".into(),
            tags: vec!["ca-sbx:repo-1".into()],
        };
        Inventory::from_listings(
            "default",
            Scope::default(),
            vec![c.clone(), v, n, leak],
            vec![c],
            vec![image],
        )
    }

    #[test]
    fn leases_are_shown_with_when_they_run_out_and_hostile_ttls_escaped() {
        let mut inv = small();
        for (name, ttl, created) in [("la", "15m", 1000), ("lb", "9999999h\u{1b}[2J", 1000)] {
            let mut l = Object::new("default", Kind::Volume, name, name);
            l.labels = labels(Some("a"));
            l.labels
                .insert(crate::model::lease::LEASE_TTL_LABEL.into(), ttl.into());
            l.created = Some(created);
            inv.objects.insert(l.key.clone(), l);
        }
        inv.skew_ms = Some(0);
        let leases = Leases::of(&inv, 1100, None);
        let human = inventory_human(&inv, &leases);
        assert!(
            human.contains("lease (ttl 15m): holds until 1970-01-01T00:31:40Z"),
            "{human}"
        );
        assert!(
            human.contains("lease (ttl 9999999h\\u{1b}[2J): not a lease: its ca.sandbox.lease.ttl label is not a duration"),
            "{human}"
        );
        assert!(!human.contains('\u{1b}'), "{human}");
        let v: serde_json::Value = serde_json::from_str(&inventory_json(&inv, &leases)).unwrap();
        assert_eq!(v["boxes"][1]["leases"][0]["state"], "live");
        assert_eq!(v["boxes"][1]["leases"][1]["ttl"], "9999999h\u{1b}[2J");
        assert_eq!(v["engineClock"]["skewSeconds"], 0);
    }

    #[test]
    fn grouped_by_box_with_what_containers_use() {
        insta::assert_snapshot!(inventory_human(&small(), &Leases::default()), @r"
        Scope: ca.sandbox=1

        no box label (leaked)
          volume  leak

        box a
          container  sbx-a (c0ffee000001)  running  mounts data-a; on net-a
          volume     data-a
          network    net-a (5eed00000001)

        Images (retained, never removed):
          image  ca-sbx:repo-1  0123456789ab

        1 container, 2 volumes and 1 network managed; 1 image retained.
        ");
        let v: serde_json::Value =
            serde_json::from_str(&inventory_json(&small(), &Leases::default())).unwrap();
        assert_eq!(v["boxes"][1]["containers"][0]["networks"][0], "net-a");
        assert_eq!(v["boxes"][0]["box"], serde_json::Value::Null);
    }

    #[test]
    fn hostile_text_is_escaped_in_human_output_and_exact_in_json() {
        let mut c = Object::new("default", Kind::Container, "c0ffee0000010000", EVIL_NAME);
        c.labels = labels(Some(EVIL_BOX));
        c.state = Some("exited".into());
        let inv = Inventory::from_listings(
            "default",
            Scope::default(),
            vec![c.clone()],
            vec![c],
            vec![],
        );
        let human = inventory_human(&inv, &Leases::default());
        insta::assert_snapshot!(human, @r"
        Scope: ca.sandbox=1

        box b\u{1b}]0;t\u{7}\nFORGED
          container  evil\u{1b}[2J\n\u{202e}x (c0ffee000001)  exited

        1 container, 0 volumes and 0 networks managed; 0 images retained.
        ");
        assert!(!human.contains('\u{1b}') && !human.contains('\u{202e}'));
        let v: serde_json::Value =
            serde_json::from_str(&inventory_json(&inv, &Leases::default())).unwrap();
        assert_eq!(v["boxes"][0]["box"], EVIL_BOX);
        assert_eq!(v["boxes"][0]["containers"][0]["name"], EVIL_NAME);
    }

    #[test]
    fn fleet_inventories_and_the_rejected_warning() {
        let parts = vec![
            (
                "default".to_string(),
                "unix:///var/run/docker.sock".to_string(),
                Ok((small(), Leases::default())),
            ),
            (
                "ci\u{1b}".to_string(),
                "ssh://ci".to_string(),
                Err("cannot reach\nit".to_string()),
            ),
        ];
        let human = fleet_inventory(&parts, Format::Human);
        assert!(
            human.starts_with(
                "Engine default: unix:///var/run/docker.sock\n  Scope: ca.sandbox=1\n"
            ),
            "{human}"
        );
        assert!(
            human.ends_with("Engine ci\\u{1b}: ssh://ci\n  FAILED: cannot reach\\nit\n\n"),
            "{human}"
        );
        let json = fleet_inventory(&parts, Format::Json);
        crate::schema::check("inventory", &json);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["engines"][1]["error"], "cannot reach\nit");
        assert_eq!(v["engines"][1]["endpoint"], "ssh://ci");
        assert_eq!(v["engines"][0]["engine"], "default");
        assert_eq!(v["engines"][0]["endpoint"], "unix:///var/run/docker.sock");
        assert_eq!(
            v["engines"][0]["scope"],
            serde_json::json!({"ca.sandbox": "1"})
        );
        assert_eq!(
            v["engines"][0]["retained"]["images"][0]["tags"][0],
            "ca-sbx:repo-1"
        );

        assert_eq!(rejected_warning(&small()), None);
        let mut inv = small();
        inv.rejected = vec![ObjectKey::new("default", Kind::Volume, "other")];
        insta::assert_snapshot!(rejected_warning(&inv).unwrap(), @"warning: engine default returned 1 object that does not carry the labels it was asked to filter by (ca.sandbox=1); it was ignored. The engine does not apply label filters as Docker does: only sandboxctl's own label check kept them out");
    }
}
