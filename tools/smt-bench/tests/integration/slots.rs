//! Every system's slots carry concurrent RPCs of different sizes without
//! mixing up responses (a pipelined connection that handed a response to
//! the wrong slot would show as a length mismatch).

use smt_bench::systems::{self, Slot, System};

const SLOTS: usize = 8;
const CALLS: usize = 50;

/// Runs CALLS calls on each slot at once, slot i sending 100 + 37 i bytes.
async fn exercise<S: Slot>(slots: Vec<S>) {
    let tasks: Vec<_> = slots
        .into_iter()
        .enumerate()
        .map(|(i, mut slot)| {
            tokio::task::spawn_local(async move {
                let size = 100 + 37 * i + (i % 3) * 4000;
                for n in 0..CALLS {
                    let got = slot.call(systems::payload(size)).await;
                    assert_eq!(got.ok(), Some(size), "slot {i}, call {n}");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("slot task");
    }
}

fn on_local_runtime(f: impl std::future::Future<Output = ()>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    tokio::task::LocalSet::new().block_on(&rt, f);
}

#[test]
fn naive_pipelined_tls_matches_responses_to_requests() {
    on_local_runtime(async {
        let (server, slots) = systems::tls::start_tls_pipelined_naive(SLOTS)
            .await
            .expect("start");
        exercise(slots).await;
        server.stop();
    });
}

#[test]
fn coalescing_pipelined_tls_matches_responses_to_requests() {
    on_local_runtime(async {
        let (server, slots) = systems::tls::start_tls_pipelined(SLOTS)
            .await
            .expect("start");
        exercise(slots).await;
        server.stop();
    });
}

#[test]
fn coalescing_pipelined_tls_carries_large_and_empty_messages() {
    on_local_runtime(async {
        let (server, mut slots) = systems::tls::start_tls_pipelined(2).await.expect("start");
        let mut big = slots.pop().expect("two slots");
        let mut empty = slots.pop().expect("two slots");
        let size = 1 << 20;
        let (a, b) = tokio::join!(big.call(systems::payload(size)), empty.call(&[]));
        assert_eq!(a.ok(), Some(size));
        assert_eq!(b.ok(), Some(0));
        server.stop();
    });
}

#[test]
fn pooled_and_quic_slots_echo_concurrently() {
    on_local_runtime(async {
        let (server, slots) = systems::tls::start_tls_pool(SLOTS).await.expect("tls");
        exercise(slots).await;
        server.stop();
        let (server, slots) = systems::quic::start_persistent(SLOTS, systems::quic::Mtu::Default)
            .await
            .expect("quic");
        exercise(slots).await;
        server.stop();
        let (server, slots) = systems::quic::start_stream_per_rpc(SLOTS)
            .await
            .expect("quic");
        exercise(slots).await;
        server.stop();
    });
}

#[test]
fn smt_slots_echo_concurrently() {
    on_local_runtime(async {
        let (server, slots) = systems::smt::start(System::SmtNull, SLOTS).expect("smt");
        exercise(slots).await;
        server.stop();
        let (server, slots) = systems::smt_local::start(System::SmtLocal, SLOTS).expect("local");
        exercise(slots).await;
        server.stop();
    });
}
