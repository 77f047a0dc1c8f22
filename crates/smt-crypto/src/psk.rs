//! Session keys from a pre-shared master secret, built only from TLS 1.3's
//! own key-schedule primitives (RFC 8446 §7.1), with SHA-256 throughout.
//!
//! A server holding one master secret gives every client its own pair of
//! traffic keys by deriving them with the client's identity (for example its
//! address bytes) as the HKDF-Expand-Label context:
//!
//! ```text
//! prk         = HKDF-Extract(salt = 32 zero bytes, ikm = master_secret)
//! c2s key, iv = HKDF-Expand-Label(prk, "smt c2s key" / "smt c2s iv", context, len)
//! s2c key, iv = HKDF-Expand-Label(prk, "smt s2c key" / "smt s2c iv", context, len)
//! ```
//!
//! where `len` is the algorithm's key length, or 12 for the IV.

use std::fmt;

use aws_lc_rs::hkdf;

use crate::key::{AeadAlgorithm, TrafficKey, IV_LEN};
use crate::okm::OkmLen;

/// Length of a SHA-256 secret, the PRK that [`hkdf_expand_label`] expands.
pub const SECRET_LEN: usize = 32;

/// Longest `Label` RFC 8446 §7.1 allows: `"tls13 " + Label` is at most 255.
pub const MAX_LABEL_LEN: usize = 255 - LABEL_PREFIX.len();

/// Longest HKDF-Expand-Label context (an `opaque<0..255>`).
pub const MAX_CONTEXT_LEN: usize = 255;

/// Longest HKDF-SHA256 output (RFC 5869 §2.3: 255 hash lengths).
pub const MAX_OUTPUT_LEN: usize = 255 * SECRET_LEN;

const LABEL_PREFIX: &[u8] = b"tls13 ";

/// Arguments to [`hkdf_expand_label`] outside what RFC 8446 §7.1 can encode.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LabelError {
    /// The label is longer than [`MAX_LABEL_LEN`].
    LabelTooLong {
        /// The length that was passed.
        len: usize,
    },
    /// The context is longer than [`MAX_CONTEXT_LEN`].
    ContextTooLong {
        /// The length that was passed.
        len: usize,
    },
    /// The requested output is longer than [`MAX_OUTPUT_LEN`].
    OutputTooLong {
        /// The length that was requested.
        len: usize,
    },
}

impl fmt::Display for LabelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::LabelTooLong { len } => {
                write!(
                    f,
                    "HKDF-Expand-Label label is {len} bytes; at most {MAX_LABEL_LEN} fit"
                )
            }
            Self::ContextTooLong { len } => {
                write!(
                    f,
                    "HKDF-Expand-Label context is {len} bytes; at most {MAX_CONTEXT_LEN} fit"
                )
            }
            Self::OutputTooLong { len } => {
                write!(
                    f,
                    "HKDF-SHA256 can output at most {MAX_OUTPUT_LEN} bytes, not {len}"
                )
            }
        }
    }
}

impl std::error::Error for LabelError {}

/// HKDF-Expand-Label of RFC 8446 §7.1 with SHA-256: fills `out` with
/// `HKDF-Expand(secret, HkdfLabel { out.len(), "tls13 " + label, context })`.
pub fn hkdf_expand_label(
    secret: &[u8; SECRET_LEN],
    label: &[u8],
    context: &[u8],
    out: &mut [u8],
) -> Result<(), LabelError> {
    let prk = hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, secret);
    expand_label(&prk, label, context, out)
}

/// Derives the client-to-server and server-to-client traffic keys for the
/// peer named by `context` from a pre-shared `master_secret` (see the
/// module docs). Deterministic: both ends derive the same pair.
///
/// `master_secret` should be at least 32 bytes from a good random source;
/// everything the keys protect is only as strong as it.
///
/// # Panics
///
/// If `context` is longer than [`MAX_CONTEXT_LEN`] (255) bytes. Pass a
/// hash of a longer identity instead.
pub fn derive_session_keys(
    master_secret: &[u8],
    context: &[u8],
    algorithm: AeadAlgorithm,
) -> (
    TrafficKey, /* client -> server */
    TrafficKey, /* server -> client */
) {
    assert!(
        context.len() <= MAX_CONTEXT_LEN,
        "derive_session_keys: context is {} bytes; at most {MAX_CONTEXT_LEN} fit (hash it first)",
        context.len()
    );
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, &[0; SECRET_LEN]).extract(master_secret);
    let c2s = direction_key(&prk, b"smt c2s key", b"smt c2s iv", context, algorithm);
    let s2c = direction_key(&prk, b"smt s2c key", b"smt s2c iv", context, algorithm);
    (c2s, s2c)
}

