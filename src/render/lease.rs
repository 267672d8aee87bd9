//! The lease view: what `lease` and `lease --release` print (per engine and
//! box: the lease taken and until when it holds, the leases released or
//! kept; the errors, one `error:` line each, for stderr), and `hold`'s lines
//! (stderr only: its stdout is the command's), human or one JSON object per
//! line, each a typed `HoldLine` (`hold-line.schema.json`).
//!
//! Every time is the engine's clock, and says so. Box IDs, engine names,
//! volume names and errors are escaped where they are put into a human
//! line, so a line's only breaks are the view's own; JSON keeps exact values.

use std::fmt::Write as _;
use std::time::Duration;

use crate::exec::hold::{Held, HoldEvent};
use crate::exec::lease::{BoxLease, Lease, LeaseAction, LeaseError, LeaseRun};
use crate::plan::rfc3339;
use crate::render::table::plural;
use crate::render::{document, log, Format};
use crate::text::escape;

/// What starts each human line of `hold`.
const HOLD: &str = "sandboxctl hold:";

/// One JSON line of `hold` (`hold-line.schema.json`): when, then what
/// happened (`event` and its keys). Printed with `schemaVersion` first.
#[derive(serde::Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct HoldLine<'a> {
    /// When it was said (RFC 3339, UTC).
    #[schemars(extend("format" = "date-time"))]
    time: &'a str,
    /// The engine the lease is on.
    engine: &'a str,
    #[serde(flatten)]
    event: HoldLineEvent<'a>,
}

/// What a line of `hold` says: `event`, and the keys of that event. Every
/// time in a lease is the engine's clock.
#[derive(serde::Serialize, schemars::JsonSchema)]
#[serde(
    tag = "event",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
#[schemars(deny_unknown_fields)]
enum HoldLineEvent<'a> {
    /// The first lease was taken; the command starts next.
    Leased {
        #[serde(rename = "box")]
        box_id: &'a str,
        lease: &'a Lease,
        /// How often it is renewed.
        every_ms: u64,
    },
    /// The command could not be started.
    NotStarted {
        /// The program, as given.
        command: String,
        /// Why, as the system said.
        error: &'a str,
    },
    /// A renewal took `lease` and removed the previous one (its volume).
    Renewed {
        #[serde(rename = "box")]
        box_id: &'a str,
        lease: &'a Lease,
        previous: &'a str,
    },
    /// A renewal took `lease` but could not remove `previous` (tried again
    /// when the command ends).
    PreviousLeft {
        #[serde(rename = "box")]
        box_id: &'a str,
        lease: &'a Lease,
        previous: &'a Lease,
        error: &'a LeaseError,
    },
    /// A renewal failed: `current` still holds until it runs out; the next
    /// try is `retryMs` later.
    RenewFailed {
        #[serde(rename = "box")]
        box_id: &'a str,
        error: &'a LeaseError,
        current: &'a Lease,
        retry_ms: u64,
    },
    /// A signal hold got (its number) was passed on to the command, or came
    /// after it had ended (`delivered` false).
    Signal { signal: i32, delivered: bool },
    /// The first lease could not be taken: the command was not run.
    NotLeased {
        #[serde(rename = "box")]
        box_id: &'a str,
        error: &'a LeaseError,
    },
    /// The command ended; the leases the hold made were removed (their volumes).
    Released {
        #[serde(rename = "box")]
        box_id: &'a str,
        volumes: &'a [String],
    },
    /// A lease the hold made could not be removed: left behind, harmless
    /// once it runs out (`lease.until`).
    ReleaseFailed {
        #[serde(rename = "box")]
        box_id: &'a str,
        lease: &'a Lease,
        error: &'a LeaseError,
    },
}

/// A line of `hold`'s on `engine`, human (after [`HOLD`]) or JSON.
fn hold_line(
    format: Format,
    time: &str,
    engine: &str,
    human: String,
    event: HoldLineEvent<'_>,
) -> String {
    log::line(
        format,
        HOLD,
        human,
        HoldLine {
            time,
            engine,
            event,
        },
    )
}

