//! The socket side of the engine ([`crate::engine`]): receive batches into
//! the protocol core, drain its datagrams into GSO batches, and report send
//! errors once. Sleeping on the socket is not done here (see `wait.rs`).
//!
//! A worker shard's engine sends on a socket it shares with a dispatcher
//! that reads it ([`Io::sending_on`]): its batches arrive already routed
//! ([`Io::receive_routed`]) and go through the same admission.

use std::collections::HashSet;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use smt_proto::Endpoint as Core;
use smt_udp::{GsoBatch, Mode, RecvBuffers, Socket};

use super::receive_plan::ReceivePlan;
use crate::observe::CaptureTap;
use crate::offload::{Offload, OffloadConfig};

/// Receive batches handled per call before transmitting (fairness).
const RECV_BATCHES_PER_TURN: usize = 16;

/// The socket with its receive buffers and the pending GSO batch.
pub(crate) struct Io {
    /// `None` once closed ([`Io::close`]): the port is free again. Shared
    /// with the offload engine's transmit workers, which send on it.
    socket: Option<Arc<Socket>>,
    pub batch: GsoBatch,
    recv: RecvBuffers,
    raw: bool,
    /// The socket refused the pending batch; wait for it to be writable.
    pub blocked: bool,
    /// The last receive stopped at its batch limit with data left: go
    /// round again without sleeping (fairness, not readiness: the socket
    /// would report readable anyway).
    pub more_to_read: bool,
    /// How the next receive reads the socket, and what the last one left
    /// unknown (`receive_plan.rs`).
    pub plan: ReceivePlan,
    send_errors_seen: HashSet<io::ErrorKind>,
    /// Datagrams lost to send errors (the protocol retransmits them).
    pub send_lost: u64,
    /// Whether this side reads the socket (and its error queue). Not when
    /// a dispatcher shares it and reads it for several engines.
    reads_socket: bool,
    /// A datagram that could not join the batch the full socket refused.
    held: Option<(SocketAddr, Vec<u8>)>,
    /// ICMP errors may wait in the socket's error queue with nothing left
    /// to announce them (a send took the socket's error signal, or the
    /// last turn read its share and stopped): the next receive drains.
    errors_pending: bool,
    /// The NIC stand-in, with TLS offload on (`EndpointConfig::offload`).
    offload: Option<Offload>,
    /// Where every datagram sent and received is copied, with a capture
    /// on (`EndpointConfig::observe`); boxed: off, it is one pointer.
    capture: Option<Box<CaptureTap>>,
}

impl Io {
    /// The socket's side of the engine; with `offload`, its NIC stand-in
    /// too (transmit workers started on the socket).
    pub(super) fn new(
        socket: Socket,
        max_datagram: usize,
        offload: Option<&OffloadConfig>,
        capture: Option<CaptureTap>,
    ) -> io::Result<Self> {
        let socket = Arc::new(socket);
        let offload = offload
            .map(|c| Offload::start(socket.clone(), c, capture.clone()))
            .transpose()?;
        let features = socket.features();
        Ok(Self {
            batch: GsoBatch::new(features.gso_max_segments, max_datagram),
            recv: RecvBuffers::new(features),
            raw: matches!(features.mode, Mode::RawIp { .. }),
            blocked: false,
            more_to_read: false,
            plan: ReceivePlan::default(),
            send_errors_seen: HashSet::new(),
            send_lost: 0,
            reads_socket: true,
            held: None,
            errors_pending: false,
            offload,
            capture: capture.map(Box::new),
            socket: Some(socket),
        })
    }

    /// Sends on `socket`, which a dispatcher reads for several engines (a
    /// worker shard's): datagrams arrive through [`Io::receive_routed`],
    /// and the socket's ICMP reports are the dispatcher's to read.
    pub(super) fn sending_on(socket: Arc<Socket>, max_datagram: usize) -> Self {
        let features = socket.features();
        Self {
            batch: GsoBatch::new(features.gso_max_segments, max_datagram),
            recv: RecvBuffers::new(features),
            raw: false,
            blocked: false,
            more_to_read: false,
            plan: ReceivePlan::default(),
            send_errors_seen: HashSet::new(),
            send_lost: 0,
            reads_socket: false,
            held: None,
            errors_pending: false,
            offload: None,
            capture: None,
            socket: Some(socket),
        }
    }

