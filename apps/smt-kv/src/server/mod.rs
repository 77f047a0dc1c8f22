//! The server: one event loop, three front ends, one database.
//!
//! ```text
//!   TCP listener ──┐
//!   TLS listener ──┼─ mio (epoll) ── EventLoop ── Store (Db, stats, settings)
//!   SMT socket   ──┘        one thread: every command of every client
//!                           runs here, one at a time, as in Redis
//! ```
//!
//! **Why mio and not a tokio runtime.** Redis is one thread around epoll
//! (its `ae` loop), and SMT's published Redis port registers the SMT socket's
//! descriptor in that same loop. mio is exactly that: epoll and nothing
//! else. The database is owned by the loop, so it needs no lock and no
//! `RefCell`, commands run in arrival order, and the loop decides itself
//! how much each client gets per turn (a read budget, an output
//! high-water mark) instead of a runtime's task budget. The SMT endpoint
//! is a `LocalEndpoint` with no thread of its own: its UDP socket is in
//! this loop's epoll set, and when it is readable (or its protocol timer
//! is due) the loop polls it, executes the requests it delivers and
//! answers them, all on this thread, and the answers leave with the next
//! poll. (The threaded `Endpoint` with `ready_fd` would receive on its own
//! thread and hand each request over: a cross-thread wake-up per request,
//! which made SMT slower than TLS/TCP in YCSB.)
//!
//! Readiness in mio is edge-triggered: a source is read until it would
//! block, or remembered in the backlog (a connection out of budget, SMT
//! requests left over), and the next poll does not sleep while the
//! backlog is not empty.

mod conn;
mod tls;

use std::collections::HashSet;
use std::fmt;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mio::net::{TcpListener, TcpStream};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};

use crate::cmd::{Password, Settings, Store};
use crate::db::UnixMs;
use crate::resp::Limits;
use crate::session;
use conn::{Conn, Progress};
pub use tls::Identity;

const TCP: Token = Token(0);
const TLS: Token = Token(1);
const SMT: Token = Token(2);
const WAKE: Token = Token(3);
/// Connection tokens start here; token `FIRST_CONN + i` is slot `i`.
const FIRST_CONN: usize = 16;
/// SMT requests answered per turn before the other clients get theirs.
const SMT_BUDGET: usize = 256;
/// The longest sleep: the active expiry cycle runs at least this often
/// (Redis's `hz 10`).
const MAX_SLEEP: Duration = Duration::from_millis(100);
/// Keys expired per turn at most.
const EXPIRE_BUDGET: usize = 1000;

/// What the server listens on and how it bounds its clients.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Plain RESP over TCP.
    pub tcp: Option<SocketAddr>,
    /// RESP over TLS 1.3 over TCP.
    pub tls: Option<SocketAddr>,
    /// RESP in SMT messages (TLS 1.3 handshake carried by SMT).
    pub smt: Option<SocketAddr>,
    /// The certificate of the TLS and SMT front ends.
    pub identity: Identity,
    /// Limits on what one request may hold (bulk length, query buffer).
    pub limits: Limits,
    /// Stream clients served at once (Redis's `maxclients`).
    pub max_clients: usize,
    /// Clients of every front end must `AUTH` with it first (Redis's
    /// `requirepass`).
    pub requirepass: Option<Password>,
}

impl ServerConfig {
    /// All three front ends on `ip` with ports chosen by the system, and
    /// a throwaway certificate for `ip`: what tests and benchmarks use.
    pub fn ephemeral(ip: std::net::IpAddr) -> Result<Self, ServerError> {
        let any = SocketAddr::new(ip, 0);
        Ok(Self {
            tcp: Some(any),
            tls: Some(any),
            smt: Some(any),
            identity: Identity::generate(&[&ip.to_string(), "localhost"])?,
            limits: Limits::default(),
            max_clients: 10_000,
            requirepass: None,
        })
    }
}

/// The server could not start. All are the environment's or the
/// operator's doing; clients cannot cause any.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServerError {
    /// A listener could not be bound (address in use, no permission).
    Bind(SocketAddr, io::Error),
    /// The SMT endpoint could not be opened.
    Smt(smt::Error),
    /// The certificate or key is unusable.
    Identity(String),
    /// epoll or a thread could not be created.
    Io(io::Error),
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bind(addr, e) => write!(f, "cannot listen on {addr}: {e}"),
            Self::Smt(e) => write!(f, "cannot open the SMT endpoint: {e}"),
            Self::Identity(why) => write!(f, "unusable server certificate: {why}"),
            Self::Io(e) => write!(f, "cannot start the event loop: {e}"),
        }
    }
}

