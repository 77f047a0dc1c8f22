//! TLS 1.3 traffic secrets turned into SMT session keys, and KeyUpdate.
//!
//! A TLS 1.3 handshake (`smt-tls`) ends with one application traffic secret
//! per direction. This module does the rest of RFC 8446's key schedule for
//! them, for both TLS 1.3 hashes:
//!
//! ```text
//! key            = HKDF-Expand-Label(secret, "key", "", key_length)   §7.3
//! iv             = HKDF-Expand-Label(secret, "iv", "", 12)            §7.3
//! secret_{N + 1} = HKDF-Expand-Label(secret_N, "traffic upd", "", Hash.length)  §7.2
//! ```
//!
//! [`TrafficSecrets`] holds both directions' current secrets and implements
//! [`KeyUpdate`]: each epoch's secrets are derived one way from the last, so
//! the keys of an epoch cannot be recomputed from a later one. Unlike TLS,
//! an SMT session moves both directions to the next epoch together.
//!
//! Secrets never reach `Debug` output.

use std::fmt;
use std::sync::Arc;

use aws_lc_rs::hkdf;
use smt_proto::crypto::{KeyUpdate, NextEpoch, PacketCipher};
use smt_proto::{Role, SessionKeys};

use crate::key::{AeadAlgorithm, TrafficKey, IV_LEN};
use crate::AesGcmCipher;

/// The hash of a TLS 1.3 cipher suite, which fixes the length of its
/// secrets and the HKDF used on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TlsHash {
    /// SHA-256 (`TLS_AES_128_GCM_SHA256`): 32-byte secrets.
    Sha256,
    /// SHA-384 (`TLS_AES_256_GCM_SHA384`): 48-byte secrets.
    Sha384,
}

impl TlsHash {
    /// `Hash.length`: the length of every secret under this hash.
    pub const fn output_len(self) -> usize {
        match self {
            Self::Sha256 => 32,
            Self::Sha384 => 48,
        }
    }

    fn hkdf(self) -> hkdf::Algorithm {
        match self {
            Self::Sha256 => hkdf::HKDF_SHA256,
            Self::Sha384 => hkdf::HKDF_SHA384,
        }
    }
}

/// A traffic secret does not fit the hash it was declared with: the caller
/// mixed up suites, or a TLS library handed over something unexpected.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SecretError {
    /// The secret is not [`TlsHash::output_len`] bytes long.
    WrongLength {
        /// The hash the secret was declared for.
        hash: TlsHash,
        /// The length that was passed.
        actual: usize,
    },
}

impl fmt::Display for SecretError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::WrongLength { hash, actual } => write!(
                f,
                "a {hash:?} traffic secret is {} bytes, but {actual} bytes were given",
                hash.output_len()
            ),
        }
    }
}

impl std::error::Error for SecretError {}

/// Both directions' current TLS 1.3 application traffic secrets, with the
/// suite's hash and AEAD.
///
/// Constructed through [`TrafficSecrets::new`], so each secret is exactly
/// `hash.output_len()` bytes. `Debug` shows the hash and AEAD only; the
/// secrets are overwritten with zeros when dropped (best effort: copies the
/// allocator or the compiler made are out of reach).
#[derive(Clone, PartialEq, Eq)]
pub struct TrafficSecrets {
    hash: TlsHash,
    aead: AeadAlgorithm,
    client_to_server: Vec<u8>,
    server_to_client: Vec<u8>,
}

impl TrafficSecrets {
    /// Checks both secrets' lengths against `hash` and keeps copies.
    pub fn new(
        hash: TlsHash,
        aead: AeadAlgorithm,
        client_to_server: &[u8],
        server_to_client: &[u8],
    ) -> Result<Self, SecretError> {
        for secret in [client_to_server, server_to_client] {
            if secret.len() != hash.output_len() {
                return Err(SecretError::WrongLength {
                    hash,
                    actual: secret.len(),
                });
            }
        }
        Ok(Self {
            hash,
            aead,
            client_to_server: client_to_server.to_vec(),
            server_to_client: server_to_client.to_vec(),
        })
    }

    /// The suite's hash.
    pub fn hash(&self) -> TlsHash {
        self.hash
    }

    /// The suite's AEAD.
    pub fn aead(&self) -> AeadAlgorithm {
        self.aead
    }

    /// The client's current traffic secret (`client_application_traffic_secret_N`).
    pub fn client_to_server(&self) -> &[u8] {
        &self.client_to_server
    }

