//! Datagrams gathered for one GSO send: same destination, equal sizes
//! except possibly the last, at most [`MAX_GSO_PAYLOAD`] bytes, so a batch
//! is always one all-or-nothing system call ([`crate::Socket::send`]).
//!
//! The writer (a protocol core's `poll_transmit`) writes each datagram
//! straight into [`GsoBatch::free_space`], after the batch (no copy
//! through a scratch buffer), then [`GsoBatch::commit`]s it if it
//! [`GsoBatch::fits`]; a datagram that does not fit stays written there
//! while the batch is sent and cleared, then [`GsoBatch::restart_with`]
//! (given where it was written, [`GsoBatch::written_at`]) makes it the
//! first of the next batch. A batch that no datagram of its size can join
//! ([`GsoBatch::is_full`]) is sent before the next one is written, which
//! spares that copy.

use std::net::SocketAddr;

/// Largest UDP payload one GSO `sendmsg` may carry: an IPv4 packet's
/// 65 535 bytes less 20 of IP header and 8 of UDP header. IPv6 would
/// allow 20 bytes more; one limit keeps it simple.
pub const MAX_GSO_PAYLOAD: usize = 65_507;

/// A GSO batch being filled.
#[derive(Debug)]
pub struct GsoBatch {
    /// `used` bytes of datagrams, then room for one more datagram.
    buf: Vec<u8>,
    used: usize,
    max_datagram: usize,
    dest: Option<SocketAddr>,
    segment: usize,
    count: usize,
    max_segments: usize,
    last_short: bool,
}

impl GsoBatch {
    /// An empty batch of at most `max_segments` datagrams (at least 1) of
    /// at most `max_datagram` bytes each.
    pub fn new(max_segments: usize, max_datagram: usize) -> Self {
        Self {
            buf: vec![0; MAX_GSO_PAYLOAD + max_datagram],
            used: 0,
            max_datagram,
            dest: None,
            segment: 0,
            count: 0,
            max_segments: max_segments.max(1),
            last_short: false,
        }
    }

    /// Where the next datagram is written: `max_datagram` bytes.
    pub fn free_space(&mut self) -> &mut [u8] {
        &mut self.buf[self.used..self.used + self.max_datagram]
    }

    /// The `len` bytes written at `at` ([`GsoBatch::written_at`]) and not
    /// committed.
    pub fn written(&self, at: usize, len: usize) -> &[u8] {
        &self.buf[at..at + len]
    }

    /// Whether `len` bytes to `dest` can join the batch.
    pub fn fits(&self, dest: SocketAddr, len: usize) -> bool {
        self.count == 0
            || (self.dest == Some(dest)
                && !self.last_short
                && len <= self.segment
                && self.count < self.max_segments
                && self.used + len <= MAX_GSO_PAYLOAD)
    }

    /// Whether no datagram of the batch's segment size can join it any
    /// more (the segment count or the GSO payload limit is reached, or a
    /// short datagram ended it). The writer sends it before writing the
    /// next datagram: written after a full batch, that datagram would be
    /// moved to the front once the batch left ([`GsoBatch::restart_with`]),
    /// a copy of a whole datagram, 64 KiB at loopback's MTU, where every
    /// batch is one datagram.
    pub fn is_full(&self) -> bool {
        self.count > 0
            && (self.last_short
                || self.count >= self.max_segments
                || self.used + self.segment > MAX_GSO_PAYLOAD)
    }

    /// Adds the `len` bytes written into [`GsoBatch::free_space`] to the
    /// batch. A shorter datagram than the first ends it for GSO.
    pub fn commit(&mut self, dest: SocketAddr, len: usize) {
        if self.count == 0 {
            self.dest = Some(dest);
            self.segment = len;
        }
        self.last_short = len < self.segment;
        self.used += len;
        self.count += 1;
    }

    /// Copies a datagram in and commits it (one held back while the
    /// socket was full).
    pub fn push(&mut self, dest: SocketAddr, datagram: &[u8]) {
        self.free_space()[..datagram.len()].copy_from_slice(datagram);
        self.commit(dest, datagram.len());
    }

    /// Where the next datagram is written in the buffer: to keep before
    /// the batch is sent (sending clears the batch, and the next free
    /// space starts at 0 again).
    pub fn written_at(&self) -> usize {
        self.used
    }

