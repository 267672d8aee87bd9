//! The schema walk: the TOML document parsed (with its spans) and checked
//! against the format, table by table and key by key (unknown keys, wrong
//! types, missing keys, `host` with `context`, `expires` with `ttl`), then
//! across entries (duplicate boxes, kept volumes and engines, `engine =`
//! naming no `[[engine]]`: `across.rs`), into a [`DesiredState`].
//!
//! Owns the format's tables and keys, the hints that explain them, and the
//! order of problems (every one, sorted by position; a syntax error alone).
//! Must not judge single values itself (rules.rs does: ids, names, labels,
//! hosts, durations, times) and must not read files or scan raw text
//! (read.rs and scan.rs run first).

mod across;
mod notify;

use std::path::Path;
use std::time::Duration;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use crate::model::Labels;

use super::error::{line_col, StateError, StateErrorKind};
use super::rules::{
    context_problem, host_problem, label_key_problem, label_value_problem, name_problem,
    parse_duration, parse_time, DURATION_HINT, MAX_BOX_ID_CHARS, TIME_HINT,
};
use super::show::{clean_message, Bare, Shown};
use super::{DesiredState, EngineTarget, Expiry};

const FORMAT_HINT: &str = "the format is [scope] labels = { \"key\" = \"value\" }, \
     [[box]] id = \"...\" (one table per box), [volumes] keep = [\"...\"]";
const ENGINE_HINT: &str = "each engine is a table: [[engine]] name = \"...\", and optionally \
     host = \"ssh://user@host\" or context = \"name\"";
const POLICY_HINT: &str =
    "the format is [policy] grace = \"10m\", max_lease = \"24h\", archive = \"/path/to/dir\"";
const KEEP_ENTRY: &str = "a volume name or an inline table { engine = \"...\", name = \"...\" }";

const TOP_KEYS: &[&str] = &["scope", "policy", "engine", "box", "volumes", "notify"];
const SCOPE_KEYS: &[&str] = &["labels"];
const POLICY_KEYS: &[&str] = &["grace", "max_lease", "archive"];
const ENGINE_KEYS: &[&str] = &["name", "host", "context", "swarm"];
const BOX_KEYS: &[&str] = &["id", "engine", "expires", "ttl", "archive"];
const VOLUMES_KEYS: &[&str] = &["keep"];
const KEEP_KEYS: &[&str] = &["engine", "name", "archive"];
const ARCHIVE_FLAG_HINT: &str =
    "write archive = false to remove this entry's volumes without an archive";

/// Parses `text` as TOML and walks it: the state, or every problem in file
/// order (never an empty list). A syntax error stops parsing, so it is alone;
/// every other rule is checked everywhere. `path` is only used in messages
/// and `source`.
pub(super) fn walk(text: &str, path: &Path) -> Result<DesiredState, Vec<StateError>> {
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
    max_lease: Option<Duration>,
    archive: Option<std::path::PathBuf>,
    engines: Vec<RawEngine>,
    boxes: Vec<RawBox>,
    keep: Vec<RawKeep>,
    notify: Vec<super::NotifyDecl>,
}

struct RawEngine {
    name: Option<At>,
    target: EngineTarget,
    swarm: bool,
}

struct RawBox {
    id: Option<At>,
    engine: Option<At>,
    expiry: Option<Expiry>,
    archive: bool,
}

struct RawKeep {
    name: Option<At>,
    engine: Option<At>,
    archive: bool,
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

