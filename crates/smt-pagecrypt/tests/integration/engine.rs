//! The crypto-engine model: it seals and opens exactly as the CPU path
//! does, chains configuration before data in one doorbell, keeps contexts
//! exclusive and bounded, suppresses unsignaled configuration completions,
//! holds completions for its latency, and counts what happened.

use std::sync::Arc;
use std::time::{Duration, Instant};

use smt_pagecrypt::engine::{
    Completion, ContextId, CryptoEngine, EngineConfig, EngineError, EngineQueue, PostError, Status,
    Wqe,
};
use smt_pagecrypt::{
    Crc64, IntegrityError, KeyRing, Page, PageCipher, XtsKey, PAGE_SIZE, SEALED_LEN,
};

fn page(seed: u8) -> Page {
    let mut p = [0u8; PAGE_SIZE];
    for (i, b) in p.iter_mut().enumerate() {
        *b = (i as u8) ^ seed;
    }
    p
}

fn config() -> EngineConfig {
    EngineConfig {
        contexts: 16,
        queue_depth: 4,
        latency: Duration::from_micros(5),
        throughput: Some(4e9),
        crc: Crc64::Nvme,
        versioned: false,
    }
}

/// Polls until a completion is visible (generous: a busy machine may
/// deschedule the worker for a while).
fn wait(q: &mut EngineQueue) -> Completion {
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(c) = q.poll() {
            return c;
        }
        assert!(Instant::now() < give_up, "no completion in 30 s");
        std::thread::yield_now();
    }
}

fn boxed(bytes: &[u8]) -> Box<[u8; SEALED_LEN]> {
    let mut b = Box::new([0u8; SEALED_LEN]);
    b[..bytes.len()].copy_from_slice(bytes);
    b
}

#[test]
fn the_engine_and_the_cpu_agree_both_ways() {
    let ring = KeyRing::new(XtsKey::random());
    let mut cpu = PageCipher::new(ring.clone(), Crc64::Nvme);
    let engine = Arc::new(CryptoEngine::start(config(), &ring).unwrap());
    let mut q = engine.open_queue().unwrap();
    let key = ring.current();

    // CPU seals, engine opens.
    let sealed = cpu.seal(0x4000, 0, &page(1));
    q.post_open(key, cpu.tweak(0x4000, 0), sealed.bytes.clone(), 7)
        .unwrap();
    let done = wait(&mut q);
    assert_eq!((done.user, &done.status), (7, &Status::Done));
    assert_eq!(&done.buf.unwrap()[..PAGE_SIZE], &page(1)[..]);

    // Engine seals, CPU opens.
    q.post_seal(key, cpu.tweak(0x5000, 0), boxed(&page(2)), 8)
        .unwrap();
    let done = wait(&mut q);
    let bytes = done.buf.unwrap();
    assert_eq!(bytes, sealed_by_cpu(&mut cpu, 0x5000, &page(2)));

    let c = engine.counters();
    assert_eq!((c.doorbells, c.reconfigurations), (2, 2));
    assert_eq!((c.unsignaled, c.config_completions), (2, 0));
    assert_eq!(c.data_completions, 2);
    assert_eq!(c.bytes, 2 * SEALED_LEN as u64);
    assert_eq!(q.outstanding(), 0);
}

fn sealed_by_cpu(cpu: &mut PageCipher, addr: u64, p: &Page) -> Box<[u8; SEALED_LEN]> {
    cpu.seal(addr, 0, p).bytes
}

#[test]
fn a_tampered_page_fails_in_the_engine_and_is_counted() {
    let ring = KeyRing::new(XtsKey::random());
    let mut cpu = PageCipher::new(ring.clone(), Crc64::Xz);
    let engine = Arc::new(
        CryptoEngine::start(
            EngineConfig {
                crc: Crc64::Xz,
                ..config()
            },
            &ring,
        )
        .unwrap(),
    );
    let mut q = engine.open_queue().unwrap();
    let mut bytes = cpu.seal(0, 0, &page(3)).bytes;
    bytes[100] ^= 0x40;
    q.post_open(ring.current(), cpu.tweak(0, 0), bytes, 1)
        .unwrap();
    let done = wait(&mut q);
    assert!(matches!(
        done.status,
        Status::Integrity(IntegrityError::Checksum { .. })
    ));
    assert_eq!(engine.counters().integrity_failures, 1);
}

