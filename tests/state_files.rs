//! State files: every file in `tests/bad_states/` is refused with exactly the
//! messages in its `.expected` (every problem `check_file` finds, one a line in
//! file order; the first is what `load` reports); every shipped state file parses; files too large
//! to commit are generated here; and the parser never panics (nor prints an
//! out-of-range position or a raw control character) on random or mutated input.
//! The other files sandboxctl reads from outside, saved plans (`apply FILE`)
//! and archive manifests (`restore`), likewise give a value or an error on
//! random input and on their own seeds with hostile strings and byte edits
//! (as the fuzz targets in `fuzz/` do under libFuzzer).
//!
//! To regenerate the `.expected` files after a deliberate message change, run
//! with `SANDBOXCTL_BLESS=1` and review the diff.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use sandboxctl::state::{
    check_file, DesiredState, Expiry, StateError, StateErrorKind, DEFAULT_STATE_PATH, MAX_NESTING,
    MAX_STATE_BYTES,
};

/// Relative on purpose: the expected messages name the file as it is passed.
/// `cargo test` runs integration tests in the package root.
const BAD_STATES: &str = "tests/bad_states";

fn toml_files_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    files.sort();
    files
}

/// Checks the properties every error must have, for input `bytes`: a position
/// inside the input (1-based, column in characters, at most one past the end
/// of its line), and a one-line message free of control characters.
fn check_error(bytes: &[u8], error: &StateError, path: &str) -> Result<(), String> {
    let message = error.to_string();
    if let Some(c) = message.chars().find(|c| c.is_control()) {
        return Err(format!(
            "raw control character {c:?} in message: {message:?}"
        ));
    }
    if message.chars().count() > 1200 {
        return Err(format!("message of {} characters", message.chars().count()));
    }
    match error.kind {
        StateErrorKind::NotFound | StateErrorKind::NotAFile { .. } | StateErrorKind::Read(_) => {
            return Err(format!("parse() cannot produce a file error: {message}"));
        }
        StateErrorKind::TooLarge { .. } => {
            if bytes.len() as u64 <= MAX_STATE_BYTES {
                return Err(format!("{} bytes called too large", bytes.len()));
            }
            return Ok(());
        }
        _ => {}
    }
    let Some((line, col)) = error.line_col() else {
        return Err(format!("no position: {message}"));
    };
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.split('\n').collect();
    if line == 0 || line > lines.len() {
        return Err(format!(
            "line {line} outside 1..={}: {message}",
            lines.len()
        ));
    }
    let width = lines[line - 1].chars().count();
    if col == 0 || col > width + 1 {
        return Err(format!(
            "column {col} outside 1..={} of line {line}: {message}",
            width + 1
        ));
    }
    if !message.starts_with(&format!("{path}:{line}:{col}: ")) {
        return Err(format!(
            "message does not start with its position: {message}"
        ));
    }
    Ok(())
}

fn parse_checked(bytes: &[u8]) -> Result<(), String> {
    match DesiredState::parse(bytes, Path::new("fuzz.toml")) {
        Ok(state) => {
            // Whatever was accepted obeys the rules.
            for b in &state.boxes {
                sandboxctl::state::check_box_id(&b.id)?;
            }
            for k in &state.keep_volumes {
                sandboxctl::state::check_volume_name(&k.name)?;
            }
            for (key, value) in &state.scope {
                sandboxctl::state::check_label(key, value)?;
            }
            let engines: Vec<&str> = state.engines.iter().map(|e| e.name.as_str()).collect();
            for name in &engines {
                sandboxctl::state::check_box_id(name)?;
            }
            let refs = state.boxes.iter().map(|b| &b.engine);
            let refs = refs.chain(state.keep_volumes.iter().map(|k| &k.engine));
            for engine in refs.flatten() {
                if !engines.contains(&engine.as_str()) {
                    return Err(format!("undeclared engine {engine:?} accepted"));
                }
            }
            Ok(())
        }
        Err(error) => check_error(bytes, &error, "fuzz.toml"),
    }
}

