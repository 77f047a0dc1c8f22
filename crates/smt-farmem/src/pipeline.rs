//! The client's engine room: network reads and writes in flight, pages
//! being decrypted (on the CPU, or on the crypto engine), and finished
//! pages waiting to be taken. Every requester drives one of these; the
//! busy-waiting one spins on [`Pipeline::poll`], the yielding one calls it
//! with a zero timeout between its other work.
//!
//! Call order: [`Pipeline::start_read`] / [`Pipeline::start_write`], then
//! [`Pipeline::poll`] until each page has come back as a [`Done`].

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use smt::{CallId, LocalEndpoint, LocalEvent};
use smt_memnode::wire::{self, Request, Response, MAX_BATCH};
use smt_pagecrypt::engine::{EngineQueue, PostError, Status};
use smt_pagecrypt::{KeyId, Page, PageCipher, Tweak, PAGE_SIZE, SEALED_LEN};

use crate::error::{ClientError, PageError};

/// Where pages are decrypted.
#[derive(Debug)]
pub enum Crypto {
    /// On this thread, with OpenSSL (AES-NI) and crc-fast.
    Cpu,
    /// On the crypto engine: `[Configure, Open]` per page, one doorbell.
    Engine(EngineQueue),
}

impl Crypto {
    /// `cpu` or `engine`, as reports name it.
    pub fn name(&self) -> &'static str {
        match self {
            Crypto::Cpu => "cpu",
            Crypto::Engine(_) => "engine",
        }
    }
}

/// A page buffer: the sealed bytes, decrypted in place.
pub struct PageBuf(Box<[u8; SEALED_LEN]>);

impl PageBuf {
    /// The page (valid once a [`Done`] reports success).
    pub fn page(&self) -> &Page {
        // NOTE(unwrap): the first PAGE_SIZE bytes of SEALED_LEN bytes.
        (&self.0[..PAGE_SIZE]).try_into().expect("a page prefix")
    }
}

impl fmt::Debug for PageBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PageBuf(..)")
    }
}

/// What a finished page reports: for reads the page, for writes nothing.
#[derive(Debug)]
pub struct Done {
    /// The caller's tag from `start_read`/`start_write`.
    pub user: u64,
    /// The page's remote byte address.
    pub address: u64,
    /// For a read, the opened page; for a write, `None`; or why the page
    /// failed.
    pub result: Result<Option<PageBuf>, PageError>,
}

/// A request in flight on the network.
#[derive(Debug)]
struct InFlight {
    user: u64,
    /// (address, version it was sealed with / is expected at)
    pages: Vec<(u64, u64)>,
    write: bool,
}

/// A page waiting for the engine.
#[derive(Debug)]
struct EngineWork {
    user: u64,
    address: u64,
    key: KeyId,
    tweak: Tweak,
    buf: Box<[u8; SEALED_LEN]>,
}

/// Counters of one pipeline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PipelineStats {
    /// SMT calls sent to the memory node (each up to `MAX_BATCH` pages).
    pub requests: u64,
    /// Pages that came back opened and checked.
    pub pages_read: u64,
    /// Pages the node acknowledged storing.
    pub pages_written: u64,
    /// Pages that failed their integrity check.
    pub integrity_failures: u64,
    /// Pages that waited for a free engine context.
    pub engine_backlogged: u64,
}

/// Network reads/writes and decryption in flight. See the module docs.
pub struct Pipeline {
    endpoint: LocalEndpoint,
    node: SocketAddr,
    cipher: PageCipher,
    crypto: Crypto,
    /// Each page's current version (only with a versioned cipher).
    versions: HashMap<u64, u64>,
    calls: HashMap<CallId, InFlight>,
    engine_pending: HashMap<u64, (u64, u64)>,
    engine_backlog: VecDeque<EngineWork>,
    next_token: u64,
    ready: VecDeque<Done>,
    stats: PipelineStats,
    scratch: Vec<u8>,
}

