//! Whether the next receive takes one datagram or a batch.
//!
//! A batch receive (`recvmmsg`, 32 slots) that finds one datagram pays its
//! set-up and an empty probe of the second slot to learn "drained"; a
//! ping-pong, which brings one datagram per wait, pays that at every
//! receive (~0.3 µs a side). A one-datagram receive (`recvmsg`) skips both
//! but leaves "drained?" unanswered. A driver whose next sleep is a
//! level-triggered wait (`ppoll`) answers it for free: the wait returns at
//! once if datagrams wait. Edge-triggered waiters (an application's own
//! loop, the threaded driver) would sleep with datagrams unread, so they
//! never get one-datagram receives.
//!
//! A burst is told by looking: every [`PROBE_EVERY`]th receive in a row is
//! a batch again, and one that finds more than one datagram (or a GRO run)
//! ends the one-datagram mode. "The wait returned at once" is no sign of a
//! burst: on one CPU the woken peer preempts the sender inside its
//! `sendto` and has answered before the sender goes to wait, so a
//! ping-pong finds its datagram waiting every time.

/// One-datagram receives in a row before a batch looks for a burst: a
/// burst waits at most this many turns of one datagram each; a ping-pong
/// pays one batch's probe in this many receives.
const PROBE_EVERY: u8 = 8;

/// The receive mode and what the last receive left unknown.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ReceivePlan {
    /// The driver's next sleep is a level-triggered wait: a receive may
    /// leave "more?" unanswered (`Engine::set_level_waits`).
    level_waits: bool,
    /// The last receive that looked found one datagram and the socket
    /// drained: traffic comes one datagram per wait.
    one_at_a_time: bool,
    /// The last receive took one datagram and did not look for more.
    unsure: bool,
    /// One-datagram receives since the last batch.
    singles: u8,
}

impl ReceivePlan {
    /// Whether the receive starting now takes one datagram only.
    pub(crate) fn one_datagram(&mut self) -> bool {
        self.unsure = false;
        let one = self.level_waits && self.one_at_a_time && self.singles < PROBE_EVERY;
        if !one {
            self.singles = 0;
        }
        one
    }

    /// The receive found the socket drained after `datagrams` in all
    /// (none: a wake-up that found nothing, which says nothing of the
    /// traffic).
    pub(crate) fn drained(&mut self, datagrams: usize) {
        if datagrams > 0 {
            self.one_at_a_time = datagrams == 1;
        }
    }

    /// A one-datagram receive got `datagrams` (a GRO run counts as many:
    /// a burst) and did not look further.
    pub(crate) fn took_one(&mut self, datagrams: usize) {
        self.unsure = true;
        self.singles = self.singles.saturating_add(1);
        self.one_at_a_time = datagrams <= 1;
    }

    /// A batch receive filled every slot: a burst.
    pub(crate) fn filled(&mut self) {
        self.one_at_a_time = false;
    }

    /// Whether the driver's next sleep is level-triggered.
    pub(crate) fn set_level_waits(&mut self, on: bool) {
        self.level_waits = on;
    }

    /// Whether the last receive took one datagram without looking for
    /// more: datagrams may wait unread.
    pub(crate) fn unsure(&self) -> bool {
        self.unsure
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level() -> ReceivePlan {
        let mut plan = ReceivePlan::default();
        plan.set_level_waits(true);
        plan
    }

    #[test]
    fn a_lone_datagram_then_drained_switches_to_one_datagram_receives() {
        let mut plan = level();
        assert!(!plan.one_datagram());
        plan.drained(1);
        assert!(plan.one_datagram());
        plan.took_one(1);
        assert!(plan.unsure());
        assert!(plan.one_datagram(), "a ping-pong stays on one datagram");
        assert!(!plan.unsure(), "a new receive clears what the last left");
    }

    #[test]
    fn every_eighth_receive_in_a_row_is_a_batch() {
        let mut plan = level();
        plan.drained(1);
        for _ in 0..PROBE_EVERY {
            assert!(plan.one_datagram());
            plan.took_one(1);
        }
        assert!(!plan.one_datagram(), "the probe");
        plan.drained(1);
        assert!(plan.one_datagram(), "still a ping-pong");
        plan.took_one(1);
        assert!(plan.one_datagram());
    }

    #[test]
    fn bursts_switch_back_to_batches() {
        let mut plan = level();
        plan.drained(1);
        for _ in 0..PROBE_EVERY {
            assert!(plan.one_datagram());
            plan.took_one(1);
        }
        assert!(!plan.one_datagram(), "the probe");
        plan.filled();
        assert!(!plan.one_datagram(), "a burst found");
        plan.drained(1);
        plan.took_one(5);
        assert!(!plan.one_datagram(), "a GRO run is a burst");
        plan.drained(1);
        plan.filled();
        assert!(!plan.one_datagram());
        plan.drained(3);
        assert!(!plan.one_datagram());
    }

    #[test]
    fn an_empty_receive_keeps_the_mode() {
        let mut plan = level();
        plan.drained(1);
        plan.drained(0);
        assert!(plan.one_datagram());
    }

    #[test]
    fn edge_triggered_waiters_always_get_batches() {
        let mut plan = ReceivePlan::default();
        plan.drained(1);
        assert!(!plan.one_datagram());
        let mut plan = level();
        plan.drained(1);
        plan.set_level_waits(false);
        assert!(!plan.one_datagram());
    }
}
