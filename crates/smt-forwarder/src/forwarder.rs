//! The forwarder's sans-IO core: datagrams in, packets out on a path at
//! the right time. No socket, no clock, no thread: every call takes
//! `now`, and the driver (`driver.rs`) does the I/O.
//!
//! Call order: [`Forwarder::handle_client_datagram`] for each datagram a
//! client sent; [`Forwarder::poll_transmit`] until `None`;
//! [`Forwarder::poll_timeout`] for when to call again. Replies from the
//! servers go straight back to their client (the driver counts them with
//! [`Forwarder::note_server_datagram`]): the paths are between this
//! device and the servers, so choosing among them is this device's
//! decision only for the client-to-server direction.
//!
//! A path is a model of a link: an output queue (`queue.rs`), a
//! serialiser at the path's rate, and a propagation delay. The topology's
//! `tbf` caps the real link at the same rate, so the backlog is here,
//! where the forwarder can see it, report it and mark it.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use smt_proto::wire::{path_excludes, write_path_slot, PacketType, PathletClass, SlotWrite};

use crate::feedback::{FeedbackSink, PathFeedback};
use crate::meta::{split, Meta};
use crate::policy::{ecmp_path, message_replica, Balance, ReplicaPolicy};
use crate::queue::{PathQueue, Queued};
use crate::stats::Stats;
use crate::{Config, Packet, PathConfig};

/// Most messages the forwarder tracks at once; a message past this is
/// forwarded packet by packet by its path rule without a pin.
pub const MAX_MESSAGES: usize = 1 << 16;
/// How often stale message entries are swept.
const SWEEP_EVERY: Duration = Duration::from_millis(50);

/// A packet ready to leave on path `path`, for the server of that path,
/// on behalf of `client`.
#[derive(Debug)]
pub struct Transmit {
    /// Index of the path (in [`Config::paths`](crate::Config::paths)) to
    /// send on.
    pub path: usize,
    /// The client the packet came from (the driver's upstream socket for
    /// it sends it).
    pub client: SocketAddr,
    /// The packet's bytes, as the client sent them (with this device's
    /// PATH slot filled, if the packet carries a PATH).
    pub bytes: Vec<u8>,
}

/// A message as the forwarder knows it: (client, key phase, ID).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct MsgKey {
    pub client: SocketAddr,
    pub key_phase: bool,
    pub id: u64,
}

/// What the forwarder remembers of a message: its pin and progress.
#[derive(Debug)]
struct Pinned {
    path: usize,
    /// Wire bytes not yet seen (first transmissions): the message's
    /// promise on its path.
    remaining: u64,
    last_seen: Instant,
}

/// What the delivery end of a path remembers of a message, to count
/// packets delivered out of order within it.
#[derive(Debug)]
struct Delivered {
    end: u64,
    reordered: bool,
    last: Instant,
}

/// One path's state.
#[derive(Debug)]
struct Path {
    config: PathConfig,
    queue: PathQueue,
    /// When the serialiser finishes the packet it is sending.
    free_at: Option<Instant>,
    /// Serialised packets in flight, in delivery order.
    delay_line: VecDeque<(Instant, Packet)>,
    /// Wire bytes promised by the messages pinned here.
    committed: u64,
}

impl Path {
    /// When a message of `bytes` would finish on this path: the delay,
    /// the bytes queued ahead of it, its own bytes, and of the bytes other
    /// messages pinned here have yet to send, as many as its own size —
    /// sharing the link with them (as the receivers' grants and the
    /// queues interleave messages), a message waits for about as many of
    /// their bytes as it sends itself. So a small message looks at the
    /// queue and the delay, and large ones spread apart.
    fn expected_finish(&self, bytes: u64) -> Duration {
        let backlog = self.queue.bytes() + self.committed.min(bytes) + bytes;
        let serialise = match self.config.rate_bps {
            0 => Duration::ZERO,
            r => Duration::from_secs_f64(backlog as f64 * 8.0 / r as f64),
        };
        self.config.delay + serialise
    }

