//! A two-sided harness: a client and a server `Handshake` wired to each
//! other in memory, with a hook to corrupt what goes over the wire.

#![allow(dead_code)] // each test binary uses a different part

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use smt_proto::crypto::{PacketCipher, RECORD_HEADER_LEN, TAG_LEN};
use smt_proto::handshake::{Handshake, HandshakeError};
use smt_proto::SessionKeys;
use smt_tls::certs::{Ca, IssuedCert};
use smt_tls::{TlsClient, TlsOptions, TlsServer};

/// The name the test server's certificate is for, besides its address.
pub const SERVER_NAME: &str = "server.smt.test";
/// The address the test server's certificate is for.
pub const SERVER_IP: &str = "127.0.0.1";

/// The record sequence number the key checks use: message 5, record 0.
pub const SEQ: u64 = 5 << 16;
const HEADER: [u8; RECORD_HEADER_LEN] = [0x17, 0x03, 0x03, 0x00, 0x30];

/// A throwaway CA with one server and one client certificate.
pub struct Pki {
    pub ca: Ca,
    pub server: IssuedCert,
    pub client: IssuedCert,
}

impl Pki {
    pub fn new() -> Self {
        Self::named("smt test CA")
    }

    /// With a CA of another name. (Two CAs of one name confuse chain
    /// building: the client finds the trusted CA by name, then the
    /// signature fails.)
    pub fn named(ca_name: &str) -> Self {
        let ca = Ca::generate(ca_name).unwrap();
        let server = ca.issue(&[SERVER_NAME, SERVER_IP], false).unwrap();
        let client = ca.issue(&["client-1"], true).unwrap();
        Self { ca, server, client }
    }

    pub fn client(&self) -> TlsClient {
        self.client_with(&TlsOptions::default())
    }

    pub fn client_with(&self, options: &TlsOptions) -> TlsClient {
        TlsClient::with_options(self.ca.cert_pem().as_bytes(), None, options).unwrap()
    }

    /// A client presenting the client certificate.
    pub fn mtls_client(&self) -> TlsClient {
        let chain = self.client.chain_pem();
        let key = self.client.key_pem();
        TlsClient::new(
            self.ca.cert_pem().as_bytes(),
            Some((chain.as_bytes(), key.as_bytes())),
        )
        .unwrap()
    }

    pub fn server(&self) -> TlsServer {
        self.server_with(&TlsOptions::default())
    }

    pub fn server_with(&self, options: &TlsOptions) -> TlsServer {
        let chain = self.server.chain_pem();
        let key = self.server.key_pem();
        TlsServer::with_options(chain.as_bytes(), key.as_bytes(), None, options).unwrap()
    }

    /// A server requiring client certificates from this CA.
    pub fn mtls_server(&self) -> TlsServer {
        let chain = self.server.chain_pem();
        let key = self.server.key_pem();
        let ca = self.ca.cert_pem();
        TlsServer::new(chain.as_bytes(), key.as_bytes(), Some(ca.as_bytes())).unwrap()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

/// One `write()`'s worth of bytes, as delivered (after any tampering).
#[derive(Clone, Debug)]
pub struct Flight {
    pub from: Side,
    pub bytes: Vec<u8>,
}

/// How a driven handshake ended.
#[derive(Debug, Default)]
pub struct Outcome {
    pub client_keys: Option<SessionKeys>,
    pub server_keys: Option<SessionKeys>,
    pub client_error: Option<HandshakeError>,
    pub server_error: Option<HandshakeError>,
    pub flights: Vec<Flight>,
}

impl Outcome {
    /// Bytes of every flight from `side`, in order.
    pub fn sizes(&self, side: Side) -> Vec<usize> {
        self.flights
            .iter()
            .filter(|f| f.from == side)
            .map(|f| f.bytes.len())
            .collect()
    }
}

/// Shuttles bytes until nothing more moves.
pub fn drive(
    client: &mut (dyn Handshake + 'static),
    server: &mut (dyn Handshake + 'static),
) -> Outcome {
    drive_with(client, server, |_, _, _| {})
}

/// As [`drive`], passing every flight through `tamper(from, index of the
/// flight among that side's, bytes)` before delivering it. Errors do not
/// stop the shuttle: alerts queued after an error still reach the peer.
pub fn drive_with(
    client: &mut (dyn Handshake + 'static),
    server: &mut (dyn Handshake + 'static),
    mut tamper: impl FnMut(Side, usize, &mut Vec<u8>),
) -> Outcome {
    let mut out = Outcome::default();
    let mut sent = [0usize; 2];
    for _round in 0..16 {
        let mut moved = false;
        for side in [Side::Client, Side::Server] {
            let (from, to, to_error) = match side {
                Side::Client => (&mut *client, &mut *server, &mut out.server_error),
                Side::Server => (&mut *server, &mut *client, &mut out.client_error),
            };
            let mut bytes = Vec::new();
            from.write(&mut bytes);
            if bytes.is_empty() {
                continue;
            }
            moved = true;
            let index = &mut sent[side as usize];
            tamper(side, *index, &mut bytes);
            *index += 1;
            if to_error.is_none() {
                if let Err(e) = to.read(&bytes) {
                    *to_error = Some(e);
                }
            }
            out.flights.push(Flight { from: side, bytes });
        }
        if out.client_keys.is_none() {
            out.client_keys = client.take_keys();
        }
        if out.server_keys.is_none() {
            out.server_keys = server.take_keys();
        }
        if !moved {
            break;
        }
    }
    out
}

/// Seals `plaintext` as record [`SEQ`] under `cipher`.
pub fn seal(cipher: &dyn PacketCipher, plaintext: &[u8]) -> Vec<u8> {
    let mut buf = plaintext.to_vec();
    buf.extend_from_slice(&[0; TAG_LEN]);
    cipher.seal_in_place(SEQ, &HEADER, &mut buf).unwrap();
    buf
}

/// Opens record [`SEQ`] under `cipher`, if it authenticates.
pub fn open(cipher: &dyn PacketCipher, mut record: Vec<u8>) -> Option<Vec<u8>> {
    let len = cipher.open_in_place(SEQ, &HEADER, &mut record).ok()?;
    record.truncate(len);
    Some(record)
}

/// A fresh path in the temporary directory (not created).
pub fn temp_path(tag: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("smt-tls-{tag}-{}-{n}.log", std::process::id()))
}
