//! Debian's `redis-benchmark` against smt-kv's TCP and TLS front ends:
//! `-t ping,set,get`, without and with pipelining (`-P 16`), must complete
//! every test with no error. Throughput is printed, never asserted (the
//! figures are in docs/apps.md).
//!
//! Without redis-benchmark the test prints SKIPPED and passes (see
//! scripts/redis-test.sh).

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{kv_server, redis_available};

/// Runs redis-benchmark with `args`, killing it if it hangs; its stdout
/// and stderr.
fn redis_benchmark(args: &[String]) -> (bool, String, String) {
    let mut child = Command::new("redis-benchmark")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-benchmark starts");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (mut out, mut err) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.is_some_and(|s| s.success()), out, err)
}

fn check(name: &str, base: &[String]) {
    for pipeline in ["1", "16"] {
        let requests = if pipeline == "1" { "5000" } else { "40000" };
        let mut args = base.to_vec();
        args.extend(
            [
                "-t",
                "ping,set,get",
                "-n",
                requests,
                "-c",
                "8",
                "-P",
                pipeline,
                "--csv",
            ]
            .map(String::from),
        );
        let (ok, out, err) = redis_benchmark(&args);
        let context = format!("{name} -P {pipeline}:\nstdout: {out}\nstderr: {err}");
        assert!(ok, "redis-benchmark failed or hung: {context}");
        for test in ["PING_INLINE", "PING_MBULK", "SET", "GET"] {
            let line = out
                .lines()
                .find(|l| l.starts_with(&format!("\"{test}\",")))
                .unwrap_or_else(|| panic!("no result for {test}: {context}"));
            println!("{name:<8} -P {pipeline:<2} {line}");
        }
        for bad in ["ERR", "Error", "WARNING"] {
            assert!(
                !out.contains(bad) && !err.contains(bad),
                "{bad:?} in the output: {context}"
            );
        }
    }
}

#[test]
fn redis_benchmark_completes_over_tcp_and_tls() {
    if !redis_available() {
        return;
    }
    let (server, ca) = kv_server();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca).unwrap();
    let tcp = server.tcp.unwrap();
    let tls = server.tls.unwrap();
    let host = |port: u16| {
        [
            "-h".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
        ]
    };
    check("TCP", &host(tcp.port()));
    let mut tls_args = host(tls.port()).to_vec();
    tls_args.extend([
        "--tls".into(),
        "--cacert".into(),
        ca_file.display().to_string(),
    ]);
    check("TLS/TCP", &tls_args);
}
