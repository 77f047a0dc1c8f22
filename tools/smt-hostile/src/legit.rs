//! The legitimate clients: real `smt::Endpoint`s over real UDP, in this
//! process but on their own sockets. One established client calls in a
//! loop (one call at a time, at most one per millisecond); a second thread
//! starts a new client every 250 ms and makes one call with it, so new
//! sessions are measured as well as an established one; a third scrapes
//! the server's `--metrics` every 250 ms, as Prometheus would, and keeps
//! what the server says it holds.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use smt::keys::{AeadAlgorithm, PskClient};
use smt::{Endpoint, EndpointConfig};

use crate::scrape::{self, Gauges};

/// Which part of a class run a call started in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Before the flood: the unloaded figures.
    Baseline = 0,
    /// While the flood runs.
    Flood = 1,
    /// After the flood stopped.
    After = 2,
}

impl Phase {
    fn from_u8(v: u8) -> Self {
        match v {
            0 => Self::Baseline,
            1 => Self::Flood,
            _ => Self::After,
        }
    }
}

/// One legitimate call.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub phase: Phase,
    pub latency: Duration,
    pub ok: bool,
    /// When it returned.
    pub end: Instant,
}

/// How clients get keys.
#[derive(Clone, Debug)]
pub enum ClientKeys {
    /// The PSK nonce exchange with this master.
    Psk(Vec<u8>),
    /// TLS 1.3 trusting the test CA.
    Tls(smt_tls::TlsClient),
}

/// What the clients measured.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Calls of the established client.
    pub established: Vec<Sample>,
    /// First calls of new clients.
    pub new_clients: Vec<Sample>,
    /// Scrapes of the server's metrics.
    pub scrapes: Vec<Sample>,
    /// What each successful scrape read, by phase.
    pub gauges: Vec<(Phase, Gauges)>,
    /// Calls still running when the run ended (counted as failures).
    pub hung: usize,
}

const REQUEST_LEN: usize = 1024;
const PACE: Duration = Duration::from_millis(1);
const NEW_CLIENT_EVERY: Duration = Duration::from_millis(250);
const SCRAPE_EVERY: Duration = Duration::from_millis(250);
/// A scrape that takes longer failed (Prometheus's default timeout is
/// 10 s; a scrape of an idle listener takes a millisecond).
pub const SCRAPE_LIMIT: Duration = Duration::from_secs(5);

/// The running clients.
#[derive(Debug)]
pub struct Clients {
    stop: Arc<AtomicBool>,
    phase: Arc<AtomicU8>,
    loops: Vec<Loop>,
    gauges: Arc<Mutex<Vec<(Phase, Gauges)>>>,
}

#[derive(Debug)]
struct Loop {
    samples: Arc<Mutex<Vec<Sample>>>,
    in_flight: Arc<Mutex<Option<Phase>>>,
    handle: JoinHandle<()>,
}

impl Clients {
    /// Connects the established client (a few attempts) and starts the
    /// loops in the baseline phase, scraping `metrics`.
    pub fn start(
        server: SocketAddr,
        metrics: SocketAddr,
        keys: &ClientKeys,
    ) -> Result<Self, String> {
        let client = new_client(keys)?;
        let request = request_bytes();
        let connected = (0..10).any(|_| call_ok(&client, server, &request));
        if !connected {
            client.close();
            return Err(format!("the legitimate client could not reach {server}"));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let phase = Arc::new(AtomicU8::new(Phase::Baseline as u8));
        let closer = client.clone();
        let established = spawn_loop(
            &stop,
            &phase,
            PACE,
            move || call_ok(&client, server, &request),
            move || closer.close(),
        )?;
        let keys = keys.clone();
        let newcomer = spawn_loop(
            &stop,
            &phase,
            NEW_CLIENT_EVERY,
            move || {
                let Ok(client) = new_client(&keys) else {
                    return false;
                };
                let ok = call_ok(&client, server, &request_bytes());
                client.close();
                ok
            },
            || {},
        )?;
        let gauges = Arc::new(Mutex::new(Vec::new()));
        let (read, phase_now) = (gauges.clone(), phase.clone());
        let scraper = spawn_loop(
            &stop,
            &phase,
            SCRAPE_EVERY,
            move || match scrape::scrape(metrics, SCRAPE_LIMIT) {
                Ok(g) => {
                    let p = Phase::from_u8(phase_now.load(Ordering::Relaxed));
                    if let Ok(mut v) = read.lock() {
                        v.push((p, g));
                    }
                    true
                }
                Err(_) => false,
            },
            || {},
        )?;
        Ok(Self {
            stop,
            phase,
            loops: vec![established, newcomer, scraper],
            gauges,
        })
    }

    /// Tags the calls that start from now on.
    pub fn set_phase(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::Relaxed);
    }

