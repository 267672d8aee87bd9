//! Shared test support: fixtures, the real-engine harness, the CLI runner.
#![allow(dead_code)]

pub mod assert;
pub mod cli;
pub mod docker;
pub mod engines;
pub mod files;
pub mod lease;
pub mod lock;
pub mod proxy;
pub mod report;
