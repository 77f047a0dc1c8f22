//! The public API over real sockets on loopback.

use std::net::SocketAddr;
use std::time::Duration;

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::{DropReason, Endpoint, EndpointConfig, Error, RpcError, SendError};

fn bind(addr: &str) -> Endpoint {
    Endpoint::bind(addr.parse().unwrap(), EndpointConfig::default()).expect("bind")
}

/// A client and a server with fresh keys; the server echoes upper-cased.
fn pair(addr: &str) -> (Endpoint, Endpoint) {
    let server = bind(addr);
    let client = bind(addr);
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    (client, server)
}

fn serve_upper(server: &Endpoint, threads: usize) {
    for _ in 0..threads {
        let s = server.clone();
        std::thread::spawn(move || {
            while let Ok(req) = s.accept() {
                let up = req.data().to_ascii_uppercase();
                let _ = req.respond(&up);
            }
        });
    }
}

#[test]
fn call_and_respond_over_udp_v4() {
    let (client, server) = pair("127.0.0.1:0");
    serve_upper(&server, 1);
    let resp = client.call(server.local_addr(), b"hello smt").unwrap();
    assert_eq!(resp, &b"HELLO SMT"[..]);
    let big: Vec<u8> = (0..(1 << 20)).map(|i| b'a' + (i % 26) as u8).collect();
    let resp = client.call(server.local_addr(), &big).unwrap();
    assert_eq!(resp, big.to_ascii_uppercase());
    let stats = client.stats().unwrap().total;
    let peer = client.peer_stats(server.local_addr()).unwrap().unwrap();
    assert_eq!(stats.rpcs.completed, 2);
    assert_eq!(peer.counters.rpcs.completed, 2);
    assert_eq!(peer.counters.rtt.count(), 2, "both round trips timed");
}

#[test]
fn call_and_respond_over_udp_v6() {
    let Ok(server) = Endpoint::bind("[::1]:0".parse().unwrap(), EndpointConfig::default()) else {
        eprintln!("skipped: no IPv6 loopback here");
        return;
    };
    let client = bind("[::1]:0");
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes256Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    serve_upper(&server, 1);
    assert_eq!(client.call(server.local_addr(), b"v6").unwrap(), &b"V6"[..]);
}

