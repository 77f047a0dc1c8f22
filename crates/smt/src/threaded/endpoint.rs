//! The public endpoint handle: bind, call, accept, respond. A thin face
//! over the engine ([`crate::engine`]); who drives it when is `drive/`.

use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::{Arc, Weak};

use bytes::Bytes;
use smt_proto::{KeyResolver, Payload, SessionKeys};
use smt_udp::Features;

use super::drive::{Delivered, Got, Limits, Shared};
use super::request::IncomingRequest;
use crate::engine::{CallToken, Engine, SystemClock};
use crate::{CallOptions, EndpointConfig, Error, PeerStats, Stats};

/// The handles' common part: dropping the last one closes the endpoint
/// (see [`Shared::close_on_drop`]).
struct Handle {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    features: Features,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.close_on_drop();
    }
}

/// An SMT endpoint bound to one socket: a client, a server, or both.
///
/// Cheap to clone; every clone shares one engine. Calls from many threads
/// (or tasks) run concurrently, and requests from one peer are handed to
/// whichever thread calls [`Endpoint::accept`] next, so one peer's
/// messages are processed on several cores.
///
/// A thread blocked in [`Endpoint::call`] or [`Endpoint::accept`] drives
/// the endpoint itself while it waits (or lets another waiting thread do
/// it), so a blocking RPC costs no hand-off between threads. So does a
/// task awaiting [`Endpoint::call_async`] or [`Endpoint::accept_async`] on
/// a tokio runtime with IO and timers enabled (feature `tokio`, on by
/// default): it drives the endpoint on the runtime's reactor. A
/// background thread covers `ready_fd` users, async callers on other
/// executors, and timers while nobody waits.
///
/// # Closing
/// [`Endpoint::close`] (or [`Endpoint::close_async`]) closes gracefully:
/// in-flight RPCs get up to two seconds to finish, then the socket is
/// closed and the background thread ends. Dropping the last clone does
/// the same without waiting: with nothing in flight the socket is closed
/// and the thread joined before the drop returns (the port can be bound
/// again at once); otherwise the background thread finishes the close
/// within the grace period (requests the application holds may still be
/// answered until then; afterwards `respond` fails with
/// [`Error::Closed`]). Threads blocked in [`Endpoint::accept`] hold clones
/// of their own, so they keep the endpoint open until someone calls
/// `close`.
///
/// When the close ends, every waiter wakes with [`Error::Closed`]:
/// `accept` and `accept_async` (so an accept loop, threaded or tokio,
/// ends), calls awaiting their reply, and `call` or `call_async` waiting
/// for a place among the outstanding calls; an endpoint polled through
/// [`Endpoint::ready_fd`] turns readable and `try_accept` says `Closed`.
///
/// # Bounds
/// At most [`EndpointConfig::max_outstanding_calls`] calls run at once:
/// a further `call` blocks, and `call_async` waits, until one ends.
/// Requests waiting for the application are bounded by
/// `ProtocolConfig::max_pending_requests` (requests beyond it are refused
/// unexecuted, and their clients hear OVERLOADED).
///
/// # In async code
/// `call_async`, `accept_async` and `close_async` await. The other
/// methods never wait for the network or for other callers' RPCs: they
/// take the engine's lock, which another thread holds for one bounded
/// turn at a time (receiving a batch, sending a batch, expiring timers;
/// measured in `docs/architecture.md`), so `install_session`, `stats`
/// and the setters are fine to call from async code. `close` blocks for
/// up to two seconds: use `close_async` there.
#[derive(Clone)]
pub struct Endpoint {
    handle: Arc<Handle>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("local_addr", &self.handle.local_addr)
            .finish_non_exhaustive()
    }
}

/// A handle that does not keep its endpoint open (what a metrics
/// collector holds).
#[derive(Clone)]
pub(crate) struct WeakEndpoint(Weak<Handle>);

impl WeakEndpoint {
    /// The endpoint, while some handle still holds it.
    pub(crate) fn upgrade(&self) -> Option<Endpoint> {
        self.0.upgrade().map(|handle| Endpoint { handle })
    }
}

impl Endpoint {
    /// A handle that does not keep this endpoint open.
    pub(crate) fn downgrade(&self) -> WeakEndpoint {
        WeakEndpoint(Arc::downgrade(&self.handle))
    }

    /// Binds a socket and starts the background thread.
    pub fn bind(addr: SocketAddr, config: EndpointConfig) -> Result<Self, Error> {
        Self::bind_with(addr, config, true)
    }

