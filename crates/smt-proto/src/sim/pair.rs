//! Two endpoints, one simulated link, one virtual clock.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::{Datagram, KeySource, Link, SplitMix64, Verdict};
use crate::{Config, Endpoint, Event, RpcError, RpcHandle};

/// Which endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    /// The endpoint that starts the RPCs.
    Client,
    /// The endpoint that answers them.
    Server,
}

/// How a client RPC ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The whole response arrived.
    Response(Vec<u8>),
    /// The RPC failed with this error.
    Failed(RpcError),
}

type Intercept = Box<dyn FnMut(&Datagram) -> Verdict>;

/// What stands between an endpoint and the link when a test puts a NIC
/// there (TLS offload): it turns what the endpoint wrote into what leaves,
/// and hands what arrives to the endpoint. Without one, datagrams pass
/// unchanged.
pub trait Nic {
    /// `ep` wrote `datagram` for `to` (its offload notes are still to be
    /// taken); push the datagrams that leave onto `out`, in order.
    fn transmit(
        &mut self,
        ep: &mut Endpoint,
        to: SocketAddr,
        datagram: Vec<u8>,
        out: &mut Vec<Vec<u8>>,
    );
    /// A datagram from `from` arrived: hand it to `ep`.
    fn receive(&mut self, ep: &mut Endpoint, now: Instant, from: SocketAddr, datagram: &[u8]);
}
type Responder = Box<dyn FnMut(&[u8]) -> Vec<u8>>;

/// Link-level counters of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Datagrams the endpoints put on the link.
    pub sent: u64,
    /// Of those, lost to [`Link::loss`].
    pub lost: u64,
    /// Delivered twice ([`Link::duplicate`]).
    pub duplicated: u64,
    /// Delivered with one bit flipped ([`Link::corrupt`]).
    pub corrupted: u64,
    /// Held back ([`Link::reorder`]).
    pub reordered: u64,
    /// Dropped by the test's intercept hook.
    pub intercepted: u64,
}

/// A client endpoint and a server endpoint joined by a [`Link`].
///
/// The server answers every request with `responder` (echo by default) as
/// soon as it is delivered; client outcomes land in [`Pair::outcomes`].
/// An endpoint's output is taken as fast as it comes unless
/// [`Pair::pace`] limits it.
pub struct Pair {
    /// The endpoint that starts RPCs.
    pub client: Endpoint,
    /// The endpoint that answers them.
    pub server: Endpoint,
    /// The client's simulated address.
    pub client_addr: SocketAddr,
    /// The server's simulated address.
    pub server_addr: SocketAddr,
    /// The virtual clock: advanced only by the pair.
    pub now: Instant,
    /// The virtual time the run began.
    pub start: Instant,
    /// The link's impairments, the same in both directions.
    pub link: Link,
    /// What the link did to the datagrams so far.
    pub link_stats: LinkStats,
    /// Every datagram put on the link, if set (for replay tests).
    pub capture: Option<Vec<Datagram>>,
    /// Decides per datagram before impairments, if set.
    pub intercept: Option<Intercept>,
    /// The server application: turns a request into its response.
    pub responder: Responder,
    /// Whether the server answers requests automatically.
    pub auto_respond: bool,
    /// A NIC per side ([`Side`] as index), if a test put one there.
    pub nics: [Option<Box<dyn Nic>>; 2],
    /// How each client RPC ended, by handle.
    pub outcomes: HashMap<RpcHandle, Outcome>,
    /// When each outcome arrived.
    pub finished_at: HashMap<RpcHandle, Instant>,
    /// Requests the server application saw, by their first 8 bytes.
    pub executions: HashMap<u64, u32>,
    rng: SplitMix64,
    in_flight: InFlight,
    link_free: [Instant; 2],
    /// Per side: the rate [`Pair::pace`] set (bits per second, 0 for
    /// none), when the side may next transmit, and whether it stopped
    /// with output possibly left.
    pace: [u64; 2],
    tx_free: [Instant; 2],
    backlogged: [bool; 2],
    buf: Vec<u8>,
}

impl std::fmt::Debug for Pair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pair")
            .field("now", &(self.now - self.start))
            .field("link", &self.link_stats)
            .finish_non_exhaustive()
    }
}

impl Pair {
    /// A pair with the given configurations, keys and link.
    /// Each endpoint's `local_port` is set to its simulated address's port,
    /// as a driver does with its bound socket.
    pub fn new(
        client_cfg: Config,
        server_cfg: Config,
        keys: impl KeySource,
        link: Link,
        seed: u64,
    ) -> Self {
        let client_addr: SocketAddr = "10.0.0.1:4000".parse().expect("valid literal");
        let server_addr: SocketAddr = "10.0.0.2:5000".parse().expect("valid literal");
        let buf_len = usize::max(client_cfg.max_datagram_size, server_cfg.max_datagram_size);
        let (ck, sk) = keys.session();
        let now = virtual_origin();
        Self {
            client: keyed_endpoint(client_cfg, client_addr, server_addr, ck, "client"),
            server: keyed_endpoint(server_cfg, server_addr, client_addr, sk, "server"),
            client_addr,
            server_addr,
            now,
            start: now,
            link,
            link_stats: LinkStats::default(),
            capture: None,
            intercept: None,
            responder: Box::new(|req| req.to_vec()),
            auto_respond: true,
            nics: [None, None],
            outcomes: HashMap::new(),
            finished_at: HashMap::new(),
            executions: HashMap::new(),
            rng: SplitMix64::new(seed),
            in_flight: InFlight::default(),
            link_free: [now; 2],
            pace: [0; 2],
            tx_free: [now; 2],
            backlogged: [false; 2],
            buf: vec![0; buf_len],
        }
    }

