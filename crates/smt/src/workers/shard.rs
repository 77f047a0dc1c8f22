//! One shard: an engine (`crate::engine`, the one a default
//! [`crate::Endpoint`] drives) on its own thread, owning the message IDs
//! routed to it. Its RPC tables, replay windows, buffers and timers are
//! its own; nothing in it is shared with another shard, so no lock is
//! taken per message. What comes in goes through the engine's admission
//! (validated peers first, strangers within `unvalidated_per_batch`), and
//! what goes out through its GSO batches.
//!
//! This file is the shard's face over the engine, as `local.rs` is the
//! caller-driven one: per turn, wait for the feed until the engine's
//! deadline → take the commands and packets received (a bounded number of
//! batches) → [`Engine::turn`] (receive, timers, transmit) → run the
//! application handler on each new request and queue its response →
//! [`Engine::flush`].

use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use smt_proto::Payload;

use super::inbox::{Batch, Bell, ToShard};
use super::Handler;
use crate::engine::{Engine, Outcome};
use crate::wait::{wait_for_wake, wait_or_alarm, Alarm, Readiness, WakeFd};

/// Batches taken from the inbox per turn at most (the inbox's bound, so
/// the shard drains it): timers fire only after what has arrived is read,
/// or a shard starved of CPU would count as the peer's silence the time
/// its packets waited in the inbox and ask for them again.
const BATCHES_PER_TURN: usize = super::INBOX_BATCHES;

/// Longest sleep with no timer armed (the inbox wakes the shard anyway).
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// How often a shard whose socket was full tries its held batch again
/// (the socket is shared: its writability is not this shard's to watch).
const FULL_SOCKET_RETRY: Duration = Duration::from_millis(1);

/// Longest sleep on an own socket before the shard looks at the closing
/// flag again.
const CLOSE_POLL: Duration = Duration::from_millis(50);

/// Where a shard's packets come from.
pub(crate) enum Feed {
    /// The dispatcher's batches, on the inbox with the commands
    /// (`Spread::Messages`), announced by `bell` while the shard sleeps;
    /// handled batches go back on `spare` for reuse.
    Routed {
        spare: flume::Sender<Batch>,
        bell: Arc<Bell>,
    },
    /// The engine's own `SO_REUSEPORT` socket (`Spread::ReusePort`); the
    /// inbox carries commands only, announced by `wake`. Stops once
    /// `closing` is set.
    OwnSocket {
        wake: Arc<WakeFd>,
        closing: Arc<AtomicBool>,
    },
}

/// A shard and what it needs to run.
pub(crate) struct Shard {
    engine: Engine,
    inbox: flume::Receiver<ToShard>,
    feed: Feed,
    handler: Arc<dyn Handler>,
    /// The engine's next deadline, armed across sleeps (see [`Alarm`]);
    /// `None` if no timer descriptor could be made or set (the sleep then
    /// takes a timeout).
    alarm: Option<Alarm>,
    /// Requests handed to the handler.
    requests: u64,
}

/// What a shard reports when it stops.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ShardStats {
    /// The shard's protocol counters.
    pub counters: crate::stats::Counters,
    /// Requests handed to the handler.
    pub requests: u64,
    /// Datagrams lost to send errors (the protocol retransmitted them).
    pub send_lost: u64,
}

impl Shard {
    pub(super) fn new(
        engine: Engine,
        inbox: flume::Receiver<ToShard>,
        feed: Feed,
        handler: Arc<dyn Handler>,
    ) -> Self {
        let alarm = Alarm::new()
            .map_err(|e| tracing::warn!("no timer descriptor for a shard: {e}"))
            .ok();
        Self {
            engine,
            inbox,
            feed,
            handler,
            alarm,
            requests: 0,
        }
    }

    /// Runs until the server closes: the inbox is closed (routed), or the
    /// closing flag is set (own socket).
    pub(super) fn run(mut self) -> ShardStats {
        while let Some(readable) = self.wait() {
            self.engine.turn(readable);
            self.serve();
            self.engine.flush();
        }
        // Clients free what this shard acknowledged at once, instead of
        // waiting for acknowledgements that would never come.
        self.engine.flush_acks();
        self.engine.flush();
        self.stats()
    }

