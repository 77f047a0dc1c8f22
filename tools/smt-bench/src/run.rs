//! Running every selected system through every selected workload, one
//! system at a time: start it, measure, stop it (no thread survives into
//! the next system's run).

use std::io;
use std::time::Duration;

use crate::cli::{Affinity, Args, Plan};
use crate::record::{mixed_rows, Record, UnloadedRtt};
use crate::systems::{self, floor, quic, tls, Slot, System, MAX_SLOTS};
use crate::workload::{closed_loop, open_loop, Arrivals, Samples, Sizes};

/// What one system's run produced, and what was skipped and why.
#[derive(Debug, Default)]
pub struct SystemRun {
    /// The measured points.
    pub records: Vec<Record>,
    /// What was skipped and why, and the system's own lines.
    pub notes: Vec<String>,
}

/// Runs `system` under `affinity` on a fresh current-thread runtime on
/// this thread; every thread it creates inherits the CPU mask.
pub fn run_system(system: System, affinity: Affinity, plan: &Plan, args: &Args) -> SystemRun {
    let mut run = SystemRun::default();
    if let Err(e) = crate::sys::set_affinity(affinity == Affinity::Pinned) {
        run.notes.push(format!("could not set CPU affinity: {e}"));
    }
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .and_then(|rt| {
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, dispatch(system, affinity, plan, args))
        });
    let _ = crate::sys::set_affinity(false);
    match result {
        Ok(r) => {
            run = SystemRun {
                notes: [run.notes, r.notes].concat(),
                ..r
            }
        }
        Err(e) => run
            .notes
            .push(format!("{}: not measured: {e}", system.name())),
    }
    run
}

async fn dispatch(
    system: System,
    affinity: Affinity,
    plan: &Plan,
    args: &Args,
) -> io::Result<SystemRun> {
    let ctx = Ctx {
        system,
        affinity,
        plan,
        args,
    };
    let slots = MAX_SLOTS.max(plan.mixed_slots);
    match system {
        s if s.is_local() => ctx.measure(systems::smt_local::start(system, slots)).await,
        System::SmtWorkers1 => ctx.measure(systems::workers::start(1, slots)).await,
        System::SmtWorkers2 => ctx.measure(systems::workers::start(2, slots)).await,
        s if s.is_smt() => ctx.measure(systems::smt::start(system, slots)).await,
        System::TcpPool => ctx.measure(tls::start_tcp_pool(slots).await).await,
        System::TlsPool => ctx.measure(tls::start_tls_pool(slots).await).await,
        System::TlsPipelined => ctx.measure(tls::start_tls_pipelined(slots).await).await,
        System::TlsPipelinedNaive => {
            ctx.measure(tls::start_tls_pipelined_naive(slots).await)
                .await
        }
        System::QuicStreamPerRpc => ctx.measure(quic::start_stream_per_rpc(slots).await).await,
        System::QuicPersistent => {
            let started = quic::start_persistent(slots, quic::Mtu::Default).await;
            ctx.measure(started).await
        }
        System::QuicPersistentLink => {
            let started = quic::start_persistent(slots, quic::Mtu::Link).await;
            ctx.measure(started).await
        }
        System::UdpFloor => ctx.measure(floor::start_udp()).await,
        System::TcpFloor => ctx.measure(floor::start_tcp()).await,
        _ => unreachable!("every system is matched above"),
    }
}

struct Ctx<'a> {
    system: System,
    affinity: Affinity,
    plan: &'a Plan,
    args: &'a Args,
}

