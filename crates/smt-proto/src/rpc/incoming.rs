use crate::buffers::{capacity_for, pooled_capacity, BufferPool};
use crate::crypto::PacketCipher;
use crate::error::DropReason;
use crate::record::{
    open_decrypted_in_place, open_marked_into, open_segment_in_place, open_segment_into,
    OffloadTally, OpenError, OpenedSegment, PacketMarks, SeqLayout, MAX_SEGMENT_LEN,
};
use crate::wire::DataHeader;

/// Opens segment `seg` of message `id` (its first record numbered
/// `first`) into `room`. Receive offload: one flag per message
/// (`decrypted`); the packets' marks are looked at only if it is set.
#[inline]
fn decrypt_segment(
    seg: &mut SegmentBuf,
    decrypted: bool,
    (cipher, layout, id, first): (&dyn PacketCipher, SeqLayout, u64, u64),
    room: &mut [u8],
    offloaded: &mut OffloadTally,
) -> Result<(OpenedSegment, usize), OpenError> {
    if !(decrypted && seg.have.contains(&2)) {
        return open_segment_into(cipher, layout, id, first, &seg.buf, room);
    }
    let marks = PacketMarks {
        have: &seg.have,
        mss: usize::from(seg.mss),
    };
    let (o, written, tally) =
        open_marked_into(cipher, layout, id, first, &mut seg.buf, marks, room)?;
    offloaded.add(tally);
    Ok((o, written))
}

/// Bookkeeping charged per segment buffer besides its bytes: the struct and
/// its share of a map node (so a flood of one-byte segments is charged for
/// what it really costs).
pub(crate) const SEGMENT_OVERHEAD: usize = std::mem::size_of::<SegmentBuf>() + 48;
/// Bookkeeping charged per message: the state around the buffers.
pub(crate) const MESSAGE_OVERHEAD: usize = 512;

/// What holding a `len`-byte segment of `mss`-byte packets costs: its
/// bytes, a flag per packet, bookkeeping.
fn segment_cost(len: u32, mss: u16) -> usize {
    let packets = len.div_ceil(u32::from(mss.max(1))) as usize;
    len as usize + packets + SEGMENT_OVERHEAD
}

/// Framing and the record count are checked before the AEAD, on bytes
/// anyone can forge: they must not end the message (a forged packet would
/// kill a live RPC), only discard the segment like a failed tag.
fn open_error_reason(e: OpenError) -> DropReason {
    match e {
        OpenError::Auth | OpenError::Framing | OpenError::IndexOverflow => DropReason::AuthFailure,
        OpenError::Overflow | OpenError::ContentType => DropReason::ProtocolViolation,
    }
}

/// What accepting a packet changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Accepted {
    /// Stored; the message is not complete yet.
    Stored,
    /// The message is complete and every record authenticated.
    Complete,
}

/// One segment being reassembled from packets.
#[derive(Debug)]
pub(crate) struct SegmentBuf {
    len: u32,
    mss: u16,
    buf: Vec<u8>,
    /// Per packet: 1 once it arrived, 2 if it arrived decrypted by the
    /// NIC (bytes, so the buffer pool can keep it).
    have: Vec<u8>,
    missing: usize,
}

impl SegmentBuf {
    fn new(h: &DataHeader, pool: &mut BufferPool) -> Self {
        // Parsing bounded segment_len by MAX_SEGMENT_LEN: this allocation
        // is never a claimed message length.
        let packets = h.segment_len.div_ceil(u32::from(h.mss)) as usize;
        Self {
            len: h.segment_len,
            mss: h.mss,
            // Every byte is written by a packet before the segment opens.
            buf: pool.take_filled(h.segment_len as usize),
            have: pool.take_zeroed(packets),
            missing: packets,
        }
    }

    fn recycle(self, pool: &mut BufferPool) {
        pool.give(self.buf);
        pool.give(self.have);
    }

    fn is_complete(&self) -> bool {
        self.missing == 0
    }

