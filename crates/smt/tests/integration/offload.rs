//! TLS offload on SMT's send and receive paths (issue 15 items 2 and 4),
//! on the deterministic simulator (`smt_proto::sim::Pair`) with the
//! engine model as each side's NIC: the driver's code the UDP path uses
//! (`smt::offload::{TxOffload, RxOffload}`), with the deterministic engine
//! in place of the worker threads.
//!
//! - **Differential**: the same seeded runs (random message mixes and
//!   sizes, loss, reordering and duplication from the link, retransmissions,
//!   rekeys) with records sealed in software and with the NIC sealing them
//!   put the very same datagrams on the link, byte for byte, in the same
//!   order, and deliver the same outcomes; with receive offload on as well.
//! - **Vectors**: RFC 8448 §3's records through the driver's transmit path
//!   come out as the RFC prints them, whole and split over two packets.
//! - **Receive offload**: in-order packets are decrypted by the NIC;
//!   a lost packet makes it fall back and resync; a record that arrives
//!   partly decrypted is completed in software.
//! - **Interoperation**: an offloading side and a software side talk.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use smt::offload::{DeterministicNic, RxOffload, TxOffload};
use smt_crypto::test_vectors::*;
use smt_crypto::{AeadAlgorithm, AesGcmCipher, TrafficKey};
use smt_proto::offload::{RecordPos, TxRecords};
use smt_proto::record::SeqLayout;
use smt_proto::sim::Nic;
use smt_proto::{Config, Endpoint, Role, SessionKeys, Stats};
use smt_relay::{Datagram, KeyKind, Link, Outcome, Pair, Side, SplitMix64, Verdict};

const QUEUES: u16 = 2;

/// A NIC for a simulated side: transmit through the driver's offload path
/// and the deterministic engine, receive through the receive engine.
struct SimNic {
    tx: Option<TxOffload<DeterministicNic>>,
    rx: Option<RxOffload>,
}

impl SimNic {
    fn new(tx: bool, rx: bool, contexts: usize) -> Self {
        Self {
            tx: tx
                .then(|| TxOffload::new(DeterministicNic::new(QUEUES, contexts), QUEUES, contexts)),
            rx: rx.then(|| RxOffload::new(contexts)),
        }
    }
}

impl Nic for SimNic {
    fn transmit(
        &mut self,
        ep: &mut Endpoint,
        to: SocketAddr,
        datagram: Vec<u8>,
        out: &mut Vec<Vec<u8>>,
    ) {
        let records = ep.take_tx_records();
        let (Some(tx), Some(records)) = (&mut self.tx, records) else {
            out.push(datagram);
            return;
        };
        tx.post(ep, &records, &datagram);
        tx.ring();
        while let Some((dest, bytes)) = tx.nic().wire() {
            assert_eq!(dest, to, "the segment's header kept the destination");
            out.push(bytes);
        }
    }

    fn receive(&mut self, ep: &mut Endpoint, now: Instant, from: SocketAddr, datagram: &[u8]) {
        match &mut self.rx {
            Some(rx) => rx.receive(ep, now, std::iter::once((from, datagram))),
            None => ep.handle_datagram(now, from, datagram),
        }
    }
}

/// Shares a side's NIC with the test, which reads its counters after the
/// run.
#[derive(Clone)]
struct Shared(Arc<std::sync::Mutex<SimNic>>);

impl Nic for Shared {
    fn transmit(&mut self, ep: &mut Endpoint, to: SocketAddr, d: Vec<u8>, out: &mut Vec<Vec<u8>>) {
        self.0.lock().unwrap().transmit(ep, to, d, out);
    }

    fn receive(&mut self, ep: &mut Endpoint, now: Instant, from: SocketAddr, d: &[u8]) {
        self.0.lock().unwrap().receive(ep, now, from, d);
    }
}

impl Shared {
    fn new(tx: bool, rx: bool, contexts: usize) -> Self {
        Self(Arc::new(std::sync::Mutex::new(SimNic::new(
            tx, rx, contexts,
        ))))
    }

    fn tx_counters(&self) -> smt::offload::TxCounters {
        self.0
            .lock()
            .unwrap()
            .tx
            .as_ref()
            .map(TxOffload::counters)
            .unwrap_or_default()
    }

