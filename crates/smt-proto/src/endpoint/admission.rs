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

/// What the batch order asks of its receiver `E` (the endpoint): whether
/// an address is vouched for (asked again in the later passes: an address
/// may authenticate earlier in the batch), to handle a datagram, and to
/// refuse one past the budget.
pub(crate) struct Receiver<V, H, R> {
    pub vouched: V,
    pub handle: H,
    pub refuse: R,
}

/// `Endpoint::handle_batch` over datagrams that carry something
/// more (`T`: nothing, or receive offload's marks), each handled by
/// `handle`.
pub(crate) fn handle_batch_with<'a, T, I, F>(ep: &mut Endpoint, now: Instant, batch: I, handle: F)
where
    T: Copy,
    I: Iterator<Item = (SocketAddr, &'a [u8], T)> + Clone,
    F: Fn(&mut Endpoint, Instant, SocketAddr, &'a [u8], T),
{
    ep.trace_now(now);
    let mut turns = std::mem::take(&mut ep.buffers.batch_turns);
    let rx = Receiver {
        vouched: |ep: &Endpoint, from| ep.peers.vouched_for(&from),
        handle: |ep: &mut Endpoint, from, datagram, extra| handle(ep, now, from, datagram, extra),
        refuse: |ep: &mut Endpoint, from, datagram: &[u8]| {
            ep.counters.stats.datagrams_rx += 1;
            ep.counters.stats.bytes_rx += datagram.len() as u64;
            ep.drop_packet(from, DropReason::OverBudget);
        },
    };
    let budget = ep.config.unvalidated_per_batch;
    handle_in_order(ep, &mut turns, budget, batch, rx);
    ep.buffers.batch_turns = turns;
    ep.peers.forget_route();
}

/// Handles one receive batch in admission order: validated addresses'
/// datagrams first, then the heads of the other runs, then their tails,
/// each in order, the last two within `budget`
/// (`Config::unvalidated_per_batch`). `turns` is scratch space, kept by
/// the caller to reuse its capacity.
pub(crate) fn handle_in_order<'a, E, T, I, V, H, R>(
    ep: &mut E,
    turns: &mut Vec<Turn>,
    budget: usize,
    batch: I,
    mut rx: Receiver<V, H, R>,
) where
    T: Copy,
    I: Iterator<Item = (SocketAddr, &'a [u8], T)> + Clone,
    V: Fn(&E, SocketAddr) -> bool,
    H: FnMut(&mut E, SocketAddr, &'a [u8], T),
    R: FnMut(&mut E, SocketAddr, &'a [u8]),
{
    validated_first(ep, turns, batch.clone(), &mut rx);
    // The usual batch is all from validated peers: nothing more to do.
    if turns.iter().all(|t| *t == Turn::Validated) {
        return;
    }
    let mut budget = budget;
    for pass in [Turn::Head, Turn::Tail] {
        let mine = batch.clone().zip(turns.iter()).filter(|(_, t)| **t == pass);
        for ((from, datagram, extra), _) in mine {
            if (rx.vouched)(ep, from) {
                (rx.handle)(ep, from, datagram, extra);
            } else if budget > 0 {
                budget -= 1;
                (rx.handle)(ep, from, datagram, extra);
            } else {
                (rx.refuse)(ep, from, datagram);
            }
        }
    }
}

/// The first pass: gives each datagram its turn, and handles those from
/// validated addresses at once.
fn validated_first<'a, E, T, I, V, H, R>(
    ep: &mut E,
    turns: &mut Vec<Turn>,
    batch: I,
    rx: &mut Receiver<V, H, R>,
) where
    I: Iterator<Item = (SocketAddr, &'a [u8], T)>,
    V: Fn(&E, SocketAddr) -> bool,
    H: FnMut(&mut E, SocketAddr, &'a [u8], T),
{
    turns.clear();
    let mut previous: Option<(SocketAddr, Turn)> = None;
    for (from, datagram, extra) in batch {
        // A GRO train is one sender's: its address is looked up once.
        let turn = match previous {
            Some((addr, turn)) if addr == from => match turn {
                Turn::Validated => Turn::Validated,
                _ => Turn::Tail,
            },
            _ if (rx.vouched)(ep, from) => Turn::Validated,
            _ => Turn::Head,
        };
        if turn == Turn::Validated {
            (rx.handle)(ep, from, datagram, extra);
        }
        turns.push(turn);
        previous = Some((from, turn));
    }
}
