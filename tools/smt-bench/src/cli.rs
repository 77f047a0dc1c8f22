//! Command-line options and the measurement plan each mode implies.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::dist::{SizeDist, W3, W4};

/// Compare SMT with TCP, TLS 1.3/TCP, QUIC and the UDP/TCP floor on
/// loopback: same workloads, same cipher suite, same socket buffers.
#[derive(Debug, Parser)]
#[command(name = "smt-bench", version)]
pub struct Args {
    /// How long to measure: smoke (seconds, for CI), quick (< 2 min), full.
    #[arg(long, value_enum, default_value_t = Mode::Full)]
    pub mode: Mode,
    /// Shorthand for --mode quick.
    #[arg(long, conflicts_with = "smoke")]
    pub quick: bool,
    /// Shorthand for --mode smoke.
    #[arg(long)]
    pub smoke: bool,
    /// Systems to run (comma-separated names; default: all). See --list.
    #[arg(long, value_delimiter = ',')]
    pub systems: Vec<String>,
    /// Workloads to run: rtt, throughput, mixed, bulk (default: all).
    #[arg(long, value_delimiter = ',')]
    pub workloads: Vec<String>,
    /// Mixed workload: offered loads as fractions of capacity (overrides
    /// the mode's, e.g. 0.5,0.8).
    #[arg(long, value_delimiter = ',')]
    pub loads: Vec<f64>,
    /// Mixed workload: size distributions, W3 and/or W4 (overrides the
    /// mode's).
    #[arg(long, value_delimiter = ',')]
    pub dists: Vec<String>,
    /// CPU placement: pinned (client, server and driver threads on one CPU,
    /// the first this process may use),
    /// unpinned, or both. Default: both in full mode, pinned otherwise.
    #[arg(long, value_enum)]
    pub affinity: Option<AffinityChoice>,
    /// Output directory (default target/smt-bench/TIMESTAMP).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Start at once instead of waiting for an idle machine.
    #[arg(long)]
    pub no_idle_wait: bool,
    /// Busy fraction of all CPUs below which the machine counts as idle.
    #[arg(long, default_value_t = 0.10)]
    pub idle_threshold: f64,
    /// Longest wait for an idle machine before each system, in seconds
    /// (default: 60 in full mode, 3 in quick, 2 in smoke).
    #[arg(long)]
    pub idle_max_wait: Option<f64>,
    /// List the systems and exit.
    #[arg(long)]
    pub list: bool,
}

/// The workloads, in the order they run.
pub const WORKLOADS: [&str; 4] = ["rtt", "throughput", "mixed", "bulk"];

/// How much to measure: the plan's sizes, points and durations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// A few points, milliseconds each: checks that every system runs.
    Smoke,
    /// Fewer points and shorter runs than `Full`, for a quick comparison.
    Quick,
    /// The whole plan, for the published tables.
    Full,
}

/// The affinities the command line asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AffinityChoice {
    /// Every run on one CPU.
    Pinned,
    /// Every run where the scheduler puts it.
    Unpinned,
    /// Each system twice, pinned then unpinned.
    Both,
}

/// Where a run's threads may execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Affinity {
    /// Every thread of the run on one CPU.
    Pinned,
    /// The scheduler decides.
    Unpinned,
}

impl Affinity {
    /// `pinned` or `unpinned`, as the records and tables name it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pinned => "pinned",
            Self::Unpinned => "unpinned",
        }
    }
}

impl Args {
    /// The mode, `--smoke` and `--quick` overriding `--mode`.
    pub fn mode(&self) -> Mode {
        match (self.smoke, self.quick) {
            (true, _) => Mode::Smoke,
            (_, true) => Mode::Quick,
            _ => self.mode,
        }
    }

    /// The affinities to run under: `--affinity`, else both in full mode
    /// and pinned otherwise.
    pub fn affinities(&self) -> Vec<Affinity> {
        let choice = self.affinity.unwrap_or(match self.mode() {
            Mode::Full => AffinityChoice::Both,
            _ => AffinityChoice::Pinned,
        });
        match choice {
            AffinityChoice::Pinned => vec![Affinity::Pinned],
            AffinityChoice::Unpinned => vec![Affinity::Unpinned],
            AffinityChoice::Both => vec![Affinity::Pinned, Affinity::Unpinned],
        }
    }

