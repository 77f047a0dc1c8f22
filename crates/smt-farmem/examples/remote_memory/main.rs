//! The experiment of seed 002 Figs. 5-6, scaled to this machine:
//! {busy-wait, yield} × {CPU crypto, engine crypto} × local cache size,
//! on the userfaultfd front end over SMT (UDP loopback) to an in-process
//! memory node.
//!
//! ```text
//! cargo run --release -p smt-farmem --example remote_memory -- [--out docs/remote-memory] [--quick]
//! ```
//!
//! - Random array indirection (Fig. 5): an array of u64 indices filling
//!   `--pages` pages on the memory node; a request follows `--depth`
//!   random entries. Latency (median, P99.9) at a fixed offered load per
//!   cache size, and the highest offered load whose P99.9 stays under
//!   `--bound-us` ("achievable throughput").
//! - Key-value store (Fig. 6): 50-byte keys, 1 KiB values, 99 % GET / 1 %
//!   SCAN(100), the store entirely in remote memory; GET latency against
//!   offered load at one cache size.
//!
//! Busy-wait runs one application thread (DiLOS: a core serves one
//! request at a time and spins through its faults); yield runs
//! `--workers` application threads whose faults the handler overlaps.
//! The engine is set slower per page than the CPU path measured here
//! (`--engine-factor` times it), as the seed found the RNIC to be.
//! Writes `results.md`, `results.csv` and SVG plots to `--out`, and
//! prints the tables.

mod plot;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use smt::keys::AeadAlgorithm;
use smt::{EndpointConfig, LocalEndpoint, ServerAcceptor};
use smt_farmem::paging::{Fill, RegionConfig, RemoteRegion};
use smt_farmem::workload::{
    run_open_loop, ArrayIndirection, KvLayout, LoadConfig, LoadResult, SplitMix64, KEY_LEN,
    SCAN_LEN, VALUE_LEN,
};
use smt_farmem::{psk_endpoint, Crypto, Pipeline, Requester};
use smt_memnode::{MemNode, RunningNode, StoreConfig};
use smt_pagecrypt::engine::{CryptoEngine, EngineConfig};
use smt_pagecrypt::{Crc64, KeyRing, Page, PageCipher, XtsKey, PAGE_SIZE};

const PSK: [u8; 32] = [0x5e; 32];

#[derive(Clone, Debug)]
struct Args {
    out: PathBuf,
    pages: usize,
    depth: usize,
    workers: usize,
    bound_us: f64,
    seconds: f64,
    engine_factor: f64,
    caches: Vec<f64>,
    kv_cache: f64,
    fixed_rate: f64,
}

