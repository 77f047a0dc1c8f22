//! `smt-innetwork a|b|c|d`: the experiments of `docs/innetwork.md`, shaped
//! like MTP's (Stephens et al., HotNets 2021), on the namespace topology
//! with real SMT endpoints over real sockets and the `smt-forwarder`
//! binary between them. Needs root. Writes `<out>/<exp>.json` and SVG plots, prints a table.
//!
//! - a: path alternation: the forwarder moves one long transfer between
//!   a fast and a slow path every period; goodput over time and
//!   convergence for SMT without pathlet feedback, with one DCTCP window,
//!   and with windows per pathlet (MTP Fig. 5);
//! - b: two paths of different delay, heavy-tailed message sizes: p99
//!   completion by size for ECMP, spraying and message-aware balancing,
//!   and packets delivered out of order within a message (MTP Fig. 6);
//! - c: three replicas, skewed request sizes (one session sends the large
//!   requests): per-message replicas (from the ID) against round robin
//!   per session;
//! - d: priorities: small priority-7 calls under a bulk priority-0
//!   background, through 8 priority queues and through one FIFO.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::{CallOptions, Endpoint, EndpointConfig, SessionKeys};
use smt_forwarder::lab::{base_args, in_namespace, Running, Topology, Variant};
use smt_relay::SplitMix64;

const PORT: u16 = 7000;

/// SMT's defaults are for datacenter links (a RESEND after 5 ms of
/// silence, 72 KB in flight per message, 8 messages granted at once);
/// the paths here are 50 Mbit/s, so the timers and windows are scaled
/// with them, or a queue of a few hundred milliseconds reads as loss and
/// RESENDs collapse the link. Both ends use the same settings.
fn scaled() -> EndpointConfig {
    let mut c = EndpointConfig::default();
    c.protocol_mut()
        .set_resend_after(Duration::from_millis(50))
        .set_rpc_idle_timeout(Duration::from_secs(5))
        .set_unscheduled_bytes(30_000)
        .set_grant_window(30_000)
        .set_max_resend_bytes(30_000)
        .set_overcommit(2);
    c
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let exp = args.first().map(String::as_str).unwrap_or("");
    let seconds: f64 = flag(&args, "--seconds").map_or(10.0, |s| s.parse().expect("--seconds N"));
    let out = PathBuf::from(flag(&args, "--out").unwrap_or_else(|| "docs/innetwork".into()));
    std::fs::create_dir_all(&out).expect("output directory");
    let script = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/innetwork-topo.sh"
    ));
    let forwarder = std::env::current_exe()
        .expect("own path")
        .with_file_name("smt-forwarder");
    let lab = Lab {
        script,
        forwarder,
        out,
        seconds,
    };
    match exp {
        "a" => lab.alternation(),
        "b" => lab.paths(),
        "c" => lab.replicas(),
        "d" => lab.priorities(),
        _ => {
            eprintln!("usage: smt-innetwork a|b|c|d [--seconds N] [--out DIR]  (needs root)");
            std::process::exit(2);
        }
    }
}

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// Makes the endpoints' configuration of one run.
type Configure = fn() -> EndpointConfig;

struct Lab {
    script: PathBuf,
    forwarder: PathBuf,
    out: PathBuf,
    seconds: f64,
}

/// One finished call.
#[derive(Clone, Copy, Debug)]
struct Done {
    size: usize,
    session: usize,
    latency: Duration,
    /// When it finished, from the load's start.
    end: Duration,
    ok: bool,
}

/// An open-loop load: per session, Poisson arrivals at `rate` per second
/// with sizes from `size`, at `priority`.
#[derive(Clone, Copy)]
struct Load {
    rate: f64,
    size: fn(&mut SplitMix64) -> usize,
    priority: u8,
    /// Closed loop instead: this many calls outstanding, back to back.
    closed: Option<usize>,
}

/// Bounded Pareto sizes (heavy tail, most messages small).
fn pareto(rng: &mut SplitMix64, alpha: f64, lo: f64, hi: f64) -> usize {
    let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let (la, ha) = (lo.powf(alpha), hi.powf(alpha));
    let x = (-(u * ha - u * la - ha) / (ha * la)).powf(-1.0 / alpha);
    x.clamp(lo, hi) as usize
}

