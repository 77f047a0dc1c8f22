//! Resource bounds under floods (issue #6, item 3), proved deterministically
//! on the sans-IO endpoint: an attacker who does not hold the session keys
//! floods the server with new message IDs, huge length claims, partial
//! messages it never completes and packets from new addresses. Each test
//! checks the bound from `Config`, the drop counter that enforced it and
//! what `Stats::usage` reports against an exact count, summed from the
//! endpoint's RPC tables (hence a test inside the crate). The keys are
//! [`TestKeys::Keyed`]: the attacker cannot make a packet that opens.

// The tests drive a virtual clock; `Instant::now` only picks its origin.
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::sim::{KeySource, TestKeys};
use crate::wire::{Body, DataHeader, Packet, PacketType, Repr, DATA_HEADER_LEN};
use crate::{
    Config, DropReason, Endpoint, Event, Handshake, HandshakeAcceptor, HandshakeError, RpcHandle,
    SessionKeys,
};

const SEGMENT: u32 = 65536;
const MSS: u16 = 1428;
/// The port of the harness's server (`Pair` checks it).
const SERVER_PORT: u16 = 5000;

fn attacker(n: u16) -> SocketAddr {
    SocketAddr::from(([10, 6, 6, 6], 7000 + n))
}

/// A DATA packet of request `id` as a sender without the keys forges it:
/// the header is plausible, the payload garbage.
fn forged(id: u64, message_len: u32, segment_offset: u32, segment_len: u32, index: u16) -> Vec<u8> {
    let wire_len = message_len + message_len / 16 + 4096;
    let h = DataHeader {
        message_len,
        message_wire_len: wire_len,
        segment_offset,
        segment_len,
        mss: u16::try_from(segment_len).unwrap_or(MSS).min(MSS),
        packet_index: index,
        retransmit: false,
        incoming: wire_len,
        priority: 0,
    };
    let payload = h.payload_len();
    let repr = Repr {
        src_port: 0,
        dst_port: SERVER_PORT,
        key_phase: false,
        id,
        body: Body::Data(h),
    };
    let mut buf = vec![0xa5; DATA_HEADER_LEN + payload];
    repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
    buf
}

/// A server holding session keys for `peers` attacker addresses (keys
/// the attacker never sees).
fn server(config: Config, peers: u16) -> Endpoint {
    let config = Config {
        local_port: SERVER_PORT,
        ..config
    };
    let mut server = Endpoint::new(config).unwrap();
    for n in 0..peers {
        let (_, keys) = TestKeys::Keyed(u64::from(n) + 1).session();
        server.install_session(attacker(n), keys).unwrap();
    }
    server
}

/// What partially received messages really hold, summed from the
/// endpoint's own exact count.
fn exact_bytes(server: &Endpoint) -> u64 {
    server.incoming_buffered_bytes() as u64
}

fn drain(server: &mut Endpoint, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0; 2048];
    while let Some(t) = server.poll_transmit(now, &mut buf) {
        out.push(buf[..t.len].to_vec());
    }
    out
}

#[test]
fn a_flood_of_new_ids_stops_at_max_incoming_per_peer() {
    let config = Config {
        max_incoming_per_peer: 16,
        max_incoming_total: 24,
        ..Config::default()
    };
    let mut server = server(config, 2);
    let now = Instant::now();
    for n in 0..2 {
        for i in 0..100 {
            server.handle_datagram(now, attacker(n), &forged(2 * i + 2, 5000, 0, 5000, 0));
        }
    }
    assert_eq!(server.server_rpcs(), 24, "the total bound");
    let partial = |n| {
        server
            .peer_stats(attacker(n))
            .unwrap()
            .usage
            .partial_requests
    };
    let (a, b) = (partial(0), partial(1));
    assert_eq!(a + b, 24);
    assert!(a <= 16 && b <= 16, "{a} and {b}: the per-peer bound");
    // The second peer was not locked out by the first, which had taken its
    // whole per-peer share: the heavier peer's partials made room.
    assert!(b >= 8, "{a} and {b}");
    assert!(server.stats().partial_evicted > 0);
    assert_eq!(server.stats().usage.partial_requests, 24);
    assert!(server.stats().usage.incoming_bytes >= exact_bytes(&server));
}

