//! SIGKILL in the middle of `apply --archive` (issue 16, "nothing lost"):
//! twenty trials, each its own scope of 20 boxes (a labeled volume holding
//! a few MiB and, for three boxes in four, a container mounting it, through
//! which the volume is read; the fourth's goes through an archive helper)
//! beside decoys that are not ours to touch
//! (look-alike and unlabeled objects of the scope, a box of another scope
//! with the same box ID). Each trial starts `apply --archive DIR --audit
//! FILE` and SIGKILLs it at its own random moment; then:
//!
//! * every archive under a final name is complete (its SHA-256 and size are
//!   the manifest's, the zstd decompresses, the tar's entries and bytes are
//!   the manifest's `fileCount` and `uncompressedSize`, and it holds exactly
//!   its volume's files); every volume already gone has such an archive;
//! * every helper container left is labeled `ca.sandbox=1`, the scope, the
//!   box and the role;
//! * the audit log holds only complete JSON lines;
//!
//! and a second `apply --archive` exits 0 and converges: nothing managed of
//! the scope is left, no helper (those run 1 left are gone), no `.partial`
//! file and no manifest without its archive in DIR, every box's volume has
//! an archive, the archives all still check, and the decoys are untouched.
//!
//! The kill moments are seeded (`SANDBOXCTL_CRASH_SEED` repeats a run; the
//! seed is printed) and stratified over the duration `T` of an uninterrupted
//! run: `[0, 1)` is cut into 20 equal strata, one random fraction in each,
//! given to the trials in a random order, and a trial's moment is its
//! fraction of `T` when its run starts. `T` is the median run time of the
//! three latest unkilled runs: three control trials first, then every run
//! that ended before its moment, which is then run again on a new world (at
//! most five tries), so that `T` follows the machine's load. Trials run
//! four at a time (making their worlds, checking, second runs), but a first
//! run, the controls' too, has the engine to itself (the
//! other trials wait). The table printed at the end says where each kill
//! landed, as DIR, the audit log and the engine showed it right after.
//!
//! Everything runs on a dockerd the test starts for itself (and stops by
//! its pid at the end), never on the main engine: 80 volumes filled and
//! read at once hold containers' locks there, and other tests' listings,
//! which inspect every container, would wait on them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bollard::query_parameters::{
    DownloadFromContainerOptionsBuilder, ListContainersOptionsBuilder, ListVolumesOptionsBuilder,
    RemoveContainerOptions, UploadToContainerOptionsBuilder,
};
use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::RwLock;

use crate::support::cli::Cli;
use crate::support::docker::{ContainerSpec, Run, Sandbox, VolumeSpec, SCOPE_KEY};
use crate::support::engines::SecondDockerd;
use crate::support::files::{files_under, random_bytes};

/// Boxes in each trial's scope.
const BOXES: usize = 20;
/// Trials killed (one random moment each).
const KILLS: usize = 20;
/// Unkilled trials run first to measure `T` (their median run 1).
const CONTROLS: usize = 3;
/// Trials in flight at once.
const CONCURRENCY: usize = 4;
/// Random bytes in each volume (plus a small file naming its box).
const VOLUME_BYTES: usize = 2 * 1024 * 1024;
/// Every 5th box's container runs (`/sleep infinity`); the others are created.
const RUNNING_EVERY: usize = 5;
/// Every 4th box is its volume alone (no container): it is read through an
/// archive helper; the others' volumes through their boxes' containers.
const HELPER_EVERY: usize = 4;
/// Overrides the random seed.
const SEED_ENV: &str = "SANDBOXCTL_CRASH_SEED";
/// The helpers' role label.
const ROLE: (&str, &str) = ("ca.sandbox.role", "archive-helper");

/// splitmix64: the test's only source of randomness, from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn box_id(j: usize) -> String {
    format!("b{j:02}")
}

fn sha_hex(bytes: &[u8]) -> String {
    crate::support::files::sha256_hex(bytes)
}

/// What a volume holds: file name -> SHA-256 of its bytes.
type Content = BTreeMap<String, String>;

/// Fills `volume`, mounted at `/v/0` of `container` (never started, or
/// running: the archive API needs neither), with `id.txt` and `data.bin`;
/// returns what it holds.
async fn fill(sbx: &Sandbox, container: &str, id: &str, seed: u64) -> Content {
    let data = random_bytes(seed, VOLUME_BYTES);
    let mut b = tar::Builder::new(Vec::new());
    for (name, bytes) in [("id.txt", id.as_bytes()), ("data.bin", data.as_slice())] {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(1_700_000_000);
        b.append_data(&mut h, name, bytes).unwrap();
    }
    let options = UploadToContainerOptionsBuilder::new().path("/v/0").build();
    sbx.docker()
        .upload_to_container(
            container,
            Some(options),
            bollard::body_full(b.into_inner().unwrap().into()),
        )
        .await
        .unwrap_or_else(|e| panic!("fill the volume of {container}: {e}"));
    Content::from([
        ("id.txt".to_string(), sha_hex(id.as_bytes())),
        ("data.bin".to_string(), sha_hex(&data)),
    ])
}

