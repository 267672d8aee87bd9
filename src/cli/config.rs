//! The invocation resolved once (ripgrep's low args -> high args): the state
//! file loaded, scopes merged, the goal built, the output mode and the clock
//! decided, before any engine call.
//!
//! Owns every decision that depends on flags, environment and the state file
//! together. Must not reach the engine; after `resolve`, nothing looks at
//! flags or the environment again.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::cli::{Args, Command, Removal};
use crate::engine::endpoint::{Endpoint, EndpointInput};
use crate::exec::seal::KeySource;
use crate::model::{Labels, Scope};
use crate::plan::{ArchivePolicy, DeclaredBox, Goal, KeptVolume};
use crate::render::Format;
use crate::state::{DesiredState, Expiry, DEFAULT_STATE_PATH};

/// What to do, fully resolved.
#[derive(Debug, Clone)]
pub(crate) enum Job {
    /// Show the plan; save it to `out`, sealed with the key at `key`; exit 2
    /// on pending changes when `detailed`.
    Plan {
        goal: Goal,
        detailed: bool,
        out: Option<PathBuf>,
        key: KeySource,
    },
    /// Plan afresh and carry it out (`apply`, `destroy`, `prune`).
    Converge { goal: Goal, target: Target },
    /// Carry out a saved plan, its seal opened with the key at `key`.
    ApplySaved { path: PathBuf, key: KeySource },
    /// List the managed objects (and judge their leases under `max_lease`).
    Inventory { max_lease: Option<u64> },
    /// Explain what the plan does with an object.
    Explain { goal: Goal, query: String },
    /// Print the plan as a graph.
    Graph { goal: Goal },
    /// Keep converging.
    Watch {
        goal: Goal,
        once: bool,
        debounce: Duration,
        resync: Duration,
        metrics: Option<std::net::SocketAddr>,
        /// `--scope`, merged again with the file's scope when it changes.
        cli_scope: Labels,
        /// `--grace`, or the file's, when the watch started.
        grace: Option<Duration>,
        /// `--archive`, over the file's `[policy] archive` when it changes.
        archive: Option<PathBuf>,
    },
    /// Restore a volume from an archive (one engine).
    Restore {
        archive: PathBuf,
        volume: Option<String>,
    },
    /// Take or renew a lease of each box (one engine).
    Lease {
        boxes: Vec<String>,
        /// Seconds, over 0 and at most `max_lease`.
        ttl: u64,
        /// `[policy] max_lease` (seconds), what older leases are read with.
        max_lease: u64,
    },
    /// Remove every lease of each box, on every engine.
    Release { boxes: Vec<String> },
    /// Serve the Model Context Protocol: each tool call is `template` with
    /// the tool's command in place of `mcp`, resolved when it comes (the
    /// clock, the state file's boxes), its engines and scope checked
    /// against the server's.
    Mcp {
        template: Box<Args>,
        /// The tools the server offers (`--read-only`, `--tools`).
        tools: McpTools,
    },
    /// Hold a box with a lease while a command runs (one engine).
    Hold {
        box_id: String,
        /// Seconds, over 0 and at most `max_lease`.
        ttl: u64,
        max_lease: u64,
        /// The program and its arguments (never empty).
        command: Vec<std::ffi::OsString>,
    },
}

/// The tools an MCP server offers, decided when it starts: every one,
/// those whose `readOnlyHint` is true, or exactly the named ones (names
/// clap checked against `MCP_TOOLS`; each once, in the order given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTools {
    All,
    ReadOnly,
    Named(Vec<String>),
}

impl McpTools {
    fn of(read_only: bool, names: Vec<String>) -> McpTools {
        if read_only {
            return McpTools::ReadOnly;
        }
        if names.is_empty() {
            return McpTools::All;
        }
        let mut once: Vec<String> = Vec::with_capacity(names.len());
        for name in names {
            if !once.contains(&name) {
                once.push(name);
            }
        }
        McpTools::Named(once)
    }
}