    fn tx_stats(&self) -> smt::offload::TxOffloadStats {
        self.0
            .lock()
            .unwrap()
            .tx
            .as_ref()
            .map(TxOffload::stats)
            .unwrap_or_default()
    }

    fn rx_counters(&self) -> smt::offload::RxCounters {
        self.0
            .lock()
            .unwrap()
            .rx
            .as_ref()
            .map(RxOffload::counters)
            .unwrap_or_default()
    }
}

/// Which offload a run's two sides use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mode {
    tx: bool,
    rx: bool,
}

const SOFTWARE: Mode = Mode {
    tx: false,
    rx: false,
};

/// One scenario, run in any mode: a message mix, a link, keys.
#[derive(Clone, Debug)]
struct Scenario {
    seed: u64,
    link: Link,
    keys: KeyKind,
    config: Config,
    /// (request length, response length) of each RPC, in order; at most
    /// `parallel` in flight.
    rpcs: Vec<usize>,
    parallel: usize,
    contexts: usize,
}

/// What a run produced: every datagram on the link, each RPC's outcome,
/// the endpoints' counters, and the NICs.
struct Run {
    wire: Vec<Datagram>,
    outcomes: Vec<Outcome>,
    stats: [Stats; 2],
    /// The client's key epoch with the server at the end.
    epoch: u64,
    nics: [Shared; 2],
}

fn message(seed: u64, len: usize) -> Vec<u8> {
    let mut data = vec![0u8; len];
    SplitMix64::new(seed).fill(&mut data);
    data
}

impl Scenario {
    fn run(&self, mode: Mode) -> Run {
        let mut config = self.config.clone();
        // Offload sends each DATA packet alone; the software run does too,
        // so both put the same datagrams on the link.
        config.coalesce = false;
        config.tx_offload = mode.tx;
        let mut pair = Pair::new(
            config.clone(),
            config,
            self.keys,
            self.link.clone(),
            self.seed,
        );
        pair.capture = Some(Vec::new());
        let nics = [0, 1].map(|_| Shared::new(mode.tx, mode.rx, self.contexts));
        if mode != SOFTWARE {
            pair.nics = [0, 1].map(|i| Some(Box::new(nics[i].clone()) as Box<dyn Nic>));
        }
        // The echo server answers with a response of its own length.
        pair.responder = Box::new(|req| {
            let len = u64::from_le_bytes(req[..8].try_into().unwrap()) as usize;
            message(len as u64 ^ 0xec40, len)
        });
        let mut handles = Vec::new();
        let mut next = 0;
        while next < self.rpcs.len() || pair.client.client_rpcs() > 0 {
            while next < self.rpcs.len() && pair.client.client_rpcs() < self.parallel {
                let mut req = message(self.seed + next as u64, self.rpcs[next].max(8));
                req[..8].copy_from_slice(
                    &(self.rpcs[(next * 7 + 3) % self.rpcs.len()] as u64).to_le_bytes(),
                );
                handles.push(pair.call(&req));
                next += 1;
            }
            pair.run_for(Duration::from_micros(200));
            assert!(
                pair.elapsed() < Duration::from_secs(120),
                "stuck ({mode:?})"
            );
        }
        pair.run(Duration::from_secs(1));
        let outcomes = handles.iter().map(|h| pair.outcomes[h].clone()).collect();
        Run {
            wire: pair.capture.take().unwrap(),
            outcomes,
            stats: [*pair.client.stats(), *pair.server.stats()],
            epoch: pair
                .client
                .peer_stats(pair.server_addr)
                .map_or(0, |s| s.key_epoch),
            nics,
        }
    }
}

/// Message lengths with the layout's edges: empty, one byte, one record
/// exactly, one record and a byte, a segment's worth, several segments.
fn mix(rng: &mut SplitMix64, n: usize) -> Vec<usize> {
    (0..n)
        .map(|_| match rng.below(8) {
            0 => [0, 1, 16384, 16385, 49152, 49153][rng.below(6) as usize],
            1 | 2 => rng.below(300_000) as usize,
            _ => rng.below(3000) as usize,
        })
        .collect()
}

fn lossy() -> Link {
    Link {
        loss: 0.02,
        reorder: 0.03,
        duplicate: 0.01,
        ..Link::default()
    }
}

