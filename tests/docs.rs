//! The docs against the tool: what the README, `docs/` and the agent
//! plugin's command prompt quote must be what sandboxctl prints and what the
//! code holds (decision 27).
//!
//! - The prompt (`integrations/agent-plugin/commands/sandbox-destroy.md`)
//!   names report sections in double quotes; each must be a heading of a
//!   failing `destroy`'s output, rendered through the one run path on the
//!   in-memory engine.
//! - Every heading line of a human example in the README and `docs/` (a
//!   line of an unlabelled code block that is only `Words:`) must be one a
//!   view prints ([`corpus`]).
//! - An example that shows an exit status takes it from the command, never
//!   from the last command of a pipe ([`exit_statuses_are_the_command_s`]).
//! - Every count of the honesty matrix and of the test corpora the docs give
//!   is the code's ([`COUNTS`]); where `plan` is said to change nothing, its
//!   memo is named; and the README's tour runs as written
//!   ([`the_readme_tour_runs_as_written`]).
//!
//! `SANDBOXCTL_UPDATE_DOCS=1 cargo test --test sandboxctl docs::` writes
//! the counts and the tour's shown output again from what the code says and
//! does; the checks then pass, and `git diff` shows what changed.
//!
//! Must not write a file but under `SANDBOXCTL_UPDATE_DOCS=1` (then only
//! the pages it checks), nor touch an engine object the tour did not make
//! (the tour runs on the harness's second dockerd, in a scope value of its
//! own, and removes what carries it).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use clap::Parser;
use sandboxctl::engine::memory::{FaultAction, MemoryEngine, Op, World};
use sandboxctl::engine::{Engine, EngineError, ErrorKind};
use sandboxctl::model::Kind;
use sandboxctl::run::{run_on, Sink};
use tokio_util::sync::CancellationToken;

/// The repository's root.
pub const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// The plugin's command prompt.
const PROMPT: &str = "integrations/agent-plugin/commands/sandbox-destroy.md";

/// True when the docs are to be written again from the code
/// (`SANDBOXCTL_UPDATE_DOCS=1`).
pub fn updating() -> bool {
    std::env::var_os("SANDBOXCTL_UPDATE_DOCS").is_some_and(|v| v == "1")
}

/// The README, every page of `docs/` (not the decision records: they say
/// what was true when they were written) and the plugin's pages, relative
/// to the root, sorted.
pub fn pages() -> Vec<String> {
    let mut pages = vec![
        "README.md".to_string(),
        "integrations/agent-plugin/README.md".to_string(),
        PROMPT.to_string(),
    ];
    let docs = std::fs::read_dir(Path::new(ROOT).join("docs")).expect("read docs/");
    for entry in docs {
        let name = entry.expect("docs/ entry").file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".md") {
            pages.push(format!("docs/{name}"));
        }
    }
    pages.sort();
    pages
}

pub fn read(page: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(page)).unwrap_or_else(|e| panic!("{page}: {e}"))
}

/// A fenced code block of a page: its language (empty for none), the line
/// its first line of content is on (1-based), and its lines.
pub struct Block {
    pub lang: String,
    pub line: usize,
    pub lines: Vec<String>,
}

/// The fenced code blocks of `text`, in order.
pub fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (fence, open.take()) {
            (Some(lang), None) => {
                open = Some(Block {
                    lang: lang.trim().to_string(),
                    line: i + 2,
                    lines: Vec::new(),
                })
            }
            (Some(_), Some(block)) => out.push(block),
            (None, Some(mut block)) => {
                block.lines.push(line.to_string());
                open = Some(block);
            }
            (None, None) => {}
        }
    }
    out
}

// ----- the views, rendered in memory ---------------------------------------

/// Text written by a run.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<String>>);

impl Sink for Captured {
    fn out(&mut self, text: &str) {
        self.0.lock().unwrap().push_str(text);
    }
    fn err(&mut self, text: &str) {
        self.0.lock().unwrap().push_str(text);
    }
}

/// The world of the views' runs: box `doomed` (a container, its volume
/// and its network; its network also holds an unlabelled container, so it
/// is blocked; and a volume no container uses), a declared box `kept`, a
/// leaked volume and a retained image.
const WORLD: &str = r#"
[[container]]
id = "d00d000000000000000000000000000000000000000000000000000000000001"
name = "sbx-doomed"
state = "running"
labels = { "ca.sandbox" = "1", "ca.sandbox.id" = "doomed" }
mounts = ["sbx-doomed"]
networks = ["d00d0000000000000000000000000000000000000000000000000000000000a1"]

[[container]]
id = "4ee9000000000000000000000000000000000000000000000000000000000002"
name = "sbx-kept"
state = "running"
labels = { "ca.sandbox" = "1", "ca.sandbox.id" = "kept" }

[[container]]
id = "b0b0000000000000000000000000000000000000000000000000000000000003"
name = "someones-proxy"
state = "running"
labels = { "app" = "proxy" }
networks = ["d00d0000000000000000000000000000000000000000000000000000000000a1"]

[[volume]]
name = "sbx-doomed"
labels = { "ca.sandbox" = "1", "ca.sandbox.id" = "doomed" }

[[volume]]
name = "sbx-doomed-cache"
labels = { "ca.sandbox" = "1", "ca.sandbox.id" = "doomed" }

[[volume]]
name = "scratch-orphan"
labels = { "ca.sandbox" = "1" }

