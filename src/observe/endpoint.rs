//! The HTTP endpoint behind `watch --metrics ADDR` (`GET /metrics`,
//! `GET /healthz`) and its connection cap.
//!
//! Owns the server's lifetime (bind, serve, graceful stop), its routes and
//! its limits. HTTP is `hyper`'s. Must not count anything or judge health:
//! what it serves is the registry's exposition (`metrics.rs`) and the
//! health rule's answer (`health.rs`); nor decide anything about
//! reconciling, read the engine, or print.
//!
//! # Limits
//! The endpoint must never starve the reaping loop, which opens a connection
//! per engine call and so shares the process's file descriptors with it. It
//! serves at most [`MAX_CONNECTIONS`] (32) connections at once, and never more
//! than an eighth of the soft `RLIMIT_NOFILE` (32 under `ulimit -n 256`).
//!
//! Nor may a flood of idle connections silence it: a health check that
//! finds no answer would call the reaper dead, and an orchestrator would
//! restart it for nothing. So the server accepts at once whatever comes,
//! and then:
//! - a connection past the cap is closed at once (never left waiting in
//!   the kernel's listen backlog, where a probe would queue behind hundreds
//!   of idle connections, each held for its whole deadline);
//! - a connection that has sent nothing yet may take only half of the slots
//!   ([`IDLE_SHARE`]); one past that share is closed at once, so the other
//!   half is always there for clients that send a request, as a health probe
//!   does the moment it connects;
//! - a connection that sends no byte of a request within
//!   [`FIRST_REQUEST_TIMEOUT`] (2 s) of its accept is closed;
//! - once a request has begun, its headers have [`HEADER_READ_TIMEOUT`]
//!   (5 s) to arrive, and so has the next request on a kept-alive
//!   connection: an idle kept-alive connection is closed after 5 s;
//! - a connection lives at most [`CONNECTION_LIFETIME`] (30 s) whatever it
//!   does (a client that stops reading its answers), then is shut down
//!   gracefully and dropped 5 s later.
//!
//! On Linux the listener also sets `TCP_DEFER_ACCEPT` ([`DEFER_ACCEPT`],
//! 1 s): the kernel hands over a connection once its first bytes have come,
//! or after that second, so an idle connection costs this process nothing
//! for its first second and a probe's connection, its request already
//! there, is accepted ahead of them.
//!

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpSocket;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::metrics::Metrics;

/// The content type of `GET /metrics`.
const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// How long a new connection may take to send the first byte of its
/// first request: an idle connection is closed then.
const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a client may take to send a request's headers once it has
/// begun, and to send the next one on a kept-alive connection.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one connection may stay open, whatever it does.
const CONNECTION_LIFETIME: Duration = Duration::from_secs(30);
/// Connections served at once, at most (see [`connection_cap`]).
const MAX_CONNECTIONS: usize = 32;
/// Connections that have sent nothing yet take at most `1 / IDLE_SHARE` of
/// the connection cap (at least one slot).
const IDLE_SHARE: usize = 2;
/// Connections the kernel may hold for us before we accept them (its
/// `somaxconn` may lower it). The accept loop takes them as fast as they
/// come, so this only absorbs bursts.
const LISTEN_BACKLOG: u32 = 1024;
/// `TCP_DEFER_ACCEPT`, in seconds: the kernel hands over a connection when
/// its first bytes arrive, or after this long.
const DEFER_ACCEPT: libc::c_int = 1;
/// The endpoint's connections stay below `1 / NOFILE_SHARE` of the soft
/// descriptor limit: the rest is the reaping loop's.
const NOFILE_SHARE: u64 = 8;
/// How long open connections get to finish once shutdown is asked for, or
/// once their lifetime is over.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause after a failed `accept` (e.g. out of file descriptors) before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// How many connections the endpoint serves at once: [`MAX_CONNECTIONS`],
/// and never more than an eighth of the soft descriptor limit `nofile` (at
/// least 1; `None`: unknown, the limit alone).
fn connection_cap(nofile: Option<u64>) -> usize {
    let share = nofile.map_or(u64::MAX, |n| n / NOFILE_SHARE).max(1);
    usize::try_from(share).map_or(MAX_CONNECTIONS, |s| s.min(MAX_CONNECTIONS))
}

