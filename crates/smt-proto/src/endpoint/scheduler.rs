//! The send order and the grants: which outgoing message sends next
//! (sender-side SRPT, `send.rs`) and which incoming messages get grants
//! (receiver-side SRPT with overcommit, `grants.rs`). It holds candidates,
//! not RPCs: entries name messages by key and may be stale; the code that
//! takes them checks the RPC tables.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use super::MsgKey;

#[derive(Debug, Default)]
pub(crate) struct Scheduler {
    /// Outgoing messages that may have packets to send, ranked by bytes
    /// left to send: every sendable message is here, so choosing the next
    /// packet takes the smallest entry instead of scanning every RPC. A
    /// heap (its vector is reused: no allocation per message);
    /// `Outgoing::queued` keeps a message from being in it twice. Entries
    /// may be stale (gone, waiting for a grant, or ranked by an old
    /// count); `write_next_data` drops or re-ranks those.
    pub sendable: BinaryHeap<Reverse<(u64, MsgKey)>>,
    /// Incoming messages that may still need grants (same idea, for
    /// `update_grants`).
    pub grantable: BTreeSet<MsgKey>,
    /// Data arrived since grants were last computed: `poll_transmit`
    /// computes them once for everything received in between, so a batch
    /// of packets yields one GRANT per message, not one per packet.
    pub grants_dirty: bool,
}