[[network]]
id = "d00d0000000000000000000000000000000000000000000000000000000000a1"
name = "sbx-doomed-net"
labels = { "ca.sandbox" = "1", "ca.sandbox.id" = "doomed" }

[[image]]
id = "sha256:ca5b000000000000000000000000000000000000000000000000000000000004"
tags = ["ca-sbx:docs-sleep"]
"#;

/// Runs `sandboxctl ARGS` (human output) through `run::run_on` on one
/// in-memory engine per name in `engines` (none: one engine, no
/// `[[engine]]`), box `doomed`'s container failing its removal on the first
/// engine; returns the exit status and what it printed (stdout, then
/// stderr, as a terminal shows both).
async fn render(engines: &[&str], args: &[&str]) -> (sandboxctl::cli::exit::Exit, String) {
    render_with(engines, args, false).await
}

/// [`render`], the first engine's volume listing failing too when
/// `unlisted` (a failure that names no object: said under `Failures:`).
async fn render_with(
    engines: &[&str],
    args: &[&str],
    unlisted: bool,
) -> (sandboxctl::cli::exit::Exit, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut state = "[[box]]\nid = \"kept\"\n".to_string();
    for name in engines {
        state.push_str(&format!("\n[[engine]]\nname = \"{name}\"\n"));
    }
    let file = dir.path().join("state.toml");
    std::fs::write(&file, state).expect("write state file");
    let world: World = toml::from_str(WORLD).expect("the views' world");
    let names: Vec<&str> = if engines.is_empty() {
        vec!["default"]
    } else {
        engines.to_vec()
    };
    let built: Vec<Arc<dyn Engine>> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let engine = MemoryEngine::new(world.clone()).named(name);
            if i == 0 {
                let id = "d00d000000000000000000000000000000000000000000000000000000000001";
                let error = EngineError::new(
                    format!("remove container {id}"),
                    ErrorKind::Other {
                        status: Some(500),
                        message: "docs: the removal fails".into(),
                    },
                );
                engine.inject(
                    Op::Remove(Kind::Container),
                    Some(id),
                    FaultAction::Fail(error),
                    usize::MAX,
                );
                if unlisted {
                    let error = EngineError::new(
                        "list volumes",
                        ErrorKind::Other {
                            status: Some(500),
                            message: "docs: the listing fails".into(),
                        },
                    );
                    engine.inject(
                        Op::List(Kind::Volume),
                        None,
                        FaultAction::Fail(error),
                        usize::MAX,
                    );
                }
            }
            Arc::new(engine) as Arc<dyn Engine>
        })
        .collect();
    let file = file.display().to_string();
    let mut argv = vec!["sandboxctl", "--state", &file];
    argv.extend(args);
    let parsed = sandboxctl::cli::Cli::try_parse_from(&argv)
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"))
        .into_args()
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let config = sandboxctl::cli::config::resolve(parsed)
        .unwrap_or_else(|e| panic!("{argv:?}: {e:#}"))
        .with_state_folder(dir.path().join("state-home"))
        .without_memo();
    let mut sink = Captured::default();
    let exit = run_on(&config, built, CancellationToken::new(), &mut sink).await;
    let text = sink.0.lock().unwrap().clone();
    (exit, text)
}

/// The lines of `text` that are only a heading (`Words:`, trimmed).
fn headings(text: &str) -> BTreeSet<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| {
            l.starts_with(|c: char| c.is_ascii_uppercase())
                && l.ends_with(':')
                && l.matches(':').count() == 1
        })
        .map(str::to_string)
        .collect()
}

/// What the views print, as one text: `plan`, a failing `destroy ID`, and
/// a failing `apply` on a fleet of two.
async fn corpus() -> String {
    let mut all = String::new();
    for (engines, args) in [
        (&[][..], &["plan"][..]),
        (&[], &["destroy", "doomed"]),
        (&[], &["apply"]),
        (&["a", "b"], &["apply"]),
    ] {
        all.push_str(&render(engines, args).await.1);
    }
    all
}

/// The prompt of `/sandbox-destroy` tells the model to quote report sections
/// by their headings: each heading it names in double quotes is a heading of
/// what a failing `destroy ID` prints (the prompt runs `destroy` through
/// `bin/sandbox-destroy` and shows stdout and stderr): one whose removal
/// failed (the object is named under `Left behind:`, its reason the
/// failure), or one whose listing failed too (a failure that names no
/// object: `Failures:`). A report names each object once (decision 24).
trial!(the_plugin_prompt_names_only_headings_a_failing_destroy_prints);
async fn the_plugin_prompt_names_only_headings_a_failing_destroy_prints() {
    let mut printed = String::new();
    for unlisted in [false, true] {
        let (exit, text) = render_with(&[], &["destroy", "doomed"], unlisted).await;
        assert_ne!(
            exit,
            sandboxctl::cli::exit::Exit::Success,
            "the destroy must fail:\n{text}"
        );
        printed.push_str(&text);
    }
    assert!(
        headings(&printed).contains("Failures:"),
        "a failed listing is said under Failures:\n{printed}"
    );
    let printed_headings = headings(&printed);
    let prompt = read(PROMPT);
    // What stands between a pair of double quotes and ends with `:`.
    let named: Vec<String> = prompt
        .lines()
        .filter(|l| !l.starts_with('!'))
        .flat_map(|l| l.split('"').skip(1).step_by(2).map(str::to_string))
        .filter(|q| q.ends_with(':') && !q.contains('$'))
        .collect();
    for expected in [
        "Removed:",
        "Left behind:",
        "Retain (images are never removed):",
    ] {
        assert!(
            named.iter().any(|n| n == expected),
            "{PROMPT} no longer names {expected:?}: this test reads the headings it names in double quotes"
        );
    }
    let missing: Vec<&String> = named
        .iter()
        .filter(|n| !printed_headings.contains(*n))
        .collect();
    assert!(
        missing.is_empty(),
        "{PROMPT} names {missing:?}, which a failing destroy does not print; its headings: {printed_headings:?}\n{printed}"
    );
}

