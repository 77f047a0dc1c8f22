//! The narrow crypto interface the core owns.
//!
//! The core never names an AEAD library. It hands a [`PacketCipher`] the
//! composite record sequence number it *expects* (never one read from the
//! wire), the 5-byte TLS record header as associated data, and the buffer to
//! transform in place. Backends live in `smt-crypto`; [`NullCipher`] lives
//! here for deterministic tests, fuzzing and transport-only baselines.

use std::fmt;

/// Length of the AEAD tag on every record and of the MAC on control packets.
pub const TAG_LEN: usize = 16;

/// Length of the TLS record header used as AEAD associated data.
pub const RECORD_HEADER_LEN: usize = 5;

/// A cryptographic operation failed. Deliberately carries no detail: a
/// forged record and a corrupted one must look the same to an attacker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CryptoError;

impl fmt::Display for CryptoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("authentication failed")
    }
}

impl std::error::Error for CryptoError {}

/// Record protection and control-packet authentication for one direction of
/// one session (one traffic key).
///
/// `seq` is the 64-bit TLS record sequence number. SMT composes it as
/// `message_id << record_index_bits | record_index`; the nonce is
/// `iv XOR seq` exactly as in RFC 8446 §5.3.
pub trait PacketCipher: Send + Sync + fmt::Debug {
    /// Encrypts `buf[..buf.len() - TAG_LEN]` in place and writes the tag
    /// into the last [`TAG_LEN`] bytes. `buf` must be at least `TAG_LEN` long.
    fn seal_in_place(
        &self,
        seq: u64,
        aad: &[u8; RECORD_HEADER_LEN],
        buf: &mut [u8],
    ) -> Result<(), CryptoError>;

    /// Checks the tag in the last [`TAG_LEN`] bytes of `buf` and decrypts the
    /// rest in place, returning the plaintext length. On error the contents
    /// of `buf` are unspecified and must be discarded.
    fn open_in_place(
        &self,
        seq: u64,
        aad: &[u8; RECORD_HEADER_LEN],
        buf: &mut [u8],
    ) -> Result<usize, CryptoError>;

    /// Checks the tag at the end of `buf[from..]` and decrypts the rest
    /// of it to the start of `buf`, in one pass; returns the plaintext
    /// length. Opening a record that lies after its header (or after an
    /// earlier record's leftovers) this way leaves its data where the
    /// message wants it, with no move afterwards. On error the contents of
    /// `buf` are unspecified and must be discarded. The default opens in
    /// place and then moves the plaintext down; a backend that decrypts
    /// from one place into an overlapping one saves the move.
    fn open_within(
        &self,
        seq: u64,
        aad: &[u8; RECORD_HEADER_LEN],
        buf: &mut [u8],
        from: usize,
    ) -> Result<usize, CryptoError> {
        let body = buf.get_mut(from..).ok_or(CryptoError)?;
        let len = self.open_in_place(seq, aad, body)?;
        buf.copy_within(from..from + len, 0);
        Ok(len)
    }

    /// Seals the record body `plaintext || extra` into `out` without
    /// touching `plaintext`: `out` is `plaintext.len() + extra.len() +
    /// TAG_LEN` bytes, and ends with the tag. `extra` is what TLS 1.3 puts
    /// after the data (the content type and zero padding). The same
    /// ciphertext as copying the body into `out` and
    /// [`PacketCipher::seal_in_place`], which is what the default does;
    /// a backend that encrypts from one buffer into another saves the
    /// copy (one pass over a megabyte message's memory).
    fn seal_to(
        &self,
        seq: u64,
        aad: &[u8; RECORD_HEADER_LEN],
        plaintext: &[u8],
        extra: &[u8],
        out: &mut [u8],
    ) -> Result<(), CryptoError> {
        let (data, rest) = out
            .split_at_mut_checked(plaintext.len())
            .ok_or(CryptoError)?;
        if rest.len() != extra.len() + TAG_LEN {
            return Err(CryptoError);
        }
        data.copy_from_slice(plaintext);
        let (extra_out, tag) = rest.split_at_mut(extra.len());
        extra_out.copy_from_slice(extra);
        // Whatever the buffer held before: the output depends on nothing
        // but the inputs.
        tag.fill(0);
        self.seal_in_place(seq, aad, out)
    }

    /// Checks the tag at the end of `ciphertext` and decrypts the rest into
    /// the start of `out`, leaving `ciphertext` untouched; returns the
    /// plaintext length (`ciphertext.len() - TAG_LEN`). `out` must hold
    /// at least `ciphertext.len()` bytes: past the plaintext they are
    /// scratch space. On error the contents of `out` are unspecified and
    /// must be discarded. The default copies and opens in place; a backend
    /// that decrypts from one buffer into another saves the copy.
    fn open_to(
        &self,
        seq: u64,
        aad: &[u8; RECORD_HEADER_LEN],
        ciphertext: &[u8],
        out: &mut [u8],
    ) -> Result<usize, CryptoError> {
        let work = out.get_mut(..ciphertext.len()).ok_or(CryptoError)?;
        work.copy_from_slice(ciphertext);
        self.open_in_place(seq, aad, work)
    }

    /// A MAC over a whole control packet (everything before the tag), under
    /// a key derived from this direction's traffic key but distinct from it.
    fn control_tag(&self, packet: &[u8]) -> [u8; TAG_LEN];

