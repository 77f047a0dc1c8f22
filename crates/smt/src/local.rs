//! A caller-driven endpoint: no background thread. The thread that owns a
//! [`LocalEndpoint`] owns its engine ([`crate::engine`]): calls and
//! responses are queued by [`LocalEndpoint::call`] and
//! [`LocalEndpoint::respond`], and everything moves inside
//! [`LocalEndpoint::poll`] (transmit, receive, timers, handshakes).
//!
//! Why it exists: handing a message from an application thread to a
//! driver thread and back costs a thread wake-up each way (tens of
//! microseconds on a small VM, several times the loopback round trip
//! itself). A run-to-completion thread that owns its endpoint, like a
//! thread that owns a socket, pays none: one RPC costs the same system
//! calls as a UDP ping-pong. The price is that nothing happens between
//! `poll` calls: the owner must keep polling while calls are outstanding
//! or requests may arrive (timers, retransmissions and acknowledgements
//! run inside `poll`).

use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use bytes::Bytes;
use smt_proto::{KeyResolver, Payload, ServerRpcHandle, SessionKeys};
use smt_udp::Features;

use crate::engine::{CallToken, Engine, Outcome, SystemClock};
use crate::wait::{wait, Alarm};
use crate::{CallOptions, EndpointConfig, Error, PeerStats, Stats};

/// One of this endpoint's outstanding calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallId(CallToken);

/// A received request; answer it with [`LocalEndpoint::respond`] or drop
/// its state with [`LocalEndpoint::abandon`].
///
/// Two IDs are equal when they name the same request: the one in
/// [`LocalEvent::RequestCancelled`] equals the one delivered with it.
#[derive(Clone, Copy, Debug)]
pub struct RequestId {
    rpc: ServerRpcHandle,
    /// When the engine delivered it (its handler latency runs from here;
    /// in a cancellation, when the cancellation was heard).
    delivered: Instant,
}

impl PartialEq for RequestId {
    fn eq(&self, other: &Self) -> bool {
        self.rpc == other.rpc
    }
}

impl Eq for RequestId {}

impl std::hash::Hash for RequestId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.rpc.hash(state);
    }
}

impl RequestId {
    /// Who sent the request.
    pub fn peer(&self) -> SocketAddr {
        self.rpc.peer
    }
}

/// What [`LocalEndpoint::poll`] reports.
#[derive(Debug)]
#[non_exhaustive]
pub enum LocalEvent {
    /// The response to one of our calls.
    Response {
        /// The call, as [`LocalEndpoint::call`] returned it.
        call: CallId,
        /// The response message.
        data: Bytes,
    },
    /// One of our calls failed (timeout, peer lost it, handshake failed).
    Failed {
        /// The call, as [`LocalEndpoint::call`] returned it.
        call: CallId,
        /// Why it failed.
        error: Error,
    },
    /// A complete, authenticated request.
    Request {
        /// What [`LocalEndpoint::respond`] takes to answer it.
        request: RequestId,
        /// The request message.
        data: Bytes,
    },
    /// The client of a request delivered earlier and not answered yet
    /// gave up on it (cancelled the call, or passed its deadline): a
    /// response would reach nobody, and [`LocalEndpoint::respond`] fails.
    RequestCancelled {
        /// The request, as its [`LocalEvent::Request`] named it.
        request: RequestId,
    },
}

impl From<Outcome> for LocalEvent {
    fn from(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Reply {
                call,
                result: Ok(data),
            } => Self::Response {
                call: CallId(call),
                data,
            },
            Outcome::Reply {
                call,
                result: Err(error),
            } => Self::Failed {
                call: CallId(call),
                error,
            },
            Outcome::Request { rpc, data, at, .. } => Self::Request {
                request: RequestId { rpc, delivered: at },
                data,
            },
            Outcome::Cancelled { rpc, at } => Self::RequestCancelled {
                request: RequestId { rpc, delivered: at },
            },
        }
    }
}

