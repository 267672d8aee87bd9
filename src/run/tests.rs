//! The run path end to end with in-memory engines: every command through
//! `run_on`, its output and exit status.

use super::*;
use crate::engine::memory::MemoryEngine;
use clap::Parser;

use context::Capture;

/// `config` run on `engines` to its end: its exit status and all it printed.
async fn run(config: &Config, engines: Vec<Arc<dyn Engine>>) -> (Exit, Capture) {
    let mut sink = Capture::default();
    let exit = run_on(config, engines, CancellationToken::new(), &mut sink).await;
    (exit, sink)
}

fn engine(name: &str, boxes: &[&str]) -> Arc<MemoryEngine> {
    Arc::new(MemoryEngine::with_boxes(name, boxes))
}

/// The default engine, carrying `boxes`.
fn default_engine(boxes: &[&str]) -> Arc<MemoryEngine> {
    engine(crate::model::DEFAULT_ENGINE, boxes)
}

/// `argv` (after the program name) resolved with a state file of `state`.
fn resolved(state: &str, argv: &[&str]) -> (tempfile::TempDir, anyhow::Result<Config>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.toml");
    std::fs::write(&path, state).unwrap();
    let path = path.display().to_string();
    let mut all = vec!["sandboxctl", "--state", &path];
    all.extend_from_slice(argv);
    let args = crate::cli::Cli::try_parse_from(all)
        .unwrap()
        .into_args()
        .unwrap();
    // This test's own state folder: the plan key and the memo are never the
    // machine user's.
    let state = dir.path().join("state-home");
    (
        dir,
        resolve(args).map(|config| config.with_state_folder(state)),
    )
}

/// A config for `argv` (after the program name) with a state file of `state`.
fn config(state: &str, argv: &[&str]) -> (tempfile::TempDir, Config) {
    let (dir, config) = resolved(state, argv);
    (dir, config.unwrap())
}

/// `argv` (after the program name) with a state file of `state`, run on
/// `engine` alone to its end: its exit status and all it printed.
async fn run_one(state: &str, argv: &[&str], engine: &Arc<MemoryEngine>) -> (Exit, Capture) {
    let (_dir, config) = config(state, argv);
    run(&config, vec![engine.clone()]).await
}

/// Fails the test, showing `text`, unless `text` contains `part`.
#[track_caller]
fn assert_contains(text: &str, part: &str) {
    assert!(text.contains(part), "{text}");
}

const FLEET: &str = "[[engine]]\nname = \"a\"\nhost = \"unix:///nonexistent-a.sock\"\n\n[[engine]]\nname = \"b\"\nhost = \"unix:///nonexistent-b.sock\"\n";

fn unreachable(engine: &MemoryEngine) {
    engine.disconnect();
}

#[tokio::test]
async fn destroy_of_an_id_no_engine_carries_fails_naming_it_unless_missing_ok() {
    let (_dir, named) = config(FLEET, &["destroy", "x", "ghost"]);
    let engines: Vec<Arc<dyn Engine>> = vec![engine("a", &["x"]), engine("b", &["y"])];
    let (exit, sink) = run(&named, engines).await;
    assert_eq!(exit, Exit::Failure, "{}{}", sink.out, sink.err);
    assert_contains(
        &sink.out,
        "box ghost: NOT FOUND: nothing in scope carries ca.sandbox.id=ghost",
    );
    assert_contains(&sink.out, "`sandboxctl inventory`");
    assert!(!sink.out.contains("box x:"), "{}", sink.out);
    // --missing-ok: said, not a failure.
    let (_dir, ok) = config(FLEET, &["destroy", "--missing-ok", "ghost"]);
    let engines: Vec<Arc<dyn Engine>> = vec![engine("a", &["x"]), engine("b", &["y"])];
    let (exit, sink) = run(&ok, engines).await;
    assert_eq!(exit, Exit::Success, "{}{}", sink.out, sink.err);
    assert_contains(&sink.out, "--missing-ok: not a failure");
    // JSON: the fact, judged.
    let (_dir, json) = config("", &["--format", "json", "destroy", "nosuchbox"]);
    let (exit, sink) = run(&json, vec![engine("default", &["x"])]).await;
    assert_eq!(exit, Exit::Failure, "{}{}", sink.out, sink.err);
    let v: serde_json::Value = serde_json::from_str(&sink.out).unwrap();
    assert_eq!(v["converged"], true, "the engine converged: {v}");
    assert_eq!(v["unknownBoxes"][0]["id"], "nosuchbox");
    assert_eq!(v["unknownBoxes"][0]["status"], "notFound");
}

