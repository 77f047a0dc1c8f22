//! Per-thread CPU time and context switches during smt-bench's closed
//! loop of 150 outstanding calls, as `smt-bench`'s throughput workload
//! runs it (150 `call_async` tasks on one current-thread runtime): which
//! of the process's threads does the work, and how often each sleeps.
//! `docs/benchmarks.md` ("tenth session, unpinned") used it to find that
//! the default `Endpoint`'s two ends took turns with the whole window.
//!
//! `cargo run --release -p smt-bench --example thread_probe -- [system] [seconds] [size]`
//! (system: an smt-bench SMT system such as `smt-aes`, or `quic` for
//! quinn; default `smt-aes`, 3 s, 64 bytes). Run it unpinned to see the
//! two CPUs shared, or under `taskset -c 0`. Linux only (`/proc`).

use std::time::{Duration, Instant};

use smt_bench::systems::{self, quic, Slot, System};
use smt_bench::workload::{self, Sizes};

fn threads() -> Vec<(String, u64, u64, u64)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc/self/task").unwrap() {
        let p = e.unwrap().path();
        let stat = std::fs::read_to_string(p.join("stat")).unwrap_or_default();
        let status = std::fs::read_to_string(p.join("status")).unwrap_or_default();
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let open = stat.find('(').unwrap();
        let name = stat[open + 1..close].to_string();
        let f: Vec<&str> = stat[close + 2..].split(' ').collect();
        let cpu = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
        let get = |k: &str| {
            status
                .lines()
                .find(|l| l.starts_with(k))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        out.push((
            format!("{name}/{}", p.file_name().unwrap().to_string_lossy()),
            cpu,
            get("voluntary_ctxt_switches"),
            get("nonvoluntary_ctxt_switches"),
        ));
    }
    out
}

/// Completed calls of `slots` in `secs` of smt-bench's own closed loop.
async fn run<S: Slot>(slots: Vec<S>, secs: f64, size: usize) -> u64 {
    let time = Duration::from_secs_f64(secs);
    let (_, samples) = workload::closed_loop(slots, Sizes::Fixed(size), time).await;
    samples.rpcs.len() as u64
}

fn main() {
    let mut a = std::env::args().skip(1);
    let system = a.next().unwrap_or("smt-aes".into());
    let secs: f64 = a.next().map_or(3.0, |s| s.parse().unwrap());
    let size: usize = a.next().map_or(64, |s| s.parse().unwrap());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let before = threads();
        let t0 = Instant::now();
        let (server, n) = if system == "quic" {
            let (s, slots) = quic::start_persistent(150, quic::Mtu::Default).await.unwrap();
            (s, run(slots, secs, size).await)
        } else {
            let sys = System::by_name(&system).unwrap();
            let (s, slots) = systems::smt::start(sys, 150).unwrap();
            let client = slots[0].parts().0;
            let n = run(slots, secs, size).await;
            let st = client.stats().unwrap();
            let t = &st.total;
            let per = |x: u64| x as f64 / n.max(1) as f64;
            println!(
                "client per RPC: datagrams sent {:.3} received {:.3}, control sent {:.3}, retransmitted {:.4}, resends {:.4}, coalesced sent {:.3}",
                per(t.traffic.datagrams_sent),
                per(t.traffic.datagrams_received),
                per(t.packets.control_sent),
                per(t.packets.retransmitted),
                per(t.packets.resends_sent),
                per(t.packets.coalesced_sent)
            );
            (s, n)
        };
        let wall = t0.elapsed();
        let after = threads();
        report(n, wall, &before, &after);
        server.stop();
    });
}

fn report(
    n: u64,
    wall: Duration,
    before: &[(String, u64, u64, u64)],
    after: &[(String, u64, u64, u64)],
) {
    let tck = 100.0;
    println!(
        "{:.0} RPC/s over {:.2} s",
        n as f64 / wall.as_secs_f64(),
        wall.as_secs_f64()
    );
    for (name, cpu, vol, inv) in after {
        let b = before.iter().find(|b| &b.0 == name);
        let (c0, v0, i0) = b.map_or((0, 0, 0), |b| (b.1, b.2, b.3));
        let d = cpu - c0;
        if d == 0 && vol - v0 == 0 {
            continue;
        }
        println!(
            "{name:24} cpu {:5.2} s ({:4.0}%)  vol {:8} invol {:8}  per RPC vol {:.3}",
            d as f64 / tck,
            100.0 * d as f64 / tck / wall.as_secs_f64(),
            vol - v0,
            inv - i0,
            (vol - v0) as f64 / n.max(1) as f64
        );
    }
}
