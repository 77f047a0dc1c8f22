mod resend;

use resend::ResendSet;

use super::ServerRpcHandle;
use crate::offload::{RecordPos, TxRecords};
use crate::record::{Plaintext, SealedMessage, SeqLayout};
use crate::wire::{DataHeader, DATA_HEADER_LEN};

/// Ticks remembered in [`Outgoing`]'s send marks: enough to look back
/// `resend_ticks` ticks up to 9 (default 5); with a longer `resend_ticks`
/// a RESEND may retransmit less than it could (never more) until asked
/// again.
const MARKS: usize = 8;

/// Which packet of a message to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct PacketRef {
    pub segment: u64,
    pub index: u32,
    pub retransmit: bool,
    /// Its payload's wire range `[start, end)`.
    pub start: u64,
    pub end: u64,
    /// Its segment's wire offset and length. Both worked out once, where
    /// the packet is chosen (from the cursor, for a first transmission),
    /// not again from the layout to write it.
    pub segment_at: (u64, u64),
}

impl PacketRef {
    /// Its length on the wire, DATA header included.
    #[inline]
    pub(crate) fn wire_len(&self) -> usize {
        DATA_HEADER_LEN + (self.end - self.start) as usize
    }
}

/// A message being sent. Packets go out in order up to what the receiver
/// granted; RESENDs queue earlier packets again, with their original
/// ciphertext. Records are sealed as their first packet leaves
/// ([`Outgoing::seal_for`]), so sending a large message costs one copy up
/// front and the encryption is spread over the transmissions.
#[derive(Debug)]
pub(crate) struct Outgoing {
    sealed: SealedMessage,
    mss: u16,
    /// Wire bytes the receiver let us send; never above the wire length
    /// (both places that set it clamp it), so checks need not clamp again.
    granted: u64,
    /// Next never-sent packet.
    cursor_segment: u64,
    cursor_index: u32,
    /// Its wire offset (the whole wire length once all were sent): kept as
    /// the cursor moves, because the scheduler asks for it several times a
    /// packet (`remaining`, `has_sendable`) and working it out from the
    /// layout cost ~300 instructions per 64 B RPC.
    sent: u64,
    /// Where the cursor's segment starts and ends on the wire, kept
    /// likewise: the next packet's range is `sent` to `segment_end` or a
    /// packet further.
    segment_start: u64,
    segment_end: u64,
    retransmit: ResendSet,
    /// The tick of the last RESEND that queued retransmissions.
    resent_at: Option<u64>,
    /// For each of the last [`MARKS`] ticks in which a packet was first
    /// sent: (tick, [`Outgoing::sent`] before that tick's first packet),
    /// a ring. Tells a RESEND which packets are still on their way. Both
    /// in 32 bits, to keep the RPC small: wire offsets are 32-bit, and
    /// ticks are compared by wrapping difference.
    marks: [(u32, u32); MARKS],
    /// Next slot of `marks` to write; `marked` of them are filled. Bytes
    /// (they count to `MARKS`), so the kept offsets above cost the RPC
    /// no size.
    mark_at: u8,
    marked: u8,
    /// Whether the endpoint's send queue holds an entry for this message
    /// (so it is not queued twice).
    pub queued: bool,
    /// Its records are framed for a NIC to seal (transmit offload).
    pub for_nic: bool,
    /// The priority its DATA packets carry (`DataHeader::priority`).
    pub priority: u8,
}

impl Outgoing {
    /// `for_nic`: the records are framed for a NIC to seal.
    pub(crate) fn new(sealed: SealedMessage, mss: u16, unscheduled: u32, for_nic: bool) -> Self {
        let granted = sealed.layout.wire_len().min(u64::from(unscheduled));
        let first = sealed.layout.segment(0);
        Self {
            sealed,
            mss,
            granted,
            cursor_segment: 0,
            cursor_index: 0,
            sent: 0,
            segment_start: first.wire_offset,
            segment_end: first.wire_offset + first.wire_len,
            retransmit: ResendSet::default(),
            resent_at: None,
            marks: [(0, 0); MARKS],
            mark_at: 0,
            marked: 0,
            queued: false,
            for_nic,
            priority: 0,
        }
    }

