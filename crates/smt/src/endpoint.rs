//! The public endpoint handle: bind, call, accept, respond.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use mio::{Poll, Waker};
use smt_proto::{Endpoint as Core, KeyResolver, ServerRpcHandle, SessionKeys, Stats};
use smt_udp::{Features, Socket};

use crate::driver::{self, Driver};
use crate::io::Io;
use crate::{EndpointConfig, Error};

/// The SMT port of a raw-IP endpoint: the one asked for, or a random one
/// from the dynamic range.
fn raw_port(asked: u16) -> u16 {
    if asked != 0 {
        return asked;
    }
    let mut b = [0u8; 2];
    smt_crypto::fill_random(&mut b);
    49152 + u16::from_be_bytes(b) % 16384
}

/// Opens the socket and the protocol core for `addr`: the SMT port, port
/// checks in raw mode, the datagram size from the MTU.
pub(crate) fn open(
    addr: SocketAddr,
    config: &EndpointConfig,
) -> Result<(Socket, SocketAddr, Core), Error> {
    let socket = Socket::bind(addr, &config.socket)?;
    let local_addr = match config.socket.mode {
        // Raw IP has no kernel ports: the SMT header's ports demultiplex,
        // so an endpoint needs one of its own.
        smt_udp::Mode::RawIp { .. } => SocketAddr::new(addr.ip(), raw_port(addr.port())),
        smt_udp::Mode::Udp => socket.local_addr()?,
    };
    let mut protocol = config.protocol.clone();
    protocol.local_port = local_addr.port();
    protocol.verify_ports = matches!(config.socket.mode, smt_udp::Mode::RawIp { .. });
    if let Some(mtu) = config.mtu {
        protocol.max_datagram_size =
            EndpointConfig::datagram_size_for(mtu, local_addr, config.socket.mode);
    }
    let core = Core::new(protocol)
        .map_err(|e| Error::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, e)))?;
    Ok((socket, local_addr, core))
}

/// Requests from API handles to the driver thread.
pub(crate) enum Command {
    Call {
        peer: SocketAddr,
        data: Vec<u8>,
        reply: flume::Sender<Result<Vec<u8>, Error>>,
    },
    Respond {
        rpc: ServerRpcHandle,
        data: Vec<u8>,
    },
    Abandon(ServerRpcHandle),
    InstallSession {
        peer: SocketAddr,
        keys: SessionKeys,
        reply: flume::Sender<Result<(), Error>>,
    },
    SetResolver(Box<dyn KeyResolver>),
    SetTlsClient(smt_tls::TlsClient),
    SetPskClient(crate::keys::PskClient),
    SetAcceptor(Box<dyn smt_proto::HandshakeAcceptor>),
    SetTicket {
        peer: SocketAddr,
        ticket: Box<smt_ticket::VerifiedTicket>,
        forward_secrecy: bool,
    },
    Stats {
        peer: Option<SocketAddr>,
        reply: flume::Sender<(Stats, Option<Stats>)>,
    },
    Close,
}

/// A readiness signal the application can poll (epoll, poll, select):
/// readable while requests wait in the queue.
pub(crate) struct Ready {
    read: UnixStream,
    write: UnixStream,
    /// Someone asked for the descriptor.
    in_use: AtomicBool,
}

impl Ready {
    fn new() -> std::io::Result<Self> {
        let (read, write) = UnixStream::pair()?;
        read.set_nonblocking(true)?;
        write.set_nonblocking(true)?;
        Ok(Self {
            read,
            write,
            in_use: AtomicBool::new(false),
        })
    }

    /// Turns the signal on (the first `ready_fd` call): until then nobody
    /// watches it, and the two system calls per request are skipped.
    fn enable(&self, queued: usize) {
        if !self.in_use.swap(true, Ordering::AcqRel) {
            for _ in 0..queued.max(1) {
                self.signal();
            }
        }
    }

    /// One byte per queued request; a full pipe is still readable, so a
    /// dropped byte loses no wake-up.
    pub fn notify(&self) {
        if self.in_use.load(Ordering::Acquire) {
            self.signal();
        }
    }

    fn signal(&self) {
        let _ = (&self.write).write(&[1]);
    }

    fn consume(&self) {
        if self.in_use.load(Ordering::Acquire) {
            let _ = (&self.read).read(&mut [0u8; 1]);
        }
    }

    fn drain(&self) {
        let mut buf = [0u8; 64];
        while matches!((&self.read).read(&mut buf), Ok(n) if n > 0) {}
    }
}

