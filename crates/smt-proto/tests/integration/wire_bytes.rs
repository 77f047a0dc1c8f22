//! Byte-exact tests of the SMT wire format (smoltcp's habit).
//!
//! Every packet type has a hand-written byte array with one comment per
//! field. Each array is (a) deconstructed with the checked view's accessors
//! and [`Repr::parse`], and (b) rebuilt by [`Repr::emit`] into a buffer
//! pre-filled with a poison byte, so a field the emitter forgets to write
//! shows up as `0xa5` in the diff. `docs/protocol.md` describes the same
//! bytes; when one changes, so must the other.
//!
//! Then come the negative tests (every truncation, every reserved bit, every
//! DATA-only field on every control packet...) and a seeded property loop:
//! random valid reprs round-trip, and random or mutated bytes never panic
//! and, when they parse, re-emit to exactly the bytes they came from.

use smt_proto::crypto::{NullCipher, PacketCipher, TAG_LEN};
use smt_proto::record::{seal_message, MessageLayout, SeqLayout};
use smt_proto::wire::{
    AckIds, Body, DataFlags, DataHeader, Packet, PacketType, Repr, WireError, ACK_MAX_IDS,
    COMMON_HEADER_LEN, DATA_HEADER_LEN,
};

/// Filled into emit buffers beforehand; no fixture header byte has this value.
const POISON: u8 = 0xa5;

// ---------------------------------------------------------------------------
// Fixtures
//
// The DATA fixtures are the last packet of the third segment of a 1 MiB
// message laid out in 16384-byte records (`MessageLayout::new(1 << 20,
// 1 << 20, 16384)`, checked in `data_fixture_matches_a_real_layout`): three
// records per segment, so segment 2 starts at 2 * 3 * 16406 = 98436 and is
// 49218 bytes long; with an mss of 1448 it is cut into 34 packets, the last
// (index 33) carrying the remaining 49218 - 33 * 1448 = 1434 bytes.
// ---------------------------------------------------------------------------

/// Client port of every fixture.
const CLIENT_PORT: u16 = 0x9c40;
/// Server port of every fixture.
const SERVER_PORT: u16 = 0x0fa0;
/// The message / RPC ID of every fixture (fits the default 48-bit split).
const ID: u64 = 0x0000_1122_3344_5566;
/// Payload bytes of the DATA fixtures.
const DATA_PAYLOAD_LEN: usize = 1434;

#[rustfmt::skip]
const DATA_FIRST_HEADER: [u8; 44] = [
    0x9c, 0x40,             //  0..2   source port 0x9c40            (TCP source port)
    0x0f, 0xa0,             //  2..4   destination port 0x0fa0       (TCP destination port)
    0x00, 0x01, 0x80, 0x84, //  4..8   segment offset 98436          (TCP sequence number)
    0x00, 0x10, 0x00, 0x00, //  8..12  message length 1 MiB          (TCP acknowledgment number)
    0xb0,                   // 12      data offset 11 words = 44 B; low nibble reserved
    0x10,                   // 13      packet type DATA              (TCP flags: ACK only)
    0x05, 0xa8,             // 14..16  mss 1448                      (TCP window)
    0x00, 0x00,             // 16..18  checksum: always zero         (TCP checksum)
    0x00, 0x00,             // 18..20  resend index: 0 on a first transmission (TCP urgent pointer)
    0x00, 0x00, 0x11, 0x22, // 20..28  message ID 0x1122_3344_5566   (TCP options)
    0x33, 0x44, 0x55, 0x66,
    0x00, 0x21,             // 28..30  packet index 33
    0x00,                   // 30      flags: none
    0x00,                   // 31      reserved
    0x00, 0x10, 0x05, 0x80, // 32..36  message wire length 1049984 (2^20 + 64 records * 22)
    0x00, 0x00, 0xc0, 0x42, // 36..40  segment length 49218 (3 records * 16406)
    0x00, 0x03, 0x00, 0x00, // 40..44  incoming 196608
];

/// The same packet sent again: flagged, packet index 0, original index in the
/// resend-index field, as if it were a new one-packet TSO segment.
#[rustfmt::skip]
const DATA_RETRANSMIT_HEADER: [u8; 44] = [
    0x9c, 0x40,             //  0..2   source port
    0x0f, 0xa0,             //  2..4   destination port
    0x00, 0x01, 0x80, 0x84, //  4..8   segment offset 98436
    0x00, 0x10, 0x00, 0x00, //  8..12  message length 1 MiB
    0xb0,                   // 12      data offset 44 B
    0x10,                   // 13      DATA
    0x05, 0xa8,             // 14..16  mss 1448
    0x00, 0x00,             // 16..18  checksum 0
    0x00, 0x21,             // 18..20  resend index 33: the original packet index
    0x00, 0x00, 0x11, 0x22, // 20..28  message ID
    0x33, 0x44, 0x55, 0x66,
    0x00, 0x00,             // 28..30  packet index 0 on a retransmission
    0x01,                   // 30      flags: RETRANSMIT
    0x00,                   // 31      reserved
    0x00, 0x10, 0x05, 0x80, // 32..36  message wire length 1049984
    0x00, 0x00, 0xc0, 0x42, // 36..40  segment length 49218
    0x00, 0x03, 0x00, 0x00, // 40..44  incoming 196608
];

/// Receiver to sender: send up to wire offset 196608 at priority 3.
#[rustfmt::skip]
const GRANT: [u8; 36] = [
    0x0f, 0xa0,             //  0..2   source port (the receiver's)
    0x9c, 0x40,             //  2..4   destination port
    0x00, 0x00, 0x00, 0x00, //  4..8   segment offset: DATA only, zero
    0x00, 0x00, 0x00, 0x00, //  8..12  message length: DATA only, zero
    0x90,                   // 12      data offset 9 words = 36 B
    0x11,                   // 13      GRANT
    0x00, 0x00,             // 14..16  mss: DATA only, zero
    0x00, 0x00,             // 16..18  checksum 0
    0x00, 0x00,             // 18..20  resend index: DATA only, zero
    0x00, 0x00, 0x11, 0x22, // 20..28  message ID
    0x33, 0x44, 0x55, 0x66,
    0x00, 0x03, 0x00, 0x00, // 28..32  grant offset 196608
    0x03,                   // 32      priority 3
    0x00, 0x00, 0x00,       // 33..36  reserved
];

/// Receiver to sender: retransmit packet 11 of segment 2
/// (98436 + 11 * 1448 = 114364), at priority 5.
#[rustfmt::skip]
const RESEND: [u8; 40] = [
    0x0f, 0xa0,             //  0..2   source port
    0x9c, 0x40,             //  2..4   destination port
    0x00, 0x00, 0x00, 0x00, //  4..8   segment offset: zero
    0x00, 0x00, 0x00, 0x00, //  8..12  message length: zero
    0xa0,                   // 12      data offset 10 words = 40 B
    0x12,                   // 13      RESEND
    0x00, 0x00,             // 14..16  mss: zero
    0x00, 0x00,             // 16..18  checksum 0
    0x00, 0x00,             // 18..20  resend index: zero
    0x00, 0x00, 0x11, 0x22, // 20..28  message ID
    0x33, 0x44, 0x55, 0x66,
    0x00, 0x01, 0xbe, 0xbc, // 28..32  offset 114364
    0x00, 0x00, 0x05, 0xa8, // 32..36  length 1448
    0x05,                   // 36      priority 5
    0x00, 0x00, 0x00,       // 37..40  reserved
];

/// Server to client: you may have 1024 requests outstanding at me; the
/// server's 7th CREDIT. The ID is unused (0).
#[rustfmt::skip]
const CREDIT: [u8; 36] = [
    0x0f, 0xa0,             //  0..2   source port
    0x9c, 0x40,             //  2..4   destination port
    0x00, 0x00, 0x00, 0x00, //  4..8   segment offset: zero
    0x00, 0x00, 0x00, 0x00, //  8..12  message length: zero
    0x90,                   // 12      data offset 9 words = 36 B
    0x1c,                   // 13      CREDIT
    0x00, 0x00,             // 14..16  mss: zero
    0x00, 0x00,             // 16..18  checksum 0
    0x00, 0x00,             // 18..20  resend index: zero
    0x00, 0x00, 0x00, 0x00, // 20..28  message ID: unused, zero
    0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x04, 0x00, // 28..32  limit 1024
    0x00, 0x00, 0x00, 0x07, // 32..36  sequence 7
];

