//! List values: a double-ended queue of elements.

use std::collections::VecDeque;

/// Which end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The left end (LPUSH, LPOP).
    Head,
    /// The right end (RPUSH, RPOP).
    Tail,
}

/// A list value.
#[derive(Debug, Default)]
pub struct List {
    items: VecDeque<Vec<u8>>,
}

impl List {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether it has no element (the key is then removed).
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Adds `item` at `end`.
    pub fn push(&mut self, end: End, item: &[u8]) {
        match end {
            End::Head => self.items.push_front(item.to_vec()),
            End::Tail => self.items.push_back(item.to_vec()),
        }
    }

    /// Removes and returns the element at `end`, if any.
    pub fn pop(&mut self, end: End) -> Option<Vec<u8>> {
        match end {
            End::Head => self.items.pop_front(),
            End::Tail => self.items.pop_back(),
        }
    }

    /// Elements `first..=last` (positions already inside the list).
    pub fn range(&self, first: usize, last: usize) -> impl Iterator<Item = &[u8]> {
        self.items.range(first..=last).map(Vec::as_slice)
    }

    /// Bytes held, roughly (for INFO).
    pub fn bytes(&self) -> usize {
        self.items.iter().map(Vec::len).sum()
    }
}
