//! The protocol core's events (`smt_proto::trace`) as lines of the
//! schema: what the writer does with each [`Traced`].

use std::net::SocketAddr;

use smt_proto::trace::{MessageKind, PacketSummary, Traced};
use smt_proto::wire::Body;

use super::schema::{Event, Line, MessageId, MessageRef, Packet, Role};

impl Line {
    /// The line of one event of the endpoint at `local`, at wall-clock
    /// `t` (seconds), `us` on the endpoint's clock and tick `tick`.
    pub(crate) fn of(t: f64, us: i64, tick: u64, local: SocketAddr, what: &Traced) -> Self {
        Self {
            t,
            us,
            tick,
            ep: Some(local),
            event: Event::of(what),
        }
    }
}

fn msg(peer: &SocketAddr, epoch: &u64, id: &u64) -> MessageRef {
    MessageRef {
        peer: *peer,
        epoch: *epoch,
        id: MessageId(*id),
    }
}

fn role(kind: &MessageKind) -> Role {
    match kind {
        MessageKind::Request => Role::Request,
        MessageKind::Response => Role::Response,
    }
}

impl Event {
    /// A decision table on the event's kind.
    fn of(what: &Traced) -> Self {
        match what {
            Traced::Sent { peer, packet } => Self::Sent(Packet::of(*peer, packet)),
            Traced::Received { peer, packet } => Self::Received(Packet::of(*peer, packet)),
            Traced::Dropped { peer, reason } => Self::Dropped {
                peer: *peer,
                reason: reason.name().into(),
            },
            Traced::Sealed {
                peer,
                epoch,
                id,
                kind,
                len,
                wire_len,
                records,
            } => Self::Sealed {
                msg: msg(peer, epoch, id),
                message: role(kind),
                length: *len,
                wire_len: *wire_len,
                records: *records,
            },
            Traced::Opened {
                peer,
                epoch,
                id,
                records,
            } => Self::Opened {
                msg: msg(peer, epoch, id),
                records: *records,
            },
            Traced::OpenFailed {
                peer,
                epoch,
                id,
                reason,
            } => Self::OpenFailed {
                msg: msg(peer, epoch, id),
                reason: reason.name().into(),
            },
            Traced::Delivered {
                peer,
                epoch,
                id,
                kind,
                len,
                rpc,
            } => Self::Delivered {
                msg: msg(peer, epoch, id),
                message: role(kind),
                length: *len,
                rpc: rpc.map(|r| r.0),
            },
            Traced::RpcStarted {
                rpc,
                peer,
                epoch,
                id,
                len,
            } => Self::RpcStarted {
                rpc: rpc.0,
                msg: msg(peer, epoch, id),
                length: *len,
            },
            Traced::RpcRestarted {
                rpc,
                peer,
                old_epoch,
                old_id,
                epoch,
                id,
            } => Self::RpcRestarted {
                rpc: rpc.0,
                msg: msg(peer, epoch, id),
                old_epoch: *old_epoch,
                old_id: MessageId(*old_id),
            },
            Traced::RpcFailed {
                rpc,
                peer,
                epoch,
                id,
                error,
            } => Self::RpcFailed {
                rpc: rpc.0,
                msg: msg(peer, epoch, id),
                reason: error.name().into(),
            },
            Traced::RpcAborted {
                rpc,
                peer,
                epoch,
                id,
            } => Self::RpcAborted {
                rpc: rpc.0,
                msg: msg(peer, epoch, id),
            },
            Traced::ServerFreed {
                peer,
                epoch,
                id,
                reason,
            } => Self::ServerFreed {
                msg: msg(peer, epoch, id),
                reason: reason.name().into(),
            },
            Traced::HandshakeStarted { peer, kind } => Self::HandshakeStarted {
                peer: *peer,
                kind: kind.0,
            },
            Traced::HandshakeDone { peer } => Self::HandshakeDone { peer: *peer },
            Traced::HandshakeFailed { peer, error } => Self::HandshakeFailed {
                peer: *peer,
                error: error.to_string(),
            },
            Traced::Rekeyed {
                peer,
                epoch,
                by_peer,
            } => Self::Rekeyed {
                peer: *peer,
                epoch: *epoch,
                by_peer: *by_peer,
            },
            Traced::Lost { count } => Self::Lost { count: *count },
            // A kind of event this version does not know how to write.
            _ => Self::Unknown,
        }
    }
}

impl Packet {
    /// A packet's fields: those of its type when its header parses.
    fn of(peer: SocketAddr, p: &PacketSummary) -> Self {
        let base = Self::new(
            peer,
            MessageId(p.id),
            p.ty,
            u8::from(p.key_phase),
            p.len as u64,
        );
        let Some(repr) = p.repr else {
            return Self {
                malformed: true,
                ..base
            };
        };
        match repr.body {
            Body::Data(h) => Self {
                offset: Some(h.wire_offset()),
                length: Some(h.payload_len() as u64),
                retransmit: Some(h.retransmit),
                pkt: Some(h.packet_index),
                msg_len: Some(h.message_len),
                wire_len: Some(u64::from(h.message_wire_len)),
                seg_offset: Some(h.segment_offset),
                seg_len: Some(h.segment_len),
                incoming: Some(h.incoming),
                ..base
            },
            Body::Grant { offset, priority } => Self {
                offset: Some(u64::from(offset)),
                priority: Some(priority),
                ..base
            },
            Body::Resend {
                offset,
                length,
                priority,
            } => Self {
                offset: Some(u64::from(offset)),
                length: Some(u64::from(length)),
                priority: Some(priority),
                ..base
            },
            Body::Ack(ids) => Self {
                ids: Some(ids.as_slice().iter().map(|&i| MessageId(i)).collect()),
                ..base
            },
            Body::Handshake {
                offset,
                ack,
                len,
                kind,
                flags,
            } => Self {
                offset: Some(u64::from(offset)),
                ack: Some(ack),
                length: Some(u64::from(len)),
                kind: Some(kind.0),
                flags: Some(flags),
                ..base
            },
            _ => base,
        }
    }
}
