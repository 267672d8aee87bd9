//! Asking a running watch's `/healthz` (`sandboxctl health`): one plain
//! HTTP/1.1 `GET` on a TCP connection, written by hand, within one
//! deadline; the answer typed (`Probe`).
//!
//! Owns the request, reading and parsing the answer (at most
//! [`MAX_ANSWER`] bytes), and trying again while the endpoint closes the
//! connection without a word, as it does past its connection cap. Reaches
//! no engine and reads no state file. Must not print or decide an exit
//! status: what an answer means for the run is `Probe::healthy`, its words
//! `render`'s. What `/healthz` answers, and when, is `observe::health`'s
//! rule: 200 while the watch is converging or degraded (reaping what it
//! can), 503 otherwise.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The most of an answer read: `/healthz` answers one short line.
const MAX_ANSWER: usize = 16 * 1024;

/// How `/healthz` begins the detail of a degraded answer (a 200: the watch
/// still reaps); `observe::health` writes it.
pub(crate) const DEGRADED: &str = "degraded: ";
/// The pause before asking again on a new connection after one closed
/// without an answer.
const AGAIN_AFTER: Duration = Duration::from_millis(50);

/// What asking `/healthz` on `addr` gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Probe {
    /// The address asked.
    pub(crate) addr: SocketAddr,
    /// The answer, or why there was none.
    pub(crate) result: Result<Answer, NoAnswer>,
}

/// An HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    /// Its status code.
    pub(crate) status: u16,
    /// The first line of its body, as sent (untrusted: escape it for a
    /// terminal); empty when there is none.
    pub(crate) detail: String,
}

/// Why `/healthz` gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NoAnswer {
    /// Nothing listens on the address.
    Refused,
    /// No full answer within the deadline.
    Deadline(Duration),
    /// Every connection was closed before any answer, until the deadline
    /// (`tries` connections).
    Closed { tries: u32 },
    /// Something answered, but not HTTP: its first bytes.
    NotHttp(String),
    /// Connecting, writing or reading failed: the system's words.
    Failed(String),
}

impl Probe {
    /// Healthy when the watch answered 200: its last cycle converged (or
    /// one did recently), or it is degraded, reaping all that a stuck call
    /// does not hold back (docs/decisions/0003-degraded-is-not-dead.md).
    pub(crate) fn healthy(&self) -> bool {
        matches!(&self.result, Ok(answer) if answer.status == 200)
    }

    /// True when the answer says the watch is degraded.
    pub(crate) fn degraded(&self) -> bool {
        matches!(&self.result, Ok(answer) if answer.status == 200 && answer.detail.starts_with(DEGRADED))
    }
}

/// Asks `GET /healthz` on `addr`, giving it `deadline` in all. A connection
/// closed before any byte of an answer (an endpoint past its cap closes it
/// at once) is tried again on a new one after 50 ms, until the deadline.
pub(crate) async fn ask(addr: SocketAddr, deadline: Duration) -> Probe {
    let until = Instant::now() + deadline;
    let mut tries = 0;
    let result = loop {
        tries += 1;
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, once(addr)).await {
            Err(_) => break Err(NoAnswer::Deadline(deadline)),
            Ok(Ok(answer)) => break parse(&answer),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                break Err(NoAnswer::Refused)
            }
            Ok(Err(e)) if closed_unanswered(&e) => {
                if Instant::now() + AGAIN_AFTER >= until {
                    break Err(NoAnswer::Closed { tries });
                }
                tokio::time::sleep(AGAIN_AFTER).await;
            }
            Ok(Err(e)) => break Err(NoAnswer::Failed(e.to_string())),
        }
    };
    Probe { addr, result }
}

/// The error of a connection closed before any byte of an answer came.
const UNANSWERED: &str = "closed without an answer";

/// True for a connection the server closed (or reset) before answering.
fn closed_unanswered(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    matches!(
        e.kind(),
        ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
    )
}

/// One request on a new connection: the answer's bytes (at most
/// [`MAX_ANSWER`]), or an `UnexpectedEof` error when none came.
async fn once(addr: SocketAddr) -> std::io::Result<Vec<u8>> {
    let mut stream = TcpStream::connect(addr).await?;
    let request = format!(
        "GET /healthz HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: sandboxctl/{} health\r\nAccept: text/plain\r\nConnection: close\r\n\r\n",
        env!("CARGO_PKG_VERSION")
    );
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => {
                answer.extend_from_slice(&buf[..n]);
                if answer.len() >= MAX_ANSWER || complete(&answer) {
                    break;
                }
            }
            // A reset after an answer came keeps what came.
            Err(e) if !answer.is_empty() && closed_unanswered(&e) => break,
            Err(e) => return Err(e),
        }
    }
    if answer.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            UNANSWERED,
        ));
    }
    Ok(answer)
}

