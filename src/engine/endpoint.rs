//! Which Docker engine to talk to, chosen exactly as the docker CLI chooses it.
//!
//! Owns the precedence of `--context`, `--host`, `DOCKER_HOST`, `DOCKER_CONTEXT`,
//! `currentContext` in `config.json` and the default socket; reading Docker
//! contexts (`contexts/meta/<sha256>/meta.json` and their TLS material); and the
//! TLS settings taken from the environment (`DOCKER_TLS_VERIFY`, `DOCKER_TLS`,
//! `DOCKER_CERT_PATH`). Every resolution refuses an `ssh://` address whose
//! user or host begins with `-` or holds a control character, plainly or
//! percent-encoded (`model::ssh_target_problem`), naming what chose it.
//!
//! It never opens a connection (that is `engine::connect`) and never reads the
//! process environment except in [`EndpointInput::from_process`]: everything
//! else takes an [`EndpointInput`], so resolution is a function of its input and
//! of the files in the Docker config folder it names.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};

/// The engine used when nothing else names one (the docker CLI's `default` context).
pub const DEFAULT_HOST: &str = "unix:///var/run/docker.sock";

/// The name of the context that stands for `DOCKER_HOST` or the default socket.
const DEFAULT_CONTEXT: &str = "default";

/// Everything [`resolve`] reads: the two flags and the environment values,
/// captured once. Empty strings count as unset, as in the docker CLI.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointInput {
    /// `--context NAME`.
    pub context_flag: Option<String>,
    /// `--host URL` / `-H URL`.
    pub host_flag: Option<String>,
    /// `DOCKER_HOST`.
    pub docker_host: Option<String>,
    /// `DOCKER_CONTEXT`.
    pub docker_context: Option<String>,
    /// `DOCKER_CONFIG`: the Docker config folder (else `$HOME/.docker`).
    pub docker_config: Option<PathBuf>,
    /// `DOCKER_TLS_VERIFY`: TLS with verification when non-empty (even `0`).
    pub docker_tls_verify: Option<String>,
    /// `DOCKER_TLS`: TLS without verification when non-empty.
    pub docker_tls: Option<String>,
    /// `DOCKER_CERT_PATH`: where `ca.pem`, `cert.pem`, `key.pem` are (else the config folder).
    pub docker_cert_path: Option<PathBuf>,
    /// `HOME`.
    pub home: Option<PathBuf>,
}

impl EndpointInput {
    /// The flags as given plus the process environment, read once.
    pub(crate) fn from_process(context_flag: Option<String>, host_flag: Option<String>) -> Self {
        let var = |name: &str| std::env::var(name).ok();
        let path = |name: &str| std::env::var_os(name).map(PathBuf::from);
        EndpointInput {
            context_flag,
            host_flag,
            docker_host: var("DOCKER_HOST"),
            docker_context: var("DOCKER_CONTEXT"),
            docker_config: path("DOCKER_CONFIG"),
            docker_tls_verify: var("DOCKER_TLS_VERIFY"),
            docker_tls: var("DOCKER_TLS"),
            docker_cert_path: path("DOCKER_CERT_PATH"),
            home: path("HOME"),
        }
    }

    /// The Docker config folder: `DOCKER_CONFIG`, else `$HOME/.docker`; `None`
    /// when neither is set.
    fn config_dir(&self) -> Option<PathBuf> {
        nonempty_path(&self.docker_config)
            .map(Path::to_path_buf)
            .or_else(|| nonempty_path(&self.home).map(|h| h.join(".docker")))
    }
}

/// A resolved engine address, not yet connected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `unix:///path`, `tcp://host:port`, `http://…`, `https://…` or `ssh://[user@]host[:port]`.
    pub(crate) host: String,
    /// TLS settings; `None` means plain (or ssh/unix, which need none).
    pub tls: Option<Tls>,
    /// What chose this engine, for messages.
    pub chosen_by: ChosenBy,
}

