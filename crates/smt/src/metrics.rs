//! [`Stats`] in the Prometheus text exposition format (version 0.0.4),
//! for [`Stats::write_prometheus`]. One table names every counter once;
//! the endpoint's totals and each peer's use it alike (`smt_*` and
//! `smt_peer_*{peer="…"}`), so the two cannot drift apart.

use std::fmt::{self, Write};

use crate::stats::{Counters, PeerStats, RttHistogram, Stats};

/// One counter: its name after `smt_` / `smt_peer_` (with `_total`, and
/// its unit where it has one), its help text, where it is read, and
/// whether a peer's session counts it (`Stats` docs: the others are the
/// endpoint's only, and would be zeros).
struct Counter {
    name: &'static str,
    help: &'static str,
    read: fn(&Counters) -> u64,
    peer: bool,
}

const COUNTERS: &[Counter] = &[
    Counter {
        name: "rpcs_completed_total",
        help: "Calls whose response arrived whole.",
        read: |c| c.rpcs.completed,
        peer: true,
    },
    Counter {
        name: "rpcs_failed_total",
        help: "Calls that failed (timeout, request lost or refused by the server).",
        read: |c| c.rpcs.failed,
        peer: true,
    },
    Counter {
        name: "rpcs_restarted_total",
        help: "Requests sent again under a fresh ID because the server had lost them.",
        read: |c| c.rpcs.restarted,
        peer: true,
    },
    Counter {
        name: "rpcs_refused_total",
        help:
            "Requests refused unexecuted (OVERLOADED): max_pending_requests held, or not admitted.",
        read: |c| c.rpcs.refused,
        peer: true,
    },
    Counter {
        name: "rpcs_evicted_total",
        help: "Partial requests evicted to make room for another peer's.",
        read: |c| c.rpcs.evicted,
        peer: false,
    },
    Counter {
        name: "datagrams_sent_total",
        help: "Datagrams sent.",
        read: |c| c.traffic.datagrams_sent,
        peer: true,
    },
    Counter {
        name: "datagrams_received_total",
        help: "Datagrams received.",
        read: |c| c.traffic.datagrams_received,
        peer: false,
    },
    Counter {
        name: "sent_bytes_total",
        help: "Bytes of the datagrams sent (without IP and UDP headers).",
        read: |c| c.traffic.bytes_sent,
        peer: true,
    },
    Counter {
        name: "received_bytes_total",
        help: "Bytes of the datagrams received (without IP and UDP headers).",
        read: |c| c.traffic.bytes_received,
        peer: true,
    },
    Counter {
        name: "messages_sent_total",
        help: "Messages (requests and responses) sealed and queued.",
        read: |c| c.traffic.messages_sent,
        peer: true,
    },
    Counter {
        name: "messages_received_total",
        help: "Messages received whole and authenticated.",
        read: |c| c.traffic.messages_received,
        peer: true,
    },
    Counter {
        name: "data_packets_sent_total",
        help: "DATA packets sent, retransmissions included.",
        read: |c| c.packets.data_sent,
        peer: false,
    },
    Counter {
        name: "control_packets_sent_total",
        help: "Control packets sent.",
        read: |c| c.packets.control_sent,
        peer: false,
    },
    Counter {
        name: "retransmitted_packets_total",
        help: "DATA packets sent again after a RESEND.",
        read: |c| c.packets.retransmitted,
        peer: true,
    },
    Counter {
        name: "resends_sent_total",
        help: "RESENDs sent (asking the peer for data again).",
        read: |c| c.packets.resends_sent,
        peer: true,
    },
    Counter {
        name: "grants_sent_total",
        help: "GRANTs sent.",
        read: |c| c.packets.grants_sent,
        peer: false,
    },
    Counter {
        name: "coalesced_packets_sent_total",
        help: "Packets sent in a datagram after another packet.",
        read: |c| c.packets.coalesced_sent,
        peer: false,
    },
    Counter {
        name: "coalesced_packets_received_total",
        help: "Packets received in a datagram after another packet.",
        read: |c| c.packets.coalesced_received,
        peer: false,
    },
    Counter {
        name: "amplification_limited_packets_total",
        help: "Control packets not sent: an unvalidated address's amplification budget was spent.",
        read: |c| c.packets.amplification_limited,
        peer: false,
    },
    Counter {
        name: "unreachable_reports_total",
        help: "ICMP unreachable errors the socket reported.",
        read: |c| c.packets.unreachable_reports,
        peer: false,
    },
    Counter {
        name: "records_sealed_total",
        help: "TLS records sealed.",
        read: |c| c.records.sealed,
        peer: true,
    },
    Counter {
        name: "records_opened_total",
        help: "TLS records whose opening was attempted.",
        read: |c| c.records.opened,
        peer: true,
    },
    Counter {
        name: "records_offloaded_total",
        help: "TLS records a NIC decrypted whole (receive offload).",
        read: |c| c.records.offloaded,
        peer: true,
    },
    Counter {
        name: "records_partially_offloaded_total",
        help: "TLS records a NIC decrypted in part, finished in software.",
        read: |c| c.records.partially_offloaded,
        peer: true,
    },
    Counter {
        name: "handshakes_completed_total",
        help: "Handshakes that installed keys.",
        read: |c| c.handshakes.completed,
        peer: false,
    },
    Counter {
        name: "handshakes_failed_total",
        help: "Handshakes that failed.",
        read: |c| c.handshakes.failed,
        peer: false,
    },
    Counter {
        name: "handshake_retries_sent_total",
        help: "Handshake openings answered with a stateless RETRY.",
        read: |c| c.handshakes.retries_sent,
        peer: false,
    },
    Counter {
        name: "handshake_retry_tokens_accepted_total",
        help: "Handshake openings whose retry token was accepted.",
        read: |c| c.handshakes.retry_tokens_accepted,
        peer: false,
    },
    Counter {
        name: "sessions_evicted_total",
        help: "Handshake sessions forgotten after session_idle_timeout of silence.",
        read: |c| c.handshakes.sessions_evicted,
        peer: false,
    },
    Counter {
        name: "unvalidated_sessions_dropped_total",
        help: "Handshake sessions forgotten before the peer used their keys.",
        read: |c| c.handshakes.unvalidated_sessions_dropped,
        peer: false,
    },
    Counter {
        name: "handshakes_displaced_total",
        help: "Handshakes a newer opening displaced from a full table.",
        read: |c| c.handshakes.displaced,
        peer: false,
    },
    Counter {
        name: "handshakes_past_deadline_total",
        help: "Handshakes that ran past handshake_deadline.",
        read: |c| c.handshakes.past_deadline,
        peer: false,
    },
    Counter {
        name: "handshakes_over_quota_total",
        help: "Handshake openings refused for their address's or prefix's share of the table.",
        read: |c| c.handshakes.over_quota,
        peer: false,
    },
    Counter {
        name: "sessions_displaced_total",
        help: "Sessions evicted to make room under max_sessions.",
        read: |c| c.handshakes.sessions_displaced,
        peer: false,
    },
];

