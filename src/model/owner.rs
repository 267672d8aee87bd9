//! Containers an orchestrator owns: a Swarm service's task, a Nomad
//! allocation's task, a Kubernetes pod's container run through cri-dockerd.
//! Such a container removed directly is recreated by its orchestrator (or
//! fights a rolling update), so the planner never removes one on its own.
//!
//! Owns reading the owner from a container's labels (`Owner::of`), the
//! owner's JSON and its words, including what to do. Pure: reads labels only,
//! never an engine; must not decide what is removed (the planner does).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::{cut, short_id, Labels};

/// The label Swarm puts on a task's container: the service's ID.
pub const SWARM_SERVICE_ID: &str = "com.docker.swarm.service.id";
/// The service's name, on a task's container.
const SWARM_SERVICE_NAME: &str = "com.docker.swarm.service.name";
/// The task's ID, on a task's container.
const SWARM_TASK_ID: &str = "com.docker.swarm.task.id";
/// Nomad's allocation ID on the containers of its tasks.
const NOMAD_ALLOC_ID: &str = "com.hashicorp.nomad.alloc_id";
/// Nomad's job name on the containers of its tasks.
const NOMAD_JOB_NAME: &str = "com.hashicorp.nomad.job_name";
/// Kubernetes' pod UID on a pod's containers (cri-dockerd, dockershim).
const K8S_POD_UID: &str = "io.kubernetes.pod.uid";
/// The pod's name.
const K8S_POD_NAME: &str = "io.kubernetes.pod.name";
/// The pod's namespace.
const K8S_POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";

/// The most characters of an owner's name or ID quoted in words.
const QUOTED_CHARS: usize = 64;

/// Which orchestrator owns a container.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
#[schemars(deny_unknown_fields)]
pub enum Orchestrator {
    Swarm,
    Nomad,
    Kubernetes,
}

impl Orchestrator {
    /// `Swarm`, `Nomad`, `Kubernetes`.
    fn as_str(self) -> &'static str {
        match self {
            Orchestrator::Swarm => "Swarm",
            Orchestrator::Nomad => "Nomad",
            Orchestrator::Kubernetes => "Kubernetes",
        }
    }

    /// What owns the container: `service`, `allocation`, `pod`.
    fn owner_word(self) -> &'static str {
        match self {
            Orchestrator::Swarm => "service",
            Orchestrator::Nomad => "allocation",
            Orchestrator::Kubernetes => "pod",
        }
    }
}

/// The orchestrator object that owns a container, as its labels name it.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Owner {
    pub orchestrator: Orchestrator,
    /// The service ID, the allocation ID or the pod UID.
    pub id: String,
    /// The service's name, the Nomad job's name, the pod's name, when labeled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The pod's namespace (Kubernetes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl Owner {
    /// The owner `labels` name, if any. Swarm is read from the service ID
    /// (or, lacking it, the task ID), Nomad from the allocation ID and
    /// Kubernetes from the pod UID; a container carrying several is owned by
    /// the first in that order.
    pub fn of(labels: &Labels) -> Option<Owner> {
        let get = |k: &str| labels.get(k).filter(|v| !v.is_empty()).cloned();
        if let Some(id) = get(SWARM_SERVICE_ID).or_else(|| get(SWARM_TASK_ID)) {
            return Some(Owner {
                orchestrator: Orchestrator::Swarm,
                id,
                name: get(SWARM_SERVICE_NAME),
                namespace: None,
            });
        }
        if let Some(id) = get(NOMAD_ALLOC_ID) {
            return Some(Owner {
                orchestrator: Orchestrator::Nomad,
                id,
                name: get(NOMAD_JOB_NAME),
                namespace: None,
            });
        }
        get(K8S_POD_UID).map(|id| Owner {
            orchestrator: Orchestrator::Kubernetes,
            id,
            name: get(K8S_POD_NAME),
            namespace: get(K8S_POD_NAMESPACE),
        })
    }

    /// The Swarm service this container is a task of, when Swarm owns it
    /// through a service.
    pub fn swarm_service(labels: &Labels) -> Option<&str> {
        labels
            .get(SWARM_SERVICE_ID)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// What to do about a container this owner keeps: remove the owner, or
    /// (Swarm) label it so that sandboxctl removes it with its containers.
    pub fn advice(&self) -> String {
        let name = cut(self.name.as_deref().unwrap_or(&self.id), QUOTED_CHARS).into_owned();
        match self.orchestrator {
            Orchestrator::Swarm => format!(
                "remove the service (docker service rm {name}), or label the service ca.sandbox=1 and the scope labels so that it goes with its tasks"
            ),
            Orchestrator::Nomad => match &self.name {
                Some(_) => format!("stop its job (nomad job stop {name})"),
                None => format!(
                    "stop the allocation's job (nomad alloc status {})",
                    cut(&self.id, QUOTED_CHARS)
                ),
            },
            Orchestrator::Kubernetes => {
                let ns = self
                    .namespace
                    .as_deref()
                    .map(|n| format!(" -n {}", cut(n, QUOTED_CHARS)))
                    .unwrap_or_default();
                format!("delete the pod or its controller (kubectl delete pod{ns} {name})")
            }
        }
    }
}

impl fmt::Display for Owner {
    /// `Swarm service web (3f2a1b4c5d6e)`, `Kubernetes pod default/web (uid)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} ",
            self.orchestrator.as_str(),
            self.orchestrator.owner_word()
        )?;
        if let Some(ns) = &self.namespace {
            write!(f, "{}/", cut(ns, QUOTED_CHARS))?;
        }
        match &self.name {
            Some(name) => write!(
                f,
                "{} ({})",
                cut(name, QUOTED_CHARS),
                short_id(&cut(&self.id, QUOTED_CHARS))
            ),
            None => f.write_str(&cut(&self.id, QUOTED_CHARS)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::labels;

    #[test]
    fn each_orchestrator_is_read_from_its_labels() {
        let swarm = Owner::of(&labels(&[
            (SWARM_SERVICE_ID, "0123456789abcdefghij"),
            (SWARM_SERVICE_NAME, "web"),
            (SWARM_TASK_ID, "t1"),
        ]))
        .unwrap();
        assert_eq!(swarm.orchestrator, Orchestrator::Swarm);
        assert_eq!(swarm.to_string(), "Swarm service web (0123456789ab)");
        let task_only = Owner::of(&labels(&[(SWARM_TASK_ID, "t1")])).unwrap();
        assert_eq!(task_only.id, "t1");
        let nomad = Owner::of(&labels(&[(NOMAD_ALLOC_ID, "a-1"), (NOMAD_JOB_NAME, "j")])).unwrap();
        assert_eq!(nomad.to_string(), "Nomad allocation j (a-1)");
        assert_eq!(nomad.advice(), "stop its job (nomad job stop j)");
        let pod = Owner::of(&labels(&[
            (K8S_POD_UID, "u-1"),
            (K8S_POD_NAME, "p"),
            (K8S_POD_NAMESPACE, "ns"),
        ]))
        .unwrap();
        assert_eq!(pod.to_string(), "Kubernetes pod ns/p (u-1)");
        assert_eq!(
            pod.advice(),
            "delete the pod or its controller (kubectl delete pod -n ns p)"
        );
        assert_eq!(Owner::of(&labels(&[("ca.sandbox", "1")])), None);
        assert_eq!(Owner::of(&labels(&[(SWARM_SERVICE_ID, "")])), None);
    }
}
