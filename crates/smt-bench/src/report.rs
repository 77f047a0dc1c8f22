//! Tables on stdout (values, and SMT AES-128-GCM ÷ each peer), the issue's
//! targets as checks, and the JSON and CSV files.

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use serde::Serialize;

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

/// The system every ratio is taken against.
pub const SMT: &str = "smt-aes";

/// Everything a run wrote, as one JSON document.
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    pub started: String,
    pub mode: String,
    pub machine: String,
    pub cpus: usize,
    pub systems: Vec<(String, String)>,
    pub loads: Vec<LoadRow>,
    pub notes: &'a [String],
    pub targets: Vec<Target>,
    pub records: &'a [Record],
}

/// The load seen before one system's run.
#[derive(Debug, Serialize)]
pub struct LoadRow {
    pub system: String,
    pub affinity: String,
    pub load: crate::sys::LoadSeen,
}

/// One of the goals, measured (never asserted).
#[derive(Debug, Serialize)]
pub struct Target {
    pub affinity: String,
    pub goal: String,
    /// The measured ratio, if both sides were measured.
    pub measured: Option<f64>,
    pub limit: f64,
    /// true: measured must be at most `limit`; false: at least.
    pub at_most: bool,
    pub pass: Option<bool>,
}

fn find<'a>(
    rs: &'a [Record],
    sys: &str,
    aff: &str,
    f: impl Fn(&Record) -> bool,
) -> Option<&'a Record> {
    rs.iter()
        .find(|r| r.system == sys && r.affinity == aff && f(r))
}

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

/// The best (by `better`) value of `metric` among `systems`.
fn best(
    rs: &[Record],
    systems: &[&str],
    aff: &str,
    f: &dyn Fn(&Record) -> bool,
    metric: &dyn Fn(&Record) -> f64,
    lower: bool,
) -> Option<f64> {
    let vals = systems
        .iter()
        .filter_map(|s| find(rs, s, aff, f).map(metric));
    if lower {
        vals.reduce(f64::min)
    } else {
        vals.reduce(f64::max)
    }
}

/// The targets for one placement.
pub fn targets(rs: &[Record], aff: &str) -> Vec<Target> {
    let mut t = Vec::new();
    let mut push = |goal: &str, measured: Option<f64>, limit: f64, at_most: bool| {
        t.push(Target {
            affinity: aff.into(),
            goal: goal.into(),
            measured,
            limit,
            at_most,
            pass: measured.map(|m| if at_most { m <= limit } else { m >= limit }),
        });
    };
    let p50 = |r: &Record| r.p50_us;
    let rtt = |s: usize| move |r: &Record| r.workload == "rtt" && r.size == Some(s);
    let smt64 = find(rs, SMT, aff, rtt(64)).map(p50);
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    push(
        "unloaded 64 B RTT / UDP floor",
        ratio(smt64, find(rs, "udp-floor", aff, rtt(64)).map(p50)),
        1.25,
        true,
    );
    push(
        "unloaded 64 B RTT / TLS-TCP",
        ratio(
            smt64,
            best(rs, &["tls-pool", "tls-pipe"], aff, &rtt(64), &p50, true),
        ),
        0.85,
        true,
    );
    // Throughput at 32..150 outstanding, 64 B and 1 KiB: the worst point.
    let tput = |peers: &[&str]| -> Option<f64> {
        let mut worst: Option<f64> = None;
        for r in rs
            .iter()
            .filter(|r| r.system == SMT && r.affinity == aff && r.workload == "throughput")
        {
            let (Some(s), Some(c)) = (r.size, r.concurrency) else {
                continue;
            };
            if !(s == 64 || s == 1024) || !(32..=150).contains(&c) {
                continue;
            }
            let same = |p: &Record| {
                p.workload == "throughput" && p.size == Some(s) && p.concurrency == Some(c)
            };
            if let Some(peer) = best(rs, peers, aff, &same, &|p| p.rpc_per_s, false) {
                let q = r.rpc_per_s / peer;
                worst = Some(worst.map_or(q, |w: f64| w.min(q)));
            }
        }
        worst
    };
    push(
        "64 B/1 KiB throughput at 32-150 outstanding / pooled TLS-TCP (worst point)",
        tput(&["tls-pool"]),
        1.5,
        false,
    );
    push(
        "64 B/1 KiB throughput at 32-150 outstanding / quinn (best mode, worst point)",
        tput(&["quic-stream", "quic-persist"]),
        2.0,
        false,
    );
    push(
        "64 B/1 KiB throughput at 32-150 outstanding / pipelined TLS-TCP (worst point)",
        tput(&["tls-pipe"]),
        1.0,
        false,
    );
    let small = |r: &Record| r.workload == "mixed" && r.bucket.as_deref() == Some("small<=1024");
    let mut worst_slow: Option<f64> = None;
    for r in rs
        .iter()
        .filter(|r| r.system == SMT && r.affinity == aff && small(r))
    {
        let same = |p: &Record| small(p) && p.dist == r.dist && p.load == r.load;
        if let (Some(a), Some(b)) = (
            r.slowdown_p99,
            find(rs, "tls-pipe", aff, same).and_then(|p| p.slowdown_p99),
        ) {
            worst_slow = Some(worst_slow.map_or(a / b, |w: f64| w.max(a / b)));
        }
    }
    push(
        "small-message p99 slowdown under mixed load / pipelined TLS-TCP (worst)",
        worst_slow,
        0.3,
        true,
    );
    let bulk = |r: &Record| r.workload == "bulk";
    push(
        "1 MiB goodput / TLS-TCP (best of pool, pipe)",
        ratio(
            find(rs, SMT, aff, bulk).map(|r| r.gbit_per_s),
            best(
                rs,
                &["tls-pool", "tls-pipe"],
                aff,
                &bulk,
                &|r| r.gbit_per_s,
                false,
            ),
        ),
        1.0,
        false,
    );
    let mut worst_null: Option<f64> = None;
    for r in rs.iter().filter(|r| {
        r.system == SMT
            && r.affinity == aff
            && r.workload == "rtt"
            && r.size.is_some_and(|s| s <= 8192)
    }) {
        if let Some(n) = find(rs, "smt-null", aff, rtt(r.size.unwrap_or(0))) {
            let q = r.p50_us / n.p50_us;
            worst_null = Some(worst_null.map_or(q, |w: f64| w.max(q)));
        }
    }
    push(
        "SMT AES RTT / SMT null at <= 8 KiB (worst size)",
        worst_null,
        1.10,
        true,
    );
    t
}

