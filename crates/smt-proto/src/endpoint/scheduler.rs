//! The send order and the grants: which outgoing message sends next
//! (sender-side SRPT, `send.rs`) and which incoming messages get grants
//! (receiver-side SRPT with overcommit, `Scheduler::grant`: the incoming
//! messages with the fewest bytes left are granted first,
//! `Config::overcommit` at a time, each kept `Config::grant_window` ahead
//! of what has arrived). It holds candidates,
//! not RPCs: entries name messages by key and may be stale; the code that
//! takes them checks the RPC tables.

mod queue;

use std::collections::BTreeSet;

use super::table::{ClientTable, ServerTable};
use super::{MsgKey, ServerRpcHandle};
use crate::rpc::Incoming;
use crate::wire::Body;
use queue::SendQueue;

#[derive(Debug, Default)]
pub(crate) struct Scheduler {
    /// Outgoing messages that may have packets to send, ranked by bytes
    /// left to send: every sendable message is here, so choosing the next
    /// packet takes the smallest entry instead of scanning every RPC.
    /// `Outgoing::queued` keeps a message from being in it twice. Entries
    /// may be stale (gone, waiting for a grant, or ranked by an old
    /// count); `write_next_data` drops or re-ranks those.
    sendable: SendQueue,
    /// Incoming messages that may still need grants (same idea, for
    /// `Scheduler::grant`).
    grantable: BTreeSet<MsgKey>,
    /// Data arrived since grants were last computed: `poll_transmit`
    /// computes them once for everything received in between, so a batch
    /// of packets yields one GRANT per message, not one per packet.
    grants_dirty: bool,
}

impl Scheduler {
    /// Ranks `key` among the send candidates by `rank`, its bytes left.
    #[inline]
    pub(super) fn push_sendable(&mut self, rank: u64, key: MsgKey) {
        self.sendable.push(rank, key);
    }

    /// The send candidate with the fewest bytes left (ties: the smaller
    /// key) and its rank; it stays a candidate.
    #[inline]
    pub(super) fn next_sendable(&self) -> Option<(u64, MsgKey)> {
        self.sendable.peek()
    }

    /// Gives the candidate `next_sendable` named a new rank.
    #[inline]
    pub(super) fn rerank_next(&mut self, rank: u64) {
        self.sendable.rerank_top(rank);
    }

    /// Drops the candidate `next_sendable` named.
    #[inline]
    pub(super) fn pop_next(&mut self) {
        self.sendable.pop();
    }

    /// `key` received data and may need grants.
    pub(super) fn mark_grantable(&mut self, key: MsgKey) {
        self.grantable.insert(key);
    }

    /// Grants are to be computed at the next transmit.
    pub(super) fn mark_grants_dirty(&mut self) {
        self.grants_dirty = true;
    }

    /// Grants are to be computed at the next transmit if any message may
    /// still need them.
    pub(super) fn mark_grants_dirty_if_any(&mut self) {
        self.grants_dirty |= !self.grantable.is_empty();
    }

    /// Whether grants are to be computed now; clears the mark.
    pub(super) fn take_grants_dirty(&mut self) -> bool {
        std::mem::take(&mut self.grants_dirty)
    }

    /// The grant candidates with their ranks (bytes left), in key order:
    /// `remaining` gives a message's rank, or `None` for one that is gone
    /// or fully granted, which stops being a candidate.
    pub(super) fn grant_candidates(
        &mut self,
        mut remaining: impl FnMut(MsgKey) -> Option<u64>,
    ) -> Vec<(u64, MsgKey)> {
        let mut candidates = Vec::new();
        self.grantable.retain(|&key| match remaining(key) {
            Some(rank) => {
                candidates.push((rank, key));
                true
            }
            None => false,
        });
        candidates
    }

    /// Incoming messages that still need grants, keyed by bytes remaining
    /// (the candidates, pruned of those fully granted or gone).
    pub(super) fn live_grant_candidates(
        &mut self,
        clients: &ClientTable,
        servers: &ServerTable,
    ) -> Vec<(u64, MsgKey)> {
        self.grant_candidates(|key| {
            let inc = receiving(clients, servers, key)?;
            (inc.granted() < inc.wire_len()).then(|| inc.remaining())
        })
    }

    /// Raises the grants of the `overcommit` messages with the fewest bytes
    /// left to `grant_window` bytes past what has arrived; `send` gets the
    /// GRANT for each message whose grant rose.
    pub(super) fn grant(
        &mut self,
        clients: &mut ClientTable,
        servers: &mut ServerTable,
        (window, overcommit): (u64, usize),
        mut send: impl FnMut(ServerRpcHandle, Body),
    ) {
        let mut candidates = self.live_grant_candidates(clients, servers);
        candidates.sort_unstable();
        candidates.truncate(overcommit);
        for (rank, (_, key)) in candidates.into_iter().enumerate() {
            let (k, inc) = match key {
                MsgKey::Client(h) => match clients.get_mut(&h) {
                    Some(c) => (c.key(), c.response.as_mut()),
                    None => continue,
                },
                MsgKey::Server(m) => (
                    m.rpc,
                    servers.get_mut(m.slot).and_then(|s| s.receiving_mut()),
                ),
            };
            let Some(inc) = inc else {
                continue;
            };
            if !inc.raise_grant(inc.received() + window) {
                continue;
            }
            let body = Body::Grant {
                offset: inc.granted(),
                priority: rank.min(255) as u8,
            };
            send(k, body);
        }
    }
}

/// The message `key` names, if it is still being received.
fn receiving<'a>(
    clients: &'a ClientTable,
    servers: &'a ServerTable,
    key: MsgKey,
) -> Option<&'a Incoming> {
    match key {
        MsgKey::Client(h) => clients.get(&h)?.response.as_ref(),
        MsgKey::Server(m) => servers.get(m.slot)?.receiving(),
    }
}
