//! Opt-in event trace: what the endpoint did, when, for which message.
//!
//! With tracing on ([`Endpoint::set_tracing`](crate::Endpoint::set_tracing)),
//! the endpoint queues a [`TraceEvent`] for every packet it sends and
//! receives (header fields as parsed), every packet it drops (with the
//! reason), every message it seals or delivers, records opened or failing
//! to open, RPCs started, restarted, failed, aborted or freed, handshakes
//! started, finished or failed, and key epochs changed. The driver drains
//! the queue with [`Endpoint::poll_trace`](crate::Endpoint::poll_trace)
//! and writes it out (the `smt` crate writes JSON lines; `smt dump
//! --trace` turns them into per-RPC timelines; `docs/observability.md`).
//!
//! Each event carries the `now` of the call that caused it (calls without
//! a `now`, such as [`Endpoint::abort`](crate::Endpoint::abort), use the
//! last one seen) and the endpoint's tick count. With tracing off (the
//! default) the cost is one branch per call and per packet.
//!
//! The queue holds at most [`DEFAULT_TRACE_CAPACITY`] events: a driver that
//! does not drain it loses the newest, and the next event that fits is
//! preceded by [`Traced::Lost`] with their count.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

use crate::crypto::TAG_LEN;
use crate::error::{DropReason, RpcError};
use crate::handshake::HandshakeError;
use crate::wire::{Packet, PacketType, Repr};
use crate::RpcHandle;

/// Events queued at most when nobody drains them.
pub const DEFAULT_TRACE_CAPACITY: usize = 65_536;

/// One thing the endpoint did.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceEvent {
    /// The `now` of the call during which it happened.
    pub at: Instant,
    /// Ticks the endpoint had counted then ([`crate::Config::tick`]).
    pub tick: u64,
    /// What happened.
    pub what: Traced,
}

/// A packet as the trace shows it: its length, type, and its header
/// fields when it parses ([`Repr`]; `None` for a packet a receiver drops
/// as malformed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketSummary {
    /// Bytes of the packet in its datagram, with its MAC.
    pub len: usize,
    /// The type byte.
    pub ty: PacketType,
    /// The message ID.
    pub id: u64,
    /// The header's key phase bit.
    pub key_phase: bool,
    /// The header's fields, if the packet parses.
    pub repr: Option<Repr>,
}

impl PacketSummary {
    /// Reads the header of one packet (a datagram's coalesced packets are
    /// split first: [`crate::wire::first_packet_len`]). `tagged_control`:
    /// control packets end with a MAC (`Config::authenticate_control`;
    /// KEY_UPDATE always does, HANDSHAKE never).
    pub fn of(packet: &[u8], tagged_control: bool) -> Self {
        let Ok(p) = Packet::new_checked(packet) else {
            return Self {
                len: packet.len(),
                ty: PacketType(packet.get(13).copied().unwrap_or(0)),
                id: 0,
                key_phase: false,
                repr: None,
            };
        };
        let ty = p.packet_type();
        let tagged = ty == PacketType::KEY_UPDATE
            || (tagged_control && ty.is_control() && ty != PacketType::HANDSHAKE);
        let body = match tagged {
            true => &packet[..packet.len().saturating_sub(TAG_LEN)],
            false => packet,
        };
        let repr = Packet::new_checked(body)
            .ok()
            .and_then(|b| Repr::parse(&b).ok());
        Self {
            len: packet.len(),
            ty,
            id: p.id(),
            key_phase: p.key_phase(),
            repr,
        }
    }
}

/// Which message of an RPC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageKind {
    /// The request.
    Request,
    /// The response.
    Response,
}

impl MessageKind {
    /// Its name in the JSON-lines trace.
    pub fn name(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::Response => "response",
        }
    }
}

/// Why a server RPC's state was freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FreeReason {
    /// The client acknowledged the response.
    Acked,
    /// The client said RPC_UNKNOWN (it gave up on the RPC).
    ClientGone,
    /// Silent for `Config::abort_ticks` (or `handshake_abort_ticks` while
    /// nothing of the request authenticated).
    Timeout,
    /// The application will not answer ([`crate::Endpoint::abandon_request`]).
    Abandoned,
    /// Refused unexecuted: too many requests wait for the application.
    Overloaded,
}

