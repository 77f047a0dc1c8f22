//! What software posts to a transmit queue, and what leaves the NIC.
//!
//! The descriptors follow the shape of an autonomous-offload NIC's send
//! queue (NVIDIA's kTLS offload paper; Linux mlx5's WQEs): context set-up and tear-down, a
//! resync (mlx5's static/progress parameters plus the DUMP of the record's
//! start), and TSO segments tagged with the context that encrypts them.

use std::fmt;

use crate::crypto_info::CryptoInfo;

/// Largest segment payload the engine accepts: one TSO super-packet.
pub const MAX_SEGMENT_PAYLOAD: usize = 65536;

/// A flow context's slot in the NIC's context table.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContextId(pub u32);

impl fmt::Debug for ContextId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContextId({:#x})", self.0)
    }
}

/// A transmit queue (an mlx5 send queue, SQ), numbered from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueId(pub u16);

impl QueueId {
    /// The queue's position in the engine's queue list.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// One entry of a transmit queue.
#[derive(Debug)]
#[non_exhaustive]
pub enum TxDescriptor {
    /// Installs key material in slot `ctx`, ready to encrypt the record
    /// with sequence number `info.rec_seq()` from its first byte.
    CreateContext {
        /// The slot.
        ctx: ContextId,
        /// Key, IV and starting sequence number.
        info: Box<CryptoInfo>,
    },
    /// Frees slot `ctx`.
    DestroyContext {
        /// The slot.
        ctx: ContextId,
    },
    /// Moves a context to another place in the record stream.
    Resync(Resync),
    /// A TSO segment whose payload the context encrypts.
    Segment(Segment),
}

/// "The next segment on this context starts `offset` bytes into the record
/// with sequence number `record_seq`."
///
/// For `offset > 0` the NIC cannot produce the tag without the record's
/// earlier bytes (its header, and the ciphertext GHASH has to cover), so
/// software replays them: `record_prefix` is the record as posted (header
/// and plaintext) from its first byte up to `offset`. This is what mlx5's
/// DUMP WQEs carry, and why NVIDIA's kTLS offload paper says software must keep a record until
/// its last byte is acknowledged. A resync without that prefix leaves the
/// context unsynchronised and the following segment is dropped
/// (`tx_tls_drop_no_sync_data`).
#[derive(Debug)]
pub struct Resync {
    /// The context to move.
    pub ctx: ContextId,
    /// Sequence number of the record the next byte belongs to.
    pub record_seq: u64,
    /// Bytes of that record (from its header's first byte) before the next
    /// byte.
    pub offset: usize,
    /// The record's first `offset` bytes, or nothing when software no
    /// longer holds them.
    pub record_prefix: Vec<u8>,
}

/// A TSO segment: a transport header the NIC copies onto every packet and
/// a payload of TLS records, cut into packets of `mss` bytes.
#[derive(Debug)]
pub struct Segment {
    /// The context that encrypts the payload.
    pub ctx: ContextId,
    /// Transport header, replicated into every packet, never encrypted.
    pub header: Vec<u8>,
    /// TLS record bytes as software built them: headers, plaintext, and
    /// placeholder tags the NIC overwrites. At most
    /// [`MAX_SEGMENT_PAYLOAD`] bytes.
    pub payload: Vec<u8>,
    /// Payload bytes per packet.
    pub mss: u16,
}

/// A segment as it leaves the NIC, payload encrypted.
#[derive(Debug)]
pub struct WireSegment {
    /// The queue it was read from.
    pub queue: QueueId,
    /// The context that encrypted it.
    pub ctx: ContextId,
    /// The transport header, unchanged.
    pub header: Vec<u8>,
    /// The encrypted payload.
    pub payload: Vec<u8>,
    /// Payload bytes per packet.
    pub mss: u16,
}

impl WireSegment {
    /// The packets TSO cuts the segment into: (header, payload slice).
    pub fn packets(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.payload
            .chunks(usize::from(self.mss).max(1))
            .map(|chunk| (self.header.as_slice(), chunk))
    }

    /// How many packets [`WireSegment::packets`] yields.
    pub fn packet_count(&self) -> u64 {
        packet_count(self.payload.len(), self.mss)
    }
}

/// Packets of at most `mss` bytes that `len` payload bytes make.
pub(crate) fn packet_count(len: usize, mss: u16) -> u64 {
    len.div_ceil(usize::from(mss).max(1)) as u64
}
