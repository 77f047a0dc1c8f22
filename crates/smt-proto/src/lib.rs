//! Sans-IO protocol core of the Secure Message Transport (SMT).
//!
//! SMT puts TLS 1.3 record protection inside a Homa-style message transport
//! (Gao et al., "Designing Transport-Level Encryption for Datacenter
//! Networks"): every message has its own record sequence-number space
//! (`message_id << 16 | record_index`), message IDs are unique per session
//! so replays are dropped before decryption, and message ID, length and
//! offsets stay in plaintext so the network and the host can balance load
//! per message.
//!
//! This crate owns no socket, no clock, no thread and no global RNG: every
//! entry point takes `now`, datagrams go in through
//! [`Endpoint::handle_datagram`] and come out of [`Endpoint::poll_transmit`].
//! Clippy bans `Instant::now`, `SystemTime::now`, sockets and threads here
//! (see `clippy.toml`). Crypto is reached only through [`crypto::PacketCipher`].
//!
//! The `sim` feature adds `sim`, the deterministic two-endpoint test
//! harness (`Pair`) on a virtual clock; this crate's own tests always have
//! it.
#![warn(missing_docs, unreachable_pub)]

mod buffers;
pub mod config;
pub mod crypto;
pub mod endpoint;
pub mod error;
#[cfg(any(fuzzing, test))]
#[doc(hidden)]
pub mod fuzzing;
pub mod handshake;
pub mod offload;
pub mod pathlet;
mod payload;
pub mod record;
mod rpc;
pub mod session;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
mod slab;
pub mod stats;
mod timer;
pub mod trace;
pub mod wire;

pub use buffers::Released;
pub use config::{Config, ConfigError, Padding, MIN_DATAGRAM_SIZE};
pub use endpoint::{Endpoint, Event, KeyResolver, RpcHandle, ServerRpcHandle, Transmit};
pub use error::{DropReason, RpcError, SendError};
pub use handshake::{AddressProof, Handshake, HandshakeAcceptor, HandshakeError, PeerIdentity};
pub use payload::Payload;
pub use session::{Role, SessionKeys};
pub use stats::{DropCounts, RttHistogram, Stats, Usage};
pub use trace::{TraceEvent, Traced};
pub use wire::HandshakeKind;

#[cfg(test)]
mod tests;