fn assert_same(software: &Run, offload: &Run, what: &str) {
    assert_eq!(software.outcomes, offload.outcomes, "{what}: outcomes");
    assert_eq!(
        software.wire.len(),
        offload.wire.len(),
        "{what}: datagram count"
    );
    for (i, (a, b)) in software.wire.iter().zip(&offload.wire).enumerate() {
        assert!(
            a == b,
            "{what}: datagram {i} of {} differs",
            software.wire.len()
        );
    }
    for o in &offload.outcomes {
        assert!(matches!(o, Outcome::Response(_)), "{what}: {o:?}");
    }
}

/// The differential: software sealing and the NIC put the same bytes on
/// the link, across random mixes with loss (so retransmissions, some
/// resuming a record in the middle), reordering, duplicates, and, with a
/// tiny ID space, key updates every ~127 messages (a new context each).
#[test]
fn offload_puts_the_same_bytes_on_the_wire_as_software_sealing() {
    let mut rng = SplitMix64::new(0x0ff1);
    let mut mid_record = 0;
    for round in 0..6u64 {
        let rekeying = round % 2 == 1;
        let scenario = Scenario {
            seed: 100 + round,
            link: lossy(),
            keys: match rekeying {
                true => KeyKind::Aes128Rekeying(round),
                false if round % 3 == 0 => KeyKind::Aes256(round),
                false => KeyKind::Aes128(round),
            },
            config: Config {
                seq_layout: match rekeying {
                    true => SeqLayout::new(56).unwrap(),
                    false => SeqLayout::DEFAULT,
                },
                record_size: [16384, 16384, 1000][round as usize % 3],
                ..Config::default()
            },
            rpcs: mix(&mut rng, if rekeying { 300 } else { 120 }),
            parallel: 1 + rng.below(12) as usize,
            contexts: 16,
        };
        let software = scenario.run(SOFTWARE);
        let offload = scenario.run(Mode {
            tx: true,
            rx: false,
        });
        assert_same(&software, &offload, &format!("round {round} (tx)"));
        let both = scenario.run(Mode { tx: true, rx: true });
        assert_same(&software, &both, &format!("round {round} (tx + rx)"));
        let (tx, driver) = (both.nics[0].tx_counters(), both.nics[0].tx_stats());
        assert_eq!(tx.drops(), 0, "round {round}: {tx}");
        assert!(tx.tx_tls_encrypted_packets > 0);
        assert_eq!(driver.dropped, 0);
        mid_record += driver.resyncs_mid_record + both.nics[1].tx_stats().resyncs_mid_record;
        if rekeying {
            assert!(both.epoch >= 2, "round {round}: rekeyed");
            assert!(
                tx.tx_tls_ctx > u64::from(QUEUES),
                "round {round}: new contexts per epoch"
            );
        }
        println!(
            "differential round {round}: {} datagrams identical, key epoch {}; client NIC: {} packets, {} resyncs ({} mid-record), {} contexts",
            both.wire.len(),
            both.epoch,
            tx.tx_tls_encrypted_packets,
            tx.tx_tls_ooo,
            driver.resyncs_mid_record,
            tx.tx_tls_ctx
        );
    }
    assert!(
        mid_record > 0,
        "some retransmission resumed a record mid-way"
    );
}

