//! Writes the committed test captures: `cargo run -p smt-dump --example
//! make_captures -- tools/wireshark/testdata`. For each exchange: the
//! capture, its key log (`.keys`) and its ground truth (`.truth.json`).
//! Regenerating changes every byte that depends on fresh randomness
//! (handshake randoms, keys, ciphertexts), not what the tests check.

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::PathBuf;

fn main() {
    let dir: PathBuf = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("tools/wireshark/testdata"));
    std::fs::create_dir_all(&dir).expect("create the output directory");
    let builds = [
        ("smt-tls.pcap", support::build(&support::tls_exchange())),
        ("smt-psk.pcapng", support::build(&support::psk_exchange())),
        ("smt-zoo.pcap", support::zoo()),
    ];
    for (file, built) in builds {
        let stem = file.split('.').next().expect("a name");
        std::fs::write(dir.join(file), &built.capture).expect("write the capture");
        if !built.keylog.is_empty() {
            std::fs::write(dir.join(format!("{stem}.keys")), &built.keylog)
                .expect("write the key log");
        }
        let truth = serde_json::to_string_pretty(&built.truth).expect("serialisable");
        std::fs::write(dir.join(format!("{stem}.truth.json")), truth + "\n")
            .expect("write the truth");
        println!(
            "{}: {} frames",
            dir.join(file).display(),
            built.truth.frames.len()
        );
    }
}
