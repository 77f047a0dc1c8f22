//! Delivered messages as [`Bytes`] whose buffer goes back to the
//! endpoint's buffer pool when the application drops it.
//!
//! Why: the core assembles each message in a pooled buffer and hands it
//! over without a copy. A buffer the application then frees is lost to
//! the pool, so the next large message needs a fresh one — and glibc
//! returns freed megabyte buffers to the kernel, so every page of the next
//! one faults in again (a quarter of a 1 MiB RPC's CPU time). Wrapping the
//! buffer in `Bytes` keeps the hand-over copy-free and lets its drop, on
//! whatever thread, return it; the engine takes the returned buffers back
//! into the core's pool at its next turn.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;

use smt_proto::Endpoint as Core;

/// Buffers smaller than this are simply freed: the allocator serves them
/// from its free lists without touching the kernel, and a lock per small
/// message would cost more than it saves.
const MIN_RECYCLED: usize = 16 * 1024;

/// Bytes of buffers waiting to be taken back, at most: the core's pool
/// keeps at most 8 MiB anyway, and what an application holds for long is
/// not this endpoint's to keep.
const MAX_WAITING: usize = 16 << 20;

/// Where dropped message buffers wait for the engine.
#[derive(Debug, Default)]
pub(crate) struct Recycler {
    waiting: Mutex<Waiting>,
    /// Something waits: the engine checks this every turn, and takes the
    /// lock only when it is set (small messages never set it).
    any: AtomicBool,
}

#[derive(Debug, Default)]
struct Waiting {
    buffers: Vec<Vec<u8>>,
    bytes: usize,
}

impl Recycler {
    /// `buf` as `Bytes` (no copy) that returns to this recycler on drop,
    /// if it is large enough to be worth it.
    pub(crate) fn wrap(self: &Arc<Self>, buf: Vec<u8>) -> Bytes {
        if buf.capacity() < MIN_RECYCLED {
            return Bytes::from(buf);
        }
        Bytes::from_owner(Returning {
            buf,
            home: Arc::downgrade(self),
        })
    }

    /// Hands every waiting buffer to the core's pool.
    pub(crate) fn drain_into(&self, core: &mut Core) {
        if !self.any.swap(false, Ordering::Acquire) {
            return;
        }
        let taken = {
            // NOTE(poison): a panic while pushing leaves a valid Vec.
            let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
            if waiting.buffers.is_empty() {
                return;
            }
            waiting.bytes = 0;
            std::mem::take(&mut waiting.buffers)
        };
        for buf in taken {
            core.recycle(buf);
        }
    }

    fn give(&self, buf: Vec<u8>) {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        if waiting.bytes + buf.capacity() <= MAX_WAITING {
            waiting.bytes += buf.capacity();
            waiting.buffers.push(buf);
            self.any.store(true, Ordering::Release);
        }
    }
}

/// A delivered buffer that goes home when dropped (or is freed if its
/// endpoint is gone).
struct Returning {
    buf: Vec<u8>,
    home: Weak<Recycler>,
}

impl AsRef<[u8]> for Returning {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Returning {
    fn drop(&mut self) {
        if let Some(home) = self.home.upgrade() {
            home.give(std::mem::take(&mut self.buf));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_buffers_come_back_and_small_ones_are_freed() {
        let recycler = Arc::new(Recycler::default());
        let big = recycler.wrap(vec![7; 64 * 1024]);
        let small = recycler.wrap(vec![7; 100]);
        assert_eq!(&big[..3], &[7, 7, 7]);
        drop((big, small));
        let waiting = recycler.waiting.lock().unwrap();
        assert_eq!(waiting.buffers.len(), 1);
        assert_eq!(waiting.buffers[0].capacity(), 64 * 1024);
    }

    #[test]
    fn a_buffer_outliving_its_endpoint_is_freed() {
        let recycler = Arc::new(Recycler::default());
        let big = recycler.wrap(vec![1; 64 * 1024]);
        drop(recycler);
        assert_eq!(big.len(), 64 * 1024);
    }
}
