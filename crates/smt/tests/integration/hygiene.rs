//! Resource hygiene (issue #13 item 2), over real loopback sockets:
//! dropping an endpoint releases its thread and port, outstanding calls
//! and queued requests are bounded, and the calls async code makes never
//! wait for the network.
//!
//! Timing: bounds are generous; negative checks ("nothing more arrived
//! within 300 ms") only lose coverage on a slow machine, never fail.

use crate::common;

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::{Endpoint, EndpointConfig, Error, LocalEndpoint, RpcError};

const GENEROUS: Duration = Duration::from_secs(20);

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn pair_with(client: EndpointConfig, server: EndpointConfig) -> (Endpoint, Endpoint) {
    let client = Endpoint::bind(any_port(), client).unwrap();
    let server = Endpoint::bind(any_port(), server).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    (client, server)
}

/// Binds `addr` again, retrying for up to `within` (a close still in its
/// grace period holds the port).
fn rebind(addr: SocketAddr, within: Duration) -> Result<Endpoint, Error> {
    let started = Instant::now();
    loop {
        match Endpoint::bind(addr, EndpointConfig::default()) {
            Ok(ep) => return Ok(ep),
            Err(e) if started.elapsed() >= within => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Issue #13: dropping an endpoint without `close()` left its port behind
/// for a while (binding it again right after the drop failed with
/// `AddrInUse` about one time in three here: the background thread closed
/// the socket later). Dropping the last handle of an idle endpoint now
/// closes the socket and joins the thread before the drop returns.
#[test]
fn dropping_the_last_handle_of_an_idle_endpoint_frees_its_port_at_once() {
    let server = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    common::spawn_echo(&server, 1);
    let to = server.local_addr();
    for round in 0..10 {
        let client = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
        let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
        client.install_session(to, ck).unwrap();
        server.install_session(client.local_addr(), sk).unwrap();
        assert_eq!(client.call(to, b"hello").unwrap(), &b"hello"[..]);
        let addr = client.local_addr();
        let clone = client.clone();
        drop(client);
        // One handle is left: still open.
        assert_eq!(clone.call(to, b"still").unwrap(), &b"still"[..]);
        drop(clone);
        let again = Endpoint::bind(addr, EndpointConfig::default());
        assert!(
            again.is_ok(),
            "round {round}: port still held: {:?}",
            again.err()
        );
    }
}

/// A dropped endpoint with RPCs in flight finishes them within the close's
/// grace period, then releases the port; requests its application still
/// held can no longer be answered.
#[test]
fn dropping_a_busy_endpoint_releases_its_port_after_the_grace_period() {
    let (client, server) = pair_with(EndpointConfig::default(), EndpointConfig::default());
    let to = server.local_addr();
    let (got_tx, got_rx) = mpsc::channel();
    let s = server.clone();
    std::thread::spawn(move || {
        let req = s.accept().unwrap();
        got_tx.send(req).unwrap();
    });
    let c = client.clone();
    let caller = std::thread::spawn(move || c.call_with(to, b"held", GENEROUS));
    let held = got_rx.recv_timeout(GENEROUS).unwrap();
    drop(server);
    let again = rebind(to, GENEROUS);
    assert!(again.is_ok(), "port never released: {:?}", again.err());
    assert!(matches!(held.respond(b"too late"), Err(Error::Closed)));
    // The client's call ends (the server went away mid-call); how depends
    // on what it heard last, but it ends.
    assert!(caller.join().unwrap().is_err());
}

/// `close_async` waits without blocking the runtime's thread, and returns
/// once the port is free.
#[test]
fn close_async_returns_once_the_endpoint_has_stopped() {
    let (client, server) = pair_with(EndpointConfig::default(), EndpointConfig::default());
    common::spawn_echo(&server, 1);
    let addr = client.local_addr();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let reply = client.call_async(server.local_addr(), b"bye").await;
        assert_eq!(reply.unwrap(), &b"bye"[..]);
        client.close_async().await;
        assert!(matches!(
            client.call_async(server.local_addr(), b"late").await,
            Err(Error::Closed)
        ));
    });
    assert!(Endpoint::bind(addr, EndpointConfig::default()).is_ok());
    // Closing again returns at once.
    client.close();
}

/// `call` beyond `max_outstanding_calls` waits for a place (blocking and
/// async alike) instead of queueing without bound; a `LocalEndpoint`,
/// which cannot wait, says so.
#[test]
fn calls_beyond_max_outstanding_calls_wait_for_a_place() {
    let mut config = EndpointConfig::default();
    config.set_max_outstanding_calls(2);
    let (client, server) = pair_with(config.clone(), EndpointConfig::default());
    let to = server.local_addr();
    let callers: Vec<_> = (0..3u8)
        .map(|i| {
            let c = client.clone();
            std::thread::spawn(move || c.call_with(to, &[i; 16], GENEROUS))
        })
        .collect();
    let first = server.accept().unwrap();
    let second = server.accept().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        server.try_accept().unwrap().is_none(),
        "a third call ran past the limit"
    );
    let data = first.data().to_vec();
    first.respond(&data).unwrap();
    // Its place goes to the waiting call.
    let third = server.accept().unwrap();
    for req in [second, third] {
        let data = req.data().to_vec();
        req.respond(&data).unwrap();
    }
    for caller in callers {
        assert_eq!(caller.join().unwrap().unwrap().len(), 16);
    }

    // Async: eight calls through two places, each waiting its turn.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    common::spawn_echo(&server, 1);
    rt.block_on(async {
        let tasks: Vec<_> = (0..8u8)
            .map(|i| {
                let c = client.clone();
                tokio::spawn(async move { c.call_async(to, vec![i; 8]).await })
            })
            .collect();
        for (i, task) in tasks.into_iter().enumerate() {
            assert_eq!(task.await.unwrap().unwrap(), vec![i as u8; 8]);
        }
    });

    let mut local = LocalEndpoint::bind(any_port(), config).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    local.install_session(to, ck).unwrap();
    server.install_session(local.local_addr(), sk).unwrap();
    local.call(to, b"one").unwrap();
    local.call(to, b"two").unwrap();
    match local.call(to, b"three") {
        Err(Error::TooManyCalls { max: 2 }) => {}
        other => panic!("expected TooManyCalls, got {other:?}"),
    }
}

