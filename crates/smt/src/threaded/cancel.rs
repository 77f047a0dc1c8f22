//! Telling a server's application that a client gave up on a request it
//! holds (the core's `Event::RequestCancelled`: the client cancelled the
//! call or passed its deadline, and said so with RPC_UNKNOWN).
//!
//! Watching is lazy: a request costs nothing until its application asks
//! for its [`Cancellation`]. A cancellation is remembered in a set
//! (usually empty) until the request is answered or dropped, so a signal
//! asked for later fires at once.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use smt_proto::ServerRpcHandle;

/// Says whether the client of an [`crate::IncomingRequest`] has given up
/// on it: it cancelled the call (dropped its future, or its deadline
/// passed) and the server heard so (RPC_UNKNOWN), or the endpoint closed.
/// A response would no longer reach anyone, so the handler may stop
/// working. Cheap to clone; it stays valid after the request is answered
/// (and then never fires).
///
/// From [`crate::IncomingRequest::cancellation`].
#[derive(Clone)]
pub struct Cancellation(Arc<Signal>);

impl std::fmt::Debug for Cancellation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cancellation")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl Cancellation {
    /// Whether the client has given up.
    pub fn is_cancelled(&self) -> bool {
        self.0.rx.is_disconnected()
    }

    /// Resolves when the client gives up (never, if the request is
    /// answered first: race it against the work, e.g. in `select!`).
    pub async fn cancelled(&self) {
        // Nothing is ever sent: the receive ends when the sender goes.
        let _ = self.0.rx.recv_async().await;
    }

    /// Blocks until the client gives up or `timeout` passes; returns
    /// whether it gave up.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        matches!(
            self.0.rx.recv_timeout(timeout),
            Err(flume::RecvTimeoutError::Disconnected)
        )
    }
}

/// One request's signal: firing drops the only sender, which wakes every
/// receiver (async or blocking). The sender lives inside the signal, so a
/// watcher that goes away without firing (the request was answered)
/// never makes it look fired.
struct Signal {
    tx: Mutex<Option<flume::Sender<()>>>,
    rx: flume::Receiver<()>,
}

impl Signal {
    fn new() -> Arc<Self> {
        let (tx, rx) = flume::bounded(1);
        Arc::new(Self {
            tx: Mutex::new(Some(tx)),
            rx,
        })
    }

    fn fire(&self) {
        let mut tx = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        tx.take();
    }
}

/// The requests whose cancellation someone watches, and those cancelled
/// before anyone asked. Lives under the engine's lock.
#[derive(Default)]
pub(crate) struct Watches {
    watched: HashMap<ServerRpcHandle, Arc<Signal>>,
    cancelled: HashSet<ServerRpcHandle>,
}

impl Watches {
    /// The signal for `rpc` (fired already if its client has given up).
    pub(super) fn watch(&mut self, rpc: ServerRpcHandle) -> Cancellation {
        if self.cancelled.contains(&rpc) {
            return fired();
        }
        Cancellation(self.watched.entry(rpc).or_insert_with(Signal::new).clone())
    }

    /// The client gave up on `rpc`.
    pub(super) fn cancelled(&mut self, rpc: ServerRpcHandle) {
        if let Some(signal) = self.watched.remove(&rpc) {
            signal.fire();
        }
        // Kept until the request is answered or dropped, for later asks.
        self.cancelled.insert(rpc);
    }

    /// `rpc` was answered or dropped: nothing to watch anymore.
    pub(super) fn answered(&mut self, rpc: ServerRpcHandle) {
        if !self.watched.is_empty() {
            self.watched.remove(&rpc);
        }
        if !self.cancelled.is_empty() {
            self.cancelled.remove(&rpc);
        }
    }

    /// The endpoint closed: every request's client has lost its server.
    pub(super) fn close(&mut self) {
        for (_, signal) in self.watched.drain() {
            signal.fire();
        }
        self.cancelled.clear();
    }
}

/// A signal that has fired already (the request can no longer be
/// answered).
pub(crate) fn fired() -> Cancellation {
    let signal = Signal::new();
    signal.fire();
    Cancellation(signal)
}