/// The files of a tar (entries under `root/`, the root itself left out).
fn tar_files(tar: &[u8], root: &str) -> (Content, u64) {
    let mut files = Content::new();
    let mut entries = 0;
    let mut archive = tar::Archive::new(tar);
    for entry in archive.entries().expect("a tar") {
        let mut entry = entry.expect("a tar entry");
        entries += 1;
        let path = entry.path().unwrap().to_string_lossy().into_owned();
        let mut body = Vec::new();
        entry.read_to_end(&mut body).unwrap();
        if let Some(rel) = path
            .strip_prefix(root)
            .and_then(|p| p.strip_prefix('/'))
            .filter(|r| !r.is_empty())
        {
            files.insert(rel.trim_end_matches('/').to_string(), sha_hex(&body));
        }
    }
    (files, entries)
}

/// What the volume at `/v/0` of `container` holds now.
async fn read_volume(sbx: &Sandbox, container: &str) -> Content {
    let options = DownloadFromContainerOptionsBuilder::new()
        .path("/v/0")
        .build();
    let mut stream = sbx
        .docker()
        .download_from_container(container, Some(options));
    let mut tar = Vec::new();
    while let Some(chunk) = stream.next().await {
        tar.extend_from_slice(&chunk.expect("read a decoy volume back"));
    }
    tar_files(&tar, "0").0
}

/// What DIR holds, by kind of file.
#[derive(Debug, Default)]
struct DirState {
    /// `<base>.tar.zst`.
    archives: Vec<PathBuf>,
    /// `<base>.json` without its `<base>.tar.zst`.
    orphan_manifests: Vec<PathBuf>,
    /// `.<name>.partial`.
    partials: Vec<PathBuf>,
    /// Anything else (there must be nothing else).
    other: Vec<PathBuf>,
}

fn dir_state(dir: &Path) -> DirState {
    let mut s = DirState::default();
    let files = files_under(dir);
    let names: BTreeSet<&PathBuf> = files.iter().collect();
    for p in &files {
        let name = p.file_name().unwrap().to_string_lossy();
        if name.starts_with('.') && name.ends_with(".partial") {
            s.partials.push(p.clone());
        } else if name.ends_with(".tar.zst") {
            s.archives.push(p.clone());
        } else if let Some(base) = name.strip_suffix(".json") {
            if !names.contains(&p.with_file_name(format!("{base}.tar.zst"))) {
                s.orphan_manifests.push(p.clone());
            }
        } else {
            s.other.push(p.clone());
        }
    }
    s
}

/// One box's volume as made.
#[derive(Debug, Clone)]
struct Expected {
    box_id: String,
    content: Content,
}

/// Checks one final archive against its manifest and its volume's content;
/// returns the volume's name.
fn check_archive(path: &Path, expected: &BTreeMap<String, Expected>) -> String {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let manifest_path = path.with_file_name(name.replace(".tar.zst", ".json"));
    let manifest: Value = serde_json::from_slice(
        &std::fs::read(&manifest_path)
            .unwrap_or_else(|e| panic!("the manifest of {}: {e}", path.display())),
    )
    .unwrap_or_else(|e| panic!("manifest {}: {e}", manifest_path.display()));
    let what = manifest_path.display().to_string();
    crate::support::schema::check("manifest", &manifest, &what);
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(
        manifest["sha256"].as_str(),
        Some(sha_hex(&bytes).as_str()),
        "{}: not its manifest's SHA-256",
        path.display()
    );
    assert_eq!(
        manifest["size"].as_u64(),
        Some(bytes.len() as u64),
        "{}: size",
        path.display()
    );
    assert_eq!(manifest["archive"].as_str(), Some(name.as_str()));
    let volume = manifest["volume"].as_str().unwrap().to_string();
    let want = expected.get(&volume).unwrap_or_else(|| {
        panic!(
            "{} archives {volume}, not a volume of the trial",
            path.display()
        )
    });
    assert_eq!(manifest["box"].as_str(), Some(want.box_id.as_str()));
    assert!(
        path.parent().unwrap().ends_with(&want.box_id),
        "{} is not in its box's folder",
        path.display()
    );
    let tar = zstd::stream::decode_all(bytes.as_slice())
        .unwrap_or_else(|e| panic!("{}: not a complete zstd stream: {e}", path.display()));
    assert_eq!(
        manifest["uncompressedSize"].as_u64(),
        Some(tar.len() as u64),
        "{}: uncompressedSize",
        path.display()
    );
    // Rooted at the helper's mount, or at the box container's own mount
    // when the volume was read through it.
    let root = manifest["root"].as_str().expect("a root");
    let (files, entries) = tar_files(&tar, root);
    assert_eq!(
        manifest["fileCount"].as_u64(),
        Some(entries),
        "{}: fileCount",
        path.display()
    );
    assert_eq!(
        files,
        want.content,
        "{}: not its volume's files",
        path.display()
    );
    volume
}

