//! `sandboxctl mcp` through a client nobody here wrote: the official MCP
//! Python SDK (`support::mcp`, `tests/mcp/client.py`), against the real
//! engine, each test in its own scope; and the protocol's lifecycle
//! (SIGTERM, the end of input) over the server's own pipes.
//!
//! Claims are checked three ways, as in `cli_docker`: what the client got
//! (`isError`, the structured content, the words), the engine's state after
//! (every object the test made that must stay is still there, unlabeled
//! holders and decoys included), and for a failure every object left behind
//! named with its reason.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::cli::{Cli, BIN};
use crate::support::docker::{Run, Sandbox, SandboxBox};
use crate::support::engines::SecondDockerd;
use crate::support::mcp::{Client, Seen, DEADLINE};

/// A client of `sbx`'s scope, with a state file (`toml`, after the scope).
fn client(sbx: &Sandbox, toml: &str) -> Client {
    Client::new(
        sbx.cli()
            .deadline(DEADLINE)
            .state_toml(&format!("{}{toml}", sbx.scope_toml())),
    )
}

/// The one result of a call step, failing the test on a protocol error.
fn called(seen: &Seen, i: usize) -> &Value {
    let r = seen.result(i);
    assert!(
        r.get("error").is_none(),
        "step {i} failed at the protocol level\n{}",
        seen.dump()
    );
    r
}

fn names(list: &Value) -> BTreeSet<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o["name"].as_str().map(str::to_string))
        .collect()
}

/// A box's container and volume are gone.
async fn assert_gone(sbx: &Sandbox, b: &SandboxBox, seen: &Seen) {
    crate::support::assert::assert_box_gone(sbx, b, &seen.dump()).await;
}

async fn assert_there(sbx: &Sandbox, b: &SandboxBox, seen: &Seen) {
    assert!(
        sbx.container_exists(&b.container.id).await && sbx.volume_exists(&b.volume).await,
        "box {} was touched\n{}",
        b.box_id,
        seen.dump()
    );
}

/// The tool list as the SDK got it: every tool, its input schema closed,
/// its output schema the published one, its annotations. No engine call:
/// the server lists tools without reaching one.
trial!(the_sdk_lists_every_tool_with_its_schemas_and_annotations);
fn the_sdk_lists_every_tool_with_its_schemas_and_annotations() {
    let seen = Client::new(Cli::new().unreachable_docker())
        .list_tools()
        .run();
    let init = &seen.doc["initialize"];
    assert_eq!(init["serverInfo"]["name"], "sandboxctl", "{}", seen.dump());
    assert!(init["capabilities"]["tools"].is_object(), "{}", seen.dump());
    let tools = seen.result(0)["tools"].as_array().expect("tools").clone();
    let listed: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(
        listed,
        ["plan", "destroy", "prune", "inventory", "explain", "lease"]
    );
    for tool in &tools {
        let name = tool["name"].as_str().unwrap();
        assert!(
            tool["description"].as_str().is_some_and(|d| d.len() > 80),
            "{name} has a description an agent can act on"
        );
        assert_eq!(tool["inputSchema"]["type"], "object", "{name}");
        assert_eq!(tool["inputSchema"]["additionalProperties"], false, "{name}");
        assert_eq!(tool["outputSchema"]["type"], "object", "{name}");
        let document = match name {
            "destroy" | "prune" => "report",
            other => other,
        };
        assert_eq!(
            tool["outputSchema"],
            crate::support::schema::committed(document),
            "{name}'s output schema is docs/schema/{document}.schema.json"
        );
        let hints = &tool["annotations"];
        let reads = matches!(name, "plan" | "inventory" | "explain");
        assert_eq!(hints["readOnlyHint"], reads, "{name}");
        if matches!(name, "destroy" | "prune") {
            assert_eq!(hints["destructiveHint"], true, "{name}");
            assert_eq!(hints["idempotentHint"], true, "{name}");
        }
    }
    let destroy = tools.iter().find(|t| t["name"] == "destroy").unwrap();
    let properties = &destroy["inputSchema"]["properties"];
    assert_eq!(properties["ids"]["type"], "array");
    assert_eq!(properties["ids"]["maxItems"], 256);
    assert_eq!(properties["keepVolume"]["type"], "boolean");
}

