// A test binary of its own, not a module of tests/integration (issue #27):
// counts page faults of 256 MiB messages: other tests' allocations and
// frees in the same heap would change which pages are fresh.
//! Handing a large message to the core costs the same whatever its length:
//! the call writes nothing per byte of the message.
//!
//! Why it matters: a threaded driver makes these calls under its engine
//! lock, and while one runs the endpoint neither receives nor answers. A
//! server whose `send_response` zero-filled the wire buffer of a 256 MiB
//! response first (fresh pages, faulted in one by one) stayed deaf for
//! 0.2–2.6 s on a loaded two-core machine; its client, probing for the
//! response and hearing nothing, counted a second of silence and failed
//! the call (`smt`'s `tests/large.rs`, half the CI runs). The wire buffer
//! is now fresh zeroed memory from the allocator, whose pages fault in as
//! records are sealed into them, packet by packet.
//!
//! What is counted is not time but the calling thread's minor page faults
//! (`/proc/thread-self/stat`), which a loaded machine does not change: a
//! buffer written whole faults in every page; one left untouched, none.

// The tests drive a virtual clock; `Instant::now` only picks its origin.
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

use bytes::Bytes;

mod common;
use common::{addr, null_session_endpoint, CLIENT, SERVER};
use smt_proto::{Config, Endpoint, Event, Payload, Role};

/// Above glibc's largest dynamic mmap threshold (32 MiB): the message's
/// buffers are always fresh pages, never recycled heap.
const LEN: usize = 48 << 20;
const PAGE: u64 = 4096;

fn endpoint(port: u16, peer: u16, role: Role) -> Endpoint {
    let config = Config {
        local_port: port,
        ..Config::default()
    };
    null_session_endpoint(config, peer, role)
}

/// Minor page faults of this thread so far; `None` where the kernel does
/// not say (not Linux).
fn minor_faults() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // After the command name (in parentheses, which may hold spaces):
    // state, ppid, pgrp, session, tty_nr, tpgid, flags, minflt.
    let fields = stat.rsplit_once(')')?.1;
    fields.split_whitespace().nth(7)?.parse().ok()
}

/// A message of `LEN` bytes whose pages are all resident already, so
/// only what the core does with it is counted.
fn owned_message() -> Bytes {
    Bytes::from(vec![0x5a; LEN])
}

/// Page faults `f` took on this thread, against the message's page count.
fn faults_of(f: impl FnOnce()) -> Option<(u64, u64)> {
    let before = minor_faults()?;
    f();
    Some((minor_faults()? - before, LEN as u64 / PAGE))
}

#[test]
fn sending_a_large_request_touches_almost_none_of_its_wire_buffer() {
    let mut client = endpoint(CLIENT, SERVER, Role::Client);
    let now = Instant::now();
    let data = owned_message();
    let Some((faults, pages)) = faults_of(|| {
        client
            .send_request(now, addr(SERVER), Payload::Owned(data))
            .expect("session installed, length allowed");
    }) else {
        println!("SKIPPED: no /proc/thread-self/stat to count page faults");
        return;
    };
    println!(
        "send_request of {} MiB: {faults} page faults ({pages} pages)",
        LEN >> 20
    );
    assert!(
        faults < pages / 16,
        "send_request wrote its {} MiB message's wire buffer whole: {faults} of {pages} pages",
        LEN >> 20
    );
}

#[test]
fn answering_with_a_large_response_touches_almost_none_of_its_wire_buffer() {
    let (mut client, mut server) = (
        endpoint(CLIENT, SERVER, Role::Client),
        endpoint(SERVER, CLIENT, Role::Server),
    );
    let now = Instant::now();
    client
        .send_request(now, addr(SERVER), &b"large one, please"[..])
        .expect("session installed");
    let mut buf = vec![0; 65_536];
    while let Some(t) = client.poll_transmit(now, &mut buf) {
        server.handle_datagram(now, addr(CLIENT), &buf[..t.len]);
    }
    let rpc = std::iter::from_fn(|| server.poll_event())
        .find_map(|e| match e {
            Event::Request { rpc, .. } => Some(rpc),
            _ => None,
        })
        .expect("the request arrived whole");
    let data = owned_message();
    let Some((faults, pages)) = faults_of(|| {
        server
            .send_response(now, rpc, Payload::Owned(data))
            .expect("in service, length allowed");
    }) else {
        println!("SKIPPED: no /proc/thread-self/stat to count page faults");
        return;
    };
    println!(
        "send_response of {} MiB: {faults} page faults ({pages} pages)",
        LEN >> 20
    );
    assert!(
        faults < pages / 16,
        "send_response wrote its {} MiB response's wire buffer whole: {faults} of {pages} pages",
        LEN >> 20
    );
}
