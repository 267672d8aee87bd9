//! Shared test support: fixtures, the real-engine harness, the CLI runner.
#![allow(dead_code)]

pub mod cli;
pub mod docker;
pub mod proxy;
