//! `smt demo`: a server and a client in one process on loopback, next to
//! the floor under them: a plain UDP ping-pong with the same threads.
//!
//! The demo uses the threaded [`Endpoint`]: its blocking calls drive the
//! endpoint from the calling thread (no hand-off to another thread per
//! RPC), so it is as fast as the caller-driven `LocalEndpoint` for one
//! caller and, unlike it, can be shared by the throughput phase's threads.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use smt::keys::{session, AeadAlgorithm, TrafficKey};
use smt::stats::Counters;
use smt::Role;
use smt::{Endpoint, EndpointConfig};

use crate::cli::{DemoArgs, TransportArgs};
use crate::error::CliError;
use crate::record::Recording;
use crate::report;

const ALGORITHM: AeadAlgorithm = AeadAlgorithm::Aes128Gcm;

/// The endpoint configuration the transport options ask for, on `addr`,
/// checked before anything is opened: a refused setting comes back as a
/// usage error naming the option (only `--mtu` can be refused).
pub fn config(t: &TransportArgs, addr: SocketAddr) -> Result<EndpointConfig, CliError> {
    let mut c = EndpointConfig::default();
    if t.raw {
        c.socket_mut().set_mode(smt::Mode::RawIp {
            protocol: t.ip_protocol,
        });
    }
    c.socket_mut().set_gso(!t.no_gso).set_gro(!t.no_gro);
    c.set_mtu(Some(t.mtu)).set_busy_poll(t.busy_poll);
    match c.validate(addr) {
        Err(smt::Error::Config(e)) if e.setting() == "EndpointConfig::mtu" => {
            Err(CliError::Usage(format!("--mtu {}: {e}", t.mtu)))
        }
        Err(e) => Err(e.into()),
        Ok(()) => Ok(c),
    }
}

/// Answers every request with its own bytes, on `threads` threads.
pub fn spawn_echo(server: &Endpoint, threads: usize) -> Result<(), CliError> {
    for n in 0..threads.max(1) {
        let server = server.clone();
        let echo = move || {
            while let Ok(mut req) = server.accept() {
                let data = req.take_data();
                let _ = req.respond(&data);
            }
        };
        std::thread::Builder::new().spawn(echo).map_err(|e| {
            CliError::Environment(format!(
                "cannot start answering thread {} of {threads}: {e}; lower --threads",
                n + 1
            ))
        })?;
    }
    Ok(())
}

