//! The driver's receive side of TLS offload (the RX path of NVIDIA's kTLS offload): each
//! received DATA packet goes through the NIC's receive context for its
//! (peer, key phase) before the core sees it; the core gets the datagrams
//! with a mark per packet (`smt_proto::offload::RxMark`) and finishes what
//! the NIC did not.
//!
//! - **Where a packet lies** (the NIC's parser): the stream is the message
//!   ID, the position its wire offset in the message (`segment_offset +
//!   index * mss`, the original index for a retransmission). One receive
//!   context per (peer, key phase) follows one stream at a time, as a
//!   kTLS context follows one TCP connection.
//! - **Keys**: the context holds the key the core opens that phase with
//!   now ([`Core::rx_cipher`]); when the core moves to another key (a new
//!   epoch, a new session) the context is destroyed and made again. A
//!   context made on a message's first packet starts in sync there (the
//!   host knows a record begins at offset 0 of a message, with sequence
//!   number `id << 16`); otherwise it starts out of sync.
//! - **Resync**: a request for a message's first record is answered at
//!   once, before the next packet (its number follows from the header:
//!   `id << 16`); another one after the core has handled the batch, from
//!   the record headers it holds or once it has opened up to there
//!   ([`Core::rx_record_seq`]), as the NIC's asynchronous resync waits
//!   for the stack to reach the record.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use smt_offload::{RxContextId, RxCounters, RxEngine, StreamPos};
use smt_proto::crypto::PacketCipher;
use smt_proto::offload::{KeyId, RecordSeq, RxMark};
use smt_proto::wire::{first_packet_len, Body, Packet, PacketType, Repr, DATA_HEADER_LEN};
use smt_proto::Endpoint as Core;

use super::tx::crypto_info;

/// The receive context of one (peer, key phase) and the key it holds.
#[derive(Debug)]
struct Flow {
    ctx: RxContextId,
    /// Kept while the context uses it: its identity names the marks.
    key: Arc<dyn PacketCipher>,
    epoch: u64,
    /// When it was last used (for eviction).
    used: u64,
}

/// A resync request waiting for the core's answer.
#[derive(Clone, Copy, Debug)]
struct Pending {
    ctx: RxContextId,
    peer: SocketAddr,
    epoch: u64,
    from: StreamPos,
}

/// The driver's receive state: the NIC's receive engine, its contexts by
/// flow, requests in flight, and the batch being marked.
#[derive(Debug)]
pub struct RxOffload {
    engine: RxEngine,
    capacity: usize,
    flows: HashMap<(SocketAddr, bool), Flow>,
    /// Flows whose key cannot be handed to a NIC: not asked again until
    /// their key changes.
    software: HashMap<(SocketAddr, bool), Arc<dyn PacketCipher>>,
    free: Vec<RxContextId>,
    pending: Vec<Pending>,
    clock: u64,
    /// The batch as the NIC left it, its marks, and per datagram (from,
    /// bytes, marks).
    bytes: Vec<u8>,
    marks: Vec<RxMark>,
    datagrams: Vec<(SocketAddr, Range<usize>, Range<usize>)>,
}

impl RxOffload {
    /// Room for `contexts` receive contexts.
    pub fn new(contexts: usize) -> Self {
        let contexts = contexts.max(1);
        Self {
            engine: RxEngine::new(contexts),
            capacity: contexts,
            flows: HashMap::new(),
            software: HashMap::new(),
            free: (0..contexts as u32).rev().map(RxContextId).collect(),
            pending: Vec::new(),
            clock: 0,
            bytes: Vec::new(),
            marks: Vec::new(),
            datagrams: Vec::new(),
        }
    }

    /// Runs a receive batch through the NIC, hands it to the core with
    /// the marks, then answers the NIC's resync requests the core can
    /// answer now.
    pub fn receive<'a>(
        &mut self,
        core: &mut Core,
        now: Instant,
        batch: impl Iterator<Item = (SocketAddr, &'a [u8])>,
    ) {
        self.bytes.clear();
        self.marks.clear();
        self.datagrams.clear();
        for (from, datagram) in batch {
            let at = self.bytes.len();
            self.bytes.extend_from_slice(datagram);
            let marks_at = self.marks.len();
            self.through_nic(core, from, at..self.bytes.len());
            let marks = marks_at..self.marks.len();
            self.datagrams.push((from, at..self.bytes.len(), marks));
        }
        let (bytes, marks) = (&self.bytes, &self.marks);
        let batch = self
            .datagrams
            .iter()
            .map(|(from, b, m)| (*from, &bytes[b.clone()], &marks[m.clone()]));
        core.handle_batch_marked(now, batch);
        self.answer(core);
    }

    /// The NIC's receive counters.
    pub fn counters(&self) -> RxCounters {
        self.engine.counters()
    }

    /// One datagram through the NIC: a mark per packet.
    fn through_nic(&mut self, core: &Core, from: SocketAddr, range: Range<usize>) {
        let tagged = core.config().authenticate_control;
        let mut at = range.start;
        while at < range.end {
            let len = first_packet_len(&self.bytes[at..range.end], tagged)
                .unwrap_or(range.end - at)
                .max(1);
            let end = (at + len).min(range.end);
            let mark = self.packet(core, from, at..end);
            self.marks.push(mark);
            at = end;
        }
    }

