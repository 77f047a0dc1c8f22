//! Page protection for encrypted remote memory (Yoon & Moon,
//! CoNEXT 2025): a compute node keeps its 4 KiB pages on a memory node
//! that must never see plaintext, so each page leaves as
//!
//! ```text
//!   XTS-AES-128_K( page (4096) ‖ CRC-64(page) (8, LE) ‖ 0^8 )   = 4112 bytes
//!   tweak = remote page address (u64 LE) ‖ version (u64 LE, 0 unless versioned)
//! ```
//!
//! exactly the layout their RNIC computes (§3.1: the CRC is taken
//! over the page and encrypted with it; 8 zero bytes pad the input to a
//! multiple of the AES block). What each part buys (`docs/remote-memory.md`
//! § 3 has the full table):
//!
//! | attack on a stored page | caught by | how |
//! |---|---|---|
//! | bytes changed (any block) | CRC inside XTS | XTS has no malleability across a block: a changed ciphertext block decrypts to 16 random bytes, which fail the CRC (or the zero padding, for the last block) except with probability 2⁻⁶⁴ |
//! | page moved to another address | the address in the tweak | decrypted under the wrong tweak every block is random |
//! | wrong key / key ID | the key | as above |
//! | an older copy put back at the same address (replay) | **only** the version in the tweak ([`PageCipher::versioned`]) | without it the stale page decrypts perfectly and its CRC holds |
//!
//! Pieces:
//!
//! | piece | here |
//! |---|---|
//! | XTS-AES-128 (OpenSSL EVP, AES-NI) | [`XtsKey`], `xts.rs` |
//! | CRC-64/NVME (what NVIDIA RNICs compute) and CRC-64/XZ (crc-fast, PCLMULQDQ) | [`Crc64`] |
//! | tweaks from the remote address (and a version) | [`Tweak`] |
//! | seal / open one page, per-page verdicts | [`PageCipher`], [`SealedPage`], [`IntegrityError`] |
//! | key rotation: numbered keys, the current one seals, any live one opens | [`KeyRing`], [`KeyId`] |
//! | the RNIC's crypto engine: bounded contexts, per-queue pools, configuration chained before data, unsignaled configuration completions, settable latency and throughput | [`engine`] |
//!
//! No sockets, no clock outside [`engine`]'s worker; the memory node and
//! the client live in `smt-memnode` and `smt-farmem`.

#![warn(missing_docs, unreachable_pub)]

mod crc;
pub mod engine;
mod keys;
mod page;
mod tweak;
mod xts;

pub use crc::Crc64;
pub use keys::{KeyId, KeyRing, KeyRingError};
pub use page::{IntegrityError, PageCipher, SealedPage};
pub use tweak::Tweak;
pub use xts::{XtsCipher, XtsKey, XtsKeyError};

/// Bytes in a page.
pub const PAGE_SIZE: usize = 4096;
/// Bytes of the CRC-64 stored after the page.
pub const CRC_LEN: usize = 8;
/// Zero bytes after the CRC, padding the XTS input to whole AES blocks.
pub const PAD_LEN: usize = 8;
/// Bytes of a sealed page: page ‖ CRC-64 ‖ 8 zero bytes.
pub const SEALED_LEN: usize = PAGE_SIZE + CRC_LEN + PAD_LEN;

/// A page of plaintext.
pub type Page = [u8; PAGE_SIZE];
