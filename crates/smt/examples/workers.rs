//! The worker shape (`smt::workers`): one echo server spreading one
//! client's messages over N worker threads, and a client keeping C calls
//! outstanding. Prints the closed-loop rate.
//!
//! `cargo run --release -p smt --example workers -- SHARDS SIZE OUTSTANDING SECONDS`
//! (defaults: 2 shards, 1024 B, 150 outstanding, 3 s). `taskset -c 0,1` in
//! front keeps the run on two cores.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::workers::{WorkerConfig, WorkerServer};
use smt::{Endpoint, EndpointConfig};

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| {
            a.parse()
                .expect("arguments are numbers: SHARDS SIZE OUTSTANDING SECONDS")
        })
        .collect();
    let arg = |i: usize, default: usize| args.get(i).copied().unwrap_or(default);
    let (shards, size, outstanding) = (arg(0, 2), arg(1, 1024), arg(2, 150));
    let seconds = Duration::from_secs(arg(3, 3) as u64);

    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut config = WorkerConfig::default();
    config.set_shards(shards);
    // The handler runs on the shard that owns the message: echo.
    let server = WorkerServer::bind(any, config, |_peer, request| request).unwrap();
    let client = Endpoint::bind(any, EndpointConfig::default()).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    server.install_session(client.local_addr(), sk).unwrap();
    client.install_session(server.local_addr(), ck).unwrap();

    let to = server.local_addr();
    let request = smt::Bytes::from(vec![7u8; size]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (calls, failed) = rt.block_on(async {
        let end = Instant::now() + seconds;
        let tasks: Vec<_> = (0..outstanding)
            .map(|_| {
                let (c, req) = (client.clone(), request.clone());
                tokio::spawn(async move {
                    let (mut ok, mut failed) = (0u64, 0u64);
                    while Instant::now() < end {
                        match c.call_async(to, &req).await {
                            Ok(r) if r.len() == req.len() => ok += 1,
                            _ => failed += 1,
                        }
                    }
                    (ok, failed)
                })
            })
            .collect();
        let mut sum = (0, 0);
        for t in tasks {
            let (ok, failed) = t.await.unwrap();
            sum = (sum.0 + ok, sum.1 + failed);
        }
        sum
    });
    let stats = server.close();
    let secs = seconds.as_secs_f64();
    let per_shard: Vec<u64> = stats.shards.iter().map(|s| s.requests).collect();
    let resent: u64 = stats
        .shards
        .iter()
        .map(|s| s.counters.packets.retransmitted)
        .sum();
    let asked: u64 = stats
        .shards
        .iter()
        .map(|s| s.counters.packets.resends_sent)
        .sum();
    let client = client.stats().map(|s| s.total).unwrap_or_default();
    println!(
        "{shards} shards, {size} B x{outstanding}: {:.0} rpc/s, {:.2} Gbit/s, {failed} failed; requests per shard {per_shard:?}",
        calls as f64 / secs,
        calls as f64 * size as f64 * 8.0 / secs / 1e9,
    );
    println!(
        "  server: {resent} packets retransmitted, {asked} RESENDs sent; client: {} retransmitted, {} RESENDs; dispatcher {:?}",
        client.packets.retransmitted, client.packets.resends_sent, stats.dispatch
    );
}
