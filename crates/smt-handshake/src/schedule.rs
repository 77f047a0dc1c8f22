//! The 0-RTT key schedule, built only from TLS 1.3's primitives (RFC 8446
//! §7.1): HKDF-Extract, HKDF-Expand-Label and Derive-Secret with SHA-256.
//!
//! ```text
//! dh0          = X25519(e_c, S)                     client ephemeral × server static
//! early_secret = HKDF-Extract(salt = 0^32, IKM = dh0)
//! th0          = SHA-256(ticket || client_random || e_c.pub || flags || client_time)
//! smt_c2s      = Derive-Secret(early_secret, "smt0 c ap", th0)   ┐ SMT-key
//! smt_s2c      = Derive-Secret(early_secret, "smt0 s ap", th0)   ┘ (epoch 0)
//!
//! dh1          = X25519(e_s, e_c.pub)               only with forward secrecy
//! fs_secret    = HKDF-Extract(salt = Derive-Secret(early_secret, "smt0 derived", ""),
//!                             IKM = dh1)
//! th1          = SHA-256(th0 || e_s.pub)
//! fs_c2s       = Derive-Secret(fs_secret, "smt fs c ap", th1)    ┐ fs-key
//! fs_s2c       = Derive-Secret(fs_secret, "smt fs s ap", th1)    ┘ (epoch 1)
//! finished_key = HKDF-Expand-Label(fs_secret, "finished", "", 32)
//! confirm      = HMAC-SHA256(finished_key, th1)
//!
//! each traffic secret → key = HKDF-Expand-Label(secret, "key", "", 16)
//!                       iv  = HKDF-Expand-Label(secret, "iv", "", 12)   AES-128-GCM
//! next epoch:   secret' = HKDF-Expand-Label(secret, "traffic upd", "", 32)
//! ```
//!
//! `Derive-Secret(s, label, "")` hashes the empty transcript, as RFC 8446
//! does: its context is SHA-256("").

use std::fmt;
use std::sync::Arc;

use aws_lc_rs::{digest, hmac};
use smt_crypto::psk::hkdf_expand_label;
use smt_crypto::{AeadAlgorithm, AesGcmCipher, TrafficKey, IV_LEN};
use smt_proto::crypto::{KeyUpdate, NextEpoch, PacketCipher};
use smt_proto::{Role, SessionKeys};
use zeroize::Zeroize;

/// Length of every secret and transcript hash here (SHA-256).
pub(crate) const HASH_LEN: usize = 32;

/// A SHA-256 transcript hash.
pub(crate) type TranscriptHash = [u8; HASH_LEN];

/// Derive-Secret labels for the SMT-key (client-to-server, server-to-client).
pub(crate) const SMT_C2S: &[u8] = b"smt0 c ap";
pub(crate) const SMT_S2C: &[u8] = b"smt0 s ap";
/// Derive-Secret label for the salt of the forward-secret extract.
pub(crate) const DERIVED: &[u8] = b"smt0 derived";
/// Derive-Secret labels for the fs-key.
pub(crate) const FS_C2S: &[u8] = b"smt fs c ap";
pub(crate) const FS_S2C: &[u8] = b"smt fs s ap";
/// Expansion labels applied to an already separated secret, as TLS 1.3
/// applies them to its own secrets.
pub(crate) const FINISHED: &[u8] = b"finished";
const KEY: &[u8] = b"key";
const IV: &[u8] = b"iv";
const TRAFFIC_UPDATE: &[u8] = b"traffic upd";

/// The record protection of both keys.
const AEAD: AeadAlgorithm = AeadAlgorithm::Aes128Gcm;

/// A 32-byte secret, wiped when dropped. `Debug` never prints it.
#[derive(Clone)]
pub(crate) struct Secret([u8; HASH_LEN]);

impl Secret {
    pub(crate) fn new(bytes: [u8; HASH_LEN]) -> Self {
        Self(bytes)
    }

    pub(crate) fn as_bytes(&self) -> &[u8; HASH_LEN] {
        &self.0
    }

