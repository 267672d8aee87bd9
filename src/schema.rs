//! The published schema of every JSON document sandboxctl prints or writes:
//! the report, the plan (printed and saved), the inventory, explain,
//! validate, lease, restore and health documents, the error document of a
//! refused run, a JSON line of `watch`'s log and of `hold`, a line of the
//! audit log, an archive's manifest and a notification's body, each
//! committed as `docs/schema/<name>.schema.json` (JSON Schema draft
//! 2020-12, self-contained: every definition in its own `$defs`).
//!
//! Generated, never written by hand: each schema is `schemars`' schema of
//! the very type that `render` (or the audit log) serializes, under the
//! serialize contract (what is printed, not what would be read back), with
//! `$id` and `title` naming the document and its version
//! (`model::SCHEMA_VERSION`). What no type says is added here, and only that:
//! a saved plan's `seal`, which `exec::seal` adds to the printed plan. The
//! tests compare these with the committed files and validate every JSON
//! document the suite produces against them; see
//! `docs/decisions/0012-json-schema.md`.
//!
//! Must not print, read or write a file, or change what a document holds.

use schemars::generate::SchemaSettings;
use schemars::transform::{RecursiveTransform, Transform};
use schemars::{JsonSchema, Schema};
use serde_json::{json, Value};

use crate::model::SCHEMA_VERSION;
use crate::render::Versioned;

/// The folder of the committed schemas, relative to the repository.
pub const FOLDER: &str = "docs/schema";

/// Every document's name and schema, in the order of docs/report.md: the
/// file of each is `docs/schema/<name>.schema.json`.
pub fn documents() -> Vec<(&'static str, Value)> {
    vec![
        ("report", report()),
        ("plan", plan()),
        ("inventory", inventory()),
        ("explain", explain()),
        ("validate", validate()),
        ("lease", lease()),
        ("restore", restore()),
        ("health", health()),
        ("error", error()),
        ("watch-line", watch_line()),
        ("hold-line", hold_line()),
        ("audit", audit()),
        ("manifest", manifest()),
        ("notify", notify()),
    ]
}

/// The schema of the report of `apply`, `destroy`, `watch --once` and a
/// stopped `watch` (`--format json`), one engine's or a fleet's.
pub fn report() -> Value {
    finish(
        "report",
        "The report of apply, destroy, watch --once and a stopped watch (`--format json`): one engine's, or a fleet's with `engines`.",
        generate::<Versioned<crate::render::ReportDoc<'static>>>(),
    )
}

/// The schema of `plan --format json` and of the file `plan --out` saves
/// (the same document with its `seal`), one engine's or a fleet's.
pub fn plan() -> Value {
    let mut schema = finish(
        "plan",
        "The plan of `plan --format json`, and the file `plan --out` saves (the same document with its `seal`): one engine's, or a fleet's.",
        generate::<Versioned<crate::render::PlanDoc<'static>>>(),
    );
    schema["properties"]["seal"] = json!({
        "description": "A saved plan's seal (`plan --out`): an HMAC-SHA256 under the user's plan key over the plan's canonical JSON; absent from a printed plan.",
        "type": "string",
        "pattern": format!("^{}[0-9a-f]{{64}}$", crate::exec::seal::PREFIX),
    });
    schema
}

/// The schema of `inventory --format json`, one engine's or a fleet's.
pub fn inventory() -> Value {
    finish(
        "inventory",
        "The inventory of `inventory --format json`: one engine's, or a fleet's engine by engine.",
        generate::<Versioned<crate::render::InventoryDoc<'static>>>(),
    )
}

/// The schema of `explain --format json`.
pub fn explain() -> Value {
    finish(
        "explain",
        "What `explain --format json` says of every object its query names.",
        generate::<Versioned<crate::render::ExplainDoc<'static>>>(),
    )
}

/// The schema of `validate --format json`.
pub fn validate() -> Value {
    finish(
        "validate",
        "What `validate --format json` says of every state file.",
        generate::<Versioned<crate::render::ValidateDoc>>(),
    )
}

