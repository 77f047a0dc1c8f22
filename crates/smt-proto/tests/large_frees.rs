// A test binary of its own, not a module of tests/integration (issue #27):
// installs a counting `#[global_allocator]` for the whole process.
//! A large buffer the endpoint is done with is handed to its driver to
//! free, not freed inside the call that finishes with it.
//!
//! Why it matters: a threaded driver makes these calls under its engine
//! lock, and while one runs the endpoint neither receives nor answers.
//! When a client's ACK freed a finished 256 MiB response, the server
//! unmapped its wire buffer and its data inside `handle_datagram`:
//! 57–328 ms (median 198) on a loaded two-core VM, under the lock. With
//! `Endpoint::set_collect_released`, such buffers wait for
//! `Endpoint::take_released`, and the driver frees them after the lock.
//!
//! What is counted is not time but the deallocations of a megabyte or more
//! this thread makes (a counting global allocator): deterministic on any
//! machine.

// The tests drive a virtual clock; `Instant::now` only picks its origin.
#![allow(clippy::disallowed_methods)]
// A global allocator is an `unsafe impl`; this one only forwards to
// `System` and counts, and lives in this test binary alone.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, Instant};

use bytes::Bytes;

mod common;
use common::{addr, null_session_endpoint, CLIENT, SERVER};
use smt_proto::{Config, Endpoint, Event, Payload, Role};

/// Twice the pool's largest class: the message's buffers are never pooled.
const LEN: usize = 4 << 20;
/// Allocations this large are counted (the core's threshold for handing
/// buffers out).
const LARGE: usize = 1 << 20;

struct Counting;

thread_local! {
    /// Large blocks allocated, and given up (freed, or moved by a
    /// `realloc`): for the balance.
    static LARGE_ALLOCS: Cell<u64> = const { Cell::new(0) };
    static LARGE_GONE: Cell<u64> = const { Cell::new(0) };
    /// Large blocks freed: what unmaps pages. A `realloc` moves a block
    /// (`mremap` for a mapped one) rather than freeing it.
    static LARGE_FREES: Cell<u64> = const { Cell::new(0) };
}

fn count(counter: &'static std::thread::LocalKey<Cell<u64>>, size: usize) {
    if size >= LARGE {
        // `try_with`: the allocator also runs while thread locals are torn
        // down.
        let _ = counter.try_with(|n| n.set(n.get() + 1));
    }
}

