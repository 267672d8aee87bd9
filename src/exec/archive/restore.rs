//! Restoring an archive into a new volume (`restore ARCHIVE`): the
//! manifest and the name checked before any engine call, the archive's
//! SHA-256 against its manifest, a volume created with this run's own
//! restore label and filled through a helper from the decompressed
//! archive, counted as it goes (`count`) and checked against the manifest.
//!
//! Owns the labels a restored volume carries (`restored_labels`: never a
//! `ca.sandbox*` label from the file, never a lease) and what a restore may
//! remove: only the volume this run created, seen carrying this run's label.
//! Never overwrites a volume; never pulls an image.

use std::io::{self, Read};
use std::path::Path;

use bytes::Bytes;
use futures_util::stream::StreamExt;
use sha2::{Digest, Sha256};

use super::count::{self, CountError, Counted};
use super::helper::{helper_image, helper_labels};
use super::manifest::{hex, read_manifest, Manifest};
use super::{ArchiveError, RestoreError, Restored};
use crate::engine::{Engine, Helper, TarBody};
use crate::model::{Kind, Labels, ObjectKey, BOX_ID_LABEL};

/// Chunks in flight between an archive's decompressing reader thread and
/// the engine (restore).
const IN_FLIGHT: usize = 8;
/// The bytes a restore reads from the archive at once.
const READ_CHUNK: usize = 64 * 1024;

/// SHA-256 (hex) of a file, read in chunks.
pub(super) fn sha256_file(path: &Path) -> io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut sha = Sha256::new();
    let mut buf = vec![0; READ_CHUNK];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        sha.update(&buf[..n]);
    }
    Ok(hex(&sha.finalize()))
}

/// True if `name` has the shape of a named volume's name: `[a-zA-Z0-9]
/// [a-zA-Z0-9_.-]*`, at most 255 characters (no `/`, `:` or space can reach
/// the helper's mount string; Docker itself also wants two characters).
fn volume_name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    (1..=255).contains(&name.len())
        && chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// The label a restore run puts on the volume it creates, valued with that
/// run's own token: only a volume carrying it is the run's to fill or remove.
pub const RESTORE_LABEL: &str = "ca.sandbox.restore";

