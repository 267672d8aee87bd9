//! Reading a state file: the bytes (at most [`MAX_STATE_BYTES`], from the
//! metadata first and then by reading at most one byte more, so `/dev/zero`
//! or a FIFO is refused without reading it all) and their text (a UTF-8 byte
//! order mark skipped, invalid UTF-8 refused at its first bad byte).
//!
//! Owns the file-level problems: not found, not a file, unreadable, too
//! large, not UTF-8. Must not look at what the text says (scan.rs and
//! schema.rs do) and never reads any file but the one it is given.

use std::io::Read;
use std::path::Path;

use super::error::{line_col, StateError, StateErrorKind};

/// The largest state file accepted, in bytes (1 MiB).
pub const MAX_STATE_BYTES: u64 = 1024 * 1024;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// The text of state file contents: more than [`MAX_STATE_BYTES`] is
/// refused, a UTF-8 byte order mark is skipped (positions are counted after
/// it), and invalid UTF-8 is refused at the line and column of its first bad
/// byte.
pub(super) fn decode<'b>(bytes: &'b [u8], path: &Path) -> Result<&'b str, StateError> {
    if bytes.len() as u64 > MAX_STATE_BYTES {
        let kind = StateErrorKind::TooLarge {
            size: Some(bytes.len() as u64),
            limit: MAX_STATE_BYTES,
        };
        return Err(StateError::new(path, None, kind));
    }
    let bytes = bytes.strip_prefix(UTF8_BOM).unwrap_or(bytes);
    std::str::from_utf8(bytes).map_err(|e| {
        let valid = &bytes[..e.valid_up_to()];
        // Cannot fail: `valid_up_to` is exactly the valid prefix.
        let valid = std::str::from_utf8(valid).unwrap_or_default();
        let at = line_col(valid, valid.len());
        let byte = bytes[e.valid_up_to()];
        StateError::new(path, Some(at), StateErrorKind::InvalidUtf8 { byte })
    })
}

/// What a path that is not a regular file is, for [`StateErrorKind::NotAFile`].
fn not_a_file(file_type: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_file() {
        None
    } else if file_type.is_dir() {
        Some("a directory")
    } else if file_type.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if file_type.is_socket() {
        Some("a socket")
    } else if file_type.is_char_device() || file_type.is_block_device() {
        Some("a device")
    } else {
        Some("not a regular file")
    }
}

/// Reads at most [`MAX_STATE_BYTES`]` + 1` bytes of `path`, refusing
/// anything but a regular file (a directory, a FIFO, a device) and a file
/// whose metadata is over the limit without reading it. The file is opened
/// with `O_NONBLOCK`, so a FIFO with no writer is refused at once instead
/// of blocking the open (the flag changes nothing for a regular file).
pub(super) fn read_limited(path: &Path) -> Result<Vec<u8>, StateError> {
    use std::os::unix::fs::OpenOptionsExt;
    let error = |kind| StateError::new(path, None, kind);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => error(StateErrorKind::NotFound),
            _ => error(StateErrorKind::Read(source)),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| error(StateErrorKind::Read(e)))?;
    if let Some(what) = not_a_file(meta.file_type()) {
        return Err(error(StateErrorKind::NotAFile { what }));
    }
    if meta.len() > MAX_STATE_BYTES {
        return Err(error(StateErrorKind::TooLarge {
            size: Some(meta.len()),
            limit: MAX_STATE_BYTES,
        }));
    }
    let capacity = meta.len().min(MAX_STATE_BYTES) as usize + 1;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::testing::{ids, parse};
    use crate::state::DesiredState;

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
    fn load_reports_missing_directories_and_oversized_files() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.toml");
        let e = DesiredState::load(&missing).unwrap_err();
        assert!(matches!(e.kind, StateErrorKind::NotFound), "{e}");
        assert!(e
            .to_string()
            .contains("does not exist; check the path given with --state"));
        assert!(
            e.to_string()
                .starts_with(&format!("{}: ", missing.display())),
            "{e}"
        );
        assert_eq!(e.line_col(), None);

        let e = DesiredState::load(dir.path()).unwrap_err();
        assert!(
            matches!(
                e.kind,
                StateErrorKind::NotAFile {
                    what: "a directory"
                }
            ),
            "{e}"
        );

        // Issue 43: a FIFO with no writer is refused at once, not waited on.
        let fifo = dir.path().join("fifo.toml");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo reads it only.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let (done, took) = std::sync::mpsc::channel();
        let reader = fifo.clone();
        std::thread::spawn(move || {
            let _ = done.send(DesiredState::load(&reader).map(|_| ()));
        });
        let e = took
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("reading a FIFO with no writer blocked")
            .unwrap_err();
        assert!(
            matches!(
                e.kind,
                StateErrorKind::NotAFile {
                    what: "a FIFO (named pipe)"
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains("is a FIFO (named pipe), not a state file"),
            "{e}"
        );

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
    fn load_refuses_an_endless_device_unread() {
        // A device is not a regular file: refused by its metadata, before a
        // byte is read (the read stays limited to one byte past the limit).
        let e = DesiredState::load(Path::new("/dev/zero")).unwrap_err();
        assert!(
            matches!(e.kind, StateErrorKind::NotAFile { what: "a device" }),
            "{e}"
        );
        assert!(
            e.to_string().contains("is a device, not a state file"),
            "{e}"
        );
    }
}