/// TLS settings for a `tcp://` or `https://` engine. A path is `Some` when the
/// file is to be used: a `Some` path that turns out missing is an error when
/// connecting, never a reason to connect without it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tls {
    /// CA certificates to trust (besides the system's); `None`: the system's only.
    pub(crate) ca: Option<PathBuf>,
    /// Client certificate.
    pub(crate) cert: Option<PathBuf>,
    /// Client private key.
    pub(crate) key: Option<PathBuf>,
    /// Verify the server's certificate (false for `DOCKER_TLS` without
    /// `DOCKER_TLS_VERIFY`, or a context with `SkipTLSVerify`).
    pub(crate) verify: bool,
}

/// What chose the engine, in the docker CLI's order of precedence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChosenBy {
    /// `--context NAME`.
    ContextFlag(String),
    /// `--host URL`.
    HostFlag,
    /// `DOCKER_HOST`.
    DockerHostEnv,
    /// `DOCKER_CONTEXT=NAME`.
    DockerContextEnv(String),
    /// `currentContext` in `config.json` (the context's name).
    ConfigFile(String),
    /// Nothing named an engine: the default socket.
    Default,
    /// An `[[engine]]` entry of the state file (the engine's name).
    StateFile(String),
}

impl fmt::Display for ChosenBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChosenBy::ContextFlag(name) => write!(f, "context {} from --context", quoted(name)),
            ChosenBy::HostFlag => f.write_str("from --host"),
            ChosenBy::DockerHostEnv => f.write_str("from DOCKER_HOST"),
            ChosenBy::DockerContextEnv(name) => {
                write!(f, "context {} from DOCKER_CONTEXT", quoted(name))
            }
            ChosenBy::ConfigFile(name) => {
                write!(f, "context {} from config.json", quoted(name))
            }
            ChosenBy::Default => f.write_str("default socket"),
            ChosenBy::StateFile(name) => write!(f, "engine {} in the state file", quoted(name)),
        }
    }
}

impl fmt::Display for Endpoint {
    /// `unix:///var/run/docker.sock (default socket)`,
    /// `tcp://h:2376 (TLS) (context "colima" from DOCKER_CONTEXT)`. Control
    /// characters in the host or a name are shown escaped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", printable(&self.host))?;
        match &self.tls {
            Some(tls) if tls.verify => f.write_str(" (TLS)")?,
            Some(_) => f.write_str(" (TLS, unverified)")?,
            None => {}
        }
        write!(f, " ({})", self.chosen_by)
    }
}

/// Why no engine could be chosen. Each names the flag or file at fault and
/// what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    #[error("--context {} and --host {} conflict: give only one of them (--host names an engine, --context a saved Docker context)", quoted(.context), quoted(.host))]
    ContextAndHost { context: String, host: String },
    #[error("Docker context {} ({chosen}) does not exist: {} is missing; list the contexts with `docker context ls` or create it with `docker context create`", quoted(.name), .path.display())]
    UnknownContext {
        name: String,
        chosen: String,
        path: PathBuf,
    },
    #[error("cannot read {}: {detail}; check its permissions, or recreate the context with `docker context create`", .path.display())]
    Unreadable { path: PathBuf, detail: String },
    #[error("{}: {detail}; fix the file, or let the docker CLI rewrite it (`docker context create`, `docker context use`)", .path.display())]
    BadFile { path: PathBuf, detail: String },
    #[error("cannot find the Docker config folder for {wanted}: neither DOCKER_CONFIG nor HOME is set; set DOCKER_CONFIG to the folder holding config.json, contexts/ and the certificates")]
    NoConfigDir { wanted: String },
    #[error("engine address {} ({chosen}) is refused: {reason}; fix the address: ssh://[user@]host[:port], with a user and a host that neither begin with '-' nor hold control characters (ssh options belong in ~/.ssh/config)", quoted(.host))]
    BadSshTarget {
        host: String,
        chosen: String,
        reason: String,
    },
}

