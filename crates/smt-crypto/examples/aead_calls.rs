//! Per-call cost of every AES-128-GCM implementation and control MAC on
//! offer, side by side: aws-lc-rs through each of its entry points, ring,
//! RustCrypto's `aes-gcm`, and smt-crypto's own `PacketCipher` (what the
//! endpoint calls); HMAC-SHA256 (control MAC v1), AES-CMAC from aws-lc-rs
//! and from RustCrypto (v2), and GMAC for comparison.
//!
//! ```sh
//! cargo run --release -p smt-crypto --example aead_calls                  # ns per call
//! cargo run --release -p smt-crypto --example aead_calls -- --instructions # callgrind
//! cargo run --release -p smt-crypto --example aead_calls -- --instructions seal_to # cases named so
//! cargo run --release -p smt-crypto --example aead_calls -- --memory      # bytes per key
//! ```
//!
//! A record is `payload || 0x17` sealed with the 5-byte TLS 1.3 record
//! header as associated data (TLS 1.2's 13 bytes would be the same one
//! GHASH block). An open is measured as seal + open minus seal, so every
//! open sees a genuine record and no copy is counted. `--instructions`
//! runs each case under `valgrind --tool=callgrind`, counting only inside
//! the measuring loop (`--toggle-collect`), and divides by the calls:
//! exact, repeatable figures on a shared machine (for the CPU features
//! valgrind shows the program: AES-NI, PCLMULQDQ and AVX2, not VAES or
//! AVX-512). The ns figures are the best of several rounds. A last
//! argument keeps only the cases whose name contains it.
//!
//! `seal_to`/`open_to` are the calls the endpoint makes (the record body
//! from the caller's buffer into the packet, and back), and `open_within`
//! the one it makes for a one-packet message (the record opened down over
//! its header where it lies); the "record path"
//! group sets the two ways of doing one side by side at the sizes where
//! `AesGcmCipher` switches from one to the other: copy then ring in place,
//! or aws-lc in one pass.

use std::hint::black_box;
use std::process::Command;
use std::time::Instant;

use aes_gcm::aead::{AeadInPlace, KeyInit};
use aws_lc_rs::aead::{self as lc, Aad, LessSafeKey, Nonce, UnboundKey};
use aws_lc_rs::{cmac as lc_cmac, hmac};
use smt_crypto::{record_nonce, AeadAlgorithm, AesGcmCipher, TrafficKey};
use smt_proto::crypto::{PacketCipher, RECORD_HEADER_LEN, TAG_LEN};

const KEY: [u8; 16] = [0x5a; 16];
const IV: [u8; 12] = [0xa5; 12];
/// A composite sequence number: message 0x1234, record 0.
const SEQ: u64 = 0x1234 << 16;
const PAYLOADS: [usize; 4] = [64, 256, 1024, 16 * 1024];
/// Control packets: a GRANT, an ACK with one ID, an ACK with 16 IDs.
const CONTROL: [(&str, usize); 3] = [("GRANT", 36), ("ACK, 1 ID", 40), ("ACK, 16 IDs", 160)];
const ROUNDS: usize = 15;
/// The content type, then zero padding up to 15 bytes.
const CONTENT_TYPE_AND_ZEROS: [u8; 16] = [0x17, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];

type Call = Box<dyn FnMut()>;

/// One measured operation: what it is, how many calls a callgrind run
/// makes, and the call itself.
struct Case {
    group: &'static str,
    name: String,
    calls: u32,
    run: Call,
}

fn header(payload: usize) -> [u8; RECORD_HEADER_LEN] {
    let [hi, lo] = ((payload + 1 + TAG_LEN) as u16).to_be_bytes();
    [0x17, 0x03, 0x03, hi, lo]
}

fn calls_for(bytes: usize) -> u32 {
    (200_000 / (bytes + 200)).clamp(20, 2_000) as u32
}