#[test]
fn huge_length_claims_allocate_only_what_arrives() {
    let mut server = server(Config::default(), 1);
    let now = Instant::now();
    // 64 MiB claimed; one 1428-byte packet arrives.
    server.handle_datagram(now, attacker(0), &forged(2, 60 << 20, 0, SEGMENT, 0));
    assert_eq!(server.server_rpcs(), 1);
    let held = exact_bytes(&server);
    assert!(
        held < 2 * u64::from(SEGMENT),
        "{held} bytes held for one packet"
    );
    assert_eq!(server.stats().usage.incoming_bytes, held);
}

#[test]
fn per_peer_and_total_bytes_stay_under_their_bounds() {
    let config = Config {
        max_message_len: 1 << 20,
        max_buffered_per_peer: 2 << 20,
        max_buffered_total: 3 << 20,
        ..Config::default()
    };
    let (per_peer, total) = (
        config.max_buffered_per_peer as u64,
        config.max_buffered_total as u64,
    );
    let mut server = server(config, 3);
    let now = Instant::now();
    // Each message: one packet in each of its first segments that the
    // unscheduled window covers; 200 messages per peer.
    for n in 0..3 {
        for i in 0..200 {
            for seg in 0..2 {
                let d = forged(2 * i + 2, 1 << 20, seg * 20_000, 20_000, 0);
                server.handle_datagram(now, attacker(n), &d);
            }
        }
    }
    let usage = server.stats().usage;
    assert!(usage.incoming_bytes <= total, "{usage:?}");
    assert!(exact_bytes(&server) <= usage.incoming_bytes);
    for n in 0..3 {
        let peer = server.peer_stats(attacker(n)).unwrap().usage;
        assert!(peer.incoming_bytes <= per_peer, "peer {n}: {peer:?}");
    }
    assert!(server.stats().drops.get(DropReason::OverLimit) > 0);
    assert!(usage.peak_incoming_bytes <= total);
}

#[test]
fn one_byte_segments_are_charged_their_bookkeeping() {
    let config = Config {
        max_message_len: 1 << 20,
        max_buffered_per_peer: 1 << 20,
        max_buffered_total: 1 << 20,
        ..Config::default()
    };
    let mut server = server(config, 1);
    let now = Instant::now();
    let mut stored = 0u64;
    for id in 0..50u64 {
        for off in 0..20_000u32 {
            let h = DataHeader {
                message_len: 100_000,
                message_wire_len: 110_000,
                segment_offset: off,
                segment_len: 1,
                mss: 1,
                packet_index: 0,
                retransmit: false,
                incoming: 110_000,
                priority: 0,
            };
            let repr = Repr {
                src_port: 0,
                dst_port: 0,
                key_phase: false,
                id: 2 * id + 2,
                body: Body::Data(h),
            };
            let mut buf = vec![7; DATA_HEADER_LEN + 1];
            repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
            let before = server.stats().drops.total();
            server.handle_datagram(now, attacker(0), &buf);
            stored += u64::from(server.stats().drops.total() == before);
        }
    }
    let usage = server.stats().usage;
    assert!(usage.incoming_bytes <= 1 << 20, "{usage:?}");
    // Far fewer one-byte segments than bytes allowed: each is charged
    // what it costs.
    assert!(stored < (1 << 20) / 64, "{stored} one-byte segments stored");
}

#[test]
fn a_partial_message_expires_even_if_its_packets_keep_coming_again() {
    let config = Config::default();
    // Nothing of it authenticates: a handshake's budget, not an RPC's.
    let abort = u64::from(config.handshake_abort_ticks);
    let tick = config.tick;
    let mut server = server(config, 1);
    let start = Instant::now();
    let packet = forged(2, 100_000, 0, SEGMENT, 0);
    server.handle_datagram(start, attacker(0), &packet);
    let mut now = start;
    let mut freed_at = None;
    for t in 1..=abort + 1 {
        now += tick;
        server.handle_timeout(now);
        drain(&mut server, now);
        if server.server_rpcs() == 0 {
            freed_at = Some(t);
            break;
        }
        // The attacker repeats its packet: no progress, no new life.
        server.handle_datagram(now, attacker(0), &packet);
    }
    assert_eq!(
        freed_at,
        Some(abort),
        "freed after handshake_abort_ticks despite the repeats"
    );
    now += tick;
    server.handle_timeout(now);
    assert_eq!(exact_bytes(&server), 0);
    assert_eq!(
        server.stats().usage.incoming_bytes,
        0,
        "recounted at the tick"
    );
    assert_eq!(server.stats().usage.partial_requests, 0);
}

