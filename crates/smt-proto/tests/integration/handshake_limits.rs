//! What one peer can make a server hold with HANDSHAKE packets: out-of-order
//! bytes of a handshake stream wait in one 32 KiB window, however many
//! overlapping chunks arrive (a map of chunks by offset once held each
//! datagram: about 4 GiB from one peer). A genuine handshake whose packets
//! arrive out of order completes alongside the flood. Sans-IO, on one
//! virtual instant.

// Tests pick their own starting instant; the core still takes `now`.
#![allow(clippy::disallowed_methods)]

use std::net::SocketAddr;
use std::time::Instant;

use smt_proto::wire::{Body, Packet, Repr, COMMON_HEADER_LEN};
use smt_proto::{
    Config, DropReason, Endpoint, Event, Handshake, HandshakeAcceptor, HandshakeError, SessionKeys,
};
use smt_relay::KeyKind;

const SERVER_PORT: u16 = 5000;
/// The reorder window: out-of-order bytes a handshake may hold.
const WINDOW: u64 = 32 * 1024;
/// Its memory bound: the window and one bit per byte.
const BOUND: u64 = WINDOW + WINDOW / 8;
/// The genuine client's first flight: several datagrams.
const HELLO_LEN: usize = 20_000;

fn client_addr() -> SocketAddr {
    "10.0.0.1:4000".parse().unwrap()
}

fn attacker_addr() -> SocketAddr {
    "10.6.6.6:7000".parse().unwrap()
}

fn server_addr() -> SocketAddr {
    format!("10.0.0.2:{SERVER_PORT}").parse().unwrap()
}

fn hello() -> Vec<u8> {
    (0..HELLO_LEN).map(|i| (i % 251) as u8).collect()
}

/// A scripted exchange that checks every byte it reads: it fails on bytes
/// other than `expects`, and has keys once it has said `says` and heard
/// all of `expects`. The initiator speaks first.
struct Script {
    says: Vec<u8>,
    expects: Vec<u8>,
    heard: usize,
    said: bool,
    initiator: bool,
    keys: Option<SessionKeys>,
}

impl Script {
    fn done_hearing(&self) -> bool {
        self.heard == self.expects.len()
    }
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Script")
    }
}

impl Handshake for Script {
    fn read(&mut self, data: &[u8]) -> Result<(), HandshakeError> {
        let end = self.heard + data.len();
        if self.expects.get(self.heard..end) != Some(data) {
            return Err(HandshakeError::Protocol("unexpected bytes".to_owned()));
        }
        self.heard = end;
        Ok(())
    }

    fn write(&mut self, out: &mut Vec<u8>) {
        if !self.said && (self.initiator || self.done_hearing()) {
            out.extend_from_slice(&self.says);
            self.said = true;
        }
    }

    fn take_keys(&mut self) -> Option<SessionKeys> {
        match self.said && self.done_hearing() {
            true => self.keys.take(),
            false => None,
        }
    }
}

struct Acceptor;

impl HandshakeAcceptor for Acceptor {
    fn accept(&mut self, _peer: SocketAddr) -> Option<Box<dyn Handshake>> {
        Some(Box::new(Script {
            says: b"ok".to_vec(),
            expects: hello(),
            heard: 0,
            said: false,
            initiator: false,
            keys: Some(KeyKind::Aes128(9).session().1),
        }))
    }
}

fn server() -> Endpoint {
    let mut ep = Endpoint::new(Config {
        local_port: SERVER_PORT,
        ..Config::default()
    })
    .unwrap();
    ep.set_handshake_acceptor(Box::new(Acceptor));
    ep
}

fn client(now: Instant) -> Endpoint {
    let mut ep = Endpoint::new(Config::default()).unwrap();
    let hs = Script {
        says: hello(),
        expects: b"ok".to_vec(),
        heard: 0,
        said: false,
        initiator: true,
        keys: Some(KeyKind::Aes128(9).session().0),
    };
    ep.connect(
        now,
        server_addr(),
        Box::new(hs),
        smt_proto::HandshakeKind::TLS13,
    );
    ep
}

