//! Archiving through `apply` on the in-memory engine, end to end: the
//! helper, the box's own container, the files, every failure leaving the
//! volume; and the fixtures the other files' tests share.

use std::path::{Path, PathBuf};

use super::helper::{helper_labels, scope_labels};
use super::manifest::{manifest_path, read_manifest};
use super::restore::{restore, sha256_file};
use crate::engine::memory::{
    box_labels, ContainerInfo, FaultAction, MemoryEngine, Op, VolumeInfo, World,
};
use crate::engine::{Engine, EngineError, ErrorKind, Helper, HELPER_MOUNT};
use crate::exec::files::tests::{mode, umask_022};
use crate::exec::reconcile::tests::{applied, once, NOW};
use crate::model::{
    ImageInfo, Kind, ObjectKey, Outcome, Reason, Scope, ARCHIVE_HELPER_ROLE, ROLE_LABEL,
};
use crate::plan::{ArchivePolicy, Goal};

/// A tar as the engine streams a helper's mount: `ca-sbx-volume/` and
/// what is under it, a long name (a GNU or pax header) among them.
pub(super) fn sample_tar() -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut dir = tar::Header::new_gnu();
    dir.set_entry_type(tar::EntryType::Directory);
    dir.set_size(0);
    dir.set_mode(0o755);
    b.append_data(&mut dir, "ca-sbx-volume/", std::io::empty())
        .unwrap();
    let long = format!("ca-sbx-volume/{}", "n".repeat(150));
    for (name, data) in [
        ("ca-sbx-volume/a.txt", b"hello".to_vec()),
        ("ca-sbx-volume/empty", vec![]),
        (long.as_str(), vec![7u8; 70_000]),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, name, data.as_slice()).unwrap();
    }
    b.into_inner().unwrap()
}

pub(super) fn volume(name: &str, box_id: &str) -> VolumeInfo {
    VolumeInfo {
        name: name.into(),
        labels: box_labels(box_id),
        created_at: Some("2026-01-01T00:00:00Z".into()),
    }
}

pub(super) fn image() -> ImageInfo {
    ImageInfo {
        id: "sha256:feed".into(),
        tags: vec!["ca-sbx:repo-1".into()],
    }
}

/// Box `b` (undeclared): a container mounting volume `v`, and the image.
pub(super) fn engine_with(images: Vec<ImageInfo>) -> MemoryEngine {
    let mut c = ContainerInfo::new("c1", "web", box_labels("b"));
    c.mounts.insert("v".into());
    let engine = MemoryEngine::new(World {
        containers: vec![c],
        volumes: vec![volume("v", "b")],
        images,
        ..World::default()
    });
    engine.set_content("v", sample_tar());
    engine
}

pub(super) fn goal(dir: &Path) -> Goal {
    Goal::nothing_declared().with_archive(Some(ArchivePolicy::new(&dir.to_string_lossy())))
}

pub(super) async fn run(engine: &MemoryEngine, goal: &Goal) -> crate::exec::report::Report {
    once(engine, goal).await.unwrap()
}

/// Every file under `dir`, relative, sorted.
pub(super) fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn archives_then_removes_through_a_labeled_helper() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(vec![image()]);
    let report = run(&engine, &goal(dir.path())).await;
    assert!(report.converged, "{report:?}");
    assert!(engine.world().volumes.is_empty());
    assert!(engine.world().containers.is_empty(), "the helper is gone");
    assert_eq!(report.archived.len(), 1);
    let a = &report.archived[0];
    assert_eq!(a.volume, "v");
    let path = PathBuf::from(&a.path);
    assert!(path.starts_with(dir.path().join("default").join("b")));
    let found = files(dir.path());
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found.iter().all(|f| !f.contains(".partial")));
    // The archive is the volume's tar, zstd-compressed; the manifest says so.
    let back = zstd::stream::decode_all(std::fs::File::open(&path).unwrap()).unwrap();
    assert_eq!(back, sample_tar());
    let m = read_manifest(&path).unwrap();
    assert_eq!((m.volume.as_str(), m.box_id.as_deref()), ("v", Some("b")));
    assert_eq!(m.labels, box_labels("b"));
    assert_eq!(m.created_at.as_deref(), Some("2026-01-01T00:00:00Z"));
    assert_eq!(m.file_count, 4);
    assert_eq!(m.uncompressed_size, sample_tar().len() as u64);
    // Without --reclaimed the volume's figure is its archived files (5 +
    // 0 + 70,000 bytes); the container was not measured.
    assert_eq!(report.removed.volumes[0].reclaimed_bytes, Some(70_005));
    assert_eq!(report.removed.containers[0].reclaimed_bytes, None);
    assert_eq!(report.reclaimed.total(), Some(70_005));
    assert_eq!(report.reclaimed.unmeasured, 1);
    assert_eq!(m.sha256, sha256_file(&path).unwrap());
    assert_eq!(m.sha256, a.sha256);
    assert_eq!(m.size, std::fs::metadata(&path).unwrap().len());
    // The helper: made from the image by ID, mounting the volume, then
    // removed; the volume removed only after.
    let calls = engine.calls();
    let pos = |c: &str| {
        calls
            .iter()
            .position(|x| x == c)
            .unwrap_or_else(|| panic!("{c} in {calls:?}"))
    };
    let helper = calls
        .iter()
        .find(|c| c.starts_with("Remove(Container) 0"))
        .expect("the helper's removal");
    assert!(pos("CreateHelper v") < pos(helper));
    assert!(pos(helper) < pos("Remove(Volume) v"));
}

