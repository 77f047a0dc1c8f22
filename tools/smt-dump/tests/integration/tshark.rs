//! The Wireshark dissector (`tools/wireshark/smt.lua`) run by Debian's
//! tshark over the committed captures: for every packet of every datagram,
//! the fields tshark shows must be what the capture was built from
//! (`*.truth.json`, written by `examples/make_captures.rs` from the
//! senders' own packets). Prints SKIPPED and passes when tshark is not
//! installed (`scripts/tshark-test.sh --install` installs it as root).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tshark_available() -> bool {
    Command::new("tshark")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// tshark's JSON for `capture`, dissected with the plugin only (a HOME of
/// its own, so an installed copy of the plugin is not loaded twice).
fn tshark_json(capture: &Path) -> Vec<Value> {
    let home = std::env::temp_dir().join(format!("smt-tshark-home-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let script = repo().join("tools/wireshark/smt.lua");
    let out = Command::new("tshark")
        .env("HOME", &home)
        .arg("-n")
        .arg("-X")
        .arg(format!("lua_script:{}", script.display()))
        .arg("-r")
        .arg(capture)
        .args(["-T", "json", "--no-duplicate-keys", "-J", "frame smt"])
        .output()
        .expect("tshark runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tshark failed: {stderr}");
    assert!(
        !stderr.contains("Lua: Error"),
        "the dissector raised an error: {stderr}"
    );
    serde_json::from_slice::<Vec<Value>>(&out.stdout).expect("tshark's JSON")
}

/// Every `smt.*` field of one packet's tree, nested subtrees flattened;
/// repeated fields keep every value.
fn flatten(v: &Value, out: &mut BTreeMap<String, Vec<String>>) {
    let Value::Object(map) = v else { return };
    for (k, v) in map {
        match v {
            Value::Object(_) => flatten(v, out),
            Value::Array(items) if k.ends_with("_tree") => {
                items.iter().for_each(|i| flatten(i, out))
            }
            Value::Array(items) => {
                for item in items {
                    match item {
                        Value::String(s) => out.entry(k.clone()).or_default().push(s.clone()),
                        other => flatten(other, out),
                    }
                }
            }
            Value::String(s) => out.entry(k.clone()).or_default().push(s.clone()),
            _ => {}
        }
    }
}

/// A number as tshark prints it (decimal, or hex with 0x).
fn number(s: &str) -> u64 {
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
        None => s.parse().unwrap(),
    }
}

const TYPES: [(&str, u64); 12] = [
    ("DATA", 0x10),
    ("GRANT", 0x11),
    ("RESEND", 0x12),
    ("RPC_UNKNOWN", 0x13),
    ("BUSY", 0x14),
    ("NEED_ACK", 0x17),
    ("ACK", 0x18),
    ("KEY_UPDATE", 0x19),
    ("OVERLOADED", 0x1a),
    ("ABANDONED", 0x1b),
    ("CREDIT", 0x1c),
    ("HANDSHAKE", 0x20),
];

fn check_capture(file: &str) -> usize {
    let dir = repo().join("tools/wireshark/testdata");
    let stem = file.split('.').next().unwrap();
    let truth: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join(format!("{stem}.truth.json"))).unwrap(),
    )
    .unwrap();
    let frames = tshark_json(&dir.join(file));
    let truth_frames = truth["frames"].as_array().unwrap();
    assert_eq!(frames.len(), truth_frames.len(), "{file}: frame count");
    let mut checked = 0;
    for (frame, want) in frames.iter().zip(truth_frames) {
        let layers = &frame["_source"]["layers"];
        let number = layers["frame"]["frame.number"].as_str().unwrap();
        assert_eq!(number, want["frame"].as_u64().unwrap().to_string());
        let smt: Vec<&Value> = match &layers["smt"] {
            Value::Array(items) => items.iter().collect(),
            Value::Null => vec![],
            one => vec![one],
        };
        let want_packets = want["packets"].as_array().unwrap();
        assert_eq!(
            smt.len(),
            want_packets.len(),
            "{file} frame {number}: packets"
        );
        for (i, (got, want)) in smt.iter().zip(want_packets).enumerate() {
            let mut fields = BTreeMap::new();
            flatten(got, &mut fields);
            let at = format!("{file} frame {number} packet {i}");
            check_packet(&at, &fields, got, want);
            checked += 1;
        }
    }
    checked
}

fn one<'a>(fields: &'a BTreeMap<String, Vec<String>>, name: &str, at: &str) -> &'a str {
    match fields.get(name).map(Vec::as_slice) {
        Some([v]) => v,
        other => panic!("{at}: {name} is {other:?}\n{fields:#?}"),
    }
}

