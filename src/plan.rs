//! The plan: which managed objects to remove, in what order, and why.
//!
//! Owns `Plan::build`, a pure and synchronous function of a `Goal` and an
//! `Inventory`: the same inputs give the same plan, byte for byte. The plan is
//! a graph (petgraph) whose removal edges run backwards along dependencies: a
//! container goes before every named volume it mounts. Must not do I/O, and
//! has no notion of images beyond listing them as retained.

use std::collections::{BTreeMap, BTreeSet};

use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::Direction;
use serde::{Deserialize, Serialize};

use crate::inventory::{fingerprint, Inventory};
use crate::model::{
    short_id, ContainerInfo, ImageInfo, Labels, Scope, VolumeInfo, SANDBOX_LABEL, SANDBOX_VALUE,
};

/// The version of the plan's JSON form; a saved plan of another version is refused.
pub const PLAN_VERSION: u32 = 1;

/// What the user asked for, fully resolved from the state file and the command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "camelCase")]
pub enum Goal {
    /// Converge on the desired state (`plan`, `apply`, `destroy --prune`): every
    /// managed object that is not part of a declared box or kept is removed.
    #[serde(rename_all = "camelCase")]
    Reconcile {
        boxes: BTreeSet<String>,
        keep_volumes: BTreeSet<String>,
    },
    /// Remove exactly these boxes (`destroy ID...`): their containers, and their
    /// volumes unless `keep_volume`. Volumes in `keep_volumes` stay regardless.
    #[serde(rename_all = "camelCase")]
    Destroy {
        ids: BTreeSet<String>,
        keep_volume: bool,
        keep_volumes: BTreeSet<String>,
    },
}

/// One object the plan touches or mentions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Object {
    Container {
        id: String,
        name: String,
        #[serde(rename = "box")]
        box_id: Option<String>,
        state: String,
    },
    Volume {
        name: String,
        #[serde(rename = "box")]
        box_id: Option<String>,
        #[serde(rename = "createdAt", default, skip_serializing_if = "Option::is_none")]
        created_at: Option<String>,
    },
}

impl Object {
    fn container(c: &ContainerInfo) -> Object {
        Object::Container {
            id: c.id.clone(),
            name: c.name.clone(),
            box_id: c.box_id().map(str::to_string),
            state: c.state.clone(),
        }
    }

    fn volume(v: &VolumeInfo) -> Object {
        Object::Volume {
            name: v.name.clone(),
            box_id: v.box_id().map(str::to_string),
            created_at: v.created_at.clone(),
        }
    }

    /// `container` or `volume`.
    pub fn kind(&self) -> &'static str {
        match self {
            Object::Container { .. } => "container",
            Object::Volume { .. } => "volume",
        }
    }

    /// The container's name or the volume's name.
    pub fn name(&self) -> &str {
        match self {
            Object::Container { name, .. } | Object::Volume { name, .. } => name,
        }
    }

    /// The container's ID; volumes have none.
    pub fn id(&self) -> Option<&str> {
        match self {
            Object::Container { id, .. } => Some(id),
            Object::Volume { .. } => None,
        }
    }

    /// The box the object is labeled with, if any.
    pub fn box_id(&self) -> Option<&str> {
        match self {
            Object::Container { box_id, .. } | Object::Volume { box_id, .. } => box_id.as_deref(),
        }
    }

    /// A stable key naming the object: `container/<id>` or `volume/<name>`.
    pub fn key(&self) -> String {
        match self {
            Object::Container { id, .. } => format!("container/{id}"),
            Object::Volume { name, .. } => format!("volume/{name}"),
        }
    }

    /// How a person names it: `container web (3f2a1b4c5d6e)` or `volume data`.
    pub fn label(&self) -> String {
        match self {
            Object::Container { id, name, .. } => format!("container {name} ({})", short_id(id)),
            Object::Volume { name, .. } => format!("volume {name}"),
        }
    }
}

/// One removal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// 1-based position in the plan's order.
    pub step: usize,
    #[serde(flatten)]
    pub object: Object,
    /// Why the object goes.
    pub why: String,
    /// Steps that must have succeeded before this one may start.
    pub waits_for: Vec<usize>,
}