/// An SMT endpoint driven by the thread that owns it: no background
/// thread; calls and responses are queued by [`LocalEndpoint::call`] and
/// [`LocalEndpoint::respond`], and everything moves inside
/// [`LocalEndpoint::poll`]. The owner must keep polling while calls are
/// outstanding or requests may arrive.
///
/// One thread driving a client and a server (each `poll` does that
/// endpoint's work: sending, receiving, timers):
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use smt::{EndpointConfig, LocalEndpoint, LocalEvent};
/// use smt::keys::{fresh_session_pair, AeadAlgorithm};
/// let mut server = LocalEndpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::default())?;
/// let mut client = LocalEndpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::default())?;
/// let (client_keys, server_keys) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
/// client.install_session(server.local_addr(), client_keys)?;
/// server.install_session(client.local_addr(), server_keys)?;
/// let call = client.call(server.local_addr(), b"ping")?;
/// let tick = Some(Duration::from_millis(10));
/// let mut response = None;
/// while response.is_none() {
///     if let Some(LocalEvent::Request { request, data }) = server.poll(tick)? {
///         server.respond(request, data)?; // an echo
///     }
///     match client.poll(tick)? {
///         Some(LocalEvent::Response { call: done, data }) if done == call => {
///             response = Some(data);
///         }
///         Some(LocalEvent::Failed { error, .. }) => return Err(error.into()),
///         _ => {}
///     }
/// }
/// assert_eq!(response.as_deref(), Some(&b"ping"[..]));
/// # Ok(()) }
/// ```
pub struct LocalEndpoint {
    /// Boxed: the engine (the core, its tables and counters) is a few
    /// kilobytes, and a `LocalEndpoint` is moved around by its owner.
    engine: Box<Engine>,
    busy_poll: bool,
    /// The socket reported readable (or is fresh) since the last receive:
    /// without that, receiving is skipped (the system call would find
    /// nothing).
    readable: bool,
    /// A receive emptied the socket, and no `poll` has returned `None`
    /// since: a zero-timeout `poll` finding no outcome then returns
    /// without reading (see `poll`).
    drained: bool,
    /// What `poll` sleeps until besides the socket: the protocol's next
    /// deadline or the caller's.
    alarm: Alarm,
}

impl std::fmt::Debug for LocalEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEndpoint")
            .field("local_addr", &self.engine.local_addr())
            .finish_non_exhaustive()
    }
}

impl LocalEndpoint {
    /// Binds a socket. `config.busy_poll` makes [`LocalEndpoint::poll`]
    /// spin on the socket instead of sleeping.
    pub fn bind(addr: SocketAddr, config: EndpointConfig) -> Result<Self, Error> {
        let engine = Box::new(Engine::bind(addr, &config, Box::new(SystemClock))?);
        tracing::info!(local_addr = %engine.local_addr(), "SMT local endpoint bound: {}", engine.features());
        Ok(Self {
            engine,
            busy_poll: config.busy_poll(),
            readable: true,
            drained: false,
            alarm: Alarm::new()?,
        })
    }

    /// The bound address (in raw-IP mode, with the SMT port).
    pub fn local_addr(&self) -> SocketAddr {
        self.engine.local_addr()
    }

    /// What the socket supports (GSO, GRO, batch sizes).
    pub fn features(&self) -> &Features {
        self.engine.features()
    }

    /// Installs session keys for `peer` (pre-shared-key mode).
    pub fn install_session(&mut self, peer: SocketAddr, keys: SessionKeys) -> Result<(), Error> {
        self.engine.install_session(peer, keys)
    }

    /// Finds keys for peers without installed ones (server side).
    pub fn set_key_resolver(&mut self, resolver: Box<dyn KeyResolver>) {
        self.engine.set_key_resolver(resolver);
    }

    /// Accepts handshakes from clients (server side), e.g. a
    /// [`smt_tls::TlsServer`] or [`crate::ServerAcceptor`]. Handshakes
    /// progress inside [`LocalEndpoint::poll`].
    pub fn set_handshake_acceptor(&mut self, acceptor: Box<dyn smt_proto::HandshakeAcceptor>) {
        self.engine.set_handshake_acceptor(acceptor);
    }

