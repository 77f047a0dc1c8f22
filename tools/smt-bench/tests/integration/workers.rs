//! The opt-in systems (`smt-workers-1`, `smt-workers-2`, `smt-aes-9k`)
//! run in the benchmark harness when named: a smoke run measures each.

use std::process::Command;

use smt_bench::record::Record;
use smt_bench::systems::System;

#[test]
fn opt_in_systems_run_when_named_and_not_by_default() {
    assert!(System::OPT_IN.iter().all(|s| !System::ALL.contains(s)));
    let dir = tempfile::tempdir().expect("temp dir");
    let names: Vec<&str> = System::OPT_IN.iter().map(|s| s.name()).collect();
    let out = Command::new(env!("CARGO_BIN_EXE_smt-bench"))
        .args([
            "--smoke",
            "--no-idle-wait",
            "--workloads",
            "throughput,bulk",
        ])
        .args(["--systems", &names.join(","), "--out"])
        .arg(dir.path())
        .output()
        .expect("run smt-bench");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "smt-bench failed: {stderr}");
    let text = std::fs::read_to_string(dir.path().join("results.json")).expect("results.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let recs: Vec<Record> = serde_json::from_value(json["records"].clone()).expect("records");
    for system in System::OPT_IN {
        let mine: Vec<&Record> = recs.iter().filter(|r| r.system == system.name()).collect();
        assert!(!mine.is_empty(), "{}: no results", system.name());
        assert!(
            mine.iter().all(|r| r.rpcs > 0),
            "{}: a point with no RPCs",
            system.name()
        );
        for w in ["throughput", "bulk"] {
            assert!(
                mine.iter().any(|r| r.workload == w),
                "{}: no {w}",
                system.name()
            );
        }
    }
}
