/// Outcome of checking a message ID against the replay guard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayCheck {
    /// Never delivered: may be received.
    Fresh,
    /// Delivered before, or older than the window: drop before decryption.
    Replayed,
}

/// Refused IDs remembered below the floor (8 KiB at most per key epoch,
/// and only for a peer whose requests were refused).
pub(super) const REFUSED_BELOW_MAX: usize = 1024;

/// The receive-side replay guard for peer-started message IDs (the SMT paper
/// §4.4.1, §6.1; always on).
///
/// IDs of one parity are tracked as `id >> 1`. Everything below `floor` is
/// treated as seen; `window` IDs from `floor` upwards are tracked one bit
/// each. Marking an ID beyond the window slides the floor up, forgetting the
/// oldest bits. Memory is `window / 4` bytes (seen and retired bits),
/// whatever the peer sends.
#[derive(Clone, Debug)]
pub struct ReplayWindow {
    floor: u64,
    bits: Vec<u64>,
    /// Of the marked IDs, those retired without delivery (the server said
    /// RPC_UNKNOWN for them), so a repeated question gets the same answer.
    retired: Vec<u64>,
    /// Of the retired IDs, those refused (the server said OVERLOADED: the
    /// request never ran), so a repeated question hears OVERLOADED again.
    refused: Vec<u64>,
    /// Refused IDs (parity indices) that slid below the floor, newest
    /// last, at most [`REFUSED_BELOW_MAX`] of them: a RESEND about one, after the burst
    /// that moved the floor, still hears OVERLOADED and not ABANDONED.
    refused_below: std::collections::VecDeque<u64>,
    window: u64,
}

impl ReplayWindow {
    /// A guard tracking `window` IDs individually.
    pub fn new(window: u64) -> Self {
        let words = window.div_ceil(64) as usize;
        Self {
            floor: 0,
            bits: vec![0; words],
            retired: vec![0; words],
            refused: vec![0; words],
            refused_below: std::collections::VecDeque::new(),
            window: words as u64 * 64,
        }
    }

    /// Whether `id` may still be delivered.
    pub fn check(&self, id: u64) -> ReplayCheck {
        let n = id >> 1;
        if n < self.floor {
            return ReplayCheck::Replayed;
        }
        if n - self.floor >= self.window {
            return ReplayCheck::Fresh;
        }
        if self.bit(n) {
            ReplayCheck::Replayed
        } else {
            ReplayCheck::Fresh
        }
    }

    /// Records that `id` was delivered.
    pub fn mark(&mut self, id: u64) {
        let n = id >> 1;
        if n < self.floor {
            return;
        }
        if n - self.floor >= self.window {
            self.slide_to(n + 1 - self.window);
        }
        let (w, b) = self.slot(n);
        self.bits[w] |= 1 << b;
    }

    /// Marks `id` as never to be delivered (it was retired, not executed).
    pub fn retire(&mut self, id: u64) {
        self.mark(id);
        let n = id >> 1;
        if n >= self.floor {
            let (w, b) = self.slot(n);
            self.retired[w] |= 1 << b;
        }
    }

    /// Whether `id` was retired (and is still tracked individually).
    pub fn is_retired(&self, id: u64) -> bool {
        let n = id >> 1;
        if n < self.floor || n - self.floor >= self.window {
            return false;
        }
        let (w, b) = self.slot(n);
        self.retired[w] & (1 << b) != 0
    }

    /// Marks `id` as refused unexecuted (OVERLOADED): retired, and
    /// remembered as refused even after it slides below the floor (the
    /// last `REFUSED_BELOW_MAX`, 1024, such IDs).
    pub fn refuse(&mut self, id: u64) {
        self.retire(id);
        let n = id >> 1;
        if n >= self.floor {
            let (w, b) = self.slot(n);
            self.refused[w] |= 1 << b;
        }
    }

    /// Whether `id` was refused unexecuted (and is still remembered).
    pub fn is_refused(&self, id: u64) -> bool {
        let n = id >> 1;
        if n < self.floor {
            return self.refused_below.contains(&n);
        }
        if n - self.floor >= self.window {
            return false;
        }
        let (w, b) = self.slot(n);
        self.refused[w] & (1 << b) != 0
    }