impl std::error::Error for ServerError {}

impl From<io::Error> for ServerError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

/// A running server. Dropping it stops the loop and waits for it.
#[derive(Debug)]
pub struct RunningServer {
    /// Where the TCP front end listens, if it was asked for.
    pub tcp: Option<SocketAddr>,
    /// Where the TLS front end listens, if it was asked for.
    pub tls: Option<SocketAddr>,
    /// Where the SMT front end's UDP socket is bound, if it was asked for.
    pub smt: Option<SocketAddr>,
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
    thread: Option<JoinHandle<()>>,
}

impl RunningServer {
    /// Binds every front end, then runs the loop on a thread of its own.
    pub fn start(config: ServerConfig) -> Result<Self, ServerError> {
        let (event_loop, waker) = EventLoop::bind(&config)?;
        let (tcp, tls, smt) = event_loop.addrs();
        let stop = event_loop.stop.clone();
        let thread = std::thread::Builder::new()
            .name("smt-kv".into())
            .spawn(move || event_loop.run())?;
        Ok(Self {
            tcp,
            tls,
            smt,
            stop,
            waker,
            thread: Some(thread),
        })
    }

    /// Waits until the loop ends (it runs until stopped).
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// Stops the loop and waits for it.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

struct EventLoop {
    poll: Poll,
    store: Store,
    limits: Limits,
    max_clients: usize,
    tcp: Option<TcpListener>,
    tls: Option<(TcpListener, Arc<rustls::ServerConfig>)>,
    smt: Option<smt::LocalEndpoint>,
    /// Whether the SMT socket is watched for writability too (while its
    /// endpoint holds datagrams the socket had no room for).
    smt_writable: bool,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    /// Connections with work that no event will announce.
    backlog: HashSet<usize>,
    /// SMT requests may be waiting beyond the last turn's budget.
    smt_backlog: bool,
    /// The reply to the SMT request being answered, kept from one request
    /// to the next (see [`respond`]).
    smt_reply: Vec<u8>,
    /// An accept failed (out of descriptors): connections may wait on a
    /// listener that will raise no new edge for them; retried every turn
    /// (at least every [`MAX_SLEEP`]).
    retry_accept: bool,
    stop: Arc<AtomicBool>,
}

impl EventLoop {
    fn bind(config: &ServerConfig) -> Result<(Self, Arc<Waker>), ServerError> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
        let tcp = config.tcp.map(|a| listen(&poll, a, TCP)).transpose()?;
        let tls = match config.tls {
            Some(a) => Some((listen(&poll, a, TLS)?, config.identity.rustls_config()?)),
            None => None,
        };
        let smt = config
            .smt
            .map(|a| open_smt(&poll, a, &config.identity))
            .transpose()?;
        let settings = Settings {
            tcp_port: port(tcp.as_ref()),
            tls_port: port(tls.as_ref().map(|(l, _)| l)),
            smt_port: smt.as_ref().map_or(0, |e| e.local_addr().port()),
            max_clients: config.max_clients,
            proto_max_bulk_len: config.limits.max_bulk_len,
            client_query_buffer_limit: config.limits.query_buffer_limit,
            requirepass: config.requirepass.clone(),
            ..Settings::default()
        };
        let event_loop = Self {
            poll,
            // SPOP's choices need not be secret, only unpredictable
            // enough not to repeat from run to run.
            store: Store::new(settings, now_ms() ^ (u64::from(std::process::id()) << 32)),
            limits: config.limits,
            max_clients: config.max_clients,
            tcp,
            tls,
            smt,
            conns: Vec::new(),
            free: Vec::new(),
            backlog: HashSet::new(),
            smt_backlog: false,
            smt_reply: Vec::new(),
            smt_writable: false,
            retry_accept: false,
            stop: Arc::new(AtomicBool::new(false)),
        };
        Ok((event_loop, waker))
    }

    fn addrs(&self) -> (Option<SocketAddr>, Option<SocketAddr>, Option<SocketAddr>) {
        (
            self.tcp.as_ref().and_then(|l| l.local_addr().ok()),
            self.tls.as_ref().and_then(|(l, _)| l.local_addr().ok()),
            self.smt.as_ref().map(|e| e.local_addr()),
        )
    }

    fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        while !self.stop.load(Ordering::Acquire) {
            let timeout = self.sleep_for(now_ms());
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    tracing::error!(error = %e, "epoll failed; the server stops");
                    break;
                }
            }
            let now = now_ms();
            for event in events.iter() {
                self.dispatch(event, now);
            }
            self.work_backlog(now);
            self.store.db.expire_due(now, EXPIRE_BUDGET);
        }
        if let Some(mut smt) = self.smt.take() {
            // The last answers and acknowledgements leave before the
            // socket closes.
            let _ = smt.flush();
        }
    }

    /// How long the next poll may sleep: not at all with a backlog, else
    /// until the next key expires or the SMT endpoint's next protocol
    /// timer, at most [`MAX_SLEEP`].
    fn sleep_for(&self, now: UnixMs) -> Duration {
        if !self.backlog.is_empty() || self.smt_backlog {
            return Duration::ZERO;
        }
        let until_expiry = self
            .store
            .db
            .next_deadline()
            .map(|t| Duration::from_millis(t.saturating_sub(now)));
        let until_smt = self.smt.as_ref().and_then(|e| e.timeout());
        [until_expiry, until_smt]
            .into_iter()
            .flatten()
            .fold(MAX_SLEEP, Duration::min)
    }

    fn dispatch(&mut self, event: &mio::event::Event, now: UnixMs) {
        match event.token() {
            TCP => self.accept_all(false),
            TLS => self.accept_all(true),
            SMT => self.serve_smt(now),
            WAKE => {}
            Token(t) => {
                let slot = t - FIRST_CONN;
                if let Some(Some(conn)) = self.conns.get_mut(slot) {
                    if event.is_readable() || event.is_read_closed() || event.is_error() {
                        conn.mark_readable(event.is_read_closed() || event.is_error());
                    }
                }
                self.turn(slot, now);
            }
        }
    }

    fn work_backlog(&mut self, now: UnixMs) {
        // Also when its timer is due: no event announces that.
        let smt_due = self
            .smt
            .as_ref()
            .and_then(|e| e.timeout())
            .is_some_and(|t| t.is_zero());
        if self.smt_backlog || smt_due {
            self.serve_smt(now);
        }
        if std::mem::take(&mut self.retry_accept) {
            self.accept_all(false);
            self.accept_all(true);
        }
        let slots: Vec<usize> = self.backlog.drain().collect();
        for slot in slots {
            self.turn(slot, now);
        }
    }

    fn turn(&mut self, slot: usize, now: UnixMs) {
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return;
        };
        match conn.turn(&mut self.store, now) {
            Progress::Idle => {}
            Progress::MoreWork => {
                self.backlog.insert(slot);
            }
            Progress::Closed => self.close(slot),
        }
    }

    fn close(&mut self, slot: usize) {
        if let Some(mut conn) = self.conns[slot].take() {
            let _ = self.poll.registry().deregister(conn.stream_mut());
            self.free.push(slot);
            self.backlog.remove(&slot);
            self.store.stats.connected_clients -= 1;
        }
    }

    /// Accepts every pending connection on one listener.
    fn accept_all(&mut self, tls: bool) {
        loop {
            let listener = if tls {
                self.tls.as_ref().map(|(l, _)| l)
            } else {
                self.tcp.as_ref()
            };
            let Some(listener) = listener else { return };
            match listener.accept() {
                Ok((stream, _)) => self.admit(stream, tls),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    // Out of descriptors, or the client gave up: the
                    // listener stays, and the next turn tries again.
                    tracing::warn!(error = %e, "accept failed");
                    self.retry_accept = true;
                    return;
                }
            }
        }
    }

    fn admit(&mut self, mut stream: TcpStream, tls: bool) {
        self.store.stats.connections_received += 1;
        if self.live_conns() >= self.max_clients {
            self.store.stats.rejected_connections += 1;
            // Redis's words, best effort, then the connection is dropped.
            let _ = stream.write(b"-ERR max number of clients reached\r\n");
            return;
        }
        let _ = stream.set_nodelay(true);
        let conn = match &self.tls {
            Some((_, config)) if tls => Conn::tls(stream, config, self.limits),
            _ => Ok(Conn::plain(stream, self.limits)),
        };
        let Ok(mut conn) = conn else { return };
        let slot = self.free.pop().unwrap_or(self.conns.len());
        let token = Token(FIRST_CONN + slot);
        let interest = Interest::READABLE | Interest::WRITABLE;
        if let Err(e) = self
            .poll
            .registry()
            .register(conn.stream_mut(), token, interest)
        {
            tracing::warn!(error = %e, "cannot watch a new connection");
            return;
        }
        if slot == self.conns.len() {
            self.conns.push(Some(conn));
        } else {
            self.conns[slot] = Some(conn);
        }
        self.store.stats.connected_clients += 1;
    }

    fn live_conns(&self) -> usize {
        self.conns.len() - self.free.len()
    }

    /// Polls the SMT endpoint (receive, timers, send) and answers the
    /// requests it delivers, up to [`SMT_BUDGET`] of them; the answers
    /// leave with the next poll (or the flush when the budget runs out).
    fn serve_smt(&mut self, now: UnixMs) {
        let Some(smt) = &mut self.smt else { return };
        self.smt_backlog = true;
        for _ in 0..SMT_BUDGET {
            match smt.poll(Some(Duration::ZERO)) {
                Ok(Some(smt::LocalEvent::Request { request, data })) => {
                    self.store.stats.smt_requests += 1;
                    let reply = &mut self.smt_reply;
                    reply.clear();
                    session::run_message_into(&data, &mut self.store, now, self.limits, reply);
                    if let Err(e) = respond(smt, request, reply) {
                        tracing::debug!(error = %e, "SMT response not sent");
                    }
                }
                // A server makes no calls: nothing else concerns it.
                Ok(Some(_)) => {}
                Ok(None) => {
                    self.smt_backlog = false;
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the SMT endpoint failed");
                    self.smt_backlog = false;
                    break;
                }
            }
        }
        if self.smt_backlog {
            let _ = smt.flush();
        }
        self.watch_smt_writability();
    }

    /// Watches the SMT socket's writability only while its endpoint holds
    /// datagrams back (a UDP socket is writable after nearly every send:
    /// watching it always would wake the loop for nothing).
    fn watch_smt_writability(&mut self) {
        let Some(smt) = &self.smt else { return };
        let wanted = smt.wants_writable();
        if wanted == self.smt_writable {
            return;
        }
        let interest = match wanted {
            true => Interest::READABLE | Interest::WRITABLE,
            false => Interest::READABLE,
        };
        let fd = smt.as_fd().as_raw_fd();
        let watched = self
            .poll
            .registry()
            .reregister(&mut SourceFd(&fd), SMT, interest);
        match watched {
            Ok(()) => self.smt_writable = wanted,
            Err(e) => tracing::warn!(error = %e, "cannot watch the SMT socket"),
        }
    }
}

