//! The stdout tables: one row per point, one column per system, values
//! then the ratio of SMT AES-128-GCM to each column.

use std::fmt::Write as _;

use super::SMT;
use crate::record::Record;

/// A row of a table: its label and which records belong to it.
type Key = (String, Box<dyn Fn(&Record) -> bool>);

/// What identifies a row: size, outstanding, distribution, load (‰), bucket.
type KeyFields = (
    Option<usize>,
    Option<usize>,
    Option<String>,
    Option<u64>,
    Option<String>,
);

fn systems_in(rs: &[Record]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in rs {
        if !v.contains(&r.system) {
            v.push(r.system.clone());
        }
    }
    v
}

/// A values table and a ratios table: one row per key, one column per
/// system. `value` picks the metric; `higher_better` only labels it.
fn table(
    out: &mut String,
    title: &str,
    rs: &[&Record],
    keys: &[Key],
    value: impl Fn(&Record) -> f64,
    unit: &str,
) {
    let owned: Vec<Record> = rs.iter().map(|r| (*r).clone()).collect();
    let systems = systems_in(&owned);
    if systems.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{title} [{unit}]");
    let _ = write!(out, "{:<22}", "");
    for s in &systems {
        let _ = write!(out, "{s:>15}");
    }
    let _ = writeln!(out);
    for (label, pick) in keys {
        let _ = write!(out, "{label:<22}");
        for s in &systems {
            match owned.iter().find(|r| &r.system == s && pick(r)) {
                Some(r) => {
                    let _ = write!(out, "{:>15.2}", value(r));
                }
                None => {
                    let _ = write!(out, "{:>15}", "-");
                }
            }
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(out, "{:<22}(ratio {SMT} / column)", "");
    for (label, pick) in keys {
        let smt = owned
            .iter()
            .find(|r| r.system == SMT && pick(r))
            .map(&value);
        let _ = write!(out, "{label:<22}");
        for s in &systems {
            let peer = owned.iter().find(|r| &r.system == s && pick(r)).map(&value);
            match (smt, peer) {
                (Some(a), Some(b)) if b > 0.0 => {
                    let _ = write!(out, "{:>15.2}", a / b);
                }
                _ => {
                    let _ = write!(out, "{:>15}", "-");
                }
            }
        }
        let _ = writeln!(out);
    }
}

fn size_label(s: usize) -> String {
    match s {
        s if s >= 1 << 20 && s % (1 << 20) == 0 => format!("{}MiB", s >> 20),
        s if s >= 1 << 10 && s % (1 << 10) == 0 => format!("{}KiB", s >> 10),
        s => format!("{s}B"),
    }
}

fn keys_of(rs: &[&Record], workload: &str) -> Vec<Key> {
    let mut seen: Vec<KeyFields> = Vec::new();
    for r in rs.iter().filter(|r| r.workload == workload) {
        let k = (
            r.size,
            r.concurrency,
            r.dist.clone(),
            r.load.map(|l| (l * 1000.0) as u64),
            r.bucket.clone(),
        );
        if !seen.contains(&k) {
            seen.push(k);
        }
    }
    let workload = workload.to_string();
    seen.into_iter()
        .map(|(size, c, dist, load, bucket)| {
            let mut label = String::new();
            if let Some(d) = &dist {
                label += &format!("{d} ");
            }
            if let Some(l) = load {
                label += &format!("{}% ", l / 10);
            }
            if let Some(b) = &bucket {
                label += b;
            }
            if let Some(s) = size {
                label += &size_label(s);
            }
            if let (Some(c), None) = (c, &dist) {
                label += &format!(" x{c}");
            }
            let w = workload.clone();
            let pick: Box<dyn Fn(&Record) -> bool> = Box::new(move |r: &Record| {
                r.workload == w
                    && r.size == size
                    && (dist.is_some() || r.concurrency == c)
                    && r.dist == dist
                    && r.load.map(|l| (l * 1000.0) as u64) == load
                    && r.bucket == bucket
            });
            (label, pick)
        })
        .collect()
}

/// The stdout report: every table for every CPU placement, then targets.
pub fn tables(records: &[Record], affinities: &[String]) -> String {
    let mut out = String::new();
    for aff in affinities {
        let rs: Vec<&Record> = records.iter().filter(|r| &r.affinity == aff).collect();
        let _ = writeln!(out, "\n===== {aff} =====");
        let sub =
            |w: &str| -> Vec<&Record> { rs.iter().copied().filter(|r| r.workload == w).collect() };
        let rtt = sub("rtt");
        table(
            &mut out,
            "rtt: p50 latency, one RPC at a time",
            &rtt,
            &keys_of(&rtt, "rtt"),
            |r| r.p50_us,
            "us",
        );
        table(
            &mut out,
            "rtt: p99 latency",
            &rtt,
            &keys_of(&rtt, "rtt"),
            |r| r.p99_us,
            "us",
        );
        let tp = sub("throughput");
        table(
            &mut out,
            "throughput: closed loop, size x outstanding",
            &tp,
            &keys_of(&tp, "throughput"),
            |r| r.rpc_per_s / 1e3,
            "kRPC/s",
        );
        table(
            &mut out,
            "throughput",
            &tp,
            &keys_of(&tp, "throughput"),
            |r| r.gbit_per_s,
            "Gbit/s, both directions",
        );
        let mixed: Vec<&Record> = sub("mixed")
            .into_iter()
            .filter(|r| matches!(r.bucket.as_deref(), Some("small<=1024") | Some("all")))
            .collect();
        table(
            &mut out,
            "mixed: p99 slowdown (RTT / unloaded RTT of that size)",
            &mixed,
            &keys_of(&mixed, "mixed"),
            |r| r.slowdown_p99.unwrap_or(0.0),
            "x",
        );
        table(
            &mut out,
            "mixed: p50 slowdown",
            &mixed,
            &keys_of(&mixed, "mixed"),
            |r| r.slowdown_p50.unwrap_or(0.0),
            "x",
        );
        let bulk = sub("bulk");
        table(
            &mut out,
            "bulk: 1 MiB messages, goodput",
            &bulk,
            &keys_of(&bulk, "bulk"),
            |r| r.gbit_per_s,
            "Gbit/s, both directions",
        );
    }
    out
}
