//! The results: per class, what the attack did and what the server and
//! its legitimate users saw before, during and after it; a markdown table
//! with one row per class (the one `docs/security.md` carries), the
//! amplification table, the checks (`checks.rs`) as PASS/MISS lines, and
//! one machine-readable `CHECK` line per check for the tests.

use std::fmt::Write as _;
use std::time::Duration;

use smt::stats::quantile;

use crate::amplify::ProbeResult;
use crate::checks::{checks, CheckKind, MAX_AFTER_GROWTH, MAX_AMPLIFICATION};
use crate::classes::Class;
use crate::legit::{Outcome, Phase, Sample};
use crate::observe::{SocketQueues, ThreadLoad};
use crate::scrape::Gauges;
use crate::server::Memory;

/// One attack class's measurements.
#[derive(Debug)]
pub struct ClassResult {
    pub class: Class,
    /// What the attacker sent, in a few words with figures.
    pub attack: String,
    pub clients: Outcome,
    /// Resident memory at the end of the unloaded period ("idle").
    pub before: Option<Memory>,
    pub peak_kib: u64,
    /// ... and at the end of the recovery time.
    pub after: Option<Memory>,
    pub alive: bool,
    /// The attack was stopped early because the server passed the RSS cap.
    pub capped: bool,
    /// From the attack's end to the first legitimate success after it.
    pub recovery: Option<Duration>,
    /// The server socket's memory once the legitimate clients stopped.
    pub queues: Option<SocketQueues>,
    /// The server's threads' CPU shares over a second once the legitimate
    /// clients stopped.
    pub threads: Vec<ThreadLoad>,
    pub server_stats: String,
    /// The recovery time (the "after" of the RSS figure).
    pub recovery_time: Duration,
}

/// Successes and latencies of one phase's calls.
#[derive(Clone, Copy, Debug, Default)]
pub struct Summary {
    pub ok: usize,
    pub total: usize,
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
            p99: quantile(&ok, 0.99),
        }
    }

    /// The success rate, if any call was made.
    pub fn rate(&self) -> Option<f64> {
        (self.total > 0).then(|| self.ok as f64 / self.total as f64)
    }

    pub(crate) fn percent(&self) -> String {
        match self.rate() {
            Some(r) => format!("{:.1} %", 100.0 * r),
            None => "—".into(),
        }
    }
}

pub(crate) fn ms(d: Duration) -> String {
    let v = d.as_secs_f64() * 1e3;
    if v < 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.0}")
    }
}

pub(crate) fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

impl ClassResult {
    pub(crate) fn established(&self, phase: Phase) -> Summary {
        Summary::of(&self.clients.established, phase)
    }

    pub(crate) fn newcomers(&self, phase: Phase) -> Summary {
        Summary::of(&self.clients.new_clients, phase)
    }

    pub(crate) fn scrapes(&self, phase: Phase) -> Summary {
        Summary::of(&self.clients.scrapes, phase)
    }

    /// The server's sessions and handshakes at their most during the
    /// attack, as its metrics said.
    pub(crate) fn held_peak(&self) -> Option<Gauges> {
        let during = self
            .clients
            .gauges
            .iter()
            .filter(|(p, _)| *p == Phase::Flood);
        during.map(|(_, g)| *g).reduce(|a, b| Gauges {
            sessions: a.sessions.max(b.sessions),
            handshakes: a.handshakes.max(b.handshakes),
            unreachable_reports: a.unreachable_reports.max(b.unreachable_reports),
        })
    }

    /// ICMP errors the server's socket reported to it, by its counter at
    /// the last scrape.
    pub(crate) fn unreachable_reports(&self) -> Option<u64> {
        self.clients
            .gauges
            .iter()
            .map(|(_, g)| g.unreachable_reports)
            .max()
    }

    /// The server lives and the legitimate client succeeded at least once
    /// in the run: what makes the program fail (exit 1) when missed.
    pub fn live(&self) -> bool {
        self.alive && self.clients.established.iter().any(|s| s.ok)
    }

    /// A scrape succeeded after the attack's end.
    pub(crate) fn scraped_after(&self) -> bool {
        self.clients
            .scrapes
            .iter()
            .any(|s| s.phase == Phase::After && s.ok)
    }

    pub(crate) fn busiest(&self) -> Option<&ThreadLoad> {
        self.threads.first()
    }

