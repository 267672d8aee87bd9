//! The desired state: loading and validating the TOML state file.
//!
//! Owns the file format and every error a state file can produce (with file,
//! line and column). Reads the one file it is given and nothing else; never
//! talks to the engine, and never decides what an expiry or grace period
//! means for a plan (it only parses them).
//!
//! # Format
//!
//! ```toml
//! [scope]                       # optional: narrows what this file manages
//! labels = { "ca.sandbox.owner" = "team-a" }
//!
//! [policy]
//! grace = "10m"                 # an undeclared box younger than this is left alone
//!
//! [[engine]]                    # optional: the engines this file names
//! name = "ci-1"
//! host = "ssh://runner@ci-1"    # or context = "colima"; neither: the default engine
//!
//! [[box]]                       # boxes that should exist: container and volume are kept
//! id = "explore-ripgrep"
//! engine = "ci-1"               # optional: on that engine only (else on every engine)
//! expires = "2026-12-24T18:00:00Z"   # optional, RFC 3339 UTC; or ttl = "8h"; not both
//!
//! [volumes]
//! keep = ["ca-sbx-notes", { engine = "ci-1", name = "cache" }]   # a plain name: every engine
//! ```
//!
//! Every table and key is optional except `id` in a box and `name` in an engine
//! or a table entry of `keep`; an empty file declares nothing. Unknown keys
//! anywhere are errors, as are: a box declared twice on one engine (an entry
//! without `engine` counts for every engine), the same for `keep` entries, two
//! engines with one name, an `engine =` naming no `[[engine]]`, `host` together
//! with `context`, `expires` together with `ttl`.
//!
//! [`check`] returns every problem in the file, in file order; [`DesiredState::parse`]
//! and [`DesiredState::load`] return the first of them. A syntax error (and a
//! size, encoding or nesting error) stops parsing, so it is always alone.
//!
//! # The file is untrusted input
//!
//! * Size: at most [`MAX_STATE_BYTES`] (1 MiB). [`DesiredState::load`] checks the
//!   file's metadata and then reads at most one byte more than the limit, so a
//!   huge file, `/dev/zero` or a FIFO is refused without reading it all.
//! * Encoding: UTF-8. A UTF-8 byte order mark is **accepted** and skipped (some
//!   editors write one); positions are then counted after it. CRLF line endings
//!   are accepted. Invalid UTF-8 is reported at the line and column of its first
//!   bad byte.
//! * Nesting: before TOML parsing, a scan outside strings and comments refuses
//!   brackets (`[`, `{`) nested more than [`MAX_NESTING`] deep and more than
//!   [`MAX_KEY_DOTS`] `.` on one line (dotted keys nest tables too). A valid
//!   state file needs 2 and 1. The `toml` crate's own limit (80, and none at all
//!   if any crate in the build enables its `unbounded` feature) is not enough:
//!   80 nested inline tables overflow a 256 KiB stack in a debug build, and a
//!   dotted key over its limit is refused without a position.
//! * Box ids and engine names ([`check_box_id`]): `[A-Za-z0-9][A-Za-z0-9_.-]*`,
//!   at most [`MAX_BOX_ID_CHARS`] characters; so no whitespace, control
//!   characters, `/`, `\` or `..`.
//! * Volume names in `keep` ([`check_volume_name`]): Docker's
//!   `[a-zA-Z0-9][a-zA-Z0-9_.-]*`, at most [`MAX_VOLUME_NAME_CHARS`] characters.
//! * Scope labels ([`check_label`], also used for `--scope KEY=VALUE`): keys are
//!   `[A-Za-z0-9._/-]`, start and end with a letter or digit, at most
//!   [`MAX_LABEL_KEY_CHARS`] characters, and are never `ca.sandbox` (always
//!   required as `ca.sandbox=1` by sandboxctl itself). Values are non-empty, at
//!   most [`MAX_LABEL_VALUE_CHARS`] characters, with no control or invisible
//!   formatting characters and no leading or trailing whitespace.
//! * Engine hosts: a URL with scheme `unix`, `tcp`, `http`, `https` or `ssh`, at
//!   most [`MAX_HOST_CHARS`] characters, no whitespace or hidden characters.
//!   Contexts: Docker's `[a-zA-Z0-9][a-zA-Z0-9_.+-]+`.
//! * Durations ([`parse_duration`]): `30s`, `10m`, `8h`, `2d` (humantime), at
//!   most [`MAX_DURATION`]. Times ([`parse_time`]): RFC 3339 in UTC.
//!
//! Text from the file that appears in a message is escaped (control and
//! invisible characters as `\u{..}`) and shortened, so a hostile file cannot
//! write terminal escapes or megabytes through an error message.

#![allow(
    clippy::result_large_err,
    reason = "StateError (144 bytes: path, position, kind) is built once per run on a cold path; \
              boxing it would only complicate the API"
)]

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use crate::model::{Labels, SANDBOX_LABEL, SANDBOX_VALUE};

/// Where the state file is looked for when neither `--state` nor `SANDBOXCTL_STATE` is given.
pub const DEFAULT_STATE_PATH: &str = "state/sandboxes.toml";
/// The largest state file accepted, in bytes (1 MiB).
pub const MAX_STATE_BYTES: u64 = 1024 * 1024;
/// How deep `[` and `{` may nest (outside strings and comments); a valid file needs 2.
pub const MAX_NESTING: usize = 16;
/// How many `.` may appear on one line outside strings and comments; a valid file needs 1.
pub const MAX_KEY_DOTS: usize = 16;
/// The longest box id (and engine name), in characters.
pub const MAX_BOX_ID_CHARS: usize = 128;
/// The longest volume name in `[volumes].keep`, in characters.
pub const MAX_VOLUME_NAME_CHARS: usize = 255;
/// The longest scope label key, in characters.
pub const MAX_LABEL_KEY_CHARS: usize = 128;
/// The longest scope label value, in characters.
pub const MAX_LABEL_VALUE_CHARS: usize = 256;
/// The longest engine `host` URL, in characters.
pub const MAX_HOST_CHARS: usize = 1024;
/// The longest docker context name, in characters.
pub const MAX_CONTEXT_CHARS: usize = 128;
/// The longest duration accepted by [`parse_duration`]: 3650 days.
pub const MAX_DURATION: Duration = Duration::from_secs(3650 * 24 * 60 * 60);

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";
/// How much of a value from the file a message shows before shortening it.
const SHOW_CHARS: usize = 64;
/// How much of a TOML parser message is shown.
const MESSAGE_CHARS: usize = 240;
/// How many declared engine names an "engine is not declared" message lists.
const SHOW_ENGINES: usize = 8;
const FORMAT_HINT: &str = "the format is [scope] labels = { \"key\" = \"value\" }, \
     [[box]] id = \"...\" (one table per box), [volumes] keep = [\"...\"]";
const ENGINE_HINT: &str = "each engine is a table: [[engine]] name = \"...\", and optionally \
     host = \"ssh://user@host\" or context = \"name\"";
const POLICY_HINT: &str = "the format is [policy] grace = \"10m\"";
const DURATION_HINT: &str = "write a number and a unit, e.g. 30s, 10m, 8h or 2d";
const TIME_HINT: &str = "write an RFC 3339 time in UTC, e.g. \"2026-12-24T18:00:00Z\"";
const KEEP_ENTRY: &str = "a volume name or an inline table { engine = \"...\", name = \"...\" }";

const TOP_KEYS: &[&str] = &["scope", "policy", "engine", "box", "volumes"];
const SCOPE_KEYS: &[&str] = &["labels"];
const POLICY_KEYS: &[&str] = &["grace"];
const ENGINE_KEYS: &[&str] = &["name", "host", "context"];
const BOX_KEYS: &[&str] = &["id", "engine", "expires", "ttl"];
const VOLUMES_KEYS: &[&str] = &["keep"];
const KEEP_KEYS: &[&str] = &["engine", "name"];
const HOST_SCHEMES: &[&str] = &["unix", "tcp", "http", "https", "ssh"];

// ---------------------------------------------------------------------------
// What a state file declares.

/// What the state file declares. `DesiredState::empty()` declares nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DesiredState {
    /// The file this came from; `None` for the empty desired state.
    pub source: Option<PathBuf>,
    /// `[scope].labels`: extra labels every managed object must carry.
    pub scope: Labels,
    /// `[[box]]`: boxes that should exist, sorted by `(id, engine)`. No two
    /// entries overlap: an id appears at most once per engine, and an entry
    /// without engine is the only one with its id.
    pub boxes: Vec<BoxDecl>,
    /// `[volumes].keep`: named volumes kept even though their box is gone,
    /// sorted by `(name, engine)`, with the same no-overlap rule as `boxes`.
    pub keep_volumes: Vec<KeepVolume>,
    /// `[policy]`.
    pub policy: Policy,
    /// `[[engine]]`, in file order; names are unique.
    pub engines: Vec<EngineDecl>,
}

/// One `[[box]]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoxDecl {
    /// The box id (checked by [`check_box_id`]).
    pub id: String,
    /// The engine it is declared on (names one of [`DesiredState::engines`]);
    /// `None`: declared on every engine.
    pub engine: Option<String>,
    /// When the box stops being declared; `None`: never.
    pub expiry: Option<Expiry>,
    /// The 1-based line of its `id` key.
    pub line: usize,
}

/// When a declared box expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// `expires = "..."`: at this instant.
    At(SystemTime),
    /// `ttl = "..."`: this long after its container was created (positive).
    Ttl(Duration),
}

/// One entry of `[volumes].keep`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeepVolume {
    /// The volume name (checked by [`check_volume_name`]).
    pub name: String,
    /// The engine it is kept on; `None`: on every engine.
    pub engine: Option<String>,
    /// The 1-based line of the entry.
    pub line: usize,
}

/// `[policy]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// `grace`: an undeclared box younger than this is left alone; `None`: no grace.
    pub grace: Option<Duration>,
}

/// One `[[engine]]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineDecl {
    /// Its name (box-id rules), unique in the file.
    pub name: String,
    /// How to reach it.
    pub target: EngineTarget,
    /// The 1-based line of its `name` key.
    pub line: usize,
}

/// How an engine is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineTarget {
    /// Neither `host` nor `context`: resolved the default way (DOCKER_HOST, ...).
    Default,
    /// `host = "..."`: a daemon URL (unix, tcp, http, https or ssh).
    Host(String),
    /// `context = "..."`: a docker context name.
    Context(String),
}

// ---------------------------------------------------------------------------
// Errors.

/// Why a state file was rejected: one problem, at one place in one file.
///
/// Displays as `path:line:col: message` (or `path: message` for problems with
/// the whole file), the message ending with what to do about it.
#[derive(Debug)]
pub struct StateError {
    /// The state file, as it was given.
    pub path: PathBuf,
    /// 1-based line and column (in characters) of the problem; `None` for
    /// problems with the whole file (not found, unreadable, too large).
    pub at: Option<(usize, usize)>,
    /// What is wrong.
    pub kind: StateErrorKind,
}

