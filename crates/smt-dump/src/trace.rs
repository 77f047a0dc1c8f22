//! `smt dump --trace`: the JSON-lines event traces endpoints write
//! (`smt::observe::Trace`, schema in `docs/observability.md`) turned into
//! one timeline per RPC.
//!
//! The files' events are merged by wall-clock time (endpoints on one
//! host share the clock; across hosts, the hosts' clocks must agree) and
//! grouped by message: the two endpoints' ports, the message ID and its
//! key phase. An ACK goes to every RPC it names, a drop to the packet
//! dropped just before at that endpoint, and what names no message
//! (handshakes, key epochs, lost events) to the endpoint's own list. A
//! client that seals a second request under the same ID (after two key
//! epochs) starts a new timeline.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

/// A trace file could not be read.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TraceError {
    /// Line `line` of `file` is not a JSON object with `ev` and `t`.
    BadLine {
        file: String,
        line: usize,
        why: String,
    },
}

impl std::fmt::Display for TraceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::BadLine { file, line, why } => write!(
                f,
                "{file}, line {line}: not a trace event ({why}); smt --trace and \
                 smt::observe::Trace write one JSON object per line"
            ),
        }
    }
}

impl std::error::Error for TraceError {}

/// The timelines of one or more trace files.
#[derive(Debug, Serialize)]
pub struct Timelines {
    /// Per file: its name, its endpoints, its events.
    pub files: Vec<TraceFile>,
    /// One per RPC, by the time of its first event.
    pub rpcs: Vec<RpcTimeline>,
    /// Events that name no message (handshakes, key epochs, lost events,
    /// packets without an RPC), by endpoint.
    pub endpoints: BTreeMap<String, Vec<Value>>,
}

#[derive(Debug, Serialize)]
pub struct TraceFile {
    pub name: String,
    pub endpoints: Vec<String>,
    pub events: usize,
    /// Events the writer dropped (its last line), if it finished.
    pub dropped: Option<u64>,
    /// Events the endpoints' queues lost (`lost` lines).
    pub lost: u64,
    /// Whether the file ends with `trace_end` (else it was cut short).
    pub complete: bool,
}

/// Everything that happened to one RPC.
#[derive(Debug, Serialize)]
pub struct RpcTimeline {
    pub id: String,
    pub key_phase: u64,
    /// The endpoint that sent the request, and the one that received it,
    /// when the trace shows which: by their own addresses if their traces
    /// are there, else as the other end names them.
    pub client: Option<String>,
    pub server: Option<String>,
    /// The two endpoints, when the roles are not known.
    pub between: (String, String),
    pub request_len: Option<u64>,
    pub response_len: Option<u64>,
    /// RESEND packets sent, DATA packets sent again, packets dropped.
    pub resends: u64,
    pub retransmissions: u64,
    pub drops: u64,
    /// `response` (delivered), `failed: <reason>`, `aborted`, or `open`.
    pub outcome: String,
    /// From the first event to the outcome (what the caller waited), in
    /// milliseconds; `None` while open.
    pub latency_ms: Option<f64>,
    /// From the first event to the last (the server may hold the RPC
    /// longer, until the client's ACK), in milliseconds.
    pub duration_ms: f64,
    pub events: Vec<Value>,
}

/// Reads trace files (`(name, text)`) and builds the timelines.
pub fn timelines(files: &[(String, String)]) -> Result<Timelines, TraceError> {
    let mut all: Vec<(f64, usize, Value)> = Vec::new();
    let mut infos = Vec::new();
    for (name, text) in files {
        let (info, events) = read_file(name, text)?;
        infos.push(info);
        let base = all.len();
        all.extend(
            events
                .into_iter()
                .enumerate()
                .map(|(i, e)| (e["t"].as_f64().unwrap_or(0.0), base + i, e)),
        );
    }
    // By time; within a time, in the order written.
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut groups = Grouper::default();
    for (_, _, e) in all {
        groups.add(e);
    }
    Ok(Timelines {
        files: infos,
        rpcs: groups.rpcs.into_iter().map(RpcTimeline::new).collect(),
        endpoints: groups.endpoints,
    })
}

