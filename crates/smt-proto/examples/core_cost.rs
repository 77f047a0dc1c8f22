//! CPU cost of the protocol core alone: a client and a server endpoint in
//! one thread, AES-128-GCM sessions, batches of echo RPCs handed from one
//! to the other in memory (no sockets, no clock reads: a virtual clock),
//! delivered buffers handed back with `Endpoint::recycle`. Prints ns per
//! RPC; run it under `valgrind --tool=callgrind` for instruction counts
//! that do not depend on a noisy machine (subtract a short run from a long
//! one to drop start-up).
//!
//! ```sh
//! cargo run --release -p smt-proto --example core_cost -- 64 100000 150
//! ```

// A benchmark: `Instant::now` measures it; the endpoints get a virtual clock.
#![allow(clippy::disallowed_methods)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use smt_crypto::AeadAlgorithm;
use smt_proto::{Config, Endpoint, Event, SessionKeys};

const CLIENT: u16 = 40_000;
const SERVER: u16 = 4_000;

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn endpoint(port: u16, peer: u16, keys: SessionKeys) -> Endpoint {
    let config = Config {
        local_port: port,
        ..Config::default()
    };
    let mut ep = Endpoint::new(config).expect("valid config");
    ep.install_session(addr(peer), keys).expect("distinct keys");
    ep
}

fn arg(n: usize, default: usize) -> usize {
    std::env::args()
        .nth(n)
        .map(|a| a.parse().expect("a number"))
        .unwrap_or(default)
}

fn main() {
    let (size, rpcs, batch) = (arg(1, 64), arg(2, 100_000), arg(3, 150).max(1));
    let (c, s) = smt_relay::aes_session(AeadAlgorithm::Aes128Gcm, 7);
    let mut client = endpoint(CLIENT, SERVER, c);
    let mut server = endpoint(SERVER, CLIENT, s);
    let mut now = Instant::now();
    let mut buf = vec![0u8; 65_536];
    let request = vec![7u8; size];
    let started = Instant::now();
    let mut done = 0;
    while done < rpcs {
        for _ in 0..batch {
            client
                .send_request(now, addr(SERVER), &request)
                .expect("session");
        }
        while let Some(t) = client.poll_transmit(now, &mut buf) {
            server.handle_datagram(now, addr(CLIENT), &buf[..t.len]);
        }
        while let Some(event) = server.poll_event() {
            if let Event::Request { rpc, data } = event {
                server.send_response(now, rpc, &data).expect("in service");
                server.recycle(data);
            }
        }
        while let Some(t) = server.poll_transmit(now, &mut buf) {
            client.handle_datagram(now, addr(SERVER), &buf[..t.len]);
        }
        while let Some(event) = client.poll_event() {
            if let Event::Response { data, .. } = event {
                done += 1;
                client.recycle(data);
            }
        }
        now += Duration::from_millis(1);
        client.handle_timeout(now);
        while let Some(t) = client.poll_transmit(now, &mut buf) {
            server.handle_datagram(now, addr(CLIENT), &buf[..t.len]);
        }
        server.handle_timeout(now);
    }
    let elapsed = started.elapsed();
    if std::env::var_os("CORE_COST_STATS").is_some() {
        eprintln!("client {:#?}\nserver {:#?}", client.stats(), server.stats());
    }
    println!(
        "{size} B x {batch} per batch: {done} RPCs, {:.0} ns per RPC (both sides, one thread)",
        elapsed.as_nanos() as f64 / done as f64
    );
}
