//! The nouns of sandboxctl: objects as the engine lists them, labels, and the
//! scope that decides which of them are ours.
//!
//! Owns the one definition of "managed" (`Scope::manages`). Does no I/O and
//! knows nothing of Docker's wire types: the engine layer converts into these.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

/// The label every object of the sandbox system carries, with value exactly [`SANDBOX_VALUE`].
pub const SANDBOX_LABEL: &str = "ca.sandbox";
/// The only value of [`SANDBOX_LABEL`] that marks an object as ours.
pub const SANDBOX_VALUE: &str = "1";
/// The label naming the box a container or volume belongs to.
pub const BOX_ID_LABEL: &str = "ca.sandbox.id";
/// Cached build images are tagged `ca-sbx:<repo>-<dephash>`; they are listed, never removed.
pub const IMAGE_REFERENCE: &str = "ca-sbx:*";

/// Object labels, sorted so that everything derived from them is deterministic.
pub type Labels = BTreeMap<String, String>;

/// Which objects a run manages: those labeled `ca.sandbox=1` and every scope label.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    /// Extra labels (beyond `ca.sandbox=1`) an object must carry with exactly these values.
    pub labels: Labels,
}

impl Scope {
    /// A scope narrowed by `labels` (never containing `ca.sandbox` itself).
    pub fn new(labels: Labels) -> Self {
        Scope { labels }
    }

    /// The label filters to send to the engine: `ca.sandbox=1` first, then each scope label.
    pub fn filters(&self) -> Vec<String> {
        std::iter::once(format!("{SANDBOX_LABEL}={SANDBOX_VALUE}"))
            .chain(self.labels.iter().map(|(k, v)| format!("{k}={v}")))
            .collect()
    }

    /// The client-side check: true only if `labels` carries `ca.sandbox` with value
    /// exactly `1` and every scope label with exactly its value. Every object the
    /// engine returns passes through here before sandboxctl may act on it.
    pub fn manages(&self, labels: &Labels) -> bool {
        labels.get(SANDBOX_LABEL).map(String::as_str) == Some(SANDBOX_VALUE)
            && self
                .labels
                .iter()
                .all(|(k, v)| labels.get(k).map(String::as_str) == Some(v.as_str()))
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.filters().join(", "))
    }
}

/// A container as listed by the engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContainerInfo {
    /// Full container ID; removal always goes by this, never by name.
    pub id: String,
    /// Name without Docker's leading slash.
    pub name: String,
    /// Docker's state word: `running`, `exited`, `created`, `paused`, ...
    #[serde(default = "default_state")]
    pub state: String,
    #[serde(default)]
    pub labels: Labels,
    /// Names of the named volumes this container mounts (from its mounts, sorted).
    #[serde(default)]
    pub mounts: BTreeSet<String>,
}

fn default_state() -> String {
    "exited".to_string()
}

impl ContainerInfo {
    /// The box this container belongs to, if it carries `ca.sandbox.id`.
    pub fn box_id(&self) -> Option<&str> {
        self.labels.get(BOX_ID_LABEL).map(String::as_str)
    }

    /// The first 12 characters of the ID, as `docker ps` shows it.
    pub fn short_id(&self) -> &str {
        short_id(&self.id)
    }
}

/// A named volume as listed by the engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeInfo {
    pub name: String,
    #[serde(default)]
    pub labels: Labels,
    /// Creation time as the engine reports it (RFC 3339); volumes have no ID, so this
    /// is what tells a recreated volume of the same name apart.
    #[serde(default, rename = "createdAt", skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
}

impl VolumeInfo {
    /// The box this volume belongs to, if it carries `ca.sandbox.id`.
    pub fn box_id(&self) -> Option<&str> {
        self.labels.get(BOX_ID_LABEL).map(String::as_str)
    }
}

/// A cached build image (`ca-sbx:*`). Listed and reported as retained; never removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageInfo {
    pub id: String,
    /// Repository tags, sorted.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// The first 12 characters of a container or image ID (after any `sha256:`).
pub fn short_id(id: &str) -> &str {
    let id = id.strip_prefix("sha256:").unwrap_or(id);
    &id[..id.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn manages_only_exact_value_one() {
        let scope = Scope::default();
        assert!(scope.manages(&labels(&[("ca.sandbox", "1")])));
        for bad in ["0", "true", "1 ", " 1", "", "01"] {
            assert!(!scope.manages(&labels(&[("ca.sandbox", bad)])), "{bad:?}");
        }
        assert!(!scope.manages(&labels(&[("ca.sandboxx", "1")])));
        assert!(!scope.manages(&labels(&[("ca.sandbox.id", "x")])));
        assert!(!scope.manages(&Labels::new()));
    }

    #[test]
    fn manages_requires_every_scope_label() {
        let scope = Scope::new(labels(&[("owner", "a"), ("team", "t")]));
        assert!(scope.manages(&labels(&[
            ("ca.sandbox", "1"),
            ("owner", "a"),
            ("team", "t")
        ])));
        assert!(!scope.manages(&labels(&[("ca.sandbox", "1"), ("owner", "a")])));
        assert!(!scope.manages(&labels(&[
            ("ca.sandbox", "1"),
            ("owner", "b"),
            ("team", "t")
        ])));
        assert_eq!(scope.filters(), vec!["ca.sandbox=1", "owner=a", "team=t"]);
    }
}
