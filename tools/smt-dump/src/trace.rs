//! `smt dump --trace`: the JSON-lines event traces endpoints write
//! (`smt::observe::Trace`) turned into one timeline per RPC. Each line is
//! read as an `smt_observe::trace::Line`, the schema the writer
//! serialises (`docs/observability.md` § 6).
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
use smt_observe::trace::{Event, Line, MessageId, Packet, Role};
use smt_proto::wire::PacketType;

/// A trace file could not be read.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TraceError {
    /// Line `line` of `file` is not a trace line (`smt_observe::trace::Line`).
    BadLine {
        /// The file's name.
        file: String,
        /// Its line number, from 1.
        line: usize,
        /// What the JSON reader said.
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
    pub endpoints: BTreeMap<String, Vec<Line>>,
}

/// What one trace file holds.
#[derive(Debug, Serialize)]
pub struct TraceFile {
    /// The file's name.
    pub name: String,
    /// The endpoints whose events it holds.
    pub endpoints: Vec<String>,
    /// Events, without the first and last lines.
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
    /// The message ID.
    pub id: MessageId,
    /// The key phase its packets carry.
    pub key_phase: u64,
    /// The endpoint that sent the request, and the one that received it,
    /// when the trace shows which: by their own addresses if their traces
    /// are there, else as the other end names them.
    pub client: Option<String>,
    /// See `client`.
    pub server: Option<String>,
    /// The two endpoints, when the roles are not known.
    pub between: (String, String),
    /// Plaintext bytes of the request, sealed or delivered.
    pub request_len: Option<u64>,
    /// Plaintext bytes of the response, sealed or delivered.
    pub response_len: Option<u64>,
    /// RESEND packets sent.
    pub resends: u64,
    /// DATA packets sent again.
    pub retransmissions: u64,
    /// Packets dropped.
    pub drops: u64,
    /// `response` (delivered), `failed: <reason>`, `aborted`, or `open`.
    pub outcome: String,
    /// From the first event to the outcome (what the caller waited), in
    /// milliseconds; `None` while open.
    pub latency_ms: Option<f64>,
    /// From the first event to the last (the server may hold the RPC
    /// longer, until the client's ACK), in milliseconds.
    pub duration_ms: f64,
    /// Its events, in time order.
    pub events: Vec<Line>,
}

/// Reads trace files (`(name, text)`) and builds the timelines.
pub fn timelines(files: &[(String, String)]) -> Result<Timelines, TraceError> {
    let mut all: Vec<(usize, Line)> = Vec::new();
    let mut infos = Vec::new();
    for (name, text) in files {
        let (info, events) = read_file(name, text)?;
        infos.push(info);
        let base = all.len();
        all.extend(events.into_iter().enumerate().map(|(i, e)| (base + i, e)));
    }
    // By time; within a time, in the order written.
    all.sort_by(|a, b| a.1.t.total_cmp(&b.1.t).then(a.0.cmp(&b.0)));
    let mut groups = Grouper::default();
    for (_, e) in all {
        groups.add(e);
    }
    Ok(Timelines {
        files: infos,
        rpcs: groups.rpcs.into_iter().map(RpcTimeline::new).collect(),
        endpoints: groups.endpoints,
    })
}

fn read_file(name: &str, text: &str) -> Result<(TraceFile, Vec<Line>), TraceError> {
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
        let e = match Line::parse(line) {
            Ok(e) => e,
            // A writer killed mid-line leaves a partial last line.
            Err(_) if n + 1 == lines.len() && !text.ends_with('\n') => break,
            Err(e) => {
                return Err(TraceError::BadLine {
                    file: name.to_string(),
                    line: n + 1,
                    why: e.to_string(),
                })
            }
        };
        match e.event {
            Event::TraceStart { .. } => {}
            Event::TraceEnd { count, .. } => {
                info.dropped = Some(count);
                info.complete = true;
            }
            _ => {
                if let Event::Lost { count } = e.event {
                    info.lost += count;
                }
                let ep = endpoint(&e);
                if !ep.is_empty() && !info.endpoints.contains(&ep) {
                    info.endpoints.push(ep);
                }
                info.events += 1;
                events.push(e);
            }
        }
    }
    Ok((info, events))
}

/// The endpoint's address as text ("" for a line without one).
fn endpoint(e: &Line) -> String {
    e.ep.map(|a| a.to_string()).unwrap_or_default()
}

