//! The SMT endpoint: a sans-IO state machine for many concurrent RPCs with
//! many peers over one datagram socket.
//!
//! # Call order
//! The driver owns the socket and the clock and loops:
//! 1. `handle_datagram(now, from, bytes)` for every datagram received;
//! 2. `handle_timeout(now)` once `now` reaches [`Endpoint::poll_timeout`];
//! 3. commands from the application: [`Endpoint::send_request`],
//!    [`Endpoint::send_response`], [`Endpoint::abort`],
//!    [`Endpoint::abandon_request`], [`Endpoint::flush_acks`],
//!    [`Endpoint::install_session`];
//! 4. drain outputs: [`Endpoint::poll_transmit`] until `None` (send each
//!    datagram), [`Endpoint::poll_event`] until `None`, with tracing on
//!    ([`Endpoint::set_tracing`]) [`Endpoint::poll_trace`] until `None`,
//!    then sleep until [`Endpoint::poll_timeout`] or the next datagram.
//!
//! Every call does bounded work: one datagram in, one datagram out, one
//! tick over the live RPCs.

mod admission;
mod credit;
mod event;
mod handshake;
mod limits;
mod offload;
mod outbox;
mod parts;
mod pathlet;
mod peer;
mod peers;
mod recv;
mod resolver;
mod scheduler;
mod send;
mod table;
mod tick;

use resolver::keys_are_reflectable;
pub use resolver::KeyResolver;

pub(crate) use crate::rpc::{ClientRpc, ServerRpc, ServerState};
use outbox::Outbox;
use scheduler::Scheduler;
use table::RpcTables;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use crate::buffers::{released_limit, Released};
use crate::config::{Config, ConfigError};
use crate::crypto::PacketCipher;
use crate::error::{DropReason, RpcError, SendError};
use crate::handshake::{Handshake, HandshakeAcceptor, HandshakeError};
use crate::offload::RxMark;
use crate::payload::Payload;
pub(crate) use crate::rpc::MsgKey;
use crate::rpc::ServerMsg;
pub use crate::rpc::{RpcHandle, ServerRpcHandle};
use crate::session::{Session, SessionKeys};
use crate::stats::Stats;
use crate::trace::{FreeReason, Traced};
use crate::wire::{Body, HandshakeKind};
use handshake::{Handshakes, Step};

use peer::{Offer, Origin, Peer};
pub(crate) use peers::PeerId;
use peers::Peers;
use recv::RpcParts;

pub use event::{Event, Transmit};
pub(crate) use parts::{
    keep_incoming, trace_event, HashMap, KEY_UPDATE_ANNOUNCE, KEY_UPDATE_CONFIRM,
};
use parts::{Buffers, Counters};

/// An SMT endpoint. See the module docs for the call order.
pub struct Endpoint {
    config: Config,
    /// `Config::message_len_limit`, worked out once: asked for every
    /// message sent and every DATA packet stored.
    len_limit: u64,
    /// Every peer with a session (keys), with its liveness and usage, and
    /// the per-address facts kept beside them (unvalidated sessions,
    /// unreachable peers, key updates to confirm).
    peers: Peers,
    /// The client and server RPCs (`table.rs`).
    rpcs: RpcTables,
    /// Control packets, ACK batches, prebuilt datagrams and events on
    /// their way out.
    outbox: Outbox,
    /// The send order and grant candidates.
    scheduler: Scheduler,
    /// The tick count and the timer table (`tick.rs`).
    time: tick::Time,
    /// Counters, the datagrams not yet added to them, and the trace.
    counters: Counters,
    /// Handshakes in progress, the acceptor, the retry key, the key
    /// resolver and handshake bytes waiting to leave.
    hs: handshake::HandshakeSide,
    /// What partially received messages hold, requests in service and
    /// credit (`limits.rs`, `credit.rs`).
    load: limits::Load,
    /// Memory kept to be reused: message buffers, segment lists, the
    /// receive batch's order.
    buffers: Buffers,
    /// What TLS offload keeps between calls (`offload.rs`).
    nic: offload::Nic,
}

