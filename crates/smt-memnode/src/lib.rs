//! A memory node for encrypted remote memory over SMT (after Yoon & Moon,
//! CoNEXT 2025): it stores 4 KiB pages that compute nodes sealed (XTS-AES-128 over page ‖
//! CRC-64 ‖ 0^8, 4,112 bytes, see `smt-pagecrypt`) and hands them back. It
//! never holds an XTS key and never sees plaintext; SMT (TLS 1.3 or a
//! pre-shared key) protects the network leg on top.
//!
//! | piece | here |
//! |---|---|
//! | the request/response format: one SMT message per request, batches of up to [`wire::MAX_BATCH`] pages | [`wire`] |
//! | the page store: capacity in pages, an address limit, per-page verdicts | [`PageStore`], [`StoreConfig`] |
//! | the server loop on a caller-driven `smt::LocalEndpoint` | [`MemNode`] |
//! | the `smt-memnode` binary (PSK or TLS 1.3, as `smt server`) | `src/main.rs` |
//!
//! Requests are input from the network: a malformed one gets an error
//! response that names what is wrong, never a panic; a bad page (not
//! aligned, beyond the limit, never written, no room) gets its own status
//! while the rest of the batch is served.

#![warn(missing_docs, unreachable_pub)]

mod server;
mod store;
pub mod wire;

pub use server::{MemNode, NodeStats, RunningNode, ServeError};
pub use store::{PageStore, StoreConfig};
