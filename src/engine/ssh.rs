//! `ssh://[user@]host[:port]` as the docker CLI reaches it: the `ssh` found on
//! `PATH` runs `docker system dial-stdio` on the remote, and that process's
//! stdin/stdout is one HTTP connection to the remote engine. Plugged into
//! bollard as a custom transport: a hyper client whose connector is this
//! module, with HTTP keep-alive, so one connection serves many requests.
//!
//! Authenticates once and multiplexes (OpenSSH connection sharing): the
//! first connection starts a master (`ssh -M -N`, its control socket in a
//! private folder), and every connection is a session on it: a channel
//! instead of a full handshake and authentication. A master carries at most
//! [`SESSIONS_PER_MASTER`] sessions (a stock sshd's `MaxSessions`); the
//! connections past that use a second master. At most [`CONNECTIONS`]
//! connections are open at once. When a server with a lower `MaxSessions`
//! refuses a session, ssh connects on its own for it; should it report the
//! refusal instead, that master's share is lowered for the rest of the run.
//!
//! Owns the `ssh` command lines (user `-l`, port `-p`; `~/.ssh/config`, the
//! agent and known hosts are ssh's own business, honoured because it is the
//! user's `ssh`), the lifetime of every process it starts (in a session of
//! its own, as the docker CLI does, so a Ctrl-C reaches sandboxctl alone;
//! killed when its connection or master is dropped and when sandboxctl ends,
//! however it ends: none outlives the run) and the words of a failure: ssh's
//! own stderr, kept raw here (the renderer escapes it), with what to do (a
//! command to copy quotes its destination for a shell). A user or host that
//! begins with `-` or holds a control character, plainly or percent-encoded,
//! never becomes a target ([`SshTarget::parse`]). Must
//! not read the environment beyond what `ssh` itself reads, nor retry a
//! request: whether one is sent again is `docker.rs`'s call
//! ([`SshFailure::never_reached_engine`]).

use std::fmt;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bollard::errors::Error as BollardError;
use bollard::{ClientVersion, Docker};
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};

/// Where an `ssh://` address points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SshTarget {
    /// `-l USER`; `None`: ssh's own choice (`~/.ssh/config`, else the local user).
    pub user: Option<String>,
    /// The host as written (a `Host` alias of `~/.ssh/config` works).
    pub host: String,
    /// `-p PORT`; `None`: ssh's own choice.
    pub port: Option<u16>,
}

impl SshTarget {
    /// Parses `ssh://[user@]host[:port][/]` as the docker CLI does: no
    /// password, no path, no query; and refuses a user or host that ssh would
    /// misread: one that begins with `-` or holds a control character,
    /// plainly or percent-encoded ([`crate::model::ssh_target_problem`]).
    pub(crate) fn parse(address: &str) -> Result<SshTarget, String> {
        if let Some(problem) = crate::model::ssh_target_problem(address) {
            return Err(format!(
                "{problem}; fix the address (ssh options belong in ~/.ssh/config)"
            ));
        }
        let url = url::Url::parse(address).map_err(|e| format!("not an ssh:// URL ({e})"))?;
        if !url.scheme().eq_ignore_ascii_case("ssh") {
            return Err("not an ssh:// URL".to_string());
        }
        if url.password().is_some() {
            return Err(
                "ssh:// addresses cannot carry a password; use a key (ssh-agent or IdentityFile in ~/.ssh/config)"
                    .to_string(),
            );
        }
        if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
            return Err(format!(
                "ssh:// addresses take no path or query (got {address:?}); use ssh://[user@]host[:port]"
            ));
        }
        let host = match url.host_str() {
            Some(h) if !h.is_empty() => h.trim_start_matches('[').trim_end_matches(']'),
            _ => return Err("ssh:// address without a host".to_string()),
        };
        let user = Some(url.username()).filter(|u| !u.is_empty());
        let user = user
            .map(|u| {
                percent_encoding::percent_decode_str(u)
                    .decode_utf8()
                    .map(|u| u.into_owned())
                    .map_err(|_| format!("ssh:// user {u:?} is not valid UTF-8"))
            })
            .transpose()?;
        Ok(SshTarget {
            user,
            host: host.to_string(),
            port: url.port(),
        })
    }

    /// `ssh` arguments before the remote command: `-l USER`, `-p PORT`, `--`, host.
    fn args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(user) = &self.user {
            args.extend(["-l".to_string(), user.clone()]);
        }
        if let Some(port) = self.port {
            args.extend(["-p".to_string(), port.to_string()]);
        }
        args.extend(["--".to_string(), self.host.clone()]);
        args
    }

    /// `ssh [-p PORT] [USER@]HOST` as a person types it into a POSIX shell,
    /// the destination quoted when it holds anything but `[A-Za-z0-9@%+=:,./_-]`.
    fn command_line(&self) -> String {
        let destination = match &self.user {
            Some(user) => format!("{user}@{}", self.host),
            None => self.host.clone(),
        };
        let port = self.port.map(|p| format!(" -p {p}")).unwrap_or_default();
        format!("ssh{port} {}", shell_quoted(&destination))
    }
}

