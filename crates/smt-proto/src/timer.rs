//! Timers: an enum plus a table. Only the earliest deadline leaves through
//! `Endpoint::poll_timeout`; `Endpoint::handle_timeout` handles every
//! expired one in a single `match`.

use std::time::Instant;

/// The endpoint's timers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timer {
    /// Housekeeping every `Config::tick` while any RPC is alive: counts
    /// silent ticks per RPC, sends RESEND / NEED_ACK after
    /// `Config::resend_ticks`, aborts after `Config::abort_ticks`.
    Tick,
    /// Every quarter of `Config::session_idle_timeout` while a handshake's
    /// session exists: forgets those idle for the whole timeout.
    IdleSweep,
    /// At the next tick after the first ACK of a batch was queued (a tick
    /// after it when no tick is armed): sends the pending ACKs (a full
    /// batch of `ACK_MAX_IDS` leaves earlier, with the next request to its
    /// peer or when one more ID finds it full). The server keeps a response
    /// until it is acknowledged and asks only after several silent ticks,
    /// so up to a tick of delay costs nothing and lets completions share a
    /// packet; going off with the tick, not a tick after the ACK, costs the
    /// driver no wake-up and no timer reprogramming of its own.
    AckDelay,
}

impl Timer {
    const ALL: [Self; 3] = [Self::Tick, Self::IdleSweep, Self::AckDelay];

    pub(crate) fn slot(self) -> usize {
        match self {
            Self::Tick => 0,
            Self::IdleSweep => 1,
            Self::AckDelay => 2,
        }
    }
}

/// Deadlines of every [`Timer`].
#[derive(Clone, Debug, Default)]
pub(crate) struct TimerTable {
    deadlines: [Option<Instant>; Timer::ALL.len()],
}

impl TimerTable {
    pub(crate) fn set(&mut self, timer: Timer, at: Instant) {
        self.deadlines[timer.slot()] = Some(at);
    }

    pub(crate) fn stop(&mut self, timer: Timer) {
        self.deadlines[timer.slot()] = None;
    }

    pub(crate) fn is_set(&self, timer: Timer) -> bool {
        self.deadlines[timer.slot()].is_some()
    }

    /// When `timer` goes off, if it is set.
    pub(crate) fn deadline(&self, timer: Timer) -> Option<Instant> {
        self.deadlines[timer.slot()]
    }

    /// The earliest deadline.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.deadlines.iter().flatten().min().copied()
    }

    /// Clears and returns the first timer expired at `now`.
    pub(crate) fn pop_expired(&mut self, now: Instant) -> Option<Timer> {
        let t = Timer::ALL
            .into_iter()
            .find(|t| self.deadlines[t.slot()].is_some_and(|d| d <= now))?;
        self.stop(t);
        Some(t)
    }
}
