//! Audit log: the file behind `--audit FILE` (apply, destroy, watch).
//!
//! Owns the on-disk format: one JSON object per line, one line per removal
//! attempt, so that "what removed my container, when, and why" is answered
//! from this file alone. Owns opening the file (append-only, created `0600`,
//! never through a symbolic link) and writing a line so that concurrent
//! writers never interleave.
//!
//! Must not read the clock (the time of an entry is an input), decide
//! anything about removals, swallow an error (every failure is returned,
//! naming the file), or print.
//!
//! # Format
//! ```json
//! {"time":"2025-01-02T03:04:05.678Z","engine":"default","kind":"container",
//!  "id":"3f2a…","name":"box-a-web","labels":{"ca.sandbox":"1","ca.sandbox.id":"a"},
//!  "image":"alpine:3","reason":{"code":"boxNotDeclared","text":"leaked: box a is not declared",
//!  "boxId":"a"},"outcome":"failed","error":"remove container 3f2a…: engine answered HTTP 500: …"}
//! ```
//! (one line in the file). An object this run removed whose size was
//! measured before (`--reclaimed`, or a volume's archive) adds
//! `"reclaimedBytes":N` after `outcome` (left out when not known). A volume
//! archived before its removal (`--archive`) adds
//! `"archive":{"path":…,"sha256":…,"bytes":…}` last, on the line of the
//! removal it preceded. Keys always appear in this order. `id` is left
//! out when the engine gave none, `image` when none applies (volumes,
//! networks), `error` unless `outcome` is `failed`. `reason` is the typed
//! reason (`model::Reason`) with `code` and `text` first, then its fields,
//! keys sorted at every depth; `outcome` and `error` are the step's
//! `model::Outcome`, its code and, when it failed, its words. `time` is RFC
//! 3339 in UTC with milliseconds. `labels` keys are sorted. Text from the engine is
//! JSON-escaped, and DEL and the C1 control characters (U+007F–U+009F),
//! which JSON allows raw, are escaped as `\u00XX` too, so `cat`ing the file
//! cannot drive a terminal.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Serialize, Serializer};

use crate::exec::event::{Event, Observer};
use crate::model::{Kind, Outcome, Reason};

/// A reason as the log writes it: `code`, `text`, then the reason's fields
/// with keys sorted at every depth (the log's form since its first line;
/// the report's JSON keeps the fields in their declared order instead).
struct LoggedReason<'a>(&'a Reason);

impl Serialize for LoggedReason<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeMap};
        // A `serde_json::Value` map is sorted by key (no `preserve_order`).
        let fields = match serde_json::to_value(self.0).map_err(S::Error::custom)? {
            serde_json::Value::Object(fields) => fields,
            other => {
                return Err(S::Error::custom(format!(
                    "a reason is an object, not {other}"
                )))
            }
        };
        let first = |k: &str| k == "code" || k == "text";
        let mut map = s.serialize_map(Some(fields.len()))?;
        for key in ["code", "text"] {
            map.serialize_entry(key, &fields[key])?;
        }
        for (key, value) in fields.iter().filter(|(k, _)| !first(k)) {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// One removal attempt, as the caller knows it. Borrowed, so recording an
/// attempt copies nothing but the line written.
#[derive(Debug, Clone)]
struct Entry<'a> {
    /// When the attempt ended (the caller's clock).
    time: SystemTime,
    /// The engine's name as the user knows it (e.g. a context name).
    engine: &'a str,
    kind: Kind,
    /// The engine's id for the object, when it gave one.
    id: Option<&'a str>,
    name: &'a str,
    labels: &'a BTreeMap<String, String>,
    /// The image of a container (never set for volumes and networks).
    image: Option<&'a str>,
    reason: &'a Reason,
    /// How the attempt ended; a step never attempted (skipped, interrupted)
    /// is not an attempt and has no line.
    outcome: &'a Outcome,
    /// What the object gave back, when it was removed and measured.
    reclaimed: Option<u64>,
    /// The archive written before the removal, if any.
    archive: Option<&'a crate::exec::archive::Archived>,
}

/// An archive as the log writes it.
#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
struct LoggedArchive<'a> {
    path: String,
    sha256: &'a str,
    bytes: u64,
}

