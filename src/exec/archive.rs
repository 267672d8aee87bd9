//! Archiving a managed volume before it is removed (`--archive DIR`), and
//! restoring one (`restore ARCHIVE`).
//!
//! Owns the engine calls of both (a helper container that is never started,
//! the tar stream out of it or into it, the helper's removal) and the files:
//! `DIR/<engine>/<box or _>/<volume>-<UTC time>.tar.zst` and its manifest
//! `.json` beside it. The tar stream is copied into 1 MiB blocks from a pool
//! of four, and goes through a zstd encoder (two worker threads, 2 MiB jobs)
//! into a temporary file on a blocking thread (memory stays flat whatever
//! the volume's size), whose writeback starts as it is written; then fsync,
//! the manifest (fsynced), the
//! manifest's rename, the archive's rename, and an fsync of the directory. So
//! an archive under a final name always has its manifest, and a partial
//! archive never stands under a final name. On any failure the temporary files
//! and the helper are removed and a typed `ArchiveError` says why. A writer
//! holds a lock on each of its temporary files while it lives; before writing
//! into a folder it sweeps what dead writers left there (`sweep`), never a
//! living writer's file. Every file and folder is made through
//! `exec::files`: `0600` and `0700`, and never through a symbolic link (a
//! link below `DIR` is refused: `ArchiveError::Symlink`). The engine's and
//! the box's names become one path element each, injectively
//! (`path_element`, docs/archive.md).
//!
//! Reads only through a helper made from an image already present (a retained
//! `ca-sbx:*` image): never pulls. Returns typed results; never prints and
//! never decides whether the volume goes (`apply` does, only after `Ok`).

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures_util::stream::StreamExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::engine::{Engine, EngineError, Helper, TarBody, HELPER_MOUNT};
use crate::exec::files::{self, Folder};
use crate::model::{
    ImageInfo, Kind, Labels, Object, ObjectKey, ARCHIVE_HELPER_ROLE, BOX_ID_LABEL, ROLE_LABEL,
};

/// The zstd level archives are written with.
const ZSTD_LEVEL: i32 = 3;
/// The version of the manifest's JSON form.
const MANIFEST_VERSION: u32 = 1;
/// Chunks in flight between an archive's decompressing reader thread and
/// the engine (restore).
const IN_FLIGHT: usize = 8;
/// The bytes of the engine's tar stream handed to the writer thread at once.
/// The engine's answer comes in chunks of about 32 KiB; handing each over
/// by itself made the reader and the writer take turns (see docs/archive.md).
const BLOCK: usize = 1 << 20;
/// Blocks in existence at once (filling, in flight, being compressed): with
/// `BLOCK`, what bounds the stream's memory (4 MiB), whatever its chunks.
const BLOCKS: usize = 4;
/// zstd's worker threads: two, so that compression runs beside the writer
/// thread (which counts, feeds zstd, hashes and writes) and keeps up with
/// the engine (one worker, as the zstd CLI has, was 0.5 s slower on 1 GiB;
/// a second holds about 11 MiB more: docs/archive.md).
const ZSTD_WORKERS: u32 = 2;
/// The input of one zstd job. zstd's own default at level 3 is 8 MiB, which
/// holds about 56 MiB (the CLI's RSS); 2 MiB holds about 16 MiB.
const ZSTD_JOB: u32 = 2 << 20;
/// zstd's output buffer, written to the archive file at once (zstd's own
/// default is 32 KiB).
const WRITE_BUFFER: usize = 1 << 20;
/// The bytes written to an archive file between two starts of their
/// writeback to the disk (see `WriteBehind`).
const WRITE_BEHIND: u64 = 8 << 20;
/// The bytes a restore reads from the archive at once.
const READ_CHUNK: usize = 64 * 1024;

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
    /// Milliseconds from the request for the engine's tar stream until the
    /// archive and its manifest stood under their final names, synced.
    pub elapsed_ms: u64,
}

/// What stands beside each archive: where it came from and what it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
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

