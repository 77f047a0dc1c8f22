//! When the endpoint's timers go off (`timer.rs`): each expiry is a
//! driver's wake-up and, with a timer descriptor, a timer system call, so
//! timers that can go off together do.

// The tests drive a virtual clock; `Instant::now` only picks its origin.
#![allow(clippy::disallowed_methods)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use smt_proto::crypto::NullCipher;
use smt_proto::{Config, Endpoint, Event, Role, SessionKeys};

const CLIENT_PORT: u16 = 0x9c40;
const SERVER_PORT: u16 = 0x0fa0;
const TICK: Duration = Duration::from_millis(1);

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn endpoint(port: u16) -> Endpoint {
    let config = Config {
        local_port: port,
        tick: TICK,
        ..Config::default()
    };
    Endpoint::new(config).expect("valid config")
}

fn null_keys(role: Role) -> SessionKeys {
    SessionKeys::new(role, Arc::new(NullCipher), Arc::new(NullCipher))
}

/// A client and a server with a NullCipher session between them.
fn pair() -> (Endpoint, Endpoint) {
    let mut client = endpoint(CLIENT_PORT);
    let mut server = endpoint(SERVER_PORT);
    client
        .install_session(addr(SERVER_PORT), null_keys(Role::Client))
        .expect("null keys are not reflectable");
    server
        .install_session(addr(CLIENT_PORT), null_keys(Role::Server))
        .expect("null keys are not reflectable");
    (client, server)
}

/// Every datagram `from` has to send at `now`, handed to `to`.
fn deliver(from: &mut Endpoint, to: &mut Endpoint, from_port: u16, now: Instant) -> usize {
    let mut buf = vec![0u8; from.config().max_datagram_size];
    let mut n = 0;
    while let Some(t) = from.poll_transmit(now, &mut buf) {
        to.handle_datagram(now, addr(from_port), &buf[..t.len]);
        n += 1;
    }
    n
}

/// The server answers every request it holds with its own bytes.
fn echo(server: &mut Endpoint, now: Instant) {
    while let Some(ev) = server.poll_event() {
        if let Event::Request { rpc, data } = ev {
            server.send_response(now, rpc, &data).expect("in service");
        }
    }
}

fn expiries(ep: &Endpoint, name: &str) -> u64 {
    let all = ep.timer_expiries();
    all.iter().find(|(n, _)| *n == name).map_or(0, |(_, k)| *k)
}

/// A call answered within its first tick: the ACK of its response does
/// not set a deadline of its own (a tick after the response) but goes
/// with the tick the call armed, so the client's driver wakes once for
/// both, and the ACK still leaves within a tick of the completion.
#[test]
fn an_ack_goes_off_with_the_tick_the_call_armed() {
    let (mut client, mut server) = pair();
    let t0 = Instant::now();
    client
        .send_request(t0, addr(SERVER_PORT), b"ping")
        .expect("session");
    assert_eq!(
        client.poll_timeout(),
        Some(t0 + TICK),
        "the call arms the tick"
    );
    deliver(&mut client, &mut server, CLIENT_PORT, t0);
    let answered = t0 + TICK * 6 / 10;
    echo(&mut server, answered);
    deliver(&mut server, &mut client, SERVER_PORT, answered);
    let done = std::iter::from_fn(|| client.poll_event())
        .filter(|e| matches!(e, Event::Response { .. }))
        .count();
    assert_eq!(done, 1);
    assert_eq!(
        client.poll_timeout(),
        Some(t0 + TICK),
        "the ACK waits for the tick already armed, not a tick after the response"
    );

    client.handle_timeout(t0 + TICK);
    assert_eq!(expiries(&client, "Tick"), 1);
    assert_eq!(expiries(&client, "AckDelay"), 1, "in the same call");
    assert_eq!(deliver(&mut client, &mut server, CLIENT_PORT, t0 + TICK), 1);
    assert_eq!(server.server_rpcs(), 0, "the ACK freed the server's RPC");
}

/// A response that comes after the call's first tick: its ACK goes with
/// the tick armed again then, still within a tick of the response.
#[test]
fn an_ack_goes_with_the_next_tick_after_a_first_one() {
    let (mut client, mut server) = pair();
    let t0 = Instant::now();
    client
        .send_request(t0, addr(SERVER_PORT), b"ping")
        .expect("session");
    deliver(&mut client, &mut server, CLIENT_PORT, t0);
    echo(&mut server, t0);
    // The client's tick goes off with nothing answered yet, and is armed
    // again (the call is still outstanding).
    client.handle_timeout(t0 + TICK);
    deliver(&mut client, &mut server, CLIENT_PORT, t0 + TICK);
    let answered = t0 + TICK + TICK / 4;
    deliver(&mut server, &mut client, SERVER_PORT, answered);
    assert_eq!(client.client_rpcs(), 0);
    assert_eq!(
        client.poll_timeout(),
        Some(t0 + 2 * TICK),
        "the ACK goes with the re-armed tick, within a tick of the response"
    );
}