fn peer(e: &Line) -> String {
    e.peer().map(|a| a.to_string()).unwrap_or_default()
}

/// What names one RPC: the two ports (smaller first), the ID, the key
/// phase.
type Key = (u16, u16, MessageId, u64);

#[derive(Default)]
struct Grouper {
    rpcs: Vec<Vec<Line>>,
    current: HashMap<Key, usize>,
    /// Per endpoint, the group of the packet it received last (a `dropped`
    /// event follows its `received`).
    last_received: HashMap<String, Option<usize>>,
    endpoints: BTreeMap<String, Vec<Line>>,
}

impl Grouper {
    fn add(&mut self, e: Line) {
        let ep = endpoint(&e);
        let received = matches!(e.event, Event::Received(_));
        if let Event::Dropped { .. } = e.event {
            match self.last_received.get(&ep).copied().flatten() {
                Some(g) => self.rpcs[g].push(e),
                None => self.endpoints.entry(ep).or_default().push(e),
            }
            return;
        }
        if let Some(ids) = acked_ids(&e) {
            let groups: Vec<usize> = ids
                .iter()
                .filter_map(|&id| key(&e, id).and_then(|k| self.current.get(&k).copied()))
                .collect();
            self.note_received(&ep, received, groups.first().copied());
            if groups.is_empty() {
                self.endpoints.entry(ep).or_default().push(e);
                return;
            }
            for g in groups {
                self.rpcs[g].push(e.clone());
            }
            return;
        }
        let group = self.group_of(&e);
        self.note_received(&ep, received, group);
        match group {
            Some(g) => self.rpcs[g].push(e),
            None => self.endpoints.entry(ep).or_default().push(e),
        }
    }

    fn note_received(&mut self, ep: &str, received: bool, group: Option<usize>) {
        if received {
            self.last_received.insert(ep.to_string(), group);
        }
    }

    /// The timeline `e` belongs to, if it names a message; a client's
    /// second request under an ID starts a new one. A restart also shows
    /// in the timeline of the ID it left.
    fn group_of(&mut self, e: &Line) -> Option<usize> {
        let id = message_id(e)?;
        let k = key(e, id)?;
        if let Event::RpcRestarted { old_id, .. } = e.event {
            if let Some(&g) = key(e, old_id).and_then(|old| self.current.get(&old)) {
                self.rpcs[g].push(e.clone());
            }
        }
        let new_request = is_sealed(e, Role::Request);
        match self.current.get(&k) {
            Some(&g)
                if !(new_request && self.rpcs[g].iter().any(|e| is_sealed(e, Role::Request))) =>
            {
                Some(g)
            }
            _ => {
                self.rpcs.push(Vec::new());
                let g = self.rpcs.len() - 1;
                self.current.insert(k, g);
                Some(g)
            }
        }
    }
}

/// The IDs a sent or received ACK names.
fn acked_ids(e: &Line) -> Option<&[MessageId]> {
    match e.packet() {
        Some(p) if p.ty == PacketType::ACK => Some(p.ids.as_deref().unwrap_or_default()),
        _ => None,
    }
}

/// The message `e` is about, if any: a message's events, and packets of
/// a message (not the session's: the handshake, key updates, CREDIT, nor
/// malformed ones).
fn message_id(e: &Line) -> Option<MessageId> {
    if let Some(m) = e.message() {
        return Some(m.id);
    }
    let p = e.packet()?;
    let session = [
        PacketType::HANDSHAKE,
        PacketType::KEY_UPDATE,
        PacketType::CREDIT,
    ];
    (!session.contains(&p.ty) && !p.malformed).then_some(p.id)
}

fn is_sealed(e: &Line, role: Role) -> bool {
    matches!(e.event, Event::Sealed { message, .. } if message == role)
}

fn is_delivered(e: &Line, role: Role) -> bool {
    matches!(e.event, Event::Delivered { message, .. } if message == role)
}

/// The key phase of a packet, or of a message's key epoch.
fn key_phase(e: &Line) -> Option<u64> {
    match e.packet() {
        Some(p) => Some(u64::from(p.phase)),
        None => e.message().map(|m| m.epoch & 1),
    }
}

fn key(e: &Line, id: MessageId) -> Option<Key> {
    let a = e.ep?.port();
    let b = e.peer()?.port();
    Some((a.min(b), a.max(b), id, key_phase(e)?))
}