/// An object that is kept or blocked, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Noted {
    #[serde(flatten)]
    pub object: Object,
    pub why: String,
}

/// What the plan leaves in place on purpose.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kept {
    pub containers: Vec<Noted>,
    pub volumes: Vec<Noted>,
}

/// The images the plan retains: every `ca-sbx:*` image.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retained {
    pub images: Vec<ImageInfo>,
}

/// The plan. Serializes to the JSON that `plan --format json` prints and
/// `plan --out` saves; `apply FILE` reads it back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub version: u32,
    /// Every label a managed object carries: `ca.sandbox=1` and the scope labels.
    pub scope: Labels,
    pub goal: Goal,
    /// Removals in a dependency-respecting order.
    pub steps: Vec<Step>,
    /// Objects that should go but must not be forced (a volume an unmanaged
    /// container mounts). Never attempted; a run that has any does not converge.
    pub blocked: Vec<Noted>,
    pub kept: Kept,
    pub retained: Retained,
    /// The fingerprint of `basis`.
    pub fingerprint: String,
    /// What the plan was built from: one digest per managed object (see `Inventory::basis`).
    pub basis: BTreeMap<String, String>,
}

/// What the goal says of one object by its labels alone, with the reason.
/// (Whether a volume is blocked depends on who mounts it, not on the goal.)
enum Verdict {
    Remove(String),
    Keep(String),
}

impl Goal {
    /// The verdict for a container, or for a volume by its box label alone.
    fn box_verdict(&self, box_id: Option<&str>) -> Verdict {
        match (self, box_id) {
            (Goal::Reconcile { .. }, None) => {
                Verdict::Remove("leaked: no ca.sandbox.id label".into())
            }
            (Goal::Reconcile { boxes, .. }, Some(b)) if boxes.contains(b) => {
                Verdict::Keep("declared box".into())
            }
            (Goal::Reconcile { .. }, Some(b)) => {
                Verdict::Remove(format!("leaked: box {b} is not declared"))
            }
            (Goal::Destroy { ids, .. }, Some(b)) if ids.contains(b) => {
                Verdict::Remove(format!("destroy {b} requested"))
            }
            (Goal::Destroy { .. }, _) => Verdict::Keep("not named by destroy".into()),
        }
    }

    /// The verdict for a volume by its own name and labels, before looking at who mounts it.
    fn volume_verdict(&self, v: &VolumeInfo) -> Verdict {
        match self {
            Goal::Reconcile { keep_volumes, .. } | Goal::Destroy { keep_volumes, .. }
                if keep_volumes.contains(&v.name) =>
            {
                Verdict::Keep("listed in volumes.keep".into())
            }
            Goal::Destroy {
                ids,
                keep_volume: true,
                ..
            } if v.box_id().is_some_and(|b| ids.contains(b)) => {
                Verdict::Keep("--keep-volume".into())
            }
            _ => self.box_verdict(v.box_id()),
        }
    }
}

