//! Hash values: field → value, kept in insertion order.
//!
//! `HGETALL` lists fields in the order they were first set, as Redis does
//! for small hashes (its listpack encoding). Redis switches big hashes to a
//! hash table with no defined order; this one keeps insertion order at any
//! size, and adds an index once linear search would be slow.

use std::collections::HashMap;

/// Past this many fields, lookups go through an index.
const LINEAR_MAX: usize = 16;
/// Up to this many fields a deletion keeps the others in order (Redis's
/// `hash-max-listpack-entries`); past it, the last field takes the
/// deleted one's place, in constant time.
const ORDERED_MAX: usize = 128;

/// A hash value.
#[derive(Debug, Default)]
pub struct Hash {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// Field → position in `entries`, once there are more than
    /// [`LINEAR_MAX`].
    index: Option<HashMap<Vec<u8>, usize, foldhash::fast::RandomState>>,
}

impl Hash {
    /// Number of fields.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it has no field (the key is then removed).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value of `field`, if set.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.position(field).map(|i| self.entries[i].1.as_slice())
    }

    /// Sets `field` to `value`; `true` if the field is new.
    pub fn set(&mut self, field: &[u8], value: &[u8]) -> bool {
        if let Some(i) = self.position(field) {
            let slot = &mut self.entries[i].1;
            slot.clear();
            slot.extend_from_slice(value);
            return false;
        }
        self.entries.push((field.to_vec(), value.to_vec()));
        self.index_last();
        true
    }

    /// Removes `field`; `true` if it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        let Some(i) = self.position(field) else {
            return false;
        };
        let swapped = self.entries.len() > ORDERED_MAX;
        if swapped {
            self.entries.swap_remove(i);
        } else {
            self.entries.remove(i);
        }
        if let Some(index) = &mut self.index {
            index.remove(field);
            // Re-point the fields that moved: the one swapped in, or
            // every one after `i` (fewer than ORDERED_MAX).
            let moved = if swapped { 1 } else { self.entries.len() };
            for (at, (f, _)) in self.entries.iter().enumerate().skip(i).take(moved) {
                if let Some(slot) = index.get_mut(f.as_slice()) {
                    *slot = at;
                }
            }
        }
        true
    }

    /// Fields and values in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.entries
            .iter()
            .map(|(f, v)| (f.as_slice(), v.as_slice()))
    }

    /// Bytes held, roughly (for INFO).
    pub fn bytes(&self) -> usize {
        self.entries.iter().map(|(f, v)| f.len() + v.len()).sum()
    }

    fn position(&self, field: &[u8]) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(field).copied(),
            None => self.entries.iter().position(|(f, _)| f == field),
        }
    }

    /// Indexes the field just pushed, building the index when the hash
    /// outgrows linear search.
    fn index_last(&mut self) {
        let last = self.entries.len() - 1;
        if let Some(index) = &mut self.index {
            index.insert(self.entries[last].0.clone(), last);
        } else if self.entries.len() > LINEAR_MAX {
            let index = self
                .entries
                .iter()
                .enumerate()
                .map(|(i, (f, _))| (f.clone(), i))
                .collect();
            self.index = Some(index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Hash;

    #[test]
    fn insertion_order_and_lookups_survive_the_index() {
        let mut h = Hash::default();
        for i in 0..40u32 {
            assert!(h.set(format!("f{i}").as_bytes(), b"v"));
        }
        assert!(!h.set(b"f3", b"new"));
        assert_eq!(h.get(b"f3"), Some(&b"new"[..]));
        assert_eq!(h.get(b"f39"), Some(&b"v"[..]));
        assert_eq!(h.get(b"nope"), None);
        let fields: Vec<_> = h.iter().map(|(f, _)| f.to_vec()).collect();
        assert_eq!(fields[0], b"f0");
        assert_eq!(fields[39], b"f39");
        assert_eq!(h.len(), 40);
    }

    #[test]
    fn removal_keeps_order_and_the_index_true() {
        for size in [10u32, 40, 300] {
            let mut h = Hash::default();
            for i in 0..size {
                h.set(format!("f{i}").as_bytes(), format!("{i}").as_bytes());
            }
            assert!(h.remove(b"f3"));
            assert!(!h.remove(b"f3"));
            assert_eq!(h.get(b"f3"), None);
            for i in (0..size).filter(|&i| i != 3) {
                let want = format!("{i}");
                assert_eq!(
                    h.get(format!("f{i}").as_bytes()),
                    Some(want.as_bytes()),
                    "{size} f{i}"
                );
            }
            if size <= 128 {
                let fields: Vec<_> = h.iter().map(|(f, _)| f.to_vec()).collect();
                assert_eq!(fields[3], b"f4");
            }
        }
    }
}
