//! `smt-hostile`: hostile traffic from outside, against a real `smt
//! server` process, while a legitimate client calls it (issue #11 item 6).
//!
//! For each class (random datagrams, absurd headers, forged control
//! packets, keyless PSK hellos, first packets of 64 MiB messages, TLS
//! ClientHellos) it starts a fresh server process, connects a legitimate
//! client (an `smt::Endpoint` over real UDP, in this process), measures the
//! unloaded latency, floods the server from other sockets at a fixed rate,
//! lets it recover, and reports the legitimate success rate and latency,
//! the server's resident memory (`/proc/<pid>/status`) and what came back
//! to the attacker. The amplification class sends each spoofable packet
//! type from its own fresh socket and counts the bytes the server sends to
//! that address. Results are markdown tables; issue #11's thresholds are
//! PASS/MISS lines.
//!
//! Exit status: 0 when every server stayed alive and its legitimate
//! client succeeded at least once; 1 when not (or on an error); 3 with
//! `--strict` when any threshold was missed; 2 for bad arguments.

mod amplify;
mod classes;
mod flood;
mod forge;
mod legit;
mod report;
mod server;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Parser;
use smt_sim::SplitMix64;

use classes::{Class, Generator};
use flood::{Shot, Sources, SpoofMode, Tally, Via};
use legit::{ClientKeys, Clients, Phase};
use report::ClassResult;
use server::{Server, ServerKeys};

/// Floods a real `smt server` process with hostile traffic while a
/// legitimate client calls it; prints per-class tables and issue #11's
/// thresholds as PASS/MISS.
#[derive(Debug, Parser)]
#[command(name = "smt-hostile", version, about, long_about = None)]
struct Args {
    /// The `smt` binary (apps/smt-cli). Default: `smt` next to this program.
    #[arg(long)]
    smt: Option<PathBuf>,
    /// Long variant: 3 s unloaded, 30 s flood, 10 s recovery per class,
    /// longer listening for amplification.
    #[arg(long)]
    long: bool,
    /// Exit with status 3 when any threshold is missed.
    #[arg(long)]
    strict: bool,
    /// Classes to run, comma separated (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    classes: Vec<Class>,
    /// Flood rate in datagrams per second (1 to 1,000,000).
    #[arg(long, default_value_t = 15_000)]
    pps: u32,
    /// Seconds of flood per class (default 3, with --long 30).
    #[arg(long)]
    flood_secs: Option<f64>,
    /// Seconds of unloaded calls before each flood (default 1, --long 3).
    #[arg(long)]
    baseline_secs: Option<f64>,
    /// Seconds of recovery after each flood (default 1, --long 10).
    #[arg(long)]
    recovery_secs: Option<f64>,
    /// How spoofed sources are made.
    #[arg(long, value_enum, default_value_t = SpoofMode::Auto)]
    spoof: SpoofMode,
    /// Stop a flood when the server's RSS passes this many MiB (protects
    /// the machine; the class then reports MISS).
    #[arg(long, default_value_t = 2048)]
    rss_cap_mib: u64,
    /// Seed of the attacker's random choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Timings and rates of one run.
#[derive(Debug, Clone, Copy)]
struct Plan {
    baseline: Duration,
    flood: Duration,
    recovery: Duration,
    pps: u32,
    quiet: Duration,
    limit: Duration,
    spoof: SpoofMode,
    rss_cap_kib: u64,
    seed: u64,
}

impl Plan {
    fn from_args(a: &Args) -> Result<Self, String> {
        let secs =
            |v: Option<f64>, short: f64, long: f64, what: &str| -> Result<Duration, String> {
                let v = v.unwrap_or(if a.long { long } else { short });
                if !(v.is_finite() && v > 0.0 && v <= 3600.0) {
                    return Err(format!(
                        "--{what} must be more than 0 and at most 3600 seconds, not {v}"
                    ));
                }
                Ok(Duration::from_secs_f64(v))
            };
        if !(1..=1_000_000).contains(&a.pps) {
            return Err(format!("--pps must be 1 to 1000000, not {}", a.pps));
        }
        if a.rss_cap_mib == 0 {
            return Err("--rss-cap-mib must be above 0".into());
        }
        Ok(Self {
            baseline: secs(a.baseline_secs, 1.0, 3.0, "baseline-secs")?,
            flood: secs(a.flood_secs, 3.0, 30.0, "flood-secs")?,
            recovery: secs(a.recovery_secs, 1.0, 10.0, "recovery-secs")?,
            pps: a.pps,
            quiet: Duration::from_millis(if a.long { 1000 } else { 300 }),
            limit: Duration::from_secs(if a.long { 20 } else { 3 }),
            spoof: a.spoof,
            rss_cap_kib: a.rss_cap_mib.saturating_mul(1024),
            seed: a.seed,
        })
    }
}

/// What every class shares: the binary, the keys, the TLS files.
struct Env {
    smt: PathBuf,
    psk_hex: String,
    psk: Vec<u8>,
    tls_files: (PathBuf, PathBuf),
    tls_client: smt_tls::TlsClient,
    _dir: tempfile::TempDir,
}

impl Env {
    fn new(smt: PathBuf) -> Result<Self, String> {
        let mut psk = vec![0u8; 32];
        smt_crypto::fill_random(&mut psk);
        let psk_hex = hex::encode(&psk);
        let dir =
            tempfile::tempdir().map_err(|e| format!("cannot make a temporary directory: {e}"))?;
        let ca = smt_tls::certs::Ca::generate("smt-hostile test CA")
            .map_err(|e| format!("cannot make a CA: {e}"))?;
        let cert = ca
            .issue(&["127.0.0.1"], false)
            .map_err(|e| format!("cannot issue the server certificate: {e}"))?;
        let (cert_path, key_path) = (
            dir.path().join("server.pem"),
            dir.path().join("server-key.pem"),
        );
        std::fs::write(&cert_path, cert.chain_pem())
            .map_err(|e| format!("cannot write {}: {e}", cert_path.display()))?;
        std::fs::write(&key_path, cert.key_pem())
            .map_err(|e| format!("cannot write {}: {e}", key_path.display()))?;
        let tls_client = smt_tls::TlsClient::new(ca.cert_pem().as_bytes(), None)
            .map_err(|e| format!("cannot make the TLS client: {e}"))?;
        Ok(Self {
            smt,
            psk_hex,
            psk,
            tls_files: (cert_path, key_path),
            tls_client,
            _dir: dir,
        })
    }