/// Seal, and seal + open, of one `payload`-byte record through `seal` and
/// `open`, which work in place on `inner || tag` with the given nonce.
fn record_cases(
    cases: &mut Vec<Case>,
    backend: &str,
    payload: usize,
    seal: impl Fn(&[u8; 12], &[u8], &mut [u8]) + Clone + 'static,
    open: impl Fn(&[u8; 12], &[u8], &mut [u8]) + 'static,
) {
    let aad = header(payload);
    let nonce = record_nonce(&IV, SEQ);
    let mut buf = vec![0x42; payload + 1 + TAG_LEN];
    buf[payload] = 0x17;
    let mut pair_buf = buf.clone();
    let seal_once = seal.clone();
    cases.push(Case {
        group: "seal",
        name: format!("{backend}, {payload} B"),
        calls: calls_for(payload),
        run: Box::new(move || seal_once(&nonce, &aad, black_box(&mut buf))),
    });
    cases.push(Case {
        group: "seal+open",
        name: format!("{backend}, {payload} B"),
        calls: calls_for(payload),
        run: Box::new(move || {
            seal(&nonce, &aad, black_box(&mut pair_buf));
            open(&nonce, &aad, black_box(&mut pair_buf));
        }),
    });
}

fn aws_lc_key() -> LessSafeKey {
    LessSafeKey::new(UnboundKey::new(&lc::AES_128_GCM, &KEY).expect("16-byte key"))
}

fn aws_lc_cases(cases: &mut Vec<Case>, payload: usize) {
    let key = std::rc::Rc::new(aws_lc_key());
    let opener = key.clone();
    record_cases(
        cases,
        "aws-lc-rs LessSafeKey, in place",
        payload,
        move |nonce, aad, buf| {
            let (inner, tag_out) = buf.split_at_mut(buf.len() - TAG_LEN);
            let nonce = Nonce::assume_unique_for_key(*nonce);
            let tag = key.seal_in_place_separate_tag(nonce, Aad::from(aad), inner);
            tag_out.copy_from_slice(tag.expect("seal").as_ref());
        },
        move |nonce, aad, buf| {
            let nonce = Nonce::assume_unique_for_key(*nonce);
            opener
                .open_in_place(nonce, Aad::from(aad), buf)
                .expect("open");
        },
    );
    // The content type given separately (`extra_in`), as `seal_to` does
    // for large records.
    let key = aws_lc_key();
    let aad = header(payload);
    let nonce = record_nonce(&IV, SEQ);
    let mut data = vec![0x42; payload];
    let mut tail = [0u8; 1 + TAG_LEN];
    cases.push(Case {
        group: "seal",
        name: format!("aws-lc-rs LessSafeKey, scatter, {payload} B"),
        calls: calls_for(payload),
        run: Box::new(move || {
            let nonce = Nonce::assume_unique_for_key(nonce);
            key.seal_in_place_scatter(nonce, Aad::from(&aad), &mut data, &[0x17], &mut tail)
                .expect("seal");
            black_box(&tail);
        }),
    });
}

/// aws-lc-rs's TLS record keys: AES-GCM with TLS 1.3's nonce rule (aws-lc
/// checks that sequence numbers only grow, so each call takes the next).
fn aws_lc_tls_cases(cases: &mut Vec<Case>, payload: usize) {
    use lc::{TlsProtocolId, TlsRecordOpeningKey, TlsRecordSealingKey};
    let aad = header(payload);
    let mut buf = vec![0x42; payload + 1 + TAG_LEN];
    for group in ["seal", "seal+open"] {
        let mut sealer =
            TlsRecordSealingKey::new(&lc::AES_128_GCM, TlsProtocolId::TLS13, &KEY).expect("key");
        let opener =
            TlsRecordOpeningKey::new(&lc::AES_128_GCM, TlsProtocolId::TLS13, &KEY).expect("key");
        let mut buf = buf.clone();
        let mut seq = 0u64;
        cases.push(Case {
            group,
            name: format!("aws-lc-rs TlsRecordSealingKey (TLS 1.3), {payload} B"),
            calls: calls_for(payload),
            run: Box::new(move || {
                let nonce = record_nonce(&IV, seq);
                seq += 1;
                let tag_at = buf.len() - TAG_LEN;
                let (inner, tag_out) = buf.split_at_mut(tag_at);
                let tag = sealer
                    .seal_in_place_separate_tag(
                        Nonce::assume_unique_for_key(nonce),
                        Aad::from(&aad),
                        inner,
                    )
                    .expect("seal");
                tag_out.copy_from_slice(tag.as_ref());
                if group == "seal+open" {
                    let nonce = Nonce::assume_unique_for_key(nonce);
                    opener
                        .open_in_place(nonce, Aad::from(&aad), black_box(&mut buf[..]))
                        .expect("open");
                }
            }),
        });
    }
    buf.clear();
}

