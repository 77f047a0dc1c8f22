//! Bursts wait for the server's credit instead of failing (issue #24,
//! item 3): with default settings, 10,000 concurrent calls to a healthy
//! server on loopback all complete (the client allows 16,384 outstanding
//! calls, the server holds 4,096 requests and 1,024 partial ones per
//! peer: the client keeps within the credit the server grants). And the
//! opt-in retry of `Overloaded`. No timing thresholds: deadlines are
//! generous, the figures are printed.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::{CallOptions, Endpoint, EndpointConfig, Error, LocalEndpoint, LocalEvent, RpcError};

fn pair(client_cfg: EndpointConfig, server_cfg: EndpointConfig) -> (Endpoint, Endpoint) {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = Endpoint::bind(any, server_cfg).expect("bind");
    let client = Endpoint::bind(any, client_cfg).expect("bind");
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    (client, server)
}

/// Echo servers on `threads` threads, each sleeping `delay` per request.
fn serve(server: &Endpoint, threads: usize, delay: Duration) {
    for _ in 0..threads {
        let s = server.clone();
        std::thread::spawn(move || {
            while let Ok(req) = s.accept() {
                if !delay.is_zero() {
                    std::thread::sleep(delay);
                }
                let echo = req.data().to_vec();
                let _ = req.respond(&echo);
            }
        });
    }
}

/// Fires `n` calls at once from tokio tasks; returns the failures by kind.
fn burst(client: &Endpoint, to: SocketAddr, n: usize, options: CallOptions) -> Vec<Error> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let tasks: Vec<_> = (0..n)
            .map(|i| {
                let c = client.clone();
                tokio::spawn(async move {
                    let msg = format!("call {i}");
                    match c.call_async_with(to, msg.as_bytes(), options).await {
                        Ok(reply) if reply == msg.as_bytes() => None,
                        Ok(_) => panic!("call {i}: wrong reply"),
                        Err(e) => Some(e),
                    }
                })
            })
            .collect();
        let mut failures = Vec::new();
        for t in tasks {
            if let Some(e) = t.await.unwrap() {
                failures.push(e);
            }
        }
        failures
    })
}

#[test]
fn a_burst_of_10000_calls_with_default_settings_all_complete() {
    let (client, server) = pair(EndpointConfig::default(), EndpointConfig::default());
    serve(&server, 2, Duration::ZERO);
    let to = server.local_addr();
    let options = CallOptions::new().timeout(Duration::from_secs(120));
    let started = Instant::now();
    let failures = burst(&client, to, 10_000, options);
    let took = started.elapsed();
    let c = client.stats().unwrap().total;
    let s = server.stats().unwrap().total;
    println!(
        "burst: 10000 calls, {} failures, {:.0} ms; CREDITs sent {}, heard {}; refused {}",
        failures.len(),
        took.as_secs_f64() * 1e3,
        s.packets.credits_sent,
        c.packets.credits_received,
        s.rpcs.refused,
    );
    assert!(
        failures.is_empty(),
        "failures: {:?}",
        &failures[..failures.len().min(5)]
    );
    assert_eq!(c.rpcs.completed, 10_000);
    assert_eq!(s.rpcs.refused, 0, "the client kept within its credit");
}

/// A server that holds 4 requests, each taking 20 ms, and a client that
/// assumes 128 before it hears the server's credit: the first burst
/// overruns the server. Without the knob the refused calls fail with
/// `Overloaded`; with it they are sent again and complete. The client is
/// a `LocalEndpoint`, which receives nothing until it is polled: all 40
/// requests leave before the server's CREDIT can be heard, however the
/// threads are scheduled (a threaded client on a busy machine sometimes
/// heard it after the first few and kept within it, so nothing was
/// refused). The retry itself is the engine's, shared by both faces.
#[test]
fn refused_calls_are_retried_only_when_asked() {
    let options = CallOptions::new().timeout(Duration::from_secs(120));
    let (mut client, server) = overrun_pair();
    let failures = local_burst(&mut client, server.local_addr(), 40, options);
    println!("without retries: {} of 40 refused", failures.len());
    assert!(!failures.is_empty(), "the first burst overran the server");
    assert!(failures
        .iter()
        .all(|e| matches!(e, Error::Rpc(RpcError::Overloaded))));

    // A fresh client (it starts from the initial credit again).
    let (mut client, server) = overrun_pair();
    let to = server.local_addr();
    let failures = local_burst(&mut client, to, 40, options.retry_overloaded(20));
    let refused = server.stats().unwrap().total.rpcs.refused;
    println!(
        "with retries: {} failures, {refused} refusals retried",
        failures.len()
    );
    assert!(failures.is_empty(), "failures: {failures:?}");
    assert!(refused > 0, "some were refused, and retried");
}

/// A caller-driven client and a server that holds 4 requests and answers
/// one every 20 ms.
fn overrun_pair() -> (LocalEndpoint, Endpoint) {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut server_cfg = EndpointConfig::default();
    server_cfg.protocol_mut().set_max_pending_requests(4);
    let server = Endpoint::bind(any, server_cfg).expect("bind");
    let mut client = LocalEndpoint::bind(any, EndpointConfig::default()).expect("bind");
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    serve(&server, 1, Duration::from_millis(20));
    (client, server)
}