/// The soft `RLIMIT_NOFILE` of this process, if it can be read and is finite.
fn soft_nofile() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given and nothing else.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    (rc == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

/// What the server allows a client; see the module header.
#[derive(Debug, Clone, Copy)]
struct Limits {
    /// Connections served at once; one past them is closed at once (of
    /// those, `idle_share(connections)` may have sent nothing yet).
    connections: usize,
    /// Time to send the first byte of the first request.
    first_request: Duration,
    /// Time to send a request's headers once begun, or the next request.
    header_read: Duration,
    /// Time a connection may stay open.
    lifetime: Duration,
    /// Time a connection gets to finish once shut down.
    drain: Duration,
}

impl Limits {
    /// The limits of this process: the connection cap from its descriptor limit.
    fn for_process() -> Self {
        Limits::with_cap(connection_cap(soft_nofile()))
    }

    /// The default deadlines around a cap of `connections`.
    fn with_cap(connections: usize) -> Self {
        Limits {
            connections,
            first_request: FIRST_REQUEST_TIMEOUT,
            header_read: HEADER_READ_TIMEOUT,
            lifetime: CONNECTION_LIFETIME,
            drain: DRAIN_TIMEOUT,
        }
    }
}

/// How many of `connections` slots connections that have sent nothing yet
/// may take: `1 / IDLE_SHARE` of them, at least one.
fn idle_share(connections: usize) -> usize {
    (connections / IDLE_SHARE).max(1)
}

/// What a connection just accepted has sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    /// Bytes of a request are waiting to be read.
    Request,
    /// Nothing yet.
    Nothing,
    /// The client closed it already, or it failed.
    Closed,
}

/// Looks at what `stream` has sent without reading it or waiting.
fn sent(stream: &tokio::net::TcpStream) -> Sent {
    match peek(stream) {
        Ok(1..) => Sent::Request,
        Ok(0) => Sent::Closed,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Sent::Nothing,
        Err(_) => Sent::Closed,
    }
}

/// Peeks at one byte of `stream` without waiting: `Ok(1)` when one is
/// there, `Ok(0)` at the end of the stream, `WouldBlock` when nothing came.
fn peek(stream: &tokio::net::TcpStream) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    let mut byte = 0u8;
    // SAFETY: recv writes at most one byte, into `byte`, which lives across
    // the call; MSG_PEEK leaves it in the socket, MSG_DONTWAIT never blocks.
    let n = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            std::ptr::from_mut(&mut byte).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Waits until `stream` has bytes to read or has ended. Readiness alone is
/// not proof (it may be reported before anything came): a peek decides,
/// and clears it when nothing is there.
async fn first_bytes(stream: &tokio::net::TcpStream) -> io::Result<()> {
    loop {
        stream.readable().await?;
        match stream.try_io(tokio::io::Interest::READABLE, || peek(stream)) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

/// Asks the kernel to hand over a connection only once its first bytes
/// came, or after [`DEFER_ACCEPT`] seconds (Linux; elsewhere nothing). Best
/// effort: without it the limits still hold, a probe may only have to try
/// again.
fn defer_accept(socket: &TcpSocket) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let secs: libc::c_int = DEFER_ACCEPT;
        // SAFETY: setsockopt reads `size_of::<c_int>()` bytes from `secs`,
        // which lives across the call.
        let _ = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_DEFER_ACCEPT,
                std::ptr::from_ref(&secs).cast(),
                libc::socklen_t::try_from(std::mem::size_of::<libc::c_int>())
                    .expect("an int's size fits socklen_t"),
            )
        };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = socket;
}

