//! Assertions shared by the real-engine tests: what a finished run claimed
//! (its typed report) against what the engine really holds afterwards.
//!
//! Owns the "no false success" check, [`assert_honest`]. Lists the engine
//! directly with sandboxctl's own inventory and planner (never through a
//! fault-injection proxy), so what it compares against is the engine's truth.

use sandboxctl::engine::Engine;
use sandboxctl::exec::reconcile::plan_once;
use sandboxctl::model::{Kind, Scope};
use sandboxctl::plan::{DeclaredBox, Goal, Plan};
use sandboxctl::render::entry_label;

use super::cli::Output;
use super::docker::{Sandbox, SandboxBox};
use super::report::{FailureKind, Report};

/// Fails the test unless box `b`'s container and volume are gone; `dump`
/// (what the run showed) is in the message.
pub async fn assert_box_gone(sbx: &Sandbox, b: &SandboxBox, dump: &str) {
    assert!(
        !sbx.container_exists(&b.container.id).await,
        "box {}'s container is still there\n{dump}",
        b.box_id
    );
    assert!(
        !sbx.volume_exists(&b.volume).await,
        "box {}'s volume is still there\n{dump}",
        b.box_id
    );
}

/// The goal of a state file that declares `boxes` and nothing else.
pub fn goal(boxes: &[&str]) -> Goal {
    Goal::Reconcile {
        boxes: boxes.iter().map(|b| DeclaredBox::new(b)).collect(),
        keep_volumes: Vec::new(),
        grace: None,
        max_lease: None,
        archive: None,
    }
}

/// What is left to remove (or blocked) in `sbx`'s scope under `goal` now, from
/// a fresh listing taken directly from the engine, with the same inspection of
/// unmanaged containers a real run makes.
pub async fn left_to_remove(sbx: &Sandbox, goal: &Goal) -> Plan {
    let engine = sbx.engine().await;
    let scope = Scope::new(sbx.scope_labels());
    let (_, plan) = plan_once(&engine, goal, &scope, sandboxctl::cli::config::now())
        .await
        .unwrap_or_else(|e| panic!("list {} directly: {e}", engine.endpoint()));
    plan
}

/// Zero false successes, every leftover named. Compares a finished run with
/// what the engine really holds now:
/// - exit 0 if and only if the report says converged, and then nothing is left
///   to remove or blocked in the scope and the report names no leftover and no failure;
/// - a run that failed before apply (listing, connection, stale plan) says it
///   removed nothing;
/// - otherwise every object that is still to be removed (or blocked) is named
///   among the report's leftovers of its kind (by ID, or a volume by name).
pub async fn assert_honest(sbx: &Sandbox, goal: &Goal, out: &Output, report: &Report) {
    let left = left_to_remove(sbx, goal).await;
    assert_eq!(
        out.code() == 0,
        report.converged,
        "exit code and `converged` disagree\n{}",
        out.dump()
    );
    let still: Vec<String> = left
        .steps
        .iter()
        .map(|s| &s.object)
        .chain(left.blocked.iter().map(|b| &b.object))
        .map(entry_label)
        .collect();
    if out.code() == 0 {
        assert!(
            still.is_empty(),
            "FALSE SUCCESS: exit 0 but the engine still holds {still:?}\n{}",
            out.dump()
        );
        assert!(report.is_clean(), "{}", out.dump());
    }
    // A failed listing or inspection is a failure of the run that went on
    // with the rest (degraded): an object of a kind whose listing failed
    // was never seen, and cannot be named.
    let degraded = |e: &str| {
        let e = e.strip_prefix("verification failed: ").unwrap_or(e);
        e.starts_with("could not list ") || e.starts_with("could not inspect container ")
    };
    let unlisted = |kind: Kind| {
        let what = format!("could not list {}", kind.plural());
        report.failures.iter().any(|f| {
            f.kind == FailureKind::Engine
                && (f.error.starts_with(&what)
                    || f.error.starts_with(&format!("verification failed: {what}")))
        })
    };
    let before_apply = report.failures.iter().any(|f| {
        f.kind == FailureKind::Engine
            && !f.error.starts_with("verification failed")
            && !degraded(&f.error)
    });
    if before_apply {
        assert_ne!(out.code(), 0, "{}", out.dump());
        assert!(report.removed.is_empty(), "{}", out.dump());
        return;
    }
    let objects = left
        .steps
        .iter()
        .map(|s| &s.object)
        .chain(left.blocked.iter().map(|b| &b.object))
        .filter(|o| !unlisted(o.kind));
    for object in objects {
        let key = object.key();
        let named = report
            .remaining(object.kind)
            .iter()
            .any(|l| match object.kind {
                Kind::Volume => l.name == key.id,
                _ => l.id.as_deref() == Some(key.id.as_str()),
            });
        assert!(
            named,
            "{} is still in the engine but the report does not name it\n{}",
            entry_label(object),
            out.dump()
        );
    }
}

/// Fails the test if `bytes` (a captured stream of human output) holds a raw
/// control character (ESC and the other C0/C1 controls but newline), a bidi
/// override or isolate, or a line longer than `max_line` characters.
#[track_caller]
pub fn assert_terminal_safe(what: &str, bytes: &[u8], max_line: usize) {
    let text = String::from_utf8_lossy(bytes);
    for (n, line) in text.split('\n').enumerate() {
        let bad = line.chars().find(|&c| {
            (c.is_control() && c != '\t')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
        });
        assert!(
            bad.is_none(),
            "{what}: line {} holds raw {:?}: {:?}",
            n + 1,
            bad.unwrap(),
            line
        );
        let chars = line.chars().count();
        assert!(
            chars <= max_line,
            "{what}: line {} has {chars} characters (at most {max_line}): {:.200}...",
            n + 1,
            line
        );
    }
}
