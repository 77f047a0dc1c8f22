//! `smt-hostile`: hostile traffic from outside, against a real `smt
//! server` process, while legitimate clients call it (issues #11 and #22).
//!
//! As root it creates a network namespace (`netns.rs`) and runs itself
//! inside it, where the server's answers to spoofed sources meet hosts
//! with nothing listening and a router, and ICMP errors really come back;
//! without root it prints `SKIPPED` and exits 0 (`--no-netns` runs here
//! instead, without the classes that need raw sockets unless permitted).
//!
//! For each class it starts a fresh server process, connects legitimate
//! clients (`smt::Endpoint`s over real UDP, in this process) and a
//! Prometheus-style scraper of the server's `--metrics`, measures them
//! unloaded, runs the attack, lets the server recover, and reports: the
//! legitimate success before, during and after; p99 during against
//! before; the server's RSS idle, at its peak and after the recovery time;
//! its socket's queues (`ss`) and its threads' CPU once the clients
//! stopped; and what the attack did. Classes: the six floods of issue #11
//! (a)–(f), amplification probes (g), and issue #22's spoofed floods at
//! full speed (h), (i), forged ICMP errors (j), the RETRY-following keyless
//! session fill (k) and hold-open of handshakes (l), (m), and a slowloris
//! against `--metrics` (n). Results are markdown tables; the targets are
//! PASS/MISS lines, and each check a `CHECK` line for the tests.
//!
//! Exit status: 0 when every server stayed alive and its legitimate
//! client succeeded at least once (or when SKIPPED); 1 when not (or on an
//! error); 3 with `--strict` when any target was missed; 2 for bad
//! arguments.

mod amplify;
mod checks;
mod classes;
mod env;
mod flood;
mod forge;
mod icmp;
mod keyless;
mod legit;
mod netns;
mod observe;
mod report;
mod result;
mod run;
mod scrape;
mod server;
mod slowloris;

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use classes::Class;
use env::Env;
use flood::SpoofMode;
use run::Plan;

/// Attacks a real `smt server` process from outside while legitimate
/// clients call it; prints per-class tables and the targets of issues #11
/// and #22 as PASS/MISS.
#[derive(Debug, Parser)]
#[command(name = "smt-hostile", version, about, long_about = None)]
struct Args {
    /// The `smt` binary (apps/smt-cli). Default: `smt` next to this program.
    #[arg(long)]
    smt: Option<PathBuf>,
    /// Long variant: 3 s unloaded, 30 s attack, 10 s recovery per class,
    /// longer listening for amplification.
    #[arg(long)]
    long: bool,
    /// Exit with status 3 when any target is missed.
    #[arg(long)]
    strict: bool,
    /// Classes to run, comma separated (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    classes: Vec<Class>,
    /// Flood rate of classes (a)–(f), datagrams per second (1 to
    /// 1,000,000).
    #[arg(long, default_value_t = 15_000)]
    pps: u32,
    /// Rate of classes (h)–(j), datagrams per second; 0: as fast as one
    /// thread sends.
    #[arg(long, default_value_t = 0)]
    spoof_pps: u32,
    /// Seconds of attack per class (default 3, with --long 30).
    #[arg(long)]
    flood_secs: Option<f64>,
    /// Seconds of unloaded calls before each attack (default 1, --long 3).
    #[arg(long)]
    baseline_secs: Option<f64>,
    /// Seconds of recovery after each attack, before RSS, socket queues
    /// and threads are read (default 2, --long 10).
    #[arg(long)]
    recovery_secs: Option<f64>,
    /// Sockets holding handshakes open in classes (l) and (m).
    #[arg(long, default_value_t = 4_500)]
    hold_sockets: usize,
    /// Exchanges at once in the session fill (k).
    #[arg(long, default_value_t = 256)]
    fill_sockets: usize,
    /// Source addresses of the session fill (k).
    #[arg(long, default_value_t = 4_096)]
    fill_addresses: usize,
    /// How spoofed sources are made.
    #[arg(long, value_enum, default_value_t = SpoofMode::Auto)]
    spoof: SpoofMode,
    /// Stop an attack when the server's RSS passes this many MiB (protects
    /// the machine; the class then misses its RSS target).
    #[arg(long, default_value_t = 2048)]
    rss_cap_mib: u64,
    /// Seed of the attacker's random choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run in the current network namespace (server on 127.0.0.1, spoofed
    /// sources in 127/8) instead of one of its own.
    #[arg(long)]
    no_netns: bool,
    /// Set by the program itself when it runs inside its namespace.
    #[arg(long, hide = true)]
    inside_netns: bool,
}

