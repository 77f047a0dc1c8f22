// A test binary of its own, not a module of tests/integration (issue #27):
// installs a counting `#[global_allocator]` for the whole process.
//! Heap allocations per RPC in steady state (issue #10: "no heap
//! allocation per message"). A counting global allocator sees every
//! allocation the two endpoints make while 16-RPC batches of small echo
//! calls run back and forth; the application hands every delivered buffer
//! back with `Endpoint::recycle`, as a server loop or an RPC library that
//! owns its buffers would. Counting is deterministic (no timing), so the
//! bound is exact, not a threshold on a noisy machine.

// The tests drive a virtual clock; `Instant::now` only picks its origin.
#![allow(clippy::disallowed_methods)]
// A global allocator is an `unsafe impl`; this one only forwards to
// `System` and counts, and lives in this test binary alone.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, Instant};

mod common;
use common::{addr, null_session_endpoint, CLIENT, SERVER};
use smt_proto::{Config, Endpoint, Event, Role};

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_one() {
    // `try_with`: the allocator also runs while thread locals are torn down.
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        }
    });
}

// SAFETY: forwards every call to the system allocator unchanged; counting
// touches only const-initialised thread locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const BATCH: usize = 16;

fn endpoint(port: u16, peer: u16, role: Role) -> Endpoint {
    let config = Config {
        local_port: port,
        ..Config::default()
    };
    null_session_endpoint(config, peer, role)
}

/// Two endpoints, a virtual clock and one datagram buffer, reused.
struct Rig {
    client: Endpoint,
    server: Endpoint,
    now: Instant,
    buf: Vec<u8>,
    request: Vec<u8>,
}

impl Rig {
    fn new(size: usize) -> Self {
        Self {
            client: endpoint(CLIENT, SERVER, Role::Client),
            server: endpoint(SERVER, CLIENT, Role::Server),
            now: Instant::now(),
            buf: vec![0; 65_536],
            request: vec![7; size],
        }
    }

    /// Moves every datagram `from` has ready to the other endpoint.
    fn flush(&mut self, client_to_server: bool) {
        let (from, to, src) = match client_to_server {
            true => (&mut self.client, &mut self.server, addr(CLIENT)),
            false => (&mut self.server, &mut self.client, addr(SERVER)),
        };
        while let Some(t) = from.poll_transmit(self.now, &mut self.buf) {
            to.handle_datagram(self.now, src, &self.buf[..t.len]);
        }
    }

    /// One batch of echo RPCs, start to finish; returns how many
    /// responses arrived.
    fn batch(&mut self) -> usize {
        for _ in 0..BATCH {
            self.client
                .send_request(self.now, addr(SERVER), &self.request)
                .expect("session");
        }
        self.flush(true);
        while let Some(event) = self.server.poll_event() {
            if let Event::Request { rpc, data } = event {
                self.server
                    .send_response(self.now, rpc, &data)
                    .expect("in service");
                self.server.recycle(data);
            }
        }
        self.flush(false);
        let mut done = 0;
        while let Some(event) = self.client.poll_event() {
            if let Event::Response { data, .. } = event {
                done += 1;
                self.client.recycle(data);
            }
        }
        // Let the delayed ACKs and ticks run, so the server frees its RPCs.
        self.now += Duration::from_millis(1);
        for _ in 0..2 {
            self.client.handle_timeout(self.now);
            self.flush(true);
            self.server.handle_timeout(self.now);
            self.flush(false);
        }
        done
    }
}

/// Allocations per RPC over `rounds` batches, after as many to warm up.
fn allocations_per_rpc(size: usize, rounds: usize) -> f64 {
    let mut rig = Rig::new(size);
    for _ in 0..rounds {
        assert_eq!(rig.batch(), BATCH);
    }
    ALLOCATIONS.with(|n| n.set(0));
    COUNTING.with(|on| on.set(true));
    let mut done = 0;
    for _ in 0..rounds {
        done += rig.batch();
    }
    COUNTING.with(|on| on.set(false));
    assert_eq!(done, rounds * BATCH);
    assert_eq!(rig.server.server_rpcs(), 0, "the server freed every RPC");
    ALLOCATIONS.with(Cell::get) as f64 / done as f64
}

#[test]
fn rpcs_allocate_nothing_in_steady_state() {
    // Before buffers, RPC slots and segment lists were reused: 7.6, 7.8
    // and 14.3 allocations per RPC. What may remain is a hash table's
    // occasional growth (its tombstones depend on the per-process hash
    // seed): about one allocation in thousands of RPCs.
    for size in [64, 1024, 4000] {
        let per_rpc = allocations_per_rpc(size, 500);
        println!("{size} B: {per_rpc:.4} allocations per RPC");
        assert!(
            per_rpc < 0.01,
            "{size} B: {per_rpc:.4} heap allocations per RPC in steady state"
        );
    }
}