/// Every heading line of a human example in the README and `docs/` is one
/// that a view prints.
trial!(the_docs_quote_only_headings_the_views_print);
async fn the_docs_quote_only_headings_the_views_print() {
    let printed = headings(&corpus().await);
    let mut wrong = Vec::new();
    let mut seen = 0;
    for page in pages() {
        for block in blocks(&read(&page)).iter().filter(|b| b.lang.is_empty()) {
            for (i, line) in block.lines.iter().enumerate() {
                let h = headings(line);
                if let Some(h) = h.into_iter().next() {
                    seen += 1;
                    if !printed.contains(&h) {
                        wrong.push(format!("{page}:{}: {h:?}", block.line + i));
                    }
                }
            }
        }
    }
    assert!(
        seen > 0,
        "no heading found in any example: the scan is broken"
    );
    assert!(
        wrong.is_empty(),
        "headings no view prints (the views print {printed:?}):\n{}",
        wrong.join("\n")
    );
}

// ----- exit statuses ----------------------------------------------------------

/// A shown command that echoes `$?` after a pipe echoes the status of the
/// pipe's last command, not sandboxctl's: such an example must use
/// `${PIPESTATUS[0]}` or no pipe. Every shell line of every page (a `$ `
/// line of an example, a line of an `sh` block, or a `!` line of a prompt).
trial!(exit_statuses_are_the_command_s);
fn exit_statuses_are_the_command_s() {
    let wrong = pipe_status_lines(&pages());
    assert!(
        wrong.is_empty(),
        "an exit status taken after a pipe (use ${{PIPESTATUS[0]}}, or no pipe):\n{}",
        wrong.join("\n")
    );
}

/// `page:line: text` of each line that reads `$?` after a pipe.
pub fn pipe_status_lines(pages: &[String]) -> Vec<String> {
    let mut wrong = Vec::new();
    for page in pages {
        for (i, line) in read(page).lines().enumerate() {
            let Some(at) = line.find("$?") else { continue };
            let before = &line[..at];
            // A `|` that is a pipe: not `||`, not in a quoted word.
            let pipe = before
                .char_indices()
                .filter(|&(j, c)| {
                    c == '|'
                        && !before[..j].ends_with('|')
                        && !before[j + 1..].starts_with('|')
                        && before[..j].matches('"').count() % 2 == 0
                        && before[..j].matches('\'').count() % 2 == 0
                })
                .count();
            if pipe > 0 {
                wrong.push(format!("{page}:{}: {line}", i + 1));
            }
        }
    }
    wrong
}

/// The check itself catches the mistake it is for.
trial!(the_pipe_status_check_catches_a_pipe);
fn the_pipe_status_check_catches_a_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("page.md");
    std::fs::write(
        &page,
        "$ a | tail -n 3; echo \"exit $?\"\n$ a || b; echo \"exit $?\"\n$ a | tail; echo \"exit ${PIPESTATUS[0]}\"\n$ a; echo \"exit $?\"\n",
    )
    .unwrap();
    let page = page.display().to_string();
    let wrong = pipe_status_lines(std::slice::from_ref(&page));
    assert_eq!(
        wrong,
        vec![format!("{page}:1: $ a | tail -n 3; echo \"exit $?\"")]
    );
}

// ----- counts -------------------------------------------------------------------

