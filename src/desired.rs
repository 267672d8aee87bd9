//! The desired state: loading and validating the TOML state file.
//!
//! Owns the file format and every error a state file can produce (with file,
//! line and column). Reads the one file it is given and nothing else; never
//! talks to the engine.
//!
//! # Format
//!
//! ```toml
//! [scope]                       # optional: narrows what this file manages
//! labels = { "ca.sandbox.owner" = "team-a" }
//!
//! [[box]]                       # boxes that should exist: container and volume are kept
//! id = "explore-ripgrep"
//!
//! [volumes]
//! keep = ["ca-sbx-notes"]       # named volumes kept even though their box is gone
//! ```
//!
//! Every table and key is optional; an empty file declares nothing. Unknown
//! keys anywhere are errors, as are duplicate box ids and duplicate `keep`
//! entries.
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
//!   state file needs 2 and 1. This keeps the parser's recursion small whatever
//!   features the `toml` crate was built with (it has its own limit of 80).
//! * Box ids ([`check_box_id`]): `[A-Za-z0-9][A-Za-z0-9_.-]*`, at most
//!   [`MAX_BOX_ID_CHARS`] characters; so no whitespace, control characters, `/`,
//!   `\` or `..`.
//! * Volume names in `keep` ([`check_volume_name`]): Docker's
//!   `[a-zA-Z0-9][a-zA-Z0-9_.-]*`, at most [`MAX_VOLUME_NAME_CHARS`] characters.
//! * Scope labels ([`check_label`], also used for `--scope KEY=VALUE`): keys are
//!   `[A-Za-z0-9._/-]`, start and end with a letter or digit, at most
//!   [`MAX_LABEL_KEY_CHARS`] characters, and are never `ca.sandbox` (always
//!   required as `ca.sandbox=1` by sandboxctl itself). Values are non-empty, at
//!   most [`MAX_LABEL_VALUE_CHARS`] characters, with no control or invisible
//!   formatting characters and no leading or trailing whitespace.
//!
//! Text from the file that appears in a message is escaped (control and
//! invisible characters as `\u{..}`) and shortened, so a hostile file cannot
//! write terminal escapes or megabytes through an error message.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
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
/// The longest box id, in characters.
pub const MAX_BOX_ID_CHARS: usize = 128;
/// The longest volume name in `[volumes].keep`, in characters.
pub const MAX_VOLUME_NAME_CHARS: usize = 255;
/// The longest scope label key, in characters.
pub const MAX_LABEL_KEY_CHARS: usize = 128;
/// The longest scope label value, in characters.
pub const MAX_LABEL_VALUE_CHARS: usize = 256;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";
/// How much of a value from the file a message shows before shortening it.
const SHOW_CHARS: usize = 64;
/// How much of a TOML parser message is shown.
const MESSAGE_CHARS: usize = 240;
const FORMAT_HINT: &str = "the format is [scope] labels = { \"key\" = \"value\" }, \
     [[box]] id = \"...\" (one table per box), [volumes] keep = [\"...\"]";

/// What the state file declares. `DesiredState::empty()` declares nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DesiredState {
    /// The file this came from; `None` for the empty desired state.
    pub source: Option<PathBuf>,
    /// `[scope].labels`: extra labels every managed object must carry.
    pub scope: Labels,
    /// `[[box]] id = ...`: boxes that should exist; their containers and volumes are kept.
    pub boxes: BTreeSet<String>,
    /// `[volumes].keep`: named volumes kept even though their box is gone.
    pub keep_volumes: BTreeSet<String>,
}

