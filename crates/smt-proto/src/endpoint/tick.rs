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

    fn is_resend_tick(&self, silent: u32) -> bool {
        silent >= self.config.resend_ticks && silent.is_multiple_of(self.config.resend_ticks)
    }

    fn tick_client(&mut self, h: RpcHandle) -> Action {
        let max_len = self.config.unscheduled_bytes;
        let Some(rpc) = self.clients.get_mut(&h) else {
            return Action::None;
        };
        rpc.silent_ticks += 1;
        let silent = rpc.silent_ticks;
        let (peer, id) = (rpc.peer, rpc.id);
        let gaps = match &rpc.response {
            None => vec![(0, max_len)],
            Some(inc) => inc.gaps(RESENDS_PER_TICK, max_len),
        };
        if silent >= self.config.abort_ticks {
            return Action::FailClient(h);
        }
        if self.is_resend_tick(silent) && !gaps.is_empty() {
            return Action::Resend(peer, id, gaps);
        }
        Action::None
    }

    fn tick_server(&mut self, key: (SocketAddr, u64)) -> Action {
        let (resend_point, abort) = (self.config.resend_ticks, self.config.abort_ticks);
        let max_len = self.config.unscheduled_bytes;
        let Some(rpc) = self.servers.get_mut(&key) else {
            return Action::None;
        };
        if matches!(rpc.state, ServerState::InService) {
            // The application owns the RPC until it answers.
            return Action::None;
        }
        rpc.silent_ticks += 1;
        let silent = rpc.silent_ticks;
        if silent >= abort {
            return Action::FreeServer(key.0, key.1);
        }
        if silent < resend_point || !silent.is_multiple_of(resend_point) {
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
