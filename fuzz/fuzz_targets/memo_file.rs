//! Fuzzes `memo_file`: the property is `sandboxctl::fuzz::memo_file` (src/fuzz.rs), which
//! the ordinary suite also runs on every input of `fuzz/seeds/memo_file/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sandboxctl::fuzz::memo_file(data));
