//! The notifier: an observer of a run that tells `[[notify]]` receivers
//! what happened to boxes, as signed JSON `POST`s, off the teardown's path.
//!
//! Owns the notification's body (`Body`, published as
//! `docs/schema/notify.json`), its signature (`sign`: hex HMAC-SHA256 of
//! the body under the receiver's key), which events a verified report gives
//! (`events_of`: `removed`, `failed`; `expiring_of` for `watch`), and
//! delivery: one task per delivery, at most [`IN_FLIGHT`] at once and
//! [`QUEUE`] waiting (more are given up on at once, as failures), each tried
//! with backoff within [`DELIVERY_BUDGET`], each try within
//! [`TRY_TIMEOUT`]. A command waits for what is still in flight at most
//! [`EXIT_WAIT`] once its report is out (`finish`), then gives up on the rest.
//!
//! Must not block, delay or fail a teardown: `on` only queues (it never
//! awaits), a delivery's failure is a `DeliveryFailure` for the command to
//! say (stderr, the metric) and never part of its verdict. Must not print,
//! nor show a key anywhere (`model::notify::Secret`), nor decide what was
//! removed: it reads the verified report (`exec::report`) and nothing else.
//! Sends `stopped` from nothing yet: the report has no stopped list (see
//! `events_of`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use hmac::{Hmac, KeyInit, Mac};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::exec::event::{Event, Observer};
use crate::exec::report::{FleetReport, Named, Report};
use crate::model::notify::{DeliveryFailure, NotifyEvent, Receiver};
use crate::model::{Kind, Outcome, Reason};
use crate::plan::Step;

use super::metrics::Metrics;

/// The longest one delivery is tried for, all its tries and their backoff.
pub(crate) const DELIVERY_BUDGET: Duration = Duration::from_secs(5);
/// The longest one try may take: connect, TLS, request and answer.
pub(crate) const TRY_TIMEOUT: Duration = Duration::from_secs(2);
/// The first pause between tries; doubled after each.
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// The longest a command waits, once its report is out, for deliveries
/// still being tried; then it gives up on them (failures, said).
pub(crate) const EXIT_WAIT: Duration = Duration::from_secs(5);
/// Deliveries tried at once.
pub(crate) const IN_FLIGHT: usize = 8;
/// Deliveries queued (tried or waiting) at once; one more is given up on.
pub(crate) const QUEUE: usize = 256;
/// The most bytes of a receiver's answer read (it is only drained).
const ANSWER_BYTES: usize = 64 * 1024;

/// One object of a box in a notification: its kind, the report's object
/// (`engine`, `id`, `name`, `box`) and its reason, the report's typed
/// reason (`code`, its fields, `text`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Notified {
    pub kind: Kind,
    #[serde(flatten)]
    pub object: Named,
    pub reason: Reason,
}

/// What happened to one box on one engine, made from the verified report:
/// the notifier's input, before it is addressed to receivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BoxEvent {
    pub(crate) event: NotifyEvent,
    pub(crate) engine: String,
    /// `None`: objects that carry no box ID (each leaked alone).
    pub(crate) box_id: Option<String>,
    /// `removed`: what went; `failed`: what went before the box was left;
    /// `expiring`: what is due to go.
    pub(crate) objects: Vec<Notified>,
    /// `failed`: what is left, with why.
    pub(crate) leftovers: Vec<Notified>,
    /// When the box is due to go (RFC 3339), where known.
    pub(crate) remove_at: Option<String>,
    /// The identity of what it says, from which the delivery ID is made:
    /// the same event about the same facts has the same ID.
    pub(crate) facts: String,
}

