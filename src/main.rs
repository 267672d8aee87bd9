//! sandboxctl's entry point: parse, validate, dispatch, exit.
//!
//! Owns nothing but the mapping from arguments to `Args` (`cli::parse`; a
//! command line it refuses is said by `run::refused`) and ending the
//! process with the status `cli::exit` decided (0 converged, 1 failed, 2
//! invalid invocation or `plan --detailed-exitcode` with changes, 130
//! interrupted; a watch stopped by SIGTERM: its last cycle's; `hold`: its
//! command's): the only place that calls `process::exit`. Everything else
//! is in the library (see `lib.rs`).

use sandboxctl::run::{refused, run_to_end};

/// mimalloc instead of the system allocator: planning allocates and frees
/// small strings by the hundred thousand, where glibc's malloc spends a third
/// of the time (see `benches/plan.rs`, which uses the same allocator).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // Kept alive until the process exits (see `run_to_end`).
    let runtime;
    let code = match sandboxctl::cli::parse(std::env::args_os().collect()) {
        // One thread: a run waits on engines, it does not compute; a second
        // worker only added wake-ups between threads. Beside 300 running
        // containers (150 inspections) a `plan` took 29 ms of CPU instead of
        // 48 and 74 ms instead of 88 (medians of 31 interleaved runs,
        // docs/performance.md). Blocking work goes to `spawn_blocking`. The
        // process exits with the runtime alive (see `run_to_end`).
        Ok(args) => {
            runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the tokio runtime starts");
            run_to_end(&runtime, args).code()
        }
        // Said as clap says it (and as the error document under `--format
        // json`): exit 2, or 0 for --help and --version.
        Err(why) => refused(&why),
    };
    std::process::exit(code);
}
