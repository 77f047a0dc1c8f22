//! `handle_timeout`: the one match over [`Timer`], and the housekeeping
//! tick. Each RPC judges its own silence (`ClientRpc::on_tick`,
//! `ServerRpc::on_tick`, the rules in `rpc/silence.rs`); the tick carries
//! out what they decide. Restarts (from RPC_UNKNOWN, or pending here) are
//! here too.

use std::net::SocketAddr;
use std::time::Instant;

use super::peer::Origin;
use super::peers::PeerId;
use super::{trace_event, Endpoint, MsgKey, RpcHandle, ServerRpcHandle};
use crate::error::{DropReason, RpcError, SendError};
use crate::payload::Payload;
// The handshake paces its retransmissions by the same rule.
pub(crate) use crate::rpc::is_resend_tick;
use crate::rpc::{ClientTick, Outgoing, ServerTick, Silence};
use crate::timer::Timer;
use crate::trace::Traced;
use crate::wire::Body;

/// The endpoint's sense of time: ticks so far and the timer table.
#[derive(Default)]
pub(crate) struct Time {
    /// Ticks so far (paces keep-alives).
    pub(crate) ticks: u64,
    pub(crate) timers: crate::timer::TimerTable,
    /// Expiries handled, by [`Timer`] (`Timer::slot`): what wakes a driver,
    /// counted for tests and `Endpoint::timer_expiries`.
    pub(crate) fired: [u64; 3],
}

impl Time {
    /// Arms the housekeeping tick `tick` after `now`, unless it is armed.
    #[inline]
    pub(crate) fn arm_tick(&mut self, now: Instant, tick: std::time::Duration) {
        if !self.timers.is_set(Timer::Tick) {
            self.timers.set(Timer::Tick, now + tick);
        }
    }

    /// Arms the ACK delay for a batch's first ACK, unless it is armed: with
    /// the tick when the tick is armed (at most `tick` away, since it is
    /// armed `tick` ahead), else `tick` after `now`. Both timers then go off
    /// in one `handle_timeout`: a driver wakes once a tick, not twice.
    #[inline]
    pub(crate) fn arm_ack_delay(&mut self, now: Instant, tick: std::time::Duration) {
        if self.timers.is_set(Timer::AckDelay) {
            return;
        }
        let at = self.timers.deadline(Timer::Tick).unwrap_or(now + tick);
        self.timers.set(Timer::AckDelay, at);
    }
}

/// What a tick decided for one RPC.
enum Action {
    None,
    /// Repeat our grant for a response we starve (`ClientTick::KeepAlive`).
    KeepAlive(ServerRpcHandle, u32),
    Resend(ServerRpcHandle, Vec<(u32, u32)>),
    NeedAck(ServerRpcHandle),
    FailClient(RpcHandle),
    FreeServer(ServerRpcHandle),
}

impl Endpoint {
    /// How often each timer went off since the endpoint was made, by name
    /// (`Tick`, `IdleSweep`, `AckDelay`): the causes of a driver's timer
    /// wake-ups, for benchmarks and tests. Not a stable interface.
    #[doc(hidden)]
    pub fn timer_expiries(&self) -> [(&'static str, u64); 3] {
        let f = &self.time.fired;
        [("Tick", f[0]), ("IdleSweep", f[1]), ("AckDelay", f[2])]
    }

    /// Handles every timer expired at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.trace_now(now);
        while let Some(timer) = self.time.timers.pop_expired(now) {
            self.time.fired[timer.slot()] += 1;
            match timer {
                Timer::Tick => self.tick(now),
                Timer::IdleSweep => self.sweep_idle_sessions(now),
                Timer::AckDelay => self.outbox.send_acks(self.config.local_port),
            }
        }
    }

    fn tick(&mut self, now: Instant) {
        self.time.ticks += 1;
        self.counters.stats.usage.spare_buffer_bytes = self.buffers.pool.pooled_bytes() as u64;
        if self.config.pathlet_feedback {
            self.tick_pathlets(now);
        }
        self.rescan_sendable();
        // Counted from live candidates (stale ones pruned), so messages of
        // a peer that timed out stop making the rest look starved; and
        // grants are re-ranked at the next transmit, so those freed places
        // go to waiting messages even if no data arrives.
        let live = (self.scheduler).live_grant_candidates(&self.rpcs.clients, &self.rpcs.servers);
        let crowded = live.len() > self.config.overcommit;
        self.scheduler.mark_grants_dirty_if_any();
        self.restart_pending(now);
        let silence = self.silence(crowded);
        self.tick_rpcs(now, &silence);
        self.tick_handshakes(now);
        self.expire_unproven();
        self.tick_key_updates();
        self.rpc_parts().sweep_credits();
        // Frees since the last tick (completions, ACKs, aborts, this
        // tick's expiries) are seen here; between ticks the usage figures
        // only grow.
        self.recount_usage(now);
        if self.has_work_for_ticks() {
            self.time.timers.set(Timer::Tick, now + self.config.tick);
        }
    }

