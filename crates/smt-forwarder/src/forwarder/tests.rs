//! The forwarder's handling of pathlet feedback (`docs/protocol.md` § 4,
//! PATH): the slot it writes, the PATH copy each packet of a split
//! datagram carries, the exclusions it honours, and what it drops.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use smt_proto::wire::{
    Body, DataHeader, Packet as WirePacket, PathRepr, PathSlot, PathletClass, Repr,
};

use super::*;
use crate::Config;

const BASE: u16 = 0x0100;

#[allow(clippy::disallowed_methods)] // a test may read the clock once, as an origin
fn origin() -> Instant {
    Instant::now()
}

fn client() -> SocketAddr {
    "192.0.2.10:40000".parse().unwrap()
}

/// Two equal paths (1 Gbit/s, 100 µs) to one server.
fn forwarder(mark_packets: u32, rate_bps: u64) -> Forwarder {
    let path = |i: u8| PathConfig {
        device: format!("p{i}"),
        servers: vec![format!("198.51.100.{}:7000", i + 1).parse().unwrap()],
        delay: Duration::from_micros(100),
        rate_bps,
        replica: 0,
    };
    let mut config = Config::new(7000, vec![path(0), path(1)]);
    config.mark_packets = mark_packets;
    config.pathlet_base = BASE;
    Forwarder::new(config).unwrap()
}

fn emit(body: Body, id: u64, payload: usize) -> Vec<u8> {
    let repr = Repr {
        src_port: 0x9c40,
        dst_port: 0x1b58,
        key_phase: false,
        id,
        body,
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut WirePacket::new_unchecked(&mut out[..]));
    out.extend((0..payload).map(|i| i as u8));
    out
}

/// A one-packet DATA message of 1000 payload bytes.
fn data(id: u64) -> Vec<u8> {
    let h = DataHeader {
        message_len: 900,
        message_wire_len: 1000,
        segment_offset: 0,
        segment_len: 1000,
        mss: 1000,
        packet_index: 0,
        retransmit: false,
        incoming: 1000,
        priority: 0,
    };
    emit(Body::Data(h), id, 1000)
}

/// A GRANT, with its (here zero) MAC.
fn grant(id: u64) -> Vec<u8> {
    let mut g = emit(
        Body::Grant {
            offset: 5,
            priority: 0,
        },
        id,
        0,
    );
    g.extend([0u8; 16]);
    g
}

fn path(slots: u8, exclude: &[u16]) -> Vec<u8> {
    let mut p = PathRepr::new(0x9c40, 0x1b58, slots);
    for &pathlet in exclude {
        p.exclude.push(PathletClass { pathlet, class: 0 });
    }
    let mut out = vec![0u8; p.buffer_len()];
    p.emit(&mut WirePacket::new_unchecked(&mut out[..]));
    out
}

fn drain(f: &mut Forwarder, now: Instant) -> Vec<Transmit> {
    let mut out = Vec::new();
    let end = now + Duration::from_secs(1);
    let mut t = now;
    while t <= end {
        while let Some(x) = f.poll_transmit(t) {
            out.push(x);
        }
        match f.poll_timeout() {
            Some(next) => t = next.max(t),
            None => break,
        }
    }
    out
}

fn parsed_path(bytes: &[u8], len: usize) -> PathRepr {
    PathRepr::parse(&WirePacket::new_checked(&bytes[..len]).unwrap()).unwrap()
}

/// A datagram PATH + DATA + GRANT leaves as two datagrams, each a copy of
/// the PATH with this device's slot filled, then the packet byte for
/// byte; neither is longer than the datagram that came in.
#[test]
fn each_packet_of_a_split_datagram_carries_the_path_with_its_slot() {
    let now = origin();
    let mut f = forwarder(20, 0);
    let p = path(2, &[]);
    let (d, g) = (data(2), grant(4));
    let datagram = [p.clone(), d.clone(), g.clone()].concat();
    f.handle_client_datagram(now, client(), &datagram);
    let out = drain(&mut f, now);
    assert_eq!(out.len(), 2);
    // The GRANT goes first (control packets take the most urgent queue).
    let mut sent: Vec<&[u8]> = out.iter().map(|t| &t.bytes[p.len()..]).collect();
    sent.sort_by_key(|b| b.len());
    assert_eq!(sent, [&g[..], &d[..]]);
    for t in &out {
        assert!(t.bytes.len() <= datagram.len());
        let got = parsed_path(&t.bytes, p.len());
        let want = PathSlot {
            at: PathletClass {
                pathlet: BASE + t.path as u16,
                class: 0,
            },
            ce: false,
            queue_bytes: 0,
        };
        assert_eq!(got.slots.as_slice(), &[want]);
    }
    assert_eq!(f.stats().path_slots_written, 2);
}