/// The floor: a plain UDP ping-pong of `size` bytes on loopback for
/// `time`, with the demo's thread structure (the calling thread sends and
/// waits; `threads` echo threads share the server socket). Returns the
/// median round trip.
fn udp_floor(size: usize, time: Duration, threads: usize) -> std::io::Result<Duration> {
    let server = UdpSocket::bind("127.0.0.1:0")?;
    // Lets the echo threads notice the end.
    server.set_read_timeout(Some(Duration::from_millis(50)))?;
    let to = server.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let echoes = (0..threads.max(1))
        .map(|_| {
            let (socket, stop) = (server.try_clone()?, stop.clone());
            Ok(std::thread::spawn(move || udp_echo(&socket, &stop)))
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    let client = UdpSocket::bind("127.0.0.1:0")?;
    client.set_read_timeout(Some(Duration::from_secs(1)))?;
    let (msg, mut buf) = (vec![7u8; size], vec![0u8; 65_536]);
    let mut rtts = Vec::new();
    let end = Instant::now() + time;
    while Instant::now() < end && rtts.len() < 100_000 {
        let start = Instant::now();
        client.send_to(&msg, to)?;
        client.recv_from(&mut buf)?;
        rtts.push(start.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    for echo in echoes {
        let _ = echo.join();
    }
    rtts.sort();
    Ok(smt::stats::quantile(&rtts, 0.5).unwrap_or_default())
}

fn udp_echo(socket: &UdpSocket, stop: &AtomicBool) {
    let mut buf = vec![0u8; 65_536];
    while !stop.load(Ordering::Relaxed) {
        if let Ok((len, from)) = socket.recv_from(&mut buf) {
            let _ = socket.send_to(&buf[..len], from);
        }
    }
}

/// A throwaway CA, a server certificate for the server's IP, and TLS on
/// both endpoints: the first call runs the handshake.
fn throwaway_tls(
    client: &Endpoint,
    server: &Endpoint,
    key_log: Option<&Path>,
) -> Result<(), CliError> {
    let err = |e: String| CliError::Environment(format!("throwaway CA: {e}"));
    let mut tag = [0u8; 4];
    smt_crypto::fill_random(&mut tag);
    let ca = smt_tls::certs::Ca::generate(&format!("smt demo CA {:08x}", u32::from_le_bytes(tag)))
        .map_err(|e| err(e.to_string()))?;
    let ip = server.local_addr().ip().to_string();
    let cert = ca.issue(&[&ip], false).map_err(|e| err(e.to_string()))?;
    let tls_server = smt_tls::TlsServer::with_options(
        cert.chain_pem().as_bytes(),
        cert.key_pem().as_bytes(),
        None,
        &crate::pki::tls_options(key_log),
    )
    .map_err(|e| err(e.to_string()))?;
    server.set_tls_server(tls_server)?;
    client.set_tls_client(
        smt_tls::TlsClient::with_options(
            ca.cert_pem().as_bytes(),
            None,
            &crate::pki::tls_options(key_log),
        )
        .map_err(|e| err(e.to_string()))?,
    )?;
    Ok(())
}

const ECHO_THREADS: usize = 2;
const FLOOR_SIZE: usize = 64;

pub fn run(args: DemoArgs) -> Result<(), CliError> {
    let recording = Recording::open(&args.observe)?;
    let (client, server, how) = start_pair(&args, &recording)?;
    if !args.json {
        print_banner(&args, &client, &server, how);
    }
    // Measured first, in the same run: the machine's state now is what
    // SMT's figures below are compared with.
    let measured = udp_floor(FLOOR_SIZE, args.seconds / 2, ECHO_THREADS)
        .map_err(|e| CliError::Environment(format!("UDP floor measurement: {e}")))
        .and_then(|floor| Ok((floor, measure_sizes(&args, &client, &server)?)));
    if measured.is_err() {
        // The capture and trace of a failed run are completed too.
        client.close();
        server.close();
        recording.finish()?;
    }
    let (floor, rows) = measured?;
    let (cs, ss) = (client.stats()?, server.stats()?);
    if args.json {
        report::print_json(&json!({
            "client": client.local_addr().to_string(),
            "server": server.local_addr().to_string(),
            "keys": how,
            "socket": client.features().to_string(),
            "results": rows.iter().map(report::Row::to_json).collect::<Vec<_>>(),
            "udp_floor": {"size": FLOOR_SIZE, "p50_us": report::micros(floor)},
            "stats": {"client": report::stats_json(&cs), "server": report::stats_json(&ss)},
            "offload": {"client": offload_json(&client)?, "server": offload_json(&server)?},
        }));
    } else {
        let smt_p50 = rows.iter().find(|r| r.size == FLOOR_SIZE).map(|r| r.p50);
        print_floor(FLOOR_SIZE, floor, smt_p50);
        print_totals(&cs.total, &ss.total);
        for (name, ep) in [("client", &client), ("server", &server)] {
            if let Some(c) = ep.offload_counters()? {
                say!(
                    "offload engine, {name}: {}",
                    c.to_string().trim_end().replace('\n', ", ")
                );
            }
        }
    }
    client.close();
    server.close();
    recording.finish()?;
    report::all_succeeded(&rows)
}

/// The two endpoints, with keys (a TLS handshake to come, or installed
/// directly) and the server answering; and how the keys come, for the
/// banner.
fn start_pair(
    args: &DemoArgs,
    recording: &Recording,
) -> Result<(Endpoint, Endpoint, &'static str), CliError> {
    // Port 0 on both: in raw-IP mode too, where it makes each endpoint
    // pick a random SMT port, so two demos never share one.
    let any: SocketAddr = (std::net::Ipv4Addr::LOCALHOST, 0).into();
    let mut cfg = config(&args.transport, any)?;
    cfg.set_offload(args.offload.then(Default::default));
    for &size in &args.sizes {
        report::check_load("--sizes", size, args.concurrency, &cfg)?;
    }
    // The client's capture holds every datagram between the two.
    let mut server_cfg = cfg.clone();
    server_cfg.set_observe(recording.trace_only());
    cfg.set_observe(recording.observe());
    let server = Endpoint::bind(any, server_cfg)?;
    let client = Endpoint::bind(any, cfg)?;
    let how = if args.no_handshake {
        let (c2s, s2c) = (TrafficKey::random(ALGORITHM), TrafficKey::random(ALGORITHM));
        client.install_session(server.local_addr(), session(Role::Client, &c2s, &s2c))?;
        server.install_session(client.local_addr(), session(Role::Server, &c2s, &s2c))?;
        if recording.key_log_path().is_some() {
            // No handshake names the session: any id does (`smt dump`
            // finds the keys by trial decryption).
            if let Some(log) = recording.session_key_log()? {
                log.installed_keys(b"smt demo --no-handshake", &c2s, &s2c);
            }
        }
        "fresh keys installed directly"
    } else {
        throwaway_tls(&client, &server, recording.key_log_path())?;
        "TLS 1.3 handshake on the first call (throwaway CA, ECDSA P-256, X25519MLKEM768)"
    };
    spawn_echo(&server, ECHO_THREADS)?;
    Ok((client, server, how))
}

/// One row per size, printed as it is measured unless the output is JSON.
fn measure_sizes(
    args: &DemoArgs,
    client: &Endpoint,
    server: &Endpoint,
) -> Result<Vec<report::Row>, CliError> {
    if !args.json {
        report::print_header();
    }
    let mut rows = Vec::with_capacity(args.sizes.len());
    for &size in &args.sizes {
        let row = report::measure(
            client,
            server.local_addr(),
            Some(server),
            size,
            args.seconds,
            args.concurrency,
        )?;
        if !args.json {
            report::print_row(&row);
        }
        rows.push(row);
    }
    Ok(rows)
}

/// The offload engine's counters by name (`null` without offload).
fn offload_json(ep: &Endpoint) -> Result<serde_json::Value, CliError> {
    let counters = ep.offload_counters()?.map(|c| c.named());
    Ok(json!(counters
        .map(|c| c
            .into_iter()
            .collect::<std::collections::BTreeMap<_, _>>())))
}

fn print_totals(client: &Counters, server: &Counters) {
    say!(
        "handshakes: client {} completed / {} failed; server {} completed",
        client.handshakes.completed,
        client.handshakes.failed,
        server.handshakes.completed
    );
    report::print_stats("client", client);
    report::print_stats("server", server);
}

fn print_banner(args: &DemoArgs, client: &Endpoint, server: &Endpoint, how: &str) {
    say!(
        "SMT demo: client {} -> server {}, AES-128-GCM, {how}",
        client.local_addr(),
        server.local_addr()
    );
    say!("socket: {}", client.features());
    let half = args.seconds.as_secs_f64() / 2.0;
    say!(
        "each size: {half:.1} s of one-at-a-time RPCs (latency), then {half:.1} s with {} \
         outstanding (throughput); echoed and checked",
        args.concurrency
    );
}

/// The UDP floor and, if that size ran, SMT's median as a multiple of it.
fn print_floor(size: usize, floor: Duration, smt: Option<Duration>) {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    say_part!(
        "UDP floor ({size} B plain UDP ping-pong, same threads, this run): p50 {:.1} us",
        us(floor)
    );
    match smt {
        Some(p50) if !floor.is_zero() => say!(
            "; SMT {size} B p50 {:.1} us = {:.2}x the floor",
            us(p50),
            p50.as_secs_f64() / floor.as_secs_f64()
        ),
        _ => say!(),
    }
}