impl Plan {
    /// Builds the plan. Pure: no I/O, no clock, no randomness; orders are sorted.
    pub fn build(goal: &Goal, inv: &Inventory) -> Plan {
        // Containers in a readable order: by box, then name, then ID.
        let mut containers: Vec<&ContainerInfo> = inv.containers.values().collect();
        // Cached keys: `box_id()` is a label lookup, too slow to repeat in every comparison.
        containers.sort_by_cached_key(|&c| (c.box_id(), c.name.as_str(), c.id.as_str()));

        let mut graph: DiGraph<Object, ()> = DiGraph::with_capacity(
            inv.containers.len() + inv.volumes.len(),
            inv.containers.len(),
        );
        // Why each node goes, by node index.
        let mut why: Vec<String> = Vec::new();
        let mut kept = Kept::default();
        let mut blocked = Vec::new();
        // Who mounts each volume and stays: kept containers, by volume name.
        let mut kept_users: BTreeMap<&str, Vec<&ContainerInfo>> = BTreeMap::new();
        // Removed containers, by the volume names they mount.
        let mut removed_users: BTreeMap<&str, Vec<NodeIndex>> = BTreeMap::new();

        for c in &containers {
            match goal.box_verdict(c.box_id()) {
                Verdict::Remove(reason) => {
                    let node = graph.add_node(Object::container(c));
                    why.push(reason);
                    for m in &c.mounts {
                        removed_users.entry(m.as_str()).or_default().push(node);
                    }
                }
                Verdict::Keep(reason) => {
                    kept.containers.push(Noted {
                        object: Object::container(c),
                        why: reason,
                    });
                    for m in &c.mounts {
                        kept_users.entry(m.as_str()).or_default().push(c);
                    }
                }
            }
        }

        for v in inv.volumes.values() {
            let reason = match goal.volume_verdict(v) {
                Verdict::Keep(why) => {
                    kept.volumes.push(Noted {
                        object: Object::volume(v),
                        why,
                    });
                    continue;
                }
                Verdict::Remove(reason) => reason,
            };
            if let Some(users) = kept_users.get(v.name.as_str()) {
                let names: Vec<String> = users.iter().map(|c| kept_user(c)).collect();
                kept.volumes.push(Noted {
                    object: Object::volume(v),
                    why: format!("mounted by kept {}", names.join(", ")),
                });
            } else if let Some(users) = inv.foreign_users.get(&v.name) {
                let names: Vec<String> = users
                    .iter()
                    .map(|u| format!("{} ({})", u.name, short_id(&u.id)))
                    .collect();
                blocked.push(Noted {
                    object: Object::volume(v),
                    why: format!(
                        "mounted by unmanaged container {}; never forced: remove that container or list the volume in volumes.keep",
                        names.join(", ")
                    ),
                });
            } else {
                let node = graph.add_node(Object::volume(v));
                why.push(reason);
                for &user in removed_users.get(v.name.as_str()).into_iter().flatten() {
                    // Removal edge: the container must be gone before its volume.
                    graph.add_edge(user, node, ());
                }
            }
        }

        let order = stable_toposort(&graph);
        let mut position = vec![0; order.len()];
        for (i, n) in order.iter().enumerate() {
            position[n.index()] = i + 1;
        }
        let waits_for: Vec<Vec<usize>> = order
            .iter()
            .map(|&n| {
                let mut w: Vec<usize> = graph
                    .neighbors_directed(n, Direction::Incoming)
                    .map(|d| position[d.index()])
                    .collect();
                w.sort_unstable();
                w
            })
            .collect();
        // Move the objects out of the graph rather than cloning each one.
        let (nodes, _) = graph.into_nodes_edges();
        let mut objects: Vec<Option<Object>> = nodes.into_iter().map(|n| Some(n.weight)).collect();
        let steps = order
            .iter()
            .zip(waits_for)
            .map(|(&n, waits_for)| Step {
                step: position[n.index()],
                object: objects[n.index()].take().expect("each node once"),
                why: std::mem::take(&mut why[n.index()]),
                waits_for,
            })
            .collect();

        let mut scope = inv.scope.labels.clone();
        scope.insert(SANDBOX_LABEL.to_string(), SANDBOX_VALUE.to_string());
        let basis = inv.basis();
        Plan {
            version: PLAN_VERSION,
            scope,
            goal: goal.clone(),
            steps,
            blocked,
            kept,
            retained: Retained {
                images: inv.images.values().cloned().collect(),
            },
            fingerprint: fingerprint(&basis),
            basis,
        }
    }

    /// The scope the plan was made for (its labels without `ca.sandbox` itself).
    pub fn scope(&self) -> Scope {
        Scope::new(
            self.scope
                .iter()
                .filter(|(k, _)| k.as_str() != SANDBOX_LABEL)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )
    }

