//! An HKDF output length, as aws-lc-rs's `expand` wants it (the control
//! MAC key and the PSK derivations ask for lengths no named type gives).

use aws_lc_rs::hkdf;

/// An HKDF output length, as aws-lc-rs wants it.
pub(crate) struct OkmLen(pub(crate) usize);

impl hkdf::KeyType for OkmLen {
    fn len(&self) -> usize {
        self.0
    }
}
