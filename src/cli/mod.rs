//! The command line: clap types, and their validation into `Args` (the low
//! args; `config::resolve` makes the high ones).
//!
//! Owns flags, environment fallbacks, help text and every check that makes an
//! invocation invalid (exit 2). Must not read the state file or reach the engine.

pub mod config;
pub mod exit;
pub(crate) mod operator;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::model::Labels;
use crate::render::Format;
use crate::state::{check_box_id, parse_label_arg};

/// Tear down ephemeral Docker sandboxes by declarative reconciliation.
///
/// Only objects labeled exactly ca.sandbox=1 (and every scope label) are ever
/// touched; images are never removed.
#[derive(Debug, Parser)]
#[command(name = "sandboxctl", version)]
pub struct Cli {
    /// The desired-state file [default: state/sandboxes.toml, if it exists].
    #[arg(long, global = true, env = "SANDBOXCTL_STATE", value_name = "PATH")]
    state: Option<PathBuf>,

    /// Manage only objects that also carry this label (repeatable; added to the file's [scope]).
    #[arg(long = "scope", global = true, value_name = "KEY=VALUE", value_parser = parse_label_arg)]
    scope: Vec<(String, String)>,

    /// Output format: human or json; dot or mermaid for `graph` [default: human; dot for graph].
    #[arg(long, global = true, value_enum)]
    format: Option<Format>,

    /// The engine's address (unix://, tcp://, https://, ssh://user@host), as docker's -H.
    #[arg(short = 'H', long, global = true, value_name = "URL")]
    host: Option<String>,

    /// A saved Docker context (`docker context ls`) naming the engine.
    #[arg(long, global = true, value_name = "NAME")]
    context: Option<String>,

    /// Work on this engine of the state file's [[engine]] fleet only (repeatable).
    #[arg(long = "engine", global = true, value_name = "NAME")]
    engines: Vec<String>,

    /// Removals in flight on any one engine of a fleet [default: --parallelism].
    #[arg(long, global = true, value_name = "N", value_parser = parse_parallelism)]
    engine_parallelism: Option<usize>,

    /// Leave undeclared objects younger than this alone (30s, 10m, 8h, 2d);
    /// overrides [policy] grace. Default 0 (watch requires one).
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_duration)]
    grace: Option<Duration>,

    /// Deadline for each engine call, in seconds.
    #[arg(long, global = true, env = "SANDBOXCTL_TIMEOUT", value_name = "SECS",
          default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    timeout: u64,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Subcommand)]
