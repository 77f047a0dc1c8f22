//! `smt server --metrics ADDR`: the endpoint's counters for Prometheus, at
//! `GET /metrics` on a plain HTTP/1.1 listener of its own thread.
//!
//! One connection at a time, one request per connection (`Connection:
//! close`), the request head read within [`READ_TIMEOUT`] and at most
//! [`MAX_HEAD`] bytes: a scraper every few seconds is its only user, and a
//! client that stalls or floods it delays the next scrape, nothing else
//! (the listener never touches SMT traffic, and takes the engine's lock
//! only to copy the counters).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use smt::Endpoint;

use crate::error::CliError;

/// How long a client has to send its request head.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest request head read; a longer one gets 431.
const MAX_HEAD: u64 = 8 << 10;

/// The exposition format's content type (Prometheus text, version 0.0.4).
const CONTENT_TYPE: &str = smt::metrics::CONTENT_TYPE;

/// Starts answering scrapes on `listen` for `endpoint`, with its
/// `peers` busiest peers as `smt_peer_*` metrics. Returns the bound
/// address (`listen` may have port 0).
pub fn serve(listen: SocketAddr, endpoint: Endpoint, peers: usize) -> Result<SocketAddr, CliError> {
    let listener = TcpListener::bind(listen).map_err(|e| {
        CliError::Environment(format!("cannot open --metrics address {listen}: {e}"))
    })?;
    let bound = listener.local_addr()?;
    std::thread::Builder::new()
        .name("smt-metrics".into())
        .spawn(move || {
            // A scraper that goes away mid-request is nobody's concern.
            for stream in listener.incoming().flatten() {
                let _ = answer(stream, &endpoint, peers);
            }
        })
        .map_err(|e| CliError::Environment(format!("cannot start the metrics thread: {e}")))?;
    Ok(bound)
}

/// Reads one request and answers it.
fn answer(stream: TcpStream, endpoint: &Endpoint, peers: usize) -> std::io::Result<()> {
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    stream.set_write_timeout(Some(READ_TIMEOUT))?;
    let mut reader = BufReader::new((&stream).take(MAX_HEAD));
    let response = match read_head(&mut reader)? {
        Some(line) => respond(&line, endpoint, peers),
        // Cut at the limit, or the client left before the head ended.
        None if reader.get_ref().limit() == 0 => Response::text(
            431,
            "Request Header Fields Too Large",
            "request head too long\n",
        ),
        None => return Ok(()),
    };
    response.write(&mut &stream)
}

/// The request line, once the whole head has arrived (`None` if the
/// stream ended first: closed, or cut at [`MAX_HEAD`]).
fn read_head(reader: &mut impl BufRead) -> std::io::Result<Option<String>> {
    let mut first = String::new();
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        if first.is_empty() {
            first = line.trim_end().to_string();
        }
        if line == "\r\n" || line == "\n" {
            return Ok(Some(first));
        }
    }
}

/// The decision table: method and path.
fn respond(request_line: &str, endpoint: &Endpoint, peers: usize) -> Response {
    let mut parts = request_line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            let mut response = scrape(endpoint, peers);
            response.head_only = method == "HEAD";
            response
        }
        ("GET" | "HEAD", _) => Response::text(404, "Not Found", "not found; try /metrics\n"),
        _ => Response::text(405, "Method Not Allowed", "only GET and HEAD\n"),
    }
}

fn scrape(endpoint: &Endpoint, peers: usize) -> Response {
    let stats = match endpoint.stats_with_peers(peers) {
        Ok(stats) => stats,
        Err(e) => return Response::text(503, "Service Unavailable", &format!("{e}\n")),
    };
    let mut body = String::with_capacity(16 << 10);
    // NOTE(unwrap): writing into a String cannot fail.
    stats
        .write_prometheus(&[], &mut body)
        .expect("formatting into a String");
    Response {
        status: (200, "OK"),
        content_type: CONTENT_TYPE,
        body,
        head_only: false,
    }
}

struct Response {
    status: (u16, &'static str),
    content_type: &'static str,
    body: String,
    head_only: bool,
}

impl Response {
    fn text(code: u16, reason: &'static str, body: &str) -> Self {
        Self {
            status: (code, reason),
            content_type: "text/plain; charset=utf-8",
            body: body.to_string(),
            head_only: false,
        }
    }

    fn write(&self, out: &mut impl Write) -> std::io::Result<()> {
        write!(
            out,
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.status.0,
            self.status.1,
            self.content_type,
            self.body.len()
        )?;
        if !self.head_only {
            out.write_all(self.body.as_bytes())?;
        }
        out.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::io::Read;

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
        long.push_str(&"a".repeat(MAX_HEAD as usize - long.len()));
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