#[tokio::test]
async fn destroy_again_of_a_box_the_audit_log_records_removed_succeeds_saying_when() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let audit = audit.to_str().unwrap();
    let memory = engine("default", &["a"]);
    let (exit, sink) = run_one("", &["destroy", "--audit", audit, "a"], &memory).await;
    assert_eq!(exit, Exit::Success, "{}{}", sink.out, sink.err);
    // The retry: nothing carries a now, the log says it went.
    let (exit, sink) = run_one("", &["destroy", "--audit", audit, "a"], &memory).await;
    assert_eq!(exit, Exit::Success, "{}{}", sink.out, sink.err);
    assert_contains(&sink.out, "box a: removed earlier: the audit log");
    assert_contains(&sink.out, "removed on engine default at ");
    // Another box the log does not name still fails.
    let (exit, sink) = run_one("", &["destroy", "--audit", audit, "b"], &memory).await;
    assert_eq!(exit, Exit::Failure, "{}{}", sink.out, sink.err);
    assert_contains(&sink.out, "box b: NOT FOUND");
}

#[tokio::test]
async fn prune_without_a_state_file_or_scope_says_so_first_and_in_the_json() {
    let (_dir, mut config) = config("", &["--format", "json", "prune"]);
    let crate::cli::config::Job::Converge { target, .. } = &mut config.job else {
        panic!("prune converges");
    };
    assert_eq!(
        *target,
        crate::cli::config::Target::Prune {
            no_state_file: false,
            ask: false
        },
        "a state file was given, and no terminal"
    );
    // As resolved in a folder without one, and without --scope.
    *target = crate::cli::config::Target::Prune {
        no_state_file: true,
        ask: false,
    };
    let (exit, sink) = run(&config, vec![engine("default", &["x"])]).await;
    assert_eq!(exit, Exit::Success, "{}{}", sink.out, sink.err);
    assert!(sink.err.starts_with("note: no state file"), "{}", sink.err);
    let v: serde_json::Value = serde_json::from_str(&sink.out).unwrap();
    assert_eq!(v["noStateFile"], true, "{v}");
    assert_eq!(
        v["removed"]["containers"].as_array().unwrap().len(),
        1,
        "{v}"
    );
}

