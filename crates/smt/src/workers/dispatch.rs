//! The dispatcher: the one thread that reads the socket (`recvmmsg`, GRO),
//! splits each datagram into its packets and hands each packet to the
//! shard that owns its message ID (`route`). It opens nothing and keeps no
//! protocol state: routing reads the plaintext header only.
//!
//! A shard that falls behind does not stall the others: its inbox is
//! bounded, and a batch that finds it full is dropped and counted, as a
//! full socket receive queue would drop it (the protocol asks again).

use std::io;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use smt_udp::{RecvBuffers, Socket};

use super::inbox::{Batch, Bell, ToShard};
use super::route::{packets, route, Route};
use crate::wait::{wait, WakeFd};

/// Dispatcher counters, shared with the server handle.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    datagrams: AtomicU64,
    packets: AtomicU64,
    broadcast: AtomicU64,
    dropped: AtomicU64,
}

/// What the dispatcher did, read with [`super::WorkerServer::dispatch_stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DispatchStats {
    /// Datagrams read from the socket (GRO buffers count as the datagrams
    /// they hold).
    pub datagrams: u64,
    /// Packets routed (a coalesced datagram holds several).
    pub packets: u64,
    /// Packets sent to every shard (ACK batches, KEY_UPDATE).
    pub broadcast: u64,
    /// Packets dropped because their shard's inbox was full.
    pub dropped_inbox_full: u64,
}

impl Counters {
    pub(super) fn snapshot(&self) -> DispatchStats {
        DispatchStats {
            datagrams: self.datagrams.load(Ordering::Relaxed),
            packets: self.packets.load(Ordering::Relaxed),
            broadcast: self.broadcast.load(Ordering::Relaxed),
            dropped_inbox_full: self.dropped.load(Ordering::Relaxed),
        }
    }
}

pub(crate) struct Dispatcher {
    pub socket: Arc<Socket>,
    pub shards: Vec<flume::Sender<ToShard>>,
    /// Each shard's bell, rung after a batch if it sleeps.
    pub bells: Vec<Arc<Bell>>,
    /// Batches the shards have handled, for reuse.
    pub spare: flume::Receiver<Batch>,
    /// Whether control packets carry a MAC (to find packet lengths).
    pub tagged_control: bool,
    pub closing: Arc<AtomicBool>,
    /// Rung by the server handle once `closing` is set (and for its
    /// commands): the dispatcher sleeps on it with the socket, with no
    /// timeout, which armed a kernel timer per sleep.
    pub wake: Arc<WakeFd>,
    pub counters: Arc<Counters>,
}

/// ICMP reports read per turn at most.
const ERRORS_PER_TURN: usize = 256;

impl Dispatcher {
    /// Reads and routes until the server closes.
    pub(super) fn run(self) {
        let mut recv = RecvBuffers::new(self.socket.features());
        let mut filling: Vec<Batch> = self.shards.iter().map(|_| Batch::default()).collect();
        while !self.closing.load(Ordering::Relaxed) {
            match self.socket.recv(&mut recv) {
                Ok(_) => {
                    self.route_all(&recv, &mut filling);
                    self.hand_over(&mut filling);
                    if !recv.was_full() {
                        // Drained: sleep now, without the empty receive
                        // that would say so (one system call per request
                        // on an idle server).
                        self.sleep();
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.sleep(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::debug!("worker socket receive error: {e}");
                    self.drain_errors();
                }
            }
        }
    }

    /// Sleeps until the socket is readable or the server handle rings
    /// (the close, a command).
    fn sleep(&self) {
        let ready = wait(self.socket.as_fd(), false, Some(self.wake.fd()), None);
        let ready = ready.unwrap_or_default();
        if ready.woken {
            self.wake.drain();
        }
        if ready.failed {
            // Reports a shard's send took the signal of.
            self.drain_errors();
        }
    }

    /// Sorts one receive call's packets into the shards' batches.
    fn route_all(&self, recv: &RecvBuffers, filling: &mut [Batch]) {
        let n = filling.len();
        let (mut datagrams, mut routed, mut broadcast) = (0, 0, 0);
        for (from, datagram) in recv.iter() {
            datagrams += 1;
            for packet in packets(datagram, self.tagged_control) {
                routed += 1;
                match route(packet, n) {
                    Route::One(i) => filling[i].push(from, packet),
                    Route::All { session } => {
                        broadcast += 1;
                        for b in filling.iter_mut() {
                            b.push(from, packet);
                            b.essential |= session;
                        }
                    }
                }
            }
        }
        let c = &self.counters;
        c.datagrams.fetch_add(datagrams, Ordering::Relaxed);
        c.packets.fetch_add(routed, Ordering::Relaxed);
        c.broadcast.fetch_add(broadcast, Ordering::Relaxed);
    }

    /// Sends every non-empty batch to its shard and takes a spare one (or
    /// a new one) in its place.
    fn hand_over(&self, filling: &mut [Batch]) {
        for (i, slot) in filling.iter_mut().enumerate() {
            if slot.is_empty() {
                continue;
            }
            let next = self.spare.try_recv().unwrap_or_default();
            let batch = std::mem::replace(slot, next);
            if batch.essential {
                // Rare (a key update); waiting a moment beats a shard left
                // in the old epoch.
                let _ = self.shards[i].send(ToShard::Packets(batch));
                self.bells[i].ring_if_asleep();
                continue;
            }
            match self.shards[i].try_send(ToShard::Packets(batch)) {
                Ok(()) => self.bells[i].ring_if_asleep(),
                Err(e) => self.count_dropped(i, slot, e),
            }
        }
    }

    /// A batch that found shard `i`'s inbox full: its packets counted as
    /// dropped, its storage kept in `slot` for the next one.
    fn count_dropped(&self, i: usize, slot: &mut Batch, e: flume::TrySendError<ToShard>) {
        let ToShard::Packets(mut batch) = e.into_inner() else {
            return;
        };
        let count = batch.len() as u64;
        self.counters.dropped.fetch_add(count, Ordering::Relaxed);
        tracing::debug!(shard = i, "shard inbox full: {count} packets dropped");
        batch.clear();
        *slot = batch;
    }

    /// ICMP errors for datagrams the shards sent wait in the socket's
    /// error queue (a receive failed with one, or the socket polled as
    /// failed). A server has no calls to fail, so they are read (they take
    /// room from the receive buffer, and the socket polls as failed until
    /// they are) and logged; at most a batch per call, the rest at the next
    /// turn (the socket still polls as failed).
    fn drain_errors(&self) {
        for _ in 0..ERRORS_PER_TURN {
            match self.socket.take_error() {
                Ok(Some((peer, error))) => tracing::debug!(%peer, "unreachable: {error}"),
                _ => return,
            }
        }
    }
}