/// Requests waiting for the application are bounded by
/// `max_pending_requests`, whether or not anyone accepts: the client keeps
/// the calls beyond the server's credit waiting (issue #24), and what
/// still arrives beyond the bound (a burst before the credit is heard) is
/// refused unexecuted (OVERLOADED); the queue never grows past 4.
#[test]
fn the_request_queue_is_bounded_by_max_pending_requests() {
    let mut config = EndpointConfig::default();
    config.protocol_mut().set_max_pending_requests(4);
    let (client, server) = pair_with(EndpointConfig::default(), config);
    let to = server.local_addr();
    // Nobody accepts while twelve calls are made.
    let callers: Vec<_> = (0..12u8)
        .map(|i| {
            let c = client.clone();
            std::thread::spawn(move || c.call_with(to, &[i; 32], GENEROUS))
        })
        .collect();
    let mut queued = Vec::new();
    let started = Instant::now();
    while queued.len() < 4 && started.elapsed() < GENEROUS {
        match server.try_accept().unwrap() {
            Some(req) => queued.push(req),
            None => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    assert_eq!(queued.len(), 4, "the queue fills to max_pending_requests");
    // The rest wait at the client or were refused; none is queued.
    std::thread::sleep(Duration::from_millis(100));
    assert!(server.try_accept().unwrap().is_none(), "never more than 4");
    // Serve everything from now on: the waiting calls leave as places free.
    let s = server.clone();
    let serving = std::thread::spawn(move || {
        for req in queued {
            let data = req.data().to_vec();
            req.respond(&data).unwrap();
        }
        while let Ok(req) = s.accept() {
            let data = req.data().to_vec();
            let _ = req.respond(&data);
        }
    });
    let results: Vec<_> = callers.into_iter().map(|t| t.join().unwrap()).collect();
    let served = results.iter().filter(|r| r.is_ok()).count();
    let shed = results
        .iter()
        .filter(|r| matches!(r, Err(Error::Rpc(RpcError::Overloaded))))
        .count();
    let refused = server.stats().unwrap().total.rpcs.refused as usize;
    assert_eq!((served + shed, shed), (12, refused), "{results:?}");
    server.close();
    serving.join().unwrap();
}

/// `stats`, `install_session` and the setters never wait for the network
/// or for other callers' RPCs (only for the engine lock, held one bounded
/// turn at a time), so async code may call them: here while a blocking
/// call waits on a server that will not answer until they have returned.
#[test]
fn stats_and_install_session_do_not_wait_for_rpcs() {
    let (client, server) = pair_with(EndpointConfig::default(), EndpointConfig::default());
    let to = server.local_addr();
    let (got_tx, got_rx) = mpsc::channel();
    let s = server.clone();
    std::thread::spawn(move || {
        let req = s.accept().unwrap();
        got_tx.send(req).unwrap();
    });
    let c = client.clone();
    let caller = std::thread::spawn(move || c.call_with(to, b"wait", GENEROUS));
    let held = got_rx.recv_timeout(GENEROUS).unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    let c = client.clone();
    std::thread::spawn(move || {
        for _ in 0..100 {
            c.stats().unwrap();
            c.peer_stats(to).unwrap();
            let (keys, _) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
            c.install_session("127.0.0.1:9".parse().unwrap(), keys)
                .unwrap();
        }
        done_tx.send(()).unwrap();
    });
    // They finish while the call still waits for its response.
    done_rx
        .recv_timeout(GENEROUS)
        .expect("stats/install_session waited for an RPC");
    let data = held.data().to_vec();
    held.respond(&data).unwrap();
    assert_eq!(caller.join().unwrap().unwrap(), &b"wait"[..]);
}

/// Requests still queued when a server's close ends (nobody accepted them
/// within the grace period) are abandoned before the socket goes: their
/// clients fail with `RpcError::Abandoned` instead of waiting for their
/// own timeout (60 s here).
#[test]
fn closing_a_server_abandons_the_requests_nobody_accepted() {
    let mut patient = EndpointConfig::default();
    patient
        .protocol_mut()
        .set_rpc_idle_timeout(Duration::from_secs(60));
    let (client, server) = pair_with(patient, EndpointConfig::default());
    let to = server.local_addr();
    let c = client.clone();
    let caller = std::thread::spawn(move || c.call_with(to, b"anyone?", GENEROUS));
    let delivered = |s: &Endpoint| s.stats().unwrap().total.traffic.messages_received;
    let started = Instant::now();
    while delivered(&server) == 0 && started.elapsed() < GENEROUS {
        std::thread::sleep(Duration::from_millis(10));
    }
    server.close();
    match caller.join().unwrap() {
        Err(Error::Rpc(RpcError::Abandoned)) => {}
        other => panic!("expected RpcError::Abandoned, got {other:?}"),
    }
}
