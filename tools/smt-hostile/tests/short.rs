//! The short variant of `smt-hostile` against freshly started `smt server`
//! processes, inside the network namespace it creates (as root; without
//! root it prints `SKIPPED` and this test passes). It asserts only the
//! "after" checks of every class — the server is alive, a legitimate call
//! and a metrics scrape succeed after the attack, nothing is left queued
//! on its socket, no server thread is busy, its RSS is within the 64 MiB
//! bound — never a timing threshold; the long variant's targets are
//! printed as PASS/MISS lines and not asserted.
//!
//! Checks that fail against today's server are listed, in one place, in
//! [`EXPECTED_FAILURES`]: they are reported and tolerated. When a fix lands,
//! its entries are removed here (the test then holds the fix); one that
//! passes while still listed is reported as `XPASS` (not a failure: some of
//! these failures come 4 times in 5, not always).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_smt-hostile");

/// `(class, check, why)`: after checks that fail, always or in some runs,
/// against today's server, with the defect whose fix should make them
/// pass; class `*` is every class. Remove a fix's entries once it has
/// landed: the test then holds it.
///
/// Empty after issue #22's fixes (the list as of the report, main
/// at 57d39df, is in git history). One entry since 2026-11-29: the held
/// TLS handshakes' memory 2 s after the attack, which came back in some
/// runs (see its reason).
const EXPECTED_FAILURES: &[(&str, &str, &str)] = &[(
    "hold-tls",
    "memory",
    "RSS 2 s after the end above the 64 MiB bound in 4 of 8 short runs of \
     trees after ae13688 (68.5-75.7 MiB, once in CI at 08cea5a; others \
     16-46), 0 of 9 at 6731cce and ae13688 (15.7-28.2): the held \
     handshakes expire at their 2 s total deadline, as the recovery \
     window ends, and the allocator \
     trim then needs the engine quiet for 2 ms; not settled (closing note \
     of 2026-11-29, docs/benchmarks.md 'eleventh session')",
)];

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

/// One `CHECK <class> <check> <after|target> <PASS|FAIL> <detail>` line.
#[derive(Debug)]
struct CheckLine {
    class: String,
    check: String,
    after: bool,
    pass: bool,
    detail: String,
}

fn parse_checks(stdout: &str) -> Vec<CheckLine> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("CHECK "))
        .filter_map(|l| {
            let mut w = l.splitn(5, ' ');
            Some(CheckLine {
                class: w.next()?.to_string(),
                check: w.next()?.to_string(),
                after: w.next()? == "after",
                pass: w.next()? == "PASS",
                detail: w.next().unwrap_or_default().to_string(),
            })
        })
        .collect()
}

#[test]
fn after_every_attack_the_server_is_alive_and_answering() {
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
            "2",
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
    let skipped = [
        "SKIPPED: needs root",
        "SKIPPED: iproute2",
        "SKIPPED: cannot create",
    ];
    if skipped.iter().any(|s| stdout.contains(s)) {
        return;
    }
    assert!(
        !stderr.contains("smt-hostile: error:"),
        "smt-hostile could not run (status {:?})",
        out.status.code()
    );
    assert!(stdout.contains("(g) PSK hello (HANDSHAKE kind 2)"));
    let checks = parse_checks(&stdout);
    let classes: BTreeSet<&str> = checks.iter().map(|c| c.class.as_str()).collect();
    assert!(classes.len() >= 13, "classes reported: {classes:?}");
    // Which entry, if any, lists a check: the class's own first.
    let listed = |class: &str, check: &str| {
        let by = |c: &str| EXPECTED_FAILURES.iter().any(|e| e.0 == c && e.1 == check);
        if by(class) {
            Some(class.to_string())
        } else {
            by("*").then(|| "*".to_string())
        }
    };
    let mut unexpected = Vec::new();
    let mut wildcard_passes: Vec<String> = Vec::new();
    println!("after checks that failed, or passed while listed by class:");
    for c in checks.iter().filter(|c| c.after) {
        let entry = listed(&c.class, &c.check);
        let verdict = match (c.pass, entry.as_deref()) {
            (true, None) => continue,
            (true, Some("*")) => {
                wildcard_passes.push(format!("{} {}", c.class, c.check));
                continue;
            }
            (true, Some(_)) => {
                "XPASS (listed in EXPECTED_FAILURES: remove it once its fix has landed)"
            }
            (false, Some(_)) => "expected failure",
            (false, None) => "FAILED",
        };
        println!("  {} {}: {verdict}: {}", c.class, c.check, c.detail);
        if !c.pass && entry.is_none() {
            unexpected.push(format!("{} {}: {}", c.class, c.check, c.detail));
        }
    }
    println!(
        "listed for every class (\"*\") but passed here: {}",
        wildcard_passes.join(", ")
    );
    assert!(
        unexpected.is_empty(),
        "after checks failed that are not in EXPECTED_FAILURES:\n{}",
        unexpected.join("\n")
    );
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
        (
            &["--hold-sockets", "0"][..],
            "--hold-sockets must be 1 to 60000",
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
