// A test binary of its own, not a module of tests/integration (issue #27):
// samples the process's resident memory (`/proc/self/status`) as its
// bound: tests beside it in one process would add theirs.
//! Fault soak (issue #6, item 4): 100,000 RPCs of mixed sizes over real
//! sockets through the fault-injecting relay with 5% loss, 10% reordering,
//! 1% duplication and 0.1% corruption each way. Every request is executed
//! at most once, every response arrives intact, and memory stays flat:
//! process RSS and the cores' buffered incoming state are sampled over the
//! run and must show no growth trend beyond a margin.
//!
//! `SMT_SOAK_RPCS` changes the count (default 100,000).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::{Endpoint, EndpointConfig, SessionKeys};
use smt_relay::relay::{Impairment, Relay, RelayConfig};

/// Executions per request tag, allocated up front so the test's own
/// bookkeeping does not grow during the run.
type Executions = Arc<Vec<AtomicU32>>;

const SIZES: [usize; 8] = [8, 64, 256, 1024, 3000, 8000, 16_384, 40_000];
const CONCURRENCY: usize = 256;

/// Endpoints that give up on a silent peer after 1 s instead of 100 ms:
/// the soak checks correctness under faults, and on a shared 2-core
/// machine (the relay, both drivers and the client all in this process,
/// beside other builds) a starved thread can stay silent longer than the
/// datacenter default.
fn config() -> EndpointConfig {
    let mut config = EndpointConfig::default();
    config
        .protocol_mut()
        .set_rpc_idle_timeout(Duration::from_secs(1));
    config
}

