//! How long `stats`, `install_session` and `set_key_resolver`-style calls
//! wait on a busy endpoint: they take the engine's lock, which whoever
//! drives holds for one bounded turn at a time. Async code may call them
//! if that wait is short; this measures it while blocking and async
//! callers keep `size`-byte echo RPCs going.
//!
//! `cargo run --release -p smt --example lock_wait -- [size] [seconds] [callers]`
//! (defaults: 1 MiB, 5 s, 4 blocking callers plus 16 async ones).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::stats::quantile;
use smt::{Bytes, Endpoint, EndpointConfig};

fn main() {
    let mut args = std::env::args().skip(1);
    let size: usize = args.next().map_or(1 << 20, |a| a.parse().expect("size"));
    let seconds: u64 = args.next().map_or(5, |a| a.parse().expect("seconds"));
    let callers: usize = args.next().map_or(4, |a| a.parse().expect("callers"));
    let any: SocketAddr = "127.0.0.1:0".parse().expect("address");
    let server = Endpoint::bind(any, EndpointConfig::default()).expect("bind");
    let client = Endpoint::bind(any, EndpointConfig::default()).expect("bind");
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client
        .install_session(server.local_addr(), ck)
        .expect("keys");
    server
        .install_session(client.local_addr(), sk)
        .expect("keys");
    for _ in 0..2 {
        let s = server.clone();
        std::thread::spawn(move || {
            while let Ok(mut req) = s.accept() {
                let data = req.take_data();
                let _ = req.respond(data);
            }
        });
    }
    let stop = Arc::new(AtomicBool::new(false));
    let to = server.local_addr();
    let message = Bytes::from(vec![7u8; size]);
    let mut load = Vec::new();
    for _ in 0..callers {
        let (c, stop, msg) = (client.clone(), stop.clone(), message.clone());
        load.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = c.call(to, msg.clone());
            }
        }));
    }
    {
        let (c, stop) = (client.clone(), stop.clone());
        load.push(std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let tasks: Vec<_> = (0..16)
                    .map(|_| {
                        let (c, stop) = (c.clone(), stop.clone());
                        tokio::spawn(async move {
                            while !stop.load(Ordering::Relaxed) {
                                let _ = c.call_async(to, &b"small"[..]).await;
                            }
                        })
                    })
                    .collect();
                for t in tasks {
                    let _ = t.await;
                }
            });
        }));
    }
    let nobody: SocketAddr = "127.0.0.1:9".parse().expect("address");
    let mut stats_waits = Vec::new();
    let mut install_waits = Vec::new();
    let end = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < end {
        let t = Instant::now();
        let _ = client.peer_stats(to);
        stats_waits.push(t.elapsed());
        let (keys, _) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
        let t = Instant::now();
        let _ = client.install_session(nobody, keys);
        install_waits.push(t.elapsed());
        std::thread::sleep(Duration::from_micros(500));
    }
    stop.store(true, Ordering::Relaxed);
    let completed = client.stats().map(|s| s.total.rpcs.completed).unwrap_or(0);
    let t = Instant::now();
    client.close();
    let close = t.elapsed();
    server.close();
    for t in load {
        let _ = t.join();
    }
    println!(
        "{size}-byte echo, {callers} blocking + 16 async callers, {seconds} s, {completed} RPCs"
    );
    report("stats", &mut stats_waits);
    report("install_session", &mut install_waits);
    println!("close (graceful, RPCs in flight): {close:?}");
}

fn report(what: &str, waits: &mut [Duration]) {
    waits.sort();
    let at = |q: f64| quantile(waits, q).unwrap_or_default();
    println!(
        "{what:>16}: {} calls, median {:?}, p99 {:?}, p99.9 {:?}, max {:?}",
        waits.len(),
        at(0.5),
        at(0.99),
        at(0.999),
        waits[waits.len() - 1]
    );
}