fn credit_repr() -> Repr {
    Repr {
        id: 0,
        ..from_server(Body::Credit {
            limit: 1024,
            sequence: 7,
        })
    }
}

/// A header-only control packet: only the type byte differs between
/// RPC_UNKNOWN, BUSY and NEED_ACK.
#[rustfmt::skip]
const fn bare_control(ty: u8) -> [u8; 28] {
    [
        0x0f, 0xa0,             //  0..2   source port
        0x9c, 0x40,             //  2..4   destination port
        0x00, 0x00, 0x00, 0x00, //  4..8   segment offset: zero
        0x00, 0x00, 0x00, 0x00, //  8..12  message length: zero
        0x70,                   // 12      data offset 7 words = 28 B (common header only)
        ty,                     // 13      packet type
        0x00, 0x00,             // 14..16  mss: zero
        0x00, 0x00,             // 16..18  checksum 0
        0x00, 0x00,             // 18..20  resend index: zero
        0x00, 0x00, 0x11, 0x22, // 20..28  message ID
        0x33, 0x44, 0x55, 0x66,
    ]
}

const RPC_UNKNOWN: [u8; 28] = bare_control(0x13);
const BUSY: [u8; 28] = bare_control(0x14);
const NEED_ACK: [u8; 28] = bare_control(0x17);
const OVERLOADED: [u8; 28] = bare_control(0x1a);
const ABANDONED: [u8; 28] = bare_control(0x1b);

/// Client to server: RPC 0x1122_3344_5564 is complete.
#[rustfmt::skip]
const ACK_ONE: [u8; 40] = [
    0x9c, 0x40,             //  0..2   source port (the client's)
    0x0f, 0xa0,             //  2..4   destination port
    0x00, 0x00, 0x00, 0x00, //  4..8   segment offset: zero
    0x00, 0x00, 0x00, 0x00, //  8..12  message length: zero
    0x80,                   // 12      data offset 8 words = 32 B (the IDs follow it)
    0x18,                   // 13      ACK
    0x00, 0x00,             // 14..16  mss: zero
    0x00, 0x00,             // 16..18  checksum 0
    0x00, 0x00,             // 18..20  resend index: zero
    0x00, 0x00, 0x11, 0x22, // 20..28  message ID
    0x33, 0x44, 0x55, 0x66,
    0x00, 0x01,             // 28..30  ID count 1
    0x00, 0x00,             // 30..32  reserved
    0x00, 0x00, 0x11, 0x22, // 32..40  acknowledged ID 0x1122_3344_5564
    0x33, 0x44, 0x55, 0x64,
];

/// Client to server: three RPCs are complete.
#[rustfmt::skip]
const ACK_THREE: [u8; 56] = [
    0x9c, 0x40,             //  0..2   source port
    0x0f, 0xa0,             //  2..4   destination port
    0x00, 0x00, 0x00, 0x00, //  4..8   segment offset: zero
    0x00, 0x00, 0x00, 0x00, //  8..12  message length: zero
    0x80,                   // 12      data offset 32 B
    0x18,                   // 13      ACK
    0x00, 0x00,             // 14..16  mss: zero
    0x00, 0x00,             // 16..18  checksum 0
    0x00, 0x00,             // 18..20  resend index: zero
    0x00, 0x00, 0x11, 0x22, // 20..28  message ID
    0x33, 0x44, 0x55, 0x66,
    0x00, 0x03,             // 28..30  ID count 3
    0x00, 0x00,             // 30..32  reserved
    0x00, 0x00, 0x11, 0x22, // 32..40  ID 0x1122_3344_5560
    0x33, 0x44, 0x55, 0x60,
    0x00, 0x00, 0x11, 0x22, // 40..48  ID 0x1122_3344_5562
    0x33, 0x44, 0x55, 0x62,
    0x00, 0x00, 0x11, 0x22, // 48..56  ID 0x1122_3344_5564
    0x33, 0x44, 0x55, 0x64,
];

/// Nine bytes of handshake stream at stream offset 256, acknowledging 128
/// bytes of the other stream; the wire layer treats the bytes as opaque.
#[rustfmt::skip]
const HANDSHAKE: [u8; 49] = [
    0x9c, 0x40,             //  0..2   source port
    0x0f, 0xa0,             //  2..4   destination port
    0x00, 0x00, 0x00, 0x00, //  4..8   segment offset: zero
    0x00, 0x00, 0x00, 0x00, //  8..12  message length: zero
    0xa0,                   // 12      data offset 10 words = 40 B, key phase 0
    0x20,                   // 13      HANDSHAKE
    0x00, 0x00,             // 14..16  mss: zero
    0x00, 0x00,             // 16..18  checksum 0
    0x00, 0x00,             // 18..20  resend index: zero
    0x00, 0x00, 0x11, 0x22, // 20..28  message ID
    0x33, 0x44, 0x55, 0x66,
    0x00, 0x00, 0x01, 0x00, // 28..32  stream offset 256
    0x00, 0x00, 0x00, 0x80, // 32..36  ack: 128 bytes of the other stream
    0x00, 0x09,             // 36..38  handshake length 9
    0x00,                   // 38      kind 0: TLS 1.3
    0x00,                   // 39      reserved
    0x16, 0x03, 0x03, 0x00, // 40..49  handshake bytes (opaque)
    0x04, 0x01, 0x00, 0x00,
    0x00,
];

/// The HANDSHAKE fixture's body.
fn handshake_body(len: u16) -> Body {
    Body::Handshake {
        offset: 256,
        ack: 128,
        len,
        kind: smt_proto::HandshakeKind::TLS13,
        flags: 0,
    }
}

/// Stand-in ciphertext for the DATA fixtures.
fn data_payload() -> Vec<u8> {
    (0..DATA_PAYLOAD_LEN)
        .map(|i| (i as u8).wrapping_mul(7) ^ 0x5a)
        .collect()
}

fn with_payload(header: &[u8]) -> Vec<u8> {
    let mut bytes = header.to_vec();
    bytes.extend(data_payload());
    bytes
}

fn data_first() -> Vec<u8> {
    with_payload(&DATA_FIRST_HEADER)
}

fn data_retransmit() -> Vec<u8> {
    with_payload(&DATA_RETRANSMIT_HEADER)
}

fn data_header(retransmit: bool) -> DataHeader {
    DataHeader {
        message_len: 1 << 20,
        message_wire_len: 1_049_984,
        segment_offset: 98_436,
        segment_len: 49_218,
        mss: 1448,
        packet_index: 33,
        retransmit,
        incoming: 196_608,
        priority: 0,
    }
}

fn from_client(body: Body) -> Repr {
    Repr {
        src_port: CLIENT_PORT,
        dst_port: SERVER_PORT,
        key_phase: false,
        id: ID,
        body,
    }
}

fn from_server(body: Body) -> Repr {
    Repr {
        src_port: SERVER_PORT,
        dst_port: CLIENT_PORT,
        key_phase: false,
        id: ID,
        body,
    }
}

fn ack_ids(ids: &[u64]) -> AckIds {
    let mut list = AckIds::new();
    for &id in ids {
        assert!(list.push(id));
    }
    list
}

