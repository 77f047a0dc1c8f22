//! Outside vectors through the engine.
//!
//! - RFC 8448 §3's three protected post-handshake records, posted as
//!   plaintext records with empty tags: the engine's wire bytes equal the
//!   RFC's, whole, split across two segments at every byte, and when a
//!   segment starts mid-record after a resync that replays the record's
//!   start.
//! - The same records received: a receive context decrypts them to the
//!   RFC's plaintext, whole and split across two packets at every byte,
//!   and hands a record with one flipped bit up undecrypted.
//! - NIST CAVP AES-GCM encrypt vectors (96-bit IV, 128-bit tag) through the
//!   streaming AES-GCM the engine uses for records that span segments, in
//!   one piece and in random pieces; the decrypt vectors (including those
//!   whose tag must fail) through the receive side's streaming open. They have AAD of other lengths than a
//!   record header, so they cannot be framed as records; the whole-record
//!   path is aws-lc-rs's one-shot seal, which the differential tests and
//!   the RFC records check. The vectors come from
//!   `scripts/fetch-vectors.sh`, as for smt-crypto's tests; missing vectors
//!   fail the test.

use crate::common;

use std::io::Write;
use std::path::PathBuf;

use smt_crypto::test_vectors::*;
use smt_offload::testing::{gcm_open_in_pieces, gcm_seal_in_pieces};
use smt_offload::{
    CipherSuite, ContextId, CryptoInfo, Engine, EngineConfig, Outcome, QueueId, Resync,
    RxContextId, RxEngine, Segment, SplitMix64, StreamPos, TxDescriptor, IV_LEN, TAG_LEN,
};

const Q: QueueId = QueueId(0);
const CTX: ContextId = ContextId(3);

/// (key, iv, seq, inner payload, inner content type, the RFC's record).
fn rfc8448_records() -> Vec<(CryptoInfo, u64, Vec<u8>, &'static [u8])> {
    let server = |seq| {
        CryptoInfo::new(
            CipherSuite::Aes128Gcm,
            &RFC8448_SERVER_AP_KEY,
            RFC8448_SERVER_AP_IV,
            seq,
        )
        .unwrap()
    };
    let client = CryptoInfo::new(
        CipherSuite::Aes128Gcm,
        &RFC8448_CLIENT_AP_KEY,
        RFC8448_CLIENT_AP_IV,
        0,
    )
    .unwrap();
    vec![
        (
            client,
            0,
            posted(&RFC8448_APP_PAYLOAD, CONTENT_TYPE_APPLICATION_DATA),
            &RFC8448_CLIENT_AP_RECORD_SEQ0,
        ),
        (
            server(1),
            1,
            posted(&RFC8448_APP_PAYLOAD, CONTENT_TYPE_APPLICATION_DATA),
            &RFC8448_SERVER_AP_RECORD_SEQ1,
        ),
        (
            server(0),
            0,
            posted(&RFC8448_SERVER_NST_PAYLOAD, CONTENT_TYPE_HANDSHAKE),
            &RFC8448_SERVER_NST_RECORD_SEQ0,
        ),
    ]
}

/// The record as software posts it: header, payload, inner content type,
/// a tag of 0xa5 (poison: the engine must overwrite every byte of it).
fn posted(payload: &[u8], content_type: u8) -> Vec<u8> {
    let body = payload.len() + 1 + TAG_LEN;
    let mut r = vec![0x17, 0x03, 0x03];
    r.extend_from_slice(&(body as u16).to_be_bytes());
    r.extend_from_slice(payload);
    r.push(content_type);
    r.extend_from_slice(&[0xa5; TAG_LEN]);
    r
}

fn engine_with(info: &CryptoInfo) -> Engine {
    let mut engine = Engine::new(EngineConfig {
        queues: 1,
        context_capacity: 4,
    });
    let info = Box::new(info.clone());
    engine
        .post(Q, TxDescriptor::CreateContext { ctx: CTX, info })
        .unwrap();
    engine
}

fn segment(payload: &[u8]) -> TxDescriptor {
    TxDescriptor::Segment(Segment {
        ctx: CTX,
        header: vec![0xee; 4],
        payload: payload.to_vec(),
        mss: 1400,
    })
}

fn sent(engine: &mut Engine) -> Vec<u8> {
    engine.drain(Q);
    assert_eq!(engine.counters().drops(), 0, "{}", engine.counters());
    common::wire(engine)
        .into_iter()
        .flat_map(|s| s.payload)
        .collect()
}

#[test]
fn rfc8448_records_whole() {
    for (info, _, record, expected) in rfc8448_records() {
        let mut engine = engine_with(&info);
        engine.post(Q, segment(&record)).unwrap();
        assert_eq!(sent(&mut engine), expected);
    }
}

