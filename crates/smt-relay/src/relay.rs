//! A fault-injecting UDP relay for tests on real sockets.
//!
//! `tc netem` is not always available, so real-socket tests put this relay
//! between a client and a server instead. Clients send to
//! [`Relay::local_addr`]; the relay forwards each datagram to the upstream
//! (server) address from a socket dedicated to that client, so the server sees
//! one distinct address per client, and whatever the server sends back to that
//! socket goes to that client.
//!
//! Each direction has its own [`Impairment`] and its own generator seeded from
//! [`RelayConfig::seed`]. The `k`-th datagram the relay reads in a direction
//! always gets the same decisions (lose, hold, duplicate, which bit to flip)
//! for a given seed; only the real timing of arrivals may vary between runs.
//!
//! # Threads and limits
//!
//! One thread reads the listening socket, one thread per client reads that
//! client's upstream socket, and one scheduler thread sends held or delayed
//! datagrams when they are due. Every socket read has a 5 ms timeout so that
//! [`Relay::stop`] (or dropping the relay) returns promptly.
//!
//! Memory is bounded: at most [`MAX_HELD_DATAGRAMS`] datagrams and
//! [`MAX_HELD_BYTES`] bytes wait in the hold queue, and at most
//! [`MAX_CLIENTS`] clients get an upstream socket; anything beyond that is
//! counted as lost. Socket buffers are sized to 8 MiB (forced past
//! `rmem_max` when privileged, via `smt_udp::size_buffers`): with the 208 KiB
//! default, bursts of a busy test overflowed them and the kernel dropped
//! datagrams that appear in no counter. An unprivileged relay on a host with
//! a low `rmem_max` can still lose datagrams that way.
//!
//! Network input never panics the relay, and a failed send is counted in
//! [`DirectionStats::send_errors`], never fatal.
//!
//! # Attacks
//!
//! The relay is also the on-path attacker of `crate::attack`: a [`Tamper`]
//! hook ([`Relay::spawn_with_tamper`]) sees every datagram before the
//! impairment and may pass, drop or replace it, and [`Relay::inject`] sends
//! any bytes in either direction as if they came from that client's route
//! (to the server from the client's upstream socket, to a client from the
//! listening socket), which is how captured packets are replayed, spliced
//! between clients and directions, or reflected.

use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::SplitMix64;

/// Most datagrams waiting in the hold queue; more are counted as lost.
pub const MAX_HELD_DATAGRAMS: usize = 100_000;
/// Most payload bytes waiting in the hold queue; more are counted as lost.
pub const MAX_HELD_BYTES: usize = 64 << 20;
/// Most distinct clients; datagrams from further clients are counted as lost.
pub const MAX_CLIENTS: usize = 1024;
/// Longest `delay` or `reorder_delay` a relay accepts.
pub const MAX_DELAY: Duration = Duration::from_secs(3600);

/// How long a socket read blocks before checking whether to stop.
const POLL: Duration = Duration::from_millis(5);
/// Large enough for any UDP payload.
const RECV_BUF: usize = 1 << 16;

/// Impairments applied to one direction. `Default` is a clean link.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Impairment {
    /// Probability a datagram is dropped.
    pub loss: f64,
    /// Probability a datagram is held back for a uniform time in
    /// `[0, reorder_delay)`, letting later datagrams overtake it.
    pub reorder: f64,
    /// How long a reordered datagram is held at most.
    pub reorder_delay: Duration,
    /// Probability a datagram is sent twice (the copy right after it).
    pub duplicate: f64,
    /// Probability one uniformly chosen bit of a datagram is flipped.
    pub corrupt: f64,
    /// Fixed extra one-way delay for every datagram.
    pub delay: Duration,
}

