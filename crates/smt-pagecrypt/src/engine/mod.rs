//! A model of an RNIC's crypto engine (NVIDIA ConnectX-6 Dx as Yoon & Moon,
//! CoNEXT 2025, use it), standing in for the hardware the way `smt-offload` stands in
//! for a NIC's TLS offload.
//!
//! What Yoon & Moon's RNIC imposes, and how the model has it:
//!
//! | the RNIC (Yoon & Moon §3) | here |
//! |---|---|
//! | few crypto contexts (MKeys) fit in its SRAM | [`EngineConfig::contexts`] bounds them all; [`CryptoEngine::open_queue`] fails when they are handed out |
//! | a context must not serve two requests at once | each queue's [`ContextPool`](EngineQueue::pool_free) hands a context to one request until its completion is polled |
//! | context pooling: per-QP pools sized to outstanding requests, made at start-up | a queue's pool is made when it opens, [`EngineConfig::queue_depth`] contexts; a post with none free fails with [`PostError::PoolExhausted`] (counted) |
//! | dynamic key reconfiguration: a configuration WQE sets the tweak | [`Wqe::Configure`] sets a context's key and tweak ([`EngineCounters::reconfigurations`]) |
//! | configuration-data batching: config chained before data, one doorbell | [`EngineQueue::post_open`]/[`post_seal`](EngineQueue::post_seal) post `[Configure, data]` as one [`EngineQueue::post_chain`] (one doorbell) |
//! | unsignaled configuration completions | `Configure { signaled: false }`: no completion ([`EngineCounters::unsignaled`]); the data completion implies it |
//! | the engine is slower than AES-NI/VAES and sits across PCIe | [`EngineConfig::latency`] and [`EngineConfig::throughput`], settable |
//! | CRC-64 computed and checked by the engine, verdict reported to the host | the data completion carries the page's [`IntegrityError`] |
//!
//! The engine is a worker thread that does the real XTS and CRC (its CPU
//! time stands for the RNIC's, as `smt-offload`'s workers do for a NIC's),
//! then holds each completion back until the modelled time: a pipeline of
//! `throughput` bytes per second shared by every queue, plus `latency`.
//! A completion is visible to [`EngineQueue::poll`] at
//! `max(modelled, actually done) `, so the model is never faster than the
//! worker really was.
//!
//! What differs from the RNIC: the data is in host memory before the
//! engine sees it (the RNIC decrypts as the RDMA READ's payload arrives,
//! SMT's transport delivers it to the host first), and the engine's time
//! is modelled, not PCIe's.

mod counters;
mod pool;
mod worker;

use std::fmt;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use counters::EngineCounters;
use counters::SharedCounters;
use pool::ContextPool;
use worker::{Command, CompletionQueue, Doorbell};

use crate::crc::Crc64;
use crate::keys::{KeyId, KeyRing};
use crate::page::IntegrityError;
use crate::tweak::Tweak;
use crate::xts::XtsKey;
use crate::SEALED_LEN;

/// One of the engine's crypto contexts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContextId(pub u32);

/// The engine's size and speed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EngineConfig {
    /// Crypto contexts the engine holds in all (its SRAM).
    pub contexts: usize,
    /// Requests one queue may have outstanding, and so the contexts in its
    /// pool.
    pub queue_depth: usize,
    /// Time added to every data request after the pipeline is done with
    /// it (doorbell and completion over PCIe, the pipeline's depth).
    pub latency: Duration,
    /// Bytes per second through the crypto pipeline, shared by all queues
    /// (`None`: as fast as the worker thread computes).
    pub throughput: Option<f64>,
    /// The CRC the engine computes and checks.
    pub crc: Crc64,
    /// Put the page's version in the tweak's upper half (as
    /// [`PageCipher::versioned`](crate::PageCipher::versioned)); the
    /// configuration WQE carries the whole tweak either way.
    pub versioned: bool,
}

impl Default for EngineConfig {
    /// 1,024 contexts, 64 per queue, 1 µs and 4 GB/s: slower per page than
    /// OpenSSL on a CPU core here, as Yoon & Moon found the RNIC to be.
    fn default() -> Self {
        Self {
            contexts: 1024,
            queue_depth: 64,
            latency: Duration::from_micros(1),
            throughput: Some(4e9),
            crc: Crc64::Nvme,
            versioned: false,
        }
    }
}

/// A work-queue element.
#[derive(Debug)]
#[non_exhaustive]
pub enum Wqe {
    /// Sets a context's key and tweak (an RNIC's reconfiguration WQE).
    Configure {
        /// The context to set, held by the posting queue.
        context: ContextId,
        /// The key ring's key the context encrypts or decrypts under.
        key: KeyId,
        /// The tweak of the page the next data WQE on this context carries.
        tweak: Tweak,
        /// Whether it produces a completion of its own.
        signaled: bool,
    },
    /// Encrypts page ‖ CRC ‖ 0^8 under the context: the first 4096 bytes
    /// of `buf` are the page; the completion returns the sealed bytes.
    Seal {
        /// A configured context held by the posting queue.
        context: ContextId,
        /// The page in its first 4096 bytes; sealed in place.
        buf: Box<[u8; SEALED_LEN]>,
        /// The caller's tag, returned in the completion's `user`.
        user: u64,
    },
    /// Decrypts and checks: the completion returns the page in the first
    /// 4096 bytes, and the verdict.
    Open {
        /// A configured context held by the posting queue.
        context: ContextId,
        /// The sealed page; opened in place.
        buf: Box<[u8; SEALED_LEN]>,
        /// The caller's tag, returned in the completion's `user`.
        user: u64,
    },
}

