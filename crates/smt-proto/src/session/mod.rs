//! Per-peer security state: traffic keys, the message-ID allocator and the
//! replay guard (seed 001 §4.2, §4.4.1).

mod ids;
mod keys;
mod replay;

pub use ids::IdAllocator;
pub use keys::{Role, SessionKeys};
pub use replay::{ReplayCheck, ReplayWindow};

use crate::stats::Stats;

/// Everything the endpoint keeps per peer.
#[derive(Debug)]
pub(crate) struct Session {
    pub keys: SessionKeys,
    pub ids: IdAllocator,
    pub replay: ReplayWindow,
    pub records_sealed: u64,
    pub stats: Stats,
}

impl Session {
    pub fn new(keys: SessionKeys, id_limit: u64, replay_window: u64) -> Self {
        let ids = IdAllocator::new(keys.role, id_limit);
        Self {
            keys,
            ids,
            replay: ReplayWindow::new(replay_window),
            records_sealed: 0,
            stats: Stats::default(),
        }
    }

    /// Whether `id` names an RPC this side started (its low bit is ours).
    pub fn is_local_id(&self, id: u64) -> bool {
        id & 1 == self.keys.role.id_bit()
    }
}
