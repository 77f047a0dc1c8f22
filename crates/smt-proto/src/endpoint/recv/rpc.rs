//! The endpoint's side of one RPC's receive path, after `recv.rs` has
//! found the peer and parsed the header: the message a DATA packet goes to
//! made (a new server RPC for a fresh request, the response of one of our
//! calls), what storing it (`data.rs`) means for the message, a complete
//! one delivered; control packets about one RPC carried out on the
//! client's or the server's behalf (their decision tables are the RPCs'
//! own: `rpc/client.rs`, `rpc/server.rs`); ACKs of completed calls
//! batched; and an RPC's end, which every path shares (a call failed, a
//! request freed, their buffers kept for reuse).
//!
//! # Refused requests (issue #24, item 2)
//! The server refuses some requests unexecuted, and says so ever after.
//!
//! A request is refused when it completes while the application holds
//! `Config::max_pending_requests` (`refuse_request`), or when
//! its first packet to arrive is not admitted by the bounds on partial
//! requests and buffered bytes (`limits.rs`). Either way the ID is retired
//! *as refused* in the replay guard and the client hears OVERLOADED at
//! once: the request did not run and never will under that ID, so
//! retrying is safe. A later RESEND or DATA about the ID hears OVERLOADED
//! again (the first may have been lost), never ABANDONED ("may have
//! run"), even after the guard's floor has slid past the ID
//! (`ReplayWindow::is_refused`).

use std::time::Instant;

use super::super::limits::Charge;
use super::super::peers::PeerId;
use super::super::{
    keep_incoming, trace_event, ClientRpc, Endpoint, Event, MsgKey, RpcHandle, ServerRpc,
    ServerRpcHandle, ServerState,
};
use super::control::{self, Then};
use super::data::{
    receiving_in, store_in, store_parts, store_within_bounds, DataIn, Opened, StoreParts,
};
use super::packet::rpc_key;
use crate::error::DropReason;
use crate::error::RpcError;
use crate::rpc::{Incoming, ServerMsg, ServerSlot, MESSAGE_OVERHEAD};
use crate::session::ReplayCheck;
use crate::timer::Timer;
use crate::trace::{FreeReason, MessageKind, Traced};
use crate::wire::{AckIds, Body, DataHeader};

impl Endpoint {
    fn is_local_id(&self, peer: PeerId, id: u64) -> bool {
        self.peers
            .at(peer)
            .is_some_and(|s| s.session.is_local_id(id))
    }