/// Box `b` whose container runs and tells where it mounts `v`: `/data`.
fn engine_through(images: Vec<ImageInfo>) -> MemoryEngine {
    let engine = engine_with(images);
    let mut world = engine.world();
    world.containers[0].state = "running".into();
    world.containers[0].paths.insert("v".into(), "/data".into());
    let engine = MemoryEngine::new(world);
    engine.set_content("v", sample_tar());
    engine
}

#[tokio::test]
async fn reads_a_volume_through_its_stopped_container_before_removing_it() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_through(vec![image()]);
    let listed = crate::exec::list::inventory(&engine, &Scope::default())
        .await
        .unwrap();
    let plan = crate::plan::Plan::build(&goal(dir.path()), &listed, NOW);
    let (c, v) = (&plan.steps[0], &plan.steps[1]);
    assert_eq!(c.reads.len(), 1, "{plan:?}");
    assert_eq!(
        (c.reads[0].volume.as_str(), c.reads[0].path.as_str()),
        ("v", "/data")
    );
    assert_eq!((c.reads[0].step, v.archived_by), (2, Some(1)));
    plan.validate().unwrap();
    let report = run(&engine, &goal(dir.path())).await;
    assert!(report.converged, "{report:?}");
    assert_eq!(report.archived.len(), 1);
    let calls = engine.calls();
    assert!(
        !calls.iter().any(|c| c.starts_with("CreateHelper")),
        "{calls:?}"
    );
    let pos = |c: &str| {
        calls
            .iter()
            .position(|x| x == c)
            .unwrap_or_else(|| panic!("{c} in {calls:?}"))
    };
    // Stopped, read, removed; then the volume.
    assert!(pos("Stop c1") < pos("Download c1"));
    assert!(pos("Download c1") < pos("Remove(Container) c1"));
    assert!(pos("Remove(Container) c1") < pos("Remove(Volume) v"));
    let path = PathBuf::from(&report.archived[0].path);
    let m = read_manifest(&path).unwrap();
    assert_eq!(m.root, "data");
    assert_eq!(m.sha256, sha256_file(&path).unwrap());
    // Restored through a helper that mounts the volume at the archive's root.
    let r = restore(&engine, &path, None, &scope_labels(&Scope::default()))
        .await
        .unwrap();
    assert_eq!(r.volume, "v");
    assert_eq!(engine.content("v"), sample_tar());
}

/// A run archiving under `dir` in which the first download from `engine`
/// is cut after 70 000 bytes.
async fn run_download_cut(engine: &MemoryEngine, dir: &Path) -> crate::exec::report::Report {
    engine.inject(Op::Download, None, FaultAction::CutAfter(70_000, boom()), 1);
    run(engine, &goal(dir)).await
}

