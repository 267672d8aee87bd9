//! Leases as a driver makes them: volumes created with the plain docker CLI
//! (`docker -H HOST volume create --label ...`), on the main engine, an extra
//! engine or through a proxy, and read back through the harness.
//!
//! Owns the lease protocol as the tests spell it (the label, the name
//! convention), written from the contract, not taken from the crate. Every
//! lease made here carries its test's scope label, so the test's `Sandbox`
//! or `Corner` removes it on drop like anything else it made. Runs only past
//! a gate (see `support::docker`).

use std::collections::HashMap;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bollard::query_parameters::ListVolumesOptionsBuilder;
use bollard::Docker;

use super::docker::{engine_endpoint, Sandbox, SCOPE_KEY};
use super::engines::Corner;

/// The label that makes a managed volume a lease, valued with its ttl.
pub const LEASE_TTL: &str = "ca.sandbox.lease.ttl";
/// Lease volumes are named `ca-sbx-lease-<box>-<suffix>`.
pub const LEASE_PREFIX: &str = "ca-sbx-lease-";
/// The docker CLI.
const DOCKER: &str = "docker";
/// How long one docker CLI call may take.
const DOCKER_DEADLINE: Duration = Duration::from_secs(60);

/// `docker -H host ARGS...`, with no context or TLS from the environment;
/// fails the test (with both streams) unless it exits 0. Returns stdout, trimmed.
pub fn docker(host: &str, args: &[&str]) -> String {
    let mut command = Command::new("timeout");
    command
        .arg(DOCKER_DEADLINE.as_secs().to_string())
        .arg(DOCKER)
        .args(["-H", host])
        .args(args);
    for var in [
        "DOCKER_HOST",
        "DOCKER_CONTEXT",
        "DOCKER_TLS_VERIFY",
        "DOCKER_CERT_PATH",
    ] {
        command.env_remove(var);
    }
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("run `docker -H {host} {}`: {e}", args.join(" ")));
    assert!(
        out.status.success(),
        "`docker -H {host} {}` failed ({}):\n{}{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A fresh lease volume name for `box_id`: `ca-sbx-lease-<box>-<scope>-<n>`.
pub fn lease_name(box_id: &str, scope_value: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{LEASE_PREFIX}{box_id}-{scope_value}-{}",
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Makes a lease the way a driver without sandboxctl would: `docker -H host
/// volume create --label ca.sandbox=1 --label <scope> --label
/// ca.sandbox.id=<box> --label ca.sandbox.lease.ttl=<ttl> <name>`. The ttl
/// is passed as given (hostile values included). Returns the volume's name.
pub fn docker_lease(
    host: &str,
    scope_arg: &str,
    scope_value: &str,
    box_id: &str,
    ttl: &str,
) -> String {
    let name = lease_name(box_id, scope_value);
    let labels = [
        "ca.sandbox=1".to_string(),
        scope_arg.to_string(),
        format!("ca.sandbox.id={box_id}"),
        format!("{LEASE_TTL}={ttl}"),
    ];
    let mut args = vec!["volume", "create"];
    for label in &labels {
        args.extend(["--label", label]);
    }
    args.push(&name);
    docker(host, &args);
    name
}

impl Sandbox {
    /// A lease of box `box_id` with `ttl`, made with the docker CLI on the
    /// main engine. Returns the volume's name.
    pub fn cli_lease(&self, box_id: &str, ttl: &str) -> String {
        self.cli_lease_at(&engine_endpoint(), box_id, ttl)
    }

    /// The same through the engine at `host` (an extra engine's socket, a
    /// proxy's `docker_host()`).
    pub fn cli_lease_at(&self, host: &str, box_id: &str, ttl: &str) -> String {
        docker_lease(host, &self.scope_arg(), self.scope_value(), box_id, ttl)
    }
}

impl Corner {
    /// A lease of box `box_id` with `ttl`, made with the docker CLI on this
    /// corner's engine. Returns the volume's name.
    pub fn cli_lease(&self, box_id: &str, ttl: &str) -> String {
        docker_lease(
            self.host(),
            &self.scope_arg(),
            self.scope_value(),
            box_id,
            ttl,
        )
    }
}

/// One lease volume as the engine lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub name: String,
    /// The engine's stamp, Unix seconds.
    pub created: i64,
    /// The ttl label as written.
    pub ttl: String,
}

impl Listed {
    /// Where the lease ends on the engine's clock (Unix seconds), if its ttl
    /// is whole seconds with an `s` (as sandboxctl writes it) or bare.
    pub fn ends(&self) -> Option<i64> {
        let secs = self.ttl.strip_suffix('s').unwrap_or(&self.ttl);
        secs.parse::<i64>().ok().map(|s| self.created + s)
    }
}

/// The lease volumes of box `box_id` in scope `scope_value` that `docker`
/// lists now, oldest first.
pub async fn leases_of(docker: &Docker, scope_value: &str, box_id: &str) -> Vec<Listed> {
    let scope = format!("{SCOPE_KEY}={scope_value}");
    let id = format!("ca.sandbox.id={box_id}");
    let filters = HashMap::from([("label", vec![scope.as_str(), id.as_str(), LEASE_TTL])]);
    let options = ListVolumesOptionsBuilder::new().filters(&filters).build();
    let mut found: Vec<Listed> = docker
        .list_volumes(Some(options))
        .await
        .unwrap_or_else(|e| panic!("list the leases of {box_id}: {e}"))
        .volumes
        .unwrap_or_default()
        .into_iter()
        .filter(|v| {
            v.labels.get(SCOPE_KEY).map(String::as_str) == Some(scope_value)
                && v.labels.get("ca.sandbox.id").map(String::as_str) == Some(box_id)
        })
        .filter_map(|v| {
            Some(Listed {
                created: rfc3339_seconds(v.created_at.as_deref()?)?,
                ttl: v.labels.get(LEASE_TTL)?.clone(),
                name: v.name,
            })
        })
        .collect();
    found.sort_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
    found
}

/// Unix seconds of an RFC 3339 time (UTC or with an offset).
pub fn rfc3339_seconds(text: &str) -> Option<i64> {
    let t = text.trim();
    if let Ok(t) = humantime::parse_rfc3339_weak(t.trim_end_matches('Z')) {
        return t
            .duration_since(UNIX_EPOCH)
            .ok()
            .and_then(|d| i64::try_from(d.as_secs()).ok());
    }
    let (body, offset) = t.split_at(t.len().checked_sub(6)?);
    let sign = match offset.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let (h, m) = offset[1..].split_once(':')?;
    let shift = sign * (h.parse::<i64>().ok()? * 3600 + m.parse::<i64>().ok()? * 60);
    let t = humantime::parse_rfc3339_weak(body).ok()?;
    Some(i64::try_from(t.duration_since(UNIX_EPOCH).ok()?.as_secs()).ok()? - shift)
}

/// This machine's clock, Unix seconds.
pub fn local_now() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock after 1970")
            .as_secs(),
    )
    .expect("seconds fit i64")
}

/// This machine's clock, Unix milliseconds.
pub fn local_now_ms() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock after 1970")
            .as_millis(),
    )
    .expect("milliseconds fit i64")
}

/// Polls `check` every 100 ms until it answers true (the time it did) or
/// `timeout` passes (`None`).
pub async fn poll_until<F, Fut>(timeout: Duration, mut check: F) -> Option<Instant>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let until = Instant::now() + timeout;
    loop {
        if check().await {
            return Some(Instant::now());
        }
        if Instant::now() >= until {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
