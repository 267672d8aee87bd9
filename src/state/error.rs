//! The one error a state file can produce: [`StateError`], one problem at
//! one place in one file, its position stored once (`at`, 1-based line and
//! column in characters), and [`StateErrorKind`], what is wrong, with every
//! message the catalogue words (each ends with what to do about it).
//!
//! Owns the wording of every problem and the byte-offset-to-position rule
//! ([`line_col`]). Must not decide what is a problem (the other files of
//! this folder do) nor read anything; text from the file reaches a message
//! only through the `show` dialect (escaped and shortened).

use std::fmt;
use std::path::{Path, PathBuf};

use super::rules::{MAX_BOX_ID_CHARS, MAX_VOLUME_NAME_CHARS};
use super::show::{Bare, Shown};
use super::DEFAULT_STATE_PATH;

/// How many declared engine names an "engine is not declared" message lists.
const SHOW_ENGINES: usize = 8;

/// Why a state file was rejected: one problem, at one place in one file.
///
/// Displays as `path:line:col: message` (or `path: message` for problems with
/// the whole file), the message ending with what to do about it.
#[derive(Debug)]
pub struct StateError {
    /// The state file, as it was given.
    pub(crate) path: PathBuf,
    /// 1-based line and column (in characters) of the problem; `None` for
    /// problems with the whole file (not found, unreadable, too large).
    pub(crate) at: Option<(usize, usize)>,
    /// What is wrong.
    pub kind: StateErrorKind,
}

/// What is wrong with a state file. Positions inside a kind (`first`,
/// `other_at`) are 1-based `(line, col)` in the same file.
#[derive(Debug)]
pub enum StateErrorKind {
    /// The state file that was asked for does not exist.
    NotFound,
    /// The path names a directory, a FIFO, a socket or a device, not a
    /// regular file; `what` says which ("a directory").
    NotAFile { what: &'static str },
    /// The file exists but could not be read (permissions, I/O error).
    Read(std::io::Error),
    /// Larger than [`MAX_STATE_BYTES`](super::MAX_STATE_BYTES); `size` is `None`
    /// when it was only noticed while reading (the file does not report its size).
    TooLarge { size: Option<u64>, limit: u64 },
    /// Not UTF-8; the position is that of the first bad byte.
    InvalidUtf8 { byte: u8 },
    /// `[` or `{` nested deeper than [`MAX_NESTING`](super::MAX_NESTING); at the
    /// bracket over the limit.
    TooDeep { limit: usize },
    /// More than `MAX_KEY_DOTS` (16) dots on one line outside strings and comments.
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
    /// A box id outside the allowed charset or length (see [`check_box_id`](super::check_box_id)).
    InvalidBoxId { id: String, reason: String },
    /// An engine name outside the box-id rules.
    InvalidEngineName { name: String, reason: String },
    /// A volume name in `[volumes].keep` that Docker would not accept.
    InvalidVolumeName { name: String, reason: String },
    /// A `[scope].labels` entry refused by [`check_label`](super::check_label); at
    /// the key or the value.
    InvalidScopeLabel { key: String, reason: String },
    /// An engine `host` that is not a usable daemon URL.
    InvalidHost { host: String, reason: String },
    /// An engine `context` that is not a docker context name.
    InvalidContext { context: String, reason: String },
    /// A bad `grace`, `max_lease` or `ttl`; `reason` (from `parse_duration`,
    /// a predicate of the value: "is not a duration: use ...") says what a
    /// good one looks like.
    InvalidDuration {
        key: &'static str,
        value: String,
        reason: String,
    },
    /// A bad `expires`; `reason` (from `parse_time`) says what a good one looks like.
    InvalidTime { value: String, reason: String },
    /// A `[[notify]]` `url` refused (plain http to a non-loopback address,
    /// another scheme, a user or password in it); `reason` says why.
    InvalidNotifyUrl { url: String, reason: String },
    /// A `[[notify]]` `events` entry that names no event.
    UnknownNotifyEvent { event: String },
    /// A `[[notify]]` `secret_env` that is not a variable's name.
    InvalidSecretEnv { name: String, reason: String },
}

impl StateError {
    pub(super) fn new(path: &Path, at: Option<(usize, usize)>, kind: StateErrorKind) -> Self {
        StateError {
            path: path.to_path_buf(),
            at,
            kind,
        }
    }

    /// The 1-based line and column (in characters) the error points at; `None`
    /// for errors about the whole file (not found, unreadable, too large).
    pub fn line_col(&self) -> Option<(usize, usize)> {
        self.at
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
            K::NotAFile { what } => write!(
                f,
                "is {what}, not a state file; give the path of a regular .toml file"
            ),
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
                write!(f, "{key} {} {reason}", Shown(value))
            }
            K::InvalidTime { value, reason } => {
                write!(f, "invalid expires time {}: {reason}", Shown(value))
            }
            K::InvalidNotifyUrl { url, reason } => write!(
                f,
                "invalid notify url {}: {reason}; write url = \"https://host/path\" (or \
                 \"http://127.0.0.1:PORT/path\" for a receiver on this machine)",
                Shown(url)
            ),
            K::UnknownNotifyEvent { event } => write!(
                f,
                "unknown notify event {}; the events are \"expiring\", \"stopped\", \
                 \"removed\" and \"failed\" (leave events out for all four)",
                Shown(event)
            ),
            K::InvalidSecretEnv { name, reason } => write!(
                f,
                "invalid secret_env {}: {reason}; write the name of the environment variable \
                 that holds the key, e.g. secret_env = \"SBX_NOTIFY_SECRET\"",
                Shown(name)
            ),
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

/// The 1-based line and column (in characters) of byte `offset` in `text`.
pub(super) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    (line, before[line_start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::check_file;

    #[test]
    fn columns_count_characters_not_bytes() {
        assert_eq!(line_col("ééé = 1", 6), (1, 4));
        assert_eq!(line_col("a\nb", 2), (2, 1));
        assert_eq!(line_col("a\nb", 99), (2, 2));
        assert_eq!(line_col("é", 1), (1, 1));
        assert_eq!(line_col("", 0), (1, 1));
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
}
