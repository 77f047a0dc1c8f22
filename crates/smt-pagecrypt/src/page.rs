//! Sealing and opening one page: XTS-AES-128 over page ‖ CRC-64 ‖ 0^8.

use std::collections::HashMap;
use std::fmt;

use crate::crc::Crc64;
use crate::keys::{KeyId, KeyRing};
use crate::tweak::Tweak;
use crate::xts::XtsCipher as Xts;
use crate::{Page, CRC_LEN, PAGE_SIZE, SEALED_LEN};

/// A page as the memory node stores it: the ciphertext and the (public)
/// ID of the key that sealed it.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedPage {
    /// The key that sealed the page; the opener looks it up in its ring.
    pub key: KeyId,
    /// XTS ciphertext of page ‖ CRC-64 ‖ 0^8.
    pub bytes: Box<[u8; SEALED_LEN]>,
}

impl fmt::Debug for SealedPage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealedPage")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// Why a sealed page did not open. Which attack it was cannot be told
/// apart (that is the point of a cipher): a tampered, moved, replayed
/// (with versions) or wrongly keyed page all decrypt to noise.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum IntegrityError {
    /// The page names a key this side does not hold (retired, or never
    /// issued).
    UnknownKey(KeyId),
    /// The decrypted CRC-64 does not match the decrypted page.
    Checksum {
        /// The CRC-64 decrypted from bytes 4096..4104.
        stored: u64,
        /// The CRC-64 of the decrypted page.
        computed: u64,
    },
    /// The decrypted padding is not zero (the last block was changed).
    Padding,
}

impl fmt::Display for IntegrityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownKey(id) => write!(
                f,
                "the page was sealed under {id}, which this client does not hold (retired or never issued)"
            ),
            Self::Checksum { stored, computed } => write!(
                f,
                "the page failed its CRC-64 (stored {stored:016x}, computed {computed:016x}): \
                 it was changed, moved from another address, sealed under another key, or \
                 (with versions) is a stale copy"
            ),
            Self::Padding => write!(
                f,
                "the page's padding is not zero after decryption: its last block was changed, \
                 or it was moved, re-keyed or replayed"
            ),
        }
    }
}

impl std::error::Error for IntegrityError {}

/// Seals and opens pages with a key ring and a CRC-64. One per thread
/// (it owns OpenSSL contexts); clone the [`KeyRing`] to make another.
pub struct PageCipher {
    ring: KeyRing,
    contexts: HashMap<KeyId, Xts>,
    crc: Crc64,
    versioned: bool,
}

impl fmt::Debug for PageCipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PageCipher")
            .field("current", &self.ring.current())
            .field("crc", &self.crc)
            .field("versioned", &self.versioned)
            .finish_non_exhaustive()
    }
}

impl PageCipher {
    /// A cipher over `ring` with `crc`; tweaks carry the address only
    /// (Yoon & Moon's design).
    pub fn new(ring: KeyRing, crc: Crc64) -> Self {
        Self {
            contexts: ring
                .ids()
                .filter_map(|id| ring.key(id).map(|k| (id, Xts::new(k))))
                .collect(),
            ring,
            crc,
            versioned: false,
        }
    }

    /// Puts the page's version in the tweak's upper half, so a stale copy
    /// replayed at the same address fails to open. The caller keeps the
    /// versions (the memory node must not: it is the party replaying).
    pub fn versioned(mut self, on: bool) -> Self {
        self.versioned = on;
        self
    }

    /// Whether versions go into the tweak.
    pub fn is_versioned(&self) -> bool {
        self.versioned
    }

    /// The CRC in use.
    pub fn crc(&self) -> Crc64 {
        self.crc
    }

    /// The key ring.
    pub fn ring(&self) -> &KeyRing {
        &self.ring
    }

    /// Adds a key and makes it current (see [`KeyRing::rotate`]).
    pub fn rotate(&mut self, key: crate::XtsKey) -> KeyId {
        let ctx = Xts::new(&key);
        let id = self.ring.rotate(key);
        self.contexts.insert(id, ctx);
        id
    }

