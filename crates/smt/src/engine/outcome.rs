//! What the engine hands to whoever waits: replies to calls (named by
//! their [`CallToken`]), requests, and cancellations of requests.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use smt_proto::ServerRpcHandle;

use crate::Error;

/// Names a call from the moment it is submitted, before it has an RPC (it
/// may wait for a handshake or for a key epoch to drain).
///
/// `seq` counts the endpoint's calls (tokens order by it: in the order
/// the calls were made) and never repeats, so a token of an ended call
/// names no other; `slot` is where the call table keeps the call
/// (`calls.rs`), reused once it ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct CallToken {
    pub(super) seq: u64,
    pub(super) slot: u32,
}

impl CallToken {
    /// Where the call table keeps the call: unique among outstanding
    /// calls, so a face can keep its own per-call state at this index.
    pub(crate) fn slot(self) -> usize {
        self.slot as usize
    }

    #[cfg(test)]
    pub(crate) fn for_test(seq: u64, slot: u32) -> Self {
        Self { seq, slot }
    }
}

/// What the engine hands to whoever waits.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The end of a call: its response or why there is none.
    Reply {
        call: CallToken,
        result: Result<Bytes, Error>,
    },
    /// A complete, authenticated request, the session it came in, and
    /// when it was delivered to the application (its handler latency runs
    /// from then to the response).
    Request {
        rpc: ServerRpcHandle,
        data: Bytes,
        session: Arc<crate::SessionInfo>,
        at: Instant,
    },
    /// The client of a delivered, unanswered request gave up on it (heard
    /// `at`).
    Cancelled { rpc: ServerRpcHandle, at: Instant },
}
