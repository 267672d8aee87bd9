//! The watch log (`watch`, on stderr): one line per event, the time first.
//! Cycles that did something (with each failure on a line of its own), event
//! streams lost and back, state-file reloads, audit-log failures, start and
//! stop. Human text, or one JSON object per line with `--format json`; the
//! same one-line form (`line`) serves `hold`'s lines, headed by its name.
//!
//! Every fragment an engine, a state file or the user supplied is escaped
//! where it is put into the human line, once, so a line's only breaks are
//! the log's own; the JSON keeps exact values.

use std::fmt::Write as _;

use crate::exec::report::PartError;
use crate::exec::report::Report;
use crate::render::table::{kind_counts, name_cell, plural};
use crate::render::Format;
use crate::text::{escape, escape_lines};

/// One JSON log line: `time`, `event`, then `fields` (an object), and a newline.
pub(crate) fn json_line(time: &str, event: &str, fields: serde_json::Value) -> String {
    let mut v = serde_json::json!({ "time": time, "event": event });
    if let (Some(map), serde_json::Value::Object(extra)) = (v.as_object_mut(), fields) {
        map.extend(extra);
    }
    let mut s = v.to_string();
    s.push('\n');
    s
}

/// One line of a log: `head` (a watch log line's is its time) and the human
/// text (`human`, in which the caller escaped every fragment it did not
/// write itself, so its only line breaks are its own), or a JSON object per
/// line with `--format json` (exact values).
pub(crate) fn line(
    format: Format,
    head: &str,
    time: &str,
    event: &str,
    human: String,
    fields: serde_json::Value,
) -> String {
    match format {
        Format::Json => json_line(time, event, fields),
        _ => format!("{head} {human}\n"),
    }
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
        Err(e) => Some(line(
            format,
            time,
            time,
            "cycleFailed",
            format!(
                "engine {}: cycle ({trigger}) removed nothing: {}",
                escape(engine),
                escape(&e.to_string())
            ),
            serde_json::json!({ "engine": engine, "trigger": trigger, "tookMs": ms, "error": e.to_string() }),
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
            Some(line(
                format,
                time,
                time,
                "cycle",
                human,
                serde_json::json!({
                    "engine": engine,
                    "trigger": trigger,
                    "tookMs": ms,
                    "converged": r.converged,
                    "removed": r.removed.map(Vec::len),
                    "failures": r.failures,
                    "remaining": left,
                }),
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
        Some(e) => line(
            format,
            time,
            time,
            "streamLost",
            format!(
                "engine {}: event stream lost: {}; reconnecting with backoff",
                escape(engine),
                escape(e)
            ),
            serde_json::json!({ "engine": engine, "error": e }),
        ),
        None => line(
            format,
            time,
            time,
            "streamBack",
            format!(
                "engine {}: event stream reconnected; running a full cycle",
                escape(engine)
            ),
            serde_json::json!({ "engine": engine }),
        ),
    }
}

/// The log line of a state file reloaded, or broken (`error`).
pub(crate) fn watch_state(format: Format, time: &str, error: Option<&str>) -> String {
    match error {
        Some(e) => error_line(format, time, "stateBroken", "state file not applied: ", e),
        None => line(
            format,
            time,
            time,
            "stateReloaded",
            "state file changed: reloaded".into(),
            serde_json::json!({}),
        ),
    }
}

/// The log line of a failure to write the audit log.
pub(crate) fn watch_audit_error(format: Format, time: &str, error: &str) -> String {
    error_line(format, time, "auditFailed", "error: ", error)
}

/// A watch log line of `event`: `words` then `error`, escaped (JSON: the
/// exact `error`).
fn error_line(format: Format, time: &str, event: &str, words: &str, error: &str) -> String {
    line(
        format,
        time,
        time,
        event,
        format!("{words}{}", escape_lines(error)),
        serde_json::json!({ "error": error }),
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
    line(
        format,
        time,
        time,
        "started",
        human,
        serde_json::json!({
            "engines": engines.iter().map(|(n, e)| serde_json::json!({"engine": n, "endpoint": e})).collect::<Vec<_>>(),
            "graceSeconds": grace.map(|g| g.as_secs()),
            "metrics": metrics.map(|a| a.to_string()),
        }),
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
    line(
        format,
        time,
        time,
        "stopping",
        format!(
            "{}: stopping: finishing removals in flight, then verifying",
            escape(signal)
        ),
        serde_json::json!({ "signal": signal }),
    )
}

/// The log line of a watch a second Ctrl-C ended at once: the cycle in
/// flight not finished, nothing verified, no final report.
pub(crate) fn watch_quit(format: Format, time: &str) -> String {
    line(
        format,
        time,
        time,
        "quit",
        "SIGINT again: quit at once, without finishing the cycle in flight or verifying".into(),
        serde_json::json!({ "signal": "SIGINT" }),
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
            format!("{{\"event\":\"stateReloaded\",\"time\":\"{T}\"}}\n")
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
}
