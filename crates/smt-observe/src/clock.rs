//! The endpoint's instants as wall-clock time, for the capture's and the
//! trace's timestamps.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Converts instants into wall-clock time: the two clocks' readings
/// taken together once, when the capture or trace was made (so a frame
/// and its events show the same time).
#[derive(Clone, Copy, Debug)]
pub(crate) struct WallClock {
    instant: Instant,
    unix_nanos: u64,
}

impl WallClock {
    pub(crate) fn now() -> Self {
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Self {
            instant: Instant::now(),
            unix_nanos: unix.as_nanos() as u64,
        }
    }

    /// Nanoseconds since the Unix epoch at `at`.
    pub(crate) fn unix_nanos(&self, at: Instant) -> u64 {
        match at.checked_duration_since(self.instant) {
            Some(after) => self.unix_nanos + after.as_nanos() as u64,
            None => self
                .unix_nanos
                .saturating_sub(self.instant.duration_since(at).as_nanos() as u64),
        }
    }

    /// Nanoseconds since the Unix epoch when the clocks were read.
    pub(crate) fn unix_nanos_at_start(&self) -> u64 {
        self.unix_nanos
    }

    /// Nanoseconds since the Unix epoch now (the monotonic clock's view).
    pub(crate) fn unix_nanos_now(&self) -> u64 {
        self.unix_nanos(Instant::now())
    }

    /// Signed microseconds from the clocks' reading to `at`.
    pub(crate) fn micros_since_start(&self, at: Instant) -> i64 {
        match at.checked_duration_since(self.instant) {
            Some(after) => after.as_micros() as i64,
            None => -(self.instant.duration_since(at).as_micros() as i64),
        }
    }
}
