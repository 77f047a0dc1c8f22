//! Carrying a session-establishment handshake (TLS 1.3, or the 0-RTT
//! SMT-ticket exchange) in HANDSHAKE packets: each side's handshake bytes
//! are one ordered stream; every packet carries a chunk of the sender's
//! stream and how much of the other stream it has received in order (a
//! cumulative ACK). Unacknowledged bytes are sent again after
//! `resend_ticks`, then after intervals that double up to eight times that
//! (tick.rs); a handshake silent for `handshake_abort_ticks` fails. The
//! [`Handshake`] implementation turns the bytes into session keys.
//!
//! The handshake code works on [`Handshakes`], the parts of the endpoint
//! it needs (the peers with their handshake table, the configuration, the
//! outbox, the counters, the clock), and returns a [`Step`] for what only
//! the endpoint can do: install or remove a session, fail our calls,
//! handle datagrams again (`Endpoint::apply_handshake`, `mod.rs`), as
//! quinn-proto's endpoint applies what a connection returns.

mod admit;
mod conn;
mod reorder;
mod retry;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

use self::admit::Admission;
use self::conn::{emit_handshake, wire_bytes, Chunk, Due, Opening, Pumped, HEADER_LEN};
pub(crate) use self::conn::{BudgetAt, HandshakeConn};
pub(crate) use self::retry::Retry;
use super::outbox::Outbox;
use super::peer::{Budget, Held, Offer};
use super::peers::{PeerId, Peers};
use super::tick::Time;
use super::KEY_UPDATE_CONFIRM;
use crate::config::Config;
use crate::error::DropReason;
use crate::handshake::{AddressProof, Handshake, HandshakeAcceptor, HandshakeError};
use crate::stats::Stats;
use crate::timer::Timer;
use crate::wire::{Body, HandshakeKind, Packet, HANDSHAKE_RETRY};
use crate::SessionKeys;

/// Before the peer's address is validated, a responding handshake sends
/// at most this many times the bytes it received (counting
/// retransmissions), like QUIC's limit.
const AMPLIFICATION: usize = super::peer::AMPLIFICATION as usize;
/// RETRY packets waiting to leave, at most: past it, openings are dropped
/// (a flood faster than the socket drains them).
const MAX_PREBUILT: usize = 4096;

/// What the endpoint keeps for handshakes beside the table of them: the
/// acceptor of peers' openings, the stateless-retry key, and the
/// handshake bytes waiting to leave (peer, stream offset, length).
#[derive(Default)]
pub(crate) struct HandshakeSide {
    pub acceptor: Option<Box<dyn HandshakeAcceptor>>,
    /// The stateless-retry key, if set (`set_retry_key`).
    pub retry: Option<Retry>,
    pub queue: VecDeque<(SocketAddr, u32, u16)>,
    /// Finds keys for a peer without a handshake ([`Endpoint::set_key_resolver`]).
    pub resolver: Option<Box<dyn super::KeyResolver>>,
}

/// Where a RETRY goes out and is counted.
pub(crate) struct RetryOut<'a> {
    local_port: u16,
    outbox: &'a mut super::outbox::Outbox,
    stats: &'a mut crate::stats::Stats,
}

impl HandshakeSide {
    /// Whether an opening without a token gets a RETRY instead of state:
    /// at least `retry_above_handshakes` handshakes are busy
    /// (`Peers::busy_handshakes`). Bounded work: the table is counted at
    /// most once per tick, and only once it holds that many entries.
    fn must_retry(&mut self, cfg: &Config, peers: &Peers, tick: u64) -> bool {
        let above = cfg.retry_above_handshakes;
        let Some(retry) = self.retry.as_mut() else {
            return false;
        };
        if peers.handshakes.len() < above {
            return false;
        }
        let busy = match retry.busy(tick) {
            Some(n) => n,
            None => {
                let n = peers.busy_handshakes();
                retry.set_busy(tick, n);
                n
            }
        };
        busy >= above
    }