fn read_file(name: &str, text: &str) -> Result<(TraceFile, Vec<Value>), TraceError> {
    let mut info = TraceFile {
        name: name.to_string(),
        endpoints: Vec::new(),
        events: 0,
        dropped: None,
        lost: 0,
        complete: false,
    };
    let mut events = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    for (n, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |why: String| TraceError::BadLine {
            file: name.to_string(),
            line: n + 1,
            why,
        };
        let e: Value = match serde_json::from_str(line) {
            Ok(e) => e,
            // A writer killed mid-line leaves a partial last line.
            Err(_) if n + 1 == lines.len() && !text.ends_with('\n') => break,
            Err(e) => return Err(bad(e.to_string())),
        };
        let (Some(ev), Some(_)) = (e["ev"].as_str(), e["t"].as_f64()) else {
            return Err(bad("no \"ev\" or \"t\"".into()));
        };
        match ev {
            "trace_start" => {}
            "trace_end" => {
                info.dropped = e["count"].as_u64();
                info.complete = true;
            }
            _ => {
                if ev == "lost" {
                    info.lost += e["count"].as_u64().unwrap_or(0);
                }
                if let Some(ep) = e["ep"].as_str() {
                    if !info.endpoints.iter().any(|x| x == ep) {
                        info.endpoints.push(ep.to_string());
                    }
                }
                info.events += 1;
                events.push(e);
            }
        }
    }
    Ok((info, events))
}

/// What names one RPC: the two ports (smaller first), the ID, the key
/// phase.
type Key = (u16, u16, String, u64);

#[derive(Default)]
struct Grouper {
    rpcs: Vec<Vec<Value>>,
    current: HashMap<Key, usize>,
    /// Per endpoint, the group of the packet it received last (a `dropped`
    /// event follows its `received`).
    last_received: HashMap<String, Option<usize>>,
    endpoints: BTreeMap<String, Vec<Value>>,
}

