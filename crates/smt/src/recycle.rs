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
//!
//! Small messages take the other way: they are copied into a buffer of
//! their own length and the core's buffer goes straight back to its pool.
//! Handed over as it was, a 64-byte message cost two allocations, and two
//! frees when the application dropped it (the core's 264-byte class
//! buffer, the pool being empty, and the `Bytes` header a `Vec` whose
//! capacity exceeds its length needs); copied, it costs one, and its copy
//! is a few instructions.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;

use smt_proto::Endpoint as Core;

/// Buffers smaller than this are simply freed: the allocator serves them
/// from its free lists without touching the kernel, and a lock per small
/// message would cost more than it saves.
const MIN_RECYCLED: usize = 16 * 1024;

/// Messages up to this long are copied (see the module docs): one page.
/// Its copy (a few hundred instructions at most, in cache) costs about
/// what the allocation and free it saves do; longer ones are handed over.
const MAX_COPIED: usize = 4096;

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
    /// The delivered message `buf` as `Bytes`: a small one copied (and
    /// `buf` given back to `core`'s pool), a larger one without a copy,
    /// returning to this recycler on drop if it is large enough to be worth
    /// it.
    pub(crate) fn wrap(self: &Arc<Self>, core: &mut Core, buf: Vec<u8>) -> Bytes {
        if buf.len() <= MAX_COPIED {
            // Exactly its length: `Bytes` keeps it without a header of its
            // own.
            let copy = Bytes::from(buf.as_slice().to_vec());
            core.recycle(buf);
            return copy;
        }
        self.hand_over(buf)
    }

    /// `buf` as `Bytes` without a copy, returning here on drop if it is
    /// large enough to be worth it.
    fn hand_over(self: &Arc<Self>, buf: Vec<u8>) -> Bytes {
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

    fn core() -> Core {
        Core::new(smt_proto::Config::default()).unwrap()
    }

    #[test]
    fn large_buffers_come_back_and_small_ones_are_freed() {
        let recycler = Arc::new(Recycler::default());
        let big = recycler.hand_over(vec![7; 64 * 1024]);
        let small = recycler.hand_over(vec![7; 100]);
        assert_eq!(&big[..3], &[7, 7, 7]);
        drop((big, small));
        let waiting = recycler.waiting.lock().unwrap();
        assert_eq!(waiting.buffers.len(), 1);
        assert_eq!(waiting.buffers[0].capacity(), 64 * 1024);
    }

    #[test]
    fn a_buffer_outliving_its_endpoint_is_freed() {
        let recycler = Arc::new(Recycler::default());
        let big = recycler.wrap(&mut core(), vec![1; 64 * 1024]);
        drop(recycler);
        assert_eq!(big.len(), 64 * 1024);
    }

    #[test]
    fn small_messages_are_copied() {
        let recycler = Arc::new(Recycler::default());
        let mut core = core();
        let mut buf = Vec::with_capacity(264);
        buf.extend_from_slice(b"a small message");
        let original = buf.as_ptr();
        let bytes = recycler.wrap(&mut core, buf);
        assert_eq!(&bytes[..], b"a small message");
        assert_ne!(bytes.as_ptr(), original, "copied");
        let waiting = recycler.waiting.lock().unwrap();
        assert!(waiting.buffers.is_empty());
    }
}
