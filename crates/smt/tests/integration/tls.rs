//! Sessions established by a real TLS 1.3 handshake carried in SMT
//! HANDSHAKE packets over real sockets: a first call to an unknown peer
//! just works; failures are clear errors with no session.

use std::net::SocketAddr;
use std::time::Duration;

use smt::{Endpoint, EndpointConfig, Error, HandshakeError};
use smt_relay::relay::{Impairment, Relay, RelayConfig};
use smt_tls::certs::Ca;
use smt_tls::{TlsClient, TlsServer};

fn bind() -> Endpoint {
    Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default()).unwrap()
}

/// A TLS echo server for `names`, with its CA; `client_ca` requires
/// client certificates from that CA.
fn tls_server(ca: &Ca, names: &[&str], client_ca: Option<&Ca>) -> Endpoint {
    let cert = ca.issue(names, false).unwrap();
    let server = bind();
    let tls = TlsServer::new(
        cert.chain_pem().as_bytes(),
        cert.key_pem().as_bytes(),
        client_ca.map(|c| c.cert_pem().as_bytes()),
    )
    .unwrap();
    server.set_tls_server(tls).unwrap();
    let s = server.clone();
    std::thread::spawn(move || {
        while let Ok(req) = s.accept() {
            let up = req.data().to_ascii_uppercase();
            let _ = req.respond(&up);
        }
    });
    server
}

fn tls_client(ca: &Ca) -> Endpoint {
    let client = bind();
    client
        .set_tls_client(TlsClient::new(ca.cert_pem().as_bytes(), None).unwrap())
        .unwrap();
    client
}

#[test]
fn first_call_runs_a_tls_handshake_and_later_calls_reuse_the_session() {
    let ca = Ca::generate("smt test ca a").unwrap();
    let server = tls_server(&ca, &["127.0.0.1"], None);
    let client = tls_client(&ca);
    for i in 0..20 {
        let msg = format!("over tls {i}");
        assert_eq!(
            client.call(server.local_addr(), msg.as_bytes()).unwrap(),
            msg.to_ascii_uppercase().as_bytes()
        );
    }
    let stats = client.stats().unwrap().total;
    assert_eq!(stats.handshakes.completed, 1);
    let sstats = server.stats().unwrap().total;
    assert_eq!(sstats.handshakes.completed, 1);
}

#[test]
fn concurrent_first_calls_share_one_handshake() {
    let ca = Ca::generate("smt test ca b").unwrap();
    let server = tls_server(&ca, &["127.0.0.1"], None);
    let client = tls_client(&ca);
    let to = server.local_addr();
    let threads: Vec<_> = (0..16)
        .map(|i| {
            let c = client.clone();
            std::thread::spawn(move || c.call(to, format!("concurrent {i}").as_bytes()))
        })
        .collect();
    for t in threads {
        t.join().unwrap().unwrap();
    }
    assert_eq!(client.stats().unwrap().total.handshakes.completed, 1);
}

fn handshake_error(result: Result<smt::Bytes, Error>) -> HandshakeError {
    match result {
        Err(Error::Handshake(e)) => e,
        other => panic!("expected a handshake error, got {other:?}"),
    }
}

#[test]
fn untrusted_ca_fails_with_bad_certificate() {
    let server_ca = Ca::generate("smt test ca c").unwrap();
    let other_ca = Ca::generate("smt test ca other").unwrap();
    let server = tls_server(&server_ca, &["127.0.0.1"], None);
    let client = tls_client(&other_ca);
    let e = handshake_error(client.call(server.local_addr(), b"x"));
    assert!(matches!(e, HandshakeError::BadCertificate(_)), "{e}");
    assert!(e.to_string().contains("bad certificate"));
    // No session was installed: the next call handshakes (and fails) again.
    assert!(matches!(
        client.call(server.local_addr(), b"y"),
        Err(Error::Handshake(_))
    ));
}

#[test]
fn wrong_name_fails_with_wrong_name() {
    let ca = Ca::generate("smt test ca d").unwrap();
    let server = tls_server(&ca, &["10.99.99.99", "db.example"], None);
    let client = tls_client(&ca);
    let e = handshake_error(client.call(server.local_addr(), b"x"));
    assert!(matches!(e, HandshakeError::WrongName(_)), "{e}");
}

#[test]
fn mutual_tls_requires_a_client_certificate() {
    let ca = Ca::generate("smt test ca e").unwrap();
    let server = tls_server(&ca, &["127.0.0.1"], Some(&ca));
    // With a client certificate from the CA: works.
    let with_cert = bind();
    let cc = ca.issue(&["client-1"], true).unwrap();
    let tls = TlsClient::new(
        ca.cert_pem().as_bytes(),
        Some((cc.chain_pem().as_bytes(), cc.key_pem().as_bytes())),
    )
    .unwrap();
    with_cert.set_tls_client(tls).unwrap();
    assert_eq!(
        with_cert.call(server.local_addr(), b"mesh").unwrap(),
        &b"MESH"[..]
    );
    // Without: the server refuses the handshake; the call fails (the client
    // may hold keys briefly, but no request is ever executed).
    let without = tls_client(&ca);
    assert!(without.call(server.local_addr(), b"intruder").is_err());
}

#[test]
fn handshake_survives_loss_and_reordering() {
    let ca = Ca::generate("smt test ca f").unwrap();
    let server = tls_server(&ca, &["127.0.0.1"], None);
    let impair = Impairment {
        loss: 0.15,
        reorder: 0.2,
        reorder_delay: Duration::from_micros(500),
        ..Impairment::default()
    };
    let relay = Relay::spawn(RelayConfig::new(server.local_addr()).both_ways(impair)).unwrap();
    // The client calls the relay, so the certificate's IP (127.0.0.1) still matches.
    let client = tls_client(&ca);
    let to: SocketAddr = relay.local_addr();
    for i in 0..20 {
        let msg = format!("lossy {i}");
        assert_eq!(
            client.call(to, msg.as_bytes()).unwrap(),
            msg.to_ascii_uppercase().as_bytes()
        );
    }
    drop(relay);
}