    /// Makes calls to peers without a session run a TLS 1.3 handshake
    /// first, as [`crate::Endpoint::set_tls_client`] does; the handshake
    /// progresses inside [`LocalEndpoint::poll`].
    pub fn set_tls_client(&mut self, client: smt_tls::TlsClient) {
        self.engine.set_tls_client(client);
    }

    /// TLS handshakes with `peer` verify its certificate against `name`,
    /// as [`crate::Endpoint::set_server_name`] does.
    pub fn set_server_name(&mut self, peer: SocketAddr, name: crate::tls::ServerName<'static>) {
        self.engine.set_server_name(peer, name);
    }

    /// Looks up `HOST:PORT` and names the address for TLS, as
    /// [`crate::Endpoint::resolve`] does.
    pub fn resolve(&mut self, server: &str) -> Result<SocketAddr, Error> {
        let (addr, name) = crate::tls::resolve(server, self.local_addr())?;
        if let Some(name) = name {
            self.set_server_name(addr, name);
        }
        Ok(addr)
    }

    /// Makes calls to peers without a session run the PSK nonce exchange
    /// first, as [`crate::Endpoint::set_psk_client`] does.
    pub fn set_psk_client(&mut self, client: crate::keys::PskClient) {
        self.engine.set_psk_client(client);
    }

    /// Uses an SMT-ticket for the next session with `peer` (0-RTT), as
    /// [`crate::Endpoint::set_zero_rtt_ticket`] does.
    pub fn set_zero_rtt_ticket(
        &mut self,
        peer: SocketAddr,
        ticket: smt_handshake::VerifiedTicket,
        forward_secrecy: bool,
    ) {
        self.engine
            .set_zero_rtt_ticket(peer, ticket, forward_secrecy);
    }