#[tokio::test]
async fn a_watch_cycle_is_judged_over_every_engine_and_reported_by_name() {
    let (_dir, config) = config(
        FLEET,
        &["--format", "json", "watch", "--once", "--grace", "1s"],
    );
    // The first engine is down: its part fails, the second converges,
    // and each is reported under its own name.
    let a = engine("a", &["p"]);
    unreachable(&a);
    let b = engine("b", &["q"]);
    let engines: Vec<Arc<dyn Engine>> = vec![a.clone(), b.clone()];
    let (exit, sink) = run(&config, engines).await;
    assert_eq!(exit, Exit::Failure, "{}{}", sink.out, sink.err);
    let report: serde_json::Value = serde_json::from_str(&sink.out).unwrap();
    assert_eq!(report["converged"], false);
    let summary: Vec<(String, bool)> = report["engines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["engine"].as_str().unwrap().to_string(),
                s["converged"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(summary, [("a".into(), false), ("b".into(), true)]);
    assert_eq!(report["failures"][0]["engine"], "a");
    assert!(
        b.world().containers.is_empty(),
        "the healthy engine converged"
    );
    assert_eq!(a.world().containers.len(), 1, "the failed one is untouched");
    let log: Vec<serde_json::Value> = sink
        .err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let failed: Vec<&str> = log
        .iter()
        .filter(|l| l["event"] == "cycleFailed")
        .map(|l| l["engine"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["a"], "{}", sink.err);
}

#[tokio::test]
async fn watch_once_on_one_unreachable_engine_is_a_failure() {
    let engine = default_engine(&["p"]);
    unreachable(&engine);
    let argv = ["--format", "json", "watch", "--once", "--grace", "1s"];
    let (exit, sink) = run_one("", &argv, &engine).await;
    assert_eq!(exit, Exit::Failure);
    let report: serde_json::Value = serde_json::from_str(&sink.out).unwrap();
    assert_eq!(report["converged"], false);
    assert_eq!(report["failures"][0]["engine"], "default");
    assert!(
        report.get("engines").is_none(),
        "one engine keeps its layout"
    );
}

/// The error of resolving `argv` with a state file of `state`.
fn refused(state: &str, argv: &[&str]) -> String {
    format!("{:#}", resolved(state, argv).1.unwrap_err())
}

#[test]
fn taking_a_lease_needs_one_engine_and_a_ttl_under_the_ceiling() {
    for argv in [&["lease", "b"][..], &["hold", "b", "--", "true"]] {
        let e = refused(FLEET, argv);
        assert!(
            e.contains("exactly one engine") && e.contains("a, b") && e.contains("--engine NAME"),
            "{e}"
        );
    }
    // Narrowed to one, and releasing on every engine: fine.
    config(FLEET, &["--engine", "a", "lease", "b"]);
    config(FLEET, &["lease", "--release", "b"]);
    let e = refused(
        "[policy]\nmax_lease = \"1h\"\n",
        &["lease", "b", "--ttl", "2h"],
    );
    assert!(
        e.contains("--ttl 2h") && e.contains("at most 1h ([policy] max_lease in "),
        "{e}"
    );
    let e = refused("", &["hold", "b", "--ttl", "25h", "--", "true"]);
    assert!(
        e.contains("at most 24h ([policy] max_lease, the default)"),
        "{e}"
    );
    for argv in [
        &["sandboxctl", "lease", "b", "--ttl", "0s"][..],
        &["sandboxctl", "lease", "b", "--ttl", "1500ms"],
        &["sandboxctl", "lease", "b/c"],
        &["sandboxctl", "hold", "b", "--ttl", "0s", "--", "true"],
    ] {
        let usage = crate::cli::Cli::try_parse_from(argv)
            .map_err(|e| e.to_string())
            .and_then(|cli| cli.into_args().map_err(|e| e.to_string()));
        assert!(usage.is_err(), "{argv:?} is a usage error");
    }
    assert!(
        crate::cli::Cli::try_parse_from(["sandboxctl", "lease", "--release", "b", "--ttl", "1m"])
            .is_err(),
        "--ttl is for taking a lease"
    );
    assert!(
        crate::cli::Cli::try_parse_from(["sandboxctl", "hold", "b"]).is_err(),
        "hold needs a command"
    );
}

#[tokio::test]
async fn lease_then_release_through_the_run_path() {
    let engine = default_engine(&["x"]);
    let (exit, sink) = run_one("", &["--format", "json", "lease", "x", "y"], &engine).await;
    assert_eq!(exit, Exit::Success, "{}{}", sink.out, sink.err);
    let doc: serde_json::Value = serde_json::from_str(&sink.out).unwrap();
    assert_eq!(doc["ok"], true);
    assert_eq!(doc["boxes"][1]["box"], "y");
    assert_eq!(engine.world().volumes.len(), 2);
    let (exit, sink) = run_one("", &["lease", "--release", "x", "y"], &engine).await;
    assert_eq!(exit, Exit::Success, "{}{}", sink.out, sink.err);
    assert_contains(
        &sink.out,
        "box x on engine default: released 1 lease: ca-sbx-lease-x-",
    );
    assert!(engine.world().volumes.is_empty());
    assert_eq!(engine.world().containers.len(), 1, "only leases go");
}

#[tokio::test]
async fn hold_passes_its_commands_status_through_the_run_path() {
    let engine = default_engine(&["x"]);
    let argv = ["hold", "x", "--ttl", "3s", "--", "sh", "-c", "exit 3"];
    let (exit, sink) = run_one("", &argv, &engine).await;
    assert_eq!(exit, Exit::Passed(3), "{}{}", sink.out, sink.err);
    assert_eq!(exit.code(), 3);
    assert_eq!(sink.out, "", "hold's stdout is its command's");
    assert!(
        sink.err
            .starts_with("sandboxctl hold: lease ca-sbx-lease-x-"),
        "{}",
        sink.err
    );
    assert!(engine.world().volumes.is_empty());
}

#[tokio::test]
async fn a_run_whose_audit_log_cannot_be_written_fails_naming_it() {
    let engine = default_engine(&["p"]);
    let (exit, sink) = run_one("", &["apply", "--audit", "/dev/full"], &engine).await;
    assert_eq!(exit, Exit::Failure, "{}{}", sink.out, sink.err);
    assert!(
        engine.world().containers.is_empty(),
        "the removal itself happened"
    );
    assert_contains(&sink.err, "cannot write audit log /dev/full");
}

#[tokio::test]
async fn an_audit_log_that_is_a_symlink_is_refused_before_any_removal() {
    let files = tempfile::tempdir().unwrap();
    let target = files.path().join("target");
    std::fs::write(&target, "keep me\n").unwrap();
    let link = files.path().join("audit.jsonl");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let engine = default_engine(&["p"]);
    let argv = ["apply", "--audit", &link.display().to_string()];
    let (exit, sink) = run_one("", &argv, &engine).await;
    assert_eq!(exit, Exit::Failure, "{}{}", sink.out, sink.err);
    assert_contains(
        &sink.err,
        &format!(
            "audit log {} is a symbolic link; sandboxctl never writes through one: pass the real file's path to --audit",
            link.display()
        ),
    );
    assert_eq!(engine.world().containers.len(), 1, "nothing removed");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me\n");
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
}

#[tokio::test]
async fn plan_out_never_writes_through_a_link_at_its_temporary_name() {
    use crate::exec::files::tests::{mode, umask_022};
    umask_022();
    let files = tempfile::tempdir().unwrap();
    let target = files.path().join("target");
    std::fs::write(&target, "keep me\n").unwrap();
    let saved = files.path().join("plan.json");
    // The temporary name the plan was once written at, plainly.
    std::os::unix::fs::symlink(&target, files.path().join("plan.json.tmp~")).unwrap();
    let argv = ["plan", "--out", &saved.display().to_string()];
    let (exit, sink) = run_one("", &argv, &default_engine(&["p"])).await;
    assert_eq!(exit, Exit::Success, "{}{}", sink.out, sink.err);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me\n");
    let plan: serde_json::Value = serde_json::from_slice(&std::fs::read(&saved).unwrap()).unwrap();
    assert!(plan.is_object(), "{plan}");
    assert_eq!(mode(&saved), 0o600, "a saved plan is its user's alone");
    let mut names: Vec<String> = std::fs::read_dir(files.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["plan.json", "plan.json.tmp~", "target"],
        "no temporary file left"
    );
}

/// Box `b` (undeclared) with one volume and a `ca-sbx:*` image; box `k`'s
/// volume too, when `k` opts out with `archive = false`.
fn archive_world() -> Arc<MemoryEngine> {
    use crate::engine::memory::{box_labels, VolumeInfo, World};
    let volume = |name: &str, b: &str| VolumeInfo {
        name: name.into(),
        labels: box_labels(b),
        created_at: None,
    };
    Arc::new(MemoryEngine::new(World {
        volumes: vec![volume("vb", "b"), volume("vk", "k")],
        images: vec![crate::model::ImageInfo {
            id: "sha256:feed".into(),
            tags: vec!["ca-sbx:r-1".into()],
        }],
        ..World::default()
    }))
}

#[tokio::test]
async fn apply_archive_reports_archived_and_the_file_policy_opts_out() {
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().display().to_string();
    // [policy] archive in the file; box k opts out (its expiry passed).
    let state = format!(
        "[policy]\narchive = {to:?}\n\n[[box]]\nid = \"k\"\nexpires = \"2000-01-01T00:00:00Z\"\narchive = false\n"
    );
    let engine = archive_world();
    let (exit, sink) = run_one(&state, &["--format", "json", "apply"], &engine).await;
    assert_eq!(exit, Exit::Success, "{}{}", sink.out, sink.err);
    let doc: serde_json::Value = serde_json::from_str(&sink.out).unwrap();
    let archived = doc["archived"].as_array().unwrap();
    assert_eq!(archived.len(), 1, "{doc}");
    assert_eq!(archived[0]["volume"], "vb");
    assert!(archived[0]["path"].as_str().unwrap().starts_with(&to));
    assert!(engine.world().volumes.is_empty());
}

#[tokio::test]
async fn apply_archive_without_an_image_exits_1_naming_archive_failed() {
    use crate::engine::memory::{box_labels, VolumeInfo, World};
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().display().to_string();
    let engine = Arc::new(MemoryEngine::new(World {
        volumes: vec![VolumeInfo {
            name: "vb".into(),
            labels: box_labels("b"),
            created_at: None,
        }],
        ..World::default()
    }));
    let argv = ["--format", "json", "apply", "--archive", &to];
    let (exit, sink) = run_one("", &argv, &engine).await;
    assert_eq!(exit, Exit::Failure, "{}{}", sink.out, sink.err);
    let doc: serde_json::Value = serde_json::from_str(&sink.out).unwrap();
    assert_eq!(
        doc["remainingVolumes"][0]["reason"]["code"], "archiveFailed",
        "{doc}"
    );
    assert_eq!(engine.world().volumes.len(), 1);
}

#[tokio::test]
async fn plan_shows_the_archive_folder() {
    let state = "[policy]\narchive = \"/srv/a\"\n";
    let (_, sink) = run_one(state, &["plan"], &archive_world()).await;
    assert_contains(&sink.out, "archive to /srv/a, then remove");
}

#[tokio::test]
async fn restore_brings_it_back_and_says_what_to_declare() {
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().display().to_string();
    let engine = archive_world();
    let apply = ["--format", "json", "apply", "--archive", &to];
    let (_, sink) = run_one("", &apply, &engine).await;
    let doc: serde_json::Value = serde_json::from_str(&sink.out).unwrap();
    let archived = doc["archived"].as_array().unwrap();
    let vb = archived.iter().find(|a| a["volume"] == "vb").unwrap();
    let path = vb["path"].as_str().unwrap().to_string();
    let restore = ["restore", &path];
    let (exit, sink) = run_one("", &restore, &engine).await;
    assert_eq!(exit, Exit::Success, "{}{}", sink.out, sink.err);
    assert_contains(&sink.out, "restored volume vb");
    assert_contains(&sink.out, "keep = [\"vb\"]");
    assert_contains(&sink.out, "id = \"b\"");
    assert_eq!(engine.world().volumes.len(), 1);
    // Again: the volume exists, exit 1, said on stderr.
    let (exit, sink) = run_one("", &restore, &engine).await;
    assert_eq!(exit, Exit::Failure);
    assert_contains(&sink.err, "volume vb exists");
}

/// What a converging run printed on stdout (stderr's progress lines are
/// not the report), with the `Engine:` line (the address this machine
/// resolves) left out.
fn printed(sink: &Capture) -> String {
    sink.out
        .lines()
        .filter(|l| !l.starts_with("Engine: "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `n` boxes `cb1`..`cbN` (natural order is not plain order past 9).
fn boxes(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("cb{i}")).collect()
}

/// Decision 24: apply names each object once with its outcome, then the
/// summary; the whole plan first only with -v or when it is short; never a
/// double blank line.
#[tokio::test]
async fn apply_names_each_object_once_and_the_whole_plan_only_when_short_or_verbose() {
    use crate::engine::memory::{FaultAction, Op};
    use crate::engine::{EngineError, ErrorKind};
    use crate::model::Kind;
    let cases: [(&str, usize, &[&str], bool); 4] = [
        ("apply_short", 3, &["apply"], false),
        ("apply_long", 30, &["apply"], false),
        ("apply_failing", 14, &["apply"], true),
        ("apply_verbose", 14, &["apply", "-v"], false),
    ];
    for (name, n, argv, fails) in cases {
        let names = boxes(n);
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let engine = default_engine(&refs);
        if fails {
            engine.inject(
                Op::Remove(Kind::Container),
                Some("default-cb10"),
                FaultAction::Fail(EngineError::new(
                    "remove container default-cb10",
                    ErrorKind::Other {
                        status: Some(500),
                        message: "driver failed".into(),
                    },
                )),
                usize::MAX,
            );
        }
        let (exit, sink) = run_one("[scope]\n", argv, &engine).await;
        let text = printed(&sink);
        assert_eq!(exit == Exit::Failure, fails, "{name}: {text}");
        assert!(
            !text.contains("\n\n\n"),
            "{name}: a double blank line:\n{text}"
        );
        let steps = text.contains("Remove, in this order:");
        assert_eq!(steps, n <= 12 || argv.contains(&"-v"), "{name}:\n{text}");
        // Each box's container once in the report (and once more in a plan
        // printed whole).
        for b in &names {
            let rows = text
                .lines()
                .filter(|l| l.split_whitespace().any(|w| w == b.as_str()))
                .count();
            assert_eq!(rows, if steps { 2 } else { 1 }, "{name}: {b}:\n{text}");
        }
        insta::with_settings!({snapshot_path => "../../snapshots", omit_expression => true}, {
            insta::assert_snapshot!(name, text);
        });
    }
}

/// The report's JSON `ok` is what the exit status says, made by the one
/// decision: `converged` alone can be true on a run that fails.
#[tokio::test]
async fn the_json_ok_is_the_exit_status_and_converged_is_not() {
    use crate::engine::memory::{FaultAction, Op};
    use crate::engine::{EngineError, ErrorKind};
    use crate::model::Kind;
    let json = |sink: &Capture| -> serde_json::Value {
        serde_json::from_str(&sink.out).unwrap_or_else(|e| panic!("{e}: {}", sink.out))
    };
    // A named box nothing carries: converged, not ok, exit 1.
    let engine = default_engine(&["a"]);
    let (exit, sink) = run_one("", &["destroy", "nosuchbox", "--format", "json"], &engine).await;
    let doc = json(&sink);
    assert_eq!(exit, Exit::Failure, "{doc}");
    assert_eq!(
        (doc["converged"].clone(), doc["ok"].clone()),
        (true.into(), false.into()),
        "{doc}"
    );
    // And in words: no double blank line after the plan.
    let (exit, sink) = run_one("", &["destroy", "nosuchbox"], &engine).await;
    assert_eq!(exit, Exit::Failure);
    assert!(!sink.out.contains("\n\n\n"), "{}", sink.out);
    // A teardown that converged: ok, exit 0.
    let (exit, sink) = run_one("", &["destroy", "a", "--format", "json"], &engine).await;
    let doc = json(&sink);
    assert_eq!(exit, Exit::Success, "{doc}");
    assert_eq!(
        (doc["converged"].clone(), doc["ok"].clone()),
        (true.into(), true.into()),
        "{doc}"
    );
    // A removal that failed: not ok, exit 1.
    let engine = default_engine(&["b"]);
    engine.inject(
        Op::Remove(Kind::Container),
        None,
        FaultAction::Fail(EngineError::new(
            "remove container default-b",
            ErrorKind::Other {
                status: Some(500),
                message: "boom".into(),
            },
        )),
        usize::MAX,
    );
    let (exit, sink) = run_one("", &["destroy", "b", "--format", "json"], &engine).await;
    let doc = json(&sink);
    assert_eq!(exit, Exit::Failure, "{doc}");
    assert_eq!(
        (doc["converged"].clone(), doc["ok"].clone()),
        (false.into(), false.into()),
        "{doc}"
    );
}
