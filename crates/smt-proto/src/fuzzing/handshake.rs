//! The HANDSHAKE packet transport (stream reassembly, ACKs, retransmission,
//! restarts, failure alerts, early-data stash) driven by arbitrary packets,
//! with a scripted [`Handshake`] standing in for TLS so the fuzzer reaches
//! every state cheaply.
//!
//! Invariants checked:
//! - nothing panics;
//! - while every HANDSHAKE packet carried the client's true stream bytes at
//!   their offsets (any order, duplicates, overlaps, any ACK values), each
//!   handshake reads exactly a prefix of that stream, in order;
//! - every HANDSHAKE packet the endpoint sends parses and carries the
//!   length its header claims.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::Input;
use crate::crypto::{NullCipher, PacketCipher};
use crate::handshake::{Handshake, HandshakeAcceptor, HandshakeError};
use crate::record::{seal_message, MessageLayout};
use crate::wire::{Body, DataHeader, Packet, PacketType, Repr, DATA_HEADER_LEN};
use crate::{Config, Endpoint, Event, Role, SessionKeys};

/// Length of the client stream the consistent packets are cut from.
const STREAM_LEN: usize = 8192;
const HEADER_LEN: usize = crate::wire::COMMON_HEADER_LEN + 12;
const SERVER_PORT: u16 = 7000;

/// The client's handshake stream, byte `i`.
fn stream_byte(i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 7)) as u8
}

/// Feeds a server endpoint HANDSHAKE packets (and a few others) from
/// `data`. Layout: a mode byte for the scripted handshake (see [`Script`]),
/// then operations `[op][args]` (see `apply`). Must never panic.
pub fn handshake_packets(start: Instant, data: &[u8]) {
    let mut input = Input::new(data);
    let Some(mode) = input.u8() else {
        return;
    };
    let tainted = Arc::new(AtomicBool::new(false));
    let config = Config {
        local_port: SERVER_PORT,
        resend_ticks: 3,
        abort_ticks: 12,
        handshake_abort_ticks: 12,
        ..Config::default()
    };
    let Ok(mut ep) = Endpoint::new(config) else {
        return;
    };
    ep.set_handshake_acceptor(Box::new(Acceptor {
        script: Script::from_mode(mode),
        tainted: tainted.clone(),
    }));
    let peers: [SocketAddr; 2] = [
        "192.0.2.1:4000".parse().expect("literal"),
        "192.0.2.2:4001".parse().expect("literal"),
    ];
    let mut now = start;
    while let Some(op) = input.u8() {
        let from = peers[usize::from(op >> 7)];
        if apply(&mut ep, &mut now, from, op, &mut input, &tainted).is_none() {
            break;
        }
        drain(&mut ep, now);
    }
}

/// One operation; the opcode is the low three bits, bit 7 picks the peer,
/// bits 3–4 the HANDSHAKE kind of the packets it builds.
fn apply(
    ep: &mut Endpoint,
    now: &mut Instant,
    from: SocketAddr,
    op: u8,
    input: &mut Input<'_>,
    tainted: &AtomicBool,
) -> Option<()> {
    let kind = (op >> 3) & 3;
    match op & 7 {
        0 | 1 => true_chunk(ep, *now, from, kind, input),
        2 => {
            tainted.store(true, Ordering::Relaxed);
            arbitrary_chunk(ep, *now, from, kind, input)
        }
        3 => {
            let ack = input.u32()?;
            ep.handle_datagram(*now, from, &handshake(from, 0, ack, kind, &[]));
            Some(())
        }
        4 => pass_time(ep, now, input),
        5 => {
            tainted.store(true, Ordering::Relaxed);
            raw_datagram(ep, *now, from, input)
        }
        6 => stashed_request(ep, *now, from, input),
        _ => {
            // The application calls the peer.
            let _ = ep.send_request(*now, from, b"call");
            Some(())
        }
    }
}

/// A chunk of the true client stream at a chosen offset, with any ACK.
fn true_chunk(
    ep: &mut Endpoint,
    now: Instant,
    from: SocketAddr,
    kind: u8,
    input: &mut Input<'_>,
) -> Option<()> {
    let offset = usize::from(input.u16()?) % STREAM_LEN;
    let len = (usize::from(input.u16()?) % 1400).min(STREAM_LEN - offset);
    let chunk: Vec<u8> = (offset..offset + len).map(stream_byte).collect();
    let ack = u32::from(input.u16()?);
    let packet = handshake(from, offset as u32, ack, kind, &chunk);
    ep.handle_datagram(now, from, &packet);
    Some(())
}

