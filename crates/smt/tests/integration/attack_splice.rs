//! Splicing: records of a message reordered, truncated or moved into
//! another message; packets moved between two sessions (two clients with
//! different keys) and between the two directions of one session; and
//! reflection of the server's own packets back to it.

use crate::attack_common;

use std::time::Duration;

use attack_common::{finish, run_attack, World};
use smt_proto::wire::PacketType;
use smt_relay::attack::{message_id, retarget_id, select, truncate};
use smt_relay::{Direction, SplitMix64};

fn quiet_world() -> World {
    let world = World::new();
    world.calls(1, &[8, 1000, 20_000, 70_000, 150_000]);
    std::thread::sleep(Duration::from_millis(50));
    world
}

fn data(world: &World, direction: Direction) -> Vec<Vec<u8>> {
    select(&world.captured(), direction, Some(PacketType::DATA))
        .map(|c| c.bytes.clone())
        .collect()
}

/// Each DATA packet moved into every other message (its ID rewritten to
/// fresh IDs and to IDs of other real messages), truncated at several
/// lengths, and the packets of each message replayed in reverse order.
#[test]
fn records_moved_truncated_or_reordered_are_refused() {
    let world = quiet_world();
    let mut attempts = Vec::new();
    for direction in [Direction::ToServer, Direction::ToClient] {
        let packets = data(&world, direction);
        let ids: Vec<u64> = packets.iter().filter_map(|p| message_id(p)).collect();
        for p in &packets {
            for &id in ids.iter().step_by(7) {
                attempts.push((direction, retarget_id(p, id)));
            }
            // Fresh IDs of the right parity, never used yet.
            let own = message_id(p).unwrap_or(0);
            for k in 1..4 {
                attempts.push((direction, retarget_id(p, own + 1000 * k)));
            }
            for len in [p.len() - 1, p.len() - 16, p.len() / 2, 60] {
                attempts.push((direction, truncate(p, len)));
            }
        }
        for p in packets.iter().rev() {
            attempts.push((direction, p.clone()));
        }
    }
    let (tally, before, after) = run_attack(&world, "splice-records", &attempts);
    finish(&tally, &before, &after);
    world.calls(10, &[8, 20_000]);
}

/// A second client with its own keys: each client's packets injected on
/// the other's route (so the server sees them from the other session).
#[test]
fn packets_spliced_between_sessions_are_refused() {
    let a = quiet_world();
    let b = quiet_world();
    let mut attempts = Vec::new();
    for c in b.captured() {
        // As captured (A has used the same IDs: the replay guard refuses
        // them), and under IDs A never used, so they reach the AEAD.
        let fresh = message_id(&c.bytes).unwrap_or(0) + 5000;
        attempts.push((c.direction, retarget_id(&c.bytes, fresh)));
        attempts.push((c.direction, c.bytes));
    }
    // B's packets on A's route, to A's server and A's client.
    let (tally, before, after) = run_attack(&a, "splice-sessions", &attempts);
    finish(&tally, &before, &after);
    a.calls(10, &[8]);
}

/// Client→server packets sent to the client, server→client packets sent
/// to the server (reflection), all of them.
#[test]
fn packets_spliced_between_directions_and_reflected_are_refused() {
    let world = quiet_world();
    let mut rng = SplitMix64::new(3);
    let mut attempts: Vec<_> = world
        .captured()
        .into_iter()
        .map(|c| {
            let other = match c.direction {
                Direction::ToServer => Direction::ToClient,
                Direction::ToClient => Direction::ToServer,
            };
            (other, c.bytes)
        })
        .collect();
    for i in (1..attempts.len()).rev() {
        attempts.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let (tally, before, after) = run_attack(&world, "splice-directions-and-reflect", &attempts);
    finish(&tally, &before, &after);
    world.calls(10, &[8]);
}
