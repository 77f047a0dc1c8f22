//! Recording what an endpoint does, for debugging and for users without
//! tcpdump (`docs/observability.md`):
//!
//! - [`Capture`]: a pcapng file of every datagram the endpoint sends and
//!   receives, as it left or arrived at the socket (GSO batches as their
//!   datagrams, GRO batches split), with IP and UDP headers made from the
//!   real addresses; `smt dump` decrypts it with the endpoint's key log.
//! - [`Trace`]: JSON lines, one per event of the protocol core (packets
//!   sent and received, drops, records sealed and opened, RPCs started,
//!   failed, freed, handshakes, key epochs), for `smt dump --trace`.
//!
//! Both are off by default ([`Observe::default`]); off, they cost the
//! data path one branch. On, the data path copies what it saw into a
//! queue bounded in bytes and a writer thread writes the file: a writer
//! that falls behind drops what does not fit and counts it, and never
//! makes the endpoint wait.

mod capture;
mod spool;
mod trace;

use std::time::{Instant, SystemTime, UNIX_EPOCH};

pub use capture::{Capture, CaptureSummary, CAPTURE_BUFFER};
pub(crate) use capture::{CaptureTap, Framing};
pub use trace::{Trace, TraceSummary, TRACE_BUFFER, TRACE_FORMAT_VERSION};

/// What an endpoint records ([`crate::EndpointConfig::observe`]).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Observe {
    /// Capture every datagram into this pcapng file.
    pub capture: Option<Capture>,
    /// Write the core's events into this JSON-lines trace.
    pub trace: Option<Trace>,
}

impl Observe {
    /// Nothing recorded.
    pub fn new() -> Self {
        Self::default()
    }

    /// Captures datagrams into `capture`.
    pub fn capture(mut self, capture: Capture) -> Self {
        self.capture = Some(capture);
        self
    }

    /// Writes the event trace into `trace`.
    pub fn trace(mut self, trace: Trace) -> Self {
        self.trace = Some(trace);
        self
    }
}

/// Converts the endpoint's instants into wall-clock time: the two clocks'
/// readings taken together once, when the capture or trace was made.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WallClock {
    instant: Instant,
    unix_nanos: u64,
}

impl WallClock {
    pub fn now() -> Self {
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Self {
            instant: Instant::now(),
            unix_nanos: unix.as_nanos() as u64,
        }
    }

    /// Nanoseconds since the Unix epoch at `at`.
    pub fn unix_nanos(&self, at: Instant) -> u64 {
        match at.checked_duration_since(self.instant) {
            Some(after) => self.unix_nanos + after.as_nanos() as u64,
            None => self
                .unix_nanos
                .saturating_sub(self.instant.duration_since(at).as_nanos() as u64),
        }
    }

    /// Nanoseconds since the Unix epoch when the clocks were read.
    pub fn unix_nanos_at_start(&self) -> u64 {
        self.unix_nanos
    }

    /// Nanoseconds since the Unix epoch now (the monotonic clock's view).
    pub fn unix_nanos_now(&self) -> u64 {
        self.unix_nanos(Instant::now())
    }

    /// Signed microseconds from the clocks' reading to `at`.
    pub fn micros_since_start(&self, at: Instant) -> i64 {
        match at.checked_duration_since(self.instant) {
            Some(after) => after.as_micros() as i64,
            None => -(self.instant.duration_since(at).as_micros() as i64),
        }
    }
}
