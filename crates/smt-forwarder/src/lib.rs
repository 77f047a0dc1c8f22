//! `smt-forwarder`: a user-space forwarding device that acts on SMT's
//! plaintext header without any key (after MTP, Stephens et al., HotNets
//! 2021: messages as the unit of load balancing and scheduling). See `docs/innetwork.md`.
//!
//! It reads, through `smt_proto::wire`'s checked view, the type, key
//! phase, message ID and — on DATA — the message's wire length, the
//! packet's place in it and the message priority ([`meta::FIELDS_READ`]);
//! records and MACs pass through as opaque bytes. With that it:
//!
//! - pins every packet of a message to one path and picks the path of a
//!   new message by live load and the message's size ([`Balance`]; ECMP
//!   and per-packet spraying are the baselines);
//! - picks a replica per message among servers sharing the session by a
//!   rule that keeps SMT's replay guarantee ([`ReplicaPolicy`]);
//! - queues per traffic class and priority on each path (`queue.rs`);
//! - computes per-path congestion feedback for every packet
//!   ([`feedback`]) and writes it into the PATH slots of datagrams that
//!   carry one (`docs/protocol.md` § 4, PATH), and keeps new messages off
//!   the `(pathlet, class)` pairs their PATH excludes.
//!
//! The core ([`Forwarder`]) is sans-IO: no socket, clock or thread;
//! `driver` owns the sockets (one per client and path, on the path's
//! device) and the clock.

#![warn(missing_docs, unreachable_pub)]

pub mod driver;
pub mod feedback;
mod forwarder;
pub mod lab;
pub mod meta;
pub mod policy;
mod queue;
pub mod stats;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

pub use forwarder::{Forwarder, Transmit, MAX_MESSAGES};
pub use meta::Meta;
pub use policy::{Balance, ReplicaPolicy};
pub use queue::Occupancy;
pub use stats::Stats;

/// One path: a link from this device to one server (replica).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathConfig {
    /// The network device the path leaves on (`SO_BINDTODEVICE`).
    pub device: String,
    /// The server's address on this path, per address family.
    pub servers: Vec<SocketAddr>,
    /// One-way propagation delay the forwarder adds.
    pub delay: Duration,
    /// The path's rate in bit/s; 0: not paced.
    pub rate_bps: u64,
    /// Which replica the path leads to (0 when there is one server).
    pub replica: usize,
}

impl PathConfig {
    /// The server address of `family`'s kind (IPv4 or IPv6).
    pub fn server_for(&self, family: IpAddr) -> Option<SocketAddr> {
        self.servers
            .iter()
            .copied()
            .find(|s| s.is_ipv4() == family.is_ipv4())
    }
}

/// The forwarder's settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// The port clients send to (part of the ECMP 5-tuple).
    pub port: u16,
    /// The paths, by index; a packet's path index is its pathlet's offset
    /// from `pathlet_base`.
    pub paths: Vec<PathConfig>,
    /// How packets are spread over the paths to a replica.
    pub balance: Balance,
    /// How a message's replica is chosen among servers sharing a session.
    pub replica_policy: ReplicaPolicy,
    /// Priority queues per class (a DATA packet of priority `p` goes to
    /// queue `min(p, priorities - 1)`; control packets to the last).
    pub priorities: usize,
    /// Traffic classes, served by deficit round robin.
    pub classes: usize,
    /// Client address → traffic class (others: class 0).
    pub class_map: Vec<(IpAddr, u8)>,
    /// Bytes each path's queue holds before it drops.
    pub buffer_bytes: u64,
    /// Queue length (packets) above which arrivals are marked.
    pub mark_packets: u32,
    /// Pathlet ID of path 0 in the PATH slots this forwarder fills (path
    /// `k` is `pathlet_base + k`): unique among the devices on a path.
    pub pathlet_base: u16,
    /// Whether the endpoints MAC their control packets (to split
    /// coalesced datagrams; on by default in SMT).
    pub tagged_control: bool,
    /// A message silent this long is forgotten.
    pub message_idle: Duration,
}

impl Config {
    /// Settings for `paths` with the defaults: message-aware balance,
    /// per-message replicas, 8 priorities, one class, 4 MiB buffers,
    /// marking above 20 packets (MTP's evaluation, § 5.1).
    pub fn new(port: u16, paths: Vec<PathConfig>) -> Self {
        Self {
            port,
            paths,
            balance: Balance::Message,
            replica_policy: ReplicaPolicy::Message,
            priorities: 8,
            classes: 1,
            class_map: Vec::new(),
            buffer_bytes: 4 << 20,
            mark_packets: 20,
            pathlet_base: 0,
            tagged_control: true,
            message_idle: Duration::from_millis(500),
        }
    }

    /// Replicas: one more than the highest path's replica index.
    pub fn replicas(&self) -> usize {
        self.paths.iter().map(|p| p.replica + 1).max().unwrap_or(1)
    }

    pub(crate) fn class_of(&self, client: SocketAddr) -> u8 {
        self.class_map
            .iter()
            .find(|(ip, _)| *ip == client.ip())
            .map_or(0, |&(_, c)| c)
            .min((self.classes - 1) as u8)
    }

    /// Says what is wrong, so the operator can fix it.
    pub fn validate(&self) -> Result<(), String> {
        if self.paths.is_empty() {
            return Err("no path: give at least one --path".into());
        }
        if self.paths.len() > usize::from(u8::MAX) {
            return Err("at most 255 paths".into());
        }
        if usize::from(self.pathlet_base) + self.paths.len() > usize::from(u16::MAX) + 1 {
            return Err("pathlet base + paths must stay below 65536".into());
        }
        for r in 0..self.replicas() {
            if !self.paths.iter().any(|p| p.replica == r) {
                return Err(format!(
                    "replica {r} has no path (replicas are numbered from 0 without gaps)"
                ));
            }
        }
        if self.paths.iter().any(|p| p.servers.is_empty()) {
            return Err("every path needs a server address (to=ADDR:PORT)".into());
        }
        if !(1..=256).contains(&self.priorities) || !(1..=256).contains(&self.classes) {
            return Err("priorities and classes are 1 to 256".into());
        }
        if self.buffer_bytes < 65_536 {
            return Err("the buffer must hold at least 64 KiB (one segment)".into());
        }
        Ok(())
    }
}

/// A packet inside the forwarder.
#[derive(Debug)]
pub(crate) struct Packet {
    pub bytes: Vec<u8>,
    pub client: SocketAddr,
    pub meta: Meta,
    pub class: u8,
    pub queue: u8,
    /// The packet's bytes start with a copy of its datagram's PATH, whose
    /// next slot this device fills as the packet leaves its queue.
    pub has_path: bool,
}
