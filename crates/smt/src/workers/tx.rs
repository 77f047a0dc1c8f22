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
use smt_udp::{GsoBatch, Socket};

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

/// A GSO batch being filled (the same batch as the engine's, `smt_udp`).
#[derive(Debug)]
pub(crate) struct Tx {
    batch: GsoBatch,
    /// Datagrams given up on a send error or a socket full for too long.
    pub lost: u64,
}

impl Tx {
    pub fn new(wire: &Wire, max_datagram: usize) -> Self {
        Self {
            batch: GsoBatch::new(wire.max_segments(), max_datagram),
            lost: 0,
        }
    }

    /// Drains `core`'s datagrams onto `socket`. Bounded by what the core
    /// has to send; may sleep up to [`FULL_SOCKET_WAIT`] per full batch.
    pub fn transmit(&mut self, core: &mut Core, socket: &Wire, now: Instant) {
        while let Some(t) = core.poll_transmit(now, self.batch.free_space()) {
            if self.batch.fits(t.destination, t.len) {
                self.batch.commit(t.destination, t.len);
                continue;
            }
            // Send the batch (the datagram written after it stays put),
            // then start the next one with it.
            let at = self.batch.written_at();
            self.flush(socket);
            self.batch.restart_with(at, t.destination, t.len);
        }
        self.flush(socket);
    }

    /// Sends the batch, waiting a little for room in a full socket.
    fn flush(&mut self, socket: &Wire) {
        let Some((dest, datagrams, segment)) = self.batch.gathered() else {
            return;
        };
        let deadline = Instant::now() + FULL_SOCKET_WAIT;
        let result = loop {
            match socket.send(dest, datagrams, segment) {
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
            let count = self.batch.len();
            tracing::debug!(%dest, "worker send failed, {count} datagrams lost: {e}");
            self.lost += count as u64;
        }
        self.batch.clear();
    }
}