/// Where the docs give a count, as a sentence with a `{fact}` for each
/// number (whitespace matches any whitespace, line ends included): each
/// must be found exactly once on its page, with the numbers [`facts`] gives.
/// A sentence edited so that it is no longer found fails the test: edit it
/// here too.
pub const COUNTS: &[(&str, &str)] = &[
    (
        "README.md",
        "in memory ({memory} cells, {swarm} more on a Swarm manager, and {mcp} through a tool call of the MCP server)",
    ),
    (
        "README.md",
        "against real engines ({real} cells, {real_ssh} of them on one engine over",
    ),
    ("docs/mcp.md", "(`matrix::memory_mcp`, {mcp} cells)"),
    (
        "docs/swarm.md",
        "and the faults of the Swarm calls it makes, {swarm} cells)",
    ),
    ("docs/testing.md", "`tests/bad_states/` ({bad_states} files,"),
    ("docs/testing.md", "`state_files::*` ({bad_states} bad files)"),
    ("docs/testing.md", "`degraded::*` ({degraded_tests} tests,"),
    (
        "docs/testing.md",
        "`archive_crash`, on a dockerd of its own, {crash_kills} trials that each SIGKILL `apply --archive` of {crash_boxes} boxes",
    ),
    ("docs/testing.md", "`exec::memo::tests::*` ({memo_tests})"),
    ("docs/testing.md", "(proptest, {proptest_cases} cases each)"),
    ("docs/testing.md", "- **commands** ({commands}):"),
    ("docs/testing.md", "- **engine shapes** ({shapes}):"),
    ("docs/testing.md", "- **faults** ({faults}, on the faulty engine):"),
    (
        "docs/testing.md",
        "the converging commands all but the create ({f_apply}), but",
    ),
    ("docs/testing.md", "`lease --release` {f_release} (the same"),
    ("docs/testing.md", "`hold` {f_hold} (unreachable, the create, the removal"),
    ("docs/testing.md", "`restore` {f_restore} (unreachable, the volume's create"),
    ("docs/testing.md", "`apply --archive` {f_apply_archive} (the helper refused"),
    ("docs/testing.md", "`inventory` inspects nothing, so {f_inventory})"),
    (
        "docs/testing.md",
        "`destroy nosuchbox` {f_destroy_unknown} (unreachable, the four listings,",
    ),
    ("docs/testing.md", "removes nothing); `lease` {f_lease} ("),
    (
        "docs/testing.md",
        "All {memory} cells ({removing_commands} × {shapes} × {f_apply} + {shapes} × {f_destroy_unknown} converging, {shapes} × ({f_lease} + {f_release} + {f_hold}) lease, {shapes} × ({f_restore} + {f_apply_archive}) archive, {shapes} × ({f_plan} + {f_inventory} + {f_graph} + {f_explain}) read-only)",
    ),
    (
        "docs/testing.md",
        "only (no real cell yet). {real} of the others run against the real engine (`matrix::real_*`, the list is `REAL_SLICE`): {real_converging} converging cells,",
    ),
    (
        "docs/testing.md",
        "fault at least once, {real_lease} lease cells (`matrix::real_lease_*`",
    ),
    (
        "docs/testing.md",
        "and {real_ssh} cells of a shape that exists only for real engines",
    ),
    (
        "docs/testing.md",
        "`support::mcp::exchange`), {mcp} cells ({shapes} × ({f_destroy_id} + {f_destroy_unknown} + {f_prune} + {f_lease} + {f_release} + {f_plan} + {f_inventory} + {f_explain})).",
    ),
    (
        "docs/testing.md",
        "every converging command under its {f_apply} faults and the two of the Swarm calls (listing services fails, the service's removal fails), and `destroy nosuchbox` under its {f_destroy_unknown} and the listing of services, {removing_commands} × {swarm_faults} + {swarm_unknown} = {swarm} cells,",
    ),
    (
        "docs/testing.md",
        "`matrix::memory_*` ({converging} cells), `matrix::real_*` ({real_converging} converging cells, and {real_ssh_converging} more over `ssh://user@host:PORT`)",
    ),
    ("docs/testing.md", "`matrix::memory_mcp` ({mcp} cells)"),
    ("docs/testing.md", "`matrix::memory_hold` ({lease_cells} cells)"),
    (
        "docs/testing.md",
        "`matrix::real_hold_*` ({real_lease} cells against real engines)",
    ),
    ("docs/testing.md", "`matrix::memory_restore` ({restore_cells} cells)"),
    (
        "docs/testing.md",
        "`matrix::memory_apply_archive` ({apply_archive_cells} cells)",
    ),
    ("docs/testing.md", "`matrix::real_*_ssh_*` ({real_ssh} cells)"),
];

/// Counts the docs may give without a check: what was measured or found at
/// one time (each says when), as `(page, words around the number)`.
const HISTORY: &[(&str, &str)] = &[
    ("docs/testing.md", "the 14 `explain` cells"),
    ("docs/testing.md", "(10 `explain` cells"),
    ("docs/testing.md", "2 `graph` cells"),
    ("docs/testing.md", "19 of its 21 cells"),
];