/// A running box destroyed through a tool call: not an error, converged,
/// its container and volume gone; another box, an unlabeled look-alike
/// container and volume, and the images untouched.
trial!(destroy_of_a_running_box_removes_it_and_nothing_else);
async fn destroy_of_a_running_box_removes_it_and_nothing_else() {
    let sbx = Sandbox::new("mcp-destroy").await;
    let (doomed, spared, decoys) = tokio::join!(
        sbx.add_box("doomed", Run::Running),
        sbx.add_box("spared", Run::Running),
        sbx.decoys(Run::Running),
    );
    let images = sbx.ca_sbx_images().await;
    let seen = client(&sbx, "")
        .call("destroy", json!({ "ids": ["doomed"] }))
        .run();
    let r = called(&seen, 0);
    assert_eq!(r["isError"], false, "{}", seen.dump());
    let report = &r["structured"];
    assert_eq!(report["converged"], true, "{}", seen.dump());
    crate::support::schema::check("report", report, "the destroy tool's structured content");
    // What it gave back: not measured without `mcp --reclaimed` (null, never 0).
    assert!(report["reclaimedBytes"].is_null(), "{}", seen.dump());
    assert_eq!(report["reclaimedUnmeasured"], 2, "{}", seen.dump());
    assert_eq!(
        names(&report["removed"]["containers"]),
        BTreeSet::from([doomed.container.name.clone()])
    );
    assert_eq!(
        names(&report["removed"]["volumes"]),
        BTreeSet::from([doomed.volume.clone()])
    );
    assert!(
        report["retained"]["images"]
            .as_array()
            .is_some_and(|i| !i.is_empty()),
        "the cached images are named as retained\n{}",
        seen.dump()
    );
    let text = r["text"].as_str().unwrap();
    assert!(text.contains("Converged"), "{text}");
    assert_gone(&sbx, &doomed, &seen).await;
    assert_there(&sbx, &spared, &seen).await;
    for c in &decoys.containers {
        assert!(
            sbx.container_exists(&c.id).await,
            "decoy {} touched",
            c.name
        );
    }
    for v in &decoys.volumes {
        assert!(sbx.volume_exists(v).await, "decoy {v} touched");
    }
    assert_eq!(sbx.ca_sbx_images().await, images, "no image removed");
}

/// `keepVolume: true` removes the box's container and keeps its volume.
trial!(keep_volume_keeps_the_boxs_volume);
async fn keep_volume_keeps_the_boxs_volume() {
    let sbx = Sandbox::new("mcp-keep-volume").await;
    let b = sbx.add_box("kept-data", Run::Exited).await;
    let seen = client(&sbx, "")
        .call(
            "destroy",
            json!({ "ids": ["kept-data"], "keepVolume": true }),
        )
        .run();
    let r = called(&seen, 0);
    assert_eq!(r["isError"], false, "{}", seen.dump());
    assert_eq!(r["structured"]["converged"], true);
    assert!(!sbx.container_exists(&b.container.id).await);
    assert!(sbx.volume_exists(&b.volume).await, "{}", seen.dump());
    assert!(names(&r["structured"]["kept"]["volumes"]).contains(&b.volume));
}

/// `prune` reclaims a leaked box and keeps the box the state file declares.
trial!(prune_keeps_the_declared_box_and_reclaims_the_leaked_one);
async fn prune_keeps_the_declared_box_and_reclaims_the_leaked_one() {
    let sbx = Sandbox::new("mcp-prune").await;
    let (declared, leaked) = tokio::join!(
        sbx.add_box("declared", Run::Running),
        sbx.add_box("leaked", Run::Exited),
    );
    let seen = client(&sbx, "\n[[box]]\nid = \"declared\"\n")
        .call("prune", json!({}))
        .run();
    let r = called(&seen, 0);
    assert_eq!(r["isError"], false, "{}", seen.dump());
    crate::support::schema::check(
        "report",
        &r["structured"],
        "the prune tool's structured content",
    );
    assert_gone(&sbx, &leaked, &seen).await;
    assert_there(&sbx, &declared, &seen).await;
    assert!(names(&r["structured"]["kept"]["containers"]).contains(&declared.container.name));
}

/// A box whose volume an unlabeled container holds: the call is an error,
/// the volume is named in `remainingVolumes` with its reason (the holder),
/// the holder is untouched, the rest of the box is gone.
trial!(a_volume_an_unlabeled_container_holds_is_an_error_naming_it);
async fn a_volume_an_unlabeled_container_holds_is_an_error_naming_it() {
    let sbx = Sandbox::new("mcp-held").await;
    let held = sbx.add_box("held", Run::Running).await;
    let holder = sbx.unmanaged_user(&held.volume, Run::Running).await;
    let seen = client(&sbx, "")
        .call("destroy", json!({ "ids": ["held"] }))
        .run();
    let r = called(&seen, 0);
    assert_eq!(r["isError"], true, "{}", seen.dump());
    let report = &r["structured"];
    crate::support::schema::check("report", report, "the destroy tool's structured content");
    assert_eq!(report["converged"], false);
    let left = report["remainingVolumes"]
        .as_array()
        .expect("remainingVolumes");
    let named = left
        .iter()
        .find(|l| l["name"] == held.volume.as_str())
        .unwrap_or_else(|| panic!("the held volume is not named\n{}", seen.dump()));
    assert_eq!(named["box"], "held");
    assert_eq!(named["reason"]["code"], "heldByUnmanaged", "{named}");
    assert!(
        named["reason"]["text"]
            .as_str()
            .is_some_and(|t| t.contains(&holder.name)),
        "the reason names the holder: {named}"
    );
    let text = r["text"].as_str().unwrap();
    assert!(text.contains("NOT converged"), "{text}");
    assert!(text.contains(&held.volume), "{text}");
    assert!(
        sbx.container_exists(&holder.id).await,
        "the holder was touched"
    );
    assert!(sbx.volume_exists(&held.volume).await);
    assert!(!sbx.container_exists(&held.container.id).await);
}

