//! The workloads of Yoon & Moon (CoNEXT 2025) § 5.2, on a [`RemoteRegion`]: the random
//! array indirection microbenchmark and a key-value store (50-byte keys,
//! 1 KiB values, GET and SCAN), and the open-loop load that drives them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use smt_pagecrypt::{Page, PAGE_SIZE};

use crate::paging::RemoteRegion;

/// The seeded generator for contents and arrivals: the simulator's
/// SplitMix64, re-exported so workloads and their callers share one.
pub use smt_proto::sim::SplitMix64;

/// An array of `u64` indices filling the region; a request starts at a
/// random entry and follows `depth` entries (each a random page, so each
/// hop may fault).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArrayIndirection {
    /// `u64` entries in the array (8 per 64 bytes of the region).
    pub entries: u64,
    /// Entries one request follows.
    pub depth: usize,
    /// Seed of the array's contents.
    pub seed: u64,
}

impl ArrayIndirection {
    /// An array filling `pages` pages.
    pub fn new(pages: usize, depth: usize, seed: u64) -> Self {
        Self {
            entries: (pages * PAGE_SIZE / 8) as u64,
            depth,
            seed,
        }
    }

    /// Entry `i`: where it points.
    pub fn entry(&self, i: u64) -> u64 {
        // One SplitMix64 step is a good 64-bit hash of (seed, i).
        let hash = SplitMix64::new(self.seed ^ i.wrapping_mul(0x2545_f491_4f6c_dd1d)).next_u64();
        ((u128::from(hash) * u128::from(self.entries)) >> 64) as u64
    }

    /// Fills page `index` of the array.
    pub fn fill(&self, index: usize, page: &mut Page) {
        for (k, slot) in page.chunks_mut(8).enumerate() {
            let i = (index * PAGE_SIZE / 8 + k) as u64;
            slot.copy_from_slice(&self.entry(i).to_le_bytes());
        }
    }

    /// One request through the region: the entry reached after `depth`
    /// hops from `start`.
    pub fn run(&self, region: &RemoteRegion, start: u64) -> u64 {
        (0..self.depth).fold(start % self.entries, |i, _| region.u64_at(i as usize))
    }

    /// The same request computed from the generator (for tests).
    pub fn expected(&self, start: u64) -> u64 {
        (0..self.depth).fold(start % self.entries, |i, _| self.entry(i))
    }
}

/// Bytes of a key.
pub const KEY_LEN: usize = 50;
/// Bytes of a value.
pub const VALUE_LEN: usize = 1024;
/// Bytes of a record slot: key, value, padding to 8 bytes.
pub const RECORD_LEN: usize = 1080;
/// Records a SCAN reads.
pub const SCAN_LEN: usize = 100;

/// A read-only key-value store laid out in a region: a header page, an
/// open-addressing hash index of `u32` record numbers (FNV-1a of the key,
/// linear probing), and records sorted by key (so SCAN reads neighbours).
/// Everything a GET touches is in remote memory, as RocksDB's blocks are
/// in Yoon & Moon's run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvLayout {
    /// Records in the store.
    pub records: usize,
    /// Slots of the hash index (a power of two, at least twice `records`).
    pub index_slots: usize,
    /// Seed of the values' contents.
    pub seed: u64,
}

impl KvLayout {
    /// A store of `records` records; its size in pages is
    /// [`KvLayout::pages`].
    pub fn new(records: usize, seed: u64) -> Self {
        Self {
            records,
            index_slots: (records * 2).next_power_of_two(),
            seed,
        }
    }

    /// Records that fit in `pages` pages with their index.
    pub fn fitting(pages: usize, seed: u64) -> Self {
        let mut n = pages * PAGE_SIZE / (RECORD_LEN + 16);
        while n > 0 && Self::new(n, seed).pages() > pages {
            n -= n / 64 + 1;
        }
        Self::new(n, seed)
    }

    fn index_at(&self) -> usize {
        PAGE_SIZE
    }

    fn records_at(&self) -> usize {
        (self.index_at() + self.index_slots * 4).next_multiple_of(PAGE_SIZE)
    }

    /// Pages the store needs.
    pub fn pages(&self) -> usize {
        (self.records_at() + self.records * RECORD_LEN).div_ceil(PAGE_SIZE)
    }

