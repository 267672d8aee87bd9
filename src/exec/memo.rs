//! The memo of what container inspections taught: the namespaces each
//! container shares (`--network/--pid/--ipc container:X`) and whether its
//! ipc namespace is shareable, by container ID. Docker and Podman fix both
//! when a container is created (no `update` changes them) and never give an
//! ID twice, so an answer stays true as long as its container exists.
//!
//! Owns the memo in memory (a run's verification and, in `watch`, later
//! cycles ask no container whose answer is known; a failed inspection is
//! asked again only by the next run or cycle) and its file,
//! `<state>/sandboxctl/joins.json` (decision 11), which carries the answers
//! from one run to the next: a `destroy` beside many unrelated containers
//! inspects only those it has not met before.
//!
//! The file is untrusted input like every other: it is read only when it is
//! a regular file (never through a link), the user's own, with no group or
//! other permission, at most `MAX_BYTES`, and every entry is checked; a file
//! that fails any check is ignored whole (every container is inspected, as
//! without a memo) and replaced at the end of the run. It is written to a
//! private temporary file beside it and renamed over it, never through a
//! link. A memo that cannot be read or written costs inspections, never a
//! failure: the file is a cache. An answer is used only for a container
//! that the run's own listing shows (see `list::inspect_joins`), so an entry
//! of a container that is gone is never used; entries older than `MAX_AGE`
//! and beyond `MAX_ENTRIES` (the oldest first) are dropped.
//!
//! Must not call an engine, decide what an answer means (`plan::inventory`),
//! or print.

use std::collections::HashMap;
use std::io::{self, Read};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};

use crate::engine::EngineError;
use crate::model::{Join, Kind, ObjectKey};

/// The file's format version.
const VERSION: u32 = 1;
/// A larger file is not read (about 40,000 entries).
const MAX_BYTES: u64 = 8 << 20;
/// At most this many answers are kept in the file (in memory, an eighth
/// more before they are pruned); the oldest go first.
pub(crate) const MAX_ENTRIES: usize = 20_000;
/// An answer older than this (seconds) is dropped when the file is written:
/// the containers of a busy engine come and go, and a later run asks again.
const MAX_AGE: u64 = 30 * 24 * 3600;
/// Longest engine name, ID or join target an entry may carry.
const MAX_FIELD: usize = 256;

/// The file's name in sandboxctl's state folder.
pub(crate) const FILE_NAME: &str = "joins.json";

/// What inspections taught, by container, and which inspections failed in
/// this run or cycle.
#[derive(Debug, Default)]
pub struct Memo(Mutex<Learnt>);

/// One container's answer.
#[derive(Debug, Clone)]
pub(crate) struct Known {
    pub(crate) joins: Vec<Join>,
    pub(crate) ipc_shareable: Option<bool>,
    /// When it was learnt (Unix seconds).
    learnt_at: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Learnt {
    known: HashMap<ObjectKey, Known>,
    pub(crate) failed: HashMap<ObjectKey, EngineError>,
    /// Something was learnt since the memo was read.
    changed: bool,
}

impl Learnt {
    pub(crate) fn get(&self, key: &ObjectKey) -> Option<&Known> {
        self.known.get(key)
    }

    /// `key`'s answer, learnt now.
    pub(crate) fn learn(&mut self, key: ObjectKey, joins: Vec<Join>, ipc_shareable: Option<bool>) {
        let known = Known {
            joins,
            ipc_shareable,
            learnt_at: now_secs(),
        };
        self.known.insert(key, known);
        self.changed = true;
        // Pruned in steps, not at every answer past the bound.
        if self.known.len() > MAX_ENTRIES + MAX_ENTRIES / 8 {
            self.keep_newest(MAX_ENTRIES);
        }
    }

    /// Drops all but the `n` most recently learnt answers.
    fn keep_newest(&mut self, n: usize) {
        let mut ages: Vec<u64> = self.known.values().map(|k| k.learnt_at).collect();
        ages.sort_unstable_by(|a, b| b.cmp(a));
        if let Some(&oldest_kept) = ages.get(n.saturating_sub(1)) {
            self.known.retain(|_, k| k.learnt_at >= oldest_kept);
            // Ties at the boundary: drop arbitrary ones of that second.
            let extra = self.known.len().saturating_sub(n);
            let drop: Vec<ObjectKey> = self
                .known
                .iter()
                .filter(|(_, k)| k.learnt_at == oldest_kept)
                .map(|(key, _)| key.clone())
                .take(extra)
                .collect();
            for key in drop {
                self.known.remove(&key);
            }
        }
    }
}

impl Memo {
    pub(crate) fn learnt(&self) -> MutexGuard<'_, Learnt> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new run or cycle on `engine`: its failed inspections are tried again.
    pub(crate) fn begin(&self, engine: &str) {
        self.learnt().failed.retain(|k, _| k.engine != engine);
    }

    /// How many containers' answers are known (for tests and benchmarks).
    pub fn known(&self) -> usize {
        self.learnt().known.len()
    }

