//! `bench-handshake --probe`: where the slow sessions spent their time.
//!
//! Each session's time to first response is set beside what every thread
//! of the process did meanwhile (CPU time, context switches) and the page
//! faults, all read from `/proc` just before and just after the call. The
//! summary compares the sessions slower than 2× the median with the rest:
//! more CPU in one role means work on the path (a cold cache, a lazy
//! set-up, a map growing); more time that none of our threads ran means
//! waiting (another process on the CPU, a timer, a wake-up that came late).
//!
//! The figures are approximate: a reading yields once (so the caller's own
//! CPU time is current), and a thread that was ready to run may run in
//! that moment and be counted; the sum over the threads can exceed the
//! session's time by a few tens of microseconds. Compare slow sessions
//! with the rest, not one thread's figure with the session's time.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::report::micros;
use crate::threads::Sample;

/// The roles of the threads, in print order ("client" is the new client
/// endpoint's background thread; "main" makes the call).
const ROLES: [&str; 5] = ["main", "client", "server", "echo", "warm"];

/// One session's time and what the threads did in it.
#[derive(Debug)]
pub struct Probe {
    index: usize,
    measured: bool,
    elapsed: Duration,
    by_role: BTreeMap<&'static str, Sample>,
    minor_faults: u64,
}

impl Probe {
    pub fn of(
        index: usize,
        measured: bool,
        elapsed: Duration,
        (by_role, minor_faults): (BTreeMap<&'static str, Sample>, u64),
    ) -> Self {
        Self {
            index,
            measured,
            elapsed,
            by_role,
            minor_faults,
        }
    }

    /// One line on stderr.
    pub fn print(&self, method: &str) {
        let cpu: Vec<_> = ROLES
            .iter()
            .map(|r| format!("{r} {:.1}", self.cpu_us(r)))
            .collect();
        let s = self.switches();
        eprintln!(
            "{method} #{}{}: {:.1} us; cpu us: {}; none of ours {:.1} us; switches {} voluntary {} involuntary; {} minor faults",
            self.index,
            if self.measured { "" } else { " (warm-up)" },
            micros(self.elapsed),
            cpu.join(", "),
            self.not_ours_us(),
            s.voluntary,
            s.involuntary,
            self.minor_faults,
        );
    }

    /// CPU time of all our threads in the session: pinned to one CPU, the
    /// session's time without other processes' share of that CPU.
    fn ours_us(&self) -> f64 {
        self.by_role.values().map(|s| s.cpu_ns as f64 / 1e3).sum()
    }

    fn cpu_us(&self, role: &str) -> f64 {
        self.by_role
            .get(role)
            .map_or(0.0, |s| s.cpu_ns as f64 / 1e3)
    }

    /// The session's time that no thread of this process was on a CPU
    /// (pinned to one CPU: another process ran, or the CPU was idle).
    fn not_ours_us(&self) -> f64 {
        (micros(self.elapsed) - self.ours_us()).max(0.0)
    }

    fn switches(&self) -> Sample {
        let mut total = Sample::default();
        for s in self.by_role.values() {
            total.voluntary += s.voluntary;
            total.involuntary += s.involuntary;
        }
        total
    }
}

/// The means of a group of sessions.
#[derive(Debug, Default)]
struct Means {
    sessions: usize,
    elapsed_us: f64,
    cpu_us: [f64; ROLES.len()],
    not_ours_us: f64,
    voluntary: f64,
    involuntary: f64,
    minor_faults: f64,
}

impl Means {
    fn of<'a>(probes: impl Iterator<Item = &'a Probe>) -> Self {
        let mut m = Self::default();
        for p in probes {
            m.sessions += 1;
            m.elapsed_us += micros(p.elapsed);
            for (sum, role) in m.cpu_us.iter_mut().zip(ROLES) {
                *sum += p.cpu_us(role);
            }
            m.not_ours_us += p.not_ours_us();
            let s = p.switches();
            m.voluntary += s.voluntary as f64;
            m.involuntary += s.involuntary as f64;
            m.minor_faults += p.minor_faults as f64;
        }
        let n = m.sessions.max(1) as f64;
        for v in [
            &mut m.elapsed_us,
            &mut m.not_ours_us,
            &mut m.voluntary,
            &mut m.involuntary,
            &mut m.minor_faults,
        ] {
            *v /= n;
        }
        m.cpu_us.iter_mut().for_each(|v| *v /= n);
        m
    }

