//! One class against a fresh server: legitimate clients and a metrics
//! scraper start, run unloaded, the attack runs (the server's RSS sampled
//! all along), then the clients go on for the recovery time; last, with
//! the clients stopped, the server's socket queues and its threads' CPU
//! are read.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use smt_relay::SplitMix64;

use crate::classes::{self, Class, Generator};
use crate::env::Env;
use crate::flood::{self, Shot, Sources, SpoofMode, Tally, Via};
use crate::keyless::{self, Mode};
use crate::legit::{Clients, Outcome, Phase};
use crate::result::ClassResult;
use crate::server::Server;
use crate::{amplify, forge, observe, slowloris};

/// Timings, rates and sizes of one run.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub baseline: Duration,
    pub flood: Duration,
    pub recovery: Duration,
    /// Datagrams a second of classes (a)–(f).
    pub pps: u32,
    /// ... of classes (h)–(j); 0: as fast as one thread sends.
    pub spoof_pps: u32,
    pub quiet: Duration,
    pub limit: Duration,
    pub spoof: SpoofMode,
    pub rss_cap_kib: u64,
    pub seed: u64,
    /// Sockets of the hold-open classes (l), (m).
    pub hold_sockets: usize,
    /// Exchanges at once of the session fill (k), and its addresses.
    pub fill_sockets: usize,
    pub fill_addresses: usize,
}

/// How long the threads' CPU is sampled after a class.
const THREAD_SAMPLE: Duration = Duration::from_secs(1);
/// How long calls in flight may take to return once the clients stop.
const GRACE: Duration = Duration::from_secs(5);

