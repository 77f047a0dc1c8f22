//! A TLS client and server handshake driven against each other in memory.

use crate::util;

use std::time::Instant;

use smt_proto::handshake::{Handshake, HandshakeAcceptor, HandshakeError};
use smt_proto::{Role, SessionKeys};
use smt_tls::certs::Ca;
use smt_tls::{CipherSuite, KxGroup, TlsClient, TlsConfigError, TlsOptions, TlsServer};
use util::*;

/// Each side's `tx` seals what the other's `rx` opens, and not what its own
/// `rx` opens.
fn assert_keys_pair_up(client: &SessionKeys, server: &SessionKeys) {
    assert_eq!((client.role, server.role), (Role::Client, Role::Server));
    let request = b"request body\x17";
    let response = b"response body\x17";
    assert_eq!(
        open(&*server.rx, seal(&*client.tx, request)).as_deref(),
        Some(&request[..])
    );
    assert_eq!(
        open(&*client.rx, seal(&*server.tx, response)).as_deref(),
        Some(&response[..])
    );
    assert_eq!(open(&*client.rx, seal(&*client.tx, request)), None);
    assert_eq!(open(&*server.rx, seal(&*server.tx, response)), None);
}

fn complete(out: &Outcome) -> (&SessionKeys, &SessionKeys) {
    assert_eq!(out.client_error, None);
    assert_eq!(out.server_error, None);
    let client = out.client_keys.as_ref().expect("client keys");
    let server = out.server_keys.as_ref().expect("server keys");
    (client, server)
}

#[test]
fn default_handshake_gives_matching_aes128_keys_over_x25519mlkem768() {
    let pki = Pki::new();
    let mut client = pki.client().start(SERVER_NAME).unwrap();
    let mut server = pki.server().start().unwrap();
    let out = drive(&mut client, &mut server);
    let (ck, sk) = complete(&out);
    assert_keys_pair_up(ck, sk);
    for side in [&client, &server] {
        assert_eq!(side.cipher_suite(), Some(CipherSuite::Aes128GcmSha256));
        assert_eq!(side.kx_group(), Some(KxGroup::X25519Mlkem768));
        assert!(!side.is_handshaking());
    }
    assert_eq!(
        client.peer_certificate(),
        Some(pki.server.chain_der()[0]),
        "the client saw the server's leaf"
    );
    assert_eq!(server.peer_certificate(), None, "no client certificate");
    let shown = format!("{client:?}");
    assert!(
        shown.contains("Client")
            && shown.contains("X25519Mlkem768")
            && shown.contains("keys taken"),
        "{shown}"
    );
}

#[test]
fn aes256_suite_gives_matching_keys() {
    let pki = Pki::new();
    let options = TlsOptions::default().cipher_suites(&[CipherSuite::Aes256GcmSha384]);
    let mut client = pki.client_with(&options).start(SERVER_NAME).unwrap();
    let mut server = pki.server().start().unwrap();
    let out = drive(&mut client, &mut server);
    let (ck, sk) = complete(&out);
    assert_keys_pair_up(ck, sk);
    assert_eq!(client.cipher_suite(), Some(CipherSuite::Aes256GcmSha384));
    assert_eq!(server.cipher_suite(), Some(CipherSuite::Aes256GcmSha384));
}

#[test]
fn server_prefers_the_clients_first_suite() {
    let pki = Pki::new();
    let options = TlsOptions::default()
        .cipher_suites(&[CipherSuite::Aes256GcmSha384, CipherSuite::Aes128GcmSha256]);
    let mut client = pki.client_with(&options).start(SERVER_NAME).unwrap();
    let mut server = pki.server().start().unwrap();
    complete(&drive(&mut client, &mut server));
    assert_eq!(server.cipher_suite(), Some(CipherSuite::Aes256GcmSha384));
}

/// The hybrid's shares (1184-byte ML-KEM key in the ClientHello, 1088-byte
/// ciphertext in the ServerHello) make both first flights exceed one
/// 1200-byte datagram; the transport carries them as a byte stream.
#[test]
fn post_quantum_flights_are_large_and_sizes_are_reported() {
    let pki = Pki::new();
    let mut client = pki.client().start(SERVER_IP).unwrap();
    let mut server = pki.server().start().unwrap();
    let out = drive(&mut client, &mut server);
    complete(&out);
    assert_eq!(server.kx_group(), Some(KxGroup::X25519Mlkem768));
    let (c, s) = (out.sizes(Side::Client), out.sizes(Side::Server));
    // The server's second flight is its two session tickets.
    assert_eq!((c.len(), s.len()), (2, 2), "client {c:?} server {s:?}");
    assert!(s[0] > 1200, "server flight {} bytes", s[0]);
    assert!(c[0] > 1200, "ClientHello {} bytes", c[0]);
    println!(
        "handshake sizes (X25519MLKEM768, AES-128-GCM, ECDSA P-256): \
         client flight {} B, server flight {} B, client Finished {} B",
        c[0], s[0], c[1]
    );
}

