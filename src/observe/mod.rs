//! Observers of a run: the audit log and the Prometheus metrics.

pub mod audit;
pub mod metrics;
