//! The state of one handshake in progress: the two byte streams (ours
//! sent and acknowledged, the peer's reassembled in order), the keys a
//! responder holds until the peer proves its address, datagrams that came
//! early, and the HANDSHAKE packet that carries a chunk of the stream.
//! What the endpoint does with it is `handshake.rs`.

use super::reorder::{Reassembly, WINDOW_COST};
use crate::config::Config;
use crate::endpoint::peer::{Budget, PeerState};
use crate::endpoint::peers::PeerId;
use crate::endpoint::tick::is_resend_tick;
use crate::error::DropReason;
use crate::handshake::Handshake;
use crate::SessionKeys;
use std::collections::VecDeque;
use std::net::SocketAddr;

use crate::wire::{
    Body, HandshakeKind, Packet, Repr, COMMON_HEADER_LEN, HANDSHAKE_RETRY, HANDSHAKE_TOKEN,
};

/// HANDSHAKE header length (common header + offset, ack, len, kind).
pub(super) const HEADER_LEN: usize = COMMON_HEADER_LEN + 12;
/// Bytes of a stream's opening remembered to recognise a new handshake.
const OPENING: usize = 64;
/// Out-of-order handshake bytes all handshakes may hold at once (each
/// handshake's window is `reorder::WINDOW_COST`): past it a chunk that
/// would open another window is dropped, and its sender sends it again
/// once the bytes before it have arrived (they are not acknowledged).
/// 128 windows (4.5 MiB): genuine handshakes rarely reorder at all.
pub(super) const MAX_REORDER_TOTAL: usize = 128 * WINDOW_COST;

/// What a chunk of the peer's stream gave ([`HandshakeConn::take_chunk`]):
/// the bytes now in order, and what the reorder window held before and
/// after.
pub(super) struct Taken {
    pub(super) bytes: Vec<u8>,
    pub(super) held_before: usize,
    pub(super) held_after: usize,
}

/// The HANDSHAKE header of a packet, parsed.
#[derive(Clone, Copy)]
pub(super) struct Chunk {
    pub(super) offset: u32,
    pub(super) ack: u32,
    pub(super) kind: HandshakeKind,
    pub(super) flags: u8,
}

impl Chunk {
    pub(super) fn parse(packet: &Packet<&[u8]>) -> Result<Self, DropReason> {
        let repr = Repr::parse(packet).map_err(|_| DropReason::Malformed)?;
        match repr.body {
            Body::Handshake {
                offset,
                ack,
                kind,
                flags,
                ..
            } => Ok(Self {
                offset,
                ack,
                kind,
                flags,
            }),
            _ => Err(DropReason::Malformed),
        }
    }

    /// The payload's retry token (only in front of the stream's first
    /// bytes) and the stream bytes after it.
    pub(super) fn split_token<'a>(
        &self,
        payload: &'a [u8],
    ) -> Result<(Option<&'a [u8]>, &'a [u8]), DropReason> {
        match self.flags & HANDSHAKE_TOKEN != 0 {
            true if self.offset == 0 => {
                let (t, rest) = super::retry::split_token(payload).ok_or(DropReason::Malformed)?;
                Ok((Some(t), rest))
            }
            true => Err(DropReason::Malformed),
            false => Ok((None, payload)),
        }
    }
}

/// What an opening brings besides its stream bytes.
pub(super) struct Opening<'a> {
    pub(super) kind: HandshakeKind,
    pub(super) token: Option<&'a [u8]>,
    /// The datagram's length (a RETRY must be smaller than three).
    pub(super) received: usize,
}

/// What the handshake said when pumped ([`HandshakeConn::pump`]): the
/// range of our stream it just wrote, and the keys it just gave.
pub(super) struct Pumped {
    pub(super) fresh: (usize, usize),
    pub(super) keys: Option<SessionKeys>,
    pub(super) next: Option<SessionKeys>,
}

/// What a tick asks of a handshake ([`HandshakeConn::tick`]).
pub(super) enum Due {
    /// Not finished within `Config::handshake_deadline_ticks`: it fails.
    PastDeadline,
    /// Silent for `handshake_abort_ticks` before it finished: it fails.
    Silent,
    /// Finished, and quiet for `handshake_abort_ticks`: forgotten (its
    /// session stays).
    Finished,
    /// Our bytes `sent[acked..sent]` are due for retransmission (if the
    /// amplification budget allows).
    Resend {
        acked: usize,
        sent: usize,
    },
    Nothing,
}