impl FreeReason {
    /// Its name in the JSON-lines trace.
    pub fn name(self) -> &'static str {
        match self {
            Self::Acked => "acked",
            Self::ClientGone => "client_gone",
            Self::Timeout => "timeout",
            Self::Abandoned => "abandoned",
            Self::Overloaded => "overloaded",
        }
    }
}

/// What happened. Messages are named as on the wire: peer, key epoch and
/// message ID; client RPCs also by their [`RpcHandle`], which survives a
/// restart under a new ID.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Traced {
    /// A packet left in a datagram to `peer` (`poll_transmit`).
    Sent {
        /// The peer's address.
        peer: SocketAddr,
        /// The packet's header.
        packet: PacketSummary,
    },
    /// A packet arrived from `peer`, before it is handled.
    Received {
        /// The peer's address.
        peer: SocketAddr,
        /// The packet's header.
        packet: PacketSummary,
    },
    /// The packet received last was dropped.
    Dropped {
        /// The peer's address.
        peer: SocketAddr,
        /// Why.
        reason: DropReason,
    },
    /// A message was framed into records: sealed now if it is at most
    /// 64 KiB, else record by record as its packets leave.
    Sealed {
        /// The peer's address.
        peer: SocketAddr,
        /// The session's key epoch.
        epoch: u64,
        /// The message ID.
        id: u64,
        /// Request or response.
        kind: MessageKind,
        /// Application bytes.
        len: u64,
        /// Bytes of its records on the wire.
        wire_len: u64,
        /// Records it was framed into.
        records: u64,
    },
    /// Records of an incoming message authenticated and opened.
    Opened {
        /// The peer's address.
        peer: SocketAddr,
        /// The session's key epoch.
        epoch: u64,
        /// The message ID.
        id: u64,
        /// Records opened.
        records: u64,
    },
    /// A segment of an incoming message failed to open (its bytes are
    /// forgotten; a retransmitted copy may still complete it).
    OpenFailed {
        /// The peer's address.
        peer: SocketAddr,
        /// The session's key epoch.
        epoch: u64,
        /// The message ID.
        id: u64,
        /// Why.
        reason: DropReason,
    },
    /// A complete, authenticated message went to the application.
    Delivered {
        /// The peer's address.
        peer: SocketAddr,
        /// The session's key epoch.
        epoch: u64,
        /// The message ID.
        id: u64,
        /// Request or response.
        kind: MessageKind,
        /// Application bytes.
        len: u64,
        /// The client RPC, for a response this side asked for.
        rpc: Option<RpcHandle>,
    },
    /// The application started an RPC.
    RpcStarted {
        /// The client RPC.
        rpc: RpcHandle,
        /// The peer's address.
        peer: SocketAddr,
        /// The session's key epoch.
        epoch: u64,
        /// The message ID.
        id: u64,
        /// Application bytes.
        len: u64,
    },
    /// The server lost the request: it is sent again under a fresh ID.
    RpcRestarted {
        /// The client RPC.
        rpc: RpcHandle,
        /// The peer's address.
        peer: SocketAddr,
        /// The key epoch of the lost request.
        old_epoch: u64,
        /// The lost request's ID.
        old_id: u64,
        /// The key epoch of the new request.
        epoch: u64,
        /// The new request's ID.
        id: u64,
    },
    /// A client RPC failed (timeout, the server's refusal, ...).
    RpcFailed {
        /// The client RPC.
        rpc: RpcHandle,
        /// The peer's address.
        peer: SocketAddr,
        /// The session's key epoch.
        epoch: u64,
        /// The message ID.
        id: u64,
        /// Why it failed.
        error: RpcError,
    },
    /// The application gave up on a client RPC (cancelled, past its
    /// deadline); the server is told with RPC_UNKNOWN.
    RpcAborted {
        /// The client RPC.
        rpc: RpcHandle,
        /// The peer's address.
        peer: SocketAddr,
        /// The session's key epoch.
        epoch: u64,
        /// The message ID.
        id: u64,
    },
    /// A server RPC's state was freed.
    ServerFreed {
        /// The peer's address.
        peer: SocketAddr,
        /// The session's key epoch.
        epoch: u64,
        /// The message ID.
        id: u64,
        /// Why.
        reason: FreeReason,
    },
    /// This side started a handshake of `kind`.
    HandshakeStarted {
        /// The peer's address.
        peer: SocketAddr,
        /// Which handshake.
        kind: crate::wire::HandshakeKind,
    },
    /// A handshake installed the session's keys.
    HandshakeDone {
        /// The peer's address.
        peer: SocketAddr,
    },
    /// A handshake with `peer` failed; no session was installed.
    HandshakeFailed {
        /// The peer's address.
        peer: SocketAddr,
        /// Why it failed.
        error: HandshakeError,
    },
    /// The session with `peer` moved to key epoch `epoch` (`by_peer`: on
    /// its KEY_UPDATE, else our own rekey).
    Rekeyed {
        /// The peer's address.
        peer: SocketAddr,
        /// The session's key epoch.
        epoch: u64,
        /// Moved on the peer's KEY_UPDATE (else by our own rekey).
        by_peer: bool,
    },
    /// Events the full queue could not take.
    Lost {
        /// Events lost.
        count: u64,
    },
}

