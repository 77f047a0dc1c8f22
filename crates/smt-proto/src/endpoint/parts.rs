//! The endpoint's plain parts: counters, reusable memory and small shared
//! items, kept out of `mod.rs` so that file holds the endpoint's verbs.

use std::net::SocketAddr;

use super::admission;
use crate::buffers::BufferPool;
use crate::rpc::{Incoming, SegmentBuf};
use crate::stats::Stats;

/// Queues a trace event if tracing is on; the event is not even built
/// otherwise (one branch).
macro_rules! trace_event {
    ($ep:expr, $what:expr) => {
        if $ep.counters.trace.is_some() {
            let what = $what;
            $ep.record_trace(what);
        }
    };
}
pub(crate) use trace_event;

/// Hash maps of the per-packet path: foldhash with a per-process random
/// key (fast; keys include addresses an attacker may choose, so keyed).
pub(crate) type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// KEY_UPDATE's ID field: an announcement ("I now send with the next
/// keys") or its confirmation.
pub(crate) const KEY_UPDATE_ANNOUNCE: u64 = 0;
pub(crate) const KEY_UPDATE_CONFIRM: u64 = 1;

/// Datagrams sent to `peer` since its counters were last added to.
#[derive(Debug, Default)]
pub(crate) struct TxTally {
    pub peer: Option<SocketAddr>,
    pub datagrams: u64,
    pub bytes: u64,
}

/// What the endpoint counts, and the trace.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) stats: Stats,
    /// Datagrams sent to one peer and not yet added to its counters (see
    /// `send.rs` `count_tx`).
    pub(crate) tx_tally: TxTally,
    /// The event trace, when on ([`Endpoint::set_tracing`]).
    pub(crate) trace: Option<Box<crate::trace::Tracer>>,
}

/// Memory the endpoint reuses instead of allocating per message or batch.
#[derive(Default)]
pub(crate) struct Buffers {
    /// Spare message buffers: a steady stream of RPCs reuses those of the
    /// RPCs before it (no allocation per message).
    pub(crate) pool: BufferPool,
    /// Segment lists of finished incoming messages, for the next ones.
    pub(crate) segment_lists: Vec<Vec<(u32, SegmentBuf)>>,
    /// Per datagram of the batch being handled, when it is handled
    /// (`handle_batch`); kept to reuse its capacity.
    pub(crate) batch_turns: Vec<admission::Turn>,
}

/// Segment lists kept for reuse: one per message being received at once
/// covers a burst; each is a few dozen bytes per entry of capacity.
pub(crate) const MAX_SPARE_SEGMENT_LISTS: usize = 256;

/// Keeps a finished incoming message's buffers and segment list (a free
/// function, so callers can hold other fields of the endpoint).
#[inline]
pub(crate) fn keep_incoming(
    buffers: &mut crate::buffers::BufferPool,
    spare_segment_lists: &mut Vec<Vec<(u32, SegmentBuf)>>,
    inc: &mut Incoming,
) {
    let list = inc.recycle(buffers);
    if list.capacity() > 0 && spare_segment_lists.len() < MAX_SPARE_SEGMENT_LISTS {
        spare_segment_lists.push(list);
    }
}

impl std::fmt::Debug for super::Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("sessions", &self.peers.len())
            .field("client_rpcs", &self.rpcs.clients.len())
            .field("server_rpcs", &self.rpcs.servers.len())
            .field("stats", &self.counters.stats)
            .finish_non_exhaustive()
    }
}
