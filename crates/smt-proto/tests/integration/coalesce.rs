//! Coalesced datagrams (`docs/protocol.md` § 2.1), byte for byte: two
//! small requests leave in one datagram, each packet exactly as it would be
//! alone; the receiver splits them by their own headers; the responses and
//! the ACK batch come back the same way. The bytes here are the worked
//! example of § 2.1 (NullCipher, so the records are readable and the MACs
//! are zero).

// The tests drive a virtual clock; `Instant::now` only picks its origin.
#![allow(clippy::disallowed_methods)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use smt_proto::crypto::NullCipher;
use smt_proto::wire::{first_packet_len, Body, DataHeader, Packet, Packets, Repr};
use smt_proto::{Config, Endpoint, Event, Role, SessionKeys};

const CLIENT_PORT: u16 = 0x9c40;
const SERVER_PORT: u16 = 0x0fa0;

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn endpoint(port: u16, coalesce: bool) -> Endpoint {
    let config = Config {
        local_port: port,
        coalesce,
        ..Config::default()
    };
    Endpoint::new(config).expect("valid config")
}

fn null_keys(role: Role) -> SessionKeys {
    SessionKeys::new(role, Arc::new(NullCipher), Arc::new(NullCipher))
}

/// A client and a server with a NullCipher session between them.
fn pair(coalesce: bool) -> (Endpoint, Endpoint) {
    let mut client = endpoint(CLIENT_PORT, coalesce);
    let mut server = endpoint(SERVER_PORT, coalesce);
    client
        .install_session(addr(SERVER_PORT), null_keys(Role::Client))
        .expect("null keys are not reflectable");
    server
        .install_session(addr(CLIENT_PORT), null_keys(Role::Server))
        .expect("null keys are not reflectable");
    (client, server)
}

/// Every datagram the endpoint has to send now.
fn drain(ep: &mut Endpoint, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; ep.config().max_datagram_size];
    while let Some(t) = ep.poll_transmit(now, &mut buf) {
        out.push(buf[..t.len].to_vec());
    }
    out
}

/// Two requests, `abc` (ID 2) and `xyz` (ID 4), queued at `now`.
fn send_abc_xyz(client: &mut Endpoint, now: Instant) {
    for text in [b"abc", b"xyz"] {
        client
            .send_request(now, addr(SERVER_PORT), text)
            .expect("session");
    }
}

/// A one-packet DATA packet of a 3-byte message, sealed by the NullCipher.
#[rustfmt::skip]
fn data_packet(sport: u16, dport: u16, id: u8, text: &[u8; 3]) -> Vec<u8> {
    let mut p = vec![
        (sport >> 8) as u8, sport as u8, (dport >> 8) as u8, dport as u8, // ports
        0x00, 0x00, 0x00, 0x00,                         // segment offset 0
        0x00, 0x00, 0x00, 0x03,                         // message length 3
        0xb0, 0x10,                                     // 44-byte header, DATA
        0x00, 0x19,                                     // mss 25 (= the segment)
        0x00, 0x00, 0x00, 0x00,                         // checksum, resend index
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, id,   // message ID
        0x00, 0x00, 0x00, 0x00,                         // packet index 0, flags, reserved
        0x00, 0x00, 0x00, 0x19,                         // message wire length 25
        0x00, 0x00, 0x00, 0x19,                         // segment length 25
        0x00, 0x00, 0x00, 0x19,                         // incoming 25
        0x17, 0x03, 0x03, 0x00, 0x14,                   // record header: 20-byte ciphertext
    ];
    p.extend_from_slice(text);
    p.push(0x17); // inner content type
    p.extend_from_slice(&[0; 16]); // NullCipher tag
    p
}

