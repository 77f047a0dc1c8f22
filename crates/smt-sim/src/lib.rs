//! Deterministic simulation for SMT: the two-endpoint harness ([`Pair`]) on a
//! virtual clock with a seeded, impairable link ([`Link`]), re-exported from
//! `smt_proto::sim` where it lives next to the core; AES-GCM keys for it
//! ([`KeyKind`]); the netsim sweep; a fault-injecting relay for real sockets.
//!
//! Everything here is deterministic for a given seed: the same run gives the
//! same packets, the same drops and the same completion times, so tests can
//! snapshot behaviour.
#![warn(missing_docs, unreachable_pub)]

pub mod attack;
mod keys;
pub mod netsim;
pub mod relay;

pub use keys::{aes_session, rekeying_session, KeyKind};
pub use relay::{
    Action, Captured, Direction, DirectionStats, Impairment, Relay, RelayConfig, RelayStats, Tamper,
};
pub use smt_proto::sim::{
    null_session, Datagram, KeySource, Link, LinkStats, Nic, Outcome, Pair, Side, SplitMix64,
    Verdict,
};
