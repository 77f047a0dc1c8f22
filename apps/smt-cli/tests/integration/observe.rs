//! `--capture` and `--trace` (issue 16): the endpoint's own capture and
//! key file, decrypted by `smt dump`; its trace, turned into timelines by
//! `smt dump --trace`; files that exist refused without `--force`.

use crate::common;

use std::path::Path;

use common::{psk, smt, smt_ok, start_server, temp_dir, ANY_PORT};
use serde_json::Value;

/// `smt dump CAPTURE --keylog KEYS --json`: every message complete, no
/// problem; returns the number of messages.
fn assert_decrypts(capture: &Path, keys: &Path) -> usize {
    let out = smt_ok(&[
        "dump",
        capture.to_str().unwrap(),
        "--keylog",
        keys.to_str().unwrap(),
        "--json",
    ]);
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        report["problems"],
        serde_json::json!([]),
        "{}",
        report["problems"]
    );
    assert_eq!(report["capture"]["capture_dropped"], 0);
    let messages = report["messages"].as_array().unwrap();
    assert!(!messages.is_empty());
    for m in messages {
        assert_eq!(m["status"], "complete", "{m}");
    }
    messages.len()
}

/// `smt dump --trace TRACE --json`: every RPC got its response.
fn assert_timelines(trace: &Path) -> usize {
    let out = smt_ok(&["dump", "--trace", trace.to_str().unwrap(), "--json"]);
    let t: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(t["files"][0]["complete"], true);
    let rpcs = t["rpcs"].as_array().unwrap();
    for r in rpcs {
        assert_eq!(r["outcome"], "response", "{}", r["id"]);
    }
    rpcs.len()
}

fn demo(dir: &Path, extra: &[&str]) -> common::Run {
    let d = dir.to_str().unwrap();
    let (cap, trace) = (format!("{d}/demo.pcapng"), format!("{d}/demo.jsonl"));
    let args = [
        "demo",
        "--seconds",
        "0.2",
        "--sizes",
        "64,20000",
        "--concurrency",
        "4",
        "--capture",
        &cap,
        "--trace",
        &trace,
    ];
    smt(&[&args[..], extra].concat())
}

#[test]
fn a_demos_capture_decrypts_and_its_trace_has_every_rpc() {
    for extra in [&[][..], &["--no-handshake"]] {
        let dir = temp_dir("observe-demo");
        let run = demo(&dir, extra);
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        assert!(
            run.stderr.contains("smt dump"),
            "says how to read them: {}",
            run.stderr
        );
        let messages = assert_decrypts(&dir.join("demo.pcapng"), &dir.join("demo.keys"));
        let rpcs = assert_timelines(&dir.join("demo.jsonl"));
        // Each RPC is a request and a response.
        assert_eq!(messages, 2 * rpcs, "{extra:?}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join("demo.keys"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "the key file is private");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn files_that_exist_are_refused_without_force() {
    let dir = temp_dir("observe-force");
    for existing in ["demo.pcapng", "demo.keys", "demo.jsonl"] {
        std::fs::write(dir.join(existing), "keep me").unwrap();
        let run = demo(&dir, &[]);
        assert_eq!(run.code, Some(1), "{existing}: {}", run.stderr);
        assert!(
            run.stderr.contains(existing) && run.stderr.contains("pass --force"),
            "{}",
            run.stderr
        );
        for file in ["demo.pcapng", "demo.keys", "demo.jsonl"] {
            let kept = std::fs::read_to_string(dir.join(file)).ok();
            assert!(
                kept.is_none() || kept.as_deref() == Some("keep me"),
                "{file} untouched"
            );
        }
        std::fs::remove_file(dir.join(existing)).unwrap();
    }
    std::fs::write(dir.join("demo.pcapng"), "old").unwrap();
    let run = demo(&dir, &["--force"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_decrypts(&dir.join("demo.pcapng"), &dir.join("demo.keys"));
    let named_keys = smt(&["demo", "--seconds", "0.1", "--capture", "x.keys"]);
    assert_eq!(named_keys.code, Some(2), "{}", named_keys.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A PSK server and client in two processes, each capturing and tracing
/// itself: both captures decrypt with their own key files, and the two
/// traces merge into one timeline per RPC with both ends in it.
#[test]
fn server_and_client_each_record_themselves() {
    let dir = temp_dir("observe-two");
    let d = dir.to_str().unwrap();
    let key = psk();
    let (scap, strace) = (format!("{d}/server.pcapng"), format!("{d}/server.jsonl"));
    let mut server = start_server(
        ANY_PORT,
        &[
            "--psk",
            &key,
            "--duration",
            "3",
            "--capture",
            &scap,
            "--trace",
            &strace,
        ],
    );
    let (ccap, ctrace) = (format!("{d}/client.pcapng"), format!("{d}/client.jsonl"));
    smt_ok(&[
        "client",
        "--server",
        &server.addr,
        "--psk",
        &key,
        "--seconds",
        "0.3",
        "--size",
        "5000",
        "--concurrency",
        "2",
        "--capture",
        &ccap,
        "--trace",
        &ctrace,
    ]);
    let status = server.child.wait().unwrap();
    assert!(
        status.success(),
        "the server ends by itself after --duration"
    );
    let client = assert_decrypts(Path::new(&ccap), &dir.join("client.keys"));
    let server_side = assert_decrypts(Path::new(&scap), &dir.join("server.keys"));
    assert_eq!(client, server_side, "the same messages at both ends");
    let out = smt_ok(&["dump", "--trace", &ctrace, "--trace", &strace, "--json"]);
    let t: Value = serde_json::from_str(&out).unwrap();
    let rpcs = t["rpcs"].as_array().unwrap();
    assert_eq!(2 * rpcs.len(), client);
    for r in rpcs {
        let eps: std::collections::BTreeSet<&str> = r["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["ep"].as_str().unwrap())
            .collect();
        assert_eq!(eps.len(), 2, "both ends of {}", r["id"]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