    /// A boolean value, or a wrong-type problem.
    fn boolean(&mut self, (_, value): Entry<'_, '_>, hint: &str) -> Option<bool> {
        match value.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                self.wrong_type(value, "true or false", hint);
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

    /// The tables of the array `value` (`hint`: how to write it), each read
    /// by `read` with its offset; an item that is not a table is a
    /// wrong-type problem (`expected`, `table_hint`).
    fn tables<T>(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        hint: &str,
        expected: &str,
        table_hint: &str,
        mut read: impl FnMut(&mut Self, &DeTable<'_>, usize) -> T,
    ) -> Vec<T> {
        let Some(items) = self.array(value, hint) else {
            return Vec::new();
        };
        let mut all = Vec::new();
        for item in items {
            if let Some(table) = self.table(item, expected, table_hint) {
                all.push(read(self, table, item.span().start));
            }
        }
        all
    }

    /// A missing-key problem (with `hint`) if `table`, at offset `at`, lacks `key`.
    fn require(&mut self, table: &DeTable<'_>, at: usize, key: &'static str, hint: &str) {
        if !has_key(table, key) {
            let hint = hint.to_string();
            self.problem(at, StateErrorKind::MissingKey { key, hint });
        }
    }

    /// Whether `key`, at offset `at`, is the first of two keys that exclude
    /// each other (`seen`: the one set before, if any, and where); else a
    /// conflict problem.
    fn first_of_two(
        &mut self,
        seen: &mut Option<(&'static str, usize)>,
        key: &'static str,
        at: usize,
    ) -> bool {
        if let Some((other, other_at)) = *seen {
            let kind = StateErrorKind::Conflict {
                key,
                other,
                other_at: self.line_col(other_at),
            };
            self.problem(at, kind);
            return false;
        }
        *seen = Some((key, at));
        true
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
                "policy" => (raw.grace, raw.max_lease, raw.archive) = self.policy(value),
                "engine" => raw.engines = self.engines(value),
                "box" => raw.boxes = self.boxes(value),
                "notify" => raw.notify = self.notifies(value),
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

    /// `grace`, `max_lease` and `archive`.
    fn policy(
        &mut self,
        value: &Spanned<DeValue<'_>>,
    ) -> (
        Option<Duration>,
        Option<Duration>,
        Option<std::path::PathBuf>,
    ) {
        let Some(table) = self.table(value, "a [policy] table", POLICY_HINT) else {
            return (None, None, None);
        };
        let (mut grace, mut max_lease, mut archive) = (None, None, None);
        for entry in self.known(table, POLICY_KEYS, "remove it or fix its spelling") {
            if entry.0.get_ref().as_ref() == "archive" {
                let hint = "write archive = \"/path/to/dir\": the folder archives go to";
                if let Some(text) = self.string(entry, "a folder path string", hint) {
                    if text.value.trim().is_empty() {
                        let kind = StateErrorKind::WrongType {
                            found: "an empty string".into(),
                            expected: "a folder path string".into(),
                            hint: hint.into(),
                        };
                        self.problem(text.at, kind);
                    } else {
                        archive = Some(std::path::PathBuf::from(text.value));
                    }
                }
                continue;
            }
            let (key, out) = if entry.0.get_ref().as_ref() == "max_lease" {
                ("max_lease", &mut max_lease)
            } else {
                ("grace", &mut grace)
            };
            let example = if key == "max_lease" { "24h" } else { "10m" };
            let hint = format!("write {key} = \"{example}\"");
            if let Some(text) = self.string(entry, "a duration string", &hint) {
                *out = self.duration(key, &text);
            }
        }
        (grace, max_lease, archive)
    }

    fn duration(&mut self, key: &'static str, text: &At) -> Option<Duration> {
        let parsed = parse_duration(&text.value).and_then(|d| {
            // A ceiling of zero would make every lease label invalid.
            if key == "max_lease" && d.is_zero() {
                Err(
                    "is zero, so a lease could never hold: write more than zero, e.g. 24h"
                        .to_string(),
                )
            } else {
                Ok(d)
            }
        });
        match parsed {
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
        self.tables(
            value,
            hint,
            "an [[engine]] table",
            ENGINE_HINT,
            Self::engine,
        )
    }

    /// One `[[engine]]` table, at offset `at`.
    fn engine(&mut self, table: &DeTable<'_>, at: usize) -> RawEngine {
        let mut engine = RawEngine {
            name: None,
            target: EngineTarget::Default,
            swarm: true,
        };
        let mut target_key: Option<(&'static str, usize)> = None;
        for entry in self.known(table, ENGINE_KEYS, "remove it or fix its spelling") {
            let key = entry.0.get_ref().as_ref();
            if key == "swarm" {
                let hint = "swarm = false: this engine's Swarm services, configs and secrets are not managed here (a swarm worker's are listed by a manager)";
                if let Some(swarm) = self.boolean(entry, hint) {
                    engine.swarm = swarm;
                }
                continue;
            }
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
            if !self.first_of_two(&mut target_key, key, text.key) {
                engine.target = EngineTarget::Default;
                continue;
            }
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
        let hint = "add name = \"...\" to this [[engine]] table";
        self.require(table, at, "name", hint);
        engine
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
        self.tables(value, hint, "a [[box]] table", FORMAT_HINT, Self::a_box)
    }

    /// One `[[box]]` table, at offset `at`.
    fn a_box(&mut self, table: &DeTable<'_>, at: usize) -> RawBox {
        let mut b = RawBox {
            id: None,
            engine: None,
            expiry: None,
            archive: true,
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
                "archive" => {
                    b.archive = self.boolean(entry, ARCHIVE_FLAG_HINT).unwrap_or(true);
                }
                _ => {
                    let key: &'static str = if key == "ttl" { "ttl" } else { "expires" };
                    let text = if key == "expires" {
                        self.time_string(entry)
                    } else {
                        self.string(entry, "a duration string", "write ttl = \"8h\"")
                    };
                    let Some(text) = text else { continue };
                    if !self.first_of_two(&mut expiry_key, key, text.key) {
                        b.expiry = None;
                        continue;
                    }
                    b.expiry = if key == "ttl" {
                        self.ttl(&text)
                    } else {
                        self.time(&text)
                    };
                }
            }
        }
        self.require(table, at, "id", "add id = \"...\" to this [[box]] table");
        b
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
                reason: format!("is zero, which would expire the box at once: {DURATION_HINT}"),
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
                        archive: true,
                        at,
                    }),
                    DeValue::Table(t) => {
                        let mut entry = RawKeep {
                            name: None,
                            engine: None,
                            archive: true,
                            at,
                        };
                        let hint = "write { engine = \"...\", name = \"...\" }";
                        for field in self.known(t, KEEP_KEYS, "remove it or fix its spelling") {
                            if field.0.get_ref().as_ref() == "archive" {
                                entry.archive =
                                    self.boolean(field, ARCHIVE_FLAG_HINT).unwrap_or(true);
                                continue;
                            }
                            let text = self.string(field, "a string", hint);
                            if field.0.get_ref().as_ref() == "name" {
                                entry.name = text;
                            } else {
                                entry.engine = text;
                            }
                        }
                        let hint = "add name = \"...\" (the volume name) to this entry";
                        self.require(t, at, "name", hint);
                        keep.push(entry);
                    }
                    _ => self.wrong_type(item, KEEP_ENTRY, FORMAT_HINT),
                }
            }
        }
        keep
    }
}

/// True if `table` has `key` (whatever its value).
fn has_key(table: &DeTable<'_>, key: &str) -> bool {
    table.iter().any(|(k, _)| k.get_ref() == key)
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::SystemTime;

    use super::*;
    use crate::state::testing::{all, err, ids, kept, parse};
    use crate::state::{check, BoxDecl, EngineDecl, KeepVolume, Policy};

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
    fn an_engine_may_put_its_swarm_kinds_out_of_scope() {
        let state = parse(
            "[[engine]]\nname = \"manager\"\n\n[[engine]]\nname = \"worker\"\nswarm = false\n",
        )
        .unwrap();
        let swarm: Vec<(&str, bool)> = state
            .engines
            .iter()
            .map(|e| (e.name.as_str(), e.swarm))
            .collect();
        assert_eq!(swarm, [("manager", true), ("worker", false)]);
        let e = err("[[engine]]\nname = \"w\"\nswarm = \"no\"\n");
        assert!(e.starts_with("s.toml:3:9: "), "{e}");
        assert!(e.contains("true or false"), "{e}");
    }

    #[test]
    fn scope_labels_as_a_table_and_dotted_key() {
        let state = parse("[scope.labels]\n\"a.b\" = \"c\"\nowner = \"x\"\n").unwrap();
        assert_eq!(state.scope.len(), 2);
        let state = parse("[scope]\nlabels.owner = \"x\"\n").unwrap();
        assert_eq!(state.scope.get("owner").unwrap(), "x");
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
                 `ttl`, `archive`; remove it or fix its spelling"
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
                        archive: true,
                    },
                    BoxDecl {
                        id: "demo".into(),
                        engine: engine("ci-1"),
                        expiry: Some(at(1_798_135_200)),
                        line: 16,
                        archive: true,
                    },
                    BoxDecl {
                        id: "demo".into(),
                        engine: engine("local"),
                        expiry: Some(Expiry::Ttl(Duration::from_secs(8 * 3600))),
                        line: 21,
                        archive: true,
                    },
                ],
                keep_volumes: vec![
                    KeepVolume {
                        name: "cache".into(),
                        engine: engine("ci-1"),
                        line: 29,
                        archive: true,
                    },
                    KeepVolume {
                        name: "cache".into(),
                        engine: engine("mac"),
                        line: 29,
                        archive: true,
                    },
                    KeepVolume {
                        name: "notes".into(),
                        engine: None,
                        line: 29,
                        archive: true,
                    },
                ],
                policy: Policy {
                    grace: Some(Duration::from_secs(600)),
                    max_lease: None,
                    archive: None,
                },
                notify: vec![],
                engines: vec![
                    EngineDecl {
                        name: "ci-1".into(),
                        target: EngineTarget::Host("ssh://runner@ci-1".into()),
                        swarm: true,
                        line: 5,
                    },
                    EngineDecl {
                        name: "mac".into(),
                        target: EngineTarget::Context("colima".into()),
                        swarm: true,
                        line: 9,
                    },
                    EngineDecl {
                        name: "local".into(),
                        target: EngineTarget::Default,
                        swarm: true,
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
}
