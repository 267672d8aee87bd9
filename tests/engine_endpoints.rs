//! `endpoint::resolve` + `engine::connect::connect` against the real engine:
//! the unix socket, tcp through a loopback forwarder, TLS through a
//! TLS-terminating forwarder with certificates made here, and the failures
//! that must never turn into a plain connection. Also the proof that every
//! request carries the negotiated `/vX.Y` prefix (bollard 0.21.1 drops it).
//!
//! Nothing here creates engine objects: the calls are `/version` and listings
//! filtered on a label no object carries.
//!
//! The tests that reach the real engine start at the gate
//! `engine_version();` (see `support::docker`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bollard::query_parameters::{
    ListContainersOptionsBuilder, ListImagesOptionsBuilder, ListVolumesOptionsBuilder,
};
use bollard::Docker;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use sandboxctl::engine::connect::connect;
use sandboxctl::engine::endpoint::{context_digest, resolve, ChosenBy, EndpointInput};
use tokio::net::{TcpListener, UnixStream};
use tokio_rustls::rustls;

use crate::support::docker::engine_version;
use crate::support::proxy::{unversioned, Proxy, DEFAULT_UPSTREAM};

const TIMEOUT: Duration = Duration::from_secs(5);

/// The real engine's socket path (`DOCKER_HOST` if it is `unix://`).
fn engine_socket() -> PathBuf {
    std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|h| h.strip_prefix("unix://").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_UPSTREAM))
}

/// An input naming `host` through `DOCKER_HOST` and nothing else.
fn docker_host(host: &str) -> EndpointInput {
    EndpointInput {
        docker_host: Some(host.to_string()),
        ..EndpointInput::default()
    }
}

/// A label no object carries: listings through it are empty and harmless.
fn nothing_filter() -> std::collections::HashMap<String, Vec<String>> {
    [(
        "label".to_string(),
        vec!["ca.sandbox.endpoint-test=none".to_string()],
    )]
    .into()
}

/// One call of each kind sandboxctl makes; every one must succeed.
async fn exercise(docker: &Docker) {
    docker.ping().await.expect("ping");
    docker.version().await.expect("version");
    let filters = nothing_filter();
    docker
        .list_containers(Some(
            ListContainersOptionsBuilder::new()
                .all(true)
                .filters(&filters)
                .build(),
        ))
        .await
        .expect("list containers");
    docker
        .list_volumes(Some(
            ListVolumesOptionsBuilder::new().filters(&filters).build(),
        ))
        .await
        .expect("list volumes");
    let images: std::collections::HashMap<String, Vec<String>> = [(
        "reference".to_string(),
        vec!["ca-sbx-endpoint-none:*".to_string()],
    )]
    .into();
    docker
        .list_images(Some(
            ListImagesOptionsBuilder::new().filters(&images).build(),
        ))
        .await
        .expect("list images");
}

/// The API version the engine should be spoken to in: its own, capped at bollard's.
async fn expected_version() -> String {
    let docker = Docker::connect_with_unix(
        &format!("unix://{}", engine_socket().display()),
        5,
        bollard::API_DEFAULT_VERSION,
    )
    .unwrap();
    let server = docker.version().await.unwrap().api_version.unwrap();
    let (a, b) = server.split_once('.').unwrap();
    let server = (a.parse::<usize>().unwrap(), b.parse::<usize>().unwrap());
    let default = bollard::API_DEFAULT_VERSION;
    let (major, minor) = server.min((default.major_version, default.minor_version));
    format!("{major}.{minor}")
}

fn version_of(docker: &Docker) -> String {
    let v = docker.client_version();
    format!("{}.{}", v.major_version, v.minor_version)
}

/// Asserts the proxy saw `first` unversioned first (negotiation: `/_ping`
/// over a unix socket, `/version` over the other transports) and every later
/// request with `/v{version}/`.
fn assert_all_versioned(proxy: &Proxy, version: &str, first: &str) {
    let seen = proxy.seen();
    assert!(seen.len() >= 6, "too few requests:\n{}", proxy.dump());
    assert_eq!(
        seen[0].target,
        first,
        "negotiation first:\n{}",
        proxy.dump()
    );
    let prefix = format!("/v{version}/");
    let unversioned: Vec<String> = seen[1..]
        .iter()
        .filter(|s| !s.target.starts_with(&prefix))
        .map(|s| format!("{} {}", s.method, s.target))
        .collect();
    assert!(
        unversioned.is_empty(),
        "requests without {prefix}: {unversioned:#?}\nall:\n{}",
        proxy.dump()
    );
}

