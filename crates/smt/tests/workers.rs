// A test binary of its own, not a module of tests/integration (issue #27):
// its thousand-RPC runs take turns with each other only (`HEAVY`): beside
// other tests' traffic in one process the lossy run would count
// retransmissions for packets that only waited for a CPU.
//! The worker shape (`smt::workers`) over real UDP sockets on loopback:
//! one client endpoint, one peer, its messages spread over 2-3 shards,
//! with and without loss. Every RPC completes, every request runs once,
//! and the shards run one peer's handlers at the same time.

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::workers::{WorkerConfig, WorkerServer, WorkerStats};
use smt::{Endpoint, EndpointConfig, SessionKeys};
use smt_relay::relay::{Impairment, Relay, RelayConfig};

type Executions = Arc<Mutex<HashMap<u64, u32>>>;

/// The tests that push thousands of RPCs run one at a time: each starts a
/// dispatcher, shards, a client and perhaps a relay, and several at once
/// on a small machine starve each other's threads (the loss test then sees
/// retransmissions for packets that only waited for a CPU).
static HEAVY: Mutex<()> = Mutex::new(());

fn heavy() -> std::sync::MutexGuard<'static, ()> {
    HEAVY.lock().unwrap_or_else(|e| e.into_inner())
}

const SIZES: [usize; 6] = [8, 64, 1024, 3000, 16_384, 100_000];
/// Sizes through the lossy relay: those of `tests/relay.rs`, so its bound
/// on retransmissions (at most twice the drops) applies as it stands.
const LOSSY_SIZES: [usize; 6] = [8, 64, 1024, 3000, 16_384, 40_000];

/// An echo server on `shards` workers that counts executions by the
/// request's first 8 bytes, giving every peer `keys` (the relay's
/// per-client address is not known in advance).
/// The default worker configuration with `n` shards.
fn with_shards(n: usize) -> WorkerConfig {
    let mut config = WorkerConfig::default();
    config.set_shards(n);
    config
}

fn echo_workers(shards: usize, keys: SessionKeys) -> (WorkerServer, Executions) {
    let config = with_shards(shards);
    echo_server(config, keys)
}

/// An echo server shaped by `config`, counting executions as
/// [`echo_workers`] does.
fn echo_server(config: WorkerConfig, keys: SessionKeys) -> (WorkerServer, Executions) {
    let executions: Executions = Arc::default();
    let ex = executions.clone();
    let handler = move |_peer: SocketAddr, data: Vec<u8>| {
        let tag = u64::from_le_bytes(data[..8].try_into().unwrap());
        *ex.lock().unwrap().entry(tag).or_default() += 1;
        data
    };
    let server = WorkerServer::bind("127.0.0.1:0".parse().unwrap(), config, handler).unwrap();
    server
        .set_key_resolver(|| {
            let keys = keys.clone();
            Box::new(move |_peer: SocketAddr| Some(keys.clone()))
        })
        .unwrap();
    (server, executions)
}

/// `rpcs` echo RPCs of [`SIZES`] from one client to `target`, `window` at a
/// time. Returns the number that failed; panics on a wrong response.
fn run_rpcs(client: &Endpoint, target: SocketAddr, rpcs: u64, window: usize) -> u64 {
    common::echo_calls(client, target, rpcs, window, &SIZES)
}

fn check_once(executions: &Executions, rpcs: u64) {
    let ex = executions.lock().unwrap();
    assert_eq!(ex.len() as u64, rpcs, "every request executed");
    let twice: Vec<_> = ex.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "executed more than once: {twice:?}");
}

/// Every shard served a share of the one peer's requests.
fn check_spread(stats: &WorkerStats, rpcs: u64) {
    let served: Vec<u64> = stats.shards.iter().map(|s| s.requests).collect();
    eprintln!(
        "requests per shard: {served:?}; dispatcher: {:?}",
        stats.dispatch
    );
    for s in &stats.shards {
        eprintln!("shard: {:?}", s.counters);
    }
    assert!(served.iter().sum::<u64>() >= rpcs);
    let fair = rpcs / served.len() as u64;
    assert!(
        served.iter().all(|&n| n >= fair / 2),
        "one peer's requests spread over every shard: {served:?}"
    );
}

