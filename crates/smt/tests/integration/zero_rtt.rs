//! 0-RTT sessions with SMT-tickets over real sockets (seed 001 §4.5.2):
//! the first request travels in the first flight, with and without forward
//! secrecy; a replayed first flight executes nothing; tickets distributed
//! through DNS; a new client on a port an earlier session used is served,
//! whatever both sessions' kinds.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use smt::{Endpoint, EndpointConfig, ServerAcceptor};
use smt_handshake::{KeyPool, ReplayCache, StaticKey, Ticket, VerifiedTicket, ZeroRttServer};
use smt_relay::relay::{Direction, Relay, RelayConfig};
use smt_tls::certs::Ca;

type Executions = Arc<Mutex<HashMap<Vec<u8>, u32>>>;

struct Setup {
    server: Endpoint,
    ticket: Ticket,
    ca: Ca,
    executions: Executions,
}

fn setup(name: &str) -> Setup {
    let ca = Ca::generate(&format!("smt 0-rtt test CA {name}")).unwrap();
    let cert = ca.issue(&["server.smt.test", "127.0.0.1"], false).unwrap();
    let static_key = StaticKey::generate();
    let ticket = Ticket::issue(
        &static_key,
        &cert.chain_der(),
        cert.key_der(),
        "server.smt.test",
        SystemTime::now(),
        Duration::from_secs(600),
    )
    .unwrap();
    let zero_rtt = ZeroRttServer::new(
        static_key,
        ticket.clone(),
        Arc::new(KeyPool::new(8)),
        ReplayCache::new(10_000),
    )
    .unwrap();
    let tls = smt_tls::TlsServer::new(cert.chain_pem().as_bytes(), cert.key_pem().as_bytes(), None)
        .unwrap();
    let server = Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default()).unwrap();
    server
        .set_handshake_acceptor(Box::new(ServerAcceptor::new(
            Some(tls),
            Some(Arc::new(zero_rtt)),
        )))
        .unwrap();
    let executions: Executions = Arc::default();
    let (s, ex) = (server.clone(), executions.clone());
    std::thread::spawn(move || {
        while let Ok(req) = s.accept() {
            *ex.lock().unwrap().entry(req.data().to_vec()).or_default() += 1;
            let up = req.data().to_ascii_uppercase();
            let _ = req.respond(&up);
        }
    });
    // A new server refuses hellos stamped before its start plus the clock
    // skew bound (they could be replays from a previous run).
    std::thread::sleep(smt_handshake::Freshness::DEFAULT_MAX_CLOCK_SKEW);
    Setup {
        server,
        ticket,
        ca,
        executions,
    }
}

fn verified(s: &Setup) -> VerifiedTicket {
    s.ticket
        .verify(s.ca.cert_der(), "server.smt.test", SystemTime::now())
        .unwrap()
}

fn client() -> Endpoint {
    Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default()).unwrap()
}

#[test]
fn zero_rtt_without_forward_secrecy_keeps_the_smt_key() {
    let s = setup("a");
    let c = client();
    c.set_zero_rtt_ticket(s.server.local_addr(), verified(&s), false)
        .unwrap();
    for i in 0..10 {
        let msg = format!("0-rtt {i}");
        assert_eq!(
            c.call(s.server.local_addr(), msg.as_bytes()).unwrap(),
            msg.to_ascii_uppercase().as_bytes()
        );
    }
    let stats = c.stats().unwrap().total;
    let peer = c.peer_stats(s.server.local_addr()).unwrap();
    assert_eq!(stats.handshakes.completed, 1);
    assert_eq!(
        peer.unwrap().key_epoch,
        0,
        "no forward secrecy: the SMT-key stays"
    );
    assert_eq!(s.server.stats().unwrap().total.handshakes.completed, 1);
}

#[test]
fn zero_rtt_with_forward_secrecy_switches_to_the_fs_key() {
    let s = setup("b");
    let c = client();
    c.set_zero_rtt_ticket(s.server.local_addr(), verified(&s), true)
        .unwrap();
    assert_eq!(
        c.call(s.server.local_addr(), b"first flight").unwrap(),
        &b"FIRST FLIGHT"[..]
    );
    // After the server's reply, new RPCs use the fs-key (key epoch 1).
    for i in 0..10 {
        let msg = format!("forward secret {i}");
        assert_eq!(
            c.call(s.server.local_addr(), msg.as_bytes()).unwrap(),
            msg.to_ascii_uppercase().as_bytes()
        );
    }
    let peer = c.peer_stats(s.server.local_addr()).unwrap().unwrap();
    assert!(peer.counters.rpcs.completed >= 11);
    assert_eq!(peer.key_epoch, 1, "the session moved to the fs-key");
    assert_eq!(s.executions.lock().unwrap().len(), 11);
}

