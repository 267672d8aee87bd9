//! What a teardown gives back (`reclaimedBytes`), against a real engine: a
//! dockerd of the test's own (`/system/df` walks every layer and volume of
//! its engine, and Docker 20.10 answers one at a time: never on the shared
//! one).
//!
//! Each box's container writes 5 files of 1,000,000 bytes into its writable
//! layer and its volume holds 3 such files, both put in through the
//! engine's archive endpoint (the test image has no shell). `destroy
//! --reclaimed` reports what the engine says each held (the container's
//! `SizeRw`, the volume's `UsageData.Size`), `destroy` alone reports them
//! not measured (`null`, never 0), and `destroy --archive` the volume's
//! archived files. A created, never started container is measured as
//! the engine says it: 0 B.

use bollard::query_parameters::{InspectContainerOptionsBuilder, UploadToContainerOptionsBuilder};

use crate::support::docker::{Run, Sandbox, SandboxBox};
use crate::support::engines::SecondDockerd;
use crate::support::report::Outcome;

/// A tar of `n` files of 1,000,000 bytes each, named `PREFIX1`, ...
fn files(prefix: &str, n: usize) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for i in 1..=n {
        let data: Vec<u8> = (0..1_000_000u32).map(|j| (j % 251) as u8).collect();
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, format!("{prefix}{i}"), data.as_slice())
            .unwrap();
    }
    b.into_inner().unwrap()
}

/// Writes 5 MB into the box's container (`/scratch`, its writable layer)
/// and 3 MB into its volume (mounted at `/v/0`).
async fn fill(sbx: &Sandbox, b: &SandboxBox) {
    for (path, tar) in [("/", files("scratch/f", 5)), ("/v/0", files("f", 3))] {
        let options = UploadToContainerOptionsBuilder::new().path(path).build();
        sbx.docker()
            .upload_to_container(
                &b.container.id,
                Some(options),
                bollard::body_full(tar.into()),
            )
            .await
            .unwrap_or_else(|e| panic!("write into {path} of {}: {e}", b.container.name));
    }
}

/// The container's writable layer as the engine measures it now.
async fn size_rw(sbx: &Sandbox, id: &str) -> u64 {
    let options = InspectContainerOptionsBuilder::new().size(true).build();
    let c = sbx
        .docker()
        .inspect_container(id, Some(options))
        .await
        .expect("inspect with size");
    u64::try_from(c.size_rw.expect("SizeRw")).unwrap()
}

trial!(destroy_reports_what_each_object_gave_back_as_the_engine_measured_it);
async fn destroy_reports_what_each_object_gave_back_as_the_engine_measured_it() {
    let engine = SecondDockerd::new().start().await;
    let sbx = Sandbox::at("reclaimed", &engine.socket_host()).await;
    let mut boxes = Vec::new();
    for id in ["a", "b", "c"] {
        let b = sbx.add_box(id, Run::Running).await;
        fill(&sbx, &b).await;
        boxes.push(b);
    }
    let (a, b, c) = (&boxes[0], &boxes[1], &boxes[2]);

    // --reclaimed: what the engine says, per object and in total.
    let layer = size_rw(&sbx, &a.container.id).await;
    assert!(
        (5_000_000..5_100_000).contains(&layer),
        "the engine counts the 5 MB written into the layer: {layer}"
    );
    let out = sbx.cli().json().run_with(["destroy", "a", "--reclaimed"]);
    out.success();
    let r = out.report();
    assert!(r.converged, "{r:?}");
    assert_eq!(r.removed.containers.len(), 1);
    assert_eq!(r.removed.containers[0].outcome, Outcome::Removed);
    assert_eq!(r.removed.containers[0].reclaimed_bytes, Some(layer));
    assert_eq!(r.removed.volumes[0].name, a.volume);
    assert_eq!(r.removed.volumes[0].reclaimed_bytes, Some(3_000_000));
    assert_eq!(r.reclaimed_bytes, Some(layer + 3_000_000));
    assert_eq!(r.reclaimed_unmeasured, 0);
    assert!(!out.stderr.contains("could not measure"), "{}", out.stderr);

    // Without it: not measured, null and counted, never 0.
    let out = sbx.cli().run_with(["destroy", "b"]);
    out.success();
    assert!(
        out.stdout
            .contains("\nReclaimed: not measured (1 container and 1 volume).\n"),
        "{}",
        out.stdout
    );
    assert!(!sbx.container_exists(&b.container.id).await);

    // --archive: the volume's archived files; the container not measured.
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().to_string_lossy().into_owned();
    let out = sbx
        .cli()
        .json()
        .run_with(["destroy", "c", "--archive", &archive]);
    out.success();
    let r = out.report();
    assert_eq!(r.removed.volumes[0].name, c.volume);
    assert_eq!(r.removed.volumes[0].reclaimed_bytes, Some(3_000_000));
    assert_eq!(r.removed.containers[0].reclaimed_bytes, None);
    assert_eq!(r.reclaimed_bytes, Some(3_000_000));
    assert_eq!(r.reclaimed_unmeasured, 1);

    // Created and never started (issue 43, 9f): Docker 20.10's /system/df
    // lists the container with SizeRootFs and no SizeRw (Go omits a zero).
    // That is a measured 0 B, never "not measured".
    let d = sbx.add_box("d", Run::Created).await;
    let out = sbx.cli().json().run_with(["destroy", "d", "--reclaimed"]);
    out.success();
    let r = out.report();
    assert_eq!(
        r.removed.containers[0].id.as_deref(),
        Some(d.container.id.as_str())
    );
    assert_eq!(r.removed.containers[0].reclaimed_bytes, Some(0), "{r:?}");
    assert_eq!(r.reclaimed_unmeasured, 0, "{r:?}");
    assert!(!out.stderr.contains("could not measure"), "{}", out.stderr);
    drop(sbx);
    drop(engine);
}
