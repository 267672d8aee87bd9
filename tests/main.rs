//! The main integration test binary. `support` holds the fixtures, the Docker
//! test harness and the fault-injection proxy; each other module is one area.
//! Its tests run concurrently; a test that loads the whole machine lives in
//! `tests/solo.rs` instead.

// `trial!` stands where `#[test]` would, after a test's doc comment, which
// therefore documents a macro call: allowed.
#![allow(unused_doc_comments)]

#[macro_use]
mod support;

mod archive;
mod archive_restart;
mod cli_docker;
mod degraded;
mod docker_engine;
mod docs;
mod engine_endpoints;
mod engines;
mod engines_harness;
mod explain;
mod faults;
mod fuzz_corpus;
mod graph;
mod image;
mod layers;
mod leases;
mod matrix;
mod mcp;
mod networks;
mod notify;
mod operator;
mod planner;
mod properties;
mod races;
mod reclaimed;
mod refused;
mod schema;
mod state_files;
mod swarm;
mod target;
mod validate;
mod watch;

fn main() {
    support::harness::main();
}
