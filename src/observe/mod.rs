//! Observers of a run: the audit log and the Prometheus metrics, with the
//! endpoint that serves them and the health rule behind `/healthz`.

pub(crate) mod audit;
pub(crate) mod endpoint;
mod health;
pub(crate) mod metrics;
