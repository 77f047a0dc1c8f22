//! The forwarder on the namespace topology (`scripts/innetwork-topo.sh`)
//! with real SMT endpoints over real sockets: IPv4 and IPv6 over two
//! paths; three replicas sharing the session, each request executed once,
//! on the replica its ID names; the forwarder never sees a plaintext
//! byte. Needs root; prints SKIPPED (and passes) otherwise.
//! (The attack relay through this topology: `tests/integration/attack.rs`.)

use crate::lab_common;

use std::time::Duration;

use lab_common::{keys_by_port, replica_server, replica_server_with, tag, Lab, PORT};
use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::EndpointConfig;
use smt_forwarder::lab::{base_args, Running, Topology, Variant};

#[test]
fn smt_crosses_two_paths_over_ipv4_and_ipv6() {
    let Some(lab) = Lab::up(&tag('p'), Variant::Paths, 2, &[50, 50]) else {
        return;
    };
    let mut args = base_args(PORT);
    args.extend(lab.topo.path_args(PORT, &[200, 2000], &[50, 50]));
    let fwd = Running::start(&lab.forwarder, &lab.topo.ns("f"), &args).expect("forwarder");
    let (ck4, sk4) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    let (ck6, sk6) = fresh_session_pair(AeadAlgorithm::Aes256Gcm);
    let (c4, p4) = lab.client(0, false, ck4);
    let (c6, p6) = lab.client(0, true, ck6);
    let keys = keys_by_port(&[(p4, sk4), (p6, sk6)]);
    let server = replica_server(&lab.topo, 0, keys);
    for (client, to) in [
        (&c4, Topology::forwarder_addr(0, false, PORT)),
        (&c6, Topology::forwarder_addr(0, true, PORT)),
    ] {
        for (k, size) in [8usize, 3000, 70_000, 300_000].into_iter().enumerate() {
            let req = lab_common::request(k as u64, size);
            let resp = match client.call(to, &req) {
                Ok(r) => r,
                Err(e) => {
                    println!("client stats {:?}", client.stats().unwrap().total);
                    panic!(
                        "call of {size} B to {to} through the forwarder: {e} ({:?})",
                        fwd.stop()
                    );
                }
            };
            assert!(resp.iter().eq(req.iter().rev()), "echo of {size} bytes");
        }
    }
    let stats = fwd.stop().expect("forwarder counters");
    println!("forwarder: {stats}");
    let sent = |k: usize| stats["paths"][k]["sent"]["packets"].as_u64().unwrap();
    assert!(sent(0) > 0 && sent(1) > 0, "both paths carried messages");
    assert_eq!(stats["malformed_bytes"], 0);
    assert_eq!(server.executions(), 8, "every request executed once");
}

/// Pathlet feedback end to end: the forwarder fills the PATH slots of
/// the client's datagrams while it moves all traffic between two paths of
/// different rate every 100 ms; the server believes them and echoes, the
/// client's windows take the echoes, and every call completes.
#[test]
fn pathlet_feedback_crosses_the_forwarder_while_it_alternates_paths() {
    let Some(lab) = Lab::up(&tag('a'), Variant::Paths, 2, &[50, 10]) else {
        return;
    };
    let mut args = base_args(PORT);
    args.extend(lab.topo.path_args(PORT, &[200, 200], &[50, 10]));
    args.extend(["--balance".into(), "alternate:100".into()]);
    let fwd = Running::start(&lab.forwarder, &lab.topo.ns("f"), &args).expect("forwarder");
    let pathlet = || {
        let mut c = EndpointConfig::default();
        // Paths of 10-50 Mbit/s: timers for them (smt-innetwork's `scaled`).
        c.protocol_mut()
            .set_pathlet_feedback(true)
            .set_resend_after(Duration::from_millis(50))
            .set_rpc_idle_timeout(Duration::from_secs(5));
        c
    };
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    let (client, port) = lab.client_with(0, false, ck, pathlet);
    let server = replica_server_with(&lab.topo, 0, keys_by_port(&[(port, sk)]), pathlet);
    let to = Topology::forwarder_addr(0, false, PORT);
    for k in 0..12u64 {
        let req = lab_common::request(k, 100_000);
        let resp = client
            .call(to, &req)
            .unwrap_or_else(|e| panic!("call {k}: {e} ({:?})", client.stats().map(|s| s.total)));
        assert!(resp.iter().eq(req.iter().rev()), "echo of call {k}");
    }
    let stats = fwd.stop().expect("forwarder counters");
    let c = client.stats().expect("client stats").total.packets;
    println!("client pathlet counters: {c:?}; forwarder: {stats}");
    assert!(stats["path_slots_written"].as_u64().unwrap() > 0);
    assert!(c.path_echoes_received > 0, "the client took echoes");
    let sent = |k: usize| stats["paths"][k]["sent"]["packets"].as_u64().unwrap();
    assert!(sent(0) > 0 && sent(1) > 0, "the forwarder used both paths");
    assert_eq!(server.executions(), 12);
}