impl Endpoint {
    /// A new endpoint. Fails if the configuration cannot work.
    pub fn new(config: Config) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self {
            len_limit: config.message_len_limit(),
            config,
            peers: Peers::default(),
            rpcs: RpcTables::default(),
            outbox: Outbox::default(),
            scheduler: Scheduler::default(),
            time: tick::Time::default(),
            counters: Counters::default(),
            hs: handshake::HandshakeSide::default(),
            load: limits::Load::default(),
            buffers: Buffers::default(),
            nic: offload::Nic::default(),
        })
    }

    // ---- getters ----

    /// How many requests `peer` lets us have outstanding at it (calls to it
    /// without their response): its latest CREDIT, or
    /// `Config::initial_credit` before any. A driver that keeps its calls
    /// to `peer` within this is not refused for load the server foresaw
    /// (`credit.rs`).
    pub fn credit(&self, peer: SocketAddr) -> u32 {
        self.load.credits.limit(peer, self.config.initial_credit)
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Endpoint-wide counters.
    pub fn stats(&self) -> &Stats {
        &self.counters.stats
    }

    /// Counters of one peer's session.
    pub fn peer_stats(&self, peer: SocketAddr) -> Option<Stats> {
        Some(self.tallied(peer, &self.peers.get(&peer)?.session.stats))
    }

    /// Every peer with a session and its counters, in no particular
    /// order, without the transmissions of a batch still being sent
    /// (which [`Endpoint::peer_stats`] adds): to rank peers, say. O(sessions).
    pub fn peers_stats(&self) -> impl Iterator<Item = (SocketAddr, &Stats)> + '_ {
        self.peers.iter().map(|(addr, p)| (*addr, &p.session.stats))
    }

    /// A peer's counters with the transmissions not yet added to them.
    fn tallied(&self, peer: SocketAddr, stats: &Stats) -> Stats {
        let mut stats = *stats;
        if self.counters.tx_tally.peer == Some(peer) {
            stats.datagrams_tx += self.counters.tx_tally.datagrams;
            stats.bytes_tx += self.counters.tx_tally.bytes;
        }
        stats
    }

    /// RPCs this endpoint started that are still in flight.
    pub fn client_rpcs(&self) -> usize {
        self.rpcs.clients.len()
    }

    /// Requests received and not yet freed (receiving, in service, or
    /// responding and waiting for the client's ACK).
    pub fn server_rpcs(&self) -> usize {
        self.rpcs.servers.len()
    }

    /// Bytes held for incoming messages (reassembly buffers and data not
    /// yet delivered), counted exactly: tests check `Stats::usage` against it.
    #[cfg(test)]
    pub(crate) fn incoming_buffered_bytes(&self) -> usize {
        let client = self
            .rpcs
            .clients
            .values()
            .filter_map(|c| c.response.as_ref());
        let server = self.rpcs.servers.values().filter_map(|s| match &s.state {
            ServerState::Receiving(inc) => Some(inc),
            _ => None,
        });
        client
            .chain(server)
            .map(crate::rpc::Incoming::buffered_bytes)
            .sum()
    }

    // ---- commands ----

    /// Installs (or replaces) the keys of the session with `peer`, like the
    /// paper's kTLS-style `setsockopt` after a handshake. Replacing keys
    /// resets the session's message-ID space and replay guard.
    pub fn install_session(
        &mut self,
        peer: SocketAddr,
        keys: SessionKeys,
    ) -> Result<(), SendError> {
        if keys_are_reflectable(&keys) {
            return Err(SendError::ReflectableKeys);
        }
        self.forget_peer_rpcs(peer);
        let session = Session::new(
            keys,
            self.config.seq_layout.id_limit(),
            self.config.replay_window,
        );
        // A handshake installs keys while its connection is still listed.
        let origin = match self.peers.handshakes.contains_key(&peer) {
            true => Origin::Handshake,
            false => Origin::Installed,
        };
        self.put_peer(peer, Peer::new(session, origin));
        Ok(())
    }

    // ---- handshakes (`handshake.rs` does the work, on the parts it lends) ----

    /// Starts a handshake with `peer` (the client side). Calls to a peer
    /// with a handshake in progress share it; [`Event::Connected`] or
    /// [`Event::HandshakeFailed`] says how it ended. `kind` names the
    /// protocol for the server's acceptor (see `kind`).
    pub fn connect(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        hs: Box<dyn Handshake>,
        kind: HandshakeKind,
    ) {
        if self.peers.handshakes.contains_key(&peer) {
            return;
        }
        self.trace_now(now);
        if self.peers.is_quarantined(now, peer) {
            return self.report_handshake_failed(peer, HandshakeError::Unreachable);
        }
        trace_event!(self, Traced::HandshakeStarted { peer, kind });
        let step = self.handshakes().start_initiator(peer, hs, kind);
        self.apply_handshake(now, step);
        self.arm_tick(now);
    }

    /// Whether a handshake with `peer` is in progress.
    pub fn is_connecting(&self, peer: SocketAddr) -> bool {
        self.peers
            .handshakes
            .get(&peer)
            .is_some_and(|c| !c.keys_installed())
    }

    /// Sets what answers handshakes from unknown peers (the server side).
    pub fn set_handshake_acceptor(&mut self, acceptor: Box<dyn HandshakeAcceptor>) {
        self.hs.acceptor = Some(acceptor);
    }

    /// Enables stateless retry (`Config::retry_above_handshakes`): tokens
    /// are MACed with `key`'s control MAC. Use a key only this endpoint
    /// holds, e.g. fresh random bytes at start-up (tokens then die with
    /// the endpoint, which is what they are for).
    pub fn set_retry_key(&mut self, key: Arc<dyn PacketCipher>) {
        self.hs.retry = Some(handshake::Retry::new(key));
    }

    /// The network says `peer` cannot be reached: an ICMP port or host
    /// unreachable came back for a datagram we sent it (the driver reads
    /// them with `IP_RECVERR`). Acted on only for an address we called
    /// (calls of ours are under way to it, or a handshake we started) and
    /// while nothing authenticated has come from it: then nothing speaks
    /// SMT there (a closed port, a host that is down, another service), and
    /// our calls to it fail at once with [`RpcError::Unreachable`] instead
    /// of each timing out, and our handshake with it fails with
    /// [`HandshakeError::Unreachable`] instead of retrying. A peer that has
    /// authenticated before may be restarting, and anyone who can forge
    /// ICMP could otherwise end its calls: its timers decide. A report
    /// about an address that only sent to us (a spoofed opening we
    /// answered, say) changes nothing but a counter: it is the answer to a
    /// stranger's claim, and no one else's calls or sessions depend on it.
    /// Returns whether anything failed. For `handshake_abort_ticks`
    /// afterwards, new calls and handshakes to the peer fail the same way
    /// without sending: an application that calls again at once does not
    /// turn the report into a stream of packets toward the address.
    ///
    /// [`RpcError::Unreachable`]: crate::RpcError::Unreachable
    pub fn peer_unreachable(&mut self, now: Instant, peer: SocketAddr) -> bool {
        self.counters.stats.unreachable_reports += 1;
        if self.peers.get(&peer).is_some_and(|p| p.proven) {
            return false;
        }
        let handshake = self
            .peers
            .handshakes
            .get(&peer)
            .is_some_and(|c| c.initiator && !c.keys_installed());
        let calls: Vec<RpcHandle> = match self.peers.contains_key(&peer) {
            // Our calls need a session with the peer.
            true => self
                .rpcs
                .clients
                .iter()
                .filter(|(_, c)| c.peer == peer)
                .map(|(h, _)| h)
                .collect(),
            false => Vec::new(),
        };
        if calls.is_empty() && !handshake {
            return false;
        }
        let until = now + self.config.tick * self.config.handshake_abort_ticks;
        self.peers.quarantine(now, peer, until);
        for &h in &calls {
            self.fail_client(h, crate::error::RpcError::Unreachable);
        }
        if handshake {
            self.fail_handshake(peer, HandshakeError::Unreachable);
        }
        true
    }

    /// The parts the handshake code works on (`handshake.rs`).
    #[inline]
    fn handshakes(&mut self) -> Handshakes<'_> {
        Handshakes {
            config: &self.config,
            peers: &mut self.peers,
            side: &mut self.hs,
            outbox: &mut self.outbox,
            stats: &mut self.counters.stats,
            time: &mut self.time,
        }
    }

    /// Carries out what a handshake step left to the endpoint.
    fn apply_handshake(&mut self, now: Instant, step: Step) {
        match step {
            Step::Nothing => {}
            Step::Finish { peer, keys, next } => {
                self.finish_handshake(now, peer, keys);
                self.handshakes().confirm_keys(peer);
                if let Some(next) = next {
                    self.handshakes().switch_to_next_keys(peer, next);
                }
            }
            Step::Fail { peer, error } => self.fail_handshake(peer, error),
            Step::Retried(peer) => self.resend_first_flight(peer),
            Step::Forgotten(peer) => self.drop_if_unvalidated(peer),
        }
    }

    /// A datagram from `from` that its established session refused: if a
    /// handshake holds new keys for `from`, it is either the proof that
    /// makes them current (then processed under them) or kept for after
    /// the proof. Returns whether the datagram was taken.
    fn offer_to_held_keys(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) -> bool {
        let held = match self.handshakes().offer_to_held_keys(from, datagram) {
            Offer::Refused => return false,
            Offer::Stashed => return true,
            Offer::Proof(held) => held,
        };
        tracing::debug!(peer = %from, "peer proved its address: new keys replace its session");
        self.finish_handshake(now, from, held.keys);
        if let Some(next) = held.next {
            self.handshakes().switch_to_next_keys(from, next);
        }
        self.handle_datagram(now, from, datagram);
        for d in held.stash {
            self.handle_datagram(now, from, &d);
        }
        true
    }

    /// Installs the keys a handshake with `peer` produced as its session
    /// (making room for it first), then handles the datagrams that came
    /// ahead of them.
    fn finish_handshake(&mut self, now: Instant, peer: SocketAddr, keys: SessionKeys) {
        if !self.peers.contains_key(&peer) && !self.make_room_for_session() {
            let error = HandshakeError::Protocol(
                "this endpoint holds as many sessions as max_sessions allows, none of them evictable".to_owned(),
            );
            return self.fail_handshake(peer, error);
        }
        if let Err(e) = self.install_session(peer, keys) {
            return self.fail_handshake(peer, HandshakeError::Protocol(e.to_string()));
        }
        let Some(pid) = self.peers.id(&peer) else {
            return;
        };
        let (early, budget) = self.handshakes().establish(peer, pid);
        tracing::debug!(%peer, "handshake complete, session keys installed");
        if let Some((p, budget)) = self.peers.at_mut(pid).zip(budget) {
            p.budget = budget; // one budget per address (docs/protocol.md § 4)
        }
        self.track_unvalidated(peer);
        self.counters.stats.handshakes_completed += 1;
        trace_event!(self, Traced::HandshakeDone { peer });
        self.outbox.push_event(Event::Connected { peer });
        for d in early {
            self.handle_datagram(now, peer, &d);
        }
    }

    /// Ends the handshake with `peer` (its alert goes out), and the
    /// session it made if that cannot stand (`Handshakes::end_with_alert`).
    fn fail_handshake(&mut self, peer: SocketAddr, error: HandshakeError) {
        tracing::debug!(%peer, %error, "handshake failed");
        if self.handshakes().end_with_alert(peer) {
            self.remove_session(peer);
        }
        self.report_handshake_failed(peer, error);
    }

    /// Counts, traces and tells the application that the handshake with
    /// `peer` failed.
    fn report_handshake_failed(&mut self, peer: SocketAddr, error: HandshakeError) {
        self.counters.stats.handshakes_failed += 1;
        trace_event!(
            self,
            Traced::HandshakeFailed {
                peer,
                error: error.clone(),
            }
        );
        self.outbox
            .push_event(Event::HandshakeFailed { peer, error });
    }

    /// Adds or replaces `addr`'s peer entry (`Peers` keeps the origin
    /// counts).
    fn put_peer(&mut self, addr: SocketAddr, peer: Peer) {
        self.load.credits.forget(addr);
        self.peers.insert(addr, peer);
        self.counters.stats.usage.sessions = self.peers.len() as u64;
    }

    /// Removes `addr`'s peer entry.
    fn take_peer(&mut self, addr: SocketAddr) -> Option<Peer> {
        let old = self.peers.remove(&addr)?;
        self.counters.stats.usage.sessions = self.peers.len() as u64;
        Some(old)
    }

    /// New keys for a peer start a new session: RPC state under the old
    /// keys (epoch numbers restart) is dropped; our calls fail with
    /// [`RpcError::SessionClosed`].
    fn forget_peer_rpcs(&mut self, peer: SocketAddr) {
        if !self.peers.contains_key(&peer) {
            return;
        }
        let Some(pid) = self.peers.id(&peer) else {
            return;
        };
        self.rpc_parts().forget_servers(pid, None);
        self.outbox.forget_acks(peer);
        self.rpc_parts().fail_clients(pid, None);
    }

    /// Sets the resolver asked for keys when a packet arrives from a peer
    /// without a session (the wildcard template of a server).
    pub fn set_key_resolver(&mut self, resolver: Box<dyn KeyResolver>) {
        self.hs.resolver = Some(resolver);
    }

    /// Removes the session with `peer`; its RPCs fail with
    /// [`RpcError::SessionClosed`] and its server state is freed.
    pub fn remove_session(&mut self, peer: SocketAddr) {
        self.forget_peer_rpcs(peer);
        self.take_peer(peer);
    }

    /// Starts an RPC: seals `data` as a request to `peer`.
    pub fn send_request<'a>(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        data: impl Into<Payload<'a>>,
    ) -> Result<RpcHandle, SendError> {
        self.trace_now(now);
        let data = data.into();
        let padded = self.check_len(data.len())?;
        let peer_id = self.peers.id(&peer).ok_or(SendError::NoSession)?;
        let (epoch, id) = self.allocate_id(peer_id)?;
        let data_len = data.len() as u64;
        let rpc = |request| ClientRpc::new((peer, peer_id), (epoch, id), request, now);
        let keep = |rpcs: &mut RpcTables, request| rpcs.clients.insert(rpc(request));
        let handle = self.seal_with(peer_id, (epoch, id), data, padded, keep)?;
        if let Some(r) = self.peers.rpcs_mut(peer_id) {
            r.add_client(epoch, id, handle);
        }
        trace_event!(
            self,
            Traced::RpcStarted {
                rpc: handle,
                peer,
                epoch,
                id,
                len: data_len,
            }
        );
        // A full ACK batch for the peer joins the request's datagram.
        if let Some(ids) = self.outbox.take_full_acks(peer, epoch) {
            self.queue_control(peer, epoch, 0, Body::Ack(ids));
        }
        // A fresh request always has bytes to send (its unscheduled part).
        if self.peers.is_quarantined(now, peer) {
            // The network said nothing answers there, a moment ago: fail
            // without sending (Endpoint::peer_unreachable).
            self.fail_client(handle, RpcError::Unreachable);
            return Ok(handle);
        }
        self.mark_sendable(MsgKey::Client(handle));
        self.arm_tick(now);
        Ok(handle)
    }

    /// Sets the priority the request of `rpc` carries in its DATA packets
    /// from now on (`docs/protocol.md` § 3: 0 is the default, larger is
    /// more urgent), for devices on the path that queue by priority; a
    /// restart keeps it. Call it right after [`Endpoint::send_request`],
    /// before the next `poll_transmit`, for every packet to carry it.
    /// Returns `false` if `rpc` is not a live RPC of ours.
    pub fn set_request_priority(&mut self, rpc: RpcHandle, priority: u8) -> bool {
        match self.rpcs.clients.get_mut(&rpc) {
            Some(c) => {
                c.request.priority = priority;
                true
            }
            None => false,
        }
    }

    /// Answers a request received as [`Event::Request`].
    pub fn send_response<'a>(
        &mut self,
        now: Instant,
        rpc: ServerRpcHandle,
        data: impl Into<Payload<'a>>,
    ) -> Result<(), SendError> {
        self.trace_now(now);
        let data = data.into();
        let padded = self.check_len(data.len())?;
        let slot = self.peers.server_slot(&rpc).ok_or(SendError::UnknownRpc)?;
        let peer_id = match self.rpcs.servers.with_peer(slot) {
            Some((peer_id, s)) if s.is_in_service() => peer_id,
            Some(_) => return Err(SendError::AlreadyResponded),
            None => return Err(SendError::UnknownRpc),
        };
        let keep = |rpcs: &mut RpcTables, response| {
            let s = rpcs.servers.get_mut(slot);
            s.map(|s| s.respond(response)).is_some()
        };
        if self.seal_with(peer_id, (rpc.epoch, rpc.id), data, padded, keep)? {
            self.load.in_service = self.load.in_service.saturating_sub(1);
        }
        // A fresh response always has bytes to send (its unscheduled part).
        self.mark_sendable(MsgKey::Server(ServerMsg { rpc, slot }));
        self.arm_tick(now);
        Ok(())
    }

    /// Abandons one of our RPCs (cancelled, or past the application's
    /// deadline). No event follows. Its state is freed at once, and the
    /// server is told with an RPC_UNKNOWN for the RPC's ID, on which it
    /// frees its own state and stops sending the response
    /// (`docs/protocol.md` § 10). If that packet is lost, the server's
    /// next RESEND or NEED_ACK about the ID gets the usual answer (RPC_UNKNOWN,
    /// ACK), or its state times out.
    pub fn abort(&mut self, rpc: RpcHandle) -> bool {
        let Some(c) = self.rpcs.clients.remove(&rpc) else {
            return false;
        };
        let key = c.key();
        self.rpc_parts().unindex_client(&c);
        trace_event!(
            self,
            Traced::RpcAborted {
                rpc,
                peer: key.peer,
                epoch: key.epoch,
                id: key.id,
            }
        );
        // A restart waiting for an ID has no request at the server.
        if !c.restart_pending {
            self.queue_control(key.peer, key.epoch, key.id, Body::RpcUnknown);
        }
        self.rpc_parts().recycle_client(c);
        true
    }

    /// Gives up on a request the application will not answer. Its state is
    /// freed; the ID stays in the replay guard, so the request is never
    /// executed again, and the client hears ABANDONED at once (its RPC
    /// fails with [`RpcError::Abandoned`]; a lost ABANDONED is sent again
    /// in answer to the client's next RESEND).
    pub fn abandon_request(&mut self, rpc: ServerRpcHandle) -> bool {
        let key = rpc;
        let Some(slot) = self.peers.server_slot(&key) else {
            return false;
        };
        if self
            .rpcs
            .servers
            .get(slot)
            .is_some_and(ServerRpc::is_in_service)
        {
            self.rpc_parts().drop_server_at(slot);
            self.rpc_parts().trace_freed(key, FreeReason::Abandoned);
            self.queue_control(key.peer, key.epoch, key.id, Body::Abandoned);
            return true;
        }
        false
    }

    /// Handles one receive batch (what one `recvmmsg` returned, GRO
    /// segments split, in order): validated addresses' datagrams first,
    /// then the heads of the other runs, then their tails, each in order,
    /// the last two within `Config::unvalidated_per_batch`
    /// (`admission.rs`). A datagram whose address authenticated earlier in
    /// the batch is handled whatever the budget.
    pub fn handle_batch<'a, I>(&mut self, now: Instant, batch: I)
    where
        I: Iterator<Item = (SocketAddr, &'a [u8])> + Clone,
    {
        let batch = batch.map(|(from, datagram)| (from, datagram, ()));
        admission::handle_batch_with(self, now, batch, |ep, now, from, datagram, ()| {
            ep.handle_datagram_each(now, from, datagram, |_| {});
        });
    }

    /// Queues every pending ACK batch now rather than when its delay
    /// (`Timer::AckDelay`, a tick) expires: for a driver about to close
    /// its socket, so that servers free the RPCs we completed at once
    /// instead of asking with NEED_ACK until `abort_ticks`.
    pub fn flush_acks(&mut self) {
        self.outbox.send_acks(self.config.local_port);
    }

    /// Hands back a buffer the endpoint delivered (an [`Event::Request`]'s
    /// or [`Event::Response`]'s data, once the application is done with
    /// it), so a later message reuses it instead of allocating. Optional:
    /// a buffer never handed back is simply freed by its owner.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        self.buffers.pool.give(buf);
    }

    // ---- outputs ----

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.outbox.pop_event()
    }

    /// Turns the event trace on or off ([`crate::trace`]); off by default.
    /// Turning it off drops the events not yet taken.
    pub fn set_tracing(&mut self, on: bool) {
        self.counters.trace = match (on, self.counters.trace.take()) {
            (true, Some(t)) => Some(t),
            (true, None) => Some(Box::new(crate::trace::Tracer::new(
                crate::trace::DEFAULT_TRACE_CAPACITY,
            ))),
            (false, _) => None,
        };
    }

    /// The next trace event, oldest first (`None` with tracing off).
    /// Drain it as often as [`Endpoint::poll_event`]: the queue holds
    /// [`crate::trace::DEFAULT_TRACE_CAPACITY`] events, and loses (and
    /// counts) the newest beyond that.
    pub fn poll_trace(&mut self) -> Option<crate::TraceEvent> {
        self.counters.trace.as_mut()?.pop()
    }

    /// When [`Endpoint::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.time.timers.next()
    }

    // ---- internals shared by the submodules ----

    /// Queues a trace event (tracing is on: see the `trace_event!` macro).
    #[cold]
    pub(crate) fn record_trace(&mut self, what: crate::trace::Traced) {
        let tick = self.time.ticks;
        if let Some(t) = self.counters.trace.as_mut() {
            t.push(tick, what);
        }
    }

    /// The call in progress carries `now`: trace events take their time
    /// from it.
    #[inline]
    pub(crate) fn trace_now(&mut self, now: Instant) {
        if let Some(t) = self.counters.trace.as_mut() {
            t.set_now(now);
        }
    }

    /// Checks that a `len`-byte message may be sent; returns its padded
    /// length (for `seal`, which need not work it out again).
    fn check_len(&self, len: usize) -> Result<u64, SendError> {
        let max = self.len_limit;
        let padded = self.config.padding.padded_len(len as u64);
        if padded > max {
            return Err(SendError::MessageTooLarge {
                len: len as u64,
                max,
            });
        }
        Ok(padded)
    }

    /// A message ID for a new RPC to `peer`, moving the session to its next
    /// key epoch first when the current one runs low on IDs or on AEAD
    /// usage and its predecessor has drained (KeyUpdate semantics, §4.5.2;
    /// `Peer::rekey_if_low`): the move is announced to the peer.
    pub(crate) fn allocate_id(&mut self, peer_id: PeerId) -> Result<(u64, u64), SendError> {
        let drained = self.previous_drained(peer_id);
        let (peer, session) = self.peers.entry_mut(peer_id).ok_or(SendError::NoSession)?;
        if let Some((epoch, first)) = session.rekey_if_low(drained) {
            tracing::debug!(%peer, epoch, "rekeyed: new key epoch, message IDs restart");
            if first {
                self.peers.key_updates.push(peer);
            }
            self.queue_control(peer, epoch, KEY_UPDATE_ANNOUNCE, Body::KeyUpdate);
            let by_peer = false;
            trace_event!(
                self,
                Traced::Rekeyed {
                    peer,
                    epoch,
                    by_peer
                }
            );
        }
        let session = self.peers.at_mut(peer_id).ok_or(SendError::NoSession)?;
        session.allocate_id()
    }

    /// Whether no RPC with `peer` still uses the previous key epoch.
    pub(crate) fn previous_drained(&self, peer_id: PeerId) -> bool {
        let Some(prev) = self
            .peers
            .at(peer_id)
            .and_then(|s| s.session.previous.as_ref())
            .map(|e| e.number)
        else {
            return true;
        };
        let Some(rpcs) = self.peers.at(peer_id).map(|p| &p.rpcs) else {
            return true;
        };
        let clients = rpcs
            .clients_in(prev)
            .filter_map(|h| self.rpcs.clients.get(&h))
            .any(|c| !c.restart_pending);
        !clients && !rpcs.has_server_in(prev)
    }

    pub(crate) fn arm_tick(&mut self, now: Instant) {
        self.time.arm_tick(now, self.config.tick);
    }

    /// Counts exactly what partially received messages hold (`limits.rs`).
    pub(crate) fn recount_usage(&mut self, now: Instant) {
        self.rpc_parts().recount_usage(now);
    }

    /// What the RPCs' own code works on (`recv/rpc.rs`).
    #[inline]
    pub(crate) fn rpc_parts(&mut self) -> RpcParts<'_> {
        RpcParts {
            config: &self.config,
            peers: &mut self.peers,
            rpcs: &mut self.rpcs,
            outbox: &mut self.outbox,
            time: &mut self.time,
            counters: &mut self.counters,
            load: &mut self.load,
            buffers: &mut self.buffers,
        }
    }

    pub(crate) fn drop_packet(&mut self, from: SocketAddr, reason: DropReason) {
        trace_event!(self, Traced::Dropped { peer: from, reason });
        tracing::debug!(%from, reason = reason.name(), "dropped packet");
        self.counters.stats.drops.add(reason);
        if let Some(s) = self.peers.get_mut(&from) {
            s.session.stats.drops.add(reason);
        }
    }

    /// Ends our call `rpc` with `error` (`RpcParts::fail_client`).
    pub(crate) fn fail_client(&mut self, rpc: RpcHandle, error: RpcError) {
        self.rpc_parts().fail_client(rpc, error);
    }

    /// A PATH_ECHO, checked: its pathlet feedback taken, and the messages
    /// it may have freed ranked again.
    pub(crate) fn on_path_echo(
        &mut self,
        now: Instant,
        pid: peers::PeerId,
        packet: &crate::wire::Packet<&[u8]>,
    ) -> Result<(), DropReason> {
        pathlet::on_path_echo(&mut self.pathlet_parts(), now, pid, packet)?;
        self.rescan_sendable();
        Ok(())
    }

    /// The parts pathlet feedback works on (`pathlet.rs`).
    fn pathlet_parts(&mut self) -> pathlet::Parts<'_> {
        pathlet::Parts {
            config: &self.config,
            peers: &mut self.peers,
            stats: &mut self.counters.stats,
            outbox: &mut self.outbox,
        }
    }

    /// Puts the PATH in front of a datagram with DATA (`pathlet.rs`):
    /// it has DATA if the count of DATA packets sent moved past
    /// `data_packets`.
    pub(crate) fn prepend_path(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        at: (usize, usize),
        to: SocketAddr,
        data_packets: u64,
    ) -> usize {
        let has_data = self.counters.stats.data_packets_tx != data_packets;
        pathlet::prepend_path(&mut self.pathlet_parts(), now, buf, at, to, has_data)
    }

    /// Queues a control packet about an RPC of key epoch `epoch`.
    pub(crate) fn queue_control(&mut self, peer: SocketAddr, epoch: u64, id: u64, body: Body) {
        let port = self.config.local_port;
        self.outbox.queue_control(port, peer, epoch, id, body);
    }
}

