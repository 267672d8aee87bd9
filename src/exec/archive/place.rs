//! Where an archive goes: `DIR/<engine>/<box or _>/<volume>-<UTC time>`,
//! each name made one path element, injectively (`path_element`,
//! docs/archive.md), and the folders opened under `DIR` (`0700`, a link
//! below `DIR` refused: `ArchiveError::Symlink`).
//!
//! Owns the names and the opening of the folders; must not write a file in
//! them (the file protocol does) nor call an engine.

use std::path::{Path, PathBuf};

use super::ArchiveError;
use crate::exec::files::{self, Folder};

/// A name as one path element of an archive's place (an engine's name, a
/// box ID, a volume's name in the file's name), injectively: two names never
/// share an element. Every byte outside `[A-Za-z0-9._-]`, `%` itself
/// included, becomes `%XX` (upper-case hex), and so does a leading `.` (no
/// hidden file, never `.` nor `..`); the name `_` is `%5F` (a bare `_` is
/// the folder of volumes of no box), and the empty name is `%` (which
/// nothing else encodes to: every other `%` is followed by two hex digits).
/// So `a/b` is `a%2Fb`, `a_b` stays `a_b`, `../x` is `%2E.%2Fx`. Decoding
/// `%XX` gives the name back (docs/archive.md).
pub(super) fn path_element(text: &str) -> String {
    use std::fmt::Write as _;
    match text {
        "" => return "%".into(),
        "_" => return "%5F".into(),
        _ => {}
    }
    let mut out = String::with_capacity(text.len());
    for (i, b) in text.bytes().enumerate() {
        if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-') || (b == b'.' && i > 0) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// `20261130T201500Z`: a UTC time as a file name takes it.
pub(super) fn stamp(secs: i64) -> String {
    crate::model::time::rfc3339(secs)
        .replace(['-', ':'], "")
        .trim_end_matches('Z')
        .to_string()
        + "Z"
}

/// The folders under `DIR` the archives of `box_id`'s volumes on `engine`
/// go to: `<engine>/<box or _>`, each one path element (`path_element`).
fn elements(engine: &str, box_id: Option<&str>) -> [String; 2] {
    [
        path_element(engine),
        box_id.map(path_element).unwrap_or_else(|| "_".into()),
    ]
}

/// The folder the archives of `box_id`'s volumes on `engine` go to.
pub fn folder(dir: &Path, engine: &str, box_id: Option<&str>) -> PathBuf {
    let [engine, box_folder] = elements(engine, box_id);
    dir.join(engine).join(box_folder)
}

/// Opens `DIR/<engine>/<box>` (`elements`), making what is missing
/// (`0700`). `DIR` is the user's: a link in it is followed. Each level under
/// it is opened without following a link: a link there is refused
/// (`Symlink`), nothing is written through it.
fn open_folder(dir: &Path, elements: &[String]) -> Result<Folder, ArchiveError> {
    let mut folder =
        Folder::create_all(dir).map_err(|e| ArchiveError::io("create folder", dir, e))?;
    for name in elements {
        folder = folder.child(name).map_err(|e| {
            if files::is_link(&e) {
                ArchiveError::Symlink(folder.join(name))
            } else {
                ArchiveError::io("create folder", &folder.join(name), e)
            }
        })?;
    }
    Ok(folder)
}

/// Where an archive goes: `dir/<engine>/<box>`, opened by the writer.
pub(super) struct Place {
    pub(super) dir: PathBuf,
    pub(super) elements: [String; 2],
}

impl Place {
    /// The place of the archives of `box_id`'s volumes on `engine` under `dir`.
    pub(super) fn new(dir: &Path, engine: &str, box_id: Option<&str>) -> Place {
        Place {
            dir: dir.to_path_buf(),
            elements: elements(engine, box_id),
        }
    }

    /// Opens it (see `open_folder`).
    pub(super) fn open(&self) -> Result<Folder, ArchiveError> {
        open_folder(&self.dir, &self.elements)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_elements_never_climb_or_hide() {
        for (name, element) in [
            ("box-1.a_b", "box-1.a_b"),
            ("a/b", "a%2Fb"),
            ("a_b", "a_b"),
            ("../etc", "%2E.%2Fetc"),
            ("a/b c", "a%2Fb%20c"),
            (".hidden", "%2Ehidden"),
            (".", "%2E"),
            ("..", "%2E."),
            ("50%", "50%25"),
            ("caf\u{e9}", "caf%C3%A9"),
            ("", "%"),
            ("_", "%5F"),
        ] {
            assert_eq!(path_element(name), element, "{name:?}");
        }
        assert_eq!(
            folder(Path::new("/d"), "default", None),
            Path::new("/d/default/_")
        );
        assert_eq!(
            folder(Path::new("/d"), "ssh://h", Some("a/b")),
            Path::new("/d/ssh%3A%2F%2Fh/a%2Fb")
        );
        assert_eq!(stamp(0), "19700101T000000Z");
    }

    /// The name an element stands for (docs/archive.md): `%` is the empty
    /// name; else every `%XX` is the byte XX.
    fn decode(element: &str) -> Vec<u8> {
        if element == "%" {
            return Vec::new();
        }
        let b = element.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'%' {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
            } else {
                out.push(b[i]);
                i += 1;
            }
        }
        out
    }

    proptest::proptest! {
        /// Injective (decoding gives every name back, so two names never
        /// share an element), and always one plain element: never empty,
        /// `.`, `..`, hidden, `_` (no box), nor holding anything but
        /// `[A-Za-z0-9._%-]`.
        #[test]
        fn path_elements_are_injective_and_one_plain_element(name in "(\\PC|[/._%])*") {
            let e = path_element(&name);
            proptest::prop_assert_eq!(decode(&e), name.as_bytes());
            proptest::prop_assert!(!e.is_empty() && !e.starts_with('.') && e != "_", "{e:?}");
            proptest::prop_assert!(
                e.bytes().all(|b| b.is_ascii_alphanumeric() || b"._%-".contains(&b)),
                "{e:?}"
            );
        }
    }

    #[test]
    fn boxes_a_slash_b_and_a_underscore_b_and_no_box_never_share_a_folder() {
        let dir = Path::new("/d");
        let folders: std::collections::BTreeSet<PathBuf> = [
            None,
            Some("_"),
            Some("a/b"),
            Some("a_b"),
            Some("a%2Fb"),
            Some(""),
        ]
        .into_iter()
        .map(|b| folder(dir, "default", b))
        .collect();
        assert_eq!(folders.len(), 6, "{folders:?}");
    }
}
