//! The forwarder's counters, printed as JSON when it stops.

use serde::Serialize;

use crate::queue::Occupancy;

/// Packets and bytes.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Volume {
    /// Packets (or datagrams) counted.
    pub packets: u64,
    /// Their bytes, UDP payload only.
    pub bytes: u64,
}

impl Volume {
    /// Counts one packet of `len` bytes.
    pub fn add(&mut self, len: usize) {
        self.packets += 1;
        self.bytes += len as u64;
    }
}

/// One path's counters.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PathStats {
    /// Packets queued on this path.
    pub queued: Volume,
    /// Packets delivered to the path's server.
    pub sent: Volume,
    /// Packets refused by a full queue (tail drop).
    pub drops: u64,
    /// Packets that found more than the marking threshold queued (the
    /// ECN-style mark the feedback carries).
    pub marks: u64,
    /// Messages pinned to this path (message-aware balance).
    pub messages: u64,
    /// Largest backlog seen at an arrival, in bytes.
    pub max_queue_bytes: u64,
    /// Sum of the backlogs at arrivals, in bytes (mean = sum / queued
    /// packets).
    pub sum_queue_bytes: u64,
}

impl PathStats {
    pub(crate) fn enqueued(&mut self, len: usize, occ: Occupancy) {
        self.queued.add(len);
        self.marks += u64::from(occ.ce);
        self.max_queue_bytes = self.max_queue_bytes.max(occ.bytes);
        self.sum_queue_bytes += occ.bytes;
    }

    pub(crate) fn sent(&mut self, len: usize) {
        self.sent.add(len);
    }
}

/// Everything the forwarder counts.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Stats {
    /// Datagrams from clients.
    pub from_clients: Volume,
    /// Datagrams back to clients from the servers.
    pub to_clients: Volume,
    /// Datagrams that held several packets (cut apart).
    pub coalesced_split: u64,
    /// Bytes that were no SMT packet (dropped).
    pub malformed_bytes: u64,
    /// DATA packets (first transmissions) delivered.
    pub data_packets: u64,
    /// Those of them delivered after a later part of their message.
    pub out_of_order_packets: u64,
    /// Messages with at least one packet out of order.
    pub reordered_messages: u64,
    /// Messages not pinned because the table was full.
    pub unpinned: u64,
    /// PATH slots written (pathlet feedback, `docs/protocol.md` § 4).
    pub path_slots_written: u64,
    /// PATH packets found full (OVERFLOW set).
    pub path_overflows: u64,
    /// PATH packets dropped (alone in their datagram, or not first).
    pub path_dropped: u64,
    /// New messages a PATH's exclusion sent to another path than they
    /// would have taken.
    pub path_excluded_moves: u64,
    /// Per path, by index.
    pub paths: Vec<PathStats>,
    /// Packets (and copies of broadcast ones) sent to each replica.
    pub replicas: Vec<Volume>,
}

impl Stats {
    pub(crate) fn new(paths: usize, replicas: usize) -> Self {
        Self {
            paths: vec![PathStats::default(); paths],
            replicas: vec![Volume::default(); replicas],
            ..Self::default()
        }
    }
}
