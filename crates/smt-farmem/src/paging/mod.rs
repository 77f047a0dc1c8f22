//! A paging front end: a region of memory whose pages live, sealed, on a
//! memory node, and are fetched, decrypted and mapped in when touched
//! (seed 002's remote paging, on Linux's userfaultfd instead of DiLOS's
//! or Adios's own page-fault handler).
//!
//! - The region is a private anonymous mapping registered with a
//!   userfaultfd for missing pages. A thread that touches a missing page
//!   stops in the kernel; the region's fault-handler thread (the
//!   *requester*) fetches the page through a [`Pipeline`] (one SMT READ),
//!   has it decrypted and checked (CPU or crypto engine), and copies it
//!   in with `UFFDIO_COPY`, which wakes the thread.
//! - A local cache of `cache_pages` pages: once that many are mapped, each
//!   new one evicts the oldest (FIFO; `MADV_DONTNEED`), so its next touch
//!   faults again.
//! - [`Requester::BusyWait`]: the handler takes one fault at a time and
//!   spins (socket and completion queue) until its page is in; between
//!   faults it spins on the fault queue (it never sleeps, as DiLOS's
//!   cores do not).
//!   [`Requester::Yield`]: the handler issues a fetch per fault as faults
//!   arrive, completes them as their pages come back, and sleeps on its
//!   descriptors when there is nothing to do, so the application's other
//!   threads run meanwhile.
//!
//! What it does not do: the region is **read-only** once created (its
//! contents are written to the memory node at creation by a fill
//! function); dirty-page write-back would need write-protect faults, and
//! is left out. A page that fails its integrity check cannot be given to
//! the faulting thread: the handler reports it and aborts the process, as
//! an uncorrectable memory error would (the client API returns the error
//! instead: [`PageClient`](crate::PageClient)). Needs root (or
//! `vm.unprivileged_userfaultfd`); [`available`] says why not.

mod handler;
mod sys;

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use smt_memnode::wire::MAX_BATCH;
use smt_pagecrypt::{Page, PAGE_SIZE};
use userfaultfd::{Uffd, UffdBuilder};

pub(crate) use sys::tight_timer_slack;

use crate::pipeline::Pipeline;
use crate::requester::Requester;

/// The region's shape and the handler's way of waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionConfig {
    /// Pages in the region.
    pub pages: usize,
    /// Pages mapped at once (the local cache).
    pub cache_pages: usize,
    /// How the fault handler waits for a fetched page.
    pub requester: Requester,
    /// The remote address of the region's first page (a multiple of 4096).
    pub remote_base: u64,
}

/// How the region's pages get to the memory node.
pub enum Fill<'a> {
    /// Each page's contents from this function, sealed and written at
    /// creation.
    With(&'a mut dyn FnMut(usize, &mut Page)),
    /// Already there (written by an earlier region with the same key, base
    /// and pages).
    AlreadyThere,
}

impl fmt::Debug for Fill<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fill::With(_) => f.write_str("Fill::With(..)"),
            Fill::AlreadyThere => f.write_str("Fill::AlreadyThere"),
        }
    }
}

/// Why a region could not be made.
#[derive(Debug)]
#[non_exhaustive]
pub enum RegionError {
    /// userfaultfd is not available to this process (not root, or the
    /// kernel lacks it).
    Unavailable(String),
    /// The configuration is inconsistent (says what to change).
    Config(String),
    /// Writing the region's pages to the memory node failed.
    Fill(String),
    /// A system call on the mapping or the userfaultfd failed.
    Io(io::Error),
}

impl fmt::Display for RegionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unavailable(why) => write!(f, "userfaultfd is not available: {why}"),
            Self::Config(why) => write!(f, "bad region configuration: {why}"),
            Self::Fill(why) => write!(f, "filling the region on the memory node failed: {why}"),
            Self::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RegionError {}

impl From<io::Error> for RegionError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

/// Counters of a region's handler.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PagingStats {
    /// Fault events read.
    pub faults: u64,
    /// Pages fetched from the memory node.
    pub fetches: u64,
    /// Pages evicted from the local cache.
    pub evictions: u64,
    /// Faults on a page already being fetched or already filled.
    pub coalesced: u64,
}

#[derive(Debug, Default)]
struct SharedStats {
    faults: AtomicU64,
    fetches: AtomicU64,
    evictions: AtomicU64,
    coalesced: AtomicU64,
}

impl SharedStats {
    fn snapshot(&self) -> PagingStats {
        PagingStats {
            faults: self.faults.load(Ordering::Relaxed),
            fetches: self.fetches.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            coalesced: self.coalesced.load(Ordering::Relaxed),
        }
    }
}

/// Whether this process can use userfaultfd (`Err`: why not).
pub fn available() -> Result<(), String> {
    new_uffd().map(drop).map_err(|e| e.to_string())
}