/// Serves `GET /metrics` and `GET /healthz` (HEAD too) on `addr` until
/// `shutdown` completes, then stops accepting and gives open connections
/// up to 5 s to finish.
///
/// Returns the bound address (useful with port 0) and the server task,
/// which ends after shutdown. `/healthz` applies [`Metrics::health`] with
/// `resync`: 200 or 503, `text/plain`, one line. Other paths are 404, other
/// methods 405. At most 32 connections at once (fewer under a low
/// descriptor limit; one past them is closed at once), half of them for
/// connections that have sent nothing yet, 2 s to begin the first request,
/// 5 s to send a request's headers or begin the next, 30 s per connection:
/// see the module header.
///
/// Errors: the address cannot be bound (in use, not local, no permission);
/// the message names the address. Errors on single connections or on
/// `accept` (retried after 100 ms) do not stop the server.
pub(crate) async fn serve<F>(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    resync: Duration,
    shutdown: F,
) -> Result<(SocketAddr, JoinHandle<()>), io::Error>
where
    F: Future + Send + 'static,
    F::Output: Send,
{
    serve_with(addr, metrics, resync, Limits::for_process(), shutdown).await
}

/// [`serve`] with the given limits.
async fn serve_with<F>(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    resync: Duration,
    limits: Limits,
    shutdown: F,
) -> Result<(SocketAddr, JoinHandle<()>), io::Error>
where
    F: Future + Send + 'static,
    F::Output: Send,
{
    let bind_error = |e: io::Error| {
        io::Error::new(
            e.kind(),
            format!("cannot serve metrics on {addr}: {e}; pass a free local address to --metrics, e.g. 127.0.0.1:9464"),
        )
    };
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(bind_error)?;
    // As `TcpListener::bind` does, but with a deeper backlog (see
    // LISTEN_BACKLOG) and idle connections kept by the kernel for a second.
    socket.set_reuseaddr(true).map_err(bind_error)?;
    socket.bind(addr).map_err(bind_error)?;
    defer_accept(&socket);
    let listener = socket.listen(LISTEN_BACKLOG).map_err(bind_error)?;
    let bound = listener.local_addr().map_err(bind_error)?;
    let task = tokio::spawn(async move {
        let slots = Arc::new(Semaphore::new(limits.connections));
        let idle_slots = Arc::new(Semaphore::new(idle_share(limits.connections)));
        let stop = CancellationToken::new();
        let connections = TaskTracker::new();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            // Accept whatever comes: a connection left in the backlog would
            // wait behind every idle one ahead of it.
            let stream = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _peer)) => stream,
                    Err(_) => {
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                },
                _ = &mut shutdown => break,
            };
            // Past the cap, closed at once (dropped).
            let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                continue;
            };
            let idle = match sent(&stream) {
                Sent::Request => None,
                // Past the idle share, closed at once: the rest of the
                // slots stay free for clients that send a request.
                Sent::Nothing => match Arc::clone(&idle_slots).try_acquire_owned() {
                    Ok(idle) => Some(idle),
                    Err(_) => continue,
                },
                Sent::Closed => continue,
            };
            let metrics = Arc::clone(&metrics);
            connections.spawn(serve_connection(
                stream,
                metrics,
                resync,
                limits,
                stop.clone(),
                (slot, idle),
            ));
        }
        drop(listener);
        stop.cancel();
        connections.close();
        let _ = tokio::time::timeout(limits.drain, connections.wait()).await;
    });
    Ok((bound, task))
}

