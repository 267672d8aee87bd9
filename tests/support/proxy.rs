//! A fault-injection proxy between `sandboxctl` and the real Docker engine.
//!
//! `Proxy::start()` listens on a Unix socket in a temp dir and forwards every
//! HTTP request to the real engine's socket, unless a rule says otherwise. Point
//! sandboxctl at it with `DOCKER_HOST=<proxy.docker_host()>`.
//!
//! A rule matches a request by method and a substring of its path (with any
//! `/v1.41`-style version prefix removed first, query string included), applies
//! to a number of matching requests, and does one [`Action`]: answer with a
//! status and Docker's `{"message": ...}` body, close the connection without
//! answering, delay (then forward), let "another actor" do the same call
//! first or concurrently, cut the engine off (this and every later request
//! closed unanswered: a connection lost mid-run), or pass on the start of an
//! answer's body and then fall silent or close (an engine hung, or a
//! connection lost, mid-stream). Rules are tried in the order they were
//! added; the first one that matches and has uses left wins; no rule means
//! forward.
//!
//! Every request is recorded ([`Proxy::seen`]) with the status it got, so tests
//! can say "no DELETE was sent for X" or "the volume went after a 404 for its
//! container".
//!
//! HTTP handling: bollard opens one connection per request (no pooling), but
//! the proxy does not rely on it. Each client connection is a loop of request /
//! response pairs (keep-alive), forwarded over one upstream connection of its
//! own; request bodies are read by `Content-Length` or chunked framing, response
//! bodies are streamed by `Content-Length`, chunked framing or until the
//! engine closes (then the client connection is closed too). A `101 Switching
//! Protocols` answer turns the connection into a plain byte tunnel.
//!
//! The proxy runs on a thread of its own with its own tokio runtime, so it
//! serves while a `#[test]` blocks on a child process, and it stops (dropping
//! every connection and every delayed request) when the `Proxy` is dropped.
//!
//! # A skewed engine clock
//!
//! [`Proxy::shift_clock`] makes the engine behind the proxy look as if its
//! clock were off by a number of seconds: every time the engine reports is
//! moved by that offset on the way back, consistently, so that the clock and
//! the stamps agree as they would on a really skewed host. Moved: `/info`
//! `SystemTime`; `CreatedAt` of volumes (list, inspect, create); `Created` of
//! containers (Unix seconds in `/containers/json`, RFC 3339 in inspect, with
//! `State.StartedAt` and `FinishedAt`), networks (list, inspect) and images
//! (list); `time` and `timeNano` of `/events`; and the `Date` header of every
//! answer. Docker's zero time (`0001-01-01T00:00:00Z`, "never") stays as it
//! is. JSON answers are read whole, rewritten and sent with a
//! `Content-Length`; the event stream is rewritten event by event (one chunk
//! each, as Docker flushes them). Nothing the client sends is changed.
//!
//! Why a proxy and not a real skewed engine: a second dockerd in a time
//! namespace (`unshare --time`) still reads the host's `CLOCK_REALTIME`
//! (time namespaces shift only `CLOCK_MONOTONIC` and `CLOCK_BOOTTIME`), and
//! libfaketime (`LD_PRELOAD`) does not reach Go binaries such as dockerd,
//! which read the clock through the vDSO / raw syscalls, not libc. Changing
//! the host's clock would skew every test running beside.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// The real engine's socket, used when `DOCKER_HOST` is not a `unix://` address.
pub const DEFAULT_UPSTREAM: &str = "/var/run/docker.sock";
/// The longest request or response head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// How long a concurrent actor gets a head start before the client is answered.
const ACTOR_HEAD_START: Duration = Duration::from_millis(50);

/// What to do with a matching request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Forward it to the engine (useful to let the first N matching requests through).
    Forward,
    /// Answer with this status and body `{"message": <message>}`; the engine never sees it.
    Respond { status: u16, message: String },
    /// Close the connection without answering; the engine never sees it.
    Close,
    /// Forward it, wait for the engine's answer, then close the connection
    /// without passing the answer on: the engine did the work, the client cannot know.
    ForwardThenClose,
    /// Wait this long, then forward. If the client gives up (closes) meanwhile,
    /// the request is dropped and never reaches the engine: a hung engine.
    Delay(Duration),
    /// Another actor sends the same request first (on its own connection) and
    /// it completes; then the client's request is forwarded and gets the
    /// engine's real answer (e.g. a genuine 404 for a removal).
    ActorFirst,
    /// As `ActorFirst`, but the other actor's request carries this body in
    /// place of the client's (e.g. the same volume create without its
    /// labels: someone else made a volume of that name first).
    ActorFirstWith { body: String },
    /// Another actor sends the same request on its own connection and is not
    /// waited for; after a short head start the client gets this answer (e.g.
    /// Docker's 409 "removal of container ... is already in progress").
    ActorConcurrently { status: u16, message: String },
    /// The engine is lost from here on: this request and every later one, of
    /// any method and path, is closed without an answer and never reaches the
    /// engine (an event stream already open keeps flowing).
    Cut,
    /// Forward it and pass on the engine's answer: its head, then `after`
    /// bytes of what follows as they came on the wire (chunk framing
    /// included). Then, `stall`: send nothing more and hold the connection
    /// until the client gives up (an engine hung mid-stream); else close it
    /// (a connection lost mid-stream).
    BodyThen { after: usize, stall: bool },
}

