//! Header parse -> emit round trip.
//!
//! Arbitrary bytes go through `Packet::new_checked` and `Repr::parse`. Input
//! that parses must emit (into a poisoned buffer, DATA/HANDSHAKE payload
//! copied after the header) to bytes that parse to the same `Repr`, and, as
//! the encoding is canonical, to exactly the input. PATH and PATH_ECHO
//! (`Repr` refuses them as `OwnRepr`) go through `PathRepr` and
//! `PathEchoRepr` the same way.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smt_proto::wire::{Packet, PathEchoRepr, PathRepr, Repr, WireError};

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = Packet::new_checked(data) else {
        return;
    };
    let repr = match Repr::parse(&packet) {
        Ok(repr) => repr,
        Err(WireError::OwnRepr(_)) => return own_repr_roundtrip(&packet, data),
        Err(_) => return,
    };

    // `emit` writes the header (and an ACK's ID list); the rest of the
    // datagram is the payload the caller appends.
    let header_len = repr.buffer_len();
    assert!(
        header_len <= data.len(),
        "{repr:?}: buffer_len beyond the input"
    );
    let payload = &data[header_len..];
    let mut buf = vec![0xa5; header_len + payload.len()];
    repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
    buf[header_len..].copy_from_slice(payload);

    let again = Packet::new_checked(&buf[..]).expect("an emitted packet passes new_checked");
    assert_eq!(Repr::parse(&again), Ok(repr), "re-parse differs");
    assert_eq!(again.payload(), packet.payload(), "payload differs");
    assert_eq!(&buf[..], data, "parse accepted a non-canonical encoding");
});

/// PATH and PATH_ECHO: whatever parses emits (into a poisoned buffer) to
/// exactly the input.
fn own_repr_roundtrip(packet: &Packet<&[u8]>, data: &[u8]) {
    let emitted = if let Ok(p) = PathRepr::parse(packet) {
        let mut buf = vec![0xa5; p.buffer_len()];
        p.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(PathRepr::parse(&Packet::new_checked(&buf[..]).unwrap()), Ok(p));
        buf
    } else if let Ok(e) = PathEchoRepr::parse(packet) {
        let mut buf = vec![0xa5; e.buffer_len()];
        e.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(PathEchoRepr::parse(&Packet::new_checked(&buf[..]).unwrap()), Ok(e));
        buf
    } else {
        return;
    };
    assert_eq!(&emitted[..], data, "parse accepted a non-canonical encoding");
}
