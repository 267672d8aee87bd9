//! Carrying a plan out: the generic DAG `walk`er, `apply` (one step's work and
//! the error policy), `list` (the engine calls of discovery), `verify` (the
//! definition of success), `reconcile` (list, plan, apply, verify on one
//! engine), `fleet` (every engine of a run at once), `report` (the report,
//! the one merge and the `Verdict`), `event` (the one event type),
//! `lease` (taking, renewing and releasing leases), `hold` (holding a box
//! while a command runs: the command's supervisor), `archive` (a volume's
//! archive before it goes, and its restore) and `files` (how the files and
//! folders sandboxctl creates are opened: private, never through a symbolic
//! link).

pub mod apply;
pub mod archive;
pub mod event;
pub(crate) mod files;
pub(crate) mod fleet;
pub mod hold;
pub mod lease;
pub mod list;
pub mod reconcile;
pub mod report;
pub mod verify;
mod walk;
