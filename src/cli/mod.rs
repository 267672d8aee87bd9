//! The command line: clap types, and their validation into `Args` (the low
//! args; `config::resolve` makes the high ones).
//!
//! Owns flags, environment fallbacks, help text and every check that makes an
//! invocation invalid (exit 2): `parse` turns the process's words into
//! `Args`, or into a `Refused` that carries the refusal of the error
//! document when the command line asked for JSON (`refusal`). Must not read the state file or reach the engine.

pub mod config;
pub mod exit;
pub(crate) mod operator;
pub(crate) mod refusal;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand};

use crate::model::{Labels, Refusal, RefusalCode};
use crate::render::Format;
use crate::state::{check_box_id, parse_label_arg};

/// The MCP server's tools by name, in the order they are listed (what
/// `mcp --tools` takes; `run::mcp`'s tool table has exactly these).
pub(crate) const MCP_TOOLS: [&str; 6] =
    ["plan", "destroy", "prune", "inventory", "explain", "lease"];

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

    /// Deadline for each engine call that changes something (a removal, a
    /// create): 30s, 10m (a bare number is seconds), from 1s to 1h.
    #[arg(long, global = true, env = "SANDBOXCTL_TIMEOUT", value_name = "DURATION",
          default_value = "30s", value_parser = parse_engine_deadline)]
    timeout: Duration,

    /// Deadline for each engine read: the API version check when the engine
    /// is first reached, a listing, an inspect (at most --timeout; a bare
    /// number is seconds). A read that passes it fails only what depends on
    /// it; a version check that passes it fails that engine's part.
    /// [default: 5s; over ssh, --timeout: a read may open an ssh session first]
    #[arg(long, global = true, env = "SANDBOXCTL_CALL_TIMEOUT", value_name = "DURATION",
          value_parser = parse_engine_deadline)]
    call_timeout: Option<Duration>,

    #[command(subcommand)]
    command: Command,
}

/// The flags of a command that removes: how many removals at once, the
/// audit log, the archive folder, whether to measure what is reclaimed.
/// (`watch` declares its own, in the order its help shows them.)
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct Removal {
    /// Removals in flight at once [default: 12, per engine in a fleet].
    #[arg(long, value_parser = parse_parallelism)]
    pub(crate) parallelism: Option<usize>,
    /// Append one JSON line per removal attempt to FILE (created 0600).
    #[arg(long, value_name = "FILE")]
    pub(crate) audit: Option<PathBuf>,
    /// Archive each volume to DIR/<engine>/<box or _>/<volume>-<UTC time>.tar.zst
    /// (with a .json manifest) before removing it; a volume whose archive
    /// fails stays (archiveFailed, exit 1). Overrides [policy] archive.
    #[arg(long, value_name = "DIR")]
    pub(crate) archive: Option<PathBuf>,
    /// Measure what each removed container and volume gives back
    /// (reclaimedBytes): one GET /system/df per engine before the first
    /// removal, under --call-timeout; it walks every container layer and
    /// volume of the engine (about 5 s for 200 boxes: raise --call-timeout
    /// on a large engine). Without it only an archived volume is measured.
    #[arg(long)]
    pub(crate) reclaimed: bool,
}

