//! The archive's data path: the engine's tar stream copied into 1 MiB
//! blocks from a pool of four, handed to a blocking writer thread that
//! counts it (`count`), feeds it to a zstd encoder (two worker threads,
//! 2 MiB jobs) and writes the compressed bytes, hashed, to the temporary
//! archive, whose writeback starts as it is written; then fsync and the
//! manifest. Memory stays flat whatever the volume's size (docs/archive.md
//! measures it). A stream that ended well is finished only once the engine
//! answered on a new connection after it (`Engine::answers_anew`): a dockerd
//! that began to shut down meanwhile sends a well-ended tar without the
//! files it unmounted, and such an archive is not kept.
//!
//! Owns the stream's way from the engine to the file and the numbers of
//! the manifest (SHA-256, sizes, entries); the files themselves, their
//! names and their renames are the protocol's (`protocol::Pending`). Must
//! not decide whether the volume goes.

use std::io::{self, Write};

use futures_util::stream::StreamExt;
use sha2::{Digest, Sha256};

use super::count::{self, CountError};
use super::manifest::{hex, Manifest};
use super::place::Place;
use super::protocol::Pending;
use super::{ArchiveError, Archived};
use crate::engine::Engine;

/// The zstd level archives are written with.
const ZSTD_LEVEL: i32 = 3;
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
pub(super) async fn stream_to_file(
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
    let pumped = pump.await.unwrap_or_else(|e| {
        Err(Some(ArchiveError::Tar(format!(
            "the stream's reader did not finish: {e}"
        ))))
    });
    // The stream ended well: the file is finished (its renames) only if the
    // engine still answers on a new connection, so that it was not shutting
    // down (and unmounting what it read from) while it sent the stream.
    let failed = match pumped {
        Ok(tx) => match engine.answers_anew().await {
            Ok(()) => {
                let _ = tx.send(Chunk::End).await;
                None
            }
            // `tx` dropped without the end: the writer removes its file.
            Err(e) => Some(ArchiveError::Unconfirmed(e)),
        },
        Err(failed) => failed,
    };
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
/// each full one to the writer; once the stream ended well, gives the
/// channel back (the caller sends `End`, or drops it). Each chunk of the
/// engine is dropped as soon as it is copied, so the HTTP client can reuse
/// its read buffer. Fails with the engine's error if its stream failed;
/// with `None` when the writer stopped first (its own error says why).
async fn pump(
    mut stream: crate::engine::TarStream,
    tx: tokio::sync::mpsc::Sender<Chunk>,
) -> Result<tokio::sync::mpsc::Sender<Chunk>, Option<ArchiveError>> {
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
            Err(e) => return Err(Some(ArchiveError::Engine(e))),
        };
        while !data.is_empty() {
            let n = (BLOCK - block.data.len()).min(data.len());
            block.data.extend_from_slice(&data.split_to(n));
            if block.data.len() == BLOCK {
                if tx.send(Chunk::Data(block)).await.is_err() {
                    return Err(None);
                }
                block = next().await;
            }
        }
    }
    if !block.data.is_empty() && tx.send(Chunk::Data(block)).await.is_err() {
        return Err(None);
    }
    Ok(tx)
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

/// The writer thread: chunks in, `<base>.tar.zst` and `<base>.json` out
/// (`Pending`: a free name, the temporary files, the renames).
fn write_archive(
    mut rx: tokio::sync::mpsc::Receiver<Chunk>,
    place: &Place,
    base: &str,
    mut manifest: Manifest,
    began: std::time::Instant,
) -> Result<Archived, ArchiveError> {
    let (pending, file) = Pending::begin(place, base)?;
    let tmp_archive = pending.tmp_archive();
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
    // Every block counted and compressed, until `End`.
    let tar = count::pass(
        || match rx.blocking_recv() {
            Some(Chunk::Data(block)) => Ok(Some(block)),
            Some(Chunk::End) => Ok(None),
            // The stream broke: the caller has the engine's error.
            None => Err(ArchiveError::Tar("the stream stopped early".into())),
        },
        |block: &Block| encoder.write_all(block).map_err(write_err),
    )
    .map_err(|e| match e {
        CountError::Pass(e) => e,
        CountError::Tar(why) => ArchiveError::Tar(why),
    })?;
    let hashing = encoder.finish().map_err(write_err)?;
    let (sha, size) = (hashing.sha, hashing.bytes);
    let file = hashing.inner.file;
    file.sync_all().map_err(write_err)?;
    drop(file);

    let sha256 = hex(&sha.finalize());
    manifest.archive = pending.archive_name();
    manifest.sha256 = sha256.clone();
    manifest.size = size;
    manifest.uncompressed_size = tar.bytes;
    manifest.file_count = tar.entries;
    let (path, manifest_path) = pending.commit(&manifest)?;
    Ok(Archived {
        volume: manifest.volume,
        path,
        manifest: manifest_path,
        sha256,
        bytes: manifest.size,
        uncompressed_size: manifest.uncompressed_size,
        file_count: manifest.file_count,
        file_bytes: tar.file_bytes,
        elapsed_ms: u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
