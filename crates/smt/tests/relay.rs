// A test binary of its own, not a module of tests/integration (issue #27):
// its retransmission bounds hold for endpoints with the CPU to read what
// arrived: its 10,000-RPC runs take turns with each other only
// (`ONE_RUN_AT_A_TIME`), and beside other tests' traffic in one process
// they would be starved.
//! Real sockets through the fault-injecting relay (`smt_relay::relay`): the
//! kernel has no `tc netem` here, so this is how real-socket runs get loss,
//! reordering, duplication and corruption.

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::stats::Counters;
use smt::{Endpoint, EndpointConfig, SessionKeys};
use smt_proto::wire::{Packet, PacketType};
use smt_relay::relay::{Direction, Impairment, Relay, RelayConfig, RelayStats};

type Executions = Arc<Mutex<HashMap<u64, u32>>>;

/// An echo server that counts executions by the request's first 8 bytes.
fn echo_server(keys: SessionKeys) -> (Endpoint, Executions) {
    let server = Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default()).unwrap();
    // The server sees the relay's address, not the client's: hand every
    // peer this session's keys (there is one client in these tests).
    server
        .set_key_resolver(Box::new(move |_peer: SocketAddr| Some(keys.clone())))
        .unwrap();
    let executions: Executions = Arc::default();
    for _ in 0..2 {
        let (s, ex) = (server.clone(), executions.clone());
        std::thread::spawn(move || {
            while let Ok(mut req) = s.accept() {
                let data = req.take_data();
                let tag = u64::from_le_bytes(data[..8].try_into().unwrap());
                *ex.lock().unwrap().entry(tag).or_default() += 1;
                let _ = req.respond(&data);
            }
        });
    }
    (server, executions)
}

/// The two 10,000-RPC runs take turns: run side by side, the starved
/// run's busy threads starve the other one too, which then measures the
/// starved case twice (and its retransmission bound, meant for endpoints
/// with the CPU to read what arrived, failed now and then at 2.01×).
static ONE_RUN_AT_A_TIME: Mutex<()> = Mutex::new(());

fn take_turn() -> std::sync::MutexGuard<'static, ()> {
    // A failed run poisons the lock; the next one still runs.
    ONE_RUN_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[test]
fn ten_thousand_rpcs_through_loss_and_reordering() {
    let _turn = take_turn();
    let run = ten_thousand_rpcs(0);
    assert_eq!(run.failures, 0, "every RPC completes");
    run.check_executions();
    run.check_retransmissions(2);
}

/// Issue #11 item 6: with the machine busy, RPCs failed ("the peer stopped
/// answering") while the server retransmitted two thirds of its data
/// packets: every silent RPC asked for everything missing every 5 ticks, a
/// busy sender honoured each request, and the endpoints counted as the
/// peer's silence time in which they had not read what had arrived. Here
/// the test itself starves the endpoints' threads: one busy thread per
/// core. A slow peer is not a dead one, and retransmissions follow losses.
#[test]
fn ten_thousand_rpcs_with_the_endpoints_starved_of_cpu() {
    let _turn = take_turn();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let run = ten_thousand_rpcs(cores);
    assert_eq!(run.failures, 0, "every RPC completes");
    run.check_executions();
    // Starved, a retransmission timer sometimes fires before the peer's
    // thread got the CPU to read what had arrived (1 run in 14 reached
    // 2.01x under extra load): a storm is what must not come back (3-9x
    // before issue #11), so the bound here is 3x.
    run.check_retransmissions(3);
}

/// What one run of [`ten_thousand_rpcs`] saw.
struct Run {
    failures: u64,
    relay: RelayStats,
    client: Counters,
    server: Counters,
    executions: Executions,
}

impl Run {
    fn check_executions(&self) {
        let ex = self.executions.lock().unwrap();
        assert_eq!(ex.len() as u64, RPCS, "every request executed");
        let twice: Vec<_> = ex.iter().filter(|(_, n)| **n != 1).collect();
        assert!(twice.is_empty(), "executed more than once: {twice:?}");
        assert!(
            self.relay.to_server.lost > 0 && self.relay.to_client.reordered > 0,
            "the relay impaired the traffic"
        );
    }

