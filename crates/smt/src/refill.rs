//! Refilling a 0-RTT server's [`KeyPool`] in the CPU's idle time.
//!
//! A forward-secret 0-RTT accept takes one ephemeral key from the pool; an
//! empty pool makes the accept generate it inline (~30 µs on the first
//! flight's path). The pool must be refilled off that path, and on a
//! server whose CPUs are busy the refill must not take CPU from the
//! handshakes either: so the refill thread runs under Linux's `SCHED_IDLE`
//! policy, which the scheduler runs only when no other thread of the
//! machine wants the CPU and preempts as soon as one does. A server that
//! is never idle keeps generating inline (counted in
//! [`PoolStats::generated_inline`](smt_handshake::PoolStats)), as it would
//! without this thread, never worse.
//!
//! With `wait.rs`, the only places in this crate that call libc.
#![allow(unsafe_code)]

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use smt_handshake::KeyPool;

/// How often the refill thread looks at the pool unasked. It is unparked
/// when a take leaves the pool half empty ([`KeyPool::unpark_when_low`]),
/// so this is only a safety net (a pool another refiller registered
/// with); it polled every 5 ms before, 200 wake-ups a second on an idle
/// server.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// A thread that keeps a [`KeyPool`] full in idle CPU time; stopped (and
/// joined) when dropped. See [`KeyPoolRefill::spawn`].
#[derive(Debug)]
pub struct KeyPoolRefill {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl KeyPoolRefill {
    /// Starts a thread named `smt-key-refill` that tops `pool` up to its
    /// size whenever a take leaves it half empty (and once a second), at
    /// the idle scheduling priority (`SCHED_IDLE`; if the system refuses
    /// it, at the lowest nice value instead). Errors only if the thread
    /// cannot be created.
    pub fn spawn(pool: Arc<KeyPool>) -> io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("smt-key-refill".into())
            .spawn(move || {
                lower_own_priority();
                pool.unpark_when_low(std::thread::current());
                while !flag.load(Ordering::Relaxed) {
                    pool.refill();
                    std::thread::park_timeout(LOOK_EVERY);
                }
            })?;
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for KeyPoolRefill {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            // A refill in progress finishes its batch (at most 32 keys).
            let _ = thread.join();
        }
    }
}

/// Puts the calling thread under `SCHED_IDLE`, or at nice 19 if that is
/// refused (it needs no privilege on Linux, but a seccomp policy may).
fn lower_own_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid `sched_param` that outlives the call;
    // pid 0 names the calling thread; the call reads `param` only.
    let idle = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if idle != 0 {
        // SAFETY: plain integer arguments; `who` 0 is the calling thread.
        let _ = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 19) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refills_a_drained_pool_and_stops_when_dropped() {
        let pool = Arc::new(KeyPool::new(4));
        for _ in 0..4 {
            let _ = pool.take();
        }
        assert_eq!(pool.stats().available, 0);
        let refill = KeyPoolRefill::spawn(Arc::clone(&pool)).expect("thread");
        // No timing bound: wait (yielding) until the idle thread has run.
        while pool.stats().available < 4 {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(refill);
        assert_eq!(Arc::strong_count(&pool), 1, "the thread is gone");
        assert!(pool.stats().pregenerated >= 8);
    }

    #[test]
    fn the_refill_thread_runs_at_idle_priority() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            lower_own_priority();
            // SAFETY: no arguments; returns the calling thread's policy.
            let policy = unsafe { libc::sched_getscheduler(0) };
            tx.send(policy).expect("receiver");
        });
        let policy = rx.recv().expect("policy");
        assert_eq!(policy, libc::SCHED_IDLE);
    }
}