/// One request the proxy saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Position in arrival order (0-based, shared with actor requests).
    pub seq: usize,
    pub method: String,
    /// The request target as sent, e.g. `/v1.41/containers/json?all=true`.
    pub target: String,
    /// The target without a version prefix, e.g. `/containers/json?all=true`.
    pub path: String,
    /// What the proxy did: `forward`, `respond`, `close`, ... or `actor` for
    /// the copy another actor sent.
    pub action: String,
    /// The status the sender got; `None` if it got none (closed, dropped, in flight).
    pub status: Option<u16>,
    /// Time since the proxy started, when the request arrived.
    pub at: Duration,
}

impl Seen {
    /// True for a request sandboxctl sent (not an actor's copy).
    pub fn by_client(&self) -> bool {
        self.action != "actor"
    }

    /// `METHOD path -> status`, for messages.
    pub fn line(&self) -> String {
        match self.status {
            Some(s) => format!(
                "#{} {} {} [{}] -> {s}",
                self.seq, self.method, self.path, self.action
            ),
            None => format!(
                "#{} {} {} [{}] -> -",
                self.seq, self.method, self.path, self.action
            ),
        }
    }
}

#[derive(Debug)]
struct Rule {
    method: String,
    path: String,
    action: Action,
    left: usize,
}

#[derive(Debug)]
struct Shared {
    upstream: PathBuf,
    started: Instant,
    rules: Mutex<Vec<Rule>>,
    seen: Mutex<Vec<Seen>>,
    /// Set by [`Action::Cut`]: every request from then on is closed.
    cut: AtomicBool,
    /// Seconds every time the engine reports is moved by (0: none); see
    /// [`Proxy::shift_clock`].
    clock_shift: AtomicI64,
    /// Client connections accepted so far.
    accepted: AtomicUsize,
}

impl Shared {
    fn record(&self, method: &str, target: &str, action: &str) -> usize {
        let mut seen = self.seen.lock().unwrap();
        let seq = seen.len();
        seen.push(Seen {
            seq,
            method: method.to_string(),
            target: target.to_string(),
            path: unversioned(target).to_string(),
            action: action.to_string(),
            status: None,
            at: self.started.elapsed(),
        });
        seq
    }

    fn set_status(&self, seq: usize, status: u16) {
        self.seen.lock().unwrap()[seq].status = Some(status);
    }

    fn set_action(&self, seq: usize, action: &str) {
        self.seen.lock().unwrap()[seq].action = action.to_string();
    }

    /// The action for a request, using up one count of the rule that matched.
    fn pick(&self, method: &str, target: &str) -> Action {
        if self.cut.load(Ordering::SeqCst) {
            return Action::Close;
        }
        let path = unversioned(target);
        let mut rules = self.rules.lock().unwrap();
        match rules
            .iter_mut()
            .find(|r| r.left > 0 && r.method.eq_ignore_ascii_case(method) && path.contains(&r.path))
        {
            Some(rule) => {
                rule.left -= 1;
                rule.action.clone()
            }
            None => Action::Forward,
        }
    }
}

/// The proxy. Stops when dropped.
pub struct Proxy {
    dir: tempfile::TempDir,
    socket: PathBuf,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    /// Starts a proxy to the engine `DOCKER_HOST` names (if `unix://`) or
    /// [`DEFAULT_UPSTREAM`].
    pub fn start() -> Proxy {
        let upstream = std::env::var("DOCKER_HOST")
            .ok()
            .and_then(|h| h.strip_prefix("unix://").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from(DEFAULT_UPSTREAM));
        Proxy::start_to(&upstream)
    }

