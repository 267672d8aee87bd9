//! `sandboxctl explain` end to end against the real Docker engine: a kept
//! object (with the state-file line that declares its box), removed ones
//! (their step, what they wait for and what waits for them), a blocked volume
//! (and the unmanaged container holding it), unmanaged look-alikes (and the
//! label rule that excludes them), `box:ID`, lookup by ID and prefix, and the
//! failures: an ambiguous name and no match at all.
//!
//! Every test has its own `Sandbox` (unique scope label, cleaned up on drop)
//! and runs the CLI through `sbx.cli()`. Box IDs and names carry the scope
//! value, because `explain` also looks at objects outside the scope (other
//! tests' objects on the shared daemon must never match). Outputs are
//! snapshotted as a transcript with the scope value, container IDs and
//! creation times replaced by placeholders; explaining never changes anything.
//! Test names stay short: human output cuts container names at 49
//! characters, and the scope value (test name, pid, nanoseconds) is part of
//! every name, so a long one would be cut at a place that varies.

use serde_json::Value;

use crate::support::cli::{Cli, Output};
use crate::support::docker::{Container, ContainerSpec, Run, Sandbox, VolumeSpec};

/// How many characters of a container ID the prefix lookups use.
const PREFIX: usize = 16;

/// A box made for these tests: a container mounting a volume, both labeled
/// with the box ID.
struct TestBox {
    id: String,
    container: Container,
    volume: String,
}

/// Box `<scope>-<suffix>`: volume `<scope>-<suffix>-data` and container
/// `<scope>-<suffix>` mounting it.
async fn test_box(sbx: &Sandbox, suffix: &str, run: Run) -> TestBox {
    let id = sbx.unique(suffix);
    let volume = sbx
        .volume(
            VolumeSpec::new()
                .in_box(&id)
                .name(sbx.unique(&format!("{suffix}-data"))),
        )
        .await;
    let container = sbx
        .container(
            ContainerSpec::new()
                .in_box(&id)
                .name(sbx.unique(suffix))
                .volume(&volume)
                .run(run),
        )
        .await;
    TestBox {
        id,
        container,
        volume,
    }
}

/// Several runs of one CLI, written down as a shell session with the
/// unstable parts (scope value, IDs, times) replaced, for one snapshot.
struct Transcript<'a> {
    cli: &'a Cli,
    /// `(text, placeholder)`, applied in order: full IDs before short ones.
    redactions: Vec<(String, String)>,
    text: String,
}

impl<'a> Transcript<'a> {
    fn new(sbx: &'a Sandbox, cli: &'a Cli, containers: &[(&str, &Container)]) -> Self {
        let mut redactions = Vec::new();
        for (label, c) in containers {
            redactions.push((c.id.clone(), format!("[id of {label}]")));
        }
        for (label, c) in containers {
            redactions.push((c.id[..PREFIX].to_string(), format!("[prefix of {label}]")));
        }
        for (label, c) in containers {
            redactions.push((c.id[..12].to_string(), format!("[short id of {label}]")));
        }
        redactions.push((sbx.scope_value().to_string(), "[scope]".into()));
        Transcript {
            cli,
            redactions,
            text: String::new(),
        }
    }

    fn redact(&self, text: &str) -> String {
        let mut text = text.to_string();
        for (from, to) in &self.redactions {
            text = text.replace(from.as_str(), to);
        }
        text
    }

    /// Runs `sandboxctl explain <query>` (with any `args` before it), expects
    /// `code`, and adds the command and both streams to the transcript. JSON
    /// output has its `createdAt` values replaced by `[time]`.
    fn explain(&mut self, args: &[&str], query: &str, code: i32) -> Output {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["explain", query]);
        let out = self.cli.run_with(&all);
        out.expect_code(code);
        let stdout = match serde_json::from_str::<Value>(&out.stdout) {
            Ok(mut doc) if !out.stdout.is_empty() => {
                blank_times(&mut doc);
                serde_json::to_string_pretty(&doc).unwrap() + "\n"
            }
            _ => out.stdout.clone(),
        };
        self.text.push_str(&format!(
            "$ sandboxctl {} # exit {code}\n{}{}\n",
            all.join(" "),
            stdout,
            if out.stderr.is_empty() {
                String::new()
            } else {
                format!("[stderr] {}", out.stderr)
            }
        ));
        out
    }

    fn snapshot(&self, name: &str) {
        let text = self.redact(&self.text);
        insta::with_settings!({
            snapshot_path => "../snapshots",
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!(name, text);
        });
    }
}

