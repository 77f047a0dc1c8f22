//! How fast the page crypto candidates run on this machine, in GB/s on one
//! 4112-byte sealed page (XTS) or one 4096-byte page (CRC), one core:
//!
//! - XTS-AES-128: OpenSSL's EVP through the `openssl` crate (what
//!   `XtsCipher` uses) against the RustCrypto `xts-mode` crate over the
//!   `aes` crate, and `openssl speed -evp aes-128-xts` run beside them
//!   (when the `openssl` tool is installed) as the peer's own figure;
//! - CRC-64/NVME and /XZ: `crc-fast` (carry-less multiply, what `Crc64`
//!   uses) against the `crc` crate's slice-by-16 tables;
//! - a whole page sealed and opened by `PageCipher` (XTS + CRC).
//!
//! ```text
//! cargo run --release -p smt-pagecrypt --example crypto_speed [-- SECONDS]
//! ```
//!
//! Figures from a busy machine are low and noisy: run it while nothing
//! else compiles, and compare the ratios, which the load distorts less.

use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};

use smt_pagecrypt::{Crc64, KeyRing, PageCipher, Tweak, XtsCipher, XtsKey, PAGE_SIZE, SEALED_LEN};

fn main() {
    let seconds: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let budget = Duration::from_secs_f64(seconds);
    println!("CPU: {}", cpu_model());
    println!("each figure: GB/s over {seconds} s, one thread\n");

    let key = XtsKey::random();
    let mut unit = vec![0x5au8; SEALED_LEN];
    let tweak = Tweak::address(0x1000);

    let mut ossl = XtsCipher::new(&key);
    let enc = gbps(SEALED_LEN, budget, || ossl.encrypt(&tweak, &mut unit));
    let dec = gbps(SEALED_LEN, budget, || ossl.decrypt(&tweak, &mut unit));
    row("XTS-AES-128 encrypt", "openssl crate (EVP)", enc);
    row("XTS-AES-128 decrypt", "openssl crate (EVP)", dec);

    let rc = rustcrypto_xts(&key);
    let rc_enc = gbps(SEALED_LEN, budget, || {
        rc.encrypt_sector(&mut unit, xts_mode::get_tweak_default(0x1000))
    });
    let rc_dec = gbps(SEALED_LEN, budget, || {
        rc.decrypt_sector(&mut unit, xts_mode::get_tweak_default(0x1000))
    });
    row("XTS-AES-128 encrypt", "xts-mode 0.6 + aes 0.9", rc_enc);
    row("XTS-AES-128 decrypt", "xts-mode 0.6 + aes 0.9", rc_dec);
    match openssl_speed(seconds) {
        Some(g) => row("XTS-AES-128 encrypt", "`openssl speed -evp` (peer)", g),
        None => println!(
            "{:<22} {:<32} not run (no `openssl` tool)",
            "XTS-AES-128 encrypt", "`openssl speed -evp`"
        ),
    }

    let page = vec![0xa5u8; PAGE_SIZE];
    for crc in Crc64::ALL {
        let fast = gbps(PAGE_SIZE, budget, || {
            black_box(crc.checksum(black_box(&page)));
        });
        let table = table_crc(crc);
        let slow = gbps(PAGE_SIZE, budget, || {
            black_box(table.checksum(black_box(&page)));
        });
        row(crc.name(), "crc-fast 1.9", fast);
        row(crc.name(), "crc 3 (slice-by-16 table)", slow);
    }

    for crc in Crc64::ALL {
        let mut c = PageCipher::new(KeyRing::new(key.clone()), crc);
        let plain = [7u8; PAGE_SIZE];
        let mut sealed = [0u8; SEALED_LEN];
        let seal = gbps(PAGE_SIZE, budget, || {
            c.seal_into(0x1000, 0, &plain, &mut sealed);
        });
        let id = c.ring().current();
        let good = c.seal(0x1000, 0, &plain);
        let open = gbps(PAGE_SIZE, budget, || {
            let mut b = *good.bytes;
            c.open_in_place(0x1000, 0, id, &mut b).expect("opens");
        });
        let what = format!("PageCipher, {crc}");
        row("page seal", &what, seal);
        row("page open", &what, open);
        println!(
            "{:<22} {:<32} {:.2} µs seal, {:.2} µs open",
            "  per 4 KiB page",
            "",
            PAGE_SIZE as f64 / seal / 1e3,
            PAGE_SIZE as f64 / open / 1e3
        );
    }
    println!(
        "\nXTS: openssl/xts-mode = {:.1}x; CRC-64/NVME: crc-fast/table = see above",
        enc / rc_enc
    );
}

fn row(what: &str, how: &str, gbps: f64) {
    println!("{what:<22} {how:<32} {gbps:6.2} GB/s");
}

/// Bytes per nanosecond over `budget`, after a warm-up.
fn gbps(bytes: usize, budget: Duration, mut f: impl FnMut()) -> f64 {
    for _ in 0..1000 {
        f();
    }
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < budget {
        for _ in 0..256 {
            f();
        }
        n += 256;
    }
    (n as f64 * bytes as f64) / start.elapsed().as_nanos() as f64
}

fn rustcrypto_xts(key: &XtsKey) -> xts_mode::Xts128<aes::Aes128> {
    use aes::cipher::KeyInit;
    let (k1, k2) = key.bytes().split_at(16);
    // NOTE(unwrap): both halves are 16 bytes.
    let c1 = aes::Aes128::new_from_slice(k1).expect("16-byte key");
    let c2 = aes::Aes128::new_from_slice(k2).expect("16-byte key");
    xts_mode::Xts128::new(c1, c2)
}

fn table_crc(crc: Crc64) -> crc::Crc<u64, crc::Table<16>> {
    match crc {
        Crc64::Nvme => crc::Crc::<u64, crc::Table<16>>::new(&crc::CRC_64_NVME),
        Crc64::Xz => crc::Crc::<u64, crc::Table<16>>::new(&crc::CRC_64_XZ),
    }
}

/// `openssl speed -evp aes-128-xts -bytes 4112`: its last line's figure
/// (thousands of bytes per second) as GB/s.
fn openssl_speed(seconds: f64) -> Option<f64> {
    let secs = (seconds.ceil() as u64).max(1).to_string();
    let out = Command::new("openssl")
        .args([
            "speed",
            "-evp",
            "aes-128-xts",
            "-bytes",
            "4112",
            "-seconds",
            &secs,
        ])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().rev().find(|l| l.starts_with("AES-128-XTS"))?;
    let k: f64 = line
        .split_whitespace()
        .last()?
        .trim_end_matches('k')
        .parse()
        .ok()?;
    Some(k * 1e3 / 1e9)
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}
