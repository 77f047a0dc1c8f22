//! SMT: the Secure Message Transport — encrypted, message-based RPCs over
//! UDP (or SMT's own IP protocol number), in user space.
//!
//! ```no_run
//! # fn main() -> Result<(), smt::Error> {
//! use smt::{Endpoint, EndpointConfig};
//! let server = Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default())?;
//! let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default())?;
//! let (client_keys, server_keys) = smt::keys::fresh_session_pair(smt::keys::AeadAlgorithm::Aes128Gcm);
//! client.install_session(server.local_addr(), client_keys)?;
//! server.install_session(client.local_addr(), server_keys)?;
//! std::thread::spawn(move || {
//!     while let Ok(req) = server.accept() {
//!         let reply = req.data().to_ascii_uppercase();
//!         let _ = req.respond(&reply);
//!     }
//! });
//! let response = client.call("127.0.0.1:9".parse().unwrap(), b"hello")?;
//! # Ok(()) }
//! ```
//!
//! Responses and requests arrive as [`Bytes`], the buffer the message was
//! assembled in (no copy); dropping it gives a large buffer back to the
//! endpoint for a later message, so a stream of megabyte messages reuses
//! memory instead of faulting fresh pages in.
//!
//! Architecture: one engine per endpoint owns the socket (UDP with GSO/GRO
//! and batched receive, or raw IP), the clock, the session-establishment
//! policy and the sans-IO protocol core (`smt-proto`). Two faces drive it:
//! [`Endpoint`], shared by threads that drive it themselves while they
//! wait (a background thread covers the rest), and [`LocalEndpoint`],
//! owned and driven by one thread. See `docs/architecture.md`.

mod config;
mod drive;
mod endpoint;
mod engine;
mod error;
mod io;
pub mod keys;
mod local;
pub mod offload;
mod recycle;
mod request;
mod wait;
pub mod workers;
mod zero_rtt;

pub use bytes::Bytes;
pub use config::{EndpointConfig, Mode, ProtocolConfig, SocketConfig, DEFAULT_IP_PROTOCOL};
pub use endpoint::Endpoint;
pub use error::{Error, HandshakeError, RpcError, SendError, SocketError};
pub use local::{CallId, LocalEndpoint, LocalEvent, RequestId};
pub use request::IncomingRequest;
pub use smt_proto::{DropReason, Padding, Payload, Role, SessionKeys, Stats};
pub use smt_udp::Features;
pub use zero_rtt::ServerAcceptor;
