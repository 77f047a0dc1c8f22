//! `smt bench-handshake`: the paper's Fig. 12 categories on this machine.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::json;
use smt::ticket::KeyPoolRefill;
use smt::{Endpoint, EndpointConfig, ServerAcceptor};
use smt_handshake::{
    KeyPool, ReplayCache, StaticKey, Ticket, VerifiedTicket, ZeroRttClient, ZeroRttServer,
};
use smt_tls::certs::Ca;
use smt_tls::{TlsClient, TlsServer};

mod tail;

use crate::cli::BenchHandshakeArgs;
use crate::threads::{Caller, Roles, Snapshot};

/// Loopback, port chosen by the system.
const LOCALHOST_ANY: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
use crate::error::CliError;
use crate::report::{self, micros};

fn err(e: impl std::fmt::Display) -> CliError {
    CliError::Environment(e.to_string())
}

struct Pki {
    ca: Ca,
    tls_server: TlsServer,
    ticket: Ticket,
    static_key: StaticKey,
}

fn pki() -> Result<Pki, CliError> {
    let mut tag = [0u8; 4];
    smt_crypto::fill_random(&mut tag);
    let ca = Ca::generate(&format!("smt bench CA {:08x}", u32::from_le_bytes(tag))).map_err(err)?;
    let cert = ca
        .issue(&["server.smt.test", "127.0.0.1"], false)
        .map_err(err)?;
    let tls_server = TlsServer::new(cert.chain_pem().as_bytes(), cert.key_pem().as_bytes(), None)
        .map_err(err)?;
    let static_key = StaticKey::generate();
    let ticket = Ticket::issue(
        &static_key,
        &cert.chain_der(),
        cert.key_der(),
        "server.smt.test",
        SystemTime::now(),
        Duration::from_secs(3600),
    )
    .map_err(err)?;
    Ok(Pki {
        ca,
        tls_server,
        ticket,
        static_key,
    })
}

/// How a fresh client gets its session.
#[derive(Clone)]
enum Method {
    Established,
    FullTls,
    Resumed(TlsClient),
    Ticket {
        verified: Box<VerifiedTicket>,
        fs: bool,
    },
}

/// Time to the first response of a 64-byte RPC to `server` on a new
/// client endpoint. Unless `cold`, the endpoint first makes one call to
/// `warm` (keys installed directly), so its thread, buffers and caches are
/// warm and the figure is the session establishment's, not the endpoint's
/// start-up.
fn first_response(
    server: SocketAddr,
    warm: &Endpoint,
    method: &Method,
    ca_pem: &str,
    config: &EndpointConfig,
    (cold, probe): (bool, bool),
) -> Result<Session, CliError> {
    let client = Endpoint::bind(LOCALHOST_ANY, config.clone())?;
    let (ck, sk) = smt::keys::fresh_session_pair(smt::keys::AeadAlgorithm::Aes128Gcm);
    client.install_session(warm.local_addr(), ck)?;
    warm.install_session(client.local_addr(), sk)?;
    if !cold {
        client.call(warm.local_addr(), b"warm up")?;
    }
    match method {
        Method::Established | Method::FullTls => {
            client.set_tls_client(TlsClient::new(ca_pem.as_bytes(), None).map_err(err)?)?
        }
        Method::Resumed(tls) => client.set_tls_client(tls.clone())?,
        Method::Ticket { verified, fs } => {
            client.set_zero_rtt_ticket(server, (**verified).clone(), *fs)?
        }
    }
    if matches!(method, Method::Established) {
        client.call(server, b"warm up")?;
    }
    let before = probe.then(|| Snapshot::around(Caller::Last)).flatten();
    let t = Instant::now();
    client.call(server, &[7u8; 64])?;
    let elapsed = t.elapsed();
    let after = probe.then(|| Snapshot::around(Caller::First)).flatten();
    let threads = before.zip(after);
    let counters = client.stats()?.total;
    let port = client.local_addr().port();
    client.close();
    Ok(Session {
        elapsed,
        port,
        counters,
        threads,
    })
}