#[derive(Debug, Clone, Subcommand)]
pub(crate) enum Command {
    /// Show what apply would remove, kept objects and retained images; change nothing.
    Plan {
        /// Exit 0 when there is nothing to do, 2 when changes are pending, 1 on error.
        #[arg(long)]
        detailed_exitcode: bool,
        /// Also save the plan (JSON) to FILE, for `apply FILE`, sealed with the
        /// user's plan key (made on first use; or SANDBOXCTL_PLAN_KEY).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Remove every managed object the desired state does not keep, then verify.
    Apply {
        /// A plan saved by `plan --out`: carry out exactly it, or refuse if
        /// stale, edited, or sealed with another key (SANDBOXCTL_PLAN_KEY).
        #[arg(value_name = "PLAN_FILE")]
        plan: Option<PathBuf>,
        /// Print the whole plan (every step with its reason, what is kept
        /// and retained) before carrying it out; without it a plan of more
        /// than 12 objects is summed up in one line, and the report names
        /// each object once, with what happened to it.
        #[arg(short = 'v', long)]
        verbose: bool,
        #[command(flatten)]
        removal: Removal,
    },
    /// Remove the named boxes (containers and networks, and volumes unless --keep-volume);
    /// with --prune or no ID, reclaim every leaked object (as `prune`).
    ///
    /// A named ID that nothing in scope carries fails the run (exit 1),
    /// unless --missing-ok, or the audit log (--audit FILE) records that box's
    /// removal: then the run says when and by what, and a retry of a
    /// teardown that worked is a success. List the boxes with `sandboxctl
    /// inventory`.
    Destroy {
        /// Box IDs (values of ca.sandbox.id).
        #[arg(value_name = "ID")]
        ids: Vec<String>,
        /// Keep the named boxes' volumes (needs at least one ID).
        #[arg(long, conflicts_with = "prune", requires = "ids")]
        keep_volume: bool,
        /// Reclaim every leaked object (the same as giving no ID, and as `prune`).
        #[arg(long, conflicts_with = "ids")]
        prune: bool,
        /// Exit 0 when a named ID matches nothing in scope (it is still said).
        #[arg(long, requires = "ids")]
        missing_ok: bool,
        /// Prune without asking, on a terminal too (see `prune`).
        #[arg(long, short = 'y', conflicts_with = "ids")]
        yes: bool,
        /// Print the whole plan (every step with its reason, what is kept
        /// and retained) before carrying it out; without it a plan of more
        /// than 12 objects is summed up in one line, and the report names
        /// each object once, with what happened to it.
        #[arg(short = 'v', long)]
        verbose: bool,
        #[command(flatten)]
        removal: Removal,
    },
    /// Reclaim every leaked object: what the state file does not declare
    /// (once older than its grace), boxes past their expiry, objects without
    /// a box label, and their leases run out; then verify. The same as
    /// `destroy --prune`, and the twin of the MCP server's `prune` tool.
    ///
    /// Without a state file (and no --scope) every box labeled ca.sandbox=1
    /// counts as leaked: the output says so first (JSON: noStateFile). On a
    /// terminal (stdin and stderr), when it would remove a running
    /// container, it first shows what will go and asks; --yes skips the
    /// question, and a "no" (or the end of input) removes nothing and exits
    /// 1. Without a terminal it does not ask.
    Prune {
        /// Do not ask, on a terminal too.
        #[arg(long, short = 'y')]
        yes: bool,
        /// Print the whole plan (every step with its reason, what is kept
        /// and retained) before carrying it out; without it a plan of more
        /// than 12 objects is summed up in one line, and the report names
        /// each object once, with what happened to it.
        #[arg(short = 'v', long)]
        verbose: bool,
        #[command(flatten)]
        removal: Removal,
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
        /// Serve Prometheus metrics on http://ADDR/metrics and health on /healthz
        /// (`sandboxctl health` asks it). ADDR is IP:PORT: use loopback
        /// (127.0.0.1:9464); any other address is warned about. At most 32
        /// connections at once (one past them is closed at once), 2 s to
        /// begin a request, 5 s to send its headers.
        #[arg(long, value_name = "ADDR", env = "SANDBOXCTL_METRICS")]
        metrics: Option<std::net::SocketAddr>,
        /// Append one JSON line per removal attempt to FILE (created 0600).
        #[arg(long, value_name = "FILE")]
        audit: Option<PathBuf>,
        /// Removals in flight at once [default: 12, per engine in a fleet].
        #[arg(long, value_parser = parse_parallelism)]
        parallelism: Option<usize>,
        /// Archive each volume to DIR/<engine>/<box or _>/<volume>-<UTC time>.tar.zst
        /// (with a .json manifest) before removing it; a volume whose archive
        /// fails stays (archiveFailed, exit 1). Overrides [policy] archive.
        #[arg(long, value_name = "DIR")]
        archive: Option<PathBuf>,
        /// Measure what each removed container and volume gives back
        /// (reclaimedBytes): one GET /system/df per engine before a cycle's
        /// first removal, under --call-timeout; it walks every container
        /// layer and volume of the engine (about 5 s for 200 boxes: raise
        /// --call-timeout on a large engine). Without it only an archived
        /// volume is measured.
        #[arg(long)]
        reclaimed: bool,
    },
    /// Restore a volume from an archive that --archive wrote.
    ///
    /// Reads the manifest beside ARCHIVE (X.tar.zst -> X.json) and checks the
    /// archive's SHA-256 against it first; refuses if the volume exists;
    /// creates it with the archived volume's labels; fills it through a
    /// helper container (never started, made from a present ca-sbx:* image,
    /// labeled ca.sandbox.role=archive-helper, removed after); checks the
    /// entries and bytes put back against the manifest.
    ///
    /// The restored volume keeps its ca.sandbox labels, so it stays
    /// reclaimable by label alone: the next apply removes it unless it is
    /// declared. restore prints what to declare ([volumes] keep, or the box).
    /// Needs exactly one engine (pick one with --engine NAME).
    Restore {
        /// The archive (.tar.zst) with its manifest (.json) beside it.
        #[arg(value_name = "ARCHIVE")]
        archive: PathBuf,
        /// Restore into this volume name [default: the archived volume's].
        #[arg(long, value_name = "NAME")]
        volume: Option<String>,
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
    /// Ask a running watch's /healthz (`watch --metrics ADDR`): exit 0 when it
    /// answers 200 (its cycles converge, or it is degraded and still reaping),
    /// 1 otherwise (503, no answer within --deadline, nothing listening).
    ///
    /// For a container's HEALTHCHECK: needs no shell, no curl, no engine and no
    /// state file. One line on stdout says what the watch answered. A
    /// connection the endpoint closes unanswered (past its connection cap) is
    /// tried again until the deadline. Exit 2: an invalid invocation (no ADDR
    /// and no SANDBOXCTL_METRICS, a bad address or deadline).
    Health {
        /// The watch's metrics address, IP:PORT (the image sets
        /// SANDBOXCTL_METRICS=127.0.0.1:9464, which watch serves too).
        #[arg(value_name = "ADDR", env = "SANDBOXCTL_METRICS")]
        addr: std::net::SocketAddr,
        /// How long to wait for the whole answer (over zero).
        #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_deadline)]
        deadline: Duration,
    },
    /// Print the plan as a graph: `sandboxctl graph | dot -Tsvg > plan.svg`
    /// (--format dot, the default, or mermaid).
    Graph,
    /// Take or renew the lease of each box, or release them (--release): an
    /// undeclared box with a lease that holds is kept by apply, destroy
    /// --prune and watch (destroy BOX still removes it).
    ///
    /// A lease is a managed volume of the box, ca-sbx-lease-BOX-SUFFIX,
    /// labeled ca.sandbox=1, the scope labels, ca.sandbox.id=BOX and
    /// ca.sandbox.lease.ttl=TTL. It holds until the engine's creation time
    /// plus the ttl, on the engine's clock. Taking a lease creates a new one,
    /// then removes the box's leases that run out before it (those that hold
    /// at least as long are kept); it needs exactly one engine (with several
    /// [[engine]] tables, pick one with --engine NAME). --release removes
    /// every lease of each box, on every engine of the run. Only volumes
    /// carrying ca.sandbox=1, every scope label, exactly ca.sandbox.id=BOX and
    /// a lease label are ever removed. Prints each lease and until when it
    /// holds (--format json: one document). Exit 0 when every box is done,
    /// 1 when anything failed (named, with its engine).
    Lease {
        /// Box IDs (values of ca.sandbox.id).
        #[arg(value_name = "BOX", required = true)]
        boxes: Vec<String>,
        /// How long the lease holds (at most [policy] max_lease, default 24h).
        #[arg(long, value_name = "DURATION", default_value = "15m",
              value_parser = parse_duration, conflicts_with = "release")]
        ttl: Duration,
        /// Remove every lease of the boxes instead of taking one.
        #[arg(long)]
        release: bool,
    },
    /// Serve the Model Context Protocol on stdin and stdout, for an agent host.
    ///
    /// Tools: plan, destroy, prune, inventory, explain and lease, each the
    /// twin of the command of that name with --format json: the tool's
    /// structured result is that JSON, and a call whose command would exit
    /// non-zero is an error result with the whole report. The engines, the
    /// scope and the state file are fixed when the server starts (these
    /// flags, the environment, the state file); no tool argument can change
    /// them. A cancelled call stops starting removals, verifies and answers
    /// with its report, as Ctrl-C does. stdout carries only the protocol; a
    /// line per call goes to stderr. Ends on EOF, SIGTERM or Ctrl-C once the
    /// calls in flight are verified and answered.
    ///
    /// --read-only offers only the tools that change nothing (plan,
    /// inventory, explain); --tools NAME,... offers exactly those. A call to
    /// a tool not offered is refused as the protocol refuses an unknown tool.
    Mcp {
        #[command(flatten)]
        removal: Removal,
        /// Offer only the tools that change nothing: plan, inventory, explain.
        #[arg(long, conflicts_with = "tools")]
        read_only: bool,
        /// Offer exactly these tools (comma-separated) [default: every tool].
        #[arg(long, value_name = "TOOL,...", value_delimiter = ',', num_args = 1..,
              value_parser = clap::builder::PossibleValuesParser::new(MCP_TOOLS))]
        tools: Vec<String>,
    },
    /// Hold a box with a lease while COMMAND runs, then release it and exit
    /// with COMMAND's status.
    ///
    /// Takes a lease (as `lease BOX --ttl TTL`, without removing any other
    /// lease), runs COMMAND with this terminal's stdin, stdout and stderr,
    /// renews the lease every ttl/3 while it runs (the next lease, then the
    /// previous one removed), and when COMMAND ends removes the leases it
    /// made. A failed renewal is said on stderr and tried again at the next
    /// renewal; COMMAND is never stopped. SIGINT and SIGTERM sent to hold
    /// are passed to COMMAND, and hold waits for it to end. Needs exactly one
    /// engine (pick one with --engine NAME). hold's own messages go to
    /// stderr (--format json: one JSON object per line). Exit: COMMAND's
    /// status (128+N when signal N ended it, 127 when it was not found, 126
    /// when it could not be run); 1 without running COMMAND when the lease
    /// cannot be taken; 1 when COMMAND succeeded but a lease could not be
    /// released (it is named; it holds nothing once it runs out).
    Hold {
        /// The box ID (value of ca.sandbox.id).
        #[arg(value_name = "BOX")]
        box_id: String,
        /// How long each lease holds; renewed every third of it.
        #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = parse_duration)]
        ttl: Duration,
        /// The command to run, after `--`.
        #[arg(value_name = "COMMAND", last = true, required = true, num_args = 1..,
              value_parser = clap::value_parser!(std::ffi::OsString))]
        command: Vec<std::ffi::OsString>,
    },
}