    pub(crate) fn rss_after_ok(&self) -> Option<bool> {
        let (b, a) = (self.before?, self.after?);
        Some(a.rss_kib as f64 <= b.rss_kib as f64 * (1.0 + MAX_AFTER_GROWTH))
    }
}

/// The class table (markdown), one row per class, as `docs/security.md`
/// carries it.
pub fn class_table(results: &[ClassResult]) -> String {
    let mut t = String::new();
    t.push_str("| class | attack | legitimate calls ok: before / during / after | new clients ok during | p99 ms: before → during | first success after the end | server RSS MiB: idle → peak → after | server socket after: queued / buffer, drops | busiest server thread after | server held at peak: sessions / handshakes | ICMP errors the server read | targets missed | bound that holds it |\n");
    t.push_str("|---|---|---|---:|---|---:|---|---|---|---:|---:|---|---|\n");
    for r in results {
        let calls = format!(
            "{} / {} / {}",
            r.established(Phase::Baseline).percent(),
            r.established(Phase::Flood).percent(),
            r.established(Phase::After).percent()
        );
        let p99 = |p: Phase| r.established(p).p99.map_or_else(|| "—".into(), ms);
        let rss = match (r.before, r.after) {
            (Some(b), Some(a)) => format!(
                "{} → {} → {}",
                mib(b.rss_kib),
                mib(r.peak_kib),
                mib(a.rss_kib)
            ),
            _ => "unreadable".into(),
        };
        let missed: Vec<&str> = checks(r)
            .iter()
            .filter(|c| c.kind == CheckKind::Target && !c.pass)
            .map(|c| c.name)
            .collect();
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} → {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.class.label(),
            r.attack,
            calls,
            {
                let n = r.newcomers(Phase::Flood);
                format!("{}/{}", n.ok, n.total)
            },
            p99(Phase::Baseline),
            p99(Phase::Flood),
            r.recovery
                .map_or_else(|| "**none**".into(), |d| format!("{} ms", ms(d))),
            rss,
            r.queues.map_or_else(|| "—".into(), |q| q.to_string()),
            r.busiest().map_or_else(|| "—".into(), |b| b.to_string()),
            r.held_peak().map_or_else(
                || "—".into(),
                |g| format!("{} / {}", g.sessions, g.handshakes)
            ),
            r.unreachable_reports()
                .map_or_else(|| "—".into(), |n| n.to_string()),
            if missed.is_empty() {
                "none".to_string()
            } else {
                missed.join(", ")
            },
            r.class.bound(),
        );
    }
    t
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

/// The target lines (PASS/MISS), the `CHECK` lines, and how many targets
/// were missed.
pub fn verdicts(classes: &[ClassResult], probes: &[ProbeResult]) -> (String, usize) {
    let mut out = String::new();
    let mut misses = 0;
    for r in classes {
        for c in checks(r) {
            let verdict = if c.pass { "PASS" } else { "MISS" };
            misses += usize::from(!c.pass && c.kind == CheckKind::Target);
            let _ = writeln!(
                out,
                "{verdict} {}: {}: {}",
                r.class.label(),
                c.name,
                c.detail
            );
        }
    }
    for p in probes {
        // A probe behind a hello is judged by what its own packets add.
        let (ratio, what) = match beyond_hello(probes, p) {
            Some(v) => (v, "beyond the hello's"),
            None => (p.ratio(), "in all"),
        };
        let pass = ratio <= MAX_AMPLIFICATION;
        misses += usize::from(!pass);
        let _ = writeln!(
            out,
            "{} (g) {}: amplification {ratio:.2}× {what} (≤ {MAX_AMPLIFICATION}×)",
            if pass { "PASS" } else { "MISS" },
            p.name
        );
    }
    (out, misses)
}

/// One `CHECK <class> <check> <after|target> <PASS|FAIL> <detail>` line per
/// check, for the tests to read.
pub fn check_lines(classes: &[ClassResult]) -> String {
    let mut out = String::new();
    for r in classes {
        for c in checks(r) {
            let _ = writeln!(
                out,
                "CHECK {} {} {} {} {}",
                r.class.id(),
                c.name,
                match c.kind {
                    CheckKind::After => "after",
                    CheckKind::Target => "target",
                },
                if c.pass { "PASS" } else { "FAIL" },
                c.detail
            );
        }
    }
    out
}