impl Lab {
    fn topology(&self, tag: &str, variant: Variant, links: usize, rates: &[u64]) -> Topology {
        Topology::up(&self.script, tag, variant, 1, links, rates)
            .expect("topology")
            .unwrap_or_else(|| std::process::exit(0))
    }

    /// Runs `loads` (one session each) from client namespace 0 through a
    /// forwarder started with `extra` args; returns the calls and the
    /// forwarder's counters.
    fn run(
        &self,
        topo: &Topology,
        fwd_args: &[String],
        loads: &[Load],
        service: fn(usize) -> Duration,
    ) -> (Vec<Done>, serde_json::Value) {
        self.run_with(topo, fwd_args, loads, service, scaled)
    }

    /// [`Lab::run`] with the endpoints' configuration from `config`.
    fn run_with(
        &self,
        topo: &Topology,
        fwd_args: &[String],
        loads: &[Load],
        service: fn(usize) -> Duration,
        config: fn() -> EndpointConfig,
    ) -> (Vec<Done>, serde_json::Value) {
        let mut args = base_args(PORT);
        args.extend(["--buffer-bytes".into(), (1u64 << 20).to_string()]);
        args.extend(fwd_args.iter().cloned());
        let fwd = Running::start(&self.forwarder, &topo.ns("f"), &args).expect("forwarder");
        let pairs: Vec<(SessionKeys, SessionKeys)> = loads
            .iter()
            .map(|_| fresh_session_pair(AeadAlgorithm::Aes128Gcm))
            .collect();
        let to = Topology::forwarder_addr(0, false, PORT);
        let client_keys: Vec<SessionKeys> = pairs.iter().map(|p| p.0.clone()).collect();
        let clients: Vec<Endpoint> = in_namespace(&topo.ns("c0"), move || {
            client_keys
                .into_iter()
                .map(|k| {
                    let ep =
                        Endpoint::bind("0.0.0.0:0".parse().unwrap(), config()).expect("client");
                    ep.install_session(to, k).expect("keys");
                    ep
                })
                .collect()
        })
        .expect("client namespace");
        let by_port: HashMap<u16, SessionKeys> = clients
            .iter()
            .zip(&pairs)
            .map(|(c, p)| (c.local_addr().port(), p.1.clone()))
            .collect();
        let by_port = Arc::new(by_port);
        let servers: Vec<Endpoint> = (0..topo.links.max(1))
            .filter(|&k| k == 0 || topo.variant == Variant::Replicas)
            .map(|k| serve(topo, k, by_port.clone(), service, config))
            .collect();
        let seconds = self.seconds;
        let loads = loads.to_vec();
        let done = drive(clients, to, loads, seconds);
        let stats = fwd.stop().expect("forwarder counters");
        // The serving threads hold clones: close, so the next run can bind
        // the port again.
        for s in servers {
            s.close();
        }
        std::thread::sleep(Duration::from_millis(300));
        (done, stats)
    }

