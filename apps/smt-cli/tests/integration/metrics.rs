//! `smt server --metrics`: a real server process scraped over TCP as
//! Prometheus would, its text read with a Prometheus text-format parser,
//! and the figures checked against the client's own counters and the
//! server's `--json` counter lines; and scrapes that still succeed while
//! idle connections, slowloris clients and more connections than the
//! listener's limit are held open (issue #22 defect 5).

use crate::common;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use common::{banner_addr, psk, smt_ok, ANY_PORT, BIN};
use prometheus_parse::{Scrape, Value};
use serde_json::Value as Json;

/// The body of `GET /metrics` at `addr`, with its status line checked.
fn scrape(addr: &str) -> Scrape {
    let body = scrape_text(addr);
    Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("Prometheus text format")
}

/// `promtool check metrics` on `page`: `None` without promtool (installed
/// by `scripts/promtool-test.sh --install`), else what it said when it
/// found fault (empty when it found none).
fn promtool_problems(page: &str) -> Option<String> {
    let mut child = match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("promtool: {e}"),
    };
    let mut stdin = child.stdin.take().unwrap();
    let text = page.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    Some(if out.status.success() {
        said
    } else {
        format!("{}: {said}", out.status)
    })
}

/// The body of `GET /metrics` at `addr`, with its status line checked.
fn scrape_text(addr: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect to --metrics");
    write!(s, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4"),
        "{head}"
    );
    body.to_string()
}