trial!(unix_socket_resolves_connects_and_negotiates);
async fn unix_socket_resolves_connects_and_negotiates() {
    engine_version();
    let host = format!("unix://{}", engine_socket().display());
    let ep = resolve(&docker_host(&host)).unwrap();
    assert_eq!(ep.to_string(), format!("{host} (from DOCKER_HOST)"));
    let docker = connect(&ep, TIMEOUT).await.unwrap();
    assert_eq!(version_of(&docker), expected_version().await);
    exercise(&docker).await;

    let missing = resolve(&docker_host("unix:///nonexistent/sbx-endpoint.sock")).unwrap();
    let err = connect(&missing, TIMEOUT).await.unwrap_err();
    assert_eq!(err, "socket /nonexistent/sbx-endpoint.sock does not exist");
}

/// The fix for bollard 0.21.1: without it requests go out as `/containers/json`
/// and the engine answers in its newest API; with it every request after
/// negotiation carries the negotiated version.
trial!(every_request_carries_the_negotiated_version);
async fn every_request_carries_the_negotiated_version() {
    engine_version();
    let version = expected_version().await;

    // Baseline: plain bollard. If this starts failing, bollard fixed upstream
    // issue 736 and the request modifier in connect.rs may go.
    let proxy = Proxy::start_to(&engine_socket());
    let plain = Docker::connect_with_unix(&proxy.docker_host(), 5, bollard::API_DEFAULT_VERSION)
        .unwrap()
        .negotiate_version()
        .await
        .unwrap();
    assert_eq!(version_of(&plain), version);
    exercise(&plain).await;
    assert!(
        proxy
            .seen()
            .iter()
            .all(|s| unversioned(&s.target) == s.target),
        "bollard now sends versioned paths itself:\n{}",
        proxy.dump()
    );

    let proxy = Proxy::start_to(&engine_socket());
    let ep = resolve(&docker_host(&proxy.docker_host())).unwrap();
    let docker = connect(&ep, TIMEOUT).await.unwrap();
    assert_eq!(version_of(&docker), version);
    exercise(&docker).await;
    // Clones share the prefix (the engine clones its client per call).
    docker.clone().ping().await.unwrap();
    assert_all_versioned(&proxy, &version, "/_ping");
    assert_eq!(proxy.count("GET", "/containers/json"), 1);
}

/// Over a unix socket the client keeps its connections (`engine::unix`):
/// requests one after the other share one, requests at once take one each
/// and leave them open for the next; bollard's own unix client connected
/// once per request.
trial!(a_unix_engine_keeps_its_connections);
async fn a_unix_engine_keeps_its_connections() {
    engine_version();
    let proxy = Proxy::start_to(&engine_socket());
    let ep = resolve(&docker_host(&proxy.docker_host())).unwrap();
    let docker = connect(&ep, TIMEOUT).await.unwrap();
    let negotiated = proxy.connections();
    assert_eq!(
        negotiated,
        1,
        "the /_ping of the negotiation: {}",
        proxy.dump()
    );
    for _ in 0..10 {
        docker.ping().await.unwrap();
    }
    assert_eq!(
        proxy.connections(),
        negotiated + 1,
        "10 requests one after the other on one connection: {}",
        proxy.dump()
    );
    let at_once = futures_util::future::join_all((0..8).map(|_| docker.ping())).await;
    assert!(at_once.iter().all(Result::is_ok));
    let after_burst = proxy.connections();
    assert!(after_burst <= negotiated + 8, "{after_burst} connections");
    let again = futures_util::future::join_all((0..8).map(|_| docker.ping())).await;
    assert!(again.iter().all(Result::is_ok));
    assert_eq!(
        proxy.connections(),
        after_burst,
        "a second burst finds its connections open: {}",
        proxy.dump()
    );
}