    /// The message's length (its plaintext, without padding).
    pub(crate) fn data_len(&self) -> u64 {
        self.sealed.layout.data_len()
    }

    /// The message's data again (see `SealedMessage::recover`).
    pub(crate) fn recover(
        &self,
        out: &mut Vec<u8>,
    ) -> Result<Option<bytes::Bytes>, crate::crypto::CryptoError> {
        self.sealed.recover(out)
    }

    /// Gives the message's buffers to `pool` for reuse, and the caller's
    /// shared data back to it to let go of (the message is done): the
    /// large ones then wait for the driver to free them.
    pub(crate) fn recycle(&mut self, pool: &mut crate::buffers::BufferPool) {
        let (wire, data) = self.sealed.take_buffers();
        pool.give(wire);
        match data {
            Some(Plaintext::Copied(copy)) => pool.give(copy),
            Some(Plaintext::Shared(shared)) => pool.release_shared(shared),
            None => {}
        }
    }

    pub(crate) fn wire_len(&self) -> u64 {
        self.sealed.layout.wire_len()
    }

    /// Wire offset of the next never-sent packet.
    pub(crate) fn sent(&self) -> u64 {
        self.sent
    }

    /// Wire bytes not yet sent once: the SRPT key.
    pub(crate) fn remaining(&self) -> u64 {
        self.wire_len() - self.sent()
    }

    pub(crate) fn fully_sent(&self) -> bool {
        self.sent() == self.wire_len()
    }

    pub(crate) fn has_sendable(&self) -> bool {
        !self.retransmit.is_empty() || self.sent() < self.granted
    }

    /// Marks the message as queued among the send candidates and returns
    /// its rank (bytes left), if it has something to send and is not
    /// queued yet; else `None`, and the caller queues nothing.
    #[inline]
    pub(crate) fn queue_rank(&mut self) -> Option<u64> {
        if self.queued || !self.has_sendable() {
            return None;
        }
        self.queued = true;
        Some(self.remaining())
    }

    /// Raises the grant; grants never shrink.
    pub(crate) fn grant(&mut self, offset: u32) {
        self.granted = self.granted.max(u64::from(offset).min(self.wire_len()));
        debug_assert!(self.granted <= self.wire_len());
    }

    /// Queues every packet overlapping `[offset, offset + len)` that was
    /// first sent at least `interval - 1` ticks ago (it is `tick` now): one
    /// sent since is still on its way, not known to be lost (a receiver
    /// that is slow to read asks for it all the same); the receiver asks
    /// again if it really was. Nothing is queued if an earlier tick's
    /// RESEND did less than `interval` ticks ago: what that one queued is
    /// still on its way too, and a receiver asks at most once per
    /// `interval`, so a second request so soon is a copy or was overtaken
    /// (the RESENDs of one tick, one per gap, are all honoured). A RESEND
    /// also implies a grant up to its end. Returns whether anything was
    /// queued (if not, the sender tells the receiver it is busy).
    /// A range wholly past the message's end means the receiver holds
    /// another message's length under this ID (a corrupted or forged header
    /// arrived before any of ours): it gets the first packet again, whose
    /// header carries the true length, so it drops what it holds and starts
    /// over. Asking for bytes we do not have would otherwise go on forever.
    pub(crate) fn resend(&mut self, offset: u32, len: u32, tick: u64, interval: u64) -> bool {
        let (offset, len) = if u64::from(offset) >= self.wire_len() {
            (0, 1)
        } else {
            (offset, len)
        };
        self.grant(offset.saturating_add(len));
        if self
            .resent_at
            .is_some_and(|at| at != tick && tick < at + interval)
        {
            return false;
        }
        // `interval - 1`: the receiver's ticks are not ours, and its
        // request after `interval` of its ticks may come in our
        // `interval - 1`-th tick after the packet left.
        let Some(old) = tick.checked_sub(interval.saturating_sub(1)) else {
            return false;
        };
        let start = u64::from(offset);
        let end = (start + u64::from(len)).min(self.sent_by(old));
        if start >= end {
            return false;
        }
        self.resent_at = Some(tick);
        let layout = &self.sealed.layout;
        let mss = u64::from(self.mss);
        for s in layout.segment_index_at(start)..=layout.segment_index_at(end - 1) {
            let seg = layout.segment(s);
            let first = start.saturating_sub(seg.wire_offset) / mss;
            let last = (end - seg.wire_offset).min(seg.wire_len).div_ceil(mss);
            for i in first..last {
                self.retransmit.insert((s, i as u32));
            }
        }
        true
    }

