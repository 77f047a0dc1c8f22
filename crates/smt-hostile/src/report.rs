//! The results: one markdown table per measurement and the issue #11
//! thresholds as PASS/MISS lines.

use std::fmt::Write as _;
use std::time::Duration;

use smt::stats::quantile;

use crate::amplify::ProbeResult;
use crate::classes::Class;
use crate::flood::Tally;
use crate::legit::{Outcome, Phase, Sample};
use crate::server::Memory;

/// Legitimate success rate at least this (issue #11, "What to build" 2).
pub const MIN_SUCCESS: f64 = 0.99;
/// p99 under a flood at most this many times the unloaded p99.
pub const MAX_P99_FACTOR: f64 = 5.0;
/// Bytes toward an unvalidated address at most this many times the bytes
/// received from it (issue #11, "What to build" 3).
pub const MAX_AMPLIFICATION: f64 = 3.0;
/// "Bounded RSS", as this program reads it: the peak at most this much
/// above the resident size before the flood...
pub const MAX_PEAK_GROWTH_KIB: u64 = 64 * 1024;
/// ... and the resident size after the recovery time at most this much
/// above it (memory returned after a flood).
pub const MAX_AFTER_GROWTH_KIB: u64 = 16 * 1024;

/// One flood class's measurements.
#[derive(Debug)]
pub struct ClassResult {
    pub class: Class,
    pub tally: Tally,
    pub pps: u32,
    pub clients: Outcome,
    pub before: Option<Memory>,
    pub peak_kib: u64,
    pub after: Option<Memory>,
    pub alive: bool,
    /// The flood was stopped early because the server passed the RSS cap.
    pub capped: bool,
    pub spoof: Option<&'static str>,
    pub server_stats: String,
}

/// Successes and latencies of one phase's calls.
#[derive(Clone, Copy, Debug, Default)]
pub struct Summary {
    pub ok: usize,
    pub total: usize,
    pub p50: Option<Duration>,
    pub p99: Option<Duration>,
}

impl Summary {
    /// The calls of `phase` in `samples`; latencies of successful calls.
    pub fn of(samples: &[Sample], phase: Phase) -> Self {
        let mine: Vec<&Sample> = samples.iter().filter(|s| s.phase == phase).collect();
        let mut ok: Vec<Duration> = mine.iter().filter(|s| s.ok).map(|s| s.latency).collect();
        ok.sort();
        Self {
            ok: ok.len(),
            total: mine.len(),
            p50: quantile(&ok, 0.50),
            p99: quantile(&ok, 0.99),
        }
    }

    /// The success rate, if any call was made.
    pub fn rate(&self) -> Option<f64> {
        (self.total > 0).then(|| self.ok as f64 / self.total as f64)
    }

    fn cell(&self) -> String {
        match self.rate() {
            Some(r) => format!("{}/{} ({:.1} %)", self.ok, self.total, 100.0 * r),
            None => "no calls".into(),
        }
    }

    fn latency_cell(&self) -> String {
        match (self.p50, self.p99) {
            (Some(a), Some(b)) => format!("{} / {}", ms(a), ms(b)),
            _ => "—".into(),
        }
    }
}

fn ms(d: Duration) -> String {
    let v = d.as_secs_f64() * 1e3;
    if v < 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.0}")
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

impl ClassResult {
    fn established(&self, phase: Phase) -> Summary {
        Summary::of(&self.clients.established, phase)
    }

    fn newcomers(&self, phase: Phase) -> Summary {
        Summary::of(&self.clients.new_clients, phase)
    }

    /// The CI's only requirement: the server lives and the legitimate
    /// client succeeded at least once in the run.
    pub fn live(&self) -> bool {
        self.alive && self.clients.established.iter().any(|s| s.ok)
    }
}

/// The flood table (markdown).
pub fn flood_table(results: &[ClassResult]) -> String {
    let mut t = String::new();
    t.push_str("| class | flood sent (datagrams/s) | established client, flood: ok | unloaded p50 / p99 ms | flood p50 / p99 ms | after flood: ok | new clients, flood: ok | server RSS before → peak → after (MiB) | bytes back to attacker sockets ÷ sent | server datagrams in / out (its counters) | server alive |\n");
    t.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for r in results {
        let secs = r.tally.elapsed.as_secs_f64().max(1e-3);
        let rate = r.tally.sent as f64 / secs;
        let sent = format!(
            "{} ({:.0}/s of {}{}){}",
            r.tally.sent,
            rate,
            r.pps,
            if r.tally.skipped > 0 {
                ", fell behind"
            } else {
                ""
            },
            if r.capped { ", stopped at RSS cap" } else { "" }
        );
        let rss = match (r.before, r.after) {
            (Some(b), Some(a)) => format!(
                "{} → {} → {}",
                mib(b.rss_kib),
                mib(r.peak_kib),
                mib(a.rss_kib)
            ),
            _ => "unreadable".into(),
        };
        let back = if r.class.pool() > 0 {
            format!(
                "{} B ÷ {} B = {:.2}",
                r.tally.back_bytes,
                r.tally.sent_bytes,
                r.tally.back_bytes as f64 / r.tally.sent_bytes.max(1) as f64
            )
        } else {
            "spoofed: not seen".into()
        };
        let _ = writeln!(
            t,
            "| {}{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.class.label(),
            r.spoof
                .map_or_else(String::new, |s| format!(" (sources: {s})")),
            sent,
            r.established(Phase::Flood).cell(),
            r.established(Phase::Baseline).latency_cell(),
            r.established(Phase::Flood).latency_cell(),
            r.established(Phase::After).cell(),
            r.newcomers(Phase::Flood).cell(),
            rss,
            back,
            server_counters(&r.server_stats),
            if r.alive { "yes" } else { "**no**" },
        );
    }
    t
}

