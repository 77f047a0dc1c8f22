//! Receive offload after NVIDIA's kTLS offload paper ("TLS RX Offload path", "Partial
//! decryption", "Resynchronization"): a receive context decrypts the
//! packets of its flow that arrive in order and marks them; a packet out of
//! order makes it stop and hand packets up as they came, until it finds
//! what looks like a record header at a packet's start, follows the
//! framing from there and asks the host for that record's sequence number
//! (a *resync request*); the host's answer (the *confirmation*) puts it
//! back in sync from the next record it sees whole.
//!
//! The engine knows nothing of SMT. The host's parser tells it where each
//! packet lies ([`StreamPos`]): for TLS over TCP one stream per flow and
//! the TCP sequence number; for SMT the message ID (a stream of its own,
//! the SMT paper §4.4) and the wire offset in the message.
//!
//! A packet is marked decrypted only when every TLS byte in it was
//! decrypted and every tag that ends in it verified; a record all of whose
//! packets are marked has been authenticated by the engine. A packet that
//! holds a tag that fails, or bytes the engine only skipped, is handed up
//! exactly as it arrived. A record whose packets came partly decrypted and
//! partly not is software's to finish (the kTLS offload paper's partial decryption).

use std::collections::HashMap;
use std::fmt;

use crate::counters::RxCounters;
use crate::crypto_info::CryptoInfo;
use crate::gcm::{GcmStream, RecordCipher, TAG_LEN};
use crate::record::{RecordHeader, HEADER_LEN};

/// A receive context's slot.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RxContextId(pub u32);

impl fmt::Debug for RxContextId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RxContextId({:#x})", self.0)
    }
}

/// Where a packet's payload starts: which byte stream of the flow, and at
/// which byte of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamPos {
    /// The stream (TCP: always the same; SMT: the message ID).
    pub stream: u64,
    /// Bytes of the stream before the packet's first byte.
    pub pos: u64,
}

/// What the engine did with one received packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RxVerdict {
    /// The payload now holds plaintext (record headers and tags as they
    /// came), every record byte in it decrypted and every tag ending in it
    /// verified.
    pub decrypted: bool,
    /// The engine asks the host for the sequence number of the record that
    /// starts at this position ([`RxEngine::confirm`]).
    pub resync_request: Option<StreamPos>,
}

/// Why a context could not be created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RxCreateError {
    /// The slot holds a context.
    InUse,
    /// The table is full; the host must destroy one first.
    Full,
}

/// The receive side of the NIC: a bounded table of receive contexts,
/// applied to packets one at a time on the caller's thread (the host's
/// receive path calls it before its own processing, as a NIC has done its
/// work before the driver sees the completion).
#[derive(Debug)]
pub struct RxEngine {
    capacity: usize,
    contexts: HashMap<RxContextId, RxContext>,
    counters: RxCounters,
    /// The packet as it is being decrypted: it replaces the payload only
    /// if the whole packet passed.
    scratch: Vec<u8>,
}

#[derive(Debug)]
struct RxContext {
    cipher: RecordCipher,
    state: State,
}

/// Where a receive context stands.
#[derive(Debug)]
enum State {
    /// Decrypting: the next packet must start at `at`.
    Synced { at: StreamPos, record: Record },
    /// Out of sync, looking for a packet that starts with a record header.
    Searching,
    /// Following the records from a candidate header at `from` without
    /// decrypting, while the host is asked for its sequence number.
    Tracking {
        from: StreamPos,
        at: StreamPos,
        /// Records begun since `from` (the one at `from` is 0).
        records: u64,
        frame: Frame,
    },
}

/// The record being read, with its sequence number known.
#[derive(Debug)]
enum Record {
    /// At or inside its header.
    Header {
        seq: u64,
        have: [u8; HEADER_LEN],
        len: usize,
    },
    /// Inside its body.
    Body(Body),
}

#[derive(Debug)]
struct Body {
    seq: u64,
    header: RecordHeader,
    /// Body bytes passed so far.
    done: usize,
    /// How the ciphertext is handled: decrypted, or skipped (the record
    /// began before the context was in sync).
    crypt: Option<GcmStream>,
    tag: [u8; TAG_LEN],
}

/// Record framing without the sequence number: where the next header
/// starts, and the current record's body bytes so far, so that once the
/// host names the record the rest of it can be decrypted and its tag
/// checked (AES-CTR needs only the position; the tag covers the
/// ciphertext, kept here).
#[derive(Debug)]
enum Frame {
    Header {
        have: [u8; HEADER_LEN],
        len: usize,
    },
    Body {
        header: RecordHeader,
        left: usize,
        seen: Vec<u8>,
    },
}

/// How one packet went through a synced context.
#[derive(Default)]
struct Pass {
    /// Every TLS byte decrypted and every tag verified so far.
    clean: bool,
    /// The framing broke: the context is out of sync.
    lost: bool,
}

