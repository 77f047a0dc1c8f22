//! Scenario tests on the two-endpoint harness that check internal state
//! the public API does not show; `crates/smt-proto/tests/integration/scenarios.rs` has
//! the rest.

use std::time::Duration;

use crate::sim::{Link, Pair, TestKeys};

const KEYS: TestKeys = TestKeys::Keyed(7);
const LIMIT: Duration = Duration::from_secs(30);

fn payload(len: usize, tag: u64) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len)
        .map(|i| (i as u64).wrapping_mul(31).wrapping_add(tag) as u8)
        .collect();
    if len >= 8 {
        v[..8].copy_from_slice(&tag.to_le_bytes());
    }
    v
}

#[test]
fn server_frees_every_rpc_after_acks() {
    let mut pair = Pair::with_keys(KEYS, Link::default(), 10);
    for i in 0..100u64 {
        pair.call(&payload(2000, i));
    }
    assert!(pair.run(LIMIT));
    pair.run_for(Duration::from_millis(5));
    assert_eq!(pair.server.server_rpcs(), 0);
    assert_eq!(pair.client.client_rpcs(), 0);
    assert_eq!(pair.server.incoming_buffered_bytes(), 0);
}
