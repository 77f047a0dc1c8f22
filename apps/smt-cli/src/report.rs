//! Measuring RPC workloads and printing the results, as a table or JSON.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use smt::stats::{quantile, Counters};
use smt::{DropReason, Endpoint, EndpointConfig, Stats};

use crate::error::CliError;

/// The most request bytes one run keeps outstanding (size × concurrency):
/// each outstanding RPC holds its request and its response, on both sides
/// when the server runs in this process.
const IN_FLIGHT_BUDGET: usize = 256 << 20;

/// Messages from this size on run with at most 8 outstanding.
const LARGE: usize = 1 << 20;

/// What one message size measured.
#[derive(Debug)]
pub struct Row {
    pub size: usize,
    pub rpcs: u64,
    pub p50: Duration,
    pub p99: Duration,
    pub mean: Duration,
    pub rpc_per_s: f64,
    pub gbit_per_s: f64,
    pub packets: u64,
    pub client: SideCounts,
    /// The server's, when it runs in this process (`smt demo`).
    pub server: Option<SideCounts>,
    pub errors: u64,
    /// Why the first failed call failed.
    pub first_error: Option<String>,
}

/// What one endpoint retransmitted and dropped during one size's run.
/// With nothing lost on the way, every count here should be 0: a
/// retransmission is then spurious, and its copy arrives as a duplicate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SideCounts {
    /// DATA packets this side sent again.
    pub retransmits: u64,
    /// Packets this side dropped as already received: copies of a packet
    /// of a message in progress (`duplicate`) or of one already delivered
    /// (`replay`).
    pub duplicates: u64,
    /// Every other drop.
    pub other_drops: u64,
}

impl SideCounts {
    /// The counts between two readings of one endpoint's stats.
    pub fn between(before: &Counters, after: &Counters) -> Self {
        let dups =
            |s: &Counters| s.drops.get(DropReason::Duplicate) + s.drops.get(DropReason::Replay);
        let duplicates = dups(after) - dups(before);
        Self {
            retransmits: after.packets.retransmitted - before.packets.retransmitted,
            duplicates,
            other_drops: (after.drops.total() - before.drops.total()) - duplicates,
        }
    }

    fn to_json(self) -> Value {
        json!({
            "retransmits": self.retransmits,
            "duplicates": self.duplicates,
            "other_drops": self.other_drops,
        })
    }
}

/// Refuses a message size the endpoint cannot carry, or a load that would
/// hold more than [`IN_FLIGHT_BUDGET`] at once, before anything is
/// allocated. `option` names the size's option in the message.
pub fn check_load(
    option: &str,
    size: usize,
    concurrency: usize,
    config: &EndpointConfig,
) -> Result<(), CliError> {
    let limit = config.protocol().message_len_limit();
    if size as u64 > limit {
        return Err(CliError::Usage(format!(
            "{option} {size} is larger than the largest SMT message, {limit} bytes ({})",
            size_name(limit as usize)
        )));
    }
    let outstanding = effective_concurrency(size, concurrency);
    let most = (IN_FLIGHT_BUDGET / size.max(1)).max(1);
    if outstanding > most {
        return Err(CliError::Usage(format!(
            "{option} {size} with {outstanding} RPCs outstanding holds more than {} at once \
             (each RPC keeps its request and response); lower --concurrency to {most}",
            size_name(IN_FLIGHT_BUDGET)
        )));
    }
    Ok(())
}

/// Large messages run with at most 8 outstanding.
fn effective_concurrency(size: usize, concurrency: usize) -> usize {
    if size >= LARGE {
        concurrency.min(8)
    } else {
        concurrency
    }
}

fn request(size: usize, n: u64) -> Vec<u8> {
    let mut v = vec![(n as u8).wrapping_mul(13); size];
    let k = size.min(8);
    v[..k].copy_from_slice(&n.to_le_bytes()[..k]);
    v
}

/// One RPC, checking the echoed response; the error is the reason, as
/// it is reported.
fn echo(client: &Endpoint, server: SocketAddr, req: &[u8]) -> Result<(), String> {
    let resp = client.call(server, req).map_err(|e| e.to_string())?;
    if resp != req {
        return Err("the response differs from the request".into());
    }
    Ok(())
}

/// Failed calls: how many, and the first one's reason. The first failure
/// ends the run: what follows would measure a broken path, and a dead
/// server would be sent a call for every failure (they fail fast).
#[derive(Debug, Default)]
struct Failures {
    count: AtomicU64,
    first: OnceLock<String>,
}

impl Failures {
    fn record(&self, why: String) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let _ = self.first.set(why);
    }
}