    /// Record `r`'s key: its number in 50 decimal digits (sorted order is
    /// numeric order).
    pub fn key(&self, r: usize) -> [u8; KEY_LEN] {
        let mut k = [0u8; KEY_LEN];
        k.copy_from_slice(format!("{r:050}").as_bytes());
        k
    }

    /// Record `r`'s value.
    pub fn value(&self, r: usize) -> [u8; VALUE_LEN] {
        let mut v = [0u8; VALUE_LEN];
        let mut g = SplitMix64::new(self.seed ^ (r as u64).wrapping_mul(0x9e37_79b9));
        for c in v.chunks_mut(8) {
            c.copy_from_slice(&g.next_u64().to_le_bytes());
        }
        v
    }

    /// The whole store's bytes (built once, then written page by page).
    pub fn build(&self) -> Vec<u8> {
        let mut b = vec![0u8; self.pages() * PAGE_SIZE];
        b[..8].copy_from_slice(b"SMTKV001");
        b[8..16].copy_from_slice(&(self.records as u64).to_le_bytes());
        for r in 0..self.records {
            let key = self.key(r);
            let mut slot = self.home(&key);
            while read_u32(&b, self.index_at() + slot * 4) != 0 {
                slot = (slot + 1) & (self.index_slots - 1);
            }
            let at = self.index_at() + slot * 4;
            b[at..at + 4].copy_from_slice(&(r as u32 + 1).to_le_bytes());
            let rec = self.records_at() + r * RECORD_LEN;
            b[rec..rec + KEY_LEN].copy_from_slice(&key);
            b[rec + KEY_LEN..rec + KEY_LEN + VALUE_LEN].copy_from_slice(&self.value(r));
        }
        b
    }

    fn home(&self, key: &[u8]) -> usize {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &x in key {
            h = (h ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        (h as usize) & (self.index_slots - 1)
    }

    /// GET: the record number of `key` and its value copied into `out`.
    pub fn get(&self, mem: &[u8], key: &[u8; KEY_LEN], out: &mut [u8; VALUE_LEN]) -> Option<usize> {
        let r = self.find(mem, key)?;
        let rec = self.records_at() + r * RECORD_LEN;
        out.copy_from_slice(&mem[rec + KEY_LEN..rec + KEY_LEN + VALUE_LEN]);
        Some(r)
    }

    /// SCAN: up to `n` records from `key` on, in key order; returns how
    /// many, and folds their values' first bytes into a checksum.
    pub fn scan(&self, mem: &[u8], key: &[u8; KEY_LEN], n: usize) -> (usize, u64) {
        let Some(first) = self.find(mem, key) else {
            return (0, 0);
        };
        let last = (first + n).min(self.records);
        let mut sum = 0u64;
        for r in first..last {
            let rec = self.records_at() + r * RECORD_LEN;
            sum = sum
                .wrapping_mul(31)
                .wrapping_add(u64::from(mem[rec + KEY_LEN]));
        }
        (last - first, sum)
    }

    fn find(&self, mem: &[u8], key: &[u8; KEY_LEN]) -> Option<usize> {
        let mut slot = self.home(key);
        loop {
            let r = read_u32(mem, self.index_at() + slot * 4) as usize;
            if r == 0 || r > self.records {
                return None;
            }
            let rec = self.records_at() + (r - 1) * RECORD_LEN;
            if &mem[rec..rec + KEY_LEN] == key {
                return Some(r - 1);
            }
            slot = (slot + 1) & (self.index_slots - 1);
        }
    }
}

fn read_u32(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

/// An open-loop load: Poisson arrivals at `rate`, served by `workers`
/// threads from one FIFO (a worker takes the next request, waits for its
/// arrival time if early, runs it). Latency runs from the arrival time,
/// so queueing counts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoadConfig {
    /// Requests per second offered.
    pub rate: f64,
    /// Requests in the run, warm-up included.
    pub requests: usize,
    /// Leading requests left out of the statistics.
    pub warmup: usize,
    /// Threads serving the queue.
    pub workers: usize,
    /// Seed of the arrival times and request arguments.
    pub seed: u64,
}

/// What a load run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadResult {
    /// Latencies of the measured requests, sorted, in nanoseconds.
    pub latencies_ns: Vec<u64>,
    /// Requests per second completed over the measured part.
    pub achieved: f64,
}

impl LoadResult {
    /// The `q` quantile (0..=1) in microseconds, by nearest rank
    /// ([`smt::stats::quantile`]); NaN for no samples.
    pub fn quantile_us(&self, q: f64) -> f64 {
        smt::stats::quantile(&self.latencies_ns, q).map_or(f64::NAN, |ns| ns as f64 / 1e3)
    }
}

/// Runs `op(i)` for requests `0..requests` as an open-loop load; `op`
/// returns whether the request counts in the latency statistics (the
/// key-value runs report GET latency only).
pub fn run_open_loop(config: LoadConfig, op: impl Fn(usize) -> bool + Sync) -> LoadResult {
    let mut g = SplitMix64::new(config.seed);
    let mut t = 0.0f64;
    let arrivals: Vec<Duration> = (0..config.requests)
        .map(|_| {
            t += g.exponential(1.0 / config.rate);
            Duration::from_secs_f64(t)
        })
        .collect();
    let next = AtomicUsize::new(0);
    let samples = Mutex::new(Vec::with_capacity(config.requests));
    let start = Instant::now() + Duration::from_millis(5);
    std::thread::scope(|s| {
        for _ in 0..config.workers.max(1) {
            s.spawn(|| {
                crate::paging::tight_timer_slack();
                let mut mine = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&at) = arrivals.get(i) else { break };
                    let due = start + at;
                    let now = Instant::now();
                    if due > now {
                        std::thread::sleep(due - now);
                    }
                    let counts = op(i);
                    let done = Instant::now();
                    if counts && i >= config.warmup {
                        mine.push((done.saturating_duration_since(due).as_nanos() as u64, done));
                    }
                }
                samples
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .extend(mine);
            });
        }
    });
    let samples = samples
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    summarize(&config, &arrivals, start, samples)
}

