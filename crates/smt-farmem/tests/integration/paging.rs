//! The userfaultfd front end against a real memory node: an array and a
//! key-value store paged in on touch, through a local cache smaller than
//! the region, with both requesters and both crypto paths. Needs root
//! (userfaultfd); prints SKIPPED otherwise.

use crate::common;

use std::sync::Arc;

use common::{small_node, PSK};
use smt_farmem::paging::{self, Fill, RegionConfig, RemoteRegion};
use smt_farmem::workload::{ArrayIndirection, KvLayout, SplitMix64, SCAN_LEN, VALUE_LEN};
use smt_farmem::{psk_endpoint, Crypto, Pipeline, Requester};
use smt_pagecrypt::engine::{CryptoEngine, EngineConfig};
use smt_pagecrypt::{Crc64, KeyRing, PageCipher, XtsKey, PAGE_SIZE};

fn skip() -> bool {
    match paging::available() {
        Ok(()) => false,
        Err(why) => {
            println!("SKIPPED: userfaultfd is not available to this process ({why}); run as root");
            true
        }
    }
}

fn pipeline(
    node: std::net::SocketAddr,
    ring: &KeyRing,
    requester: Requester,
    engine: bool,
) -> Pipeline {
    let cipher = PageCipher::new(ring.clone(), Crc64::Nvme);
    let crypto = match engine {
        false => Crypto::Cpu,
        true => {
            let e = Arc::new(CryptoEngine::start(EngineConfig::default(), ring).unwrap());
            Crypto::Engine(e.open_queue().unwrap())
        }
    };
    let ep = psk_endpoint(&PSK, requester.busy_poll()).unwrap();
    Pipeline::new(ep, node, cipher, crypto)
}

#[test]
fn an_array_pages_in_through_a_small_cache_in_every_mode() {
    if skip() {
        return;
    }
    let node = small_node();
    let ring = KeyRing::new(XtsKey::random());
    let array = ArrayIndirection::new(64, 6, 11);
    let mut first = true;
    for requester in Requester::ALL {
        for engine in [false, true] {
            let config = RegionConfig {
                pages: 64,
                cache_pages: 16,
                requester,
                remote_base: 0x100_0000,
            };
            let mut fill = |i: usize, p: &mut smt_pagecrypt::Page| array.fill(i, p);
            let how = match first {
                true => Fill::With(&mut fill),
                false => Fill::AlreadyThere,
            };
            first = false;
            let region =
                RemoteRegion::create(pipeline(node.addr, &ring, requester, engine), config, how)
                    .unwrap();
            // Every entry, in order: each page faults in once per pass.
            for i in (0..array.entries).step_by(97) {
                assert_eq!(region.u64_at(i as usize), array.entry(i));
            }
            // Random chains from several threads at once.
            std::thread::scope(|s| {
                for t in 0..4u64 {
                    let (region, array) = (&region, &array);
                    s.spawn(move || {
                        let mut g = SplitMix64::new(t);
                        for _ in 0..50 {
                            let start = g.below(array.entries);
                            assert_eq!(array.run(region, start), array.expected(start));
                        }
                    });
                }
            });
            let stats = region.stats();
            assert!(
                stats.fetches >= 64,
                "{requester} engine {engine}: {stats:?}"
            );
            assert!(stats.evictions >= stats.fetches - 16, "{stats:?}");
            region.close();
        }
    }
}

#[test]
fn a_key_value_store_lives_in_remote_memory() {
    if skip() {
        return;
    }
    let node = small_node();
    let ring = KeyRing::new(XtsKey::random());
    let kv = KvLayout::new(400, 5);
    let bytes = kv.build();
    let config = RegionConfig {
        pages: kv.pages(),
        cache_pages: kv.pages() / 4,
        requester: Requester::Yield,
        remote_base: 0x200_0000,
    };
    let mut fill = |i: usize, p: &mut smt_pagecrypt::Page| {
        p.copy_from_slice(&bytes[i * PAGE_SIZE..(i + 1) * PAGE_SIZE]);
    };
    let region = RemoteRegion::create(
        pipeline(node.addr, &ring, Requester::Yield, true),
        config,
        Fill::With(&mut fill),
    )
    .unwrap();
    let mut v = [0u8; VALUE_LEN];
    let mut g = SplitMix64::new(9);
    for _ in 0..200 {
        let r = g.below(400) as usize;
        assert_eq!(kv.get(region.bytes(), &kv.key(r), &mut v), Some(r));
        assert_eq!(v, kv.value(r));
    }
    assert_eq!(
        kv.scan(region.bytes(), &kv.key(17), SCAN_LEN),
        kv.scan(&bytes, &kv.key(17), SCAN_LEN)
    );
    assert!(region.stats().evictions > 0);
}