/// The labels a restored volume is created with: the manifest's, less every
/// `ca.sandbox*` label (the file is untrusted: `ca.sandbox=1`, the scope and
/// the box are sandboxctl's to set, and a lease is never restored), then the
/// active scope's (`ca.sandbox=1` among them), the box's ID when the manifest
/// names a valid one, and this run's restore label.
pub fn restored_labels(manifest: &Manifest, scope_labels: &Labels, run: &str) -> Labels {
    let mut labels: Labels = manifest
        .labels
        .iter()
        .filter(|(k, _)| !k.starts_with(crate::model::SANDBOX_LABEL))
        .filter(|(k, _)| !scope_labels.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    labels.extend(scope_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    if let Some(b) = manifest.box_id.as_deref().filter(|b| !b.is_empty()) {
        labels.insert(BOX_ID_LABEL.to_string(), b.to_string());
    }
    labels.insert(RESTORE_LABEL.to_string(), run.to_string());
    labels
}

/// Restores `archive` into a new volume (`volume`, or the manifest's name):
/// validates the manifest and the name before any engine call, checks the
/// archive's SHA-256 against its manifest, refuses a volume that exists,
/// creates the volume with [`restored_labels`] (this run's own restore
/// label among them) and goes on only if the volume the engine answers with
/// carries that label (Docker answers a name that exists with that volume),
/// fills it through a helper, and checks the entries and bytes put back
/// against the manifest. A volume this run created and could not fill is
/// removed again, after a fresh inspection shows this run's label on it.
pub async fn restore(
    engine: &dyn Engine,
    archive: &Path,
    volume: Option<&str>,
    scope_labels: &Labels,
) -> Result<Restored, RestoreError> {
    let manifest = read_manifest(archive)?;
    let (name, from) = match volume {
        Some(v) => (v.to_string(), "--volume"),
        None => (manifest.volume.clone(), "the manifest's volume"),
    };
    if !volume_name_ok(&name) {
        return Err(RestoreError::BadName { name, from });
    }
    let run = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
    );
    let labels = restored_labels(&manifest, scope_labels, &run);
    let path = archive.to_path_buf();
    let actual = tokio::task::spawn_blocking(move || sha256_file(&path))
        .await
        .map_err(|e| RestoreError::Archive(ArchiveError::Tar(e.to_string())))?
        .map_err(|e| RestoreError::Archive(ArchiveError::io("read", archive, e)))?;
    if actual != manifest.sha256 {
        return Err(RestoreError::Checksum {
            path: archive.to_path_buf(),
            expected: manifest.sha256,
            actual,
        });
    }
    match engine
        .inspect(&ObjectKey::new(engine.name(), Kind::Volume, &name))
        .await
    {
        Ok(_) => return Err(RestoreError::Exists(name)),
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(RestoreError::Engine(e)),
    }
    let images = engine
        .list_images(crate::model::IMAGE_REFERENCE)
        .await
        .map_err(RestoreError::Engine)?;
    let image = helper_image(&images).ok_or(RestoreError::NoImage)?;
    let ours = |o: &crate::model::Object| o.labels.get(RESTORE_LABEL) == Some(&run);
    let created = engine
        .create_volume(&name, &labels)
        .await
        .map_err(RestoreError::Engine)?;
    if !ours(&created) {
        // Docker answers an existing name with that volume: someone made it
        // just now. It is not ours to fill, nor to remove.
        return Err(RestoreError::Exists(name));
    }
    let volume_key = ObjectKey::new(engine.name(), Kind::Volume, &name);
    let filled = fill(engine, archive, &name, &image, &manifest, scope_labels).await;
    let (entries, bytes) = match filled {
        Ok(counts) => counts,
        Err(error) => {
            // Removed only if it still carries this run's label.
            let removal = match engine.inspect(&volume_key).await {
                Ok(v) if ours(&v) => engine.remove(&volume_key).await,
                Ok(_) => return Err(error),
                Err(e) if e.is_not_found() => Ok(()),
                Err(e) => Err(e),
            };
            return Err(match removal {
                Ok(()) => error,
                Err(removal) => RestoreError::LeftBehind {
                    volume: name,
                    error: Box::new(error),
                    removal: Box::new(removal),
                },
            });
        }
    };
    for (what, expected, actual) in [
        ("its entry count differs", manifest.file_count, entries),
        ("its size differs", manifest.uncompressed_size, bytes),
    ] {
        if expected != actual {
            return Err(RestoreError::Mismatch {
                volume: name,
                what,
                expected,
                actual,
            });
        }
    }
    Ok(Restored {
        volume: name,
        labels,
        box_id: manifest.box_id.clone(),
        file_count: entries,
        uncompressed_size: bytes,
    })
}

/// Puts the decompressed archive into `volume` through a helper; returns
/// the entries and bytes put.
async fn fill(
    engine: &dyn Engine,
    archive: &Path,
    volume: &str,
    image: &str,
    manifest: &Manifest,
    scope_labels: &Labels,
) -> Result<(u64, u64), RestoreError> {
    // The archive's entries are rooted at `root`: mount the volume there, so
    // putting the tar at `/` fills the volume, its root folder included.
    let mount = format!("/{}", manifest.root);
    let helper = Helper {
        image: image.to_string(),
        volume: volume.to_string(),
        mount,
        labels: helper_labels(scope_labels, manifest.box_id.as_deref()),
    };
    let id = engine
        .create_helper(&helper)
        .await
        .map_err(RestoreError::Engine)?;
    let (tx, rx) = tokio::sync::mpsc::channel::<io::Result<Bytes>>(IN_FLIGHT);
    let path = archive.to_path_buf();
    let reader = tokio::task::spawn_blocking(move || read_archive(&path, tx));
    let body: TarBody =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) })
            .boxed();
    let put = engine.upload(&id, "/", body).await;
    let counted = reader.await;
    let removed = engine
        .remove(&ObjectKey::new(engine.name(), Kind::Container, &id))
        .await;
    put.map_err(RestoreError::Engine)?;
    removed.map_err(|error| RestoreError::HelperLeft {
        volume: volume.to_string(),
        helper: id.clone(),
        error: Box::new(error),
    })?;
    let tar = counted
        .map_err(|e| RestoreError::Archive(ArchiveError::Tar(e.to_string())))?
        .map_err(|e| {
            RestoreError::Archive(match e {
                CountError::Pass(e) => ArchiveError::io("read", archive, e),
                CountError::Tar(why) => ArchiveError::Tar(why),
            })
        })?;
    Ok((tar.entries, tar.bytes))
}