impl fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pipeline")
            .field("node", &self.node)
            .field("crypto", &self.crypto.name())
            .field("in_flight", &self.in_flight())
            .finish_non_exhaustive()
    }
}

impl Pipeline {
    /// A pipeline to the memory node at `node` over `endpoint` (sessions
    /// set up: PSK or TLS client, or installed keys).
    pub fn new(
        endpoint: LocalEndpoint,
        node: SocketAddr,
        cipher: PageCipher,
        crypto: Crypto,
    ) -> Self {
        Self {
            endpoint,
            node,
            cipher,
            crypto,
            versions: HashMap::new(),
            calls: HashMap::new(),
            engine_pending: HashMap::new(),
            engine_backlog: VecDeque::new(),
            next_token: 0,
            ready: VecDeque::new(),
            stats: PipelineStats::default(),
            scratch: Vec::new(),
        }
    }

    /// The page cipher (key ring, CRC, versioning).
    pub fn cipher(&self) -> &PageCipher {
        &self.cipher
    }

    /// The page cipher, to add, rotate or retire keys.
    pub fn cipher_mut(&mut self) -> &mut PageCipher {
        &mut self.cipher
    }

    /// Where pages are decrypted.
    pub fn crypto(&self) -> &Crypto {
        &self.crypto
    }

    /// The SMT endpoint the pipeline sends on.
    pub fn endpoint(&self) -> &LocalEndpoint {
        &self.endpoint
    }

    /// The endpoint, for calls of the caller's own while nothing of the
    /// pipeline is in flight (its events would be taken by them).
    pub fn endpoint_mut(&mut self) -> &mut LocalEndpoint {
        &mut self.endpoint
    }

    /// The memory node's address.
    pub fn node(&self) -> SocketAddr {
        self.node
    }

    /// The counters so far.
    pub fn stats(&self) -> PipelineStats {
        self.stats
    }

    /// Pages not yet taken: on the network, at the engine, or ready.
    pub fn in_flight(&self) -> usize {
        self.calls.values().map(|c| c.pages.len()).sum::<usize>()
            + self.engine_pending.len()
            + self.engine_backlog.len()
            + self.ready.len()
    }

    /// The version a page is expected at (0: never written by us).
    pub fn version(&self, address: u64) -> u64 {
        self.versions.get(&address).copied().unwrap_or(0)
    }

    /// Sends one READ for `addresses` (at most [`MAX_BATCH`]); each page
    /// comes back from [`Pipeline::poll`] tagged `user`.
    pub fn start_read(&mut self, addresses: &[u64], user: u64) -> Result<(), ClientError> {
        check_batch(addresses.len())?;
        self.scratch.clear();
        Request::Read(addresses.to_vec()).emit(&mut self.scratch);
        let pages = addresses.iter().map(|&a| (a, self.version(a))).collect();
        self.send(InFlight {
            user,
            pages,
            write: false,
        })
    }

    /// Seals `pages` (on this thread) and sends them in one WRITE; each
    /// page's outcome comes back from [`Pipeline::poll`] tagged `user`.
    /// With a versioned cipher each write takes the page's next version
    /// (kept here, never on the node).
    pub fn start_write(&mut self, pages: &[(u64, &Page)], user: u64) -> Result<(), ClientError> {
        check_batch(pages.len())?;
        let versioned = self.cipher.is_versioned();
        let mut sealed = Vec::with_capacity(pages.len());
        let mut meta = Vec::with_capacity(pages.len());
        for &(address, page) in pages {
            let version = match versioned {
                true => self.bump_version(address),
                false => 0,
            };
            let mut buf = Box::new([0u8; SEALED_LEN]);
            let key = self.cipher.seal_into(address, version, page, &mut buf);
            sealed.push((address, key.0, buf));
            meta.push((address, version));
        }
        self.scratch.clear();
        let borrowed: Vec<(u64, u32, &[u8; SEALED_LEN])> =
            sealed.iter().map(|(a, k, b)| (*a, *k, &**b)).collect();
        wire::emit_write(&mut self.scratch, &borrowed);
        self.send(InFlight {
            user,
            pages: meta,
            write: true,
        })
    }