/// What is wrong with a state file. Positions inside a kind (`first`,
/// `other_at`) are 1-based `(line, col)` in the same file.
#[derive(Debug)]
pub enum StateErrorKind {
    /// The state file that was asked for does not exist.
    NotFound,
    /// The path names a directory, not a file.
    NotAFile,
    /// The file exists but could not be read (permissions, I/O error).
    Read(std::io::Error),
    /// Larger than [`MAX_STATE_BYTES`]; `size` is `None` when it was only
    /// noticed while reading (the file does not report its size).
    TooLarge { size: Option<u64>, limit: u64 },
    /// Not UTF-8; the position is that of the first bad byte.
    InvalidUtf8 { byte: u8 },
    /// `[` or `{` nested deeper than [`MAX_NESTING`]; at the bracket over the limit.
    TooDeep { limit: usize },
    /// More than [`MAX_KEY_DOTS`] dots on one line outside strings and comments.
    TooManyKeyDots { limit: usize },
    /// Not TOML (the TOML parser's message, cleaned).
    Syntax { message: String, hint: String },
    /// A key the format does not have; `expected` lists the keys of that table.
    UnknownKey {
        key: String,
        expected: &'static [&'static str],
        hint: String,
    },
    /// A value of the wrong type: `found` as serde words it (`string "x"`, `map`).
    WrongType {
        found: String,
        expected: String,
        hint: String,
    },
    /// A required key is missing; at the table.
    MissingKey { key: &'static str, hint: String },
    /// Two keys that exclude each other (`host`/`context`, `expires`/`ttl`); at the later one.
    Conflict {
        key: &'static str,
        other: &'static str,
        other_at: (usize, usize),
    },
    /// A box declared twice on one engine; at the second id.
    DuplicateBox {
        id: String,
        engine: Option<String>,
        first: (usize, usize),
        first_engine: Option<String>,
    },
    /// A volume kept twice on one engine; at the second entry.
    DuplicateKeep {
        name: String,
        engine: Option<String>,
        first: (usize, usize),
        first_engine: Option<String>,
    },
    /// Two `[[engine]]` tables with one name; at the second name.
    DuplicateEngine { name: String, first: (usize, usize) },
    /// `engine = "..."` naming no `[[engine]]`; `declared` lists the names there are.
    UnknownEngine { name: String, declared: Vec<String> },
    /// A box id outside the allowed charset or length (see [`check_box_id`]).
    InvalidBoxId { id: String, reason: String },
    /// An engine name outside the box-id rules.
    InvalidEngineName { name: String, reason: String },
    /// A volume name in `[volumes].keep` that Docker would not accept.
    InvalidVolumeName { name: String, reason: String },
    /// A `[scope].labels` entry refused by [`check_label`]; at the key or the value.
    InvalidScopeLabel { key: String, reason: String },
    /// An engine `host` that is not a usable daemon URL.
    InvalidHost { host: String, reason: String },
    /// An engine `context` that is not a docker context name.
    InvalidContext { context: String, reason: String },
    /// A bad `grace` or `ttl`; `reason` (from [`parse_duration`]) says what a good one looks like.
    InvalidDuration {
        key: &'static str,
        value: String,
        reason: String,
    },
    /// A bad `expires`; `reason` (from [`parse_time`]) says what a good one looks like.
    InvalidTime { value: String, reason: String },
}

impl StateError {
    fn new(path: &Path, at: Option<(usize, usize)>, kind: StateErrorKind) -> Self {
        StateError {
            path: path.to_path_buf(),
            at,
            kind,
        }
    }

    /// The state file the error is about.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The 1-based line and column (in characters) the error points at; `None`
    /// for errors about the whole file (not found, unreadable, too large).
    pub fn line_col(&self) -> Option<(usize, usize)> {
        self.at
    }

    /// What is wrong.
    pub fn kind(&self) -> &StateErrorKind {
        &self.kind
    }
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.at {
            Some((line, col)) => write!(f, "{}:{line}:{col}: {}", self.path.display(), self.kind),
            None => write!(f, "{}: {}", self.path.display(), self.kind),
        }
    }
}

impl std::error::Error for StateError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            StateErrorKind::Read(e) => Some(e),
            _ => None,
        }
    }
}

impl fmt::Display for StateErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use StateErrorKind as K;
        match self {
            K::NotFound => write!(
                f,
                "state file does not exist; check the path given with --state or \
                 SANDBOXCTL_STATE (without either, {DEFAULT_STATE_PATH} is used if it exists)"
            ),
            K::NotAFile => {
                f.write_str("is a directory, not a state file; give the path of a .toml file")
            }
            K::Read(e) => write!(
                f,
                "cannot read state file: {e}; check that it is a readable file"
            ),
            K::TooLarge { size, limit } => write!(
                f,
                "state file is too large ({}; the limit is {limit} bytes); a state file only \
                 lists box ids, volume names and labels: check that this is the right file",
                match size {
                    Some(size) => format!("{size} bytes"),
                    None => format!("more than {limit} bytes"),
                }
            ),
            K::InvalidUtf8 { byte } => write!(
                f,
                "state file is not valid UTF-8 (byte 0x{byte:02X}); save it as UTF-8"
            ),
            K::TooDeep { limit } => write!(
                f,
                "brackets nested more than {limit} levels deep; a state file needs at most 2: \
                 remove the extra nesting"
            ),
            K::TooManyKeyDots { limit } => write!(
                f,
                "more than {limit} '.' outside quotes on one line (a dotted key this deep is \
                 refused); quote keys that contain dots, e.g. \"ca.sandbox.owner\" = \"team-a\""
            ),
            K::Syntax { message, hint } => write!(f, "invalid TOML: {message}; {hint}"),
            K::UnknownKey {
                key,
                expected,
                hint,
            } => write!(
                f,
                "unknown key `{}`, {}; {hint}",
                Bare(key),
                OneOf(expected)
            ),
            K::WrongType {
                found,
                expected,
                hint,
            } => write!(f, "invalid type: {found}, expected {expected}; {hint}"),
            K::MissingKey { key, hint } => write!(f, "missing key `{key}`; {hint}"),
            K::Conflict {
                key,
                other,
                other_at: (line, col),
            } => write!(
                f,
                "{key} and {other} cannot both be set ({other} is set at {line}:{col}); \
                 remove one of them"
            ),
            K::DuplicateBox {
                id,
                engine,
                first,
                first_engine,
            } => write!(
                f,
                "duplicate box id {}{}; remove one of them{}",
                Shown(id),
                Overlap("declared", engine, *first, first_engine),
                if engine.is_none() && first_engine.is_some() {
                    " or give this one an engine"
                } else {
                    ""
                }
            ),
            K::DuplicateKeep {
                name,
                engine,
                first,
                first_engine,
            } => write!(
                f,
                "duplicate volume {} in [volumes].keep{}; remove one of them",
                Shown(name),
                Overlap("listed", engine, *first, first_engine),
            ),
            K::DuplicateEngine {
                name,
                first: (line, col),
            } => write!(
                f,
                "duplicate engine name {} (first declared at {line}:{col}); rename or remove \
                 one of them",
                Shown(name)
            ),
            K::UnknownEngine { name, declared } => {
                write!(f, "engine {} is not declared; ", Shown(name))?;
                if declared.is_empty() {
                    return write!(
                        f,
                        "this file has no [[engine]] table: add one with name = {}, or remove \
                         this engine key",
                        Shown(name)
                    );
                }
                write!(
                    f,
                    "declare it with [[engine]] name = {}, or use one of ",
                    Shown(name)
                )?;
                for (n, d) in declared.iter().take(SHOW_ENGINES).enumerate() {
                    if n > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{}", Shown(d))?;
                }
                if declared.len() > SHOW_ENGINES {
                    write!(f, " ({} more)", declared.len() - SHOW_ENGINES)?;
                }
                Ok(())
            }
            K::InvalidBoxId { id, reason } => write!(
                f,
                "invalid box id {}: {reason}; box ids match [A-Za-z0-9][A-Za-z0-9_.-]* and have \
                 at most {MAX_BOX_ID_CHARS} characters",
                Shown(id)
            ),
            K::InvalidEngineName { name, reason } => write!(
                f,
                "invalid engine name {}: {reason}; engine names match [A-Za-z0-9][A-Za-z0-9_.-]* \
                 and have at most {MAX_BOX_ID_CHARS} characters",
                Shown(name)
            ),
            K::InvalidVolumeName { name, reason } => write!(
                f,
                "invalid volume name {} in [volumes].keep: {reason}; volume names match \
                 [a-zA-Z0-9][a-zA-Z0-9_.-]* and have at most {MAX_VOLUME_NAME_CHARS} characters",
                Shown(name)
            ),
            K::InvalidScopeLabel { key, reason } => {
                write!(f, "invalid scope label {}: {reason}", Shown(key))
            }
            K::InvalidHost { host, reason } => write!(
                f,
                "invalid engine host {}: {reason}; write a daemon URL such as \
                 unix:///var/run/docker.sock, tcp://ci-1:2376 or ssh://user@ci-1",
                Shown(host)
            ),
            K::InvalidContext { context, reason } => write!(
                f,
                "invalid docker context name {}: {reason}; context names match \
                 [a-zA-Z0-9][a-zA-Z0-9_.+-]+ (see docker context ls)",
                Shown(context)
            ),
            K::InvalidDuration { key, value, reason } => {
                write!(f, "invalid {key} duration {}: {reason}", Shown(value))
            }
            K::InvalidTime { value, reason } => {
                write!(f, "invalid expires time {}: {reason}", Shown(value))
            }
        }
    }
}

/// ` (first declared at 2:6)`, naming the engine(s) when an entry is engine-specific.
struct Overlap<'a>(
    &'static str,
    &'a Option<String>,
    (usize, usize),
    &'a Option<String>,
);

impl fmt::Display for Overlap<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Overlap(verb, engine, (line, col), first_engine) = self;
        match (engine, first_engine) {
            (None, None) => write!(f, " (first {verb} at {line}:{col})"),
            (Some(e), None) => write!(
                f,
                " on engine {} (first {verb} at {line}:{col} for every engine)",
                Shown(e)
            ),
            (Some(e), Some(_)) => {
                write!(f, " on engine {} (first {verb} at {line}:{col})", Shown(e))
            }
            (None, Some(first)) => write!(
                f,
                " (first {verb} at {line}:{col} on engine {}; an entry without engine = \
                 counts for every engine)",
                Shown(first)
            ),
        }
    }
}

/// serde's wording of a field list: `expected `a``, `expected `a` or `b``,
/// `expected one of `a`, `b`, `c``.
struct OneOf(&'static [&'static str]);

impl fmt::Display for OneOf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            [] => f.write_str("there are no keys"),
            [one] => write!(f, "expected `{one}`"),
            [a, b] => write!(f, "expected `{a}` or `{b}`"),
            many => {
                f.write_str("expected one of ")?;
                for (n, key) in many.iter().enumerate() {
                    if n > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "`{key}`")?;
                }
                Ok(())
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Loading and parsing.

impl DesiredState {
    /// The empty desired state: no boxes, no kept volumes, no scope labels.
    pub fn empty() -> Self {
        DesiredState::default()
    }

