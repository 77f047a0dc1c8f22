//! The packets a message owes again (asked for by RESEND), smallest
//! first, each once: a sorted deque instead of a `BTreeSet`.
//!
//! Why: every message carries one, and it is nearly always empty; a
//! `BTreeSet` costs a call and an iterator to drop even then (~18
//! instructions per message, two messages per RPC), an empty deque a
//! compare. What it holds stays small: one RESEND adds at most
//! `Config::max_resend_bytes` of packets, most often in order (each joins
//! the back), and the send loop takes them from the front.

use std::collections::VecDeque;

/// (segment, packet index) pairs, sorted, without duplicates.
#[derive(Debug, Default)]
pub(super) struct ResendSet {
    packets: VecDeque<(u64, u32)>,
}

impl ResendSet {
    /// Adds `p` unless it is already owed.
    pub(super) fn insert(&mut self, p: (u64, u32)) {
        if self.packets.back().is_none_or(|&last| last < p) {
            self.packets.push_back(p);
            return;
        }
        if let Err(at) = self.packets.binary_search(&p) {
            self.packets.insert(at, p);
        }
    }

    /// The smallest packet owed.
    #[inline]
    pub(super) fn first(&self) -> Option<&(u64, u32)> {
        self.packets.front()
    }

    /// Takes the smallest packet owed.
    #[inline]
    pub(super) fn pop_first(&mut self) -> Option<(u64, u32)> {
        self.packets.pop_front()
    }

    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a `BTreeSet`: inserts in order, out of order and repeated,
    /// with pops between; the same packets come out in the same order.
    #[test]
    fn matches_a_btree_set() {
        let mut rng = crate::sim::SplitMix64::new(31);
        let mut set = ResendSet::default();
        let mut model = std::collections::BTreeSet::new();
        for _ in 0..20_000 {
            match rng.next_u64() % 4 {
                0 => {
                    assert_eq!(set.pop_first(), model.pop_first());
                }
                _ => {
                    let p = (rng.next_u64() % 4, (rng.next_u64() % 64) as u32);
                    set.insert(p);
                    model.insert(p);
                }
            }
            assert_eq!(set.first(), model.first());
            assert_eq!(set.is_empty(), model.is_empty());
        }
        let rest: Vec<_> = std::iter::from_fn(|| set.pop_first()).collect();
        assert_eq!(rest, model.into_iter().collect::<Vec<_>>());
    }
}
