//! Validated peers first (issue #11). Of one receive batch, datagrams from
//! addresses that have proved themselves are handled before the others;
//! the others share a budget per batch (`Config::unvalidated_per_batch`),
//! and past it they are dropped unread (`DropReason::OverBudget`). Anyone
//! can send from any address, so only what keys or a retry token vouch for
//! goes first.
//!
//! Within the budget, the first datagram of each run from one address (a
//! single datagram, or the head of a GRO train, which the kernel builds
//! from one sender) goes before the rest of the runs: a new client's hello
//! is not crowded out by one sender's train of thousands, and with a
//! budget above the receive batch's slots (32), no sender's first
//! datagram is ever dropped. What the budget cuts is the tails of trains
//! from senders nothing vouches for.

use std::net::SocketAddr;
use std::time::Instant;

use super::peer::Origin;
use super::Endpoint;
use crate::error::DropReason;

/// Where a datagram of the batch is handled.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// From a validated address: handled first.
    Validated,
    /// First of a run from an address nothing vouches for.
    Head,
    /// The rest of such a run.
    Tail,
}

impl Endpoint {
    /// Handles one receive batch (what one `recvmmsg` returned, GRO
    /// segments split, in order): validated addresses' datagrams first,
    /// then the heads of the other runs, then their tails, each in order,
    /// the last two within `Config::unvalidated_per_batch`. A datagram
    /// whose address authenticated earlier in the batch is handled
    /// whatever the budget.
    pub fn handle_batch<'a, I>(&mut self, now: Instant, batch: I)
    where
        I: Iterator<Item = (SocketAddr, &'a [u8])> + Clone,
    {
        let batch = batch.map(|(from, datagram)| (from, datagram, ()));
        self.handle_batch_with(now, batch, |ep, now, from, datagram, ()| {
            ep.handle_datagram_in_batch(now, from, datagram);
        });
    }

    /// [`Endpoint::handle_batch`] over datagrams that carry something
    /// more (`T`: nothing, or receive offload's marks), each handled by
    /// `handle`.
    pub(crate) fn handle_batch_with<'a, T, I, F>(&mut self, now: Instant, batch: I, handle: F)
    where
        T: Copy,
        I: Iterator<Item = (SocketAddr, &'a [u8], T)> + Clone,
        F: Fn(&mut Self, Instant, SocketAddr, &'a [u8], T),
    {
        self.trace_now(now);
        let mut turns = std::mem::take(&mut self.buffers.batch_turns);
        turns.clear();
        let mut previous: Option<(SocketAddr, Turn)> = None;
        for (from, datagram, extra) in batch.clone() {
            // A GRO train is one sender's: its address is looked up once.
            let turn = match previous {
                Some((addr, turn)) if addr == from => match turn {
                    Turn::Validated => Turn::Validated,
                    _ => Turn::Tail,
                },
                _ if self.is_validated_address(from) => Turn::Validated,
                _ => Turn::Head,
            };
            if turn == Turn::Validated {
                handle(self, now, from, datagram, extra);
            }
            turns.push(turn);
            previous = Some((from, turn));
        }
        // The usual batch is all from validated peers: nothing more to do.
        if turns.iter().all(|t| *t == Turn::Validated) {
            self.buffers.batch_turns = turns;
            self.forget_route();
            return;
        }
        let mut budget = self.config.unvalidated_per_batch;
        for pass in [Turn::Head, Turn::Tail] {
            let mine = batch.clone().zip(&turns).filter(|(_, t)| **t == pass);
            for ((from, datagram, extra), _) in mine {
                if self.is_validated_address(from) {
                    handle(self, now, from, datagram, extra);
                } else if budget > 0 {
                    budget -= 1;
                    handle(self, now, from, datagram, extra);
                } else {
                    self.counters.stats.datagrams_rx += 1;
                    self.counters.stats.bytes_rx += datagram.len() as u64;
                    self.drop_packet(from, DropReason::OverBudget);
                }
            }
        }
        self.buffers.batch_turns = turns;
        self.forget_route();
    }

    /// Whether what comes from `from` is vouched for: its session has
    /// authenticated a packet from it, the application installed its keys
    /// for that address (it chose to talk to it), or a handshake with it
    /// was opened by us or with a valid retry token. (Keys the resolver
    /// derived for any address that asks are not a voucher, nor are keys a
    /// responder's handshake made that the peer has not used yet: a PSK
    /// hello and its reply are exchanged without the key.)
    fn is_validated_address(&self, from: SocketAddr) -> bool {
        self.peers
            .get(&from)
            .is_some_and(|p| p.proven || p.origin == Origin::Installed)
            || self
                .hs
                .conns
                .get(&from)
                .is_some_and(|c| c.vouches_for_its_packets())
    }
}