/// The body of a notification: one JSON object, `POST`ed with
/// `Content-Type: application/json`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub struct Body<'a> {
    /// The version of the document's schema (docs/schema/).
    #[schemars(extend("const" = crate::model::SCHEMA_VERSION))]
    pub schema_version: u32,
    pub event: NotifyEvent,
    /// The same for every try of this delivery (and `X-Sandboxctl-Delivery`):
    /// a receiver dedupes by it. 32 hex digits.
    pub delivery_id: &'a str,
    /// When the event was made (RFC 3339, UTC, milliseconds).
    pub at: &'a str,
    pub engine: &'a str,
    /// The box ID; `null` for objects that carry none.
    #[serde(rename = "box")]
    pub box_id: Option<&'a str>,
    /// `removed`: what went; `failed`: what went before the box was left;
    /// `expiring`: what is due to go. Each with its reason.
    pub objects: &'a [Notified],
    /// `failed`: what is left, each with why. Absent otherwise.
    #[serde(skip_serializing_if = "<[Notified]>::is_empty")]
    pub leftovers: &'a [Notified],
    /// When the box is due to go (RFC 3339), where known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remove_at: Option<&'a str>,
}

/// The body of `event` as delivery `id`, made at `at`.
pub(crate) fn body(event: &BoxEvent, id: &str, at: &str) -> Vec<u8> {
    let body = Body {
        schema_version: crate::model::SCHEMA_VERSION,
        event: event.event,
        delivery_id: id,
        at,
        engine: &event.engine,
        box_id: event.box_id.as_deref(),
        objects: &event.objects,
        leftovers: &event.leftovers,
        remove_at: event.remove_at.as_deref(),
    };
    serde_json::to_vec(&body).expect("a notification serializes")
}

/// `X-Sandboxctl-Signature-256`: `sha256=` and the hex HMAC-SHA256 of
/// `body` under `key`.
pub(crate) fn sign(key: &[u8], body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
    mac.update(body);
    format!("sha256={}", crate::model::hex(&mac.finalize().into_bytes()))
}

/// The delivery ID of `event`: 32 hex digits of SHA-256 over its event,
/// engine, box and facts. The same facts give the same ID (a restarted
/// watch's `expiring`), so a receiver dedupes by it.
pub(crate) fn delivery_id(event: &BoxEvent) -> String {
    let mut h = Sha256::new();
    for part in [
        event.event.as_str(),
        &event.engine,
        event.box_id.as_deref().unwrap_or(""),
        &event.facts,
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    crate::model::hex(&h.finalize()[..16])
}

/// Why each object a part's steps ended with went, and how: by engine and
/// object (kind, name).
type Ended = BTreeMap<(String, Kind, String), (Reason, Outcome)>;

/// The events one engine's verified report gives: per box, `failed` when
/// objects that should go are left (with what did go), else `removed` when
/// the final listing answered and shows gone everything of the box this run
/// removed. `ended`: why each step's object went (the plan's reason), from
/// the run's events. Sorted by box.
///
/// `stamped`: a `failed` event's identity includes the report's time (each
/// run's failure is its own delivery); a watch leaves it out, so that a box
/// left the same way cycle after cycle is told once. A `removed` event's
/// identity always includes it: a removal happens once.
///
/// `stopped` is not made here yet: the report has no stopped list. Once it
/// has one, `stopped` is one more pass like `removed`'s over it, on the
/// same `verified` rule.
pub(crate) fn events_of(
    engine: &str,
    report: &Report,
    ended: &Ended,
    stamped: bool,
) -> Vec<BoxEvent> {
    let mut gone: BTreeMap<Option<String>, Vec<Notified>> = BTreeMap::new();
    for (kind, list) in report.removed.iter() {
        for g in list {
            let key = (engine.to_string(), kind, g.object.name.clone());
            let reason = match ended.get(&key) {
                Some((reason, _)) => reason.clone(),
                None => Reason::AlreadyGone,
            };
            gone.entry(g.object.box_id.clone())
                .or_default()
                .push(Notified {
                    kind,
                    object: g.object.clone(),
                    reason,
                });
        }
    }
    let mut left: BTreeMap<Option<String>, Vec<Notified>> = BTreeMap::new();
    for (kind, list) in report.remaining.iter() {
        for l in list {
            left.entry(l.object.box_id.clone())
                .or_default()
                .push(Notified {
                    kind,
                    object: l.object.clone(),
                    reason: l.reason.clone(),
                });
        }
    }
    let boxes: BTreeSet<Option<String>> = gone.keys().chain(left.keys()).cloned().collect();
    let mut events = Vec::new();
    for box_id in boxes {
        let objects = gone.remove(&box_id).unwrap_or_default();
        let leftovers = left.remove(&box_id).unwrap_or_default();
        let names = |list: &[Notified]| {
            list.iter()
                .map(|n| {
                    let id = n.object.id.as_deref().unwrap_or("");
                    let code = reason_code(&n.reason);
                    format!("{}/{}/{id}/{code}", n.kind.as_str(), n.object.name)
                })
                .collect::<Vec<_>>()
                .join(",")
        };
        let now = report.now.as_deref().unwrap_or("");
        let (event, facts) = if !leftovers.is_empty() {
            let stamp = if stamped { now } else { "" };
            let facts = format!("{stamp}|{}|{}", names(&objects), names(&leftovers));
            (NotifyEvent::Failed, facts)
        } else if report.verified && !objects.is_empty() {
            (NotifyEvent::Removed, format!("{now}|{}", names(&objects)))
        } else {
            continue;
        };
        events.push(BoxEvent {
            event,
            engine: engine.to_string(),
            box_id,
            objects,
            leftovers,
            remove_at: None,
            facts,
        });
    }
    events
}

/// A reason's code (its JSON `code`).
fn reason_code(reason: &Reason) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|v| v.get("code").and_then(|c| c.as_str()).map(str::to_string))
        .unwrap_or_default()
}

