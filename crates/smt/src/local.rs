//! A caller-driven endpoint: no driver thread. The thread that owns a
//! [`LocalEndpoint`] sends inside [`LocalEndpoint::call`] and
//! [`LocalEndpoint::respond`], and receives and runs timers inside
//! [`LocalEndpoint::poll`].
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

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use smt_proto::{Endpoint as Core, Event, KeyResolver, RpcHandle, ServerRpcHandle, SessionKeys};
use smt_udp::Features;

use crate::endpoint::open;
use crate::io::Io;
use crate::{EndpointConfig, Error, Stats};

const SOCKET: Token = Token(0);

/// One of this endpoint's outstanding calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallId(RpcHandle);

/// A received request; answer it with [`LocalEndpoint::respond`] or drop
/// its state with [`LocalEndpoint::abandon`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RequestId(ServerRpcHandle);

impl RequestId {
    /// Who sent the request.
    pub fn peer(&self) -> SocketAddr {
        self.0.peer
    }
}

/// What [`LocalEndpoint::poll`] reports.
#[derive(Debug)]
#[non_exhaustive]
pub enum LocalEvent {
    /// The response to one of our calls.
    Response { call: CallId, data: Vec<u8> },
    /// One of our calls failed (timeout, peer lost it).
    Failed { call: CallId, error: Error },
    /// A complete, authenticated request.
    Request { request: RequestId, data: Vec<u8> },
}

/// An SMT endpoint driven by the thread that owns it. See the module docs.
pub struct LocalEndpoint {
    core: Core,
    io: Io,
    poll: Poll,
    events: Events,
    local_addr: SocketAddr,
    busy_poll: bool,
    /// A readable edge (or a fresh socket) since the last receive: without
    /// one the socket is known to be empty and receiving is skipped.
    readable: bool,
}

