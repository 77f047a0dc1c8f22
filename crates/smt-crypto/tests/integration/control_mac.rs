//! The worked example of docs/protocol.md § 5, byte for byte: a GRANT as
//! the wire module emits it, tagged by the AES-GCM backend under the
//! server's application traffic key and IV of RFC 8448 § 3, and the
//! same tag computed a second way (HKDF by hand with HMAC-SHA256, then
//! aws-lc's own AES-CMAC).
//!
//! The expected bytes (`PRK`, `CONTROL_KEY`, `TAG`) were computed a third
//! way, outside this repository, with Python's `cryptography` package
//! (48.0.0, OpenSSL's HMAC, HKDF and CMAC):
//!
//! ```text
//! h = hmac.HMAC(b"smt control v2", hashes.SHA256()); h.update(key + iv)
//! prk = h.finalize()
//! control_key = HKDFExpand(hashes.SHA256(), 16, b"smt ctrl").derive(prk)
//! c = cmac.CMAC(algorithms.AES(control_key)); c.update(GRANT)
//! tag = c.finalize()
//! ```
//!
//! with `key` and `iv` the RFC 8448 § 3 server application traffic key and
//! IV; the one-shot `HKDF(SHA256, 16, salt=b"smt control v2",
//! info=b"smt ctrl").derive(key + iv)` gives the same control key.

use aws_lc_rs::{cmac, hmac};
use hex_literal::hex;
use smt_crypto::test_vectors::{RFC8448_SERVER_AP_IV, RFC8448_SERVER_AP_KEY};
use smt_crypto::{AeadAlgorithm, AesGcmCipher, TrafficKey};
use smt_proto::crypto::{CryptoError, PacketCipher, TAG_LEN};
use smt_proto::wire::{Body, Packet, Repr};

/// The GRANT of docs/protocol.md § 5 (and `tests/wire_bytes.rs` in
/// smt-proto): port 4000 to port 40000, message 0x1122_3344_5566, send up
/// to wire offset 196 608 at priority 3.
#[rustfmt::skip]
const GRANT: [u8; 36] = hex!(
    "0f a0 9c 40 00 00 00 00  00 00 00 00 90 11 00 00
     00 00 00 00 00 00 11 22  33 44 55 66 00 03 00 00
     03 00 00 00"
);

/// HKDF-Extract(salt = "smt control v2", ikm = key || iv), SHA-256.
const PRK: [u8; 32] = hex!("4729ef5c6872dbc4f5c9d2c7603760c8 07417fbd362b6d9fe4969370d639669d");

/// HKDF-Expand(PRK, info = "smt ctrl", 16): the AES-128-CMAC key.
const CONTROL_KEY: [u8; 16] = hex!("284bd3bf17ef306d10a57862991d40e0");

/// AES-CMAC(CONTROL_KEY, GRANT).
const TAG: [u8; TAG_LEN] = hex!("ef81fb815177abf9f9e2024c954d4c11");

fn server_tx() -> AesGcmCipher {
    let key = TrafficKey::new(
        AeadAlgorithm::Aes128Gcm,
        &RFC8448_SERVER_AP_KEY,
        RFC8448_SERVER_AP_IV,
    )
    .expect("a 16-byte key");
    AesGcmCipher::new(&key)
}

fn emitted_grant() -> Vec<u8> {
    let repr = Repr {
        src_port: 4000,
        dst_port: 40_000,
        key_phase: false,
        id: 0x1122_3344_5566,
        body: Body::Grant {
            offset: 196_608,
            priority: 3,
        },
    };
    let mut buf = vec![0xa5; repr.buffer_len()];
    repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
    buf
}

#[test]
fn the_worked_example_grant_is_what_the_wire_module_emits() {
    assert_eq!(emitted_grant(), GRANT);
}

#[test]
fn the_worked_example_tag_is_byte_exact() {
    let c = server_tx();
    assert_eq!(c.control_tag(&GRANT), TAG);
    assert_eq!(c.verify_control_tag(&GRANT, &TAG), Ok(()));
}

/// Each step of § 5's recipe, with aws-lc-rs's HMAC and CMAC.
#[test]
fn the_worked_example_steps_hold() {
    let ikm = [&RFC8448_SERVER_AP_KEY[..], &RFC8448_SERVER_AP_IV[..]].concat();
    let prk = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, b"smt control v2"), &ikm);
    assert_eq!(prk.as_ref(), PRK);
    let t1 = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &PRK), b"smt ctrl\x01");
    assert_eq!(&t1.as_ref()[..16], CONTROL_KEY);
    let key = cmac::Key::new(cmac::AES_128, &CONTROL_KEY).expect("a 16-byte key");
    let tag = cmac::sign(&key, &GRANT).expect("CMAC of 36 bytes");
    assert_eq!(tag.as_ref(), TAG);
}

#[test]
fn every_bit_flip_of_the_worked_example_fails() {
    let c = server_tx();
    for bit in 0..(GRANT.len() + TAG_LEN) * 8 {
        let mut datagram = [&GRANT[..], &TAG[..]].concat();
        datagram[bit / 8] ^= 1 << (bit % 8);
        let (packet, tag) = datagram.split_at(GRANT.len());
        let tag: &[u8; TAG_LEN] = tag.try_into().expect("16 bytes");
        assert_eq!(
            c.verify_control_tag(packet, tag),
            Err(CryptoError),
            "bit {bit}"
        );
    }
}
