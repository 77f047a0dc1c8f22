//! Experiment 4(a) of issue #25 (seed 004, MTP Fig. 5) as a deterministic
//! simulation: a switch alternates one long transfer between two paths of
//! different rate; the sender keeps either one window per pathlet
//! (`smt_proto::pathlet::PathletWindows`) or one DCTCP window
//! (`SingleWindow`, RFC 8257). Goodput over time and convergence after
//! each switch. Only the sans-IO module runs for real: the paths are a
//! simple queue model (FIFO, tail drop, CE above a threshold, serialiser,
//! delay), the receiver counts with `EchoCounter` and echoes every packet.
//! Not the end-to-end experiment (that needs the endpoint's hook,
//! `docs/innetwork.md` § 6).
//!
//! Measured (AMD EPYC, deterministic, so any machine gives the same
//! figures), 20 periods: per-pathlet windows 529.0 Mbit/s mean goodput
//! after the first period against 520.2 for one DCTCP window (1.02x);
//! after a switch to the fast path, 90 % of its rate within 0.80 ms
//! against 2.31 ms (the window learnt there is still there); the slow
//! path's queue peaks at 25 packets against 38 (one window arrives from
//! the fast path far too large). The goodput gain is small because half
//! of every period is on the slow path, where both senders are limited by
//! its rate (at most 550 Mbit/s on average). An earlier version of
//! `PathletWindows` kept bytes in flight per window, so bytes sent under
//! one pathlet's window but echoed from another stayed counted where they
//! were not (496 against 520 Mbit/s, 4.0 ms to converge); the flight is
//! now per message (`bytes_echoed_from_another_pathlet_leave_the_flight_once`).
//!
//! `cargo run --release -p smt-forwarder --example pathlet_alternation
//! [-- --periods N --csv FILE]`
//!
//! Scale: the paper's 1 µs links, 384 µs alternation and 32 µs samples,
//! times 100 (100 µs one way, 38.4 ms, 3.2 ms), and rates divided by 100 so
//! that a round trip holds as many packets as in the paper: 1 Gbit/s and
//! 100 Mbit/s. (The sentence naming the paths is cut in our copy of the
//! paper after "(10 Gbps)": we assume a 100 Gbit/s and a 10 Gbit/s path.
//! With two equal paths, or with paths whose bandwidth-delay product is
//! small next to the marking threshold, DCTCP's window is the same on both
//! and there is nothing for per-pathlet windows to win.) Buffer 128
//! packets, marking above 20, as in the paper. Packets of 1500 bytes.

use std::collections::VecDeque;
use std::io::Write;
use std::time::{Duration, Instant};

use smt_proto::pathlet::{
    DctcpParams, EchoCounter, PathletParams, PathletWindows, SingleWindow, Windows,
};
use smt_proto::wire::{PathEchoRepr, PathRepr, PathSlot, PathletClass};

const MSS: u64 = 1500;
const STEP_NS: u64 = 1_000;
const DELAY_NS: u64 = 100_000;
const PERIOD_NS: u64 = 38_400_000;
const SAMPLE_NS: u64 = 3_200_000;
/// Convergence is read on samples of one base round trip.
const FINE_NS: u64 = 400_000;
const BUFFER_PACKETS: usize = 128;
const MARK_PACKETS: usize = 20;
const RATES_BPS: [u64; 2] = [1_000_000_000, 100_000_000];
const MESSAGE: u64 = 1;

/// One path: a queue at the switch, a serialiser, a delay to the receiver.
struct Path {
    rate_bps: u64,
    queue: VecDeque<bool>,
    busy_until: u64,
    flying: VecDeque<(u64, bool)>,
    drops: u64,
    max_queue: usize,
}

impl Path {
    fn new(rate_bps: u64) -> Self {
        Self {
            rate_bps,
            queue: VecDeque::new(),
            busy_until: 0,
            flying: VecDeque::new(),
            drops: 0,
            max_queue: 0,
        }
    }