impl Command {
    /// The box IDs `destroy` names (none for any other command).
    pub(crate) fn named_ids(&self) -> &[String] {
        match self {
            Command::Destroy { ids, .. } => ids,
            _ => &[],
        }
    }

    /// `-v`/`--verbose` given to apply, destroy or prune (false for any
    /// other command).
    pub(crate) fn verbose(&self) -> bool {
        match self {
            Command::Apply { verbose, .. }
            | Command::Destroy { verbose, .. }
            | Command::Prune { verbose, .. } => *verbose,
            _ => false,
        }
    }

    /// The `--parallelism`, `--audit`, `--archive` and `--reclaimed` given
    /// to apply, destroy or watch (none for any other command).
    pub(crate) fn removal(&self) -> Removal {
        match self {
            Command::Apply { removal, .. }
            | Command::Destroy { removal, .. }
            | Command::Prune { removal, .. }
            | Command::Mcp { removal, .. } => removal.clone(),
            Command::Watch {
                parallelism,
                audit,
                archive,
                reclaimed,
                ..
            } => Removal {
                parallelism: *parallelism,
                audit: audit.clone(),
                archive: archive.clone(),
                reclaimed: *reclaimed,
            },
            _ => Removal::default(),
        }
    }
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
    call_timeout: Option<Duration>,
    /// True when a person is at a terminal (stdin and stderr are ttys):
    /// set only by the process's own run (`at_terminal`), never for a tool
    /// call, a test or a program that embeds the run.
    pub(crate) terminal: bool,
    pub(crate) command: Command,
}