    /// The server's current traffic secret (`server_application_traffic_secret_N`).
    pub fn server_to_client(&self) -> &[u8] {
        &self.server_to_client
    }

    /// The client-to-server traffic key of this epoch.
    pub fn client_to_server_key(&self) -> TrafficKey {
        traffic_key(self.hash, self.aead, &self.client_to_server)
    }

    /// The server-to-client traffic key of this epoch.
    pub fn server_to_client_key(&self) -> TrafficKey {
        traffic_key(self.hash, self.aead, &self.server_to_client)
    }

    /// Both directions' secrets of the next epoch (RFC 8446 §7.2).
    pub fn next(&self) -> Self {
        Self {
            hash: self.hash,
            aead: self.aead,
            client_to_server: next_secret(self.hash, &self.client_to_server),
            server_to_client: next_secret(self.hash, &self.server_to_client),
        }
    }
}

impl KeyUpdate for TrafficSecrets {
    fn next_epoch(&self) -> NextEpoch {
        let next = self.next();
        NextEpoch {
            client_to_server: cipher(&next.client_to_server_key()),
            server_to_client: cipher(&next.server_to_client_key()),
            update: Some(Arc::new(next)),
        }
    }
}

impl fmt::Debug for TrafficSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrafficSecrets")
            .field("hash", &self.hash)
            .field("aead", &self.aead)
            .finish_non_exhaustive()
    }
}

impl Drop for TrafficSecrets {
    fn drop(&mut self) {
        self.client_to_server.fill(0);
        self.server_to_client.fill(0);
        // Keeps the stores above from being optimised away as dead.
        std::hint::black_box((&self.client_to_server, &self.server_to_client));
    }
}

/// Session keys for `role` from this epoch's secrets, able to rekey: the
/// keys' `update` moves both directions to the next epoch.
pub fn session_keys(role: Role, secrets: &TrafficSecrets) -> SessionKeys {
    let c2s = cipher(&secrets.client_to_server_key());
    let s2c = cipher(&secrets.server_to_client_key());
    let (tx, rx) = match role {
        Role::Client => (c2s, s2c),
        Role::Server => (s2c, c2s),
    };
    SessionKeys::new(role, tx, rx).with_update(Arc::new(secrets.clone()))
}

/// The traffic key and IV of RFC 8446 §7.3 from one traffic secret:
/// `HKDF-Expand-Label(secret, "key", "", key_length)` and
/// `HKDF-Expand-Label(secret, "iv", "", 12)`.
///
/// # Panics
///
/// If `secret` is not `hash.output_len()` bytes: a secret of another length
/// is not a TLS 1.3 secret for that hash. [`TrafficSecrets::new`] checks it.
pub fn traffic_key(hash: TlsHash, aead: AeadAlgorithm, secret: &[u8]) -> TrafficKey {
    assert_secret_len(hash, secret);
    let mut key = [0; 32];
    let key = &mut key[..aead.key_len()];
    let mut iv = [0; IV_LEN];
    expand_label(hash, secret, b"key", key);
    expand_label(hash, secret, b"iv", &mut iv);
    // NOTE(unwrap): the slice is exactly the algorithm's key length.
    TrafficKey::new(aead, key, iv).expect("key is the algorithm's length")
}

/// The next traffic secret of RFC 8446 §7.2:
/// `HKDF-Expand-Label(secret, "traffic upd", "", Hash.length)`.
///
/// # Panics
///
/// If `secret` is not `hash.output_len()` bytes, as [`traffic_key`].
pub fn next_secret(hash: TlsHash, secret: &[u8]) -> Vec<u8> {
    assert_secret_len(hash, secret);
    let mut next = vec![0; hash.output_len()];
    expand_label(hash, secret, b"traffic upd", &mut next);
    next
}

fn assert_secret_len(hash: TlsHash, secret: &[u8]) {
    assert!(
        secret.len() == hash.output_len(),
        "{}",
        SecretError::WrongLength {
            hash,
            actual: secret.len()
        }
    );
}

fn cipher(key: &TrafficKey) -> Arc<dyn PacketCipher> {
    Arc::new(AesGcmCipher::new(key))
}

/// HKDF-Expand-Label (RFC 8446 §7.1) with an empty context, for the fixed
/// short labels and outputs of this module, under `hash` (so SHA-384
/// suites work too; `crate::psk::hkdf_expand_label` is the SHA-256-only
/// public form). One encoder of the `HkdfLabel` serves both.
fn expand_label(hash: TlsHash, secret: &[u8], label: &[u8], out: &mut [u8]) {
    let prk = hkdf::Prk::new_less_safe(hash.hkdf(), secret);
    // NOTE(unwrap): labels here are at most 11 bytes ("traffic upd") and
    // outputs at most 48, far inside what an HkdfLabel can encode.
    crate::psk::expand_label(&prk, label, b"", out).expect("fixed labels and lengths are in range");
}