impl Grouper {
    fn add(&mut self, e: Value) {
        let ep = e["ep"].as_str().unwrap_or("").to_string();
        let ev = e["ev"].as_str().unwrap_or("");
        match ev {
            "dropped" => match self.last_received.get(&ep).copied().flatten() {
                Some(g) => self.rpcs[g].push(e),
                None => self.endpoints.entry(ep).or_default().push(e),
            },
            "sent" | "received" if e["type"] == "ACK" => {
                let ids: Vec<String> = e["ids"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                let groups: Vec<usize> = ids
                    .iter()
                    .filter_map(|id| key(&e, id).and_then(|k| self.current.get(&k).copied()))
                    .collect();
                self.note_received(&ep, ev, groups.first().copied());
                if groups.is_empty() {
                    self.endpoints.entry(ep).or_default().push(e);
                    return;
                }
                for g in groups {
                    self.rpcs[g].push(e.clone());
                }
            }
            _ => {
                let group = self.group_of(&e, ev);
                self.note_received(&ep, ev, group);
                match group {
                    Some(g) => self.rpcs[g].push(e),
                    None => self.endpoints.entry(ep).or_default().push(e),
                }
            }
        }
    }

    fn note_received(&mut self, ep: &str, ev: &str, group: Option<usize>) {
        if ev == "received" {
            self.last_received.insert(ep.to_string(), group);
        }
    }

    /// The timeline `e` belongs to, if it names a message; a client's
    /// second request under an ID starts a new one. A restart also shows
    /// in the timeline of the ID it left.
    fn group_of(&mut self, e: &Value, ev: &str) -> Option<usize> {
        let names_message = match ev {
            "sent" | "received" => {
                // Packets about the session, not a message: the
                // handshake, key updates, and CREDIT (the peer's share).
                !matches!(
                    e["type"].as_str(),
                    Some("HANDSHAKE" | "KEY_UPDATE" | "CREDIT") | None
                ) && e["malformed"].is_null()
            }
            "sealed" | "opened" | "open_failed" | "delivered" | "rpc_started" | "rpc_restarted"
            | "rpc_failed" | "rpc_aborted" | "server_freed" => true,
            _ => false,
        };
        if !names_message {
            return None;
        }
        let k = key(e, e["id"].as_str()?)?;
        if ev == "rpc_restarted" {
            if let Some(old) = e["old_id"].as_str().and_then(|id| key(e, id)) {
                if let Some(&g) = self.current.get(&old) {
                    self.rpcs[g].push(e.clone());
                }
            }
        }
        let new_request = ev == "sealed" && e["message"] == "request";
        match self.current.get(&k) {
            Some(&g) if !(new_request && has_request(&self.rpcs[g])) => Some(g),
            _ => {
                self.rpcs.push(Vec::new());
                let g = self.rpcs.len() - 1;
                self.current.insert(k, g);
                Some(g)
            }
        }
    }
}

fn has_request(events: &[Value]) -> bool {
    events
        .iter()
        .any(|e| e["ev"] == "sealed" && e["message"] == "request")
}

fn port(addr: &str) -> Option<u16> {
    addr.rsplit(':').next()?.parse().ok()
}

fn key(e: &Value, id: &str) -> Option<Key> {
    let a = port(e["ep"].as_str()?)?;
    let b = port(e["peer"].as_str()?)?;
    let phase = match e["phase"].as_u64() {
        Some(p) => p,
        None => e["epoch"].as_u64()? & 1,
    };
    Some((a.min(b), a.max(b), id.to_string(), phase))
}

impl RpcTimeline {
    fn new(events: Vec<Value>) -> Self {
        let first = &events[0];
        let ep = |e: &Value| e["ep"].as_str().unwrap_or("").to_string();
        let peer = |e: &Value| e["peer"].as_str().unwrap_or("").to_string();
        let find = |ev: &str, message: &str| {
            events
                .iter()
                .find(|e| e["ev"] == ev && (message.is_empty() || e["message"] == message))
        };
        // Each end by its own address when its trace is there (across a
        // relay or NAT the other end names it differently), else as the
        // other end names it.
        let client = find("sealed", "request")
            .map(ep)
            .or_else(|| find("delivered", "response").map(ep))
            .or_else(|| find("delivered", "request").map(peer));
        let server = find("delivered", "request")
            .map(ep)
            .or_else(|| find("sealed", "response").map(ep))
            .or_else(|| find("sealed", "request").map(peer));
        let sent = |e: &&Value, ty: &str| e["ev"] == "sent" && e["type"] == ty;
        let (outcome, ended) = if let Some(e) = find("delivered", "response") {
            ("response".to_string(), Some(e))
        } else if let Some(e) = find("rpc_failed", "") {
            let why = e["reason"].as_str().unwrap_or("?");
            (format!("failed: {why}"), Some(e))
        } else if let Some(e) = find("rpc_aborted", "") {
            ("aborted".to_string(), Some(e))
        } else {
            ("open".to_string(), None)
        };
        let times: Vec<f64> = events.iter().filter_map(|e| e["t"].as_f64()).collect();
        let start = times.iter().copied().fold(f64::NAN, f64::min);
        let span = times.iter().copied().fold(f64::NAN, f64::max) - start;
        let latency = ended
            .and_then(|e| e["t"].as_f64())
            .map(|t| (t - start) * 1e3);
        Self {
            id: first["id"].as_str().unwrap_or("?").to_string(),
            key_phase: first["phase"]
                .as_u64()
                .or_else(|| first["epoch"].as_u64().map(|e| e & 1))
                .unwrap_or(0),
            between: (ep(first), peer(first)),
            request_len: find("sealed", "request")
                .or_else(|| find("delivered", "request"))
                .and_then(|e| e["length"].as_u64()),
            response_len: find("sealed", "response")
                .or_else(|| find("delivered", "response"))
                .and_then(|e| e["length"].as_u64()),
            resends: events.iter().filter(|e| sent(e, "RESEND")).count() as u64,
            retransmissions: events
                .iter()
                .filter(|e| sent(e, "DATA") && e["retransmit"] == true)
                .count() as u64,
            drops: events.iter().filter(|e| e["ev"] == "dropped").count() as u64,
            outcome,
            latency_ms: latency,
            duration_ms: if span.is_nan() { 0.0 } else { span * 1e3 },
            client,
            server,
            events,
        }
    }

    /// Whether `id` (hex `0x..` or decimal) names this RPC.
    pub fn is(&self, id: &str) -> bool {
        let parse = |s: &str| match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => s.parse().ok(),
        };
        parse(id).is_some() && parse(id) == parse(&self.id)
    }
}