/// A loopback TCP listener that forwards each connection to a unix socket,
/// optionally terminating TLS first. Counts connections, plain-HTTP ones and
/// TLS failures.
struct Forwarder {
    port: u16,
    connections: Arc<AtomicUsize>,
    /// Connections whose first byte was not a TLS handshake record (0x16): plain HTTP.
    plain: Arc<AtomicUsize>,
    tls_failures: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Forwarder {
    async fn start(upstream: &Path, tls: Option<Arc<rustls::ServerConfig>>) -> Forwarder {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let plain = Arc::new(AtomicUsize::new(0));
        let tls_failures = Arc::new(AtomicUsize::new(0));
        let upstream = upstream.to_path_buf();
        let (count, failures) = (Arc::clone(&connections), Arc::clone(&tls_failures));
        let plain_count = Arc::clone(&plain);
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    continue;
                };
                count.fetch_add(1, Ordering::SeqCst);
                let upstream = upstream.clone();
                let tls = tls.clone();
                let failures = Arc::clone(&failures);
                let plain_count = Arc::clone(&plain_count);
                tokio::spawn(async move {
                    let mut first = [0u8; 1];
                    if matches!(client.peek(&mut first).await, Ok(1) if first[0] != 0x16) {
                        plain_count.fetch_add(1, Ordering::SeqCst);
                    }
                    let Ok(mut engine) = UnixStream::connect(&upstream).await else {
                        return;
                    };
                    match tls {
                        None => {
                            let _ = tokio::io::copy_bidirectional(&mut client, &mut engine).await;
                        }
                        Some(config) => {
                            let acceptor = tokio_rustls::TlsAcceptor::from(config);
                            match acceptor.accept(client).await {
                                Ok(mut secure) => {
                                    let _ = tokio::io::copy_bidirectional(&mut secure, &mut engine)
                                        .await;
                                }
                                Err(_) => {
                                    failures.fetch_add(1, Ordering::SeqCst);
                                }
                            }
                        }
                    }
                });
            }
        });
        Forwarder {
            port,
            connections,
            plain,
            tls_failures,
            task,
        }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    fn plain(&self) -> usize {
        self.plain.load(Ordering::SeqCst)
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

trial!(tcp_and_http_through_a_loopback_forwarder);
async fn tcp_and_http_through_a_loopback_forwarder() {
    engine_version();
    let fwd = Forwarder::start(&engine_socket(), None).await;
    for scheme in ["tcp", "http"] {
        let ep = resolve(&docker_host(&format!("{scheme}://127.0.0.1:{}", fwd.port))).unwrap();
        assert!(ep.tls.is_none());
        let docker = connect(&ep, TIMEOUT).await.unwrap();
        assert_eq!(version_of(&docker), expected_version().await);
        exercise(&docker).await;
    }
    assert!(fwd.connections() >= 12, "{} connections", fwd.connections());
    assert_eq!(fwd.plain(), fwd.connections());
}

/// Certificates made for one test: a CA, a server certificate for 127.0.0.1
/// and localhost, and a client pair, written as the docker CLI expects them
/// (`ca.pem`, `cert.pem`, `key.pem`) in `dir`.
struct Certs {
    dir: tempfile::TempDir,
    server: Arc<rustls::ServerConfig>,
}

impl Certs {
    fn new() -> Certs {
        let ca = Self::ca("sbx endpoint test CA");
        let server_key = KeyPair::generate().unwrap();
        let mut server_params =
            CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
        server_params
            .extended_key_usages
            .push(ExtendedKeyUsagePurpose::ServerAuth);
        let server_cert = server_params.signed_by(&server_key, &ca).unwrap();
        let client_key = KeyPair::generate().unwrap();
        let mut client_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        client_params
            .distinguished_name
            .push(DnType::CommonName, "sbx endpoint client");
        client_params
            .extended_key_usages
            .push(ExtendedKeyUsagePurpose::ClientAuth);
        let client_cert = client_params.signed_by(&client_key, &ca).unwrap();

        let dir = tempfile::Builder::new()
            .prefix("sbx-endpoint-certs")
            .tempdir()
            .unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        std::fs::write(dir.path().join("cert.pem"), client_cert.pem()).unwrap();
        std::fs::write(dir.path().join("key.pem"), client_key.serialize_pem()).unwrap();

        // The server trusts client certificates from the CA only, and requires one.
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.der().clone()).unwrap();
        let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
            .build()
            .unwrap();
        let server = rustls::ServerConfig::builder()
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                vec![server_cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::try_from(server_key.serialize_der()).unwrap(),
            )
            .unwrap();
        Certs {
            dir,
            server: Arc::new(server),
        }
    }

    fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A folder with only some of the files, or a foreign CA.
    fn variant(&self, files: &[&str], foreign_ca: bool) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for file in files {
            std::fs::copy(self.path().join(file), dir.path().join(file)).unwrap();
        }
        if foreign_ca {
            std::fs::write(dir.path().join("ca.pem"), Self::ca("some other CA").pem()).unwrap();
        }
        dir
    }
}

/// `DOCKER_TLS_VERIFY` with TLS input taken as the docker CLI would.
fn tls_verify(host: &str, cert_path: &Path) -> EndpointInput {
    EndpointInput {
        docker_host: Some(host.to_string()),
        docker_tls_verify: Some("1".to_string()),
        docker_cert_path: Some(cert_path.to_path_buf()),
        ..EndpointInput::default()
    }
}

