//! The restore view: what `restore` prints (the volume restored, what it
//! holds, and what to declare so that the next apply does not reclaim it),
//! or its error; human, or one JSON document.
//!
//! Names, paths and errors are escaped where they are put into a human
//! line; JSON keeps exact values.

use std::fmt::Write as _;

use serde::Serialize;

use crate::exec::archive::{RestoreError, Restored};
use crate::render::{document, Format};
use crate::text::escape;

/// The JSON document of a restore (`restore.schema.json`).
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub(crate) struct RestoreDoc<'a> {
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    restored: Option<&'a Restored>,
    /// What to declare in the state file to keep the volume.
    #[serde(skip_serializing_if = "Option::is_none")]
    declare: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// The state-file lines that keep `r` (its labels make it managed).
fn declare(r: &Restored) -> String {
    let mut out = format!("[volumes]\nkeep = [{:?}]\n", r.volume);
    if let Some(b) = &r.box_id {
        let _ = write!(out, "# or declare its box:\n[[box]]\nid = {b:?}\n");
    }
    out
}

/// How a restore's errors name it: the volume and the engine (raw: each
/// error escapes the whole when it is put into a human line).
pub(crate) fn restore_subject(volume: &str, engine: &str) -> String {
    format!("restore of volume {volume} on engine {engine}")
}

/// What `restore` prints on stdout (human: on success only; JSON: always).
/// `what`: the restore, as errors name it (volume and engine).
pub(crate) fn restored(
    result: &Result<Restored, RestoreError>,
    what: &str,
    format: Format,
) -> String {
    if format == Format::Json {
        return document(RestoreDoc {
            ok: result.is_ok(),
            restored: result.as_ref().ok(),
            declare: result.as_ref().ok().map(declare),
            error: result.as_ref().err().map(|e| format!("{what}: {e}")),
        });
    }
    let Ok(r) = result else {
        return String::new();
    };
    let mut out = format!(
        "restored volume {} ({} entries, {} bytes)\n",
        escape(&r.volume),
        r.file_count,
        r.uncompressed_size
    );
    out.push_str(
        "It keeps its ca.sandbox labels, so the next apply removes it unless the state file declares it:\n",
    );
    for line in declare(r).lines() {
        let _ = writeln!(out, "  {}", escape(line));
    }
    out
}

/// What `restore` prints on stderr: the error, if any.
pub(crate) fn restore_error(result: &Result<Restored, RestoreError>, what: &str) -> String {
    match result {
        Err(e) => format!("error: {}\n", escape(&format!("{what}: {e}"))),
        Ok(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_what_to_declare() {
        let r = Restored {
            volume: "v".into(),
            labels: Default::default(),
            box_id: Some("b".into()),
            file_count: 3,
            uncompressed_size: 2048,
        };
        let text = restored(&Ok(r), "x", Format::Human);
        assert!(text.contains("keep = [\"v\"]"), "{text}");
        assert!(text.contains("id = \"b\""), "{text}");
        let failed = Err(RestoreError::Exists("v".into()));
        assert!(restore_error(&failed, "restore of volume v on engine e")
            .starts_with("error: restore of volume v on engine e: volume v exists"));
        let doc: serde_json::Value =
            serde_json::from_str(&restored(&failed, "x", Format::Json)).unwrap();
        assert_eq!(doc["ok"], false);
    }
}
