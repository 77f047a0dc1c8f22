//! The fault-injecting UDP relay for SMT ([`Relay`], the `smt-relay`
//! program) and the attack kit built on it ([`attack`]): the relay sits
//! between two real sockets and drops, delays, duplicates, reorders, corrupts
//! or rewrites datagrams, and as the on-path attacker of the attack tests it
//! records, forges and replays them.
//!
//! For the tests that use it, it also re-exports the simulation helpers
//! they need next to the relay: the two-endpoint harness ([`Pair`]) and its
//! link ([`Link`]) from `smt_proto::sim`, where they live next to the core,
//! and AES-GCM keys for them ([`KeyKind`]) from `smt_crypto::sim`, where
//! they live next to the cipher; and it runs the seeded netsim sweep
//! ([`netsim`], the `smt-netsim` program). Everything seeded is
//! deterministic: the same seed gives the same packets, drops and
//! completion times.
#![warn(missing_docs, unreachable_pub)]

pub mod attack;
pub mod netsim;
pub mod relay;

pub use relay::{
    Action, Captured, Direction, DirectionStats, Impairment, Relay, RelayConfig, RelayStats, Tamper,
};
pub use smt_crypto::sim::{aes_session, rekeying_session, KeyKind};
pub use smt_proto::sim::{
    null_session, Datagram, KeySource, Link, LinkStats, Nic, Outcome, Pair, Side, SplitMix64,
    Verdict,
};
