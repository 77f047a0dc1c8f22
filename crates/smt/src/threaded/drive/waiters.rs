//! Whoever waits for each outstanding call, kept at the call's slot in
//! the engine's call table ([`CallToken::slot`]): found by an index, not
//! by hashing the token (an insert and a removal in a hash map per call
//! cost ~150 instructions, `docs/benchmarks.md`).

use crate::engine::CallToken;

/// A waiter per outstanding call, at its token's slot.
pub(super) struct Waiters<W> {
    /// Grows to the most calls ever outstanding at once, then is reused
    /// (the engine reuses slots as calls end).
    slots: Vec<Option<(CallToken, W)>>,
}

impl<W> Default for Waiters<W> {
    fn default() -> Self {
        Self { slots: Vec::new() }
    }
}

impl<W> Waiters<W> {
    /// `call`'s waiter. A waiter left at the slot by a call that ended
    /// without it being taken is dropped (its caller then hears nothing
    /// more, as it would have from a leftover map entry).
    pub(super) fn insert(&mut self, call: CallToken, waiter: W) {
        let slot = call.slot();
        if slot >= self.slots.len() {
            self.slots.resize_with(slot + 1, || None);
        }
        self.slots[slot] = Some((call, waiter));
    }

    /// Takes `call`'s waiter.
    pub(super) fn remove(&mut self, call: &CallToken) -> Option<W> {
        let entry = self.slots.get_mut(call.slot())?;
        if entry.as_ref()?.0 != *call {
            return None;
        }
        entry.take().map(|(_, waiter)| waiter)
    }

    pub(super) fn get_mut(&mut self, call: &CallToken) -> Option<&mut W> {
        match self.slots.get_mut(call.slot())? {
            Some((token, waiter)) if token == call => Some(waiter),
            _ => None,
        }
    }

    /// Every waiter (O(the most calls ever outstanding)).
    pub(super) fn values(&self) -> impl Iterator<Item = &W> {
        self.slots.iter().flatten().map(|(_, waiter)| waiter)
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut W> {
        self.slots.iter_mut().flatten().map(|(_, waiter)| waiter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiter_is_found_only_by_its_own_call() {
        let (old, new) = (CallToken::for_test(1, 2), CallToken::for_test(5, 2));
        let mut waiters = Waiters::default();
        waiters.insert(old, "old");
        assert_eq!(waiters.remove(&new), None, "same slot, another call");
        assert_eq!(waiters.get_mut(&old), Some(&mut "old"));
        assert_eq!(waiters.remove(&old), Some("old"));
        assert_eq!(waiters.remove(&old), None);
        waiters.insert(new, "new");
        assert_eq!(waiters.values().collect::<Vec<_>>(), [&"new"]);
    }
}