    /// The wire length of the record whose header starts at `at`, if its
    /// five header bytes have arrived and frame a record inside the
    /// segment.
    fn record_len_at(&self, at: usize) -> Option<usize> {
        let mss = usize::from(self.mss.max(1));
        let end = at + crate::crypto::RECORD_HEADER_LEN;
        if end > self.len as usize || (at / mss..=(end - 1) / mss).any(|i| self.have[i] == 0) {
            return None;
        }
        let len = usize::from(u16::from_be_bytes([self.buf[at + 3], self.buf[at + 4]]));
        let total = crate::crypto::RECORD_HEADER_LEN + len;
        (len > crate::crypto::TAG_LEN && at + total <= self.len as usize).then_some(total)
    }

    /// Missing packets as wire ranges relative to the segment start.
    fn gaps(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let mss = u32::from(self.mss);
        self.have
            .iter()
            .enumerate()
            .filter(|(_, h)| **h == 0)
            .map(move |(i, _)| {
                let start = i as u32 * mss;
                (start, mss.min(self.len - start))
            })
    }
}

/// A message being received: packets are placed by (segment offset, packet
/// index); complete segments are opened strictly in order, each record with
/// the sequence number the receiver expects for it.
#[derive(Debug)]
pub(crate) struct Incoming {
    message_len: u32,
    wire_len: u32,
    /// Segments being reassembled, by offset (few: the grant window's
    /// worth). A vector, so a reused `Incoming` keeps its capacity.
    segments: Vec<(u32, SegmentBuf)>,
    next_segment: u32,
    next_record: u64,
    padded: u64,
    /// The message's data: `data[..filled]` is opened plaintext; the rest
    /// of `data` (initialised, so records open straight into it) is room
    /// for the segments to come.
    data: Vec<u8>,
    filled: usize,
    /// Unique wire bytes received so far.
    received: u64,
    /// Highest wire offset this receiver granted.
    granted: u32,
    /// Grants never run further than this past the authenticated prefix
    /// (`Config::max_unopened_bytes`).
    ahead: u32,
    /// Bytes held, as [`Incoming::buffered_bytes`] reports them.
    held: usize,
    /// `data` holds the whole message's wire bytes, from one packet, not
    /// yet opened (the one-packet fast path: no segment buffer, records
    /// opened in place).
    whole: bool,
    /// Receive offload: a packet arrived decrypted by the NIC (for the
    /// whole-message packet: that one did; for segments, their `have`
    /// bytes say which).
    decrypted: bool,
}

impl Incoming {
    /// A message whose first packet is `h`: `unscheduled` bytes are
    /// granted from the start, and grants run at most `ahead` bytes past
    /// what has been authenticated.
    #[cfg(any(fuzzing, test))]
    pub(crate) fn new(h: &DataHeader, unscheduled: u32, ahead: u32) -> Self {
        Self::reuse(Vec::new(), h, unscheduled, ahead)
    }

    /// [`Incoming::new`] in the storage of a finished one (see
    /// [`Incoming::recycle`]).
    pub(crate) fn reuse(
        mut segments: Vec<(u32, SegmentBuf)>,
        h: &DataHeader,
        unscheduled: u32,
        ahead: u32,
    ) -> Self {
        segments.clear();
        Self {
            message_len: h.message_len,
            wire_len: h.message_wire_len,
            segments,
            next_segment: 0,
            next_record: 0,
            padded: 0,
            data: Vec::new(),
            filled: 0,
            received: 0,
            granted: unscheduled.min(h.message_wire_len),
            ahead: ahead.max(unscheduled.saturating_add(MAX_SEGMENT_LEN as u32)),
            held: MESSAGE_OVERHEAD,
            whole: false,
            decrypted: false,
        }
    }

    pub(crate) fn wire_len(&self) -> u32 {
        self.wire_len
    }

    pub(crate) fn granted(&self) -> u32 {
        self.granted
    }

    pub(crate) fn received(&self) -> u64 {
        self.received
    }

    /// Wire bytes still to arrive: the SRPT key for grants.
    pub(crate) fn remaining(&self) -> u64 {
        u64::from(self.wire_len) - self.received
    }