#[tokio::test]
async fn a_failed_read_through_the_container_leaves_it_stopped_and_the_volume() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_through(vec![image()]);
    let report = run_download_cut(&engine, dir.path()).await;
    assert!(!report.converged);
    assert!(report.archived.is_empty());
    let world = engine.world();
    assert_eq!(world.containers.len(), 1, "the container stays");
    assert_eq!(world.containers[0].state, "exited", "stopped");
    assert_eq!(world.volumes.len(), 1, "the volume stays");
    assert_eq!(engine.content("v"), sample_tar());
    assert_eq!(files(dir.path()), Vec::<String>::new());
    assert!(matches!(
        report.remaining.containers[0].reason,
        Reason::ArchiveFailed { .. }
    ));
    assert!(
        report.failures[0].error.contains("volume v (read at /data"),
        "{report:?}"
    );
    // The next run reads it again and converges.
    let report = run(&engine, &goal(dir.path())).await;
    assert!(report.converged, "{report:?}");
    assert_eq!(report.archived.len(), 1);
}

#[tokio::test]
async fn a_container_gone_before_its_read_leaves_the_volume_to_a_helper() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_through(vec![image()]);
    engine.inject(Op::Stop, None, FaultAction::VanishFirst, 1);
    let report = run(&engine, &goal(dir.path())).await;
    assert!(report.converged, "{report:?}");
    assert_eq!(report.archived.len(), 1, "never removed unarchived");
    assert!(engine.calls().iter().any(|c| c == "CreateHelper v"));
    let m = read_manifest(Path::new(&report.archived[0].path)).unwrap();
    assert_eq!(m.root, "ca-sbx-volume");
}

/// The engine finds no mount at the read's path (Docker 20.10 once said
/// "Could not find the file /v/0" of a stopped box right after a restart):
/// the volume is archived through a helper instead, and the run converges.
#[tokio::test]
async fn a_read_that_finds_no_path_leaves_the_volume_to_a_helper() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_through(vec![image()]);
    let missing = EngineError::new(
        String::from("read /data of container c1"),
        ErrorKind::NotFound {
            message: "Could not find the file /data in container c1".into(),
        },
    );
    engine.inject(Op::Download, Some("c1"), FaultAction::Fail(missing), 1);
    let report = run(&engine, &goal(dir.path())).await;
    assert!(report.converged, "{report:?}");
    assert_eq!(report.archived.len(), 1, "never removed unarchived");
    assert!(engine.calls().iter().any(|c| c == "CreateHelper v"));
    let m = read_manifest(Path::new(&report.archived[0].path)).unwrap();
    assert_eq!(m.root, "ca-sbx-volume", "read through the helper");
    assert!(engine.world().volumes.is_empty() && engine.world().containers.is_empty());
}

#[tokio::test]
async fn a_volume_two_containers_mount_is_read_through_a_helper() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_through(vec![image()]);
    let mut world = engine.world();
    let mut other = ContainerInfo::new("c2", "side", box_labels("b"));
    other.mounts.insert("v".into());
    other.paths.insert("v".into(), "/side".into());
    world.containers.push(other);
    let engine = MemoryEngine::new(world);
    engine.set_content("v", sample_tar());
    let listed = crate::exec::list::inventory(&engine, &Scope::default())
        .await
        .unwrap();
    let plan = crate::plan::Plan::build(&goal(dir.path()), &listed, NOW);
    assert!(plan
        .steps
        .iter()
        .all(|s| s.reads.is_empty() && s.archived_by.is_none()));
    let report = run(&engine, &goal(dir.path())).await;
    assert!(report.converged, "{report:?}");
    assert!(engine.calls().iter().any(|c| c == "CreateHelper v"));
}

/// A helper a killed run asked for, made by the engine only after this
/// run planned, holds the volume: it goes (it is one of ours, labeled),
/// and the volume with it. Any other holder fails the volume's step.
#[tokio::test]
async fn a_late_helper_of_the_scope_does_not_keep_a_volume() {
    for (role, removed) in [(true, true), (false, false)] {
        let engine = MemoryEngine::new(World {
            volumes: vec![volume("v", "b")],
            images: vec![image()],
            ..World::default()
        });
        let goal = Goal::nothing_declared();
        let listed = crate::exec::list::inventory(&engine, &Scope::default())
            .await
            .unwrap();
        let plan = crate::plan::Plan::build(&goal, &listed, NOW);
        let mut labels = helper_labels(&scope_labels(&Scope::default()), Some("b"));
        if !role {
            labels.remove(ROLE_LABEL);
        }
        let late = Helper {
            image: "sha256:feed".into(),
            volume: "v".into(),
            mount: HELPER_MOUNT.into(),
            labels,
        };
        engine.create_helper(&late).await.unwrap();
        let applied = applied(&engine, &plan).await;
        let world = engine.world();
        if removed {
            assert_eq!(applied.outcomes, vec![Outcome::Removed]);
            assert!(world.volumes.is_empty() && world.containers.is_empty());
        } else {
            assert!(
                matches!(applied.outcomes[0], Outcome::Failed(_)),
                "{applied:?}"
            );
            assert_eq!((world.volumes.len(), world.containers.len()), (1, 1));
        }
    }
}

