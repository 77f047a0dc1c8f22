//! `smt server --metrics ADDR`: the endpoint's counters for Prometheus, at
//! `GET /metrics` on an HTTP/1.1 listener of its own thread (hyper on a
//! single-threaded tokio runtime).
//!
//! A scraper every few seconds is its only legitimate user, and anyone who
//! can reach the port may be hostile, so every connection is bounded:
//!
//! | bound | value | what it stops |
//! |---|---|---|
//! | request head complete within | [`HEAD_TIMEOUT`] (hyper's header read timeout) | a slowloris: one header byte a second |
//! | whole connection within | [`CONNECTION_TIMEOUT`] | an idle connection, a reader that never takes the response |
//! | one request per connection | `Connection: close` | keep-alive connections piling up |
//! | request head at most | [`MAX_HEAD`] bytes, else 431 | a head that grows without end |
//! | connections at once | [`MAX_CONNECTIONS`]; one more closes the oldest | a connection flood holding every slot |
//!
//! Connections are served concurrently, so a stalled one delays nobody;
//! past the limit the *oldest* goes, so a scraper (whose connection lives
//! a few milliseconds) gets in even while an attacker holds the limit. The
//! listener never touches SMT traffic and takes the engine's lock only to
//! copy the counters.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use smt::Endpoint;
use tokio::task::AbortHandle;

use crate::error::CliError;

/// How long a client has to send its whole request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a connection may stay open at all, request and response.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest request head read; a longer one gets 431.
const MAX_HEAD: usize = 8 << 10;

/// Connections served at once; one more closes the oldest.
const MAX_CONNECTIONS: usize = 64;

/// How long to wait before accepting again when accepting failed (out of
/// file descriptors, say).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The exposition format's content type (Prometheus text, version 0.0.4).
const PROMETHEUS_TEXT: &str = smt::metrics::CONTENT_TYPE;

/// Starts answering scrapes on `listen` for `endpoint`, with its
/// `peers` busiest peers as `smt_peer_*` metrics. Returns the bound
/// address (`listen` may have port 0).
pub fn serve(listen: SocketAddr, endpoint: Endpoint, peers: usize) -> Result<SocketAddr, CliError> {
    // Bound here, so a bad address is the caller's error, not the thread's.
    let listener = TcpListener::bind(listen).map_err(|e| {
        CliError::Environment(format!("cannot open --metrics address {listen}: {e}"))
    })?;
    let bound = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Environment(format!("cannot start the metrics runtime: {e}")))?;
    std::thread::Builder::new()
        .name("smt-metrics".into())
        .spawn(move || runtime.block_on(accept_loop(listener, endpoint, peers)))
        .map_err(|e| CliError::Environment(format!("cannot start the metrics thread: {e}")))?;
    Ok(bound)
}

/// Accepts connections for ever, each served by its own task.
async fn accept_loop(listener: TcpListener, endpoint: Endpoint, peers: usize) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("metrics listener: {e}; no metrics will be served");
            return;
        }
    };
    let mut live = Connections::default();
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::debug!("metrics listener: accept failed: {e}");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        live.make_room();
        let endpoint = endpoint.clone();
        let task = tokio::spawn(async move {
            let io = TokioIo::new(stream);
            let service = service_fn(|request| {
                let response = respond(&request, &endpoint, peers);
                async move { Ok::<_, Infallible>(response) }
            });
            let connection = http1_server().serve_connection(io, service);
            // A client that goes away or stalls is nobody's concern.
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, connection).await;
        });
        live.push(task.abort_handle());
    }
}

/// hyper's HTTP/1.1 server with this listener's bounds.
fn http1_server() -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_header_size(MAX_HEAD)
        .keep_alive(false)
        // The same head as before hyper: no Date, `Content-Type` as
        // scripts may grep for it.
        .auto_date_header(false)
        .title_case_headers(true);
    builder
}

/// The connections being served, oldest first.
#[derive(Debug, Default)]
struct Connections(VecDeque<AbortHandle>);

impl Connections {
    /// Forgets finished connections, then closes the oldest ones until
    /// one more fits.
    fn make_room(&mut self) {
        self.0.retain(|task| !task.is_finished());
        while self.0.len() >= MAX_CONNECTIONS {
            if let Some(oldest) = self.0.pop_front() {
                oldest.abort();
            }
        }
    }

