//! Fuzzes `manifest_reader`: the property is `sandboxctl::fuzz::manifest_reader` (src/fuzz.rs), which
//! the ordinary suite also runs on every input of `fuzz/seeds/manifest_reader/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sandboxctl::fuzz::manifest_reader(data));