/// The line as written: field order here is the order in the file. Its
/// schema is `audit.schema.json`.
#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct Line<'a> {
    /// When the attempt ended: RFC 3339 in UTC with milliseconds.
    #[schemars(extend("format" = "date-time"))]
    time: String,
    engine: &'a str,
    kind: Kind,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    name: &'a str,
    labels: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    image: Option<&'a str>,
    /// The reason (`code` and `text` first, then its fields, keys sorted).
    #[schemars(with = "Reason")]
    reason: LoggedReason<'a>,
    /// The outcome's code: only attempts have a line.
    #[schemars(schema_with = "attempted_schema")]
    outcome: &'static str,
    /// Its words, unless `outcome` is `removed` or `alreadyGone`.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(rename = "reclaimedBytes", skip_serializing_if = "Option::is_none")]
    reclaimed_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    archive: Option<LoggedArchive<'a>>,
}

/// The schema of a line's `outcome`: one of [`Outcome::ATTEMPTED`].
fn attempted_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    crate::model::codes_schema(
        &Outcome::ATTEMPTED,
        "How the attempt ended: its outcome's code.",
    )
}

/// An audit log could not be opened or written, or an entry was malformed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AuditError {
    // The OS reason follows as the error's source ("caused by: ..."), so it is not repeated here.
    #[error("cannot open audit log {path}: create its directory, or pass a writable path to --audit", path = path.display())]
    Open { path: PathBuf, source: io::Error },
    #[error("audit log {path} is a symbolic link; sandboxctl never writes through one: pass the real file's path to --audit (or remove the link), then run again", path = path.display())]
    Symlink { path: PathBuf },
    #[error("cannot write audit log {path}: {source}; the removal was attempted but not recorded: free space or fix the file, then check the engine for what was removed", path = path.display())]
    Write { path: PathBuf, source: io::Error },
    #[error("audit log {path}: the system wrote {written} of {len} bytes of a line; the last line of the file is cut short: free space, then check the engine for what was removed", path = path.display())]
    ShortWrite {
        path: PathBuf,
        written: usize,
        len: usize,
    },
    #[error("audit entry for {kind} {name:?} cannot be written: {problem}", kind = kind.as_str())]
    BadEntry {
        kind: Kind,
        name: String,
        problem: String,
    },
}

/// An open audit log. Appends only; cheap to share between threads (`&self`
/// methods, one `write(2)` per line, no lock and no user-space buffer).
#[derive(Debug)]
pub(crate) struct AuditLog {
    file: File,
    path: PathBuf,
}

impl AuditLog {
    /// Opens `path` for appending (`O_APPEND`), creating it with mode
    /// `0600` (owner read and write only, further narrowed by the umask) if
    /// it does not exist. An existing file is appended to and its mode is
    /// left as it is: a user who made it group-readable keeps that choice.
    /// A symbolic link at `path` is refused (`Symlink`), never written
    /// through (`O_NOFOLLOW`).
    pub(crate) fn open(path: impl AsRef<Path>) -> Result<Self, AuditError> {
        let path = path.as_ref().to_path_buf();
        match crate::exec::files::open_append(&path) {
            Ok(file) => Ok(AuditLog { file, path }),
            Err(e) if crate::exec::files::is_link(&e) => Err(AuditError::Symlink { path }),
            Err(source) => Err(AuditError::Open { path, source }),
        }
    }

    /// Appends one line for `entry` with a single `write` call on a file
    /// opened `O_APPEND`, so lines from other threads or processes appending
    /// to the same file never interleave with it. Returns when the line is in
    /// the kernel (no user-space buffering); see [`AuditLog::sync`] for
    /// durability across a crash of the machine.
    ///
    /// Errors: a malformed entry (`BadEntry`, nothing written); a failed
    /// write (`Write`, e.g. disk full) or a partial one (`ShortWrite`), both
    /// naming the file. The caller must report these, never drop them.
    fn append(&self, entry: &Entry<'_>) -> Result<(), AuditError> {
        let line = format_line(entry)?;
        let mut file = &self.file;
        let written = loop {
            match file.write(line.as_bytes()) {
                Ok(n) => break n,
                // Nothing was written: trying again cannot split the line.
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => return Err(self.write_error(source)),
            }
        };
        if written != line.len() {
            return Err(AuditError::ShortWrite {
                path: self.path.clone(),
                written,
                len: line.len(),
            });
        }
        file.flush().map_err(|source| self.write_error(source))
    }