fn check_packet(at: &str, fields: &BTreeMap<String, Vec<String>>, tree: &Value, want: &Value) {
    assert_eq!(
        number(one(fields, "smt.packet_len", at)),
        want["len"].as_u64().unwrap(),
        "{at}: length"
    );
    if want["malformed"] == true {
        let why = one(fields, "smt.malformed", at);
        assert_eq!(why, want["error"].as_str().unwrap(), "{at}: the reason");
        let expert = &tree["_ws.expert"];
        assert!(
            !expert["smt.expert.malformed"].is_null(),
            "{at}: no expert info: {tree:#}"
        );
        return;
    }
    assert!(
        !fields.contains_key("smt.malformed"),
        "{at}: flagged malformed: {fields:#?}"
    );
    let kind = want["type"].as_str().unwrap();
    let code = TYPES.iter().find(|(n, _)| *n == kind).unwrap().1;
    assert_eq!(number(one(fields, "smt.type", at)), code, "{at}: type");
    assert_eq!(
        format!("{:#x}", number(one(fields, "smt.id", at))),
        want["id"].as_str().unwrap(),
        "{at}: id"
    );
    assert_eq!(
        number(one(fields, "smt.key_phase", at)),
        want["key_phase"].as_u64().unwrap(),
        "{at}: key phase"
    );
    for pair in want["fields"].as_array().unwrap() {
        let (name, value) = (pair[0].as_str().unwrap(), pair[1].as_str().unwrap());
        let got = fields
            .get(&format!("smt.{name}"))
            .cloned()
            .unwrap_or_default();
        let got: Vec<String> = got.iter().map(|v| format!("{:#x}", number(v))).collect();
        let want: Vec<String> = value
            .split(',')
            .map(|v| format!("{:#x}", number(v)))
            .collect();
        assert_eq!(got, want, "{at}: smt.{name}");
    }
    // Control packets carry their MAC; DATA and HANDSHAKE do not.
    let tagged = !matches!(kind, "DATA" | "HANDSHAKE");
    assert_eq!(fields.contains_key("smt.tag"), tagged, "{at}: MAC");
    // A segment's first packet starts with a record header.
    if kind == "DATA" {
        let seg_offset = fields["smt.seg_offset"][0].clone();
        if fields["smt.wire_offset"][0] == seg_offset {
            assert_eq!(
                fields["smt.record.wire_offset"][0], seg_offset,
                "{at}: first record"
            );
            assert_eq!(fields["smt.record.type"][0], "0x17", "{at}: record type");
        }
    }
}

/// The zoo holds a packet of every type the dissector names, so the test
/// below sees each decoded.
#[test]
fn the_zoo_has_every_packet_type() {
    let dir = repo().join("tools/wireshark/testdata");
    let truth: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("smt-zoo.truth.json")).unwrap())
            .unwrap();
    let types: std::collections::BTreeSet<&str> = truth["frames"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["packets"].as_array().unwrap())
        .filter(|p| p["malformed"] == false)
        .filter_map(|p| p["type"].as_str())
        .collect();
    for (name, code) in TYPES {
        assert!(types.contains(name), "no {name} ({code:#x}) in the zoo");
    }
}

#[test]
fn tshark_decodes_every_packet_as_the_capture_was_built() {
    if !tshark_available() {
        println!("SKIPPED: tshark is not installed (scripts/tshark-test.sh --install, as root)");
        return;
    }
    let mut packets = 0;
    for file in ["smt-tls.pcap", "smt-psk.pcapng", "smt-zoo.pcap"] {
        packets += check_capture(file);
    }
    println!("tshark: {packets} SMT packets checked");
    assert!(packets > 80);
}

/// tshark reads the pcapng the endpoint itself writes (`--capture`):
/// every frame is an SMT datagram on the dissector's UDP port heuristic,
/// none malformed, the multi-packet messages' DATA packets among them,
/// and as many frames as the capture says it wrote.
#[test]
fn tshark_reads_the_endpoints_own_capture() {
    if !tshark_available() {
        println!("SKIPPED: tshark is not installed (scripts/tshark-test.sh --install, as root)");
        return;
    }
    use smt::keys::{fresh_session_pair, AeadAlgorithm};
    use smt::observe::{Capture, Observe};
    use smt::{Endpoint, EndpointConfig};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("own.pcapng");
    let capture = Capture::create(&path).unwrap();
    let any = "127.0.0.1:0".parse().unwrap();
    let server = Endpoint::bind(any, EndpointConfig::default()).unwrap();
    let mut config = EndpointConfig::default();
    config.set_observe(Observe::new().capture(capture.clone()));
    let client = Endpoint::bind(any, config).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    let echo = server.clone();
    std::thread::spawn(move || {
        while let Ok(mut req) = echo.accept() {
            let data = req.take_data();
            let _ = req.respond(&data);
        }
    });
    for len in [64, 4000, 20_000] {
        let req = vec![len as u8; len];
        assert_eq!(client.call(server.local_addr(), &req).unwrap(), req[..]);
    }
    client.close();
    server.close();
    let written = capture.finish().unwrap().datagrams;
    let frames = tshark_json(&path);
    assert_eq!(frames.len() as u64, written);
    let mut data_packets = 0;
    for frame in &frames {
        let layers = &frame["_source"]["layers"];
        let mut fields = BTreeMap::new();
        flatten(&layers["smt"], &mut fields);
        assert!(!fields.is_empty(), "not dissected as SMT: {layers}");
        assert!(!fields.contains_key("smt.malformed"), "{fields:?}");
        data_packets += fields
            .get("smt.type")
            .map_or(0, |t| t.iter().filter(|t| number(t) == 0x10).count());
    }
    // 1 + 3 + 15 packets each way.
    assert!(data_packets >= 2 * 19, "{data_packets} DATA packets");
}