#[tokio::test]
async fn the_helper_carries_the_scope_the_box_and_the_role() {
    let labels = helper_labels(&box_labels("ignored"), Some("b"));
    assert_eq!(labels.get("ca.sandbox").map(String::as_str), Some("1"));
    assert_eq!(labels.get("ca.sandbox.id").map(String::as_str), Some("b"));
    assert_eq!(
        labels.get("ca.sandbox.role").map(String::as_str),
        Some("archive-helper")
    );
    // Seen on the engine while it exists: fail the download to keep it
    // until the removal, and look at what was created.
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(vec![image()]);
    let v = engine
        .inspect(&ObjectKey::new("default", Kind::Volume, "v"))
        .await
        .unwrap();
    let scope = scope_labels(&Scope::default());
    let helper = Helper {
        image: "sha256:feed".into(),
        volume: "v".into(),
        mount: HELPER_MOUNT.into(),
        labels: helper_labels(&scope, v.box_id()),
    };
    let id = engine.create_helper(&helper).await.unwrap();
    let made = engine
        .world()
        .containers
        .into_iter()
        .find(|c| c.id == id)
        .unwrap();
    assert!(Scope::default().manages(&made.labels));
    assert_eq!(made.labels, helper.labels);
    assert_eq!(made.state, "created");
    drop(dir);
}

pub(super) fn boom() -> EngineError {
    EngineError::new(
        "read /ca-sbx-volume",
        ErrorKind::Other {
            status: None,
            message: "connection reset".into(),
        },
    )
}

/// After a failed archive: the volume and its content are still there,
/// no helper is left, no file stands under a final name (nor a partial one).
fn assert_left_intact(engine: &MemoryEngine, dir: &Path, report: &crate::exec::report::Report) {
    assert!(!report.converged);
    assert!(report.archived.is_empty());
    assert_eq!(engine.world().volumes.len(), 1, "the volume stays");
    assert_eq!(engine.content("v"), sample_tar());
    assert!(engine.world().containers.is_empty(), "no helper is left");
    assert_eq!(files(dir), Vec::<String>::new());
    let left = &report.remaining.volumes;
    assert_eq!(left.len(), 1);
    assert!(
        matches!(left[0].reason, Reason::ArchiveFailed { .. }),
        "{:?}",
        left[0].reason
    );
    assert!(report.failures[0].error.contains("its archive failed"));
}

#[tokio::test]
async fn a_stream_cut_midway_leaves_the_volume_and_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(vec![image()]);
    let report = run_download_cut(&engine, dir.path()).await;
    assert_left_intact(&engine, dir.path(), &report);
    // The next run, without the fault, archives and removes it.
    let report = run(&engine, &goal(dir.path())).await;
    assert!(report.converged, "{report:?}");
}

#[tokio::test]
async fn a_stream_that_ends_early_is_not_an_archive() {
    // The engine closes the stream cleanly, mid-entry: the tar check refuses it.
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(vec![image()]);
    let mut cut = sample_tar();
    cut.truncate(2000);
    engine.set_content("v", cut.clone());
    let report = run(&engine, &goal(dir.path())).await;
    assert!(!report.converged);
    assert_eq!(engine.world().volumes.len(), 1);
    assert_eq!(files(dir.path()), Vec::<String>::new());
}

#[tokio::test]
async fn a_volume_that_vanishes_while_the_helper_is_made_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(vec![image()]);
    // The re-check before the archive sees it; the look after the
    // helper's creation finds it gone (another actor removed it).
    engine.inject(Op::Inspect(Kind::Volume), Some("v"), FaultAction::Pass, 1);
    engine.inject(
        Op::Inspect(Kind::Volume),
        Some("v"),
        FaultAction::VanishFirst,
        1,
    );
    let report = run(&engine, &goal(dir.path())).await;
    assert!(!report.converged);
    assert!(engine.world().containers.is_empty(), "no helper is left");
    assert_eq!(files(dir.path()), Vec::<String>::new());
    assert!(
        report.failures[0]
            .error
            .contains("vanished or was recreated"),
        "{report:?}"
    );
    assert!(!engine.calls().iter().any(|c| c.starts_with("Download")));
}