/// `box B on engine E`, escaped.
fn whose(engine: &str, box_id: &str) -> String {
    format!("box {} on engine {}", escape(box_id), escape(engine))
}

/// `T (the engine's clock)`.
fn until(secs: i64) -> String {
    format!("{} (the engine's clock)", rfc3339(secs))
}

/// A duration in short words: `15m`, `40s`, `1m 20s`.
fn words(d: Duration) -> String {
    humantime::format_duration(Duration::from_millis(d.as_millis() as u64)).to_string()
}

/// Names, escaped, joined with commas.
fn names<'a>(all: impl IntoIterator<Item = &'a String>) -> String {
    all.into_iter()
        .map(|n| escape(n).into_owned())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The JSON document of `lease` and `lease --release` (`lease.schema.json`).
pub(crate) type LeaseDoc<'a> = &'a LeaseRun;

/// What `lease` / `lease --release` prints on stdout: human lines for what
/// was done, or the run's JSON document (with its errors).
pub(crate) fn lease_run(run: &LeaseRun, format: Format) -> String {
    if format == Format::Json {
        return document(run);
    }
    let mut out = String::new();
    for b in &run.boxes {
        let who = whose(&b.engine, &b.box_id);
        match (run.action, &b.lease) {
            (LeaseAction::Take, Some(lease)) => {
                let _ = writeln!(
                    out,
                    "{who}: lease {} holds it until {} (the engine's clock; ttl {})",
                    escape(&lease.volume),
                    rfc3339(lease.until),
                    crate::model::lease::words(lease.ttl_seconds)
                );
                for v in &b.released {
                    let _ = writeln!(out, "  released an older lease: {}", escape(v));
                }
                for k in &b.kept {
                    let _ = writeln!(
                        out,
                        "  kept a lease that holds at least as long: {} (until {})",
                        escape(&k.volume),
                        rfc3339(k.until)
                    );
                }
            }
            (LeaseAction::Take, None) => {}
            (LeaseAction::Release, _) if !b.released.is_empty() => {
                let _ = writeln!(
                    out,
                    "{who}: released {}: {}",
                    plural(b.released.len(), "lease"),
                    names(&b.released)
                );
            }
            (LeaseAction::Release, _) if b.errors.is_empty() => {
                let _ = writeln!(out, "{who}: no lease to release");
            }
            (LeaseAction::Release, _) => {}
        }
    }
    out
}

/// Every failure of a lease run, one `error:` line each, naming the box and
/// the engine (for stderr, in either format).
pub(crate) fn lease_errors(run: &LeaseRun) -> String {
    let mut out = String::new();
    for b in &run.boxes {
        for e in &b.errors {
            let _ = writeln!(
                out,
                "error: {}: {}{}",
                whose(&b.engine, &b.box_id),
                escape(&e.to_string()),
                after(run.action, b, e)
            );
        }
    }
    out
}

/// What a failure means for the box, when the error alone does not say.
fn after(action: LeaseAction, b: &BoxLease, e: &LeaseError) -> &'static str {
    match (action, e, &b.lease) {
        (LeaseAction::Take, LeaseError::List { .. }, Some(_)) => {
            "; the new lease holds, but the box's older leases were not looked for"
        }
        (LeaseAction::Take, LeaseError::Remove { .. }, Some(_)) => {
            "; the new lease holds; this older one runs out by itself"
        }
        (LeaseAction::Take, _, None) => "; no lease was taken",
        (LeaseAction::Release, LeaseError::Remove { .. }, _) => {
            "; it still holds the box until it runs out"
        }
        (LeaseAction::Release, _, _) => "; nothing was released",
        _ => "",
    }
}

/// A signal's name: `SIGTERM`, `SIGINT`, else `signal N`.
fn signal_name(signal: i32) -> String {
    match signal {
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGINT => "SIGINT".into(),
        n => format!("signal {n}"),
    }
}

