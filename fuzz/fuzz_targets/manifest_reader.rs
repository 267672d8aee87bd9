//! Fuzzes the archive-manifest reader (`restore`'s first step): any bytes
//! must give a manifest or an error, never a panic; a manifest it accepts
//! has the supported version and a root that is one folder name.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("sandboxctl-fuzz-manifest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let archive = dir.join("v.tar.zst");
    std::fs::write(dir.join("v.json"), data).unwrap();
    if let Ok(m) = sandboxctl::exec::archive::read_manifest(&archive) {
        assert_eq!(m.version, 1);
        assert!(!m.root.is_empty() && !m.root.contains('/'), "{:?}", m.root);
        assert!(m.root != "." && m.root != "..", "{:?}", m.root);
    }
});
