//! Names of RPCs and messages: the handles the application holds and the
//! key the scheduler ranks messages by.

use std::net::SocketAddr;

/// The client's handle on an RPC it started. Stable across restarts (which
/// change the wire message ID).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RpcHandle(pub u64);

/// Names an RPC on the wire: peer, key epoch and message ID (IDs restart
/// with every epoch). The server's handle on a request it received; pass
/// it back to [`Endpoint::send_response`](crate::Endpoint::send_response).
///
/// Ordered by ID, then epoch, then peer: the RPC tables are searched by
/// this key several times per packet, and IDs almost always differ, so a
/// comparison is one integer compare (the peer's `SocketAddr` compare, which
/// the derived order would do first, was a tenth of the CPU time at 64 B).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ServerRpcHandle {
    /// Who sent the request.
    pub peer: SocketAddr,
    /// The key epoch the RPC belongs to.
    pub epoch: u64,
    /// The RPC's message ID.
    pub id: u64,
}

impl ServerRpcHandle {
    #[inline]
    pub(crate) fn new(peer: SocketAddr, epoch: u64, id: u64) -> Self {
        Self { peer, epoch, id }
    }
}

impl Ord for ServerRpcHandle {
    #[inline]
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.id
            .cmp(&other.id)
            .then(self.epoch.cmp(&other.epoch))
            .then_with(|| self.peer.cmp(&other.peer))
    }
}

impl PartialOrd for ServerRpcHandle {
    #[inline]
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A server RPC's slot in the endpoint's table: index and generation, so a
/// slot kept after its RPC was freed never finds the RPC that reused it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ServerSlot {
    pub index: u32,
    pub generation: u32,
}

/// A server RPC in flight: its wire key (what the scheduler ranks ties
/// by, as before slots existed) and its slot (what finds it: an index,
/// not a hash of the peer's address).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ServerMsg {
    pub rpc: ServerRpcHandle,
    pub slot: ServerSlot,
}

/// Identifies a message in flight on either side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum MsgKey {
    Client(RpcHandle),
    Server(ServerMsg),
}
