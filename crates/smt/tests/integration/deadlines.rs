//! Deadlines and cancellation (issue #13 item 1), over real loopback
//! sockets: per-call and endpoint-wide timeouts, cancel-on-drop for async
//! calls, and responses that cannot be sent. Each failure is prompt and
//! says whose it is; the RPC ends at both ends.
//!
//! Timing: bounds are generous (a descheduled thread is not a failure).
//! Where a test must tell a prompt failure from a protocol timeout, the
//! client's `abort_ticks` is raised to 60 s instead of shortening anything.

use crate::common;

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::{
    CallOptions, Endpoint, EndpointConfig, Error, LocalEndpoint, LocalEvent, RpcError, SendError,
};

/// Longest any single wait in these tests may take before it is a bug.
const GENEROUS: Duration = Duration::from_secs(20);

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A client that would wait 60 s before timing out on its own.
fn patient() -> EndpointConfig {
    let mut config = EndpointConfig::default();
    config
        .protocol_mut()
        .set_rpc_idle_timeout(Duration::from_secs(60));
    config
}

fn pair_with(client: EndpointConfig, server: EndpointConfig) -> (Endpoint, Endpoint) {
    let client = Endpoint::bind(any_port(), client).unwrap();
    let server = Endpoint::bind(any_port(), server).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    (client, server)
}

/// A server application thread that takes one request and holds it until
/// told to answer; it answers with `response`, reports what `respond`
/// returned, and exits.
fn hold_one(
    server: &Endpoint,
    response: Vec<u8>,
) -> (mpsc::Sender<()>, mpsc::Receiver<Result<(), Error>>) {
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel();
    let s = server.clone();
    std::thread::spawn(move || {
        let Ok(req) = s.accept() else {
            return;
        };
        if go_rx.recv().is_ok() {
            let _ = done_tx.send(req.respond(&response));
        }
    });
    (go_tx, done_rx)
}

#[test]
fn a_call_past_its_timeout_fails_with_timeout_and_the_server_frees_it() {
    let (client, server) = pair_with(patient(), EndpointConfig::default());
    let (go, done) = hold_one(&server, b"too late".to_vec());
    let timeout = Duration::from_millis(200);
    let started = Instant::now();
    let result = client.call_with(server.local_addr(), b"take your time", timeout);
    match result {
        Err(Error::Timeout { after }) => assert_eq!(after, timeout),
        other => panic!("expected the call's timeout, got {other:?}"),
    }
    let took = started.elapsed();
    assert!(took >= timeout && took < GENEROUS, "{took:?}");
    // The client told the server (RPC_UNKNOWN): the RPC the application
    // holds is gone there too, so its late answer is refused. The packet
    // left before `call_with` returned; give it time to be read.
    std::thread::sleep(Duration::from_millis(100));
    go.send(()).unwrap();
    match done.recv_timeout(GENEROUS).unwrap() {
        Err(Error::Send(SendError::UnknownRpc)) => {}
        other => panic!("expected the server's RPC to be gone, got {other:?}"),
    }
    // The endpoint is fine afterwards.
    common::spawn_echo(&server, 1);
    let echo = client.call_with(server.local_addr(), b"again", GENEROUS);
    assert_eq!(echo.unwrap(), &b"again"[..]);
}

#[test]
fn the_endpoint_default_timeout_applies_unless_a_call_says_otherwise() {
    let mut config = patient();
    config.set_call_timeout(Some(Duration::from_millis(150)));
    let (client, server) = pair_with(config, EndpointConfig::default());
    let (go, done) = hold_one(&server, b"answered".to_vec());
    let to = server.local_addr();
    assert!(matches!(
        client.call(to, b"first"),
        Err(Error::Timeout { after }) if after == Duration::from_millis(150)
    ));
    go.send(()).unwrap();
    let _ = done.recv_timeout(GENEROUS).unwrap();
    // No deadline for this one: it outlives the default and gets its
    // answer.
    let (go, done) = hold_one(&server, b"answered".to_vec());
    let c = client.clone();
    let waiting =
        std::thread::spawn(move || c.call_with(to, b"second", CallOptions::new().no_timeout()));
    std::thread::sleep(Duration::from_millis(400));
    go.send(()).unwrap();
    assert_eq!(done.recv_timeout(GENEROUS).unwrap().ok(), Some(()));
    assert_eq!(waiting.join().unwrap().unwrap(), &b"answered"[..]);
    // Async calls get the default too.
    let _held = hold_one(&server, Vec::new());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let result = rt.block_on(client.call_async(to, b"third"));
    assert!(matches!(result, Err(Error::Timeout { .. })), "{result:?}");
}

