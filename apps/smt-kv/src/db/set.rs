//! Set values: members in an indexed set, so that `SPOP` takes a random
//! member in constant time.
//!
//! **Reply order.** Redis 7.0 keeps a set of integers (at most
//! `set-max-intset-entries`, 512) as a sorted array, and lists it in
//! numeric order; any other set is a hash table with no defined order.
//! This set remembers whether Redis would still hold it as an intset (all
//! members integers and never more than 512 of them, since a set never
//! converts back) and then lists members in numeric order; otherwise in
//! its own order.

use indexmap::IndexSet;

use crate::num::parse_i64;

/// Redis's `set-max-intset-entries` default.
const INTSET_MAX: usize = 512;

/// A set value.
#[derive(Debug)]
pub struct Set {
    members: IndexSet<Vec<u8>, foldhash::fast::RandomState>,
    /// Redis would hold it as an intset.
    intset: bool,
}

impl Default for Set {
    fn default() -> Self {
        Self {
            members: IndexSet::default(),
            intset: true,
        }
    }
}

impl Set {
    /// Number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether it has no member (the key is then removed).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Whether `member` is in the set.
    pub fn contains(&self, member: &[u8]) -> bool {
        self.members.contains(member)
    }

    /// Adds `member`; `true` if it is new.
    pub fn insert(&mut self, member: &[u8]) -> bool {
        if self.members.contains(member) {
            return false;
        }
        self.members.insert(member.to_vec());
        self.intset &= parse_i64(member).is_some() && self.members.len() <= INTSET_MAX;
        true
    }

    /// Removes `member`; `true` if it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        self.members.swap_remove(member)
    }

    /// Removes and returns the member at `pick % len` (the caller's random
    /// number), or `None` when empty.
    pub fn pop_nth(&mut self, pick: u64) -> Option<Vec<u8>> {
        let len = u64::try_from(self.members.len()).ok().filter(|&n| n > 0)?;
        let index = usize::try_from(pick % len).ok()?;
        self.members.swap_remove_index(index)
    }

    /// Members in the order Redis would list them (see the module docs).
    pub fn members(&self) -> Vec<&[u8]> {
        let mut members: Vec<&[u8]> = self.members.iter().map(Vec::as_slice).collect();
        if self.intset {
            members.sort_by_key(|m| parse_i64(m));
        }
        members
    }

    /// Bytes held, roughly (for INFO).
    pub fn bytes(&self) -> usize {
        self.members.iter().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::Set;

    #[test]
    fn integer_sets_list_in_numeric_order_until_they_stop_being_intsets() {
        let mut s = Set::default();
        for m in ["10", "-3", "2"] {
            assert!(s.insert(m.as_bytes()));
        }
        assert!(!s.insert(b"2"));
        assert_eq!(s.members(), [&b"-3"[..], b"2", b"10"]);
        s.insert(b"x");
        s.remove(b"x");
        assert_eq!(s.len(), 3);
        assert_eq!(s.members().len(), 3);
        let popped = s.pop_nth(7).unwrap();
        assert!(!s.contains(&popped));
        assert_eq!(s.len(), 2);
    }
}
