//! sandboxctl: tears down ephemeral Docker sandboxes by declarative reconciliation.
//!
//! A run passes through the modules in this order: `desired` (the state file)
//! and `inventory` (one listing of the engine) feed `plan` (pure, a graph of
//! removals); `apply` carries the plan out through an `engine`; `verify` lists
//! again; `render` prints. `main.rs` only wires them together.

pub mod apply;
pub mod cli;
pub mod desired;
pub mod engine;
pub mod inventory;
pub mod model;
pub mod plan;
pub mod render;
pub mod run;
pub mod verify;