/// The audit log's lines, each a complete JSON object (the file ends with a
/// newline); fails the test otherwise.
fn audit_lines(path: &Path) -> Vec<Value> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => panic!("audit log {}: {e}", path.display()),
    };
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "audit log {}: its last line is cut short: {:?}",
        path.display(),
        text.lines().last()
    );
    text.lines()
        .enumerate()
        .map(|(n, line)| {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| {
                panic!(
                    "audit log {} line {}: not complete JSON ({e}): {line:?}",
                    path.display(),
                    n + 1
                )
            });
            assert!(v.is_object(), "audit line {}: {line}", n + 1);
            let what = format!("{}:{}", path.display(), n + 1);
            crate::support::schema::check("audit", &v, &what);
            v
        })
        .collect()
}

/// One container as listed.
#[derive(Debug, Clone)]
struct Listed {
    id: String,
    labels: HashMap<String, String>,
    mounts: Vec<String>,
}

async fn containers_with(sbx: &Sandbox, label: &[String]) -> Vec<Listed> {
    let filters = HashMap::from([("label", label.to_vec())]);
    sbx.docker()
        .list_containers(Some(
            ListContainersOptionsBuilder::new()
                .all(true)
                .filters(&filters)
                .build(),
        ))
        .await
        .expect("list containers")
        .into_iter()
        .map(|c| Listed {
            id: c.id.unwrap_or_default(),
            labels: c.labels.unwrap_or_default(),
            mounts: c
                .mounts
                .unwrap_or_default()
                .into_iter()
                .filter_map(|m| m.name)
                .collect(),
        })
        .collect()
}

async fn volumes_with(sbx: &Sandbox, label: &[String]) -> BTreeSet<String> {
    let filters = HashMap::from([("label", label.to_vec())]);
    sbx.docker()
        .list_volumes(Some(
            ListVolumesOptionsBuilder::new().filters(&filters).build(),
        ))
        .await
        .expect("list volumes")
        .volumes
        .unwrap_or_default()
        .into_iter()
        .map(|v| v.name)
        .collect()
}

/// One trial's world: the scope's boxes and the decoys.
struct World {
    sbx: Sandbox,
    /// Another scope, with a box of the same ID: managed, but not by this scope.
    other: Sandbox,
    /// Volume name -> what it holds.
    expected: BTreeMap<String, Expected>,
    /// Every object not ours to touch: containers by ID (with their state), volumes.
    decoy_containers: Vec<(String, Option<String>)>,
    decoy_volumes: Vec<String>,
    /// The other scope's box: its container (to read its volume) and content.
    other_container: String,
    other_content: Content,
    dir: tempfile::TempDir,
    audit: PathBuf,
}

impl World {
    async fn make(host: &str, trial: usize, seed: u64) -> Option<World> {
        let sbx = Sandbox::at(&format!("archive-crash-{trial}"), host).await;
        let other = Sandbox::at(&format!("archive-crash-{trial}-other"), host).await;
        let made: Vec<(String, Expected)> = futures_util::stream::iter(0..BOXES)
            .map(|j| {
                let sbx = &sbx;
                async move {
                    let id = box_id(j);
                    let volume = sbx
                        .volume(
                            VolumeSpec::new()
                                .in_box(&id)
                                .name(sbx.unique(&format!("{id}-data"))),
                        )
                        .await;
                    let run = if j % RUNNING_EVERY == 0 {
                        Run::Running
                    } else {
                        Run::Created
                    };
                    let seed = seed ^ ((trial as u64) << 16 | j as u64);
                    let content = if j % HELPER_EVERY == HELPER_EVERY - 1 {
                        // Filled through a container of no box, removed
                        // before the run: read through a helper.
                        let filler = sbx
                            .container(ContainerSpec::new().volume(&volume).run(Run::Created))
                            .await;
                        let content = fill(sbx, &filler.id, &id, seed).await;
                        sbx.docker()
                            .remove_container(&filler.id, None::<RemoveContainerOptions>)
                            .await
                            .unwrap_or_else(|e| panic!("remove filler {}: {e}", filler.id));
                        content
                    } else {
                        let c = sbx
                            .container(
                                ContainerSpec::new()
                                    .in_box(&id)
                                    .name(sbx.unique(&id))
                                    .volume(&volume)
                                    .run(run),
                            )
                            .await;
                        fill(sbx, &c.id, &id, seed).await
                    };
                    (
                        volume,
                        Expected {
                            box_id: id,
                            content,
                        },
                    )
                }
            })
            .buffer_unordered(4)
            .collect()
            .await;
        let decoys = sbx.decoys(Run::Created).await;
        // An unlabeled container of the scope mounting an unlabeled volume with data.
        let plain = sbx.volume(VolumeSpec::new()).await;
        let user = sbx
            .container(ContainerSpec::new().volume(&plain).run(Run::Created))
            .await;
        fill(&sbx, &user.id, "plain", seed ^ 0xdec0).await;
        let other_box = other.add_box(&box_id(0), Run::Created).await;
        let other_content = fill(&other, &other_box.container.id, "other", seed ^ 0x07e4).await;
        let mut decoy_containers: Vec<String> =
            decoys.containers.iter().map(|c| c.id.clone()).collect();
        decoy_containers.extend([user.id.clone(), other_box.container.id.clone()]);
        let mut with_state = Vec::new();
        for id in decoy_containers {
            let state = sbx.container_state(&id).await;
            with_state.push((id, state));
        }
        let mut decoy_volumes = decoys.volumes.clone();
        decoy_volumes.extend([plain, other_box.volume.clone()]);
        let dir = tempfile::tempdir().unwrap();
        let audit = dir.path().join("audit.jsonl");
        let archive_dir = dir.path().join("archive");
        std::fs::create_dir(&archive_dir).unwrap();
        Some(World {
            expected: made.into_iter().collect(),
            decoy_containers: with_state,
            decoy_volumes,
            other_container: other_box.container.id,
            other_content,
            sbx,
            other,
            dir,
            audit,
        })
    }

