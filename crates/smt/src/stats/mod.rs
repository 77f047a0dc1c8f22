//! What an endpoint counted and holds: [`Stats`] for the endpoint (with
//! its busiest peers when asked), [`PeerStats`] for one peer's session.
//!
//! Every type here is plain data: `Clone`, `PartialEq`, `Default`, and
//! `serde::Serialize` / `Deserialize` (a JSON document, a metrics
//! pipeline); [`Stats::write_prometheus`] writes the Prometheus text
//! exposition format ([`crate::metrics`] writes several endpoints' in one
//! page). Counters only grow (for the endpoint's lifetime, or a session's:
//! a peer whose keys are replaced starts again from zero); the fields
//! named as gauges say what is held now. Durations are counted in
//! [`LatencyHistogram`]s, whose quantiles are within 12.25 % of the true
//! value; [`quantile`] is the same rank rule for sorted samples.
//!
//! ```no_run
//! # fn f(ep: &smt::Endpoint) -> Result<(), smt::Error> {
//! let stats = ep.stats()?;
//! println!(
//!     "{} RPCs, {} failed, {} packets retransmitted, {} datagrams dropped, p99 RTT ≤ {:?}",
//!     stats.total.rpcs.completed,
//!     stats.total.rpcs.failed,
//!     stats.total.packets.retransmitted,
//!     stats.total.drops.total(),
//!     stats.total.rtt.quantile(0.99),
//! );
//! println!(
//!     "served {} requests, p99 handler latency ≤ {:?}",
//!     stats.total.rpcs.served,
//!     stats.total.handler_latency.quantile(0.99),
//! );
//! let json = serde_json::to_string(&stats).unwrap();
//! # Ok(()) }
//! ```

use std::cmp::Reverse;
#[cfg(feature = "serde")]
use std::collections::BTreeMap;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
#[cfg(feature = "serde")]
use std::time::Duration;

#[cfg(feature = "serde")]
use serde::de::Error as _;
#[cfg(feature = "serde")]
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use crate::histogram::{quantile, LatencyHistogram};
pub use smt_proto::{DropCounts, DropReason};

mod timing;
pub(crate) use self::timing::Timing;

/// A snapshot of one endpoint: its counters (all peers together), what it
/// holds now, and (from [`crate::Endpoint::stats_with_peers`]) its busiest
/// peers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct Stats {
    /// Everything the endpoint counted, every peer's included (and what
    /// came from addresses without a session: drops, handshake openings).
    pub total: Counters,
    /// Gauges: what the endpoint holds now.
    pub held: Held,
    /// Peers' own counters, busiest first (bytes sent and received). Empty
    /// from [`crate::Endpoint::stats`]; up to the number asked for from
    /// [`crate::Endpoint::stats_with_peers`].
    pub peers: Vec<PeerStats>,
}

/// The counters of one peer's session.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct PeerStats {
    /// The peer's address.
    pub addr: SocketAddr,
    /// Gauge: the session's current key epoch (0 until the first key
    /// update or a handshake's key switch).
    pub key_epoch: u64,
    /// What the session counted since its keys were installed. Counters
    /// documented as the endpoint's only are 0 here (counting them per
    /// peer would cost a lookup per packet); `traffic.datagrams_received`
    /// counts packets (a coalesced datagram once per packet).
    pub counters: Counters,
    /// Gauges: what the peer's messages in progress hold now.
    pub held: PeerHeld,
}

/// Counters of an endpoint or of one peer's session.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct Counters {
    /// RPCs, as client and as server.
    pub rpcs: RpcCounts,
    /// Datagrams, bytes and messages.
    pub traffic: Traffic,
    /// SMT packets by kind.
    pub packets: PacketCounts,
    /// TLS records.
    pub records: RecordCounts,
    /// Handshakes and the sessions they make.
    pub handshakes: HandshakeCounts,
    /// Datagrams (or packets of a datagram) dropped, by reason: what the
    /// peer or an attacker sent that was not used. Every reason is
    /// present, most at 0.
    #[cfg_attr(feature = "serde", serde(with = "drops_by_name"))]
    pub drops: DropCounts,
    /// Round-trip times of the RPCs completed as client: from the
    /// application's call to its whole response (a handshake it waited
    /// for, the server's processing, retransmissions and restarts
    /// included), on the endpoint's clock (read at each command and turn).
    /// Fine log-scale buckets ([`LatencyHistogram`]). Empty in a
    /// [`crate::workers`] shard's counters.
    #[cfg_attr(feature = "serde", serde(with = "histogram_buckets"))]
    pub rtt: LatencyHistogram,
    /// Server side: how long the application took to answer the requests
    /// it served (`RpcCounts::served`), from a request's delivery to the
    /// application (queued for `accept`, or reported by `poll`) until its
    /// response was handed back (`respond`). The endpoint's only.
    #[cfg_attr(feature = "serde", serde(with = "histogram_buckets"))]
    pub handler_latency: LatencyHistogram,
}

