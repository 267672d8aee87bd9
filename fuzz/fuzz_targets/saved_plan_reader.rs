//! Fuzzes the saved-plan reader (`apply FILE`'s first step), its seal and the
//! plan behind it: any bytes must give a plan or an error naming the file,
//! never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("sandboxctl-fuzz-plan-{}.json", std::process::id()));
    // As found (the seal's reader), then sealed (the plan's reader behind it).
    for seal_it in [false, true] {
        std::fs::write(&path, data).unwrap();
        if let Some(problem) = sandboxctl::exec::saved_plan_problem(&path, seal_it) {
            assert!(
                problem.starts_with(&format!("plan file {}: ", path.display())),
                "{problem}"
            );
        }
    }
});
