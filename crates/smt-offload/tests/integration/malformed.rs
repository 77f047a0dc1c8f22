//! Descriptors are input: whatever a queue holds, the engine counts and
//! drops what it cannot use, keeps going, and never panics.

use crate::common;

use common::key;
use smt_offload::stream::smt_segments;
use smt_offload::{
    CipherSuite, ContextId, DropReason, Engine, EngineConfig, Outcome, PostError, QueueId, Resync,
    Segment, SplitMix64, TxDescriptor, MAX_SEGMENT_PAYLOAD,
};

const Q: QueueId = QueueId(0);

fn engine(capacity: usize) -> Engine {
    Engine::new(EngineConfig {
        queues: 1,
        context_capacity: capacity,
    })
}

fn create(ctx: u32, seq: u64) -> TxDescriptor {
    TxDescriptor::CreateContext {
        ctx: ContextId(ctx),
        info: Box::new(key(CipherSuite::Aes128Gcm, 1, seq)),
    }
}

fn segment(ctx: u32, payload: Vec<u8>, mss: u16) -> TxDescriptor {
    TxDescriptor::Segment(Segment {
        ctx: ContextId(ctx),
        header: Vec::new(),
        payload,
        mss,
    })
}

fn resync(ctx: u32, seq: u64, offset: usize, prefix: Vec<u8>) -> TxDescriptor {
    TxDescriptor::Resync(Resync {
        ctx: ContextId(ctx),
        record_seq: seq,
        offset,
        record_prefix: prefix,
    })
}

/// Posts `desc` and returns what the engine did with it.
fn apply(engine: &mut Engine, desc: TxDescriptor) -> Outcome {
    engine.post(Q, desc).unwrap();
    engine.step(Q).unwrap()
}

fn records() -> Vec<u8> {
    smt_segments(&[7; 100], 40).remove(0).payload
}

fn bad(why: &'static str) -> Outcome {
    Outcome::Dropped(DropReason::BadDescriptor(why))
}

#[test]
fn context_table_misuse_is_counted() {
    let mut e = engine(1);
    let no_ctx = Outcome::Dropped(DropReason::NoContext(ContextId(9)));
    assert_eq!(apply(&mut e, segment(9, records(), 100)), no_ctx);
    assert_eq!(apply(&mut e, resync(9, 0, 0, Vec::new())), no_ctx);
    assert_eq!(
        apply(&mut e, TxDescriptor::DestroyContext { ctx: ContextId(9) }),
        no_ctx
    );
    assert_eq!(apply(&mut e, create(1, 0)), Outcome::Applied);
    assert_eq!(apply(&mut e, create(1, 0)), bad("create for a slot in use"));
    assert_eq!(
        apply(&mut e, create(2, 0)),
        Outcome::Dropped(DropReason::TableFull)
    );
    let c = e.counters();
    assert_eq!(
        (
            c.tx_tls_drop_no_ctx,
            c.tx_tls_drop_bad_desc,
            c.tx_tls_ctx_full
        ),
        (3, 1, 1)
    );
    assert_eq!((c.tx_tls_ctx, e.contexts_live()), (1, 1));
}

#[test]
fn malformed_segments_are_counted() {
    let mut e = engine(1);
    apply(&mut e, create(0, 0));
    assert_eq!(
        apply(&mut e, segment(0, Vec::new(), 100)),
        bad("segment without payload")
    );
    assert_eq!(
        apply(&mut e, segment(0, records(), 0)),
        bad("segment with mss 0")
    );
    assert_eq!(
        apply(&mut e, segment(0, vec![0; MAX_SEGMENT_PAYLOAD + 1], 100)),
        bad("segment larger than 64 KiB")
    );
    // None of these touched the context: a good segment still goes out.
    assert_eq!(apply(&mut e, segment(0, records(), 100)), Outcome::Sent);
    assert_eq!(e.counters().tx_tls_drop_bad_desc, 3);
}

/// Bytes that are not a record header where the context expects one: the
/// segment is dropped, later segments too, until a resync.
#[test]
fn lost_framing_needs_a_resync() {
    let mut e = engine(1);
    apply(&mut e, create(0, 0));
    let lost = Outcome::Dropped(DropReason::BadFraming);
    assert_eq!(apply(&mut e, segment(0, vec![0x42; 64], 100)), lost);
    let unsynced = Outcome::Dropped(DropReason::NoSyncData);
    assert_eq!(apply(&mut e, segment(0, records(), 100)), unsynced);
    assert_eq!(apply(&mut e, resync(0, 5, 0, Vec::new())), Outcome::Applied);
    assert_eq!(apply(&mut e, segment(0, records(), 100)), Outcome::Sent);
    let c = e.counters();
    assert_eq!(
        (c.tx_tls_drop_bad_framing, c.tx_tls_drop_no_sync_data),
        (1, 1)
    );
    assert!(e.poll_wire().is_some());
}

