//! Cost of protecting one TLS record: seal and open of `payload ||
//! content-type || tag` in place, with the 5-byte record header as
//! associated data and an SMT composite sequence number
//! (`message_id << 16 | record_index`), for AES-128-GCM, AES-256-GCM and the
//! NullCipher baseline.
//!
//! Run with `cargo bench -p smt-crypto --bench records`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use smt_crypto::{AeadAlgorithm, AesGcmCipher, TrafficKey};
use smt_proto::crypto::{NullCipher, PacketCipher, RECORD_HEADER_LEN, TAG_LEN};

/// Plaintext payload sizes: a small RPC, a typical one, a full TLS record.
const PAYLOADS: [usize; 3] = [64, 1024, 16 * 1024];

/// A composite sequence number: message 0x1234, record 7.
const SEQ: u64 = 0x1234 << 16 | 7;

fn ciphers() -> Vec<(&'static str, Box<dyn PacketCipher>)> {
    let aes = |algorithm: AeadAlgorithm| {
        let key = vec![0x5a; algorithm.key_len()];
        let key = TrafficKey::new(algorithm, &key, [0xa5; 12]).expect("key length fits");
        Box::new(AesGcmCipher::new(&key)) as Box<dyn PacketCipher>
    };
    vec![
        ("aes128gcm", aes(AeadAlgorithm::Aes128Gcm)),
        ("aes256gcm", aes(AeadAlgorithm::Aes256Gcm)),
        ("null", Box::new(NullCipher)),
    ]
}

/// The record body buffer (`payload || 0x17 || tag space`) and its header.
fn record(payload: usize) -> (Vec<u8>, [u8; RECORD_HEADER_LEN]) {
    let body_len = payload + 1 + TAG_LEN;
    let mut body = vec![0x42; body_len];
    body[payload] = 0x17;
    let [hi, lo] = u16::try_from(body_len)
        .expect("records are at most 16 KiB")
        .to_be_bytes();
    (body, [0x17, 0x03, 0x03, hi, lo])
}

fn seal(c: &mut Criterion) {
    let mut group = c.benchmark_group("seal");
    for (name, cipher) in ciphers() {
        for payload in PAYLOADS {
            let (mut body, header) = record(payload);
            group.throughput(Throughput::Bytes(payload as u64));
            group.bench_function(BenchmarkId::new(name, payload), |b| {
                b.iter(|| cipher.seal_in_place(black_box(SEQ), &header, black_box(&mut body)))
            });
        }
    }
    group.finish();
}

fn open(c: &mut Criterion) {
    let mut group = c.benchmark_group("open");
    for (name, cipher) in ciphers() {
        for payload in PAYLOADS {
            let (mut sealed, header) = record(payload);
            cipher
                .seal_in_place(SEQ, &header, &mut sealed)
                .expect("sealing succeeds");
            group.throughput(Throughput::Bytes(payload as u64));
            // Opening decrypts in place, so each iteration gets a fresh copy
            // of the sealed record; the copy is not timed.
            group.bench_function(BenchmarkId::new(name, payload), |b| {
                b.iter_batched_ref(
                    || sealed.clone(),
                    |body| {
                        let n = cipher.open_in_place(black_box(SEQ), &header, body);
                        assert_eq!(n, Ok(payload + 1));
                    },
                    BatchSize::SmallInput,
                )
            });
        }
    }
    group.finish();
}

criterion_group!(benches, seal, open);
criterion_main!(benches);