pub fn print_targets(ts: &[Target]) -> String {
    let mut out = String::from("\ntargets (measured, not asserted):\n");
    for t in ts {
        let m = t.measured.map_or("-".into(), |m| format!("{m:.2}"));
        let verdict = match t.pass {
            Some(true) => "PASS",
            Some(false) => "MISS",
            None => "n/a",
        };
        let _ = writeln!(
            out,
            "  [{:<8}] {:<82} {m:>7} {} {:<5} {verdict}",
            t.affinity,
            t.goal,
            if t.at_most { "<=" } else { ">=" },
            t.limit
        );
    }
    out
}

/// The records as CSV, one line per record.
pub fn csv(records: &[Record]) -> String {
    let mut out = String::from("system,affinity,workload,size,concurrency,dist,load,offered_per_s,bucket,rpcs,errors,seconds,p50_us,p99_us,mean_us,rpc_per_s,gbit_per_s,slowdown_p50,slowdown_p99\n");
    let o = |v: Option<String>| v.unwrap_or_default();
    for r in records {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{:.4},{:.2},{:.2},{:.2},{:.1},{:.4},{},{}",
            r.system,
            r.affinity,
            r.workload,
            o(r.size.map(|v| v.to_string())),
            o(r.concurrency.map(|v| v.to_string())),
            o(r.dist.clone()),
            o(r.load.map(|v| v.to_string())),
            o(r.offered_per_s.map(|v| format!("{v:.0}"))),
            o(r.bucket.clone()),
            r.rpcs,
            r.errors,
            r.seconds,
            r.p50_us,
            r.p99_us,
            r.mean_us,
            r.rpc_per_s,
            r.gbit_per_s,
            o(r.slowdown_p50.map(|v| format!("{v:.3}"))),
            o(r.slowdown_p99.map(|v| format!("{v:.3}"))),
        );
    }
    out
}

pub fn write_files(dir: &Path, report: &Report<'_>) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let json = serde_json::to_string_pretty(report).map_err(io::Error::other)?;
    std::fs::write(dir.join("results.json"), json)?;
    std::fs::write(dir.join("results.csv"), csv(report.records))
}
