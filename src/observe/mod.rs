//! Observers of a run: the audit log and the Prometheus metrics.

pub(crate) mod audit;
pub(crate) mod metrics;
