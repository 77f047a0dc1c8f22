//! Who drives the threaded [`crate::Endpoint`]'s engine, and when.
//!
//! The engine sits behind one lock. A thread that needs something from the
//! network — a blocking `call` waiting for its reply, an `accept` waiting
//! for a request — drives the engine itself instead of asking another
//! thread to (leader/follower):
//!
//! - commands (`call`, `respond`, abandoning a request) lock, submit and
//!   transmit at once: a request or response leaves from the thread that
//!   made it;
//! - a waiting thread becomes the *leader* if nobody leads: it turns the
//!   engine (receive, timers, outcomes, transmit) and sleeps on the socket
//!   *without* the lock until it is readable, the next protocol deadline
//!   or a wake-up, until its own reply or a request has arrived;
//! - other waiting threads *follow*: each parks (without the lock) until
//!   the leader leaves its reply in its slot or hands it a request, or
//!   resigns and promotes it; threads are woken only once the lock is
//!   released (`handoff`);
//! - async callers (`call_async`, `accept_async`) on a tokio runtime with
//!   IO and timers lead and follow the same way, as tasks (`tasks.rs`): a
//!   leading future turns the engine in its `poll` and waits on the
//!   runtime's reactor (the socket registered with `AsyncFd`, the
//!   engine's deadline on one tokio timer, `reactor.rs`); a follower's
//!   waker is woken by its reply, a request or a promotion. A future
//!   resigns when it has what it waited for and when it is dropped, and a
//!   promotion it never used goes on, so a cancelled future never leaves
//!   the engine without a leader. Blocking callers follow a leading task
//!   as they follow a thread. Off tokio (or with the `tokio` feature
//!   off), async callers wait on a channel and are driven for;
//! - the background thread leads whenever no caller does: timers, and
//!   receiving what no caller waits for (async callers off tokio,
//!   `ready_fd` users, acknowledgements and grants for responses sent
//!   earlier). Any caller takes the lead from it without waiting, except
//!   a blocking accepter of a busy server (see `accepter_may_lead`);
//!   while a caller leads it looks again a tick later (the leader runs
//!   the deadlines), or at once when told of work no caller waits for (an
//!   async call off tokio, a close, input piling up). It leaves the lead
//!   to tasks that came back for it since its last look, and takes it
//!   from a task whose runtime stopped polling it (the deadline overdue
//!   by four ticks).
//!
//! One thread making blocking calls therefore sends, sleeps on the socket
//! and receives its reply itself, like a UDP ping-pong: no thread hand-off
//! per RPC; and a tokio task making async calls, or serving an
//! `accept_async` loop, does the same on its runtime's thread.

mod background;
mod close;
mod handoff;
mod permits;
mod queue;
#[cfg(feature = "tokio")]
mod reactor;
mod tasks;
#[cfg(test)]
mod tests;
mod waiters;

use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, Thread};
use std::time::Instant;

use smt_proto::{Payload, ServerRpcHandle};

pub(crate) use self::handoff::lock_ignoring_poison;
use self::handoff::{HasWakes, Reply, Slot, Wakes};
use self::permits::{Permit, Permits};
use self::queue::Requests;
pub(crate) use self::tasks::Got;
use self::waiters::Waiters;
use super::cancel::{Cancellation, Watches};
use super::ready::Ready;
use crate::engine::{CallToken, Engine, Outcome};
use crate::wait::{wait_or_alarm, Alarm, WakeFd};
use crate::{CallOptions, Error, SessionInfo};

type Locked<'a> = handoff::Locked<'a, Inner>;

/// Requests in flight (received, not yet answered and acknowledged)
/// above which a server counts as busy (see `accepter_may_lead`): a few
/// accept threads answering one request at a time, each answer awaiting
/// its acknowledgement, stay below it.
const BUSY_SERVER_RPCS: usize = 4;

/// Answers that wait for later ones to leave with them, at most: then
/// they are sent. A server that answered a whole window of requests
/// before sending any answer moved the window as one batch (150 answers
/// in one `sendmsg`), and its client, which answers a batch of replies
/// with a batch of requests, did the same: each end waited while the
/// other worked, and a second CPU went unused. Sent in slices, the
/// client works on the first slice while the server answers the next.
const ANSWERS_PER_SEND: usize = 32;

