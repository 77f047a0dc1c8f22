//! Per-peer security state: traffic keys by epoch, the message-ID
//! allocator and the replay guard (the SMT paper §4.2, §4.4.1, §4.5.2).
//!
//! A session has a *current* key epoch and, while its RPCs finish, the
//! *previous* one. Message IDs and the replay guard belong to an epoch: a new
//! epoch has new keys, so its IDs start again (§4.5.2). The key-phase bit of
//! every packet names the epoch (its parity).

mod ids;
mod keys;
mod replay;

use std::sync::Arc;

pub use ids::IdAllocator;
pub use keys::{Role, SessionKeys};
pub use replay::{ReplayCheck, ReplayWindow};

use crate::crypto::{KeyUpdate, PacketCipher};
use crate::stats::Stats;

/// The keys and ID spaces of one key epoch.
#[derive(Debug)]
pub(crate) struct Epoch {
    pub number: u64,
    pub tx: Arc<dyn PacketCipher>,
    pub rx: Arc<dyn PacketCipher>,
    pub ids: IdAllocator,
    pub replay: ReplayWindow,
    pub records_sealed: u64,
}

impl Epoch {
    fn new(
        number: u64,
        role: Role,
        tx: Arc<dyn PacketCipher>,
        rx: Arc<dyn PacketCipher>,
        limits: (u64, u64),
    ) -> Self {
        Self {
            number,
            tx,
            rx,
            ids: IdAllocator::new(role, limits.0),
            replay: ReplayWindow::new(limits.1),
            records_sealed: 0,
        }
    }

    /// The key-phase bit of this epoch's packets.
    pub(crate) fn phase(&self) -> bool {
        self.number & 1 == 1
    }
}

/// The next epoch's keys, in this side's order.
pub(crate) struct NextKeys {
    pub tx: Arc<dyn PacketCipher>,
    pub rx: Arc<dyn PacketCipher>,
    pub update: Option<Arc<dyn KeyUpdate>>,
}

/// Everything the endpoint keeps per peer.
#[derive(Debug)]
pub(crate) struct Session {
    pub role: Role,
    pub current: Epoch,
    pub previous: Option<Epoch>,
    pub update: Option<Arc<dyn KeyUpdate>>,
    /// (ID limit, replay window) for new epochs.
    limits: (u64, u64),
    /// Ticks since this side moved to a new epoch and announced it with
    /// KEY_UPDATE, while the peer has not confirmed (None: confirmed).
    pub key_update_unconfirmed: Option<u32>,
    pub stats: Stats,
}

impl Session {
    pub(crate) fn new(keys: SessionKeys, id_limit: u64, replay_window: u64) -> Self {
        let limits = (id_limit, replay_window);
        let current = Epoch::new(0, keys.role, keys.tx, keys.rx, limits);
        Self {
            key_update_unconfirmed: None,
            role: keys.role,
            current,
            previous: None,
            update: keys.update,
            limits,
            stats: Stats::default(),
        }
    }

    /// Whether `id` names an RPC this side started (its low bit is ours).
    pub(crate) fn is_local_id(&self, id: u64) -> bool {
        id & 1 == self.role.id_bit()
    }

    /// The epoch a packet with key phase `phase` belongs to, if this side
    /// still has (or already has) its keys.
    pub(crate) fn epoch_by_phase(&self, phase: bool) -> Option<&Epoch> {
        if self.current.phase() == phase {
            return Some(&self.current);
        }
        self.previous.as_ref()
    }

    /// Epoch `number`, if still held.
    pub(crate) fn epoch(&self, number: u64) -> Option<&Epoch> {
        if self.current.number == number {
            return Some(&self.current);
        }
        self.previous.as_ref().filter(|e| e.number == number)
    }

    pub(crate) fn epoch_mut(&mut self, number: u64) -> Option<&mut Epoch> {
        if self.current.number == number {
            return Some(&mut self.current);
        }
        self.previous.as_mut().filter(|e| e.number == number)
    }

    /// The next epoch's ciphers in this side's (tx, rx) order, without
    /// switching to them.
    pub(crate) fn next_keys(&self) -> Option<NextKeys> {
        let next = self.update.as_ref()?.next_epoch();
        let (tx, rx) = match self.role {
            Role::Client => (next.client_to_server, next.server_to_client),
            Role::Server => (next.server_to_client, next.client_to_server),
        };
        Some(NextKeys {
            tx,
            rx,
            update: next.update,
        })
    }

    /// Switches to a next epoch with the given keys (a handshake's second
    /// keys, e.g. the 0-RTT exchange's fs-key).
    pub(crate) fn advance_to(&mut self, keys: SessionKeys) {
        self.install_epoch(NextKeys {
            tx: keys.tx,
            rx: keys.rx,
            update: keys.update,
        });
    }

    /// Switches to the next epoch (the current one becomes previous; the
    /// old previous is forgotten). Returns false if the keys cannot update.
    pub(crate) fn advance(&mut self) -> bool {
        let Some(keys) = self.next_keys() else {
            return false;
        };
        self.install_epoch(keys);
        true
    }

    fn install_epoch(&mut self, keys: NextKeys) {
        let next = Epoch::new(
            self.current.number + 1,
            self.role,
            keys.tx,
            keys.rx,
            self.limits,
        );
        self.previous = Some(std::mem::replace(&mut self.current, next));
        self.update = keys.update;
        self.stats.key_epoch = self.current.number;
    }
}