/// When a kept object is due to go, from its reason: a declared box's
/// `expires`, the end of an undeclared box's grace, a lease's end.
fn due_of(reason: &Reason) -> Option<&str> {
    match reason {
        Reason::DeclaredBox {
            expires: Some(at), ..
        } => Some(at),
        Reason::WithinGrace { until } | Reason::Leased { until, .. } => Some(until),
        _ => None,
    }
}

/// The `expiring` events one engine's report gives for a receiver that is
/// told `before` ahead: per box kept with a due time (the earliest of its
/// objects'), when the report's time (`report.now`, the cycle's clock) is
/// within `before` of it and not past it. Sorted by box.
pub(crate) fn expiring_of(engine: &str, report: &Report, before: Duration) -> Vec<BoxEvent> {
    let Some(now) = report
        .now
        .as_deref()
        .and_then(crate::model::time::parse_rfc3339)
    else {
        return Vec::new();
    };
    let mut boxes: BTreeMap<String, (i64, Vec<Notified>)> = BTreeMap::new();
    for (kind, list) in report.kept.iter() {
        for kept in list {
            let (Some(box_id), Some(due)) = (
                kept.object.box_id.clone(),
                due_of(&kept.why).and_then(crate::model::time::parse_rfc3339),
            ) else {
                continue;
            };
            let entry = boxes.entry(box_id).or_insert((due, Vec::new()));
            entry.0 = entry.0.min(due);
            entry.1.push(Notified {
                kind,
                object: Named::of(&kept.object),
                reason: kept.why.clone(),
            });
        }
    }
    let ahead = i64::try_from(before.as_secs()).unwrap_or(i64::MAX);
    boxes
        .into_iter()
        .filter(|(_, (due, _))| now < *due && due.saturating_sub(ahead) <= now)
        .map(|(box_id, (due, objects))| {
            let remove_at = crate::model::time::rfc3339(due);
            BoxEvent {
                event: NotifyEvent::Expiring,
                engine: engine.to_string(),
                box_id: Some(box_id),
                objects,
                leftovers: Vec::new(),
                facts: remove_at.clone(),
                remove_at: Some(remove_at),
            }
        })
        .collect()
}

/// What the notifier keeps between events: why each step's object went,
/// what a watch already sent (`expiring` per receiver, box and due time;
/// `failed` per receiver and facts), and the failures not yet said.
#[derive(Default)]
struct Memory {
    ended: Ended,
    sent: BTreeSet<(usize, String)>,
    failures: Vec<DeliveryFailure>,
    /// Deliveries queued and not yet ended, by number: what `finish` names
    /// when it gives up on them.
    pending: BTreeMap<u64, DeliveryFailure>,
    next: u64,
}