#[test]
fn replicas_share_the_session_and_each_request_runs_once_where_its_id_says() {
    let Some(lab) = Lab::up(&tag('r'), Variant::Replicas, 3, &[]) else {
        return;
    };
    let mut args = base_args(PORT);
    args.extend(lab.topo.path_args(PORT, &[], &[]));
    let fwd = Running::start(&lab.forwarder, &lab.topo.ns("f"), &args).expect("forwarder");
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    let (client, port) = lab.client(0, false, ck);
    let keys = keys_by_port(&[(port, sk)]);
    let replicas: Vec<_> = (0..3)
        .map(|r| replica_server(&lab.topo, r, keys.clone()))
        .collect();
    let to = Topology::forwarder_addr(0, false, PORT);
    let calls = 30;
    for k in 0..calls {
        let req = lab_common::request(k, 100 + 500 * k as usize);
        let resp = client.call(to, &req).expect("call");
        assert!(resp.iter().eq(req.iter().rev()));
    }
    std::thread::sleep(Duration::from_millis(50));
    let per_replica: Vec<u64> = replicas.iter().map(|r| r.executions()).collect();
    println!("executions per replica: {per_replica:?}");
    assert_eq!(per_replica.iter().sum::<u64>(), calls, "each request once");
    // Consecutive IDs go to consecutive replicas: an even spread.
    assert!(
        per_replica.iter().all(|&n| n == calls / 3),
        "{per_replica:?}"
    );
    // And on the replica the rule names: call k of a fresh session has
    // ID 2(k + 1), and the forwarder knows the client by its own address.
    let outer = std::net::SocketAddr::new("192.0.2.2".parse().unwrap(), port);
    for (r, server) in replicas.iter().enumerate() {
        for req in server.requests() {
            let k = u64::from_le_bytes(req[..8].try_into().unwrap());
            let id = 2 * (k + 1);
            assert_eq!(
                smt_forwarder::policy::message_replica(outer, id, 3),
                r,
                "call {k}"
            );
        }
    }
    let stats = fwd.stop().expect("counters");
    println!("forwarder: {stats}");
}

/// What the forwarder handles is header and ciphertext: no 12-byte
/// window of a random request (or its response) appears in any datagram
/// it received or sent (its `--dump`).
#[test]
fn the_forwarder_sees_no_plaintext() {
    let Some(lab) = Lab::up(&tag('x'), Variant::Paths, 2, &[]) else {
        return;
    };
    let dump = std::env::temp_dir().join(format!("smt-fwd-dump-{}", std::process::id()));
    let mut args = base_args(PORT);
    args.extend(lab.topo.path_args(PORT, &[], &[]));
    args.extend([
        "--balance".into(),
        "spray".into(),
        "--dump".into(),
        dump.display().to_string(),
    ]);
    let fwd = Running::start(&lab.forwarder, &lab.topo.ns("f"), &args).expect("forwarder");
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    let (client, port) = lab.client(0, false, ck);
    let server = replica_server(&lab.topo, 0, keys_by_port(&[(port, sk)]));
    let mut secret = vec![0u8; 100_000];
    let mut rng = smt_relay::SplitMix64::new(0x5ec7e7);
    rng.fill(&mut secret);
    let to = Topology::forwarder_addr(0, false, PORT);
    for size in [10, 1000, 20_000, 100_000] {
        let resp = client.call(to, &secret[..size]).expect("call");
        assert!(resp.iter().eq(secret[..size].iter().rev()));
    }
    fwd.stop().expect("counters");
    let seen = std::fs::read(&dump).expect("dump");
    let _ = std::fs::remove_file(&dump);
    assert!(seen.len() > 100_000, "the dump holds the traffic");
    let windows: std::collections::HashSet<&[u8]> = secret.windows(12).collect();
    let reversed: Vec<u8> = secret.iter().rev().copied().collect();
    let back: std::collections::HashSet<&[u8]> = reversed.windows(12).collect();
    let leaks = seen
        .windows(12)
        .filter(|w| windows.contains(w) || back.contains(w))
        .count();
    assert_eq!(leaks, 0, "plaintext bytes visible to the forwarder");
    assert_eq!(server.executions(), 4);
}
