//! Key updates: with a tiny message-ID space the session moves through
//! many key epochs; IDs restart in each, in-flight RPCs under the old keys
//! still complete, and nothing is delivered twice.

use std::net::SocketAddr;
use std::time::Duration;

use smt_proto::record::SeqLayout;
use smt_proto::sim::{Datagram, Link, Outcome, Pair, Verdict};
use smt_proto::{Config, DropReason, Endpoint, SendError};
use smt_relay::KeyKind;

/// 8 bits of message ID: 127 client IDs per key epoch.
fn tiny_ids() -> Config {
    Config {
        seq_layout: SeqLayout::new(56).unwrap(),
        ..Config::default()
    }
}

/// The key epoch of `ep`'s session with `peer`, from its counters.
fn key_epoch(ep: &Endpoint, peer: SocketAddr) -> Option<u64> {
    ep.peer_stats(peer).map(|s| s.key_epoch)
}

fn request(i: u64, len: usize) -> Vec<u8> {
    let mut v = vec![(i % 251) as u8; len.max(8)];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}

#[test]
fn sequential_rpcs_walk_through_many_key_epochs() {
    let mut pair = Pair::new(
        tiny_ids(),
        tiny_ids(),
        KeyKind::Aes128Rekeying(1),
        Link::default(),
        1,
    );
    for i in 1..=1000u64 {
        let req = request(i, 100);
        let h = pair.call(&req);
        assert!(pair.run(Duration::from_secs(5)));
        assert_eq!(pair.outcomes[&h], Outcome::Response(req), "RPC {i}");
    }
    let epoch = key_epoch(&pair.client, pair.server_addr).unwrap();
    assert!(
        epoch >= 8,
        "1000 RPCs over 127-ID epochs need several key updates, got {epoch}"
    );
    assert_eq!(
        key_epoch(&pair.server, pair.client_addr),
        Some(epoch),
        "both sides agree"
    );
    assert!(pair.executions.values().all(|&n| n == 1));
    assert_eq!(
        pair.server.stats().drops.total(),
        0,
        "{:?}",
        pair.server.stats().drops
    );
}

#[test]
fn concurrent_rpcs_straddle_key_updates_and_all_complete() {
    let link = Link {
        loss: 0.02,
        reorder: 0.05,
        ..Link::default()
    };
    let mut pair = Pair::new(tiny_ids(), tiny_ids(), KeyKind::Aes128Rekeying(2), link, 2);
    let mut calls = Vec::new();
    let mut next = 1u64;
    let mut pending = 0;
    while next <= 3000 {
        assert!(
            pair.elapsed() < Duration::from_secs(60),
            "stuck at RPC {next}: {:?}",
            pair.client
        );
        while pair.client.client_rpcs() < 40 && next <= 3000 {
            let req = request(next, [10, 2000, 30_000][next as usize % 3]);
            match pair.client.send_request(pair.now, pair.server_addr, &req) {
                Ok(h) => {
                    calls.push((h, req));
                    next += 1;
                }
                Err(SendError::RekeyPending) => {
                    pending += 1;
                    break;
                }
                Err(e) => panic!("send_request: {e}"),
            }
        }
        pair.run_for(Duration::from_micros(300));
    }
    assert!(pair.run(Duration::from_secs(30)));
    for (h, req) in &calls {
        assert_eq!(pair.outcomes.get(h), Some(&Outcome::Response(req.clone())));
    }
    assert!(pair.executions.values().all(|&n| n == 1));
    assert!(key_epoch(&pair.client, pair.server_addr).unwrap() >= 20);
    eprintln!("{pending} sends waited for the previous epoch to drain");
}

#[test]
fn forged_key_update_is_rejected() {
    let mut pair = Pair::new(
        tiny_ids(),
        tiny_ids(),
        KeyKind::Aes128Rekeying(3),
        Link::default(),
        3,
    );
    let h = pair.call(b"before the forgery");
    assert!(pair.run(Duration::from_secs(1)));
    assert!(matches!(pair.outcomes[&h], Outcome::Response(_)));
    // KEY_UPDATE with the next phase and a made-up MAC.
    let mut b = vec![0u8; 28 + 16];
    b[0..2].copy_from_slice(&4000u16.to_be_bytes());
    b[2..4].copy_from_slice(&5000u16.to_be_bytes());
    b[12] = (7 << 4) | 1;
    b[13] = 0x19;
    b[28..].fill(0x5a);
    let d = Datagram {
        from: pair.client_addr,
        to: pair.server_addr,
        bytes: b,
    };
    pair.deliver_now(&d);
    assert_eq!(
        key_epoch(&pair.server, pair.client_addr),
        Some(0),
        "a forgery must not rekey"
    );
    assert_eq!(pair.server.stats().drops.get(DropReason::BadControlTag), 1);
}

#[test]
fn sessions_without_key_update_refuse_cleanly_when_ids_run_out() {
    let mut pair = Pair::new(
        tiny_ids(),
        tiny_ids(),
        KeyKind::Aes128(4),
        Link::default(),
        4,
    );
    for i in 1..=127u64 {
        pair.call(&request(i, 10));
        assert!(pair.run(Duration::from_secs(1)));
    }
    let err = pair
        .client
        .send_request(pair.now, pair.server_addr, b"x")
        .unwrap_err();
    assert_eq!(err, SendError::IdSpaceExhausted);
}

#[test]
fn lost_key_updates_are_announced_again() {
    use smt_proto::wire::{Packet, PacketType};
    let mut pair = Pair::new(
        tiny_ids(),
        tiny_ids(),
        KeyKind::Aes128Rekeying(5),
        Link::default(),
        5,
    );
    // Drop every first announcement of each key update.
    let mut seen = std::collections::HashSet::new();
    pair.intercept = Some(Box::new(move |d| {
        let p = Packet::new_checked(&d.bytes[..]).unwrap();
        if p.packet_type() == PacketType::KEY_UPDATE && p.id() == 0 && seen.insert(p.key_phase()) {
            Verdict::Drop
        } else {
            Verdict::Deliver
        }
    }));
    for i in 1..=400u64 {
        let req = request(i, 50);
        let h = pair.call(&req);
        assert!(pair.run(Duration::from_secs(5)));
        assert_eq!(pair.outcomes[&h], Outcome::Response(req), "RPC {i}");
    }
    assert!(key_epoch(&pair.client, pair.server_addr).unwrap() >= 3);
    assert_eq!(
        key_epoch(&pair.server, pair.client_addr),
        key_epoch(&pair.client, pair.server_addr)
    );
}

#[test]
fn rekeying_works_with_plaintext_control_packets() {
    let cfg = Config {
        authenticate_control: false,
        ..tiny_ids()
    };
    let mut pair = Pair::new(
        cfg.clone(),
        cfg,
        KeyKind::Aes128Rekeying(6),
        Link::default(),
        6,
    );
    for i in 1..=400u64 {
        let req = request(i, 50);
        let h = pair.call(&req);
        assert!(pair.run(Duration::from_secs(5)));
        assert_eq!(pair.outcomes[&h], Outcome::Response(req), "RPC {i}");
    }
    assert!(key_epoch(&pair.server, pair.client_addr).unwrap() >= 3);
}
