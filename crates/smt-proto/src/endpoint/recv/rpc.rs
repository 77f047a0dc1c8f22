//! The RPCs' side of the receive path, after `recv.rs` has found the peer
//! and parsed the header and `data.rs` has stored a DATA packet: what the
//! stored packet means for its message ([`Settled::of`]), a new
//! message made (a server RPC for a fresh request, the response of one of
//! our calls), a complete one handed over, requests refused, ACKs batched;
//! an RPC's end, which every path shares, is in `end.rs`.
//!
//! These are methods of [`RpcParts`]: the RPC tables with the parts an
//! RPC's life touches (the peers' RPC index, replay guards and counters,
//! the buffers, the outbox, the timers), lent by `Endpoint::rpc_parts`.
//! Admitting a new message and delivering a complete one, which need the
//! bounds' ledger and credit, are in `admit.rs`; what needs the scheduler
//! or the NIC (storing a packet) stays with the endpoint's DATA path in
//! `recv.rs`. The order of calls for one DATA packet is in
//! `docs/architecture.md`.
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

use super::super::limits::Load;
use super::super::outbox::Outbox;
use super::super::parts::{Buffers, Counters};
use super::super::peers::{PeerId, Peers};
use super::super::table::RpcTables;
use super::super::tick::Time;
use super::super::{keep_incoming, trace_event, Event, MsgKey, RpcHandle, ServerRpcHandle};
use super::control;
use super::data::Opened;
use super::packet::rpc_key;
use crate::config::Config;
use crate::error::DropReason;
use crate::rpc::{ServerMsg, ServerSlot};
use crate::session::ReplayCheck;
use crate::stats::RttSample;
use crate::trace::{FreeReason, MessageKind, Traced};
use crate::wire::{AckIds, Body};

/// What an RPC's life works on, borrowed from the endpoint field by field:
/// the RPC tables, the peers (their RPC index, replay guards, counters),
/// the memory kept for reuse, the load (the bounds' ledger, credit, the
/// requests in service), the outbox (events, control packets, ACK
/// batches), the timers and the counters with the trace. Not the
/// scheduler, the handshakes or the NIC: what needs those is the
/// endpoint's (`recv.rs`).
pub(crate) struct RpcParts<'a> {
    pub(in crate::endpoint) config: &'a Config,
    pub(in crate::endpoint) peers: &'a mut Peers,
    pub(in crate::endpoint) rpcs: &'a mut RpcTables,
    pub(in crate::endpoint) outbox: &'a mut Outbox,
    pub(in crate::endpoint) time: &'a mut Time,
    pub(in crate::endpoint) counters: &'a mut Counters,
    /// The bounds' ledger, credit and the requests the application holds
    /// (`admit.rs` admits and delivers with them).
    pub(in crate::endpoint) load: &'a mut Load,
    pub(in crate::endpoint) buffers: &'a mut Buffers,
}

/// What a stored DATA packet means for its message ([`Settled::of`]).
pub(super) enum Settled {
    /// Still being received.
    Receiving,
    /// Complete: the endpoint delivers it.
    Complete,
    /// The packet is dropped; the message stays as it is.
    Dropped(DropReason),
    /// The message's records disagree with its lengths: the packet is
    /// dropped and the message starts over ([`RpcParts::discard_incoming`]).
    Discard(DropReason),
    /// The packet failed to authenticate and nothing of its message ever
    /// did: a response starts over ([`RpcParts::forget_unauthenticated`]).
    Forget,
}

impl Settled {
    /// What storing a DATA packet means for its message (decision table):
    /// kept, complete, discarded, or forgotten if nothing of it ever
    /// authenticated.
    #[inline]
    pub(super) fn of(outcome: Result<Opened, DropReason>) -> Self {
        match outcome {
            Err(e) => Self::Dropped(e),
            Ok(Opened::Stored | Opened::NeedsRoom(_)) => Self::Receiving,
            Ok(Opened::Complete) => Self::Complete,
            Ok(Opened::Discard(e)) => Self::Discard(e),
            Ok(Opened::Failed {
                nothing_authenticated: true,
            }) => Self::Forget,
            Ok(Opened::Failed { .. }) => Self::Dropped(DropReason::AuthFailure),
        }
    }
}