/// `word` as one word of a POSIX shell: as it is when it holds only
/// `[A-Za-z0-9@%+=:,./_-]`, else in single quotes (a `'` as `'\''`).
fn shell_quoted(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

impl fmt::Display for SshTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(user) = &self.user {
            write!(f, "{user}@")?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            f.write_str(&self.host)?;
        }
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        Ok(())
    }
}

/// Why an ssh connection ended without the remote engine's answer: ssh's
/// exit status and its own words (stderr, which also carries the remote
/// command's), raw; with what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SshFailure {
    /// Where ssh went (shown as `user@host:port`).
    pub target: SshTarget,
    /// ssh's exit status (`None`: killed by a signal).
    pub status: Option<i32>,
    /// What ssh wrote to stderr, trimmed, lines joined with ` / `.
    pub stderr: String,
    /// Bytes of the remote engine's answer read before it ended.
    pub answered: bool,
}

impl SshFailure {
    /// sshd dropped the connection before authentication (its `MaxStartups`).
    fn refused_at_key_exchange(&self) -> bool {
        self.status == Some(255) && self.stderr.contains("kex_exchange_identification")
    }

    /// sshd refused a session on the master (its `MaxSessions`).
    fn session_refused(&self) -> bool {
        self.status == Some(255)
            && (self.stderr.contains("Session open refused")
                || self.stderr.contains("administratively prohibited"))
    }

    /// Nothing of the request reached the engine (sshd turned the connection
    /// or the session away), so it may be sent again.
    pub(crate) fn never_reached_engine(&self) -> bool {
        !self.answered && (self.refused_at_key_exchange() || self.session_refused())
    }

    /// What to do, by ssh's words. A command to copy names the target
    /// quoted for a shell ([`SshTarget::command_line`]).
    fn hint(&self) -> String {
        let s = self.stderr.to_ascii_lowercase();
        let ssh = self.target.command_line();
        if s.contains("host key verification failed")
            || s.contains("remote host identification has changed")
        {
            format!("the remote's host key is unknown or changed: check it, then add it to ~/.ssh/known_hosts (e.g. by running `{ssh}` once)")
        } else if s.contains("permission denied") || s.contains("too many authentication failures")
        {
            "ssh could not authenticate: load the key into the agent (`ssh-add`) or name it with IdentityFile in ~/.ssh/config, and check the user".to_string()
        } else if s.contains("could not resolve hostname")
            || s.contains("name or service not known")
        {
            "the host name does not resolve: check the ssh:// address or its `Host` entry in ~/.ssh/config".to_string()
        } else if s.contains("connection refused")
            || s.contains("timed out")
            || s.contains("no route to host")
            || s.contains("network is unreachable")
        {
            "no sshd answers there: check the host and port and that sshd runs".to_string()
        } else if self.status == Some(127)
            || s.contains("docker: not found")
            || s.contains("command not found")
        {
            "the remote has no `docker` command on the PATH of a non-interactive ssh session: install the docker CLI there (18.09 or later, for `docker system dial-stdio`)".to_string()
        } else if s.contains("cannot connect to the docker daemon")
            || s.contains("permission denied while trying to connect")
        {
            "the remote docker CLI cannot reach its engine: check that dockerd runs there and that the ssh user may use its socket (the docker group)".to_string()
        } else if s.contains("kex_exchange_identification") {
            "sshd dropped the connection before authentication (its MaxStartups, or a firewall): retry later, or raise MaxStartups".to_string()
        } else {
            format!("check that `{ssh} docker system dial-stdio` works from this shell")
        }
    }
}

