//! Unloaded round trip on loopback: a bare UDP ping-pong, the caller-driven
//! `LocalEndpoint` and the threaded `Endpoint`, side by side.
//!
//! `cargo run --release -p smt --example rtt -- [size] [iterations]`
//! (`taskset -c 0` in front pins everything to one core). The full
//! comparison with TCP, TLS and QUIC peers is `smt-bench`.
//!
//! Environment: `RTT_MTU` (link MTU, default 1500: e.g. 9000 for jumbo
//! frames, 65536 for loopback's own), `RTT_UNSCHEDULED` (bytes sent before
//! a grant), `RTT_OUTSTANDING` (the throughput line's levels, `1,8,32`),
//! `RTT_STATS` (print the client's counters).

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::stats::quantile;
use smt::{Endpoint, EndpointConfig, LocalEndpoint, LocalEvent};

fn main() {
    // An optional third argument runs one line only: udp, local, busy, threaded.
    let only = std::env::args().nth(3);
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .take(2)
        .map(|a| a.parse().expect("size and iterations are numbers"))
        .collect();
    let run = |name: &str| only.as_deref().is_none_or(|o| o == name);
    let size = args.first().copied().unwrap_or(64);
    let iterations = args.get(1).copied().unwrap_or(20_000);
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    println!("{size} B, {iterations} round trips each");
    if run("udp") {
        report("udp ping-pong", udp(any, size, iterations));
    }
    if run("local") {
        report("smt LocalEndpoint", local(any, size, iterations, false));
    }
    if run("busy") {
        report("smt LocalEndpoint busy", local(any, size, iterations, true));
    }
    if run("threaded") {
        report("smt Endpoint", threaded(any, size, iterations));
    }
    if run("throughput") {
        let levels: Vec<usize> = std::env::var("RTT_OUTSTANDING")
            .map(|v| v.split(',').map(|x| x.parse().expect("a number")).collect())
            .unwrap_or_else(|_| vec![1, 8, 32, 150]);
        for outstanding in levels {
            let rate = throughput(any, size, iterations, outstanding);
            println!(
                "smt LocalEndpoint throughput, {outstanding:>3} outstanding: {rate:>9.0} RPC/s"
            );
        }
    }
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let pick = |q: f64| quantile(&samples, q).unwrap_or_default().as_secs_f64() * 1e6;
    println!(
        "{name:<24} p50 {:>7.1} µs  p99 {:>7.1} µs",
        pick(0.5),
        pick(0.99)
    );
}

fn udp(any: SocketAddr, size: usize, n: usize) -> Vec<Duration> {
    let server = UdpSocket::bind(any).unwrap();
    let client = UdpSocket::bind(any).unwrap();
    let addr = server.local_addr().unwrap();
    let echo = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        for _ in 0..n {
            let (len, from) = server.recv_from(&mut buf).unwrap();
            server.send_to(&buf[..len], from).unwrap();
        }
    });
    let msg = vec![7u8; size.min(smt_udp::MAX_GSO_PAYLOAD)];
    let mut buf = vec![0u8; 65536];
    let samples = (0..n)
        .map(|_| {
            let start = Instant::now();
            client.send_to(&msg, addr).unwrap();
            client.recv_from(&mut buf).unwrap();
            start.elapsed()
        })
        .collect();
    echo.join().unwrap();
    samples
}

/// A client and an echo server thread that answers `n` requests, both
/// `LocalEndpoint`s with fresh AES-128-GCM keys.
fn local_echo_pair(
    any: SocketAddr,
    config: EndpointConfig,
    n: usize,
) -> (LocalEndpoint, SocketAddr, std::thread::JoinHandle<()>) {
    let mut client = LocalEndpoint::bind(any, config.clone()).unwrap();
    let mut server = LocalEndpoint::bind(any, config).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    let addr = server.local_addr();
    let echo = std::thread::spawn(move || {
        let mut served = 0;
        while served < n {
            if let Some(LocalEvent::Request { request, data }) = server.poll(None).unwrap() {
                server.respond(request, data).unwrap();
                served += 1;
            }
        }
        // The last responses' ACKs.
        let _ = server.poll(Some(Duration::from_millis(20)));
    });
    (client, addr, echo)
}

/// Waits for the outcome of one call: true for a response, false (after
/// saying why) for a failure.
fn next_outcome(client: &mut LocalEndpoint) -> bool {
    loop {
        match client.poll(None).unwrap() {
            Some(LocalEvent::Response { .. }) => return true,
            Some(LocalEvent::Failed { error, .. }) => {
                eprintln!("call failed: {error}");
                return false;
            }
            _ => {}
        }
    }
}

/// The endpoints' configuration, with the environment's knobs applied.
fn config() -> EndpointConfig {
    let mut config = EndpointConfig::default();
    if let Ok(v) = std::env::var("RTT_MTU") {
        config.set_mtu(Some(v.parse().expect("RTT_MTU is a byte count")));
    }
    if let Ok(v) = std::env::var("RTT_UNSCHEDULED") {
        config
            .protocol_mut()
            .set_unscheduled_bytes(v.parse().expect("a byte count"));
    }
    config
}

fn local(any: SocketAddr, size: usize, n: usize, busy_poll: bool) -> Vec<Duration> {
    let mut config = config();
    config.set_busy_poll(busy_poll);
    let (mut client, addr, echo) = local_echo_pair(any, config, n);
    // Shared, as an application holding its message in `Bytes` would:
    // the endpoint seals from it without a copy.
    let msg = smt::Bytes::from(vec![7u8; size]);
    let samples = (0..n)
        .map(|_| {
            let start = Instant::now();
            client.call(addr, &msg).unwrap();
            next_outcome(&mut client);
            start.elapsed()
        })
        .collect();
    echo.join().unwrap();
    samples
}

/// Closed loop: `outstanding` calls in flight, a new one as each completes.
fn throughput(any: SocketAddr, size: usize, n: usize, outstanding: usize) -> f64 {
    let (mut client, addr, echo) = local_echo_pair(any, config(), n);
    // Shared, as an application holding its message in `Bytes` would:
    // the endpoint seals from it without a copy.
    let msg = smt::Bytes::from(vec![7u8; size]);
    let start = Instant::now();
    let (mut sent, mut done) = (0, 0);
    while done < n {
        while sent < n && sent - done < outstanding {
            client.call(addr, &msg).unwrap();
            sent += 1;
        }
        next_outcome(&mut client);
        done += 1;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    let _ = client.poll(Some(Duration::from_millis(5)));
    if std::env::var_os("RTT_STATS").is_some() {
        eprintln!("client {:?}", client.stats().total);
    }
    echo.join().unwrap();
    rate
}

fn threaded(any: SocketAddr, size: usize, n: usize) -> Vec<Duration> {
    let client = Endpoint::bind(any, config()).unwrap();
    let server = Endpoint::bind(any, config()).unwrap();
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
    // Shared, as an application holding its message in `Bytes` would:
    // the endpoint seals from it without a copy.
    let msg = smt::Bytes::from(vec![7u8; size]);
    let samples = (0..n)
        .map(|_| {
            let start = Instant::now();
            client.call(server.local_addr(), &msg).unwrap();
            start.elapsed()
        })
        .collect();
    server.close();
    client.close();
    samples
}
