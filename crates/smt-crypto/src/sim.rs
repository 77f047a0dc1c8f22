//! AES-GCM session keys for simulated pairs (`smt_proto::sim` has only the
//! null cipher and a test stand-in; the AEAD backend is this crate's), with
//! the `sim` feature. Drawn from a seed: for tests and simulators only,
//! never for real sessions.

use std::sync::Arc;

use smt_proto::crypto::PacketCipher;
use smt_proto::sim::{null_session, KeySource, SplitMix64};
use smt_proto::{Role, SessionKeys};

use crate::{AeadAlgorithm, AesGcmCipher, TrafficKey};

/// Which protection a simulated session uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// No protection (transport-only runs, fuzz-like inputs).
    Null,
    /// AES-128-GCM with keys drawn from the given seed.
    Aes128(u64),
    /// AES-256-GCM with keys drawn from the given seed.
    Aes256(u64),
    /// AES-128-GCM from TLS 1.3 traffic secrets drawn from the seed, able
    /// to rekey (KeyUpdate).
    Aes128Rekeying(u64),
}

/// Client and server keys of one session built from random TLS 1.3 traffic
/// secrets, so the session can move to new key epochs.
pub fn rekeying_session(seed: u64) -> (SessionKeys, SessionKeys) {
    use crate::secrets::{session_keys, TlsHash, TrafficSecrets};
    let mut rng = SplitMix64::new(seed);
    let (mut c2s, mut s2c) = ([0u8; 32], [0u8; 32]);
    rng.fill(&mut c2s);
    rng.fill(&mut s2c);
    // NOTE(unwrap): both secrets have SHA-256's length.
    let secrets =
        TrafficSecrets::new(TlsHash::Sha256, AeadAlgorithm::Aes128Gcm, &c2s, &s2c).unwrap();
    (
        session_keys(Role::Client, &secrets),
        session_keys(Role::Server, &secrets),
    )
}

/// Client and server keys of one AES-GCM session drawn from `seed`.
pub fn aes_session(algorithm: AeadAlgorithm, seed: u64) -> (SessionKeys, SessionKeys) {
    let mut rng = SplitMix64::new(seed);
    let key = |rng: &mut SplitMix64| -> Arc<dyn PacketCipher> {
        let mut k = vec![0u8; algorithm.key_len()];
        let mut iv = [0u8; 12];
        rng.fill(&mut k);
        rng.fill(&mut iv);
        // NOTE(unwrap): the key has exactly the algorithm's length.
        let tk = TrafficKey::new(algorithm, &k, iv).unwrap();
        Arc::new(AesGcmCipher::new(&tk))
    };
    let c2s = key(&mut rng);
    let s2c = key(&mut rng);
    (
        SessionKeys::new(Role::Client, c2s.clone(), s2c.clone()),
        SessionKeys::new(Role::Server, s2c, c2s),
    )
}

impl KeyKind {
    /// Client and server keys of one session of this kind.
    pub fn session(self) -> (SessionKeys, SessionKeys) {
        match self {
            Self::Null => null_session(),
            Self::Aes128(seed) => aes_session(AeadAlgorithm::Aes128Gcm, seed),
            Self::Aes256(seed) => aes_session(AeadAlgorithm::Aes256Gcm, seed),
            Self::Aes128Rekeying(seed) => rekeying_session(seed),
        }
    }
}

impl KeySource for KeyKind {
    fn session(&self) -> (SessionKeys, SessionKeys) {
        KeyKind::session(*self)
    }
}
