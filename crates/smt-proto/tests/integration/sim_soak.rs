//! A soak on the simulator mirroring the real-socket relay test: 10 000
//! RPCs of mixed sizes, 128 outstanding, 5 % loss and 10 % reordering.

use std::time::Duration;

use smt_proto::sim::{Link, Outcome, Pair};
use smt_relay::KeyKind;

#[test]
fn ten_thousand_rpcs_with_loss_and_reordering_all_complete_once() {
    let link = Link {
        loss: 0.05,
        reorder: 0.10,
        reorder_delay: Duration::from_micros(300),
        ..Link::default()
    };
    let mut pair = Pair::with_keys(KeyKind::Aes128(5), link, 5);
    const SIZES: [usize; 6] = [8, 64, 1024, 3000, 16_384, 40_000];
    let mut issued = 0u64;
    let mut calls = Vec::new();
    while issued < 10_000 {
        while pair.client.client_rpcs() < 128 && issued < 10_000 {
            issued += 1;
            let mut req: Vec<u8> = (0..SIZES[issued as usize % SIZES.len()])
                .map(|i| (i as u64 ^ issued) as u8)
                .collect();
            req[..8].copy_from_slice(&issued.to_le_bytes());
            calls.push((pair.call(&req), req));
        }
        pair.run_for(Duration::from_micros(200));
    }
    assert!(pair.run(Duration::from_secs(60)));
    let failed: Vec<_> = calls
        .iter()
        .filter(|(h, req)| pair.outcomes.get(h) != Some(&Outcome::Response(req.clone())))
        .map(|(h, _)| (h, pair.outcomes.get(h)))
        .collect();
    assert!(
        failed.is_empty(),
        "{} failed, first: {:?}",
        failed.len(),
        failed.first()
    );
    assert!(pair.executions.values().all(|&n| n == 1));
}