/// `ep`, unless it is an `ssh://` address whose user or host ssh would
/// misread ([`crate::model::ssh_target_problem`]): every resolution ends here.
fn checked(ep: Endpoint) -> Result<Endpoint, EndpointError> {
    match crate::model::ssh_target_problem(&ep.host) {
        None => Ok(ep),
        Some(reason) => Err(EndpointError::BadSshTarget {
            chosen: ep.chosen_by.to_string(),
            host: ep.host,
            reason,
        }),
    }
}

/// Chooses the engine from `input` exactly as the docker CLI does:
/// `--context` (an error together with `--host`), `--host`, `DOCKER_HOST`
/// (the context is then `default`), `DOCKER_CONTEXT`, `currentContext` in
/// `config.json`, else [`DEFAULT_HOST`]. An `ssh://` user or host that ssh
/// would misread is an error ([`EndpointError::BadSshTarget`]).
///
/// Reads only `config.json` and the chosen context's files in the config
/// folder `input` names. TLS for `--host`, `DOCKER_HOST` and the default
/// socket comes from the environment values in `input`; a context carries its own.
pub fn resolve(input: &EndpointInput) -> Result<Endpoint, EndpointError> {
    let context_flag = nonempty(&input.context_flag);
    let host_flag = nonempty(&input.host_flag);
    if let (Some(context), Some(host)) = (context_flag, host_flag) {
        return Err(EndpointError::ContextAndHost {
            context: context.to_string(),
            host: host.to_string(),
        });
    }
    if let Some(name) = context_flag {
        return resolve_named_context(name, input, ChosenBy::ContextFlag(name.to_string()));
    }
    if let Some(host) = host_flag {
        return resolve_host(host, input, ChosenBy::HostFlag);
    }
    if let Some(host) = nonempty(&input.docker_host) {
        return resolve_host(host, input, ChosenBy::DockerHostEnv);
    }
    if let Some(name) = nonempty(&input.docker_context) {
        return resolve_named_context(name, input, ChosenBy::DockerContextEnv(name.to_string()));
    }
    if let Some(name) = current_context(input)? {
        return resolve_named_context(&name, input, ChosenBy::ConfigFile(name.clone()));
    }
    resolve_host(DEFAULT_HOST, input, ChosenBy::Default)
}

/// The engine a Docker context names, as `docker --context NAME` would reach
/// it. `default` is `DOCKER_HOST` (or [`DEFAULT_HOST`]) with TLS from the
/// environment; any other name is read from
/// `contexts/meta/<sha256 hex of NAME>/meta.json` in the config folder, with the
/// TLS material in `contexts/tls/<sha256 hex>/docker/{ca,cert,key}.pem` used
/// when present. `chosen_by` says what named the context, for messages.
pub(crate) fn resolve_named_context(
    name: &str,
    input: &EndpointInput,
    chosen_by: ChosenBy,
) -> Result<Endpoint, EndpointError> {
    if name == DEFAULT_CONTEXT {
        let host = nonempty(&input.docker_host).unwrap_or(DEFAULT_HOST);
        return resolve_host(host, input, chosen_by);
    }
    let config_dir = input
        .config_dir()
        .ok_or_else(|| EndpointError::NoConfigDir {
            wanted: format!("context {}", quoted(name)),
        })?;
    let digest = context_digest(name);
    let meta_path = config_dir
        .join("contexts")
        .join("meta")
        .join(&digest)
        .join("meta.json");
    let text = match std::fs::read_to_string(&meta_path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(EndpointError::UnknownContext {
                name: name.to_string(),
                chosen: chosen_by.to_string(),
                path: meta_path,
            })
        }
        Err(e) => {
            return Err(EndpointError::Unreadable {
                path: meta_path,
                detail: e.to_string(),
            })
        }
    };
    let meta: ContextMeta = serde_json::from_str(&text).map_err(|e| EndpointError::BadFile {
        path: meta_path.clone(),
        detail: json_detail(&e),
    })?;
    let docker = meta
        .endpoints
        .and_then(|mut e| e.remove("docker"))
        .filter(|d| d.host.as_deref().is_some_and(|h| !h.trim().is_empty()))
        .ok_or_else(|| EndpointError::BadFile {
            path: meta_path.clone(),
            detail: "no Endpoints.docker.Host: the context names no Docker engine".to_string(),
        })?;
    let host = docker.host.unwrap_or_default().trim().to_string();
    let skip_verify = docker.skip_tls_verify.unwrap_or(false);

    let tls_dir = config_dir
        .join("contexts")
        .join("tls")
        .join(&digest)
        .join("docker");
    let present = |file: &str| Some(tls_dir.join(file)).filter(|p| p.is_file());
    let (ca, cert, key) = (present("ca.pem"), present("cert.pem"), present("key.pem"));
    let has_material = ca.is_some() || cert.is_some() || key.is_some();
    let tls = (has_material || skip_verify || is_https(&host)).then_some(Tls {
        ca,
        cert,
        key,
        verify: !skip_verify,
    });
    checked(Endpoint {
        host,
        tls,
        chosen_by,
    })
}