#[test]
fn the_pool_bounds_outstanding_requests_and_exhaustion_is_counted() {
    let ring = KeyRing::new(XtsKey::random());
    let engine = Arc::new(CryptoEngine::start(config(), &ring).unwrap());
    let mut q = engine.open_queue().unwrap();
    let key = ring.current();
    let tweak = smt_pagecrypt::Tweak::address(0);
    for i in 0..4 {
        q.post_seal(key, tweak, boxed(&page(4)), i).unwrap();
    }
    assert_eq!(q.pool_free(), 0);
    let refused = q.post_seal(key, tweak, boxed(&page(4)), 9).unwrap_err();
    assert_eq!(refused.error, PostError::PoolExhausted { depth: 4 });
    assert_eq!(
        &refused.buf[..PAGE_SIZE],
        &page(4)[..],
        "the buffer comes back"
    );
    assert_eq!(engine.counters().pool_exhausted, 1);
    // Completions come back in order and free their contexts.
    for i in 0..4 {
        assert_eq!(wait(&mut q).user, i);
    }
    assert_eq!(q.pool_free(), 4);
    q.post_seal(key, tweak, boxed(&page(4)), 9).unwrap();
    assert_eq!(wait(&mut q).user, 9);
}

#[test]
fn contexts_are_bounded_across_queues() {
    let ring = KeyRing::new(XtsKey::random());
    let engine = Arc::new(CryptoEngine::start(config(), &ring).unwrap());
    let queues: Vec<_> = (0..4).map(|_| engine.open_queue().unwrap()).collect();
    assert_eq!(
        engine.open_queue().unwrap_err(),
        EngineError::OutOfContexts { needed: 4, left: 0 }
    );
    drop(queues);
}

#[test]
fn a_data_wqe_needs_a_configuration_chained_before_it() {
    let ring = KeyRing::new(XtsKey::random());
    let engine = Arc::new(CryptoEngine::start(config(), &ring).unwrap());
    let mut q = engine.open_queue().unwrap();
    let context = q.take_context().unwrap();
    q.post_chain(vec![Wqe::Seal {
        context,
        buf: boxed(&page(5)),
        user: 3,
    }])
    .unwrap();
    assert_eq!(wait(&mut q).status, Status::Unconfigured(context));
    assert_eq!(engine.counters().unconfigured, 1);
    // A context the queue does not hold is refused before the doorbell.
    assert_eq!(
        q.post_chain(vec![Wqe::Seal {
            context: ContextId(999),
            buf: boxed(&page(5)),
            user: 4,
        }]),
        Err(PostError::NotHeld(ContextId(999)))
    );
}

#[test]
fn signaled_configurations_complete_on_their_own() {
    let ring = KeyRing::new(XtsKey::random());
    let engine = Arc::new(CryptoEngine::start(config(), &ring).unwrap());
    let mut q = engine.open_queue().unwrap();
    q.set_signal_config(true);
    q.post_seal(
        ring.current(),
        smt_pagecrypt::Tweak::address(0),
        boxed(&page(6)),
        5,
    )
    .unwrap();
    let first = wait(&mut q);
    assert!(first.buf.is_none(), "the configuration completes first");
    let second = wait(&mut q);
    assert_eq!(second.user, 5);
    let c = engine.counters();
    assert_eq!((c.config_completions, c.unsignaled), (1, 0));
}

#[test]
fn completions_are_held_for_the_engine_latency() {
    let ring = KeyRing::new(XtsKey::random());
    let latency = Duration::from_millis(20);
    let engine = Arc::new(
        CryptoEngine::start(
            EngineConfig {
                latency,
                ..config()
            },
            &ring,
        )
        .unwrap(),
    );
    let mut q = engine.open_queue().unwrap();
    let posted = Instant::now();
    q.post_seal(
        ring.current(),
        smt_pagecrypt::Tweak::address(0),
        boxed(&page(7)),
        1,
    )
    .unwrap();
    wait(&mut q);
    assert!(posted.elapsed() >= latency);
}

#[test]
fn key_rotation_reaches_the_engine() {
    let mut ring = KeyRing::new(XtsKey::random());
    let engine = Arc::new(CryptoEngine::start(config(), &ring).unwrap());
    let new_key = XtsKey::random();
    let id = ring.rotate(new_key.clone());
    let mut cpu = PageCipher::new(ring.clone(), Crc64::Nvme);
    let sealed = cpu.seal(0, 0, &page(8));
    assert_eq!(sealed.key, id);
    let mut q = engine.open_queue().unwrap();
    q.post_open(id, cpu.tweak(0, 0), sealed.bytes.clone(), 1)
        .unwrap();
    assert_eq!(
        wait(&mut q).status,
        Status::Integrity(IntegrityError::UnknownKey(id))
    );
    engine.load_key(id, new_key);
    q.post_open(id, cpu.tweak(0, 0), sealed.bytes.clone(), 2)
        .unwrap();
    assert_eq!(wait(&mut q).status, Status::Done);
}