    fn alternation(&self) {
        let rates = [100, 10];
        let delays = [500, 500];
        let period_ms = 400;
        let topo = self.topology("expa", Variant::Paths, 2, &rates);
        let size: fn(&mut SplitMix64) -> usize = |_| 128_000;
        let loads = [Load {
            rate: 0.0,
            size,
            priority: 0,
            closed: Some(8),
        }];
        let senders: [(&str, Configure); 3] = [
            ("no pathlet feedback (SMT's grants only)", scaled),
            ("one DCTCP window", || {
                let mut c = scaled();
                c.protocol_mut()
                    .set_pathlet_feedback(true)
                    .set_pathlet_single_window(true);
                c
            }),
            ("windows per pathlet", || {
                let mut c = scaled();
                c.protocol_mut().set_pathlet_feedback(true);
                c
            }),
        ];
        let bin = Duration::from_millis(50);
        let mut table = String::from(
            "| sender | goodput Mbit/s (mean) | on the fast path | on the slow path | to 90 % of the fast path after a switch (ms, mean) | p99 call ms | max queue fast / slow (KB) | calls (failed) |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        let mut series = Vec::new();
        let mut json = serde_json::Map::new();
        for (name, config) in senders {
            let mut args = topo.path_args(PORT, &delays, &rates);
            args.extend(["--balance".into(), format!("alternate:{period_ms}")]);
            let (done, stats) = self.run_with(&topo, &args, &loads, |_| Duration::ZERO, config);
            let goodput = goodput_bins(&done, bin, self.seconds);
            // The forwarder's periods start at its first packet, within a
            // few milliseconds of the load's start (`drive`).
            let per = (period_ms / bin.as_millis() as u64) as usize;
            let on = |path: usize| -> f64 {
                let v: Vec<f64> = goodput
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| (i / per) % 2 == path && i % per != 0)
                    .map(|(_, g)| *g)
                    .collect();
                v.iter().sum::<f64>() / v.len().max(1) as f64
            };
            let converge: Vec<f64> = goodput
                .chunks(per)
                .enumerate()
                .skip(1)
                .filter(|(i, _)| i % 2 == 0)
                .filter_map(|(_, c)| c.iter().position(|g| *g >= 0.9 * rates[0] as f64))
                .map(|n| ((n + 1) * bin.as_millis() as usize) as f64)
                .collect();
            let lat: Vec<f64> = done
                .iter()
                .filter(|d| d.ok)
                .map(|d| d.latency.as_secs_f64() * 1e3)
                .collect();
            let failed = done.iter().filter(|d| !d.ok).count();
            let mean = goodput.iter().sum::<f64>() / goodput.len().max(1) as f64;
            let conv = if converge.is_empty() {
                "never".to_owned()
            } else {
                format!(
                    "{:.0} ({} of {} switches)",
                    converge.iter().sum::<f64>() / converge.len() as f64,
                    converge.len(),
                    goodput.chunks(per).skip(1).step_by(2).count()
                )
            };
            let kb = |p: usize| stats["paths"][p]["max_queue_bytes"].as_u64().unwrap_or(0) / 1000;
            table += &format!(
                "| {name} | {mean:.1} | {:.1} | {:.1} | {conv} | {} | {} / {} | {} ({failed}) |\n",
                on(0),
                on(1),
                fmt_ms(percentile(&lat, 0.99)),
                kb(0),
                kb(1),
                done.len(),
            );
            let points: Vec<(f64, f64)> = goodput
                .iter()
                .enumerate()
                .map(|(i, g)| (((i + 1) * bin.as_millis() as usize) as f64, *g))
                .collect();
            series.push((name.to_owned(), points));
            json.insert(
                name.into(),
                serde_json::json!({"forwarder": stats, "calls": done.len(), "failed": failed, "goodput_mbit_per_50ms": goodput}),
            );
        }
        self.finish("a", &table, serde_json::Value::Object(json));
        plot(
            &self.out.join("a-goodput.svg"),
            "(a) goodput, one transfer alternated every 400 ms between 100 and 10 Mbit/s paths",
            "time (ms)",
            "goodput (Mbit/s, 50 ms bins)",
            &series,
        );
    }

