//! Pathlet feedback through two endpoints (`Config::pathlet_feedback`,
//! docs/protocol.md § 4): a device on the path fills PATH slots (and marks
//! CE when told), the receiver believes a PATH only beside a packet that
//! authenticates, echoes under the control MAC, and the sender's window
//! for the marked pathlet holds its data back; an unauthenticated echo
//! changes nothing; with the switch off both packet types are dropped as
//! unsupported.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use smt_proto::sim::{Datagram, Link, Outcome, Pair, Verdict};
use smt_proto::wire::{
    first_packet_len, write_path_slot, Bounded, EchoEntry, Packet, PacketType, PathEchoRepr,
    PathRepr, PathSlot, PathletClass,
};
use smt_proto::{Config, DropReason};
use smt_relay::KeyKind;

const AES: KeyKind = KeyKind::Aes128(7);
const STEP: Duration = Duration::from_micros(20);

fn pathlet_config() -> Config {
    Config {
        pathlet_feedback: true,
        ..Config::default()
    }
}

fn pair() -> Pair {
    let link = Link {
        latency: Duration::from_micros(10),
        ..Link::default()
    };
    Pair::new(pathlet_config(), pathlet_config(), AES, link, 1)
}

/// A device on the path: fills the next slot of every datagram that
/// starts with a PATH (pathlet 7, class 0, CE while `mark` is set) and
/// queues the changed copy for the test to inject.
fn device(pair: &mut Pair, mark: Rc<Cell<bool>>) -> Rc<RefCell<Vec<Datagram>>> {
    let out = Rc::new(RefCell::new(Vec::new()));
    let queue = out.clone();
    pair.intercept = Some(Box::new(move |d: &Datagram| {
        let first = Packet::new_checked(&d.bytes[..]).map(|p| p.packet_type());
        if first != Ok(PacketType::PATH) {
            return Verdict::Deliver;
        }
        let mut bytes = d.bytes.clone();
        let slot = PathSlot {
            at: PathletClass {
                pathlet: 7,
                class: 0,
            },
            ce: mark.get(),
            queue_bytes: 0,
        };
        write_path_slot(&mut bytes, &slot).expect("the sender's PATH takes a slot");
        queue.borrow_mut().push(Datagram { bytes, ..d.clone() });
        Verdict::Drop
    }));
    out
}

/// Runs until every call finished (or 10 s of virtual time), moving the
/// device's datagrams on.
fn run(pair: &mut Pair, queue: &Rc<RefCell<Vec<Datagram>>>, calls: usize) {
    for _ in 0..500_000 {
        pair.run_for(STEP);
        let moved: Vec<Datagram> = queue.borrow_mut().drain(..).collect();
        for d in moved {
            pair.inject(d);
        }
        if pair.outcomes.len() == calls {
            return;
        }
    }
    panic!("calls did not finish: {pair:?}");
}

#[test]
fn feedback_flows_and_a_marked_pathlet_holds_data_back() {
    let mut pair = pair();
    let mark = Rc::new(Cell::new(false));
    let queue = device(&mut pair, mark.clone());
    let request: Vec<u8> = (0..400_000u32).map(|i| i as u8).collect();
    let h = pair.call(&request);
    run(&mut pair, &queue, 1);
    assert_eq!(pair.outcomes[&h], Outcome::Response(request.clone()));
    let (c, s) = (pair.client.stats(), pair.server.stats());
    assert!(
        s.paths_counted > 0,
        "the server believed the client's PATHs"
    );
    assert!(
        s.path_echoes_tx > 0 && c.path_echoes_rx > 0,
        "echoes: {c:?} {s:?}"
    );
    assert!(
        c.paths_counted > 0 && c.path_echoes_tx > 0,
        "and the other way"
    );
    assert_eq!(s.paths_not_believed, 0);
    let unmarked_held = c.pathlet_held;

    // Every packet marked from now on: the window of pathlet 7 shrinks
    // and the next request waits for it; it still completes.
    mark.set(true);
    let h = pair.call(&request);
    run(&mut pair, &queue, 2);
    assert_eq!(pair.outcomes[&h], Outcome::Response(request));
    let held = pair.client.stats().pathlet_held;
    assert!(
        held > unmarked_held,
        "marks held data back: {held} against {unmarked_held} unmarked"
    );
}