/// What a converging run was told to remove: resolved once, here, from the
/// box IDs (an empty list and no ID alike), `--prune` and the command, then
/// judged like any other input. Nothing maps onto something wider than it
/// was given: the MCP `destroy` tool refuses an empty `ids` before a
/// `Target` is made (`run::mcp::args`), and only `prune`, `destroy
/// --prune` and the CLI's `destroy` with no ID are `Prune`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// `apply`: what the state file does not declare.
    State,
    /// `destroy ID...`: exactly these boxes. An ID that nothing in scope
    /// carries fails the run unless `missing_ok`, or the audit log
    /// records its removal.
    Boxes { ids: Vec<String>, missing_ok: bool },
    /// `prune`, `destroy --prune`, `destroy` with no ID: every leaked object.
    Prune {
        /// No state file was found and no `--scope` given: every box
        /// labeled `ca.sandbox=1` counts as leaked (said first, and in the JSON).
        no_state_file: bool,
        /// A person is at the terminal and `--yes` was not given: a prune
        /// that would remove a running container asks first.
        ask: bool,
    },
}

/// One invocation, resolved.
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) job: Job,
    /// The state file the goal came from, for messages (`path:line`).
    pub(crate) state: Option<PathBuf>,
    pub(crate) scope: Scope,
    pub(crate) format: Format,
    /// The engines of this run, never empty (a single engine is a fleet of
    /// one): the state file's `[[engine]]` tables narrowed by `--engine`, or
    /// else the one engine resolved as the docker CLI does (flags,
    /// DOCKER_HOST, DOCKER_CONTEXT, the config file's current context, the
    /// default socket), named `default`.
    pub(crate) engines: Vec<EngineTarget>,
    /// True when the state file names the engines (`[[engine]]`): the output
    /// is laid out per engine, even for one.
    pub(crate) fleet: bool,
    /// Removals in flight on any one engine of a fleet.
    pub(crate) engine_parallelism: usize,
    pub(crate) timeout: Duration,
    /// `--call-timeout`: each read's deadline (at most `timeout`); `None`:
    /// the engine's default (see `DockerEngine::connect`).
    pub(crate) call_timeout: Option<Duration>,
    pub(crate) parallelism: usize,
    /// `--audit FILE`.
    pub(crate) audit: Option<PathBuf>,
    /// `--reclaimed`: measure what the removals give back.
    pub(crate) reclaimed: bool,
    /// `-v`/`--verbose` (apply, destroy, prune): the whole plan is printed
    /// before it is carried out, however long (decision 24).
    pub(crate) verbose: bool,
    /// The clock, read once: plans are judged at this time (Unix seconds).
    pub(crate) now: i64,
    /// The memo of inspections kept across runs (`exec::memo`), in the
    /// state folder; `None`: no folder (neither an absolute `XDG_STATE_HOME`
    /// nor `HOME`), each run inspects afresh.
    pub(crate) memo_file: Option<PathBuf>,
    /// `[[notify]]`, each key read from its variable: for the commands that
    /// remove (apply, destroy, prune, watch); empty for the others.
    pub(crate) notify: Vec<crate::model::notify::Receiver>,
}

/// One engine of a fleet: its name in the state file and where it is.
#[derive(Debug, Clone)]
pub(crate) struct EngineTarget {
    pub(crate) name: String,
    pub(crate) endpoint: Endpoint,
}