/// Where a handshake's amplification budget is (`docs/protocol.md` § 4):
/// QUIC keeps one per connection, and so does SMT per address.
#[derive(Clone, Copy, Debug)]
pub(crate) enum BudgetAt {
    /// The handshake's own: datagram bytes received from, and handshake
    /// bytes sent to, the peer, so that a responder sends at most
    /// `AMPLIFICATION` times what it received. Validated from the start
    /// if the opening carried a valid retry token.
    Own(Budget),
    /// A responder's keys made the session in this slot: it took the
    /// budget over, byte counts and all, and the handshake's late flights
    /// and the session's reactive packets share it. If that session is
    /// gone (replaced, removed), the handshake retransmits nothing more
    /// (its keys went with the session).
    Peer(PeerId),
}

/// One handshake in progress (or just finished, answering late copies).
pub(crate) struct HandshakeConn {
    pub(super) hs: Box<dyn Handshake>,
    pub(super) kind: HandshakeKind,
    /// Everything this side has written, for retransmission.
    pub(super) sent: Vec<u8>,
    /// The peer has received `sent[..acked]`.
    pub(super) acked: u32,
    /// The peer's stream: what the handshake has read of it, and the
    /// bytes waiting for earlier ones (at most one window's worth).
    pub(super) stream: Reassembly,
    pub(super) owe_ack: bool,
    pub(super) silent_ticks: u32,
    /// Handshaking, keys held, or keys installed (with the early
    /// datagrams and held keys that go with each).
    pub(crate) state: PeerState,
    /// This side started the handshake.
    pub(crate) initiator: bool,
    /// Where the amplification budget of the peer's address is: the
    /// handshake's own until its keys make a responder's session, then
    /// that session's (one budget per address, [`BudgetAt`]).
    pub(crate) budget: BudgetAt,
    /// Responder: the opening carried a valid retry token (the peer owns
    /// its address: no amplification limit, no held keys needed). Kept
    /// apart from the budget's validation, which moves with the budget.
    pub(super) with_token: bool,
    /// The first bytes the peer's stream opened with: a packet at offset 0
    /// with other bytes is a new handshake (the peer restarted), not a copy.
    pub(super) opening: Vec<u8>,
    /// Initiator: the token of the responder's RETRY, sent in front of the
    /// stream's first bytes from then on.
    pub(super) retry_token: Option<Vec<u8>>,
    /// The endpoint's tick count when it started (for
    /// `Config::handshake_deadline_ticks` and for choosing whom to
    /// displace from a full table).
    pub(super) started: u64,
}

impl HandshakeConn {
    /// Whether the peer's packets go first in a receive batch on the
    /// handshake's word: its address is vouched for (we opened the
    /// handshake: we chose to talk to that address; or its opening carried
    /// a valid retry token) and, for a responder, it has no keys yet (once
    /// it has, the session says whether the peer used them,
    /// `Peer::proven`).
    pub(crate) fn vouches_for_its_packets(&self) -> bool {
        self.initiator || (self.with_token && !self.keys_installed())
    }

    /// Responder: the opening carried a valid retry token.
    pub(crate) fn opened_with_token(&self) -> bool {
        self.with_token
    }

    /// The keys are installed (the handshake answers late copies only).
    pub(crate) fn keys_installed(&self) -> bool {
        self.state.keys_installed()
    }

    /// Bytes of the peer's stream held out of order.
    pub(crate) fn held_bytes(&self) -> usize {
        self.stream.held_bytes()
    }
}

impl std::fmt::Debug for HandshakeConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandshakeConn")
            .field("kind", &self.kind)
            .field("sent", &self.sent.len())
            .field("acked", &self.acked)
            .field("received", &self.stream.received())
            .field("keys_installed", &self.keys_installed())
            .finish_non_exhaustive()
    }
}

