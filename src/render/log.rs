//! The watch log (`watch`, on stderr): one line per event, the time first.
//! Cycles that did something (with each failure on a line of its own), event
//! streams lost and back, state-file reloads, audit-log failures, start and
//! stop. Human text, or one JSON object per line with `--format json`, each
//! a typed `WatchLine` (`watch-line.schema.json`, `schemaVersion` first);
//! the same one-line form (`line`) serves `hold`'s lines, headed by its name.
//!
//! Every fragment an engine, a state file or the user supplied is escaped
//! where it is put into the human line, once, so a line's only breaks are
//! the log's own; the JSON keeps exact values.

use std::fmt::Write as _;

use serde::Serialize;

use crate::exec::event::Trigger;
use crate::exec::report::{Failure, PartError, Report};
use crate::model::ByKind;
use crate::render::table::{kind_counts, name_cell, plural};
use crate::render::{Format, Versioned};
use crate::text::{escape, escape_lines};

/// One JSON line of the watch log (`watch-line.schema.json`): when, then
/// what happened (`event` and its keys). Printed with `schemaVersion` first.
#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct WatchLine<'a> {
    /// When it was said (RFC 3339, UTC).
    #[schemars(extend("format" = "date-time"))]
    time: &'a str,
    #[serde(flatten)]
    event: WatchEvent<'a>,
}

/// What a line of the watch log says: `event`, and the keys of that event.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(
    tag = "event",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
