//! Pathlet congestion control (MTP, Stephens et al., HotNets 2021,
//! § 3.1.3), sans-IO: the
//! sender's windows per `(pathlet, traffic class)`, driven by PATH_ECHO
//! feedback, and the single-window DCTCP baseline (RFC 8257) to compare
//! them with. No clock, socket or thread: time comes in as `now`.
//!
//! - [`Dctcp`]: one window and its `alpha` (RFC 8257 §§ 3.3–3.4, g =
//!   1/16), on byte counts.
//! - [`PathletWindows`]: one [`Dctcp`] per `(pathlet, class)` the echoes
//!   name. A message sends under the window of the pathlet it was last
//!   seen on (the echo's `last_id`); when the network moves it, it moves to
//!   that pathlet's window, which kept its state, so a window learnt on a
//!   path is there again when traffic comes back to it. Pathlets whose
//!   `alpha` stays high are listed for exclusion for a while.
//! - [`SingleWindow`]: every byte under one [`Dctcp`], whichever path it
//!   took (what DCTCP does).
//! - [`EchoCounter`]: the receiver's counts, turned into PATH_ECHO.
//!
//! The wire format is `docs/protocol.md` § 4 (PATH, PATH_ECHO); how the
//! pieces fit, and what the endpoint's hook will do, is
//! `docs/innetwork.md` § 6. The endpoint uses it with
//! `Config::pathlet_feedback` (`PeerFeedback`, one per peer).
//!
//! Bytes in flight are counted per message (see `PathletWindows`), not per
//! window: the sender cannot tell which pathlet a byte took.

mod dctcp;
mod echo;
mod peer;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

pub use dctcp::{Dctcp, DctcpParams};
pub use echo::EchoCounter;
pub(crate) use peer::PeerFeedback;
pub use peer::{ECHO_AFTER_BYTES, PATH_RESERVE, PATH_SLOTS};

use crate::wire::{Bounded, EchoEntry, PathEchoRepr, PathletClass, MAX_PATH_EXCLUDES};

/// What a sender's congestion control answers, whichever kind it is.
pub trait Windows {
    /// Bytes message `id` may send now.
    fn allowance(&self, id: u64) -> u64;
    /// Message `id` put `bytes` on the wire.
    fn on_sent(&mut self, id: u64, bytes: u64);
    /// A PATH_ECHO from the peer (authenticated by the endpoint). Returns
    /// `false` for a copy or an older echo (its sequence is not above the
    /// largest seen), which changes nothing.
    fn on_echo(&mut self, now: Instant, echo: &PathEchoRepr) -> bool;
    /// What to list in the PATH of datagrams that start new messages.
    fn excluded(&self, now: Instant) -> Bounded<PathletClass, MAX_PATH_EXCLUDES>;
    /// `bytes` message `id` sent were lost (the receiver asked for them
    /// again).
    fn on_lost(&mut self, id: u64, bytes: u64);
    /// The message is finished; forget it.
    fn on_finished(&mut self, id: u64);
}

/// Settings of [`PathletWindows`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PathletParams {
    /// The DCTCP-style window each pathlet runs.
    pub dctcp: DctcpParams,
    /// A pathlet whose `alpha` is above this after a marked echo is
    /// excluded...
    pub exclude_alpha: f64,
    /// ...once its `alpha` has seen this many observation windows (it
    /// starts at 1, RFC 8257 § 3.3)...
    pub exclude_after_windows: u64,
    /// ...for this long (then it is tried again: nothing would lower its
    /// `alpha` while nothing goes there).
    pub exclude_for: Duration,
    /// How long after a message left a pathlet its echoes from there are
    /// taken as old news (a few round trips).
    pub drain_for: Duration,
}

impl Default for PathletParams {
    fn default() -> Self {
        Self {
            dctcp: DctcpParams::default(),
            exclude_alpha: 0.5,
            exclude_after_windows: 4,
            exclude_for: Duration::from_millis(10),
            drain_for: Duration::from_millis(10),
        }
    }
}

