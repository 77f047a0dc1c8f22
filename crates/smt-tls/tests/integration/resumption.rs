//! TLS 1.3 session resumption over the SMT handshake stream: the server's
//! tickets follow its Finished in the stream; a later handshake from the
//! same client offers one and resumes (PSK with (EC)DHE).

use crate::util;

use smt_tls::TlsHandshake;
use util::{drive, Pki};

#[test]
fn second_handshake_resumes_the_first_session() {
    let pki = Pki::new();
    let (client, server) = (pki.client(), pki.server());
    let mut c1: TlsHandshake = client.start("127.0.0.1").unwrap();
    let mut s1: TlsHandshake = server.start().unwrap();
    let first = drive(&mut c1, &mut s1);
    assert!(first.client_keys.is_some() && first.server_keys.is_some());
    assert!(!c1.is_resumed());
    let mut c2: TlsHandshake = client.start("127.0.0.1").unwrap();
    let mut s2: TlsHandshake = server.start().unwrap();
    let second = drive(&mut c2, &mut s2);
    assert!(second.client_keys.is_some() && second.server_keys.is_some());
    assert!(
        c2.is_resumed() && s2.is_resumed(),
        "the second handshake resumed"
    );
    // Resumption sends no certificate: the server's flight is smaller.
    let full: usize = first.sizes(util::Side::Server).iter().sum();
    let resumed: usize = second.sizes(util::Side::Server).iter().sum();
    eprintln!("server bytes: full {full}, resumed {resumed}");
    assert!(resumed < full);
}
