//! Fuzzes `saved_plan_reader`: the property is `sandboxctl::fuzz::saved_plan_reader` (src/fuzz.rs), which
//! the ordinary suite also runs on every input of `fuzz/seeds/saved_plan_reader/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sandboxctl::fuzz::saved_plan_reader(data));
