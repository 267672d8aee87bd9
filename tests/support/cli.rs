//! Runs the built `sandboxctl` binary the way a user would, for CLI tests.
//!
//! Owns the process boundary: arguments, environment, working directory,
//! state files, exit code and output. Every run happens in a fresh temporary
//! directory (so `state/sandboxes.toml` is not picked up unless a test writes
//! it there) with the `SANDBOXCTL_*` variables removed, and is killed if it
//! outlives its deadline. Knows nothing about Docker except `DOCKER_HOST`.
//!
//! Never checks for an engine itself, so the engine-free CLI tests (which
//! point `DOCKER_HOST` at nothing) run without one. A run against the real
//! engine is made past a gate (see `support::docker`): from
//! `Sandbox::cli()`, or after `Sandbox::new` or an extra engine answered.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_sandboxctl");
/// How long a run may take before it is killed and the test fails.
const DEFAULT_DEADLINE: Duration = Duration::from_secs(120);

/// A `sandboxctl` invocation being put together. Builder methods take and
/// return `self`; `run` borrows, so the same `Cli` (and its temp dir) can run
/// several times, e.g. `plan --out plan.json` then `apply plan.json`.
///
/// ```ignore
/// let cli = Cli::new().scope(&sbx.scope_arg()).json().state_toml("[[box]]\nid = \"a\"\n");
/// let out = cli.run_with(["destroy", "--prune"]).success();
/// assert!(out.report().converged); // support::report: the typed JSON
/// ```
#[derive(Debug)]
pub struct Cli {
    dir: tempfile::TempDir,
    current_dir: Option<PathBuf>,
    args: Vec<OsString>,
    env: Vec<(OsString, Option<OsString>)>,
    deadline: Duration,
    /// `RLIMIT_NOFILE` (soft and hard) of the run, as `ulimit -n N` sets it.
    nofile: Option<u64>,
}

impl Default for Cli {
    fn default() -> Self {
        Cli::new()
    }
}

impl Cli {
    /// No arguments; runs in a new empty temp dir; `SANDBOXCTL_STATE`,
    /// `SANDBOXCTL_TIMEOUT`, `SANDBOXCTL_PLAN_KEY` and `SANDBOXCTL_METRICS`
    /// removed, `NO_COLOR=1`,
    /// `XDG_STATE_HOME` in the temp dir (so the saved-plan key is this
    /// `Cli`'s own: a plan saved by one run opens in the next);
    /// `DOCKER_HOST` inherited.
    pub fn new() -> Cli {
        let dir = tempfile::tempdir().expect("create temp dir");
        let state_home = dir.path().join("state-home"); // `state_home()`
        Cli {
            dir,
            current_dir: None,
            args: Vec::new(),
            env: vec![
                ("SANDBOXCTL_STATE".into(), None),
                ("SANDBOXCTL_TIMEOUT".into(), None),
                ("SANDBOXCTL_PLAN_KEY".into(), None),
                ("SANDBOXCTL_METRICS".into(), None),
                ("XDG_STATE_HOME".into(), Some(state_home.into())),
                ("NO_COLOR".into(), Some("1".into())),
            ],
            deadline: DEFAULT_DEADLINE,
            nofile: None,
        }
    }

    /// This `Cli`'s `XDG_STATE_HOME` (its plan key and memo of inspections
    /// live in `sandboxctl/` under it; made by the first run that needs it).
    pub fn state_home(&self) -> PathBuf {
        self.dir.path().join("state-home")
    }

    /// Appends one argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Cli {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> Cli
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Appends `--scope <key=value>` (use `Sandbox::scope_arg()` against the real daemon).
    pub fn scope(self, scope: &str) -> Cli {
        self.args(["--scope", scope])
    }

    /// Appends `--format json`.
    pub fn json(self) -> Cli {
        self.args(["--format", "json"])
    }

