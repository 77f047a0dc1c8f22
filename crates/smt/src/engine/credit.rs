//! Calls held back for load: those waiting for the
//! server's credit, and those waiting to retry after `Overloaded`.
//!
//! *Credit.* The core says how many requests a server lets us have
//! outstanding (`smt_proto::Endpoint::credit`, from its CREDIT packets,
//! `docs/protocol.md` § 4). A call to a peer whose credit is used up waits
//! here, in call order per peer, instead of being sent and refused; it
//! leaves when a response (or failure) frees a place, or when the server
//! grants more. A waiting call keeps its deadline (it ends with
//! `Error::Timeout` like any other); without one it still leaves, since
//! every call in flight ends (its response, or the core's silence
//! timeout) and the credit is never below 1.
//!
//! *Retry.* A call made with [`crate::CallOptions::retry_overloaded`]
//! keeps its request bytes; when the server refuses it (`Overloaded`: it
//! did not run), it is sent again under a fresh ID after a jittered
//! back-off, within its deadline and its number of attempts; the last
//! refusal is its outcome.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, VecDeque};
use std::hash::BuildHasher;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::outcome::CallToken;
use super::sessions::Parked;
use super::FastMap;

/// The first retry waits about this long (× 0.5 to 1.5), each next one
/// twice as long, up to [`RETRY_MAX_BACKOFF`].
pub(crate) const RETRY_BACKOFF: Duration = Duration::from_millis(2);
/// The longest wait between two attempts.
pub(crate) const RETRY_MAX_BACKOFF: Duration = Duration::from_millis(250);

/// Peers with nothing in flight whose count (0) is kept at least, so
/// that calling them again finds it.
const IDLE_PEERS_KEPT: usize = 64;

/// A call that may be retried after `Overloaded`: its bytes and budget.
struct Retryable {
    peer: SocketAddr,
    data: Bytes,
    /// Retries left.
    left: u32,
    /// Retries made.
    made: u32,
}

/// Calls held back for load, and how much of each peer's credit is used.
pub(crate) struct Load {
    /// RPCs sent, by peer: what holds the peer's credit. Which RPC went to
    /// whom the engine's call table knows (`Calls`): it says so when one
    /// ends, so a call costs one lookup here each way.
    in_flight: FastMap<SocketAddr, usize>,
    /// Size of `in_flight` at which peers at 0 are dropped.
    prune_at: usize,
    /// RPCs in flight to all peers together: while fewer than a peer's
    /// credit, that peer has room without looking up its own count.
    total: usize,
    /// Calls waiting for credit, per peer, oldest first.
    waiting: FastMap<SocketAddr, VecDeque<Parked>>,
    /// Calls due to be sent again, by when.
    retries: BTreeMap<(Instant, CallToken), SocketAddr>,
    retryable: FastMap<CallToken, Retryable>,
    /// Jitter (xorshift64*, seeded once per endpoint).
    rng: u64,
}

impl Load {
    pub(super) fn new() -> Self {
        Self {
            in_flight: FastMap::default(),
            prune_at: IDLE_PEERS_KEPT,
            total: 0,
            waiting: FastMap::default(),
            retries: BTreeMap::new(),
            retryable: FastMap::default(),
            rng: RandomState::new().hash_one(0x5eed_u64) | 1,
        }
    }

    /// Whether a new call to `peer` must wait: its credit is used up, or
    /// earlier calls wait already (they go first).
    pub(super) fn must_wait(&self, peer: SocketAddr, credit: u32) -> bool {
        self.waiting.contains_key(&peer) || !self.has_credit(peer, credit)
    }

    /// Whether one more RPC to `peer` fits its credit.
    pub(super) fn has_credit(&self, peer: SocketAddr, credit: u32) -> bool {
        if self.total < credit as usize {
            return true;
        }
        let used = self.in_flight.get(&peer).copied().unwrap_or(0);
        used < credit as usize
    }

    /// Parks a call until `peer` has credit for it.
    pub(super) fn wait(&mut self, peer: SocketAddr, parked: Parked) {
        self.waiting.entry(peer).or_default().push_back(parked);
    }

    /// An RPC was sent to `peer`: it holds a place of its credit.
    pub(super) fn sent(&mut self, peer: SocketAddr) {
        self.total += 1;
        if let Some(n) = self.in_flight.get_mut(&peer) {
            *n += 1;
            return;
        }
        self.forget_idle_peers();
        self.in_flight.insert(peer, 1);
    }