/// A name as one path element of an archive's place (an engine's name, a
/// box ID, a volume's name in the file's name), injectively: two names never
/// share an element. Every byte outside `[A-Za-z0-9._-]`, `%` itself
/// included, becomes `%XX` (upper-case hex), and so does a leading `.` (no
/// hidden file, never `.` nor `..`); the name `_` is `%5F` (a bare `_` is
/// the folder of volumes of no box), and the empty name is `%` (which
/// nothing else encodes to: every other `%` is followed by two hex digits).
/// So `a/b` is `a%2Fb`, `a_b` stays `a_b`, `../x` is `%2E.%2Fx`. Decoding
/// `%XX` gives the name back (docs/archive.md).
fn path_element(text: &str) -> String {
    use std::fmt::Write as _;
    match text {
        "" => return "%".into(),
        "_" => return "%5F".into(),
        _ => {}
    }
    let mut out = String::with_capacity(text.len());
    for (i, b) in text.bytes().enumerate() {
        if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-') || (b == b'.' && i > 0) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// `20261130T201500Z`: a UTC time as a file name takes it.
fn stamp(secs: i64) -> String {
    crate::model::time::rfc3339(secs)
        .replace(['-', ':'], "")
        .trim_end_matches('Z')
        .to_string()
        + "Z"
}

/// The folders under `DIR` the archives of `box_id`'s volumes on `engine`
/// go to: `<engine>/<box or _>`, each one path element (`path_element`).
fn elements(engine: &str, box_id: Option<&str>) -> [String; 2] {
    [
        path_element(engine),
        box_id.map(path_element).unwrap_or_else(|| "_".into()),
    ]
}

/// The folder the archives of `box_id`'s volumes on `engine` go to.
pub fn folder(dir: &Path, engine: &str, box_id: Option<&str>) -> PathBuf {
    let [engine, box_folder] = elements(engine, box_id);
    dir.join(engine).join(box_folder)
}

/// Opens `DIR/<engine>/<box>` (`elements`), making what is missing
/// (`0700`). `DIR` is the user's: a link in it is followed. Each level under
/// it is opened without following a link: a link there is refused
/// (`Symlink`), nothing is written through it.
fn open_folder(dir: &Path, elements: &[String]) -> Result<Folder, ArchiveError> {
    let mut folder =
        Folder::create_all(dir).map_err(|e| ArchiveError::io("create folder", dir, e))?;
    for name in elements {
        folder = folder.child(name).map_err(|e| {
            if files::is_link(&e) {
                ArchiveError::Symlink(folder.join(name))
            } else {
                ArchiveError::io("create folder", &folder.join(name), e)
            }
        })?;
    }
    Ok(folder)
}

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
    let written = write_from(engine, &id, HELPER_MOUNT, volume, dir).await;
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
/// caller has stopped. The tar's entries are rooted at `path`'s last element
/// (the manifest's `root`). The container and the volume are left as they are.
pub async fn archive_through(
    engine: &dyn Engine,
    container: &str,
    path: &str,
    volume: &Object,
    dir: &Path,
) -> Result<Archived, ArchiveError> {
    write_from(engine, container, path, volume, dir).await
}

/// Streams `path` of `container` (where `volume` is mounted) into `dir`:
/// the manifest made, the archive written and both renamed.
async fn write_from(
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
    let place = Place {
        dir: dir.to_path_buf(),
        elements: elements(engine.name(), box_id.as_deref()),
    };
    let base = format!("{}-{}", path_element(&volume.name), stamp(now));
    stream_to_file(engine, container, path, place, base, manifest).await
}

/// Where an archive goes: `dir/<engine>/<box>`, opened by the writer.
struct Place {
    dir: PathBuf,
    elements: [String; 2],
}

/// Removes a helper container; one already gone counts as removed.
async fn remove_helper(engine: &dyn Engine, key: &ObjectKey) -> Result<(), EngineError> {
    match engine.remove(key).await {
        Err(e) if !e.is_not_found() => Err(e),
        _ => Ok(()),
    }
}

/// Messages from the engine's stream to the writer thread.
enum Chunk {
    Data(Block),
    /// The stream ended well: finish the file.
    End,
}

/// A buffer of the engine's stream on its way to the writer thread. It goes
/// back to its pool when dropped, wherever that happens, so the buffers in
/// existence never exceed the pool's size.
struct Block {
    data: Vec<u8>,
    home: tokio::sync::mpsc::Sender<Vec<u8>>,
}

impl std::ops::Deref for Block {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.data
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        let mut data = std::mem::take(&mut self.data);
        data.clear();
        // The pool has room for every buffer; a closed pool frees it.
        let _ = self.home.try_send(data);
    }
}

/// Streams `path` of `container` into the archive and renames it (see the module header).
async fn stream_to_file(
    engine: &dyn Engine,
    container: &str,
    path: &str,
    place: Place,
    base: String,
    manifest: Manifest,
) -> Result<Archived, ArchiveError> {
    let began = std::time::Instant::now();
    let (tx, rx) = tokio::sync::mpsc::channel::<Chunk>(BLOCKS);
    let writer =
        tokio::task::spawn_blocking(move || write_archive(rx, &place, &base, manifest, began));
    // The stream is read by a task of its own, on the runtime's workers where
    // the engine's connection runs, rather than by whoever awaits this (the
    // main thread, for `apply`): one thread fewer to wake for every chunk.
    let stream = engine.download(container, path);
    let pump = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(pump(stream, tx)));
    let failed = pump.await.unwrap_or_else(|e| {
        Some(ArchiveError::Tar(format!(
            "the stream's reader did not finish: {e}"
        )))
    });
    let written = writer.await.unwrap_or_else(|e| {
        Err(ArchiveError::Tar(format!(
            "the writer thread did not finish: {e}"
        )))
    });
    match failed {
        Some(e) => Err(e),
        None => written,
    }
}