/// A box ID nothing in scope carries: the call is an error whose text
/// names the box and what to do (the inventory tool, `missingOk`), its
/// structured content `unknownBoxes`; with `missingOk: true` it is not an
/// error. An empty or missing `ids` is refused naming the prune tool. A
/// running box of the scope is untouched by all four.
trial!(destroy_of_a_box_nothing_carries_is_an_error_naming_it);
async fn destroy_of_a_box_nothing_carries_is_an_error_naming_it() {
    let sbx = Sandbox::new("mcp-unknown").await;
    let spared = sbx.add_box("spared", Run::Running).await;
    let seen = client(&sbx, "")
        .call("destroy", json!({ "ids": ["nosuchbox"] }))
        .call(
            "destroy",
            json!({ "ids": ["nosuchbox"], "missingOk": true }),
        )
        .call("destroy", json!({ "ids": [] }))
        .call("destroy", json!({}))
        .run();
    let r = called(&seen, 0);
    assert_eq!(r["isError"], true, "{}", seen.dump());
    let text = r["text"].as_str().unwrap();
    assert!(
        text.contains("box nosuchbox: NOT FOUND: nothing in scope carries ca.sandbox.id=nosuchbox"),
        "{text}"
    );
    assert!(
        text.contains("the inventory tool (pass missingOk: true when a missing box is fine)"),
        "{text}"
    );
    assert!(text.contains("NOT done: box nosuchbox not found"), "{text}");
    assert!(!text.contains("Converged"), "{text}");
    let report = &r["structured"];
    crate::support::schema::check("report", report, "the destroy tool's structured content");
    assert_eq!(
        report["unknownBoxes"],
        json!([{ "id": "nosuchbox", "status": "notFound" }]),
        "{}",
        seen.dump()
    );
    let r = called(&seen, 1);
    assert_eq!(r["isError"], false, "{}", seen.dump());
    assert_eq!(
        r["structured"]["unknownBoxes"],
        json!([{ "id": "nosuchbox", "status": "missingOk" }]),
        "{}",
        seen.dump()
    );
    let text = r["text"].as_str().unwrap();
    assert!(
        text.contains("box nosuchbox: nothing in scope carries"),
        "{text}"
    );
    assert!(text.contains("Converged"), "{text}");
    for i in [2, 3] {
        let r = called(&seen, i);
        assert_eq!(r["isError"], true, "{}", seen.dump());
        assert!(r["structured"].is_null(), "{}", seen.dump());
        let text = r["text"].as_str().unwrap();
        assert!(text.contains("prune tool"), "{text}");
    }
    assert_eq!(
        sbx.container_state(&spared.container.id).await.as_deref(),
        Some("running"),
        "{}",
        seen.dump()
    );
    assert_there(&sbx, &spared, &seen).await;
}

