//! The PSK nonce exchange: session keys from a pre-shared master secret and
//! fresh nonces from both sides, over one round trip of HANDSHAKE packets
//! (kind [`HandshakeKind::PSK_NONCE`](smt_proto::HandshakeKind::PSK_NONCE)).
//!
//! ```text
//! client                                            server (same master)
//!   ── PskHello { client_nonce } ──────────────────────►
//!                                      server_nonce fresh; keys
//!   ◄───────────────────────────── PskReply { server_nonce } ──
//! keys
//! keys = derive_session_keys(master, context), context =
//!        "smt psk nonce" || client_nonce || server_nonce || client address
//! ```
//!
//! Why: keys derived from the master and the address alone
//! ([`psk_session`](crate::psk::psk_session)) are the same in every server run,
//! and a restarted server has lost its replay windows, so it would execute
//! a captured request again. Here every session's keys depend on a nonce
//! the server draws for it: a restarted server never derives an earlier
//! session's keys, and replayed packets fail to authenticate. The client's
//! nonce does the same for a client restarting on the same address (its
//! message IDs start again under new keys).
//!
//! Both messages are 34 bytes: type (`0x01` hello, `0x02` reply), version
//! `0x01`, 32-byte nonce. Neither is authenticated by itself; a wrong or
//! forged reply yields keys that open nothing. The server's keys exist once
//! it has answered, but prove the client's address only once a packet under
//! them arrives ([`AddressProof::FirstKeys`]): a spoofed hello cannot
//! replace an established session.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use smt_crypto::psk::derive_session_keys;
use smt_crypto::AeadAlgorithm;
use smt_proto::{AddressProof, Handshake, HandshakeError, Role, SessionKeys};

use crate::keylog::SessionKeyLog;

/// Length of either message.
pub const PSK_MESSAGE_LEN: usize = 2 + NONCE_LEN;
const NONCE_LEN: usize = 32;
const VERSION: u8 = 0x01;
const HELLO: u8 = 0x01;
const REPLY: u8 = 0x02;
/// Separates these contexts from the static derivation's (an address
/// alone) and from any later version.
const CONTEXT_LABEL: &[u8] = b"smt psk nonce";

/// What a client needs to run the exchange: the master, the AEAD, and (if
/// the server sees the client under another address than its socket's,
/// behind a NAT or a relay) that address.
#[derive(Clone)]
pub struct PskClient {
    master: Vec<u8>,
    algorithm: AeadAlgorithm,
    seen_as: Option<SocketAddr>,
    key_log: Option<Arc<SessionKeyLog>>,
}

impl PskClient {
    /// A client for `master` (at least 32 random bytes).
    pub fn new(master: &[u8], algorithm: AeadAlgorithm) -> Self {
        Self {
            master: master.to_vec(),
            algorithm,
            seen_as: None,
            key_log: None,
        }
    }

    /// The address the server sees this client as (default: the socket's).
    pub fn seen_as(mut self, addr: SocketAddr) -> Self {
        self.seen_as = Some(addr);
        self
    }

    /// Logs every session's traffic keys to `log` (none: no key log, the
    /// default); see [`SessionKeyLog`]. For debugging only.
    pub fn with_key_log(mut self, log: Option<Arc<SessionKeyLog>>) -> Self {
        self.key_log = log;
        self
    }

    /// A handshake from a client whose socket is `local`.
    pub fn handshake(&self, local: SocketAddr) -> PskClientHandshake {
        let addr = self.seen_as.unwrap_or(local);
        PskClientHandshake::new(&self.master, addr, self.algorithm)
            .with_key_log(self.key_log.clone())
    }
}

impl fmt::Debug for PskClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PskClient")
            .field("algorithm", &self.algorithm)
            .field("seen_as", &self.seen_as)
            .finish_non_exhaustive()
    }
}

/// The client side: writes the hello, reads the reply, then has keys.
pub struct PskClientHandshake {
    master: Vec<u8>,
    client: SocketAddr,
    algorithm: AeadAlgorithm,
    nonce: [u8; NONCE_LEN],
    hello_sent: bool,
    inbox: Vec<u8>,
    keys: Option<SessionKeys>,
    done: bool,
    key_log: Option<Arc<SessionKeyLog>>,
}

impl PskClientHandshake {
    /// A handshake for the client the server sees as `client`.
    pub fn new(master: &[u8], client: SocketAddr, algorithm: AeadAlgorithm) -> Self {
        let mut nonce = [0; NONCE_LEN];
        smt_crypto::fill_random(&mut nonce);
        Self {
            master: master.to_vec(),
            client,
            algorithm,
            nonce,
            hello_sent: false,
            inbox: Vec::new(),
            keys: None,
            done: false,
            key_log: None,
        }
    }

    /// Logs the session's traffic keys to `log`, if any ([`SessionKeyLog`]).
    pub fn with_key_log(mut self, log: Option<Arc<SessionKeyLog>>) -> Self {
        self.key_log = log;
        self
    }
}