/// Where the relay listens, where it forwards to, and how it impairs.
#[derive(Clone, Debug, PartialEq)]
pub struct RelayConfig {
    /// Address clients send to; port 0 picks a free port.
    pub listen: SocketAddr,
    /// The server's address.
    pub upstream: SocketAddr,
    /// Impairment of client → server datagrams.
    pub to_server: Impairment,
    /// Impairment of server → client datagrams.
    pub to_client: Impairment,
    /// Seed of the impairment's random choices (same seed, same choices).
    pub seed: u64,
    /// Keep a copy of every datagram as read, before impairment.
    pub capture: bool,
    /// Most datagrams kept when `capture` is on; later ones are not kept.
    pub capture_limit: usize,
    /// Forward each client's datagrams from the port it sent from (on the
    /// listening address's IP, which must then differ from the client's):
    /// both ends see the same pair of ports, so their captures and traces
    /// name the flow alike (`smt dump --trace` merges them by port).
    pub keep_ports: bool,
}

impl RelayConfig {
    /// A clean relay to `upstream`, listening on a free loopback port of the
    /// same address family, with seed 1 and capture off.
    pub fn new(upstream: SocketAddr) -> Self {
        let loopback = match upstream {
            SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        };
        Self {
            listen: SocketAddr::new(loopback, 0),
            upstream,
            to_server: Impairment::default(),
            to_client: Impairment::default(),
            seed: 1,
            capture: false,
            capture_limit: 10_000,
            keep_ports: false,
        }
    }

    /// The same impairment in both directions.
    pub fn both_ways(mut self, impairment: Impairment) -> Self {
        self.to_server = impairment.clone();
        self.to_client = impairment;
        self
    }
}

/// Which way a datagram travels through the relay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the client to the server.
    ToServer,
    /// From the server to the client.
    ToClient,
}

/// A datagram as the relay read it, before any impairment.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Captured {
    /// Which way it travelled.
    pub direction: Direction,
    /// The client this datagram came from or is going to.
    pub client: SocketAddr,
    /// The datagram's bytes as read.
    pub bytes: Vec<u8>,
}

/// Counters of one direction.
///
/// Once the relay has stopped, `received == forwarded + lost + send_errors`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DirectionStats {
    /// Datagrams the relay read.
    pub received: u64,
    /// Datagrams sent on (duplicate copies not included).
    pub forwarded: u64,
    /// Datagrams dropped: by the `loss` impairment, because the hold queue or
    /// client table was full, or because they were still held at stop.
    pub lost: u64,
    /// Datagrams the `reorder` impairment held back.
    pub reordered: u64,
    /// Extra copies actually sent.
    pub duplicated: u64,
    /// Datagrams with one bit flipped.
    pub corrupted: u64,
    /// Datagrams whose send failed (failed duplicate copies are not counted).
    pub send_errors: u64,
}

/// Counters of both directions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelayStats {
    /// Client → server counters.
    pub to_server: DirectionStats,
    /// Server → client counters.
    pub to_client: DirectionStats,
}

/// What a [`Tamper`] hook decides for one datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Forward it (through the direction's impairment).
    Pass,
    /// Drop it silently (counted as lost).
    Drop,
    /// Forward these bytes instead.
    Replace(Vec<u8>),
}

/// An on-path attacker's hook: called on the relay's reader threads for
/// every datagram, after capture and before the impairment.
pub trait Tamper: Send + Sync {
    /// What to do with this datagram (pass, drop or replace it).
    fn tamper(&self, direction: Direction, client: SocketAddr, bytes: &[u8]) -> Action;
}

impl<F> Tamper for F
where
    F: Fn(Direction, SocketAddr, &[u8]) -> Action + Send + Sync,
{
    fn tamper(&self, direction: Direction, client: SocketAddr, bytes: &[u8]) -> Action {
        self(direction, client, bytes)
    }
}

/// A running relay. It stops on [`Relay::stop`] or when dropped.
pub struct Relay {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    listener: Option<JoinHandle<()>>,
    scheduler: Option<JoinHandle<()>>,
}