    /// One packet: a DATA packet with a key the NIC can hold is run
    /// through its flow's context.
    fn packet(&mut self, core: &Core, from: SocketAddr, range: Range<usize>) -> RxMark {
        let Some((phase, at)) = data_position(&self.bytes[range.clone()]) else {
            return RxMark::default();
        };
        let Some((ctx, key)) = self.flow(core, from, phase, at) else {
            return RxMark::default();
        };
        let payload = &mut self.bytes[range.start + DATA_HEADER_LEN..range.end];
        let verdict = self.engine.receive(ctx, at, payload);
        if let Some(request) = verdict.resync_request {
            let epoch = self.flows.get(&(from, phase)).map_or(0, |f| f.epoch);
            self.pending.retain(|p| p.ctx != ctx);
            let pending = Pending {
                ctx,
                peer: from,
                epoch,
                from: request,
            };
            // A message's first record: the host knows its number from the
            // header alone and answers before the next packet.
            if request.pos != 0 || self.answer_one(core, pending) {
                self.pending.push(pending);
            }
        }
        RxMark(verdict.decrypted.then_some(key))
    }

    /// The context of (peer, phase) with the key the core uses now: made
    /// (or made again for a new key) as needed, the least recently used
    /// one destroyed when the table is full.
    fn flow(
        &mut self,
        core: &Core,
        peer: SocketAddr,
        phase: bool,
        at: StreamPos,
    ) -> Option<(RxContextId, KeyId)> {
        let (epoch, key) = core.rx_cipher(peer, phase)?;
        self.clock += 1;
        if let Some(flow) = self.flows.get_mut(&(peer, phase)) {
            if Arc::ptr_eq(&flow.key, key) {
                flow.used = self.clock;
                return Some((flow.ctx, KeyId::of(key)));
            }
        }
        if self
            .software
            .get(&(peer, phase))
            .is_some_and(|k| Arc::ptr_eq(k, key))
        {
            return None;
        }
        self.forget(peer, phase);
        let key = key.clone();
        let Some(info) = key.offload_key().and_then(|k| crypto_info(&k, 0)) else {
            self.software.insert((peer, phase), key);
            return None;
        };
        let ctx = self.free_context()?;
        // A message's first byte is a record's first byte, with sequence
        // number id << index bits: the context can start in sync there.
        let seq = match at.pos {
            0 => core.rx_record_seq(peer, epoch, at.stream, 0),
            _ => RecordSeq::Never,
        };
        let (info, start) = match seq {
            RecordSeq::Known(seq) => (info.starting_at(seq), Some(at)),
            _ => (info, None),
        };
        self.engine.create(ctx, &info, start).ok()?;
        let id = KeyId::of(&key);
        let used = self.clock;
        self.flows.insert(
            (peer, phase),
            Flow {
                ctx,
                key,
                epoch,
                used,
            },
        );
        Some((ctx, id))
    }

    /// Destroys the context of (peer, phase), if any.
    fn forget(&mut self, peer: SocketAddr, phase: bool) {
        self.software.remove(&(peer, phase));
        if let Some(flow) = self.flows.remove(&(peer, phase)) {
            self.engine.destroy(flow.ctx);
            self.pending.retain(|p| p.ctx != flow.ctx);
            self.free.push(flow.ctx);
        }
    }

    /// A free slot, evicting the least recently used flow if none is.
    fn free_context(&mut self) -> Option<RxContextId> {
        if self.free.is_empty() && self.flows.len() >= self.capacity {
            let (&(peer, phase), _) = self.flows.iter().min_by_key(|(_, f)| f.used)?;
            self.forget(peer, phase);
        }
        self.free.pop()
    }

    /// Answers the requests the core can answer now; keeps the others.
    fn answer(&mut self, core: &Core) {
        let mut pending = std::mem::take(&mut self.pending);
        pending.retain(|&p| self.answer_one(core, p));
        self.pending.extend(pending);
    }

    /// Answers one request if the core can; returns whether it waits.
    fn answer_one(&mut self, core: &Core, p: Pending) -> bool {
        match core.rx_record_seq(p.peer, p.epoch, p.from.stream, p.from.pos) {
            RecordSeq::Known(seq) => {
                self.engine.confirm(p.ctx, p.from, seq);
                false
            }
            RecordSeq::NotYet => true,
            RecordSeq::Never => {
                self.engine.abandon(p.ctx, p.from);
                false
            }
        }
    }
}

/// A DATA packet's key phase and where its payload lies (message ID,
/// wire offset); `None` for anything else, or a packet the core will
/// refuse anyway.
fn data_position(packet: &[u8]) -> Option<(bool, StreamPos)> {
    let view = Packet::new_checked(packet).ok()?;
    if view.packet_type() != PacketType::DATA {
        return None;
    }
    let repr = Repr::parse(&view).ok()?;
    let Body::Data(h) = repr.body else {
        return None;
    };
    if packet.len() != DATA_HEADER_LEN + h.payload_len() {
        return None;
    }
    let at = StreamPos {
        stream: repr.id,
        pos: h.wire_offset(),
    };
    Some((repr.key_phase, at))
}
