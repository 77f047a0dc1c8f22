//! XTS tweaks from remote page addresses.

use std::fmt;

/// A 128-bit XTS tweak (IEEE 1619's data unit number, little-endian).
///
/// Yoon & Moon (CoNEXT 2025) derive the tweak from the page's remote address, so the same
/// plaintext stored at two addresses encrypts differently (no
/// watermarking) and a page moved to another address fails its check.
/// [`Tweak::versioned`] also puts the page's write count in the upper 64
/// bits, so an older copy replayed at the same address fails too.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tweak([u8; 16]);

impl Tweak {
    /// IEEE 1619's tweak for data unit `n`: `n` as a 128-bit little-endian
    /// number (what NIST's `DataUnitSeqNumber` vectors use).
    pub fn data_unit(n: u64) -> Self {
        Self::from_parts(n, 0)
    }

    /// The tweak for the page at remote byte address `address` (Yoon &
    /// Moon's choice): the address is the data unit number.
    pub fn address(address: u64) -> Self {
        Self::data_unit(address)
    }

    /// The address in the low 64 bits, the page's `version` in the high 64
    /// bits: a stale copy decrypts under another tweak.
    pub fn versioned(address: u64, version: u64) -> Self {
        Self::from_parts(address, version)
    }

    /// A tweak given as its 16 bytes (NIST's `i = ...` vectors).
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }

    /// The 16 bytes OpenSSL takes as the IV.
    pub fn bytes(&self) -> &[u8; 16] {
        &self.0
    }

    fn from_parts(low: u64, high: u64) -> Self {
        let mut t = [0u8; 16];
        t[..8].copy_from_slice(&low.to_le_bytes());
        t[8..].copy_from_slice(&high.to_le_bytes());
        Self(t)
    }
}

impl fmt::Debug for Tweak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tweak({})", hex::encode(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_and_version_are_little_endian_halves() {
        let t = Tweak::versioned(0x0102_0304_0506_0708, 9);
        assert_eq!(t.bytes(), &[8, 7, 6, 5, 4, 3, 2, 1, 9, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(Tweak::address(4096), Tweak::versioned(4096, 0));
    }
}