/// Issue #13: dropping a `call_async` future used to leave the RPC
/// running: the whole megabyte response was still transferred. Now the
/// client frees the call at once (its place among
/// `max_outstanding_calls` too) and tells the server, which stops.
#[test]
fn dropping_a_call_async_future_cancels_the_rpc_at_both_ends() {
    let mut config = patient();
    config.set_max_outstanding_calls(1);
    let (client, server) = pair_with(config, EndpointConfig::default());
    let (go, done) = hold_one(&server, vec![0x5a; 1 << 20]);
    let to = server.local_addr();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dropped = rt.block_on(async {
        tokio::time::timeout(
            Duration::from_millis(100),
            client.call_async(to, b"a megabyte"),
        )
        .await
    });
    assert!(dropped.is_err(), "the server holds it: {dropped:?}");
    let sent_before = server.stats().unwrap().total.traffic.bytes_sent;
    // The server application answers only now, after the cancel.
    std::thread::sleep(Duration::from_millis(50));
    go.send(()).unwrap();
    match done.recv_timeout(GENEROUS).unwrap() {
        // The cancel arrived first, or the response started and stopped.
        Ok(()) | Err(Error::Send(SendError::UnknownRpc)) => {}
        Err(e) => panic!("respond failed with {e}"),
    }
    // The one place for a call is free again at once.
    common::spawn_echo(&server, 1);
    let next = client.call_with(to, b"next", GENEROUS);
    assert_eq!(next.unwrap(), &b"next"[..]);
    std::thread::sleep(Duration::from_millis(200));
    let sent = server.stats().unwrap().total.traffic.bytes_sent - sent_before;
    assert!(
        sent < 256 << 10,
        "{sent} bytes of a cancelled 1 MiB response sent"
    );
}

/// Issue #13: a response larger than the server's message limit used to
/// make `respond` return `Ok` while the client waited forever (the server
/// kept the request "in service" and answered every RESEND with BUSY).
#[test]
fn a_response_that_cannot_be_sent_is_an_error_and_fails_the_call_at_once() {
    let mut small = EndpointConfig::default();
    small.protocol_mut().set_max_message_len(64 << 10);
    let (client, server) = pair_with(patient(), small);
    let (go, done) = hold_one(&server, vec![1; 100_000]);
    go.send(()).unwrap();
    let started = Instant::now();
    match client.call_with(server.local_addr(), b"big answer please", GENEROUS) {
        Err(Error::Rpc(RpcError::Abandoned)) => {}
        other => panic!("expected RpcError::Abandoned, got {other:?}"),
    }
    assert!(started.elapsed() < GENEROUS);
    match done.recv_timeout(GENEROUS).unwrap() {
        Err(Error::Send(SendError::MessageTooLarge { len: 100_000, .. })) => {}
        other => panic!("expected MessageTooLarge from respond, got {other:?}"),
    }
}

/// The caller-driven endpoint keeps the same deadlines inside `poll`, and
/// `cancel` tells the server as the threaded endpoint's drop does.
#[test]
fn a_local_endpoint_call_times_out_inside_poll() {
    let mut client = LocalEndpoint::bind(any_port(), patient()).unwrap();
    let server = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    let (go, done) = hold_one(&server, b"late".to_vec());
    let timeout = Duration::from_millis(150);
    // Before the call: its deadline counts from the moment it is made.
    let started = Instant::now();
    let call = client
        .call_with(server.local_addr(), b"hold this", timeout)
        .unwrap();
    loop {
        assert!(started.elapsed() < GENEROUS, "no timeout event");
        match client.poll(Some(Duration::from_secs(1))).unwrap() {
            Some(LocalEvent::Failed {
                call: c,
                error: Error::Timeout { after },
            }) => {
                assert_eq!((c, after), (call, timeout));
                break;
            }
            Some(other) => panic!("unexpected {other:?}"),
            None => {}
        }
    }
    assert!(started.elapsed() >= timeout);
    assert_eq!(client.in_flight().0, 0);
    // The RPC_UNKNOWN left inside that poll; let the server read it.
    std::thread::sleep(Duration::from_millis(100));
    go.send(()).unwrap();
    assert!(matches!(
        done.recv_timeout(GENEROUS).unwrap(),
        Err(Error::Send(SendError::UnknownRpc))
    ));
}