/// RPCs, as client and as server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct RpcCounts {
    /// Calls whose response arrived whole.
    pub completed: u64,
    /// Calls that failed ([`crate::RpcError`]: timeout, the server lost or
    /// refused the request…), deadlines and cancellations not counted.
    pub failed: u64,
    /// Requests sent again under a fresh message ID because the server
    /// had lost them.
    pub restarted: u64,
    /// Server side: requests refused unexecuted (the client hears
    /// OVERLOADED): complete while the application held
    /// `max_pending_requests`, or not admitted by the bounds on partial
    /// requests and buffered bytes.
    pub refused: u64,
    /// Server side: partial requests evicted to make room for another
    /// peer's when the totals (`max_buffered_total`,
    /// `max_incoming_total`) were reached. The endpoint's only.
    pub evicted: u64,
    /// Server side: requests delivered to the application and answered
    /// (the response accepted for sending); their handler latency is in
    /// `Counters::handler_latency`. The endpoint's only.
    pub served: u64,
    /// Server side: requests delivered to the application and dropped
    /// unanswered (or left in the queue at a close), or whose response
    /// could not be sent; their clients hear ABANDONED. The endpoint's
    /// only.
    pub abandoned: u64,
}

/// Datagrams, bytes and messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct Traffic {
    /// Datagrams sent (a GSO batch counts each of its segments).
    pub datagrams_sent: u64,
    /// Datagrams received (a GRO batch counts each of its segments); for
    /// a peer, packets.
    pub datagrams_received: u64,
    /// Bytes of the datagrams sent (SMT packets, without IP and UDP
    /// headers).
    pub bytes_sent: u64,
    /// Bytes of the datagrams received.
    pub bytes_received: u64,
    /// Messages (requests and responses) sealed and queued.
    pub messages_sent: u64,
    /// Messages received whole and authenticated.
    pub messages_received: u64,
}

/// SMT packets by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct PacketCounts {
    /// DATA packets sent, retransmissions included. The endpoint's only.
    pub data_sent: u64,
    /// Control packets sent (GRANT, RESEND, ACK, HANDSHAKE…). The
    /// endpoint's only.
    pub control_sent: u64,
    /// DATA packets sent again after a RESEND.
    pub retransmitted: u64,
    /// RESENDs sent (asking a peer for data again).
    pub resends_sent: u64,
    /// GRANTs sent. The endpoint's only.
    pub grants_sent: u64,
    /// Packets that shared a datagram with an earlier packet, sent:
    /// datagrams + coalesced = packets. The endpoint's only.
    pub coalesced_sent: u64,
    /// The same, received. The endpoint's only.
    pub coalesced_received: u64,
    /// Control packets not sent because the peer's address is not
    /// validated and its amplification budget (3× the bytes received from
    /// it) was spent. The endpoint's only.
    pub amplification_limited: u64,
    /// ICMP errors the socket reported (unreachable). The endpoint's only.
    pub unreachable_reports: u64,
    /// CREDIT packets sent (server: how many requests a client may have
    /// outstanding) and accepted (client). The endpoint's only.
    pub credits_sent: u64,
    /// CREDIT packets accepted (client). The endpoint's only.
    pub credits_received: u64,
    /// Pathlet feedback (`ProtocolConfig::pathlet_feedback`): PATH packets
    /// counted (beside a packet that authenticated), PATH_ECHO packets
    /// sent and accepted, DATA packets a pathlet's window held back. The
    /// endpoint's only.
    pub paths_counted: u64,
    /// PATH_ECHO packets sent. The endpoint's only.
    pub path_echoes_sent: u64,
    /// PATH_ECHO packets accepted. The endpoint's only.
    pub path_echoes_received: u64,
    /// DATA packets a pathlet's window held back. The endpoint's only.
    pub pathlet_held: u64,
}

/// TLS records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct RecordCounts {
    /// Records sealed (or framed for a NIC to seal).
    pub sealed: u64,
    /// Records whose opening was attempted, successful or not, those a
    /// NIC decrypted included.
    pub opened: u64,
    /// Receive offload: records the NIC decrypted and authenticated whole.
    pub offloaded: u64,
    /// Receive offload: records that arrived partly decrypted by the NIC
    /// and were finished in software.
    pub partially_offloaded: u64,
}