/// A HANDSHAKE packet from the attacker: `len` bytes at stream `offset`,
/// of a stream that starts like the hello (so the server's handshake reads
/// on until the stream runs past the hello's end).
fn chunk(offset: u32, len: usize) -> Vec<u8> {
    let header = COMMON_HEADER_LEN + 12;
    let repr = Repr {
        // 0: "the sender did not know its port", accepted from any.
        src_port: 0,
        dst_port: SERVER_PORT,
        key_phase: false,
        id: 0,
        body: Body::Handshake {
            offset,
            ack: 0,
            len: len as u16,
            kind: smt_proto::HandshakeKind::TLS13,
            flags: 0,
        },
    };
    let mut buf = vec![0; header];
    repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
    buf.extend((0..len).map(|i| ((offset as usize + i) % 251) as u8));
    buf
}

/// Everything `from` has to send, in order.
fn drain(from: &mut Endpoint, now: Instant) -> Vec<Vec<u8>> {
    let mut buf = vec![0; 65_536];
    std::iter::from_fn(|| {
        from.poll_transmit(now, &mut buf)
            .map(|t| buf[..t.len].to_vec())
    })
    .collect()
}

fn held(server: &Endpoint) -> u64 {
    server.stats().usage.handshake_bytes
}

#[test]
fn overlapping_out_of_order_chunks_stay_within_one_window() {
    let now = Instant::now();
    let mut server = server();
    let mut client = client(now);
    let hello_packets = drain(&mut client, now);
    assert!(hello_packets.len() > 2, "the hello spans several datagrams");

    // The attacker opens a handshake, never sends byte 1, and floods the
    // window with overlapping chunks of up to 60 kB at scattered offsets;
    // one in eight starts past the window.
    server.handle_datagram(now, attacker_addr(), &chunk(0, 1));
    let mut too_far = 0;
    for k in 0..4000u32 {
        let offset = 2 + (k * 7919) % 37_000;
        let len = 1 + (k as usize * 104_729) % 60_000;
        // The window starts at byte 1, the first one missing.
        too_far += u64::from(u64::from(offset) > WINDOW);
        server.handle_datagram(now, attacker_addr(), &chunk(offset, len));
        assert!(held(&server) <= BOUND, "chunk {k}: {} held", held(&server));
        assert_eq!(server.stats().handshakes_failed, 0, "chunk {k}");
        if k == 2000 {
            // Halfway, the genuine hello arrives: its first packet (only
            // the start of a stream opens a handshake), then the rest in
            // reverse order.
            let (first, rest) = hello_packets.split_first().unwrap();
            server.handle_datagram(now, client_addr(), first);
            for p in rest.iter().rev() {
                server.handle_datagram(now, client_addr(), p);
            }
        }
    }
    assert!(too_far > 0);
    assert_eq!(held(&server), BOUND, "one window each: the attacker's");
    assert_eq!(server.stats().drops.get(DropReason::Handshake), too_far);

    // The genuine handshake completes despite the flood.
    for p in drain(&mut server, now) {
        client.handle_datagram(now, server_addr(), &p);
    }
    for p in drain(&mut client, now) {
        server.handle_datagram(now, client_addr(), &p);
    }
    let connected = |ep: &mut Endpoint| {
        std::iter::from_fn(|| ep.poll_event()).any(|e| matches!(e, Event::Connected { .. }))
    };
    assert!(connected(&mut client));
    assert!(connected(&mut server));
    assert_eq!(server.stats().handshakes_completed, 1);

    // The attacker's missing bytes at last: its stream runs past the
    // hello's end, the handshake fails and nothing is held any more.
    server.handle_datagram(now, attacker_addr(), &chunk(1, 60_000));
    assert_eq!(server.stats().handshakes_failed, 1);
    assert_eq!(held(&server), 0);
}

/// A server whose table holds `places` handshakes, with quotas `per_ip`
/// and `per_prefix`.
fn server_with(places: usize, per_ip: usize, per_prefix: usize) -> Endpoint {
    let mut ep = Endpoint::new(Config {
        local_port: SERVER_PORT,
        max_handshakes: places,
        max_handshakes_per_ip: per_ip,
        max_handshakes_per_prefix: per_prefix,
        ..Config::default()
    })
    .unwrap();
    ep.set_handshake_acceptor(Box::new(Acceptor));
    ep
}

