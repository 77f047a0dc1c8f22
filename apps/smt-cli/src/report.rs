//! Measuring RPC workloads and printing the results table.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smt::{DropReason, Endpoint, Error, Stats};

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
    pub fn between(before: &Stats, after: &Stats) -> Self {
        let dups = |s: &Stats| s.drops.get(DropReason::Duplicate) + s.drops.get(DropReason::Replay);
        let duplicates = dups(after) - dups(before);
        Self {
            retransmits: after.retransmitted_packets - before.retransmitted_packets,
            duplicates,
            other_drops: (after.drops.total() - before.drops.total()) - duplicates,
        }
    }
}

fn request(size: usize, n: u64) -> Vec<u8> {
    let mut v = vec![(n as u8).wrapping_mul(13); size];
    let k = size.min(8);
    v[..k].copy_from_slice(&n.to_le_bytes()[..k]);
    v
}

/// One RPC, checking the echoed response.
fn echo(client: &Endpoint, server: SocketAddr, req: &[u8]) -> Result<(), Error> {
    let resp = client.call(server, req)?;
    if resp != req {
        return Err(Error::Io(std::io::Error::other(
            "response differs from the request",
        )));
    }
    Ok(())
}

/// Sequential RPCs for `time` (at most `max`): the unloaded RTT.
fn latency_phase(
    client: &Endpoint,
    server: SocketAddr,
    size: usize,
    time: Duration,
    max: u64,
) -> (Vec<Duration>, u64) {
    let mut rtts = Vec::new();
    let mut errors = 0;
    let end = Instant::now() + time;
    let mut n = 0u64;
    while (Instant::now() < end && n < max) || n == 0 {
        n += 1;
        let req = request(size, n);
        let t = Instant::now();
        match echo(client, server, &req) {
            Ok(()) => rtts.push(t.elapsed()),
            Err(_) => errors += 1,
        }
    }
    (rtts, errors)
}

/// `concurrency` threads issuing RPCs back to back for `time`.
fn throughput_phase(
    client: &Endpoint,
    server: SocketAddr,
    size: usize,
    time: Duration,
    concurrency: usize,
) -> (u64, u64, Duration) {
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let threads: Vec<_> = (0..concurrency)
        .map(|t| {
            let (client, done, errors, stop) =
                (client.clone(), done.clone(), errors.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = (t as u64) << 40;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    match echo(&client, server, &request(size, n)) {
                        Ok(()) => done.fetch_add(1, Ordering::Relaxed),
                        Err(_) => errors.fetch_add(1, Ordering::Relaxed),
                    };
                }
            })
        })
        .collect();
    std::thread::sleep(time);
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    (
        done.load(Ordering::Relaxed),
        errors.load(Ordering::Relaxed),
        start.elapsed(),
    )
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
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
    seconds: f64,
    concurrency: usize,
) -> Result<Row, Error> {
    let stats = |e: &Endpoint| e.stats(None).map(|(s, _)| s);
    let before = stats(client)?;
    let server_before = server_side.map(stats).transpose()?;
    let half = Duration::from_secs_f64(seconds / 2.0);
    let (mut rtts, lat_errors) = latency_phase(client, server, size, half, 100_000);
    // Keep memory sane for big messages: each outstanding RPC holds copies.
    let conc = if size >= 1 << 20 {
        concurrency.min(8)
    } else {
        concurrency
    };
    let (done, tp_errors, elapsed) = throughput_phase(client, server, size, half, conc);
    let after = stats(client)?;
    let server_counts = match (server_side, server_before) {
        (Some(e), Some(b)) => Some(SideCounts::between(&b, &stats(e)?)),
        _ => None,
    };
    rtts.sort();
    let mean = if rtts.is_empty() {
        Duration::ZERO
    } else {
        rtts.iter().sum::<Duration>() / rtts.len() as u32
    };
    let rpc_per_s = done as f64 / elapsed.as_secs_f64();
    Ok(Row {
        size,
        rpcs: rtts.len() as u64 + done,
        p50: percentile(&rtts, 0.5),
        p99: percentile(&rtts, 0.99),
        mean,
        rpc_per_s,
        gbit_per_s: rpc_per_s * size as f64 * 2.0 * 8.0 / 1e9,
        packets: (after.datagrams_tx + after.datagrams_rx)
            - (before.datagrams_tx + before.datagrams_rx),
        client: SideCounts::between(&before, &after),
        server: server_counts,
        errors: lat_errors + tp_errors,
    })
}

fn size_name(size: usize) -> String {
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
    println!(
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
    println!(
        "{:>8} {:>8} {:>9.1} {:>9.1} {:>9.1} {:>10.0} {:>8.2} {:>9} {:>13} {:>13} {:>11} {:>6}",
        size_name(r.size),
        r.rpcs,
        r.p50.as_secs_f64() * 1e6,
        r.p99.as_secs_f64() * 1e6,
        r.mean.as_secs_f64() * 1e6,
        r.rpc_per_s,
        r.gbit_per_s,
        r.packets,
        both(|c| c.retransmits),
        both(|c| c.duplicates),
        both(|c| c.other_drops),
        r.errors
    );
}

/// Prints an endpoint's counters, drops by reason.
pub fn print_stats(label: &str, s: &Stats) {
    let drops: Vec<String> = s
        .drops
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(r, n)| format!("{}={n}", r.name()))
        .collect();
    println!(
        "{label}: {} datagrams out, {} in, {} records sealed, {} opened, {} retransmitted, {} RESENDs sent, drops: {}",
        s.datagrams_tx,
        s.datagrams_rx,
        s.records_sealed,
        s.records_opened,
        s.retransmitted_packets,
        s.resends_sent,
        if drops.is_empty() { "none".to_string() } else { drops.join(" ") }
    );
}
