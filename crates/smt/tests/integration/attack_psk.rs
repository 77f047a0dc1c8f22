//! The PSK nonce exchange under attack: a captured PSK session replayed
//! to a server restarted with the same master (its replay windows lost)
//! executes nothing, because every session's keys depend on a nonce the
//! server draws for it; a spoofed PSK hello from an established client's
//! address does not replace that client's session. For contrast, the
//! static derivation (`keys::PskResolver`, master + address only) is shown
//! to execute the replay again, which is why it is documented as having no
//! replay protection across restarts.

use crate::attack_common;

use std::net::SocketAddr;
use std::time::Duration;

use attack_common::{bind, request, serve_echo, Executions, Snapshot};
use smt::keys::{psk_session, AeadAlgorithm, PskClient, PskResolver};
use smt::{Endpoint, EndpointConfig, Role, ServerAcceptor};
use smt_relay::attack::Tally;
use smt_relay::{Direction, Relay};

const MASTER: &[u8] = &[0x5a; 32];
const ALG: AeadAlgorithm = AeadAlgorithm::Aes128Gcm;

/// A server on `addr` answering the PSK nonce exchange, or (`static_psk`)
/// resolving keys from the master and the address alone.
fn psk_server(addr: SocketAddr, static_psk: bool) -> (Endpoint, Executions) {
    let server = Endpoint::bind(addr, EndpointConfig::default()).unwrap();
    if static_psk {
        server
            .set_key_resolver(Box::new(PskResolver::new(MASTER, ALG)))
            .unwrap();
    } else {
        let acceptor = ServerAcceptor::new(None, None).with_psk(MASTER, ALG);
        server.set_handshake_acceptor(Box::new(acceptor)).unwrap();
    }
    let executions = serve_echo(&server);
    (server, executions)
}

/// A client whose route through the relay is open, so it knows the
/// address the server sees it as (the keys depend on it).
fn psk_client(relay: &Relay, static_psk: bool) -> Endpoint {
    let client = bind();
    let seen_as = relay.open_route(client.local_addr()).unwrap();
    if static_psk {
        let keys = psk_session(MASTER, seen_as, Role::Client, ALG);
        client.install_session(relay.local_addr(), keys).unwrap();
    } else {
        client
            .set_psk_client(PskClient::new(MASTER, ALG).seen_as(seen_as))
            .unwrap();
    }
    client
}

/// Calls of several sizes (one packet to several segments), checked.
fn genuine_calls(client: &Endpoint, relay: &Relay) {
    for (k, size) in [8usize, 1000, 20_000, 200_000].into_iter().enumerate() {
        let req = request(k as u64, size);
        let resp = client.call(relay.local_addr(), &req).unwrap();
        assert!(resp.iter().eq(req.iter().rev()), "wrong response");
    }
}

/// Captures a PSK session, restarts the server with the same master, and
/// replays every captured client → server datagram (handshake included)
/// three times from the client's address; counts executions.
fn replay_after_restart(name: &str, static_psk: bool) -> Tally {
    let (server, _) = psk_server("127.0.0.1:0".parse().unwrap(), static_psk);
    let addr = server.local_addr();
    let relay = attack_common::spawn_relay(addr, None);
    let client = psk_client(&relay, static_psk);
    genuine_calls(&client, &relay);
    let flight: Vec<Vec<u8>> = relay
        .captured()
        .into_iter()
        .filter(|c| c.direction == Direction::ToServer)
        .map(|c| c.bytes)
        .collect();
    server.close();
    drop(server);
    std::thread::sleep(Duration::from_millis(50));
    let (server, executions) = psk_server(addr, static_psk);
    let idle = bind();
    let before = Snapshot::take(&server, &idle, &executions);
    for _ in 0..3 {
        for (k, d) in flight.iter().enumerate() {
            relay
                .inject(Direction::ToServer, client.local_addr(), d)
                .unwrap();
            if k % 64 == 63 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let after = Snapshot::take(&server, &idle, &executions);
    let executed = |s: &Snapshot| s.executions.values().map(|&v| u64::from(v)).sum::<u64>();
    let tally = Tally {
        name: name.to_owned(),
        attempts: 3 * flight.len() as u64,
        accepted: executed(&after) - executed(&before),
    };
    let drops = attack_common::drops_since(&before, &after);
    println!(
        "{tally}; server handshakes completed {}; drops: {}",
        after.server.handshakes.completed - before.server.handshakes.completed,
        attack_common::format_drops(&drops)
    );
    tally
}

#[test]
fn a_psk_session_replayed_after_a_server_restart_executes_nothing() {
    let tally = replay_after_restart("psk-nonce-replay-after-restart", false);
    assert_eq!(tally.accepted, 0, "{tally}");
}

/// The weakness the nonce exchange removes: with keys from the master and
/// the address alone, the restarted server executes the replay again.
#[test]
fn the_static_psk_derivation_has_no_replay_protection_across_restarts() {
    let tally = replay_after_restart("psk-static-replay-after-restart", true);
    assert!(
        tally.accepted > 0,
        "expected the documented weakness: {tally}"
    );
}

#[test]
fn a_spoofed_psk_hello_does_not_replace_an_established_session() {
    let (server, _) = psk_server("127.0.0.1:0".parse().unwrap(), false);
    let relay = attack_common::spawn_relay(server.local_addr(), None);
    let victim = psk_client(&relay, false);
    genuine_calls(&victim, &relay);
    let hello = relay
        .captured()
        .into_iter()
        .find(|c| c.direction == Direction::ToServer)
        .unwrap()
        .bytes;
    let mut failed = 0;
    for k in 0..20u64 {
        // A new hello from the victim's address: its own, replayed, and
        // ones with another nonce.
        let mut spoofed = hello.clone();
        if k % 2 == 1 {
            let at = spoofed.len() - 1;
            spoofed[at] ^= k as u8;
        }
        relay
            .inject(Direction::ToServer, victim.local_addr(), &spoofed)
            .unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let req = request(100 + k, 64);
        match victim.call(relay.local_addr(), &req) {
            Ok(r) if r.iter().eq(req.iter().rev()) => {}
            _ => failed += 1,
        }
    }
    let tally = Tally {
        name: "psk-spoofed-hello".to_owned(),
        attempts: 20,
        accepted: failed,
    };
    println!("{tally} (accepted = victim calls that failed)");
    assert_eq!(tally.accepted, 0, "{tally}");
}