/// The numbers [`COUNTS`] names, from the code: the honesty matrix's axes
/// (`tests/matrix.rs`) and the test corpora.
pub fn facts() -> std::collections::BTreeMap<&'static str, usize> {
    use crate::matrix::{Cell, Command, Fault, Shape, REAL_SLICE};
    let cells = |commands: &[Command]| {
        Cell::all()
            .into_iter()
            .filter(|c| commands.contains(&c.command))
            .count()
    };
    let real = |commands: &[Command], shapes: &[Shape]| {
        REAL_SLICE
            .iter()
            .filter(|c| commands.contains(&c.command) && shapes.contains(&c.shape))
            .count()
    };
    let faults: BTreeSet<Fault> = Command::ALL
        .iter()
        .flat_map(|c| c.faults().iter().copied())
        .collect();
    let mcp = Cell::all()
        .into_iter()
        .filter(|c| c.command.tool().is_some())
        .count();
    let swarm = Command::CONVERGING
        .iter()
        .map(|&c| Cell::swarm(c).len())
        .sum();
    let f = |c: Command| c.faults().len();
    let root = Path::new(ROOT);
    let bad_states = std::fs::read_dir(root.join("tests/bad_states"))
        .expect("tests/bad_states")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".toml"))
        })
        .count();
    let lines_starting = |file: &str, starts: &[&str]| {
        read(file)
            .lines()
            .filter(|l| starts.iter().any(|s| l.trim_start().starts_with(s)))
            .count()
    };
    let cases = read("tests/properties.rs")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("cases: "))
        .map(|n| n.trim_end_matches(',').parse::<usize>().expect("cases: N"))
        .collect::<BTreeSet<_>>();
    assert_eq!(cases.len(), 1, "tests/properties.rs: one number of cases");
    let all = [
        &Command::CONVERGING[..],
        &Command::LEASES,
        &Command::ARCHIVE,
        &Command::READ_ONLY,
    ]
    .concat();
    let ssh = [Shape::SshPort];
    [
        ("memory", Cell::all().len()),
        ("converging", cells(&Command::CONVERGING)),
        ("lease_cells", cells(&Command::LEASES)),
        ("restore_cells", cells(&[Command::Restore])),
        ("apply_archive_cells", cells(&[Command::ApplyArchive])),
        ("swarm", swarm),
        ("mcp", mcp),
        ("real", REAL_SLICE.len()),
        ("real_converging", real(&Command::CONVERGING, &Shape::ALL)),
        ("real_lease", real(&Command::LEASES, &Shape::ALL)),
        ("real_ssh", real(&all, &ssh)),
        ("real_ssh_converging", real(&Command::CONVERGING, &ssh)),
        ("commands", Command::ALL.len()),
        (
            "removing_commands",
            Command::CONVERGING
                .iter()
                .filter(|c| c.removes_box())
                .count(),
        ),
        ("swarm_unknown", Cell::swarm(Command::DestroyUnknown).len()),
        ("shapes", Shape::ALL.len()),
        ("faults", faults.len()),
        ("swarm_faults", f(Command::Apply) + Fault::SWARM.len()),
        ("f_apply", f(Command::Apply)),
        ("f_destroy_id", f(Command::DestroyId)),
        ("f_prune", f(Command::Prune)),
        ("f_destroy_unknown", f(Command::DestroyUnknown)),
        ("f_lease", f(Command::Lease)),
        ("f_release", f(Command::Release)),
        ("f_hold", f(Command::Hold)),
        ("f_restore", f(Command::Restore)),
        ("f_apply_archive", f(Command::ApplyArchive)),
        ("f_plan", f(Command::Plan)),
        ("f_inventory", f(Command::Inventory)),
        ("f_graph", f(Command::Graph)),
        ("f_explain", f(Command::Explain)),
        ("bad_states", bad_states),
        (
            "degraded_tests",
            lines_starting("tests/degraded.rs", &["trial!("]),
        ),
        (
            "memo_tests",
            lines_starting("src/exec/memo.rs", &["#[test]", "#[tokio::test"]),
        ),
        ("proptest_cases", cases.into_iter().next().unwrap()),
        ("crash_kills", constant("tests/archive_crash.rs", "KILLS")),
        ("crash_boxes", constant("tests/archive_crash.rs", "BOXES")),
    ]
    .into_iter()
    .collect()
}

/// The value of `const NAME: usize = N;` in `file`.
fn constant(file: &str, name: &str) -> usize {
    let line = format!("const {name}: usize = ");
    read(file)
        .lines()
        .find_map(|l| l.trim().strip_prefix(line.as_str()))
        .and_then(|v| v.trim_end_matches(';').parse().ok())
        .unwrap_or_else(|| panic!("{file}: no {line}N;"))
}

/// `text` with every run of whitespace one space, and for each byte of it
/// the byte of `text` it stands for.
fn squeeze(text: &str) -> (String, Vec<usize>) {
    let mut out = String::new();
    let mut at = Vec::new();
    let mut space = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            if !space {
                out.push(' ');
                at.push(i);
            }
            space = true;
        } else {
            space = false;
            out.push(c);
            at.extend(std::iter::repeat_n(i, c.len_utf8()));
        }
    }
    at.push(text.len());
    (out, at)
}

/// One piece of a [`COUNTS`] sentence.
enum Piece<'a> {
    Text(String),
    Fact(&'a str),
}

fn pieces(sentence: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = sentence;
    while let Some(open) = rest.find('{') {
        let close = open + rest[open..].find('}').expect("a `}` after each `{`");
        out.push(Piece::Text(squeeze(&rest[..open]).0));
        out.push(Piece::Fact(&rest[open + 1..close]));
        rest = &rest[close + 1..];
    }
    out.push(Piece::Text(squeeze(rest).0));
    out
}

/// Each place `sentence` stands in `text`: for each of its facts, the fact
/// and the byte range of its number in `text`.
fn find(text: &str, sentence: &str) -> Vec<Vec<(String, std::ops::Range<usize>)>> {
    let (flat, at) = squeeze(text);
    let pieces = pieces(sentence);
    let mut found = Vec::new();
    let Some(Piece::Text(first)) = pieces.first() else {
        unreachable!()
    };
    assert!(
        !first.is_empty(),
        "{sentence:?}: begin with words, not a number"
    );
    let mut from = 0;
    while let Some(start) = flat[from..].find(first.as_str()).map(|s| s + from) {
        from = start + 1;
        let mut pos = start;
        let mut numbers = Vec::new();
        let ok = pieces.iter().all(|piece| match piece {
            Piece::Text(t) => {
                let hit = flat[pos..].starts_with(t.as_str());
                pos += if hit { t.len() } else { 0 };
                hit
            }
            Piece::Fact(name) => {
                let digits = flat[pos..].bytes().take_while(u8::is_ascii_digit).count();
                if digits == 0 {
                    return false;
                }
                numbers.push((name.to_string(), at[pos]..at[pos + digits - 1] + 1));
                pos += digits;
                true
            }
        });
        if ok {
            found.push(numbers);
        }
    }
    found
}

/// What the docs count that the sweep of [`cell_counts`] looks for.
const COUNTED: [&str; 3] = ["cells", "tests", "cases"];

