//! One row of results, and how samples become rows.

use serde::{Deserialize, Serialize};

use crate::workload::Samples;

/// One measured point of one system: the unit of the JSON and CSV files.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Record {
    /// The system's name (`smt-aes`, `tls-pipe`, ...).
    pub system: String,
    /// `pinned` or `unpinned`.
    pub affinity: String,
    /// rtt, throughput, mixed, bulk.
    pub workload: String,
    /// Request size (the response is the same size: the server echoes).
    pub size: Option<usize>,
    /// RPCs outstanding (closed loop) or slots (open loop).
    pub concurrency: Option<usize>,
    /// Mixed workload: the size distribution.
    pub dist: Option<String>,
    /// Mixed workload: the offered load as a fraction of capacity.
    pub load: Option<f64>,
    /// Mixed workload: the arrival rate asked for (load × capacity), RPC/s.
    pub offered_per_s: Option<f64>,
    /// Mixed workload: the size bucket the latencies are of ("<=1024",
    /// "all").
    pub bucket: Option<String>,
    /// RPCs completed in the measured time.
    pub rpcs: u64,
    /// RPCs that failed or timed out.
    pub errors: u64,
    /// Measured time, in seconds.
    pub seconds: f64,
    /// Median RPC latency, in microseconds.
    pub p50_us: f64,
    /// 99th-percentile RPC latency, in microseconds.
    pub p99_us: f64,
    /// Mean RPC latency, in microseconds.
    pub mean_us: f64,
    /// RPCs completed per second.
    pub rpc_per_s: f64,
    /// Payload bits both ways (request + response) per second.
    pub gbit_per_s: f64,
    /// Mixed workload: median slowdown (latency over the unloaded RTT of
    /// the same size).
    pub slowdown_p50: Option<f64>,
    /// Mixed workload: 99th-percentile slowdown.
    pub slowdown_p99: Option<f64>,
}

/// The `p`-quantile of `sorted` by the workspace's one rule (nearest
/// rank, [`smt::stats::quantile`]); 0 for no samples.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    smt::stats::quantile(sorted, p).unwrap_or(0.0)
}

impl Record {
    /// A row with latency percentiles and rates of `s`.
    pub fn from_samples(system: &str, affinity: &str, workload: &str, s: &Samples) -> Self {
        let mut lat: Vec<f64> = s.rpcs.iter().map(|&(_, ns)| ns as f64 / 1e3).collect();
        lat.sort_by(f64::total_cmp);
        let secs = s.elapsed.as_secs_f64().max(1e-9);
        Self {
            system: system.into(),
            affinity: affinity.into(),
            workload: workload.into(),
            rpcs: s.rpcs.len() as u64,
            errors: s.errors,
            seconds: secs,
            p50_us: percentile(&lat, 0.5),
            p99_us: percentile(&lat, 0.99),
            mean_us: lat.iter().sum::<f64>() / lat.len().max(1) as f64,
            rpc_per_s: s.rpcs.len() as f64 / secs,
            gbit_per_s: s.bytes as f64 * 8.0 / secs / 1e9,
            ..Default::default()
        }
    }
}

/// Unloaded RTT by size (p50 of the rtt workload), interpolated
/// log-log between measured sizes: the denominator of slowdown.
#[derive(Clone, Debug)]
pub struct UnloadedRtt {
    points: Vec<(f64, f64)>,
}

impl UnloadedRtt {
    /// From (size, p50 µs) pairs; None without any point.
    pub fn new(mut points: Vec<(usize, f64)>) -> Option<Self> {
        points.retain(|&(_, us)| us > 0.0);
        points.sort_by_key(|p| p.0);
        if points.is_empty() {
            return None;
        }
        Some(Self {
            points: points
                .into_iter()
                .map(|(s, us)| ((s.max(1) as f64).ln(), us.ln()))
                .collect(),
        })
    }

    /// The unloaded RTT of a `size`-byte RPC, in µs.
    pub fn at(&self, size: usize) -> f64 {
        let x = (size.max(1) as f64).ln();
        let p = &self.points;
        let i = p.iter().position(|&(px, _)| px >= x).unwrap_or(p.len() - 1);
        if i == 0 || p[i].0 <= x {
            return p[i].1.exp();
        }
        let ((x0, y0), (x1, y1)) = (p[i - 1], p[i]);
        (y0 + (x - x0) / (x1 - x0) * (y1 - y0)).exp()
    }
}

/// Size buckets of the mixed workload (upper bounds, inclusive).
pub const BUCKETS: [usize; 7] = [
    256,
    1 << 10,
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
];

/// Rows of the mixed workload: one per size bucket, one for small
/// messages (≤ 1 KiB, where the tail-latency target applies) and one for all.
pub fn mixed_rows(base: &Record, s: &Samples, unloaded: &UnloadedRtt) -> Vec<Record> {
    let mut groups: Vec<(String, Vec<(u64, f64)>)> = BUCKETS
        .iter()
        .map(|b| (format!("<={b}"), Vec::new()))
        .collect();
    let mut small = Vec::new();
    let mut all = Vec::new();
    for &(size, ns) in &s.rpcs {
        let slow = ns as f64 / 1e3 / unloaded.at(size as usize);
        let b = BUCKETS
            .iter()
            .position(|&b| size as usize <= b)
            .unwrap_or(BUCKETS.len() - 1);
        groups[b].1.push((ns, slow));
        if size as usize <= 1 << 10 {
            small.push((ns, slow));
        }
        all.push((ns, slow));
    }
    groups.push(("small<=1024".into(), small));
    groups.push(("all".into(), all));
    groups
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(name, v)| bucket_row(base, name, v))
        .collect()
}

fn bucket_row(base: &Record, bucket: String, v: Vec<(u64, f64)>) -> Record {
    let mut lat: Vec<f64> = v.iter().map(|&(ns, _)| ns as f64 / 1e3).collect();
    let mut slow: Vec<f64> = v.iter().map(|&(_, s)| s).collect();
    lat.sort_by(f64::total_cmp);
    slow.sort_by(f64::total_cmp);
    Record {
        bucket: Some(bucket),
        rpcs: v.len() as u64,
        p50_us: percentile(&lat, 0.5),
        p99_us: percentile(&lat, 0.99),
        mean_us: lat.iter().sum::<f64>() / lat.len().max(1) as f64,
        rpc_per_s: v.len() as f64 / base.seconds.max(1e-9),
        slowdown_p50: Some(percentile(&slow, 0.5)),
        slowdown_p99: Some(percentile(&slow, 0.99)),
        ..base.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unloaded_rtt_interpolates_log_log() {
        let u = UnloadedRtt::new(vec![(64, 10.0), (1 << 20, 1000.0)]).unwrap();
        assert!((u.at(64) - 10.0).abs() < 1e-9);
        assert!((u.at(1 << 20) - 1000.0).abs() < 1e-6);
        assert!((u.at(8) - 10.0).abs() < 1e-9);
        let mid = u.at(8192);
        assert!(mid > 10.0 && mid < 1000.0);
    }
}
