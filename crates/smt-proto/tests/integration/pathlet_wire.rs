//! The worked example of `docs/protocol.md` § 4 (PATH and PATH_ECHO),
//! byte for byte: a client's datagram that starts with a PATH, the slot a
//! forwarder writes into it, and the receiver's echo. Also: today's
//! endpoint (no pathlet hook yet) drops the PATH as *unsupported* and
//! still handles the packet after it.

// The tests drive a virtual clock; `Instant::now` only picks its origin.
#![allow(clippy::disallowed_methods)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use smt_proto::crypto::{NullCipher, TAG_LEN};
use smt_proto::wire::{
    first_packet_len, write_path_slot, Bounded, EchoEntry, Packet, PathEchoRepr, PathRepr,
    PathSlot, PathletClass, SlotWrite,
};
use smt_proto::{Config, DropReason, Endpoint, Event, Role, SessionKeys};

const CLIENT_PORT: u16 = 0x9c40;
const SERVER_PORT: u16 = 0x0fa0;

/// Hex with spaces and newlines, as in the document.
fn hex(s: &str) -> Vec<u8> {
    let digits: String = s.split_whitespace().collect();
    hex::decode(digits).expect("the document's hex")
}

const PATH_SENT: &str = "
    9c40 0fa0 00000000 00000000 80 1d 0000 0000 0000
    0000000000000000 02 00 01 00
    0101 00 00
    0000 00 00 00000000  0000 00 00 00000000";

/// § 2.1's first packet: `abc`, message 2, NullCipher.
const DATA_ABC: &str = "
    9c40 0fa0 00000000 00000003 b0 10 0019 0000 0000
    0000000000000002 0000 00 00 00000019 00000019 00000019
    17 0303 0014 616263 17 00000000000000000000000000000000";

const PATH_FILLED: &str = "
    9c40 0fa0 00000000 00000000 80 1d 0000 0000 0000
    0000000000000000 02 01 01 00
    0101 00 00
    0100 00 01 00007530  0000 00 00 00000000";

const ECHO: &str = "
    0fa0 9c40 00000000 00000000 90 1e 0000 0000 0000 0000000000000000
    0001 00 00 00000001
    0100 00 01 00000079 00000079 00007530 0000000000000002
    00000000000000000000000000000000";

fn sent_path() -> PathRepr {
    let mut path = PathRepr::new(CLIENT_PORT, SERVER_PORT, 2);
    path.exclude.push(PathletClass {
        pathlet: 0x0101,
        class: 0,
    });
    path
}

fn forwarder_slot() -> PathSlot {
    PathSlot {
        at: PathletClass {
            pathlet: 0x0100,
            class: 0,
        },
        ce: true,
        queue_bytes: 30_000,
    }
}

#[test]
fn worked_example_path_feedback_from_protocol_md() {
    // The sender's PATH: 52 bytes, then the DATA packet; 121 in all.
    let path = sent_path();
    let mut emitted = vec![0xa5; path.buffer_len()];
    path.emit(&mut Packet::new_unchecked(&mut emitted[..]));
    assert_eq!(emitted, hex(PATH_SENT));
    let mut datagram = hex(PATH_SENT);
    datagram.extend(hex(DATA_ABC));
    assert_eq!(datagram.len(), 121);
    assert_eq!(first_packet_len(&datagram, true), Ok(52));
    assert_eq!(first_packet_len(&datagram[52..], true), Ok(69));

    // The forwarder writes slot 0 in place: bytes 29 and 36-43 change.
    let before = datagram.clone();
    assert_eq!(
        write_path_slot(&mut datagram, &forwarder_slot()),
        Ok(SlotWrite::Written(0))
    );
    let changed: Vec<usize> = (0..121).filter(|&i| datagram[i] != before[i]).collect();
    assert_eq!(changed, [29, 36, 39, 42, 43]);
    assert_eq!(&datagram[..52], &hex(PATH_FILLED)[..]);
    assert_eq!(&datagram[52..], &hex(DATA_ABC)[..]);
    let got = PathRepr::parse(&Packet::new_checked(&datagram[..52]).unwrap()).unwrap();
    assert_eq!(got.slots.as_slice(), &[forwarder_slot()]);
    assert_eq!(got.exclude.as_slice(), path.exclude.as_slice());

    // The server's echo: sequence 1, one entry, then the (zero) MAC.
    let mut entries = Bounded::new();
    entries.push(EchoEntry {
        at: forwarder_slot().at,
        bytes: 121,
        ce_bytes: 121,
        queue_bytes: 30_000,
        last_id: Some(2),
    });
    let echo = PathEchoRepr {
        src_port: SERVER_PORT,
        dst_port: CLIENT_PORT,
        key_phase: false,
        sequence: 1,
        overflow: false,
        entries,
    };
    let mut wire = vec![0xa5; echo.buffer_len() + TAG_LEN];
    echo.emit(&mut Packet::new_unchecked(&mut wire[..]));
    wire[echo.buffer_len()..].fill(0); // NullCipher MAC
    assert_eq!(wire, hex(ECHO));
    assert_eq!(wire.len(), 76);
    assert_eq!(first_packet_len(&wire, true), Ok(76));
    let parsed = PathEchoRepr::parse(&Packet::new_checked(&wire[..60]).unwrap());
    assert_eq!(parsed, Ok(echo));
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Until the endpoint's hook exists, a PATH is dropped as *unsupported*
/// (counted) and the packets after it are handled as if it were not there.
#[test]
fn an_endpoint_without_the_hook_drops_path_and_keeps_the_datagram() {
    let config = Config {
        local_port: SERVER_PORT,
        ..Config::default()
    };
    let mut server = Endpoint::new(config).expect("valid config");
    let keys = SessionKeys::new(Role::Server, Arc::new(NullCipher), Arc::new(NullCipher));
    server
        .install_session(addr(CLIENT_PORT), keys)
        .expect("null keys are not reflectable");
    let mut datagram = hex(PATH_FILLED);
    datagram.extend(hex(DATA_ABC));
    server.handle_datagram(Instant::now(), addr(CLIENT_PORT), &datagram);
    let drops = server.stats().drops;
    assert_eq!(drops.get(DropReason::Unsupported), 1, "{drops:?}");
    assert_eq!(drops.total(), 1, "{drops:?}");
    let mut requests = Vec::new();
    while let Some(ev) = server.poll_event() {
        if let Event::Request { data, .. } = ev {
            requests.push(data);
        }
    }
    assert_eq!(requests, [b"abc".to_vec()]);
}
