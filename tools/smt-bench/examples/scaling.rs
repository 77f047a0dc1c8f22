//! Scaling over server cores (issue #12 item 2): one client, one peer,
//! closed loops of 1 KiB and 16 KiB RPCs and 1 MiB messages, against a
//! server given 1 and then 2 cores:
//!
//! - `smt-workers`: SMT's worker shape, one shard per server core behind a
//!   dispatcher (`smt::workers`);
//! - `tls-pipe`: TLS 1.3 over ONE TCP connection, requests pipelined (its
//!   server reads one connection on one thread, whatever cores it has);
//! - `tls-pipe-per-core`: one pipelined TLS connection per server core,
//!   each served by a thread pinned to its core;
//! - `tls-pool`: pooled TLS (one request per connection), the connections
//!   spread over one server thread per core.
//!
//! The client's threads stay on `--client` CPUs; the server's on `--one`
//! (1 core) or `--two` (2 cores). On a 2-CPU machine the client shares a
//! CPU with the 2-core server: say so with the figures.
//!
//! `cargo run --release -p smt-bench --example scaling -- --client 0 --one 1 --two 0,1 --seconds 2 --runs 3 --plot DIR`
//!
//! With `--plot DIR` it also draws one figure per point into `DIR`
//! (`scaling_1_kib_x150.svg`, ...): throughput against server cores, one line
//! per system.

use std::io;
use std::time::Duration;

use smt_bench::systems::{tls, workers, ServerThread, Slot};
use smt_bench::workload::{closed_loop, Sizes};

/// (label, request size, outstanding).
const POINTS: [(&str, usize, usize); 3] = [
    ("1 KiB x150", 1024, 150),
    ("16 KiB x150", 16 << 10, 150),
    ("1 MiB x4", 1 << 20, 4),
];

struct Args {
    client: Vec<usize>,
    one: Vec<usize>,
    two: Vec<usize>,
    seconds: f64,
    runs: usize,
    plot: Option<std::path::PathBuf>,
}

const USAGE: &str = "usage: scaling [--client CPUS] [--one CPUS] [--two CPUS] [--seconds S] [--runs N] [--plot DIR]   (CPUS like 0,1)";

/// A usage error: say what is wrong and how to call, then exit 2.
fn usage(what: &str) -> ! {
    eprintln!("scaling: {what}\n{USAGE}");
    std::process::exit(2)
}

fn parse() -> Args {
    let mut a = Args {
        client: vec![0],
        one: vec![1],
        two: vec![0, 1],
        seconds: 2.0,
        runs: 3,
        plot: None,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let cpus = |v: &str| -> Vec<usize> {
        v.split(',')
            .map(|c| {
                c.parse()
                    .unwrap_or_else(|_| usage(&format!("bad CPU list {v:?}")))
            })
            .collect()
    };
    for pair in argv.chunks(2) {
        let v = pair.get(1).map(String::as_str).unwrap_or_default();
        match pair[0].as_str() {
            "--client" => a.client = cpus(v),
            "--one" => a.one = cpus(v),
            "--two" => a.two = cpus(v),
            "--seconds" => {
                a.seconds = v
                    .parse()
                    .unwrap_or_else(|_| usage("--seconds takes a number"))
            }
            "--runs" => a.runs = v.parse().unwrap_or_else(|_| usage("--runs takes a number")),
            "--plot" => a.plot = Some(v.into()),
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0)
            }
            other => usage(&format!("unknown argument {other}")),
        }
    }
    a
}

fn main() {
    let args = parse();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let local = tokio::task::LocalSet::new();
    println!(
        "CPU: {}; client on CPUs {:?}; 1 core = {:?}, 2 cores = {:?}; {} s per point, {} runs (median shown)",
        smt_bench::sys::cpu_model(),
        args.client,
        args.one,
        args.two,
        args.seconds,
        args.runs
    );
    println!(
        "{:<18} {:>5} {:<12} {:>12} {:>10}  runs (k RPC/s)",
        "system", "cores", "point", "k RPC/s", "Gbit/s"
    );
    let mut table = Vec::new();
    for system in ["smt-workers", "tls-pipe", "tls-pipe-per-core", "tls-pool"] {
        for cores in [&args.one, &args.two] {
            let rows = local.block_on(&rt, measure(system, &args, cores));
            match rows {
                Ok(rows) => table.extend(rows),
                Err(e) => println!("{system} on {cores:?}: not measured: {e}"),
            }
        }
    }
    ratios(&table, &args);
    if let Some(dir) = &args.plot {
        plot(dir, &table, &args);
    }
}