    /// Starts a proxy to the engine listening on the Unix socket `upstream`.
    pub fn start_to(upstream: &Path) -> Proxy {
        let dir = tempfile::Builder::new()
            .prefix("sbx-proxy")
            .tempdir()
            .expect("create proxy temp dir");
        let socket = dir.path().join("proxy.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket)
            .unwrap_or_else(|e| panic!("bind {}: {e}", socket.display()));
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let shared = Arc::new(Shared {
            upstream: upstream.to_path_buf(),
            started: Instant::now(),
            rules: Mutex::new(Vec::new()),
            seen: Mutex::new(Vec::new()),
            cut: AtomicBool::new(false),
            clock_shift: AtomicI64::new(0),
            accepted: AtomicUsize::new(0),
        });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("fault-proxy".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("proxy runtime");
                rt.block_on(async move {
                    let listener =
                        tokio::net::UnixListener::from_std(listener).expect("register listener");
                    let accept = async {
                        loop {
                            match listener.accept().await {
                                Ok((client, _)) => {
                                    state.accepted.fetch_add(1, Ordering::SeqCst);
                                    tokio::spawn(serve(client, Arc::clone(&state)));
                                }
                                Err(e) => {
                                    eprintln!("fault proxy: accept: {e}");
                                    tokio::time::sleep(Duration::from_millis(10)).await;
                                }
                            }
                        }
                    };
                    tokio::select! {
                        _ = stopped => {}
                        _ = accept => {}
                    }
                });
                // Dropping the runtime drops every connection task, delayed or not.
                rt.shutdown_timeout(Duration::from_secs(1));
            })
            .expect("spawn proxy thread");
        Proxy {
            dir,
            socket,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `unix://<socket>`, the value for `DOCKER_HOST`.
    pub fn docker_host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// The proxy's socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The proxy's temp dir (holds the socket).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Starts a rule for requests with `method` whose unversioned path contains
    /// `path`; it applies once unless [`When::times`] or [`When::always`] says otherwise.
    pub fn on(&self, method: &str, path: &str) -> When<'_> {
        When {
            proxy: self,
            method: method.to_string(),
            path: path.to_string(),
            times: 1,
        }
    }

    /// Adds a rule directly.
    pub fn rule(&self, method: &str, path: &str, action: Action, times: usize) {
        self.shared.rules.lock().unwrap().push(Rule {
            method: method.to_string(),
            path: path.to_string(),
            action,
            left: times,
        });
    }

    /// Makes the engine's clock look `seconds` ahead (negative: behind) from
    /// the next answer on: every time it reports, and the `Date` header, is
    /// moved by that much (see the module's "A skewed engine clock"). 0 turns
    /// it off.
    pub fn shift_clock(&self, seconds: i64) {
        self.shared.clock_shift.store(seconds, Ordering::SeqCst);
    }

    /// The clock shift now in effect (seconds; 0: none).
    pub fn clock_shift(&self) -> i64 {
        self.shared.clock_shift.load(Ordering::SeqCst)
    }

    /// Removes every rule (everything is forwarded from now on).
    pub fn clear_rules(&self) {
        self.shared.rules.lock().unwrap().clear();
    }

    /// Uses left of each rule, in order, as `(method, path, left)`.
    pub fn rules_left(&self) -> Vec<(String, String, usize)> {
        self.shared
            .rules
            .lock()
            .unwrap()
            .iter()
            .map(|r| (r.method.clone(), r.path.clone(), r.left))
            .collect()
    }

    /// Every request seen so far (including actors' copies), in arrival order.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// Requests from the client with `method` whose unversioned path contains `path`.
    pub fn requests(&self, method: &str, path: &str) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| {
                s.by_client() && s.method.eq_ignore_ascii_case(method) && s.path.contains(path)
            })
            .collect()
    }

    /// How many client requests matched `method` and `path`.
    pub fn count(&self, method: &str, path: &str) -> usize {
        self.requests(method, path).len()
    }

    /// How many client connections the proxy accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Every request, one per line, for assertion messages.
    pub fn dump(&self) -> String {
        self.seen()
            .iter()
            .map(Seen::line)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits (blocking) until a client request matching `method` and `path`
    /// has arrived; false after `timeout`.
    pub fn wait_for(&self, method: &str, path: &str, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        loop {
            if self.count(method, path) > 0 {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A rule being put together; the action method adds it.
#[must_use = "a rule is only added by its action method (respond, close, ...)"]
pub struct When<'a> {
    proxy: &'a Proxy,
    method: String,
    path: String,
    times: usize,
}

impl When<'_> {
    /// Applies to the next `n` matching requests.
    pub fn times(mut self, n: usize) -> Self {
        self.times = n;
        self
    }

    /// Applies to every matching request.
    pub fn always(self) -> Self {
        self.times(usize::MAX)
    }

    fn add(self, action: Action) {
        self.proxy
            .rule(&self.method, &self.path, action, self.times);
    }

    /// See [`Action::Forward`].
    pub fn forward(self) {
        self.add(Action::Forward)
    }

    /// See [`Action::Respond`].
    pub fn respond(self, status: u16, message: &str) {
        self.add(Action::Respond {
            status,
            message: message.to_string(),
        })
    }

    /// See [`Action::Close`].
    pub fn close(self) {
        self.add(Action::Close)
    }

    /// See [`Action::ForwardThenClose`].
    pub fn forward_then_close(self) {
        self.add(Action::ForwardThenClose)
    }

    /// See [`Action::Delay`].
    pub fn delay(self, by: Duration) {
        self.add(Action::Delay(by))
    }

    /// See [`Action::ActorFirst`].
    pub fn actor_first(self) {
        self.add(Action::ActorFirst)
    }

    /// See [`Action::Cut`].
    pub fn cut(self) {
        self.add(Action::Cut)
    }

    /// See [`Action::BodyThen`]: `after` bytes of the answer's body, then silence.
    pub fn stall_body_after(self, after: usize) {
        self.add(Action::BodyThen { after, stall: true })
    }

    /// See [`Action::BodyThen`]: `after` bytes of the answer's body, then closed.
    pub fn cut_body_after(self, after: usize) {
        self.add(Action::BodyThen {
            after,
            stall: false,
        })
    }

    /// See [`Action::ActorFirstWith`].
    pub fn actor_first_with(self, body: &str) {
        self.add(Action::ActorFirstWith {
            body: body.to_string(),
        })
    }

    /// See [`Action::ActorConcurrently`].
    pub fn actor_concurrently(self, status: u16, message: &str) {
        self.add(Action::ActorConcurrently {
            status,
            message: message.to_string(),
        })
    }
}

/// The path without a leading `/v<major>.<minor>` API version.
pub fn unversioned(target: &str) -> &str {
    let Some(rest) = target.strip_prefix("/v") else {
        return target;
    };
    let end = rest.find('/').unwrap_or(rest.len());
    let version = &rest[..end];
    let numeric = version.split_once('.').is_some_and(|(a, b)| {
        !a.is_empty()
            && !b.is_empty()
            && a.bytes().all(|c| c.is_ascii_digit())
            && b.bytes().all(|c| c.is_ascii_digit())
    });
    if numeric {
        &rest[end..]
    } else {
        target
    }
}

// ----- HTTP/1.1 framing ------------------------------------------------------

/// A stream with a read buffer: what was read but not yet consumed.
struct Buffered {
    stream: UnixStream,
    buf: Vec<u8>,
}

impl Buffered {
    fn new(stream: UnixStream) -> Buffered {
        Buffered {
            stream,
            buf: Vec::new(),
        }
    }

    /// Reads more into the buffer; 0 at end of stream.
    async fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk).await?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// Takes bytes up to and including `delim`. `None` if the stream ended
    /// before any byte arrived; an error if it ended in the middle.
    async fn take_until(&mut self, delim: &[u8], limit: usize) -> io::Result<Option<Vec<u8>>> {
        let mut searched = 0;
        loop {
            if let Some(pos) = find(&self.buf[searched..], delim) {
                let end = searched + pos + delim.len();
                return Ok(Some(self.buf.drain(..end).collect()));
            }
            searched = self.buf.len().saturating_sub(delim.len() - 1);
            if self.buf.len() > limit {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "HTTP head too long",
                ));
            }
            if self.fill().await? == 0 {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(io::ErrorKind::UnexpectedEof.into())
                };
            }
        }
    }

    async fn take_line(&mut self) -> io::Result<Vec<u8>> {
        self.take_until(b"\r\n", MAX_HEAD)
            .await?
            .ok_or_else(|| io::ErrorKind::UnexpectedEof.into())
    }

    /// Takes exactly `n` bytes.
    async fn take(&mut self, n: usize) -> io::Result<Vec<u8>> {
        while self.buf.len() < n {
            if self.fill().await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        Ok(self.buf.drain(..n).collect())
    }

    /// Copies exactly `n` bytes to `out` as they arrive.
    async fn copy_n(&mut self, mut n: u64, out: &mut UnixStream) -> io::Result<()> {
        while n > 0 {
            if self.buf.is_empty() && self.fill().await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let take = self.buf.len().min(usize::try_from(n).unwrap_or(usize::MAX));
            out.write_all(&self.buf[..take]).await?;
            self.buf.drain(..take);
            n -= take as u64;
        }
        Ok(())
    }

    /// Copies a chunked body (chunks, last chunk, trailers) to `out` chunk by
    /// chunk, so that streams (`/events`) flow.
    async fn copy_chunked(&mut self, out: &mut UnixStream) -> io::Result<()> {
        loop {
            let line = self.take_line().await?;
            out.write_all(&line).await?;
            let size = chunk_size(&line)?;
            if size == 0 {
                loop {
                    let trailer = self.take_line().await?;
                    out.write_all(&trailer).await?;
                    if trailer == b"\r\n" {
                        return Ok(());
                    }
                }
            }
            self.copy_n(size + 2, out).await?;
        }
    }

    /// Reads a chunked body into memory, raw (framing included).
    async fn read_chunked(&mut self) -> io::Result<Vec<u8>> {
        let mut raw = Vec::new();
        loop {
            let line = self.take_line().await?;
            let size = chunk_size(&line)?;
            raw.extend_from_slice(&line);
            if size == 0 {
                loop {
                    let trailer = self.take_line().await?;
                    raw.extend_from_slice(&trailer);
                    if trailer == b"\r\n" {
                        return Ok(raw);
                    }
                }
            }
            let n = usize::try_from(size + 2)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "chunk too large"))?;
            raw.extend_from_slice(&self.take(n).await?);
        }
    }

    /// Reads a chunked body into memory, its payload only (framing and
    /// trailers dropped).
    async fn read_chunked_payload(&mut self) -> io::Result<Vec<u8>> {
        let mut payload = Vec::new();
        loop {
            let line = self.take_line().await?;
            let size = chunk_size(&line)?;
            if size == 0 {
                while self.take_line().await? != b"\r\n" {}
                return Ok(payload);
            }
            let n = usize::try_from(size)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "chunk too large"))?;
            payload.extend_from_slice(&self.take(n).await?);
            self.take(2).await?;
        }
    }

    /// Copies a chunked stream of JSON documents (`/events`) to `out` chunk
    /// by chunk, each chunk's times moved by `shift` seconds (see
    /// [`shift_json`]) and framed again with its new size.
    async fn copy_chunked_shifted(&mut self, out: &mut UnixStream, shift: i64) -> io::Result<()> {
        loop {
            let line = self.take_line().await?;
            let size = chunk_size(&line)?;
            if size == 0 {
                out.write_all(&line).await?;
                loop {
                    let trailer = self.take_line().await?;
                    out.write_all(&trailer).await?;
                    if trailer == b"\r\n" {
                        out.flush().await?;
                        return Ok(());
                    }
                }
            }
            let n = usize::try_from(size)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "chunk too large"))?;
            let data = shift_json(&self.take(n).await?, shift);
            self.take(2).await?;
            out.write_all(format!("{:x}\r\n", data.len()).as_bytes())
                .await?;
            out.write_all(&data).await?;
            out.write_all(b"\r\n").await?;
            out.flush().await?;
        }
    }

    /// Waits until the peer closes (true) or sends something (false, kept in
    /// the buffer).
    async fn closed(&mut self) -> bool {
        loop {
            match self.fill().await {
                Ok(0) | Err(_) => return true,
                Ok(_) => {}
            }
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn chunk_size(line: &[u8]) -> io::Result<u64> {
    let text = std::str::from_utf8(line).unwrap_or("");
    let hex = text
        .trim_end_matches("\r\n")
        .split(';')
        .next()
        .unwrap_or("")
        .trim();
    u64::from_str_radix(hex, 16).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("bad chunk size {text:?}"),
        )
    })
}