    fn archive_dir(&self) -> PathBuf {
        self.dir.path().join("archive")
    }

    fn cli(&self) -> Cli {
        // A generous engine deadline: the engine is busy with four trials
        // and can stall for seconds; this test is about kills, not hangs.
        self.sbx
            .cli()
            .args(["--timeout", "120"])
            .state_toml("")
            .deadline(Duration::from_secs(300))
    }

    fn args(&self) -> Vec<String> {
        vec![
            "apply".into(),
            "--format".into(),
            "json".into(),
            "--archive".into(),
            self.archive_dir().display().to_string(),
            "--audit".into(),
            self.audit.display().to_string(),
        ]
    }

    /// The scope's helpers, and every helper (any scope, any labels)
    /// mounting one of this trial's volumes.
    async fn helpers(&self) -> Vec<Listed> {
        let role = format!("{}={}", ROLE.0, ROLE.1);
        let mut found: BTreeMap<String, Listed> = BTreeMap::new();
        for c in containers_with(&self.sbx, &[role.clone(), self.sbx.scope_arg()]).await {
            found.insert(c.id.clone(), c);
        }
        for c in containers_with(&self.sbx, &[role]).await {
            if c.mounts.iter().any(|m| self.expected.contains_key(m)) {
                found.insert(c.id.clone(), c);
            }
        }
        found.into_values().collect()
    }

    /// This trial's volumes that still exist.
    async fn volumes_left(&self) -> BTreeSet<String> {
        let all = volumes_with(&self.sbx, &[self.sbx.scope_arg()]).await;
        self.expected
            .keys()
            .filter(|v| all.contains(*v))
            .cloned()
            .collect()
    }

    /// Every helper is labeled: `ca.sandbox=1`, the scope, its box, the role.
    fn check_helpers(&self, helpers: &[Listed]) {
        for h in helpers {
            let label = |k: &str| h.labels.get(k).map(String::as_str);
            assert_eq!(label("ca.sandbox"), Some("1"), "helper {h:?}");
            assert_eq!(
                label(SCOPE_KEY),
                Some(self.sbx.scope_value()),
                "helper {h:?}"
            );
            assert_eq!(label(ROLE.0), Some(ROLE.1), "helper {h:?}");
            let boxes: Vec<&str> = h
                .mounts
                .iter()
                .filter_map(|m| self.expected.get(m))
                .map(|e| e.box_id.as_str())
                .collect();
            assert_eq!(boxes.len(), 1, "a helper mounts one volume of ours: {h:?}");
            assert_eq!(label("ca.sandbox.id"), Some(boxes[0]), "helper {h:?}");
        }
    }

    /// The archives in DIR all check; every archive under a final name has
    /// its manifest; returns the volumes archived (with how many archives each).
    fn check_dir(&self, state: &DirState) -> BTreeMap<String, usize> {
        assert!(
            state.other.is_empty(),
            "unexpected files: {:?}",
            state.other
        );
        let mut per_volume = BTreeMap::new();
        for a in &state.archives {
            *per_volume
                .entry(check_archive(a, &self.expected))
                .or_insert(0) += 1;
        }
        for m in &state.orphan_manifests {
            // A manifest stands before its archive is renamed: it must at
            // least be a complete manifest.
            let v: Value = serde_json::from_slice(&std::fs::read(m).unwrap())
                .unwrap_or_else(|e| panic!("manifest {}: {e}", m.display()));
            assert!(v["sha256"].is_string(), "{}", m.display());
            crate::support::schema::check("manifest", &v, &m.display().to_string());
        }
        per_volume
    }

    /// Every `removed` volume line of the audit log names an archive that
    /// stands and matches it.
    fn check_audit(&self, lines: &[Value]) {
        for l in lines {
            if l["kind"] == "volume" && l["outcome"] == "removed" {
                let a = &l["archive"];
                let path = PathBuf::from(a["path"].as_str().unwrap_or_else(|| {
                    panic!("a volume removed without an archive in the audit log: {l}")
                }));
                assert!(
                    path.exists(),
                    "audit names {} which is not there",
                    path.display()
                );
                let bytes = std::fs::read(&path).unwrap();
                assert_eq!(a["sha256"].as_str(), Some(sha_hex(&bytes).as_str()), "{l}");
                assert_eq!(a["bytes"].as_u64(), Some(bytes.len() as u64), "{l}");
            }
        }
    }

