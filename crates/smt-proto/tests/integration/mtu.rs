//! Every datagram size from the protocol's minimum upward works, and
//! anything smaller is refused at configuration (issue #11: a client with
//! an MTU of 73–200 bytes used to panic its driver in `write_control`).
//! A sweep over datagram sizes and message sizes, with and without control
//! MACs, with a lossy, reordering link so RESEND, NEED_ACK and GRANT
//! packets are written at every size too.

// The tests drive a virtual clock; `Instant::now` only picks its origin.
#![allow(clippy::disallowed_methods)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use smt_proto::crypto::NullCipher;
use smt_proto::{Config, Endpoint, Event, Role, SessionKeys, MIN_DATAGRAM_SIZE};
use smt_relay::SplitMix64;

const CLIENT: u16 = 40_000;
const SERVER: u16 = 4_000;

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn config(port: u16, datagram: usize, mac: bool) -> Config {
    Config {
        local_port: port,
        max_datagram_size: datagram,
        authenticate_control: mac,
        ..Config::default()
    }
}

fn endpoint(port: u16, peer: u16, role: Role, datagram: usize, mac: bool) -> Endpoint {
    let mut ep = Endpoint::new(config(port, datagram, mac)).expect("valid config");
    let keys = SessionKeys::new(role, Arc::new(NullCipher), Arc::new(NullCipher));
    ep.install_session(addr(peer), keys)
        .expect("null keys are not reflectable");
    ep
}

/// Echoes `sizes` through a link that drops every `drop_every`th datagram
/// and swaps neighbours now and then; returns the responses in order of
/// completion, checked against their requests.
fn echo(datagram: usize, mac: bool, sizes: &[usize], drop_every: u64) {
    let mut client = endpoint(CLIENT, SERVER, Role::Client, datagram, mac);
    let mut server = endpoint(SERVER, CLIENT, Role::Server, datagram, mac);
    let mut rng = SplitMix64::new(datagram as u64);
    let mut now = Instant::now();
    let mut pending = std::collections::HashMap::new();
    for &size in sizes {
        let data: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
        let h = client
            .send_request(now, addr(SERVER), &data)
            .expect("fits the configured limits");
        pending.insert(h, data);
    }
    let mut buf = vec![0u8; datagram];
    let mut sent = 0u64;
    for _ in 0..20_000 {
        if pending.is_empty() {
            return;
        }
        for client_sends in [true, false] {
            let (from, to, src) = match client_sends {
                true => (&mut client, &mut server, addr(CLIENT)),
                false => (&mut server, &mut client, addr(SERVER)),
            };
            let mut wire = VecDeque::new();
            while let Some(t) = from.poll_transmit(now, &mut buf) {
                assert!(t.len <= datagram, "datagram of {} > {datagram}", t.len);
                sent += 1;
                if drop_every > 0 && sent.is_multiple_of(drop_every) {
                    continue;
                }
                match rng.next_u64().is_multiple_of(8) {
                    true => wire.push_front(buf[..t.len].to_vec()),
                    false => wire.push_back(buf[..t.len].to_vec()),
                }
            }
            for d in wire {
                to.handle_datagram(now, src, &d);
            }
        }
        while let Some(event) = server.poll_event() {
            if let Event::Request { rpc, data } = event {
                server.send_response(now, rpc, &data).expect("in service");
            }
        }
        while let Some(event) = client.poll_event() {
            match event {
                Event::Response { rpc, data } => {
                    let want = pending.remove(&rpc).expect("one response per call");
                    assert_eq!(data, want, "echo at datagram size {datagram}");
                }
                Event::Failed { rpc, error } => {
                    panic!("{rpc:?} failed at datagram size {datagram}: {error}")
                }
                _ => {}
            }
        }
        now += Duration::from_micros(500);
        client.handle_timeout(now);
        server.handle_timeout(now);
    }
    panic!(
        "datagram size {datagram}: {} RPCs unfinished",
        pending.len()
    );
}

#[test]
fn smaller_datagrams_than_the_minimum_are_refused_with_a_reason() {
    for size in [0, 45, 73, 100, MIN_DATAGRAM_SIZE - 1] {
        let err = Endpoint::new(config(CLIENT, size, true)).expect_err("too small");
        assert!(
            err.to_string().contains(&MIN_DATAGRAM_SIZE.to_string()),
            "{size}: {err}"
        );
    }
    assert!(Endpoint::new(config(CLIENT, MIN_DATAGRAM_SIZE, true)).is_ok());
    assert!(Endpoint::new(config(CLIENT, 65_536, true)).is_err());
}

#[test]
fn every_datagram_size_from_the_minimum_carries_every_message_size() {
    let mut rng = SplitMix64::new(11);
    let sizes = |rng: &mut SplitMix64| -> Vec<usize> {
        let mut s = vec![0, 1, 17, 64, 200, 1_000];
        s.extend((0..3).map(|_| (rng.next_u64() % 40_000) as usize));
        s
    };
    let datagrams = (MIN_DATAGRAM_SIZE..MIN_DATAGRAM_SIZE + 64)
        .chain([255, 256, 512, 576, 1_200, 1_472, 9_000, 65_535]);
    for datagram in datagrams {
        for mac in [true, false] {
            echo(datagram, mac, &sizes(&mut rng), 0);
        }
    }
}

#[test]
fn small_datagrams_recover_from_loss_and_reordering() {
    let mut rng = SplitMix64::new(12);
    for datagram in [MIN_DATAGRAM_SIZE, MIN_DATAGRAM_SIZE + 1, 200, 300, 1_472] {
        let sizes: Vec<usize> = (0..6).map(|_| (rng.next_u64() % 30_000) as usize).collect();
        echo(datagram, true, &sizes, 7);
    }
}
