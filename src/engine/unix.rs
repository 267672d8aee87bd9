//! The transport to an engine on a unix socket: a hyper client whose
//! connections to the socket are kept alive and used again, request after
//! request.
//!
//! bollard 0.21's own unix client keeps no connection (`pool_max_idle_per_host
//! (0)`): every request connected, was answered and shut its socket down. A
//! destroy beside 300 running containers asked about 210 questions on 208
//! connections (strace, 2026-12-02), and the daemon set each one up anew.
//! Here at most [`IDLE`] connections wait between requests, each for at most
//! [`IDLE_FOR`]; a connection the engine closed is dropped by hyper, not used.
//!
//! Owns connecting to the socket, and handing bollard a pooled hyper client
//! (`over`, which the ssh transport uses too). Must not decide versions,
//! deadlines or what an answer means (`connect`, `docker`).

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bollard::errors::Error as BollardError;
use bollard::{BollardRequest, ClientVersion, Docker};
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;

/// Connections kept between requests: more than the inspections a run has
/// in flight at once, so a burst of them finds its connections open.
const IDLE: usize = 32;
/// How long a connection waits for its next request before it is closed.
const IDLE_FOR: Duration = Duration::from_secs(30);

/// A bollard client of the engine at the socket `path`, over kept
/// connections; `secs` is its per-request timeout. The socket must exist
/// (checked here, as bollard's own unix client checks it).
pub(crate) fn client(
    path: &str,
    secs: u64,
    version: &ClientVersion,
) -> Result<Docker, BollardError> {
    if !std::path::Path::new(path).exists() {
        return Err(BollardError::SocketNotFoundError(path.to_string()));
    }
    let mut builder = Client::builder(TokioExecutor::new());
    builder
        .pool_max_idle_per_host(IDLE)
        .pool_idle_timeout(IDLE_FOR)
        // Closes idle connections when their time is up, not only when the
        // pool is next asked (a watch may not ask for minutes).
        .pool_timer(TokioTimer::new());
    let client = builder.build(UnixConnector {
        path: Arc::new(PathBuf::from(path)),
    });
    over(Arc::new(client), "unix://docker", secs, version)
}

/// A request's body as bollard sends it.
pub(crate) type Body = http_body_util::Either<
    http_body_util::Full<bytes::Bytes>,
    http_body_util::StreamBody<
        Pin<
            Box<
                dyn futures_util::Stream<Item = Result<hyper::body::Frame<bytes::Bytes>, io::Error>>
                    + Send,
            >,
        >,
    >,
>;

/// A bollard client whose every request goes through `client` (this
/// transport's, or the ssh transport's); `secs` is its per-request timeout.
/// `name` only names the pool in bollard's URLs: where the engine is, is
/// the connector's business.
pub(crate) fn over<C>(
    client: Arc<Client<C, Body>>,
    name: &str,
    secs: u64,
    version: &ClientVersion,
) -> Result<Docker, BollardError>
where
    C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
{
    Docker::connect_with_custom_transport(
        move |req: BollardRequest| {
            let client = client.clone();
            async move {
                client
                    .request(req)
                    .await
                    .map_err(|err| BollardError::HyperLegacyError { err })
            }
        },
        Some(name),
        secs,
        version,
    )
}

/// Opens connections to one socket, whatever the request's address says.
#[derive(Clone)]
struct UnixConnector {
    path: Arc<PathBuf>,
}

impl tower_service::Service<http::Uri> for UnixConnector {
    type Response = TokioIo<Socket>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Uri) -> Self::Future {
        let path = self.path.clone();
        Box::pin(async move { Ok(TokioIo::new(Socket(UnixStream::connect(&*path).await?))) })
    }
}

/// A connected socket, as hyper's client takes a connection.
struct Socket(UnixStream);

impl AsyncRead for Socket {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl Connection for Socket {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}