    /// Seals the records packet `p` (from [`Outgoing::peek_packet`])
    /// carries, if not sealed yet (at most a packet's worth of records).
    /// Call before writing it: unsealed bytes never leave.
    #[inline]
    pub(crate) fn seal_for(&mut self, p: &PacketRef) -> Result<(), crate::crypto::CryptoError> {
        // A message sealed whole (every small one) returns at once,
        // inline (`SealedMessage::seal_through`).
        self.sealed.seal_through(p.end)
    }

    /// How far packets had been first sent by the end of tick `t` (a lower
    /// bound if the marks do not reach back that far).
    fn sent_by(&self, t: u64) -> u64 {
        let mut by = self.sent();
        let (at, marked) = (usize::from(self.mark_at), usize::from(self.marked));
        for k in 1..=marked {
            let (tick, before) = self.marks[(at + MARKS - k) % MARKS];
            // `tick <= t`, modulo 2^32.
            if (t as u32).wrapping_sub(tick) < 1 << 31 {
                break;
            }
            by = u64::from(before);
        }
        by
    }

    /// Notes that a packet is first sent in tick `tick`.
    fn mark(&mut self, tick: u64) {
        let at = usize::from(self.mark_at);
        let last = (at + MARKS - 1) % MARKS;
        if self.marked > 0 && self.marks[last].0 == tick as u32 {
            return;
        }
        // Wire lengths fit 32 bits (the DATA header's field).
        self.marks[at] = (tick as u32, self.sent() as u32);
        self.mark_at = ((at + 1) % MARKS) as u8;
        self.marked = (self.marked + 1).min(MARKS as u8);
    }

    /// The packet to send next, if any (retransmissions first), with its
    /// ranges, without taking it: the send loop checks where it goes and
    /// seals it from this one description, then takes it
    /// ([`Outgoing::take_packet`]).
    #[inline]
    pub(crate) fn peek_packet(&self) -> Option<PacketRef> {
        if let Some(&(segment, index)) = self.retransmit.first() {
            return Some(self.packet_at(segment, index));
        }
        if self.sent >= self.granted {
            return None;
        }
        Some(PacketRef {
            segment: self.cursor_segment,
            index: self.cursor_index,
            retransmit: false,
            start: self.sent,
            end: (self.sent + u64::from(self.mss)).min(self.segment_end),
            segment_at: (self.segment_start, self.segment_end - self.segment_start),
        })
    }

    /// Takes packet `p`, which [`Outgoing::peek_packet`] gave with nothing
    /// changed since, as sent in tick `tick`.
    #[inline]
    pub(crate) fn take_packet(&mut self, p: PacketRef, tick: u64) {
        if p.retransmit {
            self.retransmit.pop_first();
            return;
        }
        self.mark(tick);
        self.advance_to(p.end);
    }

    /// The packet to send next, taken, as sent in tick `tick`.
    #[cfg(test)]
    fn next_packet(&mut self, tick: u64) -> Option<PacketRef> {
        let p = self.peek_packet()?;
        self.take_packet(p, tick);
        Some(p)
    }