    /// The memo kept in `path`, or an empty one when there is none or it
    /// cannot be used (see the module's header).
    pub fn read(path: &Path) -> Memo {
        let known = read_file(path).unwrap_or_default();
        Memo(Mutex::new(Learnt {
            known,
            ..Learnt::default()
        }))
    }

    /// Writes the memo to `path` when something was learnt since it was read
    /// (or the file could not be used): the answers younger than `MAX_AGE`,
    /// at most `MAX_ENTRIES`. Makes the folder (`0700`) when missing.
    pub fn write(&self, path: &Path) -> io::Result<()> {
        let text = {
            let mut learnt = self.learnt();
            if !learnt.changed {
                return Ok(());
            }
            let now = now_secs();
            learnt
                .known
                .retain(|_, k| now.saturating_sub(k.learnt_at) <= MAX_AGE);
            learnt.keep_newest(MAX_ENTRIES);
            let mut containers: Vec<Entry> = learnt
                .known
                .iter()
                .map(|(key, k)| Entry {
                    engine: key.engine.clone(),
                    id: key.id.clone(),
                    joins: k.joins.clone(),
                    ipc_shareable: k.ipc_shareable,
                    learnt_at: k.learnt_at,
                })
                .collect();
            containers.sort_by(|a, b| (&a.engine, &a.id).cmp(&(&b.engine, &b.id)));
            learnt.changed = false;
            serde_json::to_vec(&File {
                version: VERSION,
                containers,
            })
            .expect("the memo serializes")
        };
        if let Some(folder) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(crate::exec::files::FOLDER_MODE)
                .create(folder)?;
        }
        crate::exec::files::replace_unsynced(path, &text)
    }
}