fn rpcs() -> u64 {
    std::env::var("SMT_SOAK_RPCS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

/// An echo server counting executions by the request's first 8 bytes.
fn echo_server(keys: SessionKeys, total: u64) -> (Endpoint, Executions) {
    let server = Endpoint::bind("127.0.0.1:0".parse().unwrap(), config()).unwrap();
    // The server sees the relay's address: one client, one session.
    server
        .set_key_resolver(Box::new(move |_peer: SocketAddr| Some(keys.clone())))
        .unwrap();
    let executions: Executions = Arc::new((0..=total).map(|_| AtomicU32::new(0)).collect());
    for _ in 0..2 {
        let (s, ex) = (server.clone(), executions.clone());
        std::thread::spawn(move || {
            while let Ok(mut req) = s.accept() {
                let data = req.take_data();
                let tag = u64::from_le_bytes(data[..8].try_into().unwrap());
                if let Some(n) = ex.get(tag as usize) {
                    n.fetch_add(1, Ordering::Relaxed);
                }
                let _ = req.respond(&data);
            }
        });
    }
    (server, executions)
}

fn request(tag: u64) -> Vec<u8> {
    let size = SIZES[(tag as usize * 7) % SIZES.len()];
    let mut v: Vec<u8> = (0..size).map(|i| (i as u64 ^ tag) as u8).collect();
    v[..8].copy_from_slice(&tag.to_le_bytes());
    v
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// One look at memory during the run.
#[derive(Clone, Copy, Debug)]
struct Sample {
    done: u64,
    rss_kib: u64,
    /// Bytes the client's and the server's cores hold for incoming
    /// messages (`Stats::usage`).
    incoming: u64,
}

fn sample_until(
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    client: Endpoint,
    server: Endpoint,
) -> Vec<Sample> {
    let mut samples = Vec::new();
    let mut progress = (0, Instant::now());
    while !stop.load(Ordering::Relaxed) {
        stall_watchdog(
            &mut progress,
            done.load(Ordering::Relaxed),
            &client,
            &server,
        );
        let held = |e: &Endpoint| e.stats().map_or(0, |s| s.held.incoming_bytes);
        samples.push(Sample {
            done: done.load(Ordering::Relaxed),
            rss_kib: rss_kib(),
            incoming: held(&client) + held(&server),
        });
        std::thread::sleep(Duration::from_millis(250));
    }
    samples
}

/// How long the run may go without one RPC finishing. Every RPC ends
/// within its abort timeout (1 s of silence), so this is a stall: a test
/// that hangs would use up CI's whole budget and say nothing.
const STALL: Duration = Duration::from_secs(60);

/// Ends the test process with both sides' counters when no RPC has
/// finished for [`STALL`] (a panic on this thread would not end the test).
fn stall_watchdog(progress: &mut (u64, Instant), done: u64, client: &Endpoint, server: &Endpoint) {
    if done != progress.0 {
        *progress = (done, Instant::now());
        return;
    }
    if progress.1.elapsed() < STALL {
        return;
    }
    let stats = |e: &Endpoint| e.stats();
    // Straight to stderr: the test harness captures `eprintln!` from
    // threads the test spawned, and would drop it at the exit below.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "soak stalled: no RPC finished for {STALL:?} after {done}\nclient {:#?}\nserver {:#?}",
        stats(client),
        stats(server)
    );
    std::process::exit(101);
}

/// Mean RSS of the samples taken while `range` of the RPCs were done.
fn mean_rss(samples: &[Sample], total: u64, range: (f64, f64)) -> u64 {
    let (lo, hi) = (range.0 * total as f64, range.1 * total as f64);
    let inside: Vec<u64> = samples
        .iter()
        .filter(|s| (s.done as f64) >= lo && (s.done as f64) < hi)
        .map(|s| s.rss_kib)
        .collect();
    inside.iter().sum::<u64>() / inside.len().max(1) as u64
}

#[test]
fn soak_mixed_rpcs_through_loss_reordering_duplication_and_corruption() {
    let total = rpcs();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    let (server, executions) = echo_server(sk, total);
    let impair = Impairment {
        loss: 0.05,
        reorder: 0.10,
        reorder_delay: Duration::from_micros(300),
        duplicate: 0.01,
        corrupt: 0.001,
        ..Impairment::default()
    };
    let relay = Relay::spawn(RelayConfig::new(server.local_addr()).both_ways(impair)).unwrap();
    let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), config()).unwrap();
    client.install_session(relay.local_addr(), ck).unwrap();
    let target = relay.local_addr();

    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (stop, done, c, s) = (stop.clone(), done.clone(), client.clone(), server.clone());
        std::thread::spawn(move || sample_until(stop, done, c, s))
    };
    let started = Instant::now();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let failures = Arc::new(AtomicU64::new(0));
    let wrong = Arc::new(AtomicU64::new(0));
    rt.block_on(async {
        // No task handles are kept (each would hold its finished task):
        // completion is counted, and the end waits for every permit.
        let sem = Arc::new(tokio::sync::Semaphore::new(CONCURRENCY));
        for tag in 1..=total {
            let permit = sem.clone().acquire_owned().await.unwrap();
            let (c, done) = (client.clone(), done.clone());
            let (failures, wrong) = (failures.clone(), wrong.clone());
            tokio::spawn(async move {
                let req = request(tag);
                let resp = c.call_async(target, &req).await;
                match resp {
                    Ok(r) if r == req => {}
                    Ok(_) => {
                        wrong.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        eprintln!("RPC {tag} failed: {e}");
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
                done.fetch_add(1, Ordering::Relaxed);
                drop(permit);
            });
        }
        let _all = sem.acquire_many(CONCURRENCY as u32).await.unwrap();
    });
    let (failures, wrong) = (
        failures.load(Ordering::Relaxed),
        wrong.load(Ordering::Relaxed),
    );
    let elapsed = started.elapsed();
    // Let the last ACKs land and a tick recount what is held.
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.join().unwrap();
    let relay_stats = relay.stop();
    let cs = client.stats().unwrap();
    let ss = server.stats().unwrap();

    let counts: Vec<u32> = executions
        .iter()
        .map(|n| n.load(Ordering::Relaxed))
        .collect();
    let executed = counts.iter().filter(|n| **n > 0).count();
    let twice = counts.iter().filter(|n| **n > 1).count();
    let early = mean_rss(&samples, total, (0.15, 0.35));
    let late = mean_rss(&samples, total, (0.75, 1.01));
    let peak_incoming = samples.iter().map(|s| s.incoming).max().unwrap_or(0);
    eprintln!(
        "{total} RPCs in {:.1} s ({:.0}/s), concurrency {CONCURRENCY}: {failures} failed, {wrong} wrong, \
         {} executed, {twice} executed twice",
        elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64(),
        executed
    );
    eprintln!(
        "RSS: first sample {} KiB, mean at 15-35% {early} KiB, at 75-100% {late} KiB, last {} KiB; \
         incoming state held: peak {peak_incoming} B sampled, {} B client + {} B server at the end; \
         {} samples",
        samples.first().map_or(0, |s| s.rss_kib),
        samples.last().map_or(0, |s| s.rss_kib),
        cs.held.incoming_bytes,
        ss.held.incoming_bytes,
        samples.len()
    );
    eprintln!("relay: {relay_stats:?}");
    eprintln!(
        "client: retransmitted {} restarts {} drops {:?}",
        cs.total.packets.retransmitted, cs.total.rpcs.restarted, cs.total.drops
    );
    eprintln!(
        "server: retransmitted {} drops {:?}",
        ss.total.packets.retransmitted, ss.total.drops
    );

    assert_eq!(wrong, 0, "every response intact");
    assert_eq!(twice, 0, "no request executed twice");
    assert_eq!(failures, 0, "every RPC completes");
    assert_eq!(executed as u64, total, "every request executed");
    let t = &relay_stats.to_server;
    assert!(t.lost > 0 && t.reordered > 0 && t.duplicated > 0 && t.corrupted > 0);
    // Flat memory: the late mean may exceed the early one by the test's
    // own bookkeeping and allocator noise, not by a trend.
    let margin = (early / 4).max(16 * 1024);
    assert!(
        late <= early + margin,
        "RSS grew from {early} to {late} KiB"
    );
    assert_eq!(
        cs.held.incoming_bytes + ss.held.incoming_bytes,
        0,
        "state freed"
    );
}
