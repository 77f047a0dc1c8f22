//! Seed 001 §3.2's failure case, reproduced and counted, and SMT's fix
//! (§4.4.2) on the same interleavings.
//!
//! The same messages (same plaintext, same segments) go out of two
//! transmit queues, message `i` on queue `i % 2`, read by the NIC in every
//! possible interleaving (small cases, [`Exhaustive`]) or in seeded random
//! ones:
//!
//! - **TCP-like**: one context for the 5-tuple, records numbered in one
//!   stream in message order, a resync prepended to every segment.
//! - **SMT**: one context per queue for the peer (and key epoch), records
//!   numbered `message_id << 16 | index`, a resync before each message's
//!   first segment.
//!
//! Contexts are created before the interleaving starts, so both schemes
//! put the same number of descriptors in each queue when messages are one
//! segment long, and the exhaustive runs are literally the same schedules.
//! A receiver opens every record under the sequence number it expects; a
//! record that does not authenticate, or never left the NIC, is a failure.
//! The counts go to stderr (and `docs/offload.md`).

use crate::common;

use std::collections::HashMap;
use std::io::Write;

use common::{key, receive, record_data, segment_header, software, Expected, Verdict};
use smt_offload::stream::{smt_segments, smt_seq, PlainSegment};
use smt_offload::{
    CipherSuite, ContextId, ContextPlanner, CryptoInfo, Engine, EngineConfig, Exhaustive, FlowKey,
    QueueId, Scheduler, SeededRandom, Segment, SplitMix64, TcpLikeSender, TxDescriptor,
};

const MSS: u16 = 1428;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scheme {
    TcpLike,
    Smt,
}

/// One message: its queue and its segments of whole plaintext records.
#[derive(Clone)]
struct Message {
    queue: QueueId,
    segments: Vec<PlainSegment>,
}

/// Messages with `segments` segments each of 1 to `max_records` records
/// of up to `max_record` bytes, alternating between `queues` queues.
fn messages(
    seed: u64,
    count: usize,
    queues: u16,
    segments: (usize, usize),
    max_record: usize,
) -> Vec<Message> {
    let mut rng = SplitMix64::new(seed);
    (0..count)
        .map(|i| {
            let n = segments.0 + rng.below((segments.1 - segments.0 + 1) as u64) as usize;
            // Records per segment: whole records, 1 to 3 of them, so a
            // message of n segments has n * records_per_segment records.
            let record = 1 + rng.below(max_record as u64) as usize;
            let per_segment = 1 + rng.below(3) as usize;
            let mut data = vec![0; record * per_segment * n];
            rng.fill(&mut data);
            let segs = smt_segments(&data, record)
                .into_iter()
                .flat_map(|s| split_records(s, per_segment))
                .collect();
            Message {
                queue: QueueId((i % usize::from(queues)) as u16),
                segments: segs,
            }
        })
        .collect()
}

/// Regroups a segment's records `per` to a segment (smt_segments packs as
/// many as fit in 64 KiB; the failure case wants several small segments).
fn split_records(segment: PlainSegment, per: usize) -> Vec<PlainSegment> {
    let datas = record_data(&segment);
    datas
        .chunks(per)
        .enumerate()
        .map(|(k, chunk)| {
            let mut payload = Vec::new();
            for d in chunk {
                smt_offload::plaintext_record(d, &mut payload).unwrap();
            }
            PlainSegment {
                first_record: segment.first_record + (k * per) as u16,
                records: chunk.len() as u16,
                payload,
            }
        })
        .collect()
}

/// Everything one run needs: set-up descriptors (drained before the
/// interleaving), the queues' contents, and what the receiver expects.
struct Run {
    setup: Vec<(QueueId, TxDescriptor)>,
    queues: Vec<(QueueId, TxDescriptor)>,
    expected: HashMap<Vec<u8>, Expected>,
}

fn build(scheme: Scheme, info: &CryptoInfo, msgs: &[Message], queues: u16) -> Run {
    match scheme {
        Scheme::TcpLike => build_tcp_like(info, msgs),
        Scheme::Smt => build_smt(info, msgs, queues),
    }
}

fn build_tcp_like(info: &CryptoInfo, msgs: &[Message]) -> Run {
    let mut sender = TcpLikeSender::new(ContextId(0));
    let setup = vec![(QueueId(0), sender.create(info))];
    let mut queues = Vec::new();
    let mut expected = HashMap::new();
    for (i, m) in msgs.iter().enumerate() {
        for (s, segment) in m.segments.iter().enumerate() {
            let header = segment_header(i as u32, s as u32);
            let data = record_data(segment);
            let mut out = Vec::new();
            let first = sender.segment(segment.clone(), header.clone(), MSS, &mut out);
            let records = (first..).zip(data).collect();
            expected.insert(header, Expected { records });
            queues.extend(out.into_iter().map(|d| (m.queue, d)));
        }
    }
    Run {
        setup,
        queues,
        expected,
    }
}