#[test]
fn plaintext_is_never_sent_before_keys_exist() {
    // Capture everything on the wire during a first call: the request's
    // bytes must not appear anywhere (not in handshake packets either).
    let ca = Ca::generate("smt test ca g").unwrap();
    let server = tls_server(&ca, &["127.0.0.1"], None);
    let relay = Relay::spawn(RelayConfig {
        capture: true,
        ..RelayConfig::new(server.local_addr())
    })
    .unwrap();
    let client = tls_client(&ca);
    let marker = b"EARLY-SECRET-MARKER-0123456789";
    assert_eq!(
        client.call(relay.local_addr(), marker).unwrap(),
        marker.to_ascii_uppercase()
    );
    let captured = relay.captured();
    assert!(!captured.is_empty());
    for c in &captured {
        assert!(
            !c.bytes.windows(marker.len()).any(|w| w == marker),
            "plaintext on the wire"
        );
    }
}

#[test]
fn a_client_restarting_on_the_same_address_handshakes_again() {
    let ca = Ca::generate("smt test ca h").unwrap();
    let server = tls_server(&ca, &["127.0.0.1"], None);
    let first = tls_client(&ca);
    let addr = first.local_addr();
    assert_eq!(
        first.call(server.local_addr(), b"one").unwrap(),
        &b"ONE"[..]
    );
    first.close();
    drop(first);
    let again = Endpoint::bind(addr, EndpointConfig::default()).unwrap();
    again
        .set_tls_client(TlsClient::new(ca.cert_pem().as_bytes(), None).unwrap())
        .unwrap();
    assert_eq!(
        again.call(server.local_addr(), b"two").unwrap(),
        &b"TWO"[..]
    );
    assert_eq!(server.stats().unwrap().total.handshakes.completed, 2);
}

#[test]
fn silent_peer_fails_the_handshake_with_a_timeout() {
    let ca = Ca::generate("smt test ca i").unwrap();
    // A bound UDP socket that never answers.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let client = tls_client(&ca);
    let e = handshake_error(client.call(silent.local_addr().unwrap(), b"anyone?"));
    assert_eq!(e, HandshakeError::Timeout);
}

/// The name a client gives is the name verified: a server whose
/// certificate names only `server.smt.test` is refused when called by
/// address (the certificate does not name 127.0.0.1) and accepted when
/// called by `(name, address)`; a wrong name is refused.
#[test]
fn a_server_called_by_name_is_verified_against_that_name() {
    let ca = Ca::generate("smt test ca by name").unwrap();
    let server = tls_server(&ca, &["server.smt.test"], None);
    let to = server.local_addr();
    let by_address = tls_client(&ca);
    assert!(matches!(
        handshake_error(by_address.call(to, b"by address")),
        HandshakeError::WrongName(_)
    ));
    let by_name = tls_client(&ca);
    by_name
        .set_server_name(to, "server.smt.test".try_into().unwrap())
        .unwrap();
    assert_eq!(by_name.call(to, b"by name").unwrap(), &b"BY NAME"[..]);
    let wrong = tls_client(&ca);
    wrong
        .set_server_name(to, "other.smt.test".try_into().unwrap())
        .unwrap();
    assert!(matches!(
        handshake_error(wrong.call(to, b"wrong name")),
        HandshakeError::WrongName(_)
    ));
}

/// `resolve("localhost:PORT")` looks the name up and has TLS verify the
/// certificate against "localhost", not the address it resolved to.
#[test]
fn a_resolved_host_name_is_the_name_verified() {
    let ca = Ca::generate("smt test ca resolve").unwrap();
    let server = tls_server(&ca, &["localhost"], None);
    let client = tls_client(&ca);
    let to = client
        .resolve(&format!("localhost:{}", server.local_addr().port()))
        .unwrap();
    assert_eq!(to, server.local_addr());
    assert_eq!(client.call(to, b"resolved").unwrap(), &b"RESOLVED"[..]);
}

/// A caller's own rustls `ClientConfig` (here a webpki verifier over the
/// caller's roots; a platform verifier plugs in the same way) drives the
/// endpoint's TLS handshakes, and its key log sees the secrets.
#[test]
fn a_callers_rustls_client_config_establishes_sessions() {
    use smt::tls::rustls;
    use std::sync::Arc;

    #[derive(Debug, Default)]
    struct Count(std::sync::atomic::AtomicUsize);
    impl rustls::KeyLog for Count {
        fn log(&self, _: &str, _: &[u8], _: &[u8]) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    let ca = Ca::generate("smt test ca rustls config").unwrap();
    let server = tls_server(&ca, &["server.smt.test"], None);
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.cert_der().to_vec().into()).unwrap();
    let provider = smt::tls::crypto_provider();
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_webpki_verifier(verifier)
        .with_no_client_auth();
    let log = Arc::new(Count::default());
    config.key_log = log.clone();
    let client = bind();
    client
        .set_tls_client(smt::tls::TlsClient::from_config(Arc::new(config)).unwrap())
        .unwrap();
    let to = server.local_addr();
    client
        .set_server_name(to, "server.smt.test".try_into().unwrap())
        .unwrap();
    assert_eq!(client.call(to, b"own config").unwrap(), &b"OWN CONFIG"[..]);
    assert!(log.0.load(std::sync::atomic::Ordering::Relaxed) >= 5);
}
