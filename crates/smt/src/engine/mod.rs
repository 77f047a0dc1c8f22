//! The engine: one endpoint's protocol core, socket, clock and
//! session-establishment policy, driven in turns by whichever thread holds
//! it. The API faces are thin layers over it: [`crate::LocalEndpoint`]
//! owns one, [`crate::Endpoint`] shares one between its callers behind a
//! lock, and each worker shard ([`crate::workers`]) owns one on its
//! thread.
//!
//! Call order (each call does bounded work and never sleeps; sleeping is
//! the face's business, on [`Engine::socket`] until [`Engine::deadline`]):
//!
//! 1. commands: [`Engine::call`], [`Engine::respond`], [`Engine::abandon`],
//!    [`Engine::cancel`], [`Engine::close`], setters;
//! 2. [`Engine::turn`]: receive (if the socket may hold datagrams) → expire
//!    timers → turn the core's events into outcomes (starting calls that
//!    waited for a handshake or a key epoch) → end calls past their
//!    deadline → transmit; [`Engine::flush`] transmits only;
//! 3. [`Engine::poll_outcome`]: replies to calls (by [`CallToken`]) and
//!    requests, in the order they completed.
//!
//! The clock is read from the [`Clock`] given at bind time: once at the
//! start of each command, and in a turn after each batch it receives (or
//! once, if it receives none), so that nothing is stamped with a time read
//! before the datagram that caused it arrived (`docs/observability.md`
//! § 6: across endpoints, time orders cause before effect).

mod calls;
mod clock;
mod credit;
mod identity;
mod io;
mod memory;
mod open;
mod outcome;
mod receive_plan;
mod sessions;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use smt_proto::{
    Endpoint as Core, Event, HandshakeError, KeyResolver, Payload, RpcError, RpcHandle, SendError,
    ServerRpcHandle, SessionKeys,
};
use smt_udp::{Features, Socket};

use self::calls::{Calls, Sent};
pub(crate) use self::clock::{Clock, SystemClock};
use self::credit::Load;
use self::identity::Identities;
use self::io::Io;
use self::open::{new_core, open};
pub(crate) use self::outcome::{CallToken, Outcome};
use self::sessions::{Parked, Sessions, Started};
use crate::observe::{CaptureTap, Framing};
use crate::recycle::Recycler;
use crate::stats::{PeerStats, Stats, Timing};
use crate::{CallOptions, EndpointConfig, Error};

/// Hash maps on the per-call path (calls, credit, identities): foldhash
/// with a per-process random key, as `smt-proto`'s per-packet maps. With
/// SipHash they cost ~2.7 k instructions per smt-kv YCSB operation, both
/// ends (`docs/benchmarks.md`).
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Longest a graceful close waits for in-flight RPCs.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Parked requests larger than this (in total) wait until the key
/// confirmation has left; smaller ones are copied in far less time than
/// the responder waits for it, and leave in the same flight.
const CONFIRM_FIRST_BYTES: usize = 256 * 1024;

/// The earlier of two optional instants (`None` is never).
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// One endpoint's state and socket. See the module docs for the call order.
pub(crate) struct Engine {
    core: Core,
    io: Io,
    clock: Box<dyn Clock>,
    sessions: Sessions,
    /// Each peer's current session as requests see it.
    identities: Identities,
    /// Every outstanding call: its RPC, its deadline.
    calls: Calls,
    /// Round trips, requests served and handler latency.
    timing: Timing,
    /// Calls waiting for a server's credit or to retry `Overloaded`, and
    /// the RPCs holding credit (`credit.rs`).
    load: Load,
    /// [`EndpointConfig::call_timeout`].
    call_timeout: Option<Duration>,
    outcomes: VecDeque<Outcome>,
    /// Large replies nobody took (a call given up on), for the driver to
    /// drop with the core's released buffers ([`Engine::take_discarded`]).
    discarded: Vec<Bytes>,
    /// Delivered buffers the application has dropped, for the core's pool.
    recycler: Arc<Recycler>,
    /// When a graceful close began.
    closing: Option<Instant>,
    /// The time the last flush or turn ran at ([`Engine::last_now`]).
    last_now: Instant,
    local_addr: SocketAddr,
    features: Features,
    /// Where the core's trace events go, with a trace on
    /// (`EndpointConfig::observe`).
    trace: Option<crate::observe::Trace>,
    /// Returning freed memory to the system after load.
    trim: memory::Trim,
}

