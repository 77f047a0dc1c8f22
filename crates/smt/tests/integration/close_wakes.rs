//! A close wakes every waiter (issue #24 item 1): async accepters, callers
//! (blocking and async) waiting for a place among the outstanding calls,
//! and accepts or calls that start after the close. Real loopback sockets.
//!
//! Timing: each waiter gets a generous bound (20 s) to end once the close
//! has returned; it is there so that a waiter nobody wakes fails the test
//! instead of hanging it, not to measure anything.

use std::net::{SocketAddr, UdpSocket};
use std::sync::mpsc;
use std::time::Duration;

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::{Endpoint, EndpointConfig, Error};

const GENEROUS: Duration = Duration::from_secs(20);

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A client allowed one outstanding call, with a session to a peer that
/// never answers (so a call to it holds the one place until the close).
fn one_place_client_and_silent_peer() -> (Endpoint, SocketAddr, UdpSocket) {
    let mut config = EndpointConfig::default();
    config.set_max_outstanding_calls(1);
    config
        .protocol_mut()
        .set_rpc_idle_timeout(Duration::from_secs(100));
    let client = Endpoint::bind(any_port(), config).unwrap();
    let silent = UdpSocket::bind(any_port()).unwrap();
    let to = silent.local_addr().unwrap();
    let (keys, _) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(to, keys).unwrap();
    (client, to, silent)
}

#[test]
fn close_async_ends_a_tokio_accept_loop() {
    let server = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    let rt = runtime();
    rt.block_on(async {
        let s = server.clone();
        let accept_loop = tokio::spawn(async move {
            loop {
                match s.accept_async().await {
                    Ok(req) => drop(req),
                    Err(e) => return e,
                }
            }
        });
        // Let the loop reach its await (outcomes only, no timing asserted).
        tokio::time::sleep(Duration::from_millis(50)).await;
        server.close_async().await;
        let ended = tokio::time::timeout(GENEROUS, accept_loop).await;
        let err = ended.expect("the accept loop still waits after close_async");
        assert!(matches!(err.unwrap(), Error::Closed));
    });
}

#[test]
fn a_blocking_close_wakes_async_accepters_on_another_runtime() {
    let server = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    let rt = runtime();
    let accepters: Vec<_> = (0..4)
        .map(|_| {
            let s = server.clone();
            rt.spawn(async move { s.accept_async().await })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    server.close();
    rt.block_on(async {
        for a in accepters {
            let result = tokio::time::timeout(GENEROUS, a)
                .await
                .expect("an async accepter still waits after close");
            assert!(matches!(result.unwrap(), Err(Error::Closed)));
        }
    });
}

#[test]
fn accept_async_on_a_closed_endpoint_fails_at_once() {
    let server = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    server.close();
    let rt = runtime();
    rt.block_on(async {
        let result = tokio::time::timeout(GENEROUS, server.accept_async())
            .await
            .expect("accept_async waits on a closed endpoint");
        assert!(matches!(result, Err(Error::Closed)));
    });
}

/// The one place is held by an async call whose future is kept but not
/// polled (as a `select!` loop may do): its place is not given back by
/// the close, yet a caller waiting for a place must still end.
#[test]
fn close_wakes_an_async_caller_waiting_for_a_place() {
    let (client, to, silent) = one_place_client_and_silent_peer();
    let rt = runtime();
    rt.block_on(async {
        let holder = client.call_async(to, b"holds the place");
        let mut holder = Box::pin(holder);
        // Poll it once: the request leaves and the place is taken.
        tokio::select! {
            biased;
            _ = &mut holder => panic!("a silent peer answered"),
            _ = tokio::task::yield_now() => {}
        }
        let mut buf = [0u8; 2048];
        silent.recv_from(&mut buf).unwrap();
        let c = client.clone();
        let waiting = tokio::spawn(async move { c.call_async(to, b"waits for a place").await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        client.close_async().await;
        let result = tokio::time::timeout(GENEROUS, waiting)
            .await
            .expect("an async caller still waits for a place after close");
        assert!(matches!(result.unwrap(), Err(Error::Closed)));
        // The holder itself was failed by the close.
        assert!(matches!(holder.await, Err(Error::Closed)));
    });
}

#[test]
fn close_wakes_a_blocking_caller_waiting_for_a_place() {
    let (client, to, silent) = one_place_client_and_silent_peer();
    let rt = runtime();
    rt.block_on(async {
        let mut holder = Box::pin(client.call_async(to, b"holds the place"));
        tokio::select! {
            biased;
            _ = &mut holder => panic!("a silent peer answered"),
            _ = tokio::task::yield_now() => {}
        }
        let mut buf = [0u8; 2048];
        silent.recv_from(&mut buf).unwrap();
        let (done_tx, done_rx) = mpsc::channel();
        let c = client.clone();
        std::thread::spawn(move || {
            let _ = done_tx.send(c.call(to, b"waits for a place"));
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        client.close_async().await;
        let result = done_rx
            .recv_timeout(GENEROUS)
            .expect("a blocking caller still waits for a place after close");
        assert!(matches!(result, Err(Error::Closed)));
        drop(holder);
    });
}
