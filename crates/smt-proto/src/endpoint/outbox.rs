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
    pub control: VecDeque<(SocketAddr, u64, Repr)>,
    /// ACK batches by (peer, epoch), until `Timer::AckDelay` or 16 IDs; an
    /// entry stays while its peer keeps completing RPCs.
    pub pending_acks: BTreeMap<(SocketAddr, u64), AckIds>,
    /// Datagrams built ahead (a failed handshake's alert, a stateless
    /// RETRY), sent before anything else.
    pub prebuilt: VecDeque<(SocketAddr, Vec<u8>)>,
    /// Events for the application, in order.
    pub events: VecDeque<Event>,
}

impl Outbox {
    /// Queues a control packet for `peer` under key epoch `epoch`, sent
    /// from `local_port`. KEY_UPDATE goes first: an announcement must
    /// precede every packet of its epoch (the peer cannot check their MACs
    /// before it), and a datagram holds one epoch, so it starts the next
    /// datagram.
    pub fn queue_control(
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
}
