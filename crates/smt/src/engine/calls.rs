//! The engine's outstanding calls: each one's RPC in the core (once it has
//! one), its deadline, and the limit on how many there are.
//!
//! A call lives here from [`Calls::open`] until it ends, whichever way:
//! its response or failure ([`Calls::finish_rpc`]), its deadline
//! ([`Calls::expired`]), a cancel or a close ([`Calls::end`],
//! [`Calls::drain`]). Exactly one of those reports it, so a call has
//! exactly one outcome.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use smt_proto::RpcHandle;

use super::outcome::CallToken;
use super::FastMap;

/// One outstanding call.
#[derive(Clone, Copy, Debug)]
struct Live {
    /// Its token's `seq`: a token of an ended call that used the same
    /// slot does not match.
    seq: u64,
    /// Its RPC in the core; `None` while it waits for a handshake or a key
    /// epoch (then `Sessions` holds its request).
    rpc: Option<RpcHandle>,
    /// When it times out, and the timeout that set it (for the error).
    deadline: Option<(Instant, Duration)>,
    /// The priority its request carries (`CallOptions::priority`).
    priority: u8,
    /// Whom it calls, and when the application made it (for its round
    /// trip).
    peer: SocketAddr,
    opened: Instant,
}

/// A call's RPC in the core and the peer it went to (whose credit it
/// holds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sent {
    pub rpc: RpcHandle,
    pub peer: SocketAddr,
}

/// A call whose RPC finished: who it called and when it was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Finished {
    pub call: CallToken,
    pub peer: SocketAddr,
    pub opened: Instant,
}

/// Every outstanding call. A call is found by its token's slot (an index,
/// no hashing: with the ~100-byte entry in a hash map, its insert, update
/// and removal cost ~110 instructions each, `docs/benchmarks.md`), by its
/// RPC through a hash map; the next deadline is the first of an ordered
/// set.
#[derive(Debug)]
pub(crate) struct Calls {
    next: u64,
    max: usize,
    /// Grows to the most calls ever outstanding at once, then is reused.
    slots: Vec<Option<Live>>,
    /// Empty slots, the last freed on top (still in the cache).
    free: Vec<u32>,
    len: usize,
    by_rpc: FastMap<RpcHandle, CallToken>,
    deadlines: BTreeSet<(Instant, CallToken)>,
}

impl Calls {
    pub(super) fn new(max: usize) -> Self {
        Self {
            next: 0,
            max,
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
            by_rpc: FastMap::default(),
            deadlines: BTreeSet::new(),
        }
    }

    /// Outstanding calls.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Whether another call would exceed the limit.
    pub(super) fn full(&self) -> bool {
        self.len >= self.max
    }

    pub(super) fn max(&self) -> usize {
        self.max
    }

    /// A new call to `peer`, timing out `timeout` after `now` if given.
    pub(super) fn open(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        timeout: Option<Duration>,
        priority: u8,
    ) -> CallToken {
        let seq = self.next;
        self.next += 1;
        let deadline = timeout.map(|t| (now.checked_add(t).unwrap_or(far_future(now)), t));
        let live = Live {
            seq,
            rpc: None,
            deadline,
            priority,
            peer,
            opened: now,
        };
        let call = CallToken {
            seq,
            slot: self.place(live),
        };
        if let Some((at, _)) = deadline {
            self.deadlines.insert((at, call));
        }
        call
    }

    /// The call's request is now RPC `rpc` in the core: the priority it
    /// is to carry, or `None` if the call has ended.
    pub(super) fn sent(&mut self, call: CallToken, rpc: RpcHandle) -> Option<u8> {
        let live = self.get_mut(call)?;
        live.rpc = Some(rpc);
        let priority = live.priority;
        self.by_rpc.insert(rpc, call);
        Some(priority)
    }

    /// Ends the call whose RPC finished (response or failure); `None` if
    /// it had already ended (cancelled, timed out).
    pub(super) fn finish_rpc(&mut self, rpc: RpcHandle) -> Option<Finished> {
        let call = self.by_rpc.remove(&rpc)?;
        let live = self.take(call)?;
        self.forget_deadline(call, &live);
        Some(Finished {
            call,
            peer: live.peer,
            opened: live.opened,
        })
    }

    /// The call whose RPC `rpc` is, without ending it.
    pub(super) fn call_of(&self, rpc: RpcHandle) -> Option<CallToken> {
        self.by_rpc.get(&rpc).copied()
    }

    /// The call's RPC ended but the call goes on (it is retried): it has
    /// no RPC until it is sent again. Returns the peer it was sent to.
    pub(super) fn unsend(&mut self, rpc: RpcHandle) -> Option<SocketAddr> {
        let call = self.by_rpc.remove(&rpc)?;
        let live = self.get_mut(call)?;
        live.rpc = None;
        Some(live.peer)
    }

    /// When `call` times out, if it has a deadline.
    pub(super) fn deadline_of(&self, call: CallToken) -> Option<Instant> {
        self.get(call)?.deadline.map(|(at, _)| at)
    }

    /// Ends `call`; returns whether it was outstanding and its RPC, if it
    /// had one (the caller aborts it in the core).
    pub(super) fn end(&mut self, call: CallToken) -> Option<Option<Sent>> {
        let live = self.forget(call)?;
        Some(live.sent())
    }

