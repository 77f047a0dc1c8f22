//! Fuzz harness bodies (cargo-fuzz targets in `fuzz/` call these). Built
//! with `--cfg fuzzing` and in tests, so the harnesses are exercised by
//! `cargo test` too.

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
}
