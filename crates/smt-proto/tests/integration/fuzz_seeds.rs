//! Seed corpus for the `endpoint` fuzz target: the datagrams a client sends
//! a server in a real (null-cipher) exchange with some loss, in the
//! harness's `[op][len: u16][bytes]` format (see `smt_proto::fuzzing`).
//! Set SMT_UPDATE_SNAPSHOTS=1 to regenerate after a wire change.

use std::path::PathBuf;
use std::time::Duration;

use smt_proto::sim::{Link, Pair, TestKeys};

fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let lossy = |loss| Link {
        loss,
        ..Link::default()
    };
    // Deeper states: RESENDs and retransmissions under heavy loss, packets
    // reordered and duplicated, a multi-segment message.
    let rough = Link {
        loss: 0.05,
        reorder: 0.3,
        duplicate: 0.1,
        ..Link::default()
    };
    for (name, sizes, link) in [
        ("small", vec![10usize, 200], lossy(0.0)),
        ("large", vec![3000, 20_000], lossy(0.05)),
        ("heavy_loss", vec![5000, 70_000, 100], lossy(0.2)),
        ("reordered", vec![1, 9000, 300, 40_000], rough),
    ] {
        let mut pair = Pair::with_keys(TestKeys::Null, link, 77);
        pair.capture = Some(Vec::new());
        for (i, len) in sizes.iter().enumerate() {
            pair.call(&vec![i as u8; *len]);
        }
        assert!(pair.run(Duration::from_secs(5)));
        let mut seed = Vec::new();
        for d in pair
            .capture
            .as_ref()
            .unwrap()
            .iter()
            .filter(|d| d.to == pair.server_addr)
        {
            // op 0x18: from the known peer, advance the clock, answer requests.
            seed.push(0x18);
            seed.extend_from_slice(&(d.bytes.len() as u16).to_be_bytes());
            seed.extend_from_slice(&d.bytes);
        }
        out.push((format!("exchange_{name}"), seed));
    }
    out
}

#[test]
fn endpoint_seed_corpus_is_current() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/endpoint");
    let update = std::env::var_os("SMT_UPDATE_SNAPSHOTS").is_some();
    if update {
        std::fs::create_dir_all(&dir).expect("create corpus dir");
    }
    for (name, bytes) in seeds() {
        let path = dir.join(&name);
        if update {
            std::fs::write(&path, &bytes).expect("write seed");
        }
        let on_disk = std::fs::read(&path).unwrap_or_default();
        assert!(
            on_disk == bytes,
            "{name} is stale; rerun with SMT_UPDATE_SNAPSHOTS=1"
        );
    }
}