/// Why a state file was rejected.
///
/// Every variant's message starts with the file (and, for content errors,
/// `:line:col`, both 1-based, the column counted in characters) and ends with
/// what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum DesiredError {
    /// The state file that was asked for does not exist.
    #[error(
        "{}: state file does not exist; check the path given with --state or SANDBOXCTL_STATE \
         (without either, {DEFAULT_STATE_PATH} is used if it exists)",
        path.display()
    )]
    NotFound { path: PathBuf },

    /// The path names a directory, not a file.
    #[error("{}: is a directory, not a state file; give the path of a .toml file", path.display())]
    NotAFile { path: PathBuf },

    /// The file exists but could not be read (permissions, I/O error).
    #[error("{}: cannot read state file: {source}; check that it is a readable file", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },

    /// The file is larger than [`MAX_STATE_BYTES`]; `size` is `None` when it was
    /// only noticed while reading (the file does not report its size).
    #[error(
        "{}: state file is too large ({}; the limit is {limit} bytes); a state file only lists \
         box ids, volume names and labels: check that this is the right file",
        path.display(),
        size_text(*size, *limit)
    )]
    TooLarge {
        path: PathBuf,
        size: Option<u64>,
        limit: u64,
    },

    /// The file is not UTF-8; the position is that of the first bad byte.
    #[error("{}:{line}:{col}: state file is not valid UTF-8 (byte 0x{byte:02X}); save it as UTF-8", path.display())]
    InvalidUtf8 {
        path: PathBuf,
        line: usize,
        col: usize,
        byte: u8,
    },

    /// `[` or `{` nested deeper than [`MAX_NESTING`]; the position is the bracket over the limit.
    #[error(
        "{}:{line}:{col}: brackets nested more than {limit} levels deep; a state file needs at \
         most 2: remove the extra nesting",
        path.display()
    )]
    TooDeep {
        path: PathBuf,
        line: usize,
        col: usize,
        limit: usize,
    },

    /// More than [`MAX_KEY_DOTS`] dots on one line outside strings and comments
    /// (a dotted key nesting tables too deep); the position is the dot over the limit.
    #[error(
        "{}:{line}:{col}: more than {limit} '.' outside quotes on one line (a dotted key this \
         deep is refused); quote keys that contain dots, e.g. \"ca.sandbox.owner\" = \"team-a\"",
        path.display()
    )]
    TooManyKeyDots {
        path: PathBuf,
        line: usize,
        col: usize,
        limit: usize,
    },

    /// Not TOML at all (the TOML parser's message). `at` is `None` only if the
    /// parser gave no position.
    #[error("{}: invalid TOML: {message}; {hint}", located(path, *at))]
    Syntax {
        path: PathBuf,
        at: Option<(usize, usize)>,
        message: String,
        hint: String,
    },

    /// TOML, but not the state format: an unknown key, a value of the wrong type
    /// or a missing key.
    #[error("{}: {message}; {hint}", located(path, *at))]
    Schema {
        path: PathBuf,
        at: Option<(usize, usize)>,
        message: String,
        hint: String,
    },

    /// Two `[[box]]` tables with the same id; the position is the second one's id.
    #[error(
        "{}:{line}:{col}: duplicate box id {} (first declared at {first_line}:{first_col}); \
         remove one of them",
        path.display(),
        Shown(id)
    )]
    DuplicateBox {
        path: PathBuf,
        line: usize,
        col: usize,
        id: String,
        first_line: usize,
        first_col: usize,
    },

    /// The same volume twice in `[volumes].keep`; the position is the second one.
    #[error(
        "{}:{line}:{col}: duplicate volume {} in [volumes].keep (first listed at \
         {first_line}:{first_col}); remove one of them",
        path.display(),
        Shown(name)
    )]
    DuplicateKeep {
        path: PathBuf,
        line: usize,
        col: usize,
        name: String,
        first_line: usize,
        first_col: usize,
    },

    /// A box id outside the allowed charset or length (see [`check_box_id`]).
    #[error(
        "{}:{line}:{col}: invalid box id {}: {reason}; box ids match \
         [A-Za-z0-9][A-Za-z0-9_.-]* and have at most {MAX_BOX_ID_CHARS} characters",
        path.display(),
        Shown(id)
    )]
    InvalidBoxId {
        path: PathBuf,
        line: usize,
        col: usize,
        id: String,
        reason: String,
    },

    /// A volume name in `[volumes].keep` that Docker would not accept (see [`check_volume_name`]).
    #[error(
        "{}:{line}:{col}: invalid volume name {} in [volumes].keep: {reason}; volume names match \
         [a-zA-Z0-9][a-zA-Z0-9_.-]* and have at most {MAX_VOLUME_NAME_CHARS} characters",
        path.display(),
        Shown(name)
    )]
    InvalidVolumeName {
        path: PathBuf,
        line: usize,
        col: usize,
        name: String,
        reason: String,
    },

    /// A `[scope].labels` entry refused by [`check_label`]; the position is the
    /// key or the value, whichever is wrong. `reason` says what to do.
    #[error("{}:{line}:{col}: invalid scope label {}: {reason}", path.display(), Shown(key))]
    InvalidScopeLabel {
        path: PathBuf,
        line: usize,
        col: usize,
        key: String,
        reason: String,
    },
}