/// Sequential RPCs for `time` (at most `max`): the unloaded RTT.
fn latency_phase(
    client: &Endpoint,
    server: SocketAddr,
    size: usize,
    time: Duration,
    failures: &Failures,
) -> Vec<Duration> {
    const MAX: u64 = 100_000;
    let mut rtts = Vec::new();
    let end = Instant::now() + time;
    let mut n = 0u64;
    while (Instant::now() < end && n < MAX) || n == 0 {
        n += 1;
        let req = request(size, n);
        let t = Instant::now();
        match echo(client, server, &req) {
            Ok(()) => rtts.push(t.elapsed()),
            Err(why) => {
                failures.record(why);
                break;
            }
        }
    }
    rtts
}

/// `concurrency` threads issuing RPCs back to back for `time`; returns the
/// completed calls and the time taken.
fn throughput_phase(
    client: &Endpoint,
    server: SocketAddr,
    size: usize,
    time: Duration,
    concurrency: usize,
    failures: &Arc<Failures>,
) -> Result<(u64, Duration), CliError> {
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let mut threads = Vec::with_capacity(concurrency);
    for t in 0..concurrency {
        let (client, done, failures, stopped) =
            (client.clone(), done.clone(), failures.clone(), stop.clone());
        let caller = move || {
            let mut n = (t as u64) << 40;
            while !stopped.load(Ordering::Relaxed) {
                n += 1;
                match echo(&client, server, &request(size, n)) {
                    Ok(()) => drop(done.fetch_add(1, Ordering::Relaxed)),
                    Err(why) => {
                        failures.record(why);
                        stopped.store(true, Ordering::Relaxed);
                    }
                }
            }
        };
        match std::thread::Builder::new().spawn(caller) {
            Ok(handle) => threads.push(handle),
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                return Err(CliError::Environment(format!(
                    "cannot start calling thread {} of {concurrency}: {e}; lower --concurrency",
                    t + 1
                )));
            }
        }
    }
    // Wakes early when a failure stopped the callers.
    while !stop.load(Ordering::Relaxed) && start.elapsed() < time {
        std::thread::sleep(
            time.saturating_sub(start.elapsed())
                .min(Duration::from_millis(10)),
        );
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    Ok((done.load(Ordering::Relaxed), start.elapsed()))
}

fn mean(durations: &[Duration]) -> Duration {
    let n = u32::try_from(durations.len()).unwrap_or(u32::MAX).max(1);
    durations.iter().sum::<Duration>() / n
}

/// Measures one size: latency first, then throughput. `server_side` is
/// the server's endpoint when it runs in this process: its counters are
/// reported too (a server's spurious retransmissions show only there and
/// as the client's duplicates).
pub fn measure(
    client: &Endpoint,
    server: SocketAddr,
    server_side: Option<&Endpoint>,
    size: usize,
    time: Duration,
    concurrency: usize,
) -> Result<Row, CliError> {
    let stats = |e: &Endpoint| e.stats().map(|s| s.total);
    let before = stats(client)?;
    let server_before = server_side.map(stats).transpose()?;
    let failures = Arc::new(Failures::default());
    let half = time / 2;
    let mut rtts = latency_phase(client, server, size, half, &failures);
    let conc = effective_concurrency(size, concurrency);
    let (done, elapsed) = if failures.count.load(Ordering::Relaxed) == 0 {
        throughput_phase(client, server, size, half, conc, &failures)?
    } else {
        (0, half)
    };
    let after = stats(client)?;
    let server_counts = match (server_side, server_before) {
        (Some(e), Some(b)) => Some(SideCounts::between(&b, &stats(e)?)),
        _ => None,
    };
    rtts.sort();
    let rpc_per_s = done as f64 / elapsed.as_secs_f64();
    Ok(Row {
        size,
        rpcs: rtts.len() as u64 + done,
        p50: quantile(&rtts, 0.5).unwrap_or_default(),
        p99: quantile(&rtts, 0.99).unwrap_or_default(),
        mean: mean(&rtts),
        rpc_per_s,
        gbit_per_s: rpc_per_s * size as f64 * 2.0 * 8.0 / 1e9,
        packets: (after.traffic.datagrams_sent + after.traffic.datagrams_received)
            - (before.traffic.datagrams_sent + before.traffic.datagrams_received),
        client: SideCounts::between(&before, &after),
        server: server_counts,
        errors: failures.count.load(Ordering::Relaxed),
        first_error: failures.first.get().cloned(),
    })
}

/// The run's error if any call failed: how many, and why the first did.
pub fn all_succeeded(rows: &[Row]) -> Result<(), CliError> {
    let failed: u64 = rows.iter().map(|r| r.errors).sum();
    if failed == 0 {
        return Ok(());
    }
    let total: u64 = rows.iter().map(|r| r.rpcs + r.errors).sum();
    let why = rows
        .iter()
        .find_map(|r| r.first_error.as_deref())
        .unwrap_or("no reason recorded");
    Err(CliError::Peer(format!(
        "{failed} of {total} RPCs failed; the first because: {why}"
    )))
}

