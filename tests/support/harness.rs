//! The test runner of both integration binaries (`harness = false` in
//! `Cargo.toml`): libtest-mimic, which prints and filters like libtest
//! (`NAME`, `--exact`, `--skip`, `--ignored`, `--include-ignored`, `--list`,
//! `--test-threads`, else `RUST_TEST_THREADS`), and can report a test as
//! ignored once it has started.
//!
//! Owns registration and the outcome of a test without an engine:
//!
//! * A test is a plain `fn` or `async fn` with [`trial!`](crate::trial) on the
//!   line before it, where libtest's `#[test]` or `#[tokio::test]` would be:
//!   `trial!(name);`, `trial!(name, worker_threads = 2);` (a multi-thread
//!   runtime, as `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]`),
//!   `trial!(name, ignore = "why");` (as `#[ignore = "why"]`). Its name is
//!   libtest's: the module path without the crate, then the function.
//!   An `async fn` runs on its own runtime, as under `#[tokio::test]`.
//! * Forgetting `trial!` is caught twice: the function is never used (a
//!   `dead_code` warning, an error under `clippy -D warnings`), and
//!   [`every_test_is_registered`] fails on any `#[test]`, `#[tokio::test]` or
//!   `#[cfg(test)]` left in `tests/` (harness-less binaries drop those items
//!   without a word).
//! * A real-engine test without an engine is reported **ignored**, with the
//!   reason, by the runner: its gate (`support::docker::engine_version`, and
//!   so `Sandbox::new` and the extra engines' `start`/`shared`) unwinds with
//!   [`NoEngine`](crate::support::docker::NoEngine), which this runner turns
//!   into "ignored". The run fails once: `support::docker::engine_is_reachable`
//!   fails with the one line saying how to start an engine; when a filter
//!   leaves that test out and a test was ignored for want of an engine, the
//!   runner prints the same line after the summary and exits 101, unless
//!   the run skipped that test by name (`--skip engine_is_reachable`): the
//!   way to run only the tests that need no engine and exit 0.
//! * The engine is probed once, before any test runs.
//!
//! Each test runs on a thread named after it, so that a panic message names
//! the test, as libtest's do. Unlike libtest, the output a test prints is not
//! captured: it shows as it is printed, also when the test passes.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

use libtest_mimic::{Arguments, Completion, Failed, Trial};

use super::docker::{engine_status, NoEngine};
use super::tools::MissingTool;

/// One registered test: what [`trial!`](crate::trial) submits.
pub struct Registered {
    /// `module_path!()` where it was registered.
    pub module: &'static str,
    /// The function's name.
    pub name: &'static str,
    /// `Some(reason)`: ignored unless asked for (`--ignored`).
    pub ignore: Option<&'static str>,
    /// Runs the test on the calling thread.
    pub run: fn(),
}

inventory::collect!(Registered);

impl Registered {
    /// libtest's name: the module path without the crate, then the function.
    pub fn full_name(&self) -> String {
        match self.module.split_once("::") {
            Some((_, path)) => format!("{path}::{}", self.name),
            None => self.name.to_string(),
        }
    }
}

/// Registers the function `$name` (defined right after) as a test; see the
/// module's documentation.
#[macro_export]
macro_rules! trial {
    ($name:ident $(, worker_threads = $n:literal)? $(, ignore = $why:literal)?) => {
        ::inventory::submit! {
            $crate::support::harness::Registered {
                module: module_path!(),
                name: stringify!($name),
                ignore: $crate::trial!(@some $($why)?),
                run: || $crate::support::harness::Body::drive($name, $crate::trial!(@some $($n)?)),
            }
        }
    };
    (@some) => {
        None
    };
    (@some $x:literal) => {
        Some($x)
    };
}

/// A plain `fn()` (marker [`Plain`]) or an `async fn` (marker [`Async`]):
/// how [`trial!`](crate::trial) runs either without being told which.
pub trait Body<Marker> {
    /// Runs the test to its end; `workers`: a multi-thread runtime with that
    /// many workers for an `async fn`, else a current-thread one.
    fn drive(self, workers: Option<usize>);
}

