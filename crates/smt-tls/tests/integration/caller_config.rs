//! A caller's own rustls configs (`TlsClient::from_config`,
//! `TlsServer::from_config`): a verifier of the caller's choosing and the
//! caller's key log work as with TLS over TCP, the name given is the one
//! verified, and what SMT cannot carry is refused with a reason.

use crate::util;

use std::sync::{Arc, Mutex};

use rustls::client::WebPkiServerVerifier;
use rustls::crypto::aws_lc_rs;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use smt_proto::handshake::HandshakeError;
use smt_tls::{TlsClient, TlsConfigError, TlsServer};
use util::{drive, Pki, SERVER_NAME};

/// A rustls key log that keeps the labels it was given.
#[derive(Debug, Default)]
struct Labels(Mutex<Vec<String>>);

impl rustls::KeyLog for Labels {
    fn log(&self, label: &str, _client_random: &[u8], _secret: &[u8]) {
        self.0.lock().unwrap().push(label.to_owned());
    }
}

fn roots(pki: &Pki) -> Arc<RootCertStore> {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from(pki.ca.cert_der().to_vec()))
        .unwrap();
    Arc::new(roots)
}

/// The caller's client config: SMT's provider, TLS 1.3, an explicit
/// webpki verifier (a platform verifier plugs in the same way).
fn client_config(pki: &Pki) -> ClientConfig {
    let provider = smt_tls::crypto_provider();
    let verifier = WebPkiServerVerifier::builder_with_provider(roots(pki), provider.clone())
        .build()
        .unwrap();
    ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_webpki_verifier(verifier)
        .with_no_client_auth()
}

fn server_config(pki: &Pki) -> ServerConfig {
    let chain = pki
        .server
        .chain_der()
        .into_iter()
        .map(|c| CertificateDer::from(c.to_vec()))
        .collect();
    let key = PrivateKeyDer::try_from(pki.server.key_der().to_vec()).unwrap();
    ServerConfig::builder_with_provider(smt_tls::crypto_provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap()
}

#[test]
fn callers_configs_complete_a_handshake_and_their_key_logs_see_every_secret() {
    let pki = Pki::new();
    let (client_log, server_log) = (Arc::new(Labels::default()), Arc::new(Labels::default()));
    let mut client_config = client_config(&pki);
    client_config.key_log = client_log.clone();
    let mut server_config = server_config(&pki);
    server_config.key_log = server_log.clone();
    let client = TlsClient::from_config(Arc::new(client_config)).unwrap();
    let mut server = TlsServer::from_config(Arc::new(server_config)).unwrap();
    let mut c = client.handshake(SERVER_NAME).unwrap();
    let mut s =
        smt_proto::HandshakeAcceptor::accept(&mut server, "127.0.0.1:1".parse().unwrap()).unwrap();
    let out = drive(&mut *c, &mut *s);
    assert_eq!((out.client_error, out.server_error), (None, None));
    let (ck, sk) = (out.client_keys.unwrap(), out.server_keys.unwrap());
    let record = util::seal(&*ck.tx, b"caller's config");
    assert_eq!(
        util::open(&*sk.rx, record).as_deref(),
        Some(&b"caller's config"[..])
    );
    for log in [&client_log, &server_log] {
        let labels = log.0.lock().unwrap();
        for label in [
            "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
            "CLIENT_TRAFFIC_SECRET_0",
            "SERVER_TRAFFIC_SECRET_0",
        ] {
            assert!(labels.iter().any(|l| l == label), "{label}: {labels:?}");
        }
    }
}

#[test]
fn the_name_given_is_the_name_verified() {
    let pki = Pki::new();
    let client = TlsClient::from_config(Arc::new(client_config(&pki))).unwrap();
    let server = TlsServer::from_config(Arc::new(server_config(&pki))).unwrap();
    for (name, ok) in [(SERVER_NAME, true), ("other.smt.test", false)] {
        let name = ServerName::try_from(name).unwrap().to_owned();
        let mut c = client.handshake_to(name.clone()).unwrap();
        let mut s = server.start().unwrap();
        let out = drive(&mut *c, &mut s);
        match (ok, out.client_error) {
            (true, None) => assert!(out.client_keys.is_some()),
            (false, Some(HandshakeError::WrongName(_))) => {}
            (_, other) => panic!("{name:?}: {other:?}"),
        }
    }
}

#[test]
fn configs_smt_cannot_carry_are_refused_with_a_reason() {
    let pki = Pki::new();
    // rustls's defaults: TLS 1.2 and 1.3, ChaCha20 among the suites.
    let provider = Arc::new(aws_lc_rs::default_provider());
    let defaults = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots(&pki))
        .with_no_client_auth();
    let error = TlsClient::from_config(Arc::new(defaults)).unwrap_err();
    assert!(
        matches!(error, TlsConfigError::UnsupportedCipherSuite(_)),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("TLS 1.3") && message.contains("crypto_provider"),
        "{message}"
    );
    // TLS 1.3 only, but with ChaCha20-Poly1305.
    let tls13 = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots(&pki))
        .with_no_client_auth();
    let error = TlsClient::from_config(Arc::new(tls13)).unwrap_err();
    assert!(error.to_string().contains("CHACHA20"), "{error}");
    let mut early = client_config(&pki);
    early.enable_early_data = true;
    let error = TlsClient::from_config(Arc::new(early)).unwrap_err();
    assert!(matches!(error, TlsConfigError::EarlyData), "{error:?}");
    let mut early = server_config(&pki);
    early.max_early_data_size = 16384;
    let error = TlsServer::from_config(Arc::new(early)).unwrap_err();
    assert!(error.to_string().contains("early data"), "{error}");
}