impl Timelines {
    /// The timelines as text: the files, each endpoint's events without a
    /// message, then one block per RPC (only those `only` names, if
    /// given).
    pub fn to_text(&self, only: Option<&str>) -> String {
        let mut out = String::new();
        for f in &self.files {
            let _ = write!(
                out,
                "trace {}: {} events of {}",
                f.name,
                f.events,
                f.endpoints.join(", ")
            );
            match f.dropped {
                Some(0) => {}
                Some(n) => {
                    let _ = write!(out, "; the writer dropped {n} events");
                }
                None => out.push_str("; cut short (no trace_end line)"),
            }
            if f.lost > 0 {
                let _ = write!(out, "; the endpoint's queue lost {} events", f.lost);
            }
            out.push('\n');
        }
        if only.is_none() {
            for (ep, events) in &self.endpoints {
                let _ = writeln!(out, "\nendpoint {ep}, outside any RPC:");
                let t0 = events.first().and_then(|e| e["t"].as_f64()).unwrap_or(0.0);
                for e in events {
                    event_line(&mut out, e, t0, &|_| "");
                }
            }
        }
        let rpcs = self.rpcs.iter().filter(|r| only.is_none_or(|id| r.is(id)));
        for r in rpcs {
            rpc_block(&mut out, r);
        }
        out
    }
}

fn rpc_block(out: &mut String, r: &RpcTimeline) {
    let who = match (&r.client, &r.server) {
        (Some(c), Some(s)) => format!("{c} > {s}"),
        _ => format!("{} <> {}", r.between.0, r.between.1),
    };
    let len = |l: Option<u64>| l.map_or("?".to_string(), |l| format!("{l} B"));
    let after = r
        .latency_ms
        .map_or(String::new(), |ms| format!(" after {ms:.3} ms"));
    let _ = writeln!(
        out,
        "\nRPC {} (key phase {}) {who}: request {}, response {}: {}{after}; {} RESEND, {} \
         retransmitted, {} dropped; trace spans {:.3} ms",
        r.id,
        r.key_phase,
        len(r.request_len),
        len(r.response_len),
        r.outcome,
        r.resends,
        r.retransmissions,
        r.drops,
        r.duration_ms,
    );
    let t0 = r
        .events
        .first()
        .and_then(|e| e["t"].as_f64())
        .unwrap_or(0.0);
    let side = |ep: &str| -> &'static str {
        match (&r.client, &r.server) {
            (Some(c), _) if c == ep => "client",
            (_, Some(s)) if s == ep => "server",
            _ => "",
        }
    };
    for e in &r.events {
        event_line(out, e, t0, &side);
    }
}

/// One event: time since `t0`, tick, who, what.
fn event_line(out: &mut String, e: &Value, t0: f64, side: &dyn Fn(&str) -> &'static str) {
    let t = e["t"].as_f64().unwrap_or(t0);
    let ep = e["ep"].as_str().unwrap_or("?");
    let who = match side(ep) {
        "" => ep,
        s => s,
    };
    let _ = writeln!(
        out,
        "  {:>+10.3} ms  tick {:<4} {who:<7} {}",
        (t - t0) * 1e3,
        e["tick"].as_u64().unwrap_or(0),
        describe(e)
    );
}

/// What an event says, in words: a decision table on `ev`.
fn describe(e: &Value) -> String {
    let s = |f: &str| e[f].as_str().unwrap_or("?").to_string();
    let n = |f: &str| e[f].as_u64().map_or("?".to_string(), |v| v.to_string());
    let plural = |f: &str, what: &str| match e[f].as_u64() {
        Some(1) => format!("1 {what}"),
        _ => format!("{} {what}s", n(f)),
    };
    match e["ev"].as_str().unwrap_or("?") {
        ev @ ("sent" | "received") => format!("{ev} {}", packet(e)),
        "dropped" => format!("dropped it: {}", s("reason")),
        "sealed" => format!(
            "sealed the {}: {} B in {}, {} wire bytes",
            s("message"),
            n("length"),
            plural("records", "record"),
            n("wire_len")
        ),
        "opened" => format!("opened {}", plural("records", "record")),
        "open_failed" => format!("a segment failed to open: {}", s("reason")),
        "delivered" => format!("delivered the {} ({} B)", s("message"), n("length")),
        "rpc_started" => format!(
            "call {} started: {} B to {}",
            n("rpc"),
            n("length"),
            s("peer")
        ),
        "rpc_restarted" => format!(
            "call {} restarted under ID {} (was {})",
            n("rpc"),
            s("id"),
            s("old_id")
        ),
        "rpc_failed" => format!("call {} failed: {}", n("rpc"), s("reason")),
        "rpc_aborted" => format!("call {} aborted by the application", n("rpc")),
        "server_freed" => format!("freed the RPC: {}", s("reason")),
        "handshake_started" => format!("handshake (kind {}) started with {}", n("kind"), s("peer")),
        "handshake_done" => format!("handshake with {} done: keys installed", s("peer")),
        "handshake_failed" => format!("handshake with {} failed: {}", s("peer"), s("error")),
        "rekeyed" => format!(
            "key epoch {} with {} ({})",
            n("epoch"),
            s("peer"),
            if e["by_peer"] == true {
                "the peer's KEY_UPDATE"
            } else {
                "our rekey"
            }
        ),
        "lost" => format!("{} events lost (the trace queue was full)", n("count")),
        other => other.to_string(),
    }
}