/// The engine at `host` (from `--host`, `DOCKER_HOST`, the default socket or
/// an `[[engine]] host = ...` entry), with TLS as the docker CLI takes it from
/// the environment: on when `DOCKER_TLS_VERIFY` (verified) or `DOCKER_TLS`
/// (unverified) is non-empty, with `ca.pem` required and `cert.pem`/`key.pem`
/// used when present in `DOCKER_CERT_PATH`, else the config folder. An
/// `https://` host means TLS too (verified; the files are used when present).
pub(crate) fn resolve_host(
    host: &str,
    input: &EndpointInput,
    chosen_by: ChosenBy,
) -> Result<Endpoint, EndpointError> {
    let host = host.trim().to_string();
    let verify_env = nonempty(&input.docker_tls_verify).is_some();
    let tls_env = nonempty(&input.docker_tls).is_some();
    let https = is_https(&host);
    let tls = if verify_env || tls_env || https {
        let cert_dir = nonempty_path(&input.docker_cert_path)
            .map(Path::to_path_buf)
            .or_else(|| input.config_dir());
        let present = |dir: &Path, file: &str| Some(dir.join(file)).filter(|p| p.is_file());
        let (ca, cert, key) = match &cert_dir {
            // As the docker CLI: with TLS asked for in the environment, the CA is required.
            Some(dir) if verify_env || tls_env => (
                Some(dir.join("ca.pem")),
                present(dir, "cert.pem"),
                present(dir, "key.pem"),
            ),
            Some(dir) => (
                present(dir, "ca.pem"),
                present(dir, "cert.pem"),
                present(dir, "key.pem"),
            ),
            None if verify_env || tls_env => {
                return Err(EndpointError::NoConfigDir {
                    wanted: "the TLS certificates (DOCKER_TLS_VERIFY or DOCKER_TLS is set)"
                        .to_string(),
                })
            }
            None => (None, None, None),
        };
        Some(Tls {
            ca,
            cert,
            key,
            verify: verify_env || !tls_env,
        })
    } else {
        None
    };
    checked(Endpoint {
        host,
        tls,
        chosen_by,
    })
}

/// The lowercase sha256 hex of a context name: its folder name under
/// `contexts/meta/` and `contexts/tls/`.
pub fn context_digest(name: &str) -> String {
    crate::model::hex(&Sha256::digest(name.as_bytes()))
}

/// `currentContext` from `config.json`, if the file exists and names one.
fn current_context(input: &EndpointInput) -> Result<Option<String>, EndpointError> {
    let Some(dir) = input.config_dir() else {
        return Ok(None);
    };
    let path = dir.join("config.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(EndpointError::Unreadable {
                path,
                detail: e.to_string(),
            })
        }
    };
    let config: ConfigFile = serde_json::from_str(&text).map_err(|e| EndpointError::BadFile {
        path: path.clone(),
        detail: json_detail(&e),
    })?;
    Ok(config.current_context.filter(|c| !c.trim().is_empty()))
}

