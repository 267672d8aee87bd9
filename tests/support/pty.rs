//! Runs the binary under test as a person at a terminal runs it: its stdin
//! and stderr a pseudo-terminal (`openpty(3)`), the session leader of a
//! session of its own with that terminal as its controlling one; its stdout
//! a pipe, so that a report (or a JSON document) is read apart from what
//! the terminal shows. The test reads the screen and types a line.
//!
//! Owns the terminal's two ends and the process: everything is bounded by
//! the `Cli`'s deadline (past it the process is killed and the test fails),
//! and a dropped run is killed by its pid. Knows nothing of sandboxctl's
//! words: the tests read them. Why a terminal of its own and not `script`
//! or an expect crate: decision 0017.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::cli::{capture, Captured, Cli, Output};

/// How long the screen is read after the process ended (what it wrote last
/// is still in the terminal's buffer).
const DRAIN: Duration = Duration::from_secs(2);

/// A run on a terminal.
pub struct Terminal {
    command: String,
    child: Option<Child>,
    /// The terminal's master end, which the test types into.
    master: File,
    /// What the terminal showed: the run's stderr and the echo of what was
    /// typed, with the line discipline's `\r` as written.
    screen: Arc<Mutex<Vec<u8>>>,
    /// True once the master end read its end (every slave end closed).
    screen_done: Arc<AtomicBool>,
    stdout: Option<Captured>,
    started: Instant,
    deadline: Duration,
}

/// The two ends of a new pseudo-terminal, 80 × 24: `(master, slave)`.
fn open() -> (OwnedFd, OwnedFd) {
    let mut master: libc::c_int = -1;
    let mut slave: libc::c_int = -1;
    let size = libc::winsize {
        ws_row: 24,
        ws_col: 80,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two descriptors it opened into the two ints;
    // no name buffer and no termios are passed.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(
        rc,
        0,
        "openpty: {}: the terminal tests need a pseudo-terminal (/dev/ptmx)",
        std::io::Error::last_os_error()
    );
    // SAFETY: both descriptors were just opened by openpty and are owned here only.
    unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

impl Terminal {
    /// Starts `cli`'s run with `extra` on a new terminal.
    pub fn spawn<I, S>(cli: &Cli, extra: I) -> Terminal
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let (master, slave) = open();
        let (mut cmd, command) = cli.command_with(extra);
        let stdin = slave.try_clone().expect("dup the terminal's slave end");
        cmd.stdin(Stdio::from(stdin))
            .stdout(Stdio::piped())
            .stderr(Stdio::from(slave));
        // SAFETY: setsid and ioctl, both async-signal-safe, between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // stdin (the slave end) becomes the controlling terminal.
                if libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let started = Instant::now();
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn `{command}` on a terminal: {e}"));
        // This process's copies of the slave end go with `cmd`: once the
        // run ends, reading the master end ends (EIO).
        drop(cmd);
        let stdout = capture(child.stdout.take().expect("stdout is piped"));
        let master = File::from(master);
        let screen = Arc::new(Mutex::new(Vec::new()));
        let screen_done = Arc::new(AtomicBool::new(false));
        {
            let mut reader = master.try_clone().expect("dup the terminal's master end");
            let screen = Arc::clone(&screen);
            let done = Arc::clone(&screen_done);
            std::thread::spawn(move || {
                let mut chunk = [0u8; 4096];
                while let Ok(n @ 1..) = reader.read(&mut chunk) {
                    screen.lock().unwrap().extend_from_slice(&chunk[..n]);
                }
                done.store(true, Ordering::SeqCst);
            });
        }
        Terminal {
            command,
            child: Some(child),
            master,
            screen,
            screen_done,
            stdout: Some(stdout),
            started,
            deadline: cli.run_deadline(),
        }
    }

    /// What the terminal showed so far, without the `\r` of its line ends.
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).replace('\r', "")
    }

    /// Waits until the screen shows `needle` (true), or the run's deadline
    /// passes or the process ends without it (false).
    pub fn wait_for(&mut self, needle: &str) -> bool {
        loop {
            if self.screen().contains(needle) {
                return true;
            }
            let ended = self
                .child
                .as_mut()
                .is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))));
            if ended || self.started.elapsed() > self.deadline {
                std::thread::sleep(Duration::from_millis(100));
                return self.screen().contains(needle);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Types `line` and Enter.
    pub fn type_line(&mut self, line: &str) {
        self.master
            .write_all(format!("{line}\r").as_bytes())
            .unwrap_or_else(|e| panic!("type into the terminal of `{}`: {e}", self.command));
    }

    /// Waits for the process to end (killing it and failing the test past
    /// the deadline): its exit, its stdout, and as its stderr the screen.
    pub fn wait(mut self) -> Output {
        let mut child = self.child.take().expect("not waited for yet");
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for sandboxctl") {
                break status;
            }
            if self.started.elapsed() > self.deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "`{}` on a terminal did not finish within {:?}\n--- screen\n{}",
                    self.command,
                    self.deadline,
                    self.screen()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let elapsed = self.started.elapsed();
        let drained = Instant::now() + DRAIN;
        while !self.screen_done.load(Ordering::SeqCst) && Instant::now() < drained {
            std::thread::sleep(Duration::from_millis(10));
        }
        let (stdout, reader) = self.stdout.take().expect("stdout is captured");
        let _ = reader.join();
        let stdout_bytes = std::mem::take(&mut *stdout.lock().unwrap());
        let screen = self.screen();
        Output {
            command: format!("{} (on a terminal)", self.command),
            code: status.code(),
            stdout: String::from_utf8_lossy(&stdout_bytes).into_owned(),
            stderr: screen.clone(),
            stdout_bytes,
            stderr_bytes: screen.into_bytes(),
            elapsed,
        }
    }
}

impl Drop for Terminal {
    /// A run never waited for (a failed assertion) is killed by its pid and reaped.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
