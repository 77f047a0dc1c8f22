// A test binary of its own: installs a counting `#[global_allocator]` for
// the whole process.
//! Heap allocations per call in steady state, through the engine: two
//! `LocalEndpoint`s on loopback, one thread, small echo calls one after
//! another (smt-proto's `allocations.rs` counts the core alone). A counting
//! global allocator sees what the calling thread allocates between the
//! warm-up and the end; the kernel's work is not counted and nothing here
//! depends on timing but how often a timer happens to fire, so the bound
//! has little slack.
//!
//! What remains per round trip is each delivered message's own buffer (the
//! request at the server, the response at the client): the application
//! owns it as `Bytes`, and a `Bytes` it drops cannot come back.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::{EndpointConfig, LocalEndpoint, LocalEvent};

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

const TICK: Option<Duration> = Some(Duration::from_secs(5));

/// A client and a server sharing fresh session keys. The protocol's tick
/// is long (200 ms), so that its periodic work (the core's tick gathers
/// the RPCs it looks at in fresh vectors) runs a few times at most while
/// allocations are counted, however slow the machine: what is counted is
/// the work per call.
fn pair() -> (LocalEndpoint, LocalEndpoint) {
    let any = "127.0.0.1:0".parse().unwrap();
    let mut config = EndpointConfig::default();
    config
        .protocol_mut()
        .set_tick(Duration::from_millis(200))
        .set_handshake_timeout(Duration::from_secs(1));
    let mut server = LocalEndpoint::bind(any, config.clone()).unwrap();
    let mut client = LocalEndpoint::bind(any, config).unwrap();
    let (client_keys, server_keys) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client
        .install_session(server.local_addr(), client_keys)
        .unwrap();
    server
        .install_session(client.local_addr(), server_keys)
        .unwrap();
    (client, server)
}

/// One echo call, start to finish.
fn round_trip(client: &mut LocalEndpoint, server: &mut LocalEndpoint, request: &[u8]) {
    let call = client.call(server.local_addr(), request).unwrap();
    client.flush().unwrap();
    loop {
        if let Some(LocalEvent::Request { request, data }) = server.poll(TICK).unwrap() {
            server.respond(request, data).unwrap();
            server.flush().unwrap();
            break;
        }
    }
    loop {
        match client.poll(TICK).unwrap() {
            Some(LocalEvent::Response { call: done, data }) if done == call => {
                assert_eq!(data.len(), request.len());
                return;
            }
            Some(LocalEvent::Failed { error, .. }) => panic!("call failed: {error}"),
            _ => {}
        }
    }
}

/// Allocations per round trip of `size`-byte calls, after a warm-up.
fn allocations_per_round_trip(size: usize, rounds: usize) -> f64 {
    let (mut client, mut server) = pair();
    let request = vec![7; size];
    for _ in 0..rounds {
        round_trip(&mut client, &mut server, &request);
    }
    ALLOCATIONS.with(|n| n.set(0));
    COUNTING.with(|on| on.set(true));
    for _ in 0..rounds {
        round_trip(&mut client, &mut server, &request);
    }
    COUNTING.with(|on| on.set(false));
    ALLOCATIONS.with(Cell::get) as f64 / rounds as f64
}

#[test]
fn a_call_allocates_only_its_delivered_messages() {
    for size in [64, 1024] {
        let per_round_trip = allocations_per_round_trip(size, 1000);
        println!("{size} B: {per_round_trip:.3} allocations per round trip");
        assert!(
            per_round_trip < 2.1,
            "{size} B: {per_round_trip:.3} heap allocations per round trip in steady state \
             (2 expected: the request and the response delivered)"
        );
    }
}
