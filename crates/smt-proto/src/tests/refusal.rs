//! Refused requests are reported as refused (issue #24, item 2): a request
//! the server does not admit hears OVERLOADED ("did not run, safe to
//! retry") at once, and a RESEND about it, even after the replay guard's
//! floor has slid past its ID, hears OVERLOADED again, never ABANDONED
//! ("may have run").

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use crate::sim::{Link, Outcome, Pair, Verdict};
use crate::wire::{PacketType, Packets};
use crate::{Config, DropReason, RpcError};

const KEYS: crate::sim::TestKeys = crate::sim::TestKeys::Keyed(7);
const LIMIT: Duration = Duration::from_secs(30);

fn payload(len: usize, tag: u64) -> Vec<u8> {
    let mut v = vec![0x5a; len];
    v[..8].copy_from_slice(&tag.to_le_bytes());
    v
}

/// Whether the datagram holds a packet about message `id` of a type in
/// `types` (its packets walked as the receiver splits them).
fn holds(bytes: &[u8], id: u64, types: &[PacketType]) -> bool {
    Packets::new(bytes, true).any(|p| {
        p.len() >= 28
            && types.contains(&PacketType(p[13]))
            && u64::from_be_bytes(p[20..28].try_into().unwrap_or([0; 8])) == id
    })
}

/// The burst in miniature: request A holds the server's one place
/// for a partial request, so B's first packet is not admitted; B's
/// OVERLOADED and its RESENDs are lost while 100 later requests slide the
/// server's 64-ID replay window past B's ID; then B's next RESEND gets
/// through. Before the fix the server dropped B silently and answered that
/// RESEND with ABANDONED, as if B might have run.
#[test]
fn a_request_refused_at_admission_is_overloaded_never_abandoned() {
    let server_cfg = Config {
        max_incoming_per_peer: 1,
        replay_window: 64,
        ..Config::default()
    };
    let mut pair = Pair::new(Config::default(), server_cfg, KEYS, Link::default(), 31);
    let (a_id, b_id) = (2u64, 4u64);
    let hold_a = Rc::new(Cell::new(true));
    let cut_b = Rc::new(Cell::new(true));
    let (hold, cut) = (hold_a.clone(), cut_b.clone());
    let server = pair.server_addr;
    pair.intercept = Some(Box::new(move |d| {
        let to_server = d.to == server;
        // A's second segment, so A stays partial at the server.
        let a_rest = to_server
            && Packets::new(&d.bytes, true).any(|p| {
                p.len() > 44
                    && PacketType(p[13]) == PacketType::DATA
                    && u64::from_be_bytes(p[20..28].try_into().unwrap_or([0; 8])) == a_id
                    && p[4..8] != [0, 0, 0, 0]
            });
        let about_b = if to_server {
            holds(&d.bytes, b_id, &[PacketType::RESEND])
        } else {
            holds(
                &d.bytes,
                b_id,
                &[
                    PacketType::OVERLOADED,
                    PacketType::RPC_UNKNOWN,
                    PacketType::ABANDONED,
                ],
            )
        };
        if (hold.get() && a_rest) || (cut.get() && about_b) {
            Verdict::Drop
        } else {
            Verdict::Deliver
        }
    }));
    // Two segments: the second starts at a non-zero segment offset.
    let a = pair.call(&payload(100_000, 1));
    pair.run_for(Duration::from_millis(3));
    let b = pair.call(&payload(3000, 2));
    pair.run_for(Duration::from_millis(3));
    let over_limit = pair.server.stats().drops.get(DropReason::OverLimit);
    assert!(over_limit >= 1, "B's first packet was not admitted");
    assert_eq!(pair.server.stats().requests_refused, 1, "and refused");

    // A completes; then 100 small requests slide the window past B's ID.
    hold_a.set(false);
    pair.run_for(Duration::from_millis(100));
    assert!(matches!(pair.outcomes.get(&a), Some(Outcome::Response(_))));
    // One at a time: sent in ID order, none falls behind the window.
    let mut later = Vec::new();
    for t in 10..110u64 {
        later.push(pair.call(&payload(100, t)));
        pair.run_for(Duration::from_millis(1));
    }
    pair.run_for(Duration::from_millis(10));
    for h in &later {
        assert!(matches!(pair.outcomes.get(h), Some(Outcome::Response(_))));
    }
    assert!(!pair.outcomes.contains_key(&b), "B has heard nothing yet");

    // B's next RESEND gets through.
    cut_b.set(false);
    assert!(pair.run(LIMIT));
    assert_eq!(
        pair.outcomes.get(&b),
        Some(&Outcome::Failed(RpcError::Overloaded)),
        "refused, so it did not run: Overloaded, not Abandoned"
    );
    assert_eq!(pair.executions.get(&2), None, "B never ran");
}
