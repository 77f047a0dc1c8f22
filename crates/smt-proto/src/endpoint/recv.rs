//! `handle_datagram`: parse, authenticate, route. Every rejection is a
//! counted [`DropReason`], never an error returned to the caller.
//!
//! Then the steps of the DATA path that need the scheduler or the NIC
//! (storing a packet, `store_and_open`) and the effects of a control
//! packet (`control::Then`, carried out by `send.rs`'s
//! `apply_control`). The decisions and the RPCs' own bookkeeping
//! are `RpcParts`'s: `recv/data.rs` (storing a packet), `recv/admit.rs`
//! (a new message admitted, a complete one delivered), `recv/first.rs`
//! (a new message made and its first packet stored), `recv/rpc.rs`
//! (complete and refused RPCs), `recv/end.rs`, `recv/control.rs`.
//! The order of calls for one DATA packet is in `docs/architecture.md`.

mod admit;
mod control;
mod data;
mod end;
mod first;
mod key_update;
mod packet;
mod rpc;

pub(super) use control::Then;
use data::{
    receiving_in, store_fast, store_in, store_parts, store_within_bounds, DataIn, Fast, Opened,
    StoreParts,
};
use first::New;

/// What storing a DATA packet leaves: its message if still being
/// received.
type Opening = Result<Option<MsgKey>, DropReason>;
use packet::{parse_data_header, parse_header, ports_match, starts_with_path};
pub(super) use rpc::RpcParts;
use rpc::Settled;
use std::net::SocketAddr;
use std::time::Instant;

use super::limits::Charge;
use super::peers::PeerId;
use super::{trace_event, Endpoint, MsgKey, ServerRpcHandle};
use crate::error::DropReason;
use crate::trace::{PacketSummary, Traced};
use crate::wire::{Body, DataHeader, Packet, PacketType, Packets, Split};