impl Engine {
    /// Opens the socket and the protocol core for `addr`.
    pub(crate) fn bind(
        addr: SocketAddr,
        config: &EndpointConfig,
        clock: Box<dyn Clock>,
    ) -> Result<Self, Error> {
        // Refused before a socket is opened.
        config.validate(addr)?;
        let (socket, local_addr, core) = open(addr, config)?;
        let features = socket.features().clone();
        let max_datagram = core.config().max_datagram_size;
        let tap = config.observe().capture.clone().map(|capture| CaptureTap {
            capture,
            local: local_addr,
            framing: match config.socket().mode() {
                smt_udp::Mode::Udp => Framing::Udp,
                smt_udp::Mode::RawIp { protocol } => Framing::Ip(protocol),
            },
        });
        let io = Io::new(socket, max_datagram, config.offload(), tap).map_err(Error::Io)?;
        Ok(Self::assemble(
            core, io, features, local_addr, config, clock,
        ))
    }

    /// An engine sending on `socket`, which a dispatcher reads and shares
    /// with other engines (a worker shard, `crate::workers`): datagrams
    /// come in through [`Engine::receive_routed`], never from the socket.
    /// UDP only, without offload or capture (the caller checked).
    pub(crate) fn sending_on(
        socket: Arc<Socket>,
        config: &EndpointConfig,
        clock: Box<dyn Clock>,
    ) -> Result<Self, Error> {
        let local_addr = socket.local_addr()?;
        let features = socket.features().clone();
        let core = new_core(config.core_config(local_addr)?)?;
        let io = Io::sending_on(socket, core.config().max_datagram_size);
        Ok(Self::assemble(
            core, io, features, local_addr, config, clock,
        ))
    }

    fn assemble(
        mut core: Core,
        io: Io,
        features: Features,
        local_addr: SocketAddr,
        config: &EndpointConfig,
        clock: Box<dyn Clock>,
    ) -> Self {
        let trace = config.observe().trace.clone();
        core.set_tracing(trace.is_some());
        let last_now = clock.now();
        Self {
            io,
            core,
            clock,
            sessions: Sessions::new(),
            identities: Identities::default(),
            calls: Calls::new(config.max_outstanding_calls()),
            timing: Timing::default(),
            load: Load::new(),
            call_timeout: config.call_timeout(),
            outcomes: VecDeque::new(),
            discarded: Vec::new(),
            recycler: Arc::default(),
            closing: None,
            last_now,
            local_addr,
            features,
            trace,
            trim: memory::Trim::new(config.return_memory()),
        }
    }

    // ---- getters ----

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub(crate) fn features(&self) -> &Features {
        &self.features
    }