    /// How far past the tracked range `id` lies, in windows (0: inside it
    /// or below). Retiring an ID slides the floor up to it.
    pub fn windows_ahead(&self, id: u64) -> u64 {
        ((id >> 1).saturating_sub(self.floor)) / self.window
    }

    /// The lowest ID parity-index still tracked individually.
    pub fn floor(&self) -> u64 {
        self.floor
    }

    fn slot(&self, n: u64) -> (usize, u32) {
        let pos = n % self.window;
        ((pos / 64) as usize, (pos % 64) as u32)
    }

    fn bit(&self, n: u64) -> bool {
        let (w, b) = self.slot(n);
        self.bits[w] & (1 << b) != 0
    }

    /// Moves the floor up to `new_floor`, clearing the bits of the IDs that
    /// leave the window (their slots are reused by the IDs entering it).
    fn slide_to(&mut self, new_floor: u64) {
        let end = new_floor.min(self.floor + self.window);
        for n in self.floor..end {
            let (w, b) = self.slot(n);
            if self.refused[w] & (1 << b) != 0 {
                self.remember_refused_below(n);
            }
            self.bits[w] &= !(1 << b);
            self.retired[w] &= !(1 << b);
            self.refused[w] &= !(1 << b);
        }
        self.floor = new_floor;
    }
}

impl ReplayWindow {
    fn remember_refused_below(&mut self, n: u64) {
        if self.refused_below.len() >= REFUSED_BELOW_MAX {
            self.refused_below.pop_front();
        }
        self.refused_below.push_back(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivered_ids_are_replays() {
        let mut r = ReplayWindow::new(64);
        assert_eq!(r.check(2), ReplayCheck::Fresh);
        r.mark(2);
        assert_eq!(r.check(2), ReplayCheck::Replayed);
        assert_eq!(r.check(4), ReplayCheck::Fresh);
    }

    #[test]
    fn sliding_forgets_nothing_it_must_remember() {
        let mut r = ReplayWindow::new(64);
        r.mark(10);
        r.mark(2 * 1000);
        // ID 10 (index 5) fell below the floor: still rejected.
        assert_eq!(r.check(10), ReplayCheck::Replayed);
        // Unseen but older than the window: rejected too (bounded memory).
        assert_eq!(r.check(12), ReplayCheck::Replayed);
        assert_eq!(r.check(2 * 999), ReplayCheck::Fresh);
        assert_eq!(r.check(2 * 1000), ReplayCheck::Replayed);
        // A slot reused after sliding starts clear.
        assert_eq!(r.check(2 * (1000 - 64 + 1)), ReplayCheck::Fresh);
    }

    #[test]
    fn retired_ids_are_replays_and_remembered_as_retired() {
        let mut r = ReplayWindow::new(64);
        r.retire(6);
        r.mark(8);
        assert_eq!(r.check(6), ReplayCheck::Replayed);
        assert!(r.is_retired(6));
        assert!(!r.is_retired(8));
        r.mark(2 * 500);
        assert!(!r.is_retired(6), "forgotten once below the floor");
    }

    #[test]
    fn refused_ids_stay_refused_after_sliding_below_the_floor() {
        let mut r = ReplayWindow::new(64);
        r.refuse(6);
        r.retire(8);
        assert!(r.is_refused(6) && r.is_retired(6));
        assert!(!r.is_refused(8));
        assert_eq!(r.check(6), ReplayCheck::Replayed);
        r.mark(2 * 500);
        assert!(r.is_refused(6), "remembered below the floor");
        assert!(!r.is_refused(8));
        assert_eq!(r.windows_ahead(2 * 500 + 2 * 64), 1);
        assert_eq!(r.windows_ahead(2), 0);
    }

    #[test]
    fn every_id_is_delivered_at_most_once() {
        let mut r = ReplayWindow::new(128);
        let mut seen = std::collections::HashSet::new();
        let mut x: u64 = 12345;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let id = (x % 4000) * 2;
            if r.check(id) == ReplayCheck::Fresh {
                assert!(seen.insert(id), "id {id} delivered twice");
                r.mark(id);
            }
        }
    }
}
