//! Issue 13, items 3 and 5, from the command line: `smt client --server
//! HOST:PORT` checks the server's certificate against HOST (or
//! `--server-name`), so `smt cert issue --name host.test` works by name;
//! `smt server --ticket-key` serves 0-RTT SMT-tickets (and publishes them
//! in DNS with `--dns-listen`), and `smt client --ticket FILE` or
//! `--ticket-dns NAME` uses them, with or without `--forward-secrecy`.

use crate::common;

use common::{banner_addr, make_pki, smt, smt_ok, start_server, temp_dir, ANY_PORT};
use serde_json::Value;

fn port(addr: &str) -> &str {
    addr.rsplit(':').next().unwrap()
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

#[test]
fn the_client_checks_the_certificate_against_the_name_it_was_given() {
    let dir = temp_dir("by-name");
    // A certificate with DNS names only, as `smt cert issue --name host.test`.
    let pki = make_pki(&dir, &["host.test", "localhost"]);
    let server = start_server(ANY_PORT, &["--cert", &pki.cert, "--key", &pki.key]);
    let call = |server_arg: &str, extra: &[&str]| {
        let mut args = vec!["client", "--server", server_arg, "--ca", &pki.ca_pem];
        args.extend_from_slice(&["--seconds", "0.2", "--json"]);
        args.extend_from_slice(extra);
        smt(&args)
    };
    // By host name: the certificate is checked against "localhost".
    let by_name = call(&format!("localhost:{}", port(&server.addr)), &[]);
    assert_eq!(by_name.code, Some(0), "{}", by_name.stderr);
    assert_eq!(json(&by_name.stdout)["server_name"], "localhost");
    // By address: the certificate does not name 127.0.0.1.
    let by_ip = call(&server.addr, &[]);
    assert_eq!(by_ip.code, Some(1));
    assert!(
        by_ip.stderr.contains("another name") && by_ip.stderr.contains("--server-name"),
        "{}",
        by_ip.stderr
    );
    // By address, naming the server explicitly.
    let named = call(&server.addr, &["--server-name", "host.test"]);
    assert_eq!(named.code, Some(0), "{}", named.stderr);
    assert_eq!(json(&named.stdout)["server_name"], "host.test");
    let wrong = call(&server.addr, &["--server-name", "other.test"]);
    assert_eq!(wrong.code, Some(1), "{}", wrong.stderr);
}

#[test]
fn zero_rtt_tickets_from_a_file_and_from_dns() {
    let dir = temp_dir("tickets");
    let pki = make_pki(&dir, &["host.test"]);
    let ticket = dir.join("tk").to_str().unwrap().to_string();
    smt_ok(&[
        "ticket",
        "issue",
        "--cert",
        &pki.cert,
        "--key",
        &pki.key,
        "--name",
        "host.test",
        "--out",
        &ticket,
    ]);
    let key = format!("{ticket}-static.key");
    let server = start_server(
        ANY_PORT,
        &[
            "--cert",
            &pki.cert,
            "--key",
            &pki.key,
            "--ticket-key",
            &key,
            "--dns-listen",
            ANY_PORT,
        ],
    );
    let dns = banner_addr(&server.banner, "published in DNS on ");
    assert!(
        server.banner.contains("0-RTT SMT-tickets for host.test")
            && server.banner.contains("published in DNS"),
        "{}",
        server.banner
    );
    let base = ["client", "--server", &server.addr, "--ca", &pki.ca_pem];
    let runs: [(&[&str], &str); 3] = [
        (
            &["--server-name", "host.test", "--ticket", &ticket],
            "zero-rtt",
        ),
        (
            &[
                "--ticket-dns",
                "host.test",
                "--dns-server",
                &dns,
                "--forward-secrecy",
            ],
            "zero-rtt-fs",
        ),
        (
            &["--ticket-dns", "host.test", "--dns-server", &dns],
            "zero-rtt",
        ),
    ];
    for (extra, mode) in runs {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--seconds", "0.3", "--json"]);
        let out = json(&smt_ok(&args));
        assert_eq!(out["mode"], mode, "{extra:?}: {out}");
        assert_eq!(out["result"]["errors"], 0, "{extra:?}: {out}");
        assert!(out["result"]["rpcs"].as_u64().unwrap() > 0, "{out}");
        assert_eq!(
            out["stats"]["total"]["handshakes"]["completed"], 1,
            "{extra:?}: {out}"
        );
    }
    // A ticket is for one name: called by address alone, it is refused.
    let no_name = smt(&[
        "client",
        "--server",
        &server.addr,
        "--ca",
        &pki.ca_pem,
        "--ticket",
        &ticket,
    ]);
    assert_eq!(no_name.code, Some(2));
    assert!(
        no_name.stderr.contains("--server-name"),
        "{}",
        no_name.stderr
    );
    // The server alone with its ticket (no TLS) serves 0-RTT too.
    let only = start_server(ANY_PORT, &["--ticket-key", &key, "--ticket", &ticket]);
    let out = json(&smt_ok(&[
        "client",
        "--server",
        &only.addr,
        "--server-name",
        "host.test",
        "--ca",
        &pki.ca_pem,
        "--ticket",
        &ticket,
        "--seconds",
        "0.2",
        "--json",
    ]));
    assert_eq!(out["result"]["errors"], 0, "{out}");
}
