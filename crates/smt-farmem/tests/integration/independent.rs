//! A page as the memory node stores it, decrypted by an independent
//! implementation: Python's `cryptography` (OpenSSL's XTS, but driven by
//! other code: key split, tweak encoding) and a bit-by-bit CRC-64 written
//! from the catalogue's parameters in Python. It must find page ‖ CRC ‖
//! 0^8 under the tweak from the address. `scripts/memnode-test.sh
//! --install` installs `cryptography` with pip; without it the test
//! prints SKIPPED.

use crate::common;

use std::process::Command;

use common::{client_with_ring, page, small_node};
use smt_pagecrypt::{Crc64, KeyRing, XtsKey};

const CHECK: &str = r#"
import sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
key, address, crc_name, sealed_path, out_path = sys.argv[1:6]
key = bytes.fromhex(key)
tweak = int(address).to_bytes(16, "little")
sealed = open(sealed_path, "rb").read()
assert len(sealed) == 4112, len(sealed)
d = Cipher(algorithms.AES(key), modes.XTS(tweak)).decryptor()
plain = d.update(sealed) + d.finalize()
poly = {"nvme": 0x9A6C9329AC4BC9B5, "xz": 0xC96C5795D7870F42}[crc_name]
crc = 0xFFFFFFFFFFFFFFFF
for byte in plain[:4096]:
    crc ^= byte
    for _ in range(8):
        crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
crc ^= 0xFFFFFFFFFFFFFFFF
assert plain[4096:4104] == crc.to_bytes(8, "little"), "CRC mismatch"
assert plain[4104:] == bytes(8), "padding not zero"
open(out_path, "wb").write(plain[:4096])
print("python: page decrypted and CRC verified")
"#;

fn python_has_cryptography() -> bool {
    Command::new("python3")
        .args(["-c", "import cryptography.hazmat.primitives.ciphers"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn python_cryptography_decrypts_a_stored_page() {
    if !python_has_cryptography() {
        println!(
            "SKIPPED: python3 with the `cryptography` package is not available \
             (scripts/memnode-test.sh --install installs it with pip)"
        );
        return;
    }
    let node = small_node();
    let dir = tempfile::tempdir().unwrap();
    for (crc, name) in [(Crc64::Nvme, "nvme"), (Crc64::Xz, "xz")] {
        let key = XtsKey::random();
        let mut c = client_with_ring(&node, KeyRing::new(key.clone()), crc, false, false);
        let address = 0x7_5000u64;
        c.write_page(address, &page(9)).unwrap();
        let stored = c.read_sealed(address).unwrap();
        let sealed_path = dir.path().join(format!("sealed-{name}"));
        let out_path = dir.path().join(format!("plain-{name}"));
        std::fs::write(&sealed_path, &stored.bytes[..]).unwrap();
        let out = Command::new("python3")
            .args([
                "-c",
                CHECK,
                &hex::encode(key.bytes()),
                &address.to_string(),
                name,
            ])
            .arg(&sealed_path)
            .arg(&out_path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "python failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(std::fs::read(&out_path).unwrap(), page(9).to_vec());
    }
}