/// Windows per `(pathlet, class)`.
#[derive(Clone, Debug)]
pub struct PathletWindows {
    params: PathletParams,
    windows: BTreeMap<PathletClass, Dctcp>,
    /// For messages no echo has placed yet.
    unplaced: Dctcp,
    /// The pathlet each placed message was last seen on.
    placed: HashMap<u64, PathletClass>,
    /// Bytes each message sent that no echo has counted yet (lost ones
    /// taken out): the flight is the message's, not a window's, because
    /// the sender cannot tell which pathlet a byte took. Bytes sent under
    /// A's window just before the network moved the message to B are
    /// echoed from B, while B's window already holds newer bytes: counted
    /// per window they would stay in A's flight, which no echo would ever
    /// clear.
    flight: HashMap<u64, u64>,
    /// The flight of the messages placed on each pathlet (`None`: not
    /// placed yet): what a window's allowance is measured against.
    load: HashMap<Option<PathletClass>, u64>,
    /// Bytes that may still be echoed from a pathlet a message left, and
    /// since when: echoes of them are old news and do not move the message
    /// back (while a path drains after the network switched away from it,
    /// its echoes and the new path's interleave). Some of those bytes may
    /// have taken the new path, so the mark also ends after `drain_for`.
    draining: BTreeMap<PathletClass, (u64, Instant)>,
    excluded: BTreeMap<PathletClass, Instant>,
    last_sequence: u32,
    /// Where the last echo placed a message: where a new message of this
    /// peer most likely goes ([`PathletWindows::adopt`]).
    last_placed: Option<PathletClass>,
}

impl PathletWindows {
    /// No pathlets known yet; new messages use the unplaced window.
    pub fn new(params: PathletParams) -> Self {
        Self {
            params,
            windows: BTreeMap::new(),
            unplaced: Dctcp::new(params.dctcp),
            placed: HashMap::new(),
            flight: HashMap::new(),
            load: HashMap::new(),
            draining: BTreeMap::new(),
            excluded: BTreeMap::new(),
            last_sequence: 0,
            last_placed: None,
        }
    }

    /// The window of `at`, if an echo has named it.
    pub fn window(&self, at: PathletClass) -> Option<&Dctcp> {
        self.windows.get(&at)
    }

