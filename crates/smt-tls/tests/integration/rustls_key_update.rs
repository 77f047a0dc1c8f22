//! `smt_crypto`'s KeyUpdate (RFC 8446 §7.2) against an independent
//! implementation: rustls's own KeyUpdate. Two plain rustls connections
//! log their secrets, rekey with a KeyUpdate message, and export the keys
//! they then use; our `TrafficSecrets::next()` must predict them.

use crate::util;

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

use rustls::crypto::aws_lc_rs;
use rustls::{ClientConfig, ClientConnection, ConnectionTrafficSecrets, RootCertStore};
use rustls::{ServerConfig, ServerConnection};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use smt_crypto::{TrafficKey, TrafficSecrets};
use smt_tls::CipherSuite;
use util::*;

#[derive(Debug, Default)]
struct Recorder(Mutex<Vec<(String, Vec<u8>)>>);

impl rustls::KeyLog for Recorder {
    fn log(&self, label: &str, _client_random: &[u8], secret: &[u8]) {
        self.0
            .lock()
            .unwrap()
            .push((label.to_owned(), secret.to_vec()));
    }
}

impl Recorder {
    fn secret(&self, label: &str) -> Vec<u8> {
        let logged = self.0.lock().unwrap();
        logged.iter().find(|(l, _)| l == label).unwrap().1.clone()
    }
}

fn shuttle(client: &mut ClientConnection, server: &mut ServerConnection) {
    for _ in 0..8 {
        let mut buf = Vec::new();
        while client.wants_write() {
            client.write_tls(&mut buf).unwrap();
        }
        let mut rd = &buf[..];
        while !rd.is_empty() {
            server.read_tls(&mut rd).unwrap();
            server.process_new_packets().unwrap();
        }
        buf.clear();
        while server.wants_write() {
            server.write_tls(&mut buf).unwrap();
        }
        let mut rd = &buf[..];
        while !rd.is_empty() {
            client.read_tls(&mut rd).unwrap();
            client.process_new_packets().unwrap();
        }
    }
}

fn key_and_iv(secrets: ConnectionTrafficSecrets) -> (Vec<u8>, Vec<u8>) {
    match secrets {
        ConnectionTrafficSecrets::Aes128Gcm { key, iv }
        | ConnectionTrafficSecrets::Aes256Gcm { key, iv } => {
            (key.as_ref().to_vec(), iv.as_ref().to_vec())
        }
        _ => panic!("only AES-GCM suites are offered"),
    }
}

fn assert_same(ours: &TrafficKey, theirs: &(Vec<u8>, Vec<u8>), what: &str) {
    assert_eq!(ours.key(), &theirs.0[..], "{what} key");
    assert_eq!(&ours.iv()[..], &theirs.1[..], "{what} iv");
}

#[test]
fn next_epoch_matches_rustls_key_update() {
    let pki = Pki::new();
    let suites = [
        (
            CipherSuite::Aes128GcmSha256,
            aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256,
        ),
        (
            CipherSuite::Aes256GcmSha384,
            aws_lc_rs::cipher_suite::TLS13_AES_256_GCM_SHA384,
        ),
    ];
    for (suite, rustls_suite) in suites {
        let provider = Arc::new(rustls::crypto::CryptoProvider {
            cipher_suites: vec![rustls_suite],
            ..aws_lc_rs::default_provider()
        });
        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from(pki.ca.cert_der().to_vec()))
            .unwrap();
        let recorder = Arc::new(Recorder::default());
        let mut client_config = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        client_config.key_log = recorder.clone();
        client_config.enable_secret_extraction = true;
        let chain = vec![CertificateDer::from(pki.server.chain_der()[0].to_vec())];
        let key = PrivateKeyDer::try_from(pki.server.key_der().to_vec()).unwrap();
        let mut server_config = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        server_config.send_tls13_tickets = 0;
        let name = ServerName::try_from(SERVER_NAME).unwrap();
        let mut client = ClientConnection::new(Arc::new(client_config), name).unwrap();
        let mut server = ServerConnection::new(Arc::new(server_config)).unwrap();
        shuttle(&mut client, &mut server);
        assert!(!client.is_handshaking() && !server.is_handshaking());

        // The client asks for a KeyUpdate; the server updates its receive
        // key, and its send key with a KeyUpdate of its own, which rustls
        // sends ahead of the server's next record: hence the data.
        client.refresh_traffic_keys().unwrap();
        shuttle(&mut client, &mut server);
        server.writer().write_all(b"after the update").unwrap();
        shuttle(&mut client, &mut server);
        let mut received = Vec::new();
        client.reader().read_to_end(&mut received).ok();
        assert_eq!(received, b"after the update");

        let (hash, aead) = suite.algorithms();
        let epoch0 = TrafficSecrets::new(
            hash,
            aead,
            &recorder.secret("CLIENT_TRAFFIC_SECRET_0"),
            &recorder.secret("SERVER_TRAFFIC_SECRET_0"),
        )
        .unwrap();
        let epoch1 = epoch0.next();
        let extracted = client.dangerous_extract_secrets().unwrap();
        let (tx, rx) = (key_and_iv(extracted.tx.1), key_and_iv(extracted.rx.1));
        assert_same(
            &epoch1.client_to_server_key(),
            &tx,
            &format!("{suite:?} c2s epoch 1"),
        );
        assert_same(
            &epoch1.server_to_client_key(),
            &rx,
            &format!("{suite:?} s2c epoch 1"),
        );
        assert_ne!(epoch0.client_to_server_key().key(), &tx.0[..]);
    }
}
