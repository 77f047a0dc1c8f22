//! The endpoint's side of TLS offload (`crate::offload`): what a driver
//! whose NIC seals or opens records asks the core. Bounded work each: a
//! lookup of a peer or an RPC. The public calls are thin methods of
//! `Endpoint` (in `mod.rs`, with receive offload's batch call) over
//! [`View`], the read-only view of the peers and RPCs they need.

use std::net::SocketAddr;
use std::sync::Arc;

use super::peers::Peers;
use super::table::{RpcKey, RpcTables};
use super::{ServerRpcHandle, ServerState};
use crate::crypto::{NullCipher, PacketCipher};
use crate::offload::{RecordSeq, TxRecords};
use crate::record::SeqLayout;
use crate::rpc::{Incoming, Outgoing};

/// What TLS offload keeps between calls.
pub(crate) struct Nic {
    /// Transmit offload: the records of the DATA packet the last
    /// `poll_transmit` wrote, until the driver takes them.
    pub tx_records: Option<TxRecords>,
    /// Receive offload: how the NIC left the packet being handled
    /// (`handle_batch_marked`); `None` otherwise.
    pub rx_mark: Option<crate::offload::KeyId>,
    /// What "seals" records under transmit offload: the null cipher,
    /// which frames them with plaintext bodies and empty tags (one shared
    /// instance, not one per message).
    pub framing: Arc<dyn PacketCipher>,
}

impl Default for Nic {
    fn default() -> Self {
        Self {
            tx_records: None,
            rx_mark: None,
            framing: Arc::new(NullCipher),
        }
    }
}

/// What offload's questions read: the peers and their RPCs.
#[derive(Clone, Copy)]
pub(crate) struct View<'a> {
    pub peers: &'a Peers,
    pub rpcs: &'a RpcTables,
}

impl<'a> View<'a> {
    /// See `Endpoint::tx_record_prefix`.
    pub(super) fn tx_record_prefix(self, tx: &TxRecords) -> Option<&'a [u8]> {
        let key = ServerRpcHandle {
            peer: tx.peer,
            epoch: tx.epoch,
            id: tx.id,
        };
        self.outgoing(key)?.record_prefix(tx.wire_offset)
    }

    /// See `Endpoint::tx_cipher`.
    pub(super) fn tx_cipher(
        self,
        peer: SocketAddr,
        epoch: u64,
    ) -> Option<&'a Arc<dyn PacketCipher>> {
        Some(&self.peers.get(&peer)?.session.epoch(epoch)?.tx)
    }

    /// See `Endpoint::rx_cipher`.
    pub(super) fn rx_cipher(
        self,
        peer: SocketAddr,
        phase: bool,
    ) -> Option<(u64, &'a Arc<dyn PacketCipher>)> {
        let epoch = self.peers.get(&peer)?.session.epoch_by_phase(phase)?;
        Some((epoch.number, &epoch.rx))
    }

    /// See `Endpoint::rx_record_seq`.
    pub(super) fn rx_record_seq(
        self,
        layout: SeqLayout,
        key: ServerRpcHandle,
        wire_offset: u64,
    ) -> RecordSeq {
        if wire_offset == 0 {
            return layout
                .seq(key.id, 0)
                .map_or(RecordSeq::Never, RecordSeq::Known);
        }
        match self
            .incoming(key)
            .map(|inc| inc.record_index_at(wire_offset))
        {
            Some(Ok(index)) => layout
                .seq(key.id, index)
                .map_or(RecordSeq::Never, RecordSeq::Known),
            Some(Err(true)) => RecordSeq::NotYet,
            _ => RecordSeq::Never,
        }
    }

    /// The internal key of the wire key `key` (one address hash).
    fn rpc_key(self, key: ServerRpcHandle) -> Option<RpcKey> {
        Some(RpcKey {
            peer: self.peers.id(&key.peer)?,
            epoch: key.epoch,
            id: key.id,
        })
    }

    /// The message being received under wire key `key`.
    fn incoming(self, key: ServerRpcHandle) -> Option<&'a Incoming> {
        let local = self.peers.get(&key.peer)?.session.is_local_id(key.id);
        let rkey = self.rpc_key(key)?;
        match local {
            true => self
                .rpcs
                .clients
                .get(&self.peers.client(&rkey)?)?
                .response
                .as_ref(),
            false => match &self.rpcs.servers.get(self.peers.server(&rkey)?)?.state {
                ServerState::Receiving(inc) => Some(inc),
                _ => None,
            },
        }
    }

    /// The message being sent under wire key `key`.
    fn outgoing(self, key: ServerRpcHandle) -> Option<&'a Outgoing> {
        let local = self.peers.get(&key.peer)?.session.is_local_id(key.id);
        let rkey = self.rpc_key(key)?;
        match local {
            true => Some(&self.rpcs.clients.get(&self.peers.client(&rkey)?)?.request),
            false => match &self.rpcs.servers.get(self.peers.server(&rkey)?)?.state {
                ServerState::Responding(out) => Some(out),
                _ => None,
            },
        }
    }
}