fn summarize(
    config: &LoadConfig,
    arrivals: &[Duration],
    start: Instant,
    samples: Vec<(u64, Instant)>,
) -> LoadResult {
    let first = arrivals.get(config.warmup).map_or(start, |a| start + *a);
    let last = samples.iter().map(|s| s.1).max().unwrap_or(first);
    let measured = config.requests.saturating_sub(config.warmup) as f64;
    let span = last.saturating_duration_since(first).as_secs_f64();
    let mut latencies_ns: Vec<u64> = samples.into_iter().map(|s| s.0).collect();
    latencies_ns.sort_unstable();
    LoadResult {
        latencies_ns,
        achieved: if span > 0.0 { measured / span } else { 0.0 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kv_layout_finds_every_key_and_scans_in_order() {
        let kv = KvLayout::new(300, 7);
        let mem = kv.build();
        let mut v = [0u8; VALUE_LEN];
        for r in [0, 1, 150, 299] {
            assert_eq!(kv.get(&mem, &kv.key(r), &mut v), Some(r));
            assert_eq!(v, kv.value(r));
        }
        assert_eq!(kv.get(&mem, &[b'x'; KEY_LEN], &mut v), None);
        assert_eq!(kv.scan(&mem, &kv.key(250), SCAN_LEN).0, 50);
        assert_eq!(kv.scan(&mem, &kv.key(10), SCAN_LEN).0, 100);
        let fit = KvLayout::fitting(64, 1);
        assert!(fit.pages() <= 64 && fit.records > 150, "{fit:?}");
    }

    #[test]
    fn array_entries_stay_in_range() {
        let a = ArrayIndirection::new(4, 8, 3);
        assert_eq!(a.entries, 2048);
        assert!((0..5000).all(|i| a.entry(i) < a.entries));
    }

    #[test]
    fn open_loop_runs_every_request_once() {
        let seen = Mutex::new(Vec::new());
        let r = run_open_loop(
            LoadConfig {
                rate: 50_000.0,
                requests: 200,
                warmup: 20,
                workers: 3,
                seed: 1,
            },
            |i| {
                seen.lock().unwrap().push(i);
                i % 2 == 0
            },
        );
        let mut seen = seen.into_inner().unwrap();
        seen.sort_unstable();
        assert_eq!(seen, (0..200).collect::<Vec<_>>());
        assert_eq!(r.latencies_ns.len(), 90);
        assert!(r.quantile_us(0.5) >= 0.0);
    }
}