    /// True when there is nothing to remove and nothing blocked.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty() && self.blocked.is_empty()
    }

    /// The removal graph: one node per step (weight = index into `steps`), an
    /// edge from each step to every step that waits for it.
    pub fn graph(&self) -> DiGraph<usize, ()> {
        let mut g = DiGraph::with_capacity(self.steps.len(), self.steps.len());
        let nodes: Vec<NodeIndex> = (0..self.steps.len()).map(|i| g.add_node(i)).collect();
        for (i, s) in self.steps.iter().enumerate() {
            for &w in &s.waits_for {
                g.add_edge(nodes[w - 1], nodes[i], ());
            }
        }
        g
    }

    /// Counts for the summary line: (containers, volumes) to remove.
    pub fn removal_counts(&self) -> (usize, usize) {
        let containers = self
            .steps
            .iter()
            .filter(|s| matches!(s.object, Object::Container { .. }))
            .count();
        (containers, self.steps.len() - containers)
    }

    /// Checks a plan read from a file: version, step numbering, and that every
    /// edge points backwards (so it is acyclic and containers precede volumes).
    pub fn validate(&self) -> Result<(), String> {
        if self.version != PLAN_VERSION {
            return Err(format!(
                "plan version {} is not supported (expected {PLAN_VERSION})",
                self.version
            ));
        }
        if self.scope.get(SANDBOX_LABEL).map(String::as_str) != Some(SANDBOX_VALUE) {
            return Err(format!("plan scope lacks {SANDBOX_LABEL}={SANDBOX_VALUE}"));
        }
        for (i, s) in self.steps.iter().enumerate() {
            if s.step != i + 1 {
                return Err(format!("step {} is numbered {}", i + 1, s.step));
            }
            if let Some(&w) = s.waits_for.iter().find(|&&w| w == 0 || w >= s.step) {
                return Err(format!(
                    "step {} waits for step {w}, which is not before it",
                    s.step
                ));
            }
        }
        Ok(())
    }
}

fn kept_user(c: &ContainerInfo) -> String {
    match c.box_id() {
        Some(b) => format!("container {} (box {b})", c.name),
        None => format!("container {}", c.name),
    }
}