    fn bump_version(&mut self, address: u64) -> u64 {
        let v = self.versions.entry(address).or_insert(0);
        *v += 1;
        *v
    }

    fn send(&mut self, flight: InFlight) -> Result<(), ClientError> {
        let call = self.endpoint.call(self.node, &self.scratch)?;
        self.stats.requests += 1;
        self.calls.insert(call, flight);
        Ok(())
    }

    /// The next finished page, doing the work (network, engine) until one
    /// is ready or `timeout` passes (`Some(ZERO)`: only what is ready now;
    /// `None`: until one is ready, or at once if nothing is in flight).
    pub fn poll(&mut self, timeout: Option<Duration>) -> Result<Option<Done>, ClientError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            self.drain_engine();
            if let Some(done) = self.ready.pop_front() {
                return Ok(Some(done));
            }
            if self.in_flight() == 0 {
                return Ok(None);
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| d <= now) && timeout != Some(Duration::ZERO) {
                return Ok(None);
            }
            let wait = self.network_wait(deadline, now);
            match self.endpoint.poll(wait)? {
                Some(event) => self.on_event(event),
                None if timeout == Some(Duration::ZERO) => {
                    self.drain_engine();
                    return Ok(self.ready.pop_front());
                }
                None => {}
            }
        }
    }

    /// How long the endpoint may sleep: not past the caller's deadline,
    /// and not past the engine's next completion (50 µs at most while
    /// the engine works, whose completion is not a socket event).
    fn network_wait(&self, deadline: Option<Instant>, now: Instant) -> Option<Duration> {
        let mut wait = deadline.map(|d| d.saturating_duration_since(now));
        if !self.engine_pending.is_empty() || !self.engine_backlog.is_empty() {
            let engine = match &self.crypto {
                Crypto::Engine(q) => q.next_ready().map(|t| t.saturating_duration_since(now)),
                Crypto::Cpu => None,
            };
            let cap = engine
                .unwrap_or(Duration::from_micros(50))
                .min(Duration::from_micros(50));
            wait = Some(wait.map_or(cap, |w| w.min(cap)));
        }
        wait
    }

    fn on_event(&mut self, event: LocalEvent) {
        match event {
            LocalEvent::Response { call, data } => {
                if let Some(flight) = self.calls.remove(&call) {
                    self.on_response(flight, &data);
                }
            }
            LocalEvent::Failed { call, error } => {
                if let Some(flight) = self.calls.remove(&call) {
                    let error = std::sync::Arc::new(error);
                    self.fail_all(flight, |_| PageError::Transport(error.clone()));
                }
            }
            LocalEvent::Request { request, .. } => {
                // A compute node serves nothing.
                self.endpoint.abandon(request);
            }
            _ => {}
        }
    }

    fn fail_all(&mut self, flight: InFlight, error: impl Fn(u64) -> PageError) {
        for (address, _) in flight.pages {
            self.ready.push_back(Done {
                user: flight.user,
                address,
                result: Err(error(address)),
            });
        }
    }

    fn on_response(&mut self, flight: InFlight, data: &[u8]) {
        let parsed = Response::parse(data);
        match (parsed, flight.write) {
            (Ok(Response::Read(pages)), false) if pages.len() == flight.pages.len() => {
                for ((address, version), page) in flight.pages.into_iter().zip(pages) {
                    self.on_read_page(flight.user, address, version, page);
                }
            }
            (Ok(Response::Write(statuses)), true) if statuses.len() == flight.pages.len() => {
                for ((address, _), status) in flight.pages.into_iter().zip(statuses) {
                    let result = match status == wire::PageStatus::OK {
                        true => Ok(None),
                        false => Err(PageError::Node { address, status }),
                    };
                    self.stats.pages_written += u64::from(result.is_ok());
                    self.ready.push_back(Done {
                        user: flight.user,
                        address,
                        result,
                    });
                }
            }
            (Ok(Response::Refused { status, .. }), _) => {
                self.fail_all(flight, |_| PageError::Refused { status });
            }
            (Err(e), _) => self.fail_all(flight, |_| PageError::BadResponse(e.clone())),
            (Ok(_), _) => self.fail_all(flight, |_| {
                PageError::BadResponse(wire::WireError::Reserved("response does not match request"))
            }),
        }
    }

    fn on_read_page(
        &mut self,
        user: u64,
        address: u64,
        version: u64,
        page: Result<wire::StoredPage, wire::PageStatus>,
    ) {
        let stored = match page {
            Ok(p) => p,
            Err(status) => {
                let result = Err(PageError::Node { address, status });
                self.ready.push_back(Done {
                    user,
                    address,
                    result,
                });
                return;
            }
        };
        let key = KeyId(stored.key);
        let tweak = self.cipher.tweak(address, version);
        match &self.crypto {
            Crypto::Cpu => {
                let mut buf = stored.bytes;
                let result = self.cipher.open_in_place(address, version, key, &mut buf);
                self.finish_read(user, address, buf, result.err());
            }
            Crypto::Engine(_) => {
                self.engine_backlog.push_back(EngineWork {
                    user,
                    address,
                    key,
                    tweak,
                    buf: stored.bytes,
                });
                self.post_backlog();
            }
        }
    }

    fn finish_read(
        &mut self,
        user: u64,
        address: u64,
        buf: Box<[u8; SEALED_LEN]>,
        error: Option<smt_pagecrypt::IntegrityError>,
    ) {
        let result = match error {
            None => {
                self.stats.pages_read += 1;
                Ok(Some(PageBuf(buf)))
            }
            Some(error) => {
                self.stats.integrity_failures += 1;
                Err(PageError::Integrity { address, error })
            }
        };
        self.ready.push_back(Done {
            user,
            address,
            result,
        });
    }

    /// Posts waiting pages until the queue's pool runs out (the engine
    /// counts that); the rest wait for completions to free contexts.
    fn post_backlog(&mut self) {
        let Crypto::Engine(q) = &mut self.crypto else {
            return;
        };
        while let Some(w) = self.engine_backlog.pop_front() {
            let token = self.next_token;
            match q.post_open(w.key, w.tweak, w.buf, token) {
                Ok(()) => {
                    self.next_token += 1;
                    self.engine_pending.insert(token, (w.user, w.address));
                }
                Err(r) if matches!(r.error, PostError::PoolExhausted { .. }) => {
                    self.stats.engine_backlogged += 1;
                    self.engine_backlog
                        .push_front(EngineWork { buf: r.buf, ..w });
                    return;
                }
                Err(r) => {
                    self.ready.push_back(Done {
                        user: w.user,
                        address: w.address,
                        result: Err(PageError::Engine(r.error)),
                    });
                }
            }
        }
    }

    /// Takes the engine's visible completions, then posts what waited.
    fn drain_engine(&mut self) {
        loop {
            let Crypto::Engine(q) = &mut self.crypto else {
                return;
            };
            let Some(c) = q.poll() else { break };
            let Some((user, address)) = self.engine_pending.remove(&c.user) else {
                continue;
            };
            let Some(buf) = c.buf else { continue };
            let error = match c.status {
                Status::Done => None,
                Status::Integrity(e) => Some(e),
                other => {
                    tracing::warn!(?other, "crypto engine fault");
                    Some(smt_pagecrypt::IntegrityError::Padding)
                }
            };
            self.finish_read(user, address, buf, error);
        }
        if !self.engine_backlog.is_empty() {
            self.post_backlog();
        }
    }
}

fn check_batch(pages: usize) -> Result<(), ClientError> {
    match pages <= MAX_BATCH {
        true => Ok(()),
        false => Err(ClientError::BatchTooLarge {
            pages,
            max: MAX_BATCH,
        }),
    }
}
