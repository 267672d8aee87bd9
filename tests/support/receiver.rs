//! A notification receiver the test starts on 127.0.0.1 (never any other
//! address): a std `TcpListener` on a thread of its own that keeps every
//! `POST` it gets (headers and body) and answers as told (`Answer`). Stops
//! when dropped (hung connections are closed then).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the receiver answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// `204 No Content`.
    Ok,
    /// `500 Internal Server Error`, every time.
    Error,
    /// Reads the request and never answers.
    Hang,
}

/// One request as the receiver got it.
#[derive(Debug, Clone)]
pub struct Got {
    pub method: String,
    pub path: String,
    /// Header names lowercased.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl Got {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a notification's body is JSON")
    }
}

pub struct Receiver {
    port: u16,
    got: Arc<Mutex<Vec<Got>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    /// A receiver on 127.0.0.1 (a free port) answering `answer`.
    pub fn start(answer: Answer) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let got = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (got2, stop2) = (Arc::clone(&got), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            let mut hung: Vec<TcpStream> = Vec::new();
            while !stop2.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((mut stream, _)) => {
                        stream.set_nonblocking(false).unwrap();
                        stream
                            .set_read_timeout(Some(Duration::from_secs(5)))
                            .unwrap();
                        if let Some(request) = read_request(&mut stream) {
                            got2.lock().unwrap().push(request);
                        }
                        match answer {
                            Answer::Ok => {
                                let _ = stream.write_all(
                                    b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n",
                                );
                            }
                            Answer::Error => {
                                let _ = stream.write_all(
                                    b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\nConnection: close\r\n\r\noops",
                                );
                            }
                            Answer::Hang => hung.push(stream),
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Err(_) => break,
                }
            }
        });
        Receiver {
            port,
            got,
            stop,
            thread: Some(thread),
        }
    }

    /// A loopback URL where nothing listens (a port bound, then let go).
    pub fn down_url() -> String {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        format!("http://127.0.0.1:{port}/hook")
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    /// Every request so far.
    pub fn got(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }

    /// Waits up to `timeout` for at least `n` requests; every request so far.
    pub fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Got> {
        let end = Instant::now() + timeout;
        loop {
            let got = self.got();
            if got.len() >= n || Instant::now() >= end {
                return got;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one HTTP/1.1 request (headers, then `Content-Length` bytes).
fn read_request(stream: &mut TcpStream) -> Option<Got> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 || buf.len() > 1 << 20 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_string(), first.next()?.to_string());
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers.get("content-length")?.parse().ok()?;
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Some(Got {
        method,
        path,
        headers,
        body,
    })
}