    pub(crate) fn is_zero(&self) -> bool {
        self.0.iter().fold(0, |acc, b| acc | b) == 0
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// HKDF-Extract(salt, IKM) = HMAC-SHA256(salt, IKM) (RFC 5869 §2.2).
pub(crate) fn hkdf_extract(salt: &[u8; HASH_LEN], ikm: &Secret) -> Secret {
    let key = hmac::Key::new(hmac::HMAC_SHA256, salt);
    Secret::new(to_array(hmac::sign(&key, ikm.as_bytes()).as_ref()))
}

/// Derive-Secret(secret, label, messages) with the messages already hashed
/// (RFC 8446 §7.1).
pub(crate) fn derive_secret(secret: &Secret, label: &[u8], transcript: &TranscriptHash) -> Secret {
    let mut out = [0; HASH_LEN];
    expand_label(secret, label, transcript, &mut out);
    Secret::new(out)
}

/// `early_secret = HKDF-Extract(0, dh0)`.
pub(crate) fn early_secret(dh0: &Secret) -> Secret {
    hkdf_extract(&[0; HASH_LEN], dh0)
}

/// The SMT-key's traffic secrets.
pub(crate) fn smt_secrets(early_secret: &Secret, th0: &TranscriptHash) -> Directions {
    Directions {
        c2s: derive_secret(early_secret, SMT_C2S, th0),
        s2c: derive_secret(early_secret, SMT_S2C, th0),
    }
}

/// `fs_secret = HKDF-Extract(Derive-Secret(early_secret, "smt0 derived", ""), dh1)`.
pub(crate) fn fs_secret(early_secret: &Secret, dh1: &Secret) -> Secret {
    let empty = to_array(digest::digest(&digest::SHA256, b"").as_ref());
    let salt = derive_secret(early_secret, DERIVED, &empty);
    hkdf_extract(salt.as_bytes(), dh1)
}

/// The fs-key's traffic secrets.
pub(crate) fn fs_secrets(fs_secret: &Secret, th1: &TranscriptHash) -> Directions {
    Directions {
        c2s: derive_secret(fs_secret, FS_C2S, th1),
        s2c: derive_secret(fs_secret, FS_S2C, th1),
    }
}

/// `th1 = SHA-256(th0 || e_s.pub)`.
pub(crate) fn th1(th0: &TranscriptHash, server_share: &[u8]) -> TranscriptHash {
    let mut ctx = digest::Context::new(&digest::SHA256);
    ctx.update(th0);
    ctx.update(server_share);
    to_array(ctx.finish().as_ref())
}

/// The server's confirmation: `HMAC(finished_key, th1)`.
pub(crate) fn confirmation(fs_secret: &Secret, th1: &TranscriptHash) -> [u8; HASH_LEN] {
    to_array(hmac::sign(&finished_key(fs_secret), th1).as_ref())
}

/// Constant-time check of the server's confirmation.
pub(crate) fn confirmation_is_valid(fs_secret: &Secret, th1: &TranscriptHash, mac: &[u8]) -> bool {
    hmac::verify(&finished_key(fs_secret), th1, mac).is_ok()
}

fn finished_key(fs_secret: &Secret) -> hmac::Key {
    let mut key = [0; HASH_LEN];
    expand_label(fs_secret, FINISHED, b"", &mut key);
    let hmac_key = hmac::Key::new(hmac::HMAC_SHA256, &key);
    key.zeroize();
    hmac_key
}

/// One traffic secret per direction.
#[derive(Debug)]
pub(crate) struct Directions {
    pub c2s: Secret,
    pub s2c: Secret,
}

impl Directions {
    /// The session keys for `role`. With `updatable`, the keys carry a
    /// [`KeyUpdate`] that derives the next epoch's secrets with
    /// "traffic upd", as TLS 1.3's KeyUpdate does.
    pub(crate) fn session_keys(self, role: Role, updatable: bool) -> SessionKeys {
        let c2s = traffic_cipher(&self.c2s);
        let s2c = traffic_cipher(&self.s2c);
        let keys = match role {
            Role::Client => SessionKeys::new(role, c2s, s2c),
            Role::Server => SessionKeys::new(role, s2c, c2s),
        };
        if updatable {
            keys.with_update(Arc::new(TrafficUpdate(self)))
        } else {
            keys
        }
    }
}

/// AES-128-GCM record protection from a traffic secret (RFC 8446 §7.3).
fn traffic_cipher(secret: &Secret) -> Arc<dyn PacketCipher> {
    let mut key = [0; 16];
    let mut iv = [0; IV_LEN];
    expand_label(secret, KEY, b"", &mut key);
    expand_label(secret, IV, b"", &mut iv);
    // NOTE(unwrap): the key is exactly AES-128's 16 bytes.
    let traffic = TrafficKey::new(AEAD, &key, iv).expect("AES-128 key length");
    key.zeroize();
    iv.zeroize();
    Arc::new(AesGcmCipher::new(&traffic))
}

/// The next key epoch: each direction's secret expanded with "traffic upd".
struct TrafficUpdate(Directions);

impl KeyUpdate for TrafficUpdate {
    fn next_epoch(&self) -> NextEpoch {
        let next = |secret: &Secret| {
            let mut out = [0; HASH_LEN];
            expand_label(secret, TRAFFIC_UPDATE, b"", &mut out);
            Secret::new(out)
        };
        let next = Directions {
            c2s: next(&self.0.c2s),
            s2c: next(&self.0.s2c),
        };
        NextEpoch {
            client_to_server: traffic_cipher(&next.c2s),
            server_to_client: traffic_cipher(&next.s2c),
            update: Some(Arc::new(TrafficUpdate(next))),
        }
    }
}

impl fmt::Debug for TrafficUpdate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TrafficUpdate(..)")
    }
}