#[tokio::test]
async fn a_refused_helper_leaves_the_volume() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(vec![image()]);
    engine.inject(Op::CreateHelper, None, FaultAction::Fail(boom()), 1);
    let report = run(&engine, &goal(dir.path())).await;
    assert_left_intact(&engine, dir.path(), &report);
}

#[tokio::test]
async fn a_helper_that_cannot_be_removed_is_named_and_its_volume_stays() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(vec![image()]);
    // The box's container goes; the helper's removal then fails.
    engine.inject(Op::Remove(Kind::Container), None, FaultAction::Pass, 1);
    engine.inject(
        Op::Remove(Kind::Container),
        None,
        FaultAction::Fail(boom()),
        1,
    );
    let report = run(&engine, &goal(dir.path())).await;
    assert!(!report.converged, "{report:?}");
    assert_eq!(engine.world().volumes.len(), 1, "the volume stays");
    let helper = &engine.world().containers[0];
    assert_eq!(
        helper.labels.get(ROLE_LABEL).map(String::as_str),
        Some(ARCHIVE_HELPER_ROLE)
    );
    // The archive stands and is reported; the failure names the helper.
    assert_eq!(report.archived.len(), 1, "{report:?}");
    assert!(PathBuf::from(&report.archived[0].path).exists());
    let error = &report.failures[0].error;
    assert!(
        error.contains(&format!(
            "helper container {} could not be removed",
            helper.id
        )),
        "{error}"
    );
}

#[tokio::test]
async fn without_an_image_nothing_is_archived_nor_removed() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(vec![]);
    let report = run(&engine, &goal(dir.path())).await;
    assert_left_intact(&engine, dir.path(), &report);
    assert!(report.failures[0].error.contains("no ca-sbx:* image"));
    assert!(!engine.calls().iter().any(|c| c.starts_with("CreateHelper")));
    // The container went; only the volume waits.
    assert_eq!(report.removed.containers.len(), 1);
}

#[tokio::test]
async fn an_unwritable_folder_leaves_the_volume() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-folder");
    std::fs::write(&file, b"x").unwrap();
    let engine = engine_with(vec![image()]);
    let report = run(&engine, &goal(&file)).await;
    assert!(!report.converged);
    assert_eq!(engine.world().volumes.len(), 1);
    assert!(engine.world().containers.is_empty(), "no helper is left");
    assert!(matches!(
        report.remaining.volumes[0].reason,
        Reason::ArchiveFailed { .. }
    ));
}

#[tokio::test]
async fn archives_are_0600_and_the_folders_made_0700_under_umask_022() {
    umask_022();
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("archive");
    let engine = engine_with(vec![image()]);
    let report = run(&engine, &goal(&dir)).await;
    assert!(report.converged, "{report:?}");
    let a = &report.archived[0];
    for folder in [&dir, &dir.join("default"), &dir.join("default").join("b")] {
        assert_eq!(mode(folder), 0o700, "{}", folder.display());
    }
    let path = PathBuf::from(&a.path);
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&manifest_path(&path)), 0o600);
}

/// Two volumes of boxes `a/b` and `a_b`, as `engine_with` has one.
fn engine_of_two_boxes() -> MemoryEngine {
    let engine = MemoryEngine::new(World {
        volumes: vec![volume("v1", "a/b"), volume("v2", "a_b")],
        images: vec![image()],
        ..World::default()
    });
    engine.set_content("v1", sample_tar());
    engine.set_content("v2", sample_tar());
    engine
}

#[tokio::test]
async fn boxes_a_slash_b_and_a_underscore_b_are_archived_into_two_folders() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_of_two_boxes();
    let report = run(&engine, &goal(dir.path())).await;
    assert!(report.converged, "{report:?}");
    let mut found = files(dir.path());
    found.retain(|f| f.ends_with(".tar.zst"));
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].starts_with("default/a%2Fb/v1-"), "{found:?}");
    assert!(found[1].starts_with("default/a_b/v2-"), "{found:?}");
}