/// Every bad input is an error naming the argument (an unknown tool: a
/// protocol error), and nothing is removed: not before the engine is
/// asked, not by a later call.
trial!(every_bad_input_is_an_error_and_removes_nothing);
async fn every_bad_input_is_an_error_and_removes_nothing() {
    let sbx = Sandbox::new("mcp-bad-input").await;
    let b = sbx.add_box("intact", Run::Running).await;
    let huge: Vec<String> = (0..300).map(|i| format!("b{i}")).collect();
    let bad = [
        ("destroy", json!({ "ids": ["../intact"] }), "ids[0]"),
        ("destroy", json!({ "ids": "intact" }), "ids"),
        ("destroy", json!({ "ids": [42] }), "ids[0]"),
        (
            "destroy",
            json!({ "ids": ["intact"], "keepVolume": "no" }),
            "keepVolume",
        ),
        (
            "destroy",
            json!({ "ids": ["intact"], "scope": "ca.sandbox.test=other" }),
            "scope",
        ),
        (
            "destroy",
            json!({ "ids": ["intact"], "host": "tcp://127.0.0.1:1" }),
            "host",
        ),
        ("destroy", json!({ "ids": huge }), "ids"),
        // An empty or missing list never widens to "everything": refused,
        // naming the prune tool.
        ("destroy", json!({ "keepVolume": true }), "ids"),
        ("destroy", json!({ "ids": [] }), "ids"),
        ("destroy", json!({}), "ids"),
        (
            "prune",
            json!({ "labels": { "ca.sandbox": "1" } }),
            "labels",
        ),
        ("explain", json!({}), "object"),
        ("explain", json!({ "object": ["intact"] }), "object"),
        (
            "lease",
            json!({ "ids": ["intact"], "ttl": "forever" }),
            "ttl",
        ),
        ("lease", json!({ "ids": [] }), "ids"),
    ];
    let mut c = client(&sbx, "");
    for (tool, args, _) in &bad {
        c = c.call(tool, args.clone());
    }
    let seen = c.call("no-such-tool", json!({})).run();
    for (i, (tool, args, argument)) in bad.iter().enumerate() {
        let r = called(&seen, i);
        assert_eq!(r["isError"], true, "{tool} {args}\n{}", seen.dump());
        let text = r["text"].as_str().unwrap();
        assert!(
            text.contains(&format!("argument `{argument}`")) && text.contains("nothing was done"),
            "{tool} {args}: {text}"
        );
        assert!(r["structured"].is_null(), "{tool} {args}: no report");
        let names_no_box = args.get("ids").is_none_or(|ids| ids == &json!([]));
        if *tool == "destroy" && names_no_box {
            assert!(text.contains("prune tool"), "{tool} {args}: {text}");
        }
    }
    let unknown = seen.result(bad.len());
    let error = unknown["error"].as_str().unwrap_or_default();
    assert!(error.contains("unknown tool"), "{}", seen.dump());
    assert!(
        !seen.stderr.contains("mcp: destroy: ok") && !seen.stderr.contains("mcp: prune: ok"),
        "{}",
        seen.dump()
    );
    assert_there(&sbx, &b, &seen).await;
}

/// A server started with `--scope K=V` never removes an object outside it:
/// a box with the same ID in another scope, and leaks there, survive its
/// destroy and its prune.
trial!(a_server_never_removes_outside_its_scope);
async fn a_server_never_removes_outside_its_scope() {
    let (ours, theirs) = tokio::join!(
        Sandbox::new("mcp-scope-ours"),
        Sandbox::new("mcp-scope-theirs")
    );
    let (mine, same_id, their_leak) = tokio::join!(
        ours.add_box("twin", Run::Running),
        theirs.add_box("twin", Run::Running),
        theirs.leaked_volume(),
    );
    let seen = client(&ours, "")
        .call("destroy", json!({ "ids": ["twin"] }))
        .call("prune", json!({}))
        .call("inventory", json!({}))
        .run();
    for i in 0..3 {
        assert_eq!(called(&seen, i)["isError"], false, "{}", seen.dump());
    }
    assert_gone(&ours, &mine, &seen).await;
    assert_there(&theirs, &same_id, &seen).await;
    assert!(theirs.volume_exists(&their_leak).await, "{}", seen.dump());
    let inventory = called(&seen, 2)["structured"].to_string();
    assert!(
        !inventory.contains(theirs.scope_value()),
        "inventory shows only the server's scope: {inventory}"
    );
}

/// `n` created boxes (a container and its volume each) on `sbx`.
async fn boxes(sbx: &Sandbox, prefix: &str, n: usize) -> Vec<SandboxBox> {
    let ids: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    let mut made = Vec::with_capacity(n);
    for chunk in ids.chunks(8) {
        let batch = chunk.iter().map(|id| sbx.add_box(id, Run::Created));
        made.extend(futures_util::future::join_all(batch).await);
    }
    made
}