    /// How long to wait for the machine to go idle before a system's run
    /// (`--idle-max-wait`, else 60 s in full mode, 2-3 s otherwise).
    pub fn idle_max_wait(&self) -> Duration {
        let default = match self.mode() {
            Mode::Full => 60.0,
            Mode::Quick => 3.0,
            Mode::Smoke => 2.0,
        };
        Duration::from_secs_f64(self.idle_max_wait.unwrap_or(default).max(0.0))
    }

    /// The mode's plan with the command line's overrides.
    pub fn plan(&self) -> Result<Plan, String> {
        if let Some(w) = self
            .workloads
            .iter()
            .find(|w| !WORKLOADS.contains(&w.as_str()))
        {
            return Err(format!(
                "--workloads {w}: expected one of {}",
                WORKLOADS.join(", ")
            ));
        }
        let mut plan = Plan::for_mode(self.mode());
        if !self.loads.is_empty() {
            if let Some(bad) = self
                .loads
                .iter()
                .find(|l| !(0.0..=2.0).contains(*l) || **l <= 0.0)
            {
                return Err(format!(
                    "--loads {bad}: expected a fraction of capacity in (0, 2]"
                ));
            }
            plan.mixed_loads = self.loads.clone();
        }
        if !self.dists.is_empty() {
            plan.mixed_dists = self
                .dists
                .iter()
                .map(|d| {
                    SizeDist::by_name(d).ok_or_else(|| format!("--dists {d}: expected W3 or W4"))
                })
                .collect::<Result<_, _>>()?;
        }
        Ok(plan)
    }

    /// Whether `workload` is to run (all run when `--workloads` is empty).
    pub fn wants(&self, workload: &str) -> bool {
        self.workloads.is_empty() || self.workloads.iter().any(|w| w == workload)
    }
}

/// What to measure and for how long.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Request sizes of the rtt workload, in bytes.
    pub rtt_sizes: Vec<usize>,
    /// Request sizes of the throughput workload, in bytes.
    pub throughput_sizes: Vec<usize>,
    /// RPCs outstanding in the throughput workload, one point each.
    pub concurrency: Vec<usize>,
    /// Size distributions of the mixed workload.
    pub mixed_dists: Vec<SizeDist>,
    /// Offered load as fractions of the measured capacity.
    pub mixed_loads: Vec<f64>,
    /// Slots (most outstanding RPCs) in the mixed workload.
    pub mixed_slots: usize,
    /// Bytes of each bulk transfer's request.
    pub bulk_size: usize,
    /// Bulk transfers outstanding.
    pub bulk_concurrency: usize,
    /// Measured time per point, after `warmup`.
    pub point: Duration,
    /// Time run, unmeasured, before each point.
    pub warmup: Duration,
    /// Measured time per mixed-workload point.
    pub mixed_time: Duration,
}

impl Plan {
    /// The plan of `mode`, before command-line overrides.
    pub fn for_mode(mode: Mode) -> Self {
        let ms = Duration::from_millis;
        match mode {
            Mode::Smoke => Self {
                rtt_sizes: vec![64, 8 << 10, 1 << 20],
                throughput_sizes: vec![64, 1 << 10],
                concurrency: vec![1, 8],
                mixed_dists: vec![W3],
                mixed_loads: vec![0.5],
                mixed_slots: 16,
                bulk_size: 1 << 20,
                bulk_concurrency: 2,
                point: ms(20),
                warmup: ms(5),
                mixed_time: ms(50),
            },
            Mode::Quick => Self {
                rtt_sizes: vec![64, 1 << 10, 8 << 10, 64 << 10, 1 << 20],
                throughput_sizes: vec![64, 1 << 10, 64 << 10],
                concurrency: vec![1, 32, 150],
                mixed_dists: vec![W3],
                mixed_loads: vec![0.6],
                mixed_slots: 150,
                bulk_size: 1 << 20,
                bulk_concurrency: 4,
                point: ms(250),
                warmup: ms(50),
                mixed_time: ms(600),
            },
            Mode::Full => Self {
                rtt_sizes: vec![64, 1 << 10, 8 << 10, 64 << 10, 1 << 20],
                throughput_sizes: vec![64, 1 << 10, 8 << 10, 64 << 10],
                concurrency: vec![1, 8, 32, 150],
                mixed_dists: vec![W3, W4],
                mixed_loads: vec![0.5, 0.8],
                mixed_slots: 150,
                bulk_size: 1 << 20,
                bulk_concurrency: 4,
                point: ms(1000),
                warmup: ms(200),
                mixed_time: ms(3000),
            },
        }
    }
}
