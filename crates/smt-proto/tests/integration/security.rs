//! Replay, forgery, tampering and key-misuse scenarios: each checks both the
//! outcome and the drop counter that proves *where* the input was stopped.

use std::time::Duration;

use smt_proto::sim::{Datagram, Link, Outcome, Pair, Verdict};
use smt_proto::wire::{Packet, PacketType};
use smt_proto::{Config, DropReason, Endpoint, SendError};
use smt_relay::KeyKind;

const AES: KeyKind = KeyKind::Aes128(11);
const LIMIT: Duration = Duration::from_secs(10);

fn captured_pair(seed: u64) -> Pair {
    let mut pair = Pair::with_keys(AES, Link::default(), seed);
    pair.capture = Some(Vec::new());
    pair
}

fn packets_of(pair: &Pair, ty: PacketType, to: std::net::SocketAddr) -> Vec<Datagram> {
    let all = pair.capture.as_ref().expect("capture on");
    all.iter()
        .filter(|d| d.to == to)
        .flat_map(split_coalesced)
        .filter(|d| Packet::new_checked(&d.bytes[..]).is_ok_and(|p| p.packet_type() == ty))
        .collect()
}

/// The packets of a (possibly coalesced) datagram, each as a datagram of
/// its own.
fn split_coalesced(d: &Datagram) -> Vec<Datagram> {
    let mut out = Vec::new();
    let mut rest = &d.bytes[..];
    while !rest.is_empty() {
        let len = smt_proto::wire::first_packet_len(rest, true).unwrap_or(rest.len());
        let mut one = d.clone();
        one.bytes = rest[..len].to_vec();
        out.push(one);
        rest = &rest[len..];
    }
    out
}

#[test]
fn replayed_request_packet_is_dropped_before_decryption() {
    let mut pair = captured_pair(1);
    let h = pair.call(b"transfer $100");
    assert!(pair.run(LIMIT));
    assert!(matches!(pair.outcomes[&h], Outcome::Response(_)));
    pair.run_for(Duration::from_millis(5));
    assert_eq!(
        pair.server.server_rpcs(),
        0,
        "server freed the RPC after the ACK"
    );
    let data = packets_of(&pair, PacketType::DATA, pair.server_addr);
    let opened = pair.server.stats().records_opened;
    for d in &data {
        pair.deliver_now(d);
    }
    assert_eq!(
        pair.server.stats().records_opened,
        opened,
        "a replay reached decryption"
    );
    assert_eq!(
        pair.server.stats().drops.get(DropReason::Replay),
        data.len() as u64
    );
    assert_eq!(pair.executions.values().sum::<u32>(), 1);
}

#[test]
fn replayed_whole_message_while_rpc_alive_is_a_duplicate() {
    let mut pair = captured_pair(2);
    pair.auto_respond = false;
    pair.call(&[7u8; 5000]);
    pair.run_for(Duration::from_millis(5));
    let data = packets_of(&pair, PacketType::DATA, pair.server_addr);
    assert_eq!(pair.server.server_rpcs(), 1);
    let opened = pair.server.stats().records_opened;
    for d in &data {
        pair.deliver_now(d);
    }
    assert_eq!(pair.server.stats().records_opened, opened);
    assert_eq!(
        pair.server.stats().drops.get(DropReason::Duplicate),
        data.len() as u64
    );
    assert_eq!(pair.executions.values().sum::<u32>(), 1);
}

#[test]
fn replayed_response_is_dropped_before_decryption() {
    let mut pair = captured_pair(3);
    pair.call(&[1u8; 3000]);
    assert!(pair.run(LIMIT));
    let data = packets_of(&pair, PacketType::DATA, pair.client_addr);
    let opened = pair.client.stats().records_opened;
    for d in &data {
        pair.deliver_now(d);
    }
    assert_eq!(pair.client.stats().records_opened, opened);
    assert_eq!(
        pair.client.stats().drops.get(DropReason::Replay),
        data.len() as u64
    );
    assert_eq!(pair.outcomes.len(), 1);
}

