//! Prometheus metrics for one endpoint or many, written by the
//! `prometheus-client` crate (re-exported as [`prometheus_client`]) in the
//! Prometheus text exposition format (version 0.0.4).
//!
//! Every metric family is named once per page, with one sample per
//! endpoint told apart by its labels (`endpoint="127.0.0.1:7878"` by
//! default): two endpoints' separate pages pasted together would name each
//! family twice, which Prometheus refuses whole ("second HELP line").
//! Hence one [`Collector`] for all of a process's endpoints:
//!
//! ```no_run
//! use smt::metrics::{prometheus_client, EndpointCollector};
//! # fn f(a: &smt::Endpoint, b: &smt::Endpoint) -> std::fmt::Result {
//! let collector = EndpointCollector::new();
//! collector.add(a); // labelled endpoint="<a's address>"
//! collector.add_with(b, &[("endpoint", "b"), ("role", "client")], 8); // and its 8 busiest peers
//!
//! // In an application's own registry, next to its other metrics…
//! let mut registry = prometheus_client::registry::Registry::default();
//! registry.register_collector(Box::new(collector.clone()));
//! let mut page = String::new();
//! prometheus_client::encoding::prometheus_text::encode(&mut page, &registry)?;
//! // …or alone.
//! let mut page = String::new();
//! collector.write(&mut page)?;
//! # Ok(()) }
//! ```
//!
//! One table names every counter once; the endpoint's totals and each
//! peer's use it alike (`smt_*` and `smt_peer_*{peer="…"}`), so the two
//! cannot drift apart. Durations are histograms in seconds with the
//! buckets of [`LatencyHistogram`] (six per doubling: quantiles within
//! 12.25 %). `docs/observability.md` § 5 lists every metric.

use std::fmt;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    prometheus_text, DescriptorEncoder, EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

pub use prometheus_client;

use crate::stats::{Counters, LatencyHistogram, PeerStats, Stats};
use crate::threaded::lock_ignoring_poison;
use crate::threaded::WeakEndpoint;
use crate::Endpoint;

/// The `Content-Type` of the pages written here (Prometheus text, 0.0.4).
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// Writes several snapshots as one page, each snapshot's samples with its
/// labels (which must tell the snapshots apart, e.g.
/// `[("endpoint", "a")]` and `[("endpoint", "b")]`; the same labels twice
/// make a page Prometheus refuses).
pub fn write(snapshots: &[(&Stats, &[(&str, &str)])], out: &mut impl fmt::Write) -> fmt::Result {
    let snapshots = snapshots
        .iter()
        .map(|(stats, labels)| Labelled::new((*stats).clone(), labels))
        .collect();
    write_page(Snapshots(snapshots), out)
}

// Here, not in `stats`: the exposition format is this module's; `stats`
// stays below it.
impl Stats {
    /// Writes the snapshot in the Prometheus text exposition format
    /// (version 0.0.4, by the `prometheus-client` crate): every metric
    /// named `smt_*` with its unit in the name, `# HELP` and `# TYPE`
    /// lines, drops labelled by `reason`, the RTT and handler latency as
    /// histograms in seconds, and the peers in [`Stats::peers`] as
    /// `smt_peer_*` metrics labelled by `peer`. `labels` (e.g.
    /// `[("endpoint", "127.0.0.1:7878")]`) go on every sample. See
    /// `docs/observability.md` for the list.
    ///
    /// One page per snapshot: two endpoints' pages pasted together name
    /// each metric twice, which Prometheus refuses. Several endpoints go
    /// in one page with [`crate::metrics::write`] or a
    /// [`crate::metrics::EndpointCollector`].
    pub fn write_prometheus(
        &self,
        labels: &[(&str, &str)],
        out: &mut impl fmt::Write,
    ) -> fmt::Result {
        write(&[(self, labels)], out)
    }
}

fn write_page(collector: impl Collector, out: &mut impl fmt::Write) -> fmt::Result {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(collector));
    prometheus_text::encode(out, &registry)
}

/// A [`Collector`] of any number of endpoints: each scrape takes every
/// endpoint's [`Stats`] (with its busiest peers, if asked) and writes
/// each metric family once, a sample per endpoint. Cheap to clone; the
/// clones share the list. It does not keep endpoints open: one whose
/// every handle was dropped, or that was closed, leaves the list.
#[derive(Clone, Default)]
pub struct EndpointCollector {
    sources: Arc<Mutex<Vec<Source>>>,
}

