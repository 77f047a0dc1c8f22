//! Deterministic simulation for SMT: a two-endpoint harness ([`Pair`]) on a
//! virtual clock with a seeded, impairable link ([`Link`]), and key helpers.
//!
//! Everything here is deterministic for a given seed: the same run gives the
//! same packets, the same drops and the same completion times, so tests can
//! snapshot behaviour.

pub mod attack;
mod keys;
mod link;
pub mod netsim;
mod pair;
pub mod relay;
mod rng;

pub use keys::{aes_session, null_session, rekeying_session, KeyKind};
pub use link::{Datagram, Link, Verdict};
pub use pair::{Outcome, Pair, Side};
pub use relay::{
    Action, Captured, Direction, DirectionStats, Impairment, Relay, RelayConfig, RelayStats, Tamper,
};
pub use rng::SplitMix64;