    /// A pair with default configurations.
    pub fn with_keys(keys: impl KeySource, link: Link, seed: u64) -> Self {
        Self::new(Config::default(), Config::default(), keys, link, seed)
    }

    /// Starts an RPC from the client.
    pub fn call(&mut self, data: &[u8]) -> RpcHandle {
        self.client
            .send_request(self.now, self.server_addr, data)
            .expect("send_request")
    }

    /// Takes `side`'s datagrams no faster than `bits_per_second` (0: as
    /// fast as they come): a sender short of CPU or with a slow NIC, whose
    /// messages wait in its own send queue (SRPT order) rather than on the
    /// link. The link's bandwidth still applies after it.
    pub fn pace(&mut self, side: Side, bits_per_second: u64) {
        self.pace[side as usize] = bits_per_second;
    }

    /// Time since the pair was made.
    pub fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    /// Runs until every client RPC has an outcome and the link is empty, or
    /// `limit` of virtual time passes. Returns whether it settled.
    pub fn run(&mut self, limit: Duration) -> bool {
        let deadline = self.now + limit;
        loop {
            self.flush();
            if self.client.client_rpcs() == 0 && self.in_flight.is_empty() {
                return true;
            }
            if !self.advance(deadline) {
                return false;
            }
        }
    }

    /// Runs for exactly `d` of virtual time (or until nothing is scheduled).
    pub fn run_for(&mut self, d: Duration) {
        let deadline = self.now + d;
        loop {
            self.flush();
            if !self.advance(deadline) {
                self.now = self.now.max(deadline);
                return;
            }
        }
    }

    /// Puts a datagram on the link as if `from` had sent it.
    pub fn inject(&mut self, d: Datagram) {
        let to = if d.to == self.client_addr {
            Side::Client
        } else {
            Side::Server
        };
        self.schedule(to, d, Duration::ZERO);
    }

    /// Delivers a datagram straight to its endpoint, now.
    pub fn deliver_now(&mut self, d: &Datagram) {
        self.hand_over(d);
        self.flush();
    }

    /// Gives `d` to its endpoint, through that side's NIC if it has one.
    fn hand_over(&mut self, d: &Datagram) {
        let (ep, nic) = if d.to == self.client_addr {
            (&mut self.client, &mut self.nics[Side::Client as usize])
        } else {
            (&mut self.server, &mut self.nics[Side::Server as usize])
        };
        match nic {
            Some(nic) => nic.receive(ep, self.now, d.from, &d.bytes),
            None => ep.handle_datagram(self.now, d.from, &d.bytes),
        }
    }

