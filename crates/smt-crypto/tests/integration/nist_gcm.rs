//! NIST CAVP AES-GCM vectors (`gcmEncryptExtIV*.rsp`, `gcmDecrypt*.rsp`)
//! through both AES-GCM implementations the record path calls:
//! `AesGcmCipher::seal_raw` / `open_raw` (ring, in place: small records)
//! and `seal_raw_to` / `open_raw_to` (aws-lc, one pass: large records).
//!
//! Only the entries TLS 1.3 can produce are kept: 96-bit IVs and 128-bit
//! tags. Decrypt entries marked FAIL must fail to open.
//!
//! The vectors are not in the repository. `scripts/fetch-vectors.sh`
//! unpacks them into `<repo>/test-vectors/gcm/`; the environment variable
//! `SMT_TEST_VECTORS` may name another directory holding `gcm/`. Missing
//! vectors fail these tests rather than skip them.

use std::io::Write;
use std::path::PathBuf;

use smt_crypto::{AeadAlgorithm, AesGcmCipher, TrafficKey, IV_LEN};
use smt_proto::crypto::{CryptoError, TAG_LEN};

/// Entries per file with IVlen = 96 and Taglen = 128 in the pinned vector
/// release: 25 parameter groups of 15. A parser that silently drops
/// entries fails here instead of passing on fewer.
const EXPECTED_PER_FILE: usize = 375;

#[test]
fn encrypt_aes128() {
    run("gcmEncryptExtIV128.rsp", Direction::Encrypt);
}

#[test]
fn encrypt_aes256() {
    run("gcmEncryptExtIV256.rsp", Direction::Encrypt);
}

#[test]
fn decrypt_aes128() {
    run("gcmDecrypt128.rsp", Direction::Decrypt);
}

#[test]
fn decrypt_aes256() {
    run("gcmDecrypt256.rsp", Direction::Decrypt);
}

#[derive(Clone, Copy, PartialEq)]
enum Direction {
    Encrypt,
    Decrypt,
}

/// One `Count = ...` entry together with its group's `[...]` parameters.
#[derive(Default)]
struct Entry {
    line: usize,
    key_bits: usize,
    iv_bits: usize,
    tag_bits: usize,
    key: Vec<u8>,
    iv: Vec<u8>,
    pt: Option<Vec<u8>>,
    aad: Vec<u8>,
    ct: Vec<u8>,
    tag: Vec<u8>,
    fail: bool,
}

fn run(file: &str, direction: Direction) {
    let path = vectors_dir().join("gcm").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read NIST GCM vectors at {}: {e}\n\
             run `scripts/fetch-vectors.sh` from the repository root to fetch them \
             (or set SMT_TEST_VECTORS to a directory holding gcm/)",
            path.display()
        )
    });
    let entries: Vec<Entry> = parse(&text)
        .into_iter()
        .filter(|e| e.iv_bits == 96 && e.tag_bits == 128)
        .collect();
    let mut failures_checked = 0;
    for entry in &entries {
        match direction {
            Direction::Encrypt => check_encrypt(file, entry),
            Direction::Decrypt => check_decrypt(file, entry),
        }
        failures_checked += usize::from(entry.fail);
    }
    assert!(
        entries.len() >= EXPECTED_PER_FILE,
        "{file}: only {} usable vectors, expected at least {EXPECTED_PER_FILE}",
        entries.len()
    );
    if direction == Direction::Decrypt {
        assert!(
            failures_checked > 0,
            "{file}: no FAIL entries, so rejection was never tested"
        );
    }
    // Written to stderr directly, not through the test harness's capture,
    // so the count shows in a normal `cargo test` run.
    let rejected = match direction {
        Direction::Encrypt => String::new(),
        Direction::Decrypt => format!(", {failures_checked} of them forgeries rejected"),
    };
    let _ = writeln!(
        std::io::stderr(),
        "nist_gcm: {file}: {} vectors OK{rejected}",
        entries.len()
    );
}