/// Kahn's algorithm, always taking the lowest-numbered ready node, so the order
/// is a deterministic function of insertion order (containers first, each sorted).
fn stable_toposort<N>(graph: &DiGraph<N, ()>) -> Vec<NodeIndex> {
    let mut indegree: Vec<usize> = graph
        .node_indices()
        .map(|n| graph.neighbors_directed(n, Direction::Incoming).count())
        .collect();
    let mut ready: BTreeSet<NodeIndex> = graph
        .node_indices()
        .filter(|n| indegree[n.index()] == 0)
        .collect();
    let mut order = Vec::with_capacity(graph.node_count());
    while let Some(n) = ready.pop_first() {
        order.push(n);
        for d in graph.neighbors_directed(n, Direction::Outgoing) {
            indegree[d.index()] -= 1;
            if indegree[d.index()] == 0 {
                ready.insert(d);
            }
        }
    }
    // Edges only run container -> volume, so the graph is acyclic by construction.
    debug_assert_eq!(order.len(), graph.node_count(), "removal graph has a cycle");
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::ForeignUser;
    use crate::model::BOX_ID_LABEL;

    fn labels(box_id: Option<&str>) -> Labels {
        let mut l = Labels::new();
        l.insert(SANDBOX_LABEL.into(), SANDBOX_VALUE.into());
        if let Some(b) = box_id {
            l.insert(BOX_ID_LABEL.into(), b.into());
        }
        l
    }

    fn container(id: &str, box_id: Option<&str>, mounts: &[&str]) -> ContainerInfo {
        ContainerInfo {
            id: format!("{id}0000000000000000"),
            name: format!("sbx-{id}"),
            state: "running".into(),
            labels: labels(box_id),
            mounts: mounts.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn volume(name: &str, box_id: Option<&str>) -> VolumeInfo {
        VolumeInfo {
            name: name.into(),
            labels: labels(box_id),
            created_at: None,
        }
    }

    fn inventory(containers: Vec<ContainerInfo>, volumes: Vec<VolumeInfo>) -> Inventory {
        Inventory::from_listings(
            Scope::default(),
            containers.clone(),
            containers,
            volumes,
            vec![],
        )
    }

    fn reconcile(boxes: &[&str], keep: &[&str]) -> Goal {
        Goal::Reconcile {
            boxes: boxes.iter().map(|s| s.to_string()).collect(),
            keep_volumes: keep.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn names(steps: &[Step]) -> Vec<String> {
        steps.iter().map(|s| s.object.name().to_string()).collect()
    }

    #[test]
    fn empty_inventory_gives_empty_plan() {
        let plan = Plan::build(&reconcile(&[], &[]), &inventory(vec![], vec![]));
        assert!(plan.is_empty());
        assert_eq!(plan.scope, labels(None));
    }

    #[test]
    fn volume_waits_for_every_container_that_mounts_it() {
        let inv = inventory(
            vec![
                container("a", Some("a"), &["shared"]),
                container("b", Some("b"), &["shared"]),
            ],
            vec![volume("shared", Some("a"))],
        );
        let plan = Plan::build(&reconcile(&[], &[]), &inv);
        assert_eq!(names(&plan.steps), vec!["sbx-a", "sbx-b", "shared"]);
        assert_eq!(plan.steps[2].waits_for, vec![1, 2]);
        assert!(plan.steps[0].waits_for.is_empty());
        plan.validate().unwrap();
    }

    #[test]
    fn declared_box_and_kept_volume_stay() {
        let inv = inventory(
            vec![
                container("a", Some("a"), &["va"]),
                container("b", Some("b"), &["vb"]),
            ],
            vec![
                volume("va", Some("a")),
                volume("vb", Some("b")),
                volume("notes", None),
            ],
        );
        let plan = Plan::build(&reconcile(&["a"], &["notes"]), &inv);
        assert_eq!(names(&plan.steps), vec!["sbx-b", "vb"]);
        let kept: Vec<&str> = plan.kept.volumes.iter().map(|n| n.object.name()).collect();
        assert_eq!(kept, vec!["notes", "va"]);
    }

    #[test]
    fn volume_mounted_by_a_kept_container_is_kept() {
        let inv = inventory(
            vec![container("a", Some("a"), &["vb"])],
            vec![volume("vb", Some("b"))],
        );
        let plan = Plan::build(&reconcile(&["a"], &[]), &inv);
        assert!(plan.steps.is_empty());
        assert!(plan.kept.volumes[0]
            .why
            .starts_with("mounted by kept container sbx-a"));
    }

    #[test]
    fn volume_mounted_by_unmanaged_container_is_blocked() {
        let mut inv = inventory(vec![], vec![volume("v", Some("x"))]);
        inv.foreign_users.insert(
            "v".into(),
            vec![ForeignUser {
                id: "f00000000000000".into(),
                name: "web".into(),
            }],
        );
        let plan = Plan::build(&reconcile(&[], &[]), &inv);
        assert!(plan.steps.is_empty());
        assert_eq!(plan.blocked.len(), 1);
        assert!(plan.blocked[0].why.contains("web (f00000000000)"));
        assert!(!plan.is_empty());
    }

    #[test]
    fn destroy_takes_only_named_boxes_and_honours_keep_volume() {
        let inv = inventory(
            vec![
                container("a", Some("a"), &["va"]),
                container("b", Some("b"), &["vb"]),
            ],
            vec![
                volume("va", Some("a")),
                volume("vb", Some("b")),
                volume("leak", None),
            ],
        );
        let ids: BTreeSet<String> = ["a".to_string()].into();
        let plan = Plan::build(
            &Goal::Destroy {
                ids: ids.clone(),
                keep_volume: false,
                keep_volumes: BTreeSet::new(),
            },
            &inv,
        );
        assert_eq!(names(&plan.steps), vec!["sbx-a", "va"]);
        let plan = Plan::build(
            &Goal::Destroy {
                ids,
                keep_volume: true,
                keep_volumes: BTreeSet::new(),
            },
            &inv,
        );
        assert_eq!(names(&plan.steps), vec!["sbx-a"]);
    }

    #[test]
    fn same_inputs_same_bytes() {
        let inv = inventory(
            vec![
                container("z", None, &["v1"]),
                container("a", Some("q"), &["v1", "v2"]),
            ],
            vec![volume("v2", None), volume("v1", Some("q"))],
        );
        let goal = reconcile(&[], &[]);
        let a = serde_json::to_string(&Plan::build(&goal, &inv)).unwrap();
        let b = serde_json::to_string(&Plan::build(&goal, &inv)).unwrap();
        assert_eq!(a, b);
        let round: Plan = serde_json::from_str(&a).unwrap();
        assert_eq!(serde_json::to_string(&round).unwrap(), a);
    }
}
