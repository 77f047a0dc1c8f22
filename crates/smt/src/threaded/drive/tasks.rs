//! Async callers that drive the engine themselves, on the tokio
//! runtime's reactor (feature `tokio`): the task-side twin of the
//! leader/follower rules in `mod.rs`.
//!
//! A future awaiting `call_async` or `accept_async` on a tokio runtime
//! with IO and timers enabled takes the lead when nobody leads, or from
//! the background thread; while it leads, each poll turns the engine and
//! then waits on the reactor (`reactor.rs`): the socket's readiness, the
//! engine's deadline, or its waker, which commands wake as they would
//! wake a sleeping thread. Other async waiters follow: their waker is
//! woken when their reply or a request is here, or when the leader
//! resigns and promotes them. A leader resigns when its own reply or
//! request is here, and when its future is dropped; a promoted future
//! dropped before it looked hands the promotion on. So a cancelled
//! future never leaves the engine without a leader, and the background
//! thread takes over from a leading future its runtime stopped polling
//! (its deadline overdue by a tick, `background.rs`).
//!
//! Without a usable runtime (another executor, a runtime without IO or
//! timers, or a second runtime while the socket is registered with a
//! first), async callers wait as before, on a channel, and the background
//! thread drives for them.

use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use smt_proto::Payload;

use super::handoff::{Reply, TaskSlot, Wakes};
use super::{copy_large_before_locking, hold_past_the_lock, Delivered, Inner, Leader, Locked};
use super::{Shared, Waiter};
use crate::engine::CallToken;
use crate::{CallOptions, Error};

/// Turns a leading task makes in one poll while datagrams keep coming
/// before it yields to the runtime's other tasks (it keeps the lead and
/// is polled again at once).
#[cfg(feature = "tokio")]
const TURNS_PER_POLL: usize = 16;

/// Whether async callers can lead: the socket on one runtime's reactor.
#[derive(Default)]
enum ReactorState {
    /// No async caller has asked yet.
    #[default]
    Untried,
    #[cfg(feature = "tokio")]
    Ready(super::reactor::Reactor),
    /// Not possible (no tokio runtime when first asked, no IO or timers
    /// in it, or its reactor has gone): async callers use the channel.
    Unavailable,
}

/// The async callers that may lead, under the engine lock.
#[derive(Default)]
pub(super) struct Tasks {
    reactor: ReactorState,
    /// The leading task's waker, while it waits on the reactor.
    leader_waker: Option<Waker>,
    /// The leading task let the runtime's other tasks run and is polled
    /// again next (it woke itself): like a sleeping leader, it sends what
    /// they submit meanwhile.
    leader_yielded: bool,
    /// Waiting tasks that may be promoted, oldest first (entries of
    /// finished futures are skipped).
    followers: VecDeque<Arc<TaskSlot>>,
    /// Tasks in `accept_async`, woken one per request.
    accepters: VecDeque<Arc<TaskSlot>>,
    next_id: u64,
    /// How many times a task took the lead (the background thread leaves
    /// the lead to tasks that keep coming back for it).
    leads: u64,
    /// `leads` at the background thread's last look.
    leads_looked: u64,
}

impl Tasks {
    /// Promotes the oldest waiting task; whether there was one.
    pub(super) fn promote_one(&mut self, wakes: &mut Wakes) -> bool {
        if !matches!(
            self.reactor,
            ReactorState::Untried | ReactorState::Unavailable
        ) {
            while let Some(slot) = self.followers.pop_front() {
                if let Some(waker) = slot.promote() {
                    wakes.push_task_opt(waker);
                    return true;
                }
            }
        }
        false
    }

    /// Wakes one task waiting in `accept_async` for a queued request;
    /// whether there was one.
    pub(super) fn wake_accepter(&mut self, wakes: &mut Wakes) -> bool {
        while let Some(slot) = self.accepters.pop_front() {
            if let Some(waker) = slot.wake_accepter() {
                wakes.push_task_opt(waker);
                return true;
            }
        }
        false
    }

    /// Wakes the leading task if it waits on the reactor.
    pub(super) fn wake_leader(&mut self, wakes: &mut Wakes) {
        if let Some(waker) = self.leader_waker.take() {
            wakes.push_task(waker);
        }
    }

    /// Whether no task took the lead since the background thread's last
    /// look.
    pub(super) fn idle_since_look(&self) -> bool {
        self.leads == self.leads_looked
    }

    /// The background thread looks now.
    pub(super) fn looked(&mut self) {
        self.leads_looked = self.leads;
    }

    /// The leading task lost the lead to the background thread.
    pub(super) fn forget_leader(&mut self) {
        self.leader_waker = None;
        self.leader_yielded = false;
    }

