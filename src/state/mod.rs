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
//! archive = "/var/lib/sbx"      # optional: archive each volume here before it is removed
//!
//! [[engine]]                    # optional: the engines this file names
//! name = "ci-1"
//! host = "ssh://runner@ci-1"    # or context = "colima"; neither: the default engine
//!
//! [[box]]                       # boxes that should exist: container and volume are kept
//! id = "explore-ripgrep"
//! engine = "ci-1"               # optional: on that engine only (else on every engine)
//! expires = "2026-12-24T18:00:00Z"   # optional, RFC 3339 UTC; or ttl = "8h"; not both
//! archive = false               # optional: its volumes go without an archive
//!
//! [volumes]
//! keep = ["ca-sbx-notes", { engine = "ci-1", name = "cache" }]   # a plain name: every engine
//!
//! [[notify]]                    # optional: where notifications go (docs/notify.md)
//! url = "https://hooks.example/sbx"  # or http:// to a loopback address only
//! secret_env = "SBX_NOTIFY_SECRET"   # the variable that holds the HMAC key
//! events = ["removed", "failed"]     # optional: default all four
//! before = "10m"                # optional: how far ahead `expiring` is sent
//! ```
//!
//! Every table and key is optional except `id` in a box and `name` in an engine
//! or a table entry of `keep`; an empty file declares nothing. Unknown keys
//! anywhere are errors, as are: a box declared twice on one engine (an entry
//! without `engine` counts for every engine), the same for `keep` entries, two
//! engines with one name, an `engine =` naming no `[[engine]]`, `host` together
//! with `context`, `expires` together with `ttl`.
//!
//! [`check_file`] (and `check`, on bytes) returns every problem in the file, in
//! file order; [`DesiredState::parse`] and [`DesiredState::load`] return the
//! first of them. A syntax error (and a
//! size, encoding or nesting error) stops parsing, so it is always alone.
//!
//! # The file is untrusted input
//!
//! * Size: at most [`MAX_STATE_BYTES`] (1 MiB). [`DesiredState::load`] checks the
//!   file's metadata and then reads at most one byte more than the limit, so a
//!   huge file is refused without reading it all. Only a regular file is
//!   read: a directory, a FIFO (opened without blocking, so one with no
//!   writer is refused at once), a socket or a device such as `/dev/zero`
//!   is refused, named.
//! * Encoding: UTF-8. A UTF-8 byte order mark is **accepted** and skipped (some
//!   editors write one); positions are then counted after it. CRLF line endings
//!   are accepted. Invalid UTF-8 is reported at the line and column of its first
//!   bad byte.
//! * Nesting: before TOML parsing, a scan outside strings and comments refuses
//!   brackets (`[`, `{`) nested more than [`MAX_NESTING`] deep and more than
//!   `MAX_KEY_DOTS` (16) `.` on one line (dotted keys nest tables too). A valid
//!   state file needs 2 and 1 (`scan` says why the `toml` crate's own limit is
//!   not enough).
//! * Box ids and engine names ([`check_box_id`]): `[A-Za-z0-9][A-Za-z0-9_.-]*`,
//!   at most `MAX_BOX_ID_CHARS` (128) characters; so no whitespace, control
//!   characters, `/`, `\` or `..`.
//! * Volume names in `keep` ([`check_volume_name`]): Docker's
//!   `[a-zA-Z0-9][a-zA-Z0-9_.-]*`, at most `MAX_VOLUME_NAME_CHARS` (255)
//!   characters.
//! * Scope labels ([`check_label`], also used for `--scope KEY=VALUE`): keys are
//!   `[A-Za-z0-9._/-]`, start and end with a letter or digit, at most
//!   `MAX_LABEL_KEY_CHARS` (128) characters, and are never `ca.sandbox` (always
//!   required as `ca.sandbox=1` by sandboxctl itself). Values are non-empty, at
//!   most `MAX_LABEL_VALUE_CHARS` (256) characters, with no control or invisible
//!   formatting characters and no leading or trailing whitespace.
//! * Engine hosts: a URL with scheme `unix`, `tcp`, `http`, `https` or `ssh`, at
//!   most `MAX_HOST_CHARS` (1024) characters, no whitespace or hidden characters;
//!   an `ssh://` user or host neither begins with `-` nor holds a control
//!   character, plainly or percent-encoded (`model::ssh_target_problem`).
//!   Contexts: Docker's `[a-zA-Z0-9][a-zA-Z0-9_.+-]+`.
//! * Durations (`parse_duration`): the one grammar of `model::duration`
//!   (`30s`, `10m`, `8h`, `2d`, `1h30m`; a unit required), at most 3650
//!   days; on the command line (`parse_flag_duration`) a bare number is
//!   seconds too. Times (`parse_time`): RFC 3339 in UTC.
//!
//! Text from the file that appears in a message is escaped (control and
//! invisible characters as `\u{..}`) and shortened, so a hostile file cannot
//! write terminal escapes or megabytes through an error message.
//!
//! # Files
//!
//! One job each, in the order a file goes through them: `read` (bytes and
//! encoding), `scan` (the nesting scan), `schema` (the TOML document walked
//! against the format), with `rules` (single values: ids, names, labels,
//! hosts, durations, times), `error` (the one error type and its messages)
//! and `show` (how text from the file appears in a message). This file keeps
//! the public types, the entry points, and re-exports what other modules use.

