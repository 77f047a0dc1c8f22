//! Captures of real exchanges, decrypted by `smt dump` with the endpoints'
//! key log: every message byte-identical to what the application sent.

use crate::support;

use smt_dump::{dump, KeyLog, Options, Report};
use support::{Built, Truth};

fn decrypt(built: &Built) -> Report {
    decrypt_with(built, Options::default())
}

fn decrypt_with(built: &Built, opts: Options) -> Report {
    let log = KeyLog::parse(&built.keylog);
    assert!(log.bad_lines.is_empty(), "{:?}", log.bad_lines);
    let opts = Options {
        keep_plaintext: true,
        ..opts
    };
    dump(&built.capture, Some(&log), &opts).expect("a capture")
}

/// Every message of the truth is in the report, complete, with the same
/// bytes; nothing else is reported as a problem.
pub fn assert_matches_truth(report: &Report, truth: &Truth) {
    assert!(report.problems.is_empty(), "{:#?}", report.problems);
    assert_eq!(
        report.messages.len(),
        truth.messages.len(),
        "{:#?}",
        report.messages
    );
    // IDs repeat in every key epoch: each report message matches once, in
    // order.
    let mut used = vec![false; report.messages.len()];
    for want in &truth.messages {
        let at = report
            .messages
            .iter()
            .enumerate()
            .position(|(i, m)| {
                !used[i] && m.id == want.id && m.src == want.src && m.dst == want.dst
            })
            .unwrap_or_else(|| panic!("message {} {} missing", want.id, want.kind));
        used[at] = true;
        let got = &report.messages[at];
        assert_eq!(got.status, "complete", "{got:#?}");
        assert_eq!(got.kind, want.kind);
        let data = got.plaintext.as_ref().expect("kept");
        assert_eq!(data.len(), want.len);
        assert_eq!(
            format!("{:016x}", support::fnv64(data)),
            want.plaintext_fnv64
        );
        if let Some(hex) = &want.plaintext_hex {
            assert_eq!(&hex::encode(data), hex);
        }
    }
}

#[test]
fn a_tls_exchange_decrypts_byte_identical() {
    let built = support::build(&support::tls_exchange());
    let report = decrypt(&built);
    assert_matches_truth(&report, &built.truth);
    assert_eq!(report.sessions.len(), 1);
    assert!(
        report.sessions[0].keys.starts_with("key log"),
        "{:?}",
        report.sessions[0]
    );
    // The lost packet's retransmission completed the 4000-byte request.
    let big = report
        .messages
        .iter()
        .find(|m| m.kind == "request" && m.plaintext_len == 4000)
        .unwrap();
    assert_eq!((big.packets, big.retransmissions), (3, 1));
    // Two small requests shared a datagram.
    assert!(report
        .packets
        .iter()
        .any(|p| p.index == 1 && p.header_type() == "DATA"));
}

#[test]
fn a_psk_exchange_decrypts_byte_identical() {
    let built = support::build(&support::psk_exchange());
    let report = decrypt(&built);
    assert_matches_truth(&report, &built.truth);
    assert_eq!(report.sessions[0].handshake, Some("PSK nonce exchange"));
    assert!(report.packets.iter().any(|p| p.header_type() == "GRANT"));
}

#[test]
fn without_the_handshake_the_keys_are_found_by_trial_decryption() {
    let built = support::build(&support::psk_exchange());
    let frames: Vec<_> = built
        .frames
        .iter()
        .filter(|f| f.bytes.get(13) != Some(&0x20))
        .cloned()
        .collect();
    let capture = support::write_capture(built.framing, &frames);
    let report = decrypt(&Built { capture, ..built });
    assert!(
        report.sessions[0].keys.contains("trial"),
        "{:?}",
        report.sessions
    );
    assert!(report.messages.iter().all(|m| m.status == "complete"));
    assert_eq!(report.messages.len(), 4);
}

#[test]
fn without_a_key_log_headers_are_decoded_and_messages_are_not() {
    let built = support::build(&support::tls_exchange());
    let report = dump(&built.capture, None, &Options::default()).unwrap();
    assert_eq!(
        report.packets.len(),
        built
            .truth
            .frames
            .iter()
            .map(|f| f.packets.len())
            .sum::<usize>()
    );
    assert!(report.messages.iter().all(|m| m.status == "no_keys"));
    assert!(report.problems.is_empty());
}

#[test]
fn json_keeps_header_fields_apart_from_the_packets_own() {
    let built = support::build(&support::tls_exchange());
    let report = decrypt(&built);
    let json: serde_json::Value = serde_json::to_value(&report).unwrap();
    let resend = json["packets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "RESEND" && p["resend_offset"] != 0)
        .expect("the server's RESEND for the lost packet");
    assert_eq!(resend["offset"], 0, "the packet's offset in its datagram");
    assert_eq!(resend["resend_offset"], 1428);
    assert_eq!(resend["resend_length"], 1428);
    assert_eq!(resend["tag"]["status"], "ok");
}

#[test]
fn keys_of_a_0rtt_session_are_followed_through_key_epochs() {
    let built = support::build(&support::rekeying_exchange());
    let opts = Options {
        seq_layout: smt_proto::record::SeqLayout::new(56).unwrap(),
        ..Options::default()
    };
    let report = decrypt_with(&built, opts);
    assert_matches_truth(&report, &built.truth);
    let session = &report.sessions[0];
    assert!(
        session.keys.contains("0-RTT") && session.keys.contains("trial"),
        "{session:?}"
    );
    assert!(session.epochs >= 2, "the session rekeyed: {session:?}");
    let announces = report
        .packets
        .iter()
        .filter(|p| {
            matches!(
                p.header,
                smt_dump::packet::Header::KeyUpdate { announce: true }
            )
        })
        .count();
    assert_eq!(announces, session.epochs, "one announcement per epoch");
    assert!(report
        .packets
        .iter()
        .filter_map(|p| p.tag.as_ref())
        .all(|t| t.status == "ok"));
}
