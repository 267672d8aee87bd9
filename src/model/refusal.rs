//! A run refused before any work (`Refusal`): what kind of refusal it is
//! (`RefusalCode`), its words, and the file and place it points at when it
//! has them. The one shape of every refusal, for every command: `render`
//! prints it as the error document (`error.schema.json`) under `--format
//! json`; `cli::refusal` makes it from the error that refused the run.
//!
//! Pure data: must not read an error's type nor decide what refuses (the
//! callers do), nor lay out words (`render` does).

use serde::Serialize;

/// A run refused before any work: an invalid invocation, a state file that
/// does not load, a saved plan that does not open, a file the run must open
/// first (the audit log, the plan key, the metrics address).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Refusal {
    /// What kind of refusal: a reader acts on it; one it does not know, it
    /// says by `text`.
    pub code: RefusalCode,
    /// The human message, as stderr says it (exact: not escaped, no
    /// `error: ` before it; its causes after `: `).
    pub text: String,
    /// The file the refusal is about (the state file, the saved plan, the
    /// audit log), as it was given; absent when it is about none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The 1-based line in `file` of the problem; absent when it has no place.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// The 1-based column (in characters) of the problem, with `line`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
}

impl Refusal {
    /// A refusal of `code` in `text`, about no file.
    pub fn new(code: RefusalCode, text: impl Into<String>) -> Refusal {
        Refusal {
            code,
            text: text.into(),
            file: None,
            line: None,
            column: None,
        }
    }

    /// This refusal, about `file` (at `at`: 1-based line and column).
    pub fn at(mut self, file: impl Into<String>, at: Option<(usize, usize)>) -> Refusal {
        self.file = Some(file.into());
        self.line = at.map(|(line, _)| line);
        self.column = at.map(|(_, column)| column);
        self
    }
}

/// What kind of refusal. The exit status says where it was refused, not the
/// code: 2 for the command line (its parse and its own checks), 1 for what
/// comes after (the state file, the engine's address, the files a run opens
/// first). The state file's problems are its kinds (the ones `validate`
/// finds). A new code may come within a schema version: a reader treats one
/// it does not know by the refusal's `text`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum RefusalCode {
    /// A flag, argument or subcommand the command does not have.
    UnknownArgument,
    /// A required argument or the subcommand is missing.
    MissingArgument,
    /// A flag's or argument's value is not one it takes (`--timeout soon`,
    /// `--grace x`, `--ttl 0s`, a `--format` the command does not print).
    InvalidValue,
    /// Flags that cannot go together (`--host` with `--context`, `--scope`
    /// given twice with two values, `--scope` with a saved plan).
    ConflictingArguments,
    /// Any other invalid invocation.
    InvalidArguments,
    /// A box ID (on the command line or in the state file) that no box can
    /// carry.
    InvalidBoxId,
    /// A volume name (`restore --volume`, `[volumes].keep`) that Docker
    /// would not accept.
    InvalidVolumeName,
    /// The state file given does not exist.
    NotFound,
    /// The state file given is a directory, a FIFO, a socket or a device.
    NotAFile,
    /// The state file cannot be read.
    Unreadable,
    /// The state file is over the size limit.
    TooLarge,
    /// The state file is not UTF-8.
    InvalidUtf8,
    /// The state file nests brackets too deep.
    TooDeep,
    /// The state file has a dotted key too deep.
    TooManyKeyDots,
    /// The state file is not TOML.
    Syntax,
    /// The state file has a key its format does not have.
    UnknownKey,
    /// A value of the state file has the wrong type.
    WrongType,
    /// A key the state file needs is missing.
    MissingKey,
    /// Two keys of the state file that exclude each other.
    Conflict,
    /// A box declared twice on one engine.
    DuplicateBox,
    /// A volume kept twice on one engine.
    DuplicateKeep,
    /// Two `[[engine]]` tables with one name.
    DuplicateEngine,
    /// An engine named (by `engine =` in the state file, or by `--engine`)
    /// that the state file does not declare.
    UnknownEngine,
    /// An `[[engine]]` name that is not a valid name.
    InvalidEngineName,
    /// A `[scope]` label of the state file that is refused.
    InvalidScopeLabel,
    /// An engine address (`host` in the state file, `--host`,
    /// `DOCKER_HOST`) that is not a usable one.
    InvalidHost,
    /// A Docker context name that is not a valid one.
    InvalidContext,
    /// A bad duration in the state file (`grace`, `max_lease`, `ttl`).
    InvalidDuration,
    /// A bad `expires` time in the state file.
    InvalidTime,
    /// A `[[notify]]` `url` that is refused (plain http to a non-loopback
    /// address, another scheme, a user or password in it).
    InvalidNotifyUrl,
    /// A `[[notify]]` `events` entry that names no event.
    UnknownNotifyEvent,
    /// A `[[notify]]` `secret_env` that is not a variable's name.
    InvalidSecretEnv,
    /// The variable a `[[notify]]` `secret_env` names is not set (or empty)
    /// when a command that notifies starts.
    NotifySecretMissing,
    /// `plan`, `apply`, `watch`, `explain` or `graph` with no state file at
    /// the default path and none given.
    NoStateFile,
    /// `--engine` without `[[engine]]` in the state file.
    NoFleet,
    /// `--host` or `--context` with `[[engine]]` in the state file.
    FleetAndHost,
    /// `watch` with no grace period.
    WatchNeedsGrace,
    /// `--ttl` over `[policy] max_lease`.
    TtlOverMax,
    /// `lease`, `hold` or `restore` on more (or fewer) engines than one.
    OneEngine,
    /// A scope label with one value in the state file and another on the
    /// command line.
    ScopeConflict,
    /// The Docker context named does not exist.
    UnknownContext,
    /// The Docker CLI's configuration (its folder, `config.json`, a
    /// context's file) cannot be found or read.
    DockerConfig,
    /// The saved plan of `apply FILE` does not open: unreadable, not a
    /// plan, unsealed, its seal not matching (edited, or another key), of
    /// another schema version, or not sound.
    PlanFile,
    /// The plan key (`plan --out`, `apply FILE`) cannot be had.
    PlanKey,
    /// `--audit FILE` cannot be opened (a link, a folder, no permission).
    AuditLog,
    /// `watch --metrics ADDR` cannot listen on that address.
    Metrics,
}