/// The plaintext length a `sealed` or `delivered` line gives.
fn message_len(e: &Line) -> Option<u64> {
    match e.event {
        Event::Sealed { length, .. } | Event::Delivered { length, .. } => Some(length),
        _ => None,
    }
}

impl RpcTimeline {
    fn new(events: Vec<Line>) -> Self {
        let first = &events[0];
        let find = |is: &dyn Fn(&Line) -> bool| events.iter().find(|e| is(e));
        let sealed = |role| find(&|e| is_sealed(e, role));
        let delivered = |role| find(&|e| is_delivered(e, role));
        // Each end by its own address when its trace is there (across a
        // relay or NAT the other end names it differently), else as the
        // other end names it.
        let client = sealed(Role::Request)
            .map(endpoint)
            .or_else(|| delivered(Role::Response).map(endpoint))
            .or_else(|| delivered(Role::Request).map(peer));
        let server = delivered(Role::Request)
            .map(endpoint)
            .or_else(|| sealed(Role::Response).map(endpoint))
            .or_else(|| sealed(Role::Request).map(peer));
        let (outcome, ended) = outcome(&events);
        let start = events.iter().map(|e| e.t).fold(f64::NAN, f64::min);
        let span = events.iter().map(|e| e.t).fold(f64::NAN, f64::max) - start;
        let sent = |ty: PacketType, more: &dyn Fn(&Packet) -> bool| {
            let sent = |e: &&Line| matches!(&e.event, Event::Sent(p) if p.ty == ty && more(p));
            events.iter().filter(sent).count() as u64
        };
        Self {
            id: message_id(first).unwrap_or_default(),
            key_phase: key_phase(first).unwrap_or(0),
            between: (endpoint(first), peer(first)),
            request_len: sealed(Role::Request)
                .or_else(|| delivered(Role::Request))
                .and_then(message_len),
            response_len: sealed(Role::Response)
                .or_else(|| delivered(Role::Response))
                .and_then(message_len),
            resends: sent(PacketType::RESEND, &|_| true),
            retransmissions: sent(PacketType::DATA, &|p| p.retransmit == Some(true)),
            drops: events
                .iter()
                .filter(|e| matches!(e.event, Event::Dropped { .. }))
                .count() as u64,
            outcome,
            latency_ms: ended.map(|t| (t - start) * 1e3),
            duration_ms: if span.is_nan() { 0.0 } else { span * 1e3 },
            client,
            server,
            events,
        }
    }

    /// Whether `id` (hex `0x..` or decimal) names this RPC.
    pub fn is(&self, id: &str) -> bool {
        id.parse::<MessageId>() == Ok(self.id)
    }
}

