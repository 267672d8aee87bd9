//! Archiving a managed volume before it is removed (`--archive DIR`), and
//! restoring one (`restore ARCHIVE`): the public face (what comes out of
//! both, and why either fails) and the files that do each job.
//!
//! * `helper`: reading the volume, through a helper container that is never
//!   started, or through the box's own container, stopped.
//! * `pipeline`: the tar stream in 1 MiB blocks from a pool of four, through
//!   a zstd encoder (two worker threads, 2 MiB jobs) into a temporary file
//!   on a blocking thread (memory stays flat whatever the volume's size),
//!   whose writeback starts as it is written.
//! * `count`: the tar stream's entries and bytes as it passes, read by the
//!   `tar` crate; a stream that does not end as a tar stream ends is refused.
//! * `protocol`: the crash-safe files: `.partial` temporary files, each
//!   locked while its writer lives; fsync, the manifest (fsynced), the
//!   manifest's rename, the archive's rename, an fsync of the folder. So an
//!   archive under a final name always has its manifest, and a partial
//!   archive never stands under a final name. On any failure the temporary
//!   files go; before writing into a folder a writer sweeps what dead
//!   writers left there, never a living writer's file.
//! * `place`: `DIR/<engine>/<box or _>/<volume>-<UTC time>.tar.zst`, each
//!   name one path element, injectively (docs/archive.md); every file and
//!   folder made through `exec::files` (`0600`, `0700`, never through a
//!   symbolic link: a link below `DIR` is `ArchiveError::Symlink`).
//! * `manifest`: the `.json` beside each archive.
//! * `restore`: a new volume filled from an archive, checked against its
//!   manifest.
//!
//! Reads only through a helper made from an image already present (a retained
//! `ca-sbx:*` image): never pulls. Returns typed results; never prints and
//! never decides whether the volume goes (`apply` does, only after `Ok`).

use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::engine::EngineError;
use crate::model::Labels;

mod count;
mod helper;
mod manifest;
mod pipeline;
mod place;
mod protocol;
mod restore;
#[cfg(test)]
mod tests;

pub use helper::{archive_through, archive_volume, helper_image, helper_labels, scope_labels};
pub use manifest::{manifest_path, read_manifest, Manifest};
pub use place::folder;
pub use restore::{restore, restored_labels, RESTORE_LABEL};

/// One volume's archive, written and renamed to its final name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Archived {
    pub volume: String,
    /// The archive (`.tar.zst`), under its final name.
    pub path: PathBuf,
    /// Its manifest (`.json`) beside it.
    pub manifest: PathBuf,
    /// SHA-256 of the archive file, hex.
    pub sha256: String,
    /// The archive file's size in bytes.
    pub bytes: u64,
    /// The tar stream's size in bytes, before compression.
    pub uncompressed_size: u64,
    /// Tar entries (files, folders, links; the volume's root included).
    pub file_count: u64,
    /// The sizes of the regular files in the stream, added up: what the
    /// volume held, as the engine's `/system/df` counts it (its
    /// `reclaimedBytes` once it is removed). Not in the manifest.
    #[serde(skip)]
    pub file_bytes: u64,
    /// Milliseconds from the request for the engine's tar stream until the
    /// archive and its manifest stood under their final names, synced.
    pub elapsed_ms: u64,
}

