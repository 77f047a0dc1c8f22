//! The I/O driver: one thread that owns the socket, the clock and the
//! sans-IO [`smt_proto::Endpoint`], and moves bytes, commands and events
//! between them.
//!
//! Loop: commands from API handles → received datagrams (batched, GRO
//! split) → expired timers → events to waiting callers and the request
//! queue → outgoing datagrams (coalesced into GSO batches per destination)
//! → sleep in `mio::Poll` until the socket, a command or the next deadline
//! (or spin, in busy-poll mode).

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use smt_proto::{
    handshake_kind, Endpoint as Core, Event, HandshakeError, RpcHandle, SendError, ServerRpcHandle,
};
use smt_udp::Socket;

use crate::io::Io;

use crate::endpoint::{Command, Shared};
use crate::{Error, IncomingRequest};

pub(crate) const SOCKET: Token = Token(0);
pub(crate) const WAKER: Token = Token(1);

/// Longest a graceful close waits for in-flight RPCs.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

type Reply = flume::Sender<Result<Vec<u8>, Error>>;

pub(crate) struct Driver {
    pub core: Core,
    pub io: Io,
    pub poll: Poll,
    pub shared: Arc<Shared>,
    pub commands: flume::Receiver<Command>,
    pub requests: flume::Sender<IncomingRequest>,
    pub busy_poll: bool,
    pub pending: HashMap<RpcHandle, Reply>,
    pub closing: Option<Instant>,
    /// Establishes sessions for calls to unknown peers.
    pub tls_client: Option<smt_tls::TlsClient>,
    /// Establishes sessions with the PSK nonce exchange (before TLS).
    pub psk_client: Option<crate::keys::PskClient>,
    /// SMT-tickets for 0-RTT sessions, by peer.
    pub tickets: HashMap<SocketAddr, (Box<smt_ticket::VerifiedTicket>, bool)>,
    /// Pre-generated ephemeral key pairs for 0-RTT hellos (§4.5.1).
    pub key_pool: Arc<smt_ticket::KeyPool>,
    /// Calls waiting for a handshake with their peer.
    pub waiting: HashMap<SocketAddr, Vec<(Vec<u8>, Reply)>>,
    /// Calls waiting for a key epoch to drain (`SendError::RekeyPending`).
    pub deferred: std::collections::VecDeque<(SocketAddr, Vec<u8>, Reply)>,
}

