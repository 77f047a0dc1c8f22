//! Results as a table (stdout and `docs/apps.md`) and as JSON.

use super::run::Cell;

/// What the results were measured on.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Meta {
    /// UTC date, `YYYY-MM-DD`.
    pub date: String,
    /// The CPU's model name (`/proc/cpuinfo`).
    pub cpu: String,
    /// CPUs this process could run on (`taskset` shows here).
    pub cpus_allowed: String,
    /// `pinned` (one CPU) or `unpinned`.
    pub label: String,
    /// Records loaded before the workloads ran.
    pub records: u64,
    /// Client threads per transport.
    pub threads: usize,
    /// Measured seconds of each workload (warm-up excluded).
    pub seconds_per_workload: f64,
}

impl Meta {
    /// The date and this machine's CPU and CPU set, with the run's
    /// `records`, `threads` and `seconds` per workload.
    pub fn of_this_machine(records: u64, threads: usize, seconds: f64) -> Self {
        let cpus_allowed = proc_field("/proc/self/status", "Cpus_allowed_list").unwrap_or_default();
        let single = !cpus_allowed.contains([',', '-']) && !cpus_allowed.is_empty();
        Self {
            date: utc_date(),
            cpu: proc_field("/proc/cpuinfo", "model name").unwrap_or_else(|| "unknown".into()),
            label: if single { "pinned" } else { "unpinned" }.into(),
            cpus_allowed,
            records,
            threads,
            seconds_per_workload: seconds,
        }
    }
}

/// A `key: value` line's value from a `/proc` file.
fn proc_field(path: &str, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|l| {
        l.strip_prefix(key)?
            .trim_start()
            .strip_prefix(':')
            .map(|v| v.trim().to_owned())
    })
}

/// Today's UTC date, `YYYY-MM-DD`.
fn utc_date() -> String {
    time::OffsetDateTime::now_utc().date().to_string()
}

/// One line per cell.
pub fn line(c: &Cell) -> String {
    format!(
        "{:>5} B  {:<8} {:<5} {:>10.0} ops/s  p50 {:>8.1} us  p99 {:>8.1} us  ({} ops, {} errors)",
        c.value_size, c.transport, c.workload, c.ops_per_s, c.p50_us, c.p99_us, c.ops, c.errors
    )
}

/// The Markdown table: one row per workload and value size, throughput and
/// p50/p99 per transport, and SMT's throughput relative to TLS/TCP.
pub fn markdown(cells: &[Cell]) -> String {
    let transports = ["SMT", "TLS/TCP", "TCP"];
    let mut out = String::from(
        "| workload | value | SMT kops/s | TLS/TCP kops/s | TCP kops/s | SMT p50/p99 µs | TLS/TCP p50/p99 µs | TCP p50/p99 µs | SMT vs TLS |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    let mut keys: Vec<(&str, usize)> = cells.iter().map(|c| (c.workload, c.value_size)).collect();
    keys.dedup();
    keys.sort_by_key(|&(w, s)| (w != "load", w, s));
    keys.dedup();
    for (w, size) in keys {
        let find = |t: &str| {
            cells
                .iter()
                .find(|c| c.workload == w && c.value_size == size && c.transport == t)
        };
        let row: Vec<Option<&Cell>> = transports.iter().map(|t| find(t)).collect();
        let tput =
            |c: Option<&Cell>| c.map_or("–".into(), |c| format!("{:.1}", c.ops_per_s / 1e3));
        let lat = |c: Option<&Cell>| {
            c.map_or("–".into(), |c| {
                format!("{:.0} / {:.0}", c.p50_us, c.p99_us)
            })
        };
        let ratio = match (row[0], row[1]) {
            (Some(s), Some(t)) if t.ops_per_s > 0.0 => {
                format!("{:+.0}%", (s.ops_per_s / t.ops_per_s - 1.0) * 100.0)
            }
            _ => "–".into(),
        };
        out += &format!(
            "| {w} | {} | {} | {} | {} | {} | {} | {} | {ratio} |\n",
            size_label(size),
            tput(row[0]),
            tput(row[1]),
            tput(row[2]),
            lat(row[0]),
            lat(row[1]),
            lat(row[2]),
        );
    }
    out
}

/// `64 B`, `1 KiB`, `4 KiB`.
pub fn size_label(size: usize) -> String {
    if size >= 1024 && size.is_multiple_of(1024) {
        format!("{} KiB", size / 1024)
    } else {
        format!("{size} B")
    }
}

#[derive(serde::Serialize)]
struct Saved<'a> {
    meta: &'a Meta,
    cells: &'a [Cell],
}

/// The run as pretty JSON: `{ "meta": ..., "cells": [...] }`.
pub fn json(meta: &Meta, cells: &[Cell]) -> String {
    serde_json::to_string_pretty(&Saved { meta, cells }).unwrap_or_default()
}
