// A test binary of its own, not a module of tests/integration (issue #27):
// measures the process's CPU time (`/proc/self/stat`) while it should be
// idle: other tests' threads in the same process would count.
//! A flood of openings from addresses where nothing listens (issue #22
//! item 1). The server answers each (a RETRY or a PSK reply), and each
//! answer comes back as an ICMP port unreachable queued on the server
//! socket's error queue (`IP_RECVERR`; on loopback the kernel does not
//! rate-limit them). Those entries count against the socket's receive
//! buffer, and while any is queued the socket polls as failed (`POLLERR`):
//! a server that stops draining them stops receiving and spins. Here the
//! server must drain them, keep serving its legitimate client, leave no
//! thread busy, and fail nothing of anyone else's.
//!
//! Real UDP sockets on loopback, no privileges: the "spoofed" sources are
//! real sockets connected elsewhere, which the kernel does not match to
//! datagrams from the server, so each answer draws a port unreachable as
//! if nothing listened there.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use smt::keys::{AeadAlgorithm, PskClient};
use smt::{Endpoint, EndpointConfig, ServerAcceptor};
use smt_relay::SplitMix64;

const MASTER: &[u8] = &[0x3c; 32];
const ALG: AeadAlgorithm = AeadAlgorithm::Aes128Gcm;
/// Openings sent from ports closed at once: several times the 64 errors
/// the driver used to read per signal, and enough to fill the small
/// receive buffer below many times over.
const OPENINGS: usize = 3000;
/// Floods, one after another.
const ROUNDS: usize = 5;

/// A PSK server with a small receive buffer (256 KiB: a few hundred queued
/// ICMP errors fill it) answering every request with its own bytes.
fn psk_server() -> Endpoint {
    let mut config = EndpointConfig::default();
    config.socket_mut().set_recv_buffer(256 << 10);
    let server = Endpoint::bind("127.0.0.1:0".parse().unwrap(), config).unwrap();
    let acceptor = ServerAcceptor::new(None, None).with_psk(MASTER, ALG);
    server.set_handshake_acceptor(Box::new(acceptor)).unwrap();
    let accepter = server.clone();
    std::thread::spawn(move || {
        while let Ok(req) = accepter.accept() {
            let data = req.data().to_vec();
            let _ = req.respond(data);
        }
    });
    server
}

/// A PskHello opening (kind 2, the nonce exchange) to `port`, with source
/// port 0 ("the sender does not know its port"), as a stranger sends it.
fn psk_hello(rng: &mut SplitMix64, port: u16) -> Vec<u8> {
    use smt_proto::wire::{Body, Packet, Repr};
    let mut hello = [0u8; 34];
    hello[0] = 1;
    hello[1] = 1;
    rng.fill(&mut hello[2..]);
    let repr = Repr {
        src_port: 0,
        dst_port: port,
        key_phase: false,
        id: 0,
        body: Body::Handshake {
            offset: 0,
            ack: 0,
            len: hello.len() as u16,
            kind: smt_proto::HandshakeKind::PSK_NONCE,
            flags: 0,
        },
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Packet::new_unchecked(&mut out[..]));
    out.extend_from_slice(&hello);
    out
}

/// `n` sockets that send to the server but take nothing from it: each is
/// connected to another port (the discard port, where nothing listens), so
/// the kernel answers the server's datagrams to it with a port unreachable.
fn deaf_sockets(n: usize) -> Vec<UdpSocket> {
    (0..n)
        .map(|_| {
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            s.connect("127.0.0.1:9").unwrap();
            s
        })
        .collect()
}

/// Sends a hello to `server` from each socket, as fast as it can.
fn hellos_from(sockets: &[UdpSocket], server: SocketAddr) {
    let mut rng = SplitMix64::new(22);
    for s in sockets {
        let _ = s.send_to(&psk_hello(&mut rng, server.port()), server);
    }
}

/// CPU seconds this process has used (user + system), from
/// `/proc/self/stat` in clock ticks of 1/100 s.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // The command name (field 2) may hold spaces; fields count from after
    // its closing parenthesis.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields[11].parse().unwrap();
    let stime: f64 = fields[12].parse().unwrap();
    (utime + stime) / 100.0
}

fn psk_client(server: &Endpoint) -> Endpoint {
    let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default()).unwrap();
    client.set_psk_client(PskClient::new(MASTER, ALG)).unwrap();
    let reply = client.call(server.local_addr(), b"before").unwrap();
    assert_eq!(&reply[..], b"before");
    client
}

/// Calls until one succeeds, for at most `limit`; returns how long it
/// took. The limit is generous (a loaded machine); what fails before the
/// fix fails for good.
fn first_success(client: &Endpoint, server: SocketAddr, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Ok(reply) = client.call_with(server, b"after", Duration::from_millis(500)) {
            assert_eq!(&reply[..], b"after");
            return Some(start.elapsed());
        }
    }
    None
}

#[test]
fn a_flood_of_icmp_errors_neither_stops_reads_nor_leaves_a_thread_spinning() {
    let server = psk_server();
    let client = psk_client(&server);
    // Whether a flood wedged the old driver depended on a race (a send
    // taking the socket's error signal while errors were queued): five
    // floods made it all but certain.
    for round in 0..ROUNDS {
        let deaf = deaf_sockets(OPENINGS);
        hellos_from(&deaf, server.local_addr());
        let took = first_success(&client, server.local_addr(), Duration::from_secs(20))
            .unwrap_or_else(|| panic!("flood {round}: the legitimate client is not served"));
        eprintln!("flood {round}: the first call after it succeeded after {took:?}");
    }
    // Let stragglers settle, then the process should be idle: a spinning
    // driver thread would use most of a CPU second per second.
    std::thread::sleep(Duration::from_millis(500));
    let (cpu0, wall0) = (cpu_seconds(), Instant::now());
    std::thread::sleep(Duration::from_secs(2));
    let busy = (cpu_seconds() - cpu0) / wall0.elapsed().as_secs_f64();
    eprintln!("process CPU while idle: {:.0} %", busy * 100.0);
    assert!(
        busy < 0.25,
        "after the flood a thread stays busy: {:.0} % of a CPU",
        busy * 100.0
    );
    let stats = server.stats().unwrap().total;
    eprintln!(
        "server: {} unreachable reports, {} retries sent",
        stats.packets.unreachable_reports, stats.handshakes.retries_sent
    );
    assert!(
        stats.packets.unreachable_reports > 64,
        "the errors were read: {stats:?}"
    );
    // Everyone else's calls still work.
    for i in 0..20u8 {
        let reply = client.call(server.local_addr(), &[i; 100]).unwrap();
        assert_eq!(&reply[..], &[i; 100]);
    }
}
