//! The state of one handshake in progress: the two byte streams (ours
//! sent and acknowledged, the peer's reassembled in order), the keys a
//! responder holds until the peer proves its address, datagrams that came
//! early, and the HANDSHAKE packet that carries a chunk of the stream.
//! What the endpoint does with it is `handshake.rs`.

use super::reorder::Reassembly;
use crate::crypto::TAG_LEN;
use crate::error::DropReason;
use crate::handshake::{AddressProof, Handshake};
use crate::wire::{Body, HandshakeKind, Packet, Repr, COMMON_HEADER_LEN, HANDSHAKE_TOKEN};
use crate::SessionKeys;

/// HANDSHAKE header length (common header + offset, ack, len, kind).
pub(super) const HEADER_LEN: usize = COMMON_HEADER_LEN + 12;
/// Bytes of a stream's opening remembered to recognise a new handshake.
const OPENING: usize = 64;
/// Datagrams buffered per peer while its keys are not installed yet (or
/// while new keys wait for the peer to prove its address).
pub(super) const MAX_EARLY: usize = 64;
/// ... and their bytes: datagrams may be up to 64 KiB, so the count alone
/// would let each handshake hold 4 MiB.
pub(super) const MAX_EARLY_BYTES: usize = 128 * 1024;

/// Whether one more datagram of `len` bytes fits a buffer of early ones.
pub(super) fn early_fits(buffered: &[Vec<u8>], len: usize) -> bool {
    buffered.len() < MAX_EARLY
        && buffered.iter().map(Vec::len).sum::<usize>() + len <= MAX_EARLY_BYTES
}

/// A responder's keys for a peer that already has a session, held aside
/// until the peer proves its address ([`AddressProof`]): a spoofed first
/// flight must not replace the session of the address it claims.
pub(super) struct Held {
    pub(super) keys: SessionKeys,
    pub(super) next: Option<SessionKeys>,
    pub(super) proof: AddressProof,
    /// The peer's datagrams that the established session refused, kept to
    /// be processed under the new keys once they are proven.
    pub(super) stash: Vec<Vec<u8>>,
}

/// One handshake in progress (or just finished, answering late copies).
pub(crate) struct HandshakeConn {
    pub(super) hs: Box<dyn Handshake>,
    pub(super) kind: HandshakeKind,
    /// Everything this side has written, for retransmission.
    pub(super) sent: Vec<u8>,
    /// The peer has received `sent[..acked]`.
    pub(super) acked: u32,
    /// The peer's stream: what the handshake has read of it, and the
    /// bytes waiting for earlier ones (at most one window's worth).
    pub(super) stream: Reassembly,
    pub(super) owe_ack: bool,
    pub(super) silent_ticks: u32,
    pub(super) keys_installed: bool,
    pub(super) early: Vec<Vec<u8>>,
    /// This side started the handshake.
    pub(super) initiator: bool,
    /// Datagram bytes received from, and handshake bytes sent to, the peer:
    /// until a responder has keys it sends at most `AMPLIFICATION` times
    /// what it received, so a spoofed source cannot use it as an amplifier.
    pub(super) received_bytes: usize,
    pub(super) sent_bytes: usize,
    /// The first bytes the peer's stream opened with: a packet at offset 0
    /// with other bytes is a new handshake (the peer restarted), not a copy.
    pub(super) opening: Vec<u8>,
    pub(super) held: Option<Held>,
    /// Initiator: the token of the responder's RETRY, sent in front of the
    /// stream's first bytes from then on.
    pub(super) retry_token: Option<Vec<u8>>,
    /// Responder: the opening carried a valid retry token, so the peer
    /// owns its address (no amplification limit, no held keys needed).
    pub(super) address_validated: bool,
    /// The endpoint's tick count when it started (for
    /// `Config::handshake_deadline_ticks` and for choosing whom to
    /// displace from a full table).
    pub(super) started: u64,
}

impl HandshakeConn {
    /// Whether the peer's packets go first in a receive batch on the
    /// handshake's word: its address is vouched for (we opened the
    /// handshake: we chose to talk to that address; or its opening carried
    /// a valid retry token) and, for a responder, it has no keys yet (once
    /// it has, the session says whether the peer used them,
    /// `Peer::proven`).
    pub(crate) fn vouches_for_its_packets(&self) -> bool {
        self.initiator || (self.address_validated && !self.keys_installed)
    }
}

impl std::fmt::Debug for HandshakeConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandshakeConn")
            .field("kind", &self.kind)
            .field("sent", &self.sent.len())
            .field("acked", &self.acked)
            .field("received", &self.stream.received())
            .field("keys_installed", &self.keys_installed)
            .finish_non_exhaustive()
    }
}

