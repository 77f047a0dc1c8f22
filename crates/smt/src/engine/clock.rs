//! Where the engine reads the time: the system's monotonic clock, or one a
//! test injects to step time instead of waiting for it.

use std::time::Instant;

/// Where the engine reads the time. Injectable so that tests can step
/// time instead of waiting for it.
pub(crate) trait Clock: Send {
    fn now(&self) -> Instant;
}

/// The operating system's monotonic clock.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}