/// The numbers of `text` followed by a word of [`COUNTED`] (one word
/// between at most):
/// each must stand in a [`COUNTS`] sentence or in [`HISTORY`].
fn cell_counts(text: &str) -> Vec<std::ops::Range<usize>> {
    let (flat, at) = squeeze(text);
    let bytes = flat.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric()) {
            let end = i + bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
            let words: Vec<&str> = flat[end..].split(' ').skip(1).take(2).collect();
            let cells = |w: &&str| {
                let w = w.trim_end_matches([',', ')', ';', '.', ':']);
                COUNTED.contains(&w)
            };
            if flat[end..].starts_with(' ') && words.iter().any(cells) {
                out.push(at[i]..at[end - 1] + 1);
            }
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// Every count [`COUNTS`] names is the code's; every count of cells the docs
/// give is in [`COUNTS`] (or, said of a past run, in [`HISTORY`]). With
/// `SANDBOXCTL_UPDATE_DOCS=1` the numbers are written again.
trial!(every_count_the_docs_give_is_the_code_s);
fn every_count_the_docs_give_is_the_code_s() {
    let facts = facts();
    let mut problems = Vec::new();
    for page in pages() {
        let mut text = read(&page);
        let mut covered = Vec::new();
        let mut edits = Vec::new();
        for (_, sentence) in COUNTS.iter().filter(|(p, _)| *p == page) {
            let found = find(&text, sentence);
            if found.len() != 1 {
                problems.push(format!(
                    "{page}: {} places say {sentence:?} (one must): edit the sentence in tests/docs.rs's COUNTS too",
                    found.len()
                ));
                continue;
            }
            for (name, range) in found.into_iter().next().unwrap() {
                let want = *facts
                    .get(name.as_str())
                    .unwrap_or_else(|| panic!("{sentence:?}: no fact {name}"));
                let said = &text[range.clone()];
                if said != want.to_string() {
                    let line = text[..range.start].lines().count().max(1);
                    problems.push(format!(
                        "{page}:{line}: says {said} for {name}, the code has {want} (in {sentence:?})"
                    ));
                    edits.push((range.clone(), want.to_string()));
                }
                covered.push(range);
            }
        }
        for (_, words) in HISTORY.iter().filter(|(p, _)| *p == page) {
            if let Some(at) = text.find(words) {
                covered.push(at..at + words.len());
            }
        }
        for range in cell_counts(&text) {
            if !covered
                .iter()
                .any(|c| c.start <= range.start && range.end <= c.end)
            {
                let line = text[..range.start].lines().count().max(1);
                problems.push(format!(
                    "{page}:{line}: a count of cells ({}) no test checks: add its sentence to tests/docs.rs's COUNTS",
                    &text[range]
                ));
            }
        }
        if updating() && !edits.is_empty() {
            edits.sort_by_key(|(r, _)| std::cmp::Reverse(r.start));
            for (range, number) in edits {
                text.replace_range(range, &number);
            }
            std::fs::write(Path::new(ROOT).join(&page), text).expect("write page");
        }
    }
    if updating() {
        problems.retain(|p| !p.contains(" says "));
    }
    assert!(
        problems.is_empty(),
        "the docs' counts (SANDBOXCTL_UPDATE_DOCS=1 writes the numbers again):\n{}",
        problems.join("\n")
    );
}

/// The sentence matcher finds a sentence across a line break and only there.
trial!(the_count_matcher_reads_sentences_across_lines);
fn the_count_matcher_reads_sentences_across_lines() {
    let text = "a (`x` 12 cells,\n  and 3 more) b 12 cells";
    let found = find(text, "(`x` {n} cells, and {m} more)");
    assert_eq!(found.len(), 1);
    let numbers: Vec<&str> = found[0].iter().map(|(_, r)| &text[r.clone()]).collect();
    assert_eq!(numbers, ["12", "3"]);
    assert!(find(text, "(`x` {n} tests").is_empty());
    let counts: Vec<&str> = cell_counts(text).into_iter().map(|r| &text[r]).collect();
    assert_eq!(counts, ["12", "12"]);
}

// ----- what `plan` writes -------------------------------------------------------

/// The units of a page's text: a table row, a list item, or a paragraph
/// (blank lines, fences, headings, rows and items end one); each as its
/// first line's number and its text.
fn units(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut open = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let starts = t.starts_with('|')
            || t.starts_with("- ")
            || t.starts_with("* ")
            || t.starts_with('#')
            || t.starts_with("```")
            || t.chars().next().is_some_and(|c| c.is_ascii_digit()) && t.contains(". ");
        if t.is_empty() {
            open = false;
            continue;
        }
        if starts || !open {
            out.push((i + 1, line.to_string()));
            // A row, a heading or a fence is a unit of one line.
            open = !(t.starts_with('|') || t.starts_with('#') || t.starts_with("```"));
        } else {
            let last = out.last_mut().expect("an open unit");
            last.1.push('\n');
            last.1.push_str(line);
        }
    }
    out
}

/// Where the docs say that `plan` changes nothing, they say what it does
/// write: the memo of inspections (`joins.json`, decision 11).
trial!(where_plan_is_said_to_change_nothing_the_memo_is_named);
fn where_plan_is_said_to_change_nothing_the_memo_is_named() {
    let mut said = 0;
    let mut wrong = Vec::new();
    for page in pages() {
        for (line, unit) in units(&read(&page)) {
            let lower = unit.to_lowercase();
            let of_plan = ["`plan`", "`plan ", "plan ", "plan\n", "plan`"]
                .iter()
                .any(|p| lower.contains(p));
            if of_plan && lower.contains("changes nothing") {
                said += 1;
                if !(lower.contains("memo") || lower.contains("joins.json")) {
                    wrong.push(format!("{page}:{line}: {unit}"));
                }
            }
        }
    }
    assert!(said >= 3, "the README and report.md say plan changes nothing; found {said} places: the scan is broken");
    assert!(
        wrong.is_empty(),
        "says plan changes nothing without naming the memo it writes:\n{}",
        wrong.join("\n")
    );
}

