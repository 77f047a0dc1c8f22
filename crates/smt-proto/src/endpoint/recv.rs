//! `handle_datagram`: parse, authenticate, route. Every rejection is a
//! counted [`DropReason`], never an error returned to the caller.

use std::net::SocketAddr;
use std::time::Instant;

use super::{ClientRpc, Endpoint, Event, MsgKey, ServerRpc, ServerState};
use crate::crypto::TAG_LEN;
use crate::error::{DropReason, RpcError};
use crate::rpc::{Accepted, Incoming};
use crate::session::ReplayCheck;
use crate::wire::{AckIds, Body, DataHeader, Packet, PacketType, Repr, WireError};

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
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) {
        self.stats.datagrams_rx += 1;
        self.stats.bytes_rx += datagram.len() as u64;
        if let Err(reason) = self.process(now, from, datagram) {
            self.drop_packet(from, reason);
        }
    }

    pub(crate) fn drop_packet(&mut self, from: SocketAddr, reason: DropReason) {
        tracing::debug!(%from, reason = reason.name(), "dropped packet");
        self.stats.drops.add(reason);
        if let Some(s) = self.sessions.get_mut(&from) {
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
        let ty = packet.packet_type();
        if ty.name().is_none() {
            return Err(DropReason::UnknownType);
        }
        if self.config.verify_ports && !ports_match(&packet, self.config.local_port, from) {
            return Err(DropReason::WrongPort);
        }
        if ty == PacketType::HANDSHAKE {
            return Err(DropReason::Unsupported);
        }
        let authenticate = self.config.authenticate_control;
        let session = self
            .resolve_session(from)
            .ok_or(DropReason::UnknownSession)?;
        session.stats.datagrams_rx += 1;
        let body = if ty.is_control() && authenticate {
            let split = datagram
                .len()
                .checked_sub(TAG_LEN)
                .ok_or(DropReason::Malformed)?;
            let (body, tag) = datagram.split_at(split);
            let tag: &[u8; TAG_LEN] = tag.try_into().map_err(|_| DropReason::Malformed)?;
            session
                .keys
                .rx
                .verify_control_tag(body, tag)
                .map_err(|_| DropReason::BadControlTag)?;
            body
        } else {
            datagram
        };
        let packet = Packet::new_checked(body).map_err(|_| DropReason::Malformed)?;
        let repr = Repr::parse(&packet).map_err(|e| match e {
            WireError::UnknownType(_) => DropReason::UnknownType,
            _ => DropReason::Malformed,
        })?;
        if repr.id >= self.config.seq_layout.id_limit() {
            return Err(DropReason::Malformed);
        }
        match repr.body {
            Body::Data(h) => self.on_data(now, from, repr.id, &h, packet.payload()),
            body => self.on_control(now, from, repr.id, body),
        }
    }

    fn is_local_id(&self, from: SocketAddr, id: u64) -> bool {
        self.sessions.get(&from).is_some_and(|s| s.is_local_id(id))
    }

    // ---- DATA ----

    fn on_data(
        &mut self,
        now: Instant,
        from: SocketAddr,
        id: u64,
        h: &DataHeader,
        payload: &[u8],
    ) -> Result<(), DropReason> {
        if u64::from(h.message_len) > self.config.message_len_limit() {
            return Err(DropReason::OverLimit);
        }
        let key = if self.is_local_id(from, id) {
            self.response_key(from, id, h)?
        } else {
            self.request_key(now, from, id, h)?
        };
        let incoming = self.incoming_mut(key).ok_or(DropReason::Duplicate)?;
        incoming.accept(h, payload)?;
        let opened = self.open_ready(key, from, id);
        self.update_grants();
        match opened? {
            Accepted::Stored => Ok(()),
            Accepted::Complete => {
                self.deliver(key, from, id);
                Ok(())
            }
        }
    }

    /// Routes a DATA packet of a response to one of our RPCs.
    fn response_key(
        &mut self,
        from: SocketAddr,
        id: u64,
        h: &DataHeader,
    ) -> Result<MsgKey, DropReason> {
        let Some(&handle) = self.client_ids.get(&(from, id)) else {
            let ours = self
                .sessions
                .get(&from)
                .is_some_and(|s| s.ids.was_allocated(id));
            return Err(if ours {
                DropReason::Replay
            } else {
                DropReason::UnknownRpc
            });
        };
        let unscheduled = self.config.unscheduled_bytes;
        let rpc = self
            .clients
            .get_mut(&handle)
            .ok_or(DropReason::UnknownRpc)?;
        rpc.silent_ticks = 0;
        rpc.response
            .get_or_insert_with(|| Incoming::new(h, unscheduled));
        Ok(MsgKey::Client(handle))
    }

    /// Routes a DATA packet of a request from the peer, creating the server
    /// RPC if the ID is fresh. Replays are rejected here, before any
    /// decryption.
    fn request_key(
        &mut self,
        now: Instant,
        from: SocketAddr,
        id: u64,
        h: &DataHeader,
    ) -> Result<MsgKey, DropReason> {
        if let Some(rpc) = self.servers.get_mut(&(from, id)) {
            rpc.silent_ticks = 0;
            return match rpc.state {
                ServerState::Receiving(_) => Ok(MsgKey::Server(from, id)),
                _ => Err(DropReason::Duplicate),
            };
        }
        let session = self.sessions.get(&from).ok_or(DropReason::UnknownSession)?;
        if session.replay.check(id) == ReplayCheck::Replayed {
            return Err(DropReason::Replay);
        }
        let partial = self
            .servers
            .iter()
            .filter(|((p, _), s)| *p == from && matches!(s.state, ServerState::Receiving(_)))
            .count();
        if partial >= self.config.max_incoming_per_peer {
            return Err(DropReason::OverLimit);
        }
        let incoming = Incoming::new(h, self.config.unscheduled_bytes);
        self.servers.insert(
            (from, id),
            ServerRpc {
                state: ServerState::Receiving(incoming),
                silent_ticks: 0,
            },
        );
        self.arm_tick(now);
        Ok(MsgKey::Server(from, id))
    }

    pub(crate) fn incoming_mut(&mut self, key: MsgKey) -> Option<&mut Incoming> {
        match key {
            MsgKey::Client(h) => self.clients.get_mut(&h)?.response.as_mut(),
            MsgKey::Server(p, id) => match &mut self.servers.get_mut(&(p, id))?.state {
                ServerState::Receiving(inc) => Some(inc),
                _ => None,
            },
        }
    }

    fn open_ready(
        &mut self,
        key: MsgKey,
        from: SocketAddr,
        id: u64,
    ) -> Result<Accepted, DropReason> {
        let layout = self.config.seq_layout;
        let cipher = match self.sessions.get(&from) {
            Some(s) => s.keys.rx.clone(),
            None => return Err(DropReason::UnknownSession),
        };
        let mut opened = 0;
        let result = match self.incoming_mut(key) {
            Some(inc) => inc.open_ready(&*cipher, layout, id, &mut opened),
            None => return Err(DropReason::Duplicate),
        };
        self.stats.records_opened += opened;
        if let Some(s) = self.sessions.get_mut(&from) {
            s.stats.records_opened += opened;
        }
        if result == Err(DropReason::ProtocolViolation) {
            self.discard_incoming(key);
        }
        result
    }

    /// Drops a message whose authenticated content breaks the protocol.
    fn discard_incoming(&mut self, key: MsgKey) {
        match key {
            MsgKey::Client(h) => self.fail_client(h, RpcError::PeerMisbehaved),
            MsgKey::Server(p, id) => {
                self.servers.remove(&(p, id));
            }
        }
    }

    fn deliver(&mut self, key: MsgKey, from: SocketAddr, id: u64) {
        self.stats.messages_received += 1;
        match key {
            MsgKey::Client(handle) => self.complete_client(handle, from, id),
            MsgKey::Server(peer, id) => {
                let Some(rpc) = self.servers.get_mut(&(peer, id)) else {
                    return;
                };
                let ServerState::Receiving(inc) = &mut rpc.state else {
                    return;
                };
                let data = inc.take_data();
                rpc.state = ServerState::InService;
                if let Some(s) = self.sessions.get_mut(&peer) {
                    s.replay.mark(id);
                    s.stats.messages_received += 1;
                }
                let rpc = super::ServerRpcHandle { peer, id };
                self.events.push_back(Event::Request { rpc, data });
            }
        }
    }

    fn complete_client(&mut self, handle: super::RpcHandle, from: SocketAddr, id: u64) {
        let Some(ClientRpc {
            response: Some(mut inc),
            ..
        }) = self.clients.remove(&handle)
        else {
            return;
        };
        self.client_ids.remove(&(from, id));
        self.stats.rpcs_completed += 1;
        if let Some(s) = self.sessions.get_mut(&from) {
            s.stats.messages_received += 1;
            s.stats.rpcs_completed += 1;
        }
        self.queue_ack(from, id);
        self.events.push_back(Event::Response {
            rpc: handle,
            data: inc.take_data(),
        });
    }

    pub(crate) fn queue_ack(&mut self, peer: SocketAddr, id: u64) {
        let ids = self.pending_acks.entry(peer).or_default();
        ids.push(id);
        if ids.is_full() {
            let ids = std::mem::take(ids);
            self.queue_control(peer, 0, Body::Ack(ids));
        }
    }

    // ---- control ----

    fn on_control(
        &mut self,
        now: Instant,
        from: SocketAddr,
        id: u64,
        body: Body,
    ) -> Result<(), DropReason> {
        match body {
            Body::Ack(ids) => return self.on_ack(from, &ids),
            Body::Handshake { .. } | Body::Data(_) => return Err(DropReason::Unsupported),
            _ => {}
        }
        if self.is_local_id(from, id) {
            self.on_control_for_client(now, from, id, body)
        } else {
            self.on_control_for_server(from, id, body)
        }
    }

    /// A control packet about an RPC we started.
    fn on_control_for_client(
        &mut self,
        now: Instant,
        from: SocketAddr,
        id: u64,
        body: Body,
    ) -> Result<(), DropReason> {
        let Some(&handle) = self.client_ids.get(&(from, id)) else {
            return match body {
                Body::NeedAck
                    if self
                        .sessions
                        .get(&from)
                        .is_some_and(|s| s.ids.was_allocated(id)) =>
                {
                    self.queue_ack(from, id);
                    Ok(())
                }
                Body::Resend { .. } => {
                    self.queue_control(from, id, Body::RpcUnknown);
                    Err(DropReason::UnknownRpc)
                }
                _ => Err(DropReason::UnknownRpc),
            };
        };
        let rpc = self
            .clients
            .get_mut(&handle)
            .ok_or(DropReason::UnknownRpc)?;
        if body == Body::NeedAck {
            // The server believes it sent the whole response, but we are
            // still missing some of it: ask for it now rather than on the
            // next silent tick (and NEED_ACK is no sign of progress).
            let gaps = match &rpc.response {
                None => vec![(0, self.config.unscheduled_bytes)],
                Some(inc) => inc.gaps(8, self.config.unscheduled_bytes),
            };
            for (offset, length) in gaps {
                self.queue_control(
                    from,
                    id,
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
            Body::Grant { offset, .. } => rpc.request.grant(offset),
            Body::Resend { offset, length, .. } => rpc.request.resend(offset, length),
            Body::RpcUnknown => self.restart(now, handle),
            Body::Busy => {}
            _ => return Err(DropReason::Unsupported),
        }
        Ok(())
    }

    /// A control packet about an RPC the peer started.
    fn on_control_for_server(
        &mut self,
        from: SocketAddr,
        id: u64,
        body: Body,
    ) -> Result<(), DropReason> {
        let Some(rpc) = self.servers.get_mut(&(from, id)) else {
            // RPC_UNKNOWN makes the client resend the request under a new
            // ID, so it is only said for IDs never delivered, and the ID is
            // then retired: late packets of it can no longer start a second
            // execution. At most once, even across restarts.
            let Some(session) = self.sessions.get_mut(&from) else {
                return Err(DropReason::UnknownSession);
            };
            // A retired ID keeps getting RPC_UNKNOWN: the first answer may
            // have been lost.
            let fresh = session.replay.check(id) == ReplayCheck::Fresh;
            if matches!(body, Body::Resend { .. }) && (fresh || session.replay.is_retired(id)) {
                session.replay.retire(id);
                self.queue_control(from, id, Body::RpcUnknown);
            }
            return Err(DropReason::UnknownRpc);
        };
        rpc.silent_ticks = 0;
        match (body, &mut rpc.state) {
            (Body::Grant { offset, .. }, ServerState::Responding(out)) => out.grant(offset),
            (Body::Resend { offset, length, .. }, ServerState::Responding(out)) => {
                out.resend(offset, length)
            }
            (Body::Resend { .. }, _) => self.queue_control(from, id, Body::Busy),
            (Body::RpcUnknown, _) => {
                self.servers.remove(&(from, id));
            }
            (Body::Busy | Body::Grant { .. }, _) => {}
            _ => return Err(DropReason::Unsupported),
        }
        Ok(())
    }

    fn on_ack(&mut self, from: SocketAddr, ids: &AckIds) -> Result<(), DropReason> {
        for &id in ids.as_slice() {
            if !self.is_local_id(from, id) {
                self.servers.remove(&(from, id));
            }
        }
        Ok(())
    }

    /// The server lost our request: send it again under a fresh message ID
    /// (the old ID may never be reused under this key).
    fn restart(&mut self, now: Instant, handle: super::RpcHandle) {
        let Some(rpc) = self.clients.get(&handle) else {
            return;
        };
        let (peer, old_id, restarts, data) =
            (rpc.peer, rpc.id, rpc.restarts, rpc.request_data.clone());
        if restarts >= self.config.max_restarts {
            return self.fail_client(handle, RpcError::PeerLostRequest);
        }
        let Some(new_id) = self.sessions.get_mut(&peer).and_then(|s| s.ids.allocate()) else {
            return self.fail_client(handle, RpcError::IdSpaceExhausted);
        };
        let Ok(request) = self.seal(peer, new_id, &data) else {
            return self.fail_client(handle, RpcError::IdSpaceExhausted);
        };
        self.client_ids.remove(&(peer, old_id));
        self.client_ids.insert((peer, new_id), handle);
        if let Some(rpc) = self.clients.get_mut(&handle) {
            rpc.id = new_id;
            rpc.request = request;
            rpc.response = None;
            rpc.restarts += 1;
            rpc.silent_ticks = 0;
        }
        self.stats.requests_restarted += 1;
        self.arm_tick(now);
    }
}
