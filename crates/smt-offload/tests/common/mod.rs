//! Shared by the integration tests: keys, the software reference (SMT's
//! own record sealing in smt-crypto, which knows nothing of the engine),
//! and a receiver that opens what the engine put on the wire.

#![allow(dead_code)] // each test binary uses a different part

use std::collections::HashMap;

use smt_crypto::{record_nonce, AeadAlgorithm, AesGcmCipher, TrafficKey};
use smt_offload::stream::PlainSegment;
use smt_offload::{
    CipherSuite, CryptoInfo, Engine, SplitMix64, WireSegment, HEADER_LEN, IV_LEN, TAG_LEN,
};

/// A key of `suite` drawn from `seed`, starting at `rec_seq`.
pub fn key(suite: CipherSuite, seed: u64, rec_seq: u64) -> CryptoInfo {
    let mut rng = SplitMix64::new(seed);
    let mut key = vec![0; suite.key_len()];
    let mut iv = [0; IV_LEN];
    rng.fill(&mut key);
    rng.fill(&mut iv);
    CryptoInfo::new(suite, &key, iv, rec_seq).unwrap()
}

/// The same key as smt-crypto's software cipher.
pub fn software(info: &CryptoInfo) -> AesGcmCipher {
    let algorithm = match info.suite() {
        CipherSuite::Aes128Gcm => AeadAlgorithm::Aes128Gcm,
        _ => AeadAlgorithm::Aes256Gcm,
    };
    AesGcmCipher::new(&TrafficKey::new(algorithm, info.key(), *info.iv()).unwrap())
}

/// Seals every record of `plain` (a stream of whole plaintext records with
/// empty tags) in software, numbering them from `first_seq`.
pub fn software_seal(
    cipher: &AesGcmCipher,
    iv: &[u8; IV_LEN],
    first_seq: u64,
    plain: &[u8],
) -> Vec<u8> {
    let mut out = plain.to_vec();
    let mut at = 0;
    let mut seq = first_seq;
    while at < out.len() {
        let len = body_len(&out[at..]);
        let (header, rest) = out[at..].split_at_mut(HEADER_LEN);
        cipher
            .seal_raw(&record_nonce(iv, seq), header, &mut rest[..len])
            .unwrap();
        at += HEADER_LEN + len;
        seq += 1;
    }
    out
}

/// The body length a record header at the front of `bytes` declares.
pub fn body_len(bytes: &[u8]) -> usize {
    usize::from(u16::from_be_bytes([bytes[3], bytes[4]]))
}

/// Opens one record (header + body) under `seq`; returns its data (inner
/// plaintext without the content type) or `None` if it does not
/// authenticate.
pub fn open_record(
    cipher: &AesGcmCipher,
    iv: &[u8; IV_LEN],
    seq: u64,
    record: &[u8],
) -> Option<Vec<u8>> {
    let (header, body) = record.split_at(HEADER_LEN);
    let mut body = body.to_vec();
    let n = cipher
        .open_raw(&record_nonce(iv, seq), header, &mut body)
        .ok()?;
    body.truncate(n);
    // Inner plaintext is data || 0x17 (no padding in these tests).
    body.pop();
    Some(body)
}

/// Everything left on the engine's wire.
pub fn wire(engine: &mut Engine) -> Vec<WireSegment> {
    std::iter::from_fn(|| engine.poll_wire()).collect()
}

/// A segment header the tests use to find what a wire segment should hold:
/// (message number, segment number). The engine never reads it.
pub fn segment_header(message: u32, segment: u32) -> Vec<u8> {
    let mut h = message.to_be_bytes().to_vec();
    h.extend_from_slice(&segment.to_be_bytes());
    h
}

/// What the receiver expects inside one segment.
#[derive(Clone, Debug)]
pub struct Expected {
    /// (sequence number, data) of each record, in order.
    pub records: Vec<(u64, Vec<u8>)>,
}

/// Record data of a plaintext segment, in order.
pub fn record_data(segment: &PlainSegment) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 0;
    let p = &segment.payload;
    while at < p.len() {
        let len = body_len(&p[at..]);
        // Data excludes the inner content type byte and the tag.
        out.push(p[at + HEADER_LEN..at + HEADER_LEN + len - 1 - TAG_LEN].to_vec());
        at += HEADER_LEN + len;
    }
    out
}

/// What a receiver made of the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Records that authenticated under the expected sequence number and
    /// carried the expected data.
    pub ok: u64,
    /// Records that arrived but did not authenticate (or, never seen here,
    /// authenticated with other data).
    pub failed: u64,
    /// Records whose segment never left the NIC.
    pub missing: u64,
}

impl Verdict {
    pub fn bad(&self) -> u64 {
        self.failed + self.missing
    }
}

/// Opens every record of every wire segment under the sequence number the
/// receiver expects for it (found through the segment header), as an SMT
/// or TLS receiver would.
pub fn receive(
    cipher: &AesGcmCipher,
    iv: &[u8; IV_LEN],
    expected: &HashMap<Vec<u8>, Expected>,
    wire: &[WireSegment],
) -> Verdict {
    let mut verdict = Verdict::default();
    let mut seen = 0;
    for segment in wire {
        let Some(exp) = expected.get(&segment.header) else {
            panic!("a segment nobody sent: header {:02x?}", segment.header);
        };
        seen += 1;
        let mut at = 0;
        for (seq, data) in &exp.records {
            let len = HEADER_LEN + body_len(&segment.payload[at..]);
            match open_record(cipher, iv, *seq, &segment.payload[at..at + len]) {
                Some(opened) if opened == *data => verdict.ok += 1,
                _ => verdict.failed += 1,
            }
            at += len;
        }
    }
    let total: usize = expected.values().map(|e| e.records.len()).sum();
    let arrived = verdict.ok + verdict.failed;
    verdict.missing = total as u64 - arrived;
    assert!(seen <= expected.len());
    verdict
}
