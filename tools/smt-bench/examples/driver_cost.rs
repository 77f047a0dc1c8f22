//! What one RPC costs the process in thread switches, for one system at one
//! point: `call_async` tasks on one current-thread runtime (as `smt-bench`
//! drives every concurrent run), C outstanding, 64 B echo by default.
//! Prints the rate and the voluntary and involuntary context switches per
//! RPC (all threads, from `getrusage`), the figures a driver's hand-offs
//! show in, then the same per thread during the run (from
//! `/proc/self/task`), which says whose thread wakes whose; `strace -c -f`
//! in front adds the system calls.
//!
//! ```sh
//! cargo run --release -p smt-bench --example driver_cost -- smt-aes 150 64 2
//! ```
//! Arguments: system (`smt-aes`, `smt-aes-local`), outstanding, size,
//! seconds.
#![allow(unsafe_code)]

use std::time::Duration;

use smt_bench::systems::{self, Slot, System};
use smt_bench::workload;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let system = args.first().map_or("smt-aes", String::as_str);
    let c: usize = args.get(1).map_or(150, |a| a.parse().expect("outstanding"));
    let size: usize = args.get(2).map_or(64, |a| a.parse().expect("size"));
    let secs: f64 = args.get(3).map_or(2.0, |a| a.parse().expect("seconds"));
    let time = Duration::from_secs_f64(secs);
    let before = switches();
    let (n, elapsed) = match system {
        "smt-aes" => {
            let (server, slots) = systems::smt::start(System::SmtAes, c).expect("start");
            let threads = thread_switches();
            let r = run(slots, size, time);
            print_by_thread(&threads, r.0);
            server.stop();
            r
        }
        "smt-aes-local" => {
            let (server, slots) = systems::smt_local::start(System::SmtLocal, c).expect("start");
            let threads = thread_switches();
            let r = run(slots, size, time);
            print_by_thread(&threads, r.0);
            server.stop();
            r
        }
        other => panic!("unknown system {other}"),
    };
    let (vol, invol) = switches();
    let per = |x: i64| x as f64 / n as f64;
    println!(
        "{system} {size} B x{c}: {n} RPCs, {:.0} RPC/s, per RPC: {:.2} voluntary + {:.2} involuntary context switches",
        n as f64 / elapsed.as_secs_f64(),
        per(vol - before.0),
        per(invol - before.1),
    );
}

/// Runs `slots` in closed loop for `time` (the benchmark's own
/// [`workload::closed_loop`]); returns RPCs done and the time.
fn run<S: Slot>(mut slots: Vec<S>, size: usize, time: Duration) -> (u64, Duration) {
    let alone = slots.len() == 1;
    slots.iter_mut().for_each(|s| s.set_alone(alone));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let local = tokio::task::LocalSet::new();
    let (_, samples) = local.block_on(
        &rt,
        workload::closed_loop(slots, workload::Sizes::Fixed(size), time),
    );
    (samples.rpcs.len() as u64, samples.elapsed)
}

/// Voluntary and involuntary context switches of every thread so far.
fn switches() -> (i64, i64) {
    // SAFETY: `getrusage` writes one `rusage` into the zeroed struct we
    // own; RUSAGE_SELF covers every thread of the process.
    let u = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    (u.ru_nvcsw, u.ru_nivcsw)
}

/// One thread's name and its voluntary and involuntary context switches.
struct ThreadSwitches {
    tid: u32,
    name: String,
    voluntary: i64,
    involuntary: i64,
}

/// Every thread of the process now, from `/proc/self/task/*/status`
/// (threads that cannot be read, having just ended, are left out).
fn thread_switches() -> Vec<ThreadSwitches> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    dir.filter_map(|entry| {
        let entry = entry.ok()?;
        let tid = entry.file_name().to_str()?.parse().ok()?;
        let status = std::fs::read_to_string(entry.path().join("status")).ok()?;
        let field = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .map(|v| v.trim().to_string())
        };
        Some(ThreadSwitches {
            tid,
            name: field("Name:")?,
            voluntary: field("voluntary_ctxt_switches:")?.parse().ok()?,
            involuntary: field("nonvoluntary_ctxt_switches:")?.parse().ok()?,
        })
    })
    .collect()
}

/// Prints each thread's context switches per RPC since `before` (threads
/// started since count from zero), busiest first.
fn print_by_thread(before: &[ThreadSwitches], rpcs: u64) {
    let mut now = thread_switches();
    now.sort_by_key(|t| std::cmp::Reverse(t.voluntary + t.involuntary));
    for t in now {
        let (v0, i0) = before
            .iter()
            .find(|b| b.tid == t.tid)
            .map_or((0, 0), |b| (b.voluntary, b.involuntary));
        let (v, i) = (t.voluntary - v0, t.involuntary - i0);
        if v + i == 0 {
            continue;
        }
        let per = |x: i64| x as f64 / rpcs.max(1) as f64;
        println!(
            "  thread {} {:<16} {:.3} voluntary + {:.3} involuntary per RPC",
            t.tid,
            t.name,
            per(v),
            per(i)
        );
    }
}
