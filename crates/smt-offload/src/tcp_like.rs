//! The sender the SMT paper (§3.2) shows cannot use autonomous offload once its
//! messages go out of several queues: TLS stacked on a message transport
//! the TCP way. One TLS session per 5-tuple means one flow context and one
//! record sequence space; records are numbered in the order messages were
//! handed to the stack; each message's segments go to the queue of the
//! core that sends it; and, as §3.2 suggests and refutes, a resync is
//! prepended to every segment to set the context to that segment's first
//! record.
//!
//! A resync and its segment are two descriptors. Another queue's resync
//! for the same context can be read between them, and the segment is then
//! encrypted under the other segment's sequence number.

use crate::crypto_info::CryptoInfo;
use crate::descriptor::{ContextId, Resync, Segment, TxDescriptor};
use crate::stream::PlainSegment;

/// A TCP-like sender: one shared context, one stream of record numbers.
#[derive(Debug)]
pub struct TcpLikeSender {
    ctx: ContextId,
    next_seq: u64,
}

impl TcpLikeSender {
    /// A sender using context slot `ctx`, records numbered from 0.
    pub fn new(ctx: ContextId) -> Self {
        Self { ctx, next_seq: 0 }
    }

    /// The descriptor that installs the shared context (post it once,
    /// before any message).
    pub fn create(&self, key: &CryptoInfo) -> TxDescriptor {
        TxDescriptor::CreateContext {
            ctx: self.ctx,
            info: Box::new(key.starting_at(self.next_seq)),
        }
    }

    /// Numbers the segment's records next in the stream and appends a
    /// resync to its first record, then the segment itself. Returns the
    /// sequence number of the segment's first record.
    pub fn segment(
        &mut self,
        segment: PlainSegment,
        header: Vec<u8>,
        mss: u16,
        out: &mut Vec<TxDescriptor>,
    ) -> u64 {
        let first = self.next_seq;
        out.push(TxDescriptor::Resync(Resync {
            ctx: self.ctx,
            record_seq: first,
            offset: 0,
            record_prefix: Vec::new(),
        }));
        self.next_seq = first.wrapping_add(u64::from(segment.records));
        out.push(TxDescriptor::Segment(Segment {
            ctx: self.ctx,
            header,
            payload: segment.payload,
            mss,
        }));
        first
    }
}
