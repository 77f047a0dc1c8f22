//! What reaches a shard: packets the dispatcher routed to it, and the
//! commands the [`super::WorkerServer`] handle sends to every shard. One
//! FIFO channel carries both, so a session installed before its peer's
//! first packet was read is in place when that packet arrives.

use std::net::SocketAddr;
use std::ops::Range;

use smt_proto::{KeyResolver, SessionKeys};

use crate::Error;

/// One message to a shard.
pub(crate) enum ToShard {
    /// Packets of one receive call that belong to this shard.
    Packets(Batch),
    /// Install `keys` for `peer`; the result goes back on the channel.
    Install(SocketAddr, SessionKeys, flume::Sender<Result<(), Error>>),
    /// Answer unknown peers with this resolver's keys.
    Resolver(Box<dyn KeyResolver>),
}

/// Packets for one shard, copied out of one receive call: one buffer and
/// the (source, range) of each packet in it. Batches go back to the
/// dispatcher once handled, so a steady stream allocates none.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    bytes: Vec<u8>,
    packets: Vec<(SocketAddr, Range<usize>)>,
    /// Holds a packet the shard must not miss (KEY_UPDATE): the
    /// dispatcher waits for room instead of dropping the batch.
    pub essential: bool,
}

impl Batch {
    /// Appends one packet from `from`.
    pub(super) fn push(&mut self, from: SocketAddr, packet: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(packet);
        self.packets.push((from, start..self.bytes.len()));
    }

    pub(super) fn len(&self) -> usize {
        self.packets.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }

    /// The packets, in arrival order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (SocketAddr, &[u8])> + Clone + '_ {
        // Ranges were cut from `bytes` by `push`: always in bounds.
        self.packets
            .iter()
            .map(|(from, r)| (*from, &self.bytes[r.clone()]))
    }

    /// Empties the batch, keeping its storage.
    pub(super) fn clear(&mut self) {
        self.bytes.clear();
        self.packets.clear();
        self.essential = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_gives_back_its_packets_in_order_and_clears_for_reuse() {
        let from: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let mut b = Batch::default();
        b.push(from, b"abc");
        b.push(from, b"");
        b.push(from, b"de");
        let got: Vec<&[u8]> = b.iter().map(|(_, p)| p).collect();
        assert_eq!(got, [&b"abc"[..], b"", b"de"]);
        b.clear();
        assert!(b.is_empty());
        assert!(b.bytes.capacity() >= 5, "storage kept");
    }
}