struct Source {
    endpoint: WeakEndpoint,
    labels: Vec<(String, String)>,
    peers: usize,
}

impl fmt::Debug for EndpointCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sources = lock_ignoring_poison(&self.sources);
        let labels: Vec<_> = sources.iter().map(|s| &s.labels).collect();
        f.debug_struct("EndpointCollector")
            .field("endpoints", &labels)
            .finish()
    }
}

impl EndpointCollector {
    /// A collector with no endpoints yet (as `Default`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `endpoint`, its samples labelled `endpoint="<local address>"`.
    pub fn add(&self, endpoint: &Endpoint) {
        let addr = endpoint.local_addr().to_string();
        self.add_with(endpoint, &[("endpoint", &addr)], 0);
    }

    /// Adds `endpoint` with its own `labels` on every sample, and its
    /// `peers` busiest peers as `smt_peer_*` metrics. An endpoint already
    /// added with the same labels is replaced (two with the same labels
    /// would make a page Prometheus refuses).
    pub fn add_with(&self, endpoint: &Endpoint, labels: &[(&str, &str)], peers: usize) {
        let labels = owned(labels);
        let mut sources = lock_ignoring_poison(&self.sources);
        sources.retain(|s| s.labels != labels);
        sources.push(Source {
            endpoint: endpoint.downgrade(),
            labels,
            peers,
        });
    }

    /// Writes the endpoints' metrics as a page of their own.
    pub fn write(&self, out: &mut impl fmt::Write) -> fmt::Result {
        write_page(self.clone(), out)
    }

    /// Every endpoint still open, with its labels; forgets the others.
    fn snapshots(&self) -> Snapshots {
        let mut sources = lock_ignoring_poison(&self.sources);
        let mut taken = Vec::with_capacity(sources.len());
        sources.retain(|source| {
            let Some(endpoint) = source.endpoint.upgrade() else {
                return false;
            };
            match endpoint.stats_with_peers(source.peers) {
                Ok(stats) => {
                    taken.push(Labelled {
                        stats,
                        labels: source.labels.clone(),
                    });
                    true
                }
                Err(_) => false,
            }
        });
        Snapshots(taken)
    }
}

impl Collector for EndpointCollector {
    fn encode(&self, encoder: DescriptorEncoder<'_>) -> fmt::Result {
        self.snapshots().encode(encoder)
    }
}

/// Snapshots with their labels, written as one set of families.
#[derive(Debug)]
struct Snapshots(Vec<Labelled>);

#[derive(Debug)]
struct Labelled {
    stats: Stats,
    labels: Vec<(String, String)>,
}

impl Labelled {
    fn new(stats: Stats, labels: &[(&str, &str)]) -> Self {
        Self {
            stats,
            labels: owned(labels),
        }
    }
}

fn owned(labels: &[(&str, &str)]) -> Vec<(String, String)> {
    labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl Collector for Snapshots {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        write_endpoints(&mut encoder, &self.0)?;
        if self.0.iter().any(|s| !s.stats.peers.is_empty()) {
            write_peers(&mut encoder, &self.0)?;
        }
        Ok(())
    }
}

/// One counter: its name after `smt_` / `smt_peer_` (its unit in the
/// name where it has one; the encoder adds `_total`), its help text,
/// where it is read, and whether a peer's session counts it (`Stats`
/// docs: the others are the endpoint's only, and would be zeros).
struct Counter {
    name: &'static str,
    help: &'static str,
    read: fn(&Counters) -> u64,
    peer: bool,
}