    /// Restarts the RPCs whose restart waited for a key epoch to drain.
    fn restart_pending(&mut self, now: Instant) {
        let pending: Vec<RpcHandle> = self
            .rpcs
            .clients
            .iter()
            .filter(|(_, c)| c.restart_pending)
            .map(|(h, _)| h)
            .collect();
        for h in pending {
            self.restart(now, h);
        }
    }

    /// Judges every RPC's silence first, then acts: acting (failing a
    /// client, freeing a server) changes the tables being walked.
    fn tick_rpcs(&mut self, now: Instant, silence: &Silence) {
        let mut actions = Vec::new();
        let handles: Vec<RpcHandle> = self.rpcs.clients.keys().collect();
        for h in handles {
            actions.push(self.tick_client(h, silence));
        }
        let keys: Vec<ServerRpcHandle> = self.rpcs.servers.keys().copied().collect();
        for k in keys {
            actions.push(self.tick_server(k, silence));
        }
        for action in actions {
            self.apply(now, action);
        }
    }

    /// Whether anything still needs the tick: RPCs, handshakes, addresses
    /// being validated, or an unconfirmed key update. An idle endpoint
    /// sets no timer.
    fn has_work_for_ticks(&self) -> bool {
        !self.rpcs.clients.is_empty()
            || !self.rpcs.servers.is_empty()
            || !self.peers.handshakes.is_empty()
            || !self.peers.unvalidated.is_empty()
            || !self.peers.key_updates.is_empty()
    }

    /// What this tick judges silence by.
    fn silence(&self, crowded: bool) -> Silence {
        let cfg = &self.config;
        Silence {
            ticks: self.time.ticks,
            resend_ticks: cfg.resend_ticks,
            abort_ticks: cfg.abort_ticks,
            handshake_abort_ticks: cfg.handshake_abort_ticks,
            max_resend_bytes: cfg.max_resend_bytes,
            crowded,
        }
    }

    /// Announces an unconfirmed key update again every `resend_ticks` (a
    /// lost KEY_UPDATE would otherwise strand the peer on the old keys).
    fn tick_key_updates(&mut self) {
        let resend = self.config.resend_ticks;
        let mut again = Vec::new();
        let mut pending = std::mem::take(&mut self.peers.key_updates);
        pending.retain(|peer| {
            let Some(s) = self.peers.get_mut(peer) else {
                return false;
            };
            let Some(ticks) = s.session.key_update_unconfirmed.as_mut() else {
                return false;
            };
            *ticks += 1;
            if ticks.is_multiple_of(resend) {
                again.push((*peer, s.session.current.number));
            }
            true
        });
        self.peers.key_updates = pending;
        for (peer, epoch) in again {
            self.queue_control(peer, epoch, super::KEY_UPDATE_ANNOUNCE, Body::KeyUpdate);
        }
    }

    fn tick_client(&mut self, h: RpcHandle, silence: &Silence) -> Action {
        let Some(rpc) = self.rpcs.clients.get_mut(&h) else {
            return Action::None;
        };
        match rpc.on_tick(silence) {
            ClientTick::Idle => Action::None,
            ClientTick::KeepAlive(offset) => Action::KeepAlive(rpc.key(), offset),
            ClientTick::Resend(gaps) => Action::Resend(rpc.key(), gaps),
            ClientTick::TimedOut => Action::FailClient(h),
        }
    }

    fn tick_server(&mut self, key: ServerRpcHandle, silence: &Silence) -> Action {
        let Some(slot) = self.peers.server_slot(&key) else {
            return Action::None;
        };
        let Some(rpc) = self.rpcs.servers.get_mut(slot) else {
            return Action::None;
        };
        match rpc.on_tick(silence) {
            ServerTick::Idle => Action::None,
            ServerTick::Resend(gaps) => Action::Resend(key, gaps),
            ServerTick::NeedAck => Action::NeedAck(key),
            ServerTick::Expired => Action::FreeServer(key),
        }
    }

