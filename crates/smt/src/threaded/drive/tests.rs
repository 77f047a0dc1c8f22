//! The driver's alarm: a leader thread sleeps on the endpoint's timer
//! descriptor, set per tick rather than per sleep. Real loopback sockets.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

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
