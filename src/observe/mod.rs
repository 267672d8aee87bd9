//! Observers of a run: the audit log, the Prometheus metrics and the
//! notifier (`[[notify]]` receivers).

pub(crate) mod audit;
pub(crate) mod metrics;
pub(crate) mod notify;
