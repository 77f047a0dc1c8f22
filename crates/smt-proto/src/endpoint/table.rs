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
use crate::slab::Slab;

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
        self.slab.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slab.is_empty()
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
        self.slab.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slab.is_empty()
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
    fn handles_round_trip_and_are_never_zero() {
        let h = handle_of(7, 3);
        assert_eq!(slot_of(h), (7, 3));
        assert_ne!(handle_of(0, 1), RpcHandle(0));
    }
}
