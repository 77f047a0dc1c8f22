//! Part B: what offload leaves the application's thread. The same
//! messages are
//!
//! - sealed in software on the application thread (smt-crypto, SMT's
//!   record sealing): [`Mode::Software`];
//! - turned into descriptors and dropped, the application thread's share
//!   with a NIC whose doorbell costs nothing: [`Mode::Descriptors`];
//! - handed to the threaded engine whose worker threads stand in for the
//!   NIC, [`DOORBELL`] descriptors per queue at a time: [`Mode::Engine`].
//!   The hand-over is a channel between threads (a futex wake when a
//!   worker sleeps), far dearer than writing WQEs and ringing a doorbell.
//!
//! All three build the plaintext records the same way, into buffers from
//! a [`Pool`] that sent segments return to (as a driver's completions
//! recycle pages), so the allocator's cross-thread costs stay out of the
//! comparison.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use smt_crypto::{record_nonce, AeadAlgorithm, AesGcmCipher, TrafficKey};
use smt_offload::stream::{smt_segments_with, smt_seq, PlainSegment};
use smt_offload::{
    ContextPlanner, CryptoInfo, EngineConfig, FlowKey, QueueId, Segment, SplitMix64,
    ThreadedEngine, TxCounters, TxDescriptor, WireSink, HEADER_LEN,
};

use crate::cpu;

/// Posts each queue's ring holds.
const RING: usize = 4;

/// Descriptors the application collects per queue before handing them
/// over (ringing the doorbell once, like Linux's `xmit_more`).
const DOORBELL: usize = 16;

/// Who seals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Software,
    Descriptors,
    Engine,
}

/// One timed configuration.
#[derive(Clone, Copy, Debug)]
pub struct Point {
    pub mode: Mode,
    pub queues: u16,
    pub peers: u32,
    pub capacity: usize,
    pub size: usize,
}

/// What one timed run measured.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub point: Point,
    pub messages: u64,
    pub bytes: u64,
    pub wall_ns: u64,
    /// CPU time of the application thread.
    pub app_ns: u64,
    /// CPU time of the whole process minus the application thread: the
    /// engine's workers (coarse: 10 ms ticks).
    pub nic_ns: u64,
    pub resyncs: u64,
    pub evictions: u64,
}

impl Timing {
    pub fn gbit_per_s(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.wall_ns as f64
    }

    pub fn app_ns_per_message(&self) -> f64 {
        self.app_ns as f64 / self.messages as f64
    }
}

/// Segment buffers, recycled: taken by the application thread, given
/// back (possibly from another thread) once sent.
struct Pool {
    free: Vec<Vec<u8>>,
    returned: Receiver<Vec<u8>>,
    give_back: Sender<Vec<u8>>,
}

impl Pool {
    fn new() -> Self {
        let (give_back, returned) = channel();
        Self {
            free: Vec::new(),
            returned,
            give_back,
        }
    }

    fn take(&mut self, len: usize) -> Vec<u8> {
        if self.free.is_empty() {
            self.free.extend(self.returned.try_iter());
        }
        self.free.pop().unwrap_or_else(|| Vec::with_capacity(len))
    }

    fn segments(&mut self, data: &[u8]) -> Vec<PlainSegment> {
        smt_segments_with(data, 16384, |len| self.take(len))
    }
}

/// Everything a run needs besides its mode.
struct Workload<'a> {
    keys: &'a [CryptoInfo],
    data: Vec<u8>,
    /// (peer, queue) of each message.
    plan: Vec<(u32, u16)>,
    next_id: Vec<u64>,
}

impl<'a> Workload<'a> {
    fn new(point: Point, messages: usize, keys: &'a [CryptoInfo], seed: u64) -> Self {
        let mut rng = SplitMix64::new(seed);
        let queues = u64::from(point.queues.max(1));
        let plan = (0..messages)
            .map(|_| {
                let peer = rng.below(u64::from(point.peers)) as u32;
                (peer, rng.below(queues) as u16)
            })
            .collect();
        let mut data = vec![0; point.size];
        SplitMix64::new(point.size as u64).fill(&mut data);
        Self {
            keys,
            data,
            plan,
            next_id: vec![1; keys.len()],
        }
    }

    /// The next message ID for `peer` (IDs are unique per session).
    fn id(&mut self, peer: u32) -> u64 {
        let id = self.next_id[peer as usize];
        self.next_id[peer as usize] += 1;
        id
    }

    fn flow(&self, peer: u32, queue: u16) -> FlowKey {
        FlowKey {
            queue: QueueId(queue),
            peer,
            epoch: 0,
        }
    }
}

