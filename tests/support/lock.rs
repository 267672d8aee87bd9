//! `CpLock`: one container's lock in dockerd, held the way a streaming
//! `docker cp` out of it holds it.
//!
//! dockerd takes a container's lock for `GET /containers/{id}/archive` and
//! gives it back only when the tar stream ends or its reader goes away. A
//! reader that stops reading leaves dockerd blocked in a write once the
//! socket's buffers are full, holding the lock: every inspect of that
//! container (`GET /containers/{id}/json`) then waits, while the container
//! listing still answers at once (see `docker-engine-facts.md`, "Locks and
//! hangs").
//!
//! [`CpLock::hold`] sends that request on a Unix socket of its own, reads the
//! answer's head only, and proves the lock is held before it returns: an
//! inspect of the container gets no answer within [`PROOF_DEADLINE`] while
//! `/_ping` of the same engine answers. Dropping the `CpLock` closes the
//! socket: dockerd's next write fails and the lock is given back.
//!
//! The stream must outgrow what the kernel buffers between dockerd and the
//! reader (a Unix socket's send buffer is `net.core.wmem_default`, 208 KiB
//! here) plus dockerd's own buffers, or dockerd finishes writing and lets go
//! of the lock at once. Measured on Docker 20.10.24 here: the archive of `/`
//! of a test-image container (`/sleep` and its libraries) is 2,198,965
//! bytes, already enough (the lock held without anything added); `hold`
//! first puts [`BALLAST_BYTES`] more in the container (`PUT
//! /containers/{id}/archive`, a file [`BALLAST_PATH`]; the archive is then
//! 6.4 MB) so that the margin does not depend on the host's libraries or its
//! socket buffers. Works on a running and on a stopped container.
//!
//! Also measured while the lock was held: the container listing (also
//! filtered by that container's ID), an inspect of another container,
//! `/info` and `/_ping` answer at once; `top`, `logs` and a second archive of
//! the locked container wait like its inspect, and so does `DELETE
//! /containers/{id}?force=1` (it answered 0.23 s after the lock was given
//! back). Once the socket is closed, an inspect answers again within 5-40 ms.
//!
//! Talks HTTP/1.1 over the socket directly (no bollard): the point is a
//! client that stops reading, which bollard never is. Blocks the calling
//! thread for up to a few seconds (the proof waits [`PROOF_DEADLINE`]).
//! Touches only the container it is given.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long the proof's inspect waits for an answer that must not come.
pub const PROOF_DEADLINE: Duration = Duration::from_secs(2);
/// Bytes put into the container before the lock is taken (incompressible;
/// the archive is not compressed anyway).
pub const BALLAST_BYTES: usize = 4 * 1024 * 1024;
/// Where the ballast goes in the container.
pub const BALLAST_PATH: &str = "/cp-lock-ballast";
/// Deadline of every setup call of this module (connect, upload, head).
const SETUP_DEADLINE: Duration = Duration::from_secs(30);

/// A held container lock; dropping it gives the lock back.
#[derive(Debug)]
pub struct CpLock {
    stream: Option<UnixStream>,
    socket: PathBuf,
    container: String,
    /// How long the proof's inspect waited in vain.
    pub proof_waited: Duration,
    /// How long `/_ping` took while the lock was held.
    pub ping_took: Duration,
}

impl CpLock {
    /// Holds the lock of container `container` (its full ID) in the dockerd
    /// at `socket` (a path, or a `unix://` URL), and proves it; `None`, after
    /// printing `skipped: could not hold the lock (<why>)`, when it cannot
    /// (the test then says it did not run and returns).
    pub fn hold(socket: impl AsRef<Path>, container: &str) -> Option<CpLock> {
        let socket = socket_path(socket.as_ref());
        match Self::try_hold(&socket, container) {
            Ok(lock) => {
                eprintln!(
                    "cp lock on {}: held (inspect unanswered for {:?}, /_ping answered in {:?})",
                    short(container),
                    lock.proof_waited,
                    lock.ping_took
                );
                Some(lock)
            }
            Err(why) => {
                eprintln!(
                    "skipped: could not hold the lock of container {} ({why})",
                    short(container)
                );
                None
            }
        }
    }