    fn write_error(&self, source: io::Error) -> AuditError {
        AuditError::Write {
            path: self.path.clone(),
            source,
        }
    }
}

/// The line for `entry`, newline included.
fn format_line(entry: &Entry<'_>) -> Result<String, AuditError> {
    let bad = |problem: String| AuditError::BadEntry {
        kind: entry.kind,
        name: entry.name.to_string(),
        problem,
    };
    if !entry.outcome.attempted() {
        return Err(bad(format!(
            "outcome is {}: a step never attempted is not recorded",
            entry.outcome.code()
        )));
    }
    let time = rfc3339_utc(entry.time).map_err(bad)?;
    let line = Line {
        time,
        engine: entry.engine,
        kind: entry.kind,
        id: entry.id,
        name: entry.name,
        labels: entry.labels,
        image: entry.image,
        reason: LoggedReason(entry.reason),
        outcome: entry.outcome.code(),
        error: (!entry.outcome.is_success()).then(|| entry.outcome.to_string()),
        reclaimed_bytes: entry
            .reclaimed
            .filter(|_| *entry.outcome == Outcome::Removed),
        archive: entry.archive.map(|a| LoggedArchive {
            path: a.path.display().to_string(),
            sha256: &a.sha256,
            bytes: a.bytes,
        }),
    };
    let json = serde_json::to_string(&line).map_err(|e| bad(e.to_string()))?;
    let mut out = String::with_capacity(json.len() + 1);
    escape_raw_controls(&json, &mut out);
    out.push('\n');
    Ok(out)
}

