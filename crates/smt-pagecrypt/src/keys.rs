//! Numbered XTS keys, for rotation.
//!
//! Every sealed page records the [`KeyId`] it was sealed under (the memory
//! node stores it in the clear next to the ciphertext: it is a name, not a
//! secret). Rotation adds a key and makes it current: new writes use it,
//! pages sealed under an older live key still open, and a re-encryption
//! pass (read, then write back) moves them over; then the old key is
//! retired and pages still under it fail with
//! [`IntegrityError::UnknownKey`](crate::IntegrityError::UnknownKey).

use std::collections::BTreeMap;
use std::fmt;

use crate::xts::XtsKey;

/// The name of one key of a [`KeyRing`]; 0 is never used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(pub u32);

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "key #{}", self.0)
    }
}

/// Why a key-ring operation was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyRingError {
    /// The current key cannot be retired: rotate to a new one first.
    RetireCurrent(KeyId),
    /// No live key has this ID.
    Unknown(KeyId),
    /// The ID is taken (or is 0).
    Taken(KeyId),
}

impl fmt::Display for KeyRingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::RetireCurrent(id) => write!(
                f,
                "{id} is the current key and cannot be retired: rotate to a new key first"
            ),
            Self::Unknown(id) => write!(f, "{id} is not a live key of this ring"),
            Self::Taken(id) => write!(f, "{id} is taken (or 0, which is never used)"),
        }
    }
}

impl std::error::Error for KeyRingError {}

/// The live keys and which one seals new pages.
#[derive(Clone, Debug)]
pub struct KeyRing {
    keys: BTreeMap<KeyId, XtsKey>,
    current: KeyId,
}

impl KeyRing {
    /// A ring whose only (and current) key is `key`, as key #1.
    pub fn new(key: XtsKey) -> Self {
        let id = KeyId(1);
        Self {
            keys: BTreeMap::from([(id, key)]),
            current: id,
        }
    }

    /// The key new pages are sealed under.
    pub fn current(&self) -> KeyId {
        self.current
    }

    /// Adds `key` under the next free ID and makes it current.
    pub fn rotate(&mut self, key: XtsKey) -> KeyId {
        let last = self.keys.keys().next_back().map_or(0, |k| k.0);
        let id = KeyId(last + 1);
        self.keys.insert(id, key);
        self.current = id;
        id
    }

    /// Adds `key` under a chosen ID (restoring a ring, or loading an
    /// engine), without changing the current key.
    pub fn insert(&mut self, id: KeyId, key: XtsKey) -> Result<(), KeyRingError> {
        if id.0 == 0 || self.keys.contains_key(&id) {
            return Err(KeyRingError::Taken(id));
        }
        self.keys.insert(id, key);
        Ok(())
    }

    /// Forgets a key: pages still sealed under it can no longer be opened.
    pub fn retire(&mut self, id: KeyId) -> Result<(), KeyRingError> {
        if id == self.current {
            return Err(KeyRingError::RetireCurrent(id));
        }
        self.keys
            .remove(&id)
            .map(|_| ())
            .ok_or(KeyRingError::Unknown(id))
    }

    /// The key with this ID, if live.
    pub fn key(&self, id: KeyId) -> Option<&XtsKey> {
        self.keys.get(&id)
    }

    /// The live keys' IDs, oldest first.
    pub fn ids(&self) -> impl Iterator<Item = KeyId> + '_ {
        self.keys.keys().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_numbers_keys_and_keeps_old_ones_until_retired() {
        let mut ring = KeyRing::new(XtsKey::random());
        assert_eq!(ring.current(), KeyId(1));
        let two = ring.rotate(XtsKey::random());
        assert_eq!((two, ring.current()), (KeyId(2), KeyId(2)));
        assert!(ring.key(KeyId(1)).is_some());
        assert_eq!(ring.retire(two), Err(KeyRingError::RetireCurrent(two)));
        ring.retire(KeyId(1)).unwrap();
        assert_eq!(ring.retire(KeyId(1)), Err(KeyRingError::Unknown(KeyId(1))));
        assert_eq!(ring.ids().collect::<Vec<_>>(), [KeyId(2)]);
        assert_eq!(ring.rotate(XtsKey::random()), KeyId(3));
        assert_eq!(
            ring.insert(KeyId(0), XtsKey::random()),
            Err(KeyRingError::Taken(KeyId(0)))
        );
    }
}