fn ring_cases(cases: &mut Vec<Case>, payload: usize) {
    use ring::aead as rg;
    let key =
        || rg::LessSafeKey::new(rg::UnboundKey::new(&rg::AES_128_GCM, &KEY).expect("16-byte key"));
    let (sealer, opener) = (key(), key());
    record_cases(
        cases,
        "ring LessSafeKey, in place",
        payload,
        move |nonce, aad, buf| {
            let (inner, tag_out) = buf.split_at_mut(buf.len() - TAG_LEN);
            let nonce = rg::Nonce::assume_unique_for_key(*nonce);
            let tag = sealer.seal_in_place_separate_tag(nonce, rg::Aad::from(aad), inner);
            tag_out.copy_from_slice(tag.expect("seal").as_ref());
        },
        move |nonce, aad, buf| {
            let nonce = rg::Nonce::assume_unique_for_key(*nonce);
            opener
                .open_in_place(nonce, rg::Aad::from(aad), buf)
                .expect("open");
        },
    );
}

fn rustcrypto_cases(cases: &mut Vec<Case>, payload: usize) {
    let key = || aes_gcm::Aes128Gcm::new_from_slice(&KEY).expect("16-byte key");
    let (sealer, opener) = (key(), key());
    record_cases(
        cases,
        "RustCrypto aes-gcm 0.10, in place",
        payload,
        move |nonce, aad, buf| {
            let (inner, tag_out) = buf.split_at_mut(buf.len() - TAG_LEN);
            let tag = sealer
                .encrypt_in_place_detached(nonce.into(), aad, inner)
                .expect("seal");
            tag_out.copy_from_slice(&tag);
        },
        move |nonce, aad, buf| {
            let (inner, tag) = buf.split_at_mut(buf.len() - TAG_LEN);
            opener
                .decrypt_in_place_detached(nonce.into(), aad, inner, (&*tag).into())
                .expect("open");
        },
    );
}

fn smt_cipher() -> AesGcmCipher {
    AesGcmCipher::new(&TrafficKey::new(AeadAlgorithm::Aes128Gcm, &KEY, IV).expect("16-byte key"))
}

/// smt-crypto's `PacketCipher`, with the record nonce made from `SEQ`.
fn smt_cases(cases: &mut Vec<Case>, payload: usize) {
    let aad = header(payload);
    let (sealer, opener) = (smt_cipher(), smt_cipher());
    let mut buf = vec![0x42; payload + 1 + TAG_LEN];
    buf[payload] = 0x17;
    let mut pair_buf = buf.clone();
    let sealer = std::rc::Rc::new(sealer);
    let pair_sealer = sealer.clone();
    let name = format!("smt-crypto PacketCipher, {payload} B");
    cases.push(Case {
        group: "seal",
        name: name.clone(),
        calls: calls_for(payload),
        run: Box::new(move || {
            sealer
                .seal_in_place(SEQ, &aad, black_box(&mut buf))
                .expect("seal");
        }),
    });
    cases.push(Case {
        group: "seal+open",
        name,
        calls: calls_for(payload),
        run: Box::new(move || {
            pair_sealer
                .seal_in_place(SEQ, &aad, black_box(&mut pair_buf))
                .expect("seal");
            opener
                .open_in_place(SEQ, &aad, black_box(&mut pair_buf))
                .expect("open");
        }),
    });
}

