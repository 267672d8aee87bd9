//! Small hand-built plans and reports for the views' unit tests: one of
//! each section, and one whose engine text is hostile (escape sequences, a
//! bidi override, a newline that would forge a table row); and the
//! assertion that snapshots a view in both its formats.

use std::collections::BTreeMap;

use crate::exec::report::{Failure, Gone, Leftover, Named, Report};
use crate::model::{ImageInfo, Kind, Labels, Outcome, Reason, Ref};
use crate::plan::{Entry, Goal, Noted, Plan, Retained, Step};

/// Snapshots a view's human text as `NAME_human` and its JSON as
/// `NAME_json`, in the crate's `snapshots` folder, and checks the JSON
/// against the schema of its document (the first word of `NAME`: `plan`,
/// `report`). A macro, not a function: insta names a snapshot file after the
/// module that asserts it. (Marked `cfg(test)`, as this whole file is, so
/// that the layers' check, which reads `crate::schema` here, leaves it out.)
#[cfg(test)]
macro_rules! assert_human_and_json {
    ($name:literal, $human:expr, $json:expr) => {
        let json: String = $json;
        let document = $name.split('_').next().unwrap_or_default();
        crate::schema::check(document, &json);
        insta::with_settings!({snapshot_path => "../../snapshots"}, {
            insta::assert_snapshot!(concat!($name, "_human"), $human);
            insta::assert_snapshot!(concat!($name, "_json"), json, stringify!($json));
        })
    };
}
pub(crate) use assert_human_and_json;

/// A name that tries to clear the screen, start a new line and reverse the text.
pub(crate) const EVIL_NAME: &str = "evil\u{1b}[2J\n\u{202e}x";
/// A box ID that tries to set the terminal title and forge a line.
pub(crate) const EVIL_BOX: &str = "b\u{1b}]0;t\u{7}\nFORGED";

pub(crate) fn entry(kind: Kind, name: &str, id: Option<&str>, box_id: Option<&str>) -> Entry {
    Entry {
        engine: "default".into(),
        kind,
        id: id.map(str::to_string),
        name: name.into(),
        box_id: box_id.map(str::to_string),
        state: (kind == Kind::Container).then(|| "exited".to_string()),
        created: None,
    }
}

fn empty_plan() -> Plan {
    let scope: Labels = [("ca.sandbox".to_string(), "1".to_string())].into();
    Plan {
        version: None,
        engine: "default".into(),
        endpoint: None,
        scope,
        swarm_out_of_scope: false,
        goal: Goal::nothing_declared(),
        now: "2027-01-15T08:00:00Z".into(),
        steps: vec![],
        blocked: vec![],
        kept: Default::default(),
        retained: Retained::default(),
        leases: vec![],
        engine_clock: None,
        incomplete: vec![],
        unknown_boxes: vec![],
        fingerprint: String::new(),
        basis: BTreeMap::new(),
    }
}

fn leaked(box_id: &str) -> Reason {
    Reason::BoxNotDeclared {
        box_id: box_id.into(),
    }
}

/// Two removals (a container, then its volume), a blocked network, a kept
/// volume and a retained image.
pub(crate) fn plan_of_two() -> Plan {
    let mut plan = empty_plan();
    let container = entry(
        Kind::Container,
        "sbx-a",
        Some("c0ffee0000010000"),
        Some("a"),
    );
    plan.steps = vec![
        Step {
            step: 1,
            object: container,
            why: leaked("a"),
            waits_for: vec![],
            archive: None,
            reads: vec![],
            archived_by: None,
        },
        Step {
            step: 2,
            object: entry(Kind::Volume, "data-a", None, Some("a")),
            why: leaked("a"),
            waits_for: vec![1],
            archive: None,
            reads: vec![],
            archived_by: None,
        },
    ];
    plan.blocked = vec![Noted {
        object: entry(Kind::Network, "shared", Some("5eed000000010000"), None),
        why: Reason::HeldByUnmanaged {
            holders: vec![Ref {
                kind: Kind::Container,
                id: Some("0ddba1100000f000".into()),
                name: "web".into(),
                how: Some("attached".into()),
            }],
        },
    }];
    plan.kept.push(
        Kind::Volume,
        Noted {
            object: entry(Kind::Volume, "notes", None, None),
            why: Reason::KeptByFile { line: Some(3) },
        },
    );
    plan.retained.images = vec![ImageInfo {
        id: "sha256:0123456789abcdef".into(),
        tags: vec!["ca-sbx:repo-1".into()],
    }];
    plan
}

