//! Above capacity: a server that takes 1 ms per request (one application
//! thread, so 1,000 requests/s at most) offered twice that by an open-loop
//! client, once with the default bound on unanswered requests and once
//! with a small one. With the bound, the excess fails at once with
//! `RpcError::Overloaded` and the calls that are served keep a bounded
//! latency; without it, every call waits behind a queue that grows for
//! the whole run.
//!
//! `cargo run --release -p smt --example overload -- [seconds] [bound]`

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::{Endpoint, EndpointConfig, Error, RpcError};

/// Time the server's application spends on each request.
const SERVICE: Duration = Duration::from_millis(1);
/// Offered load, requests per second (twice the server's capacity).
const OFFERED: u64 = 2_000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seconds: f64 = args.first().map_or(2.0, |s| s.parse().expect("seconds"));
    let bound: usize = args.get(1).map_or(32, |s| s.parse().expect("a bound"));
    let default = smt::ProtocolConfig::default().max_pending_requests();
    println!(
        "server: one thread, {} ms per request (capacity {} req/s); offered {OFFERED} req/s for {seconds} s",
        SERVICE.as_millis(),
        1000 / SERVICE.as_millis()
    );
    for max_pending in [default, bound] {
        run(max_pending, Duration::from_secs_f64(seconds));
    }
}

fn run(max_pending: usize, time: Duration) {
    let any: SocketAddr = "127.0.0.1:0".parse().expect("literal");
    let mut cfg = EndpointConfig::default();
    cfg.protocol_mut().set_max_pending_requests(max_pending);
    // Calls queued behind a long backlog must not time out: this shows
    // queueing, not the abort timer.
    cfg.protocol_mut()
        .set_rpc_idle_timeout(Duration::from_secs(60));
    let server = Endpoint::bind(any, cfg.clone()).expect("bind");
    let client = Endpoint::bind(any, cfg).expect("bind");
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client
        .install_session(server.local_addr(), ck)
        .expect("keys");
    server
        .install_session(client.local_addr(), sk)
        .expect("keys");
    let app = server.clone();
    std::thread::spawn(move || {
        while let Ok(mut req) = app.accept() {
            std::thread::sleep(SERVICE);
            let data = req.take_data();
            let _ = req.respond(data);
        }
    });
    let to = server.local_addr();
    let served = Arc::new(Mutex::new(Vec::new()));
    let shed = Arc::new(Mutex::new(0u64));
    let start = Instant::now();
    let gap = Duration::from_secs(1) / OFFERED as u32;
    let mut callers = Vec::new();
    let mut next = start;
    while next < start + time {
        while Instant::now() < next {
            std::thread::sleep(Duration::from_micros(50));
        }
        let (c, served, shed) = (client.clone(), served.clone(), shed.clone());
        let due = next;
        callers.push(std::thread::spawn(move || match c.call(to, &[1u8; 64]) {
            Ok(_) => served.lock().expect("lock").push(due.elapsed()),
            Err(Error::Rpc(RpcError::Overloaded)) => *shed.lock().expect("lock") += 1,
            Err(e) => eprintln!("call failed: {e}"),
        }));
        next += gap;
    }
    let offered = callers.len();
    for c in callers {
        let _ = c.join();
    }
    let mut lat = served.lock().expect("lock").clone();
    lat.sort();
    let pick = |q: f64| {
        lat.get(((lat.len().max(1) - 1) as f64 * q) as usize)
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    println!(
        "max_pending_requests {max_pending:>5}: {offered} offered, {} served (p50 {:.0} ms, p99 {:.0} ms), {} shed with Overloaded, all done after {:.1} s",
        lat.len(),
        pick(0.5),
        pick(0.99),
        shed.lock().expect("lock"),
        start.elapsed().as_secs_f64()
    );
    client.close();
    server.close();
}