/// The [`Body`] marker of a plain `fn()`.
pub struct Plain;
/// The [`Body`] marker of an `async fn`.
pub struct Async;

impl<F: FnOnce()> Body<Plain> for F {
    fn drive(self, _workers: Option<usize>) {
        self()
    }
}

impl<F, Fut> Body<Async> for F
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = ()>,
{
    fn drive(self, workers: Option<usize>) {
        let mut builder = match workers {
            Some(n) => {
                let mut b = tokio::runtime::Builder::new_multi_thread();
                b.worker_threads(n);
                b
            }
            None => tokio::runtime::Builder::new_current_thread(),
        };
        let runtime = builder.enable_all().build().expect("the test's runtime");
        runtime.block_on(self())
    }
}

/// Whether some test met a gate without an engine in this run.
static IGNORED_WITHOUT_ENGINE: AtomicBool = AtomicBool::new(false);
/// Whether `support::docker::engine_is_reachable` ran in this run.
static REACHABILITY_RAN: AtomicBool = AtomicBool::new(false);

/// Whether this binary reports the run's one failure without an engine.
static OWNS_ENGINE_FAILURE: AtomicBool = AtomicBool::new(true);

/// Called by `support::docker::engine_is_reachable`: the run's one failure
/// without an engine is that test's, not the runner's. `false` in a binary
/// that leaves that failure to another (see [`main_beside`]): there the test
/// is ignored too.
pub fn reachability_test_ran() -> bool {
    REACHABILITY_RAN.store(true, Ordering::SeqCst);
    OWNS_ENGINE_FAILURE.load(Ordering::SeqCst)
}

/// The `main` of a binary that `cargo test` runs beside the main one
/// (`tests/solo.rs`): as [`main`], but without an engine it does not fail:
/// its real-engine tests (`engine_is_reachable` too) are ignored, and the
/// line saying how to start an engine is printed after its summary. The one
/// failure of a whole `cargo test` without an engine is the main binary's.
pub fn main_beside() {
    OWNS_ENGINE_FAILURE.store(false, Ordering::SeqCst);
    main()
}

/// The binary's `main`: every registered test, sorted by name, run as the
/// command line says; exits 101 when one failed (as libtest).
pub fn main() {
    let (mut args, filters) = arguments();
    // `--skip engine_is_reachable` is how a run says it knows there is no
    // engine: the engine tests are still ignored, but the run does not fail.
    let engine_check_skipped = args.skip.iter().any(|s| s.ends_with("engine_is_reachable"));
    if args.test_threads.is_none() {
        args.test_threads = std::env::var("RUST_TEST_THREADS")
            .ok()
            .and_then(|n| n.parse().ok())
            .filter(|&n| n > 0);
    }
    let mut registered: Vec<&'static Registered> = inventory::iter::<Registered>().collect();
    registered.sort_by_key(|r| r.full_name());
    if !args.list {
        // Once, before any test: every gate then reads the answer.
        let _ = engine_status();
    }
    let trials: Vec<Trial> = registered.into_iter().map(trial).collect();
    if filters.len() > 1 {
        // Several filters (libtest runs what matches any): libtest-mimic takes
        // one, so every test they leave out is skipped by its exact name.
        let matches = |name: &str, pattern: &String| {
            if args.exact {
                name == pattern
            } else {
                name.contains(pattern.as_str())
            }
        };
        let skipped = trials
            .iter()
            .map(Trial::name)
            .filter(|name| {
                !filters.iter().any(|f| matches(name, f))
                    || args.skip.iter().any(|s| matches(name, s))
            })
            .map(str::to_string)
            .collect();
        args.skip = skipped;
        args.exact = true;
    }
    let conclusion = libtest_mimic::run(&args, trials);
    if std::env::var_os("SANDBOXCTL_SCHEMA_COUNT").is_some() {
        eprintln!(
            "schema: {} JSON documents checked against docs/schema/",
            super::schema::checked()
        );
    }
    if !args.list
        && IGNORED_WITHOUT_ENGINE.load(Ordering::SeqCst)
        && !REACHABILITY_RAN.load(Ordering::SeqCst)
    {
        if let Err(line) = engine_status() {
            eprintln!("{line}");
        }
        if OWNS_ENGINE_FAILURE.load(Ordering::SeqCst) && !engine_check_skipped {
            std::process::exit(101);
        }
    }
    if conclusion.has_failed() {
        std::process::exit(101);
    }
}