/// Why a volume was not archived (so it was not removed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArchiveError {
    /// No `ca-sbx:*` image is present to make a helper container from (images
    /// are never pulled).
    #[error(
        "no ca-sbx:* image is present to make a helper container from (images are never pulled)"
    )]
    NoImage,
    /// An engine call failed (the helper refused, the stream broke, ...).
    #[error("{0}")]
    Engine(EngineError),
    /// Writing or reading a file failed (disk full, permission, ...).
    #[error("{what} {}: {error}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        error: String,
    },
    /// A folder under `DIR` (`<engine>`, `<box>`) is a symbolic link:
    /// nothing is written through it, so the volume stays.
    #[error("archive folder {} is a symbolic link; sandboxctl never writes an archive through one: remove the link (sandboxctl then makes the folder itself) or point --archive at the real folder, then run again", .0.display())]
    Symlink(PathBuf),
    /// The volume vanished or was recreated while its helper was made.
    #[error(
        "volume {0} vanished or was recreated while its helper container was made; left alone"
    )]
    Changed(String),
    /// The stream ended well, but the engine did not answer on a new
    /// connection right after (`Engine::answers_anew`): it may have been
    /// shutting down while it sent the stream, and dockerd then leaves out
    /// the files it can no longer read. The archive is not kept.
    #[error("{0}, after its tar stream had ended: the engine did not answer on a new connection, so it may have been shutting down while it sent the stream (dockerd then leaves out what it can no longer read); the archive is not kept")]
    Unconfirmed(EngineError),
    /// The stream ended but was not a tar stream that ended well.
    #[error("the engine's tar stream was cut or malformed: {0}")]
    Tar(String),
    /// The helper container could not be removed. It is labeled: the next run
    /// removes it (reason `archiveHelper`). The volume is left in place.
    #[error(
        "{}helper container {helper} could not be removed: {error} (it is labeled ca.sandbox.role=archive-helper: the next run removes it){}",
        earlier.as_ref().map(|e| format!("{e}; then the ")).unwrap_or_else(|| "the ".into()),
        archived.as_ref().map(|a| format!("; the archive {} stands complete", a.path.display())).unwrap_or_default()
    )]
    HelperLeft {
        /// The helper's full ID.
        helper: String,
        error: Box<EngineError>,
        /// The archive written before, if it stands under its final name.
        archived: Option<Box<Archived>>,
        /// What failed before, if anything did.
        earlier: Option<String>,
    },
}

impl ArchiveError {
    /// The archive that stands complete despite the error (its helper could
    /// not be removed), to be reported as archived.
    pub fn archived(&self) -> Option<&Archived> {
        match self {
            ArchiveError::HelperLeft { archived, .. } => archived.as_deref(),
            _ => None,
        }
    }

    fn io(what: &'static str, path: &Path, e: io::Error) -> Self {
        ArchiveError::Io {
            what,
            path: path.to_path_buf(),
            error: e.to_string(),
        }
    }
}

/// A restored volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Restored {
    pub volume: String,
    /// The labels it was created with (the archived volume's: it stays managed).
    pub labels: Labels,
    #[serde(rename = "box")]
    pub box_id: Option<String>,
    pub file_count: u64,
    pub uncompressed_size: u64,
}

/// Why a restore did not happen or did not finish.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    #[error("manifest {}: {error}", path.display())]
    Manifest { path: PathBuf, error: String },
    #[error("archive {}: its SHA-256 is {actual}, the manifest says {expected}; nothing was created", path.display())]
    Checksum {
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("volume {0} exists; restore never overwrites a volume (remove it, or restore with --volume NEW)")]
    Exists(String),
    #[error("volume name {name:?} ({from}) is not a volume name: a letter or digit, then letters, digits, '_', '.' or '-' (at most 255 characters); nothing was created")]
    BadName { name: String, from: &'static str },
    #[error(
        "no ca-sbx:* image is present to make a helper container from (images are never pulled)"
    )]
    NoImage,
    #[error("{0}")]
    Engine(EngineError),
    #[error("{0}")]
    Archive(ArchiveError),
    #[error("its helper container {helper} could not be removed and is left behind (it mounts volume {volume}): {error}")]
    HelperLeft {
        volume: String,
        helper: String,
        error: Box<EngineError>,
    },
    #[error("{error}; volume {volume}, which restore created, could not be removed again and is left behind: {removal}")]
    LeftBehind {
        volume: String,
        error: Box<RestoreError>,
        removal: Box<EngineError>,
    },
    #[error("volume {volume} was filled, but {what}: the manifest says {expected}, the archive held {actual}")]
    Mismatch {
        volume: String,
        what: &'static str,
        expected: u64,
        actual: u64,
    },
}