/// State shared by every handle and the driver.
pub(crate) struct Shared {
    commands: flume::Sender<Command>,
    waker: Waker,
    requests: flume::Receiver<crate::IncomingRequest>,
    pub ready: Ready,
    pub local_addr: SocketAddr,
    features: Features,
    closed: AtomicBool,
    driver: Mutex<Option<JoinHandle<()>>>,
}

impl Shared {
    pub fn send(&self, cmd: Command) -> Result<(), Error> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        self.commands.send(cmd).map_err(|_| Error::Closed)?;
        self.waker.wake().map_err(Error::Io)
    }

    pub fn mark_closed(&self) {
        self.closed.store(true, Ordering::Release);
        // Wake anyone polling the ready fd so they notice.
        self.ready.signal();
    }
}

/// An SMT endpoint bound to one socket: a client, a server, or both.
///
/// Cheap to clone; every clone talks to the same driver thread. Calls from
/// many threads (or tasks) run concurrently, and requests from one peer are
/// handed to whichever thread calls [`Endpoint::accept`] next, so one
/// peer's messages are processed on several cores (seed 001 §2.2).
#[derive(Clone)]
pub struct Endpoint {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("local_addr", &self.shared.local_addr)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// Binds a socket and starts the driver thread.
    pub fn bind(addr: SocketAddr, config: EndpointConfig) -> Result<Self, Error> {
        let (socket, local_addr, core) = open(addr, &config)?;
        let poll = Poll::new()?;
        let waker = driver::register(&poll, &socket)?;
        let (cmd_tx, cmd_rx) = flume::unbounded();
        let (req_tx, req_rx) = flume::unbounded();
        let features = socket.features().clone();
        let shared = Arc::new(Shared {
            commands: cmd_tx,
            waker,
            requests: req_rx,
            ready: Ready::new()?,
            local_addr,
            features: features.clone(),
            closed: AtomicBool::new(false),
            driver: Mutex::new(None),
        });
        tracing::info!(%local_addr, "SMT endpoint bound: {features}");
        let driver = Driver {
            io: Io::new(socket, core.config().max_datagram_size),
            core,
            poll,
            shared: shared.clone(),
            commands: cmd_rx,
            requests: req_tx,
            busy_poll: config.busy_poll,
            pending: Default::default(),
            closing: None,
            tls_client: None,
            psk_client: None,
            tickets: Default::default(),
            key_pool: std::sync::Arc::new(smt_ticket::KeyPool::new(16)),
            waiting: Default::default(),
            deferred: Default::default(),
        };
        let handle = std::thread::Builder::new()
            .name(format!("smt-driver-{local_addr}"))
            .spawn(move || driver.run())?;
        *shared.driver.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
        Ok(Self { shared })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// What the socket layer uses (GSO/GRO, batching, buffer sizes).
    pub fn features(&self) -> &Features {
        &self.shared.features
    }

    /// Installs the session keys for `peer` (the paper's `setsockopt` after
    /// a handshake). Both endpoints need matching keys with opposite roles.
    pub fn install_session(&self, peer: SocketAddr, keys: SessionKeys) -> Result<(), Error> {
        let (tx, rx) = flume::bounded(1);
        self.shared.send(Command::InstallSession {
            peer,
            keys,
            reply: tx,
        })?;
        rx.recv().map_err(|_| Error::Closed)?
    }

    /// Sets the resolver asked for keys when an unknown peer sends.
    pub fn set_key_resolver(&self, resolver: Box<dyn KeyResolver>) -> Result<(), Error> {
        self.shared.send(Command::SetResolver(resolver))
    }

    /// Makes this endpoint establish sessions itself: a call to a peer
    /// without a session first runs a TLS 1.3 handshake (the peer's
    /// certificate must chain to the client's CA and name the peer's IP
    /// address); concurrent first calls share it; a failed handshake fails
    /// them with [`Error::Handshake`].
    pub fn set_tls_client(&self, client: smt_tls::TlsClient) -> Result<(), Error> {
        self.shared.send(Command::SetTlsClient(client))
    }

    /// Makes this endpoint establish sessions with the PSK nonce exchange:
    /// a call to a peer without a session first exchanges fresh nonces (one
    /// round trip) and derives keys from the master, both nonces and this
    /// client's address. The server side is
    /// [`ServerAcceptor::with_psk`](crate::ServerAcceptor::with_psk).
    pub fn set_psk_client(&self, client: crate::keys::PskClient) -> Result<(), Error> {
        self.shared.send(Command::SetPskClient(client))
    }

    /// Makes this endpoint answer TLS 1.3 handshakes from unknown peers
    /// (the server side; with a client CA it requires client certificates).
    pub fn set_tls_server(&self, server: smt_tls::TlsServer) -> Result<(), Error> {
        self.shared.send(Command::SetAcceptor(Box::new(server)))
    }

    /// Answers handshakes with any acceptor (e.g. one combining TLS and
    /// 0-RTT SMT tickets).
    pub fn set_handshake_acceptor(
        &self,
        acceptor: Box<dyn smt_proto::HandshakeAcceptor>,
    ) -> Result<(), Error> {
        self.shared.send(Command::SetAcceptor(acceptor))
    }

    /// Uses a verified SMT-ticket (e.g. looked up in DNS with `smt-dns`)
    /// for the next session with `peer`: the first call sends its encrypted
    /// request in the first flight (0-RTT). With `forward_secrecy` the
    /// session switches to a forward-secret key after one round trip.
    pub fn set_zero_rtt_ticket(
        &self,
        peer: SocketAddr,
        ticket: smt_ticket::VerifiedTicket,
        forward_secrecy: bool,
    ) -> Result<(), Error> {
        self.shared.send(Command::SetTicket {
            peer,
            ticket: Box::new(ticket),
            forward_secrecy,
        })
    }

    /// Sends `request` to `peer` and waits for the response.
    pub fn call(&self, peer: SocketAddr, request: &[u8]) -> Result<Vec<u8>, Error> {
        self.start_call(peer, request)?
            .recv()
            .map_err(|_| Error::Closed)?
    }

    /// Sends `request` to `peer`; the future resolves to the response.
    pub async fn call_async(&self, peer: SocketAddr, request: &[u8]) -> Result<Vec<u8>, Error> {
        let rx = self.start_call(peer, request)?;
        rx.recv_async().await.map_err(|_| Error::Closed)?
    }

    fn start_call(
        &self,
        peer: SocketAddr,
        request: &[u8],
    ) -> Result<flume::Receiver<Result<Vec<u8>, Error>>, Error> {
        let (tx, rx) = flume::bounded(1);
        self.shared.send(Command::Call {
            peer,
            data: request.to_vec(),
            reply: tx,
        })?;
        Ok(rx)
    }

    /// Waits for the next request. Several threads may wait at once; each
    /// request goes to one of them.
    pub fn accept(&self) -> Result<crate::IncomingRequest, Error> {
        let req = self.shared.requests.recv().map_err(|_| Error::Closed)?;
        self.shared.ready.consume();
        Ok(req)
    }

    /// Waits for the next request, asynchronously.
    pub async fn accept_async(&self) -> Result<crate::IncomingRequest, Error> {
        let req = self
            .shared
            .requests
            .recv_async()
            .await
            .map_err(|_| Error::Closed)?;
        self.shared.ready.consume();
        Ok(req)
    }

    /// The next request if one is waiting (for event loops that poll
    /// [`Endpoint::ready_fd`]).
    pub fn try_accept(&self) -> Result<Option<crate::IncomingRequest>, Error> {
        match self.shared.requests.try_recv() {
            Ok(req) => {
                self.shared.ready.consume();
                Ok(Some(req))
            }
            Err(flume::TryRecvError::Empty) => {
                // Resynchronise the signal with the queue: drain, then
                // re-arm if a request slipped in meanwhile.
                self.shared.ready.drain();
                if !self.shared.requests.is_empty() {
                    self.shared.ready.notify();
                }
                if self.shared.closed.load(Ordering::Acquire) {
                    return Err(Error::Closed);
                }
                Ok(None)
            }
            Err(flume::TryRecvError::Disconnected) => Err(Error::Closed),
        }
    }

    /// A file descriptor that is readable while requests are waiting:
    /// register it with epoll/poll next to your other sockets (the paper's
    /// Redis port), then call [`Endpoint::try_accept`].
    pub fn ready_fd(&self) -> BorrowedFd<'_> {
        // A spurious first byte is harmless: try_accept resynchronises.
        self.shared.ready.enable(self.shared.requests.len());
        self.shared.ready.read.as_fd()
    }

    /// Endpoint-wide counters, and those of `peer`'s session if given.
    pub fn stats(&self, peer: Option<SocketAddr>) -> Result<(Stats, Option<Stats>), Error> {
        let (tx, rx) = flume::bounded(1);
        self.shared.send(Command::Stats { peer, reply: tx })?;
        rx.recv().map_err(|_| Error::Closed)
    }

    /// Closes gracefully: no new RPCs start; in-flight ones get up to two
    /// seconds to finish (responses sent and acknowledged); calls still
    /// pending then fail with [`Error::Closed`]. Returns when the driver
    /// has stopped.
    pub fn close(&self) {
        if self.shared.send(Command::Close).is_ok() {
            let handle = self
                .shared
                .driver
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(h) = handle {
                let _ = h.join();
            }
        }
    }
}