#[schemars(deny_unknown_fields)]
enum WatchEvent<'a> {
    /// The watch started: its engines, its grace, its metrics address.
    Started {
        engines: Vec<EngineAt<'a>>,
        /// The grace period in seconds; `null` when there is none.
        grace_seconds: Option<u64>,
        /// Where metrics and `/healthz` are served (IP:PORT); `null` without `--metrics`.
        metrics: Option<String>,
    },
    /// A cycle on one engine that removed something or did not converge (a
    /// cycle that converged with nothing to remove says nothing).
    Cycle {
        engine: &'a str,
        #[schemars(schema_with = "trigger_schema")]
        trigger: &'a str,
        took_ms: u64,
        converged: bool,
        /// How many of each kind were removed.
        removed: ByKind<usize>,
        failures: &'a [Failure],
        /// How many objects are left behind.
        remaining: usize,
    },
    /// A cycle on one engine that removed nothing: the engine could not be
    /// listed, or its plan not made.
    CycleFailed {
        engine: &'a str,
        #[schemars(schema_with = "trigger_schema")]
        trigger: &'a str,
        took_ms: u64,
        error: String,
    },
    /// The engine's event stream was lost; it is followed again with backoff.
    StreamLost { engine: &'a str, error: &'a str },
    /// The engine's event stream is back; a full cycle follows.
    StreamBack { engine: &'a str },
    /// The state file changed and was loaded again.
    StateReloaded,
    /// The state file changed but is not applied (the last good state stays).
    StateBroken { error: &'a str },
    /// A line of the audit log could not be written.
    AuditFailed { error: &'a str },
    /// A notification was given up on (`[[notify]]`): the receiver was
    /// down, answered an error or was too slow. The teardown is not affected.
    NotifyFailed {
        url: &'a str,
        #[schemars(with = "crate::model::notify::NotifyEvent")]
        notification: &'a str,
        engine: &'a str,
        #[serde(rename = "box")]
        box_id: Option<&'a str>,
        delivery_id: &'a str,
        error: &'a str,
    },
    /// A signal (`SIGTERM`, `SIGINT`) stops the watch after the cycle in flight.
    Stopping { signal: &'a str },
    /// A second Ctrl-C ended the watch at once: nothing verified, no report.
    Quit { signal: &'a str },
}

/// The schema of a cycle's `trigger`: one of the triggers' words.
fn trigger_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let words: Vec<&str> = Trigger::ALL.iter().map(|t| t.as_str()).collect();
    crate::model::codes_schema(&words, "What set the cycle off, in words.")
}

/// An engine of a watch, by name and address.
#[derive(Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
struct EngineAt<'a> {
    engine: &'a str,
    endpoint: &'a str,
}

/// One line of a log: `head` (a watch log line's is its time) and the human
/// text (`human`, in which the caller escaped every fragment it did not
/// write itself, so its only line breaks are its own), or with `--format
/// json` the typed line `json`, one object on one line, `schemaVersion`
/// first (exact values).
pub(crate) fn line<T: Serialize>(format: Format, head: &str, human: String, json: T) -> String {
    match format {
        Format::Json => {
            let mut s =
                serde_json::to_string(&Versioned::new(json)).expect("plain data always serializes");
            s.push('\n');
            s
        }
        _ => format!("{head} {human}\n"),
    }
}

/// A line of the watch log at `time`: `human`, or `event` as JSON.
fn watch_line(format: Format, time: &str, human: String, event: WatchEvent<'_>) -> String {
    line(format, time, human, WatchLine { time, event })
}

/// The log line of a watch cycle on one engine, or `None` for a cycle that
/// did nothing (converged with nothing removed).
pub(crate) fn watch_cycle(
    format: Format,
    time: &str,
    engine: &str,
    trigger: &str,
    took: std::time::Duration,
    result: &Result<Report, PartError>,
) -> Option<String> {
    let ms = took.as_millis() as u64;
    match result {
        Err(e) => Some(watch_line(
            format,
            time,
            format!(
                "engine {}: cycle ({trigger}) removed nothing: {}",
                escape(engine),
                escape(&e.to_string())
            ),
            WatchEvent::CycleFailed {
                engine,
                trigger,
                took_ms: ms,
                error: e.to_string(),
            },
        )),
        Ok(r) if r.converged && r.removed.is_empty() => None,
        Ok(r) => {
            let counts = kind_counts(|k| r.removed.get(k).len());
            let left = r.all_remaining().count();
            let state = if r.converged {
                "converged".to_string()
            } else {
                format!(
                    "NOT converged: {}, {} left behind",
                    plural(r.failures.len(), "failure"),
                    plural(left, "object")
                )
            };
            let mut human = format!(
                "engine {}: cycle ({trigger}, {ms} ms) removed {counts}; {state}",
                escape(engine)
            );
            for f in &r.failures {
                let _ = write!(
                    human,
                    "\n  failed: {} {}: {}",
                    escape(&f.kind),
                    escape(&name_cell(&f.name, f.id.as_deref())),
                    escape(&f.error)
                );
            }
            Some(watch_line(
                format,
                time,
                human,
                WatchEvent::Cycle {
                    engine,
                    trigger,
                    took_ms: ms,
                    converged: r.converged,
                    removed: r.removed.map(Vec::len),
                    failures: &r.failures,
                    remaining: left,
                },
            ))
        }
    }
}

/// The log line of an event stream lost (`error`) or back.
pub(crate) fn watch_stream(
    format: Format,
    time: &str,
    engine: &str,
    error: Option<&str>,
) -> String {
    match error {
        Some(e) => watch_line(
            format,
            time,
            format!(
                "engine {}: event stream lost: {}; reconnecting with backoff",
                escape(engine),
                escape(e)
            ),
            WatchEvent::StreamLost { engine, error: e },
        ),
        None => watch_line(
            format,
            time,
            format!(
                "engine {}: event stream reconnected; running a full cycle",
                escape(engine)
            ),
            WatchEvent::StreamBack { engine },
        ),
    }
}

/// The log line of a state file reloaded, or broken (`error`).
pub(crate) fn watch_state(format: Format, time: &str, error: Option<&str>) -> String {
    match error {
        Some(error) => watch_line(
            format,
            time,
            format!("state file not applied: {}", escape_lines(error)),
            WatchEvent::StateBroken { error },
        ),
        None => watch_line(
            format,
            time,
            "state file changed: reloaded".into(),
            WatchEvent::StateReloaded,
        ),
    }
}

/// The log line of a failure to write the audit log.
pub(crate) fn watch_audit_error(format: Format, time: &str, error: &str) -> String {
    watch_line(
        format,
        time,
        format!("error: {}", escape_lines(error)),
        WatchEvent::AuditFailed { error },
    )
}

/// The log line of a notification given up on.
pub(crate) fn watch_notify_failed(
    format: Format,
    time: &str,
    failure: &crate::model::notify::DeliveryFailure,
) -> String {
    watch_line(
        format,
        time,
        notify_failed_words(failure),
        WatchEvent::NotifyFailed {
            url: &failure.url,
            notification: failure.event.as_str(),
            engine: &failure.engine,
            box_id: failure.box_id.as_deref(),
            delivery_id: &failure.delivery_id,
            error: &failure.error,
        },
    )
}

/// A notification given up on, in words (escaped): the teardown is not
/// affected, and this says so.
pub(crate) fn notify_failed_words(f: &crate::model::notify::DeliveryFailure) -> String {
    let what = match &f.box_id {
        Some(b) => format!(
            "{} of box {} on engine {}",
            f.event,
            escape(b),
            escape(&f.engine)
        ),
        None => format!(
            "{} of objects without a box on engine {}",
            f.event,
            escape(&f.engine)
        ),
    };
    format!(
        "warning: notification {what} to {} not delivered (delivery {}): {} (the teardown is not affected)",
        escape(&f.url),
        escape(&f.delivery_id),
        escape_lines(&f.error)
    )
}

/// The log line of a watch starting: its engines, grace, and metrics address.
pub(crate) fn watch_started(
    format: Format,
    time: &str,
    engines: &[(String, String)],
    grace: Option<std::time::Duration>,
    metrics: Option<std::net::SocketAddr>,
) -> String {
    let names: Vec<String> = engines
        .iter()
        .map(|(n, e)| format!("{} ({})", escape(n), escape(e)))
        .collect();
    let grace_text = grace
        .map(|g| humantime::format_duration(g).to_string())
        .unwrap_or_else(|| "0s".into());
    let mut human = format!("watching {} with grace {grace_text}", names.join(", "));
    if let Some(addr) = metrics {
        let _ = write!(human, "; metrics on http://{addr}/metrics");
    }
    watch_line(
        format,
        time,
        human,
        WatchEvent::Started {
            engines: engines
                .iter()
                .map(|(engine, endpoint)| EngineAt { engine, endpoint })
                .collect(),
            grace_seconds: grace.map(|g| g.as_secs()),
            metrics: metrics.map(|a| a.to_string()),
        },
    )
}

/// The `warning:` line (plain text in either format, on stderr) of a
/// metrics endpoint bound beyond loopback: `0.0.0.0`, `::` or an address
/// of an interface, a Docker bridge's included. `None` on a loopback address.
pub(crate) fn metrics_exposed(addr: std::net::SocketAddr) -> Option<String> {
    let ip = addr.ip().to_canonical();
    if ip.is_loopback() {
        return None;
    }
    let reach = if ip.is_unspecified() {
        "this host".to_string()
    } else {
        ip.to_string()
    };
    Some(format!(
        "warning: metrics on {addr} are served beyond loopback: anyone who can reach {reach} (a sandbox on a Docker bridge network too) can read them and hold connections open; pass --metrics 127.0.0.1:{} unless a scraper on another host needs them, and then firewall the port\n",
        addr.port()
    ))
}

/// The log line of a watch told to stop.
pub(crate) fn watch_stopping(format: Format, time: &str, signal: &str) -> String {
    watch_line(
        format,
        time,
        format!(
            "{}: stopping: finishing removals in flight, then verifying",
            escape(signal)
        ),
        WatchEvent::Stopping { signal },
    )
}

/// The log line of a watch a second Ctrl-C ended at once: the cycle in
/// flight not finished, nothing verified, no final report.
pub(crate) fn watch_quit(format: Format, time: &str) -> String {
    watch_line(
        format,
        time,
        "SIGINT again: quit at once, without finishing the cycle in flight or verifying".into(),
        WatchEvent::Quit { signal: "SIGINT" },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::{hostile_report, report_not_converged, EVIL_NAME};
    use std::time::Duration;

    const T: &str = "2027-01-15T08:00:00.000Z";

    /// The line of a cycle an event on `engine` set off, that took `took`.
    fn event_cycle(format: Format, engine: &str, took: Duration, report: Report) -> Option<String> {
        watch_cycle(format, T, engine, "event", took, &Ok(report))
    }

    #[test]
    fn a_cycle_that_did_something_and_one_that_did_nothing() {
        let took = Duration::from_millis(42);
        let line = event_cycle(Format::Human, "default", took, report_not_converged());
        insta::assert_snapshot!(line.unwrap(), @r"
        2027-01-15T08:00:00.000Z engine default: cycle (event, 42 ms) removed 1 container, 1 volume and 0 networks; NOT converged: 1 failure, 1 object left behind
          failed: network net-b (5eed00000002): remove network 5eed00000002: engine answered HTTP 500: boom
        ");
        let mut quiet = Report::empty();
        quiet.converged = true;
        assert_eq!(
            watch_cycle(Format::Human, T, "default", "resync", took, &Ok(quiet)),
            None
        );
        let json = event_cycle(Format::Json, "default", took, report_not_converged()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["event"], "cycle");
        assert_eq!(
            v["removed"],
            serde_json::json!({"containers": 1, "volumes": 1, "networks": 0})
        );
        assert_eq!(v["remaining"], 1);
    }

    #[test]
    fn hostile_text_is_escaped_in_human_output_and_exact_in_json() {
        let took = Duration::from_millis(7);
        let line = event_cycle(Format::Human, "ci\u{202e}", took, hostile_report()).unwrap();
        insta::assert_snapshot!(line, @r"
        2027-01-15T08:00:00.000Z engine ci\u{202e}: cycle (event, 7 ms) removed 0 containers, 0 volumes and 0 networks; NOT converged: 1 failure, 1 object left behind
          failed: container evil\u{1b}[2J\n\u{202e}x (c0ffee000001): conflict:\u{1b}[31m in use\n
        ");
        assert_eq!(line.lines().count(), 2, "no forged line: {line}");
        assert!(!line.contains('\u{1b}') && !line.contains('\u{202e}'));
        let json = event_cycle(Format::Json, "ci\u{202e}", took, hostile_report()).unwrap();
        assert_eq!(json.lines().count(), 1);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["failures"][0]["name"], EVIL_NAME);
        assert_eq!(v["engine"], "ci\u{202e}");

        let lost = watch_stream(Format::Human, T, "default", Some("reset\nFORGED"));
        assert_eq!(lost, format!("{T} engine default: event stream lost: reset\\nFORGED; reconnecting with backoff\n"));
    }

    #[test]
    fn metrics_beyond_loopback_are_warned_about() {
        for quiet in [
            "127.0.0.1:9464",
            "127.0.0.2:9464",
            "[::1]:9464",
            "[::ffff:127.0.0.1]:9464",
        ] {
            assert_eq!(metrics_exposed(quiet.parse().unwrap()), None, "{quiet}");
        }
        let warned: Vec<String> = [
            "0.0.0.0:9464",
            "[::]:9464",
            "172.17.0.1:9464",
            "[::ffff:10.0.0.5]:9100",
        ]
        .iter()
        .map(|a| metrics_exposed(a.parse().unwrap()).unwrap_or_else(|| panic!("{a} not warned")))
        .collect();
        insta::assert_snapshot!(warned.concat(), @r"
        warning: metrics on 0.0.0.0:9464 are served beyond loopback: anyone who can reach this host (a sandbox on a Docker bridge network too) can read them and hold connections open; pass --metrics 127.0.0.1:9464 unless a scraper on another host needs them, and then firewall the port
        warning: metrics on [::]:9464 are served beyond loopback: anyone who can reach this host (a sandbox on a Docker bridge network too) can read them and hold connections open; pass --metrics 127.0.0.1:9464 unless a scraper on another host needs them, and then firewall the port
        warning: metrics on 172.17.0.1:9464 are served beyond loopback: anyone who can reach 172.17.0.1 (a sandbox on a Docker bridge network too) can read them and hold connections open; pass --metrics 127.0.0.1:9464 unless a scraper on another host needs them, and then firewall the port
        warning: metrics on [::ffff:10.0.0.5]:9100 are served beyond loopback: anyone who can reach 10.0.0.5 (a sandbox on a Docker bridge network too) can read them and hold connections open; pass --metrics 127.0.0.1:9100 unless a scraper on another host needs them, and then firewall the port
        ");
    }

    #[test]
    fn start_state_audit_and_stop_lines() {
        let engines = [(
            "local".to_string(),
            "unix:///var/run/docker.sock".to_string(),
        )];
        let addr: std::net::SocketAddr = "127.0.0.1:9100".parse().unwrap();
        insta::assert_snapshot!(
            watch_started(Format::Human, T, &engines, Some(Duration::from_secs(600)), Some(addr)),
            @"2027-01-15T08:00:00.000Z watching local (unix:///var/run/docker.sock) with grace 10m; metrics on http://127.0.0.1:9100/metrics"
        );
        assert_eq!(
            watch_state(Format::Human, T, Some("state.toml:3:1: bad\n  hint")),
            format!("{T} state file not applied: state.toml:3:1: bad\n  hint\n")
        );
        assert_eq!(
            watch_state(Format::Json, T, None),
            format!("{{\"schemaVersion\":2,\"time\":\"{T}\",\"event\":\"stateReloaded\"}}\n")
        );
        assert_eq!(
            watch_audit_error(Format::Human, T, "disk full"),
            format!("{T} error: disk full\n")
        );
        assert_eq!(
            watch_stopping(Format::Human, T, "SIGTERM"),
            format!("{T} SIGTERM: stopping: finishing removals in flight, then verifying\n")
        );
    }

    #[test]
    fn every_json_line_of_the_watch_log_matches_its_schema() {
        let took = Duration::from_millis(7);
        let engines = [("local".to_string(), "unix:///run/docker.sock".to_string())];
        let failed: Result<Report, PartError> = Err(PartError::Explain("listing failed".into()));
        let lines = [
            watch_started(Format::Json, T, &engines, None, None),
            watch_started(
                Format::Json,
                T,
                &engines,
                Some(Duration::from_secs(600)),
                Some("127.0.0.1:9464".parse().unwrap()),
            ),
            watch_cycle(
                Format::Json,
                T,
                "local",
                "events",
                took,
                &Ok(hostile_report()),
            )
            .unwrap(),
            watch_cycle(Format::Json, T, "local", "resync", took, &failed).unwrap(),
            watch_stream(Format::Json, T, "local", Some("reset")),
            watch_stream(Format::Json, T, "local", None),
            watch_state(Format::Json, T, None),
            watch_state(Format::Json, T, Some("state.toml:1:1: bad")),
            watch_audit_error(Format::Json, T, "disk full"),
            watch_stopping(Format::Json, T, "SIGTERM"),
            watch_quit(Format::Json, T),
        ];
        for line in &lines {
            assert_eq!(line.lines().count(), 1, "{line}");
            assert!(line.starts_with("{\"schemaVersion\":2,"), "{line}");
            crate::schema::check("watch-line", line);
        }
    }
}
