//! An SMT server with TLS 1.3: answers every request with its bytes in
//! upper case.
//!
//! ```sh
//! smt ca init --dir ca && smt cert issue --ca ca --name localhost --out server
//! cargo run --release -p smt --example tls_server -- 127.0.0.1:7878 server.pem server-key.pem
//! cargo run --release -p smt --example tls_client -- localhost:7878 ca/ca.pem
//! ```
//!
//! Only the `smt` crate is needed: TLS comes re-exported as `smt::tls`.

use std::error::Error;

use smt::tls::TlsServer;
use smt::{Endpoint, EndpointConfig};

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [listen, cert, key] = args.as_slice() else {
        return Err("usage: tls_server LISTEN_ADDR CERT_CHAIN.pem KEY.pem".into());
    };
    // The certificate chain and key in PEM; with `Some(client_ca)` as the
    // third argument every client must present a certificate (mutual
    // TLS). Or build a rustls::ServerConfig on smt::tls::crypto_provider()
    // and pass it to TlsServer::from_config.
    let tls = TlsServer::new(&std::fs::read(cert)?, &std::fs::read(key)?, None)?;
    let server = Endpoint::bind(listen.parse()?, EndpointConfig::default())?;
    server.set_tls_server(tls)?;
    println!("serving on {}", server.local_addr());
    while let Ok(request) = server.accept() {
        let reply = request.data().to_ascii_uppercase();
        if let Err(e) = request.respond(&reply) {
            eprintln!("response not sent: {e}");
        }
    }
    Ok(())
}
