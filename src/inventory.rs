//! The live inventory: what the engine holds that this run manages.
//!
//! Owns the listing step (a constant four engine calls, whatever the number of
//! objects) and the client-side label check that every listed object must pass
//! before anything downstream may see it. Must not remove anything or decide
//! what should go: that is the planner's job.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::engine::{Engine, EngineError};
use crate::model::{ContainerInfo, ImageInfo, Scope, VolumeInfo, IMAGE_REFERENCE};

/// A container outside the managed set that mounts a managed volume.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ForeignUser {
    pub id: String,
    pub name: String,
}

/// The managed objects, as one listing of each kind saw them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    pub scope: Scope,
    /// Managed containers, by ID.
    pub containers: BTreeMap<String, ContainerInfo>,
    /// Managed volumes, by name.
    pub volumes: BTreeMap<String, VolumeInfo>,
    /// `ca-sbx:*` images, by ID. Reported as retained, never removed.
    pub images: BTreeMap<String, ImageInfo>,
    /// For each managed volume that an unmanaged container mounts: those containers.
    pub foreign_users: BTreeMap<String, Vec<ForeignUser>>,
    /// Objects the engine returned for the label filter that failed the client-side
    /// check (a daemon that ignored the filter): `container <id>` / `volume <name>`.
    /// They are never acted on; this only records that it happened.
    pub rejected: Vec<String>,
}

/// A listing that failed. Nothing is planned from a partial inventory.
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    /// One of the listings failed; the inventory is unknown, so nothing may be removed.
    #[error("could not list {what}: {error}")]
    Listing {
        what: &'static str,
        error: EngineError,
    },
}

impl InventoryError {
    /// The engine error underneath.
    pub fn engine_error(&self) -> &EngineError {
        match self {
            InventoryError::Listing { error, .. } => error,
        }
    }
}

impl Inventory {
    /// Lists the managed containers, every container (only to find unmanaged users
    /// of managed volumes), the managed volumes and the `ca-sbx:*` images,
    /// concurrently, and keeps what passes the client-side check.
    pub async fn list(engine: &impl Engine, scope: &Scope) -> Result<Inventory, InventoryError> {
        let filters = scope.filters();
        let wrap = |what| move |error| InventoryError::Listing { what, error };
        let (managed, all, volumes, images) = tokio::try_join!(
            async {
                engine
                    .list_containers(&filters)
                    .await
                    .map_err(wrap("managed containers"))
            },
            async {
                engine
                    .list_containers(&[])
                    .await
                    .map_err(wrap("all containers (to find users of managed volumes)"))
            },
            async { engine.list_volumes(&filters).await.map_err(wrap("volumes")) },
            async {
                engine
                    .list_images(IMAGE_REFERENCE)
                    .await
                    .map_err(wrap("images"))
            },
        )?;
        Ok(Inventory::from_listings(
            scope.clone(),
            managed,
            all,
            volumes,
            images,
        ))
    }

    /// Builds the inventory from raw listings. Pure. `managed` and `volumes` are
    /// what the engine returned for the scope's label filter; `all` is every
    /// container. Anything failing `Scope::manages` is dropped into `rejected`.
    pub fn from_listings(
        scope: Scope,
        managed: Vec<ContainerInfo>,
        all: Vec<ContainerInfo>,
        volumes: Vec<VolumeInfo>,
        images: Vec<ImageInfo>,
    ) -> Inventory {
        let mut inv = Inventory {
            scope,
            ..Default::default()
        };
        for c in managed {
            if inv.scope.manages(&c.labels) {
                inv.containers.insert(c.id.clone(), c);
            } else {
                inv.rejected.push(format!("container {}", c.id));
            }
        }
        for v in volumes {
            if inv.scope.manages(&v.labels) {
                inv.volumes.insert(v.name.clone(), v);
            } else {
                inv.rejected.push(format!("volume {}", v.name));
            }
        }
        for c in all {
            if inv.scope.manages(&c.labels) {
                continue;
            }
            for m in &c.mounts {
                if inv.volumes.contains_key(m) {
                    inv.foreign_users
                        .entry(m.clone())
                        .or_default()
                        .push(ForeignUser {
                            id: c.id.clone(),
                            name: c.name.clone(),
                        });
                }
            }
        }
        for users in inv.foreign_users.values_mut() {
            users.sort();
            users.dedup();
        }
        for mut i in images {
            i.tags.sort();
            inv.images.insert(i.id.clone(), i);
        }
        inv.rejected.sort();
        inv
    }

    /// Every box ID a managed container or volume carries.
    pub fn box_ids(&self) -> std::collections::BTreeSet<&str> {
        self.containers
            .values()
            .filter_map(ContainerInfo::box_id)
            .chain(self.volumes.values().filter_map(VolumeInfo::box_id))
            .collect()
    }