/// Every fixture with the repr it stands for and its payload (the bytes
/// after what `emit` writes).
fn fixtures() -> Vec<(&'static str, Vec<u8>, Repr, Vec<u8>)> {
    vec![
        (
            "DATA",
            data_first(),
            from_client(Body::Data(data_header(false))),
            data_payload(),
        ),
        (
            "DATA retransmit",
            data_retransmit(),
            from_client(Body::Data(data_header(true))),
            data_payload(),
        ),
        (
            "GRANT",
            GRANT.to_vec(),
            from_server(Body::Grant {
                offset: 196_608,
                priority: 3,
            }),
            vec![],
        ),
        (
            "RESEND",
            RESEND.to_vec(),
            from_server(Body::Resend {
                offset: 114_364,
                length: 1448,
                priority: 5,
            }),
            vec![],
        ),
        (
            "RPC_UNKNOWN",
            RPC_UNKNOWN.to_vec(),
            from_server(Body::RpcUnknown),
            vec![],
        ),
        ("BUSY", BUSY.to_vec(), from_server(Body::Busy), vec![]),
        ("CREDIT", CREDIT.to_vec(), credit_repr(), vec![]),
        (
            "OVERLOADED",
            OVERLOADED.to_vec(),
            from_server(Body::Overloaded),
            vec![],
        ),
        (
            "ABANDONED",
            ABANDONED.to_vec(),
            from_server(Body::Abandoned),
            vec![],
        ),
        (
            "NEED_ACK",
            NEED_ACK.to_vec(),
            from_server(Body::NeedAck),
            vec![],
        ),
        (
            "ACK 1",
            ACK_ONE.to_vec(),
            from_client(Body::Ack(ack_ids(&[0x1122_3344_5564]))),
            vec![],
        ),
        (
            "ACK 3",
            ACK_THREE.to_vec(),
            from_client(Body::Ack(ack_ids(&[
                0x1122_3344_5560,
                0x1122_3344_5562,
                0x1122_3344_5564,
            ]))),
            vec![],
        ),
        (
            "HANDSHAKE",
            HANDSHAKE.to_vec(),
            from_client(handshake_body(9)),
            HANDSHAKE[40..].to_vec(),
        ),
    ]
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn parse(bytes: &[u8]) -> Result<Repr, WireError> {
    let packet = Packet::new_checked(bytes)?;
    Repr::parse(&packet)
}

/// `repr` emitted into a poisoned buffer, followed by `payload`.
fn emit(repr: &Repr, payload: &[u8]) -> Vec<u8> {
    let header_len = repr.buffer_len();
    let mut buf = vec![POISON; header_len + payload.len()];
    repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
    buf[header_len..].copy_from_slice(payload);
    buf
}

/// Compares byte strings, naming the first offset that differs.
#[track_caller]
fn assert_bytes_eq(got: &[u8], want: &[u8]) {
    if let Some(at) = got.iter().zip(want).position(|(g, w)| g != w) {
        panic!(
            "byte {at} differs: got {:#04x}, want {:#04x}",
            got[at], want[at]
        );
    }
    assert_eq!(got.len(), want.len(), "lengths differ");
}

#[track_caller]
fn assert_emits(repr: &Repr, payload: &[u8], want: &[u8]) {
    let header_len = repr.buffer_len();
    assert!(
        !want[..header_len].contains(&POISON),
        "fixture header holds the poison byte, so a missed write could hide"
    );
    assert_bytes_eq(&emit(repr, payload), want);
}

/// A copy of `bytes` changed by `edit`.
fn edited(bytes: &[u8], edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut copy = bytes.to_vec();
    edit(&mut copy);
    copy
}

fn put16(bytes: &mut [u8], at: usize, v: u16) {
    bytes[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

fn put32(bytes: &mut [u8], at: usize, v: u32) {
    bytes[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

// ---------------------------------------------------------------------------
// (a) Deconstruct and (b) construct, per packet type
// ---------------------------------------------------------------------------

/// Checks the common-header accessors shared by every fixture.
#[track_caller]
fn check_common<T: AsRef<[u8]>>(
    p: &Packet<T>,
    sport: u16,
    dport: u16,
    header_len: usize,
    ty: PacketType,
) {
    assert_eq!(p.src_port(), sport);
    assert_eq!(p.dst_port(), dport);
    assert_eq!(p.header_len(), header_len);
    assert_eq!(p.doff_reserved(), 0);
    assert_eq!(p.packet_type(), ty);
    assert_eq!(p.checksum(), 0);
    assert_eq!(p.id(), ID);
}

/// Checks that the DATA-only common-header fields are zero.
#[track_caller]
fn check_data_fields_zero<T: AsRef<[u8]>>(p: &Packet<T>) {
    assert_eq!(p.segment_offset(), 0);
    assert_eq!(p.message_len(), 0);
    assert_eq!(p.mss(), 0);
    assert_eq!(p.resend_index(), 0);
}

#[test]
fn data_first_transmission_deconstruct() {
    let bytes = data_first();
    let p = Packet::new_checked(&bytes[..]).expect("valid header");
    check_common(
        &p,
        CLIENT_PORT,
        SERVER_PORT,
        DATA_HEADER_LEN,
        PacketType::DATA,
    );
    assert_eq!(p.check_data(), Ok(()));
    assert_eq!(p.segment_offset(), 98_436);
    assert_eq!(p.message_len(), 1 << 20);
    assert_eq!(p.mss(), 1448);
    assert_eq!(p.resend_index(), 0);
    assert_eq!(p.packet_index(), 33);
    assert_eq!(p.data_flags(), DataFlags::default());
    assert_eq!(p.priority(), 0);
    assert_eq!(p.message_wire_len(), 1_049_984);
    assert_eq!(p.segment_len(), 49_218);
    assert_eq!(p.incoming(), 196_608);
    assert_eq!(p.payload(), &data_payload()[..]);

    let repr = Repr::parse(&p).expect("valid packet");
    assert_eq!(repr, from_client(Body::Data(data_header(false))));
    let Body::Data(d) = repr.body else {
        unreachable!()
    };
    assert_eq!(
        d.payload_len(),
        DATA_PAYLOAD_LEN,
        "last packet of the segment is short"
    );
    assert_eq!(d.wire_offset(), 98_436 + 33 * 1448);
    assert_eq!(
        d.wire_offset() + DATA_PAYLOAD_LEN as u64,
        98_436 + 49_218,
        "ends the segment"
    );
}

#[test]
fn data_first_transmission_construct() {
    let repr = from_client(Body::Data(data_header(false)));
    assert_eq!(repr.buffer_len(), DATA_HEADER_LEN);
    assert_emits(&repr, &data_payload(), &data_first());
}

#[test]
fn data_retransmission_deconstruct() {
    let bytes = data_retransmit();
    let p = Packet::new_checked(&bytes[..]).expect("valid header");
    check_common(
        &p,
        CLIENT_PORT,
        SERVER_PORT,
        DATA_HEADER_LEN,
        PacketType::DATA,
    );
    assert_eq!(p.segment_offset(), 98_436);
    assert_eq!(p.message_len(), 1 << 20);
    assert_eq!(p.mss(), 1448);
    assert_eq!(
        p.resend_index(),
        33,
        "original index travels in the resend-index field"
    );
    assert_eq!(
        p.packet_index(),
        0,
        "a retransmission looks like packet 0 of a new segment"
    );
    assert!(p.data_flags().contains(DataFlags::RETRANSMIT));
    assert_eq!(p.data_flags(), DataFlags::RETRANSMIT);
    assert_eq!(p.priority(), 0);
    assert_eq!(p.message_wire_len(), 1_049_984);
    assert_eq!(p.segment_len(), 49_218);
    assert_eq!(p.incoming(), 196_608);
    assert_eq!(p.payload(), &data_payload()[..]);

    let repr = Repr::parse(&p).expect("valid packet");
    assert_eq!(repr, from_client(Body::Data(data_header(true))));
    let Body::Data(d) = repr.body else {
        unreachable!()
    };
    assert_eq!(d.packet_index, 33, "Repr carries the original index");
    assert_eq!(d.payload_len(), DATA_PAYLOAD_LEN);
    assert_eq!(
        d.wire_offset(),
        98_436 + 33 * 1448,
        "same bytes as the original"
    );
}

#[test]
fn data_retransmission_construct() {
    let repr = from_client(Body::Data(data_header(true)));
    assert_eq!(repr.buffer_len(), DATA_HEADER_LEN);
    assert_emits(&repr, &data_payload(), &data_retransmit());
}

#[test]
fn grant_deconstruct() {
    let p = Packet::new_checked(&GRANT[..]).expect("valid header");
    check_common(&p, SERVER_PORT, CLIENT_PORT, 36, PacketType::GRANT);
    check_data_fields_zero(&p);
    assert_eq!(p.payload(), &[] as &[u8]);
    let repr = Repr::parse(&p).expect("valid packet");
    assert_eq!(
        repr,
        from_server(Body::Grant {
            offset: 196_608,
            priority: 3
        })
    );
}

#[test]
fn grant_construct() {
    let repr = from_server(Body::Grant {
        offset: 196_608,
        priority: 3,
    });
    assert_eq!(repr.buffer_len(), GRANT.len());
    assert_emits(&repr, &[], &GRANT);
}

#[test]
fn credit_deconstruct() {
    let p = Packet::new_checked(&CREDIT[..]).expect("valid header");
    assert_eq!((p.src_port(), p.dst_port()), (SERVER_PORT, CLIENT_PORT));
    assert_eq!((p.header_len(), p.packet_type()), (36, PacketType::CREDIT));
    assert_eq!((p.doff_reserved(), p.checksum(), p.id()), (0, 0, 0));
    check_data_fields_zero(&p);
    let repr = Repr::parse(&p).expect("valid packet");
    assert_eq!(repr, credit_repr());
}

#[test]
fn credit_construct() {
    let repr = credit_repr();
    assert_eq!(repr.buffer_len(), CREDIT.len());
    assert_emits(&repr, &[], &CREDIT);
}

#[test]
fn resend_deconstruct() {
    let p = Packet::new_checked(&RESEND[..]).expect("valid header");
    check_common(&p, SERVER_PORT, CLIENT_PORT, 40, PacketType::RESEND);
    check_data_fields_zero(&p);
    let repr = Repr::parse(&p).expect("valid packet");
    assert_eq!(
        repr,
        from_server(Body::Resend {
            offset: 114_364,
            length: 1448,
            priority: 5
        })
    );
}

#[test]
fn resend_construct() {
    let repr = from_server(Body::Resend {
        offset: 114_364,
        length: 1448,
        priority: 5,
    });
    assert_eq!(repr.buffer_len(), RESEND.len());
    assert_emits(&repr, &[], &RESEND);
}

#[test]
fn header_only_controls_deconstruct() {
    for (bytes, ty, body) in [
        (RPC_UNKNOWN, PacketType::RPC_UNKNOWN, Body::RpcUnknown),
        (BUSY, PacketType::BUSY, Body::Busy),
        (NEED_ACK, PacketType::NEED_ACK, Body::NeedAck),
        (OVERLOADED, PacketType::OVERLOADED, Body::Overloaded),
        (ABANDONED, PacketType::ABANDONED, Body::Abandoned),
    ] {
        let p = Packet::new_checked(&bytes[..]).expect("valid header");
        check_common(&p, SERVER_PORT, CLIENT_PORT, COMMON_HEADER_LEN, ty);
        check_data_fields_zero(&p);
        assert!(p.payload().is_empty());
        assert_eq!(Repr::parse(&p), Ok(from_server(body)), "{ty}");
    }
}

#[test]
fn header_only_controls_construct() {
    for (bytes, body) in [
        (RPC_UNKNOWN, Body::RpcUnknown),
        (BUSY, Body::Busy),
        (NEED_ACK, Body::NeedAck),
        (OVERLOADED, Body::Overloaded),
        (ABANDONED, Body::Abandoned),
    ] {
        let repr = from_server(body);
        assert_eq!(repr.buffer_len(), COMMON_HEADER_LEN);
        assert_emits(&repr, &[], &bytes);
    }
}

#[test]
fn ack_one_deconstruct() {
    let p = Packet::new_checked(&ACK_ONE[..]).expect("valid header");
    check_common(&p, CLIENT_PORT, SERVER_PORT, 32, PacketType::ACK);
    check_data_fields_zero(&p);
    assert_eq!(
        p.payload(),
        &ACK_ONE[32..],
        "the ID list follows the declared header"
    );
    let repr = Repr::parse(&p).expect("valid packet");
    let Body::Ack(ids) = repr.body else {
        panic!("not an ACK: {repr:?}")
    };
    assert_eq!(ids.as_slice(), &[0x1122_3344_5564]);
    assert_eq!(repr, from_client(Body::Ack(ack_ids(&[0x1122_3344_5564]))));
}

#[test]
fn ack_one_construct() {
    let repr = from_client(Body::Ack(ack_ids(&[0x1122_3344_5564])));
    assert_eq!(
        repr.buffer_len(),
        ACK_ONE.len(),
        "buffer_len includes the ID list"
    );
    assert_emits(&repr, &[], &ACK_ONE);
}

#[test]
fn ack_three_deconstruct() {
    let p = Packet::new_checked(&ACK_THREE[..]).expect("valid header");
    check_common(&p, CLIENT_PORT, SERVER_PORT, 32, PacketType::ACK);
    check_data_fields_zero(&p);
    let repr = Repr::parse(&p).expect("valid packet");
    let Body::Ack(ids) = repr.body else {
        panic!("not an ACK: {repr:?}")
    };
    assert_eq!(
        ids.as_slice(),
        &[0x1122_3344_5560, 0x1122_3344_5562, 0x1122_3344_5564]
    );
}

#[test]
fn ack_three_construct() {
    let repr = from_client(Body::Ack(ack_ids(&[
        0x1122_3344_5560,
        0x1122_3344_5562,
        0x1122_3344_5564,
    ])));
    assert_eq!(repr.buffer_len(), ACK_THREE.len());
    assert_emits(&repr, &[], &ACK_THREE);
}

#[test]
fn handshake_deconstruct() {
    let p = Packet::new_checked(&HANDSHAKE[..]).expect("valid header");
    check_common(&p, CLIENT_PORT, SERVER_PORT, 40, PacketType::HANDSHAKE);
    check_data_fields_zero(&p);
    assert_eq!(p.payload(), &HANDSHAKE[40..]);
    assert_eq!(Repr::parse(&p), Ok(from_client(handshake_body(9))));
}

#[test]
fn handshake_construct() {
    let repr = from_client(handshake_body(9));
    assert_eq!(
        repr.buffer_len(),
        40,
        "the handshake bytes are the caller's to append"
    );
    assert_emits(&repr, &HANDSHAKE[40..], &HANDSHAKE);
}

#[test]
fn every_fixture_round_trips_through_parse_and_emit() {
    for (name, bytes, repr, payload) in fixtures() {
        assert_eq!(parse(&bytes), Ok(repr), "{name}");
        assert_bytes_eq(&emit(&repr, &payload), &bytes);
    }
}

#[test]
fn data_fixture_matches_a_real_layout() {
    let layout = MessageLayout::new(1 << 20, 1 << 20, 16384);
    let d = data_header(false);
    assert_eq!(layout.wire_len(), u64::from(d.message_wire_len));
    assert_eq!(layout.padded_len(), u64::from(d.message_len));
    let seg = layout.segment(2);
    assert_eq!(seg.wire_offset, u64::from(d.segment_offset));
    assert_eq!(seg.wire_len, u64::from(d.segment_len));
    assert_eq!(seg.first_record, 6);
    assert_eq!(
        u64::from(d.segment_len).div_ceil(u64::from(d.mss)),
        34,
        "34 packets"
    );
}

#[test]
fn middle_packets_carry_a_full_mss() {
    for index in 0..33 {
        let d = DataHeader {
            packet_index: index,
            ..data_header(false)
        };
        assert_eq!(d.payload_len(), 1448);
        assert_eq!(d.wire_offset(), 98_436 + u64::from(index) * 1448);
    }
}

/// The hex example in `docs/protocol.md` ("A worked example"): a 3-byte
/// message sealed with the NullCipher, sent as one DATA packet.
#[test]
fn worked_example_from_protocol_md() {
    let layout = MessageLayout::new(3, 3, 16384);
    let sealed = seal_message(&NullCipher, SeqLayout::DEFAULT, ID, b"abc", layout).expect("fits");
    let seg = layout.segment(0);
    let header = DataHeader {
        message_len: layout.padded_len() as u32,
        message_wire_len: layout.wire_len() as u32,
        segment_offset: seg.wire_offset as u32,
        segment_len: seg.wire_len as u32,
        // The mss never exceeds the segment: a one-packet segment states its
        // own length.
        mss: 1448.min(seg.wire_len as u16),
        packet_index: 0,
        retransmit: false,
        incoming: layout.wire_len() as u32,
        priority: 0,
    };
    let repr = from_client(Body::Data(header));
    let bytes = emit(&repr, &sealed.wire);
    #[rustfmt::skip]
    let want: [u8; 69] = [
        0x9c, 0x40, 0x0f, 0xa0,                         // ports
        0x00, 0x00, 0x00, 0x00,                         // segment offset 0
        0x00, 0x00, 0x00, 0x03,                         // message length 3
        0xb0, 0x10,                                     // 44-byte header, DATA
        0x00, 0x19,                                     // mss 25 (= the segment)
        0x00, 0x00, 0x00, 0x00,                         // checksum, resend index
        0x00, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, // message ID
        0x00, 0x00, 0x00, 0x00,                         // packet index 0, flags, reserved
        0x00, 0x00, 0x00, 0x19,                         // message wire length 25
        0x00, 0x00, 0x00, 0x19,                         // segment length 25
        0x00, 0x00, 0x00, 0x19,                         // incoming 25
        0x17, 0x03, 0x03, 0x00, 0x14,                   // record header: 20-byte ciphertext
        0x61, 0x62, 0x63,                               // "abc"
        0x17,                                           // inner content type
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // NullCipher tag
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];
    assert_bytes_eq(&bytes, &want);
    assert_eq!(parse(&want), Ok(repr));
    assert_eq!(SeqLayout::DEFAULT.seq(ID, 0), Some(0x1122_3344_5566_0000));
}

// ---------------------------------------------------------------------------
// Control-packet authentication framing
// ---------------------------------------------------------------------------

#[test]
fn control_tag_must_be_stripped_before_parse() {
    // On the wire a control packet is followed by a 16-byte MAC over every
    // byte before it; `Repr::parse` sees the packet without it.
    for bytes in [&GRANT[..], &RESEND[..], &BUSY[..], &ACK_ONE[..]] {
        let mut on_wire = bytes.to_vec();
        on_wire.extend_from_slice(&NullCipher.control_tag(bytes));
        assert!(
            parse(&on_wire).is_err(),
            "a tagged packet is not a bare packet"
        );
        let (packet, tag) = on_wire.split_at(on_wire.len() - TAG_LEN);
        let tag: [u8; TAG_LEN] = tag.try_into().expect("16 bytes");
        assert_eq!(NullCipher.verify_control_tag(packet, &tag), Ok(()));
        assert!(parse(packet).is_ok());
    }
}

// ---------------------------------------------------------------------------
// Negative tests
// ---------------------------------------------------------------------------

#[test]
fn every_truncation_fails_cleanly() {
    for (name, bytes, _, _) in fixtures() {
        let header_len = usize::from(bytes[12] >> 4) * 4;
        for len in 0..bytes.len() {
            let got = parse(&bytes[..len]);
            if len < header_len {
                assert_eq!(got, Err(WireError::Truncated), "{name} cut to {len} bytes");
            } else {
                assert!(
                    matches!(got, Err(WireError::BadField(_))),
                    "{name} cut to {len} bytes gave {got:?}"
                );
            }
        }
    }
}

#[test]
fn a_trailing_byte_is_rejected() {
    for (name, bytes, _, _) in fixtures() {
        let longer = edited(&bytes, |b| b.push(0));
        assert!(
            matches!(parse(&longer), Err(WireError::BadField(_))),
            "{name}"
        );
    }
}

#[test]
fn bad_data_offset() {
    use WireError::{BadHeaderLength, Truncated};
    let data = data_first();
    let cases: [(&str, &[u8], u8, WireError); 12] = [
        ("DATA doff 0", &data, 0x00, BadHeaderLength),
        (
            "DATA doff 24 B, below the common header",
            &data,
            0x60,
            BadHeaderLength,
        ),
        ("DATA doff 28 B", &data, 0x70, BadHeaderLength),
        ("DATA doff 40 B", &data, 0xa0, BadHeaderLength),
        ("DATA doff 48 B", &data, 0xc0, BadHeaderLength),
        ("GRANT doff 32 B", &GRANT, 0x80, BadHeaderLength),
        ("GRANT doff 40 B, past the buffer", &GRANT, 0xa0, Truncated),
        ("RESEND doff 36 B", &RESEND, 0x90, BadHeaderLength),
        (
            "RESEND doff 60 B, past the buffer",
            &RESEND,
            0xf0,
            Truncated,
        ),
        ("BUSY doff 32 B, past the buffer", &BUSY, 0x80, Truncated),
        ("ACK doff 36 B", &ACK_ONE, 0x90, BadHeaderLength),
        ("HANDSHAKE doff 28 B", &HANDSHAKE, 0x70, BadHeaderLength),
    ];
    for (name, bytes, doff, want) in cases {
        let bad = edited(bytes, |b| b[12] = doff);
        assert_eq!(parse(&bad), Err(want), "{name}");
    }
    // A header-only control declaring room it does not use.
    let busy = edited(&BUSY, |b| {
        b[12] = 0x80;
        b.extend_from_slice(&[0; 4]);
    });
    assert_eq!(parse(&busy), Err(BadHeaderLength));
}

#[test]
fn reserved_header_bits_are_rejected() {
    let reserved = WireError::BadField("reserved header bits");
    for (name, bytes, _, _) in fixtures() {
        // Bit 0 is the key phase (see `key_phase_bit_round_trips`).
        for bit in 1..4 {
            let bad = edited(&bytes, |b| b[12] |= 1 << bit);
            assert_eq!(
                parse(&bad),
                Err(reserved),
                "{name}: doff low nibble bit {bit}"
            );
        }
        for at in [16, 17] {
            let bad = edited(&bytes, |b| b[at] = 0x01);
            assert_eq!(parse(&bad), Err(reserved), "{name}: checksum byte {at}");
        }
    }
}

#[test]
fn key_phase_bit_round_trips() {
    for (name, bytes, repr, _) in fixtures() {
        let flipped = edited(&bytes, |b| b[12] |= 1);
        if repr.body.packet_type() == PacketType::HANDSHAKE {
            assert_eq!(
                parse(&flipped),
                Err(WireError::BadField("key phase on a handshake packet")),
                "{name}"
            );
            continue;
        }
        let parsed = parse(&flipped).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(parsed.key_phase, "{name}");
        assert_eq!(
            Repr {
                key_phase: false,
                ..parsed
            },
            repr,
            "{name}"
        );
    }
}

#[test]
fn reserved_data_bits_are_rejected() {
    for bytes in [data_first(), data_retransmit()] {
        for bit in 1..8 {
            let bad = edited(&bytes, |b| b[30] |= 1 << bit);
            assert_eq!(
                parse(&bad),
                Err(WireError::BadField("unknown DATA flags")),
                "flag bit {bit}"
            );
        }
    }
}

/// The receive path parses a DATA packet's header alone
/// (`DataHeader::parse`): it must agree with `Repr::parse` on every DATA
/// packet, good or bad (reserved header bits, flags, a corrupt length).
#[test]
fn data_header_parse_agrees_with_repr_parse() {
    for bytes in [data_first(), data_retransmit()] {
        let mut cases = vec![bytes.clone()];
        cases.push(edited(&bytes, |b| b[12] |= 1 << 2));
        cases.push(edited(&bytes, |b| b[16] = 0x01));
        cases.push(edited(&bytes, |b| b[30] |= 1 << 3));
        cases.push(edited(&bytes, |b| put32(b, 20, 1)));
        for (i, case) in cases.iter().enumerate() {
            let packet = Packet::new_checked(&case[..]).expect("long enough");
            let alone = DataHeader::parse(&packet);
            let whole = Repr::parse(&packet).map(|r| match r.body {
                Body::Data(h) => h,
                other => panic!("case {i}: {other:?}"),
            });
            assert_eq!(alone, whole, "case {i}");
        }
    }
}

/// Byte 31 of a DATA packet is the message priority (`docs/protocol.md`
/// § 3): every value parses, comes back in `DataHeader::priority`, and is
/// emitted where it was read.
#[test]
fn data_priority_is_byte_31() {
    for bytes in [data_first(), data_retransmit()] {
        for priority in [1, 7, 0x80, 0xff] {
            let with = edited(&bytes, |b| b[31] = priority);
            let repr = parse(&with).expect("any priority parses");
            let Body::Data(d) = repr.body else {
                panic!("{repr:?}")
            };
            assert_eq!(d.priority, priority);
            assert_eq!(Packet::new_checked(&with[..]).unwrap().priority(), priority);
            let mut out = vec![0x5a; repr.buffer_len()];
            repr.emit(&mut Packet::new_unchecked(&mut out[..]));
            assert_eq!(out[..], with[..DATA_HEADER_LEN], "priority {priority:#x}");
        }
    }
}

/// HANDSHAKE byte 39 holds the retry flags (`docs/protocol.md` § 4):
/// RETRY (0x01) and TOKEN (0x02) parse, any other bit is refused.
#[test]
fn handshake_flags_other_than_retry_and_token_are_rejected() {
    for (flags, want) in [(0x01, 0x01), (0x02, 0x02), (0x03, 0x03)] {
        let ok = edited(&HANDSHAKE, |b| b[39] = flags);
        match parse(&ok).expect("known flags parse").body {
            Body::Handshake { flags, .. } => assert_eq!(flags, want),
            other => panic!("{other:?}"),
        }
    }
    for bit in 2..8 {
        let bad = edited(&HANDSHAKE, |b| b[39] = 1 << bit);
        assert_eq!(
            parse(&bad),
            Err(WireError::BadField("handshake flags")),
            "flag bit {bit}"
        );
    }
}

#[test]
fn reserved_body_bytes_are_rejected() {
    let cases: [(&str, &[u8], &[usize]); 4] = [
        ("GRANT", &GRANT, &[33, 34, 35]),
        ("RESEND", &RESEND, &[37, 38, 39]),
        ("ACK 1", &ACK_ONE, &[30, 31]),
        ("ACK 3", &ACK_THREE, &[30, 31]),
    ];
    for (name, bytes, offsets) in cases {
        for &at in offsets {
            let bad = edited(bytes, |b| b[at] = 0x80);
            assert_eq!(
                parse(&bad),
                Err(WireError::BadField("reserved bytes set")),
                "{name} byte {at}"
            );
        }
    }
}

#[test]
fn unknown_types_are_rejected_and_named_in_hex() {
    for ty in 0..=u8::MAX {
        let bytes = edited(&BUSY, |b| b[13] = ty);
        let got = parse(&bytes);
        if PacketType(ty).name().is_some() {
            assert!(
                !matches!(got, Err(WireError::UnknownType(_))),
                "{ty:#04x} is known"
            );
            continue;
        }
        assert_eq!(got, Err(WireError::UnknownType(PacketType(ty))));
        let message = got.unwrap_err().to_string();
        assert!(
            message.contains(&format!("{ty:#04x}")),
            "{message:?} names {ty:#04x}"
        );
    }
    let e = WireError::UnknownType(PacketType(0x7f));
    assert_eq!(e.to_string(), "unknown packet type PacketType(0x7f)");
}

#[test]
fn known_types_have_names_and_round_trip() {
    let known = [
        (PacketType::DATA, 0x10, "DATA"),
        (PacketType::GRANT, 0x11, "GRANT"),
        (PacketType::RESEND, 0x12, "RESEND"),
        (PacketType::RPC_UNKNOWN, 0x13, "RPC_UNKNOWN"),
        (PacketType::BUSY, 0x14, "BUSY"),
        (PacketType::NEED_ACK, 0x17, "NEED_ACK"),
        (PacketType::ACK, 0x18, "ACK"),
        (PacketType::KEY_UPDATE, 0x19, "KEY_UPDATE"),
        (PacketType::OVERLOADED, 0x1a, "OVERLOADED"),
        (PacketType::ABANDONED, 0x1b, "ABANDONED"),
        (PacketType::HANDSHAKE, 0x20, "HANDSHAKE"),
    ];
    for (ty, code, name) in known {
        assert_eq!(ty.0, code);
        assert_eq!(ty.name(), Some(name));
        assert_eq!(format!("{ty}"), name);
        assert_eq!(ty.is_control(), ty != PacketType::DATA);
    }
}

#[test]
fn data_payload_length_must_match_the_layout() {
    let mismatch = Err(WireError::BadField(
        "payload length does not match segment layout",
    ));
    let data = data_first();
    assert_eq!(parse(&data[..data.len() - 1]), mismatch, "one byte short");
    assert_eq!(
        parse(&edited(&data, |b| b.push(0))),
        mismatch,
        "one byte long"
    );
    assert_eq!(parse(&DATA_FIRST_HEADER), mismatch, "no payload at all");
    // A middle packet must carry exactly one mss.
    let middle = edited(&DATA_FIRST_HEADER, |b| put16(b, 28, 5));
    assert_eq!(
        parse(&edited(&middle, |b| b.resize(44 + 1448, 0))).map(|_| ()),
        Ok(())
    );
    assert_eq!(
        parse(&edited(&middle, |b| b.resize(44 + 1447, 0))),
        mismatch
    );
    assert_eq!(
        parse(&edited(&middle, |b| b.resize(44 + DATA_PAYLOAD_LEN, 0))),
        mismatch
    );
}

#[test]
fn data_segment_must_lie_inside_the_message() {
    let beyond = Err(WireError::BadField("segment beyond message"));
    // Everything granted, so only the segment bound is in play.
    let data = edited(&data_first(), |b| put32(b, 40, 1_049_984));
    // 1049984 - 49218 = 1000766 is the last offset where the segment fits.
    assert!(parse(&edited(&data, |b| put32(b, 4, 1_000_766))).is_ok());
    assert_eq!(parse(&edited(&data, |b| put32(b, 4, 1_000_767))), beyond);
    assert_eq!(
        parse(&edited(&data, |b| put32(b, 4, u32::MAX))),
        beyond,
        "no u32 overflow"
    );
    assert_eq!(
        parse(&edited(&data, |b| put32(b, 32, 98_436 + 49_217))),
        beyond,
        "wire length"
    );
}

#[test]
fn data_packet_must_end_within_incoming() {
    // The fixture's bytes end at 98436 + 49218 = 147654.
    let data = data_first();
    assert!(parse(&edited(&data, |b| put32(b, 40, 147_654))).is_ok());
    assert_eq!(
        parse(&edited(&data, |b| put32(b, 40, 147_653))),
        Err(WireError::BadField("packet beyond incoming"))
    );
    assert_eq!(
        parse(&edited(&data, |b| put32(b, 40, 0))),
        Err(WireError::BadField("packet beyond incoming"))
    );
}

#[test]
fn data_packet_index_must_lie_inside_the_segment() {
    let beyond = Err(WireError::BadField("packet index beyond segment"));
    for (name, at, bytes) in [
        ("first", 28, data_first()),
        ("retransmit", 18, data_retransmit()),
    ] {
        // 34 * 1448 = 49232 >= 49218.
        assert_eq!(
            parse(&edited(&bytes, |b| put16(b, at, 34))),
            beyond,
            "{name}"
        );
        assert_eq!(
            parse(&edited(&bytes, |b| put16(b, at, u16::MAX))),
            beyond,
            "{name}"
        );
    }
}

#[test]
fn retransmit_flag_requires_packet_index_zero() {
    let bad = edited(&data_retransmit(), |b| put16(b, 28, 1));
    assert_eq!(
        parse(&bad),
        Err(WireError::BadField(
            "retransmission with non-zero packet index"
        ))
    );
    // And the converse: a first transmission never carries a resend index.
    let bad = edited(&data_first(), |b| put16(b, 18, 1));
    assert_eq!(
        parse(&bad),
        Err(WireError::BadField("resend index on a first transmission"))
    );
}

#[test]
fn data_header_consistency_checks() {
    let data = data_first();
    let cases: [(&str, Vec<u8>, &str); 6] = [
        (
            "mss above the segment length",
            edited(&data, |b| put32(b, 36, 1447)),
            "mss larger than the segment",
        ),
        (
            "zero mss",
            edited(&data, |b| put16(b, 14, 0)),
            "empty segment or zero mss",
        ),
        (
            "empty segment",
            edited(&data, |b| put32(b, 36, 0)),
            "empty segment or zero mss",
        ),
        (
            "message length = wire length",
            edited(&data, |b| put32(b, 8, 1_049_984)),
            "message length exceeds wire length",
        ),
        (
            "message length > wire length",
            edited(&data, |b| put32(b, 8, u32::MAX)),
            "message length exceeds wire length",
        ),
        (
            "incoming > wire length",
            edited(&data, |b| put32(b, 40, 1_049_985)),
            "incoming beyond message",
        ),
    ];
    for (name, bytes, reason) in cases {
        assert_eq!(parse(&bytes), Err(WireError::BadField(reason)), "{name}");
    }
    assert!(
        parse(&edited(&data, |b| put32(b, 40, 1_049_984))).is_ok(),
        "incoming = wire length"
    );
}

/// A segment is at most 65536 wire bytes (`record::MAX_SEGMENT_LEN`: one
/// TSO/GSO super-packet). The receiver sizes its reassembly buffer from the
/// claim before anything is authenticated, so a larger claim must not parse
/// (a forged first packet could otherwise make it allocate ~4 GiB).
#[test]
fn segment_longer_than_max_segment_len_is_rejected() {
    use smt_proto::record::MAX_SEGMENT_LEN;
    for segment_len in [MAX_SEGMENT_LEN as u32 + 1, 0xf000_0000] {
        let header = DataHeader {
            message_len: 0,
            message_wire_len: segment_len,
            segment_offset: 0,
            segment_len,
            mss: 1448,
            packet_index: 0,
            retransmit: false,
            incoming: 1448,
            priority: 0,
        };
        let bytes = emit(&from_client(Body::Data(header)), &[0; 1448]);
        assert!(
            parse(&bytes).is_err(),
            "a {segment_len}-byte segment parsed"
        );
    }
}

#[test]
fn ack_count_must_match_the_id_list() {
    let count = Err(WireError::BadField("ACK count"));
    let mismatch = Err(WireError::BadField("ACK length does not match count"));
    assert_eq!(
        parse(&edited(&ACK_ONE, |b| put16(b, 28, 0))),
        count,
        "count 0 with one ID"
    );
    let empty = edited(&ACK_ONE[..32], |b| put16(b, 28, 0));
    assert_eq!(parse(&empty), count, "count 0, no IDs");
    assert_eq!(
        parse(&edited(&ACK_ONE, |b| put16(b, 28, 65))),
        count,
        "count 65"
    );
    assert_eq!(
        parse(&edited(&ACK_ONE, |b| put16(b, 28, u16::MAX))),
        count,
        "count 0xffff"
    );
    assert_eq!(
        parse(&edited(&ACK_ONE, |b| put16(b, 28, 3))),
        mismatch,
        "count 3, one ID"
    );
    assert_eq!(
        parse(&edited(&ACK_THREE, |b| put16(b, 28, 1))),
        mismatch,
        "count 1, three IDs"
    );
    assert_eq!(
        parse(&edited(&ACK_THREE, |b| put16(b, 28, 2))),
        mismatch,
        "count 2, three IDs"
    );

    // 65 IDs with a matching count: still too many.
    let mut too_many = edited(&ACK_ONE[..32], |b| put16(b, 28, 65));
    too_many.resize(32 + 65 * 8, 0x11);
    assert_eq!(parse(&too_many), count);
}

#[test]
fn ack_holds_up_to_ack_max_ids() {
    let ids: Vec<u64> = (0..ACK_MAX_IDS as u64).map(|i| ID + 2 * i).collect();
    let list = ack_ids(&ids);
    assert!(list.is_full());
    let mut full = list;
    assert!(!full.push(1), "a full list refuses more");
    let repr = from_client(Body::Ack(list));
    let bytes = emit(&repr, &[]);
    assert_eq!(bytes.len(), 32 + 8 * ACK_MAX_IDS);
    assert_eq!(&bytes[28..30], &(ACK_MAX_IDS as u16).to_be_bytes());
    assert_eq!(parse(&bytes), Ok(repr));
}

#[test]
fn control_packets_reject_data_only_fields() {
    let reason = Err(WireError::BadField(
        "DATA-only field set on a control packet",
    ));
    let controls: [(&str, &[u8]); 8] = [
        ("GRANT", &GRANT),
        ("RESEND", &RESEND),
        ("RPC_UNKNOWN", &RPC_UNKNOWN),
        ("BUSY", &BUSY),
        ("NEED_ACK", &NEED_ACK),
        ("ACK 1", &ACK_ONE),
        ("ACK 3", &ACK_THREE),
        ("HANDSHAKE", &HANDSHAKE),
    ];
    // Segment offset, message length, mss, resend index.
    let data_only = (4..12).chain(14..16).chain(18..20);
    for (name, bytes) in controls {
        for at in data_only.clone() {
            let bad = edited(bytes, |b| b[at] = 0x01);
            assert_eq!(parse(&bad), reason, "{name} byte {at}");
        }
    }
}

#[test]
fn handshake_length_must_match_the_payload() {
    let bad = Err(WireError::BadField("handshake length"));
    assert_eq!(parse(&edited(&HANDSHAKE, |b| put16(b, 36, 8))), bad);
    assert_eq!(parse(&edited(&HANDSHAKE, |b| put16(b, 36, 10))), bad);
    let empty = edited(&HANDSHAKE[..40], |b| put16(b, 36, 0));
    assert_eq!(parse(&empty), Ok(from_client(handshake_body(0))));
}

#[test]
fn short_buffers_are_truncated_not_panics() {
    for len in 0..COMMON_HEADER_LEN {
        assert_eq!(
            Packet::new_checked(&[0u8; 64][..len]).err(),
            Some(WireError::Truncated)
        );
    }
}

// ---------------------------------------------------------------------------
// Property-style loops with a seeded generator
// ---------------------------------------------------------------------------

/// Marsaglia's xorshift64: tiny, deterministic, good enough to pick bytes.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform-ish in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform-ish in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1).max(1)
    }

    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn random_data_header(rng: &mut XorShift) -> DataHeader {
    let wire = if rng.chance(2) {
        rng.range(2, 200_000)
    } else {
        rng.range(2, u64::from(u32::MAX))
    };
    // Segments are at most 64 KiB; mostly realistic mss values, now and
    // then anything.
    let seg_len = rng.range(1, wire.min(65_536));
    let segment_offset = rng.range(0, wire - seg_len);
    let mss_cap = if rng.chance(8) { 65_535 } else { 2048 };
    let mss = rng.range(1, seg_len.min(mss_cap));
    let last_index = ((seg_len - 1) / mss).min(u64::from(u16::MAX));
    let mut header = DataHeader {
        message_len: rng.below(wire) as u32,
        message_wire_len: wire as u32,
        segment_offset: segment_offset as u32,
        segment_len: seg_len as u32,
        mss: mss as u16,
        packet_index: rng.range(0, last_index) as u16,
        retransmit: rng.chance(2),
        incoming: 0,
        priority: 0,
    };
    // The sender may only send granted bytes: incoming covers the packet.
    let end = header.wire_offset() + header.payload_len() as u64;
    header.incoming = rng.range(end, wire) as u32;
    header
}

/// A random valid repr and the payload it must travel with.
fn random_repr(rng: &mut XorShift) -> (Repr, Vec<u8>) {
    let (body, payload) = match rng.below(8) {
        0 => {
            let d = random_data_header(rng);
            (Body::Data(d), rng.bytes(d.payload_len()))
        }
        1 => (
            Body::Grant {
                offset: rng.next() as u32,
                priority: rng.next() as u8,
            },
            vec![],
        ),
        2 => {
            let body = Body::Resend {
                offset: rng.next() as u32,
                length: rng.next() as u32,
                priority: rng.next() as u8,
            };
            (body, vec![])
        }
        3 => (Body::RpcUnknown, vec![]),
        4 => (Body::Busy, vec![]),
        5 => (Body::NeedAck, vec![]),
        6 => {
            let n = rng.range(1, ACK_MAX_IDS as u64) as usize;
            let ids: Vec<u64> = (0..n).map(|_| rng.next()).collect();
            (Body::Ack(ack_ids(&ids)), vec![])
        }
        _ => {
            let len = rng.range(0, 1500) as u16;
            let offset = (rng.next() % u64::from(u32::MAX - u32::from(len))) as u32;
            let body = Body::Handshake {
                offset,
                ack: rng.next() as u32,
                len,
                kind: smt_proto::HandshakeKind(rng.next() as u8),
                flags: 0,
            };
            (body, rng.bytes(usize::from(len)))
        }
    };
    let key_phase = !matches!(body, Body::Handshake { .. }) && rng.next() & 1 == 1;
    let repr = Repr {
        src_port: rng.next() as u16,
        dst_port: rng.next() as u16,
        key_phase,
        id: rng.next(),
        body,
    };
    (repr, payload)
}

/// Whatever parses must re-emit to exactly its own bytes: the encoding is
/// canonical, so a packet has one meaning and one spelling.
#[track_caller]
fn check_canonical(bytes: &[u8]) {
    let Ok(repr) = parse(bytes) else { return };
    let header_len = repr.buffer_len();
    assert!(header_len <= bytes.len());
    assert_bytes_eq(&emit(&repr, &bytes[header_len..]), bytes);
}

#[test]
fn random_valid_reprs_round_trip() {
    let mut rng = XorShift::new(0x5eed_0001);
    for i in 0..20_000 {
        let (repr, payload) = random_repr(&mut rng);
        let bytes = emit(&repr, &payload);
        let packet =
            Packet::new_checked(&bytes[..]).unwrap_or_else(|e| panic!("#{i} {repr:?}: {e}"));
        assert_eq!(Repr::parse(&packet), Ok(repr), "#{i}");
        assert_eq!(packet.payload().len(), bytes.len() - packet.header_len());
        if matches!(repr.body, Body::Data(_) | Body::Handshake { .. }) {
            assert_eq!(packet.payload(), &payload[..], "#{i}");
        }
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = XorShift::new(0x5eed_0002);
    // (type, header length) of every known packet type.
    let known = [
        (0x10, 44),
        (0x11, 36),
        (0x12, 40),
        (0x13, 28),
        (0x14, 28),
        (0x17, 28),
        (0x18, 32),
        (0x20, 32),
    ];
    let mut parsed = 0;
    for _ in 0..100_000 {
        let len = rng.range(0, 96) as usize;
        let mut bytes = rng.bytes(len);
        // Half the time, make the header plausible so parsing goes deeper:
        // a known type, its header length, zero DATA-only fields, and often
        // a buffer that ends with the header.
        if rng.chance(2) {
            let (ty, header_len) = known[rng.below(known.len() as u64) as usize];
            if rng.chance(2) {
                bytes.resize(header_len, 0);
            }
            bytes.resize(bytes.len().max(COMMON_HEADER_LEN), 0);
            bytes[12] = (header_len as u8 / 4) << 4;
            bytes[13] = ty;
            if ty != 0x10 {
                bytes[4..12].fill(0);
                bytes[14..20].fill(0);
            }
            bytes[16..18].fill(0);
        }
        if parse(&bytes).is_ok() {
            parsed += 1;
        }
        check_canonical(&bytes);
    }
    assert!(
        parsed > 1000,
        "the generator should reach valid packets ({parsed})"
    );
}

#[test]
fn mutated_packets_never_panic() {
    let mut rng = XorShift::new(0x5eed_0003);
    let seeds: Vec<Vec<u8>> = fixtures().into_iter().map(|f| f.1).collect();
    let interesting = [0x00, 0x01, 0x7f, 0x80, 0xff, 0x10, 0xb0, 0x70];
    for _ in 0..100_000 {
        let mut bytes = seeds[rng.below(seeds.len() as u64) as usize].clone();
        for _ in 0..rng.range(1, 4) {
            match rng.below(5) {
                0 if !bytes.is_empty() => {
                    let at = rng.below(bytes.len() as u64) as usize;
                    bytes[at] ^= 1 << rng.below(8);
                }
                1 if !bytes.is_empty() => {
                    let at = rng.below(bytes.len() as u64) as usize;
                    bytes[at] = interesting[rng.below(interesting.len() as u64) as usize];
                }
                2 => bytes.truncate(rng.below(bytes.len() as u64 + 1) as usize),
                3 => {
                    let n = rng.range(1, 16) as usize;
                    bytes.extend(rng.bytes(n));
                }
                _ if bytes.len() >= 28 => {
                    // Rewrite a whole header byte among the first 44.
                    let at = rng.below(bytes.len().min(44) as u64) as usize;
                    bytes[at] = rng.next() as u8;
                }
                _ => {}
            }
        }
        check_canonical(&bytes);
    }
}

// ---------------------------------------------------------------------------
// Fuzz seed corpus
// ---------------------------------------------------------------------------

/// The seed files of `fuzz/corpus/wire_roundtrip`: every fixture plus the
/// worked example.
fn seed_corpus() -> Vec<(String, Vec<u8>)> {
    let mut seeds: Vec<(String, Vec<u8>)> = fixtures()
        .into_iter()
        .map(|(name, bytes, _, _)| {
            (
                format!("seed-{}", name.to_lowercase().replace(' ', "-")),
                bytes,
            )
        })
        .collect();
    let layout = MessageLayout::new(3, 3, 16384);
    let sealed = seal_message(&NullCipher, SeqLayout::DEFAULT, ID, b"abc", layout).expect("fits");
    let header = DataHeader {
        message_len: 3,
        message_wire_len: 25,
        segment_offset: 0,
        segment_len: 25,
        mss: 25,
        packet_index: 0,
        retransmit: false,
        incoming: 25,
        priority: 0,
    };
    seeds.push((
        "seed-data-abc".into(),
        emit(&from_client(Body::Data(header)), &sealed.wire),
    ));
    seeds
}

fn corpus_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/wire_roundtrip")
}

/// Regenerates the seed files (see `seed_corpus_is_current`).
fn write_seed_corpus() {
    let dir = corpus_dir();
    std::fs::create_dir_all(&dir).expect("create corpus dir");
    for (name, bytes) in seed_corpus() {
        std::fs::write(dir.join(name), bytes).expect("write seed");
    }
}

/// Set SMT_UPDATE_SNAPSHOTS=1 to regenerate the committed seeds.
#[test]
fn seed_corpus_is_current() {
    if std::env::var_os("SMT_UPDATE_SNAPSHOTS").is_some() {
        write_seed_corpus();
    }
    let dir = corpus_dir();
    if !dir.exists() {
        return; // A checkout without the fuzz crate.
    }
    for (name, bytes) in seed_corpus() {
        let on_disk = std::fs::read(dir.join(&name))
            .unwrap_or_else(|e| panic!("{name}: {e}; rerun with SMT_UPDATE_SNAPSHOTS=1"));
        assert_eq!(
            on_disk, bytes,
            "{name} is stale; rerun with SMT_UPDATE_SNAPSHOTS=1"
        );
        assert!(parse(&on_disk).is_ok(), "{name} must be a valid packet");
    }
}