/// The reader thread: the archive, decompressed, in chunks, counted.
fn read_archive(
    path: &Path,
    tx: tokio::sync::mpsc::Sender<io::Result<Bytes>>,
) -> Result<Counted, CountError<io::Error>> {
    let file = std::fs::File::open(path).map_err(CountError::Pass)?;
    let mut decoder = zstd::stream::read::Decoder::new(file).map_err(CountError::Pass)?;
    let mut buf = vec![0; READ_CHUNK];
    count::pass(
        || loop {
            match decoder.read(&mut buf) {
                Ok(0) => return Ok(None),
                Ok(n) => return Ok(Some(Bytes::copy_from_slice(&buf[..n]))),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let _ = tx.blocking_send(Err(io::Error::new(e.kind(), e.to_string())));
                    return Err(e);
                }
            }
        },
        |chunk: &Bytes| {
            tx.blocking_send(Ok(chunk.clone()))
                .map_err(|_| io::Error::other("the engine stopped reading"))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::memory::{box_labels, FaultAction, MemoryEngine, Op};
    use crate::engine::EngineError;
    use crate::exec::archive::helper::scope_labels;
    use crate::exec::archive::manifest::manifest_path;
    use crate::exec::archive::tests::{boom, engine_with, goal, image, run, sample_tar};
    use crate::exec::lease::tests::volume_named;
    use crate::model::Scope;
    use std::path::PathBuf;

    /// Edits the manifest beside `archive` with `edit`.
    fn edit_manifest(archive: &Path, edit: impl FnOnce(&mut Manifest)) {
        let path = manifest_path(archive);
        let mut m: Manifest = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        edit(&mut m);
        std::fs::write(&path, serde_json::to_vec(&m).unwrap()).unwrap();
    }

    /// An engine whose volume `v` was archived and removed: the archive's
    /// folder (gone when dropped), the engine, the archive's path.
    async fn archived() -> (tempfile::TempDir, MemoryEngine, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine_with(vec![image()]);
        let report = run(&engine, &goal(dir.path())).await;
        let path = PathBuf::from(&report.archived[0].path);
        (dir, engine, path)
    }

    #[tokio::test]
    async fn a_hostile_manifest_name_is_refused_before_any_engine_call() {
        let (_dir, engine, path) = archived().await;
        let scope = scope_labels(&Scope::default());
        for bad in ["/etc:/x", "v:/host", "../v", "-v", "", "v w", "v\n"] {
            edit_manifest(&path, |m| m.volume = bad.into());
            let calls = engine.calls().len();
            let e = restore(&engine, &path, None, &scope).await.unwrap_err();
            assert!(matches!(e, RestoreError::BadName { .. }), "{bad:?}: {e}");
            assert_eq!(
                engine.calls().len(),
                calls,
                "{bad:?}: an engine call was made"
            );
            let e = restore(&engine, &path, Some(bad), &scope)
                .await
                .unwrap_err();
            assert!(matches!(e, RestoreError::BadName { .. }), "{bad:?}: {e}");
        }
    }

    #[tokio::test]
    async fn a_manifest_s_labels_never_unmanage_or_lease_the_volume() {
        let (_dir, engine, path) = archived().await;
        edit_manifest(&path, |m| {
            m.labels = [
                ("ca.sandbox", "0"),
                (crate::model::lease::LEASE_TTL_LABEL, "24h"),
                ("ca.sandbox.test", "another-scope"),
                ("team", "a"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        });
        let scope = scope_labels(&Scope::new(
            [("ca.sandbox.test".to_string(), "mine".to_string())].into(),
        ));
        let r = restore(&engine, &path, None, &scope).await.unwrap();
        let v = volume_named(&engine, &r.volume);
        assert_eq!(v.labels.get("ca.sandbox").map(String::as_str), Some("1"));
        assert_eq!(
            v.labels.get("ca.sandbox.test").map(String::as_str),
            Some("mine")
        );
        assert_eq!(v.labels.get("ca.sandbox.id").map(String::as_str), Some("b"));
        assert_eq!(v.labels.get("team").map(String::as_str), Some("a"));
        assert!(!v.labels.contains_key(crate::model::lease::LEASE_TTL_LABEL));
    }

    #[tokio::test]
    async fn a_volume_someone_else_made_at_the_create_is_never_filled_nor_removed() {
        let (_dir, engine, path) = archived().await;
        // The volume does not exist when restore looks, then another actor
        // makes it, unlabeled, just before restore's create (which Docker
        // answers with that volume, unchanged).
        let unlabeled = crate::engine::memory::VolumeInfo {
            name: "v".into(),
            labels: Labels::new(),
            created_at: None,
        };
        engine.inject(
            Op::Create(Kind::Volume),
            Some("v"),
            FaultAction::VolumeAppears(unlabeled.clone()),
            1,
        );
        engine.inject(
            Op::CreateHelper,
            None,
            FaultAction::Fail(EngineError::status_500("create a helper container", "no")),
            usize::MAX,
        );
        let scope = scope_labels(&Scope::default());
        let before = engine.calls().len();
        let e = restore(&engine, &path, None, &scope).await.unwrap_err();
        assert_eq!(e, RestoreError::Exists("v".into()));
        let v = engine.world().volumes.into_iter().find(|v| v.name == "v");
        assert_eq!(v, Some(unlabeled), "the other actor's volume is untouched");
        let calls = engine.calls()[before..].to_vec();
        assert!(
            calls
                .iter()
                .all(|c| !c.starts_with("Remove") && !c.starts_with("CreateHelper")),
            "{calls:?}"
        );
    }

    #[tokio::test]
    async fn restores_what_was_archived_and_refuses_an_existing_volume() {
        let (_dir, engine, path) = archived().await;
        let scope = scope_labels(&Scope::default());
        let r = restore(&engine, &path, None, &scope).await.unwrap();
        assert_eq!(r.volume, "v");
        let mut labels = r.labels.clone();
        assert!(labels.remove(RESTORE_LABEL).is_some(), "{labels:?}");
        assert_eq!(labels, box_labels("b"));
        assert_eq!(engine.content("v"), sample_tar());
        assert!(engine.world().containers.is_empty(), "the helper is gone");
        let again = restore(&engine, &path, None, &scope).await.unwrap_err();
        assert_eq!(again, RestoreError::Exists("v".into()));
        let other = restore(&engine, &path, Some("w"), &scope).await.unwrap();
        assert_eq!(other.volume, "w");
        assert_eq!(engine.content("w"), sample_tar());
    }

    #[tokio::test]
    async fn restore_checks_the_checksum_first() {
        let (_dir, engine, path) = archived().await;
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        let calls = engine.calls().len();
        let e = restore(&engine, &path, None, &scope_labels(&Scope::default()))
            .await
            .unwrap_err();
        assert!(matches!(e, RestoreError::Checksum { .. }), "{e}");
        assert_eq!(
            engine.calls().len(),
            calls,
            "no engine call before the check"
        );
    }

    #[tokio::test]
    async fn a_failed_fill_removes_the_volume_it_created() {
        let (_dir, engine, path) = archived().await;
        engine.inject(Op::Upload, None, FaultAction::Fail(boom()), 1);
        let e = restore(&engine, &path, None, &scope_labels(&Scope::default()))
            .await
            .unwrap_err();
        assert!(matches!(e, RestoreError::Engine(_)), "{e}");
        assert!(engine.world().volumes.is_empty());
        assert!(engine.world().containers.is_empty());
    }
}
