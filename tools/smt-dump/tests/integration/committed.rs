//! The committed captures under `tools/wireshark/testdata/` (made by
//! `examples/make_captures.rs`; the dissector's test reads them too),
//! decrypted with their committed key logs.

use crate::support;

use std::path::PathBuf;

use smt_dump::{dump, KeyLog, Options};

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tools/wireshark/testdata")
}

fn truth(stem: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(testdata().join(format!("{stem}.truth.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn check(file: &str) {
    let stem = file.split('.').next().unwrap();
    let capture = std::fs::read(testdata().join(file)).unwrap();
    let keys = std::fs::read_to_string(testdata().join(format!("{stem}.keys"))).unwrap();
    let log = KeyLog::parse(&keys);
    let opts = Options {
        keep_plaintext: true,
        ..Options::default()
    };
    let report = dump(&capture, Some(&log), &opts).unwrap();
    assert!(report.problems.is_empty(), "{:#?}", report.problems);
    let truth = truth(stem);
    let frames = truth["frames"].as_array().unwrap();
    assert_eq!(report.capture.frames as usize, frames.len());
    let packets: usize = frames
        .iter()
        .map(|f| f["packets"].as_array().unwrap().len())
        .sum();
    assert_eq!(report.packets.len(), packets);
    for (got, want) in report.packets.iter().zip(
        frames
            .iter()
            .flat_map(|f| f["packets"].as_array().unwrap().iter().map(move |p| (f, p))),
    ) {
        let (f, p) = want;
        assert_eq!(got.frame, f["frame"].as_u64().unwrap());
        assert_eq!(got.header_type(), p["type"].as_str().unwrap());
        assert_eq!(got.id.as_deref(), p["id"].as_str());
    }
    let messages = truth["messages"].as_array().unwrap();
    assert_eq!(report.messages.len(), messages.len());
    for want in messages {
        let got = report
            .messages
            .iter()
            .find(|m| m.id == want["id"] && m.src == want["src"])
            .unwrap();
        assert_eq!(got.status, "complete");
        let data = got.plaintext.as_ref().unwrap();
        assert_eq!(data.len() as u64, want["len"].as_u64().unwrap());
        assert_eq!(
            format!("{:016x}", support::fnv64(data)),
            want["plaintext_fnv64"]
        );
        if let Some(hex) = want["plaintext_hex"].as_str() {
            assert_eq!(hex::encode(data), hex);
        }
    }
}

#[test]
fn the_committed_tls_capture_decrypts_as_its_truth_says() {
    check("smt-tls.pcap");
}

#[test]
fn the_committed_psk_capture_decrypts_as_its_truth_says() {
    check("smt-psk.pcapng");
}

#[test]
fn the_committed_zoo_reports_each_malformed_packet() {
    let capture = std::fs::read(testdata().join("smt-zoo.pcap")).unwrap();
    let report = dump(&capture, None, &Options::default()).unwrap();
    let truth = truth("smt-zoo");
    let malformed = truth["frames"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["packets"].as_array().unwrap())
        .filter(|p| p["malformed"] == true)
        .count();
    assert_eq!(malformed, 6);
    let reported = report
        .problems
        .iter()
        .filter(|p| p.what.starts_with("malformed"))
        .count();
    assert_eq!(reported, malformed, "{:#?}", report.problems);
}