    /// The messages with bytes counted (placed or not), until
    /// `on_finished`.
    pub fn messages(&self) -> impl Iterator<Item = u64> + '_ {
        self.flight.keys().copied()
    }

    /// Where message `id` was last seen.
    pub fn pathlet_of(&self, id: u64) -> Option<PathletClass> {
        self.placed.get(&id).copied()
    }

    fn window_of(&self, id: u64) -> &Dctcp {
        self.placed
            .get(&id)
            .and_then(|at| self.windows.get(at))
            .unwrap_or(&self.unplaced)
    }

    /// One echo entry. The bytes it acknowledges on `at` were sent under
    /// whichever window their message used then: what `at`'s window does
    /// not hold in flight is moved to it first (from the unplaced window,
    /// then from the others), so every window's counts stay its own.
    fn on_entry(&mut self, now: Instant, e: &EchoEntry) {
        let mut w = self.window_holding(e.at, u64::from(e.bytes));
        w.on_feedback(u64::from(e.bytes), u64::from(e.ce_bytes));
        self.mark_congestion(now, e, &w);
        self.windows.insert(e.at, w);
        self.credit(e.at, e.last_id, u64::from(e.bytes));
        if self.still_draining(now, e.at, u64::from(e.bytes)) {
            return;
        }
        if let Some(id) = e.last_id {
            self.place(now, id, e.at);
        }
    }

    /// `at`'s window, taken out of the map (a new one if an echo never
    /// named `at`), holding at least `bytes` in flight: what it lacks is
    /// moved to it from the unplaced window, then from the others.
    fn window_holding(&mut self, at: PathletClass, bytes: u64) -> Dctcp {
        let params = self.params.dctcp;
        let mut w = self
            .windows
            .remove(&at)
            .unwrap_or_else(|| Dctcp::new(params));
        let mut missing = bytes.saturating_sub(w.in_flight());
        for from in std::iter::once(&mut self.unplaced).chain(self.windows.values_mut()) {
            if missing == 0 {
                break;
            }
            let k = missing.min(from.in_flight());
            from.forget_in_flight(k);
            w.on_sent(k);
            missing -= k;
        }
        w
    }

    /// Excludes `e.at` for a while if its window `w` (after this entry's
    /// feedback) says it is congested; an entry without CE marks lifts an
    /// exclusion.
    fn mark_congestion(&mut self, now: Instant, e: &EchoEntry, w: &Dctcp) {
        let congested = e.ce_bytes > 0
            && w.windows() >= self.params.exclude_after_windows
            && w.alpha() > self.params.exclude_alpha;
        if congested {
            self.excluded.insert(e.at, now + self.params.exclude_for);
        } else if e.ce_bytes == 0 {
            self.excluded.remove(&e.at);
        }
    }

    /// Whether these `bytes` echoed from `at` are old news: bytes a message
    /// left in flight there when it moved away, still draining (they are
    /// taken off what is left to drain). Such an echo does not move the
    /// message back.
    fn still_draining(&mut self, now: Instant, at: PathletClass, bytes: u64) -> bool {
        let drain_for = self.params.drain_for;
        match self.draining.remove(&at) {
            Some((old, since)) if old >= bytes && now < since + drain_for => {
                if old > bytes {
                    self.draining.insert(at, (old - bytes, since));
                }
                true
            }
            _ => false,
        }
    }

    /// `bytes` echoed from `at` leave the flight: first message
    /// `last_id`'s (the entry names it), then those of the messages placed
    /// on `at`, then any (bytes the sender charged elsewhere before it
    /// heard of a move).
    fn credit(&mut self, at: PathletClass, last_id: Option<u64>, mut bytes: u64) {
        if let Some(id) = last_id {
            bytes -= self.land(id, bytes);
        }
        if bytes == 0 {
            return;
        }
        let mut ids: Vec<u64> = self.flight.keys().copied().collect();
        ids.sort_by_key(|id| (self.placed.get(id) != Some(&at), *id));
        for id in ids {
            if bytes == 0 {
                break;
            }
            bytes -= self.land(id, bytes);
        }
    }

    /// Takes up to `bytes` out of message `id`'s flight; returns how many.
    fn land(&mut self, id: u64, bytes: u64) -> u64 {
        let Some(f) = self.flight.get_mut(&id) else {
            return 0;
        };
        let k = bytes.min(*f);
        *f -= k;
        let at = self.placed.get(&id).copied();
        self.unload(at, k);
        k
    }

    fn unload(&mut self, at: Option<PathletClass>, bytes: u64) {
        if let Some(l) = self.load.get_mut(&at) {
            *l = l.saturating_sub(bytes);
        }
    }

    /// A new message `id` (nothing sent yet) starts under the window of the
    /// pathlet the last echo placed a message on: the network most likely
    /// sends it there too, and a message that sent unlimited until its own
    /// first echo would flood a path whose window is small. Nothing
    /// happens before any echo, or for a message already counted.
    pub fn adopt(&mut self, id: u64) {
        if self.flight.contains_key(&id) {
            return;
        }
        if let Some(at) = self.last_placed {
            self.flight.insert(id, 0);
            self.placed.insert(id, at);
        }
    }

    /// Moves message `id` to pathlet `at`, with its flight; what it had
    /// in flight may still be echoed from the pathlet it leaves, without
    /// moving it back, for `drain_for`.
    fn place(&mut self, now: Instant, id: u64, at: PathletClass) {
        self.last_placed = Some(at);
        let left = self.placed.insert(id, at);
        if left == Some(at) {
            return;
        }
        let flight = self.flight.get(&id).copied().unwrap_or(0);
        self.unload(left, flight);
        *self.load.entry(Some(at)).or_default() += flight;
        if let Some(left) = left {
            if flight > 0 {
                self.draining.insert(left, (flight, now));
            }
            // The messages on the pathlet it left with nothing in flight
            // follow it: the network has most likely moved the peer's
            // traffic, and they would otherwise wait on the old pathlet's
            // window for an echo that names them (one entry names one
            // message).
            let idle: Vec<u64> = self
                .placed
                .iter()
                .filter(|(m, p)| **p == left && self.flight.get(m).is_none_or(|f| *f == 0))
                .map(|(m, _)| *m)
                .collect();
            for m in idle {
                self.placed.insert(m, at);
            }
        }
    }
}

