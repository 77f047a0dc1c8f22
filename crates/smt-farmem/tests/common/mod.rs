//! A memory node on loopback and clients for it.

#![allow(dead_code)]

use std::sync::Arc;

use smt::keys::AeadAlgorithm;
use smt::{EndpointConfig, LocalEndpoint, ServerAcceptor};
use smt_farmem::{psk_endpoint, Crypto, PageClient, Pipeline};
use smt_memnode::{MemNode, RunningNode, StoreConfig};
use smt_pagecrypt::engine::{CryptoEngine, EngineConfig};
use smt_pagecrypt::{Crc64, KeyRing, Page, PageCipher, XtsKey, PAGE_SIZE};

pub const PSK: [u8; 32] = [0x42; 32];

pub fn node(config: StoreConfig) -> RunningNode {
    let mut ep = LocalEndpoint::bind(([127, 0, 0, 1], 0).into(), EndpointConfig::default())
        .expect("bind the memory node");
    ep.set_handshake_acceptor(Box::new(
        ServerAcceptor::new(None, None).with_psk(&PSK, AeadAlgorithm::Aes128Gcm),
    ));
    MemNode::new(ep, config)
        .spawn()
        .expect("start the memory node")
}

pub fn small_node() -> RunningNode {
    node(StoreConfig {
        capacity_pages: 4096,
        address_limit: 1 << 30,
    })
}

/// A client with a fresh key, decrypting on the CPU or on an engine.
pub fn client(node: &RunningNode, crc: Crc64, engine: bool, versioned: bool) -> PageClient {
    client_with_ring(node, KeyRing::new(XtsKey::random()), crc, engine, versioned)
}

pub fn client_with_ring(
    node: &RunningNode,
    ring: KeyRing,
    crc: Crc64,
    engine: bool,
    versioned: bool,
) -> PageClient {
    let cipher = PageCipher::new(ring.clone(), crc).versioned(versioned);
    let crypto = match engine {
        false => Crypto::Cpu,
        true => {
            let config = EngineConfig {
                crc,
                versioned,
                queue_depth: 8,
                ..EngineConfig::default()
            };
            let engine = Arc::new(CryptoEngine::start(config, &ring).expect("engine"));
            Crypto::Engine(engine.open_queue().expect("a queue"))
        }
    };
    let endpoint = psk_endpoint(&PSK, false).expect("client endpoint");
    PageClient::new(Pipeline::new(endpoint, node.addr, cipher, crypto))
}

pub fn page(seed: u64) -> Page {
    let mut p = [0u8; PAGE_SIZE];
    for (i, chunk) in p.chunks_mut(8).enumerate() {
        let x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i as u64;
        chunk.copy_from_slice(&x.to_le_bytes());
    }
    p
}