    /// Stores a DATA packet of message `msg` (found by `on_data` or on the
    /// route), opens what it completes and delivers a complete message.
    /// Returns the message if it is still being received.
    pub(super) fn store_data(
        &mut self,
        d: DataIn<'_>,
        msg: MsgKey,
    ) -> Result<Option<MsgKey>, DropReason> {
        if u64::from(d.h.message_len) > self.config.message_len_limit() {
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
    pub(super) fn after_store(
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
            if !self.admit(d.now, d.pid, charge) {
                return Err(DropReason::OverLimit);
            }
            outcome = self.store_and_open(d, msg, true);
        }
        self.scheduler.mark_grants_dirty();
        if self.counters.trace.is_some() {
            let attempted = self.counters.stats.records_opened - opened_before;
            self.trace_opening(d.key, &outcome, attempted);
        }
        self.settle(d, msg, outcome)
    }

    /// What storing a DATA packet means for its message (decision table):
    /// kept, delivered, discarded, or forgotten if nothing of it ever
    /// authenticated.
    fn settle(
        &mut self,
        d: DataIn<'_>,
        msg: MsgKey,
        outcome: Result<Opened, DropReason>,
    ) -> Result<Option<MsgKey>, DropReason> {
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
                self.deliver(d.now, d.pid, msg, d.key);
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

    /// A DATA packet about one of our calls that we do not know: a replay
    /// if we ever allocated its ID, else unknown.
    pub(super) fn unknown_response(&self, pid: PeerId, key: ServerRpcHandle) -> DropReason {
        match control::was_allocated(&self.peers, pid, key) {
            true => DropReason::Replay,
            false => DropReason::UnknownRpc,
        }
    }

    /// The first packet of the response to our call `handle` to arrive:
    /// its message is admitted and made.
    pub(super) fn new_response(
        &mut self,
        d: DataIn<'_>,
        handle: RpcHandle,
    ) -> Result<MsgKey, DropReason> {
        self.admit_message(d.now, d.pid, false)?;
        let incoming = self.new_incoming(d.h);
        if let Some(rpc) = self.rpcs.clients.get_mut(&handle) {
            rpc.response = Some(incoming);
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

    /// The first packet of a request to arrive (no RPC holds its ID):
    /// replays are rejected here, before any decryption; else the server
    /// RPC is admitted and made.
    pub(super) fn new_request(&mut self, d: DataIn<'_>) -> Result<MsgKey, DropReason> {
        let (now, pid, key) = (d.now, d.pid, d.key);
        let session = self.peers.at(pid).ok_or(DropReason::UnknownSession)?;
        let epoch = session
            .session
            .epoch(key.epoch)
            .ok_or(DropReason::KeyPhase)?;
        if epoch.replay.check(key.id) == ReplayCheck::Replayed {
            self.answer_if_refused(key);
            return Err(DropReason::Replay);
        }
        if let Err(e) = self.admit_message(now, pid, true) {
            self.refuse_unadmitted(key);
            return Err(e);
        }
        let incoming = self.new_incoming(d.h);
        let slot = self.rpcs.servers.insert(key, pid, ServerRpc::new(incoming));
        let replaced = self
            .peers
            .rpcs_mut(pid)
            .and_then(|r| r.add_server(key.epoch, key.id, slot));
        if let Some(old) = replaced {
            // A stale index entry (its slot found nothing): the new RPC
            // takes its place.
            self.rpcs.servers.remove(old);
        }
        self.arm_tick(now);
        Ok(MsgKey::Server(ServerMsg { rpc: key, slot }))
    }

    fn new_incoming(&mut self, h: &DataHeader) -> Incoming {
        let cfg = &self.config;
        let list = self.buffers.segment_lists.pop().unwrap_or_default();
        Incoming::reuse(list, h, cfg.unscheduled_bytes, cfg.max_unopened_bytes)
    }

    /// A response whose only state came from a packet that failed to
    /// authenticate (perhaps forged, with made-up lengths): start over, so
    /// the genuine packets are not refused as inconsistent with it. (A
    /// server RPC keeps its state: removing it would turn the client's
    /// RESENDs into RPC_UNKNOWN and restarts.)
    fn forget_unauthenticated(&mut self, msg: MsgKey) {
        if let MsgKey::Client(h) = msg {
            if let Some(rpc) = self.rpcs.clients.get_mut(&h) {
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
                if let Some(rpc) = self.rpcs.clients.get_mut(&h) {
                    rpc.response = None;
                }
            }
            MsgKey::Server(m) => {
                self.drop_server_at(m.slot);
            }
        }
    }

    fn deliver(&mut self, now: Instant, pid: PeerId, msg: MsgKey, key: ServerRpcHandle) {
        self.counters.stats.messages_received += 1;
        match msg {
            MsgKey::Client(handle) => self.complete_client(now, handle, key),
            MsgKey::Server(m) => self.deliver_request(pid, m),
        }
    }

    /// A request is complete: the application gets it, unless it holds
    /// `Config::max_pending_requests` already (then it is refused).
    fn deliver_request(&mut self, pid: PeerId, m: ServerMsg) {
        let k = m.rpc;
        // No longer a partial request: its place is free now, not at the
        // next recount (a burst of small requests would otherwise fill
        // `max_incoming_per_peer` within a tick).
        let done = Charge {
            bytes: 0,
            requests: 1,
        };
        self.discharge(pid, done);
        let full = self.load.in_service >= self.config.max_pending_requests;
        let (credits, cx) = self.credits_with();
        credits.note_request(k.peer, full, cx);
        if full {
            self.refuse_request(pid, m);
            return;
        }
        if let Some(data) = self.start_service(m.slot) {
            self.hand_over_request(pid, k, data);
        }
    }

    /// The request in `slot` is complete: its data is taken (in place:
    /// moving an `Incoming` out is a copy of a few hundred bytes) and the
    /// RPC is in service. `None` if it is gone or not receiving.
    fn start_service(&mut self, slot: ServerSlot) -> Option<Vec<u8>> {
        let (servers, buffers, spare_segment_lists) = (
            &mut self.rpcs.servers,
            &mut self.buffers.pool,
            &mut self.buffers.segment_lists,
        );
        servers.get_mut(slot)?.start_service(|inc| {
            let data = inc.take_data();
            keep_incoming(buffers, spare_segment_lists, inc);
            data
        })
    }

    /// Gives a request in service to the application; its ID is marked
    /// delivered in the replay guard.
    fn hand_over_request(&mut self, pid: PeerId, k: ServerRpcHandle, data: Vec<u8>) {
        self.load.in_service += 1;
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
            if let Some(e) = s.session.epoch_mut(k.epoch) {
                e.replay.mark(k.id);
            }
            s.session.stats.messages_received += 1;
        }
        self.outbox.push_event(Event::Request { rpc: k, data });
    }

    /// Sheds a complete request while the application holds
    /// `Config::max_pending_requests`: it is never executed (its ID is
    /// retired as refused, so late copies are replays and a RESEND for it
    /// hears OVERLOADED again: see the module docs), its state is freed, and the
    /// client hears OVERLOADED.
    fn refuse_request(&mut self, pid: PeerId, m: ServerMsg) {
        let key = m.rpc;
        self.drop_server_at(m.slot);
        self.trace_freed(key, FreeReason::Overloaded);
        if let Some(epoch) = self
            .peers
            .at_mut(pid)
            .and_then(|s| s.session.epoch_mut(key.epoch))
        {
            epoch.replay.refuse(key.id);
        }
        self.count_refused(key);
        self.queue_control(key.peer, key.epoch, key.id, Body::Overloaded);
    }

    fn complete_client(&mut self, now: Instant, handle: RpcHandle, key: ServerRpcHandle) {
        let Some((data, started, pid)) = self.finish_client(handle) else {
            return;
        };
        let rtt = now.saturating_duration_since(started);
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
        self.counters.stats.rpcs_completed += 1;
        self.counters.stats.rtt.record(rtt);
        if let Some(s) = self.peers.at_mut(pid) {
            s.session.stats.messages_received += 1;
            s.session.stats.rpcs_completed += 1;
            s.session.stats.rtt.record(rtt);
        }
        self.queue_ack(now, key);
        self.outbox
            .push_event(Event::Response { rpc: handle, data });
    }

    /// Removes the completed call `handle` (emptied in place, not moved
    /// out of its slot: a copy of a few hundred bytes per RPC) and takes
    /// it out of its peer's index: its response's data, when it started
    /// and its peer.
    fn finish_client(&mut self, handle: RpcHandle) -> Option<(Vec<u8>, Instant, PeerId)> {
        let (clients, buffers, spare_segment_lists) = (
            &mut self.rpcs.clients,
            &mut self.buffers.pool,
            &mut self.buffers.segment_lists,
        );
        let done = clients.remove_with(&handle, |rpc| {
            let inc = rpc.response.as_mut()?;
            let data = inc.take_data();
            keep_incoming(buffers, spare_segment_lists, inc);
            rpc.request.recycle(buffers);
            Some((data, rpc.started, rpc.peer_id, rpc.epoch, rpc.id))
        });
        let (data, started, pid, epoch, id) = done??;
        if let Some(r) = self.peers.rpcs_mut(pid) {
            r.remove_client(epoch, id);
        }
        Some((data, started, pid))
    }

    /// Acknowledges a completed RPC: a full batch leaves at once, else
    /// the batch waits for [`Timer::AckDelay`].
    pub(crate) fn queue_ack(&mut self, now: Instant, key: ServerRpcHandle) {
        if let Some(ids) = self.outbox.add_ack(key.peer, key.epoch, key.id) {
            self.queue_control(key.peer, key.epoch, 0, Body::Ack(ids));
        } else if !self.time.timers.is_set(Timer::AckDelay) {
            self.time
                .timers
                .set(Timer::AckDelay, now + self.config.tick);
        }
    }

    /// Sends every pending ACK batch ([`Timer::AckDelay`] expired; see
    /// `Outbox::send_acks`).
    pub(crate) fn send_pending_acks(&mut self) {
        self.outbox.send_acks(self.config.local_port);
    }

    /// A control packet of a session (decision table): ACK and CREDIT
    /// are the peer's as a whole, the rest about one RPC of ours or of the
    /// peer's.
    pub(super) fn on_control(
        &mut self,
        now: Instant,
        pid: PeerId,
        key: ServerRpcHandle,
        local: bool,
        body: Body,
    ) -> Result<(), DropReason> {
        match body {
            Body::Ack(ids) => return self.on_ack(pid, key, &ids),
            Body::Credit { limit, sequence } => {
                let credit = (limit, sequence);
                return self
                    .load
                    .credits
                    .on_credit(key.peer, credit, &mut self.counters.stats);
            }
            Body::Handshake { .. } | Body::Data(_) | Body::KeyUpdate => {
                return Err(DropReason::Unsupported)
            }
            _ => {}
        }
        let parts = control::Parts {
            peers: &mut self.peers,
            rpcs: &mut self.rpcs,
            config: &self.config,
            ticks: self.time.ticks,
        };
        let (then, result) = match local {
            true => control::for_client(parts, pid, key, body),
            false => control::for_server(parts, pid, key, body),
        };
        self.apply_control(now, key, then);
        result
    }

    /// Carries out what a control packet about the RPC `key` decided
    /// (`control.rs`).
    fn apply_control(&mut self, now: Instant, key: ServerRpcHandle, then: Then) {
        match then {
            Then::Nothing => {}
            Then::Sendable(msg) => self.mark_sendable(msg),
            Then::Restart(handle) => self.restart(now, handle),
            Then::Fail(handle, e) => self.fail_client(handle, e),
            Then::Resend(k, gaps) => self.queue_resends(k, gaps),
            Then::Ack(k) => self.queue_ack(now, k),
            Then::Say(body) => self.queue_control(key.peer, key.epoch, key.id, body),
            Then::ClientGone { slot, cancelled } => {
                self.drop_server_at(slot);
                self.trace_freed(key, FreeReason::ClientGone);
                if cancelled {
                    self.outbox.push_event(Event::RequestCancelled { rpc: key });
                }
            }
        }
    }

    pub(super) fn on_ack(
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

    // ---- refused requests ----

    /// The first packet of a new request was not admitted (the peer's or
    /// the endpoint's bounds are full): refuse the request. The packet
    /// is unauthenticated, so an ID more than one replay window past the
    /// guard's range is left alone (dropped unanswered, as before): retiring
    /// it would slide the guard past IDs the genuine client has yet to
    /// send. A client within its credit (`credit.rs`) never sends that far
    /// ahead.
    pub(crate) fn refuse_unadmitted(&mut self, key: ServerRpcHandle) {
        let Some(epoch) = self
            .peers
            .get_mut(&key.peer)
            .and_then(|s| s.session.epoch_mut(key.epoch))
        else {
            return;
        };
        if epoch.replay.windows_ahead(key.id) > 1 {
            return;
        }
        epoch.replay.refuse(key.id);
        self.count_refused(key);
        let (credits, cx) = self.credits_with();
        credits.note_request(key.peer, true, cx);
        self.queue_control(key.peer, key.epoch, key.id, Body::Overloaded);
    }

    /// Counts a refused request, for the endpoint and its peer.
    pub(crate) fn count_refused(&mut self, key: ServerRpcHandle) {
        self.counters.stats.requests_refused += 1;
        if let Some(s) = self.peers.get_mut(&key.peer) {
            s.session.stats.requests_refused += 1;
        }
    }

    /// Whether `key` names a request we refused; if so, says OVERLOADED
    /// again (a packet about it means the client has not heard).
    pub(crate) fn answer_if_refused(&mut self, key: ServerRpcHandle) -> bool {
        let refused = self
            .peers
            .get(&key.peer)
            .and_then(|s| s.session.epoch(key.epoch))
            .is_some_and(|e| e.replay.is_refused(key.id));
        if refused {
            self.queue_control(key.peer, key.epoch, key.id, Body::Overloaded);
        }
        refused
    }

    // ---- an RPC's end (shared by every path: recv, tick, the verbs) ----

    /// Frees the peer's requests (of key epoch `epoch`, or all) without
    /// a word to it: their session or epoch ends. Those the application
    /// held leave `Load::in_service` (found through the peer's index: no
    /// recount over every RPC).
    pub(crate) fn forget_servers(&mut self, pid: PeerId, epoch: Option<u64>) {
        let Some(slots) = self.peers.at(pid).map(|p| p.rpcs.servers_of(epoch)) else {
            return;
        };
        for slot in slots {
            if let Some((rkey, rpc)) = self.rpcs.servers.remove(slot) {
                if rpc.is_in_service() {
                    self.load.in_service = self.load.in_service.saturating_sub(1);
                }
                if let Some(r) = self.peers.rpcs_mut(pid) {
                    r.remove_server(rkey.epoch, rkey.id, slot);
                }
            }
        }
    }

    /// Fails our calls to the peer (of key epoch `epoch`, or all): their
    /// session or epoch ends.
    pub(crate) fn fail_clients(&mut self, pid: PeerId, epoch: Option<u64>) {
        let Some(gone) = self.peers.at(pid).map(|p| p.rpcs.clients_of(epoch)) else {
            return;
        };
        for h in gone {
            self.fail_client(h, RpcError::SessionClosed);
        }
    }

    pub(crate) fn fail_client(&mut self, rpc: RpcHandle, error: RpcError) {
        if let Some(c) = self.rpcs.clients.remove(&rpc) {
            let key = c.key();
            self.unindex_client(&c);
            if let Some(s) = self.peers.at_mut(c.peer_id) {
                s.session.stats.rpcs_failed += 1;
            }
            self.recycle_client(c);
            self.counters.stats.rpcs_failed += 1;
            trace_event!(
                self,
                Traced::RpcFailed {
                    rpc,
                    peer: key.peer,
                    epoch: key.epoch,
                    id: key.id,
                    error: error.clone(),
                }
            );
            self.outbox.push_event(Event::Failed { rpc, error });
        }
    }

    /// Takes a client RPC (removed from its table) out of its peer's index.
    pub(crate) fn unindex_client(&mut self, c: &ClientRpc) {
        if let Some(r) = self.peers.rpcs_mut(c.peer_id) {
            r.remove_client(c.epoch, c.id);
        }
    }

    /// Keeps a finished client RPC's buffers for later RPCs.
    pub(crate) fn recycle_client(&mut self, mut rpc: ClientRpc) {
        rpc.request.recycle(&mut self.buffers.pool);
        if let Some(inc) = rpc.response.take() {
            self.recycle_incoming(inc);
        }
    }

    /// Keeps a finished incoming message's buffers and segment list.
    pub(crate) fn recycle_incoming(&mut self, mut inc: Incoming) {
        keep_incoming(
            &mut self.buffers.pool,
            &mut self.buffers.segment_lists,
            &mut inc,
        );
    }

    /// Frees the server RPC `key`, keeping its buffers for later RPCs;
    /// returns whether it existed.
    pub(crate) fn drop_server(&mut self, key: &ServerRpcHandle) -> bool {
        match self.peers.server_slot(key) {
            Some(slot) => self.drop_server_at(slot),
            None => false,
        }
    }

    /// Frees the server RPC in `slot` (see [`Endpoint::drop_server`]).
    /// Its buffers are taken in place (the RPC is not moved out of its
    /// slot: a copy of a few hundred bytes per RPC).
    pub(crate) fn drop_server_at(&mut self, slot: ServerSlot) -> bool {
        let (servers, buffers, spare_segment_lists, in_service) = (
            &mut self.rpcs.servers,
            &mut self.buffers.pool,
            &mut self.buffers.segment_lists,
            &mut self.load.in_service,
        );
        let freed = servers.remove_with(slot, |rpc| match &mut rpc.state {
            ServerState::Receiving(inc) => keep_incoming(buffers, spare_segment_lists, inc),
            ServerState::Responding(out) => out.recycle(buffers),
            ServerState::InService => *in_service = in_service.saturating_sub(1),
        });
        let Some((rkey, ())) = freed else {
            return false;
        };
        if let Some(r) = self.peers.rpcs_mut(rkey.peer) {
            r.remove_server(rkey.epoch, rkey.id, slot);
        }
        true
    }

    /// Traces the end of a server RPC (freed by the caller).
    pub(crate) fn trace_freed(&mut self, key: ServerRpcHandle, reason: FreeReason) {
        trace_event!(
            self,
            Traced::ServerFreed {
                peer: key.peer,
                epoch: key.epoch,
                id: key.id,
                reason,
            }
        );
    }
}