/// The queue of events, with the clock of the last call.
#[derive(Debug)]
pub(crate) struct Tracer {
    events: VecDeque<TraceEvent>,
    capacity: usize,
    lost: u64,
    now: Option<Instant>,
}

impl Tracer {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            events: VecDeque::new(),
            capacity: capacity.max(2),
            lost: 0,
            now: None,
        }
    }

    /// Events queued at most.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// The call in progress carries `now`.
    pub(crate) fn set_now(&mut self, now: Instant) {
        self.now = Some(now);
    }

    /// Queues `what`, unless the queue is full (then it is counted lost).
    /// Nothing is queued before the first call with a `now`.
    pub(crate) fn push(&mut self, tick: u64, what: Traced) {
        let Some(at) = self.now else {
            self.lost += 1;
            return;
        };
        let room = self.capacity - self.events.len();
        if room < 1 + usize::from(self.lost > 0) {
            self.lost += 1;
            return;
        }
        if self.lost > 0 {
            let count = std::mem::take(&mut self.lost);
            let what = Traced::Lost { count };
            self.events.push_back(TraceEvent { at, tick, what });
        }
        self.events.push_back(TraceEvent { at, tick, what });
    }

    pub(crate) fn pop(&mut self) -> Option<TraceEvent> {
        self.events.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Body;

    #[test]
    fn a_full_queue_counts_what_it_loses_and_says_so_first() {
        let mut t = Tracer::new(3);
        let peer: SocketAddr = "10.0.0.1:1".parse().unwrap();
        let what = |epoch| Traced::Rekeyed {
            peer,
            epoch,
            by_peer: false,
        };
        t.push(0, what(0));
        assert_eq!(t.pop(), None, "nothing before the first now: lost");
        #[allow(clippy::disallowed_methods)]
        t.set_now(Instant::now());
        for epoch in 1..=5 {
            t.push(0, what(epoch));
        }
        let got: Vec<Traced> = std::iter::from_fn(|| t.pop()).map(|e| e.what).collect();
        assert_eq!(got, [Traced::Lost { count: 1 }, what(1), what(2)]);
        t.push(0, what(6));
        let got: Vec<Traced> = std::iter::from_fn(|| t.pop()).map(|e| e.what).collect();
        assert_eq!(got, [Traced::Lost { count: 3 }, what(6)]);
        assert_eq!(t.capacity(), 3);
    }

    #[test]
    fn a_summary_reads_control_packets_without_their_mac_and_survives_garbage() {
        let repr = Repr {
            src_port: 1,
            dst_port: 2,
            key_phase: true,
            id: 6,
            body: Body::Resend {
                offset: 1428,
                length: 1428,
                priority: 0,
            },
        };
        let mut bytes = vec![0xee; repr.buffer_len() + TAG_LEN];
        repr.emit(&mut Packet::new_unchecked(&mut bytes[..repr.buffer_len()]));
        let s = PacketSummary::of(&bytes, true);
        assert_eq!((s.ty, s.id, s.key_phase), (PacketType::RESEND, 6, true));
        assert_eq!(s.repr, Some(repr));
        assert_eq!(s.len, bytes.len());
        for len in 0..bytes.len() {
            let _ = PacketSummary::of(&bytes[..len], true);
        }
        assert_eq!(PacketSummary::of(&[0; 3], true).repr, None);
        let hello = Repr {
            body: Body::Handshake {
                offset: 0,
                ack: 0,
                len: 3,
                kind: crate::HandshakeKind::PSK_NONCE,
                flags: 0,
            },
            id: 0,
            key_phase: false,
            ..repr
        };
        let mut bytes = vec![7; hello.buffer_len() + 3];
        hello.emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(PacketSummary::of(&bytes, true).repr, Some(hello), "no MAC");
    }
}