    /// Moves time to the next scheduled thing before `deadline` and handles
    /// it. Returns false if nothing is scheduled before the deadline.
    fn advance(&mut self, deadline: Instant) -> bool {
        let next_packet = self.in_flight.next_at();
        let paced = |i: usize| self.backlogged[i].then_some(self.tx_free[i]);
        let next = [
            next_packet,
            self.client.poll_timeout(),
            self.server.poll_timeout(),
            paced(0),
            paced(1),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next.filter(|t| *t <= deadline) else {
            return false;
        };
        self.now = self.now.max(next);
        if next_packet == Some(next) {
            self.deliver_next();
        }
        let now = self.now;
        if self.client.poll_timeout().is_some_and(|t| t <= now) {
            self.client.handle_timeout(now);
        }
        if self.server.poll_timeout().is_some_and(|t| t <= now) {
            self.server.handle_timeout(now);
        }
        true
    }

    fn deliver_next(&mut self) {
        if let Some(d) = self.in_flight.pop() {
            self.hand_over(&d);
        }
    }

    /// Moves every pending output of both endpoints onto the link and
    /// handles their events.
    pub fn flush(&mut self) {
        loop {
            let mut progress = self.drain_transmits(Side::Client);
            progress |= self.drain_transmits(Side::Server);
            progress |= self.drain_events();
            if !progress {
                return;
            }
        }
    }

    fn drain_transmits(&mut self, side: Side) -> bool {
        let mut any = false;
        let i = side as usize;
        loop {
            if self.tx_free[i] > self.now {
                self.backlogged[i] = true;
                return any;
            }
            let (ep, from, to) = match side {
                Side::Client => (&mut self.client, self.client_addr, self.server_addr),
                Side::Server => (&mut self.server, self.server_addr, self.client_addr),
            };
            let Some(t) = ep.poll_transmit(self.now, &mut self.buf) else {
                self.backlogged[i] = false;
                return any;
            };
            // No pace (0) leaves the side free at once.
            if let Some(ns) = (t.len as u64 * 8 * 1_000_000_000).checked_div(self.pace[i]) {
                self.tx_free[i] = self.tx_free[i].max(self.now) + Duration::from_nanos(ns);
            }
            debug_assert_eq!(t.destination, to);
            any = true;
            let bytes = self.buf[..t.len].to_vec();
            let Some(nic) = &mut self.nics[i] else {
                self.send(side, Datagram { from, to, bytes });
                continue;
            };
            let mut out = Vec::new();
            nic.transmit(ep, to, bytes, &mut out);
            for bytes in out {
                self.send(side, Datagram { from, to, bytes });
            }
        }
    }

    fn send(&mut self, from: Side, mut d: Datagram) {
        self.link_stats.sent += 1;
        if let Some(c) = &mut self.capture {
            c.push(d.clone());
        }
        if let Some(hook) = &mut self.intercept {
            if hook(&d) == Verdict::Drop {
                self.link_stats.intercepted += 1;
                return;
            }
        }
        let dir = from as usize;
        let depart = self.link_free[dir].max(self.now) + self.link.serialisation(d.bytes.len());
        self.link_free[dir] = depart;
        if self.rng.chance(self.link.loss) {
            self.link_stats.lost += 1;
            return;
        }
        if self.link.maybe_corrupt(&mut self.rng, &mut d.bytes) {
            self.link_stats.corrupted += 1;
        }
        let to = if from == Side::Client {
            Side::Server
        } else {
            Side::Client
        };
        if self.rng.chance(self.link.duplicate) {
            self.link_stats.duplicated += 1;
            let extra = self.link.reorder_extra(&mut self.rng);
            self.schedule(to, d.clone(), depart - self.now + extra);
        }
        let extra = self.link.reorder_extra(&mut self.rng);
        if !extra.is_zero() {
            self.link_stats.reordered += 1;
        }
        self.schedule(to, d, depart - self.now + extra);
    }

    fn schedule(&mut self, _to: Side, d: Datagram, after: Duration) {
        let at = self.now + after + self.link.latency;
        self.in_flight.push(at, d);
    }

    fn drain_events(&mut self) -> bool {
        let mut any = false;
        while let Some(ev) = self.server.poll_event() {
            any = true;
            if let Event::Request { rpc, data } = ev {
                let tag = data
                    .get(..8)
                    .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
                *self.executions.entry(tag).or_default() += 1;
                if self.auto_respond {
                    let resp = (self.responder)(&data);
                    let _ = self.server.send_response(self.now, rpc, &resp);
                }
            }
        }
        while let Some(ev) = self.client.poll_event() {
            any = true;
            let (rpc, outcome) = match ev {
                Event::Response { rpc, data } => (rpc, Outcome::Response(data)),
                Event::Failed { rpc, error } => (rpc, Outcome::Failed(error)),
                _ => continue,
            };
            self.finished_at.insert(rpc, self.now);
            self.outcomes.insert(rpc, outcome);
        }
        any
    }
}

/// An endpoint configured by `cfg` with a session towards `peer` under
/// `keys`; panics (this is test scaffolding) naming `side` if either is
/// refused.
/// Datagrams on the link: delivered by arrival time, ties in the order
/// they were sent.
#[derive(Default)]
struct InFlight {
    order: BinaryHeap<Reverse<(Instant, u64)>>,
    datagrams: HashMap<u64, Datagram>,
    next_seq: u64,
}

impl InFlight {
    fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// When the next datagram arrives.
    fn next_at(&self) -> Option<Instant> {
        self.order.peek().map(|Reverse((t, _))| *t)
    }

    fn push(&mut self, at: Instant, d: Datagram) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.datagrams.insert(seq, d);
        self.order.push(Reverse((at, seq)));
    }

    /// The datagram that arrives next.
    fn pop(&mut self) -> Option<Datagram> {
        let Reverse((_, seq)) = self.order.pop()?;
        self.datagrams.remove(&seq)
    }
}

/// The virtual clock starts at the real one's reading (an `Instant` has no
/// other origin); nothing reads the real clock after this.
#[allow(clippy::disallowed_methods)]
fn virtual_origin() -> Instant {
    Instant::now()
}

/// An endpoint at `own` (its `local_port` set to that port, as a driver
/// does with its bound socket) holding `keys` for `peer`.
fn keyed_endpoint(
    mut cfg: Config,
    own: SocketAddr,
    peer: SocketAddr,
    keys: crate::SessionKeys,
    side: &str,
) -> Endpoint {
    cfg.local_port = own.port();
    let mut ep = Endpoint::new(cfg).unwrap_or_else(|e| panic!("{side} config: {e}"));
    ep.install_session(peer, keys)
        .unwrap_or_else(|e| panic!("{side} keys: {e:?}"));
    ep
}