trial!(every_bad_state_is_refused_with_its_expected_message);
fn every_bad_state_is_refused_with_its_expected_message() {
    let dir = Path::new(BAD_STATES);
    assert!(
        dir.is_dir(),
        "{BAD_STATES} not found: run the tests from the package root"
    );
    let bless = std::env::var_os("SANDBOXCTL_BLESS").is_some();
    let files = toml_files_in(dir);
    assert!(
        files.len() >= 30,
        "only {} bad state files in {BAD_STATES}",
        files.len()
    );
    let mut failures = Vec::new();
    for file in &files {
        let expected_path = file.with_extension("expected");
        let errors = match check_file(file) {
            Ok(state) => {
                failures.push(format!("{}: accepted: {state:?}", file.display()));
                continue;
            }
            Err(errors) => errors,
        };
        let bytes = std::fs::read(file).unwrap();
        for error in &errors {
            if let Err(why) = check_error(&bytes, error, &file.display().to_string()) {
                failures.push(format!("{}: {why}", file.display()));
            }
        }
        if !errors.is_sorted_by_key(|e| e.line_col()) {
            failures.push(format!("{}: problems not in file order", file.display()));
        }
        // load() reports the first of them.
        match DesiredState::load(file) {
            Ok(_) => failures.push(format!("{}: load accepted it", file.display())),
            Err(first) if first.to_string() != errors[0].to_string() => failures.push(format!(
                "{}: load says {first}, check says {}",
                file.display(),
                errors[0]
            )),
            Err(_) => {}
        }
        let actual: Vec<String> = errors.iter().map(ToString::to_string).collect();
        let actual = actual.join("\n");
        if bless {
            std::fs::write(&expected_path, format!("{actual}\n")).unwrap();
            continue;
        }
        match std::fs::read_to_string(&expected_path) {
            Err(e) => failures.push(format!(
                "{}: {e}; it should hold:\n{actual}",
                expected_path.display()
            )),
            Ok(expected) if expected.replace("\r\n", "\n").trim_end_matches('\n') != actual => {
                failures.push(format!(
                    "{}:\n  expected: {}\n  actual:   {actual}",
                    file.display(),
                    expected.trim_end()
                ));
            }
            Ok(_) => {}
        }
    }
    // No .expected without its .toml.
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "expected")
            && !path.with_extension("toml").exists()
        {
            failures.push(format!("{}: no matching .toml", path.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} bad state files failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

trial!(every_shipped_state_file_parses);
fn every_shipped_state_file_parses() {
    let default = Path::new(DEFAULT_STATE_PATH);
    let shipped = DesiredState::load(default).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        shipped,
        DesiredState {
            source: Some(default.to_path_buf()),
            ..DesiredState::empty()
        },
        "the shipped default declares nothing"
    );
    assert_eq!(
        DesiredState::load_or_default(None).unwrap(),
        shipped,
        "without --state the default file is used"
    );
    // state/examples/ may be empty or missing: nothing to check then.
    let mut files = toml_files_in(Path::new("state"));
    files.extend(toml_files_in(Path::new("state/examples")));
    files.extend(toml_files_in(Path::new("state/examples/engines")));
    for file in files {
        if let Err(e) = DesiredState::load(&file) {
            panic!("{}: shipped state file refused: {e}", file.display());
        }
    }
}

trial!(the_shipped_default_teaches_every_table);
fn the_shipped_default_teaches_every_table() {
    // Uncommenting the commented-out examples yields a valid, non-empty state.
    let text = std::fs::read_to_string(DEFAULT_STATE_PATH).unwrap();
    let uncommented: String = text
        .lines()
        .filter_map(|line| line.strip_prefix("# "))
        .filter(|line| {
            (line.starts_with('[') && line.ends_with(']'))
                || (line.starts_with(|c: char| c.is_ascii_lowercase()) && line.contains(" = "))
        })
        .map(|line| format!("{line}\n"))
        .collect();
    let state = DesiredState::parse(uncommented.as_bytes(), Path::new("uncommented.toml"))
        .unwrap_or_else(|e| panic!("{e}\n{uncommented}"));
    assert!(!state.scope.is_empty(), "{uncommented}");
    assert!(!state.boxes.is_empty(), "{uncommented}");
    assert!(!state.keep_volumes.is_empty(), "{uncommented}");
    assert!(state.policy.grace.is_some(), "{uncommented}");
    assert!(!state.engines.is_empty(), "{uncommented}");
    assert!(
        state.boxes.iter().any(|b| b.engine.is_some()),
        "{uncommented}"
    );
    assert!(
        state
            .boxes
            .iter()
            .any(|b| matches!(b.expiry, Some(Expiry::Ttl(_)))),
        "{uncommented}"
    );
    assert!(
        state
            .boxes
            .iter()
            .any(|b| matches!(b.expiry, Some(Expiry::At(_)))),
        "{uncommented}"
    );
    assert!(
        state.keep_volumes.iter().any(|k| k.engine.is_some()),
        "{uncommented}"
    );
}

trial!(an_oversized_file_is_refused_by_its_size);
fn an_oversized_file_is_refused_by_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.toml");
    let mut text = "[[box]]\nid = \"a\"\n".to_string();
    while text.len() as u64 <= MAX_STATE_BYTES {
        text.push_str("# padding padding padding padding padding padding padding padding\n");
    }
    std::fs::write(&path, &text).unwrap();
    let error = DesiredState::load(&path).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "{}: state file is too large ({} bytes; the limit is 1048576 bytes); a state file \
             only lists box ids, volume names and labels: check that this is the right file",
            path.display(),
            text.len()
        )
    );
    // Exactly at the limit is fine.
    text.truncate(MAX_STATE_BYTES as usize - 1);
    text.push('\n');
    std::fs::write(&path, &text).unwrap();
    DesiredState::load(&path).unwrap();
}

