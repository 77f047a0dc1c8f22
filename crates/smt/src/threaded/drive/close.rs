//! Closing: gracefully (in-flight RPCs get the engine's grace period),
//! then every waiter wakes with `Error::Closed`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::Thread;

use super::handoff::lock_ignoring_poison;
use super::{Inner, Shared, Waiter};

impl Shared {
    /// Begins a graceful close; the background thread (or a caller) ends it.
    pub(crate) fn begin_close(self: &Arc<Self>) {
        let mut g = self.lock();
        if g.closed || g.engine.is_closing() {
            return;
        }
        g.engine.close();
        // The acknowledgements it queued leave now.
        self.settle(&mut g);
        self.wake_leader(&mut g);
        self.wake_background(&mut g);
    }

    /// Closes gracefully and waits until the endpoint has stopped (its
    /// background thread gone, its socket closed).
    pub(crate) fn close(self: &Arc<Self>) {
        self.begin_close();
        // Disconnected once the background thread has exited.
        let _ = self.stopped.recv();
        self.join_background();
    }

    /// Closes gracefully and waits, asynchronously, until the endpoint has
    /// stopped.
    pub(crate) async fn close_async(self: &Arc<Self>) {
        self.begin_close();
        let _ = self.stopped.recv_async().await;
        // Exited already: the join returns at once.
        self.join_background();
    }

    /// What dropping the last handle does: a graceful close, finished at
    /// once (socket closed, background thread joined) when nothing is in
    /// flight; otherwise the background thread finishes it within the
    /// close's grace period and exits.
    pub(crate) fn close_on_drop(self: &Arc<Self>) {
        self.begin_close();
        let idle = {
            let mut g = self.lock();
            let idle = !g.closed && g.engine.finished_closing();
            if idle {
                self.finish_close(&mut g);
            }
            g.closed
        };
        if idle {
            self.join_background();
        }
    }

    /// Joins the background thread if it has not been joined yet, unless
    /// this is the background thread itself (a key resolver or acceptor
    /// owning the last handle).
    pub(super) fn join_background(&self) {
        let mut slot = lock_ignoring_poison(&self.background);
        if slot
            .as_ref()
            .is_some_and(|h| h.thread().id() == std::thread::current().id())
        {
            return;
        }
        if let Some(handle) = slot.take() {
            drop(slot);
            let _ = handle.join();
        }
    }

    /// Ends the close: every waiting call fails with [`Error::Closed`](crate::Error::Closed),
    /// and every waiter wakes to see it: parked or sleeping threads,
    /// async accepters (the request queue disconnects), callers waiting
    /// for a place (blocking or async), `ready_fd` pollers.
    pub(super) fn finish_close(self: &Arc<Self>, g: &mut Inner) {
        g.engine.fail_all_calls();
        self.route(g);
        // Requests nobody accepted: their clients hear ABANDONED before
        // the socket goes, instead of waiting for their own timeout.
        while let Ok(request) = self.requests.try_recv() {
            g.engine.abandon(request.rpc);
        }
        // Requests the application holds can no longer be answered.
        g.watches.close();
        g.requests_tx = None;
        g.engine.flush();
        g.engine.close_socket();
        g.watch = None;
        g.closed = true;
        self.closed.store(true, Ordering::Release);
        let parked: Vec<Thread> = g
            .calls
            .values()
            .filter_map(|w| match w {
                Waiter::Thread { slot, parked: true } => Some(slot.thread().clone()),
                _ => None,
            })
            .collect();
        let accepting = std::mem::take(&mut g.accepting);
        for thread in parked.into_iter().chain(accepting) {
            g.wakes.push(thread);
        }
        self.wake_leader(g);
        g.tasks.close(&mut g.wakes);
        self.wake_background(g);
        self.permits.relay_close();
        self.ready.mark_closed();
    }
}
