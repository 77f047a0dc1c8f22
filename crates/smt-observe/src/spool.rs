//! A file written on its own thread, fed through a queue bounded in bytes:
//! the data path hands over what it saw and goes on at once; when the
//! writer falls behind by more than the bound, what would not fit is
//! counted as dropped instead of waiting.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// Turns queued items into the file's bytes, on the writer thread.
pub(crate) trait Sink: Send + 'static {
    type Item: Send + 'static;
    /// Writes one item.
    fn write(&mut self, item: Self::Item) -> io::Result<()>;
    /// Writes the end (with how many items' worth were dropped) and
    /// flushes.
    fn finish(&mut self, dropped: u64) -> io::Result<()>;
}

/// What was written and what was not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Units (datagrams, events) handed to the writer.
    pub(crate) written: u64,
    /// Units dropped: the queue was full, the writer had failed, or the
    /// file was finished.
    pub(crate) dropped: u64,
}

enum Msg<T> {
    Item { item: T, bytes: usize, units: u64 },
    Finish,
}

#[derive(Default)]
struct Counters {
    queued_bytes: AtomicUsize,
    written: AtomicU64,
    dropped: AtomicU64,
}

/// The data path's end of the queue, and the writer thread.
pub(crate) struct Spool<T: Send + 'static> {
    tx: flume::Sender<Msg<T>>,
    limit: usize,
    counters: Arc<Counters>,
    finished: AtomicBool,
    worker: Mutex<Option<JoinHandle<io::Result<()>>>>,
    /// The writer's outcome, once finished (an error is reported once).
    outcome: Mutex<Option<Result<(), String>>>,
}

impl<T: Send + 'static> Spool<T> {
    /// Starts the writer thread `name` over `sink`, holding at most
    /// `limit` bytes of items not yet written.
    pub(crate) fn start<S: Sink<Item = T>>(name: &str, sink: S, limit: usize) -> io::Result<Self> {
        let (tx, rx) = flume::unbounded();
        let counters = Arc::new(Counters::default());
        let theirs = counters.clone();
        let worker = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || drain(sink, &rx, &theirs))?;
        Ok(Self {
            tx,
            limit,
            counters,
            finished: AtomicBool::new(false),
            worker: Mutex::new(Some(worker)),
            outcome: Mutex::new(None),
        })
    }

    /// Queues `item` (`bytes` it holds, `units` it counts for), unless the
    /// queue is over its bound or the file finished: then it is dropped
    /// and counted. Never waits.
    pub(crate) fn offer(&self, item: T, bytes: usize, units: u64) {
        let c = &self.counters;
        let queued = c.queued_bytes.load(Ordering::Relaxed);
        if self.finished.load(Ordering::Relaxed) || queued + bytes > self.limit {
            c.dropped.fetch_add(units, Ordering::Relaxed);
            return;
        }
        c.queued_bytes.fetch_add(bytes, Ordering::Relaxed);
        let msg = Msg::Item { item, bytes, units };
        if self.tx.send(msg).is_err() {
            c.dropped.fetch_add(units, Ordering::Relaxed);
        }
    }

    /// What was written and dropped so far.
    pub(crate) fn tally(&self) -> Tally {
        Tally {
            written: self.counters.written.load(Ordering::Relaxed),
            dropped: self.counters.dropped.load(Ordering::Relaxed),
        }
    }

    /// Writes everything queued, then the end, and closes the file; items
    /// offered later are dropped. Returns the writer's first error, if it
    /// had one (then, again on later calls).
    pub(crate) fn finish(&self) -> io::Result<Tally> {
        self.finished.store(true, Ordering::Relaxed);
        if let Some(worker) = lock(&self.worker).take() {
            let _ = self.tx.send(Msg::Finish);
            let result = match worker.join() {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(_) => Err("the writer thread panicked".into()),
            };
            *lock(&self.outcome) = Some(result);
        }
        match lock(&self.outcome).clone() {
            Some(Err(e)) => Err(io::Error::other(e)),
            _ => Ok(self.tally()),
        }
    }
}

impl<T: Send + 'static> Drop for Spool<T> {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

