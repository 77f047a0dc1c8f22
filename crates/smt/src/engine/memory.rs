//! Giving memory back after load. What a flood or a
//! burst of large messages made the endpoint hold is freed when it ends
//! (bounded pools, sessions and handshakes that expire), but glibc's
//! allocator keeps freed memory in its arenas: a server whose sessions,
//! handshakes and reassembly buffers took hundreds of megabytes stayed
//! that large afterwards. Once a second, if the allocator holds more than
//! [`TRIM_ABOVE`] bytes free, the engine asks it to return them
//! (`malloc_trim`). Other platforms and allocators: nothing to do.
//!
//! The look itself (`mallinfo2`) walks every arena's free lists on the
//! thread that turns the engine: 0.3–1 ms in `smt bench-handshake`'s
//! process, where it was the tail of the time to a first response. So a
//! new endpoint does not look at its first turn (it has freed nothing; the
//! look delayed its first call, a 0-RTT first flight or a ClientHello, by
//! as much as the handshake), and a due look waits until the endpoint has
//! been [`QUIET`] (a request that has just arrived does not wait behind
//! it), or [`BUSY_PERIOD`] for an endpoint that never is.
#![allow(unsafe_code)]

use std::time::{Duration, Instant};

/// Free bytes the allocator may keep before they are returned. 2 MiB (at
/// most one trim a second): with 16 MiB, a server idle at 8 MiB stayed
/// 9 MiB above it 10 s after `smt-hostile --long`'s 64 MiB first-DATA
/// class, with 2 MiB 2 MiB above it.
const TRIM_ABOVE: usize = 2 << 20;
/// How often the allocator is looked at, at most.
const PERIOD: Duration = Duration::from_secs(1);
/// The time without a turn after which a due look happens.
const QUIET: Duration = Duration::from_millis(2);
/// How often an endpoint that is never quiet looks anyway.
const BUSY_PERIOD: Duration = Duration::from_secs(10);

/// When the allocator was last looked at, and whether the endpoint has
/// done anything since.
#[derive(Debug)]
pub(crate) struct Trim {
    enabled: bool,
    /// The last look, or the first turn (which does not look).
    last: Option<Instant>,
    /// A [`PERIOD`] after `last`: before it, a turn only notes itself
    /// (computed once per look, not at every turn).
    period_end: Option<Instant>,
    /// The turn before the current one: how long the endpoint was quiet.
    previous_turn: Option<Instant>,
    /// A turn ran since the last look: look once more (the memory a turn
    /// freed would otherwise stay held until the next packet).
    dirty: bool,
}

impl Trim {
    pub(super) fn new(enabled: bool) -> Self {
        Self {
            enabled,
            last: None,
            period_end: None,
            previous_turn: None,
            dirty: false,
        }
    }

    /// After each turn: returns free memory to the system if the allocator
    /// holds much of it, a second has passed since the last look and the
    /// endpoint was quiet before this turn (or busy for [`BUSY_PERIOD`]).
    /// One clock compare otherwise.
    pub(super) fn after_turn(&mut self, now: Instant) {
        if !self.enabled {
            return;
        }
        let previous = self.previous_turn.replace(now);
        let (Some(last), Some(period_end)) = (self.last, self.period_end) else {
            self.start_period(now);
            return;
        };
        if now < period_end {
            self.dirty = true;
            return;
        }
        let quiet = previous.is_none_or(|p| now >= p + QUIET);
        if !quiet && now < last + BUSY_PERIOD {
            self.dirty = true;
            return;
        }
        self.start_period(now);
        self.dirty = false;
        look();
    }

    fn start_period(&mut self, now: Instant) {
        self.last = Some(now);
        self.period_end = Some(now + PERIOD);
    }

    /// When the engine must turn for the next look: a second after the
    /// last and [`QUIET`] after the latest turn, if it has turned since
    /// (an idle endpoint is not woken).
    pub(super) fn deadline(&self) -> Option<Instant> {
        match (
            self.enabled && self.dirty,
            self.period_end,
            self.previous_turn,
        ) {
            (true, Some(end), Some(p)) => Some(end.max(p + QUIET)),
            _ => None,
        }
    }
}

/// Returns free memory to the system if the allocator holds much.
fn look() {
    let free = free_bytes();
    if free > TRIM_ABOVE {
        trim();
        tracing::debug!(free, "returned free heap memory to the system");
    }
}

/// Bytes the allocator holds free (glibc's `mallinfo2().fordblks`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn free_bytes() -> usize {
    // SAFETY: mallinfo2 takes no arguments and returns a struct by value;
    // it only reads the allocator's own bookkeeping under its locks.
    unsafe { libc::mallinfo2() }.fordblks
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn free_bytes() -> usize {
    0
}

/// Returns the allocator's free pages to the system.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim(0) only releases free memory the allocator
    // holds (madvise / sbrk under its locks); no pointer is passed.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_endpoint_does_not_look_at_its_first_turn() {
        let t0 = Instant::now();
        let mut trim = Trim::new(true);
        trim.after_turn(t0);
        assert_eq!(trim.last, Some(t0), "the period starts, no look");
        assert_eq!(trim.deadline(), None, "nothing freed: not woken");
    }

    #[test]
    fn a_due_look_waits_until_the_endpoint_is_quiet() {
        let t0 = Instant::now();
        let mut trim = Trim::new(true);
        trim.after_turn(t0);
        let due = t0 + PERIOD;
        trim.after_turn(due - Duration::from_micros(500));
        trim.after_turn(due);
        assert_eq!(trim.last, Some(t0), "a turn 0.5 ms before: not quiet");
        assert_eq!(trim.deadline(), Some(due + QUIET));
        trim.after_turn(due + QUIET);
        assert_eq!(trim.last, Some(due + QUIET));
        assert_eq!(trim.deadline(), None);
    }

    #[test]
    fn an_endpoint_that_is_never_quiet_looks_every_busy_period() {
        let t0 = Instant::now();
        let mut trim = Trim::new(true);
        let mut now = t0;
        while trim.last == Some(t0) || trim.last.is_none() {
            trim.after_turn(now);
            now += QUIET / 2;
        }
        let looked = trim.last.unwrap() - t0;
        assert!(looked >= BUSY_PERIOD && looked < BUSY_PERIOD + QUIET);
    }
}