/// Datagrams without a PATH leave exactly as before.
#[test]
fn a_datagram_without_path_is_unchanged() {
    let now = origin();
    let mut f = forwarder(20, 0);
    f.handle_client_datagram(now, client(), &data(2));
    let out = drain(&mut f, now);
    assert_eq!(out[0].bytes, data(2));
    assert_eq!(f.stats().path_slots_written, 0);
}

/// On a slow path whose queue passes the marking threshold, later
/// packets carry CE and the queue behind them in their slot.
#[test]
fn marks_and_queue_reach_the_slot() {
    let now = origin();
    let mut f = forwarder(3, 10_000_000);
    let p = path(1, &[BASE + 1]); // everything on path 0
    for id in 0..8u64 {
        f.handle_client_datagram(now, client(), &[p.clone(), data(2 * id)].concat());
    }
    let out = drain(&mut f, now);
    assert_eq!(out.len(), 8);
    let slots: Vec<PathSlot> = out
        .iter()
        .map(|t| parsed_path(&t.bytes, p.len()).slots.as_slice()[0])
        .collect();
    assert!(slots.iter().all(|s| s.at.pathlet == BASE));
    let ce: Vec<bool> = slots.iter().map(|s| s.ce).collect();
    // Arrivals 5..8 found more than 3 packets queued.
    assert_eq!(ce, [false, false, false, false, true, true, true, true]);
    assert!(slots[0].queue_bytes > slots[7].queue_bytes);
    assert_eq!(slots[7].queue_bytes, 0, "the last leaves an empty queue");
}

/// New messages avoid an excluded pathlet; excluding every path excludes
/// none (the packets still go somewhere).
#[test]
fn new_messages_avoid_excluded_pathlets() {
    let now = origin();
    let mut f = forwarder(20, 0);
    let avoid0 = path(1, &[BASE]);
    for id in 0..6u64 {
        f.handle_client_datagram(now, client(), &[avoid0.clone(), data(2 * id)].concat());
    }
    let out = drain(&mut f, now);
    assert!(
        out.iter().all(|t| t.path == 1),
        "{:?}",
        out.iter().map(|t| t.path).collect::<Vec<_>>()
    );
    // Without it, ties alternate: half of them would have gone to path 0.
    assert!(
        f.stats().path_excluded_moves == 0,
        "equal paths: the choice was a tie"
    );
    let both = path(1, &[BASE, BASE + 1]);
    f.handle_client_datagram(now, client(), &[both, data(100)].concat());
    assert_eq!(drain(&mut f, now).len(), 1);
    // Another class's exclusion does not apply to class 0.
    let mut other = PathRepr::new(0x9c40, 0x1b58, 1);
    for k in 0..2 {
        other.exclude.push(PathletClass {
            pathlet: BASE + k,
            class: 1,
        });
    }
    let mut bytes = vec![0u8; other.buffer_len()];
    other.emit(&mut WirePacket::new_unchecked(&mut bytes[..]));
    let mut f = forwarder(20, 0);
    for id in 0..4u64 {
        f.handle_client_datagram(now, client(), &[bytes.clone(), data(2 * id)].concat());
    }
    let paths: Vec<usize> = drain(&mut f, now).iter().map(|t| t.path).collect();
    assert!(paths.contains(&0) && paths.contains(&1), "{paths:?}");
}

/// A PATH alone, or not first, is dropped and counted; a full PATH gets
/// OVERFLOW and the packet goes on.
#[test]
fn a_path_alone_or_misplaced_is_dropped_and_a_full_one_flagged() {
    let now = origin();
    let mut f = forwarder(20, 0);
    f.handle_client_datagram(now, client(), &path(2, &[]));
    f.handle_client_datagram(now, client(), &[data(2), path(2, &[])].concat());
    assert_eq!(f.stats().path_dropped, 2);
    let out = drain(&mut f, now);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].bytes, data(2));

    let mut full = path(1, &[]);
    smt_proto::wire::write_path_slot(
        &mut full,
        &PathSlot {
            at: PathletClass {
                pathlet: 9,
                class: 0,
            },
            ce: false,
            queue_bytes: 0,
        },
    )
    .unwrap();
    let len = full.len();
    f.handle_client_datagram(now, client(), &[full, data(4)].concat());
    let out = drain(&mut f, now);
    let got = parsed_path(&out[0].bytes, len);
    assert!(got.overflow);
    assert_eq!(
        got.slots.as_slice()[0].at.pathlet,
        9,
        "the earlier device's slot stays"
    );
    assert_eq!(f.stats().path_overflows, 1);
}