/// Who holds the lead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Leader {
    /// A thread blocked in `call`, `accept` or `try_accept`.
    Caller,
    /// The background thread; any caller may take over at once.
    Background,
    /// An async caller's future, on the tokio runtime's reactor
    /// (`tasks.rs`): blocking callers follow it as they follow a thread.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    Task(u64),
}

/// What the sleeping leader waits for, so that commands can tell whether
/// it must be woken to look again.
#[derive(Clone, Copy, Debug)]
struct Sleep {
    until: Option<Instant>,
    writable: bool,
}

/// A server thread's answer to a request. The response is borrowed or
/// shared, not copied: a megabyte copy was a megabyte of fresh pages to
/// fault in whenever the allocator had just given memory back.
enum Answer<'a> {
    /// The response to a request delivered to the application then.
    Respond(ServerRpcHandle, Payload<'a>, Instant),
    Abandon(ServerRpcHandle),
}

impl Answer<'_> {
    fn rpc(&self) -> ServerRpcHandle {
        match self {
            Self::Respond(rpc, _, _) | Self::Abandon(rpc) => *rpc,
        }
    }

    /// A response that cannot be sent is the caller's error, and its
    /// request is abandoned (the client hears so at once).
    fn apply(self, engine: &mut Engine) -> Result<(), Error> {
        match self {
            Self::Respond(rpc, data, delivered) => engine.respond(rpc, data, delivered),
            Self::Abandon(rpc) => {
                engine.abandon(rpc);
                Ok(())
            }
        }
    }
}

/// A request the engine delivered, queued for the application: the
/// endpoint makes it an [`crate::IncomingRequest`] (which answers through
/// [`Shared`]) when a thread or task takes it.
pub(crate) struct Delivered {
    pub rpc: ServerRpcHandle,
    pub data: bytes::Bytes,
    pub session: Arc<SessionInfo>,
    /// When the engine delivered it.
    pub at: Instant,
}

/// Whoever waits for a call's outcome.
enum Waiter {
    /// A thread blocked in `call`: the outcome is left in its slot;
    /// `parked` is set while it sleeps as a follower (then it must be
    /// woken).
    Thread { slot: Arc<Slot>, parked: bool },
    /// An async caller driven by others: the outcome is sent at once.
    Channel(flume::Sender<Reply>),
    /// An async caller that may lead (`tasks.rs`): the outcome is left
    /// in its slot and its waker woken.
    Task(Arc<handoff::TaskSlot>),
}

/// The engine and the leader/follower bookkeeping, behind one lock.
pub(crate) struct Inner {
    engine: Engine,
    /// Inserted and removed once per call: at the call's slot.
    calls: Waiters<Waiter>,
    /// Where requests for the application are queued (see
    /// [`Shared::requests`]); dropped at the end of a close, so that
    /// async accepters waiting on the queue wake with [`Error::Closed`].
    requests_tx: Option<flume::Sender<Delivered>>,
    leader: Option<Leader>,
    /// Set while the leader sleeps on the socket.
    sleep: Option<Sleep>,
    /// A wake-up is pending in the eventfd (so another one is not needed).
    wake_sent: bool,
    /// The socket reported readable since the last receive.
    readable: bool,
    /// Answers applied since the engine last transmitted (see
    /// [`ANSWERS_PER_SEND`]).
    unsent_answers: usize,
    /// How many answers transmitted what was queued (tests count them).
    #[cfg(test)]
    answer_sends: u64,
    /// A duplicate of the socket's descriptor, to sleep on without the
    /// lock (dropped at the end of a close; a sleeper holds a reference).
    watch: Option<Arc<OwnedFd>>,
    /// The engine's next deadline for a sleeping leader thread, armed
    /// across sleeps (see [`Alarm`]). It belongs to the endpoint, not to
    /// the thread that leads: whoever leads next sleeps on it too
    /// ([`Shared::alarm_watch`]), and a command that moves the deadline
    /// earlier sets it without waking the sleeper.
    alarm: Alarm,
    /// Threads parked in `accept` (each woken at most once per request).
    accepting: Vec<Thread>,
    /// Delivered requests whose cancellation is watched or has happened.
    watches: Watches,
    /// The background thread, while it is parked (a caller leads).
    background_parked: Option<Thread>,
    /// The close finished: every call has failed, nothing drives anymore.
    closed: bool,
    /// Async callers that may lead, and their wakers.
    tasks: tasks::Tasks,
    /// Threads to wake once the lock is released.
    wakes: Wakes,
}

