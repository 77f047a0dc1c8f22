//! Message reassembly ([`Incoming`]) driven by arbitrary operation
//! sequences: valid packets in any order and multiplicity, forged packets,
//! grants, RESEND-style gap queries and retransmissions.
//!
//! Invariants checked after every operation:
//! - nothing panics (no arithmetic overflow, no out-of-range index);
//! - memory stays linear in the claimed lengths: reassembly buffers lie
//!   below the grant plus one segment, delivered data within the message
//!   length (see [`memory_bound`]);
//! - a valid packet is only ever refused as a duplicate or as beyond the
//!   grant, and, while every accepted packet was a valid one, records open
//!   and the completed message equals what was sealed;
//! - at the end, once every valid packet has been offered in order (the
//!   grant raised as far as the receiver allows), an untainted message is
//!   complete.

use std::ops::Range;

use super::Input;
use crate::buffers::BufferPool;
use crate::crypto::NullCipher;
use crate::error::DropReason;
use crate::record::{
    seal_message, MessageLayout, OffloadTally, SeqLayout, MAX_RECORD_PLAINTEXT, MAX_SEGMENT_LEN,
};
use crate::rpc::{Accepted, Incoming};
use crate::wire::{Body, DataHeader, Packet, Repr, DATA_HEADER_LEN};

/// Largest message the harness seals: a few segments, still fast.
const MAX_DATA_LEN: u32 = 150_000;
/// Most packets one message is cut into (keeps an execution cheap).
const MAX_PACKETS: u64 = 1024;
const LAYOUT: SeqLayout = SeqLayout::DEFAULT;

/// Runs the operations encoded in `data` against one message's reassembly.
///
/// Layout of `data`: a message description (data length: 3 bytes, below
/// 4096 unless the top bit is set; padding: 1; record size: 2; mss: 2;
/// unscheduled bytes / 16: 2; message ID: 1; spare data-buffer bytes /
/// 4096: 1), then operations, each an opcode byte and its arguments (see
/// [`Op`]). Must never panic.
pub fn reassembly_ops(data: &[u8]) {
    let mut input = Input::new(data);
    let Some(message) = Message::from_input(&mut input) else {
        return;
    };
    let mut run = Run::new(&message);
    while let Some(op) = Op::from_input(&mut input, &message) {
        if run.done {
            break;
        }
        run.apply(op);
        run.check_bounds();
    }
    run.finish();
}

/// The sealed message and every packet a correct sender could send of it.
struct Message {
    id: u64,
    data: Vec<u8>,
    wire: Vec<u8>,
    packets: Vec<(DataHeader, Range<usize>)>,
    unscheduled: u32,
    /// What the endpoint's memory limits let the data buffer over-allocate.
    spare: usize,
}

impl Message {
    fn from_input(input: &mut Input<'_>) -> Option<Self> {
        // Mostly small messages (fast executions), large ones when the top
        // bit is set.
        let raw = input.u24()?;
        let data_len = match raw & 0x80_0000 {
            0 => raw % 4096,
            _ => raw % (MAX_DATA_LEN + 1),
        };
        let padded_len = data_len + u32::from(input.u8()?);
        let record_size = 1 + usize::from(input.u16()?) % MAX_RECORD_PLAINTEXT;
        let mss = input.u16()?.max(1);
        let unscheduled = u32::from(input.u16()?) * 16;
        let id = u64::from(input.u8()?);
        let spare = usize::from(input.u8()?) << 12;
        let data: Vec<u8> = (0..data_len).map(|i| (i * 7 + 3) as u8).collect();
        let layout = MessageLayout::new(data_len.into(), padded_len.into(), record_size);
        let sealed = seal_message(&NullCipher, LAYOUT, id, &data, layout).ok()?;
        // Fewer, larger packets rather than a slow execution.
        let min_mss = layout.wire_len().div_ceil(MAX_PACKETS);
        let mss = u64::from(mss).max(min_mss).min(u64::from(u16::MAX));
        let packets = packets_of(&layout, mss);
        Some(Self {
            id,
            data,
            wire: sealed.wire,
            packets,
            unscheduled,
            spare,
        })
    }