    /// What a saved plan compares against: one entry per managed object and per
    /// unmanaged mount of a managed volume, keyed `container/<id>`, `volume/<name>`,
    /// `mount/<volume>/<container id>`, valued with a digest of what matters for
    /// removal (labels, mounts, creation time; not the running state).
    pub fn basis(&self) -> BTreeMap<String, String> {
        let mut basis = BTreeMap::new();
        for c in self.containers.values() {
            let count = |n: usize| n.to_string();
            let (nl, nm) = (count(c.labels.len()), count(c.mounts.len()));
            let fields = std::iter::once(c.name.as_str())
                .chain(std::iter::once(nl.as_str()))
                .chain(c.labels.iter().flat_map(|(k, v)| [k.as_str(), v.as_str()]))
                .chain(std::iter::once(nm.as_str()))
                .chain(c.mounts.iter().map(String::as_str));
            basis.insert(format!("container/{}", c.id), object_digest(fields));
        }
        for v in self.volumes.values() {
            let created = v.created_at.as_deref().unwrap_or("");
            let fields = std::iter::once(created)
                .chain(v.labels.iter().flat_map(|(k, v)| [k.as_str(), v.as_str()]));
            basis.insert(format!("volume/{}", v.name), object_digest(fields));
        }
        for (volume, users) in &self.foreign_users {
            for u in users {
                basis.insert(
                    format!("mount/{volume}/{}", u.id),
                    object_digest([u.name.as_str()]),
                );
            }
        }
        basis
    }
}

/// The fingerprint of a basis: `sha256:` and the hex digest of its entries.
pub fn fingerprint(basis: &BTreeMap<String, String>) -> String {
    format!(
        "sha256:{}",
        digest(basis.iter().flat_map(|(k, v)| [k.as_str(), v.as_str()]), 64)
    )
}

/// SHA-256 over length-prefixed fields (so no two field lists hash alike), as
/// the first `hex_len` hex digits.
fn digest<'a>(fields: impl IntoIterator<Item = &'a str>, hex_len: usize) -> String {
    let mut hasher = Sha256::new();
    for field in fields {
        hasher.update((field.len() as u64).to_le_bytes());
        hasher.update(field.as_bytes());
    }
    let mut hex = to_hex(&hasher.finalize());
    hex.truncate(hex_len);
    hex
}

/// A per-object digest: 64-bit FNV-1a over length-prefixed fields, as 16 hex
/// digits. Enough to notice a change (the fingerprint over all of them is
/// SHA-256) and several times cheaper than SHA-256 per object; the function is
/// fixed here, so saved plans stay comparable across builds.
fn object_digest<'a>(fields: impl IntoIterator<Item = &'a str>) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            hash = (hash ^ u64::from(b)).wrapping_mul(PRIME);
        }
    };
    for field in fields {
        eat(&(field.len() as u64).to_le_bytes());
        eat(field.as_bytes());
    }
    to_hex(&hash.to_be_bytes())
}

fn to_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        hex.push(HEX[usize::from(b >> 4)] as char);
        hex.push(HEX[usize::from(b & 15)] as char);
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Labels;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn container(id: &str, l: Labels, mounts: &[&str]) -> ContainerInfo {
        ContainerInfo {
            id: id.into(),
            name: format!("n-{id}"),
            state: "running".into(),
            labels: l,
            mounts: mounts.iter().map(|m| m.to_string()).collect(),
        }
    }

    #[test]
    fn client_side_check_rejects_what_a_filter_let_through() {
        let scope = Scope::default();
        let good = container("a", labels(&[("ca.sandbox", "1")]), &[]);
        let bad = container("b", labels(&[("ca.sandbox", "true")]), &[]);
        let vol_bad = VolumeInfo {
            name: "v".into(),
            labels: labels(&[("ca.sandboxx", "1")]),
            created_at: None,
        };
        let inv = Inventory::from_listings(scope, vec![good, bad], vec![], vec![vol_bad], vec![]);
        assert_eq!(inv.containers.keys().collect::<Vec<_>>(), vec!["a"]);
        assert!(inv.volumes.is_empty());
        assert_eq!(inv.rejected, vec!["container b", "volume v"]);
    }

    #[test]
    fn finds_unmanaged_users_of_managed_volumes_only() {
        let scope = Scope::default();
        let managed = labels(&[("ca.sandbox", "1")]);
        let v = VolumeInfo {
            name: "v".into(),
            labels: managed.clone(),
            created_at: None,
        };
        let mine = container("a", managed, &["v"]);
        let foreign = container("f", Labels::new(), &["v", "other"]);
        let inv = Inventory::from_listings(
            scope,
            vec![mine.clone()],
            vec![mine, foreign],
            vec![v],
            vec![],
        );
        assert_eq!(
            inv.foreign_users["v"],
            vec![ForeignUser {
                id: "f".into(),
                name: "n-f".into()
            }]
        );
        assert!(!inv.foreign_users.contains_key("other"));
        assert!(inv.basis().contains_key("mount/v/f"));
    }
}
