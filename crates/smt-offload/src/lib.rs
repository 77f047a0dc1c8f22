//! A model of a NIC's autonomous TLS offload (NVIDIA ConnectX-6 Dx/7 as
//! NVIDIA's kTLS offload paper describes it and Linux's mlx5 driver drives it), to show how
//! SMT can use it (the SMT paper, §3.2, §4.3, §4.4.2) without the hardware.
//!
//! The engine knows nothing of SMT's messages. It sees what such a NIC
//! sees: descriptors in transmit queues, flow contexts in bounded on-NIC
//! memory, and TSO segments whose payload is a stream of TLS 1.3 records
//! with plaintext bodies and empty tags. It encrypts exactly what the NIC
//! encrypts (record bodies, AES-GCM, tags filled in; the 5-byte header is
//! the AAD and stays plaintext), keeps its place in the record stream from
//! one segment to the next, and needs a resync, with the record's start
//! when the resync lands mid-record, before a segment that does not follow.
//!
//! | piece | here |
//! |---|---|
//! | descriptors: create/destroy context, resync, segment | [`TxDescriptor`] |
//! | flow-context table, bounded, no eviction of its own | `table.rs` |
//! | per-context record state across segments (AES-CTR position, the record so far for its tag) | `context.rs`, `gcm.rs` |
//! | N queues, in order within, unordered across; scheduler chooses | [`Engine`], [`Scheduler`], [`Exhaustive`], [`SeededRandom`] |
//! | N queues, a thread each (real mode) | [`ThreadedEngine`] |
//! | counters named after mlx5's ethtool stats | [`TxCounters`] |
//! | the host's side: who gets a context, when to resync, eviction | [`ContextPlanner`], [`TcpLikeSender`] |
//! | record streams shaped like SMT's or TCP's | [`stream`] |
//!
//! `docs/offload.md` explains the model against seeds 001 and 003: what is
//! faithful and what is simplified.
//!
//! Descriptors are input: a malformed one is counted and dropped
//! ([`DropReason`]), never a panic. The deterministic engine owns no clock
//! and no threads; only [`ThreadedEngine`] spawns threads.
#![warn(missing_docs, unreachable_pub)]

mod context;
mod counters;
mod crypto_info;
mod descriptor;
mod engine;
mod gcm;
mod nic;
mod planner;
mod record;
mod rng;
mod rx;
mod schedule;
pub mod stream;
mod table;
mod tcp_like;
mod threaded;

pub use counters::{DropReason, RxCounters, TxCounters};
pub use crypto_info::{CipherSuite, CryptoInfo, KeyLengthError, IV_LEN};
pub use descriptor::{
    ContextId, QueueId, Resync, Segment, TxDescriptor, WireSegment, MAX_SEGMENT_PAYLOAD,
};
pub use engine::{Engine, EngineConfig, Outcome, PostError};
pub use gcm::TAG_LEN;
pub use nic::DUMP_CHUNK;
pub use planner::{ContextPlanner, FlowKey, PlannerStats};
pub use record::{
    plaintext_record, RecordTooLong, CONTENT_TYPE_APPLICATION_DATA, HEADER_LEN, MAX_BODY_LEN,
    MAX_RECORD_LEN,
};
pub use rng::SplitMix64;
pub use rx::{RxContextId, RxCreateError, RxEngine, RxVerdict, StreamPos};
pub use schedule::{Exhaustive, RoundRobin, Scheduler, SeededRandom};
pub use tcp_like::TcpLikeSender;
pub use threaded::{ThreadedEngine, WireOutput, WireSink};

#[doc(hidden)]
pub mod testing {
    //! The streaming AES-GCM, exposed so published vectors (arbitrary AAD,
    //! explicit nonce) can run through the code the engines use for
    //! records split across segments (transmit) and packets (receive).

    use crate::crypto_info::{CryptoInfo, IV_LEN};
    use crate::gcm::{GcmStream, RecordCipher, TAG_LEN};

    /// Encrypts `text` in place in the given pieces and returns the tag.
    pub fn gcm_seal_in_pieces(
        key: &CryptoInfo,
        nonce: [u8; IV_LEN],
        aad: &[u8],
        text: &mut [u8],
        cuts: &[usize],
    ) -> [u8; TAG_LEN] {
        let cipher = RecordCipher::new(key);
        let mut stream = GcmStream::with_nonce(&cipher, nonce, aad);
        let mut from = 0;
        for &cut in cuts.iter().chain([text.len()].iter()) {
            let to = cut.clamp(from, text.len());
            stream.encrypt(&cipher, &mut text[from..to]);
            from = to;
        }
        stream.finish(&cipher)
    }

    /// Decrypts `text` in place in the given pieces, the way the receive
    /// engine decrypts a record that spans packets, and checks `tag`.
    /// Returns whether the tag verified.
    pub fn gcm_open_in_pieces(
        key: &CryptoInfo,
        nonce: [u8; IV_LEN],
        aad: &[u8],
        text: &mut [u8],
        tag: &[u8; TAG_LEN],
        cuts: &[usize],
    ) -> bool {
        let cipher = RecordCipher::new(key);
        let mut stream = GcmStream::with_nonce(&cipher, nonce, aad);
        let mut from = 0;
        for &cut in cuts.iter().chain([text.len()].iter()) {
            let to = cut.clamp(from, text.len());
            stream.decrypt(&cipher, &mut text[from..to]);
            from = to;
        }
        stream.verify(&cipher, tag)
    }
}