#[test]
fn classical_groups_still_work() {
    let pki = Pki::new();
    for group in [KxGroup::X25519, KxGroup::Secp256r1] {
        let options = TlsOptions::default().kx_groups(&[group]);
        let mut client = pki.client_with(&options).start(SERVER_NAME).unwrap();
        let mut server = pki.server().start().unwrap();
        let out = drive(&mut client, &mut server);
        let (ck, sk) = complete(&out);
        assert_keys_pair_up(ck, sk);
        assert_eq!(server.kx_group(), Some(group));
        let server_flight = out.sizes(Side::Server)[0];
        println!("server flight with {group:?}: {server_flight} B");
        assert!(server_flight < 1200, "{group:?}: {server_flight}");
    }
}

/// A server without the client's first group asks for another share
/// (HelloRetryRequest): one more round trip, same result.
#[test]
fn hello_retry_request_completes() {
    let pki = Pki::new();
    let client_options = TlsOptions::default().kx_groups(&[KxGroup::X25519, KxGroup::Secp256r1]);
    let server_options = TlsOptions::default().kx_groups(&[KxGroup::Secp256r1]);
    let mut client = pki.client_with(&client_options).start(SERVER_NAME).unwrap();
    let mut server = pki.server_with(&server_options).start().unwrap();
    let out = drive(&mut client, &mut server);
    let (ck, sk) = complete(&out);
    assert_keys_pair_up(ck, sk);
    assert_eq!(client.kx_group(), Some(KxGroup::Secp256r1));
    assert_eq!(
        out.sizes(Side::Client).len(),
        3,
        "ClientHello twice, then Finished"
    );
}

#[test]
fn keys_are_not_ready_until_each_side_is_done() {
    let pki = Pki::new();
    let mut client = pki.client().start(SERVER_NAME).unwrap();
    let mut server = pki.server().start().unwrap();
    assert!(client.take_keys().is_none() && server.take_keys().is_none());

    let mut hello = Vec::new();
    client.write(&mut hello);
    assert!(client.take_keys().is_none());
    server.read(&hello).unwrap();
    assert!(server.take_keys().is_none());

    let mut flight = Vec::new();
    server.write(&mut flight);
    assert!(
        server.take_keys().is_none(),
        "server waits for the client's Finished"
    );
    client.read(&flight).unwrap();
    assert!(
        client.take_keys().is_none(),
        "client's Finished not written yet"
    );

    let mut finished = Vec::new();
    client.write(&mut finished);
    assert!(!finished.is_empty());
    let client_keys = client
        .take_keys()
        .expect("client keys once Finished is out");
    assert!(client.take_keys().is_none(), "keys are handed out once");
    assert!(server.take_keys().is_none());
    server.read(&finished).unwrap();
    assert!(
        server.take_keys().is_none(),
        "its session tickets are not written yet"
    );
    let mut tickets = Vec::new();
    server.write(&mut tickets);
    assert!(!tickets.is_empty(), "session tickets for resumption");
    let server_keys = server
        .take_keys()
        .expect("server keys after Finished and tickets");
    assert_keys_pair_up(&client_keys, &server_keys);
}

/// The handshake arrives in arbitrary pieces (the transport's packets):
/// one byte at a time still works.
#[test]
fn bytes_may_arrive_one_at_a_time() {
    let pki = Pki::new();
    let mut client = pki.client().start(SERVER_NAME).unwrap();
    let mut server = pki.server().start().unwrap();
    let (mut to_server, mut to_client) = (Vec::new(), Vec::new());
    for _ in 0..4 {
        client.write(&mut to_server);
        for b in to_server.drain(..) {
            server.read(&[b]).unwrap();
        }
        server.write(&mut to_client);
        for b in to_client.drain(..) {
            client.read(&[b]).unwrap();
        }
    }
    assert_keys_pair_up(&client.take_keys().unwrap(), &server.take_keys().unwrap());
}

