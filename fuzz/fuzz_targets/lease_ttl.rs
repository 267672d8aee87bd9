//! Fuzzes `lease_ttl`: the property is `sandboxctl::fuzz::lease_ttl` (src/fuzz.rs), which
//! the ordinary suite also runs on every input of `fuzz/seeds/lease_ttl/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sandboxctl::fuzz::lease_ttl(data));
