//! The repo's attack relay (`smt_relay::attack`, `docs/attacks.md`) between
//! a client and the forwarder, with three replicas sharing the session
//! behind it: replays of every captured packet and of whole messages,
//! and DATA spliced into other message IDs (which the forwarder sends to
//! other replicas) are accepted nowhere: no replica executes anything
//! again, no side delivers a message or sends DATA because of them.
//! Needs root; prints SKIPPED (and passes) otherwise.

use crate::lab_common;

use std::time::{Duration, Instant};

use lab_common::{request, tag, Lab, Replica, PORT};
use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::{Endpoint, EndpointConfig};
use smt_forwarder::lab::{base_args, in_namespace, Running, Topology, Variant};
use smt_proto::wire::PacketType;
use smt_relay::attack::{message_id, retarget_id, select, Tally};
use smt_relay::{Direction, Relay, RelayConfig, SplitMix64};

/// Datagrams to inject, each with its direction.
type Attempts = Vec<(Direction, Vec<u8>)>;

/// Deliveries, executions and DATA sent by every victim.
fn activity(client: &Endpoint, replicas: &[Replica]) -> u64 {
    let mut n = 0;
    let mut eps: Vec<&Endpoint> = vec![client];
    for r in replicas {
        n += r.executions();
        eps.extend(r.endpoints.iter());
    }
    for ep in eps {
        let t = ep.stats().unwrap().total;
        n += t.traffic.messages_received + t.packets.data_sent;
    }
    n
}

#[test]
fn the_attack_relay_through_the_forwarder_and_replicas_gets_nothing_accepted() {
    let Some(lab) = Lab::up(&tag('k'), Variant::Replicas, 3, &[]) else {
        return;
    };
    let mut args = base_args(PORT);
    args.extend(lab.topo.path_args(PORT, &[], &[]));
    let fwd = Running::start(&lab.forwarder, &lab.topo.ns("f"), &args).expect("forwarder");
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    let to = Topology::forwarder_addr(0, false, PORT);
    // The client and the attacker (the relay) in the client namespace;
    // the relay forwards to the forwarder, keeping the client's port.
    let (client, relay) = in_namespace(&lab.topo.ns("c0"), move || {
        let mut config = RelayConfig::new(to);
        config.listen = "127.0.0.1:0".parse().unwrap();
        config.capture = true;
        config.capture_limit = 100_000;
        let relay = Relay::spawn(config).expect("relay");
        let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default())
            .expect("client");
        client
            .install_session(relay.local_addr(), ck)
            .expect("keys");
        (client, relay)
    })
    .expect("client namespace");
    // The relay's upstream port is known once the client has sent; the
    // replicas resolve keys for whatever port the forwarder shows.
    let any_port = std::sync::Arc::new(sk);
    let replicas: Vec<Replica> = (0..3)
        .map(|r| lab_common::replica_server_any(&lab.topo, r, any_port.clone()))
        .collect();
    let sizes = [8usize, 900, 3000, 17_000, 70_000, 200_000];
    for (k, &size) in sizes.iter().enumerate() {
        let req = request(k as u64, size);
        let resp = client.call(relay.local_addr(), &req).expect("genuine call");
        assert!(resp.iter().eq(req.iter().rev()));
    }
    std::thread::sleep(Duration::from_millis(100));
    let captured = relay.captured();
    let genuine = activity(&client, &replicas);
    let executions: u64 = replicas.iter().map(Replica::executions).sum();
    assert_eq!(executions, sizes.len() as u64);
    let victim = client.local_addr();

    let mut attacks: Vec<(&str, Attempts)> = Vec::new();
    // Every captured datagram again, both directions, shuffled.
    let mut all: Vec<_> = captured
        .iter()
        .map(|c| (c.direction, c.bytes.clone()))
        .collect();
    let mut rng = SplitMix64::new(25);
    for i in (1..all.len()).rev() {
        all.swap(i, rng.below(i as u64 + 1) as usize);
    }
    attacks.push(("replay-packets", all));
    // Whole requests, message by message, three times.
    let mut by_message: Vec<_> = select(&captured, Direction::ToServer, Some(PacketType::DATA))
        .map(|c| (c.direction, c.bytes.clone()))
        .collect();
    by_message.sort_by_key(|(_, b)| message_id(b));
    attacks.push((
        "replay-messages",
        std::iter::repeat_n(by_message.clone(), 3)
            .flatten()
            .collect(),
    ));
    // Request DATA moved to the other IDs of the session and to fresh
    // ones: the forwarder sends each to the replica its new ID names.
    let mut spliced = Vec::new();
    for (d, b) in &by_message {
        let id = message_id(b).unwrap_or(0);
        for other in [id + 2, id + 4, id + 6, 2, 100, 102, 104] {
            if other != id {
                spliced.push((*d, retarget_id(b, other)));
            }
        }
    }
    attacks.push(("splice-ids-across-replicas", spliced));

    for (name, attempts) in attacks {
        let before = activity(&client, &replicas);
        for (k, (direction, bytes)) in attempts.iter().enumerate() {
            relay.inject(*direction, victim, bytes).expect("inject");
            if k % 64 == 63 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        // Let the victims react (RESENDs go out after 5 ticks of 1 ms).
        let until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        let tally = Tally {
            name: name.to_owned(),
            attempts: attempts.len() as u64,
            accepted: activity(&client, &replicas) - before,
        };
        tally.report();
        assert_eq!(tally.accepted, 0, "{tally}");
    }
    let executions: u64 = replicas.iter().map(Replica::executions).sum();
    assert_eq!(executions, sizes.len() as u64, "nothing executed twice");
    assert!(genuine > 0);
    let stats = fwd.stop().expect("counters");
    println!("forwarder: replicas {}", stats["replicas"]);
}
