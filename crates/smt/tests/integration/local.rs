//! The caller-driven endpoint over real loopback UDP: against itself and
//! against the threaded endpoint, one call at a time and many outstanding.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::{Endpoint, EndpointConfig, Error, LocalEndpoint, LocalEvent, SendError};

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A server thread that answers every request with its bytes reversed
/// until it has served `count`.
fn spawn_local_server(
    mut server: LocalEndpoint,
    count: usize,
) -> std::thread::JoinHandle<LocalEndpoint> {
    std::thread::spawn(move || {
        let mut served = 0;
        while served < count {
            match server.poll(Some(Duration::from_secs(10))).unwrap() {
                Some(LocalEvent::Request { request, data }) => {
                    let mut data = data.to_vec();
                    data.reverse();
                    server.respond(request, &data).unwrap();
                    served += 1;
                }
                Some(other) => panic!("server got {other:?}"),
                None => panic!("server timed out after {served} requests"),
            }
        }
        // Let the last responses' acknowledgements come in.
        let _ = server.poll(Some(Duration::from_millis(50)));
        server
    })
}

fn local_pair() -> (LocalEndpoint, LocalEndpoint) {
    let mut client = LocalEndpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    let mut server = LocalEndpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    (client, server)
}

fn request(i: usize) -> Vec<u8> {
    let len = [1, 64, 1000, 5000, 70_000][i % 5];
    (0..len).map(|b| (b + i) as u8).collect()
}

#[test]
fn one_call_at_a_time_between_local_endpoints() {
    let (mut client, server) = local_pair();
    let server_addr = server.local_addr();
    let server = spawn_local_server(server, 200);
    for i in 0..200 {
        let req = request(i);
        let call = client.call(server_addr, &req).unwrap();
        match client.poll(Some(Duration::from_secs(10))).unwrap() {
            Some(LocalEvent::Response { call: c, data }) => {
                assert_eq!(c, call);
                let mut expect = req.clone();
                expect.reverse();
                assert_eq!(data, expect, "response {i}");
            }
            other => panic!("call {i}: {other:?}"),
        }
    }
    // Delayed ACKs leave from the client's next polls.
    let _ = client.poll(Some(Duration::from_millis(10)));
    let server = server.join().unwrap();
    assert_eq!(server.in_flight(), (0, 0));
    assert_eq!(client.stats().total.drops.total(), 0);
}