    /// Constant-time check of a control-packet MAC.
    fn verify_control_tag(&self, packet: &[u8], tag: &[u8; TAG_LEN]) -> Result<(), CryptoError> {
        let expected = self.control_tag(packet);
        let diff = expected
            .iter()
            .zip(tag)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if diff == 0 {
            Ok(())
        } else {
            Err(CryptoError)
        }
    }

    /// Records one key may protect before it must be retired (the AEAD
    /// confidentiality limit; RFC 8446 §5.5 gives 2^24.5 full-size records
    /// for AES-GCM).
    fn record_limit(&self) -> u64;

    /// The key material, for a NIC that seals or opens this key's records
    /// itself (TLS offload; kTLS hands a driver the same, its
    /// `tls12_crypto_info_aes_gcm_*`). `None` (the default): the backend
    /// cannot hand its key out, and its records stay in software.
    fn offload_key(&self) -> Option<OffloadKey> {
        None
    }

    /// XORs into `buf` the keystream that encrypts record `seq`'s inner
    /// plaintext from byte `offset` on. Applied to bytes a NIC decrypted,
    /// it gives their ciphertext back, so software can authenticate a
    /// record that arrived partly decrypted (the kTLS offload paper's partial
    /// decryption). The default cannot, and fails: such a record is then
    /// refused like a forged one.
    fn apply_keystream(&self, seq: u64, offset: usize, buf: &mut [u8]) -> Result<(), CryptoError> {
        let _ = (seq, offset, buf);
        Err(CryptoError)
    }
}

/// The AEADs a NIC's TLS offload takes (TLS 1.3's AES-GCM suites).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OffloadSuite {
    /// AES-128-GCM: a 16-byte key.
    Aes128Gcm,
    /// AES-256-GCM: a 32-byte key.
    Aes256Gcm,
}

/// What a NIC needs to protect records under one traffic key: the AEAD,
/// the key and the static IV (the record sequence number comes with each
/// descriptor). `Debug` shows the suite only.
#[derive(Clone, PartialEq, Eq)]
pub struct OffloadKey {
    /// The AEAD.
    pub suite: OffloadSuite,
    /// The traffic key (16 or 32 bytes).
    pub key: Vec<u8>,
    /// The static IV, XORed with the record sequence number per record.
    pub iv: [u8; 12],
}

impl fmt::Debug for OffloadKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OffloadKey")
            .field("suite", &self.suite)
            .finish_non_exhaustive()
    }
}

/// Moves a session to its next key epoch (TLS 1.3 KeyUpdate semantics:
/// each direction's next traffic secret is derived from the current one, so
/// old keys cannot be recomputed from new ones).
pub trait KeyUpdate: Send + Sync + fmt::Debug {
    /// The next epoch's ciphers, client-to-server and server-to-client, and
    /// the updater for the epoch after that.
    fn next_epoch(&self) -> NextEpoch;
}

/// What [`KeyUpdate::next_epoch`] returns.
#[derive(Clone, Debug)]
pub struct NextEpoch {
    /// The next epoch's client-to-server cipher.
    pub client_to_server: std::sync::Arc<dyn PacketCipher>,
    /// The next epoch's server-to-client cipher.
    pub server_to_client: std::sync::Arc<dyn PacketCipher>,
    /// The updater for the epoch after that; `None` where there is none.
    pub update: Option<std::sync::Arc<dyn KeyUpdate>>,
}

/// The identity "cipher": no confidentiality, no integrity.
///
/// Seals to an all-zero tag and opens only all-zero tags. It exists so tests,
/// fuzzers and the unencrypted-baseline benchmarks exercise exactly the
/// same code paths as real keys. Never use it to protect data.
#[derive(Clone, Copy, Debug, Default)]
pub struct NullCipher;

impl PacketCipher for NullCipher {
    fn seal_in_place(
        &self,
        _seq: u64,
        _aad: &[u8; RECORD_HEADER_LEN],
        buf: &mut [u8],
    ) -> Result<(), CryptoError> {
        let tag_at = buf.len().checked_sub(TAG_LEN).ok_or(CryptoError)?;
        buf[tag_at..].fill(0);
        Ok(())
    }

    fn open_in_place(
        &self,
        _seq: u64,
        _aad: &[u8; RECORD_HEADER_LEN],
        buf: &mut [u8],
    ) -> Result<usize, CryptoError> {
        let tag_at = buf.len().checked_sub(TAG_LEN).ok_or(CryptoError)?;
        if buf[tag_at..].iter().all(|&b| b == 0) {
            Ok(tag_at)
        } else {
            Err(CryptoError)
        }
    }

    fn open_to(
        &self,
        _seq: u64,
        _aad: &[u8; RECORD_HEADER_LEN],
        ciphertext: &[u8],
        out: &mut [u8],
    ) -> Result<usize, CryptoError> {
        let tag_at = ciphertext.len().checked_sub(TAG_LEN).ok_or(CryptoError)?;
        let out = out.get_mut(..ciphertext.len()).ok_or(CryptoError)?;
        if ciphertext[tag_at..].iter().any(|&b| b != 0) {
            return Err(CryptoError);
        }
        out[..tag_at].copy_from_slice(&ciphertext[..tag_at]);
        Ok(tag_at)
    }

    fn control_tag(&self, _packet: &[u8]) -> [u8; TAG_LEN] {
        [0; TAG_LEN]
    }

    fn record_limit(&self) -> u64 {
        u64::MAX
    }

    /// No encryption, no keystream: the bytes are their own ciphertext.
    fn apply_keystream(
        &self,
        _seq: u64,
        _offset: usize,
        _buf: &mut [u8],
    ) -> Result<(), CryptoError> {
        Ok(())
    }
}