/// The endpoint's gauges: name after `smt_`, help, value.
fn gauges(s: &Stats) -> [(&'static str, &'static str, u64); 7] {
    let h = &s.held;
    [
        ("sessions", "Sessions with keys.", h.sessions),
        (
            "handshakes_in_progress",
            "Handshakes in progress.",
            h.handshakes,
        ),
        (
            "incoming_bytes",
            "Bytes held by messages being received.",
            h.incoming_bytes,
        ),
        (
            "peak_incoming_bytes",
            "The largest smt_incoming_bytes so far.",
            h.peak_incoming_bytes,
        ),
        (
            "partial_requests",
            "Requests partially received.",
            h.partial_requests,
        ),
        (
            "handshake_bytes",
            "Bytes handshakes in progress hold for out-of-order data.",
            h.handshake_bytes,
        ),
        (
            "spare_buffer_bytes",
            "Bytes of spare message buffers kept for reuse.",
            h.spare_buffer_bytes,
        ),
    ]
}

/// A peer's gauges: name after `smt_peer_`, help, how it is read.
type PeerGauge = (&'static str, &'static str, fn(&PeerStats) -> u64);

const PEER_GAUGES: [PeerGauge; 3] = [
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

const RTT_HELP: &str = "Round-trip times of completed calls, request sent to response whole.";

pub(crate) fn write(s: &Stats, labels: &[(&str, &str)], out: &mut impl Write) -> fmt::Result {
    let mut w = Writer {
        out,
        labels: Labels::new(labels),
    };
    for c in COUNTERS {
        w.family(&format!("smt_{}", c.name), c.help, "counter")?;
        w.sample(&format!("smt_{}", c.name), &[], (c.read)(&s.total))?;
    }
    w.family(
        "smt_drops_total",
        "Datagrams or packets dropped, by reason.",
        "counter",
    )?;
    for (reason, n) in s.total.drops.iter() {
        w.sample("smt_drops_total", &[("reason", reason.name())], n)?;
    }
    w.histogram("smt_rpc_rtt_seconds", &[], &s.total.rtt, true)?;
    for (name, help, value) in gauges(s) {
        w.family(&format!("smt_{name}"), help, "gauge")?;
        w.sample(&format!("smt_{name}"), &[], value)?;
    }
    if !s.peers.is_empty() {
        write_peers(&mut w, &s.peers)?;
    }
    Ok(())
}

/// Every peer metric: one family at a time, a sample per peer.
fn write_peers(w: &mut Writer<'_, impl Write>, peers: &[PeerStats]) -> fmt::Result {
    let addrs: Vec<String> = peers.iter().map(|p| p.addr.to_string()).collect();
    for c in COUNTERS.iter().filter(|c| c.peer) {
        let name = format!("smt_peer_{}", c.name);
        w.family(&name, c.help, "counter")?;
        for (p, addr) in peers.iter().zip(&addrs) {
            w.sample(&name, &[("peer", addr)], (c.read)(&p.counters))?;
        }
    }
    // A peer's session counts packets, not datagrams.
    let name = "smt_peer_received_packets_total";
    w.family(name, "Packets received from the peer.", "counter")?;
    for (p, addr) in peers.iter().zip(&addrs) {
        let n = p.counters.traffic.datagrams_received;
        w.sample(name, &[("peer", addr)], n)?;
    }
    w.family(
        "smt_peer_drops_total",
        "Datagrams or packets dropped, by reason.",
        "counter",
    )?;
    for (p, addr) in peers.iter().zip(&addrs) {
        for (reason, n) in p.counters.drops.iter() {
            let labels = [("peer", addr.as_str()), ("reason", reason.name())];
            w.sample("smt_peer_drops_total", &labels, n)?;
        }
    }
    for (i, (p, addr)) in peers.iter().zip(&addrs).enumerate() {
        w.histogram(
            "smt_peer_rpc_rtt_seconds",
            &[("peer", addr)],
            &p.counters.rtt,
            i == 0,
        )?;
    }
    for (name, help, read) in PEER_GAUGES {
        let name = format!("smt_peer_{name}");
        w.family(&name, help, "gauge")?;
        for (p, addr) in peers.iter().zip(&addrs) {
            w.sample(&name, &[("peer", addr)], read(p))?;
        }
    }
    Ok(())
}

/// Labels given by the caller, escaped once.
struct Labels(Vec<(String, String)>);

impl Labels {
    fn new(labels: &[(&str, &str)]) -> Self {
        Self(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), escape(v)))
                .collect(),
        )
    }
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', r#"\""#)
        .replace('\n', r"\n")
}