/// One figure per point: k RPC/s (Gbit/s for 1 MiB) against server cores.
fn plot(dir: &std::path::Path, table: &[Row], args: &Args) {
    if let Err(e) = std::fs::create_dir_all(dir) {
        println!("no plots: {}: {e}", dir.display());
        return;
    }
    for (label, size, _) in POINTS {
        let bulk = size >= 1 << 20;
        let mut data: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for row in table.iter().filter(|r| r.2 == label) {
            let y = if bulk {
                row.3 * 2.0 * size as f64 * 8.0 / 1e9
            } else {
                row.3 / 1e3
            };
            match data.iter_mut().find(|(s, _)| s == row.0) {
                Some((_, pts)) => pts.push((row.1 as f64, y)),
                None => data.push((row.0.to_string(), vec![(row.1 as f64, y)])),
            }
        }
        let file = format!("scaling_{}.svg", label.replace(' ', "_").to_lowercase());
        let path = dir.join(file);
        let title = format!(
            "{label}: server on {:?} (1 core) and {:?} (2 cores), client on {:?}",
            args.one, args.two, args.client
        );
        let ylabel = if bulk { "Gbit/s" } else { "k RPC/s" };
        match smt_bench::plot::lines(&path, &title, "server cores", ylabel, &data) {
            Ok(()) => println!("plot: {}", path.display()),
            Err(e) => println!("plot {}: {e}", path.display()),
        }
    }
}

/// One row: system, server cores, point, median rate (RPC/s).
type Row = (&'static str, usize, &'static str, f64);

async fn measure(system: &'static str, args: &Args, cores: &[usize]) -> io::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for (label, size, c) in POINTS {
        let mut rates = Vec::new();
        for _ in 0..args.runs {
            let rate = match system {
                "smt-workers" => {
                    let placement = Some((&args.client[..], cores));
                    run(workers::start_placed(cores.len(), c, placement), size, args).await?
                }
                "tls-pipe" => {
                    let started = placed(cores, &args.client, tls::start_tls_pipelined(c)).await;
                    run(started, size, args).await?
                }
                "tls-pipe-per-core" => {
                    run(per_core(cores, args, c, true).await, size, args).await?
                }
                _ => run(per_core(cores, args, c, false).await, size, args).await?,
            };
            rates.push(rate);
        }
        rates.sort_by(f64::total_cmp);
        let median = rates[rates.len() / 2];
        let gbit = median * 2.0 * size as f64 * 8.0 / 1e9;
        let runs: Vec<String> = rates.iter().map(|r| format!("{:.1}", r / 1e3)).collect();
        println!(
            "{system:<18} {:>5} {label:<12} {:>12.1} {gbit:>10.2}  [{}]",
            cores.len(),
            median / 1e3,
            runs.join(", ")
        );
        rows.push((system, cores.len(), label, median));
    }
    Ok(rows)
}

/// Starts a server on `server` CPUs (its threads inherit the mask) and
/// returns the calling thread to the client's CPUs.
async fn placed<T>(
    server: &[usize],
    client: &[usize],
    start: impl std::future::Future<Output = io::Result<T>>,
) -> io::Result<T> {
    smt_bench::sys::set_affinity_to(server)?;
    let started = start.await;
    smt_bench::sys::set_affinity_to(client)?;
    started
}

/// One TLS server thread per core, pinned to it; `pipelined`: one
/// connection each carrying its share of the `c` slots, else a share of
/// `c` pooled connections each. Slots are interleaved across servers.
async fn per_core(
    cores: &[usize],
    args: &Args,
    c: usize,
    pipelined: bool,
) -> io::Result<(ServerThread, Vec<Box<dyn DynSlot>>)> {
    let k = cores.len();
    let mut servers = Vec::new();
    let mut lists: Vec<Vec<Box<dyn DynSlot>>> = Vec::new();
    for (i, &cpu) in cores.iter().enumerate() {
        let share = c / k + usize::from(i < c % k);
        let (server, slots): (ServerThread, Vec<Box<dyn DynSlot>>) = if pipelined {
            let (s, v) = placed(&[cpu], &args.client, tls::start_tls_pipelined(share)).await?;
            (
                s,
                v.into_iter()
                    .map(|x| Box::new(x) as Box<dyn DynSlot>)
                    .collect(),
            )
        } else {
            let (s, v) = placed(&[cpu], &args.client, tls::start_tls_pool(share)).await?;
            (
                s,
                v.into_iter()
                    .map(|x| Box::new(x) as Box<dyn DynSlot>)
                    .collect(),
            )
        };
        servers.push(server);
        lists.push(slots);
    }
    let mut slots = Vec::with_capacity(c);
    let mut iters: Vec<_> = lists.into_iter().map(Vec::into_iter).collect();
    while slots.len() < c {
        let before = slots.len();
        slots.extend(iters.iter_mut().filter_map(Iterator::next));
        if slots.len() == before {
            break;
        }
    }
    let stop = Box::new(move || servers.into_iter().for_each(ServerThread::stop));
    let idle = std::thread::spawn(|| {});
    Ok((ServerThread::new(stop, idle), slots))
}

