//! The endpoint's side of TLS offload (`crate::offload`): what a driver
//! whose NIC seals or opens records asks the core. Bounded work each: a
//! lookup of a peer or an RPC.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use super::{Endpoint, ServerRpcHandle, ServerState};
use crate::crypto::{NullCipher, PacketCipher};
use crate::offload::{RecordSeq, RxMark, TxRecords};
use crate::rpc::Outgoing;

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

impl Endpoint {
    /// The records of the DATA packet the last
    /// [`Endpoint::poll_transmit`] wrote, under `Config::tx_offload`
    /// (plaintext bodies, empty tags: the NIC must seal them before they
    /// leave); `None` if that datagram held no DATA packet. Taken: a
    /// second call returns `None`.
    pub fn take_tx_records(&mut self) -> Option<TxRecords> {
        self.nic.tx_records.take()
    }

    /// The first bytes of the record in which `tx`'s payload starts, up to
    /// the payload (as posted: header and plaintext), which a NIC replays
    /// to resync a context to the middle of that record. Empty when the
    /// payload starts a record; `None` if the message is no longer held.
    /// Valid until the next call that changes the endpoint.
    pub fn tx_record_prefix(&self, tx: &TxRecords) -> Option<&[u8]> {
        let key = ServerRpcHandle {
            peer: tx.peer,
            epoch: tx.epoch,
            id: tx.id,
        };
        self.outgoing(key)?.record_prefix(tx.wire_offset)
    }

    /// The transmit key of `peer`'s key epoch `epoch`: what a NIC seals
    /// that epoch's records with ([`PacketCipher::offload_key`]).
    pub fn tx_cipher(&self, peer: SocketAddr, epoch: u64) -> Option<&Arc<dyn PacketCipher>> {
        Some(&self.peers.get(&peer)?.session.epoch(epoch)?.tx)
    }

    /// The receive key a packet from `peer` with key phase `phase` is
    /// opened with now, and its key epoch: what the NIC's receive context
    /// for them must hold. Marks ([`Endpoint::handle_batch_marked`]) name
    /// it by [`crate::offload::KeyId::of`].
    pub fn rx_cipher(
        &self,
        peer: SocketAddr,
        phase: bool,
    ) -> Option<(u64, &Arc<dyn PacketCipher>)> {
        let epoch = self.peers.get(&peer)?.session.epoch_by_phase(phase)?;
        Some((epoch.number, &epoch.rx))
    }

    /// [`Endpoint::handle_batch`] for datagrams a NIC has been through:
    /// each comes with one [`RxMark`] per packet, in order (missing marks
    /// count as untouched). A packet marked with the key its RPC belongs
    /// to holds plaintext the NIC authenticated; any other mark is
    /// ignored, and the packet opened in software.
    pub fn handle_batch_marked<'a, I>(&mut self, now: Instant, batch: I)
    where
        I: Iterator<Item = (SocketAddr, &'a [u8], &'a [RxMark])> + Clone,
    {
        self.handle_batch_with(now, batch, Self::handle_marked_datagram);
    }

    /// One datagram with its marks: each packet's mark is in force while
    /// the packet is handled.
    fn handle_marked_datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
        marks: &[RxMark],
    ) {
        let mut marks = marks.iter();
        self.handle_datagram_each(now, from, datagram, |ep| {
            ep.nic.rx_mark = marks.next().and_then(|m| m.0);
        });
        self.nic.rx_mark = None;
    }

    /// The sequence number of the record that starts `wire_offset` bytes
    /// into message `id` of `peer`'s key epoch `epoch`, for a NIC's resync
    /// request: a message's first record is always known; another one once
    /// the records before it have been opened (the NIC has followed the
    /// framing meanwhile and counts on from there). Walking the segments
    /// held finds most; an offset behind a missing record header is
    /// `NotYet` until that packet comes, and `Never` if the core then
    /// opens past it in one go.
    pub fn rx_record_seq(
        &self,
        peer: SocketAddr,
        epoch: u64,
        id: u64,
        wire_offset: u64,
    ) -> RecordSeq {
        let layout = self.config.seq_layout;
        if wire_offset == 0 {
            return layout.seq(id, 0).map_or(RecordSeq::Never, RecordSeq::Known);
        }
        let Some(local) = self.peers.get(&peer).map(|p| p.session.is_local_id(id)) else {
            return RecordSeq::Never;
        };
        let key = ServerRpcHandle { peer, epoch, id };
        let incoming = match local {
            true => self
                .rpc_key(&key)
                .and_then(|k| self.peers.client(&k))
                .and_then(|h| self.rpcs.clients.get(&h))
                .and_then(|c| c.response.as_ref()),
            false => match self
                .server_slot(&key)
                .and_then(|s| self.rpcs.servers.get(s))
                .map(|s| &s.state)
            {
                Some(ServerState::Receiving(inc)) => Some(inc),
                _ => None,
            },
        };
        match incoming.map(|inc| inc.record_index_at(wire_offset)) {
            Some(Ok(index)) => layout
                .seq(id, index)
                .map_or(RecordSeq::Never, RecordSeq::Known),
            Some(Err(true)) => RecordSeq::NotYet,
            _ => RecordSeq::Never,
        }
    }

    /// The message being sent under wire key `key`.
    fn outgoing(&self, key: ServerRpcHandle) -> Option<&Outgoing> {
        let session = &self.peers.get(&key.peer)?.session;
        match session.is_local_id(key.id) {
            true => Some(
                &self
                    .rpcs
                    .clients
                    .get(&self.peers.client(&self.rpc_key(&key)?)?)?
                    .request,
            ),
            false => match &self.rpcs.servers.get(self.server_slot(&key)?)?.state {
                ServerState::Responding(out) => Some(out),
                _ => None,
            },
        }
    }
}
