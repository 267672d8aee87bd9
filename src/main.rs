//! sandboxctl's entry point: parse, validate, dispatch, exit.
//!
//! Owns nothing but the mapping from arguments to a `Config` and from the run's
//! outcome to an exit code (0 converged, 1 failed, 2 invalid invocation or
//! `plan --detailed-exitcode` with changes, 130 interrupted). Everything else
//! is in the library, stage by stage (see `lib.rs`).

use clap::{CommandFactory, Parser};
use sandboxctl::cli::Cli;
use sandboxctl::render;
use sandboxctl::run::{run, Exit};

fn main() {
    let config = match Cli::parse().into_config() {
        Ok(config) => config,
        Err(msg) => Cli::command()
            .error(clap::error::ErrorKind::ValueValidation, msg)
            .exit(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("the tokio runtime starts");
    let exit = match runtime.block_on(run(config)) {
        Ok(exit) => exit,
        Err(err) => {
            render::stderr(&render::error(&err));
            Exit::Failure
        }
    };
    std::process::exit(exit.code());
}
