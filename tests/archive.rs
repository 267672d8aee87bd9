//! Archive and restore on the real engine: what a volume holds comes back
//! exactly after `apply --archive DIR` removed it and `restore` made it again
//! (every entry's content, mode, mtime and symlink target).
//!
//! The volume is filled by PUT-ing a tar built here through a container
//! that is never started (the test image has no shell), and read back the
//! same way (GET), so the test also exercises the archive API sandboxctl uses.

use std::collections::BTreeMap;

use bollard::query_parameters::{
    DownloadFromContainerOptionsBuilder, RemoveContainerOptionsBuilder,
    UploadToContainerOptionsBuilder,
};
use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use crate::support::docker::{ContainerSpec, Run, Sandbox, VolumeSpec};

/// One entry of a volume as its tar shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Meta {
    kind: String,
    mode: u32,
    mtime: u64,
    link: Option<String>,
    size: u64,
    sha256: String,
}

/// 100 MiB of bytes no compressor shrinks (xorshift, fixed seed).
fn random_bytes(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// The tar that fills the volume: folders, a symlink, a name with spaces
/// and a newline, an empty file, 100 MiB of random bytes; modes and mtimes set.
fn content() -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let dir = |name: &str, mode: u32, mtime: u64, b: &mut tar::Builder<Vec<u8>>| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_size(0);
        h.set_mode(mode);
        h.set_mtime(mtime);
        b.append_data(&mut h, name, std::io::empty()).unwrap();
    };
    dir("dir/", 0o750, 1_600_000_000, &mut b);
    dir("dir/sub/", 0o700, 1_600_000_100, &mut b);
    let big = random_bytes(100 * 1024 * 1024);
    let files: [(&str, u32, u64, &[u8]); 4] = [
        ("dir/sub/deep.txt", 0o640, 1_500_000_000, b"deep down\n"),
        (
            "with space\nand newline",
            0o600,
            1_400_000_000,
            b"odd name\n",
        ),
        ("empty", 0o444, 1_300_000_000, b""),
        ("random.bin", 0o644, 1_700_000_000, &big),
    ];
    for (name, mode, mtime, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(mode);
        h.set_mtime(mtime);
        b.append_data(&mut h, name, data).unwrap();
    }
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Symlink);
    h.set_size(0);
    h.set_mode(0o777);
    h.set_mtime(1_650_000_000);
    b.append_link(&mut h, "link", "dir/sub/deep.txt").unwrap();
    b.into_inner().unwrap()
}

/// A container that is never started, mounting `volume` at `/v/0`.
async fn holder(sbx: &Sandbox, volume: &str) -> String {
    sbx.container(ContainerSpec::new().volume(volume).run(Run::Created))
        .await
        .id
}

/// Every entry under the volume mounted at `/v/0` of `container`, by path
/// (relative to the volume; its root left out).
async fn read_back(sbx: &Sandbox, container: &str) -> BTreeMap<String, Meta> {
    let options = DownloadFromContainerOptionsBuilder::new()
        .path("/v/0")
        .build();
    let mut stream = sbx
        .docker()
        .download_from_container(container, Some(options));
    let mut tar = Vec::new();
    while let Some(chunk) = stream.next().await {
        tar.extend_from_slice(&chunk.expect("read the volume back"));
    }
    let mut out = BTreeMap::new();
    let mut archive = tar::Archive::new(tar.as_slice());
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().to_string_lossy().into_owned();
        let Some(rel) = path.strip_prefix("0/").filter(|r| !r.is_empty()) else {
            continue;
        };
        let rel = rel.trim_end_matches('/').to_string();
        let h = entry.header().clone();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut data).unwrap();
        out.insert(
            rel,
            Meta {
                kind: format!("{:?}", h.entry_type()),
                mode: h.mode().unwrap() & 0o7777,
                mtime: h.mtime().unwrap(),
                link: h
                    .link_name()
                    .unwrap()
                    .map(|l| l.to_string_lossy().into_owned()),
                size: data.len() as u64,
                sha256: format!("{:x}", Sha256::digest(&data)),
            },
        );
    }
    out
}

async fn remove_container(sbx: &Sandbox, id: &str) {
    let options = RemoveContainerOptionsBuilder::new().force(true).build();
    sbx.docker()
        .remove_container(id, Some(options))
        .await
        .expect("remove the holder");
}

#[tokio::test]
async fn archive_then_restore_round_trips_content_modes_mtimes_and_links() {
    let Some(sbx) = Sandbox::new("archive-round-trip").await else {
        return;
    };
    let volume = sbx.volume(VolumeSpec::new().in_box("gone")).await;
    // Fill it: PUT the tar through a container that is never started.
    let filler = holder(&sbx, &volume).await;
    let options = UploadToContainerOptionsBuilder::new().path("/v/0").build();
    sbx.docker()
        .upload_to_container(&filler, Some(options), bollard::body_full(content().into()))
        .await
        .expect("fill the volume");
    let before = read_back(&sbx, &filler).await;
    remove_container(&sbx, &filler).await;
    assert_eq!(before["dir"].mode, 0o750);
    assert_eq!(before["dir/sub/deep.txt"].mtime, 1_500_000_000);
    assert_eq!(before["link"].link.as_deref(), Some("dir/sub/deep.txt"));
    assert_eq!(before["empty"].size, 0);
    assert_eq!(before["random.bin"].size, 100 * 1024 * 1024);
    assert!(before.contains_key("with space\nand newline"), "{before:?}");

    // Archive it: box `gone` is undeclared, grace 0.
    let dir = tempfile::tempdir().unwrap();
    let cli = sbx.cli().state_toml("");
    let out = cli.run_with([
        "apply",
        "--format",
        "json",
        "--archive",
        dir.path().to_str().unwrap(),
    ]);
    out.success();
    let report = out.json();
    assert!(!sbx.volume_exists(&volume).await, "{}", out.dump());
    let archived = &report["archived"][0];
    assert_eq!(archived["volume"], volume.as_str());
    let path = std::path::PathBuf::from(archived["path"].as_str().unwrap());
    assert!(path.starts_with(dir.path().join("default").join("gone")));
    let manifest_path = path.with_file_name(
        path.file_name()
            .unwrap()
            .to_string_lossy()
            .replace(".tar.zst", ".json"),
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    assert_eq!(manifest["sha256"], archived["sha256"]);
    assert_eq!(manifest["volume"], volume.as_str());
    assert_eq!(manifest["box"], "gone");
    assert_eq!(
        manifest["size"].as_u64(),
        Some(std::fs::metadata(&path).unwrap().len())
    );
    // The root, 3 folders and files... every entry, the root included.
    assert_eq!(
        manifest["fileCount"].as_u64(),
        Some(before.len() as u64 + 1)
    );
    let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Restore it, and read it back.
    let out = sbx
        .cli()
        .run_with(["restore", path.to_str().unwrap(), "--format", "json"]);
    out.success();
    assert_eq!(out.json()["restored"]["volume"], volume.as_str());
    assert!(sbx.volume_exists(&volume).await);
    let reader = holder(&sbx, &volume).await;
    let after = read_back(&sbx, &reader).await;
    remove_container(&sbx, &reader).await;
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    for (name, meta) in &before {
        assert_eq!(&after[name], meta, "{name:?}");
    }
    // A second restore refuses: the volume exists.
    let again = sbx.cli().run_with(["restore", path.to_str().unwrap()]);
    again.expect_code(1);
    assert!(again.stderr.contains("exists"), "{}", again.dump());
}
