//! The handshake policies of SMT, with no I/O: how two endpoints come to
//! share session keys, each as an `smt_proto` [`Handshake`](smt_proto::Handshake)
//! that the transport drives.
//!
//! - the SMT-ticket 0-RTT key exchange (below), at the crate's root;
//! - the pre-shared-key modes in [`psk`]: the nonce exchange
//!   ([`PskClient`](psk::PskClient), [`PskServerHandshake`](psk::PskServerHandshake);
//!   fresh keys per session, one round trip), the static derivation and the
//!   PSK key log;
//! - [`ServerAcceptor`], the server's answer to every kind of hello: TLS 1.3
//!   (through `smt-tls`), 0-RTT SMT-tickets and the PSK nonce exchange.
//!
//! # The SMT-ticket 0-RTT exchange
//!
//! The SMT paper §4.5.2-4.5.3.
//!
//! A server publishes a signed [`Ticket`] (for example in DNS) carrying its
//! long-term X25519 key; a client that trusts the datacenter CA verifies it
//! once ([`Ticket::verify`] → [`VerifiedTicket`]) and can then open a
//! session with *encrypted data in its first flight*:
//!
//! 1. [`ZeroRttClient::start_at`] — a [`ClientHello0`](message::ClientHello0)
//!    with a fresh random, the client's clock and an ephemeral key from a
//!    [`KeyPool`], and the
//!    **SMT-key** (client ephemeral × server static), usable at once;
//! 2. [`ZeroRttServer::accept`] — checks the hello (ticket, validity,
//!    freshness against the server's clock and start ([`Freshness`]), replay)
//!    and derives the same SMT-key; if the client asked for forward
//!    secrecy, also a [`ServerReply0`](message::ServerReply0) with the
//!    server's ephemeral key and a confirmation MAC, and the **fs-key**
//!    (both ephemerals);
//! 3. [`ZeroRttClient::finish`] — checks the confirmation and derives the
//!    fs-key.
//!
//! Keys come out as `smt_proto` [`SessionKeys`](smt_proto::SessionKeys)
//! (AES-128-GCM, via `smt-crypto`). [`ZeroRttClientHandshake`] and
//! [`ZeroRttServerHandshake`] wrap both sides in `smt_proto`'s
//! [`Handshake`](smt_proto::Handshake) trait. `docs/handshake.md` has the
//! message formats, the key schedule with every label, and the security
//! argument.
//!
//! The key schedule uses TLS 1.3's primitives only (HKDF-Extract,
//! HKDF-Expand-Label, Derive-Secret, SHA-256) with labels of its own; see
//! the `schedule` section of the docs.
//!
//! **No I/O; the clock only where asked.** Every check that depends on time
//! takes `now`. Three conveniences read the system clock: the client's
//! `start` / `ZeroRttClientHandshake::new` stamp the hello with it (`_at`
//! variants take the time), and `ZeroRttServer::new` takes it as the
//! server's start ([`ZeroRttServer::with_freshness`] sets another).
//! Randomness (client randoms, ephemeral keys, ECDSA nonces) comes from the
//! operating system's CSPRNG through aws-lc, as key material must; nothing
//! here is meant to be deterministic.
//!
//! **Untrusted input never panics**: [`Ticket::decode`],
//! [`Ticket::from_base64`], [`ZeroRttServer::accept`] and
//! [`ZeroRttClient::finish`] return a [`TicketError`] for any bytes (tested
//! with random and mutated input).
#![warn(missing_docs, unreachable_pub)]

mod acceptor;
mod codec;
mod error;
mod exchange;
mod freshness;
mod handshake;
mod keylog;
mod keys;
pub mod message;
pub mod psk;
mod psk_nonce;
mod replay;
mod schedule;
mod ticket;

pub use acceptor::ServerAcceptor;
pub use error::TicketError;
pub use exchange::{Accepted, ZeroRttClient, ZeroRttServer};
pub use freshness::{unix_millis, Freshness};
pub use handshake::{ZeroRttClientHandshake, ZeroRttServerHandshake};
pub use keys::{EphemeralKey, KeyPool, PoolStats, StaticKey, KEY_SHARE_LEN};
pub use replay::{ReplayCache, ReplayStats};
pub use ticket::{Ticket, VerifiedTicket, MAX_TICKET_LEN, MAX_TICKET_LIFETIME, TICKET_VERSION};

/// Fuzzing entry points (`cfg(fuzzing)`, called by the `ticket_decode`
/// target in `fuzz/`): feed arbitrary bytes to every parser; none may
/// panic, and whatever decodes must encode back to the same bytes.
#[cfg(fuzzing)]
pub mod fuzzing {
    use crate::message::{frame_len, ClientHello0, ServerReply0};
    use crate::Ticket;

    /// Runs every decoder over `data` and checks the round trips.
    pub fn decode_everything(data: &[u8]) {
        if let Ok(ticket) = Ticket::decode(data) {
            ticket_round_trips(&ticket, data);
        }
        if let Ok(hello) = ClientHello0::decode(data) {
            assert_eq!(
                hello.to_bytes(),
                data,
                "ClientHello0 re-encodes differently"
            );
            assert_eq!(frame_len(data), Ok(Some(data.len())));
        }
        if let Ok(reply) = ServerReply0::decode(data) {
            assert_eq!(
                reply.to_bytes(),
                data,
                "ServerReply0 re-encodes differently"
            );
            assert_eq!(frame_len(data), Ok(Some(data.len())));
        }
        if let Ok(Some(len)) = frame_len(data) {
            assert!(len > crate::message::HEADER_LEN, "a frame has a body");
        }
        if let Ok(text) = std::str::from_utf8(data) {
            if let Ok(ticket) = Ticket::from_base64(text) {
                assert_eq!(Ticket::decode(ticket.as_bytes()).as_ref(), Ok(&ticket));
            }
        }
    }

    /// A decoded ticket keeps its bytes, and encodes (raw, base64, and
    /// field by field as `issue` does) back to them.
    fn ticket_round_trips(ticket: &Ticket, data: &[u8]) {
        assert_eq!(ticket.as_bytes(), data, "ticket bytes not kept");
        assert_eq!(Ticket::decode(ticket.as_bytes()).as_ref(), Ok(ticket));
        let text = ticket.to_base64();
        assert_eq!(Ticket::from_base64(&text).as_ref(), Ok(ticket));
        if let Ok(bytes) = ticket.reencode_for_fuzzing() {
            assert_eq!(bytes, data, "ticket fields re-encode differently");
        }
    }
}
