//! Scenario tests: one behaviour each, on the deterministic two-endpoint
//! harness with real AES-GCM keys unless the test says otherwise.

use std::time::Duration;

use smt_proto::{Config, DropReason, RpcError};
use smt_sim::{KeyKind, Link, Outcome, Pair};

const AES: KeyKind = KeyKind::Aes128(7);
const LIMIT: Duration = Duration::from_secs(30);

fn payload(len: usize, tag: u64) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len).map(|i| (i as u64).wrapping_mul(31).wrapping_add(tag) as u8).collect();
    if len >= 8 {
        v[..8].copy_from_slice(&tag.to_le_bytes());
    }
    v
}

fn echo_once(pair: &mut Pair, len: usize) {
    let req = payload(len, len as u64);
    let h = pair.call(&req);
    assert!(pair.run(LIMIT), "RPC of {len} bytes did not finish");
    assert_eq!(pair.outcomes[&h], Outcome::Response(req), "echo of {len} bytes");
}

#[test]
fn echo_of_every_interesting_size() {
    let mut pair = Pair::with_keys(AES, Link::default(), 1);
    for len in [0, 1, 100, 1428, 1429, 16383, 16384, 16385, 65536, 1 << 20] {
        echo_once(&mut pair, len);
    }
    assert_eq!(pair.client.stats().drops.total(), 0, "{:?}", pair.client.stats().drops);
    assert_eq!(pair.server.stats().drops.total(), 0);
}

#[test]
fn sixty_four_mib_message() {
    let mut pair = Pair::with_keys(AES, Link::default(), 2);
    pair.responder = Box::new(|req| req[..16].to_vec());
    let req = payload(64 << 20, 99);
    let h = pair.call(&req);
    assert!(pair.run(LIMIT));
    assert_eq!(pair.outcomes[&h], Outcome::Response(req[..16].to_vec()));
}

#[test]
fn many_concurrent_rpcs_complete_out_of_order() {
    let mut pair = Pair::with_keys(AES, Link { reorder: 0.3, ..Link::default() }, 3);
    let sizes = [10_000usize, 100, 200_000, 5, 50_000, 1, 3000];
    let calls: Vec<_> = (0..70).map(|i| {
        let req = payload(sizes[i % sizes.len()], i as u64);
        (pair.call(&req), req)
    }).collect();
    assert!(pair.run(LIMIT));
    for (h, req) in &calls {
        assert_eq!(pair.outcomes[h], Outcome::Response(req.clone()));
    }
    // Small messages overtook large ones started before them (SRPT).
    let t = |i: usize| pair.finished_at[&calls[i].0];
    assert!(t(1) < t(2), "a 100 B RPC waited behind a 200 KB one");
}

#[test]
fn lossy_reordering_duplicating_link_delivers_everything_once() {
    let link = Link { loss: 0.05, reorder: 0.1, duplicate: 0.02, ..Link::default() };
    let mut pair = Pair::with_keys(AES, link, 4);
    let calls: Vec<_> = (0..200u64).map(|i| {
        let req = payload([64, 1500, 20_000, 150_000][i as usize % 4], i + 1);
        (pair.call(&req), req)
    }).collect();
    assert!(pair.run(LIMIT));
    for (h, req) in &calls {
        assert_eq!(pair.outcomes[h], Outcome::Response(req.clone()));
    }
    assert!(pair.executions.values().all(|&n| n == 1), "a request was executed twice");
    assert!(pair.link_stats.lost > 0 && pair.client.stats().retransmitted_packets + pair.server.stats().retransmitted_packets > 0);
}

#[test]
fn corrupted_packets_are_rejected_and_recovered() {
    let link = Link { corrupt: 0.05, ..Link::default() };
    let mut pair = Pair::with_keys(AES, link, 5);
    let calls: Vec<_> = (0..50u64).map(|i| {
        let req = payload(30_000, i + 1);
        (pair.call(&req), req)
    }).collect();
    assert!(pair.run(LIMIT));
    for (h, req) in &calls {
        assert_eq!(pair.outcomes[h], Outcome::Response(req.clone()));
    }
    let drops = pair.server.stats().drops;
    assert!(drops.get(DropReason::AuthFailure) + drops.get(DropReason::Malformed) + drops.get(DropReason::BadControlTag) > 0);
}

#[test]
fn smaller_mtu_works() {
    let cfg = Config { max_datagram_size: 512, ..Config::default() };
    let mut pair = Pair::new(cfg.clone(), cfg, AES, Link::default(), 6);
    echo_once(&mut pair, 100_000);
}

#[test]
fn silent_server_times_out() {
    let mut pair = Pair::with_keys(AES, Link { loss: 1.0, ..Link::default() }, 7);
    let h = pair.call(b"anyone there?");
    assert!(pair.run(LIMIT));
    assert_eq!(pair.outcomes[&h], Outcome::Failed(RpcError::Timeout));
}
