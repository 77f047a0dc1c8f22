//! Packets built without keys, field by field (`docs/protocol.md` §§ 2–4,
//! `docs/handshake.md` § 9). Every builder writes source port 0 ("the
//! sender did not know its port"), which a receiver accepts from any UDP
//! source port, so one packet serves every spoofed source.

use smt_proto::crypto::TAG_LEN;
use smt_proto::wire::{Body, DataHeader, Packet, PacketType, Repr, HANDSHAKE_TOKEN};
use smt_relay::attack::{forge_control, forge_handshake, CONTROL_TYPES};
use smt_relay::SplitMix64;

/// HANDSHAKE `kind` of TLS 1.3.
pub const KIND_TLS13: u8 = 0;
/// HANDSHAKE `kind` of the 0-RTT SMT-ticket exchange.
pub const KIND_SMT_TICKET: u8 = 1;
/// HANDSHAKE `kind` of the PSK nonce exchange.
pub const KIND_PSK_NONCE: u8 = 2;
/// Handshake bytes per packet with the default 1472-byte datagrams.
pub const HANDSHAKE_CHUNK: usize = 1432;
/// DATA payload per packet with the default 1472-byte datagrams.
pub const MSS: u16 = 1428;
/// The largest message the server accepts by default (`max_message_len`).
pub const HUGE_MESSAGE: u32 = 64 << 20;

const RECORD: u32 = 16384;
const RECORD_OVERHEAD: u32 = 22;
const RECORDS_PER_SEGMENT: u32 = 3;
const UNSCHEDULED: u32 = 72_000;

/// `body` under a common header to `dst_port`, then `payload`.
pub fn emit(dst_port: u16, id: u64, key_phase: bool, body: Body, payload: &[u8]) -> Vec<u8> {
    let repr = Repr {
        src_port: 0,
        dst_port,
        key_phase,
        id,
        body,
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Packet::new_unchecked(&mut out[..]));
    out.extend_from_slice(payload);
    out
}

/// One HANDSHAKE packet carrying `data` (at most 65,535 bytes are taken)
/// at stream `offset`, acknowledging nothing.
pub fn handshake(dst_port: u16, kind: u8, offset: u32, data: &[u8]) -> Vec<u8> {
    handshake_with(dst_port, kind, Stream { offset, ack: 0 }, 0, data)
}

/// Where a HANDSHAKE packet's data sits in the sender's stream, and how
/// much of the receiver's stream it acknowledges.
#[derive(Clone, Copy, Debug)]
pub struct Stream {
    pub offset: u32,
    pub ack: u32,
}

/// One HANDSHAKE packet with `flags` (`HANDSHAKE_TOKEN`: `data` starts
/// with the token's length byte and the token).
pub fn handshake_with(dst_port: u16, kind: u8, at: Stream, flags: u8, data: &[u8]) -> Vec<u8> {
    let len = u16::try_from(data.len()).unwrap_or(u16::MAX);
    let body = Body::Handshake {
        offset: at.offset,
        ack: at.ack,
        len,
        kind: smt_proto::HandshakeKind(kind),
        flags,
    };
    emit(dst_port, 0, false, body, &data[..usize::from(len)])
}

/// An opening that answers a RETRY: offset 0, flag TOKEN, data = token
/// length, token, then `stream` (the stream's first bytes).
pub fn token_opening(dst_port: u16, kind: u8, token: &[u8], stream: &[u8]) -> Vec<u8> {
    let mut data = Vec::with_capacity(1 + token.len() + stream.len());
    data.push(u8::try_from(token.len()).unwrap_or(u8::MAX));
    data.extend_from_slice(&token[..token.len().min(255)]);
    data.extend_from_slice(stream);
    handshake_with(
        dst_port,
        kind,
        Stream { offset: 0, ack: 0 },
        HANDSHAKE_TOKEN,
        &data,
    )
}

/// The PskHello stream (34 bytes: type 1, version 1, a random nonce).
pub fn psk_hello_stream(rng: &mut SplitMix64) -> Vec<u8> {
    let mut hello = vec![0u8; 34];
    hello[0] = 1;
    hello[1] = 1;
    rng.fill(&mut hello[2..]);
    hello
}

/// A handshake stream cut into HANDSHAKE packets as an endpoint sends it.
pub fn handshake_stream(dst_port: u16, kind: u8, stream: &[u8]) -> Vec<Vec<u8>> {
    let mut offset = 0u32;
    stream
        .chunks(HANDSHAKE_CHUNK)
        .map(|chunk| {
            let packet = handshake(dst_port, kind, offset, chunk);
            offset = offset.saturating_add(chunk.len() as u32);
            packet
        })
        .collect()
}

/// A PskHello (type 1, version 1, a random 32-byte client nonce) opening
/// a PSK nonce exchange: 74 bytes, no key needed.
pub fn psk_hello(rng: &mut SplitMix64, dst_port: u16) -> Vec<u8> {
    handshake(dst_port, KIND_PSK_NONCE, 0, &psk_hello_stream(rng))
}