/// One removal of a container whose name and box ID are hostile.
pub(crate) fn hostile_plan() -> Plan {
    let mut plan = empty_plan();
    let mut evil = entry(
        Kind::Container,
        EVIL_NAME,
        Some("c0ffee0000010000"),
        Some(EVIL_BOX),
    );
    evil.state = Some("running".into());
    plan.steps = vec![Step {
        step: 1,
        object: evil,
        why: leaked(EVIL_BOX),
        waits_for: vec![],
        archive: None,
        reads: vec![],
        archived_by: None,
    }];
    plan
}

fn named(e: &Entry) -> Named {
    Named::of(e)
}

/// A report that did not converge: one container removed, one volume found
/// gone, a failed network left behind with its reason, a kept volume.
pub(crate) fn report_not_converged() -> Report {
    let plan = plan_of_two();
    let mut report = Report::empty();
    report.now = Some(plan.now.clone());
    report.kept = plan.kept.clone();
    report.retained = plan.retained.clone();
    report.removed.push(
        Kind::Container,
        Gone {
            object: named(&plan.steps[0].object),
            outcome: Outcome::Removed,
            reclaimed_bytes: Some(7_340_032),
        },
    );
    report.removed.push(
        Kind::Volume,
        Gone {
            object: named(&plan.steps[1].object),
            outcome: Outcome::AlreadyGone,
            reclaimed_bytes: None,
        },
    );
    report.reclaimed = crate::exec::report::Reclaimed::of(&report.removed);
    let net = entry(Kind::Network, "net-b", Some("5eed000000020000"), Some("b"));
    let error = "remove network 5eed00000002: engine answered HTTP 500: boom".to_string();
    report.failures.push(Failure {
        kind: "network".into(),
        engine: "default".into(),
        name: net.name.clone(),
        id: net.id.clone(),
        error: error.clone(),
    });
    report.remaining.push(
        Kind::Network,
        Leftover {
            object: named(&net),
            reason: Reason::RemovalFailed { error },
        },
    );
    report
}

/// A report whose leftover and failure carry hostile engine text.
pub(crate) fn hostile_report() -> Report {
    let mut report = Report::empty();
    let evil = entry(
        Kind::Container,
        EVIL_NAME,
        Some("c0ffee0000010000"),
        Some(EVIL_BOX),
    );
    report.failures.push(Failure {
        kind: "container".into(),
        engine: "default".into(),
        name: EVIL_NAME.into(),
        id: evil.id.clone(),
        error: "conflict:\u{1b}[31m in use\n".into(),
    });
    report.remaining.push(
        Kind::Container,
        Leftover {
            object: named(&evil),
            reason: Reason::RemovalFailed {
                error: "conflict:\u{1b}[31m in use\n".into(),
            },
        },
    );
    report
}

/// `n` leaked boxes `box-1`..`box-N`, each a container then its volume.
pub(crate) fn plan_of_many(n: usize) -> Plan {
    let mut plan = empty_plan();
    for i in 1..=n {
        let b = format!("box-{i}");
        let first = plan.steps.len() + 1;
        plan.steps.push(Step {
            step: first,
            object: entry(
                Kind::Container,
                &format!("sbx-{b}"),
                Some(&format!("{i:012x}0000")),
                Some(&b),
            ),
            why: leaked(&b),
            waits_for: vec![],
            archive: None,
            reads: vec![],
            archived_by: None,
        });
        plan.steps.push(Step {
            step: first + 1,
            object: entry(Kind::Volume, &format!("sbx-{b}"), None, Some(&b)),
            why: leaked(&b),
            waits_for: vec![first],
            archive: None,
            reads: vec![],
            archived_by: None,
        });
    }
    plan
}

/// The report of [`plan_of_many`] carried out: every object removed, none
/// measured.
pub(crate) fn report_of_many(n: usize) -> Report {
    let plan = plan_of_many(n);
    let mut report = Report::empty();
    report.now = Some(plan.now.clone());
    report.converged = true;
    for step in &plan.steps {
        report.removed.push(
            step.object.kind,
            Gone {
                object: named(&step.object),
                outcome: Outcome::Removed,
                reclaimed_bytes: None,
            },
        );
    }
    report.reclaimed = crate::exec::report::Reclaimed::of(&report.removed);
    report
}