/// A packet's fields, in words.
fn packet(e: &Value) -> String {
    let ty = e["type"].as_str().unwrap_or("?");
    let n = |f: &str| e[f].as_u64().unwrap_or(0);
    if e["malformed"] == true {
        return format!("{ty} (malformed), {} bytes", n("len"));
    }
    match ty {
        "DATA" => format!(
            "DATA bytes {}..{} (pkt {}){}",
            n("offset"),
            n("offset") + n("length"),
            n("pkt"),
            if e["retransmit"] == true {
                " RETRANSMIT"
            } else {
                ""
            }
        ),
        "GRANT" => format!("GRANT up to {}", n("offset")),
        "RESEND" => format!(
            "RESEND bytes {}..{}",
            n("offset"),
            n("offset") + n("length")
        ),
        "ACK" => format!(
            "ACK {}",
            e["ids"]
                .as_array()
                .map(|ids| ids
                    .iter()
                    .filter_map(|v| v.as_str())
                    .collect::<Vec<_>>()
                    .join(","))
                .unwrap_or_default()
        ),
        "KEY_UPDATE" => match e["id"].as_str() {
            Some("0x0") => "KEY_UPDATE (announce)".to_string(),
            _ => "KEY_UPDATE (confirm)".to_string(),
        },
        "HANDSHAKE" => format!(
            "HANDSHAKE kind {} offset {} ack {} len {}",
            n("kind"),
            n("offset"),
            n("ack"),
            n("length")
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(t: f64, ep: &str, ev: &str, rest: &str) -> String {
        let sep = if rest.is_empty() { "" } else { "," };
        format!(r#"{{"t":{t},"us":0,"tick":0,"ep":"{ep}","ev":"{ev}"{sep}{rest}}}"#)
    }

    const C: &str = "10.0.0.1:4000";
    const S: &str = "10.0.0.2:5000";

    /// Two files, one per endpoint, interleaved by time; an ACK naming two
    /// RPCs; a drop after its packet; a handshake outside any RPC.
    fn sample() -> Vec<(String, String)> {
        let peer = |p: &str| format!(r#""peer":"{p}""#);
        let client = [
            line(
                1.0,
                C,
                "handshake_started",
                &format!("{},\"kind\":2", peer(S)),
            ),
            line(
                1.001,
                C,
                "sealed",
                &format!(
                    r#"{},"epoch":0,"id":"0x2","message":"request","length":4000,"records":1,"wire_len":4022"#,
                    peer(S)
                ),
            ),
            line(
                1.002,
                C,
                "sent",
                &format!(
                    r#"{},"id":"0x2","type":"DATA","phase":0,"offset":0,"length":1428,"pkt":0,"retransmit":false"#,
                    peer(S)
                ),
            ),
            line(
                1.003,
                C,
                "sealed",
                &format!(
                    r#"{},"epoch":0,"id":"0x4","message":"request","length":1,"records":1,"wire_len":23"#,
                    peer(S)
                ),
            ),
            line(
                1.010,
                C,
                "received",
                &format!(
                    r#"{},"id":"0x2","type":"RESEND","phase":0,"offset":1428,"length":1428"#,
                    peer(S)
                ),
            ),
            line(
                1.011,
                C,
                "sent",
                &format!(
                    r#"{},"id":"0x2","type":"DATA","phase":0,"offset":1428,"length":1428,"pkt":1,"retransmit":true"#,
                    peer(S)
                ),
            ),
            line(
                1.02,
                C,
                "delivered",
                &format!(
                    r#"{},"epoch":0,"id":"0x2","message":"response","length":4000,"rpc":0"#,
                    peer(S)
                ),
            ),
            line(
                1.03,
                C,
                "sent",
                &format!(
                    r#"{},"id":"0x0","type":"ACK","phase":0,"ids":["0x2","0x4"]"#,
                    peer(S)
                ),
            ),
        ];
        let server = [
            line(
                1.009,
                S,
                "sent",
                &format!(
                    r#"{},"id":"0x2","type":"RESEND","phase":0,"offset":1428,"length":1428"#,
                    peer(C)
                ),
            ),
            line(
                1.012,
                S,
                "received",
                &format!(
                    r#"{},"id":"0x2","type":"DATA","phase":0,"offset":1428,"length":1428,"pkt":1,"retransmit":true"#,
                    peer(C)
                ),
            ),
            line(
                1.0121,
                S,
                "dropped",
                &format!(r#"{},"reason":"duplicate""#, peer(C)),
            ),
            line(
                1.031,
                S,
                "received",
                &format!(
                    r#"{},"id":"0x0","type":"ACK","phase":0,"ids":["0x2"]"#,
                    peer(C)
                ),
            ),
        ];
        let file = |lines: &[String], end: bool| {
            let mut text = line(0.5, "", "trace_start", r#""version":1"#) + "\n";
            for l in lines {
                text += l;
                text.push('\n');
            }
            if end {
                text += &(line(2.0, "", "trace_end", r#""events":4,"count":0"#) + "\n");
            }
            text
        };
        vec![
            ("client.jsonl".into(), file(&client, true)),
            ("server.jsonl".into(), file(&server, false)),
        ]
    }

    #[test]
    fn events_of_both_ends_group_by_rpc_in_time_order() {
        let t = timelines(&sample()).unwrap();
        assert_eq!(t.rpcs.len(), 2);
        let r = &t.rpcs[0];
        assert_eq!(
            (r.id.as_str(), r.client.as_deref(), r.server.as_deref()),
            ("0x2", Some(C), Some(S))
        );
        assert_eq!((r.resends, r.retransmissions, r.drops), (1, 1, 1));
        assert_eq!(r.outcome, "response");
        let latency = r.latency_ms.unwrap();
        assert!(
            (latency - 19.0).abs() < 1e-6,
            "sealed at 1.001, delivered at 1.020: {latency}"
        );
        let evs: Vec<&str> = r.events.iter().map(|e| e["ev"].as_str().unwrap()).collect();
        assert_eq!(
            evs,
            [
                "sealed",
                "sent",
                "sent",
                "received",
                "sent",
                "received",
                "dropped",
                "delivered",
                "sent",
                "received"
            ]
        );
        assert_eq!(
            t.rpcs[1].events.len(),
            2,
            "sealed, and the ACK naming it too"
        );
        assert_eq!(t.endpoints[C].len(), 1, "the handshake");
        assert!(t.files[0].complete && !t.files[1].complete);
        let text = t.to_text(Some("0x2"));
        assert!(
            text.contains("server  sent RESEND bytes 1428..2856"),
            "{text}"
        );
        assert!(
            text.contains("client  sent DATA bytes 1428..2856 (pkt 1) RETRANSMIT"),
            "{text}"
        );
        assert!(text.contains("cut short"), "{text}");
        assert!(!text.contains("RPC 0x4"), "{text}");
    }

    #[test]
    fn a_bad_line_is_an_error_that_names_it_but_a_cut_last_line_is_not() {
        let files = vec![(
            "t".to_string(),
            "{\"ev\":\"x\",\"t\":1}\nnot json\n".to_string(),
        )];
        let err = timelines(&files).unwrap_err().to_string();
        assert!(err.contains("t, line 2"), "{err}");
        let cut = vec![(
            "t".to_string(),
            "{\"ev\":\"x\",\"t\":1}\n{\"ev\":".to_string(),
        )];
        assert_eq!(timelines(&cut).unwrap().files[0].events, 1);
    }
}