#[test]
fn two_requests_share_one_datagram_byte_for_byte() {
    let (mut client, mut server) = pair(true);
    let now = Instant::now();
    client
        .send_request(now, addr(SERVER_PORT), b"abc")
        .expect("session");
    client
        .send_request(now, addr(SERVER_PORT), b"xyz")
        .expect("session");
    let sent = drain(&mut client, now);
    assert_eq!(sent.len(), 1, "both requests in one datagram");
    let mut want = data_packet(CLIENT_PORT, SERVER_PORT, 2, b"abc");
    want.extend(data_packet(CLIENT_PORT, SERVER_PORT, 4, b"xyz"));
    assert_eq!(sent[0], want);
    assert_eq!(client.stats().datagrams_tx, 1);
    assert_eq!(client.stats().data_packets_tx, 2);
    assert_eq!(client.stats().coalesced_packets_tx, 1);

    // The receiver splits by the headers alone: 69 + 69 bytes.
    assert_eq!(first_packet_len(&want, true), Ok(69));
    assert_eq!(first_packet_len(&want[69..], true), Ok(69));
    server.handle_datagram(now, addr(CLIENT_PORT), &sent[0]);
    assert_eq!(server.stats().coalesced_packets_rx, 1);
    assert_eq!(
        server.stats().drops.total(),
        0,
        "{:?}",
        server.stats().drops
    );
    let mut requests = Vec::new();
    while let Some(ev) = server.poll_event() {
        if let Event::Request { rpc, data } = ev {
            requests.push((rpc, data));
        }
    }
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].1, b"abc");
    assert_eq!(requests[1].1, b"xyz");
}

#[test]
fn responses_and_the_ack_batch_come_back_coalesced() {
    let (mut client, mut server) = pair(true);
    let now = Instant::now();
    send_abc_xyz(&mut client, now);
    for d in drain(&mut client, now) {
        server.handle_datagram(now, addr(CLIENT_PORT), &d);
    }
    while let Some(ev) = server.poll_event() {
        if let Event::Request { rpc, data } = ev {
            let upper = data.to_ascii_uppercase();
            server.send_response(now, rpc, &upper).expect("in service");
        }
    }
    let back = drain(&mut server, now);
    assert_eq!(back.len(), 1, "both responses in one datagram");
    // First the client's credit (control packets go first): 1024
    // requests (`max_incoming_per_peer`), the server's first CREDIT, then
    // its MAC (zero with the NullCipher).
    #[rustfmt::skip]
    let mut want = vec![
        0x0f, 0xa0, 0x9c, 0x40,                         // ports
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // segment offset, message length: 0
        0x90, 0x1c,                                     // 36-byte header, CREDIT
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00,             // mss, checksum, resend index: 0
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // ID: unused, 0
        0x00, 0x00, 0x04, 0x00,                         // limit 1024
        0x00, 0x00, 0x00, 0x01,                         // sequence 1
    ];
    want.extend([0; 16]);
    want.extend(data_packet(SERVER_PORT, CLIENT_PORT, 2, b"ABC"));
    want.extend(data_packet(SERVER_PORT, CLIENT_PORT, 4, b"XYZ"));
    assert_eq!(back[0], want);
    client.handle_datagram(now, addr(SERVER_PORT), &back[0]);
    let done = std::iter::from_fn(|| client.poll_event())
        .filter(|e| matches!(e, Event::Response { .. }))
        .count();
    assert_eq!(done, 2);

    // Both completions are acknowledged in one ACK, a tick later.
    assert!(drain(&mut client, now).is_empty(), "the ACK waits a tick");
    let later = client.poll_timeout().expect("ACK delay armed");
    assert!(later <= now + Duration::from_millis(1));
    client.handle_timeout(later);
    let acks = drain(&mut client, later);
    #[rustfmt::skip]
    let ack: [u8; 64] = [
        0x9c, 0x40, 0x0f, 0xa0,                         // ports
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // segment offset, message length: 0
        0x80, 0x18,                                     // 32-byte header, ACK
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00,             // mss, checksum, resend index: 0
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // ID: unused, 0
        0x00, 0x02, 0x00, 0x00,                         // count 2, reserved
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, // ID 2
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, // ID 4
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // MAC (NullCipher: zero)
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];
    assert_eq!(acks, vec![ack.to_vec()]);
    server.handle_datagram(later, addr(CLIENT_PORT), &acks[0]);
    assert_eq!(server.server_rpcs(), 0, "the ACK freed both RPCs");
}