#[test]
fn many_outstanding_calls_including_a_megabyte() {
    let (mut client, server) = local_pair();
    let server_addr = server.local_addr();
    let total = 300;
    let server = spawn_local_server(server, total);
    let mut pending = HashMap::new();
    let mut next = 0;
    let mut done = 0;
    while done < total {
        while next < total && pending.len() < 32 {
            let mut req = request(next);
            if next == 7 {
                req = vec![0x5a; 1 << 20];
            }
            pending.insert(client.call(server_addr, &req).unwrap(), req);
            next += 1;
        }
        match client.poll(Some(Duration::from_secs(10))).unwrap() {
            Some(LocalEvent::Response { call, data }) => {
                let mut expect = pending.remove(&call).expect("a response per call");
                expect.reverse();
                assert_eq!(data, expect);
                done += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    server.join().unwrap();
}

#[test]
fn local_client_calls_a_threaded_server() {
    let mut client = LocalEndpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    let server = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes256Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    let acceptor = server.clone();
    std::thread::spawn(move || {
        while let Ok(req) = acceptor.accept() {
            let reply = req.data().to_ascii_uppercase();
            let _ = req.respond(&reply);
        }
    });
    for _ in 0..20 {
        client.call(server.local_addr(), b"hello").unwrap();
        match client.poll(Some(Duration::from_secs(10))).unwrap() {
            Some(LocalEvent::Response { data, .. }) => assert_eq!(data, &b"HELLO"[..]),
            other => panic!("{other:?}"),
        }
    }
    server.close();
}

#[test]
fn a_call_without_a_session_says_so() {
    let mut client = LocalEndpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    let err = client
        .call("127.0.0.1:9".parse().unwrap(), b"x")
        .unwrap_err();
    assert!(matches!(err, Error::Send(SendError::NoSession)), "{err}");
    assert!(err.to_string().contains("session"), "{err}");
}

#[test]
fn poll_with_nothing_to_do_returns_none_after_the_timeout() {
    let (mut client, _server) = local_pair();
    assert!(client.poll(Some(Duration::ZERO)).unwrap().is_none());
    assert!(client
        .poll(Some(Duration::from_millis(5)))
        .unwrap()
        .is_none());
}

#[test]
fn a_call_to_a_silent_peer_fails_instead_of_hanging() {
    let mut config = EndpointConfig::default();
    config.protocol_mut().set_tick(Duration::from_millis(2));
    let mut client = LocalEndpoint::bind(any_port(), config).unwrap();
    let silent = std::net::UdpSocket::bind(any_port()).unwrap();
    let (ck, _) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client
        .install_session(silent.local_addr().unwrap(), ck)
        .unwrap();
    let call = client
        .call(silent.local_addr().unwrap(), b"anyone?")
        .unwrap();
    match client.poll(Some(Duration::from_secs(30))).unwrap() {
        Some(LocalEvent::Failed { call: c, error }) => {
            assert_eq!(c, call);
            assert!(matches!(error, Error::Rpc(_)), "{error}");
        }
        other => panic!("{other:?}"),
    }
}

/// A threaded server that answers with the request upper-cased, with
/// `acceptor` answering handshakes.
fn handshaking_server(acceptor: Box<dyn smt_proto::HandshakeAcceptor>) -> Endpoint {
    let server = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    server.set_handshake_acceptor(acceptor).unwrap();
    let s = server.clone();
    std::thread::spawn(move || {
        while let Ok(req) = s.accept() {
            let up = req.data().to_ascii_uppercase();
            let _ = req.respond(&up);
        }
    });
    server
}

/// A TLS server for 127.0.0.1 with a certificate from `ca`.
fn tls_server(ca: &smt_tls::certs::Ca) -> Endpoint {
    let cert = ca.issue(&["127.0.0.1"], false).unwrap();
    let tls = smt_tls::TlsServer::new(cert.chain_pem().as_bytes(), cert.key_pem().as_bytes(), None)
        .unwrap();
    handshaking_server(Box::new(tls))
}

/// A local client that starts TLS handshakes trusting `ca`.
fn tls_client(ca: &smt_tls::certs::Ca) -> LocalEndpoint {
    let mut client = LocalEndpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    client.set_tls_client(smt_tls::TlsClient::new(ca.cert_pem().as_bytes(), None).unwrap());
    client
}

/// Calls `to` `n` times one at a time; every call must succeed.
fn call_upper(client: &mut LocalEndpoint, to: SocketAddr, n: usize) {
    for i in 0..n {
        let msg = format!("call {i}");
        let call = client.call(to, msg.as_bytes()).unwrap();
        match client.poll(Some(Duration::from_secs(20))).unwrap() {
            Some(LocalEvent::Response { call: c, data }) => {
                assert_eq!(c, call);
                assert_eq!(data, msg.to_ascii_uppercase().as_bytes());
            }
            other => panic!("call {i}: {other:?}"),
        }
    }
}

#[test]
fn a_local_endpoint_starts_a_tls_handshake_on_its_first_call() {
    let ca = smt_tls::certs::Ca::generate("smt local tls ca").unwrap();
    let server = tls_server(&ca);
    let mut client = tls_client(&ca);
    call_upper(&mut client, server.local_addr(), 10);
    assert_eq!(client.stats().total.handshakes.completed, 1);
    assert_eq!(server.stats().unwrap().total.handshakes.completed, 1);
}

#[test]
fn calls_made_before_the_tls_handshake_ends_all_leave_once_it_does() {
    let ca = smt_tls::certs::Ca::generate("smt local tls ca 2").unwrap();
    let server = tls_server(&ca);
    let mut client = tls_client(&ca);
    let calls: HashMap<_, _> = (0..8)
        .map(|i| {
            let msg = format!("early {i}");
            (
                client.call(server.local_addr(), msg.as_bytes()).unwrap(),
                msg,
            )
        })
        .collect();
    let mut done = 0;
    while done < calls.len() {
        match client.poll(Some(Duration::from_secs(20))).unwrap() {
            Some(LocalEvent::Response { call, data }) => {
                assert_eq!(data, calls[&call].to_ascii_uppercase().as_bytes());
                done += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(client.stats().total.handshakes.completed, 1);
}

#[test]
fn a_failed_tls_handshake_fails_the_local_call() {
    let server_ca = smt_tls::certs::Ca::generate("smt local server ca").unwrap();
    let other_ca = smt_tls::certs::Ca::generate("smt local other ca").unwrap();
    let server = tls_server(&server_ca);
    let mut client = tls_client(&other_ca);
    let call = client.call(server.local_addr(), b"x").unwrap();
    match client.poll(Some(Duration::from_secs(20))).unwrap() {
        Some(LocalEvent::Failed { call: c, error }) => {
            assert_eq!(c, call);
            assert!(matches!(error, Error::Handshake(_)), "{error}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_local_endpoint_starts_a_psk_handshake_on_its_first_call() {
    const MASTER: &[u8] = b"a local endpoint's pre-shared master secret";
    let acceptor = smt::ServerAcceptor::new(None, None).with_psk(MASTER, AeadAlgorithm::Aes128Gcm);
    let server = handshaking_server(Box::new(acceptor));
    let mut client = LocalEndpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    client.set_psk_client(smt::keys::PskClient::new(MASTER, AeadAlgorithm::Aes128Gcm));
    call_upper(&mut client, server.local_addr(), 10);
    assert_eq!(client.stats().total.handshakes.completed, 1);
    assert_eq!(server.stats().unwrap().total.handshakes.completed, 1);
}

/// An application with its own readiness loop (here mio, edge-triggered)
/// polls with a zero timeout until `None` whenever the socket says
/// readable: every response still arrives.
#[test]
fn an_application_driving_from_its_own_epoll_gets_every_response() {
    use std::os::fd::{AsFd, AsRawFd};

    let (mut client, server) = local_pair();
    let server_addr = server.local_addr();
    let server = spawn_local_server(server, 300);
    let mut events = mio::Events::with_capacity(8);
    let mut readiness = mio::Poll::new().unwrap();
    let fd = client.as_fd().as_raw_fd();
    readiness
        .registry()
        .register(
            &mut mio::unix::SourceFd(&fd),
            mio::Token(0),
            mio::Interest::READABLE,
        )
        .unwrap();
    let mut answered = 0;
    for round in 0..10 {
        for i in 0..30 {
            client
                .call(server_addr, request(round * 30 + i % 3))
                .unwrap();
        }
        client.flush().unwrap();
        let goal = answered + 30;
        let mut quiet = 0;
        while answered < goal {
            // The protocol's timers need a turn now and then (the 100 ms),
            // and a lost response must fail the test, not hang it.
            readiness
                .poll(&mut events, Some(Duration::from_millis(100)))
                .unwrap();
            quiet = if events.is_empty() { quiet + 1 } else { 0 };
            assert!(quiet < 100, "{answered} of {goal} responses, then silence");
            while let Some(event) = client.poll(Some(Duration::ZERO)).unwrap() {
                match event {
                    LocalEvent::Response { .. } => answered += 1,
                    other => panic!("client got {other:?}"),
                }
            }
        }
    }
    let _ = client.poll(Some(Duration::from_millis(10)));
    server.join().unwrap();
}