    fn push(&mut self, task: AbortHandle) {
        self.0.push_back(task);
    }
}

/// The decision table: method and path (hyper leaves out the body of an
/// answer to HEAD).
fn respond<B>(request: &Request<B>, endpoint: &Endpoint, peers: usize) -> Response<Full<Bytes>> {
    let head_or_get = matches!(*request.method(), Method::GET | Method::HEAD);
    match (head_or_get, request.uri().path()) {
        (true, "/metrics") => scrape(endpoint, peers),
        (true, _) => text(StatusCode::NOT_FOUND, "not found; try /metrics\n".into()),
        (false, _) => text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n".into()),
    }
}

fn scrape(endpoint: &Endpoint, peers: usize) -> Response<Full<Bytes>> {
    let stats = match endpoint.stats_with_peers(peers) {
        Ok(stats) => stats,
        Err(e) => return text(StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")),
    };
    let mut body = String::with_capacity(16 << 10);
    // NOTE(unwrap): writing into a String cannot fail.
    stats
        .write_prometheus(&[], &mut body)
        .expect("formatting into a String");
    with_type(StatusCode::OK, PROMETHEUS_TEXT, body)
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    with_type(status, "text/plain; charset=utf-8", body)
}

fn with_type(
    status: StatusCode,
    content_type: &'static str,
    body: String,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    use prometheus_parse::{Scrape, Value};
    use smt::keys::{fresh_session_pair, AeadAlgorithm};
    use smt::{EndpointConfig, Stats};

    use super::*;

    const RPCS: u64 = 40;

    /// GET `path` over TCP: the status code and the body.
    fn get(addr: SocketAddr, path: &str) -> (u16, String) {
        let mut s = TcpStream::connect(addr).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        (code, body.to_string())
    }

    /// Counters that have settled: two readings in a row agree (the
    /// delayed ACKs and the tick's recount are done).
    fn settled(ep: &Endpoint) -> Stats {
        let mut last = ep.stats_with_peers(8).unwrap();
        loop {
            std::thread::sleep(Duration::from_millis(50));
            let now = ep.stats_with_peers(8).unwrap();
            if now == last {
                return now;
            }
            last = now;
        }
    }

    /// A sample's value by metric name and labels.
    fn value(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
        let sample = scrape
            .samples
            .iter()
            .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .unwrap_or_else(|| panic!("no sample {name} {labels:?}"));
        match &sample.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            other => panic!("{name}: not a number: {other:?}"),
        }
    }

    /// The histogram's cumulative counts by upper bound.
    fn buckets(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> Vec<(f64, f64)> {
        let sample = scrape
            .samples
            .iter()
            .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .unwrap_or_else(|| panic!("no histogram {name}"));
        match &sample.value {
            Value::Histogram(h) => h.iter().map(|b| (b.less_than, b.count)).collect(),
            other => panic!("{name}: not a histogram: {other:?}"),
        }
    }

    /// The exporter on a real endpoint, scraped over TCP and read with a
    /// Prometheus text-format parser: every figure equals the endpoint's
    /// own `stats()`, the endpoint's and the peer's.
    #[test]
    fn a_scrape_parses_and_matches_the_endpoints_stats() {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let server = Endpoint::bind(any, EndpointConfig::default()).unwrap();
        let client = Endpoint::bind(any, EndpointConfig::default()).unwrap();
        let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
        client.install_session(server.local_addr(), ck).unwrap();
        server.install_session(client.local_addr(), sk).unwrap();
        crate::demo::spawn_echo(&server, 1).unwrap();
        for i in 0..RPCS {
            let size = [10, 3000, 70_000][i as usize % 3];
            client
                .call(server.local_addr(), vec![i as u8; size])
                .unwrap();
        }
        let metrics = serve(any, client.clone(), 8).unwrap();
        let stats = settled(&client);
        let (code, body) = get(metrics, "/metrics");
        assert_eq!(code, 200, "{body}");
        assert_eq!(
            client.stats_with_peers(8).unwrap(),
            stats,
            "no change since"
        );
        let scrape = Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).unwrap();

        let t = &stats.total;
        let want: HashMap<&str, u64> = HashMap::from([
            ("smt_rpcs_completed_total", t.rpcs.completed),
            ("smt_rpcs_failed_total", t.rpcs.failed),
            ("smt_datagrams_sent_total", t.traffic.datagrams_sent),
            ("smt_datagrams_received_total", t.traffic.datagrams_received),
            ("smt_sent_bytes_total", t.traffic.bytes_sent),
            ("smt_received_bytes_total", t.traffic.bytes_received),
            ("smt_messages_sent_total", t.traffic.messages_sent),
            ("smt_data_packets_sent_total", t.packets.data_sent),
            ("smt_records_sealed_total", t.records.sealed),
            ("smt_records_opened_total", t.records.opened),
            ("smt_handshakes_completed_total", t.handshakes.completed),
            ("smt_sessions", stats.held.sessions),
            ("smt_spare_buffer_bytes", stats.held.spare_buffer_bytes),
        ]);
        for (name, v) in &want {
            assert_eq!(value(&scrape, name, &[]), *v as f64, "{name}");
        }
        assert_eq!(t.rpcs.completed, RPCS);
        for (reason, n) in t.drops.iter() {
            let got = value(&scrape, "smt_drops_total", &[("reason", reason.name())]);
            assert_eq!(got, n as f64, "{}", reason.name());
        }

        // The RTT histogram: cumulative buckets ending at +Inf, its count
        // and its sum as the stats say.
        let rtt = buckets(&scrape, "smt_rpc_rtt_seconds", &[]);
        assert_eq!(rtt.len(), smt::stats::LatencyHistogram::BUCKETS);
        assert_eq!(rtt.last().unwrap(), &(f64::INFINITY, RPCS as f64));
        let mut cumulative = 0;
        for ((le, count), (i, n)) in rtt.iter().zip(t.rtt.buckets().iter().enumerate()) {
            cumulative += n;
            assert_eq!(*count, cumulative as f64);
            let bound =
                smt::stats::LatencyHistogram::bound(i).map_or(f64::INFINITY, |b| b.as_secs_f64());
            assert_eq!(*le, bound);
        }
        assert_eq!(
            value(&scrape, "smt_rpc_rtt_seconds_count", &[]),
            RPCS as f64
        );
        let sum = value(&scrape, "smt_rpc_rtt_seconds_sum", &[]);
        assert!((sum - t.rtt.sum().as_secs_f64()).abs() < 1e-9, "{sum}");

        // The one peer, labelled by its address.
        assert_eq!(stats.peers.len(), 1);
        let peer = &stats.peers[0];
        let label = server.local_addr().to_string();
        let by_peer = [("peer", label.as_str())];
        assert_eq!(peer.addr, server.local_addr());
        assert_eq!(
            value(&scrape, "smt_peer_rpcs_completed_total", &by_peer),
            peer.counters.rpcs.completed as f64
        );
        assert_eq!(
            value(&scrape, "smt_peer_sent_bytes_total", &by_peer),
            peer.counters.traffic.bytes_sent as f64
        );
        let peer_rtt = buckets(&scrape, "smt_peer_rpc_rtt_seconds", &by_peer);
        assert_eq!(peer_rtt.last().unwrap().1, RPCS as f64);

        // Every family has its HELP text, and nothing else is served.
        for s in &scrape.samples {
            let family = s.metric.trim_end_matches("_sum").trim_end_matches("_count");
            assert!(scrape.docs.contains_key(family), "no HELP for {}", s.metric);
        }
        assert_eq!(get(metrics, "/").0, 404);
        client.close();
        server.close();
    }

    #[test]
    fn other_methods_and_long_heads_are_refused() {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let ep = Endpoint::bind(any, EndpointConfig::default()).unwrap();
        let metrics = serve(any, ep.clone(), 0).unwrap();
        let mut s = TcpStream::connect(metrics).unwrap();
        write!(s, "POST /metrics HTTP/1.1\r\n\r\n").unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        assert!(text.starts_with("HTTP/1.1 405 "), "{text}");
        // Exactly the limit, without the blank line that ends a head: all
        // of it is read (no reset), and it is refused.
        let mut s = TcpStream::connect(metrics).unwrap();
        let mut long = "GET /metrics HTTP/1.1\r\nX: ".to_string();
        long.push_str(&"a".repeat(MAX_HEAD - long.len()));
        s.write_all(long.as_bytes()).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        assert!(text.starts_with("HTTP/1.1 431 "), "{text}");
        ep.close();
        let (code, _) = get(metrics, "/metrics");
        assert_eq!(code, 503, "a closed endpoint has no counters");
    }
}