    /// Checks that run 2 failed only because helpers of the scope were made
    /// after run 1 was killed (requests it sent before it died) and after
    /// run 2's plan: every failure is a volume in use by such a helper,
    /// named as appeared after the plan. Returns how many.
    async fn late_helpers(
        &self,
        report: &Value,
        killed_at: std::time::SystemTime,
    ) -> Result<usize, String> {
        let left = report["remainingContainers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if left.is_empty() {
            return Err("no container is left".into());
        }
        let mut ids = BTreeSet::new();
        for c in &left {
            if c["reason"]["code"] != "appearedAfterPlan" {
                return Err(format!("{c} did not appear after the plan"));
            }
            let id = c["id"].as_str().unwrap_or_default().to_string();
            let inspect = self
                .sbx
                .docker()
                .inspect_container(
                    &id,
                    None::<bollard::query_parameters::InspectContainerOptions>,
                )
                .await
                .map_err(|e| format!("inspect {id}: {e}"))?;
            let labels = inspect.config.and_then(|c| c.labels).unwrap_or_default();
            if labels.get(ROLE.0).map(String::as_str) != Some(ROLE.1)
                || labels.get(SCOPE_KEY).map(String::as_str) != Some(self.sbx.scope_value())
            {
                return Err(format!("{id} is not a helper of the scope: {labels:?}"));
            }
            let created = inspect.created.unwrap_or_default();
            let created = humantime::parse_rfc3339(&created)
                .map_err(|e| format!("{id} created {created:?}: {e}"))?;
            if created + Duration::from_secs(1) < killed_at {
                return Err(format!(
                    "{id} was made {:?} before the kill",
                    killed_at.duration_since(created).unwrap_or_default()
                ));
            }
            ids.insert(id);
        }
        for f in report["failures"].as_array().into_iter().flatten() {
            let error = f["error"].as_str().unwrap_or_default();
            if f["kind"] != "volume"
                || !error.contains("in use")
                || !ids.iter().any(|id| error.contains(id.as_str()))
            {
                return Err(format!(
                    "failure {f} is not a volume in use by such a helper"
                ));
            }
        }
        Ok(ids.len())
    }

    /// Nothing outside the scope's managed objects changed.
    async fn check_decoys(&self) {
        for (id, state) in &self.decoy_containers {
            assert_eq!(
                &self.sbx.container_state(id).await,
                state,
                "decoy container {id} was touched"
            );
        }
        for v in &self.decoy_volumes {
            assert!(
                self.sbx.volume_exists(v).await,
                "decoy volume {v} was removed"
            );
        }
        assert_eq!(
            read_volume(&self.other, &self.other_container).await,
            self.other_content,
            "the other scope's volume changed"
        );
        // The engine is shared: other tests import and drop images of their
        // own; the helpers' image (the test image) must still be there.
        assert!(
            self.sbx.ca_sbx_images().await.contains(self.sbx.image_id()),
            "the test image {} was removed",
            self.sbx.image_id()
        );
    }
}

/// Where one kill landed, and what the trial saw.
#[derive(Debug, Clone)]
struct Landing {
    trial: usize,
    /// The trial's stratum: its moment as a fraction of `T` (None: a control).
    fraction: Option<f64>,
    /// `T` when the run started: the median run time of unkilled runs so far.
    t: Duration,
    /// Worlds this trial took (a run that ended before its moment is run
    /// again on a new world, `T` updated).
    attempts: usize,
    /// When the kill was due, from the start (None: a control, never killed).
    due: Option<Duration>,
    /// When it was sent (None: the run had exited by then).
    sent: Option<Duration>,
    exit: Option<i32>,
    run1: Duration,
    audit_containers: usize,
    audit_volumes: usize,
    archives: usize,
    orphan_manifests: usize,
    partials: usize,
    helpers: usize,
    volumes_left: usize,
    run2: Duration,
    run2_removed: (usize, usize),
    partials_after: usize,
    /// Helpers made after the kill that stopped run 2 from converging.
    late_helpers: usize,
    /// How long run 3 took, when run 2 did not converge.
    run3: Option<Duration>,
    /// This trial's volume names that exist again at the end: volumes the
    /// engine made (unlabeled) for a helper it made after the volume went.
    recreated: usize,
}

impl Landing {
    /// In words: what the run was doing.
    fn phase(&self) -> String {
        if self.due.is_none() {
            return "control (not killed)".into();
        }
        if self.exit.is_some() {
            return "after exit".into();
        }
        let mut p = Vec::new();
        let removed_volumes = BOXES - self.volumes_left;
        if self.audit_containers == 0 && self.archives == 0 && self.helpers == 0 {
            p.push("start: no removal ended yet");
        } else if self.audit_containers < BOXES && self.helpers == 0 && self.archives == 0 {
            p.push("removing containers");
        }
        if self.partials > 0 || self.helpers > 0 {
            p.push("mid-archive");
        }
        if self.orphan_manifests > 0 {
            p.push("between manifest and archive rename");
        }
        if self.archives > removed_volumes {
            p.push("archived, volume not yet removed");
        }
        if self.volumes_left == 0 {
            p.push("verifying");
        } else if p.is_empty() {
            p.push("between volumes");
        }
        p.join(" + ")
    }
}