/// One measured session: its time to first response, and what the client
/// counted (for `SMT_BENCH_TRACE`).
struct Session {
    elapsed: Duration,
    port: u16,
    counters: smt::stats::Counters,
    /// With `--probe`: every thread just before the call and just after.
    threads: Option<(Snapshot, Snapshot)>,
}

/// One line per session on stderr: where a slow one spent its time.
fn trace_session(
    name: &str,
    s: &Session,
    reused: bool,
    before: &smt::stats::Counters,
    after: &smt::stats::Counters,
) {
    let c = &s.counters;
    eprintln!(
        "{name}: {} us port {}{} client: restarted {} retransmitted {} resends {} drops {} server: retries {} tokens {} drops {} ({:?})",
        s.elapsed.as_micros(),
        s.port,
        if reused { " (reused)" } else { "" },
        c.rpcs.restarted,
        c.packets.retransmitted,
        c.packets.resends_sent,
        c.drops.total(),
        after.handshakes.retries_sent - before.handshakes.retries_sent,
        after.handshakes.retry_tokens_accepted - before.handshakes.retry_tokens_accepted,
        after.drops.total() - before.drops.total(),
        after
            .drops
            .iter()
            .zip(before.drops.iter())
            .filter(|((_, a), (_, b))| a > b)
            .map(|((r, a), (_, b))| (r.name(), a - b))
            .collect::<Vec<_>>(),
    );
}

/// The endpoints' configuration: with `SMT_BENCH_TRACE_FILE` set, every
/// endpoint of the run writes its events into that one trace (for `smt
/// dump --trace`: where a slow session spent its time).
fn bench_config() -> Result<(EndpointConfig, Option<smt::observe::Trace>), CliError> {
    let mut config = EndpointConfig::default();
    let Some(path) = std::env::var_os("SMT_BENCH_TRACE_FILE") else {
        return Ok((config, None));
    };
    let trace = smt::observe::Trace::create(&path).map_err(err)?;
    config.set_observe(smt::observe::Observe::new().trace(trace.clone()));
    Ok((config, Some(trace)))
}

