//! Credit (issue #24, item 3): the server tells each client how many
//! requests it may have outstanding, a share of what the server holds.

use std::time::Duration;

use crate::sim::{Link, Pair};
use crate::Config;

const KEYS: crate::sim::TestKeys = crate::sim::TestKeys::Keyed(7);
const LIMIT: Duration = Duration::from_secs(30);

#[test]
fn a_client_hears_its_share_with_its_first_response() {
    let server_cfg = Config {
        max_pending_requests: 40,
        ..Config::default()
    };
    let client_cfg = Config {
        initial_credit: 3,
        ..Config::default()
    };
    let mut pair = Pair::new(client_cfg, server_cfg, KEYS, Link::default(), 41);
    let server = pair.server_addr;
    assert_eq!(pair.client.credit(server), 3, "before any CREDIT");
    pair.call(b"hello");
    assert!(pair.run(LIMIT));
    assert_eq!(pair.client.credit(server), 40, "one active peer: all of it");
    assert_eq!(pair.server.stats().credits_sent, 1);
    assert_eq!(pair.client.stats().credits_received, 1);
}

#[test]
fn the_share_is_bounded_by_partial_requests_per_peer() {
    let mut pair = Pair::with_keys(KEYS, Link::default(), 42);
    pair.call(b"hello");
    assert!(pair.run(LIMIT));
    let cfg = Config::default();
    let want = cfg.max_incoming_per_peer.min(cfg.max_pending_requests) as u32;
    assert_eq!(pair.client.credit(pair.server_addr), want);
}

#[test]
fn an_active_peer_hears_its_credit_again_and_a_stale_one_is_ignored() {
    let mut pair = Pair::with_keys(KEYS, Link::default(), 43);
    let server = pair.server_addr;
    pair.capture = Some(Vec::new());
    // The server ticks only while it holds RPCs: keep it busy.
    for _ in 0..300 {
        pair.call(b"keep me active");
        pair.run_for(Duration::from_millis(2));
    }
    let sent = pair.server.stats().credits_sent;
    assert!(sent >= 2, "refreshed while active: {sent}");
    assert_eq!(pair.client.stats().credits_received, sent);
    // The first CREDIT again: older than the last, so it changes nothing.
    let first = pair
        .capture
        .take()
        .unwrap_or_default()
        .into_iter()
        .find(|d| d.to == pair.client_addr && d.bytes.get(13) == Some(&0x1c));
    let Some(first) = first else {
        panic!("no CREDIT captured alone in a datagram");
    };
    let drops = pair.client.stats().drops.total();
    pair.deliver_now(&first);
    assert_eq!(pair.client.stats().credits_received, sent);
    assert_eq!(pair.client.stats().drops.total(), drops + 1);
    assert_eq!(pair.client.credit(server), 1024);
}

/// A server with many short-lived clients used to send every peer active
/// in the last 1000 ticks a CREDIT each time the share changed (every
/// `resend_ticks`, since each new client changes it) and every 100 ticks:
/// a burst of one CREDIT per recent client that a new client's first
/// flight waited behind (`smt bench-handshake`'s 0-RTT tail). A peer that
/// has sent nothing for `REFRESH_TICKS` now hears nothing more, while
/// another peer keeps the server busy and the share moving.
#[test]
fn an_idle_peer_hears_no_more_credits_while_others_come_and_go() {
    use crate::sim::KeySource;
    // `endpoint::credit::REFRESH_TICKS`.
    const REFRESH_TICKS: u64 = 100;
    use crate::{Endpoint, Event};
    use std::net::SocketAddr;
    use std::time::Instant;

    #[allow(clippy::disallowed_methods)] // a test picks its origin
    let mut now = Instant::now();
    let server_addr: SocketAddr = "10.0.0.2:5000".parse().unwrap();
    let mut server = Endpoint::new(Config::default()).unwrap();
    let mut idle = Endpoint::new(Config::default()).unwrap();
    let idle_addr: SocketAddr = "10.0.0.1:4000".parse().unwrap();
    let (ck, sk) = crate::sim::TestKeys::Keyed(1).session();
    idle.install_session(server_addr, ck).unwrap();
    server.install_session(idle_addr, sk).unwrap();
    let mut buf = vec![0; 65_536];
    idle.send_request(now, server_addr, b"once").unwrap();
    let mut heard_at_refresh = None;
    for ms in 0..600u32 {
        // A new client every 2 ms, each with one call: the share moves.
        let mut others = Vec::new();
        if ms % 2 == 0 {
            let addr = SocketAddr::from(([10, 0, 1, (ms / 2 % 250) as u8], 6000 + ms as u16));
            let (ck, sk) = crate::sim::TestKeys::Keyed(u64::from(ms) + 2).session();
            let mut c = Endpoint::new(Config::default()).unwrap();
            c.install_session(server_addr, ck).unwrap();
            server.install_session(addr, sk).unwrap();
            c.send_request(now, server_addr, b"short-lived").unwrap();
            others.push((addr, c));
        }
        loop {
            let mut moved = false;
            while let Some(t) = idle.poll_transmit(now, &mut buf) {
                server.handle_datagram(now, idle_addr, &buf[..t.len]);
                moved = true;
            }
            for (addr, c) in &mut others {
                while let Some(t) = c.poll_transmit(now, &mut buf) {
                    server.handle_datagram(now, *addr, &buf[..t.len]);
                    moved = true;
                }
            }
            while let Some(t) = server.poll_transmit(now, &mut buf) {
                if t.destination == idle_addr {
                    idle.handle_datagram(now, server_addr, &buf[..t.len]);
                }
                for (addr, c) in &mut others {
                    if t.destination == *addr {
                        c.handle_datagram(now, server_addr, &buf[..t.len]);
                    }
                }
                moved = true;
            }
            while let Some(e) = server.poll_event() {
                if let Event::Request { rpc, data } = e {
                    server.send_response(now, rpc, &data).unwrap();
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
        if u64::from(ms) == REFRESH_TICKS + 10 {
            heard_at_refresh = Some(idle.stats().credits_received);
        }
        now += Duration::from_millis(1);
        server.handle_timeout(now);
        idle.handle_timeout(now);
    }
    let heard = heard_at_refresh.unwrap();
    assert!(heard >= 1, "the idle peer heard its share with its call");
    assert_eq!(
        idle.stats().credits_received,
        heard,
        "CREDITs to a peer idle for more than REFRESH_TICKS"
    );
    assert!(
        server.stats().credits_sent >= 300,
        "the others heard theirs"
    );
}