/// "in / out" from the server's last counter line ("server: N datagrams
/// out, M in, ...").
fn server_counters(line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    let out = words
        .iter()
        .position(|w| *w == "datagrams")
        .and_then(|i| words.get(i.wrapping_sub(1)));
    let inn = words
        .iter()
        .position(|w| *w == "in,")
        .and_then(|i| words.get(i.wrapping_sub(1)));
    match (inn, out) {
        (Some(i), Some(o)) => format!("{i} / {o}"),
        _ => "—".into(),
    }
}

/// For a probe that opens with a PSK hello: the bytes back beyond what the
/// hello alone brings ÷ the bytes sent beyond the hello, i.e. what the
/// probe's own packet type causes.
fn beyond_hello(results: &[ProbeResult], r: &ProbeResult) -> Option<f64> {
    let hello = results.iter().find(|h| h.name.starts_with("PSK hello ("))?;
    r.after_hello.then(|| {
        r.back_bytes.saturating_sub(hello.back_bytes) as f64
            / r.sent_bytes.saturating_sub(hello.sent_bytes).max(1) as f64
    })
}

/// The amplification table (markdown).
pub fn amplification_table(results: &[ProbeResult]) -> String {
    let mut t = String::new();
    t.push_str("| probe (from one fresh address) | sent: datagrams / bytes | back: datagrams / bytes | ratio | beyond the hello alone | packets back, by type |\n");
    t.push_str("|---|---:|---:|---:|---:|---|\n");
    for r in results {
        let beyond = beyond_hello(results, r).map_or_else(|| "—".into(), |v| format!("{v:.2}"));
        let types: Vec<String> = r
            .back_types
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(
            t,
            "| {} | {} / {} | {} / {} | {:.2}{} | {} | {} |",
            r.name,
            r.sent,
            r.sent_bytes,
            r.back,
            r.back_bytes,
            r.ratio(),
            if r.cut_off {
                " (still sending at the time limit)"
            } else {
                ""
            },
            beyond,
            if types.is_empty() {
                "—".into()
            } else {
                types.join(", ")
            },
        );
    }
    t
}

/// The threshold lines and how many were missed.
pub fn verdicts(classes: &[ClassResult], probes: &[ProbeResult]) -> (String, usize) {
    let mut out = String::new();
    let mut misses = 0;
    let mut line = |pass: bool, text: String| {
        misses += usize::from(!pass);
        let _ = writeln!(out, "{} {text}", if pass { "PASS" } else { "MISS" });
    };
    for r in classes {
        let name = r.class.label();
        let flood = r.established(Phase::Flood);
        let rate = flood.rate().unwrap_or(0.0);
        line(
            rate >= MIN_SUCCESS,
            format!(
                "{name}: established client success {:.1} % (≥ {:.0} %)",
                100.0 * rate,
                100.0 * MIN_SUCCESS
            ),
        );
        let newcomers = r.newcomers(Phase::Flood);
        let new_rate = newcomers.rate().unwrap_or(0.0);
        line(
            new_rate >= MIN_SUCCESS,
            format!(
                "{name}: new clients {}/{} succeeded (≥ {:.0} %)",
                newcomers.ok,
                newcomers.total,
                100.0 * MIN_SUCCESS
            ),
        );
        let base = r.established(Phase::Baseline).p99;
        match (base, flood.p99) {
            (Some(b), Some(f)) => line(
                f.as_secs_f64() <= MAX_P99_FACTOR * b.as_secs_f64(),
                format!(
                    "{name}: p99 {} ms under the flood, {:.1}× the unloaded {} ms (≤ {MAX_P99_FACTOR}×)",
                    ms(f),
                    f.as_secs_f64() / b.as_secs_f64().max(1e-9),
                    ms(b)
                ),
            ),
            _ => line(false, format!("{name}: p99 not measurable (no successful calls)")),
        }
        match (r.before, r.after) {
            (Some(b), Some(a)) => {
                let peak = r.peak_kib.saturating_sub(b.rss_kib);
                let kept = a.rss_kib.saturating_sub(b.rss_kib);
                line(
                    peak <= MAX_PEAK_GROWTH_KIB && kept <= MAX_AFTER_GROWTH_KIB && !r.capped,
                    format!(
                        "{name}: RSS +{} MiB at the peak (≤ {}), +{} MiB after (≤ {}){}",
                        mib(peak),
                        mib(MAX_PEAK_GROWTH_KIB),
                        mib(kept),
                        mib(MAX_AFTER_GROWTH_KIB),
                        if r.capped {
                            ", flood stopped at the RSS cap"
                        } else {
                            ""
                        }
                    ),
                );
            }
            _ => line(false, format!("{name}: RSS unreadable")),
        }
        line(
            r.live(),
            format!("{name}: server alive and at least one legitimate success"),
        );
    }
    for p in probes {
        // A probe behind a hello is judged by what its own packets add.
        let (ratio, what) = match beyond_hello(probes, p) {
            Some(v) => (v, "beyond the hello's"),
            None => (p.ratio(), "in all"),
        };
        line(
            ratio <= MAX_AMPLIFICATION,
            format!(
                "(g) {}: amplification {ratio:.2}× {what} (≤ {MAX_AMPLIFICATION}×)",
                p.name
            ),
        );
    }
    (out, misses)
}