pub fn handshake(args: BenchHandshakeArgs) -> Result<(), CliError> {
    let mut roles = Roles::default();
    let start = Snapshot::take().unwrap_or_default();
    roles.name_new(&Snapshot::default(), &start, "main");
    let pki = pki()?;
    let (config, trace_file) = bench_config()?;
    let replay = ReplayCache::new(1_000_000);
    let pool = Arc::new(KeyPool::new(64));
    // As `smt server` does: the pool refilled in idle CPU time (its
    // thread counts as the server's).
    let _refill = KeyPoolRefill::spawn(Arc::clone(&pool)).map_err(err)?;
    let zero_rtt = ZeroRttServer::new(
        StaticKey::from_bytes(&pki.static_key.to_bytes()).map_err(err)?,
        pki.ticket.clone(),
        pool,
        replay,
    )
    .map_err(err)?;
    let server = Endpoint::bind(LOCALHOST_ANY, config.clone())?;
    server.set_handshake_acceptor(Box::new(ServerAcceptor::new(
        Some(pki.tls_server.clone()),
        Some(Arc::new(zero_rtt)),
    )))?;
    let bound = Snapshot::take().unwrap_or_default();
    roles.name_new(&start, &bound, "server");
    crate::demo::spawn_echo(&server, 1)?;
    // A new 0-RTT server refuses hellos stamped before its start plus the
    // clock skew bound (possible replays of a previous run).
    std::thread::sleep(smt_handshake::Freshness::DEFAULT_MAX_CLOCK_SKEW);
    let echoing = Snapshot::take().unwrap_or_default();
    roles.name_new(&bound, &echoing, "echo");
    // The warm endpoint is the bench's, not the system measured: its
    // once-a-second allocator look (0.3-1 ms in this process of thousands
    // of short-lived threads) would land in a session's time on one CPU.
    let mut warm_config = EndpointConfig::default();
    warm_config.set_return_memory(false);
    let warm = Endpoint::bind(LOCALHOST_ANY, warm_config)?;
    crate::demo::spawn_echo(&warm, 1)?;
    std::thread::sleep(Duration::from_millis(10));
    roles.name_new(&echoing, &Snapshot::take().unwrap_or_default(), "warm");
    let to = server.local_addr();
    let verified = Box::new(
        pki.ticket
            .verify(pki.ca.cert_der(), "server.smt.test", SystemTime::now())
            .map_err(err)?,
    );
    let resuming = TlsClient::new(pki.ca.cert_pem().as_bytes(), None).map_err(err)?;
    first_response(
        to,
        &warm,
        &Method::Resumed(resuming.clone()),
        pki.ca.cert_pem(),
        &config,
        (false, false),
    )?; // obtain a ticket
    let methods = [
        ("established session (no handshake)", Method::Established),
        ("Init-1RTT: full TLS 1.3 handshake", Method::FullTls),
        (
            "Rsmpt-FS: TLS 1.3 resumption (PSK + ECDHE)",
            Method::Resumed(resuming),
        ),
        (
            "Init: SMT-ticket 0-RTT, no forward secrecy",
            Method::Ticket {
                verified: verified.clone(),
                fs: false,
            },
        ),
        (
            "Init-FS: SMT-ticket 0-RTT, forward secrecy",
            Method::Ticket { verified, fs: true },
        ),
    ];
    let mut rows = Vec::with_capacity(methods.len());
    let trace = std::env::var_os("SMT_BENCH_TRACE").is_some();
    let mut ports = std::collections::HashSet::new();
    let mut tails = Vec::new();
    for (name, method) in &methods {
        let mut warmup = Vec::with_capacity(args.warmup);
        let mut times = Vec::with_capacity(args.iterations);
        let mut probes = Vec::new();
        for i in 0..args.warmup + args.iterations {
            let before = server.stats()?.total;
            let options = (args.cold, args.probe);
            let s = first_response(to, &warm, method, pki.ca.cert_pem(), &config, options)?;
            let reused = !ports.insert(s.port);
            if trace {
                trace_session(name, &s, reused, &before, &server.stats()?.total);
            }
            let measured = i >= args.warmup;
            if let Some((b, a)) = &s.threads {
                let probe = tail::Probe::of(i, measured, s.elapsed, roles.delta(b, a, "client"));
                probe.print(name);
                if measured {
                    probes.push(probe);
                }
            }
            if measured {
                times.push(s.elapsed);
            } else {
                warmup.push(s.elapsed);
            }
        }
        let row = MethodRow::of(name, matches!(method, Method::FullTls), times, warmup);
        if args.probe {
            tails.push(tail::Summary::of(name, row.p50, &probes));
        }
        rows.push(row);
    }
    let costs = steps(&pki, args.iterations)?;
    server.close();
    warm.close();
    if let Some(t) = trace_file {
        t.finish().map_err(err)?;
    }
    if args.json {
        print_json(&rows, &costs, &args, &tails);
    } else {
        print_tables(&rows, &costs, &args);
        for t in &tails {
            t.print();
        }
    }
    Ok(())
}

/// One way of establishing a session, measured.
struct MethodRow {
    name: &'static str,
    full_tls: bool,
    p50: Duration,
    /// The tail is what 0-RTT exists to cut: a session that waits for a
    /// timer shows here, not in the median.
    p99: Duration,
    max: Duration,
    mean: Duration,
    /// The warm-up sessions, apart: median and slowest.
    warmup_p50: Duration,
    warmup_max: Duration,
}

impl MethodRow {
    fn of(
        name: &'static str,
        full_tls: bool,
        mut times: Vec<Duration>,
        mut warmup: Vec<Duration>,
    ) -> Self {
        times.sort();
        warmup.sort();
        let q = |p| smt::stats::quantile(&times, p).unwrap_or_default();
        Self {
            name,
            full_tls,
            p50: q(0.5),
            p99: q(0.99),
            max: times.last().copied().unwrap_or_default(),
            mean: times.iter().sum::<Duration>() / times.len().max(1) as u32,
            warmup_p50: smt::stats::quantile(&warmup, 0.5).unwrap_or_default(),
            warmup_max: warmup.last().copied().unwrap_or_default(),
        }
    }

