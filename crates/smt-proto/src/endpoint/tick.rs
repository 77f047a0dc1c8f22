//! `handle_timeout`: the housekeeping tick. Each RPC counts the ticks its
//! peer stayed silent; at `resend_ticks` it asks for what is missing, then
//! again after intervals that double up to [`MAX_BACKOFF`] × `resend_ticks`
//! (a slow or busy peer is not flooded with requests it will answer
//! anyway, each of which would make it retransmit); at `abort_ticks` it
//! gives up.

use std::net::SocketAddr;

/// The endpoint's sense of time: ticks so far and the timer table.
#[derive(Default)]
pub(crate) struct Time {
    /// Ticks so far (paces keep-alives).
    pub(crate) ticks: u64,
    pub(crate) timers: crate::timer::TimerTable,
}
use std::time::Instant;

use super::peer::Origin;
use super::peers::PeerId;
use super::{trace_event, Endpoint, MsgKey, RpcHandle, ServerRpcHandle, ServerState};
use crate::error::{RpcError, SendError};
use crate::payload::Payload;
use crate::rpc::Outgoing;
use crate::timer::Timer;
use crate::trace::Traced;
use crate::wire::Body;

/// RESEND packets one message sends per tick.
const RESENDS_PER_TICK: usize = 8;

/// The longest interval between two requests of one silent RPC or
/// handshake, in `resend_ticks`.
pub(crate) const MAX_BACKOFF: u32 = 8;

/// Whether something silent for `silent` ticks asks again now: first after
/// `first` ticks, then after `resend` ticks, `2 × resend`, `4 × resend`,
/// ... up to `MAX_BACKOFF × resend` between requests.
pub(crate) fn is_resend_tick(silent: u32, first: u32, resend: u32) -> bool {
    let (mut at, mut gap) = (first, resend.max(1));
    while at < silent {
        at = at.saturating_add(gap);
        gap = (gap * 2).min(resend * MAX_BACKOFF);
    }
    at == silent
}

/// What a client's RESEND asks for of a response: its gaps, or, while
/// nothing of it has arrived, only the packet holding its first byte. That
/// one is a probe: the response may be queued behind others at the server
/// or on the path, and asking for all of it would have the server send it
/// twice; a server with nothing old enough to resend answers BUSY, and once
/// the first packet is in, the receiver knows the length and asks for gaps.
pub(crate) fn missing(response: Option<&crate::rpc::Incoming>, max_len: u32) -> Vec<(u32, u32)> {
    match response {
        None => vec![(0, 1)],
        Some(inc) => inc.gaps(RESENDS_PER_TICK, max_len),
    }
}

/// Whether an incoming message waits only for a grant we give to others:
/// everything granted has arrived, more is to come, and more messages want
/// grants than `overcommit` lets us give.
fn starved(inc: &crate::rpc::Incoming, crowded: bool) -> bool {
    crowded && inc.granted() < inc.wire_len() && inc.received() >= u64::from(inc.granted())
}

/// What a tick decided for one RPC.
enum Action {
    None,
    /// Repeat our grant for a response we starve (see `tick_client`).
    KeepAlive(ServerRpcHandle, u32),
    Resend(ServerRpcHandle, Vec<(u32, u32)>),
    NeedAck(ServerRpcHandle),
    FailClient(RpcHandle),
    FreeServer(ServerRpcHandle),
}

