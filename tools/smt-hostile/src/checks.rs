//! What is checked of each class: the "after" checks, which hold no
//! timing and which the CI test asserts, and the targets of issues #11
//! and #22, which the long variant prints as PASS/MISS.

use crate::legit::Phase;
use crate::observe::{BUSY_SHARE, MAX_LEFT_QUEUED};
use crate::result::{mib, ms, ClassResult};
use std::time::Duration;

/// Legitimate success rate during an attack at least this.
pub const MIN_SUCCESS: f64 = 0.99;
/// p99 under an attack at most this many times the unloaded p99.
pub const MAX_P99_FACTOR: f64 = 5.0;
/// Bytes toward an unvalidated address at most this many times the bytes
/// received from it.
pub const MAX_AMPLIFICATION: f64 = 3.0;
/// The server's resident size at its peak during an attack, at most.
pub const MAX_PEAK_KIB: u64 = 64 * 1024;
/// ... and after the recovery time, at most this much above its idle size
/// (as a fraction of it).
pub const MAX_AFTER_GROWTH: f64 = 0.10;
/// Legitimate calls succeed again within this of an attack's end.
pub const MAX_RECOVERY: Duration = Duration::from_secs(1);

/// Whether a check is one of the "after" checks (short mode: the CI test
/// asserts them) or one of the long mode's targets (printed, never
/// asserted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckKind {
    After,
    Target,
}

/// One check of one class.
#[derive(Clone, Debug)]
pub struct Check {
    pub name: &'static str,
    pub kind: CheckKind,
    pub pass: bool,
    pub detail: String,
}

/// Every check of a class: first the "after" checks (no timing in them),
/// then the targets.
pub fn checks(r: &ClassResult) -> Vec<Check> {
    let mut out = Vec::new();
    let mut add = |name, kind, pass, detail: String| {
        out.push(Check {
            name,
            kind,
            pass,
            detail,
        })
    };
    use CheckKind::After;
    add(
        "alive",
        After,
        r.alive,
        format!("server process alive: {}", r.alive),
    );
    let recovered = r.recovery.is_some();
    add(
        "recovers",
        After,
        recovered,
        match r.recovery {
            Some(t) => format!("a legitimate call succeeded {} ms after the end", ms(t)),
            None => format!(
                "no legitimate call succeeded in the {:.0} s after the end",
                r.recovery_time.as_secs_f64()
            ),
        },
    );
    add(
        "scrapes",
        After,
        r.scraped_after(),
        format!(
            "metrics scrapes after the end: {}",
            r.scrapes(Phase::After).percent()
        ),
    );
    let queues_ok = r.queues.is_some_and(|q| !q.stuck());
    add(
        "queues",
        After,
        queues_ok,
        match r.queues {
            Some(q) => format!(
                "server socket once idle: {q} (queued / buffer: receive and error queues together; at most {} KiB may be left)",
                MAX_LEFT_QUEUED / 1024
            ),
            None => "server socket not found".into(),
        },
    );
    let busy = r.busiest().filter(|t| t.share >= BUSY_SHARE);
    add(
        "threads",
        After,
        busy.is_none() && !r.threads.is_empty(),
        match (r.busiest(), r.threads.is_empty()) {
            (_, true) => "threads unreadable".into(),
            (Some(t), false) => format!(
                "busiest thread over 1 s after the clients stopped: {t} (busy from {:.0} %)",
                100.0 * BUSY_SHARE
            ),
            (None, false) => "no threads".into(),
        },
    );
    let kept = r.after.map(|m| m.rss_kib);
    add(
        "memory",
        After,
        kept.is_some_and(|k| k <= MAX_PEAK_KIB),
        match kept {
            Some(k) => format!(
                "RSS {:.0} s after the end: {} MiB (at most {}, the peak's bound)",
                r.recovery_time.as_secs_f64(),
                mib(k),
                mib(MAX_PEAK_KIB)
            ),
            None => "RSS unreadable".into(),
        },
    );
    target_checks(r, &mut add);
    out
}

fn rss_detail(r: &ClassResult) -> String {
    match (r.before, r.after) {
        (Some(b), Some(a)) => format!(
            "RSS {:.0} s after: {} MiB, idle {} MiB (≤ +{:.0} %)",
            r.recovery_time.as_secs_f64(),
            mib(a.rss_kib),
            mib(b.rss_kib),
            100.0 * MAX_AFTER_GROWTH
        ),
        _ => "RSS unreadable".into(),
    }
}

fn target_checks(r: &ClassResult, add: &mut impl FnMut(&'static str, CheckKind, bool, String)) {
    use CheckKind::Target;
    let within = r.recovery.is_some_and(|t| t <= MAX_RECOVERY);
    add(
        "recovers-within-1s",
        Target,
        within,
        match r.recovery {
            Some(t) => format!(
                "first legitimate success {} ms after the end (≤ 1000)",
                ms(t)
            ),
            None => "no legitimate success after the end".into(),
        },
    );
    let during = r.established(Phase::Flood);
    let rate = during.rate().unwrap_or(0.0);
    add(
        "success-during",
        Target,
        rate >= MIN_SUCCESS,
        format!(
            "established client {}/{} ({}) (≥ {:.0} %)",
            during.ok,
            during.total,
            during.percent(),
            100.0 * MIN_SUCCESS
        ),
    );
    let new = r.newcomers(Phase::Flood);
    add(
        "new-clients-during",
        Target,
        new.rate().unwrap_or(0.0) >= MIN_SUCCESS,
        format!(
            "new clients {}/{} (≥ {:.0} %)",
            new.ok,
            new.total,
            100.0 * MIN_SUCCESS
        ),
    );
    let (base, flood) = (r.established(Phase::Baseline).p99, during.p99);
    let (pass, detail) = match (base, flood) {
        (Some(b), Some(f)) => (
            f.as_secs_f64() <= MAX_P99_FACTOR * b.as_secs_f64(),
            format!(
                "p99 {} ms during, {:.1}× the unloaded {} ms (≤ {MAX_P99_FACTOR}×)",
                ms(f),
                f.as_secs_f64() / b.as_secs_f64().max(1e-9),
                ms(b)
            ),
        ),
        _ => (false, "p99 not measurable (no successful calls)".into()),
    };
    add("p99-during", Target, pass, detail);
    let scrapes = r.scrapes(Phase::Flood);
    add(
        "scrapes-during",
        Target,
        scrapes.rate().unwrap_or(0.0) >= MIN_SUCCESS,
        format!(
            "metrics scrapes {}/{} answered within 5 s (≥ {:.0} %)",
            scrapes.ok,
            scrapes.total,
            100.0 * MIN_SUCCESS
        ),
    );
    add(
        "rss-peak",
        Target,
        r.peak_kib <= MAX_PEAK_KIB && !r.capped,
        format!(
            "RSS peak {} MiB (≤ {}){}",
            mib(r.peak_kib),
            mib(MAX_PEAK_KIB),
            if r.capped {
                ", attack stopped at the RSS cap"
            } else {
                ""
            }
        ),
    );
    add(
        "rss-after",
        Target,
        rss_after_ok(r) == Some(true),
        rss_detail(r),
    );
}

/// The server's RSS after the recovery time is within MAX_AFTER_GROWTH of
/// its idle RSS (None without both readings).
fn rss_after_ok(r: &ClassResult) -> Option<bool> {
    let (b, a) = (r.before?, r.after?);
    Some(a.rss_kib as f64 <= b.rss_kib as f64 * (1.0 + MAX_AFTER_GROWTH))
}
