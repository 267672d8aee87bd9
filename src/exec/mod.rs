//! Carrying a plan out: the generic DAG `walk`er, `apply` (one step's work and
//! the error policy), `verify` (the report and the definition of success),
//! `reconcile` (list, plan, apply, verify on one engine) and `fleet` (every
//! engine of a run at once, one merged report, one exit decision).

pub mod apply;
pub mod event;
pub(crate) mod fleet;
pub mod list;
pub mod reconcile;
pub mod verify;
mod walk;