fn build_smt(info: &CryptoInfo, msgs: &[Message], queues: u16) -> Run {
    let mut planner = ContextPlanner::new(queues, 64);
    let flow = |queue| FlowKey {
        queue,
        peer: 0,
        epoch: 0,
    };
    let mut setup = Vec::new();
    for q in 0..queues {
        let mut out = Vec::new();
        planner.prepare(flow(QueueId(q)), info, 0, &mut out);
        setup.extend(out.into_iter().map(|d| (QueueId(q), d)));
    }
    let mut run_queues = Vec::new();
    let mut expected = HashMap::new();
    for (i, m) in msgs.iter().enumerate() {
        let id = i as u64 + 1;
        let mut out = Vec::new();
        let ctx = planner.prepare(flow(m.queue), info, smt_seq(id, 0), &mut out);
        for (s, segment) in m.segments.iter().enumerate() {
            let header = segment_header(i as u32, s as u32);
            let first = smt_seq(id, segment.first_record);
            let records = (first..).zip(record_data(segment)).collect();
            expected.insert(header.clone(), Expected { records });
            out.push(TxDescriptor::Segment(Segment {
                ctx,
                header,
                payload: segment.payload.clone(),
                mss: MSS,
            }));
        }
        run_queues.extend(out.into_iter().map(|d| (m.queue, d)));
    }
    Run {
        setup,
        queues: run_queues,
        expected,
    }
}

/// Runs `run` through a fresh engine under `scheduler`; returns the
/// receiver's verdict.
fn execute(run: Run, queues: u16, info: &CryptoInfo, scheduler: &mut dyn Scheduler) -> Verdict {
    let mut engine = Engine::new(EngineConfig {
        queues,
        context_capacity: 64,
    });
    for (q, d) in run.setup {
        engine.post(q, d).unwrap();
        engine.drain(q);
    }
    for (q, d) in run.queues {
        engine.post(q, d).unwrap();
    }
    engine.run(scheduler);
    let wire = common::wire(&mut engine);
    receive(&software(info), info.iv(), &run.expected, &wire)
}

/// Totals over many runs of one scheme.
#[derive(Debug, Default)]
struct Tally {
    runs: u64,
    records: u64,
    failed: u64,
    missing: u64,
    runs_with_failure: u64,
}

impl Tally {
    fn add(&mut self, v: Verdict) {
        self.runs += 1;
        self.records += v.ok + v.bad();
        self.failed += v.failed;
        self.missing += v.missing;
        self.runs_with_failure += u64::from(v.bad() > 0);
    }

    fn bad(&self) -> u64 {
        self.failed + self.missing
    }
}

fn report(case: &str, scheme: Scheme, t: &Tally) {
    let _ = writeln!(
        std::io::stderr(),
        "failure_case: {case}: {scheme:?}: {} interleavings, {} of {} records failed \
         ({} not authenticated, {} never sent), {} interleavings with a failure",
        t.runs,
        t.bad(),
        t.records,
        t.failed,
        t.missing,
        t.runs_with_failure
    );
}

/// Every interleaving of two queues of `per_queue` one-segment messages.
fn exhaustive(scheme: Scheme, per_queue: usize) -> Tally {
    let info = key(CipherSuite::Aes128Gcm, 0xfa11, 0);
    let msgs = messages(per_queue as u64, 2 * per_queue, 2, (1, 1), 300);
    let mut explorer = Exhaustive::new();
    let mut tally = Tally::default();
    while explorer.next_schedule() {
        let run = build(scheme, &info, &msgs, 2);
        tally.add(execute(run, 2, &info, &mut explorer));
    }
    tally
}

#[test]
fn exhaustive_two_queues_tcp_like_fails_smt_does_not() {
    for per_queue in 1..=4 {
        let case = format!("exhaustive, 2 queues, {per_queue} one-segment messages each");
        let tcp = exhaustive(Scheme::TcpLike, per_queue);
        let smt = exhaustive(Scheme::Smt, per_queue);
        report(&case, Scheme::TcpLike, &tcp);
        report(&case, Scheme::Smt, &smt);
        assert_eq!(tcp.runs, smt.runs, "the same interleavings");
        assert!(tcp.bad() > 0, "{case}: TCP-like never failed");
        assert_eq!(smt.bad(), 0, "{case}: SMT failed");
    }
}

/// Seeded random interleavings of longer messages (1 to 3 segments of 1
/// to 3 records each) on `queues` queues.
fn seeded(scheme: Scheme, queues: u16, seeds: u64) -> Tally {
    let info = key(CipherSuite::Aes256Gcm, 0x5eed, 0);
    let mut tally = Tally::default();
    for seed in 0..seeds {
        let msgs = messages(seed, 16, queues, (1, 3), 2000);
        let run = build(scheme, &info, &msgs, queues);
        tally.add(execute(run, queues, &info, &mut SeededRandom::new(seed)));
    }
    tally
}

#[test]
fn seeded_interleavings_tcp_like_fails_smt_does_not() {
    for queues in [2, 4] {
        let case = format!("seeded, 16 messages of 1-3 segments over {queues} queues");
        let tcp = seeded(Scheme::TcpLike, queues, 500);
        let smt = seeded(Scheme::Smt, queues, 500);
        report(&case, Scheme::TcpLike, &tcp);
        report(&case, Scheme::Smt, &smt);
        assert!(tcp.bad() > 0, "{case}: TCP-like never failed");
        assert_eq!(smt.bad(), 0, "{case}: SMT failed");
    }
}

/// The control: on one queue the TCP-like sender is correct, so its
/// failures above come from the queues, not from the sender.
#[test]
fn tcp_like_on_one_queue_never_fails() {
    let case = "seeded, 16 messages of 1-3 segments on 1 queue";
    let tcp = seeded(Scheme::TcpLike, 1, 200);
    report(case, Scheme::TcpLike, &tcp);
    assert_eq!(tcp.bad(), 0);
}