/// smt-crypto's `seal_to` and `open_to`, as the endpoint calls them: the
/// data from one buffer, the content type (and any zero padding) from
/// another, into the packet; the sealed body from the packet into the
/// message. Each call reads and writes different buffers, so every call
/// sees the same input. With `pad` the record carries TLS 1.3 zero padding
/// (RFC 8446 §5.4) up to a multiple of 16 bytes of inner plaintext, which
/// spares the AES-GCM code its partial-block path.
fn smt_to_cases(cases: &mut Vec<Case>, payload: usize, pad: bool) {
    let inner = if pad {
        (payload + 1).next_multiple_of(16)
    } else {
        payload + 1
    };
    let tail = &CONTENT_TYPE_AND_ZEROS[..inner - payload];
    let aad = header(inner - 1);
    let cipher = std::rc::Rc::new(smt_cipher());
    let data = vec![0x42; payload];
    let mut out = vec![0; inner + TAG_LEN];
    cipher
        .seal_to(SEQ, &aad, &data, tail, &mut out)
        .expect("seal");
    let sealed = out.clone();
    let mut plain = vec![0; sealed.len()];
    let opener = cipher.clone();
    let within = cipher.clone();
    let padded = if pad {
        format!(", padded to {inner}")
    } else {
        String::new()
    };
    cases.push(Case {
        group: "seal",
        name: format!("smt-crypto PacketCipher::seal_to, {payload} B{padded}"),
        calls: calls_for(payload),
        run: Box::new(move || {
            cipher
                .seal_to(SEQ, &aad, black_box(&data), tail, &mut out)
                .expect("seal");
            black_box(&out);
        }),
    });
    // The record as it lies in a packet (header first), opened down over
    // its header: what a one-packet message takes. Each call copies the
    // record in first, so every call opens the same bytes.
    let mut record = aad.to_vec();
    record.extend_from_slice(&sealed);
    let mut work = record.clone();
    cases.push(Case {
        group: "open",
        name: format!("smt-crypto PacketCipher::open_within (copy in), {payload} B{padded}"),
        calls: calls_for(payload),
        run: Box::new(move || {
            work.copy_from_slice(black_box(&record));
            let n = within
                .open_within(SEQ, &aad, &mut work, RECORD_HEADER_LEN)
                .expect("open");
            black_box(&work[..n]);
        }),
    });
    cases.push(Case {
        group: "open",
        name: format!("smt-crypto PacketCipher::open_to, {payload} B{padded}"),
        calls: calls_for(payload),
        run: Box::new(move || {
            let n = opener
                .open_to(SEQ, &aad, black_box(&sealed), &mut plain)
                .expect("open");
            black_box(&plain[..n]);
        }),
    });
}

/// The two ways `AesGcmCipher` can seal and open a record from one buffer
/// into another: copy, then ring in place (`seal_raw`/`open_raw`); or
/// aws-lc in one pass (`seal_raw_to`/`open_raw_to`).
fn record_path_cases(cases: &mut Vec<Case>, payload: usize) {
    let aad = header(payload);
    let nonce = record_nonce(&IV, SEQ);
    let cipher = std::rc::Rc::new(smt_cipher());
    let data = vec![0x42; payload];
    let mut sealed = vec![0; payload + 1 + TAG_LEN];
    cipher
        .seal_raw_to(&nonce, &aad, &data, &[0x17], &mut sealed)
        .expect("seal");
    let sealed = std::rc::Rc::new(sealed);
    let calls = calls_for(payload);
    let mut push = |group: &'static str, how: &str, run: Call| {
        cases.push(Case {
            group,
            name: format!("record path: {how}, {payload} B"),
            calls,
            run,
        });
    };
    let (c, d, mut out) = (cipher.clone(), data.clone(), vec![0; sealed.len()]);
    push(
        "seal",
        "copy + ring in place",
        Box::new(move || {
            out[..payload].copy_from_slice(black_box(&d));
            out[payload] = 0x17;
            c.seal_raw(&nonce, &aad, &mut out).expect("seal");
            black_box(&out);
        }),
    );
    let (c, mut out) = (cipher.clone(), vec![0; sealed.len()]);
    push(
        "seal",
        "aws-lc one pass",
        Box::new(move || {
            c.seal_raw_to(&nonce, &aad, black_box(&data), &[0x17], &mut out)
                .expect("seal");
            black_box(&out);
        }),
    );
    let (c, s, mut out) = (cipher.clone(), sealed.clone(), vec![0; sealed.len()]);
    push(
        "open",
        "copy + ring in place",
        Box::new(move || {
            out.copy_from_slice(black_box(&s));
            black_box(c.open_raw(&nonce, &aad, &mut out).expect("open"));
        }),
    );
    let mut out = vec![0; sealed.len()];
    push(
        "open",
        "aws-lc one pass",
        Box::new(move || {
            let n = cipher
                .open_raw_to(&nonce, &aad, black_box(&sealed), &mut out)
                .expect("open");
            black_box(&out[..n]);
        }),
    );
}

