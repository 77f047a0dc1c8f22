//! Tables on stdout (values, and SMT AES-128-GCM ÷ each peer), the performance
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
    /// When the run started, UTC (`2026-01-31T120000Z`).
    pub started: String,
    /// `smoke`, `quick` or `full`.
    pub mode: String,
    /// The CPU's model name.
    pub machine: String,
    /// CPUs online (not the process's affinity mask).
    pub cpus: usize,
    /// Each system's name and what it is.
    pub systems: Vec<(String, String)>,
    /// The machine's load before each system's run.
    pub loads: Vec<LoadRow>,
    /// What was skipped and why, and the systems' own notes.
    pub notes: &'a [String],
    /// The goals, measured.
    pub targets: Vec<Target>,
    /// Every measured point.
    pub records: &'a [Record],
}

/// The load seen before one system's run.
#[derive(Debug, Serialize)]
pub struct LoadRow {
    /// The system about to run.
    pub system: String,
    /// `pinned` or `unpinned`.
    pub affinity: String,
    /// What the machine's load was.
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

/// One line of `results.csv`: the record's fields, named as its columns,
/// with the figures rounded as the tables print them.
#[derive(Serialize)]
struct CsvRow<'a> {
    system: &'a str,
    affinity: &'a str,
    workload: &'a str,
    size: Option<usize>,
    concurrency: Option<usize>,
    dist: Option<&'a str>,
    load: Option<f64>,
    offered_per_s: Option<String>,
    bucket: Option<&'a str>,
    rpcs: u64,
    errors: u64,
    seconds: String,
    p50_us: String,
    p99_us: String,
    mean_us: String,
    rpc_per_s: String,
    gbit_per_s: String,
    slowdown_p50: Option<String>,
    slowdown_p99: Option<String>,
}

impl<'a> From<&'a Record> for CsvRow<'a> {
    fn from(r: &'a Record) -> Self {
        let fixed = |v: f64, places: usize| format!("{v:.places$}");
        Self {
            system: &r.system,
            affinity: &r.affinity,
            workload: &r.workload,
            size: r.size,
            concurrency: r.concurrency,
            dist: r.dist.as_deref(),
            load: r.load,
            offered_per_s: r.offered_per_s.map(|v| fixed(v, 0)),
            bucket: r.bucket.as_deref(),
            rpcs: r.rpcs,
            errors: r.errors,
            seconds: fixed(r.seconds, 4),
            p50_us: fixed(r.p50_us, 2),
            p99_us: fixed(r.p99_us, 2),
            mean_us: fixed(r.mean_us, 2),
            rpc_per_s: fixed(r.rpc_per_s, 1),
            gbit_per_s: fixed(r.gbit_per_s, 4),
            slowdown_p50: r.slowdown_p50.map(|v| fixed(v, 3)),
            slowdown_p99: r.slowdown_p99.map(|v| fixed(v, 3)),
        }
    }
}

/// The records as CSV (RFC 4180, through the `csv` crate: a field holding
/// a comma or a quote is quoted), a header line, then one line per record.
pub fn write_csv(out: impl io::Write, records: &[Record]) -> io::Result<()> {
    let mut writer = csv::Writer::from_writer(out);
    for r in records {
        writer
            .serialize(CsvRow::from(r))
            .map_err(io::Error::other)?;
    }
    writer.flush()
}

/// Writes the report into `dir` (made if missing): `results.json` (all
/// of it) and `results.csv` (the records).
pub fn write_files(dir: &Path, report: &Report<'_>) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let json = serde_json::to_string_pretty(report).map_err(io::Error::other)?;
    std::fs::write(dir.join("results.json"), json)?;
    let csv = std::fs::File::create(dir.join("results.csv"))?;
    write_csv(io::BufWriter::new(csv), report.records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv_text(records: &[Record]) -> String {
        let mut out = Vec::new();
        write_csv(&mut out, records).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn csv_has_the_columns_and_the_tables_rounding() {
        let record = Record {
            system: "smt-aes".into(),
            affinity: "pinned".into(),
            workload: "rtt".into(),
            size: Some(64),
            rpcs: 10,
            seconds: 1.0,
            p50_us: 12.345,
            slowdown_p99: Some(1.5),
            ..Record::default()
        };
        let text = csv_text(&[record]);
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some(
                "system,affinity,workload,size,concurrency,dist,load,offered_per_s,bucket,rpcs,\
                 errors,seconds,p50_us,p99_us,mean_us,rpc_per_s,gbit_per_s,slowdown_p50,slowdown_p99"
            )
        );
        assert_eq!(
            lines.next(),
            Some("smt-aes,pinned,rtt,64,,,,,,10,0,1.0000,12.35,0.00,0.00,0.0,0.0000,,1.500")
        );
    }

    /// A hand-written writer split a field holding a comma into two columns.
    #[test]
    fn csv_quotes_fields_with_commas_and_quotes() {
        let record = Record {
            system: "a,b".into(),
            bucket: Some("say \"hi\"".into()),
            ..Record::default()
        };
        let text = csv_text(&[record]);
        let row = text.lines().nth(1).unwrap();
        assert!(row.starts_with("\"a,b\","), "{row}");
        assert!(row.contains(",\"say \"\"hi\"\"\","), "{row}");
    }
}