    /// Reads and parses the state file at `path`; the first problem on failure
    /// (see [`check_file`] for all of them).
    ///
    /// A missing file is [`StateErrorKind::NotFound`]. The size is checked from the
    /// metadata first, and at most [`MAX_STATE_BYTES`]` + 1` bytes are ever read.
    pub fn load(path: &Path) -> Result<Self, StateError> {
        check_file(path).map_err(first)
    }

    /// The state for a run: `explicit` (from `--state` or `SANDBOXCTL_STATE`) must
    /// exist; without it, [`DEFAULT_STATE_PATH`] (relative to the working
    /// directory) is loaded if it exists, else the empty state is returned.
    pub fn load_or_default(explicit: Option<&Path>) -> Result<Self, StateError> {
        match explicit {
            Some(path) => Self::load(path),
            None => {
                let default = Path::new(DEFAULT_STATE_PATH);
                // symlink_metadata: a dangling symlink is reported, not silently ignored.
                if default.symlink_metadata().is_ok() {
                    Self::load(default)
                } else {
                    Ok(Self::empty())
                }
            }
        }
    }

    /// Parses state file contents; `path` is only used in messages and `source`.
    /// Returns the first problem in the file (see [`check`] for all of them).
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self, StateError> {
        check(bytes, path).map_err(first)
    }
}

/// The first of a non-empty list of errors.
fn first(mut errors: Vec<StateError>) -> StateError {
    // `check` never returns an empty list.
    errors.swap_remove(0)
}

/// Like [`DesiredState::load`], but with every problem in the file (in file
/// order); a file that cannot be read gives one error.
pub fn check_file(path: &Path) -> Result<DesiredState, Vec<StateError>> {
    let bytes = read_limited(path).map_err(|e| vec![e])?;
    check(&bytes, path)
}

/// Parses state file contents and returns the state, or every problem in it in
/// file order (never an empty list). A problem that stops parsing (size,
/// encoding, nesting, TOML syntax) is alone; every other rule is checked
/// everywhere. `path` is only used in messages and `source`.
pub fn check(bytes: &[u8], path: &Path) -> Result<DesiredState, Vec<StateError>> {
    if bytes.len() as u64 > MAX_STATE_BYTES {
        let kind = StateErrorKind::TooLarge {
            size: Some(bytes.len() as u64),
            limit: MAX_STATE_BYTES,
        };
        return Err(vec![StateError::new(path, None, kind)]);
    }
    let bytes = bytes.strip_prefix(UTF8_BOM).unwrap_or(bytes);
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let valid = &bytes[..e.valid_up_to()];
        // Cannot fail: `valid_up_to` is exactly the valid prefix.
        let valid = std::str::from_utf8(valid).unwrap_or_default();
        let at = line_col(valid, valid.len());
        let byte = bytes[e.valid_up_to()];
        vec![StateError::new(
            path,
            Some(at),
            StateErrorKind::InvalidUtf8 { byte },
        )]
    })?;
    if let Some((offset, what)) = scan_nesting(text) {
        let kind = match what {
            TooNested::Brackets => StateErrorKind::TooDeep { limit: MAX_NESTING },
            TooNested::Dots => StateErrorKind::TooManyKeyDots {
                limit: MAX_KEY_DOTS,
            },
        };
        return Err(vec![StateError::new(
            path,
            Some(line_col(text, offset)),
            kind,
        )]);
    }
    let root = DeTable::parse(text).map_err(|e| {
        let kind = StateErrorKind::Syntax {
            hint: if e.message() == "duplicate key" {
                "this key or table is already defined above: remove or merge one of them"
            } else {
                "fix the syntax there"
            }
            .to_string(),
            message: clean_message(e.message()),
        };
        vec![StateError::new(
            path,
            e.span().map(|s| line_col(text, s.start)),
            kind,
        )]
    })?;
    let mut walker = Walker {
        text,
        problems: Vec::new(),
    };
    let raw = walker.file(root.get_ref());
    let state = walker.validate(raw, path);
    if walker.problems.is_empty() {
        return Ok(state);
    }
    // Stable: problems at one offset keep the order they were found in.
    walker.problems.sort_by_key(|(offset, _)| *offset);
    Err(walker
        .problems
        .into_iter()
        .map(|(offset, kind)| StateError::new(path, Some(line_col(text, offset)), kind))
        .collect())
}

/// Reads at most [`MAX_STATE_BYTES`]` + 1` bytes of `path`, refusing a
/// directory and a file whose metadata is over the limit without reading it.
fn read_limited(path: &Path) -> Result<Vec<u8>, StateError> {
    let error = |kind| StateError::new(path, None, kind);
    let file = std::fs::File::open(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => error(StateErrorKind::NotFound),
        _ => error(StateErrorKind::Read(source)),
    })?;
    let meta = file
        .metadata()
        .map_err(|e| error(StateErrorKind::Read(e)))?;
    if meta.is_dir() {
        return Err(error(StateErrorKind::NotAFile));
    }
    if meta.is_file() && meta.len() > MAX_STATE_BYTES {
        return Err(error(StateErrorKind::TooLarge {
            size: Some(meta.len()),
            limit: MAX_STATE_BYTES,
        }));
    }
    let capacity = if meta.is_file() {
        meta.len().min(MAX_STATE_BYTES) as usize + 1
    } else {
        8 * 1024
    };
    let mut bytes = Vec::with_capacity(capacity);
    file.take(MAX_STATE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| error(StateErrorKind::Read(e)))?;
    if bytes.len() as u64 > MAX_STATE_BYTES {
        return Err(error(StateErrorKind::TooLarge {
            size: None,
            limit: MAX_STATE_BYTES,
        }));
    }
    Ok(bytes)
}

/// Checks a scope label from the file or from `--scope`: returns what is wrong with it
/// (a sentence that ends with what to do).
pub fn check_label(key: &str, value: &str) -> Result<(), String> {
    label_key_problem(key).map_or(Ok(()), Err)?;
    label_value_problem(value).map_or(Ok(()), Err)
}

/// Splits a `--scope KEY=VALUE` argument at its first `=` and checks both halves
/// with [`check_label`].
pub fn parse_label_arg(arg: &str) -> Result<(String, String), String> {
    let Some((key, value)) = arg.split_once('=') else {
        return Err(format!(
            "{} has no '='; write KEY=VALUE, e.g. ca.sandbox.owner=team-a",
            Shown(arg)
        ));
    };
    check_label(key, value)?;
    Ok((key.to_string(), value.to_string()))
}

/// Checks a box id (`[A-Za-z0-9][A-Za-z0-9_.-]*`, at most [`MAX_BOX_ID_CHARS`]
/// characters): returns what is wrong with it. Engine names follow the same rules.
pub fn check_box_id(id: &str) -> Result<(), String> {
    name_problem(id, MAX_BOX_ID_CHARS).map_or(Ok(()), Err)
}

/// Checks a Docker volume name (`[a-zA-Z0-9][a-zA-Z0-9_.-]*`, at most
/// [`MAX_VOLUME_NAME_CHARS`] characters): returns what is wrong with it.
pub fn check_volume_name(name: &str) -> Result<(), String> {
    name_problem(name, MAX_VOLUME_NAME_CHARS).map_or(Ok(()), Err)
}

/// Parses a duration such as `30s`, `10m`, `8h`, `2d` or `1h 30m` (humantime's
/// syntax), from 0 to [`MAX_DURATION`]. The error is a sentence that ends with
/// what a good value looks like; shared by the state file and CLI flags.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    if s.is_empty() {
        return Err(format!("it is empty; {DURATION_HINT}"));
    }
    if s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return Err(format!(
            "it has leading or trailing whitespace; {DURATION_HINT}"
        ));
    }
    let duration = humantime::parse_duration(s)
        .map_err(|e| format!("{}; {DURATION_HINT}", clean_message(&e.to_string())))?;
    if duration > MAX_DURATION {
        return Err(format!(
            "it is longer than the limit of {} days; {DURATION_HINT}",
            MAX_DURATION.as_secs() / 86_400
        ));
    }
    Ok(duration)
}

/// Parses an RFC 3339 time in UTC, such as `2026-12-24T18:00:00Z` (fractional
/// seconds allowed; `+00:00` for `Z` too). The error is a sentence that ends
/// with what a good value looks like.
pub fn parse_time(s: &str) -> Result<SystemTime, String> {
    if s.is_empty() {
        return Err(format!("it is empty; {TIME_HINT}"));
    }
    humantime::parse_rfc3339(s).map_err(|e| {
        // A date and time of day that is not UTC: say so rather than "invalid format".
        let not_utc = s.len() >= 19
            && s.as_bytes().get(10) == Some(&b'T')
            && !s.ends_with('Z')
            && !s.ends_with("+00:00");
        if not_utc {
            format!("only UTC times are accepted: end it with Z (or +00:00); {TIME_HINT}")
        } else {
            format!("{}; {TIME_HINT}", clean_message(&e.to_string()))
        }
    })
}

// ---------------------------------------------------------------------------
// Walking the parsed document.

/// A string value from the file and the byte offsets of its key and value.
struct At {
    value: String,
    key: usize,
    at: usize,
}

#[derive(Default)]
struct RawFile {
    scope: Labels,
    grace: Option<Duration>,
    engines: Vec<RawEngine>,
    boxes: Vec<RawBox>,
    keep: Vec<RawKeep>,
}

struct RawEngine {
    name: Option<At>,
    target: EngineTarget,
}

struct RawBox {
    id: Option<At>,
    engine: Option<At>,
    expiry: Option<Expiry>,
}

struct RawKeep {
    name: Option<At>,
    engine: Option<At>,
    /// The entry's offset.
    at: usize,
}

type Entry<'a, 'i> = (
    &'a Spanned<toml::de::DeString<'i>>,
    &'a Spanned<DeValue<'i>>,
);

/// Walks the parsed document, collecting every problem with its byte offset.
struct Walker<'t> {
    text: &'t str,
    problems: Vec<(usize, StateErrorKind)>,
}

