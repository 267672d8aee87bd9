//! Shared test support: fixtures, the real-engine harness, the CLI runner.
#![allow(dead_code)]

// First: `trial!` is used by the modules after it.
#[macro_use]
pub mod harness;
pub mod assert;
pub mod cli;
pub mod docker;
pub mod engines;
pub mod files;
pub mod lease;
pub mod lock;
pub mod mcp;
pub mod proxy;
pub mod pty;
pub mod receiver;
pub mod report;
pub mod schema;
pub mod tools;