/// A parsed request or response head.
#[derive(Debug, Clone)]
struct Head {
    /// The head as received, through the blank line.
    raw: Vec<u8>,
    /// Request: method, target, version. Response: version, status, reason.
    first: [String; 3],
    headers: Vec<(String, String)>,
}

impl Head {
    fn parse(raw: Vec<u8>) -> io::Result<Head> {
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
        let text = String::from_utf8_lossy(&raw).into_owned();
        let mut lines = text.split("\r\n");
        let first_line = lines.next().ok_or_else(|| bad("empty head"))?;
        let mut parts = first_line.splitn(3, ' ');
        let first = [
            parts.next().unwrap_or("").to_string(),
            parts.next().unwrap_or("").to_string(),
            parts.next().unwrap_or("").to_string(),
        ];
        if first[1].is_empty() {
            return Err(bad("malformed first line"));
        }
        let headers = lines
            .filter(|l| !l.is_empty())
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Ok(Head {
            raw,
            first,
            headers,
        })
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(k, _)| k == name)
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    fn chunked(&self) -> bool {
        self.has_token("transfer-encoding", "chunked")
    }

    fn content_length(&self) -> io::Result<Option<u64>> {
        self.header("content-length")
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad content-length"))
            })
            .transpose()
    }

    /// For a request: true if the connection ends after this exchange.
    fn wants_close(&self) -> bool {
        self.has_token("connection", "close") || self.first[2].eq_ignore_ascii_case("HTTP/1.0")
    }
}