    /// An endpoint without a background thread: only its callers drive
    /// it (the async-leader tests show they need nothing else). Its
    /// `close` does not wait for a thread that never ran.
    #[cfg(all(test, feature = "tokio"))]
    pub(crate) fn bind_without_background(
        addr: SocketAddr,
        config: EndpointConfig,
    ) -> Result<Self, Error> {
        Self::bind_with(addr, config, false)
    }

    fn bind_with(
        addr: SocketAddr,
        config: EndpointConfig,
        background: bool,
    ) -> Result<Self, Error> {
        let engine = Engine::bind(addr, &config, Box::new(SystemClock))?;
        let local_addr = engine.local_addr();
        let features = engine.features().clone();
        tracing::info!(%local_addr, "SMT endpoint bound: {features}");
        let limits = Limits {
            busy_poll: config.busy_poll(),
            max_outstanding_calls: config.max_outstanding_calls(),
            max_pending_requests: config.protocol().max_pending_requests(),
        };
        let shared = Shared::new(engine, limits)?;
        if background {
            shared.spawn_background(format!("smt-{local_addr}"))?;
        } else {
            shared.forget_background();
        }
        let handle = Handle {
            shared,
            local_addr,
            features,
        };
        Ok(Self {
            handle: Arc::new(handle),
        })
    }

    /// A request taken from the queue, answered through this endpoint.
    fn request(&self, delivered: Delivered) -> IncomingRequest {
        IncomingRequest::new(delivered, self.shared().clone())
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.handle.shared
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.handle.local_addr
    }

    /// What the socket layer uses (GSO/GRO, batching, buffer sizes).
    pub fn features(&self) -> &Features {
        &self.handle.features
    }

    /// Installs the session keys for `peer` (what `setsockopt` does after a
    /// handshake in the SMT paper's kernel design). Both endpoints need
    /// matching keys with opposite roles.
    ///
    /// Non-blocking as [`Endpoint::stats`] is (no network, only the
    /// engine's lock: measured in `docs/architecture.md`), so it has no
    /// async twin; it frees the peer's previous session's RPCs.
    pub fn install_session(&self, peer: SocketAddr, keys: SessionKeys) -> Result<(), Error> {
        self.shared().with_engine(|e| e.install_session(peer, keys))
    }

    /// Sets the resolver asked for keys when an unknown peer sends.
    pub fn set_key_resolver(&self, resolver: Box<dyn KeyResolver>) -> Result<(), Error> {
        self.shared().with_engine(|e| {
            e.set_key_resolver(resolver);
            Ok(())
        })
    }

    /// Makes this endpoint establish sessions itself: a call to a peer
    /// without a session first runs a TLS 1.3 handshake (the peer's
    /// certificate must be trusted by the client — its CA, or its own
    /// rustls verifier — and name the peer: the name set with
    /// [`Endpoint::set_server_name`] or [`Endpoint::resolve`], else its IP
    /// address); concurrent first calls share it; a failed handshake fails
    /// them with [`Error::Handshake`].
    pub fn set_tls_client(&self, client: smt_tls::TlsClient) -> Result<(), Error> {
        self.shared().with_engine(|e| {
            e.set_tls_client(client);
            Ok(())
        })
    }

    /// TLS handshakes with `peer` verify its certificate against `name`
    /// (a DNS name, also sent as SNI, or an IP address) instead of the
    /// peer's IP address: call a server by `(name, address)`.
    pub fn set_server_name(
        &self,
        peer: SocketAddr,
        name: crate::tls::ServerName<'static>,
    ) -> Result<(), Error> {
        self.shared().with_engine(|e| {
            e.set_server_name(peer, name);
            Ok(())
        })
    }

    /// Looks up `server` (`HOST:PORT`; the system resolver, an address of
    /// this endpoint's family) and returns its address to call. When HOST
    /// is a name, TLS handshakes with that address verify the certificate
    /// against it ([`Endpoint::set_server_name`]); an IP address is
    /// verified as itself. A malformed `server` is
    /// `io::ErrorKind::InvalidInput`, an unknown host the resolver's error.
    pub fn resolve(&self, server: &str) -> Result<SocketAddr, Error> {
        let (addr, name) = crate::tls::resolve(server, self.local_addr())?;
        if let Some(name) = name {
            self.set_server_name(addr, name)?;
        }
        Ok(addr)
    }

