//! Carrying a plan out: the generic DAG `walk`er, `apply` (one step's work and
//! the error policy), `list` (the engine calls of discovery), `verify` (the
//! definition of success), `reconcile` (list, plan, apply, verify on one
//! engine), `fleet` (every engine of a run at once), `explain` (what
//! `explain` lists of one engine beyond discovery), `report` (the report,
//! the one merge and the `Verdict`), `event` (the one event type),
//! `lease` (taking, renewing and releasing leases), `hold` (holding a box
//! while a command runs: the command's supervisor), `archive` (a volume's
//! archive before it goes, and its restore), `files` (how the files and
//! folders sandboxctl creates are opened: private, never through a symbolic
//! link), `seal` (a saved plan's seal and its key) and `probe` (asking a
//! running watch's `/healthz`, for `health`).

pub mod apply;
pub mod archive;
pub mod event;
pub(crate) mod explain;
pub(crate) mod files;
pub(crate) mod fleet;
pub mod hold;
pub mod lease;
pub mod list;
pub mod memo;
pub(crate) mod probe;
pub mod reconcile;
pub mod report;
pub(crate) mod seal;
pub mod verify;
mod walk;

/// Reads and checks a saved plan file as `apply FILE` does before anything
/// else (its seal, then one engine's plan or a fleet's: versions, engines,
/// steps): what is wrong with it, in words, or `None`. For the fuzz target
/// and the property tests of hostile files, with a fixed key. With
/// `seal_it`, a file holding a JSON object is first sealed in place (as
/// `plan --out` would have sealed it), so that the reader behind the seal is
/// reached too. `apply FILE` itself goes on to compare the plan with the
/// engines.
pub fn saved_plan_problem(path: &std::path::Path, seal_it: bool) -> Option<String> {
    let key = seal::Key::fixed_for_tests();
    if seal_it {
        let text = std::fs::read(path).ok()?;
        if let Ok(sealed) = seal::seal(&String::from_utf8_lossy(&text), &key) {
            std::fs::write(path, sealed).ok()?;
        }
    }
    fleet::FleetPlan::read(path, || Ok(key))
        .err()
        .map(|e| e.to_string())
}