impl Endpoint {
    /// Handles every timer expired at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.trace_now(now);
        while let Some(timer) = self.time.timers.pop_expired(now) {
            match timer {
                Timer::Tick => self.tick(now),
                Timer::IdleSweep => self.sweep_idle_sessions(now),
                Timer::AckDelay => self.send_pending_acks(),
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
        self.tick_rpcs(now, crowded);
        self.tick_handshakes(now);
        self.expire_unproven();
        self.tick_key_updates();
        let (credits, cx) = self.credits_with();
        credits.sweep(cx);
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
    fn tick_rpcs(&mut self, now: Instant, crowded: bool) {
        let mut actions = Vec::new();
        let handles: Vec<RpcHandle> = self.rpcs.clients.keys().collect();
        for h in handles {
            actions.push(self.tick_client(h, crowded));
        }
        let keys: Vec<ServerRpcHandle> = self.rpcs.servers.keys().copied().collect();
        for k in keys {
            actions.push(self.tick_server(k, crowded));
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

    /// A client's first RESEND waits `resend_ticks`, doubled per restart:
    /// a restart means an earlier RESEND overtook its request (a slow path
    /// or a busy host), so the next attempt gives the request longer.
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
            let Some(ticks) = s.key_update_unconfirmed.as_mut() else {
                return false;
            };
            *ticks += 1;
            if ticks.is_multiple_of(resend) {
                again.push((*peer, s.current.number));
            }
            true
        });
        self.peers.key_updates = pending;
        for (peer, epoch) in again {
            self.queue_control(peer, epoch, super::KEY_UPDATE_ANNOUNCE, Body::KeyUpdate);
        }
    }

    fn is_client_resend_tick(&self, silent: u32, restarts: u32) -> bool {
        let r = self.config.resend_ticks;
        let first = (r << restarts.min(4))
            .min(self.config.abort_ticks / 2)
            .max(r);
        is_resend_tick(silent, first, r)
    }

    fn tick_client(&mut self, h: RpcHandle, crowded: bool) -> Action {
        let max_len = self.config.max_resend_bytes;
        let Some(rpc) = self.rpcs.clients.get_mut(&h) else {
            return Action::None;
        };
        if !rpc.request_done() && rpc.request.has_sendable() {
            // Silence is our own doing: the request still waits for the
            // sender's turn (SRPT), not for the peer (Homa's rule).
            rpc.silent_ticks = 0;
            return Action::None;
        }
        if let Some(inc) = rpc.response.as_ref().filter(|inc| starved(inc, crowded)) {
            // Also our own doing: every byte we granted has arrived, and
            // the response waits for a grant that goes to messages with
            // fewer bytes left. Not silence; but the server, which waits
            // for that grant, must hear that we are alive: repeat the grant.
            rpc.silent_ticks = 0;
            if self
                .time
                .ticks
                .is_multiple_of(u64::from(self.config.resend_ticks))
            {
                return Action::KeepAlive(rpc.key(), inc.granted());
            }
            return Action::None;
        }
        rpc.silent_ticks += 1;
        let (silent, restarts) = (rpc.silent_ticks, rpc.restarts);
        let key = rpc.key();
        let gaps = missing(rpc.response.as_ref(), max_len);
        if silent >= self.config.abort_ticks {
            tracing::debug!(
                peer = %key.peer,
                id = key.id,
                request_sent = rpc.request.sent(),
                request_len = rpc.request.wire_len(),
                response_received = rpc.response.as_ref().map(|i| i.received()),
                response_granted = rpc.response.as_ref().map(|i| i.granted()),
                response_len = rpc.response.as_ref().map(|i| i.wire_len()),
                ticks = self.time.ticks,
                "client RPC timed out"
            );
            return Action::FailClient(h);
        }
        if self.is_client_resend_tick(silent, restarts) && !gaps.is_empty() {
            return Action::Resend(key, gaps);
        }
        Action::None
    }

    fn tick_server(&mut self, key: ServerRpcHandle, crowded: bool) -> Action {
        let (resend, abort) = (self.config.resend_ticks, self.config.abort_ticks);
        let max_len = self.config.max_resend_bytes;
        let Some(slot) = self.server_slot(&key) else {
            return Action::None;
        };
        let Some(rpc) = self.rpcs.servers.get_mut(slot) else {
            return Action::None;
        };
        let waiting_on_us = match &rpc.state {
            // The application owns the RPC until it answers.
            ServerState::InService => true,
            ServerState::Responding(out) => out.has_sendable(),
            // We withhold the grant it needs (the client's RESENDs, which
            // we answer with BUSY, keep both sides from giving up).
            ServerState::Receiving(inc) => starved(inc, crowded),
        };
        if waiting_on_us {
            rpc.silent_ticks = 0;
            return Action::None;
        }
        rpc.silent_ticks += 1;
        let silent = rpc.silent_ticks;
        // A request nothing of which has authenticated may be anyone's
        // (its lengths are plaintext): it gets a handshake's short budget,
        // so unauthenticated state does not linger.
        let abort = match &rpc.state {
            ServerState::Receiving(inc) if inc.nothing_authenticated() => {
                self.config.handshake_abort_ticks
            }
            _ => abort,
        };
        if silent >= abort {
            if let ServerState::Receiving(inc) = &rpc.state {
                tracing::debug!(
                    peer = %key.peer,
                    id = key.id,
                    received = inc.received(),
                    granted = inc.granted(),
                    len = inc.wire_len(),
                    "server RPC silent while receiving"
                );
            }
            return Action::FreeServer(key);
        }
        if !is_resend_tick(silent, resend, resend) {
            return Action::None;
        }
        match &rpc.state {
            ServerState::Receiving(inc) => Action::Resend(key, inc.gaps(RESENDS_PER_TICK, max_len)),
            ServerState::Responding(out) if out.fully_sent() => Action::NeedAck(key),
            _ => Action::None,
        }
    }

    fn apply(&mut self, now: Instant, action: Action) {
        match action {
            Action::None => {}
            Action::Resend(k, gaps) => {
                for (offset, length) in gaps {
                    self.queue_control(
                        k.peer,
                        k.epoch,
                        k.id,
                        Body::Resend {
                            offset,
                            length,
                            priority: 0,
                        },
                    );
                }
            }
            Action::NeedAck(k) => self.queue_control(k.peer, k.epoch, k.id, Body::NeedAck),
            Action::KeepAlive(k, offset) => self.queue_control(
                k.peer,
                k.epoch,
                k.id,
                Body::Grant {
                    offset,
                    priority: u8::MAX,
                },
            ),
            Action::FailClient(h) => {
                let peer = self.rpcs.clients.get(&h).map(|c| c.peer);
                self.fail_client(h, RpcError::Timeout);
                if let Some(peer) = peer {
                    self.forget_silent_session(now, peer);
                }
            }
            Action::FreeServer(k) => {
                tracing::debug!(peer = %k.peer, id = k.id, "freeing server RPC after silence");
                self.drop_server(&k);
                self.trace_freed(k, crate::trace::FreeReason::Timeout);
            }
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
            s.stats.requests_restarted += 1;
        }
        self.mark_sendable(MsgKey::Client(handle));
        self.arm_tick(now);
    }

    /// No fresh ID yet: the previous key epoch must drain first. The tick
    /// retries (and the wait is not silence).
    fn defer_restart(&mut self, handle: RpcHandle) {
        if let Some(rpc) = self.rpcs.clients.get_mut(&handle) {
            rpc.restart_pending = true;
            rpc.silent_ticks = 0;
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
        let sealed = match rpc.request.recover(&mut data) {
            Ok(Some(kept)) => self.seal(pid, epoch, id, Payload::Owned(kept)),
            Ok(None) => self.seal(pid, epoch, id, Payload::Borrowed(&data)),
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
        rpc.epoch = epoch;
        rpc.id = id;
        let mut old = std::mem::replace(&mut rpc.request, request);
        let response = rpc.response.take();
        rpc.restarts += 1;
        rpc.silent_ticks = 0;
        rpc.restart_pending = false;
        old.recycle(&mut self.buffers.pool);
        if let Some(inc) = response {
            self.recycle_incoming(inc);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{is_resend_tick, MAX_BACKOFF};

    #[test]
    fn requests_back_off_from_the_first_to_the_longest_interval() {
        let at: Vec<u32> = (0..=400).filter(|&t| is_resend_tick(t, 5, 5)).collect();
        assert_eq!(
            at,
            [5, 10, 20, 40, 80, 120, 160, 200, 240, 280, 320, 360, 400]
        );
        let later: Vec<u32> = (0..=60).filter(|&t| is_resend_tick(t, 20, 5)).collect();
        assert_eq!(later, [20, 25, 35, 55]);
        let gaps: Vec<u32> = at.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().all(|&g| g <= 5 * MAX_BACKOFF));
    }
}