    fn apply(&mut self, now: Instant, action: Action) {
        match action {
            Action::None => {}
            Action::Resend(k, gaps) => self.queue_resends(k, gaps),
            Action::NeedAck(k) => self.queue_control(k.peer, k.epoch, k.id, Body::NeedAck),
            Action::KeepAlive(k, offset) => {
                let body = Body::Grant {
                    offset,
                    priority: u8::MAX,
                };
                self.queue_control(k.peer, k.epoch, k.id, body);
            }
            Action::FailClient(h) => {
                let peer = self.rpcs.clients.get(&h).map(|c| c.peer);
                self.fail_client(h, RpcError::Timeout);
                if let Some(peer) = peer {
                    self.forget_silent_session(now, peer);
                }
            }
            Action::FreeServer(k) => {
                tracing::debug!(peer = %k.peer, id = k.id, "freeing server RPC after silence");
                self.rpc_parts().drop_server(&k);
                self.rpc_parts()
                    .trace_freed(k, crate::trace::FreeReason::Timeout);
            }
        }
    }

    /// Asks for the (offset, length) ranges `gaps` of message `k`.
    pub(crate) fn queue_resends(&mut self, k: ServerRpcHandle, gaps: Vec<(u32, u32)>) {
        for (offset, length) in gaps {
            let body = Body::Resend {
                offset,
                length,
                priority: 0,
            };
            self.queue_control(k.peer, k.epoch, k.id, body);
        }
    }

    /// After one of our RPCs to `peer` timed out: if a handshake made the
    /// session and nothing from the peer authenticated for `abort_ticks`,
    /// the peer has most likely lost the session (a restarted server):
    /// forget it, so the next call starts a new handshake instead of
    /// timing out forever under keys the peer no longer holds. Sessions the
    /// application installed are kept (it alone can replace them).
    pub(crate) fn forget_silent_session(&mut self, now: Instant, peer: SocketAddr) {
        let quiet = self.config.tick * self.config.abort_ticks;
        let Some(p) = self.peers.get(&peer) else {
            return;
        };
        let silent = p.heard.is_none_or(|t| now >= t + quiet);
        if silent && p.origin == Origin::Handshake {
            tracing::debug!(%peer, "peer silent: forgetting the handshake's session");
            self.remove_session(peer);
        }
    }

    // ---- restarts (from RPC_UNKNOWN, recv.rs, and from a pending restart here) ----

    /// The server lost our request: send it again under a fresh message ID
    /// (the old ID may never be reused under this key).
    pub(crate) fn restart(&mut self, now: Instant, handle: RpcHandle) {
        let Some(rpc) = self.rpcs.clients.get(&handle) else {
            return;
        };
        let (old, pid, restarts) = (rpc.key(), rpc.peer_id, rpc.restarts);
        if restarts >= self.config.max_restarts {
            return self.fail_client(handle, RpcError::PeerLostRequest);
        }
        let (epoch, id) = match self.allocate_id(pid) {
            Ok(slot) => slot,
            Err(SendError::RekeyPending) => return self.defer_restart(handle),
            Err(_) => return self.fail_client(handle, RpcError::IdSpaceExhausted),
        };
        let request = match self.reseal_request(handle, pid, epoch, id) {
            None => return,
            Some(Err(e)) => return self.fail_client(handle, e),
            Some(Ok(request)) => request,
        };
        self.install_restarted(handle, pid, (epoch, id), request);
        trace_event!(
            self,
            Traced::RpcRestarted {
                rpc: handle,
                peer: old.peer,
                old_epoch: old.epoch,
                old_id: old.id,
                epoch,
                id,
            }
        );
        self.counters.stats.requests_restarted += 1;
        if let Some(s) = self.peers.at_mut(pid) {
            s.session.stats.requests_restarted += 1;
        }
        self.mark_sendable(MsgKey::Client(handle));
        self.arm_tick(now);
    }

    /// No fresh ID yet (see `ClientRpc::defer_restart`).
    fn defer_restart(&mut self, handle: RpcHandle) {
        if let Some(rpc) = self.rpcs.clients.get_mut(&handle) {
            rpc.defer_restart();
        }
    }

    /// The request of `handle` sealed again as message `id` of key epoch
    /// `epoch`, from its recovered plaintext; `None` if the RPC is gone, or
    /// the error to fail it with.
    fn reseal_request(
        &mut self,
        handle: RpcHandle,
        pid: PeerId,
        epoch: u64,
        id: u64,
    ) -> Option<Result<Outgoing, RpcError>> {
        let rpc = self.rpcs.clients.get_mut(&handle)?;
        let (old, priority) = (rpc.key(), rpc.request.priority);
        let mut data = self.buffers.pool.take(rpc.request.data_len() as usize);
        let padded = self.config.padding.padded_len(rpc.request.data_len());
        let sealed = match rpc.request.recover(&mut data) {
            Ok(Some(kept)) => self.seal(pid, (epoch, id), Payload::Owned(kept), padded),
            Ok(None) => self.seal(pid, (epoch, id), Payload::Borrowed(&data), padded),
            Err(_) => {
                // Cannot happen: the request was sealed with its key kept.
                tracing::error!(peer = %old.peer, id = old.id, "request plaintext not recoverable");
                return Some(Err(RpcError::PeerLostRequest));
            }
        };
        self.buffers.pool.give(data);
        let Ok(mut request) = sealed else {
            return Some(Err(RpcError::IdSpaceExhausted));
        };
        request.priority = priority;
        Some(Ok(request))
    }

