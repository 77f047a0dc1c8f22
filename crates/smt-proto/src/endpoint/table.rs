//! The RPC tables: client and server RPCs in slabs (vectors of slots, freed
//! slots reused), so finding an RPC is an index, not a tree search, and a
//! steady stream of RPCs reuses the slots (and their capacity) of the RPCs
//! before it instead of allocating tree nodes.
//!
//! A client RPC's handle *is* its slot: index and the slot's generation, so
//! a handle kept after its RPC ended never finds the RPC that reused the
//! slot. Server RPCs are found by their [`RpcKey`] (the peer's slot, epoch,
//! ID: integers) through one hash-map lookup to their slot, and after that
//! by the slot.
//!
//! Iteration is in slot order: deterministic for a given sequence of
//! operations (simulations must not depend on a hasher's seed).

mod index;

use super::peer::id::PeerId;
use super::{RpcHandle, ServerRpcHandle};
use crate::rpc::{ClientRpc, ServerMsg, ServerRpc, ServerSlot};
use crate::slab::Slab;
use index::IdIndex;

fn handle_of(index: u32, generation: u32) -> RpcHandle {
    RpcHandle(u64::from(generation) << 32 | u64::from(index))
}

fn slot_of(handle: RpcHandle) -> (u32, u32) {
    (handle.0 as u32, (handle.0 >> 32) as u32)
}

/// The RPCs this endpoint started, by handle.
/// Every RPC of the endpoint, client and server side. Slabs iterated in
/// slot order: iteration order (ticks, scheduling ties) must not depend
/// on a hasher's seed, or simulations would not be reproducible.
#[derive(Debug, Default)]
pub(crate) struct RpcTables {
    pub(crate) clients: ClientTable,
    pub(crate) servers: ServerTable,
}

#[derive(Debug, Default)]
pub(crate) struct ClientTable {
    slab: Slab<ClientRpc>,
}

impl ClientTable {
    /// Stores `rpc` and returns its new handle.
    #[inline]
    pub(super) fn insert(&mut self, rpc: ClientRpc) -> RpcHandle {
        let (index, generation) = self.slab.insert(rpc);
        handle_of(index, generation)
    }

    pub(super) fn get(&self, handle: &RpcHandle) -> Option<&ClientRpc> {
        let (index, generation) = slot_of(*handle);
        self.slab.get(index, generation)
    }

    pub(super) fn get_mut(&mut self, handle: &RpcHandle) -> Option<&mut ClientRpc> {
        let (index, generation) = slot_of(*handle);
        self.slab.get_mut(index, generation)
    }

    pub(super) fn remove(&mut self, handle: &RpcHandle) -> Option<ClientRpc> {
        let (index, generation) = slot_of(*handle);
        self.slab.remove(index, generation)
    }

    /// Removes the RPC `handle` after `f` has had it in place (see
    /// [`Slab::remove_with`]).
    pub(super) fn remove_with<R>(
        &mut self,
        handle: &RpcHandle,
        f: impl FnOnce(&mut ClientRpc) -> R,
    ) -> Option<R> {
        let (index, generation) = slot_of(*handle);
        self.slab.remove_with(index, generation, f)
    }

    pub(super) fn len(&self) -> usize {
        self.slab.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.slab.is_empty()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (RpcHandle, &ClientRpc)> {
        self.slab.iter().map(|(i, g, c)| (handle_of(i, g), c))
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = RpcHandle> + '_ {
        self.iter().map(|(h, _)| h)
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &ClientRpc> {
        self.slab.iter().map(|(_, _, c)| c)
    }
}

/// An RPC's key inside the endpoint: its peer's slot, key epoch and
/// message ID. Integers only: hashing it is cheap, unlike the peer's
/// `SocketAddr` in the wire key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct RpcKey {
    pub peer: PeerId,
    pub epoch: u64,
    pub id: u64,
}

/// One server RPC with its wire key and its peer's slot.
#[derive(Debug)]
struct ServerEntry {
    key: ServerRpcHandle,
    peer: PeerId,
    rpc: ServerRpc,
}

/// One peer's RPCs by (key epoch, message ID): our calls to it and its
/// requests to us. The per-packet RPC lookup is here (one probe of a
/// small integer-keyed table, `index.rs`), and whatever ends with the
/// peer's session or key epoch finds its RPCs here instead of scanning
/// every RPC.
#[derive(Debug, Default)]
pub(crate) struct PeerRpcs {
    clients: IdIndex,
    servers: IdIndex,
}

impl PeerRpcs {
    #[inline]
    pub(super) fn client(&self, epoch: u64, id: u64) -> Option<RpcHandle> {
        self.clients.get(epoch, id).map(RpcHandle)
    }