/// Handshakes and the sessions they make: the endpoint's only (a peer's
/// session starts when its handshake ends).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct HandshakeCounts {
    /// Handshakes that installed keys, as client or server.
    pub completed: u64,
    /// Handshakes that failed.
    pub failed: u64,
    /// Handshake openings answered with a stateless RETRY (under a flood
    /// of openings).
    pub retries_sent: u64,
    /// Openings whose retry token was accepted.
    pub retry_tokens_accepted: u64,
    /// Sessions a handshake made, forgotten after `session_idle_timeout`
    /// of silence.
    pub sessions_evicted: u64,
    /// Sessions a responder's handshake made, forgotten before the peer
    /// used their keys (nothing authenticated came under them).
    pub unvalidated_sessions_dropped: u64,
    /// Handshakes peers opened that a newer opening displaced from a full
    /// table (the oldest, and older than a genuine handshake takes).
    pub displaced: u64,
    /// Handshakes that ran past `ProtocolConfig::handshake_deadline`.
    pub past_deadline: u64,
    /// Openings refused because their IP address or prefix held its
    /// share of the table (`max_handshakes_per_ip`, `_per_prefix`).
    pub over_quota: u64,
    /// Sessions evicted to make room under `max_sessions`.
    pub sessions_displaced: u64,
}

/// Gauges: what an endpoint holds now, as of the last event that changed
/// it or the last tick. `docs/resilience.md` says what bounds each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct Held {
    /// Sessions with keys.
    pub sessions: u64,
    /// Handshakes in progress.
    pub handshakes: u64,
    /// Bytes held by messages being received (reassembly buffers, data
    /// opened so far, bookkeeping), requests and responses.
    pub incoming_bytes: u64,
    /// The largest `incoming_bytes` so far.
    pub peak_incoming_bytes: u64,
    /// Requests partially received.
    pub partial_requests: u64,
    /// Bytes handshakes in progress hold for out-of-order handshake data.
    pub handshake_bytes: u64,
    /// Bytes of spare message buffers kept for reuse (at most 8 MiB), as
    /// of the last tick.
    pub spare_buffer_bytes: u64,
}

/// Gauges: what one peer's messages in progress hold now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize, Deserialize))]
#[non_exhaustive]
pub struct PeerHeld {
    /// Bytes held by the peer's messages being received.
    pub incoming_bytes: u64,
    /// Requests from the peer partially received.
    pub partial_requests: u64,
}

impl Stats {
    /// The endpoint's snapshot from the core's counters and the engine's
    /// timing, with `peers`.
    pub(crate) fn new(core: &smt_proto::Stats, timing: &Timing, peers: Vec<PeerStats>) -> Self {
        let u = &core.usage;
        let mut total = Counters::from(core);
        timing.fill_endpoint(&mut total);
        Self {
            total,
            held: Held {
                sessions: u.sessions,
                handshakes: u.handshakes,
                incoming_bytes: u.incoming_bytes,
                peak_incoming_bytes: u.peak_incoming_bytes,
                partial_requests: u.partial_requests,
                handshake_bytes: u.handshake_bytes,
                spare_buffer_bytes: u.spare_buffer_bytes,
            },
            peers,
        }
    }
}

impl PeerStats {
    pub(crate) fn new(addr: SocketAddr, core: &smt_proto::Stats, timing: &Timing) -> Self {
        let mut counters = Counters::from(core);
        timing.fill_peer(addr, &mut counters);
        Self {
            addr,
            key_epoch: core.key_epoch,
            counters,
            held: PeerHeld {
                incoming_bytes: core.usage.incoming_bytes,
                partial_requests: core.usage.partial_requests,
            },
        }
    }
}