impl Walker<'_> {
    fn problem(&mut self, at: usize, kind: StateErrorKind) {
        self.problems.push((at, kind));
    }

    fn line_col(&self, offset: usize) -> (usize, usize) {
        line_col(self.text, offset)
    }

    fn line(&self, offset: usize) -> usize {
        self.line_col(offset).0
    }

    fn wrong_type(&mut self, value: &Spanned<DeValue<'_>>, expected: &str, hint: &str) {
        let kind = StateErrorKind::WrongType {
            found: found(value.get_ref()),
            expected: expected.to_string(),
            hint: hint.to_string(),
        };
        self.problem(value.span().start, kind);
    }

    /// The entries of `table` whose keys are in `allowed`, in file order; the
    /// others are reported as unknown keys with `hint`.
    fn known<'a, 'i>(
        &mut self,
        table: &'a DeTable<'i>,
        allowed: &'static [&'static str],
        hint: &str,
    ) -> Vec<Entry<'a, 'i>> {
        let mut entries: Vec<Entry<'a, 'i>> = Vec::new();
        for (key, value) in table.iter() {
            if allowed.contains(&key.get_ref().as_ref()) {
                entries.push((key, value));
            } else {
                let kind = StateErrorKind::UnknownKey {
                    key: key.get_ref().to_string(),
                    expected: allowed,
                    hint: hint.to_string(),
                };
                self.problem(key.span().start, kind);
            }
        }
        entries.sort_by_key(|(key, _)| key.span().start);
        entries
    }

    /// A string value, or a wrong-type problem.
    fn string(&mut self, (key, value): Entry<'_, '_>, expected: &str, hint: &str) -> Option<At> {
        match value.get_ref() {
            DeValue::String(s) => Some(At {
                value: s.to_string(),
                key: key.span().start,
                at: value.span().start,
            }),
            _ => {
                self.wrong_type(value, expected, hint);
                None
            }
        }
    }

    /// A table value, or a wrong-type problem.
    fn table<'a, 'i>(
        &mut self,
        value: &'a Spanned<DeValue<'i>>,
        expected: &str,
        hint: &str,
    ) -> Option<&'a DeTable<'i>> {
        match value.get_ref() {
            DeValue::Table(t) => Some(t),
            _ => {
                self.wrong_type(value, expected, hint);
                None
            }
        }
    }

    /// An array value, or a wrong-type problem.
    fn array<'a, 'i>(
        &mut self,
        value: &'a Spanned<DeValue<'i>>,
        hint: &str,
    ) -> Option<&'a [Spanned<DeValue<'i>>]> {
        match value.get_ref() {
            DeValue::Array(a) => Some(a),
            _ => {
                self.wrong_type(value, "a sequence", hint);
                None
            }
        }
    }

    fn file(&mut self, root: &DeTable<'_>) -> RawFile {
        let mut raw = RawFile::default();
        for (key, value) in self.known(root, TOP_KEYS, "remove it or fix its spelling") {
            match key.get_ref().as_ref() {
                "scope" => raw.scope = self.scope(value),
                "policy" => raw.grace = self.policy(value),
                "engine" => raw.engines = self.engines(value),
                "box" => raw.boxes = self.boxes(value),
                _ => raw.keep = self.volumes(value),
            }
        }
        raw
    }

    fn scope(&mut self, value: &Spanned<DeValue<'_>>) -> Labels {
        let mut scope = Labels::new();
        let Some(table) = self.table(value, "a [scope] table", FORMAT_HINT) else {
            return scope;
        };
        let hint = "remove it or fix its spelling; scope labels go inside \
                    labels = { \"key\" = \"value\" }";
        for (_, labels) in self.known(table, SCOPE_KEYS, hint) {
            let Some(labels) = self.table(labels, "a map", FORMAT_HINT) else {
                continue;
            };
            let mut entries: Vec<_> = labels.iter().collect();
            entries.sort_by_key(|(key, _)| key.span().start);
            for (key, value) in entries {
                let DeValue::String(text) = value.get_ref() else {
                    let hint = if matches!(value.get_ref(), DeValue::Table(_))
                        && is_dotted_key_at(self.text, Some(value.span()))
                    {
                        "quote label keys that contain dots, e.g. \"ca.sandbox.owner\" = \"team-a\""
                    } else {
                        FORMAT_HINT
                    };
                    self.wrong_type(value, "a string", hint);
                    continue;
                };
                let name = key.get_ref().to_string();
                if let Some(reason) = label_key_problem(&name) {
                    let kind = StateErrorKind::InvalidScopeLabel { key: name, reason };
                    self.problem(key.span().start, kind);
                } else if let Some(reason) = label_value_problem(text) {
                    let kind = StateErrorKind::InvalidScopeLabel { key: name, reason };
                    self.problem(value.span().start, kind);
                } else {
                    scope.insert(name, text.to_string());
                }
            }
        }
        scope
    }

    fn policy(&mut self, value: &Spanned<DeValue<'_>>) -> Option<Duration> {
        let table = self.table(value, "a [policy] table", POLICY_HINT)?;
        let mut grace = None;
        for entry in self.known(table, POLICY_KEYS, "remove it or fix its spelling") {
            let hint = "write grace = \"10m\"";
            if let Some(text) = self.string(entry, "a duration string", hint) {
                grace = self.duration("grace", &text);
            }
        }
        grace
    }

    fn duration(&mut self, key: &'static str, text: &At) -> Option<Duration> {
        match parse_duration(&text.value) {
            Ok(d) => Some(d),
            Err(reason) => {
                let kind = StateErrorKind::InvalidDuration {
                    key,
                    value: text.value.clone(),
                    reason,
                };
                self.problem(text.at, kind);
                None
            }
        }
    }

    fn engines(&mut self, value: &Spanned<DeValue<'_>>) -> Vec<RawEngine> {
        let hint = "declare engines as [[engine]] tables (double brackets, one per engine)";
        let Some(items) = self.array(value, hint) else {
            return Vec::new();
        };
        let mut engines = Vec::new();
        for item in items {
            let Some(table) = self.table(item, "an [[engine]] table", ENGINE_HINT) else {
                continue;
            };
            let mut engine = RawEngine {
                name: None,
                target: EngineTarget::Default,
            };
            let mut target_key: Option<(&'static str, usize)> = None;
            for entry in self.known(table, ENGINE_KEYS, "remove it or fix its spelling") {
                let key = entry.0.get_ref().as_ref();
                let Some(text) = self.string(entry, "a string", ENGINE_HINT) else {
                    continue;
                };
                if key == "name" {
                    if let Some(reason) = name_problem(&text.value, MAX_BOX_ID_CHARS) {
                        let kind = StateErrorKind::InvalidEngineName {
                            name: text.value.clone(),
                            reason,
                        };
                        self.problem(text.at, kind);
                    }
                    engine.name = Some(text);
                    continue;
                }
                let key: &'static str = if key == "host" { "host" } else { "context" };
                if let Some((other, other_at)) = target_key {
                    let kind = StateErrorKind::Conflict {
                        key,
                        other,
                        other_at: self.line_col(other_at),
                    };
                    self.problem(text.key, kind);
                    engine.target = EngineTarget::Default;
                    continue;
                }
                target_key = Some((key, text.key));
                let problem = if key == "host" {
                    host_problem(&text.value).map(|reason| StateErrorKind::InvalidHost {
                        host: text.value.clone(),
                        reason,
                    })
                } else {
                    context_problem(&text.value).map(|reason| StateErrorKind::InvalidContext {
                        context: text.value.clone(),
                        reason,
                    })
                };
                match problem {
                    Some(kind) => self.problem(text.at, kind),
                    None if key == "host" => engine.target = EngineTarget::Host(text.value),
                    None => engine.target = EngineTarget::Context(text.value),
                }
            }
            if !has_key(table, "name") {
                let kind = StateErrorKind::MissingKey {
                    key: "name",
                    hint: "add name = \"...\" to this [[engine]] table".into(),
                };
                self.problem(item.span().start, kind);
            }
            engines.push(engine);
        }
        engines
    }

    fn boxes(&mut self, value: &Spanned<DeValue<'_>>) -> Vec<RawBox> {
        let span_text = self.text.get(value.span()).unwrap_or_default().trim_start();
        let hint = if matches!(value.get_ref(), DeValue::Table(_))
            && (span_text.starts_with("[box]") || span_text.starts_with("[ box ]"))
        {
            "write [[box]] (double brackets, one table per box), not [box]"
        } else {
            FORMAT_HINT
        };
        let Some(items) = self.array(value, hint) else {
            return Vec::new();
        };
        let mut boxes = Vec::new();
        for item in items {
            let Some(table) = self.table(item, "a [[box]] table", FORMAT_HINT) else {
                continue;
            };
            let mut b = RawBox {
                id: None,
                engine: None,
                expiry: None,
            };
            let mut expiry_key: Option<(&'static str, usize)> = None;
            for entry in self.known(table, BOX_KEYS, "remove it or fix its spelling") {
                let key = entry.0.get_ref().as_ref();
                match key {
                    "id" => b.id = self.string(entry, "a string", FORMAT_HINT),
                    "engine" => {
                        let hint = "write engine = \"...\" with the name of an [[engine]] table";
                        b.engine = self.string(entry, "a string", hint);
                    }
                    _ => {
                        let key: &'static str = if key == "ttl" { "ttl" } else { "expires" };
                        let text = if key == "expires" {
                            self.time_string(entry)
                        } else {
                            self.string(entry, "a duration string", "write ttl = \"8h\"")
                        };
                        let Some(text) = text else { continue };
                        if let Some((other, other_at)) = expiry_key {
                            let kind = StateErrorKind::Conflict {
                                key,
                                other,
                                other_at: self.line_col(other_at),
                            };
                            self.problem(text.key, kind);
                            b.expiry = None;
                            continue;
                        }
                        expiry_key = Some((key, text.key));
                        b.expiry = if key == "ttl" {
                            self.ttl(&text)
                        } else {
                            self.time(&text)
                        };
                    }
                }
            }
            if !has_key(table, "id") {
                let kind = StateErrorKind::MissingKey {
                    key: "id",
                    hint: "add id = \"...\" to this [[box]] table".into(),
                };
                self.problem(item.span().start, kind);
            }
            boxes.push(b);
        }
        boxes
    }

    /// `expires`: a string, or an unquoted TOML date-time (checked the same way).
    fn time_string(&mut self, (key, value): Entry<'_, '_>) -> Option<At> {
        let text = match value.get_ref() {
            DeValue::String(s) => s.to_string(),
            DeValue::Datetime(d) => d.to_string(),
            _ => {
                self.wrong_type(value, "an RFC 3339 time string", TIME_HINT);
                return None;
            }
        };
        Some(At {
            value: text,
            key: key.span().start,
            at: value.span().start,
        })
    }

    fn ttl(&mut self, text: &At) -> Option<Expiry> {
        let ttl = self.duration("ttl", text)?;
        if ttl.is_zero() {
            let kind = StateErrorKind::InvalidDuration {
                key: "ttl",
                value: text.value.clone(),
                reason: format!("a ttl of zero would expire the box at once; {DURATION_HINT}"),
            };
            self.problem(text.at, kind);
            return None;
        }
        Some(Expiry::Ttl(ttl))
    }

    fn time(&mut self, text: &At) -> Option<Expiry> {
        match parse_time(&text.value) {
            Ok(t) => Some(Expiry::At(t)),
            Err(reason) => {
                let kind = StateErrorKind::InvalidTime {
                    value: text.value.clone(),
                    reason,
                };
                self.problem(text.at, kind);
                None
            }
        }
    }

    fn volumes(&mut self, value: &Spanned<DeValue<'_>>) -> Vec<RawKeep> {
        let Some(table) = self.table(value, "a [volumes] table", FORMAT_HINT) else {
            return Vec::new();
        };
        let mut keep = Vec::new();
        for (_, list) in self.known(table, VOLUMES_KEYS, "remove it or fix its spelling") {
            let Some(items) = self.array(list, FORMAT_HINT) else {
                continue;
            };
            for item in items {
                let at = item.span().start;
                match item.get_ref() {
                    DeValue::String(s) => keep.push(RawKeep {
                        name: Some(At {
                            value: s.to_string(),
                            key: at,
                            at,
                        }),
                        engine: None,
                        at,
                    }),
                    DeValue::Table(t) => {
                        let mut entry = RawKeep {
                            name: None,
                            engine: None,
                            at,
                        };
                        let hint = "write { engine = \"...\", name = \"...\" }";
                        for field in self.known(t, KEEP_KEYS, "remove it or fix its spelling") {
                            let text = self.string(field, "a string", hint);
                            if field.0.get_ref().as_ref() == "name" {
                                entry.name = text;
                            } else {
                                entry.engine = text;
                            }
                        }
                        if !has_key(t, "name") {
                            let kind = StateErrorKind::MissingKey {
                                key: "name",
                                hint: "add name = \"...\" (the volume name) to this entry".into(),
                            };
                            self.problem(at, kind);
                        }
                        keep.push(entry);
                    }
                    _ => self.wrong_type(item, KEEP_ENTRY, FORMAT_HINT),
                }
            }
        }
        keep
    }

    /// The rules across entries: names and ids, duplicates, engine references.
    fn validate(&mut self, raw: RawFile, path: &Path) -> DesiredState {
        // Engines first: boxes and keep entries refer to them.
        let mut engines = Vec::new();
        let mut first_engine: HashMap<String, usize> = HashMap::new();
        let declared: Vec<String> = raw
            .engines
            .iter()
            .filter_map(|e| e.name.as_ref().map(|n| n.value.clone()))
            .collect();
        for engine in raw.engines {
            let Some(name) = engine.name else { continue };
            if name_problem(&name.value, MAX_BOX_ID_CHARS).is_some() {
                continue; // reported by the walk
            }
            if let Some(&first) = first_engine.get(&name.value) {
                let kind = StateErrorKind::DuplicateEngine {
                    name: name.value,
                    first: self.line_col(first),
                };
                self.problem(name.at, kind);
                continue;
            }
            first_engine.insert(name.value.clone(), name.at);
            engines.push(EngineDecl {
                line: self.line(name.key),
                name: name.value,
                target: engine.target,
            });
        }

        let mut boxes = Vec::new();
        let mut seen = Seen::default();
        for b in raw.boxes {
            let Some(id) = b.id else { continue };
            let invalid = |id, reason| StateErrorKind::InvalidBoxId { id, reason };
            let Some(engine) = self.entry(&id, b.engine, MAX_BOX_ID_CHARS, &declared, invalid)
            else {
                continue;
            };
            if let Err((first, first_engine)) = seen.claim(&id.value, &engine, id.at) {
                let kind = StateErrorKind::DuplicateBox {
                    id: id.value,
                    engine,
                    first: self.line_col(first),
                    first_engine,
                };
                self.problem(id.at, kind);
                continue;
            }
            boxes.push(BoxDecl {
                line: self.line(id.key),
                id: id.value,
                engine,
                expiry: b.expiry,
            });
        }
        boxes.sort_by(|a, b| (&a.id, &a.engine).cmp(&(&b.id, &b.engine)));

        let mut keep_volumes = Vec::new();
        let mut seen = Seen::default();
        for k in raw.keep {
            let Some(name) = k.name else { continue };
            let invalid = |name, reason| StateErrorKind::InvalidVolumeName { name, reason };
            let max = MAX_VOLUME_NAME_CHARS;
            let Some(engine) = self.entry(&name, k.engine, max, &declared, invalid) else {
                continue;
            };
            if let Err((first, first_engine)) = seen.claim(&name.value, &engine, k.at) {
                let kind = StateErrorKind::DuplicateKeep {
                    name: name.value,
                    engine,
                    first: self.line_col(first),
                    first_engine,
                };
                self.problem(k.at, kind);
                continue;
            }
            keep_volumes.push(KeepVolume {
                line: self.line(k.at),
                name: name.value,
                engine,
            });
        }
        keep_volumes.sort_by(|a, b| (&a.name, &a.engine).cmp(&(&b.name, &b.engine)));

        DesiredState {
            source: Some(path.to_path_buf()),
            scope: raw.scope,
            boxes,
            keep_volumes,
            policy: Policy { grace: raw.grace },
            engines,
        }
    }

    /// True if `engine` is absent or names a declared `[[engine]]`; else reports it.
    /// The checks a `[[box]]` and a `volumes.keep` entry share: the engine it
    /// names is declared, and its name is valid (`invalid` words the problem).
    /// Returns the entry's engine when both hold.
    fn entry(
        &mut self,
        name: &At,
        engine: Option<At>,
        max: usize,
        declared: &[String],
        invalid: impl FnOnce(String, String) -> StateErrorKind,
    ) -> Option<Option<String>> {
        let engine_ok = self.engine_ref(engine.as_ref(), declared);
        if let Some(reason) = name_problem(&name.value, max) {
            self.problem(name.at, invalid(name.value.clone(), reason));
            return None;
        }
        engine_ok.then(|| engine.map(|e| e.value))
    }

    fn engine_ref(&mut self, engine: Option<&At>, declared: &[String]) -> bool {
        let Some(engine) = engine else { return true };
        if declared.contains(&engine.value) {
            return true;
        }
        let kind = StateErrorKind::UnknownEngine {
            name: engine.value.clone(),
            declared: declared.to_vec(),
        };
        self.problem(engine.at, kind);
        false
    }
}

/// True if `table` has `key` (whatever its value).
fn has_key(table: &DeTable<'_>, key: &str) -> bool {
    table.iter().any(|(k, _)| k.get_ref() == key)
}

/// Entries seen so far by name: each one's engine (`None`: every engine) and offset.
#[derive(Default)]
struct Seen(HashMap<String, Vec<(Option<String>, usize)>>);

impl Seen {
    /// Records the entry named `name` on `engine` (`None`: every engine) at
    /// offset `at`, unless an earlier entry of that name covers an engine this
    /// one covers too: then that entry's offset and engine.
    fn claim(
        &mut self,
        name: &str,
        engine: &Option<String>,
        at: usize,
    ) -> Result<(), (usize, Option<String>)> {
        let entries = self.0.entry(name.to_string()).or_default();
        if let Some((other, first)) = entries
            .iter()
            .find(|(other, _)| other.is_none() || engine.is_none() || other == engine)
        {
            return Err((*first, other.clone()));
        }
        entries.push((engine.clone(), at));
        Ok(())
    }
}

/// A value's type as serde words it in "invalid type" messages.
fn found(value: &DeValue<'_>) -> String {
    match value {
        DeValue::String(s) => format!("string {}", Shown(s)),
        DeValue::Integer(i) => match i64::from_str_radix(i.as_str(), i.radix()) {
            Ok(n) => format!("integer `{n}`"),
            Err(_) => format!("integer `{}`", Bare(&i.to_string())),
        },
        DeValue::Float(x) => format!("floating point `{}`", Bare(x.as_str())),
        DeValue::Boolean(b) => format!("boolean `{b}`"),
        DeValue::Datetime(d) => format!("datetime `{d}`"),
        DeValue::Array(_) => "sequence".into(),
        DeValue::Table(_) => "map".into(),
    }
}

/// What is wrong with an engine `host` URL.
fn host_problem(host: &str) -> Option<String> {
    if host.is_empty() {
        return Some("it is empty".into());
    }
    let len = host.chars().count();
    if len > MAX_HOST_CHARS {
        return Some(format!(
            "it is {len} characters long (the limit is {MAX_HOST_CHARS})"
        ));
    }
    if let Some(c) = host.chars().find(|&c| is_hidden(c)) {
        return Some(format!(
            "it contains the {} {}",
            hidden_kind(c),
            CharText(c)
        ));
    }
    if host.chars().any(char::is_whitespace) {
        return Some("it contains whitespace".into());
    }
    let url = match url::Url::parse(host) {
        Ok(url) => url,
        Err(e) => return Some(format!("it is not a URL ({e})")),
    };
    let scheme = url.scheme();
    if !HOST_SCHEMES.contains(&scheme) {
        return Some(format!(
            "its scheme {} is not one of unix, tcp, http, https, ssh",
            Shown(scheme)
        ));
    }
    if scheme == "unix" {
        if url.path().is_empty() || url.path() == "/" {
            return Some("it names no socket path (write unix:///path/to/docker.sock)".into());
        }
    } else if url.host_str().is_none_or(str::is_empty) {
        return Some("it names no host".into());
    }
    None
}

/// What is wrong with a docker context name (`[a-zA-Z0-9][a-zA-Z0-9_.+-]+`).
fn context_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("it is empty".into());
    }
    let len = name.chars().count();
    if len > MAX_CONTEXT_CHARS {
        return Some(format!(
            "it is {len} characters long (the limit is {MAX_CONTEXT_CHARS})"
        ));
    }
    if let Some(c) = name.chars().find(|&c| is_hidden(c)) {
        return Some(format!(
            "it contains the {} {}",
            hidden_kind(c),
            CharText(c)
        ));
    }
    if name.chars().any(char::is_whitespace) {
        return Some("it contains whitespace".into());
    }
    if let Some(c) = name
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '+' | '-')))
    {
        return Some(format!("it contains {}, which is not allowed", CharText(c)));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Some("it must start with a letter or digit".into());
    }
    if len < 2 {
        return Some("it is shorter than 2 characters".into());
    }
    None
}

