//! The second integration test binary: tests that load the whole machine
//! (both cores, the disk) for minutes. `cargo test` runs one test binary after
//! another (this one after `tests/main.rs`, by name), so these never run
//! beside the main suite, whose deadline and timing tests such load breaks:
//! with the SIGKILL test inside the main suite, CI once failed eight of them
//! (`--timeout 1` runs past their 8 s bound, watch reaping past its grace).
//! Run alone: `cargo test --test solo -- --nocapture`.

// `trial!` stands where `#[test]` would, after a test's doc comment, which
// therefore documents a macro call: allowed.
#![allow(unused_doc_comments)]

#[macro_use]
mod support;

mod archive_crash;

fn main() {
    // Without an engine the run's one failure is the main binary's.
    support::harness::main_beside();
}
