//! One command, start to end: a resolved `Config` and its engines in, text
//! and an `Exit` out. Dispatch only.
//!
//! Every command runs on a non-empty list of engines (a single engine is a
//! fleet of one) through `exec::fleet` (`lease` through `exec::lease`,
//! `hold` through `exec::hold`, `restore` through `exec::archive`), in a file of its own
//! here, and ends in a `Verdict`; with how a signal stopped it (`signals`),
//! that is the run's `Ended`, which `cli::exit`'s one function turns into
//! the exit status and closing line. Owns which engines a run reaches
//! (lazily: one that is down fails its part alone), racing the run against
//! a second Ctrl-C, and which command runs. `run_on` takes the engines as
//! an argument, so every command, shape and fault is testable with the
//! in-memory engine. The progress view is `printer`, what every command
//! shares `context`; the words are `render`'s.

mod apply;
mod context;
mod destroy;
mod explain;
mod graph;
mod health;
mod hold;
mod inventory;
mod lease;
pub(crate) mod mcp;
mod operator;
mod plan;
mod printer;
mod restore;
mod signals;
mod validate;
mod watch;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use crate::cli::config::{resolve, Config, Job};
use crate::cli::exit::{Ended, Exit};
use crate::cli::{Args, Command};
use crate::engine::lazy::LazyEngine;
use crate::engine::Engine;
use crate::exec::list::Memo;
use crate::exec::report::Verdict;
use crate::model::RefusalCode;

pub use context::Sink;
use context::{refuse, Run, Terminal};
use signals::{Signal, Signals, Stop};

/// Says why the command line was refused (`cli::parse`), as clap says it
/// (on stderr; `--help` and `--version` on stdout), after the error document
/// on stdout when it asked for `--format json` (`context::refuse` says
/// every later refusal the same way); returns the exit status (2; 0 for
/// `--help` and `--version`), for `main` to exit with.
pub fn refused(refused: &crate::cli::Refused) -> i32 {
    if let Some(refusal) = &refused.json {
        Terminal.out(&crate::render::refusal(refusal));
    }
    let _ = refused.error.print();
    let _ = std::io::Write::flush(&mut std::io::stdout());
    refused.error.exit_code()
}

/// Runs one validated command to its end on `runtime` (what `main` calls).
/// A plain function, so that the whole run is compiled here, once, and not
/// again into the binary, as `block_on(run(args))` in `main` did: generic
/// over the run's future, it made the binary's unit 30 s of a first release
/// build (docs/performance.md, "The first build"). The runtime stays
/// `main`'s: the process ends while it is alive, because dropping it would
/// wait for a blocking read of stdin (the MCP server's) that nothing ends.
pub fn run_to_end(runtime: &tokio::runtime::Runtime, args: Args) -> Exit {
    runtime.block_on(run(args))
}

