//! The crash-safe file protocol of an archive: a writer makes its archive
//! and manifest as hidden temporary files (`.<base>.tar.zst.partial`,
//! `.<base>.json.partial`), each under a lock that lives as long as the
//! writer, then renames the manifest, then the archive, to their final
//! names and fsyncs the folder. So an archive under a final name always has
//! its manifest, and a partial archive never stands under a final name; on
//! any failure the temporary files (and a manifest renamed before its
//! archive) go. Before writing into a folder a writer sweeps what dead
//! writers left there (`sweep`), never a living writer's file.
//!
//! Owns the names a writer picks in its folder, the temporary files, their
//! locks, the renames and the sweep. Every file goes through `exec::files`
//! (`0600`, exclusive create, never through a link). Must not decide what
//! goes into the archive (the pipeline does) nor call an engine.

use std::io::{self, Read, Write};
use std::path::PathBuf;

use super::manifest::Manifest;
use super::place::Place;
use super::ArchiveError;
use crate::exec::files::Folder;

/// The suffix of every temporary file a writer makes (`.<name>.partial`).
const PARTIAL: &str = ".partial";

/// A temporary file (`.<name>.partial`) under an exclusive advisory lock
/// (`flock`) for as long as this lives: the lock says "its writer is alive".
/// The kernel lets go of it when the writer's process ends, however it ends,
/// so a temporary file whose lock can be taken has a dead writer (or one
/// that has renamed it away). Dropping this unlocks; it never removes.
#[derive(Debug)]
struct Partial {
    file: std::fs::File,
}

impl Partial {
    /// Creates `name` in `folder` (never an existing file nor through a
    /// link; `0600`) and locks it. A sweep may
    /// take the file between its creation and the lock (it is unlocked
    /// then): the lock is taken first, then `name` is checked to still be
    /// this file; if a sweep removed it, it is made again (a few times).
    fn create(folder: &Folder, name: &str) -> io::Result<Partial> {
        for _ in 0..3 {
            let file = folder.create_new(name)?;
            // Blocking: a sweep holds it only while it removes it.
            file.lock()?;
            if folder.names(name, &file)? {
                return Ok(Partial { file });
            }
        }
        Err(io::Error::other(
            "another run's sweep kept removing this temporary file",
        ))
    }
}

/// Opens the temporary file `name` of `folder` (never through a link) and
/// takes its lock if no one holds it: `Some` (locked, and `name` still
/// names it) when its writer is dead or gone; `None` when a living writer
/// holds it, or it is not there.
fn take_dead(folder: &Folder, name: &str) -> Option<std::fs::File> {
    let file = folder.open_read(name).ok()?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) | Err(std::fs::TryLockError::Error(_)) => {
            return None
        }
    }
    // Its writer may have renamed it to its final name and let go since it
    // was opened: then `name` no longer names it.
    folder.names(name, &file).ok()?.then_some(file)
}

/// Whether `name` is a temporary file a writer of this module makes:
/// `.<base>.tar.zst.partial` or `.<base>.json.partial`.
fn is_partial_name(name: &str) -> bool {
    name.len() > 1
        && name.starts_with('.')
        && (name.ends_with(".tar.zst.partial") || name.ends_with(".json.partial"))
}