    /// The socket, unless closed.
    pub(super) fn socket(&self) -> Option<&Socket> {
        self.socket.as_deref()
    }

    /// The offload engine's counters, with offload on.
    #[cfg(feature = "offload")]
    pub(super) fn offload_counters(&mut self) -> Option<crate::offload::OffloadCounters> {
        self.offload.as_mut().map(Offload::counters)
    }

    /// Closes the socket (freeing its port) and drops what waited to be
    /// sent; receiving and transmitting do nothing afterwards. The offload
    /// engine's workers finish what they hold first.
    pub(super) fn close(&mut self) {
        self.offload = None;
        self.socket = None;
        self.batch.clear();
        self.held = None;
    }

    /// Reads up to [`RECV_BATCHES_PER_TURN`] batches into `core`, after
    /// the ICMP errors queued for the socket if any are known to wait; or,
    /// in a ping-pong with a level-triggered waiter, one datagram, leaving
    /// "more?" to the wait ([`ReceivePlan`]).
    ///
    /// Each batch is handed to the core with the time `clock` gives right
    /// after the batch was read, never a time read before: a datagram may
    /// arrive between the two, and what it causes (its trace events, its
    /// capture frame) would then be stamped before its sender's `sent`.
    /// Returns the last time read, if any.
    pub(super) fn receive(
        &mut self,
        core: &mut Core,
        clock: impl Fn() -> Instant,
    ) -> Option<Instant> {
        self.more_to_read = false;
        let socket = self.socket.as_ref().filter(|_| self.reads_socket)?;
        let mut last = None;
        if self.errors_pending {
            let now = *last.insert(clock());
            self.errors_pending = report_unreachable(socket, core, now) == Errors::More;
        }
        self.more_to_read = true;
        let one = self.plan.one_datagram();
        let mut datagrams = 0;
        for _ in 0..RECV_BATCHES_PER_TURN {
            let received = match one {
                true => socket.recv_one(&mut self.recv),
                false => socket.recv(&mut self.recv),
            };
            match received {
                Ok(n) => datagrams += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.more_to_read = false;
                    self.plan.drained(datagrams);
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // An ICMP error (port or host unreachable) for a
                    // datagram we sent surfaces here once; the socket
                    // queued the details (IP_RECVERR).
                    tracing::debug!("recv error: {e}");
                    let now = *last.insert(clock());
                    self.errors_pending = report_unreachable(socket, core, now) == Errors::More;
                    continue;
                }
            }
            let now = *last.insert(clock());
            let (raw, local_port) = (self.raw, core.config().local_port);
            let batch = self.recv.iter().filter_map(move |(from, datagram)| {
                if !raw {
                    return Some((from, datagram));
                }
                // A raw socket sees every SMT packet to this host,
                // including other endpoints' (and its own outgoing ones on
                // loopback): keep only those for our SMT port.
                addressed_to(datagram, local_port)
                    .then(|| (with_smt_source_port(from, datagram), datagram))
            });
            deliver(&self.capture, &mut self.offload, core, now, batch);
            if !self.recv.was_full() {
                // Drained: no need for the empty receive that would say so.
                self.more_to_read = false;
                self.plan.drained(datagrams);
                break;
            }
            if one {
                // One datagram taken, whether more wait is not known: the
                // driver's level-triggered wait tells, at once if they do.
                self.more_to_read = false;
                self.plan.took_one(datagrams);
                break;
            }
            self.plan.filled();
        }
        // Errors left for the next turn: it comes without sleeping (the
        // queue takes room from the receive buffer, and no new signal may
        // announce what is already queued).
        self.more_to_read |= self.errors_pending;
        last
    }

    /// Hands `core` one batch that someone else read from the socket (a
    /// worker shard's share of a receive call, `workers/dispatch.rs`),
    /// through the same admission as [`Io::receive`]'s.
    pub(super) fn receive_routed<'a, I>(&mut self, core: &mut Core, now: Instant, batch: I)
    where
        I: Iterator<Item = (SocketAddr, &'a [u8])> + Clone,
    {
        deliver(&self.capture, &mut self.offload, core, now, batch);
    }

    /// The socket polled as failed (`POLLERR`): its error queue holds
    /// something; the next receive reads it.
    pub(super) fn socket_failed(&mut self) {
        self.errors_pending = true;
    }

    /// Whether datagrams wait for room in the socket.
    pub(super) fn has_pending(&self) -> bool {
        !self.batch.is_empty() || self.held.is_some()
    }

    /// Drains the core's datagrams, coalescing them into GSO batches, and
    /// reports a send error (the protocol retransmits what was lost).
    pub(super) fn transmit(&mut self, core: &mut Core, now: Instant) {
        let result = self.try_transmit(core, now);
        if let Some(nic) = &mut self.offload {
            // One doorbell for everything this turn handed the NIC.
            nic.ring();
        }
        if let Err(e) = result {
            self.report_send_error(&e);
        }
    }

    fn try_transmit(&mut self, core: &mut Core, now: Instant) -> io::Result<()> {
        if self.blocked || (!self.batch.is_empty() && !self.flush(now)?) {
            return Ok(());
        }
        if let Some((dest, datagram)) = self.held.take() {
            self.batch.push(dest, &datagram);
        }
        loop {
            // A full batch leaves before the next datagram is written:
            // written after it, that datagram would be moved to the front
            // (`restart_with`), a 64 KiB copy per datagram at loopback's
            // MTU, where each batch is one datagram.
            if self.batch.is_full() && !self.flush(now)? {
                return Ok(());
            }
            let Some(t) = core.poll_transmit(now, self.batch.free_space()) else {
                break;
            };
            if let Some(nic) = &mut self.offload {
                // DATA for the NIC to seal leaves through its queues.
                if nic.take(core, &self.batch.free_space()[..t.len]) {
                    continue;
                }
            }
            if self.batch.fits(t.destination, t.len) {
                self.batch.commit(t.destination, t.len);
                continue;
            }
            // Another destination or size: the batch before it leaves
            // first, then the datagram moves to the front of the buffer.
            // (`flush` leaves the bytes written after the batch alone.)
            let at = self.batch.written_at();
            let flushed = self.flush(now);
            if !matches!(flushed, Ok(true)) {
                // The socket is full (or failed): keep the datagram aside.
                let datagram = self.batch.written(at, t.len).to_vec();
                self.held = Some((t.destination, datagram));
                return flushed.map(|_| ());
            }
            self.batch.restart_with(at, t.destination, t.len);
        }
        if !self.batch.is_empty() {
            self.flush(now)?;
        }
        Ok(())
    }

    /// Sends the batch; returns false if the socket buffer is full (the
    /// batch is kept and retried once the socket is writable).
    fn flush(&mut self, now: Instant) -> io::Result<bool> {
        let (Some((dest, datagrams, segment)), Some(socket)) =
            (self.batch.gathered(), &self.socket)
        else {
            self.batch.clear();
            return Ok(true);
        };
        let mut result = socket.send(dest, datagrams, segment);
        for _ in 0..SEND_ATTEMPTS_AFTER_ICMP {
            match &result {
                Err(e) if is_icmp_report(e) => {
                    // The error is the socket's, not this send's: an ICMP
                    // report about an earlier datagram (to anyone), handed
                    // to the first call that looked. Its details wait in
                    // the error queue (for whoever reads the socket); this
                    // batch was not sent: try again.
                    self.errors_pending = self.reads_socket;
                    self.more_to_read |= self.reads_socket;
                    result = socket.send(dest, datagrams, segment);
                }
                _ => break,
            }
        }
        match result {
            Ok(()) => {
                if let Some(tap) = &self.capture {
                    tap.sent(now, dest, datagrams, segment);
                }
                self.batch.clear();
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.blocked = true;
                Ok(false)
            }
            Err(e) => {
                // The datagrams are lost; the protocol retransmits what
                // matters.
                self.send_lost += self.batch.len() as u64;
                self.batch.clear();
                Err(e)
            }
        }
    }

    /// Send errors lose datagrams the protocol will retransmit; say so once
    /// per kind at warning level (with the fix when there is one), then at
    /// debug level.
    fn report_send_error(&mut self, e: &io::Error) {
        if self.send_errors_seen.insert(e.kind()) {
            if e.raw_os_error() == Some(libc::EMSGSIZE) {
                tracing::warn!("send failed: {e}: datagrams exceed the path MTU; lower EndpointConfig::mtu (--mtu)");
            } else {
                tracing::warn!("send failed: {e}");
            }
        } else {
            tracing::debug!("send failed: {e}");
        }
    }
}

