//! The seal of a saved plan: an HMAC-SHA256, under a key private to its
//! user, over the plan's JSON in canonical form (parsed, its `seal` member
//! taken out, members sorted, no spaces). `plan --out` seals what it saves;
//! `apply FILE` opens the seal before it reads anything else of the plan. An
//! edit of any member, however consistent with the others (the goal's
//! archive folder together with every step's, the plan's time, its scope, its
//! goal), is refused before any engine call. A digest without a secret could
//! be recomputed by whoever edits the file; see
//! `docs/decisions/0009-sealed-plans.md`.
//!
//! Owns the key: where it is ([`KeySource`]: `SANDBOXCTL_PLAN_KEY`, 64 hex
//! digits, when set and not empty, else the file
//! `$XDG_STATE_HOME/sandboxctl/plan.key`, else
//! `~/.local/state/sandboxctl/plan.key`), what a valid one is (64 hex digits;
//! a file that is regular, its user's own, without group or other
//! permissions, and never read through a link), and making one (only when
//! sealing: `0600` in folders made `0700`, published by a hard link so that
//! makers at the same moment agree on one key and a link planted at its name
//! is never written through). Must not read or write plan files, or decide
//! what a plan may do; never prints a key.

use std::ffi::OsString;
use std::fmt;
use std::io::{self, Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use hmac::{Hmac, KeyInit, Mac};
use serde_json::Value;
use sha2::Sha256;

use crate::exec::files::NotPrivate;

/// The environment variable that holds a key (64 hex digits) in place of the file.
pub(crate) const KEY_VARIABLE: &str = "SANDBOXCTL_PLAN_KEY";
/// The member of a saved plan that holds its seal.
const MEMBER: &str = "seal";
/// How a seal's text begins.
pub(crate) const PREFIX: &str = "hmac-sha256:";
/// What the MAC covers before the plan: the seal's purpose and version.
const DOMAIN: &[u8] = b"sandboxctl saved plan seal v1\n";

/// A key of 32 bytes. Its `Debug` shows nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Key([u8; 32]);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// A key from its 64 hex digits (either case); `None` for anything else.
    fn from_hex(text: &str) -> Option<Key> {
        let bytes = text.as_bytes();
        if bytes.len() != 64 {
            return None;
        }
        let mut key = [0u8; 32];
        for (i, pair) in bytes.chunks(2).enumerate() {
            let digit = |b: u8| (b as char).to_digit(16);
            key[i] = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
        }
        Some(Key(key))
    }

    fn hex(&self) -> String {
        crate::model::hex(&self.0)
    }

    /// A new random key (the kernel's `getrandom`).
    fn random() -> io::Result<Key> {
        let mut key = [0u8; 32];
        let mut filled = 0;
        while filled < key.len() {
            // SAFETY: writes at most the rest of `key`, which it borrows.
            let n = unsafe {
                libc::getrandom(key[filled..].as_mut_ptr().cast(), key.len() - filled, 0)
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            } else {
                filled += n as usize;
            }
        }
        Ok(Key(key))
    }

    /// A fixed key, for the fuzz target and the property tests of the
    /// reader behind the seal.
    pub(crate) fn fixed_for_tests() -> Key {
        Key([7; 32])
    }

    fn mac(&self, canonical: &[u8]) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .expect("HMAC takes a key of any length");
        mac.update(DOMAIN);
        mac.update(canonical);
        mac
    }
}

/// Where the key of this run is, resolved once from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeySource {
    /// `SANDBOXCTL_PLAN_KEY`, as it was set (checked when used).
    Variable(String),
    /// The key file.
    File(PathBuf),
    /// No variable, and no folder to keep a file in (neither an absolute
    /// `XDG_STATE_HOME` nor `HOME`).
    Nowhere,
}

impl KeySource {
    /// From `SANDBOXCTL_PLAN_KEY`, `XDG_STATE_HOME` and `HOME`, as given.
    pub(crate) fn resolve(
        variable: Option<OsString>,
        state_home: Option<OsString>,
        home: Option<OsString>,
    ) -> KeySource {
        // Set but empty is not set (a CI secret that was never given).
        if let Some(v) = variable.filter(|v| !v.is_empty()) {
            return KeySource::Variable(v.to_string_lossy().into_owned());
        }
        match crate::exec::files::state_folder(state_home, home) {
            Some(state) => KeySource::File(state.join("sandboxctl").join("plan.key")),
            None => KeySource::Nowhere,
        }
    }

