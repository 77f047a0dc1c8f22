//! Requests the server refuses unexecuted, and what it says about them
//! afterwards (issue #24, item 2).
//!
//! A request is refused when it completes while the application holds
//! `Config::max_pending_requests` (`recv.rs`, `refuse_request`), or when
//! its first packet to arrive is not admitted by the bounds on partial
//! requests and buffered bytes (`limits.rs`). Either way the ID is retired
//! *as refused* in the replay guard and the client hears OVERLOADED at
//! once: the request did not run and never will under that ID, so
//! retrying is safe. A later RESEND or DATA about the ID hears OVERLOADED
//! again (the first may have been lost), never ABANDONED ("may have
//! run"), even after the guard's floor has slid past the ID
//! (`ReplayWindow::is_refused`).

use super::{Endpoint, ServerRpcHandle};
use crate::wire::Body;

impl Endpoint {
    /// The first packet of a new request was not admitted (the peer's or
    /// the endpoint's bounds are full): refuse the request. The packet
    /// is unauthenticated, so an ID more than one replay window past the
    /// guard's range is left alone (dropped unanswered, as before): retiring
    /// it would slide the guard past IDs the genuine client has yet to
    /// send. A client within its credit (`credit.rs`) never sends that far
    /// ahead.
    pub(crate) fn refuse_unadmitted(&mut self, key: ServerRpcHandle) {
        let Some(epoch) = self
            .peers
            .get_mut(&key.peer)
            .and_then(|s| s.epoch_mut(key.epoch))
        else {
            return;
        };
        if epoch.replay.windows_ahead(key.id) > 1 {
            return;
        }
        epoch.replay.refuse(key.id);
        self.count_refused(key);
        self.note_request(key.peer, true);
        self.queue_control(key.peer, key.epoch, key.id, Body::Overloaded);
    }

    /// Counts a refused request, for the endpoint and its peer.
    pub(crate) fn count_refused(&mut self, key: ServerRpcHandle) {
        self.stats.requests_refused += 1;
        if let Some(s) = self.peers.get_mut(&key.peer) {
            s.stats.requests_refused += 1;
        }
    }

    /// Whether `key` names a request we refused; if so, says OVERLOADED
    /// again (a packet about it means the client has not heard).
    pub(crate) fn answer_if_refused(&mut self, key: ServerRpcHandle) -> bool {
        let refused = self
            .peers
            .get(&key.peer)
            .and_then(|s| s.epoch(key.epoch))
            .is_some_and(|e| e.replay.is_refused(key.id));
        if refused {
            self.queue_control(key.peer, key.epoch, key.id, Body::Overloaded);
        }
        refused
    }
}