impl HasWakes for Inner {
    /// The large buffers the core is done with, and large replies nobody
    /// took (`Locked` frees them once the lock is released).
    type Garbage = (smt_proto::Released, Vec<bytes::Bytes>);

    fn wakes(&mut self) -> &mut Wakes {
        &mut self.wakes
    }

    fn garbage(&mut self) -> Self::Garbage {
        (self.engine.take_released(), self.engine.take_discarded())
    }

    fn has_garbage(&self) -> bool {
        self.engine.has_garbage()
    }
}

/// State shared by every handle, every request and the background thread.
pub(crate) struct Shared {
    inner: Mutex<Inner>,
    wake: WakeFd,
    /// `Inner::alarm`'s timer, to sleep on without the lock.
    alarm_watch: OwnedFd,
    /// Requests for the application, at most
    /// `ProtocolConfig::max_pending_requests` (the core refuses complete
    /// requests beyond those the application holds, queued ones included,
    /// with OVERLOADED). Disconnected once the endpoint is closed.
    pub requests: Requests,
    pub ready: Ready,
    /// Async calls and accepts being awaited (the background thread drives
    /// for them).
    async_waiters: AtomicUsize,
    /// Places for outstanding calls.
    permits: Permits,
    busy_poll: bool,
    /// Mirrors `Inner::closed` for lock-free checks.
    closed: AtomicBool,
    background: Mutex<Option<JoinHandle<()>>>,
    /// Set by a wake-up of the parked background thread (which then
    /// waits for the lock; on its own looks it does not).
    background_called: AtomicBool,
    /// Dropped by the background thread as it exits: a closed channel
    /// tells `close` and `close_async` that the endpoint has stopped.
    stopped_tx: Mutex<Option<flume::Sender<()>>>,
    stopped: flume::Receiver<()>,
}

/// What [`Shared::new`] takes from the endpoint's configuration.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub busy_poll: bool,
    pub max_outstanding_calls: usize,
    pub max_pending_requests: usize,
}

