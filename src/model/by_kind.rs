//! `ByKind<T>`: one value per removable kind (containers, volumes, networks),
//! so that per-kind triples are one type, looked up by `Kind`, iterated in
//! `Kind` order, mapped and merged, instead of three fields written out by hand.
//!
//! Serializes as `{"containers": ..., "volumes": ..., "networks": ...}` (the
//! plan's and the report's keys), then `services`, `configs` and `secrets`
//! only when they hold something (an engine with no Swarm objects gives the
//! same JSON as before the Swarm kinds); `networks` and the Swarm kinds may be
//! missing when read back (plans saved before they were planned).

use serde::{Deserialize, Serialize};

use crate::model::Kind;

/// One `T` per kind, in `Kind` order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(bound(
    serialize = "T: Serialize + Nothing",
    deserialize = "T: Deserialize<'de> + Default"
))]
#[schemars(
    rename = "ByKind_of_{T}",
    deny_unknown_fields,
    bound = "T: schemars::JsonSchema + Default + Serialize + Nothing"
)]
pub struct ByKind<T> {
    pub containers: T,
    pub(crate) volumes: T,
    #[serde(default)]
    pub networks: T,
    #[serde(default, skip_serializing_if = "Nothing::is_nothing")]
    pub services: T,
    #[serde(default, skip_serializing_if = "Nothing::is_nothing")]
    pub configs: T,
    #[serde(default, skip_serializing_if = "Nothing::is_nothing")]
    pub secrets: T,
}

/// A value that says nothing (an empty list, a zero count): the Swarm kinds'
/// keys are left out of the JSON when they hold one.
pub trait Nothing {
    fn is_nothing(&self) -> bool;
}

impl<U> Nothing for Vec<U> {
    fn is_nothing(&self) -> bool {
        self.is_empty()
    }
}

impl Nothing for usize {
    fn is_nothing(&self) -> bool {
        *self == 0
    }
}

impl<T> ByKind<T> {
    /// The value for every kind, made by `f`.
    fn from_fn(mut f: impl FnMut(Kind) -> T) -> Self {
        ByKind {
            containers: f(Kind::Container),
            volumes: f(Kind::Volume),
            networks: f(Kind::Network),
            services: f(Kind::Service),
            configs: f(Kind::Config),
            secrets: f(Kind::Secret),
        }
    }

    pub(crate) fn get(&self, kind: Kind) -> &T {
        match kind {
            Kind::Container => &self.containers,
            Kind::Volume => &self.volumes,
            Kind::Network => &self.networks,
            Kind::Service => &self.services,
            Kind::Config => &self.configs,
            Kind::Secret => &self.secrets,
        }
    }

    fn get_mut(&mut self, kind: Kind) -> &mut T {
        match kind {
            Kind::Container => &mut self.containers,
            Kind::Volume => &mut self.volumes,
            Kind::Network => &mut self.networks,
            Kind::Service => &mut self.services,
            Kind::Config => &mut self.configs,
            Kind::Secret => &mut self.secrets,
        }
    }

    /// Each kind with its value, in `Kind` order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Kind, &T)> {
        Kind::ALL.into_iter().map(move |k| (k, self.get(k)))
    }

    /// A value per kind made from this one's.
    pub(crate) fn map<U>(&self, mut f: impl FnMut(&T) -> U) -> ByKind<U> {
        ByKind::from_fn(|k| f(self.get(k)))
    }
}

impl<U> ByKind<Vec<U>> {
    /// Every item, containers first.
    pub fn all(&self) -> impl Iterator<Item = &U> {
        Kind::ALL.into_iter().flat_map(move |k| self.get(k))
    }

    /// Items of every kind.
    pub fn len(&self) -> usize {
        Kind::ALL.into_iter().map(|k| self.get(k).len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds `item` to the list of `kind`.
    pub(crate) fn push(&mut self, kind: Kind, item: U) {
        self.get_mut(kind).push(item);
    }

    /// Appends copies of `other`'s items, kind by kind.
    pub(crate) fn extend_from(&mut self, other: &ByKind<Vec<U>>)
    where
        U: Clone,
    {
        for kind in Kind::ALL {
            self.get_mut(kind).extend_from_slice(other.get(kind));
        }
    }
}

impl<U> Extend<(Kind, U)> for ByKind<Vec<U>> {
    /// Adds each item to the list of its kind.
    fn extend<I: IntoIterator<Item = (Kind, U)>>(&mut self, items: I) {
        for (kind, item) in items {
            self.push(kind, item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_iteration_and_map_follow_kind_order() {
        let mut lists: ByKind<Vec<&str>> = ByKind::default();
        lists.extend([
            (Kind::Network, "n"),
            (Kind::Container, "c1"),
            (Kind::Volume, "v"),
            (Kind::Container, "c2"),
        ]);
        assert_eq!(lists.get(Kind::Container), &["c1", "c2"]);
        assert_eq!(
            lists.all().copied().collect::<Vec<_>>(),
            ["c1", "c2", "v", "n"]
        );
        let counts = lists.map(Vec::len);
        assert_eq!(
            counts.iter().collect::<Vec<_>>(),
            [
                (Kind::Container, &2),
                (Kind::Volume, &1),
                (Kind::Network, &1),
                (Kind::Service, &0),
                (Kind::Config, &0),
                (Kind::Secret, &0)
            ]
        );
        assert_eq!(lists.len(), 4);
        assert_eq!(*lists.get_mut(Kind::Volume), ["v"]);
    }

    #[test]
    fn extend_from_appends_kind_by_kind() {
        let mut whole: ByKind<Vec<u8>> = ByKind::from_fn(|k| vec![k as u8]);
        let part = ByKind {
            containers: vec![10],
            volumes: vec![],
            networks: vec![12, 13],
            ..ByKind::default()
        };
        whole.extend_from(&part);
        assert_eq!(
            whole,
            ByKind {
                containers: vec![0, 10],
                volumes: vec![1],
                networks: vec![2, 12, 13],
                services: vec![3],
                configs: vec![4],
                secrets: vec![5],
            }
        );
    }

    #[test]
    fn json_keys_are_the_plural_kinds_and_networks_may_be_missing() {
        let counts = ByKind::from_fn(|k| k as usize);
        assert_eq!(
            serde_json::to_string(&counts).unwrap(),
            r#"{"containers":0,"volumes":1,"networks":2,"services":3,"configs":4,"secrets":5}"#
        );
        let no_swarm = ByKind {
            containers: 1usize,
            ..ByKind::default()
        };
        assert_eq!(
            serde_json::to_string(&no_swarm).unwrap(),
            r#"{"containers":1,"volumes":0,"networks":0}"#
        );
        let old: ByKind<Vec<u8>> =
            serde_json::from_str(r#"{"containers":[1],"volumes":[]}"#).unwrap();
        assert!(old.networks.is_empty());
    }
}
