//! The receive engine against SMT-shaped traffic (seed 003's RX path):
//! packets in order are decrypted and marked; a gap or a reordering makes
//! the context hand packets up as they came until a packet starts with a
//! record header, which it asks the host about; the host's confirmation
//! puts it back in sync from the next whole record. Every packet handed
//! up is either exactly the plaintext (when marked) or exactly what came
//! off the wire (when not): never a mix.

use crate::common;

use common::{key, software, software_seal};
use smt_offload::stream::{smt_segments, smt_seq};
use smt_offload::{
    CipherSuite, CryptoInfo, RxContextId, RxEngine, SplitMix64, StreamPos, HEADER_LEN, TAG_LEN,
};

const MSS: usize = 1428;
const CTX: RxContextId = RxContextId(0);

/// One message as a sender puts it on the wire, and what a receive
/// engine should hand up for each byte when it decrypts.
struct Message {
    id: u64,
    /// Wire bytes (sealed records).
    wire: Vec<u8>,
    /// The same bytes with record bodies decrypted (headers and tags as
    /// on the wire).
    plain: Vec<u8>,
    /// (wire offset, length) of each packet, segment by segment: the MSS
    /// grid restarts at every segment, as SMT cuts it.
    packets: Vec<(usize, usize)>,
    /// Wire offset of each record's first byte.
    records: Vec<usize>,
}

fn message(info: &CryptoInfo, id: u64, len: usize, record_size: usize) -> Message {
    let mut data = vec![0; len];
    SplitMix64::new(id).fill(&mut data);
    let segments = smt_segments(&data, record_size);
    let mut posted = Vec::new();
    let mut packets = Vec::new();
    for s in &segments {
        let start = posted.len();
        posted.extend_from_slice(&s.payload);
        let mut at = start;
        while at < posted.len() {
            let n = MSS.min(posted.len() - at);
            packets.push((at, n));
            at += n;
        }
    }
    let wire = software_seal(&software(info), info.iv(), smt_seq(id, 0), &posted);
    let mut plain = posted;
    let mut records = Vec::new();
    let mut at = 0;
    while at < plain.len() {
        records.push(at);
        let end = at + HEADER_LEN + common::body_len(&plain[at..]);
        plain[end - TAG_LEN..end].copy_from_slice(&wire[end - TAG_LEN..end]);
        at = end;
    }
    Message {
        id,
        wire,
        plain,
        packets,
        records,
    }
}

impl Message {
    fn at(&self, packet: usize) -> StreamPos {
        StreamPos {
            stream: self.id,
            pos: self.packets[packet].0 as u64,
        }
    }

    fn packet(&self, packet: usize) -> Vec<u8> {
        let (at, n) = self.packets[packet];
        self.wire[at..at + n].to_vec()
    }

    /// The index of the record starting at wire offset `pos`.
    fn record_at(&self, pos: u64) -> Option<u64> {
        let i = self.records.iter().position(|&r| r as u64 == pos)?;
        Some(i as u64)
    }

    /// Checks what the engine handed up for packet `packet`.
    fn check(&self, packet: usize, bytes: &[u8], decrypted: bool) {
        let (at, n) = self.packets[packet];
        let expected = match decrypted {
            true => &self.plain[at..at + n],
            false => &self.wire[at..at + n],
        };
        assert_eq!(bytes, expected, "packet {packet} (decrypted: {decrypted})");
    }
}

/// A host that answers resync requests as SMT's core does: the record at
/// a position it knows.
fn deliver(rx: &mut RxEngine, m: &Message, order: &[usize]) -> Vec<bool> {
    let mut marks = vec![false; m.packets.len()];
    for &p in order {
        let mut bytes = m.packet(p);
        let verdict = rx.receive(CTX, m.at(p), &mut bytes);
        m.check(p, &bytes, verdict.decrypted);
        marks[p] = verdict.decrypted;
        if let Some(from) = verdict.resync_request {
            match m.record_at(from.pos) {
                Some(index) => {
                    rx.confirm(CTX, from, smt_seq(m.id, index as u16));
                }
                None => rx.abandon(CTX, from),
            }
        }
    }
    marks
}

fn engine(info: &CryptoInfo, at: Option<StreamPos>) -> RxEngine {
    let mut rx = RxEngine::new(8);
    rx.create(CTX, info, at).unwrap();
    rx
}

#[test]
fn packets_in_order_are_all_decrypted() {
    let info = key(CipherSuite::Aes128Gcm, 1, smt_seq(6, 0));
    for (len, rs) in [(0, 16384), (100, 16384), (200_000, 16384), (50_000, 1000)] {
        let m = message(&info, 6, len, rs);
        let mut rx = engine(&info, Some(m.at(0)));
        let all: Vec<usize> = (0..m.packets.len()).collect();
        let marks = deliver(&mut rx, &m, &all);
        assert!(marks.iter().all(|&d| d), "len {len}");
        let c = rx.counters();
        assert_eq!(c.rx_tls_decrypted_packets, m.packets.len() as u64);
        assert_eq!(c.rx_tls_decrypted_bytes, m.wire.len() as u64);
        assert_eq!(c.rx_tls_err + c.rx_tls_ooo, 0);
    }
}