/// A slot behind a box, so servers of different slot types share a list.
trait DynSlot {
    fn call_boxed<'a>(
        &'a mut self,
        request: &'static [u8],
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = io::Result<usize>> + 'a>>;
}

impl<S: Slot> DynSlot for S {
    fn call_boxed<'a>(
        &'a mut self,
        request: &'static [u8],
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = io::Result<usize>> + 'a>> {
        Box::pin(self.call(request))
    }
}

impl Slot for Box<dyn DynSlot> {
    async fn call(&mut self, request: &'static [u8]) -> io::Result<usize> {
        // The boxed slot's own method, not this impl's (which would recurse).
        (**self).call_boxed(request).await
    }
}

/// Warm-up, then one measured closed loop; stops the server. Returns RPC/s.
async fn run<S: Slot>(
    started: io::Result<(ServerThread, Vec<S>)>,
    size: usize,
    args: &Args,
) -> io::Result<f64> {
    let (server, slots) = started?;
    let (slots, _) = closed_loop(slots, Sizes::Fixed(size), Duration::from_millis(300)).await;
    let time = Duration::from_secs_f64(args.seconds);
    let before = thread_cpu();
    let (slots, samples) = closed_loop(slots, Sizes::Fixed(size), time).await;
    let spent = thread_cpu().since(&before);
    drop(slots);
    server.stop();
    if samples.errors > 0 {
        println!("  ({} RPCs failed)", samples.errors);
    }
    let rpcs = samples.rpcs.len().max(1) as f64;
    if spent.shards > 0 {
        println!(
            "  CPU per RPC: dispatcher {:.2} us, shards {:.2} us in all ({} shard threads), rest of the process {:.2} us",
            spent.dispatch as f64 / rpcs / 1e3,
            spent.shards as f64 / rpcs / 1e3,
            spent.shard_threads,
            spent.other as f64 / rpcs / 1e3,
        );
    }
    Ok(samples.rate())
}

/// CPU time of this process's threads by role, in ns (from
/// `/proc/self/task/*/schedstat`; zeros where that is not readable).
#[derive(Debug, Default)]
struct ThreadCpu {
    dispatch: u64,
    shards: u64,
    shard_threads: usize,
    other: u64,
    /// Per thread id, to subtract an earlier sample.
    by_tid: Vec<(String, String, u64)>,
}

impl ThreadCpu {
    fn since(&self, earlier: &ThreadCpu) -> ThreadCpu {
        let mut out = ThreadCpu::default();
        for (tid, name, ns) in &self.by_tid {
            let old = earlier
                .by_tid
                .iter()
                .find(|(t, n, _)| t == tid && n == name)
                .map_or(0, |e| e.2);
            out.add(name, ns.saturating_sub(old));
        }
        out
    }

    fn add(&mut self, name: &str, ns: u64) {
        if name == "smt-dispatch" {
            self.dispatch += ns;
        } else if name.starts_with("smt-shard-") {
            self.shards += ns;
            self.shard_threads += 1;
        } else {
            self.other += ns;
        }
    }
}

fn thread_cpu() -> ThreadCpu {
    let mut cpu = ThreadCpu::default();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return cpu;
    };
    for task in tasks.flatten() {
        let path = task.path();
        let name = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        let ns = std::fs::read_to_string(path.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        let tid = task.file_name().to_string_lossy().into_owned();
        let name = name.trim().to_string();
        cpu.add(&name, ns);
        cpu.by_tid.push((tid, name, ns));
    }
    cpu
}

/// The scaling factors the issue asks for.
fn ratios(table: &[Row], args: &Args) {
    let (one, two) = (args.one.len(), args.two.len());
    let get = |system: &str, cores: usize, point: &str| {
        table
            .iter()
            .find(|r| r.0 == system && r.1 == cores && r.2 == point)
            .map(|r| r.3)
    };
    println!();
    for (label, ..) in POINTS {
        let w2 = get("smt-workers", two, label);
        let ratio = |x: Option<f64>| match (w2, x) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
            _ => "-".into(),
        };
        println!(
            "{label:<12} smt-workers {two} vs {one} core: {};  vs tls-pipe ({two} cores): {};  vs tls-pipe-per-core: {};  vs tls-pool: {}",
            ratio(get("smt-workers", one, label)),
            ratio(get("tls-pipe", two, label)),
            ratio(get("tls-pipe-per-core", two, label)),
            ratio(get("tls-pool", two, label)),
        );
    }
}
