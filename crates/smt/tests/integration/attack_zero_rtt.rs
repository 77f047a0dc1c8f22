//! 0-RTT first flights (ClientHello0 + the encrypted first request)
//! replayed by an on-path attacker: from new addresses while the ticket is
//! valid (the replay cache refuses the hello), after the ticket expired,
//! and after a server restart that issued a new ticket. The request is
//! executed once.
//!
//! Also: a restarted server handed the *same* ticket and static key (its
//! replay cache empty) refuses the replay because the hello is stamped
//! before its start; a spoofed ClientHello0 from an established client's
//! address does not replace that client's session.

use crate::attack_common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use attack_common::{bind, format_drops, Snapshot};
use smt::{Endpoint, ServerAcceptor};
use smt_handshake::{Freshness, KeyPool, ReplayCache, StaticKey, Ticket, ZeroRttServer};
use smt_relay::attack::Tally;
use smt_relay::{Direction, Relay};
use smt_tls::certs::Ca;

const NAME: &str = "server.smt.test";
/// The servers' clock skew bound (client and server share a clock here).
const SKEW: Duration = Duration::from_millis(50);

struct Issuer {
    ca: Ca,
    chain: Vec<Vec<u8>>,
    key: Vec<u8>,
}

impl Issuer {
    fn new() -> Self {
        let ca = Ca::generate("smt attack test CA").unwrap();
        let cert = ca.issue(&[NAME, "127.0.0.1"], false).unwrap();
        Self {
            chain: cert.chain_der().iter().map(|c| c.to_vec()).collect(),
            key: cert.key_der().to_vec(),
            ca,
        }
    }

    fn ticket(&self, key: &StaticKey, lifetime: Duration) -> Ticket {
        Ticket::issue(
            key,
            &self.chain,
            &self.key,
            NAME,
            SystemTime::now(),
            lifetime,
        )
        .unwrap()
    }
}

/// A 0-RTT server endpoint on `addr` for `ticket`, counting executions.
fn zero_rtt_server(
    addr: SocketAddr,
    key: StaticKey,
    ticket: Ticket,
    executions: &attack_common::Executions,
) -> Endpoint {
    // Same clock on both sides: a small skew bound lets a genuine client
    // call soon after a restart.
    let freshness = Freshness::new(SystemTime::now())
        .with_limits(Duration::from_secs(10), SKEW)
        .unwrap();
    let zero_rtt = ZeroRttServer::new(
        key,
        ticket,
        Arc::new(KeyPool::new(4)),
        ReplayCache::new(1000),
    )
    .unwrap()
    .with_freshness(freshness);
    let server = Endpoint::bind(addr, smt::EndpointConfig::default()).unwrap();
    server
        .set_handshake_acceptor(Box::new(ServerAcceptor::new(
            None,
            Some(Arc::new(zero_rtt)),
        )))
        .unwrap();
    let (s, ex) = (server.clone(), executions.clone());
    std::thread::spawn(move || {
        while let Ok(req) = s.accept() {
            *ex.lock().unwrap().entry(req.data().to_vec()).or_default() += 1;
            let _ = req.respond(b"done");
        }
    });
    // Hellos stamped before start + skew are refused (possible replays
    // across a restart): genuine clients wait that long.
    std::thread::sleep(SKEW);
    server
}

/// A client that makes one 0-RTT call through the relay; returns the
/// captured client → server datagrams (the first flight and the rest).
fn first_flight(issuer: &Issuer, ticket: &Ticket, relay: &Relay, fs: bool) -> Vec<Vec<u8>> {
    let client = bind();
    let verified = ticket
        .verify(issuer.ca.cert_der(), NAME, SystemTime::now())
        .unwrap();
    client
        .set_zero_rtt_ticket(relay.local_addr(), verified, fs)
        .unwrap();
    assert_eq!(
        client.call(relay.local_addr(), b"pay once").unwrap(),
        &b"done"[..]
    );
    relay
        .captured()
        .into_iter()
        .filter(|c| c.direction == Direction::ToServer)
        .map(|c| c.bytes)
        .collect()
}

