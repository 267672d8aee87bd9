//! The manifest that stands beside each archive (`<base>.json` beside
//! `<base>.tar.zst`): its JSON form and version, where it is, reading it
//! back for a restore, and how it writes a digest (hex).
//!
//! Owns the manifest's shape and its checks on reading (version, root);
//! must not write it (the file protocol does) nor call an engine.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::RestoreError;
use crate::model::Labels;

/// The version of the manifest's JSON form.
pub(super) const MANIFEST_VERSION: u32 = 1;

/// What stands beside each archive: where it came from and what it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Manifest {
    /// The manifest's format (`restore` refuses another).
    #[schemars(extend("const" = MANIFEST_VERSION))]
    pub version: u32,
    /// The engine's name in the run (`default`, or a fleet entry's).
    pub engine: String,
    pub volume: String,
    pub labels: Labels,
    /// The volume's creation time (RFC 3339), when the engine gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    #[serde(rename = "box")]
    pub box_id: Option<String>,
    /// The archive file's name (beside the manifest).
    pub archive: String,
    pub sha256: String,
    /// The archive file's size in bytes.
    pub size: u64,
    /// The tar stream's size in bytes (what a restore puts back).
    pub uncompressed_size: u64,
    /// Tar entries (files, folders, links; the volume's root included).
    pub file_count: u64,
    /// When the archive was written (RFC 3339, this machine's clock).
    pub time: String,
    /// How the content is stored.
    pub format: String,
    /// Where the tar's entries are rooted: the helper's mount point.
    pub root: String,
}

/// The manifest beside `archive` (`X.tar.zst` -> `X.json`).
pub fn manifest_path(archive: &Path) -> PathBuf {
    let name = archive
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let base = name.strip_suffix(".tar.zst").unwrap_or(&name);
    archive.with_file_name(format!("{base}.json"))
}

/// Reads the manifest beside `archive`.
pub fn read_manifest(archive: &Path) -> Result<Manifest, RestoreError> {
    let path = manifest_path(archive);
    let fail = |error: String| RestoreError::Manifest {
        path: path.clone(),
        error,
    };
    let text = std::fs::read(&path).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            fail(format!(
                "{e}; it is written beside the archive as {}: copy it there with the archive (restore never guesses a volume's name or labels)",
                path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()
            ))
        } else {
            fail(e.to_string())
        }
    })?;
    let m: Manifest = serde_json::from_slice(&text).map_err(|e| fail(e.to_string()))?;
    if m.version != MANIFEST_VERSION {
        return Err(fail(format!(
            "version {} is not {MANIFEST_VERSION}",
            m.version
        )));
    }
    if crate::model::mount_root(&format!("/{}", m.root)).as_deref() != Some(m.root.as_str()) {
        return Err(fail(format!("root {:?} is not one folder name", m.root)));
    }
    Ok(m)
}

/// Bytes as lower-case hex (the manifest's `sha256`).
pub(super) use crate::model::hex;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_is_beside_the_archive() {
        assert_eq!(
            manifest_path(Path::new("/a/b/v-19700101T000000Z.tar.zst")),
            PathBuf::from("/a/b/v-19700101T000000Z.json")
        );
    }
}
