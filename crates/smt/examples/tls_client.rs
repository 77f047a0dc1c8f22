//! An SMT client with TLS 1.3: calls a server by name, verifying the
//! server's certificate against that name (see `tls_server.rs`).
//!
//! ```sh
//! cargo run --release -p smt --example tls_client -- localhost:7878 ca/ca.pem
//! ```
//!
//! The client's trust comes from its own rustls config here — any
//! verifier works the same way: `rustls::client::WebPkiServerVerifier` over
//! the platform's or webpki's roots, the rustls-platform-verifier crate,
//! your own. (`smt::tls::TlsClient::new(ca_pem, None)` does the same from
//! PEM bytes in one line.)

use std::error::Error;
use std::sync::Arc;

use smt::tls::{certificates_der, crypto_provider, rustls, TlsClient};
use smt::{Endpoint, EndpointConfig};

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [server, ca] = args.as_slice() else {
        return Err("usage: tls_client HOST:PORT CA.pem".into());
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in certificates_der(&std::fs::read(ca)?)? {
        roots.add(cert.into())?;
    }
    // SMT carries TLS 1.3 with AES-GCM: build on its crypto provider.
    let config = rustls::ClientConfig::builder_with_provider(crypto_provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let client = Endpoint::bind("0.0.0.0:0".parse()?, EndpointConfig::default())?;
    client.set_tls_client(TlsClient::from_config(Arc::new(config))?)?;
    // HOST is looked up, and the certificate must name HOST.
    let to = client.resolve(server)?;
    for i in 0..3 {
        let response = client.call(to, format!("hello {i}").as_bytes())?;
        println!("{}", String::from_utf8_lossy(&response));
    }
    let stats = client.stats()?.total;
    println!("handshakes completed: {}", stats.handshakes.completed);
    Ok(())
}
