//! Message-level parallelism: one peer's messages processed on several
//! cores at once (SMT paper §2.2, §4.4).
//!
//! ```text
//!            socket (UDP, GRO/GSO) ◄──────────── sendmsg from every shard
//!               │ recvmmsg
//!          dispatcher thread: split datagrams into packets, route each by
//!               │ its plaintext message ID: shard = (id >> 1) mod N;
//!               │ ACK batches and KEY_UPDATE to every shard
//!     ┌─────────┼──────────┐
//!  shard 0   shard 1 …  shard N-1     each: its own engine (the default
//!  (thread)  (thread)   (thread)      Endpoint's: admission, GSO batches;
//!                                     same session keys), opens, calls
//!                                     the handler, seals, sends
//! ```
//!
//! Every message ID belongs to exactly one shard, and every packet naming
//! it goes there, so each shard's RPC tables, replay windows (which see
//! every ID the shard owns and no other) and reassembly buffers are its
//! own: no lock is shared across messages. The client is an ordinary SMT
//! endpoint; it cannot tell.
//!
//! Each shard drives the same engine (`crate::engine`) a default
//! [`crate::Endpoint`] drives, with its own face (`shard.rs`): the batches
//! the dispatcher routes to it pass the engine's admission (validated
//! peers first, strangers within `unvalidated_per_batch`) and its
//! responses leave in the engine's GSO batches (`smt_udp::GsoBatch`) on the
//! shared socket.
//!
//! What this shape does not do (see `docs/architecture.md`):
//! - **Keys are installed or resolved** ([`WorkerServer::install_session`],
//!   [`WorkerServer::set_key_resolver`]); no handshake runs here
//!   (HANDSHAKE packets reach shard 0, which has no acceptor and drops
//!   them).
//! - **Shards only serve.** They start no RPCs: IDs a server allocates
//!   would need an allocator per residue class.
//! - **Rekeying** is followed (KEY_UPDATE reaches every shard) but the
//!   records a key sealed are counted per shard, so a server-side rekey
//!   for the record limit is not triggered by the sum.
//! - Limits (`max_incoming_per_peer`, buffers) apply per shard.

mod dispatch;
mod inbox;
mod route;
mod shard;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use smt_proto::{KeyResolver, SessionKeys};
use smt_udp::Socket;

use crate::engine::{Engine, SystemClock};
use crate::error::ConfigError;
use crate::wait::WakeFd;
use crate::{EndpointConfig, Error};
use dispatch::{Counters, Dispatcher};
use inbox::{Bell, ToShard};
use shard::{Feed, Shard};

pub use dispatch::DispatchStats;
pub use route::shard_of;
pub use shard::ShardStats;

/// Batches one shard's inbox holds before the dispatcher drops more (a
/// receive call's worth of packets per batch).
const INBOX_BATCHES: usize = 1024;

/// The application: answers one request. Runs on the shard's thread,
/// several at once for different messages of the same peer.
pub trait Handler: Send + Sync + 'static {
    /// The response to `request` from `peer`. The returned buffer goes
    /// back to the shard's buffer pool once sealed.
    fn handle(&self, peer: SocketAddr, request: Vec<u8>) -> Vec<u8>;
}

impl<F: Fn(SocketAddr, Vec<u8>) -> Vec<u8> + Send + Sync + 'static> Handler for F {
    fn handle(&self, peer: SocketAddr, request: Vec<u8>) -> Vec<u8> {
        self(peer, request)
    }
}

/// How a [`WorkerServer`] is built: `Default` and `set_*` setters, as
/// [`EndpointConfig`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct WorkerConfig {
    endpoint: EndpointConfig,
    shards: usize,
    spread: Spread,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            endpoint: EndpointConfig::default(),
            shards: std::thread::available_parallelism().map_or(1, |n| n.get()),
            spread: Spread::Messages,
        }
    }
}

impl WorkerConfig {
    /// Socket, MTU and protocol settings, as for [`crate::Endpoint`]. UDP
    /// mode only, without TLS offload.
    pub fn endpoint(&self) -> &EndpointConfig {
        &self.endpoint
    }

    /// [`WorkerConfig::endpoint`], to change in place.
    pub fn endpoint_mut(&mut self) -> &mut EndpointConfig {
        &mut self.endpoint
    }

    /// Sets [`WorkerConfig::endpoint`].
    pub fn set_endpoint(&mut self, endpoint: EndpointConfig) -> &mut Self {
        self.endpoint = endpoint;
        self
    }

    /// Worker threads (shards), one per core you give the server. Default:
    /// the available parallelism; at least 1.
    pub fn shards(&self) -> usize {
        self.shards
    }

    /// Sets [`WorkerConfig::shards`].
    pub fn set_shards(&mut self, shards: usize) -> &mut Self {
        self.shards = shards;
        self
    }

