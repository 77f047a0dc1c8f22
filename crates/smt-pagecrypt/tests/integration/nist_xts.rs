//! NIST CAVP XTS-AES-128 vectors (XTSGenAES128.rsp, the IEEE 1619 mode)
//! through [`XtsCipher`], the code that seals every page, in both tweak
//! forms: a 128-bit hex tweak (`i = ...`) and a data unit sequence number
//! (`DataUnitSeqNumber`), the latter through [`Tweak::data_unit`], the
//! derivation [`Tweak::address`] uses for page addresses.
//!
//! Data units that are not a whole number of bytes (130 bits) are skipped,
//! as OpenSSL (and any byte-oriented XTS) has no such unit; 128-, 256- and
//! 200-bit units (the last with ciphertext stealing) all run.
//!
//! The vectors are not in the repository. `scripts/fetch-vectors.sh`
//! unpacks them into `<repo>/test-vectors/xts/`; `SMT_TEST_VECTORS` may
//! name another directory holding `xts/`. Missing vectors fail.

use std::path::PathBuf;

use smt_pagecrypt::{Tweak, XtsCipher, XtsKey};

/// Whole-byte entries per file and section in the pinned vector release
/// (500 per section, 100 of them 130-bit): a parser that silently drops
/// entries fails here.
const EXPECTED_PER_SECTION: usize = 400;

#[test]
fn hex_tweaks() {
    run("tweak-128hexstr/XTSGenAES128.rsp");
}

#[test]
fn data_unit_sequence_numbers() {
    run("tweak-dataunitseqno/XTSGenAES128.rsp");
}

#[derive(Default, Clone)]
struct Entry {
    line: usize,
    encrypt: bool,
    bits: usize,
    key: Vec<u8>,
    tweak: Option<Tweak>,
    pt: Vec<u8>,
    ct: Vec<u8>,
}

fn run(file: &str) {
    let path = vectors_dir().join("xts").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read NIST XTS vectors at {}: {e}\n\
             run `scripts/fetch-vectors.sh` from the repository root to fetch them \
             (or set SMT_TEST_VECTORS to a directory holding xts/)",
            path.display()
        )
    });
    let entries = parse(&text);
    let whole: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.bits.is_multiple_of(8))
        .collect();
    for encrypt in [true, false] {
        let n = whole.iter().filter(|e| e.encrypt == encrypt).count();
        assert_eq!(
            n, EXPECTED_PER_SECTION,
            "{file}: entries (encrypt: {encrypt})"
        );
    }
    for e in &whole {
        check(file, e);
    }
    println!("{file}: {} vectors passed", whole.len());
}

fn check(file: &str, e: &Entry) {
    let key = XtsKey::new(&e.key).expect("NIST keys have distinct halves");
    let tweak = e.tweak.expect("every entry has a tweak");
    let mut x = XtsCipher::new(&key);
    assert_eq!(e.pt.len() * 8, e.bits, "{file}:{}: length", e.line);
    let mut buf = e.pt.clone();
    x.encrypt(&tweak, &mut buf);
    assert_eq!(
        hex::encode(&buf),
        hex::encode(&e.ct),
        "{file}:{}: encrypt",
        e.line
    );
    x.decrypt(&tweak, &mut buf);
    assert_eq!(buf, e.pt, "{file}:{}: decrypt", e.line);
}

fn parse(text: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut cur: Option<Entry> = None;
    let mut encrypt = true;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        match line {
            "[ENCRYPT]" => encrypt = true,
            "[DECRYPT]" => encrypt = false,
            _ => {}
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if k == "COUNT" {
            out.extend(cur.take());
            cur = Some(Entry {
                line: n + 1,
                encrypt,
                ..Entry::default()
            });
            continue;
        }
        let Some(e) = cur.as_mut() else { continue };
        match k {
            "DataUnitLen" => e.bits = v.parse().expect("a length"),
            "Key" => e.key = hex::decode(v).expect("hex key"),
            "i" => {
                let t: [u8; 16] = hex::decode(v).expect("hex").try_into().expect("16 bytes");
                e.tweak = Some(Tweak::from_bytes(t));
            }
            "DataUnitSeqNumber" => e.tweak = Some(Tweak::data_unit(v.parse().expect("a number"))),
            "PT" => e.pt = hex::decode(v).expect("hex PT"),
            "CT" => e.ct = hex::decode(v).expect("hex CT"),
            _ => {}
        }
    }
    out.extend(cur);
    out
}

fn vectors_dir() -> PathBuf {
    std::env::var_os("SMT_TEST_VECTORS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../test-vectors"))
}
