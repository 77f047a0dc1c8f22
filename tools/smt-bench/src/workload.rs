//! The workloads, generic over a system's slots: closed loops (one RPC at a
//! time, or C outstanding) and an open loop with Poisson arrivals.

use std::io;
use std::time::{Duration, Instant};

use crate::dist::{Rng, SizeDist};
use crate::sys::PreciseTimer;
use crate::systems::{payload, Slot};

/// A call that takes longer than this counts as failed, so a broken peer
/// cannot hang the run.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Where request sizes come from.
#[derive(Clone, Copy, Debug)]
pub enum Sizes {
    /// Every request this many bytes.
    Fixed(usize),
    /// Sizes drawn from the distribution, seeded with the number.
    Dist(SizeDist, u64),
}

/// What one run of a workload saw.
#[derive(Debug, Default)]
pub struct Samples {
    /// (request size, latency in ns) of every completed RPC.
    pub rpcs: Vec<(u32, u64)>,
    /// RPCs that failed or timed out.
    pub errors: u64,
    /// Request + response payload bytes of completed RPCs.
    pub bytes: u64,
    /// Time the run lasted.
    pub elapsed: Duration,
}

impl Samples {
    fn merge(&mut self, other: Samples) {
        self.rpcs.extend(other.rpcs);
        self.errors += other.errors;
        self.bytes += other.bytes;
    }