/// True if `span` covers a bare key followed by `.` (a dotted key made a table).
fn is_dotted_key_at(text: &str, span: Option<std::ops::Range<usize>>) -> bool {
    let Some(span) = span else { return false };
    let (Some(key), Some(rest)) = (text.get(span.clone()), text.get(span.end..)) else {
        return false;
    };
    !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && rest.trim_start_matches([' ', '\t']).starts_with('.')
}

// ---------------------------------------------------------------------------

// ---------------------------------------------------------------------------
// Name and label rules.

/// Box ids and volume names: `[A-Za-z0-9][A-Za-z0-9_.-]*`, at most `max` characters.
fn name_problem(name: &str, max: usize) -> Option<String> {
    if name.is_empty() {
        return Some("it is empty".into());
    }
    let len = name.chars().count();
    if len > max {
        return Some(format!("it is {len} characters long (the limit is {max})"));
    }
    if let Some(c) = name.chars().find(|&c| is_hidden(c)) {
        return Some(format!(
            "it contains the {} {}",
            hidden_kind(c),
            CharText(c)
        ));
    }
    if name.chars().any(char::is_whitespace) {
        return Some("it contains whitespace".into());
    }
    if let Some(c) = name.chars().find(|&c| c == '/' || c == '\\') {
        return Some(format!("it contains the path separator {}", CharText(c)));
    }
    if name == "." || name == ".." {
        return Some("it is a path component".into());
    }
    if let Some(c) = name
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Some(format!("it contains {}, which is not allowed", CharText(c)));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Some("it must start with a letter or digit".into());
    }
    None
}