impl Relay {
    /// Binds `config.listen` and starts forwarding.
    ///
    /// Fails with `InvalidInput` if an impairment is out of range, or with the
    /// socket error if binding fails.
    pub fn spawn(config: RelayConfig) -> io::Result<Relay> {
        Self::spawn_inner(config, None)
    }

    /// Like [`Relay::spawn`], with `tamper` deciding the fate of every
    /// datagram before the impairment.
    pub fn spawn_with_tamper(config: RelayConfig, tamper: Arc<dyn Tamper>) -> io::Result<Relay> {
        Self::spawn_inner(config, Some(tamper))
    }

    fn spawn_inner(config: RelayConfig, tamper: Option<Arc<dyn Tamper>>) -> io::Result<Relay> {
        config.to_server.check("to_server")?;
        config.to_client.check("to_client")?;
        let listen = Arc::new(UdpSocket::bind(config.listen)?);
        size_relay_buffers(&listen);
        listen.set_read_timeout(Some(POLL))?;
        let local_addr = listen.local_addr()?;
        let mut seeds = SplitMix64::new(config.seed);
        let shared = Arc::new(Shared {
            stop_readers: AtomicBool::new(false),
            stop_scheduler: AtomicBool::new(false),
            to_server: Path::new(Direction::ToServer, &config.to_server, seeds.next_u64()),
            to_client: Path::new(Direction::ToClient, &config.to_client, seeds.next_u64()),
            capture: config.capture.then(|| Mutex::new(Vec::new())),
            capture_limit: config.capture_limit,
            queue: Mutex::new(HoldQueue::default()),
            wake: Condvar::new(),
            clients: Mutex::new(Vec::new()),
            routes: Mutex::new(HashMap::new()),
            listen: Arc::clone(&listen),
            upstream: config.upstream,
            tamper,
            keep_ports: config.keep_ports.then_some(local_addr.ip()),
        });
        let mut relay = Relay {
            shared: Arc::clone(&shared),
            local_addr,
            listener: None,
            scheduler: None,
        };
        let scheduler = Arc::clone(&shared);
        relay.scheduler = Some(
            thread::Builder::new()
                .name("smt-relay-sched".into())
                .spawn(move || scheduler.run_scheduler())?,
        );
        let upstream = config.upstream;
        relay.listener = Some(
            thread::Builder::new()
                .name("smt-relay-listen".into())
                .spawn(move || shared.run_listener(listen, upstream))?,
        );
        Ok(relay)
    }

    /// The address clients send to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The counters. While the relay runs they are read one by one, so a
    /// datagram in flight may show as received but not yet forwarded.
    pub fn stats(&self) -> RelayStats {
        RelayStats {
            to_server: self.shared.to_server.counters.snapshot(),
            to_client: self.shared.to_client.counters.snapshot(),
        }
    }