trial!(tls_with_certificates_reaches_the_engine_with_the_version_prefix);
async fn tls_with_certificates_reaches_the_engine_with_the_version_prefix() {
    engine_version();
    let certs = Certs::new();
    let proxy = Proxy::start_to(&engine_socket());
    let fwd = Forwarder::start(proxy.socket(), Some(Arc::clone(&certs.server))).await;
    let version = expected_version().await;

    let ep = resolve(&tls_verify(
        &format!("tcp://127.0.0.1:{}", fwd.port),
        certs.path(),
    ))
    .unwrap();
    assert_eq!(
        ep.to_string(),
        format!("tcp://127.0.0.1:{} (TLS) (from DOCKER_HOST)", fwd.port)
    );
    let docker = connect(&ep, TIMEOUT).await.unwrap();
    assert_eq!(version_of(&docker), version);
    exercise(&docker).await;
    assert_all_versioned(&proxy, &version, "/version");
    assert_eq!(fwd.tls_failures.load(Ordering::SeqCst), 0);
    assert_eq!(fwd.plain(), 0);

    // The same engine through a context holding the TLS material, by name.
    let config = tempfile::tempdir().unwrap();
    let digest = context_digest("sbx-tls");
    let meta = config.path().join("contexts/meta").join(&digest);
    let tls = config
        .path()
        .join("contexts/tls")
        .join(&digest)
        .join("docker");
    std::fs::create_dir_all(&meta).unwrap();
    std::fs::create_dir_all(&tls).unwrap();
    std::fs::write(
        meta.join("meta.json"),
        format!(
            r#"{{"Name":"sbx-tls","Metadata":{{}},"Endpoints":{{"docker":{{"Host":"tcp://localhost:{}","SkipTLSVerify":false}}}}}}"#,
            fwd.port
        ),
    )
    .unwrap();
    for file in ["ca.pem", "cert.pem", "key.pem"] {
        std::fs::copy(certs.path().join(file), tls.join(file)).unwrap();
    }
    let ep = resolve(&EndpointInput {
        context_flag: Some("sbx-tls".to_string()),
        docker_config: Some(config.path().to_path_buf()),
        ..EndpointInput::default()
    })
    .unwrap();
    assert_eq!(ep.chosen_by, ChosenBy::ContextFlag("sbx-tls".to_string()));
    let docker = connect(&ep, TIMEOUT).await.unwrap();
    exercise(&docker).await;
}

/// TLS asked for and impossible: each is an error with a clear cause, and
/// none of them ever gets an answer over plain HTTP.
trial!(impossible_tls_fails_clearly_and_never_goes_plain);
async fn impossible_tls_fails_clearly_and_never_goes_plain() {
    engine_version();
    let certs = Certs::new();
    let plain = Forwarder::start(&engine_socket(), None).await;
    let secure = Forwarder::start(&engine_socket(), Some(Arc::clone(&certs.server))).await;
    let empty = tempfile::tempdir().unwrap();
    let ca_only = certs.variant(&["ca.pem"], false);
    let foreign = certs.variant(&["cert.pem", "key.pem"], true);

    let cases: Vec<(&str, EndpointInput)> = vec![
        (
            "DOCKER_TLS_VERIFY, no certificates",
            tls_verify(&format!("tcp://127.0.0.1:{}", plain.port), empty.path()),
        ),
        (
            "DOCKER_TLS_VERIFY, plain server",
            tls_verify(&format!("tcp://127.0.0.1:{}", plain.port), certs.path()),
        ),
        (
            "https://, plain server",
            EndpointInput {
                docker_cert_path: Some(empty.path().to_path_buf()),
                ..docker_host(&format!("https://127.0.0.1:{}", plain.port))
            },
        ),
        (
            "DOCKER_TLS_VERIFY, foreign CA",
            tls_verify(&format!("tcp://127.0.0.1:{}", secure.port), foreign.path()),
        ),
        (
            "DOCKER_TLS_VERIFY, no client certificate",
            tls_verify(&format!("tcp://127.0.0.1:{}", secure.port), ca_only.path()),
        ),
        (
            "DOCKER_TLS only (unverified)",
            EndpointInput {
                docker_tls: Some("1".to_string()),
                docker_cert_path: Some(certs.path().to_path_buf()),
                ..docker_host(&format!("tcp://127.0.0.1:{}", secure.port))
            },
        ),
    ];
    let mut lines = Vec::new();
    for (name, input) in cases {
        let ep = resolve(&input).unwrap();
        assert!(ep.tls.is_some(), "{name}: {ep}");
        let outcome = match connect(&ep, TIMEOUT).await {
            Ok(_) => "CONNECTED".to_string(),
            Err(e) => e,
        };
        lines.push(format!("{name}: {outcome}"));
    }
    // Not one connection to either listener began in plain HTTP.
    assert_eq!(plain.plain() + secure.plain(), 0);
    assert!(plain.connections() >= 2 && secure.connections() >= 2);
    let text = lines
        .join("\n")
        .replace(&plain.port.to_string(), "$PLAIN")
        .replace(&secure.port.to_string(), "$TLS")
        .replace(&empty.path().display().to_string(), "$EMPTY");
    insta::with_settings!({snapshot_path => "../snapshots"}, { insta::assert_snapshot!(text) });
}