pub(crate) enum Command {
    /// Show what apply would remove, kept objects and retained images; change nothing.
    Plan {
        /// Exit 0 when there is nothing to do, 2 when changes are pending, 1 on error.
        #[arg(long)]
        detailed_exitcode: bool,
        /// Also save the plan (JSON) to FILE, for `apply FILE`.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Remove every managed object the desired state does not keep, then verify.
    Apply {
        /// A plan saved by `plan --out`: carry out exactly it, or refuse if stale.
        #[arg(value_name = "PLAN_FILE")]
        plan: Option<PathBuf>,
        /// Removals in flight at once [default: 12, per engine in a fleet].
        #[arg(long, value_parser = parse_parallelism)]
        parallelism: Option<usize>,
        /// Append one JSON line per removal attempt to FILE (created 0600).
        #[arg(long, value_name = "FILE")]
        audit: Option<PathBuf>,
    },
    /// Remove the named boxes (containers and networks, and volumes unless --keep-volume);
    /// with --prune or no ID, reclaim every leaked object.
    Destroy {
        /// Box IDs (values of ca.sandbox.id).
        #[arg(value_name = "ID")]
        ids: Vec<String>,
        /// Keep the named boxes' volumes (needs at least one ID).
        #[arg(long, conflicts_with = "prune", requires = "ids")]
        keep_volume: bool,
        /// Reclaim every leaked object (the same as giving no ID).
        #[arg(long, conflicts_with = "ids")]
        prune: bool,
        /// Removals in flight at once [default: 12, per engine in a fleet].
        #[arg(long, value_parser = parse_parallelism)]
        parallelism: Option<usize>,
        /// Append one JSON line per removal attempt to FILE (created 0600).
        #[arg(long, value_name = "FILE")]
        audit: Option<PathBuf>,
    },
    /// Keep converging: reap leaks as they happen (engine events, grace and
    /// expiry deadlines, state-file changes, and a periodic resync). Needs a
    /// grace period (--grace or [policy] grace in the state file).
    Watch {
        /// Run one cycle and exit like `apply` (for cron).
        #[arg(long)]
        once: bool,
        /// How long to gather a burst of engine events before a cycle.
        #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
        debounce: Duration,
        /// A full cycle at least this often, events or not.
        #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
        resync: Duration,
        /// Serve Prometheus metrics on http://ADDR/metrics and health on /healthz.
        #[arg(long, value_name = "ADDR")]
        metrics: Option<std::net::SocketAddr>,
        /// Append one JSON line per removal attempt to FILE (created 0600).
        #[arg(long, value_name = "FILE")]
        audit: Option<PathBuf>,
        /// Removals in flight at once [default: 12, per engine in a fleet].
        #[arg(long, value_parser = parse_parallelism)]
        parallelism: Option<usize>,
    },
    /// List the managed objects by box, with their state, and the retained images.
    Inventory,
    /// Say what the plan would do with one object and why: its labels, whether
    /// it is managed, the state-file line that declares or keeps it, what it
    /// waits for and what waits for it, what blocks it.
    Explain {
        /// A container ID or prefix, a container, volume or network name
        /// (container:, volume: or network: before it narrows the kind), or box:ID.
        #[arg(value_name = "OBJECT")]
        object: String,
    },
    /// Check state files with every rule `plan` uses, without any engine call:
    /// exit 0 when all are valid, 1 with every problem (file:line:col) otherwise.
    Validate {
        /// State files [default: --state, or state/sandboxes.toml].
        #[arg(value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// Print the completion script for SHELL to standard output.
    ///
    /// Generated from these definitions; needs no engine and no state file.
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff) to standard output; view it with `sandboxctl man | man -l -`.
    ///
    /// Generated from these definitions; needs no engine and no state file.
    Man,
    /// Print the plan as a graph: `sandboxctl graph | dot -Tsvg > plan.svg`
    /// (--format dot, the default, or mermaid).
    Graph,
}

/// A validated command line, before the state file and environment are read.
#[derive(Debug, Clone)]
pub struct Args {
    /// `--engine` (repeatable).
    engines: Vec<String>,
    /// `--engine-parallelism`.
    engine_parallelism: Option<usize>,
    /// `--parallelism` of apply, destroy or watch.
    parallelism: Option<usize>,
    /// `--grace`.
    grace: Option<Duration>,
    /// `--host`.
    host: Option<String>,
    /// `--context`.
    context: Option<String>,
    /// `Some` when given by `--state` or `SANDBOXCTL_STATE`: then it must exist.
    pub(crate) state: Option<PathBuf>,
    /// Scope labels from `--scope`.
    scope: Labels,
    pub(crate) format: Format,
    timeout: Duration,
    pub(crate) command: Command,
}

/// A duration like `30s`, `10m`, `8h`, `2d` (a bare number is refused: say the unit).
fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::state::parse_duration(s)
}

fn parse_parallelism(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=256).contains(&n) => Ok(n),
        _ => Err(format!("expected a whole number from 1 to 256, got {s:?}")),
    }
}

impl Cli {
    /// Validates what clap alone cannot; an `Err` is a usage error (exit 2).
    pub fn into_args(self) -> Result<Args, String> {
        let mut scope = Labels::new();
        for (k, v) in self.scope {
            if let Some(old) = scope.insert(k.clone(), v.clone()) {
                if old != v {
                    return Err(format!("--scope {k} given twice, as {old:?} and {v:?}"));
                }
            }
        }
        let graph = matches!(self.command, Command::Graph);
        let format = self
            .format
            .unwrap_or(if graph { Format::Dot } else { Format::Human });
        match (graph, format) {
            (true, Format::Human | Format::Json) => {
                return Err("graph prints --format dot (the default) or mermaid".into())
            }
            (false, Format::Dot | Format::Mermaid) => {
                return Err(format!(
                    "--format {} is only for `graph`; use human or json",
                    if format == Format::Dot {
                        "dot"
                    } else {
                        "mermaid"
                    }
                ))
            }
            _ => {}
        }
        match &self.command {
            Command::Destroy { ids, .. } => {
                for id in ids {
                    check_box_id(id).map_err(|e| format!("box ID {id:?}: {e}"))?;
                }
            }
            Command::Apply { plan: Some(_), .. } if !scope.is_empty() => {
                return Err("a saved plan carries its own scope: drop --scope".into());
            }
            _ => {}
        }
        Ok(Args {
            engines: self.engines,
            engine_parallelism: self.engine_parallelism,
            parallelism: match &self.command {
                Command::Apply { parallelism, .. }
                | Command::Destroy { parallelism, .. }
                | Command::Watch { parallelism, .. } => *parallelism,
                _ => None,
            },
            grace: self.grace,
            host: self.host,
            context: self.context,
            state: self.state,
            scope,
            format,
            timeout: Duration::from_secs(self.timeout),
            command: self.command,
        })
    }
}
