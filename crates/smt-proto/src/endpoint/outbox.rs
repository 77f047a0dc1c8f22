//! What leaves the endpoint and waits for the driver: control packets
//! waiting for a datagram, ACK batches waiting for their delay, datagrams
//! built ahead, and events for the application. `poll_transmit` and
//! `poll_event` drain it; the rest of the endpoint only appends.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;

use super::Event;
use crate::wire::{AckIds, Repr};

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