impl Shared {
    pub(crate) fn new(mut engine: Engine, limits: Limits) -> std::io::Result<Arc<Self>> {
        // Large buffers are freed after the lock is released (`Locked`),
        // which takes them from the engine each time.
        engine.collect_released();
        let socket = engine
            .socket()
            .ok_or_else(|| std::io::Error::other("socket closed"))?
            .try_clone_to_owned()?;
        let (requests_tx, requests) = flume::bounded(limits.max_pending_requests.max(1));
        let (stopped_tx, stopped) = flume::bounded(1);
        let alarm = Alarm::new()?;
        let alarm_watch = alarm.watch()?;
        let inner = Inner {
            engine,
            calls: Waiters::default(),
            requests_tx: Some(requests_tx),
            leader: None,
            sleep: None,
            wake_sent: false,
            readable: true,
            watch: Some(Arc::new(socket)),
            alarm,
            accepting: Vec::new(),
            watches: Watches::default(),
            background_parked: None,
            closed: false,
            unsent_answers: 0,
            #[cfg(test)]
            answer_sends: 0,
            tasks: tasks::Tasks::default(),
            wakes: Wakes::default(),
        };
        Ok(Arc::new(Self {
            inner: Mutex::new(inner),
            wake: WakeFd::new()?,
            alarm_watch,
            requests: Requests::new(requests),
            ready: Ready::new()?,
            async_waiters: AtomicUsize::new(0),
            permits: Permits::new(limits.max_outstanding_calls),
            busy_poll: limits.busy_poll,
            closed: AtomicBool::new(false),
            background_called: AtomicBool::new(false),
            background: Mutex::new(None),
            stopped_tx: Mutex::new(Some(stopped_tx)),
            stopped,
        }))
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Runs `f` on the engine (setters, getters), then sends what it
    /// queued and hands out what it produced.
    pub(crate) fn with_engine<T>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Engine) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let mut g = self.lock();
        if g.closed {
            return Err(Error::Closed);
        }
        let value = f(&mut g.engine)?;
        self.settle(&mut g);
        Ok(value)
    }

    /// Reads from the engine (getters): the lock for as long as `f` runs,
    /// with no sending or handing out (which `with_engine` does for
    /// whoever changes something).
    pub(crate) fn read_engine<T>(&self, f: impl FnOnce(&Engine) -> T) -> Result<T, Error> {
        let g = self.lock();
        if g.closed {
            return Err(Error::Closed);
        }
        Ok(f(&g.engine))
    }

    // ---- blocking calls and accepts ----

    /// Sends a request and drives (or follows) until its reply is here.
    /// Waits first for a place among the outstanding calls.
    pub(crate) fn call(
        self: &Arc<Self>,
        peer: SocketAddr,
        data: Payload<'_>,
        options: CallOptions,
    ) -> Reply {
        if self.is_closed() {
            return Err(Error::Closed);
        }
        let _permit = self.permits.wait();
        let data = copy_large_before_locking(data);
        let _held = hold_past_the_lock(&data);
        let mut g = self.lock();
        if g.closed {
            return Err(Error::Closed);
        }
        let call = g.engine.call(peer, data, options)?;
        let slot = Slot::mine();
        let waiter = Waiter::Thread {
            slot: slot.clone(),
            parked: false,
        };
        g.calls.insert(call, waiter);
        if self.leader_will_send(&g) {
            self.route(&mut g);
            self.wake_leader_if_late(&mut g);
        } else if matches!(g.leader, None | Some(Leader::Background)) {
            // This thread leads next (`wait_for_reply`) and runs whatever
            // is due itself: sending is all there is to do now. Asking
            // whether the background thread must be woken cost a deadline
            // and a look at the request queue per call, for a "no".
            g.engine.flush();
            self.route(&mut g);
        } else {
            self.settle(&mut g);
        }
        self.wait_for_reply(g, call, &slot)
    }

    /// Leads, or follows (parked, without the lock) until the leader
    /// leaves the reply in `slot` or promotes this thread.
    fn wait_for_reply<'a>(
        self: &'a Arc<Self>,
        mut g: Locked<'a>,
        call: CallToken,
        slot: &Slot,
    ) -> Reply {
        loop {
            if let Some(reply) = slot.take() {
                return reply;
            }
            if g.closed {
                g.calls.remove(&call);
                return Err(Error::Closed);
            }
            if matches!(g.leader, None | Some(Leader::Background)) {
                let (guard, reply) = self.lead(g, |_| slot.take());
                if let Some(reply) = reply {
                    return reply;
                }
                g = guard;
                continue;
            }
            set_parked(&mut g, call, true);
            drop(g);
            if let Some(reply) = slot.follow() {
                return reply;
            }
            g = self.lock();
            set_parked(&mut g, call, false);
        }
    }

    /// Takes the next request, driving (or following) until one is here.
    pub(crate) fn accept(self: &Arc<Self>) -> Result<Delivered, Error> {
        // A queued request needs no lock: the engine stays free for
        // whoever is receiving meanwhile.
        let mut seen = self.requests.queued();
        if !self.requests.is_empty() {
            if let Ok(request) = self.requests.try_recv() {
                return Ok(request);
            }
        }
        let mut g = self.lock();
        loop {
            if let Some(request) = self.next_queued(&mut seen) {
                return Ok(request);
            }
            if g.closed {
                return Err(Error::Closed);
            }
            if self.accepter_may_lead(&g) {
                let (guard, request) = self.lead(g, |_| self.next_queued(&mut seen));
                if let Some(request) = request {
                    return Ok(request);
                }
                g = guard;
                continue;
            }
            let me = std::thread::current();
            g.accepting.push(me.clone());
            drop(g);
            std::thread::park();
            g = self.lock();
            // Still listed: woken by something else than a request or a
            // promotion (or spuriously).
            g.accepting.retain(|t| t.id() != me.id());
        }
    }

    /// A queued request, looked for only if one was queued since the
    /// queue was found empty at the count `seen` (only taken from since,
    /// it is still empty otherwise).
    fn next_queued(&self, seen: &mut u64) -> Option<Delivered> {
        let queued = self.requests.queued();
        if queued == *seen {
            return None;
        }
        *seen = queued;
        self.requests.try_recv().ok()
    }

    /// Whether a thread in `accept` should take the lead. From a busy
    /// server's background thread it should not: the background thread
    /// then keeps the socket read continuously while the accepters work
    /// (each takes queued requests, woken once per request), where
    /// accepters taking turns would leave it unread between turns. An
    /// idle server's accepter leads, and answers with no hand-off.
    fn accepter_may_lead(&self, g: &Inner) -> bool {
        match g.leader {
            None => true,
            Some(Leader::Background) => g.engine.in_flight().1 <= BUSY_SERVER_RPCS,
            Some(Leader::Caller | Leader::Task(_)) => false,
        }
    }

    /// Receives what is ready without waiting, if nobody else is driving.
    pub(crate) fn drive_once(self: &Arc<Self>) {
        let mut g = self.lock();
        if g.closed || g.leader.is_some() {
            return;
        }
        g.leader = Some(Leader::Caller);
        g.readable = true;
        self.turn(&mut g);
        self.resign(&mut g);
    }

    // ---- commands that need no waiting ----

    /// A place among the outstanding calls, for an async call (which
    /// holds it until it ends or is dropped).
    pub(crate) async fn permit(&self) -> Permit<'_> {
        self.permits.wait_async().await
    }

    /// Starts a call whose reply is sent to `reply` (for async callers,
    /// driven by the background thread or any blocking caller). The
    /// caller holds a [`Permit`].
    pub(crate) fn call_detached(
        self: &Arc<Self>,
        peer: SocketAddr,
        data: Payload<'_>,
        options: CallOptions,
        reply: flume::Sender<Reply>,
    ) -> Result<CallToken, Error> {
        let data = copy_large_before_locking(data);
        let _held = hold_past_the_lock(&data);
        let mut g = self.lock();
        if g.closed {
            return Err(Error::Closed);
        }
        let call = g.engine.call(peer, data, options)?;
        g.calls.insert(call, Waiter::Channel(reply));
        if g.leader == Some(Leader::Background) && g.sleep.is_some() {
            // Async callers issue many calls between the background
            // leader's turns: it sends them together in its next turn
            // (one batch, coalesced datagrams) instead of one system call
            // per call from here.
            self.route(&mut g);
            self.wake_leader(&mut g);
        } else {
            self.settle(&mut g);
        }
        Ok(call)
    }

    /// Gives up on an async call whose future was dropped: its RPC is
    /// aborted at both ends (the server hears RPC_UNKNOWN at once).
    pub(crate) fn cancel(self: &Arc<Self>, call: CallToken) {
        let mut g = self.lock();
        if g.closed {
            return;
        }
        g.calls.remove(&call);
        g.engine.cancel(call);
        self.settle(&mut g);
    }

    /// Sends a response at once. One that cannot be sent is an error, and
    /// its request is abandoned: the client hears so at once.
    pub(crate) fn respond(
        self: &Arc<Self>,
        rpc: ServerRpcHandle,
        data: Payload<'_>,
        delivered: Instant,
    ) -> Result<(), Error> {
        let data = copy_large_before_locking(data);
        let _held = hold_past_the_lock(&data);
        self.answer(Answer::Respond(rpc, data, delivered))
    }

    pub(crate) fn abandon(self: &Arc<Self>, rpc: ServerRpcHandle) {
        let _ = self.answer(Answer::Abandon(rpc));
    }

    /// Applies an answer and sends what it queued at once (from this
    /// thread).
    fn answer(self: &Arc<Self>, answer: Answer<'_>) -> Result<(), Error> {
        let mut g = self.lock();
        if g.closed {
            return Err(Error::Closed);
        }
        g.watches.answered(answer.rpc());
        let applied = answer.apply(&mut g.engine);
        g.unsent_answers += 1;
        if self.requests.is_empty() || g.unsent_answers >= ANSWERS_PER_SEND {
            #[cfg(test)]
            {
                g.answer_sends += 1;
            }
            self.settle(&mut g);
        } else {
            // More requests wait to be answered: this answer leaves with
            // theirs (up to `ANSWERS_PER_SEND` of them, the last answer
            // of a batch, or the leader's next turn sends them together
            // in coalesced datagrams).
            self.route(&mut g);
        }
        applied
    }

    /// The cancellation signal of a delivered request (fired already if
    /// its client gave up, or the endpoint is closed).
    pub(crate) fn watch(&self, rpc: ServerRpcHandle) -> Cancellation {
        let mut g = self.lock();
        if g.closed {
            return super::cancel::fired();
        }
        g.watches.watch(rpc)
    }

    /// Counts an async waiter for as long as the guard lives, and makes
    /// sure someone drives meanwhile.
    pub(crate) fn async_waiter(self: &Arc<Self>) -> AsyncWaiter {
        self.async_waiters.fetch_add(1, Ordering::AcqRel);
        AsyncWaiter(self.clone())
    }

    /// Makes sure someone drives after a change in who needs driving
    /// (`ready_fd` enabled).
    pub(crate) fn poke(self: &Arc<Self>) {
        let mut g = self.lock();
        self.settle(&mut g);
    }

    // ---- driving ----

    fn lock(&self) -> Locked<'_> {
        Locked::new(lock_ignoring_poison(&self.inner))
    }

    /// Leads until `take` yields what this thread waits for (taken before
    /// resigning, so the successor sees only what is left) or the close
    /// ends. Takes over from the background thread without waiting for it.
    fn lead<'a, T>(
        self: &'a Arc<Self>,
        mut g: Locked<'a>,
        mut take: impl FnMut(&mut Inner) -> Option<T>,
    ) -> (Locked<'a>, Option<T>) {
        if g.leader == Some(Leader::Background) {
            // It may still sleep on the socket; it steps back when it
            // wakes. Wake-ups are now for the new leader.
            g.sleep = None;
        }
        g.leader = Some(Leader::Caller);
        let taken = loop {
            self.turn(&mut g);
            if let Some(value) = take(&mut g) {
                break Some(value);
            }
            if g.closed {
                break None;
            }
            g = self.sleep(g);
        };
        self.resign(&mut g);
        (g, taken)
    }

    /// One turn of the engine, its outcomes handed out, and the end of a
    /// graceful close if it is due.
    fn turn(self: &Arc<Self>, g: &mut Inner) {
        if g.closed {
            return;
        }
        let readable = std::mem::take(&mut g.readable) || self.busy_poll;
        g.unsent_answers = 0;
        g.engine.turn(readable);
        self.route(g);
        if g.engine.finished_closing() {
            self.finish_close(g);
        }
    }

    /// Sleeps on the socket without the lock, until it is readable, the
    /// engine's deadline or a wake-up (spins in busy-poll mode, and when
    /// the last receive left datagrams).
    fn sleep<'a>(&'a self, mut g: Locked<'a>) -> Locked<'a> {
        if g.engine.more_to_read() {
            // Let commands from other threads in between batches.
            drop(g);
            return self.lock();
        }
        let Some(watch) = g.watch.clone() else {
            return g;
        };
        if self.busy_poll {
            // Spin, but let commands from other threads in.
            drop(g);
            return self.lock();
        }
        let sleep = Sleep {
            until: g.engine.deadline(),
            writable: g.engine.wants_writable(),
        };
        let timeout = self.set_alarm(&mut g, sleep.until);
        g.sleep = Some(sleep);
        let leader = g.leader;
        drop(g);
        let ready = wait_or_alarm(
            watch.as_fd(),
            sleep.writable,
            Some(self.wake.fd()),
            Some(self.alarm_watch.as_fd()),
            timeout,
        );
        let mut g = self.lock();
        if g.leader != leader {
            // The background thread was replaced while it slept.
            return g;
        }
        g.sleep = None;
        match ready {
            Ok(ready) => {
                g.readable |= ready.readable;
                if ready.failed {
                    g.engine.socket_failed();
                }
                if ready.writable {
                    g.engine.writable();
                }
                if ready.woken {
                    self.wake.drain();
                    g.wake_sent = false;
                }
                if ready.alarm {
                    // Noted under the lock; the next sleep sets it for
                    // the next deadline (or disarms it).
                    g.alarm.went_off();
                }
            }
            Err(e) => tracing::warn!("waiting on the socket failed: {e}"),
        }
        g
    }

    /// Arms the alarm for `until` (the engine's deadline) before a sleep;
    /// returns the sleep's timeout: none, the alarm wakes it; zero for a
    /// deadline due already (a zero timeout arms no timer); the time left
    /// if the alarm could not be set.
    fn set_alarm(&self, g: &mut Inner, until: Option<Instant>) -> Option<std::time::Duration> {
        let now = g.engine.now();
        let left = until.map(|u| u.saturating_duration_since(now));
        if left.is_some_and(|l| l.is_zero()) {
            return left;
        }
        match g.alarm.by(until, now) {
            Ok(()) => None,
            Err(e) => {
                tracing::warn!("setting the driver's timer failed: {e}");
                left
            }
        }
    }

    /// Gives up the lead: promotes a parked caller, else a parked
    /// accepter, else lets the background thread know if it has work.
    fn resign(&self, g: &mut Inner) {
        if !self.promote(g) {
            self.wake_background_if_needed(g);
        }
    }

    /// Leaves the lead to nobody and promotes a waiter, if there is one:
    /// a parked caller, else a parked accepter, else a waiting task.
    fn promote(&self, g: &mut Inner) -> bool {
        g.leader = None;
        let parked_caller = g.calls.values_mut().find_map(|w| match w {
            Waiter::Thread { slot, parked } if *parked => {
                *parked = false;
                Some(slot.clone())
            }
            _ => None,
        });
        if let Some(slot) = parked_caller {
            slot.promote();
            g.wakes.push(slot.thread().clone());
            true
        } else if let Some(thread) = g.accepting.pop() {
            g.wakes.push(thread);
            true
        } else {
            g.tasks.promote_one(&mut g.wakes)
        }
    }

    /// Whether a new call's request may wait for the leader's next turn
    /// instead of leaving now: the leader sleeps on the socket while other
    /// calls are in flight, so a reply (or their timers, at most a tick
    /// away) wakes it soon, or a leading task is polled again after the
    /// tasks it let run (or is woken for this call), and it then sends
    /// every request queued meanwhile in one batch. Many callers thus
    /// share system calls; one caller alone always sends at once.
    fn leader_will_send(&self, g: &Inner) -> bool {
        (g.sleep.is_some() || g.tasks.leader_yielded()) && g.engine.in_flight().0 > 1
    }

    /// After a command: sends and hands out what it produced, and wakes
    /// whoever must look again (a leader sleeping past the new deadline,
    /// the background thread if it has work and nobody leads).
    fn settle(self: &Arc<Self>, g: &mut Inner) {
        g.unsent_answers = 0;
        g.engine.flush();
        self.route(g);
        if g.sleep.is_some() {
            self.wake_leader_if_late(g);
        } else if g.leader.is_none() {
            self.wake_background_if_needed(g);
        }
    }

    /// Wakes the sleeping leader if the engine's deadline moved before its
    /// wake-up, or it must watch for room in the socket.
    fn wake_leader_if_late(&self, g: &mut Inner) {
        let Some(sleep) = g.sleep else {
            return;
        };
        let deadline = g.engine.deadline();
        let earlier = deadline.is_some_and(|d| sleep.until.is_none_or(|u| d < u));
        let unwatched = g.engine.wants_writable() && !sleep.writable;
        // Short-circuits: a wake-up makes the leader look at both anyway.
        if unwatched || (earlier && !self.alarm_moved(g, deadline)) {
            self.wake_leader(g);
        }
    }

    /// Moves a sleeping leader thread's alarm to the earlier `deadline`
    /// instead of waking it to look (a wake-up is a context switch and a
    /// turn for nothing). False for a leading task (it sleeps on its
    /// runtime's timer) and if the alarm could not be set.
    fn alarm_moved(&self, g: &mut Inner, deadline: Option<Instant>) -> bool {
        if matches!(g.leader, Some(Leader::Task(_))) {
            return false;
        }
        let now = g.engine.now();
        if g.alarm.by(deadline, now).is_err() {
            return false;
        }
        if let Some(sleep) = g.sleep.as_mut() {
            sleep.until = deadline;
        }
        true
    }

    /// Hands out the engine's outcomes: replies to their waiters, requests
    /// to the queue (waking one parked accepter each).
    fn route(self: &Arc<Self>, g: &mut Inner) {
        while let Some(outcome) = g.engine.poll_outcome() {
            match outcome {
                Outcome::Reply { call, result } => deliver_reply(g, call, result),
                Outcome::Request {
                    rpc,
                    data,
                    session,
                    at,
                } => {
                    let request = Delivered {
                        rpc,
                        data,
                        session,
                        at,
                    };
                    // Only this function sends, under the engine lock: it
                    // never blocks. A full queue refuses it (no `is_full`
                    // first: that took the queue's lock once more per
                    // request, ~65 instructions).
                    let queued = g
                        .requests_tx
                        .as_ref()
                        .is_some_and(|queue| queue.try_send(request).is_ok());
                    if !queued {
                        // Cannot happen: the core refuses requests beyond
                        // `max_pending_requests` unanswered ones, and the
                        // queue holds that many; a closed endpoint has
                        // stopped receiving. Should it, the client hears
                        // ABANDONED rather than wait.
                        tracing::warn!(peer = %rpc.peer, "request queue full or closed: request abandoned");
                        g.engine.abandon(rpc);
                        continue;
                    }
                    self.requests.count_queued();
                    self.ready.notify();
                    if let Some(thread) = g.accepting.pop() {
                        g.wakes.push(thread);
                    } else {
                        g.tasks.wake_accepter(&mut g.wakes);
                    }
                }
                Outcome::Cancelled { rpc, .. } => g.watches.cancelled(rpc),
            }
        }
    }

    fn wake_leader(&self, g: &mut Inner) {
        if let Some(Leader::Task(_)) = g.leader {
            g.tasks.wake_leader(&mut g.wakes);
        } else if !g.wake_sent {
            g.wake_sent = true;
            self.wake.wake();
        }
    }
}