/// Runs one validated command on the engines its config names; a second
/// Ctrl-C ends it at once (`Ended::Quit`), through the same decision.
pub async fn run(args: Args) -> Exit {
    let mut terminal = Terminal;
    // Generated from the clap definitions, or the state files alone, or a
    // watch's /healthz: no engine, no signal handler.
    let early = match &args.command {
        Command::Completions { shell } => Some(operator::completions(*shell)),
        Command::Man => Some(operator::man()),
        Command::Validate { files } => Some(validate::validate(
            files,
            args.state.as_ref(),
            args.format,
            &mut terminal,
        )),
        // A plain HTTP request to a running watch: no engine, no state file.
        Command::Health { addr, deadline } => {
            Some(health::health(*addr, *deadline, args.format, &mut terminal).await)
        }
        _ => None,
    };
    if let Some(verdict) = early {
        return close(Ended::Done(verdict), &mut terminal);
    }
    let json = crate::cli::refusal::documented(args.format, &args.command);
    // Only the process's own run asks a person (never a tool call, a test
    // or a program that embeds the run): both ends of the question are a
    // terminal.
    let at_terminal = {
        use std::io::IsTerminal;
        std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
    };
    let config = match resolve(args.at_terminal(at_terminal)) {
        Ok(config) => config,
        Err(e) => {
            let refusal = crate::cli::refusal::of(&e, RefusalCode::InvalidArguments);
            let verdict = refuse(&mut terminal, json, &e, &refusal);
            return close(Ended::Done(verdict), &mut terminal);
        }
    };
    let engines: Vec<Arc<dyn Engine>> = config
        .engines
        .iter()
        .map(|t| {
            Arc::new(LazyEngine::new(
                &t.name,
                t.endpoint.clone(),
                config.timeout,
                config.call_timeout,
            )) as Arc<dyn Engine>
        })
        .collect();
    let stop = Stop::new(CancellationToken::new());
    let watching = matches!(config.job, Job::Watch { .. });
    let serving = matches!(config.job, Job::Mcp { .. });
    let (passed_tx, passed) = tokio::sync::mpsc::unbounded_channel();
    let mut signals = if matches!(config.job, Job::Hold { .. }) {
        // hold passes SIGINT and SIGTERM on to its command and waits for it.
        Signals::pass(passed_tx)
    } else if serving {
        Signals::serve(&stop)
    } else {
        Signals::stop(&stop, watching, config.format)
    };
    let end = tokio::select! {
        end = run_with(&config, engines, &stop, Some(passed), &mut terminal) => end,
        () = signals.quit() => Ended::Quit {
            log: watching.then_some(config.format),
        },
    };
    drop(signals);
    close(end, &mut terminal)
}

/// Runs `config` on `engines` (one per `config.engines`, by name), printing
/// to `sink`. Cancelling `cancel` stops new removals and stops `watch` (as
/// SIGTERM would: its last cycle's status); `hold` passes SIGTERM on to its
/// command.
pub async fn run_on(
    config: &Config,
    engines: Vec<Arc<dyn Engine>>,
    cancel: CancellationToken,
    sink: &mut dyn Sink,
) -> Exit {
    let end = run_with(config, engines, &Stop::new(cancel), None, sink).await;
    close(end, sink)
}

/// Serves the Model Context Protocol (`config` is an `mcp` invocation's) on
/// `read` and `write` with `engines`, until the end of input or until
/// `cancel` is cancelled (as SIGTERM would), printing the server's lines to
/// `sink`; for a program that embeds the server, and tests.
pub async fn mcp_on<R, W>(
    config: &Config,
    engines: Vec<Arc<dyn Engine>>,
    read: R,
    write: W,
    cancel: CancellationToken,
    sink: &mut dyn Sink,
) -> Exit
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let Job::Mcp { template, .. } = &config.job else {
        unreachable!("mcp_on serves an mcp invocation");
    };
    let stop = Stop::new(cancel);
    let endpoints = endpoints(config);
    let memo = Arc::new(memo_file(config).map_or_else(Default::default, Memo::read));
    let run = Run {
        config,
        engines: &engines,
        endpoints: &endpoints,
        stop: &stop,
        memo: memo.clone(),
        observer: None,
    };
    let verdict = mcp::serve(&run, template, read, write, sink).await;
    close(ended(verdict, &stop, true), sink)
}

/// One tool call of the MCP server (`config`: its CLI twin's, resolved),
/// on the server's engines and memo, with `observer` beside the run's own
/// (progress); cancelling `cancel` stops it as a Ctrl-C does (no new
/// removal, verified, reported: `interrupted`). Its exit status is the
/// twin's, by the one decision.
async fn run_tool(
    config: &Config,
    engines: Vec<Arc<dyn Engine>>,
    cancel: CancellationToken,
    memo: Arc<Memo>,
    observer: Option<&dyn crate::exec::event::Observer>,
    sink: &mut dyn Sink,
) -> Exit {
    let stop = Stop::new(cancel);
    let verdict = run_job(config, engines, &stop, None, memo.clone(), observer, sink).await;
    if let Some(path) = memo_file(config) {
        let _ = memo.write(path);
    }
    close(ended(verdict, &stop, false), sink)
}

/// Every engine of `config`, by name, with its address.
fn endpoints(config: &Config) -> Vec<(String, String)> {
    config
        .engines
        .iter()
        .map(|t| (t.name.clone(), t.endpoint.to_string()))
        .collect()
}