    /// From this process's environment.
    pub(crate) fn from_process() -> KeySource {
        KeySource::resolve(
            std::env::var_os(KEY_VARIABLE),
            std::env::var_os("XDG_STATE_HOME"),
            std::env::var_os("HOME"),
        )
    }

    /// The key to seal with: the variable's, the file's, or a new one made
    /// in the file when there is none yet.
    pub(crate) fn for_sealing(&self) -> Result<Key, SealError> {
        match self {
            KeySource::File(path) => match read_key_file(path) {
                Err(SealError::NoKey { .. }) => make_key_file(path),
                other => other,
            },
            _ => self.for_opening(),
        }
    }

    /// The key to open a seal with; never makes one.
    pub(crate) fn for_opening(&self) -> Result<Key, SealError> {
        match self {
            KeySource::Variable(text) => Key::from_hex(text.trim()).ok_or(SealError::BadVariable),
            KeySource::File(path) => read_key_file(path),
            KeySource::Nowhere => Err(SealError::Nowhere),
        }
    }
}

/// Why a plan could not be sealed or its seal opened. Says what to do.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SealError {
    #[error("{KEY_VARIABLE} is not a key: it must be 64 hex digits (32 bytes), for example from `openssl rand -hex 32`")]
    BadVariable,
    #[error("no folder for the plan key: set {KEY_VARIABLE} (64 hex digits, for example from `openssl rand -hex 32`), or HOME or XDG_STATE_HOME")]
    Nowhere,
    #[error("no plan key at {}: no plan was saved with this key here, so this plan was made elsewhere or by another user; make a new plan here with `sandboxctl plan --out FILE`, or set {KEY_VARIABLE} to the key it was made with", path.display())]
    NoKey { path: PathBuf },
    #[error("plan key {}: {problem}; remove it (saved plans made with it will need making again) or mend it", path.display())]
    BadFile { path: PathBuf, problem: String },
    #[error("cannot make the plan key {}: {error}; check that folder, or set {KEY_VARIABLE}", path.display())]
    CannotMake { path: PathBuf, error: io::Error },
    #[error("it carries no seal (was it edited? `sandboxctl plan --out` seals every plan it saves; one saved before seals has none); nothing was removed: make a new plan with `sandboxctl plan --out FILE`")]
    Unsealed,
    #[error("its seal does not match its content (was it edited? or sealed with another key: another machine or user, or another {KEY_VARIABLE}); nothing was removed: make a new plan with `sandboxctl plan --out FILE`")]
    Mismatch,
}

/// Reads the key file: never through a link, regular, the user's own, no
/// group or other permission, 64 hex digits and at most a newline.
fn read_key_file(path: &Path) -> Result<Key, SealError> {
    let bad = |problem: String| SealError::BadFile {
        path: path.to_path_buf(),
        problem,
    };
    let mut file = match crate::exec::files::open_private(path) {
        Ok((file, _)) => file,
        Err(NotPrivate::Missing) => {
            return Err(SealError::NoKey {
                path: path.to_path_buf(),
            })
        }
        Err(NotPrivate::Link) => {
            return Err(bad(
                "a symbolic link stands there, and a key is never read through one".into(),
            ))
        }
        Err(e) => return Err(bad(e.to_string())),
    };
    let mut text = String::new();
    (&mut file)
        .take(80)
        .read_to_string(&mut text)
        .map_err(|_| bad("it is not 64 hex digits".into()))?;
    let digits = text.strip_suffix('\n').unwrap_or(&text);
    Key::from_hex(digits).ok_or_else(|| bad("it is not 64 hex digits".into()))
}

/// Makes the key file: a new random key written to a private temporary
/// file beside it, then hard-linked to its name. The link fails if anything
/// stands there (another maker's key, or a planted link); then that is read
/// instead, as any key file is.
fn make_key_file(path: &Path) -> Result<Key, SealError> {
    let cannot = |error: io::Error| SealError::CannotMake {
        path: path.to_path_buf(),
        error,
    };
    if let Some(folder) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(crate::exec::files::FOLDER_MODE)
            .create(folder)
            .map_err(cannot)?;
    }
    let key = Key::random().map_err(cannot)?;
    // This process's ID and a count: unique among makers on this machine.
    static MADE: AtomicU64 = AtomicU64::new(0);
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(
        ".{}-{}.tmp~",
        std::process::id(),
        MADE.fetch_add(1, Ordering::Relaxed)
    ));
    let temporary = PathBuf::from(temporary);
    let mut file = crate::exec::files::create_new(&temporary).map_err(cannot)?;
    let linked = file
        .write_all(format!("{}\n", key.hex()).as_bytes())
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::hard_link(&temporary, path));
    let _ = std::fs::remove_file(&temporary);
    match linked {
        Ok(()) => Ok(key),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => read_key_file(path),
        Err(e) => Err(cannot(e)),
    }
}

