//! Replay attacks by an on-path attacker (the relay) on real sockets:
//! captured packets, whole captured messages and a whole captured session
//! sent again after the originals completed. The server executes nothing
//! twice and neither side delivers or sends anything because of them.
//! (Replays across a server restart: `attack_restart.rs`.)

use crate::attack_common;

use attack_common::{finish, run_attack, World};
use smt_relay::attack::message_id;
use smt_relay::{Direction, SplitMix64};

/// Sizes from one packet to many records and segments.
const SIZES: [usize; 6] = [8, 900, 3000, 17_000, 70_000, 200_000];

fn world_after_calls() -> World {
    let world = World::new();
    world.calls(1, &SIZES);
    // Let the last ACK reach the server and free its state.
    std::thread::sleep(std::time::Duration::from_millis(50));
    world
}

/// Every captured datagram back to where it went, in both directions.
fn everything(world: &World) -> Vec<(Direction, Vec<u8>)> {
    world
        .captured()
        .into_iter()
        .map(|c| (c.direction, c.bytes))
        .collect()
}

#[test]
fn replayed_packets_in_random_order_are_refused() {
    let world = world_after_calls();
    let mut attempts = everything(&world);
    let mut rng = SplitMix64::new(6);
    for i in (1..attempts.len()).rev() {
        attempts.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let (tally, before, after) = run_attack(&world, "replay-packets", &attempts);
    finish(&tally, &before, &after);
}

#[test]
fn replayed_whole_messages_are_refused() {
    let world = world_after_calls();
    // Every message's datagrams together, message after message, three
    // times over.
    let mut by_message = everything(&world);
    by_message.sort_by_key(|(d, b)| (*d == Direction::ToClient, message_id(b)));
    let attempts: Vec<_> = std::iter::repeat_n(by_message, 3).flatten().collect();
    let (tally, before, after) = run_attack(&world, "replay-messages", &attempts);
    finish(&tally, &before, &after);
}

#[test]
fn a_replayed_session_is_refused() {
    let world = world_after_calls();
    let attempts = everything(&world);
    let (tally, before, after) = run_attack(&world, "replay-session", &attempts);
    finish(&tally, &before, &after);
    // The session still works afterwards.
    world.calls(100, &[8, 5000]);
}
