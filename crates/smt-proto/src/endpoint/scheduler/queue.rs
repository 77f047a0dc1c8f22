//! The send candidates, in the order of `(bytes left, message key)`: a
//! sorted run (a deque) in front of a min-heap. The common small-RPC case
//! pushes messages of one rank in key order or in reverse key order (a
//! batch of requests takes the slots the batch before freed, last freed
//! first), and each such push joins an end of the run, and each pop leaves
//! its front: no sifting. A push that fits neither end goes to the heap;
//! the smallest entry is the smaller of the run's front and the heap's top,
//! so the order is exactly that of `(rank, MsgKey)` either way.
//!
//! Entries are 32 bytes, not the 72 of a `(u64, MsgKey)`: the rank, the
//! key's variant and number packed in one `u128` compared at once (they
//! order keys as `MsgKey` does, but may tie two server messages with the
//! same ID from different peers or epochs: those compare the whole
//! keys), and, for a server message, the
//! index of the whole key in a side table. A client message's number is
//! its whole key (the handle), so it is never copied to the side table and
//! back. The vectors, the deque and the free list are reused: no
//! allocation per message once they have grown.

use std::cmp::Ordering;
use std::collections::VecDeque;

use super::MsgKey;
use crate::rpc::RpcHandle;

#[derive(Debug, Default)]
pub(super) struct SendQueue {
    /// Entries in order, smallest first (a run of pushes in key order).
    run: VecDeque<Entry>,
    /// The entries that did not extend the run: the smallest first.
    heap: Vec<Entry>,
    /// Whole keys, by `Entry::key`; free places are in `free`.
    keys: Vec<MsgKey>,
    free: Vec<u32>,
}

/// `Entry::key` of a client message.
const NO_KEY: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Entry {
    /// `(rank, variant(key), number(key))` as one integer, compared in
    /// one go: the rank above bit 65, the variant at bit 64, the number
    /// below. Ranks are bytes left of a message, below 2^32 (the wire's
    /// length field), so the rank's bits never reach past the top.
    order: u128,
    /// A server message's whole key's index in `SendQueue::keys` (a
    /// client message's is its number: `NO_KEY` here).
    key: u32,
}

impl Entry {
    fn new(rank: u64, key: MsgKey, at: u32) -> Self {
        let mut entry = Entry { order: 0, key: at };
        entry.order = u128::from(variant(key)) << 64 | u128::from(number(key));
        entry.set_rank(rank);
        entry
    }

    #[inline(always)]
    fn rank(&self) -> u64 {
        (self.order >> 65) as u64
    }

    #[inline(always)]
    fn set_rank(&mut self, rank: u64) {
        debug_assert!(rank < 1 << 63, "ranks are message lengths");
        let low = self.order & ((1 << 65) - 1);
        self.order = u128::from(rank) << 65 | low;
    }

    #[inline(always)]
    fn number(&self) -> u64 {
        self.order as u64
    }
}

/// Where the smallest entry is.
#[derive(Clone, Copy, PartialEq)]
enum Top {
    Run,
    Heap,
}

impl SendQueue {
    #[inline]
    pub(super) fn push(&mut self, rank: u64, key: MsgKey) {
        let at = self.store(key);
        self.insert(Entry::new(rank, key, at));
    }

    #[inline]
    pub(super) fn peek(&self) -> Option<(u64, MsgKey)> {
        let top = match self.top()? {
            Top::Run => self.run.front()?,
            Top::Heap => self.heap.first()?,
        };
        Some((top.rank(), self.whole_key(top)))
    }

    /// Re-ranks the smallest entry (nothing if empty).
    #[inline]
    pub(super) fn rerank_top(&mut self, rank: u64) {
        match self.top() {
            Some(Top::Heap) => {
                self.heap[0].set_rank(rank);
                self.sift_down(0);
            }
            Some(Top::Run) => self.rerank_run_front(rank),
            None => {}
        }
    }

    /// Drops the smallest entry (nothing if empty).
    #[inline]
    pub(super) fn pop(&mut self) {
        let entry = match self.top() {
            Some(Top::Run) => self.run.pop_front(),
            Some(Top::Heap) => self.pop_heap(),
            None => None,
        };
        if let Some(entry) = entry.filter(|e| e.key != NO_KEY) {
            self.free.push(entry.key);
        }
    }