impl Wqe {
    fn context(&self) -> ContextId {
        match self {
            Wqe::Configure { context, .. }
            | Wqe::Seal { context, .. }
            | Wqe::Open { context, .. } => *context,
        }
    }
}

/// What a completion reports.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Status {
    /// Done; for `Open`, the page checked out.
    Done,
    /// `Open`: the page failed its check.
    Integrity(IntegrityError),
    /// A data WQE on a context no configuration WQE has set: the host
    /// forgot to chain one.
    Unconfigured(ContextId),
}

/// A completion-queue entry.
#[derive(Debug)]
pub struct Completion {
    /// The `user` value of the data WQE (0 for a configuration).
    pub user: u64,
    /// The context the WQE ran on; it returns to the queue's pool when
    /// this completion is polled.
    pub context: ContextId,
    /// The WQE's outcome.
    pub status: Status,
    /// The data WQE's buffer, processed (`None` for a configuration).
    pub buf: Option<Box<[u8; SEALED_LEN]>>,
}

/// Why a post was refused (nothing reached the engine).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PostError {
    /// Every context of the queue's pool is in use: poll completions
    /// first (the pool is as deep as the queue).
    PoolExhausted {
        /// Contexts in the queue's pool ([`EngineConfig::queue_depth`]).
        depth: usize,
    },
    /// A WQE names a context that is not this queue's, or not held.
    NotHeld(ContextId),
    /// The engine has stopped.
    Stopped,
}

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PoolExhausted { depth } => write!(
                f,
                "all {depth} contexts of this queue are in use: poll completions before posting more"
            ),
            Self::NotHeld(c) => write!(
                f,
                "context {} is not held by this queue: take one with EngineQueue::take_context",
                c.0
            ),
            Self::Stopped => write!(f, "the crypto engine has stopped"),
        }
    }
}

impl std::error::Error for PostError {}

/// A post that was refused, with the buffer it carried.
#[derive(Debug)]
pub struct Refused {
    /// Why the post was refused.
    pub error: PostError,
    /// The data WQE's buffer, untouched, for the caller to post again.
    pub buf: Box<[u8; SEALED_LEN]>,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for Refused {}

/// Why a queue could not be opened.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EngineError {
    /// The engine's contexts are all in other queues' pools.
    OutOfContexts {
        /// Contexts a new queue's pool takes ([`EngineConfig::queue_depth`]).
        needed: usize,
        /// Contexts not yet in any queue's pool.
        left: usize,
    },
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OutOfContexts { needed, left } => write!(
                f,
                "a queue needs {needed} contexts for its pool but the engine has {left} left: \
                 raise EngineConfig::contexts or lower queue_depth"
            ),
        }
    }
}

impl std::error::Error for EngineError {}

/// The engine: one worker thread, any number of queues.
pub struct CryptoEngine {
    config: EngineConfig,
    commands: Mutex<Sender<Command>>,
    counters: Arc<SharedCounters>,
    /// Contexts not yet in a pool: the next one is `next_context`.
    next_context: Mutex<u32>,
    worker: Option<JoinHandle<()>>,
}

impl fmt::Debug for CryptoEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CryptoEngine")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl CryptoEngine {
    /// Starts the engine with the ring's keys loaded (the RNIC's crypto
    /// login and data-encryption keys). Fails only if no thread can start.
    pub fn start(config: EngineConfig, ring: &KeyRing) -> io::Result<Self> {
        let counters = Arc::new(SharedCounters::default());
        let (tx, worker) = worker::spawn(config, counters.clone())?;
        let engine = Self {
            config,
            commands: Mutex::new(tx),
            counters,
            next_context: Mutex::new(0),
            worker: Some(worker),
        };
        for id in ring.ids() {
            if let Some(key) = ring.key(id) {
                engine.load_key(id, key.clone());
            }
        }
        Ok(engine)
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Loads (or replaces) a key, for rotation. Ordered before every WQE
    /// posted after it returns.
    pub fn load_key(&self, id: KeyId, key: XtsKey) {
        self.send(Command::LoadKey(id, key));
    }

    /// Forgets a key: data WQEs configured with it fail with
    /// `IntegrityError::UnknownKey`.
    pub fn unload_key(&self, id: KeyId) {
        self.send(Command::UnloadKey(id));
    }

    /// Opens a queue with a pool of [`EngineConfig::queue_depth`]
    /// contexts taken from the engine's.
    pub fn open_queue(self: &Arc<Self>) -> Result<EngineQueue, EngineError> {
        let depth = self.config.queue_depth;
        let mut next = self
            .next_context
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let left = self.config.contexts.saturating_sub(*next as usize);
        if depth > left {
            return Err(EngineError::OutOfContexts {
                needed: depth,
                left,
            });
        }
        let first = *next;
        *next += depth as u32;
        Ok(EngineQueue {
            engine: self.clone(),
            pool: ContextPool::new(first, depth),
            cq: Arc::new(CompletionQueue::default()),
            signal_config: false,
        })
    }

    /// The counters as of now.
    pub fn counters(&self) -> EngineCounters {
        self.counters.snapshot()
    }

    fn send(&self, command: Command) -> bool {
        self.commands
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .send(command)
            .is_ok()
    }
}

