//! What record protection alone costs per small RPC, for SMT (every
//! message its own record) and for pipelined TLS with coalesced writes
//! (one record carries a whole batch of requests), and the RPC rate per
//! core that cost allows. AES-128-GCM and the control-packet MAC
//! (AES-CMAC), through the `PacketCipher` SMT's endpoint uses.
//!
//! ```sh
//! cargo run --release -p smt-bench --example aead_cost
//! ```
//!
//! Instructions per call (callgrind), and each AES-GCM implementation and
//! control MAC on offer side by side: smt-crypto's `aead_calls` example.
//!
//! Each figure is the best of several rounds (the machine is shared), in
//! ns per call.

use std::hint::black_box;
use std::time::Instant;

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt_proto::crypto::{PacketCipher, RECORD_HEADER_LEN, TAG_LEN};

const ROUNDS: usize = 21;

/// A composite sequence number: message 0x1234, record 0.
const SEQ: u64 = 0x1234 << 16;

/// The 4-byte length prefix each request carries inside a TLS stream.
const FRAME_HEADER: usize = 4;

/// ACKs are delayed: one ACK carries up to this many message IDs.
const ACK_MAX_IDS: usize = 16;

/// An ACK packet with `ids` message IDs: 32 bytes of header and count,
/// 8 per ID (docs/protocol.md, ACK).
fn ack_len(ids: usize) -> usize {
    32 + 8 * ids
}

/// Best of `ROUNDS` rounds of `iters` calls of `f`, in ns per call.
fn best_ns(iters: u32, mut f: impl FnMut()) -> f64 {
    (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iters {
                f();
            }
            start.elapsed().as_nanos() as f64 / f64::from(iters)
        })
        .fold(f64::INFINITY, f64::min)
}

/// Iterations per round: about the same time for every size.
fn iters_for(payload: usize) -> u32 {
    (4_000_000 / (payload + 256)).clamp(2_000, 200_000) as u32
}

/// (seal, open) of one record with `payload` plaintext bytes, ns, through
/// the calls the endpoint makes: `seal_to` from the caller's data into
/// the wire buffer, `open_to` from the wire buffer into the message's.
fn record_cost(cipher: &dyn PacketCipher, rx: &dyn PacketCipher, payload: usize) -> (f64, f64) {
    let data = vec![0x42; payload];
    let body_len = payload + 1 + TAG_LEN;
    let mut sealed = vec![0; body_len];
    let mut opened = vec![0; body_len];
    let [hi, lo] = (body_len as u16).to_be_bytes();
    let header: [u8; RECORD_HEADER_LEN] = [0x17, 0x03, 0x03, hi, lo];
    let iters = iters_for(payload);
    let seal = best_ns(iters, || {
        let r = cipher.seal_to(black_box(SEQ), &header, &data, &[0x17], &mut sealed);
        black_box(r).expect("sealing succeeds");
    });
    let open = best_ns(iters, || {
        let r = rx.open_to(black_box(SEQ), &header, black_box(&sealed), &mut opened);
        assert_eq!(black_box(r), Ok(payload + 1));
    });
    (seal, open)
}

/// (tag, verify) of one control packet of `len` bytes, ns.
fn mac_cost(tx: &dyn PacketCipher, rx: &dyn PacketCipher, len: usize) -> (f64, f64) {
    let packet = vec![0x5a; len];
    let tag = tx.control_tag(&packet);
    let iters = iters_for(len);
    let sign = best_ns(iters, || {
        black_box(tx.control_tag(black_box(&packet)));
    });
    let verify = best_ns(iters, || {
        let ok = rx.verify_control_tag(black_box(&packet), &tag);
        black_box(ok).expect("tag matches");
    });
    (sign, verify)
}

fn main() {
    let (client, server) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    let cipher = &*client.tx;
    println!(
        "AES-128-GCM (ring in place below 1 KiB, aws-lc-rs above) and AES-CMAC (RustCrypto), {}",
        smt_bench::sys::cpu_model()
    );
    println!("\nns per call (best of {ROUNDS} rounds):");
    println!("{:<34} {:>9} {:>9}", "record payload", "seal", "open");
    let mut cost = std::collections::HashMap::new();
    for payload in [
        64,
        1024,
        32 * (64 + FRAME_HEADER),
        150 * (64 + FRAME_HEADER),
        16 << 10,
    ] {
        let (s, o) = record_cost(cipher, &*server.rx, payload);
        println!("{:<34} {s:>9.1} {o:>9.1}", format!("{payload} B"));
        cost.insert(payload, s + o);
    }
    println!("{:<34} {:>9} {:>9}", "control packet", "tag", "verify");
    let mut macs = Vec::new();
    for (name, len) in [("ACK, 1 ID", ack_len(1)), ("ACK, 16 IDs", ack_len(16))] {
        let (t, v) = mac_cost(cipher, &*server.rx, len);
        println!("{:<34} {t:>9.1} {v:>9.1}", format!("{name} ({len} B)"));
        macs.push(t + v);
    }

    // SMT: request and response each sealed once and opened once, plus
    // the ACK's MAC (tag + verify), one ACK per RPC at worst, one per
    // 16 RPCs when delayed ACKs fill up. Small messages need no GRANT.
    println!("\nrecord protection per RPC (both sides) and the RPC/s it allows one core:");
    for size in [64, 1024] {
        let aead = 2.0 * cost[&size];
        let one_ack = aead + macs[0];
        let batched_acks = aead + macs[1] / ACK_MAX_IDS as f64;
        println!(
            "  SMT {size:>4} B, ACK per RPC:      {one_ack:>7.1} ns  {:>6.2} M RPC/s",
            1e3 / one_ack
        );
        println!(
            "  SMT {size:>4} B, ACK per 16 RPCs:  {batched_acks:>7.1} ns  {:>6.2} M RPC/s",
            1e3 / batched_acks
        );
    }
    // Coalesced TLS: a batch of C requests is one record each way (at
    // most 16 KiB each: 150 x 68 B fits), so C RPCs share two seals and
    // two opens.
    for c in [32, 150] {
        let batch = c * (64 + FRAME_HEADER);
        let per_rpc = 2.0 * cost[&batch] / c as f64;
        println!(
            "  TLS 64 B, coalesced, {c:>3} per record: {per_rpc:>5.1} ns  {:>6.2} M RPC/s",
            1e3 / per_rpc
        );
    }
}
