//! The health view (`health`): one line on what a running watch's
//! `/healthz` answered, `healthy: ...` or `unhealthy: ...`, with what to do
//! when nothing answered. JSON: one object, `healthy`, `degraded`, the
//! address, the status and the detail line, or the error. The detail is
//! what the endpoint sent: escaped in human output, exact in JSON.

use crate::exec::probe::{NoAnswer, Probe};
use crate::render::{document, Format};

/// `health --format json` (`health.schema.json`): what the endpoint
/// answered, or why nothing did. Every key is printed; `status` and
/// `detail` are `null` when nothing answered, `error` when something did.
#[derive(serde::Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct HealthDoc<'a> {
    /// True when the endpoint answered 200 (a watch whose cycles converge or degrade).
    healthy: bool,
    /// True when it answered 200 with a `degraded: ` detail.
    degraded: bool,
    /// The address asked: `http://ADDR/healthz`.
    url: String,
    /// The HTTP status it answered.
    status: Option<u16>,
    /// The detail line it sent (exact, not escaped).
    detail: Option<&'a str>,
    /// Why nothing answered, and what to do.
    error: Option<String>,
}
use crate::text::clip;

/// The longest detail line shown in human output.
const DETAIL_WIDTH: usize = 300;

/// What `health` prints on stdout.
pub(crate) fn health(probe: &Probe, format: Format) -> String {
    let url = format!("http://{}/healthz", probe.addr);
    if format == Format::Json {
        let (status, detail) = match &probe.result {
            Ok(answer) => (Some(answer.status), Some(answer.detail.as_str())),
            Err(_) => (None, None),
        };
        return document(HealthDoc {
            healthy: probe.healthy(),
            degraded: probe.degraded(),
            url,
            status,
            detail,
            error: probe.result.as_ref().err().map(|e| why(e, probe)),
        });
    }
    let line = match &probe.result {
        Ok(answer) if probe.healthy() => format!(
            "healthy: {} ({url}: {})",
            clip(&answer.detail, DETAIL_WIDTH),
            answer.status
        ),
        Ok(answer) if answer.status == 503 => format!(
            "unhealthy: {} ({url}: {})",
            clip(&answer.detail, DETAIL_WIDTH),
            answer.status
        ),
        Ok(answer) => format!(
            "unhealthy: {url} answered {}, which a sandboxctl watch never does ({}); is ADDR the address of `watch --metrics`?",
            answer.status,
            clip(&answer.detail, DETAIL_WIDTH)
        ),
        Err(e) => format!("unhealthy: {}", why(e, probe)),
    };
    format!("{line}\n")
}

/// Why nothing answered, and what to do.
fn why(e: &NoAnswer, probe: &Probe) -> String {
    let addr = probe.addr;
    match e {
        NoAnswer::Refused => format!(
            "nothing listens on {addr} (connection refused): is `sandboxctl watch --metrics {addr}` running (SANDBOXCTL_METRICS={addr})?"
        ),
        NoAnswer::Deadline(d) => format!(
            "no answer from http://{addr}/healthz within {}: the watch is stuck or the machine overloaded; give more time with --deadline",
            humantime::format_duration(*d)
        ),
        NoAnswer::Closed { tries } => format!(
            "http://{addr}/healthz closed {tries} connections without an answer: the endpoint is past its connection cap; try again, or give more time with --deadline"
        ),
        NoAnswer::NotHttp(start) => format!(
            "{addr} answered something that is not HTTP (\"{}\"): is ADDR the address of `watch --metrics`?",
            clip(start, 60)
        ),
        NoAnswer::Failed(error) => format!(
            "cannot ask http://{addr}/healthz: {}",
            clip(error, DETAIL_WIDTH)
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::exec::probe::Answer;

    fn probe(result: Result<Answer, NoAnswer>) -> Probe {
        Probe {
            addr: "127.0.0.1:9464".parse().unwrap(),
            result,
        }
    }

    fn answer(status: u16, detail: &str) -> Result<Answer, NoAnswer> {
        Ok(Answer {
            status,
            detail: detail.into(),
        })
    }

    #[test]
    fn every_answer_in_words() {
        let lines: Vec<String> = [
            answer(200, "last cycle converged 2.0s ago"),
            answer(200, "degraded: the last cycle reaped what it could"),
            answer(503, "no reconcile cycle has finished yet"),
            answer(404, "not found: try /metrics or /healthz"),
            answer(503, "hostile \u{1b}[31mred\nline"),
            Err(NoAnswer::Refused),
            Err(NoAnswer::Deadline(Duration::from_secs(5))),
            Err(NoAnswer::Closed { tries: 40 }),
            Err(NoAnswer::NotHttp("SSH-2.0-OpenSSH_9.2\r\n".into())),
            Err(NoAnswer::Failed(
                "Network is unreachable (os error 101)".into(),
            )),
        ]
        .into_iter()
        .map(|r| health(&probe(r), Format::Human))
        .collect();
        insta::assert_snapshot!(lines.concat(), @r#"
        healthy: last cycle converged 2.0s ago (http://127.0.0.1:9464/healthz: 200)
        healthy: degraded: the last cycle reaped what it could (http://127.0.0.1:9464/healthz: 200)
        unhealthy: no reconcile cycle has finished yet (http://127.0.0.1:9464/healthz: 503)
        unhealthy: http://127.0.0.1:9464/healthz answered 404, which a sandboxctl watch never does (not found: try /metrics or /healthz); is ADDR the address of `watch --metrics`?
        unhealthy: hostile \u{1b}[31mred\nline (http://127.0.0.1:9464/healthz: 503)
        unhealthy: nothing listens on 127.0.0.1:9464 (connection refused): is `sandboxctl watch --metrics 127.0.0.1:9464` running (SANDBOXCTL_METRICS=127.0.0.1:9464)?
        unhealthy: no answer from http://127.0.0.1:9464/healthz within 5s: the watch is stuck or the machine overloaded; give more time with --deadline
        unhealthy: http://127.0.0.1:9464/healthz closed 40 connections without an answer: the endpoint is past its connection cap; try again, or give more time with --deadline
        unhealthy: 127.0.0.1:9464 answered something that is not HTTP ("SSH-2.0-OpenSSH_9.2\r\n"): is ADDR the address of `watch --metrics`?
        unhealthy: cannot ask http://127.0.0.1:9464/healthz: Network is unreachable (os error 101)
        "#);
    }

    #[test]
    fn json_keeps_the_exact_detail() {
        let text = health(&probe(answer(200, "degraded: \u{1b}x")), Format::Json);
        crate::schema::check("health", &text);
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["schemaVersion"], crate::model::SCHEMA_VERSION);
        assert_eq!(value["healthy"], true);
        assert_eq!(value["degraded"], true);
        assert_eq!(value["status"], 200);
        assert_eq!(value["detail"], "degraded: \u{1b}x");
        assert_eq!(value["error"], serde_json::Value::Null);
        assert_eq!(value["url"], "http://127.0.0.1:9464/healthz");
        let text = health(&probe(Err(NoAnswer::Refused)), Format::Json);
        crate::schema::check("health", &text);
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["healthy"], false);
        assert_eq!(value["status"], serde_json::Value::Null);
        assert!(value["error"]
            .as_str()
            .unwrap()
            .starts_with("nothing listens on 127.0.0.1:9464"));
    }
}