/// Makes `n` calls back to back (each leaves at once; nothing is received
/// meanwhile), then polls until all have ended; returns the failures.
fn local_burst(
    client: &mut LocalEndpoint,
    to: SocketAddr,
    n: u32,
    options: CallOptions,
) -> Vec<Error> {
    for i in 0..n {
        client
            .call_with(to, &i.to_be_bytes(), options)
            .expect("started");
    }
    let (mut done, mut failed) = (0, Vec::new());
    while done + failed.len() < n as usize {
        match client.poll(Some(Duration::from_secs(60))).unwrap() {
            Some(LocalEvent::Response { .. }) => done += 1,
            Some(LocalEvent::Failed { error, .. }) => failed.push(error),
            Some(other) => panic!("client got {other:?}"),
            None => panic!("no event for 60 s after {done} responses"),
        }
    }
    failed
}

/// The caller-driven endpoint waits for credit the same way: 10,000 calls
/// made back to back, then polled until every one has ended.
#[test]
fn a_local_endpoint_burst_waits_for_credit_too() {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = Endpoint::bind(any, EndpointConfig::default()).expect("bind");
    let mut client = LocalEndpoint::bind(any, EndpointConfig::default()).expect("bind");
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    serve(&server, 2, Duration::ZERO);
    let to = server.local_addr();
    let options = CallOptions::new().timeout(Duration::from_secs(120));
    let started = Instant::now();
    for i in 0..10_000u32 {
        client
            .call_with(to, &i.to_be_bytes(), options)
            .expect("started");
    }
    let (mut done, mut failed) = (0, Vec::new());
    while done + failed.len() < 10_000 {
        match client.poll(Some(Duration::from_secs(60))).unwrap() {
            Some(LocalEvent::Response { .. }) => done += 1,
            Some(LocalEvent::Failed { error, .. }) => failed.push(error),
            Some(other) => panic!("client got {other:?}"),
            None => panic!("no event for 60 s after {done} responses"),
        }
    }
    println!(
        "local burst: 10000 calls, {} failures, {:.0} ms",
        failed.len(),
        started.elapsed().as_secs_f64() * 1e3
    );
    assert!(
        failed.is_empty(),
        "failures: {:?}",
        &failed[..failed.len().min(5)]
    );
    assert_eq!(server.stats().unwrap().total.rpcs.refused, 0);
}

/// Blocking calls from 64 threads (160 each, back to back) at a server
/// that holds 16 requests: the client, told 16 from the start, keeps 48
/// calls waiting for credit and none is refused.
#[test]
fn blocking_calls_from_many_threads_wait_for_credit_too() {
    let mut server_cfg = EndpointConfig::default();
    server_cfg.protocol_mut().set_max_pending_requests(16);
    let mut client_cfg = EndpointConfig::default();
    client_cfg.protocol_mut().set_initial_credit(16);
    let (client, server) = pair(client_cfg, server_cfg);
    serve(&server, 2, Duration::ZERO);
    let to = server.local_addr();
    let options = CallOptions::new().timeout(Duration::from_secs(120));
    let threads: Vec<_> = (0..64)
        .map(|t| {
            let c = client.clone();
            std::thread::spawn(move || {
                (0..160)
                    .filter(|i| {
                        let msg = format!("{t} {i}");
                        c.call_with(to, msg.as_bytes(), options).is_err()
                    })
                    .count()
            })
        })
        .collect();
    let failures: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(failures, 0);
    assert_eq!(client.stats().unwrap().total.rpcs.completed, 64 * 160);
    assert_eq!(server.stats().unwrap().total.rpcs.refused, 0);
}

/// A call that never gets credit (the server holds every request it has
/// and answers none) ends with its own deadline, not a hang, and the
/// server never sees it.
#[test]
fn a_call_waiting_for_credit_ends_at_its_deadline() {
    let mut server_cfg = EndpointConfig::default();
    server_cfg.protocol_mut().set_max_pending_requests(2);
    let mut client_cfg = EndpointConfig::default();
    client_cfg.protocol_mut().set_initial_credit(2);
    let (client, server) = pair(client_cfg, server_cfg);
    let s = server.clone();
    let held = std::thread::spawn(move || {
        let mut held = Vec::new();
        while held.len() < 2 {
            held.push(s.accept().expect("a request"));
        }
        held
    });
    let to = server.local_addr();
    let slow = CallOptions::new().timeout(Duration::from_secs(60));
    let (c1, c2) = (client.clone(), client.clone());
    let first = std::thread::spawn(move || c1.call_with(to, b"one", slow));
    let second = std::thread::spawn(move || c2.call_with(to, b"two", slow));
    let held = held.join().unwrap();
    let quick = CallOptions::new().timeout(Duration::from_millis(300));
    let third = client.call_with(to, b"three", quick);
    assert!(matches!(third, Err(Error::Timeout { .. })), "{third:?}");
    assert_eq!(server.stats().unwrap().total.rpcs.refused, 0);
    for req in held {
        let echo = req.data().to_vec();
        req.respond(&echo).unwrap();
    }
    assert_eq!(&first.join().unwrap().unwrap()[..], b"one");
    assert_eq!(&second.join().unwrap().unwrap()[..], b"two");
}
