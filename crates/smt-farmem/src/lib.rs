//! The compute node's side of encrypted remote memory over SMT (after Yoon &
//! Moon, CoNEXT 2025; `docs/remote-memory.md`): pages are sealed here (XTS-AES-128 over page ‖
//! CRC-64 ‖ 0^8, tweak from the remote address, `smt-pagecrypt`) and kept
//! on an `smt-memnode`, which never holds the key.
//!
//! | piece | here |
//! |---|---|
//! | network reads/writes and decryption in flight, on the CPU or the crypto engine | [`Pipeline`], [`Crypto`] |
//! | `read_page`/`write_page`, batched forms, key rotation | [`PageClient`] |
//! | per-page failures, sorted by who is at fault | [`PageError`] |
//! | busy-waiting and yielding requesters (as DiLOS and Adios wait) | [`Requester`] |
//! | a userfaultfd paging front end with a local cache of N pages | [`paging`] |
//! | the workloads: random array indirection, a key-value store | [`workload`] |
//!
//! All `unsafe` code is in `paging/sys.rs` (mmap, madvise, and the
//! userfaultfd copy), each block with its `SAFETY:` argument.

#![warn(missing_docs, unreachable_pub)]

mod client;
mod error;
pub mod paging;
mod pipeline;
mod requester;
pub mod workload;

pub use client::{psk_endpoint, PageClient};
pub use error::{ClientError, PageError};
pub use pipeline::{Crypto, Done, PageBuf, Pipeline, PipelineStats};
pub use requester::Requester;