    /// Makes this endpoint establish sessions with the PSK nonce exchange:
    /// a call to a peer without a session first exchanges fresh nonces (one
    /// round trip) and derives keys from the master, both nonces and this
    /// client's address. The server side is
    /// [`ServerAcceptor::with_psk`](crate::ServerAcceptor::with_psk).
    pub fn set_psk_client(&self, client: crate::keys::PskClient) -> Result<(), Error> {
        self.shared().with_engine(|e| {
            e.set_psk_client(client);
            Ok(())
        })
    }

    /// Makes this endpoint answer TLS 1.3 handshakes from unknown peers
    /// (the server side; with a client CA it requires client certificates).
    pub fn set_tls_server(&self, server: smt_tls::TlsServer) -> Result<(), Error> {
        self.set_handshake_acceptor(Box::new(server))
    }

    /// Answers handshakes with any acceptor (e.g. one combining TLS and
    /// 0-RTT SMT tickets).
    pub fn set_handshake_acceptor(
        &self,
        acceptor: Box<dyn smt_proto::HandshakeAcceptor>,
    ) -> Result<(), Error> {
        self.shared().with_engine(|e| {
            e.set_handshake_acceptor(acceptor);
            Ok(())
        })
    }

    /// Uses a verified SMT-ticket (e.g. looked up in DNS with `smt-dns`)
    /// for the next session with `peer`: the first call sends its encrypted
    /// request in the first flight (0-RTT). With `forward_secrecy` the
    /// session switches to a forward-secret key after one round trip.
    pub fn set_zero_rtt_ticket(
        &self,
        peer: SocketAddr,
        ticket: smt_handshake::VerifiedTicket,
        forward_secrecy: bool,
    ) -> Result<(), Error> {
        self.shared().with_engine(|e| {
            e.set_zero_rtt_ticket(peer, ticket, forward_secrecy);
            Ok(())
        })
    }