#[test]
fn many_threads_many_outstanding_calls() {
    let (client, server) = pair("127.0.0.1:0");
    serve_upper(&server, 3);
    let target = server.local_addr();
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let c = client.clone();
            std::thread::spawn(move || {
                for i in 0..200 {
                    let msg = format!("thread {t} call {i} {}", "x".repeat((i * 37) % 5000));
                    assert_eq!(
                        c.call(target, msg.as_bytes()).unwrap(),
                        msg.to_ascii_uppercase().as_bytes()
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn async_api_under_tokio() {
    let (client, server) = pair("127.0.0.1:0");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let s = server.clone();
        tokio::spawn(async move {
            while let Ok(req) = s.accept_async().await {
                let up = req.data().to_ascii_uppercase();
                let _ = req.respond(&up);
            }
        });
        let calls = (0..100).map(|i| {
            let c = client.clone();
            let to = server.local_addr();
            tokio::spawn(async move { c.call_async(to, format!("async {i}").as_bytes()).await })
        });
        for (i, h) in calls.enumerate() {
            assert_eq!(h.await.unwrap().unwrap(), format!("ASYNC {i}").as_bytes());
        }
    });
}

#[test]
fn ready_fd_works_with_an_event_loop() {
    use mio::unix::SourceFd;
    use mio::{Events, Interest, Poll, Token};
    use std::os::fd::AsRawFd;
    let (client, server) = pair("127.0.0.1:0");
    let mut poll = Poll::new().unwrap();
    let fd = server.ready_fd().as_raw_fd();
    poll.registry()
        .register(&mut SourceFd(&fd), Token(7), Interest::READABLE)
        .unwrap();
    let to = server.local_addr();
    let caller = std::thread::spawn(move || client.call(to, b"via epoll"));
    let mut events = Events::with_capacity(4);
    let mut answered = false;
    while !answered {
        poll.poll(&mut events, Some(Duration::from_secs(5)))
            .unwrap();
        assert!(!events.is_empty(), "ready fd never became readable");
        while let Some(req) = server.try_accept().unwrap() {
            req.respond(b"answered from an event loop").unwrap();
            answered = true;
        }
    }
    assert_eq!(
        caller.join().unwrap().unwrap(),
        &b"answered from an event loop"[..]
    );
    assert!(server.try_accept().unwrap().is_none());
}

#[test]
fn clear_errors_for_api_misuse() {
    let client = bind("127.0.0.1:0");
    let nobody: SocketAddr = "127.0.0.1:9".parse().unwrap();
    match client.call(nobody, b"x") {
        Err(Error::Send(SendError::NoSession)) => {}
        other => panic!("expected NoSession, got {other:?}"),
    }
    let msg = client.call(nobody, b"x").unwrap_err().to_string();
    assert!(msg.contains("install_session"), "{msg}");
}

/// Issue #13: a request the application drops unanswered fails its call
/// at once with `RpcError::Abandoned` (the server says ABANDONED), not
/// after the client's `abort_ticks` with a timeout. The client here would
/// wait 60 s for a timeout.
#[test]
fn a_dropped_request_fails_the_call_at_once() {
    let server = bind("127.0.0.1:0");
    let mut patient = EndpointConfig::default();
    patient
        .protocol_mut()
        .set_rpc_idle_timeout(Duration::from_secs(60));
    let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), patient).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    let s = server.clone();
    std::thread::spawn(move || {
        while let Ok(req) = s.accept() {
            drop(req); // the application gives up on it
        }
    });
    let started = std::time::Instant::now();
    match client.call(server.local_addr(), b"ignored") {
        Err(Error::Rpc(RpcError::Abandoned)) => {}
        other => panic!("expected RpcError::Abandoned, got {other:?}"),
    }
    // Generous: a timeout would take 60 s.
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn close_finishes_in_flight_rpcs_then_refuses_new_ones() {
    let (client, server) = pair("127.0.0.1:0");
    serve_upper(&server, 1);
    let to = server.local_addr();
    let c = client.clone();
    let inflight = std::thread::spawn(move || c.call(to, vec![b'z'; 4 << 20]));
    std::thread::sleep(Duration::from_millis(5));
    client.close();
    match inflight.join().unwrap() {
        Ok(resp) => assert_eq!(resp, vec![b'Z'; 4 << 20]),
        Err(Error::Closed) => {}
        Err(e) => panic!("in-flight call ended with {e}"),
    }
    assert!(matches!(client.call(to, b"late"), Err(Error::Closed)));
    server.close();
}

#[test]
fn wrong_keys_are_counted_not_accepted() {
    let server = bind("127.0.0.1:0");
    let client = bind("127.0.0.1:0");
    let (ck, _) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    let (_, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    serve_upper(&server, 1);
    assert!(client.call(server.local_addr(), b"secret").is_err());
    let stats = server.stats().unwrap().total;
    assert!(
        stats.drops.get(DropReason::AuthFailure) > 0,
        "{:?}",
        stats.drops
    );
    assert_eq!(stats.traffic.messages_received, 0);
}

#[test]
fn busy_poll_mode_works() {
    let mut config = EndpointConfig::default();
    config.set_busy_poll(true);
    let server = Endpoint::bind("127.0.0.1:0".parse().unwrap(), config.clone()).unwrap();
    let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), config).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    serve_upper(&server, 1);
    for i in 0..50 {
        let msg = format!("spin {i}");
        assert_eq!(
            client.call(server.local_addr(), msg.as_bytes()).unwrap(),
            msg.to_ascii_uppercase().as_bytes()
        );
    }
    client.close();
    server.close();
}

#[test]
fn features_are_reported() {
    let ep = bind("127.0.0.1:0");
    let line = ep.features().to_string();
    assert!(line.starts_with("udp:"), "{line}");
    assert!(
        ep.features().recv_buffer >= 2 << 20 || line.contains("rcvbuf"),
        "{line}"
    );
}

/// A server whose application holds `max_pending_requests` unanswered
/// requests takes no more: the client keeps the calls beyond its credit
/// waiting, what arrives beyond the bound anyway fails at once with
/// `RpcError::Overloaded` (not after a timeout), nothing is delivered past
/// the bound, and once the application answers, calls are served again.
#[test]
fn an_overloaded_server_sheds_calls_with_a_clear_error() {
    let mut cfg = EndpointConfig::default();
    cfg.protocol_mut().set_max_pending_requests(4);
    let server = Endpoint::bind("127.0.0.1:0".parse().unwrap(), cfg).unwrap();
    let client = bind("127.0.0.1:0");
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    let to = server.local_addr();
    // Twelve calls at once; the application takes requests but answers
    // none until told to.
    let callers: Vec<_> = (0..12u8)
        .map(|i| {
            let c = client.clone();
            std::thread::spawn(move || c.call(to, &[i; 64]))
        })
        .collect();
    let mut held = Vec::new();
    while held.len() < 4 {
        held.push(server.accept().unwrap());
    }
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        server.try_accept().unwrap().is_none(),
        "a fifth was delivered"
    );
    for req in held {
        let data = req.data().to_vec();
        req.respond(&data).unwrap();
    }
    // The calls beyond the server's credit waited at the client (issue
    // #24); what arrived beyond the bound anyway was refused. Serve the
    // rest.
    serve_upper(&server, 1);
    let results: Vec<_> = callers.into_iter().map(|t| t.join().unwrap()).collect();
    let served = results.iter().filter(|r| r.is_ok()).count();
    let shed = results
        .iter()
        .filter(|r| matches!(r, Err(Error::Rpc(RpcError::Overloaded))))
        .count();
    let stats = server.stats().unwrap().total;
    assert_eq!(
        (served + shed, shed),
        (12, stats.rpcs.refused as usize),
        "{results:?}"
    );
    assert_eq!(client.call(to, b"again").unwrap(), &b"AGAIN"[..]);
}