    /// Completed RPCs per second.
    pub fn rate(&self) -> f64 {
        self.rpcs.len() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

async fn timed_call<S: Slot>(slot: &mut S, size: usize, out: &mut Samples, since: Instant) {
    match tokio::time::timeout(CALL_TIMEOUT, slot.call(payload(size))).await {
        Ok(Ok(_)) => {
            out.rpcs
                .push((size as u32, since.elapsed().as_nanos() as u64));
            out.bytes += 2 * size as u64;
        }
        _ => out.errors += 1,
    }
}

/// `slots.len()` RPCs outstanding, each slot calling back to back until
/// `time` has passed (every slot completes at least one call).
pub async fn closed_loop<S: Slot>(
    slots: Vec<S>,
    sizes: Sizes,
    time: Duration,
) -> (Vec<S>, Samples) {
    let start = Instant::now();
    let end = start + time;
    let tasks: Vec<_> = slots
        .into_iter()
        .enumerate()
        .map(|(i, mut slot)| {
            tokio::task::spawn_local(async move {
                let mut out = Samples::default();
                let mut rng = match sizes {
                    Sizes::Dist(_, seed) => Rng::new(seed ^ (i as u64).wrapping_mul(0x9e37)),
                    Sizes::Fixed(_) => Rng::new(0),
                };
                loop {
                    let size = match sizes {
                        Sizes::Fixed(s) => s,
                        Sizes::Dist(d, _) => d.quantile(rng.unit()),
                    };
                    timed_call(&mut slot, size, &mut out, Instant::now()).await;
                    if Instant::now() >= end || out.errors > 100 {
                        break;
                    }
                }
                (slot, out)
            })
        })
        .collect();
    collect(tasks, start).await
}

async fn collect<S>(
    tasks: Vec<tokio::task::JoinHandle<(S, Samples)>>,
    start: Instant,
) -> (Vec<S>, Samples) {
    let mut slots = Vec::with_capacity(tasks.len());
    let mut all = Samples::default();
    for t in tasks {
        // A panicking slot task loses its slot; the run goes on.
        if let Ok((slot, out)) = t.await {
            slots.push(slot);
            all.merge(out);
        }
    }
    all.elapsed = start.elapsed();
    (slots, all)
}

/// What produces an open loop's arrivals.
#[derive(Clone, Copy, Debug)]
pub enum Arrivals {
    /// A task on the measured runtime, sleeping on a timer between
    /// arrivals.
    InRuntime,
    /// A thread of its own on this CPU, spinning until each arrival is
    /// due. For pinned runs: the measured CPU then carries no harness
    /// timer (arming, waking and reading a timer per arrival cost that CPU
    /// a share growing with the offered rate, ~15 % of SMT's capacity at
    /// its saturation), and the spare CPU does nothing else.
    SpareCpu(usize),
}

/// Open loop: Poisson arrivals at `rate` per second with sizes from
/// `dist`, served by the slots (an arrival waits while every slot is
/// busy; its latency counts from its scheduled arrival). Arrivals still
/// queued long after the end count as errors.
pub async fn open_loop<S: Slot>(
    slots: Vec<S>,
    dist: SizeDist,
    rate: f64,
    time: Duration,
    seed: u64,
    arrivals: Arrivals,
) -> io::Result<(Vec<S>, Samples)> {
    let (tx, rx) = flume::unbounded::<(usize, Instant)>();
    let start = Instant::now();
    let give_up = start + time + time.max(Duration::from_secs(1));
    let tasks: Vec<_> = slots
        .into_iter()
        .map(|mut slot| {
            let rx = rx.clone();
            tokio::task::spawn_local(async move {
                let mut out = Samples::default();
                while let Ok((size, due)) = rx.recv_async().await {
                    if Instant::now() > give_up {
                        out.errors += 1;
                        continue;
                    }
                    timed_call(&mut slot, size, &mut out, due).await;
                }
                (slot, out)
            })
        })
        .collect();
    drop(rx);
    let schedule = Schedule::new(dist, rate, start + time, seed);
    match arrivals {
        Arrivals::InRuntime => generate(tx, schedule).await?,
        Arrivals::SpareCpu(cpu) => {
            let (done_tx, done) = flume::bounded(1);
            std::thread::Builder::new()
                .name("arrivals".into())
                .spawn(move || {
                    let _ = done_tx.send(generate_spinning(tx, schedule, cpu));
                })?;
            // The runtime keeps serving the slots meanwhile.
            done.recv_async()
                .await
                .map_err(|_| io::Error::other("the arrival thread panicked"))??;
        }
    }
    Ok(collect(tasks, start).await)
}

/// Poisson arrival times and sizes until `end` (at least one arrival, so
/// a run too short for its rate still reports something: smoke mode).
struct Schedule {
    dist: SizeDist,
    rate: f64,
    end: Instant,
    rng: Rng,
    next: Instant,
    sent: u64,
}

impl Schedule {
    fn new(dist: SizeDist, rate: f64, end: Instant, seed: u64) -> Self {
        Self {
            dist,
            rate,
            end,
            rng: Rng::new(seed),
            next: Instant::now(),
            sent: 0,
        }
    }

    /// The next arrival's due time (sizes are drawn with `size`).
    fn next_due(&mut self) -> Option<Instant> {
        self.next += Duration::from_secs_f64(self.rng.exponential(1.0 / self.rate.max(1.0)));
        if self.next >= self.end && self.sent > 0 {
            return None;
        }
        self.next = self.next.min(self.end);
        self.sent += 1;
        Some(self.next)
    }

    fn size(&mut self) -> usize {
        self.dist.quantile(self.rng.unit())
    }
}

/// Sends arrivals at their scheduled times until the schedule ends.
async fn generate(tx: flume::Sender<(usize, Instant)>, mut schedule: Schedule) -> io::Result<()> {
    let timer = PreciseTimer::new()?;
    while let Some(due) = schedule.next_due() {
        if due > Instant::now() {
            timer.sleep_until(due).await?;
        } else {
            // Behind schedule: let the slots run before catching up.
            tokio::task::yield_now().await;
        }
        let _ = tx.send((schedule.size(), due));
    }
    Ok(())
}

/// The same from a thread moved to `cpu`, spinning until each arrival is
/// due (see [`Arrivals::SpareCpu`]).
fn generate_spinning(
    tx: flume::Sender<(usize, Instant)>,
    mut schedule: Schedule,
    cpu: usize,
) -> io::Result<()> {
    crate::sys::set_affinity_to(&[cpu])?;
    while let Some(due) = schedule.next_due() {
        while Instant::now() < due {
            std::hint::spin_loop();
        }
        let _ = tx.send((schedule.size(), due));
    }
    Ok(())
}
