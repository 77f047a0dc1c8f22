//! Giving memory back after load. What a flood or a
//! burst of large messages made the endpoint hold is freed when it ends
//! (bounded pools, sessions and handshakes that expire), but glibc's
//! allocator keeps freed memory in its arenas: a server whose sessions,
//! handshakes and reassembly buffers took hundreds of megabytes stayed
//! that large afterwards. Once a second, if the allocator holds more than
//! [`TRIM_ABOVE`] bytes free, the engine asks it to return them
//! (`malloc_trim`). Other platforms and allocators: nothing to do.
#![allow(unsafe_code)]

use std::time::{Duration, Instant};

/// Free bytes the allocator may keep before they are returned. 2 MiB (at
/// most one trim a second): with 16 MiB, a server idle at 8 MiB stayed
/// 9 MiB above it 10 s after `smt-hostile --long`'s 64 MiB first-DATA
/// class, with 2 MiB 2 MiB above it.
const TRIM_ABOVE: usize = 2 << 20;
/// How often the allocator is looked at, at most.
const PERIOD: Duration = Duration::from_secs(1);

/// When the allocator was last looked at, and whether the endpoint has
/// done anything since.
#[derive(Debug)]
pub(crate) struct Trim {
    enabled: bool,
    last: Option<Instant>,
    /// A turn ran since the last look: look once more (the memory a turn
    /// freed would otherwise stay held until the next packet).
    dirty: bool,
}

impl Trim {
    pub(super) fn new(enabled: bool) -> Self {
        Self {
            enabled,
            last: None,
            dirty: false,
        }
    }

    /// After each turn: returns free memory to the system if the allocator
    /// holds much of it and a second has passed since the last look. One
    /// clock compare otherwise.
    pub(super) fn after_turn(&mut self, now: Instant) {
        if !self.enabled {
            return;
        }
        if self.last.is_some_and(|t| now < t + PERIOD) {
            self.dirty = true;
            return;
        }
        self.last = Some(now);
        self.dirty = false;
        let free = free_bytes();
        if free > TRIM_ABOVE {
            trim();
            tracing::debug!(free, "returned free heap memory to the system");
        }
    }

    /// When the engine must turn for the next look: a second after the
    /// last, if it has turned since (an idle endpoint is not woken).
    pub(super) fn deadline(&self) -> Option<Instant> {
        match (self.enabled && self.dirty, self.last) {
            (true, Some(t)) => Some(t + PERIOD),
            _ => None,
        }
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
