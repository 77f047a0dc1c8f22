//! The engine's wire bytes against software sealing (smt-crypto, the code
//! SMT seals records with today), byte for byte:
//!
//! - SMT-shaped messages (whole records per segment, per-message sequence
//!   spaces, a resync per message) of random sizes and record sizes;
//! - a TLS byte stream cut into segments at arbitrary points, so records
//!   span segments and headers and tags are split;
//! - retransmitted packets that start anywhere in a record, after a resync
//!   that replays the record's start.

use crate::common;

use std::collections::HashMap;

use common::{key, software, software_seal};
use smt_offload::stream::{smt_segments, smt_seq, PlainSegment};
use smt_offload::{
    plaintext_record, CipherSuite, ContextId, ContextPlanner, Engine, EngineConfig, FlowKey,
    QueueId, Resync, RoundRobin, Segment, SplitMix64, TxDescriptor, HEADER_LEN,
};

const MSS: u16 = 1428;

fn engine(queues: u16) -> Engine {
    Engine::new(EngineConfig {
        queues,
        context_capacity: 1024,
    })
}

fn random_suite(rng: &mut SplitMix64) -> CipherSuite {
    if rng.below(2) == 0 {
        CipherSuite::Aes128Gcm
    } else {
        CipherSuite::Aes256Gcm
    }
}

/// A message length: mostly small, sometimes several segments, with the
/// layout's edges (0, one record exactly, one segment exactly) mixed in.
fn message_len(rng: &mut SplitMix64, record_size: usize) -> usize {
    // At most 4096 records: far inside the 16 index bits.
    let cap = record_size * 4096;
    let len = match rng.below(6) {
        0 => 0,
        1 => record_size,
        2 => 3 * record_size,
        3 => rng.below(200_000) as usize,
        _ => rng.below(4096) as usize,
    };
    len.min(cap)
}

#[test]
fn smt_messages_equal_software_sealing() {
    let mut rng = SplitMix64::new(0xd1ff);
    for round in 0..40 {
        let suite = random_suite(&mut rng);
        let info = key(suite, round, 0);
        let record_size = 1 + rng.below(16384) as usize;
        let mut planner = ContextPlanner::new(2, 8);
        let mut engine = engine(2);
        let mut sent: HashMap<Vec<u8>, (u64, Vec<u8>)> = HashMap::new();
        for id in 1..=12u64 {
            let mut data = vec![0; message_len(&mut rng, record_size)];
            rng.fill(&mut data);
            let queue = QueueId(rng.below(2) as u16);
            let flow = FlowKey {
                queue,
                peer: 0,
                epoch: 0,
            };
            let mut out = Vec::new();
            let ctx = planner.prepare(flow, &info, smt_seq(id, 0), &mut out);
            for (s, segment) in smt_segments(&data, record_size).into_iter().enumerate() {
                let header = common::segment_header(id as u32, s as u32);
                let seq = smt_seq(id, segment.first_record);
                sent.insert(header.clone(), (seq, segment.payload.clone()));
                out.push(desc(ctx, header, segment));
            }
            for d in out {
                engine.post(queue, d).unwrap();
            }
        }
        engine.run(&mut RoundRobin::default());
        assert_eq!(engine.counters().drops(), 0);
        let cipher = software(&info);
        let wire = common::wire(&mut engine);
        assert_eq!(wire.len(), sent.len());
        for segment in wire {
            let (seq, plain) = &sent[&segment.header];
            let expected = software_seal(&cipher, info.iv(), *seq, plain);
            assert_eq!(segment.payload, expected, "round {round}");
        }
    }
}

fn desc(ctx: ContextId, header: Vec<u8>, segment: PlainSegment) -> TxDescriptor {
    TxDescriptor::Segment(Segment {
        ctx,
        header,
        payload: segment.payload,
        mss: MSS,
    })
}

/// A TLS byte stream of records of random sizes.
fn record_stream(rng: &mut SplitMix64, records: usize) -> Vec<u8> {
    let mut stream = Vec::new();
    for _ in 0..records {
        let mut data = vec![0; rng.below(3 * 16384 / 2) as usize % 16385];
        rng.fill(&mut data);
        plaintext_record(&data, &mut stream).unwrap();
    }
    stream
}

