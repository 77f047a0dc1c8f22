//! Values in reusable slots, addressed by (index, generation): finding one
//! is an index, not a hash or a tree search; a freed slot is reused (and
//! its memory with it) under the next generation, so a key kept after its
//! value was removed never finds the value that reused the slot.
//!
//! Iteration is in slot order: deterministic for a given sequence of
//! operations (simulations must not depend on a hasher's seed).

/// One slot: its generation (bumped when freed) and what it holds.
#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// Values in reusable slots, addressed by (index, generation).
#[derive(Debug)]
pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    /// Free slot indexes, reused last-freed first (its memory is warm).
    free: Vec<u32>,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Slab<T> {
    #[inline]
    pub(crate) fn insert(&mut self, value: T) -> (u32, u32) {
        self.len += 1;
        if let Some(index) = self.free.pop() {
            let slot = &mut self.slots[index as usize];
            slot.value = Some(value);
            return (index, slot.generation);
        }
        let index = u32::try_from(self.slots.len()).expect("fewer than 2^32 RPCs in flight");
        self.slots.push(Slot {
            generation: 1,
            value: Some(value),
        });
        (index, 1)
    }

    /// [`Slab::insert`] of the value `make` builds, built in its slot when
    /// `make` inlines (a large value moved in is a memcpy per insert); the
    /// value is lent back, for the caller to go on with it without looking
    /// it up again.
    #[inline(always)]
    pub(crate) fn insert_with(&mut self, make: impl FnOnce() -> T) -> ((u32, u32), &mut T) {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                let index =
                    u32::try_from(self.slots.len()).expect("fewer than 2^32 RPCs in flight");
                self.slots.push(Slot {
                    generation: 1,
                    value: None,
                });
                index
            }
        };
        self.len += 1;
        let slot = &mut self.slots[index as usize];
        let generation = slot.generation;
        ((index, generation), slot.value.insert(make()))
    }

    pub(crate) fn get(&self, index: u32, generation: u32) -> Option<&T> {
        let slot = self.slots.get(index as usize)?;
        (slot.generation == generation)
            .then_some(slot.value.as_ref())
            .flatten()
    }

    pub(crate) fn get_mut(&mut self, index: u32, generation: u32) -> Option<&mut T> {
        let slot = self.slots.get_mut(index as usize)?;
        (slot.generation == generation)
            .then_some(slot.value.as_mut())
            .flatten()
    }

    pub(crate) fn remove(&mut self, index: u32, generation: u32) -> Option<T> {
        let slot = self.slots.get_mut(index as usize)?;
        if slot.generation != generation {
            return None;
        }
        let value = slot.value.take()?;
        slot.generation = slot.generation.wrapping_add(1).max(1);
        self.free.push(index);
        self.len -= 1;
        Some(value)
    }

    /// Removes the value at (`index`, `generation`) after `f` has had it
    /// in place: a value that is only emptied (its buffers given back)
    /// is dropped where it lies instead of being moved out first.
    #[inline]
    pub(crate) fn remove_with<R>(
        &mut self,
        index: u32,
        generation: u32,
        f: impl FnOnce(&mut T) -> R,
    ) -> Option<R> {
        let slot = self.slots.get_mut(index as usize)?;
        if slot.generation != generation {
            return None;
        }
        let result = f(slot.value.as_mut()?);
        slot.value = None;
        slot.generation = slot.generation.wrapping_add(1).max(1);
        self.free.push(index);
        self.len -= 1;
        Some(result)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, u32, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((i as u32, s.generation, s.value.as_ref()?)))
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (u32, u32, &mut T)> {
        self.slots
            .iter_mut()
            .enumerate()
            .filter_map(|(i, s)| Some((i as u32, s.generation, s.value.as_mut()?)))
    }
}

impl<T> Slab<T> {
    /// Values held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_slot_is_reused_under_a_new_generation() {
        let mut slab = Slab::default();
        let (a, ga) = slab.insert("a");
        assert_eq!(slab.remove(a, ga), Some("a"));
        let (b, gb) = slab.insert("b");
        assert_eq!((b, gb), (a, ga + 1), "same slot, next generation");
        assert_eq!(slab.get(a, ga), None, "the old key no longer finds it");
        assert_eq!(slab.remove(a, ga), None);
        assert_eq!(slab.get(b, gb), Some(&"b"));
        assert_eq!(slab.len(), 1);
    }
}