impl RxEngine {
    /// An engine with room for `capacity` receive contexts.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            contexts: HashMap::new(),
            counters: RxCounters::default(),
            scratch: Vec::new(),
        }
    }

    /// Installs a receive context. With `start`, the host knows that a
    /// record with sequence number `info.rec_seq()` begins there (kTLS's
    /// set-up gives the TCP sequence number and the record number);
    /// without, the context starts out of sync and finds its place by
    /// resync requests.
    pub fn create(
        &mut self,
        ctx: RxContextId,
        info: &CryptoInfo,
        start: Option<StreamPos>,
    ) -> Result<(), RxCreateError> {
        if self.contexts.contains_key(&ctx) {
            return Err(RxCreateError::InUse);
        }
        if self.contexts.len() >= self.capacity {
            return Err(RxCreateError::Full);
        }
        let state = match start {
            Some(at) => State::Synced {
                at,
                record: record_start(info.rec_seq()),
            },
            None => State::Searching,
        };
        let cipher = RecordCipher::new(info);
        self.contexts.insert(ctx, RxContext { cipher, state });
        self.counters.rx_tls_ctx += 1;
        Ok(())
    }

    /// Frees a context; returns whether it existed.
    pub fn destroy(&mut self, ctx: RxContextId) -> bool {
        let existed = self.contexts.remove(&ctx).is_some();
        self.counters.rx_tls_del += u64::from(existed);
        existed
    }

    /// Runs one received packet's TLS payload through context `ctx`:
    /// decrypts it in place if it continues the context's stream and
    /// everything in it checks out, else leaves it as it came. A packet for
    /// a slot without a context passes untouched. Work bounded by the
    /// packet (and one record's tag check).
    pub fn receive(&mut self, ctx: RxContextId, at: StreamPos, payload: &mut [u8]) -> RxVerdict {
        let Some(context) = self.contexts.get_mut(&ctx) else {
            return RxVerdict::default();
        };
        context.receive(at, payload, &mut self.scratch, &mut self.counters)
    }

    /// The host's answer to a resync request: the record at `from` has
    /// sequence number `seq`. Returns whether the context took it (it was
    /// still following the records from `from`).
    pub fn confirm(&mut self, ctx: RxContextId, from: StreamPos, seq: u64) -> bool {
        self.counters.rx_tls_resync_req_end += 1;
        let taken = self
            .contexts
            .get_mut(&ctx)
            .is_some_and(|c| c.confirm(from, seq));
        match taken {
            true => self.counters.rx_tls_resync_res_ok += 1,
            false => self.counters.rx_tls_resync_res_skip += 1,
        }
        taken
    }

    /// The host gives up on a resync request (it cannot tell the record's
    /// sequence number); the context goes on looking.
    pub fn abandon(&mut self, ctx: RxContextId, from: StreamPos) {
        self.counters.rx_tls_resync_req_skip += 1;
        if let Some(c) = self.contexts.get_mut(&ctx) {
            if matches!(c.state, State::Tracking { from: f, .. } if f == from) {
                c.state = State::Searching;
            }
        }
    }

    /// Counters so far.
    pub fn counters(&self) -> RxCounters {
        self.counters
    }

    /// Contexts installed now.
    pub fn contexts_live(&self) -> usize {
        self.contexts.len()
    }
}

impl RxContext {
    fn receive(
        &mut self,
        at: StreamPos,
        payload: &mut [u8],
        scratch: &mut Vec<u8>,
        counters: &mut RxCounters,
    ) -> RxVerdict {
        if payload.is_empty() {
            return RxVerdict::default();
        }
        match &mut self.state {
            State::Synced { at: expected, .. } if *expected == at => {
                self.decrypt(at, payload, scratch, counters)
            }
            State::Synced { at: expected, .. } | State::Tracking { at: expected, .. }
                if is_old(*expected, at) =>
            {
                // A copy of something already passed (a retransmission):
                // handed up as it came, the context stays where it is.
                RxVerdict::default()
            }
            State::Tracking { at: expected, .. } if *expected == at => {
                self.track(at, payload, counters);
                RxVerdict::default()
            }
            State::Synced { .. } => {
                counters.rx_tls_ooo += 1;
                self.search(at, payload, counters)
            }
            State::Tracking { .. } => {
                counters.rx_tls_ooo += 1;
                counters.rx_tls_resync_req_skip += 1;
                self.search(at, payload, counters)
            }
            State::Searching => self.search(at, payload, counters),
        }
    }