    /// A packet arrives at the switch: dropped when the buffer is full,
    /// otherwise queued with its CE mark (DCTCP's instantaneous queue).
    fn arrive(&mut self) -> bool {
        if self.queue.len() >= BUFFER_PACKETS {
            self.drops += 1;
            return false;
        }
        let ce = self.queue.len() > MARK_PACKETS;
        self.queue.push_back(ce);
        self.max_queue = self.max_queue.max(self.queue.len());
        true
    }

    fn serialise(&mut self, t: u64) {
        while self.busy_until <= t {
            let Some(ce) = self.queue.pop_front() else {
                return;
            };
            let start = self.busy_until.max(t);
            self.busy_until = start + MSS * 8 * 1_000_000_000 / self.rate_bps;
            self.flying.push_back((self.busy_until + DELAY_NS, ce));
        }
    }
}

struct Run {
    name: &'static str,
    /// Goodput per sample, bit/s.
    samples: Vec<f64>,
    /// Goodput per round trip (`FINE_NS`), bit/s.
    fine: Vec<f64>,
    drops: u64,
    max_queue: [usize; 2],
}

fn simulate(name: &'static str, cc: &mut dyn Windows, periods: u64) -> Run {
    let origin = Instant::now();
    let at = |t: u64| origin + Duration::from_nanos(t);
    let mut paths = [Path::new(RATES_BPS[0]), Path::new(RATES_BPS[1])];
    let mut counter = EchoCounter::new();
    let mut echoes: VecDeque<(u64, PathEchoRepr)> = VecDeque::new();
    let mut losses: VecDeque<u64> = VecDeque::new();
    let mut samples = Vec::new();
    let mut fine = Vec::new();
    let (mut delivered, mut delivered_fine) = (0u64, 0u64);
    let end = periods * PERIOD_NS;
    let mut t = 0;
    while t < end {
        let active = ((t / PERIOD_NS) % 2) as usize;
        for (k, p) in paths.iter_mut().enumerate() {
            p.serialise(t);
            while p.flying.front().is_some_and(|(a, _)| *a <= t) {
                let Some((_, ce)) = p.flying.pop_front() else {
                    break;
                };
                delivered += MSS;
                delivered_fine += MSS;
                let mut path = PathRepr::new(0, 0, 1);
                path.slots.push(PathSlot {
                    at: PathletClass {
                        pathlet: k as u16,
                        class: 0,
                    },
                    ce,
                    queue_bytes: (p.queue.len() as u64 * MSS) as u32,
                });
                counter.record(&path, MSS as usize, Some(MESSAGE));
                if let Some(echo) = counter.take_echo(0, 0, false) {
                    echoes.push_back((t + DELAY_NS, echo));
                }
            }
        }
        while echoes.front().is_some_and(|(a, _)| *a <= t) {
            if let Some((_, echo)) = echoes.pop_front() {
                cc.on_echo(at(t), &echo);
            }
        }
        // A drop is heard of one round trip later (the receiver's RESEND).
        while losses.front().is_some_and(|a| *a <= t) {
            losses.pop_front();
            cc.on_lost(MESSAGE, MSS);
        }
        while cc.allowance(MESSAGE) >= MSS {
            cc.on_sent(MESSAGE, MSS);
            if !paths[active].arrive() {
                losses.push_back(t + 2 * DELAY_NS);
            }
        }
        t += STEP_NS;
        if t.is_multiple_of(FINE_NS) {
            fine.push(delivered_fine as f64 * 8.0 / (FINE_NS as f64 / 1e9));
            delivered_fine = 0;
        }
        if t.is_multiple_of(SAMPLE_NS) {
            samples.push(delivered as f64 * 8.0 / (SAMPLE_NS as f64 / 1e9));
            delivered = 0;
        }
    }
    Run {
        name,
        samples,
        fine,
        drops: paths.iter().map(|p| p.drops).sum(),
        max_queue: [paths[0].max_queue, paths[1].max_queue],
    }
}

