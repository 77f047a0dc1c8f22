//! TLS 1.3 for SMT sessions (the `smt-tls` crate, on rustls), re-exported
//! so that an application needs no other dependency.
//!
//! - From PEM or DER files: [`TlsClient::new`] (trusts the CA certificates
//!   given and no others), [`TlsServer::new`] (optionally requiring client
//!   certificates), [`TlsOptions`] for suites, groups and the key log;
//!   [`certs`] makes a CA and certificates for tests and small
//!   deployments.
//! - From your own rustls configs: [`TlsClient::from_config`] and
//!   [`TlsServer::from_config`] take a `rustls::ClientConfig` /
//!   `ServerConfig` built on [`crypto_provider`] (TLS 1.3, AES-GCM: what
//!   SMT's records carry), with any certificate verifier — a platform
//!   verifier, `rustls::client::WebPkiServerVerifier` over webpki or
//!   system roots, your own — and any key log. What SMT cannot carry
//!   (TLS 1.2, ChaCha20, early data) is refused with a
//!   [`TlsConfigError`] that says what to change.
//! - Naming the server: a TLS handshake verifies the server's certificate
//!   against the peer's IP address unless a name is set for that address
//!   ([`crate::Endpoint::set_server_name`]), or the address came from
//!   [`crate::Endpoint::resolve`] of a host name.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use smt::tls::{rustls, TlsClient};
//! let mut roots = rustls::RootCertStore::empty();
//! for cert in smt::tls::certificates_der(&std::fs::read("ca.pem")?)? {
//!     roots.add(cert.into())?;
//! }
//! let config = rustls::ClientConfig::builder_with_provider(smt::tls::crypto_provider())
//!     .with_protocol_versions(&[&rustls::version::TLS13])?
//!     .with_root_certificates(roots)
//!     .with_no_client_auth();
//! let client = smt::Endpoint::bind("0.0.0.0:0".parse()?, smt::EndpointConfig::default())?;
//! client.set_tls_client(TlsClient::from_config(Arc::new(config))?)?;
//! let server = client.resolve("server.example:7878")?; // verified as "server.example"
//! let response = client.call(server, b"hello")?;
//! # let _ = response; Ok(()) }
//! ```

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

pub use smt_tls::{
    certificates_der, certs, crypto_provider, rustls, CipherSuite, KeyLogPolicy, KxGroup,
    ServerName, TlsClient, TlsConfigError, TlsHandshake, TlsOptions, TlsServer,
};

/// `host:port` → an address of `local`'s family, and the name to verify
/// the server's certificate against when `host` is a name (an IP address
/// is verified as itself). Names are looked up with the system resolver.
pub(crate) fn resolve(
    server: &str,
    local: SocketAddr,
) -> io::Result<(SocketAddr, Option<ServerName<'static>>)> {
    if let Ok(addr) = server.parse::<SocketAddr>() {
        return Ok((addr, None));
    }
    let (host, port) = server.rsplit_once(':').ok_or_else(|| {
        invalid(format!(
            "{server:?} is not HOST:PORT (a host name or IP address, a colon and a port)"
        ))
    })?;
    let port: u16 = port
        .parse()
        .map_err(|_| invalid(format!("{server:?}: {port:?} is not a port number")))?;
    let name = ServerName::try_from(host.to_owned())
        .map_err(|_| invalid(format!("{host:?} is not a DNS name or IP address")))?;
    let addr = (host, port)
        .to_socket_addrs()?
        .find(|a| a.is_ipv4() == local.is_ipv4())
        .ok_or_else(|| {
            let family = if local.is_ipv4() { "IPv4" } else { "IPv6" };
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{host} has no {family} address (the endpoint is bound to {local})"),
            )
        })?;
    let name = match name {
        ServerName::DnsName(_) => Some(name),
        _ => None,
    };
    Ok((addr, name))
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_stay_addresses_and_names_are_kept() {
        let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let (addr, name) = resolve("127.0.0.1:7878", local).unwrap();
        assert_eq!((addr.to_string().as_str(), name), ("127.0.0.1:7878", None));
        let (addr, name) = resolve("localhost:7878", local).unwrap();
        assert!(addr.ip().is_loopback() && addr.port() == 7878, "{addr}");
        assert_eq!(
            name.map(|n| n.to_str().into_owned()).as_deref(),
            Some("localhost")
        );
        for bad in ["localhost", "localhost:x", "bad_name!:1"] {
            let e = resolve(bad, local).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad}: {e}");
        }
    }
}
