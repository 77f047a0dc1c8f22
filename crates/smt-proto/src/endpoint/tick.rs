//! `handle_timeout`: the housekeeping tick. Each RPC counts the ticks its
//! peer stayed silent; at `resend_ticks` (and every `resend_ticks` after)
//! it asks for what is missing, at `abort_ticks` it gives up.

use std::net::SocketAddr;
use std::time::Instant;

use super::{Endpoint, RpcHandle, ServerState};
use crate::error::RpcError;
use crate::timer::Timer;
use crate::wire::Body;

/// RESEND packets one message sends per tick.
const RESENDS_PER_TICK: usize = 8;

/// Whether a server RPC silent for `silent` ticks asks again now: after
/// `resend` ticks, then every `resend` ticks.
fn is_resend_tick(silent: u32, resend: u32) -> bool {
    silent >= resend && silent.is_multiple_of(resend)
}

/// What a tick decided for one RPC.
enum Action {
    None,
    Resend(SocketAddr, u64, Vec<(u32, u32)>),
    NeedAck(SocketAddr, u64),
    FailClient(RpcHandle),
    FreeServer(SocketAddr, u64),
}

impl Endpoint {
    /// Handles every timer expired at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(timer) = self.timers.pop_expired(now) {
            match timer {
                Timer::Tick => self.tick(now),
            }
        }
    }

    fn tick(&mut self, now: Instant) {
        let mut actions = Vec::new();
        let handles: Vec<RpcHandle> = self.clients.keys().copied().collect();
        for h in handles {
            actions.push(self.tick_client(h));
        }
        let keys: Vec<(SocketAddr, u64)> = self.servers.keys().copied().collect();
        for k in keys {
            actions.push(self.tick_server(k));
        }
        for action in actions {
            self.apply(action);
        }
        if !self.clients.is_empty() || !self.servers.is_empty() {
            self.timers.set(Timer::Tick, now + self.config.tick);
        }
    }

    /// A client's first RESEND waits `resend_ticks`, doubled per restart:
    /// a restart means an earlier RESEND overtook its request (a slow path
    /// or a busy host), so the next attempt gives the request longer.
    fn is_client_resend_tick(&self, silent: u32, restarts: u32) -> bool {
        let r = self.config.resend_ticks;
        let first = (r << restarts.min(4))
            .min(self.config.abort_ticks / 2)
            .max(r);
        silent >= first && (silent - first).is_multiple_of(r)
    }

    fn tick_client(&mut self, h: RpcHandle) -> Action {
        let max_len = self.config.unscheduled_bytes;
        let Some(rpc) = self.clients.get_mut(&h) else {
            return Action::None;
        };
        if rpc.response.is_none() && rpc.request.has_sendable() {
            // Silence is our own doing: the request still waits for the
            // sender's turn (SRPT), not for the peer (Homa's rule).
            rpc.silent_ticks = 0;
            return Action::None;
        }
        rpc.silent_ticks += 1;
        let (silent, restarts) = (rpc.silent_ticks, rpc.restarts);
        let (peer, id) = (rpc.peer, rpc.id);
        let gaps = match &rpc.response {
            None => vec![(0, max_len)],
            Some(inc) => inc.gaps(RESENDS_PER_TICK, max_len),
        };
        if silent >= self.config.abort_ticks {
            return Action::FailClient(h);
        }
        if self.is_client_resend_tick(silent, restarts) && !gaps.is_empty() {
            return Action::Resend(peer, id, gaps);
        }
        Action::None
    }

    fn tick_server(&mut self, key: (SocketAddr, u64)) -> Action {
        let (resend, abort) = (self.config.resend_ticks, self.config.abort_ticks);
        let max_len = self.config.unscheduled_bytes;
        let Some(rpc) = self.servers.get_mut(&key) else {
            return Action::None;
        };
        let waiting_on_us = match &rpc.state {
            // The application owns the RPC until it answers.
            ServerState::InService => true,
            ServerState::Responding(out) => out.has_sendable(),
            ServerState::Receiving(_) => false,
        };
        if waiting_on_us {
            rpc.silent_ticks = 0;
            return Action::None;
        }
        rpc.silent_ticks += 1;
        let silent = rpc.silent_ticks;
        if silent >= abort {
            return Action::FreeServer(key.0, key.1);
        }
        if !is_resend_tick(silent, resend) {
            return Action::None;
        }
        match &rpc.state {
            ServerState::Receiving(inc) => {
                Action::Resend(key.0, key.1, inc.gaps(RESENDS_PER_TICK, max_len))
            }
            ServerState::Responding(out) if out.fully_sent() => Action::NeedAck(key.0, key.1),
            _ => Action::None,
        }
    }

    fn apply(&mut self, action: Action) {
        match action {
            Action::None => {}
            Action::Resend(peer, id, gaps) => {
                for (offset, length) in gaps {
                    self.queue_control(
                        peer,
                        id,
                        Body::Resend {
                            offset,
                            length,
                            priority: 0,
                        },
                    );
                }
            }
            Action::NeedAck(peer, id) => self.queue_control(peer, id, Body::NeedAck),
            Action::FailClient(h) => self.fail_client(h, RpcError::Timeout),
            Action::FreeServer(peer, id) => {
                tracing::debug!(%peer, id, "freeing server RPC after silence");
                self.servers.remove(&(peer, id));
            }
        }
    }
}