trial!(a_missing_explicit_file_says_what_to_do);
fn a_missing_explicit_file_says_what_to_do() {
    let error = DesiredState::load(Path::new("tests/bad_states/no-such-file.toml")).unwrap_err();
    assert_eq!(
        error.to_string(),
        "tests/bad_states/no-such-file.toml: state file does not exist; check the path given \
         with --state or SANDBOXCTL_STATE (without either, state/sandboxes.toml is used if it \
         exists)"
    );
}

trial!(bom_and_crlf_files_are_accepted);
fn bom_and_crlf_files_are_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("windows.toml");
    let text = "\u{feff}# saved by Notepad\r\n[scope]\r\nlabels = { \"ca.sandbox.owner\" = \"team-a\" }\r\n\
                [[box]]\r\nid = \"explore-ripgrep\"\r\n[volumes]\r\nkeep = [\r\n  \"ca-sbx-notes\",\r\n]\r\n";
    std::fs::write(&path, text).unwrap();
    let state = DesiredState::load(&path).unwrap();
    assert_eq!(state.scope.get("ca.sandbox.owner").unwrap(), "team-a");
    assert_eq!(state.boxes[0].id, "explore-ripgrep");
    assert_eq!(state.keep_volumes[0].name, "ca-sbx-notes");
}

trial!(deep_nesting_needs_little_stack);
fn deep_nesting_needs_little_stack() {
    // Run on a 256 KiB stack: if any of these reached a recursive parser, it would overflow.
    let inputs: Vec<String> = vec![
        format!("a = {}", "[".repeat(100_000)),
        format!("a = {}", "{a=".repeat(100_000)),
        format!("a = {}{}", "[".repeat(MAX_NESTING), "]".repeat(MAX_NESTING)),
        format!("a{} = 1", ".a".repeat(100_000)),
        format!("[a{}]", ".a".repeat(100_000)),
        format!("[[a{}]]", ".a".repeat(100_000)),
        format!("a = [{}{}]", "{ b = [".repeat(8), "] }".repeat(8)),
        "a = { ".repeat(50_000),
    ];
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            for input in inputs {
                let error = DesiredState::parse(input.as_bytes(), Path::new("fuzz.toml"))
                    .expect_err("deep input accepted");
                check_error(input.as_bytes(), &error, "fuzz.toml").unwrap();
            }
        })
        .unwrap()
        .join()
        .expect("parser overflowed a small stack or panicked");
}

