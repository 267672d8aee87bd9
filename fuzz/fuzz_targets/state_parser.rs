//! Fuzzes the state file parser: any bytes must give a state or an error,
//! never a panic, and an error's position must lie inside the input.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use sandboxctl::state::{DesiredState, StateErrorKind, MAX_STATE_BYTES};

fuzz_target!(|data: &[u8]| {
    let error = match DesiredState::parse(data, Path::new("fuzz.toml")) {
        Ok(state) => {
            for b in &state.boxes {
                sandboxctl::state::check_box_id(&b.id).unwrap();
            }
            for k in &state.keep_volumes {
                sandboxctl::state::check_volume_name(&k.name).unwrap();
            }
            for (key, value) in &state.scope {
                sandboxctl::state::check_label(key, value).unwrap();
            }
            return;
        }
        Err(error) => error,
    };
    let message = error.to_string();
    assert!(
        !message.chars().any(char::is_control),
        "raw control character in {message:?}"
    );
    match error.kind {
        StateErrorKind::NotFound | StateErrorKind::NotAFile | StateErrorKind::Read(_) => {
            panic!("parse() produced a file error: {message}")
        }
        StateErrorKind::TooLarge { .. } => {
            assert!(data.len() as u64 > MAX_STATE_BYTES, "{message}");
            return;
        }
        _ => {}
    }
    let (line, col) = error
        .line_col()
        .unwrap_or_else(|| panic!("no position: {message}"));
    let text = String::from_utf8_lossy(data);
    let lines: Vec<&str> = text.split('\n').collect();
    assert!(line >= 1 && line <= lines.len(), "line {line}: {message}");
    let width = lines[line - 1].chars().count();
    assert!(
        col >= 1 && col <= width + 1,
        "column {col} of {width}: {message}"
    );
    assert!(
        message.starts_with(&format!("fuzz.toml:{line}:{col}: ")),
        "{message}"
    );
});