/// Arbitrary bytes at an arbitrary offset (taints the stream check).
fn arbitrary_chunk(
    ep: &mut Endpoint,
    now: Instant,
    from: SocketAddr,
    kind: u8,
    input: &mut Input<'_>,
) -> Option<()> {
    let offset = input.u32()?;
    let ack = input.u32()?;
    let len = usize::from(input.u8()?);
    let chunk = input.bytes(len)?;
    ep.handle_datagram(now, from, &handshake(from, offset, ack, kind, chunk));
    Some(())
}

/// Time passes: 1 to 32 endpoint ticks.
fn pass_time(ep: &mut Endpoint, now: &mut Instant, input: &mut Input<'_>) -> Option<()> {
    let ticks = 1 + u32::from(input.u8()? % 32);
    for _ in 0..ticks {
        *now += ep.config().tick;
        ep.handle_timeout(*now);
    }
    Some(())
}

/// A raw datagram of up to 1,499 bytes (taints the stream check).
fn raw_datagram(
    ep: &mut Endpoint,
    now: Instant,
    from: SocketAddr,
    input: &mut Input<'_>,
) -> Option<()> {
    let len = usize::from(input.u16()? % 1500);
    let bytes = input.bytes(len)?;
    ep.handle_datagram(now, from, bytes);
    Some(())
}

/// A one-packet request under the null cipher (stashed while the
/// handshake runs, delivered once its keys are installed).
fn stashed_request(
    ep: &mut Endpoint,
    now: Instant,
    from: SocketAddr,
    input: &mut Input<'_>,
) -> Option<()> {
    let id = u64::from(input.u8()?);
    if let Some(d) = null_request(from, id) {
        ep.handle_datagram(now, from, &d);
    }
    Some(())
}

/// Sends everything, checking our HANDSHAKE packets; answers requests.
fn drain(ep: &mut Endpoint, now: Instant) {
    let mut buf = vec![0u8; ep.config().max_datagram_size];
    while let Some(t) = ep.poll_transmit(now, &mut buf) {
        check_sent(&buf[..t.len]);
    }
    while let Some(ev) = ep.poll_event() {
        if let Event::Request { rpc, .. } = ev {
            let _ = ep.send_response(now, rpc, b"ok");
        }
    }
}

fn check_sent(datagram: &[u8]) {
    let packet = Packet::new_checked(datagram).expect("we send well-formed packets");
    if packet.packet_type() != PacketType::HANDSHAKE {
        return;
    }
    let repr = Repr::parse(&packet).expect("our HANDSHAKE packets parse");
    let Body::Handshake { len, .. } = repr.body else {
        unreachable!("a HANDSHAKE packet parses to a handshake body");
    };
    assert_eq!(usize::from(len), packet.payload().len());
}

/// A HANDSHAKE packet from `from` to the server.
fn handshake(from: SocketAddr, offset: u32, ack: u32, kind: u8, chunk: &[u8]) -> Vec<u8> {
    let repr = Repr {
        src_port: from.port(),
        dst_port: SERVER_PORT,
        key_phase: false,
        id: 0,
        body: Body::Handshake {
            offset,
            ack,
            len: chunk.len() as u16,
            kind: crate::HandshakeKind(kind),
            flags: 0,
        },
    };
    let mut buf = vec![0u8; HEADER_LEN + chunk.len()];
    repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
    buf[HEADER_LEN..].copy_from_slice(chunk);
    buf
}

/// A whole one-packet request `id` from `from`, sealed with the null cipher.
fn null_request(from: SocketAddr, id: u64) -> Option<Vec<u8>> {
    let data = b"early";
    let layout = MessageLayout::new(data.len() as u64, data.len() as u64, 1024);
    let sealed = seal_message(
        &NullCipher,
        crate::record::SeqLayout::DEFAULT,
        id,
        data,
        layout,
    )
    .ok()?;
    let wire_len = sealed.wire.len() as u32;
    let header = DataHeader {
        message_len: data.len() as u32,
        message_wire_len: wire_len,
        segment_offset: 0,
        segment_len: wire_len,
        mss: wire_len as u16,
        packet_index: 0,
        retransmit: false,
        incoming: wire_len,
        priority: 0,
    };
    let repr = Repr {
        src_port: from.port(),
        dst_port: SERVER_PORT,
        key_phase: false,
        id,
        body: Body::Data(header),
    };
    let mut buf = vec![0u8; DATA_HEADER_LEN + sealed.wire.len()];
    repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
    buf[DATA_HEADER_LEN..].copy_from_slice(&sealed.wire);
    Some(buf)
}

