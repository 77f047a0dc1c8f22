//! Reflection toward a spoofed address: each probe sends one spoofable
//! packet type (behind a PSK hello where the type needs a session) from a
//! fresh socket A, as if a spoofer had written A's address, and counts
//! every byte the server sends back to A until it has been quiet for a
//! while. The ratio is UDP payload bytes back ÷ UDP payload bytes sent.

use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use smt_proto::wire::{first_packet_len, PacketType};
use smt_relay::SplitMix64;

use crate::forge;

/// One probe's packets.
#[derive(Debug)]
pub struct Probe {
    pub name: String,
    pub datagrams: Vec<Vec<u8>>,
    /// The probe opens with a PSK hello (whose replies are in its figures).
    pub after_hello: bool,
}

/// What a probe sent and got back.
#[derive(Debug, Default)]
pub struct ProbeResult {
    pub name: String,
    pub after_hello: bool,
    pub sent: u64,
    pub sent_bytes: u64,
    pub back: u64,
    pub back_bytes: u64,
    /// Packets back by type (a datagram may hold several, coalesced).
    pub back_types: BTreeMap<String, u64>,
    /// Whether the server was still sending when the probe gave up.
    pub cut_off: bool,
}

impl ProbeResult {
    /// Bytes back ÷ bytes sent.
    pub fn ratio(&self) -> f64 {
        self.back_bytes as f64 / self.sent_bytes.max(1) as f64
    }
}

/// The probes against a PSK server on `port`.
pub fn psk_probes(rng: &mut SplitMix64, port: u16) -> Vec<Probe> {
    let mut out = Vec::new();
    let mut add = |name: &str, datagrams: Vec<Vec<u8>>| {
        out.push(Probe {
            name: name.to_string(),
            datagrams,
            after_hello: name.starts_with("PSK hello +"),
        })
    };
    let hello = |rng: &mut SplitMix64| forge::psk_hello(rng, port);
    add(
        "10 random datagrams",
        (0..10).map(|_| forge::random_datagram(rng)).collect(),
    );
    add(
        "10 DATA, no session",
        (0..10)
            .map(|i| forge::first_data(rng, port, 2 + 2 * i, 100_000, forge::MSS))
            .collect(),
    );
    add("PSK hello (HANDSHAKE kind 2)", vec![hello(rng)]);
    add(
        "0-RTT opening, kind 1 (refused)",
        vec![forge::other_opening(rng, port, forge::KIND_SMT_TICKET, 200)],
    );
    add(
        "10 HANDSHAKE continuations",
        (0..10)
            .map(|i| forge::handshake(port, forge::KIND_PSK_NONCE, 1000 * (i + 1), &[7; 100]))
            .collect(),
    );
    let with_hello = |rng: &mut SplitMix64, rest: Vec<Vec<u8>>| {
        let mut v = vec![hello(rng)];
        v.extend(rest);
        v
    };
    // A 2-packet message of which only the first packet arrives: the
    // server asks for the rest.
    let tiny = |rng: &mut SplitMix64, n: u64| -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| forge::first_data(rng, port, 2 + 2 * i, 50, 40))
            .collect()
    };
    let d = tiny(rng, 1);
    add(
        "PSK hello + 1 tiny DATA (1 of 2 packets)",
        with_hello(rng, d),
    );
    let d = tiny(rng, 200);
    add("PSK hello + 200 tiny DATA", with_hello(rng, d));
    let d = (0..10)
        .map(|i| forge::first_data(rng, port, 2 + 2 * i, forge::HUGE_MESSAGE, forge::MSS))
        .collect();
    add("PSK hello + 10 DATA of 64 MiB requests", with_hello(rng, d));
    for &ty in forge::control_types() {
        let d = (0..10)
            .map(|_| forge::forged_of_type(rng, port, ty))
            .collect();
        let name = format!("PSK hello + 10 {}", type_name(ty));
        add(&name, with_hello(rng, d));
    }
    out
}

/// The probe against a TLS server: one real ClientHello.
pub fn tls_probe(client_hello: Vec<Vec<u8>>) -> Probe {
    Probe {
        name: "TLS ClientHello (HANDSHAKE kind 0)".to_string(),
        datagrams: client_hello,
        after_hello: false,
    }
}

/// Sends `probe` to `server` from a new socket on `from` and counts what
/// comes back until `quiet` passes without a datagram (at most `limit`).
pub fn run(
    server: SocketAddr,
    from: SocketAddr,
    probe: &Probe,
    quiet: Duration,
    limit: Duration,
) -> Result<ProbeResult, String> {
    let socket =
        UdpSocket::bind(from).map_err(|e| format!("cannot bind probe socket {from}: {e}"))?;
    socket
        .set_read_timeout(Some(Duration::from_millis(20)))
        .map_err(|e| format!("cannot set a read timeout: {e}"))?;
    let mut r = ProbeResult {
        name: probe.name.clone(),
        after_hello: probe.after_hello,
        ..ProbeResult::default()
    };
    for d in &probe.datagrams {
        socket
            .send_to(d, server)
            .map_err(|e| format!("cannot send a probe datagram: {e}"))?;
        r.sent += 1;
        r.sent_bytes += d.len() as u64;
    }
    let start = Instant::now();
    let mut last = Instant::now();
    let mut buf = [0u8; 65_536];
    loop {
        if last.elapsed() >= quiet {
            break;
        }
        if start.elapsed() >= limit {
            r.cut_off = true;
            break;
        }
        match socket.recv_from(&mut buf) {
            Ok((n, _)) => {
                last = Instant::now();
                r.back += 1;
                r.back_bytes += n as u64;
                count_packets(&buf[..n], &mut r.back_types);
            }
            Err(e) if crate::flood::would_block(&e) => {}
            // ICMP errors and the like: nothing came back.
            Err(_) => {}
        }
    }
    Ok(r)
}

/// Counts the packets of a datagram by type, splitting coalesced packets
/// as a receiver does (`docs/protocol.md` § 2.1).
fn count_packets(mut datagram: &[u8], types: &mut BTreeMap<String, u64>) {
    while !datagram.is_empty() {
        let ty = smt_relay::attack::packet_type(datagram)
            .map_or_else(|| "unparsed".to_string(), type_name);
        *types.entry(ty).or_default() += 1;
        let len = first_packet_len(datagram, true).unwrap_or(datagram.len());
        datagram = datagram.get(len.max(1)..).unwrap_or_default();
    }
}

/// `GRANT`, `RESEND`, ... or the value in hex.
pub fn type_name(ty: PacketType) -> String {
    ty.name().map_or_else(|| format!("{ty}"), str::to_string)
}
