//! The socket-per-core option (`Spread::ReusePort`): N UDP sockets bound
//! to one port with `SO_REUSEPORT`, one per shard. The kernel picks a
//! socket by hashing each datagram's addresses, so one peer always lands on
//! the same shard: this spreads *peers* over cores (many clients), not one
//! peer's messages, and needs no dispatcher thread.
//!
//! These sockets are opened here with `socket2` and used through
//! `std::net::UdpSocket` (one datagram per system call, no GRO/GSO):
//! `smt_udp::Socket` cannot bind with `SO_REUSEPORT` yet. Moving the option
//! into `smt_udp::SocketConfig` would give these shards batching too.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Type};

use super::inbox::Batch;
use super::shard::{Shard, ShardStats};
use super::tx::Wire;
use crate::wait::WakeFd;
use crate::SocketConfig;

/// Datagrams read per turn before the shard answers what they completed.
const RECV_PER_TURN: usize = 64;

/// Longest sleep before the shard looks at the closing flag again.
const CLOSE_POLL: Duration = Duration::from_millis(50);

/// `n` non-blocking UDP sockets sharing `addr`'s port (port 0: the first
/// one picks a free port and the others join it).
pub(crate) fn bind_group(
    addr: SocketAddr,
    n: usize,
    config: &SocketConfig,
) -> io::Result<Vec<UdpSocket>> {
    let mut addr = addr;
    let mut sockets = Vec::with_capacity(n);
    for _ in 0..n {
        let s = socket2::Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
        s.set_reuse_port(true)?;
        if addr.is_ipv6() {
            s.set_only_v6(true)?;
        }
        s.bind(&addr.into())?;
        s.set_nonblocking(true)?;
        if let Err(e) = smt_udp::size_buffers(&s, config.recv_buffer(), config.send_buffer()) {
            tracing::debug!("socket buffers not resized: {e}");
        }
        let socket: UdpSocket = s.into();
        addr = socket.local_addr()?;
        sockets.push(socket);
    }
    Ok(sockets)
}

impl Shard {
    /// Runs on the shard's own socket until `closing` is set (and `wake`
    /// fired). Commands still come through the inbox.
    pub(crate) fn run_own_socket(
        mut self,
        socket: UdpSocket,
        wake: Arc<WakeFd>,
        closing: Arc<AtomicBool>,
    ) -> ShardStats {
        let mut buf = vec![0u8; 1 << 16];
        // What one turn read, handed to the core as one admission batch.
        let mut batch = Batch::default();
        let mut requests = 0;
        while !closing.load(Ordering::Relaxed) {
            let now = Instant::now();
            let deadline = self.core.poll_timeout();
            let timeout = deadline
                .map_or(CLOSE_POLL, |d| d.saturating_duration_since(now))
                .min(CLOSE_POLL);
            let _ = crate::wait::wait(socket.as_fd(), false, Some(wake.fd()), Some(timeout));
            wake.drain();
            let now = Instant::now();
            while let Ok(m) = self.inbox.try_recv() {
                self.take(now, m);
            }
            read_turn(&socket, &mut buf, &mut batch);
            self.core.handle_batch(now, batch.iter());
            batch.clear();
            if deadline.is_some_and(|d| now >= d) {
                self.core.handle_timeout(now);
            }
            requests += self.serve(now);
            self.tx.transmit(&mut self.core, &self.wire, now);
        }
        self.stats(requests)
    }
}

/// Reads up to [`RECV_PER_TURN`] datagrams into `batch`.
fn read_turn(socket: &UdpSocket, buf: &mut [u8], batch: &mut Batch) {
    for _ in 0..RECV_PER_TURN {
        match socket.recv_from(buf) {
            Ok((n, from)) => batch.push(from, &buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // An ICMP error for something this shard sent: a server
            // has no calls to fail.
            Err(e) => tracing::debug!("worker socket receive error: {e}"),
        }
    }
}

/// A clone of `socket` for sending, so receiving and sending each own one.
pub(crate) fn sender(socket: &UdpSocket) -> io::Result<Wire> {
    Ok(Wire::Own(socket.try_clone()?))
}