/// One attack class against a fresh server.
pub fn run_class(class: Class, plan: &Plan, env: &Env) -> Result<ClassResult, String> {
    let mut server = Server::start(&env.smt, &env.server_keys(class.tls()), env.server_ip)?;
    let clients = Clients::start(
        server.addr(),
        server.metrics(),
        &env.client_keys(class.tls()),
    )?;
    std::thread::sleep(plan.baseline);
    let before = server.memory();
    let mut rng =
        SplitMix64::new(plan.seed ^ (class as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut attack = Attack::prepare(class, plan, env, &server)?;
    clients.set_phase(Phase::Flood);
    let stop = AtomicBool::new(false);
    let mut watch = Watch::default();
    let description = std::thread::scope(|s| {
        let running = s.spawn(|| attack.run(&mut rng, plan.flood, &stop));
        while !running.is_finished() {
            if watch.sample(&server, plan.rss_cap_kib) {
                stop.store(true, Ordering::Relaxed);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        running
            .join()
            .unwrap_or_else(|_| "the attacker thread panicked".into())
    });
    let end = Instant::now();
    clients.set_phase(Phase::After);
    while end.elapsed() < plan.recovery {
        watch.sample(&server, u64::MAX);
        std::thread::sleep(Duration::from_millis(50));
    }
    let after = server.memory();
    let outcome = clients.finish(GRACE);
    let queues = observe::socket_queues(server.addr());
    let threads = observe::thread_loads(server.pid(), THREAD_SAMPLE);
    Ok(ClassResult {
        class,
        attack: description,
        recovery: first_success_after(&outcome, end),
        clients: outcome,
        before,
        peak_kib: watch.peak_kib.max(after.map_or(0, |m| m.hwm_kib)),
        after,
        alive: server.alive(),
        capped: watch.capped,
        queues,
        threads,
        server_stats: server.last_stats(),
        recovery_time: plan.recovery,
    })
}

/// The server's peak RSS while it is watched.
#[derive(Debug, Default)]
struct Watch {
    peak_kib: u64,
    capped: bool,
}

impl Watch {
    /// Reads the RSS; true when it passed `cap_kib` (stop the attack).
    fn sample(&mut self, server: &Server, cap_kib: u64) -> bool {
        let Some(m) = server.memory() else {
            return false;
        };
        self.peak_kib = self.peak_kib.max(m.rss_kib);
        let over = m.rss_kib > cap_kib;
        self.capped |= over;
        over
    }
}

/// From `end` to the first legitimate call (established or new client)
/// that returned successfully after it.
fn first_success_after(o: &Outcome, end: Instant) -> Option<Duration> {
    o.established
        .iter()
        .chain(&o.new_clients)
        .filter(|s| s.ok && s.end >= end)
        .map(|s| s.end.duration_since(end))
        .min()
}

/// A class's attacker, ready to run.
enum Attack {
    Generated {
        class: Class,
        sources: Sources,
        generator: Generator,
        pps: u32,
        port: u16,
    },
    Keyless(keyless::Plan),
    Slowloris(SocketAddr),
}

impl Attack {
    fn prepare(class: Class, plan: &Plan, env: &Env, server: &Server) -> Result<Self, String> {
        let addr = server.addr();
        let name = env.server_ip.to_string();
        let keyless = |mode, kind, streams, sockets, addresses| {
            Ok(Self::Keyless(keyless::Plan {
                mode,
                server: addr,
                kind,
                streams,
                sockets,
                addresses,
            }))
        };
        match class {
            Class::SessionFill => keyless(
                Mode::SessionFill,
                forge::KIND_PSK_NONCE,
                Vec::new(),
                plan.fill_sockets,
                plan.fill_addresses,
            ),
            Class::HoldPsk => keyless(
                Mode::Hold,
                forge::KIND_PSK_NONCE,
                Vec::new(),
                plan.hold_sockets,
                plan.hold_sockets,
            ),
            Class::HoldTls => {
                let streams = classes::client_hello_streams(&env.tls_client, &name, 16)?;
                keyless(
                    Mode::Hold,
                    forge::KIND_TLS13,
                    streams,
                    plan.hold_sockets,
                    plan.hold_sockets,
                )
            }
            Class::MetricsSlowloris => Ok(Self::Slowloris(server.metrics())),
            _ => Self::generated(class, plan, env, addr),
        }
    }

    fn generated(class: Class, plan: &Plan, env: &Env, addr: SocketAddr) -> Result<Self, String> {
        let SocketAddr::V4(v4) = addr else {
            return Err("the server must have an IPv4 address".into());
        };
        let from = class.spoof_from(env.in_netns);
        let sources = Sources::new(addr, class.pool(), plan.spoof, from)?;
        let hellos = if matches!(class, Class::ClientHello | Class::SpoofedTls) {
            let name = env.server_ip.to_string();
            classes::client_hellos(&env.tls_client, &name, addr.port(), 16)?
        } else {
            Vec::new()
        };
        let generator = Generator::new(class, v4, sources.pool_len(), hellos, from);
        let pps = if class.needs_raw() {
            plan.spoof_pps
        } else {
            plan.pps
        };
        Ok(Self::Generated {
            class,
            sources,
            generator,
            pps,
            port: addr.port(),
        })
    }

    /// Runs for `duration` (or until `stop`); returns what it did, in a
    /// few words with figures.
    fn run(&mut self, rng: &mut SplitMix64, duration: Duration, stop: &AtomicBool) -> String {
        match self {
            Self::Generated {
                class,
                sources,
                generator,
                pps,
                port,
            } => {
                let mut tally = Tally::default();
                if class.primed() {
                    prime(sources, rng, *port, &mut tally);
                }
                let flood = flood::run(sources, rng, *pps, duration, stop, &mut |r| {
                    generator.next(r)
                });
                describe_flood(*class, sources, add(tally, flood), *pps)
            }
            Self::Keyless(plan) => describe_keyless(plan, &keyless::run(plan, rng, duration, stop)),
            Self::Slowloris(metrics) => {
                let t = slowloris::run(*metrics, duration, stop);
                format!(
                    "{} connections to --metrics (half idle, half a header byte a second): \
                     {} opened, {} closed by the server, {} refused",
                    slowloris::CONNECTIONS,
                    t.opened,
                    t.closed_by_server,
                    t.refused
                )
            }
        }
    }
}

/// Each pool socket opens a PSK exchange, so the flood reaches sessions.
fn prime(sources: &Sources, rng: &mut SplitMix64, port: u16, tally: &mut Tally) {
    for n in 0..sources.pool_len() {
        let shot = Shot {
            via: Via::Pool(n),
            datagrams: vec![forge::psk_hello(rng, port)],
        };
        sources.send(rng, &shot, tally);
    }
    std::thread::sleep(Duration::from_millis(100));
    sources.drain(tally);
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

fn describe_flood(class: Class, sources: &Sources, t: Tally, pps: u32) -> String {
    let rate = t.sent as f64 / t.elapsed.as_secs_f64().max(1e-3);
    let target = if pps == 0 {
        "full speed".to_string()
    } else {
        format!("of {pps}")
    };
    let mut s = format!("{} datagrams, {rate:.0}/s ({target})", t.sent);
    if class.pool() > 0 {
        s += &format!(
            " from {} sockets; back ÷ sent {:.2}",
            class.pool(),
            t.back_bytes as f64 / t.sent_bytes.max(1) as f64
        );
    } else {
        s += &format!("; {}", sources.spoof_kind());
    }
    if t.send_errors > 0 {
        s += &format!("; {} send errors", t.send_errors);
    }
    s
}

fn describe_keyless(plan: &keyless::Plan, t: &keyless::Tally) -> String {
    let rate = |n: u64| n as f64 / t.elapsed.as_secs_f64().max(1e-3);
    match plan.mode {
        Mode::SessionFill => format!(
            "{} exchanges at once from {} addresses: {} sessions ({:.0}/s), {} RETRYs answered, {} datagrams",
            plan.sockets,
            plan.addresses,
            t.sessions,
            rate(t.sessions),
            t.retries,
            t.sent
        ),
        Mode::Hold => format!(
            "{} sockets, a byte every {} ms: {} handshakes held at most, {} RETRYs answered, {} restarts, {} datagrams ({:.0}/s)",
            plan.sockets,
            keyless::TRICKLE.as_millis(),
            t.held_peak,
            t.retries,
            t.restarts,
            t.sent,
            rate(t.sent)
        ),
    }
}

/// Every probe against a PSK server, then the ClientHello against a TLS
/// server; each from its own address 127.0.3.n.
pub fn amplification(plan: &Plan, env: &Env) -> Result<Vec<amplify::ProbeResult>, String> {
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
    let server = Server::start(&env.smt, &env.server_keys(false), env.server_ip)?;
    for p in amplify::psk_probes(&mut rng, server.addr().port()) {
        probe(&server, &p)?;
    }
    drop(server);
    let server = Server::start(&env.smt, &env.server_keys(true), env.server_ip)?;
    let name = env.server_ip.to_string();
    let hello = classes::client_hellos(&env.tls_client, &name, server.addr().port(), 1)?;
    if let Some(hello) = hello.into_iter().next() {
        probe(&server, &amplify::tls_probe(hello))?;
    }
    Ok(results)
}