    /// An RPC sent to `peer` ended (response, failure, abort, a retry):
    /// its place is free. Called once per [`Load::sent`]. A peer's count
    /// stays when it reaches 0: a client calling one server at a time
    /// would otherwise insert and remove it on every call (~450
    /// instructions per call, `docs/benchmarks.md`).
    pub(super) fn ended(&mut self, peer: SocketAddr) {
        if let Some(n) = self.in_flight.get_mut(&peer).filter(|n| **n > 0) {
            *n -= 1;
            self.total -= 1;
        }
    }

    /// Drops the counts of peers with nothing in flight once the table
    /// has doubled since the last time (amortised O(1) per new peer).
    fn forget_idle_peers(&mut self) {
        if self.in_flight.len() < self.prune_at {
            return;
        }
        self.in_flight.retain(|_, n| *n > 0);
        self.prune_at = (2 * self.in_flight.len()).max(IDLE_PEERS_KEPT);
    }

    /// Peers with calls waiting for credit.
    pub(super) fn waiting_peers(&self) -> Vec<SocketAddr> {
        self.waiting.keys().copied().collect()
    }

    /// The next call waiting for `peer`'s credit, if the credit has room.
    pub(super) fn next_ready(&mut self, peer: SocketAddr, credit: u32) -> Option<Parked> {
        if !self.has_credit(peer, credit) {
            return None;
        }
        let queue = self.waiting.get_mut(&peer)?;
        let next = queue.pop_front();
        if queue.is_empty() {
            self.waiting.remove(&peer);
        }
        next
    }

    /// Lets `call` to `peer` be retried `attempts` times after `Overloaded`,
    /// keeping its request bytes.
    pub(super) fn allow_retries(
        &mut self,
        call: CallToken,
        peer: SocketAddr,
        data: Bytes,
        attempts: u32,
    ) {
        let r = Retryable {
            peer,
            data,
            left: attempts,
            made: 0,
        };
        self.retryable.insert(call, r);
    }

    /// `call` was refused (`Overloaded`): schedules its next attempt
    /// after a jittered back-off, if it has one left and `deadline`
    /// (if any) is not past by then. Returns whether it will be retried.
    pub(super) fn retry(
        &mut self,
        now: Instant,
        call: CallToken,
        deadline: Option<Instant>,
    ) -> bool {
        let Some(r) = self.retryable.get_mut(&call) else {
            return false;
        };
        if r.left == 0 {
            return false;
        }
        let base = RETRY_BACKOFF
            .saturating_mul(1 << r.made.min(16))
            .min(RETRY_MAX_BACKOFF);
        let (left, made, peer) = (r.left - 1, r.made + 1, r.peer);
        let at = now + self.jitter(base);
        if deadline.is_some_and(|d| at >= d) {
            return false;
        }
        if let Some(r) = self.retryable.get_mut(&call) {
            (r.left, r.made) = (left, made);
        }
        self.retries.insert((at, call), peer);
        true
    }

    /// The next retry's time.
    pub(super) fn next_retry(&self) -> Option<Instant> {
        self.retries.first_key_value().map(|((at, _), _)| *at)
    }

    /// A retry due at `now`: its peer and the call with its bytes.
    pub(super) fn due_retry(&mut self, now: Instant) -> Option<(SocketAddr, Parked)> {
        let (&(at, call), _) = self.retries.first_key_value()?;
        if at > now {
            return None;
        }
        let peer = self.retries.remove(&(at, call))?;
        let data = self.retryable.get(&call)?.data.clone();
        Some((peer, Parked { call, data }))
    }

    /// Forgets `call` wherever it waits; true if it waited here.
    pub(super) fn cancel(&mut self, call: CallToken) -> bool {
        self.retryable.remove(&call);
        let before = self.retries.len();
        self.retries.retain(|(_, c), _| *c != call);
        let mut found = self.retries.len() != before;
        for queue in self.waiting.values_mut() {
            let n = queue.len();
            queue.retain(|p| p.call != call);
            found |= queue.len() != n;
        }
        self.waiting.retain(|_, q| !q.is_empty());
        found
    }

    /// The call ended: its bytes are not needed any more.
    pub(super) fn done(&mut self, call: CallToken) {
        if !self.retryable.is_empty() {
            self.retryable.remove(&call);
        }
    }

