//! A simulated link with seeded impairments.

use std::net::SocketAddr;
use std::time::Duration;

use super::SplitMix64;

/// One datagram on the simulated network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datagram {
    /// The sending endpoint's address.
    pub from: SocketAddr,
    /// The receiving endpoint's address.
    pub to: SocketAddr,
    /// The UDP payload, as the endpoint wrote it.
    pub bytes: Vec<u8>,
}

/// What a test's intercept hook decides for a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Put it on the link (impairments still apply).
    Deliver,
    /// Lose it (counted as intercepted, not as lost).
    Drop,
}

/// Link properties, the same in both directions.
#[derive(Clone, Debug)]
pub struct Link {
    /// One-way propagation delay.
    pub latency: Duration,
    /// Serialisation rate in bits per second (0: infinite).
    pub bandwidth_bps: u64,
    /// Probability a datagram is lost.
    pub loss: f64,
    /// Probability a datagram is held back by up to `reorder_delay`.
    pub reorder: f64,
    /// The longest a reordered datagram is held back.
    pub reorder_delay: Duration,
    /// Probability a datagram is delivered twice.
    pub duplicate: f64,
    /// Probability one random bit of a datagram is flipped.
    pub corrupt: f64,
}

impl Default for Link {
    /// A clean 10 Gbit/s datacenter link with 5 µs one-way delay.
    fn default() -> Self {
        Self {
            latency: Duration::from_micros(5),
            bandwidth_bps: 10_000_000_000,
            loss: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::from_micros(50),
            duplicate: 0.0,
            corrupt: 0.0,
        }
    }
}

impl Link {
    /// Time to put `len` bytes on the wire.
    pub fn serialisation(&self, len: usize) -> Duration {
        if self.bandwidth_bps == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos(len as u64 * 8 * 1_000_000_000 / self.bandwidth_bps)
    }

    /// Extra delay for a reordered datagram, if this one is reordered.
    pub(crate) fn reorder_extra(&self, rng: &mut SplitMix64) -> Duration {
        if !rng.chance(self.reorder) {
            return Duration::ZERO;
        }
        let max = self.reorder_delay.as_nanos().max(1) as u64;
        Duration::from_nanos(rng.below(max))
    }

    /// Flips one random bit, if this datagram is corrupted.
    pub(crate) fn maybe_corrupt(&self, rng: &mut SplitMix64, bytes: &mut [u8]) -> bool {
        if bytes.is_empty() || !rng.chance(self.corrupt) {
            return false;
        }
        let at = rng.below(bytes.len() as u64) as usize;
        bytes[at] ^= 1 << rng.below(8);
        true
    }
}