impl Args {
    /// The invocation a tool call of `mcp` stands for: this one's global
    /// flags (engines, scope, state file, deadlines) and its `--audit`,
    /// `--archive` and `--parallelism`, with `command` in place of `mcp`
    /// and JSON output. Only box IDs and the like come from the call.
    pub(crate) fn for_tool(&self, command: Command) -> Args {
        Args {
            format: Format::Json,
            command,
            terminal: false,
            ..self.clone()
        }
    }

    /// This invocation, knowing whether a person is at a terminal (a prune
    /// that would remove a running container asks first there).
    pub(crate) fn at_terminal(self, terminal: bool) -> Args {
        Args { terminal, ..self }
    }

    /// `mcp`'s `--audit`, `--archive` and `--parallelism` (the removal
    /// flags of every tool call).
    pub(crate) fn removal(&self) -> Removal {
        self.command.removal()
    }
}

/// A duration of the one grammar (`model::duration`: `30s`, `10m`, `8h`,
/// `2d`, `1h30m`), the state file's; on the command line a bare number is
/// seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::state::parse_flag_duration(s)
}

/// `--timeout` and `--call-timeout`: a duration from 1s to 1h (bollard
/// counts whole seconds; a deadline of zero would fail every call).
fn parse_engine_deadline(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() || d > Duration::from_secs(3600) => Err(format!(
            "{} is not a deadline from 1s to 1h: use e.g. 30s, 2m or 1h",
            humantime::format_duration(d)
        )),
        d => Ok(d),
    }
}