    /// Sets an environment variable for the run.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Cli {
        self.env
            .push((key.as_ref().to_owned(), Some(value.as_ref().to_owned())));
        self
    }

    /// Removes an environment variable for the run.
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Cli {
        self.env.push((key.as_ref().to_owned(), None));
        self
    }

    /// Sets `DOCKER_HOST`.
    pub fn docker_host(self, host: &str) -> Cli {
        self.env("DOCKER_HOST", host)
    }

    /// Points `DOCKER_HOST` at a socket that does not exist (inside the temp dir).
    pub fn unreachable_docker(self) -> Cli {
        let host = format!(
            "unix://{}",
            self.dir.path().join("no-docker.sock").display()
        );
        self.docker_host(&host)
    }

    /// Writes `toml` to `<temp>/state.toml` and appends `--state <that path>`.
    pub fn state_toml(self, toml: &str) -> Cli {
        let path = self.write("state.toml", toml);
        self.arg("--state").arg(path)
    }

    /// Writes `toml` to `<temp>/state/sandboxes.toml`, the file used when no
    /// `--state` is given.
    pub fn default_state_toml(self, toml: &str) -> Cli {
        self.write("state/sandboxes.toml", toml);
        self
    }

    /// Writes a file under the temp dir (creating parent dirs); returns its path.
    pub fn write(&self, relative: &str, contents: &str) -> PathBuf {
        let path = self.dir.path().join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create dirs in temp dir");
        }
        std::fs::write(&path, contents).expect("write file in temp dir");
        path
    }

    /// Reads a file under the temp dir (e.g. what `plan --out` wrote).
    pub fn read(&self, relative: &str) -> String {
        let path = self.dir.path().join(relative);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
    }

    /// The temp dir (the working directory unless `current_dir` was set).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Runs in `dir` instead of the temp dir.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Cli {
        self.current_dir = Some(dir.into());
        self
    }

    /// Kills the run and fails the test after `deadline` (default 120 s).
    pub fn deadline(mut self, deadline: Duration) -> Cli {
        self.deadline = deadline;
        self
    }

    /// Runs under `ulimit -n limit`: at most `limit` open file descriptors.
    pub fn nofile(mut self, limit: u64) -> Cli {
        self.nofile = Some(limit);
        self
    }

    /// Runs with the builder's arguments and waits for it.
    pub fn run(&self) -> Output {
        self.spawn_with(std::iter::empty::<&str>()).wait()
    }

    /// Runs with the builder's arguments followed by `extra`, and waits.
    pub fn run_with<I, S>(&self, extra: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.spawn_with(extra).wait()
    }

    /// Starts a run with the builder's arguments followed by `extra` without
    /// waiting, e.g. to interrupt it.
    pub fn spawn_with<I, S>(&self, extra: I) -> Running
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args = self.args_with(extra);
        let command = format!("sandboxctl {}", shell_words(&args));
        self.spawn(Command::new(BIN).args(&args), command)
    }

    /// Runs `script` under `bash -o pipefail -c`, as a user's shell runs a
    /// pipeline, and waits: `$SANDBOXCTL` is the binary under test and `"$@"`
    /// the builder's arguments followed by `extra`, so
    /// `run_bash(r#""$SANDBOXCTL" "$@" | head -1"#, ["plan"])` is
    /// `sandboxctl ... plan | head -1`. The exit code is the pipeline's (the
    /// status the user sees); directory, environment and deadline as `run`.
    pub fn run_bash<I, S>(&self, script: &str, extra: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args = self.args_with(extra);
        let command = format!(
            "bash -o pipefail -c '{script}' sandboxctl {}",
            shell_words(&args)
        );
        let mut cmd = Command::new("bash");
        cmd.args(["-o", "pipefail", "-c", script, "sandboxctl"])
            .args(&args)
            .env("SANDBOXCTL", BIN);
        self.spawn(&mut cmd, command).wait()
    }

    /// Runs `program` with `args` (not the binary under test) in the run's
    /// directory and environment, with its deadline, and waits.
    pub fn run_program<I, S>(&self, program: &Path, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<OsString> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        let command = format!("{} {}", program.display(), shell_words(&args));
        self.spawn(Command::new(program).args(&args), command)
            .wait()
    }

    /// The binary under test with the builder's arguments followed by
    /// `extra`, as a client that starts it as its server needs it: `command`,
    /// `args`, `cwd` and `env` (the variables the builder sets, and
    /// `DOCKER_HOST` from this process unless the builder sets or removes
    /// it: a client passes its server only the variables it is given).
    pub fn server<I, S>(&self, extra: I) -> Value
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<String> = self
            .args_with(extra)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let mut env = serde_json::Map::new();
        for (key, value) in &self.env {
            let key = key.to_string_lossy().into_owned();
            match value {
                Some(v) => {
                    env.insert(key, Value::String(v.to_string_lossy().into_owned()));
                }
                None => {
                    env.remove(&key);
                }
            }
        }
        let docker_host_given = self.env.iter().any(|(k, _)| k == "DOCKER_HOST");
        if let (false, Ok(host)) = (docker_host_given, std::env::var("DOCKER_HOST")) {
            env.insert("DOCKER_HOST".into(), Value::String(host));
        }
        let cwd = self.current_dir.as_deref().unwrap_or(self.dir.path());
        serde_json::json!({
            "command": BIN,
            "args": args,
            "cwd": cwd.to_string_lossy(),
            "env": env,
        })
    }

    fn args_with<I, S>(&self, extra: I) -> Vec<OsString>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut args = self.args.clone();
        args.extend(extra.into_iter().map(|a| a.as_ref().to_owned()));
        args
    }

    /// The binary under test with the builder's arguments followed by
    /// `extra`, in the run's directory and environment, its standard streams
    /// not set (for a run on other streams: `support::pty`); and the command
    /// line, for messages.
    pub fn command_with<I, S>(&self, extra: I) -> (Command, String)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args = self.args_with(extra);
        let line = format!("sandboxctl {}", shell_words(&args));
        let mut cmd = Command::new(BIN);
        cmd.args(&args);
        self.prepare(&mut cmd);
        (cmd, line)
    }

    /// How long a run may take before it is killed and the test fails.
    pub fn run_deadline(&self) -> Duration {
        self.deadline
    }

    /// Starts `cmd` in the run's directory with its environment and piped output.
    fn spawn(&self, cmd: &mut Command, command: String) -> Running {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        self.prepare(cmd);
        let started = Instant::now();
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn `{command}`: {e}"));
        let stdout = capture(child.stdout.take().unwrap());
        let stderr = capture(child.stderr.take().unwrap());
        Running {
            command,
            child,
            started,
            deadline: self.deadline,
            stdout,
            stderr,
        }
    }

    /// Sets `cmd`'s directory, environment and limits as the builder says.
    fn prepare(&self, cmd: &mut Command) {
        cmd.current_dir(self.current_dir.as_deref().unwrap_or(self.dir.path()));
        for (key, value) in &self.env {
            match value {
                Some(v) => cmd.env(key, v),
                None => cmd.env_remove(key),
            };
        }
        if let Some(limit) = self.nofile {
            use std::os::unix::process::CommandExt;
            // SAFETY: only setrlimit, async-signal-safe, runs between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    let rlimit = libc::rlimit {
                        rlim_cur: limit,
                        rlim_max: limit,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &rlimit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
    }
}