fn expand_label(secret: &Secret, label: &[u8], context: &[u8], out: &mut [u8]) {
    // NOTE(unwrap): every label here is a short constant, every context a
    // hash or empty, every output at most 32 bytes: all within RFC 8446's
    // limits, the only thing hkdf_expand_label rejects.
    hkdf_expand_label(secret.as_bytes(), label, context, out).expect("label within limits");
}

fn to_array(bytes: &[u8]) -> [u8; HASH_LEN] {
    // NOTE(unwrap): only ever called with SHA-256 outputs.
    bytes.try_into().expect("SHA-256 output is 32 bytes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use smt_proto::crypto::TAG_LEN;

    /// HMAC-SHA256 written out from its definition, for an independent check.
    fn hmac_by_hand(key: &[u8], msg: &[u8]) -> [u8; 32] {
        let mut k = [0u8; 64];
        k[..key.len()].copy_from_slice(key);
        let pad = |b: u8| k.iter().map(|x| x ^ b).collect::<Vec<_>>();
        let mut inner = pad(0x36);
        inner.extend_from_slice(msg);
        let inner = digest::digest(&digest::SHA256, &inner);
        let mut outer = pad(0x5c);
        outer.extend_from_slice(inner.as_ref());
        to_array(digest::digest(&digest::SHA256, &outer).as_ref())
    }

    /// HKDF-Expand-Label for outputs of at most 32 bytes, by hand.
    fn expand_label_by_hand(secret: &[u8; 32], label: &str, ctx: &[u8], len: usize) -> Vec<u8> {
        let full = format!("tls13 {label}");
        let mut info = vec![0, len as u8, full.len() as u8];
        info.extend_from_slice(full.as_bytes());
        info.push(ctx.len() as u8);
        info.extend_from_slice(ctx);
        info.push(1);
        hmac_by_hand(secret, &info)[..len].to_vec()
    }

    #[test]
    fn schedule_matches_its_definition() {
        let dh0 = Secret::new([0x11; 32]);
        let dh1 = Secret::new([0x22; 32]);
        let th0 = [0x33; 32];
        let e_s = [0x44; 32];

        let early = early_secret(&dh0);
        assert_eq!(early.as_bytes(), &hmac_by_hand(&[0; 32], &[0x11; 32]));
        let smt = smt_secrets(&early, &th0);
        let want_c2s = expand_label_by_hand(early.as_bytes(), "smt0 c ap", &th0, 32);
        assert_eq!(smt.c2s.as_bytes().as_slice(), want_c2s);
        let want_s2c = expand_label_by_hand(early.as_bytes(), "smt0 s ap", &th0, 32);
        assert_eq!(smt.s2c.as_bytes().as_slice(), want_s2c);

        let empty_hash = digest::digest(&digest::SHA256, b"");
        let salt = expand_label_by_hand(early.as_bytes(), "smt0 derived", empty_hash.as_ref(), 32);
        let fs = fs_secret(&early, &dh1);
        assert_eq!(fs.as_bytes(), &hmac_by_hand(&salt, &[0x22; 32]));

        let mut th1_input = th0.to_vec();
        th1_input.extend_from_slice(&e_s);
        let th1 = th1(&th0, &e_s);
        assert_eq!(
            th1.as_slice(),
            digest::digest(&digest::SHA256, &th1_input).as_ref()
        );
        let fs_dirs = fs_secrets(&fs, &th1);
        let want = expand_label_by_hand(fs.as_bytes(), "smt fs c ap", &th1, 32);
        assert_eq!(fs_dirs.c2s.as_bytes().as_slice(), want);
        let want = expand_label_by_hand(fs.as_bytes(), "smt fs s ap", &th1, 32);
        assert_eq!(fs_dirs.s2c.as_bytes().as_slice(), want);

        let finished = expand_label_by_hand(fs.as_bytes(), "finished", b"", 32);
        let mac = hmac_by_hand(&finished, &th1);
        assert_eq!(confirmation(&fs, &th1), mac);
        assert!(confirmation_is_valid(&fs, &th1, &mac));
        let mut bad = mac;
        bad[31] ^= 1;
        assert!(!confirmation_is_valid(&fs, &th1, &bad));
        assert!(!confirmation_is_valid(&fs, &th1, &mac[..31]));
    }

    fn seal(cipher: &dyn PacketCipher, seq: u64, text: &[u8]) -> Vec<u8> {
        let mut buf = text.to_vec();
        buf.extend_from_slice(&[0; TAG_LEN]);
        cipher
            .seal_in_place(seq, &[0x17, 3, 3, 0, 0], &mut buf)
            .unwrap();
        buf
    }

    #[test]
    fn traffic_keys_are_tls13_key_and_iv_expansions() {
        let secret = Secret::new([0x5a; 32]);
        let key = expand_label_by_hand(secret.as_bytes(), "key", b"", 16);
        let iv: [u8; 12] = expand_label_by_hand(secret.as_bytes(), "iv", b"", 12)
            .try_into()
            .unwrap();
        let reference = AesGcmCipher::new(&TrafficKey::new(AEAD, &key, iv).unwrap());
        let ours = traffic_cipher(&secret);
        assert_eq!(
            seal(&reference, 7, b"record"),
            seal(ours.as_ref(), 7, b"record")
        );
    }

    #[test]
    fn key_update_moves_both_directions_to_new_keys() {
        let dirs = Directions {
            c2s: Secret::new([1; 32]),
            s2c: Secret::new([2; 32]),
        };
        let keys = dirs.session_keys(Role::Client, true);
        let next = keys.update.as_ref().unwrap().next_epoch();
        let after = next.update.as_ref().unwrap().next_epoch();
        let text = [9u8; 40];
        let epoch0 = seal(keys.tx.as_ref(), 1, &text);
        let epoch1 = seal(next.client_to_server.as_ref(), 1, &text);
        let epoch2 = seal(after.client_to_server.as_ref(), 1, &text);
        assert_ne!(epoch0, epoch1);
        assert_ne!(epoch1, epoch2);
        let next_secret = expand_label_by_hand(&[1; 32], "traffic upd", b"", 32);
        let reference = traffic_cipher(&Secret::new(to_array(&next_secret)));
        assert_eq!(epoch1, seal(reference.as_ref(), 1, &text));
    }
}
