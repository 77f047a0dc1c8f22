//! One bit flipped at every byte position of captured DATA and control
//! packets (the bit cycles through 0..8 with the position), sent to the
//! side they were meant for: after the originals completed, and, for a
//! request, before the original arrives (the attacker holds it back),
//! which then must still execute once with the right bytes.

use crate::attack_common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use attack_common::{finish, request, run_attack, World};
use smt_proto::wire::PacketType;
use smt_relay::attack::{flip_bit, packet_type};
use smt_relay::{Action, Direction, Tamper};

/// Every position of every datagram (both directions) with one bit flipped.
fn flips(datagrams: &[(Direction, Vec<u8>)]) -> Vec<(Direction, Vec<u8>)> {
    let mut out = Vec::new();
    for (direction, bytes) in datagrams {
        for pos in 0..bytes.len() {
            out.push((*direction, flip_bit(bytes, pos * 8 + pos % 8)));
        }
    }
    out
}

#[test]
fn flipped_bits_in_captured_packets_are_refused() {
    let world = World::new();
    world.calls(1, &[8, 1000, 3000]);
    std::thread::sleep(Duration::from_millis(50));
    // One datagram of each type and direction (DATA packets are long: the
    // first of each message suffices to cover every header field and the
    // record's header, body and tag).
    let mut seen = std::collections::HashSet::new();
    let samples: Vec<_> = world
        .captured()
        .into_iter()
        .filter(|c| seen.insert((c.direction, packet_type(&c.bytes), c.bytes.len() / 400)))
        .map(|c| (c.direction, c.bytes))
        .collect();
    let attempts = flips(&samples);
    let (tally, before, after) = run_attack(&world, "bit-flip-after-completion", &attempts);
    finish(&tally, &before, &after);
    world.calls(10, &[8]);
}

/// Holds back the first DATA packet going to the server.
struct HoldFirst {
    armed: AtomicBool,
    held: Mutex<Option<Vec<u8>>>,
}

impl Tamper for HoldFirst {
    fn tamper(&self, direction: Direction, _: std::net::SocketAddr, bytes: &[u8]) -> Action {
        let data = packet_type(bytes) == Some(PacketType::DATA);
        if direction == Direction::ToServer && data && self.armed.swap(false, Ordering::SeqCst) {
            *self.held.lock().unwrap() = Some(bytes.to_vec());
            return Action::Drop;
        }
        Action::Pass
    }
}

#[test]
fn flipped_copies_of_a_request_before_the_original_execute_nothing() {
    let hold = Arc::new(HoldFirst {
        armed: AtomicBool::new(false),
        held: Mutex::new(None),
    });
    let world = World::with_tamper(Some(hold.clone()));
    world.calls(1, &[8]); // the route and the server's session exist
    hold.armed.store(true, Ordering::SeqCst);
    let req = request(77, 1200);
    let (client, target, r) = (world.client.clone(), world.relay.local_addr(), req.clone());
    let call = std::thread::spawn(move || client.call(target, &r));
    let original = loop {
        if let Some(b) = hold.held.lock().unwrap().clone() {
            break b;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let attempts = flips(&[(Direction::ToServer, original.clone())]);
    let (mut tally, before, after) = run_attack(&world, "bit-flip-before-original", &attempts);
    // The client's own retransmission may already have delivered it; only
    // executions with other bytes count against us here.
    tally.accepted = after
        .executions
        .iter()
        .filter(|(data, _)| !before.executions.contains_key(*data) && **data != req)
        .count() as u64;
    world
        .relay
        .inject(Direction::ToServer, world.client.local_addr(), &original)
        .unwrap();
    let response = call.join().unwrap().expect("the request still completes");
    assert!(response.iter().eq(req.iter().rev()));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(world.executions.lock().unwrap().get(&req), Some(&1));
    finish(&tally, &before, &after);
}
