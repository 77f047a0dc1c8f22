//! What the NIC does with one descriptor it read from a queue. Shared by
//! the deterministic [`Engine`](crate::Engine) and the threaded
//! [`ThreadedEngine`](crate::ThreadedEngine), so both are the same model.

use crate::context::{FlowContext, ResyncError, StreamError};
use crate::counters::{DropReason, TxCounters};
use crate::crypto_info::CryptoInfo;
use crate::descriptor::{
    packet_count, ContextId, QueueId, Resync, Segment, TxDescriptor, WireSegment,
    MAX_SEGMENT_PAYLOAD,
};
use crate::table::{lock, ContextTable};

/// Largest piece of a record's start one dump carries (mlx5 posts one DUMP
/// WQE per MTU-sized fragment); only the counters see it.
pub const DUMP_CHUNK: usize = 1500;

/// Applies `desc`, read from `queue`, to the table; counts into `counters`.
///
/// Returns the encrypted segment when `desc` was a segment, nothing for a
/// control descriptor that took effect, and the reason (already counted)
/// when the descriptor was dropped.
pub(crate) fn process(
    table: &ContextTable,
    queue: QueueId,
    desc: TxDescriptor,
    counters: &mut TxCounters,
) -> Result<Option<WireSegment>, DropReason> {
    let result = match desc {
        TxDescriptor::CreateContext { ctx, info } => create(table, ctx, &info, counters),
        TxDescriptor::DestroyContext { ctx } => destroy(table, ctx, counters),
        TxDescriptor::Resync(resync) => apply_resync(table, resync, counters),
        TxDescriptor::Segment(segment) => send(table, queue, segment, counters).map(Some),
    };
    result.inspect_err(|reason| {
        tracing::debug!(queue = queue.0, %reason, "offload engine dropped a descriptor");
        counters.count_drop(reason);
    })
}

fn create(
    table: &ContextTable,
    ctx: ContextId,
    info: &CryptoInfo,
    counters: &mut TxCounters,
) -> Result<Option<WireSegment>, DropReason> {
    table.create(ctx, FlowContext::new(info))?;
    counters.tx_tls_ctx += 1;
    Ok(None)
}

fn destroy(
    table: &ContextTable,
    ctx: ContextId,
    counters: &mut TxCounters,
) -> Result<Option<WireSegment>, DropReason> {
    table.destroy(ctx)?;
    counters.tx_tls_del += 1;
    Ok(None)
}

fn apply_resync(
    table: &ContextTable,
    mut resync: Resync,
    counters: &mut TxCounters,
) -> Result<Option<WireSegment>, DropReason> {
    let context = table.find(resync.ctx)?;
    let outcome =
        lock(&context).resync(resync.record_seq, resync.offset, &mut resync.record_prefix);
    match outcome {
        Ok(()) => {
            count_resync(resync.offset, counters);
            Ok(None)
        }
        // The drop is counted when the segment this resync was for
        // arrives at the unsynchronised context, as mlx5 counts the skb.
        Err(ResyncError::NoSyncData) => Ok(None),
        Err(ResyncError::BadPrefix(why)) => Err(DropReason::BadDescriptor(why)),
    }
}

fn count_resync(offset: usize, counters: &mut TxCounters) {
    counters.tx_tls_ooo += 1;
    counters.tx_tls_resync_bytes += offset as u64;
    counters.tx_tls_dump_packets += offset.div_ceil(DUMP_CHUNK) as u64;
    counters.tx_tls_dump_bytes += offset as u64;
}

fn send(
    table: &ContextTable,
    queue: QueueId,
    mut segment: Segment,
    counters: &mut TxCounters,
) -> Result<WireSegment, DropReason> {
    check_segment(&segment)?;
    let context = table.find(segment.ctx)?;
    lock(&context)
        .encrypt(&mut segment.payload)
        .map_err(|e| match e {
            StreamError::Unsynced => DropReason::NoSyncData,
            StreamError::BadHeader(_) => DropReason::BadFraming,
        })?;
    counters.tx_tls_encrypted_packets += packet_count(segment.payload.len(), segment.mss);
    counters.tx_tls_encrypted_bytes += segment.payload.len() as u64;
    Ok(WireSegment {
        queue,
        ctx: segment.ctx,
        header: segment.header,
        payload: segment.payload,
        mss: segment.mss,
    })
}

fn check_segment(segment: &Segment) -> Result<(), DropReason> {
    if segment.payload.is_empty() {
        return Err(DropReason::BadDescriptor("segment without payload"));
    }
    if segment.payload.len() > MAX_SEGMENT_PAYLOAD {
        return Err(DropReason::BadDescriptor("segment larger than 64 KiB"));
    }
    if segment.mss == 0 {
        return Err(DropReason::BadDescriptor("segment with mss 0"));
    }
    Ok(())
}
