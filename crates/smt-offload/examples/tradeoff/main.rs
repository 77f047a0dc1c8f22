//! The in-NIC memory vs parallelism trade-off of SMT's offload scheme
//! (seed 001 §4.4.2; issue 15 item 5).
//!
//! ```text
//! cargo run --release -p smt-offload --example tradeoff -- [options]
//!   --messages N   messages per sweep configuration (default 200000)
//!   --bytes N      application bytes per timed run (default 536870912)
//!   --seed N       workload seed (default 15)
//!   --repeat N     timed runs per row, the median reported (default 5)
//!   --plot DIR     write SVG figures into DIR
//!   --only sweep|timing
//! ```
//!
//! Part A sweeps 1-8 queues, 1-10 000 peers and tables of 64-65 536
//! contexts through the deterministic engine: contexts used, creates,
//! resyncs and evictions per message (exact, reproducible). Part B times
//! software sealing on the application thread against the threaded engine
//! (workers standing in for the NIC): application-thread CPU per message,
//! the workers' CPU and wall-clock throughput. Timings depend on the
//! machine and its load; nothing here asserts them.

mod cpu;
mod plot;
mod sweep;
mod timing;

use std::path::PathBuf;

use plot::Line;
use timing::Mode;

struct Args {
    messages: usize,
    bytes: usize,
    seed: u64,
    repeat: usize,
    plot: Option<PathBuf>,
    only: Option<String>,
}

fn main() {
    let args = parse_args();
    println!(
        "# smt-offload trade-off\n\nCPU: {} ({} logical CPUs); seed {}\n",
        cpu::model(),
        cpu::cpus(),
        args.seed
    );
    if args.only.as_deref() != Some("timing") {
        part_a(&args);
    }
    if args.only.as_deref() != Some("sweep") {
        part_b(&args);
    }
}

fn part_a(args: &Args) {
    let keys = sweep::keys(10_000, args.seed);
    let outcomes: Vec<sweep::Outcome> = sweep::points()
        .into_iter()
        .map(|p| sweep::run(p, args.messages, 256, &keys, args.seed))
        .collect();
    let drops: u64 = outcomes.iter().map(|o| o.drops).sum();
    println!(
        "## A. Contexts, resyncs and evictions ({} one-record messages of 256 B per row, \
         random peer and queue; engine drops: {drops})\n",
        args.messages
    );
    println!("{}", sweep::table(&outcomes));
    if let Some(dir) = &args.plot {
        plot_sweep(dir, &outcomes);
    }
}

fn part_b(args: &Args) {
    let keys = sweep::keys(10_000, args.seed);
    let mut rows = Vec::new();
    for size in [1024, 49152] {
        let messages = (args.bytes / size).max(1000);
        for point in timing_points(size) {
            let keys = &keys[..point.peers as usize];
            let mut runs: Vec<timing::Timing> = (0..args.repeat)
                .map(|_| match point.mode {
                    Mode::Software => timing::software(point, messages, keys, args.seed),
                    Mode::Descriptors => timing::descriptors(point, messages, keys, args.seed),
                    Mode::Engine => timing::offload(point, messages, keys, args.seed),
                })
                .collect();
            // The median run by application-thread CPU: the machine is
            // shared, and single runs wander.
            runs.sort_by_key(|r| r.app_ns);
            let run = runs[runs.len() / 2];
            eprintln!("timed {point:?}: {:.2} s", run.wall_ns as f64 / 1e9);
            rows.push(run);
        }
    }
    println!(
        "## B. Application-thread CPU and throughput ({} MiB of messages per run, \
         median of {} runs by application-thread CPU)\n",
        args.bytes >> 20,
        args.repeat
    );
    println!("{}", timing::table(&rows));
}

/// Software baseline; descriptors alone (8 queues, room for every context,
/// and short of memory); the engine with 1-8 queues and room for every
/// context, and short of memory.
fn timing_points(size: usize) -> Vec<timing::Point> {
    let point = |mode, queues, peers, capacity| timing::Point {
        mode,
        queues,
        peers,
        capacity,
        size,
    };
    let mut points = vec![
        point(Mode::Software, 1, 100, 0),
        point(Mode::Descriptors, 8, 100, 65536),
        point(Mode::Descriptors, 8, 10_000, 64),
    ];
    points.extend([1, 2, 4, 8].map(|q| point(Mode::Engine, q, 100, 65536)));
    points.push(point(Mode::Engine, 8, 10_000, 64));
    points
}

fn plot_sweep(dir: &std::path::Path, outcomes: &[sweep::Outcome]) {
    let line = |name: String,
                keep: &dyn Fn(&sweep::Outcome) -> bool,
                y: &dyn Fn(&sweep::Outcome) -> f64| Line {
        name,
        points: outcomes
            .iter()
            .filter(|o| keep(o))
            .map(|o| (f64::from(o.point.peers), y(o)))
            .collect(),
    };
    let mut contexts = Vec::new();
    let mut evictions = Vec::new();
    for (q, cap) in [
        (1, 65536),
        (2, 65536),
        (4, 65536),
        (8, 65536),
        (8, 1024),
        (8, 64),
        (1, 64),
    ] {
        let keep = move |o: &sweep::Outcome| o.point.queues == q && o.point.capacity == cap;
        let name = format!("{q} queues, table {cap}");
        contexts.push(line(name.clone(), &keep, &|o| o.contexts_peak as f64));
        evictions.push(line(name, &keep, &|o| {
            o.evictions as f64 / o.messages as f64
        }));
    }
    let figures = [
        (
            "offload-contexts.svg",
            "Flow contexts used (peak)",
            "contexts",
            contexts,
            true,
        ),
        (
            "offload-evictions.svg",
            "Context evictions per message",
            "evictions / message",
            evictions,
            false,
        ),
    ];
    for (file, title, y, lines, log_y) in figures {
        let path = dir.join(file);
        let labels = plot::Labels {
            title,
            x: "peers",
            y,
        };
        match plot::lines(&path, &labels, &lines, log_y) {
            Ok(()) => eprintln!("wrote {}", path.display()),
            Err(e) => eprintln!("{file}: {e}"),
        }
    }
}

fn parse_args() -> Args {
    let mut args = Args {
        messages: 200_000,
        bytes: 512 << 20,
        seed: 15,
        repeat: 5,
        plot: None,
        only: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        let number = || {
            value
                .parse()
                .unwrap_or_else(|_| usage(&format!("{flag}: not a number")))
        };
        match flag.as_str() {
            "--messages" => args.messages = number(),
            "--bytes" => args.bytes = number(),
            "--seed" => args.seed = number() as u64,
            "--repeat" => args.repeat = number().max(1),
            "--plot" => args.plot = Some(PathBuf::from(&value)),
            "--only" => args.only = Some(value.clone()),
            _ => usage(&format!("unknown option {flag}")),
        }
    }
    args
}

fn usage(why: &str) -> ! {
    eprintln!("tradeoff: {why}\nsee the top of examples/tradeoff/main.rs for the options");
    std::process::exit(2)
}
