//! The engine in real mode: one worker thread per transmit queue, each
//! reading its own bounded ring in order, all sharing the context table.
//! Nothing orders the workers against each other, as nothing orders a
//! NIC's queues; the operating system's scheduler picks the interleaving.
//!
//! The workers stand in for the NIC's crypto engines, so the CPU time they
//! use is the NIC's, not the application's.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use crate::counters::TxCounters;
use crate::descriptor::{QueueId, TxDescriptor, WireSegment};
use crate::engine::{EngineConfig, PostError};
use crate::nic::process;
use crate::table::ContextTable;

/// Where workers hand encrypted segments: the wire. Called from every
/// worker thread, so it must be cheap and thread-safe.
pub type WireSink = Arc<dyn Fn(WireSegment) + Send + Sync>;

/// One worker's own way to the wire: it gets every segment its queue
/// encrypted, and is told when the queue has nothing more for now, so it
/// can put what it gathered on the wire at once (one system call for many
/// packets, as a NIC sends a burst). Owned by its worker: no lock.
pub trait WireOutput: Send {
    /// An encrypted segment.
    fn segment(&mut self, segment: WireSegment);
    /// The queue is empty for now: send what was gathered.
    fn flush(&mut self) {}
}

/// A [`WireSink`] shared by every worker.
struct SharedSink(WireSink);

impl WireOutput for SharedSink {
    fn segment(&mut self, segment: WireSegment) {
        (self.0)(segment);
    }
}

/// State the workers share.
struct Shared {
    table: ContextTable,
    /// One per queue, written only by that queue's worker (as mlx5 keeps
    /// per-SQ stats), so the locks are uncontended.
    counters: Vec<Mutex<TxCounters>>,
    /// Descriptors each queue's worker has finished (its completion
    /// queue, reduced to a count).
    completed: Vec<AtomicU64>,
}

/// The offload engine with a thread per queue.
pub struct ThreadedEngine {
    rings: Vec<SyncSender<Vec<TxDescriptor>>>,
    posted: Vec<AtomicU64>,
    workers: Vec<JoinHandle<()>>,
    shared: Arc<Shared>,
}

impl ThreadedEngine {
    /// Starts one worker per queue, each with a ring of `ring_len` posts
    /// (a post is one descriptor or one batch). Fails only if the system
    /// refuses a thread.
    pub fn start(config: EngineConfig, ring_len: usize, sink: WireSink) -> io::Result<Self> {
        let outputs = (0..config.queues)
            .map(|_| Box::new(SharedSink(sink.clone())) as Box<dyn WireOutput>)
            .collect();
        Self::start_with_outputs(config, ring_len, outputs)
    }

    /// [`ThreadedEngine::start`] with an output of its own per worker
    /// (queue `i` gets `outputs[i]`; missing ones drop what they get).
    pub fn start_with_outputs(
        config: EngineConfig,
        ring_len: usize,
        outputs: Vec<Box<dyn WireOutput>>,
    ) -> io::Result<Self> {
        let queues = usize::from(config.queues);
        let shared = Arc::new(Shared {
            table: ContextTable::new(config.context_capacity),
            counters: (0..queues).map(|_| Mutex::default()).collect(),
            completed: (0..queues).map(|_| AtomicU64::new(0)).collect(),
        });
        let mut engine = Self {
            rings: Vec::with_capacity(queues),
            posted: (0..queues).map(|_| AtomicU64::new(0)).collect(),
            workers: Vec::with_capacity(queues),
            shared,
        };
        let mut outputs = outputs.into_iter();
        for q in 0..config.queues {
            let (ring, descriptors) = sync_channel(ring_len);
            let output = outputs.next().unwrap_or_else(|| Box::new(Discard));
            let worker = spawn_worker(QueueId(q), descriptors, engine.shared.clone(), output)?;
            engine.rings.push(ring);
            engine.workers.push(worker);
        }
        Ok(engine)
    }