    /// Wire bytes authenticated so far (opened in order).
    pub(crate) fn authenticated_bytes(&self) -> u32 {
        self.next_segment
    }

    /// Bytes held: reassembly buffers, data opened so far (its capacity)
    /// and bookkeeping. Kept as a running total, so this is O(1).
    pub(crate) fn buffered_bytes(&self) -> usize {
        self.held
    }

    /// The bytes accepting `h` would allocate: a new segment buffer, or
    /// nothing if its segment is already being reassembled.
    /// A packet that is the whole message goes straight into a data
    /// buffer from the pool instead (`accept_whole`): that buffer's
    /// capacity.
    pub(crate) fn allocation_for(&self, h: &DataHeader) -> usize {
        if self.is_whole(h, h.payload_len()) {
            return match self.whole || self.received > 0 {
                true => 0,
                false => capacity_for(self.wire_len as usize),
            };
        }
        match self.segment_at(h.segment_offset).is_ok() {
            true => 0,
            false => segment_cost(h.segment_len, h.mss),
        }
    }

    /// Raises the grant to `offset` (clamped to the message); returns
    /// whether it grew. Grants run at most `ahead` bytes past the
    /// authenticated prefix: bytes received but never authenticated (e.g.
    /// an attacker's, who claims a huge length and never completes the
    /// first segment) earn grants only that far, so a message holds at most
    /// `ahead` plus one segment unauthenticated.
    pub(crate) fn raise_grant(&mut self, offset: u64) -> bool {
        let ceiling = u64::from(self.next_segment) + u64::from(self.ahead);
        let offset = offset.min(ceiling).min(u64::from(self.wire_len)) as u32;
        if offset > self.granted {
            self.granted = offset;
            true
        } else {
            false
        }
    }

    /// Stores one DATA packet's payload. The sender may only send what it
    /// was granted, so anything beyond the grant is refused: that bounds
    /// reassembly memory whatever lengths a forged header claims.
    /// `decrypted`: the NIC decrypted the payload and checked the tags
    /// that end in it (receive offload).
    pub(crate) fn accept(
        &mut self,
        h: &DataHeader,
        payload: &[u8],
        decrypted: bool,
        pool: &mut BufferPool,
    ) -> Result<(), DropReason> {
        if h.message_len != self.message_len || h.message_wire_len != self.wire_len {
            return Err(DropReason::ProtocolViolation);
        }
        if h.wire_offset() >= u64::from(self.granted) {
            return Err(DropReason::OverLimit);
        }
        if h.segment_offset < self.next_segment {
            return Err(DropReason::Duplicate);
        }
        if self.is_whole(h, payload.len()) {
            return self.accept_whole(payload, decrypted, pool);
        }
        self.check_fits(h)?;
        self.held += self.allocation_for(h);
        self.store_packet(h, payload, decrypted, pool)
    }

    /// Copies a packet that fits (`check_fits`, its memory counted) into
    /// its segment, made if it is the segment's first.
    #[inline]
    fn store_packet(
        &mut self,
        h: &DataHeader,
        payload: &[u8],
        decrypted: bool,
        pool: &mut BufferPool,
    ) -> Result<(), DropReason> {
        let at = match self.segment_at(h.segment_offset) {
            Ok(at) => at,
            Err(at) => {
                let seg = SegmentBuf::new(h, pool);
                self.segments.insert(at, (h.segment_offset, seg));
                at
            }
        };
        let seg = &mut self.segments[at].1;
        let index = usize::from(h.packet_index);
        if seg.have[index] != 0 {
            return Err(DropReason::Duplicate);
        }
        let at = index * usize::from(seg.mss);
        seg.buf[at..at + payload.len()].copy_from_slice(payload);
        seg.have[index] = 1 + u8::from(decrypted);
        self.decrypted |= decrypted;
        seg.missing -= 1;
        self.received += payload.len() as u64;
        Ok(())
    }

