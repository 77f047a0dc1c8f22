//! The report of what each class measured (`result.rs`): per class, what the attack did and what the server and
//! its legitimate users saw before, during and after it; a markdown table
//! with one row per class (the one `docs/security.md` carries), the
//! amplification table, the checks (`checks.rs`) as PASS/MISS lines, and
//! one machine-readable `CHECK` line per check for the tests.

use std::fmt::Write as _;

use crate::amplify::ProbeResult;
use crate::checks::{checks, CheckKind, MAX_AMPLIFICATION};
use crate::legit::Phase;
use crate::result::{mib, ms, ClassResult};

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
