//! The published schema of every JSON document (docs/schema/): the
//! committed files are the ones `sandboxctl::schema` generates, every JSON
//! document stored in `snapshots/` matches its schema, a document that is
//! wrong in type, key or code does not, and a real box's `destroy --format
//! json` (and its audit lines, `plan`, `inventory`, `explain`) matches.
//!
//! Every other test that reads a document through `support::cli`
//! (`Output::json`, `parse`, the typed mirror), the honesty matrix's runs, the
//! planner's snapshots and the audit and manifest readers checks it too
//! (`support::schema`).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::support::docker::{Run, Sandbox};
use crate::support::schema::{check, check_audit, check_redacted, committed, file, of_command};

/// The variable that makes `committed_files_are_the_generated_ones` write
/// the schemas instead of comparing them.
const UPDATE: &str = "SANDBOXCTL_UPDATE_SCHEMA";

/// Every schema as it is committed: pretty JSON and a newline.
fn text_of(schema: &Value) -> String {
    serde_json::to_string_pretty(schema).expect("a schema serializes") + "\n"
}

trial!(committed_files_are_the_generated_ones);
/// Each `docs/schema/<name>.schema.json` is what `sandboxctl::schema`
/// generates, and the folder holds nothing else; with
/// `SANDBOXCTL_UPDATE_SCHEMA=1` the files are written instead, as insta
/// writes snapshots.
fn committed_files_are_the_generated_ones() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join(sandboxctl::schema::FOLDER);
    let update = std::env::var_os(UPDATE).is_some_and(|v| !v.is_empty());
    let documents = sandboxctl::schema::documents();
    let mut differ = Vec::new();
    for (name, schema) in &documents {
        let path = file(name);
        let generated = text_of(schema);
        if update {
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(&path, &generated).unwrap();
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(text) if text == generated => {}
            Ok(_) => differ.push(format!("{} differs from what is generated", path.display())),
            Err(e) => differ.push(format!("{}: {e}", path.display())),
        }
    }
    let names: Vec<String> = documents
        .iter()
        .map(|(n, _)| format!("{n}.schema.json"))
        .collect();
    for entry in std::fs::read_dir(&folder).into_iter().flatten() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !names.contains(&name) {
            differ.push(format!(
                "{}/{name} is no document's schema: remove it",
                folder.display()
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "{}\nThe JSON documents changed: if on purpose, make the schemas again with `{UPDATE}=1 cargo test --test sandboxctl schema`, review the diff, and say in docs/report.md what changed (a change a reader of the old schema could misread raises SCHEMA_VERSION).",
        differ.join("\n")
    );
}

/// The body of a snapshot file (after its `---` header).
fn body(text: &str) -> &str {
    text.split_once("\n---\n").map_or(text, |(_, b)| b)
}

/// The document a whole-JSON snapshot holds, by its file's name.
fn document_of_snapshot(name: &str) -> Option<&'static str> {
    let stem = name.trim_start_matches("sandboxctl__");
    [
        ("plan_json@", "plan"),
        ("report_json@", "report"),
        ("render__plan__tests__plan_", "plan"),
        ("render__report__tests__report_", "report"),
        ("networks__box_with_network_plan", "plan"),
        ("networks__box_with_network_report", "report"),
        ("validate_", "validate"),
    ]
    .iter()
    .find(|(prefix, _)| stem.starts_with(prefix))
    .map(|(_, document)| *document)
}

/// `value` with the placeholders a snapshot puts where a type matters put
/// back as a value of that type (`"retained": "[images]"`).
fn unredacted(mut value: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(map) => {
                for (k, x) in map.iter_mut() {
                    if k == "retained" && *x == json!("[images]") {
                        *x = json!({ "images": [] });
                    } else {
                        walk(x);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut value);
    value
}

/// The JSON documents of a transcript snapshot (`$ sandboxctl ... # exit N`
/// then what it printed, `[stderr] ...` after): each with its command.
fn transcript_documents(body: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for block in body.split("\n$ ").map(|b| b.trim_start_matches("$ ")) {
        let (command, printed) = block.split_once('\n').unwrap_or((block, ""));
        let printed = printed.split("\n[stderr]").next().unwrap_or_default();
        let command = format!("sandboxctl {}", command.trim_start_matches("sandboxctl "));
        if command.contains("--format json") {
            if let Ok(value) = serde_json::from_str::<Value>(printed) {
                out.push((command, value));
            }
        }
    }
    out
}

trial!(every_json_document_in_the_snapshots_matches_its_schema);
/// Every snapshot that is one JSON document, and every JSON document in a
/// transcript snapshot, matches the schema of its document (formats not
/// checked: snapshots hold placeholders for times and IDs). A JSON
/// snapshot of no known document fails: say here which it is.
fn every_json_document_in_the_snapshots_matches_its_schema() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "snap"))
        .collect();
    paths.sort();
    let mut checked = 0;
    for path in paths {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let body = body(&text);
        if let Ok(value) = serde_json::from_str::<Value>(body) {
            if !value.is_object() {
                continue;
            }
            let document = document_of_snapshot(&name).unwrap_or_else(|| {
                panic!("{name} holds a JSON document of no known schema: name it in document_of_snapshot")
            });
            check_redacted(document, &unredacted(value), &name);
            checked += 1;
            continue;
        }
        for (command, value) in transcript_documents(body) {
            let document = of_command(&command)
                .unwrap_or_else(|| panic!("{name}: `{command}` prints no known document"));
            check_redacted(document, &unredacted(value), &format!("{name}: {command}"));
            checked += 1;
        }
    }
    // The examples' plans and reports alone are 34.
    assert!(checked > 40, "only {checked} documents found in snapshots/");
}