    /// Sends `bytes` on `client`'s route in `direction`, bypassing tamper,
    /// impairment and counters: to the server from the upstream socket the
    /// relay opened for `client` (so the server sees it from that client),
    /// or to `client` from the listening socket. Fails with `NotFound` if
    /// `client` has not sent anything through the relay yet.
    pub fn inject(&self, direction: Direction, client: SocketAddr, bytes: &[u8]) -> io::Result<()> {
        let route = match direction {
            Direction::ToServer => lock(&self.shared.routes).get(&client).cloned(),
            Direction::ToClient => Some(Route {
                socket: Arc::clone(&self.shared.listen),
                to: client,
            }),
        };
        let route = route.ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("no route for {client}"))
        })?;
        route.socket.send_to(bytes, route.to).map(|_| ())
    }

    /// The address the server sees for `client` (its upstream socket's
    /// port on the upstream's loopback address), once it has sent.
    pub fn upstream_addr(&self, client: SocketAddr) -> Option<SocketAddr> {
        let route = lock(&self.shared.routes).get(&client).cloned()?;
        let port = route.socket.local_addr().ok()?.port();
        Some(SocketAddr::new(route.to.ip(), port))
    }

    /// Opens `client`'s route now (before it sends) and returns the address
    /// the server will see for it: tests whose keys depend on the client's
    /// address (pre-shared-key mode) need it before the first datagram.
    pub fn open_route(&self, client: SocketAddr) -> io::Result<SocketAddr> {
        if lock(&self.shared.routes).get(&client).is_none() {
            let route = self
                .shared
                .open_client(&self.shared.listen, client, self.shared.upstream)
                .ok_or_else(|| io::Error::other("could not open a route"))?;
            lock(&self.shared.routes).entry(client).or_insert(route);
        }
        self.upstream_addr(client)
            .ok_or_else(|| io::Error::other("route has no local address"))
    }

    /// Copies of the datagrams read so far, in the order the relay read them.
    /// Empty unless [`RelayConfig::capture`] is on.
    pub fn captured(&self) -> Vec<Captured> {
        match &self.shared.capture {
            Some(list) => lock(list).clone(),
            None => Vec::new(),
        }
    }

    /// Stops all threads, drops datagrams still held (counting them as lost)
    /// and returns the final counters.
    pub fn stop(mut self) -> RelayStats {
        self.shutdown();
        self.stats()
    }

    /// Joins the readers (the listener first: once it has ended no client
    /// thread starts), then the scheduler, so that no reader can queue a
    /// datagram after the scheduler has dropped what was held.
    fn shutdown(&mut self) {
        self.shared.stop_readers.store(true, Ordering::SeqCst);
        if let Some(listener) = self.listener.take() {
            let _ = listener.join();
        }
        let clients = std::mem::take(&mut *lock(&self.shared.clients));
        for handle in clients {
            let _ = handle.join();
        }
        self.shared.stop_scheduler.store(true, Ordering::SeqCst);
        self.shared.wake.notify_all();
        if let Some(scheduler) = self.scheduler.take() {
            let _ = scheduler.join();
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl fmt::Debug for Relay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Relay")
            .field("local_addr", &self.local_addr)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Impairment {
    /// Rejects probabilities outside `[0, 1]` and delays above [`MAX_DELAY`].
    fn check(&self, which: &str) -> io::Result<()> {
        let probabilities = [
            ("loss", self.loss),
            ("reorder", self.reorder),
            ("duplicate", self.duplicate),
            ("corrupt", self.corrupt),
        ];
        for (name, p) in probabilities {
            if !(0.0..=1.0).contains(&p) {
                return Err(invalid(format!(
                    "{which}.{name} must be a probability in [0, 1], got {p}"
                )));
            }
        }
        for (name, d) in [("delay", self.delay), ("reorder_delay", self.reorder_delay)] {
            if d > MAX_DELAY {
                return Err(invalid(format!(
                    "{which}.{name} must be at most {MAX_DELAY:?}, got {d:?}"
                )));
            }
        }
        Ok(())
    }

    /// Decides the fate of one datagram of `len` bytes. Always draws the same
    /// number of values, so the `k`-th datagram's fate depends only on the
    /// seed and `k`.
    fn fate(&self, rng: &mut SplitMix64, len: usize) -> Fate {
        let lose = rng.unit() < self.loss;
        let reordered = rng.unit() < self.reorder;
        let span = u64::try_from(self.reorder_delay.as_nanos()).unwrap_or(u64::MAX);
        let extra = Duration::from_nanos(rng.next_u64() % span.max(1));
        let duplicate = rng.unit() < self.duplicate;
        let corrupt = rng.unit() < self.corrupt;
        let bit = rng.next_u64();
        let bits = len as u64 * 8;
        Fate {
            lose,
            reordered,
            hold: self.delay + if reordered { extra } else { Duration::ZERO },
            duplicate,
            flip: (corrupt && bits > 0).then(|| bit % bits),
        }
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// What happens to one datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fate {
    lose: bool,
    reordered: bool,
    /// How long to hold it before sending (`delay` plus any reorder hold).
    hold: Duration,
    duplicate: bool,
    /// Bit to flip, counted from the first byte's least significant bit.
    flip: Option<u64>,
}

/// State shared by the relay's threads.
struct Shared {
    /// Tells the socket readers to end.
    stop_readers: AtomicBool,
    /// Tells the scheduler to drop what is held and end; set after the
    /// readers have ended.
    stop_scheduler: AtomicBool,
    to_server: Path,
    to_client: Path,
    capture: Option<Mutex<Vec<Captured>>>,
    capture_limit: usize,
    queue: Mutex<HoldQueue>,
    /// Signalled when the queue gains a datagram or the relay stops.
    wake: Condvar,
    /// Threads reading the clients' upstream sockets.
    clients: Mutex<Vec<JoinHandle<()>>>,
    /// Each client's route to the server (its upstream socket).
    routes: Mutex<HashMap<SocketAddr, Route>>,
    listen: Arc<UdpSocket>,
    upstream: SocketAddr,
    tamper: Option<Arc<dyn Tamper>>,
    /// With `RelayConfig::keep_ports`: the IP the upstream sockets bind
    /// (with each client's port).
    keep_ports: Option<IpAddr>,
}

/// One direction: its impairment, generator and counters.
struct Path {
    direction: Direction,
    impairment: Impairment,
    rng: Mutex<SplitMix64>,
    counters: Counters,
}

/// Where a datagram goes: out of `socket` to `to`.
#[derive(Clone)]
struct Route {
    socket: Arc<UdpSocket>,
    to: SocketAddr,
}

impl Shared {
    /// Reads datagrams from clients and forwards them upstream.
    fn run_listener(self: Arc<Self>, listen: Arc<UdpSocket>, upstream: SocketAddr) {
        let mut buf = vec![0u8; RECV_BUF];
        while let Some((len, client)) = self.recv(&listen, &mut buf) {
            self.capture(Direction::ToServer, client, &buf[..len]);
            let known = lock(&self.routes).get(&client).cloned();
            let route = match known {
                Some(route) => route,
                None => match self.open_client(&listen, client, upstream) {
                    Some(route) => lock(&self.routes).entry(client).or_insert(route).clone(),
                    None => {
                        let counters = &self.to_server.counters;
                        counters.received.fetch_add(1, Ordering::SeqCst);
                        counters.lost.fetch_add(1, Ordering::SeqCst);
                        continue;
                    }
                },
            };
            self.handle(&self.to_server, client, &buf[..len], route);
        }
    }

    /// Opens a dedicated upstream socket for a new client and starts its
    /// reader thread; `None` if the client table is full or that fails.
    fn open_client(
        self: &Arc<Self>,
        listen: &Arc<UdpSocket>,
        client: SocketAddr,
        upstream: SocketAddr,
    ) -> Option<Route> {
        let mut clients = lock(&self.clients);
        if clients.len() >= MAX_CLIENTS {
            return None;
        }
        let unspecified = match upstream {
            SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        let from = match self.keep_ports {
            Some(ip) => SocketAddr::new(ip, client.port()),
            None => SocketAddr::new(unspecified, 0),
        };
        let socket = match UdpSocket::bind(from) {
            Ok(s) => Arc::new(s),
            Err(e) => {
                tracing::warn!("relay: cannot forward {client} from {from}: {e}");
                return None;
            }
        };
        size_relay_buffers(&socket);
        socket.set_read_timeout(Some(POLL)).ok()?;
        let back = Route {
            socket: Arc::clone(listen),
            to: client,
        };
        let reader = Arc::clone(&socket);
        let shared = Arc::clone(self);
        let handle = thread::Builder::new()
            .name("smt-relay-client".into())
            .spawn(move || shared.run_client(&reader, upstream, back))
            .ok()?;
        clients.push(handle);
        Some(Route {
            socket,
            to: upstream,
        })
    }

    /// Reads what the server sends to one client's upstream socket and
    /// forwards it to that client.
    fn run_client(&self, socket: &UdpSocket, upstream: SocketAddr, back: Route) {
        let mut buf = vec![0u8; RECV_BUF];
        while let Some((len, from)) = self.recv(socket, &mut buf) {
            if !from_upstream(from, upstream) {
                continue;
            }
            self.capture(Direction::ToClient, back.to, &buf[..len]);
            self.handle(&self.to_client, back.to, &buf[..len], back.clone());
        }
    }

    /// Applies `path`'s impairment to one datagram, then sends it now or
    /// queues it for later.
    fn handle(&self, path: &Path, client: SocketAddr, bytes: &[u8], route: Route) {
        let counters = &path.counters;
        counters.received.fetch_add(1, Ordering::SeqCst);
        let replaced;
        let bytes = match self
            .tamper
            .as_ref()
            .map(|t| t.tamper(path.direction, client, bytes))
        {
            None | Some(Action::Pass) => bytes,
            Some(Action::Drop) => {
                counters.lost.fetch_add(1, Ordering::SeqCst);
                return;
            }
            Some(Action::Replace(new)) => {
                replaced = new;
                &replaced[..]
            }
        };
        let fate = path.impairment.fate(&mut lock(&path.rng), bytes.len());
        if fate.lose {
            counters.lost.fetch_add(1, Ordering::SeqCst);
            return;
        }
        if fate.reordered {
            counters.reordered.fetch_add(1, Ordering::SeqCst);
        }
        let mut bytes = bytes.to_vec();
        if let Some(bit) = fate.flip {
            // `bit < 8 * len`, so the index is in range.
            bytes[(bit / 8) as usize] ^= 1 << (bit % 8);
            counters.corrupted.fetch_add(1, Ordering::SeqCst);
        }
        let held = Held {
            due: Instant::now().checked_add(fate.hold),
            seq: 0,
            route,
            bytes,
            direction: path.direction,
            duplicate: fate.duplicate,
        };
        if fate.hold.is_zero() {
            self.send(held);
        } else if !lock(&self.queue).push(held) {
            counters.lost.fetch_add(1, Ordering::SeqCst);
        } else {
            self.wake.notify_one();
        }
    }

    /// Sends held datagrams when they are due; at stop, drops the rest.
    fn run_scheduler(&self) {
        let mut due = Vec::new();
        loop {
            let mut queue = lock(&self.queue);
            loop {
                if self.stop_scheduler.load(Ordering::SeqCst) {
                    for held in queue.drain() {
                        self.path(held.direction)
                            .counters
                            .lost
                            .fetch_add(1, Ordering::SeqCst);
                    }
                    return;
                }
                let now = Instant::now();
                queue.pop_due(now, &mut due);
                if !due.is_empty() {
                    break;
                }
                let wait = queue
                    .next_due()
                    .map_or(Duration::from_millis(50), |at| at - now);
                queue = self
                    .wake
                    .wait_timeout(queue, wait)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            drop(queue);
            for held in due.drain(..) {
                self.send(held);
            }
        }
    }

    /// Sends a datagram (and its copy, if duplicated) and counts the outcome.
    fn send(&self, held: Held) {
        let counters = &self.path(held.direction).counters;
        let Route { socket, to } = &held.route;
        if socket.send_to(&held.bytes, to).is_err() {
            counters.send_errors.fetch_add(1, Ordering::SeqCst);
            return;
        }
        counters.forwarded.fetch_add(1, Ordering::SeqCst);
        if held.duplicate && socket.send_to(&held.bytes, to).is_ok() {
            counters.duplicated.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Next datagram from `socket`, or `None` once the relay stops.
    fn recv(&self, socket: &UdpSocket, buf: &mut [u8]) -> Option<(usize, SocketAddr)> {
        while !self.stop_readers.load(Ordering::SeqCst) {
            match socket.recv_from(buf) {
                Ok(got) => return Some(got),
                Err(e) if is_timeout(&e) => {}
                // E.g. a reset reported for an earlier send: keep going, but
                // do not spin if the error repeats.
                Err(_) => thread::sleep(Duration::from_millis(1)),
            }
        }
        None
    }

    fn capture(&self, direction: Direction, client: SocketAddr, bytes: &[u8]) {
        let Some(list) = &self.capture else { return };
        let mut list = lock(list);
        if list.len() < self.capture_limit {
            list.push(Captured {
                direction,
                client,
                bytes: bytes.to_vec(),
            });
        }
    }

    fn path(&self, direction: Direction) -> &Path {
        match direction {
            Direction::ToServer => &self.to_server,
            Direction::ToClient => &self.to_client,
        }
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Whether a datagram on an upstream socket came from the server. An
/// unspecified upstream address (sending to it reaches this host) matches
/// replies from any local address on the right port.
fn from_upstream(from: SocketAddr, upstream: SocketAddr) -> bool {
    from.port() == upstream.port() && (upstream.ip().is_unspecified() || from.ip() == upstream.ip())
}

impl Path {
    fn new(direction: Direction, impairment: &Impairment, seed: u64) -> Self {
        Self {
            direction,
            impairment: impairment.clone(),
            rng: Mutex::new(SplitMix64::new(seed)),
            counters: Counters::default(),
        }
    }
}

/// Counters of one direction. Sequentially consistent, so that a reader who
/// sees a datagram forwarded or lost also sees it received.
#[derive(Default)]
struct Counters {
    received: AtomicU64,
    forwarded: AtomicU64,
    lost: AtomicU64,
    reordered: AtomicU64,
    duplicated: AtomicU64,
    corrupted: AtomicU64,
    send_errors: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> DirectionStats {
        let get = |c: &AtomicU64| c.load(Ordering::SeqCst);
        DirectionStats {
            received: get(&self.received),
            forwarded: get(&self.forwarded),
            lost: get(&self.lost),
            reordered: get(&self.reordered),
            duplicated: get(&self.duplicated),
            corrupted: get(&self.corrupted),
            send_errors: get(&self.send_errors),
        }
    }
}

/// A datagram waiting to be sent.
struct Held {
    /// `None` if the hold overflowed `Instant`: never due, dropped at stop.
    due: Option<Instant>,
    /// Arrival order, so datagrams due at the same instant keep their order.
    seq: u64,
    route: Route,
    bytes: Vec<u8>,
    direction: Direction,
    duplicate: bool,
}

impl Held {
    /// Ordering key; the heap is a max-heap, so earlier keys compare greater.
    fn key(&self) -> (bool, Option<Instant>, u64) {
        (self.due.is_none(), self.due, self.seq)
    }
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Held {}

impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Held {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.key().cmp(&self.key())
    }
}

/// Datagrams held for later, earliest due first, bounded in count and bytes.
#[derive(Default)]
struct HoldQueue {
    heap: BinaryHeap<Held>,
    bytes: usize,
    next_seq: u64,
}

impl HoldQueue {
    /// Adds a datagram; `false` (and the datagram dropped) if full.
    fn push(&mut self, mut held: Held) -> bool {
        let full =
            self.heap.len() >= MAX_HELD_DATAGRAMS || self.bytes + held.bytes.len() > MAX_HELD_BYTES;
        if full {
            return false;
        }
        held.seq = self.next_seq;
        self.next_seq += 1;
        self.bytes += held.bytes.len();
        self.heap.push(held);
        true
    }

    /// Moves every datagram due at `now` into `out`, earliest first.
    fn pop_due(&mut self, now: Instant, out: &mut Vec<Held>) {
        while self
            .heap
            .peek()
            .is_some_and(|h| h.due.is_some_and(|at| at <= now))
        {
            let Some(held) = self.heap.pop() else { break };
            self.bytes -= held.bytes.len();
            out.push(held);
        }
    }

    fn next_due(&self) -> Option<Instant> {
        self.heap.peek().and_then(|h| h.due)
    }

    fn drain(&mut self) -> impl Iterator<Item = Held> + '_ {
        self.bytes = 0;
        self.heap.drain()
    }
}

/// Locks a mutex, ignoring poisoning: every guarded value stays consistent
/// between statements, so a panicked holder cannot leave it half-updated.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::ToServer => "to-server",
            Direction::ToClient => "to-client",
        })
    }
}

impl fmt::Display for DirectionStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "received {} forwarded {} lost {} reordered {} duplicated {} corrupted {} send-errors {}",
            self.received,
            self.forwarded,
            self.lost,
            self.reordered,
            self.duplicated,
            self.corrupted,
            self.send_errors
        )
    }
}

impl fmt::Display for RelayStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} | {}: {}",
            Direction::ToServer,
            self.to_server,
            Direction::ToClient,
            self.to_client
        )
    }
}

