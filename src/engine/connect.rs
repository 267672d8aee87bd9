//! Opening a bollard client to a resolved [`Endpoint`]: unix sockets, plain
//! tcp/http, TLS (rustls) and ssh, then API version negotiation.
//!
//! Over a unix socket the negotiation asks `/_ping`, as the docker CLI does:
//! its `Api-Version` header names the version and Podman's adds
//! `Libpod-Api-Version`. `/version` costs the engine far more (dockerd 20.10
//! runs `runc --version` and `docker-init --version` for it: 11 to 33 ms
//! against 0.6 ms for `/_ping`, measured 2026-12-02); it stays the question
//! for the other transports and for an engine whose `/_ping` names no
//! version.
//!
//! Owns the choice of transport for an endpoint and the rule that TLS asked
//! for is TLS or an error, never a plain connection. Owns the fix for bollard
//! 0.21.1 sending unversioned request paths: after negotiation every request
//! is rewritten to carry `/vX.Y` (see [`connect`]). Must not read the
//! environment (that happened in `endpoint::resolve`) nor decide what the
//! caller does with an unreachable engine.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bollard::errors::Error as BollardError;
use bollard::{BollardRequest, ClientVersion, Docker, API_DEFAULT_VERSION};

use crate::engine::endpoint::{Endpoint, Tls};
use crate::engine::ssh::{SshPool, SshTarget};

/// Stands in for "no file" where bollard wants a path: it reads as an empty
/// file, so bollard adds no CA (system roots only) or no client certificate.
const NO_FILE: &str = "/dev/null";

/// Connects to `ep` and negotiates the Engine API version within `timeout`.
///
/// Supported: `unix:///path`; `tcp://` and `http://` plain; TLS for `https://`
/// and for `tcp://` when `ep.tls` is set (rustls, CA from `ca.pem` added to the
/// system roots, client certificate when given); `ssh://[user@]host[:port]`
/// through the `ssh` on `PATH` and `docker system dial-stdio` on the remote
/// (our own transport, `engine::ssh`; the probe's connection is kept for the
/// requests that follow).
///
/// TLS that cannot be done (unverified TLS, a missing or empty `ca.pem`, half
/// a client key pair, TLS over a unix socket or ssh, a server that does not
/// speak TLS or whose certificate the CA did not sign) is an error; nothing
/// falls back to plain HTTP.
///
/// The returned client's per-request timeout is `timeout` rounded up to whole
/// seconds (at least 1), bollard's granularity. Every request it sends carries
/// the negotiated `/vX.Y` path prefix, which bollard 0.21.1 drops on its own.
///
/// The error is a one-line detail for `EngineError::Unreachable`.
pub async fn connect(ep: &Endpoint, timeout: Duration) -> Result<Docker, String> {
    connect_versioned(ep, timeout, timeout)
        .await
        .map(|(docker, _)| docker)
}

/// What an engine said of itself while the API version was negotiated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Server {
    /// Its API version as it wrote it (`1.41`), if it named one.
    pub api_version: Option<String>,
    /// It is Podman: `/_ping` carried `Libpod-Api-Version`, or a component
    /// of `/version` is named Podman.
    pub podman: bool,
}

