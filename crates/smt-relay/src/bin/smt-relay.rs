//! A fault-injecting UDP relay between a client and a server, for tests on
//! real sockets where `tc netem` is not available. See `--help`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant};

use smt_relay::{Impairment, Relay, RelayConfig};

const USAGE: &str = "\
smt-relay: forward UDP between clients and a server, impairing it on the way

USAGE:
    smt-relay --listen ADDR --upstream ADDR [OPTIONS]

Clients send to --listen; the relay forwards to --upstream from one socket per
client and sends the server's replies back to that client. The impairment
applies in both directions, each with its own generator seeded from --seed.

OPTIONS:
    --listen ADDR            address to receive client datagrams on (e.g. 127.0.0.1:7000)
    --upstream ADDR          server address (e.g. 127.0.0.1:7001)
    --loss P                 probability a datagram is dropped [0]
    --reorder P              probability a datagram is held back [0]
    --reorder-delay-us N     longest hold of a reordered datagram, in µs [500]
    --duplicate P            probability a datagram is sent twice [0]
    --corrupt P              probability one random bit is flipped [0]
    --delay-us N             fixed extra one-way delay, in µs [0]
    --seed N                 seed for the impairment decisions [1]
    --keep-ports             forward each client's datagrams from its own port number, on
                             --listen's IP (which must differ from the client's, e.g.
                             127.0.0.2): both ends see the same ports, so `smt dump --trace`
                             merges their traces
    --duration-s SECS        stop after this many seconds (default: run until killed)
    -h, --help               print this help

Counters are printed every second and once more at the end of --duration-s.
Ctrl-C ends the relay at once (the standard library cannot catch it); the last
per-second line then holds the totals to within a second.

EXIT STATUS: 0 on success, 1 if the relay cannot start, 2 on bad arguments.
";

/// A relay to run, from the command line.
#[derive(Debug)]
struct Options {
    config: RelayConfig,
    duration: Option<Duration>,
}

fn main() -> ExitCode {
    match parse(std::env::args().skip(1)) {
        Ok(None) => {
            print!("{USAGE}");
            ExitCode::SUCCESS
        }
        Ok(Some(options)) => run(options),
        Err(message) => {
            eprintln!("smt-relay: {message}\nRun `smt-relay --help` for usage.");
            ExitCode::from(2)
        }
    }
}

fn run(options: Options) -> ExitCode {
    let Options { config, duration } = options;
    let (listen, upstream, seed) = (config.listen, config.upstream, config.seed);
    let relay = match Relay::spawn(config) {
        Ok(relay) => relay,
        Err(e) => {
            eprintln!("smt-relay: cannot start a relay on {listen}: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "smt-relay: {} -> {upstream} (seed {seed})",
        relay.local_addr()
    );
    let started = Instant::now();
    let end = duration.map(|d| started + d);
    for second in 1u64.. {
        let tick = started + Duration::from_secs(second);
        match end {
            Some(end) if end <= tick => {
                sleep_until(end);
                break;
            }
            _ => sleep_until(tick),
        }
        println!("{second:>6}s {}", relay.stats());
    }
    println!("final: {}", relay.stop());
    ExitCode::SUCCESS
}

fn sleep_until(at: Instant) {
    thread::sleep(at.saturating_duration_since(Instant::now()));
}

/// Parses the arguments after the program name; `None` asks for help.
/// Accepts `--flag value` and `--flag=value`.
fn parse(args: impl IntoIterator<Item = String>) -> Result<Option<Options>, String> {
    let mut listen = None;
    let mut upstream = None;
    let mut impairment = Impairment {
        reorder_delay: Duration::from_micros(500),
        ..Impairment::default()
    };
    let mut seed = 1;
    let mut duration = None;
    let mut keep_ports = false;
    let args: Vec<String> = args.into_iter().collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return Ok(None);
    }
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag, Some(value.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag {
            "--keep-ports" => keep_ports = true,
            "--listen" => listen = Some(address(flag, &value()?)?),
            "--upstream" => upstream = Some(address(flag, &value()?)?),
            "--loss" => impairment.loss = probability(flag, &value()?)?,
            "--reorder" => impairment.reorder = probability(flag, &value()?)?,
            "--reorder-delay-us" => impairment.reorder_delay = micros(flag, &value()?)?,
            "--duplicate" => impairment.duplicate = probability(flag, &value()?)?,
            "--corrupt" => impairment.corrupt = probability(flag, &value()?)?,
            "--delay-us" => impairment.delay = micros(flag, &value()?)?,
            "--seed" => seed = number(flag, &value()?)?,
            "--duration-s" => duration = Some(seconds(flag, &value()?)?),
            _ => return Err(format!("unknown argument {arg:?}")),
        }
    }
    let listen = listen.ok_or("--listen ADDR is required")?;
    let upstream = upstream.ok_or("--upstream ADDR is required")?;
    let config = RelayConfig {
        listen,
        seed,
        keep_ports,
        ..RelayConfig::new(upstream).both_ways(impairment)
    };
    Ok(Some(Options { config, duration }))
}

fn address(flag: &str, value: &str) -> Result<SocketAddr, String> {
    value.parse().map_err(|_| {
        format!("{flag} wants an IP:PORT address such as 127.0.0.1:7000, got {value:?}")
    })
}

fn probability(flag: &str, value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(format!(
            "{flag} wants a probability between 0 and 1, got {value:?}"
        )),
    }
}