/// RFC 8448 §3's client record through the driver's transmit path: a
/// context created from the core's key, the record posted with its body in
/// plaintext and an empty tag, whole or split over two packets.
#[test]
fn rfc8448_record_through_the_driver_equals_the_rfc() {
    let peer: SocketAddr = "10.9.9.9:9".parse().unwrap();
    let key = TrafficKey::new(
        AeadAlgorithm::Aes128Gcm,
        &RFC8448_CLIENT_AP_KEY,
        RFC8448_CLIENT_AP_IV,
    )
    .unwrap();
    let other = TrafficKey::random(AeadAlgorithm::Aes128Gcm);
    let mut core = Endpoint::new(Config::default()).unwrap();
    let keys = SessionKeys::new(
        Role::Client,
        Arc::new(AesGcmCipher::new(&key)),
        Arc::new(AesGcmCipher::new(&other)),
    );
    core.install_session(peer, keys).unwrap();
    let mut posted = vec![0x17, 0x03, 0x03, 0x00, 0x43];
    posted.extend_from_slice(&RFC8448_APP_PAYLOAD);
    posted.push(CONTENT_TYPE_APPLICATION_DATA);
    posted.extend_from_slice(&[0; 16]);
    let header = [0xab; 44];
    for cut in [posted.len(), 1, 5, 6, 40, 55, 56, 71] {
        let mut tx = TxOffload::new(DeterministicNic::new(1, 4), 1, 4);
        let mut sent = Vec::new();
        let mut at = 0;
        for to in [cut, posted.len()] {
            if to == at {
                continue;
            }
            let mut datagram = header.to_vec();
            datagram.extend_from_slice(&posted[at..to]);
            let pos = |offset: usize| match offset == posted.len() {
                true => RecordPos { seq: 1, offset: 0 },
                false => RecordPos {
                    seq: 0,
                    offset: offset as u32,
                },
            };
            let records = TxRecords {
                peer,
                epoch: 0,
                id: 2,
                payload: 44..datagram.len(),
                start: pos(at),
                end: pos(to),
                wire_offset: at as u64,
                retransmit: false,
            };
            tx.post(&core, &records, &datagram);
            tx.ring();
            let (dest, bytes) = tx.nic().wire().expect("the packet left");
            assert_eq!((dest, &bytes[..44]), (peer, &header[..]));
            sent.extend_from_slice(&bytes[44..]);
            at = to;
        }
        assert_eq!(sent, RFC8448_CLIENT_AP_RECORD_SEQ0, "cut at {cut}");
        assert_eq!(tx.counters().tx_tls_ooo, 0, "the second packet continues");
    }
}

/// One message with receive offload on the server: in order, its packets
/// are decrypted by the NIC and its records taken without the AEAD.
#[test]
fn packets_in_order_are_decrypted_by_the_nic() {
    let mut pair = Pair::with_keys(KeyKind::Aes128(7), Link::default(), 7);
    let nic = Shared::new(false, true, 8);
    pair.nics[Side::Server as usize] = Some(Box::new(nic.clone()));
    let req = message(1, 500_000);
    let h = pair.call(&req);
    assert!(pair.run(Duration::from_secs(5)));
    assert_eq!(pair.outcomes[&h], Outcome::Response(req));
    let (s, rx) = (*pair.server.stats(), nic.rx_counters());
    // 31 records: the context is made on the message's first packet, in
    // sync from there.
    assert_eq!(s.records_offloaded, 31, "{rx}");
    assert_eq!(s.records_partially_offloaded, 0);
    let data_packets = pair.client.stats().data_packets_tx;
    assert_eq!(rx.rx_tls_decrypted_packets, data_packets, "{rx}");
    println!("in order: {rx}");
}

/// Drops the `n`th DATA packet of `from`'s first message once.
fn drop_nth_data(from: SocketAddr, n: usize) -> Box<dyn FnMut(&Datagram) -> Verdict> {
    let mut seen = 0;
    Box::new(move |d| {
        let data = d.bytes.get(13) == Some(&0x10) && d.from == from;
        if data {
            seen += 1;
            if seen == n + 1 {
                return Verdict::Drop;
            }
        }
        Verdict::Deliver
    })
}