/// A prune of 24 boxes sends progress (done/total) as it goes: rising, its
/// total the plan's steps, the last one all of them.
trial!(a_prune_of_24_boxes_sends_progress);
async fn a_prune_of_24_boxes_sends_progress() {
    let sbx = Sandbox::new("mcp-progress").await;
    let made = boxes(&sbx, "p", 24).await;
    let seen = client(&sbx, "")
        .server_args(&["--parallelism", "4"])
        .step(json!({ "op": "call", "tool": "prune", "args": {}, "progress": true }))
        .run();
    let r = called(&seen, 0);
    assert_eq!(r["isError"], false, "{}", seen.dump());
    let progress: Vec<(f64, f64)> = r["progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_f64().unwrap(), p[1].as_f64().unwrap_or(-1.0)))
        .collect();
    assert!(
        progress.len() >= 24,
        "a notification per step: {progress:?}"
    );
    assert!(
        progress.windows(2).all(|w| w[1].0 > w[0].0),
        "progress rises: {progress:?}"
    );
    assert_eq!(progress.last(), Some(&(48.0, 48.0)), "{progress:?}");
    for b in &made {
        assert_gone(&sbx, b, &seen).await;
    }
}

/// A prune of 50 boxes cancelled by `notifications/cancelled` once some
/// removals are done: the call answers anyway, with its verified report,
/// `interrupted: true` and an error (as a Ctrl-C'd destroy exits 130);
/// every object it says it removed is gone and every one it names as left
/// is there. A prune after it converges. On a dockerd of the test's own.
trial!(a_cancelled_prune_answers_with_a_verified_report_and_the_next_converges);
async fn a_cancelled_prune_answers_with_a_verified_report_and_the_next_converges() {
    let engine = SecondDockerd::new().shared().await;
    let sbx = Sandbox::at("mcp-cancel", &engine.docker_host()).await;
    let made = boxes(&sbx, "c", 50).await;
    let cli = || sbx.cli().deadline(DEADLINE).state_toml(&sbx.scope_toml());
    let seen = Client::new(cli())
        // One removal at a time: the cancellation arrives long before the last.
        .server_args(&["--parallelism", "1"])
        .step(json!({ "op": "call", "tool": "prune", "args": {}, "cancelAfter": 6 }))
        .run();
    let r = called(&seen, 0);
    assert!(
        r["cancelledId"].is_number(),
        "the client cancelled\n{}",
        seen.dump()
    );
    assert_eq!(r["isError"], true, "{}", seen.dump());
    let report = &r["structured"];
    crate::support::schema::check("report", report, "the prune tool's structured content");
    assert_eq!(report["interrupted"], true, "{}", seen.dump());
    assert_eq!(report["converged"], false);
    let removed: BTreeSet<String> = ["containers", "volumes"]
        .iter()
        .flat_map(|k| names(&report["removed"][k]))
        .collect();
    let left: BTreeSet<String> = ["remainingContainers", "remainingVolumes"]
        .iter()
        .flat_map(|k| names(&report[k]))
        .collect();
    assert!(removed.len() >= 6 && removed.len() < 100, "{removed:?}");
    assert_eq!(
        removed.len() + left.len(),
        100,
        "every object is removed or named left"
    );
    for b in &made {
        for (name, there) in [
            (
                &b.container.name,
                sbx.container_exists(&b.container.id).await,
            ),
            (&b.volume, sbx.volume_exists(&b.volume).await),
        ] {
            assert_eq!(
                there,
                left.contains(name),
                "{name}: the report says {}\n{}",
                if left.contains(name) {
                    "left"
                } else {
                    "removed"
                },
                seen.dump()
            );
        }
    }
    assert!(r["text"].as_str().unwrap().contains("Interrupted"));
    let seen = Client::new(cli()).call("prune", json!({})).run();
    let again = called(&seen, 0);
    assert_eq!(again["isError"], false, "{}", seen.dump());
    assert_eq!(again["structured"]["converged"], true);
    for b in &made {
        assert_gone(&sbx, b, &seen).await;
    }
}

/// Two calls at once, on one session: both converge, each box gone.
trial!(two_calls_at_once_both_converge);
async fn two_calls_at_once_both_converge() {
    let sbx = Sandbox::new("mcp-concurrent").await;
    let (a, b) = tokio::join!(
        sbx.add_box("first", Run::Running),
        sbx.add_box("second", Run::Running)
    );
    let seen = client(&sbx, "")
        .step(json!({ "op": "concurrent", "calls": [
            { "tool": "destroy", "args": { "ids": ["first"] } },
            { "tool": "destroy", "args": { "ids": ["second"] } },
            { "tool": "inventory", "args": {} }
        ]}))
        .run();
    let results = seen.result(0)["concurrent"].as_array().unwrap().clone();
    for r in &results[..2] {
        assert!(r.get("error").is_none(), "{}", seen.dump());
        assert_eq!(r["isError"], false, "{}", seen.dump());
        assert_eq!(r["structured"]["converged"], true);
    }
    assert_eq!(results[2]["isError"], false, "{}", seen.dump());
    assert_gone(&sbx, &a, &seen).await;
    assert_gone(&sbx, &b, &seen).await;
}

// ----- the lifecycle, over the server's own pipes --------------------------

/// A server on pipes, spoken to in JSON-RPC lines.
struct Pipes {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Pipes {
    fn start(cli: &Cli, args: &[&str]) -> Pipes {
        let server = cli.server(args);
        let mut command = Command::new(BIN);
        command
            .args(
                server["args"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap()),
            )
            .current_dir(server["cwd"].as_str().unwrap())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in server["env"].as_object().unwrap() {
            command.env(k, v.as_str().unwrap());
        }
        let mut child = command.spawn().expect("start sandboxctl mcp");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut pipes = Pipes {
            stdin: child.stdin.take(),
            child,
            lines,
        };
        pipes.send(
            &json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": { "name": "sandboxctl-tests", "version": "0" } } }),
        );
        pipes.answer(0, Duration::from_secs(20));
        pipes.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
        pipes
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").expect("write to the server");
        stdin.flush().unwrap();
    }

    /// Every line until the answer to `id`: each one must be JSON-RPC.
    fn answer(&mut self, id: i64, within: Duration) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no answer to request {id} within {within:?}"));
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout carries a line that is not JSON ({e}): {line}"));
            assert_eq!(message["jsonrpc"], "2.0", "{line}");
            if message["id"] == id {
                return message;
            }
        }
    }

    /// The exit status, within `within`.
    fn exit(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        panic!("the server did not end within {within:?}");
    }
}

