//! Session keys without a handshake (pre-shared-key mode): what the SMT paper
//! installs with `setsockopt` after an application-level handshake. The
//! TLS 1.3 handshake will install keys by itself.
//!
//! Every (key, message ID) pair must be used once. Keys from
//! [`fresh_session_pair`] are new every time, and so are keys from the PSK
//! nonce exchange ([`PskClient`], [`PskServerHandshake`]; one round trip,
//! see `docs/handshake.md`): use it with a pre-shared master.
//!
//! The static derivation ([`psk_session`], [`PskResolver`]) has **no replay
//! protection across server restarts**: its keys depend only on the master
//! and the client's address, so a restarted server (its replay windows
//! lost) executes a captured request again, and a client restarting on the
//! same address reuses its message IDs under the same key. Kept for tests
//! and for setups that install keys by other means.

use std::net::SocketAddr;
use std::sync::Arc;

use smt_crypto::psk::derive_session_keys;
use smt_crypto::AesGcmCipher;
pub use smt_crypto::{AeadAlgorithm, TrafficKey};
use smt_proto::crypto::PacketCipher;
use smt_proto::{KeyResolver, Role, SessionKeys};

pub use crate::keylog::{SessionKeyLog, PSK_CLIENT_TRAFFIC_KEY, PSK_SERVER_TRAFFIC_KEY};
pub use crate::psk_nonce::{PskClient, PskClientHandshake, PskServerHandshake, PSK_MESSAGE_LEN};

fn cipher(key: &TrafficKey) -> Arc<dyn PacketCipher> {
    Arc::new(AesGcmCipher::new(key))
}

/// Keys for a session given the two directions' traffic keys.
pub fn session(
    role: Role,
    client_to_server: &TrafficKey,
    server_to_client: &TrafficKey,
) -> SessionKeys {
    let (c2s, s2c) = (cipher(client_to_server), cipher(server_to_client));
    match role {
        Role::Client => SessionKeys::new(role, c2s, s2c),
        Role::Server => SessionKeys::new(role, s2c, c2s),
    }
}

/// Fresh random keys for one session: `(client side, server side)`.
pub fn fresh_session_pair(algorithm: AeadAlgorithm) -> (SessionKeys, SessionKeys) {
    let c2s = TrafficKey::random(algorithm);
    let s2c = TrafficKey::random(algorithm);
    (
        session(Role::Client, &c2s, &s2c),
        session(Role::Server, &c2s, &s2c),
    )
}

/// The key-derivation context for a client: its address as the server
/// sees it, in text form.
pub fn psk_context(client: SocketAddr) -> Vec<u8> {
    client.to_string().into_bytes()
}

/// This side's keys of the session between `client` and the server, derived
/// from a pre-shared master secret with TLS 1.3's HKDF-Expand-Label. The
/// same in every run: no replay protection across server restarts (see the
/// module docs); prefer the nonce exchange ([`PskClient`]).
pub fn psk_session(
    master: &[u8],
    client: SocketAddr,
    role: Role,
    algorithm: AeadAlgorithm,
) -> SessionKeys {
    let (c2s, s2c) = derive_session_keys(master, &psk_context(client), algorithm);
    session(role, &c2s, &s2c)
}

/// A server-side [`KeyResolver`]: any client that knows the master secret
/// gets its own session keys, derived from its address. No replay
/// protection across server restarts (see the module docs); prefer
/// [`ServerAcceptor::with_psk`](crate::ServerAcceptor::with_psk).
pub struct PskResolver {
    master: Vec<u8>,
    algorithm: AeadAlgorithm,
}

impl PskResolver {
    /// A resolver for `master` (at least 32 random bytes).
    pub fn new(master: &[u8], algorithm: AeadAlgorithm) -> Self {
        Self {
            master: master.to_vec(),
            algorithm,
        }
    }
}

impl std::fmt::Debug for PskResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PskResolver")
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

impl KeyResolver for PskResolver {
    fn resolve(&mut self, peer: SocketAddr) -> Option<SessionKeys> {
        Some(psk_session(
            &self.master,
            peer,
            Role::Server,
            self.algorithm,
        ))
    }
}