/// Grant offsets the server sent for message `id`.
fn grants(datagrams: &[Vec<u8>], id: u64) -> Vec<u32> {
    datagrams
        .iter()
        .filter_map(|d| {
            let p = Packet::new_checked(&d[..d.len().checked_sub(16)?]).ok()?;
            if p.packet_type() != PacketType::GRANT {
                return None;
            }
            match Repr::parse(&p).ok()? {
                Repr {
                    id: i,
                    body: Body::Grant { offset, .. },
                    ..
                } if i == id => Some(offset),
                _ => None,
            }
        })
        .collect()
}

#[test]
fn grants_stop_max_unopened_bytes_past_the_authenticated_prefix() {
    let config = Config {
        max_unopened_bytes: 200_000,
        ..Config::default()
    };
    let ceiling = config.max_unopened_bytes;
    let mut server = server(config, 1);
    let now = Instant::now();
    let message_len = 8 << 20;
    // Everything the server grants, except the first packet: segment 0
    // never completes, so nothing ever authenticates.
    let mut granted = 40_000u32;
    let mut sent_up_to = 1428u32;
    loop {
        while sent_up_to < granted {
            let seg = sent_up_to / SEGMENT * SEGMENT;
            let index = ((sent_up_to - seg) / u32::from(MSS)) as u16;
            let d = forged(2, message_len, seg, SEGMENT, index);
            server.handle_datagram(now, attacker(0), &d);
            sent_up_to = seg + (u32::from(index) + 1) * u32::from(MSS);
            sent_up_to = sent_up_to.min(seg + SEGMENT);
        }
        let more = grants(&drain(&mut server, now), 2);
        match more.into_iter().max() {
            Some(g) if g > granted => granted = g,
            _ => break,
        }
    }
    assert!(
        granted <= ceiling,
        "granted {granted} past a {ceiling}-byte ceiling"
    );
    assert!(granted > 100_000, "grants did run ahead: {granted}");
    let held = exact_bytes(&server);
    assert!(
        held <= u64::from(ceiling) + 2 * u64::from(SEGMENT),
        "{held}"
    );
}

#[test]
fn resolver_sessions_are_capped() {
    let config = Config {
        max_resolved_sessions: 8,
        ..Config::default()
    };
    let mut server = Endpoint::new(Config {
        local_port: SERVER_PORT,
        ..config
    })
    .unwrap();
    server.set_key_resolver(Box::new(|peer: SocketAddr| {
        Some(TestKeys::Keyed(u64::from(peer.port())).session().1)
    }));
    let now = Instant::now();
    for n in 0..20 {
        server.handle_datagram(now, attacker(n), &forged(2, 100, 0, 200, 0));
    }
    assert_eq!(server.stats().usage.sessions, 8);
    assert_eq!(server.stats().drops.get(DropReason::OverLimit), 12);
    // A removed one frees its place.
    server.remove_session(attacker(0));
    server.handle_datagram(now, attacker(30), &forged(2, 100, 0, 200, 0));
    assert!(server.peer_stats(attacker(30)).is_some());
}

/// A client and a server joined by an instant, lossless wire; what the
/// server sends to anyone else (the attackers) is discarded.
struct Wire {
    client: Endpoint,
    server: Endpoint,
    client_addr: SocketAddr,
    server_addr: SocketAddr,
    now: Instant,
    responses: HashMap<RpcHandle, Vec<u8>>,
    failures: u64,
    executions: u64,
}

impl Wire {
    fn new(server_config: Config) -> Self {
        let mut wire = Self::without_session(server_config);
        let (ck, sk) = TestKeys::Keyed(9).session();
        wire.client.install_session(wire.server_addr, ck).unwrap();
        wire.server.install_session(wire.client_addr, sk).unwrap();
        wire
    }

    fn without_session(server_config: Config) -> Self {
        let client_addr: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        let server_addr: SocketAddr = format!("10.0.0.2:{SERVER_PORT}").parse().unwrap();
        let client = Endpoint::new(Config::default()).unwrap();
        let server = Endpoint::new(Config {
            local_port: SERVER_PORT,
            ..server_config
        })
        .unwrap();
        Self {
            client,
            server,
            client_addr,
            server_addr,
            now: Instant::now(),
            responses: HashMap::new(),
            failures: 0,
            executions: 0,
        }
    }