    /// The earliest deadline of any call.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(at, _)| *at)
    }

    /// Ends the next call whose deadline is at or before `now`: the call,
    /// its timeout, and its RPC if it had one.
    pub(super) fn expired(&mut self, now: Instant) -> Option<(CallToken, Duration, Option<Sent>)> {
        let &(at, call) = self.deadlines.first()?;
        if at > now {
            return None;
        }
        let live = self.forget(call)?;
        let timeout = live.deadline.map_or(Duration::ZERO, |(_, t)| t);
        Some((call, timeout, live.sent()))
    }

    /// Ends every call (the endpoint is closing).
    pub(super) fn drain(&mut self) -> Vec<CallToken> {
        self.by_rpc.clear();
        self.deadlines.clear();
        self.free.clear();
        self.len = 0;
        let slots = std::mem::take(&mut self.slots).into_iter();
        let calls = slots.enumerate().filter_map(|(slot, live)| {
            let seq = live?.seq;
            let slot = u32::try_from(slot).ok()?;
            Some(CallToken { seq, slot })
        });
        calls.collect()
    }

    fn forget(&mut self, call: CallToken) -> Option<Live> {
        let live = self.take(call)?;
        if let Some(rpc) = live.rpc {
            self.by_rpc.remove(&rpc);
        }
        self.forget_deadline(call, &live);
        Some(live)
    }

    fn forget_deadline(&mut self, call: CallToken, live: &Live) {
        if let Some((at, _)) = live.deadline {
            self.deadlines.remove(&(at, call));
        }
    }

    /// Keeps `live` in a free slot (the last freed) or a new one.
    fn place(&mut self, live: Live) -> u32 {
        self.len += 1;
        if let Some(slot) = self.free.pop() {
            self.slots[slot as usize] = Some(live);
            return slot;
        }
        self.slots.push(Some(live));
        // NOTE(unwrap): never more slots than calls outstanding at once;
        // 2^32 of them would take hundreds of gigabytes first.
        u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 calls outstanding")
    }

    fn get(&self, call: CallToken) -> Option<&Live> {
        let live = self.slots.get(call.slot as usize)?.as_ref()?;
        (live.seq == call.seq).then_some(live)
    }

    fn get_mut(&mut self, call: CallToken) -> Option<&mut Live> {
        let live = self.slots.get_mut(call.slot as usize)?.as_mut()?;
        (live.seq == call.seq).then_some(live)
    }

    /// Removes `call`, freeing its slot.
    fn take(&mut self, call: CallToken) -> Option<Live> {
        let entry = self.slots.get_mut(call.slot as usize)?;
        if entry.as_ref()?.seq != call.seq {
            return None;
        }
        self.free.push(call.slot);
        self.len -= 1;
        entry.take()
    }
}

impl Live {
    fn sent(&self) -> Option<Sent> {
        let peer = self.peer;
        self.rpc.map(|rpc| Sent { rpc, peer })
    }
}

/// A deadline too far to compute (`Duration::MAX`): about thirty years
/// on, which no call waits for.
fn far_future(now: Instant) -> Instant {
    now + Duration::from_secs(30 * 365 * 24 * 3600)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEER: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
        std::net::Ipv4Addr::LOCALHOST,
        7,
    ));

    fn sent(rpc: u64) -> Sent {
        Sent {
            rpc: RpcHandle(rpc),
            peer: PEER,
        }
    }

    #[test]
    fn every_call_ends_exactly_once() {
        let now = Instant::now();
        let mut calls = Calls::new(8);
        let a = calls.open(now, PEER, Some(Duration::from_millis(5)), 0);
        let b = calls.open(now, PEER, None, 0);
        let c = calls.open(now, PEER, Some(Duration::MAX), 0);
        assert_eq!(calls.sent(a, RpcHandle(10)), Some(0));
        calls.sent(b, RpcHandle(11));
        assert_eq!(calls.len(), 3);
        assert_eq!(calls.next_deadline(), Some(now + Duration::from_millis(5)));
        assert!(calls.expired(now).is_none(), "not yet");
        let later = now + Duration::from_millis(5);
        assert_eq!(
            calls.expired(later),
            Some((a, Duration::from_millis(5), Some(sent(10))))
        );
        assert_eq!(calls.finish_rpc(RpcHandle(10)), None, "already ended");
        let finished = calls.finish_rpc(RpcHandle(11)).unwrap();
        assert_eq!(
            (finished.call, finished.peer, finished.opened),
            (b, PEER, now)
        );
        assert_eq!(calls.end(c), Some(None), "never sent");
        assert_eq!(calls.end(c), None);
        assert_eq!((calls.len(), calls.next_deadline()), (0, None));
    }

    #[test]
    fn a_reused_slot_does_not_answer_to_an_ended_call() {
        let now = Instant::now();
        let mut calls = Calls::new(8);
        let old = calls.open(now, PEER, None, 0);
        calls.sent(old, RpcHandle(1));
        assert!(calls.finish_rpc(RpcHandle(1)).is_some());
        let new = calls.open(now, PEER, None, 3);
        assert_eq!(new.slot, old.slot, "the freed slot is reused");
        assert!(new > old, "tokens order as the calls were made");
        assert_eq!(calls.sent(old, RpcHandle(2)), None);
        assert_eq!(calls.end(old), None);
        assert_eq!(calls.sent(new, RpcHandle(2)), Some(3));
        assert_eq!(calls.len(), 1);
        assert_eq!(calls.drain(), vec![new]);
        assert_eq!(calls.len(), 0);
    }

    #[test]
    fn the_limit_counts_outstanding_calls() {
        let now = Instant::now();
        let mut calls = Calls::new(2);
        let a = calls.open(now, PEER, None, 0);
        calls.open(now, PEER, None, 0);
        assert!(calls.full());
        calls.end(a);
        assert!(!calls.full());
        assert_eq!(calls.drain().len(), 1);
    }
}