fn direction_key(
    prk: &hkdf::Prk,
    key_label: &[u8],
    iv_label: &[u8],
    context: &[u8],
    algorithm: AeadAlgorithm,
) -> TrafficKey {
    let mut key = [0; 32];
    let key = &mut key[..algorithm.key_len()];
    let mut iv = [0; IV_LEN];
    // NOTE(unwrap): fixed short labels, a context the caller's assert bounded,
    // outputs of at most 32 bytes, and a key of exactly the algorithm's length.
    expand_label(prk, key_label, context, key).expect("labels and lengths are in range");
    expand_label(prk, iv_label, context, &mut iv).expect("labels and lengths are in range");
    TrafficKey::new(algorithm, key, iv).expect("key is the algorithm's length")
}

/// HKDF-Expand-Label under any PRK: the one place the `HkdfLabel` is
/// built (also for `crate::secrets`, whose secrets may be SHA-384).
pub(crate) fn expand_label(
    prk: &hkdf::Prk,
    label: &[u8],
    context: &[u8],
    out: &mut [u8],
) -> Result<(), LabelError> {
    let info = HkdfLabel::new(out.len(), label, context)?;
    // NOTE(unwrap): `HkdfLabel::new` bounded `out.len()` by MAX_OUTPUT_LEN,
    // the only thing aws-lc-rs's expand and fill reject.
    prk.expand(&[info.as_bytes()], OkmLen(out.len()))
        .and_then(|okm| okm.fill(out))
        .expect("output length was checked");
    Ok(())
}

/// The `HkdfLabel` structure of RFC 8446 §7.1, serialised:
/// `uint16 length || opaque label<7..255> || opaque context<0..255>`.
struct HkdfLabel {
    buf: [u8; 2 + 1 + 255 + 1 + MAX_CONTEXT_LEN],
    len: usize,
}

impl HkdfLabel {
    fn new(out_len: usize, label: &[u8], context: &[u8]) -> Result<Self, LabelError> {
        if label.len() > MAX_LABEL_LEN {
            return Err(LabelError::LabelTooLong { len: label.len() });
        }
        if context.len() > MAX_CONTEXT_LEN {
            return Err(LabelError::ContextTooLong { len: context.len() });
        }
        let length = match u16::try_from(out_len) {
            Ok(length) if out_len <= MAX_OUTPUT_LEN => length,
            _ => return Err(LabelError::OutputTooLong { len: out_len }),
        };
        let mut this = Self {
            buf: [0; 2 + 1 + 255 + 1 + MAX_CONTEXT_LEN],
            len: 0,
        };
        this.push(&length.to_be_bytes());
        // NOTE(as): both lengths were bounded by 255 above.
        this.push(&[(LABEL_PREFIX.len() + label.len()) as u8]);
        this.push(LABEL_PREFIX);
        this.push(label);
        this.push(&[context.len() as u8]);
        this.push(context);
        Ok(this)
    }