/// A hold's line for `event` on `engine`, or `None` when a person need not
/// hear of it (a renewal that went well: JSON only).
pub(crate) fn hold_event(
    format: Format,
    time: &str,
    engine: &str,
    event: &HoldEvent<'_>,
) -> Option<String> {
    let line = |human: String, event: HoldLineEvent<'_>| {
        Some(hold_line(format, time, engine, human, event))
    };
    match *event {
        HoldEvent::Taken { lease, every } => line(
            format!(
                "lease {} holds {} until {}; renewed every {}",
                escape(&lease.volume),
                whose(engine, &lease.box_id),
                until(lease.until),
                words(every)
            ),
            HoldLineEvent::Leased {
                box_id: &lease.box_id,
                lease,
                every_ms: every.as_millis() as u64,
            },
        ),
        HoldEvent::NotStarted { program, error } => {
            let program = program.to_string_lossy();
            line(
                format!("error: cannot run {}: {}", escape(&program), escape(error)),
                HoldLineEvent::NotStarted {
                    command: program.into_owned(),
                    error,
                },
            )
        }
        HoldEvent::Renewed { lease, previous } if format == Format::Json => line(
            String::new(),
            HoldLineEvent::Renewed {
                box_id: &lease.box_id,
                lease,
                previous: &previous.volume,
            },
        ),
        HoldEvent::Renewed { .. } => None,
        HoldEvent::PreviousLeft {
            lease,
            previous,
            error,
        } => line(
            format!(
                "warning: {}: renewed with lease {}, but {}; it is removed again when the command ends (it holds nothing after {})",
                whose(engine, &lease.box_id),
                escape(&lease.volume),
                escape(&error.to_string()),
                until(previous.until)
            ),
            HoldLineEvent::PreviousLeft {
                box_id: &lease.box_id,
                lease,
                previous,
                error,
            },
        ),
        HoldEvent::RenewFailed {
            error,
            current,
            every,
        } => line(
            format!(
                "warning: could not renew the lease of {}: {}; lease {} still holds it until {}; trying again in {}",
                whose(engine, &current.box_id),
                escape(&error.to_string()),
                escape(&current.volume),
                until(current.until),
                words(every)
            ),
            HoldLineEvent::RenewFailed {
                box_id: &current.box_id,
                error,
                current,
                retry_ms: every.as_millis() as u64,
            },
        ),
        HoldEvent::Forwarded { signal, delivered } => line(
            if delivered {
                format!(
                    "passed {} on to the command; waiting for it to end",
                    signal_name(signal)
                )
            } else {
                format!(
                    "got {}; the command has already ended",
                    signal_name(signal)
                )
            },
            HoldLineEvent::Signal { signal, delivered },
        ),
    }
}

/// The line of a hold whose first lease could not be taken (the command was not run).
pub(crate) fn hold_not_taken(
    format: Format,
    time: &str,
    engine: &str,
    box_id: &str,
    error: &LeaseError,
) -> String {
    hold_line(
        format,
        time,
        engine,
        format!(
            "error: could not take a lease of {}: {}; the command was not run",
            whose(engine, box_id),
            escape(&error.to_string())
        ),
        HoldLineEvent::NotLeased { box_id, error },
    )
}

/// The lines of a hold's end: the leases it released, and each it could not
/// (left behind, named, with when it runs out).
pub(crate) fn hold_end(
    format: Format,
    time: &str,
    engine: &str,
    box_id: &str,
    held: &Held,
) -> String {
    let mut out = String::new();
    if !held.released.is_empty() {
        out.push_str(&hold_line(
            format,
            time,
            engine,
            format!(
                "released {} of {}: {}",
                plural(held.released.len(), "lease"),
                whose(engine, box_id),
                names(&held.released)
            ),
            HoldLineEvent::Released {
                box_id,
                volumes: &held.released,
            },
        ));
    }
    for (lease, error) in &held.left {
        out.push_str(&left_line(format, time, engine, lease, error));
    }
    out
}