    /// The tail against the median (issue #23's target: at most 2).
    fn p99_over_p50(&self) -> f64 {
        micros(self.p99) / micros(self.p50).max(f64::MIN_POSITIVE)
    }
}

/// Each method's median against the full handshake's, once that ran.
fn ratios(rows: &[MethodRow]) -> Vec<Option<f64>> {
    let full = rows.iter().find(|r| r.full_tls).map(|r| r.p50);
    rows.iter()
        .map(|r| full.map(|f| r.p50.as_secs_f64() / f.as_secs_f64()))
        .collect()
}

fn print_tables(rows: &[MethodRow], costs: &StepCosts, args: &BenchHandshakeArgs) {
    let (iterations, warmup) = (args.iterations, args.warmup);
    say!(
        "time to first response of a 64 B RPC in a new session ({}), loopback UDP, {iterations} sessions each after {warmup} warm-up sessions",
        if args.cold { "the client endpoint's first call" } else { "warmed-up client endpoint" }
    );
    say!(
        "{:<46} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}",
        "method",
        "p50_us",
        "p99_us",
        "max_us",
        "mean_us",
        "p99/p50",
        "vs full"
    );
    for (row, ratio) in rows.iter().zip(ratios(rows)) {
        let ratio = ratio.map_or("-".to_string(), |r| format!("{r:.2}"));
        say!(
            "{:<46} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>8.2} {ratio:>8}",
            row.name,
            micros(row.p50),
            micros(row.p99),
            micros(row.max),
            micros(row.mean),
            row.p99_over_p50()
        );
    }
    if warmup > 0 {
        say!("warm-up, the first {warmup} sessions of each method (not in the figures above):");
        for row in rows {
            say!(
                "  {:<44} p50 {:>8.1} us  max {:>8.1} us",
                row.name,
                micros(row.warmup_p50),
                micros(row.warmup_max)
            );
        }
    }
    say!("Rsmpt (resumption without forward secrecy, psk_ke): not available, rustls offers only PSK with (EC)DHE");
    say!("per-step CPU cost (one thread, no network, {iterations} runs each):");
    say!(
        "  full TLS 1.3 handshake, client + server (X25519MLKEM768, ECDSA P-256)  {:>8.1} us",
        costs.full_handshake_us
    );
    say!(
        "  SMT-ticket verify (certificate chain + signature; done before the call)  {:>8.1} us",
        costs.ticket_verify_us
    );
    say!(
        "  0-RTT client start (pooled ephemeral, ECDH, key schedule)               {:>8.1} us",
        costs.zero_rtt_start_us
    );
    say!(
        "  0-RTT server accept with forward secrecy (2 ECDH, key schedule, replay)  {:>8.1} us",
        costs.zero_rtt_accept_fs_us
    );
}

fn print_json(
    rows: &[MethodRow],
    costs: &StepCosts,
    args: &BenchHandshakeArgs,
    tails: &[tail::Summary],
) {
    let methods: Vec<_> = rows
        .iter()
        .zip(ratios(rows))
        .map(|(row, ratio)| {
            json!({
                "method": row.name,
                "p50_us": micros(row.p50),
                "p99_us": micros(row.p99),
                "max_us": micros(row.max),
                "mean_us": micros(row.mean),
                "p99_over_p50": row.p99_over_p50(),
                "vs_full_tls": ratio,
                "warmup_p50_us": micros(row.warmup_p50),
                "warmup_max_us": micros(row.warmup_max),
            })
        })
        .collect();
    report::print_json(&json!({
        "iterations": args.iterations,
        "warmup": args.warmup,
        "cold": args.cold,
        "first_response": methods,
        "slow_sessions": tails.iter().map(tail::Summary::json).collect::<Vec<_>>(),
        "cpu_us": {
            "full_tls_handshake": costs.full_handshake_us,
            "ticket_verify": costs.ticket_verify_us,
            "zero_rtt_client_start": costs.zero_rtt_start_us,
            "zero_rtt_server_accept_fs": costs.zero_rtt_accept_fs_us,
        },
    }));
}