/// The command line as libtest-mimic reads it, and every filter on it:
/// libtest takes any number (`cargo test -- a b`), libtest-mimic one, so with
/// more than one they are taken out here and applied by [`main`].
fn arguments() -> (Arguments, Vec<String>) {
    // The options that take a value (`--skip NAME`; `--skip=NAME` is one word).
    const VALUED: [&str; 6] = [
        "--skip",
        "--test-threads",
        "--logfile",
        "--color",
        "--format",
        "-Z",
    ];
    let argv: Vec<String> = std::env::args().collect();
    let mut rest = Vec::new();
    let mut filters = Vec::new();
    let mut words = argv.iter().cloned();
    rest.extend(words.next());
    while let Some(word) = words.next() {
        if VALUED.contains(&word.as_str()) {
            rest.push(word);
            rest.extend(words.next());
        } else if word.starts_with('-') {
            rest.push(word);
        } else {
            filters.push(word);
        }
    }
    if filters.len() > 1 {
        (Arguments::from_iter(rest), filters)
    } else {
        (Arguments::from_iter(argv), filters)
    }
}

/// The libtest-mimic trial of one registered test: run on a thread named
/// after the test; a [`NoEngine`] unwind is "ignored", any other panic a
/// failure with its message.
fn trial(test: &'static Registered) -> Trial {
    let name = test.full_name();
    Trial::ignorable_test(name.clone(), move || {
        let joined = std::thread::Builder::new()
            .name(name)
            .spawn(test.run)
            .map_err(|e| Failed::from(format!("could not start the test's thread: {e}")))?
            .join();
        match joined {
            Ok(()) => Ok(Completion::Completed),
            Err(payload) if payload.is::<NoEngine>() => {
                IGNORED_WITHOUT_ENGINE.store(true, Ordering::SeqCst);
                Ok(Completion::ignored_with("no Docker engine"))
            }
            Err(payload) if payload.is::<MissingTool>() => {
                let Ok(missing) = payload.downcast::<MissingTool>() else {
                    unreachable!("checked")
                };
                Ok(Completion::ignored_with(missing.0))
            }
            Err(payload) if payload.is::<Failure>() => {
                let Ok(failure) = payload.downcast::<Failure>() else {
                    unreachable!("checked")
                };
                Err(Failed::from(failure.0))
            }
            Err(payload) => Err(Failed::from(match panic_message(&*payload) {
                Some(message) => format!("test panicked: {message}"),
                None => "test panicked".to_string(),
            })),
        }
    })
    .with_ignored_flag(test.ignore.is_some())
}

/// Fails the calling test with `message` as its only output: an unwind that
/// skips the panic hook (no "panicked at", no backtrace).
pub fn fail(message: &str) -> ! {
    std::panic::resume_unwind(Box::new(Failure(message.to_string())))
}

/// The unwind payload of [`fail`].
struct Failure(String);

fn panic_message(payload: &(dyn std::any::Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
}

crate::trial!(every_test_is_registered);
/// No `#[test]`, `#[tokio::test]` or `#[cfg(test)]` in `tests/`: in these
/// harness-less binaries each would drop its item without a word (register
/// tests with [`trial!`](crate::trial) instead).
fn every_test_is_registered() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut found = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("tests/ is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("a test source");
                for (i, line) in text.lines().enumerate() {
                    let line = line.trim_start();
                    if ["#[test]", "#[tokio::test", "#[cfg(test)]"]
                        .iter()
                        .any(|attr| line.starts_with(attr))
                    {
                        let shown = path.strip_prefix(&root).unwrap_or(&path).display();
                        found.push(format!("tests/{shown}:{}: {line}", i + 1));
                    }
                }
            }
        }
    }
    found.sort();
    assert!(
        found.is_empty(),
        "these tests are not registered (write `trial!(name);` instead of the attribute; see tests/support/harness.rs):\n  {}",
        found.join("\n  ")
    );
}
