//! What the endpoint keeps per peer: the session (keys by epoch, message
//! IDs, replay guard, counters), where its keys came from, when it was
//! last heard, and what its partially received messages hold. One map
//! entry per peer, so a packet resolves its peer once, instead of one
//! lookup in each of five maps kept in step by hand.

mod budget;
pub(crate) mod id;
mod key_update;
mod state;

use std::time::Instant;

pub(crate) use self::budget::{Budget, AMPLIFICATION};
pub(crate) use self::key_update::KeyUpdateSeen;
pub(crate) use self::state::{Held, Offer, PeerState};
use super::table::PeerRpcs;
use crate::crypto::TAG_LEN;
use crate::error::{DropReason, SendError};
use crate::session::Session;
use crate::wire::Packet;

/// Incoming state charged to one peer (or to all): `limits.rs` bounds it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Charge {
    /// Bytes held by partially received messages from the peer.
    pub bytes: usize,
    /// Partially received requests from the peer.
    pub requests: usize,
}

impl Charge {
    pub(crate) fn add(&mut self, other: Charge) {
        self.bytes += other.bytes;
        self.requests += other.requests;
    }
}

/// Splits a control packet into the authenticated part and its MAC.
pub(crate) fn split_tag(datagram: &[u8]) -> Result<(&[u8], &[u8; TAG_LEN]), DropReason> {
    let split = datagram
        .len()
        .checked_sub(TAG_LEN)
        .ok_or(DropReason::Malformed)?;
    let (body, tag) = datagram.split_at(split);
    let tag: &[u8; TAG_LEN] = tag.try_into().map_err(|_| DropReason::Malformed)?;
    Ok((body, tag))
}

/// Where a peer's session keys came from: decides whether the session may
/// be forgotten (a handshake can make it again) and what it counts against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// `install_session`: only the application replaces or removes it.
    Installed,
    /// The key resolver (counts against `Config::max_resolved_sessions`);
    /// never evicted, since the resolver would derive the same keys with a
    /// fresh replay guard.
    Resolved,
    /// A handshake: forgotten when the peer goes silent or idle.
    Handshake,
}

/// One peer's state. Its [`Session`] (keys by epoch, message IDs,
/// counters) is the `session` field, named at each use: no `Deref`, so
/// what belongs to the session and what to the peer (budget, origin,
/// handshake) stays visible where it is used.
#[derive(Debug)]
pub(crate) struct Peer {
    pub session: Session,
    pub origin: Origin,
    /// When the peer last sent something that authenticated.
    pub heard: Option<Instant>,
    /// What its partially received messages hold (limits.rs): never below
    /// the truth, exact after each recount.
    pub usage: Charge,
    /// The peer is in `Ledger::charged` (it has been charged since the
    /// last recount, or held something at it), so a recount looks at it.
    pub charged: bool,
    /// The amplification budget: validated once something authenticated
    /// under this session arrived from the address ([`Peer::proven`]), or
    /// the handshake that made the session opened with a valid retry
    /// token. Until then, what we send it in reaction to its packets
    /// (reactive control packets) is bounded by what it sent (datagram
    /// bytes received from the address, authenticated or not). A session
    /// a responder's handshake made took the handshake's budget over
    /// (`Handshakes::establish`): one budget per address, which the
    /// handshake's late flights spend too.
    pub budget: Budget,
    /// The peer has used its keys: something authenticated under this
    /// session arrived. Only then is it an authenticated peer: a session a
    /// responder's handshake made without it (a PSK hello and its reply,
    /// which anyone can exchange, retry token or not) is held within
    /// `Config::max_unvalidated_sessions` and expires with its handshake.
    pub proven: bool,
    /// The tick a responder's handshake made the session at (0 for
    /// others): names it in `Endpoint::unvalidated`.
    pub made: u64,
    /// Its RPCs by (key epoch, message ID).
    pub rpcs: PeerRpcs,
    /// Pathlet feedback with this peer (`Config::pathlet_feedback`; made
    /// at first use, so a peer costs nothing more with it off).
    pub pathlet: Option<Box<crate::pathlet::PeerFeedback>>,
}