/// Removes what killed writers left in `folder` (one box's folder of one
/// engine), never a living writer's file. Called by every writer before it
/// writes into the folder; returns what it removed. Best effort: a file it
/// cannot look at or remove is left (it never stands under a final name).
///
/// * A temporary file (`.<base>.tar.zst.partial`, `.<base>.json.partial`,
///   a regular file) goes when its lock can be taken (see [`Partial`]).
/// * A manifest `<base>.json` (one this module wrote: it reads as a manifest
///   naming `<base>.tar.zst`) whose archive `<base>.tar.zst` is absent goes
///   when its writer is dead: that writer was killed between the manifest's
///   rename and the archive's (or during its own cleanup). Its
///   `.<base>.tar.zst.partial`, if any, must be lockable first, and only
///   then is the archive looked for: a living writer holds that lock until
///   its archive stands under its final name.
fn sweep(folder: &Folder) -> Vec<PathBuf> {
    let Ok(mut names) = folder.entries() else {
        return Vec::new();
    };
    names.retain(|name| folder.is_file(name));
    names.sort();
    let mut removed = Vec::new();
    for name in &names {
        if is_partial_name(name) {
            if let Some(held) = take_dead(folder, name) {
                if folder.remove(name).is_ok() {
                    removed.push(folder.join(name));
                }
                drop(held);
            }
        } else if let Some(base) = name.strip_suffix(".json").filter(|b| !b.starts_with('.')) {
            let archive = format!("{base}.tar.zst");
            let partial = format!(".{archive}{PARTIAL}");
            // The writer's lock first: `None` is a living writer, or no file.
            let held = take_dead(folder, &partial);
            if held.is_none() && folder.exists(&partial).unwrap_or(true) {
                continue;
            }
            if folder.exists(&archive).unwrap_or(true) {
                continue;
            }
            let ours = folder
                .open_read(name)
                .and_then(|mut f| {
                    let mut bytes = Vec::new();
                    f.read_to_end(&mut bytes).map(|_| bytes)
                })
                .ok()
                .and_then(|b| serde_json::from_slice::<Manifest>(&b).ok())
                .is_some_and(|m| m.archive == archive);
            if !ours {
                continue;
            }
            if held.is_some() && folder.remove(&partial).is_ok() {
                removed.push(folder.join(&partial));
            }
            if folder.remove(name).is_ok() {
                removed.push(folder.join(name));
            }
        }
    }
    removed
}

/// How many archives of one volume may be written within one second (the
/// name's time resolution): `<base>`, then `<base>-1` ...
const MAX_SAME_SECOND: usize = 100;

/// A writer's archive on its way: the folder opened and swept, a free
/// `<base>` picked, its temporary archive made and locked. Dropped before
/// [`Pending::commit`] has finished, it removes what it names (`names`): a
/// failure at any point leaves no temporary file and no half-named pair.
/// The temporary files' locks (`held`) are let go only after the removals,
/// so no sweep takes a file this writer still means to remove or rename.
pub(super) struct Pending {
    folder: Folder,
    /// The `<base>` picked (free in the folder).
    base: String,
    /// What goes when this is dropped; cleared once committed.
    names: Vec<String>,
    held: Vec<Partial>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = self.folder.remove(name);
        }
        // `held` is dropped after this body: the locks go last.
    }
}

