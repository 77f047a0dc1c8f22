//! What a dump found, as data (`--json`) and as text.

use std::fmt::Write as _;

use serde::Serialize;

use crate::link::Transport;
use crate::message::RecordReport;
use crate::packet::Header;

/// Everything a dump found.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The capture file: format, frame counts, what was skipped.
    pub capture: CaptureSummary,
    /// Every SMT packet, in frame order.
    pub packets: Vec<PacketReport>,
    /// Every session: a flow between two addresses under one set of keys.
    pub sessions: Vec<SessionReport>,
    /// Every message seen, with its records and status.
    pub messages: Vec<MessageReport>,
    /// Everything a receiver would have dropped or refused, and messages
    /// left incomplete, in frame order.
    pub problems: Vec<Problem>,
}

/// The capture file and what was in it besides SMT.
#[derive(Clone, Debug, Serialize)]
pub struct CaptureSummary {
    /// `pcap` or `pcapng`.
    pub format: &'static str,
    /// Frames in the file.
    pub frames: u64,
    /// Frames that carried SMT datagrams.
    pub smt_datagrams: u64,
    /// SMT packets in those datagrams (more than datagrams when coalesced).
    pub smt_packets: u64,
    /// Frames that carried no SMT, by reason.
    pub skipped: std::collections::BTreeMap<String, u64>,
    /// Why reading stopped before the end of the file, if it did.
    pub error: Option<String>,
    /// Packets the capturing program dropped, as the file says (pcapng
    /// `isb_ifdrop`, as `smt`'s own capture writes it); `null` when it
    /// does not say.
    pub capture_dropped: Option<u64>,
    /// Key-log lines that could not be read: "line N: why".
    pub key_log_errors: Vec<String>,
}

/// One SMT packet.
#[derive(Clone, Debug, Serialize)]
pub struct PacketReport {
    /// The frame's number in the capture (1-based, as Wireshark counts).
    pub frame: u64,
    /// Seconds since the first frame.
    pub time: f64,
    /// Sender address and port.
    pub src: String,
    /// Receiver address and port.
    pub dst: String,
    /// How the packet was carried (UDP or raw IP).
    pub transport: Transport,
    /// Position in its datagram (0 for the first; more when coalesced).
    pub index: usize,
    /// Byte offset in its datagram.
    pub offset: usize,
    /// Bytes, control tag included.
    pub len: usize,
    /// The key phase bit of the header, for packets that carry one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_phase: Option<u8>,
    /// The message or RPC ID (hex), for packets that carry one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The packet's header fields, by type.
    #[serde(flatten)]
    pub header: Header,
    /// The control-packet MAC (hex) and whether it verified (`ok`, `bad`,
    /// or `unchecked` without keys).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<TagReport>,
    /// What this packet did: records it completed, duplicates, replays.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl PacketReport {
    /// The packet type's name (`DATA`, `GRANT`, ..., `MALFORMED`).
    pub fn header_type(&self) -> &'static str {
        match &self.header {
            Header::Data { .. } => "DATA",
            Header::Grant { .. } => "GRANT",
            Header::Resend { .. } => "RESEND",
            Header::RpcUnknown => "RPC_UNKNOWN",
            Header::Busy => "BUSY",
            Header::NeedAck => "NEED_ACK",
            Header::Overloaded => "OVERLOADED",
            Header::Abandoned => "ABANDONED",
            Header::Credit { .. } => "CREDIT",
            Header::Ack { .. } => "ACK",
            Header::KeyUpdate { .. } => "KEY_UPDATE",
            Header::Handshake { .. } => "HANDSHAKE",
            Header::Malformed { .. } => "MALFORMED",
        }
    }
}

/// A control packet's MAC and whether it verified.
#[derive(Clone, Debug, Serialize)]
pub struct TagReport {
    /// The tag, hex.
    pub hex: String,
    /// `ok`, `bad`, or `unchecked` (no keys).
    pub status: &'static str,
}

/// One session: a flow between two addresses under one set of keys.
#[derive(Clone, Debug, Serialize)]
pub struct SessionReport {
    /// The session's number in the report (what [`MessageReport::session`] names).
    pub index: usize,
    /// The side that started the handshake (or that sends even request IDs).
    pub client: Option<String>,
    /// The other side (the one that answered the handshake).
    pub server: Option<String>,
    /// The handshake seen for it: `TLS 1.3`, `PSK nonce exchange`, ...
    pub handshake: Option<&'static str>,
    /// The id the key log files its keys under (hex), if the capture shows it.
    pub key_log_id: Option<String>,
    /// `key log`, `key log (trial decryption)`, or why there are none.
    pub keys: String,
    /// The frame where the session was first seen.
    pub first_frame: u64,
    /// The highest key epoch seen in use.
    pub epochs: usize,
}