const COUNTERS: &[Counter] = &[
    Counter {
        name: "rpcs_completed",
        help: "Calls whose response arrived whole.",
        read: |c| c.rpcs.completed,
        peer: true,
    },
    Counter {
        name: "rpcs_failed",
        help: "Calls that failed (timeout, request lost or refused by the server).",
        read: |c| c.rpcs.failed,
        peer: true,
    },
    Counter {
        name: "rpcs_restarted",
        help: "Requests sent again under a fresh ID because the server had lost them.",
        read: |c| c.rpcs.restarted,
        peer: true,
    },
    Counter {
        name: "rpcs_refused",
        help: "Requests refused unexecuted (OVERLOADED): max_pending_requests held, or not admitted.",
        read: |c| c.rpcs.refused,
        peer: true,
    },
    Counter {
        name: "rpcs_evicted",
        help: "Partial requests evicted to make room for another peer's.",
        read: |c| c.rpcs.evicted,
        peer: false,
    },
    Counter {
        name: "requests_served",
        help: "Requests the application answered (its response accepted for sending).",
        read: |c| c.rpcs.served,
        peer: false,
    },
    Counter {
        name: "requests_abandoned",
        help: "Requests delivered to the application and dropped unanswered, or whose response could not be sent.",
        read: |c| c.rpcs.abandoned,
        peer: false,
    },
    Counter {
        name: "datagrams_sent",
        help: "Datagrams sent.",
        read: |c| c.traffic.datagrams_sent,
        peer: true,
    },
    Counter {
        name: "datagrams_received",
        help: "Datagrams received.",
        read: |c| c.traffic.datagrams_received,
        peer: false,
    },
    Counter {
        name: "sent_bytes",
        help: "Bytes of the datagrams sent (without IP and UDP headers).",
        read: |c| c.traffic.bytes_sent,
        peer: true,
    },
    Counter {
        name: "received_bytes",
        help: "Bytes of the datagrams received (without IP and UDP headers).",
        read: |c| c.traffic.bytes_received,
        peer: true,
    },
    Counter {
        name: "messages_sent",
        help: "Messages (requests and responses) sealed and queued.",
        read: |c| c.traffic.messages_sent,
        peer: true,
    },
    Counter {
        name: "messages_received",
        help: "Messages received whole and authenticated.",
        read: |c| c.traffic.messages_received,
        peer: true,
    },
    Counter {
        name: "data_packets_sent",
        help: "DATA packets sent, retransmissions included.",
        read: |c| c.packets.data_sent,
        peer: false,
    },
    Counter {
        name: "control_packets_sent",
        help: "Control packets sent.",
        read: |c| c.packets.control_sent,
        peer: false,
    },
    Counter {
        name: "retransmitted_packets",
        help: "DATA packets sent again after a RESEND.",
        read: |c| c.packets.retransmitted,
        peer: true,
    },
    Counter {
        name: "resends_sent",
        help: "RESENDs sent (asking the peer for data again).",
        read: |c| c.packets.resends_sent,
        peer: true,
    },
    Counter {
        name: "grants_sent",
        help: "GRANTs sent.",
        read: |c| c.packets.grants_sent,
        peer: false,
    },
    Counter {
        name: "coalesced_packets_sent",
        help: "Packets sent in a datagram after another packet.",
        read: |c| c.packets.coalesced_sent,
        peer: false,
    },
    Counter {
        name: "coalesced_packets_received",
        help: "Packets received in a datagram after another packet.",
        read: |c| c.packets.coalesced_received,
        peer: false,
    },
    Counter {
        name: "amplification_limited_packets",
        help: "Control packets not sent: an unvalidated address's amplification budget was spent.",
        read: |c| c.packets.amplification_limited,
        peer: false,
    },
    Counter {
        name: "unreachable_reports",
        help: "ICMP unreachable errors the socket reported.",
        read: |c| c.packets.unreachable_reports,
        peer: false,
    },
    Counter {
        name: "records_sealed",
        help: "TLS records sealed.",
        read: |c| c.records.sealed,
        peer: true,
    },
    Counter {
        name: "records_opened",
        help: "TLS records whose opening was attempted.",
        read: |c| c.records.opened,
        peer: true,
    },
    Counter {
        name: "records_offloaded",
        help: "TLS records a NIC decrypted whole (receive offload).",
        read: |c| c.records.offloaded,
        peer: true,
    },
    Counter {
        name: "records_partially_offloaded",
        help: "TLS records a NIC decrypted in part, finished in software.",
        read: |c| c.records.partially_offloaded,
        peer: true,
    },
    Counter {
        name: "handshakes_completed",
        help: "Handshakes that installed keys.",
        read: |c| c.handshakes.completed,
        peer: false,
    },
    Counter {
        name: "handshakes_failed",
        help: "Handshakes that failed.",
        read: |c| c.handshakes.failed,
        peer: false,
    },
    Counter {
        name: "handshake_retries_sent",
        help: "Handshake openings answered with a stateless RETRY.",
        read: |c| c.handshakes.retries_sent,
        peer: false,
    },
    Counter {
        name: "handshake_retry_tokens_accepted",
        help: "Handshake openings whose retry token was accepted.",
        read: |c| c.handshakes.retry_tokens_accepted,
        peer: false,
    },
    Counter {
        name: "sessions_evicted",
        help: "Handshake sessions forgotten after session_idle_timeout of silence.",
        read: |c| c.handshakes.sessions_evicted,
        peer: false,
    },
    Counter {
        name: "unvalidated_sessions_dropped",
        help: "Handshake sessions forgotten before the peer used their keys.",
        read: |c| c.handshakes.unvalidated_sessions_dropped,
        peer: false,
    },
    Counter {
        name: "handshakes_displaced",
        help: "Handshakes a newer opening displaced from a full table.",
        read: |c| c.handshakes.displaced,
        peer: false,
    },
    Counter {
        name: "handshakes_past_deadline",
        help: "Handshakes that ran past handshake_deadline.",
        read: |c| c.handshakes.past_deadline,
        peer: false,
    },
    Counter {
        name: "handshakes_over_quota",
        help: "Handshake openings refused for their address's or prefix's share of the table.",
        read: |c| c.handshakes.over_quota,
        peer: false,
    },
    Counter {
        name: "sessions_displaced",
        help: "Sessions evicted to make room under max_sessions.",
        read: |c| c.handshakes.sessions_displaced,
        peer: false,
    },
];