impl Drop for Pipes {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// SIGTERM during a prune: the prune starts no new removal, verifies and
/// answers (interrupted, an error), and the server then ends with 0; its
/// stdout held nothing but the protocol. The end of input ends an idle
/// server with 0 at once.
trial!(sigterm_ends_the_server_after_the_call_in_flight_answers);
async fn sigterm_ends_the_server_after_the_call_in_flight_answers() {
    let engine = SecondDockerd::new().shared().await;
    let sbx = Sandbox::at("mcp-sigterm", &engine.docker_host()).await;
    let made = boxes(&sbx, "t", 30).await;
    let cli = sbx.cli().state_toml(&sbx.scope_toml());
    let mut server = Pipes::start(&cli, &["mcp", "--parallelism", "1"]);
    server.send(
        &json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "prune", "arguments": {}, "_meta": { "progressToken": "p" } } }),
    );
    // The first removals are done: then SIGTERM.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let line = server
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("progress before the end");
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["method"] == "notifications/progress"
            && message["params"]["progress"].as_f64() >= Some(3.0)
        {
            break;
        }
    }
    crate::support::cli::signal_pid(server.child.id(), libc::SIGTERM);
    let answer = server.answer(1, Duration::from_secs(60));
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "{answer}");
    assert_eq!(result["structuredContent"]["interrupted"], true, "{answer}");
    assert_eq!(server.exit(Duration::from_secs(30)), Some(0));
    let left = made
        .iter()
        .filter(|b| {
            !result["structuredContent"]["removed"]["containers"]
                .to_string()
                .contains(&b.container.name)
        })
        .count();
    assert!(left > 0, "SIGTERM stopped the prune before its end");

    let mut idle = Pipes::start(&cli, &["mcp"]);
    drop(idle.stdin.take());
    assert_eq!(idle.exit(Duration::from_secs(10)), Some(0));
}

// ----- the agent plugin (integrations/agent-plugin) ------------------------

const PLUGIN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/integrations/agent-plugin");

