//! Explain: what the plan does with one object and why, as data.
//!
//! Owns finding the objects a user names (`box:ID`, a container ID or
//! prefix, a container, volume or network name, managed or not) and
//! gathering, for each, its labels, whether it is managed (and which label
//! rule excludes it when not), the plan's verdict with its typed reason, what
//! it waits for, what waits for it, and what holds it. Pure; must not list an
//! engine or print (`render/explain.rs` makes the words).

use serde::Serialize;

use crate::model::{natural_cmp, Exclusion, Kind, Labels, Natural, Object, Reason, Scope};
use crate::plan::{Entry, Plan};

/// What the user named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Query {
    /// `box:ID`: every managed object of that box.
    Box(String),
    /// A container ID or unique prefix, or a container, volume or network
    /// name; `container:`, `volume:` or `network:` before it narrows to that kind.
    Name(Option<Kind>, String),
}

impl Query {
    pub(crate) fn parse(text: &str) -> Query {
        if let Some(id) = text.strip_prefix("box:") {
            return Query::Box(id.to_string());
        }
        for kind in Kind::ALL {
            if let Some(name) = text.strip_prefix(&format!("{kind}:")) {
                return Query::Name(Some(kind), name.to_string());
            }
        }
        Query::Name(None, text.to_string())
    }
}

/// What the plan does with an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Verdict {
    Remove,
    Keep,
    Blocked,
    /// Not managed: the plan never touches it.
    Unmanaged,
}

/// A step the object waits for or that waits for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct Link {
    pub(crate) step: usize,
    #[serde(flatten)]
    pub(crate) object: Entry,
}

/// The explanation of one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Explanation {
    #[serde(flatten)]
    pub(crate) object: Entry,
    pub(crate) labels: Labels,
    pub(crate) managed: bool,
    /// Why it is not managed (the first label rule it fails).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) excluded_by: Option<Exclusion>,
    pub(crate) verdict: Verdict,
    /// The step that removes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) step: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<Reason>,
    /// Where the state file declares its box or keeps it (`path:line`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) declared_at: Option<String>,
    /// For a container an orchestrator owns (a Swarm service's task, a Nomad
    /// allocation, a Kubernetes pod): that owner, managed or not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) owner: Option<crate::model::Owner>,
    pub(crate) waits_for: Vec<Link>,
    pub(crate) waited_for_by: Vec<Link>,
    /// The leases of its box (managed objects of a box only), as the plan judged them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) leases: Vec<crate::plan::lease::LeaseNote>,
}

/// Why nothing, or too much, was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ExplainError {
    #[error(
        "no container, volume, network, service, config or secret matches {query:?}{}",
        candidates_text(candidates)
    )]
    NoMatch {
        query: String,
        candidates: Vec<String>,
    },
    #[error("{query:?} matches {} objects: {}; name a container or network by its ID (a unique prefix will do), or use box:ID to explain every object of a box", candidates.len(), candidates.join(", "))]
    Ambiguous {
        query: String,
        candidates: Vec<String>,
    },
}

fn candidates_text(candidates: &[String]) -> String {
    if candidates.is_empty() {
        "; `sandboxctl inventory` lists the managed objects".to_string()
    } else {
        format!("; similar: {}", candidates.join(", "))
    }
}

fn describe(o: &Object) -> String {
    let id = if o.kind().has_id() {
        format!(" ({})", crate::model::short_id(&o.key.id))
    } else {
        String::new()
    };
    format!("{} {}{id}", o.kind(), o.name)
}

/// Finds what `query` names among `objects` (managed and unmanaged, every kind).
/// `box:ID` may match several objects; a name or ID must match exactly one
/// (an exact name or full ID beats a prefix).
pub(crate) fn find<'a>(
    query: &Query,
    objects: &'a [Object],
) -> Result<Vec<&'a Object>, ExplainError> {
    match query {
        Query::Box(id) => {
            let found: Vec<&Object> = objects.iter().filter(|o| o.box_id() == Some(id)).collect();
            if found.is_empty() {
                let mut near: Vec<String> = objects
                    .iter()
                    .filter_map(|o| o.box_id())
                    .filter(|b| b.contains(id.as_str()))
                    .map(|b| format!("box:{b}"))
                    .collect();
                near.sort_by(|a, b| natural_cmp(a, b));
                near.dedup();
                near.truncate(10);
                return Err(ExplainError::NoMatch {
                    query: format!("box:{id}"),
                    candidates: near,
                });
            }
            Ok(found)
        }
        Query::Name(kind, name) => {
            let of_kind = |o: &&Object| kind.is_none_or(|k| o.kind() == k);
            let exact: Vec<&Object> = objects
                .iter()
                .filter(of_kind)
                .filter(|o| o.name == *name || o.key.id == *name)
                .collect();
            let found = if exact.is_empty() {
                objects
                    .iter()
                    .filter(of_kind)
                    .filter(|o| o.kind().has_id() && o.key.id.starts_with(name.as_str()))
                    .collect()
            } else {
                exact
            };
            match found.len() {
                1 => Ok(found),
                0 => {
                    let mut near: Vec<String> = objects
                        .iter()
                        .filter(|o| o.name.contains(name.as_str()))
                        .map(describe)
                        .collect();
                    near.sort_by(|a, b| natural_cmp(a, b));
                    near.truncate(10);
                    Err(ExplainError::NoMatch {
                        query: name.clone(),
                        candidates: near,
                    })
                }
                _ => {
                    let mut all: Vec<String> = found.iter().map(|o| describe(o)).collect();
                    all.sort_by(|a, b| natural_cmp(a, b));
                    Err(ExplainError::Ambiguous {
                        query: name.clone(),
                        candidates: all,
                    })
                }
            }
        }
    }
}