/// Errors of resolving an invocation that are not the state file's own.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigError {
    /// `plan` and `apply` need a state file and none was found at the default path.
    #[error("no state file at {DEFAULT_STATE_PATH}; pass --state PATH (or set SANDBOXCTL_STATE), or use `destroy --prune` to reclaim every leaked object")]
    NoStateFile,
    /// `--engine` names an engine the state file does not declare.
    #[error("--engine {name}: the state file {} declares no such engine (it declares: {}); name one of those", path.display(), declared.join(", "))]
    UnknownEngine {
        name: String,
        declared: Vec<String>,
        path: PathBuf,
    },
    /// `--engine` without `[[engine]]` in the state file.
    #[error("--engine {name}: the state file declares no [[engine]] table; --engine narrows a fleet the state file names (use --host or --context to choose one engine)")]
    NoFleet { name: String },
    /// `--host`/`--context` with `[[engine]]` in the state file.
    #[error("--host and --context choose one engine, but the state file {} names a fleet with [[engine]]; use --engine NAME to narrow it", path.display())]
    FleetAndHost { path: PathBuf },
    /// `watch` without a grace period would reap every box seconds after its creation.
    #[error("watch needs a grace period: pass --grace 10m or set [policy] grace = \"10m\" in the state file, so that a box is not reaped before its driver declares it")]
    WatchNeedsGrace,
    /// `lease` or `hold` asked for a ttl over `[policy] max_lease`.
    #[error("--ttl {}: a lease may hold at most {} ([policy] max_lease{}); give a shorter --ttl", crate::model::lease::words(*ttl), crate::model::lease::words(*max_lease), match path { Some(p) => format!(" in {}", p.display()), None => ", the default".to_string() })]
    TtlOverMax {
        ttl: u64,
        max_lease: u64,
        /// The state file that set the ceiling (none: the default).
        path: Option<PathBuf>,
    },
    /// Taking a lease on several engines: a box lives on one.
    #[error("`{command}` takes a lease on exactly one engine, but this run has {}: {}; pick one with --engine NAME", engines.len(), engines.join(", "))]
    OneEngine {
        command: &'static str,
        engines: Vec<String>,
    },
    /// A `[[notify]]` receiver's `secret_env` names a variable that is not
    /// set (or is empty) for a command that notifies.
    #[error("{var} is not set (or is empty), but the [[notify]] receiver at {}:{line} reads its HMAC key from it; set {var} to the key the receiver checks signatures with, or remove that [[notify]] table", path.display())]
    NotifySecretMissing {
        var: String,
        path: PathBuf,
        line: usize,
    },
    /// The same scope label has different values in the file and on the command line.
    #[error("scope label {key} is {file:?} in {} but {cli:?} on the command line; make them agree", path.display())]
    ScopeConflict {
        key: String,
        file: String,
        cli: String,
        path: PathBuf,
    },
}

/// The time now, as Unix seconds.
pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

/// The time of a log line (watch, hold, a signal's note): now, RFC 3339.
pub(crate) fn log_time() -> String {
    crate::plan::rfc3339(now())
}

impl Config {
    /// This config with `state` as the state folder's parent in place of
    /// the one `XDG_STATE_HOME` or `HOME` gave: the plan key's (unless
    /// `SANDBOXCTL_PLAN_KEY` gives it) and the memo of inspections'. For a
    /// program that embeds the run, or a test that keeps its runs apart.
    pub fn with_state_folder(mut self, state: PathBuf) -> Config {
        self.memo_file = crate::exec::memo::path_in(Some(state.clone()));
        if let Job::Plan { key, .. } | Job::ApplySaved { key, .. } = &mut self.job {
            if !matches!(key, KeySource::Variable(_)) {
                *key = KeySource::resolve(None, Some(state.into()), None);
            }
        }
        self
    }

    /// This config without a memo of inspections: every container is
    /// inspected afresh, and nothing is kept for later runs.
    pub fn without_memo(mut self) -> Config {
        self.memo_file = None;
        self
    }
}