    /// The socket, to sleep on until it is readable (`None` once closed).
    pub(crate) fn socket(&self) -> Option<BorrowedFd<'_>> {
        self.io.socket().map(|s| s.as_fd())
    }

    /// The endpoint's counters with its `max_peers` busiest peers'
    /// (O(sessions) unless 0).
    pub(crate) fn stats(&self, max_peers: usize) -> Stats {
        crate::stats::snapshot(&self.core, &self.timing, max_peers)
    }

    /// `peer`'s session counters, if it has a session.
    pub(crate) fn peer_stats(&self, peer: SocketAddr) -> Option<PeerStats> {
        let stats = self.core.peer_stats(peer)?;
        Some(PeerStats::new(peer, &stats, &self.timing))
    }

    /// The offload engine's counters, with `EndpointConfig::offload`.
    #[cfg(feature = "offload")]
    pub(crate) fn offload_counters(&mut self) -> Option<crate::offload::OffloadCounters> {
        self.io.offload_counters()
    }

    /// Datagrams lost to send errors so far (the protocol retransmitted
    /// them).
    pub(crate) fn send_lost(&self) -> u64 {
        self.io.send_lost
    }

    /// Client and server RPCs in the core.
    pub(crate) fn in_flight(&self) -> (usize, usize) {
        (self.core.client_rpcs(), self.core.server_rpcs())
    }

    /// Whether calls wait for a handshake or a key epoch (someone must keep
    /// turning for them to leave).
    pub(crate) fn has_parked_calls(&self) -> bool {
        self.sessions.has_parked() || self.load.has_parked()
    }

    /// When [`Engine::turn`] must next run even if nothing arrives: the
    /// core's next timer, a call's deadline, or the end of a graceful
    /// close.
    /// Read before every sleep: compared one by one (an array of the five
    /// taken through an iterator cost ~130 instructions).
    pub(crate) fn deadline(&self) -> Option<Instant> {
        let mut next = self.core.poll_timeout();
        next = earliest(next, self.calls.next_deadline());
        next = earliest(next, self.load.next_retry());
        next = earliest(next, self.trim.deadline());
        if let Some(since) = self.closing {
            next = earliest(next, Some(since + CLOSE_GRACE));
        }
        next
    }

    /// The core's timer expiries by name (`LocalEndpoint::timer_counts`).
    pub(crate) fn timer_expiries(&self) -> [(&'static str, u64); 3] {
        self.core.timer_expiries()
    }

    /// Calls outstanding (sent, or waiting for a handshake or key epoch).
    pub(crate) fn outstanding_calls(&self) -> usize {
        self.calls.len()
    }

    /// Whether the last receive stopped with datagrams left: turn again
    /// before sleeping.
    pub(crate) fn more_to_read(&self) -> bool {
        self.io.more_to_read
    }

    /// Whether the driver's next sleep is a level-triggered wait (`ppoll`,
    /// which returns at once if datagrams wait): then a receive may take
    /// one datagram and leave "more?" to the wait ([`Engine::may_have_more`]).
    pub(crate) fn set_level_waits(&mut self, on: bool) {
        self.io.plan.set_level_waits(on);
    }

    /// Whether the last receive took one datagram without looking for
    /// more: a level-triggered wait answers; anything else turns again.
    pub(crate) fn may_have_more(&self) -> bool {
        self.io.plan.unsure()
    }

    /// Whether a batch waits for room in the socket: sleep on writability
    /// too.
    pub(crate) fn wants_writable(&self) -> bool {
        self.io.blocked
    }

    /// The socket reported room again.
    pub(crate) fn writable(&mut self) {
        self.io.blocked = false;
    }

    /// The socket polled as failed (`POLLERR`): ICMP reports wait in its
    /// error queue; the next turn reads them.
    pub(crate) fn socket_failed(&mut self) {
        self.io.socket_failed();
    }

    /// The protocol's housekeeping period.
    pub(crate) fn tick(&self) -> Duration {
        self.core.config().tick
    }

    pub(crate) fn now(&self) -> Instant {
        self.clock.now()
    }

    /// The time the last [`Engine::flush`] or [`Engine::turn`] ran at:
    /// for a driver's check right after one, without reading the clock.
    pub(crate) fn last_now(&self) -> Instant {
        self.last_now
    }

    // ---- commands ----

    pub(crate) fn install_session(
        &mut self,
        peer: SocketAddr,
        keys: SessionKeys,
    ) -> Result<(), Error> {
        self.core.install_session(peer, keys).map_err(Error::Send)?;
        self.identities.installed(peer);
        self.timing.session_started(peer);
        Ok(())
    }

    pub(crate) fn set_key_resolver(&mut self, resolver: Box<dyn KeyResolver>) {
        let resolver = self.identities.resolver(resolver);
        self.core.set_key_resolver(resolver);
    }

    pub(crate) fn set_handshake_acceptor(
        &mut self,
        acceptor: Box<dyn smt_proto::HandshakeAcceptor>,
    ) {
        let acceptor = self.identities.acceptor(acceptor);
        self.core.set_handshake_acceptor(acceptor);
    }

    pub(crate) fn set_tls_client(&mut self, client: smt_tls::TlsClient) {
        self.sessions.set_tls_client(client);
    }

    pub(crate) fn set_psk_client(&mut self, client: crate::keys::PskClient) {
        self.sessions.set_psk_client(client);
    }

    pub(crate) fn set_server_name(&mut self, peer: SocketAddr, name: smt_tls::ServerName<'static>) {
        self.sessions.set_server_name(peer, name);
    }

    pub(crate) fn set_zero_rtt_ticket(
        &mut self,
        peer: SocketAddr,
        ticket: smt_handshake::VerifiedTicket,
        forward_secrecy: bool,
    ) {
        self.sessions.set_ticket(peer, ticket, forward_secrecy);
    }

    /// Starts a call: its request is queued in the core, or the call waits
    /// for a handshake (started now if none runs with `peer`) or for a key
    /// epoch to drain. Nothing is transmitted. An error means the call did
    /// not start and no outcome will follow; so does a call beyond
    /// [`EndpointConfig::max_outstanding_calls`] ([`Error::TooManyCalls`]).
    pub(crate) fn call(
        &mut self,
        peer: SocketAddr,
        data: Payload<'_>,
        options: CallOptions,
    ) -> Result<CallToken, Error> {
        if self.closing.is_some() {
            return Err(Error::Closed);
        }
        if self.calls.full() {
            let max = self.calls.max();
            return Err(Error::TooManyCalls { max });
        }
        let now = self.clock.now();
        let timeout = options.timeout_or(self.call_timeout);
        let call = self
            .calls
            .open(now, peer, timeout, options.priority_value());
        let retries = options.overloaded_retries();
        if retries > 0 {
            self.load
                .allow_retries(call, peer, data.clone().into_bytes(), retries);
        }
        if let Err(e) = self.start(now, peer, call, data) {
            self.load.done(call);
            self.calls.end(call);
            return Err(e);
        }
        Ok(call)
    }

    /// Queues the response to `rpc`, delivered to the application at
    /// `delivered` (transmitted by the next turn or flush). A response
    /// that cannot be sent (too large, the client gone) is an error, and
    /// the request is abandoned: its client hears so at once instead of
    /// waiting for a response that will never come.
    pub(crate) fn respond(
        &mut self,
        rpc: ServerRpcHandle,
        data: Payload<'_>,
        delivered: Instant,
    ) -> Result<(), Error> {
        let now = self.clock.now();
        let sent = self.core.send_response(now, rpc, data);
        match &sent {
            Ok(()) => self.timing.served(now.saturating_duration_since(delivered)),
            Err(e) => {
                tracing::debug!(peer = %rpc.peer, id = rpc.id, "response not sent, request abandoned: {e}");
                self.abandon(rpc);
            }
        }
        sent.map_err(Error::Send)
    }

    /// Drops an unanswered request: its client's call fails at once with
    /// `RpcError::Abandoned`, and the request is never executed twice.
    pub(crate) fn abandon(&mut self, rpc: ServerRpcHandle) {
        self.core.abandon_request(rpc);
        self.timing.abandoned();
    }

    /// Gives up on a call; no outcome will report it. An RPC already sent
    /// is aborted in the core, which tells the server (RPC_UNKNOWN) so it
    /// stops working on it and sending its response.
    pub(crate) fn cancel(&mut self, call: CallToken) {
        self.end_call(call);
        // At most one reply per call.
        let queued = self
            .outcomes
            .iter()
            .position(|o| matches!(o, Outcome::Reply { call: c, .. } if *c == call));
        if let Some(Outcome::Reply { result, .. }) = queued.and_then(|i| self.outcomes.remove(i)) {
            self.discard(result);
        }
    }

    /// Lets go of a reply nobody takes: a large one waits for
    /// [`Engine::take_discarded`], so that a driver holding a lock frees
    /// it after releasing the lock, as it does the core's released buffers.
    pub(crate) fn discard(&mut self, result: Result<Bytes, Error>) {
        match result {
            Ok(data) if data.len() > Payload::POOLED_COPY_LIMIT => self.discarded.push(data),
            _ => {}
        }
    }

    /// Whether there are released buffers or discarded replies to take
    /// ([`Engine::take_released`], [`Engine::take_discarded`]).
    pub(crate) fn has_garbage(&self) -> bool {
        !self.discarded.is_empty() || self.core.has_released()
    }

    /// The large replies discarded since the last call (see
    /// [`Engine::discard`]).
    pub(crate) fn take_discarded(&mut self) -> Vec<Bytes> {
        std::mem::take(&mut self.discarded)
    }

    /// Begins a graceful close: new calls fail, new requests are dropped,
    /// in-flight RPCs get [`CLOSE_GRACE`] to finish (see
    /// [`Engine::finished_closing`]); acknowledgements waiting for their
    /// delay are queued now.
    pub(crate) fn close(&mut self) {
        let now = self.clock.now();
        if self.closing.is_none() {
            self.core.flush_acks();
        }
        self.closing.get_or_insert(now);
    }

    /// Queues the acknowledgements still waiting for their delay (the
    /// endpoint goes away: servers free the RPCs at once instead of
    /// waiting for ACKs that would never come); the next flush sends them.
    pub(crate) fn flush_acks(&mut self) {
        self.core.flush_acks();
    }

    pub(crate) fn is_closing(&self) -> bool {
        self.closing.is_some()
    }

    /// Whether a close may end now: nothing is in flight or left to send,
    /// or the grace period is over.
    pub(crate) fn finished_closing(&self) -> bool {
        let Some(since) = self.closing else {
            return false;
        };
        let idle =
            self.core.client_rpcs() == 0 && self.core.server_rpcs() == 0 && !self.io.has_pending();
        idle || self.clock.now() >= since + CLOSE_GRACE
    }

    /// Closes the socket (its port is free again); nothing is received or
    /// sent afterwards.
    pub(crate) fn close_socket(&mut self) {
        self.io.close();
        self.drain_trace();
    }

    /// Ends every call still waiting with [`Error::Closed`].
    pub(crate) fn fail_all_calls(&mut self) {
        // Every parked call is also in `calls`: reported once, from there.
        self.sessions.drain();
        self.load.drain();
        let closed = self.calls.drain().into_iter().map(|call| Outcome::Reply {
            call,
            result: Err(Error::Closed),
        });
        self.outcomes.extend(closed);
    }

    // ---- turns ----

    /// Moves everything that is ready: receives (when `readable`, or when
    /// the last receive left datagrams), expires due timers, turns events
    /// into outcomes and transmits.
    pub(crate) fn turn(&mut self, readable: bool) {
        self.turn_since(readable, None);
    }

    /// [`Engine::flush`], then [`Engine::turn`]: what the owner queued
    /// leaves before the receive. The turn reads the clock only if it
    /// receives: without a datagram the flush's time, read a moment
    /// before, stamps what it does (one read of two saved per wait).
    pub(crate) fn flush_and_turn(&mut self, readable: bool) {
        let now = self.clock.now();
        self.dispatch(now);
        self.io.transmit(&mut self.core, now);
        self.drain_trace();
        self.turn_since(readable, Some(now));
    }

    /// A turn; `flushed` is when a flush just before it read the clock.
    fn turn_since(&mut self, readable: bool, flushed: Option<Instant>) {
        self.recycler.drain_into(&mut self.core);
        let received = if readable || self.io.more_to_read {
            let clock = &self.clock;
            self.io.receive(&mut self.core, || clock.now())
        } else {
            None
        };
        // Read after the receive, not before it: what this turn does
        // because of a datagram (a response, an ACK) is never stamped
        // before the datagram was sent.
        let now = received.or(flushed).unwrap_or_else(|| self.clock.now());
        self.last_now = now;
        // Timers wait while datagrams are still queued (an answer among
        // them is not the peer's silence), for a few ticks at most.
        let due = self.core.poll_timeout().is_some_and(|t| {
            let late = || now.checked_sub(4 * self.tick());
            t <= now && (!self.io.more_to_read || late().is_some_and(|late| t <= late))
        });
        if due {
            self.core.handle_timeout(now);
        }
        self.dispatch(now);
        self.retry_deferred(now);
        self.retry_overloaded(now);
        self.expire_calls(now);
        self.io.transmit(&mut self.core, now);
        self.drain_trace();
        self.trim.after_turn(now);
    }

    /// Hands the core one batch that a dispatcher read from the shared
    /// socket ([`Engine::sending_on`]), through the same admission as a
    /// receive of the engine's own; the next turn acts on it.
    pub(crate) fn receive_routed<'a, I>(&mut self, batch: I)
    where
        I: Iterator<Item = (SocketAddr, &'a [u8])> + Clone,
    {
        let now = self.clock.now();
        self.io.receive_routed(&mut self.core, now, batch);
    }

    /// Transmits what is queued, as far as grants and the socket allow.
    pub(crate) fn flush(&mut self) {
        let now = self.clock.now();
        self.last_now = now;
        self.dispatch(now);
        self.io.transmit(&mut self.core, now);
        self.drain_trace();
    }

    /// The next reply or request.
    pub(crate) fn poll_outcome(&mut self) -> Option<Outcome> {
        self.outcomes.pop_front()
    }

    /// From now on the core keeps the large buffers it is done with for
    /// [`Engine::take_released`] instead of freeing them in the call that
    /// finishes with them: for a driver that calls the engine under a lock
    /// and frees them after releasing it.
    pub(crate) fn collect_released(&mut self) {
        self.core.set_collect_released(true);
    }

    /// The large buffers the core released since the last call (see
    /// [`Engine::collect_released`]); dropping them frees them.
    pub(crate) fn take_released(&mut self) -> smt_proto::Released {
        self.core.take_released()
    }

    // ---- internals ----

    /// Hands the core's trace events to the trace's writer (with a trace
    /// on; otherwise one branch).
    fn drain_trace(&mut self) {
        let Some(trace) = &self.trace else {
            return;
        };
        let events: Vec<_> = std::iter::from_fn(|| self.core.poll_trace()).collect();
        if !events.is_empty() {
            trace.record(self.local_addr, events);
        }
    }

    /// Sends the call's request, or parks it, or says why it cannot start.
    fn start(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        call: CallToken,
        data: Payload<'_>,
    ) -> Result<(), Error> {
        if self.load.must_wait(peer, self.core.credit(peer)) {
            // Beyond the server's credit: wait for a place (`credit.rs`).
            let parked = Parked {
                call,
                data: data.into_bytes(),
            };
            self.load.wait(peer, parked);
            return Ok(());
        }
        self.send(now, peer, call, data)
    }

    /// Sends the call's request now (its credit allows), or parks it for
    /// keys, or says why it cannot start.
    fn send(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        call: CallToken,
        data: Payload<'_>,
    ) -> Result<(), Error> {
        // Cheap: a reference count for owned bytes; only a parked call
        // needs its own copy of borrowed ones.
        match self.core.send_request(now, peer, data.clone()) {
            Ok(rpc) => {
                if let Some(priority) = self.calls.sent(call, rpc) {
                    self.load.sent(peer);
                    // A new RPC carries priority 0: only another one is set.
                    if priority != 0 {
                        self.core.set_request_priority(rpc, priority);
                    }
                }
                Ok(())
            }
            Err(SendError::NoSession) if self.sessions.can_connect(peer) => {
                self.connect(now, peer, call, data)
            }
            Err(SendError::RekeyPending) => {
                let parked = Parked {
                    call,
                    data: data.into_bytes(),
                };
                self.sessions.defer(peer, parked);
                Ok(())
            }
            Err(e) => Err(Error::Send(e)),
        }
    }

    /// Parks a call until a handshake with `peer` (started now if none is
    /// running) installs keys.
    fn connect(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        call: CallToken,
        data: Payload<'_>,
    ) -> Result<(), Error> {
        let started = if self.core.is_connecting(peer) {
            Started::Later
        } else {
            self.sessions
                .start_handshake(&mut self.core, now, peer, self.local_addr)
                .map_err(Error::Handshake)?
        };
        let parked = Parked {
            call,
            data: data.into_bytes(),
        };
        self.sessions.wait_for_handshake(peer, parked);
        if started == Started::ZeroRtt {
            // The keys exist already, so the call leaves with the hello;
            // the pool is refilled off the hot path after.
            self.dispatch(now);
            self.sessions.refill_key_pool();
        }
        Ok(())
    }

    /// Turns the core's events into outcomes.
    fn dispatch(&mut self, now: Instant) {
        while let Some(event) = self.core.poll_event() {
            match event {
                Event::Response { rpc, data } => self.finish(now, rpc, Ok(data)),
                Event::Failed { rpc, error } => self.finish(now, rpc, Err(Error::Rpc(error))),
                Event::Request { rpc, data } => self.deliver_request(now, rpc, data),
                Event::Connected { peer } => {
                    self.identities.connected(peer);
                    self.handshake_succeeded(now, peer);
                }
                Event::HandshakeFailed { peer, error } => self.handshake_failed(peer, &error),
                Event::RequestCancelled { rpc } => {
                    self.outcomes.push_back(Outcome::Cancelled { rpc, at: now })
                }
                // Server-side handshakes need nothing from the engine.
                _ => {}
            }
        }
        self.release_waiting(now);
    }

    /// Sends the calls that waited for credit, as far as each peer's
    /// credit now allows (responses freed places, or a CREDIT raised it).
    fn release_waiting(&mut self, now: Instant) {
        if !self.load.has_parked() {
            return;
        }
        for peer in self.load.waiting_peers() {
            while let Some(parked) = self.load.next_ready(peer, self.core.credit(peer)) {
                let call = parked.call;
                if let Err(e) = self.send(now, peer, call, Payload::Owned(parked.data)) {
                    self.fail(call, e);
                }
            }
        }
    }

    /// Sends again the calls refused with `Overloaded` whose back-off
    /// has passed (`CallOptions::retry_overloaded`).
    fn retry_overloaded(&mut self, now: Instant) {
        while let Some((peer, parked)) = self.load.due_retry(now) {
            self.restart(now, peer, parked);
        }
    }

    /// Ends the call of `rpc` with `result` (one lookup in each table),
    /// unless it is retried after `Overloaded`.
    fn finish(&mut self, now: Instant, rpc: RpcHandle, result: Result<Vec<u8>, Error>) {
        if matches!(result, Err(Error::Rpc(RpcError::Overloaded))) && self.retry_later(rpc) {
            return;
        }
        let Some(done) = self.calls.finish_rpc(rpc) else {
            // Cancelled or timed out (its credit was freed then): nobody
            // wants the data, the pool does.
            if let Ok(data) = result {
                self.core.recycle(data);
            }
            return;
        };
        self.load.ended(done.peer);
        self.load.done(done.call);
        if result.is_ok() {
            let rtt = now.saturating_duration_since(done.opened);
            self.timing.call_completed(&self.core, done.peer, rtt);
        }
        let result = result.map(|data| self.recycler.wrap(&mut self.core, data));
        let call = done.call;
        self.outcomes.push_back(Outcome::Reply { call, result });
    }

    /// Whether the call of `rpc`, refused unexecuted, will be sent again
    /// after a back-off (it asked to be; attempts and deadline allow).
    fn retry_later(&mut self, rpc: RpcHandle) -> bool {
        let Some(call) = self.calls.call_of(rpc) else {
            return false;
        };
        let now = self.clock.now();
        let deadline = self.calls.deadline_of(call);
        if !self.load.retry(now, call, deadline) {
            return false;
        }
        if let Some(peer) = self.calls.unsend(rpc) {
            self.load.ended(peer);
        }
        true
    }

    fn deliver_request(&mut self, now: Instant, rpc: ServerRpcHandle, data: Vec<u8>) {
        if self.closing.is_some() {
            self.core.abandon_request(rpc);
            self.core.recycle(data);
            return;
        }
        let data = self.recycler.wrap(&mut self.core, data);
        let sessions = self.core.stats().usage.sessions as usize;
        let live = self.core.peers_stats().map(|(peer, _)| peer);
        self.identities.prune(sessions, live);
        let session = self.identities.for_request(rpc.peer);
        self.outcomes.push_back(Outcome::Request {
            rpc,
            data,
            session,
            at: now,
        });
    }

    /// Starts the calls that waited for keys with `peer`. Cold: kept out
    /// of `dispatch`, which runs twice per call and paid for its frame.
    #[cold]
    fn handshake_succeeded(&mut self, now: Instant, peer: SocketAddr) {
        let parked = self.sessions.handshake_ended(peer);
        let bytes: usize = parked.iter().map(|p| p.data.len()).sum();
        if bytes > CONFIRM_FIRST_BYTES {
            // The key confirmation leaves first: it validates our address
            // at a responder, which forgets an unvalidated session within
            // `handshake_abort_ticks`, and copying the parked calls'
            // requests (64 MiB or more) can take longer than that on a
            // busy machine.
            self.io.transmit(&mut self.core, now);
        }
        self.timing.session_started(peer);
        for parked in parked {
            self.restart(now, peer, parked);
        }
        // The requests leave in this turn, right behind the confirmation
        // (for 0-RTT: in the first flight, with the hello). Left to the
        // end of the driver's turn they waited for its next wake-up,
        // 85-800 µs on a loaded machine (docs/benchmarks.md, "The 0-RTT
        // tail").
        self.io.transmit(&mut self.core, now);
    }

    #[cold]
    fn handshake_failed(&mut self, peer: SocketAddr, error: &HandshakeError) {
        for parked in self.sessions.handshake_ended(peer) {
            self.fail(parked.call, Error::Handshake(error.clone()));
        }
    }

    /// Retries calls that waited for a key epoch to drain.
    fn retry_deferred(&mut self, now: Instant) {
        let Some(deferred) = self.sessions.take_deferred() else {
            return;
        };
        for (peer, parked) in deferred {
            self.restart(now, peer, parked);
        }
    }

    /// Starts a parked call; a failure is its outcome.
    fn restart(&mut self, now: Instant, peer: SocketAddr, parked: Parked) {
        if let Err(e) = self.start(now, peer, parked.call, Payload::Owned(parked.data)) {
            self.fail(parked.call, e);
        }
    }

    /// Ends a call with `error` as its outcome.
    fn fail(&mut self, call: CallToken, error: Error) {
        if self.calls.end(call).is_some() {
            self.outcomes.push_back(Outcome::Reply {
                call,
                result: Err(error),
            });
        }
    }

    /// Ends the calls whose deadline has passed with [`Error::Timeout`],
    /// aborting their RPCs at both ends.
    fn expire_calls(&mut self, now: Instant) {
        while let Some((call, after, sent)) = self.calls.expired(now) {
            self.forget_call(call, sent);
            self.outcomes.push_back(Outcome::Reply {
                call,
                result: Err(Error::Timeout { after }),
            });
        }
    }

    /// Ends a call without an outcome, wherever it is.
    fn end_call(&mut self, call: CallToken) {
        if let Some(sent) = self.calls.end(call) {
            self.forget_call(call, sent);
        }
    }

    /// Drops an ended call's state: its RPC in the core (which tells the
    /// server), or its place in a queue for keys.
    fn forget_call(&mut self, call: CallToken, sent: Option<Sent>) {
        self.load.done(call);
        match sent {
            Some(Sent { rpc, peer }) => {
                self.load.ended(peer);
                self.core.abort(rpc);
            }
            None => {
                if !self.load.cancel(call) {
                    self.sessions.cancel(call);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