/// Seeds for mutation: the bad corpus, the shipped files, and a full valid file.
fn seeds() -> &'static [Vec<u8>] {
    static SEEDS: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    SEEDS.get_or_init(read_seeds)
}

fn read_seeds() -> Vec<Vec<u8>> {
    let mut files = toml_files_in(Path::new(BAD_STATES));
    files.extend(toml_files_in(Path::new("state")));
    files.extend(toml_files_in(Path::new("state/examples")));
    files.extend(toml_files_in(Path::new("state/examples/engines")));
    let mut seeds: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    seeds.push(
        b"[scope]\nlabels = { \"ca.sandbox.owner\" = \"team-a\", b = 'c' }\n\n[[box]]\n\
          id = \"explore-ripgrep\"\n\n[[box]]\nid = \"x\"\n\n[volumes]\nkeep = [\"ca-sbx-notes\", '''n''']\n"
            .to_vec(),
    );
    seeds
}

/// Bytes that matter to TOML and to the validator.
const INTERESTING: &[u8] = b"[]{}\"'=.,#\\\n\r\t /:0aZ-_\x00\x07\x1b\x7f\xc3\xa9\xef\xbb\xbf\xff";

#[derive(Debug, Clone)]
enum Edit {
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    Replace(usize, u8),
    Duplicate(usize, usize),
}

fn edit_strategy() -> impl Strategy<Value = Edit> {
    let byte = prop_oneof![prop::sample::select(INTERESTING), any::<u8>()];
    prop_oneof![
        (any::<usize>(), prop::collection::vec(byte.clone(), 1..8))
            .prop_map(|(at, b)| Edit::Insert(at, b)),
        (any::<usize>(), 1usize..16).prop_map(|(at, n)| Edit::Delete(at, n)),
        (any::<usize>(), byte).prop_map(|(at, b)| Edit::Replace(at, b)),
        (any::<usize>(), 1usize..64).prop_map(|(at, n)| Edit::Duplicate(at, n)),
    ]
}

fn apply_edit(bytes: &mut Vec<u8>, edit: &Edit) {
    let at = |i: usize, len: usize| if len == 0 { 0 } else { i % (len + 1) };
    match edit {
        Edit::Insert(i, b) => {
            let i = at(*i, bytes.len());
            bytes.splice(i..i, b.iter().copied());
        }
        Edit::Delete(i, n) => {
            let i = at(*i, bytes.len());
            let end = (i + n).min(bytes.len());
            bytes.drain(i..end);
        }
        Edit::Replace(i, b) => {
            if !bytes.is_empty() {
                let i = i % bytes.len();
                bytes[i] = *b;
            }
        }
        Edit::Duplicate(i, n) => {
            let i = at(*i, bytes.len());
            let end = (i + n).min(bytes.len());
            let chunk = bytes[i..end].to_vec();
            bytes.splice(i..i, chunk);
        }
    }
}

/// Near-valid documents built from the format's own pieces.
fn document_strategy() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "[scope]\n",
        "[scope.labels]\n",
        "labels = { \"ca.sandbox.owner\" = \"team-a\" }\n",
        "labels = { ca.sandbox.owner = \"x\" }\n",
        "\"ca.sandbox\" = \"1\"\n",
        "owner = \"\"\n",
        "[[box]]\n",
        "[box]\n",
        "id = \"a\"\n",
        "id = \"b\"\n",
        "id = \"..\"\n",
        "id = 'a/b'\n",
        "id = \"\"\"\nx\"\"\"\n",
        "id = 1\n",
        "[volumes]\n",
        "keep = [\"v1\", \"v2\"]\n",
        "keep = [\"v1\", \"v1\"]\n",
        "keep = \"v\"\n",
        "# comment [[[ {{{ \"\n",
        "\r\n",
        "\u{feff}",
        "x = [[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]\n",
        "[policy]\n",
        "grace = \"10m\"\n",
        "grace = \"10\"\n",
        "[[engine]]\n",
        "name = \"ci-1\"\n",
        "name = \"ci 1\"\n",
        "host = \"ssh://runner@ci-1\"\n",
        "host = \"ftp://x\"\n",
        "context = \"colima\"\n",
        "engine = \"ci-1\"\n",
        "ttl = \"8h\"\n",
        "ttl = \"0s\"\n",
        "expires = \"2026-12-24T18:00:00Z\"\n",
        "expires = 2026-12-24T18:00:00\n",
        "keep = [{ engine = \"ci-1\", name = \"v1\" }, \"v1\"]\n",
    ]);
    prop::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat())
}

