//! Counters. Every dropped datagram is counted under exactly one
//! [`DropReason`]; tests read these to prove *why* something was dropped
//! (e.g. that a replay never reached decryption).

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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    pub datagrams_rx: u64,
    pub datagrams_tx: u64,
    pub bytes_rx: u64,
    pub bytes_tx: u64,
    pub data_packets_tx: u64,
    pub control_packets_tx: u64,
    /// DATA packets sent again after a RESEND.
    pub retransmitted_packets: u64,
    pub resends_sent: u64,
    pub grants_sent: u64,
    /// Control packets not sent because their address is not validated
    /// and its amplification budget (3x the bytes received from it) is
    /// spent.
    pub amplification_limited: u64,
    /// Sessions made by a responder's handshake and forgotten before
    /// anything authenticated validated their address (expired with their
    /// handshake, or the oldest past `Config::max_unvalidated_sessions`).
    pub unvalidated_sessions_dropped: u64,
    /// Handshake openings answered with a stateless RETRY, and openings
    /// whose retry token was accepted.
    pub retries_sent: u64,
    pub retry_tokens_accepted: u64,
    /// ICMP errors the driver reported (`Endpoint::peer_unreachable`).
    pub unreachable_reports: u64,
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
    pub messages_sent: u64,
    pub messages_received: u64,
    pub rpcs_completed: u64,
    pub rpcs_failed: u64,
    pub requests_restarted: u64,
    /// Complete requests refused unexecuted because the application held
    /// `Config::max_pending_requests` (server side; the client hears
    /// OVERLOADED).
    pub requests_refused: u64,
    /// Packets that shared a datagram with an earlier packet (coalesced),
    /// sent and received: `datagrams + coalesced = packets`.
    pub coalesced_packets_tx: u64,
    pub coalesced_packets_rx: u64,
    pub handshakes_completed: u64,
    /// For a peer: the session's current key epoch (0 until the first key
    /// update or handshake key switch).
    pub key_epoch: u64,
    pub handshakes_failed: u64,
    /// Partial requests evicted to make room for another peer's when the
    /// totals were reached (`Config::max_buffered_total`,
    /// `max_incoming_total`).
    pub partial_evicted: u64,
    /// Sessions made by a handshake forgotten after
    /// `Config::session_idle_timeout` of silence.
    pub sessions_evicted: u64,
    pub drops: DropCounts,
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