impl HandshakeConn {
    pub(super) fn new(hs: Box<dyn Handshake>, kind: HandshakeKind, started: u64) -> Self {
        Self {
            started,
            hs,
            kind,
            sent: Vec::new(),
            acked: 0,
            stream: Reassembly::default(),
            owe_ack: false,
            silent_ticks: 0,
            keys_installed: false,
            early: Vec::new(),
            initiator: false,
            received_bytes: 0,
            sent_bytes: 0,
            opening: Vec::new(),
            held: None,
            retry_token: None,
            address_validated: false,
        }
    }

    pub(super) fn unacked(&self) -> bool {
        (self.acked as usize) < self.sent.len()
    }

    /// Stores a chunk of the peer's stream; returns the newly contiguous
    /// bytes to feed to the handshake.
    pub(super) fn take_in_order(
        &mut self,
        offset: u32,
        data: &[u8],
    ) -> Result<Vec<u8>, DropReason> {
        if data.is_empty() {
            return Ok(Vec::new()); // a bare ACK: nothing to acknowledge
        }
        self.owe_ack = true;
        if offset == 0 && self.opening.is_empty() {
            self.opening = data[..data.len().min(OPENING)].to_vec();
        }
        self.stream.take(offset, data)
    }
}

impl Held {
    /// Whether `datagram` is a control packet authenticated under the keys
    /// that prove the peer's address (their epoch's key phase, their MAC).
    pub(super) fn is_proven_by(&self, datagram: &[u8]) -> bool {
        let (keys, phase) = match self.proof {
            AddressProof::FirstKeys => (Some(&self.keys), false),
            AddressProof::NextKeys => (self.next.as_ref(), true),
            _ => (None, false),
        };
        let Some(keys) = keys else {
            return false;
        };
        let Ok(packet) = Packet::new_checked(datagram) else {
            return false;
        };
        if !packet.packet_type().is_control() || packet.key_phase() != phase {
            return false;
        }
        let Some(split) = datagram.len().checked_sub(TAG_LEN) else {
            return false;
        };
        let (body, tag) = datagram.split_at(split);
        let Ok(tag) = <&[u8; TAG_LEN]>::try_from(tag) else {
            return false;
        };
        keys.rx.verify_control_tag(body, tag).is_ok()
    }
}

/// Writes a HANDSHAKE packet carrying `chunk` (stream offset `offset`) of
/// `conn`'s stream, with its current ACK, into the front of `buf`, the
/// retry token in front of the stream's first bytes if there is one;
/// returns its length.
pub(super) fn emit_handshake(
    buf: &mut [u8],
    ports: (u16, u16),
    conn: &HandshakeConn,
    offset: u32,
    chunk: &[u8],
) -> usize {
    let token = conn
        .retry_token
        .as_deref()
        .filter(|_| offset == 0 && !chunk.is_empty());
    let prefix = token.map_or(0, |t| 1 + t.len());
    let body = Body::Handshake {
        offset,
        ack: conn.stream.received(),
        len: (prefix + chunk.len()) as u16,
        kind: conn.kind,
        flags: if token.is_some() { HANDSHAKE_TOKEN } else { 0 },
    };
    let repr = Repr {
        src_port: ports.0,
        dst_port: ports.1,
        key_phase: false,
        id: 0,
        body,
    };
    repr.emit(&mut Packet::new_unchecked(&mut buf[..HEADER_LEN]));
    let mut at = HEADER_LEN;
    if let Some(t) = token {
        buf[at] = t.len() as u8;
        buf[at + 1..at + prefix].copy_from_slice(t);
        at += prefix;
    }
    buf[at..at + chunk.len()].copy_from_slice(chunk);
    at + chunk.len()
}

/// Datagram bytes that carry `len` handshake bytes in `chunk`-byte
/// packets (a bare ACK when `len` is 0).
pub(super) fn wire_bytes(len: usize, chunk: usize) -> usize {
    len + HEADER_LEN * len.div_ceil(chunk).max(1)
}

#[cfg(test)]
mod tests {
    use super::{early_fits, MAX_EARLY, MAX_EARLY_BYTES};

    #[test]
    fn early_datagrams_are_bounded_by_count_and_bytes() {
        let mut held: Vec<Vec<u8>> = Vec::new();
        while early_fits(&held, 60_000) {
            held.push(vec![0; 60_000]);
        }
        assert_eq!(
            held.len(),
            2,
            "two 60 kB datagrams fit in 128 KiB, a third does not"
        );
        let total: usize = held.iter().map(Vec::len).sum();
        assert!(total <= MAX_EARLY_BYTES);
        let mut small: Vec<Vec<u8>> = Vec::new();
        while early_fits(&small, 100) {
            small.push(vec![0; 100]);
        }
        assert_eq!(small.len(), MAX_EARLY);
    }
}