/// Socket buffers large enough that bursts of a busy test do not overflow
/// them before the relay reads them: loss must come from the impairment
/// settings, not from the kernel (which would drop silently).
fn size_relay_buffers(socket: &UdpSocket) {
    const BUFFER: usize = 8 << 20;
    if let Err(e) = smt_udp::size_buffers(socket, BUFFER, BUFFER) {
        tracing::warn!("relay: could not size socket buffers: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fates(imp: &Impairment, seed: u64, n: usize) -> Vec<Fate> {
        let mut rng = SplitMix64::new(seed);
        (0..n).map(|_| imp.fate(&mut rng, 100)).collect()
    }

    #[test]
    fn clean_impairment_changes_nothing() {
        for fate in fates(&Impairment::default(), 7, 1000) {
            assert!(!fate.lose && !fate.reordered && !fate.duplicate);
            assert_eq!((fate.hold, fate.flip), (Duration::ZERO, None));
        }
    }

    #[test]
    fn same_seed_same_fates() {
        let imp = Impairment {
            loss: 0.3,
            reorder: 0.3,
            reorder_delay: Duration::from_millis(1),
            duplicate: 0.3,
            corrupt: 0.3,
            delay: Duration::from_micros(10),
        };
        assert_eq!(fates(&imp, 42, 500), fates(&imp, 42, 500));
        assert_ne!(fates(&imp, 42, 500), fates(&imp, 43, 500));
    }

    #[test]
    fn kth_fate_does_not_depend_on_other_knobs() {
        // The same number of draws per datagram keeps the streams aligned:
        // turning on duplication does not change which datagrams are lost.
        let lossy = Impairment {
            loss: 0.5,
            ..Impairment::default()
        };
        let both = Impairment {
            duplicate: 0.5,
            ..lossy.clone()
        };
        let lost =
            |imp: &Impairment| -> Vec<bool> { fates(imp, 9, 300).iter().map(|f| f.lose).collect() };
        assert_eq!(lost(&lossy), lost(&both));
    }

    #[test]
    fn corrupting_an_empty_datagram_flips_nothing() {
        let imp = Impairment {
            corrupt: 1.0,
            ..Impairment::default()
        };
        assert_eq!(imp.fate(&mut SplitMix64::new(1), 0).flip, None);
        assert!(imp
            .fate(&mut SplitMix64::new(1), 1)
            .flip
            .is_some_and(|b| b < 8));
    }

    #[test]
    fn out_of_range_settings_are_rejected() {
        for bad in [
            Impairment {
                loss: 1.5,
                ..Impairment::default()
            },
            Impairment {
                corrupt: f64::NAN,
                ..Impairment::default()
            },
            Impairment {
                reorder: -0.1,
                ..Impairment::default()
            },
            Impairment {
                delay: Duration::MAX,
                ..Impairment::default()
            },
        ] {
            let err = bad.check("to_server").unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        }
    }
}
