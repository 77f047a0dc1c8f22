//! The NSS key log: opt-in, standard format, the secrets SMT's keys use.

use crate::util;

use smt_crypto::{TlsHash, TrafficSecrets};
use smt_tls::{CipherSuite, KeyLogPolicy, TlsOptions};
use util::*;

/// Client and server both log to one file: every TLS 1.3 secret appears
/// once per side, under one client random, and the logged application
/// secrets are the ones the session keys were made from.
#[test]
fn key_log_file_gets_standard_lines_for_both_sides() {
    let pki = Pki::new();
    let path = temp_path("keylog");
    let options = TlsOptions::default().key_log(KeyLogPolicy::File(path.clone()));
    let mut client = pki.client_with(&options).start(SERVER_NAME).unwrap();
    let mut server = pki.server_with(&options).start().unwrap();
    let out = drive(&mut client, &mut server);
    let keys = out.client_keys.unwrap();
    let log = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();

    let lines: Vec<Vec<&str>> = log.lines().map(|l| l.split(' ').collect()).collect();
    assert!(lines.iter().all(|f| f.len() == 3), "{log}");
    let random = lines[0][1];
    assert_eq!(random.len(), 64, "32-byte client random in hex");
    assert!(lines.iter().all(|f| f[1] == random), "one connection");
    for label in [
        "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
        "SERVER_HANDSHAKE_TRAFFIC_SECRET",
        "CLIENT_TRAFFIC_SECRET_0",
        "SERVER_TRAFFIC_SECRET_0",
        "EXPORTER_SECRET",
    ] {
        let hits: Vec<_> = lines.iter().filter(|f| f[0] == label).collect();
        assert_eq!(hits.len(), 2, "{label} once per side:\n{log}");
        assert_eq!(hits[0][2], hits[1][2], "{label}: both sides agree");
        assert_eq!(hits[0][2].len(), 64, "{label}: a SHA-256 secret");
    }
    let secret =
        |label: &str| hex::decode(lines.iter().find(|f| f[0] == label).unwrap()[2]).unwrap();
    let (hash, aead) = CipherSuite::Aes128GcmSha256.algorithms();
    assert_eq!(hash, TlsHash::Sha256);
    let logged = TrafficSecrets::new(
        hash,
        aead,
        &secret("CLIENT_TRAFFIC_SECRET_0"),
        &secret("SERVER_TRAFFIC_SECRET_0"),
    )
    .unwrap();
    let from_log = smt_crypto::AesGcmCipher::new(&logged.client_to_server_key());
    assert!(open(&from_log, seal(&*keys.tx, b"hello\x17")).is_some());
}

#[test]
fn no_key_log_unless_asked() {
    let pki = Pki::new();
    let path = temp_path("never");
    // The default policy writes nothing anywhere; an explicit Off likewise.
    for options in [
        TlsOptions::default(),
        TlsOptions::default().key_log(KeyLogPolicy::Off),
    ] {
        let mut client = pki.client_with(&options).start(SERVER_NAME).unwrap();
        let mut server = pki.server_with(&options).start().unwrap();
        assert!(drive(&mut client, &mut server).client_keys.is_some());
    }
    assert!(!path.exists());
}

#[test]
fn an_unwritable_key_log_is_a_configuration_error() {
    let pki = Pki::new();
    let dir = std::env::temp_dir()
        .join("smt-tls-no-such-dir")
        .join("x.log");
    let options = TlsOptions::default().key_log(KeyLogPolicy::File(dir));
    let err =
        smt_tls::TlsClient::with_options(pki.ca.cert_pem().as_bytes(), None, &options).unwrap_err();
    assert!(matches!(err, smt_tls::TlsConfigError::KeyLog(_)), "{err}");
}