    fn wire_len(&self) -> u32 {
        self.wire.len() as u32
    }

    fn message_len(&self) -> u32 {
        self.packets[0].0.message_len
    }

    /// Whether `h` with `payload` is one of the valid packets (as a first
    /// transmission or a retransmission).
    fn is_valid(&self, h: &DataHeader, payload: &[u8]) -> bool {
        self.packets.iter().any(|(v, range)| {
            let same = DataHeader {
                retransmit: h.retransmit,
                incoming: h.incoming,
                priority: 0,
                ..*v
            };
            same == *h && self.wire[range.clone()] == *payload
        })
    }
}

/// Every packet of `layout` cut at `mss`, as `Outgoing::write_packet` cuts
/// them (the sender here has been granted the whole message).
fn packets_of(layout: &MessageLayout, mss: u64) -> Vec<(DataHeader, Range<usize>)> {
    let mut out = Vec::new();
    for s in 0..layout.segments() {
        let seg = layout.segment(s);
        let seg_mss = mss.min(seg.wire_len);
        for index in 0..seg.wire_len.div_ceil(seg_mss) {
            let start = seg.wire_offset + index * seg_mss;
            let end = (start + seg_mss).min(seg.wire_offset + seg.wire_len);
            let header = DataHeader {
                message_len: layout.padded_len() as u32,
                message_wire_len: layout.wire_len() as u32,
                segment_offset: seg.wire_offset as u32,
                segment_len: seg.wire_len as u32,
                mss: seg_mss as u16,
                packet_index: index as u16,
                retransmit: false,
                incoming: layout.wire_len() as u32,
                priority: 0,
            };
            out.push((header, start as usize..end as usize));
        }
    }
    out
}

/// One step of the sequence; the opcode is the low three bits.
#[derive(Debug)]
enum Op {
    /// Packet `index` (modulo the count), possibly flagged as a
    /// retransmission (opcode bit 3), possibly as decrypted by a NIC
    /// (opcode bit 4; under the null cipher the decrypted bytes are the
    /// sent ones, so the message must come out the same).
    Deliver {
        index: usize,
        retransmit: bool,
        decrypted: bool,
    },
    /// `count` consecutive packets from `index`.
    DeliverRun { index: usize, count: usize },
    /// A header made of input bytes, with a payload copied from the message
    /// at the claimed offset (opcode bit 3) or filled with a byte.
    Forge {
        fields: [u32; 6],
        copy: bool,
        fill: u8,
    },
    /// The receiver raises its grant.
    Grant { offset: u32 },
    /// Ask for gaps as a RESEND would, then receive the packets covering
    /// the first `answer` of them as retransmissions.
    Resend {
        max_ranges: usize,
        max_len: u32,
        answer: usize,
    },
    /// Opens whatever is ready (the endpoint does this after each packet).
    Open,
}

impl Op {
    fn from_input(input: &mut Input<'_>, message: &Message) -> Option<Self> {
        let code = input.u8()?;
        let n = message.packets.len();
        Some(match code & 7 {
            0 | 1 => Op::Deliver {
                index: usize::from(input.u16()?) % n,
                retransmit: code & 8 != 0,
                decrypted: code & 16 != 0,
            },
            2 => Op::DeliverRun {
                index: usize::from(input.u16()?) % n,
                count: usize::from(input.u8()?),
            },
            3 => Op::Forge {
                fields: [
                    input.u32()?,
                    input.u32()?,
                    input.u32()?,
                    input.u32()?,
                    input.u32()?,
                    input.u32()?,
                ],
                copy: code & 8 != 0,
                fill: input.u8()?,
            },
            4 => Op::Grant {
                offset: input.u32()? % (message.wire_len() + 1),
            },
            5 | 6 => Op::Resend {
                max_ranges: usize::from(input.u8()? % 16),
                max_len: u32::from(input.u16()?),
                answer: usize::from(code >> 4),
            },
            _ => Op::Open,
        })
    }
}