/// A request read in full.
#[derive(Debug, Clone)]
struct Request {
    head: Head,
    body: Vec<u8>,
}

impl Request {
    fn method(&self) -> &str {
        &self.head.first[0]
    }

    fn target(&self) -> &str {
        &self.head.first[1]
    }

    /// The same request with `body` in place of its own, framed by a
    /// `Content-Length` that fits it.
    fn with_body(&self, body: &[u8]) -> io::Result<Request> {
        Ok(Request {
            head: Head::parse(shifted_head(&self.head, 0, Some(body.len())))?,
            body: body.to_vec(),
        })
    }

    fn bytes(&self) -> Vec<u8> {
        let mut all = self.head.raw.clone();
        all.extend_from_slice(&self.body);
        all
    }
}

async fn read_request(client: &mut Buffered) -> io::Result<Option<Request>> {
    // Tolerate stray CRLFs between requests (RFC 9112 section 2.2).
    while client.buf.starts_with(b"\r\n") {
        client.buf.drain(..2);
    }
    let Some(raw) = client.take_until(b"\r\n\r\n", MAX_HEAD).await? else {
        return Ok(None);
    };
    let head = Head::parse(raw)?;
    let body = if head.chunked() {
        client.read_chunked().await?
    } else if let Some(n) = head.content_length()? {
        let n = usize::try_from(n)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "body too large"))?;
        client.take(n).await?
    } else {
        Vec::new()
    };
    Ok(Some(Request { head, body }))
}