fn check_encrypt(file: &str, e: &Entry) {
    let pt =
        e.pt.as_deref()
            .unwrap_or_else(|| panic!("{file}:{}: no PT", e.line));
    let mut buf = pt.to_vec();
    buf.extend_from_slice(&[0; TAG_LEN]);
    cipher(file, e)
        .seal_raw(&nonce(e), &e.aad, &mut buf)
        .unwrap();
    assert_eq!(buf[..pt.len()], e.ct, "{file}:{}: ciphertext", e.line);
    assert_eq!(buf[pt.len()..], e.tag, "{file}:{}: tag", e.line);
    // And back again.
    assert_eq!(
        cipher(file, e).open_raw(&nonce(e), &e.aad, &mut buf),
        Ok(pt.len())
    );
    assert_eq!(buf[..pt.len()], *pt, "{file}:{}: reopened", e.line);
    // The one-pass path, with the plaintext split into data and `extra`
    // (as TLS 1.3's content type is) wherever it can be.
    let c = cipher(file, e);
    let split = pt.len().saturating_sub(1);
    let mut out = vec![0xa5; pt.len() + TAG_LEN];
    c.seal_raw_to(&nonce(e), &e.aad, &pt[..split], &pt[split..], &mut out)
        .unwrap();
    assert_eq!(
        out[..pt.len()],
        e.ct,
        "{file}:{}: one-pass ciphertext",
        e.line
    );
    assert_eq!(out[pt.len()..], e.tag, "{file}:{}: one-pass tag", e.line);
    let mut back = vec![0x5a; pt.len()];
    assert_eq!(
        c.open_raw_to(&nonce(e), &e.aad, &out, &mut back),
        Ok(pt.len())
    );
    assert_eq!(back, *pt, "{file}:{}: one-pass reopened", e.line);
}

fn check_decrypt(file: &str, e: &Entry) {
    let mut buf = e.ct.clone();
    buf.extend_from_slice(&e.tag);
    let mut one_pass = vec![0xa5; e.ct.len()];
    let one_pass_result = cipher(file, e).open_raw_to(&nonce(e), &e.aad, &buf, &mut one_pass);
    let result = cipher(file, e).open_raw(&nonce(e), &e.aad, &mut buf);
    if e.fail {
        assert_eq!(
            result,
            Err(CryptoError),
            "{file}:{}: FAIL entry opened",
            e.line
        );
        assert_eq!(
            one_pass_result,
            Err(CryptoError),
            "{file}:{}: FAIL entry opened in one pass",
            e.line
        );
        return;
    }
    let pt =
        e.pt.as_deref()
            .unwrap_or_else(|| panic!("{file}:{}: neither PT nor FAIL", e.line));
    assert_eq!(result, Ok(pt.len()), "{file}:{}: open", e.line);
    assert_eq!(buf[..pt.len()], *pt, "{file}:{}: plaintext", e.line);
    assert_eq!(
        one_pass_result,
        Ok(pt.len()),
        "{file}:{}: one-pass open",
        e.line
    );
    assert_eq!(one_pass, *pt, "{file}:{}: one-pass plaintext", e.line);
}

fn cipher(file: &str, e: &Entry) -> AesGcmCipher {
    let algorithm = match e.key_bits {
        128 => AeadAlgorithm::Aes128Gcm,
        256 => AeadAlgorithm::Aes256Gcm,
        bits => panic!("{file}:{}: unexpected Keylen {bits}", e.line),
    };
    // The static IV is unused: the raw methods take the nonce explicitly.
    let key = TrafficKey::new(algorithm, &e.key, [0; IV_LEN]);
    AesGcmCipher::new(&key.unwrap_or_else(|err| panic!("{file}:{}: {err}", e.line)))
}

fn nonce(e: &Entry) -> [u8; IV_LEN] {
    e.iv.as_slice().try_into().expect("filtered to 96-bit IVs")
}

/// Parses a CAVP `.rsp` file: `[Name = value]` group headers, then entries
/// of `Name = hex` lines starting at `Count = n`, with a bare `FAIL` line
/// marking an entry that must not authenticate.
fn parse(text: &str) -> Vec<Entry> {
    let mut entries: Vec<Entry> = Vec::new();
    let mut group = Entry::default();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let (name, value) = split(header);
            let value: usize = value.parse().unwrap_or(0);
            match name {
                "Keylen" => group.key_bits = value,
                "IVlen" => group.iv_bits = value,
                "Taglen" => group.tag_bits = value,
                _ => {}
            }
            continue;
        }
        if line == "FAIL" {
            if let Some(entry) = entries.last_mut() {
                entry.fail = true;
            }
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, value) = split(line);
        if name == "Count" {
            entries.push(Entry {
                line: i + 1,
                key_bits: group.key_bits,
                iv_bits: group.iv_bits,
                tag_bits: group.tag_bits,
                ..Entry::default()
            });
            continue;
        }
        let Some(entry) = entries.last_mut() else {
            continue;
        };
        let bytes =
            hex::decode(value).unwrap_or_else(|_| panic!("line {}: bad hex in {line}", i + 1));
        match name {
            "Key" => entry.key = bytes,
            "IV" => entry.iv = bytes,
            "PT" => entry.pt = Some(bytes),
            "AAD" => entry.aad = bytes,
            "CT" => entry.ct = bytes,
            "Tag" => entry.tag = bytes,
            _ => {}
        }
    }
    entries
}

fn split(line: &str) -> (&str, &str) {
    match line.split_once('=') {
        Some((name, value)) => (name.trim(), value.trim()),
        None => (line, ""),
    }
}

fn vectors_dir() -> PathBuf {
    match std::env::var_os("SMT_TEST_VECTORS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../test-vectors"),
    }
}
