//! The driver's alarm: a leader thread sleeps on the endpoint's timer
//! descriptor, set per tick rather than per sleep; and a server's
//! answers to a backlog leave in slices. Real loopback sockets.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::ANSWERS_PER_SEND;
use crate::keys::{fresh_session_pair, AeadAlgorithm};
use crate::{Endpoint, EndpointConfig};

/// A long tick, so that the count of timer settings it allows stays far
/// below one per call however slow the machine.
const TICK: Duration = Duration::from_millis(50);
const CALLS: u32 = 300;

fn pair() -> (Endpoint, Endpoint) {
    let mut config = EndpointConfig::default();
    config.protocol_mut().set_tick(TICK);
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let client = Endpoint::bind(any, config.clone()).unwrap();
    let server = Endpoint::bind(any, config).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    (client, server)
}

fn alarm_sets(endpoint: &Endpoint) -> u64 {
    endpoint.shared().lock().alarm.sets()
}

/// Each blocking call's thread leads and sleeps on the socket at least
/// once; the alarm is set when the deadline moves earlier or after it
/// went off (set again for the next deadline, with no disarm between),
/// so about once per timer that fires in a tick (the tick, an ACK
/// delay): the bound counts the ticks that passed, not the calls.
#[test]
fn a_leader_sets_its_timer_per_tick_not_per_sleep() {
    let (client, server) = pair();
    let echo = {
        let server = server.clone();
        std::thread::spawn(move || {
            while let Ok(mut request) = server.accept() {
                let data = request.take_data();
                let _ = request.respond(data);
            }
        })
    };
    let start = Instant::now();
    for n in 0..CALLS {
        let reply = client.call(server.local_addr(), &n.to_be_bytes()).unwrap();
        assert_eq!(&reply[..], &n.to_be_bytes());
    }
    let ticks = u64::try_from(start.elapsed().as_nanos() / TICK.as_nanos()).unwrap() + 2;
    let (client_sets, server_sets) = (alarm_sets(&client), alarm_sets(&server));
    client.close();
    server.close();
    echo.join().unwrap();
    for (side, sets) in [("client", client_sets), ("server", server_sets)] {
        assert!(
            sets <= 3 * ticks,
            "{side}: timer set {sets} times in {ticks} ticks for {CALLS} calls"
        );
    }
}

/// Requests queued at the server before it answers any: more than one
/// slice of answers.
const BACKLOG: usize = ANSWERS_PER_SEND + 8;

fn answer_sends(endpoint: &Endpoint) -> u64 {
    endpoint.shared().lock().answer_sends
}

/// Waits (at most `GENEROUS`) until `n` requests are queued at `server`.
fn wait_for_queued(server: &Endpoint, n: usize) {
    let start = Instant::now();
    while server.shared().requests.len() < n {
        assert!(start.elapsed() < GENEROUS, "requests never arrived");
        std::thread::sleep(Duration::from_millis(1));
    }
}

const GENEROUS: Duration = Duration::from_secs(20);

/// A server answering a backlog of queued requests sends the first
/// `ANSWERS_PER_SEND` answers before it gives the next ones, instead of
/// all of them after the last: its client can work on those replies
/// meanwhile (on another CPU). The old rule (send when the queue is
/// empty) sent once. Every call gets its reply.
#[test]
fn a_backlog_of_answers_leaves_in_slices() {
    let (client, server) = pair();
    let to = server.local_addr();
    let callers: Vec<_> = (0..BACKLOG as u32)
        .map(|n| {
            let client = client.clone();
            std::thread::spawn(move || (n, client.call(to, &n.to_be_bytes())))
        })
        .collect();
    wait_for_queued(&server, BACKLOG);
    let before = answer_sends(&server);
    for _ in 0..BACKLOG {
        let mut request = server.accept().unwrap();
        let data = request.take_data();
        request.respond(data).unwrap();
    }
    let sends = answer_sends(&server) - before;
    for caller in callers {
        let (n, reply) = caller.join().unwrap();
        assert_eq!(&reply.unwrap()[..], &n.to_be_bytes());
    }
    client.close();
    server.close();
    assert!(sends >= 2, "{BACKLOG} answers sent in {sends} batch(es)");
}