/// How a response ended, for the connection loop.
enum Sent {
    /// Both connections may carry another exchange.
    KeepAlive,
    /// The body ran until the engine closed, or the engine asked to close.
    Close,
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        304 => "Not Modified",
        400 => "Bad Request",
        404 => "Not Found",
        409 => "Conflict",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Docker's error answer: `{"message": ...}` with the given status.
fn error_response(status: u16, message: &str) -> Vec<u8> {
    let body = format!("{}\n", serde_json::json!({ "message": message }));
    format!(
        "HTTP/1.1 {status} {}\r\nApi-Version: 1.41\r\nContent-Type: application/json\r\nServer: sandboxctl-fault-proxy\r\nContent-Length: {}\r\n\r\n{body}",
        reason(status),
        body.len()
    )
    .into_bytes()
}

/// Opens a connection to the engine.
async fn connect_upstream(shared: &Shared) -> io::Result<Buffered> {
    UnixStream::connect(&shared.upstream)
        .await
        .map(Buffered::new)
}

/// Sends `req` upstream and relays the response to `out` (or reads and
/// discards it when `out` is `None`). Records the status under `seq`.
async fn exchange(
    upstream: &mut Buffered,
    req: &Request,
    mut out: Option<&mut UnixStream>,
    shared: &Shared,
    seq: usize,
) -> io::Result<Sent> {
    upstream.stream.write_all(&req.bytes()).await?;
    loop {
        let raw = upstream
            .take_until(b"\r\n\r\n", MAX_HEAD)
            .await?
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        let head = Head::parse(raw)?;
        let status: u16 = head.first[1].parse().unwrap_or(0);
        // 1xx other than 101 are interim: pass on and read the real answer.
        if (100..200).contains(&status) && status != 101 {
            if let Some(out) = out.as_deref_mut() {
                out.write_all(&head.raw).await?;
            }
            continue;
        }
        shared.set_status(seq, status);
        let Some(out) = out else {
            // Read the body so that the exchange completes, then drop it.
            if head.chunked() {
                upstream.read_chunked().await?;
            } else if let Some(n) = head.content_length()? {
                upstream
                    .take(usize::try_from(n).unwrap_or(usize::MAX))
                    .await?;
            } else if !no_body(req.method(), status) {
                while upstream.fill().await? > 0 {
                    upstream.buf.clear();
                }
            }
            return Ok(Sent::Close);
        };
        let engine_closes = head.has_token("connection", "close");
        let shift = shared.clock_shift.load(Ordering::SeqCst);
        let json = head
            .header("content-type")
            .is_some_and(|t| t.contains("json"));
        if shift != 0 && status != 101 && json && !no_body(req.method(), status) {
            if unversioned(req.target()).starts_with("/events") && head.chunked() {
                // A stream: event by event.
                out.write_all(&shifted_head(&head, shift, None)).await?;
                upstream.copy_chunked_shifted(out, shift).await?;
            } else {
                let (body, until_close) = if head.chunked() {
                    (upstream.read_chunked_payload().await?, false)
                } else if let Some(n) = head.content_length()? {
                    let n = usize::try_from(n).map_err(|_| {
                        io::Error::new(io::ErrorKind::InvalidData, "body too large")
                    })?;
                    (upstream.take(n).await?, false)
                } else {
                    let mut all = std::mem::take(&mut upstream.buf);
                    upstream.stream.read_to_end(&mut all).await?;
                    (all, true)
                };
                let body = shift_json(&body, shift);
                out.write_all(&shifted_head(&head, shift, Some(body.len())))
                    .await?;
                out.write_all(&body).await?;
                if until_close {
                    out.flush().await?;
                    return Ok(Sent::Close);
                }
            }
            out.flush().await?;
            return Ok(if engine_closes {
                Sent::Close
            } else {
                Sent::KeepAlive
            });
        }
        if shift != 0 {
            out.write_all(&shifted_head(&head, shift, None)).await?;
        } else {
            out.write_all(&head.raw).await?;
        }
        if status == 101 {
            // Upgraded (attach/exec hijack): a plain tunnel from here on.
            out.write_all(&std::mem::take(&mut upstream.buf)).await?;
            return Err(io::Error::other(Upgrade));
        }
        if no_body(req.method(), status) {
            // Nothing follows the head.
        } else if head.chunked() {
            upstream.copy_chunked(out).await?;
        } else if let Some(n) = head.content_length()? {
            upstream.copy_n(n, out).await?;
        } else {
            // Delimited by the end of the connection.
            out.write_all(&std::mem::take(&mut upstream.buf)).await?;
            tokio::io::copy(&mut upstream.stream, out).await?;
            return Ok(Sent::Close);
        }
        out.flush().await?;
        return Ok(if engine_closes {
            Sent::Close
        } else {
            Sent::KeepAlive
        });
    }
}

// ----- the clock shift ---------------------------------------------------------

/// The keys whose values are times the engine reports, in any JSON answer.
const TIME_KEYS: [&str; 7] = [
    "SystemTime",
    "CreatedAt",
    "Created",
    "StartedAt",
    "FinishedAt",
    "time",
    "timeNano",
];

/// A response head with its `Date` header moved by `shift` seconds and, when
/// `length` is given, its body framed by that `Content-Length` (any
/// `Transfer-Encoding` and earlier `Content-Length` dropped).
fn shifted_head(head: &Head, shift: i64, length: Option<usize>) -> Vec<u8> {
    let text = String::from_utf8_lossy(&head.raw);
    let mut out = String::with_capacity(text.len() + 32);
    for line in text.split("\r\n").filter(|l| !l.is_empty()) {
        let name = line.split_once(':').map(|(k, _)| k.trim());
        let is = |n: &str| name.is_some_and(|k| k.eq_ignore_ascii_case(n));
        if length.is_some() && (is("content-length") || is("transfer-encoding")) {
            continue;
        }
        if is("date") {
            let value = line.split_once(':').map_or("", |(_, v)| v.trim());
            match shift_http_date(value, shift) {
                Some(moved) => out.push_str(&format!("Date: {moved}")),
                None => out.push_str(line),
            }
        } else {
            out.push_str(line);
        }
        out.push_str("\r\n");
    }
    if let Some(n) = length {
        out.push_str(&format!("Content-Length: {n}\r\n"));
    }
    out.push_str("\r\n");
    out.into_bytes()
}

/// A JSON body (one document, or several separated by newlines as `/events`
/// sends them) with every time under [`TIME_KEYS`] moved by `shift` seconds.
/// A body that is not JSON is returned as it is.
pub fn shift_json(body: &[u8], shift: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len());
    for doc in serde_json::Deserializer::from_slice(body).into_iter::<serde_json::Value>() {
        let Ok(mut doc) = doc else {
            return body.to_vec();
        };
        shift_value(&mut doc, shift);
        serde_json::to_writer(&mut out, &doc).expect("a JSON value serializes");
        out.push(b'\n');
    }
    out
}

fn shift_value(value: &mut serde_json::Value, shift: i64) {
    use serde_json::Value;
    match value {
        Value::Array(items) => items.iter_mut().for_each(|v| shift_value(v, shift)),
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if !TIME_KEYS.contains(&key.as_str()) {
                    shift_value(v, shift);
                    continue;
                }
                match v {
                    Value::String(text) => {
                        if let Some(moved) = shift_rfc3339(text, shift) {
                            *text = moved;
                        }
                    }
                    Value::Number(n) => {
                        let by = if key == "timeNano" {
                            shift.saturating_mul(1_000_000_000)
                        } else {
                            shift
                        };
                        if let Some(i) = n.as_i64() {
                            *v = Value::from(i.saturating_add(by));
                        }
                    }
                    _ => shift_value(v, shift),
                }
            }
        }
        _ => {}
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01: (year, month, day).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Seconds since the epoch of a wall-clock date and time, and back.
fn to_seconds(y: i64, mo: i64, d: i64, h: i64, mi: i64, s: i64) -> i64 {
    days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s
}