    /// Retransmissions follow losses: at most `times` the packets the
    /// relay dropped (issue #11; 3-9x before a client with nothing of a
    /// response asked for only its first packet, 1.2-1.6x after).
    fn check_retransmissions(&self, times: u64) {
        let dropped = self.relay.to_server.lost + self.relay.to_client.lost;
        let retransmitted = self.client.packets.retransmitted + self.server.packets.retransmitted;
        eprintln!("{retransmitted} packets retransmitted for {dropped} the relay dropped");
        assert!(
            retransmitted <= times * dropped,
            "{retransmitted} packets retransmitted for {dropped} dropped (at most {times}x)"
        );
    }
}

const RPCS: u64 = 10_000;

/// 10,000 RPCs of several sizes, 128 at a time, through 5 % loss and 10 %
/// reordering each way (`LOSS`, `REORDER` override), with `hogs` threads
/// spinning meanwhile.
fn ten_thousand_rpcs(hogs: usize) -> Run {
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    let (server, executions) = echo_server(sk);
    let loss: f64 = std::env::var("LOSS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.05);
    let reorder: f64 = std::env::var("REORDER")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.10);
    let impair = Impairment {
        loss,
        reorder,
        reorder_delay: Duration::from_micros(300),
        ..Impairment::default()
    };
    let relay = Relay::spawn(RelayConfig::new(server.local_addr()).both_ways(impair)).unwrap();
    let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default()).unwrap();
    client.install_session(relay.local_addr(), ck).unwrap();

    static SIZES: [usize; 6] = [8, 64, 1024, 3000, 16_384, 40_000];
    let stop = Arc::new(AtomicBool::new(false));
    let hog_threads: Vec<_> = (0..hogs)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let started = Instant::now();
    let failures = common::echo_calls(&client, relay.local_addr(), RPCS, 128, &SIZES);
    stop.store(true, Ordering::Relaxed);
    for h in hog_threads {
        h.join().unwrap();
    }
    let relay_stats = relay.stop();
    let client_stats = client.stats().unwrap().total;
    let server_stats = server.stats().unwrap().total;
    eprintln!("client: {client_stats:?}");
    eprintln!("server: {server_stats:?}");
    eprintln!(
        "{RPCS} RPCs in {:.1} s through the relay, {hogs} busy threads: {relay_stats:?}",
        started.elapsed().as_secs_f64()
    );
    Run {
        failures,
        relay: relay_stats,
        client: client_stats,
        server: server_stats,
        executions,
    }
}

#[test]
fn wire_bytes_hide_the_payload_but_show_message_id_and_length() {
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    let (server, _) = echo_server(sk);
    let relay = Relay::spawn(RelayConfig {
        capture: true,
        ..RelayConfig::new(server.local_addr())
    })
    .unwrap();
    let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default()).unwrap();
    client.install_session(relay.local_addr(), ck).unwrap();
    let marker = b"TOP-SECRET-PAYLOAD-MARKER!";
    let mut req = 42u64.to_le_bytes().to_vec();
    while req.len() < 5000 {
        req.extend_from_slice(marker);
    }
    assert_eq!(client.call(relay.local_addr(), &req).unwrap(), req);
    let captured = relay.captured();
    relay.stop();
    assert!(!captured.is_empty());
    let mut data_packets = 0;
    for c in &captured {
        assert!(
            !c.bytes.windows(marker.len()).any(|w| w == marker),
            "plaintext on the wire"
        );
        let p = Packet::new_checked(&c.bytes[..]).expect("an SMT packet");
        if p.packet_type() == PacketType::DATA {
            data_packets += 1;
            // Readable without keys: the message ID and length (the paper's
            // in-network-compute property).
            assert_eq!(p.id(), 2, "the first client message ID");
            assert_eq!(p.message_len() as usize, req.len());
            assert!(matches!(
                c.direction,
                Direction::ToServer | Direction::ToClient
            ));
        }
    }
    assert!(
        data_packets >= 8,
        "request and response travelled as several DATA packets"
    );
}
