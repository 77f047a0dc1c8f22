//! The endpoint's own capture (`smt::observe::Capture`) and key log, read
//! back by `smt dump`: an exchange like `smt demo`'s over real UDP sockets
//! on loopback (GSO batches, GRO), once with a TLS 1.3 handshake and once
//! with the PSK nonce exchange. Every message decrypts byte-identical to
//! what the application sent, and nothing is reported as a problem.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use smt::keys::{AeadAlgorithm, PskClient, SessionKeyLog};
use smt::observe::{Capture, Observe};
use smt::tls::{KeyLogPolicy, TlsClient, TlsOptions, TlsServer};
use smt::{Endpoint, EndpointConfig, ServerAcceptor};
use smt_dump::{dump, KeyLog, Options, Report};

/// Sizes like the demo's, and some odd ones: one packet, a few, GRANTs,
/// records sealed as packets leave (over 64 KiB).
const SIZES: [usize; 9] = [0, 1, 64, 1428, 4000, 16_384, 65_536, 200_000, 1 << 20];
const PSK: &[u8] = &[0x5a; 32];

fn message(len: usize, tag: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(tag))
        .collect()
}

enum Keys {
    Tls,
    Psk,
}

/// The client (capturing) and an echo server, with keys as `keys` says,
/// writing the key log to `keylog`.
fn pair(keys: &Keys, capture: &Capture, keylog: &Path) -> (Endpoint, Endpoint) {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = Endpoint::bind(any, EndpointConfig::default()).unwrap();
    let mut config = EndpointConfig::default();
    config.set_observe(Observe::new().capture(capture.clone()));
    let client = Endpoint::bind(any, config).unwrap();
    match keys {
        Keys::Tls => {
            let ca = smt_tls::certs::Ca::generate("capture test CA").unwrap();
            let cert = ca.issue(&["127.0.0.1"], false).unwrap();
            // The server logs the secrets: either side's lines suffice.
            let opts = TlsOptions::default().key_log(KeyLogPolicy::File(keylog.into()));
            let tls = TlsServer::with_options(
                cert.chain_pem().as_bytes(),
                cert.key_pem().as_bytes(),
                None,
                &opts,
            )
            .unwrap();
            server.set_tls_server(tls).unwrap();
            let tls =
                TlsClient::with_options(ca.cert_pem().as_bytes(), None, &TlsOptions::default())
                    .unwrap();
            client.set_tls_client(tls).unwrap();
        }
        Keys::Psk => {
            let log = Some(Arc::new(SessionKeyLog::open(keylog).unwrap()));
            let acceptor = ServerAcceptor::new(None, None).with_psk(PSK, AeadAlgorithm::Aes128Gcm);
            server.set_handshake_acceptor(Box::new(acceptor)).unwrap();
            let psk = PskClient::new(PSK, AeadAlgorithm::Aes128Gcm).with_key_log(log);
            client.set_psk_client(psk).unwrap();
        }
    }
    let echo = server.clone();
    std::thread::spawn(move || {
        while let Ok(mut req) = echo.accept() {
            let data = req.take_data();
            let _ = req.respond(&data);
        }
    });
    (client, server)
}

/// Runs the exchange (one call at a time, then eight at once), finishes
/// the capture, and returns `smt dump`'s report with the plaintexts kept,
/// and what was sent (each request is echoed as its response).
fn capture_exchange(keys: Keys) -> (Report, Vec<Vec<u8>>) {
    let dir = tempfile::tempdir().unwrap();
    let (pcap, keylog) = (dir.path().join("run.pcapng"), dir.path().join("run.keys"));
    let capture = Capture::create(&pcap).unwrap();
    let (client, server) = pair(&keys, &capture, &keylog);
    let to = server.local_addr();
    let mut sent = Vec::new();
    for (i, &len) in SIZES.iter().enumerate() {
        let req = message(len, i as u8);
        assert_eq!(client.call(to, &req).unwrap(), req[..]);
        sent.push(req);
    }
    std::thread::scope(|s| {
        for i in 0..8u8 {
            let (client, req) = (&client, message(3000 + 1000 * usize::from(i), 100 + i));
            sent.push(req.clone());
            s.spawn(move || assert_eq!(client.call(to, &req).unwrap(), req[..]));
        }
    });
    client.close();
    server.close();
    let summary = capture.finish().unwrap();
    assert_eq!(summary.dropped, 0, "{summary:?}");
    let text = std::fs::read_to_string(&keylog).unwrap();
    let log = KeyLog::parse(&text);
    assert!(log.bad_lines.is_empty(), "{:?}", log.bad_lines);
    let opts = Options {
        keep_plaintext: true,
        ..Options::default()
    };
    let bytes = std::fs::read(&pcap).unwrap();
    let report = dump(&bytes, Some(&log), &opts).unwrap();
    assert_eq!(report.capture.smt_datagrams, summary.datagrams);
    (report, sent)
}

/// Every request and every (echoed) response is in the report, complete,
/// byte-identical; no problem is found.
fn assert_every_message_decrypts(report: &Report, sent: &[Vec<u8>]) {
    assert!(report.capture.error.is_none(), "{:?}", report.capture);
    assert!(report.problems.is_empty(), "{:#?}", report.problems);
    assert_eq!(report.sessions.len(), 1, "{:#?}", report.sessions);
    let mut want: BTreeMap<(&str, &[u8]), usize> = BTreeMap::new();
    for data in sent {
        for kind in ["request", "response"] {
            *want.entry((kind, data)).or_default() += 1;
        }
    }
    // The client's first call made the handshake; smt dump lists what
    // the application sent, nothing else.
    let mut got: BTreeMap<(&str, &[u8]), usize> = BTreeMap::new();
    for m in &report.messages {
        assert_eq!(m.status, "complete", "{m:#?}");
        let data = m.plaintext.as_deref().expect("kept");
        *got.entry((m.kind, data)).or_default() += 1;
    }
    assert_eq!(got.len(), want.len());
    assert!(got == want, "the plaintexts differ from what was sent");
}

#[test]
fn a_tls_exchange_captured_by_the_endpoint_decrypts_byte_identical() {
    let (report, sent) = capture_exchange(Keys::Tls);
    assert_every_message_decrypts(&report, &sent);
    assert!(
        report.sessions[0].keys.starts_with("key log"),
        "{:?}",
        report.sessions[0]
    );
}

#[test]
fn a_psk_exchange_captured_by_the_endpoint_decrypts_byte_identical() {
    let (report, sent) = capture_exchange(Keys::Psk);
    assert_every_message_decrypts(&report, &sent);
}