/// Hands one received batch to `core`: validated peers' datagrams first,
/// the rest within a budget (`Core::handle_batch`), or through the NIC
/// stand-in with offload on; with a capture on, copied to it first.
fn deliver<'a, I>(
    capture: &Option<Box<CaptureTap>>,
    offload: &mut Option<Offload>,
    core: &mut Core,
    now: Instant,
    batch: I,
) where
    I: Iterator<Item = (SocketAddr, &'a [u8])> + Clone,
{
    if let Some(tap) = capture {
        for (from, datagram) in batch.clone() {
            tap.received(now, from, datagram);
        }
    }
    match offload {
        None => core.handle_batch(now, batch),
        Some(nic) => nic.receive(core, now, batch),
    }
}

/// In raw-IP mode the kernel gives no ports: the peer's port is the SMT
/// header's source port (the first two bytes).
fn with_smt_source_port(mut from: SocketAddr, datagram: &[u8]) -> SocketAddr {
    if let [a, b, ..] = datagram {
        from.set_port(u16::from_be_bytes([*a, *b]));
    }
    from
}

/// Whether an SMT packet's destination port (bytes 2..4) is `port`.
fn addressed_to(datagram: &[u8], port: u16) -> bool {
    matches!(datagram, [_, _, a, b, ..] if u16::from_be_bytes([*a, *b]) == port)
}

/// ICMP reports read per turn at most: past it the rest wait for the next
/// turn, which comes without sleeping (`Io::errors_pending`).
const MAX_ERRORS_PER_TURN: usize = 256;

/// Sends tried again when the socket answers with an ICMP report meant for
/// an earlier datagram (each attempt takes one report off the socket).
const SEND_ATTEMPTS_AFTER_ICMP: usize = 4;

/// Whether a send or receive failed with the socket's pending ICMP report
/// (`IP_RECVERR`) rather than for its own reasons.
fn is_icmp_report(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::ECONNREFUSED
                | libc::EHOSTUNREACH
                | libc::ENETUNREACH
                | libc::EHOSTDOWN
                | libc::ENETDOWN
                | libc::ENONET
                | libc::EPROTO
                | libc::EACCES
        )
    )
}

/// Whether the error queue was emptied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Errors {
    Drained,
    More,
}

/// Hands the socket's queued ICMP errors to the core, at most
/// [`MAX_ERRORS_PER_TURN`] of them: calls to a peer that never answered
/// fail at once instead of timing out (`Core::peer_unreachable` decides; a
/// report about an address we never called, or one that has
/// authenticated, changes nothing but a counter).
fn report_unreachable(socket: &Socket, core: &mut Core, now: Instant) -> Errors {
    for _ in 0..MAX_ERRORS_PER_TURN {
        match socket.take_error() {
            Ok(Some((peer, error))) => {
                if core.peer_unreachable(now, peer) {
                    tracing::debug!(%peer, %error, "peer unreachable: its calls fail");
                }
            }
            Ok(None) => return Errors::Drained,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::debug!("reading the socket's error queue: {e}");
                return Errors::Drained;
            }
        }
    }
    Errors::More
}
