//! An RPC's end, which every path shares (the receive path, the tick,
//! the verbs): a call failed, a request freed, a session's or key epoch's
//! RPCs dropped, their buffers kept for reuse. Methods of [`RpcParts`]
//! (`rpc.rs`); the tick and the verbs reach them through thin `Endpoint`
//! methods in `recv.rs`.

use super::super::peers::PeerId;
use super::super::{
    keep_incoming, trace_event, ClientRpc, Event, RpcHandle, ServerRpcHandle, ServerState,
};
use super::rpc::RpcParts;
use crate::error::RpcError;
use crate::rpc::{Incoming, ServerSlot};
use crate::trace::{FreeReason, Traced};

impl RpcParts<'_> {
    /// Frees the peer's requests (of key epoch `epoch`, or all) without
    /// a word to it: their session or epoch ends. Those the application
    /// held leave `Load::in_service` (found through the peer's index: no
    /// recount over every RPC).
    pub(crate) fn forget_servers(&mut self, pid: PeerId, epoch: Option<u64>) {
        let Some(slots) = self.peers.at(pid).map(|p| p.rpcs.servers_of(epoch)) else {
            return;
        };
        for slot in slots {
            if let Some((rkey, rpc)) = self.rpcs.servers.remove(slot) {
                if rpc.is_in_service() {
                    self.load.in_service = self.load.in_service.saturating_sub(1);
                }
                if let Some(r) = self.peers.rpcs_mut(pid) {
                    r.remove_server(rkey.epoch, rkey.id, slot);
                }
            }
        }
    }

    /// Fails our calls to the peer (of key epoch `epoch`, or all): their
    /// session or epoch ends.
    pub(crate) fn fail_clients(&mut self, pid: PeerId, epoch: Option<u64>) {
        let Some(gone) = self.peers.at(pid).map(|p| p.rpcs.clients_of(epoch)) else {
            return;
        };
        for h in gone {
            self.fail_client(h, RpcError::SessionClosed);
        }
    }

    /// Ends our call `rpc` with `error`: freed, counted, traced, and the
    /// application told.
    pub(crate) fn fail_client(&mut self, rpc: RpcHandle, error: RpcError) {
        if let Some(c) = self.rpcs.clients.remove(&rpc) {
            let key = c.key();
            self.unindex_client(&c);
            if let Some(s) = self.peers.at_mut(c.peer_id) {
                s.session.stats.rpcs_failed += 1;
            }
            self.recycle_client(c);
            self.counters.stats.rpcs_failed += 1;
            trace_event!(
                self,
                Traced::RpcFailed {
                    rpc,
                    peer: key.peer,
                    epoch: key.epoch,
                    id: key.id,
                    error: error.clone(),
                }
            );
            self.outbox.push_event(Event::Failed { rpc, error });
        }
    }

    /// Takes a client RPC (removed from its table) out of its peer's index.
    pub(crate) fn unindex_client(&mut self, c: &ClientRpc) {
        if let Some(r) = self.peers.rpcs_mut(c.peer_id) {
            r.remove_client(c.epoch, c.id);
        }
    }

    /// Keeps a finished client RPC's buffers for later RPCs.
    pub(crate) fn recycle_client(&mut self, mut rpc: ClientRpc) {
        rpc.request.recycle(&mut self.buffers.pool);
        if let Some(inc) = rpc.response.take() {
            self.recycle_incoming(inc);
        }
    }

    /// Keeps a finished incoming message's buffers and segment list.
    pub(crate) fn recycle_incoming(&mut self, mut inc: Incoming) {
        keep_incoming(
            &mut self.buffers.pool,
            &mut self.buffers.segment_lists,
            &mut inc,
        );
    }

    /// Frees the server RPC `key`, keeping its buffers for later RPCs;
    /// returns whether it existed.
    pub(crate) fn drop_server(&mut self, key: &ServerRpcHandle) -> bool {
        match self.peers.server_slot(key) {
            Some(slot) => self.drop_server_at(slot),
            None => false,
        }
    }

    /// Frees the server RPC in `slot` (see [`RpcParts::drop_server`]).
    /// Its buffers are taken in place (the RPC is not moved out of its
    /// slot: a copy of a few hundred bytes per RPC).
    pub(crate) fn drop_server_at(&mut self, slot: ServerSlot) -> bool {
        let (servers, buffers, spare_segment_lists, in_service) = (
            &mut self.rpcs.servers,
            &mut self.buffers.pool,
            &mut self.buffers.segment_lists,
            &mut self.load.in_service,
        );
        let freed = servers.remove_with(slot, |rpc| match &mut rpc.state {
            ServerState::Receiving(inc) => keep_incoming(buffers, spare_segment_lists, inc),
            ServerState::Responding(out) => out.recycle(buffers),
            ServerState::InService => *in_service = in_service.saturating_sub(1),
        });
        let Some((rkey, ())) = freed else {
            return false;
        };
        if let Some(r) = self.peers.rpcs_mut(rkey.peer) {
            r.remove_server(rkey.epoch, rkey.id, slot);
        }
        true
    }

    /// Traces the end of a server RPC (freed by the caller).
    pub(crate) fn trace_freed(&mut self, key: ServerRpcHandle, reason: FreeReason) {
        trace_event!(
            self,
            Traced::ServerFreed {
                peer: key.peer,
                epoch: key.epoch,
                id: key.id,
                reason,
            }
        );
    }
}