// ----- the README's tour ----------------------------------------------------------

/// The README's tour: its scene (the first `sh` block of "A short tour"),
/// then each command it shows (a `$ ` line of an unlabelled block; not
/// `watch`, which runs until stopped and whose lines carry their times),
/// with the output shown under it.
struct Tour {
    scene: String,
    commands: Vec<Shown>,
}

/// A command the tour shows: its line in the README, the command, and the
/// output shown under it.
struct Shown {
    line: usize,
    command: String,
    output: Vec<String>,
}

fn tour(readme: &str) -> Tour {
    let start = readme
        .find("\n## A short tour")
        .expect("README: ## A short tour");
    let end = readme[start + 1..]
        .find("\n## ")
        .map_or(readme.len(), |e| start + 1 + e);
    let first = readme[..start].lines().count() + 1;
    let section = &readme[start..end];
    let blocks = blocks(section);
    let scene = blocks
        .iter()
        .find(|b| b.lang == "sh")
        .expect("the tour's scene: an sh block")
        .lines
        .join("\n");
    let mut commands = Vec::new();
    for block in blocks.iter().filter(|b| b.lang.is_empty()) {
        for (i, line) in block.lines.iter().enumerate() {
            if let Some(command) = line.strip_prefix("$ ") {
                commands.push(Shown {
                    line: first + block.line - 1 + i,
                    command: command.to_string(),
                    output: Vec::new(),
                });
            } else if let Some(shown) = commands.last_mut() {
                shown.output.push(line.clone());
            }
        }
    }
    commands.retain(|c| !c.command.starts_with("sandboxctl watch"));
    Tour { scene, commands }
}

/// Runs `script` with bash in `dir`, with `env`; its status and what it
/// printed (stdout and stderr in the order printed: one pipe).
fn bash(dir: &Path, env: &[(String, String)], script: &str) -> (i32, String) {
    let mut command = std::process::Command::new("bash");
    command
        .args(["-c", &format!("exec 2>&1\n{script}")])
        .current_dir(dir);
    // Nothing of sandboxctl's own environment but what `env` says.
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("SANDBOXCTL_") {
            command.env_remove(key);
        }
    }
    let out = command
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("run bash");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// What the tour shows of an output, made from what a run printed on the
/// test's engine: the test's own scope value, the engine's address and how
/// it was chosen as the README's reader has them (`readme`, the default
/// socket); of the retained images only the tour's own (a fresh engine has
/// no other; the test's engine may), their count in the summary lines with
/// them.
fn as_shown(printed: &str, subs: &[(String, String)]) -> Vec<String> {
    let mut text = printed.to_string();
    for (from, to) in subs {
        text = text.replace(from.as_str(), to);
    }
    let mut images = 0;
    let mut lines: Vec<String> = Vec::new();
    for line in text.lines() {
        let cells: Vec<&str> = line
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        if cells.first() == Some(&"image") {
            if line.contains(TOUR_IMAGE) {
                images += 1;
                let indent = &line[..line.len() - line.trim_start().len()];
                lines.push(format!("{indent}{}", cells.join("  ")));
            }
            continue;
        }
        lines.push(line.to_string());
    }
    lines
        .into_iter()
        .map(|line| with_image_count(&line, Some(images)))
        .collect()
}

/// The tour's image.
const TOUR_IMAGE: &str = "ca-sbx:sandboxctl-test-sleep";

/// `line` with the number in `retain N image(s)` / `retained N image(s)`
/// made `count` (`None`: `<n>`).
fn with_image_count(line: &str, count: Option<usize>) -> String {
    let mut out = line.to_string();
    for word in ["retain ", "retained "] {
        let Some(at) = out.find(word) else { continue };
        let from = at + word.len();
        let digits = out[from..].bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || !out[from + digits..].starts_with(" image") {
            continue;
        }
        let n = count.map_or("<n>".to_string(), |c| c.to_string());
        let unit = if count == Some(1) { "image" } else { "images" };
        let rest = out[from + digits..]
            .trim_start_matches(" images")
            .trim_start_matches(" image")
            .to_string();
        out = format!("{}{n} {unit}{rest}", &out[..from]);
    }
    out
}

/// How a shown and a printed output are compared: object IDs (12 or 64 hex
/// digits) as `<id>`, runs of spaces as one (names and IDs set the
/// columns), image rows and their count left out (which images an engine
/// holds is its own), trailing blank lines dropped.
fn comparable(lines: &[String]) -> Vec<String> {
    let mut out: Vec<String> = lines
        .iter()
        .filter(|l| !l.trim_start().starts_with("image "))
        .map(|l| {
            let l = with_image_count(l, None);
            let mut s = String::new();
            let mut word = String::new();
            let flush = |word: &mut String, s: &mut String| {
                let hex = word
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase());
                if hex
                    && (word.len() == 12 || word.len() == 64)
                    && word.bytes().any(|b| b.is_ascii_digit())
                {
                    s.push_str("<id>");
                } else {
                    s.push_str(word);
                }
                word.clear();
            };
            for c in l.chars() {
                if c.is_ascii_alphanumeric() {
                    word.push(c);
                } else {
                    flush(&mut word, &mut s);
                    s.push(c);
                }
            }
            flush(&mut word, &mut s);
            s.split_whitespace().collect::<Vec<_>>().join(" ")
        })
        .collect();
    while out.last().is_some_and(String::is_empty) {
        out.pop();
    }
    out
}