    fn try_hold(socket: &Path, container: &str) -> Result<CpLock, String> {
        put_ballast(socket, container)?;
        // The `docker cp` that stops reading.
        let mut stream = connect(socket)?;
        let request = format!(
            "GET /containers/{container}/archive?path=%2F HTTP/1.1\r\nHost: docker\r\n\r\n"
        );
        stream
            .write_all(request.as_bytes())
            .map_err(|e| format!("send the archive request: {e}"))?;
        let (status, head) = read_head(&mut stream, SETUP_DEADLINE)?;
        if status != 200 {
            return Err(format!("the archive request got {status}: {head}"));
        }
        // From here nothing more is read. dockerd writes until the buffers
        // are full, then blocks with the lock held.
        let (proof_waited, ping_took) = prove(socket, container)?;
        Ok(CpLock {
            stream: Some(stream),
            socket: socket.to_path_buf(),
            container: container.to_string(),
            proof_waited,
            ping_took,
        })
    }

    /// The container whose lock this is.
    pub fn container(&self) -> &str {
        &self.container
    }

    /// Gives the lock back (closes the socket) and waits until an inspect of
    /// the container answers again; returns how long that took.
    pub fn release(mut self) -> Duration {
        self.close();
        let started = Instant::now();
        loop {
            match inspect_status(&self.socket, &self.container, PROOF_DEADLINE) {
                Ok(_) => return started.elapsed(),
                Err(e) if started.elapsed() > SETUP_DEADLINE => {
                    panic!(
                        "container {} still locked {:?} after the cp stream was closed: {e}",
                        short(&self.container),
                        started.elapsed()
                    )
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    fn close(&mut self) {
        if let Some(stream) = self.stream.take() {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl Drop for CpLock {
    fn drop(&mut self) {
        self.close();
    }
}

/// The proof: an inspect of `container` gets no answer within
/// [`PROOF_DEADLINE`], and `/_ping` then answers (the engine itself is not
/// hung). Returns how long the inspect waited and how long the ping took.
fn prove(socket: &Path, container: &str) -> Result<(Duration, Duration), String> {
    let started = Instant::now();
    match inspect_status(socket, container, PROOF_DEADLINE) {
        Ok(status) => {
            return Err(format!(
                "an inspect answered {status} after {:?}: the stream did not keep the lock",
                started.elapsed()
            ))
        }
        Err(Unanswered::Error(e)) => return Err(format!("inspect: {e}")),
        Err(Unanswered::Timeout) => {}
    }
    let waited = started.elapsed();
    let pinged = Instant::now();
    let mut stream = connect(socket)?;
    stream
        .write_all(b"GET /_ping HTTP/1.1\r\nHost: docker\r\n\r\n")
        .map_err(|e| format!("send /_ping: {e}"))?;
    let (status, head) = read_head(&mut stream, PROOF_DEADLINE)?;
    if status != 200 {
        return Err(format!("/_ping answered {status}: {head}"));
    }
    Ok((waited, pinged.elapsed()))
}

/// Why an inspect gave no status.
#[derive(Debug)]
enum Unanswered {
    /// No answer within the deadline.
    Timeout,
    /// Anything else (no socket, a closed connection, a bad answer).
    Error(String),
}

impl std::fmt::Display for Unanswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unanswered::Timeout => write!(f, "no answer"),
            Unanswered::Error(e) => write!(f, "{e}"),
        }
    }
}

/// `GET /containers/{id}/json` on a connection of its own: the status, or
/// why there is none within `deadline`.
fn inspect_status(socket: &Path, container: &str, deadline: Duration) -> Result<u16, Unanswered> {
    let mut stream = connect(socket).map_err(Unanswered::Error)?;
    let request = format!("GET /containers/{container}/json HTTP/1.1\r\nHost: docker\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .map_err(|e| Unanswered::Error(format!("send the inspect: {e}")))?;
    let mut buf = [0u8; 512];
    match read_until(&mut stream, &mut buf, Instant::now() + deadline) {
        Ok(0) => Err(Unanswered::Error("the engine closed the connection".into())),
        Ok(n) => status_of(&buf[..n]).ok_or_else(|| {
            Unanswered::Error(format!(
                "not an HTTP answer: {:?}",
                String::from_utf8_lossy(&buf[..n])
            ))
        }),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Err(Unanswered::Timeout)
        }
        Err(e) => Err(Unanswered::Error(e.to_string())),
    }
}

/// Puts [`BALLAST_BYTES`] into the container at [`BALLAST_PATH`].
fn put_ballast(socket: &Path, container: &str) -> Result<(), String> {
    let tar = ballast_tar();
    let mut stream = connect(socket)?;
    let head = format!(
        "PUT /containers/{container}/archive?path=%2F HTTP/1.1\r\nHost: docker\r\n\
         Content-Type: application/x-tar\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        tar.len()
    );
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(&tar))
        .map_err(|e| format!("upload the ballast: {e}"))?;
    let (status, head) = read_head(&mut stream, SETUP_DEADLINE)?;
    if status != 200 {
        return Err(format!("uploading the ballast got {status}: {head}"));
    }
    Ok(())
}

/// A tar holding one file, [`BALLAST_PATH`], of [`BALLAST_BYTES`] bytes no
/// compressor shrinks.
fn ballast_tar() -> Vec<u8> {
    let data = super::files::random_bytes(0x0c0f_fee5, BALLAST_BYTES);
    let mut header = tar::Header::new_ustar();
    header.set_size(data.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_entry_type(tar::EntryType::Regular);
    let mut builder = tar::Builder::new(Vec::new());
    builder
        .append_data(
            &mut header,
            BALLAST_PATH.trim_start_matches('/'),
            data.as_slice(),
        )
        .expect("a tar in memory");
    builder.into_inner().expect("a tar in memory")
}

/// A connection to the engine's socket, its writes bounded by [`SETUP_DEADLINE`].
fn connect(socket: &Path) -> Result<UnixStream, String> {
    let stream =
        UnixStream::connect(socket).map_err(|e| format!("connect to {}: {e}", socket.display()))?;
    stream
        .set_write_timeout(Some(SETUP_DEADLINE))
        .map_err(|e| format!("set a write deadline: {e}"))?;
    Ok(stream)
}

/// One read that gives up at `until` (`TimedOut`). A read on a socket with a
/// receive timeout fails with EINTR when a signal arrives, even under
/// `SA_RESTART` (signal(7)); the test process gets signals (its children
/// end): such a read is retried with the time left.
fn read_until(stream: &mut UnixStream, buf: &mut [u8], until: Instant) -> std::io::Result<usize> {
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Reads an answer's head (up to the blank line; a few bytes of the body may
/// come with the last read and are dropped): its status and the head as text.
fn read_head(stream: &mut UnixStream, deadline: Duration) -> Result<(u16, String), String> {
    let until = Instant::now() + deadline;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match read_until(stream, &mut buf, until) {
            Ok(0) => {
                return Err(format!(
                    "the engine closed the connection after {:?}",
                    String::from_utf8_lossy(&head)
                ))
            }
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) => return Err(format!("read an answer's head: {e}")),
        }
        if head.len() > 64 * 1024 {
            return Err("an answer's head longer than 64 KiB".into());
        }
    }
    let end = head.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(0);
    let text = String::from_utf8_lossy(&head[..end]).into_owned();
    let status = status_of(&head).ok_or_else(|| format!("not an HTTP answer: {text:?}"))?;
    Ok((status, text))
}

/// The status of an HTTP answer that starts with `HTTP/1.x NNN`.
fn status_of(answer: &[u8]) -> Option<u16> {
    let text = String::from_utf8_lossy(answer);
    let line = text.lines().next()?;
    let mut words = line.split_whitespace();
    words.next().filter(|w| w.starts_with("HTTP/"))?;
    words.next()?.parse().ok()
}

/// `unix:///x/docker.sock` or `/x/docker.sock` -> `/x/docker.sock`.
fn socket_path(socket: &Path) -> PathBuf {
    let text = socket.to_string_lossy();
    PathBuf::from(text.strip_prefix("unix://").unwrap_or(&text))
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}