    /// Moves every datagram and event until both sides are quiet.
    fn settle(&mut self) {
        let mut buf = vec![0; 2048];
        loop {
            let mut moved = false;
            while let Some(t) = self.client.poll_transmit(self.now, &mut buf) {
                self.server
                    .handle_datagram(self.now, self.client_addr, &buf[..t.len]);
                moved = true;
            }
            while let Some(t) = self.server.poll_transmit(self.now, &mut buf) {
                if t.destination == self.client_addr {
                    self.client
                        .handle_datagram(self.now, self.server_addr, &buf[..t.len]);
                }
                moved = true;
            }
            while let Some(e) = self.server.poll_event() {
                if let Event::Request { rpc, data } = e {
                    self.executions += 1;
                    self.server.send_response(self.now, rpc, &data).unwrap();
                    moved = true;
                }
            }
            while let Some(e) = self.client.poll_event() {
                match e {
                    Event::Response { rpc, data } => {
                        self.responses.insert(rpc, data);
                    }
                    Event::Failed { .. } => self.failures += 1,
                    _ => {}
                }
            }
            if !moved {
                return;
            }
        }
    }

    /// Advances the clock by `d`, firing due timers.
    fn advance(&mut self, d: Duration) {
        self.now += d;
        for ep in [&mut self.client, &mut self.server] {
            if ep.poll_timeout().is_some_and(|t| t <= self.now) {
                ep.handle_timeout(self.now);
            }
        }
        self.settle();
    }
}

#[test]
fn a_legitimate_client_is_served_during_a_flood() {
    let config = Config {
        max_message_len: 1 << 20,
        max_buffered_per_peer: 2 << 20,
        max_buffered_total: 4 << 20,
        max_incoming_per_peer: 64,
        max_incoming_total: 128,
        ..Config::default()
    };
    let total = config.max_buffered_total as u64;
    let mut wire = Wire::new(config);
    for n in 0..4 {
        let (_, keys) = TestKeys::Keyed(100 + u64::from(n)).session();
        wire.server.install_session(attacker(n), keys).unwrap();
    }
    let mut calls = Vec::new();
    let mut next_id = [2u64; 4];
    for round in 0..300u64 {
        // Every 100 us, each attacker opens 8 new messages claiming 1 MiB
        // and sends a packet into each of their first two segments.
        for n in 0..4u16 {
            for _ in 0..8 {
                let id = next_id[usize::from(n)];
                next_id[usize::from(n)] += 2;
                for seg in [0, SEGMENT] {
                    let d = forged(id, 1 << 20, seg, SEGMENT, 0);
                    wire.server.handle_datagram(wire.now, attacker(n), &d);
                }
            }
        }
        let size = [64usize, 4000, 100_000][round as usize % 3];
        let mut req = vec![round as u8; size];
        req[..8].copy_from_slice(&round.to_le_bytes());
        let h = wire
            .client
            .send_request(wire.now, wire.server_addr, &req)
            .unwrap();
        calls.push((h, req));
        wire.settle();
        wire.advance(Duration::from_micros(100));
        let usage = wire.server.stats().usage;
        assert!(usage.incoming_bytes <= total, "round {round}: {usage:?}");
    }
    for _ in 0..2000 {
        wire.advance(Duration::from_micros(100));
    }
    for (h, req) in &calls {
        assert_eq!(
            wire.responses.get(h),
            Some(req),
            "call {h:?} during the flood"
        );
    }
    let s = wire.server.stats();
    assert_eq!(wire.failures, 0);
    assert_eq!(wire.executions, 300);
    assert!(
        s.drops.get(DropReason::OverLimit) > 0,
        "the flood hit the bounds"
    );
    assert!(s.usage.peak_incoming_bytes <= total, "{:?}", s.usage);
}

/// A toy handshake: each side sends one greeting; keys once it heard the
/// other's.
#[derive(Debug)]
struct Greeting {
    keys: Option<SessionKeys>,
    sent: bool,
    heard: bool,
}

impl Greeting {
    fn new(keys: SessionKeys) -> Box<Self> {
        Box::new(Self {
            keys: Some(keys),
            sent: false,
            heard: false,
        })
    }
}