/// A DATA packet about one of our calls that we do not know: a replay if
/// we ever allocated its ID, else unknown.
pub(super) fn unknown_response(peers: &Peers, pid: PeerId, key: ServerRpcHandle) -> DropReason {
    match control::was_allocated(peers, pid, key) {
        true => DropReason::Replay,
        false => DropReason::UnknownRpc,
    }
}

impl RpcParts<'_> {
    /// Queues a trace event (tracing is on: see the `trace_event!` macro).
    #[cold]
    pub(crate) fn record_trace(&mut self, what: Traced) {
        let tick = self.time.ticks;
        if let Some(t) = self.counters.trace.as_mut() {
            t.push(tick, what);
        }
    }

    /// Queues a control packet about an RPC of key epoch `epoch`.
    #[inline]
    pub(super) fn queue_control(&mut self, key: ServerRpcHandle, body: Body) {
        let port = self.config.local_port;
        let (peer, epoch, id) = (key.peer, key.epoch, key.id);
        self.outbox.queue_control(port, peer, epoch, id, body);
    }

    // ---- a stored DATA packet ----

    /// Traces what storing a DATA packet opened, or failed to open.
    /// `attempted`: records whose opening was tried (opening stops at the
    /// first that fails).
    #[cold]
    pub(super) fn trace_opening(
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

    /// A response whose only state came from a packet that failed to
    /// authenticate (perhaps forged, with made-up lengths): start over, so
    /// the genuine packets are not refused as inconsistent with it. (A
    /// server RPC keeps its state: removing it would turn the client's
    /// RESENDs into RPC_UNKNOWN and restarts.)
    pub(super) fn forget_unauthenticated(&mut self, msg: MsgKey) {
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
    pub(super) fn discard_incoming(&mut self, msg: MsgKey) {
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

    // ---- a new message ----

    /// The first packet of a request to arrive (no RPC holds its ID):
    /// `Err` if its ID was used before (a replay, rejected before any
    /// decryption; a refused one hears OVERLOADED again) or its session or
    /// key epoch is gone.
    #[inline]
    pub(super) fn check_new_request(
        &mut self,
        pid: PeerId,
        key: ServerRpcHandle,
    ) -> Result<(), DropReason> {
        let session = self.peers.at(pid).ok_or(DropReason::UnknownSession)?;
        let epoch = session
            .session
            .epoch(key.epoch)
            .ok_or(DropReason::KeyPhase)?;
        if epoch.replay.check(key.id) == ReplayCheck::Replayed {
            self.answer_if_refused(key);
            return Err(DropReason::Replay);
        }
        Ok(())
    }

    // ---- a complete message ----

    /// A complete request whose place among partial requests is freed
    /// and credit noted: refused if the application holds
    /// `Config::max_pending_requests` already (`full`), else handed over.
    #[inline]
    pub(super) fn serve_or_refuse(&mut self, pid: PeerId, m: ServerMsg, full: bool) {
        if full {
            self.refuse_request(pid, m);
            return;
        }
        if let Some(data) = self.start_service(m.slot) {
            self.hand_over_request(pid, m.rpc, data);
        }
    }

    /// The request in `slot` is complete: its data is taken (in place:
    /// moving an `Incoming` out is a copy of a few hundred bytes) and the
    /// RPC is in service. `None` if it is gone or not receiving.
    #[inline]
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
    #[inline]
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
        self.queue_control(key, Body::Overloaded);
    }

    /// The response to our call `handle` is complete: the call ends, the
    /// application gets the response, and the server an ACK.
    #[inline]
    pub(super) fn complete_client(
        &mut self,
        now: Instant,
        handle: RpcHandle,
        key: ServerRpcHandle,
    ) {
        let Some((data, started, pid)) = self.finish_client(handle) else {
            return;
        };
        let rtt = RttSample::of(now.saturating_duration_since(started));
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
        self.counters.stats.rtt.record_sample(rtt);
        if let Some(s) = self.peers.at_mut(pid) {
            s.session.stats.messages_received += 1;
            s.session.stats.rpcs_completed += 1;
            s.session.stats.rtt.record_sample(rtt);
        }
        self.queue_ack(now, key);
        self.outbox
            .push_event(Event::Response { rpc: handle, data });
    }

    /// Removes the completed call `handle` (emptied in place, not moved
    /// out of its slot: a copy of a few hundred bytes per RPC) and takes
    /// it out of its peer's index: its response's data, when it started
    /// and its peer.
    #[inline]
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

    // ---- ACKs ----

    /// Acknowledges a completed RPC: the batch waits for
    /// `Timer::AckDelay` (with the next tick) or, once full, for the next request to the peer
    /// (`Endpoint::send_request`); a 17th ID sends the full batch at once.
    #[inline(always)]
    pub(in crate::endpoint) fn queue_ack(&mut self, now: Instant, key: ServerRpcHandle) {
        if let Some(ids) = self.outbox.add_ack(key.peer, key.epoch, key.id) {
            self.queue_control(ServerRpcHandle { id: 0, ..key }, Body::Ack(ids));
        }
        self.time.arm_ack_delay(now, self.config.tick);
    }

    /// The peer acknowledged the responses `ids`: their requests are freed.
    #[inline]
    pub(super) fn on_ack(&mut self, pid: PeerId, key: ServerRpcHandle, ids: &AckIds) {
        for &id in ids.as_slice() {
            let done = ServerRpcHandle { id, ..key };
            if self.peers.is_local_id(pid, id) {
                continue;
            }
            let slot = self.peers.server(&rpc_key(pid, &done));
            if slot.is_some_and(|s| self.drop_server_at(s)) {
                self.trace_freed(done, FreeReason::Acked);
            }
        }
    }

    /// The client is done with its request `key` in `slot` (or cancelled
    /// it): the request is freed.
    pub(in crate::endpoint) fn client_gone(
        &mut self,
        key: ServerRpcHandle,
        slot: ServerSlot,
        cancelled: bool,
    ) {
        self.drop_server_at(slot);
        self.trace_freed(key, FreeReason::ClientGone);
        if cancelled {
            self.outbox.push_event(Event::RequestCancelled { rpc: key });
        }
    }

    // ---- refused requests ----

    /// The first packet of a new request was not admitted (the peer's or
    /// the endpoint's bounds are full): retires its ID as refused and
    /// counts it; returns whether it did (the endpoint then notes the
    /// refusal in credit and says OVERLOADED). The packet is
    /// unauthenticated, so an ID more than one replay window past the
    /// guard's range is left alone (dropped unanswered, as before): retiring
    /// it would slide the guard past IDs the genuine client has yet to
    /// send. A client within its credit (`credit.rs`) never sends that far
    /// ahead.
    pub(super) fn refuse_unadmitted(&mut self, key: ServerRpcHandle) -> bool {
        let Some(epoch) = self
            .peers
            .get_mut(&key.peer)
            .and_then(|s| s.session.epoch_mut(key.epoch))
        else {
            return false;
        };
        if epoch.replay.windows_ahead(key.id) > 1 {
            return false;
        }
        epoch.replay.refuse(key.id);
        self.count_refused(key);
        true
    }

    /// Counts a refused request, for the endpoint and its peer.
    fn count_refused(&mut self, key: ServerRpcHandle) {
        self.counters.stats.requests_refused += 1;
        if let Some(s) = self.peers.get_mut(&key.peer) {
            s.session.stats.requests_refused += 1;
        }
    }

    /// Whether `key` names a request we refused; if so, says OVERLOADED
    /// again (a packet about it means the client has not heard).
    fn answer_if_refused(&mut self, key: ServerRpcHandle) -> bool {
        let refused = self
            .peers
            .get(&key.peer)
            .and_then(|s| s.session.epoch(key.epoch))
            .is_some_and(|e| e.replay.is_refused(key.id));
        if refused {
            self.queue_control(key, Body::Overloaded);
        }
        refused
    }
}
