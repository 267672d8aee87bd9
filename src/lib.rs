//! sandboxctl: tears down ephemeral Docker sandboxes by declarative reconciliation.
//!
//! A run passes through the modules in this order: `cli` (flags) and `config`
//! (resolved once: state file, scope, goal, clock); `inventory` (one listing
//! of an `engine`) feeds `plan` (pure, a graph of removals); `reconcile` runs
//! `apply` (one step's work and the error policy, scheduled by the generic
//! `walk`) and `verify`; `render` is the only module that makes text (with
//! `text` escaping what engines return). `run` wires one command together.
//! `model` holds the nouns: one object type for every kind and engine.

pub mod apply;
pub mod audit;
pub mod cli;
pub mod config;
pub mod desired;
pub mod endpoint;
pub mod engine;
pub mod explain;
pub mod fleet;
pub mod inventory;
pub mod metrics;
pub mod model;
pub mod operator;
pub mod plan;
pub mod reconcile;
pub mod render;
pub mod run;
pub mod text;
pub mod verify;
pub mod walk;
pub mod watch;