/// [`connect`], also returning what the engine said of itself. One question
/// serves the negotiation and the caller: `/_ping` over a unix socket, else
/// `/version` (see the module header), asked within `check` (a read's
/// deadline, `--call-timeout`); the client's requests get `timeout`. The
/// API version is the lower of the engine's and bollard's.
pub(crate) async fn connect_versioned(
    ep: &Endpoint,
    timeout: Duration,
    check: Duration,
) -> Result<(Docker, Server), String> {
    let secs = whole_seconds(timeout);
    // One ssh pool for the probe and the client after it: the connection the
    // probe authenticated serves the run.
    let ssh = match ep.host.get(..6) {
        Some(s) if s.eq_ignore_ascii_case("ssh://") && ep.tls.is_none() => {
            Some(SshPool::new(&SshTarget::parse(&ep.host)?, secs))
        }
        _ => None,
    };
    let check_secs = whole_seconds(check);
    // The probe's own request deadline is the check's: bollard's timeout
    // would otherwise outlast it.
    let probe = open(ep, check_secs, API_DEFAULT_VERSION, ssh.as_ref())?;
    let no_answer = || format!("no answer to the API version check within {check_secs}s");
    let pinged = match unix_path(&ep.host) {
        Some(path) => tokio::time::timeout(check, ping(path))
            .await
            .map_err(|_| no_answer())??,
        None => None,
    };
    let server = match pinged {
        Some(server) => server,
        None => match tokio::time::timeout(check, probe.version()).await {
            Err(_) | Ok(Err(BollardError::RequestTimeoutError)) => return Err(no_answer()),
            Ok(Err(e)) => return Err(failure_detail(ep, &e)),
            Ok(Ok(v)) => Server {
                podman: v
                    .components
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.name.to_lowercase().contains("podman")),
                api_version: v.api_version,
            },
        },
    };
    let server_version = server
        .api_version
        .as_deref()
        .and_then(parse_api_version)
        .ok_or_else(|| {
            format!(
                "API version negotiation failed: the engine reported API version {:?}, not MAJOR.MINOR",
                server.api_version.as_deref().unwrap_or("")
            )
        })?;
    let version = if server_version < *API_DEFAULT_VERSION {
        server_version
    } else {
        *API_DEFAULT_VERSION
    };
    let docker = open(ep, secs, &version, ssh.as_ref())?;
    Ok((
        docker.with_request_modifier(move |req| with_version_prefix(req, &version)),
        server,
    ))
}

/// The socket path of a `unix://` address.
pub(crate) fn unix_path(host: &str) -> Option<&str> {
    let scheme = host.get(..7)?;
    scheme
        .eq_ignore_ascii_case("unix://")
        .then(|| &host[7..])
        .filter(|p| !p.is_empty())
}

