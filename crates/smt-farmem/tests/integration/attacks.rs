//! A memory node that misbehaves: it changes, moves, replays or re-labels
//! stored pages (the tests reach into its store, as a compromised node
//! would). What CRC-inside-XTS catches, and what needs the version in the
//! tweak; key rotation and retirement.

use crate::common;

use common::{client, client_with_ring, page, small_node};
use smt_farmem::PageError;
use smt_pagecrypt::{Crc64, IntegrityError, KeyId, KeyRing, XtsKey};

fn integrity(r: Result<Box<smt_pagecrypt::Page>, PageError>) -> IntegrityError {
    match r {
        Err(PageError::Integrity { error, .. }) => error,
        Err(e) => panic!("not an integrity failure: {e}"),
        Ok(_) => panic!("the page was accepted"),
    }
}

#[test]
fn a_tampered_page_fails_on_the_cpu_and_on_the_engine() {
    let node = small_node();
    for engine in [false, true] {
        let mut c = client(&node, Crc64::Nvme, engine, false);
        c.write_page(0x2000, &page(1)).unwrap();
        for offset in [0, 2048, 4095, 4100, 4111] {
            let store = node.store();
            let before = {
                let mut s = store.lock().unwrap();
                let p = s.page_mut(0x2000).unwrap();
                let before = p.clone();
                p.bytes[offset] ^= 0x01;
                before
            };
            integrity(c.read_page(0x2000));
            *store.lock().unwrap().page_mut(0x2000).unwrap() = before;
        }
        assert_eq!(*c.read_page(0x2000).unwrap(), page(1));
        assert!(c.pipeline().stats().integrity_failures >= 5);
    }
}

#[test]
fn a_page_moved_to_another_address_fails() {
    let node = small_node();
    let mut c = client(&node, Crc64::Xz, false, false);
    c.write_page(0x3000, &page(2)).unwrap();
    c.write_page(0x4000, &page(3)).unwrap();
    let store = node.store();
    {
        let mut s = store.lock().unwrap();
        let moved = s.page_mut(0x3000).unwrap().clone();
        *s.page_mut(0x4000).unwrap() = moved;
    }
    integrity(c.read_page(0x4000));
    assert_eq!(*c.read_page(0x3000).unwrap(), page(2));
}

/// The seed's design alone cannot see a replay: the stale copy is a
/// valid page for that address and key.
#[test]
fn a_stale_replay_passes_without_versions_and_fails_with_them() {
    let node = small_node();
    for (versioned, caught) in [(false, false), (true, true)] {
        let mut c = client(&node, Crc64::Nvme, false, versioned);
        let a = 0x8000 + u64::from(versioned) * 0x1000;
        c.write_page(a, &page(4)).unwrap();
        let stale = node.store().lock().unwrap().page_mut(a).unwrap().clone();
        c.write_page(a, &page(5)).unwrap();
        *node.store().lock().unwrap().page_mut(a).unwrap() = stale;
        let r = c.read_page(a);
        match caught {
            false => assert_eq!(*r.unwrap(), page(4), "the old page comes back unnoticed"),
            true => {
                integrity(r);
            }
        }
    }
}

#[test]
fn a_client_with_another_key_cannot_read_and_key_ids_are_kept() {
    let node = small_node();
    let mut a = client(&node, Crc64::Nvme, false, false);
    let mut b = client(&node, Crc64::Nvme, false, false);
    a.write_page(0xa000, &page(6)).unwrap();
    // Same key ID (#1), another key: noise.
    integrity(b.read_page(0xa000));
}

#[test]
fn key_rotation_rewraps_pages_and_retired_keys_stop_opening() {
    let node = small_node();
    let ring = KeyRing::new(XtsKey::random());
    for engine in [false, true] {
        let mut c = client_with_ring(&node, ring.clone(), Crc64::Nvme, engine, false);
        let base = 0x10_0000 * (1 + u64::from(engine));
        let addrs: Vec<u64> = (0..4).map(|i| base + i * 4096).collect();
        for &a in &addrs {
            c.write_page(a, &page(a)).unwrap();
        }
        let new = c.rotate_key(XtsKey::random());
        assert_eq!(new, KeyId(2));
        // Old pages still open; new writes use the new key.
        assert_eq!(*c.read_page(addrs[0]).unwrap(), page(addrs[0]));
        for r in c.rewrap(&addrs[..2]).unwrap() {
            r.unwrap();
        }
        assert_eq!(c.read_sealed(addrs[0]).unwrap().key, 2);
        assert_eq!(c.read_sealed(addrs[3]).unwrap().key, 1);
        c.retire_key(KeyId(1)).unwrap();
        assert_eq!(*c.read_page(addrs[1]).unwrap(), page(addrs[1]));
        assert_eq!(
            integrity(c.read_page(addrs[3])),
            IntegrityError::UnknownKey(KeyId(1))
        );
        // A page whose stored key ID is changed fails.
        node.store().lock().unwrap().page_mut(addrs[2]).unwrap().key = 2;
        integrity(c.read_page(addrs[2]));
    }
}