/// The core's counters; what the engine times itself (round trips,
/// requests served, handler latency) is left empty.
impl From<&smt_proto::Stats> for Counters {
    fn from(s: &smt_proto::Stats) -> Self {
        Self {
            rpcs: RpcCounts {
                completed: s.rpcs_completed,
                failed: s.rpcs_failed,
                restarted: s.requests_restarted,
                refused: s.requests_refused,
                evicted: s.partial_evicted,
                served: 0,
                abandoned: 0,
            },
            traffic: Traffic {
                datagrams_sent: s.datagrams_tx,
                datagrams_received: s.datagrams_rx,
                bytes_sent: s.bytes_tx,
                bytes_received: s.bytes_rx,
                messages_sent: s.messages_sent,
                messages_received: s.messages_received,
            },
            packets: PacketCounts {
                data_sent: s.data_packets_tx,
                control_sent: s.control_packets_tx,
                retransmitted: s.retransmitted_packets,
                resends_sent: s.resends_sent,
                grants_sent: s.grants_sent,
                coalesced_sent: s.coalesced_packets_tx,
                coalesced_received: s.coalesced_packets_rx,
                amplification_limited: s.amplification_limited,
                unreachable_reports: s.unreachable_reports,
                credits_sent: s.credits_sent,
                credits_received: s.credits_received,
                paths_counted: s.paths_counted,
                path_echoes_sent: s.path_echoes_tx,
                path_echoes_received: s.path_echoes_rx,
                pathlet_held: s.pathlet_held,
            },
            records: RecordCounts {
                sealed: s.records_sealed,
                opened: s.records_opened,
                offloaded: s.records_offloaded,
                partially_offloaded: s.records_partially_offloaded,
            },
            handshakes: HandshakeCounts {
                completed: s.handshakes_completed,
                failed: s.handshakes_failed,
                retries_sent: s.retries_sent,
                retry_tokens_accepted: s.retry_tokens_accepted,
                sessions_evicted: s.sessions_evicted,
                unvalidated_sessions_dropped: s.unvalidated_sessions_dropped,
                displaced: s.handshakes_displaced,
                past_deadline: s.handshakes_past_deadline,
                over_quota: s.handshakes_over_quota,
                sessions_displaced: s.sessions_displaced,
            },
            drops: s.drops,
            rtt: LatencyHistogram::default(),
            handler_latency: LatencyHistogram::default(),
        }
    }
}

/// The endpoint's snapshot with up to `max_peers` of its peers, the
/// busiest (bytes sent and received) first. Visits every session once.
pub(crate) fn snapshot(core: &smt_proto::Endpoint, timing: &Timing, max_peers: usize) -> Stats {
    Stats::new(core.stats(), timing, busiest_peers(core, timing, max_peers))
}

fn busiest_peers(core: &smt_proto::Endpoint, timing: &Timing, max: usize) -> Vec<PeerStats> {
    if max == 0 {
        return Vec::new();
    }
    // A min-heap of the `max` busiest so far: O(sessions × log max).
    let mut top = BinaryHeap::new();
    for (addr, s) in core.peers_stats() {
        top.push(Reverse((s.bytes_tx + s.bytes_rx, addr)));
        if top.len() > max {
            top.pop();
        }
    }
    let mut peers: Vec<_> = top
        .into_sorted_vec()
        .into_iter()
        .filter_map(|Reverse((_, addr))| {
            Some(PeerStats::new(addr, &core.peer_stats(addr)?, timing))
        })
        .collect();
    let busy = |p: &PeerStats| p.counters.traffic.bytes_sent + p.counters.traffic.bytes_received;
    peers.sort_by(|a, b| busy(b).cmp(&busy(a)).then(a.addr.cmp(&b.addr)));
    peers
}

/// Drops serialised as `{ "reason": count }` with every reason present;
/// an unknown reason name is an error.
#[cfg(feature = "serde")]
mod drops_by_name {
    use super::*;

    pub(super) fn serialize<S: Serializer>(drops: &DropCounts, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(drops.iter().map(|(r, n)| (r.name(), n)))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DropCounts, D::Error> {
        let by_name = BTreeMap::<String, u64>::deserialize(d)?;
        let mut drops = DropCounts::default();
        for (name, n) in by_name {
            let reason = DropReason::ALL
                .into_iter()
                .find(|r| r.name() == name)
                .ok_or_else(|| D::Error::custom(format!("unknown drop reason {name:?}")))?;
            drops.set(reason, n);
        }
        Ok(drops)
    }
}

/// A [`LatencyHistogram`] serialised as its filled buckets, shortest
/// first: each one's upper bound in nanoseconds (`null` for the overflow
/// bucket) and count (not cumulative), and the sum of the durations in
/// nanoseconds. Read back, each count goes to the bucket that holds its
/// bound, so a file written with other bounds still reads.
#[cfg(feature = "serde")]
mod histogram_buckets {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Bucket {
        le_nanos: Option<u64>,
        count: u64,
    }

    #[derive(Serialize, Deserialize)]
    struct Repr {
        buckets: Vec<Bucket>,
        sum_nanos: u64,
    }

    pub(super) fn serialize<S: Serializer>(h: &LatencyHistogram, s: S) -> Result<S::Ok, S::Error> {
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let buckets = h
            .filled()
            .map(|(bound, count)| Bucket {
                le_nanos: bound.map(nanos),
                count,
            })
            .collect();
        Repr {
            buckets,
            sum_nanos: nanos(h.sum()),
        }
        .serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<LatencyHistogram, D::Error> {
        let r = Repr::deserialize(d)?;
        let mut h = LatencyHistogram::default();
        for b in r.buckets {
            h.add_bucket(b.le_nanos.map(Duration::from_nanos), b.count);
        }
        h.set_sum(Duration::from_nanos(r.sum_nanos));
        Ok(h)
    }
}
