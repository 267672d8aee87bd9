//! Observers of a run: the audit log, the Prometheus metrics (with the
//! endpoint that serves them and the health rule behind `/healthz`) and the
//! notifier (`[[notify]]` receivers).

pub(crate) mod audit;
pub(crate) mod endpoint;
mod health;
pub(crate) mod metrics;
pub(crate) mod notify;