fn new_uffd() -> Result<Uffd, userfaultfd::Error> {
    // Kernel-mode faults too (a system call reading the region) when
    // allowed (root); user-mode only otherwise.
    UffdBuilder::new()
        .close_on_exec(true)
        .non_blocking(true)
        .user_mode_only(false)
        .create()
        .or_else(|_| {
            UffdBuilder::new()
                .close_on_exec(true)
                .non_blocking(true)
                .user_mode_only(true)
                .create()
        })
}

/// A region of remote memory, paged in on touch. Dropping it stops the
/// handler and unmaps the region (no borrow of its bytes can outlive it).
pub struct RemoteRegion {
    // Field order: the handler (which uses the mapping) stops first.
    handler: Option<JoinHandle<Pipeline>>,
    stop: Arc<AtomicBool>,
    stats: Arc<SharedStats>,
    mapping: Arc<sys::Mapping>,
    config: RegionConfig,
}

impl fmt::Debug for RemoteRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteRegion")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl RemoteRegion {
    /// Writes the region's pages to the memory node (per `fill`), maps
    /// the region with nothing resident, and starts its fault handler on
    /// `pipeline` (whose endpoint should busy-poll for
    /// [`Requester::BusyWait`]).
    pub fn create(
        mut pipeline: Pipeline,
        config: RegionConfig,
        fill: Fill<'_>,
    ) -> Result<Self, RegionError> {
        check(&config)?;
        let uffd = new_uffd().map_err(|e| RegionError::Unavailable(e.to_string()))?;
        if let Fill::With(f) = fill {
            write_pages(&mut pipeline, &config, f)?;
        }
        let mapping = Arc::new(sys::Mapping::new(config.pages)?);
        uffd.register(mapping.base(), mapping.len())
            .map_err(|e| RegionError::Unavailable(format!("UFFDIO_REGISTER: {e}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(SharedStats::default());
        let handler = handler::spawn(handler::Handler::new(
            pipeline,
            uffd,
            mapping.clone(),
            config,
            stop.clone(),
            stats.clone(),
        )?)?;
        Ok(Self {
            handler: Some(handler),
            stop,
            stats,
            mapping,
            config,
        })
    }

    /// The region's bytes; touching a missing page fetches it.
    pub fn bytes(&self) -> &[u8] {
        self.mapping.bytes()
    }

    /// The little-endian u64 at `index` (8-byte slots).
    pub fn u64_at(&self, index: usize) -> u64 {
        let b = &self.bytes()[index * 8..index * 8 + 8];
        // NOTE(unwrap): an 8-byte slice.
        u64::from_le_bytes(b.try_into().expect("8 bytes"))
    }

    /// The shape the region was made with.
    pub fn config(&self) -> &RegionConfig {
        &self.config
    }

    /// The fault handler's counters so far.
    pub fn stats(&self) -> PagingStats {
        self.stats.snapshot()
    }

    /// Stops the handler and returns its pipeline (for the next region on
    /// the same connection).
    pub fn close(mut self) -> Option<Pipeline> {
        self.halt()
    }

    fn halt(&mut self) -> Option<Pipeline> {
        self.stop.store(true, Ordering::Relaxed);
        self.handler.take().and_then(|h| h.join().ok())
    }
}

impl Drop for RemoteRegion {
    fn drop(&mut self) {
        self.halt();
    }
}

fn check(c: &RegionConfig) -> Result<(), RegionError> {
    if c.pages == 0 || c.cache_pages == 0 {
        return Err(RegionError::Config(
            "pages and cache_pages must be at least 1".into(),
        ));
    }
    if !c.remote_base.is_multiple_of(PAGE_SIZE as u64) {
        return Err(RegionError::Config(format!(
            "remote_base {:#x} must be a multiple of 4096",
            c.remote_base
        )));
    }
    Ok(())
}

fn write_pages(
    pipeline: &mut Pipeline,
    config: &RegionConfig,
    fill: &mut dyn FnMut(usize, &mut Page),
) -> Result<(), RegionError> {
    let mut buf = vec![[0u8; PAGE_SIZE]; MAX_BATCH];
    let mut first = 0;
    while first < config.pages {
        let n = MAX_BATCH.min(config.pages - first);
        for (i, page) in buf[..n].iter_mut().enumerate() {
            fill(first + i, page);
        }
        let pages: Vec<(u64, &Page)> = buf[..n]
            .iter()
            .enumerate()
            .map(|(i, p)| (config.remote_base + ((first + i) * PAGE_SIZE) as u64, p))
            .collect();
        pipeline
            .start_write(&pages, 0)
            .map_err(|e| RegionError::Fill(e.to_string()))?;
        for _ in 0..n {
            match pipeline.poll(None) {
                Ok(Some(d)) => d
                    .result
                    .map(drop)
                    .map_err(|e| RegionError::Fill(e.to_string()))?,
                Ok(None) => return Err(RegionError::Fill("a write was lost".into())),
                Err(e) => return Err(RegionError::Fill(e.to_string())),
            }
        }
        first += n;
    }
    Ok(())
}