    #[inline]
    pub(super) fn server(&self, epoch: u64, id: u64) -> Option<ServerSlot> {
        self.servers.get(epoch, id).map(slot_from)
    }

    pub(super) fn add_client(&mut self, epoch: u64, id: u64, handle: RpcHandle) {
        self.clients.insert(epoch, id, handle.0);
    }

    /// Returns the slot of an RPC the new one replaces.
    #[inline]
    pub(super) fn add_server(
        &mut self,
        epoch: u64,
        id: u64,
        slot: ServerSlot,
    ) -> Option<ServerSlot> {
        self.servers
            .insert(epoch, id, slot_word(slot))
            .map(slot_from)
    }

    pub(super) fn remove_client(&mut self, epoch: u64, id: u64) {
        self.clients.remove_if(epoch, id, |_| true);
    }

    /// Takes `slot` out of the index, if the index still names it for
    /// (`epoch`, `id`).
    pub(super) fn remove_server(&mut self, epoch: u64, id: u64, slot: ServerSlot) {
        self.servers.remove_if(epoch, id, |s| s == slot_word(slot));
    }

    /// Whether the peer has an RPC under way.
    pub(super) fn is_empty(&self) -> bool {
        self.clients.len() == 0 && self.servers.len() == 0
    }

    /// Its calls of key epoch `epoch`, in no particular order.
    pub(super) fn clients_in(&self, epoch: u64) -> impl Iterator<Item = RpcHandle> + '_ {
        self.clients
            .iter()
            .filter(move |&(e, _, _)| e == epoch)
            .map(|(_, _, h)| RpcHandle(h))
    }

    /// Whether one of its RPCs, either way and of any key epoch, has
    /// message ID `id`.
    pub(super) fn has_id(&self, id: u64) -> bool {
        self.clients.iter().any(|(_, i, _)| i == id) || self.servers.iter().any(|(_, i, _)| i == id)
    }

    /// Whether it has a request of key epoch `epoch`.
    pub(super) fn has_server_in(&self, epoch: u64) -> bool {
        self.servers.iter().any(|(e, _, _)| e == epoch)
    }

    /// Its calls (of key epoch `epoch`, or all) in slot order: the order a
    /// scan of the client table visits them.
    pub(super) fn clients_of(&self, epoch: Option<u64>) -> Vec<RpcHandle> {
        let mut v: Vec<RpcHandle> = self
            .clients
            .iter()
            .filter(|&(e, _, _)| epoch.is_none_or(|x| x == e))
            .map(|(_, _, h)| RpcHandle(h))
            .collect();
        v.sort_unstable_by_key(|h| slot_of(*h).0);
        v
    }

    /// Its requests (of key epoch `epoch`, or all) in slot order: the order
    /// a scan of the server table visits them.
    pub(super) fn servers_of(&self, epoch: Option<u64>) -> Vec<ServerSlot> {
        let mut v: Vec<ServerSlot> = self
            .servers
            .iter()
            .filter(|&(e, _, _)| epoch.is_none_or(|x| x == e))
            .map(|(_, _, s)| slot_from(s))
            .collect();
        v.sort_unstable_by_key(|s| s.index);
        v
    }
}