#[test]
fn thousands_of_rpcs_of_one_peer_spread_over_three_shards() {
    let _one_at_a_time = heavy();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    let (server, executions) = echo_workers(3, sk);
    let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default()).unwrap();
    client.install_session(server.local_addr(), ck).unwrap();
    const RPCS: u64 = 6000;
    let started = Instant::now();
    let failures = run_rpcs(&client, server.local_addr(), RPCS, 64);
    eprintln!("{RPCS} RPCs in {:.2} s", started.elapsed().as_secs_f64());
    assert_eq!(failures, 0, "every RPC completes");
    let stats = server.close();
    check_once(&executions, RPCS);
    check_spread(&stats, RPCS);
    assert_eq!(stats.dispatch.dropped_inbox_full, 0);
}

#[test]
fn thousands_of_rpcs_through_loss_and_reordering_on_two_shards() {
    let _one_at_a_time = heavy();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    let (server, executions) = echo_workers(2, sk);
    let impair = Impairment {
        loss: 0.05,
        reorder: 0.10,
        reorder_delay: Duration::from_micros(300),
        ..Impairment::default()
    };
    let relay = Relay::spawn(RelayConfig::new(server.local_addr()).both_ways(impair)).unwrap();
    let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default()).unwrap();
    client.install_session(relay.local_addr(), ck).unwrap();
    const RPCS: u64 = 4000;
    let started = Instant::now();
    let failures = common::echo_calls(&client, relay.local_addr(), RPCS, 64, &LOSSY_SIZES);
    let relay_stats = relay.stop();
    eprintln!(
        "{RPCS} RPCs in {:.2} s through {relay_stats:?}",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(failures, 0, "every RPC completes");
    let stats = server.close();
    check_once(&executions, RPCS);
    check_spread(&stats, RPCS);
    assert!(
        relay_stats.to_server.lost > 0 && relay_stats.to_client.lost > 0,
        "the relay impaired the traffic"
    );
    // Retransmissions follow losses (as in tests/relay.rs): shards that
    // each see a share of the packets do not retransmit spuriously.
    let dropped = relay_stats.to_server.lost + relay_stats.to_client.lost;
    let client_rexmit = client.stats().unwrap().total.packets.retransmitted;
    let server_rexmit: u64 = stats
        .shards
        .iter()
        .map(|s| s.counters.packets.retransmitted)
        .sum();
    eprintln!(
        "retransmitted: client {client_rexmit}, shards {server_rexmit}; relay dropped {dropped}"
    );
    assert!(client_rexmit + server_rexmit <= 2 * dropped);
    let replays: u64 = stats
        .shards
        .iter()
        .map(|s| s.counters.drops.get(smt::DropReason::Replay))
        .sum();
    eprintln!("replayed packets dropped by the shards' guards: {replays}");
}

/// The point of the shape: two messages of the same peer are worked on at
/// the same moment, on different threads.
#[test]
fn one_peers_handlers_run_at_the_same_time_on_different_shards() {
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (r, m) = (running.clone(), most.clone());
    let handler = move |_peer: SocketAddr, data: Vec<u8>| {
        let now = r.fetch_add(1, Ordering::SeqCst) + 1;
        m.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(30));
        r.fetch_sub(1, Ordering::SeqCst);
        data
    };
    let config = with_shards(2);
    let server = WorkerServer::bind("127.0.0.1:0".parse().unwrap(), config, handler).unwrap();
    let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default()).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    client.install_session(server.local_addr(), ck).unwrap();
    let failures = run_rpcs(&client, server.local_addr(), 20, 4);
    assert_eq!(failures, 0);
    assert_eq!(
        most.load(Ordering::SeqCst),
        2,
        "two handlers at once, one per shard"
    );
}

#[test]
fn a_server_without_workers_is_refused_with_the_fix() {
    let config = with_shards(0);
    let err = WorkerServer::bind("127.0.0.1:0".parse().unwrap(), config, |_, d| d).unwrap_err();
    assert!(err.to_string().contains("at least one worker"), "{err}");
    assert!(
        matches!(&err, smt::Error::Config(e) if e.setting() == "WorkerConfig::shards"),
        "{err:?}"
    );
}