/// Seals every message in software on this thread.
pub fn software(point: Point, messages: usize, keys: &[CryptoInfo], seed: u64) -> Timing {
    let mut w = Workload::new(point, messages, keys, seed);
    let ciphers: Vec<AesGcmCipher> = keys.iter().map(software_cipher).collect();
    let mut pool = Pool::new();
    let mut bytes = 0;
    let clock = Clock::start();
    for i in 0..messages {
        let (peer, _) = w.plan[i];
        let id = w.id(peer);
        for segment in pool.segments(&w.data) {
            let sealed = seal_segment(&ciphers[peer as usize], &keys[peer as usize], id, segment);
            bytes += sealed.len() as u64;
            pool.free.push(sealed);
        }
    }
    clock.finish(point, messages, bytes, &TxCounters::default(), 0)
}

/// Builds every message's descriptors and drops them: the application
/// thread's work with a free doorbell.
pub fn descriptors(point: Point, messages: usize, keys: &[CryptoInfo], seed: u64) -> Timing {
    let mut w = Workload::new(point, messages, keys, seed);
    let mut planner = ContextPlanner::new(point.queues, point.capacity);
    let mut pool = Pool::new();
    let mut bytes = 0;
    let clock = Clock::start();
    for i in 0..messages {
        let (peer, queue) = w.plan[i];
        let id = w.id(peer);
        let flow = w.flow(peer, queue);
        let descs = message_descriptors(&mut planner, &mut pool, flow, &w, id);
        for desc in descs {
            if let TxDescriptor::Segment(s) = desc {
                bytes += s.payload.len() as u64;
                pool.free.push(std::hint::black_box(s.payload));
            }
        }
    }
    let stats = planner.stats();
    let mut counters = TxCounters::default();
    counters.tx_tls_ooo = stats.resyncs;
    clock.finish(point, messages, bytes, &counters, stats.evictions)
}

/// Posts every message to the threaded engine and waits for it to finish.
pub fn offload(point: Point, messages: usize, keys: &[CryptoInfo], seed: u64) -> Timing {
    let mut w = Workload::new(point, messages, keys, seed);
    let mut pool = Pool::new();
    let wire_bytes = Arc::new(AtomicU64::new(0));
    let sink = recycling_sink(wire_bytes.clone(), pool.give_back.clone());
    let config = EngineConfig {
        queues: point.queues,
        context_capacity: point.capacity,
    };
    // NOTE(unwrap): a benchmark that cannot start threads has nothing to
    // measure.
    let engine = ThreadedEngine::start(config, RING, sink).expect("worker threads");
    let mut planner = ContextPlanner::new(point.queues, point.capacity);
    let mut pending: Vec<Vec<TxDescriptor>> = (0..point.queues).map(|_| Vec::new()).collect();
    let clock = Clock::start();
    for i in 0..messages {
        let (peer, queue) = w.plan[i];
        let id = w.id(peer);
        let flow = w.flow(peer, queue);
        let descs = message_descriptors(&mut planner, &mut pool, flow, &w, id);
        let waiting = &mut pending[usize::from(queue)];
        waiting.extend(descs);
        if waiting.len() >= DOORBELL {
            ring(&engine, queue, waiting);
        }
    }
    for (queue, waiting) in pending.iter_mut().enumerate() {
        ring(&engine, queue as u16, waiting);
    }
    let counters = engine.finish();
    let bytes = wire_bytes.load(Ordering::Relaxed);
    clock.finish(point, messages, bytes, &counters, planner.stats().evictions)
}

/// Counts the bytes that left and sends the buffers back to the pool.
fn recycling_sink(bytes: Arc<AtomicU64>, give_back: Sender<Vec<u8>>) -> WireSink {
    let give_back = Mutex::new(give_back);
    Arc::new(move |segment| {
        bytes.fetch_add(segment.payload.len() as u64, Ordering::Relaxed);
        if let Ok(tx) = give_back.lock() {
            let _ = tx.send(segment.payload);
        }
    })
}

/// Hands `queue` the descriptors waiting for it in one post.
fn ring(engine: &ThreadedEngine, queue: u16, waiting: &mut Vec<TxDescriptor>) {
    if waiting.is_empty() {
        return;
    }
    let batch = std::mem::take(waiting);
    // NOTE(unwrap): workers stop only when the engine is finished.
    engine
        .post_batch(QueueId(queue), batch)
        .expect("engine running");
}

