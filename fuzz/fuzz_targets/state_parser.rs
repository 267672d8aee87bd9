//! Fuzzes `state_parser`: the property is `sandboxctl::fuzz::state_parser` (src/fuzz.rs), which
//! the ordinary suite also runs on every input of `fuzz/seeds/state_parser/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sandboxctl::fuzz::state_parser(data));