/// Arguments joined by spaces, for messages.
fn shell_words(args: &[OsString]) -> String {
    args.iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

pub type Captured = (Arc<Mutex<Vec<u8>>>, JoinHandle<()>);

/// Reads a pipe to its end on a thread of its own, keeping what arrived so far visible.
pub fn capture(mut pipe: impl Read + Send + 'static) -> Captured {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&buf);
    let handle = std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        loop {
            match pipe.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => sink.lock().unwrap().extend_from_slice(&chunk[..n]),
            }
        }
    });
    (buf, handle)
}

/// A run in progress.
#[derive(Debug)]
pub struct Running {
    command: String,
    child: Child,
    started: Instant,
    deadline: Duration,
    stdout: Captured,
    stderr: Captured,
}

impl Running {
    /// The process ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGINT, as Ctrl-C would.
    pub fn interrupt(&self) {
        let status = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -INT {} failed", self.child.id());
    }

    /// What the run printed on stderr so far.
    pub fn stderr_so_far(&self) -> String {
        String::from_utf8_lossy(&self.stderr.0.lock().unwrap()).into_owned()
    }

    /// What the run printed on stdout so far.
    pub fn stdout_so_far(&self) -> String {
        String::from_utf8_lossy(&self.stdout.0.lock().unwrap()).into_owned()
    }

