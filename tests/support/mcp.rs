//! The MCP tests' client: the official MCP Python SDK (PyPI `mcp`, pinned in
//! `tests/mcp/requirements.txt`), driven by `tests/mcp/client.py`, which
//! starts `sandboxctl mcp` as an agent host would and reports what it saw.
//!
//! Owns the virtual environment it runs in (`target/mcp-venv`, made by
//! `scripts/mcp-venv.sh`: by `.ci/run`, or here on first use, once per
//! process, under a lock file) and a scenario's round trip: steps in, the
//! client's JSON out. Judges nothing: the tests read what the client saw and
//! look at the engine themselves.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};

use super::cli::Cli;

/// The project's root.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The Python of the client's virtual environment (`target/mcp-venv`, or
/// `SANDBOXCTL_MCP_VENV`), made when missing by `scripts/mcp-venv.sh`,
/// bounded (5 minutes, pip's own timeout 20 s with one retry). When it
/// cannot be made (no package index answers, no `python3 -m venv`) the test
/// is ignored naming the SDK and what failed (`support::tools`; a failure
/// under `SANDBOXCTL_TEST_REQUIRE_TOOLS`, as in CI).
pub fn python() -> PathBuf {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let made = PYTHON.get_or_init(|| {
        let venv = std::env::var_os("SANDBOXCTL_MCP_VENV")
            .map(PathBuf::from)
            .unwrap_or_else(|| root().join("target").join("mcp-venv"));
        // One maker at a time, across test processes too.
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(root().join("target").join(".mcp-venv.lock"))
            .map_err(|e| format!("open the venv's lock file: {e}"))?;
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor this function owns.
        unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
        let mut script = std::process::Command::new("timeout");
        script.args(["300", "bash"]);
        for (key, value) in [("PIP_TIMEOUT", "20"), ("PIP_RETRIES", "1")] {
            if std::env::var_os(key).is_none() {
                script.env(key, value);
            }
        }
        let out = script
            .arg(root().join("scripts/mcp-venv.sh"))
            .arg(&venv)
            .output()
            .map_err(|e| format!("run scripts/mcp-venv.sh: {e}"))?;
        drop(lock);
        if !out.status.success() {
            return Err(format!(
                "scripts/mcp-venv.sh {} failed ({}): {}{}",
                venv.display(),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(venv.join("bin").join("python"))
    });
    match made {
        Ok(python) => python.clone(),
        Err(e) => {
            eprintln!("mcp: the MCP Python SDK could not be installed: {e}");
            super::tools::missing(super::tools::Tool::McpSdk, Some(e))
        }
    }
}

/// A scenario: the server's invocation (a `Cli`, to which `mcp` is
/// appended) and the client's steps.
pub struct Client {
    cli: Cli,
    server_args: Vec<String>,
    steps: Vec<Value>,
    /// The server's program as the client names it (default: the binary's path).
    program: Option<String>,
}

/// What the client saw.
#[derive(Debug)]
pub struct Seen {
    /// The client's document: `initialize`, `results` (one per step), `toolCalls`.
    pub doc: Value,
    /// The client's stderr, where the server's lines go too.
    pub stderr: String,
}

impl Client {
    /// A client of `sandboxctl <cli's arguments> mcp <args>`.
    pub fn new(cli: Cli) -> Client {
        Client {
            cli,
            server_args: vec![],
            steps: vec![],
            program: None,
        }
    }

    /// Starts the server as `program` (looked up on the `PATH` the `Cli`
    /// gives), as an agent host's configuration names it.
    pub fn program(mut self, program: &str) -> Client {
        self.program = Some(program.to_string());
        self
    }

    /// Arguments after `mcp` (`--parallelism 1`).
    pub fn server_args(mut self, args: &[&str]) -> Client {
        self.server_args = args.iter().map(|a| a.to_string()).collect();
        self
    }

    /// Lists the tools.
    pub fn list_tools(self) -> Client {
        self.step(json!({ "op": "list_tools" }))
    }

    /// Calls `tool` with `args`.
    pub fn call(self, tool: &str, args: Value) -> Client {
        self.step(json!({ "op": "call", "tool": tool, "args": args }))
    }

    /// Any step of `client.py`'s.
    pub fn step(mut self, step: Value) -> Client {
        self.steps.push(step);
        self
    }

    /// The `Cli` the server runs with (its temp dir, for files).
    pub fn cli(&self) -> &Cli {
        &self.cli
    }

    /// Runs the scenario; fails the test when the client fails.
    pub fn run(&self) -> Seen {
        let python = python();
        let mut extra = vec!["mcp".to_string()];
        extra.extend(self.server_args.iter().cloned());
        let mut server = self.cli.server(&extra);
        if let Some(program) = &self.program {
            server["command"] = json!(program);
        }
        let scenario = json!({
            "server": server,
            "steps": self.steps,
        });
        let path = self.cli.write(
            &format!("mcp-scenario-{}.json", std::process::id()),
            &scenario.to_string(),
        );
        let out = self.cli.run_program(
            &python,
            [
                root().join("tests/mcp/client.py").as_os_str(),
                path.as_os_str(),
            ],
        );
        assert_eq!(out.code, Some(0), "the MCP client failed\n{}", out.dump());
        let doc = serde_json::from_str(out.stdout.trim())
            .unwrap_or_else(|e| panic!("the MCP client printed no document: {e}\n{}", out.dump()));
        let seen = Seen {
            doc,
            stderr: out.stderr,
        };
        // Every structured result, error results too (the SDK checks only
        // the others), against its tool's published schema.
        for result in seen.calls() {
            if let (Some(tool), Some(doc)) = (result["tool"].as_str(), result.get("structured")) {
                if !doc.is_null() {
                    let what = format!("the {tool} tool's structured content");
                    super::schema::check(document_of(tool), doc, &what);
                }
            }
        }
        seen
    }
}

/// The published document a tool's structured content is.
pub fn document_of(tool: &str) -> &str {
    match tool {
        "destroy" | "prune" => "report",
        other => other,
    }
}

impl Seen {
    /// Every call's result, those of concurrent steps too.
    pub fn calls(&self) -> Vec<&Value> {
        let mut calls = Vec::new();
        for result in self.doc["results"].as_array().into_iter().flatten() {
            match result.get("concurrent").and_then(Value::as_array) {
                Some(all) => calls.extend(all.iter()),
                None if result.get("tool").is_some() => calls.push(result),
                None => {}
            }
        }
        calls
    }

    /// Step `i`'s result.
    pub fn result(&self, i: usize) -> &Value {
        &self.doc["results"][i]
    }

    /// Everything, for assertion messages.
    pub fn dump(&self) -> String {
        format!(
            "--- client document\n{}\n--- stderr (client and server)\n{}",
            serde_json::to_string_pretty(&self.doc).unwrap_or_default(),
            self.stderr
        )
    }
}

/// How long a scenario may take before it is killed (`Cli`'s deadline).
pub const DEADLINE: Duration = Duration::from_secs(240);

/// Speaks JSON-RPC lines over `stream`, the client's end of a pipe whose
/// other end an MCP server serves (in memory, `run::mcp_on`): initializes,
/// sends each of `requests` (`method`, `params`) as requests 1, 2, ...,
/// waits for every answer, then ends its input (the server then ends).
/// Returns the answers in order, and every notification the server sent.
pub async fn exchange<S>(stream: S, requests: &[(&str, Value)]) -> (Vec<Value>, Vec<Value>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let (read, mut write) = tokio::io::split(stream);
    let mut lines = BufReader::new(read).lines();
    let mut notifications = Vec::new();
    let send = |message: Value| format!("{message}\n");
    let line = send(
        json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": { "name": "sandboxctl-tests", "version": "0" } } }),
    );
    write
        .write_all(line.as_bytes())
        .await
        .expect("write initialize");
    let mut answers: Vec<Option<Value>> = vec![None; requests.len() + 1];
    let mut sent = false;
    while answers.iter().any(Option::is_none) {
        let Some(line) = lines.next_line().await.expect("read the server") else {
            panic!("the server ended before it answered: {answers:?}");
        };
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the server wrote a line that is not JSON ({e}): {line}"));
        match message["id"].as_u64() {
            Some(id) if message.get("method").is_none() => {
                answers[id as usize] = Some(message);
            }
            _ => notifications.push(message),
        }
        if answers[0].is_some() && !sent {
            sent = true;
            let mut out = send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
            for (i, (method, params)) in requests.iter().enumerate() {
                out.push_str(&send(json!({
                    "jsonrpc": "2.0", "id": i + 1, "method": method, "params": params
                })));
            }
            write
                .write_all(out.as_bytes())
                .await
                .expect("write the requests");
        }
    }
    write.shutdown().await.expect("end the input");
    drop(write);
    let answers = answers.into_iter().skip(1).map(Option::unwrap).collect();
    (answers, notifications)
}