/// The run times of first runs that were not killed (the controls', and
/// those that ended before their moment), in the order they ended.
type Times = Arc<std::sync::Mutex<Vec<Duration>>>;

/// Unkilled runs `T` is the median of: the latest, since the machine's load
/// changes as the trials' own world making and checks come and go (and when
/// this test still ran inside the main suite, runs at its start took 12–21 s
/// and runs near its end 1–5 s).
const RECENT: usize = 3;

/// `T`: the median of the `RECENT` latest unkilled run times.
fn median(times: &[Duration]) -> Duration {
    let mut t = times[times.len().saturating_sub(RECENT)..].to_vec();
    t.sort();
    t.get(t.len() / 2)
        .copied()
        .unwrap_or(Duration::from_secs(5))
}

/// One trial: make the world, run 1 (killed at `fraction` of `T`, or not),
/// check, run 2, check, clean up.
async fn trial(
    host: String,
    trial: usize,
    seed: u64,
    fraction: Option<f64>,
    quiet: Arc<RwLock<()>>,
    times: Times,
) -> Option<Landing> {
    let t0 = Instant::now();
    let busy = quiet.read().await;
    let world = World::make(&host, trial, seed).await?;
    drop(busy);
    let made = t0.elapsed();
    // Run 1 alone: nothing else of the test runs meanwhile (the others
    // wait to make their worlds, check, or run again), so that every run 1
    // meets the same quiet engine and the kill moments, fractions of the
    // controls' run time, fall all along a run.
    let alone = quiet.clone().write_owned().await;
    // `T` as the runs go now: the load of other tests changes over time.
    let t = median(&times.lock().unwrap());
    let due = fraction.map(|f| t.mul_f64(f));
    let run = world.cli().spawn_guarded(world.args());
    let started = Instant::now();
    // The kill on a thread of its own: a busy runtime worker never delays it.
    let (out, sent, killed_at) = tokio::task::spawn_blocking(move || {
        let mut sent = None;
        let mut killed_at = None;
        if let Some(due) = due {
            std::thread::sleep((started + due).saturating_duration_since(Instant::now()));
            if run.alive() {
                sent = Some(started.elapsed());
                killed_at = Some(std::time::SystemTime::now());
                run.signal(libc::SIGKILL);
            }
        }
        (run.wait(), sent, killed_at)
    })
    .await
    .unwrap();
    drop(alone);
    let _busy = quiet.read().await;
    let run1 = out.elapsed;
    if out.code.is_some() {
        times.lock().unwrap().push(run1);
    }
    match (due, out.code) {
        (None, code) => assert_eq!(code, Some(0), "a control run must converge\n{}", out.dump()),
        (Some(_), None) => {}
        // Exited before the kill: it must have converged.
        (Some(_), code) => assert_eq!(code, Some(0), "{}", out.dump()),
    }

    // Right after: DIR, the audit log, the helpers, the volumes.
    let state = dir_state(&world.archive_dir());
    let lines = audit_lines(&world.audit);
    let helpers1 = world.helpers().await;
    let left1 = world.volumes_left().await;
    world.check_helpers(&helpers1);
    let archived1 = world.check_dir(&state);
    world.check_audit(&lines);
    for v in world.expected.keys() {
        if !left1.contains(v) {
            assert!(
                archived1.contains_key(v),
                "volume {v} is gone without an archive (trial {trial})"
            );
        }
    }
    let count = |kind: &str| {
        lines
            .iter()
            .filter(|l| l["kind"] == kind && l["outcome"] == "removed")
            .count()
    };
    let mut landing = Landing {
        trial,
        fraction,
        t,
        attempts: 1,
        due,
        sent,
        exit: out.code,
        run1,
        audit_containers: count("container"),
        audit_volumes: count("volume"),
        archives: state.archives.len(),
        orphan_manifests: state.orphan_manifests.len(),
        partials: state.partials.len(),
        helpers: helpers1.len(),
        volumes_left: left1.len(),
        run2: Duration::ZERO,
        run2_removed: (0, 0),
        partials_after: 0,
        late_helpers: 0,
        run3: None,
        recreated: 0,
    };

    let checked1 = t0.elapsed();
    // Run 2 converges and loses nothing.
    let out2 = world.cli().run_with(world.args());
    landing.run2 = out2.elapsed;
    let report = out2.json();
    let removed = |kind: &str| report["removed"][kind].as_array().map_or(0, Vec::len);
    landing.run2_removed = (removed("containers"), removed("volumes"));
    if let (Some(1), Some(killed_at)) = (out2.code, killed_at) {
        // A helper the killed run asked for can be made by the engine
        // after the kill, and after run 2's plan: then run 2 cannot
        // remove that volume. Only that case is let through, and run 3
        // must converge.
        landing.late_helpers = world
            .late_helpers(&report, killed_at)
            .await
            .unwrap_or_else(|why| {
                panic!(
                    "run 2 failed, and not only because of helpers made after the kill: {why}\n{}",
                    out2.dump()
                )
            });
        let out3 = world.cli().run_with(world.args());
        out3.success();
        assert_eq!(out3.json()["converged"], true, "{}", out3.dump());
        landing.run3 = Some(out3.elapsed);
    } else {
        out2.success();
        assert_eq!(report["converged"], true, "{}", out2.dump());
    }
    let managed = [String::from("ca.sandbox=1"), world.sbx.scope_arg()];
    let containers: Vec<String> = containers_with(&world.sbx, &managed)
        .await
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert!(
        containers.is_empty(),
        "managed containers left: {containers:?}\n{}",
        out2.dump()
    );
    let volumes = volumes_with(&world.sbx, &managed).await;
    assert!(
        volumes.is_empty(),
        "managed volumes left: {volumes:?}\n{}",
        out2.dump()
    );
    let helpers2 = world.helpers().await;
    assert!(
        helpers2.is_empty(),
        "helpers left after run 2: {helpers2:?}"
    );
    for h in &helpers1 {
        assert!(
            !world.sbx.container_exists(&h.id).await,
            "helper {} stays",
            h.id
        );
    }
    let state2 = dir_state(&world.archive_dir());
    landing.partials_after = state2.partials.len();
    assert!(
        state2.partials.is_empty(),
        "temporary files left after run 2: {:?}",
        state2.partials
    );
    assert!(
        state2.orphan_manifests.is_empty(),
        "manifests without their archive after run 2: {:?}",
        state2.orphan_manifests
    );
    let archived = world.check_dir(&state2);
    let missing: Vec<&String> = world
        .expected
        .keys()
        .filter(|v| !archived.contains_key(*v))
        .collect();
    assert!(missing.is_empty(), "never archived: {missing:?}");
    // Run 1's archives still stand, unchanged.
    for a in &state.archives {
        assert!(state2.archives.contains(a), "{} went", a.display());
    }
    let lines2 = audit_lines(&world.audit);
    assert!(lines2.len() >= lines.len());
    assert_eq!(
        &lines2[..lines.len()],
        &lines[..],
        "the audit log is appended to"
    );
    world.check_audit(&lines2);
    world.check_decoys().await;
    // A volume of ours that exists again is one the engine made for a late
    // helper after the volume was removed: unlabeled (never ours to remove).
    for v in world.expected.keys() {
        if let Ok(found) = world.sbx.docker().inspect_volume(v).await {
            assert!(
                !found.labels.contains_key("ca.sandbox"),
                "volume {v} is back with labels {:?}",
                found.labels
            );
            landing.recreated += 1;
        }
    }
    let checked2 = t0.elapsed();

    let World { sbx, other, .. } = world;
    let failed = sbx.cleanup().await;
    assert!(failed.is_empty(), "{failed:?}");
    let failed = other.cleanup().await;
    assert!(failed.is_empty(), "{failed:?}");
    eprintln!(
        "archive_crash: trial {trial}: made in {} s, run 1 {} s, checked at {} s, run 2 {} s, checked at {} s, cleaned up at {} s",
        secs(made),
        secs(landing.run1),
        secs(checked1),
        secs(landing.run2),
        secs(checked2),
        secs(t0.elapsed())
    );
    Some(landing)
}