    fn stats(&self) -> ShardStats {
        ShardStats {
            counters: self.engine.stats(0).total,
            requests: self.requests,
            send_lost: self.engine.send_lost(),
        }
    }

    /// Sleeps until something arrives or the engine's deadline, and takes
    /// what arrived. Returns whether the engine's socket may hold
    /// datagrams, or `None` once the server is closing.
    fn wait(&mut self) -> Option<bool> {
        match &self.feed {
            Feed::Routed { .. } => self.wait_routed().then_some(false),
            Feed::OwnSocket { closing, .. } if closing.load(Ordering::Relaxed) => None,
            Feed::OwnSocket { .. } => Some(self.wait_own_socket()),
        }
    }

    /// Waits for the inbox (the dispatcher rings the bell of a sleeping
    /// shard) until the engine's deadline, and takes up to
    /// [`BATCHES_PER_TURN`] messages. False once the inbox is closed and
    /// empty.
    fn wait_routed(&mut self) -> bool {
        let Feed::Routed { bell, .. } = &self.feed else {
            return false;
        };
        let bell = bell.clone();
        let blocked = self.engine.wants_writable();
        let mut first = self.inbox.try_recv();
        if matches!(first, Err(flume::TryRecvError::Empty)) {
            bell.going_to_sleep();
            // The last look: a batch sent before the dispatcher could see
            // the flag is here now.
            first = self.inbox.try_recv();
            if matches!(first, Err(flume::TryRecvError::Empty)) {
                self.sleep_on_bell(&bell, blocked);
                first = self.inbox.try_recv();
            }
            bell.awake();
        }
        if blocked {
            // Try the held batch again (the turn does).
            self.engine.writable();
        }
        match first {
            Ok(m) => self.take(m),
            Err(flume::TryRecvError::Disconnected) => return false,
            Err(flume::TryRecvError::Empty) => return true,
        }
        for _ in 1..BATCHES_PER_TURN {
            let Ok(m) = self.inbox.try_recv() else { break };
            self.take(m);
        }
        true
    }

    /// Sleeps on the bell until the engine's deadline (at most
    /// [`IDLE_WAIT`]; [`FULL_SOCKET_RETRY`] while a batch waits for room).
    fn sleep_on_bell(&mut self, bell: &Bell, blocked: bool) {
        let now = self.engine.now();
        let mut until = self.engine.deadline().unwrap_or(now + IDLE_WAIT);
        if blocked {
            until = until.min(now + FULL_SOCKET_RETRY);
        }
        let timeout = self.set_alarm(until, now);
        let alarm = self.alarm.as_ref().map(Alarm::fd);
        let ready = wait_for_wake(bell.fd(), alarm, timeout).unwrap_or_default();
        if ready.woken {
            bell.drain();
        }
        self.alarm_went_off(ready.alarm);
    }

    /// Waits on the engine's socket and the wake-up, as `LocalEndpoint`
    /// does, and takes the commands that came. Returns whether the socket
    /// is readable.
    fn wait_own_socket(&mut self) -> bool {
        let Feed::OwnSocket { wake, .. } = &self.feed else {
            return false;
        };
        let wake = wake.clone();
        let mut readable = self.engine.more_to_read();
        if !readable {
            let ready = self.sleep_on_socket(wake.fd()).unwrap_or_default();
            readable = ready.readable;
            if ready.failed {
                self.engine.socket_failed();
            }
            if ready.writable {
                self.engine.writable();
            }
        }
        wake.drain();
        while let Ok(m) = self.inbox.try_recv() {
            self.take(m);
        }
        readable
    }

    /// Sleeps on the own socket and the wake-up until the engine's
    /// deadline (at most [`CLOSE_POLL`], to look at the closing flag).
    fn sleep_on_socket(&mut self, wake: BorrowedFd<'_>) -> std::io::Result<Readiness> {
        let now = self.engine.now();
        let until = self
            .engine
            .deadline()
            .map_or(now + CLOSE_POLL, |d| d.min(now + CLOSE_POLL));
        let timeout = self.set_alarm(until, now);
        let wants_writable = self.engine.wants_writable();
        // NOTE(unwrap): only the threaded face closes an engine's socket.
        let socket = self.engine.socket().expect("a shard's socket stays open");
        let alarm = self.alarm.as_ref().map(Alarm::fd);
        let ready = wait_or_alarm(socket, wants_writable, Some(wake), alarm, timeout)?;
        self.alarm_went_off(ready.alarm);
        Ok(ready)
    }

