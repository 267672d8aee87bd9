//! Operator tools end to end: `completions`, `man`, a closed stdout, and the
//! GitOps recipes in `examples/ci/` and `.pre-commit-hooks.yaml`.
//!
//! Subcommand and option names are taken from the clap definitions
//! (`Cli::command()`), so a new subcommand is checked without editing these
//! tests. `completions` and `man` run with `DOCKER_HOST` pointing at a socket
//! that does not exist and no state file: they must not need either. The
//! closed-pipe and recipe tests run against the real engine inside a
//! `Sandbox` scope. Needs `bash` and `man` (Debian: man-db, groff-base).

use std::path::PathBuf;

use clap::{CommandFactory, Parser};
use serde_yaml_ng::Value;

use sandboxctl::cli::Cli as Definitions;

use crate::support::cli::{Cli, Output, BIN};
use crate::support::docker::{Remaining, Run, Sandbox};

// ----- helpers -----------------------------------------------------------------

/// Every subcommand a user can type, from the clap definitions (without clap's `help`).
fn subcommands() -> Vec<clap::Command> {
    Definitions::command().get_subcommands().cloned().collect()
}

/// Runs `sandboxctl ARGS` with no engine and no state file; it must succeed
/// with nothing on stderr.
#[track_caller]
fn offline(args: &[&str]) -> Output {
    let out = Cli::new().unreachable_docker().run_with(args);
    out.success();
    assert_eq!(
        out.stderr,
        "",
        "`{}` wrote to stderr\n{}",
        out.command,
        out.dump()
    );
    out
}

/// Runs a bash script (no builder arguments) and returns its output.
fn bash(cli: &Cli, script: &str) -> Output {
    cli.run_bash(script, std::iter::empty::<&str>())
}

/// `"$SANDBOXCTL" "$@"` with stdout on a pipe whose only reader has already
/// exited, so every write fails with EPIPE (no race with a reader that might
/// still be reading). The status is sandboxctl's own.
const INTO_CLOSED_PIPE: &str = r#"
fifo=$(mktemp -u) && mkfifo "$fifo"
( exec 3<"$fifo" ) &     # the reader opens the pipe and exits at once
exec 4>"$fifo"           # blocks until the reader has opened it
wait $!                  # the reader is gone: nobody will ever read
rm -f "$fifo"
"$SANDBOXCTL" "$@" >&4
"#;

/// The repository root (where Cargo.toml is).
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn yaml(relative: &str) -> Value {
    let path = repo().join(relative);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{relative} is not YAML: {e}"))
}

/// The string at `path` (mapping keys, or sequence indexes given as numbers).
fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut at = v;
    for key in path {
        at = match key.parse::<usize>() {
            Ok(i) => &at[i],
            Err(_) => &at[*key],
        };
    }
    at.as_str()
        .unwrap_or_else(|| panic!("{} is not a string: {at:?}", path.join(".")))
}

/// Every string anywhere in a YAML document.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Sequence(items) => items.iter().for_each(|i| strings(i, out)),
        Value::Mapping(map) => map.iter().for_each(|(k, v)| {
            strings(k, out);
            strings(v, out);
        }),
        Value::Tagged(t) => strings(&t.value, out),
        _ => {}
    }
}