fn plan(a: &Args) -> Result<Plan, String> {
    let secs = |v: Option<f64>, short: f64, long: f64, what: &str| -> Result<Duration, String> {
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
    if a.spoof_pps > 1_000_000 {
        return Err(format!(
            "--spoof-pps must be 0 to 1000000, not {}",
            a.spoof_pps
        ));
    }
    if a.rss_cap_mib == 0 {
        return Err("--rss-cap-mib must be above 0".into());
    }
    for (n, what) in [
        (a.hold_sockets, "hold-sockets"),
        (a.fill_sockets, "fill-sockets"),
        (a.fill_addresses, "fill-addresses"),
    ] {
        if !(1..=60_000).contains(&n) {
            return Err(format!("--{what} must be 1 to 60000, not {n}"));
        }
    }
    Ok(Plan {
        baseline: secs(a.baseline_secs, 1.0, 3.0, "baseline-secs")?,
        flood: secs(a.flood_secs, 3.0, 30.0, "flood-secs")?,
        recovery: secs(a.recovery_secs, 2.0, 10.0, "recovery-secs")?,
        pps: a.pps,
        spoof_pps: a.spoof_pps,
        quiet: Duration::from_millis(if a.long { 1000 } else { 300 }),
        limit: Duration::from_secs(if a.long { 20 } else { 3 }),
        spoof: a.spoof,
        rss_cap_kib: a.rss_cap_mib.saturating_mul(1024),
        seed: a.seed,
        hold_sockets: a.hold_sockets,
        fill_sockets: a.fill_sockets,
        fill_addresses: a.fill_addresses,
    })
}

fn main() -> ExitCode {
    let args = Args::parse();
    match dispatch(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("smt-hostile: error: {e}");
            ExitCode::from(1)
        }
    }
}

/// Here, or inside a namespace of its own (as root).
fn dispatch(args: &Args) -> Result<ExitCode, String> {
    let plan = plan(args)?;
    let smt = locate_smt(args.smt.as_deref())?;
    if args.inside_netns {
        return run(
            args,
            &plan,
            Env::new(smt, IpAddr::V4(netns::SERVER_IP), true)?,
        );
    }
    if args.no_netns {
        let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
        return run(args, &plan, Env::new(smt, loopback, false)?);
    }
    if !netns::is_root() {
        println!(
            "smt-hostile: SKIPPED: needs root to create its network namespace \
             (raw sockets for spoofed sources, ICMP errors that come back); \
             run as root, or with --no-netns to run here without them"
        );
        return Ok(ExitCode::SUCCESS);
    }
    if !(netns::which("ip") && netns::which("ss")) {
        println!(
            "smt-hostile: SKIPPED: iproute2's `ip` and `ss` are needed \
             (scripts/hostile-test.sh --install)"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let ns = match netns::Namespace::create() {
        Ok(ns) => ns,
        Err(e) => {
            // Root without the right to make namespaces (a container
            // without CAP_SYS_ADMIN, say): nothing this run could measure.
            println!("smt-hostile: SKIPPED: cannot create a network namespace here: {e}");
            return Ok(ExitCode::SUCCESS);
        }
    };
    eprintln!(
        "smt-hostile: running inside network namespace {}",
        ns.name()
    );
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find this program's path: {e}"))?;
    let mut inner: Vec<String> = std::env::args().skip(1).collect();
    inner.push("--inside-netns".into());
    if args.smt.is_none() {
        inner.push("--smt".into());
        inner.push(smt.display().to_string());
    }
    let status = ns.run_inside(&exe, &inner)?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        None => ExitCode::from(1),
    })
}

