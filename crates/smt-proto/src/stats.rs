//! Counters. Every dropped datagram is counted under exactly one
//! [`DropReason`]; tests read these to prove *why* something was dropped
//! (e.g. that a replay never reached decryption). Round-trip times go into
//! an [`RttHistogram`], timed with the `now` the driver passes in.

use std::time::Duration;

use crate::error::DropReason;

/// Drop counters by reason.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct DropCounts([u64; DropReason::ALL.len()]);

impl DropCounts {
    /// Drops for one reason.
    pub fn get(&self, reason: DropReason) -> u64 {
        self.0[reason.index()]
    }

    /// All drops.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// `(reason, count)` for every reason.
    pub fn iter(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL.iter().map(|r| (*r, self.get(*r)))
    }

    /// Sets the count of one reason (e.g. read back from a serialised
    /// form).
    pub fn set(&mut self, reason: DropReason, count: u64) {
        self.0[reason.index()] = count;
    }

    pub(crate) fn add(&mut self, reason: DropReason) {
        self.0[reason.index()] += 1;
    }
}

impl std::fmt::Debug for DropCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut m = f.debug_map();
        for (r, n) in self.iter().filter(|(_, n)| *n > 0) {
            m.entry(&r.name(), &n);
        }
        m.finish()
    }
}

/// Counters of one endpoint, or of one peer session.
///
/// A peer session counts, since its keys were installed: datagrams and
/// bytes sent, packets (`datagrams_rx`: a coalesced datagram counts once
/// per packet) and bytes received, messages sent and received, RPCs
/// completed, failed and restarted, requests refused, retransmitted
/// packets, RESENDs sent, records sealed, opened and offloaded, drops,
/// round-trip times, its key epoch and its usage. The other counters
/// (packets by kind, grants, coalescing, handshakes, retries, evictions,
/// amplification, unreachable reports) are the endpoint's only: 0 for a
/// peer, whose per-packet accounting would cost a lookup per packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Datagrams received.
    pub datagrams_rx: u64,
    /// Datagrams sent.
    pub datagrams_tx: u64,
    /// Bytes received, UDP payloads.
    pub bytes_rx: u64,
    /// Bytes sent, UDP payloads.
    pub bytes_tx: u64,
    /// DATA packets sent.
    pub data_packets_tx: u64,
    /// Control packets sent (every type but DATA).
    pub control_packets_tx: u64,
    /// DATA packets sent again after a RESEND.
    pub retransmitted_packets: u64,
    /// RESEND packets sent (asking a peer for missing bytes).
    pub resends_sent: u64,
    /// GRANT packets sent.
    pub grants_sent: u64,
    /// Control packets not sent because their address is not validated
    /// and its amplification budget (3x the bytes received from it) is
    /// spent.
    pub amplification_limited: u64,
    /// Sessions made by a responder's handshake and forgotten before
    /// anything authenticated validated their address (expired with their
    /// handshake, or the oldest past `Config::max_unvalidated_sessions`).
    pub unvalidated_sessions_dropped: u64,
    /// Handshakes a peer opened that a newer opening displaced from a full
    /// table (they were the oldest, and older than a genuine handshake
    /// takes), and those that ran past `Config::handshake_deadline_ticks`.
    pub handshakes_displaced: u64,
    /// Handshakes dropped for running past `Config::handshake_deadline_ticks`.
    pub handshakes_past_deadline: u64,
    /// Openings refused because their IP address or prefix held its share
    /// of the handshake table (`Config::max_handshakes_per_ip`,
    /// `max_handshakes_per_prefix`).
    pub handshakes_over_quota: u64,
    /// Sessions evicted to make room under `Config::max_sessions`.
    pub sessions_displaced: u64,
    /// Handshake openings answered with a stateless RETRY, and openings
    /// whose retry token was accepted.
    pub retries_sent: u64,
    /// Openings whose retry token was accepted.
    pub retry_tokens_accepted: u64,
    /// ICMP errors the driver reported (`Endpoint::peer_unreachable`).
    pub unreachable_reports: u64,
    /// Records sealed.
    pub records_sealed: u64,
    /// Records whose AEAD open was *attempted* (successful or not),
    /// including those a NIC decrypted.
    pub records_opened: u64,
    /// Receive offload: records the NIC decrypted and authenticated whole
    /// (taken without the AEAD).
    pub records_offloaded: u64,
    /// Receive offload: records that arrived partly decrypted by the NIC
    /// (a packet lost or reordered on the way), turned back into
    /// ciphertext where decrypted and opened in software.
    pub records_partially_offloaded: u64,
    /// Messages sent (requests and responses).
    pub messages_sent: u64,
    /// Messages received complete and authenticated.
    pub messages_received: u64,
    /// Client RPCs that ended with their response.
    pub rpcs_completed: u64,
    /// Client RPCs that failed.
    pub rpcs_failed: u64,
    /// Requests sent again under a fresh ID because the server lost them.
    pub requests_restarted: u64,
    /// Requests refused unexecuted (server side; the client hears
    /// OVERLOADED): complete while the application held
    /// `Config::max_pending_requests`, or not admitted by the bounds on
    /// partial requests and buffered bytes (`endpoint/recv/rpc.rs`).
    pub requests_refused: u64,
    /// CREDIT packets sent (server side: the outstanding requests a peer
    /// may have, `endpoint/credit.rs`) and accepted (client side).
    pub credits_sent: u64,
    /// CREDIT packets accepted (client side).
    pub credits_received: u64,
    /// Packets that shared a datagram with an earlier packet (coalesced),
    /// sent and received: `datagrams + coalesced = packets`.
    pub coalesced_packets_tx: u64,
    /// Packets received that shared a datagram with an earlier packet.
    pub coalesced_packets_rx: u64,
    /// Pathlet feedback (`Config::pathlet_feedback`): PATH packets counted
    /// (their datagram carried a packet accepted under the peer's keys)
    /// and not believed (it carried none); PATH_ECHO packets sent and
    /// accepted; DATA packets a pathlet's window held back.
    pub paths_counted: u64,
    /// PATH packets not believed (their datagram carried no packet accepted under the peer's keys).
    pub paths_not_believed: u64,
    /// PATH_ECHO packets sent.
    pub path_echoes_tx: u64,
    /// PATH_ECHO packets accepted.
    pub path_echoes_rx: u64,
    /// DATA packets a pathlet's window held back.
    pub pathlet_held: u64,
    /// Handshakes that installed a session's keys.
    pub handshakes_completed: u64,
    /// For a peer: the session's current key epoch (0 until the first key
    /// update or handshake key switch).
    pub key_epoch: u64,
    /// Handshakes that failed.
    pub handshakes_failed: u64,
    /// Partial requests evicted to make room for another peer's when the
    /// totals were reached (`Config::max_buffered_total`,
    /// `max_incoming_total`).
    pub partial_evicted: u64,
    /// Sessions made by a handshake forgotten after
    /// `Config::session_idle_timeout` of silence.
    pub sessions_evicted: u64,
    /// Packets dropped, by reason.
    pub drops: DropCounts,
    /// Round-trip times of the RPCs this side completed as client: from
    /// [`crate::Endpoint::send_request`] to the response's last record
    /// (the server's processing, retransmissions and restarts included),
    /// on the driver's clock.
    pub rtt: RttHistogram,
    /// Gauges, not counters: what the endpoint (or, for a peer, its
    /// session) holds now, as of the last event that changed it or the
    /// last tick. See `docs/resilience.md`.
    pub usage: Usage,
}