/// TLS offload: what a driver whose NIC seals or opens records asks
/// (and receive offload's batch call), thin calls over the read-only
/// `offload::View`.
impl Endpoint {
    /// [`Endpoint::handle_batch`] for datagrams a NIC has been through
    /// (receive offload): each comes with one [`RxMark`]
    /// per packet, in order (missing marks count as untouched). A packet
    /// marked with the key its RPC belongs to holds plaintext the NIC
    /// authenticated; any other mark is ignored, and the packet opened in
    /// software.
    pub fn handle_batch_marked<'a, I>(&mut self, now: Instant, batch: I)
    where
        I: Iterator<Item = (SocketAddr, &'a [u8], &'a [RxMark])> + Clone,
    {
        admission::handle_batch_with(self, now, batch, |ep, now, from, datagram, marks| {
            // Each packet's mark is in force while the packet is handled.
            let mut marks = marks.iter();
            ep.handle_datagram_each(now, from, datagram, |ep| {
                ep.nic.rx_mark = marks.next().and_then(|m| m.0);
            });
            ep.nic.rx_mark = None;
        });
    }

    /// The records of the DATA packet the last
    /// [`Endpoint::poll_transmit`] wrote, under `Config::tx_offload`
    /// (plaintext bodies, empty tags: the NIC must seal them before they
    /// leave); `None` if that datagram held no DATA packet. Taken: a
    /// second call returns `None`.
    pub fn take_tx_records(&mut self) -> Option<crate::offload::TxRecords> {
        self.nic.tx_records.take()
    }

