//! PATH and PATH_ECHO: round trips over seeded random values, every
//! single-byte change and every truncation of valid packets (no panic, and
//! whatever still parses is canonical), and the device's in-place write.
//! The byte-exact example of `docs/protocol.md` is
//! `tests/integration/pathlet_wire.rs`.

use super::*;
use crate::crypto::TAG_LEN;
use crate::wire::{first_packet_len, Repr};

/// The simulator's seeded generator (deterministic, no dependency).
type Rng = crate::sim::SplitMix64;

fn random_at(rng: &mut Rng) -> PathletClass {
    PathletClass {
        pathlet: rng.next_u64() as u16,
        class: rng.next_u64() as u8,
    }
}

fn random_path(rng: &mut Rng) -> PathRepr {
    let mut p = PathRepr::new(
        rng.next_u64() as u16,
        rng.next_u64() as u16,
        1 + rng.below(8) as u8,
    );
    p.overflow = rng.below(2) == 1;
    for _ in 0..rng.below(MAX_PATH_EXCLUDES as u64 + 1) {
        p.exclude.push(random_at(rng));
    }
    for _ in 0..rng.below(u64::from(p.capacity) + 1) {
        p.slots.push(PathSlot {
            at: random_at(rng),
            ce: rng.below(2) == 1,
            queue_bytes: rng.next_u64() as u32,
        });
    }
    p
}

fn random_echo(rng: &mut Rng) -> PathEchoRepr {
    let mut entries = Bounded::new();
    for _ in 0..1 + rng.below(MAX_ECHO_ENTRIES as u64) {
        entries.push(EchoEntry {
            at: random_at(rng),
            bytes: rng.next_u64() as u32,
            ce_bytes: rng.next_u64() as u32,
            queue_bytes: rng.next_u64() as u32,
            last_id: (rng.below(2) == 1).then(|| rng.next_u64()),
        });
    }
    PathEchoRepr {
        src_port: rng.next_u64() as u16,
        dst_port: rng.next_u64() as u16,
        key_phase: rng.below(2) == 1,
        sequence: rng.next_u64() as u32,
        overflow: rng.below(2) == 1,
        entries,
    }
}

fn emit_path(p: &PathRepr) -> Vec<u8> {
    let mut buf = vec![0xa5; p.buffer_len()];
    p.emit(&mut Packet::new_unchecked(&mut buf[..]));
    buf
}

fn emit_echo(e: &PathEchoRepr) -> Vec<u8> {
    let mut buf = vec![0xa5; e.buffer_len()];
    e.emit(&mut Packet::new_unchecked(&mut buf[..]));
    buf
}

fn parse_path(b: &[u8]) -> Result<PathRepr, WireError> {
    PathRepr::parse(&Packet::new_checked(b)?)
}

fn parse_echo(b: &[u8]) -> Result<PathEchoRepr, WireError> {
    PathEchoRepr::parse(&Packet::new_checked(b)?)
}

#[test]
fn random_paths_and_echoes_round_trip_and_split_by_their_own_length() {
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    for _ in 0..2000 {
        let p = random_path(&mut rng);
        let bytes = emit_path(&p);
        assert_eq!(parse_path(&bytes), Ok(p));
        // Never MAC'd, whatever the control-tag switch says.
        for tagged in [false, true] {
            let mut datagram = bytes.clone();
            datagram.extend([0u8; 40]);
            assert_eq!(first_packet_len(&datagram, tagged), Ok(bytes.len()));
        }
        let e = random_echo(&mut rng);
        let bytes = emit_echo(&e);
        assert_eq!(parse_echo(&bytes), Ok(e));
        let mut tagged = bytes.clone();
        tagged.extend([0u8; TAG_LEN]);
        assert_eq!(first_packet_len(&tagged, true), Ok(bytes.len() + TAG_LEN));
        assert_eq!(first_packet_len(&tagged, false), Ok(bytes.len()));
    }
}