fn mac_cases(cases: &mut Vec<Case>, what: &str, len: usize) {
    let packet: Vec<u8> = (0..len).map(|i| i as u8).collect();
    let calls = calls_for(len) * 2;
    let mut push = |name: &str, run: Call| {
        cases.push(Case {
            group: "control MAC",
            name: format!("{name}, {what} ({len} B)"),
            calls,
            run,
        });
    };
    let p = packet.clone();
    let key = hmac::Key::new(hmac::HMAC_SHA256, &[0x11; 32]);
    push(
        "v1 HMAC-SHA256/128, aws-lc-rs",
        Box::new(move || {
            black_box(hmac::sign(&key, black_box(&p)));
        }),
    );
    let p = packet.clone();
    let key = lc_cmac::Key::new(lc_cmac::AES_128, &KEY).expect("16-byte key");
    push(
        "AES-CMAC, aws-lc-rs cmac::sign",
        Box::new(move || {
            black_box(lc_cmac::sign(&key, black_box(&p)).expect("CMAC"));
        }),
    );
    let p = packet.clone();
    let gmac = aws_lc_key();
    push(
        "GMAC (GCM, empty plaintext), aws-lc-rs",
        Box::new(move || {
            let nonce = Nonce::assume_unique_for_key(IV);
            let tag = gmac.seal_in_place_separate_tag(nonce, Aad::from(black_box(&p)), &mut []);
            black_box(tag.expect("GMAC").as_ref()[0]);
        }),
    );
    let p = packet.clone();
    let cipher = smt_cipher();
    push(
        "v2 AES-CMAC, smt-crypto control_tag",
        Box::new(move || {
            black_box(cipher.control_tag(black_box(&p)));
        }),
    );
    let cipher = smt_cipher();
    let tag = cipher.control_tag(&packet);
    push(
        "v2 AES-CMAC, smt-crypto verify_control_tag",
        Box::new(move || {
            cipher
                .verify_control_tag(black_box(&packet), &tag)
                .expect("tag matches");
        }),
    );
}

fn all_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for payload in PAYLOADS {
        aws_lc_cases(&mut cases, payload);
        aws_lc_tls_cases(&mut cases, payload);
        ring_cases(&mut cases, payload);
        rustcrypto_cases(&mut cases, payload);
        smt_cases(&mut cases, payload);
        smt_to_cases(&mut cases, payload, false);
        // TLS 1.3's inner plaintext is at most 2^14 + 1 bytes: no room to
        // pad a full record.
        if (payload + 1).next_multiple_of(16) <= (1 << 14) + 1 {
            smt_to_cases(&mut cases, payload, true);
        }
    }
    for payload in [512, 1024, 1400, 2048, 4096, 8192, 16 * 1024] {
        record_path_cases(&mut cases, payload);
    }
    for (what, len) in CONTROL {
        mac_cases(&mut cases, what, len);
    }
    cases
}

/// The loop callgrind counts (`--toggle-collect=*measured_calls*`).
#[inline(never)]
fn measured_calls(run: &mut Call, calls: u32) {
    for _ in 0..calls {
        run();
    }
}

/// Best of `ROUNDS` rounds, ns per call.
fn ns_per_call(case: &mut Case) -> f64 {
    let calls = case.calls * 20;
    measured_calls(&mut case.run, calls / 10);
    (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            measured_calls(&mut case.run, calls);
            start.elapsed().as_nanos() as f64 / f64::from(calls)
        })
        .fold(f64::INFINITY, f64::min)
}

