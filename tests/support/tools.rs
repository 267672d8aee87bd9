//! The gates of tests that need a tool besides Docker (sshd, Podman,
//! Graphviz, openssl, the ssh client, iproute2, the MCP Python SDK, Docker
//! 26.1): owns finding a tool and the "ignored, needs TOOL" outcome.
//!
//! * A program is looked up on `PATH` (so hiding it from `PATH` hides it
//!   from the tests too); [`need`] returns its path, or stops the test with
//!   a [`MissingTool`] unwind that the runner (`support::harness`) reports
//!   as ignored with the tool and how to install it as the reason: not
//!   passed, not failed.
//! * What a test can make itself (the SDK's venv, Docker 26.1 fetched with
//!   apt) is made, bounded in time; when making it fails the test is
//!   ignored the same way, naming the tool and what failed ([`missing`]).
//! * `SANDBOXCTL_TEST_REQUIRE_TOOLS=1` (set by `.ci/run`, where every tool
//!   is installed) turns a missing tool into a failure: CI never passes by
//!   skipping what it installed.
//!
//! Must not decide anything about the Docker engine itself (that gate is
//! `support::docker::engine_version`).

use std::path::{Path, PathBuf};

/// A tool a test needs besides the main Docker engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// `sshd` (openssh-server).
    Sshd,
    /// `ssh` and `ssh-keygen` (openssh-client).
    SshClient,
    /// `podman`.
    Podman,
    /// Graphviz's `dot`.
    Graphviz,
    /// The `openssl` CLI (TLS certificates).
    Openssl,
    /// `ip` (iproute2: the extra dockerds' bridges).
    Iproute2,
    /// The MCP Python SDK's virtual environment (`scripts/mcp-venv.sh`).
    McpSdk,
    /// Docker 26.1 (`scripts/fetch-current-docker.sh`).
    Docker26,
}

impl Tool {
    /// The programs looked up on `PATH` (none for what a script makes).
    pub fn programs(self) -> &'static [&'static str] {
        match self {
            Tool::Sshd => &["sshd"],
            Tool::SshClient => &["ssh", "ssh-keygen"],
            Tool::Podman => &["podman"],
            Tool::Graphviz => &["dot"],
            Tool::Openssl => &["openssl"],
            Tool::Iproute2 => &["ip"],
            Tool::McpSdk => &[],
            Tool::Docker26 => &[],
        }
    }

    /// The tool as the reason names it, with how to get it.
    pub fn reason(self) -> &'static str {
        match self {
            Tool::Sshd => "needs sshd: apt-get install openssh-server",
            Tool::SshClient => "needs ssh and ssh-keygen: apt-get install openssh-client",
            Tool::Podman => "needs Podman (podman): apt-get install podman",
            Tool::Graphviz => "needs Graphviz (dot): apt-get install graphviz",
            Tool::Openssl => "needs openssl: apt-get install openssl",
            Tool::Iproute2 => "needs ip: apt-get install iproute2",
            Tool::McpSdk => "needs the MCP Python SDK: bash scripts/mcp-venv.sh",
            Tool::Docker26 => "needs Docker 26.1: bash scripts/fetch-current-docker.sh",
        }
    }
}

/// The unwind payload of a test stopped for want of a tool: the runner
/// reports it as ignored with this reason. Raised with `resume_unwind`
/// (no panic message, no backtrace).
#[derive(Debug)]
pub struct MissingTool(pub String);

/// Whether CI asked that a missing tool fail the test instead.
fn required() -> bool {
    std::env::var_os("SANDBOXCTL_TEST_REQUIRE_TOOLS").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Stops the calling test for want of `tool`: ignored with its reason (and
/// `detail`, what failed, when given), or a failure under
/// `SANDBOXCTL_TEST_REQUIRE_TOOLS`.
pub fn missing(tool: Tool, detail: Option<&str>) -> ! {
    let reason = match detail {
        Some(d) => format!("{} ({})", tool.reason(), one_line(d)),
        None => tool.reason().to_string(),
    };
    if required() {
        super::harness::fail(&format!(
            "SANDBOXCTL_TEST_REQUIRE_TOOLS is set and this test {reason}"
        ));
    }
    std::panic::resume_unwind(Box::new(MissingTool(reason)))
}

/// The gate: the path of `tool`'s first program on `PATH` (every program
/// is checked), else the test stops as [`missing`] says.
pub fn need(tool: Tool) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut found = None;
    for program in tool.programs() {
        match find_on(&path, program) {
            Some(p) => {
                found.get_or_insert(p);
            }
            None => missing(tool, None),
        }
    }
    found.unwrap_or_else(|| panic!("{tool:?} is made by a script, not looked up on PATH"))
}

/// `program` in the first folder of the `PATH`-like `path` that holds it as
/// an executable file.
pub fn find_on(path: &std::ffi::OsStr, program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The last non-empty line of a tool's output, for a reason on one line.
fn one_line(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("no output");
    line.chars().take(200).collect()
}

crate::trial!(a_program_is_found_only_where_path_has_it);
/// The lookup every gate uses: a program in a folder on the path is found,
/// one that is not (or is not executable) is not.
fn a_program_is_found_only_where_path_has_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let bin = dir.path().join("bin");
    let other = dir.path().join("other");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    let tool = bin.join("dot");
    std::fs::write(&tool, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(other.join("podman"), "not executable").unwrap();
    let path = std::env::join_paths([&other, &bin]).unwrap();
    assert_eq!(find_on(&path, "dot"), Some(tool));
    assert_eq!(find_on(&path, "podman"), None);
    assert_eq!(find_on(&path, "sshd"), None);
    assert_eq!(
        find_on(&std::env::join_paths([&other]).unwrap(), "dot"),
        None
    );
}

crate::trial!(every_tool_is_reached_through_its_gate);
/// No test starts a tool's program except through this module's gate: a
/// `Command::new("podman")` (or `"dot"`, `"openssl"`, `"/usr/sbin/sshd"`,
/// `"ssh-keygen"`) elsewhere in `tests/` would fail where the tool is
/// missing instead of being ignored.
fn every_tool_is_reached_through_its_gate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let banned = [
        "Command::new(\"podman\")",
        "Command::new(\"dot\")",
        "Command::new(\"openssl\")",
        "Command::new(\"sshd\")",
        "Command::new(\"/usr/sbin/sshd\")",
        "Command::new(\"ssh-keygen\")",
    ];
    let mut found = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("tests/ is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("tools.rs") {
                let text = std::fs::read_to_string(&path).expect("a test source");
                for (i, line) in text.lines().enumerate() {
                    if banned.iter().any(|b| line.contains(b)) {
                        found.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "start these through support::tools::need:\n  {}",
        found.join("\n  ")
    );
}