#[test]
fn mutual_tls_succeeds_with_a_client_certificate() {
    let pki = Pki::new();
    let mut client = pki.mtls_client().start(SERVER_NAME).unwrap();
    let mut server = pki.mtls_server().start().unwrap();
    let out = drive(&mut client, &mut server);
    let (ck, sk) = complete(&out);
    assert_keys_pair_up(ck, sk);
    assert_eq!(server.peer_certificate(), Some(pki.client.chain_der()[0]));
    println!(
        "mutual TLS flight sizes: client {:?} B, server {:?} B",
        out.sizes(Side::Client),
        out.sizes(Side::Server)
    );
}

/// TLS 1.3: the client finishes before the server has judged its
/// certificate, so the client has keys; the server refuses, has none, and
/// its alert tells the client.
#[test]
fn mutual_tls_refuses_a_client_without_certificate() {
    let pki = Pki::new();
    let mut client = pki.client().start(SERVER_NAME).unwrap();
    let mut server = pki.mtls_server().start().unwrap();
    let out = drive(&mut client, &mut server);
    assert!(
        matches!(&out.server_error, Some(HandshakeError::BadCertificate(_))),
        "{:?}",
        out.server_error
    );
    assert!(out.server_keys.is_none());
    assert!(
        matches!(&out.client_error, Some(HandshakeError::Protocol(m)) if m.contains("CertificateRequired")),
        "{:?}",
        out.client_error
    );
}

#[test]
fn mutual_tls_refuses_a_certificate_from_another_ca() {
    let pki = Pki::new();
    let other = Pki::named("another CA");
    let chain = other.client.chain_pem();
    let key = other.client.key_pem();
    let client = TlsClient::new(
        pki.ca.cert_pem().as_bytes(),
        Some((chain.as_bytes(), key.as_bytes())),
    )
    .unwrap();
    let mut client = client.start(SERVER_NAME).unwrap();
    let mut server = pki.mtls_server().start().unwrap();
    let out = drive(&mut client, &mut server);
    assert!(
        matches!(&out.server_error, Some(HandshakeError::BadCertificate(m)) if m.contains("UnknownIssuer")),
        "{:?}",
        out.server_error
    );
    assert!(out.server_keys.is_none());
}

#[test]
fn untrusted_server_ca_is_a_bad_certificate_and_the_server_hears_why() {
    let pki = Pki::new();
    let stranger = Pki::named("stranger CA");
    let mut client = stranger.client().start(SERVER_NAME).unwrap();
    let mut server = pki.server().start().unwrap();
    let out = drive(&mut client, &mut server);
    assert!(
        matches!(&out.client_error, Some(HandshakeError::BadCertificate(m)) if m.contains("UnknownIssuer")),
        "{:?}",
        out.client_error
    );
    assert!(out.client_keys.is_none() && out.server_keys.is_none());
    // After its error the client still wrote its alert, which the server read.
    assert_eq!(out.flights.last().unwrap().from, Side::Client);
    assert!(
        matches!(&out.server_error, Some(HandshakeError::Protocol(m)) if m.contains("UnknownCA")),
        "{:?}",
        out.server_error
    );
    // The error sticks.
    assert_eq!(client.read(&[]), Err(out.client_error.clone().unwrap()));
}

/// A different CA that happens to have the trusted CA's name: the chain
/// is built to the trusted CA by name, and its signature check fails.
#[test]
fn a_namesake_ca_is_a_bad_certificate_too() {
    let pki = Pki::new();
    let namesake = Pki::new();
    let mut client = namesake.client().start(SERVER_NAME).unwrap();
    let mut server = pki.server().start().unwrap();
    let out = drive(&mut client, &mut server);
    assert!(
        matches!(&out.client_error, Some(HandshakeError::BadCertificate(m)) if m.contains("BadSignature")),
        "{:?}",
        out.client_error
    );
    assert!(out.client_keys.is_none() && out.server_keys.is_none());
}

#[test]
fn wrong_server_name_is_reported_as_such() {
    let pki = Pki::new();
    for name in ["other.smt.test", "127.0.0.2"] {
        let mut client = pki.client().start(name).unwrap();
        let mut server = pki.server().start().unwrap();
        let out = drive(&mut client, &mut server);
        assert!(
            matches!(&out.client_error, Some(HandshakeError::WrongName(m)) if m.contains(name)),
            "{name}: {:?}",
            out.client_error
        );
        assert!(out.client_keys.is_none() && out.server_keys.is_none());
    }
}