/// Copies the engine's stream into blocks of a pool of `BLOCKS` and hands
/// each full one to the writer; `End` once the stream ended well. Each chunk
/// of the engine is dropped as soon as it is copied, so the HTTP client can
/// reuse its read buffer. Returns the engine's error if its stream failed;
/// `None` also when the writer stopped first (its own error says why).
async fn pump(
    mut stream: crate::engine::TarStream,
    tx: tokio::sync::mpsc::Sender<Chunk>,
) -> Option<ArchiveError> {
    let (home, mut pool) = tokio::sync::mpsc::channel::<Vec<u8>>(BLOCKS);
    for _ in 0..BLOCKS {
        let _ = home.try_send(Vec::new());
    }
    // The next empty block, allocated on its first use. Every block comes
    // back to the pool when dropped (a writer that stops drops those it
    // holds), and the pool never closes while `home` lives: `recv` waits
    // for one and never answers `None`.
    let mut next = async || {
        let mut data = pool.recv().await.unwrap_or_default();
        data.reserve_exact(BLOCK);
        Block {
            data,
            home: home.clone(),
        }
    };
    let mut block = next().await;
    while let Some(chunk) = stream.next().await {
        let mut data = match chunk {
            Ok(data) => data,
            Err(e) => return Some(ArchiveError::Engine(e)),
        };
        while !data.is_empty() {
            let n = (BLOCK - block.data.len()).min(data.len());
            block.data.extend_from_slice(&data.split_to(n));
            if block.data.len() == BLOCK {
                if tx.send(Chunk::Data(block)).await.is_err() {
                    return None;
                }
                block = next().await;
            }
        }
    }
    if !block.data.is_empty() && tx.send(Chunk::Data(block)).await.is_err() {
        return None;
    }
    let _ = tx.send(Chunk::End).await;
    None
}

/// A writer that hashes and counts what goes through it.
struct Hashing<W> {
    inner: W,
    sha: Sha256,
    bytes: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.sha.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The archive file, written behind: every `WRITE_BEHIND` bytes written,
/// their writeback to the disk starts (`sync_file_range`, Linux), so the
/// `fsync` at the end finds little left to write instead of the whole
/// archive (measured: see docs/archive.md). Elsewhere a plain file.
struct WriteBehind {
    file: std::fs::File,
    /// Bytes written, and the offset up to which writeback has started.
    written: u64,
    started: u64,
}

impl WriteBehind {
    fn new(file: std::fs::File) -> Self {
        WriteBehind {
            file,
            written: 0,
            started: 0,
        }
    }

    #[cfg(target_os = "linux")]
    fn start_writeback(&mut self) {
        use std::os::fd::AsRawFd as _;
        let len = self.written - self.started;
        // SAFETY: a plain syscall on a file descriptor this value owns.
        // Only a hint: a failure leaves the work to the final fsync.
        unsafe {
            libc::sync_file_range(
                self.file.as_raw_fd(),
                self.started as libc::off64_t,
                len as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            );
        }
        self.started = self.written;
    }