/// Instructions per call of case `index`, from a callgrind run of this
/// program counting only inside `measured_calls`.
fn instructions_per_call(index: usize, calls: u32) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = std::env::temp_dir().join(format!("aead_calls.{}.{index}.cg", std::process::id()));
    let status = Command::new("valgrind")
        .args(["--tool=callgrind", "--collect-atstart=no"])
        .arg("--toggle-collect=*measured_calls*")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(exe)
        .args(["--one", &index.to_string()])
        .output()
        .map_err(|e| format!("cannot run valgrind ({e}): apt-get install valgrind"))?;
    if !status.status.success() {
        return Err(String::from_utf8_lossy(&status.stderr).into_owned());
    }
    let text = std::fs::read_to_string(&out).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&out);
    let total: u64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or("no totals line in the callgrind output")?;
    Ok(total as f64 / f64::from(calls))
}

/// Bytes one key of each kind takes, inline and on the heap: the growth
/// of the resident set over 20 000 boxed keys (4 KiB pages: ±0.2 bytes a
/// key), after a first round that primes the allocator; all kept alive
/// to the end, so no measurement reuses another's freed memory.
fn memory() {
    fn resident_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }
    fn per_key<T>(name: &str, make: impl Fn() -> T) {
        const N: usize = 20_000;
        let mut keys: Vec<Box<T>> = Vec::with_capacity(N);
        keys.extend((0..N).map(|_| Box::new(make())));
        // Again, with the first round still alive (its growth includes the
        // allocator's start-up slack).
        let mut again: Vec<Box<T>> = Vec::with_capacity(N);
        let before = resident_kib() as f64;
        again.extend((0..N).map(|_| Box::new(make())));
        let grown = (resident_kib() as f64 - before) * 1024.0 / N as f64;
        let inline = std::mem::size_of::<T>();
        println!("{name:<54} {grown:>8.0} {inline:>8}");
        // Never freed, so no later measurement reuses this memory.
        std::mem::forget((keys, again));
    }
    println!("{:<54} {:>8} {:>8}", "bytes per key", "in all", "inline");
    per_key("aws-lc-rs LessSafeKey (AES-128-GCM)", aws_lc_key);
    per_key("ring LessSafeKey (AES-128-GCM)", || {
        ring::aead::LessSafeKey::new(
            ring::aead::UnboundKey::new(&ring::aead::AES_128_GCM, &KEY).expect("key"),
        )
    });
    per_key("RustCrypto Aes128Gcm", || {
        aes_gcm::Aes128Gcm::new_from_slice(&KEY).expect("key")
    });
    per_key("aws-lc-rs hmac::Key (control MAC v1)", || {
        hmac::Key::new(hmac::HMAC_SHA256, &[0x11; 32])
    });
    per_key("aws-lc-rs cmac::Key", || {
        lc_cmac::Key::new(lc_cmac::AES_128, &KEY).expect("key")
    });
    per_key("RustCrypto aes::Aes128Enc (control MAC v2)", || {
        aes::Aes128Enc::new_from_slice(&KEY).expect("key")
    });
    per_key(
        "smt-crypto AesGcmCipher (AES-128, one direction)",
        smt_cipher,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut cases = all_cases();
    match args.first().map(String::as_str) {
        Some("--one") => {
            let index: usize = args[1].parse().expect("a case index");
            let case = &mut cases[index];
            measured_calls(&mut case.run, case.calls);
        }
        Some("--memory") => memory(),
        Some("--instructions") => {
            let only = args.get(1).map_or("", String::as_str);
            println!("instructions per call (callgrind), AES-128");
            println!("{:<12} {:<62} {:>9}", "", "", "instr");
            for (index, case) in cases.iter().enumerate() {
                if !case.name.contains(only) {
                    continue;
                }
                let figure = match instructions_per_call(index, case.calls) {
                    Ok(n) => format!("{n:>9.0}"),
                    Err(e) => format!("failed: {e}"),
                };
                println!("{:<12} {:<62} {figure}", case.group, case.name);
            }
        }
        only => {
            let only = only.unwrap_or("");
            println!("ns per call (best of {ROUNDS} rounds), AES-128");
            println!("{:<12} {:<62} {:>9}", "", "", "ns");
            for case in cases.iter_mut().filter(|c| c.name.contains(only)) {
                let ns = ns_per_call(case);
                println!("{:<12} {:<62} {ns:>9.1}", case.group, case.name);
            }
        }
    }
}