/// What incoming state holds: the figures `Config::max_buffered_*` and
/// `Config::max_incoming_*` bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Usage {
    /// Bytes held by partially received messages (reassembly buffers, data
    /// opened so far, bookkeeping), requests and responses.
    pub incoming_bytes: u64,
    /// Partially received requests.
    pub partial_requests: u64,
    /// Endpoint only: sessions with keys.
    pub sessions: u64,
    /// Endpoint only: handshakes in progress.
    pub handshakes: u64,
    /// Endpoint only: memory handshakes in progress hold for the peer's
    /// out-of-order HANDSHAKE bytes (at most one 64 KiB window and its
    /// bitmap each).
    pub handshake_bytes: u64,
    /// Endpoint only: the largest `incoming_bytes` seen so far.
    pub peak_incoming_bytes: u64,
    /// Endpoint only: bytes of spare message buffers kept for reuse (at
    /// most 8 MiB), as of the last tick.
    pub spare_buffer_bytes: u64,
}

/// A histogram of durations in log-scale buckets: bucket `i` counts the
/// durations above the previous bound and at most `2^i` microseconds
/// (1 µs, 2 µs, 4 µs … 2^25 µs ≈ 33.6 s), and one more bucket those longer.
/// Recording is a few instructions: no allocation, no floating point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RttHistogram {
    buckets: [u64; RttHistogram::BUCKETS],
    /// The sum of every duration recorded, in nanoseconds.
    sum_nanos: u64,
}

impl Default for RttHistogram {
    fn default() -> Self {
        Self {
            buckets: [0; Self::BUCKETS],
            sum_nanos: 0,
        }
    }
}

/// A duration to count in [`RttHistogram`]s, with its bucket.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RttSample {
    nanos: u64,
    bucket: usize,
}

impl RttSample {
    #[inline]
    pub(crate) fn of(rtt: Duration) -> Self {
        let nanos = u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX);
        Self {
            nanos,
            bucket: RttHistogram::bucket_of(nanos),
        }
    }
}

impl RttHistogram {
    /// Buckets with an upper bound (`2^0` to `2^25` µs).
    pub const BOUNDED: usize = 26;
    /// Every bucket: the bounded ones and the overflow.
    pub const BUCKETS: usize = Self::BOUNDED + 1;