    /// Stops the loops, waiting at most `grace` for calls in flight.
    pub fn finish(self, grace: Duration) -> Outcome {
        self.stop.store(true, Ordering::Relaxed);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && self.loops.iter().any(|l| !l.handle.is_finished()) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut outcome = Outcome::default();
        for (i, l) in self.loops.into_iter().enumerate() {
            let mut samples = l.samples.lock().map(|s| s.clone()).unwrap_or_default();
            if !l.handle.is_finished() {
                // A call that never returned: a failure of its phase.
                if let Some(phase) = l.in_flight.lock().ok().and_then(|p| *p) {
                    samples.push(Sample {
                        phase,
                        latency: grace,
                        ok: false,
                        end: Instant::now(),
                    });
                    outcome.hung += 1;
                }
            }
            match i {
                0 => outcome.established = samples,
                1 => outcome.new_clients = samples,
                _ => outcome.scrapes = samples,
            }
        }
        outcome.gauges = self.gauges.lock().map(|g| g.clone()).unwrap_or_default();
        outcome
    }
}

/// Runs `call` every `pace` until stopped, recording whether each call
/// succeeded, then runs `done`.
fn spawn_loop<F, D>(
    stop: &Arc<AtomicBool>,
    phase: &Arc<AtomicU8>,
    pace: Duration,
    mut call: F,
    done: D,
) -> Result<Loop, String>
where
    F: FnMut() -> bool + Send + 'static,
    D: FnOnce() + Send + 'static,
{
    let samples = Arc::new(Mutex::new(Vec::new()));
    let in_flight = Arc::new(Mutex::new(None));
    let (stop, phase) = (stop.clone(), phase.clone());
    let (out, flight) = (samples.clone(), in_flight.clone());
    let handle = std::thread::Builder::new()
        .name("legit-client".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let p = Phase::from_u8(phase.load(Ordering::Relaxed));
                set(&flight, Some(p));
                let start = Instant::now();
                let ok = call();
                let latency = start.elapsed();
                set(&flight, None);
                if let Ok(mut s) = out.lock() {
                    s.push(Sample {
                        phase: p,
                        latency,
                        ok,
                        end: Instant::now(),
                    });
                }
                if let Some(rest) = pace.checked_sub(latency) {
                    std::thread::sleep(rest);
                }
            }
            done();
        })
        .map_err(|e| format!("cannot start a client thread: {e}"))?;
    Ok(Loop {
        samples,
        in_flight,
        handle,
    })
}

fn set(slot: &Mutex<Option<Phase>>, v: Option<Phase>) {
    if let Ok(mut s) = slot.lock() {
        *s = v;
    }
}

fn request_bytes() -> Vec<u8> {
    (0..REQUEST_LEN).map(|i| i as u8).collect()
}

/// One echo call that returns exactly the request.
fn call_ok(client: &Endpoint, server: SocketAddr, request: &[u8]) -> bool {
    client.call(server, request).is_ok_and(|r| r == request)
}

fn new_client(keys: &ClientKeys) -> Result<Endpoint, String> {
    let bind: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 0));
    let client = Endpoint::bind(bind, EndpointConfig::default())
        .map_err(|e| format!("cannot bind a client endpoint: {e}"))?;
    let set = match keys {
        ClientKeys::Psk(master) => {
            client.set_psk_client(PskClient::new(master, AeadAlgorithm::Aes128Gcm))
        }
        ClientKeys::Tls(tls) => client.set_tls_client(tls.clone()),
    };
    set.map_err(|e| format!("cannot give the client its keys: {e}"))?;
    Ok(client)
}