    /// Waits until stderr contains `needle` (true), or `timeout` passes or the
    /// process ends without it (false).
    pub fn wait_for_stderr(&mut self, needle: &str, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        loop {
            if self.stderr_so_far().contains(needle) {
                return true;
            }
            if Instant::now() >= until || matches!(self.child.try_wait(), Ok(Some(_))) {
                return self.stderr_so_far().contains(needle);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the process to end (killing it and failing the test past its deadline).
    pub fn wait(mut self) -> Output {
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for sandboxctl") {
                break status;
            }
            if self.started.elapsed() > self.deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "`{}` did not finish within {:?}\n--- stdout\n{}\n--- stderr\n{}",
                    self.command,
                    self.deadline,
                    self.stdout_so_far(),
                    self.stderr_so_far()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let elapsed = self.started.elapsed();
        let (stdout, out_reader) = self.stdout;
        let (stderr, err_reader) = self.stderr;
        let _ = out_reader.join();
        let _ = err_reader.join();
        let bytes = |b: Arc<Mutex<Vec<u8>>>| std::mem::take(&mut *b.lock().unwrap());
        let (stdout_bytes, stderr_bytes) = (bytes(stdout), bytes(stderr));
        Output {
            command: self.command,
            code: status.code(),
            stdout: String::from_utf8_lossy(&stdout_bytes).into_owned(),
            stderr: String::from_utf8_lossy(&stderr_bytes).into_owned(),
            stdout_bytes,
            stderr_bytes,
            elapsed,
        }
    }
}

/// What a finished run did.
#[derive(Debug, Clone)]
pub struct Output {
    /// The command line, for messages.
    pub command: String,
    /// The exit code; `None` if a signal ended the process.
    pub code: Option<i32>,
    /// Stdout as text (invalid UTF-8 replaced).
    pub stdout: String,
    /// Stderr as text (invalid UTF-8 replaced).
    pub stderr: String,
    /// Stdout exactly as written, for checks on raw bytes (control characters).
    pub stdout_bytes: Vec<u8>,
    /// Stderr exactly as written.
    pub stderr_bytes: Vec<u8>,
    /// Wall time from spawn to exit.
    pub elapsed: Duration,
}

impl Output {
    /// The exit code, failing the test if a signal ended the process.
    pub fn code(&self) -> i32 {
        self.code
            .unwrap_or_else(|| panic!("{} was killed by a signal\n{}", self.command, self.dump()))
    }

    /// Fails the test (showing both streams) unless the exit code is `expected`.
    #[track_caller]
    pub fn expect_code(&self, expected: i32) -> &Output {
        assert_eq!(
            self.code,
            Some(expected),
            "`{}` exited with {:?}, expected {expected}\n{}",
            self.command,
            self.code,
            self.dump()
        );
        self
    }

    /// Same as `expect_code(0)`.
    #[track_caller]
    pub fn success(&self) -> &Output {
        self.expect_code(0)
    }

    /// Stdout parsed as one JSON document, failing the test (showing both
    /// streams) if it is not, or if it does not match the schema of the
    /// document its command prints (`support::schema`).
    #[track_caller]
    pub fn json(&self) -> Value {
        let value: Value = serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout of `{}` is not JSON: {e}\n{}",
                self.command,
                self.dump()
            )
        });
        if let Some(name) = super::schema::of_printed(&self.command, &value) {
            super::schema::check(name, &value, &self.command);
        }
        value
    }

    /// Stdout read as JSON into `T` (e.g. the typed report in `support::report`),
    /// failing the test (showing both streams) if it is not `what`, or if
    /// it does not match the schema of its command's document.
    #[track_caller]
    pub fn parse<T: serde::de::DeserializeOwned>(&self, what: &str) -> T {
        self.json();
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout of `{}` is not {what}: {e}\n{}",
                self.command,
                self.dump()
            )
        })
    }

    /// Both streams, labeled, for assertion messages.
    pub fn dump(&self) -> String {
        format!(
            "--- exit {:?} after {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.elapsed, self.stdout, self.stderr
        )
    }
}

/// A long-running command (`watch`, `hold`) that is killed with SIGKILL, by
/// its pid, when dropped without having been waited for: a failing assertion
/// never leaves it running.
#[derive(Debug)]
pub struct Guarded {
    run: Option<Running>,
    /// The run's `Cli`, whose temp dir (working directory, state file) must
    /// outlive it; dropped after the process is killed.
    _cli: Option<Cli>,
}