    fn serialisation(&self, len: usize) -> Duration {
        match self.config.rate_bps {
            0 => Duration::ZERO,
            r => Duration::from_nanos((len as u64 * 8 * 1_000_000_000) / r),
        }
    }
}

/// What a path choice must respect: the packet's traffic class and the
/// `(pathlet, class)` pairs its datagram's PATH excludes.
struct Choice<'a> {
    class: u8,
    exclude: &'a [PathletClass],
}

impl Choice<'_> {
    /// Whether path `k` (pathlet `base + k`) is excluded for this class.
    fn excludes(&self, base: u16, k: usize) -> bool {
        let pathlet = base.wrapping_add(k as u16);
        self.exclude
            .iter()
            .any(|e| e.pathlet == pathlet && e.class == self.class)
    }
}

/// The forwarder.
pub struct Forwarder {
    config: Config,
    paths: Vec<Path>,
    /// Path indices of each replica.
    replica_paths: Vec<Vec<usize>>,
    pinned: HashMap<MsgKey, Pinned>,
    delivered: HashMap<MsgKey, Delivered>,
    sessions: HashMap<SocketAddr, usize>,
    spray_next: usize,
    tie_next: usize,
    swept: Option<Instant>,
    /// The first packet's arrival: `Balance::Alternate` counts periods
    /// from it.
    started: Option<Instant>,
    sink: Box<dyn FeedbackSink>,
    stats: Stats,
}

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarder")
            .field("paths", &self.paths.len())
            .field("pinned", &self.pinned.len())
            .finish_non_exhaustive()
    }
}

impl Forwarder {
    /// A forwarder for `config` (checked by [`Config::validate`]).
    pub fn new(config: Config) -> Result<Self, String> {
        config.validate()?;
        let replicas = config.replicas();
        let mut replica_paths = vec![Vec::new(); replicas];
        for (k, p) in config.paths.iter().enumerate() {
            replica_paths[p.replica].push(k);
        }
        let paths = config
            .paths
            .iter()
            .map(|p| Path {
                config: p.clone(),
                queue: PathQueue::new(
                    config.classes,
                    config.priorities,
                    config.buffer_bytes,
                    config.mark_packets,
                ),
                free_at: None,
                delay_line: VecDeque::new(),
                committed: 0,
            })
            .collect();
        let stats = Stats::new(config.paths.len(), replicas);
        Ok(Self {
            config,
            paths,
            replica_paths,
            pinned: HashMap::new(),
            delivered: HashMap::new(),
            sessions: HashMap::new(),
            spray_next: 0,
            tie_next: 0,
            swept: None,
            started: None,
            sink: Box::new(crate::feedback::CountMarks),
            stats,
        })
    }

    /// Replaces what is done with each packet's path feedback as it leaves
    /// its queue (the hook where the protocol's feedback extension will be
    /// written, `docs/innetwork.md` § 6).
    pub fn set_feedback_sink(&mut self, sink: Box<dyn FeedbackSink>) {
        self.sink = sink;
    }

    /// The counters so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The settings it was made with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Counts a datagram a server sent back to a client.
    pub fn note_server_datagram(&mut self, len: usize) {
        self.stats.to_clients.add(len);
    }

    /// A datagram from `client`: cut into packets, each classified,
    /// given a replica and a path, and queued there. Bounded work: one
    /// pass over the datagram's headers.
    pub fn handle_client_datagram(&mut self, now: Instant, client: SocketAddr, datagram: &[u8]) {
        self.stats.from_clients.add(datagram.len());
        self.sweep(now);
        let (pieces, junk) = split(datagram, self.config.tagged_control);
        if junk > 0 {
            self.stats.malformed_bytes += junk as u64;
        }
        if pieces.len() > 1 {
            self.stats.coalesced_split += 1;
        }
        // A PATH first in the datagram (`docs/protocol.md` § 4) travels
        // on with every packet after it: each leaves as its own datagram,
        // PATH copy in front, no longer than the datagram it came from.
        let mut path = None;
        let mut carried = false;
        for (i, piece) in pieces.into_iter().enumerate() {
            let header = &datagram[piece.range.start..piece.range.start + piece.header_len];
            let Ok(meta) = Meta::read(header) else {
                self.stats.malformed_bytes += piece.range.len() as u64;
                continue;
            };
            if meta.ty == PacketType::PATH {
                match i {
                    0 => path = Some(&datagram[piece.range]),
                    _ => self.stats.path_dropped += 1,
                }
                continue;
            }
            carried = true;
            let bytes = &datagram[piece.range];
            for replica in self.replicas_for(client, &meta) {
                self.route(now, client, meta, replica, path, bytes);
            }
        }
        if path.is_some() && !carried {
            // Nothing in the datagram could make a receiver believe it.
            self.stats.path_dropped += 1;
        }
    }

