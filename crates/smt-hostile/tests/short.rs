//! The short variant of `smt-hostile` against freshly started `smt server`
//! processes. It checks liveness only: every server stays alive and its
//! legitimate client succeeds at least once. Issue #11's thresholds are
//! printed as PASS/MISS lines and not asserted (today's server misses
//! several of them; `--strict` turns them into a failure).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_smt-hostile");

/// `smt` from the same target directory and profile as this test's
/// binary, built there if missing (`cargo test --workspace` builds it
/// already, for smt-cli's own tests).
fn smt_binary() -> PathBuf {
    let dir = Path::new(BIN)
        .parent()
        .expect("the binary lives in a directory");
    let smt = dir.join("smt");
    if smt.is_file() {
        return smt;
    }
    let profile = dir.file_name().and_then(|n| n.to_str()).unwrap_or("debug");
    let mut build = Command::new(env!("CARGO"));
    build.args(["build", "-p", "smt-cli", "--bin", "smt"]);
    match profile {
        "debug" => {}
        "release" => {
            build.arg("--release");
        }
        other => {
            build.args(["--profile", other]);
        }
    }
    let status = build.status().expect("run cargo build -p smt-cli");
    assert!(status.success(), "cargo build -p smt-cli failed");
    assert!(
        smt.is_file(),
        "no smt binary at {} after building",
        smt.display()
    );
    smt
}

#[test]
fn every_flood_leaves_the_server_alive_and_answering() {
    let smt = smt_binary();
    let start = Instant::now();
    let out = Command::new(BIN)
        .arg("--smt")
        .arg(&smt)
        .args([
            "--baseline-secs",
            "0.5",
            "--flood-secs",
            "2",
            "--recovery-secs",
            "0.5",
            "--pps",
            "10000",
        ])
        .output()
        .expect("run smt-hostile");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    println!("smt-hostile took {:.1} s", start.elapsed().as_secs_f64());
    assert!(
        out.status.success(),
        "smt-hostile reported a dead server or no legitimate success (status {:?})",
        out.status.code()
    );
    assert!(stdout.contains("liveness: every server stayed alive"));
    assert!(stdout.contains("(g) PSK hello (HANDSHAKE kind 2)"));
}

#[test]
fn bad_arguments_are_refused_with_a_clear_error() {
    for (args, needle) in [
        (&["--pps", "0"][..], "--pps must be 1 to 1000000"),
        (&["--flood-secs=-1"][..], "--flood-secs must be more than 0"),
        (
            &["--flood-secs", "NaN"][..],
            "--flood-secs must be more than 0",
        ),
        (&["--smt", "/nonexistent/smt"][..], "no such file"),
        (&["--classes", "bogus"][..], "invalid value 'bogus'"),
    ] {
        let out = Command::new(BIN)
            .args(args)
            .output()
            .expect("run smt-hostile");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}
