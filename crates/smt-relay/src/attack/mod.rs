//! An on-path attacker for real-socket tests: the relay ([`crate::relay`])
//! records every datagram, and these helpers turn the recording into
//! attacks — replay, bit flips, truncation, forged packets with random or
//! copied header fields, splicing between messages, sessions and
//! directions, reflection — which tests inject with
//! [`Relay::inject`](crate::Relay::inject).
//!
//! The attacker has no keys: it sees and changes bytes only. What it may
//! achieve is what a test then checks on the victims (deliveries,
//! executions, packets sent, drop counters by reason); `docs/attacks.md`
//! has the threat model and the results.

mod forge;
mod mutate;
mod tally;

pub use forge::{
    forge_control, forge_data, forge_handshake, keyed_control, with_random_tail, CONTROL_TYPES,
};
pub use mutate::{flip_bit, retarget_id, truncate};
pub use tally::Tally;

use smt_proto::wire::{Packet, PacketType};

use crate::{Captured, Direction};

/// The packet type of a datagram, if it is a well-formed SMT header.
pub fn packet_type(bytes: &[u8]) -> Option<PacketType> {
    Packet::new_checked(bytes).ok().map(|p| p.packet_type())
}

/// The message ID in a datagram's plaintext header.
pub fn message_id(bytes: &[u8]) -> Option<u64> {
    Packet::new_checked(bytes).ok().map(|p| p.id())
}

/// The captured datagrams of `direction` whose type is `ty` (any type if
/// `None`), in capture order.
pub fn select<'a>(
    captured: &'a [Captured],
    direction: Direction,
    ty: Option<PacketType>,
) -> impl Iterator<Item = &'a Captured> + 'a {
    captured.iter().filter(move |c| {
        c.direction == direction && ty.is_none_or(|t| packet_type(&c.bytes) == Some(t))
    })
}