/// Asks the unix socket at `path` for `GET /_ping` and reads what its
/// headers say. `Ok(None)`: it answered, but named no API version (a proxy,
/// an odd engine): the caller asks `/version` instead.
pub(crate) async fn ping(path: &str) -> Result<Option<Server>, String> {
    let (head, _) = exchange(path, "/_ping", None)
        .await
        .map_err(|failure| match failure {
            Failure::Connect(detail) => detail,
            Failure::Http(detail) => {
                format!("API version negotiation failed: /_ping: {detail}")
            }
        })?;
    let header = |name: &str| {
        head.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let podman = header("Libpod-Api-Version").is_some();
    Ok(match header("Api-Version") {
        Some(api_version) if head.status.is_success() => Some(Server {
            api_version: Some(api_version),
            podman,
        }),
        _ => None,
    })
}

/// `GET target` on a new connection to the unix socket at `path`: the
/// answer's status and its body, at most `limit` bytes (a longer one is an
/// error). For a request whose answer bollard cannot read (`/system/df` of
/// API 1.41, whose shape bollard 0.21's model no longer has). No deadline:
/// the caller's.
pub(crate) async fn get(
    path: &str,
    target: &str,
    limit: usize,
) -> Result<(u16, bytes::Bytes), String> {
    let (head, body) = exchange(path, target, Some(limit))
        .await
        .map_err(|(Failure::Connect(detail) | Failure::Http(detail))| detail)?;
    Ok((head.status.as_u16(), body))
}

/// Why an [`exchange`] failed: the socket did not connect, or the HTTP
/// exchange on it did not complete.
enum Failure {
    Connect(String),
    Http(String),
}

/// `GET target` on a new connection to the unix socket at `path`: the
/// answer's head and, with a `limit`, its body (at most `limit` bytes;
/// without one the body is not read, nor waited for). The connection is
/// driven beside the request and dropped with it, so an exchange cut short
/// by its caller's deadline leaves no task or socket behind (`watch` pings
/// again on every reconnection). A connection that ends first ends the
/// request too: with its answer, or with an error.
async fn exchange(
    path: &str,
    target: &str,
    limit: Option<usize>,
) -> Result<(http::response::Parts, bytes::Bytes), Failure> {
    use http_body_util::{BodyExt, Empty, Limited};
    use hyper_util::rt::TokioIo;
    let http = |e: &(dyn std::error::Error + 'static)| Failure::Http(error_chain(e));
    let stream = tokio::net::UnixStream::connect(path)
        .await
        .map_err(|e| Failure::Connect(format!("cannot connect: {e}")))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| http(&e))?;
    let request = http::Request::get(target)
        .header(http::header::HOST, "docker")
        .body(Empty::<bytes::Bytes>::new())
        .map_err(|e| http(&e))?;
    let drive = async {
        let _ = connection.await;
        std::future::pending::<()>().await
    };
    let read = async {
        let response = sender.send_request(request).await.map_err(|e| http(&e))?;
        let (head, body) = response.into_parts();
        let Some(limit) = limit else {
            return Ok((head, bytes::Bytes::new()));
        };
        let body = Limited::new(body, limit)
            .collect()
            .await
            .map_err(|e| Failure::Http(format!("reading the answer: {e}")))?
            .to_bytes();
        Ok((head, body))
    };
    tokio::select! {
        answer = read => answer,
        () = drive => unreachable!("driving the connection never ends"),
    }
}

/// `1.41` as a client version.
fn parse_api_version(text: &str) -> Option<ClientVersion> {
    let (major, minor) = text.trim().split_once('.')?;
    Some(ClientVersion {
        major_version: major.parse().ok()?,
        minor_version: minor.parse().ok()?,
    })
}

/// `timeout` in whole seconds, rounded up, at least 1 (bollard stores whole
/// seconds and treats 0 as "fail at once").
pub(crate) fn whole_seconds(timeout: Duration) -> u64 {
    let secs = timeout.as_secs() + u64::from(timeout.subsec_nanos() > 0);
    secs.max(1)
}

/// Adds `/v{major}.{minor}` to the request's path unless it already starts
/// with a version (a bollard that fixed upstream issue 736 adds it itself).
fn with_version_prefix(mut req: BollardRequest, version: &ClientVersion) -> BollardRequest {
    let target = req
        .uri()
        .path_and_query()
        .map(|pq| pq.as_str().to_string())
        .unwrap_or_else(|| "/".to_string());
    if has_version_prefix(&target) {
        return req;
    }
    let versioned = format!(
        "/v{}.{}{}",
        version.major_version, version.minor_version, target
    );
    let mut parts = req.uri().clone().into_parts();
    // A path that was a valid URI stays valid with an ASCII prefix; if it somehow
    // is not, the request goes out unchanged rather than not at all.
    if let Ok(pq) = versioned.parse() {
        parts.path_and_query = Some(pq);
        if let Ok(uri) = http::Uri::from_parts(parts) {
            *req.uri_mut() = uri;
        }
    }
    req
}

/// True for `/v1.41/...`, `/v1.41` or `/v1.41?...`.
fn has_version_prefix(target: &str) -> bool {
    let Some(rest) = target.strip_prefix("/v") else {
        return false;
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let Some((major, minor)) = rest[..end].split_once('.') else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(major) && digits(minor)
}

/// The bollard client for `ep`, not yet connected (it connects on its first request).
fn open(
    ep: &Endpoint,
    secs: u64,
    version: &ClientVersion,
    ssh: Option<&SshPool>,
) -> Result<Docker, String> {
    let host = ep.host.as_str();
    let scheme = host
        .split_once("://")
        .map(|(s, _)| s.to_ascii_lowercase())
        .unwrap_or_default();
    let refuse_tls = |what: &str| -> Result<(), String> {
        match ep.tls {
            Some(_) => Err(format!(
                "TLS was asked for ({}) but {what}; unset DOCKER_TLS_VERIFY/DOCKER_TLS or use a tcp:// address",
                ep.chosen_by
            )),
            None => Ok(()),
        }
    };
    let docker = match scheme.as_str() {
        "unix" => {
            refuse_tls("a unix socket cannot carry TLS")?;
            // Kept connections (`engine::unix`), not bollard's one per request.
            crate::engine::unix::client(unix_path(host).unwrap_or(host), secs, version)
        }
        "ssh" => {
            refuse_tls("ssh:// connections are encrypted by ssh, not TLS")?;
            let made;
            let pool = match ssh {
                Some(pool) => pool,
                None => {
                    made = SshPool::new(&SshTarget::parse(host)?, secs);
                    &made
                }
            };
            pool.client(secs, version)
        }
        "http" if ep.tls.is_some() => {
            return Err(format!(
                "TLS was asked for ({}) but the address says plain http://; use tcp:// or https://",
                ep.chosen_by
            ))
        }
        "tcp" | "https" if ep.tls.is_some() || scheme == "https" => {
            let tls = ep.tls.clone().unwrap_or(Tls {
                ca: None,
                cert: None,
                key: None,
                verify: true,
            });
            let files = tls_files(&tls)?;
            Docker::connect_with_ssl(
                host,
                &files.key,
                &files.cert,
                &files.ca,
                secs,
                version,
            )
        }
        "tcp" | "http" => Docker::connect_with_http(host, secs, version),
        _ => {
            return Err(
                "unsupported address scheme (use unix:///path, tcp://host:port, https://host:port or ssh://user@host)"
                    .to_string(),
            )
        }
    };
    docker.map_err(|e| match e {
        BollardError::SocketNotFoundError(path) => format!("socket {path} does not exist"),
        other => format!("cannot set up the client: {}", error_chain(&other)),
    })
}

/// The files handed to bollard's TLS client, checked first so that a problem
/// names the file instead of surfacing as a vague handshake failure.
struct TlsFiles {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

fn tls_files(tls: &Tls) -> Result<TlsFiles, String> {
    if !tls.verify {
        return Err(
            "TLS without certificate verification (DOCKER_TLS without DOCKER_TLS_VERIFY, or a context with SkipTLSVerify) is not supported; give the engine's CA as ca.pem and turn verification on"
                .to_string(),
        );
    }
    let ca = match &tls.ca {
        Some(path) => {
            let text = read_pem(path, "the CA certificate")?;
            if !text.contains("-----BEGIN CERTIFICATE-----") {
                return Err(format!(
                    "{} holds no PEM certificate; it must be the CA that signed the engine's certificate",
                    path.display()
                ));
            }
            path.clone()
        }
        None => PathBuf::from(NO_FILE),
    };
    let (cert, key) = match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => {
            read_pem(cert, "the client certificate")?;
            read_pem(key, "the client key")?;
            (cert.clone(), key.clone())
        }
        (None, None) => (PathBuf::from(NO_FILE), PathBuf::from(NO_FILE)),
        (Some(have), None) | (None, Some(have)) => {
            return Err(format!(
                "{} has no partner: a client certificate needs both cert.pem and key.pem in {}",
                have.display(),
                have.parent().unwrap_or(Path::new(".")).display()
            ))
        }
    };
    Ok(TlsFiles { ca, cert, key })
}

fn read_pem(path: &Path, what: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| {
        format!(
            "cannot read {what} {}: {e}; put it there or point DOCKER_CERT_PATH at the folder holding ca.pem, cert.pem and key.pem",
            path.display()
        )
    })
}

/// A one-line detail for a failed version negotiation, with a hint for TLS.
fn failure_detail(ep: &Endpoint, err: &BollardError) -> String {
    // ssh's own words when ssh is why: its failure says what to do.
    if let Some(failure) = crate::engine::ssh::failure_in(err) {
        return failure.to_string();
    }
    // TLS first: hyper reports a failed client-side handshake as a connect error.
    let text = error_chain(err);
    if ep.tls.is_some() || ep.host.to_ascii_lowercase().starts_with("https://") {
        let lower = text.to_ascii_lowercase();
        if lower.contains("invalidcontenttype") || lower.contains("corrupt message") {
            return format!(
                "TLS handshake failed: the engine does not speak TLS on this port ({text}); use its TLS port or a plain tcp:// address without DOCKER_TLS_VERIFY"
            );
        }
        if lower.contains("certificate") || lower.contains("tls") || lower.contains("alert") {
            return format!(
                "TLS handshake failed: {text}; check that ca.pem signed the engine's certificate, that the certificate names this host, and that cert.pem/key.pem are a client pair the engine trusts"
            );
        }
        // TLS 1.3: the engine checks the client's certificate after the
        // client's side of the handshake is done, and a refusal can reach
        // the client as a connection that closed before any answer.
        if ["not ready", "canceled", "closed", "reset"]
            .iter()
            .any(|w| lower.contains(w))
        {
            return format!(
                "TLS session ended before the engine answered ({text}); the engine may have refused the client certificate: check that cert.pem/key.pem are a client pair the engine trusts and that ca.pem signed the engine's certificate"
            );
        }
    }
    if is_connect_failure(err) {
        return describe(err);
    }
    format!("API version negotiation failed: {text}")
}

/// True when the request never reached the engine: the connection could not be
/// opened (socket missing, connection refused, permission denied on the socket).
pub(crate) fn is_connect_failure(err: &BollardError) -> bool {
    use std::io::ErrorKind;
    let connect_kind = |e: &std::io::Error| {
        matches!(
            e.kind(),
            ErrorKind::ConnectionRefused | ErrorKind::NotFound | ErrorKind::PermissionDenied
        )
    };
    match err {
        BollardError::HyperLegacyError { err } => err.is_connect(),
        BollardError::IOError { err } => connect_kind(err),
        _ => false,
    }
}

/// A bollard error for humans: `cannot connect: <OS error>` when no connection
/// could be opened; else the error and its causes, without bollard's wrapper
/// text for the hyper/IO errors it only passes on.
pub(crate) fn describe(err: &BollardError) -> String {
    if is_connect_failure(err) {
        let mut root: &(dyn std::error::Error + 'static) = err;
        while let Some(source) = root.source() {
            root = source;
        }
        return format!("cannot connect: {root}");
    }
    match err {
        BollardError::HyperLegacyError { err } => error_chain(err),
        BollardError::HyperResponseError { err } => error_chain(err),
        other => error_chain(other),
    }
}

/// The error and all its sources, joined with `: `, skipping repeats.
pub(crate) fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = vec![err.to_string()];
    let mut source = err.source();
    while let Some(e) = source {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = e.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::endpoint::ChosenBy;

    fn v141() -> ClientVersion {
        ClientVersion {
            major_version: 1,
            minor_version: 41,
        }
    }

    fn request(uri: &str) -> BollardRequest {
        http::Request::builder()
            .uri(uri)
            .body(bollard::body_full(Default::default()))
            .unwrap()
    }

    #[test]
    fn version_prefix_is_added_once_and_keeps_the_query() {
        let cases = [
            "unix://2f7661722f72756e2f646f636b65722e736f636b/containers/json?all=true",
            "http://127.0.0.1:2375/volumes/x",
            "https://h:2376/v1.45/containers/json",
            "ssh://me@h/version",
            "http://h/v1.41",
        ];
        let out: Vec<String> = cases
            .iter()
            .map(|uri| with_version_prefix(request(uri), &v141()).uri().to_string())
            .collect();
        assert_eq!(
            out,
            [
                "unix://2f7661722f72756e2f646f636b65722e736f636b/v1.41/containers/json?all=true",
                "http://127.0.0.1:2375/v1.41/volumes/x",
                "https://h:2376/v1.45/containers/json",
                "ssh://me@h/v1.41/version",
                "http://h/v1.41",
            ]
        );
    }

    #[test]
    fn api_versions_parse_as_major_dot_minor_only() {
        assert_eq!(parse_api_version("1.41"), Some(v141()));
        assert_eq!(parse_api_version(" 1.41 "), Some(v141()));
        for bad in ["", "1", "1.", ".41", "1.41.0", "v1.41", "one.two"] {
            assert_eq!(parse_api_version(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn recognises_version_prefixes() {
        for yes in ["/v1.41/x", "/v1.41", "/v1.41?a=b", "/v10.0/"] {
            assert!(has_version_prefix(yes), "{yes}");
        }
        for no in [
            "/volumes/v1.41",
            "/v1/x",
            "/vx.1/",
            "/v.1/",
            "/version",
            "/",
        ] {
            assert!(!has_version_prefix(no), "{no}");
        }
    }

    #[test]
    fn timeout_rounds_up_to_whole_seconds() {
        assert_eq!(whole_seconds(Duration::from_millis(1)), 1);
        assert_eq!(whole_seconds(Duration::ZERO), 1);
        assert_eq!(whole_seconds(Duration::from_millis(2001)), 3);
        assert_eq!(whole_seconds(Duration::from_secs(5)), 5);
    }

    fn endpoint(host: &str, tls: Option<Tls>) -> Endpoint {
        Endpoint {
            host: host.to_string(),
            tls,
            chosen_by: ChosenBy::DockerHostEnv,
        }
    }

    fn tls(dir: &Path, verify: bool) -> Tls {
        Tls {
            ca: Some(dir.join("ca.pem")),
            cert: None,
            key: None,
            verify,
        }
    }

    /// Every way TLS can be asked for and not be possible is an error before
    /// any connection is made.
    #[test]
    fn impossible_tls_is_refused_not_downgraded() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("junk.pem"), "not a certificate").unwrap();
        std::fs::write(dir.path().join("cert.pem"), "x").unwrap();
        let cases = [
            endpoint("tcp://127.0.0.1:1", Some(tls(dir.path(), true))),
            endpoint("tcp://127.0.0.1:1", Some(tls(dir.path(), false))),
            endpoint(
                "tcp://127.0.0.1:1",
                Some(Tls {
                    ca: Some(dir.path().join("junk.pem")),
                    ..tls(dir.path(), true)
                }),
            ),
            endpoint(
                "tcp://127.0.0.1:1",
                Some(Tls {
                    ca: None,
                    cert: Some(dir.path().join("cert.pem")),
                    key: None,
                    verify: true,
                }),
            ),
            endpoint("unix:///var/run/docker.sock", Some(tls(dir.path(), true))),
            endpoint("http://127.0.0.1:1", Some(tls(dir.path(), true))),
            endpoint("ssh://me@h", Some(tls(dir.path(), true))),
            endpoint("ftp://h", None),
        ];
        let text = cases
            .iter()
            .map(|ep| match open(ep, 1, API_DEFAULT_VERSION, None) {
                Ok(_) => format!("{}: connected", ep.host),
                Err(e) => format!("{}: {e}", ep.host),
            })
            .collect::<Vec<_>>()
            .join("\n")
            .replace(&dir.path().display().to_string(), "$DIR");
        insta::with_settings!({snapshot_path => "../../snapshots"}, { insta::assert_snapshot!(text) });
    }

    /// A socket that answers every connection with `answer` (once read up
    /// to the end of the request head), or closes at once when it is empty.
    fn answering(answer: &'static str) -> (tempfile::TempDir, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("engine.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut head = Vec::new();
                let mut buf = [0u8; 512];
                while !head.ends_with(b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                assert!(head.starts_with(b"GET /_ping HTTP/1.1\r\n"));
                let _ = stream.write_all(answer.as_bytes()).await;
            }
        });
        let path = path.display().to_string();
        (dir, path)
    }

    #[tokio::test]
    async fn a_ping_names_the_api_version_and_podman() {
        let docker = "HTTP/1.1 200 OK\r\nApi-Version: 1.41\r\nContent-Length: 2\r\n\r\nOK";
        let podman = "HTTP/1.1 200 OK\r\nApi-Version: 1.41\r\nLibpod-Api-Version: 4.3.1\r\nContent-Length: 2\r\n\r\nOK";
        for (answer, podman) in [(docker, false), (podman, true)] {
            let (_dir, path) = answering(answer);
            assert_eq!(
                ping(&path).await,
                Ok(Some(Server {
                    api_version: Some("1.41".into()),
                    podman
                }))
            );
        }
    }

    #[tokio::test]
    async fn a_ping_without_a_version_asks_version_and_a_closed_one_fails() {
        for answer in [
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK",
            "HTTP/1.1 404 Not Found\r\nApi-Version: 1.41\r\nContent-Length: 0\r\n\r\n",
        ] {
            let (_dir, path) = answering(answer);
            assert_eq!(ping(&path).await, Ok(None), "{answer}");
        }
        let (_dir, path) = answering("");
        let e = ping(&path).await.unwrap_err();
        assert!(
            e.starts_with("API version negotiation failed: /_ping: "),
            "{e}"
        );
        let gone = format!("{path}.gone");
        let e = ping(&gone).await.unwrap_err();
        assert!(e.starts_with("cannot connect: "), "{e}");
    }

    #[test]
    fn only_unix_addresses_are_pinged() {
        assert_eq!(
            unix_path("unix:///run/docker.sock"),
            Some("/run/docker.sock")
        );
        assert_eq!(unix_path("UNIX:///x.sock"), Some("/x.sock"));
        for other in [
            "unix://",
            "tcp://h:2375",
            "ssh://me@h",
            "npipe:////./pipe/x",
            "unix",
        ] {
            assert_eq!(unix_path(other), None, "{other}");
        }
    }
}