/// A handshake opening of a kind a PSK server does not accept (or a TLS
/// server cannot parse): `len` random bytes.
pub fn other_opening(rng: &mut SplitMix64, dst_port: u16, kind: u8, len: usize) -> Vec<u8> {
    let mut data = vec![0u8; len];
    rng.fill(&mut data);
    handshake(dst_port, kind, 0, &data)
}

/// The first packet (segment 0, index 0) of a new request `id` of
/// `message_len` padded bytes in 16 KiB records, `mss` payload bytes per
/// packet, the default unscheduled bytes as `incoming`; random bytes in
/// place of the sealed records.
pub fn first_data(
    rng: &mut SplitMix64,
    dst_port: u16,
    id: u64,
    message_len: u32,
    mss: u16,
) -> Vec<u8> {
    let records = message_len.div_ceil(RECORD).max(1);
    let wire_len = message_len.saturating_add(records.saturating_mul(RECORD_OVERHEAD));
    let segment_len = wire_len.min(RECORDS_PER_SEGMENT * (RECORD + RECORD_OVERHEAD));
    let mss = u32::from(mss.max(1)).min(segment_len);
    let header = DataHeader {
        message_len,
        message_wire_len: wire_len,
        segment_offset: 0,
        segment_len,
        mss: u16::try_from(mss).unwrap_or(MSS),
        packet_index: 0,
        retransmit: false,
        incoming: wire_len.min(UNSCHEDULED),
        priority: 0,
    };
    let mut payload = vec![0u8; header.payload_len()];
    rng.fill(&mut payload);
    emit(dst_port, id, false, Body::Data(header), &payload)
}

/// A forged control packet of a random type (GRANT ... KEY_UPDATE) about a
/// small message ID of either parity, as a live session would use; a
/// random MAC, or (one in four) none, as with control authentication off.
/// One in eight is a HANDSHAKE continuation (offset > 0) instead.
pub fn forged_control(rng: &mut SplitMix64, dst_port: u16) -> Vec<u8> {
    if rng.below(8) == 0 {
        let offset = 1 + rng.below(60_000) as u32;
        let kind = rng.below(3) as u8;
        let len = rng.below(1_000) as u16;
        return forge_handshake(rng, (0, dst_port), offset, kind, len);
    }
    let ty = pick(rng, &CONTROL_TYPES);
    let id = 2 + rng.below(512);
    let phase = rng.below(10) == 0;
    let mut packet = forge_control(rng, ty, (0, dst_port), id, phase);
    if rng.below(4) == 0 {
        packet.truncate(packet.len().saturating_sub(TAG_LEN));
    }
    packet
}

/// The control packet types, HANDSHAKE aside, for per-type probes.
pub fn control_types() -> &'static [PacketType] {
    &CONTROL_TYPES
}

/// Ten forged packets of one control type `ty` with random MACs.
pub fn forged_of_type(rng: &mut SplitMix64, dst_port: u16, ty: PacketType) -> Vec<u8> {
    let id = 2 + rng.below(64);
    forge_control(rng, ty, (0, dst_port), id, false)
}

/// A datagram of random length (1 to 1472) and random bytes.
pub fn random_datagram(rng: &mut SplitMix64) -> Vec<u8> {
    let mut out = vec![0u8; 1 + rng.below(1472) as usize];
    rng.fill(&mut out);
    out
}

/// A parseable-looking SMT header whose fields take absurd values: extreme
/// lengths, offsets, IDs and counts, payloads that disagree with them,
/// unknown types and reserved bits. Most fail a check of `docs/protocol.md`
/// §§ 2–4; some pass and reach session code (64 KiB segments of 64 MiB
/// messages at the top of the ID space).
pub fn absurd(rng: &mut SplitMix64, dst_port: u16) -> Vec<u8> {
    match rng.below(6) {
        0 => absurd_data(rng, dst_port),
        1 => plausible_huge_data(rng, dst_port),
        2 => absurd_control(rng, dst_port),
        3 => absurd_handshake(rng, dst_port),
        4 => absurd_ack(rng, dst_port),
        _ => absurd_common(rng, dst_port),
    }
}

fn extreme(rng: &mut SplitMix64) -> u32 {
    match rng.below(7) {
        0 => 0,
        1 => 1,
        2 => u32::MAX,
        3 => 0x8000_0000,
        4 => 65_536,
        5 => HUGE_MESSAGE,
        _ => rng.next_u64() as u32,
    }
}

fn extreme_id(rng: &mut SplitMix64) -> u64 {
    match rng.below(5) {
        0 => 0,
        1 => u64::MAX,
        2 => 1 << 48,
        3 => (1 << 48) - 2,
        _ => rng.next_u64(),
    }
}

