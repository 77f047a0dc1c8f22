//! How threads hand things to each other around the engine lock: the
//! lock guard that wakes threads only once the lock is released, and the
//! slot where a blocking call's reply (or a promotion to lead) is left.
//!
//! Why wake after releasing: on a busy CPU, a thread woken while the
//! lock is held is often switched to at once, only to block on the lock
//! and switch back (the profile of 32 blocking callers on one core
//! showed two fifths of all context switches there). Why a slot outside
//! the lock: a follower whose reply arrived returns without taking the
//! engine lock at all, so it never waits for the leader's turn to end.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;
use std::thread::Thread;

use crate::Error;

pub(crate) type Reply = Result<bytes::Bytes, Error>;

/// Threads and tasks to wake once the engine lock is released.
#[derive(Default)]
pub(crate) struct Wakes {
    threads: Vec<Thread>,
    tasks: Vec<Waker>,
}

impl Wakes {
    pub(super) fn push(&mut self, thread: Thread) {
        self.threads.push(thread);
    }

    pub(super) fn push_task(&mut self, waker: Waker) {
        self.tasks.push(waker);
    }

    fn is_empty(&self) -> bool {
        self.threads.is_empty() && self.tasks.is_empty()
    }

    /// Whether a task is to be woken.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(super) fn has_tasks(&self) -> bool {
        !self.tasks.is_empty()
    }
}

/// What the engine lock protects gives up, as the lock is released, what
/// must happen after: threads to wake and memory to free.
pub(crate) trait HasWakes {
    /// What to drop once the lock is released.
    type Garbage;
    fn wakes(&mut self) -> &mut Wakes;
    /// The memory released under the lock since the last call (O(1)).
    fn garbage(&mut self) -> Self::Garbage;
    /// Whether there is any such memory.
    fn has_garbage(&self) -> bool;
}

/// The engine lock, held. Dropping it releases the lock, then wakes the
/// threads queued meanwhile, then frees the memory released meanwhile
/// (the woken threads may take the lock while this one frees).
pub(crate) struct Locked<'a, T: HasWakes>(Option<MutexGuard<'a, T>>);

impl<'a, T: HasWakes> Locked<'a, T> {
    pub(super) fn new(guard: MutexGuard<'a, T>) -> Self {
        Self(Some(guard))
    }
}

impl<T: HasWakes> Deref for Locked<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // NOTE(unwrap): the guard is taken only in `drop`.
        self.0.as_deref().expect("held until dropped")
    }
}

impl<T: HasWakes> DerefMut for Locked<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // NOTE(unwrap): the guard is taken only in `drop`.
        self.0.as_deref_mut().expect("held until dropped")
    }
}

impl<T: HasWakes> Drop for Locked<'_, T> {
    fn drop(&mut self) {
        let Some(mut guard) = self.0.take() else {
            return;
        };
        if guard.wakes().is_empty() && !guard.has_garbage() {
            // Most releases: taking and dropping two empty wake lists and
            // three empty buffer lists cost ~170 instructions each time.
            return;
        }
        let wakes = std::mem::take(guard.wakes());
        let garbage = guard.garbage();
        drop(guard);
        for thread in wakes.threads {
            thread.unpark();
        }
        for task in wakes.tasks {
            task.wake();
        }
        drop(garbage);
    }
}

/// Where a thread blocked in `call` finds its reply, or learns that it
/// was promoted to lead. One per thread, reused by its successive calls
/// (a thread waits for one call at a time).
pub(crate) struct Slot {
    thread: Thread,
    reply: Mutex<Option<Reply>>,
    promoted: AtomicBool,
}

thread_local! {
    static SLOT: Arc<Slot> = Arc::new(Slot {
        thread: std::thread::current(),
        reply: Mutex::new(None),
        promoted: AtomicBool::new(false),
    });
}

impl Slot {
    /// This thread's slot, emptied for a new call.
    pub(super) fn mine() -> Arc<Slot> {
        let slot = SLOT.with(Arc::clone);
        slot.promoted.store(false, Ordering::Relaxed);
        *lock_ignoring_poison(&slot.reply) = None;
        slot
    }

    pub(super) fn thread(&self) -> &Thread {
        &self.thread
    }

    /// Leaves the reply (the caller then wakes the thread if it sleeps).
    pub(super) fn put(&self, reply: Reply) {
        *lock_ignoring_poison(&self.reply) = Some(reply);
    }

    pub(super) fn take(&self) -> Option<Reply> {
        lock_ignoring_poison(&self.reply).take()
    }

    /// Asks the thread to lead (the caller then wakes it).
    pub(super) fn promote(&self) {
        self.promoted.store(true, Ordering::Release);
    }

    /// Sleeps until the reply is here (returned) or the thread was
    /// promoted (`None`). Called without the engine lock.
    pub(super) fn follow(&self) -> Option<Reply> {
        loop {
            if let Some(reply) = self.take() {
                return Some(reply);
            }
            if self.promoted.swap(false, Ordering::AcqRel) {
                return None;
            }
            // Spurious returns are fine: the loop looks again.
            std::thread::park();
        }
    }
}

/// Where an async caller's future (a call or an accept that may lead
/// on the runtime's reactor, `tasks.rs`) finds its reply, or learns that
/// it was promoted to lead: [`Slot`]'s twin, with the task's waker in
/// place of the parked thread. One per future.
pub(crate) struct TaskSlot {
    /// Names the future while it leads ([`super::Leader::Task`]).
    pub(super) id: u64,
    state: Mutex<TaskState>,
}