impl Drop for CryptoEngine {
    fn drop(&mut self) {
        self.send(Command::Stop);
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

/// A queue pair's send side and completion queue, owned by one requester.
pub struct EngineQueue {
    engine: Arc<CryptoEngine>,
    pool: ContextPool,
    cq: Arc<CompletionQueue>,
    signal_config: bool,
}

impl fmt::Debug for EngineQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EngineQueue")
            .field("outstanding", &self.outstanding())
            .finish_non_exhaustive()
    }
}

impl EngineQueue {
    /// Makes the configuration WQEs that [`EngineQueue::post_open`] and
    /// [`EngineQueue::post_seal`] chain signaled (each then yields a
    /// completion of its own, as without Yoon & Moon's optimisation).
    pub fn set_signal_config(&mut self, on: bool) {
        self.signal_config = on;
    }

    /// Decrypts and checks a sealed page: a context from the pool,
    /// `[Configure(key, tweak), Open]` in one doorbell. A refused post
    /// hands the buffer back.
    pub fn post_open(
        &mut self,
        key: KeyId,
        tweak: Tweak,
        buf: Box<[u8; SEALED_LEN]>,
        user: u64,
    ) -> Result<(), Refused> {
        let context = match self.take_context() {
            Ok(c) => c,
            Err(error) => return Err(Refused { error, buf }),
        };
        self.post_configured(key, tweak, Wqe::Open { context, buf, user })
    }

    /// Seals the page in `buf`'s first 4096 bytes, as
    /// [`post_open`](EngineQueue::post_open) does.
    pub fn post_seal(
        &mut self,
        key: KeyId,
        tweak: Tweak,
        buf: Box<[u8; SEALED_LEN]>,
        user: u64,
    ) -> Result<(), Refused> {
        let context = match self.take_context() {
            Ok(c) => c,
            Err(error) => return Err(Refused { error, buf }),
        };
        self.post_configured(key, tweak, Wqe::Seal { context, buf, user })
    }

    fn post_configured(&mut self, key: KeyId, tweak: Tweak, data: Wqe) -> Result<(), Refused> {
        let context = data.context();
        let config = Wqe::Configure {
            context,
            key,
            tweak,
            signaled: self.signal_config,
        };
        // The only failure left is a stopped engine (both contexts are
        // held); the data WQE's buffer is lost with it.
        self.post_chain(vec![config, data]).map_err(|error| {
            self.pool.give_back(context);
            Refused {
                error,
                buf: Box::new([0; SEALED_LEN]),
            }
        })
    }

    /// Takes a context from the pool for a chain of the caller's own; it
    /// returns to the pool when the data WQE's completion is polled.
    pub fn take_context(&mut self) -> Result<ContextId, PostError> {
        self.pool.take().ok_or_else(|| {
            self.engine
                .counters
                .pool_exhausted
                .fetch_add(1, Ordering::Relaxed);
            PostError::PoolExhausted {
                depth: self.pool.depth(),
            }
        })
    }

    /// Posts WQEs as one doorbell; the engine runs them in order. Every
    /// WQE must name a context this queue holds.
    pub fn post_chain(&mut self, chain: Vec<Wqe>) -> Result<(), PostError> {
        if let Some(w) = chain.iter().find(|w| !self.pool.holds(w.context())) {
            return Err(PostError::NotHeld(w.context()));
        }
        let doorbell = Doorbell {
            posted_at: Instant::now(),
            wqes: chain,
            cq: self.cq.clone(),
        };
        match self.engine.send(Command::Doorbell(doorbell)) {
            true => Ok(()),
            false => Err(PostError::Stopped),
        }
    }

    /// The next completion whose time has come, in posting order; a data
    /// completion gives its context back to the pool.
    pub fn poll(&mut self) -> Option<Completion> {
        let done = self.cq.pop_ready(Instant::now())?;
        if done.buf.is_some() {
            self.pool.give_back(done.context);
        }
        Some(done)
    }

    /// When the oldest finished completion becomes visible (`None`: none
    /// finished yet).
    pub fn next_ready(&self) -> Option<Instant> {
        self.cq.next_ready()
    }

    /// Contexts in use: requests posted and not yet polled.
    pub fn outstanding(&self) -> usize {
        self.pool.depth() - self.pool.free()
    }

    /// Contexts free in the pool.
    pub fn pool_free(&self) -> usize {
        self.pool.free()
    }

    /// The engine this queue posts to.
    pub fn engine(&self) -> &Arc<CryptoEngine> {
        &self.engine
    }
}