    /// Whether this packet carries the whole message (one segment of one
    /// packet, nothing received yet): the common case of a small RPC.
    fn is_whole(&self, h: &DataHeader, len: usize) -> bool {
        h.segment_offset == 0
            && h.segment_len == self.wire_len
            && len == self.wire_len as usize
            && self.segments.is_empty()
    }

    /// Keeps a whole-message packet in `data` itself, to be opened in
    /// place by `open_ready`.
    fn accept_whole(
        &mut self,
        payload: &[u8],
        decrypted: bool,
        pool: &mut BufferPool,
    ) -> Result<(), DropReason> {
        if self.whole || self.received > 0 {
            return Err(DropReason::Duplicate);
        }
        let cap = self.data.capacity();
        if cap == 0 {
            self.data = pool.take(payload.len());
        }
        self.data.clear();
        self.data.extend_from_slice(payload);
        self.held += self.data.capacity() - cap;
        self.received = payload.len() as u64;
        self.whole = true;
        self.decrypted = decrypted;
        Ok(())
    }

    /// Opens a whole message kept by `accept_whole`, in place.
    fn open_whole(
        &mut self,
        cipher: &dyn PacketCipher,
        layout: SeqLayout,
        id: u64,
        opened: &mut u64,
        offloaded: &mut OffloadTally,
    ) -> Result<Accepted, DropReason> {
        self.whole = false;
        let result = match self.decrypted {
            false => open_segment_in_place(cipher, layout, id, 0, &mut self.data),
            true => open_decrypted_in_place(layout, id, 0, &mut self.data).inspect(|o| {
                offloaded.whole += o.records;
            }),
        };
        match result {
            Ok(o) => {
                *opened += o.records;
                self.filled = self.data.len();
                self.next_segment = self.wire_len;
                self.next_record = o.records;
                self.padded = o.padded_len;
            }
            Err(e) => {
                *opened += 1;
                // Cleared: a retransmission can replace it.
                self.received = 0;
                return Err(open_error_reason(e));
            }
        }
        if self.padded == u64::from(self.message_len) {
            Ok(Accepted::Complete)
        } else {
            Err(DropReason::ProtocolViolation)
        }
    }

    /// A packet's segment must be the one already known at its offset, or
    /// fit between its neighbours.
    fn check_fits(&self, h: &DataHeader) -> Result<(), DropReason> {
        let at = match self.segment_at(h.segment_offset) {
            Ok(at) => {
                let seg = &self.segments[at].1;
                let same = seg.len == h.segment_len && seg.mss == h.mss;
                return if same {
                    Ok(())
                } else {
                    Err(DropReason::ProtocolViolation)
                };
            }
            Err(at) => at,
        };
        let end = h.segment_offset + h.segment_len;
        let prev_ok = at
            .checked_sub(1)
            .map(|i| &self.segments[i])
            .is_none_or(|(o, s)| o + s.len <= h.segment_offset);
        let next_ok = self.segments.get(at).is_none_or(|(o, _)| *o >= end);
        if prev_ok && next_ok {
            Ok(())
        } else {
            Err(DropReason::ProtocolViolation)
        }
    }