    /// Which of the run's front and the heap's top is the smallest entry.
    #[inline(always)]
    fn top(&self) -> Option<Top> {
        match (self.run.front(), self.heap.first()) {
            (Some(r), Some(h)) if self.less(h, r) => Some(Top::Heap),
            (Some(_), _) => Some(Top::Run),
            (None, Some(_)) => Some(Top::Heap),
            (None, None) => None,
        }
    }

    /// Puts `entry` at an end of the run if it keeps the run in order
    /// (or the run is empty), else in the heap.
    #[inline]
    fn insert(&mut self, entry: Entry) {
        match (self.run.front(), self.run.back()) {
            (Some(front), _) if self.less(&entry, front) => self.run.push_front(entry),
            (_, Some(back)) if self.less(back, &entry) => self.run.push_back(entry),
            (None, _) => self.run.push_back(entry),
            _ => {
                self.heap.push(entry);
                self.sift_up(self.heap.len() - 1);
            }
        }
    }

    /// Re-ranks the run's front: it stays there while still no larger
    /// than the entry behind it (a message that sent a packet has fewer
    /// bytes left), else it is inserted anew.
    fn rerank_run_front(&mut self, rank: u64) {
        let Some(front) = self.run.front_mut() else {
            return;
        };
        front.set_rank(rank);
        let front = *front;
        if self.run.get(1).is_some_and(|next| self.less(next, &front)) {
            self.run.pop_front();
            self.insert(front);
        }
    }

    /// Takes the heap's top out.
    fn pop_heap(&mut self) -> Option<Entry> {
        if self.heap.is_empty() {
            return None;
        }
        let top = self.heap.swap_remove(0);
        if !self.heap.is_empty() {
            // The last entry, now on top, is most often among the largest:
            // take it down along the smaller children to the bottom (one
            // comparison per level), then up to its place.
            let at = self.sift_to_bottom(0);
            self.sift_up(at);
        }
        Some(top)
    }

    /// The whole key of `entry`.
    #[inline(always)]
    fn whole_key(&self, entry: &Entry) -> MsgKey {
        match entry.key {
            NO_KEY => MsgKey::Client(RpcHandle(entry.number())),
            at => self.keys[at as usize],
        }
    }

    /// Puts a server message's `key` in a free place of the side table
    /// (a client message's needs none: `NO_KEY`).
    fn store(&mut self, key: MsgKey) -> u32 {
        if let MsgKey::Client(_) = key {
            return NO_KEY;
        }
        if let Some(index) = self.free.pop() {
            self.keys[index as usize] = key;
            return index;
        }
        self.keys.push(key);
        // A queue holds at most one entry per message plus stale ones, far
        // below 2^32 - 1.
        u32::try_from(self.keys.len() - 1).unwrap_or(NO_KEY - 1)
    }

    /// Whether `a` goes before `b`: the order of `(rank, MsgKey)`.
    #[inline(always)]
    fn less(&self, a: &Entry, b: &Entry) -> bool {
        match a.order.cmp(&b.order) {
            Ordering::Less => true,
            Ordering::Greater => false,
            // Equal client numbers are equal handles: the same key.
            Ordering::Equal => {
                a.key != NO_KEY && self.keys[a.key as usize] < self.keys[b.key as usize]
            }
        }
    }

    /// The smaller child of `at`, if it has any.
    #[inline(always)]
    fn smaller_child(&self, at: usize) -> Option<usize> {
        let left = 2 * at + 1;
        let right = left + 1;
        match (self.heap.get(left), self.heap.get(right)) {
            (Some(l), Some(r)) if self.less(r, l) => Some(right),
            (Some(_), _) => Some(left),
            _ => None,
        }
    }

    /// Moves the entry at `at` down along the smaller children to a leaf;
    /// returns where it ended.
    fn sift_to_bottom(&mut self, mut at: usize) -> usize {
        let moving = self.heap[at];
        while let Some(child) = self.smaller_child(at) {
            self.heap[at] = self.heap[child];
            at = child;
        }
        self.heap[at] = moving;
        at
    }

    fn sift_up(&mut self, mut at: usize) {
        let moving = self.heap[at];
        while at > 0 {
            let parent = (at - 1) / 2;
            if !self.less(&moving, &self.heap[parent]) {
                break;
            }
            self.heap[at] = self.heap[parent];
            at = parent;
        }
        self.heap[at] = moving;
    }