    /// Which replicas get a packet: one, by the replica rule, for a
    /// packet about one message (or a handshake); all of them for ACK and
    /// KEY_UPDATE, which concern the whole session (an ACK lists IDs that
    /// may live on different replicas; each frees what it holds and
    /// ignores the rest).
    fn replicas_for(&mut self, client: SocketAddr, meta: &Meta) -> Vec<usize> {
        let n = self.replica_paths.len();
        if n == 1 {
            return vec![0];
        }
        match meta.ty {
            PacketType::ACK | PacketType::KEY_UPDATE => (0..n).collect(),
            PacketType::HANDSHAKE => vec![self.session_replica(client)],
            _ => match self.config.replica_policy {
                ReplicaPolicy::Message => vec![message_replica(client, meta.id, n)],
                ReplicaPolicy::Session => vec![self.session_replica(client)],
            },
        }
    }

    fn session_replica(&mut self, client: SocketAddr) -> usize {
        let n = self.replica_paths.len();
        let next = self.sessions.len();
        *self.sessions.entry(client).or_insert(next % n)
    }

    /// Pins, queues and counts one packet for `replica`, with its
    /// datagram's PATH (`path_packet`) in front if it had one.
    fn route(
        &mut self,
        now: Instant,
        client: SocketAddr,
        meta: Meta,
        replica: usize,
        path_packet: Option<&[u8]>,
        bytes: &[u8],
    ) {
        let class = self.config.class_of(client);
        let exclude = path_packet.map(path_excludes).unwrap_or_default();
        let choice = Choice {
            class,
            exclude: exclude.as_slice(),
        };
        let path = self.choose_path(now, client, &meta, replica, &choice);
        let queue = match meta.data {
            Some(d) => d.priority.min((self.config.priorities - 1) as u8),
            // Control packets (grants, resends, acks) are small and gate
            // whole messages: the most urgent queue, as Homa does.
            None => (self.config.priorities - 1) as u8,
        };
        let mut out = Vec::with_capacity(path_packet.map_or(0, <[u8]>::len) + bytes.len());
        out.extend_from_slice(path_packet.unwrap_or_default());
        out.extend_from_slice(bytes);
        let packet = Packet {
            bytes: out,
            client,
            meta,
            class,
            queue,
            has_path: path_packet.is_some(),
        };
        let bytes = &packet.bytes;
        self.stats.replicas[replica].add(bytes.len());
        let len = bytes.len();
        let p = &mut self.paths[path];
        match p.queue.push(now, packet) {
            Ok(occ) => {
                self.stats.paths[path].enqueued(len, occ);
            }
            Err(_) => self.stats.paths[path].drops += 1,
        }
    }

    /// The path of one packet, by the balance rule, among `replica`'s
    /// paths.
    fn choose_path(
        &mut self,
        now: Instant,
        client: SocketAddr,
        meta: &Meta,
        replica: usize,
        choice: &Choice<'_>,
    ) -> usize {
        let candidates = &self.replica_paths[replica];
        if candidates.len() == 1 {
            return candidates[0];
        }
        match self.config.balance {
            Balance::Ecmp => candidates[ecmp_path(client, self.config.port, candidates.len())],
            Balance::Spray => {
                self.spray_next = self.spray_next.wrapping_add(1);
                candidates[self.spray_next % candidates.len()]
            }
            Balance::Message => self.pin(now, client, meta, replica, choice),
            Balance::Alternate { period_ms } => {
                let start = *self.started.get_or_insert(now);
                let periods =
                    now.saturating_duration_since(start).as_millis() / u128::from(period_ms);
                candidates[(periods % candidates.len() as u128) as usize]
            }
        }
    }