struct Writer<'a, W> {
    out: &'a mut W,
    labels: Labels,
}

impl<W: Write> Writer<'_, W> {
    fn family(&mut self, name: &str, help: &str, kind: &str) -> fmt::Result {
        writeln!(self.out, "# HELP {name} {help}")?;
        writeln!(self.out, "# TYPE {name} {kind}")
    }

    fn sample(
        &mut self,
        name: &str,
        extra: &[(&str, &str)],
        value: impl fmt::Display,
    ) -> fmt::Result {
        self.out.write_str(name)?;
        self.label_set(extra)?;
        writeln!(self.out, " {value}")
    }

    /// `{given…,extra…}`, or nothing when both are empty.
    fn label_set(&mut self, extra: &[(&str, &str)]) -> fmt::Result {
        let given = self.labels.0.iter().map(|(k, v)| (k.as_str(), v.clone()));
        let extra = extra.iter().map(|(k, v)| (*k, escape(v)));
        let mut first = true;
        for (k, v) in given.chain(extra) {
            self.out.write_str(if first { "{" } else { "," })?;
            write!(self.out, "{k}=\"{v}\"")?;
            first = false;
        }
        if !first {
            self.out.write_str("}")?;
        }
        Ok(())
    }

    /// A histogram in seconds: cumulative `_bucket{le=…}` samples, `_sum`
    /// and `_count`; the family's HELP and TYPE first when `head`.
    fn histogram(
        &mut self,
        name: &str,
        extra: &[(&str, &str)],
        h: &RttHistogram,
        head: bool,
    ) -> fmt::Result {
        if head {
            self.family(name, RTT_HELP, "histogram")?;
        }
        let bucket = format!("{name}_bucket");
        let mut cumulative = 0;
        for (i, n) in h.buckets().iter().enumerate() {
            cumulative += n;
            let le =
                RttHistogram::bound(i).map_or("+Inf".to_string(), |b| b.as_secs_f64().to_string());
            let mut labels = extra.to_vec();
            labels.push(("le", &le));
            self.sample(&bucket, &labels, cumulative)?;
        }
        self.sample(&format!("{name}_sum"), extra, h.sum().as_secs_f64())?;
        self.sample(&format!("{name}_count"), extra, cumulative)
    }
}