/// The memo file of a command that inspects containers (it reads the memo
/// and writes it back), if there is one.
fn memo_file(config: &Config) -> Option<&std::path::Path> {
    config.memo_file.as_deref().filter(|_| {
        matches!(
            config.job,
            Job::Plan { .. }
                | Job::Graph { .. }
                | Job::Converge { .. }
                | Job::ApplySaved { .. }
                | Job::Watch { .. }
                | Job::Mcp { .. }
        )
    })
}

/// The exit status of how the run ended, its closing line said on `sink`.
fn close(end: Ended, sink: &mut dyn Sink) -> Exit {
    let closing = Exit::of(&end);
    if let Some(line) = &closing.line {
        sink.err(line);
    }
    closing.exit
}

/// Runs the command of `config`, with the signal numbers `hold` passes on to
/// its command (`None`: only SIGTERM, when `stop` is cancelled); how a signal
/// stopped it is part of how it ended.
async fn run_with(
    config: &Config,
    engines: Vec<Arc<dyn Engine>>,
    stop: &Stop,
    signals: Option<UnboundedReceiver<i32>>,
    sink: &mut dyn Sink,
) -> Ended {
    let memo_file = memo_file(config);
    let memo = Arc::new(memo_file.map_or_else(Default::default, Memo::read));
    let verdict = run_job(config, engines, stop, signals, memo.clone(), None, sink).await;
    // A cache: one that cannot be written costs the next run inspections.
    if let Some(path) = memo_file {
        let _ = memo.write(path);
    }
    let lasting = matches!(config.job, Job::Watch { .. } | Job::Mcp { .. });
    ended(verdict, stop, lasting)
}

/// Runs the command of `config` with `memo` and, beside its own observers,
/// `observer`.
async fn run_job(
    config: &Config,
    engines: Vec<Arc<dyn Engine>>,
    stop: &Stop,
    signals: Option<UnboundedReceiver<i32>>,
    memo: Arc<Memo>,
    observer: Option<&dyn crate::exec::event::Observer>,
    sink: &mut dyn Sink,
) -> Verdict {
    let endpoints = endpoints(config);
    let run = Run {
        config,
        engines: &engines,
        endpoints: &endpoints,
        stop,
        memo,
        observer,
    };
    match &config.job {
        Job::Inventory { max_lease } => inventory::inventory(&run, max_lease, sink).await,
        Job::Plan {
            goal,
            detailed,
            out,
            key,
        } => {
            let out = out.as_deref().map(|path| (path, key));
            plan::plan(&run, goal, *detailed, out, sink).await
        }
        Job::Graph { goal } => graph::graph(&run, goal, sink).await,
        Job::Explain { goal, query } => explain::explain(&run, goal, query, sink).await,
        Job::Converge { .. } | Job::ApplySaved { .. } => apply::converge(&run, sink).await,
        Job::Watch { .. } => watch::watch(&run, sink).await,
        Job::Lease { .. } | Job::Release { .. } => lease::lease(&run, sink).await,
        Job::Restore { .. } => restore::restore(&run, sink).await,
        Job::Hold { .. } => hold::hold(&run, signals, sink).await,
        Job::Mcp { template, .. } => {
            // Boxed: a tool call runs a job again (never an `mcp` one).
            let serve: std::pin::Pin<Box<dyn std::future::Future<Output = Verdict> + '_>> =
                Box::pin(mcp::serve(
                    &run,
                    template,
                    tokio::io::stdin(),
                    tokio::io::stdout(),
                    sink,
                ));
            serve.await
        }
    }
}

/// How a run that came to its end ended: a Ctrl-C made it `Interrupted`, a
/// SIGTERM (a watch or the MCP server, `lasting`; or one of those cancelled
/// without a signal) `Stopped` with its last verdict, else `Done`.
fn ended(verdict: Verdict, stop: &Stop, lasting: bool) -> Ended {
    match stop.by() {
        Some(Signal::Interrupt) => Ended::Interrupted(verdict),
        Some(Signal::Terminate) => Ended::Stopped(verdict),
        None if lasting && stop.cancel.is_cancelled() => Ended::Stopped(verdict),
        None => Ended::Done(verdict),
    }
}