    /// The upper bound of bucket `i` (`None` for the overflow bucket).
    pub fn bound(i: usize) -> Option<Duration> {
        (i < Self::BOUNDED).then(|| Duration::from_micros(1 << i))
    }

    /// Counts one duration.
    pub fn record(&mut self, rtt: Duration) {
        self.record_sample(RttSample::of(rtt));
    }

    /// Counts one duration, its bucket found already: an RPC's round trip
    /// goes into the endpoint's and its peer's histograms, and working
    /// the bucket out once for both saves a division per RPC.
    #[inline]
    pub(crate) fn record_sample(&mut self, s: RttSample) {
        self.buckets[s.bucket] += 1;
        self.sum_nanos = self.sum_nanos.saturating_add(s.nanos);
    }

    /// The smallest bucket whose bound holds `nanos`.
    fn bucket_of(nanos: u64) -> usize {
        let micros = nanos.div_ceil(1000);
        if micros <= 1 {
            return 0;
        }
        // The smallest i with 2^i >= micros.
        let i = (u64::BITS - (micros - 1).leading_zeros()) as usize;
        i.min(Self::BOUNDED)
    }

    /// How many durations each bucket counted (not cumulative).
    pub fn buckets(&self) -> &[u64; Self::BUCKETS] {
        &self.buckets
    }

    /// Durations recorded.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Their sum.
    pub fn sum(&self) -> Duration {
        Duration::from_nanos(self.sum_nanos)
    }

    /// Their mean (`None` when nothing was recorded).
    pub fn mean(&self) -> Option<Duration> {
        let n = self.count();
        (n > 0).then(|| Duration::from_nanos(self.sum_nanos / n))
    }

    /// An upper bound on the `q`-quantile (0.5: the median): the bound of
    /// the bucket that holds it, so at most twice the true value. `None`
    /// when nothing was recorded or the quantile is in the overflow bucket.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        // The rank of the quantile, 1-based: at least the first duration.
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        let i = self.buckets.iter().position(|b| {
            seen += b;
            seen >= rank
        })?;
        Self::bound(i)
    }

    /// A histogram with these bucket counts and sum, e.g. one read back
    /// from a serialised form.
    pub fn from_parts(buckets: [u64; Self::BUCKETS], sum: Duration) -> Self {
        Self {
            buckets,
            sum_nanos: u64::try_from(sum.as_nanos()).unwrap_or(u64::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_fall_in_the_smallest_bucket_that_holds_them() {
        let bucket = |d: Duration| {
            let mut h = RttHistogram::default();
            h.record(d);
            h.buckets().iter().position(|n| *n == 1).unwrap()
        };
        assert_eq!(bucket(Duration::ZERO), 0);
        assert_eq!(bucket(Duration::from_nanos(1000)), 0);
        assert_eq!(bucket(Duration::from_nanos(1001)), 1);
        assert_eq!(bucket(Duration::from_micros(2)), 1);
        assert_eq!(bucket(Duration::from_micros(3)), 2);
        assert_eq!(bucket(Duration::from_micros(40)), 6);
        assert_eq!(bucket(Duration::from_micros(64)), 6);
        assert_eq!(bucket(Duration::from_micros(1 << 25)), 25);
        assert_eq!(bucket(Duration::from_secs(60)), RttHistogram::BOUNDED);
        assert_eq!(bucket(Duration::MAX), RttHistogram::BOUNDED);
        for i in 0..RttHistogram::BOUNDED {
            let bound = RttHistogram::bound(i).unwrap();
            assert_eq!(bucket(bound), i, "a bound is in its own bucket");
            assert_eq!(bucket(bound + Duration::from_nanos(1)), i + 1);
        }
        assert_eq!(RttHistogram::bound(RttHistogram::BOUNDED), None);
    }

    #[test]
    fn count_and_sum_add_up() {
        let mut h = RttHistogram::default();
        h.record(Duration::from_micros(30));
        h.record(Duration::from_millis(2));
        assert_eq!(h.count(), 2);
        assert_eq!(h.sum(), Duration::from_micros(2030));
        assert_eq!(RttHistogram::from_parts(*h.buckets(), h.sum()), h);
        assert_eq!(h.mean(), Some(Duration::from_micros(1015)));
    }

    #[test]
    fn a_quantile_is_bounded_by_its_bucket() {
        let mut h = RttHistogram::default();
        assert_eq!(h.quantile(0.5), None);
        for us in [10, 20, 30, 1000] {
            h.record(Duration::from_micros(us));
        }
        assert_eq!(h.quantile(0.0), Some(Duration::from_micros(16)));
        assert_eq!(h.quantile(0.5), Some(Duration::from_micros(32)));
        assert_eq!(h.quantile(0.99), Some(Duration::from_micros(1024)));
        h.record(Duration::from_secs(3600));
        assert_eq!(h.quantile(1.0), None, "in the overflow bucket");
    }
}