/// Removes what the tour made on the test's engine (everything labeled with
/// the test's own scope value, and the image the script check made), also
/// when the test fails.
struct TourCleanup {
    env: Vec<(String, String)>,
    dir: std::path::PathBuf,
    owner: String,
    image: String,
}

impl Drop for TourCleanup {
    fn drop(&mut self) {
        let label = format!("label=ca.sandbox.owner={}", self.owner);
        let script = format!(
            "docker ps -aq --filter {label} | xargs -r docker rm -f >/dev/null\n\
             docker volume ls -q --filter {label} | xargs -r docker volume rm >/dev/null\n\
             docker network ls -q --filter {label} | xargs -r docker network rm >/dev/null\n\
             docker image rm {} >/dev/null 2>&1; true",
            self.image
        );
        let (status, out) = bash(&self.dir, &self.env, &script);
        if status != 0 {
            eprintln!("docs: the tour's cleanup: {out}");
        }
    }
}

/// The README's tour runs as written, on a dockerd of the harness's own
/// (the shared second dockerd: the tour's names are fixed, and its scope
/// value is made the test's own): `scripts/tour-image.sh` makes an image a
/// container runs, the scene's commands all succeed, and each command the
/// tour shows prints what it shows (compared as [`comparable`] says) and
/// exits as it shows. `SANDBOXCTL_UPDATE_DOCS=1` writes the shown output
/// again from this run ([`as_shown`]).
trial!(the_readme_tour_runs_as_written);
async fn the_readme_tour_runs_as_written() {
    use crate::support::cli::BIN;
    let engine = crate::support::engines::SecondDockerd::new().shared().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    for link in ["scripts", "tests"] {
        std::os::unix::fs::symlink(Path::new(ROOT).join(link), root.join(link)).unwrap();
    }
    std::fs::create_dir(root.join("bin")).unwrap();
    std::os::unix::fs::symlink(BIN, root.join("bin/sandboxctl")).unwrap();
    let unique = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    let owner = format!("readme-{unique}");
    let host = engine.socket_host();
    let path = format!(
        "{}:{}",
        root.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env: Vec<(String, String)> = [
        ("DOCKER_HOST", host.as_str()),
        ("PATH", &path),
        (
            "XDG_STATE_HOME",
            &root.join("state-home").display().to_string(),
        ),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let check_image = format!("sandboxctl-tour-check:{unique}");
    let _cleanup = TourCleanup {
        env: env.clone(),
        dir: root.to_path_buf(),
        owner: owner.clone(),
        image: check_image.clone(),
    };

    // The script makes an image that runs (under a tag of the test's own:
    // the engine has the tour's image already, which the script keeps).
    let (status, out) = bash(
        root,
        &env,
        &format!("scripts/tour-image.sh {check_image} && docker run --rm {check_image} /sleep 0"),
    );
    assert_eq!(status, 0, "scripts/tour-image.sh {check_image}:\n{out}");

    let readme = read("README.md");
    let tour = tour(&readme);
    assert!(
        tour.commands.len() >= 4,
        "the tour shows plan, explain, apply and validate"
    );
    let scene = tour.scene.replace("readme", &owner);
    let (status, out) = bash(root, &env, &format!("set -e\n{scene}"));
    assert_eq!(status, 0, "the tour's scene fails:\n{scene}\n{out}");

    let subs = [
        (owner.clone(), "readme".to_string()),
        (
            format!("{host} (from DOCKER_HOST)"),
            "unix:///var/run/docker.sock (default socket)".to_string(),
        ),
        (host.clone(), "unix:///var/run/docker.sock".to_string()),
    ];
    let mut wrong = Vec::new();
    let mut shown_again = Vec::new();
    for shown in &tour.commands {
        let (status, printed) = bash(&root.join("tour"), &env, &shown.command);
        if status != 0 {
            wrong.push(format!(
                "README.md:{}: `{}` exits {status}:\n{printed}",
                shown.line, shown.command
            ));
        }
        let printed = as_shown(&printed, &subs);
        if comparable(&printed) != comparable(&shown.output) {
            wrong.push(format!(
                "README.md:{}: `{}` prints\n{}\n-- where the README shows --\n{}",
                shown.line,
                shown.command,
                printed.join("\n"),
                shown.output.join("\n")
            ));
        }
        shown_again.push(printed);
    }
    // Written again only when something differs, then every output of the
    // run (one run's IDs throughout).
    if updating() && !wrong.is_empty() {
        let mut lines: Vec<String> = readme.lines().map(str::to_string).collect();
        for (shown, printed) in tour.commands.iter().zip(shown_again).rev() {
            let from = shown.line; // the line after the `$ ` line, 0-based
            lines.splice(from..from + shown.output.len(), printed);
        }
        let mut text = lines.join("\n");
        text.push('\n');
        std::fs::write(Path::new(ROOT).join("README.md"), text).expect("write README.md");
        eprintln!("docs: README.md's tour written again from this run");
        return;
    }
    assert!(
        wrong.is_empty(),
        "the README's tour (SANDBOXCTL_UPDATE_DOCS=1 writes its output again from a run):\n{}",
        wrong.join("\n\n")
    );
}