impl Peer {
    /// The peer's pathlet state, made at first use (`single`:
    /// `Config::pathlet_single_window`).
    pub(super) fn pathlet_mut(&mut self, single: bool) -> &mut crate::pathlet::PeerFeedback {
        self.pathlet
            .get_or_insert_with(|| Box::new(crate::pathlet::PeerFeedback::new(single)))
    }

    pub(super) fn new(session: Session, origin: Origin) -> Self {
        Self {
            session,
            origin,
            heard: None,
            usage: Charge::default(),
            charged: false,
            budget: Budget::new(false),
            proven: false,
            made: 0,
            rpcs: PeerRpcs::default(),
            pathlet: None,
        }
    }
}

impl Peer {
    /// Records that something authenticated arrived at `now`.
    pub(super) fn authenticated(&mut self, now: Instant) {
        self.heard = Some(now);
        self.budget.validate();
        self.proven = true;
    }

    /// Whether the peer's address is validated ([`Peer::budget`]).
    #[inline]
    pub(super) fn validated(&self) -> bool {
        self.budget.is_validated()
    }

    /// Whether a reactive packet of `len` bytes may go to the peer, and
    /// if so counts it.
    pub(super) fn may_react(&mut self, len: usize) -> bool {
        self.budget.try_spend(len)
    }
}

impl Peer {
    /// Counts a datagram of `len` bytes from the peer (and, until its
    /// address is validated, its amplification budget).
    #[inline]
    pub(super) fn count_rx(&mut self, len: usize) {
        self.session.stats.datagrams_rx += 1;
        self.session.stats.bytes_rx += len as u64;
        if !self.budget.is_validated() {
            self.budget.received(len);
        }
    }

    /// Checks a DATA or control packet (`packet` is the checked view of
    /// `datagram`) against the peer's keys: the key epoch its phase names,
    /// and the control MAC under that epoch's key if `authenticate` (a
    /// packet that passes is a sign of life at `now`). Returns the packet
    /// without its MAC, and the epoch's number. (The caller parses the
    /// header: a `Repr` returned from here was copied with `memcpy`, per
    /// packet.) Always inlined: called once per packet, and as a call it
    /// cost ~65 instructions per 64 B RPC (callgrind).
    #[inline(always)]
    pub(super) fn check_packet<'a>(
        &mut self,
        now: Instant,
        packet: Packet<&'a [u8]>,
        datagram: &'a [u8],
        authenticate: bool,
    ) -> Result<(Packet<&'a [u8]>, u64), DropReason> {
        let epoch = self
            .session
            .epoch_by_phase(packet.key_phase())
            .ok_or(DropReason::KeyPhase)?;
        if !(packet.packet_type().is_control() && authenticate) {
            return Ok((packet, epoch.number));
        }
        let (body, tag) = split_tag(datagram)?;
        epoch
            .rx
            .verify_control_tag(body, tag)
            .map_err(|_| DropReason::BadControlTag)?;
        let number = epoch.number;
        self.authenticated(now);
        let packet = Packet::new_checked(body).map_err(|_| DropReason::Malformed)?;
        Ok((packet, number))
    }
}

/// The session's message IDs and key epochs (KeyUpdate semantics,
/// §4.5.2).
impl Peer {
    /// Moves the session to its next key epoch when the current one runs
    /// low on IDs or on AEAD usage and its predecessor has `drained`:
    /// the new epoch, and whether it is the first announcement not yet
    /// confirmed (the peer then joins `Peers::key_updates`).
    #[inline]
    pub(super) fn rekey_if_low(&mut self, drained: bool) -> Option<(u64, bool)> {
        let cur = &self.session.current;
        let records_low = cur.records_sealed > cur.tx.record_limit() / 4 * 3;
        let ids_low = cur.ids.remaining() <= cur.ids.capacity() / 4;
        if !((ids_low || records_low) && drained && self.session.advance()) {
            return None;
        }
        let first = self.session.key_update_unconfirmed.replace(0).is_none();
        Some((self.session.current.number, first))
    }

    /// A message ID for a new RPC in the current key epoch.
    #[inline]
    pub(super) fn allocate_id(&mut self) -> Result<(u64, u64), SendError> {
        match self.session.current.ids.allocate() {
            Some(id) => Ok((self.session.current.number, id)),
            None if self.session.update.is_some() => Err(SendError::RekeyPending),
            None => Err(SendError::IdSpaceExhausted),
        }
    }
}
