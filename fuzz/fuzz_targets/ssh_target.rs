//! Fuzzes `ssh_target`: the property is `sandboxctl::fuzz::ssh_target` (src/fuzz.rs), which
//! the ordinary suite also runs on every input of `fuzz/seeds/ssh_target/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sandboxctl::fuzz::ssh_target(data));
