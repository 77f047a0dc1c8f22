//! Deterministic simulation of two endpoints: a harness ([`Pair`]) on a
//! virtual clock with a seeded, impairable link ([`Link`]), the seeded
//! generator that drives it ([`SplitMix64`]) and keys for it
//! ([`KeySource`]).
//!
//! Built for this crate's own tests and, with the `sim` feature, for other
//! crates (smt-relay re-exports it with AES-GCM keys, the netsim sweep and
//! the relay; smt-bench uses the generator). It lives next to the core so
//! scenario tests inside the crate read the endpoints' state directly
//! instead of through getters kept only for them.
//!
//! Everything here is deterministic for a given seed: the same run gives
//! the same packets, the same drops and the same completion times, so tests
//! can snapshot behaviour.

mod keys;
mod link;
mod pair;
mod rng;

pub use keys::{null_session, KeySource, KeyedCipher, TestKeys};
pub use link::{Datagram, Link, Verdict};
pub use pair::{LinkStats, Nic, Outcome, Pair, Side};
pub use rng::SplitMix64;
