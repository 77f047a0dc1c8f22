//! The engine in real mode: a worker thread per queue, the operating
//! system choosing the interleaving.

use crate::common;

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};

use common::{key, receive, record_data, segment_header, software, Expected, Verdict};
use smt_offload::stream::{smt_segments, smt_seq};
use smt_offload::{
    CipherSuite, ContextId, ContextPlanner, CryptoInfo, EngineConfig, FlowKey, QueueId, Segment,
    SplitMix64, TcpLikeSender, ThreadedEngine, TxDescriptor, WireSegment, WireSink,
};

const MSS: u16 = 1428;

fn collecting_sink() -> (WireSink, Arc<Mutex<Vec<WireSegment>>>) {
    let wire = Arc::new(Mutex::new(Vec::new()));
    let into = wire.clone();
    let sink: WireSink = Arc::new(move |segment| into.lock().unwrap().push(segment));
    (sink, wire)
}

/// SMT's scheme with 4 queues, 20 peers and a table too small for all
/// (queue, peer) pairs, so contexts are evicted and re-created while the
/// other queues run: every record still authenticates.
#[test]
fn smt_scheme_on_worker_threads_authenticates_everything() {
    let (queues, peers) = (4u16, 20u32);
    let config = EngineConfig {
        queues,
        context_capacity: 32,
    };
    let (sink, wire) = collecting_sink();
    let engine = ThreadedEngine::start(config, 64, sink).unwrap();
    let keys: Vec<CryptoInfo> = (0..peers)
        .map(|p| key(CipherSuite::Aes128Gcm, u64::from(p), 0))
        .collect();
    let mut planner = ContextPlanner::new(queues, 32);
    let mut expected: Vec<HashMap<Vec<u8>, Expected>> = vec![HashMap::new(); peers as usize];
    let mut rng = SplitMix64::new(0x7ead);
    for i in 0..600u32 {
        let peer = rng.below(u64::from(peers)) as u32;
        let queue = QueueId(rng.below(u64::from(queues)) as u16);
        let mut data = vec![0; rng.below(40_000) as usize];
        rng.fill(&mut data);
        let id = u64::from(i) + 1;
        let flow = FlowKey {
            queue,
            peer,
            epoch: 0,
        };
        let mut out = Vec::new();
        let ctx = planner.prepare(flow, &keys[peer as usize], smt_seq(id, 0), &mut out);
        for (s, segment) in smt_segments(&data, 4096).into_iter().enumerate() {
            let header = segment_header(i, s as u32);
            let records = (smt_seq(id, segment.first_record)..)
                .zip(record_data(&segment))
                .collect();
            expected[peer as usize].insert(header.clone(), Expected { records });
            out.push(TxDescriptor::Segment(Segment {
                ctx,
                header,
                payload: segment.payload,
                mss: MSS,
            }));
        }
        for d in out {
            engine.post(queue, d).unwrap();
        }
    }
    let counters = engine.finish();
    assert_eq!(counters.drops(), 0, "{counters}");
    assert!(planner.stats().evictions > 0, "the table was big enough");
    let wire = std::mem::take(&mut *wire.lock().unwrap());
    let mut total = Verdict::default();
    for (peer, exp) in expected.iter().enumerate() {
        let mine: Vec<WireSegment> = wire
            .iter()
            .filter(|s| exp.contains_key(&s.header))
            .map(|s| WireSegment {
                queue: s.queue,
                ctx: s.ctx,
                header: s.header.clone(),
                payload: s.payload.clone(),
                mss: s.mss,
            })
            .collect();
        let info = &keys[peer];
        let v = receive(&software(info), info.iv(), exp, &mine);
        total.ok += v.ok;
        total.failed += v.failed;
        total.missing += v.missing;
    }
    assert_eq!(total.bad(), 0, "{total:?}");
    let _ = writeln!(
        std::io::stderr(),
        "threaded: SMT, {queues} queues, {peers} peers: {} records authenticated, {:?}\n{counters}",
        total.ok,
        planner.stats()
    );
}

/// The TCP-like sender on real threads, for the record: whether and how
/// often it fails depends on the machine's scheduling, so this reports
/// and asserts only that nothing was dropped.
#[test]
fn tcp_like_on_worker_threads_reports_its_failures() {
    let config = EngineConfig {
        queues: 2,
        context_capacity: 4,
    };
    let (sink, wire) = collecting_sink();
    let engine = ThreadedEngine::start(config, 16, sink).unwrap();
    let info = key(CipherSuite::Aes128Gcm, 3, 0);
    let mut sender = TcpLikeSender::new(ContextId(0));
    engine.post(QueueId(0), sender.create(&info)).unwrap();
    // Queue 1 would otherwise race the creation in queue 0.
    engine.wait_idle();
    let mut expected = HashMap::new();
    let mut rng = SplitMix64::new(0x7c9);
    for i in 0..2000u32 {
        let queue = QueueId((i % 2) as u16);
        let mut data = vec![0; 1 + rng.below(3000) as usize];
        rng.fill(&mut data);
        for (s, segment) in smt_segments(&data, 1024).into_iter().enumerate() {
            let header = segment_header(i, s as u32);
            let data = record_data(&segment);
            let mut out = Vec::new();
            let first = sender.segment(segment, header.clone(), MSS, &mut out);
            let records = (first..).zip(data).collect();
            expected.insert(header, Expected { records });
            for d in out {
                engine.post(queue, d).unwrap();
            }
        }
    }
    let counters = engine.finish();
    assert_eq!(counters.drops(), 0);
    let wire = std::mem::take(&mut *wire.lock().unwrap());
    let v = receive(&software(&info), info.iv(), &expected, &wire);
    let _ = writeln!(
        std::io::stderr(),
        "threaded: TCP-like, 2 queues: {} of {} records failed to authenticate",
        v.bad(),
        v.ok + v.bad()
    );
}