    /// Arms the alarm for `until` before a sleep (set only when the
    /// deadline moved earlier or after it went off, not per sleep) and
    /// returns the sleep's timeout: none, the alarm wakes it; zero for a
    /// deadline due already (a zero timeout arms no timer); the time left
    /// without an alarm.
    fn set_alarm(&mut self, until: Instant, now: Instant) -> Option<Duration> {
        let left = until.saturating_duration_since(now);
        if left.is_zero() {
            return Some(left);
        }
        let Some(alarm) = self.alarm.as_mut() else {
            return Some(left);
        };
        match alarm.by(Some(until), now) {
            Ok(()) => None,
            Err(e) => {
                tracing::warn!("setting a shard's timer failed: {e}");
                self.alarm = None;
                Some(left)
            }
        }
    }

    /// Notes that the alarm went off: the next sleep sets it for its
    /// deadline, which also quiets it.
    fn alarm_went_off(&mut self, rang: bool) {
        if let Some(alarm) = self.alarm.as_mut().filter(|_| rang) {
            alarm.went_off();
        }
    }

    /// Acts on one inbox message.
    fn take(&mut self, message: ToShard) {
        match message {
            ToShard::Packets(mut batch) => {
                self.engine.receive_routed(batch.iter());
                batch.clear();
                if let Feed::Routed { spare, .. } = &self.feed {
                    // The dispatcher may be gone (closing): the batch is
                    // freed.
                    let _ = spare.send(batch);
                }
            }
            ToShard::Install(peer, keys, reply) => {
                let _ = reply.send(self.engine.install_session(peer, keys));
            }
            ToShard::Resolver(resolver) => self.engine.set_key_resolver(resolver),
        }
    }

    /// Runs the handler on every complete request and queues the responses.
    fn serve(&mut self) {
        while let Some(outcome) = self.engine.poll_outcome() {
            // A shard makes no calls, and a cancellation comes after the
            // handler has run: only requests concern it.
            let Outcome::Request { rpc, data, at, .. } = outcome else {
                continue;
            };
            self.requests += 1;
            let response = self.handler.handle(rpc.peer, Vec::from(data));
            // Too large for the configuration, or the session was replaced
            // meanwhile: the engine abandons the request (its client hears
            // so at once) and logs why.
            let _ = self
                .engine
                .respond(rpc, Payload::Owned(Bytes::from(response)), at);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use smt_proto::DropReason;
    use smt_udp::Socket;

    use super::*;
    use crate::engine::SystemClock;
    use crate::EndpointConfig;

    /// A batch routed to a shard goes through the engine's admission: with
    /// a budget of 2 datagrams from unvalidated addresses per batch, 5
    /// strangers' datagrams give 3 dropped as over budget.
    #[test]
    fn a_shard_admits_strangers_within_the_per_batch_budget() {
        let mut config = EndpointConfig::default();
        config.protocol_mut().set_unvalidated_per_batch(2);
        let any = "127.0.0.1:0".parse().expect("an address");
        let socket = Arc::new(Socket::bind(any, config.socket()).expect("bind"));
        let engine = Engine::sending_on(socket, &config, Box::new(SystemClock)).expect("engine");
        let (_to_shard, inbox) = flume::unbounded();
        let (spare, _spares) = flume::unbounded();
        let handler: Arc<dyn Handler> = Arc::new(|_: SocketAddr, r: Vec<u8>| r);
        let bell = Arc::new(Bell::new(Arc::new(WakeFd::new().expect("eventfd"))));
        let feed = Feed::Routed { spare, bell };
        let mut shard = Shard::new(engine, inbox, feed, handler);
        let mut batch = Batch::default();
        for port in 1..=5u16 {
            let from = SocketAddr::from(([127, 0, 0, 9], port));
            batch.push(from, &[0x5a; 40]);
        }
        shard.take(ToShard::Packets(batch));
        let drops = shard.stats().counters.drops;
        assert_eq!(drops.get(DropReason::OverBudget), 3, "{drops:?}");
    }
}