    fn line(&self, label: &str) -> String {
        let cpu: Vec<_> = self.cpu_us.iter().map(|v| format!("{v:>7.1}")).collect();
        format!(
            "  {label:<12} {:>5} {:>9.1} {} {:>9.1} {:>6.2} {:>6.2} {:>7.2}",
            self.sessions,
            self.elapsed_us,
            cpu.join(" "),
            self.not_ours_us,
            self.voluntary,
            self.involuntary,
            self.minor_faults,
        )
    }

    fn json(&self) -> Value {
        let cpu: serde_json::Map<_, _> = ROLES
            .iter()
            .zip(self.cpu_us)
            .map(|(r, v)| (r.to_string(), json!(v)))
            .collect();
        json!({
            "sessions": self.sessions,
            "elapsed_us": self.elapsed_us,
            "cpu_us": cpu,
            "none_of_ours_us": self.not_ours_us,
            "voluntary_switches": self.voluntary,
            "involuntary_switches": self.involuntary,
            "minor_faults": self.minor_faults,
        })
    }
}

/// The sessions slower than 2× the median against the rest, for one method.
#[derive(Debug)]
pub struct Summary {
    method: &'static str,
    /// Session numbers (counting the warm-up) of the slow ones, in order.
    slow_at: Vec<usize>,
    slow: Means,
    rest: Means,
    /// p50 and p99 of our threads' CPU time per session.
    ours_p50_us: f64,
    ours_p99_us: f64,
}

impl Summary {
    pub fn of(method: &'static str, p50: Duration, probes: &[Probe]) -> Self {
        let is_slow = |p: &&Probe| p.elapsed > 2 * p50;
        let mut ours: Vec<f64> = probes.iter().map(Probe::ours_us).collect();
        ours.sort_by(f64::total_cmp);
        let q = |p: f64| {
            let i = ((ours.len() as f64 * p).ceil() as usize).clamp(1, ours.len().max(1));
            ours.get(i - 1).copied().unwrap_or_default()
        };
        Self {
            ours_p50_us: q(0.5),
            ours_p99_us: q(0.99),
            method,
            slow_at: probes.iter().filter(is_slow).map(|p| p.index).collect(),
            slow: Means::of(probes.iter().filter(is_slow)),
            rest: Means::of(probes.iter().filter(|p| !is_slow(p))),
        }
    }

    pub fn print(&self) {
        say!(
            "{}: sessions slower than 2x p50 at {:?}",
            self.method,
            self.slow_at
        );
        say!(
            "  {:<12} {:>5} {:>9} {:>7} {:>7} {:>7} {:>7} {:>7} {:>9} {:>6} {:>6} {:>7}",
            "mean of",
            "n",
            "time_us",
            ROLES[0],
            ROLES[1],
            ROLES[2],
            ROLES[3],
            ROLES[4],
            "others_us",
            "vol",
            "invol",
            "minflt"
        );
        say!("{}", self.slow.line("slow"));
        say!("{}", self.rest.line("the rest"));
        say!(
            "  our threads' CPU per session (the tail without other processes, pinned): p50 {:.1} us, p99 {:.1} us, p99/p50 {:.2}",
            self.ours_p50_us,
            self.ours_p99_us,
            self.ours_p99_us / self.ours_p50_us.max(f64::MIN_POSITIVE)
        );
    }

    pub fn json(&self) -> Value {
        json!({
            "method": self.method,
            "slow_at": self.slow_at,
            "ours_cpu_p50_us": self.ours_p50_us,
            "ours_cpu_p99_us": self.ours_p99_us,
            "slow": self.slow.json(),
            "rest": self.rest.json(),
        })
    }
}
