//! The region's fault handler: the requester. One thread, two ways of
//! waiting (see the module docs of `paging`).

use std::collections::{HashSet, VecDeque};
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use smt_pagecrypt::PAGE_SIZE;
use userfaultfd::{Event, EventBuffer, Uffd};

use super::{sys::Mapping, RegionConfig, SharedStats};
use crate::pipeline::{Crypto, Done, Pipeline};
use crate::requester::Requester;

const UFFD: Token = Token(0);
const SOCKET: Token = Token(1);

pub(super) struct Handler {
    pipeline: Pipeline,
    uffd: Uffd,
    mapping: Arc<Mapping>,
    config: RegionConfig,
    stop: Arc<AtomicBool>,
    stats: Arc<SharedStats>,
    /// Mapped pages, oldest first.
    resident: VecDeque<usize>,
    is_resident: Vec<bool>,
    fetching: HashSet<usize>,
    events: EventBuffer,
}

pub(super) fn spawn(handler: Handler) -> io::Result<JoinHandle<Pipeline>> {
    std::thread::Builder::new()
        .name("farmem-fault".into())
        .spawn(move || handler.run())
}

impl Handler {
    pub(super) fn new(
        pipeline: Pipeline,
        uffd: Uffd,
        mapping: Arc<Mapping>,
        config: RegionConfig,
        stop: Arc<AtomicBool>,
        stats: Arc<SharedStats>,
    ) -> io::Result<Self> {
        Ok(Self {
            pipeline,
            uffd,
            mapping,
            config,
            stop,
            stats,
            resident: VecDeque::with_capacity(config.cache_pages),
            is_resident: vec![false; config.pages],
            fetching: HashSet::new(),
            events: EventBuffer::new(64),
        })
    }

    fn run(mut self) -> Pipeline {
        if let Err(e) = self.serve() {
            // The faulting threads cannot be answered: stop the process
            // rather than leave them waiting forever (an uncorrectable
            // memory error does the same).
            eprintln!("smt-farmem: the paging handler failed: {e}; aborting");
            std::process::abort();
        }
        self.pipeline
    }

    fn serve(&mut self) -> io::Result<()> {
        let mut poll = Poll::new()?;
        let uffd_fd = self.uffd.as_raw_fd();
        let sock_fd = self.pipeline.endpoint().as_fd().as_raw_fd();
        poll.registry()
            .register(&mut SourceFd(&uffd_fd), UFFD, Interest::READABLE)?;
        poll.registry()
            .register(&mut SourceFd(&sock_fd), SOCKET, Interest::READABLE)?;
        let mut events = Events::with_capacity(8);
        while !self.stop.load(Ordering::Relaxed) {
            let progressed = match self.config.requester {
                Requester::BusyWait => self.busy_turn()?,
                Requester::Yield => self.yield_turn()?,
            };
            if !progressed && self.config.requester == Requester::BusyWait {
                // DiLOS's cores never sleep: poll the fault queue again,
                // offering the core to any other runnable thread (here the
                // memory node's and the load's share these cores; on the
                // seed's testbed they have machines of their own).
                std::thread::yield_now();
            } else if !progressed {
                let timeout = self.idle_timeout();
                if timeout.is_some_and(|t| t.is_zero()) {
                    std::thread::yield_now();
                } else {
                    poll.poll(&mut events, timeout)?;
                }
            }
        }
        Ok(())
    }

    /// How long to sleep with nothing to do: until a descriptor is ready,
    /// the endpoint's next timer, or 50 ms (to notice `stop`); zero
    /// (yield the CPU, then look again) while the engine holds pages, as
    /// its completions are no descriptor's event.
    fn idle_timeout(&self) -> Option<Duration> {
        if self.pipeline.in_flight() > 0 && matches!(self.pipeline.crypto(), Crypto::Engine(_)) {
            return Some(Duration::ZERO);
        }
        let protocol = self.pipeline.endpoint().timeout();
        Some(protocol.map_or(Duration::from_millis(50), |t| {
            t.min(Duration::from_millis(50))
        }))
    }

    /// DiLOS: one fault at a time, spinning until its page is in.
    fn busy_turn(&mut self) -> io::Result<bool> {
        let faults = self.read_faults()?;
        if faults.is_empty() {
            return Ok(false);
        }
        for page in faults {
            if !self.start_fetch(page)? {
                continue;
            }
            loop {
                match self
                    .pipeline
                    .poll(Some(Duration::ZERO))
                    .map_err(io::Error::other)?
                {
                    Some(done) => {
                        self.install(done)?;
                        // The woken faulting thread continues on this core
                        // (in DiLOS it is the thread that was spinning).
                        std::thread::yield_now();
                        break;
                    }
                    None => std::thread::yield_now(),
                }
            }
        }
        Ok(true)
    }

    /// Adios: issue every new fault's fetch, complete whatever came back.
    fn yield_turn(&mut self) -> io::Result<bool> {
        let mut progressed = false;
        for page in self.read_faults()? {
            self.start_fetch(page)?;
            progressed = true;
        }
        while let Some(done) = self
            .pipeline
            .poll(Some(Duration::ZERO))
            .map_err(io::Error::other)?
        {
            self.install(done)?;
            progressed = true;
        }
        Ok(progressed)
    }

    /// The pages of the fault events waiting now.
    fn read_faults(&mut self) -> io::Result<Vec<usize>> {
        let base = self.mapping.base() as usize;
        let mut pages = Vec::new();
        let events = self
            .uffd
            .read_events(&mut self.events)
            .map_err(io::Error::other)?;
        for event in events {
            if let Event::Pagefault { addr, .. } = event.map_err(io::Error::other)? {
                pages.push((addr as usize - base) / PAGE_SIZE);
            }
        }
        self.stats
            .faults
            .fetch_add(pages.len() as u64, Ordering::Relaxed);
        Ok(pages)
    }

    /// Sends the READ for `page` unless it is being fetched or is already
    /// in (then its waiters are woken). Returns whether a fetch started.
    fn start_fetch(&mut self, page: usize) -> io::Result<bool> {
        if self.fetching.contains(&page) {
            self.stats.coalesced.fetch_add(1, Ordering::Relaxed);
            return Ok(false);
        }
        if self.is_resident[page] {
            self.stats.coalesced.fetch_add(1, Ordering::Relaxed);
            let ptr = (self.mapping.base() as usize + page * PAGE_SIZE) as *mut libc::c_void;
            self.uffd.wake(ptr, PAGE_SIZE).map_err(io::Error::other)?;
            return Ok(false);
        }
        let remote = self.config.remote_base + (page * PAGE_SIZE) as u64;
        self.pipeline
            .start_read(&[remote], page as u64)
            .map_err(io::Error::other)?;
        self.fetching.insert(page);
        self.stats.fetches.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// Maps a fetched page in, evicting the oldest if the cache is full.
    fn install(&mut self, done: Done) -> io::Result<()> {
        let page = done.user as usize;
        self.fetching.remove(&page);
        let buf = match done.result {
            Ok(Some(buf)) => buf,
            Ok(None) => return Err(io::Error::other("a read returned no page")),
            Err(e) => return Err(io::Error::other(e.to_string())),
        };
        if self.resident.len() >= self.config.cache_pages {
            if let Some(victim) = self.resident.pop_front() {
                self.mapping.evict(victim)?;
                self.is_resident[victim] = false;
                self.stats.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.mapping.fill(&self.uffd, page, buf.page())?;
        self.is_resident[page] = true;
        self.resident.push_back(page);
        Ok(())
    }
}