/// A PATH slot, ready to put before packets.
fn path_with_slot(pair: &Pair) -> Vec<u8> {
    let path = PathRepr::new(pair.client_addr.port(), pair.server_addr.port(), 2);
    let mut bytes = vec![0; path.buffer_len()];
    path.emit(&mut Packet::new_unchecked(&mut bytes[..]));
    let slot = PathSlot {
        at: PathletClass {
            pathlet: 9,
            class: 0,
        },
        ce: true,
        queue_bytes: 0,
    };
    write_path_slot(&mut bytes, &slot).unwrap();
    bytes
}

#[test]
fn a_path_beside_nothing_that_authenticates_is_not_believed() {
    let mut pair = pair();
    let mut forged = path_with_slot(&pair);
    // A DATA packet from the client's address under no key of its
    // session: captured from a pair with other keys.
    let mut other = Pair::new(
        pathlet_config(),
        pathlet_config(),
        KeyKind::Aes128(99),
        Link::default(),
        2,
    );
    other.capture = Some(Vec::new());
    other.call(b"not yours");
    other.run_for(Duration::from_micros(100));
    let captured = other.capture.take().unwrap();
    let theirs = captured
        .iter()
        .find(|d| d.to == other.server_addr)
        .expect("the other client sent its request");
    let path_len = first_packet_len(&theirs.bytes, true).unwrap();
    forged.extend_from_slice(&theirs.bytes[path_len..]);
    pair.deliver_now(&Datagram {
        from: pair.client_addr,
        to: pair.server_addr,
        bytes: forged,
    });
    let s = pair.server.stats();
    assert_eq!((s.paths_counted, s.paths_not_believed), (0, 1));
    assert!(s.drops.get(DropReason::AuthFailure) >= 1);
}

#[test]
fn an_echo_without_a_valid_mac_is_dropped() {
    let mut pair = pair();
    let mut entries = Bounded::new();
    entries.push(EchoEntry {
        at: PathletClass {
            pathlet: 7,
            class: 0,
        },
        bytes: 100_000,
        ce_bytes: 100_000,
        queue_bytes: 0,
        last_id: None,
    });
    let echo = PathEchoRepr {
        src_port: pair.server_addr.port(),
        dst_port: pair.client_addr.port(),
        key_phase: false,
        sequence: 1,
        overflow: false,
        entries,
    };
    let mut bytes = vec![0; echo.buffer_len() + 16];
    echo.emit(&mut Packet::new_unchecked(&mut bytes[..echo.buffer_len()]));
    pair.deliver_now(&Datagram {
        from: pair.server_addr,
        to: pair.client_addr,
        bytes,
    });
    let c = pair.client.stats();
    assert_eq!(c.path_echoes_rx, 0);
    assert_eq!(c.drops.get(DropReason::BadControlTag), 1);
}

#[test]
fn with_the_switch_off_path_and_echo_are_dropped_as_unsupported() {
    let mut pair = Pair::with_keys(AES, Link::default(), 3);
    let path = path_with_slot(&pair);
    pair.deliver_now(&Datagram {
        from: pair.client_addr,
        to: pair.server_addr,
        bytes: path,
    });
    let s = pair.server.stats();
    assert_eq!(s.drops.get(DropReason::Unsupported), 1);
    assert_eq!(s.paths_counted, 0);
}

#[test]
fn the_switch_needs_control_authentication_and_no_tx_offload() {
    let without_mac = Config {
        authenticate_control: false,
        ..pathlet_config()
    };
    let err = without_mac.validate().unwrap_err().to_string();
    assert!(
        err.contains("pathlet_feedback needs authenticate_control"),
        "{err}"
    );
    let offload = Config {
        tx_offload: true,
        ..pathlet_config()
    };
    assert!(offload.validate().is_err());
    assert!(pathlet_config().validate().is_ok());
    assert_eq!(
        pathlet_config().mss(),
        Config::default().mss() - smt_proto::pathlet::PATH_RESERVE
    );
}