/// Resolves the command line into a `Config`: loads the state file (required
/// for `plan` and `apply`), merges `--scope` into the file's scope, builds the
/// goal, reads `DOCKER_HOST` and the clock.
pub fn resolve(args: Args) -> anyhow::Result<Config> {
    let required = matches!(
        args.command,
        Command::Plan { .. }
            | Command::Watch { .. }
            | Command::Apply { plan: None, .. }
            | Command::Explain { .. }
            | Command::Graph
    );
    let saved = matches!(args.command, Command::Apply { plan: Some(_), .. });
    let template = matches!(args.command, Command::Mcp { .. }).then(|| Box::new(args.clone()));
    // A saved plan carries its own goal and scope; the state file, if any,
    // still names the fleet's engines.
    let desired = DesiredState::load_or_default(args.state.as_deref())?;
    if required && desired.source.is_none() {
        return Err(ConfigError::NoStateFile.into());
    }
    let scope = if saved {
        Scope::default()
    } else {
        scope_of(&args.scope, &desired)?
    };
    let declared = fleet_of(&args, &desired)?;
    let fleet = !declared.is_empty();
    let engines = if fleet {
        declared
    } else {
        vec![EngineTarget {
            name: crate::model::DEFAULT_ENGINE.to_string(),
            endpoint: crate::engine::endpoint::resolve(&EndpointInput::from_process(
                args.context.clone(),
                args.host.clone(),
            ))?,
        }]
    };
    let Removal {
        audit,
        archive: archive_flag,
        reclaimed,
        ..
    } = args.command.removal();
    let archive = archive_policy(archive_flag.as_deref(), &desired);
    let verbose = args.command.verbose();
    // --grace over the file's [policy] grace; none means 0 (watch requires one).
    let grace = args.grace.or(desired.policy.grace);
    if matches!(args.command, Command::Watch { .. }) && grace.is_none() {
        return Err(ConfigError::WatchNeedsGrace.into());
    }
    let job = match args.command {
        Command::Plan {
            detailed_exitcode,
            out,
        } => Job::Plan {
            goal: reconcile(&desired, grace),
            detailed: detailed_exitcode,
            out,
            key: KeySource::from_process(),
        },
        Command::Apply {
            plan: Some(path), ..
        } => Job::ApplySaved {
            path,
            key: KeySource::from_process(),
        },
        Command::Apply { plan: None, .. } => Job::Converge {
            goal: reconcile(&desired, grace).with_archive(archive),
            target: Target::State,
        },
        // The seed's contract: `destroy` with no ID is a prune.
        Command::Prune { yes, .. } | Command::Destroy { yes, .. }
            if args.command.named_ids().is_empty() =>
        {
            Job::Converge {
                goal: reconcile(&desired, grace).with_archive(archive),
                target: Target::Prune {
                    no_state_file: desired.source.is_none() && args.scope.is_empty(),
                    ask: args.terminal && !yes,
                },
            }
        }
        Command::Prune { .. } => unreachable!("prune names no box ID"),
        Command::Destroy {
            ids,
            keep_volume,
            missing_ok,
            ..
        } => Job::Converge {
            goal: Goal::Destroy {
                ids: ids.iter().cloned().collect(),
                keep_volume,
                keep_volumes: kept_volumes(&desired),
                max_lease: desired.policy.max_lease.map(|d| d.as_secs()),
                archive,
            },
            target: Target::Boxes {
                ids: distinct(ids),
                missing_ok,
            },
        },
        Command::Inventory => Job::Inventory {
            max_lease: desired.policy.max_lease.map(|d| d.as_secs()),
        },
        Command::Watch {
            once,
            debounce,
            resync,
            metrics,
            ..
        } => Job::Watch {
            goal: reconcile(&desired, grace).with_archive(archive),
            once,
            debounce,
            resync,
            metrics,
            cli_scope: args.scope.clone(),
            grace,
            archive: archive_flag,
        },
        Command::Restore { archive, volume } => {
            one_engine("restore", &engines)?;
            Job::Restore { archive, volume }
        }
        Command::Mcp {
            read_only, tools, ..
        } => Job::Mcp {
            template: template.expect("the template of an mcp invocation"),
            tools: McpTools::of(read_only, tools),
        },
        Command::Completions { .. }
        | Command::Man
        | Command::Validate { .. }
        | Command::Health { .. } => {
            unreachable!("run answers completions, man, validate and health before resolving")
        }
        Command::Explain { object } => Job::Explain {
            goal: reconcile(&desired, grace),
            query: object,
        },
        Command::Graph => Job::Graph {
            goal: reconcile(&desired, grace),
        },
        Command::Lease {
            boxes,
            release: true,
            ..
        } => Job::Release {
            boxes: distinct(boxes),
        },
        Command::Lease { boxes, ttl, .. } => {
            let (ttl, max_lease) = lease_ttl(ttl, &desired)?;
            one_engine("lease", &engines)?;
            Job::Lease {
                boxes: distinct(boxes),
                ttl,
                max_lease,
            }
        }
        Command::Hold {
            box_id,
            ttl,
            command,
        } => {
            let (ttl, max_lease) = lease_ttl(ttl, &desired)?;
            one_engine("hold", &engines)?;
            Job::Hold {
                box_id,
                ttl,
                max_lease,
                command,
            }
        }
    };
    // The receivers' keys, read once, before any engine call: only the
    // commands that remove notify.
    let notifies = matches!(
        job,
        Job::Converge { .. } | Job::ApplySaved { .. } | Job::Watch { .. }
    );
    let notify = if notifies {
        receivers(&desired, |var| std::env::var_os(var))?
    } else {
        Vec::new()
    };
    // Without --parallelism, a fleet gets the default budget per engine.
    let parallelism = args
        .parallelism
        .unwrap_or(crate::exec::apply::DEFAULT_PARALLELISM * engines.len());
    let engine_parallelism = args
        .engine_parallelism
        .unwrap_or(crate::exec::apply::DEFAULT_PARALLELISM)
        .min(parallelism);
    Ok(Config {
        job,
        engines,
        fleet,
        engine_parallelism,
        state: desired.source.clone(),
        scope,
        format: args.format,
        timeout: args.timeout,
        call_timeout: args.call_timeout,
        parallelism,
        audit,
        reclaimed,
        verbose,
        now: now(),
        memo_file: crate::exec::memo::path_in(crate::exec::files::state_folder(
            std::env::var_os("XDG_STATE_HOME"),
            std::env::var_os("HOME"),
        )),
        notify,
    })
}

