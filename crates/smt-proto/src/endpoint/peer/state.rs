//! Where an address is on its way to keys: a handshake under way (its
//! early datagrams waiting), new keys held until the peer proves its
//! address, or keys installed. Every transition is a method here, so the
//! three facts the handshake code once kept in three fields (keys
//! installed, keys held, early datagrams) cannot disagree.
//!
//! A peer's state lives with its handshake (`handshake/conn.rs`), in the
//! table of handshakes `Peers` keeps beside the sessions; the session
//! itself is the peer entry's.

use crate::crypto::TAG_LEN;
use crate::handshake::AddressProof;
use crate::wire::{Packet, PacketType};
use crate::SessionKeys;

/// Datagrams buffered per peer while its keys are not installed yet (or
/// while new keys wait for the peer to prove its address).
pub(crate) const MAX_EARLY: usize = 64;
/// ... and their bytes: datagrams may be up to 64 KiB, so the count alone
/// would let each handshake hold 4 MiB.
pub(crate) const MAX_EARLY_BYTES: usize = 128 * 1024;

/// Where a handshake's peer is on its way to keys.
#[derive(Default)]
pub(crate) enum PeerState {
    /// No keys yet: datagrams that overtake the handshake (1-RTT data
    /// can overtake the client's Finished) wait in `early`.
    Handshaking { early: Vec<Vec<u8>> },
    /// The handshake gave keys for a peer that already has a session; they
    /// wait aside until the peer proves its address ([`Held`]).
    KeysHeld { held: Held, early: Vec<Vec<u8>> },
    /// The keys are installed: the handshake stays a while only to answer
    /// late copies of the peer's last flight.
    #[default]
    Established,
}

/// What became of a datagram offered to held keys
/// ([`PeerState::offer_to_held`]).
pub(crate) enum Offer {
    /// No keys are held, or it is a HANDSHAKE packet, or the stash is full.
    Refused,
    /// Kept, to be handled once the keys are proven.
    Stashed,
    /// It proves the peer's address: the held keys, taken (the state is
    /// `Handshaking` until they are installed).
    Proof(Held),
}

/// A responder's keys for a peer that already has a session, held aside
/// until the peer proves its address ([`AddressProof`]): a spoofed first
/// flight must not replace the session of the address it claims.
pub(crate) struct Held {
    pub(crate) keys: SessionKeys,
    pub(crate) next: Option<SessionKeys>,
    pub(crate) proof: AddressProof,
    /// The peer's datagrams that the established session refused, kept to
    /// be processed under the new keys once they are proven.
    pub(crate) stash: Vec<Vec<u8>>,
}

impl PeerState {
    /// A handshake just opened.
    pub(crate) fn handshaking() -> Self {
        Self::Handshaking { early: Vec::new() }
    }

    /// Whether the handshake's keys are installed.
    #[inline]
    pub(crate) fn keys_installed(&self) -> bool {
        matches!(self, Self::Established)
    }

    /// Whether the handshake has produced keys (installed or held).
    pub(crate) fn has_keys(&self) -> bool {
        !matches!(self, Self::Handshaking { .. })
    }

    /// The keys held aside, if any.
    pub(crate) fn held_mut(&mut self) -> Option<&mut Held> {
        match self {
            Self::KeysHeld { held, .. } => Some(held),
            _ => None,
        }
    }

    /// Keeps a datagram that came before the keys were installed; false if
    /// they are installed or the buffer is full.
    pub(crate) fn stash_early(&mut self, datagram: &[u8]) -> bool {
        match self {
            Self::Handshaking { early } | Self::KeysHeld { early, .. }
                if early_fits(early, datagram.len()) =>
            {
                early.push(datagram.to_vec());
                true
            }
            _ => false,
        }
    }

    /// Handshaking → KeysHeld: the keys wait for the proof of the address.
    pub(crate) fn hold(&mut self, held: Held) {
        let early = self.take_early();
        *self = Self::KeysHeld { held, early };
    }