#[test]
fn resyncs_that_cannot_be_applied() {
    let r = records();
    let mut e = engine(1);
    apply(&mut e, create(0, 0));
    let cases = [
        (
            resync(0, 0, 10, r[..9].to_vec()),
            "prefix length differs from offset",
        ),
        (
            resync(0, 0, 0, r[..3].to_vec()),
            "prefix length differs from offset",
        ),
        (
            resync(0, 0, 70_000, vec![0x17; 70_000]),
            "offset past the largest record",
        ),
        (
            resync(0, 0, 10, vec![0x42; 10]),
            "prefix does not start with a record header",
        ),
        (
            resync(0, 0, 62, r[..62].to_vec()),
            "prefix covers a whole record",
        ),
    ];
    for (desc, why) in cases {
        assert_eq!(apply(&mut e, desc), bad(why));
        // Each leaves the context unsynchronised.
        let unsynced = Outcome::Dropped(DropReason::NoSyncData);
        assert_eq!(apply(&mut e, segment(0, r.clone(), 100)), unsynced);
    }
    // The first record is 62 bytes (40 data + 22); a prefix of 61 is fine.
    assert_eq!(
        apply(&mut e, resync(0, 0, 61, r[..61].to_vec())),
        Outcome::Applied
    );
    assert_eq!(
        apply(&mut e, segment(0, r[61..].to_vec(), 100)),
        Outcome::Sent
    );
}

#[test]
fn posting_to_a_missing_queue_is_the_callers_error() {
    let mut e = engine(1);
    let err = e.post(QueueId(3), create(0, 0)).unwrap_err();
    assert_eq!(
        err,
        PostError::NoSuchQueue {
            queue: QueueId(3),
            queues: 1
        }
    );
    assert!(err.to_string().contains("0..1"));
    assert_eq!(e.step(QueueId(3)), None);
}

/// Sequence numbers wrap rather than overflow (TLS forbids reaching the
/// end; the engine must still not panic when told to).
#[test]
fn sequence_number_wraps_without_panic() {
    let mut e = engine(1);
    apply(&mut e, create(0, u64::MAX));
    assert_eq!(apply(&mut e, segment(0, records(), 100)), Outcome::Sent);
}

/// Random descriptors on four contexts: random kinds, lengths, offsets,
/// bytes (sometimes real records, sometimes cut or garbage). The engine
/// must stay up and account for every descriptor.
#[test]
fn random_descriptors_never_panic() {
    let mut rng = SplitMix64::new(0xbad);
    let mut e = Engine::new(EngineConfig {
        queues: 2,
        context_capacity: 3,
    });
    let good = records();
    let (mut sent, mut applied, mut dropped) = (0, 0, 0);
    for _ in 0..20_000 {
        let desc = random_descriptor(&mut rng, &good);
        let q = QueueId(rng.below(2) as u16);
        e.post(q, desc).unwrap();
        match e.step(q).unwrap() {
            Outcome::Sent => sent += 1,
            Outcome::Applied => applied += 1,
            Outcome::Dropped(_) => dropped += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    let c = e.counters();
    assert_eq!(c.drops(), dropped);
    assert_eq!(common::wire(&mut e).len(), sent);
    assert!(sent > 0 && applied > 0 && dropped > 0);
    println!("random descriptors: {sent} sent, {applied} applied, {dropped} dropped\n{c}");
}

fn random_descriptor(rng: &mut SplitMix64, good: &[u8]) -> TxDescriptor {
    let ctx = rng.below(4) as u32;
    match rng.below(8) {
        0 => create(ctx, rng.next_u64()),
        1 => TxDescriptor::DestroyContext {
            ctx: ContextId(ctx),
        },
        2 | 3 => {
            let offset = random_len(rng, good.len());
            let prefix = match rng.below(3) {
                0 => Vec::new(),
                1 => good[..offset.min(good.len())].to_vec(),
                _ => {
                    let len = random_len(rng, good.len());
                    random_bytes(rng, len)
                }
            };
            resync(ctx, rng.below(4), offset, prefix)
        }
        _ => {
            let payload = match rng.below(3) {
                0 => good.to_vec(),
                1 => good[random_len(rng, good.len()).min(good.len())..].to_vec(),
                _ => {
                    let len = random_len(rng, 3000);
                    random_bytes(rng, len)
                }
            };
            segment(ctx, payload, rng.below(3000) as u16)
        }
    }
}

fn random_len(rng: &mut SplitMix64, around: usize) -> usize {
    match rng.below(10) {
        0 => 0,
        1 => rng.below(100_000) as usize,
        _ => rng.below(around as u64 + 1) as usize,
    }
}

fn random_bytes(rng: &mut SplitMix64, len: usize) -> Vec<u8> {
    let mut b = vec![0; len];
    rng.fill(&mut b);
    // Now and then a plausible record header in front.
    if len >= 5 && rng.below(2) == 0 {
        b[..3].copy_from_slice(&[0x17, 0x03, 0x03]);
    }
    b
}