    /// The first bytes of the record in which `tx`'s payload starts, up to
    /// the payload (as posted: header and plaintext), which a NIC replays
    /// to resync a context to the middle of that record. Empty when the
    /// payload starts a record; `None` if the message is no longer held.
    /// Valid until the next call that changes the endpoint.
    pub fn tx_record_prefix(&self, tx: &crate::offload::TxRecords) -> Option<&[u8]> {
        self.offload_view().tx_record_prefix(tx)
    }

    /// The transmit key of `peer`'s key epoch `epoch`: what a NIC seals
    /// that epoch's records with ([`PacketCipher::offload_key`]).
    pub fn tx_cipher(&self, peer: SocketAddr, epoch: u64) -> Option<&Arc<dyn PacketCipher>> {
        self.offload_view().tx_cipher(peer, epoch)
    }

    /// The receive key a packet from `peer` with key phase `phase` is
    /// opened with now, and its key epoch: what the NIC's receive context
    /// for them must hold. Marks ([`Endpoint::handle_batch_marked`]) name
    /// it by [`crate::offload::KeyId::of`].
    pub fn rx_cipher(
        &self,
        peer: SocketAddr,
        phase: bool,
    ) -> Option<(u64, &Arc<dyn PacketCipher>)> {
        self.offload_view().rx_cipher(peer, phase)
    }