    /// Sends `request` to `peer` and waits for the response. The request
    /// leaves from this thread, and this thread receives the response
    /// (unless another waiting thread is receiving for everyone).
    ///
    /// `request` may be borrowed (`&[u8]`, `&Vec<u8>`: copied once unless
    /// small) or owned (`Bytes`, `Vec<u8>`: sealed straight from its memory,
    /// no copy); see [`Payload`].
    ///
    /// The call has the endpoint's default timeout
    /// ([`EndpointConfig::call_timeout`]; [`Endpoint::call_with`] sets one
    /// per call). With [`EndpointConfig::max_outstanding_calls`] calls
    /// outstanding, it first waits for one of them to end.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use smt::{Endpoint, EndpointConfig};
    /// use smt::keys::{fresh_session_pair, AeadAlgorithm};
    /// let server = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::default())?;
    /// let client = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::default())?;
    /// let (client_keys, server_keys) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    /// client.install_session(server.local_addr(), client_keys)?;
    /// server.install_session(client.local_addr(), server_keys)?;
    /// let accepter = server.clone();
    /// let handler = std::thread::spawn(move || -> Result<(), smt::Error> {
    ///     let request = accepter.accept()?;
    ///     let reply = request.data().to_ascii_uppercase();
    ///     request.respond(reply)
    /// });
    /// let response = client.call(server.local_addr(), b"hello")?;
    /// assert_eq!(&response[..], b"HELLO");
    /// handler.join().expect("the handler thread panicked")?;
    /// server.close();
    /// # Ok(()) }
    /// ```
    pub fn call<'a>(
        &self,
        peer: SocketAddr,
        request: impl Into<Payload<'a>>,
    ) -> Result<Bytes, Error> {
        self.call_with(peer, request, CallOptions::new())
    }

    /// [`Endpoint::call`] with options, such as a timeout: a call whose
    /// response is not complete in time fails with [`Error::Timeout`],
    /// and its RPC is aborted at both ends (the server frees it and stops
    /// sending the response). A `Duration` converts into options with
    /// that timeout.
    pub fn call_with<'a>(
        &self,
        peer: SocketAddr,
        request: impl Into<Payload<'a>>,
        options: impl Into<CallOptions>,
    ) -> Result<Bytes, Error> {
        self.shared().call(peer, request.into(), options.into())
    }

    /// Sends `request` to `peer`; the future resolves to the response. The
    /// request leaves at once; the response is received by the background
    /// thread or by any thread blocked in `call` or `accept`.
    ///
    /// Dropping the future before it resolves cancels the call: its state
    /// is freed at once and the server is told (RPC_UNKNOWN), so it frees
    /// the RPC and stops sending the response. (It may have executed the
    /// request already.)
    ///
    /// With tokio (any runtime works: the endpoint's own thread does the I/O):
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use smt::{Endpoint, EndpointConfig};
    /// use smt::keys::{fresh_session_pair, AeadAlgorithm};
    /// let server = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::default())?;
    /// let client = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::default())?;
    /// let (client_keys, server_keys) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    /// client.install_session(server.local_addr(), client_keys)?;
    /// server.install_session(client.local_addr(), server_keys)?;
    /// let accepter = server.clone();
    /// let handler = tokio::spawn(async move {
    ///     // Ends with Error::Closed when the server is closed.
    ///     while let Ok(request) = accepter.accept_async().await {
    ///         let reply = request.data().to_ascii_uppercase();
    ///         if let Err(e) = request.respond(reply) {
    ///             eprintln!("no reply: {e}");
    ///         }
    ///     }
    /// });
    /// let response = client.call_async(server.local_addr(), b"hello").await?;
    /// assert_eq!(&response[..], b"HELLO");
    /// server.close_async().await;
    /// handler.await?;
    /// client.close_async().await;
    /// # Ok(()) }
    /// ```
    pub async fn call_async<'a>(
        &self,
        peer: SocketAddr,
        request: impl Into<Payload<'a>>,
    ) -> Result<Bytes, Error> {
        self.call_async_with(peer, request, CallOptions::new())
            .await
    }

    /// [`Endpoint::call_async`] with options, such as a timeout (see
    /// [`Endpoint::call_with`]).
    pub async fn call_async_with<'a>(
        &self,
        peer: SocketAddr,
        request: impl Into<Payload<'a>>,
        options: impl Into<CallOptions>,
    ) -> Result<Bytes, Error> {
        let shared = self.shared();
        if shared.is_closed() {
            return Err(Error::Closed);
        }
        let _permit = shared.permit().await;
        let (request, options) = (request.into(), options.into());
        // On a tokio runtime, this future drives the engine itself when
        // nobody else does (`drive/tasks.rs`).
        if let Some(wait) = shared.call_task(peer, request.clone(), options)? {
            return match wait.await? {
                Got::Reply(reply) => reply,
                Got::Request(_) => unreachable!("a call waits for its reply"),
            };
        }
        let (tx, rx) = flume::bounded(1);
        let _waiting = shared.async_waiter();
        let call = shared.call_detached(peer, request, options, tx)?;
        let mut pending = Pending {
            shared,
            call: Some(call),
        };
        let reply = rx.recv_async().await.map_err(|_| Error::Closed);
        pending.call = None;
        reply?
    }

    /// Waits for the next request. Several threads may wait at once; each
    /// request goes to one of them.
    pub fn accept(&self) -> Result<IncomingRequest, Error> {
        let delivered = self.shared().accept()?;
        self.shared().ready.consume();
        Ok(self.request(delivered))
    }

    /// Waits for the next request, asynchronously. Fails with
    /// [`Error::Closed`] once the endpoint is closed (`close` or
    /// `close_async` from anywhere ends the wait).
    ///
    /// A server task on tokio answering a client that makes blocking calls
    /// from a thread of its own:
    ///
    /// ```
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use smt::{Endpoint, EndpointConfig};
    /// use smt::keys::{fresh_session_pair, AeadAlgorithm};
    /// let server = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::default())?;
    /// let client = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::default())?;
    /// let (client_keys, server_keys) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    /// client.install_session(server.local_addr(), client_keys)?;
    /// server.install_session(client.local_addr(), server_keys)?;
    /// let to = server.local_addr();
    /// let caller = tokio::task::spawn_blocking(move || client.call(to, b"ping"));
    /// let request = server.accept_async().await?;
    /// assert_eq!(request.data(), b"ping");
    /// request.respond(&b"pong"[..])?;
    /// assert_eq!(&caller.await??[..], b"pong");
    /// server.close_async().await;
    /// # Ok(()) }
    /// ```
    pub async fn accept_async(&self) -> Result<IncomingRequest, Error> {
        let shared = self.shared();
        if let Ok(delivered) = shared.requests.try_recv() {
            shared.ready.consume();
            return Ok(self.request(delivered));
        }
        if let Some(wait) = shared.accept_task() {
            let delivered = match wait.await? {
                Got::Request(delivered) => delivered,
                Got::Reply(_) => unreachable!("an accept waits for a request"),
            };
            shared.ready.consume();
            return Ok(self.request(delivered));
        }
        let _waiting = shared.async_waiter();
        shared.poke();
        let delivered = shared
            .requests
            .recv_async()
            .await
            .map_err(|_| Error::Closed)?;
        shared.ready.consume();
        Ok(self.request(delivered))
    }

    /// The next request if one is waiting (for event loops that poll
    /// [`Endpoint::ready_fd`]).
    pub fn try_accept(&self) -> Result<Option<IncomingRequest>, Error> {
        let shared = self.shared();
        if shared.requests.is_empty() {
            shared.drive_once();
        }
        match shared.requests.try_recv() {
            Ok(delivered) => {
                shared.ready.consume();
                Ok(Some(self.request(delivered)))
            }
            Err(flume::TryRecvError::Empty) => {
                // Resynchronise the signal with the queue: drain, then
                // re-arm if a request slipped in meanwhile.
                shared.ready.drain();
                if !shared.requests.is_empty() {
                    shared.ready.notify();
                }
                if shared.is_closed() {
                    return Err(Error::Closed);
                }
                Ok(None)
            }
            Err(flume::TryRecvError::Disconnected) => Err(Error::Closed),
        }
    }

    /// A file descriptor that is readable while requests are waiting:
    /// register it with epoll/poll next to your other sockets, then call [`Endpoint::try_accept`].
    pub fn ready_fd(&self) -> BorrowedFd<'_> {
        let shared = self.shared();
        // A spurious first byte is harmless: try_accept resynchronises.
        shared.ready.enable(shared.requests.len());
        // From now on requests must be received while nobody waits.
        shared.poke();
        shared.ready.read.as_fd()
    }

    /// The endpoint's counters and what it holds now ([`Stats::peers`]
    /// left empty).
    ///
    /// Non-blocking in the sense that matters to async code: it never
    /// waits for the network or another caller's RPC, only for the
    /// engine's lock, which a driving thread holds for one bounded turn at
    /// a time (microseconds at the median, a few milliseconds at worst
    /// under load: measured in `docs/architecture.md`, "In async code").
    /// The copy it takes is O(1): a few hundred bytes.
    pub fn stats(&self) -> Result<Stats, Error> {
        self.shared().read_engine(|e| e.stats(0))
    }

    /// [`Endpoint::stats`] with up to `max_peers` peers' own counters in
    /// [`Stats::peers`], the busiest (bytes sent and received) first.
    /// Visits every session under the engine's lock: O(sessions), so ask
    /// for it at scrape intervals, not per request.
    pub fn stats_with_peers(&self, max_peers: usize) -> Result<Stats, Error> {
        self.shared().read_engine(|e| e.stats(max_peers))
    }

    /// The counters of `peer`'s session (`None` without one). O(1), and
    /// non-blocking as [`Endpoint::stats`] is.
    pub fn peer_stats(&self, peer: SocketAddr) -> Result<Option<PeerStats>, Error> {
        self.shared().read_engine(|e| e.peer_stats(peer))
    }

    /// The TLS offload engine's counters (mlx5's `tx_tls_*` and
    /// `rx_tls_*`), with [`crate::EndpointConfig::offload`] set; `None` without.
    /// Only with the `offload` feature (on by default).
    #[cfg(feature = "offload")]
    pub fn offload_counters(&self) -> Result<Option<crate::offload::OffloadCounters>, Error> {
        self.shared().with_engine(|e| Ok(e.offload_counters()))
    }

    /// Closes gracefully: no new RPCs start; in-flight ones get up to two
    /// seconds to finish (responses sent and acknowledged); calls still
    /// pending then fail with [`Error::Closed`]. Returns when the endpoint
    /// has stopped: its socket closed (the port is free) and its
    /// background thread gone. Blocks for up to two seconds: in async
    /// code, use [`Endpoint::close_async`].
    pub fn close(&self) {
        self.shared().close();
    }

    /// [`Endpoint::close`], awaiting the end instead of blocking.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use smt::{Endpoint, EndpointConfig, Error};
    /// let server = Endpoint::bind("127.0.0.1:0".parse()?, EndpointConfig::default())?;
    /// let accepter = server.clone();
    /// let waiting = tokio::spawn(async move { accepter.accept_async().await });
    /// server.close_async().await; // the socket is closed when this returns
    /// assert!(matches!(waiting.await?, Err(Error::Closed)));
    /// # Ok(()) }
    /// ```
    pub async fn close_async(&self) {
        self.shared().close_async().await;
    }
}

/// An async call whose future is still alive: dropped before the reply
/// arrived, it cancels the call.
struct Pending<'a> {
    shared: &'a Arc<Shared>,
    call: Option<CallToken>,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            self.shared.cancel(call);
        }
    }
}