    /// Packet `index` of segment `segment` again (a retransmission).
    fn packet_at(&self, segment: u64, index: u32) -> PacketRef {
        let seg = self.sealed.layout.segment(segment);
        let start = seg.wire_offset + u64::from(index) * u64::from(self.mss);
        let end = (start + u64::from(self.mss)).min(seg.wire_offset + seg.wire_len);
        PacketRef {
            segment,
            index,
            retransmit: true,
            start,
            end,
            segment_at: (seg.wire_offset, seg.wire_len),
        }
    }

    /// Moves the cursor past a packet first sent, which ended at `end`.
    /// Segments tile the message: the end of one is where the next starts,
    /// and the last one's end is the wire length.
    fn advance_to(&mut self, end: u64) {
        self.cursor_index += 1;
        self.sent = end;
        if self.sent != self.segment_end {
            return;
        }
        self.cursor_segment += 1;
        self.cursor_index = 0;
        if self.cursor_segment < self.sealed.layout.segments() {
            let seg = self.sealed.layout.segment(self.cursor_segment);
            self.segment_start = seg.wire_offset;
            self.segment_end = seg.wire_offset + seg.wire_len;
        }
    }

    /// Writes packet `p` of message `id` into `buf`; returns its length,
    /// or `None` if its records are not sealed yet (see
    /// [`Outgoing::seal_for`]).
    #[inline]
    pub(crate) fn write_packet(
        &self,
        p: PacketRef,
        ports: (u16, u16),
        key_phase: bool,
        id: u64,
        buf: &mut [u8],
    ) -> Option<usize> {
        let sealed = &self.sealed;
        if sealed.sealed_records() < sealed.layout.records()
            && p.end > sealed.layout.record_wire_offset(sealed.sealed_records())
        {
            return None;
        }
        let payload = &sealed.wire[p.start as usize..p.end as usize];
        let total = DATA_HEADER_LEN + payload.len();
        let header = self.data_header(p).header_bytes(ports, key_phase, id);
        buf[..DATA_HEADER_LEN].copy_from_slice(&header);
        buf[DATA_HEADER_LEN..total].copy_from_slice(payload);
        Some(total)
    }
}

impl Outgoing {
    /// The DATA header of packet `p`.
    #[inline]
    fn data_header(&self, p: PacketRef) -> DataHeader {
        let ((offset, len), end) = (p.segment_at, p.end);
        DataHeader {
            message_len: self.sealed.layout.padded_len() as u32,
            message_wire_len: self.wire_len() as u32,
            segment_offset: offset as u32,
            segment_len: len as u32,
            // Canonical form: the mss never exceeds the segment.
            mss: (u64::from(self.mss).min(len)) as u16,
            packet_index: p.index as u16,
            retransmit: p.retransmit,
            // A packet that starts below the grant is sent whole.
            incoming: self.granted.max(end).min(self.wire_len()) as u32,
            priority: self.priority,
        }
    }

    /// Where the payload of packet `p` (of message `k`, written as a
    /// `len`-byte datagram) lies in the message's record stream, for the
    /// NIC that seals it (transmit offload). Kept out of line: the send
    /// loop without offload should not carry it.
    #[inline(never)]
    pub(crate) fn tx_records(
        &self,
        p: PacketRef,
        k: ServerRpcHandle,
        seq_layout: SeqLayout,
        len: usize,
    ) -> TxRecords {
        let layout = &self.sealed.layout;
        let seg = layout.segment(p.segment);
        let start = seg.wire_offset + u64::from(p.index) * u64::from(self.mss);
        let end = start + (len - DATA_HEADER_LEN) as u64;
        let pos = |index: u64, offset: u64| RecordPos {
            // NOTE: the message was framed, so every index has a sequence
            // number; the index after the last record may not (it is only
            // compared, never sealed under), hence the wrapping form.
            seq: (k.id << seq_layout.index_bits()).wrapping_add(index),
            offset: offset as u32,
        };
        let first = layout.record_at(start);
        let last = layout.record_at(end - 1);
        let last_start = layout.record_wire_offset(last);
        let end_pos = match end - last_start == layout.record(last).wire_len() {
            true => pos(last + 1, 0),
            false => pos(last, end - last_start),
        };
        TxRecords {
            peer: k.peer,
            epoch: k.epoch,
            id: k.id,
            payload: DATA_HEADER_LEN..len,
            start: pos(first, start - layout.record_wire_offset(first)),
            end: end_pos,
            wire_offset: start,
            retransmit: p.retransmit,
        }
    }