/// The canonical bytes a seal covers: `value` without its seal member,
/// members sorted (serde_json's map is ordered by key), no spaces.
fn canonical(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).expect("a JSON value serializes")
}

/// `text` (a plan's JSON object, as `render` prints it) with a `seal`
/// member added last. Errors only if `text` is not a JSON object, which a
/// plan `render` made always is.
pub(crate) fn seal(text: &str, key: &Key) -> Result<String, String> {
    let mut value: Value =
        serde_json::from_str(text).map_err(|e| format!("the plan is not JSON: {e}"))?;
    let object = value
        .as_object_mut()
        .ok_or("the plan is not a JSON object")?;
    let resealed = object.remove(MEMBER).is_some();
    let tag = key.mac(&canonical(&value)).finalize().into_bytes();
    let tag = crate::model::hex(&tag);
    if resealed {
        // Its old seal cannot stay beside the new one: laid out anew.
        if let Some(object) = value.as_object_mut() {
            object.insert(MEMBER.into(), Value::String(format!("{PREFIX}{tag}")));
        }
        return Ok(serde_json::to_string_pretty(&value).expect("a JSON value serializes") + "\n");
    }
    // Added as text, so the plan keeps the order `render` printed it in.
    let body = text.trim_end();
    let body = body
        .strip_suffix('}')
        .ok_or("the plan does not end its object")?;
    let body = body.trim_end();
    let comma = if body.ends_with('{') { "" } else { "," };
    Ok(format!(
        "{body}{comma}\n  \"{MEMBER}\": \"{PREFIX}{tag}\"\n}}\n"
    ))
}