    /// Message-aware choice: the message's pinned path, or for a new
    /// message the path where it would finish first.
    fn pin(
        &mut self,
        now: Instant,
        client: SocketAddr,
        meta: &Meta,
        replica: usize,
        choice: &Choice<'_>,
    ) -> usize {
        let key = MsgKey {
            client,
            key_phase: meta.key_phase,
            id: meta.id,
        };
        let per_message = meta.is_per_message();
        if per_message {
            if let Some(p) = self.pinned.get_mut(&key) {
                p.last_seen = now;
                let path = p.path;
                if let Some(d) = meta.data.filter(|d| !d.retransmit) {
                    let seen = u64::from(d.payload_len).min(p.remaining);
                    p.remaining -= seen;
                    self.paths[path].committed -= seen;
                }
                return path;
            }
        }
        let size = meta.data.map_or(0, |d| u64::from(d.message_wire_len));
        let path = self.least_finish(replica, size, choice);
        // Only DATA starts a message entry: a control packet for a
        // message we never saw (a GRANT for a response) is small and
        // goes the quickest way.
        if let (true, Some(d)) = (per_message, meta.data) {
            if self.pinned.len() < MAX_MESSAGES {
                let first = if d.retransmit {
                    0
                } else {
                    u64::from(d.payload_len)
                };
                let remaining = size.saturating_sub(d.wire_offset + first);
                self.paths[path].committed += remaining;
                self.pinned.insert(
                    key,
                    Pinned {
                        path,
                        remaining,
                        last_seen: now,
                    },
                );
                self.stats.paths[path].messages += 1;
            } else {
                self.stats.unpinned += 1;
            }
        }
        path
    }

