//! A server's application hears when a client gives up on a request it
//! holds (issue #24 item 4): the client's abort (a dropped async call, a
//! call past its deadline) reaches the server as RPC_UNKNOWN, and the
//! request's `Cancellation` fires (threaded endpoint) or
//! `LocalEvent::RequestCancelled` is reported (local endpoint). Real
//! loopback sockets; bounds are generous (a descheduled thread is not a
//! failure).

use std::net::SocketAddr;
use std::time::Duration;

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::{CallOptions, Endpoint, EndpointConfig, Error, LocalEndpoint, LocalEvent};

const GENEROUS: Duration = Duration::from_secs(20);

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn pair() -> (Endpoint, Endpoint) {
    let client = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    let server = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    (client, server)
}

#[test]
fn a_call_past_its_deadline_cancels_the_request_at_the_server() {
    let (client, server) = pair();
    let to = server.local_addr();
    let caller = std::thread::spawn(move || {
        client.call_with(
            to,
            b"slow",
            CallOptions::new().timeout(Duration::from_millis(50)),
        )
    });
    let request = server.accept().unwrap();
    let cancellation = request.cancellation();
    assert!(
        cancellation.wait_timeout(GENEROUS),
        "the handler heard the client give up"
    );
    assert!(matches!(caller.join().unwrap(), Err(Error::Timeout { .. })));
    // The RPC is gone at the server: the response cannot be sent.
    assert!(request.respond(b"too late").is_err());
}

#[test]
fn a_dropped_async_call_cancels_the_request_at_the_server() {
    let (client, server) = pair();
    let to = server.local_addr();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let call = tokio::spawn(async move { client.call_async(to, b"never mind").await });
        let request = server.accept_async().await.unwrap();
        let cancellation = request.cancellation();
        assert!(!cancellation.is_cancelled());
        call.abort();
        tokio::time::timeout(GENEROUS, cancellation.cancelled())
            .await
            .expect("the handler heard the client give up");
        assert!(cancellation.is_cancelled());
        // A signal asked for after the fact fires at once.
        assert!(request.cancellation().is_cancelled());
    });
}

/// A cancellation that arrives before the application asks is remembered;
/// an answered request's signal never fires.
#[test]
fn a_cancellation_is_remembered_and_an_answer_never_fires_it() {
    let (client, server) = pair();
    let to = server.local_addr();
    let quick = client.clone();
    let caller = std::thread::spawn(move || {
        quick.call_with(
            to,
            b"first",
            CallOptions::new().timeout(Duration::from_millis(30)),
        )
    });
    let first = server.accept().unwrap();
    assert!(caller.join().unwrap().is_err());
    // Wait for the RPC_UNKNOWN to arrive without watching: an echo call
    // behind it on the same path comes back after it.
    let echo = std::thread::spawn(move || client.call(to, b"second"));
    let second = server.accept().unwrap();
    let answered = second.cancellation();
    second.respond(b"ok").unwrap();
    assert_eq!(&echo.join().unwrap().unwrap()[..], b"ok");
    let late = first.cancellation();
    assert!(late.wait_timeout(GENEROUS), "remembered");
    assert!(!answered.wait_timeout(Duration::from_millis(100)));
}

#[test]
fn a_local_endpoint_reports_the_cancelled_request() {
    let mut server = LocalEndpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    let client = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    let to = server.local_addr();
    let caller = std::thread::spawn(move || {
        client.call_with(
            to,
            b"slow",
            CallOptions::new().timeout(Duration::from_millis(50)),
        )
    });
    let deadline = std::time::Instant::now() + GENEROUS;
    let mut held = None;
    while std::time::Instant::now() < deadline {
        match server.poll(Some(Duration::from_millis(100))).unwrap() {
            Some(LocalEvent::Request { request, .. }) => held = Some(request),
            Some(LocalEvent::RequestCancelled { request }) => {
                assert_eq!(Some(request), held, "the held request");
                assert!(caller.join().unwrap().is_err());
                assert!(server.respond(request, b"too late").is_err());
                return;
            }
            _ => {}
        }
    }
    panic!("no RequestCancelled within {GENEROUS:?}");
}