/// One connection, holding its slot until it ends, and its idle slot (a
/// connection that had sent nothing when accepted) until its first bytes
/// come: closed when they do not come within the first-request deadline,
/// closed by hyper when the client is idle past the header timeout, shut
/// down gracefully when its lifetime is over or the server stops, and
/// dropped [`DRAIN_TIMEOUT`] later (an answer still being written is then
/// cut).
async fn serve_connection(
    stream: tokio::net::TcpStream,
    metrics: Arc<Metrics>,
    resync: Duration,
    limits: Limits,
    stop: CancellationToken,
    (_slot, idle): (OwnedSemaphorePermit, Option<OwnedSemaphorePermit>),
) {
    if let Some(idle) = idle {
        // Readable: the first bytes came, or the client closed (hyper
        // then ends the connection quietly).
        let began = tokio::select! {
            ready = tokio::time::timeout(limits.first_request, first_bytes(&stream)) => {
                matches!(ready, Ok(Ok(())))
            }
            () = stop.cancelled() => false,
        };
        drop(idle);
        if !began {
            return;
        }
    }
    let service = hyper::service::service_fn(move |req| {
        let metrics = Arc::clone(&metrics);
        async move { Ok::<_, Infallible>(route(&req, &metrics, resync)) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read)
        .serve_connection(TokioIo::new(stream), service);
    let mut conn = std::pin::pin!(conn);
    // A client's broken connection is its own business: errors are dropped.
    tokio::select! {
        _ = conn.as_mut() => return,
        () = tokio::time::sleep(limits.lifetime) => {}
        () = stop.cancelled() => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(limits.drain, conn).await;
}

fn route(req: &Request<Incoming>, metrics: &Metrics, resync: Duration) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    if path != "/metrics" && path != "/healthz" {
        return text(
            StatusCode::NOT_FOUND,
            "not found: try /metrics or /healthz\n".into(),
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut response = text(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{} {path}: only GET and HEAD are allowed\n", req.method()),
        );
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    if path == "/metrics" {
        let mut response = Response::new(Full::new(Bytes::from(metrics.encode())));
        response.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static(OPENMETRICS_CONTENT_TYPE),
        );
        response
    } else {
        let health = metrics.health(resync);
        text(health.status(), format!("{}\n", health.detail))
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Kind, Outcome};
    use crate::observe::metrics::tests::FakeClock;
    use http_body_util::{BodyExt, Empty};
    use std::time::Instant;

    struct Reply {
        status: StatusCode,
        content_type: String,
        allow: Option<String>,
        body: String,
    }

    /// One request over a fresh HTTP/1 connection (hyper's client).
    async fn request(addr: SocketAddr, method: Method, path: &str) -> Reply {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(conn);
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", addr.to_string())
            .body(Empty::<Bytes>::new())
            .unwrap();
        let response = sender.send_request(req).await.unwrap();
        let header = |name| {
            response
                .headers()
                .get(name)
                .map(|v: &HeaderValue| v.to_str().unwrap().to_string())
        };
        let (status, content_type, allow) = (
            response.status(),
            header(CONTENT_TYPE).unwrap_or_default(),
            header(ALLOW),
        );
        let body = response.into_body().collect().await.unwrap().to_bytes();
        Reply {
            status,
            content_type,
            allow,
            body: String::from_utf8(body.to_vec()).unwrap(),
        }
    }

    async fn get(addr: SocketAddr, path: &str) -> Reply {
        request(addr, Method::GET, path).await
    }

    /// Serves `metrics` until the returned sender is dropped or fired.
    async fn start(
        metrics: Arc<Metrics>,
        resync: Duration,
    ) -> (SocketAddr, JoinHandle<()>, tokio::sync::oneshot::Sender<()>) {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let (bound, task) = serve(addr, metrics, resync, stopped).await.unwrap();
        (bound, task, stop)
    }

    /// The exposition with its lines sorted: stable however the library
    /// orders series inside a family.
    fn sorted_lines(text: &str) -> String {
        let mut lines: Vec<_> = text.lines().collect();
        lines.sort_unstable();
        lines.join("\n")
    }

    #[tokio::test]
    async fn a_scrape_over_http_shows_what_was_recorded() {
        let clock = FakeClock::new();
        let metrics = Arc::new(clock.metrics());
        metrics.set_managed("default", Kind::Container, 3);
        metrics.set_managed("default", Kind::Volume, 2);
        metrics.set_managed("podman", Kind::Network, 1);
        metrics.add_removal(Kind::Container, &Outcome::Removed);
        metrics.add_removal(Kind::Container, &Outcome::Removed);
        metrics.add_removal(Kind::Volume, &Outcome::AlreadyGone);
        metrics.add_removal(Kind::Network, &Outcome::Refused("changed".into()));
        metrics.add_removal(Kind::Network, &Outcome::Skipped(1));
        // What was removed and measured counts; another actor's removal, a
        // network and what was removed unmeasured do not add bytes.
        metrics.add_reclaimed(Kind::Container, &Outcome::Removed, Some(5_000_000));
        metrics.add_reclaimed(Kind::Container, &Outcome::Removed, None);
        metrics.add_reclaimed(Kind::Volume, &Outcome::Removed, Some(3_000_000));
        metrics.add_reclaimed(Kind::Volume, &Outcome::AlreadyGone, Some(9));
        metrics.add_reclaimed(Kind::Network, &Outcome::Removed, None);
        metrics.add_failure("podman");
        metrics.add_reconnect("default");
        metrics.add_reconnect("default");
        metrics.record_cycle(Duration::from_millis(300), false, clock.now());
        metrics.record_cycle(Duration::from_millis(1_500), true, clock.now());
        clock.advance(Duration::from_millis(4_250));

        let (addr, task, stop) = start(Arc::clone(&metrics), Duration::from_secs(30)).await;
        let reply = get(addr, "/metrics").await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.content_type, OPENMETRICS_CONTENT_TYPE);
        assert!(reply.body.ends_with("# EOF\n"), "{}", reply.body);
        insta::assert_snapshot!(sorted_lines(&reply.body), @r#"
        # EOF
        # HELP sandboxctl_cycle_duration_seconds Wall time of a reconcile cycle (list, plan, apply, verify).
        # HELP sandboxctl_cycles Finished reconcile cycles, by result.
        # HELP sandboxctl_event_stream_reconnects Times the engine event stream was reconnected, by engine.
        # HELP sandboxctl_failures Failed engine operations (listing, removal, verification), by engine.
        # HELP sandboxctl_last_converged_cycle_age_seconds Time since the last converged reconcile cycle finished (absent before the first).
        # HELP sandboxctl_managed_objects Objects labeled ca.sandbox=1 in scope seen by the last listing, by engine and kind.
        # HELP sandboxctl_reclaimed_bytes Space the removals gave back as measured before each removal (--reclaimed, or a volume's archive), by kind.
        # HELP sandboxctl_reclaimed_unmeasured Removed containers and volumes whose size was not measured, by kind.
        # HELP sandboxctl_removals Removal attempts, by kind and outcome.
        # TYPE sandboxctl_cycle_duration_seconds histogram
        # TYPE sandboxctl_cycles counter
        # TYPE sandboxctl_event_stream_reconnects counter
        # TYPE sandboxctl_failures counter
        # TYPE sandboxctl_last_converged_cycle_age_seconds gauge
        # TYPE sandboxctl_managed_objects gauge
        # TYPE sandboxctl_reclaimed_bytes counter
        # TYPE sandboxctl_reclaimed_unmeasured counter
        # TYPE sandboxctl_removals counter
        # UNIT sandboxctl_cycle_duration_seconds seconds
        # UNIT sandboxctl_last_converged_cycle_age_seconds seconds
        # UNIT sandboxctl_reclaimed_bytes bytes
        sandboxctl_cycle_duration_seconds_bucket{le="+Inf"} 2
        sandboxctl_cycle_duration_seconds_bucket{le="0.1"} 0
        sandboxctl_cycle_duration_seconds_bucket{le="0.25"} 0
        sandboxctl_cycle_duration_seconds_bucket{le="0.5"} 1
        sandboxctl_cycle_duration_seconds_bucket{le="1.0"} 1
        sandboxctl_cycle_duration_seconds_bucket{le="10.0"} 2
        sandboxctl_cycle_duration_seconds_bucket{le="120.0"} 2
        sandboxctl_cycle_duration_seconds_bucket{le="2.5"} 2
        sandboxctl_cycle_duration_seconds_bucket{le="30.0"} 2
        sandboxctl_cycle_duration_seconds_bucket{le="300.0"} 2
        sandboxctl_cycle_duration_seconds_bucket{le="5.0"} 2
        sandboxctl_cycle_duration_seconds_bucket{le="60.0"} 2
        sandboxctl_cycle_duration_seconds_count 2
        sandboxctl_cycle_duration_seconds_sum 1.8
        sandboxctl_cycles_total{result="converged"} 1
        sandboxctl_cycles_total{result="failed"} 1
        sandboxctl_event_stream_reconnects_total{engine="default"} 2
        sandboxctl_failures_total{engine="podman"} 1
        sandboxctl_last_converged_cycle_age_seconds 4.25
        sandboxctl_managed_objects{engine="default",kind="container"} 3
        sandboxctl_managed_objects{engine="default",kind="volume"} 2
        sandboxctl_managed_objects{engine="podman",kind="network"} 1
        sandboxctl_reclaimed_bytes_total{kind="container"} 5000000
        sandboxctl_reclaimed_bytes_total{kind="volume"} 3000000
        sandboxctl_reclaimed_unmeasured_total{kind="container"} 1
        sandboxctl_reclaimed_unmeasured_total{kind="volume"} 0
        sandboxctl_removals_total{kind="config",outcome="alreadyGone"} 0
        sandboxctl_removals_total{kind="config",outcome="archiveFailed"} 0
        sandboxctl_removals_total{kind="config",outcome="failed"} 0
        sandboxctl_removals_total{kind="config",outcome="removed"} 0
        sandboxctl_removals_total{kind="container",outcome="alreadyGone"} 0
        sandboxctl_removals_total{kind="container",outcome="archiveFailed"} 0
        sandboxctl_removals_total{kind="container",outcome="failed"} 0
        sandboxctl_removals_total{kind="container",outcome="removed"} 2
        sandboxctl_removals_total{kind="network",outcome="alreadyGone"} 0
        sandboxctl_removals_total{kind="network",outcome="archiveFailed"} 0
        sandboxctl_removals_total{kind="network",outcome="failed"} 1
        sandboxctl_removals_total{kind="network",outcome="removed"} 0
        sandboxctl_removals_total{kind="secret",outcome="alreadyGone"} 0
        sandboxctl_removals_total{kind="secret",outcome="archiveFailed"} 0
        sandboxctl_removals_total{kind="secret",outcome="failed"} 0
        sandboxctl_removals_total{kind="secret",outcome="removed"} 0
        sandboxctl_removals_total{kind="service",outcome="alreadyGone"} 0
        sandboxctl_removals_total{kind="service",outcome="archiveFailed"} 0
        sandboxctl_removals_total{kind="service",outcome="failed"} 0
        sandboxctl_removals_total{kind="service",outcome="removed"} 0
        sandboxctl_removals_total{kind="volume",outcome="alreadyGone"} 1
        sandboxctl_removals_total{kind="volume",outcome="archiveFailed"} 0
        sandboxctl_removals_total{kind="volume",outcome="failed"} 0
        sandboxctl_removals_total{kind="volume",outcome="removed"} 0
        "#);
        stop.send(()).unwrap();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn healthz_follows_the_cycles_and_the_clock() {
        let resync = Duration::from_secs(60);
        let clock = FakeClock::new();
        let metrics = Arc::new(clock.metrics());
        let (addr, task, stop) = start(Arc::clone(&metrics), resync).await;
        let mut seen = Vec::new();
        let mut probe = async |step: &str| {
            let reply = get(addr, "/healthz").await;
            assert_eq!(reply.content_type, "text/plain; charset=utf-8");
            seen.push(format!(
                "{step}: {} {}",
                reply.status.as_u16(),
                reply.body.trim_end()
            ));
        };

        probe("start").await;
        metrics.record_cycle(Duration::from_secs(2), true, clock.now());
        probe("converged").await;
        clock.advance(Duration::from_secs(500));
        probe("converged, then idle 500s").await;
        metrics.record_cycle(Duration::from_secs(2), false, clock.now());
        probe("failed right after").await;
        clock.advance(Duration::from_secs(60));
        metrics.record_cycle(Duration::from_secs(2), true, clock.now());
        clock.advance(Duration::from_secs(119));
        metrics.record_cycle(Duration::from_secs(2), false, clock.now());
        probe("failed 119s after converging").await;
        clock.advance(Duration::from_secs(1));
        probe("failed 120s after converging").await;
        metrics.record_cycle(Duration::from_secs(2), true, clock.now());
        probe("converged again").await;

        insta::assert_debug_snapshot!(seen, @r#"
        [
            "start: 503 no reconcile cycle has finished yet",
            "converged: 200 last cycle converged 0.0s ago",
            "converged, then idle 500s: 200 last cycle converged 500.0s ago",
            "failed right after: 503 last cycle failed; last converged cycle 500.0s ago, not within 2 × resync = 120.0s",
            "failed 119s after converging: 200 last cycle failed; last converged cycle 119.0s ago, within 2 × resync = 120.0s",
            "failed 120s after converging: 503 last cycle failed; last converged cycle 120.0s ago, not within 2 × resync = 120.0s",
            "converged again: 200 last cycle converged 0.0s ago",
        ]
        "#);
        stop.send(()).unwrap();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn other_paths_and_methods_are_refused() {
        let (addr, task, stop) = start(Arc::new(Metrics::new()), Duration::from_secs(30)).await;
        let missing = get(addr, "/metricsx").await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND);
        let post = request(addr, Method::POST, "/metrics").await;
        assert_eq!(post.status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(post.allow.as_deref(), Some("GET, HEAD"));
        assert_eq!(post.body, "POST /metrics: only GET and HEAD are allowed\n");
        let head = request(addr, Method::HEAD, "/metrics").await;
        assert_eq!(head.status, StatusCode::OK);
        assert_eq!(head.body, "");
        stop.send(()).unwrap();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn an_address_in_use_is_an_error_naming_it() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let err = serve(
            addr,
            Arc::new(Metrics::new()),
            Duration::from_secs(30),
            std::future::pending::<()>(),
        )
        .await
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        let message = err.to_string().replace(&addr.port().to_string(), "PORT");
        insta::assert_snapshot!(message, @"cannot serve metrics on 127.0.0.1:PORT: Address already in use (os error 98); pass a free local address to --metrics, e.g. 127.0.0.1:9464");
    }

    #[test]
    fn the_connection_cap_stays_below_an_eighth_of_the_descriptor_limit() {
        let caps: Vec<(Option<u64>, usize)> = [
            None,
            Some(1 << 20),
            Some(1024),
            Some(256),
            Some(64),
            Some(9),
            Some(0),
        ]
        .into_iter()
        .map(|n| (n, connection_cap(n)))
        .collect();
        assert_eq!(
            caps,
            [
                (None, 32),
                (Some(1 << 20), 32),
                (Some(1024), 32),
                (Some(256), 32),
                (Some(64), 8),
                (Some(9), 1),
                (Some(0), 1)
            ]
        );
        assert!(Limits::for_process().connections <= MAX_CONNECTIONS);
    }

    /// Serves `metrics` with `limits` until the returned sender is fired.
    async fn start_limited(
        limits: Limits,
    ) -> (SocketAddr, JoinHandle<()>, tokio::sync::oneshot::Sender<()>) {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let (bound, task) = serve_with(
            addr,
            Arc::new(Metrics::new()),
            Duration::from_secs(30),
            limits,
            stopped,
        )
        .await
        .unwrap();
        (bound, task, stop)
    }

    /// `GET /healthz` written by hand on a fresh connection: the status line,
    /// once the server answered; empty when it closed without an answer.
    async fn raw_healthz(addr: SocketAddr) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let _ = stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await;
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        String::from_utf8_lossy(&answer)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()
    }

    /// [`raw_healthz`] again every 50 ms until the server answers one, within
    /// `within`: the status line, or `None`.
    async fn healthz_once_served(addr: SocketAddr, within: Duration) -> Option<String> {
        tokio::time::timeout(within, async {
            loop {
                let status = raw_healthz(addr).await;
                if !status.is_empty() {
                    return status;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .ok()
    }

    /// True when the server closes `stream` within `within` (end of stream or
    /// a reset), reading and dropping anything it sends.
    async fn closed_within(stream: &mut tokio::net::TcpStream, within: Duration) -> bool {
        use tokio::io::AsyncReadExt;
        let mut buf = vec![0u8; 64 * 1024];
        tokio::time::timeout(within, async {
            while let Ok(n) = stream.read(&mut buf).await {
                if n == 0 {
                    break;
                }
            }
        })
        .await
        .is_ok()
    }

    /// Limits for the tests: a cap of `connections`, the default idle share,
    /// and deadlines of a minute unless a test shortens one.
    fn test_limits(connections: usize) -> Limits {
        Limits {
            first_request: Duration::from_secs(60),
            header_read: Duration::from_secs(60),
            lifetime: Duration::from_secs(60),
            drain: Duration::from_millis(500),
            ..Limits::with_cap(connections)
        }
    }

    #[test]
    fn idle_connections_take_half_of_the_slots_and_at_least_one() {
        let shares: Vec<(usize, usize)> = [32, 8, 3, 2, 1]
            .into_iter()
            .map(|n| (n, idle_share(n)))
            .collect();
        assert_eq!(shares, [(32, 16), (8, 4), (3, 1), (2, 1), (1, 1)]);
        let limits = Limits::with_cap(32);
        assert_eq!(limits.first_request, Duration::from_secs(2));
        assert_eq!(limits.header_read, Duration::from_secs(5));
    }

    #[tokio::test]
    async fn a_connection_that_sends_nothing_is_closed_at_its_first_request_deadline() {
        let limits = Limits {
            first_request: Duration::from_millis(500),
            ..test_limits(4)
        };
        let (addr, task, stop) = start_limited(limits).await;
        let started = Instant::now();
        let mut idle = Vec::new();
        for _ in 0..2 {
            idle.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
        for stream in &mut idle {
            // The kernel holds it for a second (TCP_DEFER_ACCEPT), then the
            // server gives it half a second.
            assert!(
                closed_within(stream, Duration::from_secs(5)).await,
                "an idle connection stayed open"
            );
        }
        assert!(started.elapsed() >= Duration::from_millis(500));
        stop.send(()).unwrap();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn past_the_cap_and_the_idle_share_connections_are_closed_at_once() {
        use tokio::io::AsyncWriteExt;
        // Two slots, one of them for a connection that has sent nothing.
        let (addr, task, stop) = start_limited(test_limits(2)).await;
        let mut idle = Vec::new();
        for _ in 0..3 {
            idle.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
        // One takes the idle slot; the two past the idle share are closed
        // at once, as soon as the kernel hands them over.
        let mut closed = 0;
        for stream in &mut idle {
            if closed_within(stream, Duration::from_secs(3)).await {
                closed += 1;
            }
        }
        assert_eq!(closed, 2, "connections past the idle share left open");
        // A request still finds the slot the idle ones may not take.
        let started = Instant::now();
        assert_eq!(raw_healthz(addr).await, "HTTP/1.1 503 Service Unavailable");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        // A request begun and never finished holds that slot: past the cap,
        // a request is closed at once, unanswered.
        let mut begun = tokio::net::TcpStream::connect(addr).await.unwrap();
        begun.write_all(b"GET /metrics HTTP/1.1\r\n").await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let started = Instant::now();
        assert_eq!(raw_healthz(addr).await, "", "answered past the cap");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        // Once it goes, a request is served again.
        drop(begun);
        let status = healthz_once_served(addr, Duration::from_secs(5)).await;
        assert_eq!(status.as_deref(), Some("HTTP/1.1 503 Service Unavailable"));
        stop.send(()).unwrap();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn a_client_that_never_reads_loses_its_slot_at_the_end_of_its_lifetime() {
        use tokio::io::AsyncWriteExt;
        let limits = Limits {
            lifetime: Duration::from_secs(1),
            ..test_limits(1)
        };
        let (addr, task, stop) = start_limited(limits).await;
        // Pipelined requests whose answers are never read: the server blocks
        // writing them, with the only slot.
        let stalled = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (_read_half, mut write_half) = stalled.into_split();
        let writer = tokio::spawn(async move {
            let request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(256);
            let until = Instant::now() + Duration::from_secs(10);
            while Instant::now() < until {
                match tokio::time::timeout(
                    Duration::from_millis(200),
                    write_half.write_all(&request),
                )
                .await
                {
                    Ok(Ok(())) | Err(_) => {}
                    Ok(Err(_)) => break,
                }
            }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Past the cap: closed at once, until the stalled one's lifetime ends.
        assert_eq!(raw_healthz(addr).await, "", "answered past the cap");
        let status = healthz_once_served(addr, Duration::from_secs(15))
            .await
            .expect("served once the stalled connection's lifetime ended");
        assert_eq!(status, "HTTP/1.1 503 Service Unavailable");
        writer.abort();
        stop.send(()).unwrap();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn shutdown_stops_the_server() {
        let (addr, task, stop) = start(Arc::new(Metrics::new()), Duration::from_secs(30)).await;
        assert_eq!(
            get(addr, "/healthz").await.status,
            StatusCode::SERVICE_UNAVAILABLE
        );
        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("server task ends after shutdown")
            .unwrap();
        let refused = tokio::net::TcpStream::connect(addr).await.unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
    }
}
