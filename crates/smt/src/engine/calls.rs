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

/// Every outstanding call. Lookups by call and by RPC are hash lookups;
/// the next deadline is the first of an ordered set.
#[derive(Debug)]
pub(crate) struct Calls {
    next: u64,
    max: usize,
    live: FastMap<CallToken, Live>,
    by_rpc: FastMap<RpcHandle, CallToken>,
    deadlines: BTreeSet<(Instant, CallToken)>,
}

impl Calls {
    pub(super) fn new(max: usize) -> Self {
        Self {
            next: 0,
            max,
            live: FastMap::default(),
            by_rpc: FastMap::default(),
            deadlines: BTreeSet::new(),
        }
    }

    /// Outstanding calls.
    pub(super) fn len(&self) -> usize {
        self.live.len()
    }

    /// Whether another call would exceed the limit.
    pub(super) fn full(&self) -> bool {
        self.live.len() >= self.max
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
        let call = CallToken(self.next);
        self.next += 1;
        let deadline = timeout.map(|t| (now.checked_add(t).unwrap_or(far_future(now)), t));
        if let Some((at, _)) = deadline {
            self.deadlines.insert((at, call));
        }
        self.live.insert(
            call,
            Live {
                rpc: None,
                deadline,
                priority,
                peer,
                opened: now,
            },
        );
        call
    }

    /// The call's request is now RPC `rpc` in the core: the priority it
    /// is to carry, or `None` if the call has ended.
    pub(super) fn sent(&mut self, call: CallToken, rpc: RpcHandle) -> Option<u8> {
        let live = self.live.get_mut(&call)?;
        live.rpc = Some(rpc);
        self.by_rpc.insert(rpc, call);
        Some(live.priority)
    }

    /// Ends the call whose RPC finished (response or failure); `None` if
    /// it had already ended (cancelled, timed out).
    pub(super) fn finish_rpc(&mut self, rpc: RpcHandle) -> Option<Finished> {
        let call = self.by_rpc.remove(&rpc)?;
        let live = self.live.remove(&call)?;
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
        let live = self.live.get_mut(&call)?;
        live.rpc = None;
        Some(live.peer)
    }

    /// When `call` times out, if it has a deadline.
    pub(super) fn deadline_of(&self, call: CallToken) -> Option<Instant> {
        self.live.get(&call)?.deadline.map(|(at, _)| at)
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
        self.live.drain().map(|(call, _)| call).collect()
    }

    fn forget(&mut self, call: CallToken) -> Option<Live> {
        let live = self.live.remove(&call)?;
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