/// The state file's `[[notify]]` receivers, each key read from its
/// variable (`var`: the environment); a variable that is not set or is
/// empty refuses the run, naming it and the table.
fn receivers(
    desired: &DesiredState,
    var: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<Vec<crate::model::notify::Receiver>, ConfigError> {
    use std::os::unix::ffi::OsStringExt;
    desired
        .notify
        .iter()
        .map(|n| {
            let key = var(&n.secret_env)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| ConfigError::NotifySecretMissing {
                    var: n.secret_env.clone(),
                    path: desired.source.clone().unwrap_or_default(),
                    line: n.line,
                })?;
            Ok(crate::model::notify::Receiver {
                url: n.url.clone(),
                secret_env: n.secret_env.clone(),
                secret: crate::model::notify::Secret::new(key.into_vec()),
                events: n.events.clone(),
                before: n.before,
            })
        })
        .collect()
}

/// `--ttl` in seconds, and the ceiling it was checked against (`[policy]
/// max_lease`, or 24 hours). The CLI already refused zero and fractions.
fn lease_ttl(ttl: Duration, desired: &DesiredState) -> Result<(u64, u64), ConfigError> {
    let max_lease = desired
        .policy
        .max_lease
        .map_or(crate::model::lease::DEFAULT_MAX_LEASE, |d| d.as_secs());
    let secs = ttl.as_secs();
    if secs > max_lease {
        return Err(ConfigError::TtlOverMax {
            ttl: secs,
            max_lease,
            path: desired.policy.max_lease.and(desired.source.clone()),
        });
    }
    Ok((secs, max_lease))
}

/// Taking a lease needs exactly one engine.
fn one_engine(command: &'static str, engines: &[EngineTarget]) -> Result<(), ConfigError> {
    if engines.len() == 1 {
        return Ok(());
    }
    Err(ConfigError::OneEngine {
        command,
        engines: engines.iter().map(|e| e.name.clone()).collect(),
    })
}

/// Box IDs in the order given, each once.
fn distinct(ids: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    ids.into_iter()
        .filter(|id| seen.insert(id.clone()))
        .collect()
}

