//! AEAD backends for SMT, behind the narrow crypto traits `smt-proto` owns.
//!
//! `smt-proto` protects records and control packets only through its
//! [`PacketCipher`](smt_proto::crypto::PacketCipher) trait and never names a
//! crypto library; this crate supplies the real implementation. Nothing from
//! here appears in `smt-proto`'s public API, and `smt-proto` depends on this
//! crate only for its own tests. aws-lc-rs is an implementation detail: none
//! of its types appear in this crate's public API either.
//!
//! What is here:
//!
//! - [`TrafficKey`]: one direction's [`AeadAlgorithm`], key and static IV,
//!   with the key length checked on construction.
//! - [`AesGcmCipher`]: AES-128-GCM / AES-256-GCM record protection exactly
//!   as TLS 1.3 does it (RFC 8446 §5.2-5.3, nonce = IV XOR sequence number,
//!   the 5-byte record header as associated data, usage limit of §5.5), plus
//!   an AES-CMAC control-packet MAC (RFC 4493) under a key derived from the
//!   traffic key. The `*_raw` methods take an explicit nonce and associated data so
//!   published AES-GCM vectors run through the very code records use.
//! - [`psk`]: HKDF-Expand-Label (RFC 8446 §7.1) and per-peer session keys
//!   derived from one pre-shared master secret.
//! - [`secrets`]: TLS 1.3 traffic secrets (SHA-256 or SHA-384 suites) to
//!   traffic keys (RFC 8446 §7.3) and session keys, and KeyUpdate's next
//!   secrets (§7.2) behind `smt-proto`'s `KeyUpdate`.
//!
//! Tests check the code against vectors nobody here wrote: the RFC 8448
//! handshake trace (`tests/integration/rfc8448.rs`) and NIST's CAVP AES-GCM vectors
//! (`tests/integration/nist_gcm.rs`, after `scripts/fetch-vectors.sh`).
//!
//! Secrets never reach `Debug` output: [`TrafficKey`] and [`AesGcmCipher`]
//! print their algorithm only.
#![warn(missing_docs, unreachable_pub)]

mod cipher;
mod control_mac;
mod key;
mod okm;
pub mod psk;
pub mod secrets;
#[cfg(feature = "sim")]
pub mod sim;
#[doc(hidden)]
pub mod test_vectors;

pub use cipher::{record_nonce, AesGcmCipher, AES_GCM_RECORD_LIMIT};
pub use key::{AeadAlgorithm, KeyError, TrafficKey, IV_LEN};
pub use secrets::{SecretError, TlsHash, TrafficSecrets};

/// Fills `buf` from the operating system's CSPRNG.
pub fn fill_random(buf: &mut [u8]) {
    // NOTE(unwrap): the system RNG failing is unrecoverable for any
    // cryptographic library; aws-lc aborts in the same situation.
    aws_lc_rs::rand::fill(buf).expect("system random number generator failed");
}