/// A lease's ttl: whole seconds, over zero (the ceiling, `[policy]
/// max_lease`, is the state file's: `config::resolve` checks it).
pub(crate) fn check_ttl(ttl: Duration) -> Result<(), String> {
    if ttl.is_zero() {
        return Err("--ttl 0s: a lease must hold for some time; give e.g. --ttl 15m".into());
    }
    if ttl.subsec_nanos() != 0 {
        return Err(format!(
            "--ttl {}: a lease holds for whole seconds; give e.g. --ttl 90s",
            humantime::format_duration(ttl)
        ));
    }
    Ok(())
}

/// `health --deadline`: a duration over zero.
fn parse_deadline(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        d if d.is_zero() => {
            Err("a deadline of 0s leaves the watch no time to answer; give e.g. 5s".into())
        }
        d => Ok(d),
    }
}

fn parse_parallelism(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=256).contains(&n) => Ok(n),
        _ => Err(format!("expected a whole number from 1 to 256, got {s:?}")),
    }
}

impl Cli {
    /// Validates what clap alone cannot; an `Err` is a usage error (exit 2).
    pub fn into_args(self) -> Result<Args, Invalid> {
        let mut scope = Labels::new();
        for (k, v) in self.scope {
            if let Some(old) = scope.insert(k.clone(), v.clone()) {
                if old != v {
                    return Err(Invalid::conflict(format!(
                        "--scope {k} given twice, as {old:?} and {v:?}"
                    )));
                }
            }
        }
        let graph = matches!(self.command, Command::Graph);
        let format = self
            .format
            .unwrap_or(if graph { Format::Dot } else { Format::Human });
        match (graph, format) {
            (true, Format::Human | Format::Json) => {
                return Err(Invalid::value(
                    "graph prints --format dot (the default) or mermaid",
                ))
            }
            (false, Format::Dot | Format::Mermaid) => {
                return Err(Invalid::value(format!(
                    "--format {} is only for `graph`; use human or json",
                    if format == Format::Dot {
                        "dot"
                    } else {
                        "mermaid"
                    }
                )))
            }
            _ => {}
        }
        match &self.command {
            Command::Destroy { ids, .. } => {
                for id in ids {
                    check_box_id(id).map_err(|e| {
                        Invalid::box_id(format!("box ID {id:?}: {e}; no box can carry it as its ID, but a leaked object labeled with it is reclaimed by `sandboxctl prune` (or `destroy --prune`): see what would go with `sandboxctl plan`"))
                    })?;
                }
            }
            Command::Lease { boxes: ids, .. } => {
                for id in ids {
                    check_box_id(id).map_err(|e| Invalid::box_id(format!("box ID {id:?}: {e}")))?;
                }
            }
            Command::Hold { box_id, .. } => {
                check_box_id(box_id)
                    .map_err(|e| Invalid::box_id(format!("box ID {box_id:?}: {e}")))?;
            }
            _ => {}
        }
        match &self.command {
            Command::Lease {
                ttl,
                release: false,
                ..
            }
            | Command::Hold { ttl, .. } => check_ttl(*ttl).map_err(Invalid::value)?,
            Command::Apply { plan: Some(_), .. } if !scope.is_empty() => {
                return Err(Invalid::conflict(
                    "a saved plan carries its own scope: drop --scope",
                ));
            }
            Command::Apply {
                plan: Some(_),
                removal: Removal {
                    archive: Some(_), ..
                },
                ..
            } => {
                return Err(Invalid::conflict(
                    "a saved plan carries its own archive setting: drop --archive (or plan with [policy] archive)",
                ));
            }
            Command::Restore {
                volume: Some(name), ..
            } => {
                crate::state::check_volume_name(name).map_err(|e| Invalid {
                    code: RefusalCode::InvalidVolumeName,
                    message: format!("--volume {name:?}: {e}"),
                })?;
            }
            _ => {}
        }
        Ok(Args {
            engines: self.engines,
            engine_parallelism: self.engine_parallelism,
            parallelism: self.command.removal().parallelism,
            grace: self.grace,
            host: self.host,
            context: self.context,
            state: self.state,
            scope,
            format,
            timeout: self.timeout,
            call_timeout: self.call_timeout.map(|c| c.min(self.timeout)),
            terminal: false,
            command: self.command,
        })
    }
}

