//! What the endpoint keeps per peer: the session (keys by epoch, message
//! IDs, replay guard, counters), where its keys came from, when it was
//! last heard, and what its partially received messages hold. One map
//! entry per peer, so a packet resolves its peer once, instead of one
//! lookup in each of five maps kept in step by hand.

use std::ops::{Deref, DerefMut};
use std::time::Instant;

use super::limits::Charge;
use super::recv::split_tag;
use super::table::PeerRpcs;
use crate::error::DropReason;
use crate::session::Session;
use crate::wire::{Body, Packet, Repr};

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

/// One peer's state. Derefs to its [`Session`], whose fields the protocol
/// reads on every packet.
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
    /// The address is validated: something authenticated under this
    /// session arrived from it ([`Peer::proven`]), or the handshake that
    /// made the session opened with a valid retry token. Whoever sends from
    /// it receives there, so it is not a spoofed victim. Until then, what
    /// we send it in reaction to its packets is bounded by
    /// [`AMPLIFICATION`] times what it sent.
    pub validated: bool,
    /// The peer has used its keys: something authenticated under this
    /// session arrived. Only then is it an authenticated peer: a session a
    /// responder's handshake made without it (a PSK hello and its reply,
    /// which anyone can exchange, retry token or not) is held within
    /// `Config::max_unvalidated_sessions` and expires with its handshake.
    pub proven: bool,
    /// The tick a responder's handshake made the session at (0 for
    /// others): names it in `Endpoint::unvalidated`.
    pub made: u64,
    /// Datagram bytes received from the address (authenticated or not),
    /// and bytes of reactive control packets sent to it, while it is not
    /// validated.
    pub rx_bytes: u64,
    pub reactive_tx_bytes: u64,
    /// Its RPCs by (key epoch, message ID).
    pub rpcs: PeerRpcs,
    /// Pathlet feedback with this peer (`Config::pathlet_feedback`; made
    /// at first use, so a peer costs nothing more with it off).
    pub pathlet: Option<Box<crate::pathlet::PeerFeedback>>,
}

/// Before a peer's address is validated, reactive packets to it (RESEND,
/// GRANT, BUSY, RPC_UNKNOWN, NEED_ACK, handshake retransmissions) carry at
/// most this many times the bytes received from it, as QUIC limits a
/// server before address validation (RFC 9000 §8): a spoofed source cannot
/// use us as an amplifier.
pub(crate) const AMPLIFICATION: u64 = 3;

impl Peer {
    /// The peer's pathlet state, made at first use (`single`:
    /// `Config::pathlet_single_window`).
    pub fn pathlet_mut(&mut self, single: bool) -> &mut crate::pathlet::PeerFeedback {
        self.pathlet
            .get_or_insert_with(|| Box::new(crate::pathlet::PeerFeedback::new(single)))
    }

    pub fn new(session: Session, origin: Origin) -> Self {
        Self {
            session,
            origin,
            heard: None,
            usage: Charge::default(),
            charged: false,
            validated: false,
            proven: false,
            made: 0,
            rx_bytes: 0,
            reactive_tx_bytes: 0,
            rpcs: PeerRpcs::default(),
            pathlet: None,
        }
    }
}

impl Peer {
    /// Records that something authenticated arrived at `now`.
    pub fn authenticated(&mut self, now: Instant) {
        self.heard = Some(now);
        self.validated = true;
        self.proven = true;
    }

    /// Whether a reactive packet of `len` bytes may go to the peer, and
    /// if so counts it.
    pub fn may_react(&mut self, len: usize) -> bool {
        if self.validated {
            return true;
        }
        let after = self.reactive_tx_bytes + len as u64;
        if after > AMPLIFICATION * self.rx_bytes {
            return false;
        }
        self.reactive_tx_bytes = after;
        true
    }
}

impl Deref for Peer {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.session
    }
}

impl DerefMut for Peer {
    fn deref_mut(&mut self) -> &mut Session {
        &mut self.session
    }
}

/// What a KEY_UPDATE packet that authenticated asks of the endpoint
/// ([`Peer::take_key_update`]).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum KeyUpdateSeen {
    /// A confirmation of our announcement (or a late copy of one).
    Confirmed,
    /// A repeated announcement for the epoch we are in: our confirmation
    /// was lost; confirm again under epoch `current`.
    Repeated { current: u64 },
    /// The peer announced the next epoch: the endpoint forgets the RPCs of
    /// `previous` (the peer has moved on twice), then calls
    /// [`Peer::advance`] and confirms.
    Announced { previous: Option<u64> },
}

impl Peer {
    /// Checks a KEY_UPDATE packet (the whole packet, tag included) sent
    /// with key phase `phase`. Accepted only if its MAC verifies under
    /// the next epoch's keys (or the current ones, if the peer is already
    /// there: both sides rekeyed at once, or a copy), so a forged
    /// KEY_UPDATE cannot make us drop the previous epoch.
    pub fn take_key_update(
        &mut self,
        now: Instant,
        phase: bool,
        datagram: &[u8],
    ) -> Result<KeyUpdateSeen, DropReason> {
        let already = self.current.phase() == phase;
        let rx = match already {
            true => self.current.rx.clone(),
            false => self.next_keys().ok_or(DropReason::KeyPhase)?.rx,
        };
        let (body, tag) = split_tag(datagram)?;
        if rx.verify_control_tag(body, tag).is_err() {
            // A late copy of an announcement or confirmation for the epoch
            // we already left (its phase is the previous epoch's) is stale,
            // not forged: counted as a duplicate, so it neither looks like
            // an attack nor ends a coalesced datagram.
            let stale = self
                .previous
                .as_ref()
                .filter(|e| !already && e.phase() == phase)
                .is_some_and(|e| e.rx.verify_control_tag(body, tag).is_ok());
            return Err(match stale {
                true => DropReason::Duplicate,
                false => DropReason::BadControlTag,
            });
        }
        self.authenticated(now);
        let packet = Packet::new_checked(body).map_err(|_| DropReason::Malformed)?;
        let repr = Repr::parse(&packet).map_err(|_| DropReason::Malformed)?;
        if repr.body != Body::KeyUpdate {
            return Err(DropReason::Malformed);
        }
        if repr.id == super::KEY_UPDATE_CONFIRM {
            if already {
                self.key_update_unconfirmed = None;
            }
            return Ok(KeyUpdateSeen::Confirmed);
        }
        if already {
            return Ok(KeyUpdateSeen::Repeated {
                current: self.current.number,
            });
        }
        let previous = self.previous.as_ref().map(|e| e.number);
        Ok(KeyUpdateSeen::Announced { previous })
    }
}

impl Peer {
    /// Counts a datagram of `len` bytes from the peer (and, until its
    /// address is validated, its amplification budget).
    #[inline]
    pub fn count_rx(&mut self, len: usize) {
        self.session.stats.datagrams_rx += 1;
        self.session.stats.bytes_rx += len as u64;
        if !self.validated {
            self.rx_bytes += len as u64;
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
    pub fn check_packet<'a>(
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