impl Handshake for PskClientHandshake {
    fn read(&mut self, data: &[u8]) -> Result<(), HandshakeError> {
        if self.done {
            return Err(unexpected("bytes after the PSK reply"));
        }
        self.inbox.extend_from_slice(data);
        let Some(server_nonce) = take_message(&mut self.inbox, REPLY)? else {
            return Ok(());
        };
        self.done = true;
        let keys = session_keys(&self.master, self.client, &self.nonce, &server_nonce);
        self.keys = Some(keys(Role::Client, self.algorithm, self.key_log.as_deref()));
        Ok(())
    }

    fn write(&mut self, out: &mut Vec<u8>) {
        if !self.hello_sent {
            self.hello_sent = true;
            emit(out, HELLO, &self.nonce);
        }
    }

    fn take_keys(&mut self) -> Option<SessionKeys> {
        self.keys.take()
    }
}

impl fmt::Debug for PskClientHandshake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PskClientHandshake")
            .field("client", &self.client)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

/// The server side: reads the hello, answers with its own nonce, then has
/// keys (which prove the client's address once a packet under them
/// arrives).
pub struct PskServerHandshake {
    master: Vec<u8>,
    client: SocketAddr,
    algorithm: AeadAlgorithm,
    inbox: Vec<u8>,
    outbox: Vec<u8>,
    keys: Option<SessionKeys>,
    done: bool,
    key_log: Option<Arc<SessionKeyLog>>,
}

impl PskServerHandshake {
    /// A handshake with the client at `client`.
    pub fn new(master: &[u8], client: SocketAddr, algorithm: AeadAlgorithm) -> Self {
        Self {
            master: master.to_vec(),
            client,
            algorithm,
            inbox: Vec::new(),
            outbox: Vec::new(),
            keys: None,
            done: false,
            key_log: None,
        }
    }

    /// Logs the session's traffic keys to `log`, if any ([`SessionKeyLog`]).
    pub fn with_key_log(mut self, log: Option<Arc<SessionKeyLog>>) -> Self {
        self.key_log = log;
        self
    }
}

impl Handshake for PskServerHandshake {
    fn read(&mut self, data: &[u8]) -> Result<(), HandshakeError> {
        if self.done {
            return Err(unexpected("bytes after the PSK hello"));
        }
        self.inbox.extend_from_slice(data);
        let Some(client_nonce) = take_message(&mut self.inbox, HELLO)? else {
            return Ok(());
        };
        self.done = true;
        let mut server_nonce = [0; NONCE_LEN];
        smt_crypto::fill_random(&mut server_nonce);
        emit(&mut self.outbox, REPLY, &server_nonce);
        let keys = session_keys(&self.master, self.client, &client_nonce, &server_nonce);
        self.keys = Some(keys(Role::Server, self.algorithm, self.key_log.as_deref()));
        Ok(())
    }

    fn write(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.outbox);
    }

    fn take_keys(&mut self) -> Option<SessionKeys> {
        // Only once the reply is written: the client needs it first.
        match self.outbox.is_empty() {
            true => self.keys.take(),
            false => None,
        }
    }

    fn address_proof(&self) -> AddressProof {
        AddressProof::FirstKeys
    }
}

impl fmt::Debug for PskServerHandshake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PskServerHandshake")
            .field("client", &self.client)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

/// The session keys for one exchange, for either role.
fn session_keys(
    master: &[u8],
    client: SocketAddr,
    client_nonce: &[u8; NONCE_LEN],
    server_nonce: &[u8; NONCE_LEN],
) -> impl Fn(Role, AeadAlgorithm, Option<&SessionKeyLog>) -> SessionKeys {
    let mut context = CONTEXT_LABEL.to_vec();
    context.extend_from_slice(client_nonce);
    context.extend_from_slice(server_nonce);
    context.extend_from_slice(&crate::psk::psk_context(client));
    let master = master.to_vec();
    let client_nonce = *client_nonce;
    move |role, algorithm, key_log| {
        // At most 13 + 64 + 47 (an IPv6 socket address) bytes: within the
        // 255 that HKDF-Expand-Label's context holds.
        let (c2s, s2c) = derive_session_keys(&master, &context, algorithm);
        if let Some(log) = key_log {
            log.psk_keys(&client_nonce, &c2s, &s2c);
        }
        crate::psk::session(role, &c2s, &s2c)
    }
}

fn emit(out: &mut Vec<u8>, kind: u8, nonce: &[u8; NONCE_LEN]) {
    out.extend_from_slice(&[kind, VERSION]);
    out.extend_from_slice(nonce);
}

/// The nonce of a whole message of type `kind` at the start of `inbox`
/// (removed), `None` while it is incomplete, an error for anything else.
fn take_message(inbox: &mut Vec<u8>, kind: u8) -> Result<Option<[u8; NONCE_LEN]>, HandshakeError> {
    if inbox.len() >= 2 && (inbox[0] != kind || inbox[1] != VERSION) {
        return Err(unexpected("not a PSK message of this version"));
    }
    if inbox.len() > PSK_MESSAGE_LEN {
        return Err(unexpected("bytes after the PSK message"));
    }
    if inbox.len() < PSK_MESSAGE_LEN {
        return Ok(None);
    }
    let mut nonce = [0; NONCE_LEN];
    nonce.copy_from_slice(&inbox[2..]);
    inbox.clear();
    Ok(Some(nonce))
}