impl Driver {
    pub fn run(mut self) {
        let span = tracing::debug_span!("smt_driver", local = %self.shared_local_addr());
        let _entered = span.enter();
        let mut events = Events::with_capacity(16);
        loop {
            let now = Instant::now();
            self.handle_commands(now);
            self.io.receive(&mut self.core, now);
            self.expire_timers(Instant::now());
            self.dispatch_events();
            if !self.deferred.is_empty() {
                self.retry_deferred(Instant::now());
            }
            self.io.transmit(&mut self.core);
            if let Err(e) = self.io.sync_interest(self.poll.registry(), SOCKET) {
                tracing::error!("cannot watch the socket, driver stops: {e}");
                break;
            }
            if self.finished_closing() {
                break;
            }
            let timeout = self.wait_time();
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    tracing::error!("poll failed, driver stops: {e}");
                    break;
                }
            }
            if events
                .iter()
                .any(|e| e.token() == SOCKET && e.is_writable())
            {
                self.io.blocked = false;
            }
        }
        self.fail_pending();
    }

    fn shared_local_addr(&self) -> SocketAddr {
        self.io
            .socket
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    fn wait_time(&self) -> Option<Duration> {
        if self.busy_poll || self.io.more_to_read {
            return Some(Duration::ZERO);
        }
        let mut deadline = self.core.poll_timeout();
        if let Some(close) = self.closing {
            let end = close + CLOSE_GRACE;
            deadline = Some(deadline.map_or(end, |d| d.min(end)));
        }
        deadline.map(|d| d.saturating_duration_since(Instant::now()))
    }

    fn handle_commands(&mut self, now: Instant) {
        while let Ok(cmd) = self.commands.try_recv() {
            match cmd {
                Command::Call { peer, data, reply } => self.start_call(now, peer, &data, reply),
                Command::Respond { rpc, data } => {
                    if let Err(e) = self.core.send_response(now, rpc, &data) {
                        tracing::debug!(peer = %rpc.peer, id = rpc.id, "response not sent: {e}");
                    }
                }
                Command::Abandon(rpc) => {
                    self.core.abandon_request(rpc);
                }
                Command::InstallSession { peer, keys, reply } => {
                    let _ = reply.send(self.core.install_session(peer, keys).map_err(Error::Send));
                }
                Command::SetResolver(r) => self.core.set_key_resolver(r),
                Command::SetTlsClient(c) => self.tls_client = Some(c),
                Command::SetPskClient(c) => self.psk_client = Some(c),
                Command::SetTicket {
                    peer,
                    ticket,
                    forward_secrecy,
                } => {
                    self.tickets.insert(peer, (ticket, forward_secrecy));
                }
                Command::SetAcceptor(a) => self.core.set_handshake_acceptor(a),
                Command::Stats { peer, reply } => {
                    let peer_stats = peer.and_then(|p| self.core.peer_stats(p).copied());
                    let _ = reply.send((*self.core.stats(), peer_stats));
                }
                Command::Close => {
                    self.closing.get_or_insert(now);
                }
            }
        }
    }

    fn start_call(&mut self, now: Instant, peer: SocketAddr, data: &[u8], reply: Reply) {
        if self.closing.is_some() {
            let _ = reply.send(Err(Error::Closed));
            return;
        }
        match self.core.send_request(now, peer, data) {
            Ok(handle) => {
                self.pending.insert(handle, reply);
            }
            Err(SendError::NoSession)
                if self.tls_client.is_some()
                    || self.psk_client.is_some()
                    || self.tickets.contains_key(&peer) =>
            {
                self.connect(now, peer, data, reply)
            }
            Err(SendError::RekeyPending) => self.deferred.push_back((peer, data.to_vec(), reply)),
            Err(e) => {
                let _ = reply.send(Err(Error::Send(e)));
            }
        }
    }

    /// Parks a call until a handshake with `peer` (started now if none is
    /// running) installs keys.
    fn connect(&mut self, now: Instant, peer: SocketAddr, data: &[u8], reply: Reply) {
        if !self.core.is_connecting(peer) {
            if let Some((ticket, fs)) = self.tickets.get(&peer) {
                let hs = smt_ticket::ZeroRttClientHandshake::new(ticket, &self.key_pool, *fs);
                self.core
                    .connect(now, peer, Box::new(hs), handshake_kind::SMT_TICKET);
                self.waiting
                    .entry(peer)
                    .or_default()
                    .push((data.to_vec(), reply));
                // 0-RTT: the keys exist already, so the call leaves with
                // the hello; the pool is refilled off the hot path after.
                self.dispatch_events();
                self.key_pool.refill();
                return;
            }
            if let Some(psk) = &self.psk_client {
                let hs = psk.handshake(self.shared.local_addr);
                self.core
                    .connect(now, peer, Box::new(hs), handshake_kind::PSK_NONCE);
                self.waiting
                    .entry(peer)
                    .or_default()
                    .push((data.to_vec(), reply));
                return;
            }
            let Some(client) = &self.tls_client else {
                return;
            };
            match client.handshake(&peer.ip().to_string()) {
                Ok(hs) => self.core.connect(now, peer, hs, handshake_kind::TLS13),
                Err(e) => {
                    let error = HandshakeError::Protocol(e.to_string());
                    let _ = reply.send(Err(Error::Handshake(error)));
                    return;
                }
            }
        }
        self.waiting
            .entry(peer)
            .or_default()
            .push((data.to_vec(), reply));
    }

    /// Retries calls that waited for a key epoch to drain.
    fn retry_deferred(&mut self, now: Instant) {
        for _ in 0..self.deferred.len() {
            let Some((peer, data, reply)) = self.deferred.pop_front() else {
                break;
            };
            self.start_call(now, peer, &data, reply);
        }
    }

    fn expire_timers(&mut self, now: Instant) {
        if self.core.poll_timeout().is_some_and(|t| t <= now) {
            self.core.handle_timeout(now);
        }
    }

    fn dispatch_events(&mut self) {
        while let Some(ev) = self.core.poll_event() {
            match ev {
                Event::Response { rpc, data } => self.reply(rpc, Ok(data)),
                Event::Failed { rpc, error } => self.reply(rpc, Err(Error::Rpc(error))),
                Event::Request { rpc, data } => self.queue_request(rpc, data),
                Event::Connected { peer } => {
                    let now = Instant::now();
                    for (data, reply) in self.waiting.remove(&peer).unwrap_or_default() {
                        self.start_call(now, peer, &data, reply);
                    }
                }
                Event::HandshakeFailed { peer, error } => {
                    for (_, reply) in self.waiting.remove(&peer).unwrap_or_default() {
                        let _ = reply.send(Err(Error::Handshake(error.clone())));
                    }
                }
                _ => {}
            }
        }
    }

    fn reply(&mut self, rpc: RpcHandle, result: Result<Vec<u8>, Error>) {
        if let Some(tx) = self.pending.remove(&rpc) {
            let _ = tx.send(result);
        }
    }

    fn queue_request(&mut self, rpc: ServerRpcHandle, data: Vec<u8>) {
        if self.closing.is_some() {
            self.core.abandon_request(rpc);
            return;
        }
        let req = IncomingRequest::new(rpc, data, self.shared.clone());
        if self.requests.send(req).is_ok() {
            self.shared.ready.notify();
        }
    }

    fn finished_closing(&mut self) -> bool {
        let Some(since) = self.closing else {
            return false;
        };
        let idle =
            self.core.client_rpcs() == 0 && self.core.server_rpcs() == 0 && !self.io.has_pending();
        idle || since.elapsed() >= CLOSE_GRACE
    }

    fn fail_pending(&mut self) {
        for (_, tx) in self.pending.drain() {
            let _ = tx.send(Err(Error::Closed));
        }
        let waiting = self
            .waiting
            .drain()
            .flat_map(|(_, calls)| calls)
            .map(|(_, r)| r);
        let deferred = self.deferred.drain(..).map(|(_, _, r)| r);
        for tx in waiting.chain(deferred) {
            let _ = tx.send(Err(Error::Closed));
        }
        self.shared.mark_closed();
    }
}

/// Registers the socket and creates the waker.
pub(crate) fn register(poll: &Poll, socket: &Socket) -> io::Result<Waker> {
    let fd = std::os::fd::AsRawFd::as_raw_fd(socket);
    // Edge-triggered: the driver drains the socket on every readable edge;
    // writable edges are added only while a refused batch waits
    // (`Io::sync_interest`).
    poll.registry()
        .register(&mut SourceFd(&fd), SOCKET, Interest::READABLE)?;
    Waker::new(poll.registry(), WAKER)
}