    /// Answers an opening from `peer` with a RETRY carrying a token, and
    /// keeps nothing. The RETRY is smaller than three openings of
    /// `received` bytes (a HANDSHAKE header and one data byte at least).
    fn send_retry(
        &mut self,
        out: RetryOut<'_>,
        now: Instant,
        (peer, kind): (SocketAddr, HandshakeKind),
        received: usize,
    ) -> Result<(), DropReason> {
        let Some(retry) = self.retry.as_mut() else {
            return Err(DropReason::Handshake);
        };
        if out.outbox.prebuilt_len() >= MAX_PREBUILT {
            return Err(DropReason::OverLimit);
        }
        let token = retry.mint(now, peer, kind);
        let packet = conn::emit_retry(out.local_port, peer, kind, &token);
        debug_assert!(packet.len() <= AMPLIFICATION * received.max(HEADER_LEN + 1));
        out.outbox.push_prebuilt(peer, packet);
        out.stats.retries_sent += 1;
        Ok(())
    }

    /// Checks an opening's retry token; `Ok(true)` if it proves `peer`'s
    /// address.
    fn check_token(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        kind: HandshakeKind,
        token: &[u8],
        stats: &mut crate::stats::Stats,
    ) -> Result<bool, DropReason> {
        let retry = self.retry.as_mut().ok_or(DropReason::BadToken)?;
        if !retry.verify(now, peer, kind, token) {
            return Err(DropReason::BadToken);
        }
        stats.retry_tokens_accepted += 1;
        Ok(true)
    }
}

/// What a handshake step leaves to the endpoint, which alone installs and
/// removes sessions, fails calls and handles datagrams again
/// (`Endpoint::apply_handshake`).
#[must_use]
pub(crate) enum Step {
    Nothing,
    /// The handshake with `peer` produced keys: install them as its
    /// session (`Endpoint::finish_handshake`), confirm them, then move to
    /// `next` (the 0-RTT fs-key) if given.
    Finish {
        peer: SocketAddr,
        keys: SessionKeys,
        next: Option<SessionKeys>,
    },
    /// The handshake with `peer` failed (`Endpoint::fail_handshake`).
    Fail {
        peer: SocketAddr,
        error: HandshakeError,
    },
    /// A RETRY reopened our handshake with `peer`: our calls' 0-RTT first
    /// flight goes again behind it (`Endpoint::resend_first_flight`).
    Retried(SocketAddr),
    /// A finished responder's handshake with `peer` was forgotten: its
    /// session goes too if the peer never used it
    /// (`Endpoint::drop_if_unvalidated`).
    Forgotten(SocketAddr),
}

/// The parts of the endpoint the handshake code works on
/// (`Endpoint::handshakes` lends them): the handshake table lives in
/// `Peers`, beside the sessions it makes.
pub(crate) struct Handshakes<'a> {
    pub(crate) config: &'a Config,
    pub(crate) peers: &'a mut Peers,
    pub(crate) side: &'a mut HandshakeSide,
    pub(crate) outbox: &'a mut Outbox,
    pub(crate) stats: &'a mut Stats,
    pub(crate) time: &'a mut Time,
}