    #[cfg(not(target_os = "linux"))]
    fn start_writeback(&mut self) {}
}

impl Write for WriteBehind {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        if self.written - self.started >= WRITE_BEHIND {
            self.start_writeback();
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Removes what it names when dropped, unless disarmed (`paths` cleared): a
/// failure at any point leaves no temporary file and no half-named pair. The
/// temporary files' locks (`held`) are let go only after the removals, so no
/// sweep takes a file this writer still means to remove or rename.
struct Cleanup<'a> {
    folder: &'a Folder,
    names: Vec<String>,
    held: Vec<Partial>,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = self.folder.remove(name);
        }
        // `held` is dropped after this body: the locks go last.
    }
}

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

/// The writer thread: chunks in, `<base>.tar.zst` and `<base>.json` out.
fn write_archive(
    mut rx: tokio::sync::mpsc::Receiver<Chunk>,
    place: &Place,
    base: &str,
    mut manifest: Manifest,
    began: std::time::Instant,
) -> Result<Archived, ArchiveError> {
    let folder = &open_folder(&place.dir, &place.elements)?;
    // What killed writers left here goes first (never a living writer's).
    sweep(folder);
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
    let base = base.as_str();
    let archive_name = format!("{base}.tar.zst");
    let manifest_name = format!("{base}.json");
    let final_archive = folder.join(&archive_name);
    let final_manifest = folder.join(&manifest_name);
    let tmp_archive_name = format!(".{archive_name}{PARTIAL}");
    let tmp_manifest_name = format!(".{manifest_name}{PARTIAL}");
    let tmp_archive = folder.join(&tmp_archive_name);
    let tmp_manifest = folder.join(&tmp_manifest_name);
    let mut cleanup = Cleanup {
        folder,
        names: vec![tmp_archive_name.clone(), tmp_manifest_name.clone()],
        held: Vec::new(),
    };
    // Locked until the archive stands under its final name (see `sweep`):
    // the encoder writes through a second handle of the same open file.
    let partial = Partial::create(folder, &tmp_archive_name)
        .map_err(|e| ArchiveError::io("create", &tmp_archive, e))?;
    let file = partial
        .file
        .try_clone()
        .map_err(|e| ArchiveError::io("create", &tmp_archive, e))?;
    cleanup.held.push(partial);
    let write_err = |e| ArchiveError::io("write", &tmp_archive, e);
    // zstd's output goes straight to the file from a buffer of
    // `WRITE_BUFFER` (its default is 32 KiB): one copy fewer than a
    // `BufWriter` behind it, and one write(2) per MiB.
    let hashing = Hashing {
        inner: WriteBehind::new(file),
        sha: Sha256::new(),
        bytes: 0,
    };
    let raw = zstd::stream::raw::Encoder::new(ZSTD_LEVEL).map_err(write_err)?;
    let mut encoder = zstd::stream::write::Encoder::with_writer(
        zstd::stream::zio::Writer::new_with_capacity(hashing, raw, WRITE_BUFFER),
    );
    encoder.multithread(ZSTD_WORKERS).map_err(write_err)?;
    encoder
        .set_parameter(zstd::zstd_safe::CParameter::JobSize(ZSTD_JOB))
        .map_err(write_err)?;
    let mut tar = TarCount::default();
    if !encode(&mut rx, &mut tar, &mut encoder).map_err(write_err)? {
        // The stream broke: the caller has the engine's error.
        return Err(ArchiveError::Tar("the stream stopped early".into()));
    }
    tar.check()?;
    let hashing = encoder.finish().map_err(write_err)?;
    let (sha, size) = (hashing.sha, hashing.bytes);
    let file = hashing.inner.file;
    file.sync_all().map_err(write_err)?;
    drop(file);

    let sha256 = hex(&sha.finalize());
    manifest.archive = format!("{base}.tar.zst");
    manifest.sha256 = sha256.clone();
    manifest.size = size;
    manifest.uncompressed_size = tar.bytes;
    manifest.file_count = tar.entries;
    let json = serde_json::to_vec_pretty(&manifest).expect("a manifest serializes");
    // Held by the cleanup at once: on a failure its lock goes only after
    // its removal.
    cleanup.held.push(
        Partial::create(folder, &tmp_manifest_name)
            .map_err(|e| ArchiveError::io("create", &tmp_manifest, e))?,
    );
    let mut m = &cleanup.held[cleanup.held.len() - 1].file;
    m.write_all(&json)
        .and_then(|()| m.write_all(b"\n"))
        .and_then(|()| m.sync_all())
        .map_err(|e| ArchiveError::io("write", &tmp_manifest, e))?;
    folder
        .rename(&tmp_manifest_name, &manifest_name)
        .map_err(|e| ArchiveError::io("rename", &tmp_manifest, e))?;
    // From here on a failure also takes the manifest back.
    cleanup.names.push(manifest_name.clone());
    folder
        .rename(&tmp_archive_name, &archive_name)
        .map_err(|e| ArchiveError::io("rename", &tmp_archive, e))?;
    // And from here the archive too, before its manifest: never an
    // archive under a final name without its manifest.
    cleanup
        .names
        .insert(cleanup.names.len() - 1, archive_name.clone());
    folder
        .sync()
        .map_err(|e| ArchiveError::io("sync folder", folder.path(), e))?;
    cleanup.names.clear();
    Ok(Archived {
        volume: manifest.volume,
        path: final_archive,
        manifest: final_manifest,
        sha256,
        bytes: manifest.size,
        uncompressed_size: manifest.uncompressed_size,
        file_count: manifest.file_count,
        elapsed_ms: u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX),
    })
}