/// True once `answer` holds a head and as many body bytes as its
/// `Content-Length` says (without one: only the end of the stream tells).
fn complete(answer: &[u8]) -> bool {
    let Some(end) = find(answer, b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&answer[..end]);
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .is_some_and(|length| answer.len() >= end + 4 + length)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The status and the body's first line of an HTTP/1.x answer.
fn parse(answer: &[u8]) -> Result<Answer, NoAnswer> {
    let text = String::from_utf8_lossy(answer);
    let not_http = || NoAnswer::NotHttp(text.chars().take(80).collect());
    let status_line = text.lines().next().unwrap_or_default();
    let mut words = status_line.split_whitespace();
    let (Some(version), Some(code)) = (words.next(), words.next()) else {
        return Err(not_http());
    };
    let status = match code.parse::<u16>() {
        Ok(status) if version.starts_with("HTTP/1.") && (100..1000).contains(&status) => status,
        _ => return Err(not_http()),
    };
    let detail = text
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.lines().next().unwrap_or_default().trim().to_string())
        .unwrap_or_default();
    Ok(Answer { status, detail })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serves each connection with the next of `answers` (`None`: close it
    /// at once, unanswered), after reading the request's head.
    async fn serve(answers: Vec<Option<&'static str>>) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            for answer in answers {
                let (mut stream, _) = listener.accept().await.unwrap();
                let Some(answer) = answer else {
                    drop(stream);
                    continue;
                };
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while find(&head, b"\r\n\r\n").is_none() {
                    let n = stream.read(&mut buf).await.unwrap();
                    if n == 0 {
                        break;
                    }
                    head.extend_from_slice(&buf[..n]);
                }
                let request = String::from_utf8_lossy(&head);
                assert!(
                    request.starts_with("GET /healthz HTTP/1.1\r\n"),
                    "{request}"
                );
                stream.write_all(answer.as_bytes()).await.unwrap();
            }
        });
        addr
    }

    const OK: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: 34\r\n\r\nlast cycle converged 1.5s ago\nmore";
    const DEGRADED: &str =
        "HTTP/1.1 200 OK\r\ncontent-length: 27\r\n\r\ndegraded: the last cycle..\n";
    const DEAD: &str =
        "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 39\r\n\r\nno reconcile cycle has finished yet\n\n\n\n";

    #[tokio::test]
    async fn a_200_is_healthy_degraded_or_not_and_a_503_is_not() {
        let deadline = Duration::from_secs(5);
        let ok = ask(serve(vec![Some(OK)]).await, deadline).await;
        assert!(ok.healthy() && !ok.degraded(), "{ok:?}");
        assert_eq!(
            ok.result,
            Ok(Answer {
                status: 200,
                detail: "last cycle converged 1.5s ago".into()
            })
        );
        let degraded = ask(serve(vec![Some(DEGRADED)]).await, deadline).await;
        assert!(degraded.healthy() && degraded.degraded(), "{degraded:?}");
        let dead = ask(serve(vec![Some(DEAD)]).await, deadline).await;
        assert!(!dead.healthy(), "{dead:?}");
        assert_eq!(
            dead.result,
            Ok(Answer {
                status: 503,
                detail: "no reconcile cycle has finished yet".into()
            })
        );
    }

    #[tokio::test]
    async fn a_connection_closed_unanswered_is_tried_again_until_the_deadline() {
        let addr = serve(vec![None, None, Some(OK)]).await;
        let probe = ask(addr, Duration::from_secs(5)).await;
        assert!(probe.healthy(), "{probe:?}");
        // Always closed: unhealthy at the deadline, saying so.
        let addr = serve(vec![None; 1000]).await;
        let probe = ask(addr, Duration::from_millis(400)).await;
        assert!(
            matches!(probe.result, Err(NoAnswer::Closed { tries }) if tries > 1),
            "{probe:?}"
        );
    }

    #[tokio::test]
    async fn nothing_listening_silence_and_strangers_are_unhealthy() {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = free.local_addr().unwrap();
        drop(free);
        let refused = ask(addr, Duration::from_secs(5)).await;
        assert_eq!(refused.result, Err(NoAnswer::Refused));

        // Accepts, reads, never answers.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = silent.local_addr().unwrap();
        let started = Instant::now();
        let probe = ask(addr, Duration::from_millis(300)).await;
        assert_eq!(
            probe.result,
            Err(NoAnswer::Deadline(Duration::from_millis(300)))
        );
        assert!(started.elapsed() < Duration::from_secs(2));
        drop(silent);

        let ssh = ask(
            serve(vec![Some("SSH-2.0-OpenSSH_9.2\r\n")]).await,
            Duration::from_secs(5),
        )
        .await;
        assert_eq!(
            ssh.result,
            Err(NoAnswer::NotHttp("SSH-2.0-OpenSSH_9.2\r\n".into()))
        );
        let other = ask(
            serve(vec![Some(
                "HTTP/1.1 404 Not Found\r\ncontent-length: 10\r\n\r\nnot found\n",
            )])
            .await,
            Duration::from_secs(5),
        )
        .await;
        assert!(!other.healthy());
        assert_eq!(
            other.result,
            Ok(Answer {
                status: 404,
                detail: "not found".into()
            })
        );
    }
}