/// Answers `request` with `reply`. A reply the endpoint seals at once
/// (up to [`smt::Payload::EAGER_LIMIT`]) is lent, so the buffer is reused
/// for the next reply with no allocation; a larger one is given away, as
/// the endpoint would otherwise copy it to seal it record by record later.
fn respond(
    smt: &mut smt::LocalEndpoint,
    request: smt::RequestId,
    reply: &mut Vec<u8>,
) -> Result<(), smt::Error> {
    if reply.len() <= smt::Payload::EAGER_LIMIT {
        smt.respond(request, reply.as_slice())
    } else {
        smt.respond(request, std::mem::take(reply))
    }
}

fn listen(poll: &Poll, addr: SocketAddr, token: Token) -> Result<TcpListener, ServerError> {
    let mut listener = TcpListener::bind(addr).map_err(|e| ServerError::Bind(addr, e))?;
    poll.registry()
        .register(&mut listener, token, Interest::READABLE)?;
    Ok(listener)
}

/// The SMT endpoint, answering TLS 1.3 handshakes with the server's
/// certificate, its socket watched by the loop.
fn open_smt(
    poll: &Poll,
    addr: SocketAddr,
    identity: &Identity,
) -> Result<smt::LocalEndpoint, ServerError> {
    let mut endpoint = smt::LocalEndpoint::bind(addr, crate::client::endpoint_config(addr))
        .map_err(ServerError::Smt)?;
    endpoint.set_handshake_acceptor(Box::new(identity.smt_tls_server()?));
    let fd = endpoint.as_fd().as_raw_fd();
    poll.registry()
        .register(&mut SourceFd(&fd), SMT, Interest::READABLE)?;
    Ok(endpoint)
}

fn port(listener: Option<&TcpListener>) -> u16 {
    listener
        .and_then(|l| l.local_addr().ok())
        .map_or(0, |a| a.port())
}

/// Wall-clock milliseconds, read once per turn (TTLs are wall-clock
/// deadlines in Redis, so `EXAT` means what it says).
fn now_ms() -> UnixMs {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
