//! The engine's worker thread: runs WQEs in doorbell order, does the real
//! crypto, and stamps each completion with its modelled time.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::counters::SharedCounters;
use super::{Completion, ContextId, EngineConfig, Status, Wqe};
use crate::keys::KeyId;
use crate::page::{open_with, seal_with, IntegrityError};
use crate::tweak::Tweak;
use crate::xts::{XtsCipher as Xts, XtsKey};
use crate::{Page, PAGE_SIZE, SEALED_LEN};

pub(super) enum Command {
    Doorbell(Doorbell),
    LoadKey(KeyId, XtsKey),
    UnloadKey(KeyId),
    Stop,
}

pub(super) struct Doorbell {
    pub(super) posted_at: Instant,
    pub(super) wqes: Vec<Wqe>,
    pub(super) cq: Arc<CompletionQueue>,
}

/// Finished completions with the time each becomes visible.
#[derive(Debug, Default)]
pub(super) struct CompletionQueue(Mutex<VecDeque<(Instant, Completion)>>);

impl CompletionQueue {
    fn push(&self, at: Instant, c: Completion) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back((at, c));
    }

    pub(super) fn pop_ready(&self, now: Instant) -> Option<Completion> {
        let mut q = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match q.front() {
            Some((at, _)) if *at <= now => q.pop_front().map(|(_, c)| c),
            _ => None,
        }
    }

    pub(super) fn next_ready(&self) -> Option<Instant> {
        let q = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        q.front().map(|(at, _)| *at)
    }
}

pub(super) fn spawn(
    config: EngineConfig,
    counters: Arc<SharedCounters>,
) -> io::Result<(Sender<Command>, JoinHandle<()>)> {
    let (tx, rx) = channel();
    let worker = std::thread::Builder::new()
        .name("crypto-engine".into())
        .spawn(move || Worker::new(config, counters).run(&rx))?;
    Ok((tx, worker))
}

struct Worker {
    config: EngineConfig,
    counters: Arc<SharedCounters>,
    keys: HashMap<KeyId, Xts>,
    /// Each context's key and tweak, once configured.
    contexts: HashMap<ContextId, (KeyId, Tweak)>,
    /// When the modelled pipeline is free again.
    busy_until: Instant,
}

impl Worker {
    fn new(config: EngineConfig, counters: Arc<SharedCounters>) -> Self {
        Self {
            config,
            counters,
            keys: HashMap::new(),
            contexts: HashMap::new(),
            busy_until: Instant::now(),
        }
    }

    fn run(mut self, commands: &Receiver<Command>) {
        while let Ok(command) = commands.recv() {
            match command {
                Command::Doorbell(d) => self.doorbell(d),
                Command::LoadKey(id, key) => {
                    self.keys.insert(id, Xts::new(&key));
                }
                Command::UnloadKey(id) => {
                    self.keys.remove(&id);
                }
                Command::Stop => return,
            }
        }
    }

    fn doorbell(&mut self, d: Doorbell) {
        self.counters.doorbells.fetch_add(1, Ordering::Relaxed);
        for wqe in d.wqes {
            let (at, done) = match wqe {
                Wqe::Configure {
                    context,
                    key,
                    tweak,
                    signaled,
                } => match self.configure(context, key, tweak, signaled) {
                    Some(c) => (d.posted_at.max(Instant::now()), c),
                    None => continue,
                },
                Wqe::Seal { context, buf, user } => {
                    self.data(d.posted_at, context, buf, user, true)
                }
                Wqe::Open { context, buf, user } => {
                    self.data(d.posted_at, context, buf, user, false)
                }
            };
            d.cq.push(at, done);
        }
    }

    fn configure(
        &mut self,
        context: ContextId,
        key: KeyId,
        tweak: Tweak,
        signaled: bool,
    ) -> Option<Completion> {
        self.contexts.insert(context, (key, tweak));
        self.counters
            .reconfigurations
            .fetch_add(1, Ordering::Relaxed);
        if !signaled {
            self.counters.unsignaled.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        self.counters
            .config_completions
            .fetch_add(1, Ordering::Relaxed);
        Some(Completion {
            user: 0,
            context,
            status: Status::Done,
            buf: None,
        })
    }

    /// Runs one data WQE; returns when its completion becomes visible.
    fn data(
        &mut self,
        posted_at: Instant,
        context: ContextId,
        mut buf: Box<[u8; SEALED_LEN]>,
        user: u64,
        seal: bool,
    ) -> (Instant, Completion) {
        let status = self.crypto(context, &mut buf, seal);
        let at = self.modelled_time(posted_at);
        self.counters
            .data_completions
            .fetch_add(1, Ordering::Relaxed);
        let done = Completion {
            user,
            context,
            status,
            buf: Some(buf),
        };
        (at, done)
    }

    fn crypto(&mut self, context: ContextId, buf: &mut [u8; SEALED_LEN], seal: bool) -> Status {
        let Some(&(key, tweak)) = self.contexts.get(&context) else {
            self.counters.unconfigured.fetch_add(1, Ordering::Relaxed);
            return Status::Unconfigured(context);
        };
        let Some(xts) = self.keys.get_mut(&key) else {
            return Status::Integrity(IntegrityError::UnknownKey(key));
        };
        self.counters
            .bytes
            .fetch_add(SEALED_LEN as u64, Ordering::Relaxed);
        if seal {
            let mut page: Page = [0; PAGE_SIZE];
            page.copy_from_slice(&buf[..PAGE_SIZE]);
            seal_with(xts, self.config.crc, &tweak, &page, buf);
            return Status::Done;
        }
        match open_with(xts, self.config.crc, &tweak, buf) {
            Ok(()) => Status::Done,
            Err(e) => {
                self.counters
                    .integrity_failures
                    .fetch_add(1, Ordering::Relaxed);
                Status::Integrity(e)
            }
        }
    }

    /// The pipeline takes requests in order at `throughput`; the result is
    /// visible `latency` after it leaves the pipeline, and never before
    /// the worker really finished.
    fn modelled_time(&mut self, posted_at: Instant) -> Instant {
        let cost = self.config.throughput.map_or(Duration::ZERO, |t| {
            Duration::from_secs_f64(SEALED_LEN as f64 / t)
        });
        let start = posted_at.max(self.busy_until);
        self.busy_until = start + cost;
        self.busy_until.max(Instant::now()) + self.config.latency
    }
}
