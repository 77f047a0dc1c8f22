//! The runner: for each value size and transport, a load phase, then each
//! workload for a fixed time, every client thread with its own connection
//! (or SMT endpoint), one request outstanding each (YCSB's closed loop).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use super::workload::{field_names, key, Chooser, Op, RecordShape, ValuePool, Workload};
use super::zipf::Rng;
use crate::client::{Client, ClientError, Transport};
use crate::resp::Value;

/// Where the server's front ends are.
#[derive(Clone, Debug)]
pub struct Targets {
    /// The TCP front end.
    pub tcp: SocketAddr,
    /// The TLS front end.
    pub tls: SocketAddr,
    /// The SMT front end.
    pub smt: SocketAddr,
    /// The CA that issued the server's certificate.
    pub ca_pem: String,
}

impl Targets {
    fn addr(&self, t: Transport) -> SocketAddr {
        match t {
            Transport::Tcp => self.tcp,
            Transport::Tls => self.tls,
            Transport::Smt => self.smt,
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Transports to measure, in this order.
    pub transports: Vec<Transport>,
    /// Workloads to run on each transport, in this order.
    pub workloads: Vec<Workload>,
    /// Record value sizes in bytes (all fields together), one run each.
    pub value_sizes: Vec<usize>,
    /// Fields per record.
    pub fields: usize,
    /// Records loaded before the workloads.
    pub records: u64,
    /// Client threads, each with its own connection.
    pub threads: usize,
    /// Time run before measuring each workload.
    pub warmup: Duration,
    /// Time measured per workload.
    pub duration: Duration,
    /// Seed of the key choices and values.
    pub seed: u64,
}

/// One measured phase.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Cell {
    /// The transport's name (`TCP`, `TLS`, `SMT`).
    pub transport: &'static str,
    /// `A`–`D`, or `load`.
    pub workload: &'static str,
    /// Bytes of a record's value, all fields together.
    pub value_size: usize,
    /// Operations completed.
    pub ops: u64,
    /// Operations that got an error reply or failed on the transport.
    pub errors: u64,
    /// Seconds the phase was measured over.
    pub seconds: f64,
    /// Operations per second, all threads together.
    pub ops_per_s: f64,
    /// Median latency of an operation, in microseconds.
    pub p50_us: f64,
    /// 99th-percentile latency, in microseconds.
    pub p99_us: f64,
}

/// Runs the plan; `progress` hears about each cell as it completes.
pub fn run(
    plan: &Plan,
    targets: &Targets,
    mut progress: impl FnMut(&Cell),
) -> Result<Vec<Cell>, ClientError> {
    let mut cells = Vec::new();
    for &size in &plan.value_sizes {
        let shape = RecordShape {
            fields: plan.fields,
            value_size: size,
        };
        for &transport in &plan.transports {
            flush(targets)?;
            let load = load_phase(plan, targets, transport, shape)?;
            progress(&load);
            cells.push(load);
            let inserted = Arc::new(AtomicU64::new(plan.records));
            for &workload in &plan.workloads {
                let cell = run_phase(plan, targets, transport, shape, workload, &inserted)?;
                progress(&cell);
                cells.push(cell);
            }
        }
    }
    Ok(cells)
}

fn flush(targets: &Targets) -> Result<(), ClientError> {
    let mut admin = Client::connect(Transport::Tcp, targets.tcp, &targets.ca_pem)?;
    admin.call(&[b"FLUSHALL"])?;
    Ok(())
}

/// Inserts records `0..plan.records`, split among the threads.
fn load_phase(
    plan: &Plan,
    targets: &Targets,
    transport: Transport,
    shape: RecordShape,
) -> Result<Cell, ClientError> {
    let next = Arc::new(AtomicU64::new(0));
    let records = plan.records;
    let results = on_threads(plan, targets, transport, None, |t, mut client, _stop| {
        let mut w = Writer::new(plan.seed ^ t as u64, shape);
        let mut lat = Vec::new();
        let mut errors = 0;
        loop {
            let n = next.fetch_add(1, Ordering::Relaxed);
            if n >= records {
                break;
            }
            let start = Instant::now();
            errors += u64::from(!w.insert(&mut client, n)?);
            lat.push(start.elapsed());
        }
        Ok((lat, errors))
    })?;
    Ok(summarize(transport, "load", shape.value_size, results))
}

/// Runs `workload` for the warm-up plus the measured time; only
/// operations that start after the warm-up count.
fn run_phase(
    plan: &Plan,
    targets: &Targets,
    transport: Transport,
    shape: RecordShape,
    workload: Workload,
    inserted: &Arc<AtomicU64>,
) -> Result<Cell, ClientError> {
    let window = plan.warmup + plan.duration;
    let results = on_threads(
        plan,
        targets,
        transport,
        Some(window),
        |t, mut client, stop| {
            let seed = plan.seed ^ ((t as u64) << 32) ^ workload as u64;
            let mut rng = Rng::new(seed);
            let mut w = Writer::new(seed, shape);
            let mut chooser = Chooser::new(workload, plan.records, shape.fields);
            let measure_from = Instant::now() + plan.warmup;
            let mut lat = Vec::new();
            let mut errors = 0;
            while !stop.load(Ordering::Relaxed) {
                let newest = inserted.load(Ordering::Relaxed) - 1;
                let op = chooser.next(&mut rng, newest, || {
                    inserted.fetch_add(1, Ordering::Relaxed)
                });
                let start = Instant::now();
                let ok = w.execute(&mut client, op)?;
                if start >= measure_from {
                    lat.push(start.elapsed());
                    errors += u64::from(!ok);
                }
            }
            Ok((lat, errors))
        },
    )?;
    let mut cell = summarize(transport, workload.name(), shape.value_size, results);
    // Throughput over the measured window, not the warm-up.
    cell.seconds = plan.duration.as_secs_f64();
    cell.ops_per_s = cell.ops as f64 / cell.seconds;
    Ok(cell)
}

/// One thread's latencies and error count.
type Samples = (Vec<Duration>, u64);

/// Every thread's samples, and the phase's wall time.
type Phase = (Vec<Samples>, Duration);

type ThreadResult = Result<Samples, ClientError>;

/// Connects `plan.threads` clients, starts them together, stops them
/// after `window` (or lets them finish by themselves), and gathers their
/// latencies and the wall time.
fn on_threads<F>(
    plan: &Plan,
    targets: &Targets,
    transport: Transport,
    window: Option<Duration>,
    body: F,
) -> Result<Phase, ClientError>
where
    F: Fn(usize, Client, &AtomicBool) -> ThreadResult + Sync,
{
    let stop = AtomicBool::new(false);
    let ready = Barrier::new(plan.threads + 1);
    let addr = targets.addr(transport);
    thread::scope(|s| {
        let handles: Vec<_> = (0..plan.threads)
            .map(|t| {
                let (body, stop, ready) = (&body, &stop, &ready);
                s.spawn(move || {
                    let client = connect_warm(transport, addr, &targets.ca_pem);
                    ready.wait();
                    body(t, client?, stop)
                })
            })
            .collect();
        ready.wait();
        let start = Instant::now();
        if let Some(window) = window {
            thread::sleep(window);
            stop.store(true, Ordering::Relaxed);
        }
        let mut results = Vec::new();
        for h in handles {
            // NOTE(unwrap): a panicking client thread is a bug in this
            // runner; re-raising it here shows where.
            results.push(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?);
        }
        Ok((results, start.elapsed()))
    })
}

/// A client whose first call is behind it: the TLS client finishes its
/// handshake in `connect`, the SMT client at its first call, so each
/// sends one PING before the clock starts and no phase counts a
/// handshake (nor a fresh endpoint's cold start) as an operation.
fn connect_warm(
    transport: Transport,
    addr: SocketAddr,
    ca_pem: &str,
) -> Result<Client, ClientError> {
    let mut client = Client::connect(transport, addr, ca_pem)?;
    client.call(&[b"PING"])?;
    Ok(client)
}

fn summarize(
    transport: Transport,
    workload: &'static str,
    value_size: usize,
    (results, wall): Phase,
) -> Cell {
    let errors = results.iter().map(|(_, e)| e).sum();
    let mut lat: Vec<Duration> = results.into_iter().flat_map(|(l, _)| l).collect();
    lat.sort_unstable();
    let pct = |p: f64| smt::stats::quantile(&lat, p).map_or(0.0, |d| d.as_secs_f64() * 1e6);
    let ops = lat.len() as u64;
    Cell {
        transport: transport.name(),
        workload,
        value_size,
        ops,
        errors,
        seconds: wall.as_secs_f64(),
        ops_per_s: ops as f64 / wall.as_secs_f64(),
        p50_us: pct(0.50),
        p99_us: pct(0.99),
    }
}

/// Builds and sends the commands of one thread.
struct Writer {
    rng: Rng,
    pool: ValuePool,
    shape: RecordShape,
    names: Vec<Vec<u8>>,
}

impl Writer {
    fn new(seed: u64, shape: RecordShape) -> Self {
        Self {
            rng: Rng::new(seed.rotate_left(17)),
            pool: ValuePool::new(seed),
            shape,
            names: field_names(shape.fields),
        }
    }

    /// Sends `op`; `Ok(false)` when the server answered with an error.
    fn execute(&mut self, client: &mut Client, op: Op) -> Result<bool, ClientError> {
        match op {
            Op::Read(n) => {
                let k = key(n);
                ok(client.call(&[b"HGETALL", &k])?)
            }
            Op::Update(n, field) => {
                let k = key(n);
                let value = self.pool.value(self.shape.field_len(field), &mut self.rng);
                ok(client.call(&[b"HSET", &k, &self.names[field], value])?)
            }
            Op::Insert(n) => self.insert(client, n),
        }
    }

    fn insert(&mut self, client: &mut Client, n: u64) -> Result<bool, ClientError> {
        let k = key(n);
        let mut args: Vec<&[u8]> = vec![b"HSET", &k];
        for (i, name) in self.names.iter().enumerate() {
            args.push(name);
            args.push(self.pool.value(self.shape.field_len(i), &mut self.rng));
        }
        ok(client.call(&args)?)
    }
}

fn ok(reply: Value) -> Result<bool, ClientError> {
    Ok(!matches!(reply, Value::Error(_)))
}
