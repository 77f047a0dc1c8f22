//! One peer's RPCs by (key epoch, message ID), as 64-bit values (an RPC
//! handle, a server slot): a small open-addressing
//! table (linear probing, backward-shift removal, so no tombstones), the
//! per-packet RPC lookup.
//!
//! Why not a general hash map: the keys are two integers, and message IDs
//! of one side are sequential (`IdAllocator`), so one multiply spreads
//! them; the lookup is a multiply, a shift and one or two compares, where
//! hashing the pair with a general hasher and probing its control bytes
//! cost several times that on every packet. A random seed per table goes
//! into the hash first, so where a peer's IDs land depends on a secret the
//! peer does not know: it cannot line them up in one probe run. At most
//! half the slots are in use, so probe runs stay short and a miss always
//! ends at an empty slot.
//!
//! Memory follows the entries it holds, as a hash map's does: the table
//! doubles when half full (so it has at most four slots per entry at its
//! peak), its entries are the peer's RPCs in the endpoint's tables
//! (bounded by `endpoint/limits.rs`), and it is reused, not reallocated,
//! as RPCs come and go.

use std::hash::BuildHasher;

/// The smallest table once anything is stored.
const MIN_SLOTS: usize = 8;

/// 2^64 / φ, odd: the multiplier of Fibonacci hashing.
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// The epoch of an empty slot: epochs count key updates from 0 and never
/// get near it.
const EMPTY: u64 = u64::MAX;

/// One slot: key epoch (`EMPTY`: free), message ID and the value.
#[derive(Clone, Copy, Debug)]
struct Entry {
    epoch: u64,
    id: u64,
    value: u64,
}

/// 64-bit values of one peer's RPCs by (key epoch, message ID).
#[derive(Debug)]
pub(crate) struct IdIndex {
    /// A power of two in length (or empty), at most half in use.
    slots: Vec<Entry>,
    len: usize,
    /// `64 - log2(slots.len())`: the hash's top bits index the slots.
    shift: u32,
    /// Random: what the hash mixes into the key first.
    seed: u64,
}

impl Default for IdIndex {
    fn default() -> Self {
        let random = foldhash::fast::RandomState::default().hash_one(0x5eed_u64);
        Self {
            slots: Vec::new(),
            len: 0,
            shift: 63,
            seed: random,
        }
    }
}

impl IdIndex {
    /// The value stored under (`epoch`, `id`).
    #[inline]
    pub(crate) fn get(&self, epoch: u64, id: u64) -> Option<u64> {
        let at = self.find(epoch, id)?;
        Some(self.slots[at].value)
    }

    /// Stores `value` under (`epoch`, `id`); returns the value it replaces.
    /// One probe run: with no tombstones, the first free slot of the run
    /// is past every entry with this key.
    #[inline]
    pub(crate) fn insert(&mut self, epoch: u64, id: u64, value: u64) -> Option<u64> {
        debug_assert_ne!(epoch, EMPTY, "epochs never get near u64::MAX");
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut at = self.home(epoch, id);
        loop {
            let e = &mut self.slots[at];
            if e.epoch == EMPTY {
                *e = Entry { epoch, id, value };
                self.len += 1;
                return None;
            }
            if e.id == id && e.epoch == epoch {
                return Some(std::mem::replace(&mut e.value, value));
            }
            at = (at + 1) & mask;
        }
    }

