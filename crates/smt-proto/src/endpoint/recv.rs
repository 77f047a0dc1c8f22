//! `handle_datagram`: parse, authenticate, route. Every rejection is a
//! counted [`DropReason`], never an error returned to the caller.

use std::net::SocketAddr;
use std::time::Instant;

use super::limits::Charge;
use super::peers::PeerId;
use super::table::RpcKey;
use super::tick::missing;
use super::{
    trace_event, Endpoint, Event, MsgKey, RpcHandle, ServerRpc, ServerRpcHandle, ServerState,
};
use crate::crypto::TAG_LEN;
use crate::error::{DropReason, RpcError};
use crate::offload::KeyId;
use crate::record::OffloadTally;
use crate::rpc::{Accepted, Incoming, ServerMsg, MESSAGE_OVERHEAD};
use crate::session::ReplayCheck;
use crate::timer::Timer;
use crate::trace::{FreeReason, MessageKind, PacketSummary, Traced};
use crate::wire::{AckIds, Body, DataHeader, Packet, PacketType, Packets, Repr, WireError};

/// What storing one DATA packet led to.
enum Opened {
    Stored,
    Complete,
    /// A segment failed to authenticate (and whether nothing of the
    /// message has authenticated yet).
    Failed {
        nothing_authenticated: bool,
    },
    /// The message's records disagree with its lengths: drop the packet
    /// and the message (`discard_incoming`).
    Discard(DropReason),
    /// Storing the packet takes a new buffer of this many bytes: nothing
    /// was done; the memory bounds must admit it first.
    NeedsRoom(usize),
}

/// Where the last DATA packet of a receive batch went, for the next one of
/// the same message (`Endpoint::process_on_route`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LastRoute {
    from: SocketAddr,
    peer: PeerId,
    phase: bool,
    key: ServerRpcHandle,
    msg: MsgKey,
    /// Packets that took the route, and their bytes, not yet in the
    /// peer's counters.
    datagrams: u64,
    bytes: u64,
}

/// The internal key of an RPC of peer `peer` with wire key `key`.
fn rpc_key(peer: PeerId, key: &ServerRpcHandle) -> RpcKey {
    RpcKey {
        peer,
        epoch: key.epoch,
        id: key.id,
    }
}

/// Splits a control packet into the authenticated part and its MAC.
fn split_tag(datagram: &[u8]) -> Result<(&[u8], &[u8; TAG_LEN]), DropReason> {
    let split = datagram
        .len()
        .checked_sub(TAG_LEN)
        .ok_or(DropReason::Malformed)?;
    let (body, tag) = datagram.split_at(split);
    let tag: &[u8; TAG_LEN] = tag.try_into().map_err(|_| DropReason::Malformed)?;
    Ok((body, tag))
}