/// Every `sandboxctl ...` command line in a recipe: a line (or pre-commit
/// `entry`) that starts with `sandboxctl `, its words up to the first shell
/// operator or redirection.
fn invocations(doc: &Value) -> Vec<Vec<String>> {
    let mut all = Vec::new();
    strings(doc, &mut all);
    all.iter()
        .flat_map(|s| {
            s.lines()
                .map(str::trim)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter(|line| line.starts_with("sandboxctl "))
        .map(|line| {
            line.split_whitespace()
                .take_while(|w| !matches!(*w, "|" | "||" | "&&" | ";") && !w.starts_with('>'))
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

/// Subcommands the recipes use that the lead is adding on another branch. A
/// name here must NOT be known to clap yet (the test fails once it is, so the
/// entry is removed on merge and the invocation gets checked for real).
const PENDING_SUBCOMMANDS: &[&str] = &[];

/// Checks each recipe invocation against the clap definitions.
#[track_caller]
fn check_invocations(file: &str, doc: &Value) -> Vec<Vec<String>> {
    let found = invocations(doc);
    assert!(!found.is_empty(), "{file}: no sandboxctl invocation found");
    let known: Vec<String> = subcommands()
        .iter()
        .map(|c| c.get_name().to_owned())
        .collect();
    for words in &found {
        let sub = words.get(1).map(String::as_str).unwrap_or_default();
        if PENDING_SUBCOMMANDS.contains(&sub) {
            assert!(
                !known.iter().any(|k| k == sub),
                "`{sub}` is now a real subcommand: drop it from PENDING_SUBCOMMANDS in tests/operator.rs"
            );
            continue;
        }
        let valid = Definitions::try_parse_from(words)
            .map_err(|e| e.to_string())
            .and_then(|cli| cli.into_args().map_err(|e| e.to_string()));
        if let Err(e) = valid {
            panic!(
                "{file}: `{}` is not a valid invocation:\n{e}",
                words.join(" ")
            );
        }
    }
    found
}

// ----- completions ---------------------------------------------------------------

trial!(bash_completion_parses_and_completes_subcommands);
fn bash_completion_parses_and_completes_subcommands() {
    let cli = Cli::new().unreachable_docker();
    let script = offline(&["completions", "bash"]).stdout.clone();
    let file = cli.write("sandboxctl.bash", &script);

    let syntax = bash(&cli, &format!("bash -n {}", file.display()));
    assert_eq!(
        syntax.code,
        Some(0),
        "bash -n rejects the script\n{}",
        syntax.dump()
    );

    // Drive the completion function the way bash's `complete` would.
    let complete = |words: &[&str]| -> Vec<String> {
        let cword = words.len() - 1;
        let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let out = bash(
            &cli,
            &format!(
                r#"source {file}
complete -p sandboxctl >/dev/null || {{ echo "no completion registered for sandboxctl" >&2; exit 1; }}
COMP_WORDS=({words}); COMP_CWORD={cword}
COMP_LINE="${{COMP_WORDS[*]}}"; COMP_POINT=${{#COMP_LINE}}
_sandboxctl sandboxctl "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}""#,
                file = file.display(),
                words = quoted.join(" "),
            ),
        );
        assert_eq!(out.code, Some(0), "completing {words:?}\n{}", out.dump());
        assert_eq!(out.stderr, "", "completing {words:?}\n{}", out.dump());
        out.stdout.lines().map(str::to_owned).collect()
    };

    assert_eq!(complete(&["sandboxctl", "pl"]), ["plan"]);
    let top = complete(&["sandboxctl", ""]);
    for sub in subcommands() {
        assert!(
            top.iter().any(|c| c == sub.get_name()),
            "`sandboxctl <TAB>` does not offer {}: {top:?}",
            sub.get_name()
        );
    }
    let shells = complete(&["sandboxctl", "completions", ""]);
    for shell in ["bash", "elvish", "fish", "powershell", "zsh"] {
        assert!(
            shells.iter().any(|c| c == shell),
            "no {shell} in {shells:?}"
        );
    }
    assert_eq!(
        complete(&["sandboxctl", "plan", "--det"]),
        ["--detailed-exitcode"]
    );
}

trial!(other_shells_completions_offer_every_subcommand);
fn other_shells_completions_offer_every_subcommand() {
    // How each generator offers a top-level candidate.
    type Offer = fn(&str) -> String;
    let offers: [(&str, Offer); 4] = [
        ("zsh", |name| format!("'{name}:")),
        ("fish", |name| {
            format!("__fish_sandboxctl_needs_command\" -f -a \"{name}\"")
        }),
        ("powershell", |name| {
            format!("[CompletionResult]::new('{name}', '{name}'")
        }),
        ("elvish", |name| format!("cand {name} '")),
    ];
    for (shell, offer) in offers {
        let script = offline(&["completions", shell]).stdout.clone();
        assert!(
            script.contains("sandboxctl"),
            "{shell}: does not name sandboxctl"
        );
        for sub in subcommands() {
            let needle = offer(sub.get_name());
            assert!(
                script.contains(&needle),
                "{shell} completion does not offer subcommand {} (looked for {needle:?})",
                sub.get_name()
            );
        }
    }
}

// ----- man -----------------------------------------------------------------------

trial!(man_page_renders_without_warnings_and_documents_every_subcommand);
fn man_page_renders_without_warnings_and_documents_every_subcommand() {
    let roff = offline(&["man"]).stdout.clone();
    assert!(
        roff.starts_with(".ie") || roff.starts_with(".TH"),
        "not roff:\n{roff}"
    );

    let cli = Cli::new().unreachable_docker().env("MANWIDTH", "80");
    let rendered = cli.run_bash(
        r#"command -v man >/dev/null || { echo "man is missing: apt-get install man-db" >&2; exit 127; }
"$SANDBOXCTL" "$@" | man -l --warnings -"#,
        ["man"],
    );
    assert_eq!(rendered.code, Some(0), "{}", rendered.dump());
    assert_eq!(rendered.stderr, "", "man warned:\n{}", rendered.dump());
    let page = &rendered.stdout;
    assert!(page.starts_with("SANDBOXCTL(1)"), "{page}");

    let lines: Vec<&str> = page.lines().map(str::trim).collect();
    for section in [
        "NAME",
        "SYNOPSIS",
        "OPTIONS",
        "SUBCOMMANDS",
        "EXIT STATUS",
        "ENVIRONMENT",
    ] {
        assert!(lines.contains(&section), "no {section} section:\n{page}");
    }
    let global = Definitions::command();
    for sub in subcommands() {
        let heading = format!("sandboxctl {}", sub.get_name());
        assert!(
            lines.contains(&heading.as_str()),
            "no `{heading}` subsection:\n{page}"
        );
        for arg in sub.get_arguments().chain(global.get_arguments()) {
            if let Some(long) = arg.get_long() {
                assert!(
                    page.contains(&format!("--{long}")),
                    "--{long} missing:\n{page}"
                );
            }
        }
    }
    assert!(
        !page.contains("sandboxctl-plan(1)"),
        "refers to pages that do not exist"
    );
}

// ----- closed pipes ------------------------------------------------------------

trial!(closed_pipe_ends_generated_output_quietly);
fn closed_pipe_ends_generated_output_quietly() {
    let cli = Cli::new().unreachable_docker();
    let mut runs: Vec<Vec<&str>> = vec![vec!["man"], vec!["--help"], vec!["plan", "--help"]];
    for shell in ["bash", "elvish", "fish", "powershell", "zsh"] {
        runs.push(vec!["completions", shell]);
    }
    for args in runs {
        let out = cli.run_bash(INTO_CLOSED_PIPE, &args);
        assert_eq!(out.code, Some(0), "{}", out.dump());
        assert_eq!(out.stderr, "", "{}", out.dump());
    }
    let head = cli.run_bash(r#""$SANDBOXCTL" "$@" | head -1"#, ["man"]);
    assert_eq!(head.code, Some(0), "{}", head.dump());
    assert_eq!(head.stderr, "", "{}", head.dump());
    assert_eq!(head.stdout.lines().count(), 1, "{}", head.dump());
}

/// `stderr` without the one note the main engine (in no swarm) gets on
/// every run that lists it.
fn without_swarm_note(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|l| !l.starts_with("note: engine default is not a swarm manager"))
        .collect::<Vec<_>>()
        .join("\n")
}

trial!(closed_pipe_keeps_the_commands_own_status);
async fn closed_pipe_keeps_the_commands_own_status() {
    let sbx = Sandbox::new("operator-closed-pipe").await;
    let kept = sbx.add_box("kept", Run::Running).await;
    sbx.add_box("gone", Run::Exited).await;
    let cli =
        Cli::new().default_state_toml(&format!("{}\n[[box]]\nid = \"kept\"\n", sbx.scope_toml()));

    let full = cli.run_with(["plan"]);
    full.success();
    let first = full.stdout.lines().next().expect("plan prints something");

    // What a user sees: `sandboxctl plan | head -1` under pipefail.
    let head = cli.run_bash(r#""$SANDBOXCTL" "$@" | head -1"#, ["plan"]);
    // The main engine is in no swarm: its one note is all stderr may say.
    assert_eq!(
        (head.code, without_swarm_note(&head.stderr).as_str()),
        (Some(0), ""),
        "{}",
        head.dump()
    );
    assert_eq!(head.stdout, format!("{first}\n"));
    let head = cli.run_bash(
        r#""$SANDBOXCTL" "$@" | head -1"#,
        ["plan", "--detailed-exitcode"],
    );
    assert_eq!(
        (head.code, without_swarm_note(&head.stderr).as_str()),
        (Some(2), ""),
        "{}",
        head.dump()
    );

    // Every write failing with EPIPE: still the command's own status, no noise.
    for (args, code) in [
        (vec!["plan"], 0),
        (vec!["plan", "--detailed-exitcode"], 2),
        (vec!["--format", "json", "plan"], 0),
        (vec!["inventory"], 0),
    ] {
        let out = cli.run_bash(INTO_CLOSED_PIPE, &args);
        assert_eq!(
            (out.code, without_swarm_note(&out.stderr).as_str()),
            (Some(code), ""),
            "{}",
            out.dump()
        );
    }

    // A closed stdout never stops an apply halfway: it runs to the end and
    // its status is the real outcome.
    let out = cli.run_bash(INTO_CLOSED_PIPE, ["apply"]);
    assert_eq!(out.code, Some(0), "{}", out.dump());
    assert!(!out.stderr.contains("panicked"), "{}", out.dump());
    let left = sbx.remaining().await;
    let only_kept = Remaining {
        containers: vec![kept.container.name.clone()],
        volumes: vec![kept.volume.clone()],
        networks: vec![],
    };
    assert_eq!(left, only_kept, "{}", out.dump());
}

// ----- recipes -------------------------------------------------------------------

trial!(pre_commit_hook_validates_state_files);
fn pre_commit_hook_validates_state_files() {
    let doc = yaml(".pre-commit-hooks.yaml");
    let hooks = doc.as_sequence().expect("a list of hooks");
    let hook = hooks
        .iter()
        .find(|h| h["id"].as_str() == Some("sandboxctl-validate"))
        .expect("a hook with id sandboxctl-validate");
    assert_eq!(str_at(hook, &["entry"]), "sandboxctl validate");
    assert_eq!(str_at(hook, &["language"]), "rust");
    assert_eq!(str_at(hook, &["files"]), r"^state/[^/]+\.toml$");
    assert_eq!(hook["pass_filenames"].as_bool(), Some(true));
    check_invocations(".pre-commit-hooks.yaml", &doc);
}

trial!(gitlab_recipe_has_validate_drift_and_manual_apply);
fn gitlab_recipe_has_validate_drift_and_manual_apply() {
    let doc = yaml("examples/ci/gitlab-ci.yml");
    let found = check_invocations("gitlab-ci.yml", &doc);
    let plan: Vec<&str> = [
        "sandboxctl",
        "plan",
        "--detailed-exitcode",
        "--out",
        "plan.json",
    ]
    .into();
    assert!(found.iter().any(|w| *w == plan), "{found:?}");
    assert_eq!(
        doc["drift"]["allow_failure"]["exit_codes"][0].as_u64(),
        Some(2)
    );
    assert_eq!(str_at(&doc, &["apply", "rules", "0", "when"]), "manual");
    assert_eq!(str_at(&doc, &["apply", "environment", "name"]), "sandboxes");
    assert_eq!(str_at(&doc, &["apply", "needs", "0", "job"]), "drift");
}

/// The recipes' own scripts, run by bash as the CI systems run them, against
/// a real engine: GitHub's drift step finds drift (output exitcode=2, the
/// summary says so and shows the plan), GitLab's drift script exits 2, both
/// write plan.json, and GitHub's apply step removes exactly the drifted box;
/// afterwards the drift step reports exitcode=0.
trial!(recipes_detect_drift_and_apply_the_saved_plan);
async fn recipes_detect_drift_and_apply_the_saved_plan() {
    let doc = yaml("examples/ci/github-actions.yml");
    check_invocations("github-actions.yml", &doc);
    let jobs = &doc["jobs"];
    assert_eq!(str_at(jobs, &["apply", "needs"]), "drift");
    assert_eq!(str_at(jobs, &["apply", "environment"]), "sandboxes");
    assert_eq!(
        str_at(jobs, &["apply", "if"]),
        "needs.drift.outputs.exitcode == '2'"
    );
    let step = |job: &str, name: &str| -> String {
        jobs[job]["steps"]
            .as_sequence()
            .expect("steps")
            .iter()
            .find(|s| s["name"].as_str() == Some(name))
            .and_then(|s| s["run"].as_str())
            .unwrap_or_else(|| panic!("no step {name:?} with run in job {job}"))
            .to_owned()
    };
    let drift = step("drift", "Plan");
    let apply = step("apply", "Apply exactly that plan");
    let gitlab = yaml("examples/ci/gitlab-ci.yml");
    let gitlab_drift: Vec<&str> = gitlab["drift"]["script"]
        .as_sequence()
        .expect("drift.script")
        .iter()
        .map(|line| line.as_str().expect("a script line"))
        .collect();

    let sbx = Sandbox::new("operator-github-recipe").await;
    let kept = sbx.add_box("kept", Run::Running).await;
    sbx.add_box("drifted", Run::Exited).await;
    let cli =
        Cli::new().default_state_toml(&format!("{}\n[[box]]\nid = \"kept\"\n", sbx.scope_toml()));
    let bin_dir = cli.dir().join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    std::os::unix::fs::symlink(BIN, bin_dir.join("sandboxctl")).unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    let (output, summary) = (cli.dir().join("output"), cli.dir().join("summary.md"));
    let cli = cli
        .env("PATH", path)
        .env("GITHUB_OUTPUT", &output)
        .env("GITHUB_STEP_SUMMARY", &summary);
    // Actions runs `bash -e -o pipefail`; GitLab runs the lines in one shell with `set -eo pipefail`.
    let as_actions = |script: &str| format!("set -e\n{script}");

    let out = bash(&cli, &format!("set -e\n{}", gitlab_drift.join("\n")));
    assert_eq!(
        out.code,
        Some(2),
        "GitLab's drift job exits 2 on drift\n{}",
        out.dump()
    );
    assert!(
        out.stdout.contains("drift - run the apply job"),
        "{}",
        out.dump()
    );
    std::fs::remove_file(cli.dir().join("plan.json")).expect("GitLab's drift wrote plan.json");

    let out = bash(&cli, &as_actions(&drift));
    assert_eq!(out.code, Some(0), "drift step failed\n{}", out.dump());
    assert_eq!(cli.read("output"), "exitcode=2\n");
    let summary = cli.read("summary.md");
    assert!(summary.contains("**Drift**"), "{summary}");
    assert!(
        summary.contains(sbx.scope_value()),
        "the plan is in the summary: {summary}"
    );
    assert!(!summary.contains("<pre>\n</pre>"), "{summary}");
    assert!(cli.dir().join("plan.json").exists());

    let out = bash(&cli, &as_actions(&apply));
    assert_eq!(out.code, Some(0), "apply step failed\n{}", out.dump());
    let left = sbx.remaining().await;
    let only_kept = Remaining {
        containers: vec![kept.container.name.clone()],
        volumes: vec![kept.volume.clone()],
        networks: vec![],
    };
    assert_eq!(left, only_kept, "{}", out.dump());

    // Run again: no drift now, and the job still succeeds.
    std::fs::remove_file(&output).unwrap();
    let out = bash(&cli, &as_actions(&drift));
    assert_eq!(out.code, Some(0), "{}", out.dump());
    assert_eq!(cli.read("output"), "exitcode=0\n");
}