fn label_key_problem(key: &str) -> Option<String> {
    if key.is_empty() {
        return Some("label key is empty; give a key such as \"ca.sandbox.owner\"".into());
    }
    if key == SANDBOX_LABEL {
        return Some(format!(
            "label key \"{SANDBOX_LABEL}\" is reserved: sandboxctl always requires \
             {SANDBOX_LABEL}={SANDBOX_VALUE} itself; remove it"
        ));
    }
    let len = key.chars().count();
    if len > MAX_LABEL_KEY_CHARS {
        return Some(format!(
            "label key is {len} characters long (the limit is {MAX_LABEL_KEY_CHARS}); shorten it"
        ));
    }
    if let Some(c) = key.chars().find(|&c| is_hidden(c)) {
        return Some(format!(
            "label key contains the {} {}; remove it",
            hidden_kind(c),
            CharText(c)
        ));
    }
    if key.contains('=') {
        return Some("label key contains '=', which separates key from value; remove it".into());
    }
    if key.chars().any(char::is_whitespace) {
        return Some("label key contains whitespace; remove it".into());
    }
    if let Some(c) = key
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-')))
    {
        return Some(format!(
            "label key contains {}; label keys may contain only letters, digits, \
             '.', '_', '/' and '-'",
            CharText(c)
        ));
    }
    let alnum = |c: char| c.is_ascii_alphanumeric();
    if !key.starts_with(alnum) || !key.ends_with(alnum) {
        return Some("label key must start and end with a letter or digit; fix it".into());
    }
    None
}

fn label_value_problem(value: &str) -> Option<String> {
    if value.is_empty() {
        return Some(
            "label value is empty (often an unset shell variable); give the exact value the \
             objects carry"
                .into(),
        );
    }
    let len = value.chars().count();
    if len > MAX_LABEL_VALUE_CHARS {
        return Some(format!(
            "label value is {len} characters long (the limit is {MAX_LABEL_VALUE_CHARS}); \
             shorten it"
        ));
    }
    if let Some(c) = value.chars().find(|&c| is_hidden(c)) {
        return Some(format!(
            "label value contains the {} {}; remove it",
            hidden_kind(c),
            CharText(c)
        ));
    }
    if value.starts_with(char::is_whitespace) || value.ends_with(char::is_whitespace) {
        return Some("label value has leading or trailing whitespace; remove it".into());
    }
    None
}

/// Control characters and invisible formatting characters (bidi overrides,
/// zero-width characters, BOM) that must never appear in names or labels, nor
/// reach a terminal unescaped.
fn is_hidden(c: char) -> bool {
    crate::text::is_hidden(c)
}

fn hidden_kind(c: char) -> &'static str {
    if c.is_control() {
        "control character"
    } else {
        "invisible character"
    }
}

// ---------------------------------------------------------------------------
// Positions, nesting scan and message hygiene.

/// The 1-based line and column (in characters) of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    (line, before[line_start..].chars().count() + 1)
}

enum TooNested {
    Brackets,
    Dots,
}

/// Finds the first `[`/`{` nested deeper than [`MAX_NESTING`], or the first `.`
/// beyond [`MAX_KEY_DOTS`] on one line, outside strings and comments. Only an
/// approximation of TOML's grammar, but it never looks inside strings or
/// comments, so it cannot refuse a file that the format would accept.
fn scan_nesting(text: &str) -> Option<(usize, TooNested)> {
    #[derive(Clone, Copy, PartialEq)]
    enum Lex {
        Code,
        Comment,
        Basic,
        MultiBasic,
        Literal,
        MultiLiteral,
    }
    let b = text.as_bytes();
    let (mut i, mut depth, mut dots, mut lex) = (0, 0usize, 0usize, Lex::Code);
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            dots = 0;
        }
        match lex {
            Lex::Code => match c {
                b'#' => lex = Lex::Comment,
                b'"' if b[i..].starts_with(b"\"\"\"") => {
                    lex = Lex::MultiBasic;
                    i += 3;
                    continue;
                }
                b'"' => lex = Lex::Basic,
                b'\'' if b[i..].starts_with(b"'''") => {
                    lex = Lex::MultiLiteral;
                    i += 3;
                    continue;
                }
                b'\'' => lex = Lex::Literal,
                b'[' | b'{' => {
                    depth += 1;
                    if depth > MAX_NESTING {
                        return Some((i, TooNested::Brackets));
                    }
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                b'.' => {
                    dots += 1;
                    if dots > MAX_KEY_DOTS {
                        return Some((i, TooNested::Dots));
                    }
                }
                _ => {}
            },
            Lex::Comment => {
                if c == b'\n' {
                    lex = Lex::Code;
                }
            }
            Lex::Basic => match c {
                b'\\' if b.get(i + 1) != Some(&b'\n') => {
                    i += 2;
                    continue;
                }
                b'"' | b'\n' => lex = Lex::Code,
                _ => {}
            },
            Lex::MultiBasic => match c {
                b'\\' if b.get(i + 1) != Some(&b'\n') => {
                    i += 2;
                    continue;
                }
                b'"' if b[i..].starts_with(b"\"\"\"") => {
                    lex = Lex::Code;
                    i += 3;
                    continue;
                }
                _ => {}
            },
            Lex::Literal => {
                if c == b'\'' || c == b'\n' {
                    lex = Lex::Code;
                }
            }
            Lex::MultiLiteral => {
                if b[i..].starts_with(b"'''") {
                    lex = Lex::Code;
                    i += 3;
                    continue;
                }
            }
        }
        i += 1;
    }
    None
}

/// A parser message made safe to print: one line, control and invisible
/// characters escaped, at most [`MESSAGE_CHARS`] characters.
fn clean_message(message: &str) -> String {
    let mut out = String::new();
    for (n, c) in message.chars().enumerate() {
        if n == MESSAGE_CHARS {
            out.push_str("...");
            break;
        }
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if is_hidden(c) => out.push_str(&escaped(c).to_string()),
            c => out.push(c),
        }
    }
    out
}

/// A value from the file, quoted and escaped like Rust's `{:?}` (hidden
/// characters as `\u{..}`), shortened past [`SHOW_CHARS`] characters.
struct Shown<'a>(&'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.0.chars().count();
        let shown = if total > SHOW_CHARS {
            SHOW_CHARS - 16
        } else {
            total
        };
        f.write_str("\"")?;
        for c in self.0.chars().take(shown) {
            match c {
                '"' => f.write_str("\\\"")?,
                '\\' => f.write_str("\\\\")?,
                c if is_hidden(c) => write!(f, "{}", escaped(c))?,
                c => write!(f, "{c}")?,
            }
        }
        f.write_str("\"")?;
        if shown < total {
            write!(f, "... ({total} characters)")?;
        }
        Ok(())
    }
}

/// A character for a message: quoted, hidden characters escaped.
struct CharText(char);

impl fmt::Display for CharText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            '\'' => f.write_str("'\\''"),
            c if is_hidden(c) => write!(f, "'{}'", escaped(c)),
            c => write!(f, "'{c}'"),
        }
    }
}

/// `\n`, `\t`, `\u{7}`, `\u{202e}`: a hidden character in escaped form.
fn escaped(c: char) -> impl fmt::Display {
    if c.is_control() {
        c.escape_debug().to_string()
    } else {
        c.escape_unicode().to_string()
    }
}

/// Text from the file without quotes (for keys in backticks): hidden
/// characters escaped, shortened past [`SHOW_CHARS`] characters.
struct Bare<'a>(&'a str);