pub fn size_name(size: usize) -> String {
    match size {
        s if s >= 1 << 20 && s % (1 << 20) == 0 => format!("{} MiB", s >> 20),
        s if s >= 1024 && s % 1024 == 0 => format!("{} KiB", s >> 10),
        s => format!("{s} B"),
    }
}

/// Columns after the figures: each side's retransmitted packets, packets
/// dropped as duplicates or replays, and other drops, as `client/server`
/// (`-` for a server in another process), then failed RPCs.
pub fn print_header() {
    say!(
        "{:>8} {:>8} {:>9} {:>9} {:>9} {:>10} {:>8} {:>9} {:>13} {:>13} {:>11} {:>6}",
        "size",
        "rpcs",
        "p50_us",
        "p99_us",
        "mean_us",
        "rpc/s",
        "Gbit/s",
        "packets",
        "rexmit c/s",
        "dup c/s",
        "drops c/s",
        "errors"
    );
}

pub fn print_row(r: &Row) {
    let both = |f: fn(&SideCounts) -> u64| {
        let server = r
            .server
            .as_ref()
            .map_or("-".to_string(), |s| f(s).to_string());
        format!("{}/{server}", f(&r.client))
    };
    say!(
        "{:>8} {:>8} {:>9.1} {:>9.1} {:>9.1} {:>10.0} {:>8.2} {:>9} {:>13} {:>13} {:>11} {:>6}",
        size_name(r.size),
        r.rpcs,
        micros(r.p50),
        micros(r.p99),
        micros(r.mean),
        r.rpc_per_s,
        r.gbit_per_s,
        r.packets,
        both(|c| c.retransmits),
        both(|c| c.duplicates),
        both(|c| c.other_drops),
        r.errors
    );
}

pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

impl Row {
    pub fn to_json(&self) -> Value {
        json!({
            "size": self.size,
            "rpcs": self.rpcs,
            "p50_us": micros(self.p50),
            "p99_us": micros(self.p99),
            "mean_us": micros(self.mean),
            "rpc_per_s": self.rpc_per_s,
            "gbit_per_s": self.gbit_per_s,
            "packets": self.packets,
            "client": self.client.to_json(),
            "server": self.server.map(SideCounts::to_json),
            "errors": self.errors,
            "first_error": self.first_error,
        })
    }
}

/// Prints an endpoint's counters, drops by reason, on one line (whose
/// "N datagrams out, M in" `smt-hostile` reads).
pub fn print_stats(label: &str, s: &Counters) {
    let drops: Vec<String> = s
        .drops
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(r, n)| format!("{}={n}", r.name()))
        .collect();
    say!(
        "{label}: {} datagrams out, {} in, {} records sealed, {} opened, {} retransmitted, {} RESENDs sent, drops: {}",
        s.traffic.datagrams_sent,
        s.traffic.datagrams_received,
        s.records.sealed,
        s.records.opened,
        s.packets.retransmitted,
        s.packets.resends_sent,
        if drops.is_empty() { "none".to_string() } else { drops.join(" ") }
    );
}

/// An endpoint's snapshot as JSON: every counter, as [`Stats`]
/// serialises (`docs/observability.md`).
pub fn stats_json(s: &Stats) -> Value {
    // NOTE(unwrap): `Stats` has string keys and integer values only.
    serde_json::to_value(s).expect("Stats serialises")
}

/// Prints `value` as one JSON document on one line (JSON lines).
pub fn print_json_line(value: &Value) {
    say!("{value}");
}

/// Prints `value` as one JSON document on stdout.
pub fn print_json(value: &Value) {
    // NOTE(unwrap): a `Value` with string keys always serialises.
    say!(
        "{}",
        serde_json::to_string_pretty(value).expect("JSON value")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_messages_and_loads_are_refused_before_allocating() {
        let config = EndpointConfig::default();
        let limit = config.protocol().message_len_limit();
        let huge = check_load("--size", 2_000_000_000, 16, &config).unwrap_err();
        assert!(
            huge.to_string()
                .contains(&format!("largest SMT message, {limit} bytes")),
            "{huge}"
        );
        let heavy = check_load("--size", 60 << 20, 16, &config).unwrap_err();
        assert!(heavy.to_string().contains("--concurrency to 4"), "{heavy}");
        assert!(check_load("--size", 1 << 20, 1024, &config).is_ok());
        assert!(check_load("--size", 0, 1024, &config).is_ok());
    }
}
