//! Why a ticket, a hello or a reply was refused.

use std::fmt;

use smt_proto::HandshakeError;

/// Why a ticket, a ClientHello0 or a ServerReply0 was refused, or why the
/// local caller's input cannot be used.
///
/// Sorted by who is at fault: the peer or an attacker sent bytes that do not
/// parse ([`Malformed`](Self::Malformed)); the ticket is not authentic
/// ([`UntrustedCertificate`](Self::UntrustedCertificate),
/// [`WrongName`](Self::WrongName), [`BadSignature`](Self::BadSignature)) or
/// not valid now ([`Expired`](Self::Expired),
/// [`NotYetValid`](Self::NotYetValid),
/// [`LifetimeTooLong`](Self::LifetimeTooLong)); the server refuses a hello
/// ([`UnknownTicket`](Self::UnknownTicket), [`Replayed`](Self::Replayed),
/// [`NotFresh`](Self::NotFresh), [`SentBeforeStart`](Self::SentBeforeStart),
/// [`ReplayCacheFull`](Self::ReplayCacheFull)); the client refuses a reply
/// ([`BadConfirmation`](Self::BadConfirmation)); the local caller handed in
/// something unusable ([`InvalidInput`](Self::InvalidInput)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TicketError {
    /// The bytes are not a well-formed ticket, hello or reply (truncated,
    /// trailing bytes, unknown version, bad length, invalid key share...).
    Malformed(&'static str),
    /// The ticket's certificate chain does not lead to the trusted CA, or a
    /// certificate is expired, revoked for its purpose or unparsable.
    UntrustedCertificate(String),
    /// The ticket or its certificate is for another server name.
    WrongName {
        /// The name the caller expected.
        expected: String,
        /// Why it does not match (the ticket's name, or the certificate
        /// check's verdict).
        found: String,
    },
    /// The ticket's signature does not verify under its certificate's key:
    /// some signed field (the static key, the validity, the name...) was
    /// changed, or the signature itself was.
    BadSignature,
    /// `now` is at or past the ticket's `not_after` (unix seconds).
    Expired {
        /// End of the ticket's validity.
        not_after: u64,
        /// The time the check used.
        now: u64,
    },
    /// `now` is before the ticket's `not_before` (unix seconds).
    NotYetValid {
        /// Start of the ticket's validity.
        not_before: u64,
        /// The time the check used.
        now: u64,
    },
    /// The ticket claims, or the issuer asked for, a validity longer than
    /// [`MAX_TICKET_LIFETIME`](crate::MAX_TICKET_LIFETIME) (1 hour), or one
    /// that is empty.
    LifetimeTooLong {
        /// The requested or claimed lifetime in seconds.
        seconds: u64,
    },
    /// The hello names a ticket (by its SHA-256) this server does not hold.
    UnknownTicket,
    /// The hello's client random was already accepted under this ticket:
    /// a replay of the first flight.
    Replayed,
    /// The hello's client time is outside the server's freshness window: a
    /// delayed or replayed hello, or a client clock far off.
    NotFresh {
        /// The hello's time (unix milliseconds).
        client_time: u64,
        /// The server's clock (unix milliseconds).
        now: u64,
    },
    /// The hello was stamped before this server (its replay cache) started,
    /// give or take the clock skew bound: the server cannot know whether it
    /// accepted it before, so it refuses it (a replay across a restart).
    SentBeforeStart {
        /// The hello's time (unix milliseconds).
        client_time: u64,
        /// The earliest time accepted (start + skew bound, unix ms).
        earliest: u64,
    },
    /// The replay cache is at its hard capacity; the server refuses new
    /// 0-RTT hellos rather than risk accepting a replay (fail closed).
    ReplayCacheFull,
    /// The ServerReply0's confirmation MAC is wrong: the reply was tampered
    /// with or does not come from the holder of the ticket's static key.
    BadConfirmation,
    /// The local caller passed something unusable (a key that does not match
    /// the certificate, a name that is not a DNS name, an empty chain...);
    /// the message says what to fix.
    InvalidInput(String),
}

impl fmt::Display for TicketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Malformed(why) => write!(f, "malformed 0-RTT message: {why}"),
            Self::UntrustedCertificate(why) => {
                write!(f, "ticket certificate is not trusted: {why}")
            }
            Self::WrongName { expected, found } => {
                write!(f, "ticket is not for {expected:?}: {found}")
            }
            Self::BadSignature => f.write_str("ticket signature does not verify"),
            Self::Expired { not_after, now } => {
                write!(f, "ticket expired at {not_after} (now {now}, unix seconds)")
            }
            Self::NotYetValid { not_before, now } => write!(
                f,
                "ticket is not valid before {not_before} (now {now}, unix seconds)"
            ),
            Self::LifetimeTooLong { seconds } => write!(
                f,
                "ticket lifetime of {seconds} s is outside 1..={} s",
                crate::MAX_TICKET_LIFETIME.as_secs()
            ),
            Self::UnknownTicket => f.write_str("hello is for a ticket this server does not hold"),
            Self::Replayed => f.write_str("hello replayed: its client random was already used"),
            Self::NotFresh { client_time, now } => write!(
                f,
                "hello is not fresh: stamped {client_time}, server clock {now} (unix ms)"
            ),
            Self::SentBeforeStart {
                client_time,
                earliest,
            } => write!(
                f,
                "hello stamped {client_time}, before the server's start (accepts from {earliest}, unix ms)"
            ),
            Self::ReplayCacheFull => {
                f.write_str("replay cache full: 0-RTT refused until entries expire")
            }
            Self::BadConfirmation => f.write_str("server reply confirmation MAC does not verify"),
            Self::InvalidInput(why) => write!(f, "invalid input: {why}"),
        }
    }
}

impl std::error::Error for TicketError {}

/// Every ticket failure surfaces to the endpoint as
/// [`HandshakeError::BadTicket`], so a client can tell "0-RTT failed, fall
/// back to a full TLS handshake" apart from other failures.
impl From<TicketError> for HandshakeError {
    fn from(err: TicketError) -> Self {
        HandshakeError::BadTicket(err.to_string())
    }
}