/// The memo file of a run: `<state folder>/sandboxctl/joins.json`, where the
/// state folder is `XDG_STATE_HOME` (absolute) or `HOME/.local/state`.
pub(crate) fn path_in(state: Option<PathBuf>) -> Option<PathBuf> {
    state.map(|s| s.join("sandboxctl").join(FILE_NAME))
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: u32,
    containers: Vec<Entry>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Entry {
    engine: String,
    id: String,
    joins: Vec<Join>,
    ipc_shareable: Option<bool>,
    learnt_at: u64,
}

impl Entry {
    /// Whether every field is one an engine could have given: IDs of
    /// letters, digits, `_.-`; a join target and an engine name without
    /// control characters; each field at most `MAX_FIELD` bytes; at most one
    /// join per namespace; a time not in the future.
    fn is_sound(&self, now: u64) -> bool {
        let id_like = |s: &str| {
            !s.is_empty()
                && s.len() <= MAX_FIELD
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        };
        let text =
            |s: &str| !s.is_empty() && s.len() <= MAX_FIELD && !s.chars().any(char::is_control);
        let mut namespaces: Vec<_> = self.joins.iter().map(|j| j.namespace).collect();
        namespaces.sort();
        namespaces.dedup();
        text(&self.engine)
            && id_like(&self.id)
            && namespaces.len() == self.joins.len()
            && self.joins.iter().all(|j| text(&j.target))
            && self.learnt_at <= now + 3600
    }
}

/// The answers in `path`; `None` when there is no file or it cannot be used.
fn read_file(path: &Path) -> Option<HashMap<ObjectKey, Known>> {
    let (mut file, len) = crate::exec::files::open_private(path).ok()?;
    if len > MAX_BYTES {
        return None;
    }
    let mut bytes = Vec::with_capacity(len as usize);
    (&mut file)
        .take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    parse(&bytes, now_secs())
}

/// The answers in a memo file's `bytes`, every entry checked; `None` unless
/// all of it is sound.
pub(crate) fn parse(bytes: &[u8], now: u64) -> Option<HashMap<ObjectKey, Known>> {
    if bytes.len() as u64 > MAX_BYTES {
        return None;
    }
    let file: File = serde_json::from_slice(bytes).ok()?;
    if file.version != VERSION || file.containers.len() > MAX_ENTRIES {
        return None;
    }
    let mut known = HashMap::with_capacity(file.containers.len());
    for e in file.containers {
        if !e.is_sound(now) {
            return None;
        }
        let key = ObjectKey::new(&e.engine, Kind::Container, &e.id);
        let answer = Known {
            joins: e.joins,
            ipc_shareable: e.ipc_shareable,
            learnt_at: e.learnt_at,
        };
        if known.insert(key, answer).is_some() {
            return None;
        }
    }
    Some(known)
}

fn now_secs() -> u64 {
    let ms = crate::model::time::unix_ms(std::time::SystemTime::now());
    u64::try_from(ms / 1000).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::model::Namespace;

    fn key(id: &str) -> ObjectKey {
        ObjectKey::new("default", Kind::Container, id)
    }

    fn pid_of(target: &str) -> Vec<Join> {
        vec![Join {
            namespace: Namespace::Pid,
            target: target.into(),
        }]
    }

    /// A memo that learnt `a` (joins `b`'s pid namespace) and `c` (none).
    fn taught() -> Memo {
        let memo = Memo::default();
        let mut learnt = memo.learnt();
        learnt.learn(key("a"), pid_of("b"), Some(false));
        learnt.learn(key("c"), vec![], Some(true));
        drop(learnt);
        memo
    }

    #[test]
    fn answers_come_back_from_the_file_private_and_only_when_new_ones_were_learnt() {
        crate::exec::files::tests::umask_022();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/sandboxctl").join(FILE_NAME);
        taught().write(&path).unwrap();
        assert_eq!(crate::exec::files::tests::mode(&path), 0o600);
        assert_eq!(
            crate::exec::files::tests::mode(path.parent().unwrap()),
            0o700
        );
        let back = Memo::read(&path);
        assert_eq!(back.known(), 2);
        let learnt = back.learnt();
        assert_eq!(learnt.get(&key("a")).unwrap().joins, pid_of("b"));
        assert_eq!(learnt.get(&key("c")).unwrap().ipc_shareable, Some(true));
        assert!(learnt.get(&key("b")).is_none());
        drop(learnt);
        // Nothing new: the file is not written again.
        std::fs::remove_file(&path).unwrap();
        back.write(&path).unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn a_file_that_is_not_the_users_own_private_regular_file_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        taught().write(&path).unwrap();
        assert_eq!(Memo::read(&path).known(), 2);
        // Others may read it.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(Memo::read(&path).known(), 0);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        // A link to it.
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert_eq!(Memo::read(&link).known(), 0);
        // A folder, and nothing at all.
        assert_eq!(Memo::read(dir.path()).known(), 0);
        assert_eq!(Memo::read(&dir.path().join("none")).known(), 0);
        // Writing over the link replaces the link, never its target.
        let memo = taught();
        memo.learnt().learn(key("d"), vec![], None);
        memo.write(&link).unwrap();
        assert!(!std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(Memo::read(&path).known(), 2);
    }

    #[test]
    fn a_file_with_any_unsound_entry_is_ignored_whole() {
        let now = 1_800_000_000;
        let entry = |engine: &str, id: &str, joins: &str, at: u64| {
            format!(
                r#"{{"engine":"{engine}","id":"{id}","joins":{joins},"ipcShareable":null,"learntAt":{at}}}"#
            )
        };
        let file =
            |entries: &[String]| format!(r#"{{"version":1,"containers":[{}]}}"#, entries.join(","));
        let good = entry("default", "abc", "[]", now);
        assert_eq!(
            parse(file(std::slice::from_ref(&good)).as_bytes(), now)
                .unwrap()
                .len(),
            1
        );
        let pid = r#"[{"namespace":"pid","target":"x"}]"#;
        let two_pids = r#"[{"namespace":"pid","target":"x"},{"namespace":"pid","target":"y"}]"#;
        for bad in [
            entry("default", "a/b", "[]", now),
            entry("default", "", "[]", now),
            entry("default", &"a".repeat(MAX_FIELD + 1), "[]", now),
            entry("de\\u001bfault", "abc2", "[]", now),
            entry("default", "abc2", two_pids, now),
            entry(
                "default",
                "abc2",
                r#"[{"namespace":"user","target":"x"}]"#,
                now,
            ),
            entry(
                "default",
                "abc2",
                r#"[{"namespace":"pid","target":""}]"#,
                now,
            ),
            entry("default", "abc2", pid, now + 7200),
            good.clone(),
        ] {
            assert!(
                parse(file(&[good.clone(), bad.clone()]).as_bytes(), now).is_none(),
                "{bad}"
            );
        }
        for text in [
            r#"{"version":2,"containers":[]}"#.to_string(),
            r#"{"version":1,"containers":[],"more":1}"#.to_string(),
            file(&[good.replace("}", r#","extra":1}"#)]),
            "[]".to_string(),
            "not json".to_string(),
        ] {
            assert!(parse(text.as_bytes(), now).is_none(), "{text}");
        }
    }

    #[test]
    fn old_answers_go_and_the_newest_are_kept_within_the_bound() {
        let memo = Memo::default();
        {
            let mut learnt = memo.learnt();
            learnt.learn(key("old"), vec![], None);
            learnt.known.get_mut(&key("old")).unwrap().learnt_at = now_secs() - MAX_AGE - 1;
            learnt.learn(key("new"), vec![], None);
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        memo.write(&path).unwrap();
        let back = Memo::read(&path);
        assert_eq!(back.known(), 1);
        assert!(back.learnt().get(&key("new")).is_some());

        let mut learnt = Learnt::default();
        for (i, at) in [5, 1, 4, 2, 3, 3].into_iter().enumerate() {
            learnt.known.insert(
                key(&format!("c{i}")),
                Known {
                    joins: vec![],
                    ipc_shareable: None,
                    learnt_at: at,
                },
            );
        }
        learnt.keep_newest(3);
        let mut kept: Vec<u64> = learnt.known.values().map(|k| k.learnt_at).collect();
        kept.sort_unstable();
        assert_eq!(kept, [3, 4, 5]);
    }
}