#[tokio::test]
async fn a_symlinked_archive_folder_is_refused_and_its_volume_stays() {
    // A link at either level under DIR: <engine>, then <box>.
    for level in [&["default"][..], &["default", "b"]] {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let link = level
            .iter()
            .fold(dir.path().to_path_buf(), |p, e| p.join(e));
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), &link).unwrap();
        let engine = engine_with(vec![image()]);
        let report = run(&engine, &goal(dir.path())).await;
        assert!(!report.converged);
        assert!(report.archived.is_empty());
        assert_eq!(engine.world().volumes.len(), 1, "the volume stays");
        assert_eq!(engine.content("v"), sample_tar());
        assert!(engine.world().containers.is_empty(), "no helper is left");
        let left = &report.remaining.volumes;
        assert!(
            matches!(left[0].reason, Reason::ArchiveFailed { .. }),
            "{:?}",
            left[0].reason
        );
        let error = &report.failures[0].error;
        assert!(
            error.contains(&format!(
                "archive folder {} is a symbolic link",
                link.display()
            )),
            "{error}"
        );
        assert!(crate::exec::report::Verdict::of_report(&report).failed);
        // Nothing was written through it; the link is as it was.
        assert_eq!(
            std::fs::read_dir(elsewhere.path()).unwrap().count(),
            0,
            "{level:?}"
        );
        assert_eq!(std::fs::read_link(&link).unwrap(), elsewhere.path());
    }
}

#[tokio::test]
async fn a_failed_archive_is_archive_failed_and_the_verdict_fails() {
    use crate::exec::list::plan_once;
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(vec![]);
    let (_, plan) = plan_once(&engine, &goal(dir.path()), &Scope::default(), NOW)
        .await
        .unwrap();
    let volume = plan
        .steps
        .iter()
        .position(|s| s.object.kind == Kind::Volume)
        .unwrap();
    assert_eq!(
        plan.steps[volume].archive.as_deref(),
        Some(&*dir.path().to_string_lossy())
    );
    let applied = applied(&engine, &plan).await;
    assert!(matches!(
        applied.outcomes[volume],
        Outcome::ArchiveFailed(_)
    ));
    assert_eq!(applied.outcomes[volume].code(), "archiveFailed");
    let report = crate::exec::verify::verify(&engine, &plan, &applied).await;
    let verdict = crate::exec::report::Verdict::of_report(&report);
    assert!(verdict.failed, "{verdict:?}");
}
#[tokio::test]
async fn a_leftover_helper_is_planned_before_its_volume_even_within_grace() {
    use crate::exec::list::plan_once;
    let mut helper = ContainerInfo::new(
        "h1",
        "ca-sbx-helper-1",
        helper_labels(&scope_labels(&Scope::default()), Some("b")),
    );
    helper.mounts.insert("v".into());
    helper.created_at = Some(crate::model::time::rfc3339(NOW));
    let engine = MemoryEngine::new(World {
        containers: vec![helper],
        volumes: vec![VolumeInfo {
            created_at: Some(crate::model::time::rfc3339(NOW - 3600)),
            ..volume("v", "b")
        }],
        ..World::default()
    });
    let goal = Goal::Reconcile {
        boxes: vec![],
        keep_volumes: vec![],
        grace: Some(600),
        max_lease: None,
        archive: None,
    };
    let (_, plan) = plan_once(&engine, &goal, &Scope::default(), NOW)
        .await
        .unwrap();
    let names: Vec<&str> = plan.steps.iter().map(|s| s.object.name.as_str()).collect();
    assert_eq!(names, ["ca-sbx-helper-1", "v"], "{plan:?}");
    assert_eq!(plan.steps[0].why, Reason::ArchiveHelper);
    assert_eq!(plan.steps[1].waits_for, vec![1]);
}

/// A stream that ended well while the engine stopped answering new
/// connections (a dockerd shutting down sends a well-ended tar without the
/// files it unmounted meanwhile): no archive is kept, not even its partial
/// file, the volume stays, and the run fails naming why.
#[tokio::test]
async fn an_archive_whose_engine_then_answers_no_new_connection_is_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(vec![image()]);
    engine.inject(Op::Ping, None, FaultAction::Fail(boom()), 1);
    let report = run(&engine, &goal(dir.path())).await;
    assert_left_intact(&engine, dir.path(), &report);
    let error = &report.failures[0].error;
    assert!(
        error.contains("did not answer on a new connection"),
        "{error}"
    );
    // The same stream with the engine answering: archived and removed.
    let report = run(&engine, &goal(dir.path())).await;
    assert!(report.converged, "{report:?}");
    assert_eq!(report.archived.len(), 1);
}