/// The notifier of one run (apply, destroy, prune) or one watch.
pub(crate) struct Notifier {
    receivers: Vec<Arc<Receiver>>,
    memory: Arc<Mutex<Memory>>,
    tasks: Mutex<tokio::task::JoinSet<()>>,
    slots: Arc<tokio::sync::Semaphore>,
    queued: Arc<std::sync::atomic::AtomicUsize>,
    metrics: Option<Arc<Metrics>>,
    /// True for a watch: each box's events are sent once per what they say.
    watching: bool,
}

impl Notifier {
    /// A notifier for `receivers` (none: it does nothing), counting its
    /// failures in `metrics` when given; `watching` for a watch.
    pub(crate) fn new(
        receivers: &[Receiver],
        metrics: Option<Arc<Metrics>>,
        watching: bool,
    ) -> Option<Notifier> {
        if receivers.is_empty() {
            return None;
        }
        Some(Notifier {
            receivers: receivers.iter().cloned().map(Arc::new).collect(),
            memory: Arc::default(),
            tasks: Mutex::new(tokio::task::JoinSet::new()),
            slots: Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT)),
            queued: Arc::default(),
            metrics,
            watching,
        })
    }

    /// Queues the events of a converging run's verified report (apply,
    /// destroy, prune; a watch's cycles come through `on`).
    pub(crate) fn report(&self, report: &FleetReport) {
        let ended = {
            let mut memory = lock(&self.memory);
            std::mem::take(&mut memory.ended)
        };
        for part in &report.parts {
            let Ok(r) = &part.result else { continue };
            for event in events_of(&part.engine, r, &ended, !self.watching) {
                self.send(&event);
            }
            if self.watching {
                for (n, receiver) in self.receivers.iter().enumerate() {
                    if receiver.wants(NotifyEvent::Expiring) {
                        for event in expiring_of(&part.engine, r, receiver.before) {
                            self.send_to(n, &event);
                        }
                    }
                }
            }
        }
    }

    /// Queues `event` for every receiver that wants it.
    fn send(&self, event: &BoxEvent) {
        for n in 0..self.receivers.len() {
            if self.receivers[n].wants(event.event) {
                self.send_to(n, event);
            }
        }
    }

    /// Queues `event` for receiver `n` (once per what it says, in a watch).
    fn send_to(&self, n: usize, event: &BoxEvent) {
        let id = delivery_id(event);
        let once = matches!(event.event, NotifyEvent::Expiring | NotifyEvent::Failed);
        if self.watching && once && !lock(&self.memory).sent.insert((n, id.clone())) {
            return;
        }
        let receiver = Arc::clone(&self.receivers[n]);
        let at = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
        let payload = Bytes::from(body(event, &id, &at));
        let failure = DeliveryFailure {
            url: receiver.url.clone(),
            event: event.event,
            engine: event.engine.clone(),
            box_id: event.box_id.clone(),
            delivery_id: id,
            error: String::new(),
        };
        use std::sync::atomic::Ordering;
        if self.queued.fetch_add(1, Ordering::SeqCst) >= QUEUE {
            self.queued.fetch_sub(1, Ordering::SeqCst);
            let error = format!("not sent: {QUEUE} notifications were already waiting");
            fail(&self.memory, self.metrics.as_deref(), failure, error);
            return;
        }
        let number = {
            let mut memory = lock(&self.memory);
            memory.next += 1;
            let number = memory.next;
            memory.pending.insert(number, failure.clone());
            number
        };
        let (memory, metrics) = (Arc::clone(&self.memory), self.metrics.clone());
        let (slots, queued) = (Arc::clone(&self.slots), Arc::clone(&self.queued));
        let task = async move {
            let outcome = match slots.acquire_owned().await {
                Ok(_slot) => deliver(&receiver, &failure, payload).await,
                Err(_) => Err("not sent: the notifier was closed".to_string()),
            };
            queued.fetch_sub(1, Ordering::SeqCst);
            lock(&memory).pending.remove(&number);
            if let Err(error) = outcome {
                fail(&memory, metrics.as_deref(), failure, error);
            }
        };
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        if tokio::runtime::Handle::try_current().is_ok() {
            tasks.spawn(task);
        }
    }

    /// Waits at most `wait` for the deliveries still being tried, then
    /// gives up on the rest (each a failure).
    pub(crate) async fn finish(&self, wait: Duration) {
        let mut tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        let drained =
            tokio::time::timeout(wait, async { while tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
        }
        let pending = std::mem::take(&mut lock(&self.memory).pending);
        for (_, failure) in pending {
            let error = format!(
                "still being tried when the command ended ({}s after its report); given up",
                wait.as_secs()
            );
            fail(&self.memory, self.metrics.as_deref(), failure, error);
        }
    }

    /// The failures since the last call, in the order they happened.
    pub(crate) fn take_failures(&self) -> Vec<DeliveryFailure> {
        std::mem::take(&mut lock(&self.memory).failures)
    }
}