impl DesiredError {
    /// The state file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            DesiredError::NotFound { path }
            | DesiredError::NotAFile { path }
            | DesiredError::Read { path, .. }
            | DesiredError::TooLarge { path, .. }
            | DesiredError::InvalidUtf8 { path, .. }
            | DesiredError::TooDeep { path, .. }
            | DesiredError::TooManyKeyDots { path, .. }
            | DesiredError::Syntax { path, .. }
            | DesiredError::Schema { path, .. }
            | DesiredError::DuplicateBox { path, .. }
            | DesiredError::DuplicateKeep { path, .. }
            | DesiredError::InvalidBoxId { path, .. }
            | DesiredError::InvalidVolumeName { path, .. }
            | DesiredError::InvalidScopeLabel { path, .. } => path,
        }
    }

    /// The 1-based line and column (in characters) the error points at; `None`
    /// for errors about the whole file (not found, unreadable, too large).
    pub fn line_col(&self) -> Option<(usize, usize)> {
        match self {
            DesiredError::NotFound { .. }
            | DesiredError::NotAFile { .. }
            | DesiredError::Read { .. }
            | DesiredError::TooLarge { .. } => None,
            DesiredError::Syntax { at, .. } | DesiredError::Schema { at, .. } => *at,
            DesiredError::InvalidUtf8 { line, col, .. }
            | DesiredError::TooDeep { line, col, .. }
            | DesiredError::TooManyKeyDots { line, col, .. }
            | DesiredError::DuplicateBox { line, col, .. }
            | DesiredError::DuplicateKeep { line, col, .. }
            | DesiredError::InvalidBoxId { line, col, .. }
            | DesiredError::InvalidVolumeName { line, col, .. }
            | DesiredError::InvalidScopeLabel { line, col, .. } => Some((*line, *col)),
        }
    }
}

impl DesiredState {
    /// The empty desired state: no boxes, no kept volumes, no scope labels.
    pub fn empty() -> Self {
        DesiredState::default()
    }

    /// Reads and parses the state file at `path`.
    ///
    /// A missing file is [`DesiredError::NotFound`]. The size is checked from the
    /// metadata first, and at most [`MAX_STATE_BYTES`]` + 1` bytes are ever read.
    pub fn load(path: &Path) -> Result<Self, DesiredError> {
        let read_error = |source: std::io::Error| DesiredError::Read {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::open(path).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => DesiredError::NotFound {
                path: path.to_path_buf(),
            },
            _ => read_error(source),
        })?;
        let meta = file.metadata().map_err(read_error)?;
        if meta.is_dir() {
            return Err(DesiredError::NotAFile {
                path: path.to_path_buf(),
            });
        }
        if meta.is_file() && meta.len() > MAX_STATE_BYTES {
            return Err(DesiredError::TooLarge {
                path: path.to_path_buf(),
                size: Some(meta.len()),
                limit: MAX_STATE_BYTES,
            });
        }
        let capacity = if meta.is_file() {
            meta.len().min(MAX_STATE_BYTES) as usize + 1
        } else {
            8 * 1024
        };
        let mut bytes = Vec::with_capacity(capacity);
        file.take(MAX_STATE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(read_error)?;
        if bytes.len() as u64 > MAX_STATE_BYTES {
            return Err(DesiredError::TooLarge {
                path: path.to_path_buf(),
                size: None,
                limit: MAX_STATE_BYTES,
            });
        }
        Self::parse(&bytes, path)
    }

