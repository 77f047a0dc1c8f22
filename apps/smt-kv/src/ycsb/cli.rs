//! The `smt-kv ycsb` command: start a server (or use one), run the plan,
//! print the table, save JSON, Markdown and the figure.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use super::report::{self, Meta};
use super::run::{self, Plan, Targets};
use super::workload::Workload;
use crate::client::Transport;
use crate::server::{RunningServer, ServerConfig};

/// Options of `smt-kv ycsb`. Without `--tcp/--tls/--smt` a server runs in
/// this process (its own event loop thread) on 127.0.0.1.
#[derive(clap::Args, Debug)]
pub struct YcsbArgs {
    /// The longer run: 100 000 records, 1 s warm-up and 5 s per workload
    /// (about 5 minutes); the default takes about half a minute.
    #[arg(long)]
    full: bool,
    /// Records loaded before each transport's run phases.
    #[arg(long)]
    records: Option<u64>,
    /// Measured time per workload, in milliseconds.
    #[arg(long)]
    duration_ms: Option<u64>,
    /// Warm-up per workload (not measured), in milliseconds.
    #[arg(long)]
    warmup_ms: Option<u64>,
    /// Client threads, each with its own connection or SMT endpoint.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Workloads, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "A,B,C,D")]
    workloads: Vec<String>,
    /// Record value sizes in bytes (all fields together), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "64,1024,4096")]
    sizes: Vec<usize>,
    /// Fields per record (YCSB's default: 10).
    #[arg(long, default_value_t = 10)]
    fields: usize,
    /// Transports, comma-separated: smt, tls, tcp.
    #[arg(long, value_delimiter = ',', default_value = "smt,tls,tcp")]
    transports: Vec<String>,
    #[arg(long, default_value_t = 0x5c5b)]
    seed: u64,
    /// Where the JSON, Markdown and SVG go.
    #[arg(long, default_value = "target/ycsb")]
    out: PathBuf,
    /// A server's TCP front end (with --tls, --smt and --ca: use it
    /// instead of starting one).
    #[arg(long, requires_all = ["tls", "smt", "ca"])]
    tcp: Option<SocketAddr>,
    #[arg(long)]
    tls: Option<SocketAddr>,
    #[arg(long)]
    smt: Option<SocketAddr>,
    /// The CA certificate that issued the server's (PEM).
    #[arg(long)]
    ca: Option<PathBuf>,
}

/// Runs `smt-kv ycsb`: starts a server on loopback unless all three
/// front ends and the CA are given, loads the records, runs the plan on
/// each transport, prints the table and writes it (JSON, Markdown, SVG
/// plot) under `--out`. The error is the first step that failed: bad
/// arguments, the server, a transport, or writing the results.
pub fn run(args: YcsbArgs) -> Result<(), Box<dyn std::error::Error>> {
    let plan = plan(&args)?;
    let (targets, _server) = targets(&args)?;
    let meta = Meta::of_this_machine(plan.records, plan.threads, plan.duration.as_secs_f64());
    println!(
        "YCSB {} on {} (CPUs {}): {} records, {} threads, {:.1} s per workload",
        meta.label,
        meta.cpu,
        meta.cpus_allowed,
        plan.records,
        plan.threads,
        meta.seconds_per_workload
    );
    let cells = run::run(&plan, &targets, |c| println!("{}", report::line(c)))?;
    std::fs::create_dir_all(&args.out)?;
    let stem = args.out.join(format!("ycsb-{}", meta.label));
    std::fs::write(stem.with_extension("json"), report::json(&meta, &cells))?;
    let table = report::markdown(&cells);
    std::fs::write(stem.with_extension("md"), &table)?;
    println!("\n{table}");
    let runs: Vec<_> = cells
        .iter()
        .filter(|c| c.workload != "load")
        .cloned()
        .collect();
    let svg = args.out.join(format!("fig8-{}.svg", meta.label));
    let title = format!(
        "smt-kv, YCSB A-D ({}, {}, {})",
        meta.label, meta.date, meta.cpu
    );
    super::plot::fig8(&svg, &title, &runs)?;
    println!("wrote {}.{{json,md}} and {}", stem.display(), svg.display());
    Ok(())
}

fn plan(args: &YcsbArgs) -> Result<Plan, String> {
    let (records, warmup, duration) = if args.full {
        (100_000, 1000, 5000)
    } else {
        (10_000, 150, 500)
    };
    let workloads = args
        .workloads
        .iter()
        .map(|w| Workload::parse(w).ok_or(format!("unknown workload {w:?} (A, B, C or D)")))
        .collect::<Result<_, _>>()?;
    let transports = args
        .transports
        .iter()
        .map(|t| match t.to_ascii_lowercase().as_str() {
            "smt" => Ok(Transport::Smt),
            "tls" => Ok(Transport::Tls),
            "tcp" => Ok(Transport::Tcp),
            _ => Err(format!("unknown transport {t:?} (smt, tls or tcp)")),
        })
        .collect::<Result<_, _>>()?;
    if args.threads == 0 || args.fields == 0 {
        return Err("--threads and --fields must be at least 1".into());
    }
    Ok(Plan {
        transports,
        workloads,
        value_sizes: args.sizes.clone(),
        fields: args.fields,
        records: args.records.unwrap_or(records).max(1),
        threads: args.threads,
        warmup: Duration::from_millis(args.warmup_ms.unwrap_or(warmup)),
        duration: Duration::from_millis(args.duration_ms.unwrap_or(duration).max(1)),
        seed: args.seed,
    })
}

/// The given server, or one started here (kept alive by the handle).
fn targets(
    args: &YcsbArgs,
) -> Result<(Targets, Option<RunningServer>), Box<dyn std::error::Error>> {
    if let (Some(tcp), Some(tls), Some(smt), Some(ca)) = (args.tcp, args.tls, args.smt, &args.ca) {
        let ca_pem = std::fs::read_to_string(ca)?;
        return Ok((
            Targets {
                tcp,
                tls,
                smt,
                ca_pem,
            },
            None,
        ));
    }
    let config = ServerConfig::ephemeral(IpAddr::V4(Ipv4Addr::LOCALHOST))?;
    let ca_pem = config.identity.ca_pem.clone().unwrap_or_default();
    let server = RunningServer::start(config)?;
    let (Some(tcp), Some(tls), Some(smt)) = (server.tcp, server.tls, server.smt) else {
        return Err("the server did not open all three front ends".into());
    };
    Ok((
        Targets {
            tcp,
            tls,
            smt,
            ca_pem,
        },
        Some(server),
    ))
}