// The tests `proptest!` writes below.
trial!(random_bytes_never_panic);
trial!(random_toml_alphabet_never_panics);
trial!(mutated_corpus_never_panics);
trial!(generated_documents_never_panic);
proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        parse_checked(&bytes).map_err(TestCaseError::fail)?;
    }

    fn random_toml_alphabet_never_panics(
        bytes in prop::collection::vec(prop::sample::select(INTERESTING), 0..1024)
    ) {
        parse_checked(&bytes).map_err(TestCaseError::fail)?;
    }

    fn mutated_corpus_never_panics(
        seed in any::<prop::sample::Index>(),
        edits in prop::collection::vec(edit_strategy(), 1..12),
    ) {
        let mut bytes = seed.get(seeds()).clone();
        for edit in &edits {
            apply_edit(&mut bytes, edit);
        }
        parse_checked(&bytes).map_err(TestCaseError::fail)?;
    }

    fn generated_documents_never_panic(text in document_strategy()) {
        parse_checked(text.as_bytes()).map_err(TestCaseError::fail)?;
    }
}

// ----- saved plans and archive manifests ------------------------------------------

/// A saved plan as `plan --out` writes it: one box (container, volume) on the
/// in-memory engine.
fn saved_plan_seed() -> Vec<u8> {
    use sandboxctl::engine::memory::{box_labels, ContainerInfo, MemoryEngine, VolumeInfo, World};
    let mut c = ContainerInfo::new("c1", "sbx-a", box_labels("a"));
    c.mounts.insert("va".into());
    let world = World {
        containers: vec![c],
        volumes: vec![VolumeInfo {
            name: "va".into(),
            labels: box_labels("a"),
            created_at: None,
        }],
        ..World::default()
    };
    let engine = MemoryEngine::new(world);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (_, plan) = runtime
        .block_on(sandboxctl::exec::reconcile::plan_once(
            &engine,
            &sandboxctl::plan::Goal::nothing_declared(),
            &sandboxctl::model::Scope::default(),
            1_800_000_000,
        ))
        .unwrap();
    // As `plan --out` saves it: the document carries its schemaVersion.
    let mut plan = serde_json::to_value(&plan).unwrap();
    plan["schemaVersion"] = sandboxctl::model::SCHEMA_VERSION.into();
    serde_json::to_vec_pretty(&plan).unwrap()
}

/// A manifest as an archive writes it.
fn manifest_seed() -> Vec<u8> {
    let m = sandboxctl::exec::archive::Manifest {
        version: 1,
        engine: "default".into(),
        volume: "ca-sbx-a".into(),
        labels: [("ca.sandbox".to_string(), "1".to_string())].into(),
        created_at: Some("2026-12-01T10:00:00Z".into()),
        box_id: Some("a".into()),
        archive: "ca-sbx-a-20261201T100000Z.tar.zst".into(),
        sha256: "0".repeat(64),
        size: 10,
        uncompressed_size: 10240,
        file_count: 1,
        time: "2026-12-01T10:00:00Z".into(),
        format: "tar+zstd".into(),
        root: "data".into(),
    };
    serde_json::to_vec_pretty(&m).unwrap()
}

/// Strings a hostile file puts where a name goes.
const HOSTILE: &[&str] = &[
    "",
    ".",
    "..",
    "../x",
    "/etc/passwd",
    "a/b",
    "-oProxyCommand=x",
    "\u{1b}]0;x\u{7}",
    "a\u{0}b",
    "ca.sandbox",
    "\u{202e}x",
    "C:\\x",
    "%2e%2e",
];

