//! The memory node's server loop: one `LocalEndpoint`, one request per
//! SMT message, answered in the order received.

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use smt::{LocalEndpoint, LocalEvent};
use smt_pagecrypt::{PAGE_SIZE, SEALED_LEN};

use crate::store::{PageStore, StoreConfig};
use crate::wire::{self, Info, Op, PageStatus, Request, Response, MAX_BATCH};

/// What a node has served.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeStats {
    /// Requests answered (refused ones included).
    pub requests: u64,
    /// Requests refused whole (malformed, bad version, unknown op, too big).
    pub refused: u64,
    /// Pages read successfully.
    pub pages_read: u64,
    /// Pages written successfully.
    pub pages_written: u64,
    /// Pages answered with an error status.
    pub page_errors: u64,
}

/// The server failed (its endpoint did).
#[derive(Debug)]
pub struct ServeError(pub smt::Error);

impl fmt::Display for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "memory node endpoint failed: {}", self.0)
    }
}

impl std::error::Error for ServeError {}

/// A memory node: an endpoint and a page store.
pub struct MemNode {
    endpoint: LocalEndpoint,
    store: Arc<Mutex<PageStore>>,
    stats: Arc<Mutex<NodeStats>>,
}

impl fmt::Debug for MemNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemNode")
            .field("local_addr", &self.endpoint.local_addr())
            .finish_non_exhaustive()
    }
}

impl MemNode {
    /// A node serving on `endpoint` (with its session setup done: a PSK or
    /// TLS acceptor, or installed sessions).
    pub fn new(endpoint: LocalEndpoint, config: StoreConfig) -> Self {
        Self {
            endpoint,
            store: Arc::new(Mutex::new(PageStore::new(config))),
            stats: Arc::default(),
        }
    }

    /// The address the node's endpoint is bound to, for clients.
    pub fn local_addr(&self) -> SocketAddr {
        self.endpoint.local_addr()
    }

    /// The store, shared: tests play the attacker with it (a memory node
    /// that changes, moves or replays pages).
    pub fn store(&self) -> Arc<Mutex<PageStore>> {
        self.store.clone()
    }

    /// What it has served so far.
    pub fn stats(&self) -> NodeStats {
        *self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Serves events until `timeout` passes with none (`Ok(false)`) or one
    /// request was answered (`Ok(true)`).
    pub fn serve_once(&mut self, timeout: Option<Duration>) -> Result<bool, ServeError> {
        match self.endpoint.poll(timeout).map_err(ServeError)? {
            Some(LocalEvent::Request { request, data }) => {
                let reply = self.handle(&data);
                // A client that is gone is not the node's failure.
                if let Err(e) = self.endpoint.respond(request, reply) {
                    tracing::debug!(error = %e, "memory node: response not sent");
                }
                Ok(true)
            }
            Some(_) | None => Ok(false),
        }
    }

    /// Serves until `stop` is set (checked every 50 ms when idle).
    pub fn serve_until(&mut self, stop: &AtomicBool) -> Result<(), ServeError> {
        while !stop.load(Ordering::Relaxed) {
            self.serve_once(Some(Duration::from_millis(50)))?;
        }
        Ok(())
    }

    /// Runs the node on a thread of its own until the handle stops it.
    pub fn spawn(mut self) -> std::io::Result<RunningNode> {
        let stop = Arc::new(AtomicBool::new(false));
        let (addr, store, stats) = (self.local_addr(), self.store(), self.stats.clone());
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("smt-memnode".into())
            .spawn(move || self.serve_until(&flag))?;
        Ok(RunningNode {
            addr,
            store,
            stats,
            stop,
            thread: Some(thread),
        })
    }

    /// The response to one request message. Bounded work: at most
    /// [`MAX_BATCH`] pages.
    pub fn handle(&mut self, message: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut stats = NodeStats {
            requests: 1,
            ..NodeStats::default()
        };
        match Request::parse(message) {
            Ok(Request::Read(addrs)) => self.read(&addrs, &mut out, &mut stats),
            Ok(Request::Write(pages)) => {
                let mut store = self.store.lock().unwrap_or_else(PoisonError::into_inner);
                let statuses: Vec<PageStatus> =
                    pages.into_iter().map(|(a, p)| store.write(a, p)).collect();
                count(&mut stats, &statuses, false);
                Response::Write(statuses).emit(&mut out);
            }
            Ok(Request::Info) => Response::Info(self.info()).emit(&mut out),
            Err(e) => {
                tracing::debug!(error = %e, "memory node: request refused");
                stats.refused = 1;
                let op = message.get(1).copied().map_or(Op(0), Op);
                Response::Refused {
                    op,
                    status: e.status(),
                }
                .emit(&mut out);
            }
        }
        self.add(stats);
        out
    }

    fn read(&self, addrs: &[u64], out: &mut Vec<u8>, stats: &mut NodeStats) {
        let store = self.store.lock().unwrap_or_else(PoisonError::into_inner);
        out.reserve(wire::HEADER_LEN + addrs.len() * (wire::READ_ENTRY_HEAD + SEALED_LEN));
        out.extend_from_slice(&[wire::VERSION, Op::READ.0]);
        out.extend_from_slice(&(addrs.len() as u16).to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        let mut statuses = Vec::with_capacity(addrs.len());
        for &a in addrs {
            let page = store.read(a);
            statuses.push(page.map_or_else(|e| e, |_| PageStatus::OK));
            wire::emit_read_entry(out, page);
        }
        count(stats, &statuses, true);
    }

    fn info(&self) -> Info {
        let store = self.store.lock().unwrap_or_else(PoisonError::into_inner);
        Info {
            capacity_pages: store.config().capacity_pages,
            address_limit: store.config().address_limit,
            used_pages: store.used(),
            page_size: PAGE_SIZE as u32,
            sealed_len: SEALED_LEN as u32,
            max_batch: MAX_BATCH as u32,
        }
    }

    fn add(&self, s: NodeStats) {
        let mut t = self.stats.lock().unwrap_or_else(PoisonError::into_inner);
        t.requests += s.requests;
        t.refused += s.refused;
        t.pages_read += s.pages_read;
        t.pages_written += s.pages_written;
        t.page_errors += s.page_errors;
    }
}

fn count(stats: &mut NodeStats, statuses: &[PageStatus], read: bool) {
    let ok = statuses.iter().filter(|s| **s == PageStatus::OK).count() as u64;
    match read {
        true => stats.pages_read += ok,
        false => stats.pages_written += ok,
    }
    stats.page_errors += statuses.len() as u64 - ok;
}

/// A node serving on its own thread; dropping the handle stops it.
pub struct RunningNode {
    /// The address the node serves on, for clients.
    pub addr: SocketAddr,
    store: Arc<Mutex<PageStore>>,
    stats: Arc<Mutex<NodeStats>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(), ServeError>>>,
}

impl fmt::Debug for RunningNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunningNode")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl RunningNode {
    /// The store (see [`MemNode::store`]).
    pub fn store(&self) -> Arc<Mutex<PageStore>> {
        self.store.clone()
    }

    /// What it has served so far.
    pub fn stats(&self) -> NodeStats {
        *self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops the node and returns how its loop ended.
    pub fn stop(mut self) -> Result<(), ServeError> {
        self.halt()
    }

    fn halt(&mut self) -> Result<(), ServeError> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            // The loop does not panic on input; a panic is a bug shown here.
            Some(Err(_)) => Err(ServeError(smt::Error::Closed)),
            None => Ok(()),
        }
    }
}

impl Drop for RunningNode {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}