    /// The state for a run: `explicit` (from `--state` or `SANDBOXCTL_STATE`) must
    /// exist; without it, [`DEFAULT_STATE_PATH`] (relative to the working
    /// directory) is loaded if it exists, else the empty state is returned.
    pub fn load_or_default(explicit: Option<&Path>) -> Result<Self, DesiredError> {
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
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self, DesiredError> {
        if bytes.len() as u64 > MAX_STATE_BYTES {
            return Err(DesiredError::TooLarge {
                path: path.to_path_buf(),
                size: Some(bytes.len() as u64),
                limit: MAX_STATE_BYTES,
            });
        }
        let bytes = bytes.strip_prefix(UTF8_BOM).unwrap_or(bytes);
        let text = std::str::from_utf8(bytes).map_err(|e| {
            let valid = &bytes[..e.valid_up_to()];
            // Cannot fail: `valid_up_to` is exactly the valid prefix.
            let valid = std::str::from_utf8(valid).unwrap_or_default();
            let (line, col) = line_col(valid, valid.len());
            DesiredError::InvalidUtf8 {
                path: path.to_path_buf(),
                line,
                col,
                byte: bytes[e.valid_up_to()],
            }
        })?;
        if let Some((offset, what)) = scan_nesting(text) {
            let (line, col) = line_col(text, offset);
            let path = path.to_path_buf();
            return Err(match what {
                TooNested::Brackets => DesiredError::TooDeep {
                    path,
                    line,
                    col,
                    limit: MAX_NESTING,
                },
                TooNested::Dots => DesiredError::TooManyKeyDots {
                    path,
                    line,
                    col,
                    limit: MAX_KEY_DOTS,
                },
            });
        }
        let de = toml::de::Deserializer::parse(text).map_err(|e| DesiredError::Syntax {
            path: path.to_path_buf(),
            at: e.span().map(|s| line_col(text, s.start)),
            hint: if e.message() == "duplicate key" {
                "this key or table is already defined above: remove or merge one of them"
            } else {
                "fix the syntax there"
            }
            .to_string(),
            message: clean_message(e.message()),
        })?;
        let raw = RawFile::deserialize(de).map_err(|e| schema_error(&e, text, path))?;
        validate(raw, text, path)
    }
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
/// characters): returns what is wrong with it.
pub fn check_box_id(id: &str) -> Result<(), String> {
    name_problem(id, MAX_BOX_ID_CHARS).map_or(Ok(()), Err)
}

/// Checks a Docker volume name (`[a-zA-Z0-9][a-zA-Z0-9_.-]*`, at most
/// [`MAX_VOLUME_NAME_CHARS`] characters): returns what is wrong with it.
pub fn check_volume_name(name: &str) -> Result<(), String> {
    name_problem(name, MAX_VOLUME_NAME_CHARS).map_or(Ok(()), Err)
}

// ---------------------------------------------------------------------------
// The raw file, as serde sees it.

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a state file table")]
struct RawFile {
    #[serde(default)]
    scope: Option<RawScope>,
    #[serde(default, rename = "box")]
    boxes: Vec<RawBox>,
    #[serde(default)]
    volumes: Option<RawVolumes>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [scope] table")]
struct RawScope {
    #[serde(default)]
    labels: BTreeMap<Spanned<String>, Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [[box]] table")]
struct RawBox {
    id: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [volumes] table")]
struct RawVolumes {
    #[serde(default)]
    keep: Vec<Spanned<String>>,
}

/// A rule broken by a well-typed file, at a byte offset; turned into a
/// [`DesiredError`] (with line and column) only for the first one in the file.
enum Problem {
    BadBoxId { id: String, reason: String },
    DuplicateBox { id: String, first: usize },
    BadVolume { name: String, reason: String },
    DuplicateKeep { name: String, first: usize },
    BadLabel { key: String, reason: String },
}

fn validate(raw: RawFile, text: &str, path: &Path) -> Result<DesiredState, DesiredError> {
    let mut problems: Vec<(usize, Problem)> = Vec::new();

    let mut scope = Labels::new();
    for (key, value) in raw.scope.map(|s| s.labels).unwrap_or_default() {
        if let Some(reason) = label_key_problem(key.get_ref()) {
            let at = key.span().start;
            let key = key.into_inner();
            problems.push((at, Problem::BadLabel { key, reason }));
            continue;
        }
        if let Some(reason) = label_value_problem(value.get_ref()) {
            let key = key.into_inner();
            problems.push((value.span().start, Problem::BadLabel { key, reason }));
            continue;
        }
        scope.insert(key.into_inner(), value.into_inner());
    }

    let mut boxes = BTreeSet::new();
    let mut first_box: HashMap<String, usize> = HashMap::new();
    for b in raw.boxes {
        let at = b.id.span().start;
        let id = b.id.into_inner();
        if let Some(reason) = name_problem(&id, MAX_BOX_ID_CHARS) {
            problems.push((at, Problem::BadBoxId { id, reason }));
        } else if let Some(&first) = first_box.get(&id) {
            problems.push((at, Problem::DuplicateBox { id, first }));
        } else {
            first_box.insert(id.clone(), at);
            boxes.insert(id);
        }
    }

    let mut keep_volumes = BTreeSet::new();
    let mut first_keep: HashMap<String, usize> = HashMap::new();
    for name in raw.volumes.map(|v| v.keep).unwrap_or_default() {
        let at = name.span().start;
        let name = name.into_inner();
        if let Some(reason) = name_problem(&name, MAX_VOLUME_NAME_CHARS) {
            problems.push((at, Problem::BadVolume { name, reason }));
        } else if let Some(&first) = first_keep.get(&name) {
            problems.push((at, Problem::DuplicateKeep { name, first }));
        } else {
            first_keep.insert(name.clone(), at);
            keep_volumes.insert(name);
        }
    }

    if let Some((at, problem)) = problems.into_iter().min_by_key(|(at, _)| *at) {
        let (line, col) = line_col(text, at);
        let path = path.to_path_buf();
        return Err(match problem {
            Problem::BadBoxId { id, reason } => DesiredError::InvalidBoxId {
                path,
                line,
                col,
                id,
                reason,
            },
            Problem::DuplicateBox { id, first } => {
                let (first_line, first_col) = line_col(text, first);
                DesiredError::DuplicateBox {
                    path,
                    line,
                    col,
                    id,
                    first_line,
                    first_col,
                }
            }
            Problem::BadVolume { name, reason } => DesiredError::InvalidVolumeName {
                path,
                line,
                col,
                name,
                reason,
            },
            Problem::DuplicateKeep { name, first } => {
                let (first_line, first_col) = line_col(text, first);
                DesiredError::DuplicateKeep {
                    path,
                    line,
                    col,
                    name,
                    first_line,
                    first_col,
                }
            }
            Problem::BadLabel { key, reason } => DesiredError::InvalidScopeLabel {
                path,
                line,
                col,
                key,
                reason,
            },
        });
    }

    Ok(DesiredState {
        source: Some(path.to_path_buf()),
        scope,
        boxes,
        keep_volumes,
    })
}

/// Turns a serde error (unknown key, wrong type, missing key) into [`DesiredError::Schema`].
fn schema_error(e: &toml::de::Error, text: &str, path: &Path) -> DesiredError {
    let span = e.span();
    let message = clean_message(e.message())
        .replacen("unknown field", "unknown key", 1)
        .replacen("missing field", "missing key", 1);
    let span_text = span
        .clone()
        .and_then(|s| text.get(s))
        .unwrap_or_default()
        .trim_start();
    let hint = if message.starts_with("unknown key") {
        if message.contains("expected `labels`") {
            "remove it or fix its spelling; scope labels go inside labels = { \"key\" = \"value\" }"
                .to_string()
        } else {
            "remove it or fix its spelling".to_string()
        }
    } else if message.starts_with("missing key `id`") {
        "add id = \"...\" to this [[box]] table".to_string()
    } else if message.starts_with("missing key") {
        "add it".to_string()
    } else if span_text.starts_with("[box]") || span_text.starts_with("[ box ]") {
        "write [[box]] (double brackets, one table per box), not [box]".to_string()
    } else if message == "invalid type: map, expected a string" && is_dotted_key_at(text, span) {
        "quote label keys that contain dots, e.g. \"ca.sandbox.owner\" = \"team-a\"".to_string()
    } else {
        FORMAT_HINT.to_string()
    };
    DesiredError::Schema {
        path: path.to_path_buf(),
        at: e.span().map(|s| line_col(text, s.start)),
        message,
        hint,
    }
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
    c.is_control()
        || matches!(c,
            '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
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

fn located(path: &Path, at: Option<(usize, usize)>) -> String {
    match at {
        Some((line, col)) => format!("{}:{line}:{col}", path.display()),
        None => path.display().to_string(),
    }
}

fn size_text(size: Option<u64>, limit: u64) -> String {
    match size {
        Some(size) => format!("{size} bytes"),
        None => format!("more than {limit} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<DesiredState, DesiredError> {
        DesiredState::parse(text.as_bytes(), Path::new("s.toml"))
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
        assert_eq!(
            state.boxes.iter().collect::<Vec<_>>(),
            ["B2.x_y-z", "explore-ripgrep"]
        );
        assert_eq!(
            state.keep_volumes.iter().collect::<Vec<_>>(),
            ["ca-sbx-notes", "n2"]
        );
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
        assert!(state.boxes.contains("a"));
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
        assert!(matches!(e, DesiredError::InvalidScopeLabel { .. }), "{e}");
        let e = parse("[volumes]\nkeep = [\"/x\"]\n[[box]]\nid = \"a b\"\n").unwrap_err();
        assert!(matches!(e, DesiredError::InvalidVolumeName { .. }), "{e}");
    }

    #[test]
    fn syntax_and_schema_errors_carry_positions() {
        let e = parse("[volumes]\nkeep = [\"a\"\n").unwrap_err();
        assert!(matches!(e, DesiredError::Syntax { .. }), "{e}");
        assert_eq!(e.line_col().unwrap().0, 2);
        let e = parse("[[box]]\nid = 1\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("s.toml:2:6: invalid type: integer `1`, expected a string; {FORMAT_HINT}")
        );
        assert_eq!(
            err("[[box]]\nname = \"a\"\n"),
            "s.toml:2:1: unknown key `name`, expected `id`; remove it or fix its spelling"
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
            matches!(e, DesiredError::TooLarge { size: Some(_), .. }),
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
            parse(&text).unwrap_err(),
            DesiredError::Schema { .. }
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
        assert!(matches!(e, DesiredError::InvalidScopeLabel { .. }), "{e}");
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
        assert!(matches!(e, DesiredError::NotFound { .. }), "{e}");
        assert!(e
            .to_string()
            .contains("does not exist; check the path given with --state"));
        assert_eq!(e.path(), missing);
        assert_eq!(e.line_col(), None);

        let e = DesiredState::load(dir.path()).unwrap_err();
        assert!(matches!(e, DesiredError::NotAFile { .. }), "{e}");

        let big = dir.path().join("big.toml");
        std::fs::write(&big, vec![b'#'; MAX_STATE_BYTES as usize + 10]).unwrap();
        let e = DesiredState::load(&big).unwrap_err();
        assert!(
            matches!(e, DesiredError::TooLarge { size: Some(n), .. } if n == MAX_STATE_BYTES + 10)
        );

        let good = dir.path().join("good.toml");
        std::fs::write(&good, "[[box]]\nid = \"a\"\n").unwrap();
        let state = DesiredState::load(&good).unwrap();
        assert_eq!(state.source.as_deref(), Some(good.as_path()));
        assert_eq!(DesiredState::load_or_default(Some(&good)).unwrap(), state);
        assert!(matches!(
            DesiredState::load_or_default(Some(&missing)),
            Err(DesiredError::NotFound { .. })
        ));
    }

    #[cfg(unix)]
    #[test]
    fn load_stops_reading_an_endless_file() {
        let e = DesiredState::load(Path::new("/dev/zero")).unwrap_err();
        assert!(
            matches!(e, DesiredError::TooLarge { size: None, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("more than 1048576 bytes"), "{e}");
    }
}