    /// Moves RPC `handle` to its new (epoch, id) with its resealed
    /// `request`, and recycles the old request and any partial response
    /// (the server lost the request, so nothing of a response stands).
    fn install_restarted(
        &mut self,
        handle: RpcHandle,
        pid: PeerId,
        (epoch, id): (u64, u64),
        request: Outgoing,
    ) {
        let Some(rpc) = self.rpcs.clients.get_mut(&handle) else {
            return;
        };
        if let Some(r) = self.peers.rpcs_mut(pid) {
            r.remove_client(rpc.epoch, rpc.id);
            r.add_client(epoch, id, handle);
        }
        let (mut old, response) = rpc.restart_as((epoch, id), request);
        old.recycle(&mut self.buffers.pool);
        if let Some(inc) = response {
            self.rpc_parts().recycle_incoming(inc);
        }
    }

    // ---- handshakes' sessions (the endpoint's side of `handshake.rs`) ----

    /// The tick's share of the handshakes (`Handshakes::tick`).
    fn tick_handshakes(&mut self, now: Instant) {
        let peers: Vec<SocketAddr> = self.peers.handshakes.keys().copied().collect();
        for peer in peers {
            let step = self.handshakes().tick(peer);
            self.apply_handshake(now, step);
        }
    }

    /// After a RETRY: sends again, right behind the token opening, the
    /// request bytes our calls to `peer` already sent under keys the
    /// handshake gave before the peer answered (a 0-RTT first flight).
    /// The responder kept nothing of that flight (it held no handshake; a
    /// session it had with the address refused the records), so without
    /// this the requests waited for a resend timer and an RPC_UNKNOWN
    /// restart: milliseconds where the RETRY costs one round trip. The
    /// same bytes and IDs go again, so a copy of the first flight that
    /// still arrives under the new keys is a duplicate, never a second
    /// execution.
    pub(crate) fn resend_first_flight(&mut self, peer: SocketAddr) {
        let calls: Vec<RpcHandle> = self
            .rpcs
            .clients
            .iter()
            .filter(|(_, c)| c.peer == peer)
            .map(|(h, _)| h)
            .collect();
        let tick = self.time.ticks;
        for h in calls {
            let Some(rpc) = self.rpcs.clients.get_mut(&h) else {
                continue;
            };
            // Wire lengths fit 32 bits (the DATA header's field). An
            // interval of 1: everything sent up to now, this tick included.
            let sent = rpc.request.sent() as u32;
            if sent > 0 && rpc.request.resend(0, sent, tick, 1) {
                self.mark_sendable(MsgKey::Client(h));
            }
        }
    }

    /// Counts a session a responder's handshake just made, if the peer has
    /// not used its keys yet, forgetting the oldest such session past
    /// `Config::max_unvalidated_sessions`.
    pub(crate) fn track_unvalidated(&mut self, peer: SocketAddr) {
        let responder = self
            .peers
            .handshakes
            .get(&peer)
            .is_some_and(|c| !c.initiator);
        let made = self.time.ticks;
        match self.peers.get_mut(&peer) {
            Some(p) if responder && !p.proven => p.made = made,
            _ => return,
        }
        self.peers.unvalidated.push_back((peer, made));
        while self.peers.unvalidated.len() > self.config.max_unvalidated_sessions {
            if let Some((oldest, made)) = self.peers.unvalidated.pop_front() {
                self.drop_if_unproven(oldest, made);
            }
        }
    }

    /// Forgets the sessions a responder's handshake made that the peer has
    /// not used within `handshake_abort_ticks`: a genuine client uses them
    /// within a round trip (the request it made the handshake for). At most
    /// what expired; the work follows the expired entries, not the
    /// sessions.
    pub(crate) fn expire_unproven(&mut self) {
        let limit = u64::from(self.config.handshake_abort_ticks);
        while let Some(&(peer, made)) = self.peers.unvalidated.front() {
            if self.time.ticks - made < limit {
                break;
            }
            self.peers.unvalidated.pop_front();
            self.drop_if_unproven(peer, made);
        }
    }

