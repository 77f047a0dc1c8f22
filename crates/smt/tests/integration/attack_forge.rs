//! Packets forged without the keys: every type (DATA, the control packets,
//! KEY_UPDATE, HANDSHAKE), off-path (random header fields, random ID and
//! key phase) and on-path (plaintext header fields copied from real
//! traffic, the record or MAC made up), against a quiet pair and against an
//! RPC in flight. Nothing is delivered or executed and no forged control
//! packet makes a side send or drop anything.

use crate::attack_common;

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Duration;

use attack_common::{bind, finish, request, run_attack, World};
use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::Endpoint;
use smt_proto::wire::{DataHeader, PacketType};
use smt_relay::attack::{
    forge_control, forge_data, forge_handshake, message_id, packet_type, select, with_random_tail,
    CONTROL_TYPES,
};
use smt_relay::{Direction, Relay, SplitMix64};

fn rounds() -> usize {
    if attack_common::long() {
        2000
    } else {
        100
    }
}

fn random_data_header(rng: &mut SplitMix64) -> DataHeader {
    // One packet of one record, laid out as a real sender would.
    let len = rng.below(1300) as u32 + 1;
    let wire = len + 22;
    DataHeader {
        message_len: len,
        message_wire_len: wire,
        segment_offset: 0,
        segment_len: wire,
        mss: wire as u16,
        packet_index: 0,
        retransmit: false,
        incoming: wire,
        priority: 0,
    }
}

/// Off-path: the attacker knows the addresses (and, half the time, the
/// ports), nothing else.
fn off_path_packets(world: &World, rng: &mut SplitMix64) -> Vec<(Direction, Vec<u8>)> {
    let server_port = world.server.local_addr().port();
    let client_side = world.client_at_server().port();
    let mut out = Vec::new();
    for _ in 0..rounds() {
        for direction in [Direction::ToServer, Direction::ToClient] {
            let (src, dst) = match direction {
                Direction::ToServer => (client_side, server_port),
                Direction::ToClient => (
                    world.relay.local_addr().port(),
                    world.client.local_addr().port(),
                ),
            };
            let ports = if rng.chance(0.5) {
                (src, dst)
            } else {
                (rng.next_u64() as u16, rng.next_u64() as u16)
            };
            let id = rng.below(1 << 20);
            let phase = rng.chance(0.5);
            for ty in CONTROL_TYPES {
                out.push((direction, forge_control(rng, ty, ports, id, phase)));
            }
            let header = random_data_header(rng);
            out.push((direction, forge_data(rng, ports, id, phase, header)));
            let kind = rng.below(3) as u8;
            let offset = if rng.chance(0.5) {
                0
            } else {
                rng.below(1 << 16) as u32
            };
            out.push((direction, forge_handshake(rng, ports, offset, kind, 200)));
        }
    }
    out
}

#[test]
fn off_path_forgeries_are_refused() {
    let world = World::new();
    world.calls(1, &[8, 3000, 40_000]);
    std::thread::sleep(Duration::from_millis(50));
    let mut rng = SplitMix64::new(0xf0);
    let attempts = off_path_packets(&world, &mut rng);
    let (tally, before, after) = run_attack(&world, "forge-off-path", &attempts);
    finish(&tally, &before, &after);
    world.calls(10, &[8]);
}

#[test]
fn forgeries_with_real_header_fields_are_refused() {
    let world = World::new();
    world.calls(1, &[8, 3000, 40_000, 100_000]);
    std::thread::sleep(Duration::from_millis(50));
    let captured = world.captured();
    let mut rng = SplitMix64::new(0xf1);
    let mut attempts = Vec::new();
    for _ in 0..(rounds() / 50).max(1) {
        // Each real packet with its header kept and the rest made up.
        for c in &captured {
            attempts.push((c.direction, with_random_tail(&mut rng, &c.bytes)));
        }
        // Every control type for every real message ID, with its ports and
        // key phase.
        for c in select(&captured, Direction::ToServer, Some(PacketType::DATA)) {
            let id = message_id(&c.bytes).unwrap_or(0);
            let ports = (
                c.bytes[0..2].try_into().unwrap(),
                c.bytes[2..4].try_into().unwrap(),
            );
            let ports = (u16::from_be_bytes(ports.0), u16::from_be_bytes(ports.1));
            let phase = c.bytes[12] & 1 == 1;
            for ty in CONTROL_TYPES {
                attempts.push((
                    Direction::ToServer,
                    forge_control(&mut rng, ty, ports, id, phase),
                ));
                let back = (ports.1, ports.0);
                attempts.push((
                    Direction::ToClient,
                    forge_control(&mut rng, ty, back, id, phase),
                ));
            }
        }
    }
    let (tally, before, after) = run_attack(&world, "forge-copied-headers", &attempts);
    finish(&tally, &before, &after);
    world.calls(10, &[8]);
}