/// Copies JSON text, escaping DEL and C1 controls that serde_json leaves
/// raw. They can only occur inside strings (the rest is ASCII), where
/// `\u00XX` is a valid escape, so the result is the same JSON value.
fn escape_raw_controls(json: &str, out: &mut String) {
    for c in json.chars() {
        if ('\u{7f}'..='\u{9f}').contains(&c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
}

/// RFC 3339 UTC with milliseconds; times before 1970 or after 9999 are refused
/// (the formatter would panic or fail on them).
fn rfc3339_utc(time: SystemTime) -> Result<String, String> {
    const YEAR_10000: Duration = Duration::from_secs(253_402_300_800);
    match time.duration_since(UNIX_EPOCH) {
        Ok(since) if since < YEAR_10000 => Ok(humantime::format_rfc3339_millis(time).to_string()),
        _ => Err(format!(
            "its time {time:?} is outside 1970-01-01..9999-12-31"
        )),
    }
}

/// Records every removal attempt of a reconcile in an audit log, told of
/// each plan's inventory (for labels and images). A write failure is kept
/// (the first one) for the caller to report; it never stops the run, which
/// has already acted.
pub(crate) struct Recorder {
    log: std::sync::Arc<AuditLog>,
    clock: fn() -> SystemTime,
    objects: BTreeMap<crate::model::ObjectKey, (crate::model::Labels, Option<String>)>,
    /// The first write failure, if any.
    pub(crate) error: Option<AuditError>,
    /// Lines written.
    written: usize,
    /// Archives written whose removal has not finished yet, by object.
    archives: BTreeMap<crate::model::ObjectKey, crate::exec::archive::Archived>,
}

impl Recorder {
    pub(crate) fn new(log: std::sync::Arc<AuditLog>, clock: fn() -> SystemTime) -> Self {
        Recorder {
            log,
            clock,
            objects: BTreeMap::new(),
            error: None,
            written: 0,
            archives: BTreeMap::new(),
        }
    }

    /// Keeps the archive of a step until its removal's line is written.
    pub(crate) fn archived(
        &mut self,
        step: &crate::plan::Step,
        archived: &crate::exec::archive::Archived,
    ) {
        self.archives.insert(step.object.key(), archived.clone());
    }

    /// Learns the labels and images of what a plan of this inventory's engine
    /// may remove (replacing what it knew of that engine).
    pub(crate) fn know(&mut self, inventory: &crate::plan::inventory::Inventory) {
        self.objects.retain(|k, _| k.engine != inventory.engine);
        self.objects.extend(
            inventory
                .objects
                .values()
                .map(|o| (o.key.clone(), (o.labels.clone(), o.image.clone()))),
        );
    }

    /// Writes the line of a finished step (steps never attempted write none).
    pub(crate) fn finished(
        &mut self,
        step: &crate::plan::Step,
        outcome: &Outcome,
        reclaimed: Option<u64>,
    ) {
        let key = step.object.key();
        let archive = self.archives.remove(&key);
        if !outcome.attempted() {
            return;
        }
        let empty = (crate::model::Labels::new(), None);
        let (labels, image) = self.objects.get(&key).unwrap_or(&empty);
        let entry = Entry {
            time: (self.clock)(),
            engine: &step.object.engine,
            kind: step.object.kind,
            id: step.object.id.as_deref(),
            name: &step.object.name,
            labels,
            image: image.as_deref(),
            reason: &step.why,
            outcome,
            reclaimed,
            archive: archive.as_ref(),
        };
        match self.log.append(&entry) {
            Ok(()) => self.written += 1,
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
    }
}

/// The audit log as an observer of a run: one line per attempted removal,
/// for every engine. A write failure never stops the run (it has already
/// acted); the first one since it was last asked for is kept for `take_error`.
pub(crate) struct AuditObserver(std::sync::Mutex<Recorder>);

impl AuditObserver {
    pub(crate) fn new(log: std::sync::Arc<AuditLog>) -> Self {
        AuditObserver(std::sync::Mutex::new(Recorder::new(log, SystemTime::now)))
    }

    /// The first write failure since the last call, if any.
    pub(crate) fn take_error(&self) -> Option<AuditError> {
        self.0.lock().ok()?.error.take()
    }
}

impl Observer for AuditObserver {
    fn on(&self, event: &Event<'_>) {
        let Ok(mut recorder) = self.0.lock() else {
            return;
        };
        match event {
            Event::Planned { inventory, .. } => recorder.know(inventory),
            Event::Archived { step, archived, .. } => recorder.archived(step, archived),
            Event::Finished {
                step,
                outcome,
                reclaimed,
                ..
            } => recorder.finished(step, outcome, *reclaimed),
            _ => {}
        }
    }
}

/// How much of the end of an audit log `last_removal` reads, at most: a
/// log that grew past it is read from its last 4 MiB (about 10,000 lines),
/// never whole.
pub(crate) const TAIL_BYTES: u64 = 4 << 20;

/// A removal the audit log records (one line, as written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Recorded {
    pub(crate) time: String,
    pub(crate) engine: String,
    pub(crate) kind: String,
    pub(crate) name: String,
    /// The line's reason: its code and its words.
    pub(crate) code: String,
    pub(crate) text: String,
}

/// The latest line of the log at `path` (read from its end, at most
/// `tail` bytes of it) that records an object of box `box_id` as removed
/// (`removed`, or `alreadyGone`) on one of `engines`, carrying
/// `ca.sandbox=1` and every label of `scope`. `Ok(None)`: no such line in
/// what was read (a missing file is no line). A line that is not an audit
/// line is skipped: the log is evidence of a removal, never an order.
pub(crate) fn last_removal(
    path: &Path,
    box_id: &str,
    scope: &crate::model::Labels,
    engines: &[String],
    tail: u64,
) -> io::Result<Option<Recorded>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    let start = len.saturating_sub(tail);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(tail).read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<&str> = text.lines().collect();
    // Read from the middle of the file: its first line is cut.
    if start > 0 && !lines.is_empty() {
        lines.remove(0);
    }
    let wanted = |labels: &serde_json::Value| {
        let has = |k: &str, v: &str| labels.get(k).and_then(serde_json::Value::as_str) == Some(v);
        has(crate::model::SANDBOX_LABEL, crate::model::SANDBOX_VALUE)
            && has(crate::model::BOX_ID_LABEL, box_id)
            && scope.iter().all(|(k, v)| has(k, v))
    };
    for line in lines.into_iter().rev() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let field = |k: &str| v.get(k).and_then(serde_json::Value::as_str);
        let removed = matches!(field("outcome"), Some("removed" | "alreadyGone"));
        let on_engine = field("engine").is_some_and(|e| engines.iter().any(|n| n == e));
        if !(removed && on_engine && v.get("labels").is_some_and(wanted)) {
            continue;
        }
        let reason = |k: &str| {
            v.get("reason")
                .and_then(|r| r.get(k))
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        return Ok(Some(Recorded {
            time: field("time").unwrap_or_default().to_string(),
            engine: field("engine").unwrap_or_default().to_string(),
            kind: field("kind").unwrap_or_default().to_string(),
            name: field("name").unwrap_or_default().to_string(),
            code: reason("code"),
            text: reason("text"),
        }));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Ref, DEFAULT_ENGINE};
    use serde_json::Value;
    use std::sync::Arc;

    /// Builds entries for tests; every field set unless a test clears it.
    struct Attempt {
        time: SystemTime,
        engine: String,
        kind: Kind,
        id: Option<String>,
        name: String,
        labels: BTreeMap<String, String>,
        image: Option<String>,
        reason: Reason,
        outcome: Outcome,
    }

    impl Attempt {
        fn container(name: &str) -> Self {
            Attempt {
                time: UNIX_EPOCH + Duration::from_millis(1_735_787_045_678),
                engine: "default".into(),
                kind: Kind::Container,
                id: Some("3f2a9c".into()),
                name: name.into(),
                labels: [("ca.sandbox", "1"), ("ca.sandbox.id", "a")]
                    .into_iter()
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect(),
                image: Some("alpine:3".into()),
                reason: Reason::BoxNotDeclared { box_id: "a".into() },
                outcome: Outcome::Removed,
            }
        }
        /// A failed attempt whose words (the line's `error`) are exactly `error`.
        fn failed(mut self, error: &str) -> Self {
            self.outcome = Outcome::Refused(error.into());
            self
        }
        fn label(mut self, key: &str, value: &str) -> Self {
            self.labels.insert(key.into(), value.into());
            self
        }
        fn entry(&self) -> Entry<'_> {
            Entry {
                time: self.time,
                engine: &self.engine,
                kind: self.kind,
                id: self.id.as_deref(),
                name: &self.name,
                labels: &self.labels,
                image: self.image.as_deref(),
                reason: &self.reason,
                outcome: &self.outcome,
                reclaimed: None,
                archive: None,
            }
        }
    }

    /// A new audit log in a temporary directory (gone when the directory
    /// is dropped), and its path.
    fn fresh_log() -> (tempfile::TempDir, PathBuf, AuditLog) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        (dir, path, log)
    }

    /// A new audit log that `attempt` was appended to, its path, and its text.
    fn logged(attempt: &Attempt) -> (tempfile::TempDir, PathBuf, String) {
        let (dir, path, log) = fresh_log();
        log.append(&attempt.entry()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        (dir, path, text)
    }

    fn read_lines(path: &Path) -> Vec<Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
            .collect()
    }

    #[test]
    fn a_failed_container_line_has_every_field_in_order() {
        let (_dir, _, text) =
            logged(&Attempt::container("box-a-web").failed("engine answered 500: boom"));
        insta::assert_snapshot!(text, @r#"{"time":"2025-01-02T03:04:05.678Z","engine":"default","kind":"container","id":"3f2a9c","name":"box-a-web","labels":{"ca.sandbox":"1","ca.sandbox.id":"a"},"image":"alpine:3","reason":{"code":"boxNotDeclared","text":"leaked: box a is not declared","boxId":"a"},"outcome":"failed","error":"engine answered 500: boom"}"#);
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn optional_fields_are_left_out_when_absent() {
        let (_dir, path, log) = fresh_log();
        let mut volume = Attempt::container("box-a-data");
        volume.kind = Kind::Volume;
        volume.id = None;
        volume.image = None;
        volume.outcome = Outcome::AlreadyGone;
        log.append(&volume.entry()).unwrap();
        insta::assert_json_snapshot!(read_lines(&path), @r#"
        [
          {
            "engine": "default",
            "kind": "volume",
            "labels": {
              "ca.sandbox": "1",
              "ca.sandbox.id": "a"
            },
            "name": "box-a-data",
            "outcome": "alreadyGone",
            "reason": {
              "boxId": "a",
              "code": "boxNotDeclared",
              "text": "leaked: box a is not declared"
            },
            "time": "2025-01-02T03:04:05.678Z"
          }
        ]
        "#);
    }

    #[test]
    fn appends_across_two_opens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        AuditLog::open(&path)
            .unwrap()
            .append(&Attempt::container("first").entry())
            .unwrap();
        AuditLog::open(&path)
            .unwrap()
            .append(&Attempt::container("second").failed("gone wrong").entry())
            .unwrap();
        let names: Vec<_> = read_lines(&path)
            .iter()
            .map(|v| format!("{} {}", v["name"], v["outcome"]))
            .collect();
        assert_eq!(names, [r#""first" "removed""#, r#""second" "failed""#]);
    }

    #[cfg(unix)]
    #[test]
    fn created_with_mode_0600_and_an_existing_mode_is_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        AuditLog::open(&path).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);

        let existing = dir.path().join("shared.jsonl");
        std::fs::write(&existing, "").unwrap();
        std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o640)).unwrap();
        AuditLog::open(&existing).unwrap();
        assert_eq!(mode(&existing), 0o640);
    }

    /// Lines far larger than a pipe buffer, from threads with their own file
    /// descriptions (as separate processes would have) and from one shared
    /// log: every line must come out whole.
    #[test]
    fn concurrent_writers_never_interleave_a_line() {
        const THREADS: usize = 8;
        const LINES: usize = 100;
        let dir = tempfile::tempdir().unwrap();
        let path = Arc::new(dir.path().join("audit.jsonl"));
        let shared = Arc::new(AuditLog::open(&*path).unwrap());
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let path = Arc::clone(&path);
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || {
                    let own = AuditLog::open(&*path).unwrap();
                    let filler = char::from(b'a' + t as u8).to_string().repeat(20_000);
                    for i in 0..LINES {
                        let attempt =
                            Attempt::container(&format!("t{t}-{i}")).label("filler", &filler);
                        let log = if i % 2 == 0 { &own } else { &*shared };
                        log.append(&attempt.entry()).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let lines = read_lines(&path);
        assert_eq!(lines.len(), THREADS * LINES);
        for line in &lines {
            let name = line["name"].as_str().unwrap();
            let t: usize = name[1..name.find('-').unwrap()].parse().unwrap();
            let expected = char::from(b'a' + t as u8).to_string().repeat(20_000);
            assert_eq!(line["labels"]["filler"], expected.as_str(), "{name}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_full_device_is_an_error_naming_the_file() {
        let log = AuditLog::open("/dev/full").unwrap();
        let err = log
            .append(&Attempt::container("box-a-web").entry())
            .unwrap_err();
        assert!(matches!(err, AuditError::Write { .. }), "{err:?}");
        insta::assert_snapshot!(err.to_string(), @"cannot write audit log /dev/full: No space left on device (os error 28); the removal was attempted but not recorded: free space or fix the file, then check the engine for what was removed");
    }

    #[test]
    fn a_symlink_is_refused_naming_it_and_its_target_is_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "keep me\n").unwrap();
        let link = dir.path().join("audit.jsonl");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = AuditLog::open(&link).unwrap_err();
        assert!(matches!(err, AuditError::Symlink { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!("audit log {} is a symbolic link; sandboxctl never writes through one: pass the real file's path to --audit (or remove the link), then run again", link.display())
        );
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me\n");
        // A dangling link makes no file at its target either.
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        assert!(matches!(
            AuditLog::open(&dangling),
            Err(AuditError::Symlink { .. })
        ));
        assert!(!dir.path().join("nowhere").exists());
    }

    #[test]
    fn an_unopenable_path_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing-dir").join("audit.jsonl");
        let err = AuditLog::open(&path).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("cannot open audit log {}: ", path.display())),
            "{err}"
        );
    }

    #[test]
    fn terminal_controls_from_the_engine_are_escaped() {
        let attempt = Attempt::container("evil\u{1b}[2J\u{9b}31m\u{7f}").failed("nope\r\n\u{85}");
        let (_dir, path, text) = logged(&attempt);
        assert!(
            !text.trim_end_matches('\n').chars().any(char::is_control),
            "{text:?}"
        );
        let line = &read_lines(&path)[0];
        assert_eq!(line["name"], "evil\u{1b}[2J\u{9b}31m\u{7f}");
        assert_eq!(line["error"], "nope\r\n\u{85}");
    }

    #[test]
    fn a_step_never_attempted_is_refused() {
        let (_dir, path, log) = fresh_log();
        let mut skipped = Attempt::container("box-a-web");
        skipped.outcome = Outcome::Skipped(1);
        let mut interrupted = Attempt::container("box-a-web");
        interrupted.outcome = Outcome::Interrupted;
        let errors: Vec<_> = [skipped, interrupted]
            .iter()
            .map(|a| log.append(&a.entry()).unwrap_err().to_string())
            .collect();
        insta::assert_debug_snapshot!(errors, @r#"
        [
            "audit entry for container \"box-a-web\" cannot be written: outcome is skipped: a step never attempted is not recorded",
            "audit entry for container \"box-a-web\" cannot be written: outcome is interrupted: a step never attempted is not recorded",
        ]
        "#);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
    }

    #[test]
    fn times_outside_the_formatter_range_are_refused_not_panicked() {
        let mut early = Attempt::container("box-a-web");
        early.time = UNIX_EPOCH - Duration::from_secs(1);
        let err = format_line(&early.entry()).unwrap_err().to_string();
        assert!(err.contains("outside 1970-01-01..9999-12-31"), "{err}");
        let mut epoch = Attempt::container("box-a-web");
        epoch.time = UNIX_EPOCH;
        assert!(format_line(&epoch.entry())
            .unwrap()
            .starts_with(r#"{"time":"1970-01-01T00:00:00.000Z","#));
    }

    /// The form every line had when reasons went through a
    /// `serde_json::Value`: `code`, `text`, then the rest sorted by key.
    fn through_a_value(reason: &Reason) -> String {
        let Value::Object(mut map) = serde_json::to_value(reason).unwrap() else {
            unreachable!()
        };
        let code = map.remove("code").unwrap();
        let text = map.remove("text").unwrap();
        let mut out = format!("{{\"code\":{code},\"text\":{text}");
        for (k, v) in map {
            out.push_str(&format!(",{}:{v}", Value::from(k)));
        }
        out.push('}');
        out
    }

    #[test]
    fn reasons_are_code_text_then_sorted_fields_at_every_depth() {
        let holder = Ref {
            kind: Kind::Container,
            id: Some("0123456789abcdef".into()),
            name: "web".into(),
            how: Some("mounts".into()),
        };
        let reasons = [
            Reason::Expired {
                box_id: "a".into(),
                at: "2027-01-15T08:00:00Z".into(),
            },
            Reason::HeldByUnmanaged {
                holders: vec![holder.clone()],
            },
            Reason::WaitsForFailed {
                step: 2,
                object: holder,
            },
            Reason::DeclaredBox {
                box_id: "b".into(),
                expires: None,
                line: Some(7),
            },
            Reason::NoBoxLabel,
        ];
        for reason in &reasons {
            let line = serde_json::to_string(&LoggedReason(reason)).unwrap();
            assert_eq!(line, through_a_value(reason), "{reason:?}");
        }
        insta::assert_snapshot!(
            serde_json::to_string(&LoggedReason(&reasons[2])).unwrap(),
            @r#"{"code":"waitsForFailed","text":"not attempted: it waits for step 2 (container web (0123456789ab, mounts)), which did not succeed","object":{"how":"mounts","id":"0123456789abcdef","kind":"container","name":"web"},"step":2}"#
        );
    }

    #[test]
    fn the_recorder_writes_each_attempted_step_of_a_plan() {
        use crate::plan::{Entry as Object, Step};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut recorder = Recorder::new(Arc::new(AuditLog::open(&path).unwrap()), || {
            UNIX_EPOCH + Duration::from_secs(1_800_000_000)
        });
        let step = |n, name: &str| Step {
            step: n,
            object: Object {
                engine: DEFAULT_ENGINE.into(),
                kind: Kind::Volume,
                id: None,
                name: name.into(),
                box_id: None,
                state: None,
                created: None,
            },
            why: Reason::NoBoxLabel,
            waits_for: vec![],
            archive: None,
            reads: vec![],
            archived_by: None,
        };
        let in_use = crate::model::EngineError::new(
            "remove volume v2",
            crate::model::ErrorKind::InUse {
                holders: vec!["0123456789abcdef".into()],
                message: "volume is in use".into(),
            },
        );
        recorder.finished(&step(1, "v1"), &Outcome::AlreadyGone, None);
        recorder.finished(&step(2, "v2"), &Outcome::Failed(in_use), None);
        recorder.finished(&step(3, "v3"), &Outcome::Skipped(2), None);
        assert_eq!(recorder.written, 2);
        assert!(recorder.error.is_none());
        // An archive goes on the line of the removal it preceded, and only there.
        let dir2 = tempfile::tempdir().unwrap();
        let path2 = dir2.path().join("audit.jsonl");
        let mut recorder2 = Recorder::new(Arc::new(AuditLog::open(&path2).unwrap()), || {
            UNIX_EPOCH + Duration::from_secs(1_800_000_000)
        });
        let archived = crate::exec::archive::Archived {
            volume: "v4".into(),
            path: "/a/default/_/v4-20270115T080000Z.tar.zst".into(),
            manifest: "/a/default/_/v4-20270115T080000Z.json".into(),
            sha256: "ab".repeat(32),
            bytes: 123,
            uncompressed_size: 2048,
            file_count: 2,
            file_bytes: 1500,
            elapsed_ms: 40,
        };
        recorder2.archived(&step(4, "v4"), &archived);
        recorder2.finished(&step(4, "v4"), &Outcome::Removed, Some(1500));
        recorder2.finished(
            &step(5, "v5"),
            &Outcome::ArchiveFailed("disk full".into()),
            Some(7),
        );
        let text = std::fs::read_to_string(&path2).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            lines[0]["archive"]["path"],
            "/a/default/_/v4-20270115T080000Z.tar.zst"
        );
        assert_eq!(lines[0]["archive"]["bytes"], 123);
        assert_eq!(lines[0]["archive"]["sha256"], "ab".repeat(32));
        assert_eq!(lines[0]["reclaimedBytes"], 1500);
        assert_eq!(lines[1]["outcome"], "archiveFailed");
        assert!(lines[1].get("archive").is_none());
        assert!(
            lines[1].get("reclaimedBytes").is_none(),
            "what was not removed gave nothing back"
        );
        assert_eq!(
            lines[1]["error"],
            "not removed: its archive failed: disk full"
        );
        insta::assert_snapshot!(std::fs::read_to_string(&path).unwrap(), @r#"
        {"time":"2027-01-15T08:00:00.000Z","engine":"default","kind":"volume","name":"v1","labels":{},"reason":{"code":"noBoxLabel","text":"leaked: no ca.sandbox.id label"},"outcome":"alreadyGone"}
        {"time":"2027-01-15T08:00:00.000Z","engine":"default","kind":"volume","name":"v2","labels":{},"reason":{"code":"noBoxLabel","text":"leaked: no ca.sandbox.id label"},"outcome":"failed","error":"remove volume v2: conflict: volume is in use (in use by container 0123456789ab; never forced)"}
        "#);
    }

    #[test]
    fn the_latest_removal_of_a_box_in_scope_is_found_from_the_end_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let line = |time: &str, engine: &str, box_id: &str, outcome: &str, team: &str| {
            serde_json::json!({
                "time": time, "engine": engine, "kind": "container", "name": format!("sbx-{box_id}"),
                "labels": {"ca.sandbox": "1", "ca.sandbox.id": box_id, "team": team},
                "reason": {"code": "destroyRequested", "text": "destroy named it"},
                "outcome": outcome
            })
            .to_string()
        };
        let scope: crate::model::Labels = [("team".to_string(), "a".to_string())].into();
        let engines = vec!["default".to_string()];
        let find = |tail| last_removal(&path, "b1", &scope, &engines, tail).unwrap();
        assert_eq!(find(TAIL_BYTES), None, "no file is no line");
        let mut text = String::new();
        text.push_str(&line(
            "2026-01-01T00:00:00.000Z",
            "default",
            "b1",
            "removed",
            "a",
        ));
        text.push_str("\nnot json\n");
        text.push_str(&line(
            "2026-01-02T00:00:00.000Z",
            "default",
            "b1",
            "failed",
            "a",
        ));
        text.push('\n');
        text.push_str(&line(
            "2026-01-03T00:00:00.000Z",
            "other",
            "b1",
            "removed",
            "a",
        ));
        text.push('\n');
        text.push_str(&line(
            "2026-01-04T00:00:00.000Z",
            "default",
            "b1",
            "removed",
            "b",
        ));
        text.push('\n');
        text.push_str(&line(
            "2026-01-05T00:00:00.000Z",
            "default",
            "b10",
            "removed",
            "a",
        ));
        text.push('\n');
        std::fs::write(&path, &text).unwrap();
        // Failed, another engine, another scope, another box: not it.
        let found = find(TAIL_BYTES).expect("the first line");
        assert_eq!(found.time, "2026-01-01T00:00:00.000Z");
        assert_eq!(found.code, "destroyRequested");
        assert_eq!(found.name, "sbx-b1");
        // Only the end is read: the first line is out of reach.
        let tail = (text.len() - text.find("not json").unwrap()) as u64;
        assert_eq!(find(tail), None);
    }
}