/// A lost packet: the record it belongs to arrives partly decrypted (the
/// packets before the loss) and is completed in software once the
/// retransmission comes; the NIC, out of sync after the gap, asks about the
/// next record header it sees (the next segment's start) and follows the
/// records from there; the core answers once it has opened up to there
/// (after the retransmission), and the NIC decrypts again from the record
/// after the one it is in. On a 1 Gbit/s link the 4 MB message is still
/// arriving then.
#[test]
fn a_lost_packet_makes_a_partly_decrypted_record_and_a_resync() {
    let link = Link {
        bandwidth_bps: 1_000_000_000,
        ..Link::default()
    };
    let mut pair = Pair::with_keys(KeyKind::Aes128(8), link, 8);
    let nic = Shared::new(false, true, 8);
    pair.nics[Side::Server as usize] = Some(Box::new(nic.clone()));
    pair.intercept = Some(drop_nth_data(pair.client_addr, 5));
    let req = message(2, 4_000_000);
    let h = pair.call(&req);
    assert!(pair.run(Duration::from_secs(5)));
    assert_eq!(pair.outcomes[&h], Outcome::Response(req));
    let (s, rx) = (*pair.server.stats(), nic.rx_counters());
    // Partly decrypted: the record with the gap, and the first record
    // after the resync (the packet it starts in also ends the record the
    // NIC skipped, so it came up undecrypted).
    assert_eq!(s.records_partially_offloaded, 2, "{s:?}");
    // 245 records; the NIC missed the first segment's 3 and the one it
    // was in when the answer came.
    assert!(s.records_offloaded >= 240, "{s:?}\n{rx}");
    assert_eq!(rx.rx_tls_ooo, 1, "{rx}");
    assert_eq!(
        (rx.rx_tls_resync_req_pkt, rx.rx_tls_resync_res_ok),
        (1, 1),
        "{rx}"
    );
    assert_eq!(s.drops.total(), 0, "{:?}", s.drops);
    println!(
        "one loss: {} records by the NIC, {} partly, {} in software\n{rx}",
        s.records_offloaded,
        s.records_partially_offloaded,
        s.records_opened - s.records_offloaded
    );
}

/// Receive offload on both sides of a lossy, reordering link with many
/// messages in flight: every RPC completes with the right data, and the
/// counters show the NIC's work, its fallbacks and resyncs.
#[test]
fn receive_offload_with_loss_and_reordering() {
    let mut rng = SplitMix64::new(0x0bad);
    let scenario = Scenario {
        seed: 7,
        link: lossy(),
        keys: KeyKind::Aes128(7),
        config: Config::default(),
        rpcs: mix(&mut rng, 150),
        parallel: 4,
        contexts: 8,
    };
    let run = scenario.run(Mode {
        tx: false,
        rx: true,
    });
    assert!(run
        .outcomes
        .iter()
        .all(|o| matches!(o, Outcome::Response(_))));
    let mut total = (0, 0, 0);
    for side in 0..2 {
        let (s, rx) = (run.stats[side], run.nics[side].rx_counters());
        println!(
            "side {side}: records {} by the NIC, {} partly, {} in software; {rx}",
            s.records_offloaded,
            s.records_partially_offloaded,
            s.records_opened - s.records_offloaded
        );
        assert!(
            rx.rx_tls_resync_req_pkt > 0 && rx.rx_tls_resync_res_ok > 0,
            "{rx}"
        );
        total.0 += s.records_offloaded;
        total.1 += s.records_partially_offloaded;
        total.2 += rx.rx_tls_ooo;
    }
    assert!(total.0 > 0 && total.1 > 0 && total.2 > 0, "{total:?}");
}

/// An offloading client (transmit and receive) and a software server, and
/// the other way round, with the software side coalescing as usual.
#[test]
fn offload_and_software_sides_interoperate() {
    for offload_side in [Side::Client, Side::Server] {
        let config = Config {
            tx_offload: true,
            ..Config::default()
        };
        let (client, server) = match offload_side {
            Side::Client => (config, Config::default()),
            Side::Server => (Config::default(), config),
        };
        let mut pair = Pair::new(client, server, KeyKind::Aes128(3), lossy(), 3);
        let nic = Shared::new(true, true, 8);
        pair.nics[offload_side as usize] = Some(Box::new(nic.clone()));
        let mut rng = SplitMix64::new(3);
        let mut calls = Vec::new();
        for (i, len) in mix(&mut rng, 60).into_iter().enumerate() {
            let req = message(i as u64, len);
            calls.push((pair.call(&req), req));
            if i % 4 == 3 {
                assert!(pair.run(Duration::from_secs(20)));
            }
        }
        assert!(pair.run(Duration::from_secs(20)));
        for (h, req) in calls {
            assert_eq!(
                pair.outcomes[&h],
                Outcome::Response(req),
                "{offload_side:?}"
            );
        }
        let tx = nic.tx_counters();
        assert!(tx.tx_tls_encrypted_packets > 0 && tx.drops() == 0, "{tx}");
        for ep in [&pair.client, &pair.server] {
            let auth = ep.stats().drops.get(smt::DropReason::AuthFailure);
            assert_eq!(auth, 0, "{offload_side:?}: nothing failed to authenticate");
        }
    }
}