/// One call at a time, the client transmitting after every datagram it
/// handles (as a driver does): the 16th completion fills the ACK batch,
/// which waits for the next request and leaves in its datagram (ACK
/// first, then the DATA packet), not in a datagram of its own that would
/// wake the server once more.
#[test]
fn a_full_ack_batch_rides_with_the_next_request() {
    let (mut client, mut server) = pair(true);
    let now = Instant::now();
    let mut client_datagrams = Vec::new();
    for _ in 0..17 {
        client
            .send_request(now, addr(SERVER_PORT), b"abc")
            .expect("session");
        let sent = drain(&mut client, now);
        for d in &sent {
            server.handle_datagram(now, addr(CLIENT_PORT), d);
        }
        client_datagrams.extend(sent);
        while let Some(ev) = server.poll_event() {
            if let Event::Request { rpc, data } = ev {
                server.send_response(now, rpc, &data).expect("in service");
            }
        }
        for d in drain(&mut server, now) {
            client.handle_datagram(now, addr(SERVER_PORT), &d);
        }
        while client.poll_event().is_some() {}
        // A driver transmits right after it handled a datagram: nothing
        // may leave between a response and the next request.
        client_datagrams.extend(drain(&mut client, now));
    }
    assert_eq!(client_datagrams.len(), 17, "one datagram per request");
    let last = &client_datagrams[16];
    let ack_len = first_packet_len(last, true).expect("a packet");
    let ack = &last[..ack_len - 16]; // the MAC (zero with the NullCipher) is no part of the header
    let ack = Repr::parse(&Packet::new_checked(ack).expect("ACK")).expect("ACK");
    assert!(matches!(ack.body, Body::Ack(ref ids) if ids.as_slice().len() == 16));
    assert!(last.len() > ack_len, "the request's DATA follows the ACK");
    assert_eq!(
        server.server_rpcs(),
        1,
        "the 16 acknowledged RPCs are freed"
    );
}

#[test]
fn coalescing_off_sends_one_packet_per_datagram() {
    let (mut client, _server) = pair(false);
    let now = Instant::now();
    send_abc_xyz(&mut client, now);
    let sent = drain(&mut client, now);
    assert_eq!(sent.len(), 2);
    assert_eq!(client.stats().coalesced_packets_tx, 0);
}

#[test]
fn a_corrupt_packet_ends_its_datagram() {
    let (mut client, mut server) = pair(true);
    let now = Instant::now();
    send_abc_xyz(&mut client, now);
    let mut d = drain(&mut client, now).remove(0);
    // Corrupt the first packet's flags (a reserved bit of byte 30): its
    // length can no longer be trusted, so the datagram ends there, one
    // drop.
    d[30] |= 0x80;
    server.handle_datagram(now, addr(CLIENT_PORT), &d);
    assert_eq!(server.stats().drops.total(), 1);
    assert!(server.poll_event().is_none());
}

#[test]
fn a_duplicate_packet_does_not_end_its_datagram() {
    let (mut client, mut server) = pair(true);
    let now = Instant::now();
    client
        .send_request(now, addr(SERVER_PORT), b"abc")
        .expect("session");
    let first = drain(&mut client, now).remove(0);
    server.handle_datagram(now, addr(CLIENT_PORT), &first);
    client
        .send_request(now, addr(SERVER_PORT), b"xyz")
        .expect("session");
    let second = drain(&mut client, now).remove(0);
    // A stale copy of the first request, then the second one.
    let mut d = first.clone();
    d.extend_from_slice(&second);
    server.handle_datagram(now, addr(CLIENT_PORT), &d);
    let drops = server.stats().drops;
    assert_eq!(drops.get(smt_proto::DropReason::Duplicate), 1, "{drops:?}");
    assert_eq!(drops.total(), 1);
    let requests = std::iter::from_fn(|| server.poll_event())
        .filter(|e| matches!(e, Event::Request { .. }))
        .count();
    assert_eq!(requests, 2);
}

#[test]
fn trailing_bytes_that_are_no_packet_are_dropped() {
    let (mut client, mut server) = pair(true);
    let now = Instant::now();
    client
        .send_request(now, addr(SERVER_PORT), b"abc")
        .expect("session");
    let mut d = drain(&mut client, now).remove(0);
    d.extend_from_slice(&[0xff; 7]);
    server.handle_datagram(now, addr(CLIENT_PORT), &d);
    assert_eq!(server.stats().drops.total(), 1, "the 7 bytes");
    assert_eq!(server.stats().coalesced_packets_rx, 1);
    assert!(matches!(server.poll_event(), Some(Event::Request { .. })));
}

/// docs/protocol.md § 2.1: a type byte not in § 2's table gives no
/// length (such a packet may carry anything after its header), so the
/// rest of the datagram is one last packet, dropped as *unknown type*.
#[test]
fn an_unknown_type_is_the_rest_of_its_datagram() {
    let (mut client, mut server) = pair(true);
    let now = Instant::now();
    send_abc_xyz(&mut client, now);
    let mut d = drain(&mut client, now).remove(0);
    d[13] = 0x7f;
    assert_eq!(
        first_packet_len(&d, true),
        Err(smt_proto::wire::WireError::UnknownType(
            smt_proto::wire::PacketType(0x7f)
        ))
    );
    let packets: Vec<&[u8]> = smt_proto::wire::Packets::new(&d, true).collect();
    assert_eq!(packets, [&d[..]]);
    server.handle_datagram(now, addr(CLIENT_PORT), &d);
    let drops = server.stats().drops;
    assert_eq!(drops.get(smt_proto::DropReason::UnknownType), 1);
    assert_eq!(drops.total(), 1, "{drops:?}");
    assert!(server.poll_event().is_none());
}

