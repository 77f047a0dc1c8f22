//! The threaded `Endpoint` on loopback: unloaded RTT by size and closed-loop
//! throughput with C client threads making blocking calls. Uses only the
//! API that has existed since the first release, so the same file measures
//! old and new builds side by side.
//!
//! `cargo run --release -p smt --example threaded` (`taskset -c 0` in front
//! pins everything to one core). Optional arguments pick one point, for
//! profiling: `-- rtt SIZE` or `-- throughput SIZE THREADS`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::{Endpoint, EndpointConfig};

fn main() {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let client = Endpoint::bind(any, EndpointConfig::default()).unwrap();
    let server = Endpoint::bind(any, EndpointConfig::default()).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    let acceptor = server.clone();
    std::thread::spawn(move || {
        while let Ok(mut req) = acceptor.accept() {
            let data = req.take_data();
            let _ = req.respond(data);
        }
    });
    let to = server.local_addr();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |i: usize| args.get(i).map(|a| a.parse().expect("a number"));
    match args.first().map(String::as_str) {
        Some("rtt") => {
            let size = number(1).unwrap_or(64);
            rtt(&client, to, size, if size > 100_000 { 200 } else { 20_000 });
        }
        Some("throughput") => {
            let (size, threads) = (number(1).unwrap_or(64), number(2).unwrap_or(32));
            let rate = throughput(&client, to, size, threads);
            println!("throughput {size:>5} B x{threads:<3}: {rate:>9.0} RPC/s");
            // For per-RPC costs from outside (perf stat, /usr/bin/time).
            eprintln!("calls made: {}", CALLS.load(Ordering::Relaxed));
        }
        _ => all(&client, to),
    }
    client.close();
    server.close();
}

/// Every call made by `throughput`, warm-up included.
static CALLS: AtomicU64 = AtomicU64::new(0);

fn all(client: &Endpoint, to: SocketAddr) {
    for (size, n) in [(64, 20_000), (1024, 20_000), (65536, 2_000), (1 << 20, 200)] {
        rtt(client, to, size, n);
    }
    for size in [64, 1024] {
        for threads in [1, 8, 32] {
            let rate = throughput(client, to, size, threads);
            println!("throughput {size:>5} B x{threads:<3}: {rate:>9.0} RPC/s");
        }
    }
}

/// `n` calls one after the other; prints the median and 99th percentile.
fn rtt(client: &Endpoint, to: SocketAddr, size: usize, n: usize) {
    let msg = vec![7u8; size];
    let mut samples: Vec<Duration> = (0..n)
        .map(|_| {
            let start = Instant::now();
            client.call(to, &msg).unwrap();
            start.elapsed()
        })
        .collect();
    samples.sort();
    let pick = |q: f64| samples[((n - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    println!(
        "rtt {size:>8} B: p50 {:>8.1} µs  p99 {:>8.1} µs",
        pick(0.5),
        pick(0.99)
    );
}

/// `threads` client threads calling back to back for one second.
fn throughput(client: &Endpoint, to: SocketAddr, size: usize, threads: usize) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (client, stop, done) = (client.clone(), stop.clone(), done.clone());
            std::thread::spawn(move || {
                let msg = vec![7u8; size];
                while !stop.load(Ordering::Relaxed) {
                    if client.call(to, &msg).is_ok() {
                        done.fetch_add(1, Ordering::Relaxed);
                        CALLS.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let (start, before) = (Instant::now(), done.load(Ordering::Relaxed));
    std::thread::sleep(Duration::from_secs(1));
    let rate = (done.load(Ordering::Relaxed) - before) as f64 / start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        let _ = w.join();
    }
    rate
}