/// A server slot as one word for the index.
fn slot_word(slot: ServerSlot) -> u64 {
    u64::from(slot.generation) << 32 | u64::from(slot.index)
}

fn slot_from(word: u64) -> ServerSlot {
    ServerSlot {
        index: word as u32,
        generation: (word >> 32) as u32,
    }
}

/// Requests received and not yet freed, in a slab; the peer's
/// [`PeerRpcs`] finds one's slot by (key epoch, message ID).
#[derive(Debug, Default)]
pub(crate) struct ServerTable {
    slab: Slab<ServerEntry>,
}

impl ServerTable {
    /// Stores the RPC `make` builds under `key` of peer `peer`, built in
    /// its slot ([`Slab::insert_with`]), and returns the slot (the
    /// caller indexes it in the peer's `PeerRpcs`) and the RPC, lent for
    /// its first packet to be stored without a lookup.
    #[inline(always)]
    pub(super) fn insert(
        &mut self,
        key: ServerRpcHandle,
        peer: PeerId,
        make: impl FnOnce() -> ServerRpc,
    ) -> (ServerSlot, &mut ServerRpc) {
        let entry = || ServerEntry {
            key,
            peer,
            rpc: make(),
        };
        let ((index, generation), entry) = self.slab.insert_with(entry);
        (ServerSlot { index, generation }, &mut entry.rpc)
    }

    #[inline]
    pub(super) fn get(&self, slot: ServerSlot) -> Option<&ServerRpc> {
        self.slab.get(slot.index, slot.generation).map(|e| &e.rpc)
    }

    #[inline]
    pub(super) fn get_mut(&mut self, slot: ServerSlot) -> Option<&mut ServerRpc> {
        self.slab
            .get_mut(slot.index, slot.generation)
            .map(|e| &mut e.rpc)
    }

    /// The RPC in `slot` with its peer's slot: one lookup for both.
    #[inline]
    pub(super) fn with_peer(&self, slot: ServerSlot) -> Option<(PeerId, &ServerRpc)> {
        self.slab
            .get(slot.index, slot.generation)
            .map(|e| (e.peer, &e.rpc))
    }

    /// Removes the RPC in `slot`, with its internal key (for the caller to
    /// take out of the peer's `PeerRpcs`).
    pub(super) fn remove(&mut self, slot: ServerSlot) -> Option<(RpcKey, ServerRpc)> {
        let e = self.slab.remove(slot.index, slot.generation)?;
        let rkey = RpcKey {
            peer: e.peer,
            epoch: e.key.epoch,
            id: e.key.id,
        };
        Some((rkey, e.rpc))
    }

    /// Removes the RPC in `slot` after `f` has had it in place, with its
    /// internal key (see [`Slab::remove_with`]).
    pub(super) fn remove_with<R>(
        &mut self,
        slot: ServerSlot,
        f: impl FnOnce(&mut ServerRpc) -> R,
    ) -> Option<(RpcKey, R)> {
        self.slab.remove_with(slot.index, slot.generation, |e| {
            let rkey = RpcKey {
                peer: e.peer,
                epoch: e.key.epoch,
                id: e.key.id,
            };
            (rkey, f(&mut e.rpc))
        })
    }

    pub(super) fn len(&self) -> usize {
        self.slab.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.slab.is_empty()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&ServerRpcHandle, &ServerRpc)> {
        self.slab.iter().map(|(_, _, e)| (&e.key, &e.rpc))
    }

    /// Every RPC with its slot and its peer's slot.
    pub(super) fn slots(&self) -> impl Iterator<Item = (ServerMsg, PeerId, &ServerRpc)> {
        self.slab.iter().map(|(index, generation, e)| {
            let slot = ServerSlot { index, generation };
            (ServerMsg { rpc: e.key, slot }, e.peer, &e.rpc)
        })
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &ServerRpcHandle> {
        self.iter().map(|(k, _)| k)
    }

    #[cfg(test)]
    pub(super) fn values(&self) -> impl Iterator<Item = &ServerRpc> {
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