    /// Whether the leading task yielded to the runtime's other tasks and
    /// is polled again after them.
    pub(super) fn leader_yielded(&self) -> bool {
        self.leader_yielded
    }

    /// Wakes every waiting task (the close ended: each sees it), and
    /// lets go of the socket's registration (its descriptor keeps the
    /// port bound).
    pub(super) fn close(&mut self, wakes: &mut Wakes) {
        self.wake_leader(wakes);
        while self.promote_one(wakes) {}
        while self.wake_accepter(wakes) {}
        self.reactor = ReactorState::Unavailable;
    }

    fn new_slot(&mut self) -> Arc<TaskSlot> {
        self.next_id += 1;
        TaskSlot::new(self.next_id)
    }

    /// Lists a waiting task (once), dropping finished entries at the
    /// front so that the lists stay as long as the waiters.
    fn list(queue: &mut VecDeque<Arc<TaskSlot>>, slot: &Arc<TaskSlot>) {
        while queue.front().is_some_and(|s| s.is_done()) {
            queue.pop_front();
        }
        queue.push_back(slot.clone());
    }
}

impl Wakes {
    fn push_task_opt(&mut self, waker: Option<Waker>) {
        if let Some(waker) = waker {
            self.push_task(waker);
        }
    }
}

// ---- the futures ----

/// What a waiting task is waiting for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    Reply(CallToken),
    Request,
}

/// An async call or accept that may lead: `call_async` and
/// `accept_async` await it.
pub(crate) struct TaskWait<'a> {
    shared: &'a Arc<Shared>,
    slot: Arc<TaskSlot>,
    want: Want,
    finished: bool,
}

/// What a [`TaskWait`] yields.
pub(crate) enum Got {
    Reply(Reply),
    Request(Delivered),
}

