//! What the core tells a driver whose NIC protects records (TLS offload,
//! the SMT paper §4.3-4.4.2, NVIDIA's kTLS offload paper; `docs/offload.md`), and what it takes
//! back. The core stays a state machine: it never sees the NIC, only these
//! values, and the wire is the same either way.
//!
//! **Transmit** (`Config::tx_offload`): records leave with plaintext bodies
//! and empty tags, each DATA packet alone in its datagram; after each
//! [`crate::Endpoint::poll_transmit`] that wrote one,
//! [`crate::Endpoint::take_tx_records`] gives its [`TxRecords`]: the flow
//! (peer, key epoch), where its record bytes are and the record
//! [`RecordPos`] they start and end at. From those the driver writes the
//! NIC's descriptors: a context per (queue, peer, epoch), a resync
//! whenever a packet does not continue where its context stands (a new
//! message always; a retransmission, or a message resumed after another,
//! mid-record with the record's start from
//! [`crate::Endpoint::tx_record_prefix`]), the segment.
//!
//! **Receive**: the driver runs each DATA packet through the NIC's receive
//! context for its (peer, key phase), keyed with
//! [`crate::Endpoint::rx_cipher`], and hands the datagrams over with one
//! [`RxMark`] per packet ([`crate::Endpoint::handle_batch_marked`]). A
//! record whose packets all came decrypted is taken as the NIC
//! authenticated it; one that came partly decrypted is turned back into
//! ciphertext where it was decrypted and opened in software; the rest is
//! opened as always. The NIC's resync requests are answered with
//! [`crate::Endpoint::rx_record_seq`].

use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;

use crate::crypto::PacketCipher;

/// A place in a key's record stream: `offset` bytes (from the header's
/// first byte) into the record with sequence number `seq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecordPos {
    /// The record's sequence number (message ID and record index).
    pub seq: u64,
    /// Bytes from the record header's first byte.
    pub offset: u32,
}

/// The records of one DATA packet that [`crate::Endpoint::poll_transmit`]
/// wrote with plaintext bodies and empty tags (transmit offload).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxRecords {
    /// Where the datagram goes.
    pub peer: SocketAddr,
    /// The key epoch whose transmit key seals the records
    /// ([`crate::Endpoint::tx_cipher`]).
    pub epoch: u64,
    /// The message (RPC) ID.
    pub id: u64,
    /// The record bytes in the datagram (everything after the DATA
    /// header).
    pub payload: Range<usize>,
    /// Where the first payload byte lies in the record stream.
    pub start: RecordPos,
    /// Where the byte after the last one lies: the next record's first
    /// byte when the packet ends a record.
    pub end: RecordPos,
    /// The payload's offset in the message's wire bytes.
    pub wire_offset: u64,
    /// A retransmission.
    pub retransmit: bool,
}

/// How the NIC left one packet of a received datagram: decrypted under
/// the receive key [`crate::Endpoint::rx_cipher`] named (its [`KeyId`]),
/// with every tag ending in it verified, or untouched (the default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxMark(pub Option<KeyId>);

/// Which receive key a NIC decrypted with: the identity of the cipher
/// [`crate::Endpoint::rx_cipher`] returned (equal only for the same key
/// object; the driver keeps the `Arc` while it uses the key, so no other
/// key can take its identity meanwhile). The core trusts a mark only for
/// the key the packet's RPC belongs to, so a packet decrypted under an
/// epoch or session the core has since left is opened in software.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyId(usize);

impl KeyId {
    /// The identity of `cipher`.
    pub fn of(cipher: &Arc<dyn PacketCipher>) -> Self {
        Self(Arc::as_ptr(cipher).cast::<()>() as usize)
    }
}

/// The answer to a NIC's resync request for the record starting at a
/// message's wire offset ([`crate::Endpoint::rx_record_seq`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordSeq {
    /// A record starts there, with this sequence number.
    Known(u64),
    /// Not known yet: the core has not opened the records up to there.
    NotYet,
    /// It never will be: the message is gone or was opened past it, or
    /// no record starts there.
    Never,
}