/// The encode loop: every block counted and compressed. Whether it ended
/// well (`End`); else the stream broke and the caller has the engine's error.
fn encode<W: Write>(
    rx: &mut tokio::sync::mpsc::Receiver<Chunk>,
    tar: &mut TarCount,
    encoder: &mut W,
) -> io::Result<bool> {
    while let Some(chunk) = rx.blocking_recv() {
        match chunk {
            Chunk::Data(data) => {
                tar.feed(&data);
                encoder.write_all(&data)?;
            }
            Chunk::End => return Ok(true),
        }
    }
    Ok(false)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Counts a tar stream's bytes and entries as it streams by, reading only
/// the headers (meta entries: pax and GNU long names are not counted).
#[derive(Debug, Default)]
pub(crate) struct TarCount {
    /// Bytes seen.
    pub(crate) bytes: u64,
    /// Entries seen.
    pub(crate) entries: u64,
    /// The header being gathered.
    header: Vec<u8>,
    /// Bytes of the current entry's data (and padding) still to pass.
    skip: u64,
    /// A zero block (the end of the archive) was seen.
    ended: bool,
}

impl TarCount {
    pub(crate) fn feed(&mut self, mut data: &[u8]) {
        self.bytes += data.len() as u64;
        while !data.is_empty() {
            if self.skip > 0 {
                let n = usize::try_from(self.skip)
                    .unwrap_or(usize::MAX)
                    .min(data.len());
                self.skip -= n as u64;
                data = &data[n..];
                continue;
            }
            let n = (512 - self.header.len()).min(data.len());
            self.header.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.header.len() < 512 {
                break;
            }
            if self.header.iter().all(|&b| b == 0) {
                self.ended = true;
            } else if !self.ended {
                let size = tar_size(&self.header[124..136]);
                if !matches!(self.header[156], b'x' | b'g' | b'L' | b'K') {
                    self.entries += 1;
                }
                self.skip = size.div_ceil(512) * 512;
            }
            self.header.clear();
        }
    }

    /// Whether the stream ended on a block boundary, with its end marker.
    pub(crate) fn check(&self) -> Result<(), ArchiveError> {
        if self.skip > 0 || !self.header.is_empty() {
            return Err(ArchiveError::Tar(format!(
                "it stops inside an entry after {} bytes",
                self.bytes
            )));
        }
        if !self.ended {
            return Err(ArchiveError::Tar(format!(
                "it has no end marker after {} bytes",
                self.bytes
            )));
        }
        Ok(())
    }
}

/// A tar header's size field: octal, or base-256 when its first bit is set.
fn tar_size(field: &[u8]) -> u64 {
    if field[0] & 0x80 != 0 {
        return field[1..].iter().fold(0u64, |n, &b| {
            n.saturating_mul(256).saturating_add(u64::from(b))
        });
    }
    let text: String = field
        .iter()
        .take_while(|&&b| b != 0)
        .map(|&b| b as char)
        .collect();
    u64::from_str_radix(text.trim(), 8).unwrap_or(0)
}

/// A restored volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
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

/// SHA-256 (hex) of a file, read in chunks.
fn sha256_file(path: &Path) -> io::Result<String> {
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
        .map_err(|e| RestoreError::Archive(ArchiveError::io("read", archive, e)))?;
    tar.check().map_err(RestoreError::Archive)?;
    Ok((tar.entries, tar.bytes))
}

/// The reader thread: the archive, decompressed, in chunks, counted.
fn read_archive(
    path: &Path,
    tx: tokio::sync::mpsc::Sender<io::Result<Bytes>>,
) -> io::Result<TarCount> {
    let mut tar = TarCount::default();
    let file = std::fs::File::open(path)?;
    let mut decoder = zstd::stream::read::Decoder::new(file)?;
    let mut buf = vec![0; READ_CHUNK];
    loop {
        let n = match decoder.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = tx.blocking_send(Err(io::Error::new(e.kind(), e.to_string())));
                return Err(e);
            }
        };
        tar.feed(&buf[..n]);
        if tx
            .blocking_send(Ok(Bytes::copy_from_slice(&buf[..n])))
            .is_err()
        {
            return Err(io::Error::other("the engine stopped reading"));
        }
    }
    Ok(tar)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::memory::{
        box_labels, ContainerInfo, FaultAction, MemoryEngine, Op, VolumeInfo, World,
    };
    use crate::engine::ErrorKind;
    use crate::exec::apply::ApplyOptions;
    use crate::exec::event::Silent;
    use crate::exec::reconcile::reconcile_once;
    use crate::model::{Outcome, Reason, Scope};
    use crate::plan::{ArchivePolicy, Goal};
    use tokio_util::sync::CancellationToken;

    const NOW: i64 = 1_800_000_000;

    #[test]
    fn path_elements_never_climb_or_hide() {
        assert_eq!(path_element("box-1.a_b"), "box-1.a_b");
        assert_eq!(path_element("a/b"), "a%2Fb");
        assert_eq!(path_element("a_b"), "a_b");
        assert_eq!(path_element("../etc"), "%2E.%2Fetc");
        assert_eq!(path_element("a/b c"), "a%2Fb%20c");
        assert_eq!(path_element(".hidden"), "%2Ehidden");
        assert_eq!(path_element("."), "%2E");
        assert_eq!(path_element(".."), "%2E.");
        assert_eq!(path_element("50%"), "50%25");
        assert_eq!(path_element("caf\u{e9}"), "caf%C3%A9");
        assert_eq!(path_element(""), "%");
        assert_eq!(path_element("_"), "%5F");
        assert_eq!(
            folder(Path::new("/d"), "default", None),
            Path::new("/d/default/_")
        );
        assert_eq!(
            folder(Path::new("/d"), "ssh://h", Some("a/b")),
            Path::new("/d/ssh%3A%2F%2Fh/a%2Fb")
        );
        assert_eq!(stamp(0), "19700101T000000Z");
    }

    /// The name an element stands for (docs/archive.md): `%` is the empty
    /// name; else every `%XX` is the byte XX.
    fn decode(element: &str) -> Vec<u8> {
        if element == "%" {
            return Vec::new();
        }
        let b = element.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'%' {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
            } else {
                out.push(b[i]);
                i += 1;
            }
        }
        out
    }

    proptest::proptest! {
        /// Injective (decoding gives every name back, so two names never
        /// share an element), and always one plain element: never empty,
        /// `.`, `..`, hidden, `_` (no box), nor holding anything but
        /// `[A-Za-z0-9._%-]`.
        #[test]
        fn path_elements_are_injective_and_one_plain_element(name in "(\\PC|[/._%])*") {
            let e = path_element(&name);
            proptest::prop_assert_eq!(decode(&e), name.as_bytes());
            proptest::prop_assert!(!e.is_empty() && !e.starts_with('.') && e != "_", "{e:?}");
            proptest::prop_assert!(
                e.bytes().all(|b| b.is_ascii_alphanumeric() || b"._%-".contains(&b)),
                "{e:?}"
            );
        }
    }

    #[test]
    fn boxes_a_slash_b_and_a_underscore_b_and_no_box_never_share_a_folder() {
        let dir = Path::new("/d");
        let folders: std::collections::BTreeSet<PathBuf> = [
            None,
            Some("_"),
            Some("a/b"),
            Some("a_b"),
            Some("a%2Fb"),
            Some(""),
        ]
        .into_iter()
        .map(|b| folder(dir, "default", b))
        .collect();
        assert_eq!(folders.len(), 6, "{folders:?}");
    }

    #[test]
    fn manifest_is_beside_the_archive() {
        assert_eq!(
            manifest_path(Path::new("/a/b/v-19700101T000000Z.tar.zst")),
            PathBuf::from("/a/b/v-19700101T000000Z.json")
        );
    }

    /// A tar as the engine streams a helper's mount: `ca-sbx-volume/` and
    /// what is under it, a long name (a GNU or pax header) among them.
    fn sample_tar() -> Vec<u8> {
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

    #[test]
    #[cfg(target_os = "linux")]
    fn write_behind_writes_everything_and_starts_writeback_every_8_mib() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut w = WriteBehind::new(std::fs::File::create(&path).unwrap());
        let chunk: Vec<u8> = (0..=255u8).cycle().take(3 << 20).collect();
        for _ in 0..7 {
            w.write_all(&chunk).unwrap();
        }
        // 21 MiB written in 3 MiB writes: writeback started at 9 and 18 MiB.
        assert_eq!((w.written, w.started), (21 << 20, 18 << 20));
        w.flush().unwrap();
        let back = std::fs::read(&path).unwrap();
        assert_eq!(back.len(), 21 << 20);
        assert!(back.chunks(3 << 20).all(|c| c == chunk.as_slice()));
    }

    #[test]
    fn counts_tar_entries_as_they_stream_in_any_chunks() {
        let tar = sample_tar();
        let mut whole = TarCount::default();
        whole.feed(&tar);
        assert_eq!(whole.entries, 4);
        assert_eq!(whole.bytes, tar.len() as u64);
        whole.check().unwrap();
        let mut bytewise = TarCount::default();
        for c in tar.chunks(1) {
            bytewise.feed(c);
        }
        assert_eq!((bytewise.entries, bytewise.bytes), (4, tar.len() as u64));
        let mut cut = TarCount::default();
        cut.feed(&tar[..1000]);
        assert!(matches!(cut.check(), Err(ArchiveError::Tar(_))));
    }

    fn volume(name: &str, box_id: &str) -> VolumeInfo {
        VolumeInfo {
            name: name.into(),
            labels: box_labels(box_id),
            created_at: Some("2026-01-01T00:00:00Z".into()),
        }
    }

    fn image() -> ImageInfo {
        ImageInfo {
            id: "sha256:feed".into(),
            tags: vec!["ca-sbx:repo-1".into()],
        }
    }

    /// Box `b` (undeclared): a container mounting volume `v`, and the image.
    fn engine_with(images: Vec<ImageInfo>) -> MemoryEngine {
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

    fn goal(dir: &Path) -> Goal {
        Goal::Reconcile {
            boxes: vec![],
            keep_volumes: vec![],
            grace: None,
            max_lease: None,
            archive: Some(ArchivePolicy::new(&dir.to_string_lossy())),
        }
    }

    async fn run(engine: &MemoryEngine, goal: &Goal) -> crate::exec::report::Report {
        reconcile_once(
            engine,
            goal,
            &Scope::default(),
            NOW,
            &ApplyOptions::default(),
            &CancellationToken::new(),
            &Silent,
        )
        .await
        .unwrap()
    }

    /// Every file under `dir`, relative, sorted.
    fn files(dir: &Path) -> Vec<String> {
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

    #[tokio::test]
    async fn a_failed_read_through_the_container_leaves_it_stopped_and_the_volume() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine_through(vec![image()]);
        engine.inject(Op::Download, None, FaultAction::CutAfter(70_000, boom()), 1);
        let report = run(&engine, &goal(dir.path())).await;
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
            let goal = Goal::Reconcile {
                boxes: vec![],
                keep_volumes: vec![],
                grace: None,
                max_lease: None,
                archive: None,
            };
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
            let applied = crate::exec::apply::apply(
                &engine,
                &plan,
                &ApplyOptions::default(),
                &CancellationToken::new(),
                &Silent,
            )
            .await;
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

    fn boom() -> EngineError {
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
        engine.inject(Op::Download, None, FaultAction::CutAfter(70_000, boom()), 1);
        let report = run(&engine, &goal(dir.path())).await;
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

    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    }

    #[tokio::test]
    async fn archives_are_0600_and_the_folders_made_0700_under_umask_022() {
        // SAFETY: a plain syscall; 022 is this test binary's usual umask.
        unsafe { libc::umask(0o022) };
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
        use crate::exec::apply::apply;
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
        let applied = apply(
            &engine,
            &plan,
            &ApplyOptions::default(),
            &CancellationToken::new(),
            &Silent,
        )
        .await;
        assert!(matches!(
            applied.outcomes[volume],
            Outcome::ArchiveFailed(_)
        ));
        assert_eq!(applied.outcomes[volume].code(), "archiveFailed");
        let report = crate::exec::verify::verify(&engine, &plan, &applied).await;
        let verdict = crate::exec::report::Verdict::of_report(&report);
        assert!(verdict.failed, "{verdict:?}");
    }

    /// Edits the manifest beside `archive` with `edit`.
    fn edit_manifest(archive: &Path, edit: impl FnOnce(&mut Manifest)) {
        let path = manifest_path(archive);
        let mut m: Manifest = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        edit(&mut m);
        std::fs::write(&path, serde_json::to_vec(&m).unwrap()).unwrap();
    }

    #[tokio::test]
    async fn a_hostile_manifest_name_is_refused_before_any_engine_call() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine_with(vec![image()]);
        let report = run(&engine, &goal(dir.path())).await;
        let path = PathBuf::from(&report.archived[0].path);
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
        let dir = tempfile::tempdir().unwrap();
        let engine = engine_with(vec![image()]);
        let report = run(&engine, &goal(dir.path())).await;
        let path = PathBuf::from(&report.archived[0].path);
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
        let v = engine
            .world()
            .volumes
            .into_iter()
            .find(|v| v.name == r.volume)
            .unwrap();
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
        let dir = tempfile::tempdir().unwrap();
        let engine = engine_with(vec![image()]);
        let report = run(&engine, &goal(dir.path())).await;
        let path = PathBuf::from(&report.archived[0].path);
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
            FaultAction::Fail(EngineError::new(
                "create a helper container",
                crate::model::ErrorKind::Other {
                    status: Some(500),
                    message: "no".into(),
                },
            )),
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
        let dir = tempfile::tempdir().unwrap();
        let engine = engine_with(vec![image()]);
        let report = run(&engine, &goal(dir.path())).await;
        let path = PathBuf::from(&report.archived[0].path);
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
        let dir = tempfile::tempdir().unwrap();
        let engine = engine_with(vec![image()]);
        let report = run(&engine, &goal(dir.path())).await;
        let path = PathBuf::from(&report.archived[0].path);
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
        let dir = tempfile::tempdir().unwrap();
        let engine = engine_with(vec![image()]);
        let report = run(&engine, &goal(dir.path())).await;
        let path = PathBuf::from(&report.archived[0].path);
        engine.inject(Op::Upload, None, FaultAction::Fail(boom()), 1);
        let e = restore(&engine, &path, None, &scope_labels(&Scope::default()))
            .await
            .unwrap_err();
        assert!(matches!(e, RestoreError::Engine(_)), "{e}");
        assert!(engine.world().volumes.is_empty());
        assert!(engine.world().containers.is_empty());
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
        let removed = sweep(dir.path());
        assert_eq!(
            names(dir.path(), &removed),
            [".v-0.json.partial", ".v-0.tar.zst.partial"]
        );
        assert_eq!(std::fs::read(&live).unwrap(), b"in progress");
        assert!(sweep(dir.path()).is_empty(), "held: never swept");
        drop(held);
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
        let taken = |p: &Path| {
            let f = std::fs::File::open(p).unwrap();
            matches!(f.try_lock(), Err(std::fs::TryLockError::WouldBlock))
        };
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
