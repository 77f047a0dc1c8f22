//! Runs the benchmark binary in smoke mode (a few RPCs per system and
//! workload) and checks that every system produced results, the JSON
//! parses and the plots exist. Timing is not checked: machines are shared.

use std::process::Command;

use smt_bench::record::Record;
use smt_bench::systems::System;

fn records(json: &serde_json::Value) -> Vec<Record> {
    serde_json::from_value(json["records"].clone()).expect("records parse")
}

#[test]
fn smoke_run_measures_every_system_and_writes_json_csv_and_svg() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_smt-bench"))
        .args(["--smoke", "--no-idle-wait", "--out"])
        .arg(dir.path())
        .output()
        .expect("run smt-bench");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "smt-bench failed: {stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("ratio smt-aes / column"),
        "no ratio table:\n{stdout}"
    );
    assert!(stdout.contains("targets (measured, not asserted)"));

    let text = std::fs::read_to_string(dir.path().join("results.json")).expect("results.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let recs = records(&json);
    let notes: Vec<String> = serde_json::from_value(json["notes"].clone()).expect("notes");
    for system in System::ALL {
        if system == System::SmtBusyPoll {
            continue; // unpinned only; smoke runs pinned
        }
        let mine: Vec<&Record> = recs.iter().filter(|r| r.system == system.name()).collect();
        if system == System::SmtRaw && mine.is_empty() {
            // Raw IP needs CAP_NET_RAW; without it the run says so.
            assert!(
                notes.iter().any(|n| n.contains("smt-raw")),
                "smt-raw: no results, no note"
            );
            continue;
        }
        assert!(
            !mine.is_empty(),
            "{}: no results; notes: {notes:?}",
            system.name()
        );
        assert!(
            mine.iter().all(|r| r.rpcs > 0),
            "{}: a point with no RPCs",
            system.name()
        );
        let workloads: Vec<&str> = mine.iter().map(|r| r.workload.as_str()).collect();
        let expected: &[&str] = if system.rtt_only() {
            &["rtt"]
        } else if !system.runs_mixed() {
            &["rtt", "throughput", "bulk"]
        } else {
            &["rtt", "throughput", "mixed", "bulk"]
        };
        for w in expected {
            assert!(workloads.contains(w), "{}: no {w} results", system.name());
        }
    }
    assert!(dir.path().join("results.csv").exists());
    let svgs: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list output")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".svg"))
        .collect();
    for prefix in ["rtt_", "throughput_", "slowdown_"] {
        assert!(
            svgs.iter().any(|n| n.starts_with(prefix)),
            "no {prefix}*.svg in {svgs:?}"
        );
    }
}