/// The plan in `text`, its seal checked and taken out: `Ok(None)` when
/// `text` is not a JSON object (the reader says what it is instead).
pub(crate) fn open(text: &str, key: &Key) -> Result<Option<Value>, SealError> {
    let Ok(mut value) = serde_json::from_str::<Value>(text) else {
        return Ok(None);
    };
    let Some(object) = value.as_object_mut() else {
        return Ok(None);
    };
    let tag = match object.remove(MEMBER) {
        Some(Value::String(s)) => s,
        _ => return Err(SealError::Unsealed),
    };
    let tag = tag
        .strip_prefix(PREFIX)
        .and_then(Key::from_hex)
        .ok_or(SealError::Mismatch)?;
    key.mac(&canonical(&value))
        .verify_slice(&tag.0)
        .map_err(|_| SealError::Mismatch)?;
    Ok(Some(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const PLAN: &str = "{\n  \"version\": 2,\n  \"goal\": {\"archive\": \"/srv/a\"},\n  \"steps\": [{\"archive\": \"/srv/a\"}]\n}\n";

    #[test]
    fn a_sealed_plan_opens_whatever_its_layout_and_keeps_its_order() {
        let key = Key::fixed_for_tests();
        let sealed = seal(PLAN, &key).unwrap();
        assert!(sealed.starts_with("{\n  \"version\": 2,"), "{sealed}");
        assert!(sealed.trim_end().ends_with("\"\n}"), "{sealed}");
        let opened = open(&sealed, &key).unwrap().unwrap();
        assert_eq!(opened, serde_json::from_str::<Value>(PLAN).unwrap());
        // Laid out anew (members reordered, spaces changed): the same plan.
        let value: Value = serde_json::from_str(&sealed).unwrap();
        let compact = serde_json::to_string(&value).unwrap();
        assert!(open(&compact, &key).unwrap().is_some());
        // Sealing a sealed plan seals it afresh, with one seal.
        let again = seal(&sealed, &key).unwrap();
        assert_eq!(again.matches("\"seal\"").count(), 1, "{again}");
        assert!(open(&again, &key).unwrap().is_some());
        assert!(seal("{}", &key).unwrap().starts_with("{\n  \"seal\""));
    }

    #[test]
    fn any_edit_or_another_key_breaks_the_seal() {
        let key = Key::fixed_for_tests();
        let sealed = seal(PLAN, &key).unwrap();
        // A consistent edit: every archive folder moved at once.
        let moved = sealed.replace("/srv/a", "/tmp/elsewhere");
        assert!(matches!(open(&moved, &key), Err(SealError::Mismatch)));
        let dropped = sealed.replace("\"version\": 2,", "");
        assert!(matches!(open(&dropped, &key), Err(SealError::Mismatch)));
        assert!(matches!(
            open(&sealed, &Key([8; 32])),
            Err(SealError::Mismatch)
        ));
        assert!(matches!(open(PLAN, &key), Err(SealError::Unsealed)));
        let mut value: Value = serde_json::from_str(&sealed).unwrap();
        for bad in [
            Value::from(1),
            Value::from("hmac-sha256:00"),
            Value::from("sha256:x"),
        ] {
            value["seal"] = bad;
            let text = value.to_string();
            assert!(open(&text, &key).is_err(), "{text}");
        }
        // Not an object: left to the reader to name.
        assert!(open("[1]", &key).unwrap().is_none());
        assert!(open("not json", &key).unwrap().is_none());
    }

    #[test]
    fn the_key_comes_from_the_variable_then_the_state_folder_then_home() {
        let some = |s: &str| Some(OsString::from(s));
        assert_eq!(
            KeySource::resolve(some("ab"), some("/s"), some("/h")),
            KeySource::Variable("ab".into())
        );
        assert_eq!(
            KeySource::resolve(None, some("/s"), some("/h")),
            KeySource::File("/s/sandboxctl/plan.key".into())
        );
        // A relative XDG_STATE_HOME is ignored, as the XDG rules say.
        assert_eq!(
            KeySource::resolve(None, some("rel"), some("/h")),
            KeySource::File("/h/.local/state/sandboxctl/plan.key".into())
        );
        assert_eq!(KeySource::resolve(None, None, None), KeySource::Nowhere);
        assert_eq!(
            KeySource::resolve(some(""), None, some("/h")),
            KeySource::File("/h/.local/state/sandboxctl/plan.key".into()),
            "set but empty is not set"
        );
        let hex = "0123456789abcdefABCDEF0123456789abcdef0123456789abcdef0123456789";
        assert!(KeySource::Variable(hex.into()).for_opening().is_ok());
        for bad in ["", "00", &hex[1..], &format!("{}g", &hex[1..])] {
            assert!(matches!(
                KeySource::Variable(bad.into()).for_opening(),
                Err(SealError::BadVariable)
            ));
        }
        assert!(matches!(
            KeySource::Nowhere.for_sealing(),
            Err(SealError::Nowhere)
        ));
    }

    #[test]
    fn a_key_file_is_made_once_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/sandboxctl/plan.key");
        let source = KeySource::File(path.clone());
        assert!(matches!(source.for_opening(), Err(SealError::NoKey { .. })));
        let made = source.for_sealing().unwrap();
        assert_eq!(source.for_opening().unwrap(), made);
        assert_eq!(source.for_sealing().unwrap(), made, "made once");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(mode(&dir.path().join("state")), 0o700);
        // Nothing but the key is left in its folder.
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1
        );
        // Makers at the same moment agree on one key.
        let other = dir.path().join("race/plan.key");
        let keys: Vec<Key> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| KeySource::File(other.clone()).for_sealing().unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(keys.windows(2).all(|w| w[0] == w[1]));
    }

    #[test]
    fn a_key_file_that_others_may_read_or_that_is_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.key");
        let source = KeySource::File(path.clone());
        let key = source.for_sealing().unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = source.for_opening().unwrap_err().to_string();
        assert!(
            e.contains("mode 0644") && e.contains(&path.display().to_string()),
            "{e}"
        );
        assert!(!e.contains(&key.hex()), "a message never shows the key");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        // A link to a valid key: never read, and never written through.
        let link = dir.path().join("link.key");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        for result in [
            KeySource::File(link.clone()).for_opening(),
            KeySource::File(link.clone()).for_sealing(),
        ] {
            let e = result.unwrap_err().to_string();
            assert!(e.contains("symbolic link"), "{e}");
        }
        let dangling = dir.path().join("dangling.key");
        let target = dir.path().join("target");
        std::os::unix::fs::symlink(&target, &dangling).unwrap();
        assert!(KeySource::File(dangling).for_sealing().is_err());
        assert!(!target.exists(), "nothing written through a link");
        std::fs::write(dir.path().join("short.key"), "abc\n").unwrap();
        let short = dir.path().join("short.key");
        std::fs::set_permissions(&short, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = KeySource::File(short)
            .for_opening()
            .unwrap_err()
            .to_string();
        assert!(e.contains("not 64 hex digits"), "{e}");
        let folder = dir.path().join("folder.key");
        std::fs::create_dir(&folder).unwrap();
        assert!(KeySource::File(folder).for_opening().is_err());
    }
}