fn from_seconds(t: i64) -> (i64, i64, i64, i64, i64, i64) {
    let (y, mo, d) = civil_from_days(t.div_euclid(86_400));
    let rest = t.rem_euclid(86_400);
    (y, mo, d, rest / 3600, rest % 3600 / 60, rest % 60)
}

/// An RFC 3339 time (`2024-05-06T07:08:09.123456789Z`, or with an offset)
/// moved by `shift` seconds, its fraction and offset kept. `None` for text
/// that is not one, and for Docker's zero time (year 1: "never").
pub fn shift_rfc3339(text: &str, shift: i64) -> Option<String> {
    let b = text.as_bytes();
    if b.len() < 20 || !text.is_char_boundary(19) {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = &text[r];
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    if b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if y <= 1 {
        return None;
    }
    let (y, mo, d, h, mi, s) = from_seconds(to_seconds(y, mo, d, h, mi, s) + shift);
    Some(format!(
        "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{}",
        &text[19..]
    ))
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];
const WEEKDAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];

/// Unix seconds of an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub fn http_date_seconds(text: &str) -> Option<i64> {
    let parts: Vec<&str> = text.split_whitespace().collect();
    let [_, d, mon, y, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let mo = i64::try_from(MONTHS.iter().position(|m| m == mon)?).ok()? + 1;
    let mut hms = time.split(':').map(|p| p.parse::<i64>().ok());
    let (h, mi, s) = (hms.next()??, hms.next()??, hms.next()??);
    Some(to_seconds(y.parse().ok()?, mo, d.parse().ok()?, h, mi, s))
}

/// An HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`) moved by `shift` seconds.
pub fn shift_http_date(text: &str, shift: i64) -> Option<String> {
    let t = http_date_seconds(text)? + shift;
    let weekday = WEEKDAYS[usize::try_from((t.div_euclid(86_400) + 4).rem_euclid(7)).ok()?];
    let (y, mo, d, h, mi, s) = from_seconds(t);
    let mon = MONTHS[usize::try_from(mo - 1).ok()?];
    Some(format!(
        "{weekday}, {d:02} {mon} {y:04} {h:02}:{mi:02}:{s:02} GMT"
    ))
}

/// Marker error: the connection was upgraded and must become a tunnel.
#[derive(Debug)]
struct Upgrade;

impl std::fmt::Display for Upgrade {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection upgraded")
    }
}

impl std::error::Error for Upgrade {}

fn no_body(method: &str, status: u16) -> bool {
    method.eq_ignore_ascii_case("HEAD") || status == 204 || status == 304 || status < 200
}

/// Another actor's copy of `req`, on its own connection; its status is recorded.
async fn actor(req: Request, shared: Arc<Shared>) {
    let seq = shared.record(req.method(), req.target(), "actor");
    match connect_upstream(&shared).await {
        Ok(mut upstream) => {
            if let Err(e) = exchange(&mut upstream, &req, None, &shared, seq).await {
                eprintln!("fault proxy: actor {} {}: {e}", req.method(), req.target());
            }
        }
        Err(e) => eprintln!("fault proxy: actor cannot reach the engine: {e}"),
    }
}

/// Serves one client connection: request/response pairs until either side closes.
async fn serve(client: UnixStream, shared: Arc<Shared>) {
    let mut client = Buffered::new(client);
    let mut upstream: Option<Buffered> = None;
    loop {
        let req = match read_request(&mut client).await {
            Ok(Some(req)) => req,
            Ok(None) => return,
            Err(e) => {
                eprintln!("fault proxy: bad request: {e}");
                return;
            }
        };
        let action = shared.pick(req.method(), req.target());
        let name = match &action {
            Action::Forward => "forward",
            Action::Respond { .. } => "respond",
            Action::Close => "close",
            Action::ForwardThenClose => "forward-then-close",
            Action::Delay(_) => "delay",
            Action::ActorFirst => "actor-first",
            Action::ActorFirstWith { .. } => "actor-first-with",
            Action::ActorConcurrently { .. } => "actor-concurrently",
            Action::Cut => "cut",
            Action::BodyThen { stall: true, .. } => "stall-body",
            Action::BodyThen { stall: false, .. } => "cut-body",
        };
        let seq = shared.record(req.method(), req.target(), name);
        match action {
            Action::Respond { status, message } => {
                shared.set_status(seq, status);
                if client
                    .stream
                    .write_all(&error_response(status, &message))
                    .await
                    .is_err()
                {
                    return;
                }
                if req.head.wants_close() {
                    return;
                }
                continue;
            }
            Action::Close => return,
            Action::Cut => {
                shared.cut.store(true, Ordering::SeqCst);
                return;
            }
            Action::ActorConcurrently { status, message } => {
                tokio::spawn(actor(req.clone(), Arc::clone(&shared)));
                tokio::time::sleep(ACTOR_HEAD_START).await;
                shared.set_status(seq, status);
                if client
                    .stream
                    .write_all(&error_response(status, &message))
                    .await
                    .is_err()
                    || req.head.wants_close()
                {
                    return;
                }
                continue;
            }
            Action::ActorFirst => actor(req.clone(), Arc::clone(&shared)).await,
            Action::ActorFirstWith { ref body } => match req.with_body(body.as_bytes()) {
                Ok(other) => actor(other, Arc::clone(&shared)).await,
                Err(e) => eprintln!("fault proxy: actor's request: {e}"),
            },
            Action::Delay(by) => {
                let gave_up = tokio::select! {
                    _ = tokio::time::sleep(by) => false,
                    closed = client.closed() => closed,
                };
                if gave_up {
                    shared.set_action(seq, "delay-abandoned");
                    return;
                }
            }
            Action::BodyThen { after, stall } => {
                body_then(&mut client, &req, &shared, seq, after, stall).await;
                return;
            }
            Action::Forward | Action::ForwardThenClose => {}
        }
        if upstream.is_none() {
            match connect_upstream(&shared).await {
                Ok(u) => upstream = Some(u),
                Err(e) => {
                    eprintln!("fault proxy: cannot reach the engine: {e}");
                    return;
                }
            }
        }
        let up = upstream.as_mut().unwrap();
        if matches!(action, Action::ForwardThenClose) {
            let _ = exchange(up, &req, None, &shared, seq).await;
            return;
        }
        match exchange(up, &req, Some(&mut client.stream), &shared, seq).await {
            Ok(Sent::KeepAlive) if !req.head.wants_close() => {}
            Ok(_) => return,
            Err(e) if e.get_ref().is_some_and(|inner| inner.is::<Upgrade>()) => {
                let mut up = upstream.take().unwrap();
                let pending = std::mem::take(&mut client.buf);
                if up.stream.write_all(&pending).await.is_ok() {
                    let _ = tokio::io::copy_bidirectional(&mut client.stream, &mut up.stream).await;
                }
                return;
            }
            Err(_) => return,
        }
    }
}