/// Flips every bit of every byte of a captured single-packet request and
/// delivers each variant to a fresh server. Each variant must be dropped
/// and counted, except flips of bits that carry no meaning for this packet;
/// those may deliver only the original, authenticated request.
#[test]
fn every_single_bit_flip_of_a_data_packet_is_rejected() {
    let mut pair = captured_pair(4);
    pair.auto_respond = false;
    let request = b"flip me, please";
    pair.call(request);
    pair.run_for(Duration::from_micros(100));
    let original = packets_of(&pair, PacketType::DATA, pair.server_addr).remove(0);
    let tag = u64::from_le_bytes(request[..8].try_into().unwrap());
    let mut harmless = Vec::new();
    for byte in 0..original.bytes.len() {
        for bit in 0..8 {
            let mut fresh = Pair::with_keys(AES, Link::default(), 4);
            let mut d = original.clone();
            d.bytes[byte] ^= 1 << bit;
            fresh.deliver_now(&d);
            if fresh.server.stats().drops.total() == 1 {
                assert!(fresh.executions.is_empty());
                continue;
            }
            assert_eq!(
                fresh.executions.keys().copied().collect::<Vec<_>>(),
                [tag],
                "byte {byte} bit {bit}"
            );
            harmless.push((byte, bit));
        }
    }
    // Only the RETRANSMIT flag (a retransmission of packet 0 is the same
    // ciphertext at the same place, indistinguishable from a real one) and
    // the priority byte 31 (a queueing hint for the network that the
    // receiver does not act on, `docs/protocol.md` § 3).
    let mut expected = vec![(30, 0)];
    expected.extend((0..8).map(|bit| (31, bit)));
    assert_eq!(harmless, expected);
}

#[test]
fn every_single_bit_flip_of_a_control_packet_is_rejected() {
    let mut pair = captured_pair(5);
    pair.call(&[3u8; 200_000]);
    assert!(pair.run(LIMIT));
    let grant = packets_of(&pair, PacketType::GRANT, pair.client_addr).remove(0);
    for byte in 0..grant.bytes.len() {
        for bit in 0..8 {
            let mut d = grant.clone();
            d.bytes[byte] ^= 1 << bit;
            let before = pair.client.stats().drops;
            pair.deliver_now(&d);
            let after = pair.client.stats().drops;
            assert_eq!(after.total(), before.total() + 1, "byte {byte} bit {bit}");
        }
    }
}

#[test]
fn forged_control_packets_without_the_key_are_dropped() {
    let mut pair = Pair::with_keys(AES, Link::default(), 6);
    pair.auto_respond = false;
    pair.call(b"x");
    pair.run_for(Duration::from_micros(100));
    // An attacker knows the plaintext header (ID, ports) but not the key.
    let mut forged = smt_proto::Endpoint::new(Config::default()).unwrap();
    let (_, attacker_keys) = KeyKind::Aes128(999).session();
    forged
        .install_session(pair.client_addr, attacker_keys)
        .unwrap();
    let before = pair.server.stats().drops.get(DropReason::BadControlTag);
    // RPC_UNKNOWN for the live RPC would make the server free it.
    let unknown = forge_control(PacketType::RPC_UNKNOWN, 2);
    pair.deliver_now(&Datagram {
        from: pair.client_addr,
        to: pair.server_addr,
        bytes: unknown,
    });
    assert_eq!(
        pair.server.stats().drops.get(DropReason::BadControlTag),
        before + 1
    );
    assert_eq!(
        pair.server.server_rpcs(),
        1,
        "forged RPC_UNKNOWN freed the RPC"
    );
}

/// A control packet with a correct header and a made-up tag.
fn forge_control(ty: PacketType, id: u64) -> Vec<u8> {
    let mut b = vec![0u8; 28 + 16];
    b[0..2].copy_from_slice(&4000u16.to_be_bytes());
    b[2..4].copy_from_slice(&5000u16.to_be_bytes());
    b[12] = 7 << 4;
    b[13] = ty.0;
    b[20..28].copy_from_slice(&id.to_be_bytes());
    b[28..].copy_from_slice(&[0x42; 16]);
    b
}

#[test]
fn plaintext_control_mode_accepts_forgeries_like_the_paper() {
    let mut pair = unanswered_call_without_control_macs();
    let mut unknown = forge_control(PacketType::RPC_UNKNOWN, 2);
    unknown.truncate(28);
    pair.deliver_now(&Datagram {
        from: pair.client_addr,
        to: pair.server_addr,
        bytes: unknown,
    });
    assert_eq!(
        pair.server.server_rpcs(),
        0,
        "without MACs a forged RPC_UNKNOWN frees server state"
    );
}

/// docs/protocol.md § 5: the tag switch changes where a receiver splits a
/// datagram. A receiver without tags reads a tagged control packet by its
/// header length and acts on it; the 16 tag bytes are then no packet
/// (*malformed*, which ends the datagram).
#[test]
fn a_tagged_packet_to_a_receiver_without_tags_is_read_and_its_tag_dropped() {
    let mut pair = unanswered_call_without_control_macs();
    let malformed = pair.server.stats().drops.get(DropReason::Malformed);
    pair.deliver_now(&Datagram {
        from: pair.client_addr,
        to: pair.server_addr,
        bytes: forge_control(PacketType::RPC_UNKNOWN, 2),
    });
    assert_eq!(pair.server.server_rpcs(), 0, "the packet was acted on");
    assert_eq!(
        pair.server.stats().drops.get(DropReason::Malformed),
        malformed + 1,
        "its tag was dropped as a malformed packet"
    );
}