/// Decrements the async waiter count when the awaiting future ends or is
/// dropped.
pub(crate) struct AsyncWaiter(Arc<Shared>);

impl Drop for AsyncWaiter {
    fn drop(&mut self) {
        self.0.async_waiters.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Hands a reply to its waiter: a blocking caller's slot (waking it if
/// it sleeps, once the lock is released) or an async caller's channel.
fn deliver_reply(g: &mut Inner, call: CallToken, result: Reply) {
    match g.calls.remove(&call) {
        Some(Waiter::Thread { slot, parked }) => {
            slot.put(result);
            if parked {
                g.wakes.push(slot.thread().clone());
            }
        }
        Some(Waiter::Task(slot)) => {
            if let Some(waker) = slot.put(result) {
                g.wakes.push_task(waker);
            }
        }
        Some(Waiter::Channel(tx)) => {
            // The caller's future is gone: the reply is freed after the lock.
            if let Err(flume::SendError(result)) = tx.send(result) {
                g.engine.discard(result);
            }
        }
        None => g.engine.discard(result),
    }
}

/// `data`, copied now if it is a borrowed message too large for the core
/// to copy into a reused buffer ([`Payload::POOLED_COPY_LIMIT`]): the core
/// would copy it into fresh memory under the engine lock, and the endpoint
/// would neither receive nor answer meanwhile (a 256 MiB request held a
/// client's lock for 0.3–1.2 s on a loaded two-core machine). Copied here,
/// on the caller's thread without the lock, it costs the engine nothing.
fn copy_large_before_locking(data: Payload<'_>) -> Payload<'_> {
    match data {
        Payload::Borrowed(d) if d.len() > Payload::POOLED_COPY_LIMIT => {
            Payload::Owned(bytes::Bytes::copy_from_slice(d))
        }
        other => other,
    }
}

/// A second reference to `data` if it is large owned bytes, for the
/// caller to drop after the engine lock is released. The core frees a
/// message it could not send (the call or the response refused) in the
/// refusing call, under the lock; with this reference alive, the last one
/// (and the free, a tenth of a second for 256 MiB on a loaded machine) is
/// the caller's. One it sent it hands back through `Engine::take_released`
/// when done, to whichever thread releases the lock next; a blocking
/// `call` holds its request until the reply is here, so its own thread
/// frees it, not the leader's.
fn hold_past_the_lock(data: &Payload<'_>) -> Option<bytes::Bytes> {
    match data {
        Payload::Owned(b) if b.len() > Payload::POOLED_COPY_LIMIT => Some(b.clone()),
        _ => None,
    }
}

fn set_parked(g: &mut Inner, call: CallToken, value: bool) {
    if let Some(Waiter::Thread { parked, .. }) = g.calls.get_mut(&call) {
        *parked = value;
    }
}