impl HandshakeConn {
    pub(super) fn new(hs: Box<dyn Handshake>, kind: HandshakeKind, started: u64) -> Self {
        Self {
            started,
            hs,
            kind,
            sent: Vec::new(),
            acked: 0,
            stream: Reassembly::default(),
            owe_ack: false,
            silent_ticks: 0,
            state: PeerState::handshaking(),
            initiator: false,
            budget: BudgetAt::Own(Budget::new(false)),
            with_token: false,
            opening: Vec::new(),
            retry_token: None,
        }
    }

    pub(super) fn unacked(&self) -> bool {
        (self.acked as usize) < self.sent.len()
    }

    /// Lets the handshake write what it has to say, and takes the keys it
    /// gives: its first keys once (until they are installed), and the
    /// next epoch's with them or after.
    pub(super) fn pump(&mut self) -> Pumped {
        let start = self.sent.len();
        self.hs.write(&mut self.sent);
        let fresh = (start, self.sent.len());
        let keys = match self.keys_installed() {
            true => None,
            false => self.hs.take_keys(),
        };
        let next = match self.keys_installed() || keys.is_some() {
            true => self.hs.take_next_keys(),
            false => None,
        };
        Pumped { fresh, keys, next }
    }

    /// An initiator's handshake got a RETRY carrying `token`: it opens
    /// again with it, once (a second RETRY, or one after the peer's bytes
    /// arrived, is stale or forged and ignored: `None`). Returns how much
    /// of our stream to send again (all of it).
    pub(super) fn take_retry(&mut self, token: &[u8]) -> Option<usize> {
        let fresh = self.initiator && self.retry_token.is_none() && self.stream.received() == 0;
        if !fresh || token.is_empty() || token.len() > usize::from(u8::MAX) {
            return None;
        }
        self.retry_token = Some(token.to_vec());
        self.silent_ticks = 0;
        self.acked = 0;
        Some(self.sent.len())
    }

    /// Queues HANDSHAKE packets (peer, stream offset, length) carrying
    /// `sent[range]` in `chunk`-byte pieces (a bare ACK when the range is
    /// empty; after a RETRY the first piece also carries the token).
    /// Returns their bytes on the wire, for the amplification budget.
    pub(super) fn queue_bytes(
        &mut self,
        peer: SocketAddr,
        (start, end): (usize, usize),
        chunk: usize,
        queue: &mut VecDeque<(SocketAddr, u32, u16)>,
    ) -> usize {
        let token = self.retry_token.as_ref().map_or(0, |t| 1 + t.len());
        let mut at = start;
        loop {
            let room = match at == 0 {
                true => chunk.saturating_sub(token).max(1),
                false => chunk,
            };
            let len = (end - at).min(room);
            queue.push_back((peer, at as u32, len as u16));
            at += len;
            if at >= end {
                break;
            }
        }
        self.owe_ack = false;
        wire_bytes(end - start, chunk)
    }

    /// One tick passed at tick count `ticks`: what is due. Unacknowledged
    /// bytes are sent again after `resend_ticks`, then after intervals
    /// that double up to eight times that; a handshake silent for
    /// `handshake_abort_ticks` ends.
    pub(super) fn tick(&mut self, ticks: u64, cfg: &Config) -> Due {
        self.silent_ticks += 1;
        let silent = self.silent_ticks;
        let done = self.keys_installed();
        if !done && ticks - self.started >= u64::from(cfg.handshake_deadline_ticks) {
            return Due::PastDeadline;
        }
        if silent >= cfg.handshake_abort_ticks {
            return match done {
                true => Due::Finished,
                false => Due::Silent,
            };
        }
        let resend = cfg.resend_ticks;
        if self.unacked() && is_resend_tick(silent, resend, resend) {
            return Due::Resend {
                acked: self.acked as usize,
                sent: self.sent.len(),
            };
        }
        Due::Nothing
    }

    /// Whether a chunk at `offset` starts the peer's stream over with other
    /// bytes once this handshake has keys: a new handshake (the peer, or a
    /// new peer on the same address, restarted), not a copy.
    pub(super) fn restarted_by(&self, offset: u32, payload: &[u8]) -> bool {
        self.state.has_keys()
            && offset == 0
            && !payload.is_empty()
            && !payload.starts_with(&self.opening)
    }