#[test]
fn rfc8448_records_split_at_every_byte() {
    for (info, _, record, expected) in rfc8448_records() {
        for cut in 1..record.len() {
            let mut engine = engine_with(&info);
            engine.post(Q, segment(&record[..cut])).unwrap();
            engine.post(Q, segment(&record[cut..])).unwrap();
            assert_eq!(sent(&mut engine), expected, "cut at {cut}");
        }
    }
}

/// A segment holding only record bytes from `cut` on (a retransmitted
/// packet), on a context that was elsewhere: the resync carries the
/// record's first `cut` bytes, and the segment's bytes equal the RFC's.
#[test]
fn rfc8448_records_resync_mid_record() {
    for (info, seq, record, expected) in rfc8448_records() {
        for cut in 1..record.len() {
            let mut engine = engine_with(&info.starting_at(seq + 100));
            let resync = Resync {
                ctx: CTX,
                record_seq: seq,
                offset: cut,
                record_prefix: record[..cut].to_vec(),
            };
            engine.post(Q, TxDescriptor::Resync(resync)).unwrap();
            engine.post(Q, segment(&record[cut..])).unwrap();
            assert_eq!(sent(&mut engine), expected[cut..], "cut at {cut}");
            assert_eq!(engine.counters().tx_tls_ooo, 1);
            assert_eq!(engine.counters().tx_tls_resync_bytes, cut as u64);
        }
    }
}

/// Without the record's start, a mid-record resync cannot rebuild the
/// tag: the segment is dropped and counted, nothing goes out.
#[test]
fn resync_without_record_start_drops_the_segment() {
    let (info, seq, record, _) = rfc8448_records().remove(0);
    let mut engine = engine_with(&info);
    let resync = Resync {
        ctx: CTX,
        record_seq: seq,
        offset: 30,
        record_prefix: Vec::new(),
    };
    engine.post(Q, TxDescriptor::Resync(resync)).unwrap();
    engine.post(Q, segment(&record[30..])).unwrap();
    engine.drain(Q);
    assert_eq!(engine.counters().tx_tls_drop_no_sync_data, 1);
    assert!(engine.poll_wire().is_none());
}

/// The context encrypts with whatever sequence number it holds: a record
/// posted for seq 1 on a context at seq 0 goes out wrong (seed 001 Fig. 2,
/// "Out-seq"), and a resync fixes it ("Out-resync").
#[test]
fn out_of_sequence_without_resync_is_wrong_and_with_resync_right() {
    let (info, _, record, expected) = rfc8448_records().remove(1);
    let mut engine = engine_with(&info.starting_at(0));
    engine.post(Q, segment(&record)).unwrap();
    assert_ne!(sent(&mut engine), expected);
    let mut engine = engine_with(&info.starting_at(0));
    let resync = Resync {
        ctx: CTX,
        record_seq: 1,
        offset: 0,
        record_prefix: Vec::new(),
    };
    engine.post(Q, TxDescriptor::Resync(resync)).unwrap();
    engine.post(Q, segment(&record)).unwrap();
    assert_eq!(engine.step(Q), Some(Outcome::Applied));
    assert_eq!(sent(&mut engine), expected);
}

/// A receive context synced at the record's first byte.
fn receiver(info: &CryptoInfo) -> RxEngine {
    let mut rx = RxEngine::new(4);
    let at = StreamPos { stream: 9, pos: 0 };
    rx.create(RxContextId(1), info, Some(at)).unwrap();
    rx
}

/// Runs `packets` (cut from one record) through a fresh receiver; returns
/// the bytes handed up and whether each packet was marked decrypted.
fn receive(info: &CryptoInfo, record: &[u8], cuts: &[usize]) -> (Vec<u8>, Vec<bool>) {
    let mut rx = receiver(info);
    let (mut out, mut marks, mut from) = (Vec::new(), Vec::new(), 0);
    for &to in cuts.iter().chain([record.len()].iter()) {
        let mut packet = record[from..to].to_vec();
        let at = StreamPos {
            stream: 9,
            pos: from as u64,
        };
        marks.push(rx.receive(RxContextId(1), at, &mut packet).decrypted);
        out.extend_from_slice(&packet);
        from = to;
    }
    (out, marks)
}