/// Replaces the `n`th string value of the JSON document with `with`.
fn replace_string(bytes: &[u8], n: usize, with: &str) -> Vec<u8> {
    fn walk(v: &mut serde_json::Value, n: &mut usize, with: &str) -> bool {
        match v {
            serde_json::Value::String(s) => {
                if *n == 0 {
                    *s = with.to_string();
                    return true;
                }
                *n -= 1;
                false
            }
            serde_json::Value::Array(a) => a.iter_mut().any(|v| walk(v, n, with)),
            serde_json::Value::Object(o) => o.values_mut().any(|v| walk(v, n, with)),
            _ => false,
        }
    }
    let mut v: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    let mut n = n % 64;
    walk(&mut v, &mut n, with);
    serde_json::to_vec(&v).unwrap()
}

/// `apply FILE`'s reader on `bytes`, as found (the seal's reader) and sealed
/// first (the plan's reader behind it): a plan or an error naming the file.
fn saved_plan_checked(bytes: &[u8]) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.json");
    for seal_it in [false, true] {
        std::fs::write(&path, bytes).unwrap();
        match sandboxctl::exec::saved_plan_problem(&path, seal_it) {
            Some(p) if !p.starts_with(&format!("plan file {}: ", path.display())) => {
                return Err(format!("the error does not name the file: {p}"))
            }
            _ => {}
        }
    }
    Ok(())
}

/// `restore`'s manifest reader on `bytes`: a manifest of the supported
/// version whose root is one folder name, or an error.
fn manifest_checked(bytes: &[u8]) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("v.json"), bytes).unwrap();
    match sandboxctl::exec::archive::read_manifest(&dir.path().join("v.tar.zst")) {
        Ok(m) if m.version != 1 => Err(format!("version {} accepted", m.version)),
        Ok(m) if m.root.is_empty() || m.root.contains('/') || m.root == ".." || m.root == "." => {
            Err(format!("root {:?} accepted", m.root))
        }
        _ => Ok(()),
    }
}

trial!(the_seeds_are_accepted);
fn the_seeds_are_accepted() {
    assert_eq!(saved_plan_checked(&saved_plan_seed()), Ok(()));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plan.json"), saved_plan_seed()).unwrap();
    assert_eq!(
        sandboxctl::exec::saved_plan_problem(&dir.path().join("plan.json"), true),
        None
    );
    std::fs::write(dir.path().join("v.json"), manifest_seed()).unwrap();
    sandboxctl::exec::archive::read_manifest(&dir.path().join("v.tar.zst")).unwrap();
}

// The tests `proptest!` writes below.
trial!(hostile_saved_plans_never_panic);
trial!(hostile_manifests_never_panic);
trial!(random_bytes_are_no_plan_and_no_manifest);
proptest! {
    #![proptest_config(ProptestConfig { cases: 500, failure_persistence: None, ..ProptestConfig::default() })]

    fn hostile_saved_plans_never_panic(
        edits in prop::collection::vec(edit_strategy(), 0..8),
        n in any::<usize>(),
        with in prop::sample::select(HOSTILE),
    ) {
        let mut bytes = replace_string(&saved_plan_seed(), n, with);
        for edit in &edits {
            apply_edit(&mut bytes, edit);
        }
        saved_plan_checked(&bytes).map_err(TestCaseError::fail)?;
    }

    fn hostile_manifests_never_panic(
        edits in prop::collection::vec(edit_strategy(), 0..8),
        n in any::<usize>(),
        with in prop::sample::select(HOSTILE),
    ) {
        let mut bytes = replace_string(&manifest_seed(), n, with);
        for edit in &edits {
            apply_edit(&mut bytes, edit);
        }
        manifest_checked(&bytes).map_err(TestCaseError::fail)?;
    }

    fn random_bytes_are_no_plan_and_no_manifest(bytes in prop::collection::vec(any::<u8>(), 0..1024)) {
        saved_plan_checked(&bytes).map_err(TestCaseError::fail)?;
        manifest_checked(&bytes).map_err(TestCaseError::fail)?;
    }
}