impl fmt::Display for SshFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = match self.status {
            Some(code) => format!("exit status {code}"),
            None => "killed by a signal".to_string(),
        };
        let said = if self.stderr.is_empty() {
            "it printed nothing".to_string()
        } else {
            format!("ssh said: {}", self.stderr)
        };
        write!(
            f,
            "ssh to {} ended before the engine answered ({status}); {said}; {}",
            self.target,
            self.hint()
        )
    }
}

impl std::error::Error for SshFailure {}

/// The [`SshFailure`] somewhere in `err`'s chain, if ssh is why it failed.
pub(crate) fn failure_in(err: &(dyn std::error::Error + 'static)) -> Option<SshFailure> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = next {
        if let Some(f) = e.downcast_ref::<SshFailure>() {
            return Some(f.clone());
        }
        if let Some(io) = e.downcast_ref::<io::Error>() {
            if let Some(f) = io.get_ref().and_then(|i| i.downcast_ref::<SshFailure>()) {
                return Some(f.clone());
            }
        }
        next = e.source();
    }
    None
}

/// Connections open at once to one remote engine: sandboxctl's default
/// per-engine parallelism, so the default holds over ssh. Requests beyond it
/// wait for a connection to come free (keep-alive reuses it).
pub(crate) const CONNECTIONS: usize = 12;

/// Sessions one master carries at most: a stock sshd's `MaxSessions`.
pub(crate) const SESSIONS_PER_MASTER: usize = 10;

/// How much of ssh's stderr a failure keeps.
const STDERR_LIMIT: usize = 4096;

/// Tries to start a master that sshd dropped before authentication.
const MASTER_ATTEMPTS: u32 = 3;

/// What every connection of one pool shares.
struct Shared {
    target: SshTarget,
    connect_timeout: u64,
    /// Open connections (permits held by live streams).
    slots: Arc<Semaphore>,
    /// Enough masters for [`CONNECTIONS`] sessions, started when first needed.
    masters: Vec<MasterSlot>,
}

/// A master's place: started once, and its share of sessions.
struct MasterSlot {
    master: tokio::sync::OnceCell<Result<Master, SshFailure>>,
    sessions: Arc<Semaphore>,
}

/// A running `ssh -M -N` and its private folder (the control socket).
struct Master {
    _child: tokio::process::Child,
    dir: PathBuf,
}

impl Master {
    fn socket(&self) -> PathBuf {
        self.dir.join("m")
    }
}