/// The schema of `lease --format json` and `lease --release --format json`.
pub fn lease() -> Value {
    finish(
        "lease",
        "What `lease --format json` and `lease --release --format json` did, engine by engine and box by box.",
        generate::<Versioned<crate::render::LeaseDoc<'static>>>(),
    )
}

/// The schema of `restore --format json`.
pub fn restore() -> Value {
    finish(
        "restore",
        "What `restore --format json` restored, or why it did not.",
        generate::<Versioned<crate::render::RestoreDoc<'static>>>(),
    )
}

/// The schema of `health --format json`.
pub fn health() -> Value {
    finish(
        "health",
        "What `health --format json` says of a running watch's `/healthz`: what it answered, or why nothing did.",
        generate::<Versioned<crate::render::HealthDoc<'static>>>(),
    )
}

/// The schema of the error document: what every command prints on stdout
/// under `--format json` when it is refused before any work.
pub fn error() -> Value {
    finish(
        "error",
        "Why a command was refused before any work (`--format json`, on stdout, for every command): one document, the same shape for all.",
        generate::<Versioned<crate::render::ErrorDoc<'static>>>(),
    )
}

/// The schema of one JSON line of `watch`'s log (`--format json`, on
/// stderr): one object per line, its `event` saying which.
pub fn watch_line() -> Value {
    finish(
        "watch-line",
        "One line of the watch log (`watch --format json`, on stderr): one JSON object per line, `event` saying what happened.",
        generate::<Versioned<crate::render::WatchLine<'static>>>(),
    )
}

/// The schema of one JSON line of `hold` (`--format json`, on stderr; its
/// stdout is its command's).
pub fn hold_line() -> Value {
    finish(
        "hold-line",
        "One line of `hold --format json` (on stderr; stdout is the command's): one JSON object per line, `event` saying what happened to the lease or the command.",
        generate::<Versioned<crate::render::HoldLine<'static>>>(),
    )
}

/// The schema of one line of the audit log (`--audit FILE`): one JSON
/// object per line, without `schemaVersion` (a line without it is of
/// version 1; see the decision record).
pub fn audit() -> Value {
    finish(
        "audit",
        "One line of the audit log (`--audit FILE`): one removal attempt.",
        generate::<crate::observe::audit::Line<'static>>(),
    )
}

/// The schema of an archive's manifest (`--archive DIR`: the `.json`
/// beside each `.tar.zst`), which `restore` reads back. Its own `version`
/// is its format's; it carries no `schemaVersion`.
pub fn manifest() -> Value {
    finish(
        "manifest",
        "The manifest beside each archive that `--archive DIR` writes: where the volume came from and what the archive holds.",
        generate::<crate::exec::archive::Manifest>(),
    )
}

/// The schema of a notification's body (`[[notify]]`): one JSON object
/// per `POST`, signed in `X-Sandboxctl-Signature-256`.
pub fn notify() -> Value {
    finish(
        "notify",
        "The body of a notification (`[[notify]]`): one JSON object per POST, its HMAC-SHA256 in `X-Sandboxctl-Signature-256`; `event` says what happened to the box.",
        generate::<crate::observe::notify::Body<'static>>(),
    )
}

/// The schema of `T` under the serialize contract, draft 2020-12, with
/// what only reading needs taken out (see [`printed`]).
fn generate<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>();
    RecursiveTransform(printed).transform(&mut schema);
    schema.to_value()
}

/// Makes `schema` say what is printed, where `schemars` says what could be
/// read: a key that may be left out (every one is an `Option` left out when
/// `None`, or an empty list) is never `null` when it is there, and a
/// `default` (what a reader would fill in) says nothing of a printed
/// document. For one schema: `RecursiveTransform` takes it to every
/// subschema (after their parent).
fn printed(schema: &mut Schema) {
    let Some(map) = schema.as_object_mut() else {
        return;
    };
    map.remove("default");
    let required: Vec<String> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|k| k.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        for (key, property) in properties.iter_mut() {
            if !required.contains(key) {
                never_null(property);
            }
        }
    }
}

