//! Files and folders sandboxctl creates on disk: archives, manifests and
//! their temporary files (`archive`), saved plans (`plan --out`), the audit
//! log (`--audit`), the memo of inspections (`memo`).
//!
//! Owns how they are opened and made: a file is never opened through a
//! symbolic link (its last element is opened `O_NOFOLLOW`; a new file is
//! created `O_EXCL`, so a link, a file or anything else standing at its name
//! fails the create), a file sandboxctl creates is private to its user
//! (`0600`) and so is a folder (`0700`), whatever the umask. Under an
//! archive `DIR`, folders are walked one element at a time from an open
//! folder ([`Folder`]), each opened `O_NOFOLLOW | O_DIRECTORY`, and every
//! file is made, renamed and removed relative to the open folder, so a link
//! planted (or swapped in) at any level below `DIR` is refused, never
//! followed.
//!
//! Also where the XDG rules put sandboxctl's state folder (`state_folder`).
//!
//! Must not decide names, what a file holds or when it goes, print, or swallow
//! an error: every failure is returned as the OS gave it (a refused link as
//! `ELOOP`, see [`is_link`]) and the caller names the file.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The mode of every file sandboxctl creates: its user's alone.
pub(crate) const FILE_MODE: u32 = 0o600;
/// The mode of every folder sandboxctl creates.
pub(crate) const FOLDER_MODE: u32 = 0o700;

/// Whether `error` is a refused symbolic link: what this module returns when
/// a link stands where it was to open or make a file or a folder (`ELOOP`).
pub(crate) fn is_link(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ELOOP)
}

/// The error of a refused link at `path` (`ELOOP`), whatever the OS said
/// (`ELOOP`, `EMLINK` on some BSDs, `ENOTDIR` for a folder), if a link is
/// what stands there; else `error` as it was.
fn link_or(error: io::Error, path_is_link: impl FnOnce() -> bool) -> io::Error {
    let maybe = matches!(
        error.raw_os_error(),
        Some(libc::ELOOP | libc::EMLINK | libc::ENOTDIR)
    );
    if maybe && path_is_link() {
        io::Error::from_raw_os_error(libc::ELOOP)
    } else {
        error
    }
}

/// Opens `path` for appending (`O_APPEND`: every write lands at its end),
/// creating it with mode `0600` (narrowed by the umask) when missing; an
/// existing file keeps its mode. A symbolic link at `path` is refused
/// (`ELOOP`, [`is_link`]), never followed; folders on the way to it are the
/// caller's and are followed.
pub(crate) fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| link_or(e, || is_link_at(path)))
}

/// Creates the file `path`, which must not exist (whatever stands there, a
/// link included, fails it: `AlreadyExists`), for writing, with mode `0600`
/// whatever the umask.
pub(crate) fn create_new(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))?;
    Ok(file)
}

/// How many temporary names `replace` tries: `<path>.tmp~` first (the name
/// saved plans always had), then that with this process's ID and a counter.
const TEMPORARY_TRIES: u32 = 16;

/// Writes `bytes` to `path` whole, or leaves `path` as it was: into a new
/// temporary file beside it (created as by [`create_new`]: never through a
/// link, `0600`), synced, then renamed over `path` (a link at `path` is
/// replaced, not followed). A name already taken (a leftover, a planted
/// link) is passed over for the next; the temporary file is removed on any
/// failure.
pub(crate) fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_with(path, bytes, true)
}

/// [`replace`] without the sync: for a cache, which a crash may leave
/// empty or cut (its reader then ignores it), where the run should not wait
/// for the disk.
pub(crate) fn replace_unsynced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_with(path, bytes, false)
}

