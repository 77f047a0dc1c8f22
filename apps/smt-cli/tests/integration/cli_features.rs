//! What the `smt` tool promises beyond its error messages (issue 13, item
//! 6): private key files, the mode in the banners, host names, JSON output,
//! counters only when asked, complete help, and raw-IP clients that keep to
//! their own SMT ports.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{free_addr, make_pki, psk, smt, smt_ok, start_server, temp_dir, Pki, ANY_PORT, BIN};
use serde_json::Value;

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[cfg(unix)]
#[test]
fn key_files_are_readable_by_their_owner_only() {
    let dir = temp_dir("private-keys");
    let d = dir.to_str().unwrap();
    let Pki { ca, cert, key, .. } = make_pki(&dir, &["svc.test"]);
    smt_ok(&["keygen", "--out", &format!("{d}/psk.key")]);
    let ticket = format!("{d}/ticket");
    let issue_ticket = [
        "ticket", "issue", "--cert", &cert, "--key", &key, "--name", "svc.test",
    ];
    smt_ok(&[&issue_ticket[..], &["--out", &ticket]].concat());
    for secret in [
        "ca/ca-key.pem",
        "server-key.pem",
        "psk.key",
        "ticket-static.key",
    ] {
        assert_eq!(mode(&dir.join(secret)), 0o600, "{secret}");
    }
    assert_eq!(mode(&dir.join("ca")), 0o700, "the CA directory");
    for public in ["ca/ca.pem", "server.pem", "ticket"] {
        assert_eq!(mode(&dir.join(public)) & 0o600, 0o600, "{public}");
    }
    // --force replaces, and a secret that had been opened up is narrowed.
    use std::os::unix::fs::PermissionsExt;
    let open = std::fs::Permissions::from_mode(0o644);
    std::fs::set_permissions(dir.join("psk.key"), open).unwrap();
    let before = std::fs::read_to_string(dir.join("psk.key")).unwrap();
    smt_ok(&["keygen", "--out", &format!("{d}/psk.key"), "--force"]);
    assert_ne!(
        std::fs::read_to_string(dir.join("psk.key")).unwrap(),
        before
    );
    assert_eq!(mode(&dir.join("psk.key")), 0o600);
    smt_ok(&["ca", "init", "--dir", &ca, "--force"]);
    // The key file is what --psk takes (a trailing newline is fine).
    let key_text = std::fs::read_to_string(dir.join("psk.key")).unwrap();
    let server = start_server(ANY_PORT, &["--psk", &key_text]);
    smt_ok(&[
        "client",
        "--server",
        &server.addr,
        "--psk",
        &key_text,
        "--seconds",
        "0.2",
    ]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn banners_name_the_mode() {
    let dir = temp_dir("banners");
    let Pki {
        cert, key, ca_pem, ..
    } = make_pki(&dir, &["127.0.0.1"]);
    let key_hex = psk();
    let servers = [
        (vec!["--cert", &cert, "--key", &key], "TLS 1.3 (certificate"),
        (
            vec!["--cert", &cert, "--key", &key, "--ca", &ca_pem],
            "mutual TLS 1.3 (certificate",
        ),
        (vec!["--psk", &key_hex], "pre-shared key"),
    ];
    for (args, says) in servers {
        let server = start_server(ANY_PORT, &args);
        assert!(
            server.banner.starts_with("smt server on "),
            "{}",
            server.banner
        );
        assert!(server.banner.contains(says), "{says}: {}", server.banner);
    }
    let server = start_server(ANY_PORT, &["--cert", &cert, "--key", &key]);
    let out = smt_ok(&[
        "client",
        "--server",
        &server.addr,
        "--ca",
        &ca_pem,
        "--seconds",
        "0.2",
    ]);
    let banner = out.lines().next().unwrap();
    assert!(
        banner.contains("TLS 1.3 (server checked against"),
        "{banner}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_host_name_reaches_the_server() {
    let key = psk();
    let server = start_server("127.0.0.1:0", &["--psk", &key]);
    // Port 0 was replaced by the one bound: read it from the banner.
    let bound = server.banner.split_whitespace().nth(3).unwrap();
    let port = bound.rsplit(':').next().unwrap();
    let out = smt_ok(&[
        "client",
        "--server",
        &format!("localhost:{port}"),
        "--psk",
        &key,
        "--seconds",
        "0.2",
    ]);
    assert!(out.contains(&format!("-> 127.0.0.1:{port}")), "{out}");
}

#[test]
fn the_server_prints_counters_only_when_asked() {
    let key = psk();
    let run = |extra: &[&str]| {
        let mut args = vec!["server", "--listen", "127.0.0.1:0", "--psk", &key];
        args.extend_from_slice(&["--duration", "1.2"]);
        args.extend_from_slice(extra);
        smt_ok(&args)
    };
    let quiet = run(&[]);
    assert_eq!(quiet.lines().count(), 1, "only the banner:\n{quiet}");
    let counting = run(&["--stats-interval", "0.5"]);
    let counters = counting
        .lines()
        .filter(|l| l.starts_with("server: "))
        .count();
    assert_eq!(counters, 2, "{counting}");
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

#[test]
fn json_output_is_one_document() {
    let key = psk();
    let server = start_server(ANY_PORT, &["--psk", &key]);
    let client = json(&smt_ok(&[
        "client",
        "--server",
        &server.addr,
        "--psk",
        &key,
        "--seconds",
        "0.3",
        "--json",
    ]));
    assert_eq!(client["mode"], "psk");
    assert!(client["result"]["rpcs"].as_u64().unwrap() > 0, "{client}");
    assert_eq!(client["result"]["errors"], 0);
    let demo = json(&smt_ok(&[
        "demo",
        "--seconds",
        "0.2",
        "--sizes",
        "64,4096",
        "--json",
    ]));
    let sizes: Vec<u64> = demo["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["size"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, [64, 4096]);
    assert!(
        demo["results"][0]["server"]["retransmits"].is_u64(),
        "{demo}"
    );
    let bench = json(&smt_ok(&["bench-handshake", "--iterations", "1", "--json"]));
    assert_eq!(
        bench["first_response"].as_array().unwrap().len(),
        5,
        "{bench}"
    );
    assert!(bench["cpu_us"]["full_tls_handshake"].as_f64().unwrap() > 0.0);
    for row in bench["first_response"].as_array().unwrap() {
        for field in ["p50_us", "p99_us", "max_us", "mean_us"] {
            assert!(row[field].as_f64().is_some(), "{field} missing: {row}");
        }
    }
}

#[test]
fn help_covers_every_command_and_mode() {
    let top = smt_ok(&["--help"]);
    for command in [
        "demo",
        "server",
        "client",
        "keygen",
        "bench-handshake",
        "ca",
        "cert",
        "ticket",
    ] {
        assert!(
            top.lines().any(|l| l.trim_start().starts_with(command)),
            "{command} missing:\n{top}"
        );
    }
    let server = smt_ok(&["server", "--help"]);
    for words in [
        "TLS 1.3",
        "mutual TLS",
        "--cert",
        "--key",
        "--ca",
        "--psk",
        "--stats-interval",
    ] {
        assert!(server.contains(words), "{words} missing:\n{server}");
    }
    let client = smt_ok(&["client", "--help"]);
    for words in ["TLS 1.3", "--ca", "--psk", "--json", "HOST:PORT"] {
        assert!(client.contains(words), "{words} missing:\n{client}");
    }
}

/// Two raw-IP clients on one host at once: each picks its own random SMT
/// port (they shared 7002 and read each other's responses), and both
/// complete every call.
#[test]
fn raw_ip_clients_keep_to_their_own_ports() {
    let key = psk();
    let addr = free_addr();
    let probe = smt(&[
        "server",
        "--listen",
        &addr,
        "--psk",
        &key,
        "--raw",
        "--duration",
        "0.1",
    ]);
    if probe.code != Some(0) {
        eprintln!("skipped: raw IP unavailable here ({})", probe.stderr.trim());
        return;
    }
    let _server = start_server(&addr, &["--psk", &key, "--raw"]);
    let clients: Vec<_> = (0..2)
        .map(|_| {
            Command::new(BIN)
                .args(["client", "--server", &addr, "--psk", &key, "--raw"])
                .args(["--seconds", "1", "--json"])
                .env_remove("SMT_PSK")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let reports: Vec<Value> = clients
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{stderr}");
            json(&String::from_utf8_lossy(&out.stdout))
        })
        .collect();
    assert_ne!(reports[0]["client"], reports[1]["client"]);
    for r in &reports {
        assert!(!r["client"].as_str().unwrap().ends_with(":7002"), "{r}");
        assert_eq!(r["result"]["errors"], 0, "{r}");
        assert!(r["result"]["rpcs"].as_u64().unwrap() > 10, "{r}");
    }
}