    /// Decrypts a packet that continues the stream; it replaces the
    /// payload only if it passed whole.
    fn decrypt(
        &mut self,
        at: StreamPos,
        payload: &mut [u8],
        scratch: &mut Vec<u8>,
        counters: &mut RxCounters,
    ) -> RxVerdict {
        scratch.clear();
        scratch.extend_from_slice(payload);
        let State::Synced { record, .. } = &mut self.state else {
            return RxVerdict::default();
        };
        let mut pass = Pass {
            clean: true,
            lost: false,
        };
        let mut rest = &mut scratch[..];
        while !rest.is_empty() && !pass.lost {
            let used = step(&self.cipher, record, rest, &mut pass, counters);
            rest = &mut rest[used..];
        }
        if pass.lost {
            counters.rx_tls_err += 1;
            self.state = State::Searching;
            return RxVerdict::default();
        }
        let next = StreamPos {
            stream: at.stream,
            pos: at.pos + payload.len() as u64,
        };
        if let State::Synced { at, .. } = &mut self.state {
            *at = next;
        }
        if !pass.clean {
            return RxVerdict::default();
        }
        payload.copy_from_slice(scratch);
        counters.rx_tls_decrypted_packets += 1;
        counters.rx_tls_decrypted_bytes += payload.len() as u64;
        RxVerdict {
            decrypted: true,
            resync_request: None,
        }
    }

    /// Out of sync: a packet that starts with a plausible record header
    /// becomes the candidate, and the host is asked about it.
    fn search(&mut self, at: StreamPos, payload: &[u8], counters: &mut RxCounters) -> RxVerdict {
        self.state = State::Searching;
        let Some(head) = payload.first_chunk::<HEADER_LEN>() else {
            return RxVerdict::default();
        };
        if RecordHeader::parse(*head).is_err() {
            return RxVerdict::default();
        }
        self.state = State::Tracking {
            from: at,
            at,
            records: 0,
            frame: Frame::Header {
                have: [0; HEADER_LEN],
                len: 0,
            },
        };
        self.track(at, payload, counters);
        counters.rx_tls_resync_req_pkt += 1;
        RxVerdict {
            decrypted: false,
            resync_request: Some(at),
        }
    }

    /// Follows the framing through a packet without decrypting it.
    fn track(&mut self, at: StreamPos, payload: &[u8], counters: &mut RxCounters) {
        let State::Tracking {
            at: expected,
            records,
            frame,
            ..
        } = &mut self.state
        else {
            return;
        };
        let mut rest = payload;
        while !rest.is_empty() {
            match frame_step(frame, records, rest) {
                Some(used) => rest = &rest[used..],
                None => {
                    counters.rx_tls_err += 1;
                    counters.rx_tls_resync_req_skip += 1;
                    self.state = State::Searching;
                    return;
                }
            }
        }
        *expected = StreamPos {
            stream: at.stream,
            pos: at.pos + payload.len() as u64,
        };
    }

    /// The host says the record at `from` has sequence number `seq`.
    fn confirm(&mut self, from: StreamPos, seq: u64) -> bool {
        let state = std::mem::replace(&mut self.state, State::Searching);
        let State::Tracking {
            from: f,
            at,
            records,
            frame,
        } = state
        else {
            self.state = state;
            return false;
        };
        if f != from {
            self.state = State::Tracking {
                from: f,
                at,
                records,
                frame,
            };
            return false;
        }
        let seq = seq.wrapping_add(records);
        let record = match frame {
            Frame::Header { have, len } => Record::Header { seq, have, len },
            // Part of this record has gone by undecrypted; its rest is
            // decrypted from here and its tag checked over everything
            // seen. The packets that went by stay as they were: software
            // finishes the record.
            Frame::Body { header, seen, .. } => {
                Record::Body(Body::resumed(&self.cipher, seq, header, seen))
            }
        };
        self.state = State::Synced { at, record };
        true
    }
}

/// Whether `at` lies before `expected` in the same stream: a copy of bytes
/// the context has passed.
fn is_old(expected: StreamPos, at: StreamPos) -> bool {
    at.stream == expected.stream && at.pos < expected.pos
}

/// The state at the first byte of record `seq`.
fn record_start(seq: u64) -> Record {
    Record::Header {
        seq,
        have: [0; HEADER_LEN],
        len: 0,
    }
}