#[test]
fn installing_reflectable_keys_in_the_shards_is_refused() {
    let (_, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    let server =
        WorkerServer::bind("127.0.0.1:0".parse().unwrap(), with_shards(2), |_, d| d).unwrap();
    let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
    server.install_session(peer, sk.clone()).unwrap();
    // The same cipher both ways would let a packet be reflected back.
    let reflect = SessionKeys::new(sk.role, sk.tx.clone(), sk.tx.clone());
    assert!(server.install_session(peer, reflect).is_err());
}

/// The socket-per-core option: many peers, each kept on one shard by the
/// kernel's `SO_REUSEPORT` hash; every peer's calls complete.
#[test]
fn many_peers_on_reuseport_sockets_all_get_answers() {
    let _one_at_a_time = heavy();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    let mut config = with_shards(2);
    config.set_spread(smt::workers::Spread::ReusePort);
    // One session for every peer, as in the relay test: the key resolver.
    let (server, executions) = echo_server(config, sk);
    const PEERS: u64 = 8;
    const PER_PEER: u64 = 250;
    let threads: Vec<_> = (0..PEERS)
        .map(|p| {
            let (ck, to) = (ck.clone(), server.local_addr());
            std::thread::spawn(move || {
                let any = "127.0.0.1:0".parse().unwrap();
                let client = Endpoint::bind(any, EndpointConfig::default()).unwrap();
                client.install_session(to, ck).unwrap();
                for i in 0..PER_PEER {
                    let tag = p * PER_PEER + i + 1;
                    let req = common::request(tag, SIZES[i as usize % SIZES.len()]);
                    assert_eq!(client.call(to, &req).unwrap(), req);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let stats = server.close();
    let served: Vec<u64> = stats.shards.iter().map(|s| s.requests).collect();
    eprintln!("requests per shard (by the kernel's hash of 8 peers): {served:?}");
    check_once(&executions, PEERS * PER_PEER);
}

/// The client runs out of message IDs (10-bit IDs here) and rekeys several
/// times: every shard follows each KEY_UPDATE (it reaches all of them) and
/// every call completes, each request executed once.
#[test]
fn shards_follow_the_clients_key_updates() {
    let _one_at_a_time = heavy();
    use smt_crypto::secrets::session_keys;
    use smt_crypto::{TlsHash, TrafficSecrets};
    let secrets = TrafficSecrets::new(
        TlsHash::Sha256,
        AeadAlgorithm::Aes128Gcm,
        &[0x11; 32],
        &[0x22; 32],
    )
    .unwrap();
    let (ck, sk) = (
        session_keys(smt::Role::Client, &secrets),
        session_keys(smt::Role::Server, &secrets),
    );
    let mut endpoint = EndpointConfig::default();
    // 10 bits of message ID: 512 client IDs per epoch.
    endpoint
        .protocol_mut()
        .set_seq_layout(smt_proto::record::SeqLayout::new(54).unwrap());
    let executions: Executions = Arc::default();
    let ex = executions.clone();
    let handler = move |_peer: SocketAddr, data: Vec<u8>| {
        let tag = u64::from_le_bytes(data[..8].try_into().unwrap());
        *ex.lock().unwrap().entry(tag).or_default() += 1;
        data
    };
    let mut config = with_shards(2);
    config.set_endpoint(endpoint.clone());
    let server = WorkerServer::bind("127.0.0.1:0".parse().unwrap(), config, handler).unwrap();
    let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), endpoint).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    client.install_session(server.local_addr(), ck).unwrap();
    const RPCS: u64 = 2000;
    let failures = run_rpcs(&client, server.local_addr(), RPCS, 32);
    let epoch = client
        .peer_stats(server.local_addr())
        .unwrap()
        .unwrap()
        .key_epoch;
    let stats = server.close();
    assert_eq!(failures, 0, "every RPC completes");
    check_once(&executions, RPCS);
    assert!(
        epoch >= 3,
        "the client rekeyed several times (epoch {epoch})"
    );
    for s in &stats.shards {
        eprintln!("shard drops: {:?}", s.counters.drops);
    }
}

/// Attacker sockets on loopback, each sending bursts of HANDSHAKE openings
/// (to shard 0 under `Spread::Messages`) and DATA packets with fresh
/// message IDs under keys they do not hold (to every shard), paced below
/// what the server can read, until `stop`. Returns the datagrams sent.
fn handshake_and_data_flood(target: SocketAddr, stop: Arc<AtomicBool>) -> u64 {
    use smt_proto::wire::{Body, DataHeader, HandshakeKind, Packet, Repr, DATA_HEADER_LEN};
    let emit = |id: u64, body: Body, payload: usize| {
        let repr = Repr {
            src_port: 0,
            dst_port: target.port(),
            key_phase: false,
            id,
            body,
        };
        let mut buf = vec![0x16; repr.buffer_len() + payload];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        buf
    };
    let hello = Body::Handshake {
        offset: 0,
        ack: 0,
        len: 200,
        kind: HandshakeKind::TLS13,
        flags: 0,
    };
    let data = |len: u32| DataHeader {
        message_len: len,
        message_wire_len: len + 64,
        segment_offset: 0,
        segment_len: len,
        mss: 1428,
        packet_index: 0,
        retransmit: false,
        incoming: len,
        priority: 0,
    };
    let sockets: Vec<std::net::UdpSocket> = (0..16)
        .map(|_| std::net::UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    let (mut sent, mut id) = (0u64, 2u64);
    while !stop.load(Ordering::Relaxed) {
        for s in &sockets {
            for _ in 0..4 {
                let _ = s.send_to(&emit(0, hello, 200), target);
                let body = Body::Data(data(500));
                let _ = s.send_to(&emit(id, body, 500 + 16 - DATA_HEADER_LEN), target);
                id += 2;
                sent += 2;
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    sent
}

/// Admission applies to the sharded server as to a default endpoint: under
/// a flood of unvalidated openings and DATA from 16 addresses, a client
/// whose keys the server installed (a validated peer: its packets go
/// first) completes every call, and the shards drop what exceeds the
/// per-batch budget for strangers as `OverBudget`, on every shard, for
/// both ways of spreading work.
#[test]
fn a_flood_of_strangers_is_held_to_the_admission_budget_on_every_shard() {
    let _one_at_a_time = heavy();
    for spread in [
        smt::workers::Spread::Messages,
        smt::workers::Spread::ReusePort,
    ] {
        let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
        let mut config = with_shards(2);
        config.set_spread(spread);
        // A small budget, so every burst of a stranger overruns it.
        config
            .endpoint_mut()
            .protocol_mut()
            .set_unvalidated_per_batch(2);
        let handler = |_peer: SocketAddr, data: Vec<u8>| data;
        let server = WorkerServer::bind("127.0.0.1:0".parse().unwrap(), config, handler).unwrap();
        let any = "127.0.0.1:0".parse().unwrap();
        let client = Endpoint::bind(any, EndpointConfig::default()).unwrap();
        server.install_session(client.local_addr(), sk).unwrap();
        client.install_session(server.local_addr(), ck).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (target, s) = (server.local_addr(), stop.clone());
        let attacker = std::thread::spawn(move || handshake_and_data_flood(target, s));
        // Let the flood start before the first call.
        std::thread::sleep(Duration::from_millis(100));
        const RPCS: u64 = 400;
        let failures = run_rpcs(&client, server.local_addr(), RPCS, 8);
        stop.store(true, Ordering::Relaxed);
        let flooded = attacker.join().unwrap();
        let stats = server.close();
        let over_budget: Vec<u64> = stats
            .shards
            .iter()
            .map(|s| s.counters.drops.get(smt::DropReason::OverBudget))
            .collect();
        let served: Vec<u64> = stats.shards.iter().map(|s| s.requests).collect();
        eprintln!(
            "{spread:?}: {flooded} attack datagrams; requests per shard {served:?}; \
             over budget per shard {over_budget:?}"
        );
        for s in &stats.shards {
            eprintln!("shard drops: {:?}", s.counters.drops);
        }
        assert_eq!(failures, 0, "{spread:?}: every legitimate call completes");
        assert!(served.iter().sum::<u64>() >= RPCS);
        assert!(
            over_budget.iter().all(|&n| n > 0),
            "{spread:?}: every shard held strangers to the budget: {over_budget:?}"
        );
    }
}
