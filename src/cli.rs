//! The command line: clap types, and their validation into a `Config`.
//!
//! Owns flags, environment fallbacks, help text and every check that makes an
//! invocation invalid (exit 2). Must not read the state file or reach the engine.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::apply::DEFAULT_PARALLELISM;
use crate::desired::{check_box_id, parse_label_arg};
use crate::model::Labels;
use crate::render::Format;

/// Tear down ephemeral Docker sandboxes by declarative reconciliation.
///
/// Only objects labeled exactly ca.sandbox=1 (and every scope label) are ever
/// touched; images are never removed.
#[derive(Debug, Parser)]
#[command(name = "sandboxctl", version)]
pub struct Cli {
    /// The desired-state file [default: state/sandboxes.toml, if it exists].
    #[arg(long, global = true, env = "SANDBOXCTL_STATE", value_name = "PATH")]
    pub state: Option<PathBuf>,

    /// Manage only objects that also carry this label (repeatable; added to the file's [scope]).
    #[arg(long = "scope", global = true, value_name = "KEY=VALUE", value_parser = parse_label_arg)]
    pub scope: Vec<(String, String)>,

    /// Output format.
    #[arg(long, global = true, value_enum, default_value_t = Format::Human)]
    pub format: Format,

    /// Deadline for each engine call, in seconds.
    #[arg(long, global = true, env = "SANDBOXCTL_TIMEOUT", value_name = "SECS",
          default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Subcommand)]
pub enum Command {
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
        /// Removals in flight at once.
        #[arg(long, default_value_t = DEFAULT_PARALLELISM,
              value_parser = parse_parallelism)]
        parallelism: usize,
    },
    /// Remove the named boxes (containers, and volumes unless --keep-volume);
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
        /// Removals in flight at once.
        #[arg(long, default_value_t = DEFAULT_PARALLELISM,
              value_parser = parse_parallelism)]
        parallelism: usize,
    },
    /// List the managed objects by box, with their state, and the retained images.
    Inventory,
}

/// A validated invocation.
#[derive(Debug, Clone)]
pub struct Config {
    /// `Some` when given by `--state` or `SANDBOXCTL_STATE`: then it must exist.
    pub state: Option<PathBuf>,
    /// Scope labels from `--scope`.
    pub scope: Labels,
    pub format: Format,
    pub timeout: Duration,
    pub command: Command,
}

fn parse_parallelism(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=256).contains(&n) => Ok(n),
        _ => Err(format!("expected a whole number from 1 to 256, got {s:?}")),
    }
}

impl Cli {
    /// Validates what clap alone cannot; an `Err` is a usage error (exit 2).
    pub fn into_config(self) -> Result<Config, String> {
        let mut scope = Labels::new();
        for (k, v) in self.scope {
            if let Some(old) = scope.insert(k.clone(), v.clone()) {
                if old != v {
                    return Err(format!("--scope {k} given twice, as {old:?} and {v:?}"));
                }
            }
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
        Ok(Config {
            state: self.state,
            scope,
            format: self.format,
            timeout: Duration::from_secs(self.timeout),
            command: self.command,
        })
    }
}