impl fmt::Display for Bare<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.0.chars().count();
        let shown = if total > SHOW_CHARS {
            SHOW_CHARS - 16
        } else {
            total
        };
        for c in self.0.chars().take(shown) {
            if is_hidden(c) {
                write!(f, "{}", escaped(c))?;
            } else {
                write!(f, "{c}")?;
            }
        }
        if shown < total {
            write!(f, "... ({total} characters)")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<DesiredState, StateError> {
        DesiredState::parse(text.as_bytes(), Path::new("s.toml"))
    }

    /// Every problem `check` finds, as messages.
    fn all(text: &str) -> Vec<String> {
        match check(text.as_bytes(), Path::new("s.toml")) {
            Ok(state) => panic!("accepted {text:?}: {state:?}"),
            Err(errors) => errors.iter().map(ToString::to_string).collect(),
        }
    }

    fn ids(state: &DesiredState) -> Vec<&str> {
        state.boxes.iter().map(|b| b.id.as_str()).collect()
    }

    fn kept(state: &DesiredState) -> Vec<&str> {
        state.keep_volumes.iter().map(|k| k.name.as_str()).collect()
    }

    fn err(text: &str) -> String {
        match parse(text) {
            Ok(state) => panic!("accepted {text:?}: {state:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn parses_the_full_format() {
        let state = parse(
            "[scope]\nlabels = { \"ca.sandbox.owner\" = \"team-a\" }\n\n\
             [[box]]\nid = \"explore-ripgrep\"\n\n[[box]]\nid = \"B2.x_y-z\"\n\n\
             [volumes]\nkeep = [\"ca-sbx-notes\", \"n2\"]\n",
        )
        .unwrap();
        assert_eq!(state.source.as_deref(), Some(Path::new("s.toml")));
        assert_eq!(state.scope.get("ca.sandbox.owner").unwrap(), "team-a");
        assert_eq!(ids(&state), ["B2.x_y-z", "explore-ripgrep"]);
        assert_eq!(kept(&state), ["ca-sbx-notes", "n2"]);
        assert_eq!((state.boxes[0].line, state.boxes[1].line), (8, 5));
        assert_eq!(state.keep_volumes[0].line, 11);
        assert_eq!(state.policy, Policy::default());
        assert!(state.engines.is_empty());
    }

    #[test]
    fn empty_and_comment_only_files_declare_nothing() {
        for text in ["", "\n", "# nothing\n", "[scope]\n[volumes]\n"] {
            let state = parse(text).unwrap();
            assert!(
                state.boxes.is_empty() && state.keep_volumes.is_empty() && state.scope.is_empty()
            );
        }
        assert_eq!(DesiredState::empty().source, None);
    }

    #[test]
    fn scope_labels_as_a_table_and_dotted_key() {
        let state = parse("[scope.labels]\n\"a.b\" = \"c\"\nowner = \"x\"\n").unwrap();
        assert_eq!(state.scope.len(), 2);
        let state = parse("[scope]\nlabels.owner = \"x\"\n").unwrap();
        assert_eq!(state.scope.get("owner").unwrap(), "x");
    }

    #[test]
    fn bom_and_crlf_are_accepted_and_positions_skip_the_bom() {
        let state = parse("\u{feff}[[box]]\r\nid = \"a\"\r\n").unwrap();
        assert_eq!(ids(&state), ["a"]);
        let e = parse("\u{feff}[[box]]\r\nid = \"a\"\r\n[[box]]\r\nid = \"a\"\r\n").unwrap_err();
        assert_eq!(e.line_col(), Some((4, 6)));
        assert_eq!(
            e.to_string(),
            "s.toml:4:6: duplicate box id \"a\" (first declared at 2:6); remove one of them"
        );
    }

    #[test]
    fn duplicate_box_message_matches_the_contract() {
        assert_eq!(
            err("[[box]]\nid = \"a\"\n\n[[box]]\nid = \"a\"\n"),
            "s.toml:5:6: duplicate box id \"a\" (first declared at 2:6); remove one of them"
        );
    }

    #[test]
    fn the_first_problem_in_the_file_is_reported() {
        // The bad label (line 2) comes before the bad box (line 4) and keep (line 6).
        let e = parse(
            "[scope]\nlabels = { \"ca.sandbox\" = \"1\" }\n[[box]]\nid = \"a b\"\n\
             [volumes]\nkeep = [\"\"]\n",
        )
        .unwrap_err();
        assert_eq!(e.line_col(), Some((2, 12)));
        assert!(
            matches!(e.kind, StateErrorKind::InvalidScopeLabel { .. }),
            "{e}"
        );
        let e = parse("[volumes]\nkeep = [\"/x\"]\n[[box]]\nid = \"a b\"\n").unwrap_err();
        assert!(
            matches!(e.kind, StateErrorKind::InvalidVolumeName { .. }),
            "{e}"
        );
    }

    #[test]
    fn syntax_and_schema_errors_carry_positions() {
        let e = parse("[volumes]\nkeep = [\"a\"\n").unwrap_err();
        assert!(matches!(e.kind, StateErrorKind::Syntax { .. }), "{e}");
        assert_eq!(e.line_col().unwrap().0, 2);
        let e = parse("[[box]]\nid = 1\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("s.toml:2:6: invalid type: integer `1`, expected a string; {FORMAT_HINT}")
        );
        // Both problems, in file order: the table (missing id) comes before its key.
        assert_eq!(
            all("[[box]]\nname = \"a\"\n"),
            [
                "s.toml:1:1: missing key `id`; add id = \"...\" to this [[box]] table",
                "s.toml:2:1: unknown key `name`, expected one of `id`, `engine`, `expires`, \
                 `ttl`; remove it or fix its spelling"
            ]
        );
        assert_eq!(
            err("[[box]]\n"),
            "s.toml:1:1: missing key `id`; add id = \"...\" to this [[box]] table"
        );
        assert_eq!(
            err("[box]\nid = \"a\"\n"),
            "s.toml:1:1: invalid type: map, expected a sequence; write [[box]] (double \
             brackets, one table per box), not [box]"
        );
        assert!(
            err("[scope]\nlabels = { ca.sandbox.owner = \"x\" }\n").ends_with(
                "quote label keys that contain dots, e.g. \"ca.sandbox.owner\" = \"team-a\""
            )
        );
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        assert_eq!(line_col("ééé = 1", 6), (1, 4));
        assert_eq!(line_col("a\nb", 2), (2, 1));
        assert_eq!(line_col("a\nb", 99), (2, 2));
        assert_eq!(line_col("é", 1), (1, 1));
        assert_eq!(line_col("", 0), (1, 1));
    }

    #[test]
    fn invalid_utf8_points_at_the_first_bad_byte() {
        let e =
            DesiredState::parse(b"# ok\n#\xc3\xa9 \xff\xfe\n", Path::new("s.toml")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "s.toml:2:4: state file is not valid UTF-8 (byte 0xFF); save it as UTF-8"
        );
    }

    #[test]
    fn oversized_input_is_refused_before_parsing() {
        let big = vec![b'#'; MAX_STATE_BYTES as usize + 1];
        let e = DesiredState::parse(&big, Path::new("s.toml")).unwrap_err();
        assert!(
            matches!(e.kind, StateErrorKind::TooLarge { size: Some(_), .. }),
            "{e}"
        );
        assert!(e
            .to_string()
            .contains("too large (1048577 bytes; the limit is 1048576 bytes)"));
        let mut ok = vec![b'#'; MAX_STATE_BYTES as usize];
        ok[0] = b'#';
        DesiredState::parse(&ok, Path::new("s.toml")).unwrap();
    }

    #[test]
    fn deep_nesting_is_refused_by_the_scan() {
        for (text, limit_hit) in [
            (format!("a = {}", "[".repeat(10_000)), "brackets nested"),
            (format!("a = {}", "{b=".repeat(10_000)), "brackets nested"),
            (
                format!("a{} = 1", ".a".repeat(10_000)),
                "'.' outside quotes",
            ),
            (format!("[a{}]", ".a".repeat(100)), "'.' outside quotes"),
        ] {
            let e = parse(&text).unwrap_err();
            assert!(e.to_string().contains(limit_hit), "{e}");
        }
        // Nesting just within the limit reaches the parser (and fails on schema).
        let text = format!("a = {}{}", "[".repeat(MAX_NESTING), "]".repeat(MAX_NESTING));
        assert!(matches!(
            parse(&text).unwrap_err().kind,
            StateErrorKind::UnknownKey { .. }
        ));
    }

    #[test]
    fn the_scan_ignores_strings_and_comments() {
        let deep = "[".repeat(100);
        let dots = ".".repeat(100);
        let text = format!(
            "# {deep} {dots}\n[scope]\nlabels = {{ \"{dots}a\" = \"{deep}\\\"{deep}\" }}\n\
             [[box]] # {deep}\nid = 'x{dots}'\n[volumes]\nkeep = [\"\"\"a{deep}\n\"\"\"]\n\
             # '''{deep}\n"
        );
        let e = parse(&text).unwrap_err();
        // Reached validation: the first complaint is the label key, not the nesting.
        assert!(
            matches!(e.kind, StateErrorKind::InvalidScopeLabel { .. }),
            "{e}"
        );
        assert!(scan_nesting(&format!("a = '''{deep}'''\nb = \"\"\"{dots}\"\"\"")).is_none());
    }

    #[test]
    fn box_id_rules() {
        for ok in ["a", "A", "0", "explore-ripgrep", "a.b_c-d", "a..b"] {
            check_box_id(ok).unwrap();
        }
        check_box_id(&"a".repeat(MAX_BOX_ID_CHARS)).unwrap();
        for (bad, why) in [
            ("", "empty"),
            ("a\u{7}", "control character '\\u{7}'"),
            ("a\u{202e}b", "invisible character '\\u{202e}'"),
            ("a b", "whitespace"),
            ("a\tb", "control character '\\t'"),
            ("a/b", "path separator '/'"),
            ("a\\b", "path separator '\\'"),
            ("..", "path component"),
            (".", "path component"),
            ("-rf", "start with a letter or digit"),
            ("_a", "start with a letter or digit"),
            ("a:b", "':', which is not allowed"),
            ("é", "'é', which is not allowed"),
        ] {
            let e = check_box_id(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        assert!(check_box_id(&"a".repeat(MAX_BOX_ID_CHARS + 1))
            .unwrap_err()
            .contains("129 characters long"));
    }

    #[test]
    fn volume_name_rules() {
        check_volume_name("ca-sbx-notes").unwrap();
        check_volume_name(&"f".repeat(64)).unwrap();
        check_volume_name(&"v".repeat(MAX_VOLUME_NAME_CHARS)).unwrap();
        for bad in ["", "../x", "a b", ".hidden", "a:rw", "a\nb"] {
            assert!(check_volume_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_volume_name(&"v".repeat(MAX_VOLUME_NAME_CHARS + 1)).is_err());
    }

    #[test]
    fn label_rules() {
        for (k, v) in [
            ("ca.sandbox.owner", "team-a"),
            ("owner", "x"),
            ("io.example/team_1", "Ünïcode value with spaces"),
            ("ca.sandbox.id", "box"),
            ("a", "a=b"),
        ] {
            check_label(k, v).unwrap();
        }
        for (k, v, why) in [
            ("", "x", "label key is empty"),
            ("ca.sandbox", "1", "reserved"),
            ("a=b", "x", "contains '='"),
            ("a\u{1b}", "x", "control character '\\u{1b}'"),
            ("a b", "x", "whitespace"),
            ("é", "x", "contains 'é'"),
            ("a:b", "x", "contains ':'"),
            (".a", "x", "start and end with a letter or digit"),
            ("a-", "x", "start and end with a letter or digit"),
            ("a", "", "label value is empty"),
            ("a", "x\ny", "control character '\\n'"),
            ("a", "x\u{200b}", "invisible character '\\u{200b}'"),
            ("a", " x", "leading or trailing whitespace"),
        ] {
            let e = check_label(k, v).unwrap_err();
            assert!(e.contains(why), "{k:?}={v:?}: {e}");
        }
        assert!(check_label(&"k".repeat(MAX_LABEL_KEY_CHARS + 1), "v").is_err());
        assert!(check_label("k", &"v".repeat(MAX_LABEL_VALUE_CHARS + 1)).is_err());
        check_label(
            &"k".repeat(MAX_LABEL_KEY_CHARS),
            &"v".repeat(MAX_LABEL_VALUE_CHARS),
        )
        .unwrap();
    }

    const FULL: &str = r#"[policy]
grace = "10m"

[[engine]]
name = "ci-1"
host = "ssh://runner@ci-1"

[[engine]]
name = "mac"
context = "colima"

[[engine]]
name = "local"

[[box]]
id = "demo"
engine = "ci-1"
expires = "2026-12-24T18:00:00Z"

[[box]]
id = "demo"
engine = "local"
ttl = "8h"

[[box]]
id = "always"

[volumes]
keep = ["notes", { engine = "ci-1", name = "cache" }, { name = "cache", engine = "mac" }]
"#;

    #[test]
    fn parses_engines_policy_expiry_and_per_engine_keeps() {
        let state = parse(FULL).unwrap();
        let at = |secs| Expiry::At(SystemTime::UNIX_EPOCH + Duration::from_secs(secs));
        let engine = |name: &str| Some(name.to_string());
        assert_eq!(
            state,
            DesiredState {
                source: Some(PathBuf::from("s.toml")),
                scope: Labels::new(),
                boxes: vec![
                    BoxDecl {
                        id: "always".into(),
                        engine: None,
                        expiry: None,
                        line: 26,
                    },
                    BoxDecl {
                        id: "demo".into(),
                        engine: engine("ci-1"),
                        expiry: Some(at(1_798_135_200)),
                        line: 16,
                    },
                    BoxDecl {
                        id: "demo".into(),
                        engine: engine("local"),
                        expiry: Some(Expiry::Ttl(Duration::from_secs(8 * 3600))),
                        line: 21,
                    },
                ],
                keep_volumes: vec![
                    KeepVolume {
                        name: "cache".into(),
                        engine: engine("ci-1"),
                        line: 29,
                    },
                    KeepVolume {
                        name: "cache".into(),
                        engine: engine("mac"),
                        line: 29,
                    },
                    KeepVolume {
                        name: "notes".into(),
                        engine: None,
                        line: 29,
                    },
                ],
                policy: Policy {
                    grace: Some(Duration::from_secs(600)),
                },
                engines: vec![
                    EngineDecl {
                        name: "ci-1".into(),
                        target: EngineTarget::Host("ssh://runner@ci-1".into()),
                        line: 5,
                    },
                    EngineDecl {
                        name: "mac".into(),
                        target: EngineTarget::Context("colima".into()),
                        line: 9,
                    },
                    EngineDecl {
                        name: "local".into(),
                        target: EngineTarget::Default,
                        line: 13,
                    },
                ],
            }
        );
        // check() agrees with parse() on a valid file.
        assert_eq!(check(FULL.as_bytes(), Path::new("s.toml")).unwrap(), state);
    }

    #[test]
    fn expires_may_be_an_unquoted_toml_datetime() {
        let quoted = parse("[[box]]\nid = \"a\"\nexpires = \"2026-12-24T18:00:00Z\"\n").unwrap();
        let bare = parse("[[box]]\nid = \"a\"\nexpires = 2026-12-24T18:00:00Z\n").unwrap();
        assert_eq!(quoted.boxes, bare.boxes);
        assert_eq!(
            err("[[box]]\nid = \"a\"\nexpires = 2026-12-24T18:00:00+02:00\n"),
            "s.toml:3:11: invalid expires time \"2026-12-24T18:00:00+02:00\": only UTC times \
             are accepted: end it with Z (or +00:00); write an RFC 3339 time in UTC, e.g. \
             \"2026-12-24T18:00:00Z\""
        );
    }

    #[test]
    fn duration_rules_and_boundaries() {
        let ok = |s: &str| parse_duration(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
        assert_eq!(ok("0s"), Duration::ZERO);
        assert_eq!(ok("1ns"), Duration::from_nanos(1));
        assert_eq!(ok("30s"), Duration::from_secs(30));
        assert_eq!(ok("10m"), Duration::from_secs(600));
        assert_eq!(ok("8h"), Duration::from_secs(8 * 3600));
        assert_eq!(ok("2d"), Duration::from_secs(2 * 86_400));
        assert_eq!(ok("1h 30m"), Duration::from_secs(5400));
        assert_eq!(ok("3650d"), MAX_DURATION);
        for (bad, why) in [
            ("", "it is empty"),
            (" 10m", "leading or trailing whitespace"),
            ("10m ", "leading or trailing whitespace"),
            ("10", "time unit needed"),
            ("-1s", "expected number"),
            ("10 fortnights", "unknown time unit"),
            ("3651d", "longer than the limit of 3650 days"),
            ("3650d 1ns", "longer than the limit of 3650 days"),
            ("99999999999999999999s", "too large"),
        ] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
            assert!(e.ends_with("e.g. 30s, 10m, 8h or 2d"), "{bad:?}: {e}");
        }
        // A zero ttl is refused in the file (grace 0 is fine).
        assert!(err("[[box]]\nid = \"a\"\nttl = \"0s\"\n").contains("a ttl of zero"));
        assert_eq!(
            parse("[policy]\ngrace = \"0s\"\n").unwrap().policy.grace,
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn time_rules_and_boundaries() {
        let secs = |s: &str| {
            parse_time(s)
                .unwrap_or_else(|e| panic!("{s:?}: {e}"))
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
        };
        assert_eq!(secs("1970-01-01T00:00:00Z"), Duration::ZERO);
        assert_eq!(
            secs("2026-12-24T18:00:00Z"),
            Duration::from_secs(1_798_135_200)
        );
        assert_eq!(
            secs("2026-12-24T18:00:00+00:00"),
            Duration::from_secs(1_798_135_200)
        );
        assert_eq!(
            secs("2026-12-24T18:00:00.5Z"),
            Duration::from_millis(1_798_135_200_500)
        );
        assert_eq!(
            secs("2028-02-29T00:00:00Z"),
            Duration::from_secs(1_835_395_200)
        );
        assert_eq!(
            secs("9999-12-31T23:59:59Z"),
            Duration::from_secs(253_402_300_799)
        );
        for (bad, why) in [
            ("", "it is empty"),
            ("2026-12-24T18:00:00+01:00", "only UTC times are accepted"),
            ("2026-12-24T18:00:00", "only UTC times are accepted"),
            ("2026-02-29T00:00:00Z", "out of range"),
            ("2026-12-24T24:00:00Z", "out of range"),
            ("2026-13-01T00:00:00Z", "out of range"),
            ("1969-12-31T23:59:59Z", "out of range"),
            ("2026-12-24 18:00:00Z", "format is invalid"),
            ("2026-12-24", "format is invalid"),
            ("tomorrow", "format is invalid"),
        ] {
            let e = parse_time(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
            assert!(e.ends_with("\"2026-12-24T18:00:00Z\""), "{bad:?}: {e}");
        }
    }

    #[test]
    fn engine_host_and_context_rules() {
        for ok in [
            "unix:///var/run/docker.sock",
            "tcp://ci-1:2376",
            "tcp://127.0.0.1:2375",
            "http://ci-1:2375",
            "https://ci-1:2376",
            "ssh://runner@ci-1",
            "ssh://runner@ci-1:2222",
        ] {
            assert_eq!(host_problem(ok), None, "{ok}");
        }
        for (bad, why) in [
            ("", "empty"),
            ("ci-1:2376", "scheme \"ci-1\""),
            ("npipe:////./pipe/docker_engine", "scheme \"npipe\""),
            ("/var/run/docker.sock", "not a URL"),
            ("unix://", "no socket path"),
            ("tcp://", "no host"),
            ("ssh://runner@", "not a URL"),
            ("tcp://ci 1", "whitespace"),
            ("tcp://ci-1\u{202e}", "invisible character"),
        ] {
            let e = host_problem(bad).unwrap_or_else(|| panic!("{bad:?} accepted"));
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        assert!(host_problem(&format!("tcp://{}", "h".repeat(MAX_HOST_CHARS))).is_some());
        for ok in ["colima", "desktop-linux", "a.b+c_d", "default", "c2"] {
            assert_eq!(context_problem(ok), None, "{ok}");
        }
        for bad in ["", "c", "-x", "a/b", "a b", "a:b", "é1"] {
            assert!(context_problem(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn one_id_on_two_engines_is_two_entries_but_every_engine_overlaps() {
        let engines = "[[engine]]\nname = \"a\"\n[[engine]]\nname = \"b\"\n";
        let state = parse(&format!(
            "{engines}[[box]]\nid = \"x\"\nengine = \"b\"\n[[box]]\nid = \"x\"\nengine = \"a\"\n"
        ))
        .unwrap();
        let on: Vec<_> = state.boxes.iter().map(|b| b.engine.as_deref()).collect();
        assert_eq!(on, [Some("a"), Some("b")]);
        assert!(err(&format!(
            "{engines}[[box]]\nid = \"x\"\nengine = \"b\"\n[[box]]\nid = \"x\"\n"
        ))
        .contains("duplicate box id \"x\" (first declared at 6:6 on engine \"b\""));
        // The same for kept volumes.
        let state = parse(&format!(
            "{engines}[volumes]\nkeep = [{{ engine = \"b\", name = \"v\" }}, {{ engine = \"a\", name = \"v\" }}]\n"
        ))
        .unwrap();
        let on: Vec<_> = state
            .keep_volumes
            .iter()
            .map(|k| k.engine.as_deref())
            .collect();
        assert_eq!(on, [Some("a"), Some("b")]);
    }

    #[test]
    fn check_reports_every_problem_and_parse_the_first() {
        let text = "[[box]]\nid = \"a b\"\n[[box]]\nid = \"ok\"\nengine = \"nope\"\n\
                    [volumes]\nkeep = [\"ok\", \"ok\"]\n[policy]\ngrace = 5\n";
        let errors = check(text.as_bytes(), Path::new("s.toml")).unwrap_err();
        let at: Vec<_> = errors.iter().map(|e| e.line_col().unwrap()).collect();
        assert_eq!(at, [(2, 6), (5, 10), (7, 15), (9, 9)]);
        assert!(matches!(
            errors[0].kind,
            StateErrorKind::InvalidBoxId { .. }
        ));
        assert!(matches!(
            errors[1].kind,
            StateErrorKind::UnknownEngine { .. }
        ));
        assert!(matches!(
            errors[2].kind,
            StateErrorKind::DuplicateKeep { .. }
        ));
        assert!(matches!(errors[3].kind, StateErrorKind::WrongType { .. }));
        assert_eq!(parse(text).unwrap_err().to_string(), errors[0].to_string());
        // A syntax error stops parsing: it is the only one.
        let errors = check(b"[[box]]\nid = \"a b\"\n[volumes\n", Path::new("s.toml")).unwrap_err();
        assert_eq!(errors.len(), 1);
        assert!(matches!(errors[0].kind, StateErrorKind::Syntax { .. }));
    }

    #[test]
    fn an_unreadable_file_keeps_the_io_error_as_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let errors = check_file(&dir.path().join("nope.toml")).unwrap_err();
        assert_eq!(errors.len(), 1);
        assert!(matches!(errors[0].kind, StateErrorKind::NotFound));
        let e = StateError::new(
            Path::new("s.toml"),
            None,
            StateErrorKind::Read(std::io::Error::other("disk on fire")),
        );
        assert_eq!(
            e.to_string(),
            "s.toml: cannot read state file: disk on fire; check that it is a readable file"
        );
        let source = std::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("disk on fire"));
    }

    #[test]
    fn label_args_split_at_the_first_equals() {
        assert_eq!(
            parse_label_arg("owner=a=b").unwrap(),
            ("owner".to_string(), "a=b".to_string())
        );
        assert!(parse_label_arg("owner").unwrap_err().contains("no '='"));
        assert!(parse_label_arg("=x")
            .unwrap_err()
            .contains("label key is empty"));
        assert!(parse_label_arg("owner=")
            .unwrap_err()
            .contains("unset shell variable"));
    }

    #[test]
    fn hostile_text_is_escaped_and_shortened_in_messages() {
        let e = err(&format!(
            "[[box]]\nid = \"\\u001b[31m{}\"\n",
            "x".repeat(5000)
        ));
        assert!(!e.contains('\u{1b}'), "{e}");
        assert!(e.contains("\"\\u{1b}[31m"), "{e}");
        assert!(e.contains("(5005 characters)"), "{e}");
        assert!(e.len() < 400, "{e}");
        let e = err(&format!("\"\\u202e{}\" = 1\n", "k".repeat(5000)));
        assert!(!e.contains('\u{202e}'), "{e}");
        assert!(e.len() < 500, "{e}");
        assert_eq!(clean_message("a\nb\u{7}"), "a b\\u{7}");
    }

    #[test]
    fn load_reports_missing_directories_and_oversized_files() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.toml");
        let e = DesiredState::load(&missing).unwrap_err();
        assert!(matches!(e.kind, StateErrorKind::NotFound), "{e}");
        assert!(e
            .to_string()
            .contains("does not exist; check the path given with --state"));
        assert_eq!(e.path(), missing);
        assert_eq!(e.line_col(), None);

        let e = DesiredState::load(dir.path()).unwrap_err();
        assert!(matches!(e.kind, StateErrorKind::NotAFile), "{e}");

        let big = dir.path().join("big.toml");
        std::fs::write(&big, vec![b'#'; MAX_STATE_BYTES as usize + 10]).unwrap();
        let e = DesiredState::load(&big).unwrap_err();
        assert!(
            matches!(e.kind, StateErrorKind::TooLarge { size: Some(n), .. } if n == MAX_STATE_BYTES + 10)
        );

        let good = dir.path().join("good.toml");
        std::fs::write(&good, "[[box]]\nid = \"a\"\n").unwrap();
        let state = DesiredState::load(&good).unwrap();
        assert_eq!(state.source.as_deref(), Some(good.as_path()));
        assert_eq!(DesiredState::load_or_default(Some(&good)).unwrap(), state);
        assert!(matches!(
            DesiredState::load_or_default(Some(&missing)),
            Err(StateError {
                kind: StateErrorKind::NotFound,
                ..
            })
        ));
    }

    #[cfg(unix)]
    #[test]
    fn load_stops_reading_an_endless_file() {
        let e = DesiredState::load(Path::new("/dev/zero")).unwrap_err();
        assert!(
            matches!(e.kind, StateErrorKind::TooLarge { size: None, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("more than 1048576 bytes"), "{e}");
    }
}
