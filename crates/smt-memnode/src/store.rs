//! The pages a memory node holds.

use std::collections::HashMap;

use smt_pagecrypt::SEALED_LEN;

use crate::wire::{PageStatus, StoredPage, PAGE};

/// How much a node stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    /// Most pages held at once.
    pub capacity_pages: u64,
    /// Addresses must be below this (a multiple of 4096).
    pub address_limit: u64,
}

impl Default for StoreConfig {
    /// 1 GiB of pages in a 1 TiB address space.
    fn default() -> Self {
        Self {
            capacity_pages: 1 << 18,
            address_limit: 1 << 40,
        }
    }
}

/// Sealed pages by page number. Holds ciphertext and key IDs only.
#[derive(Debug, Default)]
pub struct PageStore {
    config: StoreConfig,
    pages: HashMap<u64, StoredPage>,
}

impl PageStore {
    /// An empty store with `config`'s limits.
    pub fn new(config: StoreConfig) -> Self {
        Self {
            config,
            pages: HashMap::new(),
        }
    }

    /// The limits it was made with.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// Pages held.
    pub fn used(&self) -> u64 {
        self.pages.len() as u64
    }

    /// The page at `address`, or why not.
    pub fn read(&self, address: u64) -> Result<(u32, &[u8; SEALED_LEN]), PageStatus> {
        let n = self.page_number(address)?;
        self.pages
            .get(&n)
            .map(|p| (p.key, &*p.bytes))
            .ok_or(PageStatus::NOT_WRITTEN)
    }

    /// Stores (or replaces) the page at `address`.
    pub fn write(&mut self, address: u64, page: StoredPage) -> PageStatus {
        let n = match self.page_number(address) {
            Ok(n) => n,
            Err(status) => return status,
        };
        if !self.pages.contains_key(&n) && self.used() >= self.config.capacity_pages {
            return PageStatus::NO_CAPACITY;
        }
        self.pages.insert(n, page);
        PageStatus::OK
    }

    /// The stored copy, for tests that play the memory node's attacker.
    pub fn page_mut(&mut self, address: u64) -> Option<&mut StoredPage> {
        self.pages.get_mut(&(address / PAGE))
    }

    fn page_number(&self, address: u64) -> Result<u64, PageStatus> {
        if !address.is_multiple_of(PAGE) {
            return Err(PageStatus::MISALIGNED);
        }
        if address >= self.config.address_limit {
            return Err(PageStatus::OUT_OF_RANGE);
        }
        Ok(address / PAGE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(k: u32) -> StoredPage {
        StoredPage {
            key: k,
            bytes: Box::new([k as u8; SEALED_LEN]),
        }
    }

    #[test]
    fn addresses_and_capacity_are_checked() {
        let mut s = PageStore::new(StoreConfig {
            capacity_pages: 2,
            address_limit: 16 * PAGE,
        });
        assert_eq!(s.write(1, page(1)), PageStatus::MISALIGNED);
        assert_eq!(s.write(16 * PAGE, page(1)), PageStatus::OUT_OF_RANGE);
        assert_eq!(s.read(0), Err(PageStatus::NOT_WRITTEN));
        assert_eq!(s.write(0, page(1)), PageStatus::OK);
        assert_eq!(s.write(PAGE, page(2)), PageStatus::OK);
        assert_eq!(s.write(2 * PAGE, page(3)), PageStatus::NO_CAPACITY);
        // Replacing a held page needs no room.
        assert_eq!(s.write(0, page(4)), PageStatus::OK);
        assert_eq!(s.read(0).unwrap().0, 4);
        assert_eq!(s.used(), 2);
    }
}
