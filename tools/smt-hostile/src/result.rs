//! What one attack class measured: what the attacker sent, what the
//! legitimate clients saw in each phase, the server's memory, queues and
//! threads (read by `checks.rs` and printed by `report.rs`).

use std::time::Duration;

use smt::stats::quantile;

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
}