#[test]
fn server_may_be_named_by_dns_name_or_ip_address() {
    let pki = Pki::new();
    for name in [SERVER_NAME, SERVER_IP] {
        let mut client = pki.client().start(name).unwrap();
        let mut server = pki.server().start().unwrap();
        complete(&drive(&mut client, &mut server));
    }
}

/// One flipped bit anywhere in the server's flight: the client fails with
/// a protocol error and nobody gets keys.
#[test]
fn tampered_server_flight_is_a_protocol_error() {
    let pki = Pki::new();
    // Offsets into the flight: in the ServerHello's key share, and in the
    // encrypted records (certificate, its signature, the Finished's tag).
    let positions: [fn(usize) -> usize; 4] = [|_| 100, |n| n / 2, |n| n - 20, |n| n - 1];
    for position in positions {
        let mut client = pki.client().start(SERVER_NAME).unwrap();
        let mut server = pki.server().start().unwrap();
        let mut at = 0;
        let out = drive_with(&mut client, &mut server, |side, i, bytes| {
            if side == Side::Server && i == 0 {
                at = position(bytes.len());
                bytes[at] ^= 0x01;
            }
        });
        assert!(
            matches!(&out.client_error, Some(HandshakeError::Protocol(_))),
            "byte {at}: {:?}",
            out.client_error
        );
        assert!(
            out.client_keys.is_none() && out.server_keys.is_none(),
            "byte {at}"
        );
    }
}

#[test]
fn key_update_epochs_agree_between_the_sides() {
    let pki = Pki::new();
    for suite in [CipherSuite::Aes128GcmSha256, CipherSuite::Aes256GcmSha384] {
        let options = TlsOptions::default().cipher_suites(&[suite]);
        let mut client = pki.client_with(&options).start(SERVER_NAME).unwrap();
        let mut server = pki.server().start().unwrap();
        let out = drive(&mut client, &mut server);
        let (ck, sk) = complete(&out);
        let (mut cu, mut su) = (ck.update.clone().unwrap(), sk.update.clone().unwrap());
        let mut previous_c2s = ck.tx.clone();
        for epoch in 1..=3 {
            let (c, s) = (cu.next_epoch(), su.next_epoch());
            let up = seal(&*c.client_to_server, b"up\x17");
            assert!(
                open(&*s.client_to_server, up.clone()).is_some(),
                "{suite:?} epoch {epoch}"
            );
            let down = seal(&*s.server_to_client, b"down\x17");
            assert!(
                open(&*c.server_to_client, down).is_some(),
                "{suite:?} epoch {epoch}"
            );
            assert!(
                open(&*c.server_to_client, up.clone()).is_none(),
                "directions differ"
            );
            assert!(open(&*previous_c2s, up).is_none(), "epochs differ");
            previous_c2s = c.client_to_server.clone();
            (cu, su) = (c.update.unwrap(), s.update.unwrap());
        }
    }
}

#[test]
fn acceptor_makes_independent_server_handshakes() {
    let pki = Pki::new();
    let mut acceptor = pki.server();
    let tls = pki.client();
    let peer = "127.0.0.1:4000".parse().unwrap();
    let mut keys = Vec::new();
    for _ in 0..2 {
        let mut server = acceptor.accept(peer).expect("accepted");
        let mut client = tls.handshake(SERVER_NAME).unwrap();
        let out = drive(&mut *client, &mut *server);
        let (ck, sk) = complete(&out);
        assert_keys_pair_up(ck, sk);
        keys.push(out.client_keys.unwrap());
    }
    assert!(
        open(&*keys[1].rx, seal(&*keys[0].tx, b"x\x17")).is_none(),
        "each handshake has its own keys"
    );
}

#[test]
fn der_inputs_work_like_pem() {
    let pki = Pki::new();
    let client = TlsClient::new(pki.ca.cert_der(), None).unwrap();
    let server = TlsServer::new(pki.server.chain_der()[0], pki.server.key_der(), None).unwrap();
    let mut c = client.start(SERVER_NAME).unwrap();
    let mut s = server.start().unwrap();
    complete(&drive(&mut c, &mut s));
}

