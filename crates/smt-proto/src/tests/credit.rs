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