/// The receiver under test and what the harness knows about it.
struct Run<'m> {
    message: &'m Message,
    incoming: Incoming,
    /// Reused buffers, as the endpoint's (the reassembly must not care
    /// where its buffers came from).
    pool: BufferPool,
    /// A packet that is not one of the valid ones was accepted: the message
    /// may now legitimately fail, but must still not panic.
    tainted: bool,
    /// Delivered or discarded, as the endpoint would: no more operations.
    done: bool,
}

impl<'m> Run<'m> {
    fn new(message: &'m Message) -> Self {
        let incoming = Incoming::new(&message.packets[0].0, message.unscheduled, u32::MAX);
        Self {
            message,
            incoming,
            pool: BufferPool::default(),
            tainted: false,
            done: false,
        }
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::Deliver {
                index,
                retransmit,
                decrypted,
            } => {
                let _ = self.deliver_valid(index, retransmit, decrypted);
            }
            Op::DeliverRun { index, count } => {
                let end = (index + count).min(self.message.packets.len());
                for i in index..end {
                    let _ = self.deliver_valid(i, false, false);
                }
            }
            Op::Forge { fields, copy, fill } => self.deliver_forged(fields, copy, fill),
            Op::Grant { offset } => {
                self.incoming.raise_grant(offset.into());
            }
            Op::Resend {
                max_ranges,
                max_len,
                answer,
            } => self.resend(max_ranges, max_len, answer),
            Op::Open => self.open(),
        }
    }

    /// Offers valid packet `index`; returns whether it was beyond the grant.
    fn deliver_valid(&mut self, index: usize, retransmit: bool, decrypted: bool) -> bool {
        if self.done {
            return false;
        }
        let (mut h, range) = self.message.packets[index].clone();
        h.retransmit = retransmit;
        let payload = &self.message.wire[range];
        match self.incoming.accept(&h, payload, decrypted, &mut self.pool) {
            Ok(()) => self.open(),
            Err(DropReason::OverLimit) => return true,
            Err(DropReason::Duplicate) => {}
            Err(e) => assert!(self.tainted, "valid packet {index} refused: {e:?}"),
        }
        false
    }

    /// A header from input bytes; only what the wire parser accepts reaches
    /// reassembly, as in the endpoint.
    fn deliver_forged(&mut self, f: [u32; 6], copy: bool, fill: u8) {
        let wire_len = self.message.wire_len();
        let mut h = DataHeader {
            message_len: if f[5] & 1 == 0 {
                self.message.message_len()
            } else {
                f[0]
            },
            message_wire_len: if f[5] & 2 == 0 { wire_len } else { f[1] },
            segment_offset: f[2] % (wire_len + 1),
            segment_len: 1 + f[3] % MAX_SEGMENT_LEN as u32,
            mss: (f[4] & 0xffff) as u16,
            packet_index: (f[4] >> 16) as u16,
            retransmit: f[5] & 4 != 0,
            incoming: 0,
            priority: 0,
        };
        h.incoming = h.message_wire_len;
        let start = h.wire_offset().min(u64::from(wire_len)) as usize;
        let end = (start + h.payload_len()).min(self.message.wire.len());
        let mut payload = vec![fill; h.payload_len()];
        if copy {
            payload[..end - start].copy_from_slice(&self.message.wire[start..end]);
        }
        let Some(h) = parse_as_network(&h, &payload) else {
            return;
        };
        let valid = self.message.is_valid(&h, &payload);
        if self
            .incoming
            .accept(&h, &payload, false, &mut self.pool)
            .is_ok()
        {
            self.tainted |= !valid;
            self.open();
        }
    }

    fn resend(&mut self, max_ranges: usize, max_len: u32, answer: usize) {
        let gaps = self.incoming.gaps(max_ranges, max_len);
        assert!(gaps.len() <= max_ranges, "more gaps than asked for");
        for &(start, len) in &gaps {
            assert!(len <= max_len, "gap longer than asked for");
            let end = u64::from(start) + u64::from(len);
            assert!(
                end <= u64::from(self.message.wire_len()),
                "gap beyond the message"
            );
        }
        for &(start, len) in gaps.iter().take(answer) {
            self.retransmit_range(start, len);
        }
    }

    /// What a sender answering a RESEND for `[start, start + len)` sends.
    fn retransmit_range(&mut self, start: u32, len: u32) {
        let (start, end) = (start as usize, start as usize + len as usize);
        for i in 0..self.message.packets.len() {
            let range = &self.message.packets[i].1;
            if range.start < end.max(start + 1) && range.end > start {
                let _ = self.deliver_valid(i, true, false);
            }
        }
    }

    fn open(&mut self) {
        if self.done {
            return;
        }
        let (mut opened, mut offloaded) = (0, OffloadTally::default());
        let result = self.incoming.open_ready(
            &NullCipher,
            LAYOUT,
            self.message.id,
            &mut opened,
            &mut offloaded,
            self.message.spare,
            &mut self.pool,
        );
        match result {
            Ok(Accepted::Stored) => {}
            Ok(Accepted::Complete) => {
                let data = self.incoming.take_data();
                assert!(
                    self.tainted || data == self.message.data,
                    "completed message differs"
                );
                self.done = true;
            }
            // The endpoint discards the message; nothing more arrives.
            Err(DropReason::ProtocolViolation) => {
                assert!(self.tainted, "consistent packets violate the protocol");
                self.done = true;
            }
            Err(e) => assert!(self.tainted, "consistent packets fail to open: {e:?}"),
        }
    }

    fn check_bounds(&self) {
        let wire_len = u64::from(self.message.wire_len());
        assert!(
            self.incoming.received() <= wire_len,
            "more bytes than the message"
        );
        assert!(
            u64::from(self.incoming.granted()) <= wire_len,
            "grant beyond the message"
        );
        let _ = self.incoming.remaining();
        let buffered = self.incoming.buffered_bytes() as u64;
        let bound = memory_bound(
            self.message.message_len(),
            wire_len,
            self.incoming.granted(),
        );
        assert!(
            buffered <= bound,
            "{buffered} bytes buffered, bound {bound}"
        );
    }

    /// Offer every valid packet in order, raising the grant as far as the
    /// receiver allows (it caps grants ahead of the authenticated prefix)
    /// whenever a packet is beyond it: an untainted message must complete.
    fn finish(mut self) {
        let wire_len = u64::from(self.message.wire_len());
        for i in 0..self.message.packets.len() {
            if self.deliver_valid(i, true, false) {
                self.incoming.raise_grant(wire_len);
                if self.deliver_valid(i, true, false) {
                    break;
                }
            }
        }
        self.check_bounds();
        assert!(
            self.done || self.tainted,
            "every packet offered, message incomplete"
        );
    }
}