/// Cut points: mostly arbitrary, sometimes a few bytes apart so headers
/// and tags are split, never more than 64 KiB apart.
fn cuts(rng: &mut SplitMix64, len: usize) -> Vec<usize> {
    let mut at = 0;
    let mut cuts = Vec::new();
    while at < len {
        let step = match rng.below(4) {
            0 => 1 + rng.below(7) as usize,
            _ => 1 + rng.below(65536) as usize,
        };
        at = (at + step).min(len);
        cuts.push(at);
    }
    cuts
}

#[test]
fn byte_stream_cut_anywhere_equals_software_sealing() {
    let mut rng = SplitMix64::new(0x5e9);
    for round in 0..30 {
        let info = key(random_suite(&mut rng), 100 + round, 1000 * round);
        let stream = record_stream(&mut rng, 12);
        let mut engine = engine(1);
        let create = TxDescriptor::CreateContext {
            ctx: ContextId(0),
            info: Box::new(info.clone()),
        };
        engine.post(QueueId(0), create).unwrap();
        let mut from = 0;
        for to in cuts(&mut rng, stream.len()) {
            let piece = PlainSegment {
                first_record: 0,
                records: 0,
                payload: stream[from..to].to_vec(),
            };
            engine
                .post(QueueId(0), desc(ContextId(0), Vec::new(), piece))
                .unwrap();
            from = to;
        }
        engine.drain(QueueId(0));
        assert_eq!(engine.counters().drops(), 0);
        let sent: Vec<u8> = common::wire(&mut engine)
            .into_iter()
            .flat_map(|s| s.payload)
            .collect();
        let expected = software_seal(&software(&info), info.iv(), info.rec_seq(), &stream);
        assert_eq!(sent, expected, "round {round}");
    }
}

/// Where wire offset `at` falls: (record index, record start).
fn record_at(stream: &[u8], at: usize) -> (u64, usize) {
    let (mut index, mut start) = (0, 0);
    loop {
        let end = start + HEADER_LEN + common::body_len(&stream[start..]);
        if at < end {
            return (index, start);
        }
        index += 1;
        start = end;
    }
}

#[test]
fn retransmitted_packets_equal_the_originals() {
    let mut rng = SplitMix64::new(0x7e7);
    let info = key(CipherSuite::Aes128Gcm, 9, 0);
    let id = 0x1234;
    let mut data = vec![0; 150_000];
    rng.fill(&mut data);
    let segments = smt_segments(&data, 16384);
    let plain: Vec<u8> = segments.iter().flat_map(|s| s.payload.clone()).collect();
    let sealed = software_seal(&software(&info), info.iv(), smt_seq(id, 0), &plain);
    let mut engine = engine(1);
    let create = TxDescriptor::CreateContext {
        ctx: ContextId(0),
        info: Box::new(info.clone()),
    };
    engine.post(QueueId(0), create).unwrap();
    for _ in 0..200 {
        // A packet of the message as SMT cut it: the MSS grid restarts at
        // every segment, but any range proves the point.
        let start = rng.below(plain.len() as u64) as usize;
        let end = (start + 1 + rng.below(u64::from(MSS)) as usize).min(plain.len());
        let (index, record_start) = record_at(&plain, start);
        let resync = Resync {
            ctx: ContextId(0),
            record_seq: smt_seq(id, index as u16),
            offset: start - record_start,
            record_prefix: plain[record_start..start].to_vec(),
        };
        engine
            .post(QueueId(0), TxDescriptor::Resync(resync))
            .unwrap();
        let piece = PlainSegment {
            first_record: 0,
            records: 0,
            payload: plain[start..end].to_vec(),
        };
        engine
            .post(QueueId(0), desc(ContextId(0), Vec::new(), piece))
            .unwrap();
        engine.drain(QueueId(0));
        let out = engine.poll_wire().expect("the packet went out");
        assert_eq!(out.payload, sealed[start..end], "bytes {start}..{end}");
    }
    let counters = engine.counters();
    assert_eq!(counters.drops(), 0);
    assert_eq!(counters.tx_tls_ooo, 200);
    println!("retransmissions: {counters}");
}