    /// Removes the entry under (`epoch`, `id`) if `goes` says its value
    /// should go; returns the value removed.
    #[inline]
    pub(crate) fn remove_if(
        &mut self,
        epoch: u64,
        id: u64,
        goes: impl FnOnce(u64) -> bool,
    ) -> Option<u64> {
        let at = self.find(epoch, id)?;
        let value = self.slots[at].value;
        if !goes(value) {
            return None;
        }
        let next = (at + 1) & (self.slots.len() - 1);
        match self.slots[next].epoch {
            // Most often nothing follows: the slot just becomes free.
            EMPTY => self.slots[at] = free(),
            _ => self.close_hole(at),
        }
        self.len -= 1;
        Some(value)
    }

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Every entry as (epoch, id, value), in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        let used = self.slots.iter().filter(|e| e.epoch != EMPTY);
        used.map(|e| (e.epoch, e.id, e.value))
    }

    /// The slot holding (`epoch`, `id`).
    #[inline(always)]
    fn find(&self, epoch: u64, id: u64) -> Option<usize> {
        let mask = self.slots.len().wrapping_sub(1);
        let mut at = self.home(epoch, id);
        // Ends: at most half the slots are in use, so a free one comes
        // (and an empty table has none to look at).
        loop {
            let e = self.slots.get(at)?;
            if e.id == id && e.epoch == epoch {
                return Some(at);
            }
            if e.epoch == EMPTY {
                return None;
            }
            at = (at + 1) & mask;
        }
    }

    /// Where the probe for (`epoch`, `id`) starts: the top bits of the
    /// key, xored with the table's random seed, times 2^64 / φ (Fibonacci
    /// hashing). A side's IDs differ by 2, so the role bit goes first:
    /// consecutive IDs then make runs of consecutive integers, which the
    /// seed only permutes within aligned blocks, and Fibonacci hashing
    /// spreads such runs evenly whatever the seed. Epochs are few, so
    /// they go to bits IDs leave unused.
    #[inline(always)]
    fn home(&self, epoch: u64, id: u64) -> usize {
        let x = (id >> 1) ^ epoch.rotate_right(17) ^ self.seed;
        (x.wrapping_mul(GOLDEN) >> self.shift) as usize
    }

    /// Puts `entry` in the first free slot of its probe run.
    fn place(&mut self, entry: Entry) {
        let mask = self.slots.len() - 1;
        let mut at = self.home(entry.epoch, entry.id);
        while self.slots[at].epoch != EMPTY {
            at = (at + 1) & mask;
        }
        self.slots[at] = entry;
    }

    /// Frees slot `hole`, moving back the entries after it whose probe
    /// runs crossed it (backward-shift deletion: every entry stays
    /// reachable from its home without tombstones).
    fn close_hole(&mut self, mut hole: usize) {
        let mask = self.slots.len() - 1;
        let mut at = hole;
        loop {
            at = (at + 1) & mask;
            let e = self.slots[at];
            if e.epoch == EMPTY {
                break;
            }
            let home = self.home(e.epoch, e.id);
            // `e` may fill the hole if the hole lies on its probe run,
            // from its home up to where it is.
            if at.wrapping_sub(home) & mask >= at.wrapping_sub(hole) & mask {
                self.slots[hole] = e;
                hole = at;
            }
        }
        self.slots[hole] = free();
    }

    /// Doubles the table (or makes the first one) and re-places every entry.
    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(MIN_SLOTS);
        let old = std::mem::replace(&mut self.slots, vec![free(); size]);
        self.shift = 64 - size.trailing_zeros();
        for e in old.into_iter().filter(|e| e.epoch != EMPTY) {
            self.place(e);
        }
    }
}

/// A free slot.
fn free() -> Entry {
    Entry {
        epoch: EMPTY,
        id: 0,
        value: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a model map: inserts, replacements and removals of
    /// sequential and scattered keys in two epochs; every lookup agrees,
    /// and the table never fills past half.
    #[test]
    fn matches_a_model_map_through_random_operations() {
        let mut rng = crate::sim::SplitMix64::new(29);
        let mut index = IdIndex::default();
        let mut model = std::collections::BTreeMap::new();
        let mut next = 2u64;
        for step in 0..50_000u32 {
            let epoch = rng.next_u64() % 2;
            let id = match rng.next_u64() % 3 {
                0 => {
                    next += 2;
                    next
                }
                1 => next.saturating_sub(2 * (rng.next_u64() % 64)),
                _ => rng.next_u64() % 4096,
            };
            if rng.next_u64() % 5 < 3 && model.len() < 600 {
                assert_eq!(
                    index.insert(epoch, id, u64::from(step)),
                    model.insert((epoch, id), u64::from(step))
                );
            } else {
                let removed = index.remove_if(epoch, id, |_| true);
                assert_eq!(removed, model.remove(&(epoch, id)), "step {step}");
            }
            assert_eq!(index.len(), model.len());
            assert!(index.len() * 2 <= index.slots.len().max(1));
            let probe = rng.next_u64() % 4096;
            assert_eq!(index.get(epoch, probe), model.get(&(epoch, probe)).copied());
        }
        for (&(epoch, id), &v) in &model {
            assert_eq!(index.get(epoch, id), Some(v));
        }
        assert_eq!(index.iter().count(), model.len());
    }

    /// A conditional removal leaves an entry whose value does not match.
    #[test]
    fn remove_if_keeps_a_value_that_does_not_match() {
        let mut index = IdIndex::default();
        index.insert(0, 4, 7);
        assert_eq!(index.remove_if(0, 4, |v| v == 8), None);
        assert_eq!(index.get(0, 4), Some(7));
        assert_eq!(index.remove_if(0, 4, |v| v == 7), Some(7));
        assert_eq!(index.get(0, 4), None);
        assert_eq!(index.len(), 0);
    }

    /// Keys that share their low bits (what a peer aiming IDs at one slot
    /// of an index-by-low-bits table would send) still spread.
    #[test]
    fn ids_sharing_low_bits_spread_over_the_table() {
        let mut index = IdIndex::default();
        for k in 0..256u64 {
            index.insert(0, k << 12, k);
        }
        let longest = longest_run(&index);
        assert!(longest < 64, "a probe run of {longest} slots");
    }

    fn longest_run(index: &IdIndex) -> usize {
        let (mut run, mut longest) = (0, 0);
        for s in &index.slots {
            run = if s.epoch != EMPTY { run + 1 } else { 0 };
            longest = longest.max(run);
        }
        longest
    }
}