    fn push(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_vectors::*;

    fn expand(secret: &[u8; 32], label: &[u8], len: usize) -> Vec<u8> {
        let mut out = vec![0; len];
        hkdf_expand_label(secret, label, b"", &mut out).unwrap();
        out
    }

    /// RFC 8448 §3: the `key info` and `iv info` lines are the HkdfLabel
    /// encodings for the traffic key and IV.
    #[test]
    fn hkdf_label_encoding_matches_rfc8448() {
        assert_eq!(
            HkdfLabel::new(16, b"key", b"").unwrap().as_bytes(),
            RFC8448_KEY_INFO
        );
        assert_eq!(
            HkdfLabel::new(12, b"iv", b"").unwrap().as_bytes(),
            RFC8448_IV_INFO
        );
    }

    #[test]
    fn hkdf_label_carries_the_context() {
        let label = HkdfLabel::new(0x0120, b"x", b"\x01\x02").unwrap();
        assert_eq!(label.as_bytes(), b"\x01\x20\x07tls13 x\x02\x01\x02");
    }

    /// RFC 8448 §3: application traffic key and IV from the application
    /// traffic secrets, for both directions.
    #[test]
    fn expand_label_reproduces_rfc8448_application_keys() {
        assert_eq!(
            expand(&RFC8448_SERVER_AP_SECRET, b"key", 16),
            RFC8448_SERVER_AP_KEY
        );
        assert_eq!(
            expand(&RFC8448_SERVER_AP_SECRET, b"iv", 12),
            RFC8448_SERVER_AP_IV
        );
        assert_eq!(
            expand(&RFC8448_CLIENT_AP_SECRET, b"key", 16),
            RFC8448_CLIENT_AP_KEY
        );
        assert_eq!(
            expand(&RFC8448_CLIENT_AP_SECRET, b"iv", 12),
            RFC8448_CLIENT_AP_IV
        );
    }

    #[test]
    fn expand_label_rejects_what_cannot_be_encoded() {
        let secret = [0; 32];
        let mut out = [0; 16];
        let long = [b'a'; 256];
        assert_eq!(
            hkdf_expand_label(&secret, &long[..MAX_LABEL_LEN + 1], b"", &mut out),
            Err(LabelError::LabelTooLong { len: 250 })
        );
        assert!(hkdf_expand_label(&secret, &long[..MAX_LABEL_LEN], b"", &mut out).is_ok());
        assert_eq!(
            hkdf_expand_label(&secret, b"k", &long, &mut out),
            Err(LabelError::ContextTooLong { len: 256 })
        );
        assert!(hkdf_expand_label(&secret, b"k", &long[..255], &mut out).is_ok());
        let mut big = vec![0; MAX_OUTPUT_LEN + 1];
        assert_eq!(
            hkdf_expand_label(&secret, b"k", b"", &mut big),
            Err(LabelError::OutputTooLong {
                len: MAX_OUTPUT_LEN + 1
            })
        );
        assert!(hkdf_expand_label(&secret, b"k", b"", &mut big[..MAX_OUTPUT_LEN]).is_ok());
    }

    #[test]
    fn label_error_says_the_limit() {
        let err = LabelError::ContextTooLong { len: 300 };
        assert_eq!(
            err.to_string(),
            "HKDF-Expand-Label context is 300 bytes; at most 255 fit"
        );
    }

    #[test]
    fn session_keys_are_deterministic() {
        let master = [0x42; 32];
        for algorithm in [AeadAlgorithm::Aes128Gcm, AeadAlgorithm::Aes256Gcm] {
            let first = derive_session_keys(&master, b"10.0.0.1:4000", algorithm);
            let again = derive_session_keys(&master, b"10.0.0.1:4000", algorithm);
            assert_eq!(first, again);
            assert_eq!(first.0.algorithm(), algorithm);
            assert_eq!(first.0.key().len(), algorithm.key_len());
        }
    }

    #[test]
    fn directions_contexts_and_masters_all_differ() {
        let alg = AeadAlgorithm::Aes128Gcm;
        let (a_c2s, a_s2c) = derive_session_keys(&[1; 32], b"client a", alg);
        let (b_c2s, b_s2c) = derive_session_keys(&[1; 32], b"client b", alg);
        let (m_c2s, _) = derive_session_keys(&[2; 32], b"client a", alg);
        let all = [&a_c2s, &a_s2c, &b_c2s, &b_s2c, &m_c2s];
        for (i, x) in all.iter().enumerate() {
            for y in &all[i + 1..] {
                assert_ne!(x.key(), y.key());
                assert_ne!(x.iv(), y.iv());
            }
        }
    }

    /// The AES-128 key is not a prefix of the AES-256 key: the requested
    /// length is part of the HkdfLabel.
    #[test]
    fn key_length_is_bound_into_the_derivation() {
        let (k128, _) = derive_session_keys(&[3; 32], b"ctx", AeadAlgorithm::Aes128Gcm);
        let (k256, _) = derive_session_keys(&[3; 32], b"ctx", AeadAlgorithm::Aes256Gcm);
        assert_ne!(k128.key(), &k256.key()[..16]);
        assert_eq!(k128.iv(), k256.iv());
    }

    /// The derivation is exactly the documented schedule: extract with a
    /// zero salt, then the public HKDF-Expand-Label with the four labels.
    #[test]
    fn session_keys_follow_the_documented_schedule() {
        let master = b"a pre-shared master secret of some length";
        let zero_salt = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, &[0; 32]);
        let prk: [u8; 32] = aws_lc_rs::hmac::sign(&zero_salt, master)
            .as_ref()
            .try_into()
            .unwrap();
        let (c2s, s2c) = derive_session_keys(master, b"ctx", AeadAlgorithm::Aes256Gcm);
        for (key, dir) in [(&c2s, "c2s"), (&s2c, "s2c")] {
            let mut want_key = [0; 32];
            let mut want_iv = [0; 12];
            hkdf_expand_label(
                &prk,
                format!("smt {dir} key").as_bytes(),
                b"ctx",
                &mut want_key,
            )
            .unwrap();
            hkdf_expand_label(
                &prk,
                format!("smt {dir} iv").as_bytes(),
                b"ctx",
                &mut want_iv,
            )
            .unwrap();
            assert_eq!(key.key(), want_key);
            assert_eq!(key.iv(), &want_iv);
        }
    }

    #[test]
    #[should_panic(expected = "at most 255 fit")]
    fn oversized_context_panics_with_a_fix() {
        let _ = derive_session_keys(&[0; 32], &[0; 256], AeadAlgorithm::Aes128Gcm);
    }
}