/// Time after each switch until goodput over one round trip first
/// reaches 90 % of the new path's rate; `None` if it never does in the
/// period.
fn convergence(run: &Run) -> Vec<(usize, Option<f64>)> {
    let per_period = (PERIOD_NS / FINE_NS) as usize;
    run.fine
        .chunks(per_period)
        .enumerate()
        .skip(1) // the first period is the start, not a switch
        .map(|(i, chunk)| {
            let path = i % 2;
            let target = 0.9 * RATES_BPS[path] as f64;
            let ms = chunk
                .iter()
                .position(|&g| g >= target)
                .map(|n| (n + 1) as f64 * FINE_NS as f64 / 1e6);
            (path, ms)
        })
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.iter().sum::<f64>() / v.len() as f64
}

fn summarise(run: &Run) {
    let conv = convergence(run);
    let to = |path: usize| -> (f64, usize, usize) {
        let of: Vec<&Option<f64>> = conv.iter().filter(|c| c.0 == path).map(|c| &c.1).collect();
        let hit: Vec<f64> = of.iter().filter_map(|c| **c).collect();
        (mean(&hit), hit.len(), of.len())
    };
    let (fast_ms, fast_n, fast_of) = to(0);
    let (slow_ms, slow_n, slow_of) = to(1);
    let per_period = (PERIOD_NS / SAMPLE_NS) as usize;
    let steady: Vec<f64> = run.samples.iter().skip(per_period).copied().collect();
    println!(
        "| {} | {:.1} | {:.2} ms ({fast_n}/{fast_of}) | {:.2} ms ({slow_n}/{slow_of}) | {} | {} / {} |",
        run.name,
        mean(&steady) / 1e6,
        fast_ms,
        slow_ms,
        run.drops,
        run.max_queue[0],
        run.max_queue[1],
    );
}

fn main() {
    let mut periods = 20u64;
    let mut csv = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--periods" => periods = args.next().and_then(|v| v.parse().ok()).unwrap_or(20),
            "--csv" => csv = args.next(),
            other => {
                eprintln!("unknown argument {other}: --periods N, --csv FILE");
                std::process::exit(2);
            }
        }
    }
    let dctcp = DctcpParams {
        g: 1.0 / 16.0,
        mss: MSS,
        initial_window: 10 * MSS,
        min_window: MSS,
    };
    let mut pathlets = PathletWindows::new(PathletParams {
        dctcp,
        ..PathletParams::default()
    });
    let mut single = SingleWindow::new(dctcp);
    let runs = [
        simulate("per-pathlet windows", &mut pathlets, periods),
        simulate("one DCTCP window", &mut single, periods),
    ];
    println!(
        "paths {} and {} Mbit/s, {} µs one way, switch every {} ms, {} periods, samples of {} ms",
        RATES_BPS[0] / 1_000_000,
        RATES_BPS[1] / 1_000_000,
        DELAY_NS / 1000,
        PERIOD_NS as f64 / 1e6,
        periods,
        SAMPLE_NS as f64 / 1e6
    );
    println!(
        "| sender | mean goodput after the first period (Mbit/s) | to 90 % after a switch to the fast path (switches that got there) | to 90 % after a switch to the slow path | drops | max queue fast / slow (packets) |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for run in &runs {
        summarise(run);
    }
    let ratio = mean(&runs[0].samples) / mean(&runs[1].samples);
    println!("goodput ratio per-pathlet / one window (whole run): {ratio:.2}");
    if let Some(file) = csv {
        let mut out = match std::fs::File::create(&file) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("cannot write {file}: {e}");
                std::process::exit(1);
            }
        };
        let _ = writeln!(out, "ms,per_pathlet_mbps,one_window_mbps");
        for (i, (a, b)) in runs[0].samples.iter().zip(&runs[1].samples).enumerate() {
            let ms = (i + 1) as f64 * SAMPLE_NS as f64 / 1e6;
            let _ = writeln!(out, "{ms:.1},{:.2},{:.2}", a / 1e6, b / 1e6);
        }
    }
}
