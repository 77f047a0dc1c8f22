// A test binary of its own, not a module of tests/integration (issue #27):
// sets `SSLKEYLOGFILE`, an environment variable of the whole process.
//! `KeyLogPolicy::FromEnv` reads `SSLKEYLOGFILE`. Its own test binary (one
//! test, one thread): it sets a process-wide environment variable.

mod util;

use smt_tls::{KeyLogPolicy, TlsOptions};
use util::*;

#[test]
fn from_env_follows_sslkeylogfile_and_off_ignores_it() {
    let pki = Pki::new();
    let path = temp_path("env");
    std::env::set_var("SSLKEYLOGFILE", &path);

    // Off (the default) ignores the variable.
    let mut client = pki.client().start(SERVER_NAME).unwrap();
    let mut server = pki.server().start().unwrap();
    assert!(drive(&mut client, &mut server).client_keys.is_some());
    assert!(!path.exists(), "the default must not write a key log");

    let options = TlsOptions::default().key_log(KeyLogPolicy::FromEnv);
    let mut client = pki.client_with(&options).start(SERVER_NAME).unwrap();
    let mut server = pki.server().start().unwrap();
    assert!(drive(&mut client, &mut server).client_keys.is_some());
    let log = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let labels: Vec<&str> = log.lines().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(
        labels,
        [
            "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
            "SERVER_HANDSHAKE_TRAFFIC_SECRET",
            "CLIENT_TRAFFIC_SECRET_0",
            "SERVER_TRAFFIC_SECRET_0",
            "EXPORTER_SECRET",
        ],
        "the client's lines only:\n{log}"
    );

    // Unset or empty: no key log, no error.
    std::env::set_var("SSLKEYLOGFILE", "");
    assert!(smt_tls::TlsClient::with_options(pki.ca.cert_pem().as_bytes(), None, &options).is_ok());
    std::env::remove_var("SSLKEYLOGFILE");
    let mut client = pki.client_with(&options).start(SERVER_NAME).unwrap();
    let mut server = pki.server().start().unwrap();
    assert!(drive(&mut client, &mut server).client_keys.is_some());
    assert!(!path.exists());
}