fn unexpected(what: &str) -> HandshakeError {
    HandshakeError::Protocol(format!("PSK exchange: {what}"))
}

#[cfg(test)]
mod tests {
    use smt_proto::crypto::PacketCipher;

    use super::*;

    const MASTER: &[u8] = &[7; 32];

    fn client_addr() -> SocketAddr {
        "10.0.0.1:4000".parse().unwrap()
    }

    /// Runs one exchange; returns both sides' keys.
    fn exchange(master_s: &[u8]) -> (SessionKeys, SessionKeys) {
        let alg = AeadAlgorithm::Aes128Gcm;
        let mut c = PskClientHandshake::new(MASTER, client_addr(), alg);
        let mut s = PskServerHandshake::new(master_s, client_addr(), alg);
        let mut hello = Vec::new();
        c.write(&mut hello);
        assert_eq!(hello.len(), PSK_MESSAGE_LEN);
        assert_eq!(&hello[..2], &[0x01, 0x01]);
        s.read(&hello).unwrap();
        assert!(
            s.take_keys().is_none(),
            "keys only after the reply is written"
        );
        let mut reply = Vec::new();
        s.write(&mut reply);
        assert_eq!(&reply[..2], &[0x02, 0x01]);
        let sk = s.take_keys().unwrap();
        c.read(&reply[..10]).unwrap();
        c.read(&reply[10..]).unwrap();
        (c.take_keys().unwrap(), sk)
    }

    fn opens(a: &SessionKeys, b: &SessionKeys) -> bool {
        let packet = [0x42u8; 40];
        let tag = a.tx.control_tag(&packet);
        b.rx.verify_control_tag(&packet, &tag).is_ok()
    }

    #[test]
    fn both_sides_derive_the_same_keys() {
        let (c, s) = exchange(MASTER);
        assert!(opens(&c, &s) && opens(&s, &c));
    }

    #[test]
    fn every_exchange_has_new_keys() {
        let (c1, _) = exchange(MASTER);
        let (_, s2) = exchange(MASTER);
        assert!(
            !opens(&c1, &s2),
            "a second run (a restarted server) derives other keys"
        );
    }

    #[test]
    fn another_master_gives_keys_that_do_not_match() {
        let (c, s) = exchange(&[8; 32]);
        assert!(!opens(&c, &s));
    }

    /// The key log's lines rebuild both directions' keys of the session,
    /// under the nonce the hello carried.
    #[test]
    fn the_key_log_holds_the_session_keys_under_the_client_nonce() {
        let path = std::env::temp_dir().join(format!("smt-psk-keylog-{}", std::process::id()));
        let log = Some(Arc::new(SessionKeyLog::open(&path).unwrap()));
        let alg = AeadAlgorithm::Aes128Gcm;
        let mut c = PskClientHandshake::new(MASTER, client_addr(), alg).with_key_log(log);
        let mut s = PskServerHandshake::new(MASTER, client_addr(), alg);
        let mut hello = Vec::new();
        c.write(&mut hello);
        s.read(&hello).unwrap();
        let mut reply = Vec::new();
        s.write(&mut reply);
        let server = s.take_keys().unwrap();
        c.read(&reply).unwrap();
        let client = c.take_keys().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let nonce = hex::encode(&hello[2..]);
        let logged: Vec<(&str, Vec<u8>)> = text
            .lines()
            .map(|line| {
                let f: Vec<&str> = line.split(' ').collect();
                assert_eq!(f[1], nonce);
                let bytes = hex::decode(f[2]).unwrap();
                (f[0], bytes)
            })
            .collect();
        assert_eq!(logged.len(), 2);
        let cipher = |bytes: &[u8]| {
            let (key, iv) = bytes.split_at(16);
            let key = smt_crypto::TrafficKey::new(alg, key, iv.try_into().unwrap()).unwrap();
            smt_crypto::AesGcmCipher::new(&key)
        };
        let packet = [0x42u8; 40];
        let c2s = cipher(&logged[0].1);
        assert_eq!(logged[0].0, crate::keylog::PSK_CLIENT_TRAFFIC_KEY);
        assert_eq!(c2s.control_tag(&packet), client.tx.control_tag(&packet));
        let s2c = cipher(&logged[1].1);
        assert_eq!(s2c.control_tag(&packet), server.tx.control_tag(&packet));
    }

    #[test]
    fn garbage_is_refused_without_panicking() {
        let alg = AeadAlgorithm::Aes128Gcm;
        for bad in [
            &[0x02, 0x01][..],
            &[0x01, 0x02],
            &[
                0x01, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                0, 0, 0, 0, 0, 0, 0, 0, 9,
            ],
        ] {
            let mut s = PskServerHandshake::new(MASTER, client_addr(), alg);
            assert!(s.read(bad).is_err());
        }
    }
}
