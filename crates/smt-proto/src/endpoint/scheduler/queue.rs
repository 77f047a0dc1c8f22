//! The send candidates: a min-heap of (bytes left, message key) whose
//! entries are 24 bytes, not the 72 of a `(u64, MsgKey)`: the rank, a
//! prefix of the key (one integer that never orders two keys against their
//! own order, but may tie them) and the index of the whole key in a side
//! table. Entries that tie on rank and prefix (two server messages with the
//! same ID from different peers or epochs) compare the whole keys, so the
//! order is exactly that of `(rank, MsgKey)`. Both vectors and the free
//! list are reused: no allocation per message once they have grown.

use super::MsgKey;

#[derive(Debug, Default)]
pub(super) struct SendQueue {
    /// The heap: the smallest entry first.
    heap: Vec<Entry>,
    /// Whole keys, by `Entry::key`; free places are in `free`.
    keys: Vec<MsgKey>,
    free: Vec<u32>,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    rank: u64,
    /// `prefix(key)`.
    prefix: u64,
    /// The whole key's index in `SendQueue::keys`.
    key: u32,
}

impl SendQueue {
    pub(super) fn push(&mut self, rank: u64, key: MsgKey) {
        let index = self.store(key);
        self.heap.push(Entry {
            rank,
            prefix: prefix(key),
            key: index,
        });
        self.sift_up(self.heap.len() - 1);
    }

    pub(super) fn peek(&self) -> Option<(u64, MsgKey)> {
        let top = self.heap.first()?;
        Some((top.rank, self.keys[top.key as usize]))
    }

    /// Re-ranks the smallest entry (nothing if empty).
    pub(super) fn rerank_top(&mut self, rank: u64) {
        if let Some(top) = self.heap.first_mut() {
            top.rank = rank;
            self.sift_down(0);
        }
    }

    /// Drops the smallest entry (nothing if empty).
    pub(super) fn pop(&mut self) {
        if self.heap.is_empty() {
            return;
        }
        let top = self.heap.swap_remove(0);
        self.free.push(top.key);
        if !self.heap.is_empty() {
            // The last entry, now on top, is most often among the largest:
            // take it down along the smaller children to the bottom (one
            // comparison per level), then up to its place.
            let at = self.sift_to_bottom(0);
            self.sift_up(at);
        }
    }

    /// Puts `key` in a free place of the side table.
    fn store(&mut self, key: MsgKey) -> u32 {
        if let Some(index) = self.free.pop() {
            self.keys[index as usize] = key;
            return index;
        }
        self.keys.push(key);
        // A queue holds at most one entry per message plus stale ones, far
        // below 2^32.
        u32::try_from(self.keys.len() - 1).unwrap_or(u32::MAX)
    }

    /// Whether `a` goes before `b`: the order of `(rank, MsgKey)`.
    #[inline(always)]
    fn less(&self, a: &Entry, b: &Entry) -> bool {
        if (a.rank, a.prefix) != (b.rank, b.prefix) {
            return (a.rank, a.prefix) < (b.rank, b.prefix);
        }
        self.keys[a.key as usize] < self.keys[b.key as usize]
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

/// An integer in the order of the keys, but coarser: `MsgKey` orders by
/// variant (clients first), then by the client's handle or the server's
/// message ID. The top bit is the variant, the rest that number less its
/// lowest bit.
fn prefix(key: MsgKey) -> u64 {
    match key {
        MsgKey::Client(h) => h.0 >> 1,
        MsgKey::Server(m) => 1 << 63 | m.rpc.id >> 1,
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::rpc::{RpcHandle, ServerMsg, ServerRpcHandle, ServerSlot};

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
            // Ties on the prefix with those above.
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
        assert_eq!(queue.free.len(), keys.len(), "every place returned");
    }
}