/// The `i`th attacker address, each its own /24.
fn stranger(i: u32) -> SocketAddr {
    SocketAddr::from(([10, 100 + (i >> 16) as u8, (i >> 8) as u8, i as u8], 7000))
}

/// Runs the server's timers through `ticks` ticks of 1 ms, a peer that
/// trickles the next byte of its stream every 50 ms (well inside the
/// silence timeout) keeping each of `trickling` alive.
fn trickle(
    server: &mut Endpoint,
    now: &mut Instant,
    ticks: u32,
    trickling: &mut [(SocketAddr, u32)],
) {
    for t in 0..ticks {
        *now += std::time::Duration::from_millis(1);
        if t % 50 == 0 {
            for (addr, next) in trickling.iter_mut() {
                server.handle_datagram(*now, *addr, &chunk(*next, 1));
                *next += 1;
            }
        }
        server.handle_timeout(*now);
        let _ = drain(server, *now);
    }
}

#[test]
fn a_handshake_kept_alive_by_a_trickle_fails_at_its_deadline() {
    let mut now = Instant::now();
    let mut server = server();
    let mut trickling = vec![(attacker_addr(), 1u32)];
    server.handle_datagram(now, attacker_addr(), &chunk(0, 1));
    // 1.9 s of a byte every 50 ms: never silent for the 100 ms timeout.
    trickle(&mut server, &mut now, 1900, &mut trickling);
    assert_eq!(
        server.stats().handshakes_failed,
        0,
        "alive before its deadline"
    );
    trickle(&mut server, &mut now, 200, &mut trickling);
    let stats = server.stats();
    assert_eq!(stats.handshakes_failed, 1, "ended at the 2 s deadline");
    assert_eq!(stats.handshakes_past_deadline, 1);
}

#[test]
fn one_address_or_prefix_cannot_hold_the_handshake_table() {
    let now = Instant::now();
    // 64 places, quotas of 4 per address and 8 per /24 once half full.
    let mut server = server_with(64, 4, 8);
    // 32 strangers (the table half full), then one host opens 50 from one
    // address (other ports) and 50 from other addresses of its /24.
    for i in 0..32 {
        server.handle_datagram(now, stranger(i), &chunk(0, 1));
    }
    for port in 0..50u16 {
        let from = SocketAddr::from(([10, 7, 7, 7], 2000 + port));
        server.handle_datagram(now, from, &chunk(0, 1));
    }
    for host in 0..50u8 {
        let from = SocketAddr::from(([10, 7, 7, 100 + host], 3000));
        server.handle_datagram(now, from, &chunk(0, 1));
    }
    let stats = server.stats();
    assert_eq!(stats.handshakes_over_quota, 100 - 8, "{stats:?}");
    // A genuine client from elsewhere still gets a place.
    let mut client = client(now);
    for p in drain(&mut client, now) {
        server.handle_datagram(now, client_addr(), &p);
    }
    for p in drain(&mut server, now) {
        client.handle_datagram(now, server_addr(), &p);
    }
    assert_eq!(client.stats().handshakes_completed, 1);
}

#[test]
fn a_full_table_gives_the_oldest_trickled_handshake_to_a_newcomer() {
    let mut now = Instant::now();
    let mut server = server_with(16, 64, 64);
    let mut trickling: Vec<(SocketAddr, u32)> = (0..16).map(|i| (stranger(i), 1)).collect();
    for (addr, _) in &trickling {
        server.handle_datagram(now, *addr, &chunk(0, 1));
    }
    // A newcomer at once: every holder is younger than a genuine handshake
    // may take, so nobody is displaced and the newcomer is refused.
    server.handle_datagram(now, stranger(100), &chunk(0, 1));
    assert_eq!(server.stats().drops.get(DropReason::OverLimit), 1);
    assert_eq!(server.stats().handshakes_displaced, 0);
    // Half a second of trickling later, a genuine client displaces the
    // oldest holder and completes.
    trickle(&mut server, &mut now, 500, &mut trickling);
    let mut client = client(now);
    for p in drain(&mut client, now) {
        server.handle_datagram(now, client_addr(), &p);
    }
    for p in drain(&mut server, now) {
        client.handle_datagram(now, server_addr(), &p);
    }
    assert_eq!(client.stats().handshakes_completed, 1);
    assert!(server.stats().handshakes_displaced >= 1);
}