#[test]
fn replayed_first_flight_executes_nothing() {
    let s = setup("c");
    let relay = Relay::spawn(RelayConfig {
        capture: true,
        ..RelayConfig::new(s.server.local_addr())
    })
    .unwrap();
    let c = client();
    c.set_zero_rtt_ticket(relay.local_addr(), verified(&s), false)
        .unwrap();
    assert_eq!(
        c.call(relay.local_addr(), b"pay once").unwrap(),
        &b"PAY ONCE"[..]
    );
    let flight: Vec<Vec<u8>> = relay
        .captured()
        .into_iter()
        .filter(|d| d.direction == Direction::ToServer)
        .map(|d| d.bytes)
        .collect();
    drop(relay);
    // An attacker replays every client datagram from another address.
    let attacker = UdpSocket::bind("127.0.0.1:0").unwrap();
    for d in &flight {
        attacker.send_to(d, s.server.local_addr()).unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        s.executions.lock().unwrap().get(&b"pay once".to_vec()),
        Some(&1),
        "executed twice"
    );
    let stats = s.server.stats().unwrap().total;
    assert!(
        stats.handshakes.failed >= 1,
        "the replayed hello was rejected: {stats:?}"
    );
}

#[test]
fn ticket_published_in_dns_gives_a_zero_rtt_session() {
    let s = setup("d");
    let dns = smt_dns::TicketDnsServer::spawn("127.0.0.1:0".parse().unwrap(), "smt.test").unwrap();
    dns.publish("server.smt.test", s.ticket.as_bytes()).unwrap();
    let bytes = smt_dns::lookup_ticket(dns.local_addr(), "server.smt.test").unwrap();
    let ticket = Ticket::decode(&bytes).unwrap();
    let verified = ticket
        .verify(s.ca.cert_der(), "server.smt.test", SystemTime::now())
        .unwrap();
    let c = client();
    let to: SocketAddr = s.server.local_addr();
    c.set_zero_rtt_ticket(to, verified, true).unwrap();
    assert_eq!(
        c.call(to, b"found you in dns").unwrap(),
        &b"FOUND YOU IN DNS"[..]
    );
}

#[test]
fn a_client_restarting_on_the_same_address_gets_a_new_session() {
    let s = setup("e");
    let first = client();
    let addr = first.local_addr();
    first
        .set_zero_rtt_ticket(s.server.local_addr(), verified(&s), false)
        .unwrap();
    assert_eq!(
        first
            .call(s.server.local_addr(), b"before restart")
            .unwrap(),
        &b"BEFORE RESTART"[..]
    );
    first.close();
    drop(first);
    // Same address, new process state: a new hello, new keys, IDs from 2.
    let again = Endpoint::bind(addr, EndpointConfig::default()).unwrap();
    again
        .set_zero_rtt_ticket(s.server.local_addr(), verified(&s), true)
        .unwrap();
    assert_eq!(
        again.call(s.server.local_addr(), b"after restart").unwrap(),
        &b"AFTER RESTART"[..]
    );
    assert_eq!(s.server.stats().unwrap().total.handshakes.completed, 2);
}

/// How a client in [`a_new_client_on_a_port_an_earlier_session_used_is_served`]
/// gets its session.
#[derive(Clone, Copy, Debug)]
enum Way {
    Tls,
    ZeroRtt,
    ZeroRttFs,
}

fn client_on(s: &Setup, addr: SocketAddr, way: Way) -> Endpoint {
    let c = Endpoint::bind(addr, EndpointConfig::default()).unwrap();
    let server = s.server.local_addr();
    match way {
        Way::Tls => c
            .set_tls_client(smt_tls::TlsClient::new(s.ca.cert_pem().as_bytes(), None).unwrap())
            .unwrap(),
        Way::ZeroRtt => c.set_zero_rtt_ticket(server, verified(s), false).unwrap(),
        Way::ZeroRttFs => c.set_zero_rtt_ticket(server, verified(s), true).unwrap(),
    }
    c
}

/// Ephemeral ports are reused all the time: a client endpoint that gets
/// the port of an earlier one (closed, its session still held by the
/// server) must get a session of its own. A 0-RTT hello without forward
/// secrecy from such an address used to be ignored (`smt bench-handshake`
/// failed about half its runs with "RPC timed out").
#[test]
fn a_new_client_on_a_port_an_earlier_session_used_is_served() {
    let s = setup("f");
    let ways = [Way::Tls, Way::ZeroRtt, Way::ZeroRttFs];
    let mut addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut sessions = 0;
    for first in ways {
        for then in ways {
            for (i, way) in [first, then].into_iter().enumerate() {
                let c = client_on(&s, addr, way);
                addr = c.local_addr();
                let msg = format!("{first:?} then {then:?}: call {i} ({way:?})");
                let reply = c.call(s.server.local_addr(), msg.as_bytes());
                assert_eq!(
                    reply.map_err(|e| e.to_string()).as_deref(),
                    Ok(msg.to_ascii_uppercase().as_bytes()),
                    "{msg}"
                );
                sessions += 1;
                c.close();
            }
        }
    }
    assert_eq!(
        s.server.stats().unwrap().total.handshakes.completed,
        sessions
    );
}
