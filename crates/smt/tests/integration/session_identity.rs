//! Who sent a request (issue #24 item 4): every request carries its
//! session — an ID new for every session, also from one address, how the
//! session was established, and what the handshake proved (a client's
//! verified certificate with mutual TLS, the server name it asked for).
//! Real TLS 1.3 handshakes over loopback sockets.

use std::net::SocketAddr;
use std::sync::mpsc;

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::{Endpoint, EndpointConfig, SessionInfo, SessionOrigin};
use smt_tls::certs::Ca;
use smt_tls::{ServerName, TlsClient, TlsServer};

fn bind_at(addr: SocketAddr) -> Endpoint {
    Endpoint::bind(addr, EndpointConfig::default()).unwrap()
}

fn bind() -> Endpoint {
    bind_at("127.0.0.1:0".parse().unwrap())
}

/// A server that answers every request and reports the session it came in.
fn reporting_server(server: &Endpoint) -> mpsc::Receiver<SessionInfo> {
    let (tx, rx) = mpsc::channel();
    let s = server.clone();
    std::thread::spawn(move || {
        while let Ok(req) = s.accept() {
            let _ = tx.send(SessionInfo::clone(req.session()));
            let _ = req.respond(b"ok");
        }
    });
    rx
}

#[test]
fn a_mutual_tls_request_carries_the_clients_certificate_and_sni() {
    let ca = Ca::generate("smt session ca").unwrap();
    let server = bind();
    let cert = ca.issue(&["kv.example"], false).unwrap();
    let tls = TlsServer::new(
        cert.chain_pem().as_bytes(),
        cert.key_pem().as_bytes(),
        Some(ca.cert_pem().as_bytes()),
    )
    .unwrap();
    server.set_tls_server(tls).unwrap();
    let sessions = reporting_server(&server);

    let client = bind();
    let issued = ca.issue(&["client-7"], true).unwrap();
    let tls = TlsClient::new(
        ca.cert_pem().as_bytes(),
        Some((issued.chain_pem().as_bytes(), issued.key_pem().as_bytes())),
    )
    .unwrap();
    client.set_tls_client(tls).unwrap();
    let to = server.local_addr();
    let name = ServerName::try_from("kv.example").unwrap();
    client.set_server_name(to, name).unwrap();
    client.call(to, b"hello").unwrap();
    client.call(to, b"again").unwrap();

    let first = sessions.recv().unwrap();
    let second = sessions.recv().unwrap();
    assert_eq!(first.peer(), client.local_addr());
    assert_eq!(first.origin(), SessionOrigin::Tls);
    assert_eq!(
        first.peer_certificate(),
        issued.chain_der().first().copied()
    );
    assert_eq!(first.server_name(), Some("kv.example"));
    assert_eq!(first.id(), second.id(), "one session, one ID");
}

#[test]
fn a_new_session_from_the_same_address_gets_a_new_id() {
    let server = bind();
    let sessions = reporting_server(&server);
    let client = bind();
    let addr = client.local_addr();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(addr, sk).unwrap();
    client.call(server.local_addr(), b"one").unwrap();
    let first = sessions.recv().unwrap();
    assert_eq!(first.origin(), SessionOrigin::Installed);
    assert!(first.peer_certificate().is_none());

    // The client restarts on the same address with new keys.
    client.close();
    drop(client);
    let again = bind_at(addr);
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    again.install_session(server.local_addr(), ck).unwrap();
    server.install_session(addr, sk).unwrap();
    again.call(server.local_addr(), b"two").unwrap();
    let second = sessions.recv().unwrap();
    assert_eq!(second.peer(), first.peer());
    assert_ne!(second.id(), first.id(), "a new session is not the old one");
}

#[test]
fn a_psk_session_says_so() {
    let master = [9u8; 32];
    let server = bind();
    let acceptor = smt::ServerAcceptor::new(None, None).with_psk(&master, AeadAlgorithm::Aes128Gcm);
    server.set_handshake_acceptor(Box::new(acceptor)).unwrap();
    let sessions = reporting_server(&server);
    let client = bind();
    client
        .set_psk_client(smt::keys::PskClient::new(&master, AeadAlgorithm::Aes128Gcm))
        .unwrap();
    client.call(server.local_addr(), b"psk").unwrap();
    assert_eq!(sessions.recv().unwrap().origin(), SessionOrigin::Psk);
}