/// Microseconds per step, from [`steps`].
struct StepCosts {
    full_handshake_us: f64,
    ticket_verify_us: f64,
    zero_rtt_start_us: f64,
    zero_rtt_accept_fs_us: f64,
}

/// Per-step CPU costs, in one thread, no network (Table 2's spirit).
fn steps(pki: &Pki, n: usize) -> Result<StepCosts, CliError> {
    let n = n.max(1);
    let time = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        for _ in 0..n {
            f();
        }
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    };
    let ca_pem = pki.ca.cert_pem().as_bytes();
    let tls_client = TlsClient::new(ca_pem, None).map_err(err)?;
    // Checked once here, so the timed loop below can rely on it.
    let peer = SocketAddr::from((Ipv4Addr::LOCALHOST, 1));
    tls_client.handshake("127.0.0.1").map_err(err)?;
    smt_proto::HandshakeAcceptor::accept(&mut pki.tls_server.clone(), peer)
        .ok_or_else(|| err("the TLS server accepted no handshake"))?;
    let full = time(&mut || {
        // NOTE(unwrap): both started just above with the same arguments.
        let mut c = tls_client.handshake("127.0.0.1").expect("client");
        let mut s = smt_proto::HandshakeAcceptor::accept(&mut pki.tls_server.clone(), peer)
            .expect("server");
        shuttle(&mut *c, &mut *s);
    });
    let verify = time(&mut || {
        let _ = pki
            .ticket
            .verify(pki.ca.cert_der(), "server.smt.test", SystemTime::now());
    });
    let verified = pki
        .ticket
        .verify(pki.ca.cert_der(), "server.smt.test", SystemTime::now())
        .map_err(err)?;
    let pool = KeyPool::new(n + 1);
    let start = time(&mut || {
        let _ = ZeroRttClient::start(&verified, &pool, true);
    });
    let server_pool = Arc::new(KeyPool::new(n + 1));
    let zs = ZeroRttServer::new(
        StaticKey::from_bytes(&pki.static_key.to_bytes()).map_err(err)?,
        pki.ticket.clone(),
        server_pool,
        ReplayCache::new(10 * n + 10),
    )
    .map_err(err)?
    // The hellos are made before the server: count its start from earlier
    // (one process, one clock, nothing to replay across a restart).
    .with_freshness(smt_handshake::Freshness::new(
        std::time::SystemTime::now() - std::time::Duration::from_secs(1),
    ));
    let client_pool = KeyPool::new(2 * n + 2);
    let hellos: Vec<_> = (0..2 * n)
        .map(|_| ZeroRttClient::start(&verified, &client_pool, true).0)
        .collect();
    let mut it = hellos.iter();
    let accept_fs = time(&mut || {
        // NOTE(unwrap): 2n hellos for n runs.
        let _ = zs.accept(it.next().expect("enough hellos"), SystemTime::now());
    });
    Ok(StepCosts {
        full_handshake_us: full,
        ticket_verify_us: verify,
        zero_rtt_start_us: start,
        zero_rtt_accept_fs_us: accept_fs,
    })
}

fn shuttle(c: &mut dyn smt_proto::Handshake, s: &mut dyn smt_proto::Handshake) {
    for _ in 0..8 {
        let mut a = Vec::new();
        c.write(&mut a);
        if !a.is_empty() {
            let _ = s.read(&a);
        }
        let mut b = Vec::new();
        s.write(&mut b);
        if !b.is_empty() {
            let _ = c.read(&b);
        }
        if a.is_empty() && b.is_empty() {
            break;
        }
    }
    let _ = (c.take_keys(), s.take_keys());
}