#![allow(
    clippy::result_large_err,
    reason = "StateError (144 bytes: path, position, kind) is built once per run on a cold path; \
              boxing it would only complicate the API"
)]

mod error;
mod read;
mod rules;
mod scan;
mod schema;
mod show;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::model::Labels;

pub use error::{StateError, StateErrorKind};
pub use read::MAX_STATE_BYTES;
pub use rules::{check_box_id, check_label, check_volume_name};
pub(crate) use rules::{parse_flag_duration, parse_label_arg, MAX_BOX_ID_CHARS};
pub use scan::MAX_NESTING;

/// Where the state file is looked for when neither `--state` nor `SANDBOXCTL_STATE` is given.
pub const DEFAULT_STATE_PATH: &str = "state/sandboxes.toml";

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
    /// `[[notify]]`, in file order: where notifications go.
    pub notify: Vec<NotifyDecl>,
}

/// One `[[notify]]` table: a receiver of notifications, its key still a
/// variable's name (resolved by `cli::config`, never read here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyDecl {
    /// `https://...`, or `http://` to a loopback address (`rules::notify_url_problem`).
    pub url: String,
    /// The environment variable that holds the HMAC key.
    pub secret_env: String,
    /// The events it gets, in the order of `NotifyEvent` (default: all four).
    pub events: Vec<crate::model::notify::NotifyEvent>,
    /// How long before a box is due `expiring` is sent (default 10m).
    pub before: Duration,
    /// The 1-based line of the table's `url` key (its header when it has none).
    pub line: usize,
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
    /// `archive = false`: its volumes go without an archive, even with
    /// `--archive` or `[policy] archive` (default true).
    pub archive: bool,
    /// The 1-based line of its `id` key.
    pub(crate) line: usize,
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
    /// `archive = false` (a table entry): when `destroy` takes it anyway, it
    /// goes without an archive (default true).
    pub archive: bool,
    /// The 1-based line of the entry.
    pub(crate) line: usize,
}

/// `[policy]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// `grace`: an undeclared box younger than this is left alone; `None`: no grace.
    pub grace: Option<Duration>,
    /// `max_lease`: the longest ttl a lease may carry; `None`: 24 hours.
    pub max_lease: Option<Duration>,
    /// `archive`: the folder volumes are archived to before they are removed
    /// (as `--archive DIR`); `None`: no archive.
    pub archive: Option<PathBuf>,
}

/// One `[[engine]]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineDecl {
    /// Its name (box-id rules), unique in the file.
    pub name: String,
    /// How to reach it.
    pub(crate) target: EngineTarget,
    /// `swarm = false`: its Swarm services, configs and secrets are out of
    /// scope (a swarm worker, whose swarm a manager entry manages), so an
    /// engine that cannot list them is no failure. Default true.
    pub swarm: bool,
    /// The 1-based line of its `name` key.
    line: usize,
}

/// How an engine is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EngineTarget {
    /// Neither `host` nor `context`: resolved the default way (DOCKER_HOST, ...).
    Default,
    /// `host = "..."`: a daemon URL (unix, tcp, http, https or ssh).
    Host(String),
    /// `context = "..."`: a docker context name.
    Context(String),
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
    /// Returns the first problem in the file (`check` gives all of them).
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
    let bytes = read::read_limited(path).map_err(|e| vec![e])?;
    check(&bytes, path)
}

/// Parses state file contents and returns the state, or every problem in it in
/// file order (never an empty list). A problem that stops parsing (size,
/// encoding, nesting, TOML syntax) is alone; every other rule is checked
/// everywhere. `path` is only used in messages and `source`.
pub(crate) fn check(bytes: &[u8], path: &Path) -> Result<DesiredState, Vec<StateError>> {
    let text = read::decode(bytes, path).map_err(|e| vec![e])?;
    scan::check_nesting(text, path).map_err(|e| vec![e])?;
    schema::walk(text, path)
}

/// Helpers for the unit tests of this folder.
#[cfg(test)]
mod testing {
    use std::path::Path;

    use super::{check, DesiredState, StateError};

    pub(super) fn parse(text: &str) -> Result<DesiredState, StateError> {
        DesiredState::parse(text.as_bytes(), Path::new("s.toml"))
    }

    /// Every problem `check` finds, as messages.
    pub(super) fn all(text: &str) -> Vec<String> {
        match check(text.as_bytes(), Path::new("s.toml")) {
            Ok(state) => panic!("accepted {text:?}: {state:?}"),
            Err(errors) => errors.iter().map(ToString::to_string).collect(),
        }
    }

    pub(super) fn ids(state: &DesiredState) -> Vec<&str> {
        state.boxes.iter().map(|b| b.id.as_str()).collect()
    }

    pub(super) fn kept(state: &DesiredState) -> Vec<&str> {
        state.keep_volumes.iter().map(|k| k.name.as_str()).collect()
    }

    pub(super) fn err(text: &str) -> String {
        match parse(text) {
            Ok(state) => panic!("accepted {text:?}: {state:?}"),
            Err(e) => e.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::parse;
    use super::*;

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
}