    fn server_keys(&self, tls: bool) -> ServerKeys {
        if tls {
            ServerKeys::Tls {
                cert: self.tls_files.0.clone(),
                key: self.tls_files.1.clone(),
            }
        } else {
            ServerKeys::Psk(self.psk_hex.clone())
        }
    }

    fn client_keys(&self, tls: bool) -> ClientKeys {
        if tls {
            ClientKeys::Tls(self.tls_client.clone())
        } else {
            ClientKeys::Psk(self.psk.clone())
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("smt-hostile: error: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(args: &Args) -> Result<ExitCode, String> {
    let plan = Plan::from_args(args)?;
    let env = Env::new(locate_smt(args.smt.as_deref())?)?;
    let mut wanted = if args.classes.is_empty() {
        let mut all = Class::FLOODS.to_vec();
        all.push(Class::Amplification);
        all
    } else {
        args.classes.clone()
    };
    // The issue's order, each class once.
    wanted.sort();
    wanted.dedup();
    println!("{}", preamble(&env, &plan, args.long));
    let mut floods = Vec::new();
    let mut probes = Vec::new();
    for class in wanted {
        eprintln!("smt-hostile: {} ...", class.label());
        if class == Class::Amplification {
            probes = amplification(&plan, &env)?;
        } else {
            let r = run_class(class, &plan, &env)?;
            eprintln!(
                "smt-hostile:   server counters at the end: {}",
                r.server_stats
            );
            floods.push(r);
        }
    }
    println!("load average at the end: {}", loadavg());
    println!();
    if !floods.is_empty() {
        println!("{}", report::flood_table(&floods));
    }
    if !probes.is_empty() {
        println!("{}", report::amplification_table(&probes));
    }
    let (lines, misses) = report::verdicts(&floods, &probes);
    println!("{lines}");
    let dead: Vec<&str> = floods
        .iter()
        .filter(|r| !r.live())
        .map(|r| r.class.label())
        .collect();
    if !dead.is_empty() {
        println!(
            "FAILED: server dead or no legitimate success in: {}",
            dead.join(", ")
        );
        return Ok(ExitCode::from(1));
    }
    println!("liveness: every server stayed alive and answered its legitimate client; {misses} threshold(s) missed");
    if args.strict && misses > 0 {
        return Ok(ExitCode::from(3));
    }
    Ok(ExitCode::SUCCESS)
}

/// One flood class against a fresh server.
fn run_class(class: Class, plan: &Plan, env: &Env) -> Result<ClassResult, String> {
    let mut server = Server::start(&env.smt, &env.server_keys(class.tls()))?;
    let addr = server.addr();
    let sources = Sources::new(addr, class.pool(), plan.spoof)?;
    let mut rng =
        SplitMix64::new(plan.seed ^ (class as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let hellos = if class == Class::ClientHello {
        classes::client_hellos(&env.tls_client, "127.0.0.1", addr.port(), 16)?
    } else {
        Vec::new()
    };
    let mut generator = Generator::new(class, addr.port(), sources.pool_len(), hellos);
    let clients = Clients::start(addr, &env.client_keys(class.tls()))?;
    std::thread::sleep(plan.baseline);
    let before = server.memory();
    clients.set_phase(Phase::Flood);
    let mut tally = Tally::default();
    if class.primed() {
        for n in 0..sources.pool_len() {
            let shot = Shot {
                via: Via::Pool(n),
                datagrams: vec![forge::psk_hello(&mut rng, addr.port())],
            };
            sources.send(&mut rng, &shot, &mut tally);
        }
        std::thread::sleep(Duration::from_millis(100));
        sources.drain(&mut tally);
    }
    let stop = AtomicBool::new(false);
    let (flood_tally, peak_rss, capped) = std::thread::scope(|s| {
        let flood = s.spawn(|| {
            flood::run(&sources, &mut rng, plan.pps, plan.flood, &stop, &mut |r| {
                generator.next(r)
            })
        });
        let (mut peak, mut capped) = (0, false);
        while !flood.is_finished() {
            if let Some(m) = server.memory() {
                peak = peak.max(m.rss_kib);
                if m.rss_kib > plan.rss_cap_kib {
                    stop.store(true, Ordering::Relaxed);
                    capped = true;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        (flood.join().unwrap_or_default(), peak, capped)
    });
    tally = add(tally, flood_tally);
    clients.set_phase(Phase::After);
    std::thread::sleep(plan.recovery);
    let after = server.memory();
    let outcome = clients.finish(Duration::from_secs(5));
    let hwm = after.map_or(0, |m| m.hwm_kib);
    Ok(ClassResult {
        class,
        tally,
        pps: plan.pps,
        clients: outcome,
        before,
        peak_kib: peak_rss.max(hwm),
        after,
        alive: server.alive(),
        capped,
        spoof: (!class.primed() && class.pool() == 0).then(|| sources.spoof_kind()),
        server_stats: server.last_stats(),
    })
}

/// The priming hellos count as sent, their replies as back; the elapsed
/// time is the flood's.
fn add(a: Tally, b: Tally) -> Tally {
    Tally {
        sent: a.sent + b.sent,
        sent_bytes: a.sent_bytes + b.sent_bytes,
        send_errors: a.send_errors + b.send_errors,
        back: a.back + b.back,
        back_bytes: a.back_bytes + b.back_bytes,
        elapsed: b.elapsed,
        skipped: b.skipped,
    }
}

/// Every probe against a PSK server, then the ClientHello against a TLS
/// server; each from its own address 127.0.3.n.
fn amplification(plan: &Plan, env: &Env) -> Result<Vec<amplify::ProbeResult>, String> {
    let mut rng = SplitMix64::new(plan.seed ^ 0xa3a3_a3a3);
    let mut results = Vec::new();
    let mut n = 0u8;
    let mut from = || {
        n = n.wrapping_add(1).max(1);
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(127, 0, 3, n), 0))
    };
    let mut probe = |server: &Server, probe: &amplify::Probe| -> Result<(), String> {
        eprintln!("smt-hostile:   probe: {}", probe.name);
        results.push(amplify::run(
            server.addr(),
            from(),
            probe,
            plan.quiet,
            plan.limit,
        )?);
        Ok(())
    };
    let server = Server::start(&env.smt, &env.server_keys(false))?;
    for p in amplify::psk_probes(&mut rng, server.addr().port()) {
        probe(&server, &p)?;
    }
    drop(server);
    let server = Server::start(&env.smt, &env.server_keys(true))?;
    let hello = classes::client_hellos(&env.tls_client, "127.0.0.1", server.addr().port(), 1)?;
    if let Some(hello) = hello.into_iter().next() {
        probe(&server, &amplify::tls_probe(hello))?;
    }
    Ok(results)
}

/// `--smt`, or `smt` next to this program (or one directory up, for a
/// test binary in `deps/`).
fn locate_smt(given: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = given {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(format!("--smt {}: no such file", p.display()))
        };
    }
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find this program's path: {e}"))?;
    let candidates: Vec<PathBuf> = exe
        .ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join("smt"))
        .collect();
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        "cannot find the `smt` binary next to this program: build it \
         (cargo build --release -p smt-cli) or pass --smt PATH"
            .to_string()
    })
}

/// The run's circumstances, as a few markdown lines.
fn preamble(env: &Env, plan: &Plan, long: bool) -> String {
    let cpu = smt_bench::sys::cpu_model();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let command: Vec<String> = std::env::args().collect();
    format!(
        "smt-hostile ({} variant), {} UTC\n\
         command: {}\nserver binary: {}\nCPU: {cpu}, {cores} CPUs available\n\
         load average at the start: {}\n\
         per class: {:.0} s unloaded, {:.0} s flood at {} datagrams/s, {:.0} s recovery; \
         legitimate calls: 1 KiB echo, one at a time, at most 1 per ms; a new client every 250 ms",
        if long { "long" } else { "short" },
        utc_now(),
        command.join(" "),
        env.smt.display(),
        loadavg(),
        plan.baseline.as_secs_f64(),
        plan.flood.as_secs_f64(),
        plan.pps,
        plan.recovery.as_secs_f64(),
    )
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// `YYYY-MM-DD HH:MM` in UTC.
fn utc_now() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute()
    )
}