impl Handshakes<'_> {
    /// Starts our handshake with `peer` (the client side) and sends its
    /// first flight.
    pub(crate) fn start_initiator(
        &mut self,
        peer: SocketAddr,
        hs: Box<dyn Handshake>,
        kind: HandshakeKind,
    ) -> Step {
        let mut conn = HandshakeConn::new(hs, kind, self.time.ticks);
        conn.initiator = true;
        self.peers.handshakes.insert(peer, conn);
        self.pump(peer)
    }

    /// A HANDSHAKE packet from `from`: a RETRY for a handshake we opened,
    /// the opening of a new handshake, or the next chunk of one under way.
    pub(crate) fn on_packet(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
    ) -> Result<Step, DropReason> {
        let packet = Packet::new_checked(datagram).map_err(|_| DropReason::Malformed)?;
        let chunk = Chunk::parse(&packet)?;
        if chunk.flags & HANDSHAKE_RETRY != 0 {
            return self.on_retry(from, packet.payload());
        }
        let (token, payload) = chunk.split_token(packet.payload())?;
        let restarted = self
            .peers
            .handshakes
            .get(&from)
            .is_some_and(|c| c.restarted_by(chunk.offset, payload));
        if restarted {
            // The peer (or a new peer on the same address) starts over; the
            // old session stays until this handshake produces new keys.
            self.remove(from);
        }
        if !self.peers.handshakes.contains_key(&from) {
            let opening = Opening {
                kind: chunk.kind,
                token,
                received: datagram.len(),
            };
            if !self.open(now, from, opening, chunk.offset, payload)? {
                return Ok(Step::Nothing); // answered with a RETRY; nothing kept
            }
        }
        self.take_chunk(from, chunk, payload, datagram.len())
    }

    /// A packet that may open a handshake with `from` (it has none): only
    /// the start of a stream may. Returns false if it was answered with a
    /// RETRY instead (stateless retry, or a returning address that must
    /// prove itself).
    fn open(
        &mut self,
        now: Instant,
        from: SocketAddr,
        opening: Opening<'_>,
        offset: u32,
        payload: &[u8],
    ) -> Result<bool, DropReason> {
        if offset != 0 || payload.is_empty() {
            return Err(DropReason::Handshake);
        }
        let (kind, received) = (opening.kind, opening.received);
        let validated = match opening.token {
            Some(t) => self.side.check_token(now, from, kind, t, self.stats)?,
            None if self
                .side
                .must_retry(self.config, self.peers, self.time.ticks) =>
            {
                return self.send_retry(now, from, kind, received).map(|()| false)
            }
            None => false,
        };
        self.admit(from)?;
        let hs = self.accept(from, kind)?;
        if !validated && self.must_prove_return(from, &*hs, payload) {
            return self.send_retry(now, from, kind, received).map(|()| false);
        }
        let conn = HandshakeConn::new(hs, kind, self.time.ticks);
        self.start_responder(now, from, conn, validated);
        Ok(true)
    }

    /// A responder's handshake of `kind` for `from`, from the acceptor.
    fn accept(
        &mut self,
        from: SocketAddr,
        kind: HandshakeKind,
    ) -> Result<Box<dyn Handshake>, DropReason> {
        self.side
            .acceptor
            .as_mut()
            .and_then(|a| a.accept_kind(from, kind))
            .ok_or(DropReason::Handshake)
    }

    /// Lists a handshake a peer opened (`validated`: with a valid retry
    /// token).
    fn start_responder(
        &mut self,
        now: Instant,
        from: SocketAddr,
        mut conn: HandshakeConn,
        validated: bool,
    ) {
        conn.budget = BudgetAt::Own(Budget::new(validated));
        conn.with_token = validated;
        self.peers.handshakes.insert(from, conn);
        if let Some(r) = self.side.retry.as_mut() {
            r.opened();
        }
        if !self.time.timers.is_set(Timer::Tick) {
            self.time.timers.set(Timer::Tick, now + self.config.tick);
        }
    }

    /// Gives a chunk of `from`'s stream (the payload of a datagram of
    /// `received` bytes) to its handshake, and the handshake's answer to
    /// the peer.
    fn take_chunk(
        &mut self,
        from: SocketAddr,
        chunk: Chunk,
        payload: &[u8],
        received: usize,
    ) -> Result<Step, DropReason> {
        let windows = self.stats.usage.handshake_bytes as usize;
        if let Some(budget) = self.peers.handshake_budget_mut(&from) {
            budget.received(received);
        }
        let conn = self
            .peers
            .handshakes
            .get_mut(&from)
            .ok_or(DropReason::Handshake)?;
        let taken = conn.take_chunk(chunk.offset, chunk.ack, payload, windows)?;
        let u = &mut self.stats.usage;
        u.handshake_bytes =
            (u.handshake_bytes + taken.held_after as u64).saturating_sub(taken.held_before as u64);
        if !taken.bytes.is_empty() {
            conn.silent_ticks = 0;
            if let Err(error) = conn.hs.read(&taken.bytes) {
                return Ok(Step::Fail { peer: from, error });
            }
        }
        Ok(self.pump(from))
    }

    /// Answers an opening with a RETRY (`HandshakeSide::send_retry`).
    fn send_retry(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        kind: HandshakeKind,
        received: usize,
    ) -> Result<(), DropReason> {
        let out = RetryOut {
            local_port: self.config.local_port,
            outbox: self.outbox,
            stats: self.stats,
        };
        self.side.send_retry(out, now, (peer, kind), received)
    }

    /// A RETRY for a handshake we opened: open it again with the token,
    /// once (a second RETRY, or one after the peer's bytes arrived, is
    /// stale or forged and ignored).
    fn on_retry(&mut self, from: SocketAddr, token: &[u8]) -> Result<Step, DropReason> {
        let Some(conn) = self.peers.handshakes.get_mut(&from) else {
            return Err(DropReason::Handshake);
        };
        let sent = conn.take_retry(token).ok_or(DropReason::Handshake)?;
        tracing::debug!(peer = %from, "handshake retried: opening again with the token");
        self.queue_bytes(from, 0, sent);
        Ok(Step::Retried(from))
    }

    /// Makes a place for a handshake `from` opens, or refuses it
    /// (`admit.rs` decides). A displaced handshake in progress just ends
    /// (its peer, if genuine, opens again); a finished one was kept only to
    /// answer late copies of the peer's last flight, and its session stays
    /// (one the peer never uses expires, `Endpoint::expire_unproven`).
    fn admit(&mut self, from: SocketAddr) -> Result<(), DropReason> {
        match admit::admission(&self.peers.handshakes, self.config, self.time.ticks, from) {
            Admission::Admit => Ok(()),
            Admission::OverQuota => {
                self.stats.handshakes_over_quota += 1;
                Err(DropReason::OverLimit)
            }
            Admission::Displace(victim) => {
                tracing::debug!(peer = %victim, "a new opening displaces the oldest handshake");
                self.remove(victim);
                self.stats.handshakes_displaced += 1;
                Ok(())
            }
            Admission::Full => Err(DropReason::OverLimit),
        }
    }

    /// Forgets the handshake with `peer`, and what it held.
    fn remove(&mut self, peer: SocketAddr) -> Option<HandshakeConn> {
        let conn = self.peers.handshakes.remove(&peer)?;
        let u = &mut self.stats.usage;
        u.handshake_bytes = u
            .handshake_bytes
            .saturating_sub(conn.stream.held_bytes() as u64);
        Some(conn)
    }

    /// Sends whatever the handshake has to say and acknowledges what
    /// arrived; keys it produced are installed by the endpoint
    /// ([`Step::Finish`]) or held until the peer proves its address.
    fn pump(&mut self, peer: SocketAddr) -> Step {
        let Some(conn) = self.peers.handshakes.get_mut(&peer) else {
            return Step::Nothing;
        };
        let Pumped { fresh, keys, next } = conn.pump();
        if fresh.1 > fresh.0 {
            self.queue_bytes(peer, fresh.0, fresh.1);
        } else if conn.owe_ack {
            self.queue_bytes(peer, fresh.1, fresh.1);
        }
        if let Some(keys) = keys {
            if self.must_hold(peer) {
                return self.hold_keys(peer, keys, next);
            }
            return Step::Finish { peer, keys, next };
        }
        if let Some(keys) = next {
            self.switch_to_next_keys(peer, keys);
        }
        Step::Nothing
    }

    /// The next key epoch (the 0-RTT fs-key): RPCs already under way finish
    /// in the first epoch.
    pub(crate) fn switch_to_next_keys(&mut self, peer: SocketAddr, keys: SessionKeys) {
        if let Some(session) = self.peers.get_mut(&peer) {
            session.session.advance_to(keys);
            tracing::debug!(%peer, epoch = session.session.current.number, "handshake switched keys");
        }
        self.confirm_keys(peer);
    }

    /// An initiator tells the responder it holds the keys just installed:
    /// one authenticated control packet in the new epoch (a KEY_UPDATE
    /// confirmation, which a responder with those keys ignores). A
    /// responder holding keys aside for an address with a session takes it
    /// as the proof of that address ([`AddressProof`]).
    pub(crate) fn confirm_keys(&mut self, peer: SocketAddr) {
        let initiator = self
            .peers
            .handshakes
            .get(&peer)
            .is_some_and(|c| c.initiator);
        let Some(epoch) = self.peers.get(&peer).map(|s| s.session.current.number) else {
            return;
        };
        if initiator {
            let port = self.config.local_port;
            let body = Body::KeyUpdate;
            self.outbox
                .queue_control(port, peer, epoch, KEY_UPDATE_CONFIRM, body);
        }
    }

    /// Whether an opening from `peer` must first prove the address with a
    /// RETRY round trip (*returning addresses*, `docs/protocol.md` § 4):
    /// the address has a session, and the handshake the opening starts
    /// could never prove the address, so its keys could never replace
    /// that session. As DTLS's cookie exchange for a known address
    /// (RFC 6347 § 4.2.8): the old session stays, and a spoofed opening
    /// costs one RETRY toward the address it claims. Without a retry key
    /// the handshake runs and fails (`hold_keys`).
    fn must_prove_return(&self, peer: SocketAddr, hs: &dyn Handshake, opening: &[u8]) -> bool {
        self.side.retry.is_some()
            && self.peers.contains_key(&peer)
            && hs.opening_address_proof(opening) == AddressProof::Never
    }

    /// Whether a responder's new keys must wait for a proof of the peer's
    /// address: the peer has a session they would replace, and neither
    /// the handshake nor a retry token proved the address.
    fn must_hold(&self, peer: SocketAddr) -> bool {
        self.peers.contains_key(&peer)
            && self.peers.handshakes.get(&peer).is_some_and(|c| {
                !c.initiator
                    && !c.opened_with_token()
                    && c.hs.address_proof() != AddressProof::Proven
            })
    }

    /// Keeps a responder's keys aside (see [`Held`]); a handshake whose
    /// keys can never be proven fails instead.
    fn hold_keys(
        &mut self,
        peer: SocketAddr,
        keys: SessionKeys,
        next: Option<SessionKeys>,
    ) -> Step {
        let Some(conn) = self.peers.handshakes.get_mut(&peer) else {
            return Step::Nothing;
        };
        let proof = conn.hs.address_proof();
        if proof == AddressProof::Never || (proof == AddressProof::NextKeys && next.is_none()) {
            let error = HandshakeError::Protocol(
                "a first flight that cannot prove its address may not replace the address's session"
                    .to_owned(),
            );
            return Step::Fail { peer, error };
        }
        tracing::debug!(%peer, "new keys held until the peer proves its address");
        conn.state.hold(Held {
            keys,
            next,
            proof,
            stash: Vec::new(),
        });
        Step::Nothing
    }

    /// A datagram from `from` that its established session refused,
    /// offered to the keys a handshake holds for `from` (see
    /// [`Offer`]); refused if there is no such handshake.
    pub(crate) fn offer_to_held_keys(&mut self, from: SocketAddr, datagram: &[u8]) -> Offer {
        match self.peers.handshakes.get_mut(&from) {
            Some(c) => c.state.offer_to_held(datagram),
            None => Offer::Refused,
        }
    }

    /// The handshake with `peer` installed its keys as the session in slot
    /// `pid`: its early datagrams (to be handled under them), and, for a
    /// responder, the address's amplification budget, which the session
    /// takes over (validated if the opening carried a valid retry token;
    /// what the handshake received and sent still counts). From now on
    /// the handshake's late flights spend the session's budget.
    pub(crate) fn establish(
        &mut self,
        peer: SocketAddr,
        pid: PeerId,
    ) -> (Vec<Vec<u8>>, Option<Budget>) {
        let Some(c) = self.peers.handshakes.get_mut(&peer) else {
            return (Vec::new(), None);
        };
        let early = c.state.establish();
        match c.budget {
            BudgetAt::Own(budget) if !c.initiator => {
                c.budget = BudgetAt::Peer(pid);
                (early, Some(budget))
            }
            _ => (early, None),
        }
    }

    /// Forgets a failed handshake with `peer`, letting the peer hear its
    /// alert (best effort). Returns whether the session it made must go
    /// too: TLS 1.3 gives the client keys before the server has checked a
    /// client certificate, so a later alert withdraws the session. Other
    /// handshakes' late bytes are unauthenticated (anyone can inject them,
    /// e.g. a ServerReply0 answering a spoofed hello): they end the
    /// handshake, never the session.
    pub(crate) fn end_with_alert(&mut self, peer: SocketAddr) -> bool {
        let Some(mut conn) = self.remove(peer) else {
            return false;
        };
        // The state goes now, so the packet is built at once rather than
        // queued by offset.
        let start = conn.sent.len();
        conn.hs.write(&mut conn.sent);
        let alert = &conn.sent[start..];
        if !alert.is_empty() && alert.len() <= self.chunk_len() {
            let mut packet = vec![0u8; HEADER_LEN + alert.len()];
            let ports = (self.config.local_port, peer.port());
            emit_handshake(&mut packet, ports, &conn, start as u32, alert);
            self.outbox.push_prebuilt(peer, packet);
        }
        conn.keys_installed() && conn.kind == HandshakeKind::TLS13
    }

    /// The anti-amplification rule for `more` bytes to a peer that has not
    /// proven it owns its address (a responder): the address's one budget
    /// (`Peers::handshake_budget`). Keys alone do not exempt a responder:
    /// a PSK hello installs keys at once, from a packet anyone can send
    /// with a spoofed source; only an authenticated packet from the
    /// address does (`Peer::validated`, which validates the budget the
    /// session took over).
    fn may_send(&self, peer: SocketAddr, more: usize) -> bool {
        let wire = wire_bytes(more, self.chunk_len());
        let initiator = self
            .peers
            .handshakes
            .get(&peer)
            .is_some_and(|c| c.initiator);
        initiator
            || self
                .peers
                .handshake_budget(&peer)
                .is_some_and(|b| b.allows(wire))
    }

    /// Handshake bytes per HANDSHAKE packet.
    fn chunk_len(&self) -> usize {
        self.config.max_datagram_size - HEADER_LEN
    }

    /// Queues HANDSHAKE packets carrying `sent[start..end]` (or a bare ACK
    /// when the range is empty).
    fn queue_bytes(&mut self, peer: SocketAddr, start: usize, end: usize) {
        let chunk = self.chunk_len();
        let Some(c) = self.peers.handshakes.get_mut(&peer) else {
            return;
        };
        let spent = c.queue_bytes(peer, (start, end), chunk, &mut self.side.queue);
        if let Some(budget) = self.peers.handshake_budget_mut(&peer) {
            budget.spend(spent);
        }
    }

    /// Writes one queued HANDSHAKE packet into `buf` (inlined: `poll_transmit`
    /// asks on every call, and the queue is mostly empty).
    #[inline]
    pub(crate) fn write_packet(&mut self, buf: &mut [u8]) -> Option<(SocketAddr, usize)> {
        while let Some((peer, offset, len)) = self.side.queue.pop_front() {
            let Some(conn) = self.peers.handshakes.get(&peer) else {
                continue;
            };
            let (o, l) = (offset as usize, len as usize);
            if o + l > conn.sent.len() {
                continue;
            }
            let ports = (self.config.local_port, peer.port());
            let len = emit_handshake(buf, ports, conn, offset, &conn.sent[o..o + l]);
            self.stats.control_packets_tx += 1;
            return Some((peer, len));
        }
        None
    }

    /// The tick's share for the handshake with `peer`: retransmit
    /// unacknowledged bytes, give up on a silent handshake, forget a
    /// finished one once quiet.
    pub(crate) fn tick(&mut self, peer: SocketAddr) -> Step {
        let Some(conn) = self.peers.handshakes.get_mut(&peer) else {
            return Step::Nothing;
        };
        let error = HandshakeError::Timeout;
        match conn.tick(self.time.ticks, self.config) {
            Due::PastDeadline => {
                self.stats.handshakes_past_deadline += 1;
                Step::Fail { peer, error }
            }
            Due::Silent => Step::Fail { peer, error },
            Due::Finished => match self.remove(peer).is_some_and(|c| !c.initiator) {
                true => Step::Forgotten(peer),
                false => Step::Nothing,
            },
            Due::Resend { acked, sent } => {
                if self.may_send(peer, sent - acked) {
                    self.queue_bytes(peer, acked, sent);
                }
                Step::Nothing
            }
            Due::Nothing => Step::Nothing,
        }
    }
}
