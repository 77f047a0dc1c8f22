//! A KEY_UPDATE packet from the peer, checked against its keys: whether it
//! confirms our announcement, repeats one we already confirmed, or
//! announces the peer's next epoch.

use std::time::Instant;

use super::{split_tag, Peer};
use crate::crypto::TAG_LEN;
use crate::error::DropReason;
use crate::wire::{Body, Packet, Repr};

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
    pub(crate) fn take_key_update(
        &mut self,
        now: Instant,
        phase: bool,
        datagram: &[u8],
    ) -> Result<KeyUpdateSeen, DropReason> {
        let already = self.session.current.phase() == phase;
        let rx = match already {
            true => self.session.current.rx.clone(),
            false => self.session.next_keys().ok_or(DropReason::KeyPhase)?.rx,
        };
        let (body, tag) = split_tag(datagram)?;
        if rx.verify_control_tag(body, tag).is_err() {
            return Err(self.refused_key_update(already, phase, body, tag));
        }
        self.authenticated(now);
        let packet = Packet::new_checked(body).map_err(|_| DropReason::Malformed)?;
        let repr = Repr::parse(&packet).map_err(|_| DropReason::Malformed)?;
        if repr.body != Body::KeyUpdate {
            return Err(DropReason::Malformed);
        }
        Ok(self.key_update_seen(already, repr.id))
    }

    /// Why a KEY_UPDATE whose MAC did not verify is dropped. A late copy
    /// of an announcement or confirmation for the epoch we already left
    /// (its phase is the previous epoch's) is stale, not forged: counted
    /// as a duplicate, so it neither looks like an attack nor ends a
    /// coalesced datagram.
    fn refused_key_update(
        &self,
        already: bool,
        phase: bool,
        body: &[u8],
        tag: &[u8; TAG_LEN],
    ) -> DropReason {
        let stale = self
            .session
            .previous
            .as_ref()
            .filter(|e| !already && e.phase() == phase)
            .is_some_and(|e| e.rx.verify_control_tag(body, tag).is_ok());
        match stale {
            true => DropReason::Duplicate,
            false => DropReason::BadControlTag,
        }
    }

    /// What an authenticated KEY_UPDATE with ID `id` asks, `already` if
    /// its phase is the current epoch's.
    fn key_update_seen(&mut self, already: bool, id: u64) -> KeyUpdateSeen {
        if id == super::super::KEY_UPDATE_CONFIRM {
            if already {
                self.session.key_update_unconfirmed = None;
            }
            return KeyUpdateSeen::Confirmed;
        }
        if already {
            return KeyUpdateSeen::Repeated {
                current: self.session.current.number,
            };
        }
        let previous = self.session.previous.as_ref().map(|e| e.number);
        KeyUpdateSeen::Announced { previous }
    }
}
