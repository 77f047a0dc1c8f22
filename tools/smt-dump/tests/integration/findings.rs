//! What `smt dump` reports about damaged, forged and replayed traffic, and
//! that no capture, however broken, makes it panic.

use crate::support;

use smt_dump::{dump, CaptureError, KeyLog, Options, Report};
use support::{Built, Frame};

fn tls() -> Built {
    support::build(&support::tls_exchange())
}

fn dump_frames(built: &Built, frames: &[Frame]) -> Report {
    let capture = support::write_capture(built.framing, frames);
    let log = KeyLog::parse(&built.keylog);
    dump(&capture, Some(&log), &Options::default()).unwrap()
}

/// The index of the first frame holding a DATA packet for `id` from the
/// client whose packet index is `index`.
fn data_frame(built: &Built, id: &str, index: &str) -> usize {
    built
        .truth
        .frames
        .iter()
        .position(|f| {
            f.src.ends_with(":40000")
                && f.packets.iter().any(|p| {
                    p.kind == "DATA"
                        && p.id.as_deref() == Some(id)
                        && p.fields.contains(&("pkt_index".into(), index.into()))
                })
        })
        .expect("such a frame")
}

#[test]
fn a_corrupted_record_fails_to_authenticate() {
    let built = tls();
    let mut frames = built.frames.clone();
    let at = data_frame(&built, "0x4", "2");
    let last = frames[at].bytes.len() - 20;
    frames[at].bytes[last] ^= 0x01;
    let report = dump_frames(&built, &frames);
    let msg = report
        .messages
        .iter()
        .find(|m| m.id == "0x4" && m.kind == "request")
        .unwrap();
    assert_eq!(msg.status, "failed", "{msg:#?}");
    assert_eq!(msg.records[0].status, "auth_failed");
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.what.contains("auth_failed")),
        "{:#?}",
        report.problems
    );
}

#[test]
fn a_record_under_another_messages_id_is_out_of_place() {
    let built = tls();
    let mut frames = built.frames.clone();
    // The datagram with the two coalesced small requests: swap their IDs,
    // so each packet carries the other message's record.
    let at = built
        .truth
        .frames
        .iter()
        .position(|f| {
            f.src.ends_with(":40000")
                && f.packets.len() == 2
                && f.packets.iter().all(|p| p.kind == "DATA")
        })
        .unwrap();
    let second = built.truth.frames[at].packets[1].offset;
    let bytes = &mut frames[at].bytes;
    let (a, b) = (
        bytes[20..28].to_vec(),
        bytes[second + 20..second + 28].to_vec(),
    );
    bytes[20..28].copy_from_slice(&b);
    bytes[second + 20..second + 28].copy_from_slice(&a);
    let report = dump_frames(&built, &frames);
    let what: Vec<&str> = report.problems.iter().map(|p| p.what.as_str()).collect();
    assert!(
        what.iter()
            .any(|w| w.contains("out_of_place") && w.contains("opens as record 0 of message 0x8")),
        "{what:#?}"
    );
}

#[test]
fn a_copy_of_a_delivered_request_is_reported_as_replayed() {
    let built = tls();
    let mut frames = built.frames.clone();
    let first = data_frame(&built, "0x2", "0");
    let mut copy = frames[first].clone();
    copy.time = frames.last().unwrap().time + std::time::Duration::from_millis(5);
    frames.push(copy);
    let report = dump_frames(&built, &frames);
    let replays: Vec<_> = report
        .problems
        .iter()
        .filter(|p| p.what.contains("replayed"))
        .collect();
    assert_eq!(replays.len(), 1, "{:#?}", report.problems);
    assert_eq!(replays[0].frame, frames.len() as u64);
}

#[test]
fn a_truncated_capture_keeps_the_frames_before_the_cut() {
    let built = tls();
    let cut = built.capture.len() - 30;
    let report = dump(&built.capture[..cut], None, &Options::default()).unwrap();
    let frames = built.truth.frames.len() as u64;
    assert_eq!(report.capture.frames, frames - 1);
    let error = report.capture.error.expect("says it was cut");
    assert!(
        error.contains(&format!("ends inside frame {frames}")),
        "{error}"
    );
}

#[test]
fn a_file_that_is_no_capture_is_a_clear_error() {
    let e = dump(b"SSLKEYLOGFILE is not a capture", None, &Options::default()).unwrap_err();
    assert_eq!(e, CaptureError::NotACapture);
    assert!(e.to_string().contains("not a pcap or pcapng file"));
}

/// A small deterministic generator for the mutations below.
fn next(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *state >> 33
}

#[test]
fn no_truncation_or_bit_flip_of_a_capture_panics() {
    let builds = [
        tls(),
        support::build(&support::psk_exchange()),
        support::zoo(),
    ];
    let mut state = 7u64;
    for built in &builds {
        let log = KeyLog::parse(&built.keylog);
        let file = &built.capture;
        for cut in (0..file.len()).step_by(97) {
            let _ = dump(&file[..cut], Some(&log), &Options::default());
        }
        for _ in 0..300 {
            let mut bytes = file.clone();
            for _ in 0..1 + next(&mut state) % 4 {
                let at = next(&mut state) as usize % bytes.len();
                bytes[at] ^= 1 << (next(&mut state) % 8);
            }
            let _ = dump(&bytes, Some(&log), &Options::default());
        }
        // Datagrams of random bytes, and every prefix of each datagram.
        let mut frames = built.frames.clone();
        for f in &mut frames {
            let len = f.bytes.len();
            f.bytes.truncate(next(&mut state) as usize % (len + 1));
        }
        let _ = dump(
            &support::write_capture(built.framing, &frames),
            Some(&log),
            &Options::default(),
        );
        for f in &mut frames {
            f.bytes = (0..next(&mut state) % 200)
                .map(|_| next(&mut state) as u8)
                .collect();
        }
        let _ = dump(
            &support::write_capture(built.framing, &frames),
            Some(&log),
            &Options::default(),
        );
    }
}
