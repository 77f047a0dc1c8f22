//! What reaches a shard: packets the dispatcher routed to it, and the
//! commands the [`super::WorkerServer`] handle sends to every shard. One
//! FIFO channel carries both, so a session installed before its peer's
//! first packet was read is in place when that packet arrives.

use std::net::SocketAddr;
use std::ops::Range;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::Arc;

use smt_proto::{KeyResolver, SessionKeys};

use crate::wait::WakeFd;
use crate::Error;

/// How a routed shard is woken: it sleeps on a wake-up descriptor and its
/// alarm (see `crate::wait::Alarm`) instead of on the channel, whose
/// blocking receive with a deadline armed a kernel timer at every sleep.
/// The dispatcher rings only a shard that says it sleeps: a busy shard
/// finds the next batch on the channel without a system call on either
/// side.
#[derive(Debug)]
pub(crate) struct Bell {
    wake: Arc<WakeFd>,
    asleep: AtomicBool,
}

impl Bell {
    /// `wake` is also rung by the server handle (commands, close).
    pub(super) fn new(wake: Arc<WakeFd>) -> Self {
        Self {
            wake,
            asleep: AtomicBool::new(false),
        }
    }

    /// Rings if the shard sleeps or is about to. Called after the message
    /// is on the channel: with the fence in [`Bell::going_to_sleep`],
    /// either this sees the flag or the shard sees the message.
    pub(super) fn ring_if_asleep(&self) {
        fence(Ordering::SeqCst);
        if self.asleep.load(Ordering::Relaxed) {
            self.wake.wake();
        }
    }

    /// The shard is about to look at its channel a last time and sleep.
    pub(super) fn going_to_sleep(&self) {
        self.asleep.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// The shard is awake again (or did not sleep).
    pub(super) fn awake(&self) {
        self.asleep.store(false, Ordering::Relaxed);
    }

    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        self.wake.fd()
    }

    pub(super) fn drain(&self) {
        self.wake.drain();
    }
}

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

    /// Whether `bell` rang, without sleeping.
    fn rang(bell: &Bell) -> bool {
        let ready = crate::wait::wait_for_wake(bell.fd(), None, Some(std::time::Duration::ZERO));
        ready.unwrap().woken
    }

    #[test]
    fn a_bell_rings_only_for_a_shard_that_sleeps() {
        let bell = Bell::new(Arc::new(WakeFd::new().unwrap()));
        bell.ring_if_asleep();
        assert!(!rang(&bell), "an awake shard finds the batch itself");
        bell.going_to_sleep();
        bell.ring_if_asleep();
        assert!(rang(&bell));
        bell.drain();
        bell.awake();
        assert!(!rang(&bell), "taken, and awake again");
    }

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