fn pick<T: Copy>(rng: &mut SplitMix64, items: &[T]) -> T {
    // NOTE(index): `below(len)` is less than `len`, and the callers'
    // slices are constant and non-empty.
    items[rng.below(items.len() as u64) as usize]
}

fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    if let Some(slot) = buf.get_mut(at..at + 4) {
        slot.copy_from_slice(&v.to_be_bytes());
    }
}

fn put_u16(buf: &mut [u8], at: usize, v: u16) {
    if let Some(slot) = buf.get_mut(at..at + 2) {
        slot.copy_from_slice(&v.to_be_bytes());
    }
}

fn put_u64(buf: &mut [u8], at: usize, v: u64) {
    if let Some(slot) = buf.get_mut(at..at + 8) {
        slot.copy_from_slice(&v.to_be_bytes());
    }
}

/// A DATA header with extreme lengths and offsets and a payload of any
/// length.
fn absurd_data(rng: &mut SplitMix64, dst_port: u16) -> Vec<u8> {
    let mut p = first_data(rng, dst_port, 2, 1000, MSS);
    p.truncate(44);
    put_u32(&mut p, 4, extreme(rng)); // segment offset
    put_u32(&mut p, 8, extreme(rng)); // message length
    put_u16(&mut p, 14, extreme(rng) as u16); // mss
    put_u16(&mut p, 18, extreme(rng) as u16); // resend index
    put_u64(&mut p, 20, extreme_id(rng));
    put_u16(&mut p, 28, extreme(rng) as u16); // packet index
    put_u32(&mut p, 32, extreme(rng)); // message wire length
    put_u32(&mut p, 36, extreme(rng)); // segment length
    put_u32(&mut p, 40, extreme(rng)); // incoming
    let mut payload = vec![0u8; rng.below(u64::from(MSS) + 1) as usize];
    rng.fill(&mut payload);
    p.extend_from_slice(&payload);
    p
}

/// A DATA packet that passes every header check: a 64 KiB segment at the
/// end of a 64 MiB message, at the top of the 48-bit ID space.
fn plausible_huge_data(rng: &mut SplitMix64, dst_port: u16) -> Vec<u8> {
    let id = (1u64 << 48) - 2 - 2 * rng.below(1 << 20);
    first_data(rng, dst_port, id, HUGE_MESSAGE, MSS)
}

fn absurd_control(rng: &mut SplitMix64, dst_port: u16) -> Vec<u8> {
    let body = match rng.below(5) {
        0 => Body::Grant {
            offset: extreme(rng),
            priority: rng.next_u64() as u8,
        },
        1 => Body::Resend {
            offset: extreme(rng),
            length: extreme(rng),
            priority: rng.next_u64() as u8,
        },
        2 => Body::RpcUnknown,
        3 => Body::NeedAck,
        _ => Body::KeyUpdate,
    };
    let mut p = emit(dst_port, extreme_id(rng), rng.below(2) == 1, body, &[]);
    let mut tag = vec![0u8; rng.below(2 * TAG_LEN as u64) as usize];
    rng.fill(&mut tag);
    p.extend_from_slice(&tag);
    p
}

fn absurd_handshake(rng: &mut SplitMix64, dst_port: u16) -> Vec<u8> {
    let data_len = rng.below(HANDSHAKE_CHUNK as u64 + 1) as usize;
    let kind = rng.next_u64() as u8;
    let mut p = other_opening(rng, dst_port, kind, data_len);
    put_u32(&mut p, 28, extreme(rng)); // offset
    put_u32(&mut p, 32, extreme(rng)); // ack
    if rng.below(2) == 0 {
        put_u16(&mut p, 36, extreme(rng) as u16); // len, disagreeing with the data
    }
    p
}

fn absurd_ack(rng: &mut SplitMix64, dst_port: u16) -> Vec<u8> {
    let count = pick(rng, &[0u16, 1, 16, 17, 255, u16::MAX]);
    let mut p = emit(dst_port, 0, rng.below(2) == 1, Body::RpcUnknown, &[]);
    p[12] = 0x80; // header length 32
    p[13] = PacketType::ACK.0;
    p.extend_from_slice(&[0u8; 4]);
    put_u16(&mut p, 28, count);
    for _ in 0..rng.below(20) {
        p.extend_from_slice(&extreme_id(rng).to_be_bytes());
    }
    p.extend_from_slice(&[0u8; TAG_LEN]);
    p
}

/// A common header with an unknown type, reserved bits or an impossible
/// header length, and random bytes after it.
fn absurd_common(rng: &mut SplitMix64, dst_port: u16) -> Vec<u8> {
    let mut p = emit(dst_port, extreme_id(rng), false, Body::Busy, &[]);
    p[12] = rng.next_u64() as u8;
    p[13] = pick(rng, &[0x00, 0x15, 0x16, 0x1c, 0x21, 0x7f, 0xff, 0x10, 0x20]);
    let mut tail = vec![0u8; rng.below(200) as usize];
    rng.fill(&mut tail);
    p.extend_from_slice(&tail);
    p
}
