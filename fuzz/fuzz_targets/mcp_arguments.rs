//! Fuzzes `mcp_arguments`: the property is `sandboxctl::fuzz::mcp_arguments` (src/fuzz.rs), which
//! the ordinary suite also runs on every input of `fuzz/seeds/mcp_arguments/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sandboxctl::fuzz::mcp_arguments(data));