#[test]
fn split_packets_parse_like_lone_ones() {
    let mut d = data_packet(CLIENT_PORT, SERVER_PORT, 2, b"abc");
    d.extend(data_packet(CLIENT_PORT, SERVER_PORT, 4, b"xyz"));
    let mut rest = &d[..];
    let mut ids = Vec::new();
    while !rest.is_empty() {
        let len = first_packet_len(rest, true).expect("well-formed");
        let (p, tail) = rest.split_at(len);
        let repr = Repr::parse(&Packet::new_checked(p).expect("header")).expect("packet");
        assert!(matches!(repr.body, Body::Data(_)));
        ids.push(repr.id);
        rest = tail;
    }
    assert_eq!(ids, [2, 4]);
}

/// `Packets::next_split` splits as the iterator does and hands on the
/// DATA header exactly when `DataHeader::parse` of the split-off bytes
/// accepts it: a well-formed DATA packet, one with an unknown flag (split
/// by its length, its header refused), and a cut one (the rest).
#[test]
fn a_split_carries_the_data_header_its_bytes_parse_to() {
    let mut d = data_packet(CLIENT_PORT, SERVER_PORT, 2, b"abc");
    let mut bad_flags = data_packet(CLIENT_PORT, SERVER_PORT, 4, b"xyz");
    bad_flags[30] = 0x80;
    d.extend(bad_flags);
    d.extend(&data_packet(CLIENT_PORT, SERVER_PORT, 6, b"end")[..50]);
    let mut packets = Packets::new(&d, true);
    let mut splits = Vec::new();
    while let Some(split) = packets.next_split() {
        splits.push(split);
    }
    let bytes: Vec<&[u8]> = splits.iter().map(|s| s.bytes()).collect();
    assert_eq!(bytes, Packets::new(&d, true).collect::<Vec<_>>());
    assert_eq!(
        bytes.iter().map(|b| b.len()).collect::<Vec<_>>(),
        [69, 69, 50]
    );
    for split in &splits {
        let parsed = DataHeader::parse(&Packet::new_checked(split.bytes()).expect("header"));
        assert_eq!(split.data_header(), parsed.as_ref().ok());
    }
    let headers: Vec<bool> = splits.iter().map(|s| s.data_header().is_some()).collect();
    assert_eq!(headers, [true, false, false]);
}

/// A request's priority (`Endpoint::set_request_priority`) is byte 31 of
/// each of its DATA packets (`docs/protocol.md` § 3); the receiver accepts
/// it and delivers the request as any other; the response goes at 0.
#[test]
fn request_priority_is_written_in_byte_31_and_accepted() {
    let (mut client, mut server) = pair(false);
    let now = Instant::now();
    let urgent = client
        .send_request(now, addr(SERVER_PORT), b"abc")
        .expect("session");
    assert!(client.set_request_priority(urgent, 5));
    client
        .send_request(now, addr(SERVER_PORT), b"xyz")
        .expect("session");
    let sent = drain(&mut client, now);
    assert_eq!(sent.len(), 2);
    let mut expected = data_packet(CLIENT_PORT, SERVER_PORT, 2, b"abc");
    expected[31] = 5;
    assert_eq!(sent[0], expected, "byte 31 carries the priority");
    assert_eq!(sent[1], data_packet(CLIENT_PORT, SERVER_PORT, 4, b"xyz"));
    for d in &sent {
        server.handle_datagram(now, addr(CLIENT_PORT), d);
    }
    let mut requests = Vec::new();
    while let Some(e) = server.poll_event() {
        if let Event::Request { rpc, data } = e {
            requests.push(data.to_vec());
            server.send_response(now, rpc, &b"ok"[..]).expect("respond");
        }
    }
    assert_eq!(requests, [b"abc".to_vec(), b"xyz".to_vec()]);
    for d in drain(&mut server, now) {
        let p = Packet::new_checked(&d[..]).expect("header");
        assert_eq!(p.priority(), 0, "responses go at priority 0");
    }
}