/// A command line clap accepted and [`Cli::into_args`] refused (exit 2):
/// what kind of refusal, and its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    code: RefusalCode,
    message: String,
}

impl Invalid {
    fn value(message: impl Into<String>) -> Invalid {
        Invalid {
            code: RefusalCode::InvalidValue,
            message: message.into(),
        }
    }

    fn conflict(message: impl Into<String>) -> Invalid {
        Invalid {
            code: RefusalCode::ConflictingArguments,
            message: message.into(),
        }
    }

    fn box_id(message: String) -> Invalid {
        Invalid {
            code: RefusalCode::InvalidBoxId,
            message,
        }
    }
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Invalid {}

/// A command line refused before it ran: clap's error (what it says, on
/// stderr, and the exit status, 2; `--help` and `--version` are "errors"
/// that print on stdout and exit 0), and, when the command line asked for
/// `--format json`, the refusal its error document says on stdout.
#[derive(Debug)]
pub struct Refused {
    pub(crate) error: clap::Error,
    pub(crate) json: Option<Refusal>,
}

/// The command line (`raw`: the program's name first) parsed by clap and
/// checked by [`Cli::into_args`], or why it was refused.
pub fn parse(raw: Vec<OsString>) -> Result<Args, Refused> {
    let cli = match Cli::try_parse_from(&raw) {
        Ok(cli) => cli,
        Err(error) => {
            let json = refusal::asks_for_json(&raw)
                .then(|| refusal::of_clap(&error))
                .flatten();
            return Err(Refused { error, json });
        }
    };
    let json = cli
        .format
        .is_some_and(|format| refusal::documented(format, &cli.command));
    cli.into_args().map_err(|invalid| Refused {
        json: json.then(|| Refusal::new(invalid.code, invalid.message.clone())),
        error: Cli::command().error(clap::error::ErrorKind::ValueValidation, invalid.message),
    })
}