#[test]
fn wrong_key_is_rejected() {
    let mut pair = Pair::with_keys(AES, Link::default(), 8);
    let (ck, _) = KeyKind::Aes128(12345).session();
    pair.client.install_session(pair.server_addr, ck).unwrap();
    pair.intercept = Some(Box::new(|_| Verdict::Deliver));
    let h = pair.call(b"who am i");
    pair.run_for(Duration::from_millis(2));
    assert!(pair.server.stats().drops.get(DropReason::AuthFailure) >= 1);
    assert!(pair.executions.is_empty());
    assert!(!pair.outcomes.contains_key(&h));
}

#[test]
fn packets_spliced_between_directions_fail_authentication() {
    // Reflection: the client's own request sent back to it looks like a
    // response to its RPC, but was sealed under the other direction's key.
    let mut pair = captured_pair(9);
    pair.auto_respond = false;
    pair.call(b"reflect me");
    pair.run_for(Duration::from_micros(100));
    let mut d = packets_of(&pair, PacketType::DATA, pair.server_addr).remove(0);
    std::mem::swap(&mut d.from, &mut d.to);
    // The attacker also swaps the plaintext ports.
    let (sport, dport) = (d.bytes[0..2].to_vec(), d.bytes[2..4].to_vec());
    d.bytes[0..2].copy_from_slice(&dport);
    d.bytes[2..4].copy_from_slice(&sport);
    pair.deliver_now(&d);
    assert_eq!(pair.client.stats().drops.get(DropReason::AuthFailure), 1);
    assert!(pair.outcomes.is_empty());
}

#[test]
fn records_spliced_between_messages_fail_authentication() {
    let mut pair = captured_pair(10);
    pair.auto_respond = false;
    pair.call(b"first message!");
    pair.call(b"second message");
    pair.run_for(Duration::from_micros(100));
    let data = packets_of(&pair, PacketType::DATA, pair.server_addr);
    assert_eq!(data.len(), 2);
    // A fresh server sees message 2's header with message 1's record.
    let mut spliced = data[1].clone();
    spliced.bytes[44..].copy_from_slice(&data[0].bytes[44..]);
    let mut fresh = Pair::with_keys(AES, Link::default(), 10);
    fresh.deliver_now(&spliced);
    assert_eq!(fresh.server.stats().drops.get(DropReason::AuthFailure), 1);
    assert!(fresh.executions.is_empty());
}

#[test]
fn identical_keys_in_both_directions_are_refused() {
    let (ck, _) = KeyKind::Aes128(1).session();
    let mut ep = Endpoint::new(Config::default()).unwrap();
    let same = smt_proto::SessionKeys::new(smt_proto::Role::Client, ck.tx.clone(), ck.tx.clone());
    assert_eq!(
        ep.install_session("10.0.0.9:1".parse().unwrap(), same),
        Err(SendError::ReflectableKeys)
    );
}

#[test]
fn unknown_session_and_garbage_are_counted() {
    let mut pair = Pair::with_keys(AES, Link::default(), 11);
    let stranger: std::net::SocketAddr = "10.9.9.9:4000".parse().unwrap();
    let unknown_type = forge_control(PacketType(0x7f), 2);
    for bytes in [
        vec![],
        vec![0u8; 3],
        vec![0xff; 28],
        unknown_type,
        forge_control(PacketType::BUSY, 2),
    ] {
        pair.server.handle_datagram(pair.now, stranger, &bytes);
    }
    let drops = pair.server.stats().drops;
    assert_eq!(drops.get(DropReason::Malformed), 3);
    assert_eq!(drops.get(DropReason::UnknownType), 1);
    assert_eq!(drops.get(DropReason::UnknownSession), 1);
}

/// A pair whose control packets carry no MAC (the paper's plaintext
/// control), with one request at the server it has not answered.
fn unanswered_call_without_control_macs() -> Pair {
    let cfg = Config {
        authenticate_control: false,
        ..Config::default()
    };
    let mut pair = Pair::new(cfg.clone(), cfg, AES, Link::default(), 7);
    pair.auto_respond = false;
    pair.call(b"x");
    pair.run_for(Duration::from_micros(100));
    pair
}