    /// Empties the batch (if it was not already) and makes the `len` bytes
    /// written at `at` (see [`GsoBatch::written_at`]), which did not fit,
    /// its first datagram, to `dest`.
    pub fn restart_with(&mut self, at: usize, dest: SocketAddr, len: usize) {
        self.clear();
        self.buf.copy_within(at..at + len, 0);
        self.commit(dest, len);
    }

    /// The batch's datagrams, back to back; where they go; and the size
    /// of each (the last may be shorter). `None` while empty.
    pub fn gathered(&self) -> Option<(SocketAddr, &[u8], usize)> {
        let dest = self.dest.filter(|_| self.count > 0)?;
        Some((dest, &self.buf[..self.used], self.segment))
    }

    /// Datagrams in the batch.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the batch holds no datagram.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Empties the batch, keeping its buffer.
    pub fn clear(&mut self) {
        self.used = 0;
        self.dest = None;
        self.count = 0;
        self.last_short = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn write(b: &mut GsoBatch, byte: u8, len: usize) {
        b.free_space()[..len].fill(byte);
    }

    #[test]
    fn equal_datagrams_to_one_place_share_a_batch_until_a_short_one() {
        let mut b = GsoBatch::new(8, 100);
        for _ in 0..3 {
            write(&mut b, 1, 100);
            assert!(b.fits(to(1), 100));
            b.commit(to(1), 100);
        }
        write(&mut b, 2, 40);
        assert!(b.fits(to(1), 40), "a shorter last datagram joins");
        b.commit(to(1), 40);
        assert!(!b.fits(to(1), 40), "nothing joins after a short one");
        let (dest, bytes, segment) = b.gathered().unwrap();
        assert_eq!((dest, bytes.len(), segment), (to(1), 340, 100));
        assert_eq!(b.len(), 4);
    }

    #[test]
    fn another_destination_a_longer_datagram_or_a_full_batch_does_not_fit() {
        let mut b = GsoBatch::new(2, 100);
        write(&mut b, 1, 50);
        b.commit(to(1), 50);
        assert!(!b.fits(to(2), 50), "another destination");
        assert!(!b.fits(to(1), 60), "longer than the segment");
        b.commit(to(1), 50);
        assert!(!b.fits(to(1), 50), "max_segments reached");
    }

    #[test]
    fn a_batch_is_full_when_no_datagram_of_its_size_can_join() {
        let mut b = GsoBatch::new(64, MAX_GSO_PAYLOAD);
        assert!(!b.is_full(), "empty");
        b.commit(to(1), MAX_GSO_PAYLOAD);
        assert!(b.is_full(), "one datagram of the largest size fills it");
        b.clear();
        b.commit(to(1), 1472);
        assert!(!b.is_full());
        while !b.is_full() {
            assert!(b.fits(to(1), 1472), "not full, yet it refuses a segment");
            b.commit(to(1), 1472);
        }
        assert_eq!(b.len(), MAX_GSO_PAYLOAD / 1472);
        assert!(!b.fits(to(1), 1472));
        let mut short = GsoBatch::new(64, 1500);
        short.commit(to(1), 1000);
        short.commit(to(1), 10);
        assert!(short.is_full(), "a short datagram ends the batch");
        let mut counted = GsoBatch::new(2, 1500);
        counted.commit(to(1), 100);
        counted.commit(to(1), 100);
        assert!(counted.is_full(), "max_segments reached");
    }

    #[test]
    fn a_batch_never_exceeds_the_gso_payload_limit() {
        let mut b = GsoBatch::new(usize::MAX, 1500);
        let mut n = 0;
        while b.fits(to(1), 1500) {
            b.commit(to(1), 1500);
            n += 1;
        }
        assert_eq!(n, MAX_GSO_PAYLOAD / 1500);
        assert!(b.gathered().unwrap().1.len() <= MAX_GSO_PAYLOAD);
    }

    #[test]
    fn a_datagram_that_did_not_fit_starts_the_next_batch() {
        let mut b = GsoBatch::new(8, 100);
        write(&mut b, 1, 100);
        b.commit(to(1), 100);
        write(&mut b, 7, 30);
        assert!(!b.fits(to(2), 30));
        let at = b.written_at();
        assert_eq!(b.written(at, 30), &[7; 30][..]);
        b.clear(); // the batch was sent
        b.restart_with(at, to(2), 30);
        let (dest, bytes, segment) = b.gathered().unwrap();
        assert_eq!((dest, bytes, segment), (to(2), &[7u8; 30][..], 30));
        b.clear();
        assert!(b.is_empty() && b.gathered().is_none());
    }
}