    /// Forgets a key (see [`KeyRing::retire`]).
    pub fn retire(&mut self, id: KeyId) -> Result<(), crate::KeyRingError> {
        self.ring.retire(id)?;
        self.contexts.remove(&id);
        Ok(())
    }

    /// The tweak this cipher uses for a page (the version is ignored
    /// unless [`PageCipher::versioned`]).
    pub fn tweak(&self, address: u64, version: u64) -> Tweak {
        match self.versioned {
            true => Tweak::versioned(address, version),
            false => Tweak::address(address),
        }
    }

    /// Seals `page` for `address` under the current key into `out`.
    pub fn seal_into(
        &mut self,
        address: u64,
        version: u64,
        page: &Page,
        out: &mut [u8; SEALED_LEN],
    ) -> KeyId {
        let id = self.ring.current();
        let tweak = self.tweak(address, version);
        // NOTE(unwrap): the current key always has a context (new and
        // rotate add one; retire refuses the current key).
        let ctx = self
            .contexts
            .get_mut(&id)
            .expect("the current key has a context");
        seal_with(ctx, self.crc, &tweak, page, out);
        id
    }

    /// Seals `page` into a new [`SealedPage`].
    pub fn seal(&mut self, address: u64, version: u64, page: &Page) -> SealedPage {
        let mut bytes = Box::new([0u8; SEALED_LEN]);
        let key = self.seal_into(address, version, page, &mut bytes);
        SealedPage { key, bytes }
    }

    /// Decrypts `sealed` in place and checks it; on success the first
    /// [`PAGE_SIZE`] bytes are the page. On failure the buffer holds noise.
    pub fn open_in_place(
        &mut self,
        address: u64,
        version: u64,
        key: KeyId,
        sealed: &mut [u8; SEALED_LEN],
    ) -> Result<(), IntegrityError> {
        let tweak = self.tweak(address, version);
        let ctx = self
            .contexts
            .get_mut(&key)
            .ok_or(IntegrityError::UnknownKey(key))?;
        open_with(ctx, self.crc, &tweak, sealed)
    }

    /// Opens a copy of `sealed` into `out`.
    pub fn open(
        &mut self,
        address: u64,
        version: u64,
        sealed: &SealedPage,
        out: &mut Page,
    ) -> Result<(), IntegrityError> {
        let mut buf = *sealed.bytes;
        self.open_in_place(address, version, sealed.key, &mut buf)?;
        out.copy_from_slice(&buf[..PAGE_SIZE]);
        Ok(())
    }
}

/// page ‖ CRC ‖ 0^8, encrypted under `tweak`.
pub(crate) fn seal_with(
    ctx: &mut Xts,
    crc: Crc64,
    tweak: &Tweak,
    page: &Page,
    out: &mut [u8; SEALED_LEN],
) {
    out[..PAGE_SIZE].copy_from_slice(page);
    let sum = crc.checksum(page);
    out[PAGE_SIZE..PAGE_SIZE + CRC_LEN].copy_from_slice(&sum.to_le_bytes());
    out[PAGE_SIZE + CRC_LEN..].fill(0);
    ctx.encrypt(tweak, out);
}

/// Decrypts in place, then checks the padding and the CRC.
pub(crate) fn open_with(
    ctx: &mut Xts,
    crc: Crc64,
    tweak: &Tweak,
    sealed: &mut [u8; SEALED_LEN],
) -> Result<(), IntegrityError> {
    ctx.decrypt(tweak, sealed);
    if sealed[PAGE_SIZE + CRC_LEN..].iter().any(|&b| b != 0) {
        return Err(IntegrityError::Padding);
    }
    let mut stored = [0u8; CRC_LEN];
    stored.copy_from_slice(&sealed[PAGE_SIZE..PAGE_SIZE + CRC_LEN]);
    let stored = u64::from_le_bytes(stored);
    let computed = crc.checksum(&sealed[..PAGE_SIZE]);
    match stored == computed {
        true => Ok(()),
        false => Err(IntegrityError::Checksum { stored, computed }),
    }
}