/// A gauge: name after its prefix, help, how it is read.
type Gauge<T> = (&'static str, &'static str, fn(&T) -> u64);

/// A histogram of durations: name after its prefix, help, where it is.
type Timed<T> = (&'static str, &'static str, fn(&T) -> &LatencyHistogram);

/// The endpoint's gauges (`smt_*`).
const GAUGES: [Gauge<Stats>; 7] = [
    ("sessions", "Sessions with keys.", |s| s.held.sessions),
    ("handshakes_in_progress", "Handshakes in progress.", |s| {
        s.held.handshakes
    }),
    (
        "incoming_bytes",
        "Bytes held by messages being received.",
        |s| s.held.incoming_bytes,
    ),
    (
        "peak_incoming_bytes",
        "The largest smt_incoming_bytes so far.",
        |s| s.held.peak_incoming_bytes,
    ),
    ("partial_requests", "Requests partially received.", |s| {
        s.held.partial_requests
    }),
    (
        "handshake_bytes",
        "Bytes handshakes in progress hold for out-of-order data.",
        |s| s.held.handshake_bytes,
    ),
    (
        "spare_buffer_bytes",
        "Bytes of spare message buffers kept for reuse.",
        |s| s.held.spare_buffer_bytes,
    ),
];

/// A peer's gauges (`smt_peer_*`).
const PEER_GAUGES: [Gauge<PeerStats>; 3] = [
    ("key_epoch", "The session's current key epoch.", |p| {
        p.key_epoch
    }),
    (
        "incoming_bytes",
        "Bytes held by the peer's messages being received.",
        |p| p.held.incoming_bytes,
    ),
    (
        "partial_requests",
        "Requests from the peer partially received.",
        |p| p.held.partial_requests,
    ),
];

const RTT_HELP: &str = "Round-trip times of completed calls, from the call to its whole response.";

const HANDLER_HELP: &str =
    "Time from a request's delivery to the application until its response was handed back.";

/// The endpoints' own families: a sample per endpoint in each.
fn write_endpoints(enc: &mut DescriptorEncoder<'_>, snaps: &[Labelled]) -> fmt::Result {
    for c in COUNTERS {
        let family_name = format!("smt_{}", c.name);
        let mut family = enc.encode_descriptor(&family_name, c.help, None, MetricType::Counter)?;
        for s in snaps {
            counter(&mut family, &s.labels, (c.read)(&s.stats.total))?;
        }
    }
    let help = "Datagrams or packets dropped, by reason.";
    let mut family = enc.encode_descriptor("smt_drops", help, None, MetricType::Counter)?;
    for s in snaps {
        for (reason, n) in s.stats.total.drops.iter() {
            let labels = (s.labels.as_slice(), [("reason", reason.name())]);
            counter(&mut family, &labels, n)?;
        }
    }
    let durations: [Timed<Counters>; 2] = [
        ("rpc_rtt_seconds", RTT_HELP, |c| &c.rtt),
        ("handler_latency_seconds", HANDLER_HELP, |c| {
            &c.handler_latency
        }),
    ];
    for (name, help, read) in durations {
        let family_name = format!("smt_{name}");
        let mut family = enc.encode_descriptor(&family_name, help, None, MetricType::Histogram)?;
        for s in snaps {
            histogram(&mut family, &s.labels, read(&s.stats.total))?;
        }
    }
    for (name, help, read) in GAUGES {
        let name = format!("smt_{name}");
        let mut family = enc.encode_descriptor(&name, help, None, MetricType::Gauge)?;
        for s in snaps {
            gauge(&mut family, &s.labels, read(&s.stats))?;
        }
    }
    Ok(())
}