fn args() -> Args {
    let mut a = Args {
        out: PathBuf::from("docs/remote-memory"),
        pages: 4096,
        depth: 4,
        workers: 8,
        bound_us: 2000.0,
        seconds: 2.0,
        engine_factor: 1.3,
        caches: vec![0.25, 0.5, 0.75],
        kv_cache: 0.25,
        fixed_rate: 200.0,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut it = argv.iter();
    while let Some(flag) = it.next() {
        let mut val = || it.next().cloned().unwrap_or_default();
        match flag.as_str() {
            "--out" => a.out = PathBuf::from(val()),
            "--pages" => a.pages = val().parse().expect("--pages N"),
            "--depth" => a.depth = val().parse().expect("--depth N"),
            "--workers" => a.workers = val().parse().expect("--workers N"),
            "--bound-us" => a.bound_us = val().parse().expect("--bound-us F"),
            "--seconds" => a.seconds = val().parse().expect("--seconds F"),
            "--engine-factor" => a.engine_factor = val().parse().expect("--engine-factor F"),
            "--fixed-rate" => a.fixed_rate = val().parse().expect("--fixed-rate F"),
            "--quick" => {
                a.pages = 2048;
                a.seconds = 0.5;
                a.caches = vec![0.25, 0.75];
            }
            other => panic!("unknown flag {other}; see the example's docs"),
        }
    }
    a
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Combo {
    requester: Requester,
    engine: bool,
}

impl Combo {
    const ALL: [Combo; 4] = [
        Combo {
            requester: Requester::BusyWait,
            engine: false,
        },
        Combo {
            requester: Requester::BusyWait,
            engine: true,
        },
        Combo {
            requester: Requester::Yield,
            engine: false,
        },
        Combo {
            requester: Requester::Yield,
            engine: true,
        },
    ];

    fn name(&self) -> String {
        format!(
            "{}/{}",
            self.requester,
            if self.engine { "engine" } else { "cpu" }
        )
    }
}

/// One measured load point.
#[derive(Clone, Debug)]
struct Point {
    workload: &'static str,
    combo: Combo,
    cache: f64,
    offered: f64,
    achieved: f64,
    median_us: f64,
    p999_us: f64,
    samples: usize,
}

struct Setup {
    node: RunningNode,
    ring: KeyRing,
    engine: EngineConfig,
    args: Args,
}

fn main() {
    let args = args();
    std::fs::create_dir_all(&args.out).expect("create --out");
    if let Err(why) = smt_farmem::paging::available() {
        eprintln!("remote_memory: userfaultfd is not available ({why}); run as root");
        std::process::exit(2);
    }
    let mut log = String::new();
    let cpu_us = cpu_open_us();
    let engine = engine_config(cpu_us, args.engine_factor);
    let _ = writeln!(
        log,
        "CPU: {}; load average before: {}\nCPU page open (XTS + CRC-64/NVME): {cpu_us:.2} µs; engine: {:.2} µs pipeline + {:.2} µs latency per page ({}x)",
        cpu_model(),
        loadavg(),
        4112.0 / engine.throughput.unwrap_or(f64::INFINITY) * 1e6,
        engine.latency.as_secs_f64() * 1e6,
        args.engine_factor
    );
    print!("{log}");
    let setup = Setup {
        node: start_node(&args),
        ring: KeyRing::new(XtsKey::random()),
        engine,
        args: args.clone(),
    };
    let mut points = array_experiment(&setup);
    points.extend(kv_experiment(&setup));
    let _ = writeln!(log, "load average after: {}", loadavg());
    let md = report(&args, &log, &points);
    println!("{md}");
    std::fs::write(args.out.join("results.md"), &md).expect("write results.md");
    std::fs::write(args.out.join("results.csv"), csv(&points)).expect("write results.csv");
    plot::all(&args.out, &points_for_plot(&points), args.bound_us).expect("plots");
    eprintln!(
        "remote_memory: wrote results.md, results.csv and SVG plots to {}",
        args.out.display()
    );
}

fn start_node(args: &Args) -> RunningNode {
    let mut ep = LocalEndpoint::bind(([127, 0, 0, 1], 0).into(), EndpointConfig::default())
        .expect("bind the memory node");
    ep.set_handshake_acceptor(Box::new(
        ServerAcceptor::new(None, None).with_psk(&PSK, AeadAlgorithm::Aes128Gcm),
    ));
    let store = StoreConfig {
        capacity_pages: (args.pages * 4) as u64,
        address_limit: 1 << 40,
    };
    MemNode::new(ep, store)
        .spawn()
        .expect("start the memory node")
}

/// The CPU path's time to open one page, measured here.
fn cpu_open_us() -> f64 {
    let mut c = PageCipher::new(KeyRing::new(XtsKey::random()), Crc64::Nvme);
    let sealed = c.seal(0, 0, &[3u8; PAGE_SIZE]);
    let id = c.ring().current();
    let n = 20_000;
    let start = Instant::now();
    for _ in 0..n {
        let mut b = *sealed.bytes;
        c.open_in_place(0, 0, id, &mut b).expect("opens");
    }
    start.elapsed().as_secs_f64() * 1e6 / n as f64
}

/// An engine `factor` times slower per page than the CPU: a third of
/// it in the pipeline (throughput), the rest latency.
fn engine_config(cpu_us: f64, factor: f64) -> EngineConfig {
    let total = cpu_us * factor;
    EngineConfig {
        throughput: Some(4112.0 / (total / 3.0 * 1e-6)),
        latency: Duration::from_secs_f64(total * 2.0 / 3.0 * 1e-6),
        queue_depth: 64,
        ..EngineConfig::default()
    }
}

fn pipeline(s: &Setup, combo: Combo) -> Pipeline {
    let cipher = PageCipher::new(s.ring.clone(), Crc64::Nvme);
    let crypto = match combo.engine {
        false => Crypto::Cpu,
        true => {
            let e = Arc::new(CryptoEngine::start(s.engine, &s.ring).expect("engine"));
            Crypto::Engine(e.open_queue().expect("queue"))
        }
    };
    let ep = psk_endpoint(&PSK, combo.requester.busy_poll()).expect("endpoint");
    Pipeline::new(ep, s.node.addr, cipher, crypto)
}

fn workers(s: &Setup, combo: Combo) -> usize {
    match combo.requester {
        Requester::BusyWait => 1,
        Requester::Yield => s.args.workers,
    }
}

fn array_experiment(s: &Setup) -> Vec<Point> {
    let pages = s.args.pages;
    let array = ArrayIndirection::new(pages, s.args.depth, 42);
    let mut filled = false;
    let mut points = Vec::new();
    for &cache in &s.args.caches {
        for combo in Combo::ALL {
            let config = RegionConfig {
                pages,
                cache_pages: ((pages as f64 * cache) as usize).max(1),
                requester: combo.requester,
                remote_base: 0,
            };
            let mut fill = |i: usize, p: &mut Page| array.fill(i, p);
            let how = if filled {
                Fill::AlreadyThere
            } else {
                Fill::With(&mut fill)
            };
            filled = true;
            let region = RemoteRegion::create(pipeline(s, combo), config, how).expect("region");
            warm(&region, config.cache_pages, |i| {
                std::hint::black_box(region.u64_at(i * 512));
            });
            let op = |i: usize| {
                let start = SplitMix64::new(i as u64 ^ 0xa11).next_u64();
                std::hint::black_box(array.run(&region, start));
                true
            };
            let mut sweep = load_sweep(s, combo, &op);
            for p in &mut sweep {
                p.workload = "array";
                p.cache = cache;
                p.combo = combo;
            }
            eprintln!(
                "array cache {:.0}% {}: {} points, {:?}",
                cache * 100.0,
                combo.name(),
                sweep.len(),
                region.stats()
            );
            points.extend(sweep);
        }
    }
    points
}

fn kv_experiment(s: &Setup) -> Vec<Point> {
    let kv = KvLayout::fitting(s.args.pages, 7);
    let bytes = kv.build();
    let base = (s.args.pages * PAGE_SIZE * 2) as u64;
    let mut filled = false;
    let mut points = Vec::new();
    for combo in Combo::ALL {
        let config = RegionConfig {
            pages: kv.pages(),
            cache_pages: ((kv.pages() as f64 * s.args.kv_cache) as usize).max(1),
            requester: combo.requester,
            remote_base: base,
        };
        let mut fill =
            |i: usize, p: &mut Page| p.copy_from_slice(&bytes[i * PAGE_SIZE..(i + 1) * PAGE_SIZE]);
        let how = if filled {
            Fill::AlreadyThere
        } else {
            Fill::With(&mut fill)
        };
        filled = true;
        let region = RemoteRegion::create(pipeline(s, combo), config, how).expect("region");
        warm(&region, config.cache_pages, |i| {
            std::hint::black_box(region.bytes()[i * PAGE_SIZE]);
        });
        let op = |i: usize| {
            let mut g = SplitMix64::new(i as u64 ^ 0x6b76);
            let key: [u8; KEY_LEN] = kv.key(g.below(kv.records as u64) as usize);
            if g.below(100) == 0 {
                std::hint::black_box(kv.scan(region.bytes(), &key, SCAN_LEN));
                return false;
            }
            let mut v = [0u8; VALUE_LEN];
            std::hint::black_box(kv.get(region.bytes(), &key, &mut v));
            true
        };
        let mut sweep = load_sweep(s, combo, &op);
        for p in &mut sweep {
            p.workload = "kv";
            p.cache = s.args.kv_cache;
            p.combo = combo;
        }
        eprintln!(
            "kv {}: {} points, {:?}",
            combo.name(),
            sweep.len(),
            region.stats()
        );
        points.extend(sweep);
    }
    points
}

/// Touches random pages until the cache has been filled once.
fn warm(region: &RemoteRegion, cache_pages: usize, touch: impl Fn(usize)) {
    let mut g = SplitMix64::new(99);
    let pages = region.config().pages as u64;
    for _ in 0..cache_pages.min(4096) {
        touch(g.below(pages) as usize);
    }
}

/// The fixed-rate point, then rates growing by 1.5x from a low start
/// until the system saturates or the tail is far past the bound.
fn load_sweep(s: &Setup, combo: Combo, op: &(dyn Fn(usize) -> bool + Sync)) -> Vec<Point> {
    let mut out = vec![point(s, combo, s.args.fixed_rate, op)];
    let mut rate = 200.0;
    loop {
        let p = point(s, combo, rate, op);
        let saturated = p.achieved < 0.85 * rate || p.p999_us > 5.0 * s.args.bound_us;
        out.push(p);
        if saturated || rate > 100_000.0 {
            break;
        }
        rate *= 1.5;
    }
    out
}

fn point(s: &Setup, combo: Combo, rate: f64, op: &(dyn Fn(usize) -> bool + Sync)) -> Point {
    let requests = ((rate * s.args.seconds) as usize).clamp(400, 200_000);
    let r: LoadResult = run_open_loop(
        LoadConfig {
            rate,
            requests,
            warmup: requests / 10,
            workers: workers(s, combo),
            seed: rate as u64,
        },
        op,
    );
    Point {
        workload: "",
        combo,
        cache: 0.0,
        offered: rate,
        achieved: r.achieved,
        median_us: r.quantile_us(0.5),
        p999_us: r.quantile_us(0.999),
        samples: r.latencies_ns.len(),
    }
}

/// The highest offered rate whose P99.9 is under the bound and whose
/// load was carried.
fn achievable(points: &[&Point], bound_us: f64) -> f64 {
    points
        .iter()
        .skip(1)
        .filter(|p| p.p999_us <= bound_us && p.achieved >= 0.9 * p.offered)
        .map(|p| p.offered)
        .fold(0.0, f64::max)
}

fn report(args: &Args, log: &str, points: &[Point]) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "```text\n{log}```\n");
    let _ = writeln!(
        md,
        "Array indirection ({} pages = {} MiB, depth {}), latency at {:.0} requests/s offered and achievable throughput (P99.9 ≤ {:.0} µs):\n",
        args.pages,
        (args.pages * PAGE_SIZE) >> 20,
        args.depth,
        args.fixed_rate,
        args.bound_us
    );
    let _ = writeln!(
        md,
        "| cache | requester | crypto | median (µs) | P99.9 (µs) | achievable (req/s) |"
    );
    let _ = writeln!(md, "|---|---|---|---:|---:|---:|");
    for &cache in &args.caches {
        for combo in Combo::ALL {
            let mine: Vec<&Point> = points
                .iter()
                .filter(|p| p.workload == "array" && p.combo == combo && p.cache == cache)
                .collect();
            let Some(fixed) = mine.first() else { continue };
            let _ = writeln!(
                md,
                "| {:.0} % | {} | {} | {:.1} | {:.1} | {:.0} |",
                cache * 100.0,
                combo.requester,
                if combo.engine { "engine" } else { "cpu" },
                fixed.median_us,
                fixed.p999_us,
                achievable(&mine, args.bound_us)
            );
        }
    }
    let _ = writeln!(
        md,
        "\nKey-value store (99 % GET / 1 % SCAN({SCAN_LEN}), GET latency; cache {:.0} %), by offered load:\n",
        args.kv_cache * 100.0
    );
    let _ = writeln!(
        md,
        "| requester | crypto | offered (req/s) | achieved | median (µs) | P99.9 (µs) |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|");
    for combo in Combo::ALL {
        for p in points
            .iter()
            .filter(|p| p.workload == "kv" && p.combo == combo)
            .skip(1)
        {
            let _ = writeln!(
                md,
                "| {} | {} | {:.0} | {:.0} | {:.1} | {:.1} |",
                combo.requester,
                if combo.engine { "engine" } else { "cpu" },
                p.offered,
                p.achieved,
                p.median_us,
                p.p999_us
            );
        }
    }
    md
}

fn csv(points: &[Point]) -> String {
    let mut s = String::from(
        "workload,requester,crypto,cache,offered,achieved,median_us,p999_us,samples\n",
    );
    for p in points {
        let _ = writeln!(
            s,
            "{},{},{},{},{:.0},{:.0},{:.2},{:.2},{}",
            p.workload,
            p.combo.requester,
            if p.combo.engine { "engine" } else { "cpu" },
            p.cache,
            p.offered,
            p.achieved,
            p.median_us,
            p.p999_us,
            p.samples
        );
    }
    s
}

fn points_for_plot(points: &[Point]) -> Vec<plot::Row> {
    points
        .iter()
        .map(|p| plot::Row {
            workload: p.workload,
            combo: p.combo.name(),
            cache: p.cache,
            offered: p.offered,
            achieved: p.achieved,
            median_us: p.median_us,
            p999_us: p.p999_us,
        })
        .collect()
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