    /// A datagram from the peer that its established session refused:
    /// with keys held, either the proof that makes them current or kept for
    /// after the proof.
    pub(crate) fn offer_to_held(&mut self, datagram: &[u8]) -> Offer {
        let Some(held) = self.held_mut() else {
            return Offer::Refused;
        };
        let handshake = Packet::new_checked(datagram)
            .map_or(true, |p| p.packet_type() == PacketType::HANDSHAKE);
        if handshake {
            return Offer::Refused;
        }
        if !held.is_proven_by(datagram) {
            if !early_fits(&held.stash, datagram.len()) {
                return Offer::Refused;
            }
            held.stash.push(datagram.to_vec());
            return Offer::Stashed;
        }
        match self.take_held() {
            Some(held) => Offer::Proof(held),
            None => Offer::Refused,
        }
    }

    /// KeysHeld → Handshaking: the held keys are taken (to be installed at
    /// once, [`PeerState::establish`]).
    pub(crate) fn take_held(&mut self) -> Option<Held> {
        match std::mem::take(self) {
            Self::KeysHeld { held, early } => {
                *self = Self::Handshaking { early };
                Some(held)
            }
            other => {
                *self = other;
                None
            }
        }
    }

    /// → Established: the keys are installed; returns the early datagrams,
    /// to be handled under them.
    pub(crate) fn establish(&mut self) -> Vec<Vec<u8>> {
        let early = self.take_early();
        *self = Self::Established;
        early
    }

    fn take_early(&mut self) -> Vec<Vec<u8>> {
        match self {
            Self::Handshaking { early } | Self::KeysHeld { early, .. } => std::mem::take(early),
            Self::Established => Vec::new(),
        }
    }
}

impl Held {
    /// Whether `datagram` is a control packet authenticated under the keys
    /// that prove the peer's address (their epoch's key phase, their MAC).
    pub(crate) fn is_proven_by(&self, datagram: &[u8]) -> bool {
        let (keys, phase) = match self.proof {
            AddressProof::FirstKeys => (Some(&self.keys), false),
            AddressProof::NextKeys => (self.next.as_ref(), true),
            _ => (None, false),
        };
        let Some(keys) = keys else {
            return false;
        };
        let Ok(packet) = Packet::new_checked(datagram) else {
            return false;
        };
        if !packet.packet_type().is_control() || packet.key_phase() != phase {
            return false;
        }
        let Some(split) = datagram.len().checked_sub(TAG_LEN) else {
            return false;
        };
        let (body, tag) = datagram.split_at(split);
        let Ok(tag) = <&[u8; TAG_LEN]>::try_from(tag) else {
            return false;
        };
        keys.rx.verify_control_tag(body, tag).is_ok()
    }
}

/// Whether one more datagram of `len` bytes fits a buffer of early ones.
pub(crate) fn early_fits(buffered: &[Vec<u8>], len: usize) -> bool {
    buffered.len() < MAX_EARLY
        && buffered.iter().map(Vec::len).sum::<usize>() + len <= MAX_EARLY_BYTES
}

#[cfg(test)]
mod tests {
    use super::{early_fits, PeerState, MAX_EARLY, MAX_EARLY_BYTES};

    #[test]
    fn early_datagrams_are_bounded_by_count_and_bytes() {
        let mut held: Vec<Vec<u8>> = Vec::new();
        while early_fits(&held, 60_000) {
            held.push(vec![0; 60_000]);
        }
        assert_eq!(
            held.len(),
            2,
            "two 60 kB datagrams fit in 128 KiB, a third does not"
        );
        let total: usize = held.iter().map(Vec::len).sum();
        assert!(total <= MAX_EARLY_BYTES);
        let mut small: Vec<Vec<u8>> = Vec::new();
        while early_fits(&small, 100) {
            small.push(vec![0; 100]);
        }
        assert_eq!(small.len(), MAX_EARLY);
    }

    #[test]
    fn early_datagrams_wait_for_the_keys_and_no_longer() {
        let mut state = PeerState::handshaking();
        assert!(state.stash_early(b"1-rtt data"));
        assert!(!state.keys_installed() && !state.has_keys());
        assert_eq!(state.take_held().map(|_| ()), None, "no keys held");
        assert_eq!(state.establish(), vec![b"1-rtt data".to_vec()]);
        assert!(state.keys_installed());
        assert!(!state.stash_early(b"late"), "keys installed: no stash");
    }
}