impl Pending {
    /// Opens `place`, sweeps it, picks `base` or the next free `<base>-N`,
    /// and makes the temporary archive, locked until the archive stands
    /// under its final name (see `sweep`). Returns it with a second handle
    /// of the same open file for the encoder to write through.
    pub(super) fn begin(
        place: &Place,
        base: &str,
    ) -> Result<(Pending, std::fs::File), ArchiveError> {
        let folder = place.open()?;
        // What killed writers left here goes first (never a living writer's).
        sweep(&folder);
        // The name carries the time to the second: the same volume archived
        // again within that second (a run after a killed one) takes the next
        // free `<base>-N`, never an existing archive's name.
        let mut chosen = None;
        for n in 0..MAX_SAME_SECOND {
            let candidate = if n == 0 {
                base.to_string()
            } else {
                format!("{base}-{n}")
            };
            let mut free = true;
            for name in [format!("{candidate}.tar.zst"), format!("{candidate}.json")] {
                match folder.exists(&name) {
                    Ok(false) => {}
                    Ok(true) => free = false,
                    Err(e) => return Err(ArchiveError::io("write", &folder.join(&name), e)),
                }
            }
            if free {
                chosen = Some(candidate);
                break;
            }
        }
        let Some(base) = chosen else {
            let p = folder.join(&format!("{base}.tar.zst"));
            return Err(ArchiveError::io(
                "write",
                &p,
                io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("it and {MAX_SAME_SECOND} names after it already exist"),
                ),
            ));
        };
        let tmp_archive_name = format!(".{base}.tar.zst{PARTIAL}");
        let tmp_manifest_name = format!(".{base}.json{PARTIAL}");
        let tmp_archive = folder.join(&tmp_archive_name);
        let mut pending = Pending {
            folder,
            base,
            names: vec![tmp_archive_name.clone(), tmp_manifest_name],
            held: Vec::new(),
        };
        // Locked until the archive stands under its final name (see `sweep`):
        // the encoder writes through a second handle of the same open file.
        let partial = Partial::create(&pending.folder, &tmp_archive_name)
            .map_err(|e| ArchiveError::io("create", &tmp_archive, e))?;
        let file = partial
            .file
            .try_clone()
            .map_err(|e| ArchiveError::io("create", &tmp_archive, e))?;
        pending.held.push(partial);
        Ok((pending, file))
    }

    /// The archive's final name: `<base>.tar.zst`.
    pub(super) fn archive_name(&self) -> String {
        format!("{}.tar.zst", self.base)
    }

    /// The temporary archive's path (what a failed write names).
    pub(super) fn tmp_archive(&self) -> PathBuf {
        self.folder
            .join(&format!(".{}{PARTIAL}", self.archive_name()))
    }

    /// Once the archive is written and synced: writes `manifest` to its
    /// temporary file (synced), renames the manifest, then the archive, to
    /// their final names, and syncs the folder. Returns the archive's and
    /// the manifest's final paths.
    pub(super) fn commit(
        mut self,
        manifest: &Manifest,
    ) -> Result<(PathBuf, PathBuf), ArchiveError> {
        let folder = &self.folder;
        let archive_name = self.archive_name();
        let manifest_name = format!("{}.json", self.base);
        let final_archive = folder.join(&archive_name);
        let final_manifest = folder.join(&manifest_name);
        let tmp_archive_name = format!(".{archive_name}{PARTIAL}");
        let tmp_manifest_name = format!(".{manifest_name}{PARTIAL}");
        let tmp_archive = folder.join(&tmp_archive_name);
        let tmp_manifest = folder.join(&tmp_manifest_name);
        let json = serde_json::to_vec_pretty(manifest).expect("a manifest serializes");
        // Held at once: on a failure its lock goes only after its removal.
        self.held.push(
            Partial::create(folder, &tmp_manifest_name)
                .map_err(|e| ArchiveError::io("create", &tmp_manifest, e))?,
        );
        let mut m = &self.held[self.held.len() - 1].file;
        m.write_all(&json)
            .and_then(|()| m.write_all(b"\n"))
            .and_then(|()| m.sync_all())
            .map_err(|e| ArchiveError::io("write", &tmp_manifest, e))?;
        folder
            .rename(&tmp_manifest_name, &manifest_name)
            .map_err(|e| ArchiveError::io("rename", &tmp_manifest, e))?;
        // From here on a failure also takes the manifest back.
        self.names.push(manifest_name.clone());
        folder
            .rename(&tmp_archive_name, &archive_name)
            .map_err(|e| ArchiveError::io("rename", &tmp_archive, e))?;
        // And from here the archive too, before its manifest: never an
        // archive under a final name without its manifest.
        let at = self.names.len() - 1;
        self.names.insert(at, archive_name);
        folder
            .sync()
            .map_err(|e| ArchiveError::io("sync folder", folder.path(), e))?;
        self.names.clear();
        Ok((final_archive, final_manifest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::memory::box_labels;
    use crate::exec::archive::manifest::MANIFEST_VERSION;
    use crate::exec::archive::place::folder;
    use crate::exec::archive::tests::{engine_with, files, goal, image, run};
    use std::path::Path;

    /// A manifest as a writer of this module leaves it, naming `archive`.
    fn manifest_naming(archive: &str) -> Vec<u8> {
        serde_json::to_vec(&Manifest {
            version: MANIFEST_VERSION,
            engine: "default".into(),
            volume: "v".into(),
            labels: box_labels("b"),
            created_at: None,
            box_id: Some("b".into()),
            archive: archive.into(),
            sha256: "00".into(),
            size: 1,
            uncompressed_size: 1024,
            file_count: 1,
            time: "2026-01-01T00:00:00Z".into(),
            format: "tar+zstd".into(),
            root: "ca-sbx-volume".into(),
        })
        .unwrap()
    }

    /// `super::sweep` of the folder at `path`.
    fn sweep(path: &Path) -> Vec<PathBuf> {
        super::sweep(&Folder::open(path).unwrap())
    }

    /// `Partial::create` of the file at `path`.
    fn partial(path: &Path) -> Partial {
        let folder = Folder::open(path.parent().unwrap()).unwrap();
        Partial::create(&folder, path.file_name().unwrap().to_str().unwrap()).unwrap()
    }

    fn names(dir: &Path, paths: &[PathBuf]) -> Vec<String> {
        paths
            .iter()
            .map(|p| p.strip_prefix(dir).unwrap().display().to_string())
            .collect()
    }

    /// The name carries the time to the second: an archive of the same
    /// volume in the same second (a run right after a killed one) takes the
    /// next free `<base>-N`, and never the name of an archive that stands.
    #[test]
    fn an_archive_in_a_taken_second_takes_the_next_free_name_and_never_an_existing_one() {
        let dir = tempfile::tempdir().unwrap();
        let place = Place::new(dir.path(), "default", Some("b"));
        let at = folder(dir.path(), "default", Some("b"));
        let base = "v-20260101T000000Z";
        let chosen = || Pending::begin(&place, base).map(|(pending, _)| pending.base.clone());
        assert_eq!(chosen().unwrap(), base);
        let take = |name: &str| {
            std::fs::write(at.join(format!("{name}.tar.zst")), b"an archive").unwrap();
            let manifest = manifest_naming(&format!("{name}.tar.zst"));
            std::fs::write(at.join(format!("{name}.json")), manifest).unwrap();
        };
        take(base);
        assert_eq!(chosen().unwrap(), format!("{base}-1"));
        take(&format!("{base}-1"));
        assert_eq!(chosen().unwrap(), format!("{base}-2"));
        for n in 2..MAX_SAME_SECOND {
            take(&format!("{base}-{n}"));
        }
        let e = chosen().unwrap_err().to_string();
        assert!(e.contains("names after it already exist"), "{e}");
        // What stood there is untouched, and nothing else is left.
        assert_eq!(
            std::fs::read(at.join(format!("{base}.tar.zst"))).unwrap(),
            b"an archive"
        );
        assert_eq!(
            std::fs::read_dir(&at).unwrap().count(),
            2 * MAX_SAME_SECOND,
            "only the archives and their manifests"
        );
    }

    #[test]
    fn a_held_temporary_file_is_never_swept_and_a_dead_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join(".v-1.tar.zst.partial");
        let held = partial(&live);
        (&held.file).write_all(b"in progress").unwrap();
        // Dead writers: one never locked (as if killed before), one whose
        // lock went with it.
        std::fs::write(dir.path().join(".v-0.tar.zst.partial"), b"cut short").unwrap();
        drop(partial(&dir.path().join(".v-0.json.partial")));
        let_go(&dir.path().join(".v-0.json.partial"));
        let removed = sweep(dir.path());
        assert_eq!(
            names(dir.path(), &removed),
            [".v-0.json.partial", ".v-0.tar.zst.partial"]
        );
        assert_eq!(std::fs::read(&live).unwrap(), b"in progress");
        assert!(sweep(dir.path()).is_empty(), "held: never swept");
        drop(held);
        let_go(&live);
        assert_eq!(
            names(dir.path(), &sweep(dir.path())),
            [".v-1.tar.zst.partial"]
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_lock_held_by_another_process_keeps_the_file_until_that_process_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".v-1.tar.zst.partial");
        std::fs::write(&path, b"another run's").unwrap();
        // flock(1) holds the lock as long as its child runs.
        let mut holder = std::process::Command::new("flock")
            .arg("-x")
            .arg(&path)
            .args(["sleep", "60"])
            .spawn()
            .expect("run flock(1)");
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !taken(&path) {
            assert!(std::time::Instant::now() < until, "flock(1) took no lock");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(sweep(dir.path()).is_empty());
        assert!(path.exists());
        // SIGKILL its sleep, which holds the lock too, then flock(1), by
        // their pids: the kernel lets go of the lock.
        let pid = holder.id();
        let children = loop {
            let c = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap();
            if !c.trim().is_empty() {
                break c;
            }
            assert!(
                std::time::Instant::now() < until,
                "flock(1) started no child"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        for child in children.split_whitespace() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", child])
                .status();
        }
        holder.kill().unwrap();
        holder.wait().unwrap();
        // The killed sleep lets go of the lock when it has exited, which
        // kill(1) does not wait for.
        while taken(&path) {
            assert!(
                std::time::Instant::now() < until,
                "the lock outlived its holders"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(
            names(dir.path(), &sweep(dir.path())),
            [".v-1.tar.zst.partial"]
        );
    }

    /// Whether another open file description holds `p`'s lock.
    fn taken(p: &Path) -> bool {
        let f = std::fs::File::open(p).unwrap();
        matches!(f.try_lock(), Err(std::fs::TryLockError::WouldBlock))
    }

    /// Waits (10 s at most) until nothing holds `p`'s lock, after its
    /// holder was dropped: a child another test forks in that instant holds
    /// the lock (and the descriptor) until it execs.
    fn let_go(p: &Path) {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while taken(p) {
            assert!(
                std::time::Instant::now() < until,
                "the lock outlived its holder"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    #[test]
    fn a_manifest_without_its_archive_goes_only_once_its_writer_is_dead() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // Killed between the manifest's rename and the archive's: its
        // temporary archive, still locked while the writer lives.
        std::fs::write(d.join("v-1.json"), manifest_naming("v-1.tar.zst")).unwrap();
        let held = partial(&d.join(".v-1.tar.zst.partial"));
        assert!(sweep(d).is_empty(), "its writer is alive");
        assert!(d.join("v-1.json").exists());
        drop(held);
        let_go(&d.join(".v-1.tar.zst.partial"));
        assert_eq!(
            names(d, &sweep(d)),
            [".v-1.tar.zst.partial", "v-1.json"],
            "its writer is dead"
        );
        // Killed in its own cleanup: the temporary archive already gone.
        std::fs::write(d.join("v-2.json"), manifest_naming("v-2.tar.zst")).unwrap();
        assert_eq!(names(d, &sweep(d)), ["v-2.json"]);
    }

    #[test]
    fn a_sweep_keeps_complete_pairs_and_files_not_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("v-1.json"), manifest_naming("v-1.tar.zst")).unwrap();
        std::fs::write(d.join("v-1.tar.zst"), b"complete").unwrap();
        std::fs::write(d.join("notes.json"), b"{\"mine\": true}").unwrap();
        std::fs::write(d.join("v-3.json"), manifest_naming("other.tar.zst")).unwrap();
        std::fs::write(d.join("x.tar.zst.partial"), b"not hidden").unwrap();
        std::fs::write(d.join(".x.partial"), b"not a writer's").unwrap();
        std::fs::create_dir(d.join(".dir.tar.zst.partial")).unwrap();
        let before = files(d);
        assert!(sweep(d).is_empty());
        assert_eq!(files(d), before);
    }

    #[tokio::test]
    async fn a_run_sweeps_what_killed_runs_left_in_its_folder_but_not_a_living_writers_file() {
        let dir = tempfile::tempdir().unwrap();
        let box_folder = folder(dir.path(), "default", Some("b"));
        std::fs::create_dir_all(&box_folder).unwrap();
        // A killed run's: a manifest renamed, its archive not; and the
        // temporary archive of another volume.
        let old = "v-20250101T000000Z";
        std::fs::write(
            box_folder.join(format!("{old}.json")),
            manifest_naming(&format!("{old}.tar.zst")),
        )
        .unwrap();
        std::fs::write(box_folder.join(format!(".{old}.tar.zst.partial")), b"x").unwrap();
        std::fs::write(box_folder.join(".w-20250101T000000Z.tar.zst.partial"), b"x").unwrap();
        // A run still writing (its lock held).
        let live = box_folder.join(".u-20250101T000000Z.tar.zst.partial");
        let held = partial(&live);
        // And a folder this run does not write into: left as it is.
        let other = folder(dir.path(), "default", Some("other"));
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join(".z-20250101T000000Z.tar.zst.partial"), b"x").unwrap();

        let engine = engine_with(vec![image()]);
        let report = run(&engine, &goal(dir.path())).await;
        assert!(report.converged, "{report:?}");
        let archive = PathBuf::from(&report.archived[0].path);
        let base = archive.file_name().unwrap().to_string_lossy();
        let base = base.trim_end_matches(".tar.zst");
        assert_eq!(
            files(dir.path()),
            [
                "default/b/.u-20250101T000000Z.tar.zst.partial".to_string(),
                format!("default/b/{base}.json"),
                format!("default/b/{base}.tar.zst"),
                "default/other/.z-20250101T000000Z.tar.zst.partial".to_string(),
            ]
        );
        drop(held);
    }
}