impl Windows for PathletWindows {
    fn allowance(&self, id: u64) -> u64 {
        let at = self.placed.get(&id).copied();
        let load = self.load.get(&at).copied().unwrap_or(0);
        (self.window_of(id).cwnd() as u64).saturating_sub(load)
    }

    fn on_sent(&mut self, id: u64, bytes: u64) {
        *self.flight.entry(id).or_default() += bytes;
        let at = self.placed.get(&id).copied();
        *self.load.entry(at).or_default() += bytes;
        let w = match at {
            Some(at) => self.windows.get_mut(&at),
            None => None,
        };
        w.unwrap_or(&mut self.unplaced).on_sent(bytes);
    }

    fn on_echo(&mut self, now: Instant, echo: &PathEchoRepr) -> bool {
        if echo.sequence <= self.last_sequence {
            return false;
        }
        self.last_sequence = echo.sequence;
        for e in echo.entries.as_slice() {
            self.on_entry(now, e);
        }
        true
    }

    /// Excluded pathlets still in their hold time, but never every pathlet
    /// of a class the echoes named: a class with nowhere else to go keeps
    /// them all (excluding everything would only make devices ignore the
    /// list).
    fn excluded(&self, now: Instant) -> Bounded<PathletClass, MAX_PATH_EXCLUDES> {
        let mut out = Bounded::new();
        for (at, until) in &self.excluded {
            if *until <= now {
                continue;
            }
            let elsewhere = self.windows.keys().any(|k| {
                k.class == at.class && k != at && self.excluded.get(k).is_none_or(|u| *u <= now)
            });
            if elsewhere {
                out.push(*at);
            }
        }
        out
    }

    /// Charged to the message's current window (the sender cannot tell
    /// which pathlet dropped the bytes).
    fn on_lost(&mut self, id: u64, bytes: u64) {
        self.land(id, bytes);
        let w = match self.placed.get(&id) {
            Some(at) => self.windows.get_mut(at),
            None => None,
        };
        w.unwrap_or(&mut self.unplaced).on_loss(bytes);
    }

    fn on_finished(&mut self, id: u64) {
        let left = self.flight.remove(&id).unwrap_or(0);
        let at = self.placed.remove(&id);
        self.unload(at, left);
    }
}

/// The baseline: one DCTCP window for everything, fed the sum of every
/// echo's entries (what a DCTCP sender sees when the network moves its
/// traffic between paths).
#[derive(Clone, Debug)]
pub struct SingleWindow {
    window: Dctcp,
    last_sequence: u32,
}

impl SingleWindow {
    /// One window at `params`' initial size.
    pub fn new(params: DctcpParams) -> Self {
        Self {
            window: Dctcp::new(params),
            last_sequence: 0,
        }
    }

    /// The one window.
    pub fn window(&self) -> &Dctcp {
        &self.window
    }
}

impl Windows for SingleWindow {
    fn allowance(&self, _: u64) -> u64 {
        self.window.allowance()
    }

    fn on_sent(&mut self, _: u64, bytes: u64) {
        self.window.on_sent(bytes);
    }

    fn on_echo(&mut self, _: Instant, echo: &PathEchoRepr) -> bool {
        if echo.sequence <= self.last_sequence {
            return false;
        }
        self.last_sequence = echo.sequence;
        let entries = echo.entries.as_slice();
        let bytes = entries.iter().map(|e| u64::from(e.bytes)).sum();
        let marked = entries.iter().map(|e| u64::from(e.ce_bytes)).sum();
        self.window.on_feedback(bytes, marked);
        true
    }

    fn excluded(&self, _: Instant) -> Bounded<PathletClass, MAX_PATH_EXCLUDES> {
        Bounded::new()
    }

    fn on_lost(&mut self, _: u64, bytes: u64) {
        self.window.on_loss(bytes);
    }

    fn on_finished(&mut self, _: u64) {}
}

#[cfg(test)]
mod tests;
