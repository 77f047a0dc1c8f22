//! The RPC tables: client and server RPCs in slabs (vectors of slots, freed
//! slots reused), so finding an RPC is an index, not a tree search, and a
//! steady stream of RPCs reuses the slots (and their capacity) of the RPCs
//! before it instead of allocating tree nodes.
//!
//! A client RPC's handle *is* its slot: index and the slot's generation, so
//! a handle kept after its RPC ended never finds the RPC that reused the
//! slot. Server RPCs are found by their wire key (peer, epoch, ID) through
//! one hash-map lookup to their slot.
//!
//! Iteration is in slot order: deterministic for a given sequence of
//! operations (simulations must not depend on a hasher's seed).

use super::{ClientRpc, HashMap, RpcHandle, ServerRpc, ServerRpcHandle};

/// One slot: its generation (bumped when freed) and what it holds.
#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// Values in reusable slots, addressed by (index, generation).
#[derive(Debug)]
struct Slab<T> {
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
    fn insert(&mut self, value: T) -> (u32, u32) {
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

    fn get(&self, index: u32, generation: u32) -> Option<&T> {
        let slot = self.slots.get(index as usize)?;
        (slot.generation == generation)
            .then_some(slot.value.as_ref())
            .flatten()
    }

    fn get_mut(&mut self, index: u32, generation: u32) -> Option<&mut T> {
        let slot = self.slots.get_mut(index as usize)?;
        (slot.generation == generation)
            .then_some(slot.value.as_mut())
            .flatten()
    }

    fn remove(&mut self, index: u32, generation: u32) -> Option<T> {
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

    fn iter(&self) -> impl Iterator<Item = (u32, u32, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((i as u32, s.generation, s.value.as_ref()?)))
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = (u32, u32, &mut T)> {
        self.slots
            .iter_mut()
            .enumerate()
            .filter_map(|(i, s)| Some((i as u32, s.generation, s.value.as_mut()?)))
    }
}

fn handle_of(index: u32, generation: u32) -> RpcHandle {
    RpcHandle(u64::from(generation) << 32 | u64::from(index))
}

fn slot_of(handle: RpcHandle) -> (u32, u32) {
    (handle.0 as u32, (handle.0 >> 32) as u32)
}

/// The RPCs this endpoint started, by handle.
#[derive(Debug, Default)]
pub(crate) struct ClientTable {
    slab: Slab<ClientRpc>,
}

impl ClientTable {
    /// Stores `rpc` and returns its new handle.
    pub fn insert(&mut self, rpc: ClientRpc) -> RpcHandle {
        let (index, generation) = self.slab.insert(rpc);
        handle_of(index, generation)
    }

    pub fn get(&self, handle: &RpcHandle) -> Option<&ClientRpc> {
        let (index, generation) = slot_of(*handle);
        self.slab.get(index, generation)
    }

    pub fn get_mut(&mut self, handle: &RpcHandle) -> Option<&mut ClientRpc> {
        let (index, generation) = slot_of(*handle);
        self.slab.get_mut(index, generation)
    }

    pub fn remove(&mut self, handle: &RpcHandle) -> Option<ClientRpc> {
        let (index, generation) = slot_of(*handle);
        self.slab.remove(index, generation)
    }

    pub fn len(&self) -> usize {
        self.slab.len
    }

    pub fn is_empty(&self) -> bool {
        self.slab.len == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = (RpcHandle, &ClientRpc)> {
        self.slab.iter().map(|(i, g, c)| (handle_of(i, g), c))
    }

    pub fn keys(&self) -> impl Iterator<Item = RpcHandle> + '_ {
        self.iter().map(|(h, _)| h)
    }

    pub fn values(&self) -> impl Iterator<Item = &ClientRpc> {
        self.slab.iter().map(|(_, _, c)| c)
    }
}

/// Requests received and not yet freed, by wire key.
#[derive(Debug, Default)]
pub(crate) struct ServerTable {
    slab: Slab<(ServerRpcHandle, ServerRpc)>,
    index: HashMap<ServerRpcHandle, (u32, u32)>,
}

impl ServerTable {
    /// Stores `rpc` under `key` (replacing any RPC with that key).
    pub fn insert(&mut self, key: ServerRpcHandle, rpc: ServerRpc) {
        self.remove(&key);
        let slot = self.slab.insert((key, rpc));
        self.index.insert(key, slot);
    }

    pub fn get(&self, key: &ServerRpcHandle) -> Option<&ServerRpc> {
        let &(index, generation) = self.index.get(key)?;
        self.slab.get(index, generation).map(|(_, s)| s)
    }

    pub fn get_mut(&mut self, key: &ServerRpcHandle) -> Option<&mut ServerRpc> {
        let &(index, generation) = self.index.get(key)?;
        self.slab.get_mut(index, generation).map(|(_, s)| s)
    }

    pub fn remove(&mut self, key: &ServerRpcHandle) -> Option<ServerRpc> {
        let (index, generation) = self.index.remove(key)?;
        self.slab.remove(index, generation).map(|(_, s)| s)
    }

    /// Keeps only the RPCs `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&ServerRpcHandle, &mut ServerRpc) -> bool) {
        let gone: Vec<ServerRpcHandle> = self
            .slab
            .iter_mut()
            .filter_map(|(_, _, (k, s))| (!keep(k, s)).then_some(*k))
            .collect();
        for key in gone {
            self.remove(&key);
        }
    }

    pub fn len(&self) -> usize {
        self.slab.len
    }

    pub fn is_empty(&self) -> bool {
        self.slab.len == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = (&ServerRpcHandle, &ServerRpc)> {
        self.slab.iter().map(|(_, _, (k, s))| (k, s))
    }

    pub fn keys(&self) -> impl Iterator<Item = &ServerRpcHandle> {
        self.iter().map(|(k, _)| k)
    }

    #[cfg(test)]
    pub fn values(&self) -> impl Iterator<Item = &ServerRpc> {
        self.iter().map(|(_, s)| s)
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
        assert_eq!(slab.len, 1);
    }

    #[test]
    fn handles_round_trip_and_are_never_zero() {
        let h = handle_of(7, 3);
        assert_eq!(slot_of(h), (7, 3));
        assert_ne!(handle_of(0, 1), RpcHandle(0));
    }
}