    /// Takes a chunk of the peer's stream at `offset` (with its ACK of
    /// ours, from a datagram of `received` bytes), while all handshakes'
    /// reorder windows hold `windows` bytes: takes the ACK and stores the
    /// bytes (the caller credits the datagram to the address's budget).
    pub(super) fn take_chunk(
        &mut self,
        offset: u32,
        ack: u32,
        payload: &[u8],
        windows: usize,
    ) -> Result<Taken, DropReason> {
        if ack > self.acked && ack as usize <= self.sent.len() {
            self.acked = ack;
            self.silent_ticks = 0;
        }
        let held_before = self.stream.held_bytes();
        if !payload.is_empty()
            && self.stream.would_allocate(offset)
            && windows + WINDOW_COST > MAX_REORDER_TOTAL
        {
            return Err(DropReason::OverLimit);
        }
        let bytes = self.take_in_order(offset, payload)?;
        Ok(Taken {
            bytes,
            held_before,
            held_after: self.stream.held_bytes(),
        })
    }

    /// Stores a chunk of the peer's stream; returns the newly contiguous
    /// bytes to feed to the handshake.
    fn take_in_order(&mut self, offset: u32, data: &[u8]) -> Result<Vec<u8>, DropReason> {
        if data.is_empty() {
            return Ok(Vec::new()); // a bare ACK: nothing to acknowledge
        }
        self.owe_ack = true;
        if offset == 0 && self.opening.is_empty() {
            self.opening = data[..data.len().min(OPENING)].to_vec();
        }
        self.stream.take(offset, data)
    }
}

/// Writes a HANDSHAKE packet carrying `chunk` (stream offset `offset`) of
/// `conn`'s stream, with its current ACK, into the front of `buf`, the
/// retry token in front of the stream's first bytes if there is one;
/// returns its length.
pub(super) fn emit_handshake(
    buf: &mut [u8],
    ports: (u16, u16),
    conn: &HandshakeConn,
    offset: u32,
    chunk: &[u8],
) -> usize {
    let token = conn
        .retry_token
        .as_deref()
        .filter(|_| offset == 0 && !chunk.is_empty());
    let prefix = token.map_or(0, |t| 1 + t.len());
    let body = Body::Handshake {
        offset,
        ack: conn.stream.received(),
        len: (prefix + chunk.len()) as u16,
        kind: conn.kind,
        flags: if token.is_some() { HANDSHAKE_TOKEN } else { 0 },
    };
    let repr = Repr {
        src_port: ports.0,
        dst_port: ports.1,
        key_phase: false,
        id: 0,
        body,
    };
    repr.emit(&mut Packet::new_unchecked(&mut buf[..HEADER_LEN]));
    let mut at = HEADER_LEN;
    if let Some(t) = token {
        buf[at] = t.len() as u8;
        buf[at + 1..at + prefix].copy_from_slice(t);
        at += prefix;
    }
    buf[at..at + chunk.len()].copy_from_slice(chunk);
    at + chunk.len()
}

/// A RETRY packet from `port` to `peer` carrying `token` (stateless
/// retry, `retry.rs`).
pub(super) fn emit_retry(
    port: u16,
    peer: SocketAddr,
    kind: HandshakeKind,
    token: &[u8],
) -> Vec<u8> {
    let mut packet = vec![0; HEADER_LEN + token.len()];
    let repr = Repr {
        src_port: port,
        dst_port: peer.port(),
        key_phase: false,
        id: 0,
        body: Body::Handshake {
            offset: 0,
            ack: 0,
            len: token.len() as u16,
            kind,
            flags: HANDSHAKE_RETRY,
        },
    };
    repr.emit(&mut Packet::new_unchecked(&mut packet[..HEADER_LEN]));
    packet[HEADER_LEN..].copy_from_slice(token);
    packet
}

/// Datagram bytes that carry `len` handshake bytes in `chunk`-byte
/// packets (a bare ACK when `len` is 0).
pub(super) fn wire_bytes(len: usize, chunk: usize) -> usize {
    len + HEADER_LEN * len.div_ceil(chunk).max(1)
}
