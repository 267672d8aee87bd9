//! `health [ADDR]`: asks a running watch's `/healthz` and ends healthy or
//! not, for a container's `HEALTHCHECK` (no shell, no curl needed).
//!
//! Owns which address is asked (ADDR, else `SANDBOXCTL_METRICS`: clap
//! reads both) and the deadline. Reaches no engine and reads no state
//! file; the request is `exec::probe`'s, the words `render`'s. Ends in a
//! `Verdict`: failed unless the watch answered 200 (converged, or degraded
//! and still reaping), so the status is 0 healthy, 1 unhealthy (2, an
//! invalid invocation, is clap's).

use std::net::SocketAddr;
use std::time::Duration;

use crate::exec::report::Verdict;
use crate::render::{self, Format};

use super::context::{failed, Sink};

/// `health`: one `GET /healthz` on `addr` within `deadline`, its answer
/// said on stdout.
pub(super) async fn health(
    addr: SocketAddr,
    deadline: Duration,
    format: Format,
    sink: &mut dyn Sink,
) -> Verdict {
    let probe = crate::exec::probe::ask(addr, deadline).await;
    sink.out(&render::health(&probe, format));
    failed(!probe.healthy())
}