/// A `PATH` whose first folder holds `sandboxctl`, the binary under test, as
/// an installed one would be.
fn path_with_sandboxctl(cli: &Cli) -> String {
    let bin = cli.dir().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let link = bin.join("sandboxctl");
    if !link.exists() {
        std::os::unix::fs::symlink(BIN, &link).unwrap();
    }
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The manifest is valid JSON that names the server as `sandboxctl mcp`;
/// started exactly so (the program looked up on `PATH`), the SDK lists its
/// six tools. The command's file takes the arguments the issue names and
/// runs `bin/sandbox-destroy` with them.
trial!(plugin_manifest_starts_the_server_and_names_the_command);
fn plugin_manifest_starts_the_server_and_names_the_command() {
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{PLUGIN}/.claude-plugin/plugin.json")).unwrap(),
    )
    .expect("plugin.json is JSON");
    assert_eq!(manifest["name"], "sandboxctl");
    let server = &manifest["mcpServers"]["sandboxctl"];
    assert_eq!(server["command"], "sandboxctl");
    assert_eq!(server["args"], json!(["mcp"]));
    let cli = Cli::new().unreachable_docker();
    let path = path_with_sandboxctl(&cli);
    let cli = cli.env("PATH", &path);
    let args: Vec<&str> = server["args"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .map(|a| a.as_str().unwrap())
        .collect();
    let seen = Client::new(cli)
        .program(server["command"].as_str().unwrap())
        .server_args(&args)
        .list_tools()
        .run();
    assert_eq!(
        seen.result(0)["tools"].as_array().map(Vec::len),
        Some(6),
        "{}",
        seen.dump()
    );

    let command = std::fs::read_to_string(format!("{PLUGIN}/commands/sandbox-destroy.md")).unwrap();
    let front = command
        .strip_prefix("---\n")
        .and_then(|rest| rest.split_once("\n---\n"))
        .map(|(front, _)| front)
        .expect("the command has frontmatter");
    let front: serde_yaml_ng::Value = serde_yaml_ng::from_str(front).expect("frontmatter is YAML");
    assert_eq!(
        front["argument-hint"].as_str(),
        Some("[<box id>] [--keep-volume] [--prune]")
    );
    assert!(front["description"].as_str().is_some());
    assert!(
        command.contains(r#"!`"${CLAUDE_PLUGIN_ROOT}/bin/sandbox-destroy" $ARGUMENTS"#),
        "the command runs bin/sandbox-destroy with its arguments"
    );
}

/// `bin/sandbox-destroy` against the real engine, in the test's scope (its
/// state file, as a host's environment gives it).
trial!(plugin_command_destroys_reports_and_names_what_is_left);
async fn plugin_command_destroys_reports_and_names_what_is_left() {
    let sbx = Sandbox::new("mcp-plugin").await;
    let (gone, kept_data, declared, leaked, held) = tokio::join!(
        sbx.add_box("gone", Run::Running),
        sbx.add_box("kept-data", Run::Exited),
        sbx.add_box("declared", Run::Running),
        sbx.add_box("leaked", Run::Created),
        sbx.add_box("held", Run::Running),
    );
    let holder = sbx.unmanaged_user(&held.volume, Run::Running).await;
    let cli = Cli::new();
    let state = cli.write(
        "state.toml",
        &format!(
            "{}\n[[box]]\nid = \"declared\"\n\n[[box]]\nid = \"held\"\n",
            sbx.scope_toml()
        ),
    );
    let cli = cli.env("SANDBOXCTL", BIN).env("SANDBOXCTL_STATE", &state);
    let command = std::path::Path::new(PLUGIN).join("bin/sandbox-destroy");
    let run = |args: &[&str]| cli.run_program(&command, args);

    // Refused before anything runs: exit 2, nothing removed.
    for bad in [
        &["a;b"][..],
        &["--scope", "x=y"],
        &["gone", "other"],
        &["--keep-volume"],
        &["gone", "--prune"],
        &["../gone"],
    ] {
        let out = run(bad);
        out.expect_code(2);
        assert!(
            out.stderr.contains("usage: sandbox-destroy"),
            "{}",
            out.dump()
        );
    }
    assert!(sbx.container_exists(&gone.container.id).await);

    let out = run(&["gone"]);
    out.success();
    assert!(out.stdout.contains(&gone.container.name), "{}", out.dump());
    assert!(
        out.stdout.contains("ca-sbx:"),
        "the retained images are named\n{}",
        out.dump()
    );
    assert!(out.stdout.contains("Converged"), "{}", out.dump());
    assert!(!sbx.container_exists(&gone.container.id).await);
    assert!(!sbx.volume_exists(&gone.volume).await);

    run(&["kept-data", "--keep-volume"]).success();
    assert!(!sbx.container_exists(&kept_data.container.id).await);
    assert!(sbx.volume_exists(&kept_data.volume).await);

    let out = run(&["held"]);
    out.expect_code(1);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(
        all.contains(&held.volume) && all.contains(&holder.name),
        "{}",
        out.dump()
    );
    assert!(!all.contains("Converged: a fresh"), "{}", out.dump());
    assert!(
        sbx.container_exists(&holder.id).await,
        "the holder is untouched"
    );
    assert!(sbx.volume_exists(&held.volume).await);

    // The declared boxes stay (the held one's volume with them); the leak
    // and the kept-data volume (no box declares it) go.
    run(&["--prune"]).success();
    assert!(!sbx.container_exists(&leaked.container.id).await);
    assert!(!sbx.volume_exists(&leaked.volume).await);
    assert!(!sbx.volume_exists(&kept_data.volume).await);
    assert!(sbx.container_exists(&declared.container.id).await);
    assert!(sbx.volume_exists(&declared.volume).await);
    assert!(sbx.container_exists(&holder.id).await);
}

// ----- the tool list, in process -------------------------------------------

/// The tools as the server lists them, snapshotted (their output schemas
/// stand for the published ones, which `the_sdk_lists_every_tool...` and
/// the schema tests compare). In memory: no engine is reached.
trial!(the_tool_list_is_the_snapshotted_one);
async fn the_tool_list_is_the_snapshotted_one() {
    use clap::Parser;
    use sandboxctl::engine::memory::{MemoryEngine, World};
    use sandboxctl::engine::Engine;
    let args = sandboxctl::cli::Cli::try_parse_from(["sandboxctl", "mcp"])
        .unwrap()
        .into_args()
        .unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = sandboxctl::cli::config::resolve(args)
        .unwrap()
        .with_state_folder(state.path().into());
    let engines: Vec<std::sync::Arc<dyn Engine>> =
        vec![std::sync::Arc::new(MemoryEngine::new(World::default()))];
    let (client, served) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(served);
    let mut sink = Quiet;
    let list = [("tools/list", json!({}))];
    let (exit, (answers, _)) = tokio::join!(
        sandboxctl::run::mcp_on(
            &config,
            engines,
            read,
            write,
            tokio_util::sync::CancellationToken::new(),
            &mut sink
        ),
        crate::support::mcp::exchange(client, &list),
    );
    assert_eq!(exit, sandboxctl::cli::exit::Exit::Success);
    let mut tools = answers[0]["result"]["tools"].clone();
    for tool in tools.as_array_mut().unwrap() {
        let name = tool["name"].as_str().unwrap();
        let document = if matches!(name, "destroy" | "prune") {
            "report"
        } else {
            name
        };
        assert_eq!(
            tool["outputSchema"],
            crate::support::schema::committed(document)
        );
        tool["outputSchema"] = json!(format!("docs/schema/{document}.schema.json"));
    }
    insta::with_settings!({ snapshot_path => "../snapshots" }, {
        insta::assert_json_snapshot!("mcp_tool_list", tools);
    });
}

/// Drops what the server says on stderr.
struct Quiet;

impl sandboxctl::run::Sink for Quiet {
    fn out(&mut self, _: &str) {}
    fn err(&mut self, _: &str) {}
}

/// Each text block of a result: the words first, then the structured
/// content as JSON, which parses to exactly `structuredContent`.
fn words_and_json<'a>(r: &'a Value, seen: &Seen) -> &'a str {
    let texts = r["texts"].as_array().expect("texts");
    assert_eq!(texts.len(), 2, "words, then JSON\n{}", seen.dump());
    let json: Value = serde_json::from_str(texts[1].as_str().expect("a text block"))
        .expect("the second block is JSON");
    assert_eq!(json, r["structured"], "the JSON block is structuredContent");
    texts[0].as_str().unwrap()
}