trial!(documents_wrong_in_type_key_or_code_do_not_match_the_committed_schemas);
/// The committed schemas refuse what they must: a wrong type, a missing
/// key, an unknown key, an unknown reason code, another schema version, a
/// problem's line that is text, an audit line of an outcome that was never
/// attempted.
fn documents_wrong_in_type_key_or_code_do_not_match_the_committed_schemas() {
    let matches = |name: &str, document: &Value| {
        jsonschema::draft202012::new(&committed(name))
            .unwrap()
            .is_valid(document)
    };
    let validate = json!({
        "schemaVersion": 2,
        "files": [{"path": "a.toml", "problems": [
            {"column": 9, "line": 5, "message": "m", "text": "a.toml:5:9: m"}
        ], "valid": false}],
        "valid": false
    });
    assert!(matches("validate", &validate));
    let mut line_as_text = validate.clone();
    line_as_text["files"][0]["problems"][0]["line"] = json!("5");
    let mut no_valid = validate.clone();
    no_valid.as_object_mut().unwrap().remove("valid");
    let mut extra = validate.clone();
    extra["files"][0]["size"] = json!(3);
    let mut version = validate;
    version["schemaVersion"] = json!(0);
    for (what, document) in [
        ("a line that is text", line_as_text),
        ("no valid", no_valid),
        ("an unknown key", extra),
        ("schema version 0", version),
    ] {
        assert!(!matches("validate", &document), "{what} matched");
    }
    let audit = json!({
        "time": "2027-01-15T08:00:00.000Z", "engine": "default", "kind": "volume",
        "name": "v", "labels": {"ca.sandbox": "1"},
        "reason": {"code": "noBoxLabel", "text": "leaked: no ca.sandbox.id label"},
        "outcome": "removed"
    });
    assert!(matches("audit", &audit));
    let mut skipped = audit.clone();
    skipped["outcome"] = json!("skipped");
    let mut unknown = audit.clone();
    unknown["reason"]["code"] = json!("gremlins");
    let mut kind = audit;
    kind["kind"] = json!("image");
    for (what, line) in [
        ("a step never attempted", skipped),
        ("an unknown reason code", unknown),
        ("an image", kind),
    ] {
        assert!(!matches("audit", &line), "{what} matched");
    }
}

trial!(destroy_json_of_a_real_box_matches_the_report_schema);
/// On the real engine: `destroy BOX --format json --audit FILE` of a box
/// (its container and volume), beside a declared box, prints a report that
/// matches `report.schema.json` and writes audit lines that match
/// `audit.schema.json`; `plan`, `inventory` and `explain` of the same scope
/// match theirs.
async fn destroy_json_of_a_real_box_matches_the_report_schema() {
    let sbx = Sandbox::new("schema-destroy").await;
    let (keep, gone) = tokio::join!(
        sbx.add_box("keep", Run::Running),
        sbx.add_box("gone", Run::Exited)
    );
    let cli = sbx
        .cli()
        .json()
        .state_toml(&format!("{}\n[[box]]\nid = \"keep\"\n", sbx.scope_toml()));
    for args in [
        vec!["plan".to_string()],
        vec!["inventory".into()],
        vec!["explain".into(), "box:keep".into()],
    ] {
        let out = cli.run_with(&args);
        out.success();
        let document = of_command(&out.command).unwrap();
        check(document, &out.json(), &out.command);
    }
    let audit = cli.dir().join("audit.jsonl");
    let out = cli.run_with(["destroy", "gone", "--audit", audit.to_str().unwrap()]);
    out.success();
    let report = out.json();
    check("report", &report, &out.command);
    assert_eq!(report["schemaVersion"], 2, "{}", out.dump());
    assert_eq!(report["converged"], true, "{}", out.dump());
    let removed: Vec<&str> = ["containers", "volumes"]
        .iter()
        .flat_map(|k| report["removed"][k].as_array().unwrap())
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        removed,
        [gone.container.name.as_str(), gone.volume.as_str()],
        "{}",
        out.dump()
    );
    let text = std::fs::read_to_string(&audit).unwrap();
    let lines = check_audit(&text, &audit.display().to_string());
    assert_eq!(lines.len(), 2, "{text}");
    assert!(sbx.container_exists(&keep.container.id).await);
}
