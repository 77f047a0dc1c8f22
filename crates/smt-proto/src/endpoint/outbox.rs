//! What leaves the endpoint and waits for the driver: control packets
//! waiting for a datagram, ACK batches waiting for their delay, datagrams
//! built ahead, and events for the application. `poll_transmit` and
//! `poll_event` drain it; the rest of the endpoint only appends.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;

use super::Event;
use crate::wire::{AckIds, Body, Repr};

#[derive(Debug, Default)]
pub(crate) struct Outbox {
    /// Control packets in sending order, each with its peer and key epoch
    /// (KEY_UPDATE goes to the front: `Endpoint::queue_control`).
    control: VecDeque<(SocketAddr, u64, Repr)>,
    /// ACK batches by (peer, epoch), until `Timer::AckDelay`, the next
    /// request to the peer once 16 IDs are pending, or a 17th ID; an
    /// entry stays while its peer keeps completing RPCs.
    pending_acks: BTreeMap<(SocketAddr, u64), AckIds>,
    /// How many of `pending_acks` are full (waiting for a request).
    full_batches: usize,
    /// Datagrams built ahead (a failed handshake's alert, a stateless
    /// RETRY), sent before anything else.
    prebuilt: VecDeque<(SocketAddr, Vec<u8>)>,
    /// Events for the application, in order.
    events: VecDeque<Event>,
}

impl Outbox {
    /// Queues a control packet for `peer` under key epoch `epoch`, sent
    /// from `local_port`. KEY_UPDATE goes first: an announcement must
    /// precede every packet of its epoch (the peer cannot check their MACs
    /// before it), and a datagram holds one epoch, so it starts the next
    /// datagram.
    pub(super) fn queue_control(
        &mut self,
        local_port: u16,
        peer: SocketAddr,
        epoch: u64,
        id: u64,
        body: Body,
    ) {
        let repr = Repr {
            src_port: local_port,
            dst_port: peer.port(),
            key_phase: epoch & 1 == 1,
            id,
            body,
        };
        match repr.body {
            Body::KeyUpdate => self.control.push_front((peer, epoch, repr)),
            _ => self.control.push_back((peer, epoch, repr)),
        }
    }

    /// Drops the ACK batches pending for `peer` (its session ends): its
    /// entries only, found by range (the map is ordered by peer first).
    pub(super) fn forget_acks(&mut self, peer: SocketAddr) {
        while let Some((&key, _)) = self.pending_acks.range((peer, 0)..=(peer, u64::MAX)).next() {
            if self
                .pending_acks
                .remove(&key)
                .is_some_and(|ids| ids.is_full())
            {
                self.full_batches -= 1;
            }
        }
    }

    /// Queues an event for the application.
    #[inline]
    pub(super) fn push_event(&mut self, event: Event) {
        self.events.push_back(event);
    }

    /// The oldest event not yet taken.
    #[inline]
    pub(super) fn pop_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Queues a datagram built ahead for `to`.
    #[inline]
    pub(super) fn push_prebuilt(&mut self, to: SocketAddr, bytes: Vec<u8>) {
        self.prebuilt.push_back((to, bytes));
    }

    /// Datagrams built ahead and not yet sent.
    #[inline]
    pub(super) fn prebuilt_len(&self) -> usize {
        self.prebuilt.len()
    }

    /// The oldest datagram built ahead.
    #[inline]
    pub(super) fn pop_prebuilt(&mut self) -> Option<(SocketAddr, Vec<u8>)> {
        self.prebuilt.pop_front()
    }

    /// The next control packet's peer and key epoch, and the packet.
    #[inline]
    pub(super) fn next_control(&self) -> Option<(SocketAddr, u64, &Repr)> {
        self.control.front().map(|(p, e, r)| (*p, *e, r))
    }

    /// Takes the next control packet.
    #[inline]
    pub(super) fn pop_control(&mut self) -> Option<(SocketAddr, u64, Repr)> {
        self.control.pop_front()
    }

    /// Adds `id` to the ACK batch of (`peer`, `epoch`). A batch that is
    /// full waits for the next request to that peer, whose datagram it
    /// joins ([`Outbox::take_full_acks`]), or for the ACK delay; an ID that
    /// finds its batch full returns that batch, to be sent at once.
    #[inline]
    pub(super) fn add_ack(&mut self, peer: SocketAddr, epoch: u64, id: u64) -> Option<AckIds> {
        // The last batch first: with one busy peer it is the only one, and
        // one key compare costs less than a search (address compares).
        let ids = match self.pending_acks.last_entry() {
            Some(last) if *last.key() == (peer, epoch) => last.into_mut(),
            _ => self.pending_acks.entry((peer, epoch)).or_default(),
        };
        let sent = ids.is_full().then(|| std::mem::take(ids));
        ids.push(id);
        if ids.is_full() {
            self.full_batches += 1;
        } else if sent.is_some() {
            self.full_batches -= 1;
        }
        sent
    }

    /// The ACK batch of (`peer`, `epoch`) if it is full: a request to that
    /// peer is about to leave, and the batch rides in its datagram (no
    /// datagram and no wake-up of its own for the peer). No search while
    /// no batch is full.
    #[inline]
    pub(super) fn take_full_acks(&mut self, peer: SocketAddr, epoch: u64) -> Option<AckIds> {
        if self.full_batches == 0 {
            return None;
        }
        let ids = self.pending_acks.get_mut(&(peer, epoch))?;
        if !ids.is_full() {
            return None;
        }
        self.full_batches -= 1;
        Some(std::mem::take(ids))
    }

    /// Queues every pending ACK batch, sent from `local_port`. An entry
    /// stays (emptied) while its peer and epoch keep completing RPCs, so a
    /// steady stream does not allocate a map node per batch; entries with
    /// nothing to send since the last batch are removed.
    pub(super) fn send_acks(&mut self, local_port: u16) {
        let mut pending = std::mem::take(&mut self.pending_acks);
        pending.retain(|_, ids| !ids.is_empty());
        self.full_batches = 0;
        for (&(peer, epoch), ids) in pending.iter_mut() {
            let ids = std::mem::take(ids);
            self.queue_control(local_port, peer, epoch, 0, Body::Ack(ids));
        }
        self.pending_acks = pending;
    }
}