impl Cli {
    /// Starts a run like [`Cli::spawn_with`] and guards it (see
    /// [`Guarded`]); the `Cli`, its temp dir and its state file live as long
    /// as the guard.
    pub fn spawn_guarded<I, S>(self, extra: I) -> Guarded
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let run = self.spawn_with(extra);
        Guarded {
            run: Some(run),
            _cli: Some(self),
        }
    }
}

impl Guarded {
    /// Guards a run started with [`Cli::spawn_with`] (keep its `Cli` alive).
    pub fn new(run: Running) -> Guarded {
        Guarded {
            run: Some(run),
            _cli: None,
        }
    }

    fn running(&self) -> &Running {
        self.run.as_ref().expect("the run was waited for")
    }

    pub fn pid(&self) -> u32 {
        self.running().pid()
    }

    /// Stderr so far.
    pub fn stderr(&self) -> String {
        self.running().stderr_so_far()
    }

    /// Stdout so far.
    pub fn stdout(&self) -> String {
        self.running().stdout_so_far()
    }

    /// Sends `signal` to the process.
    pub fn signal(&self, signal: libc::c_int) {
        signal_pid(self.pid(), signal);
    }

    /// True while the process has not exited (a zombie counts as exited).
    pub fn alive(&self) -> bool {
        pid_alive(self.pid())
    }

    /// Waits for the exit (within the run's deadline).
    pub fn wait(mut self) -> Output {
        self.run.take().expect("the run was waited for").wait()
    }
}

impl Drop for Guarded {
    /// SIGKILL to the process's descendants (a command it runs would
    /// outlive it), then to the process, by pid; then reaps it.
    fn drop(&mut self) {
        if let Some(run) = self.run.take() {
            for pid in descendants(run.pid()).into_iter().chain([run.pid()]) {
                if let Ok(pid) = libc::pid_t::try_from(pid) {
                    // SAFETY: kill(2) on a pid this test started; no memory involved.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
            let _ = run.wait();
        }
    }
}

/// Sends `signal` to `pid`, failing the test if kill(2) fails.
pub fn signal_pid(pid: u32, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(pid).expect("pid fits pid_t");
    // SAFETY: kill(2) on a pid this test started; no memory involved.
    let rc = unsafe { libc::kill(pid, signal) };
    assert_eq!(
        rc,
        0,
        "kill({pid}, {signal}): {}",
        std::io::Error::last_os_error()
    );
}

/// True while `pid` exists and is not a zombie.
pub fn pid_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
        !s.lines()
            .any(|l| l.starts_with("State:") && l.contains('Z'))
    })
}

/// `(pid, parent pid, command name)` of every process now, from `/proc/*/stat`.
fn processes() -> Vec<(u32, u32, String)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
        let open = stat.find('(')?;
        let close = stat.rfind(')')?;
        let comm = stat[open + 1..close].to_string();
        let ppid = stat[close + 1..].split_whitespace().nth(1)?.parse().ok()?;
        Some((pid, ppid, comm))
    })
    .collect()
}

/// The living descendants of `pid` with their command names, parents first.
fn family(pid: u32) -> Vec<(u32, String)> {
    let all = processes();
    let mut parents = vec![pid];
    let mut found = Vec::new();
    while let Some(parent) = parents.pop() {
        for (child, _, name) in all.iter().filter(|(_, pp, _)| *pp == parent) {
            parents.push(*child);
            if pid_alive(*child) {
                found.push((*child, name.clone()));
            }
        }
    }
    found
}

/// The living descendants of `pid`.
pub fn descendants(pid: u32) -> Vec<u32> {
    family(pid).into_iter().map(|(p, _)| p).collect()
}

/// The living descendants of `pid` whose command name is `comm`.
pub fn descendants_named(pid: u32, comm: &str) -> Vec<u32> {
    family(pid)
        .into_iter()
        .filter(|(_, name)| name == comm)
        .map(|(p, _)| p)
        .collect()
}

/// Processes this test started indirectly (a command run by a command), sent
/// SIGKILL by pid when dropped if they still live.
#[derive(Debug)]
pub struct KillOnDrop(pub Vec<u32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if let (true, Ok(pid)) = (pid_alive(pid), libc::pid_t::try_from(pid)) {
                // SAFETY: kill(2) on a pid this test started; no memory involved.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}
