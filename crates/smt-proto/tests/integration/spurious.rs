//! No spurious retransmission (issue #12 item 4): with nothing lost on the
//! way, neither side retransmits a packet or drops one as a duplicate or
//! a replay, however long a message waits in its sender's queue.
//!
//! `smt demo` at 64 KiB with 32 outstanding made the server retransmit
//! thousands of packets the client then dropped as replays (until commit
//! 56b8228). A client whose response waited behind 31 others at the
//! server (SRPT sends them one after the other: ~5 ms for 2 MiB on a busy
//! machine) counted that wait as silence and after `resend_ticks` asked
//! for the whole response; by the time the RESEND arrived the server had
//! started sending it, and it sent again every packet already on its way
//! (a client that reads its socket late makes that window wide). Here the
//! server is paced (a CPU-bound sender, so responses queue inside it, as
//! in the demo) and each direction takes 1 ms (the client reading late).
//! Deterministic: a virtual clock and a lossless link, no timing
//! thresholds.

use std::collections::HashMap;
use std::time::Duration;

use smt_proto::{DropReason, RpcHandle, Stats};
use smt_relay::{KeyKind, Link, Outcome, Pair, Side};

const AES: KeyKind = KeyKind::Aes128(12);
const SIZE: usize = 64 << 10;
const OUTSTANDING: usize = 32;
const LIMIT: Duration = Duration::from_secs(30);

/// Retransmitted packets and packets dropped as already received.
fn waste(s: &Stats) -> (u64, u64) {
    let dups = s.drops.get(DropReason::Duplicate) + s.drops.get(DropReason::Replay);
    (s.retransmitted_packets, dups)
}

/// `OUTSTANDING` callers, each starting its next 64 KiB echo as soon as
/// its last one ends, for `time`; then every call is let finish. Checks
/// every response and returns how many calls completed.
fn closed_loop(pair: &mut Pair, time: Duration) -> usize {
    let mut sent: HashMap<RpcHandle, Vec<u8>> = HashMap::new();
    let mut call = |pair: &mut Pair, n: u64| {
        let mut req = vec![n as u8; SIZE];
        req[..8].copy_from_slice(&n.to_le_bytes());
        sent.insert(pair.call(&req), req);
    };
    let mut n = 0;
    while n < OUTSTANDING as u64 {
        n += 1;
        call(pair, n);
    }
    let end = pair.now + time;
    let mut seen = 0;
    while pair.now < end {
        pair.run_for(Duration::from_micros(20));
        for _ in seen..pair.outcomes.len() {
            n += 1;
            call(pair, n);
        }
        seen = pair.outcomes.len();
    }
    assert!(pair.run(LIMIT), "calls still running after {LIMIT:?}");
    for (h, req) in &sent {
        assert!(
            pair.outcomes[h] == Outcome::Response(req.clone()),
            "call {h:?} did not get its echo"
        );
    }
    sent.len()
}

/// A clean 10 Gbit/s link with `latency` each way, whose server sends at
/// `server_bps`.
fn pair_with_server_pace(server_bps: u64, latency: Duration) -> Pair {
    let link = Link {
        latency,
        ..Link::default()
    };
    let mut pair = Pair::with_keys(AES, link, 12);
    pair.pace(Side::Server, server_bps);
    pair
}

#[test]
fn responses_queued_behind_others_at_the_server_are_sent_once() {
    // 32 responses of 64 KiB at 2 Gbit/s: the last one leaves ~8.6 ms
    // after the first, past the client's first RESEND (5 ticks of 1 ms);
    // a response is seen 1 ms after it left, and a RESEND 1 ms after that.
    let mut pair = pair_with_server_pace(2_000_000_000, Duration::from_millis(1));
    let calls = closed_loop(&mut pair, Duration::from_millis(200));
    let (client, server) = (waste(pair.client.stats()), waste(pair.server.stats()));
    println!(
        "{calls} calls in {:?}; client retransmitted {}, dropped {} duplicates; \
         server retransmitted {}, dropped {}; client RESENDs {}",
        pair.elapsed(),
        client.0,
        client.1,
        server.0,
        server.1,
        pair.client.stats().resends_sent,
    );
    assert_eq!(pair.link_stats.lost, 0);
    assert!(calls > 500, "only {calls} calls completed");
    assert_eq!(
        server,
        (0, 0),
        "server: (retransmitted, duplicates dropped)"
    );
    assert_eq!(
        client,
        (0, 0),
        "client: (retransmitted, duplicates dropped)"
    );
}