impl std::fmt::Debug for LocalEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEndpoint")
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl LocalEndpoint {
    /// Binds a socket. `config.busy_poll` makes [`LocalEndpoint::poll`]
    /// spin on the socket instead of sleeping.
    pub fn bind(addr: SocketAddr, config: EndpointConfig) -> Result<Self, Error> {
        let (socket, local_addr, core) = open(addr, &config)?;
        let poll = Poll::new()?;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&socket);
        // Edge-triggered: `poll` drains the socket before it sleeps;
        // writable edges are added only while a refused batch waits.
        poll.registry()
            .register(&mut SourceFd(&fd), SOCKET, Interest::READABLE)?;
        tracing::info!(%local_addr, "SMT local endpoint bound: {}", socket.features());
        Ok(Self {
            io: Io::new(socket, core.config().max_datagram_size),
            core,
            poll,
            events: Events::with_capacity(4),
            local_addr,
            busy_poll: config.busy_poll,
            readable: true,
        })
    }

    /// The bound address (in raw-IP mode, with the SMT port).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// What the socket supports (GSO, GRO, batch sizes).
    pub fn features(&self) -> &Features {
        self.io.socket.features()
    }

    /// Installs session keys for `peer` (pre-shared-key mode).
    pub fn install_session(&mut self, peer: SocketAddr, keys: SessionKeys) -> Result<(), Error> {
        self.core.install_session(peer, keys).map_err(Error::Send)
    }

    /// Finds keys for peers without installed ones (server side).
    pub fn set_key_resolver(&mut self, resolver: Box<dyn KeyResolver>) {
        self.core.set_key_resolver(resolver);
    }

    /// Accepts handshakes from clients (server side), e.g. a
    /// [`smt_tls::TlsServer`] or [`crate::ServerAcceptor`]. Handshakes
    /// progress inside [`LocalEndpoint::poll`].
    pub fn set_handshake_acceptor(&mut self, acceptor: Box<dyn smt_proto::HandshakeAcceptor>) {
        self.core.set_handshake_acceptor(acceptor);
    }

    /// Starts a call. Its packets leave at the next [`LocalEndpoint::poll`]
    /// (or [`LocalEndpoint::flush`]), together with everything else queued
    /// by then: calls made back to back share system calls. The peer needs
    /// a session: installed keys (this endpoint does not start handshakes;
    /// use [`crate::Endpoint`] for that). The outcome arrives from `poll` as
    /// a [`LocalEvent`].
    pub fn call(&mut self, peer: SocketAddr, request: &[u8]) -> Result<CallId, Error> {
        let handle = self
            .core
            .send_request(Instant::now(), peer, request)
            .map_err(Error::Send)?;
        Ok(CallId(handle))
    }

    /// Answers `request`. Like calls, responses leave at the next `poll`
    /// or `flush`, batched with whatever else is queued.
    pub fn respond(&mut self, request: RequestId, response: &[u8]) -> Result<(), Error> {
        self.core
            .send_response(Instant::now(), request.0, response)
            .map_err(Error::Send)
    }

    /// Sends what is queued now, as far as the peers' grants and the
    /// socket allow, without waiting for anything.
    pub fn flush(&mut self) -> Result<(), Error> {
        self.transmit()
    }

    /// Drops an unanswered request: the client's call fails with a
    /// timeout, and the request is never executed twice.
    pub fn abandon(&mut self, request: RequestId) {
        self.core.abandon_request(request.0);
    }

    /// Gives up on a call; no event will report it.
    pub fn cancel(&mut self, call: CallId) {
        self.core.abort(call.0);
    }

    /// Calls outstanding and requests received but not yet answered.
    pub fn in_flight(&self) -> (usize, usize) {
        (self.core.client_rpcs(), self.core.server_rpcs())
    }

    /// The next event, doing the endpoint's work (transmit, receive,
    /// timers) until one is ready or `timeout` passes (`None`: wait as long
    /// as it takes; `Some(ZERO)`: only what is ready now). Events already
    /// received are returned before anything is sent, so a server that
    /// answers each request as `poll` hands it over sends all the answers
    /// to one receive batch together.
    pub fn poll(&mut self, timeout: Option<Duration>) -> Result<Option<LocalEvent>, Error> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            if let Some(event) = self.next_event() {
                return Ok(Some(event));
            }
            // What the owner queued (calls, responses) leaves first.
            self.transmit()?;
            let now = Instant::now();
            if self.readable || self.busy_poll || self.io.more_to_read {
                self.readable = false;
                self.io.receive(&mut self.core, now);
            }
            if self.core.poll_timeout().is_some_and(|t| t <= now) {
                self.core.handle_timeout(now);
            }
            if let Some(event) = self.next_event() {
                return Ok(Some(event));
            }
            // Grants and acknowledgements the receive produced, and
            // retransmissions the timers asked for.
            self.transmit()?;
            if deadline.is_some_and(|d| d <= now) {
                return Ok(None);
            }
            self.wait(deadline)?;
        }
    }

    /// Endpoint and (with `peer`) session counters.
    pub fn stats(&self, peer: Option<SocketAddr>) -> (Stats, Option<Stats>) {
        let peer_stats = peer.and_then(|p| self.core.peer_stats(p).copied());
        (*self.core.stats(), peer_stats)
    }

    fn transmit(&mut self) -> Result<(), Error> {
        self.io.transmit(&mut self.core);
        self.io
            .sync_interest(self.poll.registry(), SOCKET)
            .map_err(Error::Io)
    }

    fn next_event(&mut self) -> Option<LocalEvent> {
        while let Some(event) = self.core.poll_event() {
            match event {
                Event::Response { rpc, data } => {
                    return Some(LocalEvent::Response {
                        call: CallId(rpc),
                        data,
                    })
                }
                Event::Failed { rpc, error } => {
                    return Some(LocalEvent::Failed {
                        call: CallId(rpc),
                        error: Error::Rpc(error),
                    })
                }
                Event::Request { rpc, data } => {
                    return Some(LocalEvent::Request {
                        request: RequestId(rpc),
                        data,
                    })
                }
                // Server-side handshakes need nothing from the owner.
                _ => {}
            }
        }
        None
    }

    /// Sleeps until the socket is readable, the next protocol timer or
    /// `deadline`, whichever is first (returns at once when busy-polling
    /// or when the last receive left datagrams behind).
    fn wait(&mut self, deadline: Option<Instant>) -> Result<(), Error> {
        if self.busy_poll || self.io.more_to_read {
            return Ok(());
        }
        let wake = match (deadline, self.core.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let timeout = wake.map(|w| w.saturating_duration_since(Instant::now()));
        match self.poll.poll(&mut self.events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::Io(e)),
        }
        for event in self.events.iter() {
            self.readable |= event.is_readable();
            if event.is_writable() {
                self.io.blocked = false;
            }
        }
        Ok(())
    }
}

impl AsFd for LocalEndpoint {
    /// The socket, for an application's own `epoll`: when it is readable,
    /// call [`LocalEndpoint::poll`] with a zero timeout until it returns
    /// `None`.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.io.socket.as_fd()
    }
}