    /// Starts a call. Its packets leave at the next [`LocalEndpoint::poll`]
    /// (or [`LocalEndpoint::flush`]), together with everything else queued
    /// by then: calls made back to back share system calls. A peer without
    /// a session gets a handshake first if a TLS client, PSK client or
    /// 0-RTT ticket is set (the call leaves once keys are installed);
    /// otherwise the call fails at once with `SendError::NoSession`. The
    /// outcome arrives from `poll` as a [`LocalEvent`].
    ///
    /// The call has the endpoint's default timeout
    /// ([`EndpointConfig::call_timeout`]). With
    /// [`EndpointConfig::max_outstanding_calls`] calls outstanding it
    /// fails with [`Error::TooManyCalls`]: poll until some end.
    pub fn call<'a>(
        &mut self,
        peer: SocketAddr,
        request: impl Into<Payload<'a>>,
    ) -> Result<CallId, Error> {
        self.call_with(peer, request, CallOptions::new())
    }

    /// [`LocalEndpoint::call`] with options, such as a timeout: a call
    /// whose response is not complete in time ends with
    /// [`LocalEvent::Failed`] carrying [`Error::Timeout`], and its RPC is
    /// aborted at both ends. Deadlines are kept inside `poll`.
    pub fn call_with<'a>(
        &mut self,
        peer: SocketAddr,
        request: impl Into<Payload<'a>>,
        options: impl Into<CallOptions>,
    ) -> Result<CallId, Error> {
        self.engine
            .call(peer, request.into(), options.into())
            .map(CallId)
    }

    /// Answers `request`. Like calls, responses leave at the next `poll`
    /// or `flush`, batched with whatever else is queued. A response that
    /// cannot be sent (too large, the client gone) is an error, and the
    /// request is abandoned: its client fails at once with
    /// `RpcError::Abandoned`.
    pub fn respond<'a>(
        &mut self,
        request: RequestId,
        response: impl Into<Payload<'a>>,
    ) -> Result<(), Error> {
        self.engine
            .respond(request.rpc, response.into(), request.delivered)
    }

    /// Sends what is queued now, as far as the peers' grants and the
    /// socket allow, without waiting for anything.
    pub fn flush(&mut self) -> Result<(), Error> {
        self.engine.flush();
        Ok(())
    }

    /// Drops an unanswered request: the client's call fails at once with
    /// `RpcError::Abandoned`, and the request is never executed twice.
    pub fn abandon(&mut self, request: RequestId) {
        self.engine.abandon(request.rpc);
    }

    /// Gives up on a call; no event will report it. Its state is freed at
    /// once and the server is told (RPC_UNKNOWN at the next `poll` or
    /// `flush`), so it stops working on the RPC and sending its response.
    pub fn cancel(&mut self, call: CallId) {
        self.engine.cancel(call.0);
    }

    /// Calls outstanding (sent, or waiting for a handshake) and requests
    /// received but not yet answered.
    pub fn in_flight(&self) -> (usize, usize) {
        (self.engine.outstanding_calls(), self.engine.in_flight().1)
    }

    /// The next event, doing the endpoint's work (transmit, receive,
    /// timers) until one is ready or `timeout` passes (`None`: wait as long
    /// as it takes; `Some(ZERO)`: only what is ready now). Events already
    /// received are returned before anything is sent, so a server that
    /// answers each request as `poll` hands it over sends all the answers
    /// to one receive batch together.
    pub fn poll(&mut self, timeout: Option<Duration>) -> Result<Option<LocalEvent>, Error> {
        let deadline = timeout.map(|t| self.engine.now() + t);
        // A zero timeout looks at the socket once (by reading it), so an
        // application polling after its own epoll said "readable" gets
        // the datagrams; except right after a receive emptied it, when
        // the caller has just taken the outcomes that receive produced:
        // a read now would almost always find nothing, and whatever
        // arrived since raises the application's readiness again (the
        // next zero-timeout `poll` reads).
        let zero = timeout == Some(Duration::ZERO);
        // This call's sleeps are `wait`'s level-triggered `ppoll`, which
        // returns at once if datagrams wait: a receive may take one
        // datagram and leave "more?" to it. Not with a zero timeout (the
        // application's own loop, perhaps edge-triggered, sleeps next) nor
        // when busy-polling (no sleep asks).
        self.engine.set_level_waits(!zero && !self.busy_poll);
        if zero && self.engine.wants_writable() {
            // An application's own loop polls when the socket is writable
            // (`LocalEndpoint::wants_writable`): try the held batch again.
            self.engine.writable();
        }
        let skip = zero && std::mem::take(&mut self.drained);
        let mut looked = zero;
        self.readable |= zero && !skip;
        // What the owner queued (calls, responses) leaves before the
        // first receive; after a wait, only a batch that waited for room
        // can be left (each turn ends by transmitting), so the turn's own
        // transmit suffices unless the socket was full.
        let mut flush = true;
        loop {
            if let Some(outcome) = self.engine.poll_outcome() {
                return Ok(Some(outcome.into()));
            }
            let readable = std::mem::take(&mut self.readable) || self.busy_poll;
            if flush {
                self.engine.flush_and_turn(readable);
            } else {
                self.engine.turn(readable);
            }
            if let Some(outcome) = self.engine.poll_outcome() {
                self.drained = readable && !self.more_to_read();
                return Ok(Some(outcome.into()));
            }
            if looked && deadline.is_some_and(|d| d <= self.engine.now()) {
                self.drained = false;
                return Ok(None);
            }
            flush = self.engine.wants_writable();
            self.wait(deadline)?;
            looked = true;
        }
    }

    /// For an application's own event loop (the socket is [`AsFd`]): how
    /// long it may wait before calling [`LocalEndpoint::poll`] with a zero
    /// timeout even if the socket stays quiet, for the protocol's timers
    /// (`Some(ZERO)`: datagrams already wait unread; `None`: nothing until
    /// the socket is readable). Read it after each round of zero-timeout
    /// polls.
    pub fn timeout(&self) -> Option<Duration> {
        if self.more_to_read() {
            return Some(Duration::ZERO);
        }
        let now = self.engine.now();
        self.engine
            .deadline()
            .map(|d| d.saturating_duration_since(now))
    }

    /// Whether datagrams wait for room in the socket: an application's
    /// own loop then watches the socket's writability too, and polls when
    /// it is writable.
    pub fn wants_writable(&self) -> bool {
        self.engine.wants_writable()
    }

    /// The endpoint's counters and what it holds now ([`Stats::peers`]
    /// left empty). O(1).
    pub fn stats(&self) -> Stats {
        self.engine.stats(0)
    }

    /// [`LocalEndpoint::stats`] with up to `max_peers` peers' own counters
    /// in [`Stats::peers`], the busiest first. O(sessions).
    pub fn stats_with_peers(&self, max_peers: usize) -> Stats {
        self.engine.stats(max_peers)
    }

    /// The driver's timer work since the endpoint was bound, for
    /// benchmarks and tests: times its alarm (a timer descriptor) was
    /// set, times it went off, and the protocol timers' expiries by name.
    /// Not a stable interface.
    #[doc(hidden)]
    pub fn timer_counts(&self) -> TimerCounts {
        TimerCounts {
            alarm_sets: self.alarm.sets(),
            alarm_rings: self.alarm.rings(),
            expiries: self.engine.timer_expiries(),
        }
    }

    /// The counters of `peer`'s session (`None` without one). O(1).
    pub fn peer_stats(&self, peer: SocketAddr) -> Option<PeerStats> {
        self.engine.peer_stats(peer)
    }

    /// Whether datagrams may wait unread: the last receive stopped at its
    /// limit, or took one datagram and left "more?" to a level-triggered
    /// wait, which an application's own loop may not be.
    fn more_to_read(&self) -> bool {
        self.engine.more_to_read() || self.engine.may_have_more()
    }

    fn socket(&self) -> BorrowedFd<'_> {
        // NOTE(unwrap): only the threaded face closes an engine's socket.
        self.engine
            .socket()
            .expect("a LocalEndpoint's socket stays open")
    }

    /// Sleeps until the socket is readable, the next protocol deadline or
    /// `deadline`, whichever is first (returns at once when busy-polling
    /// or when the last receive left datagrams behind).
    fn wait(&mut self, deadline: Option<Instant>) -> Result<(), Error> {
        if self.busy_poll || self.engine.more_to_read() {
            return Ok(());
        }
        let wake = match (deadline, self.engine.deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let now = self.engine.now();
        let due = wake.is_some_and(|w| w <= now);
        // Past due: only look at the socket (a zero timeout arms no timer).
        // Nothing due: the alarm is not polled (and not disarmed).
        let (alarm, timeout) = if due {
            (None, Some(Duration::ZERO))
        } else if self.alarm.for_sleep(wake, now)? {
            (Some(self.alarm.fd()), None)
        } else {
            (None, None)
        };
        let ready = wait(self.socket(), self.engine.wants_writable(), alarm, timeout)?;
        if ready.woken {
            self.alarm.went_off();
        }
        self.readable |= ready.readable;
        if ready.failed {
            self.engine.socket_failed();
        }
        if ready.writable {
            self.engine.writable();
        }
        Ok(())
    }
}

/// [`LocalEndpoint::timer_counts`]: a driver's timer system calls and
/// wake-ups, and what caused them.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct TimerCounts {
    /// `timerfd_settime` calls (arming or disarming the alarm).
    pub alarm_sets: u64,
    /// Sleeps the alarm ended (timer wake-ups).
    pub alarm_rings: u64,
    /// The protocol core's timers that went off, by name.
    pub expiries: [(&'static str, u64); 3],
}

impl Drop for LocalEndpoint {
    /// Sends the acknowledgements still waiting for their delay, so the
    /// servers of the calls it completed free them at once. Nothing else
    /// is waited for: the owner that drops it has stopped polling.
    fn drop(&mut self) {
        self.engine.flush_acks();
        self.engine.flush();
    }
}

impl AsFd for LocalEndpoint {
    /// The socket, for an application's own `epoll`: when it is readable
    /// (or writable, while [`LocalEndpoint::wants_writable`]), or when
    /// [`LocalEndpoint::timeout`] has passed, call [`LocalEndpoint::poll`]
    /// with a zero timeout until it returns `None`. No thread is involved:
    /// the application's thread receives, answers and sends.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket()
    }
}