#[cfg(test)]
mod tests {
    use aws_lc_rs::hmac;
    use smt_proto::crypto::{RECORD_HEADER_LEN, TAG_LEN};

    use super::*;
    use crate::test_vectors::*;
    use hex_literal::hex;

    // RFC 8448 §3 "Simple 1-RTT Handshake" (TLS_AES_128_GCM_SHA256), the
    // handshake traffic secrets and the keys derived from them, copied from
    // the RFC's text. `RFC8448_*_AP_*` (application traffic) live in
    // `crate::test_vectors`.

    /// `{server}  derive secret "tls13 s hs traffic":` secret.
    const RFC8448_SERVER_HS_SECRET: [u8; 32] = hex!(
        "
        b6 7b 7d 69 0c c1 6c 4e 75 e5 42 13 cb 2d 37 b4
        e9 c9 12 bc de d9 10 5d 42 be fd 59 d3 91 ad 38"
    );

    /// `{server}  derive write traffic keys for handshake data:` key expanded.
    const RFC8448_SERVER_HS_KEY: [u8; 16] = hex!("3f ce 51 60 09 c2 17 27 d0 f2 e4 e8 6e e4 03 bc");

    /// `{server}  derive write traffic keys for handshake data:` iv expanded.
    const RFC8448_SERVER_HS_IV: [u8; 12] = hex!("5d 31 3e b2 67 12 76 ee 13 00 0b 30");

    /// `{client}  derive secret "tls13 c hs traffic":` secret.
    const RFC8448_CLIENT_HS_SECRET: [u8; 32] = hex!(
        "
        b3 ed db 12 6e 06 7f 35 a7 80 b3 ab f4 5e 2d 8f
        3b 1a 95 07 38 f5 2e 96 00 74 6a 0e 27 a5 5a 21"
    );

    /// `{server}  derive read traffic keys for handshake data:` key expanded
    /// (the client's handshake write key).
    const RFC8448_CLIENT_HS_KEY: [u8; 16] = hex!("db fa a6 93 d1 76 2c 5b 66 6a f5 d9 50 25 8d 01");

    /// `{server}  derive read traffic keys for handshake data:` iv expanded.
    const RFC8448_CLIENT_HS_IV: [u8; 12] = hex!("5b d3 c7 1b 83 6e 0b 76 bb 73 26 5f");

    const HEADER: [u8; RECORD_HEADER_LEN] = [0x17, 0x03, 0x03, 0x00, 0x21];
    const SEQ: u64 = 5 << 16;

    fn rfc8448_ap_secrets() -> TrafficSecrets {
        TrafficSecrets::new(
            TlsHash::Sha256,
            AeadAlgorithm::Aes128Gcm,
            &RFC8448_CLIENT_AP_SECRET,
            &RFC8448_SERVER_AP_SECRET,
        )
        .unwrap()
    }

    fn secrets(hash: TlsHash, aead: AeadAlgorithm) -> TrafficSecrets {
        let c2s: Vec<u8> = (0..hash.output_len() as u8).collect();
        let s2c: Vec<u8> = c2s.iter().map(|b| b ^ 0xa5).collect();
        TrafficSecrets::new(hash, aead, &c2s, &s2c).unwrap()
    }

    fn seal(cipher: &dyn PacketCipher, plaintext: &[u8]) -> Vec<u8> {
        let mut buf = plaintext.to_vec();
        buf.extend_from_slice(&[0; TAG_LEN]);
        cipher.seal_in_place(SEQ, &HEADER, &mut buf).unwrap();
        buf
    }

    fn opens(cipher: &dyn PacketCipher, mut record: Vec<u8>) -> bool {
        cipher.open_in_place(SEQ, &HEADER, &mut record).is_ok()
    }

    /// RFC 8448 §3: the application traffic secrets give the RFC's
    /// application keys and IVs.
    #[test]
    fn application_keys_match_rfc8448() {
        let s = rfc8448_ap_secrets();
        let c2s = s.client_to_server_key();
        let s2c = s.server_to_client_key();
        assert_eq!(c2s.algorithm(), AeadAlgorithm::Aes128Gcm);
        assert_eq!(c2s.key(), RFC8448_CLIENT_AP_KEY);
        assert_eq!(c2s.iv(), &RFC8448_CLIENT_AP_IV);
        assert_eq!(s2c.key(), RFC8448_SERVER_AP_KEY);
        assert_eq!(s2c.iv(), &RFC8448_SERVER_AP_IV);
    }