#[test]
fn rfc8448_records_received_whole_and_split_at_every_byte() {
    for (info, seq, posted, wire) in rfc8448_records() {
        let info = info.starting_at(seq);
        // What the receiver should hand up: header, inner plaintext, and
        // the tag as it came.
        let mut plain = posted.clone();
        let tag_at = plain.len() - TAG_LEN;
        plain[tag_at..].copy_from_slice(&wire[tag_at..]);
        let (out, marks) = receive(&info, wire, &[]);
        assert_eq!((out, marks), (plain.clone(), vec![true]));
        for cut in 1..wire.len() {
            let (out, marks) = receive(&info, wire, &[cut]);
            assert_eq!(out, plain, "cut at {cut}");
            assert_eq!(marks, [true, true], "cut at {cut}");
        }
    }
}

/// A record that does not authenticate is never handed up as plaintext
/// in the packet that ends it: software gets the packet as it came.
#[test]
fn rfc8448_record_with_a_flipped_bit_is_not_marked() {
    let (info, seq, _, wire) = rfc8448_records().remove(0);
    let info = info.starting_at(seq);
    for flip in [5, 30, wire.len() - 1] {
        let mut bad = wire.to_vec();
        bad[flip] ^= 1;
        let (out, marks) = receive(&info, &bad, &[]);
        assert_eq!((out, marks), (bad.clone(), vec![false]), "flip {flip}");
        // Split before the tag: the first packet's bytes went up
        // decrypted (nothing could be checked yet), the second's not.
        let (_, marks) = receive(&info, &bad, &[40]);
        assert_eq!(marks, [true, false], "flip {flip}");
    }
}

#[test]
fn nist_gcm_decrypt_aes128_through_the_receive_path() {
    nist_open("gcmDecrypt128.rsp", CipherSuite::Aes128Gcm);
}

#[test]
fn nist_gcm_decrypt_aes256_through_the_receive_path() {
    nist_open("gcmDecrypt256.rsp", CipherSuite::Aes256Gcm);
}

/// Every decrypt vector (96-bit IV, 128-bit tag): the plaintext comes out
/// and the tag verifies, in one piece and in random pieces; a vector
/// marked FAIL fails both ways.
fn nist_open(file: &str, suite: CipherSuite) {
    let mut rng = SplitMix64::new(0x0de1);
    let entries = parse_decrypt(&read_vectors(file));
    let fails = entries.iter().filter(|e| e.pt.is_none()).count();
    assert!(entries.len() >= EXPECTED_PER_FILE && fails > 0, "{file}");
    for e in &entries {
        let key = CryptoInfo::new(suite, &e.key, [0; IV_LEN], 0).unwrap();
        let nonce: [u8; IV_LEN] = e.iv.as_slice().try_into().unwrap();
        let tag: [u8; TAG_LEN] = e.tag.as_slice().try_into().unwrap();
        let mut cuts = [
            rng.below(e.ct.len() as u64 + 1) as usize,
            rng.below(e.ct.len() as u64 + 1) as usize,
        ];
        cuts.sort_unstable();
        for pieces in [&[][..], &cuts[..]] {
            let mut text = e.ct.clone();
            let ok = gcm_open_in_pieces(&key, nonce, &e.aad, &mut text, &tag, pieces);
            match &e.pt {
                Some(pt) => {
                    assert!(ok, "{file}:{}: tag, cuts {pieces:?}", e.line);
                    assert_eq!(&text, pt, "{file}:{}: plaintext", e.line);
                }
                None => assert!(!ok, "{file}:{}: FAIL accepted", e.line),
            }
        }
    }
    let _ = writeln!(
        std::io::stderr(),
        "vectors: {file}: {} NIST vectors ({fails} FAIL) OK through the receive path",
        entries.len()
    );
}

struct DecryptEntry {
    line: usize,
    key: Vec<u8>,
    iv: Vec<u8>,
    ct: Vec<u8>,
    aad: Vec<u8>,
    tag: Vec<u8>,
    /// `None` for a vector whose tag must fail.
    pt: Option<Vec<u8>>,
}

/// Decrypt files end each entry with `PT = ...` or `FAIL`.
fn parse_decrypt(text: &str) -> Vec<DecryptEntry> {
    let mut out = Vec::new();
    let (mut iv_bits, mut tag_bits) = (0, 0);
    let mut fields: Vec<(String, Vec<u8>)> = Vec::new();
    let mut start = 0;
    for (i, line) in text.lines().map(str::trim).enumerate() {
        if let Some(group) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let (name, value) = split(group);
            let value = value.parse().unwrap_or(0);
            match name {
                "IVlen" => iv_bits = value,
                "Taglen" => tag_bits = value,
                _ => {}
            }
            continue;
        }
        let (name, value) = split(line);
        if name == "Count" {
            start = i + 1;
            fields.clear();
            continue;
        }
        let done = match name {
            "PT" => Some(Some(hex(value).unwrap_or_default())),
            "FAIL" => Some(None),
            _ => {
                if let Some(bytes) = hex(value) {
                    fields.push((name.to_string(), bytes));
                }
                None
            }
        };
        if let (Some(pt), true) = (done, iv_bits == 96 && tag_bits == 128) {
            let e = entry(start, &fields);
            out.push(DecryptEntry {
                line: e.line,
                key: e.key,
                iv: e.iv,
                ct: e.ct,
                aad: e.aad,
                tag: e.tag,
                pt,
            });
        }
    }
    out
}