    fn paths(&self) {
        let rates = [50, 50];
        let delays = [200, 2000];
        let topo = self.topology("expb", Variant::Paths, 2, &rates);
        let size: fn(&mut SplitMix64) -> usize = |r| pareto(r, 1.1, 1_000.0, 2_000_000.0);
        let loads = [Load {
            rate: 250.0,
            size,
            priority: 0,
            closed: None,
        }; 4];
        let bins: [(usize, usize, &str); 4] = [
            (0, 10_000, "< 10 KB"),
            (10_000, 100_000, "10-100 KB"),
            (100_000, 1_000_000, "100 KB-1 MB"),
            (1_000_000, usize::MAX, ">= 1 MB"),
        ];
        let mut table = String::from(
            "| balance | p99 < 10 KB | p99 10-100 KB | p99 100 KB-1 MB | p99 >= 1 MB | p50 all | calls (failed) | DATA packets out of order | messages reordered |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        let mut series = Vec::new();
        let mut json = serde_json::Map::new();
        for mode in ["ecmp", "spray", "message"] {
            let mut args = topo.path_args(PORT, &delays, &rates);
            args.extend(["--balance".into(), mode.into()]);
            let (done, stats) = self.run(&topo, &args, &loads, |_| Duration::ZERO);
            let mut row = format!("| {mode} |");
            let mut points = Vec::new();
            for &(lo, hi, _) in &bins {
                let lat: Vec<f64> = done
                    .iter()
                    .filter(|d| d.ok && d.size >= lo && d.size < hi)
                    .map(|d| d.latency.as_secs_f64() * 1e3)
                    .collect();
                let p = percentile(&lat, 0.99);
                row += &format!(" {} ({}) |", fmt_ms(p), lat.len());
                if let Some(p) = p {
                    let mid = if hi == usize::MAX {
                        lo as f64 * 1.4
                    } else {
                        ((lo.max(1000) * hi) as f64).sqrt()
                    };
                    points.push((mid / 1000.0, p));
                }
            }
            let all: Vec<f64> = done
                .iter()
                .filter(|d| d.ok)
                .map(|d| d.latency.as_secs_f64() * 1e3)
                .collect();
            let failed = done.iter().filter(|d| !d.ok).count();
            row += &format!(
                " {} | {} ({failed}) | {} of {} | {} |\n",
                fmt_ms(percentile(&all, 0.5)),
                done.len(),
                stats["out_of_order_packets"],
                stats["data_packets"],
                stats["reordered_messages"],
            );
            table += &row;
            series.push((mode.to_owned(), points));
            json.insert(
                mode.into(),
                serde_json::json!({"forwarder": stats, "calls": done.len(), "failed": failed}),
            );
        }
        self.finish("b", &table, serde_json::Value::Object(json));
        plot(
            &self.out.join("b-p99-by-size.svg"),
            "(b) p99 completion by message size, two paths (200 µs / 2 ms, 50 Mbit/s each)",
            "message size (KB, bin centre)",
            "p99 completion (ms)",
            &series,
        );
    }

    fn replicas(&self) {
        let topo = self.topology("expc", Variant::Replicas, 3, &[]);
        let heavy: fn(&mut SplitMix64) -> usize = |r| pareto(r, 1.2, 8_000.0, 128_000.0);
        let light: fn(&mut SplitMix64) -> usize = |r| pareto(r, 1.2, 1_000.0, 4_000.0);
        let mut loads = vec![Load {
            rate: 300.0,
            size: heavy,
            priority: 0,
            closed: None,
        }];
        loads.extend(
            [Load {
                rate: 100.0,
                size: light,
                priority: 0,
                closed: None,
            }; 5],
        );
        // Service time: 50 µs plus 100 µs per KB (a replica does real work
        // in proportion to the request).
        let service: fn(usize) -> Duration = |n| Duration::from_micros(50 + n as u64 / 10);
        let mut table = String::from(
            "| replica choice | p50 light | p99 light | p50 heavy | p99 heavy | requests per replica | calls (failed) |\n|---|---:|---:|---:|---:|---|---:|\n",
        );
        let mut series = Vec::new();
        let mut json = serde_json::Map::new();
        for policy in ["session", "message"] {
            let mut args = topo.path_args(PORT, &[], &[]);
            args.extend(["--replicas".into(), policy.into()]);
            let (done, stats) = self.run(&topo, &args, &loads, service);
            let lat = |heavy: bool| -> Vec<f64> {
                done.iter()
                    .filter(|d| d.ok && (d.session == 0) == heavy)
                    .map(|d| d.latency.as_secs_f64() * 1e3)
                    .collect()
            };
            let (l, h) = (lat(false), lat(true));
            let per: Vec<String> = (0..3)
                .map(|r| stats["replicas"][r]["packets"].to_string())
                .collect();
            let failed = done.iter().filter(|d| !d.ok).count();
            table += &format!(
                "| {policy} | {} | {} | {} | {} | packets {} | {} ({failed}) |\n",
                fmt_ms(percentile(&l, 0.5)),
                fmt_ms(percentile(&l, 0.99)),
                fmt_ms(percentile(&h, 0.5)),
                fmt_ms(percentile(&h, 0.99)),
                per.join(" / "),
                done.len(),
            );
            series.push((format!("{policy}: light requests"), cdf(&l)));
            series.push((format!("{policy}: heavy requests"), cdf(&h)));
            json.insert(
                policy.into(),
                serde_json::json!({"forwarder": stats, "calls": done.len(), "failed": failed}),
            );
        }
        self.finish("c", &table, serde_json::Value::Object(json));
        plot(
            &self.out.join("c-latency-cdf.svg"),
            "(c) request latency, 3 replicas, one session sends the large requests",
            "latency (ms)",
            "fraction of requests",
            &series,
        );
    }

    fn priorities(&self) {
        let topo = self.topology("expd", Variant::Paths, 1, &[50]);
        let bulk: fn(&mut SplitMix64) -> usize = |_| 1_000_000;
        let small: fn(&mut SplitMix64) -> usize = |_| 1_000;
        let loads = [
            Load {
                rate: 0.0,
                size: bulk,
                priority: 0,
                closed: Some(4),
            },
            Load {
                rate: 0.0,
                size: bulk,
                priority: 0,
                closed: Some(4),
            },
            Load {
                rate: 50.0,
                size: small,
                priority: 7,
                closed: None,
            },
        ];
        let mut table = String::from(
            "| forwarder queues | p50 small (prio 7) | p99 small | bulk goodput (Mbit/s) | small calls (failed) |\n|---|---:|---:|---:|---:|\n",
        );
        let mut series = Vec::new();
        let mut json = serde_json::Map::new();
        for queues in [1usize, 8] {
            let mut args = topo.path_args(PORT, &[200], &[50]);
            args.extend(["--priorities".into(), queues.to_string()]);
            let (done, stats) = self.run(&topo, &args, &loads, |_| Duration::ZERO);
            let small: Vec<f64> = done
                .iter()
                .filter(|d| d.ok && d.session == 2)
                .map(|d| d.latency.as_secs_f64() * 1e3)
                .collect();
            let bulk_bytes: usize = done
                .iter()
                .filter(|d| d.ok && d.session < 2)
                .map(|d| d.size)
                .sum();
            let failed = done.iter().filter(|d| !d.ok && d.session == 2).count();
            let name = if queues == 1 {
                "1 (FIFO)".to_owned()
            } else {
                format!("{queues} priorities")
            };
            table += &format!(
                "| {name} | {} | {} | {:.1} | {} ({failed}) |\n",
                fmt_ms(percentile(&small, 0.5)),
                fmt_ms(percentile(&small, 0.99)),
                bulk_bytes as f64 * 8.0 / self.seconds / 1e6,
                small.len() + failed,
            );
            series.push((name.clone(), cdf(&small)));
            json.insert(name, serde_json::json!({"forwarder": stats}));
        }
        self.finish("d", &table, serde_json::Value::Object(json));
        plot(
            &self.out.join("d-priority-cdf.svg"),
            "(d) 1 KB priority-7 calls under 1 MB priority-0 bulk, one 50 Mbit/s path",
            "latency (ms)",
            "fraction of small calls",
            &series,
        );
    }

    fn finish(&self, exp: &str, table: &str, json: serde_json::Value) {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|c| {
                c.lines()
                    .find(|l| l.starts_with("model name"))
                    .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
            })
            .unwrap_or_default();
        let doc = serde_json::json!({"experiment": exp, "seconds": self.seconds, "cpu": cpu, "table": table, "results": json});
        let path = self.out.join(format!("{exp}.json"));
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&doc).unwrap_or_default(),
        )
        .expect("write results");
        println!("({exp}) {} s per run, CPU {cpu}\n{table}", self.seconds);
    }
}

