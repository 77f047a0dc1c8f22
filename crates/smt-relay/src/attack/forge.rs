//! Packets built without the keys: every header field chosen by the
//! attacker (at random, or copied from real traffic), the record or MAC
//! random bytes.

use smt_proto::crypto::TAG_LEN;
use smt_proto::wire::{AckIds, Body, DataHeader, Packet, PacketType, Repr};

use crate::SplitMix64;

/// The control packet types an attacker can forge (HANDSHAKE aside).
pub const CONTROL_TYPES: [PacketType; 9] = [
    PacketType::GRANT,
    PacketType::RESEND,
    PacketType::RPC_UNKNOWN,
    PacketType::BUSY,
    PacketType::OVERLOADED,
    PacketType::ABANDONED,
    PacketType::NEED_ACK,
    PacketType::ACK,
    PacketType::KEY_UPDATE,
];

/// A control packet of type `ty` for message `id` under `key_phase`, with
/// random body fields and a random 16-byte MAC.
pub fn forge_control(
    rng: &mut SplitMix64,
    ty: PacketType,
    ports: (u16, u16),
    id: u64,
    key_phase: bool,
) -> Vec<u8> {
    let body = random_control_body(rng, ty, id);
    let mut out = emit(ports, id, key_phase, body);
    out.extend((0..TAG_LEN).map(|_| rng.next_u64() as u8));
    out
}

/// A control packet of type `ty` MAC'd under `tx`: keys the attacker holds
/// itself (e.g. the SMT-key of a 0-RTT hello it built from a public ticket
/// and sent from a victim's address).
pub fn keyed_control(
    rng: &mut SplitMix64,
    tx: &dyn smt_proto::crypto::PacketCipher,
    ty: PacketType,
    ports: (u16, u16),
    id: u64,
    key_phase: bool,
) -> Vec<u8> {
    let body = random_control_body(rng, ty, id);
    let mut out = emit(ports, id, key_phase, body);
    let tag = tx.control_tag(&out);
    out.extend_from_slice(&tag);
    out
}

/// A DATA packet of message `id` with the given header and as many random
/// bytes as the header's layout says, in place of the sealed records.
pub fn forge_data(
    rng: &mut SplitMix64,
    ports: (u16, u16),
    id: u64,
    key_phase: bool,
    header: DataHeader,
) -> Vec<u8> {
    let mut out = emit(ports, id, key_phase, Body::Data(header));
    let mut payload = vec![0u8; header.payload_len()];
    rng.fill(&mut payload);
    out.extend_from_slice(&payload);
    out
}

/// A HANDSHAKE packet at stream `offset` of `kind` carrying random bytes.
pub fn forge_handshake(
    rng: &mut SplitMix64,
    ports: (u16, u16),
    offset: u32,
    kind: u8,
    len: u16,
) -> Vec<u8> {
    let body = Body::Handshake {
        offset,
        ack: rng.next_u64() as u32 % 4096,
        len,
        kind: smt_proto::HandshakeKind(kind),
        flags: 0,
    };
    let mut out = emit(ports, 0, false, body);
    let mut payload = vec![0u8; usize::from(len)];
    rng.fill(&mut payload);
    out.extend_from_slice(&payload);
    out
}

/// `template`'s plaintext header (its first `header_len` bytes) followed
/// by random bytes as long as the rest: the header fields of real traffic,
/// a record or MAC made up.
pub fn with_random_tail(rng: &mut SplitMix64, template: &[u8]) -> Vec<u8> {
    let header = Packet::new_checked(template).map_or(template.len(), |p| p.header_len());
    let mut out = template.to_vec();
    rng.fill(&mut out[header.min(template.len())..]);
    out
}

fn emit(ports: (u16, u16), id: u64, key_phase: bool, body: Body) -> Vec<u8> {
    let repr = Repr {
        src_port: ports.0,
        dst_port: ports.1,
        key_phase,
        id,
        body,
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Packet::new_unchecked(&mut out[..]));
    out
}

fn random_control_body(rng: &mut SplitMix64, ty: PacketType, id: u64) -> Body {
    let small = |rng: &mut SplitMix64| (rng.next_u64() % (1 << 20)) as u32;
    match ty {
        PacketType::GRANT => Body::Grant {
            offset: small(rng),
            priority: rng.below(8) as u8,
        },
        PacketType::RESEND => Body::Resend {
            offset: small(rng),
            length: small(rng),
            priority: rng.below(8) as u8,
        },
        PacketType::RPC_UNKNOWN => Body::RpcUnknown,
        PacketType::BUSY => Body::Busy,
        PacketType::OVERLOADED => Body::Overloaded,
        PacketType::ABANDONED => Body::Abandoned,
        PacketType::NEED_ACK => Body::NeedAck,
        PacketType::ACK => {
            let mut ids = AckIds::new();
            for k in 0..=rng.below(4) {
                ids.push(id.wrapping_add(2 * k));
            }
            Body::Ack(ids)
        }
        _ => Body::KeyUpdate,
    }
}
