//! A session's keys by key epoch, made from what the key log holds
//! (`docs/protocol.md` § 11: TLS and 0-RTT secrets rekey by "traffic upd";
//! PSK keys never do).

use smt_crypto::{AeadAlgorithm, AesGcmCipher, TlsHash, TrafficKey, TrafficSecrets};

use crate::keylog::KeyMaterial;

/// Most epochs derived for one session: a capture that claims more is
/// either very long-lived or forged, and each costs two HKDF runs.
const MAX_EPOCHS: usize = 4096;

/// One key epoch: a cipher per direction.
#[derive(Debug)]
pub(crate) struct Epoch {
    pub c2s: AesGcmCipher,
    pub s2c: AesGcmCipher,
}

/// The epochs of one session, derived as far as they are needed.
#[derive(Debug)]
pub(crate) struct Keys {
    epochs: Vec<Epoch>,
    /// The secrets of the last epoch in `epochs`, for the next one.
    update: Option<TrafficSecrets>,
}

impl Keys {
    /// Keys from key-log material; `suite` is what the TLS ServerHello
    /// negotiated, if the capture holds it (else the secret length says).
    pub(crate) fn new(
        material: &KeyMaterial,
        suite: Option<(TlsHash, AeadAlgorithm)>,
    ) -> Option<Self> {
        match material {
            KeyMaterial::Tls { client, server } => {
                let (hash, aead) = suite.unwrap_or(match client.len() {
                    48 => (TlsHash::Sha384, AeadAlgorithm::Aes256Gcm),
                    _ => (TlsHash::Sha256, AeadAlgorithm::Aes128Gcm),
                });
                let secrets = TrafficSecrets::new(hash, aead, client, server).ok()?;
                Some(Self::from_secrets(vec![], secrets))
            }
            KeyMaterial::ZeroRtt { client, server, fs } => {
                let smt0 = zero_rtt_secrets(client, server)?;
                match fs {
                    None => Some(Self::from_secrets(vec![], smt0)),
                    Some((c, s)) => {
                        let first = epoch_of(&smt0);
                        Some(Self::from_secrets(vec![first], zero_rtt_secrets(c, s)?))
                    }
                }
            }
            KeyMaterial::Psk { client, server } => Some(Self {
                epochs: vec![Epoch {
                    c2s: AesGcmCipher::new(&psk_key(client)?),
                    s2c: AesGcmCipher::new(&psk_key(server)?),
                }],
                update: None,
            }),
        }
    }

    fn from_secrets(mut epochs: Vec<Epoch>, secrets: TrafficSecrets) -> Self {
        epochs.push(epoch_of(&secrets));
        Self {
            epochs,
            update: Some(secrets),
        }
    }

    /// Epoch `n`, derived now if it was not yet; `None` for keys that
    /// cannot rekey that far.
    pub(crate) fn epoch(&mut self, n: usize) -> Option<&Epoch> {
        while self.epochs.len() <= n && self.epochs.len() < MAX_EPOCHS {
            let next = self.update.as_ref()?.next();
            self.epochs.push(epoch_of(&next));
            self.update = Some(next);
        }
        self.epochs.get(n)
    }
}

fn epoch_of(secrets: &TrafficSecrets) -> Epoch {
    Epoch {
        c2s: AesGcmCipher::new(&secrets.client_to_server_key()),
        s2c: AesGcmCipher::new(&secrets.server_to_client_key()),
    }
}

/// The 0-RTT exchange's secrets: SHA-256, AES-128-GCM (`docs/handshake.md` § 4).
fn zero_rtt_secrets(client: &[u8], server: &[u8]) -> Option<TrafficSecrets> {
    TrafficSecrets::new(TlsHash::Sha256, AeadAlgorithm::Aes128Gcm, client, server).ok()
}

/// `key || iv` from a PSK key-log line: 28 bytes for AES-128-GCM, 44 for
/// AES-256-GCM.
fn psk_key(bytes: &[u8]) -> Option<TrafficKey> {
    let aead = match bytes.len() {
        28 => AeadAlgorithm::Aes128Gcm,
        44 => AeadAlgorithm::Aes256Gcm,
        _ => return None,
    };
    let (key, iv) = bytes.split_at(bytes.len() - 12);
    TrafficKey::new(aead, key, iv.try_into().ok()?).ok()
}