    /// Appends `desc` to `queue`'s ring, waiting while the ring is full
    /// (as a driver waits for room in a send queue).
    pub fn post(&self, queue: QueueId, desc: TxDescriptor) -> Result<(), PostError> {
        self.post_batch(queue, vec![desc])
    }

    /// Appends several descriptors to `queue`'s ring in one hand-over, as
    /// a driver writes several WQEs and rings the doorbell once. The worker
    /// still reads them one by one.
    pub fn post_batch(&self, queue: QueueId, batch: Vec<TxDescriptor>) -> Result<(), PostError> {
        let queues = self.rings.len();
        let ring = self
            .rings
            .get(queue.index())
            .ok_or(PostError::NoSuchQueue { queue, queues })?;
        let n = batch.len() as u64;
        ring.send(batch).map_err(|_| PostError::Stopped(queue))?;
        self.posted[queue.index()].fetch_add(n, Ordering::Relaxed);
        Ok(())
    }

    /// Waits until every descriptor posted so far has been processed, as a
    /// driver polls completions before relying on a context's creation in
    /// another queue. Yields the CPU while waiting.
    pub fn wait_idle(&self) {
        for (posted, done) in self.posted.iter().zip(&self.shared.completed) {
            while done.load(Ordering::Acquire) < posted.load(Ordering::Relaxed) {
                std::thread::yield_now();
            }
        }
    }

    /// Counters of all queues summed, as of now.
    pub fn counters(&self) -> TxCounters {
        let mut sum = TxCounters::default();
        for queue in &self.shared.counters {
            sum.add(&queue.lock().unwrap_or_else(PoisonError::into_inner));
        }
        sum
    }

    /// Most flow contexts installed at once so far.
    pub fn contexts_peak(&self) -> usize {
        self.shared.table.peak()
    }

    /// Closes the rings, waits until every worker has read its ring to the
    /// end, and returns the final counters.
    pub fn finish(mut self) -> TxCounters {
        self.stop();
        self.counters()
    }

    fn stop(&mut self) {
        self.rings.clear();
        for worker in self.workers.drain(..) {
            // A worker cannot panic on descriptors (they are counted and
            // dropped); if the sink panicked, its counters stay as they were.
            let _ = worker.join();
        }
    }
}

impl Drop for ThreadedEngine {
    fn drop(&mut self) {
        self.stop();
    }
}

impl std::fmt::Debug for ThreadedEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadedEngine")
            .field("queues", &self.rings.len())
            .field("capacity", &self.shared.table.capacity())
            .finish_non_exhaustive()
    }
}

/// An output for a queue nobody gave one.
struct Discard;

impl WireOutput for Discard {
    fn segment(&mut self, _segment: WireSegment) {}
}

fn spawn_worker(
    queue: QueueId,
    descriptors: Receiver<Vec<TxDescriptor>>,
    shared: Arc<Shared>,
    mut output: Box<dyn WireOutput>,
) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("nic-sq{}", queue.0))
        .spawn(move || drain_ring(queue, &descriptors, &shared, &mut *output))
}

/// A worker's life: read the ring in order until it is closed; whenever it
/// runs empty, flush the output.
fn drain_ring(
    queue: QueueId,
    descriptors: &Receiver<Vec<TxDescriptor>>,
    shared: &Shared,
    output: &mut dyn WireOutput,
) {
    while let Ok(mut batch) = descriptors.recv() {
        loop {
            process_batch(queue, batch, shared, output);
            match descriptors.try_recv() {
                Ok(more) => batch = more,
                Err(_) => break,
            }
        }
        output.flush();
    }
}

/// Applies one hand-over's descriptors in order and counts them.
fn process_batch(
    queue: QueueId,
    batch: Vec<TxDescriptor>,
    shared: &Shared,
    output: &mut dyn WireOutput,
) {
    let n = batch.len() as u64;
    let mut delta = TxCounters::default();
    for desc in batch {
        if let Ok(Some(segment)) = process(&shared.table, queue, desc, &mut delta) {
            output.segment(segment);
        }
    }
    shared.counters[queue.index()]
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .add(&delta);
    shared.completed[queue.index()].fetch_add(n, Ordering::Release);
}
