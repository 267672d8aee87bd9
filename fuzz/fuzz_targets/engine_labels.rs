//! Fuzzes `engine_labels`: the property is `sandboxctl::fuzz::engine_labels` (src/fuzz.rs), which
//! the ordinary suite also runs on every input of `fuzz/seeds/engine_labels/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sandboxctl::fuzz::engine_labels(data));