    /// Whether calls wait here (someone must keep turning).
    pub(super) fn has_parked(&self) -> bool {
        !self.waiting.is_empty() || !self.retries.is_empty()
    }

    /// Every call waiting here, removed (the endpoint is closing; the
    /// calls in flight end too, and their RPCs' places with them).
    pub(super) fn drain(&mut self) -> Vec<CallToken> {
        self.retryable.clear();
        self.in_flight.clear();
        self.prune_at = IDLE_PEERS_KEPT;
        self.total = 0;
        let retries = std::mem::take(&mut self.retries)
            .into_keys()
            .map(|(_, c)| c);
        let waiting = self.waiting.drain().flat_map(|(_, q)| q).map(|p| p.call);
        retries.chain(waiting).collect()
    }

    /// `base` × a factor uniform in [0.5, 1.5).
    fn jitter(&mut self, base: Duration) -> Duration {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11;
        let unit = r as f64 / (1u64 << 53) as f64;
        base.mul_f64(0.5 + unit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 9))
    }

    fn parked(n: u64) -> Parked {
        Parked {
            call: CallToken { seq: n, slot: 0 },
            data: Bytes::from_static(b"x"),
        }
    }

    #[test]
    fn calls_beyond_the_credit_wait_in_order_and_leave_as_places_free() {
        let mut load = Load::new();
        load.sent(addr());
        load.sent(addr());
        assert!(load.must_wait(addr(), 2));
        load.wait(addr(), parked(3));
        load.wait(addr(), parked(4));
        assert!(load.next_ready(addr(), 2).is_none(), "no room yet");
        load.ended(addr());
        assert_eq!(
            load.next_ready(addr(), 2).map(|p| p.call),
            Some(CallToken { seq: 3, slot: 0 })
        );
        assert!(
            load.must_wait(addr(), 2),
            "call 4 still waits: new calls queue behind"
        );
        assert_eq!(
            load.next_ready(addr(), 3).map(|p| p.call),
            Some(CallToken { seq: 4, slot: 0 })
        );
        assert!(!load.has_parked());
    }

    #[test]
    fn idle_peers_are_kept_until_many_then_forgotten() {
        let mut load = Load::new();
        let peer = |i: usize| SocketAddr::from(([127, 0, 0, 1], 1000 + i as u16));
        load.sent(peer(0));
        load.ended(peer(0));
        assert!(load.has_credit(peer(0), 1), "its place is free");
        for i in 1..IDLE_PEERS_KEPT {
            load.sent(peer(i));
            load.ended(peer(i));
        }
        load.sent(peer(1));
        assert_eq!(load.in_flight.len(), IDLE_PEERS_KEPT, "kept at 0");
        load.sent(peer(IDLE_PEERS_KEPT));
        assert_eq!(load.in_flight.len(), 2, "peer 1 and the new one");
        assert!(!load.has_credit(peer(1), 1));
        assert!(
            load.has_credit(peer(1), 2),
            "two in flight, one of them its"
        );
        load.sent(peer(1));
        assert!(!load.has_credit(peer(1), 2));
        load.ended(peer(1));
        assert!(load.has_credit(peer(0), 2));
        assert!(load.has_credit(peer(0), 1));
        load.ended(peer(1));
        load.ended(peer(1));
        assert!(load.has_credit(peer(1), 1), "an extra end frees nothing");
        assert_eq!(load.total, 1);
    }

    #[test]
    fn retries_back_off_within_the_budget_and_the_deadline() {
        let now = Instant::now();
        let mut load = Load::new();
        let call = CallToken { seq: 7, slot: 0 };
        load.allow_retries(call, addr(), Bytes::from_static(b"req"), 2);
        assert!(load.retry(now, call, None));
        let first = load.next_retry().expect("scheduled");
        let wait = first - now;
        assert!(wait >= RETRY_BACKOFF / 2 && wait < RETRY_BACKOFF * 3 / 2);
        assert!(load.due_retry(now).is_none(), "not yet");
        let (peer, p) = load.due_retry(first).expect("due");
        assert_eq!((peer, p.call, &p.data[..]), (addr(), call, &b"req"[..]));
        assert!(!load.retry(now, call, Some(now)), "past the deadline");
        assert!(load.retry(now, call, None));
        load.due_retry(now + RETRY_MAX_BACKOFF);
        assert!(!load.retry(now, call, None), "budget spent");
    }
}