/// A host that shows the model only the text: inventory names box t1's
/// container and volume, plan names them with the reason's words and code,
/// explain gives the reason; every JSON block is the structured content.
trial!(an_agent_reads_objects_and_reasons_in_the_text);
async fn an_agent_reads_objects_and_reasons_in_the_text() {
    let sbx = Sandbox::new("mcp-text").await;
    let t1 = sbx.add_box("t1", Run::Exited).await;
    let seen = client(&sbx, "")
        .call("inventory", json!({}))
        .call("plan", json!({}))
        .call("explain", json!({ "object": t1.container.name }))
        .run();
    let inventory = words_and_json(called(&seen, 0), &seen);
    assert!(inventory.contains(&t1.container.name), "{inventory}");
    assert!(inventory.contains(&t1.volume), "{inventory}");
    let plan = words_and_json(called(&seen, 1), &seen);
    assert!(plan.contains(&t1.container.name), "{plan}");
    assert!(plan.contains(&t1.volume), "{plan}");
    assert!(plan.contains("not declared"), "{plan}");
    assert!(plan.contains("[boxNotDeclared]"), "{plan}");
    let explain = words_and_json(called(&seen, 2), &seen);
    assert!(explain.contains("not declared"), "{explain}");
    assert_there(&sbx, &t1, &seen).await;
}

/// `--read-only` lists the readers only; a destroy call is refused as an
/// unknown tool and removes nothing. `--tools` offers exactly those named.
trial!(read_only_and_tool_sets_gate_what_is_offered);
async fn read_only_and_tool_sets_gate_what_is_offered() {
    let sbx = Sandbox::new("mcp-gate").await;
    let b = sbx.add_box("gated", Run::Running).await;
    let seen = client(&sbx, "")
        .server_args(&["--read-only"])
        .list_tools()
        .call("destroy", json!({ "ids": ["gated"] }))
        .call("prune", json!({}))
        .run();
    let listed = names(&seen.result(0)["tools"]);
    assert_eq!(
        listed,
        BTreeSet::from(["explain".into(), "inventory".into(), "plan".into()])
    );
    for i in [1, 2] {
        let error = seen.result(i)["error"].as_str().unwrap_or_default();
        assert!(error.contains("unknown tool"), "step {i}\n{}", seen.dump());
    }
    assert_there(&sbx, &b, &seen).await;

    let seen = client(&sbx, "")
        .server_args(&["--tools", "plan,destroy"])
        .list_tools()
        .call("prune", json!({}))
        .run();
    assert_eq!(
        names(&seen.result(0)["tools"]),
        BTreeSet::from(["destroy".into(), "plan".into()])
    );
    assert!(seen.result(1)["error"].is_string(), "{}", seen.dump());
    assert_there(&sbx, &b, &seen).await;

    // An unknown name is an error at start: no server, no engine call.
    let out = sbx.cli().run_with(["mcp", "--tools", "plan,nuke"]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("nuke"), "{}", out.stderr);
}

/// `reclaimed: true` measures what the destroy gave back: a number.
trial!(destroy_with_reclaimed_reports_a_number);
async fn destroy_with_reclaimed_reports_a_number() {
    let sbx = Sandbox::new("mcp-reclaimed").await;
    let b = sbx.add_box("measured", Run::Exited).await;
    let seen = client(&sbx, "")
        .call("destroy", json!({ "ids": ["measured"], "reclaimed": true }))
        .run();
    let r = called(&seen, 0);
    assert_eq!(r["isError"], false, "{}", seen.dump());
    assert!(
        r["structured"]["reclaimedBytes"].is_u64(),
        "{}",
        seen.dump()
    );
    assert_gone(&sbx, &b, &seen).await;
}