fn blank_times(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if k == "createdAt" && v.is_string() {
                    *v = Value::String("[time]".into());
                } else {
                    blank_times(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(blank_times),
        _ => {}
    }
}

/// Writes `state.toml` (scope, then the declared boxes, one `[[box]]` table
/// each) in the run's directory and returns a CLI that reads it by that
/// relative name, so `declaredAt` is `state.toml:LINE`.
fn with_state(sbx: &Sandbox, declared: &[&str]) -> Cli {
    let mut toml = sbx.scope_toml();
    for id in declared {
        toml.push_str(&format!("\n[[box]]\nid = \"{id}\"\n"));
    }
    let cli = sbx.cli();
    cli.write("state.toml", &toml);
    cli.args(["--state", "state.toml"])
}

/// The one explanation in a JSON answer.
#[track_caller]
fn only(out: &Output) -> Value {
    let doc = out.json();
    let list = doc["explanations"].as_array().expect("a JSON list");
    assert_eq!(list.len(), 1, "{}", out.dump());
    list[0].clone()
}

trial!(explain_kept_removed_and_blocked_objects);
async fn explain_kept_removed_and_blocked_objects() {
    let sbx = Sandbox::new("explain-kept").await;
    let keep = test_box(&sbx, "keep", Run::Running).await;
    let gone = test_box(&sbx, "gone", Run::Exited).await;
    let held = sbx
        .volume(
            VolumeSpec::new()
                .in_box(&sbx.unique("held"))
                .name(sbx.unique("held-data")),
        )
        .await;
    let holder = sbx.unmanaged_user(&held, Run::Running).await;
    let before = sbx.remaining().await;

    // The state file: [scope] on lines 1-2, the kept box's id on line 5.
    let cli = with_state(&sbx, &[&keep.id]);
    let mut t = Transcript::new(
        &sbx,
        &cli,
        &[
            ("keep", &keep.container),
            ("gone", &gone.container),
            ("holder", &holder),
        ],
    );

    // Kept: the declared box, with the line that declares it.
    let out = t.explain(&[], &keep.container.name, 0);
    assert!(
        out.stdout.contains("  state:    state.toml:5\n"),
        "{}",
        out.dump()
    );
    let e = only(&t.explain(&["--format", "json"], &keep.container.name, 0));
    assert_eq!(e["verdict"], "keep");
    assert_eq!(e["managed"], true);
    assert_eq!(e["reason"]["code"], "declaredBox");
    assert_eq!(e["declaredAt"], "state.toml:5");
    assert_eq!(e["id"], keep.container.id.as_str());

    // Removed: the container goes first, its volume waits for it.
    let c = only(&t.explain(&["--format", "json"], &gone.container.name, 0));
    assert_eq!(c["verdict"], "remove");
    assert_eq!(c["reason"]["code"], "boxNotDeclared");
    assert_eq!(c["reason"]["boxId"], gone.id.as_str());
    assert_eq!(c["waitsFor"], serde_json::json!([]));
    let v = only(&t.explain(&["--format", "json"], &gone.volume, 0));
    assert_eq!(v["verdict"], "remove");
    assert!(v["step"].as_u64() > c["step"].as_u64(), "{v}\n{c}");
    assert_eq!(v["waitsFor"][0]["step"], c["step"]);
    assert_eq!(v["waitsFor"][0]["name"], gone.container.name.as_str());
    assert_eq!(c["waitedForBy"][0]["step"], v["step"]);
    assert_eq!(c["waitedForBy"][0]["name"], gone.volume.as_str());
    assert!(v.get("declaredAt").is_none(), "{v}");
    let out = t.explain(&[], &gone.volume, 0);
    assert!(out.stdout.contains("  after:    step "), "{}", out.dump());

    // The same container by full ID and by a unique prefix.
    let by_id = t.explain(&["--format", "json"], &gone.container.id, 0);
    let by_prefix = t.explain(&["--format", "json"], &gone.container.id[..PREFIX], 0);
    assert_eq!(only(&by_id), c);
    assert_eq!(only(&by_prefix), c);

    // Blocked: held by a container outside the sandbox system, named.
    let out = t.explain(&[], &held, 0);
    assert!(out.stdout.contains(&holder.name), "{}", out.dump());
    let b = only(&t.explain(&["--format", "json"], &held, 0));
    assert_eq!(b["verdict"], "blocked");
    assert_eq!(b["reason"]["code"], "heldByUnmanaged");
    assert_eq!(b["reason"]["holders"][0]["name"], holder.name.as_str());
    assert_eq!(b["reason"]["holders"][0]["id"], holder.id.as_str());
    assert!(b.get("step").is_none(), "{b}");

    // The holder itself is not managed: no ca.sandbox label at all.
    let h = only(&t.explain(&["--format", "json"], &holder.name, 0));
    assert_eq!(h["managed"], false);
    assert_eq!(h["verdict"], "unmanaged");
    assert_eq!(h["excludedBy"]["rule"], "noSandboxLabel");

    // box:ID: every object of the box, container first.
    let out = t.explain(&[], &format!("box:{}", gone.id), 0);
    assert_eq!(
        out.stdout.matches("  plan:     remove, step ").count(),
        2,
        "{}",
        out.dump()
    );
    let doc = t
        .explain(&["--format", "json"], &format!("box:{}", gone.id), 0)
        .json();
    let kinds: Vec<&str> = doc["explanations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["container", "volume"]);

    t.snapshot("explain_kept_removed_blocked");
    assert_eq!(sbx.remaining().await, before, "explain changed nothing");
}

trial!(explain_unmanaged_look_alikes);
async fn explain_unmanaged_look_alikes() {
    let sbx = Sandbox::new("explain-look").await;
    let volume = sbx
        .volume(
            VolumeSpec::new()
                .label("ca.sandbox", "true")
                .name(sbx.unique("look-data")),
        )
        .await;
    let container = sbx
        .container(
            ContainerSpec::new()
                .label("ca.sandbox", "true")
                .name(sbx.unique("look"))
                .volume(&volume),
        )
        .await;
    // Managed by the sandbox label, but in another scope.
    let other = sbx
        .volume(
            VolumeSpec::new()
                .managed()
                .label("ca.sandbox.owner", "someone-else")
                .name(sbx.unique("other-owner")),
        )
        .await;
    let before = sbx.remaining().await;
    let cli = with_state(&sbx, &[]).args(["--scope", "ca.sandbox.owner=me"]);
    let mut t = Transcript::new(&sbx, &cli, &[("lookalike", &container)]);

    let out = t.explain(&[], &volume, 0);
    assert!(
        out.stdout
            .contains("  managed:  no: its ca.sandbox label is \"true\", not exactly \"1\"\n"),
        "{}",
        out.dump()
    );
    assert!(
        out.stdout.contains("  plan:     never touched"),
        "{}",
        out.dump()
    );
    for name in [&volume, &container.name] {
        let e = only(&t.explain(&["--format", "json"], name, 0));
        assert_eq!(e["managed"], false);
        assert_eq!(e["verdict"], "unmanaged");
        assert_eq!(
            e["excludedBy"],
            serde_json::json!({"rule": "sandboxValue", "value": "true"})
        );
        assert!(e.get("reason").is_none() && e.get("step").is_none(), "{e}");
    }
    let e = only(&t.explain(&["--format", "json"], &other, 0));
    assert_eq!(e["managed"], false);
    assert_eq!(e["excludedBy"]["rule"], "scopeLabel");
    assert_eq!(e["excludedBy"]["key"], "ca.sandbox.owner");
    assert_eq!(e["excludedBy"]["want"], "me");
    assert_eq!(e["excludedBy"]["have"], "someone-else");

    t.snapshot("explain_look_alikes");
    assert_eq!(sbx.remaining().await, before, "explain changed nothing");
}

trial!(explain_ambiguous_and_unknown_names_fail_with_candidates);
async fn explain_ambiguous_and_unknown_names_fail_with_candidates() {
    let sbx = Sandbox::new("explain-twin").await;
    // A container and a volume with one name (as `docker run -v NAME:/x --name NAME` makes).
    let name = sbx.unique("twin");
    let volume = sbx
        .volume(
            VolumeSpec::new()
                .in_box(&sbx.unique("twin"))
                .name(name.clone()),
        )
        .await;
    let container = sbx
        .container(
            ContainerSpec::new()
                .in_box(&sbx.unique("twin"))
                .name(name.clone())
                .volume(&volume),
        )
        .await;
    let before = sbx.remaining().await;
    let cli = with_state(&sbx, &[]);
    let mut t = Transcript::new(&sbx, &cli, &[("twin", &container)]);

    // Ambiguous: exit 1, nothing on stdout, both candidates named.
    let out = t.explain(&[], &name, 1);
    assert_eq!(out.stdout, "", "{}", out.dump());
    assert!(out.stderr.contains("matches 2 objects"), "{}", out.dump());
    assert!(
        out.stderr
            .contains(&format!("container {name} ({})", &container.id[..12])),
        "{}",
        out.dump()
    );
    assert!(
        out.stderr.contains(&format!("volume {name}")),
        "{}",
        out.dump()
    );
    let out = t.explain(&["--format", "json"], &name, 1);
    assert_eq!(out.stdout, "", "{}", out.dump());
    // Either of them by box (container first).
    let doc = t
        .explain(
            &["--format", "json"],
            &format!("box:{}", sbx.unique("twin")),
            0,
        )
        .json();
    assert_eq!(doc["explanations"].as_array().map(Vec::len), Some(2));

    // No match: exit 1; names that contain the query are offered.
    let out = t.explain(&[], &sbx.unique("twi"), 1);
    assert!(
        out.stderr
            .contains("no container, volume, network, service, config or secret matches"),
        "{}",
        out.dump()
    );
    assert!(out.stderr.contains("similar: "), "{}", out.dump());
    assert!(
        out.stderr.contains(&format!("volume {name}")),
        "{}",
        out.dump()
    );
    let out = t.explain(&[], &sbx.unique("nothing-like-it"), 1);
    assert!(
        out.stderr.contains("`sandboxctl inventory`"),
        "{}",
        out.dump()
    );
    // A near box ID is offered. Not in the snapshot: the offer also names
    // box IDs of other tests on the shared daemon: it looks at every box there.
    let out = cli.run_with(["explain", &format!("box:{}", sbx.unique("twi"))]);
    out.expect_code(1);
    assert!(
        out.stderr.contains(&format!("box:{}", sbx.unique("twin"))),
        "{}",
        out.dump()
    );

    t.snapshot("explain_ambiguous_and_unknown");
    assert_eq!(sbx.remaining().await, before, "explain changed nothing");
}