fn replace_with(path: &Path, bytes: &[u8], sync: bool) -> io::Result<()> {
    let (temporary, mut file) = create_beside(path)?;
    let written = file
        .write_all(bytes)
        .and_then(|()| if sync { file.sync_all() } else { Ok(()) })
        .and_then(|()| std::fs::rename(&temporary, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// A new temporary file beside `path`, and its name (see `replace`).
fn create_beside(path: &Path) -> io::Result<(PathBuf, File)> {
    let mut taken = None;
    for n in 0..TEMPORARY_TRIES {
        let mut name = path.as_os_str().to_owned();
        name.push(".tmp~");
        if n > 0 {
            name.push(format!("{}-{n}", std::process::id()));
        }
        let temporary = PathBuf::from(name);
        match create_new(&temporary) {
            Ok(file) => return Ok((temporary, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => taken = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(taken.unwrap_or_else(|| io::Error::other("no temporary name was tried")))
}

/// Whether a symbolic link stands at `path` (not followed).
fn is_link_at(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// An open folder: what is made, opened, renamed and removed in it is named
/// relative to it (one path element each), so no link on the way to it is
/// ever walked again. `path` serves only to name things in errors and
/// reports.
#[derive(Debug)]
pub(crate) struct Folder {
    dir: File,
    path: PathBuf,
}

/// One path element as the `*at` calls take it: never empty, `.`, `..`, nor
/// holding `/` or NUL.
fn element(name: &str) -> io::Result<CString> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not one path element"),
        ));
    }
    CString::new(name).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// `-1` as the OS error it stands for.
fn check(result: libc::c_int) -> io::Result<libc::c_int> {
    if result == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

impl Folder {
    /// Opens the folder `path`, making it and its missing parents (`0700`,
    /// narrowed by the umask) first. `path` is the caller's: a link in it is
    /// followed.
    pub(crate) fn create_all(path: &Path) -> io::Result<Folder> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(FOLDER_MODE)
            .create(path)?;
        Folder::open(path)
    }

    /// Opens the folder `path` (a link in it is followed).
    pub(crate) fn open(path: &Path) -> io::Result<Folder> {
        let dir = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(path)?;
        Ok(Folder {
            dir,
            path: path.to_path_buf(),
        })
    }

    /// Where this folder was opened (for errors and reports).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// `name` in this folder, as a path (for errors and reports).
    pub(crate) fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    fn openat(&self, name: &str, flags: libc::c_int) -> io::Result<File> {
        let c = element(name)?;
        // SAFETY: a plain syscall on a folder this value owns and a
        // NUL-terminated name; the descriptor returned is owned at once.
        let fd = check(unsafe {
            libc::openat(
                self.dir.as_raw_fd(),
                c.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                FILE_MODE,
            )
        })?;
        // SAFETY: `fd` was just opened and is owned by nothing else.
        Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// The folder `name` in this one, made (`0700` whatever the umask) when
    /// missing. A link standing there is refused (`ELOOP`, [`is_link`]),
    /// never followed; anything else that is not a folder fails it.
    pub(crate) fn child(&self, name: &str) -> io::Result<Folder> {
        let c = element(name)?;
        // SAFETY: a plain syscall on a folder this value owns and a
        // NUL-terminated name.
        let made = match check(unsafe { libc::mkdirat(self.dir.as_raw_fd(), c.as_ptr(), 0o700) }) {
            Ok(_) => true,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
            Err(e) => return Err(e),
        };
        let dir = self
            .openat(name, libc::O_RDONLY | libc::O_DIRECTORY)
            .map_err(|e| link_or(e, || self.is_link(name)))?;
        if made {
            dir.set_permissions(std::fs::Permissions::from_mode(FOLDER_MODE))?;
        }
        Ok(Folder {
            dir,
            path: self.join(name),
        })
    }

    /// Creates the file `name` in this folder, which must not exist (a link
    /// there fails it too: `AlreadyExists`), for writing, with mode `0600`
    /// whatever the umask.
    pub(crate) fn create_new(&self, name: &str) -> io::Result<File> {
        let file = self.openat(name, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL)?;
        file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))?;
        Ok(file)
    }

    /// Opens the file `name` in this folder for reading; a link is refused
    /// (`ELOOP`), and a FIFO never blocks the open.
    pub(crate) fn open_read(&self, name: &str) -> io::Result<File> {
        self.openat(name, libc::O_RDONLY | libc::O_NONBLOCK)
            .map_err(|e| link_or(e, || self.is_link(name)))
    }

    /// What stands at `name` (not followed), or `None`.
    fn stat(&self, name: &str) -> io::Result<Option<libc::stat>> {
        let c = element(name)?;
        // SAFETY: all-zero is a valid `stat`, filled in by the call.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a plain syscall on a folder this value owns, a
        // NUL-terminated name and a `stat` it may write.
        match check(unsafe {
            libc::fstatat(
                self.dir.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        }) {
            Ok(_) => Ok(Some(st)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn is_link(&self, name: &str) -> bool {
        matches!(self.stat(name), Ok(Some(st)) if st.st_mode & libc::S_IFMT == libc::S_IFLNK)
    }

    /// Whether anything (a dangling link included) stands at `name`.
    pub(crate) fn exists(&self, name: &str) -> io::Result<bool> {
        self.stat(name).map(|st| st.is_some())
    }

    /// Whether `name` is a regular file (not followed).
    pub(crate) fn is_file(&self, name: &str) -> bool {
        matches!(self.stat(name), Ok(Some(st)) if st.st_mode & libc::S_IFMT == libc::S_IFREG)
    }

    /// Whether `name` names `file` now (same device and inode; a link is not
    /// followed). `Ok(false)` when nothing stands there.
    pub(crate) fn names(&self, name: &str, file: &File) -> io::Result<bool> {
        let Some(named) = self.stat(name)? else {
            return Ok(false);
        };
        // SAFETY: all-zero is a valid `stat`, filled in by the call.
        let mut held: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a plain syscall on a descriptor `file` owns.
        check(unsafe { libc::fstat(file.as_raw_fd(), &mut held) })?;
        Ok(named.st_dev == held.st_dev && named.st_ino == held.st_ino)
    }

    /// Removes the file (or link) `name` of this folder.
    pub(crate) fn remove(&self, name: &str) -> io::Result<()> {
        let c = element(name)?;
        // SAFETY: a plain syscall on a folder this value owns and a
        // NUL-terminated name.
        check(unsafe { libc::unlinkat(self.dir.as_raw_fd(), c.as_ptr(), 0) }).map(drop)
    }

    /// Renames `from` to `to`, both in this folder (whatever stands at `to`
    /// is replaced; a link there is replaced, not followed).
    pub(crate) fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (f, t) = (element(from)?, element(to)?);
        let fd = self.dir.as_raw_fd();
        // SAFETY: a plain syscall on a folder this value owns and
        // NUL-terminated names.
        check(unsafe { libc::renameat(fd, f.as_ptr(), fd, t.as_ptr()) }).map(drop)
    }

    /// The names in this folder that are UTF-8 (`.` and `..` left out),
    /// unsorted.
    pub(crate) fn entries(&self) -> io::Result<Vec<String>> {
        // `fdopendir` takes the descriptor it is given: give it a copy.
        let copy = std::os::fd::IntoRawFd::into_raw_fd(self.dir.try_clone()?);
        // SAFETY: `copy` is a folder descriptor owned by nothing else; on
        // success the stream owns it (`closedir` below closes it).
        let stream = unsafe { libc::fdopendir(copy) };
        if stream.is_null() {
            let error = io::Error::last_os_error();
            // SAFETY: `copy` is still this function's alone: closed once.
            unsafe { libc::close(copy) };
            return Err(error);
        }
        // From the start, whatever an earlier reader of the copy's shared
        // offset did.
        // SAFETY: `stream` is the open stream just made.
        unsafe { libc::rewinddir(stream) };
        let mut names = Vec::new();
        loop {
            // SAFETY: `stream` is open; the entry it returns stays valid
            // until the next call on it, and is copied out before.
            let entry = unsafe { libc::readdir(stream) };
            if entry.is_null() {
                break;
            }
            // SAFETY: `d_name` is NUL-terminated.
            let name = unsafe { std::ffi::CStr::from_ptr((*entry).d_name.as_ptr()) };
            if let Ok(name) = name.to_str() {
                if name != "." && name != ".." {
                    names.push(name.to_string());
                }
            }
        }
        // SAFETY: `stream` is open and closed once, here.
        unsafe { libc::closedir(stream) };
        Ok(names)
    }

    /// fsync of the folder: its entries (made, renamed, removed) reach the
    /// disk.
    pub(crate) fn sync(&self) -> io::Result<()> {
        self.dir.sync_all()
    }
}

/// Why a file sandboxctl keeps for its user alone (the plan key, the memo)
/// cannot be read as one.
#[derive(Debug)]
pub(crate) enum NotPrivate {
    /// Nothing stands there.
    Missing,
    /// A symbolic link stands there (never followed).
    Link,
    /// It could not be opened or its metadata read.
    Io(io::Error),
    NotRegular,
    /// It belongs to this other user.
    Owner(u32),
    /// Its mode lets group or others in.
    Mode(u32),
}

impl std::fmt::Display for NotPrivate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotPrivate::Missing => write!(f, "it does not exist"),
            NotPrivate::Link => write!(f, "a symbolic link stands there"),
            NotPrivate::Io(e) => write!(f, "cannot open or read it: {e}"),
            NotPrivate::NotRegular => write!(f, "it is not a regular file"),
            NotPrivate::Owner(uid) => {
                // SAFETY: geteuid has no preconditions and cannot fail.
                let me = unsafe { libc::geteuid() };
                write!(f, "it belongs to user {uid}, not to this user ({me})")
            }
            NotPrivate::Mode(mode) => write!(
                f,
                "its mode {mode:04o} lets others read or change it (it must be 0600)"
            ),
        }
    }
}

/// Opens `path` for reading only if it is the user's own private file: never
/// through a link (`O_NOFOLLOW`), a regular file, owned by this user, with
/// no group or other permission. Also its length.
pub(crate) fn open_private(path: &Path) -> Result<(File, u64), NotPrivate> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => NotPrivate::Missing,
            _ if e.raw_os_error() == Some(libc::ELOOP) => NotPrivate::Link,
            _ => NotPrivate::Io(e),
        })?;
    let meta = file.metadata().map_err(NotPrivate::Io)?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if !meta.file_type().is_file() {
        Err(NotPrivate::NotRegular)
    } else if meta.uid() != me {
        Err(NotPrivate::Owner(meta.uid()))
    } else if meta.mode() & 0o077 != 0 {
        Err(NotPrivate::Mode(meta.mode() & 0o7777))
    } else {
        Ok((file, meta.len()))
    }
}

/// The parent of sandboxctl's state folder (`<it>/sandboxctl/`: the plan
/// key, the memo of inspections), as the XDG rules place it: an
/// absolute `XDG_STATE_HOME` (a relative one is ignored), else
/// `HOME/.local/state`; `None` when neither is set and absolute.
pub(crate) fn state_folder(
    state_home: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    state_home
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            home.map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".local/state"))
        })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The permission bits of `path` (not followed if a link).
    pub(crate) fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    }

    /// umask 022, as most sessions have it (the process's, for the test).
    pub(crate) fn umask_022() {
        // SAFETY: a plain syscall; 022 is this test binary's usual umask.
        unsafe { libc::umask(0o022) };
    }

    #[test]
    fn files_are_made_0600_and_folders_0700_under_umask_022() {
        umask_022();
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().join("top");
        let folder = Folder::create_all(&top).unwrap();
        let child = folder.child("engine").unwrap();
        child.create_new("f").unwrap();
        create_new(&dir.path().join("g")).unwrap();
        replace(&dir.path().join("h"), b"plan").unwrap();
        assert_eq!(mode(&top), 0o700);
        assert_eq!(mode(&top.join("engine")), 0o700);
        assert_eq!(mode(&top.join("engine").join("f")), 0o600);
        assert_eq!(mode(&dir.path().join("g")), 0o600);
        assert_eq!(mode(&dir.path().join("h")), 0o600);
        // An existing folder is opened as it is.
        std::fs::set_permissions(top.join("engine"), std::fs::Permissions::from_mode(0o750))
            .unwrap();
        folder.child("engine").unwrap();
        assert_eq!(mode(&top.join("engine")), 0o750);
    }

    #[test]
    fn a_link_is_never_followed_nor_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let target = elsewhere.join("target");
        std::fs::write(&target, b"keep me").unwrap();
        let folder = Folder::open(dir.path()).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.path().join("sub")).unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("file")).unwrap();

        let e = folder.child("sub").unwrap_err();
        assert!(is_link(&e), "{e:?}");
        let e = folder.create_new("file").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e:?}");
        let e = folder.open_read("file").unwrap_err();
        assert!(is_link(&e), "{e:?}");
        let e = open_append(&dir.path().join("file")).unwrap_err();
        assert!(is_link(&e), "{e:?}");
        let e = create_new(&dir.path().join("file")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e:?}");
        assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
        assert_eq!(
            std::fs::read_dir(&elsewhere).unwrap().count(),
            1,
            "nothing made through the link"
        );
        // A plain file where a folder is wanted is not a folder, not a link.
        std::fs::write(dir.path().join("plain"), b"").unwrap();
        let e = folder.child("plain").unwrap_err();
        assert!(!is_link(&e), "{e:?}");
    }

    #[test]
    fn replace_passes_over_a_link_at_its_temporary_name() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, b"keep me").unwrap();
        let path = dir.path().join("plan.json");
        std::os::unix::fs::symlink(&target, dir.path().join("plan.json.tmp~")).unwrap();
        replace(&path, b"the plan").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
        assert_eq!(std::fs::read(&path).unwrap(), b"the plan");
        // Only the planted link is left beside it: the temporary file was
        // renamed.
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["plan.json", "plan.json.tmp~", "target"]);
        // A link at `path` itself is replaced, its target left alone.
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        replace(&path, b"again").unwrap();
        assert!(!is_link_at(&path));
        assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
    }

    #[test]
    fn entries_renames_and_removals_stay_in_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let folder = Folder::open(dir.path()).unwrap();
        folder.create_new("a").unwrap();
        folder.rename("a", "b").unwrap();
        assert!(folder.is_file("b") && !folder.exists("a").unwrap());
        let mut names = folder.entries().unwrap();
        names.sort();
        assert_eq!(names, ["b"]);
        // Twice: each listing starts at the beginning.
        assert_eq!(folder.entries().unwrap(), ["b"]);
        folder.remove("b").unwrap();
        assert!(folder.entries().unwrap().is_empty());
        for bad in ["", ".", "..", "a/b"] {
            assert_eq!(
                folder.create_new(bad).unwrap_err().kind(),
                io::ErrorKind::InvalidInput
            );
        }
    }
}