    /// The replica's path with the earliest expected finish for `size`
    /// more bytes, among those the sender's PATH does not exclude for the
    /// packet's class (all of them if it excludes every one); ties go
    /// round robin.
    fn least_finish(&mut self, replica: usize, size: u64, choice: &Choice<'_>) -> usize {
        let base = self.config.pathlet_base;
        let all = &self.replica_paths[replica];
        let allowed: Vec<usize> = all
            .iter()
            .copied()
            .filter(|&k| !choice.excludes(base, k))
            .collect();
        let candidates = if allowed.is_empty() { all } else { &allowed };
        let finish = |k: usize| self.paths[k].expected_finish(size);
        let best = candidates
            .iter()
            .map(|&k| finish(k))
            .min()
            .unwrap_or_default();
        if all.iter().any(|&k| finish(k) < best) {
            self.stats.path_excluded_moves += 1;
        }
        let tied: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|&k| finish(k) == best)
            .collect();
        self.tie_next = self.tie_next.wrapping_add(1);
        tied[self.tie_next % tied.len()]
    }

    /// Forgets messages silent for `Config::message_idle` (their promise
    /// leaves their path's load); at most every [`SWEEP_EVERY`].
    fn sweep(&mut self, now: Instant) {
        if self
            .swept
            .is_some_and(|t| now.saturating_duration_since(t) < SWEEP_EVERY)
        {
            return;
        }
        self.swept = Some(now);
        let idle = self.config.message_idle;
        let paths = &mut self.paths;
        self.pinned.retain(|_, p| {
            let keep = now.saturating_duration_since(p.last_seen) < idle;
            if !keep {
                paths[p.path].committed -= p.remaining.min(paths[p.path].committed);
            }
            keep
        });
        self.delivered
            .retain(|_, d| now.saturating_duration_since(d.last) < idle);
    }

    /// The next packet due on any path at `now`: serialised at the path's
    /// rate, then held for its delay.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        for k in 0..self.paths.len() {
            self.serialise(now, k);
        }
        let k = (0..self.paths.len())
            .filter(|&k| {
                self.paths[k]
                    .delay_line
                    .front()
                    .is_some_and(|(at, _)| *at <= now)
            })
            .min_by_key(|&k| self.paths[k].delay_line.front().map(|(at, _)| *at))?;
        let (_, packet) = self.paths[k].delay_line.pop_front()?;
        self.stats.paths[k].sent(packet.bytes.len());
        self.count_order(&packet, now);
        Some(Transmit {
            path: k,
            client: packet.client,
            bytes: packet.bytes,
        })
    }

    /// Moves every packet whose serialisation has started by `now` from
    /// the queue to the delay line. Serialisation runs on the path's own
    /// clock (`free_at`), so a late call catches up without losing rate.
    fn serialise(&mut self, now: Instant, k: usize) {
        loop {
            let path = &mut self.paths[k];
            let Some(arrived) = path.queue.next_arrival() else {
                return;
            };
            let start = path.free_at.map_or(arrived, |f| f.max(arrived));
            if start > now {
                return;
            }
            let Some(q) = path.queue.pop() else {
                return;
            };
            let start = path.free_at.map_or(q.arrived, |f| f.max(q.arrived));
            let done = start + path.serialisation(q.packet.bytes.len());
            path.free_at = Some(done);
            let deliver_at = done + path.config.delay;
            self.depart(k, q, deliver_at);
        }
    }

    /// A packet leaves its queue: its feedback is computed, written into
    /// its PATH slot if it carries a PATH, and handed to the sink, and it
    /// enters the path's delay line.
    fn depart(&mut self, k: usize, mut q: Queued, deliver_at: Instant) {
        let path = &self.paths[k];
        let fb = PathFeedback {
            path: k as u8,
            class: q.packet.class,
            queue_bytes: path.queue.bytes().min(u64::from(u32::MAX)) as u32,
            queue_packets: path.queue.packets(),
            ce: q.at_arrival.ce,
        };
        if q.packet.has_path {
            let slot = fb.slot(self.config.pathlet_base);
            match write_path_slot(&mut q.packet.bytes, &slot) {
                Ok(SlotWrite::Written(_)) => self.stats.path_slots_written += 1,
                Ok(SlotWrite::Overflow) => self.stats.path_overflows += 1,
                // The PATH's length was told by its header when the
                // datagram was split, so it can be written: not reached.
                Err(_) => self.stats.path_dropped += 1,
            }
        }
        self.sink.feedback(&q.packet.meta, &fb, &mut q.packet.bytes);
        self.paths[k].delay_line.push_back((deliver_at, q.packet));
    }

    /// Counts a first-transmission DATA packet delivered after a later
    /// part of its message. `poll_transmit` hands packets out in delivery
    /// order (each delay line is in order, and the earliest head goes
    /// first), and each path's last hop is one order-keeping link.
    fn count_order(&mut self, packet: &Packet, now: Instant) {
        let Some(d) = packet.meta.data.filter(|d| !d.retransmit) else {
            return;
        };
        let key = MsgKey {
            client: packet.client,
            key_phase: packet.meta.key_phase,
            id: packet.meta.id,
        };
        let end = d.wire_offset + u64::from(d.payload_len);
        let e = self.delivered.entry(key).or_insert(Delivered {
            end: 0,
            reordered: false,
            last: now,
        });
        e.last = now;
        self.stats.data_packets += 1;
        if d.wire_offset < e.end {
            self.stats.out_of_order_packets += 1;
            if !e.reordered {
                e.reordered = true;
                self.stats.reordered_messages += 1;
            }
        }
        e.end = e.end.max(end);
    }

    /// When [`Forwarder::poll_transmit`] next has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.paths
            .iter()
            .flat_map(|p| {
                let serialise = p
                    .queue
                    .next_arrival()
                    .map(|a| p.free_at.map_or(a, |f| f.max(a)));
                let deliver = p.delay_line.front().map(|(at, _)| *at);
                [serialise, deliver]
            })
            .flatten()
            .min()
    }
}

#[cfg(test)]
mod tests;
