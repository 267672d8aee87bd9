//! Carrying a plan out: the generic DAG `walk`er, `apply` (one step's work and
//! the error policy), `list` (the engine calls of discovery), `verify` (the
//! definition of success), `reconcile` (list, plan, apply, verify on one
//! engine), `fleet` (every engine of a run at once), `explain` (what
//! `explain` lists of one engine beyond discovery), `report` (the report,
//! the one merge and the `Verdict`), `event` (the one event type),
//! `lease` (taking, renewing and releasing leases), `hold` (holding a box
//! while a command runs: the command's supervisor), `archive` (a volume's
//! archive before it goes, and its restore) and `files` (how the files and
//! folders sandboxctl creates are opened: private, never through a symbolic
//! link).

pub mod apply;
pub mod archive;
pub mod event;
pub(crate) mod explain;
pub(crate) mod files;
pub(crate) mod fleet;
pub mod hold;
pub mod lease;
pub mod list;
pub mod reconcile;
pub mod report;
pub mod verify;
mod walk;

/// Reads and checks a saved plan file as `apply FILE` does before anything
/// else (one engine's plan or a fleet's; versions, engines, steps): what is
/// wrong with it, in words, or `None`. For the fuzz target and the property
/// tests of hostile files; `apply FILE` itself goes on to compare the plan
/// with the engines.
pub fn saved_plan_problem(path: &std::path::Path) -> Option<String> {
    fleet::FleetPlan::read(path).err().map(|e| e.to_string())
}