impl Shared {
    /// Starts a call whose future leads or follows on the current tokio
    /// runtime; `Ok(None)` if async callers cannot lead here (the caller
    /// then uses `call_detached`). The caller holds a permit.
    pub(crate) fn call_task(
        self: &Arc<Self>,
        peer: SocketAddr,
        data: Payload<'_>,
        options: CallOptions,
    ) -> Result<Option<TaskWait<'_>>, Error> {
        let data = copy_large_before_locking(data);
        let _held = hold_past_the_lock(&data);
        let mut g = self.lock();
        if g.closed {
            return Err(Error::Closed);
        }
        if !self.tasks_may_lead(&mut g) {
            return Ok(None);
        }
        let call = g.engine.call(peer, data, options)?;
        let slot = g.tasks.new_slot();
        g.calls.insert(call, Waiter::Task(slot.clone()));
        if self.leader_will_send(&g) {
            self.route(&mut g);
            self.wake_leading_task_to_send(&mut g);
        } else if g.leader.is_none() {
            // This task leads in its first poll, which follows at once
            // (`call_async` awaits the wait it gets), and its first turn
            // sends the call. Sent from here, the calls made between a
            // leader's resignation and its successor's first poll left
            // one `sendmsg` each (smt-bench's 64 B x 150: runs of 30-40).
            self.route(&mut g);
        } else {
            self.settle(&mut g);
        }
        Ok(Some(self.task_wait(slot, Want::Reply(call))))
    }

    /// After a call queued for the sleeping leader: a leading task is
    /// woken to send it (once; the calls made before it is polled leave
    /// in the same batch). Left for the leader's next reply, a batch of
    /// calls made for a batch of replies waited for the server's next
    /// batch, and the two ends took turns with the whole window. A thread
    /// leader is woken only if it would sleep past the new deadline.
    fn wake_leading_task_to_send(&self, g: &mut Inner) {
        if matches!(g.leader, Some(Leader::Task(_))) {
            g.tasks.wake_leader(&mut g.wakes);
        } else {
            self.wake_leader_if_late(g);
        }
    }

    /// Waits for a request as a task that leads or follows on the current
    /// tokio runtime; `None` if async callers cannot lead here.
    pub(crate) fn accept_task(self: &Arc<Self>) -> Option<TaskWait<'_>> {
        let mut g = self.lock();
        if !g.closed && !self.tasks_may_lead(&mut g) {
            return None;
        }
        let slot = g.tasks.new_slot();
        Some(self.task_wait(slot, Want::Request))
    }

    fn task_wait(self: &Arc<Self>, slot: Arc<TaskSlot>, want: Want) -> TaskWait<'_> {
        TaskWait {
            shared: self,
            slot,
            want,
            finished: false,
        }
    }

    /// Whether tasks on the current runtime may lead (registers the
    /// socket with its reactor on first use).
    #[cfg(feature = "tokio")]
    fn tasks_may_lead(&self, g: &mut Inner) -> bool {
        if let ReactorState::Untried = g.tasks.reactor {
            let reactor = g
                .watch
                .clone()
                .and_then(super::reactor::Reactor::for_current_runtime);
            g.tasks.reactor = match reactor {
                Some(r) => ReactorState::Ready(r),
                None => ReactorState::Unavailable,
            };
        }
        match &g.tasks.reactor {
            ReactorState::Ready(r) => r.is_current(),
            _ => false,
        }
    }

    #[cfg(not(feature = "tokio"))]
    fn tasks_may_lead(&self, _g: &mut Inner) -> bool {
        false
    }

    /// What the task waits for, if it is here (without the engine lock
    /// for a reply).
    fn take_wanted(&self, slot: &TaskSlot, want: Want) -> Option<Got> {
        match want {
            Want::Reply(_) => slot.take().map(Got::Reply),
            Want::Request => self.requests.try_recv().ok().map(Got::Request),
        }
    }

    /// One poll of a waiting task: what it waits for if here; otherwise
    /// it leads (turns, then waits on the reactor) or follows.
    fn poll_task(
        self: &Arc<Self>,
        cx: &mut Context<'_>,
        slot: &Arc<TaskSlot>,
        want: Want,
    ) -> Poll<Result<Got, Error>> {
        if let Some(got) = self.take_wanted(slot, want) {
            return Poll::Ready(Ok(got));
        }
        let mut g = self.lock();
        slot.take_promotion();
        self.poll_locked(&mut g, cx, slot, want)
    }

    #[cfg(feature = "tokio")]
    fn poll_locked(
        self: &Arc<Self>,
        g: &mut Locked<'_>,
        cx: &mut Context<'_>,
        slot: &Arc<TaskSlot>,
        want: Want,
    ) -> Poll<Result<Got, Error>> {
        for turn in 0..TURNS_PER_POLL {
            if let Some(got) = self.take_wanted(slot, want) {
                // Done first: the promotion skips it.
                slot.finish();
                self.resign_task(g, slot);
                return Poll::Ready(Ok(got));
            }
            if g.closed {
                slot.finish();
                self.resign_task(g, slot);
                return Poll::Ready(Err(Error::Closed));
            }
            if !self.task_leads(g, slot, cx) {
                self.follow(g, cx, slot, want);
                return Poll::Pending;
            }
            if g.wakes.has_tasks() {
                // The last turn handed replies or requests to other tasks:
                // they run first, and what they submit (their next calls)
                // leaves in this task's next turn, one batch. Turning on
                // while replies kept coming held their calls back, and
                // the server ran out of requests meanwhile.
                return self.yield_lead(g, cx);
            }
            let woken = turn == 0 || g.engine.more_to_read();
            if !woken && self.wait_on_reactor(g, cx).is_pending() {
                return Poll::Pending;
            }
            self.turn(g);
        }
        // Input keeps coming: let the runtime's other tasks run (the
        // lead stays here; polled again at once).
        self.yield_lead(g, cx)
    }

    /// Lets the runtime's other tasks run before the leading task's next
    /// turn; it keeps the lead.
    #[cfg(feature = "tokio")]
    fn yield_lead(&self, g: &mut Inner, cx: &mut Context<'_>) -> Poll<Result<Got, Error>> {
        g.tasks.leader_yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    #[cfg(not(feature = "tokio"))]
    fn poll_locked(
        self: &Arc<Self>,
        g: &mut Locked<'_>,
        cx: &mut Context<'_>,
        slot: &Arc<TaskSlot>,
        want: Want,
    ) -> Poll<Result<Got, Error>> {
        if let Some(got) = self.take_wanted(slot, want) {
            return Poll::Ready(Ok(got));
        }
        if g.closed {
            return Poll::Ready(Err(Error::Closed));
        }
        self.follow(g, cx, slot, want);
        Poll::Pending
    }

    /// Gives up the lead if this task holds it (see
    /// [`Shared::wake_background_if_needed`] for who takes over).
    fn resign_task(&self, g: &mut Inner, slot: &TaskSlot) {
        slot.set_led(false);
        if g.leader == Some(Leader::Task(slot.id)) {
            g.tasks.leader_waker = None;
            g.tasks.leader_yielded = false;
            g.sleep = None;
            if !self.promote(g) {
                self.wake_background_if_needed(g);
            }
        }
    }

    /// Whether this task leads now: it did, or nobody did, or the
    /// background thread did (it steps back when it wakes).
    #[cfg(feature = "tokio")]
    fn task_leads(&self, g: &mut Inner, slot: &TaskSlot, cx: &Context<'_>) -> bool {
        match g.leader {
            Some(Leader::Task(id)) if id == slot.id => {}
            None | Some(Leader::Background) => {
                if !self.tasks_may_lead(g) {
                    return false;
                }
                if g.sleep.is_some() {
                    // The background thread sleeps on the socket: it steps
                    // back when it wakes, which it must not leave to the
                    // next datagram or deadline (a close would wait).
                    self.wake_leader(g);
                }
                g.leader = Some(Leader::Task(slot.id));
                g.tasks.leads += 1;
            }
            _ => return false,
        }
        g.sleep = None;
        g.tasks.leader_waker = None;
        g.tasks.leader_yielded = false;
        // Its reply may be delivered by a command while it waits on the
        // reactor: that wakes it through its slot.
        slot.set_waker(cx.waker());
        slot.set_led(true);
        true
    }

    /// Waits on the reactor; `Ready` when something is ready (applied to
    /// the engine), `Pending` with the task's waker registered. A reactor
    /// that has gone (its runtime shut down) is given up: the lead goes
    /// to whoever can take it.
    #[cfg(feature = "tokio")]
    fn wait_on_reactor(self: &Arc<Self>, g: &mut Inner, cx: &mut Context<'_>) -> Poll<()> {
        let until = g.engine.deadline();
        let writable = g.engine.wants_writable();
        let ReactorState::Ready(reactor) = &mut g.tasks.reactor else {
            self.resign(g);
            return Poll::Ready(());
        };
        match reactor.poll(cx, until, writable) {
            Poll::Ready(Ok(woke)) => {
                g.readable |= woke.readable;
                if woke.failed {
                    g.engine.socket_failed();
                }
                if woke.writable {
                    g.engine.writable();
                }
                Poll::Ready(())
            }
            Poll::Ready(Err(e)) => {
                tracing::warn!("tokio reactor gone ({e}): the background thread drives");
                g.tasks.reactor = ReactorState::Unavailable;
                self.resign(g);
                Poll::Ready(())
            }
            Poll::Pending => {
                g.sleep = Some(super::Sleep { until, writable });
                g.tasks.leader_waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    /// Waits as a follower: woken by its reply, a request, a promotion or
    /// the close.
    fn follow(&self, g: &mut Inner, cx: &mut Context<'_>, slot: &Arc<TaskSlot>, want: Want) {
        let (queue, accept) = slot.wait(cx.waker(), want == Want::Request);
        if queue {
            Tasks::list(&mut g.tasks.followers, slot);
        }
        if accept {
            Tasks::list(&mut g.tasks.accepters, slot);
        }
        if g.leader.is_none() {
            // Nobody leads and this task may not (its runtime's reactor
            // is gone): the background thread must.
            self.wake_background(g);
        }
    }

    /// A task's future ended (done, or dropped, after
    /// [`TaskSlot::finish`]): it stops leading, and a promotion it never
    /// used goes on to the next waiter. A dropped call is cancelled.
    fn end_task(self: &Arc<Self>, slot: &TaskSlot, want: Want, done: bool) {
        let mut g = self.lock();
        if let (Want::Reply(call), false) = (want, done) {
            if g.calls.remove(&call).is_some() && !g.closed {
                g.engine.cancel(call);
            }
        }
        if g.leader == Some(Leader::Task(slot.id)) {
            self.resign_task(&mut g, slot);
        } else if g.leader.is_none() {
            self.resign(&mut g);
        }
        if want == Want::Request && !self.requests.is_empty() {
            // It may have been woken for a queued request it will not
            // take now: another accepter takes it.
            let inner = &mut *g;
            inner.tasks.wake_accepter(&mut inner.wakes);
        }
        if !g.closed {
            self.settle(&mut g);
        }
    }
}

impl Future for TaskWait<'_> {
    type Output = Result<Got, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let polled = this.shared.poll_task(cx, &this.slot, this.want);
        if polled.is_ready() {
            this.finished = true;
            // Usually nothing to hand on: a leader resigned in its poll.
            if this.slot.finish() {
                this.shared.end_task(&this.slot, this.want, true);
            }
        }
        polled
    }
}

impl Drop for TaskWait<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.slot.finish();
            self.shared.end_task(&self.slot, self.want, false);
        }
    }
}

#[cfg(all(test, feature = "tokio"))]
impl Shared {
    /// Whether an async caller's future leads.
    pub(crate) fn task_leads_now(&self) -> bool {
        matches!(self.lock().leader, Some(Leader::Task(_)))
    }
}
