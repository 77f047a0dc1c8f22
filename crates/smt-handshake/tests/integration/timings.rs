//! Benchmark-ish: prints the median microseconds of each step of the
//! exchange (compare seed 001 Table 2). No assertions on time.
//!
//! `cargo test -p smt-handshake --release --test integration timings:: -- --nocapture`

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use smt_handshake::{KeyPool, StaticKey, Ticket, ZeroRttClient};

const ROUNDS: usize = 300;

fn median(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e6
}

/// Times `step` over ROUNDS inputs from `setup`; setup time is excluded.
fn time<I, O>(mut setup: impl FnMut() -> I, mut step: impl FnMut(I) -> O) -> f64 {
    let samples = (0..ROUNDS)
        .map(|_| {
            let input = setup();
            let start = Instant::now();
            let out = step(input);
            let elapsed = start.elapsed();
            drop(out);
            elapsed
        })
        .collect();
    median(samples)
}

#[test]
fn print_step_timings() {
    let world = World::with_replay_capacity(100_000);
    let big_pool = KeyPool::new(64);
    let empty_pool = KeyPool::new(0);
    let (chain, key) = world.pki.leaf(&[NAME]);
    let static_key = StaticKey::generate();

    let rows = [
        (
            "pool take (pre-generated)",
            time(|| big_pool.refill(), |_| big_pool.take()),
        ),
        (
            "pool take (empty: inline keygen)",
            time(|| (), |_| empty_pool.take()),
        ),
        (
            "client start, no FS (ECDH + derivations)",
            time(
                || big_pool.refill(),
                |_| ZeroRttClient::start_at(&world.verified, &big_pool, false, at(NOW + 1)),
            ),
        ),
        (
            "client start, FS",
            time(
                || big_pool.refill(),
                |_| ZeroRttClient::start_at(&world.verified, &big_pool, true, at(NOW + 1)),
            ),
        ),
        (
            "server accept, no FS (ECDH, hash check, replay, derivations)",
            time(
                || ZeroRttClient::start_at(&world.verified, &big_pool, false, at(NOW + 1)).0,
                |hello| world.server.accept(&hello, at(NOW + 1)).unwrap(),
            ),
        ),
        (
            "server accept, FS (+ pooled e_s, FS ECDH, MAC)",
            time(
                || {
                    world.server.pool().refill();
                    ZeroRttClient::start_at(&world.verified, &big_pool, true, at(NOW + 1)).0
                },
                |hello| world.server.accept(&hello, at(NOW + 1)).unwrap(),
            ),
        ),
        (
            "client finish (FS ECDH, MAC check, derivations)",
            time(
                || {
                    world.server.pool().refill();
                    let (hello, _, pending) =
                        ZeroRttClient::start_at(&world.verified, &big_pool, true, at(NOW + 1));
                    let reply = world
                        .server
                        .accept(&hello, at(NOW + 1))
                        .unwrap()
                        .reply
                        .unwrap()
                        .0;
                    (pending, reply)
                },
                |(pending, reply)| pending.finish(&reply).unwrap(),
            ),
        ),
        (
            "ticket verify (chain, name, ECDSA verify)",
            time(
                || (),
                |_| {
                    world
                        .ticket
                        .verify(&world.pki.ca_der, NAME, at(NOW + 1))
                        .unwrap()
                },
            ),
        ),
        (
            "ticket issue (ECDSA sign + self-check)",
            time(
                || (),
                |_| Ticket::issue(&static_key, &chain, &key, NAME, at(NOW), HOUR).unwrap(),
            ),
        ),
    ];
    println!("\nSMT-ticket 0-RTT step timings, median of {ROUNDS} (µs):");
    for (step, micros) in rows {
        println!("  {step:<62} {micros:>8.2}");
    }
    println!("  client pool: {:?}", big_pool.stats());
    println!("  server pool: {:?}", world.server.pool().stats());
}
