//! A shard's datagrams out of its core and onto the socket it shares with
//! the other shards, coalesced into GSO batches (same destination, same
//! size, the last one possibly shorter), as the engine's `io.rs` does for
//! a single endpoint.
//!
//! Several shards send on one socket at once: each `sendmsg` is atomic in
//! the kernel, so their batches interleave whole and need no lock.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smt_proto::Endpoint as Core;
use smt_udp::Socket;

/// The socket a shard sends on.
#[derive(Debug)]
pub(crate) enum Wire {
    /// The server's one socket, shared with the dispatcher and the other
    /// shards (GSO batches).
    Shared(Arc<Socket>),
    /// The shard's own `SO_REUSEPORT` socket (`reuseport.rs`): one
    /// datagram per system call, since `smt_udp` cannot open such a socket
    /// yet.
    Own(UdpSocket),
}

impl Wire {
    fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Self::Shared(s) => s.as_fd(),
            Self::Own(s) => s.as_fd(),
        }
    }

    /// Largest number of datagrams one call may carry.
    fn max_segments(&self) -> usize {
        match self {
            Self::Shared(s) => s.features().gso_max_segments,
            Self::Own(_) => 1,
        }
    }

    fn send(&self, dest: SocketAddr, contents: &[u8], segment: usize) -> io::Result<()> {
        match self {
            Self::Shared(s) => s.send(dest, contents, segment),
            Self::Own(s) => s.send_to(contents, dest).map(drop),
        }
    }
}

/// How long a shard waits for room in a full socket buffer before it gives
/// the batch up (the protocol retransmits what was lost).
const FULL_SOCKET_WAIT: Duration = Duration::from_millis(20);

/// Largest payload of one GSO call (an IPv4 datagram less its headers).
const MAX_GSO_BYTES: usize = 65_507;

/// A GSO batch being filled.
#[derive(Debug)]
pub(crate) struct Tx {
    buf: Vec<u8>,
    used: usize,
    dest: Option<SocketAddr>,
    segment: usize,
    count: usize,
    max_segments: usize,
    max_datagram: usize,
    /// Datagrams given up on a send error or a socket full for too long.
    pub lost: u64,
}

impl Tx {
    pub fn new(wire: &Wire, max_datagram: usize) -> Self {
        let max_segments = wire
            .max_segments()
            .clamp(1, (MAX_GSO_BYTES / max_datagram).max(1));
        Self {
            buf: vec![0; max_segments * max_datagram],
            used: 0,
            dest: None,
            segment: 0,
            count: 0,
            max_segments,
            max_datagram,
            lost: 0,
        }
    }

    /// Drains `core`'s datagrams onto `socket`. Bounded by what the core
    /// has to send; may sleep up to [`FULL_SOCKET_WAIT`] per full batch.
    pub fn transmit(&mut self, core: &mut Core, socket: &Wire, now: Instant) {
        loop {
            if self.used + self.max_datagram > self.buf.len() {
                // No room for another whole datagram: the batch is full.
                self.flush(socket);
            }
            let free = &mut self.buf[self.used..self.used + self.max_datagram];
            let Some(t) = core.poll_transmit(now, free) else {
                break;
            };
            if !self.fits(t.destination, t.len) {
                // Move the datagram aside, send the batch, start anew.
                let start = self.used;
                self.flush(socket);
                self.buf.copy_within(start..start + t.len, 0);
            }
            self.commit(t.destination, t.len);
        }
        self.flush(socket);
    }

    /// Whether a `len`-byte datagram to `dest` may join the batch just
    /// written behind it.
    fn fits(&self, dest: SocketAddr, len: usize) -> bool {
        self.count == 0
            || (self.dest == Some(dest)
                && len <= self.segment
                && self.used == self.count * self.segment
                && self.count < self.max_segments
                && self.used + self.max_datagram <= self.buf.len())
    }

    fn commit(&mut self, dest: SocketAddr, len: usize) {
        if self.count == 0 {
            self.dest = Some(dest);
            self.segment = len;
        }
        self.used += len;
        self.count += 1;
        // A shorter datagram ends the batch for GSO: later ones won't fit
        // (`used` is no longer a multiple of `segment`).
    }

    /// Sends the batch, waiting a little for room in a full socket.
    fn flush(&mut self, socket: &Wire) {
        let Some(dest) = self.dest else {
            return;
        };
        let deadline = Instant::now() + FULL_SOCKET_WAIT;
        let result = loop {
            match socket.send(dest, &self.buf[..self.used], self.segment) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                    let _ = crate::wait::wait(socket.fd(), true, None, Some(FULL_SOCKET_WAIT));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // The socket's pending ICMP report about an earlier
                // datagram, not this send's failure: send again.
                Err(e) if crate::io::is_icmp_report(&e) && Instant::now() < deadline => {}
                other => break other,
            }
        };
        if let Err(e) = result {
            tracing::debug!(%dest, "worker send failed, {} datagrams lost: {e}", self.count);
            self.lost += self.count as u64;
        }
        self.used = 0;
        self.count = 0;
        self.dest = None;
    }
}