#[derive(Default)]
struct TaskState {
    reply: Option<Reply>,
    waker: Option<Waker>,
    promoted: bool,
    /// Listed among the followers that may be promoted.
    queued: bool,
    /// Listed among the accepters to wake for a request.
    accepting: bool,
    /// The future finished or was dropped: skipped where still listed.
    done: bool,
    /// It took the lead and has not resigned since.
    led: bool,
}

impl TaskSlot {
    pub(super) fn new(id: u64) -> Arc<Self> {
        Arc::new(Self {
            id,
            state: Mutex::new(TaskState::default()),
        })
    }

    fn state(&self) -> MutexGuard<'_, TaskState> {
        lock_ignoring_poison(&self.state)
    }

    /// Leaves the reply; returns the waker to wake once the lock is
    /// released.
    pub(super) fn put(&self, reply: Reply) -> Option<Waker> {
        let mut s = self.state();
        s.reply = Some(reply);
        s.waker.take()
    }

    pub(super) fn take(&self) -> Option<Reply> {
        self.state().reply.take()
    }

    /// Asks the task to lead; returns its waker (`None`: it was done
    /// already and cannot be promoted).
    pub(super) fn promote(&self) -> Option<Option<Waker>> {
        let mut s = self.state();
        s.queued = false;
        if s.done {
            return None;
        }
        s.promoted = true;
        Some(s.waker.take())
    }

    /// Wakes the task for a request it may take; `None` if it was done.
    pub(super) fn wake_accepter(&self) -> Option<Option<Waker>> {
        let mut s = self.state();
        s.accepting = false;
        if s.done {
            return None;
        }
        Some(s.waker.take())
    }

    /// Whether the task was promoted since it last looked (clears it).
    pub(super) fn take_promotion(&self) -> bool {
        std::mem::take(&mut self.state().promoted)
    }

    /// Stores the waker of a task about to wait; returns whether it must
    /// be listed among the followers, and among the accepters.
    pub(super) fn wait(&self, waker: &Waker, accepting: bool) -> (bool, bool) {
        let mut s = self.state();
        match &mut s.waker {
            Some(w) => w.clone_from(waker),
            None => s.waker = Some(waker.clone()),
        }
        let queue = !std::mem::replace(&mut s.queued, true);
        let accept = accepting && !std::mem::replace(&mut s.accepting, true);
        (queue, accept)
    }

    /// The future ended; returns whether it may still lead or held a
    /// promotion it never used (the caller then looks, under the engine
    /// lock, and hands the lead on).
    pub(super) fn finish(&self) -> bool {
        let mut s = self.state();
        s.done = true;
        s.waker = None;
        std::mem::take(&mut s.promoted) | s.led
    }

    /// Stores the waker of a task about to wait as the leader.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(super) fn set_waker(&self, waker: &Waker) {
        match &mut self.state().waker {
            Some(w) => w.clone_from(waker),
            w => *w = Some(waker.clone()),
        }
    }

    pub(super) fn set_led(&self, led: bool) {
        self.state().led = led;
    }

    pub(super) fn is_done(&self) -> bool {
        self.state().done
    }
}

/// A panic while holding a lock leaves data this crate keeps consistent
/// between statements; carrying on is better than poisoning every handle.
pub(crate) fn lock_ignoring_poison<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Weak;

    use super::*;

    /// Stands for the engine: its garbage checks, when dropped, whether
    /// the lock is still held.
    struct State {
        me: Weak<Mutex<State>>,
        freed_unlocked: Arc<AtomicUsize>,
        freed_locked: Arc<AtomicUsize>,
        wakes: Wakes,
    }

    struct Garbage {
        lock: Weak<Mutex<State>>,
        freed_unlocked: Arc<AtomicUsize>,
        freed_locked: Arc<AtomicUsize>,
    }

    impl Drop for Garbage {
        fn drop(&mut self) {
            // NOTE(unwrap): the test keeps the mutex alive.
            let lock = self.lock.upgrade().expect("mutex alive");
            let count = match lock.try_lock() {
                Ok(_) => &self.freed_unlocked,
                Err(_) => &self.freed_locked,
            };
            count.fetch_add(1, Ordering::Relaxed);
        }
    }

    impl HasWakes for State {
        type Garbage = Garbage;
        fn wakes(&mut self) -> &mut Wakes {
            &mut self.wakes
        }
        fn has_garbage(&self) -> bool {
            true
        }
        fn garbage(&mut self) -> Garbage {
            Garbage {
                lock: self.me.clone(),
                freed_unlocked: self.freed_unlocked.clone(),
                freed_locked: self.freed_locked.clone(),
            }
        }
    }

    #[test]
    fn what_was_released_under_the_lock_is_freed_after_it() {
        let (unlocked, locked) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let mutex = Arc::new_cyclic(|me| {
            Mutex::new(State {
                me: me.clone(),
                freed_unlocked: unlocked.clone(),
                freed_locked: locked.clone(),
                wakes: Wakes::default(),
            })
        });
        for _ in 0..3 {
            let g = Locked::new(lock_ignoring_poison(&mutex));
            drop(g);
        }
        assert_eq!(unlocked.load(Ordering::Relaxed), 3, "freed after unlocking");
        assert_eq!(locked.load(Ordering::Relaxed), 0, "freed under the lock");
    }
}
