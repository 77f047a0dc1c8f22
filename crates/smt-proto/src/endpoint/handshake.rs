//! Carrying a session-establishment handshake (TLS 1.3, or the 0-RTT
//! SMT-ticket exchange) in HANDSHAKE packets: each side's handshake bytes
//! are one ordered stream; every packet carries a chunk of the sender's
//! stream and how much of the other stream it has received in order (a
//! cumulative ACK). Unacknowledged bytes are sent again after
//! `resend_ticks`, then after intervals that double up to eight times that
//! (tick.rs); a handshake silent for `handshake_abort_ticks` fails. The
//! [`Handshake`] implementation turns the bytes into session keys.

mod admit;
mod conn;
mod reorder;
mod retry;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

use self::admit::Admission;
pub(crate) use self::conn::HandshakeConn;
use self::conn::{emit_handshake, wire_bytes, Chunk, Due, Opening, Pumped, HEADER_LEN};
use self::retry::Retry;
use super::peer::{Budget, Held, Offer};
use super::peers::Peers;
use super::{trace_event, Endpoint, Event, KEY_UPDATE_CONFIRM};
use crate::config::Config;
use crate::error::DropReason;
use crate::handshake::{AddressProof, Handshake, HandshakeAcceptor, HandshakeError};
use crate::trace::Traced;
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

impl Endpoint {
    /// Starts a handshake with `peer` (the client side). Calls to a peer
    /// with a handshake in progress share it; [`Event::Connected`] or
    /// [`Event::HandshakeFailed`] says how it ended. `kind` names the
    /// protocol for the server's acceptor (see `kind`).
    pub fn connect(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        hs: Box<dyn Handshake>,
        kind: HandshakeKind,
    ) {
        if self.peers.handshakes.contains_key(&peer) {
            return;
        }
        self.trace_now(now);
        if self.peers.is_quarantined(now, peer) {
            self.counters.stats.handshakes_failed += 1;
            let error = HandshakeError::Unreachable;
            trace_event!(
                self,
                Traced::HandshakeFailed {
                    peer,
                    error: error.clone(),
                }
            );
            self.outbox
                .push_event(Event::HandshakeFailed { peer, error });
            return;
        }
        trace_event!(self, Traced::HandshakeStarted { peer, kind });
        let mut conn = HandshakeConn::new(hs, kind, self.time.ticks);
        conn.initiator = true;
        self.peers.handshakes.insert(peer, conn);
        self.pump_handshake(now, peer);
        self.arm_tick(now);
    }

    /// Whether a handshake with `peer` is in progress.
    pub fn is_connecting(&self, peer: SocketAddr) -> bool {
        self.peers
            .handshakes
            .get(&peer)
            .is_some_and(|c| !c.keys_installed())
    }

    /// Sets what answers handshakes from unknown peers (the server side).
    pub fn set_handshake_acceptor(&mut self, acceptor: Box<dyn HandshakeAcceptor>) {
        self.hs.acceptor = Some(acceptor);
    }