/// Changing any one byte of a valid packet either makes it refused or
/// gives a packet that re-emits to exactly those bytes (the encoding is
/// canonical: nothing a receiver accepts can carry hidden bits); no
/// truncation parses, and nothing panics.
#[test]
fn every_byte_change_and_truncation_is_refused_or_canonical() {
    let mut rng = Rng::new(7);
    for _ in 0..60 {
        let path = emit_path(&random_path(&mut rng));
        let echo = emit_echo(&random_echo(&mut rng));
        for (bytes, is_path) in [(path, true), (echo, false)] {
            for i in 0..bytes.len() {
                for flip in [0x01u8, 0x10, 0x80, 0xff] {
                    let mut b = bytes.clone();
                    b[i] ^= flip;
                    let again = if is_path {
                        parse_path(&b).map(|p| emit_path(&p))
                    } else {
                        parse_echo(&b).map(|e| emit_echo(&e))
                    };
                    if let Ok(again) = again {
                        assert_eq!(again, b, "byte {i} ^ {flip:#x}");
                    }
                    let _ = first_packet_len(&b, true);
                }
            }
            for len in 0..bytes.len() {
                let cut = &bytes[..len];
                assert!(parse_path(cut).is_err() && parse_echo(cut).is_err());
                assert!(first_packet_len(cut, true).is_err(), "cut to {len}");
            }
        }
    }
}

#[test]
fn repr_refuses_them_and_names_their_own_representation() {
    let path = emit_path(&PathRepr::new(1, 2, 2));
    let got = Repr::parse(&Packet::new_checked(&path[..]).unwrap());
    assert_eq!(got, Err(WireError::OwnRepr(PacketType::PATH)));
    let echo = emit_echo(&random_echo(&mut Rng::new(3)));
    let got = Repr::parse(&Packet::new_checked(&echo[..]).unwrap());
    assert_eq!(got, Err(WireError::OwnRepr(PacketType::PATH_ECHO)));
}

#[test]
fn devices_fill_slots_in_order_then_flag_overflow_without_growing() {
    let mut sent = PathRepr::new(0x9c40, 0x0fa0, 2);
    sent.exclude.push(PathletClass {
        pathlet: 7,
        class: 1,
    });
    let mut datagram = emit_path(&sent);
    let path_len = datagram.len();
    datagram.extend([0x55; 69]); // the packets after it are not touched
    let slot = |pathlet, ce| PathSlot {
        at: PathletClass { pathlet, class: 1 },
        ce,
        queue_bytes: u32::from(pathlet) * 1000,
    };
    assert_eq!(
        write_path_slot(&mut datagram, &slot(0x100, true)),
        Ok(SlotWrite::Written(0))
    );
    assert_eq!(
        write_path_slot(&mut datagram, &slot(0x201, false)),
        Ok(SlotWrite::Written(1))
    );
    assert_eq!(
        write_path_slot(&mut datagram, &slot(0x302, true)),
        Ok(SlotWrite::Overflow)
    );
    assert_eq!(datagram.len(), path_len + 69);
    assert!(datagram[path_len..].iter().all(|&b| b == 0x55));
    let got = parse_path(&datagram[..path_len]).unwrap();
    assert!(got.overflow);
    assert_eq!(
        got.slots.as_slice(),
        &[slot(0x100, true), slot(0x201, false)]
    );
    assert_eq!(path_excludes(&datagram).as_slice(), sent.exclude.as_slice());
    // Anything else is left alone and said so.
    let mut other = vec![0u8; 40];
    assert!(write_path_slot(&mut other, &slot(1, false)).is_err());
    assert!(path_excludes(&other).is_empty());
}

#[test]
fn counts_out_of_range_are_refused() {
    let mut b = emit_path(&PathRepr::new(1, 2, 1));
    b[field::path::SLOTS] = 0;
    assert_eq!(
        first_packet_len(&b, true),
        Err(WireError::BadField("PATH slot count"))
    );
    b[field::path::SLOTS] = 9;
    assert_eq!(
        first_packet_len(&b, true),
        Err(WireError::BadField("PATH slot count"))
    );
    let mut b = emit_path(&PathRepr::new(1, 2, 1));
    b[field::path::USED] = 2;
    assert_eq!(
        parse_path(&b),
        Err(WireError::BadField("PATH used beyond slots"))
    );
    let mut e = emit_echo(&random_echo(&mut Rng::new(5)));
    e[field::path_echo::COUNT].copy_from_slice(&17u16.to_be_bytes());
    assert_eq!(
        first_packet_len(&e, true),
        Err(WireError::BadField("PATH_ECHO count"))
    );
}
