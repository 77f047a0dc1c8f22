//! Which shard a packet belongs to, read from its plaintext header alone
//! (`docs/protocol.md` § 2: the message ID sits in the clear so that the
//! host can spread messages over cores).
//!
//! Pure functions: no socket, no clock, no shard state; the dispatcher and
//! the tests call them the same way.

use smt_proto::wire::{first_packet_len, Packet, PacketType};

/// Where one packet goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// To the shard that owns the packet's message ID.
    One(usize),
    /// To every shard: the packet concerns several messages (an ACK batch)
    /// or the whole session (KEY_UPDATE, `session`: a shard that missed it
    /// could not follow the peer into its next key epoch, so it is never
    /// dropped for a full inbox).
    All { session: bool },
}

/// The shard that owns message `id` out of `shards`.
///
/// Both sides' IDs step by 2 (the low bit names who started the RPC), so
/// `id >> 1` counts a peer's RPCs: consecutive requests from one client go
/// round-robin to the shards, and a message's every packet (DATA, GRANT,
/// RESEND, BUSY, NEED_ACK, RPC_UNKNOWN) to the same one.
pub fn shard_of(id: u64, shards: usize) -> usize {
    let shards = shards.max(1) as u64;
    // The remainder is below `shards`, a usize: the cast cannot truncate.
    ((id >> 1) % shards) as usize
}

/// Where the packet at the start of `packet` goes.
///
/// A packet too short for a header goes to shard 0, whose endpoint drops
/// and counts it like any other malformed input (the dispatcher decides
/// nothing about validity). HANDSHAKE packets go to shard 0 as well: the
/// worker shape starts from installed or resolved keys (see the module
/// docs of `workers`), and shard 0 answers what it can.
pub(crate) fn route(packet: &[u8], shards: usize) -> Route {
    let Ok(view) = Packet::new_checked(packet) else {
        return Route::One(0);
    };
    match view.packet_type() {
        PacketType::ACK => Route::All { session: false },
        PacketType::KEY_UPDATE => Route::All { session: true },
        PacketType::HANDSHAKE => Route::One(0),
        _ => Route::One(shard_of(view.id(), shards)),
    }
}

/// The packets of one datagram, each as its own slice (a coalesced
/// datagram holds several back to back, `docs/protocol.md` § 2.1). A
/// remainder whose length cannot be read is yielded whole, last, for the
/// owning endpoint to drop and count: the split never loses a byte
/// silently and never panics.
pub(crate) fn packets(datagram: &[u8], tagged_control: bool) -> Packets<'_> {
    Packets {
        rest: datagram,
        tagged_control,
    }
}

/// Iterator returned by [`packets`].
#[derive(Debug)]
pub(crate) struct Packets<'a> {
    rest: &'a [u8],
    tagged_control: bool,
}

impl<'a> Iterator for Packets<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.rest.is_empty() {
            return None;
        }
        let len = first_packet_len(self.rest, self.tagged_control)
            .ok()
            .filter(|&l| l > 0)
            .unwrap_or(self.rest.len());
        let (first, rest) = self.rest.split_at(len.min(self.rest.len()));
        self.rest = rest;
        Some(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smt_proto::wire::{AckIds, Body, Repr};

    fn emit(id: u64, body: Body, extra: usize) -> Vec<u8> {
        let repr = Repr {
            src_port: 1,
            dst_port: 2,
            key_phase: false,
            id,
            body,
        };
        let mut buf = vec![0u8; repr.buffer_len() + extra];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        buf
    }

    #[test]
    fn consecutive_client_ids_go_round_robin() {
        let shards: Vec<usize> = (1..=6u64).map(|n| shard_of(2 * n, 3)).collect();
        assert_eq!(shards, [1, 2, 0, 1, 2, 0]);
        assert_eq!(shard_of(7, 1), 0, "one shard owns everything");
        assert_eq!(shard_of(7, 0), 0, "zero shards is read as one");
    }

    #[test]
    fn a_grant_follows_its_message_and_an_ack_batch_goes_everywhere() {
        let grant = emit(
            10,
            Body::Grant {
                offset: 1,
                priority: 0,
            },
            0,
        );
        assert_eq!(route(&grant, 2), Route::One(shard_of(10, 2)));
        let mut ids = AckIds::new();
        ids.push(4);
        ids.push(6);
        let ack = route(&emit(0, Body::Ack(ids), 0), 2);
        assert_eq!(ack, Route::All { session: false });
        let update = route(&emit(0, Body::KeyUpdate, 0), 2);
        assert_eq!(update, Route::All { session: true });
    }

    #[test]
    fn garbage_goes_to_shard_zero_to_be_counted() {
        assert_eq!(route(&[0xff; 5], 4), Route::One(0));
        assert_eq!(route(&[], 4), Route::One(0));
    }

    #[test]
    fn a_coalesced_datagram_splits_into_its_packets() {
        // Two untagged control packets back to back, then junk.
        let a = emit(4, Body::Busy, 0);
        let b = emit(6, Body::RpcUnknown, 0);
        let datagram = [a.clone(), b.clone(), vec![1, 2, 3]].concat();
        let parts: Vec<&[u8]> = packets(&datagram, false).collect();
        assert_eq!(parts, [&a[..], &b[..], &[1, 2, 3][..]]);
        assert_eq!(packets(&[], false).count(), 0);
    }
}
