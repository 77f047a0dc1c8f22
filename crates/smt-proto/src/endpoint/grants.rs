//! Receiver-driven scheduling (Homa): the incoming messages with the fewest
//! bytes left are granted first, `Config::overcommit` at a time, each kept
//! `Config::grant_window` ahead of what has arrived.

use super::{Endpoint, MsgKey, ServerState};
use crate::wire::Body;

impl Endpoint {
    pub(crate) fn update_grants(&mut self) {
        let window = u64::from(self.config.grant_window);
        let mut candidates = self.grant_candidates();
        candidates.sort_unstable();
        candidates.truncate(self.config.overcommit);
        for (rank, (_, key)) in candidates.into_iter().enumerate() {
            let Some(inc) = self.incoming_mut(key) else {
                continue;
            };
            if !inc.raise_grant(inc.received() + window) {
                continue;
            }
            let offset = inc.granted();
            let k = match key {
                MsgKey::Client(h) => match self.clients.get(&h) {
                    Some(c) => c.key(),
                    None => continue,
                },
                MsgKey::Server(m) => m.rpc,
            };
            self.queue_control(
                k.peer,
                k.epoch,
                k.id,
                Body::Grant {
                    offset,
                    priority: rank.min(255) as u8,
                },
            );
        }
    }

    /// Incoming messages that still need grants, keyed by bytes remaining
    /// (the scheduler's candidates, pruned of those fully granted or gone).
    pub(crate) fn grant_candidates(&mut self) -> Vec<(u64, MsgKey)> {
        let Endpoint {
            scheduler,
            clients,
            servers,
            ..
        } = self;
        scheduler.grant_candidates(|key| {
            let inc = match key {
                MsgKey::Client(h) => clients.get(&h).and_then(|c| c.response.as_ref()),
                MsgKey::Server(m) => match &servers.get(m.slot).map(|s| &s.state) {
                    Some(ServerState::Receiving(inc)) => Some(inc),
                    _ => None,
                },
            }?;
            (inc.granted() < inc.wire_len()).then(|| inc.remaining())
        })
    }
}