/// What the scripted handshake does, from the mode byte: keys after
/// `keys_at` stream bytes (64..=512); fail before or after the keys (bits 3,
/// 4); answer `ratio` bytes per byte read (bits 5-6: 0..=3, more than the
/// anti-amplification limit at 3); a next key epoch after the keys (bit 7).
#[derive(Clone, Copy, Debug)]
struct Script {
    keys_at: usize,
    fail_at: Option<usize>,
    ratio: usize,
    next_keys: bool,
}

impl Script {
    fn from_mode(mode: u8) -> Self {
        let keys_at = 64 * (1 + usize::from(mode & 7));
        let fail_at = match (mode & 8 != 0, mode & 16 != 0) {
            (true, _) => Some(keys_at / 2),
            (false, true) => Some(keys_at + 100),
            _ => None,
        };
        Self {
            keys_at,
            fail_at,
            ratio: usize::from((mode >> 5) & 3),
            next_keys: mode & 0x80 != 0,
        }
    }
}

struct Acceptor {
    script: Script,
    tainted: Arc<AtomicBool>,
}

impl HandshakeAcceptor for Acceptor {
    fn accept(&mut self, _peer: SocketAddr) -> Option<Box<dyn Handshake>> {
        Some(Box::new(Scripted::new(self.script, self.tainted.clone())))
    }

    /// Kinds 0 and 1 are spoken; 2 and 3 are refused.
    fn accept_kind(
        &mut self,
        peer: SocketAddr,
        kind: crate::HandshakeKind,
    ) -> Option<Box<dyn Handshake>> {
        (kind.0 < 2).then(|| self.accept(peer)).flatten()
    }
}

/// Reads the client stream, checking it arrives in order; answers,
/// produces null-cipher keys or fails as its [`Script`] says.
#[derive(Debug)]
struct Scripted {
    script: Script,
    tainted: Arc<AtomicBool>,
    read: usize,
    outbox: Vec<u8>,
    keys_given: bool,
    next_given: bool,
    failed: bool,
}

impl Scripted {
    fn new(script: Script, tainted: Arc<AtomicBool>) -> Self {
        Self {
            script,
            tainted,
            read: 0,
            outbox: Vec::new(),
            keys_given: false,
            next_given: false,
            failed: false,
        }
    }

    fn check_in_order(&self, data: &[u8]) {
        if self.tainted.load(Ordering::Relaxed) {
            return;
        }
        for (k, &b) in data.iter().enumerate() {
            let at = self.read + k;
            assert!(at < STREAM_LEN, "handshake read beyond the client stream");
            assert_eq!(b, stream_byte(at), "handshake byte {at} out of order");
        }
    }
}

impl Handshake for Scripted {
    fn read(&mut self, data: &[u8]) -> Result<(), HandshakeError> {
        assert!(!self.failed, "read after the handshake failed");
        self.check_in_order(data);
        self.read += data.len();
        if self.script.fail_at.is_some_and(|at| self.read >= at) {
            self.failed = true;
            self.outbox
                .extend_from_slice(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28]);
            return Err(HandshakeError::Protocol("scripted failure".into()));
        }
        let answer = data.len() * self.script.ratio;
        self.outbox.extend((0..answer).map(|i| i as u8));
        Ok(())
    }

    fn write(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.outbox);
    }

    fn take_keys(&mut self) -> Option<SessionKeys> {
        if self.keys_given || self.failed || self.read < self.script.keys_at {
            return None;
        }
        self.keys_given = true;
        Some(null_keys())
    }

    fn take_next_keys(&mut self) -> Option<SessionKeys> {
        if !self.keys_given || self.next_given || !self.script.next_keys {
            return None;
        }
        self.next_given = true;
        Some(null_keys())
    }
}

fn null_keys() -> SessionKeys {
    let tx: Arc<dyn PacketCipher> = Arc::new(NullCipher);
    let rx: Arc<dyn PacketCipher> = Arc::new(NullCipher);
    SessionKeys::new(Role::Server, tx, rx)
}