    /// Keeps a datagram from a peer whose handshake has not produced keys
    /// yet (1-RTT data can overtake the client's Finished); it is processed
    /// once the keys are installed. Returns false if there is no such
    /// handshake or its buffer is full.
    pub(crate) fn stash_early(&mut self, from: SocketAddr, datagram: &[u8]) -> bool {
        self.peers
            .handshakes
            .get_mut(&from)
            .is_some_and(|c| c.state.stash_early(datagram))
    }
    /// A HANDSHAKE packet from `from`: a RETRY for a handshake we opened,
    /// the opening of a new handshake, or the next chunk of one under way.
    pub(crate) fn on_handshake_packet(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
    ) -> Result<(), DropReason> {
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
            self.remove_handshake(from);
        }
        if !self.peers.handshakes.contains_key(&from) {
            let opening = Opening {
                kind: chunk.kind,
                token,
                received: datagram.len(),
            };
            if !self.open_handshake(now, from, opening, chunk.offset, payload)? {
                return Ok(()); // answered with a RETRY; nothing kept
            }
        }
        self.take_chunk(now, from, chunk, payload, datagram.len())
    }

    /// A packet that may open a handshake with `from` (it has none): only
    /// the start of a stream may. Returns false if it was answered with a
    /// RETRY instead (stateless retry, or a returning address that must
    /// prove itself).
    fn open_handshake(
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
            Some(t) => self
                .hs
                .check_token(now, from, kind, t, &mut self.counters.stats)?,
            None if self
                .hs
                .must_retry(&self.config, &self.peers, self.time.ticks) =>
            {
                return self.send_retry(now, from, kind, received).map(|()| false)
            }
            None => false,
        };
        self.admit_handshake(from)?;
        let hs = self.accept(from, kind)?;
        if !validated && self.must_prove_return(from, &*hs, payload) {
            return self.send_retry(now, from, kind, received).map(|()| false);
        }
        self.start_responder(
            now,
            from,
            HandshakeConn::new(hs, kind, self.time.ticks),
            validated,
        );
        Ok(true)
    }

    /// A responder's handshake of `kind` for `from`, from the acceptor.
    fn accept(
        &mut self,
        from: SocketAddr,
        kind: HandshakeKind,
    ) -> Result<Box<dyn Handshake>, DropReason> {
        self.hs
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
        conn.budget = Budget::new(validated);
        self.peers.handshakes.insert(from, conn);
        if let Some(r) = self.hs.retry.as_mut() {
            r.opened();
        }
        self.arm_tick(now);
    }

    /// Gives a chunk of `from`'s stream (the payload of a datagram of
    /// `received` bytes) to its handshake, and the handshake's answer to
    /// the peer.
    fn take_chunk(
        &mut self,
        now: Instant,
        from: SocketAddr,
        chunk: Chunk,
        payload: &[u8],
        received: usize,
    ) -> Result<(), DropReason> {
        let windows = self.counters.stats.usage.handshake_bytes as usize;
        let conn = self
            .peers
            .handshakes
            .get_mut(&from)
            .ok_or(DropReason::Handshake)?;
        let taken = conn.take_chunk(chunk.offset, chunk.ack, payload, received, windows)?;
        let u = &mut self.counters.stats.usage;
        u.handshake_bytes =
            (u.handshake_bytes + taken.held_after as u64).saturating_sub(taken.held_before as u64);
        if !taken.bytes.is_empty() {
            conn.silent_ticks = 0;
            if let Err(e) = conn.hs.read(&taken.bytes) {
                self.fail_handshake(now, from, e);
                return Ok(());
            }
        }
        self.pump_handshake(now, from);
        Ok(())
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
            outbox: &mut self.outbox,
            stats: &mut self.counters.stats,
        };
        self.hs.send_retry(out, now, (peer, kind), received)
    }

    /// Enables stateless retry (`Config::retry_above_handshakes`): tokens
    /// are MACed with `key`'s control MAC. Use a key only this endpoint
    /// holds, e.g. fresh random bytes at start-up (tokens then die with
    /// the endpoint, which is what they are for).
    pub fn set_retry_key(&mut self, key: std::sync::Arc<dyn crate::crypto::PacketCipher>) {
        self.hs.retry = Some(Retry::new(key));
    }

    /// A RETRY for a handshake we opened: open it again with the token,
    /// once (a second RETRY, or one after the peer's bytes arrived, is
    /// stale or forged and ignored).
    fn on_retry(&mut self, from: SocketAddr, token: &[u8]) -> Result<(), DropReason> {
        let Some(conn) = self.peers.handshakes.get_mut(&from) else {
            return Err(DropReason::Handshake);
        };
        let sent = conn.take_retry(token).ok_or(DropReason::Handshake)?;
        tracing::debug!(peer = %from, "handshake retried: opening again with the token");
        self.queue_handshake_bytes(from, 0, sent);
        self.resend_first_flight(from);
        Ok(())
    }

    /// After a RETRY: sends again, right behind the token opening, the
    /// request bytes our calls to `peer` already sent under keys the
    /// handshake gave before the peer answered (a 0-RTT first flight).
    /// The responder kept nothing of that flight (it held no handshake; a
    /// session it had with the address refused the records), so without
    /// this the requests waited for a resend timer and an RPC_UNKNOWN
    /// restart: milliseconds where the RETRY costs one round trip. The
    /// same bytes and IDs go again, so a copy of the first flight that
    /// still arrives under the new keys is a duplicate, never a second
    /// execution.
    fn resend_first_flight(&mut self, peer: SocketAddr) {
        let calls: Vec<super::RpcHandle> = self
            .rpcs
            .clients
            .iter()
            .filter(|(_, c)| c.peer == peer)
            .map(|(h, _)| h)
            .collect();
        let tick = self.time.ticks;
        for h in calls {
            let Some(rpc) = self.rpcs.clients.get_mut(&h) else {
                continue;
            };
            // Wire lengths fit 32 bits (the DATA header's field). An
            // interval of 1: everything sent up to now, this tick included.
            let sent = rpc.request.sent() as u32;
            if sent > 0 && rpc.request.resend(0, sent, tick, 1) {
                self.mark_sendable(super::MsgKey::Client(h));
            }
        }
    }

    /// The network says `peer` cannot be reached: an ICMP port or host
    /// unreachable came back for a datagram we sent it (the driver reads
    /// them with `IP_RECVERR`). Acted on only for an address we called
    /// (calls of ours are under way to it, or a handshake we started) and
    /// while nothing authenticated has come from it: then nothing speaks
    /// SMT there (a closed port, a host that is down, another service), and
    /// our calls to it fail at once with [`RpcError::Unreachable`] instead
    /// of each timing out, and our handshake with it fails with
    /// [`HandshakeError::Unreachable`] instead of retrying. A peer that has
    /// authenticated before may be restarting, and anyone who can forge
    /// ICMP could otherwise end its calls: its timers decide. A report
    /// about an address that only sent to us (a spoofed opening we
    /// answered, say) changes nothing but a counter: it is the answer to a
    /// stranger's claim, and no one else's calls or sessions depend on it.
    /// Returns whether anything failed. For `handshake_abort_ticks`
    /// afterwards, new calls and handshakes to the peer fail the same way
    /// without sending: an application that calls again at once does not
    /// turn the report into a stream of packets toward the address.
    ///
    /// [`RpcError::Unreachable`]: crate::RpcError::Unreachable
    pub fn peer_unreachable(&mut self, now: Instant, peer: SocketAddr) -> bool {
        self.counters.stats.unreachable_reports += 1;
        if self.peers.get(&peer).is_some_and(|p| p.proven) {
            return false;
        }
        let handshake = self
            .peers
            .handshakes
            .get(&peer)
            .is_some_and(|c| c.initiator && !c.keys_installed());
        let calls: Vec<super::RpcHandle> = match self.peers.contains_key(&peer) {
            // Our calls need a session with the peer.
            true => self
                .rpcs
                .clients
                .iter()
                .filter(|(_, c)| c.peer == peer)
                .map(|(h, _)| h)
                .collect(),
            false => Vec::new(),
        };
        if calls.is_empty() && !handshake {
            return false;
        }
        let until = now + self.config.tick * self.config.handshake_abort_ticks;
        self.peers.quarantine(now, peer, until);
        for &h in &calls {
            self.fail_client(h, crate::error::RpcError::Unreachable);
        }
        if handshake {
            self.fail_handshake(now, peer, HandshakeError::Unreachable);
        }
        true
    }

    /// Makes a place for a handshake `from` opens, or refuses it
    /// (`admit.rs` decides). A displaced handshake in progress just ends
    /// (its peer, if genuine, opens again); a finished one was kept only to
    /// answer late copies of the peer's last flight, and its session stays
    /// (one the peer never uses expires, `Endpoint::expire_unproven`).
    fn admit_handshake(&mut self, from: SocketAddr) -> Result<(), DropReason> {
        match admit::admission(&self.peers.handshakes, &self.config, self.time.ticks, from) {
            Admission::Admit => Ok(()),
            Admission::OverQuota => {
                self.counters.stats.handshakes_over_quota += 1;
                Err(DropReason::OverLimit)
            }
            Admission::Displace(victim) => {
                tracing::debug!(peer = %victim, "a new opening displaces the oldest handshake");
                self.remove_handshake(victim);
                self.counters.stats.handshakes_displaced += 1;
                Ok(())
            }
            Admission::Full => Err(DropReason::OverLimit),
        }
    }

    /// Forgets the handshake with `peer`, and what it held.
    fn remove_handshake(&mut self, peer: SocketAddr) -> Option<HandshakeConn> {
        let conn = self.peers.handshakes.remove(&peer)?;
        let u = &mut self.counters.stats.usage;
        u.handshake_bytes = u
            .handshake_bytes
            .saturating_sub(conn.stream.held_bytes() as u64);
        Some(conn)
    }

    /// Sends whatever the handshake has to say, installs its keys when
    /// ready, and acknowledges what arrived.
    fn pump_handshake(&mut self, now: Instant, peer: SocketAddr) {
        let Some(conn) = self.peers.handshakes.get_mut(&peer) else {
            return;
        };
        let Pumped { fresh, keys, next } = conn.pump();
        if fresh.1 > fresh.0 {
            self.queue_handshake_bytes(peer, fresh.0, fresh.1);
        } else if conn.owe_ack {
            self.queue_handshake_bytes(peer, fresh.1, fresh.1);
        }
        if let Some(keys) = keys {
            if self.must_hold(peer) {
                return self.hold_keys(now, peer, keys, next);
            }
            self.finish_handshake(now, peer, keys);
            self.confirm_keys(peer);
        }
        if let Some(keys) = next {
            self.switch_to_next_keys(peer, keys);
        }
    }

    /// The next key epoch (the 0-RTT fs-key): RPCs already under way finish
    /// in the first epoch.
    fn switch_to_next_keys(&mut self, peer: SocketAddr, keys: SessionKeys) {
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
    fn confirm_keys(&mut self, peer: SocketAddr) {
        let initiator = self
            .peers
            .handshakes
            .get(&peer)
            .is_some_and(|c| c.initiator);
        let Some(epoch) = self.peers.get(&peer).map(|s| s.session.current.number) else {
            return;
        };
        if initiator {
            self.queue_control(peer, epoch, KEY_UPDATE_CONFIRM, Body::KeyUpdate);
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
        self.hs.retry.is_some()
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
                    && !c.address_validated()
                    && c.hs.address_proof() != AddressProof::Proven
            })
    }

    /// Keeps a responder's keys aside (see [`Held`]); a handshake whose
    /// keys can never be proven fails instead.
    fn hold_keys(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        keys: SessionKeys,
        next: Option<SessionKeys>,
    ) {
        let Some(conn) = self.peers.handshakes.get_mut(&peer) else {
            return;
        };
        let proof = conn.hs.address_proof();
        if proof == AddressProof::Never || (proof == AddressProof::NextKeys && next.is_none()) {
            let error = HandshakeError::Protocol(
                "a first flight that cannot prove its address may not replace the address's session"
                    .to_owned(),
            );
            return self.fail_handshake(now, peer, error);
        }
        tracing::debug!(%peer, "new keys held until the peer proves its address");
        conn.state.hold(Held {
            keys,
            next,
            proof,
            stash: Vec::new(),
        });
    }

    /// A datagram from `from` that its established session refused: if a
    /// handshake holds new keys for `from`, it is either the proof that
    /// makes them current (then processed under them) or kept for after
    /// the proof. Returns whether the datagram was taken.
    pub(crate) fn offer_to_held_keys(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
    ) -> bool {
        let offer = match self.peers.handshakes.get_mut(&from) {
            Some(c) => c.state.offer_to_held(datagram),
            None => return false,
        };
        let held = match offer {
            Offer::Refused => return false,
            Offer::Stashed => return true,
            Offer::Proof(held) => held,
        };
        tracing::debug!(peer = %from, "peer proved its address: new keys replace its session");
        self.finish_handshake(now, from, held.keys);
        if let Some(next) = held.next {
            self.switch_to_next_keys(from, next);
        }
        self.handle_datagram(now, from, datagram);
        for d in held.stash {
            self.handle_datagram(now, from, &d);
        }
        true
    }

    fn finish_handshake(&mut self, now: Instant, peer: SocketAddr, keys: crate::SessionKeys) {
        if !self.peers.contains_key(&peer) && !self.make_room_for_session() {
            let error = HandshakeError::Protocol(
                "this endpoint holds as many sessions as max_sessions allows, none of them evictable".to_owned(),
            );
            return self.fail_handshake(now, peer, error);
        }
        if let Err(e) = self.install_session(peer, keys) {
            let error = HandshakeError::Protocol(e.to_string());
            return self.fail_handshake(now, peer, error);
        }
        let early = match self.peers.handshakes.get_mut(&peer) {
            Some(c) => c.state.establish(),
            None => Vec::new(),
        };
        tracing::debug!(%peer, "handshake complete, session keys installed");
        let by_token = self
            .peers
            .handshakes
            .get(&peer)
            .is_some_and(|c| c.address_validated());
        if let Some(p) = self.peers.get_mut(&peer).filter(|_| by_token) {
            p.budget.validate();
        }
        self.track_unvalidated(peer);
        self.counters.stats.handshakes_completed += 1;
        trace_event!(self, Traced::HandshakeDone { peer });
        self.outbox.push_event(Event::Connected { peer });
        for d in early {
            self.handle_datagram(now, peer, &d);
        }
    }

    fn fail_handshake(&mut self, now: Instant, peer: SocketAddr, error: HandshakeError) {
        tracing::debug!(%peer, %error, "handshake failed");
        if let Some(mut conn) = self.remove_handshake(peer) {
            // Best effort: let the peer hear the alert. The state goes now,
            // so the packet is built at once rather than queued by offset.
            let start = conn.sent.len();
            conn.hs.write(&mut conn.sent);
            let alert = &conn.sent[start..];
            let room = self.config.max_datagram_size - HEADER_LEN;
            if !alert.is_empty() && alert.len() <= room {
                let mut packet = vec![0u8; HEADER_LEN + alert.len()];
                let ports = (self.config.local_port, peer.port());
                emit_handshake(&mut packet, ports, &conn, start as u32, alert);
                self.outbox.push_prebuilt(peer, packet);
            }
            if conn.keys_installed() && conn.kind == HandshakeKind::TLS13 {
                // TLS 1.3 gives the client keys before the server has checked
                // a client certificate: a later alert withdraws the session.
                // Other handshakes' late bytes are unauthenticated (anyone
                // can inject them, e.g. a ServerReply0 answering a spoofed
                // hello): they end the handshake, never the session.
                self.remove_session(peer);
            }
        }
        self.counters.stats.handshakes_failed += 1;
        trace_event!(
            self,
            Traced::HandshakeFailed {
                peer,
                error: error.clone(),
            }
        );
        self.outbox
            .push_event(Event::HandshakeFailed { peer, error });
        let _ = now;
    }

    /// Counts a session a responder's handshake just made, if the peer has
    /// not used its keys yet, forgetting the oldest such session past
    /// `Config::max_unvalidated_sessions`.
    fn track_unvalidated(&mut self, peer: SocketAddr) {
        let responder = self
            .peers
            .handshakes
            .get(&peer)
            .is_some_and(|c| !c.initiator);
        let made = self.time.ticks;
        match self.peers.get_mut(&peer) {
            Some(p) if responder && !p.proven => p.made = made,
            _ => return,
        }
        self.peers.unvalidated.push_back((peer, made));
        while self.peers.unvalidated.len() > self.config.max_unvalidated_sessions {
            if let Some((oldest, made)) = self.peers.unvalidated.pop_front() {
                self.drop_if_unproven(oldest, made);
            }
        }
    }

    /// Forgets the sessions a responder's handshake made that the peer has
    /// not used within `handshake_abort_ticks`: a genuine client uses them
    /// within a round trip (the request it made the handshake for). At most
    /// what expired; the work follows the expired entries, not the
    /// sessions.
    pub(crate) fn expire_unproven(&mut self) {
        let limit = u64::from(self.config.handshake_abort_ticks);
        while let Some(&(peer, made)) = self.peers.unvalidated.front() {
            if self.time.ticks - made < limit {
                break;
            }
            self.peers.unvalidated.pop_front();
            self.drop_if_unproven(peer, made);
        }
    }

    /// Forgets `peer`'s session made at tick `made` by a responder's
    /// handshake, if nothing authenticated has come from the peer since
    /// (and it is still that session).
    pub(crate) fn drop_if_unproven(&mut self, peer: SocketAddr, made: u64) {
        if self.peers.get(&peer).is_some_and(|p| p.made == made) {
            self.drop_if_unvalidated(peer);
        }
    }

    /// Forgets `peer`'s session, which a responder's handshake made, if
    /// nothing authenticated has come from the peer since.
    fn drop_if_unvalidated(&mut self, peer: SocketAddr) {
        let unproven = self
            .peers
            .get(&peer)
            .is_some_and(|p| !p.proven && p.origin == super::peer::Origin::Handshake);
        // A newer handshake from this address, as initiator, owns it now.
        let initiator = self
            .peers
            .handshakes
            .get(&peer)
            .is_some_and(|c| c.initiator);
        if unproven && !initiator {
            tracing::debug!(%peer, "forgetting a session whose peer never used its keys");
            self.remove_session(peer);
            self.counters.stats.unvalidated_sessions_dropped += 1;
        }
    }

    /// The anti-amplification rule for `more` bytes to a peer that has not
    /// proven it owns its address (a responder without keys).
    /// Keys alone do not exempt a responder: a PSK hello installs keys at
    /// once, from a packet anyone can send with a spoofed source; only an
    /// authenticated packet from the address does (`Peer::validated`).
    fn may_send_handshake(&self, peer: SocketAddr, more: usize) -> bool {
        let validated = self.peers.get(&peer).is_some_and(|p| p.validated());
        let wire = wire_bytes(more, self.chunk_len());
        self.peers.handshakes.get(&peer).is_some_and(|c| {
            c.initiator || (c.keys_installed() && validated) || c.budget.allows(wire)
        })
    }

    /// Handshake bytes per HANDSHAKE packet.
    fn chunk_len(&self) -> usize {
        self.config.max_datagram_size - HEADER_LEN
    }

    /// Queues HANDSHAKE packets carrying `sent[start..end]` (or a bare ACK
    /// when the range is empty).
    fn queue_handshake_bytes(&mut self, peer: SocketAddr, start: usize, end: usize) {
        let chunk = self.chunk_len();
        if let Some(c) = self.peers.handshakes.get_mut(&peer) {
            c.queue_bytes(peer, (start, end), chunk, &mut self.hs.queue);
        }
    }

    /// Writes one queued HANDSHAKE packet into `buf`.
    pub(crate) fn write_handshake_packet(&mut self, buf: &mut [u8]) -> Option<(SocketAddr, usize)> {
        while let Some((peer, offset, len)) = self.hs.queue.pop_front() {
            let Some(conn) = self.peers.handshakes.get(&peer) else {
                continue;
            };
            let (o, l) = (offset as usize, len as usize);
            if o + l > conn.sent.len() {
                continue;
            }
            let ports = (self.config.local_port, peer.port());
            let len = emit_handshake(buf, ports, conn, offset, &conn.sent[o..o + l]);
            self.counters.stats.control_packets_tx += 1;
            return Some((peer, len));
        }
        None
    }

    /// The tick's share: retransmit unacknowledged handshake bytes, give up
    /// on silent handshakes, forget finished ones once quiet.
    pub(crate) fn tick_handshakes(&mut self, now: Instant) {
        let peers: Vec<SocketAddr> = self.peers.handshakes.keys().copied().collect();
        for peer in peers {
            let Some(conn) = self.peers.handshakes.get_mut(&peer) else {
                continue;
            };
            match conn.tick(self.time.ticks, &self.config) {
                Due::PastDeadline => {
                    self.counters.stats.handshakes_past_deadline += 1;
                    self.fail_handshake(now, peer, HandshakeError::Timeout);
                }
                Due::Silent => self.fail_handshake(now, peer, HandshakeError::Timeout),
                Due::Finished => {
                    let responder = self.remove_handshake(peer).is_some_and(|c| !c.initiator);
                    if responder {
                        self.drop_if_unvalidated(peer);
                    }
                }
                Due::Resend { acked, sent } => {
                    if self.may_send_handshake(peer, sent - acked) {
                        self.queue_handshake_bytes(peer, acked, sent);
                    }
                }
                Due::Nothing => {}
            }
        }
    }
}