    /// The sequence number of the record that starts `wire_offset` bytes
    /// into message `id` of `peer`'s key epoch `epoch`, for a NIC's resync
    /// request: a message's first record is always known; another one once
    /// the records before it have been opened (the NIC has followed the
    /// framing meanwhile and counts on from there). Walking the segments
    /// held finds most; an offset behind a missing record header is
    /// `NotYet` until that packet comes, and `Never` if the core then
    /// opens past it in one go.
    pub fn rx_record_seq(
        &self,
        peer: SocketAddr,
        epoch: u64,
        id: u64,
        wire_offset: u64,
    ) -> crate::offload::RecordSeq {
        let key = ServerRpcHandle { peer, epoch, id };
        let layout = self.config.seq_layout;
        self.offload_view().rx_record_seq(layout, key, wire_offset)
    }

    fn offload_view(&self) -> offload::View<'_> {
        offload::View {
            peers: &self.peers,
            rpcs: &self.rpcs,
        }
    }
}

/// Large buffers the endpoint is done with, handed to the driver to free
/// outside the calls that finish with them (see `buffers.rs`).
impl Endpoint {
    /// Whether the driver frees the endpoint's large buffers itself (off
    /// by default). When on, a buffer of a megabyte or more that a call
    /// is done with — a finished message's wire form, reassembly memory,
    /// a buffer handed back with [`Endpoint::recycle`], a large message the
    /// application handed over as owned bytes — is not freed in that call
    /// but kept for [`Endpoint::take_released`], which the driver calls
    /// after its calls and whose result it drops where freeing takes no
    /// one's time (outside the lock a threaded driver calls the endpoint
    /// under: freeing a 256 MiB buffer unmaps its pages, a tenth of a
    /// second or more). A driver that stops taking them loses nothing:
    /// once 256 MiB or four of the largest messages
    /// (`Config::max_message_len`) wait, whichever is more, they are freed
    /// in the next call that releases one. Off, they are freed where they
    /// are released, as small buffers always are (the pool keeps those for
    /// reuse); turning it off frees what is waiting.
    pub fn set_collect_released(&mut self, on: bool) {
        let limit = released_limit(self.config.max_message_len);
        self.buffers.pool.collect_released(on.then_some(limit));
    }

    /// Whether [`Endpoint::take_released`] would hand over anything: a
    /// driver skips taking and dropping an empty list on every release of
    /// its lock.
    pub fn has_released(&self) -> bool {
        self.buffers.pool.has_released()
    }

    /// The large buffers released since the last call (empty unless
    /// [`Endpoint::set_collect_released`] is on), to drop when the
    /// driver's time is its own. O(1): nothing is freed here.
    pub fn take_released(&mut self) -> Released {
        self.buffers.pool.take_released()
    }
}