    /// Opens every segment that is complete and next in order. Returns
    /// `Complete` once the whole message is authenticated. Records opened are
    /// added to `*opened`. A segment that fails is discarded so a
    /// retransmission can replace it. `spare` is how many more bytes the
    /// caller's memory bounds allow the data buffer to take ahead of need.
    /// Records the NIC decrypted are counted in `offloaded`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open_ready(
        &mut self,
        cipher: &dyn PacketCipher,
        layout: SeqLayout,
        id: u64,
        opened: &mut u64,
        offloaded: &mut OffloadTally,
        spare: usize,
        pool: &mut BufferPool,
    ) -> Result<Accepted, DropReason> {
        if self.whole {
            return self.open_whole(cipher, layout, id, opened, offloaded);
        }
        while let Some(seg) = self.take_next_complete() {
            self.open_next_segment(seg, (cipher, layout, id), opened, offloaded, spare, pool)?;
        }
        if self.next_segment < self.wire_len {
            return Ok(Accepted::Stored);
        }
        if self.padded == u64::from(self.message_len) {
            Ok(Accepted::Complete)
        } else {
            Err(DropReason::ProtocolViolation)
        }
    }

    /// Opens the next complete segment into `data` (after growing it),
    /// under `cipher` as message `id`'s; a segment that fails is dropped
    /// so that a retransmission can replace it.
    #[inline]
    fn open_next_segment(
        &mut self,
        mut seg: SegmentBuf,
        (cipher, layout, id): (&dyn PacketCipher, SeqLayout, u64),
        opened: &mut u64,
        offloaded: &mut OffloadTally,
        spare: usize,
        pool: &mut BufferPool,
    ) -> Result<(), DropReason> {
        *opened += 1;
        self.held -= segment_cost(seg.len, seg.mss);
        self.grow_data(seg.len as usize, spare, pool);
        let room = &mut self.data[self.filled..self.filled + seg.len as usize];
        let c = (cipher, layout, id, self.next_record);
        let result = decrypt_segment(&mut seg, self.decrypted, c, room, offloaded);
        let seg_len = seg.len;
        seg.recycle(pool);
        let (o, written) = result.map_err(|e| {
            self.received -= u64::from(seg_len);
            open_error_reason(e)
        })?;
        self.filled += written;
        *opened += o.records.saturating_sub(1);
        self.next_segment += seg_len;
        self.next_record += o.records;
        self.padded += o.padded_len;
        // The records carry exactly the message length: more is a lie,
        // and reaching it before the last wire byte means the plaintext
        // length fields disagree (e.g. a tampered wire length).
        let len = u64::from(self.message_len);
        if self.padded > len || (self.padded == len && self.next_segment != self.wire_len) {
            return Err(DropReason::ProtocolViolation);
        }
        Ok(())
    }

    /// Makes room for `more` plaintext bytes after `filled` (a segment's
    /// wire length bounds its plaintext), initialised so records open
    /// straight into it. Capacity doubles, as a `Vec`'s would, but never
    /// past the message length and never by more than `spare`: then it
    /// grows to exactly what is needed.
    fn grow_data(&mut self, more: usize, spare: usize, pool: &mut BufferPool) {
        let needed = self.filled + more;
        self.reserve_data(needed, spare, pool);
        if self.data.len() < needed {
            // Zeros only where no earlier message of this buffer reached.
            self.data.resize(needed, 0);
        }
    }

    /// [`Incoming::grow_data`]'s capacity: at least `needed` bytes.
    fn reserve_data(&mut self, needed: usize, spare: usize, pool: &mut BufferPool) {
        let (len, cap) = (self.filled, self.data.capacity());
        if needed <= cap {
            return;
        }
        // A first buffer from the pool when its size class stays within
        // what the bounds allow (the class may round up to twice what is
        // asked). Once a segment has authenticated, the claimed length is
        // the word of a key holder: room for the whole message then, from
        // the pool too, so a large message fills one reused buffer instead
        // of growing (and faulting in) fresh ones. Before that, only what
        // the segment needs: its records may be forged.
        let want = match len > 0 {
            true => (self.message_len as usize).max(needed),
            false => needed,
        };
        if pooled_capacity(want).is_some_and(|cap| cap - needed <= spare) {
            let mut buf = pool.take_filled(want);
            buf[..len].copy_from_slice(&self.data[..len]);
            let old = std::mem::replace(&mut self.data, buf);
            self.held = self.held - old.capacity() + self.data.capacity();
            pool.give(old);
            return;
        }
        let doubled = (cap * 2).min(self.message_len as usize);
        let target = match doubled > needed && doubled - needed <= spare {
            true => doubled,
            false => needed,
        };
        self.data.truncate(len);
        self.data.reserve_exact(target - len);
        self.held += self.data.capacity() - cap;
    }

    /// Where the segment at wire offset `offset` is (`Ok`), or would go.
    fn segment_at(&self, offset: u32) -> Result<usize, usize> {
        self.segments.binary_search_by_key(&offset, |(o, _)| *o)
    }

    fn take_next_complete(&mut self) -> Option<SegmentBuf> {
        // Segments open in order, so the next one is the first.
        let (offset, seg) = self.segments.first()?;
        if *offset == self.next_segment && seg.is_complete() {
            Some(self.segments.remove(0).1)
        } else {
            None
        }
    }

    /// The index of the record that starts at `wire_offset`, for a NIC's
    /// resync request: from what was opened, or by walking the record
    /// headers (plaintext) of the segments received since, which SMT's
    /// segments make possible past a gap a byte stream could not see
    /// beyond. `Err(true)`: not known yet (a segment or a header before it
    /// is missing); `Err(false)`: no record starts there, or it lies in
    /// what was opened already.
    ///
    /// The answer only steers the NIC: a wrong one (from forged headers)
    /// makes it decrypt under the wrong sequence number, whose tags fail,
    /// and the records are opened in software.
    pub(crate) fn record_index_at(&self, wire_offset: u64) -> Result<u64, bool> {
        if wire_offset < u64::from(self.next_segment) || wire_offset >= u64::from(self.wire_len) {
            return Err(false);
        }
        self.walk_to(wire_offset)
    }

    /// Counts records from the next unopened segment up to `target`
    /// through the segments held, reading their record headers.
    fn walk_to(&self, target: u64) -> Result<u64, bool> {
        let (mut at, mut index) = (u64::from(self.next_segment), self.next_record);
        for (offset, seg) in &self.segments {
            if u64::from(*offset) != at {
                return Err(true);
            }
            let mut read = 0usize;
            while read < seg.len as usize {
                if at + read as u64 == target {
                    return Ok(index);
                }
                if at + read as u64 > target {
                    return Err(false);
                }
                let len = seg.record_len_at(read).ok_or(true)?;
                read += len;
                index += 1;
            }
            at += u64::from(seg.len);
        }
        match at == target {
            true => Ok(index),
            false => Err(true),
        }
    }

    /// The delivered data (after `Complete`).
    /// Whether no segment has been authenticated yet: the message's
    /// lengths then come only from plaintext headers anyone can forge.
    pub(crate) fn nothing_authenticated(&self) -> bool {
        self.next_segment == 0
    }

    /// Hands every buffer still held to `pool` (a message dropped or
    /// delivered: then only the reassembly leftovers remain) and returns
    /// the segment list's storage for [`Incoming::reuse`].
    /// Gives its buffers back to `pool` and hands out its (empty) segment
    /// list; what is left holds no memory.
    #[inline]
    pub(crate) fn recycle(&mut self, pool: &mut BufferPool) -> Vec<(u32, SegmentBuf)> {
        pool.give(std::mem::take(&mut self.data));
        // Most messages are one packet and never had a segment: an empty
        // `drain` still costs its set-up and drop (~25 instructions).
        if !self.segments.is_empty() {
            for (_, seg) in self.segments.drain(..) {
                seg.recycle(pool);
            }
        }
        std::mem::take(&mut self.segments)
    }

    pub(crate) fn take_data(&mut self) -> Vec<u8> {
        self.held -= self.data.capacity();
        self.data.truncate(self.filled);
        self.filled = 0;
        std::mem::take(&mut self.data)
    }

    /// Up to `max_ranges` missing wire ranges below the grant, adjacent
    /// ones merged, each at most `max_len` bytes: what RESENDs ask for.
    pub(crate) fn gaps(&self, max_ranges: usize, max_len: u32) -> Vec<(u32, u32)> {
        let mut out: Vec<(u32, u32)> = Vec::new();
        let mut push = |start: u32, len: u32| match out.last_mut() {
            Some((s, l)) if *s + *l == start && *l + len <= max_len => *l += len,
            _ => out.push((start, len.min(max_len))),
        };
        let mut pos = self.next_segment;
        for &(off, ref seg) in &self.segments {
            if off > pos {
                push(pos, off - pos);
            }
            for (start, len) in seg.gaps() {
                push(off + start, len);
            }
            pos = off + seg.len;
        }
        if pos < self.granted {
            push(pos, self.granted - pos);
        }
        out.truncate(max_ranges);
        out
    }
}