    /// How work is spread over the shards. Default: [`Spread::Messages`].
    pub fn spread(&self) -> Spread {
        self.spread
    }

    /// Sets [`WorkerConfig::spread`].
    pub fn set_spread(&mut self, spread: Spread) -> &mut Self {
        self.spread = spread;
        self
    }
}

/// How a [`WorkerServer`] spreads work over its shards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Spread {
    /// One socket; a dispatcher thread routes every packet by its message
    /// ID, so one peer's messages run on every shard at once.
    #[default]
    Messages,
    /// One `SO_REUSEPORT` socket per shard and no dispatcher: the kernel
    /// keeps each peer on one shard (by its addresses), so this spreads
    /// many peers, not one peer's messages. Each shard's engine reads its
    /// own socket (GRO, `recvmmsg`) as a default endpoint does.
    ReusePort,
}

/// What a closed server's threads report.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct WorkerStats {
    /// The dispatcher's counts (datagrams read, packets routed, broadcast,
    /// dropped for a full inbox).
    pub dispatch: DispatchStats,
    /// One entry per shard, in shard order.
    pub shards: Vec<ShardStats>,
}

/// A server spreading one socket's messages over worker threads (module
/// docs). Closing it (or dropping it) stops and joins every thread.
#[derive(Debug)]
pub struct WorkerServer {
    local_addr: SocketAddr,
    inboxes: Vec<flume::Sender<ToShard>>,
    closing: Arc<AtomicBool>,
    counters: Arc<Counters>,
    dispatcher: Option<JoinHandle<()>>,
    shards: Vec<JoinHandle<ShardStats>>,
    /// The wake-ups of the shards (they sleep on them, and on their own
    /// sockets with `ReusePort`) and of the dispatcher, rung for commands
    /// and the close.
    wakes: Vec<Arc<WakeFd>>,
}

impl std::fmt::Debug for ToShard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Packets(_) => "Packets",
            Self::Install(..) => "Install",
            Self::Resolver(_) => "Resolver",
        })
    }
}

impl WorkerServer {
    /// Binds `addr` and starts `config.shards` worker threads (and, for
    /// [`Spread::Messages`], the dispatcher), each running `handler` on the
    /// requests it owns.
    pub fn bind(
        addr: SocketAddr,
        config: WorkerConfig,
        handler: impl Handler,
    ) -> Result<Self, Error> {
        check(&config, addr)?;
        let handler: Arc<dyn Handler> = Arc::new(handler);
        match config.spread {
            Spread::Messages => Self::bind_messages(addr, &config, handler),
            Spread::ReusePort => Self::bind_reuseport(addr, &config, handler),
        }
    }

    fn bind_messages(
        addr: SocketAddr,
        config: &WorkerConfig,
        handler: Arc<dyn Handler>,
    ) -> Result<Self, Error> {
        let socket = Arc::new(Socket::bind(addr, config.endpoint.socket())?);
        let local_addr = socket.local_addr()?;
        let tagged_control = config
            .endpoint
            .core_config(local_addr)?
            .authenticate_control;
        let (spare_tx, spare_rx) = flume::unbounded();
        let mut inboxes = Vec::new();
        let (mut shards, mut wakes, mut bells) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..config.shards {
            let (tx, rx) = flume::bounded(INBOX_BATCHES);
            let engine =
                Engine::sending_on(socket.clone(), &config.endpoint, Box::new(SystemClock))?;
            let wake = Arc::new(WakeFd::new()?);
            let bell = Arc::new(Bell::new(wake.clone()));
            let feed = Feed::Routed {
                spare: spare_tx.clone(),
                bell: bell.clone(),
            };
            let shard = Shard::new(engine, rx, feed, handler.clone());
            shards.push(spawn_shard(i, shard)?);
            inboxes.push(tx);
            wakes.push(wake);
            bells.push(bell);
        }
        let closing = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let wake = Arc::new(WakeFd::new()?);
        wakes.push(wake.clone());
        let dispatcher = Dispatcher {
            socket,
            shards: inboxes.clone(),
            bells,
            spare: spare_rx,
            tagged_control,
            closing: closing.clone(),
            counters: counters.clone(),
            wake,
        };
        let dispatcher = std::thread::Builder::new()
            .name("smt-dispatch".into())
            .spawn(move || dispatcher.run())?;
        tracing::info!(%local_addr, shards = config.shards, "SMT worker server bound (spread by message)");
        Ok(Self {
            local_addr,
            inboxes,
            closing,
            counters,
            dispatcher: Some(dispatcher),
            shards,
            wakes,
        })
    }