impl Drop for Master {
    fn drop(&mut self) {
        // The process is killed by the child's own drop (kill_on_drop); the
        // socket goes with the folder.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `ssh -T -o ConnectTimeout=N` with piped stdio, in a session of its own
/// (no terminal: no prompt, and a Ctrl-C reaches sandboxctl alone, which
/// finishes the removals in flight over these connections), killed when
/// dropped and when sandboxctl ends.
fn ssh_command(shared: &Shared) -> Command {
    let mut command = Command::new("ssh");
    command
        .arg("-T")
        .arg("-o")
        .arg(format!("ConnectTimeout={}", shared.connect_timeout))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // SAFETY: only setsid and prctl, both async-signal-safe, run between
    // fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            // Killed when sandboxctl ends, however it ends (the docker CLI
            // does the same). Spawned on a runtime worker thread, which lives
            // as long as the runtime.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command
}

fn spawn_error(e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("cannot run ssh: {e}; install OpenSSH's client or put `ssh` on PATH"),
    )
}

/// A private folder (mode 0700) for a control socket, short enough for
/// the socket path limit (108 bytes, and ssh adds a temporary suffix).
fn private_dir() -> io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut base = std::env::temp_dir();
    if base.as_os_str().len() > 48 {
        base = PathBuf::from("/tmp");
    }
    // Folders of runs that were killed before they could remove theirs.
    if let Ok(entries) = std::fs::read_dir(&base) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let pid = name
                .to_str()
                .and_then(|n| n.strip_prefix("sandboxctl-ssh-"))
                .and_then(|rest| rest.split_once('-'))
                .and_then(|(pid, _)| pid.parse::<u32>().ok());
            if let Some(pid) = pid {
                if !Path::new(&format!("/proc/{pid}")).exists() {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
    }
    let dir = base.join(format!(
        "sandboxctl-ssh-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(dir)
}

/// Starts a master and waits until its control socket exists (it has
/// authenticated); again when sshd dropped it before authentication.
async fn start_master(shared: &Shared) -> Result<Master, SshFailure> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match try_master(shared).await {
            Err(f) if f.refused_at_key_exchange() && attempt < MASTER_ATTEMPTS => {
                tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
            }
            other => return other,
        }
    }
}

async fn try_master(shared: &Shared) -> Result<Master, SshFailure> {
    let failure = |status: Option<i32>, stderr: String| SshFailure {
        target: shared.target.clone(),
        status,
        stderr,
        answered: false,
    };
    let dir = private_dir().map_err(|e| {
        failure(
            None,
            format!("cannot create a folder for the control socket: {e}"),
        )
    })?;
    let socket = dir.join("m");
    let mut command = ssh_command(shared);
    command
        .args(["-M", "-N", "-o", "ControlPersist=no", "-S"])
        .arg(&socket)
        .args(shared.target.args())
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(failure(None, spawn_error(e).to_string()));
        }
    };
    let mut stderr = child.stderr.take().expect("piped");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(shared.connect_timeout + 5);
    loop {
        if socket.exists() {
            // Drain its stderr so that ssh never blocks on a full pipe.
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
            });
            return Ok(Master { _child: child, dir });
        }
        if let Ok(Some(status)) = child.try_wait() {
            let mut text = Vec::new();
            let _ = (&mut stderr)
                .take(STDERR_LIMIT as u64)
                .read_to_end(&mut text)
                .await;
            let _ = std::fs::remove_dir_all(&dir);
            return Err(failure(status.code(), words(&text)));
        }
        if tokio::time::Instant::now() >= deadline {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(failure(
                None,
                format!(
                    "no authenticated connection within {} s",
                    shared.connect_timeout + 5
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The connections to one remote engine: a hyper client whose every
/// connection is a `docker system dial-stdio` session, kept alive between
/// requests. Clones share the connections; the last one dropped ends every
/// process.
#[derive(Clone)]
pub(crate) struct SshPool {
    client: Arc<Client<SshConnector, crate::engine::unix::Body>>,
}

impl SshPool {
    /// No connection yet; the first request starts the master. `secs` is
    /// ssh's `ConnectTimeout`.
    pub(crate) fn new(target: &SshTarget, secs: u64) -> SshPool {
        let masters = CONNECTIONS.div_ceil(SESSIONS_PER_MASTER);
        let shared = Arc::new(Shared {
            target: target.clone(),
            connect_timeout: secs,
            slots: Arc::new(Semaphore::new(CONNECTIONS)),
            masters: (0..masters)
                .map(|_| MasterSlot {
                    master: tokio::sync::OnceCell::new(),
                    sessions: Arc::new(Semaphore::new(SESSIONS_PER_MASTER)),
                })
                .collect(),
        });
        let mut builder = Client::builder(TokioExecutor::new());
        builder
            .pool_max_idle_per_host(CONNECTIONS)
            .pool_idle_timeout(Duration::from_secs(30));
        SshPool {
            client: Arc::new(builder.build(SshConnector { shared })),
        }
    }

    /// A bollard client over these connections; `secs` is its per-request timeout.
    pub(crate) fn client(
        &self,
        secs: u64,
        version: &ClientVersion,
    ) -> Result<Docker, BollardError> {
        crate::engine::unix::over(self.client.clone(), "ssh://docker", secs, version)
    }
}

/// Opens connections for the hyper client (see the module header).
#[derive(Clone)]
struct SshConnector {
    shared: Arc<Shared>,
}

impl tower_service::Service<http::Uri> for SshConnector {
    type Response = TokioIo<SshStream>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Uri) -> Self::Future {
        let shared = self.shared.clone();
        Box::pin(async move { dial(&shared).await.map(TokioIo::new) })
    }
}

/// A permit of `semaphore`, waited for (a closed one is an I/O error).
async fn acquire(semaphore: &Arc<Semaphore>) -> io::Result<OwnedSemaphorePermit> {
    semaphore
        .clone()
        .acquire_owned()
        .await
        .map_err(io::Error::other)
}

/// A session on a master: `ssh -S SOCKET ... -- HOST docker system dial-stdio`.
async fn dial(shared: &Shared) -> io::Result<SshStream> {
    let slot = acquire(&shared.slots).await?;
    // The first master with a session to spare (there is one: the masters'
    // shares add up to at least CONNECTIONS), else wait on the first.
    let free = shared.masters.iter().find_map(|m| {
        m.sessions
            .clone()
            .try_acquire_owned()
            .ok()
            .map(|permit| (m, permit))
    });
    let (slot_master, session) = match free {
        Some(found) => found,
        None => {
            let m = &shared.masters[0];
            (m, acquire(&m.sessions).await?)
        }
    };
    let master = slot_master
        .master
        .get_or_init(|| start_master(shared))
        .await
        .as_ref()
        .map_err(|f| io::Error::other(f.clone()))?;
    let mut command = ssh_command(shared);
    command
        .args(["-o", "ControlMaster=no", "-S"])
        .arg(master.socket())
        .args(shared.target.args())
        .args(["docker", "system", "dial-stdio"]);
    let mut child = command.spawn().map_err(spawn_error)?;
    let stdin = child.stdin.take().expect("piped");
    let stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let (ended_tx, ended_rx) = oneshot::channel::<(Option<i32>, String)>();
    let (dropped_tx, dropped_rx) = oneshot::channel::<()>();
    // Owns the process: reaps it when it ends, kills it when its stream is
    // dropped; dropped with the runtime, it kills it too (kill_on_drop).
    tokio::spawn(async move {
        let ended = async {
            let mut text = Vec::new();
            let _ = (&mut stderr)
                .take(STDERR_LIMIT as u64)
                .read_to_end(&mut text)
                .await;
            // The rest is drained so that ssh never blocks on a full pipe.
            let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
            let status = child.wait().await.ok().and_then(|s| s.code());
            (status, text)
        };
        tokio::select! {
            (status, text) = ended => {
                let _ = ended_tx.send((status, words(&text)));
            }
            _ = dropped_rx => {
                let _ = child.kill().await;
            }
        }
    });
    Ok(SshStream {
        target: shared.target.clone(),
        stdin,
        stdout,
        ended: ended_rx,
        _dropped: dropped_tx,
        _slot: slot,
        session: Some(session),
        answered: false,
    })
}

/// ssh's stderr as one line: trimmed lines joined with ` / `.
fn words(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" / ")
}

/// One `ssh ... dial-stdio` session as a byte stream. At its end of stream,
/// a failure of ssh (any exit status but 0) is an error carrying an
/// [`SshFailure`], never a quiet end.
pub(crate) struct SshStream {
    target: SshTarget,
    stdin: ChildStdin,
    stdout: ChildStdout,
    /// ssh's exit status and words, once it ended.
    ended: oneshot::Receiver<(Option<i32>, String)>,
    /// Dropped with the stream: the process is killed.
    _dropped: oneshot::Sender<()>,
    _slot: OwnedSemaphorePermit,
    /// Its master's session share; forgotten (the share lowered) when sshd
    /// refused the session.
    session: Option<OwnedSemaphorePermit>,
    answered: bool,
}

impl AsyncRead for SshStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.stdout).poll_read(cx, buf))?;
        if buf.filled().len() > before {
            self.answered = true;
            return Poll::Ready(Ok(()));
        }
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        // End of stream: a clean end, or ssh failed; wait for it to say which.
        match ready!(Pin::new(&mut self.ended).poll(cx)) {
            Ok((status, stderr)) if status != Some(0) => {
                let failure = SshFailure {
                    target: self.target.clone(),
                    status,
                    stderr,
                    answered: self.answered,
                };
                if failure.session_refused() {
                    if let Some(permit) = self.session.take() {
                        permit.forget();
                    }
                }
                Poll::Ready(Err(io::Error::other(failure)))
            }
            _ => Poll::Ready(Ok(())),
        }
    }
}