    fn sift_down(&mut self, mut at: usize) {
        let moving = self.heap[at];
        while let Some(child) = self.smaller_child(at) {
            if !self.less(&self.heap[child], &moving) {
                break;
            }
            self.heap[at] = self.heap[child];
            at = child;
        }
        self.heap[at] = moving;
    }
}

/// The key's variant, in `MsgKey`'s order (clients first).
fn variant(key: MsgKey) -> u8 {
    match key {
        MsgKey::Client(_) => 0,
        MsgKey::Server(_) => 1,
    }
}

/// The number `MsgKey` orders a variant by first: the client's handle or
/// the server's message ID (`ServerRpcHandle`'s order).
fn number(key: MsgKey) -> u64 {
    match key {
        MsgKey::Client(h) => h.0,
        MsgKey::Server(m) => m.rpc.id,
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::rpc::{ServerMsg, ServerRpcHandle, ServerSlot};

    fn server(id: u64, epoch: u64, port: u16, index: u32) -> MsgKey {
        let peer = SocketAddr::from(([10, 0, 0, 1], port));
        MsgKey::Server(ServerMsg {
            rpc: ServerRpcHandle { peer, epoch, id },
            slot: ServerSlot {
                index,
                generation: 0,
            },
        })
    }

    /// Pops come out in the order of `(rank, MsgKey)`, ties on the leading
    /// fields included, through pushes, re-ranks and pops interleaved.
    #[test]
    fn pops_in_the_order_of_rank_then_key() {
        let keys = [
            MsgKey::Client(RpcHandle(9)),
            MsgKey::Client(RpcHandle(3)),
            server(3, 0, 7000, 1),
            server(3, 0, 6000, 2),
            server(3, 1, 5000, 3),
            server(2, 0, 9000, 4),
            server(3, 0, 6000, 0),
            // Rank ties with those above and below.
            MsgKey::Client(RpcHandle(8)),
            MsgKey::Client(RpcHandle(2)),
            server(2, 0, 6000, 5),
        ];
        let mut queue = SendQueue::default();
        let mut model = Vec::new();
        for (i, &key) in keys.iter().enumerate() {
            let rank = [100, 5][i % 2];
            queue.push(rank, key);
            model.push((rank, key));
        }
        // Re-rank the smallest, as `write_next_data` does after a packet.
        model.sort();
        queue.rerank_top(200);
        model[0].0 = 200;
        model.sort();
        let mut popped = Vec::new();
        while let Some(top) = queue.peek() {
            popped.push(top);
            queue.pop();
        }
        assert_eq!(popped, model);
        let servers = keys.iter().filter(|k| matches!(k, MsgKey::Server(_)));
        assert_eq!(queue.free.len(), servers.count(), "every place returned");
    }

    /// Against a sorted model: pushes in key order, reverse key order and
    /// no order (run and heap both in use), re-ranks up and down and pops,
    /// interleaved; every peek is the model's smallest.
    #[test]
    fn matches_a_sorted_model_through_random_operations() {
        let mut rng = crate::sim::SplitMix64::new(23);
        let mut queue = SendQueue::default();
        let mut model: Vec<(u64, MsgKey)> = Vec::new();
        let mut next = 1000u64;
        for step in 0..20_000 {
            let roll = rng.next_u64() % 10;
            match roll {
                0..=4 => {
                    // Runs up, runs down, or anywhere, by phase.
                    next = match (step / 500) % 3 {
                        0 => next + 1,
                        1 => next.saturating_sub(1),
                        _ => rng.next_u64() % 2000,
                    };
                    let key = match rng.next_u64() % 4 {
                        0 => server(next % 50, rng.next_u64() % 2, 6000, step as u32),
                        _ => MsgKey::Client(RpcHandle(next)),
                    };
                    let rank = [64, 64, 64, 1500][(rng.next_u64() % 4) as usize];
                    queue.push(rank, key);
                    model.push((rank, key));
                }
                5..=6 => {
                    let rank = rng.next_u64() % 3000;
                    queue.rerank_top(rank);
                    if let Some(top) = model.iter_mut().min() {
                        top.0 = rank;
                    }
                }
                _ => {
                    queue.pop();
                    if let Some(at) = (0..model.len()).min_by_key(|&i| model[i]) {
                        model.swap_remove(at);
                    }
                }
            }
            assert_eq!(queue.peek(), model.iter().min().copied(), "step {step}");
        }
    }
}