/// What precedes and makes up one message in its queue.
fn message_descriptors(
    planner: &mut ContextPlanner,
    pool: &mut Pool,
    flow: FlowKey,
    w: &Workload<'_>,
    id: u64,
) -> Vec<TxDescriptor> {
    let mut out = Vec::with_capacity(4);
    let key = &w.keys[flow.peer as usize];
    let ctx = planner.prepare(flow, key, smt_seq(id, 0), &mut out);
    for segment in pool.segments(&w.data) {
        out.push(TxDescriptor::Segment(Segment {
            ctx,
            header: Vec::new(),
            payload: segment.payload,
            mss: 1428,
        }));
    }
    out
}

/// Seals a segment's records as SMT's software path does; returns the
/// sealed buffer.
fn seal_segment(
    cipher: &AesGcmCipher,
    key: &CryptoInfo,
    id: u64,
    segment: PlainSegment,
) -> Vec<u8> {
    let mut payload = segment.payload;
    let mut at = 0;
    let mut index = segment.first_record;
    while at < payload.len() {
        let len = usize::from(u16::from_be_bytes([payload[at + 3], payload[at + 4]]));
        let (header, body) = payload[at..].split_at_mut(HEADER_LEN);
        let nonce = record_nonce(key.iv(), smt_seq(id, index));
        // NOTE(unwrap): the body holds at least a tag (plaintext_record).
        cipher
            .seal_raw(&nonce, header, &mut body[..len])
            .expect("seal");
        at += HEADER_LEN + len;
        index += 1;
    }
    std::hint::black_box(payload)
}

fn software_cipher(key: &CryptoInfo) -> AesGcmCipher {
    // NOTE(unwrap): the same 16-byte AES-128 key CryptoInfo accepted.
    let key = TrafficKey::new(AeadAlgorithm::Aes128Gcm, key.key(), *key.iv()).unwrap();
    AesGcmCipher::new(&key)
}

/// Wall clock, this thread's CPU and the process's CPU at the start.
struct Clock {
    start: Instant,
    app: u64,
    all: u64,
}

impl Clock {
    fn start() -> Self {
        Self {
            start: Instant::now(),
            app: cpu::thread_ns().unwrap_or(0),
            all: cpu::process_ns().unwrap_or(0),
        }
    }

    fn finish(
        self,
        point: Point,
        messages: usize,
        bytes: u64,
        counters: &TxCounters,
        evictions: u64,
    ) -> Timing {
        let wall_ns = self.start.elapsed().as_nanos() as u64;
        let app_ns = cpu::thread_ns().unwrap_or(0).saturating_sub(self.app);
        let all_ns = cpu::process_ns().unwrap_or(0).saturating_sub(self.all);
        Timing {
            point,
            messages: messages as u64,
            bytes,
            wall_ns,
            app_ns,
            nic_ns: all_ns.saturating_sub(app_ns),
            resyncs: counters.tx_tls_ooo,
            evictions,
        }
    }
}

/// The timing table, Markdown; the software row is the baseline per size.
pub fn table(rows: &[Timing]) -> String {
    let mut s = String::from(
        "| message | sealing | queues | peers | table | app-thread CPU / msg | vs software | \
         engine threads' CPU | wall throughput | resyncs / msg | evictions / msg |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        s += &row(r, rows);
    }
    s
}

fn row(r: &Timing, rows: &[Timing]) -> String {
    let base = rows
        .iter()
        .find(|b| b.point.mode == Mode::Software && b.point.size == r.point.size);
    let ratio = base.map_or(f64::NAN, |b| {
        r.app_ns_per_message() / b.app_ns_per_message()
    });
    let p = r.point;
    let dash = || "-".to_string();
    let (how, queues, table, nic, wire) = match p.mode {
        Mode::Software => ("software", dash(), dash(), dash(), gbit(r)),
        Mode::Descriptors => (
            "descriptors only",
            p.queues.to_string(),
            p.capacity.to_string(),
            dash(),
            dash(),
        ),
        Mode::Engine => (
            "engine threads",
            p.queues.to_string(),
            p.capacity.to_string(),
            format!("{:.2} s", r.nic_ns as f64 / 1e9),
            gbit(r),
        ),
    };
    format!(
        "| {} B | {how} | {queues} | {} | {table} | {:.0} ns | {:.0} % | {nic} | {wire} | {:.3} | {:.3} |\n",
        p.size,
        p.peers,
        r.app_ns_per_message(),
        ratio * 100.0,
        r.resyncs as f64 / r.messages as f64,
        r.evictions as f64 / r.messages as f64,
    )
}

fn gbit(r: &Timing) -> String {
    format!("{:.2} Gbit/s", r.gbit_per_s())
}