/// Whether and where volumes are archived: `--archive DIR`, else the
/// file's `[policy] archive`; the boxes and `volumes.keep` entries that say
/// `archive = false` go without one.
pub(crate) fn archive_policy(
    flag: Option<&std::path::Path>,
    desired: &DesiredState,
) -> Option<ArchivePolicy> {
    let dir = flag.or(desired.policy.archive.as_deref())?;
    let mut policy = ArchivePolicy::new(&dir.to_string_lossy());
    policy.skip_boxes = unarchived(&desired.boxes, |b| (b.archive, &b.id));
    policy.skip_volumes = unarchived(&desired.keep_volumes, |k| (k.archive, &k.name));
    Some(policy)
}

/// The names of the `entries` that say `archive = false` (`setting` gives an
/// entry's `archive` and its name).
fn unarchived<T>(
    entries: &[T],
    setting: impl Fn(&T) -> (bool, &String),
) -> std::collections::BTreeSet<String> {
    entries
        .iter()
        .map(setting)
        .filter(|(archive, _)| !archive)
        .map(|(_, name)| name.clone())
        .collect()
}

/// The volumes a state file keeps.
fn kept_volumes(desired: &DesiredState) -> Vec<KeptVolume> {
    desired
        .keep_volumes
        .iter()
        .map(|k| KeptVolume {
            name: k.name.clone(),
            engine: k.engine.clone(),
            line: Some(k.line),
        })
        .collect()
}

fn unix(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

/// The reconcile goal of a state file: keep its boxes (until they expire)
/// and kept volumes; leave undeclared objects younger than `grace` alone.
pub fn reconcile(desired: &DesiredState, grace: Option<Duration>) -> Goal {
    Goal::Reconcile {
        boxes: desired
            .boxes
            .iter()
            .map(|b| DeclaredBox {
                id: b.id.clone(),
                engine: b.engine.clone(),
                expires: match b.expiry {
                    Some(Expiry::At(t)) => Some(unix(t)),
                    _ => None,
                },
                ttl: match b.expiry {
                    Some(Expiry::Ttl(d)) => Some(d.as_secs()),
                    _ => None,
                },
                line: Some(b.line),
            })
            .collect(),
        keep_volumes: kept_volumes(desired),
        grace: grace.map(|g| g.as_secs()).filter(|&g| g > 0),
        max_lease: desired.policy.max_lease.map(|d| d.as_secs()),
        archive: archive_policy(None, desired),
    }
}

/// The file's scope labels plus `--scope`; a key with two values is an error.
fn scope_of(cli: &Labels, desired: &DesiredState) -> Result<Scope, ConfigError> {
    let mut labels: Labels = desired.scope.clone();
    for (k, v) in cli {
        if let Some(file) = labels.get(k).filter(|f| *f != v) {
            return Err(ConfigError::ScopeConflict {
                key: k.clone(),
                file: file.clone(),
                cli: v.clone(),
                path: desired.source.clone().unwrap_or_default(),
            });
        }
        labels.insert(k.clone(), v.clone());
    }
    let swarm_out = desired.engines.iter().filter(|e| !e.swarm);
    Ok(Scope::new(labels).without_swarm_of(swarm_out.map(|e| e.name.clone())))
}

/// What a look at the state file saw: its modification time, length, bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    modified: Option<SystemTime>,
    len: u64,
    bytes: Vec<u8>,
}

/// The state file as `watch` follows it: looked at every poll, loaded again
/// when its contents change. A file that does not validate (or drops the
/// grace period `watch` needs) is reported and the last good state stays.
pub(crate) struct StateFile {
    path: PathBuf,
    cli_scope: Labels,
    grace_flag: Option<Duration>,
    /// `--archive`, over the file's `[policy] archive`.
    archive_flag: Option<PathBuf>,
    seen: Option<Seen>,
}

impl StateFile {
    /// Follows `path`, whose current contents are already in force.
    pub(crate) fn new(path: PathBuf, cli_scope: Labels, grace_flag: Option<Duration>) -> Self {
        let mut file = StateFile {
            path,
            cli_scope,
            grace_flag,
            archive_flag: None,
            seen: None,
        };
        file.seen = file.look();
        file
    }