/// Reassembly memory allowed for a message: the segments, which do not
/// overlap, lie in the message's wire bytes and start below the grant;
/// delivered data is at most the message length, held in a `Vec` that
/// may have grown to twice that (plus one segment opened before the length
/// check fails it). Each segment byte may cost a packet flag and, for
/// one-byte segments, a segment's bookkeeping.
fn memory_bound(message_len: u32, wire_len: u64, granted: u32) -> u64 {
    let segment = MAX_SEGMENT_LEN as u64;
    let segments = wire_len.min(u64::from(granted) + segment);
    let per_byte = 2 + crate::rpc::SEGMENT_OVERHEAD as u64;
    segments * per_byte
        + 2 * (u64::from(message_len) + segment)
        + crate::rpc::MESSAGE_OVERHEAD as u64
}

/// `h` as the endpoint would see it: emitted, then parsed back (the parser
/// validates every field). `None` if the parser refuses it.
fn parse_as_network(h: &DataHeader, payload: &[u8]) -> Option<DataHeader> {
    let repr = Repr {
        src_port: 1,
        dst_port: 2,
        key_phase: false,
        id: 0,
        body: Body::Data(*h),
    };
    let mut buf = vec![0u8; DATA_HEADER_LEN + payload.len()];
    repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
    buf[DATA_HEADER_LEN..].copy_from_slice(payload);
    let packet = Packet::new_checked(&buf[..]).ok()?;
    match Repr::parse(&packet).ok()?.body {
        Body::Data(parsed) => Some(parsed),
        _ => None,
    }
}
