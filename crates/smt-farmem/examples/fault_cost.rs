//! What one remote page costs, by parts, on this machine: a blocking
//! `read_page` round trip (SMT RPC + open) and a page fault through the
//! userfaultfd front end, for each requester and crypto path.
//!
//! ```text
//! cargo run --release -p smt-farmem --example fault_cost [-- PAGES]
//! ```

use std::sync::Arc;
use std::time::Instant;

use smt::keys::AeadAlgorithm;
use smt::{EndpointConfig, LocalEndpoint, ServerAcceptor};
use smt_farmem::paging::{Fill, RegionConfig, RemoteRegion};
use smt_farmem::{psk_endpoint, Crypto, PageClient, Pipeline, Requester};
use smt_memnode::{MemNode, StoreConfig};
use smt_pagecrypt::engine::{CryptoEngine, EngineConfig};
use smt_pagecrypt::{Crc64, KeyRing, PageCipher, XtsKey, PAGE_SIZE};

const PSK: [u8; 32] = [0x17; 32];

fn main() {
    let pages: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let mut ep =
        LocalEndpoint::bind(([127, 0, 0, 1], 0).into(), EndpointConfig::default()).unwrap();
    ep.set_handshake_acceptor(Box::new(
        ServerAcceptor::new(None, None).with_psk(&PSK, AeadAlgorithm::Aes128Gcm),
    ));
    let node = MemNode::new(ep, StoreConfig::default()).spawn().unwrap();
    let ring = KeyRing::new(XtsKey::random());
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average: {}", loadavg.trim());
    for busy in [false, true] {
        let ep = psk_endpoint(&PSK, busy).unwrap();
        let mut c = PageClient::cpu(ep, node.addr, PageCipher::new(ring.clone(), Crc64::Nvme));
        c.write_page(0, &[1; PAGE_SIZE]).unwrap();
        let t = Instant::now();
        for _ in 0..pages {
            c.read_page(0).unwrap();
        }
        println!(
            "read_page round trip (busy_poll {busy}): {:.1} µs",
            t.elapsed().as_secs_f64() * 1e6 / pages as f64
        );
    }
    let mut filled = false;
    for requester in Requester::ALL {
        for engine in [false, true] {
            let cipher = PageCipher::new(ring.clone(), Crc64::Nvme);
            let crypto = match engine {
                false => Crypto::Cpu,
                true => {
                    let e = Arc::new(CryptoEngine::start(EngineConfig::default(), &ring).unwrap());
                    Crypto::Engine(e.open_queue().unwrap())
                }
            };
            let ep = psk_endpoint(&PSK, requester.busy_poll()).unwrap();
            let config = RegionConfig {
                pages,
                cache_pages: 1,
                requester,
                remote_base: 1 << 30,
            };
            let mut fill = |i: usize, p: &mut smt_pagecrypt::Page| p.fill(i as u8);
            let how = if filled {
                Fill::AlreadyThere
            } else {
                Fill::With(&mut fill)
            };
            filled = true;
            let region =
                RemoteRegion::create(Pipeline::new(ep, node.addr, cipher, crypto), config, how)
                    .unwrap();
            let t = Instant::now();
            for i in 0..pages {
                assert_eq!(region.bytes()[i * PAGE_SIZE], i as u8);
            }
            println!(
                "page fault, one thread ({requester}, {}): {:.1} µs",
                if engine { "engine" } else { "cpu" },
                t.elapsed().as_secs_f64() * 1e6 / pages as f64
            );
        }
    }
}
