//! The background thread: it leads whenever no caller does (timers,
//! async callers, `ready_fd` users, acknowledgements for responses sent
//! earlier), and otherwise looks again every tick.

use std::sync::atomic::Ordering;
use std::sync::{Arc, TryLockError};
use std::time::Duration;

use super::handoff::lock_ignoring_poison;
use super::{Inner, Leader, Locked, Shared};

/// Ticks past the engine's deadline after which a leading task counts as
/// no longer polled (its timer fires within one; a busy runtime may be
/// late by a few).
const STALL_TICKS: u32 = 4;

impl Shared {
    /// Starts the background thread.
    pub(crate) fn spawn_background(self: &Arc<Self>, name: String) -> std::io::Result<()> {
        let shared = self.clone();
        let stopped = lock_ignoring_poison(&self.stopped_tx).take();
        let handle = std::thread::Builder::new().name(name).spawn(move || {
            shared.background();
            // Tells every `close` that the endpoint has stopped.
            drop(stopped);
        })?;
        *lock_ignoring_poison(&self.background) = Some(handle);
        Ok(())
    }

    /// For an endpoint that runs no background thread (tests): a close
    /// does not wait for one to stop.
    pub(crate) fn forget_background(&self) {
        lock_ignoring_poison(&self.stopped_tx).take();
    }

    /// Whether the background thread must take over at once when no
    /// caller drives: someone waits without driving, or input is piling up
    /// (requests queued faster than the accepters take them, datagrams
    /// left in the socket) while the accepters are busy.
    /// Input piling up is left to tasks that took the lead since the
    /// background thread's last look: they come back for it (an
    /// `accept_async` takes queued requests without the lock, then leads),
    /// and waking the background thread for it was a hand-off per batch on
    /// a busy async server.
    pub(super) fn background_has_work(&self, g: &Inner) -> bool {
        let piling = g.engine.more_to_read() || !self.requests.is_empty();
        self.nobody_else_drives(g) || (piling && g.tasks.idle_since_look())
    }

    /// Whether someone waits whom no caller will drive for: async
    /// callers off the reactor, `ready_fd` users, calls parked in the
    /// engine, a close.
    fn nobody_else_drives(&self, g: &Inner) -> bool {
        self.async_waiters.load(Ordering::Acquire) > 0
            || self.ready.in_use()
            || g.engine.has_parked_calls()
            || g.engine.is_closing()
    }

    /// Wakes the background thread (parked while a caller led) if it has
    /// work that cannot wait for its next look, or a timer the engine's
    /// last flush or turn left due. A timer due later can wait: it looks
    /// every tick, the timers' own granularity, and waking it after every
    /// call would cost the hand-off this design avoids. Due is reckoned at
    /// that flush or turn's time, a moment ago, not read from the clock
    /// again (a read per call, ~45 instructions): a deadline that fell
    /// due since is one of those that wait for the next look.
    pub(super) fn wake_background_if_needed(&self, g: &mut Inner) {
        if g.background_parked.is_none() {
            return;
        }
        let due = g
            .engine
            .deadline()
            .is_some_and(|d| d <= g.engine.last_now());
        if due || self.background_has_work(g) {
            self.wake_background(g);
        }
    }

    /// Leads whenever no caller does; while one does, looks again every
    /// protocol tick ([`Shared::next_look`]), and at once when told of
    /// work no caller waits for. A caller that stops driving is thus
    /// relieved within a tick without having to wake this thread, which
    /// would cost a hand-off per RPC.
    pub(super) fn background(self: Arc<Self>) {
        let span = tracing::debug_span!("smt_background");
        let _entered = span.enter();
        let mut g = self.lock();
        while !g.closed {
            if self.background_must_lead(&g) {
                g = self.lead_in_background(g);
                continue;
            }
            g.tasks.looked();
            let look = self.next_look(&g);
            g.background_parked = Some(std::thread::current());
            drop(g);
            g = self.look_after(look);
            g.background_parked = None;
        }
    }

    /// How long the background thread parks before its next look. A
    /// leader runs the timers itself: a leading caller thread sleeps on
    /// the endpoint's alarm, a leading task on its runtime's timer. So
    /// while one leads the look is once a tick, for a leader that
    /// resigned without a successor (then a deadline runs at most a tick
    /// late, the timers' own granularity) or a stalled task; looking at
    /// every deadline as well (the tick, an ACK delay) woke this thread
    /// about three times a millisecond beside a caller that had them in
    /// hand. With nobody leading, it looks at the next deadline.
    fn next_look(&self, g: &Inner) -> Duration {
        let tick = g.engine.tick();
        if g.leader.is_some() {
            return tick;
        }
        let now = g.engine.now();
        match g.engine.deadline() {
            Some(d) if d > now => tick.min(d - now),
            _ => tick,
        }
    }

    /// Whether the background thread takes the lead at a look: nobody
    /// leads, unless tasks took the lead since its last look (they come
    /// back for it between requests or calls, and taking it from them is
    /// a hand-off each time) and nothing needs it now; or a leading task
    /// stalled.
    fn background_must_lead(&self, g: &Inner) -> bool {
        if g.leader.is_some() {
            return self.leader_stalled(g);
        }
        let due = g.engine.deadline().is_some_and(|d| d <= g.engine.now());
        g.tasks.idle_since_look() || due || self.nobody_else_drives(g)
    }

    /// Whether a leading task has stopped being polled: its runtime left
    /// the engine's deadline overdue by more than `STALL_TICKS` ticks
    /// (the reactor's timer would have woken it within one). The
    /// background thread then takes over; the task takes the lead back,
    /// or follows, when it is polled again.
    fn leader_stalled(&self, g: &Inner) -> bool {
        let Some(Leader::Task(_)) = g.leader else {
            return false;
        };
        let overdue = g.engine.now().checked_sub(STALL_TICKS * g.engine.tick());
        g.engine
            .deadline()
            .is_some_and(|d| overdue.is_some_and(|o| d < o))
    }

    /// Drives until a caller takes over or the close ends: timers, and
    /// receiving what arrives while nobody waits (async callers, ready_fd
    /// users, acknowledgements and grants for responses sent earlier).
    pub(super) fn lead_in_background<'a>(self: &'a Arc<Self>, mut g: Locked<'a>) -> Locked<'a> {
        g.leader = Some(Leader::Background);
        // A stalled task's waker and sleep are no longer the leader's.
        g.sleep = None;
        g.tasks.forget_leader();
        loop {
            self.turn(&mut g);
            if g.closed || g.leader != Some(Leader::Background) {
                return g;
            }
            g = self.sleep(g);
            if g.leader != Some(Leader::Background) {
                return g;
            }
        }
    }
}

impl Shared {
    /// Wakes the background thread if it is parked (once the lock is
    /// released).
    pub(super) fn wake_background(&self, g: &mut Inner) {
        if let Some(thread) = g.background_parked.take() {
            self.background_called.store(true, Ordering::Release);
            g.wakes.push(thread);
        }
    }

    /// Parks for `look`, then takes the lock; a look nobody asked for is
    /// skipped while the lock is busy (someone is driving: contending for
    /// the lock cost two context switches a look), and parks again.
    fn look_after(&self, look: Duration) -> Locked<'_> {
        loop {
            std::thread::park_timeout(look);
            if self.background_called.swap(false, Ordering::AcqRel) {
                return self.lock();
            }
            match self.inner.try_lock() {
                Ok(g) => return Locked::new(g),
                Err(TryLockError::Poisoned(e)) => return Locked::new(e.into_inner()),
                Err(TryLockError::WouldBlock) => {}
            }
        }
    }
}