/// Attempts at most per trial: a run that ended before its moment is run
/// again on a new world, with `T` as the runs go then.
const ATTEMPTS: usize = 5;

/// Runs `trials` (index, fraction of `T`) `CONCURRENCY` at a time: what each
/// saw, and why each trial that failed did.
async fn run_all(
    host: &str,
    seed: u64,
    trials: Vec<(usize, Option<f64>)>,
    times: &Times,
) -> (Vec<Landing>, Vec<String>) {
    let quiet = Arc::new(RwLock::new(()));
    let results: Vec<(usize, Result<Option<Landing>, tokio::task::JoinError>)> =
        futures_util::stream::iter(trials)
            .map(|(i, fraction)| {
                let quiet = quiet.clone();
                let host = host.to_string();
                let times = times.clone();
                async move {
                    let mut attempts = 0;
                    loop {
                        attempts += 1;
                        let r = tokio::spawn(trial(
                            host.clone(),
                            i,
                            seed,
                            fraction,
                            quiet.clone(),
                            times.clone(),
                        ))
                        .await;
                        match r {
                            Ok(Some(l))
                                if l.due.is_some() && l.exit.is_some() && attempts < ATTEMPTS =>
                            {
                                continue
                            }
                            Ok(Some(mut l)) => {
                                l.attempts = attempts;
                                return (i, Ok(Some(l)));
                            }
                            other => return (i, other),
                        }
                    }
                }
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
    let mut landings = Vec::new();
    let mut failed = Vec::new();
    for (i, r) in results {
        match r {
            Ok(Some(l)) => landings.push(l),
            Ok(None) => {}
            Err(e) => {
                let why = e
                    .try_into_panic()
                    .ok()
                    .and_then(|p| {
                        p.downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    })
                    .unwrap_or_else(|| "(no message)".into());
                failed.push(format!("trial {i}: {why}"));
            }
        }
    }
    landings.sort_by_key(|l| l.trial);
    (landings, failed)
}

/// Fails the test naming every trial that failed.
fn assert_none_failed(seed: u64, failed: &[String], table: &str) {
    assert!(
        failed.is_empty(),
        "archive_crash (seed {seed}, {SEED_ENV}={seed} repeats it): {} trial(s) failed:\n{}\n{table}",
        failed.len(),
        failed.join("\n---\n")
    );
}

fn secs(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64())
}

/// On a dockerd of the test's own (`SecondDockerd::start`, stopped by its
/// pid at the end): its archive traffic holds containers' locks in the
/// engine, and on the main engine that stalled other tests' listings (which
/// inspect every container) past their deadlines.
trial!(
    sigkill_at_20_random_moments_of_apply_archive_loses_nothing,
    worker_threads = 4
);
async fn sigkill_at_20_random_moments_of_apply_archive_loses_nothing() {
    let engine = SecondDockerd::new().start().await;
    let host = engine.socket_host();
    let seed = match std::env::var(SEED_ENV) {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{SEED_ENV}={s:?}: not a number: {e}")),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    };
    eprintln!("archive_crash: seed {seed} ({SEED_ENV}={seed} repeats the same kill moments)");
    let began = Instant::now();

    // T: the median run time of unkilled runs.
    let times: Times = Arc::default();
    let (controls, failed) = run_all(
        &host,
        seed,
        (0..CONTROLS).map(|i| (i, None)).collect(),
        &times,
    )
    .await;
    assert_none_failed(seed, &failed, "");
    if controls.is_empty() {
        return;
    }
    let t = median(&times.lock().unwrap());
    eprintln!(
        "archive_crash: {CONTROLS} unkilled runs of {BOXES} boxes: {:?} s; T = {} s",
        controls.iter().map(|l| secs(l.run1)).collect::<Vec<_>>(),
        secs(t)
    );

    // One moment in each of KILLS equal strata of [0, 1) of T, in a random
    // order; each trial takes T as it is when its run starts.
    let mut rng = Rng(seed);
    let mut fractions: Vec<f64> = (0..KILLS)
        .map(|k| (k as f64 + rng.unit()) / KILLS as f64)
        .collect();
    for i in (1..fractions.len()).rev() {
        let j = (rng.next() % (i as u64 + 1)) as usize;
        fractions.swap(i, j);
    }
    let (kills, failed) = run_all(
        &host,
        seed,
        fractions
            .iter()
            .enumerate()
            .map(|(k, f)| (CONTROLS + k, Some(*f)))
            .collect(),
        &times,
    )
    .await;

    let mut table = String::from(
        "| trial | T (s) | % of T | due (s) | sent (s) | tries | exit | audit c/v | archives | orphan .json | .partial | helpers | volumes left | run 2 (s) | run 2 removed c/v | late helpers, run 3 (s) | landed |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut by_due: Vec<&Landing> = controls.iter().chain(&kills).collect();
    by_due.sort_by(|a, b| a.fraction.partial_cmp(&b.fraction).unwrap());
    for l in by_due {
        table.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {}/{} | {} | {} | {} | {} | {} | {} | {}/{} | {} | {} |\n",
            l.trial,
            l.fraction.map_or("-".into(), |_| secs(l.t)),
            l.fraction.map_or("-".into(), |f| format!("{:.0}", 100.0 * f)),
            l.due.map_or("-".into(), secs),
            l.sent.map_or("-".into(), secs),
            l.attempts,
            l.exit.map_or("KILL".into(), |c| c.to_string()),
            l.audit_containers,
            l.audit_volumes,
            l.archives,
            l.orphan_manifests,
            l.partials,
            l.helpers,
            l.volumes_left,
            secs(l.run2),
            l.run2_removed.0,
            l.run2_removed.1,
            match l.run3 {
                Some(d) => format!("{}, {}", l.late_helpers, secs(d)),
                None => "-".into(),
            },
            l.phase(),
        ));
    }
    let killed = kills.iter().filter(|l| l.exit.is_none()).count();
    let run3 = kills.iter().filter(|l| l.run3.is_some()).count();
    let late: usize = kills.iter().map(|l| l.late_helpers).sum();
    let recreated: usize = kills.iter().map(|l| l.recreated).sum();
    eprintln!(
        "archive_crash: seed {seed}, T = {} s at first, {} s at the end, {killed} of {} runs killed, wall {} s; run 2 stopped by {late} helpers made after the kill in {run3} trials (run 3 converged); {recreated} volumes made again, unlabeled, by the engine for such helpers\n{table}",
        secs(t),
        secs(median(&times.lock().unwrap())),
        kills.len(),
        secs(began.elapsed())
    );
    assert_none_failed(seed, &failed, &table);
    // The strata cover [0, T): most runs must really have been killed.
    assert!(
        killed * 2 >= kills.len(),
        "only {killed} of {} runs were still running at their kill moment (seed {seed}): the runs got faster than T, even with {ATTEMPTS} tries\n{table}",
        kills.len()
    );
}