/// One message.
#[derive(Clone, Debug, Serialize)]
pub struct MessageReport {
    /// The index of the session it belongs to ([`SessionReport::index`]).
    pub session: usize,
    /// Sender address and port.
    pub src: String,
    /// Receiver address and port.
    pub dst: String,
    /// `request` or `response` (from the ID's parity and the sender's
    /// role), `unknown` when the roles are.
    pub kind: &'static str,
    /// The message ID (hex).
    pub id: String,
    /// The key phase bit its packets carried.
    pub key_phase: u8,
    /// The key epoch whose keys opened it, if any did.
    pub epoch: Option<usize>,
    /// The frame of its first packet.
    pub first_frame: u64,
    /// The frame of its last packet.
    pub last_frame: u64,
    /// Application bytes, as the DATA headers say.
    pub message_len: u32,
    /// Bytes on the wire (records: headers, plaintext, tags), as the DATA headers say.
    pub message_wire_len: u32,
    /// DATA packets seen, retransmissions and duplicates included.
    pub packets: u64,
    /// DATA packets marked as retransmissions.
    pub retransmissions: u64,
    /// DATA packets that repeated bytes already seen.
    pub duplicates: u64,
    /// `complete`, `incomplete`, `failed` (a record was refused and never
    /// arrived intact), or `no_keys`.
    pub status: &'static str,
    /// Application bytes decrypted.
    pub plaintext_len: usize,
    /// The first bytes of the plaintext, hex.
    pub first_bytes: String,
    /// What became of each record.
    pub records: Vec<RecordReport>,
    /// What went wrong with this message, in words.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// The whole plaintext, when the caller asked to keep it.
    #[serde(skip)]
    pub plaintext: Option<Vec<u8>>,
}

/// Something a receiver would have dropped or refused, or a message left incomplete.
#[derive(Clone, Debug, Serialize)]
pub struct Problem {
    /// The frame it was seen in.
    pub frame: u64,
    /// What, in words.
    pub what: String,
}

impl Report {
    /// The report as text: packets, then sessions, messages and problems.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for p in &self.packets {
            packet_line(&mut out, p);
        }
        let _ = writeln!(out);
        for s in &self.sessions {
            session_line(&mut out, s);
        }
        for m in &self.messages {
            message_lines(&mut out, m);
        }
        if !self.problems.is_empty() {
            let _ = writeln!(out, "\nproblems:");
            for p in &self.problems {
                let _ = writeln!(out, "  frame {}: {}", p.frame, p.what);
            }
        }
        let c = &self.capture;
        let _ = write!(
            out,
            "\n{} frames ({}), {} SMT datagrams, {} SMT packets",
            c.frames, c.format, c.smt_datagrams, c.smt_packets
        );
        for (why, n) in &c.skipped {
            let _ = write!(out, "; {n} skipped: {why}");
        }
        if let Some(n) = c.capture_dropped.filter(|n| *n > 0) {
            let _ = write!(
                out,
                "; the capturing program dropped {n} packets (not in the file)"
            );
        }
        let _ = writeln!(out);
        out
    }
}

fn packet_line(out: &mut String, p: &PacketReport) {
    let _ = write!(out, "{:>5} {:.6} {} > {}", p.frame, p.time, p.src, p.dst);
    if p.index > 0 {
        let _ = write!(out, " [+{} #{}]", p.offset, p.index);
    }
    let handshake = matches!(p.header, Header::Handshake { .. });
    if let (Some(phase), Some(id), false) = (p.key_phase, &p.id, handshake) {
        let _ = write!(out, " id={id} phase={phase}");
    }
    let _ = write!(out, " {}", p.header.summary());
    if let Some(tag) = &p.tag {
        let _ = write!(out, " tag={}", tag.status);
    }
    let _ = writeln!(out);
    for note in &p.notes {
        let _ = writeln!(out, "        {note}");
    }
}

fn session_line(out: &mut String, s: &SessionReport) {
    let _ = writeln!(
        out,
        "session {}: client {} server {}, {}, keys: {}{}",
        s.index,
        s.client.as_deref().unwrap_or("?"),
        s.server.as_deref().unwrap_or("?"),
        s.handshake.unwrap_or("no handshake in the capture"),
        s.keys,
        match s.epochs {
            0 => String::new(),
            n => format!(", epochs 0..={n}"),
        }
    );
}

fn message_lines(out: &mut String, m: &MessageReport) {
    let epoch = m.epoch.map_or("?".to_string(), |e| e.to_string());
    let _ = writeln!(
        out,
        "message {} {} {} > {} (session {}, epoch {epoch}): {} frames {}-{}, {} packets ({} retransmitted, {} duplicate)",
        m.id, m.kind, m.src, m.dst, m.session, m.status, m.first_frame, m.last_frame, m.packets,
        m.retransmissions, m.duplicates
    );
    if m.status == "complete" {
        let padding: usize = m.records.iter().map(|r| r.padding).sum();
        let _ = writeln!(
            out,
            "    {} bytes in {} records{}: {}",
            m.plaintext_len,
            m.records.iter().filter(|r| r.status == "ok").count(),
            if padding > 0 {
                format!(" (+{padding} padding)")
            } else {
                String::new()
            },
            preview(&m.first_bytes, m.plaintext_len)
        );
    }
    for r in m.records.iter().filter(|r| r.status != "ok") {
        let _ = writeln!(
            out,
            "    record {} at wire byte {} (frame {}): {}{}",
            r.index,
            r.wire_offset,
            r.frame,
            r.status,
            r.belongs_to
                .as_ref()
                .map_or(String::new(), |b| format!(": {b}"))
        );
    }
    for p in &m.problems {
        let _ = writeln!(out, "    {p}");
    }
}

/// The first bytes as text when they are printable, else as hex.
fn preview(hex: &str, len: usize) -> String {
    let bytes: Vec<u8> = hex::decode(hex).unwrap_or_default();
    let more = if bytes.len() < len { "..." } else { "" };
    if !bytes.is_empty() && bytes.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        format!("{:?}{more}", String::from_utf8_lossy(&bytes))
    } else {
        format!("{hex}{more}")
    }
}