/// A lost packet: the rest of its record, and the packets until one starts
/// with a record header, come up as they were sent; the header found is
/// confirmed and decryption resumes with the record after it (the one it
/// starts was partly missed); the retransmission, arriving late, is a copy
/// of passed bytes and comes up untouched.
#[test]
fn a_lost_packet_costs_the_records_until_a_confirmed_header() {
    let info = key(CipherSuite::Aes256Gcm, 2, smt_seq(8, 0));
    let m = message(&info, 8, 300_000, 16384);
    let mut rx = engine(&info, Some(m.at(0)));
    let lost = 20;
    let mut order: Vec<usize> = (0..m.packets.len()).filter(|&p| p != lost).collect();
    order.push(lost);
    let marks = deliver(&mut rx, &m, &order);
    assert!(marks[..lost].iter().all(|&d| d));
    assert!(!marks[lost]);
    let resumed = marks.iter().skip(lost).position(|&d| d).unwrap() + lost;
    assert!(marks[resumed..].iter().all(|&d| d), "in sync to the end");
    let c = rx.counters();
    assert_eq!(c.rx_tls_ooo, 1, "{c}");
    assert_eq!(c.rx_tls_resync_req_pkt, 1, "{c}");
    assert_eq!(c.rx_tls_resync_res_ok, 1, "{c}");
    // The header found starts a segment (the first packet after the gap
    // that starts with one): within one segment's worth of packets.
    assert!(resumed - lost <= 2 * 65536 / MSS, "resumed at {resumed}");
    println!("rx loss: packet {lost} lost, resumed at packet {resumed}\n{c}");
}

/// Two packets swapped: the later one breaks the order, the earlier one
/// then finds no context expecting it; the host's confirmation of the next
/// segment start puts the context back.
#[test]
fn reordered_packets_fall_back_then_resync() {
    let info = key(CipherSuite::Aes128Gcm, 3, smt_seq(10, 0));
    let m = message(&info, 10, 400_000, 16384);
    let mut rx = engine(&info, Some(m.at(0)));
    let mut order: Vec<usize> = (0..m.packets.len()).collect();
    order.swap(30, 31);
    let marks = deliver(&mut rx, &m, &order);
    assert!(marks[..30].iter().all(|&d| d));
    assert!(!marks[30] && !marks[31]);
    assert!(*marks.last().unwrap(), "back in sync by the end");
    assert_eq!(rx.counters().rx_tls_resync_res_ok, 1);
}

/// A context created without a position finds its place at the first
/// record header it sees (a message's first packet) and asks; one stream
/// after another, each new stream is a resync.
#[test]
fn streams_one_after_another_resync_at_each_start() {
    let info = key(CipherSuite::Aes128Gcm, 4, 0);
    let mut rx = engine(&info, None);
    let mut decrypted = 0;
    for id in [2u64, 4, 6] {
        // Each message's key material is the same flow's: one context.
        let m = message(&info.starting_at(smt_seq(id, 0)), id, 100_000, 16384);
        let all: Vec<usize> = (0..m.packets.len()).collect();
        let marks = deliver(&mut rx, &m, &all);
        assert!(!marks[0], "the first packet raised the request");
        assert!(
            marks.iter().skip(12).all(|&d| d),
            "after record 0: {marks:?}"
        );
        decrypted += marks.iter().filter(|&&d| d).count();
    }
    let c = rx.counters();
    assert_eq!((c.rx_tls_resync_req_pkt, c.rx_tls_resync_res_ok), (3, 3));
    assert_eq!(c.rx_tls_decrypted_packets, decrypted as u64);
}

/// Two streams interleaved packet by packet on one context (two messages
/// from one peer at once): every switch loses sync, and nothing handed up
/// is ever half decrypted.
#[test]
fn interleaved_streams_never_hand_up_a_mix() {
    let info = key(CipherSuite::Aes128Gcm, 5, 0);
    let mut rx = engine(&info, None);
    let a = message(&info, 20, 80_000, 16384);
    let b = message(&info, 22, 80_000, 1000);
    let mut rng = SplitMix64::new(5);
    let (mut i, mut j) = (0, 0);
    while i < a.packets.len() || j < b.packets.len() {
        let pick_a = j == b.packets.len() || (i < a.packets.len() && rng.below(4) != 0);
        let (m, p) = match pick_a {
            true => (&a, &mut i),
            false => (&b, &mut j),
        };
        deliver(&mut rx, m, &[*p]);
        *p += 1;
    }
    assert!(rx.counters().rx_tls_ooo > 0);
}

/// A confirmation that comes after the context moved on is refused.
#[test]
fn a_late_confirmation_is_skipped() {
    let info = key(CipherSuite::Aes128Gcm, 6, 0);
    let mut rx = engine(&info, None);
    let m = message(&info, 30, 20_000, 16384);
    let mut first = m.packet(0);
    let request = rx.receive(CTX, m.at(0), &mut first).resync_request;
    assert_eq!(request, Some(m.at(0)));
    let other = message(&info, 32, 100, 16384);
    let mut p = other.packet(0);
    rx.receive(CTX, other.at(0), &mut p);
    assert!(!rx.confirm(CTX, m.at(0), smt_seq(30, 0)));
    let c = rx.counters();
    assert_eq!((c.rx_tls_resync_res_skip, c.rx_tls_resync_req_skip), (1, 1));
}
