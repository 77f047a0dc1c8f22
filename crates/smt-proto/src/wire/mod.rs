//! SMT packets on the wire.
//!
//! Every packet starts with a 28-byte *common header* laid out like a TCP
//! header followed by 8 bytes of what would be TCP options (the SMT paper §2.2,
//! §4.3, Fig. 3). The positions are load-bearing: a NIC doing TCP
//! segmentation offload copies the first `doff * 4` bytes onto every packet
//! it cuts from a segment, so everything that must be identical across the
//! packets of a segment (ports, segment offset, message length, message ID)
//! sits there. `docs/protocol.md` is the byte-by-byte specification; this
//! module is its executable form.
//!
//! Each header has two levels (smoltcp's habit): a checked zero-copy view
//! ([`Packet`]) whose accessors cannot panic once [`Packet::new_checked`]
//! succeeded, and a parsed representation ([`Repr`]) with `parse`,
//! `buffer_len` and `emit`.

mod coalesce;
mod packet;
mod pathlet;
mod repr;
mod types;

pub use coalesce::{first_packet_len, Packets, Split, MIN_PACKET_LEN};
pub use packet::Packet;
pub use pathlet::{
    path_excludes, write_path_slot, Bounded, EchoEntry, PathEchoRepr, PathRepr, PathSlot,
    PathletClass, SlotWrite, ECHO_OVERFLOW, MAX_ECHO_ENTRIES, MAX_PATH_EXCLUDES, MAX_PATH_SLOTS,
    PATH_ECHO_ENTRY_LEN, PATH_ECHO_HEADER_LEN, PATH_EXCLUDE_LEN, PATH_HEADER_LEN, PATH_OVERFLOW,
    PATH_SLOT_LEN, SLOT_CE,
};
pub use repr::{AckIds, Body, DataHeader, Repr, ACK_MAX_IDS, HANDSHAKE_RETRY, HANDSHAKE_TOKEN};
pub use types::{DataFlags, HandshakeKind, PacketType};

/// Length of the common header (TCP header + 8-byte message ID).
pub const COMMON_HEADER_LEN: usize = 28;
/// Length of a DATA packet's headers (common + DATA extension).
pub const DATA_HEADER_LEN: usize = 44;
/// Largest header length the 4-bit data-offset field can express.
pub const MAX_HEADER_LEN: usize = 60;

/// Why a datagram could not be parsed. Always the peer's (or an attacker's)
/// fault; the endpoint drops and counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireError {
    /// Shorter than the header it claims to carry.
    Truncated,
    /// The data-offset field is smaller than the common header, or does not
    /// match what the packet type requires.
    BadHeaderLength,
    /// A packet type this implementation does not know.
    UnknownType(PacketType),
    /// A field holds a value the protocol forbids (reserved bits set,
    /// offsets outside the message, too many ACK entries...).
    BadField(&'static str),
    /// A known type that [`Repr`] does not describe: PATH and PATH_ECHO
    /// are parsed by [`PathRepr`] and [`PathEchoRepr`].
    OwnRepr(PacketType),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Truncated => f.write_str("packet truncated"),
            Self::BadHeaderLength => f.write_str("bad header length"),
            Self::UnknownType(t) => write!(f, "unknown packet type {t}"),
            Self::BadField(name) => write!(f, "invalid field: {name}"),
            Self::OwnRepr(t) => write!(f, "{t} is parsed by its own representation"),
        }
    }
}

impl std::error::Error for WireError {}
