//! sandboxctl: tears down ephemeral Docker sandboxes by declarative reconciliation.
//!
//! A run passes through the folders in this order (see docs/ARCHITECTURE.md):
//! `cli` (flags, resolved once into a `Config`), `state` (the desired-state
//! file), `plan` (inventory and the pure planner), `exec` (the generic walker,
//! apply with its error policy, verify, reconcile, the fleet), `watch` (the
//! same reconcile, run again), `observe` (audit log, metrics) and `render`
//! (the only place that makes text, with `text` escaping what engines
//! return). `model` holds the nouns, `engine` the engines; `run` (a file per
//! command) dispatches a command and ends it in the one result that
//! `cli::exit` turns into the exit status. `schema` generates the published
//! schema of every JSON document (docs/schema/). `fuzz` holds the properties
//! the fuzz targets check, so that the ordinary suite checks them too.

pub mod cli;
pub mod engine;
pub mod exec;
#[doc(hidden)]
pub mod fuzz;
pub mod model;
mod observe;
pub mod plan;
pub mod render;
pub mod run;
pub mod schema;
pub mod state;
mod text;
mod watch;