impl Handshake for Greeting {
    fn read(&mut self, _data: &[u8]) -> Result<(), HandshakeError> {
        self.heard = true;
        Ok(())
    }

    fn write(&mut self, out: &mut Vec<u8>) {
        if !self.sent {
            out.extend_from_slice(b"hello");
            self.sent = true;
        }
    }

    fn take_keys(&mut self) -> Option<SessionKeys> {
        match self.heard && self.sent {
            true => self.keys.take(),
            false => None,
        }
    }
}

struct GreetingAcceptor;

impl HandshakeAcceptor for GreetingAcceptor {
    fn accept(&mut self, _peer: SocketAddr) -> Option<Box<dyn Handshake>> {
        Some(Greeting::new(TestKeys::Keyed(21).session().1))
    }
}

#[test]
fn idle_handshake_sessions_are_forgotten_and_installed_ones_kept() {
    let config = Config {
        session_idle_timeout: Some(Duration::from_secs(60)),
        ..Config::default()
    };
    let mut wire = Wire::without_session(config);
    wire.server
        .set_handshake_acceptor(Box::new(GreetingAcceptor));
    // An installed session the sweep must leave alone.
    let (_, keys) = TestKeys::Keyed(3).session();
    wire.server.install_session(attacker(0), keys).unwrap();
    let hs = Greeting::new(TestKeys::Keyed(21).session().0);
    let (now, server_addr) = (wire.now, wire.server_addr);
    wire.client
        .connect(now, server_addr, hs, crate::HandshakeKind::TLS13);
    wire.settle();
    wire.advance(Duration::from_millis(1));
    assert!(
        wire.client.peer_stats(wire.server_addr).is_some(),
        "connected"
    );
    let h = wire
        .client
        .send_request(wire.now, wire.server_addr, b"ping")
        .unwrap();
    wire.settle();
    assert_eq!(
        wire.responses.get(&h).map(Vec::as_slice),
        Some(&b"ping"[..])
    );
    // The finished handshakes linger handshake_abort_ticks for late copies.
    for _ in 0..wire.server.config().handshake_abort_ticks + 50 {
        wire.advance(Duration::from_millis(1));
    }
    // Ten idle minutes, in steps the sweep (every 15 s) can see.
    for _ in 0..40 {
        wire.advance(Duration::from_secs(15));
    }
    assert!(
        wire.server.peer_stats(wire.client_addr).is_none(),
        "server forgot it"
    );
    assert!(
        wire.client.peer_stats(wire.server_addr).is_none(),
        "client forgot it"
    );
    assert_eq!(wire.server.stats().sessions_evicted, 1);
    assert!(
        wire.server.peer_stats(attacker(0)).is_some(),
        "installed session kept"
    );
    assert_eq!(wire.server.stats().usage.sessions, 1);
}

#[test]
fn handshakes_in_progress_are_capped() {
    let config = Config {
        max_handshakes: 4,
        ..Config::default()
    };
    let mut wire = Wire::without_session(config);
    wire.server
        .set_handshake_acceptor(Box::new(GreetingAcceptor));
    let hs = Greeting::new(TestKeys::Keyed(21).session().0);
    let (now, server_addr) = (wire.now, wire.server_addr);
    wire.client
        .connect(now, server_addr, hs, crate::HandshakeKind::TLS13);
    let mut buf = vec![0; 2048];
    let t = wire.client.poll_transmit(now, &mut buf).unwrap();
    for n in 0..10 {
        wire.server.handle_datagram(now, attacker(n), &buf[..t.len]);
    }
    assert_eq!(
        wire.server.stats().usage.handshakes,
        0,
        "gauge set at ticks"
    );
    // The six past the table's four places: finished handshakes (the
    // greeting installs keys at once) kept only to answer late copies give
    // their places to newcomers.
    let stats = wire.server.stats();
    eprintln!(
        "dropped {}, displaced {}",
        stats.drops.get(DropReason::OverLimit),
        stats.handshakes_displaced
    );
    assert_eq!(
        stats.drops.get(DropReason::OverLimit) + stats.handshakes_displaced,
        6
    );
    wire.advance(Duration::from_millis(1));
    assert_eq!(wire.server.stats().usage.handshakes, 4);
}
