//! A `LocalEndpoint` in a ping-pong takes one datagram per receive and
//! leaves "more?" to its level-triggered wait: nothing may stay unread when
//! the traffic turns into a burst, nor when the application switches to
//! its own (edge-triggered) loop of zero-timeout polls.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::mpsc;
use std::time::Duration;

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::{EndpointConfig, LocalEndpoint, LocalEvent};

const PATIENCE: Option<Duration> = Some(Duration::from_secs(10));

fn pair() -> (LocalEndpoint, LocalEndpoint) {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut client = LocalEndpoint::bind(any, EndpointConfig::default()).unwrap();
    let mut server = LocalEndpoint::bind(any, EndpointConfig::default()).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    (client, server)
}

/// Answers `count` requests with their bytes reversed, sleeping in
/// `poll`'s own wait (level-triggered); says how many it has answered
/// after each.
fn serve(
    mut server: LocalEndpoint,
    count: usize,
) -> (std::thread::JoinHandle<()>, mpsc::Receiver<usize>) {
    let (answered, counts) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        for served in 0..count {
            match server.poll(PATIENCE).unwrap() {
                Some(LocalEvent::Request { request, data }) => {
                    let mut data = data.to_vec();
                    data.reverse();
                    server.respond(request, &data).unwrap();
                    let _ = answered.send(served + 1);
                }
                other => panic!("server, after {served} requests: {other:?}"),
            }
        }
        let _ = server.poll(Some(Duration::from_millis(50)));
    });
    (thread, counts)
}

fn ping_pong(client: &mut LocalEndpoint, to: SocketAddr, calls: usize) {
    for i in 0..calls {
        let call = client.call(to, vec![i as u8; 64]).unwrap();
        match client.poll(PATIENCE).unwrap() {
            Some(LocalEvent::Response { call: c, data }) => {
                assert_eq!((c, data.len()), (call, 64));
            }
            other => panic!("ping-pong call {i}: {other:?}"),
        }
    }
}

/// Whether datagrams wait in the socket now: a fresh epoll registration
/// reports the socket's current state.
fn readable(endpoint: &LocalEndpoint) -> bool {
    let fd = endpoint.as_fd().as_raw_fd();
    let mut readiness = mio::Poll::new().unwrap();
    let mut source = mio::unix::SourceFd(&fd);
    let registry = readiness.registry();
    registry
        .register(&mut source, mio::Token(0), mio::Interest::READABLE)
        .unwrap();
    let mut events = mio::Events::with_capacity(1);
    readiness.poll(&mut events, Some(Duration::ZERO)).unwrap();
    let readable = events.iter().any(|e| e.is_readable());
    readiness.registry().deregister(&mut source).unwrap();
    readable
}

/// After a ping-pong (one datagram per receive on both sides), bursts of
/// calls (small, and multi-datagram ones) are all answered: the server
/// switches back to batches or keeps up one datagram at a time, and no
/// datagram stays unread.
#[test]
fn a_burst_after_a_ping_pong_is_fully_received() {
    let (mut client, server) = pair();
    let to = server.local_addr();
    let (rounds, burst, pongs) = (5, 60, 20);
    let (server, _) = serve(server, rounds * (burst + pongs));
    for round in 0..rounds {
        ping_pong(&mut client, to, pongs);
        let mut pending = HashMap::new();
        for i in 0..burst {
            let len = [64, 64, 1000, 5000, 70_000][(i + round) % 5];
            let req: Vec<u8> = (0..len).map(|b| (b + i) as u8).collect();
            pending.insert(client.call(to, &req).unwrap(), req);
        }
        while !pending.is_empty() {
            match client.poll(PATIENCE).unwrap() {
                Some(LocalEvent::Response { call, data }) => {
                    let mut expect = pending.remove(&call).expect("one response per call");
                    expect.reverse();
                    assert_eq!(data, expect);
                }
                other => panic!("round {round}, {} left: {other:?}", pending.len()),
            }
        }
    }
    server.join().unwrap();
    assert_eq!(client.stats().total.drops.total(), 0);
}

/// An application that polled with a timeout (one-datagram receives,
/// "more?" left to `poll`'s own wait) and then drives the endpoint from
/// its own edge-triggered loop: `timeout()` says to poll at once while
/// datagrams may wait, and zero-timeout polls until `None` leave none
/// unread.
#[test]
fn zero_timeout_polls_until_none_leave_nothing_unread() {
    let (mut client, server) = pair();
    let to = server.local_addr();
    let (rounds, burst, pongs) = (8, 30, 5);
    let (server, counts) = serve(server, rounds * (burst + pongs));
    let mut exercised = 0;
    for round in 0..rounds {
        ping_pong(&mut client, to, pongs);
        // Sizes that differ, so that neither GSO nor GRO makes the
        // responses one buffer, and large enough that no two share a
        // datagram: each is a datagram of its own.
        for i in 0..burst {
            client.call(to, vec![i as u8; 1000 + i]).unwrap();
        }
        client.flush().unwrap();
        // The server answers all of them meanwhile (its next poll sends
        // the last response); the responses queue in the client's socket.
        let all = (round + 1) * (burst + pongs);
        while counts
            .recv_timeout(PATIENCE.unwrap())
            .expect("the server answers")
            < all
        {}
        std::thread::sleep(Duration::from_millis(50));
        let mut answered = 0;
        let received = |c: &LocalEndpoint| c.stats().total.traffic.datagrams_received;
        let before = received(&client);
        if let Some(LocalEvent::Response { .. }) = client.poll(PATIENCE).unwrap() {
            answered += 1;
        }
        // What the test is about: a receive that took one datagram of
        // several (unless it was the batch that looks for a burst).
        exercised += usize::from(received(&client) - before == 1);
        // The application's own loop from here: zero-timeout polls until
        // `None`, again while `timeout()` says so; it would sleep next, so
        // nothing may wait unread.
        loop {
            while let Some(event) = client.poll(Some(Duration::ZERO)).unwrap() {
                match event {
                    LocalEvent::Response { .. } => answered += 1,
                    other => panic!("client got {other:?}"),
                }
            }
            let timeout = client.timeout();
            if timeout != Some(Duration::ZERO) {
                assert!(!readable(&client), "round {round}: datagrams left unread");
                break;
            }
        }
        assert_eq!(answered, burst, "round {round}");
    }
    assert!(exercised > 0, "no round took one datagram of several");
    let _ = client.poll(Some(Duration::from_millis(10)));
    server.join().unwrap();
}