/// The destination port is ours (when we know it) and the source port is
/// zero (the sender did not know its port) or the datagram's.
fn ports_match(packet: &Packet<&[u8]>, local_port: u16, from: SocketAddr) -> bool {
    let dst_ok = local_port == 0 || packet.dst_port() == local_port;
    let src_ok = packet.src_port() == 0 || packet.src_port() == from.port();
    dst_ok && src_ok
}

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
        self.handle_datagram_in_batch(now, from, datagram);
        self.forget_route();
    }

    /// [`Endpoint::handle_datagram`] inside a receive batch: the route of
    /// the last DATA packet is kept for the next (see [`LastRoute`]); the
    /// caller forgets it when the batch ends.
    pub(crate) fn handle_datagram_in_batch(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
    ) {
        self.handle_datagram_each(now, from, datagram, |_| {});
    }

    /// Splits `datagram` into its packets and handles each, calling
    /// `before` ahead of each packet (receive offload sets the packet's
    /// mark there; otherwise it does nothing and compiles away).
    pub(crate) fn handle_datagram_each(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
        mut before: impl FnMut(&mut Self),
    ) {
        self.stats.datagrams_rx += 1;
        self.stats.bytes_rx += datagram.len() as u64;
        self.trace_now(now);
        let tagged = self.config.authenticate_control;
        for (i, packet) in Packets::new(datagram, tagged).enumerate() {
            if i > 0 {
                self.stats.coalesced_packets_rx += 1;
            }
            before(self);
            if !self.handle_packet(now, from, packet) {
                return;
            }
        }
    }

    /// One packet (the whole datagram, or one of its coalesced packets).
    /// Returns whether the packets after it may be handled.
    fn handle_packet(&mut self, now: Instant, from: SocketAddr, packet: &[u8]) -> bool {
        trace_event!(
            self,
            Traced::Received {
                peer: from,
                packet: PacketSummary::of(packet, self.config.authenticate_control),
            }
        );
        let Err(reason) = self.process(now, from, packet) else {
            return true;
        };
        self.forget_route();
        // New keys held for this address may take it (handshake.rs).
        if self.offer_to_held_keys(now, from, packet) {
            return true;
        }
        self.drop_packet(from, reason);
        !reason.ends_datagram()
    }

    pub(crate) fn drop_packet(&mut self, from: SocketAddr, reason: DropReason) {
        trace_event!(self, Traced::Dropped { peer: from, reason });
        tracing::debug!(%from, reason = reason.name(), "dropped packet");
        self.stats.drops.add(reason);
        if let Some(s) = self.peers.get_mut(&from) {
            s.stats.drops.add(reason);
        }
    }

    fn process(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
    ) -> Result<(), DropReason> {
        let packet = Packet::new_checked(datagram).map_err(|_| DropReason::Malformed)?;
        if let Some(result) = self.process_on_route(now, from, &packet) {
            return result;
        }
        // Anything else may change what the route relied on (keys, epochs,
        // RPC states): it is forgotten, and set again by a stored DATA
        // packet.
        self.forget_route();
        let ty = packet.packet_type();
        if ty.name().is_none() {
            return Err(DropReason::UnknownType);
        }
        // NOTE(pathlet, issue #25): PATH and PATH_ECHO (docs/protocol.md
        // § 4) are not handled by the endpoint yet; dropped as unsupported
        // (counted), which keeps the rest of the datagram. The hook-up
        // replaces this.
        if matches!(ty, PacketType::PATH | PacketType::PATH_ECHO) {
            return Err(DropReason::Unsupported);
        }
        if self.config.verify_ports && !ports_match(&packet, self.config.local_port, from) {
            return Err(DropReason::WrongPort);
        }
        if ty == PacketType::HANDSHAKE {
            let result = self.on_handshake_packet(now, from, datagram);
            self.arm_idle_sweep(now);
            return result;
        }
        let authenticate = self.config.authenticate_control;
        let phase = packet.key_phase();
        // The packet's one address hash: from here on the peer is its
        // slot, and keys, counters and liveness come from that one entry.
        let pid = match self.peers.id(&from) {
            Some(pid) => pid,
            None if self.stash_early(from, datagram) => return Ok(()),
            None => self.resolve_session(from)?,
        };
        let id_limit = self.config.seq_layout.id_limit();
        let peer = self.peers.at_mut(pid).ok_or(DropReason::UnknownSession)?;
        peer.session.stats.datagrams_rx += 1;
        peer.session.stats.bytes_rx += datagram.len() as u64;
        if !peer.validated {
            peer.rx_bytes += datagram.len() as u64;
        }
        if ty == PacketType::KEY_UPDATE {
            return self.on_key_update(now, from, phase, datagram);
        }
        let epoch = peer
            .session
            .epoch_by_phase(phase)
            .ok_or(DropReason::KeyPhase)?;
        let packet = if ty.is_control() && authenticate {
            let (body, tag) = split_tag(datagram)?;
            epoch
                .rx
                .verify_control_tag(body, tag)
                .map_err(|_| DropReason::BadControlTag)?;
            // `Peer::authenticated`, field by field: `epoch` borrows the
            // session.
            (peer.heard, peer.validated, peer.proven) = (Some(now), true, true);
            Packet::new_checked(body).map_err(|_| DropReason::Malformed)?
        } else {
            packet
        };
        let repr = Repr::parse(&packet).map_err(|e| match e {
            WireError::UnknownType(_) => DropReason::UnknownType,
            _ => DropReason::Malformed,
        })?;
        if repr.id >= id_limit {
            return Err(DropReason::Malformed);
        }
        let local = peer.session.is_local_id(repr.id);
        let key = ServerRpcHandle {
            peer: from,
            epoch: epoch.number,
            id: repr.id,
        };
        match repr.body {
            Body::Data(h) => {
                // The receive key is taken from the peer entry again where
                // records are opened: holding it (an `Arc` clone) across
                // the call cost an atomic increment and decrement per
                // packet.
                let receiving = self.on_data(now, pid, key, local, &h, packet.payload())?;
                if let Some(msg) = receiving {
                    self.remember_route(pid, phase, key, msg);
                }
                Ok(())
            }
            body => self.on_control(now, pid, key, local, body),
        }
    }

    /// The next DATA packet of the message the last one of this batch went
    /// to (same sender, key phase and ID: a GRO train of one message is
    /// mostly that) skips finding the peer, its epoch and the RPC again:
    /// the route found for the first packet holds until anything other
    /// than such a packet is handled (`forget_route`). The packet is
    /// parsed and checked as any other. `None`: not on the route.
    fn process_on_route(
        &mut self,
        now: Instant,
        from: SocketAddr,
        packet: &Packet<&[u8]>,
    ) -> Option<Result<(), DropReason>> {
        let route = self.last_route.as_ref()?;
        let on_route = route.from == from
            && packet.packet_type() == PacketType::DATA
            && packet.key_phase() == route.phase
            && packet.id() == route.key.id
            && (!self.config.verify_ports || ports_match(packet, self.config.local_port, from));
        if !on_route {
            return None;
        }
        let Ok(Repr {
            body: Body::Data(h),
            ..
        }) = Repr::parse(packet)
        else {
            return None;
        };
        let (pid, key, msg) = (route.peer, route.key, route.msg);
        if let Some(route) = self.last_route.as_mut() {
            route.datagrams += 1;
            route.bytes += packet.as_bytes().len() as u64;
        }
        let result = self.store_data(now, pid, key, msg, &h, packet.payload());
        if !matches!(result, Ok(Some(_))) {
            self.forget_route();
        }
        Some(result.map(|_| ()))
    }

    /// Keeps the route of a DATA packet stored for a message still being
    /// received, if its peer's address is validated (an unvalidated one
    /// counts the bytes it sends, per packet).
    fn remember_route(&mut self, peer: PeerId, phase: bool, key: ServerRpcHandle, msg: MsgKey) {
        if self.peers.at(peer).is_some_and(|p| p.validated) {
            self.last_route = Some(LastRoute {
                from: key.peer,
                peer,
                phase,
                key,
                msg,
                datagrams: 0,
                bytes: 0,
            });
        }
    }

    /// Ends the route: the packets that took it are counted in their peer's
    /// statistics.
    pub(crate) fn forget_route(&mut self) {
        let Some(route) = self.last_route.take() else {
            return;
        };
        if let Some(p) = self.peers.at_mut(route.peer) {
            p.session.stats.datagrams_rx += route.datagrams;
            p.session.stats.bytes_rx += route.bytes;
        }
    }

    /// A peer moved to the next key epoch. Accepted only if the packet's MAC
    /// verifies under the next epoch's keys, so a forged KEY_UPDATE cannot
    /// make us drop the previous epoch.
    fn on_key_update(
        &mut self,
        now: Instant,
        from: SocketAddr,
        phase: bool,
        datagram: &[u8],
    ) -> Result<(), DropReason> {
        let session = self.peers.get(&from).ok_or(DropReason::UnknownSession)?;
        // Already there (both sides rekeyed at once, or a copy): it must
        // still authenticate, under the current keys.
        let already = session.current.phase() == phase;
        let rx = match already {
            true => session.current.rx.clone(),
            false => session.next_keys().ok_or(DropReason::KeyPhase)?.rx,
        };
        let (body, tag) = split_tag(datagram)?;
        if rx.verify_control_tag(body, tag).is_err() {
            // A late copy of an announcement or confirmation for the epoch
            // we already left (its phase is the previous epoch's) is stale,
            // not forged: counted as a duplicate, so it neither looks like
            // an attack nor ends a coalesced datagram.
            let stale = session
                .previous
                .as_ref()
                .filter(|e| !already && e.phase() == phase)
                .is_some_and(|e| e.rx.verify_control_tag(body, tag).is_ok());
            return Err(match stale {
                true => DropReason::Duplicate,
                false => DropReason::BadControlTag,
            });
        }
        if let Some(p) = self.peers.get_mut(&from) {
            p.authenticated(now);
        }
        let packet = Packet::new_checked(body).map_err(|_| DropReason::Malformed)?;
        let repr = Repr::parse(&packet).map_err(|_| DropReason::Malformed)?;
        if repr.body != Body::KeyUpdate {
            return Err(DropReason::Malformed);
        }
        if repr.id == super::KEY_UPDATE_CONFIRM {
            if already {
                if let Some(s) = self.peers.get_mut(&from) {
                    s.key_update_unconfirmed = None;
                }
            }
            return Ok(());
        }
        if already {
            // A repeated announcement: our confirmation was lost.
            let epoch = self.peers.get(&from).map_or(0, |s| s.current.number);
            self.queue_control(from, epoch, super::KEY_UPDATE_CONFIRM, Body::KeyUpdate);
            return Ok(());
        }
        self.drop_previous_epoch(from);
        let mut epoch = None;
        if let Some(session) = self.peers.get_mut(&from) {
            session.advance();
            tracing::debug!(%from, epoch = session.current.number, "peer rekeyed");
            epoch = Some(session.current.number);
        }
        if let Some(epoch) = epoch {
            self.queue_control(from, epoch, super::KEY_UPDATE_CONFIRM, Body::KeyUpdate);
            trace_event!(
                self,
                Traced::Rekeyed {
                    peer: from,
                    epoch,
                    by_peer: true,
                }
            );
        }
        Ok(())
    }

    /// Forgets the previous key epoch's RPCs (the peer has moved on twice).
    fn drop_previous_epoch(&mut self, peer: SocketAddr) {
        let Some(pid) = self.peers.id(&peer) else {
            return;
        };
        let Some(prev) = self
            .peers
            .at(pid)
            .and_then(|s| s.previous.as_ref())
            .map(|e| e.number)
        else {
            return;
        };
        self.forget_servers(pid, Some(prev));
        self.fail_clients(pid, Some(prev));
    }

    fn is_local_id(&self, peer: PeerId, id: u64) -> bool {
        self.peers.at(peer).is_some_and(|s| s.is_local_id(id))
    }

    fn was_allocated(&self, peer: PeerId, key: ServerRpcHandle) -> bool {
        self.peers
            .at(peer)
            .and_then(|s| s.epoch(key.epoch))
            .is_some_and(|e| e.ids.was_allocated(key.id))
    }

    // ---- DATA ----

    fn on_data(
        &mut self,
        now: Instant,
        pid: PeerId,
        key: ServerRpcHandle,
        local: bool,
        h: &DataHeader,
        payload: &[u8],
    ) -> Result<Option<MsgKey>, DropReason> {
        let msg = if local {
            self.response_key(now, pid, key, h)?
        } else {
            self.request_key(now, pid, key, h)?
        };
        self.store_data(now, pid, key, msg, h, payload)
    }

    /// Stores a DATA packet of message `msg` (found by `on_data` or on the
    /// route), opens what it completes and delivers a complete message.
    /// Returns the message if it is still being received.
    fn store_data(
        &mut self,
        now: Instant,
        pid: PeerId,
        key: ServerRpcHandle,
        msg: MsgKey,
        h: &DataHeader,
        payload: &[u8],
    ) -> Result<Option<MsgKey>, DropReason> {
        if u64::from(h.message_len) > self.config.message_len_limit() {
            return Err(DropReason::OverLimit);
        }
        let opened_before = self.stats.records_opened;
        let mut outcome = self.store_and_open(now, pid, msg, key, h, payload, false);
        if let Ok(Opened::NeedsRoom(more)) = outcome {
            // A new segment buffer is admitted first (this may recount or
            // evict, so it runs while no RPC is borrowed), then stored.
            let charge = Charge {
                bytes: more,
                requests: 0,
            };
            if !self.admit(now, pid, charge) {
                return Err(DropReason::OverLimit);
            }
            outcome = self.store_and_open(now, pid, msg, key, h, payload, true);
        }
        self.scheduler.mark_grants_dirty();
        if self.trace.is_some() {
            self.trace_opening(key, &outcome, self.stats.records_opened - opened_before);
        }
        match outcome {
            Err(e) => Err(e),
            Ok(Opened::Discard(e)) => {
                self.discard_incoming(msg);
                Err(e)
            }
            Ok(Opened::Failed {
                nothing_authenticated,
            }) => {
                if nothing_authenticated {
                    self.forget_unauthenticated(msg);
                }
                Err(DropReason::AuthFailure)
            }
            Ok(Opened::Stored | Opened::NeedsRoom(_)) => Ok(Some(msg)),
            Ok(Opened::Complete) => {
                self.deliver(now, pid, msg, key);
                Ok(None)
            }
        }
    }

    /// Traces what storing a DATA packet opened, or failed to open.
    /// `attempted`: records whose opening was tried (opening stops at the
    /// first that fails).
    #[cold]
    fn trace_opening(
        &mut self,
        key: ServerRpcHandle,
        outcome: &Result<Opened, DropReason>,
        attempted: u64,
    ) {
        let (peer, epoch, id) = (key.peer, key.epoch, key.id);
        let records = match outcome {
            Ok(Opened::Failed { .. }) => attempted.saturating_sub(1),
            _ => attempted,
        };
        if records > 0 {
            let what = Traced::Opened {
                peer,
                epoch,
                id,
                records,
            };
            self.record_trace(what);
        }
        let reason = match outcome {
            Ok(Opened::Failed { .. }) => DropReason::AuthFailure,
            Ok(Opened::Discard(reason)) => *reason,
            _ => return,
        };
        let what = Traced::OpenFailed {
            peer,
            epoch,
            id,
            reason,
        };
        self.record_trace(what);
    }

    /// The per-packet part of DATA: stores the payload, opens what became
    /// complete, and does the bookkeeping, with one lookup of the RPC and
    /// one of the peer (split borrows of the endpoint's fields). Unless
    /// `admitted`, a packet that needs a new buffer is left alone
    /// ([`Opened::NeedsRoom`]). `Err(ProtocolViolation)` asks the caller
    /// to discard the message.
    #[allow(clippy::too_many_arguments)]
    fn store_and_open(
        &mut self,
        now: Instant,
        pid: PeerId,
        msg: MsgKey,
        key: ServerRpcHandle,
        h: &DataHeader,
        payload: &[u8],
        admitted: bool,
    ) -> Result<Opened, DropReason> {
        let Endpoint {
            clients,
            servers,
            peers,
            stats,
            scheduler,
            config,
            usage_total,
            charged,
            buffers,
            rx_mark,
            ..
        } = self;
        let (inc, silent) = match msg {
            MsgKey::Client(handle) => {
                let c = clients.get_mut(&handle).ok_or(DropReason::Duplicate)?;
                let inc = c.response.as_mut().ok_or(DropReason::Duplicate)?;
                (inc, &mut c.silent_ticks)
            }
            MsgKey::Server(m) => {
                let s = servers.get_mut(m.slot).ok_or(DropReason::Duplicate)?;
                match &mut s.state {
                    ServerState::Receiving(inc) => (inc, &mut s.silent_ticks),
                    _ => return Err(DropReason::Duplicate),
                }
            }
        };
        if !admitted {
            let more = inc.allocation_for(h);
            if more > 0 {
                return Ok(Opened::NeedsRoom(more));
            }
        }
        let mut peer = peers.at_mut(pid);
        let rx = peer
            .as_deref()
            .and_then(|p| p.session.epoch(key.epoch))
            .ok_or(DropReason::UnknownSession)?;
        let held = inc.buffered_bytes();
        // Receive offload: the NIC's word counts only for the key this
        // RPC belongs to (the epoch, and the session, it was routed to).
        let decrypted = rx_mark.is_some_and(|k| k == KeyId::of(&rx.rx));
        if let Err(e) = inc.accept(h, payload, decrypted, buffers) {
            // Lengths that disagree with the first packet's, before anything
            // authenticated: either header may be the corrupted one, and
            // keeping the first would refuse every genuine packet until the
            // timeout. Start over (the caller discards on this error).
            if e == DropReason::ProtocolViolation && inc.authenticated_bytes() == 0 {
                return Ok(Opened::Discard(e));
            }
            return Err(e);
        }
        // Progress, not mere arrival, keeps an RPC alive (see `progressed`).
        *silent = 0;
        if inc.granted() < inc.wire_len() {
            scheduler.mark_grantable(msg);
        }
        let (mut opened, mut offloaded) = (0, OffloadTally::default());
        let mine = peer.as_deref().map_or(0, |p| p.usage.bytes);
        let spare = super::limits::spare(config, usage_total, mine);
        let result = inc.open_ready(
            &*rx.rx,
            config.seq_layout,
            key.id,
            &mut opened,
            &mut offloaded,
            spare,
            buffers,
        );
        let nothing_authenticated = inc.nothing_authenticated();
        let grown = inc.buffered_bytes().saturating_sub(held);
        stats.records_opened += opened;
        if offloaded != OffloadTally::default() {
            offloaded.count(stats, peer.as_deref_mut().map(|p| &mut p.session.stats));
        }
        if let Some(p) = peer.as_deref_mut() {
            p.session.stats.records_opened += opened;
            if result.is_ok() && opened > 0 {
                p.authenticated(now);
            }
        }
        if grown > 0 {
            let more = Charge {
                bytes: grown,
                requests: 0,
            };
            let entry = peer.map(|p| (pid, p));
            super::limits::add_charge(entry, charged, usage_total, &mut stats.usage, more);
        }
        match result {
            Ok(Accepted::Stored) => Ok(Opened::Stored),
            Ok(Accepted::Complete) => Ok(Opened::Complete),
            Err(DropReason::AuthFailure) => Ok(Opened::Failed {
                nothing_authenticated,
            }),
            Err(DropReason::ProtocolViolation) => {
                Ok(Opened::Discard(DropReason::ProtocolViolation))
            }
            Err(e) => Err(e),
        }
    }

    /// Routes a DATA packet of a response to one of our RPCs.
    fn response_key(
        &mut self,
        now: Instant,
        pid: PeerId,
        key: ServerRpcHandle,
        h: &DataHeader,
    ) -> Result<MsgKey, DropReason> {
        let Some(handle) = self.peers.client(&rpc_key(pid, &key)) else {
            return Err(if self.was_allocated(pid, key) {
                DropReason::Replay
            } else {
                DropReason::UnknownRpc
            });
        };
        let has_response = self
            .clients
            .get(&handle)
            .ok_or(DropReason::UnknownRpc)?
            .response
            .is_some();
        if !has_response {
            self.admit_message(now, pid, false)?;
            let incoming = self.new_incoming(h);
            if let Some(rpc) = self.clients.get_mut(&handle) {
                rpc.response = Some(incoming);
            }
        }
        Ok(MsgKey::Client(handle))
    }

    /// Admits and charges a new partially received message from `peer`.
    fn admit_message(
        &mut self,
        now: Instant,
        peer: PeerId,
        request: bool,
    ) -> Result<(), DropReason> {
        let charge = Charge {
            bytes: MESSAGE_OVERHEAD,
            requests: usize::from(request),
        };
        if !self.admit(now, peer, charge) {
            return Err(DropReason::OverLimit);
        }
        self.charge(peer, charge);
        Ok(())
    }

    /// Routes a DATA packet of a request from the peer, creating the server
    /// RPC if the ID is fresh. Replays are rejected here, before any
    /// decryption.
    fn request_key(
        &mut self,
        now: Instant,
        pid: PeerId,
        key: ServerRpcHandle,
        h: &DataHeader,
    ) -> Result<MsgKey, DropReason> {
        let found = self.peers.server(&rpc_key(pid, &key));
        if let Some((slot, rpc)) = found.and_then(|s| Some((s, self.servers.get_mut(s)?))) {
            return match rpc.state {
                // Silence is reset by progress only (`progressed`).
                ServerState::Receiving(_) => Ok(MsgKey::Server(ServerMsg { rpc: key, slot })),
                _ => {
                    // The client is still sending: it has not heard the
                    // response yet.
                    rpc.silent_ticks = 0;
                    Err(DropReason::Duplicate)
                }
            };
        }
        let session = self.peers.at(pid).ok_or(DropReason::UnknownSession)?;
        let epoch = session.epoch(key.epoch).ok_or(DropReason::KeyPhase)?;
        if epoch.replay.check(key.id) == ReplayCheck::Replayed {
            self.answer_if_refused(key);
            return Err(DropReason::Replay);
        }
        if let Err(e) = self.admit_message(now, pid, true) {
            self.refuse_unadmitted(key);
            return Err(e);
        }
        let incoming = self.new_incoming(h);
        let rpc = ServerRpc {
            state: ServerState::Receiving(incoming),
            silent_ticks: 0,
        };
        let slot = self.servers.insert(key, pid, rpc);
        let replaced = self
            .peers
            .rpcs_mut(pid)
            .and_then(|r| r.add_server(key.epoch, key.id, slot));
        if let Some(old) = replaced {
            // Cannot happen: the key was looked up above and not found.
            self.servers.remove(old);
        }
        self.arm_tick(now);
        Ok(MsgKey::Server(ServerMsg { rpc: key, slot }))
    }

    fn new_incoming(&mut self, h: &DataHeader) -> Incoming {
        let cfg = &self.config;
        let list = self.spare_segment_lists.pop().unwrap_or_default();
        Incoming::reuse(list, h, cfg.unscheduled_bytes, cfg.max_unopened_bytes)
    }

    pub(crate) fn incoming_mut(&mut self, key: MsgKey) -> Option<&mut Incoming> {
        match key {
            MsgKey::Client(h) => self.clients.get_mut(&h)?.response.as_mut(),
            MsgKey::Server(m) => match &mut self.servers.get_mut(m.slot)?.state {
                ServerState::Receiving(inc) => Some(inc),
                _ => None,
            },
        }
    }

    /// A response whose only state came from a packet that failed to
    /// authenticate (perhaps forged, with made-up lengths): start over, so
    /// the genuine packets are not refused as inconsistent with it. (A
    /// server RPC keeps its state: removing it would turn the client's
    /// RESENDs into RPC_UNKNOWN and restarts.)
    fn forget_unauthenticated(&mut self, msg: MsgKey) {
        if let MsgKey::Client(h) = msg {
            if let Some(rpc) = self.clients.get_mut(&h) {
                rpc.response = None;
            }
        }
    }

    /// Drops a message whose records disagree with its lengths. The
    /// lengths travel in plaintext headers, fixed by the first packet that
    /// arrived, so one corrupted (or forged) header is enough to make the
    /// genuine records disagree: the message starts over rather than
    /// failing the RPC (found by the fault soak: 0.1% corruption failed
    /// ~2 RPCs in 100,000). A response is received again on RESEND; a
    /// request's client hears RPC_UNKNOWN and restarts it (never delivered,
    /// so never executed twice). A peer that keeps doing it only delays its
    /// own RPC until the timeout.
    fn discard_incoming(&mut self, msg: MsgKey) {
        match msg {
            MsgKey::Client(h) => {
                if let Some(rpc) = self.clients.get_mut(&h) {
                    rpc.response = None;
                }
            }
            MsgKey::Server(m) => {
                self.drop_server_at(m.slot);
            }
        }
    }

    fn deliver(&mut self, now: Instant, pid: PeerId, msg: MsgKey, key: ServerRpcHandle) {
        self.stats.messages_received += 1;
        match msg {
            MsgKey::Client(handle) => self.complete_client(now, handle, key),
            MsgKey::Server(m) => {
                let k = m.rpc;
                // No longer a partial request: its place is free now, not
                // at the next recount (a burst of small requests would
                // otherwise fill `max_incoming_per_peer` within a tick).
                let done = Charge {
                    bytes: 0,
                    requests: 1,
                };
                self.discharge(pid, done);
                let full = self.in_service >= self.config.max_pending_requests;
                self.note_request(k.peer, full);
                if full {
                    self.refuse_request(pid, m);
                    return;
                }
                let Some(rpc) = self.servers.get_mut(m.slot) else {
                    return;
                };
                // Only a request being received completes; the swap puts
                // back any other state untouched.
                let mut inc = match std::mem::replace(&mut rpc.state, ServerState::InService) {
                    ServerState::Receiving(inc) => inc,
                    other => {
                        rpc.state = other;
                        return;
                    }
                };
                let data = inc.take_data();
                self.recycle_incoming(inc);
                self.in_service += 1;
                trace_event!(
                    self,
                    Traced::Delivered {
                        peer: k.peer,
                        epoch: k.epoch,
                        id: k.id,
                        kind: MessageKind::Request,
                        len: data.len() as u64,
                        rpc: None,
                    }
                );
                if let Some(s) = self.peers.at_mut(pid) {
                    if let Some(e) = s.epoch_mut(k.epoch) {
                        e.replay.mark(k.id);
                    }
                    s.stats.messages_received += 1;
                }
                self.outbox
                    .events
                    .push_back(Event::Request { rpc: k, data });
            }
        }
    }

    /// Sheds a complete request while the application holds
    /// `Config::max_pending_requests`: it is never executed (its ID is
    /// retired as refused, so late copies are replays and a RESEND for it
    /// hears OVERLOADED again: `refusal.rs`), its state is freed, and the
    /// client hears OVERLOADED.
    fn refuse_request(&mut self, pid: PeerId, m: ServerMsg) {
        let key = m.rpc;
        self.drop_server_at(m.slot);
        self.trace_freed(key, FreeReason::Overloaded);
        if let Some(epoch) = self.peers.at_mut(pid).and_then(|s| s.epoch_mut(key.epoch)) {
            epoch.replay.refuse(key.id);
        }
        self.count_refused(key);
        self.queue_control(key.peer, key.epoch, key.id, Body::Overloaded);
    }

    fn complete_client(&mut self, now: Instant, handle: RpcHandle, key: ServerRpcHandle) {
        // Emptied in place, not moved out of its slot (a copy of a few
        // hundred bytes per RPC).
        let Endpoint {
            clients,
            buffers,
            spare_segment_lists,
            ..
        } = self;
        let done = clients.remove_with(&handle, |rpc| {
            let inc = rpc.response.as_mut()?;
            let data = inc.take_data();
            super::keep_incoming(buffers, spare_segment_lists, inc);
            rpc.request.recycle(buffers);
            Some((data, rpc.started, rpc.peer_id, rpc.epoch, rpc.id))
        });
        let Some(Some((data, started, pid, epoch, id))) = done else {
            return;
        };
        let rtt = now.saturating_duration_since(started);
        if let Some(r) = self.peers.rpcs_mut(pid) {
            r.remove_client(epoch, id);
        }
        trace_event!(
            self,
            Traced::Delivered {
                peer: key.peer,
                epoch: key.epoch,
                id: key.id,
                kind: MessageKind::Response,
                len: data.len() as u64,
                rpc: Some(handle),
            }
        );
        self.stats.rpcs_completed += 1;
        self.stats.rtt.record(rtt);
        if let Some(s) = self.peers.at_mut(pid) {
            s.stats.messages_received += 1;
            s.stats.rpcs_completed += 1;
            s.stats.rtt.record(rtt);
        }
        self.queue_ack(now, key);
        self.outbox
            .events
            .push_back(Event::Response { rpc: handle, data });
    }

    /// Acknowledges a completed RPC: a full batch leaves at once, else
    /// the batch waits for [`Timer::AckDelay`].
    pub(crate) fn queue_ack(&mut self, now: Instant, key: ServerRpcHandle) {
        let ids = self
            .outbox
            .pending_acks
            .entry((key.peer, key.epoch))
            .or_default();
        ids.push(key.id);
        if ids.is_full() {
            let ids = std::mem::take(ids);
            self.queue_control(key.peer, key.epoch, 0, Body::Ack(ids));
        } else if !self.timers.is_set(Timer::AckDelay) {
            self.timers.set(Timer::AckDelay, now + self.config.tick);
        }
    }

    /// Sends every pending ACK batch ([`Timer::AckDelay`] expired).
    /// An entry stays (emptied) while its peer and epoch keep completing
    /// RPCs, so a steady stream does not allocate a map node per batch;
    /// entries with nothing to send since the last batch are removed.
    pub(crate) fn send_pending_acks(&mut self) {
        let mut pending = std::mem::take(&mut self.outbox.pending_acks);
        pending.retain(|_, ids| !ids.is_empty());
        for (&(peer, epoch), ids) in pending.iter_mut() {
            let ids = std::mem::take(ids);
            self.queue_control(peer, epoch, 0, Body::Ack(ids));
        }
        self.outbox.pending_acks = pending;
    }

    // ---- control ----

    fn on_control(
        &mut self,
        now: Instant,
        pid: PeerId,
        key: ServerRpcHandle,
        local: bool,
        body: Body,
    ) -> Result<(), DropReason> {
        match body {
            Body::Ack(ids) => return self.on_ack(pid, key, &ids),
            Body::Credit { limit, sequence } => return self.on_credit(key.peer, limit, sequence),
            Body::Handshake { .. } | Body::Data(_) | Body::KeyUpdate => {
                return Err(DropReason::Unsupported)
            }
            _ => {}
        }
        if local {
            self.on_control_for_client(now, pid, key, body)
        } else {
            self.on_control_for_server(pid, key, body)
        }
    }

    /// A control packet about an RPC we started.
    fn on_control_for_client(
        &mut self,
        now: Instant,
        pid: PeerId,
        key: ServerRpcHandle,
        body: Body,
    ) -> Result<(), DropReason> {
        let Some(handle) = self.peers.client(&rpc_key(pid, &key)) else {
            return match body {
                Body::NeedAck if self.was_allocated(pid, key) => {
                    self.queue_ack(now, key);
                    Ok(())
                }
                Body::Resend { .. } => {
                    self.queue_control(key.peer, key.epoch, key.id, Body::RpcUnknown);
                    Err(DropReason::UnknownRpc)
                }
                _ => Err(DropReason::UnknownRpc),
            };
        };
        let (ticks, interval) = (self.ticks, u64::from(self.config.resend_ticks));
        let rpc = self
            .clients
            .get_mut(&handle)
            .ok_or(DropReason::UnknownRpc)?;
        if body == Body::NeedAck {
            // The server believes it sent the whole response, but we are
            // still missing some of it: ask for it now rather than on the
            // next silent tick (and NEED_ACK is no sign of progress).
            for (offset, length) in missing(rpc.response.as_ref(), self.config.max_resend_bytes) {
                self.queue_control(
                    key.peer,
                    key.epoch,
                    key.id,
                    Body::Resend {
                        offset,
                        length,
                        priority: 0,
                    },
                );
            }
            return Ok(());
        }
        rpc.silent_ticks = 0;
        match body {
            Body::Grant { offset, .. } => {
                rpc.request.grant(offset);
                self.mark_sendable(MsgKey::Client(handle));
            }
            Body::Resend { offset, length, .. } => {
                rpc.request.resend(offset, length, ticks, interval);
                self.mark_sendable(MsgKey::Client(handle));
            }
            Body::RpcUnknown => self.restart(now, handle),
            Body::Overloaded => self.fail_client(handle, RpcError::Overloaded),
            Body::Abandoned => self.fail_client(handle, RpcError::Abandoned),
            Body::Busy => {}
            _ => return Err(DropReason::Unsupported),
        }
        Ok(())
    }

    /// A control packet about an RPC the peer started.
    fn on_control_for_server(
        &mut self,
        pid: PeerId,
        key: ServerRpcHandle,
        body: Body,
    ) -> Result<(), DropReason> {
        let (ticks, interval) = (self.ticks, u64::from(self.config.resend_ticks));
        let found = self.peers.server(&rpc_key(pid, &key));
        let Some((slot, rpc)) = found.and_then(|s| Some((s, self.servers.get_mut(s)?))) else {
            // RPC_UNKNOWN makes the client resend the request under a new
            // ID, so it is only said for IDs never delivered, and the ID is
            // then retired: late packets of it can no longer start a second
            // execution. A retired ID keeps getting RPC_UNKNOWN: the first
            // answer may have been lost. At most once, even across restarts.
            // A refused ID hears OVERLOADED again, never ABANDONED.
            let resend = matches!(body, Body::Resend { .. });
            if resend && self.answer_if_refused(key) {
                return Err(DropReason::UnknownRpc);
            }
            let Some(epoch) = self.peers.at_mut(pid).and_then(|s| s.epoch_mut(key.epoch)) else {
                return Err(DropReason::KeyPhase);
            };
            let fresh = epoch.replay.check(key.id) == ReplayCheck::Fresh;
            if resend && (fresh || epoch.replay.is_retired(key.id)) {
                epoch.replay.retire(key.id);
                self.queue_control(key.peer, key.epoch, key.id, Body::RpcUnknown);
            } else if resend {
                // Delivered, and its state is gone (abandoned, timed out):
                // no answer will ever come, so say so (again, if the first
                // ABANDONED was lost) rather than let the client wait.
                self.queue_control(key.peer, key.epoch, key.id, Body::Abandoned);
            }
            return Err(DropReason::UnknownRpc);
        };
        rpc.silent_ticks = 0;
        let msg = MsgKey::Server(ServerMsg { rpc: key, slot });
        match (body, &mut rpc.state) {
            (Body::Grant { offset, .. }, ServerState::Responding(out)) => {
                out.grant(offset);
                self.mark_sendable(msg);
            }
            (Body::Resend { offset, length, .. }, ServerState::Responding(out)) => {
                if out.resend(offset, length, ticks, interval) {
                    self.mark_sendable(msg);
                } else {
                    // What was asked for is still on its way (or not sent
                    // yet): say we are alive rather than send it twice.
                    self.queue_control(key.peer, key.epoch, key.id, Body::Busy);
                }
            }
            (Body::Resend { .. }, _) => self.queue_control(key.peer, key.epoch, key.id, Body::Busy),
            (Body::RpcUnknown, ServerState::InService) => {
                // The application holds the request: tell it the client
                // is gone, so it can stop working on it.
                self.drop_server_at(slot);
                self.trace_freed(key, FreeReason::ClientGone);
                self.outbox
                    .events
                    .push_back(Event::RequestCancelled { rpc: key });
            }
            (Body::RpcUnknown, _) => {
                self.drop_server_at(slot);
                self.trace_freed(key, FreeReason::ClientGone);
            }
            (Body::Busy | Body::Grant { .. }, _) => {}
            _ => return Err(DropReason::Unsupported),
        }
        Ok(())
    }

    fn on_ack(
        &mut self,
        pid: PeerId,
        key: ServerRpcHandle,
        ids: &AckIds,
    ) -> Result<(), DropReason> {
        for &id in ids.as_slice() {
            let done = ServerRpcHandle { id, ..key };
            if self.is_local_id(pid, id) {
                continue;
            }
            let slot = self.peers.server(&rpc_key(pid, &done));
            if slot.is_some_and(|s| self.drop_server_at(s)) {
                self.trace_freed(done, FreeReason::Acked);
            }
        }
        Ok(())
    }
}