// SAFETY: forwards every call to the system allocator unchanged; counting
// touches only const-initialised thread locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(&LARGE_ALLOCS, layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(&LARGE_ALLOCS, layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(&LARGE_FREES, layout.size());
        count(&LARGE_GONE, layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(&LARGE_GONE, layout.size());
        count(&LARGE_ALLOCS, new_size);
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn large_allocs() -> u64 {
    LARGE_ALLOCS.with(Cell::get)
}

fn large_frees() -> u64 {
    LARGE_FREES.with(Cell::get)
}

fn large_gone() -> u64 {
    LARGE_GONE.with(Cell::get)
}

fn endpoint(port: u16, peer: u16, role: Role, collect: bool) -> Endpoint {
    let config = Config {
        local_port: port,
        max_message_len: 2 * LEN as u64,
        ..Config::default()
    };
    let mut ep = null_session_endpoint(config, peer, role);
    ep.set_collect_released(collect);
    ep
}

/// A client and a server on a virtual clock, and the large frees their
/// calls made.
struct Rig {
    client: Endpoint,
    server: Endpoint,
    now: Instant,
    buf: Vec<u8>,
    frees_in_calls: u64,
}

impl Rig {
    fn new(collect: bool) -> Self {
        Self {
            client: endpoint(CLIENT, SERVER, Role::Client, collect),
            server: endpoint(SERVER, CLIENT, Role::Server, collect),
            now: Instant::now(),
            buf: vec![0; 65_536],
            frees_in_calls: 0,
        }
    }

    /// Runs `f` (core calls), counting the large frees it makes.
    fn call<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let before = large_frees();
        let out = f(self);
        self.frees_in_calls += large_frees() - before;
        out
    }

    /// Moves datagrams both ways until neither side has any; returns how
    /// many moved.
    fn exchange(&mut self) -> usize {
        let mut moved = 0;
        loop {
            let n = self.call(|r| r.flush(true) + r.flush(false));
            if n == 0 {
                return moved;
            }
            moved += n;
        }
    }

    fn flush(&mut self, client_to_server: bool) -> usize {
        let (from, to, src) = match client_to_server {
            true => (&mut self.client, &mut self.server, addr(CLIENT)),
            false => (&mut self.server, &mut self.client, addr(SERVER)),
        };
        let mut n = 0;
        while let Some(t) = from.poll_transmit(self.now, &mut self.buf) {
            to.handle_datagram(self.now, src, &self.buf[..t.len]);
            n += 1;
        }
        n
    }

    /// Lets a tick pass on both sides (delayed ACKs leave, state is freed).
    fn tick(&mut self) {
        self.now += Duration::from_millis(1);
        let now = self.now;
        self.call(|r| {
            r.client.handle_timeout(now);
            r.server.handle_timeout(now);
        });
        self.exchange();
    }

    /// One echo RPC of `LEN` bytes, the messages handed over as owned
    /// bytes; returns the response, held by the test (freed by it, not
    /// counted against the core).
    fn echo(&mut self) -> Vec<u8> {
        let now = self.now;
        let request = Bytes::from(vec![0x5a; LEN]);
        self.call(|r| {
            r.client
                .send_request(now, addr(SERVER), Payload::Owned(request))
        })
        .expect("session installed, length allowed");
        self.exchange();
        let (rpc, data) = self
            .call(|r| r.server.poll_event())
            .and_then(|e| match e {
                Event::Request { rpc, data } => Some((rpc, data)),
                _ => None,
            })
            .expect("the request arrived");
        // The echo hands the request's buffer back as the response: the
        // server owns it (shared bytes) until the client's ACK.
        let response = Payload::Owned(Bytes::from(data));
        self.call(|r| r.server.send_response(now, rpc, response))
            .expect("in service");
        self.exchange();
        let data = self
            .call(|r| r.client.poll_event())
            .and_then(|e| match e {
                Event::Response { data, .. } => Some(data),
                _ => None,
            })
            .expect("the response arrived");
        for _ in 0..3 {
            self.tick();
        }
        assert_eq!(self.server.server_rpcs(), 0, "the ACK freed the request");
        assert_eq!(self.client.client_rpcs(), 0);
        data
    }
}

#[test]
fn a_collecting_endpoint_hands_its_large_buffers_out_instead_of_freeing_them() {
    let mut rig = Rig::new(true);
    let response = rig.echo();
    assert_eq!(response.len(), LEN);
    assert_eq!(
        rig.frees_in_calls, 0,
        "the core freed a large buffer inside a call"
    );
    // The client: the request's wire buffer and its data; the server: the
    // response's wire buffer and its data (the request's buffer, echoed).
    let (client, server) = (rig.client.take_released(), rig.server.take_released());
    println!(
        "released: client {} buffers ({} B), server {} buffers ({} B)",
        client.len(),
        client.bytes(),
        server.len(),
        server.bytes()
    );
    assert_eq!((client.len(), server.len()), (2, 2));
    assert!(client.bytes() >= 2 * LEN && server.bytes() >= 2 * LEN);
    let before = large_frees();
    drop((client, server));
    assert_eq!(large_frees() - before, 4, "dropping them frees them");
    assert!(rig.client.take_released().is_empty(), "taken once");
}

#[test]
fn by_default_the_core_frees_them_where_it_is_done_with_them() {
    let mut rig = Rig::new(false);
    let _response = rig.echo();
    assert_eq!(rig.frees_in_calls, 4, "the messages' buffers, in the calls");
    assert!(rig.client.take_released().is_empty());
    assert!(rig.server.take_released().is_empty());
}

#[test]
fn nothing_leaks_when_the_driver_never_takes_them() {
    let (allocs, gone) = (large_allocs(), large_gone());
    let mut rig = Rig::new(true);
    for _ in 0..3 {
        drop(rig.echo());
    }
    assert_eq!(rig.frees_in_calls, 0);
    // Never taken: they wait (the bound, far above these 24 MiB, frees
    // them in a later call: `buffers.rs`'s tests), and go with the
    // endpoint.
    drop(rig);
    assert_eq!(
        large_allocs() - allocs,
        large_gone() - gone,
        "a large allocation was never freed"
    );
}