/// Replays `flight` from `n` new addresses (each a route the relay opens
/// for a made-up client), so every copy reaches the server as a new peer.
fn replay_from_new_addresses(
    name: &str,
    relay: &Relay,
    server: &Endpoint,
    executions: &attack_common::Executions,
    flight: &[Vec<u8>],
    n: u16,
) -> Tally {
    // Only the server is attacked: an idle endpoint fills the client slot.
    let idle = bind();
    let before = Snapshot::take(server, &idle, executions);
    for k in 0..n {
        let fake: SocketAddr = format!("127.0.0.2:{}", 40_000 + k).parse().unwrap();
        relay.open_route(fake).unwrap();
        for d in flight {
            relay.inject(Direction::ToServer, fake, d).unwrap();
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    let after = Snapshot::take(server, &idle, executions);
    let executed = |s: &Snapshot| s.executions.values().map(|&v| u64::from(v)).sum::<u64>();
    let tally = Tally {
        name: name.to_owned(),
        attempts: u64::from(n),
        accepted: executed(&after) - executed(&before),
    };
    let drops = attack_common::drops_since(&before, &after);
    println!(
        "{tally}; handshakes failed {}; drops: {}",
        after.server.handshakes.failed - before.server.handshakes.failed,
        format_drops(&drops)
    );
    tally
}

/// A 0-RTT server for `ticket` behind the attacker's relay.
struct Scene {
    issuer: Issuer,
    ticket: Ticket,
    executions: attack_common::Executions,
    server: Endpoint,
    relay: Relay,
}

impl Scene {
    fn start(issuer: Issuer, key: StaticKey, lifetime: Duration) -> Self {
        let ticket = issuer.ticket(&key, lifetime);
        let executions = attack_common::Executions::default();
        let addr = "127.0.0.1:0".parse().unwrap();
        let server = zero_rtt_server(addr, key, ticket.clone(), &executions);
        let relay = attack_common::spawn_relay(server.local_addr(), None);
        Self {
            issuer,
            ticket,
            executions,
            server,
            relay,
        }
    }

    /// A genuine client's first flight through the relay (checked).
    fn first_flight(&self, fs: bool) -> Vec<Vec<u8>> {
        first_flight(&self.issuer, &self.ticket, &self.relay, fs)
    }

    /// Stops the server and starts another on its address.
    fn restart(&mut self, key: StaticKey, ticket: Ticket) {
        let addr = self.server.local_addr();
        self.server.close();
        self.server = zero_rtt_server(addr, key, ticket, &self.executions);
    }

    fn replay(&self, name: &str, flight: &[Vec<u8>]) -> Tally {
        let (relay, server) = (&self.relay, &self.server);
        replay_from_new_addresses(name, relay, server, &self.executions, flight, 20)
    }
}

#[test]
fn first_flight_replayed_within_the_ticket_lifetime_is_refused() {
    let scene = Scene::start(
        Issuer::new(),
        StaticKey::generate(),
        Duration::from_secs(600),
    );
    for fs in [false, true] {
        let flight = scene.first_flight(fs);
        let tally = scene.replay(&format!("zero-rtt-replay-within-lifetime-fs-{fs}"), &flight);
        assert_eq!(tally.accepted, 0, "{tally}");
    }
    // The two genuine calls, nothing more.
    let executions = scene.executions.lock().unwrap();
    assert_eq!(executions.get(&b"pay once"[..]), Some(&2));
}

#[test]
fn first_flight_replayed_after_the_ticket_expired_is_refused() {
    let issuer = Issuer::new();
    // A one-second ticket counts from the start of the current second:
    // issue it early in a second so the genuine call fits in its lifetime.
    while SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .subsec_millis()
        > 200
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    let scene = Scene::start(issuer, StaticKey::generate(), Duration::from_secs(1));
    let flight = scene.first_flight(false);
    std::thread::sleep(Duration::from_millis(2100));
    let tally = scene.replay("zero-rtt-replay-after-expiry", &flight);
    assert_eq!(tally.accepted, 0, "{tally}");
}

#[test]
fn first_flight_replayed_after_a_restart_with_a_new_ticket_is_refused() {
    let mut scene = Scene::start(
        Issuer::new(),
        StaticKey::generate(),
        Duration::from_secs(600),
    );
    let flight = scene.first_flight(false);
    // The documented rule: every start issues a new ticket (a new key).
    let key = StaticKey::generate();
    let ticket = scene.issuer.ticket(&key, Duration::from_secs(600));
    scene.restart(key, ticket);
    let tally = scene.replay("zero-rtt-replay-after-restart-new-ticket", &flight);
    assert_eq!(tally.accepted, 0, "{tally}");
}

/// The replay cache lives in memory, and an operator may hand a restarted
/// server the ticket and static key of the previous run: the replayed
/// hello is stamped before the new run started, so it is refused; a
/// genuine client's new hello is accepted.
#[test]
fn first_flight_replayed_after_a_restart_with_the_same_ticket_is_refused() {
    let key = StaticKey::generate();
    let saved = key.to_bytes();
    let mut scene = Scene::start(Issuer::new(), key, Duration::from_secs(600));
    let flight = scene.first_flight(false);
    let ticket = scene.ticket.clone();
    scene.restart(StaticKey::from_bytes(&saved).unwrap(), ticket);
    let tally = scene.replay("zero-rtt-replay-after-restart-same-ticket", &flight);
    assert_eq!(tally.accepted, 0, "{tally}");
    // A genuine client's new first flight is accepted (first_flight checks
    // the response), through a fresh route.
    scene.relay = attack_common::spawn_relay(scene.server.local_addr(), None);
    scene.first_flight(false);
    let executions = scene.executions.lock().unwrap();
    assert_eq!(executions.get(&b"pay once"[..]), Some(&2));
}

/// An attacker holding the (public) ticket sends its own ClientHello0s
/// from the victim's address, with and without forward secrecy, with
/// control packets under the SMT-key it derived; the victim's session is
/// not replaced and its calls keep working. (Without forward secrecy the
/// hello is refused; with it the server holds the new keys until a packet
/// under the fs-key — which needs the reply sent to the victim — arrives.)
#[test]
fn a_spoofed_hello_does_not_replace_an_established_session() {
    let scene = Scene::start(
        Issuer::new(),
        StaticKey::generate(),
        Duration::from_secs(600),
    );
    let (relay, server) = (&scene.relay, &scene.server);
    let victim = bind();
    let verified = scene
        .ticket
        .verify(scene.issuer.ca.cert_der(), NAME, SystemTime::now())
        .unwrap();
    victim
        .set_zero_rtt_ticket(relay.local_addr(), verified.clone(), false)
        .unwrap();
    assert_eq!(
        victim.call(relay.local_addr(), b"call 0").unwrap(),
        &b"done"[..]
    );
    let pool = KeyPool::new(1);
    let (mut attempts, mut failed) = (0, 0);
    for k in 1..=20u32 {
        // The attacker's own hello, built with the public ticket.
        let fs = k % 2 == 0;
        let (hello, smt_keys, _) = smt_handshake::ZeroRttClient::start(&verified, &pool, fs);
        let from = victim.local_addr();
        relay
            .inject(Direction::ToServer, from, &handshake_packet(&hello))
            .unwrap();
        // Packets under the SMT-key the attacker derived.
        for forged in attack_common::keyed_control_packets(&smt_keys) {
            relay.inject(Direction::ToServer, from, &forged).unwrap();
        }
        attempts += 1;
        std::thread::sleep(Duration::from_millis(5));
        let call = format!("call {k}");
        match victim.call(relay.local_addr(), call.as_bytes()) {
            Ok(r) if r == b"done"[..] => {}
            _ => failed += 1,
        }
    }
    let tally = Tally {
        name: "zero-rtt-spoofed-hello".to_owned(),
        attempts,
        accepted: failed,
    };
    println!(
        "{tally} (accepted = victim calls that failed); server handshakes failed {}",
        server.stats().unwrap().total.handshakes.failed
    );
    assert_eq!(tally.accepted, 0, "{tally}");
}

/// A HANDSHAKE packet (SMT-ticket kind) carrying `hello` at offset 0.
fn handshake_packet(hello: &[u8]) -> Vec<u8> {
    let mut packet = vec![0u8; 40];
    let repr = smt_proto::wire::Repr {
        src_port: 0,
        dst_port: 0,
        key_phase: false,
        id: 0,
        body: smt_proto::wire::Body::Handshake {
            offset: 0,
            ack: 0,
            len: hello.len() as u16,
            kind: smt_proto::HandshakeKind::SMT_TICKET,
            flags: 0,
        },
    };
    repr.emit(&mut smt_proto::wire::Packet::new_unchecked(&mut packet[..]));
    packet.truncate(repr.buffer_len());
    packet.extend_from_slice(hello);
    packet
}