    /// RFC 8448 §3: the handshake traffic secrets give the RFC's handshake
    /// keys and IVs (the same derivation, other inputs).
    #[test]
    fn handshake_keys_match_rfc8448() {
        let cases = [
            (
                RFC8448_SERVER_HS_SECRET,
                RFC8448_SERVER_HS_KEY,
                RFC8448_SERVER_HS_IV,
            ),
            (
                RFC8448_CLIENT_HS_SECRET,
                RFC8448_CLIENT_HS_KEY,
                RFC8448_CLIENT_HS_IV,
            ),
        ];
        for (secret, key, iv) in cases {
            let derived = traffic_key(TlsHash::Sha256, AeadAlgorithm::Aes128Gcm, &secret);
            assert_eq!(derived.key(), key);
            assert_eq!(derived.iv(), &iv);
        }
    }

    /// The keys from RFC 8448's secrets seal the RFC's client application
    /// record byte for byte: the whole path secret → key → record.
    #[test]
    fn session_keys_seal_rfc8448_client_record() {
        let keys = session_keys(Role::Client, &rfc8448_ap_secrets());
        let mut plaintext = RFC8448_APP_PAYLOAD.to_vec();
        plaintext.push(CONTENT_TYPE_APPLICATION_DATA);
        plaintext.extend_from_slice(&[0; TAG_LEN]);
        let header: [u8; 5] = RFC8448_CLIENT_AP_RECORD_SEQ0[..5].try_into().unwrap();
        keys.tx.seal_in_place(0, &header, &mut plaintext).unwrap();
        assert_eq!(plaintext, RFC8448_CLIENT_AP_RECORD_SEQ0[5..]);
    }

    /// "traffic upd" computed a second way: HKDF-Expand by hand with HMAC
    /// (RFC 5869 §2.3; one block is enough for both hashes).
    #[test]
    fn next_secret_matches_hkdf_by_hand() {
        for (hash, mac) in [
            (TlsHash::Sha256, hmac::HMAC_SHA256),
            (TlsHash::Sha384, hmac::HMAC_SHA384),
        ] {
            let secret = vec![0x3c; hash.output_len()];
            let len = hash.output_len() as u8;
            let mut t1_input = vec![0, len, 17];
            t1_input.extend_from_slice(b"tls13 traffic upd");
            t1_input.extend_from_slice(&[0, 1]);
            let expected = hmac::sign(&hmac::Key::new(mac, &secret), &t1_input);
            assert_eq!(next_secret(hash, &secret), expected.as_ref(), "{hash:?}");
        }
    }

    /// The RFC 8448 client application secret, one update on, by hand
    /// (HMAC-SHA256 over the HkdfLabel, first block) and through the API.
    #[test]
    fn rfc8448_client_secret_updates_like_hkdf_by_hand() {
        let mut info = b"\x00\x20\x11tls13 traffic upd\x00".to_vec();
        info.push(1);
        let key = hmac::Key::new(hmac::HMAC_SHA256, &RFC8448_CLIENT_AP_SECRET);
        let by_hand = hmac::sign(&key, &info);
        let next = rfc8448_ap_secrets().next();
        assert_eq!(next.client_to_server(), by_hand.as_ref());
        assert_ne!(next.client_to_server(), RFC8448_CLIENT_AP_SECRET);
    }

    /// AES-256 keys from SHA-384 secrets: 32-byte key, 12-byte IV, computed
    /// by hand with HMAC-SHA384.
    #[test]
    fn sha384_traffic_key_matches_hkdf_by_hand() {
        let secret = [0x51; 48];
        let key = traffic_key(TlsHash::Sha384, AeadAlgorithm::Aes256Gcm, &secret);
        let mac = hmac::Key::new(hmac::HMAC_SHA384, &secret);
        let want_key = hmac::sign(&mac, b"\x00\x20\x09tls13 key\x00\x01");
        let want_iv = hmac::sign(&mac, b"\x00\x0c\x08tls13 iv\x00\x01");
        assert_eq!(key.key(), &want_key.as_ref()[..32]);
        assert_eq!(key.iv()[..], want_iv.as_ref()[..12]);
    }

