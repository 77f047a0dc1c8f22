//! Part A: in-NIC memory against parallelism, without timing. Messages to
//! random peers from random queues go through SMT's context planner and
//! the deterministic engine; the counts come from the engine's counters
//! and table, so they are exact and reproducible.

use smt_offload::stream::{smt_segments, smt_seq};
use smt_offload::{
    CipherSuite, ContextPlanner, CryptoInfo, Engine, EngineConfig, FlowKey, QueueId, RoundRobin,
    Segment, SplitMix64, TxDescriptor, IV_LEN,
};

/// Messages posted before the engine drains the queues (bounds memory).
const BATCH: usize = 1024;

/// One configuration of the sweep.
#[derive(Clone, Copy, Debug)]
pub struct Point {
    pub queues: u16,
    pub peers: u32,
    pub capacity: usize,
}

/// What one configuration measured.
#[derive(Clone, Copy, Debug)]
pub struct Outcome {
    pub point: Point,
    pub messages: u64,
    /// (queue, peer) pairs that sent at least one message.
    pub flows: u64,
    pub contexts_peak: u64,
    pub creates: u64,
    pub resyncs: u64,
    pub evictions: u64,
    pub drops: u64,
}

/// Every combination of the sweep's axes.
pub fn points() -> Vec<Point> {
    let mut out = Vec::new();
    for capacity in [64, 1024, 65536] {
        for queues in [1, 2, 4, 8] {
            for peers in [1, 10, 100, 1000, 10_000] {
                out.push(Point {
                    queues,
                    peers,
                    capacity,
                });
            }
        }
    }
    out
}

/// Peer keys; the same for every configuration.
pub fn keys(peers: u32, seed: u64) -> Vec<CryptoInfo> {
    let mut rng = SplitMix64::new(seed);
    (0..peers)
        .map(|_| {
            let mut key = [0; 16];
            let mut iv = [0; IV_LEN];
            rng.fill(&mut key);
            rng.fill(&mut iv);
            // NOTE(unwrap): a 16-byte key is AES-128's length.
            CryptoInfo::new(CipherSuite::Aes128Gcm, &key, iv, 0).unwrap()
        })
        .collect()
}

/// Runs `messages` one-record messages of `size` bytes.
pub fn run(point: Point, messages: usize, size: usize, keys: &[CryptoInfo], seed: u64) -> Outcome {
    let mut engine = Engine::new(EngineConfig {
        queues: point.queues,
        context_capacity: point.capacity,
    });
    let mut planner = ContextPlanner::new(point.queues, point.capacity);
    let mut rng = SplitMix64::new(seed);
    let mut next_id = vec![1u64; point.peers as usize];
    let mut flows = std::collections::HashSet::new();
    let data = vec![0x5a; size];
    for batch in 0..messages.div_ceil(BATCH) {
        let n = BATCH.min(messages - batch * BATCH);
        for _ in 0..n {
            let peer = rng.below(u64::from(point.peers)) as u32;
            let queue = QueueId(rng.below(u64::from(point.queues)) as u16);
            flows.insert((queue, peer));
            let id = next_id[peer as usize];
            next_id[peer as usize] += 1;
            let flow = FlowKey {
                queue,
                peer,
                epoch: 0,
            };
            post_message(
                &mut engine,
                &mut planner,
                flow,
                &keys[peer as usize],
                id,
                &data,
            );
        }
        engine.run(&mut RoundRobin::default());
        while engine.poll_wire().is_some() {}
    }
    let c = engine.counters();
    let stats = planner.stats();
    Outcome {
        point,
        messages: messages as u64,
        flows: flows.len() as u64,
        contexts_peak: engine.contexts_peak() as u64,
        creates: c.tx_tls_ctx,
        resyncs: c.tx_tls_ooo,
        evictions: stats.evictions,
        drops: c.drops(),
    }
}

fn post_message(
    engine: &mut Engine,
    planner: &mut ContextPlanner,
    flow: FlowKey,
    key: &CryptoInfo,
    id: u64,
    data: &[u8],
) {
    let mut out = Vec::new();
    let ctx = planner.prepare(flow, key, smt_seq(id, 0), &mut out);
    for segment in smt_segments(data, 16384) {
        out.push(TxDescriptor::Segment(Segment {
            ctx,
            header: Vec::new(),
            payload: segment.payload,
            mss: 1428,
        }));
    }
    for desc in out {
        // NOTE(unwrap): the planner only names queues below `queues`.
        engine.post(flow.queue, desc).unwrap();
    }
}

/// The sweep's table, Markdown.
pub fn table(outcomes: &[Outcome]) -> String {
    let mut s = String::from(
        "| queues | peers | table | (queue, peer) flows | contexts used (peak) | \
         creates / msg | resyncs / msg | evictions / msg |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for o in outcomes {
        let per = |n: u64| n as f64 / o.messages as f64;
        s += &format!(
            "| {} | {} | {} | {} | {} | {:.3} | {:.3} | {:.3} |\n",
            o.point.queues,
            o.point.peers,
            o.point.capacity,
            o.flows,
            o.contexts_peak,
            per(o.creates),
            per(o.resyncs),
            per(o.evictions),
        );
    }
    s
}