#[test]
fn configuration_mistakes_are_reported() {
    let pki = Pki::new();
    let chain = pki.server.chain_pem();
    let key = pki.server.key_pem();
    let other_key = pki.client.key_pem();
    let ca = pki.ca.cert_pem();

    let err = TlsClient::new(b"", None).unwrap_err();
    assert!(matches!(err, TlsConfigError::NoCertificates(_)), "{err}");
    let err = TlsClient::new(
        b"-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n",
        None,
    )
    .unwrap_err();
    assert!(matches!(err, TlsConfigError::NoCertificates(_)), "{err}");
    let err = TlsServer::new(chain.as_bytes(), b"not a key", None).unwrap_err();
    assert!(matches!(err, TlsConfigError::BadPrivateKey(_)), "{err}");
    let err = TlsServer::new(chain.as_bytes(), other_key.as_bytes(), None).unwrap_err();
    assert!(matches!(err, TlsConfigError::BadPrivateKey(_)), "{err}");
    let err = TlsClient::new(ca.as_bytes(), None)
        .unwrap()
        .start("not a name!")
        .unwrap_err();
    assert!(matches!(err, TlsConfigError::BadServerName(_)), "{err}");
    let err = TlsClient::with_options(
        ca.as_bytes(),
        None,
        &TlsOptions::default().cipher_suites(&[]),
    )
    .unwrap_err();
    assert!(matches!(err, TlsConfigError::NoCipherSuites), "{err}");
    let err = TlsServer::with_options(
        chain.as_bytes(),
        key.as_bytes(),
        None,
        &TlsOptions::default().kx_groups(&[]),
    )
    .unwrap_err();
    assert!(matches!(err, TlsConfigError::NoKxGroups), "{err}");
}

/// A CA and a certificate saved to PEM and loaded back work like the
/// originals: the reloaded CA issues certificates the original's clients
/// trust.
#[test]
fn pem_round_trips_for_ca_and_issued_certificates() {
    let ca = Ca::generate("round trip CA").unwrap();
    let reloaded = Ca::from_pem(&ca.to_pem()).unwrap();
    assert_eq!(reloaded.cert_der(), ca.cert_der());
    assert_eq!(reloaded.cert_pem(), ca.cert_pem());

    let issued = reloaded.issue(&["rt.smt.test", "::1"], false).unwrap();
    let again = smt_tls::certs::IssuedCert::from_pem(&issued.to_pem()).unwrap();
    assert_eq!(again, issued);

    let client = TlsClient::new(ca.cert_pem().as_bytes(), None).unwrap();
    let server = TlsServer::new(
        again.chain_pem().as_bytes(),
        again.key_pem().as_bytes(),
        None,
    )
    .unwrap();
    for name in ["rt.smt.test", "::1"] {
        let mut c = client.start(name).unwrap();
        let mut s = server.start().unwrap();
        complete(&drive(&mut c, &mut s));
    }
}

#[test]
fn a_server_certificate_does_not_authenticate_a_client() {
    let pki = Pki::new();
    // The server's own certificate (serverAuth only) presented as a client's.
    let chain = pki.server.chain_pem();
    let key = pki.server.key_pem();
    let client = TlsClient::new(
        pki.ca.cert_pem().as_bytes(),
        Some((chain.as_bytes(), key.as_bytes())),
    )
    .unwrap();
    let mut c = client.start(SERVER_NAME).unwrap();
    let mut s = pki.mtls_server().start().unwrap();
    let out = drive(&mut c, &mut s);
    assert!(
        matches!(&out.server_error, Some(HandshakeError::BadCertificate(_))),
        "{:?}",
        out.server_error
    );
}

/// Both sides' CPU in one thread, from the first ClientHello byte to both
/// sides holding keys. Printed, not asserted.
#[test]
fn handshake_timing() {
    let pki = Pki::new();
    let (tls, acceptor) = (pki.client(), pki.server());
    let peer = "127.0.0.1:4000".parse().unwrap();
    let mut acceptor = acceptor;
    const N: u32 = 50;
    let mut total = std::time::Duration::ZERO;
    for _ in 0..N {
        let start = Instant::now();
        let mut client = tls.handshake(SERVER_IP).unwrap();
        let mut server = acceptor.accept(peer).unwrap();
        let out = drive(&mut *client, &mut *server);
        total += start.elapsed();
        assert!(out.client_keys.is_some() && out.server_keys.is_some());
    }
    println!(
        "full handshake (client + server CPU, one thread, X25519MLKEM768, ECDSA P-256): {:?} mean over {N}",
        total / N
    );
}