fn left_line(
    format: Format,
    time: &str,
    engine: &str,
    lease: &Lease,
    error: &LeaseError,
) -> String {
    hold_line(
        format,
        time,
        engine,
        format!(
            "error: could not release lease {} of {}: {}; it is left behind, harmless: it holds nothing after {}",
            escape(&lease.volume),
            whose(engine, &lease.box_id),
            escape(&error.to_string()),
            until(lease.until)
        ),
        HoldLineEvent::ReleaseFailed {
            box_id: &lease.box_id,
            lease,
            error,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineError;

    fn lease(volume: &str, until: i64) -> Lease {
        Lease {
            volume: volume.into(),
            box_id: "b\u{1b}[2J".into(),
            ttl_seconds: 900,
            created: until - 900,
            until,
        }
    }

    fn boom() -> EngineError {
        EngineError::status_500("remove volume v", "evil\n\u{202e}")
    }

    fn taken() -> LeaseRun {
        LeaseRun::new(
            LeaseAction::Take,
            vec![BoxLease {
                engine: "default".into(),
                box_id: "b\u{1b}[2J".into(),
                lease: Some(lease("ca-sbx-lease-b-1", 1_800_000_900)),
                released: vec!["ca-sbx-lease-b-0\n".into()],
                kept: vec![lease("ca-sbx-lease-b-9", 1_800_003_600)],
                errors: vec![LeaseError::Remove {
                    volume: "ca-sbx-lease-b-x".into(),
                    error: boom(),
                }],
            }],
        )
    }

    #[test]
    fn a_taken_lease_says_until_when_on_the_engines_clock_escaped() {
        let run = taken();
        insta::assert_snapshot!(lease_run(&run, Format::Human), @r"
        box b\u{1b}[2J on engine default: lease ca-sbx-lease-b-1 holds it until 2027-01-15T08:15:00Z (the engine's clock; ttl 15m)
          released an older lease: ca-sbx-lease-b-0\n
          kept a lease that holds at least as long: ca-sbx-lease-b-9 (until 2027-01-15T09:00:00Z)
        ");
        insta::assert_snapshot!(lease_errors(&run), @r"error: box b\u{1b}[2J on engine default: could not remove lease volume ca-sbx-lease-b-x: remove volume v: engine answered HTTP 500: evil\n\u{202e}; the new lease holds; this older one runs out by itself");
        let doc: serde_json::Value = serde_json::from_str(&lease_run(&run, Format::Json)).unwrap();
        assert_eq!(doc["ok"], false);
        assert_eq!(doc["action"], "take");
        assert_eq!(doc["clock"], "engine");
        assert_eq!(doc["boxes"][0]["box"], "b\u{1b}[2J", "exact in JSON");
        assert_eq!(doc["boxes"][0]["lease"]["until"], "2027-01-15T08:15:00Z");
        assert_eq!(doc["boxes"][0]["lease"]["ttlSeconds"], 900);
        assert_eq!(doc["boxes"][0]["errors"][0]["step"], "remove");
        assert_eq!(doc["boxes"][0]["errors"][0]["volume"], "ca-sbx-lease-b-x");
    }

    #[test]
    fn a_release_says_what_went_and_never_claims_a_box_it_could_not_list() {
        let boxes = vec![
            BoxLease {
                engine: "a".into(),
                box_id: "x".into(),
                lease: None,
                released: vec!["l1".into(), "l2".into()],
                kept: vec![],
                errors: vec![],
            },
            BoxLease {
                engine: "a".into(),
                box_id: "y".into(),
                lease: None,
                released: vec![],
                kept: vec![],
                errors: vec![],
            },
            BoxLease {
                engine: "b".into(),
                box_id: "x".into(),
                lease: None,
                released: vec![],
                kept: vec![],
                errors: vec![LeaseError::List { error: boom() }],
            },
        ];
        let run = LeaseRun::new(LeaseAction::Release, boxes);
        assert!(!run.ok);
        insta::assert_snapshot!(lease_run(&run, Format::Human), @r"
        box x on engine a: released 2 leases: l1, l2
        box y on engine a: no lease to release
        ");
        assert!(lease_errors(&run)
            .starts_with("error: box x on engine b: could not list the leases of the box: "));
        assert!(lease_errors(&run).ends_with("; nothing was released\n"));
    }

    #[test]
    fn hold_lines_name_box_engine_and_the_engines_clock() {
        let current = lease("ca-sbx-lease-b-1", 1_800_000_900);
        let error = LeaseError::Create {
            volume: "ca-sbx-lease-b-2".into(),
            error: boom(),
        };
        let failed = HoldEvent::RenewFailed {
            error: &error,
            current: &current,
            every: Duration::from_secs(40),
        };
        let line = hold_event(Format::Human, "t", "default", &failed).unwrap();
        assert_eq!(
            line,
            "sandboxctl hold: warning: could not renew the lease of box b\\u{1b}[2J on engine default: could not create lease volume ca-sbx-lease-b-2: remove volume v: engine answered HTTP 500: evil\\n\\u{202e}; lease ca-sbx-lease-b-1 still holds it until 2027-01-15T08:15:00Z (the engine's clock); trying again in 40s\n"
        );
        let json: serde_json::Value =
            serde_json::from_str(&hold_event(Format::Json, "t", "default", &failed).unwrap())
                .unwrap();
        assert_eq!(json["event"], "renewFailed");
        assert_eq!(json["engine"], "default");
        assert_eq!(json["error"]["step"], "create");
        let renewed = HoldEvent::Renewed {
            lease: &current,
            previous: &current,
        };
        assert_eq!(hold_event(Format::Human, "t", "e", &renewed), None);
        let held = Held {
            end: crate::exec::hold::CommandEnd::Exited(0),
            released: vec![],
            left: vec![(
                current.clone(),
                LeaseError::Remove {
                    volume: current.volume.clone(),
                    error: boom(),
                },
            )],
        };
        let end = hold_end(Format::Human, "t", "default", "b", &held);
        assert!(
            end.starts_with("sandboxctl hold: error: could not release lease ca-sbx-lease-b-1 of box b\\u{1b}[2J on engine default: ")
                && end.ends_with("; it is left behind, harmless: it holds nothing after 2027-01-15T08:15:00Z (the engine's clock)\n"),
            "{end}"
        );
    }

    #[test]
    fn every_json_line_of_hold_matches_its_schema_one_object_per_line() {
        const T: &str = "2027-01-15T08:00:00Z";
        let (current, next) = (
            lease("ca-sbx-lease-b-1", 1_800_000_900),
            lease("ca-sbx-lease-b-2", 1_800_001_800),
        );
        let error = LeaseError::Remove {
            volume: current.volume.clone(),
            error: boom(),
        };
        let every = Duration::from_secs(40);
        let events = [
            HoldEvent::Taken {
                lease: &current,
                every,
            },
            HoldEvent::NotStarted {
                program: std::ffi::OsStr::new("no\nsuch"),
                error: "No such file or directory (os error 2)",
            },
            HoldEvent::Renewed {
                lease: &next,
                previous: &current,
            },
            HoldEvent::PreviousLeft {
                lease: &next,
                previous: &current,
                error: &error,
            },
            HoldEvent::RenewFailed {
                error: &error,
                current: &current,
                every,
            },
            HoldEvent::Forwarded {
                signal: libc::SIGTERM,
                delivered: true,
            },
        ];
        let mut lines: Vec<String> = events
            .iter()
            .map(|e| hold_event(Format::Json, T, "default", e).unwrap())
            .collect();
        lines.push(hold_not_taken(Format::Json, T, "default", "b", &error));
        let held = Held {
            end: crate::exec::hold::CommandEnd::Exited(0),
            released: vec![next.volume.clone()],
            left: vec![(current.clone(), error.clone())],
        };
        lines.push(hold_end(Format::Json, T, "default", "b", &held));
        let mut seen = Vec::new();
        for text in &lines {
            for line in text.lines() {
                crate::schema::check("hold-line", line);
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                assert!(line.starts_with("{\"schemaVersion\":2,"), "{line}");
                seen.push(v["event"].as_str().unwrap().to_string());
            }
        }
        assert_eq!(
            seen,
            [
                "leased",
                "notStarted",
                "renewed",
                "previousLeft",
                "renewFailed",
                "signal",
                "notLeased",
                "released",
                "releaseFailed"
            ]
        );
    }
}