    /// Forgets `peer`'s session made at tick `made` by a responder's
    /// handshake, if nothing authenticated has come from the peer since
    /// (and it is still that session).
    pub(crate) fn drop_if_unproven(&mut self, peer: SocketAddr, made: u64) {
        if self.peers.get(&peer).is_some_and(|p| p.made == made) {
            self.drop_if_unvalidated(peer);
        }
    }

    /// Forgets `peer`'s session, which a responder's handshake made, if
    /// nothing authenticated has come from the peer since.
    pub(crate) fn drop_if_unvalidated(&mut self, peer: SocketAddr) {
        let unproven = self
            .peers
            .get(&peer)
            .is_some_and(|p| !p.proven && p.origin == Origin::Handshake);
        // A newer handshake from this address, as initiator, owns it now.
        let initiator = self
            .peers
            .handshakes
            .get(&peer)
            .is_some_and(|c| c.initiator);
        if unproven && !initiator {
            tracing::debug!(%peer, "forgetting a session whose peer never used its keys");
            self.remove_session(peer);
            self.counters.stats.unvalidated_sessions_dropped += 1;
        }
    }

    /// Arms the idle sweep if a handshake's session exists and it is not
    /// armed yet.
    pub(crate) fn arm_idle_sweep(&mut self, now: Instant) {
        let Some(timeout) = self.config.session_idle_timeout else {
            return;
        };
        if self.peers.handshake_count() > 0 && !self.time.timers.is_set(Timer::IdleSweep) {
            self.time.timers.set(Timer::IdleSweep, now + timeout / 4);
        }
    }

    /// Forgets sessions a handshake made whose peer has sent nothing
    /// authenticated for `session_idle_timeout` and that hold no RPC or
    /// handshake. A session never heard from is timed from this sweep.
    pub(crate) fn sweep_idle_sessions(&mut self, now: Instant) {
        let Some(timeout) = self.config.session_idle_timeout else {
            return;
        };
        for peer in self.peers.idle_handshake_sessions(now, timeout) {
            tracing::debug!(%peer, "forgetting an idle handshake session");
            self.counters.stats.sessions_evicted += 1;
            self.remove_session(peer);
        }
        self.arm_idle_sweep(now);
    }

    /// The session with `peer`, asking the key resolver for one if there
    /// is none and `Config::max_resolved_sessions` allows another.
    /// One lookup when the peer is known (the per-packet case).
    pub(crate) fn resolve_session(&mut self, peer: SocketAddr) -> Result<PeerId, DropReason> {
        if let Some(id) = self.peers.id(&peer) {
            return Ok(id);
        }
        if self.hs.resolver.is_none() {
            return Err(DropReason::UnknownSession);
        }
        let may_resolve = self.peers.resolved_count() < self.config.max_resolved_sessions;
        if !may_resolve || !self.make_room_for_session() {
            return Err(DropReason::OverLimit);
        }
        let resolver = self.hs.resolver.as_mut();
        let keys = resolver.and_then(|r| r.resolve(peer));
        let keys = keys.ok_or(DropReason::UnknownSession)?;
        self.install_session(peer, keys)
            .map_err(|_| DropReason::UnknownSession)?;
        // Set in place: the peer keeps its slot.
        self.peers.set_origin(&peer, Origin::Resolved);
        self.peers.id(&peer).ok_or(DropReason::UnknownSession)
    }

    /// Whether one more session fits `Config::max_sessions`, evicting the
    /// least proven one if it would not: a session whose peer never used
    /// its keys (oldest first), else `Peers::least_recently_heard`. O(1)
    /// while there is room; past it, at worst one pass over the sessions.
    pub(crate) fn make_room_for_session(&mut self) -> bool {
        if self.peers.len() < self.config.max_sessions {
            return true;
        }
        let before = self.peers.len();
        while let Some((peer, made)) = self.peers.unvalidated.pop_front() {
            self.drop_if_unproven(peer, made);
            if self.peers.len() < before {
                self.counters.stats.sessions_displaced += 1;
                return true;
            }
        }
        let Some(victim) = self.peers.least_recently_heard() else {
            return false;
        };
        tracing::debug!(peer = %victim, "evicting the least recently heard session: too many");
        self.remove_session(victim);
        self.counters.stats.sessions_displaced += 1;
        true
    }

    /// Pathlet echoes and window upkeep at each tick (`pathlet.rs`).
    pub(crate) fn tick_pathlets(&mut self, now: Instant) {
        super::pathlet::tick_pathlets(&mut self.pathlet_parts(), now);
    }
}
