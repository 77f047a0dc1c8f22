//! The seeded network-simulation sweep: loss × message size, with real
//! AES-128-GCM. Its table is committed as a snapshot
//! (`crates/smt-proto/tests/snapshots/netsim.txt`) so behaviour changes show
//! up in review, and `smt-netsim` prints it.

use std::fmt::Write;
use std::time::Duration;

use crate::{KeyKind, Link, Outcome, Pair};

/// Loss rates swept.
pub const LOSS: [f64; 4] = [0.0, 0.01, 0.05, 0.10];
/// Message sizes swept (request and echoed response).
pub const SIZES: [usize; 4] = [64, 4096, 65536, 1 << 20];
/// Concurrent RPCs per cell.
pub const RPCS: usize = 16;

/// One cell of the sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Probability the link drops a datagram.
    pub loss: f64,
    /// Message size in bytes.
    pub size: usize,
    /// RPCs started in the cell.
    pub expected: usize,
    /// RPCs completed with the right response.
    pub delivered: usize,
    /// RPCs that ended with an error or a wrong response.
    pub failed: usize,
    /// Virtual time until the last RPC finished.
    pub completion: Duration,
    /// Median RPC completion time (virtual).
    pub p50: Duration,
    /// Retransmitted packets, both ends.
    pub retransmits: u64,
}

/// Runs one cell: `RPCS` concurrent echo RPCs of `size` bytes.
pub fn run_cell(loss: f64, size: usize, seed: u64) -> Row {
    let link = Link {
        loss,
        ..Link::default()
    };
    let mut pair = Pair::with_keys(KeyKind::Aes128(seed), link, seed);
    let calls: Vec<_> = (0..RPCS as u64)
        .map(|i| {
            let mut req = vec![(i as u8).wrapping_mul(37); size];
            let n = size.min(8);
            req[..n].copy_from_slice(&(i + 1).to_le_bytes()[..n]);
            (pair.call(&req), req)
        })
        .collect();
    pair.run(Duration::from_secs(60));
    let mut times: Vec<Duration> = Vec::new();
    let (mut delivered, mut failed) = (0, 0);
    for (h, req) in &calls {
        match pair.outcomes.get(h) {
            Some(Outcome::Response(data)) if data == req => {
                delivered += 1;
                times.push(pair.finished_at[h] - pair.start);
            }
            Some(_) => failed += 1,
            None => {}
        }
    }
    times.sort();
    let retransmits =
        pair.client.stats().retransmitted_packets + pair.server.stats().retransmitted_packets;
    Row {
        loss,
        size,
        expected: calls.len(),
        delivered,
        failed,
        completion: times.last().copied().unwrap_or_default(),
        p50: times.get(times.len() / 2).copied().unwrap_or_default(),
        retransmits,
    }
}

/// Runs the whole sweep.
pub fn sweep() -> Vec<Row> {
    let mut rows = Vec::new();
    for (i, &loss) in LOSS.iter().enumerate() {
        for (j, &size) in SIZES.iter().enumerate() {
            rows.push(run_cell(loss, size, 1000 + (i * 10 + j) as u64));
        }
    }
    rows
}

/// The sweep as a fixed-width table.
pub fn table(rows: &[Row]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# SMT netsim: {RPCS} concurrent echo RPCs per cell, AES-128-GCM, 10 Gbit/s, 5 us one-way"
    );
    let _ = writeln!(
        s,
        "{:>6} {:>8} {:>9} {:>6} {:>12} {:>12} {:>8}",
        "loss", "size", "delivered", "failed", "p50_us", "all_done_us", "rexmit"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:>5.0}% {:>8} {:>5}/{:<3} {:>6} {:>12} {:>12} {:>8}",
            r.loss * 100.0,
            r.size,
            r.delivered,
            r.expected,
            r.failed,
            r.p50.as_micros(),
            r.completion.as_micros(),
            r.retransmits
        );
    }
    s
}
