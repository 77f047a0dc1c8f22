//! Untrusted bytes never panic: random and mutated tickets, hellos and
//! replies go through every parser and both sides of the exchange.

use crate::common;

use common::*;
use smt_handshake::message::{frame_len, ClientHello0, ServerReply0};
use smt_handshake::{Ticket, ZeroRttClient, ZeroRttClientHandshake, ZeroRttServerHandshake};
use smt_proto::Handshake;

/// xorshift64*: a seeded, dependency-free generator, so a failure
/// reproduces from the printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }

    /// 1 to 4 edits: flip a bit, overwrite a byte, truncate, insert, or
    /// delete. The result differs from `input`.
    fn mutate(&mut self, input: &[u8]) -> Vec<u8> {
        loop {
            let mut out = input.to_vec();
            for _ in 0..1 + self.below(4) {
                let at = self.below(out.len().max(1));
                match self.below(5) {
                    0 if !out.is_empty() => out[at] ^= 1 << self.below(8),
                    1 if !out.is_empty() => out[at] = self.next() as u8,
                    2 => out.truncate(at),
                    3 => out.insert(at.min(out.len()), self.next() as u8),
                    _ if !out.is_empty() => {
                        out.remove(at);
                    }
                    _ => {}
                }
            }
            if out != input {
                return out;
            }
        }
    }
}

const SEED: u64 = 0x5eed_0001_7e57_c0de;

#[test]
fn random_bytes_never_panic_any_parser() {
    let world = World::new();
    let mut rng = Rng(SEED);
    for round in 0..20_000 {
        let len = rng.below(if round % 2 == 0 { 128 } else { 1200 });
        let mut data = rng.bytes(len);
        // Give the parsers valid-looking headers half of the time.
        if round % 4 == 1 && data.len() >= 4 {
            data[..4].copy_from_slice(&[0x01, 0x01, 0x00, 97]);
        }
        if round % 4 == 3 && data.len() >= 6 {
            data[..6].copy_from_slice(&[0x00, 0x01, 0x00, 0x1d, 0x04, 0x03]);
        }
        let _ = Ticket::decode(&data);
        let _ = ClientHello0::decode(&data);
        let _ = ServerReply0::decode(&data);
        let _ = frame_len(&data);
        let _ = Ticket::from_base64(&String::from_utf8_lossy(&data));
        assert!(world.server.accept(&data, at(NOW + 1)).is_err());
    }
}

#[test]
fn mutated_tickets_never_panic_and_never_verify() {
    let world = World::new();
    let original = world.ticket.as_bytes().to_vec();
    let mut rng = Rng(SEED ^ 1);
    let mut decoded = 0;
    for _ in 0..3_000 {
        let mutated = rng.mutate(&original);
        let Ok(ticket) = Ticket::decode(&mutated) else {
            continue;
        };
        decoded += 1;
        let verdict = ticket.verify(&world.pki.ca_der, NAME, at(NOW + 1));
        assert!(
            verdict.is_err(),
            "a mutated ticket verified: {mutated:02x?}"
        );
        let _ = Ticket::from_base64(&ticket.to_base64());
    }
    assert!(
        decoded > 100,
        "mutations should often keep the structure ({decoded})"
    );
    let text = world.ticket.to_base64();
    for _ in 0..3_000 {
        let mutated = rng.mutate(text.as_bytes());
        if let Ok(ticket) = Ticket::from_base64(&String::from_utf8_lossy(&mutated)) {
            if ticket.as_bytes() != original {
                assert!(ticket.verify(&world.pki.ca_der, NAME, at(NOW + 1)).is_err());
            }
        }
    }
}

#[test]
fn mutated_hellos_never_panic_the_server() {
    let world = World::with_replay_capacity(100_000);
    let mut rng = Rng(SEED ^ 2);
    for i in 0..3_000 {
        let (hello, _, _) =
            ZeroRttClient::start_at(&world.verified, &world.client_pool, i % 2 == 0, at(NOW + 5));
        // A changed random or key share may well be accepted (it is just
        // another hello); nothing may panic.
        let _ = world.server.accept(&rng.mutate(&hello), at(NOW + 1));
        let mut adapter = ZeroRttServerHandshake::new(world.server.clone(), at(NOW + 1));
        let mutated = rng.mutate(&hello);
        for chunk in mutated.chunks(1 + rng.below(40)) {
            if adapter.read(chunk).is_err() {
                break;
            }
        }
    }
}

#[test]
fn mutated_replies_are_always_refused() {
    let world = World::with_replay_capacity(100_000);
    let mut rng = Rng(SEED ^ 3);
    for _ in 0..1_500 {
        let (hello, _, pending) =
            ZeroRttClient::start_at(&world.verified, &world.client_pool, true, at(NOW + 5));
        let (reply, _) = world
            .server
            .accept(&hello, at(NOW + 1))
            .unwrap()
            .reply
            .unwrap();
        let mutated = rng.mutate(&reply);
        assert!(pending.finish(&mutated).is_err(), "{mutated:02x?}");
    }
    for _ in 0..1_500 {
        let mut client =
            ZeroRttClientHandshake::new_at(&world.verified, &world.client_pool, true, at(NOW + 5));
        let len = rng.below(200);
        let noise = rng.bytes(len);
        for chunk in noise.chunks(1 + rng.below(70)) {
            if client.read(chunk).is_err() {
                break;
            }
        }
        assert!(client.take_fs_keys().is_none());
    }
}
