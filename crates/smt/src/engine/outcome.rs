//! What the engine hands to whoever waits: replies to calls (named by
//! their [`CallToken`]), requests, and cancellations of requests.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use smt_proto::ServerRpcHandle;

use crate::Error;

/// Names a call from the moment it is submitted, before it has an RPC (it
/// may wait for a handshake or for a key epoch to drain).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct CallToken(pub(super) u64);

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