    #[test]
    fn session_keys_pair_up_by_role() {
        for (hash, aead) in [
            (TlsHash::Sha256, AeadAlgorithm::Aes128Gcm),
            (TlsHash::Sha384, AeadAlgorithm::Aes256Gcm),
        ] {
            let s = secrets(hash, aead);
            let client = session_keys(Role::Client, &s);
            let server = session_keys(Role::Server, &s);
            assert_eq!((client.role, server.role), (Role::Client, Role::Server));
            assert!(opens(&*server.rx, seal(&*client.tx, b"request\x17")));
            assert!(opens(&*client.rx, seal(&*server.tx, b"response\x17")));
            assert!(!opens(&*client.rx, seal(&*client.tx, b"reflected\x17")));
            assert!(client.update.is_some() && server.update.is_some());
        }
    }

    #[test]
    fn epochs_are_deterministic_distinct_and_agree_between_sides() {
        let s = secrets(TlsHash::Sha256, AeadAlgorithm::Aes128Gcm);
        let client = session_keys(Role::Client, &s).update.unwrap();
        let server = session_keys(Role::Server, &s).update.unwrap();
        let (c1, s1) = (client.next_epoch(), server.next_epoch());
        // Both sides' epoch 1 agree, in both directions.
        assert!(opens(
            &*s1.client_to_server,
            seal(&*c1.client_to_server, b"up\x17")
        ));
        assert!(opens(
            &*c1.server_to_client,
            seal(&*s1.server_to_client, b"down\x17")
        ));
        // Epoch 1 is not epoch 0, and its directions differ.
        let epoch0 = session_keys(Role::Server, &s);
        assert!(!opens(&*epoch0.rx, seal(&*c1.client_to_server, b"x\x17")));
        assert!(!opens(
            &*c1.server_to_client,
            seal(&*c1.client_to_server, b"x\x17")
        ));
        // Epoch 2 differs from epoch 1 and is again the same on both sides.
        let (c2, s2) = (
            c1.update.unwrap().next_epoch(),
            s1.update.unwrap().next_epoch(),
        );
        assert!(!opens(
            &*s1.client_to_server,
            seal(&*c2.client_to_server, b"x\x17")
        ));
        assert!(opens(
            &*s2.client_to_server,
            seal(&*c2.client_to_server, b"x\x17")
        ));
    }

    #[test]
    fn next_follows_the_secret_chain() {
        let s = secrets(TlsHash::Sha384, AeadAlgorithm::Aes256Gcm);
        let n1 = s.next();
        let n2 = n1.next();
        assert_eq!(
            n1.client_to_server(),
            next_secret(TlsHash::Sha384, s.client_to_server())
        );
        assert_eq!(
            n2.server_to_client(),
            next_secret(TlsHash::Sha384, n1.server_to_client())
        );
        assert_eq!(n1.client_to_server().len(), 48);
        assert_ne!(n1.client_to_server(), s.client_to_server());
        assert_ne!(n2.client_to_server(), n1.client_to_server());
        assert_ne!(n1.client_to_server(), n1.server_to_client());
        assert_eq!(s.next(), n1);
        assert_ne!(
            n1.client_to_server_key().key(),
            s.client_to_server_key().key()
        );
    }

    #[test]
    fn secrets_of_the_wrong_length_are_refused() {
        let err = TrafficSecrets::new(
            TlsHash::Sha384,
            AeadAlgorithm::Aes256Gcm,
            &[0; 48],
            &[0; 32],
        )
        .unwrap_err();
        assert_eq!(
            err,
            SecretError::WrongLength {
                hash: TlsHash::Sha384,
                actual: 32
            }
        );
        assert_eq!(
            err.to_string(),
            "a Sha384 traffic secret is 48 bytes, but 32 bytes were given"
        );
    }

    #[test]
    #[should_panic(expected = "a Sha256 traffic secret is 32 bytes, but 48 bytes")]
    fn traffic_key_panics_on_a_wrong_length_secret() {
        let _ = traffic_key(TlsHash::Sha256, AeadAlgorithm::Aes128Gcm, &[0; 48]);
    }

    #[test]
    fn debug_never_prints_secrets() {
        let s = TrafficSecrets::new(
            TlsHash::Sha256,
            AeadAlgorithm::Aes128Gcm,
            &[0xab; 32],
            &[0xcd; 32],
        )
        .unwrap();
        let shown = format!("{s:?} {s:#?}");
        assert!(
            shown.contains("Sha256") && shown.contains("Aes128Gcm"),
            "{shown}"
        );
        for needle in ["ab", "AB", "171", "cd", "CD", "205"] {
            assert!(!shown.contains(needle), "{needle} leaked in {shown}");
        }
    }
}