/// A counter or gauge by name and labels.
fn value(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> u64 {
    let sample = scrape
        .samples
        .iter()
        .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .unwrap_or_else(|| panic!("no {name} {labels:?}"));
    match sample.value {
        Value::Counter(v) | Value::Gauge(v) => v as u64,
        ref other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn a_servers_metrics_parse_and_agree_with_its_counters() {
    let key = psk();
    let mut server = Command::new(BIN)
        .args(["server", "--listen", ANY_PORT, "--psk", &key])
        .args(["--metrics", "127.0.0.1:0", "--metrics-peers", "4"])
        .args(["--stats-interval", "0.2", "--json", "--duration", "30"])
        .env_remove("SMT_PSK")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn smt server");
    let (tx, lines) = mpsc::channel();
    let stdout = server.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let next = || {
        lines
            .recv_timeout(Duration::from_secs(20))
            .expect("a line from the server")
    };
    let banner = next();
    assert!(banner.starts_with("smt server on "), "{banner}");
    let listen = banner_addr(&banner, "smt server on ");
    let metrics_line = next();
    let metrics = metrics_line
        .strip_prefix("metrics on http://")
        .and_then(|l| l.split_once("/metrics"))
        .map(|(addr, _)| addr.to_string())
        .unwrap_or_else(|| panic!("no metrics address: {metrics_line}"));

    let client: Json = serde_json::from_str(&smt_ok(&[
        "client",
        "--server",
        &listen,
        "--psk",
        &key,
        "--seconds",
        "0.4",
        "--size",
        "2000",
        "--json",
    ]))
    .unwrap();
    let client_addr = client["client"].as_str().unwrap();
    let calls = client["stats"]["total"]["rpcs"]["completed"]
        .as_u64()
        .unwrap();
    assert!(calls > 1, "{client}");
    // Let the last acknowledgements land, and forget the counter lines
    // printed until now.
    std::thread::sleep(Duration::from_millis(300));
    while lines.try_recv().is_ok() {}

    let page = scrape_text(&metrics);
    match promtool_problems(&page) {
        None => println!("SKIPPED: promtool check (promtool not installed)"),
        Some(problems) => assert!(problems.trim().is_empty(), "promtool: {problems}"),
    }
    let s = scrape(&metrics);
    // Every request the client completed was received once, and served.
    assert_eq!(value(&s, "smt_messages_received_total", &[]), calls);
    assert_eq!(value(&s, "smt_requests_served_total", &[]), calls);
    assert_eq!(value(&s, "smt_handshakes_completed_total", &[]), 1);
    let peer = [("peer", client_addr)];
    assert_eq!(value(&s, "smt_peer_messages_received_total", &peer), calls);
    assert_eq!(
        value(&s, "smt_drops_total", &[("reason", "auth_failure")]),
        0
    );
    // What the client sent, the server received (no loss on loopback),
    // and the few acknowledgements the client's close sent after it
    // printed its counters.
    let sent = client["stats"]["total"]["traffic"]["bytes_sent"]
        .as_u64()
        .unwrap();
    let received = value(&s, "smt_received_bytes_total", &[]);
    assert!(
        (sent..sent + 1024).contains(&received),
        "{received} vs {sent}"
    );
    // The server made no calls: an empty RTT histogram, still well-formed.
    let rtt = s
        .samples
        .iter()
        .find(|x| x.metric == "smt_rpc_rtt_seconds")
        .expect("the RTT histogram");
    match &rtt.value {
        Value::Histogram(h) => assert!(h.iter().all(|b| b.count == 0.0)),
        other => panic!("{other:?}"),
    }
    // Its handler answered every call: that many handler latencies.
    let handled = s
        .samples
        .iter()
        .find(|x| x.metric == "smt_handler_latency_seconds")
        .expect("the handler latency histogram");
    match &handled.value {
        Value::Histogram(h) => assert_eq!(h.last().unwrap().count, calls as f64),
        other => panic!("{other:?}"),
    }

    // The server's own counters, printed after the scrape, say the same.
    let printed: Json = serde_json::from_str(&next()).expect("a JSON counter line");
    let total = &printed["stats"]["total"];
    for (metric, field) in [
        (
            "smt_messages_received_total",
            &total["traffic"]["messages_received"],
        ),
        (
            "smt_datagrams_received_total",
            &total["traffic"]["datagrams_received"],
        ),
        (
            "smt_received_bytes_total",
            &total["traffic"]["bytes_received"],
        ),
        ("smt_sent_bytes_total", &total["traffic"]["bytes_sent"]),
        ("smt_records_opened_total", &total["records"]["opened"]),
        ("smt_sessions", &printed["stats"]["held"]["sessions"]),
    ] {
        assert_eq!(Some(value(&s, metric, &[])), field.as_u64(), "{metric}");
    }
    let _ = server.kill();
    let _ = server.wait();
}

/// How long a scrape may take while hostile connections are held open.
/// Generous (a scrape takes milliseconds), and far below "forever": the
/// listener served one connection at a time, so a slowloris sending a
/// header byte a second held it for good and each idle connection for
/// 5 s.
const SCRAPE_LIMIT: Duration = Duration::from_secs(10);

/// The listener's connection limit (`MAX_CONNECTIONS` in
/// `src/metrics.rs`).
const CONNECTION_LIMIT: usize = 64;

/// An `smt server --metrics` process and its metrics address; killed
/// when dropped.
struct MetricsServer {
    child: Child,
    metrics: String,
}

impl MetricsServer {
    fn start() -> Self {
        let mut child = Command::new(BIN)
            .args(["server", "--listen", ANY_PORT, "--psk", &psk()])
            .args(["--metrics", "127.0.0.1:0", "--duration", "120"])
            .env_remove("SMT_PSK")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn smt server");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut next = || lines.next().expect("a line").expect("server output");
        assert!(next().starts_with("smt server on "));
        let line = next();
        let metrics = line
            .strip_prefix("metrics on http://")
            .and_then(|l| l.split_once("/metrics"))
            .map(|(addr, _)| addr.to_string())
            .unwrap_or_else(|| panic!("no metrics address: {line}"));
        std::thread::spawn(move || lines.for_each(drop));
        Self { child, metrics }
    }

    /// One scrape, which must answer 200 within [`SCRAPE_LIMIT`]; returns
    /// how long it took.
    fn scrape_within_limit(&self) -> Duration {
        let start = Instant::now();
        let mut s = TcpStream::connect(&self.metrics).expect("connect to --metrics");
        s.set_read_timeout(Some(SCRAPE_LIMIT)).unwrap();
        write!(s, "GET /metrics HTTP/1.1\r\nHost: {}\r\n\r\n", self.metrics).unwrap();
        let mut text = String::new();
        match s.read_to_string(&mut text) {
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!("no answer to a scrape within {SCRAPE_LIMIT:?}")
            }
            Err(e) => panic!("scrape failed: {e}"),
        }
        assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
        assert!(text.contains("smt_rpcs_completed_total"), "{text}");
        start.elapsed()
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Connections that send part of a request head, one byte a second,
/// until dropped.
struct Slowloris {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Slowloris {
    fn start(addr: &str, connections: usize) -> Self {
        let mut streams: Vec<TcpStream> = (0..connections)
            .map(|_| TcpStream::connect(addr).expect("connect a slowloris"))
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let head = b"GET /metrics HTTP/1.1\r\nX-Slow: ".iter().copied();
            for byte in head.chain(std::iter::repeat(b'a')) {
                if flag.load(Ordering::Relaxed) {
                    return;
                }
                // A connection the server closed is simply gone.
                streams.retain_mut(|s| s.write_all(&[byte]).is_ok());
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Slowloris {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Idle connections (connected, nothing sent) and slowloris connections
/// (one header byte a second) held open for longer than the listener's
/// old 5 s read timeout: scrapes are answered all along.
#[test]
fn scrapes_are_answered_while_idle_and_slowloris_connections_are_held() {
    let server = MetricsServer::start();
    let idle: Vec<TcpStream> = (0..8)
        .map(|_| TcpStream::connect(&server.metrics).expect("connect an idle client"))
        .collect();
    let slow = Slowloris::start(&server.metrics, 8);
    std::thread::sleep(Duration::from_millis(200));
    let start = Instant::now();
    let mut took = Vec::new();
    while start.elapsed() < Duration::from_secs(12) {
        took.push(server.scrape_within_limit());
        std::thread::sleep(Duration::from_millis(500));
    }
    println!("scrapes took {took:?}");
    drop(slow);
    drop(idle);
}

/// Far more connections than the listener's limit, each idle: the
/// oldest are closed to make room (none is left waiting for a slot), and
/// a scrape after them all is answered.
#[test]
fn connections_past_the_limit_neither_pile_up_nor_block_scrapes() {
    let server = MetricsServer::start();
    let opened = 4 * CONNECTION_LIMIT;
    // A connection refused outright is one the listener did not queue.
    let mut held: Vec<TcpStream> = (0..opened)
        .filter_map(|_| TcpStream::connect(&server.metrics).ok())
        .collect();
    let refused = opened - held.len();
    let took = server.scrape_within_limit();
    println!("a scrape after {opened} idle connections ({refused} refused) took {took:?}");
    // Those the listener closed read as ended (or reset); the others
    // would block.
    let closed = refused
        + held
            .iter_mut()
            .map(|s| {
                s.set_nonblocking(true).unwrap();
                let mut b = [0u8; 1];
                !matches!(s.read(&mut b), Err(e) if e.kind() == ErrorKind::WouldBlock)
            })
            .filter(|closed| *closed)
            .count();
    assert!(
        closed >= opened - CONNECTION_LIMIT,
        "only {closed} of {opened} connections were closed; the limit is {CONNECTION_LIMIT}"
    );
}