impl Ctx<'_> {
    fn record(&self, workload: &str, s: &Samples) -> Record {
        Record::from_samples(self.system.name(), self.affinity.name(), workload, s)
    }

    fn progress(&self, what: &str, r: &Record) {
        eprintln!(
            "  {:<18} {:<8} {what:<28} {:>8} rpcs  p50 {:>9.1} us  p99 {:>9.1} us  {:>10.0} rpc/s  {:>6.2} Gbit/s{}",
            self.system.name(),
            self.affinity.name(),
            r.rpcs,
            r.p50_us,
            r.p99_us,
            r.rpc_per_s,
            r.gbit_per_s,
            if r.errors > 0 { format!("  {} errors", r.errors) } else { String::new() }
        );
    }

    /// Warm-up, then a measured closed loop on the first `c` slots.
    async fn closed<S: Slot>(
        &self,
        slots: &mut Vec<S>,
        c: usize,
        sizes: Sizes,
        time: Duration,
    ) -> Samples {
        let mut mine: Vec<S> = slots.drain(..c.min(slots.len())).collect();
        let alone = mine.len() == 1;
        mine.iter_mut().for_each(|s| s.set_alone(alone));
        let (mine, _) = closed_loop(mine, sizes, self.plan.warmup).await;
        let (mine, samples) = closed_loop(mine, sizes, time).await;
        slots.splice(0..0, mine);
        samples
    }

    async fn measure<S: Slot>(
        &self,
        started: io::Result<(systems::ServerThread, Vec<S>)>,
    ) -> io::Result<SystemRun> {
        let (server, mut slots) = started?;
        let mut run = SystemRun::default();
        let result = self.workloads(&mut slots, &mut run).await;
        run.notes.extend(server.report());
        // Connections close before the server stops.
        drop(slots);
        server.stop();
        for r in run.records.iter().filter(|r| r.errors > 0) {
            run.notes.push(format!(
                "{} {} {} size {:?} x{:?} {:?}: {} RPCs failed or timed out",
                r.system, r.affinity, r.workload, r.size, r.concurrency, r.bucket, r.errors
            ));
        }
        result.map(|()| run)
    }

    async fn workloads<S: Slot>(&self, slots: &mut Vec<S>, run: &mut SystemRun) -> io::Result<()> {
        let plan = self.plan;
        let want_rtt = self.args.wants("rtt");
        let want_mixed = self.args.wants("mixed") && self.system.runs_mixed();
        if self.args.wants("mixed") && !self.system.rtt_only() && !want_mixed {
            run.notes.push(format!(
                "{}: mixed skipped (the open-loop harness does not drive a caller-driven endpoint well)",
                self.system.name()
            ));
        }
        let mut unloaded = Vec::new();
        if want_rtt || want_mixed {
            for &size in &plan.rtt_sizes {
                if size > self.system.max_size() {
                    run.notes.push(format!(
                        "{}: rtt {size} B skipped (one datagram holds at most {} B)",
                        self.system.name(),
                        self.system.max_size()
                    ));
                    continue;
                }
                let s = self.closed(slots, 1, Sizes::Fixed(size), plan.point).await;
                let r = Record {
                    size: Some(size),
                    concurrency: Some(1),
                    ..self.record("rtt", &s)
                };
                unloaded.push((size, r.p50_us));
                if want_rtt {
                    self.progress(&format!("rtt {size} B"), &r);
                    run.records.push(r);
                }
            }
        }
        if self.system.rtt_only() {
            return Ok(());
        }
        if self.args.wants("throughput") {
            for &size in &plan.throughput_sizes {
                for &c in &plan.concurrency {
                    let s = self.closed(slots, c, Sizes::Fixed(size), plan.point).await;
                    let r = Record {
                        size: Some(size),
                        concurrency: Some(c),
                        ..self.record("throughput", &s)
                    };
                    self.progress(&format!("throughput {size} B x{c}"), &r);
                    run.records.push(r);
                }
            }
        }
        if want_mixed {
            let unloaded = UnloadedRtt::new(unloaded)
                .ok_or_else(|| io::Error::other("no unloaded RTT measured"))?;
            for &dist in &plan.mixed_dists {
                self.mixed(slots, dist, &unloaded, run).await?;
            }
        }
        if self.args.wants("bulk") {
            let c = plan.bulk_concurrency;
            let s = self
                .closed(slots, c, Sizes::Fixed(plan.bulk_size), plan.point)
                .await;
            let r = Record {
                size: Some(plan.bulk_size),
                concurrency: Some(c),
                ..self.record("bulk", &s)
            };
            self.progress(&format!("bulk {} B x{c}", plan.bulk_size), &r);
            run.records.push(r);
        }
        Ok(())
    }

    /// Where the open loop's arrivals come from: pinned runs measure one
    /// CPU, so the generator spins on another one if there is one.
    fn arrivals(&self) -> Arrivals {
        let cpus = crate::sys::allowed_cpus();
        match (self.affinity, cpus) {
            (Affinity::Pinned, [_, spare, ..]) => Arrivals::SpareCpu(*spare),
            _ => Arrivals::InRuntime,
        }
    }

    /// Capacity first (closed loop, every slot busy), then open-loop
    /// Poisson arrivals at each fraction of it.
    async fn mixed<S: Slot>(
        &self,
        slots: &mut Vec<S>,
        dist: crate::dist::SizeDist,
        unloaded: &UnloadedRtt,
        run: &mut SystemRun,
    ) -> io::Result<()> {
        let plan = self.plan;
        let k = plan.mixed_slots.min(slots.len());
        let cap = self
            .closed(slots, k, Sizes::Dist(dist, 7), plan.point)
            .await;
        let capacity = cap.rate();
        let base = Record {
            dist: Some(dist.name.into()),
            concurrency: Some(k),
            ..self.record("capacity", &cap)
        };
        self.progress(&format!("capacity {} x{k}", dist.name), &base);
        run.records.push(base);
        for &load in &plan.mixed_loads {
            let mut mine: Vec<S> = slots.drain(..k).collect();
            mine.iter_mut().for_each(|s| s.set_alone(false));
            let (mine, s) = open_loop(
                mine,
                dist,
                capacity * load,
                plan.mixed_time,
                11,
                self.arrivals(),
            )
            .await?;
            slots.splice(0..0, mine);
            let base = Record {
                dist: Some(dist.name.into()),
                load: Some(load),
                offered_per_s: Some(capacity * load),
                concurrency: Some(k),
                ..self.record("mixed", &s)
            };
            let rows = mixed_rows(&base, &s, unloaded);
            if let Some(small) = rows
                .iter()
                .find(|r| r.bucket.as_deref() == Some("small<=1024"))
            {
                self.progress(
                    &format!("mixed {} at {:.0}% small", dist.name, load * 100.0),
                    small,
                );
                eprintln!(
                    "  {:<18} {:<8} mixed {} at {:.0}%: offered {:.0} RPC/s, completed {:.0} RPC/s",
                    self.system.name(),
                    self.affinity.name(),
                    dist.name,
                    load * 100.0,
                    capacity * load,
                    s.rate()
                );
            }
            if s.errors > 0 {
                run.notes.push(format!(
                    "{}: mixed {} at {load}: {} arrivals failed or were not served in time",
                    self.system.name(),
                    dist.name,
                    s.errors
                ));
            }
            run.records.extend(rows);
        }
        Ok(())
    }
}
