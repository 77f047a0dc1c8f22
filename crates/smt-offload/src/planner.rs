//! The host's half of SMT's offload scheme (the SMT paper §4.4.2): which flow
//! context a message's segments use, and the descriptors that put it in
//! place before the message's first segment.
//!
//! - One context per (queue, peer, key epoch), a [`FlowKey`]. Messages on
//!   different queues never share a context, so no descriptor of another
//!   queue can move it between a resync and its segment (§3.2's failure).
//! - Per-message sequence spaces: a message starts at `id << 16`, never
//!   where the previous message on the context ended, so a reused context
//!   gets one resync (offset 0, no record data needed) before each
//!   message's first segment; the message's later segments follow on.
//! - A new epoch (new keys) needs a new context: key material cannot be
//!   resynced.
//! - Memory is bounded: each queue owns `capacity / queues` slots of the
//!   table. When a queue's slots are all in use, its least recently used
//!   context is destroyed and the slot re-created for the new flow, both
//!   in that queue, so the NIC applies them in order with the queue's
//!   segments.

use std::collections::{BTreeMap, HashMap};

use crate::crypto_info::CryptoInfo;
use crate::descriptor::{ContextId, QueueId, Resync, TxDescriptor};

/// The unit that owns a flow context in SMT's scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    /// The transmit queue the message goes out of.
    pub queue: QueueId,
    /// The peer (the 5-tuple of the session).
    pub peer: u32,
    /// The key epoch (SMT's KEY_UPDATE generation).
    pub epoch: u32,
}

/// What the planner decided so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PlannerStats {
    /// Messages prepared.
    pub messages: u64,
    /// Contexts created (first use of a flow, or after an eviction).
    pub creates: u64,
    /// Resyncs posted (a message on a context already in place).
    pub resyncs: u64,
    /// Contexts destroyed to make room for another flow.
    pub evictions: u64,
    /// Most contexts in use at once.
    pub peak_contexts: u64,
}

/// Assigns flow contexts to messages and writes the set-up descriptors.
#[derive(Debug)]
pub struct ContextPlanner {
    queues: Vec<QueueSlots>,
    in_use: u64,
    stats: PlannerStats,
}

/// One queue's share of the table, with least-recently-used order.
#[derive(Debug)]
struct QueueSlots {
    free: Vec<ContextId>,
    by_flow: HashMap<FlowKey, (ContextId, u64)>,
    /// Last-use tick to flow; the first entry is the eviction victim.
    lru: BTreeMap<u64, FlowKey>,
    tick: u64,
}

impl ContextPlanner {
    /// Splits a table of `capacity` slots evenly over `queues` queues, at
    /// least one slot each (the SMT paper: "at least one per NIC queue").
    pub fn new(queues: u16, capacity: usize) -> Self {
        let queues = queues.max(1);
        // Slot numbers are u32: a table larger than that is cut down.
        let capacity = capacity.min(u32::MAX as usize);
        let per_queue = (capacity / usize::from(queues)).max(1);
        let queues = (0..u32::from(queues))
            .map(|q| QueueSlots::new(q * per_queue as u32, per_queue))
            .collect();
        Self {
            queues,
            in_use: 0,
            stats: PlannerStats::default(),
        }
    }

    /// Picks the context for a message of `flow` whose first record has
    /// sequence number `first_seq`, and appends to `out` what must precede
    /// the message's first segment in `flow.queue`: a resync if the flow
    /// has a context, else a create (after a destroy if the queue's slots
    /// are full). `key` is the flow's key material.
    pub fn prepare(
        &mut self,
        flow: FlowKey,
        key: &CryptoInfo,
        first_seq: u64,
        out: &mut Vec<TxDescriptor>,
    ) -> ContextId {
        self.stats.messages += 1;
        let (ctx, created) = self.context_for(flow, key, first_seq, out);
        if !created {
            self.stats.resyncs += 1;
            out.push(resync_to(ctx, first_seq));
        }
        ctx
    }

    /// The context of `flow`, marked as just used, and whether it is new:
    /// then a create (after a destroy if the queue's slots are full) was
    /// appended to `out`, for a context starting at the first byte of
    /// record `rec_seq`. An existing context is left where it is: the
    /// caller, who knows where it stands, decides whether it needs a
    /// resync (`Resync`). `key` is the flow's key material.
    pub fn context_for(
        &mut self,
        flow: FlowKey,
        key: &CryptoInfo,
        rec_seq: u64,
        out: &mut Vec<TxDescriptor>,
    ) -> (ContextId, bool) {
        let index = flow.queue.index() % self.queues.len();
        let slots = &mut self.queues[index];
        if let Some(ctx) = slots.touch(flow) {
            return (ctx, false);
        }
        let ctx = match slots.free.pop() {
            Some(ctx) => {
                self.in_use += 1;
                ctx
            }
            None => {
                self.stats.evictions += 1;
                let ctx = slots.evict();
                out.push(TxDescriptor::DestroyContext { ctx });
                ctx
            }
        };
        slots.insert(flow, ctx);
        self.stats.creates += 1;
        self.stats.peak_contexts = self.stats.peak_contexts.max(self.in_use);
        out.push(TxDescriptor::CreateContext {
            ctx,
            info: Box::new(key.starting_at(rec_seq)),
        });
        (ctx, true)
    }

