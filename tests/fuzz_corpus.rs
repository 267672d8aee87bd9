//! The fuzz targets' properties (`sandboxctl::fuzz`), checked on every
//! checked-in input in the ordinary suite: the seed corpus of each target
//! (`fuzz/seeds/<target>/`), where a crash the fuzzer finds is kept as a
//! regression (scripts/fuzz.sh says so when it finds one). Also checks that
//! every target has its fuzz binary and a seed folder that is not empty.

use std::path::Path;

trial!(every_checked_in_fuzz_input_keeps_its_target_s_property);
fn every_checked_in_fuzz_input_keeps_its_target_s_property() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut checked = 0;
    for (name, check) in sandboxctl::fuzz::TARGETS {
        assert!(
            root.join("fuzz_targets")
                .join(format!("{name}.rs"))
                .is_file(),
            "fuzz/fuzz_targets/{name}.rs is missing"
        );
        let seeds = root.join("seeds").join(name);
        let mut files: Vec<_> = std::fs::read_dir(&seeds)
            .unwrap_or_else(|e| panic!("{}: {e}", seeds.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{}: no seed", seeds.display());
        for file in files {
            let data = std::fs::read(&file).unwrap();
            let run = std::panic::catch_unwind(|| check(&data));
            assert!(
                run.is_ok(),
                "{name}: {} breaks its property",
                file.display()
            );
            checked += 1;
        }
    }
    let targets: Vec<_> = std::fs::read_dir(root.join("fuzz_targets"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for target in targets {
        let name = target.trim_end_matches(".rs");
        assert!(
            sandboxctl::fuzz::TARGETS.iter().any(|(n, _)| *n == name),
            "fuzz/fuzz_targets/{target} is not in sandboxctl::fuzz::TARGETS"
        );
    }
    println!("fuzz corpus: {checked} inputs checked");
}