impl Observer for Notifier {
    fn on(&self, event: &Event<'_>) {
        match event {
            Event::Finished {
                engine,
                step,
                outcome,
                ..
            } => remember(&self.memory, engine, step, outcome),
            Event::Cycle { report, .. } => self.report(report),
            _ => {}
        }
    }
}

/// Keeps why `step`'s object went, and how.
fn remember(memory: &Mutex<Memory>, engine: &str, step: &Step, outcome: &Outcome) {
    let key = (
        engine.to_string(),
        step.object.kind,
        step.object.name.clone(),
    );
    lock(memory)
        .ended
        .insert(key, (step.why.clone(), outcome.clone()));
}

/// Records a delivery given up on.
fn fail(
    memory: &Mutex<Memory>,
    metrics: Option<&Metrics>,
    mut failure: DeliveryFailure,
    error: String,
) {
    failure.error = error;
    if let Some(m) = metrics {
        m.add_notify_failure(failure.event.as_str());
    }
    lock(memory).failures.push(failure);
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Tries one delivery until a 2xx answer, within [`DELIVERY_BUDGET`]:
/// each try within [`TRY_TIMEOUT`], a pause doubling from
/// [`FIRST_BACKOFF`] between tries. A 4xx answer other than 408 and 429 is
/// not tried again (the receiver refused this body). The error of the last try.
async fn deliver(receiver: &Receiver, what: &DeliveryFailure, body: Bytes) -> Result<(), String> {
    let signature = sign(receiver.secret.expose(), &body);
    let started = tokio::time::Instant::now();
    let deadline = started + DELIVERY_BUDGET;
    let mut pause = FIRST_BACKOFF;
    let mut tries = 0u32;
    loop {
        tries += 1;
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let attempt = post(receiver, what, &signature, body.clone());
        let error = match tokio::time::timeout(TRY_TIMEOUT.min(left), attempt).await {
            Ok(Ok(status)) if (200..300).contains(&status) => return Ok(()),
            Ok(Ok(status)) => {
                let error = format!("the receiver answered HTTP {status}");
                if (400..500).contains(&status) && status != 408 && status != 429 {
                    return Err(format!("{error} (not tried again)"));
                }
                error
            }
            Ok(Err(e)) => e,
            Err(_) => format!("no answer within {}s", TRY_TIMEOUT.min(left).as_secs_f32()),
        };
        let now = tokio::time::Instant::now();
        if now + pause >= deadline {
            return Err(format!(
                "{error}; gave up after {tries} tries in {:.1}s",
                (now - started).as_secs_f32()
            ));
        }
        tokio::time::sleep(pause).await;
        pause *= 2;
    }
}

/// One `POST` of `body` to the receiver: its status.
async fn post(
    receiver: &Receiver,
    what: &DeliveryFailure,
    signature: &str,
    body: Bytes,
) -> Result<u16, String> {
    use http_body_util::{BodyExt, Full};
    use hyper_util::rt::TokioIo;
    let url = url::Url::parse(&receiver.url).map_err(|e| format!("bad url: {e}"))?;
    let host = url.host_str().ok_or("the url names no host")?.to_string();
    let port = url.port_or_known_default().ok_or("the url names no port")?;
    let host_port = match url.host() {
        Some(url::Host::Ipv6(ip)) => format!("[{ip}]:{port}"),
        _ => format!("{host}:{port}"),
    };
    let tcp = tokio::net::TcpStream::connect(&host_port)
        .await
        .map_err(|e| format!("cannot connect to {host_port}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let path = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    };
    let authority = match url.port() {
        Some(p) => format!("{}:{p}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_string(),
    };
    let request = http::Request::post(path)
        .header(http::header::HOST, authority)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(
            http::header::USER_AGENT,
            concat!("sandboxctl/", env!("CARGO_PKG_VERSION")),
        )
        .header("X-Sandboxctl-Event", what.event.as_str())
        .header("X-Sandboxctl-Delivery", &what.delivery_id)
        .header("X-Sandboxctl-Signature-256", signature)
        .body(Full::new(body))
        .map_err(|e| format!("cannot make the request: {e}"))?;
    let answer = if url.scheme() == "https" {
        let tls = tls_config()?;
        let name = tokio_rustls::rustls::pki_types::ServerName::try_from(host.clone())
            .map_err(|e| format!("{host} is not a TLS server name: {e}"))?;
        let stream = tokio_rustls::TlsConnector::from(tls)
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS with {host_port} failed: {e}"))?;
        send(TokioIo::new(stream), request).await?
    } else {
        send(TokioIo::new(tcp), request).await?
    };
    let status = answer.status().as_u16();
    // Drain a little of the answer; its words are the receiver's and unused.
    let mut body = answer.into_body();
    let mut read = 0usize;
    while read < ANSWER_BYTES {
        match body.frame().await {
            Some(Ok(frame)) => read += frame.data_ref().map_or(0, |d| d.len()),
            _ => break,
        }
    }
    Ok(status)
}

/// Sends `request` over `io` (HTTP/1.1, one request per connection).
async fn send<T>(
    io: T,
    request: http::Request<http_body_util::Full<Bytes>>,
) -> Result<http::Response<hyper::body::Incoming>, String>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("HTTP handshake failed: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    sender
        .send_request(request)
        .await
        .map_err(|e| format!("the request failed: {e}"))
}

/// The TLS client configuration: the system's roots (read once).
fn tls_config() -> Result<Arc<tokio_rustls::rustls::ClientConfig>, String> {
    use std::sync::OnceLock;
    static CONFIG: OnceLock<Result<Arc<tokio_rustls::rustls::ClientConfig>, String>> =
        OnceLock::new();
    CONFIG
        .get_or_init(|| {
            use tokio_rustls::rustls;
            let mut roots = rustls::RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                let _ = roots.add(cert);
            }
            if roots.is_empty() {
                return Err("no trusted root certificates found on this system".to_string());
            }
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("TLS setup failed: {e}"))?
                .with_root_certificates(roots)
                .with_no_client_auth();
            Ok(Arc::new(config))
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::report::{Gone, Leftover};

    fn named(name: &str, box_id: Option<&str>) -> Named {
        Named {
            engine: "default".into(),
            id: Some(format!("{name}-id")),
            name: name.into(),
            box_id: box_id.map(str::to_string),
        }
    }

    fn gone(report: &mut Report, kind: Kind, name: &str, box_id: &str) {
        report.removed.push(
            kind,
            Gone {
                object: named(name, Some(box_id)),
                outcome: Outcome::Removed,
                reclaimed_bytes: None,
            },
        );
    }

    fn not_declared(box_id: &str) -> Reason {
        Reason::BoxNotDeclared {
            box_id: box_id.into(),
        }
    }

    #[test]
    fn the_signature_is_the_hex_hmac_sha256_of_the_body() {
        // RFC 4231, test case 2.
        assert_eq!(
            sign(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_verified_box_gone_whole_is_removed_with_its_reasons() {
        let mut report = Report::empty();
        report.now = Some("2026-01-02T03:04:05Z".into());
        report.verified = true;
        gone(&mut report, Kind::Container, "sbx-a", "a");
        gone(&mut report, Kind::Volume, "sbx-a", "a");
        let mut ended = Ended::new();
        ended.insert(
            ("default".into(), Kind::Container, "sbx-a".into()),
            (not_declared("a"), Outcome::Removed),
        );
        let events = events_of("default", &report, &ended, true);
        assert_eq!(events.len(), 1);
        let e = &events[0];
        assert_eq!(
            (e.event, e.box_id.as_deref()),
            (NotifyEvent::Removed, Some("a"))
        );
        assert_eq!(e.objects[0].reason, not_declared("a"));
        // Not seen ending in this run: another actor removed it.
        assert_eq!(e.objects[1].reason, Reason::AlreadyGone);
        let id = delivery_id(e);
        assert_eq!(id.len(), 32);
        let body: serde_json::Value =
            serde_json::from_slice(&body(e, &id, "2026-01-02T03:04:06.000Z")).unwrap();
        assert_eq!(body["schemaVersion"], crate::model::SCHEMA_VERSION);
        assert_eq!(body["event"], "removed");
        assert_eq!(body["deliveryId"], id.as_str());
        assert_eq!(body["box"], "a");
        assert_eq!(body["objects"][0]["kind"], "container");
        assert_eq!(body["objects"][0]["reason"]["code"], "boxNotDeclared");
        assert_eq!(
            body["objects"][0]["reason"]["text"],
            "leaked: box a is not declared"
        );
        assert!(body.get("leftovers").is_none() && body.get("removeAt").is_none());
        // Unverified (the final listing did not answer): nothing is said gone.
        report.verified = false;
        assert!(events_of("default", &report, &ended, true).is_empty());
    }

    #[test]
    fn a_box_left_with_leftovers_is_failed_naming_them() {
        let mut report = Report::empty();
        report.now = Some("2026-01-02T03:04:05Z".into());
        report.verified = true;
        gone(&mut report, Kind::Container, "sbx-b", "b");
        report.remaining.push(
            Kind::Volume,
            Leftover {
                object: named("sbx-b", Some("b")),
                reason: Reason::RemovalFailed {
                    error: "engine answered HTTP 500".into(),
                },
            },
        );
        let events = events_of("default", &report, &Ended::new(), true);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].event, NotifyEvent::Failed);
        assert_eq!(events[0].leftovers[0].object.name, "sbx-b");
        let body: serde_json::Value = serde_json::from_slice(&body(&events[0], "x", "t")).unwrap();
        assert_eq!(body["leftovers"][0]["reason"]["code"], "removalFailed");
        // A watch tells the same failure once: its identity leaves the time out.
        let a = delivery_id(&events_of("default", &report, &Ended::new(), false)[0]);
        report.now = Some("2026-01-02T03:05:05Z".into());
        let b = delivery_id(&events_of("default", &report, &Ended::new(), false)[0]);
        assert_eq!(a, b);
        let c = delivery_id(&events_of("default", &report, &Ended::new(), true)[0]);
        assert_ne!(a, c);
    }

    #[test]
    fn expiring_is_due_within_before_and_not_past() {
        let mut report = Report::empty();
        report.now = Some("2026-01-02T03:00:00Z".into());
        let kept = |box_id: &str, until: &str| crate::plan::Noted {
            object: crate::plan::Entry {
                engine: "default".into(),
                kind: Kind::Container,
                id: None,
                name: format!("sbx-{box_id}"),
                box_id: Some(box_id.into()),
                state: None,
                created: None,
            },
            why: Reason::WithinGrace {
                until: until.into(),
            },
        };
        report
            .kept
            .push(Kind::Container, kept("soon", "2026-01-02T03:05:00Z"));
        report
            .kept
            .push(Kind::Container, kept("later", "2026-01-02T04:00:00Z"));
        report
            .kept
            .push(Kind::Container, kept("past", "2026-01-02T02:00:00Z"));
        let events = expiring_of("default", &report, Duration::from_secs(600));
        let boxes: Vec<_> = events.iter().map(|e| e.box_id.as_deref()).collect();
        assert_eq!(boxes, [Some("soon")]);
        assert_eq!(events[0].remove_at.as_deref(), Some("2026-01-02T03:05:00Z"));
        // The same box and due time: the same delivery ID (a restarted watch).
        let again = expiring_of("default", &report, Duration::from_secs(900));
        assert_eq!(delivery_id(&events[0]), delivery_id(&again[0]));
    }
}