/// Consumes the front of `buf` for the current record; returns the bytes
/// used.
fn step(
    cipher: &RecordCipher,
    record: &mut Record,
    buf: &mut [u8],
    pass: &mut Pass,
    counters: &mut RxCounters,
) -> usize {
    match record {
        Record::Header { seq, have, len } => {
            if *len == 0 {
                if let Some(used) = whole_record(cipher, *seq, buf, pass, counters) {
                    *record = record_start(seq.wrapping_add(1));
                    return used;
                }
            }
            let take = (HEADER_LEN - *len).min(buf.len());
            have[*len..*len + take].copy_from_slice(&buf[..take]);
            *len += take;
            if *len < HEADER_LEN {
                return take;
            }
            let Ok(header) = RecordHeader::parse(*have) else {
                pass.lost = true;
                return take;
            };
            let mut stream = cipher.start(*seq, header.bytes());
            stream.reserve(header.body_len());
            *record = Record::Body(Body {
                seq: *seq,
                header,
                done: 0,
                crypt: Some(stream),
                tag: [0; TAG_LEN],
            });
            take
        }
        Record::Body(body) => {
            let used = body.step(cipher, buf, pass, counters);
            if body.done == body.header.body_len() {
                *record = record_start(body.seq.wrapping_add(1));
            }
            used
        }
    }
}

/// Opens the record at the front of `buf` if all of it is there (the
/// common case when records are smaller than packets).
fn whole_record(
    cipher: &RecordCipher,
    seq: u64,
    buf: &mut [u8],
    pass: &mut Pass,
    counters: &mut RxCounters,
) -> Option<usize> {
    let head = buf.first_chunk::<HEADER_LEN>()?;
    let header = RecordHeader::parse(*head).ok()?;
    let end = HEADER_LEN + header.body_len();
    if buf.len() < end {
        return None;
    }
    if !cipher.open_whole(seq, header.bytes(), &mut buf[HEADER_LEN..end]) {
        counters.rx_tls_err += 1;
        pass.clean = false;
    }
    Some(end)
}

impl Body {
    /// A record whose first body bytes (`seen`) went by before its
    /// sequence number was known.
    fn resumed(cipher: &RecordCipher, seq: u64, header: RecordHeader, seen: Vec<u8>) -> Self {
        let text_len = header.text_len();
        let text = seen.len().min(text_len);
        let mut tag = [0; TAG_LEN];
        tag[..seen.len() - text].copy_from_slice(&seen[text..]);
        let done = seen.len();
        let mut text_bytes = seen;
        text_bytes.truncate(text);
        Self {
            seq,
            header,
            done,
            crypt: Some(cipher.resume(seq, header.bytes(), text_bytes)),
            tag,
        }
    }

    /// Body bytes: ciphertext decrypted (or skipped), then the tag
    /// collected and checked.
    fn step(
        &mut self,
        cipher: &RecordCipher,
        buf: &mut [u8],
        pass: &mut Pass,
        counters: &mut RxCounters,
    ) -> usize {
        let text_len = self.header.text_len();
        let n = (self.header.body_len() - self.done).min(buf.len());
        let text = text_len.saturating_sub(self.done).min(n);
        match &mut self.crypt {
            Some(stream) => stream.decrypt(cipher, &mut buf[..text]),
            // Skipped ciphertext: the packet holds bytes nobody decrypted.
            None if text > 0 => pass.clean = false,
            None => {}
        }
        // Tag bytes follow the text; `at` is where they go in the tag.
        let tag_bytes = &buf[text..n];
        let at = (self.done + text).saturating_sub(text_len);
        self.tag[at..at + tag_bytes.len()].copy_from_slice(tag_bytes);
        self.done += n;
        if self.done == self.header.body_len() {
            self.check_tag(cipher, pass, counters);
        }
        n
    }

    /// At the record's end: a tag that fails leaves the packet holding it
    /// undecrypted, so software sees a record it must finish itself (and
    /// will refuse).
    fn check_tag(&mut self, cipher: &RecordCipher, pass: &mut Pass, counters: &mut RxCounters) {
        match self.crypt.take() {
            Some(stream) => {
                if !stream.verify(cipher, &self.tag) {
                    counters.rx_tls_err += 1;
                    pass.clean = false;
                }
            }
            // A skipped record: its tag passes through unchecked, so the
            // packet cannot claim to be authenticated.
            None => pass.clean = false,
        }
    }
}

/// Advances record framing over the front of `buf`; `None` if bytes where
/// a header was due are not one.
fn frame_step(frame: &mut Frame, records: &mut u64, buf: &[u8]) -> Option<usize> {
    match frame {
        Frame::Header { have, len } => {
            let take = (HEADER_LEN - *len).min(buf.len());
            have[*len..*len + take].copy_from_slice(&buf[..take]);
            *len += take;
            if *len == HEADER_LEN {
                let header = RecordHeader::parse(*have).ok()?;
                *frame = Frame::Body {
                    header,
                    left: header.body_len(),
                    seen: Vec::with_capacity(header.body_len()),
                };
            }
            Some(take)
        }
        Frame::Body { left, seen, .. } => {
            let take = (*left).min(buf.len());
            seen.extend_from_slice(&buf[..take]);
            *left -= take;
            if *left == 0 {
                *records += 1;
                *frame = Frame::Header {
                    have: [0; HEADER_LEN],
                    len: 0,
                };
            }
            Some(take)
        }
    }
}