/// [`Action::BodyThen`] on a connection of its own to the engine.
async fn body_then(
    client: &mut Buffered,
    req: &Request,
    shared: &Shared,
    seq: usize,
    after: usize,
    stall: bool,
) {
    let Ok(mut up) = connect_upstream(shared).await else {
        return;
    };
    if up.stream.write_all(&req.bytes()).await.is_err() {
        return;
    }
    let Ok(Some(raw)) = up.take_until(b"\r\n\r\n", MAX_HEAD).await else {
        return;
    };
    if let Ok(head) = Head::parse(raw.clone()) {
        shared.set_status(seq, head.first[1].parse().unwrap_or(0));
    }
    if client.stream.write_all(&raw).await.is_err() {
        return;
    }
    let mut left = after;
    while left > 0 {
        if up.buf.is_empty() && !matches!(up.fill().await, Ok(n) if n > 0) {
            break;
        }
        let n = left.min(up.buf.len());
        if client.stream.write_all(&up.buf[..n]).await.is_err() {
            return;
        }
        up.buf.drain(..n);
        left -= n;
    }
    if stall {
        client.closed().await;
    }
}

mod tests {
    use super::{shift_http_date, shift_json, shift_rfc3339, unversioned};

    trial!(clock_shift_moves_times_and_keeps_their_form);
    fn clock_shift_moves_times_and_keeps_their_form() {
        assert_eq!(
            shift_rfc3339("2024-02-29T23:30:00.123456789Z", 3600).as_deref(),
            Some("2024-03-01T00:30:00.123456789Z")
        );
        assert_eq!(
            shift_rfc3339("2025-01-01T00:10:00+02:00", -3600).as_deref(),
            Some("2024-12-31T23:10:00+02:00")
        );
        assert_eq!(shift_rfc3339("0001-01-01T00:00:00Z", 3600), None);
        assert_eq!(shift_rfc3339("garbage", 3600), None);
        assert_eq!(
            shift_http_date("Sun, 06 Nov 1994 08:49:37 GMT", 86_400).as_deref(),
            Some("Mon, 07 Nov 1994 08:49:37 GMT")
        );
        assert_eq!(
            shift_http_date("Thu, 01 Jan 1970 00:30:00 GMT", -3600).as_deref(),
            Some("Wed, 31 Dec 1969 23:30:00 GMT")
        );
        let body = br#"[{"Id":"x","Created":1000,"Labels":{"Created":"1"},"State":{"StartedAt":"2024-01-01T00:00:00Z","FinishedAt":"0001-01-01T00:00:00Z"}}]"#;
        let moved: serde_json::Value = serde_json::from_slice(&shift_json(body, -60)).unwrap();
        assert_eq!(moved[0]["Created"], 940);
        assert_eq!(moved[0]["Labels"]["Created"], "1", "a label is not a time");
        assert_eq!(moved[0]["State"]["StartedAt"], "2023-12-31T23:59:00Z");
        assert_eq!(moved[0]["State"]["FinishedAt"], "0001-01-01T00:00:00Z");
        let events = b"{\"time\":10,\"timeNano\":10000000000}\n{\"time\":11}\n";
        assert_eq!(
            shift_json(events, 5),
            b"{\"time\":15,\"timeNano\":15000000000}\n{\"time\":16}\n".to_vec()
        );
        assert_eq!(shift_json(b"not json", 5), b"not json".to_vec());
    }

    trial!(strips_api_versions_only);
    fn strips_api_versions_only() {
        assert_eq!(unversioned("/v1.41/containers/json"), "/containers/json");
        assert_eq!(unversioned("/containers/json"), "/containers/json");
        assert_eq!(unversioned("/volumes/v1.2"), "/volumes/v1.2");
        assert_eq!(unversioned("/vx.1/a"), "/vx.1/a");
        assert_eq!(unversioned("/v1.41"), "");
    }
}