    /// One engine per shard, each bound to `addr`'s port with
    /// `SO_REUSEPORT` (port 0: the first picks a free port and the others
    /// join it).
    fn bind_reuseport(
        addr: SocketAddr,
        config: &WorkerConfig,
        handler: Arc<dyn Handler>,
    ) -> Result<Self, Error> {
        let mut endpoint = config.endpoint.clone();
        endpoint.socket_mut().set_reuse_port(true);
        let closing = Arc::new(AtomicBool::new(false));
        let (mut inboxes, mut shards, mut wakes) = (Vec::new(), Vec::new(), Vec::new());
        let mut addr = addr;
        for i in 0..config.shards {
            let engine = Engine::bind(addr, &endpoint, Box::new(SystemClock))?;
            addr = engine.local_addr();
            let (tx, rx) = flume::bounded(INBOX_BATCHES);
            let wake = Arc::new(WakeFd::new()?);
            let feed = Feed::OwnSocket {
                wake: wake.clone(),
                closing: closing.clone(),
            };
            shards.push(spawn_shard(
                i,
                Shard::new(engine, rx, feed, handler.clone()),
            )?);
            inboxes.push(tx);
            wakes.push(wake);
        }
        tracing::info!(local_addr = %addr, shards = config.shards, "SMT worker server bound (SO_REUSEPORT)");
        Ok(Self {
            local_addr: addr,
            inboxes,
            closing,
            counters: Arc::default(),
            dispatcher: None,
            shards,
            wakes,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Installs `peer`'s session keys in every shard (each keeps its own
    /// copy of the session: keys, replay windows, counters). Waits until
    /// every shard has them, so packets read afterwards find them.
    pub fn install_session(&self, peer: SocketAddr, keys: SessionKeys) -> Result<(), Error> {
        let (reply_tx, reply_rx) = flume::bounded(self.inboxes.len());
        for inbox in &self.inboxes {
            let message = ToShard::Install(peer, keys.clone(), reply_tx.clone());
            inbox.send(message).map_err(|_| Error::Closed)?;
        }
        self.wakes.iter().for_each(|w| w.wake());
        for _ in &self.inboxes {
            reply_rx.recv().map_err(|_| Error::Closed)??;
        }
        Ok(())
    }

    /// Gives every shard its own resolver from `make`, asked for keys when
    /// an unknown peer sends. Every shard must derive the same keys for a
    /// peer (e.g. [`crate::keys::PskResolver`]).
    pub fn set_key_resolver<F>(&self, make: F) -> Result<(), Error>
    where
        F: Fn() -> Box<dyn KeyResolver>,
    {
        for inbox in &self.inboxes {
            inbox
                .send(ToShard::Resolver(make()))
                .map_err(|_| Error::Closed)?;
        }
        self.wakes.iter().for_each(|w| w.wake());
        Ok(())
    }

    /// The dispatcher's counters so far.
    pub fn dispatch_stats(&self) -> DispatchStats {
        self.counters.snapshot()
    }

    /// Stops the dispatcher, lets every shard finish what it has read, and
    /// returns their counters.
    pub fn close(mut self) -> WorkerStats {
        self.shutdown()
    }

    fn shutdown(&mut self) -> WorkerStats {
        self.closing.store(true, Ordering::Relaxed);
        self.wakes.iter().for_each(|w| w.wake());
        if let Some(d) = self.dispatcher.take() {
            let _ = d.join();
        }
        // The dispatcher's senders are gone; these are the last: each
        // shard stops when its inbox is empty and closed.
        self.inboxes.clear();
        // Sleeping shards look again, and find their inbox closed.
        self.wakes.iter().for_each(|w| w.wake());
        let shards = self
            .shards
            .drain(..)
            .map(|t| t.join().unwrap_or_default())
            .collect();
        WorkerStats {
            dispatch: self.counters.snapshot(),
            shards,
        }
    }
}

impl Drop for WorkerServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Starts shard `i`'s thread.
fn spawn_shard(i: usize, shard: Shard) -> std::io::Result<JoinHandle<ShardStats>> {
    std::thread::Builder::new()
        .name(format!("smt-shard-{i}"))
        .spawn(move || shard.run())
}

/// Refuses a worker configuration that cannot work, before any socket is
/// opened.
fn check(config: &WorkerConfig, addr: SocketAddr) -> Result<(), Error> {
    if config.shards == 0 {
        return Err(ConfigError::new(
            "WorkerConfig::shards",
            "is 0; give the server at least one worker thread",
        )
        .into());
    }
    if !matches!(config.endpoint.socket().mode(), smt_udp::Mode::Udp) {
        return Err(ConfigError::new(
            "SocketConfig::mode",
            "is raw IP; the worker server runs over UDP only: set it to Mode::Udp",
        )
        .into());
    }
    if config.endpoint.offload().is_some() {
        return Err(ConfigError::new(
            "EndpointConfig::offload",
            "is set; the worker server seals in software only: set it to None",
        )
        .into());
    }
    config.endpoint.validate(addr)
}