fn micros(flag: &str, value: &str) -> Result<Duration, String> {
    let us: u64 = number(flag, value)?;
    let d = Duration::from_micros(us);
    if d > smt_relay::relay::MAX_DELAY {
        return Err(format!(
            "{flag} is at most one hour (3600000000 µs), got {value}"
        ));
    }
    Ok(d)
}

fn seconds(flag: &str, value: &str) -> Result<Duration, String> {
    match value.parse::<f64>().map(Duration::try_from_secs_f64) {
        Ok(Ok(d)) if !d.is_zero() => Ok(d),
        _ => Err(format!(
            "{flag} wants a positive number of seconds, got {value:?}"
        )),
    }
}

fn number(flag: &str, value: &str) -> Result<u64, String> {
    value
        .parse()
        .map_err(|_| format!("{flag} wants a non-negative integer, got {value:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn full_command_line() {
        let line = "--listen 127.0.0.1:7000 --upstream=127.0.0.1:7001 --loss 0.05 \
                    --reorder 0.1 --reorder-delay-us 250 --duplicate 0.01 --corrupt 0.001 \
                    --delay-us 20 --seed 9 --duration-s 1.5";
        let Ok(Some(o)) = parse(args(line)) else {
            panic!("should parse");
        };
        assert_eq!(o.config.listen, "127.0.0.1:7000".parse().unwrap());
        assert_eq!(o.config.upstream, "127.0.0.1:7001".parse().unwrap());
        assert_eq!(o.config.seed, 9);
        assert_eq!(o.config.to_server, o.config.to_client);
        assert_eq!(o.config.to_server.loss, 0.05);
        assert_eq!(o.config.to_server.reorder_delay, Duration::from_micros(250));
        assert_eq!(o.config.to_server.delay, Duration::from_micros(20));
        assert_eq!(o.duration, Some(Duration::from_millis(1500)));
    }

    #[test]
    fn bad_arguments_say_what_is_wrong() {
        let base = "--listen 127.0.0.1:7000 --upstream 127.0.0.1:7001";
        for (extra, needle) in [
            ("--loss 1.5", "--loss"),
            ("--loss nan", "--loss"),
            ("--seed -1", "--seed"),
            ("--delay-us 99999999999", "--delay-us"),
            ("--duration-s 0", "--duration-s"),
            ("--frobnicate", "unknown"),
            ("--loss", "needs a value"),
        ] {
            let err = parse(args(&format!("{base} {extra}"))).unwrap_err();
            assert!(err.contains(needle), "{extra}: {err}");
        }
        assert!(parse(args("--listen 127.0.0.1:1"))
            .unwrap_err()
            .contains("--upstream"));
        assert!(parse(args("--listen nowhere --upstream 127.0.0.1:1"))
            .unwrap_err()
            .contains("IP:PORT"));
        assert!(matches!(parse(args("--loss 2 --help")), Ok(None)));
    }
}