/// A client, the attacker's relay and a server whose application holds
/// each request until released, then answers it reversed.
struct Held {
    server: Endpoint,
    relay: Relay,
    client: Endpoint,
    /// One message releases the oldest held request.
    release: mpsc::Sender<()>,
    /// Each request as the server application receives it.
    requests: mpsc::Receiver<Vec<u8>>,
}

impl Held {
    fn start() -> Self {
        let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
        let server = bind();
        server
            .set_key_resolver(Box::new(move |_peer: SocketAddr| Some(sk.clone())))
            .unwrap();
        let relay = attack_common::spawn_relay(server.local_addr(), None);
        let client = bind();
        client.install_session(relay.local_addr(), ck).unwrap();
        let (release, release_rx) = mpsc::channel::<()>();
        let (got_tx, requests) = mpsc::channel::<Vec<u8>>();
        let s = server.clone();
        std::thread::spawn(move || {
            while let Ok(mut req) = s.accept() {
                let data = req.take_data().to_vec();
                got_tx.send(data.clone()).unwrap();
                release_rx.recv().unwrap();
                let reply: Vec<u8> = data.iter().rev().copied().collect();
                let _ = req.respond(&reply);
            }
        });
        Self {
            server,
            relay,
            client,
            release,
            requests,
        }
    }
}