impl Endpoint {
    /// Processes one datagram received from `from`. Malformed, forged,
    /// replayed or unexpected input is dropped and counted in
    /// [`Endpoint::stats`]; it never panics and never fails the endpoint.
    ///
    /// A datagram may carry several packets back to back (coalesced, see
    /// [`crate::wire::Packets`]): each is split off by the length
    /// its header gives and handled on its own. Bytes whose length cannot
    /// be told are handled as one last packet, dropped with the reason its
    /// header earns; a packet dropped as malformed or forged ends the
    /// datagram ([`DropReason::ends_datagram`]).
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) {
        self.handle_datagram_each(now, from, datagram, |_| {});
        self.peers.forget_route();
    }

    /// Splits `datagram` into its packets and handles each, calling
    /// `before` ahead of each packet (receive offload sets the packet's
    /// mark there; otherwise it does nothing and compiles away). Inside a
    /// receive batch the route of the last DATA packet is kept for the
    /// next (`peers::LastRoute`); the caller forgets it when the batch ends.
    pub(crate) fn handle_datagram_each(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
        mut before: impl FnMut(&mut Self),
    ) {
        self.counters.stats.datagrams_rx += 1;
        self.counters.stats.bytes_rx += datagram.len() as u64;
        self.trace_now(now);
        if self.config.pathlet_feedback && starts_with_path(datagram) {
            return self.handle_datagram_with_path(now, from, datagram, before);
        }
        let mut packets = Packets::new(datagram, self.config.authenticate_control);
        let mut first = true;
        while let Some(packet) = packets.next_split() {
            if !std::mem::take(&mut first) {
                self.counters.stats.coalesced_packets_rx += 1;
            }
            before(self);
            if !self.handle_packet(now, from, packet) {
                return;
            }
        }
    }

    /// A datagram from `from` that starts with a PATH (`pathlet.rs`): the
    /// rest is handled as usual, and the PATH counted only if one of those
    /// packets was accepted under the peer's keys.
    fn handle_datagram_with_path(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
        mut before: impl FnMut(&mut Self),
    ) {
        let (path, rest) = match super::pathlet::split_path(datagram) {
            Ok(split) => split,
            Err(reason) => return self.drop_packet(from, reason),
        };
        let mut seen = super::pathlet::Believed::default();
        let mut packets = Packets::new(rest, true);
        while let Some(packet) = packets.next_split() {
            self.counters.stats.coalesced_packets_rx += 1;
            before(self);
            let drops = self.counters.stats.drops.total();
            let go_on = self.handle_packet(now, from, packet);
            if self.counters.stats.drops.total() == drops {
                seen.not_dropped(packet.bytes());
            }
            if !go_on {
                break;
            }
        }
        let len = datagram.len();
        super::pathlet::count_path(&mut self.pathlet_parts(), from, &path, len, seen);
    }

    /// One packet (the whole datagram, or one of its coalesced packets: a
    /// `Split`). Returns whether the packets after it may be handled.
    fn handle_packet(&mut self, now: Instant, from: SocketAddr, split: Split<'_>) -> bool {
        let packet = split.bytes();
        trace_event!(
            self,
            Traced::Received {
                peer: from,
                packet: PacketSummary::of(packet, self.config.authenticate_control),
            }
        );
        let Err(reason) = self.process(now, from, split) else {
            return true;
        };
        self.peers.forget_route();
        // New keys held for this address may take it (handshake.rs).
        if self.offer_to_held_keys(now, from, packet) {
            return true;
        }
        self.drop_packet(from, reason);
        !reason.ends_datagram()
    }

    fn process(
        &mut self,
        now: Instant,
        from: SocketAddr,
        split: Split<'_>,
    ) -> Result<(), DropReason> {
        let packet = Packet::new_checked(split.bytes()).map_err(|_| DropReason::Malformed)?;
        if let Some(result) = self.process_on_route(now, from, &packet, split.data_header()) {
            return result;
        }
        // Anything else may change what the route relied on (keys, epochs,
        // RPC states): it is forgotten, and set again by a stored DATA
        // packet.
        self.peers.forget_route();
        let ty = packet.packet_type();
        if ty.name().is_none() {
            return Err(DropReason::UnknownType);
        }
        // A PATH that is not the datagram's first packet (the first is
        // taken in `handle_datagram_each` with pathlet feedback on), and
        // PATH_ECHO with it off: dropped as unsupported (docs/protocol.md
        // § 4), which keeps the rest of the datagram.
        let pathlet = self.config.pathlet_feedback;
        if ty == PacketType::PATH || (ty == PacketType::PATH_ECHO && !pathlet) {
            return Err(DropReason::Unsupported);
        }
        if self.config.verify_ports && !ports_match(&packet, self.config.local_port, from) {
            return Err(DropReason::WrongPort);
        }
        if ty == PacketType::HANDSHAKE {
            let result = self.handshakes().on_packet(now, from, split.bytes());
            let result = result.map(|step| self.apply_handshake(now, step));
            self.arm_idle_sweep(now);
            return result;
        }
        self.process_from_peer(now, from, packet, split.data_header())
    }

    /// A packet of a session (any but HANDSHAKE): the peer found once,
    /// the packet checked against its keys, the header parsed once, then
    /// one match on what it carries. DATA takes the fast path with the
    /// peer found here: one peer and one RPC lookup per packet. (The
    /// receive key is taken from the peer where records are opened: an
    /// `Arc` clone here cost two atomic operations per packet.)
    #[inline(always)]
    fn process_from_peer(
        &mut self,
        now: Instant,
        from: SocketAddr,
        packet: Packet<&[u8]>,
        data: Option<&DataHeader>,
    ) -> Result<(), DropReason> {
        let datagram = packet.as_bytes();
        let Some(pid) = self.peer_for(from, datagram)? else {
            return Ok(());
        };
        let peer = self.peers.at_mut(pid).ok_or(DropReason::UnknownSession)?;
        peer.count_rx(datagram.len());
        let phase = packet.key_phase();
        if packet.packet_type() == PacketType::KEY_UPDATE {
            return (self.rpc_parts()).on_key_update(now, (pid, from), phase, datagram);
        }
        let tagged = self.config.authenticate_control;
        let (packet, epoch) = peer.check_packet(now, packet, datagram, tagged)?;
        if packet.packet_type() == PacketType::PATH_ECHO {
            return self.on_path_echo(now, pid, &packet);
        }
        if packet.packet_type() != PacketType::DATA {
            let repr = parse_header(&packet, self.config.seq_layout.id_limit())?;
            let local = peer.session.is_local_id(repr.id);
            let key = ServerRpcHandle::new(from, epoch, repr.id);
            return self.on_control(now, pid, key, local, repr.body);
        }
        let h = parse_data_header(&packet, data, self.config.seq_layout.id_limit())?;
        let (local, validated) = (peer.session.is_local_id(packet.id()), peer.validated());
        let key = ServerRpcHandle::new(from, epoch, packet.id());
        let d = DataIn::new(now, pid, key, &h, packet.payload());
        let opened_before = self.counters.stats.records_opened;
        let fast = store_fast(peer, &mut self.rpcs, store_parts!(self), d, local);
        let receiving = self.after_fast(d, fast, opened_before)?;
        if let Some(msg) = receiving.filter(|_| validated) {
            self.peers.remember_route(pid, phase, key, msg);
        }
        Ok(())
    }

    /// The slot of the peer at `from`: the packet's one address hash (from
    /// here on the peer is its slot, and keys, counters and liveness come
    /// from that one entry). `None`: no session yet, and the packet was
    /// kept for the handshake in progress.
    #[inline(always)]
    fn peer_for(
        &mut self,
        from: SocketAddr,
        datagram: &[u8],
    ) -> Result<Option<PeerId>, DropReason> {
        match self.peers.id(&from) {
            Some(pid) => Ok(Some(pid)),
            None if self.peers.stash_early(from, datagram) => Ok(None),
            None => self.resolve_session(from).map(Some),
        }
    }

    /// Finishes what the fast path began: a stored packet's outcome
    /// (`after_store`), or the new message it asked for, made and stored
    /// (`first.rs`).
    #[inline(always)]
    fn after_fast(
        &mut self,
        d: DataIn<'_>,
        fast: Fast,
        opened_before: u64,
    ) -> Result<Option<MsgKey>, DropReason> {
        let new = match fast {
            Fast::Stored(msg, outcome) => return self.after_store(d, msg, outcome, opened_before),
            Fast::NewRequest => New::Request,
            Fast::NewResponse(handle) => New::Response(handle),
            Fast::UnknownResponse => return Err(rpc::unknown_response(&self.peers, d.pid, d.key)),
            Fast::Dropped(e) => return Err(e),
        };
        self.open_and_store(d, new, opened_before)
    }

    /// A new message's first packet: admitted, the message made and the
    /// packet stored into it (`recv/first.rs`), then `after_store`.
    fn open_and_store(&mut self, d: DataIn<'_>, new: New, opened_before: u64) -> Opening {
        new.admit(self.rpc_parts(), d)?;
        let lists = &mut self.buffers.segment_lists;
        let tables = (&mut self.rpcs, &mut self.peers, lists);
        let (msg, stored) = first::make_and_store(store_parts!(self), tables, d, new)?;
        // `None`: a stale index entry gave way, and the slow path stores.
        let outcome = stored.unwrap_or_else(|| self.store_and_open(d, msg, false));
        self.after_store(d, msg, outcome, opened_before)
    }

    /// The next DATA packet of the message the last one of this batch went
    /// to (same sender, key phase and ID: a GRO train of one message is
    /// mostly that) skips finding the peer, its epoch and the RPC again:
    /// the route found for the first packet holds until anything other
    /// than such a packet is handled (`Peers::forget_route`). The packet is
    /// parsed and checked as any other. `None`: not on the route.
    fn process_on_route(
        &mut self,
        now: Instant,
        from: SocketAddr,
        packet: &Packet<&[u8]>,
        data: Option<&DataHeader>,
    ) -> Option<Result<(), DropReason>> {
        let is_data = packet.packet_type() == PacketType::DATA;
        let seen = (is_data, packet.key_phase(), packet.id());
        let (pid, key, msg) = self.peers.route_for(from, seen)?;
        if self.config.verify_ports && !ports_match(packet, self.config.local_port, from) {
            return None;
        }
        // The type byte was checked (`seen`): the header the split parsed.
        let h = *data?;
        self.peers.count_on_route(packet.as_bytes().len());
        let d = DataIn::new(now, pid, key, &h, packet.payload());
        let result = self.store_data(d, msg);
        if !matches!(result, Ok(Some(_))) {
            self.peers.forget_route();
        }
        Some(result.map(|_| ()))
    }

    /// Stores a DATA packet of message `msg` (found on the route), opens
    /// what it completes and delivers a complete one. Returns the message
    /// if it is still being received.
    fn store_data(&mut self, d: DataIn<'_>, msg: MsgKey) -> Result<Option<MsgKey>, DropReason> {
        if u64::from(d.h.message_len) > self.len_limit {
            return Err(DropReason::OverLimit);
        }
        let opened_before = self.counters.stats.records_opened;
        let outcome = self.store_and_open(d, msg, false);
        self.after_store(d, msg, outcome, opened_before)
    }

    /// What follows storing a DATA packet: a packet that needs a new
    /// buffer is admitted first (this may recount or evict, so it runs
    /// while no RPC is borrowed) and stored again; then grants, the trace
    /// and what the outcome means for the message (`settle`).
    fn after_store(
        &mut self,
        d: DataIn<'_>,
        msg: MsgKey,
        mut outcome: Result<Opened, DropReason>,
        opened_before: u64,
    ) -> Result<Option<MsgKey>, DropReason> {
        if let Ok(Opened::NeedsRoom(more)) = outcome {
            let charge = Charge {
                bytes: more,
                requests: 0,
            };
            if !self.rpc_parts().admit(d.now, d.pid, charge) {
                return Err(DropReason::OverLimit);
            }
            outcome = self.store_and_open(d, msg, true);
        }
        self.scheduler.mark_grants_dirty();
        if self.counters.trace.is_some() {
            let attempted = self.counters.stats.records_opened - opened_before;
            self.rpc_parts().trace_opening(d.key, &outcome, attempted);
        }
        self.rpc_parts().settle(d, msg, Settled::of(outcome))
    }

    /// The per-packet part of DATA on the slow path (`store_fast` is the
    /// fast one): the message and the peer looked up again, then `store_in`.
    fn store_and_open(
        &mut self,
        d: DataIn<'_>,
        msg: MsgKey,
        admitted: bool,
    ) -> Result<Opened, DropReason> {
        let (clients, servers, peers) = (
            &mut self.rpcs.clients,
            &mut self.rpcs.servers,
            &mut self.peers,
        );
        let mut parts = store_parts!(self);
        let inc = receiving_in(clients, servers, msg).ok_or(DropReason::Duplicate)?;
        match (admitted, peers.at_mut(d.pid)) {
            (false, Some(peer)) => store_within_bounds(&mut parts, inc, peer, d, msg),
            (_, peer) => store_in(&mut parts, inc, peer, d, msg, admitted),
        }
    }

    /// A control packet of a session: decided by the RPCs' side
    /// (`RpcParts::on_control`), carried out here.
    fn on_control(
        &mut self,
        now: Instant,
        pid: PeerId,
        key: ServerRpcHandle,
        local: bool,
        body: Body,
    ) -> Result<(), DropReason> {
        let (then, result) = self.rpc_parts().on_control(pid, key, local, body);
        self.apply_control(now, key, then);
        result
    }
}