    /// Archives with `--archive DIR` over the file's `[policy] archive`.
    pub(crate) fn with_archive(mut self, flag: Option<PathBuf>) -> Self {
        self.archive_flag = flag;
        self
    }

    fn stat(&self) -> Option<(Option<SystemTime>, u64)> {
        let meta = std::fs::metadata(&self.path).ok()?;
        Some((meta.modified().ok(), meta.len()))
    }

    fn look(&self) -> Option<Seen> {
        let (modified, len) = self.stat()?;
        let bytes = std::fs::read(&self.path).ok()?;
        Some(Seen {
            modified,
            len,
            bytes,
        })
    }
}

impl crate::watch::StateSource for StateFile {
    fn poll(&mut self) -> crate::watch::StatePoll {
        use crate::watch::{Desired, StatePoll};
        if let (Some(now), Some(seen)) = (self.stat(), &self.seen) {
            if now == (seen.modified, seen.len) {
                return StatePoll::Unchanged;
            }
        }
        let Some(now) = self.look() else {
            if self.seen.take().is_some() {
                return StatePoll::Broken(format!(
                    "{}: cannot read the state file; the last good state stays in force",
                    self.path.display()
                ));
            }
            return StatePoll::Unchanged;
        };
        let same = self.seen.as_ref().is_some_and(|s| s.bytes == now.bytes);
        let bytes = now.bytes.clone();
        self.seen = Some(now);
        if same {
            return StatePoll::Unchanged;
        }
        let desired = match DesiredState::parse(&bytes, &self.path) {
            Ok(d) => d,
            Err(e) => return StatePoll::Broken(format!("{e}; the last good state stays in force")),
        };
        let Some(grace) = self.grace_flag.or(desired.policy.grace) else {
            return StatePoll::Broken(format!(
                "{}: {}; the last good state stays in force",
                self.path.display(),
                ConfigError::WatchNeedsGrace
            ));
        };
        match scope_of(&self.cli_scope, &desired) {
            Ok(scope) => StatePoll::Changed(Box::new(Desired {
                goal: reconcile(&desired, Some(grace))
                    .with_archive(archive_policy(self.archive_flag.as_deref(), &desired)),
                scope,
            })),
            Err(e) => StatePoll::Broken(format!("{e}; the last good state stays in force")),
        }
    }
}

/// The engines `[[engine]]` names, each resolved, narrowed by `--engine`.
fn fleet_of(args: &Args, desired: &DesiredState) -> anyhow::Result<Vec<EngineTarget>> {
    let path = desired.source.clone().unwrap_or_default();
    if desired.engines.is_empty() {
        if let Some(name) = args.engines.first() {
            return Err(ConfigError::NoFleet { name: name.clone() }.into());
        }
        return Ok(Vec::new());
    }
    if args.host.is_some() || args.context.is_some() {
        return Err(ConfigError::FleetAndHost { path }.into());
    }
    let declared: Vec<String> = desired.engines.iter().map(|e| e.name.clone()).collect();
    for name in &args.engines {
        if !declared.contains(name) {
            return Err(ConfigError::UnknownEngine {
                name: name.clone(),
                declared,
                path,
            }
            .into());
        }
    }
    let input = EndpointInput::from_process(None, None);
    desired
        .engines
        .iter()
        .filter(|e| args.engines.is_empty() || args.engines.contains(&e.name))
        .map(|e| {
            let chosen = crate::engine::endpoint::ChosenBy::StateFile(e.name.clone());
            let endpoint = match &e.target {
                crate::state::EngineTarget::Default => {
                    let mut ep = crate::engine::endpoint::resolve(&input)?;
                    ep.chosen_by = chosen;
                    ep
                }
                crate::state::EngineTarget::Host(host) => {
                    crate::engine::endpoint::resolve_host(host, &input, chosen)?
                }
                crate::state::EngineTarget::Context(name) => {
                    crate::engine::endpoint::resolve_named_context(name, &input, chosen)?
                }
            };
            Ok(EngineTarget {
                name: e.name.clone(),
                endpoint,
            })
        })
        .collect()
}