/// While the server holds a request (the application has not answered),
/// forged DATA (a response with a made-up record) and GRANT, RESEND,
/// RPC_UNKNOWN, BUSY, NEED_ACK, ACK and KEY_UPDATE for that very RPC go to
/// both sides. None may make the client resend or
/// restart the request, or the server free it: the call must then complete
/// with the right response, executed once.
#[test]
fn forged_control_packets_for_a_live_rpc_change_nothing() {
    let Held {
        server,
        relay,
        client,
        release: release_tx,
        requests: got_rx,
    } = Held::start();
    let req = request(7, 30_000);
    let (c, target, r) = (client.clone(), relay.local_addr(), req.clone());
    let call = std::thread::spawn(move || c.call(target, &r));
    assert_eq!(got_rx.recv_timeout(Duration::from_secs(3)).unwrap(), req);

    let captured = relay.captured();
    let data = select(&captured, Direction::ToServer, Some(PacketType::DATA))
        .next()
        .unwrap()
        .bytes
        .clone();
    let id = message_id(&data).unwrap();
    let ports = (
        u16::from_be_bytes([data[0], data[1]]),
        u16::from_be_bytes([data[2], data[3]]),
    );
    let mut rng = SplitMix64::new(0xf2);
    let mut attempts = Vec::new();
    for _ in 0..rounds() {
        // A made-up response (and request) for the live ID: the record is
        // random bytes, so its framing fails before any AEAD.
        let header = random_data_header(&mut rng);
        attempts.push((
            Direction::ToClient,
            forge_data(&mut rng, (ports.1, ports.0), id, false, header),
        ));
        attempts.push((
            Direction::ToServer,
            forge_data(&mut rng, ports, id, false, header),
        ));
        for ty in CONTROL_TYPES {
            for phase in [false, true] {
                attempts.push((
                    Direction::ToServer,
                    forge_control(&mut rng, ty, ports, id, phase),
                ));
                let back = (ports.1, ports.0);
                attempts.push((
                    Direction::ToClient,
                    forge_control(&mut rng, ty, back, id, phase),
                ));
            }
        }
    }
    let executions = attack_common::Executions::default();
    let before = attack_common::Snapshot::take(&server, &client, &executions);
    let client_addr = client.local_addr();
    for (k, (direction, bytes)) in attempts.iter().enumerate() {
        relay.inject(*direction, client_addr, bytes).unwrap();
        if k % 64 == 63 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let after = attack_common::settle(
        &server,
        &client,
        &executions,
        &before,
        attempts.len() as u64,
    );
    let tally = smt_relay::attack::Tally {
        name: "forge-live-rpc-control".into(),
        attempts: attempts.len() as u64,
        accepted: after.accepted_since(&before)
            + (after.client.rpcs.restarted - before.client.rpcs.restarted),
    };
    release_tx.send(()).unwrap();
    let response = call
        .join()
        .unwrap()
        .expect("the call survives the forgeries");
    assert!(response.iter().eq(req.iter().rev()));
    assert!(
        got_rx.recv_timeout(Duration::from_millis(200)).is_err(),
        "executed twice"
    );
    let dropped: u64 = attack_common::drops_since(&before, &after)
        .iter()
        .map(|(_, n)| n)
        .sum();
    assert!(dropped >= attempts.len() as u64, "every forgery is dropped");
    finish(&tally, &before, &after);
    let _ = packet_type(&data);
}

/// The DATA header of a captured packet.
fn data_header(bytes: &[u8]) -> DataHeader {
    let packet = smt_proto::wire::Packet::new_checked(bytes).unwrap();
    match smt_proto::wire::Repr::parse(&packet).unwrap().body {
        smt_proto::wire::Body::Data(h) => h,
        other => panic!("not DATA: {other:?}"),
    }
}

/// Made-up headers claiming a *multi-packet* segment (so the packet cannot
/// be opened alone) with lengths unlike the real message's: the first,
/// a middle or the last packet of it.
fn multi_packet_header(rng: &mut SplitMix64, mss: u16) -> DataHeader {
    let mss_len = u32::from(mss);
    let packets = rng.below(4) as u32 + 2;
    let segment_len = packets * mss_len - rng.below(u64::from(mss_len) - 1) as u32;
    let message_len = rng.below(400_000) as u32 + segment_len;
    let wire = message_len + 22 * (message_len / 16_000 + 1);
    let segment_offset = (rng.below(u64::from(wire - segment_len) / 16) * 16) as u32;
    DataHeader {
        message_len,
        message_wire_len: wire,
        segment_offset,
        segment_len,
        mss,
        packet_index: rng.below(u64::from(packets)) as u16,
        retransmit: false,
        incoming: wire.min(segment_offset + segment_len + 60_000),
        priority: 0,
    }
}

/// Forged DATA claiming multi-packet segments with made-up lengths, sent
/// (a) as the response to a request the server holds, before the genuine
/// response, and (b) as the client's *next* request (its ID is
/// predictable), before the client sends it. The genuine messages must
/// still be delivered: unauthenticated state may not block them.
#[test]
fn forged_multi_packet_segments_do_not_block_genuine_messages() {
    let Held {
        server,
        relay,
        client,
        release: release_tx,
        requests: got_rx,
    } = Held::start();
    let mut rng = SplitMix64::new(0xf4);
    let (mut attempts, mut accepted) = (0u64, 0u64);
    let client_addr = client.local_addr();
    for round in 0..10u64 {
        let req = request(200 + round, 30_000 + 7_000 * round as usize);
        let (c, target, r) = (client.clone(), relay.local_addr(), req.clone());
        let call = std::thread::spawn(move || c.call(target, &r));
        assert_eq!(got_rx.recv_timeout(Duration::from_secs(3)).unwrap(), req);
        let captured = relay.captured();
        let last = select(&captured, Direction::ToServer, Some(PacketType::DATA))
            .last()
            .unwrap()
            .bytes
            .clone();
        let (id, mss) = (message_id(&last).unwrap(), data_header(&last).mss);
        let ports = (
            u16::from_be_bytes([last[0], last[1]]),
            u16::from_be_bytes([last[2], last[3]]),
        );
        // (a) a forged response for the live ID, then the genuine one.
        for _ in 0..5 {
            let header = multi_packet_header(&mut rng, mss);
            let forged = forge_data(&mut rng, (ports.1, ports.0), id, false, header);
            relay
                .inject(Direction::ToClient, client_addr, &forged)
                .unwrap();
            attempts += 1;
        }
        // (b) a forged next request (IDs go up by 2 on this side).
        for _ in 0..5 {
            let header = multi_packet_header(&mut rng, mss);
            let forged = forge_data(&mut rng, ports, id + 2, false, header);
            relay
                .inject(Direction::ToServer, client_addr, &forged)
                .unwrap();
            attempts += 1;
        }
        std::thread::sleep(Duration::from_millis(20));
        release_tx.send(()).unwrap();
        match call.join().unwrap() {
            Ok(resp) if resp.iter().eq(req.iter().rev()) => {}
            other => {
                println!(
                    "round {round}: response blocked: {:?}",
                    other.map(|r| r.len())
                );
                accepted += 1;
            }
        }
    }
    let (ss, cs) = (server.stats().unwrap().total, client.stats().unwrap().total);
    let tally = smt_relay::attack::Tally {
        name: "forge-multi-packet-segment".into(),
        attempts,
        accepted,
    };
    // protocol_violation counts genuine packets that met forged lengths
    // (the message then started over): proof the forgeries took hold.
    let pv = smt::DropReason::ProtocolViolation;
    println!(
        "{tally} (accepted = genuine messages blocked); protocol_violation server {} client {}, requests restarted {}",
        ss.drops.get(pv),
        cs.drops.get(pv),
        cs.rpcs.restarted
    );
    assert_eq!(tally.accepted, 0, "{tally}");
}