/// `property` without `null` among what it may be.
fn never_null(property: &mut Value) {
    let Value::Object(map) = property else { return };
    if let Some(Value::Array(types)) = map.get("type") {
        let left: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        map["type"] = match left.as_slice() {
            [one] => one.clone(),
            _ => Value::Array(left),
        };
    }
    if let Some(Value::Array(options)) = map.get("anyOf") {
        let left: Vec<Value> = options
            .iter()
            .filter(|o| **o != json!({"type": "null"}))
            .cloned()
            .collect();
        if let [only] = left.as_slice() {
            let only = only.clone();
            map.remove("anyOf");
            if let Value::Object(only) = only {
                map.extend(only);
            }
        } else {
            map["anyOf"] = Value::Array(left);
        }
    }
}

/// `schema` with its `$id` and `title` (the document and its version), the
/// document's `description`, and `"type": "object"` at its root. (The keys
/// come out sorted: serde_json's map is ordered by key.)
fn finish(name: &str, what: &str, schema: Value) -> Value {
    let Value::Object(mut out) = schema else {
        unreachable!("a root schema is an object")
    };
    out.entry("$schema")
        .or_insert_with(|| json!("https://json-schema.org/draft/2020-12/schema"));
    out.insert(
        "$id".into(),
        json!(format!("urn:sandboxctl:schema:{name}:v{SCHEMA_VERSION}")),
    );
    out.insert(
        "title".into(),
        json!(format!(
            "sandboxctl {name}, schema version {SCHEMA_VERSION}"
        )),
    );
    out.insert("description".into(), json!(what));
    out.insert("type".into(), json!("object"));
    // A document is exactly one of its shapes (one engine's or a fleet's):
    // each requires keys the other lacks.
    if let Some(shapes) = out.remove("anyOf") {
        out.insert("oneOf".into(), shapes);
    }
    Value::Object(out)
}