#[derive(Deserialize)]
struct ConfigFile {
    #[serde(rename = "currentContext")]
    current_context: Option<String>,
}

#[derive(Deserialize)]
struct ContextMeta {
    #[serde(rename = "Endpoints")]
    endpoints: Option<std::collections::HashMap<String, DockerEndpointMeta>>,
}

#[derive(Deserialize)]
struct DockerEndpointMeta {
    #[serde(rename = "Host")]
    host: Option<String>,
    #[serde(rename = "SkipTLSVerify")]
    skip_tls_verify: Option<bool>,
}

/// `invalid JSON at line 3, column 7: expected ...`.
fn json_detail(e: &serde_json::Error) -> String {
    format!(
        "invalid JSON at line {}, column {}: {e}",
        e.line(),
        e.column()
    )
}

fn is_https(host: &str) -> bool {
    host.get(..8)
        .is_some_and(|s| s.eq_ignore_ascii_case("https://"))
}

fn nonempty(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

fn nonempty_path(value: &Option<PathBuf>) -> Option<&Path> {
    value.as_deref().filter(|p| !p.as_os_str().is_empty())
}

/// `"name"` with control and invisible characters escaped.
fn quoted(s: &str) -> String {
    format!("\"{}\"", printable(s))
}

/// The text with control characters and invisible formatting characters
/// escaped (`text::escape`), so a file's content cannot drive a terminal.
fn printable(s: &str) -> String {
    crate::text::escape(s).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Docker config folder in a temp dir, with contexts written as the docker CLI writes them.
    struct ConfigDir {
        dir: tempfile::TempDir,
    }

    impl ConfigDir {
        fn new() -> Self {
            ConfigDir {
                dir: tempfile::tempdir().unwrap(),
            }
        }

        fn path(&self) -> &Path {
            self.dir.path()
        }

        fn current_context(self, name: &str) -> Self {
            self.file(
                "config.json",
                &format!(r#"{{"auths":{{}},"currentContext":"{name}"}}"#),
            )
        }

        fn context(self, name: &str, host: &str, skip_verify: bool) -> Self {
            let meta = format!(
                r#"{{"Name":"{name}","Metadata":{{"Description":""}},"Endpoints":{{"docker":{{"Host":"{host}","SkipTLSVerify":{skip_verify}}}}}}}"#
            );
            let rel = format!("contexts/meta/{}/meta.json", context_digest(name));
            self.file(&rel, &meta)
        }

        fn context_tls(self, name: &str, files: &[&str]) -> Self {
            let mut me = self;
            for file in files {
                let rel = format!("contexts/tls/{}/docker/{file}", context_digest(name));
                me = me.file(&rel, "PEM");
            }
            me
        }

        fn file(self, rel: &str, text: &str) -> Self {
            let path = self.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
            self
        }

        /// An input with DOCKER_CONFIG pointing here and nothing else set.
        fn input(&self) -> EndpointInput {
            EndpointInput {
                docker_config: Some(self.path().to_path_buf()),
                ..EndpointInput::default()
            }
        }

        /// An endpoint's text with the temp dir shown as `$CONFIG`.
        fn show(&self, result: Result<Endpoint, EndpointError>) -> String {
            let text = match result {
                Ok(ep) => match &ep.tls {
                    None => ep.to_string(),
                    Some(tls) => format!(
                        "{ep}\n  ca={:?} cert={:?} key={:?} verify={}",
                        tls.ca, tls.cert, tls.key, tls.verify
                    ),
                },
                Err(e) => format!("error: {e}"),
            };
            text.replace(&self.path().display().to_string(), "$CONFIG")
        }
    }

    fn some(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    #[test]
    fn precedence_follows_the_docker_cli() {
        let cfg = ConfigDir::new()
            .current_context("fromfile")
            .context("fromfile", "tcp://file:2375", false)
            .context("fromenv", "tcp://env:2375", false)
            .context("fromflag", "ssh://me@flag", false);
        let full = EndpointInput {
            context_flag: None,
            host_flag: some("tcp://hostflag:2375"),
            docker_host: some("unix:///run/env.sock"),
            docker_context: some("fromenv"),
            ..cfg.input()
        };
        // Each row drops the winner of the row before it.
        let cases: Vec<(&str, EndpointInput)> = vec![
            (
                "--context wins",
                EndpointInput {
                    context_flag: some("fromflag"),
                    host_flag: None,
                    ..full.clone()
                },
            ),
            ("--host", full.clone()),
            (
                "DOCKER_HOST",
                EndpointInput {
                    host_flag: None,
                    ..full.clone()
                },
            ),
            (
                "DOCKER_CONTEXT",
                EndpointInput {
                    host_flag: None,
                    docker_host: None,
                    ..full.clone()
                },
            ),
            (
                "config.json",
                EndpointInput {
                    host_flag: None,
                    docker_host: None,
                    docker_context: None,
                    ..full.clone()
                },
            ),
            (
                "empty values count as unset",
                EndpointInput {
                    host_flag: some(""),
                    docker_host: some(""),
                    docker_context: some(" "),
                    ..full.clone()
                },
            ),
            ("nothing at all", EndpointInput::default()),
            (
                "--context with --host",
                EndpointInput {
                    context_flag: some("fromflag"),
                    ..full.clone()
                },
            ),
        ];
        let text = cases
            .into_iter()
            .map(|(name, input)| format!("{name}: {}", cfg.show(resolve(&input))))
            .collect::<Vec<_>>()
            .join("\n");
        insta::with_settings!({snapshot_path => "../../snapshots"}, { insta::assert_snapshot!(text) });
    }

    #[test]
    fn default_context_is_docker_host_or_the_socket() {
        let cfg = ConfigDir::new().current_context("default");
        let text = [
            cfg.input(),
            EndpointInput {
                context_flag: some("default"),
                ..cfg.input()
            },
            EndpointInput {
                docker_context: some("default"),
                docker_host: some("tcp://h:2375"),
                ..cfg.input()
            },
            EndpointInput {
                context_flag: some("default"),
                docker_host: some("tcp://h:2375"),
                ..cfg.input()
            },
        ]
        .iter()
        .map(|input| cfg.show(resolve(input)))
        .collect::<Vec<_>>()
        .join("\n");
        insta::with_settings!({snapshot_path => "../../snapshots"}, { insta::assert_snapshot!(text) });
    }

    #[test]
    fn contexts_with_and_without_tls_material() {
        let cfg = ConfigDir::new()
            .context("plain", "tcp://plain:2375", false)
            .context("full", "tcp://full:2376", false)
            .context_tls("full", &["ca.pem", "cert.pem", "key.pem"])
            .context("caonly", "tcp://caonly:2376", false)
            .context_tls("caonly", &["ca.pem"])
            .context("skip", "tcp://skip:2376", true)
            .context("secure", "https://secure:2376", false);
        let text = ["plain", "full", "caonly", "skip", "secure"]
            .iter()
            .map(|name| {
                cfg.show(resolve_named_context(
                    name,
                    &cfg.input(),
                    ChosenBy::StateFile(format!("e-{name}")),
                ))
            })
            .collect::<Vec<_>>()
            .join("\n");
        insta::with_settings!({snapshot_path => "../../snapshots"}, { insta::assert_snapshot!(text) });
    }

    #[test]
    fn environment_tls_as_the_docker_cli() {
        let certs = ConfigDir::new()
            .file("ca.pem", "PEM")
            .file("cert.pem", "PEM")
            .file("key.pem", "PEM");
        let empty = ConfigDir::new();
        let base = EndpointInput {
            docker_host: some("tcp://h:2376"),
            ..EndpointInput::default()
        };
        let cases: Vec<(&str, EndpointInput)> = vec![
            (
                "no TLS variables",
                EndpointInput {
                    docker_cert_path: Some(certs.path().into()),
                    ..base.clone()
                },
            ),
            (
                "DOCKER_TLS_VERIFY=1 with DOCKER_CERT_PATH",
                EndpointInput {
                    docker_tls_verify: some("1"),
                    docker_cert_path: Some(certs.path().into()),
                    ..base.clone()
                },
            ),
            (
                "DOCKER_TLS_VERIFY=0 still means on",
                EndpointInput {
                    docker_tls_verify: some("0"),
                    docker_cert_path: Some(certs.path().into()),
                    ..base.clone()
                },
            ),
            (
                "DOCKER_TLS_VERIFY with an empty cert folder keeps the CA required",
                EndpointInput {
                    docker_tls_verify: some("1"),
                    docker_cert_path: Some(empty.path().into()),
                    ..base.clone()
                },
            ),
            (
                "DOCKER_TLS alone: unverified",
                EndpointInput {
                    docker_tls: some("1"),
                    docker_cert_path: Some(certs.path().into()),
                    ..base.clone()
                },
            ),
            (
                "certificates from DOCKER_CONFIG without DOCKER_CERT_PATH",
                EndpointInput {
                    docker_tls_verify: some("1"),
                    docker_config: Some(certs.path().into()),
                    home: Some(empty.path().into()),
                    ..base.clone()
                },
            ),
            (
                "https:// alone: verified, files used when present",
                EndpointInput {
                    docker_host: some("https://h:2376"),
                    docker_cert_path: Some(empty.path().into()),
                    ..base.clone()
                },
            ),
            (
                "DOCKER_TLS_VERIFY without any folder",
                EndpointInput {
                    docker_tls_verify: some("1"),
                    ..base.clone()
                },
            ),
        ];
        let text = cases
            .into_iter()
            .map(|(name, input)| {
                let shown = certs.show(resolve(&input));
                format!(
                    "{name}: {}",
                    shown.replace(&empty.path().display().to_string(), "$EMPTY")
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        insta::with_settings!({snapshot_path => "../../snapshots"}, { insta::assert_snapshot!(text) });
    }

    #[test]
    fn config_folder_from_home() {
        let home = ConfigDir::new()
            .file(".docker/config.json", r#"{"currentContext":"c"}"#)
            .file(
                &format!("contexts/meta/{}/meta.json", context_digest("c")),
                r#"{"Endpoints":{"docker":{"Host":"tcp://wrong:1"}}}"#,
            );
        let home = home.file(
            &format!(".docker/contexts/meta/{}/meta.json", context_digest("c")),
            r#"{"Endpoints":{"docker":{"Host":"tcp://right:2375"}}}"#,
        );
        let input = EndpointInput {
            home: Some(home.path().into()),
            ..EndpointInput::default()
        };
        assert_eq!(
            resolve(&input).unwrap().to_string(),
            r#"tcp://right:2375 (context "c" from config.json)"#
        );
    }

    #[test]
    fn broken_contexts_and_config_files_are_errors_naming_the_file() {
        let cfg = ConfigDir::new()
            .file(
                &format!("contexts/meta/{}/meta.json", context_digest("bad")),
                "{\n  \"Endpoints\": {,\n}",
            )
            .file(
                &format!("contexts/meta/{}/meta.json", context_digest("nodocker")),
                r#"{"Name":"nodocker","Endpoints":{"kubernetes":{"Host":"x"}}}"#,
            );
        let mut lines: Vec<String> = ["missing", "bad", "nodocker"]
            .iter()
            .map(|name| {
                cfg.show(resolve(&EndpointInput {
                    docker_context: some(name),
                    ..cfg.input()
                }))
            })
            .collect();
        let broken_config = ConfigDir::new().file("config.json", "{\"currentContext\": 3}");
        lines.push(broken_config.show(resolve(&broken_config.input())));
        lines.push(cfg.show(resolve(&EndpointInput {
            context_flag: some("x"),
            ..EndpointInput::default()
        })));
        insta::with_settings!({snapshot_path => "../../snapshots"}, { insta::assert_snapshot!(lines.join("\n")) });
    }

    #[test]
    fn names_and_hosts_are_printed_escaped() {
        let ep = Endpoint {
            host: "tcp://h\u{1b}[31m:1".to_string(),
            tls: None,
            chosen_by: ChosenBy::DockerContextEnv("a\u{202e}b\n".to_string()),
        };
        assert_eq!(
            ep.to_string(),
            r#"tcp://h\u{1b}[31m:1 (context "a\u{202e}b\n" from DOCKER_CONTEXT)"#
        );
    }

    #[test]
    fn ssh_users_and_hosts_that_ssh_would_misread_are_refused_however_chosen() {
        let cfg = ConfigDir::new()
            .context("evil", "ssh://%2DoProxyCommand=x@h", false)
            .context("good", "ssh://me@h:22", false);
        let cases: Vec<(&str, Result<Endpoint, EndpointError>)> = vec![
            (
                "--host",
                resolve(&EndpointInput {
                    host_flag: some("ssh://-oProxyCommand=x@host"),
                    ..cfg.input()
                }),
            ),
            (
                "DOCKER_HOST",
                resolve(&EndpointInput {
                    docker_host: some("ssh://me@host%0a"),
                    ..cfg.input()
                }),
            ),
            (
                "--context",
                resolve(&EndpointInput {
                    context_flag: some("evil"),
                    ..cfg.input()
                }),
            ),
            (
                "a state file's host",
                resolve_host(
                    "ssh://me@-oProxyCommand=x",
                    &cfg.input(),
                    ChosenBy::StateFile("ci\u{1b}".into()),
                ),
            ),
            (
                "a good context",
                resolve(&EndpointInput {
                    context_flag: some("good"),
                    ..cfg.input()
                }),
            ),
        ];
        let text = cases
            .into_iter()
            .map(|(name, result)| format!("{name}: {}", cfg.show(result)))
            .collect::<Vec<_>>()
            .join("\n");
        insta::assert_snapshot!(text, @r#"
        --host: error: engine address "ssh://-oProxyCommand=x@host" (from --host) is refused: its ssh user begins with '-', which ssh would take for an option; fix the address: ssh://[user@]host[:port], with a user and a host that neither begin with '-' nor hold control characters (ssh options belong in ~/.ssh/config)
        DOCKER_HOST: error: engine address "ssh://me@host%0a" (from DOCKER_HOST) is refused: its ssh host contains the control character '\u{a}' once percent-decoded; fix the address: ssh://[user@]host[:port], with a user and a host that neither begin with '-' nor hold control characters (ssh options belong in ~/.ssh/config)
        --context: error: engine address "ssh://%2DoProxyCommand=x@h" (context "evil" from --context) is refused: its ssh user begins with '-' once percent-decoded, which ssh would take for an option; fix the address: ssh://[user@]host[:port], with a user and a host that neither begin with '-' nor hold control characters (ssh options belong in ~/.ssh/config)
        a state file's host: error: engine address "ssh://me@-oProxyCommand=x" (engine "ci\u{1b}" in the state file) is refused: its ssh host begins with '-', which ssh would take for an option; fix the address: ssh://[user@]host[:port], with a user and a host that neither begin with '-' nor hold control characters (ssh options belong in ~/.ssh/config)
        a good context: ssh://me@h:22 (context "good" from --context)
        "#);
    }

    #[test]
    fn digest_matches_the_docker_cli() {
        // `docker context create colima ...` writes contexts/meta/<this>/.
        assert_eq!(
            context_digest("colima"),
            "f24fd3749c1368328e2b149bec149cb6795619f244c5b584e844961215dadd16"
        );
    }
}