/// Every peer metric: one family at a time, a sample per peer of each
/// endpoint, labelled with the endpoint's labels and `peer`.
fn write_peers(enc: &mut DescriptorEncoder<'_>, snaps: &[Labelled]) -> fmt::Result {
    let peers: Vec<(&Labelled, &PeerStats, String)> = snaps
        .iter()
        .flat_map(|s| {
            s.stats
                .peers
                .iter()
                .map(move |p| (s, p, p.addr.to_string()))
        })
        .collect();
    let by_peer = |s: &'_ Labelled, addr: &'_ str| {
        (s.labels.clone(), [("peer".to_string(), addr.to_string())])
    };
    for c in COUNTERS.iter().filter(|c| c.peer) {
        let family_name = format!("smt_peer_{}", c.name);
        let mut family = enc.encode_descriptor(&family_name, c.help, None, MetricType::Counter)?;
        for (s, p, addr) in &peers {
            counter(&mut family, &by_peer(s, addr), (c.read)(&p.counters))?;
        }
    }
    // A peer's session counts packets, not datagrams.
    let help = "Packets received from the peer.";
    let mut family =
        enc.encode_descriptor("smt_peer_received_packets", help, None, MetricType::Counter)?;
    for (s, p, addr) in &peers {
        let n = p.counters.traffic.datagrams_received;
        counter(&mut family, &by_peer(s, addr), n)?;
    }
    let help = "Datagrams or packets dropped, by reason.";
    let mut family = enc.encode_descriptor("smt_peer_drops", help, None, MetricType::Counter)?;
    for (s, p, addr) in &peers {
        for (reason, n) in p.counters.drops.iter() {
            let labels = (by_peer(s, addr), [("reason", reason.name())]);
            counter(&mut family, &labels, n)?;
        }
    }
    let mut family = enc.encode_descriptor(
        "smt_peer_rpc_rtt_seconds",
        RTT_HELP,
        None,
        MetricType::Histogram,
    )?;
    for (s, p, addr) in &peers {
        histogram(&mut family, &by_peer(s, addr), &p.counters.rtt)?;
    }
    for (name, help, read) in PEER_GAUGES {
        let family_name = format!("smt_peer_{name}");
        let mut family = enc.encode_descriptor(&family_name, help, None, MetricType::Gauge)?;
        for (s, p, addr) in &peers {
            gauge(&mut family, &by_peer(s, addr), read(p))?;
        }
    }
    Ok(())
}

/// One counter sample.
fn counter(family: &mut MetricEncoder<'_>, labels: &impl EncodeLabelSet, n: u64) -> fmt::Result {
    ConstCounter::new(n).encode(family.encode_family(labels)?)
}

/// One gauge sample.
fn gauge(family: &mut MetricEncoder<'_>, labels: &impl EncodeLabelSet, v: u64) -> fmt::Result {
    ConstGauge::new(v).encode(family.encode_family(labels)?)
}

/// One histogram in seconds: its cumulative `_bucket{le=…}` samples (the
/// encoder adds them up), `_sum` and `_count`.
fn histogram(
    family: &mut MetricEncoder<'_>,
    labels: &impl EncodeLabelSet,
    h: &LatencyHistogram,
) -> fmt::Result {
    let buckets: Vec<(f64, u64)> = h
        .buckets()
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let le = LatencyHistogram::bound(i).map_or(f64::INFINITY, |b| b.as_secs_f64());
            (le, *n)
        })
        .collect();
    let sum = h.sum().as_secs_f64();
    family
        .encode_family(labels)?
        .encode_histogram::<NoLabelSet>(sum, h.count(), &buckets, None)
}
