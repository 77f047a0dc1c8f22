//! What every class shares: the `smt` binary, the pre-shared key, the TLS
//! files of a throwaway CA, and the address servers listen on.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::legit::ClientKeys;
use crate::server::ServerKeys;

/// The run's fixed parts.
pub struct Env {
    pub smt: PathBuf,
    /// Where servers listen: the namespace's server address, or loopback.
    pub server_ip: IpAddr,
    /// Whether the run is inside the namespace `netns.rs` made.
    pub in_netns: bool,
    psk_hex: String,
    psk: Vec<u8>,
    tls_files: (PathBuf, PathBuf),
    pub tls_client: smt_tls::TlsClient,
    _dir: tempfile::TempDir,
}

impl Env {
    pub fn new(smt: PathBuf, server_ip: IpAddr, in_netns: bool) -> Result<Self, String> {
        let mut psk = vec![0u8; 32];
        smt_crypto::fill_random(&mut psk);
        let psk_hex = hex::encode(&psk);
        let dir =
            tempfile::tempdir().map_err(|e| format!("cannot make a temporary directory: {e}"))?;
        let ca = smt_tls::certs::Ca::generate("smt-hostile test CA")
            .map_err(|e| format!("cannot make a CA: {e}"))?;
        let ip = server_ip.to_string();
        let names: Vec<&str> = if ip == "127.0.0.1" {
            vec!["127.0.0.1"]
        } else {
            vec![&ip, "127.0.0.1"]
        };
        let cert = ca
            .issue(&names, false)
            .map_err(|e| format!("cannot issue the server certificate: {e}"))?;
        let (cert_path, key_path) = (
            dir.path().join("server.pem"),
            dir.path().join("server-key.pem"),
        );
        write(&cert_path, cert.chain_pem().as_bytes())?;
        write(&key_path, cert.key_pem().as_bytes())?;
        let tls_client = smt_tls::TlsClient::new(ca.cert_pem().as_bytes(), None)
            .map_err(|e| format!("cannot make the TLS client: {e}"))?;
        Ok(Self {
            smt,
            server_ip,
            in_netns,
            psk_hex,
            psk,
            tls_files: (cert_path, key_path),
            tls_client,
            _dir: dir,
        })
    }

    pub fn server_keys(&self, tls: bool) -> ServerKeys {
        if tls {
            ServerKeys::Tls {
                cert: self.tls_files.0.clone(),
                key: self.tls_files.1.clone(),
            }
        } else {
            ServerKeys::Psk(self.psk_hex.clone())
        }
    }

    pub fn client_keys(&self, tls: bool) -> ClientKeys {
        if tls {
            ClientKeys::Tls(self.tls_client.clone())
        } else {
            ClientKeys::Psk(self.psk.clone())
        }
    }
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}
