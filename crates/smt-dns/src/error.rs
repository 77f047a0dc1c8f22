//! Errors, sorted by who is at fault: the record's publisher ([`DnsError::Malformed`]), the
//! DNS service or network ([`DnsError::NotFound`], [`DnsError::Timeout`],
//! [`DnsError::Resolve`], [`DnsError::Io`], [`DnsError::ServerStopped`]) or the local caller
//! ([`DnsError::InvalidHost`], [`DnsError::OutOfZone`], [`DnsError::TicketTooLarge`]).

use std::{fmt, io};

/// Why publishing or looking up an SMT ticket failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum DnsError {
    /// The name does not exist (NXDOMAIN) or holds no TXT record.
    NotFound {
        /// The queried name, e.g. `_smt-ticket.server.example.`.
        name: String,
    },
    /// The resolver got no answer within the lookup timeout.
    Timeout,
    /// A TXT record was found but is not a valid SMT ticket record.
    Malformed(MalformedRecord),
    /// The DNS server answered with an error (SERVFAIL, REFUSED, ...) or the exchange failed
    /// in a way that is neither a timeout nor a socket error.
    Resolve(String),
    /// A socket or runtime operation failed.
    Io(io::Error),
    /// The embedded server's thread is gone, so it can no longer publish.
    ServerStopped,
    /// The caller passed something that is not a valid DNS host name.
    InvalidHost {
        /// The host as given.
        host: String,
        /// Why it was refused.
        reason: String,
    },
    /// The caller tried to publish a ticket for a host outside the server's zone.
    OutOfZone {
        /// The ticket's full record name.
        name: String,
        /// The zone the server is authoritative for.
        zone: String,
    },
    /// The caller tried to publish a ticket larger than clients accept.
    TicketTooLarge {
        /// The ticket's length in bytes.
        len: usize,
        /// [`MAX_TICKET_LEN`](crate::MAX_TICKET_LEN).
        max: usize,
    },
}

impl fmt::Display for DnsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotFound { name } => write!(f, "no SMT ticket published at {name}"),
            Self::Timeout => f.write_str("DNS lookup timed out"),
            Self::Malformed(why) => write!(f, "malformed SMT ticket record: {why}"),
            Self::Resolve(why) => write!(f, "DNS lookup failed: {why}"),
            Self::Io(e) => write!(f, "DNS I/O error: {e}"),
            Self::ServerStopped => f.write_str("the ticket DNS server has stopped"),
            Self::InvalidHost { host, reason } => {
                write!(f, "invalid host name {host:?}: {reason}")
            }
            Self::OutOfZone { name, zone } => {
                write!(
                    f,
                    "{name} is outside the server's zone {zone}; publish hosts under {zone}"
                )
            }
            Self::TicketTooLarge { len, max } => {
                write!(
                    f,
                    "ticket of {len} bytes exceeds the {max}-byte limit for DNS publication"
                )
            }
        }
    }
}

impl std::error::Error for DnsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io(e) => Some(e),
            Self::Malformed(why) => Some(why),
            _ => None,
        }
    }
}

impl From<io::Error> for DnsError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

impl From<MalformedRecord> for DnsError {
    fn from(why: MalformedRecord) -> Self {
        Self::Malformed(why)
    }
}

/// What is wrong with a TXT record that claims (or fails) to hold an SMT ticket.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MalformedRecord {
    /// The record has no character-strings at all.
    Empty,
    /// The text does not start with a `v=smt<N>;` version tag.
    MissingVersion,
    /// The version tag names a format this crate does not know.
    UnsupportedVersion(String),
    /// The record text is longer than any ticket within the size cap could produce (checked
    /// before decoding).
    TextTooLong {
        /// Length of the record text in bytes (all strings concatenated).
        len: usize,
        /// The longest text accepted.
        max: usize,
    },
    /// The decoded ticket exceeds [`MAX_TICKET_LEN`](crate::MAX_TICKET_LEN).
    TicketTooLarge {
        /// The ticket's length in bytes.
        len: usize,
        /// The largest ticket accepted.
        max: usize,
    },
    /// The base64 text's length is not a multiple of four.
    Base64Length {
        /// Length of the base64 text (after the version tag).
        len: usize,
    },
    /// A byte outside the base64 alphabet; `offset` counts from the start of the base64 text.
    Base64Symbol {
        /// Position in the base64 text.
        offset: usize,
        /// The offending byte.
        byte: u8,
    },
    /// Padding in the wrong place, or padding that hides non-zero bits (non-canonical).
    Base64Padding {
        /// Position in the base64 text.
        offset: usize,
    },
    /// The name holds several SMT ticket records, so the ticket is ambiguous.
    MultipleRecords(usize),
    /// The name holds TXT records, but none is an SMT ticket record.
    NoTicketRecord(usize),
}

impl fmt::Display for MalformedRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("TXT record has no strings"),
            Self::MissingVersion => f.write_str("text does not start with \"v=smt1;\""),
            Self::UnsupportedVersion(v) => write!(f, "unsupported version tag {v:?}"),
            Self::TextTooLong { len, max } => {
                write!(f, "record text of {len} bytes exceeds the {max}-byte limit")
            }
            Self::TicketTooLarge { len, max } => {
                write!(f, "ticket of {len} bytes exceeds the {max}-byte limit")
            }
            Self::Base64Length { len } => {
                write!(f, "base64 text of {len} bytes is not a multiple of 4")
            }
            Self::Base64Symbol { offset, byte } => {
                write!(
                    f,
                    "byte 0x{byte:02x} at base64 offset {offset} is not in the alphabet"
                )
            }
            Self::Base64Padding { offset } => {
                write!(
                    f,
                    "misplaced or non-canonical base64 padding at offset {offset}"
                )
            }
            Self::MultipleRecords(n) => write!(f, "{n} SMT ticket records at one name"),
            Self::NoTicketRecord(n) => write!(f, "none of the {n} TXT records is an SMT ticket"),
        }
    }
}

impl std::error::Error for MalformedRecord {}
