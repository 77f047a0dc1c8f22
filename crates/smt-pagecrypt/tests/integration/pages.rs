//! Page sealing against what it must catch and what it cannot: the CRC
//! catalogue's check values, tampering in every block, moved pages, wrong
//! and retired keys, stale replays (caught only with versions), and the
//! layout an independent implementation must find (page ‖ CRC ‖ 0^8).

use smt_pagecrypt::{
    Crc64, IntegrityError, KeyId, KeyRing, Page, PageCipher, Tweak, XtsCipher, XtsKey, PAGE_SIZE,
    SEALED_LEN,
};

fn page(seed: u8) -> Page {
    let mut p = [0u8; PAGE_SIZE];
    for (i, b) in p.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31).wrapping_add(seed);
    }
    p
}

fn cipher(crc: Crc64) -> PageCipher {
    PageCipher::new(KeyRing::new(XtsKey::random()), crc)
}

#[test]
fn crc_check_values_match_the_catalogue() {
    assert_eq!(Crc64::Nvme.checksum(b"123456789"), 0xae8b14860a799888);
    assert_eq!(Crc64::Xz.checksum(b"123456789"), 0x995dc9bbdf1939fa);
    for crc in Crc64::ALL {
        assert_eq!(crc.checksum(b"123456789"), crc.check_value(), "{crc}");
        assert_eq!(crc.to_string().parse::<Crc64>(), Ok(crc));
    }
    assert!("crc32".parse::<Crc64>().is_err());
}

#[test]
fn a_sealed_page_is_xts_of_page_crc_and_zero_padding() {
    for crc in Crc64::ALL {
        let key = XtsKey::random();
        let mut c = PageCipher::new(KeyRing::new(key.clone()), crc);
        let p = page(1);
        let sealed = c.seal(0x7000, 0, &p);
        assert_eq!(sealed.key, KeyId(1));
        let mut plain = *sealed.bytes;
        XtsCipher::new(&key).decrypt(&Tweak::address(0x7000), &mut plain);
        assert_eq!(&plain[..PAGE_SIZE], &p[..]);
        assert_eq!(
            plain[PAGE_SIZE..PAGE_SIZE + 8],
            crc.checksum(&p).to_le_bytes()
        );
        assert_eq!(plain[PAGE_SIZE + 8..], [0u8; 8]);
        assert_eq!(sealed.bytes.len(), SEALED_LEN);
    }
}

#[test]
fn identical_pages_at_different_addresses_do_not_look_alike() {
    let mut c = cipher(Crc64::Nvme);
    let p = page(2);
    let a = c.seal(0, 0, &p);
    let b = c.seal(4096, 0, &p);
    // Not one 16-byte block in common: no watermark.
    for (x, y) in a.bytes.chunks(16).zip(b.bytes.chunks(16)) {
        assert_ne!(x, y);
    }
}

#[test]
fn round_trip_with_both_crcs_and_versions() {
    for crc in Crc64::ALL {
        for versioned in [false, true] {
            let mut c = cipher(crc).versioned(versioned);
            let p = page(3);
            let s = c.seal(8192, 5, &p);
            let mut out = [0u8; PAGE_SIZE];
            c.open(8192, 5, &s, &mut out).unwrap();
            assert_eq!(out, p);
        }
    }
}

#[test]
fn a_change_in_any_block_is_caught() {
    let mut c = cipher(Crc64::Nvme);
    let p = page(4);
    let s = c.seal(4096, 0, &p);
    let mut out = [0u8; PAGE_SIZE];
    for block in 0..SEALED_LEN / 16 {
        for bit in [0, 77, 127] {
            let mut t = s.clone();
            t.bytes[block * 16 + bit / 8] ^= 1 << (bit % 8);
            let err = c.open(4096, 0, &t, &mut out).unwrap_err();
            match block {
                // The last block holds the CRC and the padding.
                256 => assert!(matches!(
                    err,
                    IntegrityError::Padding | IntegrityError::Checksum { .. }
                )),
                _ => assert!(matches!(err, IntegrityError::Checksum { .. }), "{err}"),
            }
        }
    }
}

#[test]
fn a_page_moved_to_another_address_is_caught() {
    let mut c = cipher(Crc64::Xz);
    let s = c.seal(4096, 0, &page(5));
    let mut out = [0u8; PAGE_SIZE];
    assert!(c.open(8192, 0, &s, &mut out).is_err());
    // Moved by a single page number bit far up the address space too.
    let s = c.seal(1 << 40, 0, &page(5));
    assert!(c.open(0, 0, &s, &mut out).is_err());
}

#[test]
fn a_wrong_or_retired_key_is_caught() {
    let mut a = cipher(Crc64::Nvme);
    let mut b = cipher(Crc64::Nvme);
    let s = a.seal(0, 0, &page(6));
    let mut out = [0u8; PAGE_SIZE];
    assert!(matches!(
        b.open(0, 0, &s, &mut out),
        Err(IntegrityError::Checksum { .. } | IntegrityError::Padding)
    ));
    // Rotation: old pages open until their key is retired.
    let old = a.ring().current();
    let new = a.rotate(XtsKey::random());
    let s2 = a.seal(4096, 0, &page(7));
    assert_eq!(s2.key, new);
    a.open(0, 0, &s, &mut out).unwrap();
    a.retire(old).unwrap();
    assert_eq!(
        a.open(0, 0, &s, &mut out),
        Err(IntegrityError::UnknownKey(old))
    );
    a.open(4096, 0, &s2, &mut out).unwrap();
    // A page whose key ID was changed to the new key fails its check.
    let mut relabelled = s.clone();
    relabelled.key = new;
    assert!(a.open(0, 0, &relabelled, &mut out).is_err());
}

/// The documented limit of the seed's design: a stale copy of the same
/// page at the same address decrypts and passes its CRC. The version in
/// the tweak closes it.
#[test]
fn a_stale_replay_passes_the_crc_alone_but_not_a_versioned_tweak() {
    let mut out = [0u8; PAGE_SIZE];
    let mut plain = cipher(Crc64::Nvme);
    let old = plain.seal(4096, 0, &page(8));
    let _new = plain.seal(4096, 0, &page(9));
    plain.open(4096, 0, &old, &mut out).unwrap();
    assert_eq!(out, page(8), "replayed without detection");

    let mut versioned = cipher(Crc64::Nvme).versioned(true);
    let old = versioned.seal(4096, 1, &page(8));
    let new = versioned.seal(4096, 2, &page(9));
    versioned.open(4096, 2, &new, &mut out).unwrap();
    assert!(versioned.open(4096, 2, &old, &mut out).is_err());
}

#[test]
fn errors_say_what_to_suspect() {
    let e = IntegrityError::Checksum {
        stored: 1,
        computed: 2,
    };
    let text = e.to_string();
    assert!(text.contains("moved") && text.contains("stale"), "{text}");
}