    /// The bytes of the record holding wire offset `at`, from its first
    /// byte up to `at` (exclusive), as they were posted (plaintext body
    /// under transmit offload): what a NIC replays to resync mid-record.
    pub(crate) fn record_prefix(&self, at: u64) -> Option<&[u8]> {
        let layout = &self.sealed.layout;
        if at >= layout.wire_len() {
            return None;
        }
        let start = layout.record_wire_offset(layout.record_at(at));
        self.sealed.wire.get(start as usize..at as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::Outgoing;
    use crate::crypto::NullCipher;
    use crate::record::{seal_message, MessageLayout, SeqLayout};

    /// A 10 000-byte message, 1000-byte packets, everything granted.
    fn message() -> Outgoing {
        let data = vec![7u8; 10_000];
        let layout = MessageLayout::new(10_000, 10_000, 16384);
        let sealed = seal_message(&NullCipher, SeqLayout::DEFAULT, 2, &data, layout).unwrap();
        Outgoing::new(sealed, 1000, 1 << 20, false)
    }

    fn send_all(out: &mut Outgoing, tick: u64) -> usize {
        std::iter::from_fn(|| out.next_packet(tick)).count()
    }

    #[test]
    fn a_resend_for_packets_still_on_their_way_retransmits_nothing() {
        let mut out = message();
        assert_eq!(send_all(&mut out, 10), 11);
        out.resend(0, 20_000, 12, 5);
        assert_eq!(send_all(&mut out, 12), 0, "sent two ticks ago: in flight");
        out.resend(0, 20_000, 14, 5);
        assert_eq!(
            send_all(&mut out, 14),
            11,
            "sent four ticks ago: asked again"
        );
    }

    #[test]
    fn resends_of_several_ticks_in_a_row_retransmit_once() {
        let mut out = message();
        send_all(&mut out, 0);
        out.resend(0, 2000, 20, 5);
        out.resend(5000, 2000, 20, 5);
        assert_eq!(send_all(&mut out, 20), 4, "both gaps of one tick");
        for tick in 21..25 {
            out.resend(0, 20_000, tick, 5);
            assert_eq!(send_all(&mut out, tick), 0, "tick {tick}: a copy");
        }
        out.resend(0, 2000, 25, 5);
        assert_eq!(send_all(&mut out, 25), 2, "an interval later");
    }

    /// The kept `sent` is what the layout says of the cursor after every
    /// packet, across segments (records of 1000 bytes, several segments)
    /// and packets that do not divide them.
    #[test]
    fn sent_follows_the_layout_across_segments() {
        let len = 200_000;
        let data = vec![7u8; len];
        let layout = MessageLayout::new(len as u64, len as u64, 1000);
        assert!(layout.segments() > 2);
        let sealed = seal_message(&NullCipher, SeqLayout::DEFAULT, 2, &data, layout).unwrap();
        let mut out = Outgoing::new(sealed, 1400, u32::MAX, false);
        while out.next_packet(0).is_some() {
            let expect = match out.cursor_segment < layout.segments() {
                true => {
                    layout.segment(out.cursor_segment).wire_offset
                        + u64::from(out.cursor_index) * 1400
                }
                false => layout.wire_len(),
            };
            assert_eq!(out.sent(), expect);
            if out.cursor_segment < layout.segments() {
                let seg = layout.segment(out.cursor_segment);
                assert_eq!(out.segment_start, seg.wire_offset);
                assert_eq!(out.segment_end, seg.wire_offset + seg.wire_len);
            }
        }
        assert!(out.fully_sent());
    }
}
