//! `smt-forwarder`: the keyless message-aware forwarder (see `--help` and
//! `docs/innetwork.md`). Prints its counters as one JSON line when it
//! stops.

use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use smt_forwarder::driver::{Driver, DriverConfig};
use smt_forwarder::{Balance, Config, PathConfig, ReplicaPolicy};

/// Forward SMT between clients and servers over several paths, choosing a
/// path and a replica per message from the plaintext header alone.
#[derive(Debug, Parser)]
#[command(name = "smt-forwarder", version)]
struct Args {
    /// Address to receive client datagrams on (repeat for IPv4 and IPv6),
    /// e.g. 0.0.0.0:7000 and [::]:7000.
    #[arg(long, required = true)]
    listen: Vec<SocketAddr>,
    /// The address servers see clients at, one per family, on this host
    /// (e.g. on lo).
    #[arg(long, required = true)]
    inside: Vec<IpAddr>,
    /// A path: dev=DEVICE,to=ADDR:PORT[,to=ADDR:PORT],delay-us=N,rate-mbit=N,replica=N
    /// (`to` once per address family; delay, rate and replica default to 0).
    #[arg(long = "path", required = true, value_parser = parse_path)]
    paths: Vec<PathConfig>,
    /// Path choice: message (pin each message, earliest expected finish),
    /// ecmp (5-tuple hash), spray (per packet) or alternate:MS (all on one
    /// path, the next every MS milliseconds).
    #[arg(long, default_value = "message", value_parser = |s: &str| s.parse::<Balance>())]
    balance: Balance,
    /// Replica choice: message (from the message ID) or session (round
    /// robin per session).
    #[arg(long, default_value = "message", value_parser = |s: &str| s.parse::<ReplicaPolicy>())]
    replicas: ReplicaPolicy,
    /// Priority queues per traffic class.
    #[arg(long, default_value_t = 8)]
    priorities: usize,
    /// Traffic class of a client address, CLASS=ADDR (repeatable); others
    /// are class 0. Classes share each path by deficit round robin.
    #[arg(long = "class", value_parser = parse_class)]
    classes: Vec<(IpAddr, u8)>,
    /// Bytes each path queues before dropping.
    #[arg(long, default_value_t = 4 << 20)]
    buffer_bytes: u64,
    /// Queue length in packets above which arrivals are marked.
    #[arg(long, default_value_t = 20)]
    mark_packets: u32,
    /// Pathlet ID of path 0 in the PATH slots this forwarder fills; path
    /// k is BASE + k (docs/protocol.md § 4, PATH).
    #[arg(long, default_value_t = 0)]
    pathlet_base: u16,
    /// Endpoints send control packets without a MAC
    /// (authenticate_control off).
    #[arg(long)]
    untagged_control: bool,
    /// Stop after this many seconds.
    #[arg(long)]
    duration_s: Option<f64>,
    /// Stop when standard input reaches its end (for a parent process).
    #[arg(long)]
    until_stdin_eof: bool,
    /// Write every datagram handled to FILE (direction byte, 4-byte
    /// length, bytes).
    #[arg(long)]
    dump: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let port = args.listen[0].port();
    let mut core = Config::new(port, args.paths);
    core.balance = args.balance;
    core.replica_policy = args.replicas;
    core.priorities = args.priorities;
    core.classes = args
        .classes
        .iter()
        .map(|&(_, c)| usize::from(c) + 1)
        .max()
        .unwrap_or(1);
    core.class_map = args.classes;
    core.buffer_bytes = args.buffer_bytes;
    core.mark_packets = args.mark_packets;
    core.pathlet_base = args.pathlet_base;
    core.tagged_control = !args.untagged_control;
    let config = DriverConfig {
        core,
        listen: args.listen,
        inside: args.inside,
        dump: args.dump,
    };
    let mut driver = match Driver::bind(config) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("smt-forwarder: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!("smt-forwarder: listening on {:?}", driver.local_addrs());
    if args.until_stdin_eof {
        let stopper = driver.stopper();
        std::thread::spawn(move || {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
            stopper.stop();
        });
    }
    let until = args
        .duration_s
        .map(|s| Instant::now() + Duration::from_secs_f64(s.max(0.0)));
    match driver.run(until) {
        Ok(stats) => {
            println!("{}", serde_json::to_string(&stats).unwrap_or_default());
            if driver.send_errors > 0 {
                eprintln!("smt-forwarder: {} send errors", driver.send_errors);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("smt-forwarder: {e}");
            ExitCode::FAILURE
        }
    }
}

fn parse_path(spec: &str) -> Result<PathConfig, String> {
    let mut path = PathConfig {
        device: String::new(),
        servers: Vec::new(),
        delay: Duration::ZERO,
        rate_bps: 0,
        replica: 0,
    };
    for part in spec.split(',') {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?}: want key=value"))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("{key} wants a number, got {value:?}"))
        };
        match key {
            "dev" => path.device = value.to_owned(),
            "to" => path.servers.push(
                value
                    .parse()
                    .map_err(|_| format!("to wants ADDR:PORT, got {value:?}"))?,
            ),
            "delay-us" => path.delay = Duration::from_micros(number()?),
            "rate-mbit" => path.rate_bps = number()? * 1_000_000,
            "replica" => path.replica = number()? as usize,
            _ => return Err(format!("unknown path key {key:?}")),
        }
    }
    if path.device.is_empty() {
        return Err("a path needs dev=DEVICE".into());
    }
    Ok(path)
}

fn parse_class(spec: &str) -> Result<(IpAddr, u8), String> {
    let (class, addr) = spec
        .split_once('=')
        .ok_or_else(|| format!("{spec:?}: want CLASS=ADDR"))?;
    let class = class
        .parse()
        .map_err(|_| format!("class {class:?} is 0 to 255"))?;
    let addr = addr
        .parse()
        .map_err(|_| format!("{addr:?} is not an IP address"))?;
    Ok((addr, class))
}
