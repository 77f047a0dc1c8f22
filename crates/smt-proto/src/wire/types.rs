//! Open code-point newtypes: unknown values survive a round trip and print
//! in hex.

use std::fmt;

/// The packet type byte (offset 13, where TCP keeps its flags). Values
/// follow Homa's `homa_wire.h` so captures read the same.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PacketType(pub u8);

impl PacketType {
    /// A piece of a message: plaintext metadata plus ciphertext.
    pub const DATA: Self = Self(0x10);
    /// Receiver to sender: you may send the message up to this offset.
    pub const GRANT: Self = Self(0x11);
    /// Receiver to sender: retransmit this byte range.
    pub const RESEND: Self = Self(0x12);
    /// "I have no state for this RPC."
    pub const RPC_UNKNOWN: Self = Self(0x13);
    /// "Alive but not sending yet" (e.g. the response is being computed).
    pub const BUSY: Self = Self(0x14);
    /// Server to client: confirm you have the response so I can free it.
    pub const NEED_ACK: Self = Self(0x17);
    /// Client to server: these RPCs are finished; free their state.
    pub const ACK: Self = Self(0x18);
    /// "I now send with the next key epoch" (MAC'd with the new keys).
    pub const KEY_UPDATE: Self = Self(0x19);
    /// Server to client: "I refused this request: too many requests wait
    /// for my application (`Config::max_pending_requests`). It was not
    /// executed and never will be under this ID."
    pub const OVERLOADED: Self = Self(0x1a);
    /// Server to client: "your request reached my application, which will
    /// not answer it (it dropped the request, or its response could not
    /// be sent). It may have been executed." Not in Homa, whose client
    /// waits for its timeout instead.
    pub const ABANDONED: Self = Self(0x1b);
    /// Server to client: "you may have this many requests outstanding at
    /// me" (credit-based backpressure, `docs/protocol.md` § 4, CREDIT).
    /// Not in Homa; 0x1c is free in its numbering.
    pub const CREDIT: Self = Self(0x1c);
    /// Pathlet feedback, first in a datagram: empty slots the sender
    /// reserves and devices on the path fill (their pathlet, class, queue
    /// and CE mark), and pathlets the sender asks them to avoid. Written by
    /// the network, so never MAC'd (`docs/protocol.md` § 4, PATH). Not in
    /// Homa; 0x1d is free in its numbering.
    pub const PATH: Self = Self(0x1d);
    /// Receiver to sender: per (pathlet, class), the bytes and CE-marked
    /// bytes it counted since its last echo (MAC'd like every control
    /// packet). Not in Homa; 0x1e is free in its numbering.
    pub const PATH_ECHO: Self = Self(0x1e);
    /// TLS handshake records (carried by the session-establishment layer).
    pub const HANDSHAKE: Self = Self(0x20);

    /// The packet's name, if known.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            Self::DATA => "DATA",
            Self::GRANT => "GRANT",
            Self::RESEND => "RESEND",
            Self::RPC_UNKNOWN => "RPC_UNKNOWN",
            Self::BUSY => "BUSY",
            Self::NEED_ACK => "NEED_ACK",
            Self::ACK => "ACK",
            Self::KEY_UPDATE => "KEY_UPDATE",
            Self::OVERLOADED => "OVERLOADED",
            Self::ABANDONED => "ABANDONED",
            Self::CREDIT => "CREDIT",
            Self::PATH => "PATH",
            Self::PATH_ECHO => "PATH_ECHO",
            Self::HANDSHAKE => "HANDSHAKE",
            _ => return None,
        })
    }

    /// Whether this is a control packet (authenticated by a MAC rather than
    /// by record encryption). HANDSHAKE and PATH count as control
    /// packets but carry no MAC (`first_packet_len` knows which do).
    pub fn is_control(self) -> bool {
        self != Self::DATA
    }
}

impl fmt::Debug for PacketType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "PacketType({:#04x})", self.0),
        }
    }
}

impl fmt::Display for PacketType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Flags of a DATA packet (offset 30).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DataFlags(pub u8);

impl DataFlags {
    /// This packet is a retransmission; its original packet index is in the
    /// resend-index field (offset 18) and the packet-index field is 0, as if
    /// it were the first packet of a new one-packet TSO segment (§4.3).
    pub const RETRANSMIT: Self = Self(0x01);
    /// Every flag this implementation understands.
    pub const KNOWN: Self = Self(0x01);

    /// Whether every flag in `other` is set.
    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl fmt::Debug for DataFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DataFlags({:#04x})", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_types_print_in_hex() {
        assert_eq!(format!("{:?}", PacketType(0x7f)), "PacketType(0x7f)");
        assert_eq!(format!("{}", PacketType::GRANT), "GRANT");
    }
}

/// The HANDSHAKE packet's kind byte: which protocol establishes the
/// session (`docs/handshake.md`). Open: an unknown kind parses, prints in
/// hex, and is refused by the acceptor, not by the parser.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct HandshakeKind(pub u8);

impl HandshakeKind {
    /// TLS 1.3 (records, as a TLS-over-TCP peer would send them).
    pub const TLS13: Self = Self(0);
    /// The 0-RTT SMT-ticket exchange.
    pub const SMT_TICKET: Self = Self(1);
    /// The PSK nonce exchange (session keys from a pre-shared master and
    /// both sides' fresh nonces).
    pub const PSK_NONCE: Self = Self(2);

    /// The protocol's name, if known.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            Self::TLS13 => "TLS13",
            Self::SMT_TICKET => "SMT_TICKET",
            Self::PSK_NONCE => "PSK_NONCE",
            _ => return None,
        })
    }
}

impl fmt::Debug for HandshakeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "HandshakeKind({:#04x})", self.0),
        }
    }
}

impl fmt::Display for HandshakeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