#[test]
fn nist_gcm_encrypt_aes128_through_the_streaming_path() {
    nist("gcmEncryptExtIV128.rsp", CipherSuite::Aes128Gcm);
}

#[test]
fn nist_gcm_encrypt_aes256_through_the_streaming_path() {
    nist("gcmEncryptExtIV256.rsp", CipherSuite::Aes256Gcm);
}

/// Entries with IVlen 96 and Taglen 128 per file in the pinned release
/// (the count smt-crypto's tests also expect).
const EXPECTED_PER_FILE: usize = 375;

fn nist(file: &str, suite: CipherSuite) {
    let mut rng = SplitMix64::new(0x6e15);
    let entries = parse(&read_vectors(file));
    assert!(
        entries.len() >= EXPECTED_PER_FILE,
        "{file}: {} usable vectors",
        entries.len()
    );
    for e in &entries {
        let key = CryptoInfo::new(suite, &e.key, [0; IV_LEN], 0).unwrap();
        let nonce: [u8; IV_LEN] = e.iv.as_slice().try_into().unwrap();
        let mut cuts = [
            rng.below(e.pt.len() as u64 + 1) as usize,
            rng.below(e.pt.len() as u64 + 1) as usize,
        ];
        cuts.sort_unstable();
        for pieces in [&[][..], &cuts[..]] {
            let mut text = e.pt.clone();
            let tag = gcm_seal_in_pieces(&key, nonce, &e.aad, &mut text, pieces);
            assert_eq!(text, e.ct, "{file}:{}: ciphertext, cuts {pieces:?}", e.line);
            assert_eq!(
                tag[..],
                e.tag[..],
                "{file}:{}: tag, cuts {pieces:?}",
                e.line
            );
        }
    }
    let _ = writeln!(
        std::io::stderr(),
        "vectors: {file}: {} NIST vectors OK through the streaming path",
        entries.len()
    );
}

struct Entry {
    line: usize,
    key: Vec<u8>,
    iv: Vec<u8>,
    pt: Vec<u8>,
    aad: Vec<u8>,
    ct: Vec<u8>,
    tag: Vec<u8>,
}

fn read_vectors(file: &str) -> String {
    let dir = match std::env::var_os("SMT_TEST_VECTORS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../test-vectors"),
    };
    let path = dir.join("gcm").join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read NIST GCM vectors at {}: {e}\nrun `scripts/fetch-vectors.sh` first",
            path.display()
        )
    })
}

/// Keeps the entries TLS 1.3 can produce: 96-bit IVs, 128-bit tags.
fn parse(text: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    let (mut iv_bits, mut tag_bits) = (0, 0);
    let mut fields: Vec<(String, Vec<u8>)> = Vec::new();
    let mut start = 0;
    for (i, line) in text.lines().map(str::trim).enumerate() {
        if let Some(group) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let (name, value) = split(group);
            let value = value.parse().unwrap_or(0);
            match name {
                "IVlen" => iv_bits = value,
                "Taglen" => tag_bits = value,
                _ => {}
            }
            continue;
        }
        let (name, value) = split(line);
        if name == "Count" {
            start = i + 1;
            fields.clear();
            continue;
        }
        if let Some(bytes) = hex(value) {
            fields.push((name.to_string(), bytes));
        }
        if name == "Tag" && iv_bits == 96 && tag_bits == 128 {
            out.push(entry(start, &fields));
        }
    }
    out
}

fn entry(line: usize, fields: &[(String, Vec<u8>)]) -> Entry {
    let get = |n: &str| {
        fields
            .iter()
            .find(|(name, _)| name == n)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    Entry {
        line,
        key: get("Key"),
        iv: get("IV"),
        pt: get("PT"),
        aad: get("AAD"),
        ct: get("CT"),
        tag: get("Tag"),
    }
}

fn split(line: &str) -> (&str, &str) {
    match line.split_once('=') {
        Some((n, v)) => (n.trim(), v.trim()),
        None => (line, ""),
    }
}

fn hex(s: &str) -> Option<Vec<u8>> {
    hex::decode(s).ok()
}