impl AsyncWrite for SshStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stdin).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stdin).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stdin).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stdin).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stdin.is_write_vectored()
    }
}

impl Connection for SshStream {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_as_the_docker_cli_reads_them() {
        let t = SshTarget::parse("ssh://root@10.0.0.5:2222").unwrap();
        assert_eq!(
            (t.user.as_deref(), t.host.as_str(), t.port),
            (Some("root"), "10.0.0.5", Some(2222))
        );
        assert_eq!(
            t.args(),
            ["-l", "root", "-p", "2222", "--", "10.0.0.5"].map(String::from)
        );
        assert_eq!(t.to_string(), "root@10.0.0.5:2222");
        let t = SshTarget::parse("ssh://ci-1/").unwrap();
        assert_eq!(t.args(), ["--", "ci-1"].map(String::from));
        let t = SshTarget::parse("ssh://me%40corp@[::1]:22").unwrap();
        assert_eq!(t.user.as_deref(), Some("me@corp"));
        assert_eq!(t.host, "::1");
        assert_eq!(t.to_string(), "me@corp@[::1]:22");
        for bad in [
            "ssh://",
            "ssh://me:secret@h",
            "ssh://h/path",
            "ssh://h?x=1",
            "ssh://h:99999",
        ] {
            assert!(SshTarget::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn users_and_hosts_that_ssh_would_misread_never_become_a_target() {
        for bad in [
            "ssh://-oProxyCommand=x@host",
            "ssh://%2DoProxyCommand=x@host",
            "ssh://%2doProxyCommand=x@host",
            "ssh://u@-oProxyCommand=x",
            "ssh://u@%2DoProxyCommand=x",
            "ssh://u@host%0a",
            "ssh://u%0A@host",
            "ssh://u@ho\nst",
            // Found by the fuzzer: a URL parser drops the line break, so
            // this is an ssh:// address to it.
            "s\nsh://-oProxyCommand=x@host",
            "\u{1}ssh://u\u{18}@host",
        ] {
            let e = SshTarget::parse(bad).expect_err(bad);
            assert!(
                e.contains("begins with '-'") || e.contains("control character"),
                "{bad:?}: {e}"
            );
        }
    }

    #[test]
    fn hints_quote_the_target_they_print() {
        let hint = |target: SshTarget, stderr: &str| {
            SshFailure {
                target,
                status: Some(255),
                stderr: stderr.to_string(),
                answered: false,
            }
            .hint()
        };
        let target = |user: Option<&str>, host: &str, port: Option<u16>| SshTarget {
            user: user.map(String::from),
            host: host.to_string(),
            port,
        };
        let text = [
            hint(
                target(Some("root"), "10.0.0.5", Some(2222)),
                "Host key verification failed.",
            ),
            hint(target(None, "ci-1", None), "something else"),
            hint(target(Some("me@corp"), "::1", Some(22)), "something else"),
            hint(
                target(Some("o'brien x"), "h", None),
                "Host key verification failed.",
            ),
            hint(
                target(Some("$(reboot)"), "h;id", Some(22)),
                "something else",
            ),
        ]
        .join("\n");
        insta::assert_snapshot!(text, @r"
        the remote's host key is unknown or changed: check it, then add it to ~/.ssh/known_hosts (e.g. by running `ssh -p 2222 root@10.0.0.5` once)
        check that `ssh ci-1 docker system dial-stdio` works from this shell
        check that `ssh -p 22 me@corp@::1 docker system dial-stdio` works from this shell
        the remote's host key is unknown or changed: check it, then add it to ~/.ssh/known_hosts (e.g. by running `ssh 'o'\''brien x@h'` once)
        check that `ssh -p 22 '$(reboot)@h;id' docker system dial-stdio` works from this shell
        ");
    }

    fn failure(status: i32, stderr: &str) -> SshFailure {
        SshFailure {
            target: SshTarget::parse("ssh://root@h:2222").unwrap(),
            status: Some(status),
            stderr: stderr.to_string(),
            answered: false,
        }
    }

    #[test]
    fn failures_say_what_to_do_and_which_may_be_sent_again() {
        let text = [
            failure(255, "Host key verification failed."),
            failure(255, "root@h: Permission denied (publickey)."),
            failure(255, "ssh: Could not resolve hostname h: Name or service not known"),
            failure(255, "ssh: connect to host h port 2222: Connection refused"),
            failure(127, "sh: 1: docker: not found"),
            failure(255, "kex_exchange_identification: Connection closed by remote host"),
            failure(1, "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"),
            failure(1, "something else"),
        ]
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n");
        insta::with_settings!({snapshot_path => "../../snapshots"}, { insta::assert_snapshot!(text) });
        assert!(failure(
            255,
            "kex_exchange_identification: read: Connection reset by peer"
        )
        .never_reached_engine());
        assert!(failure(
            255,
            "mux_client_request_session: session request failed: Session open refused by peer"
        )
        .never_reached_engine());
        let answered = SshFailure {
            answered: true,
            ..failure(255, "kex_exchange_identification: x")
        };
        assert!(!answered.never_reached_engine());
        assert!(!failure(255, "Host key verification failed.").never_reached_engine());
    }
}
