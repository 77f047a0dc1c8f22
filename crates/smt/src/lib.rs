//! SMT: the Secure Message Transport — encrypted, message-based RPCs over
//! UDP (or SMT's own IP protocol number), in user space.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use smt::{Endpoint, EndpointConfig};
//! let server = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::default())?;
//! let client = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::default())?;
//! let (client_keys, server_keys) = smt::keys::fresh_session_pair(smt::keys::AeadAlgorithm::Aes128Gcm);
//! client.install_session(server.local_addr(), client_keys)?;
//! server.install_session(client.local_addr(), server_keys)?;
//! let accepter = server.clone();
//! std::thread::spawn(move || {
//!     while let Ok(req) = accepter.accept() {
//!         let reply = req.data().to_ascii_uppercase();
//!         let _ = req.respond(&reply);
//!     }
//! });
//! let to = server.local_addr();
//! let response = client.call(to, b"hello")?;
//! // At most a second, then Error::Timeout (and the RPC aborted at both ends).
//! let response = client.call_with(to, b"hello again", Duration::from_secs(1))?;
//! server.close();
//! # Ok(()) }
//! ```
//!
//! One dependency is enough: TLS ([`tls`]: rustls configs, certificates,
//! server names), 0-RTT tickets ([`ticket`], and [`dns`] to publish and
//! find them) and keys ([`keys`]) are re-exported here. A TLS server and
//! client: `examples/tls_server.rs`, `examples/tls_client.rs`.
//!
//! Deadlines: [`EndpointConfig::call_timeout`] for every call,
//! [`CallOptions`] per call; dropping a [`Endpoint::call_async`] future
//! cancels its RPC at both ends. Bounds: at most
//! [`EndpointConfig::max_outstanding_calls`] calls at once, at most
//! `max_pending_requests` requests waiting for the application. Dropping
//! the last [`Endpoint`] handle closes it.
//!
//! A server's application learns who sent each request and whether its
//! caller still waits: [`IncomingRequest::session`] (the session's
//! [`SessionId`], new for every session even from one address; how it was
//! established; what the handshake proved: the client's verified
//! certificate with mutual TLS, the SNI it sent) and
//! [`IncomingRequest::cancellation`] (fires when the client cancels the
//! call or passes its deadline; [`LocalEvent::RequestCancelled`] for a
//! [`LocalEndpoint`]).
//!
//! Responses and requests arrive as [`Bytes`], the buffer the message was
//! assembled in (no copy); dropping it gives a large buffer back to the
//! endpoint for a later message, so a stream of megabyte messages reuses
//! memory instead of faulting fresh pages in.
//!
//! Debugging: [`EndpointConfig::observe`] captures every datagram into a
//! pcapng file ([`observe::Capture`]; `smt dump` decrypts it with the key
//! log) and writes the protocol's events as JSON lines
//! ([`observe::Trace`]; `smt dump --trace` draws per-RPC timelines);
//! `docs/observability.md`.
//!
//! The design is that of Gao et al., *Designing Transport-Level Encryption
//! for Datacenter Networks* (IEEE S&P 2026), "the SMT paper" in these docs:
//! TLS 1.3 record protection inside a Homa-style message transport.
//!
//! Architecture: one engine per endpoint owns the socket (UDP with GSO/GRO
//! and batched receive, or raw IP), the clock, the session-establishment
//! policy and the sans-IO protocol core (`smt-proto`). Two faces drive it:
//! [`Endpoint`], shared by threads that drive it themselves while they
//! wait (a background thread covers the rest), and [`LocalEndpoint`],
//! owned and driven by one thread. See `docs/architecture.md`.
#![warn(missing_docs, unreachable_pub)]

mod config;
mod engine;
mod error;
mod histogram;
pub mod keys;
mod local;
pub mod metrics;
#[cfg(feature = "observe")]
pub mod observe;
// Without the feature: uninhabited stand-ins (see `offload` below).
#[cfg(not(feature = "observe"))]
#[path = "observe/off.rs"]
mod observe;
#[cfg(feature = "offload")]
pub mod offload;
// Without the feature: uninhabited stand-ins, so the driver's code paths
// stay written once and compile to nothing.
#[cfg(not(feature = "offload"))]
#[path = "offload/off.rs"]
mod offload;
mod recycle;
mod refill;
mod session;
pub mod stats;
mod threaded;
pub mod tls;
mod wait;
pub mod workers;

/// 0-RTT SMT-tickets (the `smt-handshake` crate): a server issues a signed
/// [`Ticket`](ticket::Ticket) for its static key and serves hellos with a
/// [`ZeroRttServer`](ticket::ZeroRttServer) in a
/// [`ServerAcceptor`]; a client verifies the ticket
/// ([`Ticket::verify`](ticket::Ticket::verify)) and gives it to
/// [`Endpoint::set_zero_rtt_ticket`]. `docs/handshake.md` §§ 1–8.
pub mod ticket {
    pub use smt_handshake::{
        unix_millis, Freshness, KeyPool, PoolStats, ReplayCache, ReplayStats, StaticKey, Ticket,
        TicketError, VerifiedTicket, ZeroRttServer, MAX_TICKET_LEN, MAX_TICKET_LIFETIME,
    };

    pub use crate::refill::KeyPoolRefill;
}

/// SMT-tickets in DNS (the `smt-dns` crate, feature `dns`, on by default):
/// [`TicketDnsServer`](dns::TicketDnsServer) publishes a server's ticket as
/// a TXT record at `_smt-ticket.<host>.`, [`lookup_ticket`](dns::lookup_ticket)
/// fetches it from a given DNS server.
#[cfg(feature = "dns")]
pub mod dns {
    pub use smt_dns::{
        lookup_ticket, lookup_ticket_async, ticket_domain, DnsError, LookupOptions, TicketDnsServer,
    };
}

pub use bytes::Bytes;
pub use config::{
    CallOptions, EndpointConfig, Mode, ProtocolConfig, SeqLayout, SocketConfig,
    DEFAULT_IP_PROTOCOL, DEFAULT_MAX_OUTSTANDING_CALLS, GRANT_WINDOW_DATAGRAMS,
};
pub use error::{ConfigError, Error, HandshakeError, RpcError, SendError, SocketError};
pub use local::{CallId, LocalEndpoint, LocalEvent, RequestId, TimerCounts};
pub use session::{PeerIdentity, SessionId, SessionInfo, SessionOrigin};
pub use smt_handshake::ServerAcceptor;
pub use smt_proto::{
    AddressProof, DropReason, Handshake, HandshakeAcceptor, KeyResolver, Padding, Payload, Role,
    SessionKeys,
};
pub use smt_udp::Features;
pub use stats::{PeerStats, Stats};
pub use threaded::{Cancellation, Endpoint, IncomingRequest};