/// Explains `object` against `plan` (made with `scope`); `state` names the
/// state file for `declared_at`.
pub(crate) fn explain(
    object: &Object,
    plan: &Plan,
    scope: &Scope,
    state: Option<&str>,
) -> Explanation {
    let key = &object.key;
    let excluded_by = scope.exclusion(&object.labels);
    let managed = excluded_by.is_none();
    let mut e = Explanation {
        object: Entry::of(object),
        labels: object.labels.clone(),
        managed,
        excluded_by,
        verdict: Verdict::Unmanaged,
        step: None,
        reason: None,
        declared_at: None,
        owner: (object.kind() == Kind::Container)
            .then(|| crate::model::Owner::of(&object.labels))
            .flatten(),
        waits_for: vec![],
        waited_for_by: vec![],
        leases: vec![],
    };
    if !managed {
        return e;
    }
    if let Some(b) = object.box_id() {
        e.leases = plan
            .leases
            .iter()
            .filter(|l| l.box_id == b)
            .cloned()
            .collect();
    }
    let link = |n: usize| Link {
        step: n,
        object: plan.steps[n - 1].object.clone(),
    };
    if let Some(step) = plan.steps.iter().find(|s| s.object.key() == *key) {
        e.verdict = Verdict::Remove;
        e.step = Some(step.step);
        e.reason = Some(step.why.clone());
        e.waits_for = step.waits_for.iter().map(|&n| link(n)).collect();
        e.waited_for_by = plan
            .steps
            .iter()
            .filter(|s| s.waits_for.contains(&step.step))
            .map(|s| link(s.step))
            .collect();
    } else if let Some(n) = plan.blocked.iter().find(|n| n.object.key() == *key) {
        e.verdict = Verdict::Blocked;
        e.reason = Some(n.why.clone());
    } else if let Some(n) = plan.kept.all().find(|n| n.object.key() == *key) {
        e.verdict = Verdict::Keep;
        e.reason = Some(n.why.clone());
    }
    let line = match &e.reason {
        Some(Reason::DeclaredBox { line, .. }) | Some(Reason::KeptByFile { line }) => *line,
        _ => None,
    };
    e.declared_at = match (state, line) {
        (Some(path), Some(line)) => Some(format!("{path}:{line}")),
        _ => None,
    };
    e
}

/// Every object an explain run may name: the managed inventory plus the
/// unmanaged objects listed for the purpose, deduplicated, in key order.
pub(crate) fn universe(
    managed: impl IntoIterator<Item = Object>,
    others: Vec<Object>,
) -> Vec<Object> {
    let mut all: std::collections::BTreeMap<crate::model::ObjectKey, Object> =
        managed.into_iter().map(|o| (o.key.clone(), o)).collect();
    for o in others {
        all.entry(o.key.clone()).or_insert(o);
    }
    let mut list: Vec<Object> = all.into_values().collect();
    list.sort_by(|a, b| {
        (a.kind(), Natural(&a.name), &a.key).cmp(&(b.kind(), Natural(&b.name), &b.key))
    });
    list
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::DEFAULT_ENGINE;

    fn obj(kind: Kind, id: &str, name: &str) -> Object {
        Object::new(DEFAULT_ENGINE, kind, id, name)
    }

    #[test]
    fn finds_by_name_id_prefix_and_box() {
        let mut a = obj(Kind::Container, "abc123", "web");
        a.labels.insert("ca.sandbox.id".into(), "b1".into());
        let objects = vec![
            a,
            obj(Kind::Container, "abd456", "db"),
            obj(Kind::Volume, "web-data", "web-data"),
        ];
        assert_eq!(
            find(&Query::parse("web"), &objects).unwrap()[0].key.id,
            "abc123"
        );
        assert_eq!(find(&Query::parse("abd"), &objects).unwrap()[0].name, "db");
        assert_eq!(find(&Query::parse("box:b1"), &objects).unwrap().len(), 1);
        assert!(matches!(
            find(&Query::parse("ab"), &objects),
            Err(ExplainError::Ambiguous { candidates, .. }) if candidates.len() == 2
        ));
        assert!(matches!(
            find(&Query::parse("we"), &objects),
            Err(ExplainError::NoMatch { candidates, .. }) if candidates.len() == 2
        ));
    }
}
