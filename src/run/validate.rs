//! `validate [FILE...]`: every problem of every state file, no engine call.
//!
//! Owns which files are checked (those named, else the state file the run
//! would read). The checks are `state`'s, the words `render`'s; ends in a
//! `Verdict` (failed when any file has a problem).

use std::path::PathBuf;

use crate::exec::report::Verdict;
use crate::render::{self, Format};

use super::context::{failed, Sink};

/// `validate`: `files`, or when none is named, `state` (else the default path).
pub(super) fn validate(
    files: &[PathBuf],
    state: Option<&PathBuf>,
    format: Format,
    sink: &mut dyn Sink,
) -> Verdict {
    let files = if files.is_empty() {
        vec![state
            .cloned()
            .unwrap_or_else(|| PathBuf::from(crate::state::DEFAULT_STATE_PATH))]
    } else {
        files.to_vec()
    };
    let results: Vec<(PathBuf, Vec<crate::state::StateError>)> = files
        .iter()
        .map(|f| {
            let problems = crate::state::check_file(f).err().unwrap_or_default();
            (f.clone(), problems)
        })
        .collect();
    sink.out(&render::validation(&results, format));
    failed(results.iter().any(|(_, p)| !p.is_empty()))
}
