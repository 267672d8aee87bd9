//! Reading a volume for its archive: through a helper container made for
//! it (`archive_volume`), or through the box's own container, stopped, that
//! mounts it (`archive_through`); the manifest's first fields and the
//! archive's name, then the stream to the file (`pipeline`).
//!
//! Owns the helper: made from an image already present (a retained
//! `ca-sbx:*` image, by ID: never pulled), never started, labeled so that a
//! crash leaves it reclaimable by label alone (`ca.sandbox=1`, the scope's,
//! the box's, `ca.sandbox.role=archive-helper`), removed whatever became of
//! the archive; one that cannot be removed is named
//! (`ArchiveError::HelperLeft`). Must not remove the volume (`apply` does,
//! only after `Ok`).

use std::path::Path;

use super::manifest::{Manifest, MANIFEST_VERSION};
use super::pipeline::stream_to_file;
use super::place::{path_element, stamp, Place};
use super::{ArchiveError, Archived};
use crate::engine::{Engine, EngineError, Helper, HELPER_MOUNT};
use crate::model::{
    ImageInfo, Kind, Labels, Object, ObjectKey, ARCHIVE_HELPER_ROLE, BOX_ID_LABEL, ROLE_LABEL,
};

/// The first retained `ca-sbx:*` image, by ID (a tag may move meanwhile).
pub fn helper_image(images: &[ImageInfo]) -> Option<String> {
    images
        .iter()
        .find(|i| i.tags.iter().any(|t| t.starts_with("ca-sbx:")))
        .map(|i| i.id.clone())
}

/// A helper's labels: the scope's (`ca.sandbox=1` among them), the box's
/// when it has one, and the role, so that a crash leaves it reclaimable by
/// label alone.
pub fn helper_labels(scope_labels: &Labels, box_id: Option<&str>) -> Labels {
    let mut labels = scope_labels.clone();
    if let Some(b) = box_id {
        labels.insert(BOX_ID_LABEL.to_string(), b.to_string());
    }
    labels.insert(ROLE_LABEL.to_string(), ARCHIVE_HELPER_ROLE.to_string());
    labels
}

/// Every label a managed object carries in `scope`: `ca.sandbox=1` and the scope's.
pub fn scope_labels(scope: &crate::model::Scope) -> Labels {
    let mut labels = scope.labels.clone();
    labels.insert(
        crate::model::SANDBOX_LABEL.to_string(),
        crate::model::SANDBOX_VALUE.to_string(),
    );
    labels
}

/// Now, Unix seconds (this machine's clock: an archive's name and time).
fn now_secs() -> i64 {
    crate::model::time::unix_ms(std::time::SystemTime::now()).div_euclid(1000)
}

/// Archives `volume` (as just inspected: its labels and creation time go in
/// the manifest) into `dir`, through a helper made from one of `images` and
/// labeled with `scope_labels`. The volume itself is left as it is.
pub async fn archive_volume(
    engine: &dyn Engine,
    volume: &Object,
    dir: &Path,
    images: &[ImageInfo],
    scope_labels: &Labels,
) -> Result<Archived, ArchiveError> {
    let image = helper_image(images).ok_or(ArchiveError::NoImage)?;
    let box_id = volume.box_id().map(str::to_string);
    let helper = Helper {
        image,
        volume: volume.name.clone(),
        mount: HELPER_MOUNT.to_string(),
        labels: helper_labels(scope_labels, box_id.as_deref()),
    };
    let id = engine
        .create_helper(&helper)
        .await
        .map_err(ArchiveError::Engine)?;
    let helper_key = ObjectKey::new(engine.name(), Kind::Container, &id);
    // Docker creates a named volume a new container mounts when it does not
    // exist: make sure the helper mounts the volume planned, not a new one.
    let key = ObjectKey::new(engine.name(), Kind::Volume, &volume.name);
    match engine.inspect(&key).await {
        Ok(v) if v.created == volume.created && v.labels == volume.labels => {}
        other => {
            let first = match other {
                Err(e) if !e.is_not_found() => ArchiveError::Engine(e),
                _ => ArchiveError::Changed(volume.name.clone()),
            };
            return Err(match remove_helper(engine, &helper_key).await {
                Ok(()) => first,
                Err(error) => ArchiveError::HelperLeft {
                    helper: id,
                    error: Box::new(error),
                    archived: None,
                    earlier: Some(first.to_string()),
                },
            });
        }
    }
    let written = archive_through(engine, &id, HELPER_MOUNT, volume, dir).await;
    // Whatever became of the archive. A helper that could not be removed is
    // labeled (the next run removes it), and named: the volume then stays.
    match (written, remove_helper(engine, &helper_key).await) {
        (written, Ok(())) => written,
        (Ok(archived), Err(error)) => Err(ArchiveError::HelperLeft {
            helper: id,
            error: Box::new(error),
            archived: Some(Box::new(archived)),
            earlier: None,
        }),
        (Err(first), Err(error)) => Err(ArchiveError::HelperLeft {
            helper: id,
            error: Box::new(error),
            archived: None,
            earlier: Some(first.to_string()),
        }),
    }
}

/// Archives `volume` (as just inspected) into `dir`, reading it at `path` of
/// `container`, the box's own container that mounts it there, which the
/// caller has stopped (or the helper that `archive_volume` made): the
/// manifest made, the archive written and both renamed. The tar's entries
/// are rooted at `path`'s last element (the manifest's `root`). The
/// container and the volume are left as they are.
pub async fn archive_through(
    engine: &dyn Engine,
    container: &str,
    path: &str,
    volume: &Object,
    dir: &Path,
) -> Result<Archived, ArchiveError> {
    let root = crate::model::mount_root(path)
        .ok_or_else(|| ArchiveError::Tar(format!("mount path {path:?} names no folder")))?;
    let box_id = volume.box_id().map(str::to_string);
    let now = now_secs();
    let manifest = Manifest {
        version: MANIFEST_VERSION,
        engine: engine.name().to_string(),
        volume: volume.name.clone(),
        labels: volume.labels.clone(),
        created_at: volume.created.map(crate::model::time::rfc3339),
        box_id: box_id.clone(),
        archive: String::new(),
        sha256: String::new(),
        size: 0,
        uncompressed_size: 0,
        file_count: 0,
        time: crate::model::time::rfc3339(now),
        format: "tar+zstd".into(),
        root,
    };
    let place = Place::new(dir, engine.name(), box_id.as_deref());
    let base = format!("{}-{}", path_element(&volume.name), stamp(now));
    stream_to_file(engine, container, path, place, base, manifest).await
}

/// Removes a helper container; one already gone counts as removed.
async fn remove_helper(engine: &dyn Engine, key: &ObjectKey) -> Result<(), EngineError> {
    match engine.remove(key).await {
        Err(e) if !e.is_not_found() => Err(e),
        _ => Ok(()),
    }
}
