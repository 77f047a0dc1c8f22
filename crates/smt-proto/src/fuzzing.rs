//! Fuzz harness bodies (cargo-fuzz targets in `fuzz/` call these). Built
//! with `--cfg fuzzing` and in tests, so the harnesses are exercised by
//! `cargo test` too. They live here, not in `fuzz/`, because they drive
//! crate-private state (message reassembly) and must follow its changes.

mod handshake;
mod reassembly;

pub use handshake::handshake_packets;
pub use reassembly::reassembly_ops;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::crypto::{NullCipher, PacketCipher};
use crate::{Config, Endpoint, Event, Role, SessionKeys};

/// Feeds an endpoint a sequence of datagrams taken from `data`, with the
/// null cipher, so the fuzzer can reach reassembly, record opening and the
/// RPC state machine. Layout of `data`: repeated
/// `[op: u8][len: u16 big-endian][bytes]`;
/// `op` picks the sender (known peer, unknown peer), advances the clock,
/// and sometimes answers pending requests. Must never panic. `start` is the
/// caller's clock reading (the core never reads a clock).
pub fn endpoint_datagrams(start: Instant, data: &[u8]) {
    let peer: SocketAddr = "192.0.2.1:4000".parse().expect("literal");
    let stranger: SocketAddr = "192.0.2.2:4000".parse().expect("literal");
    let config = Config {
        max_incoming_per_peer: 64,
        unscheduled_bytes: 8192,
        grant_window: 8192,
        max_resend_bytes: 8192,
        ..Config::default()
    };
    let Ok(mut ep) = Endpoint::new(config) else {
        return;
    };
    let a: Arc<dyn PacketCipher> = Arc::new(NullCipher);
    let b: Arc<dyn PacketCipher> = Arc::new(NullCipher);
    let _ = ep.install_session(peer, SessionKeys::new(Role::Server, a, b));
    let mut now = start;
    let mut buf = vec![0u8; ep.config().max_datagram_size];
    let _ = ep.send_request(now, peer, b"server-initiated");
    let mut rest = data;
    while let [op, hi, lo, tail @ ..] = rest {
        let n = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        let (datagram, next) = tail.split_at(n);
        rest = next;
        let from = if op & 1 == 0 { peer } else { stranger };
        ep.handle_datagram(now, from, datagram);
        if op & 0x10 != 0 {
            now += Duration::from_millis(u64::from(op >> 5) + 1);
            ep.handle_timeout(now);
        }
        while ep.poll_transmit(now, &mut buf).is_some() {}
        while let Some(ev) = ep.poll_event() {
            if let (Event::Request { rpc, .. }, true) = (ev, op & 0x08 != 0) {
                let _ = ep.send_response(now, rpc, b"ok");
            }
        }
    }
}

/// A cursor over fuzz input: big-endian integers and byte runs, `None`
/// once the input runs out.
struct Input<'a> {
    rest: &'a [u8],
}

impl<'a> Input<'a> {
    fn new(data: &'a [u8]) -> Self {
        Self { rest: data }
    }

    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.rest.len() < n {
            return None;
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Some(head)
    }

    fn uint(&mut self, n: usize) -> Option<u32> {
        Some(self.bytes(n)?.iter().fold(0, |v, &b| v << 8 | u32::from(b)))
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.bytes(1)?[0])
    }

    fn u16(&mut self) -> Option<u16> {
        self.uint(2).map(|v| v as u16)
    }

    fn u24(&mut self) -> Option<u32> {
        self.uint(3)
    }

    fn u32(&mut self) -> Option<u32> {
        self.uint(4)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    #[allow(clippy::disallowed_methods)] // a test may read the clock
    fn endpoint_harness_survives_random_input() {
        let start = std::time::Instant::now();
        let mut x: u64 = 0x1234_5678;
        for _ in 0..2000 {
            let mut data = vec![0u8; (x % 600) as usize];
            for b in &mut data {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            super::endpoint_datagrams(start, &data);
        }
    }

    /// xorshift bytes: the same inputs on every run.
    fn pseudo_random(x: &mut u64, len: usize) -> Vec<u8> {
        (0..len)
            .map(|_| {
                *x ^= *x << 13;
                *x ^= *x >> 7;
                *x ^= *x << 17;
                *x as u8
            })
            .collect()
    }

    #[test]
    fn reassembly_harness_survives_random_input() {
        let mut x: u64 = 0x9e37_79b9;
        for _ in 0..300 {
            let len = (x % 400) as usize;
            super::reassembly_ops(&pseudo_random(&mut x, len));
        }
    }

    #[test]
    fn reassembly_harness_completes_a_message_in_any_order() {
        // 3000 bytes, no padding, 1000-byte records, mss 500, 4 KiB
        // unscheduled, ID 4; then packets 5, 0, 5 again, a grant, and the
        // harness's final phase delivers the rest.
        let mut seed = vec![0x00, 0x0b, 0xb8, 0, 0x03, 0xe7, 0x01, 0xf4, 0x01, 0x00, 4];
        seed.extend_from_slice(&[0, 0, 5, 0, 0, 0, 0x08, 0, 5, 4, 0, 0, 0x20, 0]);
        super::reassembly_ops(&seed);
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // a test may read the clock
    fn handshake_harness_survives_random_input() {
        let start = std::time::Instant::now();
        let mut x: u64 = 0x51ed_2701;
        for _ in 0..300 {
            let len = (x % 600) as usize;
            super::handshake_packets(start, &pseudo_random(&mut x, len));
        }
    }
}
