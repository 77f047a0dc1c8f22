//! Tables on stdout (values, and SMT AES-128-GCM ÷ each peer), the issue's
//! targets as checks, and the JSON and CSV files.

mod tables;
mod targets;

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use serde::Serialize;

use crate::record::Record;

pub use tables::tables;
pub use targets::{print_targets, targets, Target};

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

fn find<'a>(
    rs: &'a [Record],
    sys: &str,
    aff: &str,
    f: impl Fn(&Record) -> bool,
) -> Option<&'a Record> {
    rs.iter()
        .find(|r| r.system == sys && r.affinity == aff && f(r))
}

/// The machine's load before each run: figures taken on a busy machine
/// measure the other work as much as the transport.
pub fn print_loads(loads: &[LoadRow]) -> String {
    let mut out =
        String::from("\nCPU busy before each run (all CPUs; idle means below the threshold):\n");
    for l in loads {
        let _ = writeln!(
            out,
            "  {:<15} {:<8} {:>4.0}%{}",
            l.system,
            l.affinity,
            l.load.busy * 100.0,
            if l.load.idle { "" } else { "  NOT IDLE" }
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