impl<T: Send + 'static> std::fmt::Debug for Spool<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spool")
            .field("limit", &self.limit)
            .field("tally", &self.tally())
            .finish_non_exhaustive()
    }
}

/// The writer thread: items until `Finish` (or every sender gone), then
/// the end. After a write error nothing more is written: the rest counts
/// as dropped, and the error is the thread's result.
fn drain<S: Sink>(mut sink: S, rx: &flume::Receiver<Msg<S::Item>>, c: &Counters) -> io::Result<()> {
    let mut failed: Option<io::Error> = None;
    while let Ok(Msg::Item { item, bytes, units }) = rx.recv() {
        let ok = failed.is_none() && {
            let r = sink.write(item);
            r.map_err(|e| failed = Some(e)).is_ok()
        };
        let counter = if ok { &c.written } else { &c.dropped };
        counter.fetch_add(units, Ordering::Relaxed);
        c.queued_bytes.fetch_sub(bytes, Ordering::Relaxed);
    }
    // Offers racing with the end found the channel open: count them.
    for msg in rx.drain() {
        if let Msg::Item { units, .. } = msg {
            c.dropped.fetch_add(units, Ordering::Relaxed);
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    sink.finish(c.dropped.load(Ordering::Relaxed))
}

/// A poisoned lock only means another thread panicked holding it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records items; blocks its first write until released.
    struct Slow {
        gate: flume::Receiver<()>,
        out: Arc<Mutex<Vec<u32>>>,
        end: Arc<Mutex<Option<u64>>>,
    }

    impl Sink for Slow {
        type Item = u32;
        fn write(&mut self, item: u32) -> io::Result<()> {
            let _ = self.gate.recv();
            if item == 99 {
                return Err(io::Error::other("disk full"));
            }
            lock(&self.out).push(item);
            Ok(())
        }
        fn finish(&mut self, dropped: u64) -> io::Result<()> {
            *lock(&self.end) = Some(dropped);
            Ok(())
        }
    }

    /// A spool over [`Slow`], the gate that lets its writes through, and
    /// what it wrote.
    struct Rig {
        spool: Spool<u32>,
        gate: flume::Sender<()>,
        out: Arc<Mutex<Vec<u32>>>,
        end: Arc<Mutex<Option<u64>>>,
    }

    fn slow() -> Rig {
        let (gate, rx) = flume::unbounded();
        let (out, end) = (Arc::default(), Arc::default());
        let sink = Slow {
            gate: rx,
            out: Arc::clone(&out),
            end: Arc::clone(&end),
        };
        let spool = Spool::start("test", sink, 100).unwrap();
        Rig {
            spool,
            gate,
            out,
            end,
        }
    }

    #[test]
    fn a_writer_behind_by_more_than_the_bound_drops_and_counts_instead_of_waiting() {
        let Rig {
            spool,
            gate,
            out,
            end,
        } = slow();
        for i in 0..10 {
            spool.offer(i, 40, 2); // 40 bytes each: at most 2 queued at once
        }
        for _ in 0..10 {
            gate.send(()).unwrap();
        }
        let tally = spool.finish().unwrap();
        let written = lock(&out).clone();
        assert!(written.len() >= 2 && written.len() < 10, "{written:?}");
        assert_eq!(tally.written, 2 * written.len() as u64);
        assert_eq!(tally.written + tally.dropped, 20);
        assert_eq!(*lock(&end), Some(tally.dropped), "the end says so");
        spool.offer(1, 1, 1);
        assert_eq!(spool.finish().unwrap().dropped, tally.dropped + 1);
    }

    #[test]
    fn a_failed_write_stops_the_file_and_is_reported() {
        let Rig {
            spool,
            gate,
            out,
            end,
        } = slow();
        for i in [1, 99, 2] {
            spool.offer(i, 1, 1);
            gate.send(()).unwrap();
        }
        let err = spool.finish().unwrap_err();
        assert!(err.to_string().contains("disk full"), "{err}");
        assert_eq!(*lock(&out), [1]);
        assert_eq!(*lock(&end), None, "no end after a failure");
        assert_eq!(spool.tally().dropped, 2);
        assert!(spool.finish().is_err(), "again");
    }
}
