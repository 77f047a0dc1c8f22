//! Reassembly of the peer's handshake stream: bytes that arrive in order
//! go straight to the handshake; bytes ahead of the in-order point wait in
//! one window of `WINDOW` bytes past it, so what a handshake holds is
//! bounded by the window, however many, overlapping or duplicated chunks
//! the peer sends. (A map of chunks by offset, its predecessor, held each
//! datagram separately: about 4 GiB from one peer.)
//!
//! The window is a ring indexed by stream offset modulo `WINDOW`, with one
//! bit per byte saying whether it is filled. It is allocated when a byte
//! first arrives out of order and freed when none is left waiting.

use crate::error::DropReason;

/// Out-of-order handshake bytes buffered per peer: a flight of a few
/// dozen packets (a TLS ClientHello, a client's certificate chain and
/// Finished) fits. All handshakes' windows together are bounded too
/// (`MAX_REORDER_TOTAL`): a peer that sent one byte out of order once made
/// its handshake hold a 72 KiB window, and thousands of such handshakes
/// held hundreds of megabytes.
pub(super) const WINDOW: u32 = 32 * 1024;
/// What a window costs when allocated: its bytes and one bit each.
pub(super) const WINDOW_COST: usize = WINDOW as usize + WINDOW as usize / 8;
const BITS: usize = 64;

/// The receiving side of one handshake stream.
#[derive(Debug, Default)]
pub(super) struct Reassembly {
    /// Bytes of the peer's stream given to the handshake, in order.
    received: u32,
    /// Stream offset `o` in `[received, received + WINDOW)` is held at
    /// `ring[o % WINDOW]` when bit `o % WINDOW` of `filled` is set.
    ring: Vec<u8>,
    filled: Vec<u64>,
    /// Set bits in `filled`.
    waiting: usize,
}

impl Reassembly {
    /// Whether taking a chunk at `offset` would allocate the window (it is
    /// the first byte to wait for earlier ones).
    pub(super) fn would_allocate(&self, offset: u32) -> bool {
        self.ring.is_empty() && offset > self.received
    }

    /// Bytes given to the handshake so far (the cumulative ACK).
    pub(super) fn received(&self) -> u32 {
        self.received
    }

    /// Memory held for out-of-order bytes (the window, when allocated).
    pub(super) fn held_bytes(&self) -> usize {
        self.ring.len() + self.filled.len() * (BITS / 8)
    }

    /// Takes a chunk at stream offset `offset`; returns the bytes that are
    /// now in order, to give to the handshake. A chunk starting past the
    /// window is refused; the part of one that runs past it is dropped
    /// (the peer sends it again: it is not acknowledged).
    pub(super) fn take(&mut self, offset: u32, data: &[u8]) -> Result<Vec<u8>, DropReason> {
        let end = u64::from(offset) + data.len() as u64;
        if end <= u64::from(self.received) {
            return Ok(Vec::new()); // a copy of what we already have
        }
        if u64::from(offset) >= u64::from(self.received) + u64::from(WINDOW) {
            return Err(DropReason::Handshake);
        }
        if offset <= self.received {
            let fresh = &data[(self.received - offset) as usize..];
            return Ok(self.advance(fresh));
        }
        let room = (u64::from(self.received) + u64::from(WINDOW) - u64::from(offset)) as usize;
        self.store(offset, &data[..data.len().min(room)]);
        Ok(Vec::new())
    }

    /// Gives `fresh` (starting at `received`) to the handshake, with
    /// whatever waiting bytes it joins up with.
    fn advance(&mut self, fresh: &[u8]) -> Vec<u8> {
        let mut out = fresh.to_vec();
        if self.waiting > 0 {
            // Waiting bytes the fresh ones cover are superseded.
            let covered = fresh.len().min(WINDOW as usize);
            for i in 0..covered {
                self.clear(self.received.wrapping_add(i as u32));
            }
        }
        self.received = self.received.wrapping_add(fresh.len() as u32);
        while self.waiting > 0 && self.is_filled(self.received) {
            out.push(self.ring[slot(self.received)]);
            self.clear(self.received);
            self.received = self.received.wrapping_add(1);
        }
        if self.waiting == 0 {
            self.ring = Vec::new();
            self.filled = Vec::new();
        }
        out
    }

    /// Keeps `data` (at `offset`, inside the window) until the bytes
    /// before it arrive. A later copy of a byte replaces an earlier one.
    fn store(&mut self, offset: u32, data: &[u8]) {
        if self.ring.is_empty() {
            self.ring = vec![0; WINDOW as usize];
            self.filled = vec![0; WINDOW as usize / BITS];
        }
        for (i, &byte) in data.iter().enumerate() {
            let at = offset.wrapping_add(i as u32);
            self.ring[slot(at)] = byte;
            if !self.is_filled(at) {
                self.filled[slot(at) / BITS] |= bit(at);
                self.waiting += 1;
            }
        }
    }

    fn is_filled(&self, at: u32) -> bool {
        self.filled
            .get(slot(at) / BITS)
            .is_some_and(|w| w & bit(at) != 0)
    }

    fn clear(&mut self, at: u32) {
        if self.is_filled(at) {
            self.filled[slot(at) / BITS] &= !bit(at);
            self.waiting -= 1;
        }
    }
}

fn slot(at: u32) -> usize {
    (at % WINDOW) as usize
}

fn bit(at: u32) -> u64 {
    1 << (slot(at) % BITS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_bytes_pass_straight_through() {
        let mut r = Reassembly::default();
        assert_eq!(r.take(0, b"abc").unwrap(), b"abc");
        assert_eq!(r.take(3, b"de").unwrap(), b"de");
        assert_eq!(r.take(1, b"bcdef").unwrap(), b"f");
        assert_eq!(r.take(0, b"ab").unwrap(), b"");
        assert_eq!((r.received(), r.held_bytes()), (6, 0));
    }

    #[test]
    fn out_of_order_bytes_wait_then_join() {
        let mut r = Reassembly::default();
        assert_eq!(r.take(4, b"efg").unwrap(), b"");
        assert_eq!(r.take(2, b"cdef").unwrap(), b"");
        assert!(r.held_bytes() > 0);
        assert_eq!(r.take(0, b"ab").unwrap(), b"abcdefg");
        assert_eq!((r.received(), r.held_bytes()), (7, 0));
    }

    #[test]
    fn fresh_bytes_supersede_waiting_copies() {
        let mut r = Reassembly::default();
        assert_eq!(r.take(2, b"XY").unwrap(), b"");
        assert_eq!(r.take(0, b"abc").unwrap(), b"abcY");
        assert_eq!(r.take(4, b"e").unwrap(), b"e");
    }

    #[test]
    fn the_window_bounds_what_waits() {
        let mut r = Reassembly::default();
        let big = vec![7u8; 60_000];
        for k in 1..6000u32 {
            let _ = r.take(k, &big);
        }
        assert!(r.held_bytes() <= WINDOW as usize * 9 / 8);
        assert_eq!(r.take(WINDOW, b"z"), Err(DropReason::Handshake));
        let out = r.take(0, b"a").unwrap();
        assert_eq!(out.len(), WINDOW as usize);
        assert_eq!(r.held_bytes(), 0);
    }

    #[test]
    fn a_chunk_longer_than_the_window_in_order_is_taken_whole() {
        let mut r = Reassembly::default();
        let _ = r.take(10, b"w");
        let big = vec![1u8; 3 * WINDOW as usize];
        assert_eq!(r.take(0, &big).unwrap().len(), big.len());
        assert_eq!(r.held_bytes(), 0);
    }
}