/// An echo-ish server (8-byte answers) in server namespace `k`, taking
/// `service(request size)` per request, one request at a time.
fn serve(
    topo: &Topology,
    k: usize,
    keys: Arc<HashMap<u16, SessionKeys>>,
    service: fn(usize) -> Duration,
    config: fn() -> EndpointConfig,
) -> Endpoint {
    let ep = in_namespace(&topo.ns(&format!("s{k}")), move || {
        let ep = Endpoint::bind("0.0.0.0:7000".parse().unwrap(), config()).expect("server");
        ep.set_key_resolver(Box::new(move |peer: SocketAddr| {
            keys.get(&peer.port()).cloned()
        }))
        .expect("resolver");
        ep
    })
    .expect("server namespace");
    let s = ep.clone();
    std::thread::spawn(move || {
        while let Ok(mut req) = s.accept() {
            let n = req.take_data().len();
            let t = service(n);
            if !t.is_zero() {
                std::thread::sleep(t);
            }
            let _ = req.respond(&(n as u64).to_le_bytes());
        }
    });
    ep
}

/// Runs the loads for `seconds` on a single-threaded async runtime; a
/// call's latency runs from its scheduled start (open loop) or its start
/// (closed loop) to its response.
fn drive(clients: Vec<Endpoint>, to: SocketAddr, loads: Vec<Load>, seconds: f64) -> Vec<Done> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let done: Arc<Mutex<Vec<Done>>> = Arc::default();
    let start = Instant::now() + Duration::from_millis(100);
    let end = start + Duration::from_secs_f64(seconds);
    rt.block_on(async {
        let mut tasks = Vec::new();
        for (session, (client, load)) in clients.into_iter().zip(loads).enumerate() {
            let mut rng = SplitMix64::new(0x1000 + session as u64);
            let call = move |client: Endpoint,
                             size: usize,
                             at: Instant,
                             done: Arc<Mutex<Vec<Done>>>| async move {
                let data = vec![0x5au8; size];
                let options = CallOptions::new()
                    .priority(load.priority)
                    .timeout(Duration::from_secs(10));
                let ok = client.call_async_with(to, data, options).await.is_ok();
                done.lock().unwrap().push(Done {
                    size,
                    session,
                    latency: at.elapsed(),
                    end: Instant::now().saturating_duration_since(start),
                    ok,
                });
            };
            if let Some(n) = load.closed {
                for _ in 0..n {
                    let (client, done) = (client.clone(), done.clone());
                    let mut rng = SplitMix64::new(rng.next_u64());
                    tasks.push(tokio::spawn(async move {
                        tokio::time::sleep_until(start.into()).await;
                        while Instant::now() < end {
                            let size = (load.size)(&mut rng);
                            call(client.clone(), size, Instant::now(), done.clone()).await;
                        }
                    }));
                }
                continue;
            }
            let mut at = start;
            while at < end {
                let gap = -((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
                    .max(1e-12)
                    .ln()
                    / load.rate;
                at += Duration::from_secs_f64(gap);
                let size = (load.size)(&mut rng);
                let (client, done) = (client.clone(), done.clone());
                tasks.push(tokio::spawn(async move {
                    tokio::time::sleep_until(at.into()).await;
                    call(client, size, at, done).await;
                }));
            }
        }
        for t in tasks {
            let _ = t.await;
        }
    });
    let v = done.lock().unwrap().clone();
    v
}

/// Goodput of the successful calls per `bin` over `seconds`, Mbit/s (a
/// call's bytes counted when it completes).
fn goodput_bins(done: &[Done], bin: Duration, seconds: f64) -> Vec<f64> {
    let n = (seconds / bin.as_secs_f64()).floor() as usize;
    let mut bytes = vec![0usize; n];
    for d in done.iter().filter(|d| d.ok) {
        let i = (d.end.as_secs_f64() / bin.as_secs_f64()) as usize;
        if let Some(b) = bytes.get_mut(i) {
            *b += d.size;
        }
    }
    bytes
        .iter()
        .map(|b| *b as f64 * 8.0 / bin.as_secs_f64() / 1e6)
        .collect()
}

/// The `q`-quantile of `v` (in any order) by the workspace's one rule
/// ([`smt::stats::quantile`]).
fn percentile(v: &[f64], q: f64) -> Option<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    smt::stats::quantile(&s, q)
}

fn fmt_ms(v: Option<f64>) -> String {
    v.map_or("—".into(), |ms| format!("{ms:.2} ms"))
}

/// (latency, fraction at or below), thinned to at most 200 points.
fn cdf(v: &[f64]) -> Vec<(f64, f64)> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let step = (n / 200).max(1);
    s.iter()
        .enumerate()
        .filter(|(i, _)| i % step == 0 || *i == n - 1)
        .map(|(i, &x)| (x.max(0.01), (i + 1) as f64 / n as f64))
        .collect()
}

fn plot(path: &Path, title: &str, x: &str, y: &str, series: &[(String, Vec<(f64, f64)>)]) {
    match smt_bench::plot::lines(path, title, x, y, series) {
        Ok(()) => println!("wrote {}", path.display()),
        Err(e) => eprintln!("plot {}: {e}", path.display()),
    }
}