/// File descriptors kept for everything but the attacker's sockets (the
/// legitimate clients, the pool classes, pipes).
const FD_RESERVE: u64 = 1024;

/// The plan with its socket counts within the open-files limit.
fn fit_to_fd_limit(mut plan: Plan) -> Plan {
    let Some((soft, _)) = netns::open_files_limit() else {
        return plan;
    };
    let room = usize::try_from(soft.saturating_sub(FD_RESERVE))
        .unwrap_or(usize::MAX)
        .max(1);
    for (n, what) in [
        (&mut plan.hold_sockets, "--hold-sockets"),
        (&mut plan.fill_sockets, "--fill-sockets"),
    ] {
        if *n > room {
            println!("note: {what} lowered from {n} to {room}: the open-files limit is {soft}");
            *n = room;
        }
    }
    plan
}

fn run(args: &Args, plan: &Plan, env: Env) -> Result<ExitCode, String> {
    let plan = &fit_to_fd_limit(*plan);
    let mut wanted = if args.classes.is_empty() {
        let mut all = Class::ATTACKS.to_vec();
        all.push(Class::Amplification);
        all
    } else {
        args.classes.clone()
    };
    // The tables' order, each class once.
    wanted.sort();
    wanted.dedup();
    println!("{}", preamble(&env, plan, args.long));
    let raw = flood::raw_permitted(plan.spoof);
    let mut results = Vec::new();
    let mut probes = Vec::new();
    for class in wanted {
        if class.needs_raw() && !raw {
            println!(
                "SKIPPED {}: needs raw sockets (root, or CAP_NET_RAW)",
                class.label()
            );
            continue;
        }
        eprintln!("smt-hostile: {} ...", class.label());
        if class == Class::Amplification {
            probes = run::amplification(plan, &env)?;
            continue;
        }
        let r = run::run_class(class, plan, &env)?;
        eprintln!(
            "smt-hostile:   {}; server counters at the end: {}",
            r.attack, r.server_stats
        );
        results.push(r);
    }
    println!("load average at the end: {}", loadavg());
    println!();
    if !results.is_empty() {
        println!("{}", report::class_table(&results));
    }
    if !probes.is_empty() {
        println!("{}", report::amplification_table(&probes));
    }
    let (lines, misses) = report::verdicts(&results, &probes);
    println!("{lines}");
    print!("{}", report::check_lines(&results));
    let dead: Vec<&str> = results
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
    println!("liveness: every server stayed alive and answered its legitimate client; {misses} target(s) missed");
    if args.strict && misses > 0 {
        return Ok(ExitCode::from(3));
    }
    Ok(ExitCode::SUCCESS)
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
    let spoof_rate = match plan.spoof_pps {
        0 => "full speed".to_string(),
        n => format!("{n} datagrams/s"),
    };
    let network = if env.in_netns {
        format!(
            "a network namespace of its own: server on {}, spoofed sources answered by ICMP port unreachables (10.0.0.0/9), silence (10.128.0.0/10) and a router's host unreachables (10.192.0.0/10)",
            env.server_ip
        )
    } else {
        "the current network namespace: server on 127.0.0.1, spoofed sources in 127/8".into()
    };
    format!(
        "smt-hostile ({} variant), {} UTC\n\
         command: {}\nserver binary: {}\nCPU: {cpu}, {cores} CPUs available\n\
         load average at the start: {}\nnetwork: {network}\n\
         per class: {:.0} s unloaded, {:.0} s attack ((a)–(f) at {} datagrams/s, (h)–(j) at {spoof_rate}), \
         {:.0} s recovery, then 1 s of thread CPU with the clients stopped; \
         legitimate calls: 1 KiB echo, one at a time, at most 1 per ms; a new client every 250 ms; \
         a metrics scrape every 250 ms",
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