    /// What was decided so far.
    pub fn stats(&self) -> PlannerStats {
        self.stats
    }
}

/// A resync to the first byte of record `seq`: no record data needed.
fn resync_to(ctx: ContextId, seq: u64) -> TxDescriptor {
    TxDescriptor::Resync(Resync {
        ctx,
        record_seq: seq,
        offset: 0,
        record_prefix: Vec::new(),
    })
}

impl QueueSlots {
    fn new(first: u32, count: usize) -> Self {
        // Popped from the end: the lowest slot is used first.
        let free = (0..count as u32)
            .rev()
            .map(|i| ContextId(first + i))
            .collect();
        Self {
            free,
            by_flow: HashMap::new(),
            lru: BTreeMap::new(),
            tick: 0,
        }
    }

    /// The flow's context, marked as just used.
    fn touch(&mut self, flow: FlowKey) -> Option<ContextId> {
        self.tick += 1;
        let (ctx, last) = self.by_flow.get_mut(&flow)?;
        self.lru.remove(last);
        *last = self.tick;
        self.lru.insert(self.tick, flow);
        Some(*ctx)
    }

    fn insert(&mut self, flow: FlowKey, ctx: ContextId) {
        self.by_flow.insert(flow, (ctx, self.tick));
        self.lru.insert(self.tick, flow);
    }

    /// Forgets the least recently used flow and returns its slot.
    fn evict(&mut self) -> ContextId {
        // NOTE(unwrap): evict is called only with no free slot, so every
        // slot (at least one) belongs to a flow in the LRU order.
        let (_, flow) = self.lru.pop_first().expect("a full queue has flows");
        let (ctx, _) = self.by_flow.remove(&flow).expect("lru and by_flow agree");
        ctx
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto_info::{CipherSuite, IV_LEN};

    fn key() -> CryptoInfo {
        CryptoInfo::new(CipherSuite::Aes128Gcm, &[1; 16], [2; IV_LEN], 0).unwrap()
    }

    fn flow(queue: u16, peer: u32) -> FlowKey {
        FlowKey {
            queue: QueueId(queue),
            peer,
            epoch: 0,
        }
    }

    fn kinds(out: &[TxDescriptor]) -> Vec<&'static str> {
        out.iter()
            .map(|d| match d {
                TxDescriptor::CreateContext { .. } => "create",
                TxDescriptor::DestroyContext { .. } => "destroy",
                TxDescriptor::Resync(_) => "resync",
                TxDescriptor::Segment(_) => "segment",
            })
            .collect()
    }

    #[test]
    fn first_message_creates_later_ones_resync() {
        let mut p = ContextPlanner::new(2, 64);
        let mut out = Vec::new();
        let a = p.prepare(flow(0, 7), &key(), 1 << 16, &mut out);
        let b = p.prepare(flow(0, 7), &key(), 2 << 16, &mut out);
        let c = p.prepare(flow(1, 7), &key(), 3 << 16, &mut out);
        assert_eq!(kinds(&out), ["create", "resync", "create"]);
        assert_eq!(a, b);
        assert_ne!(a, c, "queues never share a context");
        assert_eq!((p.stats().creates, p.stats().resyncs), (2, 1));
    }

    #[test]
    fn full_queue_evicts_its_least_recently_used_flow() {
        let mut p = ContextPlanner::new(1, 2);
        let mut out = Vec::new();
        let one = p.prepare(flow(0, 1), &key(), 0, &mut out);
        let two = p.prepare(flow(0, 2), &key(), 0, &mut out);
        p.prepare(flow(0, 1), &key(), 0, &mut out);
        out.clear();
        let three = p.prepare(flow(0, 3), &key(), 0, &mut out);
        assert_eq!(kinds(&out), ["destroy", "create"]);
        assert_eq!(three, two, "peer 2 was least recently used");
        assert_ne!(three, one);
        assert_eq!(p.stats().evictions, 1);
        assert_eq!(p.stats().peak_contexts, 2);
    }
}
