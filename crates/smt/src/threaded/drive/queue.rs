//! The queue of requests for the application, with counts of what went
//! in and out: asking it whether it is empty is two atomic loads instead
//! of a turn of the channel's lock (~65 instructions; an answer and the
//! check after a resignation asked two or three times per request).

use std::sync::atomic::{AtomicU64, Ordering};

use super::Delivered;

/// The receiving end of the request queue. Only `route` queues, under
/// the engine lock, and counts each request after it is in; every take
/// goes through here and counts after it is out. Under the engine lock
/// the queued count is exact; a take being counted may make the queue
/// look non-empty a moment longer (a look that then finds nothing).
pub(crate) struct Requests {
    rx: flume::Receiver<Delivered>,
    queued: AtomicU64,
    taken: AtomicU64,
}

impl Requests {
    pub(super) fn new(rx: flume::Receiver<Delivered>) -> Self {
        Self {
            rx,
            queued: AtomicU64::new(0),
            taken: AtomicU64::new(0),
        }
    }

    /// Counts a request `route` has just queued.
    pub(super) fn count_queued(&self) {
        self.queued.fetch_add(1, Ordering::Release);
    }

    /// Requests queued so far: an accepter that found the queue empty
    /// looks again only once it moved.
    pub(super) fn queued(&self) -> u64 {
        self.queued.load(Ordering::Acquire)
    }

    pub(crate) fn try_recv(&self) -> Result<Delivered, flume::TryRecvError> {
        let got = self.rx.try_recv();
        if got.is_ok() {
            self.taken.fetch_add(1, Ordering::Release);
        }
        got
    }

    pub(crate) async fn recv_async(&self) -> Result<Delivered, flume::RecvError> {
        let got = self.rx.recv_async().await;
        if got.is_ok() {
            self.taken.fetch_add(1, Ordering::Release);
        }
        got
    }

    /// Requests waiting (taken first: a take is counted after the
    /// request it counts was queued and counted).
    pub(crate) fn len(&self) -> usize {
        let taken = self.taken.load(Ordering::Acquire);
        let queued = self.queued.load(Ordering::Acquire);
        usize::try_from(queued.saturating_sub(taken)).unwrap_or(usize::MAX)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