/// Checks `text`, a JSON document of `name` (`report`, `plan`, ...), against
/// its generated schema, formats included; panics naming the document, each
/// path and error. For the unit tests of the views.
#[cfg(test)]
pub(crate) fn check(name: &str, text: &str) {
    use std::collections::BTreeMap;
    use std::sync::OnceLock;
    static VALIDATORS: OnceLock<BTreeMap<&'static str, jsonschema::Validator>> = OnceLock::new();
    let validators = VALIDATORS.get_or_init(|| {
        documents()
            .into_iter()
            .map(|(name, schema)| {
                let validator = jsonschema::options()
                    .with_draft(jsonschema::Draft::Draft202012)
                    .should_validate_formats(true)
                    .build(&schema)
                    .unwrap_or_else(|e| panic!("the {name} schema does not compile: {e}"));
                (name, validator)
            })
            .collect()
    });
    let validator = validators
        .get(name)
        .unwrap_or_else(|| panic!("no document is named {name}"));
    let document: Value =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("not a {name} document: {e}\n{text}"));
    let errors: Vec<String> = validator
        .iter_errors(&document)
        .map(|e| format!("  at {}: {e}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "this {name} document does not match the {name} schema:\n{}\n{text}",
        errors.join("\n")
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::{hostile_report, plan_of_two, report_not_converged};

    /// True when `text` matches the schema of `name`.
    fn matches(name: &str, document: &Value) -> bool {
        let schema = documents().into_iter().find(|(n, _)| *n == name).unwrap().1;
        jsonschema::draft202012::new(&schema)
            .unwrap()
            .is_valid(document)
    }

    /// The one vocabulary (docs/report.md#one-vocabulary, decision 19):
    /// every key that names one of its concepts has one shape in every
    /// document, and no synonym of it is used. Every document sandboxctl
    /// prints (and the MCP tools' results, which are these files) is
    /// checked: a document added to `documents()` is walked with the rest,
    /// and a command that prints an existing document needs no line here.
    #[test]
    fn every_document_speaks_one_vocabulary() {
        /// What a key of the vocabulary must be, given the schema at it.
        fn shape(key: &str, at: &Value, defs: &Value) -> Option<&'static str> {
            let resolved = match at.get("$ref").and_then(Value::as_str) {
                Some(r) => &defs[r.trim_start_matches("#/$defs/")],
                None => at,
            };
            let ty = resolved.get("type");
            match key {
                // A reason: its `code` and its words (`text`), one type.
                "reason" => (at.get("$ref") != Some(&json!("#/$defs/Reason")))
                    .then_some("a $ref to the Reason type"),
                // The labels a managed object carries: an object of strings.
                "scope" => (ty != Some(&json!("object"))).then_some("an object of labels"),
                // The images: a list of ImageInfo, only under `retained`.
                "retained" => (resolved["properties"]["images"]["type"] != "array")
                    .then_some("an object with an `images` list"),
                "schemaVersion" => {
                    (ty != Some(&json!("integer"))).then_some("the document's integer version")
                }
                "engine" => {
                    (ty != Some(&json!("string")) && ty.is_some()).then_some("the engine's name")
                }
                "endpoint" => (ty != Some(&json!("string"))).then_some("the engine's address"),
                _ => None,
            }
        }
        /// Synonyms of a concept's key: never used (`version` only in the
        /// archive manifest, whose format it is).
        const SYNONYMS: [(&str, &str); 4] = [
            ("why", "reason"),
            ("images", "retained.images"),
            ("version", "schemaVersion"),
            ("scopeLabels", "scope"),
        ];
        fn walk(
            name: &str,
            at: &str,
            schema: &Value,
            defs: &Value,
            parent: &str,
            bad: &mut Vec<String>,
        ) {
            match schema {
                Value::Object(map) => {
                    if let Some(Value::Object(props)) = map.get("properties") {
                        for (key, value) in props {
                            if let Some(want) = shape(key, value, defs) {
                                bad.push(format!("{name}: {at}/{key} is not {want}"));
                            }
                            for (synonym, word) in SYNONYMS {
                                let allowed = (key == "images"
                                    && (parent == "retained" || at.starts_with("/$defs/Retained")))
                                    || (key == "version" && name == "manifest");
                                if key == synonym && !allowed {
                                    bad.push(format!("{name}: {at}/{key}: say {word}"));
                                }
                            }
                            walk(name, &format!("{at}/{key}"), value, defs, key, bad);
                        }
                    }
                    for (key, value) in map {
                        if key != "properties" {
                            walk(name, &format!("{at}/{key}"), value, defs, parent, bad);
                        }
                    }
                }
                Value::Array(items) => {
                    for (i, v) in items.iter().enumerate() {
                        walk(name, &format!("{at}/{i}"), v, defs, parent, bad);
                    }
                }
                _ => {}
            }
        }
        let mut bad = Vec::new();
        for (name, schema) in documents() {
            let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
            walk(name, "", &schema, &defs, "", &mut bad);
        }
        assert!(bad.is_empty(), "not one vocabulary:\n{}", bad.join("\n"));
    }

    #[test]
    fn every_schema_is_a_self_contained_object_schema_of_draft_2020_12() {
        for (name, schema) in documents() {
            jsonschema::draft202012::meta::validate(&schema)
                .unwrap_or_else(|e| panic!("{name}: not a draft 2020-12 schema: {e}"));
            assert_eq!(schema["type"], "object", "{name}");
            assert_eq!(
                schema["$id"],
                format!("urn:sandboxctl:schema:{name}:v{SCHEMA_VERSION}")
            );
            let text = schema.to_string();
            for reference in text.split("\"$ref\":\"").skip(1) {
                assert!(reference.starts_with("#/$defs/"), "{name}: {reference}");
            }
        }
    }

    /// Every object the schemas describe is closed: `additionalProperties`
    /// or `unevaluatedProperties` is false at the schema that holds its
    /// properties or at the one whose shapes (`oneOf`, `anyOf`) hold them.
    #[test]
    fn every_object_is_closed() {
        fn walk(name: &str, at: &str, schema: &Value, closed_above: bool) {
            let Value::Object(map) = schema else { return };
            let closed = map.get("additionalProperties") == Some(&json!(false))
                || map.get("unevaluatedProperties") == Some(&json!(false));
            if map.contains_key("properties") {
                assert!(closed || closed_above, "{name}: {at} is not closed");
            }
            if let Some(Value::Object(props)) = map.get("properties") {
                for (k, v) in props {
                    walk(name, &format!("{at}/properties/{k}"), v, false);
                }
            }
            if let Some(Value::Object(defs)) = map.get("$defs") {
                for (k, v) in defs {
                    walk(name, &format!("{at}/$defs/{k}"), v, false);
                }
            }
            if let Some(items) = map.get("items") {
                walk(name, &format!("{at}/items"), items, false);
            }
            for key in ["oneOf", "anyOf", "allOf"] {
                if let Some(Value::Array(shapes)) = map.get(key) {
                    let unevaluated = map.get("unevaluatedProperties") == Some(&json!(false));
                    for (i, v) in shapes.iter().enumerate() {
                        walk(
                            name,
                            &format!("{at}/{key}/{i}"),
                            v,
                            unevaluated || closed_above,
                        );
                    }
                }
            }
        }
        for (name, schema) in documents() {
            walk(name, "", &schema, false);
        }
    }

    #[test]
    fn the_report_s_views_match_and_a_wrong_type_a_missing_key_an_unknown_code_do_not() {
        for report in [report_not_converged(), hostile_report()] {
            check(
                "report",
                &crate::render::report_json(&report, crate::cli::exit::report_ok(&report)),
            );
        }
        let good: Value =
            serde_json::from_str(&crate::render::report_json(&report_not_converged(), false))
                .unwrap();
        assert!(matches("report", &good));
        let mut bad = Vec::new();
        let mut wrong_type = good.clone();
        wrong_type["converged"] = json!("yes");
        bad.push(("wrong type", wrong_type));
        let mut missing = good.clone();
        missing.as_object_mut().unwrap().remove("failures");
        bad.push(("missing key", missing));
        let mut unknown_code = good.clone();
        unknown_code["remainingNetworks"][0]["reason"]["code"] = json!("vanished");
        bad.push(("unknown reason code", unknown_code));
        let mut no_text = good.clone();
        no_text["remainingNetworks"][0]["reason"]
            .as_object_mut()
            .unwrap()
            .remove("text");
        bad.push(("reason without its text", no_text));
        let mut extra = good.clone();
        extra["removed"]["containers"][0]["size"] = json!(1);
        bad.push(("unknown key", extra));
        let mut outcome = good.clone();
        outcome["removed"]["containers"][0]["outcome"] = json!("failed");
        bad.push(("a removed object that failed", outcome));
        let mut version = good.clone();
        version["schemaVersion"] = json!(1);
        bad.push(("another version", version));
        let mut null = good.clone();
        null["now"] = Value::Null;
        bad.push(("null where none is printed", null));
        for (what, document) in bad {
            assert!(!matches("report", &document), "{what} matched");
        }
    }

    #[test]
    fn a_plan_matches_printed_and_sealed_and_one_of_both_shapes_does_not() {
        let text = crate::render::plan_json(&plan_of_two());
        check("plan", &text);
        let key = crate::exec::seal::Key::fixed_for_tests();
        check("plan", &crate::exec::seal::seal(&text, &key).unwrap());
        let mut mixed: Value = serde_json::from_str(&text).unwrap();
        mixed["engines"] = json!([]);
        assert!(
            !matches("plan", &mixed),
            "one engine's plan and a fleet's at once"
        );
        let mut bad_seal: Value = serde_json::from_str(&text).unwrap();
        bad_seal["seal"] = json!("sha1:00");
        assert!(!matches("plan", &bad_seal));
    }
}