/// How the RPC ended, and when: the response delivered, the call failed
/// or aborted; else it is still open.
fn outcome(events: &[Line]) -> (String, Option<f64>) {
    if let Some(e) = events.iter().find(|e| is_delivered(e, Role::Response)) {
        return ("response".to_string(), Some(e.t));
    }
    let failed = events.iter().find_map(|e| match &e.event {
        Event::RpcFailed { reason, .. } => Some((format!("failed: {reason}"), Some(e.t))),
        _ => None,
    });
    let aborted = || {
        let e = events
            .iter()
            .find(|e| matches!(e.event, Event::RpcAborted { .. }))?;
        Some(("aborted".to_string(), Some(e.t)))
    };
    failed
        .or_else(aborted)
        .unwrap_or(("open".to_string(), None))
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
                let t0 = events.first().map_or(0.0, |e| e.t);
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
    let t0 = r.events.first().map_or(0.0, |e| e.t);
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
fn event_line(out: &mut String, e: &Line, t0: f64, side: &dyn Fn(&str) -> &'static str) {
    let ep = e.ep.map_or("?".to_string(), |a| a.to_string());
    let who = match side(&ep) {
        "" => ep.as_str(),
        s => s,
    };
    let _ = writeln!(
        out,
        "  {:>+10.3} ms  tick {:<4} {who:<7} {}",
        (e.t - t0) * 1e3,
        e.tick,
        describe(e)
    );
}

/// `1 record`, `3 records`.
fn plural(n: u64, what: &str) -> String {
    match n {
        1 => format!("1 {what}"),
        _ => format!("{n} {what}s"),
    }
}

/// What an event says, in words: a decision table on the event.
fn describe(e: &Line) -> String {
    let peer = peer(e);
    match &e.event {
        Event::Sent(p) => format!("sent {}", packet(p)),
        Event::Received(p) => format!("received {}", packet(p)),
        Event::Dropped { reason, .. } => format!("dropped it: {reason}"),
        Event::Sealed {
            message,
            length,
            wire_len,
            records,
            ..
        } => format!(
            "sealed the {}: {length} B in {}, {wire_len} wire bytes",
            message.name(),
            plural(*records, "record"),
        ),
        Event::Opened { records, .. } => format!("opened {}", plural(*records, "record")),
        Event::OpenFailed { reason, .. } => format!("a segment failed to open: {reason}"),
        Event::Delivered {
            message, length, ..
        } => format!("delivered the {} ({length} B)", message.name()),
        Event::RpcStarted { rpc, length, .. } => {
            format!("call {rpc} started: {length} B to {peer}")
        }
        Event::RpcRestarted {
            rpc, msg, old_id, ..
        } => format!("call {rpc} restarted under ID {} (was {old_id})", msg.id),
        Event::RpcFailed { rpc, reason, .. } => format!("call {rpc} failed: {reason}"),
        Event::RpcAborted { rpc, .. } => format!("call {rpc} aborted by the application"),
        Event::ServerFreed { reason, .. } => format!("freed the RPC: {reason}"),
        Event::HandshakeStarted { kind, .. } => {
            format!("handshake (kind {kind}) started with {peer}")
        }
        Event::HandshakeDone { .. } => format!("handshake with {peer} done: keys installed"),
        Event::HandshakeFailed { error, .. } => format!("handshake with {peer} failed: {error}"),
        Event::Rekeyed { epoch, by_peer, .. } => format!(
            "key epoch {epoch} with {peer} ({})",
            if *by_peer {
                "the peer's KEY_UPDATE"
            } else {
                "our rekey"
            }
        ),
        Event::Lost { count } => format!("{count} events lost (the trace queue was full)"),
        other => other.name().to_string(),
    }
}

/// A packet type's name, or its code in hex.
fn type_name(ty: PacketType) -> String {
    ty.name()
        .map_or_else(|| format!("{:#04x}", ty.0), str::to_string)
}

/// A packet's fields, in words.
fn packet(p: &Packet) -> String {
    let n = |v: Option<u64>| v.unwrap_or(0);
    let (offset, length) = (n(p.offset), n(p.length));
    if p.malformed {
        return format!("{} (malformed), {} bytes", type_name(p.ty), p.len);
    }
    match p.ty {
        PacketType::DATA => format!(
            "DATA bytes {offset}..{} (pkt {}){}",
            offset + length,
            p.pkt.unwrap_or(0),
            if p.retransmit == Some(true) {
                " RETRANSMIT"
            } else {
                ""
            }
        ),
        PacketType::GRANT => format!("GRANT up to {offset}"),
        PacketType::RESEND => format!("RESEND bytes {offset}..{}", offset + length),
        PacketType::ACK => {
            let ids = p.ids.as_deref().unwrap_or_default();
            let ids: Vec<String> = ids.iter().map(MessageId::to_string).collect();
            format!("ACK {}", ids.join(","))
        }
        PacketType::KEY_UPDATE if p.id == MessageId(0) => "KEY_UPDATE (announce)".to_string(),
        PacketType::KEY_UPDATE => "KEY_UPDATE (confirm)".to_string(),
        PacketType::HANDSHAKE => format!(
            "HANDSHAKE kind {} offset {offset} ack {} len {length}",
            p.kind.unwrap_or(0),
            p.ack.unwrap_or(0),
        ),
        other => type_name(other),
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;

    const C: &str = "10.0.0.1:4000";
    const S: &str = "10.0.0.2:5000";

    fn addr(a: &str) -> SocketAddr {
        a.parse().unwrap()
    }

    fn at(t: f64, ep: &str, event: Event) -> Line {
        Line {
            t,
            us: 0,
            tick: 0,
            ep: Some(addr(ep)),
            event,
        }
    }

    /// A packet from `ep` to the other end, or (`sent` false) from the
    /// other end to `ep`, with its type's fields set by `fields`.
    fn packet(
        t: f64,
        ep: &str,
        sent: bool,
        ty: PacketType,
        id: u64,
        fields: impl FnOnce(&mut Packet),
    ) -> Line {
        let other = if ep == C { S } else { C };
        let mut p = Packet::new(addr(other), MessageId(id), ty, 0, 100);
        fields(&mut p);
        at(
            t,
            ep,
            if sent {
                Event::Sent(p)
            } else {
                Event::Received(p)
            },
        )
    }

    fn data(offset: u64, pkt: u16, retransmit: bool) -> impl FnOnce(&mut Packet) {
        move |p| {
            p.offset = Some(offset);
            p.length = Some(1428);
            p.pkt = Some(pkt);
            p.retransmit = Some(retransmit);
        }
    }

    fn resend(p: &mut Packet) {
        p.offset = Some(1428);
        p.length = Some(1428);
    }

    fn acks(ids: &[u64]) -> impl FnOnce(&mut Packet) + '_ {
        move |p| p.ids = Some(ids.iter().map(|&i| MessageId(i)).collect())
    }

    fn msg(ep: &str, id: u64) -> smt_observe::trace::MessageRef {
        smt_observe::trace::MessageRef {
            peer: addr(if ep == C { S } else { C }),
            epoch: 0,
            id: MessageId(id),
        }
    }

    fn sealed(t: f64, id: u64, length: u64) -> Line {
        let event = Event::Sealed {
            msg: msg(C, id),
            message: Role::Request,
            length,
            wire_len: length + 22,
            records: 1,
        };
        at(t, C, event)
    }

    /// A file as the writer makes it: the first line, the events as JSON
    /// lines, and (`end`) the last line.
    fn file(lines: &[Line], end: bool) -> String {
        let mark = |t, event| Line {
            t,
            us: 0,
            tick: 0,
            ep: None,
            event,
        };
        let mut all = vec![mark(0.5, Event::TraceStart { version: 1 })];
        all.extend_from_slice(lines);
        if end {
            all.push(mark(
                2.0,
                Event::TraceEnd {
                    events: 4,
                    count: 0,
                },
            ));
        }
        all.iter().map(|l| l.to_json() + "\n").collect()
    }

    /// Two files, one per endpoint, interleaved by time; an ACK naming two
    /// RPCs; a drop after its packet; a handshake outside any RPC.
    fn sample() -> Vec<(String, String)> {
        let (ty, c_sent, s_sent) = (PacketType::DATA, true, true);
        let client = [
            at(
                1.0,
                C,
                Event::HandshakeStarted {
                    peer: addr(S),
                    kind: 2,
                },
            ),
            sealed(1.001, 2, 4000),
            packet(1.002, C, c_sent, ty, 2, data(0, 0, false)),
            sealed(1.003, 4, 1),
            packet(1.010, C, !c_sent, PacketType::RESEND, 2, resend),
            packet(1.011, C, c_sent, ty, 2, data(1428, 1, true)),
            at(
                1.02,
                C,
                Event::Delivered {
                    msg: msg(C, 2),
                    message: Role::Response,
                    length: 4000,
                    rpc: Some(0),
                },
            ),
            packet(1.03, C, c_sent, PacketType::ACK, 0, acks(&[2, 4])),
        ];
        let server = [
            packet(1.009, S, s_sent, PacketType::RESEND, 2, resend),
            packet(1.012, S, !s_sent, ty, 2, data(1428, 1, true)),
            at(
                1.0121,
                S,
                Event::Dropped {
                    peer: addr(C),
                    reason: "duplicate".into(),
                },
            ),
            packet(1.031, S, !s_sent, PacketType::ACK, 0, acks(&[2])),
        ];
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
            (r.id, r.client.as_deref(), r.server.as_deref()),
            (MessageId(2), Some(C), Some(S))
        );
        assert_eq!((r.resends, r.retransmissions, r.drops), (1, 1, 1));
        assert_eq!(r.outcome, "response");
        let latency = r.latency_ms.unwrap();
        assert!(
            (latency - 19.0).abs() < 1e-6,
            "sealed at 1.001, delivered at 1.020: {latency}"
        );
        let evs: Vec<&str> = r.events.iter().map(|e| e.event.name()).collect();
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

    #[test]
    fn a_line_missing_its_events_fields_is_an_error_that_says_which() {
        let files = vec![(
            "t".to_string(),
            format!(r#"{{"t":1,"ep":"{C}","ev":"opened","peer":"{S}","id":"0x2"}}"#) + "\n",
        )];
        let err = timelines(&files).unwrap_err().to_string();
        assert!(
            err.contains("t, line 1") && err.contains("missing field"),
            "{err}"
        );
    }
}
