//! Scraping the server's `--metrics` as Prometheus would (one `GET
//! /metrics` per connection, the text read with a Prometheus text-format
//! parser): the legitimate user of the metrics listener, and the server's
//! own view of what an attack holds (sessions, handshakes in progress).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use prometheus_parse::{Scrape, Value};

/// The figures read from one scrape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gauges {
    /// `smt_sessions`: sessions with keys.
    pub sessions: u64,
    /// `smt_handshakes_in_progress`.
    pub handshakes: u64,
    /// `smt_unreachable_reports_total`: ICMP errors the socket reported.
    pub unreachable_reports: u64,
}

/// One scrape of `metrics`, given `limit` to connect and answer.
pub fn scrape(metrics: SocketAddr, limit: Duration) -> Result<Gauges, String> {
    let mut s = TcpStream::connect_timeout(&metrics, limit).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(limit))
        .and_then(|()| s.set_write_timeout(Some(limit)))
        .map_err(|e| format!("timeouts: {e}"))?;
    write!(s, "GET /metrics HTTP/1.1\r\nHost: {metrics}\r\n\r\n")
        .map_err(|e| format!("send: {e}"))?;
    let mut text = String::new();
    s.read_to_string(&mut text)
        .map_err(|e| format!("read: {e}"))?;
    let (head, body) = text.split_once("\r\n\r\n").ok_or("not an HTTP response")?;
    if !head.starts_with("HTTP/1.1 200 ") {
        return Err(format!(
            "status {}",
            head.lines().next().unwrap_or_default()
        ));
    }
    let scrape = Scrape::parse(body.lines().map(|l| Ok(l.to_string())))
        .map_err(|e| format!("not the Prometheus text format: {e}"))?;
    Ok(Gauges {
        sessions: value(&scrape, "smt_sessions"),
        handshakes: value(&scrape, "smt_handshakes_in_progress"),
        unreachable_reports: value(&scrape, "smt_unreachable_reports_total"),
    })
}

/// An unlabelled sample's value (0 if absent).
fn value(scrape: &Scrape, name: &str) -> u64 {
    scrape
        .samples
        .iter()
        .find(|s| s.metric == name)
        .map_or(0, |s| match s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v as u64,
            _ => 0,
        })
}
